"""Configuration with Kafka's own names and defaults.

Broker keys come from ``server.properties`` (``KafkaConfig``/``ServerLogConfigs``); topic keys
are Kafka's topic configs (``TopicConfig``/``LogConfig``). A topic's effective config is its
overrides over the broker's values, mapped by Kafka's synonyms
(``ServerTopicConfigSynonyms``): ``log.segment.bytes`` → ``segment.bytes`` and so on.

Times are ms, sizes bytes. ``LONG_MAX`` (2^63 − 1) means "never", as in Kafka.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from .errors import InvalidConfigError
from .properties import format_properties, parse_properties

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1
DOUBLE_MAX = 1.7976931348623157e308  # Java's Double.MAX_VALUE: "no limit"

_HOUR = 3600 * 1000
_MINUTE = 60 * 1000


class _Rule(ValueError):
    """A value broke its key's rule; the message is the rule in Kafka's words (ConfigDef).
    ``value``: the part of the value that broke it (a list element), else None."""

    def __init__(self, rule: str, value: str | None = None):
        super().__init__(rule)
        self.value = value


_INTEGER = re.compile(r"[+-]?[0-9]+\Z")
_TYPE_BOUNDS = {"INT": 1 << 31, "LONG": 1 << 63}


def _number(kind: str, lo: int | None = None):
    """A parser for Kafka's ConfigDef type ``kind`` (``INT``: 32 bits, ``LONG``: 64 bits,
    as Java's ``Integer.parseInt``/``Long.parseLong`` read them) with ``atLeast(lo)``."""
    bound = _TYPE_BOUNDS[kind]

    def parse(value: str) -> int:
        v = value.strip()
        if not _INTEGER.match(v) or not -bound <= int(v) < bound:
            raise _Rule(f"Not a number of type {kind}")
        n = int(v)
        if lo is not None and n < lo:
            raise _Rule(f"Value must be at least {lo}")
        return n
    parse.kafka_type = kind
    return parse


def _double(lo: float | None = None, hi: float | None = None, *,
            above: float | None = None):
    """ConfigDef ``DOUBLE`` as Java's ``Double.parseDouble`` reads it (NaN refused), with
    ``between(lo, hi)`` when given; ``above``: a lower bound the value must exceed
    (kafkafs's own, on keys Kafka leaves unchecked where another value would stall or
    break the cleaner)."""
    def parse(value: str) -> float:
        v = value.strip()
        try:
            if "_" in v:
                raise ValueError(v)
            f = float(v)
        except ValueError:
            raise _Rule("Not a number of type DOUBLE") from None
        if math.isnan(f):
            raise _Rule("Not a number of type DOUBLE")
        if lo is not None and f < lo:
            raise _Rule(f"Value must be at least {lo:g}")
        if above is not None and f <= above:
            raise _Rule(f"Value must be above {above:g}")
        if hi is not None and f > hi:
            raise _Rule(f"Value must be no more than {hi:g}")
        return f
    return parse


def _double_between(lo: int, hi: int):
    """ConfigDef ``DOUBLE`` with ``between(lo, hi)``."""
    return _double(lo, hi)


def _parse_bool(value: str) -> bool:
    """ConfigDef ``BOOLEAN``: true or false, any case."""
    v = value.strip().lower()
    if v in ("true", "false"):
        return v == "true"
    raise _Rule("Expected value to be either true or false")


def _one_of(*names: str, aliases: Mapping[str, str] | None = None, fold_case: bool = False):
    """ConfigDef ``STRING`` with ``ValidString.in(names)`` (``aliases``: other spellings
    kafkafs accepts and what they stand for)."""
    rule = "String must be one of: " + ", ".join(names)
    accepted = {n.lower() if fold_case else n: n for n in names}
    for alias, meaning in (aliases or {}).items():
        accepted[alias] = meaning

    def parse(value: str) -> str:
        v = value.strip()
        found = accepted.get(v.lower() if fold_case else v)
        if found is None:
            raise _Rule(rule)
        return found
    return parse


def _policy(value: str) -> str:
    """``cleanup.policy``: ConfigDef ``LIST`` with ``ValidList.in("compact", "delete")``."""
    parts = [p.strip() for p in value.split(",")]
    for p in parts:
        if p not in ("delete", "compact"):
            raise _Rule("String must be one of: compact, delete", p)
    return ",".join(parts)


# Kafka's BrokerCompressionType names; kafkafs keeps uncompressed as "none" (the codec's
# name, what Log reads) and accepts that spelling too
_compression = _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer",
                       aliases={"uncompressed": "none", "none": "none"}, fold_case=True)
_ts_type = _one_of("CreateTime", "LogAppendTime")
_INT = _number("INT")
_LONG = _number("LONG")


def _int_at_least(lo: int):
    return _number("INT", lo)


def _long_at_least(lo: int):
    return _number("LONG", lo)


# topic config name -> (attribute, parser, default); types and validators are those of
# Kafka's LogConfig (INT/LONG, atLeast, between, ValidString, ValidList)
_TOPIC_KEYS: dict[str, tuple[str, object, object]] = {
    "segment.bytes": ("segment_bytes", _int_at_least(14), 1024 * 1024 * 1024),
    "segment.ms": ("segment_ms", _long_at_least(1), 7 * 24 * _HOUR),
    "segment.jitter.ms": ("segment_jitter_ms", _long_at_least(0), 0),
    "segment.index.bytes": ("segment_index_bytes", _int_at_least(4), 10 * 1024 * 1024),
    "index.interval.bytes": ("index_interval_bytes", _int_at_least(0), 4096),
    "retention.ms": ("retention_ms", _long_at_least(-1), 7 * 24 * _HOUR),
    "retention.bytes": ("retention_bytes", _LONG, -1),
    "flush.messages": ("flush_messages", _long_at_least(1), LONG_MAX),
    "flush.ms": ("flush_ms", _long_at_least(0), LONG_MAX),
    "file.delete.delay.ms": ("file_delete_delay_ms", _long_at_least(0), 60000),
    "max.message.bytes": ("max_message_bytes", _int_at_least(0), 1024 * 1024 + 12),
    "message.timestamp.type": ("message_timestamp_type", _ts_type, "CreateTime"),
    "message.timestamp.before.max.ms": ("message_timestamp_before_max_ms", _long_at_least(0),
                                        LONG_MAX),
    "message.timestamp.after.max.ms": ("message_timestamp_after_max_ms", _long_at_least(0),
                                       _HOUR),
    "compression.type": ("compression_type", _compression, "producer"),
    "cleanup.policy": ("cleanup_policy", _policy, "delete"),
    "delete.retention.ms": ("delete_retention_ms", _long_at_least(0), 24 * _HOUR),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", _long_at_least(0), 0),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", _long_at_least(1), LONG_MAX),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", _double_between(0, 1), 0.5),
    "preallocate": ("preallocate", _parse_bool, False),
    # kafkafs's own (a broker has no such topic config): the producer's batch.size
    # (ProducerConfig: INT, atLeast(0)) for writers that give none, the mount's append
    # and kafkafs produce
    "kafkafs.batch.size": ("kafkafs_batch_size", _int_at_least(0), 16384),
}

# broker key -> topic key (ServerTopicConfigSynonyms); several broker keys may feed one
# topic key, the first one set wins (e.g. log.retention.ms over .minutes over .hours). A
# broker key in another unit has a type of its own (KafkaConfig: INT hours and minutes).
_UNIT_KEYS = {
    "log.roll.hours": _int_at_least(1),
    "log.roll.jitter.hours": _int_at_least(0),
    "log.retention.minutes": _INT,
    "log.retention.hours": _INT,
}
_SYNONYMS: list[tuple[str, str, int]] = [
    ("log.segment.bytes", "segment.bytes", 1),
    ("log.roll.ms", "segment.ms", 1),
    ("log.roll.hours", "segment.ms", _HOUR),
    ("log.roll.jitter.ms", "segment.jitter.ms", 1),
    ("log.roll.jitter.hours", "segment.jitter.ms", _HOUR),
    ("log.index.size.max.bytes", "segment.index.bytes", 1),
    ("log.index.interval.bytes", "index.interval.bytes", 1),
    ("log.retention.ms", "retention.ms", 1),
    ("log.retention.minutes", "retention.ms", _MINUTE),
    ("log.retention.hours", "retention.ms", _HOUR),
    ("log.retention.bytes", "retention.bytes", 1),
    ("log.flush.interval.messages", "flush.messages", 1),
    ("log.flush.interval.ms", "flush.ms", 1),
    ("log.segment.delete.delay.ms", "file.delete.delay.ms", 1),
    ("message.max.bytes", "max.message.bytes", 1),
    ("log.message.timestamp.type", "message.timestamp.type", 1),
    ("log.message.timestamp.before.max.ms", "message.timestamp.before.max.ms", 1),
    ("log.message.timestamp.after.max.ms", "message.timestamp.after.max.ms", 1),
    ("compression.type", "compression.type", 1),
    ("log.cleanup.policy", "cleanup.policy", 1),
    ("log.cleaner.delete.retention.ms", "delete.retention.ms", 1),
    ("log.cleaner.min.compaction.lag.ms", "min.compaction.lag.ms", 1),
    ("log.cleaner.max.compaction.lag.ms", "max.compaction.lag.ms", 1),
    ("log.cleaner.min.cleanable.ratio", "min.cleanable.dirty.ratio", 1),
    ("log.preallocate", "preallocate", 1),
    ("kafkafs.batch.size", "kafkafs.batch.size", 1),
]

# broker-only keys: name -> (attribute, parser, default)
_BROKER_KEYS: dict[str, tuple[str, object, object]] = {
    "log.dirs": ("log_dirs", str, None),
    "log.dir": ("log_dir", str, "/tmp/kafka-logs"),
    "num.partitions": ("num_partitions", _int_at_least(1), 1),
    "log.retention.check.interval.ms": ("log_retention_check_interval_ms", _long_at_least(1),
                                        300000),
    "log.flush.scheduler.interval.ms": ("log_flush_scheduler_interval_ms", _long_at_least(0),
                                        LONG_MAX),
    "log.flush.offset.checkpoint.interval.ms": ("log_flush_offset_checkpoint_interval_ms",
                                                _int_at_least(0), 60000),
    "log.flush.start.offset.checkpoint.interval.ms": (
        "log_flush_start_offset_checkpoint_interval_ms", _int_at_least(0), 60000),
    # INT in Kafka (TransactionLogConfig); kafkafs has always taken a long here, so that a
    # log dir of old records can be opened with producer ids that never expire
    "producer.id.expiration.ms": ("producer_id_expiration_ms", _long_at_least(1), 86400000),
    "producer.id.expiration.check.interval.ms": ("producer_id_expiration_check_interval_ms",
                                                 _long_at_least(1), 600000),
    "log.cleaner.enable": ("log_cleaner_enable", _parse_bool, True),
    "log.cleaner.backoff.ms": ("log_cleaner_backoff_ms", _long_at_least(0), 15000),
    "log.cleaner.dedupe.buffer.size": ("log_cleaner_dedupe_buffer_size", _long_at_least(0),
                                       128 * 1024 * 1024),
    "log.cleaner.threads": ("log_cleaner_threads", _int_at_least(0), 1),
    "log.cleaner.io.buffer.size": ("log_cleaner_io_buffer_size", _int_at_least(0), 512 * 1024),
    "log.cleaner.io.buffer.load.factor": ("log_cleaner_io_buffer_load_factor",
                                          _double(hi=1.0, above=0.0), 0.9),
    "log.cleaner.io.max.bytes.per.second": ("log_cleaner_io_max_bytes_per_second",
                                            _double(above=0.0), DOUBLE_MAX),
    "num.recovery.threads.per.data.dir": ("num_recovery_threads_per_data_dir", _int_at_least(1), 1),
    "auto.create.topics.enable": ("auto_create_topics_enable", _parse_bool, True),
    "node.id": ("node_id", _INT, -1),
    "broker.id": ("broker_id", _INT, -1),
    # the network listener (kafkafs.net; SocketServerConfigs, GroupCoordinatorConfig, ...)
    # ("": not given; kafkafs serve then listens on PLAINTEXT://127.0.0.1:9092, a mount not)
    "listeners": ("listeners", str, ""),
    "advertised.listeners": ("advertised_listeners", str, ""),
    "socket.request.max.bytes": ("socket_request_max_bytes", _int_at_least(1), 104857600),
    "queued.max.requests": ("queued_max_requests", _int_at_least(1), 500),
    "num.io.threads": ("num_io_threads", _int_at_least(1), 1),
    "connections.max.idle.ms": ("connections_max_idle_ms", _LONG, 600000),
    "fetch.max.bytes": ("fetch_max_bytes", _int_at_least(0), 57671680),
    "max.incremental.fetch.session.cache.slots": (
        "max_incremental_fetch_session_cache_slots", _int_at_least(0), 1000),
    "offsets.topic.num.partitions": ("offsets_topic_num_partitions", _int_at_least(1), 50),
    "transaction.state.log.num.partitions": ("transaction_state_log_num_partitions",
                                             _int_at_least(1), 50),
    "transaction.max.timeout.ms": ("transaction_max_timeout_ms", _int_at_least(1), 900000),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (
        "transaction_abort_timed_out_transaction_cleanup_interval_ms", _int_at_least(1), 10000),
    "transactional.id.expiration.ms": ("transactional_id_expiration_ms", _int_at_least(1),
                                       604800000),
    "transactions.remove.expired.transaction.cleanup.interval.ms": (
        "transactions_remove_expired_transaction_cleanup_interval_ms", _int_at_least(1),
        3600000),
    "group.initial.rebalance.delay.ms": ("group_initial_rebalance_delay_ms", _int_at_least(0),
                                         3000),
    "group.min.session.timeout.ms": ("group_min_session_timeout_ms", _INT, 6000),
    "group.max.session.timeout.ms": ("group_max_session_timeout_ms", _INT, 1800000),
    "group.max.size": ("group_max_size", _int_at_least(1), 2147483647),
    "offsets.retention.minutes": ("offsets_retention_minutes", _int_at_least(1), 10080),
    # kafkafs's own (not Kafka's): the descriptor budget (kafkafs.log.handles) and the
    # largest partition count a topic may be given
    "kafkafs.max.open.files": ("kafkafs_max_open_files", _int_at_least(1), 1000),
    "kafkafs.max.partitions.per.topic": ("kafkafs_max_partitions_per_topic",
                                         _int_at_least(1), 10000),
    # the memory the mount's caches (rendered view text, decoded batches) may hold together
    "kafkafs.cache.max.bytes": ("kafkafs_cache_max_bytes", _int_at_least(1024 * 1024),
                                128 * 1024 * 1024),
}

# kafkafs's own keys (not Kafka's): read by the CLI and the systemd unit
_KAFKAFS_KEYS = ("kafkafs.mount.point", "kafkafs.mount.options")


@dataclass(frozen=True)
class LogConfig:
    """Effective configuration of one partition's log (Kafka ``LogConfig``).

    Attribute names are the topic config names with ``_`` for ``.``; see ``TOPIC_KEYS``.
    """

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * _HOUR
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * _HOUR
    retention_bytes: int = -1
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    file_delete_delay_ms: int = 60000
    max_message_bytes: int = 1024 * 1024 + 12
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = _HOUR
    compression_type: str = "producer"
    cleanup_policy: str = "delete"
    delete_retention_ms: int = 24 * _HOUR
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    preallocate: bool = False
    kafkafs_batch_size: int = 16384

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")

    def with_overrides(self, overrides: Mapping[str, str]) -> LogConfig:
        """Return a copy with topic-config ``overrides`` (name → string value) applied.

        Raises InvalidConfigError naming the key for an unknown key or a bad value.
        """
        changes = {}
        for key, raw in overrides.items():
            attr, parse = _topic_key(key)
            changes[attr] = _parse(key, parse, raw)
        return replace(self, **changes)

    def to_properties(self) -> dict[str, str]:
        """Every topic config as ``name -> string`` in Kafka's spelling."""
        out = {}
        for key, (attr, _p, _d) in _TOPIC_KEYS.items():
            value = getattr(self, attr)
            out[key] = str(value).lower() if isinstance(value, bool) else str(value)
        return out


TOPIC_KEYS = tuple(_TOPIC_KEYS)


def _topic_key(key: str):
    try:
        attr, parse, _default = _TOPIC_KEYS[key]
    except KeyError:
        raise InvalidConfigError(f"Unknown topic config name: {key}") from None
    return attr, parse


def _parse(key: str, parse, raw: str):
    """``parse(raw)``; a bad value raises InvalidConfigError in Kafka's ConfigException
    words: ``Invalid value banana for configuration retention.ms: Not a number of type
    LONG``."""
    try:
        return parse(str(raw))
    except _Rule as exc:
        shown = raw if exc.value is None else exc.value
        raise InvalidConfigError(f"Invalid value {shown} for configuration {key}: {exc}") from None


def check_topic_config(key: str, value: str) -> None:
    """Check one topic config ``key=value`` (a line written to a topic's ``config`` file,
    a ``--config`` of ``kafkafs topics``). Raises InvalidConfigError: ``Unknown topic config
    name: KEY``, or ``Invalid value VALUE for configuration KEY: RULE`` (Kafka's
    ConfigException)."""
    _attr, parse = _topic_key(key)
    _parse(key, parse, value)


def validate_topic_overrides(overrides: Mapping[str, str]) -> dict[str, str]:
    """Check topic-config overrides; return them normalised (stripped strings).

    Raises InvalidConfigError for an unknown name or a bad value.
    """
    LogConfig().with_overrides(overrides)
    return {k: str(v).strip() for k, v in overrides.items()}


@dataclass(frozen=True)
class BrokerConfig:
    """Broker-level configuration (a ``server.properties``).

    ``log`` holds the broker-wide defaults for every topic; the rest are broker-only keys.
    ``extra`` keeps keys kafkafs does not use (a broker's file has many), so nothing is lost.
    """

    log: LogConfig = field(default_factory=LogConfig)
    log_dirs: tuple[str, ...] = ("/tmp/kafka-logs",)
    num_partitions: int = 1
    log_retention_check_interval_ms: int = 300000
    log_flush_scheduler_interval_ms: int = LONG_MAX
    log_flush_offset_checkpoint_interval_ms: int = 60000
    log_flush_start_offset_checkpoint_interval_ms: int = 60000
    producer_id_expiration_ms: int = 86400000
    producer_id_expiration_check_interval_ms: int = 600000
    log_cleaner_enable: bool = True
    log_cleaner_backoff_ms: int = 15000
    log_cleaner_dedupe_buffer_size: int = 128 * 1024 * 1024
    log_cleaner_threads: int = 1
    log_cleaner_io_buffer_size: int = 512 * 1024
    log_cleaner_io_buffer_load_factor: float = 0.9
    log_cleaner_io_max_bytes_per_second: float = DOUBLE_MAX
    num_recovery_threads_per_data_dir: int = 1
    auto_create_topics_enable: bool = True
    node_id: int = -1
    listeners: str = ""
    advertised_listeners: str = ""
    socket_request_max_bytes: int = 104857600
    queued_max_requests: int = 500
    num_io_threads: int = 1
    connections_max_idle_ms: int = 600000
    fetch_max_bytes: int = 57671680
    max_incremental_fetch_session_cache_slots: int = 1000
    offsets_topic_num_partitions: int = 50
    transaction_state_log_num_partitions: int = 50
    transaction_max_timeout_ms: int = 900000
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10000
    transactional_id_expiration_ms: int = 604800000
    transactions_remove_expired_transaction_cleanup_interval_ms: int = 3600000
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_max_size: int = 2147483647
    offsets_retention_minutes: int = 10080
    kafkafs_max_open_files: int = 1000
    kafkafs_max_partitions_per_topic: int = 10000
    kafkafs_cache_max_bytes: int = 128 * 1024 * 1024
    mount_point: str | None = None
    mount_options: tuple[str, ...] = ()
    extra: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> BrokerConfig:
        """Build from ``server.properties`` key/values (strings). Raises InvalidConfigError."""
        topic_values: dict[str, str] = {}
        seen_topic_keys: set[str] = set()
        for bkey, tkey, unit in _SYNONYMS:
            if bkey in props and tkey not in seen_topic_keys:
                raw = str(props[bkey]).strip()
                if tkey == "flush.ms" and raw == "":
                    continue
                if unit != 1:
                    n = _parse(bkey, _UNIT_KEYS[bkey], props[bkey])
                    raw = str(-1 if n < 0 else n * unit)  # -1 hours/minutes: forever
                else:  # the broker key has its topic key's type and rule
                    _parse(bkey, _TOPIC_KEYS[tkey][1], props[bkey])
                topic_values[tkey] = raw
                seen_topic_keys.add(tkey)
        if "flush.ms" not in topic_values and "log.flush.scheduler.interval.ms" in props:
            topic_values["flush.ms"] = str(props["log.flush.scheduler.interval.ms"]).strip()
        log = LogConfig().with_overrides(topic_values)
        kwargs = {}
        for bkey, (attr, parse, _default) in _BROKER_KEYS.items():
            if bkey in props:
                kwargs[attr] = _parse(bkey, parse, props[bkey])
        threads = kwargs.get("log_cleaner_threads", 1)
        dedupe = kwargs.get("log_cleaner_dedupe_buffer_size", 128 * 1024 * 1024)
        if threads > 0 and dedupe // threads <= 1024 * 1024:
            # KafkaConfig.validateValues
            raise InvalidConfigError(
                "log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread.")
        dirs_raw = kwargs.pop("log_dirs", None) or kwargs.pop("log_dir", None) or "/tmp/kafka-logs"
        kwargs.pop("log_dir", None)
        node_id = kwargs.pop("node_id", -1)
        broker_id = kwargs.pop("broker_id", -1)
        known = set(_BROKER_KEYS) | {b for b, _t, _u in _SYNONYMS} | set(_KAFKAFS_KEYS)
        options = props.get("kafkafs.mount.options", "")
        return cls(
            log=log,
            log_dirs=parse_log_dirs(dirs_raw),
            node_id=node_id if node_id >= 0 else broker_id,
            mount_point=(props.get("kafkafs.mount.point") or "").strip() or None,
            mount_options=tuple(o.strip() for o in options.split(",") if o.strip()),
            extra={k: v for k, v in props.items() if k not in known},
            **kwargs,
        )

    @classmethod
    def load(cls, path: str | os.PathLike | None = None,
             overrides: Mapping[str, str] | None = None) -> BrokerConfig:
        """Read ``server.properties`` at ``path`` (None: defaults) then apply ``overrides``.

        Raises OSError if the file cannot be read, InvalidConfigError on a bad value.
        """
        props: dict[str, str] = {}
        if path is not None:
            with open(path, encoding="utf-8") as f:
                props.update(parse_properties(f.read()))
        if overrides:
            props.update(overrides)
        return cls.from_properties(props)

    def with_log_dirs(self, dirs) -> BrokerConfig:
        return replace(self, log_dirs=tuple(os.path.abspath(d) for d in dirs))


def broker_properties(config: BrokerConfig) -> dict[str, str]:
    """Every broker-only key kafkafs reads, as ``name -> string`` of its effective value
    (what DescribeConfigs of the broker lists), then the keys it keeps without using."""
    out = {}
    for key, (attr, _p, _d) in _BROKER_KEYS.items():
        if key in ("broker.id", "log.dir"):
            continue
        value = getattr(config, attr, None)
        if key == "log.dirs":
            value = ",".join(config.log_dirs)
        if value is not None:
            out[key] = str(value).lower() if isinstance(value, bool) else str(value)
    out.update({k: str(v) for k, v in config.extra.items()})
    return out


def parse_log_dirs(raw: str) -> tuple[str, ...]:
    """Split a ``log.dirs`` value (comma-separated) into absolute paths."""
    dirs = tuple(os.path.abspath(d.strip()) for d in raw.split(",") if d.strip())
    if not dirs:
        raise InvalidConfigError("log.dirs is empty")
    return dirs


__all__ = [
    "DOUBLE_MAX",
    "LONG_MAX",
    "TOPIC_KEYS",
    "BrokerConfig",
    "LogConfig",
    "broker_properties",
    "check_topic_config",
    "format_properties",
    "parse_log_dirs",
    "parse_properties",
    "validate_topic_overrides",
]
