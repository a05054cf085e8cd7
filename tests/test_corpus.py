"""The segment corpus (tests/corpus/, built by tests/build_corpus.py): every file read by
kafkafs must give exactly what independent readers give over the same bytes.

For each ``tests/corpus/<topic>-0/<base>.log``:

* kafkafs's batches and records (offsets, timestamps, timestamp types, keys, values,
  headers, CRC validity) equal kafka-python's and aiokafka's (C extension) over the same
  entries; the few entries one of them cannot read are listed in :data:`UNREADABLE` with
  the reason, and the other reader still has to agree;
* vectors copied from other projects' tests also match what those projects assert;
* ``kafkafs dump --deep-iteration --print-data-log`` prints a batch line per batch and a
  record line per record;
* ``load_log(..., writable=False)`` finds the log end offset the readers imply.

Then hypothesis round trips: records -> an independent builder (kafka-python or aiokafka,
magic 0/1/2, every codec the builder offers) -> kafkafs decode == the records.
"""

from __future__ import annotations

import glob
import io
import os
import re
import shutil
import struct
from contextlib import redirect_stderr, redirect_stdout

import build_corpus as bc
import pytest
from aiokafka.record._crecords import DefaultRecordBatchBuilder as AioDefaultBuilder
from aiokafka.record._crecords import LegacyRecordBatchBuilder as AioLegacyBuilder
from aiokafka.record._crecords import MemoryRecords as AioMemoryRecords
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.errors import UnsupportedCodecError as KPUnsupportedCodecError
from kafka.record.default_records import DefaultRecordBatchBuilder as KPDefaultBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KPLegacyBuilder
from kafka.record.memory_records import MemoryRecords as KPMemoryRecords

from kafkafs.cli.main import main as kafkafs_main
from kafkafs.log.config import LogConfig
from kafkafs.log.loader import load_log
from kafkafs.record import control
from kafkafs.record.batch import iter_batches
from kafkafs.record.errors import CorruptRecordError

CORPUS = bc.CORPUS
SEGMENTS = sorted(glob.glob(os.path.join(CORPUS, "*-*", "*.log")))
SEGMENT_IDS = [os.path.basename(os.path.dirname(p)) for p in SEGMENTS]

#: (partition dir, reader) -> why that reader cannot read some entry of the file (the other
#: reader must still read it and agree with kafkafs)
UNREADABLE = {
    ("kp-v0-wrapped-0", "aiokafka"):
        "aiokafka refuses to decompress magic-0 lz4 ('LZ4 is not supported for broker version "
        "0.8/0.9'); kafka-python reads it (lz4_decode_old_kafka)",
    ("vec-sarama-v1-lz4-0", "kafka-python"):
        "kafka-python parses the inner messages of a v1 wrapper with the wrapper's magic and "
        "fails on sarama's v0 inner messages; Kafka's LegacyRecord (and aiokafka) read each "
        "inner message with its own magic",
}
#: files whose stored CRC is wrong in the source (every reader agrees it is invalid)
BAD_CRC = {"vec-kafka-python-control-0"}
#: files ending in a zero tail: every reader stops there with "record size 0 < 14"
ZERO_TAIL = {"preallocated-0"}
#: where an independent reader's per-record timestamp type is not the batch's: aiokafka
#: gives None (v0) for the v0 messages inside sarama's v1 lz4 wrapper; Java's consumer
#: (CompletedFetch) and DumpLogSegments report the wrapper's CreateTime, as kafkafs does
TIMESTAMP_TYPE_FROM_BATCH = {("vec-sarama-v1-lz4-0", "aiokafka")}

LOG_OVERHEAD = 12
HEADER_PEEK = 17
MIN_ENTRY = 14


def seg_id(path: str) -> str:
    return os.path.basename(os.path.dirname(path))


def read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


# -- what each reader sees ----------------------------------------------------------------

def split_entries(data: bytes):
    """The framing every format shares (offset i64, size i32, magic at byte 16): ``(entries,
    stopped_at_corrupt_size)``, like Kafka's FileLogInputStream (a partial entry at the end
    ends the list; a size below 14 is corruption)."""
    out, pos = [], 0
    while len(data) - pos >= HEADER_PEEK:
        (length,) = struct.unpack_from(">i", data, pos + 8)
        if length < MIN_ENTRY:
            return out, True
        end = pos + LOG_OVERHEAD + length
        if end > len(data):
            break
        out.append((pos, data[pos:end]))
        pos = end
    return out, False


def _norm_ts(ts) -> int:
    return -1 if ts is None else ts


def ours(data: bytes):
    """kafkafs: ``(batches, error)``; a batch is ``dict(position, magic, crc_ok, records,
    next_offset, control, transactional)``, a record ``(offset, timestamp, timestamp type,
    key, value, headers)``."""
    batches = []
    try:
        for b in iter_batches(data):
            tt = b.timestamp_type
            recs = [(r[0], r[1], tt, r[2], r[3], list(r[4])) for r in b.record_tuples()]
            batches.append({"position": b.position, "magic": b.magic, "crc_ok": b.is_valid(),
                            "records": recs, "next_offset": b.next_offset,
                            "control": b.is_control, "transactional": b.is_transactional})
    except CorruptRecordError as exc:
        return batches, exc
    return batches, None


def _their_batch(reader: str, entry: bytes):
    cls = KPMemoryRecords if reader == "kafka-python" else AioMemoryRecords
    batch = cls(entry).next_batch()
    assert batch is not None
    return batch


def theirs(reader: str, entry: bytes, batch_ts_type: int | None = None):
    """One entry read by kafka-python or aiokafka: ``(crc_ok, records)`` in our tuple
    shape. ``batch_ts_type`` replaces the reader's per-record type when given."""
    batch = _their_batch(reader, entry)
    crc_ok = batch.validate_crc()  # before iterating (kafka-python asserts that)
    recs = []
    for r in batch:
        tt = -1 if r.timestamp_type is None else r.timestamp_type
        if batch_ts_type is not None:
            tt = batch_ts_type
        recs.append((r.offset, _norm_ts(r.timestamp), tt, r.key, r.value, list(r.headers)))
    return crc_ok, recs


# -- the corpus itself ----------------------------------------------------------------------

def test_corpus_lists_every_segment_and_nothing_else():
    built = {os.path.join(CORPUS, rel) for rel in bc.build_all()}
    assert set(SEGMENTS) == built
    readme = read(os.path.join(CORPUS, "README.md")).decode()
    for sid in SEGMENT_IDS:
        assert f"`{sid}`" in readme, f"{sid} is not described in tests/corpus/README.md"


def _has_compression(data: bytes) -> bool:
    entries, _ = split_entries(data)
    for _pos, e in entries:
        attrs = e[17] if e[16] < 2 else e[22]
        if attrs & 0x07:
            return True
    return False


@pytest.mark.parametrize("path", SEGMENTS, ids=SEGMENT_IDS)
def test_build_corpus_reproduces_the_file(path):
    """build_corpus.py rebuilds every file. Byte for byte where no compressor is involved;
    a compressed file must decode to the same records (another zlib/lz4/zstd/snappy version
    may pick other matches without changing the data)."""
    rebuilt = bc.build_all()[os.path.relpath(path, CORPUS)]
    data = read(path)
    if rebuilt == data:
        return
    assert _has_compression(data), "an uncompressed corpus file differs from its rebuild"
    assert ours(rebuilt)[0] and [b["records"] for b in ours(rebuilt)[0]] == \
        [b["records"] for b in ours(data)[0]]


# -- kafkafs against the independent readers ------------------------------------------------

@pytest.mark.parametrize("path", SEGMENTS, ids=SEGMENT_IDS)
def test_records_equal_independent_readers(path):
    sid = seg_id(path)
    data = read(path)
    entries, corrupt_size = split_entries(data)
    our_batches, our_error = ours(data)

    # the same batches, at the same positions, stopping at the same place
    assert [b["position"] for b in our_batches] == [pos for pos, _e in entries]
    assert (our_error is not None) == corrupt_size == (sid in ZERO_TAIL)
    if our_error is not None:
        assert "smaller than the minimum record overhead" in str(our_error)
        assert our_error.position == (entries[-1][0] + len(entries[-1][1]) if entries else 0)

    read_by = [0] * len(entries)
    for reader in ("kafka-python", "aiokafka"):
        for i, ((pos, entry), mine) in enumerate(zip(entries, our_batches, strict=True)):
            batch_tt = mine["records"][0][2] if (sid, reader) in TIMESTAMP_TYPE_FROM_BATCH \
                and mine["records"] else None
            try:
                crc_ok, recs = theirs(reader, entry, batch_tt)
            except Exception as exc:  # any failure of theirs
                if (sid, reader) in UNREADABLE:
                    continue
                raise AssertionError(f"{reader} cannot read the entry at {pos} of {sid}: "
                                     f"{exc!r}") from exc
            assert crc_ok == mine["crc_ok"], f"CRC verdicts differ at {pos} ({reader})"
            assert recs == mine["records"], f"records differ at position {pos} ({reader})"
            read_by[i] += 1
    # every entry was read (and agreed with) by at least one independent reader
    assert all(read_by), f"entries no independent reader could read: {read_by}"

    # kafka-python's own scan of the whole segment (mixed magics included) agrees too
    if (sid, "kafka-python") not in UNREADABLE:
        whole = KPMemoryRecords(data)
        flat = []
        try:
            while (batch := whole.next_batch()) is not None:
                flat += [(r.offset, r.key, r.value) for r in batch]
        except Exception:  # noqa: BLE001 - whatever kafka-python raises at the zero tail
            assert sid in ZERO_TAIL
        assert flat == [(r[0], r[3], r[4]) for b in our_batches for r in b["records"]]


@pytest.mark.parametrize("path", SEGMENTS, ids=SEGMENT_IDS)
def test_crc_validation(path):
    """CRC-32C (v2) / CRC-32 (v0/v1) of every batch passes, like in the independent readers
    (the one vector stored with a wrong CRC fails in all three)."""
    sid = seg_id(path)
    data = read(path)
    batches, _error = ours(data)
    assert batches
    assert all(b["crc_ok"] for b in batches) == (sid not in BAD_CRC)
    if sid in BAD_CRC:
        with pytest.raises(CorruptRecordError, match="corrupt"):
            list(iter_batches(data, validate=True))
    elif sid in ZERO_TAIL:
        with pytest.raises(CorruptRecordError, match="minimum record overhead"):
            list(iter_batches(data, validate=True))
    else:
        assert len(list(iter_batches(data, validate=True))) == len(batches)


# -- what the source projects assert about their vectors ------------------------------------

SARAMA_RECORD = (b"\x01\x02\x03\x04", b"\x05\x06\x07", [("\x08\t\n", b"\x0b\x0c")])

VECTOR_EXPECTATIONS = {
    # kafka-python/aiokafka test_memory_records_v2: values "123", "", "", "123";
    # first timestamp 1503229838908, CreateTime, no key, no headers
    "vec-kafka-python-v2-0": [
        (0, 1503229838908, 0, None, b"123", []),
        (1, 1503229959532, 0, None, b"", []),
        (2, 1503229959700, 0, None, b"", []),
        (3, 1503229962141, 0, None, b"123", []),
    ],
    "vec-kafka-python-v2-headers-0": [(0, 1535546684353, 0, None, b"hdr", [("hkey", b"hval")])],
    # test_memory_records_v1: first value "123", timestamp 1503648000942, CreateTime
    "vec-kafka-python-v1-0": [
        (0, 1503648000942, 0, None, b"123", []),
        (1, 1503648001984, 0, None, b"", []),
        (2, 1503648002162, 0, None, b"", []),
        (3, 1503648004099, 0, None, b"123", []),
    ],
    # test_memory_records_v0: no timestamps (type None)
    "vec-kafka-python-v0-0": [
        (0, -1, -1, None, b"123", []), (1, -1, -1, None, b"", []),
        (2, -1, -1, None, b"", []), (3, -1, -1, None, b"123", []),
    ],
    # test_control_record_v2: one ABORT control record (version 0, type 0)
    "vec-kafka-python-control-0": [
        (0, 9999999, 0, b"\x00\x00\x00\x00", b"opaque-control-message", []),
    ],
    # sarama recordBatchTestCases: the record is key 1,2,3,4, value 5,6,7, header
    # 8,9,10 -> 11,12, TimestampDelta 5 ms from FirstTimestamp 1479847795 s
    "vec-sarama-v2-0": [(o, 1479847795005, 0) + SARAMA_RECORD for o in (2, 3, 4, 5, 6)],
    # sarama message_test.go: emptyMessage (v0) and emptyV1Message: null key and value
    "vec-sarama-legacy-0": [(0, -1, -1, None, None, []), (1, 0, 0, None, None, [])],
    # the bulk messages: two inner messages each ("2 were expected")
    "vec-sarama-v0-gzip-0": [(0, -1, -1, None, b"", []), (1, -1, -1, None, b"", [])],
    "vec-sarama-v0-snappy-0": [(0, -1, -1, b"", b"", []), (1, -1, -1, b"", b"", [])],
    # v1 wrapper (CreateTime) around v0 messages: Kafka's LegacyRecord gives them no
    # timestamp (-1); the type reported is the wrapper's
    "vec-sarama-v1-lz4-0": [(0, -1, 0, None, b"", []), (1, -1, 0, None, b"", [])],
}


@pytest.mark.parametrize("sid", sorted(VECTOR_EXPECTATIONS))
def test_vectors_read_as_their_sources_say(sid):
    (path,) = glob.glob(os.path.join(CORPUS, sid, "*.log"))
    batches, error = ours(read(path))
    assert error is None
    assert [r for b in batches for r in b["records"]] == VECTOR_EXPECTATIONS[sid]
    if sid == "vec-kafka-python-control-0":
        (b,) = batches
        assert b["control"] and not b["transactional"]
        key = b["records"][0][3]
        assert control.parse_control_key(key) == (0, control.ABORT)
    if sid == "vec-sarama-v2-0":
        assert len(batches) == 7
        assert [len(b["records"]) for b in batches] == [0, 0, 1, 1, 1, 1, 1]
        assert batches[1]["control"]


# -- broker-written markers: the corpus bytes equal kafkafs's marker encoder ----------------

def test_corpus_markers_equal_kafkafs_marker_encoder():
    """transactions-0's COMMIT (built with aiokafka) and ABORT (kafka-python), control bit set
    and CRC recomputed, are byte for byte what encode_end_txn_marker_batch writes (with the
    partition leader epoch each library leaves: -1 aiokafka, 0 kafka-python)."""
    data = read(os.path.join(CORPUS, "transactions-0", "00000000000000000000.log"))
    markers = [b for b in iter_batches(data, validate=True) if b.is_control]
    assert len(markers) == 2
    commit, abort = (bytes(b.buffer) for b in markers)
    assert commit == control.encode_end_txn_marker_batch(
        control.COMMIT, base_offset=3, timestamp=bc.TS + 10, producer_id=4242,
        producer_epoch=3, coordinator_epoch=7, partition_leader_epoch=-1)
    assert abort == control.encode_end_txn_marker_batch(
        control.ABORT, base_offset=6, timestamp=bc.TS + 30, producer_id=4242,
        producer_epoch=3, coordinator_epoch=7, partition_leader_epoch=0)
    for b in markers:
        (rec,) = b.records()
        assert control.end_txn_marker(rec.key, rec.value).coordinator_epoch == 7


# -- kafkafs dump ----------------------------------------------------------------------------

BATCH_LINE = re.compile(r"^(?:baseOffset: \d+ lastOffset: (\d+)|offset: (\d+)) .*?position: (\d+)")
RECORD_LINE = re.compile(r"^\| offset: (\d+) ")
LEGACY_NOT_YET = "is not yet supported by kafkafs dump"


def run_dump(path: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = kafkafs_main(["dump", "--files", path, "--deep-iteration", "--print-data-log"])
    return rc, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("path", SEGMENTS, ids=SEGMENT_IDS)
def test_dump_deep_iteration(path):
    sid = seg_id(path)
    batches, _error = ours(read(path))
    rc, out, err = run_dump(path)
    lines = out.splitlines()
    assert lines[0] == f"Dumping {path}"
    assert lines[1] == "Log starting offset: 0"
    batch_lines = [m for m in map(BATCH_LINE.match, lines) if m]
    # one batch line per batch, at the batch's position (also for legacy entries)
    assert [int(m.group(3)) for m in batch_lines] == [b["position"] for b in batches]
    assert LEGACY_NOT_YET not in out
    # and one record line per record, in order
    records = [int(m.group(1)) for m in map(RECORD_LINE.match, lines) if m]
    valid = ["isvalid: true" in x for x in lines if BATCH_LINE.match(x)]
    assert all(valid) == (sid not in BAD_CRC)
    if sid in BAD_CRC:
        # the batch's line as Kafka prints it (isvalid: false), not its records, then an
        # error naming it: exit 1
        assert records == []
        assert rc == 1
        assert err.startswith(f"error: {path}: position 0: record batch is corrupt")
    else:
        # a zero tail (preallocated-0) ends the data quietly (Kafka's FileLogInputStream
        # calls it a record of size 0 and throws)
        assert records == [r[0] for b in batches for r in b["records"]]
        assert rc == 0, err
        assert "invalid bytes" not in out and err == ""


# -- loading the partition directory ----------------------------------------------------------

def expected_log_end(path: str) -> int:
    """The offset after the last entry by the independent framing: a v2 batch's base offset +
    lastOffsetDelta + 1 (an empty batch too), a legacy entry's (last inner) offset + 1."""
    entries, _ = split_entries(read(path))
    _pos, last = entries[-1]
    if last[16] >= 2:
        return _their_batch("kafka-python", last).next_offset
    return struct.unpack_from(">q", last)[0] + 1


@pytest.mark.parametrize("path", SEGMENTS, ids=SEGMENT_IDS)
def test_load_log_read_only(path):
    sid = seg_id(path)
    topic, partition = sid.rsplit("-", 1)
    # a preallocated zero tail (log.preallocate) ends the log where the writes end
    before = {p: os.stat(p).st_mtime_ns for p in glob.glob(os.path.join(CORPUS, sid, "*"))}
    log = load_log(os.path.dirname(path), topic, int(partition), LogConfig(), writable=False)
    try:
        assert log.log_end_offset == expected_log_end(path)
        assert log.log_start_offset == 0
        (seg,) = log.segments()
        got = [tuple(r) for b in seg.batches() for r in b.records()]
        want = [(r[0], r[1], r[3], r[4], tuple(r[5]))
                for b in ours(read(path))[0] for r in b["records"]]
        assert got == want
    finally:
        log.close()
    after = {p: os.stat(p).st_mtime_ns for p in glob.glob(os.path.join(CORPUS, sid, "*"))}
    assert after == before, "a read-only load changed the corpus"


def test_load_log_writable_recovers_a_preallocated_tail(tmp_path):
    """A copy of preallocated-0 loaded writable (after an unclean shutdown) is truncated at
    the zero tail, as Kafka's recovery does."""
    src = os.path.join(CORPUS, "preallocated-0")
    dst = tmp_path / "preallocated-0"
    shutil.copytree(src, dst)
    log = load_log(str(dst), "preallocated", 0, LogConfig(), writable=True)
    try:
        assert log.log_end_offset == 8
    finally:
        log.close()
    size = os.path.getsize(dst / "00000000000000000000.log")
    assert size == os.path.getsize(os.path.join(src, "00000000000000000000.log")) \
        - bc.PREALLOCATED_TAIL


# -- property: independent builders -> kafkafs ------------------------------------------------

KP, AIO = "kafka-python", "aiokafka"
LEGACY_CODECS = (bc.NONE, bc.GZIP, bc.SNAPPY, bc.LZ4)
V2_CODECS = (bc.NONE, bc.GZIP, bc.SNAPPY, bc.LZ4, bc.ZSTD)


def producible(lib: str, magic: int) -> tuple[int, ...]:
    """Codecs ``lib`` writes for ``magic`` (see test_what_independent_builders_refuse)."""
    if magic == 2:
        return V2_CODECS
    if lib == AIO and magic == 0:
        return (bc.NONE, bc.GZIP, bc.SNAPPY)
    return LEGACY_CODECS


def test_what_independent_builders_refuse():
    """The combinations the property test leaves out, because no independent library writes
    them: zstd in a legacy message (Kafka forbids it too) and aiokafka's magic-0 lz4."""
    for builder in (KPLegacyBuilder, AioLegacyBuilder):
        for magic in (0, 1):
            b = builder(magic, bc.ZSTD, 1 << 20)
            with pytest.raises(Exception, match="(?i)compression|codec"):
                b.append(0, 1, b"k", b"v")
                b.build()
    b = AioLegacyBuilder(0, bc.LZ4, 1 << 20)
    with pytest.raises(Exception, match="LZ4"):
        b.append(0, 1, b"k", b"v")
        b.build()
    # and they are not refused by kafka-python
    assert KPUnsupportedCodecError is not None
    b = KPLegacyBuilder(0, bc.LZ4, 1 << 20)
    b.append(0, 1, b"k", b"v")
    assert b.build()


blobs = st.one_of(st.none(), st.binary(max_size=64),
                  st.builds(lambda n, i: bc.text_value(i, n), st.integers(0, 300),
                            st.integers(0, 1000)))
headers = st.lists(st.tuples(st.text(max_size=12), st.one_of(st.none(), st.binary(max_size=16))),
                   max_size=4)


@st.composite
def produced(draw):
    lib = draw(st.sampled_from([KP, AIO]))
    magic = draw(st.sampled_from([0, 1, 2]))
    codec = draw(st.sampled_from(producible(lib, magic)))
    n = draw(st.integers(1, 25))
    keys = draw(st.lists(blobs, min_size=n, max_size=n))
    values = draw(st.lists(blobs, min_size=n, max_size=n))
    hdrs = draw(st.lists(headers, min_size=n, max_size=n)) if magic == 2 else [[]] * n
    first_ts = draw(st.integers(0, 1 << 42))
    ts = [first_ts + d for d in draw(st.lists(st.integers(-10**6, 10**6), min_size=n,
                                              max_size=n))]
    ts = [max(t, 0) for t in ts]
    base = draw(st.integers(0, 1 << 40))
    log_append = draw(st.booleans()) if magic >= 1 else False
    transactional = draw(st.booleans()) if magic == 2 else False
    return lib, magic, codec, list(zip(ts, keys, values, hdrs, strict=True)), base, \
        log_append, transactional


def build_independently(lib, magic, codec, records, base, log_append, transactional):
    """Bytes of ``records`` at offsets base.. as a producer library writes them, then what
    the broker does (offsets; LogAppendTime with its CRC recomputed)."""
    lat = bc.LOG_APPEND_TS
    if magic == 2:
        cls = KPDefaultBuilder if lib == KP else AioDefaultBuilder
        pid, epoch, seq = (77, 1, 0) if transactional else (-1, -1, -1)
        b = cls(2, codec, int(transactional), pid, epoch, seq, 1 << 30)
        for i, (t, k, v, h) in enumerate(records):
            assert b.append(i, t, k, v, list(h)) is not None
        out = bytearray(b.build())
        if log_append:
            bc.v2_set_attributes(out, bc.V2_LOG_APPEND_TIME, max_timestamp=lat)
        return bytes(bc.stamp_offset(out, base))
    cls = KPLegacyBuilder if lib == KP else AioLegacyBuilder
    if codec == bc.NONE:
        parts = []
        for i, (t, k, v, _h) in enumerate(records):
            b = cls(magic, bc.NONE, 1 << 30)
            assert b.append(base + i, t, k, v) is not None
            entry = bytearray(b.build())
            if log_append:
                bc.legacy_log_append_time(entry, lat)
            parts.append(bytes(entry))
        return b"".join(parts)
    b = cls(magic, codec, 1 << 30)
    for i, (t, k, v, _h) in enumerate(records):
        assert b.append((base + i) if magic == 0 else i, t, k, v) is not None
    out = bc.stamp_offset(bytearray(b.build()), base + len(records) - 1)
    if log_append:
        bc.legacy_log_append_time(out, lat)
    return bytes(out)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(produced())
def test_independent_builders_round_trip_through_kafkafs(case):
    _lib, magic, _codec, records, base, log_append, transactional = case
    data = build_independently(*case)
    batches = list(iter_batches(data, validate=True))
    got = [r for b in batches for r in b.record_tuples()]
    want = []
    for i, (t, k, v, h) in enumerate(records):
        ts = -1 if magic == 0 else (bc.LOG_APPEND_TS if log_append else t)
        want.append((base + i, ts, None if k is None else bytes(k),
                     None if v is None else bytes(v), tuple(h)))
    assert [(r[0], r[1], r[2], r[3], tuple(r[4])) for r in got] == want
    expected_type = -1 if magic == 0 else (1 if log_append else 0)
    assert {b.timestamp_type for b in batches} == {expected_type}
    assert all(b.is_transactional == transactional for b in batches)
    assert batches[-1].next_offset == base + len(records)
    # the library's own reader agrees record for record
    whole = KPMemoryRecords(data)
    theirs_ = []
    while (batch := whole.next_batch()) is not None:
        theirs_ += [(r.offset, _norm_ts(r.timestamp), r.key, r.value,
                     tuple(r.headers)) for r in batch]
    assert theirs_ == want
