"""``kafkafs dump``: kafka-dump-log.sh (Kafka's ``DumpLogSegments``) on segment files.

Same options and the same output lines as Kafka 3.x/4.x, for files in a log dir (no broker
needed; files are opened read-only, so a live broker's or daemon's dir is safe to dump):

* ``.log`` (and KRaft snapshot ``.checkpoint``): ``Log starting offset: N``, one line per
  batch (``baseOffset: ... isvalid: true``), with ``--deep-iteration`` one ``| offset: ...``
  line per record, with ``--print-data-log`` the key and payload (as UTF-8, invalid bytes
  replaced; Kafka's StringDecoder), then ``Found N invalid bytes at the end of NAME`` for a
  torn tail. ``--offsets-decoder``, ``--transaction-log-decoder``,
  ``--share-group-state-decoder`` and ``--cluster-metadata-decoder`` print the records of
  Kafka's internal topics decoded, as Kafka 4.x does (:mod:`kafkafs.cli.dump_decoders`);
  KRaft's control records are shown decoded in every dump (Kafka 4.1's ``LeaderChange:``,
  ``SnapshotHeader``, ``SnapshotFooter``, ``KRaftVersion``, ``KRaftVoters``). A legacy entry (message format v0/v1) prints Kafka's line for magic < 2,
  ``offset: <last offset> position: P NoTimestampType: -1 size: S magic: 0 compresscodec: C
  crc: CRC isvalid: B`` (``CreateTime``/``LogAppendTime: T`` for magic 1), and one record line
  per message (a compressed wrapper's inner messages, offsets made absolute), ``| offset: N
  <the entry's timestamp type>: T keySize: K valueSize: V isValid: B crc: CRC}`` with the
  message's own CRC and the closing brace Kafka 3.0+ prints there.
* ``.index``: ``offset: N position: P``, each entry checked against the ``.log`` beside it.
* ``.timeindex``: ``timestamp: T offset: N``, each entry checked against the ``.log`` (via the
  ``.index``).
* ``.snapshot`` (producer state, ``dumpProducerIdSnapshot``): one line per producer,
  ``producerId: P producerEpoch: E coordinatorEpoch: C currentTxnFirstOffset:
  OptionalLong[F] lastTimestamp: T`` (``OptionalLong.empty`` without an ongoing
  transaction), followed, when the producer has a data batch, by `` firstSequence: S
  lastSequence: S lastOffset: O offsetDelta: D timestamp: T`` — Kafka 4.x's line; 3.x
  printed the same text but with a blank at the end of a line without batch data.
* ``.txnindex`` (``dumpTxnIndex``): one line per aborted transaction, ``version: 0
  producerId: P firstOffset: F lastOffset: L lastStableOffset: S``. A missing file prints
  nothing (as Kafka: no transaction index until a transaction aborts).
* ``--index-sanity-check``: the broker's startup check only; ``--verify-index-only``: the
  checks without the listing. Findings go to stderr after all files, in Kafka's words.

``--json`` (kafkafs only) prints the same information as JSON Lines on stdout: one object
per text line, in the same order, ``{"type": ..., <fields>}`` (UTF-8, non-ASCII unescaped).
Fields are Kafka's labels in snake_case in the text's order, with JSON values: numbers,
booleans, null for ``OptionalLong.empty``, a list for ``headerKeys``, Kafka's timestamp type
label as ``timestamp_type`` beside ``timestamp``; a key or payload is a string when it is
UTF-8, else ``{"base64": ...}``. Types (fields as printed, so --skip-record-metadata and
--print-data-log decide a record's):

* ``file`` (``Dumping F``): path. ``log_start``: offset. ``kraft_snapshot``: bootstrap,
  end_offset, epoch. ``invalid_bytes`` (a torn tail): bytes, name, position.
* ``batch``, magic 2: base_offset, last_offset, count, base_sequence, last_sequence,
  producer_id, producer_epoch, partition_leader_epoch, is_transactional, is_control,
  delete_horizon_ms, position, timestamp_type, timestamp, size, magic, compresscodec, crc,
  isvalid; magic 0/1: offset (the entry's last), position, timestamp_type, timestamp, size,
  magic, compresscodec, crc, isvalid.
* ``record``: offset, timestamp_type, timestamp, key_size, value_size, then sequence and
  header_keys (v2) or is_valid and crc (v0/v1); a control record adds control_type and
  control_type_id, and coordinator_epoch (end markers) or control_label and control_data
  (Kafka's label and JSON of a KRaft control record: leader change, snapshot header or
  footer, kraft.version, voters); --print-data-log adds key and payload (null when null;
  with a decoder, the JSON value the decoder printed, or its text).
* ``index_entry``: offset, position. ``time_index_entry``: timestamp, offset.
  ``index_empty``: path. ``producer_snapshot_entry``: producer_id, producer_epoch,
  coordinator_epoch, current_txn_first_offset, last_timestamp [, first_sequence,
  last_sequence, last_offset, offset_delta, timestamp]. ``aborted_txn``: version,
  producer_id, first_offset, last_offset, last_stable_offset.
* ``finding``: kind, path, the kind's values, message (Kafka's line) and, for those Kafka
  prints on stderr under a heading line, heading: ``index_mismatch`` (index_offset,
  log_offset), ``timestamp_mismatch`` (index_timestamp, log_timestamp),
  ``timestamp_out_of_order`` (index_timestamp, previously_indexed_timestamp),
  ``offset_not_found`` (indexed_offset, found_log_offset), ``non_consecutive_offsets``
  (offset, next_offset), ``index_sanity_check`` (passed; a failed check is an error).
* ``error``: path (the file being dumped), position (when the error names one), message
  (the stderr line).

stderr is the same with and without ``--json``; errors and findings are also objects on
stdout, where they happen (findings at the end, as in the text). Every line is built as such
an object first (:func:`render_text` makes Kafka's line of it, :func:`render_json` the JSON
line), so the two outputs cannot disagree.

Files are dispatched on their suffix (:data:`SUFFIX_DUMPERS`) and batches on their magic
(:data:`BATCH_OBJECTS`). Control records are decoded with :mod:`kafkafs.record.control`.

Exit status: 0 when every file was dumped (findings such as index mismatches do not change
it, as in Kafka), 1 when a file could not be read, was corrupt, or is not supported yet.
Damage (docs/design.md §5) ends the dump of a ``.log``: the damaged batch's line is printed
as Kafka prints it (``isvalid: false`` for a bad CRC), never its records, then one ``error:
FILE: position N: REASON`` line, and the dump goes on with the next file. Kafka prints every batch
and exits 0; here a bad CRC, an inner message that fails its own CRC, offsets that go back,
zeros followed by data, a size below the minimum and an unknown magic are errors, and so are
offsets a reader of the partition would refuse (:func:`segment_order`: at or past the next
segment's base offset, or in the last segment past where its last batch ends), so that dump
names the same first damage as consume, get-offsets and check: the framing, zero and
order rules are the log layer's one walker's (:mod:`kafkafs.log.walk`, docs/design.md §5.3),
which dump walks without CRCs and order so that it can print a damaged batch's line
first (:func:`_entry_damage` then applies them). A run of
zeros that reaches the end of the file is a preallocated segment's unwritten rest: the dump
ends there quietly (Kafka reports a record of size 0).
Unlike Kafka, a corrupt snapshot (bad CRC, version or length) is an error naming the file
(Kafka prints the message and exits 0), and a ``.txnindex`` ending in a partial entry is
dumped up to it and then reported as an error (Kafka skips the partial entry silently).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import struct
import sys
import zlib
from dataclasses import dataclass

from ..log import safeio
from ..log.bytesource import FdSource
from ..log.config import LogConfig
from ..log.errors import CorruptIndexError, LogError
from ..log.index import OffsetIndex, TimeIndex
from ..log.names import parse_segment_filename
from ..log.producer_state import CorruptSnapshotError, read_snapshot
from ..log.segment import LogSegment
from ..log.txnindex import TransactionIndex
from ..log.walk import BatchOrder, ZeroTail, walk_batches
from ..record import LOG_APPEND_TIME, RecordBatch, compression, legacy
from ..record.batch import HEADER_PEEK, TIMESTAMP_TYPE_NAMES
from ..record.errors import CorruptRecordError
from ..record.legacy import LegacyBatch
from .common import add_log_dir_args, broker_config
from .dump_decoders import (
    Decoded,
    add_decoder_args,
    chosen_decoder,
    control_fields,
    json_value,
    record_data,
)

INT_MAX = 0x7FFFFFFF
RECORD_INDENT = "|"
STRING_DECODERS = ("org.apache.kafka.tools.api.StringDecoder", "kafka.serializer.StringDecoder")

# framing shared by every message format (offset i64, size i32, ..., magic at byte 16)
LOG_OVERHEAD = 12
RECORD_OVERHEAD_V0 = 14  # smallest legal entry size (LegacyRecord.RECORD_OVERHEAD_V0)
_OFFSET_SIZE = struct.Struct(">qi")

COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
READ_CHUNK = 1024 * 1024


# -- command line -----------------------------------------------------------------------
def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 0 <= value <= INT_MAX:
        raise argparse.ArgumentTypeError(f"must be between 0 and {INT_MAX}: {value}")
    return value


def register(subparsers) -> None:
    """Add the ``dump`` sub-command (kafka-dump-log.sh's options) to ``subparsers``."""
    p = subparsers.add_parser(
        "dump", help="print segment, index and time index files (kafka-dump-log.sh)",
        description="This tool helps to parse a log file and dump its contents to the console, "
                    "useful for debugging a seemingly corrupt log segment (Kafka's "
                    "kafka-dump-log.sh). Files are opened read-only.")
    p.add_argument("--files", required=True, metavar="file1,file2,...",
                   help="REQUIRED: The comma separated list of data and index log files to be "
                        "dumped. With --log-dirs or --config, a relative name is looked up in "
                        "each log dir (--files orders-0/00000000000000000000.log).")
    add_log_dir_args(p)
    p.add_argument("--print-data-log", action="store_true",
                   help="If set, printing the messages content when dumping data logs. "
                        "Automatically set if any decoder option is specified.")
    p.add_argument("--deep-iteration", action="store_true",
                   help="If set, uses deep instead of shallow iteration. Automatically set if "
                        "print-data-log is enabled.")
    p.add_argument("--index-sanity-check", action="store_true",
                   help="If set, just checks the index sanity without printing its content. "
                        "This is the same check that is executed on broker startup to determine "
                        "if an index needs rebuilding or not.")
    p.add_argument("--verify-index-only", action="store_true",
                   help="If set, just verify the index log without printing its content.")
    p.add_argument("--max-message-size", type=_non_negative_int, default=5 * 1024 * 1024,
                   metavar="size", help="Size of largest message. (default: 5242880)")
    p.add_argument("--max-bytes", type=_non_negative_int, default=INT_MAX, metavar="size",
                   help="Limit the amount of total batches read in bytes avoiding reading the "
                        "whole .log file(s). (default: 2147483647)")
    p.add_argument("--skip-record-metadata", action="store_true",
                   help="Whether to skip printing metadata for each record.")
    p.add_argument("--json", action="store_true",
                   help="kafkafs only: print the same information as JSON Lines, one object "
                        "per line with a \"type\" (file, log_start, kraft_snapshot, batch, "
                        "record, invalid_bytes, index_entry, time_index_entry, index_empty, "
                        "producer_snapshot_entry, aborted_txn, finding, error); stderr stays "
                        "as without it")
    for which in ("value", "key"):
        p.add_argument(f"--{which}-decoder-class", nargs="?", const=STRING_DECODERS[0],
                       default=None, metavar="class",
                       help="accepted for compatibility and ignored: kafkafs prints keys and "
                            "values as UTF-8 (invalid bytes replaced), like Kafka's "
                            "StringDecoder; implies --print-data-log")
    add_decoder_args(p)
    p.set_defaults(func=run)


@dataclass
class DumpOptions:
    """What to print (``DumpLogSegmentsOptions``). Sizes are bytes."""

    print_data_log: bool = False
    deep_iteration: bool = False
    index_sanity_only: bool = False
    verify_only: bool = False
    max_message_size: int = 5 * 1024 * 1024
    max_bytes: int = INT_MAX
    skip_record_metadata: bool = False
    json: bool = False
    decoder: str | None = None  # an internal topic's decoder (cli/dump_decoders.py)

    @classmethod
    def from_args(cls, args) -> DumpOptions:
        decoder = chosen_decoder(args)
        decoders = (getattr(args, "value_decoder_class", None) is not None
                    or getattr(args, "key_decoder_class", None) is not None
                    or decoder is not None)
        print_data = bool(args.print_data_log) or decoders
        return cls(print_data_log=print_data,
                   deep_iteration=bool(args.deep_iteration) or print_data,
                   index_sanity_only=bool(args.index_sanity_check),
                   verify_only=bool(args.verify_index_only),
                   max_message_size=args.max_message_size,
                   max_bytes=args.max_bytes,
                   skip_record_metadata=bool(args.skip_record_metadata),
                   json=bool(getattr(args, "json", False)), decoder=decoder)


def run(args, out=None, err=None) -> int:
    """Dump every file of ``args.files``; returns the exit status (see the module docs).
    ``out``/``err`` default to ``sys.stdout``/``sys.stderr``."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    for which in ("value", "key"):
        cls = getattr(args, f"{which}_decoder_class", None)
        if cls is not None and cls not in STRING_DECODERS:
            err.write(f"Note: --{which}-decoder-class {cls} is ignored: kafkafs prints keys and "
                      "values as UTF-8 text (invalid bytes replaced).\n")
    files = resolve_files([f for f in args.files.split(",") if f.strip()], args)
    dumper = LogDumper(DumpOptions.from_args(args), out, err)
    return dumper.dump_files(files)


class NotInLogDirs(str):
    """A relative ``--files`` name found in none of the log dirs (:func:`resolve_files`);
    ``log_dirs``: where it was looked for."""

    log_dirs: tuple = ()


def resolve_files(names: list[str], args) -> list[str]:
    """The files to dump: ``names`` as given (relative to the current directory, as
    kafka-dump-log takes them), unless the log dirs are named (``--log-dirs``, or
    ``log.dirs`` of ``--config``/``--override``): then a relative name is looked up in each
    of them, in order, and stands for every one it exists in (a name in none is a
    :class:`NotInLogDirs`, reported as the dump reaches it). Raises CliError for a bad
    --config."""
    overrides = getattr(args, "override", None) or []
    if not (getattr(args, "log_dirs", None) or getattr(args, "config", None)
            or any(o.split("=", 1)[0].strip() in ("log.dirs", "log.dir") for o in overrides)):
        return names
    log_dirs = broker_config(args).log_dirs
    out: list[str] = []
    for name in names:
        if os.path.isabs(name):
            out.append(name)
            continue
        found = [os.path.join(d, name) for d in log_dirs
                 if os.path.lexists(os.path.join(d, name))]
        if not found:
            missing = NotInLogDirs(name)
            missing.log_dirs = tuple(log_dirs)
            found = [missing]
        out.extend(found)
    return out


# -- reading a .log ---------------------------------------------------------------------
class SegmentFile:
    """A ``.log`` file opened read-only, its batches walked by the log layer's one walker
    (:func:`kafkafs.log.walk.walk_batches` over an
    :class:`~kafkafs.log.bytesource.FdSource`, docs/design.md §5.3): record batches (magic 2)
    as :class:`~kafkafs.record.batch.RecordBatch`, legacy message-set entries (magic 0/1) as
    :class:`~kafkafs.record.legacy.LegacyBatch`.

    The walk stops quietly, like Kafka's ``FileLogInputStream``, when fewer than 17 bytes are
    left or an entry runs past the end (a torn tail: the dump reports "invalid bytes", in a
    segment that is not the last too), and -- unlike Kafka, which calls it a record of size
    0 -- at a run of zeros that reaches the end of the file (a preallocated segment's
    unwritten rest: :attr:`zeros` then knows it); it raises CorruptRecordError naming the
    file and position for a size below the minimum entry overhead, zeros followed by data,
    an unknown magic or a malformed v2 header. CRCs and offsets are the dump's to judge
    (:func:`_entry_damage`): it prints a damaged batch's line before it stops.
    """

    def __init__(self, path: str, *, beside: bool = False):
        self.path = path
        if beside:  # found beside a file the user named: never a link, FIFO or device
            with safeio.parent(path) as (d, name):
                self._fd = d.open_file(name)
        else:
            self._fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        self.size = os.fstat(self._fd).st_size
        self.source = FdSource(self._fd, path)
        self.zeros = ZeroTail()

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def zero_tail(self) -> bool:
        """Whether a walk ended at a zero run reaching the end of the file."""
        return self.zeros.known is not None

    def entries(self, start: int = 0, end: int | None = None, chunk_size: int = READ_CHUNK):
        """Yield the batches from ``start`` (an entry boundary) up to ``end`` (default EOF),
        read ``chunk_size`` bytes at a time (a point lookup asks for little: a larger batch
        is read whole)."""
        end = self.size if end is None else min(end, self.size)
        return walk_batches(self.source, start, end, chunk_size=chunk_size, zeros=self.zeros)

    def entry_at(self, pos: int, end: int):
        """The batch starting at ``pos``; None when it does not fit before ``end``."""
        walk = self.entries(pos, end, chunk_size=HEADER_PEEK)
        try:
            return next(walk, None)
        finally:
            walk.close()


# -- output objects: one dict per line, rendered as Kafka's text or as JSON ---------------
# Every line the dump prints is first built as a dict: "type" first, then its fields in the
# order of Kafka's line, named after Kafka's labels in snake_case (baseOffset → base_offset)
# with native values (bool, int, None for OptionalLong.empty, a list of header keys, bytes
# for a key or payload). render_text() turns it into Kafka's line, render_json() into a JSON
# line (--json); so both outputs come from the same code path and carry the same fields.

#: keys whose value Kafka prints as an OptionalLong (None: ``OptionalLong.empty``)
OPTIONAL_LONG_KEYS = frozenset({"delete_horizon_ms", "current_txn_first_offset"})

#: record keys that are not part of the generic ``label: value`` metadata
_RECORD_NON_METADATA = frozenset({"control_type", "control_type_id", "coordinator_epoch",
                                  "control_label", "control_data", "key", "payload"})

#: a finding's indentation under its heading line (Kafka's)
FINDING_INDENT = {"index_mismatch": "  ", "timestamp_mismatch": "  ",
                  "timestamp_out_of_order": "  ", "offset_not_found": "",
                  "non_consecutive_offsets": "  ", "index_sanity_check": ""}

_LABELS: dict[str, str] = {}


def kafka_label(key: str) -> str:
    """Kafka's camelCase label for a JSON key: ``base_offset`` → ``baseOffset``."""
    label = _LABELS.get(key)
    if label is None:
        first, *rest = key.split("_")
        label = _LABELS[key] = first + "".join(word.capitalize() for word in rest)
    return label


_JAVA_BOOLEAN = {True: "true", False: "false"}


def _optional_long(value) -> str:
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def _text(data) -> str:
    """Kafka's StringDecoder: ``new String(bytes, UTF_8)``; a decoder's text as it is."""
    return data if isinstance(data, str) else data.decode("utf-8", "replace")


def _control_text(obj: dict) -> str:
    """What DumpLogSegments prints after a control record's metadata."""
    name = obj["control_type"]
    if "coordinator_epoch" in obj:
        return f" endTxnMarker: {name} coordinatorEpoch: {obj['coordinator_epoch']}"
    if "control_data" in obj:  # a KRaft control record (Kafka 4.1's printControlRecord)
        return f" {obj['control_label']} {obj['control_data']}"
    return f" controlType: {name}({obj['control_type_id']})"


def _data_text(obj: dict, prefix: str) -> str:
    """`` key: K`` (after ``prefix``) and `` payload: V`` of a record, each when not null."""
    key = obj["key"]
    line = "" if key is None else f"{prefix}key: {_text(key)}"
    value = obj["payload"]
    if value is not None:
        # Kafka prints " payload:" whatever the prefix (so no "|" without metadata and
        # key): kept for identical output
        line += f" payload: {_text(value)}"
    return line


def _kraft_snapshot_text(obj: dict) -> str:
    if obj["bootstrap"]:
        return "KRaft bootstrap snapshot"
    return f"Snapshot end offset: {obj['end_offset']}, epoch: {obj['epoch']}"


#: object type → its text line, for the types that are not ``label: value`` pairs
TEXT_RENDERERS = {
    "file": lambda o: f"Dumping {o['path']}",
    "log_start": lambda o: f"Log starting offset: {o['offset']}",
    "kraft_snapshot": _kraft_snapshot_text,
    "invalid_bytes": lambda o: f"Found {o['bytes']} invalid bytes at the end of {o['name']}",
    "index_empty": lambda o: f"{o['path']} is empty.",
    "finding": lambda o: FINDING_INDENT[o["kind"]] + o["message"],
    "error": lambda o: o["message"],
}

#: object types Kafka prints as ``label: value`` pairs, in the order of their keys
FIELD_TYPES = frozenset({"batch", "record", "index_entry", "time_index_entry",
                         "producer_snapshot_entry", "aborted_txn"})


def _literal(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _fields_template(keys: tuple, leave_out: frozenset, sample: dict) -> str:
    """An f-string body printing the fields ``keys`` (but ``type`` and ``leave_out``) of an
    object like ``sample`` as ``label: value`` (``true``, ``OptionalLong[N]``, ``[a,b]``;
    ``timestamp_type`` and ``timestamp`` as Kafka's ``CreateTime: T``). A key's value type
    is the same in every object (bool, int, str, list; None only for an OptionalLong)."""
    pieces = []
    typed = "timestamp_type" in keys
    for key in keys:
        if key == "type" or key in leave_out:
            continue
        ref = f"o[{key!r}]"
        if key == "timestamp_type":
            pieces.append(f"{{{ref}}}: {{o['timestamp']}}")
            continue
        if key == "timestamp" and typed:
            continue
        value = sample[key]
        if key in OPTIONAL_LONG_KEYS:
            text = f"{{_optional_long({ref})}}"
        elif isinstance(value, bool):
            text = f"{{_JAVA_BOOLEAN[{ref}]}}"
        elif isinstance(value, list):
            text = f"[{{','.join({ref})}}]"
        else:
            text = f"{{{ref}}}"
        pieces.append(f"{_literal(kafka_label(key))}: {text}")
    return " ".join(pieces)


def _compile_text(keys: tuple, sample: dict):
    """The text renderer of objects with ``keys`` (like ``sample``): for FIELD_TYPES one
    f-string compiled per set of keys, as these lines are printed per batch and record."""
    kind = sample["type"]
    if kind not in FIELD_TYPES:
        return TEXT_RENDERERS[kind]
    if kind != "record":
        template = _fields_template(keys, frozenset(), sample)
    else:
        # ``| offset: ...`` (metadata, then a control record's type) without
        # --skip-record-metadata, `` key: K payload: V`` with --print-data-log
        template, prefix = "", f"{RECORD_INDENT} "
        if "offset" in keys:
            template = _literal(prefix) + _fields_template(keys, _RECORD_NON_METADATA, sample)
            if "crc" in keys:  # only a legacy record has a CRC of its own
                template += _literal(LEGACY_RECORD_CRC_SUFFIX)
            if "control_type" in keys:
                template += "{_control_text(o)}"
            prefix = " "
        if "payload" in keys:
            template += f"{{_data_text(o, {prefix!r})}}"
    assert "\\" not in template and '"' not in template, template
    return eval(f'lambda o: f"{template}"',  # built from our own keys only
                {"_JAVA_BOOLEAN": _JAVA_BOOLEAN, "_optional_long": _optional_long,
                 "_control_text": _control_text, "_data_text": _data_text})


#: an object's type and keys → its text renderer
_TEXT_RENDERER_CACHE: dict = {}


def render_text(obj: dict) -> str:
    """The line Kafka's kafka-dump-log.sh prints for ``obj`` (without the newline)."""
    signature = (obj["type"], *obj)
    render = _TEXT_RENDERER_CACHE.get(signature)
    if render is None:
        render = _TEXT_RENDERER_CACHE[signature] = _compile_text(signature[1:], obj)
    return render(obj)


def _json_default(value):
    """A key or payload: text when it is UTF-8, else ``{"base64": ...}``."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(value).decode("ascii")}
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


_JSON_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"),
                                 default=_json_default)


def render_json(obj: dict) -> str:
    """``obj`` as one line of JSON (non-ASCII text as it is, not escaped); a decoder's
    texts as the JSON values they hold."""
    if any(isinstance(v, Decoded) for v in obj.values()):
        obj = {k: json_value(v) if isinstance(v, Decoded) else v for k, v in obj.items()}
    return _JSON_ENCODER.encode(obj)


# -- per-magic objects -------------------------------------------------------------------
def _increment_sequence(sequence: int, increment: int) -> int:
    """``DefaultRecordBatch.incrementSequence``: wraps past Integer.MAX_VALUE to 0."""
    if sequence > INT_MAX - increment:
        return increment - (INT_MAX - sequence) - 1
    return sequence + increment


def _timestamp_type_name(batch: RecordBatch) -> str:
    return "LogAppendTime" if batch.timestamp_type == LOG_APPEND_TIME else "CreateTime"


def _v2_batch(b: RecordBatch, position: int) -> dict:
    last_seq = -1 if b.base_sequence == -1 else _increment_sequence(b.base_sequence,
                                                                     b.last_offset_delta)
    return {
        "type": "batch", "base_offset": b.base_offset, "last_offset": b.last_offset,
        "count": b.records_count, "base_sequence": b.base_sequence, "last_sequence": last_seq,
        "producer_id": b.producer_id, "producer_epoch": b.producer_epoch,
        "partition_leader_epoch": b.partition_leader_epoch,
        "is_transactional": b.is_transactional, "is_control": b.is_control,
        "delete_horizon_ms": b.base_timestamp if b.has_delete_horizon else None,
        "position": position, "timestamp_type": _timestamp_type_name(b),
        "timestamp": b.max_timestamp, "size": b.size, "magic": b.magic,
        "compresscodec": COMPRESSION_NAMES.get(b.compression, f"unknown({b.compression})"),
        "crc": b.crc, "isvalid": b.is_valid(),
    }


def _v2_records(dumper: LogDumper, b: RecordBatch, file_key: str):
    """Yield a ``record`` object per record of a v2 batch."""
    opts = dumper.options
    metadata = not opts.skip_record_metadata
    data = opts.print_data_log and not b.is_control
    ts_name = _timestamp_type_name(b)
    for r in b.records():
        dumper.track_offset(file_key, r.offset)
        if metadata:
            obj = {"type": "record", "offset": r.offset, "timestamp_type": ts_name,
                   "timestamp": r.timestamp, "key_size": -1 if r.key is None else len(r.key),
                   "value_size": -1 if r.value is None else len(r.value),
                   "sequence": (-1 if b.base_sequence < 0 else
                                _increment_sequence(b.base_sequence, r.offset - b.base_offset)),
                   "header_keys": [k for k, _v in r.headers]}
            if b.is_control:
                obj.update(control_fields(r.key, r.value))
        else:
            obj = {"type": "record"}
        if data:
            obj["key"], obj["payload"] = _record_data(opts, r.offset, r.key, r.value, b)
        yield obj


def _record_data(opts: DumpOptions, offset: int, key, value, entry) -> tuple:
    """``(key, payload)`` of a data record: its bytes, or the decoder's texts. Raises
    CorruptRecordError (located at the entry) where a decoder cannot go on."""
    if opts.decoder is None:
        return key, value
    try:
        return record_data(opts.decoder, offset, key, value)
    except CorruptRecordError as exc:
        raise exc.located(path=entry.path, position=entry.position) from None


# -- legacy message sets (magic 0 and 1) ---------------------------------------------------
# Read here from the entry's bytes rather than through record.legacy.LegacyBatch, which has no
# inner message CRCs or magics (both printed or used per record below), checks the key/value
# layout before anything is printed (Kafka prints the entry line, isvalid false, of a damaged
# message) and rejects a partial inner message at the end of a wrapper (Kafka's
# DataLogInputStream stops there silently).

#: Kafka 3.0+ prints ``crc: ${r.checksum}}`` for a legacy record (DumpLogSegments.scala, one
#: brace too many); the Java port of the tool (KAFKA-14579) prints the number alone.
LEGACY_RECORD_CRC_SUFFIX = "}"

_LEGACY_HEAD = struct.Struct(">Ibb")  # crc, magic, attributes (at CRC_OFFSET)
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


@dataclass
class _LegacyRecord:
    """What DumpLogSegments prints of a legacy record (``AbstractLegacyRecordBatch`` as a
    ``Record``): the outer message of an uncompressed entry, or one inner message of a
    compressed wrapper."""

    offset: int
    timestamp: int
    key_size: int
    value_size: int
    key: bytes | None
    value: bytes | None
    crc: int
    valid: bool


def _legacy_timestamp_type(magic: int, attributes: int) -> int:
    """``LegacyRecord.timestampType`` of a message read on its own (no wrapper)."""
    if magic == 0:
        return legacy.NO_TIMESTAMP_TYPE
    return legacy.LOG_APPEND_TIME if attributes & legacy.TIMESTAMP_TYPE_MASK else \
        legacy.CREATE_TIME


def _legacy_head(buf, start: int) -> tuple[int, int, int, int]:
    """``(crc, magic, attributes, timestamp)`` of the message whose CRC is at ``buf[start]``
    (timestamp -1 for magic 0). The caller guarantees RECORD_OVERHEAD_V0 bytes."""
    crc, magic, attributes = _LEGACY_HEAD.unpack_from(buf, start)
    attributes &= 0xFF
    timestamp = legacy.NO_TIMESTAMP
    if magic != 0:  # LegacyRecord.timestamp: only magic 0 has none
        (timestamp,) = _I64.unpack_from(buf, start + legacy.TIMESTAMP_OFFSET - legacy.CRC_OFFSET)
    return crc, magic, attributes, timestamp


def _legacy_key_value(buf, start: int, end: int, magic: int):
    """``(key size, value size, key, value)`` of the message in ``buf[start:end]`` (sizes -1
    and None for null), read as ``LegacyRecord`` reads them. Raises CorruptRecordError when a
    size points past the message."""
    pos = start + (legacy.RECORD_OVERHEAD_V0 if magic == 0 else legacy.RECORD_OVERHEAD_V1) - 8
    found = []
    for what in ("key", "value"):
        if pos + 4 > end:
            raise CorruptRecordError(f"legacy message (magic {magic}) ends before its {what} "
                                     "size")
        (n,) = _I32.unpack_from(buf, pos)
        pos += 4
        if pos + max(n, 0) > end:  # (any negative size is null, as Utils.sizeDelimited)
            raise CorruptRecordError(f"legacy message (magic {magic}) has {what} size {n}, "
                                     f"past its end")
        found.append((n, None if n < 0 else bytes(buf[pos:pos + n])))
        pos += max(n, 0)
    (key_size, key), (value_size, value) = found
    return key_size, value_size, key, value


def _legacy_record(buf, start: int, end: int, offset: int, timestamp: int) -> _LegacyRecord:
    """The record of the message in ``buf[start:end]`` at ``offset`` with ``timestamp``."""
    crc, magic, _attributes, _ts = _legacy_head(buf, start)
    key_size, value_size, key, value = _legacy_key_value(buf, start, end, magic)
    valid = zlib.crc32(buf[start + 4:end]) == crc
    return _LegacyRecord(offset, timestamp, key_size, value_size, key, value, crc, valid)


def _legacy_records(entry: LegacyBatch):
    """Yield the records of a legacy entry as Kafka iterates them (``AbstractLegacyRecordBatch
    .iterator``): the entry itself when uncompressed, else the inner messages of the wrapper
    (``DeepRecordsIterator``) with absolute offsets and their timestamps.

    Raises CorruptRecordError where Kafka throws: before the first record of a wrapper that
    cannot be decompressed or holds no message or a bad offset; at the record for an inner
    message that is compressed or whose key/value sizes are out of bounds."""
    data = entry.buffer
    start, end = LOG_OVERHEAD, entry.size
    try:
        _crc, magic, attributes, timestamp = _legacy_head(data, start)
        codec = attributes & legacy.COMPRESSION_MASK
        if codec == compression.NONE:
            yield _legacy_record(data, start, end, entry.offset, timestamp)
            return
        if codec not in (compression.GZIP, compression.SNAPPY, compression.LZ4):
            name = COMPRESSION_NAMES.get(codec, f"unknown({codec})")
            raise CorruptRecordError(f"legacy message (magic {magic}) has compression codec "
                                     f"{name}, which message format v{magic} does not have")
        _ks, _vs, _key, wrapped = _legacy_key_value(data, start, end, magic)
        if wrapped is None:
            raise CorruptRecordError(f"compressed legacy message (magic {magic}) has a null "
                                     "value")
        inner = compression.decompress(codec, wrapped)
        # (offset, start, end, magic) of each whole inner message; a partial one at the end
        # is ignored, as DataLogInputStream.nextBatch returns null for it
        messages = []
        pos, n = 0, len(inner)
        while n - pos >= LOG_OVERHEAD:
            offset, size = _OFFSET_SIZE.unpack_from(inner, pos)
            if size < RECORD_OVERHEAD_V0:
                raise CorruptRecordError(f"inner message size {size} of a compressed legacy "
                                         f"message is smaller than the minimum record "
                                         f"overhead ({RECORD_OVERHEAD_V0})")
            if n - pos - LOG_OVERHEAD < size:
                break
            at = pos + LOG_OVERHEAD
            messages.append((offset, at, at + size, inner[at + legacy.MAGIC_OFFSET
                                                            - legacy.CRC_OFFSET]))
            pos = at + size
        if not messages:
            raise CorruptRecordError("compressed legacy message holds no inner messages")
        base = 0
        if magic == 1 and entry.offset != 0:
            # relative inner offsets (an outer offset 0, written by some producers, leaves
            # them as they are)
            last_inner = messages[-1][0]
            if entry.offset < last_inner:
                raise CorruptRecordError(
                    f"wrapper offset {entry.offset} of a compressed v1 message is less than "
                    f"its last inner offset {last_inner} and not zero")
            base = entry.offset - last_inner
        log_append = _legacy_timestamp_type(magic, attributes) == legacy.LOG_APPEND_TIME
        for offset, at, stop, inner_magic in messages:
            if inner_magic == 1 and log_append:
                inner_ts = timestamp
            else:
                inner_ts = _legacy_head(inner, at)[3]
            if inner[at + legacy.ATTRIBUTES_OFFSET - legacy.CRC_OFFSET] \
                    & legacy.COMPRESSION_MASK:
                raise CorruptRecordError("inner messages must not be compressed (offset "
                                         f"{offset + base})")
            yield _legacy_record(inner, at, stop, offset + base if magic == 1 else offset,
                                 inner_ts)
    except CorruptRecordError as exc:
        raise exc.located(position=entry.position) from None


def segment_order(path: str) -> BatchOrder:
    """The order rules (:class:`~kafkafs.log.walk.BatchOrder`) a reader of the partition
    holds this file's batches to (:meth:`kafkafs.log.log.Log.segment_batches`), so that dump
    names the same first damage as consume, get-offsets and check: offsets that increase,
    from the segment's base offset (taken from the file name when it names a ``.log``: not a
    snapshot's) on, below ``next_base``, the base offset of the next segment beside it, and
    in the last segment (no later one beside it) below ``end``, the log end offset a reader
    takes from the segment's tail (:meth:`~kafkafs.log.segment.LogSegment.read_next_offset`).
    No bounds for a file not named as a segment, or one that cannot be opened as one (a
    link the user named: readers never follow one)."""
    parsed = parse_segment_filename(os.path.basename(path))
    segment_base = parsed[0] if parsed and parsed[1] == ".log" else None
    if not parsed or parsed[1] != ".log" or parsed[2]:
        return BatchOrder(segment_base)
    base = parsed[0]
    try:
        with safeio.Dir.open(os.path.dirname(os.path.abspath(path)), follow=True) as pdir:
            with os.scandir(pdir.fd) as it:
                later = [p[0] for e in it if e.is_file(follow_symlinks=False)
                         for p in [parse_segment_filename(e.name)]
                         if p and p[1] == ".log" and not p[2] and p[0] > base]
            if later:
                return BatchOrder(base, next_base=min(later))
            segment = LogSegment(pdir, base, LogConfig(), writable=False, check_indexes=False)
            try:
                return BatchOrder(base, end=segment.read_next_offset())
            finally:
                segment.close()
    except (OSError, LogError):
        return BatchOrder(base)


def _entry_damage(batch, obj: dict, order: BatchOrder, path: str
                  ) -> CorruptRecordError | None:
    """What is wrong with a batch the walker framed, as the error the dump ends with (None
    when nothing is): the CRC its line shows as ``isvalid``, then its offsets out of place
    under ``order`` (:func:`segment_order`; :meth:`~kafkafs.log.walk.BatchOrder.check`, which
    moves on past a batch in order)."""
    if not obj["isvalid"]:
        computed = batch.compute_crc() if batch.magic >= 2 else \
            zlib.crc32(batch.buffer[LOG_OVERHEAD + 4:])
        return CorruptRecordError(
            f"record batch is corrupt (stored crc = {obj['crc']}, computed crc = {computed})",
            path=path, position=batch.position)
    try:
        order.check(batch, path)
    except CorruptRecordError as exc:
        return exc
    return None


def _records_damage(entry, objs: list[dict], path: str) -> CorruptRecordError | None:
    """A legacy wrapper whose inner message fails its own CRC (its record lines say
    ``isValid: false``) as the error the dump ends with, or None."""
    for obj in objs:
        if obj.get("is_valid") is False:
            return CorruptRecordError(
                f"inner message at offset {obj['offset']} is corrupt (stored crc = "
                f"{obj['crc']})", path=path, position=entry.position)
    return None


def _legacy_entry(entry: LegacyBatch, position: int) -> dict:
    """``printBatchLevel`` for magic < 2: ``offset: <lastOffset>`` then the fields every
    entry has. The CRC check covers the whole message, the rest is its header."""
    data = entry.buffer
    crc, magic, attributes, timestamp = _legacy_head(data, LOG_OVERHEAD)
    codec = attributes & legacy.COMPRESSION_MASK
    return {
        "type": "batch", "offset": entry.offset, "position": position,
        "timestamp_type": TIMESTAMP_TYPE_NAMES[_legacy_timestamp_type(magic, attributes)],
        "timestamp": timestamp, "size": entry.size, "magic": magic,
        "compresscodec": COMPRESSION_NAMES.get(codec, f"unknown({codec})"), "crc": crc,
        "isvalid": zlib.crc32(data[LOG_OVERHEAD + 4:]) == crc,
    }


def _legacy_record_objects(dumper: LogDumper, entry: LegacyBatch, file_key: str):
    """A ``record`` object per legacy record: the metadata Kafka prints for every record
    (the entry's timestamp type) then ``is_valid`` and ``crc`` (text: `` isValid: B crc:
    C}``)."""
    opts = dumper.options
    _crc, magic, attributes, _ts = _legacy_head(entry.buffer, LOG_OVERHEAD)
    ts_name = TIMESTAMP_TYPE_NAMES[_legacy_timestamp_type(magic, attributes)]
    for r in _legacy_records(entry):
        dumper.track_offset(file_key, r.offset)
        obj = {"type": "record"}
        if not opts.skip_record_metadata:
            obj.update(offset=r.offset, timestamp_type=ts_name, timestamp=r.timestamp,
                       key_size=r.key_size, value_size=r.value_size, is_valid=r.valid,
                       crc=r.crc)
        if opts.print_data_log:
            obj["key"], obj["payload"] = _record_data(opts, r.offset, r.key, r.value, entry)
        yield obj


#: magic → (batch object, record objects)
BATCH_OBJECTS = {
    2: (_v2_batch, _v2_records),
    1: (_legacy_entry, _legacy_record_objects),
    0: (_legacy_entry, _legacy_record_objects),
}


# -- the dumper --------------------------------------------------------------------------
class LogDumper:
    """Dumps files one after another (``DumpLogSegments.main``) and collects the findings
    printed at the end (index mismatches, time index errors, non-consecutive offsets).

    ``out``/``err``: text streams. ``unsupported`` is set when something could not be shown.
    Every line goes through :meth:`emit` as an object (see :func:`render_text`).
    """

    def __init__(self, options: DumpOptions, out, err):
        self.options = options
        self.out = out
        self.err = err
        self.unsupported = False
        self.emit = self._emit_json if options.json else self._emit_text
        # file (absolute path) → findings, in discovery order
        self.index_mismatches: dict[str, list[tuple[int, int]]] = {}
        self.time_mismatches: dict[str, list[tuple[int, int]]] = {}
        self.time_out_of_order: dict[str, list[tuple[int, int]]] = {}
        self.time_not_found: dict[str, list[tuple[int, int]]] = {}
        self.non_consecutive: dict[str, list[tuple[int, int]]] = {}
        self._last_offsets: dict[str, int] = {}

    # -- output ------------------------------------------------------------------------
    def _emit_text(self, obj: dict, err: bool = False) -> None:
        """Print ``obj`` as Kafka's line, on ``err`` when Kafka prints it on stderr."""
        (self.err if err else self.out).write(render_text(obj) + "\n")

    def _emit_json(self, obj: dict, err: bool = False) -> None:
        """Print ``obj`` as a JSON line on ``out``; an ``err`` line also goes to ``err`` as
        text, as without --json."""
        self.out.write(render_json(obj) + "\n")
        if err:
            self.out.flush()
            self.err.write(render_text(obj) + "\n")

    # -- driver ------------------------------------------------------------------------
    def dump_files(self, files) -> int:
        """Dump each file, then print the findings; returns the exit status."""
        failed = False
        for path in files:
            self.emit({"type": "file", "path": path})
            if isinstance(path, NotInLogDirs):
                self.error(f"error: {path}: no such file in the log dirs "
                           f"({', '.join(path.log_dirs)})", path)
                failed = True
                continue
            name = os.path.basename(path)
            dot = name.rfind(".")
            suffix = name[dot:] if dot >= 0 else ""
            handler = SUFFIX_DUMPERS.get(suffix)
            if handler is None:
                self.error(f"Ignoring unknown file {path}", path)
                continue
            try:
                handler(self, path)
            except CorruptRecordError as exc:
                self.error(f"error: {exc}", path, exc.position)
                failed = True
            except (CorruptIndexError, CorruptSnapshotError) as exc:
                self.error(f"error: {exc}", path)
                failed = True
            except BrokenPipeError:
                raise
            except OSError as exc:
                self.error(f"error: {exc.filename or path}: {exc.strerror or exc}", path)
                failed = True
            except ValueError as exc:  # a file name that does not carry an offset
                self.error(f"error: {path}: {exc}", path)
                failed = True
        self.out.flush()
        self.print_findings()
        return 1 if failed or self.unsupported else 0

    def error(self, line: str, path: str, position: int | None = None) -> None:
        """Write ``line`` to ``err`` after what was printed so far (keeps terminal order);
        with --json also an ``error`` object on ``out``: ``path`` (the file being dumped),
        ``position`` (a byte position in it, when the error names one), ``message``
        (``line``)."""
        self.out.flush()
        obj = {"type": "error", "path": path}
        if position is not None:
            obj["position"] = position
        obj["message"] = line
        self.emit(obj, err=True)
        self.err.flush()

    def _finding(self, kind: str, path: str, message: str, heading: str | None = None,
                 **fields) -> None:
        """Print a ``finding`` object: ``fields`` are its values, ``message`` Kafka's line
        (without indentation) and ``heading`` the line Kafka prints above a group of them
        on stderr (only there)."""
        obj = {"type": "finding", "kind": kind, "path": path, **fields, "message": message}
        if heading is not None:
            obj["heading"] = heading
        self.emit(obj, err=heading is not None)

    def print_findings(self) -> None:
        """Print the collected findings to ``err`` in Kafka's words and order (with --json,
        also a ``finding`` object per entry on ``out``; heading lines are text only)."""
        err = self.err
        groups = []  # (kind, file, heading, [(message, fields)])
        # Kafka prepends to an immutable list, so these two come out newest first
        for name, pairs in self.index_mismatches.items():
            groups.append(("index_mismatch", name, f"Mismatches in :{name}", [
                (f"Index offset: {index_offset}, log offset: {log_offset}",
                 {"index_offset": index_offset, "log_offset": log_offset})
                for index_offset, log_offset in reversed(pairs)]))
        for name, pairs in self.time_mismatches.items():
            groups.append(("timestamp_mismatch", name, f"Found timestamp mismatch in :{name}", [
                (f"Index timestamp: {index_ts}, log timestamp: {log_ts}",
                 {"index_timestamp": index_ts, "log_timestamp": log_ts})
                for index_ts, log_ts in pairs]))
        for name, pairs in self.time_out_of_order.items():
            groups.append(("timestamp_out_of_order", name,
                           f"Found out of order timestamp in :{name}", [
                (f"Index timestamp: {index_ts}, Previously indexed timestamp: {prev_ts}",
                 {"index_timestamp": index_ts, "previously_indexed_timestamp": prev_ts})
                for index_ts, prev_ts in pairs]))
        for name, pairs in self.time_not_found.items():
            groups.append(("offset_not_found", name,
                           "The following indexed offsets are not found in the log.", [
                (f"Indexed offset: {index_offset}, found log offset: {log_offset}",
                 {"indexed_offset": index_offset, "found_log_offset": log_offset})
                for index_offset, log_offset in pairs]))
        for name, pairs in self.non_consecutive.items():
            groups.append(("non_consecutive_offsets", name, f"Non-consecutive offsets in {name}", [
                (f"{first} is followed by {second}", {"offset": first, "next_offset": second})
                for first, second in reversed(pairs)]))
        for kind, name, heading, entries in groups:
            err.write(heading + "\n")
            for message, fields in entries:
                self._finding(kind, name, message, heading, **fields)
        self.out.flush()
        err.flush()

    def track_offset(self, file_key: str, offset: int) -> None:
        """Record ``offset`` of the next record of ``file_key`` (deep iteration), noting a
        gap after the previous one."""
        last = self._last_offsets.get(file_key, -1)
        if last != -1 and offset != last + 1:
            self.non_consecutive.setdefault(file_key, []).append((last, offset))
        self._last_offsets[file_key] = offset

    # -- .log and KRaft snapshots ------------------------------------------------------
    def dump_log(self, path: str) -> None:
        """Batches (and with deep iteration, records) of a ``.log`` or ``.checkpoint``."""
        emit = self.emit
        name = os.path.basename(path)
        if name.endswith(".log"):
            emit({"type": "log_start", "offset": _offset_from_name(name)})
        elif name.endswith(".checkpoint"):
            if name == "bootstrap.checkpoint":
                emit({"type": "kraft_snapshot", "bootstrap": True})
            else:
                end_offset, epoch = _snapshot_id(name)
                emit({"type": "kraft_snapshot", "bootstrap": False, "end_offset": end_offset,
                      "epoch": epoch})
        opts = self.options
        file_key = os.path.abspath(path)
        damage = None  # the first damaged entry ends the file's dump
        order = segment_order(path) if name.endswith(".log") else BatchOrder()
        with SegmentFile(path) as log:
            end = min(log.size, opts.max_bytes)
            valid_bytes = 0
            for entry in log.entries(0, end):
                batch_object, record_objects = BATCH_OBJECTS[entry.magic]
                obj = batch_object(entry, valid_bytes)
                emit(obj)  # a damaged batch's line too, isvalid: false, as Kafka prints it
                damage = _entry_damage(entry, obj, order, path)
                if damage is not None:
                    break
                if opts.deep_iteration:
                    objs = list(record_objects(self, entry, file_key))
                    damage = _records_damage(entry, objs, path)
                    if damage is not None:
                        break
                    for obj in objs:
                        emit(obj)
                valid_bytes += entry.size
            trailing = end - valid_bytes
            if damage is None and trailing > 0 and opts.max_bytes == INT_MAX \
                    and not log.zero_tail:
                emit({"type": "invalid_bytes", "bytes": trailing, "name": name,
                      "position": valid_bytes})
        if damage is not None:
            # Kafka prints every batch (isvalid: false for a bad one) and exits 0; here the
            # dump of a file stops at its first damage and says where (docs/design.md §5)
            raise damage

    # -- .index ------------------------------------------------------------------------
    def dump_index(self, path: str) -> None:
        """Entries of an offset index, each checked against the first batch at its position
        (``DumpLogSegments.dumpIndex``)."""
        name = os.path.basename(path)
        start_offset = _offset_from_name(name)
        _require_file(path)
        index = OffsetIndex(_named(path), start_offset, writable=False)
        try:
            if index.entries == 0:
                self.emit({"type": "index_empty", "path": path})
                return
            if self.options.index_sanity_only:
                index.sanity_check()
                self._sanity_check_passed(path)
                return
            key = os.path.abspath(path)
            with SegmentFile(_sibling(path, ".log"), beside=True) as log:
                for i in range(index.entries):
                    offset, position = index.entry(i)
                    # a crash may leave zero entries in a preallocated file: stop at one
                    if offset == index.base_offset and i > 0:
                        return
                    log_offset = self._first_batch_last_offset(log, position)
                    if log_offset != offset:
                        self.index_mismatches.setdefault(key, []).append((offset, log_offset))
                    if not self.options.verify_only:
                        self.emit({"type": "index_entry", "offset": offset,
                                   "position": position})
        finally:
            index.close()

    def _sanity_check_passed(self, path: str) -> None:
        self._finding("index_sanity_check", path, f"{path} passed sanity check.", passed=True)

    def _first_batch_last_offset(self, log: SegmentFile, position: int) -> int:
        """Last offset of the entry at ``position`` (within ``max_message_size`` bytes), or
        -1 when there is none or it cannot be read."""
        try:
            entry = log.entry_at(position, min(log.size, position + self.options.max_message_size))
        except CorruptRecordError:
            return -1
        return -1 if entry is None else entry.last_offset

    # -- .timeindex --------------------------------------------------------------------
    def dump_time_index(self, path: str) -> None:
        """Entries of a time index, each checked against the ``.log`` through the ``.index``
        (``DumpLogSegments.dumpTimeIndex``)."""
        name = os.path.basename(path)
        start_offset = _offset_from_name(name)
        _require_file(path)
        time_index = TimeIndex(_named(path), start_offset, writable=False)
        index = None
        try:
            if self.options.index_sanity_only:
                time_index.sanity_check()
                self._sanity_check_passed(path)
                return
            if time_index.entries == 0:
                return
            index = OffsetIndex(_sibling(path, ".index"), start_offset, writable=False)
            key = os.path.abspath(path)
            prev_ts = -1
            with SegmentFile(_sibling(path, ".log"), beside=True) as log:
                for i in range(time_index.entries):
                    ts, offset = time_index.entry(i)
                    if offset == time_index.base_offset and i > 0:
                        return
                    _off, position = index.lookup(offset)
                    found = None
                    for entry in log.entries(position, chunk_size=HEADER_PEEK):
                        if entry.last_offset >= offset:
                            found = entry
                            break
                    if found is None:
                        self.time_not_found.setdefault(key, []).append((offset, -1))
                    elif found.last_offset != offset:
                        self.time_not_found.setdefault(key, []).append(
                            (offset, found.last_offset))
                    else:
                        records = (found.records() if found.magic >= 2
                                   else _legacy_records(found))
                        max_ts = -1  # RecordBatch.NO_TIMESTAMP, Kafka's starting value
                        for r in records:
                            max_ts = max(max_ts, r.timestamp)
                        if max_ts != ts:
                            self.time_mismatches.setdefault(key, []).append((ts, max_ts))
                        if prev_ts >= ts:
                            self.time_out_of_order.setdefault(key, []).append((ts, prev_ts))
                    if not self.options.verify_only:
                        self.emit({"type": "time_index_entry", "timestamp": ts,
                                   "offset": offset})
                    prev_ts = ts
        finally:
            time_index.close()
            if index is not None:
                index.close()

    # -- producer state and transaction index -------------------------------------------
    def dump_producer_snapshot(self, path: str) -> None:
        """One line per producer of a ``.snapshot`` (``DumpLogSegments.dumpProducerIdSnapshot``,
        Kafka 4.x). Raises CorruptSnapshotError, OSError."""
        for e in read_snapshot(_named(path)):
            obj = {"type": "producer_snapshot_entry", "producer_id": e.producer_id,
                   "producer_epoch": e.producer_epoch, "coordinator_epoch": e.coordinator_epoch,
                   "current_txn_first_offset": e.current_txn_first_offset,
                   "last_timestamp": e.last_timestamp}
            if e.has_batch_metadata:
                obj.update(first_sequence=e.first_sequence, last_sequence=e.last_sequence,
                           last_offset=e.last_offset, offset_delta=e.offset_delta,
                           timestamp=e.last_timestamp)
            self.emit(obj)

    def dump_txn_index(self, path: str) -> None:
        """One line per aborted transaction of a ``.txnindex`` (``DumpLogSegments.dumpTxnIndex``);
        nothing for a missing file. Raises CorruptIndexError for an unknown entry version
        (before printing) or a partial last entry (after printing the whole ones)."""
        index = TransactionIndex(_named(path), _offset_from_name(os.path.basename(path)),
                                 writable=False)
        for t in index.all_aborted_txns(allow_torn_tail=True):
            self.emit({"type": "aborted_txn", "version": t.version,
                       "producer_id": t.producer_id, "first_offset": t.first_offset,
                       "last_offset": t.last_offset,
                       "last_stable_offset": t.last_stable_offset})
        index.all_aborted_txns()  # a partial trailing entry: report it now


#: file suffix → dumper (Kafka dispatches on the text from the last '.')
SUFFIX_DUMPERS = {
    ".log": LogDumper.dump_log,
    ".checkpoint": LogDumper.dump_log,  # KRaft snapshots hold record batches too
    ".index": LogDumper.dump_index,
    ".timeindex": LogDumper.dump_time_index,
    ".snapshot": LogDumper.dump_producer_snapshot,
    ".txnindex": LogDumper.dump_txn_index,
}


def _offset_from_name(name: str) -> int:
    """The offset a segment file is named after (``name.split(".")[0]``)."""
    stem = name.split(".")[0]
    if not stem.isdigit():
        raise ValueError(f"file name does not start with an offset: {name}")
    return int(stem)


def _snapshot_id(name: str) -> tuple[int, int]:
    """``(end offset, epoch)`` of a KRaft snapshot named ``<20 digits>-<10 digits>.checkpoint``."""
    stem = name[: -len(".checkpoint")]
    offset, sep, epoch = stem.partition("-")
    if not (sep and len(offset) == 20 and offset.isdigit() and len(epoch) == 10
            and epoch.isdigit()):
        raise ValueError(f"not a KRaft snapshot file name: {name}")
    return int(offset), int(epoch)


def _named(path: str) -> str:
    """The file a path given on the command line names: a link the user named is followed
    (their choice); the files found beside it never are (:func:`_sibling`, opened through
    :mod:`kafkafs.log.safeio`)."""
    return os.path.realpath(path) if os.path.islink(path) else path


def _sibling(path: str, suffix: str) -> str:
    """The file of the same segment with ``suffix`` (``00..42.index`` → ``00..42.log``),
    beside ``path`` as named; open it with ``beside=True`` (never a link or special file)."""
    name = os.path.basename(path)
    return os.path.join(os.path.dirname(os.path.abspath(path)), name.split(".")[0] + suffix)


def _require_file(path: str) -> None:
    if not os.path.isfile(path):
        raise FileNotFoundError(2, "No such file", path)
