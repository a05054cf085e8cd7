"""What a ``df.write.format("kafkalog")`` job will do, decided once on the driver.

:func:`plan_write` reads the options and the DataFrame's schema, checks them as Spark's
built-in Kafka sink does (``KafkaWriter.validateQuery``: the same columns, types and
messages), looks at the log dir (its topics and their partition counts, their config
overrides, whether a kafkafs daemon holds it) and returns a :class:`WritePlan`: a small
picklable value that every task and the commit work from, so they all agree on each
topic's partition count and configuration.

Options (case-insensitive, as every Spark option):

``path`` (``save(PATH)``)
    the log dir: one local (or shared, on a cluster) directory, created when missing.
``topic``
    the topic of every row; overrides the ``topic`` column, as in Spark's Kafka sink.
``partitions``
    the partition count of a topic this write creates (or replaces, with
    ``mode("overwrite")``); default ``num.partitions``. An existing topic keeps its own.
``config.<key>``
    a topic config override (Kafka's topic config names: ``config.cleanup.policy``,
    ``config.retention.ms``, ...) of a topic this write creates or replaces; for an existing
    topic it must agree with the topic's config (change that with ``kafkafs topics
    --alter``).
``serverConfig``
    a ``server.properties`` for the broker-level defaults (``num.partitions``,
    ``log.segment.bytes``, ...). Beside a running daemon its own configuration counts.
``kafka.batch.size``, ``kafka.compression.type``
    the producer settings of those names (the other ``kafka.*`` options of Spark's sink
    configure a network client and are ignored).
``lockTimeoutMs``
    how long the commit waits for a log dir another writer holds briefly (default 60000).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

from ..core.control import daemon_defaults
from ..log.config import BrokerConfig, LogConfig, validate_topic_overrides
from ..log.errors import InvalidConfigError
from ..log.manager import load_topic_overrides, partition_dirs
from ..log.names import validate_topic
from ..log.staging import new_job_id
from ..record import compression as codecs
from .encode import TopicLayout
from .mountlink import holder_mount, topic_counts

DEFAULT_LOCK_TIMEOUT_MS = 60000


@dataclass(frozen=True)
class TopicPlan:
    """One topic of the write: its ``partitions``, effective ``config``, the ``overrides``
    it gets when this write creates or replaces it, and whether it ``exists``."""

    topic: str
    partitions: int
    config: LogConfig
    overrides: dict
    exists: bool


@dataclass(frozen=True)
class WritePlan:
    """Everything the tasks and the commit of one write share (see the module)."""

    log_dir: str
    job_id: str
    topic: str | None
    overwrite: bool
    default_partitions: int
    partitions_option: int | None
    topic_defaults: LogConfig
    config_overrides: dict
    existing: dict  # topic -> partition count when the job was planned
    existing_overrides: dict  # topic -> its config overrides then
    batch_size: int | None = None
    compression: int | None = None
    server_config: str | None = None
    lock_timeout_ms: int = DEFAULT_LOCK_TIMEOUT_MS
    held_by: str | None = None  # the mount of the daemon holding the log dir when planned
    columns: tuple = field(default_factory=tuple)

    def topic_plan(self, topic: str) -> TopicPlan:
        """The plan of ``topic`` (a topic from the ``topic`` column too). Raises
        InvalidTopicError, InvalidConfigError (``config.*`` options that disagree with an
        existing topic's config, in append mode)."""
        validate_topic(topic)
        count = self.existing.get(topic)
        current = dict(self.existing_overrides.get(topic, {}))
        if count is not None and not self.overwrite:
            config = self.topic_defaults.with_overrides(current)
            _check_agrees(topic, config, self.config_overrides)
            return TopicPlan(topic, count, config, current, True)
        if count is not None:  # replaced: its overrides stay, the options' on top
            overrides = {**current, **self.config_overrides}
            n = self.partitions_option or count
        else:
            overrides = dict(self.config_overrides)
            n = self.default_partitions
        return TopicPlan(topic, n, self.topic_defaults.with_overrides(overrides), overrides,
                         count is not None)

    def layout(self, topic: str) -> TopicLayout:
        """How the tasks encode ``topic`` (:class:`~kafkafs.spark.encode.TopicLayout`):
        the topic's ``compression.type`` (``producer``: ``kafka.compression.type``, else
        uncompressed), ``message.timestamp.type``, ``batch.size`` (``kafka.batch.size``,
        else the topic's ``kafkafs.batch.size``)."""
        tp = self.topic_plan(topic)
        ct = tp.config.compression_type
        if ct == "producer":
            codec = self.compression if self.compression is not None else codecs.NONE
        else:
            codec = codecs.NONE if ct == "none" else codecs.codec_id(ct)
        batch = self.batch_size if self.batch_size is not None else tp.config.kafkafs_batch_size
        return TopicLayout(topic, tp.partitions, codec,
                           tp.config.message_timestamp_type == "LogAppendTime", batch)

    def broker_config(self) -> BrokerConfig:
        """The broker configuration of the commit's own log manager (``serverConfig`` or
        the defaults, with the plan's topic defaults) on the one log dir."""
        config = BrokerConfig.load(self.server_config)
        return replace(config, log=self.topic_defaults).with_log_dirs([self.log_dir])


def _check_agrees(topic: str, config: LogConfig, options: dict) -> None:
    for key, value in options.items():
        wanted = LogConfig().with_overrides({key: value})
        attr = key.replace(".", "_")
        if getattr(wanted, attr) != getattr(config, attr):
            raise InvalidConfigError(
                f"Topic '{topic}' exists with {key}={config.to_properties()[key]}; the option "
                f"config.{key}={value} applies to topics this write creates or replaces "
                f"(change an existing topic's config with kafkafs topics --alter, or through "
                f"MOUNT/{topic}/config)")


def log_dir_of(path) -> str:
    """The log dir a ``save(path)`` names: one local path (``file:`` URIs too). Raises
    ValueError for none, several, or another filesystem's URI."""
    if not path:
        raise ValueError("kafkalog needs the log dir: df.write.format('kafkalog')"
                         ".option('topic', T).save(LOG_DIR)")
    path = str(path)
    if "," in path:
        raise ValueError(f"kafkalog writes into one log dir, not several: {path!r}")
    if path.startswith("file://"):
        path = path[len("file://"):]
    elif path.startswith("file:"):
        path = path[len("file:"):]
    elif "://" in path:
        raise ValueError(f"kafkalog writes into a local (or cluster-shared, mounted) log dir, "
                         f"not {path!r}: a log dir needs renames and file locks")
    return os.path.abspath(os.path.expanduser(path))


def _int_option(options, name: str, lo: int) -> int | None:
    raw = options.get(name)
    if raw is None:
        return None
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ValueError(f"option {name} must be an integer, not {raw!r}") from None
    if value < lo:
        raise ValueError(f"option {name} must be at least {lo}, not {value}")
    return value


def check_schema(schema, topic_option: str | None) -> tuple[str, ...]:
    """Check the DataFrame's columns as Spark's ``KafkaWriter.validateQuery`` does, with its
    messages; returns the names of the Kafka sink columns present. Raises ValueError."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        DoubleType,
        IntegerType,
        StringType,
        StructType,
        TimestampType,
    )

    fields = {f.name: f.dataType for f in schema.fields}

    def check(name, allowed, label):
        t = fields.get(name)
        if t is not None and not any(isinstance(t, a) for a in allowed):
            raise ValueError(f"{name} attribute unsupported type {t.simpleString()}. {name} "
                             f"must be a(n) {label}")

    if topic_option is None:
        if "topic" not in fields:
            raise ValueError("topic option required when no 'topic' attribute is present. "
                             "Use the topic option for setting a topic.")
        check("topic", (StringType,), "string")
    check("key", (StringType, BinaryType), "string or binary")
    if "value" not in fields:
        raise ValueError("Required attribute 'value' not found")
    check("value", (StringType, BinaryType), "string or binary")
    check("partition", (IntegerType,), "int")
    check("timestamp", (DoubleType, TimestampType), "double or timestamp")
    headers = fields.get("headers")
    if headers is not None:
        el = headers.elementType if isinstance(headers, ArrayType) else None
        ok = isinstance(el, StructType) and [f.name for f in el.fields] == ["key", "value"] \
            and isinstance(el.fields[0].dataType, StringType) \
            and isinstance(el.fields[1].dataType, BinaryType)
        if not ok:
            raise ValueError(f"headers attribute unsupported type {headers.simpleString()}. "
                             "headers must be a(n) array<struct<key:string,value:binary>>")
    wanted = ("key", "value", "headers", "partition", "timestamp") + \
        (() if topic_option is not None else ("topic",))
    return tuple(n for n in wanted if n in fields)


def plan_write(options, schema, overwrite: bool) -> WritePlan:
    """Plan a write (see the module). Raises ValueError (options, columns), InvalidTopicError,
    InvalidConfigError, OSError (the log dir cannot be made or read)."""
    log_dir = log_dir_of(options.get("path"))
    topic = options.get("topic")
    if topic is not None:
        topic = validate_topic(str(topic))
    columns = check_schema(schema, topic)
    partitions = _int_option(options, "partitions", 1)
    batch_size = _int_option(options, "kafka.batch.size", 0)
    lock_timeout = _int_option(options, "lockTimeoutMs", 0)
    compression = None
    if options.get("kafka.compression.type") is not None:
        name = str(options["kafka.compression.type"]).strip().lower()
        if name not in codecs.CODEC_IDS:
            raise ValueError(f"kafka.compression.type must be one of "
                             f"{', '.join(codecs.CODEC_IDS)}, not {name!r}")
        compression = codecs.CODEC_IDS[name]
    overrides = validate_topic_overrides(
        {k[len("config."):]: str(v) for k, v in options.items() if k.startswith("config.")})
    server_config = options.get("serverConfig")
    lock_timeout_ms = DEFAULT_LOCK_TIMEOUT_MS if lock_timeout is None else lock_timeout
    os.makedirs(log_dir, exist_ok=True)
    # who will take the rows: refused now, before any task stages a byte, when it is a
    # process no kafkafs mount speaks for (the commit looks again)
    mount = holder_mount(log_dir, lock_timeout_ms / 1000)
    told = daemon_defaults(mount) if mount else None
    if told is not None:
        num_partitions, defaults = told
    else:
        broker = BrokerConfig.load(server_config)
        num_partitions, defaults = broker.num_partitions, broker.log
    existing: dict[str, int] = {}
    if mount is not None:  # the daemon's topics may spread over several log dirs
        existing = topic_counts(mount)
    else:
        for (t, p), _path in partition_dirs(log_dir):
            existing[t] = max(existing.get(t, 0), p + 1)
    plan = WritePlan(
        log_dir=log_dir, job_id=new_job_id(), topic=topic, overwrite=bool(overwrite),
        default_partitions=partitions or num_partitions, partitions_option=partitions,
        topic_defaults=defaults, config_overrides=overrides, existing=existing,
        existing_overrides=load_topic_overrides([log_dir]), batch_size=batch_size,
        compression=compression, server_config=server_config,
        lock_timeout_ms=lock_timeout_ms,
        held_by=mount, columns=columns)
    if topic is not None:
        plan.layout(topic)  # a bad topic or disagreeing config.* fails before any task runs
    return plan
