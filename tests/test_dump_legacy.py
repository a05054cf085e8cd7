"""``kafkafs dump`` of legacy message sets (magic 0 and 1), line for line as Kafka's
kafka-dump-log.sh (``DumpLogSegments``) prints them.

Kafka's lines (DumpLogSegments.scala, Kafka 3.0+: ``printBatchLevel`` and the deep iteration
in ``dumpLog``):

* entry: ``offset: <lastOffset> position: P <TimestampType>: <maxTimestamp> size: S magic: M
  compresscodec: C crc: CRC isvalid: B`` (``TimestampType.toString``: NoTimestampType for
  magic 0 with timestamp -1, CreateTime or LogAppendTime for magic 1);
* record: ``| offset: N <entry's TimestampType>: T keySize: K valueSize: V isValid: B crc:
  CRC}`` (the brace is Kafka's, ``s" isValid: ${r.isValid} crc: ${r.checksum}}"``), then
  `` key: ...``/`` payload: ...`` with --print-data-log. An uncompressed entry is its own one
  record; a compressed wrapper's records are its inner messages (absolute offsets, each with
  its own CRC).

Segments are written with kafka-python's ``LegacyRecordBatchBuilder`` and aiokafka's (C
extension), each builder's message set framed as it comes (offset i64 + size i32 per
message); what a broker does to them (offsets, a wrapper's timestamp, LogAppendTime) is done
here on their bytes, the CRC recomputed with kafka-python's ``calc_crc32``. Every expected
line is computed in this file from what was written: offsets and timestamps as assigned,
positions and sizes from the byte lengths, CRCs from the builders' metadata or the bytes
(checked against zlib's CRC-32).
"""

from __future__ import annotations

import io
import os
import struct
import zlib
from contextlib import redirect_stderr, redirect_stdout

import pytest
from aiokafka.record._crecords import LegacyRecordBatch as AioLegacyBatch
from aiokafka.record._crecords import LegacyRecordBatchBuilder as AioLegacyBuilder
from conftest import kafkafs
from crc32c import crc32c
from kafka.codec import gzip_encode
from kafka.record.default_records import DefaultRecordBatchBuilder as KpDefaultBuilder
from kafka.record.legacy_records import LegacyRecordBatch as KpLegacyBatch
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KpLegacyBuilder
from kafka.record.util import calc_crc32

from kafkafs.cli.main import main
from kafkafs.log.index import OffsetIndex, TimeIndex

NAME = "00000000000000000000"
TS = 1_600_000_000_000
LOG_APPEND_TS = 1_600_000_999_000
BATCH_SIZE = 1 << 20
NONE, GZIP, SNAPPY, LZ4 = 0, 1, 2, 3
CODEC = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4"}
BUILDERS = {"kafka-python": KpLegacyBuilder, "aiokafka": AioLegacyBuilder}
CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")

# legacy entry layout: offset i64, size i32, crc u32, magic i8, attributes i8, [timestamp i64]
L_CRC, L_MAGIC, L_ATTRIBUTES, L_TIMESTAMP = 12, 16, 17, 18


def run_dump(*argv):
    """``kafkafs dump`` through the command's entry point: (status, stdout lines, stderr
    lines). Lines are split on "\\n" only (payloads may hold other line breaks)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = main(["dump", *argv])
    return status, out.getvalue().split("\n")[:-1], err.getvalue().split("\n")[:-1]


def write_log(tmp_path, *entries: bytes) -> str:
    d = tmp_path / "t-0"
    d.mkdir(exist_ok=True)
    path = d / f"{NAME}.log"
    path.write_bytes(b"".join(entries))
    return str(path)


def t(b: bool) -> str:
    return "true" if b else "false"


def text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


# -- writing legacy message sets -------------------------------------------------------------
def content(i: int) -> tuple[bytes | None, bytes | None]:
    """Record i's key and value: a null key every 4th, a null value every 4th (shifted), an
    empty key with a binary value every 4th, else text."""
    if i % 4 == 1:
        return None, b"value %d, no key" % i
    if i % 4 == 2:
        return b"key-%d" % i, None
    if i % 4 == 3:
        return b"", b"\x00\xff binary \x80 %d" % i
    return b"key-%d" % i, f"välue {i} ✓".encode()


class Rec:
    """A record as written: its absolute offset, timestamp as Kafka reports it, key, value
    and the CRC its builder computed."""

    def __init__(self, offset, timestamp, key, value, crc):
        self.offset, self.timestamp, self.key, self.value, self.crc = (
            offset, timestamp, key, value, crc)


def build(writer: str, magic: int, codec: int, items) -> tuple[bytearray, list]:
    """``items``: (offset as given to the builder, timestamp, key, value). Returns the built
    message set and the builder's metadata per item."""
    b = BUILDERS[writer](magic, codec, BATCH_SIZE)
    metas = [b.append(o, ts, k, v) for o, ts, k, v in items]
    assert all(m is not None for m in metas)
    return bytearray(b.build()), metas


def messages(writer: str, magic: int, first: int, n: int) -> tuple[list[bytearray], list]:
    """``n`` uncompressed messages at offsets first.. (one entry each)."""
    items = [(first + i, TS + first + i, *content(first + i)) for i in range(n)]
    data, metas = build(writer, magic, NONE, items)
    entries, pos = [], 0
    while pos < len(data):
        size = struct.unpack_from(">i", data, pos + 8)[0] + 12
        entries.append(bytearray(data[pos:pos + size]))
        pos += size
    recs = [Rec(o, ts if magic == 1 else -1, k, v, m.crc)
            for (o, ts, k, v), m in zip(items, metas, strict=True)]
    return entries, recs


def wrapper(writer: str, magic: int, codec: int, first: int, n: int, *,
            log_append: int | None = None) -> tuple[bytearray, list]:
    """A compressed wrapper of ``n`` messages at absolute offsets first..first+n-1, as a broker
    stores it: inner offsets absolute (v0) or relative 0..n-1 (v1), wrapper offset = last
    absolute offset; v1 wrapper timestamp = the largest inner one (CreateTime) or, with
    ``log_append``, that timestamp and the LogAppendTime bit."""
    items = [((first + i) if magic == 0 else i, TS + first + i, *content(first + i))
             for i in range(n)]
    data, metas = build(writer, magic, codec, items)
    assert data[L_ATTRIBUTES] & 0x07 == codec, f"{writer} did not compress"
    struct.pack_into(">q", data, 0, first + n - 1)
    if magic == 1:
        ts = TS + first + n - 1 if log_append is None else log_append
        if log_append is not None:
            data[L_ATTRIBUTES] |= 0x08
        struct.pack_into(">q", data, L_TIMESTAMP, ts)
        struct.pack_into(">I", data, L_CRC, calc_crc32(memoryview(data)[L_MAGIC:]))
    recs = [Rec(first + i, -1 if magic == 0 else (ts if log_append is None else log_append),
                k, v, m.crc)
            for i, ((_o, ts, k, v), m) in enumerate(zip(items, metas, strict=True))]
    return data, recs


# -- expected lines -------------------------------------------------------------------------
def entry_line(entry: bytes, position: int, *, valid: bool = True) -> str:
    """``printBatchLevel`` of a legacy entry, from its bytes; checks the stored CRC against
    zlib's CRC-32 of magic..end (equal unless ``valid`` is False)."""
    offset, size, crc, magic, attributes = struct.unpack_from(">qiIbb", entry)
    assert size + 12 == len(entry)
    assert (zlib.crc32(entry[L_MAGIC:]) == crc) == valid
    if magic == 0:
        ts_type, ts = "NoTimestampType", -1
    else:
        ts_type = "LogAppendTime" if attributes & 0x08 else "CreateTime"
        ts = struct.unpack_from(">q", entry, L_TIMESTAMP)[0]
    return (f"offset: {offset} position: {position} {ts_type}: {ts} size: {len(entry)} "
            f"magic: {magic} compresscodec: {CODEC[attributes & 0x07]} crc: {crc} "
            f"isvalid: {t(valid)}")


def ts_type_of(entry: bytes) -> str:
    if entry[L_MAGIC] == 0:
        return "NoTimestampType"
    return "LogAppendTime" if entry[L_ATTRIBUTES] & 0x08 else "CreateTime"


def record_line(r: Rec, ts_type: str, *, data: bool = False, metadata: bool = True,
                valid: bool = True) -> str:
    line = ""
    prefix = "| "
    if metadata:
        ks = -1 if r.key is None else len(r.key)
        vs = -1 if r.value is None else len(r.value)
        line = (f"| offset: {r.offset} {ts_type}: {r.timestamp} keySize: {ks} valueSize: {vs} "
                f"isValid: {t(valid)} crc: {r.crc}}}")
        prefix = " "
    if data:
        if r.key is not None:
            line += f"{prefix}key: {text(r.key)}"
        if r.value is not None:
            line += f" payload: {text(r.value)}"
    return line


def expected(path: str, entries, recs_per_entry, *, deep=False, data=False) -> list[str]:
    out = [f"Dumping {path}", "Log starting offset: 0"]
    pos = 0
    for entry, recs in zip(entries, recs_per_entry, strict=True):
        out.append(entry_line(entry, pos))
        if deep or data:
            out += [record_line(r, ts_type_of(entry), data=data) for r in recs]
        pos += len(entry)
    return out


# -- uncompressed messages -------------------------------------------------------------------
@pytest.mark.parametrize("writer", BUILDERS)
@pytest.mark.parametrize("magic", [0, 1])
def test_messages(tmp_path, writer, magic):
    entries, recs = messages(writer, magic, 0, 8)
    path = write_log(tmp_path, *entries)
    per_entry = [[r] for r in recs]
    status, out, err = run_dump("--files", path)
    assert (status, err) == (0, [])
    assert out == expected(path, entries, per_entry)
    # an uncompressed message is its own one record: the record CRC is the entry's
    assert all(r.crc == struct.unpack_from(">I", e, L_CRC)[0]
               for e, r in zip(entries, recs, strict=True))
    status, out, err = run_dump("--files", path, "--deep-iteration")
    assert (status, err) == (0, [])
    assert out == expected(path, entries, per_entry, deep=True)
    status, out, err = run_dump("--files", path, "--print-data-log")
    assert (status, err) == (0, [])
    assert out == expected(path, entries, per_entry, data=True)


def test_magic0_lines_spelled_out(tmp_path):
    """The first two v0 messages of test_messages, every field written out by hand."""
    entries, _recs = messages("kafka-python", 0, 0, 2)
    path = write_log(tmp_path, *entries)
    c0, c1 = (struct.unpack_from(">I", e, L_CRC)[0] for e in entries)
    # 12 (offset, size) + 14 (crc, magic, attributes, key and value sizes) + key + value
    s0 = 12 + 14 + len(b"key-0") + len("välue 0 ✓".encode())
    s1 = 12 + 14 + len(b"value 1, no key")
    assert [len(e) for e in entries] == [s0, s1]
    status, out, err = run_dump("--files", path, "--print-data-log")
    assert (status, err) == (0, [])
    assert out == [
        f"Dumping {path}",
        "Log starting offset: 0",
        (f"offset: 0 position: 0 NoTimestampType: -1 size: {s0} magic: 0 compresscodec: none "
         f"crc: {c0} isvalid: true"),
        (f"| offset: 0 NoTimestampType: -1 keySize: 5 valueSize: 12 isValid: true crc: {c0}}} "
         "key: key-0 payload: välue 0 ✓"),
        (f"offset: 1 position: {s0} NoTimestampType: -1 size: {s1} magic: 0 compresscodec: "
         f"none crc: {c1} isvalid: true"),
        (f"| offset: 1 NoTimestampType: -1 keySize: -1 valueSize: 15 isValid: true "
         f"crc: {c1}}} payload: value 1, no key"),
    ]


# -- compressed wrappers ---------------------------------------------------------------------
WRAPPED = [(w, m, c) for w in BUILDERS for m in (0, 1) for c in (GZIP, SNAPPY, LZ4)
           if not (w == "aiokafka" and m == 0 and c == LZ4)]  # aiokafka refuses v0 lz4


@pytest.mark.parametrize(("writer", "magic", "codec"), WRAPPED,
                         ids=[f"{w}-v{m}-{CODEC[c]}" for w, m, c in WRAPPED])
def test_wrappers(tmp_path, writer, magic, codec):
    """Three wrappers of 4, 1 and 5 messages: the entry line shows the wrapper (its offset is
    the last inner one, its CRC the wrapper's), the record lines its inner messages."""
    built = [wrapper(writer, magic, codec, first, n) for first, n in [(0, 4), (4, 1), (5, 5)]]
    entries = [e for e, _r in built]
    per_entry = [r for _e, r in built]
    path = write_log(tmp_path, *entries)
    status, out, err = run_dump("--files", path)
    assert (status, err) == (0, [])
    assert out == expected(path, entries, per_entry)
    assert [line.split()[1] for line in out[2:]] == ["3", "4", "9"]
    status, out, err = run_dump("--files", path, "--deep-iteration", "--print-data-log")
    assert (status, err) == (0, [])
    assert out == expected(path, entries, per_entry, data=True)
    assert [r.offset for rs in per_entry for r in rs] == list(range(10))


@pytest.mark.parametrize("writer", BUILDERS)
def test_log_append_time(tmp_path, writer):
    """v1 under LogAppendTime: the entry line says LogAppendTime, and every inner message of
    a wrapper takes the wrapper's timestamp (LegacyRecord.timestamp, case 2); an uncompressed
    message shows its own."""
    (msg,), (mrec,) = messages(writer, 1, 0, 1)
    msg[L_ATTRIBUTES] |= 0x08
    struct.pack_into(">q", msg, L_TIMESTAMP, LOG_APPEND_TS)
    struct.pack_into(">I", msg, L_CRC, calc_crc32(memoryview(msg)[L_MAGIC:]))
    mrec.timestamp, mrec.crc = LOG_APPEND_TS, struct.unpack_from(">I", msg, L_CRC)[0]
    wrap, recs = wrapper(writer, 1, GZIP, 1, 3, log_append=LOG_APPEND_TS + 1)
    path = write_log(tmp_path, msg, wrap)
    status, out, err = run_dump("--files", path, "--deep-iteration")
    assert (status, err) == (0, [])
    assert out == expected(path, [msg, wrap], [[mrec], recs], deep=True)
    assert out[2].split()[4:6] == ["LogAppendTime:", str(LOG_APPEND_TS)]
    assert [line.split()[3:5] for line in out[5:]] == [["LogAppendTime:",
                                                        str(LOG_APPEND_TS + 1)]] * 3


# -- a segment after format upgrades ---------------------------------------------------------
def v2_batch(base: int, n: int) -> tuple[bytearray, list]:
    b = KpDefaultBuilder(2, NONE, False, -1, -1, -1, BATCH_SIZE)
    items = [(i, TS + base + i, *content(base + i)) for i in range(n)]
    for delta, ts, k, v in items:
        assert b.append(delta, ts, k, v, []) is not None
    data = bytearray(b.build())
    struct.pack_into(">q", data, 0, base)
    return data, [(base + d, ts, k, v) for d, ts, k, v in items]


def test_mixed_v0_v1_v2_segment(tmp_path):
    """v0 messages, a v0 gzip wrapper (aiokafka), v1 messages (aiokafka), a v1 snappy wrapper
    (kafka-python), a v2 batch (kafka-python), a v1 lz4 wrapper (aiokafka): each entry with
    its own line format, offsets consecutive across them."""
    v0_msgs, v0_recs = messages("kafka-python", 0, 0, 2)
    v0_wrap, v0_wrecs = wrapper("aiokafka", 0, GZIP, 2, 3)
    v1_msgs, v1_recs = messages("aiokafka", 1, 5, 2)
    v1_wrap, v1_wrecs = wrapper("kafka-python", 1, SNAPPY, 7, 3)
    v2, v2_recs = v2_batch(10, 3)
    v1_lz4, v1_lrecs = wrapper("aiokafka", 1, LZ4, 13, 2)
    parts = [*v0_msgs, v0_wrap, *v1_msgs, v1_wrap, v2, v1_lz4]
    path = write_log(tmp_path, *parts)
    pos = [sum(len(p) for p in parts[:i]) for i in range(len(parts))]

    v2_crc = struct.unpack_from(">I", v2, 17)[0]
    assert crc32c(bytes(v2[21:])) == v2_crc
    leader_epoch = struct.unpack_from(">i", v2, 12)[0]
    v2_lines = [
        (f"baseOffset: 10 lastOffset: 12 count: 3 baseSequence: -1 lastSequence: -1 "
         f"producerId: -1 producerEpoch: -1 partitionLeaderEpoch: {leader_epoch} "
         f"isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
         f"position: {pos[6]} CreateTime: {TS + 12} size: {len(v2)} magic: 2 "
         f"compresscodec: none crc: {v2_crc} isvalid: true")]
    for o, ts, k, v in v2_recs:
        line = (f"| offset: {o} CreateTime: {ts} keySize: {-1 if k is None else len(k)} "
                f"valueSize: {-1 if v is None else len(v)} sequence: -1 headerKeys: []")
        if k is not None:
            line += f" key: {text(k)}"
        if v is not None:
            line += f" payload: {text(v)}"
        v2_lines.append(line)

    legacy = [(0, v0_msgs[0], [v0_recs[0]]), (1, v0_msgs[1], [v0_recs[1]]),
              (2, v0_wrap, v0_wrecs), (3, v1_msgs[0], [v1_recs[0]]),
              (4, v1_msgs[1], [v1_recs[1]]), (5, v1_wrap, v1_wrecs)]
    want = [f"Dumping {path}", "Log starting offset: 0"]
    for i, entry, recs in legacy:
        want.append(entry_line(entry, pos[i]))
        want += [record_line(r, ts_type_of(entry), data=True) for r in recs]
    want += v2_lines
    want.append(entry_line(v1_lz4, pos[7]))
    want += [record_line(r, "CreateTime", data=True) for r in v1_lrecs]
    status, out, err = run_dump("--files", path, "--print-data-log")
    assert (status, err) == (0, [])
    assert out == want
    offsets = [int(line.split()[2]) for line in out if line.startswith("| offset: ")]
    assert offsets == list(range(15))


# -- options ---------------------------------------------------------------------------------
@pytest.fixture
def seg(tmp_path):
    """Two v1 messages and a v1 gzip wrapper of three (kafka-python)."""
    msgs, mrecs = messages("kafka-python", 1, 0, 2)
    wrap, wrecs = wrapper("kafka-python", 1, GZIP, 2, 3)
    entries = [*msgs, wrap]
    return {"path": write_log(tmp_path, *entries), "entries": entries,
            "recs": [[mrecs[0]], [mrecs[1]], wrecs], "dir": tmp_path / "t-0"}


def test_skip_record_metadata(seg):
    """Kafka's prefix logic: no metadata, so the key starts the line with "| "; a record
    without key starts with " payload:" (no "|"); without --print-data-log an empty line."""
    path, entries, recs = seg["path"], seg["entries"], seg["recs"]
    status, out, err = run_dump("--files", path, "--print-data-log", "--skip-record-metadata")
    assert (status, err) == (0, [])
    want = [f"Dumping {path}", "Log starting offset: 0"]
    pos = 0
    for e, rs in zip(entries, recs, strict=True):
        want.append(entry_line(e, pos))
        want += [record_line(r, "CreateTime", data=True, metadata=False) for r in rs]
        pos += len(e)
    assert out == want
    assert want[3] == f"| key: key-0 payload: {text(content(0)[1])}"
    assert want[5] == " payload: value 1, no key"
    assert want[7] == "| key: key-2"
    status, out, err = run_dump("--files", path, "--deep-iteration", "--skip-record-metadata")
    assert (status, err) == (0, [])
    assert out == [f"Dumping {path}", "Log starting offset: 0",
                   entry_line(entries[0], 0), "",
                   entry_line(entries[1], len(entries[0])), "",
                   entry_line(entries[2], len(entries[0]) + len(entries[1])), "", "", ""]


def test_max_bytes(seg):
    """--max-bytes reads the file up to that many bytes: whole entries only, and no "invalid
    bytes" line for the cut one (FileRecords.slice, printTrailingBytes)."""
    path, entries = seg["path"], seg["entries"]
    two = len(entries[0]) + len(entries[1])
    for limit in (two, two + 20, two + len(entries[2]) - 1):
        status, out, err = run_dump("--files", path, "--deep-iteration",
                                    "--max-bytes", str(limit))
        assert (status, err) == (0, [])
        assert out == expected(path, entries[:2], seg["recs"][:2], deep=True)
    status, out, _e = run_dump("--files", path, "--max-bytes", str(len(entries[0]) - 1))
    assert out == [f"Dumping {path}", "Log starting offset: 0"]


def test_torn_tail(seg):
    path, entries = seg["path"], seg["entries"]
    cut = b"".join(entries)[:-7]
    with open(path, "wb") as f:
        f.write(cut)
    status, out, err = run_dump("--files", path, "--deep-iteration")
    assert (status, err) == (0, [])
    assert out == [*expected(path, entries[:2], seg["recs"][:2], deep=True),
                   f"Found {len(entries[2]) - 7} invalid bytes at the end of {NAME}.log"]


def test_non_consecutive_offsets(tmp_path):
    """Offsets are tracked per record across entries: a gap between messages, and a v1
    wrapper stored at outer offset 0 (some producers' data: its relative inner offsets are
    taken as they are, AbstractLegacyRecordBatch.DeepRecordsIterator) going back to 0.
    Kafka prints the pairs newest first. In a log, offsets that go back are damage: the
    dump prints the wrapper's line, says where, and exits 1 (Kafka exits 0 after its
    records). A message at offset 9 ends the segment: were the wrapper last, the log end
    offset would be 1 (where the last entry ends), and dump would name the message at
    offset 1 as reaching it, as every reader of the partition does (below)."""
    (m0, m1), recs = messages("kafka-python", 1, 0, 2)
    (m5,), recs5 = messages("kafka-python", 1, 5, 1)
    (m9,), _recs9 = messages("kafka-python", 1, 9, 1)
    wrap, wrecs = wrapper("kafka-python", 1, SNAPPY, 0, 3)
    struct.pack_into(">q", wrap, 0, 0)  # the outer offset 0 (outside the CRC)
    path = write_log(tmp_path, m0, m1, m5, wrap, m9)
    status, out, err = run_dump("--files", path, "--deep-iteration")
    assert status == 1
    assert out == expected(path, [m0, m1, m5, wrap], [[recs[0]], [recs[1]], recs5, []],
                           deep=True)
    assert out[8].startswith("offset: 0 position: ") and len(out) == 9
    position = len(m0) + len(m1) + len(m5)
    assert err == [f"error: {path}: position {position}: offsets go back: the batch starts "
                   "at offset 0, below the offset 6 that follows the batch before it",
                   f"Non-consecutive offsets in {os.path.abspath(path)}",
                   "  1 is followed by 5"]
    # shallow iteration does not look at records (no findings), but the entries still go back
    assert run_dump("--files", path)[2] == [err[0]]
    path = write_log(tmp_path, m0, m1, m5, wrap)  # the wrapper last: the log end offset is 1
    reason = (f"error: {path}: position {len(m0)}: batch offsets [1, 1] reach the log end "
              "offset 1, where the segment's last batch ends")
    assert run_dump("--files", path)[2] == [reason]
    r = kafkafs("consume", "--log-dirs", str(tmp_path), "--topic", "t", "--from-beginning",
                "--timeout-ms", "0", check=False)
    assert r.returncode == 1 and r.stderr.decode().splitlines()[-1] == reason


# -- damaged data ----------------------------------------------------------------------------
def test_corrupt_message_is_dumped_with_isvalid_false(tmp_path):
    """A flipped value byte: the entry line says false and shows the stored CRC (the one
    kafka-python wrote), as Kafka (LegacyRecord.isValid); the dump ends there with an error
    naming it (Kafka goes on, and prints the damaged message's record line too)."""
    (m0, m1), recs = messages("kafka-python", 0, 0, 2)
    m0[-1] ^= 0x01
    recs[0].value = bytes(m0[-len(recs[0].value):])
    path = write_log(tmp_path, m0, m1)
    status, out, err = run_dump("--files", path, "--print-data-log")
    assert status == 1 and len(err) == 1
    assert err[0].startswith(f"error: {path}: position 0: record batch is corrupt (stored "
                             f"crc = {struct.unpack_from('>I', m0, 12)[0]}, computed crc = ")
    assert out == [f"Dumping {path}", "Log starting offset: 0",
                   entry_line(m0, 0, valid=False)]


def test_corrupt_inner_message(tmp_path):
    """A wrapper with a valid CRC over a damaged inner message (each inner message has its
    own CRC): the entry line is valid; the dump stops there with an error naming the
    message (Kafka prints the record lines, the damaged one with isValid: false)."""
    items = [(i, TS + i, *content(i)) for i in range(4)]
    inner, metas = build("kafka-python", 1, NONE, items)
    inner[-1] ^= 0x01  # the last byte of the last message's value
    value = gzip_encode(bytes(inner))
    body = struct.pack(">bbq", 1, GZIP, TS + 3) + struct.pack(">i", -1) + \
        struct.pack(">i", len(value)) + value
    wrap = bytearray(struct.pack(">qiI", 3, 4 + len(body), 0) + body)
    struct.pack_into(">I", wrap, L_CRC, calc_crc32(memoryview(wrap)[L_MAGIC:]))
    recs = [Rec(o, ts, k, v, m.crc) for (o, ts, k, v), m in zip(items, metas, strict=True)]
    recs[3].value = bytes(inner[-len(recs[3].value):])
    path = write_log(tmp_path, wrap)
    status, out, err = run_dump("--files", path, "--print-data-log")
    assert status == 1
    assert err == [f"error: {path}: position 0: inner message at offset 3 is corrupt (stored "
                   f"crc = {metas[3].crc})"]
    # the wrapper's line (its own CRC holds); its messages are not printed: one is damaged
    assert out == [f"Dumping {path}", "Log starting offset: 0", entry_line(wrap, 0)]


def test_wrapper_offset_below_its_inner_offsets_is_an_error(tmp_path):
    """Kafka throws InvalidRecordException (a v1 wrapper offset below its last relative inner
    offset, and not 0): the entry line is printed, then the error, status 1."""
    (m0,), recs = messages("aiokafka", 1, 0, 1)
    wrap, _recs = wrapper("aiokafka", 1, GZIP, 1, 4)
    struct.pack_into(">q", wrap, 0, 2)  # last relative inner offset is 3
    path = write_log(tmp_path, m0, wrap)
    status, out, err = run_dump("--files", path, "--deep-iteration")
    assert status == 1
    assert out == [f"Dumping {path}", "Log starting offset: 0", entry_line(m0, 0),
                   record_line(recs[0], "CreateTime"), entry_line(wrap, len(m0))]
    assert err == [(f"error: position {len(m0)}: wrapper offset 2 of a compressed v1 message "
                    "is less than its last inner offset 3 and not zero")]


def test_zstd_in_a_legacy_message_is_an_error_after_its_line(tmp_path):
    """Message formats v0/v1 have no zstd: Kafka prints the entry line (compresscodec: zstd)
    and throws when iterating it (AbstractLegacyRecordBatch.DeepRecordsIterator)."""
    body = struct.pack(">bbq", 1, 4, TS) + struct.pack(">i", -1) + struct.pack(">i", 3) + b"xyz"
    entry = struct.pack(">qiI", 0, 4 + len(body), zlib.crc32(body)) + body
    path = write_log(tmp_path, entry)
    status, out, err = run_dump("--files", path)
    assert (status, err) == (0, [])
    line = (f"offset: 0 position: 0 CreateTime: {TS} size: {len(entry)} magic: 1 "
            f"compresscodec: zstd crc: {zlib.crc32(body)} isvalid: true")
    assert out[2:] == [line]
    status, out, err = run_dump("--files", path, "--deep-iteration")
    assert status == 1 and out[2:] == [line]
    assert err == [("error: position 0: legacy message (magic 1) has compression codec "
                    "zstd, which message format v1 does not have")]


# -- indexes of a legacy segment -------------------------------------------------------------
def test_index_and_time_index_of_legacy_entries(seg):
    """The .index check uses an entry's offset (a wrapper's last inner offset); the .timeindex
    check the largest record timestamp of the entry it names (DumpLogSegments.dumpTimeIndex)."""
    d, entries = seg["dir"], seg["entries"]
    p = [0, len(entries[0]), len(entries[0]) + len(entries[1])]
    idx = OffsetIndex(str(d / f"{NAME}.index"), 0, max_index_size=1024)
    for off, pos in [(1, p[1]), (4, p[2])]:
        idx.append(off, pos)
    idx.close()
    status, out, err = run_dump("--files", str(d / f"{NAME}.index"))
    assert (status, err) == (0, [])
    assert out[1:] == [f"offset: 1 position: {p[1]}", f"offset: 4 position: {p[2]}"]

    good = d / f"{NAME}.timeindex"
    ti = TimeIndex(str(good), 0, max_index_size=120)
    for ts, off in [(TS + 1, 1), (TS + 4, 4)]:
        ti.maybe_append(ts, off)
    ti.close()
    status, out, err = run_dump("--files", str(good))
    assert (status, err) == (0, [])
    assert out[1:] == [f"timestamp: {TS + 1} offset: 1", f"timestamp: {TS + 4} offset: 4"]

    with open(good, "wb") as f:  # a wrong timestamp, and an inner offset of the wrapper
        f.write(struct.pack(">qi", TS + 9, 1) + struct.pack(">qi", TS + 10, 3))
    status, out, err = run_dump("--files", str(good), "--verify-index-only")
    assert status == 0 and out == [f"Dumping {good}"]
    assert err == [f"Found timestamp mismatch in :{os.path.abspath(good)}",
                   f"  Index timestamp: {TS + 9}, log timestamp: {TS + 1}",
                   "The following indexed offsets are not found in the log.",
                   "Indexed offset: 3, found log offset: 4"]


# -- real broker bytes -----------------------------------------------------------------------
def test_real_broker_v0_message_from_the_kafka_users_list(tmp_path):
    """A v0 segment a broker wrote, hexdumped in "Trying to understand the format of the
    LogSegment file" (users@kafka.apache.org, 2015-12-03,
    https://www.mail-archive.com/users@kafka.apache.org/msg16375.html), with the 0.9 tool's
    line for it: ``offset: 0 position: 0 isvalid: true payloadsize: 8 magic: 0 compresscodec:
    NoCompressionCodec crc: 3916773564``. The same facts in today's lines."""
    raw = bytes.fromhex("0000000000000000 00000016 e97538bc 0000 ffffffff 00000008"
                        "6d65737361676531".replace(" ", ""))
    path = write_log(tmp_path, raw)
    status, out, err = run_dump("--files", path, "--print-data-log")
    assert (status, err) == (0, [])
    assert out == [
        f"Dumping {path}", "Log starting offset: 0",
        ("offset: 0 position: 0 NoTimestampType: -1 size: 34 magic: 0 compresscodec: none "
         "crc: 3916773564 isvalid: true"),
        ("| offset: 0 NoTimestampType: -1 keySize: -1 valueSize: 8 isValid: true "
         "crc: 3916773564} payload: message1"),
    ]


def test_real_broker_v1_messages_rebuilt_from_a_dump(tmp_path):
    """Two v1 messages whose 0.11-era dump was published (a Chinese blog post on a
    "stock-quotation" topic; found through this project's search index, no stable address):
    ``offset: 0 position: 0 CreateTime: 1521530865528 isvalid: true payloadsize: 60 magic: 1
    compresscodec: NONE crc: 2909967091 keysize: 6 key: 600107 payload: ...`` and ``offset:
    1 position: 100 ... payloadsize: 59 ... crc: 205437017 keysize: 6 key: 600103``. The
    payload (shown there as GBK mojibake of UTF-8 "股票") is rebuilt here; the CRCs Kafka
    printed match the rebuilt bytes, so these are the bytes that broker stored."""
    def message(offset, key, value):
        body = struct.pack(">bbq", 1, 0, 1521530865528) + struct.pack(">i", len(key)) + key \
            + struct.pack(">i", len(value)) + value
        return struct.pack(">qiI", offset, 4 + len(body), zlib.crc32(body)) + body

    m0 = message(0, b"600107", "600107|股票-600107|1521530865528|11.8|11.5|10.41|12.5|10.5"
                 .encode())
    m1 = message(1, b"600103", "600103|股票-600103|1521530865528|11.8|11.5|10.2|12.5|10.5"
                 .encode())
    assert (len(m0), len(m1)) == (100, 99)
    path = write_log(tmp_path, m0, m1)
    status, out, err = run_dump("--files", path, "--deep-iteration")
    assert (status, err) == (0, [])
    assert out == [
        f"Dumping {path}", "Log starting offset: 0",
        ("offset: 0 position: 0 CreateTime: 1521530865528 size: 100 magic: 1 compresscodec: "
         "none crc: 2909967091 isvalid: true"),
        ("| offset: 0 CreateTime: 1521530865528 keySize: 6 valueSize: 60 isValid: true "
         "crc: 2909967091}"),
        ("offset: 1 position: 100 CreateTime: 1521530865528 size: 99 magic: 1 compresscodec: "
         "none crc: 205437017 isvalid: true"),
        ("| offset: 1 CreateTime: 1521530865528 keySize: 6 valueSize: 59 isValid: true "
         "crc: 205437017}"),
    ]


# -- the corpus, read by kafka-python --------------------------------------------------------
def corpus_segments():
    out = []
    for d in sorted(os.listdir(CORPUS)):
        path = os.path.join(CORPUS, d, f"{NAME}.log")
        if os.path.isfile(path):
            with open(path, "rb") as f:
                data = f.read()
            if any(m < 2 for _p, m in _frames(data)):
                out.append(path)
    return out


def _frames(data: bytes):
    pos = 0
    while len(data) - pos >= 17:
        size = struct.unpack_from(">i", data, pos + 8)[0]
        if size < 14 or pos + 12 + size > len(data):
            return
        yield pos, data[pos + 16]
        pos += 12 + size


#: kafka-python parses inner messages with the wrapper's magic: it cannot read sarama's v1
#: wrapper of v0 messages (tests/corpus/README.md); aiokafka can
KAFKA_PYTHON_CANNOT_READ = {"vec-sarama-v1-lz4-0"}
READERS = {"kafka-python": KpLegacyBatch, "aiokafka": AioLegacyBatch}


def can_read(reader: str, sid: str, entry: bytes) -> bool:
    if reader == "kafka-python":
        return sid not in KAFKA_PYTHON_CANNOT_READ
    return not (entry[L_MAGIC] == 0 and entry[L_ATTRIBUTES] & 0x07 == LZ4)  # aiokafka: no
    # lz4 for magic 0


def read_legacy(sid: str, entry: bytes, magic: int) -> list[Rec]:
    """The records of a legacy entry as kafka-python and aiokafka read them (they must
    agree; each where it can): offset, timestamp (None, for no timestamp, as -1), key,
    value, record CRC."""
    found = {}
    for name, cls in READERS.items():
        if not can_read(name, sid, entry):
            continue
        batch = cls(bytearray(entry), magic)
        assert batch.validate_crc()
        found[name] = [(r.offset, -1 if r.timestamp is None else r.timestamp, r.key, r.value,
                        r.checksum) for r in batch]
    first, *others = found.values()
    assert all(o == first for o in others)
    return [Rec(*f) for f in first]


@pytest.mark.parametrize("path", corpus_segments(),
                         ids=lambda p: os.path.basename(os.path.dirname(p)))
def test_corpus_legacy_entries_match_kafka_python_and_aiokafka(path):
    """Every legacy entry of the corpus (kafka-python, aiokafka and sarama writers, broker
    vectors from other projects' tests): its entry line from the bytes, its record lines
    from kafka-python's and aiokafka's readers (offsets, timestamps, keys, values, each
    record's own CRC)."""
    sid = os.path.basename(os.path.dirname(path))
    with open(path, "rb") as f:
        data = f.read()
    want = []
    for pos, magic in _frames(data):
        if magic >= 2:
            continue
        size = struct.unpack_from(">i", data, pos + 8)[0] + 12
        entry = data[pos:pos + size]
        want.append(entry_line(entry, pos))
        want += [record_line(r, ts_type_of(entry), data=True)
                 for r in read_legacy(sid, entry, magic)]
    status, out, err = run_dump("--files", path, "--print-data-log")
    assert (status, err) == (0, [])
    legacy_lines = [line for line in out[2:]
                    if line.startswith("offset: ") or "isValid: " in line]
    assert legacy_lines == want
