"""``kafkafs produce``, ``consume`` and ``get-offsets``: kafka-console-producer,
kafka-console-consumer and kafka-get-offsets on a log dir, with their option and property
names (``--property parse.key=true``, ``print.key``, ``key.separator``, ...)."""

from __future__ import annotations

import itertools
import sys
import time

from ..escapes import unescape
from ..log.errors import LogError
from ..log.isolation import DEFAULT_ISOLATION_LEVEL, ISOLATION_LEVELS
from ..log.log import now_ms
from ..log.partitioner import partition_for_key
from ..record.batch import TIMESTAMP_TYPE_NAMES
from .common import CliError, add_log_dir_args, open_manager, parse_kv

BATCH_LINES = 1000


def register(sub) -> None:
    p = sub.add_parser("produce", help="append stdin lines as records "
                                       "(kafka-console-producer.sh)")
    add_log_dir_args(p)
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, help="partition (default: murmur2 of the key, "
                                                 "or round robin per batch)")
    p.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                   help="parse.key, key.separator, ignore.error")
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

def run_produce(args) -> int:
    props = _props(args.property)
    parse_key = _truthy(props.get("parse.key"))
    sep = unescape(props.get("key.separator", "\t")).encode()
    ignore_error = _truthy(props.get("ignore.error"))
    codec = None
    if args.compression_codec:
        from ..record.compression import codec_id
        codec = codec_id(args.compression_codec)
    manager = open_manager(args, write=True)
    try:
        parts = manager.partitions(args.topic)
        if not parts:
            if not manager.config.auto_create_topics_enable:
                raise CliError(f"Topic '{args.topic}' does not exist")
            manager.create_topic(args.topic)
            parts = manager.partitions(args.topic)
        rr = itertools.cycle(parts)
        line_no = 0
        stdin = sys.stdin.buffer
        while True:
            lines = list(itertools.islice(stdin, BATCH_LINES))
            if not lines:
                break
            by_part: dict[int, list] = {}
            default_part = args.partition if args.partition is not None else next(rr)
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
                part = default_part if key is None or args.partition is not None \
                    else partition_for_key(key, len(parts))
                by_part.setdefault(part, []).append((ts, key, value, ()))
            for part, records in by_part.items():
                manager.get_log(args.topic, part).append(records, compression=codec)
        manager.flush_all()
    except LogError as exc:
        raise CliError(str(exc)) from None
    finally:
        manager.shutdown()
    return 0


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
    # Kafka's loop runs while messageCount < maxMessages, or forever for -1 (the default)
    limit = None if args.max_messages in (None, -1) else args.max_messages
    manager = open_manager(args, write=False)
    out = sys.stdout.buffer
    count = 0
    try:
        parts = manager.partitions(args.topic)
        if not parts:
            raise CliError(f"Topic '{args.topic}' does not exist")
        if args.offset is not None and args.partition is None:
            raise CliError("The partition is required when offset is specified.")
        if args.partition is not None:
            if args.partition not in parts:
                raise CliError(f"Partition {args.partition} of topic '{args.topic}' does not exist")
            parts = [args.partition]
        positions = {}
        for p in parts:
            lg = manager.get_log(args.topic, p)
            if start is not None:
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
        manager.shutdown()


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
            for p in manager.partitions(t):
                if wanted is not None and p not in wanted:
                    continue
                lg = manager.get_log(t, p)
                if when == -3:
                    found = _max_timestamp_offset(lg)
                else:
                    found = lg.offset_for_timestamp(when)
                print(f"{t}:{p}:{'' if found is None else found[0]}")
    finally:
        manager.shutdown()
    return 0


def _max_timestamp_offset(lg):
    best = None
    for seg in lg.segments():
        ts = seg.max_timestamp_so_far
        if ts >= 0 and (best is None or ts > best[1]):
            best = (seg.offset_of_max_timestamp_so_far, ts)
    return best
