"""``spark.read.format("kafkalog")``: the batch reader of the ``kafkalog`` source.

:class:`KafkaLogReader` parses and checks the options when Spark creates it (at the first
action on the DataFrame; errors surface there as Spark's ``PYTHON_DATA_SOURCE_ERROR``
naming the Python exception), plans the input partitions on the driver
(:func:`kafkafs.spark.plan.plan_read`: one per segment the offsets touch, narrowed through
the index files) and reads each on an executor (:func:`kafkafs.spark.columns.read_slice`:
Arrow record batches built from the segment bytes).

No ``pushFilters``: PySpark 4.3.0 keeps pushed filters on the data source object and
applies them to later scans of the same DataFrame (``df.where("offset = 9").count()`` then
``df.count()`` counted 1). Narrow a read with ``startingOffsets`` / ``endingOffsets`` /
``startingTimestamp`` / ``endingTimestamp`` (per partition as JSON where needed): those are
resolved through the ``.index`` / ``.timeindex`` files and only the byte ranges they need
are read.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSourceReader

from .options import parse_options

__all__ = ["KafkaLogReader"]


class KafkaLogReader(DataSourceReader):
    """The batch reader. ``options``: Spark's option map (``path`` included); ``schema``:
    the source's schema (Spark's Kafka source schema, with ``headers`` when
    ``includeHeaders`` is true). Raises ValueError for bad options (Spark's messages)."""

    def __init__(self, options, schema):
        self.options = parse_options(options)
        self.schema = schema

    def partitions(self):
        """The :class:`~kafkafs.spark.plan.SegmentSlice` input partitions (at least one:
        Spark wants one even for an empty read)."""
        from pyspark.sql.datasource import InputPartition

        from .plan import plan_read

        slices = plan_read(self.options)
        return slices or [InputPartition(None)]

    def read(self, partition):
        """The records of one input partition, as ``pyarrow.RecordBatch`` es."""
        from .columns import read_slice
        from .plan import SegmentSlice

        if not isinstance(partition, SegmentSlice):
            return iter(())  # the placeholder of an empty read
        return read_slice(partition)
