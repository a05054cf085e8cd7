"""``df.write.format("kafkalog")``: bulk-load a DataFrame into a topic of a log dir.

The input columns are those of Spark's built-in Kafka sink: ``value`` (binary or string,
required), ``key`` (binary or string), ``headers`` (``array<struct<key: string, value:
binary>>``), ``topic`` (string; the ``topic`` option overrides it), ``partition`` (int),
``timestamp`` (timestamp, or double seconds). Options: :mod:`kafkafs.spark.write_plan`.

How the job runs:

1. on the driver, :class:`KafkaLogWriter` plans it (:func:`~kafkafs.spark.write_plan.plan_write`):
   options and columns checked, each topic's partition count and config fixed;
2. each task (:meth:`KafkaLogWriter.write`, an Arrow writer) partitions and encodes its rows
   as a Java producer would and appends them to staged logs of its own, out of sight
   (:mod:`kafkafs.spark.stage`);
3. on the driver, :meth:`~KafkaLogWriter.commit` publishes the staged runs -- itself, or
   through the kafkafs daemon holding the log dir -- and :meth:`~KafkaLogWriter.abort`
   removes them (:mod:`kafkafs.spark.publish`).

Modes: ``append`` (default) and ``overwrite`` (the topic's data is replaced).
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSourceArrowWriter

from .write_plan import plan_write


class KafkaLogWriter(DataSourceArrowWriter):
    """The ``kafkalog`` batch writer. ``options``: the write's options (``path`` is the log
    dir); ``schema``: the DataFrame's; ``overwrite``: ``mode("overwrite")``. Raises
    ValueError, InvalidTopicError, InvalidConfigError for a write that cannot be done, before
    any task runs."""

    def __init__(self, options, schema, overwrite: bool):
        self.plan = plan_write(options, schema, overwrite)

    def write(self, iterator):
        """Stage this task's rows (``iterator``: Arrow record batches); the commit message."""
        from .stage import stage_task

        return stage_task(self.plan, iterator)

    def commit(self, messages) -> None:
        from .publish import publish

        publish(self.plan, messages)

    def abort(self, messages) -> None:
        from .publish import discard

        discard(self.plan, messages)
