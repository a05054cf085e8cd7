"""Transactions in the log engine: producer state, last stable offset, ``.txnindex`` files,
producer snapshots on roll/close/retention, recovery, read-only loads, following a writer,
and ``kafkafs check`` (Kafka ``UnifiedLog``/``LogSegment``/``LogLoader``)."""

from __future__ import annotations

import json
import os
import random
import struct

import pytest
from conftest import tree_state

from kafkafs.cli.main import main
from kafkafs.log.config import BrokerConfig, LogConfig
from kafkafs.log.isolation import (
    DEFAULT_ISOLATION_LEVEL,
    ISOLATION_LEVELS,
    AbortedFilter,
)
from kafkafs.log.loader import load_log, plan_load
from kafkafs.log.log import now_ms
from kafkafs.log.manager import CLEAN_SHUTDOWN_FILE, LogManager
from kafkafs.log.producer_state import (
    InvalidTxnStateError,
    ProducerStateEntry,
    list_snapshot_files,
    read_snapshot,
)
from kafkafs.log.txnindex import AbortedTxn
from kafkafs.record.batch import encode_batch
from kafkafs.record.control import ABORT, COMMIT, encode_end_txn_marker_batch
from kafkafs.record.errors import CorruptRecordError

SEGMENT_BYTES = 700
INTERVAL = 100
CFG = {"segment_bytes": SEGMENT_BYTES, "index_interval_bytes": INTERVAL}


# -- building transactional logs -------------------------------------------------------------
def txn_batch(pid, n=2, seq=0, epoch=0, ts=1_000_000, transactional=True, tag=b""):
    recs = [(ts + i, b"k%d" % pid, b"p%d-%s-%d" % (pid, tag, i), ()) for i in range(n)]
    return bytearray(encode_batch(recs, producer_id=pid, producer_epoch=epoch,
                                  base_sequence=seq, is_transactional=transactional))


def marker(kind, pid, epoch=0, ts=2_000_000, coordinator_epoch=7):
    return bytearray(encode_end_txn_marker_batch(kind, base_offset=0, timestamp=ts,
                                                 producer_id=pid, producer_epoch=epoch,
                                                 coordinator_epoch=coordinator_epoch))


class Model:
    """Kafka's rules written out plainly: ongoing transactions, LSO, aborted transactions
    with the LSO at their marker, and what a read_committed reader sees."""

    def __init__(self):
        self.ongoing: dict[int, int] = {}  # pid -> first offset
        self.aborted: list[AbortedTxn] = []
        self.batches: list[tuple] = []  # (pid, base, last, kind, values)
        self.leo = 0

    def data(self, pid, first, last, values, transactional=True):
        if transactional and pid not in self.ongoing:
            self.ongoing[pid] = first
        self.batches.append((pid, first, last, "txn" if transactional else "plain", values))
        self.leo = last + 1

    def plain(self, first, last, values):
        self.batches.append((-1, first, last, "plain", values))
        self.leo = last + 1

    def end(self, kind, pid, offset):
        first = self.ongoing.pop(pid, None)
        if first is not None and kind == ABORT:
            others = list(self.ongoing.values())
            lso = min(others) if others else offset + 1
            self.aborted.append(AbortedTxn(pid, first, offset, lso))
        self.batches.append((pid, offset, offset, "marker", []))
        self.leo = offset + 1

    @property
    def lso(self):
        return min(self.ongoing.values()) if self.ongoing else self.leo

    def committed_values(self):
        out = []
        for pid, base, _last, kind, values in self.batches:
            if base >= self.lso or kind == "marker":
                continue
            if kind == "txn" and any(a.producer_id == pid and a.first_offset <= base
                                     <= a.last_offset for a in self.aborted):
                continue
            out.extend(values)
        return out


def write_workload(lg, model, seed=1, steps=120, producers=(11, 22, 33)):
    """Committed and aborted transactions interleaved across producers, plain appends in
    between; the segments roll many times (SEGMENT_BYTES)."""
    rnd = random.Random(seed)
    seqs = {p: 0 for p in producers}
    for step in range(steps):
        pid = rnd.choice(producers)
        r = rnd.random()
        if r < 0.55:
            n = rnd.randint(1, 3)
            tag = b"%d" % step
            first, last = lg.append_encoded(txn_batch(pid, n, seqs[pid], tag=tag))
            seqs[pid] += n
            model.data(pid, first, last, [b"p%d-%s-%d" % (pid, tag, i) for i in range(n)])
        elif r < 0.85:
            kind = ABORT if rnd.random() < 0.5 else COMMIT
            first, last = lg.append_encoded(marker(kind, pid))
            assert first == last
            model.end(kind, pid, first)
        else:
            value = b"plain-%d" % step
            first, last = lg.append([(1_500_000 + step, None, value, ())])
            model.plain(first, last, [value])
        assert lg.last_stable_offset == model.lso, step
    return model


def make_log(tmp_path, name="t-0", **cfg):
    part = tmp_path / name
    part.mkdir(exist_ok=True)
    return load_log(str(part), "t", 0, LogConfig(**{**CFG, **cfg}), had_clean_shutdown=True)


def committed_values(lg):
    """A read_committed reader: up to the LSO, aborted and control batches skipped."""
    lso = lg.last_stable_offset
    keep = lg.committed_filter(lg.log_start_offset, lso)
    out = []
    for b in lg.batches():
        if b.base_offset >= lso:
            break
        if b.is_control or keep.is_aborted(b):
            continue
        out.extend(r.value for r in b.records())
    return out


def txnindex_files(d):
    return {n: open(os.path.join(d, n), "rb").read()
            for n in sorted(os.listdir(d)) if n.endswith(".txnindex")}


def entry_bytes(txn: AbortedTxn) -> bytes:
    """Kafka's AbortedTxn laid out by hand: version i16 (0), producerId, firstOffset,
    lastOffset, lastStableOffset as i64, big-endian."""
    return struct.pack(">hqqqq", 0, txn.producer_id, txn.first_offset, txn.last_offset,
                       txn.last_stable_offset)


def expected_txnindex_files(lg, model):
    """The .txnindex bytes per segment: each aborted txn in the segment of its marker."""
    bases = [s.base_offset for s in lg.segments()]
    out: dict[str, bytes] = {}
    for txn in model.aborted:
        base = max(b for b in bases if b <= txn.last_offset)
        name = f"{base:020d}.txnindex"
        out[name] = out.get(name, b"") + entry_bytes(txn)
    return out


def state(lg):
    pm = lg.producer_state
    return (dict(pm.producers), pm.ongoing_txns(), lg.last_stable_offset, lg.log_end_offset)




# -- appends, LSO, aborted transactions ----------------------------------------------------------
def test_isolation_constants():
    assert ISOLATION_LEVELS == ("read_uncommitted", "read_committed")
    assert DEFAULT_ISOLATION_LEVEL == "read_committed"


def test_interleaved_transactions_across_producers_and_rolls(tmp_path):
    lg = make_log(tmp_path)
    model = write_workload(lg, Model())
    assert len(lg.segments()) > 5
    assert len(model.aborted) >= 5
    assert lg.aborted_txns(0, lg.log_end_offset) == model.aborted
    assert committed_values(lg) == model.committed_values()
    # the .txnindex files hold Kafka's bytes, in the segment of each ABORT marker
    assert txnindex_files(lg.dir) == expected_txnindex_files(lg, model)
    # every producer's state as Kafka keeps it
    for pid in (11, 22, 33):
        entry = lg.producer_state.last_entry(pid)
        assert entry.current_txn_first_offset == model.ongoing.get(pid)
        assert entry.coordinator_epoch in (-1, 7)
    lg.close()


def test_aborted_txns_of_any_range_is_every_overlapping_entry(tmp_path):
    lg = make_log(tmp_path)
    model = write_workload(lg, Model(), seed=7, steps=150)
    leo = lg.log_end_offset
    rnd = random.Random(3)
    for _ in range(300):
        a = rnd.randrange(0, leo + 1)
        b = rnd.randrange(0, leo + 2)
        want = [t for t in model.aborted if t.last_offset >= a and t.first_offset < b] \
            if a < b else []
        assert lg.aborted_txns(a, b) == want, (a, b)
    lg.close()


def test_ongoing_transaction_holds_the_lso(tmp_path):
    lg = make_log(tmp_path)
    assert lg.last_stable_offset == 0 and lg.first_unstable_offset is None
    lg.append([(1, None, b"a", ())])
    assert lg.last_stable_offset == 1
    first, _ = lg.append_encoded(txn_batch(5))
    lg.append([(1, None, b"b", ())])
    assert lg.first_unstable_offset == first == 1
    assert lg.last_stable_offset == 1 and lg.log_end_offset == 4
    second, _ = lg.append_encoded(txn_batch(6))
    lg.append_encoded(marker(COMMIT, 5))
    assert lg.last_stable_offset == second  # producer 6 still open
    abort_at, _ = lg.append_encoded(marker(ABORT, 6))
    assert lg.last_stable_offset == lg.log_end_offset
    assert lg.aborted_txns(0, 100) == [AbortedTxn(6, second, abort_at, abort_at + 1)]
    lg.close()


def test_abort_records_the_lso_of_other_producers(tmp_path):
    lg = make_log(tmp_path)
    a, _ = lg.append_encoded(txn_batch(1))
    b, _ = lg.append_encoded(txn_batch(2))
    end, _ = lg.append_encoded(marker(ABORT, 2))
    # Kafka's lastStableOffset(completedTxn): the earliest *other* ongoing transaction
    assert lg.aborted_txns(0, 10) == [AbortedTxn(2, b, end, a)]
    lg.close()


def test_append_refuses_what_the_producer_state_refuses(tmp_path):
    lg = make_log(tmp_path)
    lg.append_encoded(txn_batch(3))
    size = lg.active_segment.size
    with pytest.raises(InvalidTxnStateError):
        lg.append_encoded(txn_batch(3, transactional=False))
    bad = bytearray(encode_batch([(1, b"\0\0\0\x02", b"", ())], producer_id=3, producer_epoch=0,
                                 is_transactional=True, is_control=True))  # LEADER_CHANGE
    with pytest.raises(CorruptRecordError):
        lg.append_encoded(bad)
    assert lg.active_segment.size == size and lg.log_end_offset == 2
    # a marker with no transaction ongoing is fine and aborts nothing
    lg.append_encoded(marker(ABORT, 99))
    assert lg.aborted_txns(0, 10) == [] and lg.last_stable_offset == 0
    lg.close()


def test_plain_appends_carry_no_producer_state(tmp_path):
    lg = make_log(tmp_path)
    lg.append([(now_ms(), None, b"x", ()), (now_ms(), None, b"y", ())])
    lg.append([(1, None, b"z", ())])
    assert lg.producer_state.is_empty()
    assert lg.producer_state.map_end_offset == 3 == lg.last_stable_offset
    lg.close()
    assert not [n for n in os.listdir(lg.dir) if n.endswith(".txnindex")]


# -- the filter ---------------------------------------------------------------------------------
class B:
    def __init__(self, pid, base, transactional=True, control=False):
        self.producer_id, self.base_offset = pid, base
        self.is_transactional, self.is_control = transactional, control


def test_aborted_filter():
    f = AbortedFilter([AbortedTxn(1, 10, 20, 11), AbortedTxn(2, 5, 30, 5),
                       AbortedTxn(1, 40, 50, 41)])
    assert len(f) == 3 and f
    assert [f.is_aborted(B(1, o)) for o in (9, 10, 15, 20, 21, 39, 40, 50, 51)] == \
        [False, True, True, True, False, False, True, True, False]
    assert f.is_aborted(B(2, 5)) and not f.is_aborted(B(2, 31))
    assert not f.is_aborted(B(3, 15))
    assert not f.is_aborted(B(1, 15, transactional=False))
    assert not f.is_aborted(B(1, 20, control=True))
    assert not AbortedFilter([]) and not AbortedFilter().is_aborted(B(1, 1))
    # overlapping ranges of one producer (damaged data) still answer by containment
    g = AbortedFilter([AbortedTxn(1, 0, 100, 1), AbortedTxn(1, 10, 20, 11)])
    assert g.is_aborted(B(1, 50)) and g.is_aborted(B(1, 15))


# -- snapshots ----------------------------------------------------------------------------------
def test_snapshots_on_roll_and_close_reload_identically(tmp_path):
    lg = make_log(tmp_path)
    model = write_workload(lg, Model(), seed=5)
    bases = [s.base_offset for s in lg.segments()]
    snaps = [o for o, _p in list_snapshot_files(lg.dir)]
    assert set(bases[1:]) <= set(snaps)  # one at each rolled segment's base offset
    before = state(lg)
    lg.close()
    snaps = dict(list_snapshot_files(lg.dir))
    assert max(snaps) == model.leo  # and one at the log end offset on close
    entries = read_snapshot(snaps[model.leo])
    assert {e.producer_id: e for e in entries} == before[0]
    lg2 = load_log(lg.dir, "t", 0, LogConfig(**CFG), had_clean_shutdown=True)
    assert state(lg2) == before
    assert lg2.aborted_txns(0, model.leo) == model.aborted
    assert committed_values(lg2) == model.committed_values()
    # appends go on from the reloaded state
    pid = next(iter(model.ongoing), None)
    if pid is not None:
        at, _ = lg2.append_encoded(marker(ABORT, pid))
        model.end(ABORT, pid, at)
        assert lg2.aborted_txns(0, at + 1) == model.aborted
        assert lg2.last_stable_offset == model.lso
    lg2.close()


def test_roll_snapshots_are_fsynced_by_the_next_flush(tmp_path, monkeypatch):
    from kafkafs.log import log as log_module

    synced = []
    real = log_module.fsync_snapshot
    monkeypatch.setattr(log_module, "fsync_snapshot",
                        lambda p, **kw: synced.append(p) or real(p, **kw))
    lg = make_log(tmp_path)
    lg.append_encoded(txn_batch(1))
    for i in range(30):
        lg.append([(i, None, b"x" * 40, ())])
    rolled = [s.base_offset for s in lg.segments()][1:]
    assert rolled and synced == []
    lg.flush()
    assert synced == [os.path.join(lg.dir, f"{b:020d}.snapshot") for b in rolled]
    lg.flush()
    assert len(synced) == len(rolled)
    lg.close()


def test_snapshot_of_a_roll_holds_the_state_at_its_base(tmp_path):
    lg = make_log(tmp_path)
    write_workload(lg, Model(), seed=9, steps=60)
    base = lg.active_segment.base_offset
    entries = read_snapshot(dict(list_snapshot_files(lg.dir))[base])
    # replay the log up to the base into a fresh manager: the same entries
    from kafkafs.log.producer_state import ProducerStateManager
    (tmp_path / "empty").mkdir()  # a partition dir is opened (kafkafs.log.safeio)
    pm = ProducerStateManager(str(tmp_path / "empty"), writable=False)
    for b in lg.batches(validate=False):
        if b.base_offset >= base:
            break
        pm.update(b)
    assert sorted(entries, key=lambda e: e.producer_id) == \
        sorted(pm.producers.values(), key=lambda e: e.producer_id)
    lg.close()


def test_clean_load_without_snapshots_assumes_empty_state(tmp_path):
    """Kafka's upgrade shortcut: no snapshot after a clean shutdown means no producers; empty
    snapshots are written at the last two segments' bases and the log end offset."""
    lg = make_log(tmp_path)
    write_workload(lg, Model(), seed=2, steps=40)
    lg.close()
    for _o, p in list_snapshot_files(lg.dir):
        os.unlink(p)
    lg2 = load_log(lg.dir, "t", 0, LogConfig(**CFG), had_clean_shutdown=True)
    bases = [s.base_offset for s in lg2.segments()]
    assert lg2.producer_state.is_empty()
    assert lg2.last_stable_offset == lg2.log_end_offset
    assert [o for o, _p in list_snapshot_files(lg.dir)] == \
        sorted({bases[-2], bases[-1], lg2.log_end_offset} - {0})
    assert all(read_snapshot(p) == [] for _o, p in list_snapshot_files(lg.dir))
    lg2.close()


def test_unclean_load_without_snapshots_replays_the_log(tmp_path):
    lg = make_log(tmp_path)
    model = write_workload(lg, Model(), seed=4, steps=80)
    before = state(lg)
    lg.close()
    for _o, p in list_snapshot_files(lg.dir):
        os.unlink(p)
    lg2 = load_log(lg.dir, "t", 0, LogConfig(**CFG), had_clean_shutdown=False,
                   recovery_point=lg.log_end_offset)
    assert state(lg2) == before
    assert lg2.last_stable_offset == model.lso
    lg2.close()


def test_corrupt_latest_snapshot_is_deleted_and_state_rebuilt(tmp_path):
    lg = make_log(tmp_path)
    write_workload(lg, Model(), seed=8, steps=80)
    before = state(lg)
    lg.close()
    leo = lg.log_end_offset
    path = dict(list_snapshot_files(lg.dir))[leo]
    with open(path, "r+b") as f:
        f.seek(10)
        f.write(b"\xff")
    lg2 = load_log(lg.dir, "t", 0, LogConfig(**CFG), had_clean_shutdown=True)
    assert state(lg2) == before
    lg2.close()
    read_snapshot(path)  # rewritten by close, readable


def test_retention_deletes_old_snapshots(tmp_path):
    lg = make_log(tmp_path, retention_bytes=3 * SEGMENT_BYTES, file_delete_delay_ms=0)
    model = write_workload(lg, Model(), seed=6, steps=150)
    snaps_before = [o for o, _p in list_snapshot_files(lg.dir)]
    assert snaps_before and min(snaps_before) < lg.segments()[-3].base_offset
    assert lg.delete_old_segments() > 0
    start = lg.log_start_offset
    assert all(o >= start for o, _p in list_snapshot_files(lg.dir))
    assert lg.last_stable_offset == max(start, model.lso)
    lg.remove_deleted_segments(force=True)
    # the deleted segments' .txnindex files went with them
    bases = {s.base_offset for s in lg.segments()}
    assert all(int(n[:20]) in bases for n in txnindex_files(lg.dir))
    # and aborted_txns sees only what is left
    assert lg.aborted_txns(start, lg.log_end_offset) == \
        [t for t in model.aborted if t.last_offset >= start]
    lg.close()


def test_lso_never_below_the_log_start_offset(tmp_path):
    lg = make_log(tmp_path, retention_bytes=2 * SEGMENT_BYTES, file_delete_delay_ms=0)
    first, _ = lg.append_encoded(txn_batch(1))  # stays open
    for i in range(40):
        lg.append([(i, None, b"x" * 40, ())])
    assert lg.last_stable_offset == first == 0
    assert lg.delete_old_segments() > 0
    # Kafka: the first unstable offset is bumped to the log start offset
    assert lg.last_stable_offset == lg.log_start_offset > 0
    lg.close()


def test_truncate_fully_drops_snapshots_and_txn_indexes(tmp_path):
    lg = make_log(tmp_path)
    write_workload(lg, Model(), seed=1, steps=60)
    lg.close()
    lg = load_log(lg.dir, "t", 0, LogConfig(**CFG), had_clean_shutdown=True)
    lg.truncate_fully_and_start_at(1000)
    assert list_snapshot_files(lg.dir) == [] and txnindex_files(lg.dir) == {}
    assert lg.producer_state.is_empty() and lg.last_stable_offset == 1000
    lg.close()


def test_segment_truncation_drops_txn_entries_past_the_offset(tmp_path):
    lg = make_log(tmp_path, segment_bytes=1 << 20)
    a, _ = lg.append_encoded(txn_batch(1))
    m1, _ = lg.append_encoded(marker(ABORT, 1))
    lg.append_encoded(txn_batch(2))
    m2, _ = lg.append_encoded(marker(ABORT, 2))
    seg = lg.active_segment
    assert len(seg.txn_index.all_aborted_txns()) == 2
    seg.truncate_to(m2)
    assert seg.txn_index.all_aborted_txns() == [AbortedTxn(1, a, m1, m1 + 1)]
    lg.close(take_snapshot=False)


# -- recovery -----------------------------------------------------------------------------------
def manager(d, **props):
    # the workloads' timestamps are from 1970: keep their producers from expiring at startup
    cfg = BrokerConfig.from_properties({"log.segment.bytes": str(SEGMENT_BYTES),
                                        "log.index.interval.bytes": str(INTERVAL),
                                        "producer.id.expiration.ms": str(2**62),
                                        **props}).with_log_dirs([d])
    m = LogManager(cfg)
    m.startup()
    return m


def test_unclean_shutdown_recovery_rebuilds_txnindex_and_producer_state(tmp_path):
    d = str(tmp_path / "logs")
    m = manager(d)
    m.create_topic("t", 1)
    lg = m.get_log("t", 0)
    model = write_workload(lg, Model(), seed=12)
    before = state(lg)
    expected = expected_txnindex_files(lg, model)
    assert m.shutdown()
    p = lg.dir
    assert txnindex_files(p) == expected
    os.unlink(os.path.join(d, CLEAN_SHUTDOWN_FILE))
    for n in txnindex_files(p):
        os.unlink(os.path.join(p, n))
    for _o, path in list_snapshot_files(p):
        os.unlink(path)
    with open(os.path.join(d, "recovery-point-offset-checkpoint"), "w") as f:
        f.write("0\n1\nt 0 0\n")  # recover everything
    m = manager(d)
    lg = m.get_log("t", 0)
    assert state(lg) == before
    assert txnindex_files(p) == expected  # rebuilt byte for byte
    assert lg.aborted_txns(0, lg.log_end_offset) == model.aborted
    assert committed_values(lg) == model.committed_values()
    assert m.shutdown()


def test_recovery_of_a_torn_abort_marker_reopens_the_transaction(tmp_path):
    lg = make_log(tmp_path, segment_bytes=1 << 20)
    first, _ = lg.append_encoded(txn_batch(4))
    lg.append([(1, None, b"plain", ())])
    at, _ = lg.append_encoded(marker(ABORT, 4))
    assert lg.last_stable_offset == lg.log_end_offset
    lg.flush()
    path = lg.active_segment.log_path
    lg.close(take_snapshot=False)
    size = os.path.getsize(path)
    os.truncate(path, size - 5)  # a torn write of the marker
    lg = load_log(lg.dir, "t", 0, LogConfig(**{**CFG, "segment_bytes": 1 << 20}),
                  had_clean_shutdown=False, recovery_point=0)
    assert lg.log_end_offset == at
    # the rebuilt index is empty (Kafka's reset truncates the file to 0 bytes)
    assert lg.aborted_txns(0, 10) == [] and set(txnindex_files(lg.dir).values()) == {b""}
    assert lg.last_stable_offset == first  # the transaction is open again
    lg.close()


def test_deleted_txnindex_is_rebuilt_by_recovery(tmp_path):
    lg = make_log(tmp_path)
    model = write_workload(lg, Model(), seed=21)
    expected = expected_txnindex_files(lg, model)
    lg.close()
    victim = sorted(expected)[len(expected) // 2]
    os.unlink(os.path.join(lg.dir, victim))
    # after a clean shutdown nothing tells a missing .txnindex from an empty one (as in
    # Kafka); recovery from before the segment rebuilds it
    lg2 = load_log(lg.dir, "t", 0, LogConfig(**CFG), had_clean_shutdown=False,
                   recovery_point=0)
    assert txnindex_files(lg.dir) == expected
    assert lg2.aborted_txns(0, lg2.log_end_offset) == model.aborted
    lg2.close()


def test_corrupt_txnindex_fails_kafkas_sanity_check_and_is_rebuilt(tmp_path):
    lg = make_log(tmp_path)
    model = write_workload(lg, Model(), seed=21)
    expected = expected_txnindex_files(lg, model)
    lg.close()
    name = max(expected)
    base = int(name[:20])
    with open(os.path.join(lg.dir, name), "r+b") as f:
        f.seek(18)  # lastOffset of the first entry: below the segment's base offset
        f.write(struct.pack(">q", base - 1))
    actions = plan_load(lg.dir, LogConfig(**CFG), had_clean_shutdown=True)
    assert [(a.kind, a.base_offset) for a in actions] == [("corrupt-index", base)]
    assert "is less than start offset" in actions[0].message
    lg2 = load_log(lg.dir, "t", 0, LogConfig(**CFG), had_clean_shutdown=True)
    assert txnindex_files(lg.dir) == expected
    lg2.close()


# -- read-only loads and following a writer ---------------------------------------------------------
def test_read_only_load_never_writes_a_byte(tmp_path):
    lg = make_log(tmp_path)
    model = write_workload(lg, Model(), seed=13)
    lg.flush()
    # a live writer's view: no close, so no snapshot at the log end offset
    for clean in (False, True):
        before = tree_state(str(tmp_path))
        ro = load_log(lg.dir, "t", 0, LogConfig(**CFG), writable=False,
                      had_clean_shutdown=clean)
        assert ro.last_stable_offset == model.lso
        assert ro.aborted_txns(0, ro.log_end_offset) == model.aborted
        assert committed_values(ro) == model.committed_values()
        assert ro.take_producer_snapshot() is None
        ro.close()
        assert tree_state(str(tmp_path)) == before
    # with a snapshot broken and no snapshot at all
    path = list_snapshot_files(lg.dir)[-1][1]
    with open(path, "r+b") as f:
        f.write(b"\0\0")
    before = tree_state(str(tmp_path))
    ro = load_log(lg.dir, "t", 0, LogConfig(**CFG), writable=False)
    assert ro.last_stable_offset == model.lso
    ro.close()
    assert tree_state(str(tmp_path)) == before
    lg.close()


def test_refresh_from_disk_follows_a_writers_transactions(tmp_path):
    lg = make_log(tmp_path)
    lg.append([(1, None, b"a", ())])
    lg.flush()
    ro = load_log(lg.dir, "t", 0, LogConfig(**CFG), writable=False)
    first, _ = lg.append_encoded(txn_batch(8))
    assert ro.refresh_from_disk()
    assert ro.log_end_offset == lg.log_end_offset and ro.last_stable_offset == first
    # the writer rolls a few times, then aborts: the marker and its .txnindex entry land in
    # a segment the reader has not seen yet
    for i in range(30):
        lg.append([(i, None, b"x" * 40, ())])
    at, _ = lg.append_encoded(marker(ABORT, 8))
    assert lg.active_segment.base_offset > 0
    assert ro.refresh_from_disk()
    assert ro.last_stable_offset == ro.log_end_offset == lg.log_end_offset
    assert ro.aborted_txns(0, ro.log_end_offset) == [AbortedTxn(8, first, at, at + 1)]
    assert ro.committed_filter(0, at).is_aborted(next(ro.batches(first)))
    # a second transaction and its abort in the same (now known) segment
    second, _ = lg.append_encoded(txn_batch(8, seq=2))
    ro.refresh_from_disk()
    assert ro.last_stable_offset == second
    at2, _ = lg.append_encoded(marker(ABORT, 8))
    ro.refresh_from_disk()
    assert ro.last_stable_offset == ro.log_end_offset
    assert ro.aborted_txns(second, ro.log_end_offset) == [AbortedTxn(8, second, at2, at2 + 1)]
    assert not ro.refresh_from_disk()
    lg.close()
    # the reader writes nothing: with the writer gone, refreshing and closing change no byte
    disk = tree_state(str(tmp_path))
    ro.refresh_from_disk()
    ro.close()
    assert tree_state(str(tmp_path)) == disk


# -- kafkafs check ------------------------------------------------------------------------------
CHECK = ["check", "--override", f"log.segment.bytes={SEGMENT_BYTES}",
         "--override", f"log.index.interval.bytes={INTERVAL}"]


def check_json(capsys, d, *args):
    capsys.readouterr()
    rc = main([*CHECK, "--log-dirs", d, *args, "--json"])
    out, _err = capsys.readouterr()
    return rc, json.loads(out)


def findings(doc):
    return [f for d in doc["log_dirs"] for f in d["findings"]]


def txn_log_dir(tmp_path):
    d = str(tmp_path / "logs")
    m = manager(d)
    m.create_topic("t", 1)
    lg = m.get_log("t", 0)
    model = write_workload(lg, Model(), seed=30)
    expected = expected_txnindex_files(lg, model)
    before = state(lg)
    assert m.shutdown()
    return d, os.path.join(d, "t-0"), model, expected, before


def test_check_is_clean_on_a_transactional_log_dir(tmp_path, capsys):
    d, _p, _model, _expected, _before = txn_log_dir(tmp_path)
    rc, doc = check_json(capsys, d)
    assert rc == 0, findings(doc)


def test_check_reports_a_corrupt_snapshot_and_repair_rebuilds(tmp_path, capsys):
    d, p, _model, _expected, before = txn_log_dir(tmp_path)
    snaps = list_snapshot_files(p)
    bad = snaps[len(snaps) // 2][1]
    with open(bad, "r+b") as f:
        f.seek(6)
        f.write(b"\x7f\xff\xff\xff")  # an entry count far past the file
    disk = tree_state(d)
    rc, doc = check_json(capsys, d)
    assert tree_state(d) == disk
    assert rc == 1
    hits = [f for f in findings(doc) if f["kind"] == "corrupt-snapshot"]
    assert [h["path"] for h in hits] == [bad]
    assert hits[0]["message"].startswith(f"Failed to load producer snapshot from '{bad}': ")
    assert hits[0]["repairable"]
    rc, doc = check_json(capsys, d, "--repair")
    assert rc == 0, findings(doc)
    assert not os.path.exists(bad)
    rc, doc = check_json(capsys, d)
    assert rc == 0, findings(doc)
    m = manager(d)
    assert state(m.get_log("t", 0)) == before
    assert m.shutdown()


def test_check_reports_a_txnindex_and_repair_rebuilds_it(tmp_path, capsys):
    d, p, model, expected, before = txn_log_dir(tmp_path)
    names = sorted(expected)
    # Kafka's sanity check: an entry below the segment's base offset
    first = os.path.join(p, names[-1])
    with open(first, "r+b") as f:
        f.seek(18)
        f.write(struct.pack(">q", 0 if int(names[-1][:20]) > 0 else -1))
    # thorough only: an entry whose marker lies past the segment's data
    second = os.path.join(p, names[0])
    with open(second, "ab") as f:
        f.write(struct.pack(">hqqqq", 0, 11, 10**6, 10**6 + 5, 10**6))
    disk = tree_state(d)
    rc, doc = check_json(capsys, d)
    assert tree_state(d) == disk and rc == 1
    hits = {f["path"]: f for f in findings(doc) if f["kind"] == "corrupt-index"}
    seg_log = {n: os.path.join(p, n[:20] + ".log") for n in names}
    assert hits[seg_log[names[-1]]]["at_startup"]
    assert "is less than start offset" in hits[seg_log[names[-1]]]["message"]
    assert not hits[seg_log[names[0]]]["at_startup"]
    assert "past the last offset" in hits[seg_log[names[0]]]["message"]
    rc, doc = check_json(capsys, d, "--repair")
    assert rc == 0, findings(doc)
    assert txnindex_files(p) == expected
    rc, doc = check_json(capsys, d)
    assert rc == 0, findings(doc)
    m = manager(d)
    lg = m.get_log("t", 0)
    assert state(lg) == before
    assert lg.aborted_txns(0, lg.log_end_offset) == model.aborted
    assert m.shutdown()


def test_snapshot_entries_match_kafkas_layout(tmp_path):
    lg = make_log(tmp_path, segment_bytes=1 << 20)
    first, _ = lg.append_encoded(txn_batch(77, n=3, seq=5, epoch=2, ts=123))
    lg.close()
    path = dict(list_snapshot_files(lg.dir))[3]
    with open(path, "rb") as f:
        data = f.read()
    # version 1, crc, one 46-byte entry: pid, epoch, lastSeq, lastOffset, offsetDelta,
    # timestamp, coordinatorEpoch, currentTxnFirstOffset
    assert struct.unpack(">hIi", data[:10])[0::2] == (1, 1)
    assert struct.unpack(">qhiqiqiq", data[10:]) == (77, 2, 7, 2, 2, 125, -1, first)
    assert read_snapshot(path) == [ProducerStateEntry(77, 2, 7, 2, 2, 125, -1, 0)]


def test_shutdown_is_unclean_when_a_snapshot_cannot_be_written(tmp_path, monkeypatch):
    """Without its snapshot a clean shutdown would make the next load assume no producers
    (Kafka's shortcut when no snapshot exists): the marker is not written then."""
    d = str(tmp_path / "logs")
    m = manager(d)
    m.create_topic("t", 1)
    lg = m.get_log("t", 0)
    first, _ = lg.append_encoded(txn_batch(1))

    def full(self):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(type(lg), "take_producer_snapshot", full)
    assert not m.shutdown()
    assert not os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_FILE))
    monkeypatch.undo()
    m = manager(d)
    assert m.get_log("t", 0).last_stable_offset == first
    assert m.shutdown()
