"""The partition log: append, read, roll, timestamps, retention, flush, recovery."""

from __future__ import annotations

import os
import shutil
import struct

import pytest
from conftest import tree_state

from kafkafs.log.config import LogConfig
from kafkafs.log.errors import OffsetOutOfRangeError, RecordTooLargeError
from kafkafs.log.loader import load_log
from kafkafs.log.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from kafkafs.log.names import parse_segment_filename
from kafkafs.record.batch import encode_batch, iter_batches
from kafkafs.record.control import ABORT, encode_end_txn_marker_batch


def make_log(d, **cfg):
    part = os.path.join(d, "t-0")
    os.makedirs(part, exist_ok=True)
    return load_log(part, "t", 0, LogConfig(**cfg), had_clean_shutdown=True)


def recs(n, start_ts=1000, size=10, prefix=b"v"):
    return [(start_ts + i, None, prefix + str(i).encode().rjust(size, b"0"), ()) for i in range(n)]


def test_append_assigns_offsets_and_reads_back(log_dir):
    lg = make_log(log_dir)
    assert lg.append(recs(3)) == (0, 2)
    assert lg.append(recs(2)) == (3, 4)
    assert lg.log_end_offset == 5
    values = [r.value for r in lg.records()]
    assert values == [r[2] for r in recs(3)] + [r[2] for r in recs(2)]
    assert [r.offset for r in lg.records()] == list(range(5))
    assert lg.read_record(3).value == recs(2)[0][2]
    with pytest.raises(OffsetOutOfRangeError):
        lg.read_record(5)
    lg.close()


def test_segment_file_is_what_kafka_python_reads(log_dir):
    from kafka.record import MemoryRecords

    lg = make_log(log_dir)
    for i in range(10):
        lg.append([(5000 + i, b"k%d" % i, b"value-%d" % i, [("h", b"x")])])
    lg.close()
    data = open(os.path.join(log_dir, "t-0", "00000000000000000000.log"), "rb").read()
    mr = MemoryRecords(data)
    seen = []
    while mr.has_next():
        for r in mr.next_batch():
            seen.append((r.offset, r.timestamp, r.key, r.value, list(r.headers)))
    assert seen == [(i, 5000 + i, b"k%d" % i, b"value-%d" % i, [("h", b"x")])
                    for i in range(10)]


def expected_index(batches, interval):
    """Kafka's rule, computed independently: an entry for a batch once more than
    ``interval`` bytes were appended since the last entry (the first batch never)."""
    entries, time_entries = [], []
    since = 0
    max_ts, max_ts_off = -1, None
    for b in batches:
        if b.max_timestamp > max_ts:
            max_ts, max_ts_off = b.max_timestamp, b.last_offset
        if since > interval:
            entries.append((b.last_offset, b.position))
            if not time_entries or max_ts > time_entries[-1][0]:
                time_entries.append((max_ts, max_ts_off))
            since = 0
        since += b.size
    return entries, time_entries, (max_ts, max_ts_off)


def test_index_entries_follow_kafka_rule_and_are_trimmed_on_roll(log_dir):
    lg = make_log(log_dir, index_interval_bytes=200, segment_bytes=5000)
    for i in range(60):
        lg.append(recs(1 + i % 3, start_ts=10_000 + (i * 7) % 50, size=20 + i % 7))
    segs = lg.segments()
    assert len(segs) > 1
    first = segs[0]
    data = open(first.log_path, "rb").read()
    batches = list(iter_batches(data))
    entries, time_entries, last = expected_index(batches, 200)
    idx = open(first.index_path, "rb").read()
    assert len(idx) == 8 * len(entries)  # trimmed at roll
    got = [struct.unpack_from(">ii", idx, i) for i in range(0, len(idx), 8)]
    assert got == [(o - first.base_offset, p) for o, p in entries]
    tidx = open(first.time_index_path, "rb").read()
    got_t = [struct.unpack_from(">qi", tidx, i) for i in range(0, len(tidx), 12)]
    if last[0] > (time_entries[-1][0] if time_entries else -1):
        time_entries.append(last)  # the final entry written when the segment rolls
    assert got_t == [(t, o - first.base_offset) for t, o in time_entries]
    # the active segment's index is preallocated
    assert os.path.getsize(lg.active_segment.index_path) == LogConfig().segment_index_bytes
    lg.close()
    # closing trims the active index too
    assert os.path.getsize(lg.active_segment.index_path) % 8 == 0
    assert os.path.getsize(lg.active_segment.index_path) < 1024


def test_roll_on_segment_bytes_and_names(log_dir):
    lg = make_log(log_dir, segment_bytes=1000)
    for _ in range(30):
        lg.append(recs(2, size=50))
    names = sorted(n for n in os.listdir(lg.dir) if n.endswith(".log"))
    assert len(names) > 3
    assert all(len(n) == 24 for n in names)
    bases = [int(n[:20]) for n in names]
    assert bases[0] == 0 and bases == sorted(bases)
    for seg in lg.segments()[:-1]:
        assert seg.size <= 1000
    assert [r.offset for r in lg.records()] == list(range(60))
    lg.close()


def test_roll_on_full_index(log_dir):
    lg = make_log(log_dir, segment_index_bytes=8 * 3, index_interval_bytes=1)
    for _ in range(20):
        lg.append(recs(1, size=40))
    assert len(lg.segments()) > 2
    assert [r.offset for r in lg.records()] == list(range(20))
    lg.close()


def test_record_too_large_is_refused_and_nothing_appended(log_dir):
    lg = make_log(log_dir, max_message_bytes=200)
    lg.append(recs(1))
    with pytest.raises(RecordTooLargeError):
        lg.append([(1, None, b"x" * 300, ())])
    assert lg.log_end_offset == 1
    lg.close()


def test_offset_for_timestamp_scans_records_not_batches(log_dir):
    lg = make_log(log_dir, index_interval_bytes=50)
    # CreateTime is not monotonic: inside a batch, the max may come first
    lg.append([(100, None, b"a", ()), (300, None, b"b", ()), (200, None, b"c", ())])
    lg.append([(150, None, b"d", ()), (400, None, b"e", ())])
    assert lg.offset_for_timestamp(250) == (1, 300)
    assert lg.offset_for_timestamp(300) == (1, 300)
    assert lg.offset_for_timestamp(301) == (4, 400)
    assert lg.offset_for_timestamp(50) == (0, 100)
    assert lg.offset_for_timestamp(401) is None
    assert lg.offset_for_timestamp(EARLIEST_TIMESTAMP) == (0, -1)
    assert lg.offset_for_timestamp(LATEST_TIMESTAMP) == (5, -1)
    lg.close()


def test_retention_by_size_and_time_keeps_active(log_dir):
    lg = make_log(log_dir, segment_bytes=500, retention_bytes=1200, file_delete_delay_ms=0)
    for i in range(40):
        lg.append(recs(1, start_ts=1000 + i, size=60))
    before = len(lg.segments())
    n = lg.delete_old_segments(now=2000)
    assert n > 0
    assert len(lg.segments()) == before - n
    assert lg.size_in_bytes() <= 1200 + 500
    assert lg.log_start_offset == lg.segments()[0].base_offset
    deleted = [x for x in os.listdir(lg.dir) if x.endswith(".deleted")]
    assert deleted
    lg.remove_deleted_segments(now=2001)
    assert not [x for x in os.listdir(lg.dir) if x.endswith(".deleted")]
    assert [r.offset for r in lg.records()][0] == lg.log_start_offset
    # time: everything old, but never the active segment
    lg.config = LogConfig(segment_bytes=500, retention_ms=10, file_delete_delay_ms=0)
    lg.delete_old_segments(now=10_000_000)
    assert len(lg.segments()) == 1
    assert lg.log_start_offset == lg.active_segment.base_offset
    lg.close()


def test_flush_advances_recovery_point(log_dir):
    lg = make_log(log_dir)
    lg.append(recs(5))
    assert lg.recovery_point == 0
    assert lg.needs_flush(now=10**13) is False  # flush.ms default: never
    lg.config = LogConfig(flush_messages=3)
    assert lg.needs_flush(now=0)
    lg.flush()
    assert lg.recovery_point == 5
    assert not lg.needs_flush(now=0)
    lg.close()


def test_recovery_truncates_garbage_tail_and_rebuilds_index(log_dir):
    lg = make_log(log_dir, index_interval_bytes=100)
    for i in range(50):
        lg.append(recs(2, size=30))
    lg.flush()
    path = lg.active_segment.log_path
    index_path = lg.active_segment.index_path
    lg.close()
    good_size = os.path.getsize(path)
    good_index = open(index_path, "rb").read()
    with open(path, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x63\x00\x00\x01\x00garbage!" * 10)
    os.unlink(index_path)
    lg = load_log(os.path.dirname(path), "t", 0, LogConfig(index_interval_bytes=100),
                  recovery_point=0, had_clean_shutdown=False)
    assert os.path.getsize(path) == good_size
    assert lg.log_end_offset == 100
    assert [r.offset for r in lg.records()] == list(range(100))
    lg.close()
    assert open(index_path, "rb").read() == good_index


@pytest.mark.parametrize("clean", [False, True])
def test_segments_recovery_rebuilds_are_not_sanity_checked_first(log_dir, monkeypatch, clean):
    """KAFKA-7283: after an unclean shutdown the segments from the recovery point on are
    recovered without their indexes being checked first (a crashed active segment's
    preallocated indexes were opened twice); the torn tail above the recovery point is
    still truncated and its garbage index rebuilt. After a clean shutdown the active
    segment is still checked."""
    from kafkafs.log.segment import LogSegment
    from kafkafs.log.txnindex import TransactionIndex

    lg = make_log(log_dir, segment_bytes=400, index_interval_bytes=50)
    for i in range(30):
        lg.append(recs(1, size=40))
    bases = [s.base_offset for s in lg.segments()]
    assert len(bases) >= 4
    last = lg.active_segment
    lg.close()
    good = os.path.getsize(last.log_path)
    with open(last.index_path, "rb") as f:
        good_index = f.read()
    for seg in lg.segments():  # (empty: no aborted transaction; checked when present)
        open(seg.log_path[:-4] + ".txnindex", "ab").close()
    if not clean:
        with open(last.log_path, "ab") as f:
            f.write(bytes(8) + b"\x00\x00\x01\x00" + b"torn")
        with open(last.index_path, "wb") as f:
            f.write(b"\xff" * 16)
    checked = []
    real_segment_check = LogSegment.sanity_check
    real_txn_check = TransactionIndex.sanity_check

    def segment_check(seg):
        checked.append(seg.base_offset)
        return real_segment_check(seg)

    def txn_check(idx):
        checked.append(idx._start_offset)
        return real_txn_check(idx)

    monkeypatch.setattr(LogSegment, "sanity_check", segment_check)
    monkeypatch.setattr(TransactionIndex, "sanity_check", txn_check)
    lg = load_log(os.path.dirname(last.log_path), "t", 0,
                  LogConfig(segment_bytes=400, index_interval_bytes=50),
                  recovery_point=bases[2] + 1, had_clean_shutdown=clean)
    if clean:
        assert sorted(set(checked)) == bases
    else:
        assert checked == bases[:2]  # 2 and later are recovered, not checked
    assert os.path.getsize(last.log_path) == good
    assert [r.offset for r in lg.records()] == list(range(30))
    lg.close()
    with open(last.index_path, "rb") as f:
        assert f.read() == good_index


def test_recovery_of_corrupt_crc_deletes_later_segments(log_dir):
    lg = make_log(log_dir, segment_bytes=400)
    for i in range(30):
        lg.append(recs(1, size=40))
    segs = lg.segments()
    assert len(segs) >= 4
    victim = segs[1]
    lg.close()
    with open(victim.log_path, "r+b") as f:
        f.seek(70)  # inside the first batch's body: its CRC no longer matches
        b = f.read(1)
        f.seek(70)
        f.write(bytes([b[0] ^ 0xFF]))
    lg = load_log(os.path.dirname(victim.log_path), "t", 0, LogConfig(segment_bytes=400),
                  recovery_point=0, had_clean_shutdown=False)
    assert lg.log_end_offset == victim.base_offset
    assert [r.offset for r in lg.records()] == list(range(victim.base_offset))
    assert len(lg.segments()) == 2
    lg.close()


def test_loader_removes_leftovers_and_completes_swap(log_dir):
    lg = make_log(log_dir, segment_bytes=300)
    for i in range(12):
        lg.append(recs(1, size=40))
    segs = lg.segments()
    d = lg.dir
    lg.close()
    # .deleted leftovers go; a .swap replacing the second segment is completed
    open(os.path.join(d, "00000000000000000000.log.deleted"), "wb").close()
    second = segs[1]
    data = open(second.log_path, "rb").read()
    with open(second.log_path + ".swap", "wb") as f:
        f.write(data)
    open(os.path.join(d, "00000000000000099999.index"), "wb").close()  # orphan index
    lg = load_log(d, "t", 0, LogConfig(segment_bytes=300), had_clean_shutdown=True)
    names = os.listdir(d)
    assert not any(n.endswith((".deleted", ".swap")) for n in names)
    assert "00000000000000099999.index" not in names
    assert [r.offset for r in lg.records()] == list(range(12))
    lg.close()


def test_read_only_log_never_writes(log_dir):
    lg = make_log(log_dir)
    lg.append(recs(3))
    lg.close()
    before = {n: os.path.getsize(os.path.join(lg.dir, n)) for n in os.listdir(lg.dir)}
    mtimes = {n: os.stat(os.path.join(lg.dir, n)).st_mtime_ns for n in os.listdir(lg.dir)}
    ro = load_log(lg.dir, "t", 0, LogConfig(), had_clean_shutdown=False, writable=False)
    assert [r.offset for r in ro.records()] == [0, 1, 2]
    ro.close()
    after = {n: os.path.getsize(os.path.join(lg.dir, n)) for n in os.listdir(lg.dir)}
    assert after == before
    assert {n: os.stat(os.path.join(lg.dir, n)).st_mtime_ns for n in os.listdir(lg.dir)} == mtimes


def test_read_only_log_follows_a_writer(log_dir):
    lg = make_log(log_dir, segment_bytes=300)
    lg.append(recs(2, size=40))
    ro = load_log(lg.dir, "t", 0, LogConfig(), writable=False)
    assert ro.log_end_offset == 2
    for _ in range(10):
        lg.append(recs(1, size=40))
    assert ro.refresh_from_disk()
    assert ro.log_end_offset == 12
    assert [r.offset for r in ro.records()] == list(range(12))
    ro.close()
    lg.close()


def test_read_only_log_follows_writes_into_a_preallocated_segment(log_dir):
    """A broker with log.preallocate=true writes into a file already sized with zeros: the
    zero tail ends the log (no error), and batches written over it are picked up."""
    from kafkafs.record import encode_batch

    part = os.path.join(log_dir, "t-0")
    os.makedirs(part)
    path = os.path.join(part, "00000000000000000000.log")
    first = encode_batch([(1000, None, b"one", ()), (1001, None, b"two", ())], base_offset=0)
    with open(path, "wb") as f:
        f.write(first + bytes(64 * 1024))
    ro = load_log(part, "t", 0, LogConfig(), writable=False)
    assert ro.log_end_offset == 2
    assert [r.value for r in ro.records()] == [b"one", b"two"]
    later = encode_batch([(1002, None, b"three", ())], base_offset=2)
    fd = os.open(path, os.O_WRONLY)
    os.pwrite(fd, later, len(first))  # the file size does not change
    os.close(fd)
    assert ro.refresh_from_disk()
    assert ro.log_end_offset == 3
    assert [r.value for r in ro.records()] == [b"one", b"two", b"three"]
    assert os.path.getsize(path) == len(first) + 64 * 1024  # never written by the reader
    ro.close()
    # a writable load (a broker restarted after a crash would do the same) cuts the tail
    rw = load_log(part, "t", 0, LogConfig(), had_clean_shutdown=False)
    assert rw.log_end_offset == 3
    assert os.path.getsize(path) == len(first) + len(later)
    rw.close()


from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(appends=st.lists(st.tuples(st.integers(1, 4), st.integers(0, 300),
                                  st.integers(0, 10_000)), min_size=1, max_size=60),
       interval=st.sampled_from([0, 64, 500, 4096]))
def test_index_entries_match_kafkas_rule_property(tmp_path_factory, appends, interval):
    d = str(tmp_path_factory.mktemp("prop"))
    lg = make_log(d, index_interval_bytes=interval, segment_bytes=100_000)
    for n, size, ts in appends:
        lg.append([(ts + i * 3 % 7, None, b"x" * size, ()) for i in range(n)])
    lg.close()
    seg = lg.segments()[0]
    batches = list(iter_batches(open(seg.log_path, "rb").read()))
    entries, time_entries, last = expected_index(batches, interval)
    if last[0] > (time_entries[-1][0] if time_entries else -1):
        time_entries.append(last)  # the final entry written at close (LogSegment.close)
    idx = open(seg.index_path, "rb").read()
    assert [struct.unpack_from(">ii", idx, i) for i in range(0, len(idx), 8)] == \
        [(o - seg.base_offset, p) for o, p in entries]
    tidx = open(seg.time_index_path, "rb").read()
    assert [struct.unpack_from(">qi", tidx, i) for i in range(0, len(tidx), 12)] == \
        [(t, o - seg.base_offset) for t, o in time_entries]


def _partition_files(lg) -> dict[str, bytes]:
    """Every file of ``lg``'s partition dir by name (after ``lg.close()``)."""
    out = {}
    for name in sorted(os.listdir(lg.dir)):
        with open(os.path.join(lg.dir, name), "rb") as f:
            out[name] = f.read()
    return out


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(runs=st.lists(st.lists(st.tuples(st.integers(1, 4), st.integers(0, 400),
                                        st.integers(0, 5_000)), min_size=1, max_size=12),
                     min_size=1, max_size=8),
       interval=st.sampled_from([0, 64, 500, 4096]),
       segment_bytes=st.sampled_from([1000, 3000, 100_000]),
       segment_ms=st.sampled_from([500, 10**9]),
       form=st.sampled_from(["buffer", "list"]))
def test_a_run_appends_as_its_batches_one_by_one(tmp_path_factory, runs, interval,
                                                 segment_bytes, segment_ms, form):
    """``append_encoded_run`` of runs of batches (one buffer, as the mount's ``append``
    hands them; or a list, as staged runs) leaves the very files that ``append_encoded``
    of each batch in turn leaves: segment bytes and offsets, rolls (by size, by
    ``segment.ms`` from record timestamps, mid-run), and offset and time index entries
    (``index.interval.bytes``) written in one pass per run."""
    one = make_log(str(tmp_path_factory.mktemp("one")), index_interval_bytes=interval,
                   segment_bytes=segment_bytes, segment_ms=segment_ms)
    many = make_log(str(tmp_path_factory.mktemp("run")), index_interval_bytes=interval,
                    segment_bytes=segment_bytes, segment_ms=segment_ms)
    for run in runs:
        batches = [encode_batch([(ts + i * 3 % 7, None, b"x" * size, ()) for i in range(n)])
                   for n, size, ts in run]
        for b in batches:
            one.append_encoded(bytearray(b))
        arg = bytearray(b"".join(batches)) if form == "buffer" else \
            [bytearray(b) for b in batches]
        assert many.append_encoded_run(arg) == len(batches)
        assert many.log_end_offset == one.log_end_offset
    assert [s.base_offset for s in many.segments()] == [s.base_offset for s in one.segments()]
    one.close()
    many.close()
    files = _partition_files(many)
    assert files == _partition_files(one)
    for seg in many.segments():  # and those entries are Kafka's rule's
        name = os.path.basename(seg.log_path)
        entries, time_entries, last = expected_index(iter_batches(files[name]), interval)
        if last[0] > (time_entries[-1][0] if time_entries else -1):
            time_entries.append(last)  # the final entry written at roll and close
        idx, tidx = files[name[:-4] + ".index"], files[name[:-4] + ".timeindex"]
        assert [struct.unpack_from(">ii", idx, i) for i in range(0, len(idx), 8)] == \
            [(o - seg.base_offset, p) for o, p in entries]
        assert [struct.unpack_from(">qi", tidx, i) for i in range(0, len(tidx), 12)] == \
            [(t, o - seg.base_offset) for t, o in time_entries]


def test_roll_on_segment_ms_by_record_timestamps(log_dir):
    # Kafka's rule: the incoming batch's max timestamp minus the first batch's (segment.ms)
    lg = make_log(log_dir, segment_ms=1000)
    lg.append([(10_000, None, b"a", ())])
    lg.append([(10_500, None, b"b", ())])
    assert len(lg.segments()) == 1
    lg.append([(11_001, None, b"c", ())])
    assert [s.base_offset for s in lg.segments()] == [0, 2]
    lg.append([(11_500, None, b"d", ())])  # ages from the new segment's first batch
    assert [s.base_offset for s in lg.segments()] == [0, 2]
    lg.close()


def read_bytes(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def segment_files(d, suffix=""):
    """Names of the segment files (.log/.index/.timeindex/.txnindex) in ``d`` ending with
    ``suffix`` exactly ("" : the live ones, ".deleted": those awaiting removal)."""
    out = set()
    for n in os.listdir(d):
        p = parse_segment_filename(n)
        if p and p[1] in (".log", ".index", ".timeindex", ".txnindex") and p[2] == suffix:
            out.add(n)
    return out


def test_deleted_segments_wait_for_file_delete_delay(log_dir):
    """Retention with file.delete.delay.ms=300 (Kafka ``LocalLog.deleteSegmentFiles``): the
    old segments leave the log at once -- log start offset moved, reads and lookups start
    there, their aborted transaction is gone -- while their .log/.index/.timeindex/.txnindex
    are only renamed ``.deleted`` (same bytes). ``remove_deleted_segments(now)`` removes each
    pass's files exactly when its own delay is over, and no earlier."""
    cfg = {"segment_bytes": 500, "retention_bytes": 1000, "file_delete_delay_ms": 300}
    lg = make_log(log_dir, **cfg)
    # an aborted transaction in the first segment gives it a .txnindex
    lg.append_encoded(bytearray(encode_batch([(1000, b"k", b"aborted", ())], producer_id=7,
                                             producer_epoch=0, base_sequence=0,
                                             is_transactional=True)))
    lg.append_encoded(bytearray(encode_end_txn_marker_batch(
        ABORT, base_offset=0, timestamp=1001, producer_id=7, producer_epoch=0,
        coordinator_epoch=1)))
    values = {}
    for i in range(20):
        first, _ = lg.append([(2000 + i, None, b"v%02d" % i + b"x" * 60, ())])
        values[first] = b"v%02d" % i + b"x" * 60
    assert lg.aborted_txns(0, lg.log_end_offset) != []
    assert [s.base_offset for s in lg.segments()] == [0, 4, 7, 10, 13, 16, 19]
    before = {n: read_bytes(os.path.join(lg.dir, n)) for n in segment_files(lg.dir)}
    assert "00000000000000000000.txnindex" in before

    snapshots = sorted(n for n in os.listdir(lg.dir) if n.endswith(".snapshot"))
    assert [int(n[:20]) for n in snapshots][:4] == [4, 7, 10, 13]  # taken at each roll
    t = 1_000_000
    assert lg.delete_old_segments(now=t) == 4
    # the snapshots at the deleted segments' base offsets wait with them, renamed
    assert sorted(n for n in os.listdir(lg.dir) if n.endswith(".snapshot.deleted")) == \
        [f"{b:020d}.snapshot.deleted" for b in (4, 7, 10)]
    assert f"{13:020d}.snapshot" in os.listdir(lg.dir)
    gone = {n for n in before if int(n[:20]) < 13}
    assert segment_files(lg.dir, ".deleted") == {n + ".deleted" for n in gone}
    assert "00000000000000000000.txnindex.deleted" in segment_files(lg.dir, ".deleted")
    assert segment_files(lg.dir) == set(before) - gone
    for n in gone:  # renamed, not rewritten
        assert read_bytes(os.path.join(lg.dir, n + ".deleted")) == before[n]
    # ... but gone from the log right away
    assert lg.log_start_offset == 13
    assert [s.base_offset for s in lg.segments()] == [13, 16, 19]
    assert [(r.offset, r.value) for r in lg.records()] == \
        [(o, v) for o, v in sorted(values.items()) if o >= 13]
    with pytest.raises(OffsetOutOfRangeError):
        lg.read_record(5)
    assert lg.offset_for_timestamp(EARLIEST_TIMESTAMP) == (13, -1)
    assert lg.offset_for_timestamp(0) == (13, 2011)
    assert lg.aborted_txns(0, lg.log_end_offset) == []

    # a second pass 100 ms later deletes more: its files get their own delay (t + 400)
    for i in range(20, 26):
        lg.append([(2000 + i, None, b"v%02d" % i + b"x" * 60, ())])
    assert lg.delete_old_segments(now=t + 100) == 2
    assert not {n for n in segment_files(lg.dir) if int(n[:20]) in (13, 16)}  # renamed too
    pending_second = {n for n in segment_files(lg.dir, ".deleted") if int(n[:20]) in (13, 16)}
    assert len(pending_second) == 6
    assert lg.log_start_offset == 19

    assert lg.remove_deleted_segments(now=t + 299) == 0
    assert segment_files(lg.dir, ".deleted") == {n + ".deleted" for n in gone} | pending_second
    assert lg.remove_deleted_segments(now=t + 300) == 4
    assert not [n for n in os.listdir(lg.dir) if n.endswith(".snapshot.deleted")
                and int(n[:20]) < 13]
    assert segment_files(lg.dir, ".deleted") == pending_second
    assert lg.remove_deleted_segments(now=t + 399) == 0
    assert lg.remove_deleted_segments(now=t + 400) == 2
    assert segment_files(lg.dir, ".deleted") == set()
    assert [r.offset for r in lg.records()] == list(range(19, lg.log_end_offset))
    lg.close()


def backup_segment(root, name, start, values):
    """A segment written by another log (a backup of the partition): ``values`` at offsets
    ``start``..., sealed by a roll. Returns its partition dir."""
    part = os.path.join(root, name, "t-0")
    os.makedirs(part)
    lg = load_log(part, "t", 0, LogConfig(index_interval_bytes=30), had_clean_shutdown=True)
    if start:
        lg.truncate_fully_and_start_at(start)
    for i, v in enumerate(values):
        lg.append([(5000 + start + i, None, v, ())])
    lg.roll()
    lg.close()
    return part


def copy_segment(src, dst, base):
    """Copy the .log, .index and .timeindex of segment ``base`` from ``src`` into ``dst``."""
    for suffix in (".log", ".index", ".timeindex"):
        name = f"{base:020d}{suffix}"
        shutil.copy2(os.path.join(src, name), os.path.join(dst, name))


def test_adopt_segment_restores_an_older_segment_and_refuses_overlaps(tmp_path):
    """``Log.adopt_segment`` (what the daemon's watcher calls for a ``.log`` copied into a
    known partition): a segment restored from a backup below the first segment, ending at or
    before it, joins the log -- its records readable at their own offsets, the log start
    offset moved down to it, appends going on. A copied segment that overlaps the first one,
    one past the log end, or the base of a live segment is refused: the log is unchanged and
    the copied files are left as they were (not a byte, name or mtime changed)."""
    live = make_log(str(tmp_path / "live"))
    live.truncate_fully_and_start_at(10)  # offsets 0..9 were lost
    for i in range(10, 15):
        live.append([(5000 + i, None, b"live%d" % i, ())])
    changes = []
    live.on_change.append(lambda lg: changes.append(lg.log_start_offset))
    expected_live = [(o, b"live%d" % o) for o in range(10, 15)]

    def unchanged():
        assert (live.log_start_offset, live.log_end_offset) == (10, 15)
        assert [s.base_offset for s in live.segments()] == [10]
        assert [(r.offset, r.value) for r in live.records()] == expected_live
        assert changes == []

    # overlapping: offsets 0..11 reach into the first segment (10..14)
    overlap = backup_segment(str(tmp_path), "overlap", 0, [b"old%d" % i for i in range(12)])
    copy_segment(overlap, live.dir, 0)
    state = tree_state(live.dir)
    assert live.adopt_segment(0) is False
    unchanged()
    assert tree_state(live.dir) == state
    # newer: a segment past the log end offset is not adopted while running
    newer = backup_segment(str(tmp_path), "newer", 20, [b"new%d" % i for i in range(20, 25)])
    copy_segment(newer, live.dir, 20)
    state = tree_state(live.dir)
    assert live.adopt_segment(20) is False
    unchanged()
    assert tree_state(live.dir) == state
    # the base offset of a live segment
    assert live.adopt_segment(10) is False
    unchanged()

    # older and fitting: offsets 0..9, just below the first segment
    backup = backup_segment(str(tmp_path), "backup", 0, [b"bak%d" % i for i in range(10)])
    copy_segment(backup, live.dir, 0)  # replaces the refused overlapping copy
    assert live.adopt_segment(0) is True
    assert changes == [0]
    assert [s.base_offset for s in live.segments()] == [0, 10]
    assert (live.log_start_offset, live.log_end_offset) == (0, 15)
    assert [(r.offset, r.value) for r in live.records()] == \
        [(o, b"bak%d" % o) for o in range(10)] + expected_live
    assert live.read_record(7).value == b"bak7"
    assert live.offset_for_timestamp(EARLIEST_TIMESTAMP) == (0, -1)
    assert live.offset_for_timestamp(5003) == (3, 5003)
    assert live.adopt_segment(0) is False  # already part of the log
    assert live.append(recs(1)) == (15, 15)
    live.close()


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("keyed", [False, True], ids=["values", "keyed"])
def test_encode_payload_is_encode_of_the_same_records(log_dir, codec, keyed):
    """``encode_payload`` (kafkafs.fs.append) of the records ``encode_text`` encoded (what
    ``append`` hands it, so a compressed topic's lines are encoded once) is the very batch
    ``Log.encode`` makes of those records: same bytes, CRC included; under LogAppendTime
    every record reads back with the given time; over max.message.bytes the log's append
    refuses it (RecordTooLargeError, nothing appended)."""
    from kafkafs.fs.append import encode_payload
    from kafkafs.record import fast

    lg = make_log(log_dir, compression_type=codec)
    lines = [b"k%d:line %d %s" % (i % 7, i, b"x" * (i % 50)) for i in range(300)] + [b"k:"]
    text = b"\n".join(lines) + b"\n"
    payload, n, consumed = fast.encode_text(text, 0, 1 << 30, 1.0, b":" if keyed else None)
    assert (n, consumed) == (len(lines), len(text))
    ts = 1_700_000_000_123
    records = [(ts, *line.partition(b":")[::2], ()) if keyed else (ts, None, line, ())
               for line in lines]
    assert encode_payload(lg, payload, n, ts) == lg.encode(records)
    lg.close()
    lat = make_log(os.path.join(log_dir, "lat"), compression_type=codec,
                   message_timestamp_type="LogAppendTime", max_message_bytes=2000)
    few = fast.encode_text(b"".join(x + b"\n" for x in lines[:10]), 0, 1 << 30, 1.0,
                           b":" if keyed else None)[0]
    (batch,) = iter_batches(encode_payload(lat, few, 10, ts))
    assert batch.timestamp_type == 1 and batch.max_timestamp == ts
    got = [(r.timestamp, r.key, r.value) for r in batch.records()]
    assert got == [(ts, *r[1:3]) for r in records[:10]]
    if codec == "none":
        with pytest.raises(RecordTooLargeError):
            lat.append_encoded(encode_payload(lat, payload, n, ts))
        assert lat.log_end_offset == 0
    lat.close()
