"""kafkafs on Spark: the ``kafkalog`` data source (DESIGN §6).

``register(spark)`` registers :class:`~kafkafs.spark.source.KafkaLogDataSource` under the
name ``kafkalog``; then ``spark.read.format("kafkalog")`` / ``spark.readStream`` read
Kafka-format log dirs and ``df.write.format("kafkalog")`` bulk-loads a topic into one.

Needs the ``[spark]`` extra (pyspark, pyarrow, pandas) and a JDK. The log and record layers
never import this package.
"""

from __future__ import annotations

SOURCE_NAME = "kafkalog"


def register(spark) -> None:
    """Register the ``kafkalog`` data source with ``spark`` (a ``SparkSession``).

    Idempotent. Raises ImportError without pyspark.
    """
    from .source import KafkaLogDataSource

    spark.dataSource.register(KafkaLogDataSource)
