"""``spark.read.format("kafkalog")``: the batch reader of the ``kafkalog`` source.

:class:`KafkaLogReader` parses and checks the options when Spark creates it (at the first
action on the DataFrame; errors surface there as Spark's ``PYTHON_DATA_SOURCE_ERROR``
naming the Python exception), plans the input partitions on the driver
(:func:`kafkafs.spark.plan.plan_read`: Spark's Kafka source's offset ranges, cut at segment
boundaries and narrowed through the index files, packed into tasks of at most
``maxPartitionBytes``) and reads each on an executor (:func:`kafkafs.spark.columns.read_slices`:
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
        """The :class:`~kafkafs.spark.plan.ReadTask` input partitions, one per task (at
        least one: Spark wants one even for an empty read)."""
        from pyspark.sql.datasource import InputPartition

        from .plan import group_tasks, plan_read

        tasks = group_tasks(plan_read(self.options))
        return tasks or [InputPartition(None)]

    def read(self, partition):
        """The records of one input partition, as ``pyarrow.RecordBatch`` es."""
        return read_partition(partition)


def read_partition(partition):
    """The ``pyarrow.RecordBatch`` es of an input partition of the batch or stream reader: a
    :class:`~kafkafs.spark.plan.ReadTask` (its slices in order), a single
    :class:`~kafkafs.spark.plan.SegmentSlice`, or the placeholder of an empty read."""
    from .columns import read_slices
    from .plan import ReadTask, SegmentSlice

    if isinstance(partition, ReadTask):
        return read_slices(partition.slices)
    if isinstance(partition, SegmentSlice):
        return read_slices([partition])
    return iter(())
