"""The ``kafkalog`` Python data source: schema and the entry points Spark calls.

The schema is that of Spark's built-in Kafka source (``KafkaRecordToRowConverter``):
``key`` binary, ``value`` binary, ``topic`` string, ``partition`` int, ``offset`` long,
``timestamp`` timestamp, ``timestampType`` int, and ``headers``
``array<struct<key: string, value: binary>>`` when the option ``includeHeaders`` is true.
The reader, stream reader and writer live in their own modules, imported when Spark asks
for them (everything here is pickled to executors).
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource

from .source_name import SOURCE_NAME

BASE_SCHEMA = ("key binary, value binary, topic string, partition int, offset long, "
               "timestamp timestamp, timestampType int")
HEADERS_SCHEMA = BASE_SCHEMA + ", headers array<struct<key: string, value: binary>>"


def include_headers(options) -> bool:
    """The ``includeHeaders`` option (default false), as Spark parses a boolean option.

    Raises ValueError for a value that is not true/false."""
    value = str(options.get("includeHeaders", "false")).strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"includeHeaders must be true or false, not {value!r}")
    return value == "true"


class KafkaLogDataSource(DataSource):
    """``spark.read/readStream.format("kafkalog")`` and ``df.write.format("kafkalog")``.

    ``self.options``: Spark's (case-insensitive) option map; the path given to ``load``/
    ``save`` arrives as ``path``.
    """

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self):
        """The schema (see the module), after the option checks Spark's Kafka source makes at
        ``load()`` (:func:`~kafkafs.spark.options.validate_at_load`: PySpark calls this when
        ``load()`` runs). Raises :class:`~kafkafs.spark.options.OptionError`."""
        from .options import validate_at_load

        validate_at_load(self.options)
        return HEADERS_SCHEMA if include_headers(self.options) else BASE_SCHEMA

    def reader(self, schema):
        from .reader import KafkaLogReader

        return KafkaLogReader(self.options, schema)

    def streamReader(self, schema):
        from .stream import KafkaLogStreamReader

        return KafkaLogStreamReader(self.options, schema)

    def writer(self, schema, overwrite: bool):
        from .writer import KafkaLogWriter

        return KafkaLogWriter(self.options, schema, overwrite)
