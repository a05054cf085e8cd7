"""kafkafs on Spark: the ``kafkalog`` data source (DESIGN §6).

``register(spark)`` registers :class:`~kafkafs.spark.source.KafkaLogDataSource` under the
name ``kafkalog``; then ``spark.read.format("kafkalog")`` / ``spark.readStream`` read
Kafka-format log dirs and ``df.write.format("kafkalog")`` bulk-loads a topic into one.

Needs the ``[spark]`` extra (pyspark, pyarrow, pandas) and a JDK. The log and record layers
never import this package.
"""

from __future__ import annotations

import os
import sys

SOURCE_NAME = "kafkalog"


def register(spark) -> None:
    """Register the ``kafkalog`` data source with ``spark`` (a ``SparkSession``).

    Idempotent. Raises ImportError without pyspark.
    """
    from .source import KafkaLogDataSource

    spark.dataSource.register(KafkaLogDataSource)


def session(master: str, app_name: str, conf: dict | None = None):
    """A ``SparkSession`` (``getOrCreate``) on ``master`` with ``kafkalog`` registered, as
    ``kafkafs pipeline`` and the test suite want it: executors run this interpreter
    (``PYSPARK_PYTHON``, unless set), the driver's and executors' log4j logs errors only
    (``log4j2.properties`` beside this module; Spark's progress bar stays), session time
    zone UTC, Arrow for pandas conversions; ``conf`` adds or overrides Spark settings.
    Raises ImportError without pyspark."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    quiet = "-Dlog4j2.configurationFile=file:" + os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")
    settings = {"spark.driver.extraJavaOptions": quiet,
                "spark.executor.extraJavaOptions": quiet,
                "spark.sql.session.timeZone": "UTC",
                "spark.sql.execution.arrow.pyspark.enabled": "true", **(conf or {})}
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark
