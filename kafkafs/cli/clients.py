"""``kafkafs produce``, ``consume`` and ``get-offsets``: kafka-console-producer,
kafka-console-consumer and kafka-get-offsets on a log dir, with their option and property
names (``--property parse.key=true``, ``print.key``, ``key.separator``,
``--producer-property batch.size=N``, ...)."""

from __future__ import annotations

import itertools
import os
import shlex
import sys
import time

from ..daemon.options import parse_batch_size
from ..escapes import unescape
from ..log.errors import LogError, RecordTooLargeError
from ..log.isolation import DEFAULT_ISOLATION_LEVEL, ISOLATION_LEVELS
from ..log.log import Log, now_ms
from ..log.partitioner import partition_for_key
from ..record.batch import TIMESTAMP_TYPE_NAMES
from ..record.producer_batch import ESTIMATOR, BatchSizer, batch_limits, effective_codec
from .common import CliError, add_log_dir_args, broker_config, open_manager, parse_kv
from .holder import Job

READ_LINES = 1000  # lines read from stdin at a time (one timestamp each)


def register(sub) -> None:
    p = sub.add_parser("produce", help="append stdin lines as records "
                                       "(kafka-console-producer.sh)")
    add_log_dir_args(p)
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, help="partition (default: murmur2 of the key, "
                                                 "or round robin per batch)")
    p.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                   help="parse.key, key.separator, ignore.error")
    p.add_argument("--producer-property", action="append", default=[], metavar="KEY=VALUE",
                   help="batch.size (bytes of a record batch, default: the topic's "
                        "kafkafs.batch.size, 16384); other producer properties are ignored")
    p.add_argument("--batch-size", type=str, default=None, metavar="BYTES",
                   help="batch.size, as kafka-console-producer's option (bytes)")
    p.add_argument("--max-partition-memory-bytes", type=str, default=None, metavar="BYTES",
                   help="batch.size too (kafka-console-producer; wins over --batch-size)")
    p.add_argument("--compression-codec", default=None,
                   help="none, gzip, snappy, lz4 or zstd (default: the topic's compression.type)")
    p.set_defaults(func=run_produce)

    c = sub.add_parser("consume", help="print records (kafka-console-consumer.sh)")
    add_log_dir_args(c)
    c.add_argument("--topic", required=True)
    c.add_argument("--partition", type=int)
    c.add_argument("--offset", default=None, help="earliest, latest or an offset (needs "
                                                  "--partition)")
    c.add_argument("--from-beginning", action="store_true")
    c.add_argument("--group", metavar="consumer group id",
                   help="start from the group's committed offsets (auto.offset.reset where "
                        "it has none) and commit what was printed, as kafka-console-consumer "
                        "does with --group")
    c.add_argument("--consumer-property", action="append", default=[], metavar="KEY=VALUE",
                   help="auto.offset.reset (earliest, latest, none) and "
                        "auto.commit.interval.ms are taken; others are ignored")
    c.add_argument("--max-messages", type=int)
    c.add_argument("--timeout-ms", type=int,
                   help="exit when no record arrives for this long (default: follow forever)")
    c.add_argument("--isolation-level", choices=ISOLATION_LEVELS,
                   default=DEFAULT_ISOLATION_LEVEL,
                   help="read_committed (default): records up to the last stable offset, "
                        "aborted transactions hidden; read_uncommitted: every record")
    c.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                   help="print.key, print.timestamp, print.offset, print.partition, "
                        "print.headers, print.value, key.separator, line.separator, "
                        "null.literal")
    c.set_defaults(func=run_consume)

    g = sub.add_parser("get-offsets", help="offsets by time (kafka-get-offsets.sh)")
    add_log_dir_args(g)
    g.add_argument("--topic", help="topic (default: all)")
    g.add_argument("--partitions", help="comma-separated partition ids")
    g.add_argument("--time", default="-1",
                   help="a timestamp in ms, -1 or latest, -2 or earliest, -3 or "
                        "max-timestamp, -4 or earliest-local")
    g.set_defaults(func=run_get_offsets)


def _props(items) -> dict[str, str]:
    return parse_kv(items, "property")


def _truthy(v: str | None) -> bool:
    return (v or "").strip().lower() == "true"


# -- produce -----------------------------------------------------------------------------

def producer_batch_size(args) -> int | None:
    """The ``batch.size`` the options give (kafka-console-producer's precedence:
    ``--max-partition-memory-bytes`` over ``--batch-size`` over ``--producer-property``),
    None when none does. Other producer properties are ignored with a warning (kafkafs
    writes the log itself: acks, linger.ms, ... have nothing to act on). Raises CliError
    for a bad value, in Kafka's words."""
    props = parse_kv(args.producer_property, "producer-property")
    for key in sorted(set(props) - {"batch.size"}):
        print(f"kafkafs produce: producer property {key} is ignored", file=sys.stderr)
    value = None
    for given in (props.get("batch.size"), args.batch_size, args.max_partition_memory_bytes):
        if given is not None:
            value = given
    try:
        return None if value is None else parse_batch_size(value)
    except ValueError as exc:
        raise CliError(str(exc)) from None


class _Accumulator:
    """One open batch per partition, closed as a Java producer's ``RecordAccumulator``
    closes it (kafkafs.record.producer_batch: ``batch.size``, each record's size, the
    compression ratio estimate). ``batch_size`` None: the topic's ``kafkafs.batch.size``.
    ``codec``: the ``--compression-codec`` (None: the topic's ``compression.type``)."""

    def __init__(self, manager, topic: str, batch_size: int | None, codec: int | None):
        self.manager = manager
        self.topic = topic
        self.batch_size = batch_size
        self.codec = codec
        self.open: dict[int, tuple[BatchSizer, list]] = {}

    def try_append(self, partition: int, record: tuple) -> bool:
        """Add ``record`` ``(ts, key, value, headers)`` to ``partition``'s open batch, or to
        a new one when none is open; False (nothing done) when the open batch has no room
        for it."""
        ts, key, value, headers = record
        ksize = -1 if key is None else len(key)
        vsize = -1 if value is None else len(value)
        entry = self.open.get(partition)
        if entry is None:
            entry = self.open[partition] = (self._sizer(partition), [])
        if not entry[0].add(ts, ksize, vsize, headers):
            return False
        entry[1].append(record)
        return True

    def append(self, partition: int, record: tuple) -> None:
        """Add ``record`` to ``partition``'s batch, writing that batch first when the record
        has no room in it. Raises LogError."""
        if not self.try_append(partition, record):
            self.flush(partition)
            self.try_append(partition, record)  # a new batch always takes its first record

    def _sizer(self, partition: int) -> BatchSizer:
        lg = self.manager.get_log(self.topic, partition)
        size = self.batch_size if self.batch_size is not None else lg.config.kafkafs_batch_size
        return BatchSizer(*batch_limits(size, self.topic, self._codec(lg)))

    def _codec(self, lg: Log) -> int:
        return effective_codec(lg.config.compression_type, self.codec)

    def flush(self, partition: int) -> None:
        """Write ``partition``'s open batch. Raises LogError."""
        sizer, records = self.open.pop(partition)
        lg = self.manager.get_log(self.topic, partition)
        pending = [(records, sizer.used)]
        while pending:  # a compressed batch over max.message.bytes goes in halves
            records, used = pending.pop()
            try:
                data = lg.encode(records, compression=self.codec)
            except RecordTooLargeError:
                if len(records) == 1:
                    raise
                mid = len(records) // 2
                pending += [(records[mid:], 0), (records[:mid], 0)]
                continue
            lg.append_encoded(bytearray(data))
            ESTIMATOR.observe(self.topic, self._codec(lg), len(data), used)

    def close(self) -> None:
        for partition in sorted(self.open):
            self.flush(partition)


def run_produce(args) -> int:
    props = _props(args.property)
    parse_key = _truthy(props.get("parse.key"))
    sep = unescape(props.get("key.separator", "\t")).encode()
    ignore_error = _truthy(props.get("ignore.error"))
    batch_size = producer_batch_size(args)
    codec = None
    if args.compression_codec:
        from ..record.compression import codec_id
        codec = codec_id(args.compression_codec)
    manager = open_manager(args, write=True, job=_produce_job(args, parse_key))
    try:
        parts = manager.partitions(args.topic)
        if not parts:
            if not manager.config.auto_create_topics_enable:
                raise CliError(f"Topic '{args.topic}' does not exist")
            manager.create_topic(args.topic)
            parts = manager.partitions(args.topic)
        # records without a key stick to one partition until its batch is full, then the
        # next one takes them (Kafka's sticky partitioner, KIP-480)
        rr = itertools.cycle(parts)
        sticky = next(rr)
        acc = _Accumulator(manager, args.topic, batch_size, codec)
        line_no = 0
        stdin = sys.stdin.buffer
        while True:
            lines = list(itertools.islice(stdin, READ_LINES))
            if not lines:
                break
            ts = now_ms()
            for raw in lines:
                line_no += 1
                line = raw[:-1] if raw.endswith(b"\n") else raw
                key = None
                value = line
                if parse_key:
                    k, found, v = line.partition(sep)
                    if not found:
                        msg = f"No key separator found on line number {line_no}: '{line.decode(errors='replace')}'"
                        if ignore_error:
                            print(msg, file=sys.stderr)
                            continue
                        raise CliError(msg)
                    key, value = k, v
                record = (ts, key, value, ())
                if args.partition is not None:
                    acc.append(args.partition, record)
                elif key is not None:
                    acc.append(partition_for_key(key, len(parts)), record)
                elif not acc.try_append(sticky, record):  # its batch is full: move on
                    acc.flush(sticky)
                    sticky = next(rr)
                    acc.append(sticky, record)
        acc.close()
        manager.flush_all()
    except LogError as exc:
        raise CliError(str(exc)) from None
    finally:
        manager.shutdown()
    return 0


def _produce_job(args, parse_key: bool) -> Job:
    """Appending through a daemon's mount: one line = one record into a partition's
    ``append`` file (keys split off by a mount with ``-o parse.key=true``)."""
    def through(mnt: str) -> str:
        topic = os.path.join(mnt, args.topic)
        append = os.path.join(topic, str(args.partition or 0), "append")
        cmd = f"cat LINES >> {shlex.quote(append)}"
        if not os.path.isdir(topic):
            cmd = f"mkdir {shlex.quote(topic)} && {cmd}"
        if parse_key:
            cmd += " (keys: a mount with -o parse.key=true)"
        return cmd

    return Job("append the records", through, "kafka-console-producer.sh --bootstrap-server ...")


# -- consume -----------------------------------------------------------------------------

class Formatter:
    """kafka-console-consumer's ``DefaultMessageFormatter``: optional timestamp, partition,
    offset, headers and key columns separated by ``key.separator``, then the value and
    ``line.separator``."""

    def __init__(self, props: dict[str, str]):
        self.print_ts = _truthy(props.get("print.timestamp"))
        self.print_partition = _truthy(props.get("print.partition"))
        self.print_offset = _truthy(props.get("print.offset"))
        self.print_headers = _truthy(props.get("print.headers"))
        self.print_key = _truthy(props.get("print.key"))
        self.print_value = props.get("print.value", "true").strip().lower() != "false"
        self.sep = unescape(props.get("key.separator", "\t")).encode()
        self.line_sep = unescape(props.get("line.separator", "\n")).encode()
        self.headers_sep = unescape(props.get("headers.separator", ",")).encode()
        self.null = props.get("null.literal", "null").encode()

    def format(self, partition: int, ts_type: int, record) -> bytes:
        cols = []
        if self.print_ts:
            cols.append(f"{TIMESTAMP_TYPE_NAMES[ts_type]}:{record.timestamp}".encode()
                        if record.timestamp >= 0 else b"NO_TIMESTAMP")
        if self.print_partition:
            cols.append(f"Partition:{partition}".encode())
        if self.print_offset:
            cols.append(f"Offset:{record.offset}".encode())
        if self.print_headers:
            if record.headers:
                cols.append(self.headers_sep.join(
                    k.encode() + b":" + (self.null if v is None else v)
                    for k, v in record.headers))
            else:
                cols.append(b"NO_HEADERS")
        if self.print_key:
            cols.append(self.null if record.key is None else record.key)
        if self.print_value:
            cols.append(self.null if record.value is None else record.value)
        if not cols:  # DefaultMessageFormatter writes a separator only after a column
            return b""
        return self.sep.join(cols) + self.line_sep


def _start_offset(text: str) -> str | int:
    """ConsoleConsumer's ``--offset``: ``earliest`` or ``latest`` (any case) or a
    non-negative long. Raises CliError with Kafka's message otherwise."""
    word = text.strip().lower()
    if word in ("earliest", "latest"):
        return word
    if not word.lstrip("+").isdigit():  # a word, a sign, a fraction: not a non-negative long
        raise CliError(f"The provided offset value '{text}' is incorrect. Valid values are "
                       "'earliest', 'latest', or a non-negative long.")
    return int(word)


def run_consume(args) -> int:
    fmt = Formatter(_props(args.property))
    start = None if args.offset is None else _start_offset(args.offset)
    if start is not None and args.from_beginning:
        raise CliError("Options from-beginning and offset cannot be specified together.")
    group = getattr(args, "group", None)
    consumer = _props(getattr(args, "consumer_property", []) or [])
    if group is not None and args.partition is not None:
        raise CliError("Options group and partition cannot be specified together.")
    reset = consumer.get("auto.offset.reset")
    if reset is not None and args.from_beginning and reset != "earliest":
        raise CliError(f"Can't simultaneously specify --from-beginning and "
                       f"'auto.offset.reset={reset}', please remove one option")
    reset = reset or ("earliest" if args.from_beginning else "latest")
    if reset not in ("earliest", "latest", "none"):
        raise CliError(f"Invalid value {reset} for configuration auto.offset.reset: String "
                       "must be one of: latest, earliest, none")
    # Kafka's loop runs while messageCount < maxMessages, or forever for -1 (the default)
    limit = None if args.max_messages in (None, -1) else args.max_messages
    manager = open_manager(args, write=False)
    out = sys.stdout.buffer
    count = 0
    try:
        # the topic's partitions only are loaded (the one asked for, with --partition)
        parts = manager.partitions(args.topic)
        if not parts:
            raise CliError(f"Topic '{args.topic}' does not exist")
        if args.offset is not None and args.partition is None:
            raise CliError("The partition is required when offset is specified.")
        if args.partition is not None:
            if args.partition not in parts:
                raise CliError(f"Partition {args.partition} of topic '{args.topic}' does not exist")
            parts = [args.partition]
        else:
            parts = manager.load_topic(args.topic)  # (one it cannot read is left out)
        positions = {}
        committer = None
        if group is not None:
            committer = GroupCommitter(args, manager, group, args.topic,
                                       int(consumer.get("auto.commit.interval.ms", 5000)))
        for p in parts:
            lg = manager.get_log(args.topic, p)
            if committer is not None and p in committer.committed:
                positions[p] = committer.committed[p]
            elif committer is not None and reset == "none":
                raise CliError(f"Undefined offset with no reset policy for partitions: "
                               f"[{args.topic}-{p}]")
            elif committer is not None:
                positions[p] = lg.log_start_offset if reset == "earliest" else \
                    lg.log_end_offset
            elif start is not None:
                positions[p] = (lg.log_start_offset if start == "earliest" else
                                lg.log_end_offset if start == "latest" else start)
            else:
                positions[p] = lg.log_start_offset if args.from_beginning else lg.log_end_offset
        committed = args.isolation_level == "read_committed"
        last_data = time.monotonic()
        while limit is None or count < limit:
            progressed = False
            for p in parts:
                lg = manager.get_log(args.topic, p)
                # an offset out of range is reset as the console consumer's
                # auto.offset.reset does: earliest with --from-beginning, else latest (so
                # never a record below the log start offset, which may sit inside a batch)
                if not lg.log_start_offset <= positions[p] <= lg.log_end_offset:
                    positions[p] = lg.log_start_offset if args.from_beginning \
                        else lg.log_end_offset
                end = lg.last_stable_offset if committed else lg.log_end_offset
                aborted = lg.committed_filter(positions[p], end) if committed else None
                for batch in lg.batches(positions[p]):
                    if batch.base_offset >= end:
                        break
                    if batch.base_offset > positions[p] and not lg.config.compact:
                        # no segment holds these offsets (one deleted or lost): Kafka's
                        # consumer skips them silently; say so (kafkafs check names the gap)
                        print(f"kafkafs consume: warning: {args.topic}-{p}: offsets "
                              f"{positions[p]} to {batch.base_offset - 1} are missing from "
                              "the log (a segment deleted or lost?); skipped (kafkafs check "
                              "reports it)", file=sys.stderr)
                    if batch.is_control or (aborted is not None and batch.is_transactional
                                            and aborted.is_aborted(batch)):
                        positions[p] = batch.next_offset
                        continue
                    for r in batch.records():
                        if r.offset < positions[p]:
                            continue
                        out.write(fmt.format(p, batch.timestamp_type, r))
                        positions[p] = r.offset + 1
                        count += 1
                        progressed = True
                        if limit is not None and count >= limit:
                            return 0
                    positions[p] = max(positions[p], batch.next_offset)
            out.flush()
            if committer is not None:
                committer.maybe_commit(positions)
            if progressed:
                last_data = time.monotonic()
            elif args.timeout_ms is not None and \
                    (time.monotonic() - last_data) * 1000 >= args.timeout_ms:
                return 0
            time.sleep(0.1)
            for p in parts:
                manager.get_log(args.topic, p).refresh_from_disk()
        return 0
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        try:
            out.flush()
        except BrokenPipeError:
            pass
        print(f"Processed a total of {count} messages", file=sys.stderr)
        try:
            if committer is not None:  # the console consumer commits at close
                committer.commit(positions)
        finally:
            manager.shutdown()


class GroupCommitter:
    """``consume --group``'s offsets: the group's committed offsets of ``topic`` to start
    from (:attr:`committed`), and commits of what was printed every ``interval_ms`` and at
    the end, as the console consumer's auto-commit and close do (offset commit records to
    the group's partition of ``__consumer_offsets``: log.group_writes, directly or through
    the daemon holding the log dirs). Raises CliError for a group with active members
    (their commits are the coordinator's to take)."""

    def __init__(self, args, manager, group: str, topic: str, interval_ms: int):
        from ..log.group_view import describe
        from ..log.groups import GroupStore

        self.args, self.group, self.topic = args, group, topic
        self.interval = interval_ms / 1000
        store = GroupStore(manager)
        store.catch_up()
        d = describe(store, group)
        if d is not None and d.state not in ("Empty", "Dead"):
            raise CliError(f"Consumer group '{group}' has active members (state {d.state}): "
                           "kafkafs consume --group commits only for an inactive group")
        self.committed = {} if d is None else \
            {p: c.offset for (t, p), c in d.offsets.items() if t == topic and c.offset >= 0}
        self._last = dict(self.committed)
        self._at = time.monotonic()

    def maybe_commit(self, positions: dict[int, int]) -> None:
        if time.monotonic() - self._at >= self.interval:
            self.commit(positions)

    def commit(self, positions: dict[int, int]) -> None:
        """Commit the positions that moved since the last commit."""
        from ..core import control
        from ..log.group_writes import append_group_records, offset_commit_records
        from .mount import mount_serving

        self._at = time.monotonic()
        moved = {p: o for p, o in positions.items() if self._last.get(p) != o}
        if not moved:
            return
        records = offset_commit_records(self.group, [(self.topic, p, o)
                                                     for p, o in sorted(moved.items())])
        try:
            writer = open_manager(self.args, write=True)
        except CliError:
            mnt = mount_serving(broker_config(self.args).log_dirs)
            if mnt is None:
                raise
            control.group_records(mnt, self.group, records)
        else:
            try:
                append_group_records(writer, self.group, records)
            finally:
                writer.shutdown()
        self._last.update(moved)


# -- get-offsets -------------------------------------------------------------------------

# GetOffsetShell's names for the special --time values; earliest-local is the log start
# offset here (no tiered storage: every segment is local)
TIME_NAMES = {"latest": -1, "earliest": -2, "max-timestamp": -3, "earliest-local": -4}


def _parse_time(text: str) -> int:
    """``--time``: a timestamp in ms, -1/latest, -2/earliest, -3/max-timestamp or
    -4/earliest-local (GetOffsetShell.parseOffsetSpec). Raises CliError with Kafka's
    message otherwise."""
    if text in TIME_NAMES:
        return TIME_NAMES[text]
    try:
        when = int(text)
    except ValueError:
        when = None
    if when is None or when < -4:
        raise CliError(f"Malformed time argument {text}. Please use -1 or latest / -2 or "
                       "earliest / -3 or max-timestamp / -4 or earliest-local, or a "
                       "specified long format timestamp")
    return -2 if when == -4 else when


def run_get_offsets(args) -> int:
    when = _parse_time(args.time)
    manager = open_manager(args, write=False)
    try:
        topics = [args.topic] if args.topic else manager.topics()
        wanted = None
        if args.partitions:
            wanted = {int(x) for x in args.partitions.split(",") if x.strip()}
        for t in topics:
            for p in manager.load_topic(t):  # that topic's partitions only are loaded
                if wanted is not None and p not in wanted:
                    continue
                found = manager.get_log(t, p).offset_for_timestamp(when)
                print(f"{t}:{p}:{'' if found is None else found[0]}")
    finally:
        manager.shutdown()
    return 0


