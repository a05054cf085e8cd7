"""The log cleaner (Kafka ``LogCleanerTest`` / ``LogCleanerIntegrationTest``): every pass is
checked against an independent model (tests/cleaner_model.py: key -> last offset and value,
tombstones with their horizon) and the cleaned files are read back with kafka-python; the
indexes pass the sanity and order checks. The record-level functions are held to their
pure-Python twins."""

from __future__ import annotations

import array
import os
import random
import shutil
import struct
import threading

import pytest
from cleaner_model import (
    Model,
    check_index_lookups,
    check_indexes,
    check_offsets,
    read_partition,
)
from conftest import tree_state
from crc32c import crc32c
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kafkafs.log import cleaner as cleaner_mod
from kafkafs.log.cleaner import (
    Cleaner,
    CleanerConfig,
    LogCleaner,
    group_segments_by_size,
)
from kafkafs.log.config import BrokerConfig, LogConfig
from kafkafs.log.errors import InvalidRecordError
from kafkafs.log.loader import load_log
from kafkafs.log.log import now_ms
from kafkafs.log.throttler import Throttler
from kafkafs.record import compaction
from kafkafs.record import compression as codecs
from kafkafs.record.batch import LOG_APPEND_TIME, RecordBatch, encode_batch
from kafkafs.record.control import ABORT, COMMIT, encode_end_txn_marker_batch
from kafkafs.record.errors import CorruptRecordError

NOW = 1_700_000_000_000
DAY = 86_400_000
CODECS = {"none": codecs.NONE, "gzip": codecs.GZIP, "snappy": codecs.SNAPPY,
          "lz4": codecs.LZ4, "zstd": codecs.ZSTD}


# -- helpers -------------------------------------------------------------------------------
def read(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def make_log(tmp_path, name="t-0", **cfg):
    d = tmp_path / "logs" / name
    d.mkdir(parents=True, exist_ok=True)
    conf = dict(cleanup_policy="compact", segment_bytes=1024, index_interval_bytes=100,
                min_cleanable_dirty_ratio=0.0)
    conf.update(cfg)
    topic, _, part = name.rpartition("-")
    return load_log(str(d), topic, int(part), LogConfig(**conf))


def make_cleaner(*logs, dedupe=1 << 20, **cfg):
    logs_map = {(lg.topic, lg.partition): lg for lg in logs}
    dirs = sorted({os.path.dirname(lg.dir) for lg in logs})
    return LogCleaner(CleanerConfig(dedupe_buffer_size=dedupe, **cfg), dirs, logs_map,
                      clock=lambda: NOW)


def clean(cl, lg, now=NOW, model=None):
    """A pass that must succeed; the model follows it."""
    result = cl.clean_log(lg, now=now)
    assert result.ok, result
    if model is not None:
        model.cleaned(result.end_offset, now, lg.config.delete_retention_ms)
    return result


def verify(lg, model):
    batches = read_partition(lg.dir)
    check_offsets(batches)
    model.check(batches)
    check_indexes(lg)
    check_index_lookups(lg, [r[0] for b in batches for r in b.records])
    return batches


def roll(lg, model, key=b"roll", ts=0):
    """Append one record and roll: the segment before becomes cleanable."""
    first, _ = lg.append([(ts, key, b"x", ())])
    model.append(first, key, b"x", ts)
    lg.roll()


def fill(lg, model, n, keys=40, seed=1, tombstones=0.1, per_batch=1, ts=0, compression=None):
    rnd = random.Random(seed)
    i = 0
    while i < n:
        recs = []
        for _ in range(per_batch):
            k = b"k%03d" % rnd.randrange(keys)
            v = None if rnd.random() < tombstones else b"v%d-%s" % (i, rnd.randbytes(4).hex().encode())
            recs.append((ts + i, k, v, ()))
            i += 1
        first, _last = lg.append(recs, compression=compression)
        for j, (t, k, v, _h) in enumerate(recs):
            model.append(first + j, k, v, t)


# -- basic compaction ----------------------------------------------------------------------
def test_keys_overwritten_across_segments_keep_their_last_value(tmp_path):
    lg = make_log(tmp_path)
    model = Model()
    cl = make_cleaner(lg)
    for rnd in range(4):
        fill(lg, model, 300, seed=rnd, ts=rnd * 1000)
        roll(lg, model)
        before = len(lg.segments())
        result = clean(cl, lg, NOW + rnd, model)
        verify(lg, model)
        assert result.end_offset == lg.active_segment.base_offset
        assert result.records_read > result.records_written > 0
        assert len(lg.segments()) <= before
    # the next first dirty offset is checkpointed
    ckpt = read(os.path.join(os.path.dirname(lg.dir), "cleaner-offset-checkpoint")).decode()
    assert ckpt.split("\n")[2] == f"t 0 {lg.active_segment.base_offset}"


def test_batches_keep_base_and_last_offsets(tmp_path):
    lg = make_log(tmp_path, segment_bytes=4000)
    model = Model()
    fill(lg, model, 400, keys=30, per_batch=7)
    roll(lg, model)
    before = {(b.base_offset, b.last_offset) for b in read_partition(lg.dir)}
    clean(make_cleaner(lg), lg, model=model)
    after = read_partition(lg.dir)
    assert {(b.base_offset, b.last_offset) for b in after} <= before
    verify(lg, model)


@pytest.mark.parametrize("codec", list(CODECS))
def test_every_codec_is_kept_when_batches_are_rebuilt(tmp_path, codec):
    lg = make_log(tmp_path, segment_bytes=6000)
    model = Model()
    fill(lg, model, 600, keys=25, per_batch=10, compression=CODECS[codec])
    roll(lg, model)
    clean(make_cleaner(lg), lg, model=model)
    batches = verify(lg, model)
    data = [b for b in batches if b.records and b.records[0][2] != b"roll"]
    assert data and all(b.attributes & 7 == CODECS[codec] for b in data)


def test_log_append_time_batches_keep_their_timestamps(tmp_path):
    lg = make_log(tmp_path, message_timestamp_type="LogAppendTime")
    model = Model()
    fill(lg, model, 200, keys=10, per_batch=5)
    roll(lg, model)
    stamps = {r[0]: r[1] for b in read_partition(lg.dir) for r in b.records}
    clean(make_cleaner(lg), lg, model=model)
    batches = verify(lg, model)
    for b in batches:
        assert b.attributes & 0x08
        for r in b.records:
            assert r[1] == stamps[r[0]]


def test_create_time_timestamps_survive_a_rebuild(tmp_path):
    lg = make_log(tmp_path)
    model = Model()
    rnd = random.Random(4)
    stamps = {}
    for i in range(200):
        recs = [(NOW - rnd.randint(0, 10 * DAY), b"k%d" % rnd.randrange(15), b"v%d" % i, ())
                for _ in range(4)]
        first, _ = lg.append(recs)
        for j, r in enumerate(recs):
            model.append(first + j, r[1], r[2], r[0])
            stamps[first + j] = r[0]
    roll(lg, model)
    clean(make_cleaner(lg), lg, model=model)
    for b in verify(lg, model):
        for r in b.records:
            if r[2] != b"roll":
                assert r[1] == stamps[r[0]]
        if b.records and not b.attributes & 0x40:
            assert b.max_timestamp == max(r[1] for r in b.records)


# -- tombstones ------------------------------------------------------------------------------
def test_tombstones_kept_by_the_first_pass_and_dropped_after_the_horizon(tmp_path):
    # KIP-534: the first pass sets the batch's delete horizon; a pass past it drops them
    lg = make_log(tmp_path, delete_retention_ms=DAY)
    model = Model()
    cl = make_cleaner(lg)
    for i in range(20):
        first, _ = lg.append([(i, b"k%d" % i, b"v%d" % i, ())])
        model.append(first, b"k%d" % i, b"v%d" % i)
    for i in range(0, 20, 2):
        first, _ = lg.append([(100 + i, b"k%d" % i, None, ())])
        model.append(first, b"k%d" % i, None)
    roll(lg, model)
    clean(cl, lg, NOW, model)
    batches = verify(lg, model)
    tombs = [b for b in batches for r in b.records if r[3] is None]
    assert len(tombs) == 10
    assert all(b.delete_horizon == NOW + DAY for b in tombs)
    # before the horizon: still there, horizon unchanged
    roll(lg, model, key=b"again")
    clean(cl, lg, NOW + DAY - 1, model)
    batches = verify(lg, model)
    assert sum(1 for b in batches for r in b.records if r[3] is None) == 10
    assert {b.delete_horizon for b in batches for r in b.records if r[3] is None} == {NOW + DAY}
    # at the horizon: gone, and nothing older of those keys reappears
    roll(lg, model, key=b"third")
    result = clean(cl, lg, NOW + DAY, model)
    batches = verify(lg, model)
    assert not [r for b in batches for r in b.records if r[3] is None]
    assert result.tombstones_dropped == 10
    keys = {r[2] for b in batches for r in b.records}
    assert not {b"k%d" % i for i in range(0, 20, 2)} & keys


def test_a_tombstone_with_an_old_timestamp_is_kept(tmp_path):
    # KAFKA-4529: the horizon counts from the cleaning, not from the record's timestamp
    lg = make_log(tmp_path, delete_retention_ms=DAY)
    model = Model()
    first, _ = lg.append([(0, b"old", b"value", ())])
    model.append(first, b"old", b"value", 0)
    first, _ = lg.append([(1, b"old", None, ())])
    model.append(first, b"old", None, 1)
    roll(lg, model)
    clean(make_cleaner(lg), lg, NOW, model)
    batches = verify(lg, model)
    (tomb,) = [b for b in batches if b.records and b.records[0][2] == b"old"]
    assert tomb.records[0][3] is None and tomb.records[0][1] == 1
    assert tomb.delete_horizon == NOW + DAY


# -- transactions ----------------------------------------------------------------------------
def txn_batch(pid, keys, epoch=0, seq=0, ts=1000, transactional=True):
    recs = [(ts + i, k, b"p%d-%s" % (pid, k), ()) for i, k in enumerate(keys)]
    return bytearray(encode_batch(recs, producer_id=pid, producer_epoch=epoch,
                                  base_sequence=seq, is_transactional=transactional))


def marker(kind, pid, epoch=0, ts=2000):
    return bytearray(encode_end_txn_marker_batch(kind, base_offset=0, timestamp=ts,
                                                 producer_id=pid, producer_epoch=epoch,
                                                 coordinator_epoch=3))


class TxnLog:
    """Appends to a log and follows it in a Model, transactions included."""

    def __init__(self, lg):
        self.lg = lg
        self.model = Model()
        self.open: dict[int, list] = {}
        self.markers: dict[int, tuple] = {}  # offset -> (kind, pid)
        self.seq: dict[int, int] = {}

    def data(self, pid, keys, transactional=True):
        seq = self.seq.get(pid, 0)
        first, last = self.lg.append_encoded(txn_batch(pid, keys, seq=seq,
                                                       transactional=transactional))
        self.seq[pid] = seq + len(keys)
        offsets = list(range(first, last + 1))
        for o, k in zip(offsets, keys):
            self.model.append(o, k, b"p%d-%s" % (pid, k))
        if transactional:
            self.open.setdefault(pid, []).extend(offsets)
        return first, last

    def end(self, kind, pid):
        first, _ = self.lg.append_encoded(marker(kind, pid))
        self.markers[first] = (kind, pid)
        offsets = self.open.pop(pid, [])
        if kind == ABORT:  # aborted data is never part of the compacted log
            self.model.discard(offsets)
        return first

    def plain(self, key, value=b"x"):
        first, _ = self.lg.append([(1500, key, value, ())])
        self.model.append(first, key, value)
        return first


def test_aborted_data_goes_and_markers_stay_then_go(tmp_path):
    lg = make_log(tmp_path, segment_bytes=600, delete_retention_ms=DAY)
    t = TxnLog(lg)
    t.data(1, [b"a1", b"a2"])
    t.data(2, [b"b1", b"b2"])
    t.plain(b"p1")
    t.data(2, [b"b3"])           # an aborted transaction spanning segments
    t.data(1, [b"a3"])
    commit1 = t.end(COMMIT, 1)
    for i in range(6):
        t.plain(b"fill%d" % i, b"y" * 40)
    abort2 = t.end(ABORT, 2)
    t.data(2, [b"b4"])           # pid 2's last data batch, committed
    t.end(COMMIT, 2)
    t.data(1, [b"a4"])
    t.end(COMMIT, 1)
    lg.roll()
    open_first, _ = t.data(3, [b"c1"])  # an open transaction: the last stable offset
    t.plain(b"after")
    lg.roll()
    t.plain(b"active")
    assert lg.last_stable_offset == open_first
    cl = make_cleaner(lg)
    before_entries = [txn for s in lg.segments() for txn in s.txn_index.all_aborted_txns()]
    assert [x.producer_id for x in before_entries] == [2]
    clean(cl, lg, NOW)
    t.model.cleaned(lg.segments()[-2].base_offset, NOW, DAY)
    batches = verify(lg, t.model)
    offsets = {b.base_offset: b for b in batches}
    # the aborted batches are gone, both markers stay (their transactions had data)
    assert not any(r[2] in (b"b1", b"b2", b"b3") for b in batches for r in b.records)
    assert commit1 in offsets and abort2 in offsets
    # the ABORT marker that stays keeps its .txnindex entry, in the cleaned segment
    entries = [(s.base_offset, txn) for s in lg.segments() for txn in s.txn_index.all_aborted_txns()]
    assert [e[1] for e in entries] == before_entries
    seg_of_abort = max(s.base_offset for s in lg.segments() if s.base_offset <= abort2)
    assert entries[0][0] == seg_of_abort
    # read_committed readers see the same as before
    assert lg.aborted_txns(0, lg.log_end_offset) == before_entries
    assert [r[2] for r in offsets[open_first].records] == [b"c1"]

    # second pass (the open transaction committed meanwhile): the ABORT's transaction has no
    # data left: the marker gets a horizon and leaves the .txnindex; the COMMIT of pid 1
    # still has data and stays without one
    t.end(COMMIT, 3)
    t.plain(b"more")
    lg.roll()
    clean(cl, lg, NOW + 1)
    t.model.cleaned(lg.active_segment.base_offset, NOW + 1, DAY)
    batches = verify(lg, t.model)
    offsets = {b.base_offset: b for b in batches}
    assert offsets[abort2].delete_horizon == NOW + 1 + DAY
    assert offsets[commit1].delete_horizon is None
    assert not [txn for s in lg.segments() for txn in s.txn_index.all_aborted_txns()]
    # third pass past the horizon: the ABORT marker goes
    t.plain(b"more2")
    lg.roll()
    clean(cl, lg, NOW + 2 + DAY)
    t.model.cleaned(lg.active_segment.base_offset, NOW + 2 + DAY, DAY)
    batches = verify(lg, t.model)
    offsets = {b.base_offset: b for b in batches}
    assert abort2 not in offsets and commit1 in offsets


def test_nothing_at_or_past_the_last_stable_offset_is_touched(tmp_path):
    lg = make_log(tmp_path, segment_bytes=500)
    t = TxnLog(lg)
    for i in range(30):
        t.plain(b"k%d" % (i % 5))
    lso, _ = t.data(9, [b"open"])
    for i in range(40):
        t.plain(b"k%d" % (i % 5))
        if i % 10 == 9:
            lg.roll()
    assert lg.last_stable_offset == lso
    lso_seg = max(s.base_offset for s in lg.segments() if s.base_offset <= lso)
    snapshot = {n: read(os.path.join(lg.dir, n)) for n in os.listdir(lg.dir)
                if n.endswith(".log") and int(n[:20]) >= lso_seg}
    result = clean(make_cleaner(lg), lg, NOW)
    assert result.end_offset == lso_seg
    for n, data in snapshot.items():
        assert read(os.path.join(lg.dir, n)) == data
    t.model.cleaned(lso_seg, NOW, DAY)
    verify(lg, t.model)


def test_the_last_batch_of_an_active_producer_stays_empty(tmp_path):
    # the producer's sequence and epoch survive in an empty batch (Kafka's RETAIN_EMPTY)
    lg = make_log(tmp_path)
    model = Model()
    b1 = encode_batch([(1, b"x", b"1", ()), (2, b"y", b"1", ())], producer_id=7,
                      producer_epoch=3, base_sequence=0)
    b2 = encode_batch([(3, b"x", b"2", ()), (4, b"y", b"2", ()), (5, b"z", None, ())],
                      producer_id=7, producer_epoch=3, base_sequence=2)
    f1, _ = lg.append_encoded(bytearray(b1))
    f2, l2 = lg.append_encoded(bytearray(b2))
    for k in (b"x", b"y", b"z"):
        first, _ = lg.append([(9, k, b"final", ())])
        model.append(first, k, b"final")
    roll(lg, model)
    clean(make_cleaner(lg), lg, NOW, model)
    batches = verify(lg, model)
    by_base = {b.base_offset: b for b in batches}
    assert f1 not in by_base  # the producer's older batch went
    empty = by_base[f2]
    assert (empty.last_offset, empty.records) == (l2, [])
    assert (empty.producer_id, empty.producer_epoch, empty.base_sequence) == (7, 3, 2)
    assert empty.first_timestamp == -1 and empty.max_timestamp == 5
    # the producer state rebuilt from the cleaned log knows the last sequence
    lg.close()
    again = load_log(lg.dir, "t", 0, lg.config)
    entry = again.producer_state.last_entry(7)
    assert (entry.producer_epoch, entry.last_sequence, entry.last_offset) == (3, 4, l2)
    again.close()


# -- the offset map filling up --------------------------------------------------------------
def test_a_full_offset_map_stops_mid_segment_and_passes_make_progress(tmp_path):
    lg = make_log(tmp_path, segment_bytes=3000)
    model = Model()
    fill(lg, model, 600, keys=400, tombstones=0.05, seed=9)
    roll(lg, model)
    cl = make_cleaner(lg, dedupe=40 * 24)  # 40 slots, 36 keys per pass
    bases = {s.base_offset for s in lg.segments()}
    ends = []
    while True:
        result = clean(cl, lg, NOW, model)
        verify(lg, model)
        ends.append(result.end_offset)
        if result.end_offset >= lg.active_segment.base_offset:
            break
        assert len(ends) < 100
    assert all(a < b for a, b in zip(ends, ends[1:]))
    assert any(e not in bases for e in ends[:-1])  # it stopped inside a segment
    assert ends[0] < 40  # no more than ~36 keys mapped in the first pass


# -- grouping --------------------------------------------------------------------------------
class FakeIndex:
    def __init__(self, n):
        self.size_in_bytes = n


class FakeSegment:
    def __init__(self, base, size, index=0, time_index=0):
        self.base_offset, self.size = base, size
        self.index, self.time_index = FakeIndex(index), FakeIndex(time_index)

    def __repr__(self):
        return f"S{self.base_offset}"


def _groups(segs, *args):
    return [[s.base_offset for s in g] for g in group_segments_by_size(segs, *args)]


def test_grouping_by_log_and_index_size():
    # LogCleanerTest.testSegmentGrouping
    segs = [FakeSegment(i * 10, 400, 80, 120) for i in range(10)]
    assert _groups(segs, 1000, 10_000, 100) == [[0, 10], [20, 30], [40, 50], [60, 70],
                                                [80, 90]]
    assert _groups(segs, 10_000, 10_000, 100) == [[s.base_offset for s in segs]]
    assert _groups(segs, 300, 10_000, 100) == [[s.base_offset] for s in segs]
    assert _groups(segs, 10_000, 250, 100) == [[0, 10], [20, 30], [40, 50], [60, 70], [80, 90]]
    assert _groups(segs, 10_000, 370, 100) == [[0, 10, 20], [30, 40, 50], [60, 70, 80], [90]]


def test_grouping_keeps_a_groups_offsets_within_32_bits():
    # testSegmentGroupingWithSparseOffsets / testSegmentGroupingFollowingLoadOfZeroIndex
    big = 0x7FFFFFFF
    segs = [FakeSegment(0, 10), FakeSegment(big - 5, 10), FakeSegment(big + 1, 10),
            FakeSegment(3 * big, 10), FakeSegment(3 * big + 2, 0), FakeSegment(5 * big, 0),
            FakeSegment(5 * big + 1, 10)]
    # a segment joins while its last offset -- estimated by the next segment's base offset,
    # or the first uncleanable offset -- is within an int of the group's base; an empty one
    # always joins
    assert _groups(segs, 1 << 30, 1 << 20, 6 * big) == [
        [0, big - 5], [big + 1], [3 * big, 3 * big + 2, 5 * big], [5 * big + 1]]
    assert _groups(segs[:2], 1 << 30, 1 << 20, big + 1) == [[0, big - 5]]
    assert _groups(segs[:2], 1 << 30, 1 << 20, big + 2) == [[0], [big - 5]]


def _write_segment(pdir, base, batches):
    with open(os.path.join(pdir, f"{base:020d}.log"), "wb") as f:
        for b in batches:
            f.write(b)


def test_a_log_with_sparse_offsets_is_cleaned_without_overflow(tmp_path):
    big = 0x7FFFFFFF
    pdir = tmp_path / "logs" / "s-0"
    pdir.mkdir(parents=True)
    model = Model()
    bases = [0, big - 10, big + 5, 2 * big + 100, 3 * big]
    for n, base in enumerate(bases[:-1]):
        batches = []
        for j in range(3):
            o = base + j * 3
            batches.append(encode_batch([(n, b"k%d" % j, b"v%d-%d" % (n, j), ())],
                                        base_offset=o))
            model.append(o, b"k%d" % j, b"v%d-%d" % (n, j))
        _write_segment(str(pdir), base, batches)
    _write_segment(str(pdir), bases[-1], [encode_batch([(9, b"z", b"z", ())],
                                                       base_offset=bases[-1])])
    model.append(bases[-1], b"z", b"z")
    lg = load_log(str(pdir), "s", 0, LogConfig(cleanup_policy="compact",
                                               min_cleanable_dirty_ratio=0.0))
    clean(make_cleaner(lg), lg, NOW, model)
    batches = verify(lg, model)
    for seg in lg.segments():
        for b in seg.batches():
            assert b.last_offset - seg.base_offset <= big
    assert [r[0] for b in batches for r in b.records] == sorted(model.expected())


# -- records without a key -------------------------------------------------------------------
def test_a_compacted_topic_refuses_records_without_a_key(tmp_path):
    lg = make_log(tmp_path)
    lg.append([(0, b"k", b"v", ())])
    end = lg.log_end_offset
    for bad in ([(0, None, b"v", ())], [(0, b"k", b"v", ()), (0, None, b"w", ())]):
        with pytest.raises(InvalidRecordError, match="Compacted topic cannot accept message "
                                                     "without key in topic partition t-0."):
            lg.append(bad)
        with pytest.raises(InvalidRecordError):
            lg.append(bad, compression=codecs.GZIP)
    with pytest.raises(InvalidRecordError):
        lg.append([(now_ms(), None, b"a line", ())])
    assert lg.log_end_offset == end


def test_the_cleaner_drops_records_without_a_key(tmp_path):
    lg = make_log(tmp_path, cleanup_policy="delete")  # written before the topic was compacted
    model = Model()
    for i in range(50):
        key = None if i % 3 == 0 else b"k%d" % (i % 7)
        first, _ = lg.append([(i, key, b"v%d" % i, ())])
        model.append(first, key, b"v%d" % i)
    roll(lg, model)
    lg.config = LogConfig(**{**lg.config.__dict__, "cleanup_policy": "compact"})
    result = clean(make_cleaner(lg), lg, NOW, model)
    assert result.invalid_records == 17
    verify(lg, model)


# -- damage --------------------------------------------------------------------------------
@pytest.mark.parametrize("damage", ["crc", "records", "offsets_back", "into_next_segment"])
def test_a_corrupt_batch_in_a_dirty_segment_fails_the_pass_and_loses_nothing(tmp_path, damage):
    """A damaged batch -- a bad CRC, garbled records under a good one, or a base offset
    (outside the CRC) forged so that offsets go back or reach into the next segment -- fails
    the pass where every reader stops (docs/design.md §5.1), and nothing is swapped in."""
    lg = make_log(tmp_path)
    model = Model()
    fill(lg, model, 200, keys=20)
    roll(lg, model)
    seg = lg.segments()[1]
    victim = list(seg.batches())[2]
    path = seg.log_path
    with open(path, "r+b") as f:
        f.seek(victim.position)
        raw = bytearray(f.read(victim.size))
        if damage == "crc":
            raw[-2] ^= 0xFF
        elif damage == "records":  # the records garbled under a recomputed CRC
            raw[61] = 0x7F
            struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
        elif damage == "offsets_back":  # the base offset is not under the CRC
            struct.pack_into(">q", raw, 0, seg.base_offset)
        else:
            struct.pack_into(">q", raw, 0, lg.segments()[2].base_offset)
        f.seek(victim.position)
        f.write(raw)
    before = tree_state(lg.dir)
    cl = make_cleaner(lg)
    result = cl.clean_log(lg, now=NOW)
    assert result.error is not None and "CorruptRecordError" in result.error
    assert path in result.error and f"position {victim.position}" in result.error
    reason = {"offsets_back": "offsets go back", "into_next_segment": "reach into the next"}
    assert reason.get(damage, "") in result.error
    if damage != "records":  # (garbled records are met when a reader decodes them)
        with pytest.raises(CorruptRecordError) as readers:  # where every reader stops
            for _ in lg.batches():
                pass
        assert (readers.value.path, readers.value.position) == (path, victim.position)
    assert tree_state(lg.dir) == before  # nothing swapped, no .cleaned file left
    info = cl.manager.uncleanable(("t", 0))
    assert info is not None and info.error == result.error
    assert cl.clean_filthiest(now=NOW) is None  # skipped while uncleanable
    assert cl.manager.last_result(("t", 0)) == result


def test_failure_of_one_partition_does_not_stop_the_others(tmp_path):
    good = make_log(tmp_path, "good-0")
    bad = make_log(tmp_path, "bad-0")
    model = Model()
    fill(good, model, 100, keys=10)
    roll(good, model)
    m2 = Model()
    fill(bad, m2, 300, keys=10)
    roll(bad, m2)
    seg = bad.segments()[0]
    with open(seg.log_path, "r+b") as f:
        f.seek(seg.size - 3)
        f.write(b"\xff\xff\xff")
    cl = make_cleaner(good, bad)
    results = [cl.clean_filthiest(now=NOW) for _ in range(3)]
    assert [r is None for r in results] == [False, False, True]
    assert {(r.topic, r.ok) for r in results if r} == {("good", True), ("bad", False)}
    model.cleaned(good.active_segment.base_offset, NOW, DAY)
    verify(good, model)


# -- legacy (v0/v1) data ----------------------------------------------------------------------
def _legacy_entries(magic, records, compression=0, timestamp_type=0):
    out = b""
    if compression:
        b = LegacyRecordBatchBuilder(magic=magic, compression_type=compression,
                                     batch_size=1 << 20)
        for i, (o, ts, k, v) in enumerate(records):
            b.append(i if magic == 1 else o, ts, k, v)
        data = bytearray(b.build())
        struct.pack_into(">q", data, 0, records[-1][0])  # the wrapper's offset: its last
        return bytes(data)
    for o, ts, k, v in records:
        b = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
        b.append(o, ts, k, v)
        out += bytes(b.build())
    return out


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_segments_are_cleaned(tmp_path, magic):
    pdir = tmp_path / "logs" / "old-0"
    pdir.mkdir(parents=True)
    model = Model()
    recs = []
    rnd = random.Random(magic)
    for o in range(60):
        k = b"k%d" % rnd.randrange(8)
        v = None if rnd.random() < 0.1 else b"v%d" % o
        recs.append((o, 1000 + o if magic else -1, k, v))
        model.append(o, k, v)
    data = _legacy_entries(magic, recs[:20]) + \
        _legacy_entries(magic, recs[20:45], compression=1) + _legacy_entries(magic, recs[45:])
    with open(pdir / f"{0:020d}.log", "wb") as f:
        f.write(data)
    active = encode_batch([(5, b"new", b"n", ())], base_offset=60)
    with open(pdir / f"{60:020d}.log", "wb") as f:
        f.write(active)
    model.append(60, b"new", b"n")
    lg = load_log(str(pdir), "old", 0, LogConfig(cleanup_policy="compact",
                                                 min_cleanable_dirty_ratio=0.0))
    # a fresh segment: its legacy tombstones are within the legacy horizon and stay
    clean(make_cleaner(lg), lg, NOW)
    model.cleaned(60, NOW, DAY)
    batches = verify(lg, model)
    assert all(b.magic == magic for b in batches if b.base_offset < 60)
    got = {r[0]: r[1] for b in batches for r in b.records}
    for o, ts, _k, _v in recs:
        if o in got:
            assert got[o] == (ts if magic else None)


# -- many passes against the model, with concurrent appends -----------------------------------
def test_random_workload_with_appends_during_the_passes(tmp_path):
    lg = make_log(tmp_path, segment_bytes=2000, delete_retention_ms=1000)
    model = Model()
    cl = make_cleaner(lg, dedupe=300 * 24)
    lock = threading.Lock()
    stop = threading.Event()
    rnd = random.Random(21)

    def writer():
        i = 0
        while not stop.is_set() and i < 3000:
            k = b"k%d" % rnd.randrange(120)
            v = None if rnd.random() < 0.08 else b"v%d" % i
            with lock:
                first, _ = lg.append([(i, k, v, ())])
                model.append(first, k, v)
            i += 1

    now = NOW
    for _ in range(12):
        th = threading.Thread(target=writer)
        th.start()
        result = cl.clean_log(lg, now=now)
        th.join()
        assert result.ok, result
        with lock:
            model.cleaned(result.end_offset, now, 1000)
        verify(lg, model)
        now += 600
    stop.set()


# -- uncleanable and retries ------------------------------------------------------------------
def test_uncleanable_partition_is_retried_after_backoff_and_after_a_config_change(
        tmp_path, monkeypatch):
    lg = make_log(tmp_path)
    model = Model()
    fill(lg, model, 100, keys=10)
    roll(lg, model)
    clock = [NOW]
    cl = LogCleaner(CleanerConfig(dedupe_buffer_size=1 << 20, backoff_ms=1000),
                    [os.path.dirname(lg.dir)], {("t", 0): lg}, clock=lambda: clock[0])
    real = Cleaner.clean
    failures = [3]

    def flaky(self, ltc, now=None, progress=None):
        if failures[0]:
            failures[0] -= 1
            raise OSError(28, "No space left on device")
        return real(self, ltc, now, progress)

    monkeypatch.setattr(Cleaner, "clean", flaky)
    r = cl.clean_filthiest()
    assert r.error == "OSError: [Errno 28] No space left on device"
    assert cl.clean_filthiest() is None
    clock[0] += 999
    assert cl.clean_filthiest() is None
    clock[0] += 1  # backoff.ms passed: retried, fails again; the backoff doubles
    assert cl.clean_filthiest().error
    info = cl.manager.uncleanable(("t", 0))
    assert (info.failures, info.retry_at_ms - clock[0]) == (2, 2000)
    clock[0] += 1999
    assert cl.clean_filthiest() is None
    # a config change makes it eligible at once
    lg.config = LogConfig(**{**lg.config.__dict__, "delete_retention_ms": 5})
    assert cl.clean_filthiest().error
    assert cl.manager.uncleanable(("t", 0)).failures == 1
    lg.config = LogConfig(**{**lg.config.__dict__, "delete_retention_ms": 6})
    r = cl.clean_filthiest()
    assert r.ok and cl.manager.uncleanable(("t", 0)) is None
    model.cleaned(r.end_offset, NOW, 6)
    verify(lg, model)


# -- progress, throttling, read-only, config ---------------------------------------------------
def test_progress_reaches_the_total(tmp_path):
    lg = make_log(tmp_path)
    model = Model()
    fill(lg, model, 300)
    roll(lg, model)
    seen = []
    make_cleaner(lg).clean_log(lg, now=NOW, progress=lambda d, t: seen.append((d, t)))
    assert seen and all(d <= t for d, t in seen)
    assert seen[-1][0] == seen[-1][1] and [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_throttler_sleeps_to_the_desired_rate():
    t = [0]
    slept = []

    def sleep(s):
        slept.append(s)
        t[0] += int(s * 1e9)

    th = Throttler(1000, 300, clock=lambda: t[0], sleep=sleep)
    for _ in range(10):
        t[0] += 100_000_000  # 100 ms
        th.maybe_throttle(500)  # 5000 bytes/s observed
    # once more than 300 ms passed, 2000 bytes in 400 ms: 1.6 s of sleep bring them to 1000/s
    assert slept == [1.6, 1.6] and th.slept_ms == 3200
    fast = Throttler(1e308, 300, clock=lambda: t[0], sleep=sleep)
    for _ in range(10):
        t[0] += 100_000_000
        fast.maybe_throttle(1 << 30)
    assert slept == [1.6, 1.6]


def test_read_only_and_delete_topics_are_never_cleaned(tmp_path):
    lg = make_log(tmp_path)
    model = Model()
    fill(lg, model, 100, keys=5)
    roll(lg, model)
    lg.close()
    ro = load_log(lg.dir, "t", 0, lg.config, writable=False)
    cl = make_cleaner(ro)
    assert cl.clean_filthiest(now=NOW) is None
    with pytest.raises(Exception, match="read-only"):
        cl.clean_log(ro, now=NOW)
    ro.close()
    rw = load_log(lg.dir, "t", 0, LogConfig(cleanup_policy="delete"))
    cl = make_cleaner(rw)
    assert cl.clean_filthiest(now=NOW) is None
    with pytest.raises(ValueError, match="cleanup.policy=delete"):
        cl.clean_log(rw, now=NOW)
    rw.close()


def test_cleaner_config_from_server_properties():
    b = BrokerConfig.from_properties({"log.cleaner.threads": "2",
                                      "log.cleaner.dedupe.buffer.size": str(64 << 20),
                                      "log.cleaner.io.buffer.size": "1048576",
                                      "log.cleaner.io.buffer.load.factor": "0.75",
                                      "log.cleaner.io.max.bytes.per.second": "5e6",
                                      "log.cleaner.backoff.ms": "100",
                                      "message.max.bytes": "2000000"})
    c = CleanerConfig.from_broker(b)
    assert (c.num_threads, c.map_memory_per_thread, c.io_buffer_per_thread) == \
        (2, 32 << 20, 262144)
    assert (c.dedupe_buffer_load_factor, c.max_io_bytes_per_second, c.backoff_ms,
            c.max_message_size) == (0.75, 5e6, 100, 2000000)
    d = CleanerConfig.from_broker(BrokerConfig.from_properties({}))
    assert (d.num_threads, d.dedupe_buffer_size, d.io_buffer_size, d.backoff_ms,
            d.dedupe_buffer_load_factor, d.enable_cleaner) == \
        (1, 128 << 20, 512 << 10, 15000, 0.9, True)
    assert d.max_io_bytes_per_second == 1.7976931348623157e308


# -- the record-level twins -------------------------------------------------------------------
def _random_buffer(rnd, n_batches=6):
    buf = b""
    base = rnd.randint(0, 20)
    for _ in range(n_batches):
        n = rnd.randint(1, 8)
        recs = [(rnd.randint(0, 5000), None if rnd.random() < 0.1 else
                 b"k%d" % rnd.randrange(12),
                 None if rnd.random() < 0.25 else rnd.randbytes(rnd.randint(0, 30)),
                 [("h", b"v")] if rnd.random() < 0.2 else ()) for _ in range(n)]
        kind = rnd.random()
        if kind < 0.15:
            data = bytearray(encode_batch(recs, base_offset=base, timestamp_type=LOG_APPEND_TIME,
                                          log_append_time=4000))
        elif kind < 0.3:
            data = bytearray(encode_batch(recs, base_offset=base, delete_horizon_ms=rnd.choice(
                [2000, 9000])))
        elif kind < 0.4:
            data = bytearray(encode_batch(recs, base_offset=base, compression=codecs.GZIP))
        elif kind < 0.5:
            data = bytearray(encode_batch(recs, base_offset=base, producer_id=5,
                                          is_transactional=True))
        else:
            data = bytearray(encode_batch(recs, base_offset=base,
                                          producer_id=rnd.choice([-1, 4]), producer_epoch=1,
                                          base_sequence=0))
        if rnd.random() < 0.1:  # a gap in the offsets
            struct.pack_into(">i", data, 23, n - 1 + rnd.randint(1, 3))
            struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
        buf += bytes(data)
        base += n + 5
    return buf, base


def test_filter_twins_agree_on_random_batches_and_damage():
    if compaction.C is None:
        pytest.skip("C extension not built")
    rnd = random.Random(17)
    for trial in range(400):
        buf, end_offset = _random_buffer(rnd)
        if trial % 4 == 0:
            b = bytearray(buf)
            b[rnd.randrange(len(b))] ^= 1 << rnd.randrange(8)
            buf = bytes(b)
        slots = rnd.randint(2, 30)
        m = bytearray(slots * 24)
        compaction.C.map_batches(buf, 0, len(buf), m, slots, 0, slots - 1, 0)
        latest = rnd.randint(-1, end_offset)
        prot = array.array("q", sorted(rnd.sample(range(end_offset + 5), 4))).tobytes()
        upper = rnd.randint(0, end_offset + 5)
        end = len(buf) if trial % 7 else rnd.randint(0, len(buf))
        order = () if trial % 3 == 0 else (rnd.choice([-1, 0, rnd.randint(0, end_offset)]),
                                           rnd.choice([-1, rnd.randint(0, end_offset + 5)]),
                                           rnd.choice([-1, rnd.randint(0, end_offset + 5)]))
        args = (buf, 0, end, m, slots, latest, 5000, 100, prot, upper, *order)
        assert compaction.PYTHON.filter_batches(*args) == compaction.C.filter_batches(*args)
        pos = 0
        while pos + 61 <= len(buf):
            size = struct.unpack_from(">i", buf, pos + 8)[0] + 12
            if size < 61 or pos + size > len(buf):
                break
            payload = buf[pos + 61:pos + size]
            count = struct.unpack_from(">i", buf, pos + 57)[0]
            fixed = rnd.choice([None, 4000])
            for mode in (0, 1, 2):
                a = (payload, count, pos, 3000, fixed, m, slots, latest, rnd.random() < 0.5,
                     mode, rnd.choice([-1, 8000]), 9000, rnd.random() < 0.5)
                outs = []
                for impl in (compaction.PYTHON, compaction.C):
                    try:
                        outs.append(impl.filter_records(*a))
                    except (CorruptRecordError, ValueError) as exc:
                        outs.append((type(exc), str(exc)))
                assert outs[0] == outs[1], (trial, mode)
            pos += size
        st = (rnd.randint(0, 500), -1, 0, -1)
        iv = rnd.randint(0, 300)
        outs = []
        for impl in (compaction.PYTHON, compaction.C):
            try:
                outs.append(impl.index_entries(buf[:end], 7, iv, st))
            except CorruptRecordError as exc:
                outs.append((str(exc), exc.position))
        assert outs[0] == outs[1]


def test_rebuilt_batches_decode_the_same_with_kafka_python(tmp_path):
    # what filter_batches writes is read back by an independent decoder, record for record
    rnd = random.Random(2)
    buf = b"".join(encode_batch([(rnd.randint(0, 9000), b"k%d" % rnd.randrange(10),
                                  rnd.choice([None, b"v%d" % i]), [("h", b"x")] * (i % 2))
                                 for _ in range(rnd.randint(1, 6))], base_offset=i * 10)
                   for i in range(40))
    m = bytearray(30 * 24)
    compaction.map_batches(buf, 0, len(buf), m, 30, 0, 29, 0)
    pos, out, status, st, _expected = compaction.filter_batches(buf, 0, len(buf), m, 30,
                                                                10**6, 5000, 100, b"", -1)
    assert (pos, status) == (len(buf), compaction.STATUS_END)
    assert 0 < st[1] < st[0] and len(out) == st[3]
    pdir = tmp_path / "x"
    pdir.mkdir()
    (pdir / f"{0:020d}.log").write_bytes(out)
    theirs = read_partition(str(pdir))
    p = 0
    for b in theirs:
        ours = RecordBatch.from_buffer(out, p)
        assert [(r.offset, r.timestamp, r.key, r.value) for r in ours.records()] == b.records
        assert ours.base_offset == b.base_offset and ours.last_offset == b.last_offset
        p += ours.size
    assert p == len(out)


def test_a_log_cleaned_by_the_pure_python_twins_is_identical(tmp_path, monkeypatch):
    if compaction.C is None:
        pytest.skip("C extension not built")
    results = []
    for impl in (compaction.C, compaction.PYTHON):
        for name in ("map_batches", "filter_batches", "filter_records", "index_entries",
                     "map_records", "map_get", "map_put", "map_clear", "key_hash"):
            monkeypatch.setattr(compaction, name, getattr(impl, name))
        d = tmp_path / impl.name
        lg = make_log(d)
        model = Model()
        fill(lg, model, 300, keys=30, per_batch=3)
        roll(lg, model)
        clean(make_cleaner(lg), lg, NOW, model)
        verify(lg, model)
        results.append({n: read(os.path.join(lg.dir, n))
                        for n in sorted(os.listdir(lg.dir))
                        if n.endswith((".log", ".index", ".timeindex"))})
        lg.close()
    assert results[0] == results[1]


def test_abort_during_a_pass_swaps_nothing(tmp_path, monkeypatch):
    lg = make_log(tmp_path)
    model = Model()
    fill(lg, model, 300, keys=30)
    roll(lg, model)
    cl = make_cleaner(lg)
    before = tree_state(lg.dir)
    real = cleaner_mod.SkimpyOffsetMap.put_batches

    def put_batches(self, *args):
        cl.manager._states[("t", 0)] = "aborted"  # as abort_and_pause_cleaning does
        return real(self, *args)

    monkeypatch.setattr(cleaner_mod.SkimpyOffsetMap, "put_batches", put_batches)
    result = cl.clean_log(lg, now=NOW)
    assert result.aborted and not result.error
    assert cl.manager.is_paused(("t", 0))
    assert tree_state(lg.dir) == before
    monkeypatch.setattr(cleaner_mod.SkimpyOffsetMap, "put_batches", real)
    with pytest.raises(Exception, match="paused"):
        cl.clean_log(lg, now=NOW, timeout=0.1)
    cl.manager.resume_cleaning([("t", 0)])
    assert cl.clean_log(lg, now=NOW).ok


def test_deleted_files_are_removed_after_the_delay(tmp_path):
    lg = make_log(tmp_path, file_delete_delay_ms=1000)
    model = Model()
    fill(lg, model, 200)
    roll(lg, model)
    clean(make_cleaner(lg), lg, NOW, model)
    assert any(n.endswith(".deleted") for n in os.listdir(lg.dir))
    lg.remove_deleted_segments(force=True)
    assert not any(n.endswith((".deleted", ".cleaned", ".swap")) for n in os.listdir(lg.dir))
    verify(lg, model)
    shutil.rmtree(tmp_path / "logs")
