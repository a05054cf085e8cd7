"""The ``kafkalog`` source's options: Spark's built-in Kafka source's names, defaults,
precedence and error messages (``KafkaSourceProvider``, ``JsonUtils``, ``KafkaExceptions``).

:func:`parse_options` turns Spark's (case-insensitive) option map into a
:class:`ReadOptions`, checking what ``KafkaSourceProvider.validateBatchOptions`` /
``validateStreamOptions`` / ``validateGeneralOptions`` and ``checkOffsetLimitValidity``
check, with their messages:

* exactly one of ``subscribe`` (comma-separated topics), ``subscribePattern`` (a regular
  expression a whole topic name must match; Python's ``re`` syntax) and ``assign`` (JSON
  ``{"topicA":[0,1]}``);
* where to start and end, each from the first of three options given (Spark's
  "preferences"): ``startingTimestamp`` (one timestamp in ms for every partition) over
  ``startingOffsetsByTimestamp`` (JSON ``{"topicA":{"0":1700000000000}}``) over
  ``startingOffsets`` (``earliest``, ``latest`` or JSON ``{"topicA":{"0":23,"1":-2}}``,
  -2 meaning earliest and -1 latest); the same with ``ending...``. Batch defaults: earliest
  to latest; a batch may not start at latest nor end at earliest;
  ``startingOffsetsByTimestampStrategy``: ``error`` (default) or ``latest``, what to do when
  no record has a timestamp at or after the one asked;
* ``failOnDataLoss`` (true), ``includeHeaders`` (false), ``minPartitions``,
  ``maxRecordsPerPartition`` (both positive when given), ``kafka.isolation.level``
  (``read_committed``, kafkafs's default everywhere; or ``read_uncommitted``; Spark's own
  Kafka source defaults to Kafka's ``read_uncommitted``), and ``kafka.*`` options Spark
  refuses (``auto.offset.reset``, ``key.deserializer``, ...) are refused the same way.
  Other ``kafka.*`` options (``bootstrap.servers``, ...) are accepted and ignored: there is
  no broker.

kafkalog's own options: ``path`` (what ``load(PATH)`` passes; one or more log dirs,
comma-separated, local paths or URIs of any filesystem ``pyarrow.fs`` opens; ``load([...])``
passes ``paths``) and ``maxPartitionBytes`` (bytes, default 128 MiB, as Spark's
``spark.sql.files.maxPartitionBytes``; ``maxBytesPerPartition`` is its older name): how many
bytes of segments one task reads at most -- small segments of one offset range are packed
into one task up to it, a larger segment is read by several tasks, split along its
``.index`` entries.

Errors are ValueError (Spark's IllegalArgumentException) with Spark's messages.

Where Spark's Kafka source refuses a bad option -- at ``load()``, before any query runs --
:func:`validate_at_load` does, called by the source's ``schema()`` (what PySpark runs when
``load()`` is called, batch and stream alike). A Python data source is not told whether it
is being loaded for a batch read or a stream, so :func:`kafkafs.spark.register` marks the
option map: ``spark.read.format("kafkalog")`` and ``spark.readStream.format("kafkalog")``
add :data:`QUERY_TYPE_OPTION` (``batch`` / ``streaming``), see :mod:`kafkafs.spark.loadcheck`.
Errors raised there are :class:`OptionError`; ``load()`` re-raises them as PySpark's
``IllegalArgumentException`` with the message alone (what Spark's own source raises).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field

from ..log.isolation import DEFAULT_ISOLATION_LEVEL, ISOLATION_LEVELS

__all__ = [
    "EARLIEST",
    "LATEST",
    "QUERY_TYPE_OPTION",
    "OffsetLimit",
    "OptionError",
    "ReadOptions",
    "TopicPartition",
    "format_tp",
    "format_tp_set",
    "parse_options",
    "stream_settings",
    "time_string_ms",
    "validate_at_load",
]

log = logging.getLogger(__name__)

#: Spark's KafkaOffsetRangeLimit sentinels inside a JSON offset map
EARLIEST = -2
LATEST = -1
DEFAULT_MAX_BYTES_PER_PARTITION = 128 * 1024 * 1024
DEFAULT_MAX_TRIGGER_DELAY = "15m"
#: set by kafkafs.spark.register's hooks on the option map: "batch" or "streaming"
QUERY_TYPE_OPTION = "kafkalog.internal.queryType"

TopicPartition = tuple  # (topic: str, partition: int)

STRATEGY_KEYS = ("subscribe", "subscribepattern", "assign")
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1
_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1
_JAVA_INT = re.compile(r"[+-]?[0-9]+")

_OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
_TIMESTAMPS_EXAMPLE = ('{"topicA": {"0": 123456789, "1": 123456789},\n'
                       '"topicB": {"0": 123456789, "1": 123456789}}')
_ASSIGN_EXAMPLE = '{"topicA":[0,1],"topicB":[0,1]}'


class OptionError(ValueError):
    """A bad option refused at ``load()`` (Spark's IllegalArgumentException); its message
    is Spark's."""


def format_tp(tp: TopicPartition) -> str:
    """Kafka's ``TopicPartition.toString``: ``topic-partition``."""
    return f"{tp[0]}-{tp[1]}"


def format_tp_set(tps) -> str:
    """A set of topic-partitions as Scala prints one: ``Set(t-0, t-1)`` (sorted here)."""
    return "Set(" + ", ".join(format_tp(tp) for tp in sorted(tps)) + ")"


@dataclass(frozen=True)
class OffsetLimit:
    """Where a read starts or ends (Spark's ``KafkaOffsetRangeLimit``).

    ``kind``: ``"earliest"``, ``"latest"``, ``"offsets"`` (``values``: ``{(topic,
    partition): offset}``, offsets >= 0 or -2 earliest / -1 latest), ``"timestamps"``
    (``values``: ``{(topic, partition): timestamp ms}``) or ``"timestamp"`` (``timestamp``:
    ms, every partition). ``strategy``: for timestamps, what happens when no record has a
    timestamp at or after the one asked: ``"error"`` or ``"latest"`` (for an end, always
    latest)."""

    kind: str
    values: dict = field(default_factory=dict)
    timestamp: int | None = None
    strategy: str = "error"

    def __repr__(self):
        if self.kind == "timestamp":
            return f"OffsetLimit(timestamp={self.timestamp})"
        if self.kind in ("offsets", "timestamps"):
            return f"OffsetLimit({self.kind}={self.values})"
        return f"OffsetLimit({self.kind})"


@dataclass(frozen=True)
class ReadOptions:
    """The parsed options (see the module). ``strategy`` is ``"subscribe"`` (``topics``),
    ``"subscribePattern"`` (``pattern``) or ``"assign"`` (``assigned``: topic-partitions in
    the order given); ``ending`` is None for a stream; ``raw``: every option, keys in lower
    case (what a stream reader reads its own options from). Neither ``paths`` (a URI may
    carry credentials) nor ``raw`` is in the repr."""

    paths: tuple = field(repr=False)
    strategy: str
    topics: tuple = ()
    pattern: str | None = None
    assigned: tuple = ()
    starting: OffsetLimit = OffsetLimit("earliest")
    ending: OffsetLimit | None = OffsetLimit("latest")
    fail_on_data_loss: bool = True
    include_headers: bool = False
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    isolation_level: str = DEFAULT_ISOLATION_LEVEL
    max_bytes_per_partition: int = DEFAULT_MAX_BYTES_PER_PARTITION  # maxPartitionBytes
    raw: dict = field(default_factory=dict, repr=False)

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == "read_committed"

    def topic_selected(self, topic: str) -> bool:
        """Whether the subscription takes ``topic`` (assign: any of its partitions).
        ``subscribePattern`` matches the whole name (Java's ``Matcher.matches``) and, as a
        Kafka consumer with ``exclude.internal.topics=true``, never an internal topic."""
        if self.strategy == "subscribe":
            return topic in self.topics
        if self.strategy == "assign":
            return any(tp[0] == topic for tp in self.assigned)
        if topic in INTERNAL_TOPICS:
            return False
        return re.fullmatch(self.pattern, topic) is not None


#: Kafka's internal topics (a pattern subscription leaves them out)
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


# -- scalar parsing as the JVM parses -----------------------------------------------------

def _number_format(text: str) -> ValueError:
    return ValueError(f'For input string: "{text}"')


def java_long(text: str, lo: int = _LONG_MIN, hi: int = _LONG_MAX) -> int:
    """``Long.parseLong`` (or ``Integer.parseInt`` with the int bounds): ValueError
    ``For input string: "x"`` otherwise."""
    if not _JAVA_INT.fullmatch(text):
        raise _number_format(text)
    n = int(text)
    if not lo <= n <= hi:
        raise _number_format(text)
    return n


def java_bool(text: str) -> bool:
    """Scala's ``StringOps.toBoolean``: true/false in any case."""
    low = text.lower()
    if low not in ("true", "false"):
        raise ValueError(f'For input string: "{text}"')
    return low == "true"


# -- the JSON forms (JsonUtils) -------------------------------------------------------------

class _Malformed(ValueError):
    """A JSON option of the wrong shape (reported with Spark's example)."""


def _json_int(value, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise _Malformed
    return value


def parse_partition_offsets(text: str, example: str = _OFFSETS_EXAMPLE) -> dict:
    """``JsonUtils.partitionOffsets`` / ``partitionTimestamps``: ``{"t":{"0":23}}`` →
    ``{("t", 0): 23}``. Raises ValueError ``Expected e.g. ..., got TEXT``."""
    try:
        raw = json.loads(text)
        if not isinstance(raw, dict):
            raise _Malformed
        out = {}
        for topic, parts in raw.items():
            if not isinstance(parts, dict):
                raise _Malformed
            for part, value in parts.items():
                out[(topic, java_long(part.strip(), _INT_MIN, _INT_MAX))] = \
                    _json_int(value, _LONG_MIN, _LONG_MAX)
        return out
    except ValueError:
        raise ValueError(f"Expected e.g. {example}, got {text}") from None


def parse_assign(text: str) -> tuple:
    """``JsonUtils.partitions``: ``{"t":[0,1]}`` → ``(("t", 0), ("t", 1))``."""
    try:
        raw = json.loads(text)
        if not isinstance(raw, dict):
            raise _Malformed
        out = []
        for topic, parts in raw.items():
            if not isinstance(parts, list):
                raise _Malformed
            out.extend((topic, _json_int(p, _INT_MIN, _INT_MAX)) for p in parts)
        return tuple(out)
    except ValueError:
        raise ValueError(f"Expected e.g. {_ASSIGN_EXAMPLE}, got {text}") from None


# -- offsets --------------------------------------------------------------------------------

def _timestamp_strategy(opts: dict) -> str:
    raw = opts.get("startingoffsetsbytimestampstrategy")
    if raw is None:
        return "error"
    # Scala's Enumeration.withName of the upper-cased value
    if raw.upper() not in ("ERROR", "LATEST"):
        raise ValueError(f"No value found for '{raw.upper()}'")
    return raw.upper().lower()


def offset_range_limit(opts: dict, global_key: str, by_timestamp_key: str, offsets_key: str,
                       default: OffsetLimit) -> OffsetLimit:
    """``KafkaSourceProvider.getKafkaOffsetRangeLimit``: the first of the global timestamp,
    the per-partition timestamps and the offsets option that is given, else ``default``.
    Keys are lower case."""
    strategy = _timestamp_strategy(opts)
    if global_key in opts:
        text = opts[global_key].strip()
        try:
            ts = java_long(text)
        except ValueError:
            raise ValueError(f"Expected a single long value, got {text}") from None
        return OffsetLimit("timestamp", timestamp=ts, strategy=strategy)
    if by_timestamp_key in opts:
        return OffsetLimit("timestamps", parse_partition_offsets(opts[by_timestamp_key].strip(),
                                                                 _TIMESTAMPS_EXAMPLE),
                           strategy=strategy)
    if offsets_key in opts:
        text = opts[offsets_key].strip()
        if text.lower() == "latest":
            return OffsetLimit("latest")
        if text.lower() == "earliest":
            return OffsetLimit("earliest")
        return OffsetLimit("offsets", parse_partition_offsets(text))
    return default


def starting_limit(opts: dict, default: OffsetLimit) -> OffsetLimit:
    return offset_range_limit(opts, "startingtimestamp", "startingoffsetsbytimestamp",
                              "startingoffsets", default)


def ending_limit(opts: dict, default: OffsetLimit) -> OffsetLimit:
    return offset_range_limit(opts, "endingtimestamp", "endingoffsetsbytimestamp",
                              "endingoffsets", default)


def check_offset_limit_validity(start: OffsetLimit, end: OffsetLimit) -> None:
    """``KafkaSourceProvider.checkOffsetLimitValidity``: per-partition starts and ends name
    the same topic-partitions, and no start is past its end (offsets >= 0 compared,
    -2/-1 not; timestamps)."""
    for kind, what in (("offsets", "offset"), ("timestamps", "timestamp")):
        if start.kind != kind or end.kind != kind:
            continue
        if set(start.values) != set(end.values):
            raise ValueError(
                "[MISMATCHED_TOPIC_PARTITIONS_BETWEEN_START_OFFSET_AND_END_OFFSET] The "
                "specified start offset and end offset should have the same "
                "topic-partitions. Topic-partitions for start offset: "
                f"{format_tp_set(start.values)}, topic-partitions for end offset: "
                f"{format_tp_set(end.values)}.")
        for tp in sorted(start.values):
            s, e = start.values[tp], end.values[tp]
            if s > e and s >= 0 and e >= 0:
                raise ValueError(
                    f"[UNRESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET] The specified start "
                    f"{what} {s} is greater than the end {what} {e} for topic {tp[0]} "
                    f"partition {tp[1]}.")


def _validate_batch_limits(start: OffsetLimit, end: OffsetLimit) -> None:
    if start.kind == "latest":
        raise ValueError("starting offset can't be latest for batch queries on Kafka")
    if start.kind == "offsets":
        for tp, off in sorted(start.values.items()):
            if off == LATEST:
                raise ValueError(f"startingOffsets for {format_tp(tp)} can't be latest for "
                                 "batch queries on Kafka")
    if end.kind == "earliest":
        raise ValueError("ending offset can't be earliest for batch queries on Kafka")
    if end.kind == "offsets":
        for tp, off in sorted(end.values.items()):
            if off == EARLIEST:
                raise ValueError(f"ending offset for {format_tp(tp)} can't be earliest for "
                                 "batch queries on Kafka")


# -- general options ----------------------------------------------------------------------

_AUTO_OFFSET_RESET_MESSAGE = (
    "\nKafka option 'auto.offset.reset' is not supported.\n"
    "Instead set the source option 'startingoffsets' to 'earliest' or 'latest'\n"
    "to specify where to start. Structured Streaming manages which offsets are consumed\n"
    "internally, rather than relying on the kafkaConsumer to do it. This will ensure that no\n"
    "data is missed when new topics/partitions are dynamically subscribed. Note that\n"
    "'startingoffsets' only applies when a new Streaming query is started, and\n"
    "that resuming will always pick up from where the query left off. See the docs for more\n"
    "details.\n")


def _strategy(opts: dict) -> dict:
    given = [k for k in STRATEGY_KEYS if k in opts]
    names = ", ".join(STRATEGY_KEYS)
    if not given:
        raise ValueError("One of the following options must be specified for Kafka source: "
                         f"{names}. See the docs for more details.")
    if len(given) > 1:
        raise ValueError("Only one of the following options can be specified for Kafka "
                         f"source: {names}. See the docs for more details.")
    key, value = given[0], opts[given[0]]
    if key == "assign":
        if not value.strip().startswith("{"):
            raise ValueError("No topicpartitions to assign as specified value for option "
                             f"'assign' is '{value}'")
        return {"strategy": "assign", "assigned": parse_assign(value)}
    if key == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise ValueError("No topics to subscribe to as specified value for option "
                             f"'subscribe' is '{value}'")
        return {"strategy": "subscribe", "topics": topics}
    pattern = value.strip()
    if not pattern:
        raise ValueError("Pattern to subscribe is empty as specified value for option "
                         f"'subscribePattern' is '{value}'")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"subscribePattern {pattern!r} is not a valid regular expression: "
                         f"{exc}") from None
    return {"strategy": "subscribePattern", "pattern": pattern}


def _kafka_options(opts: dict) -> str:
    """Check the ``kafka.*`` options as Spark does; returns the isolation level."""
    if "kafka.auto.offset.reset" in opts:
        raise ValueError(_AUTO_OFFSET_RESET_MESSAGE)
    if "kafka.key.deserializer" in opts:
        raise ValueError("Kafka option 'key.deserializer' is not supported as keys are "
                         "deserialized as byte arrays with ByteArrayDeserializer. Use "
                         "DataFrame operations to explicitly deserialize the keys.")
    if "kafka.value.deserializer" in opts:
        raise ValueError("Kafka option 'value.deserializer' is not supported as values are "
                         "deserialized as byte arrays with ByteArrayDeserializer. Use "
                         "DataFrame operations to explicitly deserialize the values.")
    for name in ("enable.auto.commit", "interceptor.classes"):
        if f"kafka.{name}" in opts:
            raise ValueError(f"Kafka option '{name}' is not supported")
    level = opts.get("kafka.isolation.level", DEFAULT_ISOLATION_LEVEL)
    if level.strip().lower() not in ISOLATION_LEVELS:
        raise ValueError(f"Invalid value {level} for configuration isolation.level: String "
                         "must be one of: read_committed, read_uncommitted")
    return level.strip().lower()


def _paths(opts: dict) -> tuple:
    out = []
    if "paths" in opts:
        try:
            listed = json.loads(opts["paths"])
        except ValueError:
            listed = [opts["paths"]]
        if isinstance(listed, str):
            listed = [listed]
        for p in listed:
            out.extend(str(p).split(","))
    if "path" in opts:
        out.extend(opts["path"].split(","))
    out = [p.strip() for p in out if p.strip()]
    if not out:
        raise ValueError("kafkalog needs the log dirs to read: load(PATH) with one or more "
                         "log dirs, comma-separated (local paths or URIs such as s3://...)")
    return tuple(dict.fromkeys(out))


def lower_keys(options) -> dict:
    """Spark's option map with lower-case keys (options are case-insensitive)."""
    return {str(k).lower(): str(v) for k, v in dict(options).items()}


def parse_options(options, *, streaming: bool = False) -> ReadOptions:
    """Parse and check Spark's option map for a batch read (or, with ``streaming``, a
    stream: default start ``latest``, no end options). Raises ValueError with Spark's
    messages (see the module)."""
    opts = lower_keys(options)
    if streaming:
        if "endingoffsets" in opts:
            raise ValueError("ending offset not valid in streaming queries")
        if "endingoffsetsbytimestamp" in opts:
            raise ValueError("ending timestamp not valid in streaming queries")
        start = starting_limit(opts, OffsetLimit("latest"))
        end = None
    else:
        start = starting_limit(opts, OffsetLimit("earliest"))
        end = ending_limit(opts, OffsetLimit("latest"))
        _validate_batch_limits(start, end)
    strategy = _strategy(opts)
    min_partitions = max_records = None
    if "minpartitions" in opts:
        min_partitions = java_long(opts["minpartitions"], _INT_MIN, _INT_MAX)
        if min_partitions <= 0:
            raise ValueError("minPartitions must be positive")
    if "maxrecordsperpartition" in opts:
        max_records = java_long(opts["maxrecordsperpartition"])
        if max_records <= 0:
            raise ValueError("maxRecordsPerPartition must be positive")
    if "kafka.group.id" in opts:
        log.warning("Kafka option 'kafka.group.id' has been set on this query; kafkalog "
                    "reads log dirs, not a consumer group: it is ignored")
    isolation = _kafka_options(opts)
    if "minoffsetspertrigger" in opts and "maxoffsetspertrigger" in opts:
        lo = java_long(opts["minoffsetspertrigger"])
        hi = java_long(opts["maxoffsetspertrigger"])
        if lo > hi:
            raise ValueError(f"The value of minOffsetPerTrigger({lo}) is higher than the "
                             f"maxOffsetsPerTrigger({hi}).")
    if not streaming:
        for name, shown in (("maxoffsetspertrigger", "maxOffsetsPerTrigger"),
                            ("minoffsetspertrigger", "minOffsetsPerTrigger"),
                            ("maxtriggerdelay", "maxTriggerDelay")):
            if name in opts:
                log.warning("%s option ignored in batch queries", shown)
        check_offset_limit_validity(start, end)
    fail_on_data_loss = java_bool(opts.get("failondataloss", "true"))
    include_headers = java_bool(opts.get("includeheaders", "false"))
    max_bytes = DEFAULT_MAX_BYTES_PER_PARTITION
    for key, shown in (("maxpartitionbytes", "maxPartitionBytes"),
                       ("maxbytesperpartition", "maxBytesPerPartition")):
        if key in opts:
            max_bytes = java_long(opts[key].strip())
            if max_bytes <= 0:
                raise ValueError(f"{shown} must be positive")
            break
    return ReadOptions(paths=_paths(opts), starting=start, ending=end,
                       fail_on_data_loss=fail_on_data_loss, include_headers=include_headers,
                       min_partitions=min_partitions, max_records_per_partition=max_records,
                       isolation_level=isolation, max_bytes_per_partition=max_bytes,
                       raw=opts, **strategy)


# -- stream settings and the checks done at load() ------------------------------------------

_TIME_SUFFIX_US = {"us": 1, "ms": 1000, "s": 1000_000, "m": 60_000_000, "min": 60_000_000,
                   "h": 3600_000_000, "d": 86400_000_000}
_TIME = re.compile(r"(-?[0-9]+)([a-z]+)?")


def time_string_ms(text: str) -> int:
    """Spark's ``Utils.timeStringAsMs``: ``"15m"`` -> 900000; no suffix means ms; suffixes
    us, ms, s, m, min, h, d. Raises ValueError with Spark's message."""
    lower = text.strip().lower()
    m = _TIME.fullmatch(lower)
    why = f"Failed to parse time string: {text}"
    if m and m.group(2) is not None and m.group(2) not in _TIME_SUFFIX_US:
        why = f'Invalid suffix: "{m.group(2)}"'
        m = None
    if m is None:
        raise ValueError("Time must be specified as seconds (s), milliseconds (ms), "
                         "microseconds (us), minutes (m or min), hour (h), or day (d). "
                         f"E.g. 50s, 100ms, or 250us.\n{why}")
    us = int(m.group(1)) * _TIME_SUFFIX_US[m.group(2) or "ms"]
    return int(us / 1000)  # TimeUnit.convert truncates toward zero


def _positive(raw: dict, key: str, shown: str) -> int | None:
    if key not in raw:
        return None
    n = java_long(raw[key].strip())
    if n <= 0:
        raise ValueError(f"{shown} must be positive, not {n}")
    return n


def stream_settings(raw: dict) -> dict:
    """A stream's own settings from the (lower-case) option map, as
    ``KafkaMicroBatchStream`` reads them: ``max_offsets`` / ``min_offsets``
    (``maxOffsetsPerTrigger`` / ``minOffsetsPerTrigger``, offsets, None when not given),
    ``max_trigger_delay_ms`` (``maxTriggerDelay``, default 15m), ``fetch_attempts``
    (``fetchOffset.numRetries``, default 3, at least 1) and ``retry_interval_ms``
    (``fetchOffset.retryIntervalMs``, default 1000). Raises ValueError: ``For input string:
    "abc"`` for a number that is not one (``Long.parseLong``), ``maxOffsetsPerTrigger must
    be positive, not 0``, Spark's time-string message."""
    return {
        "max_offsets": _positive(raw, "maxoffsetspertrigger", "maxOffsetsPerTrigger"),
        "min_offsets": _positive(raw, "minoffsetspertrigger", "minOffsetsPerTrigger"),
        "max_trigger_delay_ms": time_string_ms(raw.get("maxtriggerdelay",
                                                       DEFAULT_MAX_TRIGGER_DELAY)),
        "fetch_attempts": max(1, java_long(raw.get("fetchoffset.numretries", "3").strip())),
        "retry_interval_ms": max(0, java_long(
            raw.get("fetchoffset.retryintervalms", "1000").strip())),
    }


def validate_at_load(options) -> None:
    """The checks Spark's Kafka source makes when ``load()`` runs
    (``KafkaSourceProvider.validateBatchOptions`` / ``validateStreamOptions``, and for a
    stream the settings of :func:`stream_settings`), by the query type
    :data:`QUERY_TYPE_OPTION` says. Without it (a write; a reader not made through the
    hooks of :func:`kafkafs.spark.register`) nothing is checked here: the reader checks
    when Spark creates it. Raises :class:`OptionError` with Spark's message."""
    opts = lower_keys(options)
    kind = opts.get(QUERY_TYPE_OPTION.lower())
    if kind not in ("batch", "streaming"):
        return
    try:
        parsed = parse_options(opts, streaming=kind == "streaming")
        if kind == "streaming":
            stream_settings(parsed.raw)
    except OptionError:
        raise
    except ValueError as exc:
        raise OptionError(str(exc)) from None
