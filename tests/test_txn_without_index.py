"""Aborted transactions known without ``.txnindex`` files (issue 11 item 3).

Broker-like log dirs are written with kafka-python's ``DefaultRecordBatchBuilder`` (an
independent encoder): transactional batches of interleaved producers, COMMIT and ABORT
control batches, transactions that span segments, an idempotent producer, plain records,
and one transaction still open -- with no ``.txnindex`` at all. Every reader must hide the
aborted records as a broker would after its recovery: ``kafkafs consume`` and a
``--read-only`` mount (which never write a byte) as well as a read-write mount (whose
recovery writes the files). The expected output is modelled here from the events written,
not from kafkafs."""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
import struct

import pytest
from conftest import kafkafs, tree_state
from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kafkafs.log.config import LogConfig
from kafkafs.log.loader import load_log
from kafkafs.log.manager import CLEAN_SHUTDOWN_FILE
from kafkafs.log.segment import LogSegment
from kafkafs.log.txnindex import AbortedTxn, TransactionIndex

T0 = 1_700_000_000_000
ABORT, COMMIT = 0, 1


# -- writing broker-like segments with kafka-python -------------------------------------------
class _ControlBatchBuilder(DefaultRecordBatchBuilder):
    """kafka-python builds client batches only: set the control attribute bit (5) too."""

    def _get_attributes(self, include_compression_type=True):
        return super()._get_attributes(include_compression_type) | self.CONTROL_MASK


def _build(builder, base: int, records) -> bytes:
    for delta, (ts, key, value) in enumerate(records):
        assert builder.append(delta, timestamp=ts, key=key, value=value, headers=[]) is not None
    buf = builder.build()
    struct.pack_into(">q", buf, 0, base)  # the base offset is not covered by the CRC
    return bytes(buf)


def data_batch(base, values, pid=-1, epoch=-1, seq=-1, transactional=False) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=transactional,
                                  producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                  batch_size=16 << 20)
    return _build(b, base, [(T0 + base + i, None, v) for i, v in enumerate(values)])


def marker_batch(base, kind, pid, epoch=0, coordinator_epoch=5) -> bytes:
    """A COMMIT/ABORT marker as the broker writes it: key version 0 + type, value version 0
    + coordinator epoch."""
    b = _ControlBatchBuilder(magic=2, compression_type=0, is_transactional=True,
                             producer_id=pid, producer_epoch=epoch, base_sequence=-1,
                             batch_size=1 << 20)
    return _build(b, base, [(T0 + base, struct.pack(">hh", 0, kind),
                             struct.pack(">hi", 0, coordinator_epoch))])


# -- the events and the model -----------------------------------------------------------------
# ("data", pid or None, transactional, [values]) | ("commit"|"abort", pid) | ("roll",)
SCENARIO = [
    ("data", None, False, [b"a0"]),                # 0
    ("data", 1, True, [b"t1a", b"t1b"]),           # 1-2
    ("data", 2, True, [b"u1"]),                    # 3   P2's transaction spans segments
    ("data", None, False, [b"a1"]),                # 4
    ("commit", 1),                                 # 5
    ("roll",),
    ("data", 2, True, [b"u2"]),                    # 6
    ("data", 3, True, [b"v1"]),                    # 7   P3's spans three segments
    ("abort", 2),                                  # 8   (P2, 3, 8, lso 7)
    ("data", None, False, [b"a2"]),                # 9
    ("roll",),
    ("data", 3, True, [b"v2"]),                    # 10
    ("data", 1, True, [b"t2"]),                    # 11
    ("data", 5, False, [b"i1"]),                   # 12  idempotent, not transactional
    ("roll",),
    ("abort", 1),                                  # 13  (P1, 11, 13, lso 7)
    ("commit", 3),                                 # 14
    ("data", 2, True, [b"u3"]),                    # 15
    ("abort", 2),                                  # 16  (P2, 15, 16, lso 17)
    ("data", None, False, [b"a3"]),                # 17
    ("roll",),
    ("data", 4, True, [b"w1"]),                    # 18  open: the last stable offset
    ("data", None, False, [b"a4"]),                # 19
    ("data", 6, True, [b"x1"]),                    # 20
    ("abort", 6),                                  # 21  (P6, 20, 21, lso 18)
]


class Model:
    """Kafka's rules written out plainly over the events: which records a read_committed
    reader sees, the last stable offset, and the ``.txnindex`` entries recovery writes."""

    def __init__(self, events):
        self.segments: list[list[bytes]] = [[]]  # encoded batches per segment
        self.bases: list[int] = [0]
        self.records: list[tuple[int, int | None, bool, bytes]] = []  # offset, pid, txn, value
        self.aborted: list[AbortedTxn] = []
        self.producers: dict[int, dict] = {}  # pid -> epoch/seq/ongoing first offset
        self.txn_of: dict[int, int] = {}  # offset of a transactional record -> its txn's marker
        offset = 0
        pending: dict[int, list[int]] = {}
        for ev in events:
            if ev[0] == "roll":
                self.segments.append([])
                self.bases.append(offset)
                continue
            if ev[0] == "data":
                _, pid, txn, values = ev
                state = self.producers.setdefault(pid, {"seq": 0, "first": None}) \
                    if pid is not None else None
                if pid is None:
                    data = data_batch(offset, values)
                else:
                    data = data_batch(offset, values, pid=pid, epoch=0, seq=state["seq"],
                                      transactional=txn)
                    state["seq"] += len(values)
                    if txn and state["first"] is None:
                        state["first"] = offset
                for i, v in enumerate(values):
                    self.records.append((offset + i, pid, txn, v))
                    if txn:
                        pending.setdefault(pid, []).append(offset + i)
                self.segments[-1].append(data)
                offset += len(values)
                continue
            kind, pid = ev
            state = self.producers[pid]
            if kind == "abort" and state["first"] is not None:
                others = [p["first"] for q, p in self.producers.items()
                          if q != pid and p["first"] is not None]
                lso = min(others) if others else offset + 1
                self.aborted.append(AbortedTxn(pid, state["first"], offset, lso))
            for o in pending.pop(pid, []):
                self.txn_of[o] = ABORT if kind == "abort" else COMMIT
            state["first"] = None
            self.segments[-1].append(marker_batch(offset, ABORT if kind == "abort" else COMMIT,
                                                  pid))
            offset += 1
        self.log_end_offset = offset
        open_firsts = [p["first"] for p in self.producers.values() if p["first"] is not None]
        self.last_stable_offset = min(open_firsts) if open_firsts else offset

    def committed(self, start=0) -> list[bytes]:
        return [v for o, pid, txn, v in self.records
                if start <= o < self.last_stable_offset
                and (not txn or self.txn_of.get(o) == COMMIT)]

    def everything(self, start=0) -> list[bytes]:
        return [v for o, _pid, _txn, v in self.records if o >= start]

    def aborted_offsets(self) -> list[int]:
        return [o for o, _pid, txn, _v in self.records if txn and self.txn_of.get(o) == ABORT]


def random_events(seed: int, steps: int = 160) -> list:
    """Interleaved producers opening, continuing, committing and aborting transactions,
    plain and idempotent records, rolls anywhere (never an empty segment)."""
    rnd = random.Random(seed)
    events, open_txns, since_roll = [], set(), 0
    for n in range(steps):
        r = rnd.random()
        pid = rnd.choice((11, 22, 33, 44))
        if r < 0.1 and since_roll:
            events.append(("roll",))
            since_roll = 0
            continue
        if r < 0.45:
            events.append(("data", pid, True, [b"tx%d-%d-%d" % (pid, n, i)
                                               for i in range(rnd.randint(1, 3))]))
            open_txns.add(pid)
        elif r < 0.65 and open_txns:
            p = rnd.choice(sorted(open_txns))
            events.append((rnd.choice(("commit", "abort")), p))
            open_txns.discard(p)
        elif r < 0.72:
            events.append(("data", 99, False, [b"idem-%d" % n]))
        else:
            events.append(("data", None, False, [b"plain-%d" % n]))
        since_roll += 1
    return events


# -- log dirs ----------------------------------------------------------------------------------
def write_checkpoint(path, entries):
    """A Kafka checkpoint file: version 0, count, ``topic partition offset`` lines."""
    lines = [f"{topic} {partition} {offset}\n" for (topic, partition), offset in entries.items()]
    with open(path, "w") as f:
        f.write(f"0\n{len(entries)}\n" + "".join(lines))


def write_snapshot(path, entries):
    """A producer snapshot (version 1) packed by hand: entries of (pid, epoch, last_seq,
    last_offset, offset_delta, timestamp, coordinator_epoch, txn_first_offset or -1)."""
    body = struct.pack(">i", len(entries)) + b"".join(
        struct.pack(">qhiqiqiq", *e) for e in sorted(entries))
    with open(path, "wb") as f:
        f.write(struct.pack(">hI", 1, crc32c(body)) + body)


def write_partition(part_dir, model: Model, *, indexes: bool, first_segment: int = 0):
    """The model's segments as ``.log`` files (from ``first_segment`` on), with empty
    ``.index``/``.timeindex`` files when ``indexes`` (what a broker leaves beside a segment
    smaller than index.interval.bytes) and never a ``.txnindex``."""
    os.makedirs(part_dir, exist_ok=True)
    for base, batches in list(zip(model.bases, model.segments))[first_segment:]:
        stem = os.path.join(part_dir, f"{base:020d}")
        with open(stem + ".log", "wb") as f:
            f.write(b"".join(batches))
        if indexes:
            for suffix in (".index", ".timeindex"):
                open(stem + suffix, "wb").close()


#: variants of a copied broker dir: (name, index files, recovery point checkpoint, clean)
VARIANTS = {
    "bare": {"indexes": False, "recovery_point": None, "clean": False},
    "rp0": {"indexes": True, "recovery_point": 0, "clean": False},
    "rp-past": {"indexes": True, "recovery_point": 13, "clean": False},  # 0, 6, 10 below
    "clean": {"indexes": True, "recovery_point": 22, "clean": True},
}


def build_dir(logs, topic, variant, model=None) -> Model:
    """One log dir holding ``<topic>-0`` built from SCENARIO as ``variant`` says."""
    model = model or Model(SCENARIO)
    v = VARIANTS[variant]
    os.makedirs(logs, exist_ok=True)
    write_partition(os.path.join(logs, f"{topic}-0"), model, indexes=v["indexes"])
    if v["recovery_point"] is not None:
        write_checkpoint(os.path.join(logs, "recovery-point-offset-checkpoint"),
                         {(topic, 0): v["recovery_point"]})
    if v["clean"]:
        # a clean shutdown leaves a snapshot at the log end offset: P4's transaction is open
        write_snapshot(os.path.join(logs, f"{topic}-0", f"{model.log_end_offset:020d}.snapshot"),
                       [(pid, 0, 0, -1, 0, T0, 5, 18 if pid == 4 else -1)
                        for pid in (1, 2, 3, 4, 5, 6)])
        open(os.path.join(logs, CLEAN_SHUTDOWN_FILE), "w").close()
    return model


def read_bytes(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def write_bytes(path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def consume(logs, topic, *extra) -> list[bytes]:
    out = kafkafs("consume", "--log-dirs", logs, "--topic", topic, "--from-beginning",
                  "--timeout-ms", "300", *extra)
    return out.stdout.splitlines()


def txnindex_files(part_dir) -> list[str]:
    return sorted(n for n in os.listdir(part_dir) if n.endswith(".txnindex"))


def ro_log(part_dir, **kw):
    return load_log(part_dir, "t", 0, LogConfig(), writable=False, **kw)


# -- the CLI -----------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_consume_hides_aborted_records_without_txnindex(tmp_path, variant):
    logs = str(tmp_path / "logs")
    model = build_dir(logs, "t", variant)
    before = tree_state(logs)
    assert consume(logs, "t") == model.committed()  # read_committed is the default
    assert consume(logs, "t", "--isolation-level", "read_committed") == model.committed()
    assert consume(logs, "t", "--isolation-level", "read_uncommitted") == model.everything()
    assert tree_state(logs) == before  # not a byte, a name or an mtime
    assert txnindex_files(os.path.join(logs, "t-0")) == []


def test_the_scenario_model():
    """The model itself: what the scenario's comments promise."""
    m = Model(SCENARIO)
    assert m.bases == [0, 6, 10, 13, 18]
    assert m.last_stable_offset == 18 and m.log_end_offset == 22
    assert m.committed() == [b"a0", b"t1a", b"t1b", b"a1", b"v1", b"a2", b"v2", b"i1", b"a3"]
    assert m.aborted == [AbortedTxn(2, 3, 8, 7), AbortedTxn(1, 11, 13, 7),
                         AbortedTxn(2, 15, 16, 17), AbortedTxn(6, 20, 21, 18)]
    assert m.aborted_offsets() == [3, 6, 11, 15, 20]


def test_kafka_python_reads_the_batches_back():
    """The builder writes what it means: offsets, attributes, the marker's key and value."""
    data = marker_batch(8, ABORT, pid=2)
    batch = DefaultRecordBatch(bytearray(data))
    assert batch.base_offset == 8 and batch.is_control_batch and batch.is_transactional
    assert batch.producer_id == 2
    (rec,) = list(batch)
    assert rec.key == struct.pack(">hh", 0, ABORT)
    assert rec.value == struct.pack(">hi", 0, 5)
    batch = DefaultRecordBatch(bytearray(data_batch(1, [b"x", b"y"], pid=1, epoch=0, seq=0,
                                                    transactional=True)))
    assert batch.validate_crc() and [r.offset for r in batch] == [1, 2]


# -- the log: computed entries are what Kafka's recovery writes -------------------------------
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_computed_entries_equal_what_recovery_writes(tmp_path, seed):
    """Read-only: the entries computed in memory equal the model's and the ``.txnindex``
    files a writable load's recovery writes into a copy of the same dir."""
    model = Model(random_events(seed))
    part = str(tmp_path / "ro" / "t-0")
    write_partition(part, model, indexes=False)
    assert model.aborted, "the workload must abort something"
    before = tree_state(part)
    lg = ro_log(part)
    assert lg.aborted_txns(0, model.log_end_offset) == model.aborted
    assert lg.last_stable_offset == model.last_stable_offset
    # every range, as readers ask: the overlapping entries
    for start in range(0, model.log_end_offset, 7):
        for end in range(start + 1, model.log_end_offset + 1, 5):
            want = [t for t in model.aborted if t.last_offset >= start and t.first_offset < end]
            got = lg.aborted_txns(start, end)
            assert [t for t in got if t in want] == want
            assert all(t.last_offset >= start and t.first_offset < end for t in got)
    lg.close()
    assert tree_state(part) == before

    rw = str(tmp_path / "rw" / "t-0")
    shutil.copytree(part, rw)
    lg = load_log(rw, "t", 0, LogConfig(), writable=True)  # unclean, recovery point 0
    written = []
    for seg in lg.segments():
        written += TransactionIndex(seg.txn_index_path, seg.base_offset,
                                    writable=False).all_aborted_txns()
    assert written == model.aborted
    assert lg.aborted_txns(0, model.log_end_offset) == model.aborted
    lg.close()


def test_first_offset_and_lso_come_from_the_snapshot_below(tmp_path):
    """Segments 0 and 6 are gone and the log starts at 12 (DeleteRecords): P1's transaction
    (open since 11) and P3's (since 7) only the snapshot at 13 knows. Kafka's recovery of
    segment 13 loads that snapshot -- one in (log start, base] -- so P1's ABORT there is
    ``(1, 11, 13, 7)``; without it the ABORT would end no transaction at all."""
    model = Model(SCENARIO)
    part = str(tmp_path / "t-0")
    write_partition(part, model, indexes=True, first_segment=2)
    snapshot = [(1, 0, 0, 11, 0, T0, 5, 11), (2, 0, 1, 6, 0, T0, 5, -1),
                (3, 0, 1, 10, 0, T0, -1, 7), (5, 0, 0, 12, 0, T0, -1, -1)]
    write_snapshot(os.path.join(part, f"{13:020d}.snapshot"), snapshot)
    before = tree_state(part)
    lg = ro_log(part, log_start_offset=12)
    want = [AbortedTxn(1, 11, 13, 7), AbortedTxn(2, 15, 16, 17), AbortedTxn(6, 20, 21, 18)]
    assert lg.aborted_txns(12, model.log_end_offset) == want
    assert lg.aborted_txns(12, 13) == want[:1]
    lg.close()
    assert tree_state(part) == before
    # a snapshot at the log start offset itself is not loaded (Kafka's truncateAndReload
    # keeps only those in (log start, end]): from 10 on, P3's transaction begins at 10
    os.unlink(os.path.join(part, f"{13:020d}.snapshot"))
    write_snapshot(os.path.join(part, f"{10:020d}.snapshot"), snapshot)
    lg = ro_log(part, log_start_offset=10)
    assert lg.aborted_txns(10, 14) == [AbortedTxn(1, 11, 13, 10)]
    lg.close()


def test_a_trusted_txnindex_is_read_not_recomputed(tmp_path, monkeypatch):
    """Below the recovery point a segment's ``.txnindex`` (beside its indexes) is what a
    broker uses: read, the segment not scanned. At or past it -- where recovery would
    rebuild it -- a file is ignored and the entries computed."""
    model = Model(SCENARIO)
    part = str(tmp_path / "t-0")
    write_partition(part, model, indexes=True)
    # segment 6's true file below the recovery point; a wrong one in segment 13, past it
    with open(os.path.join(part, f"{6:020d}.txnindex"), "wb") as f:
        f.write(AbortedTxn(2, 3, 8, 7).to_bytes())
    with open(os.path.join(part, f"{13:020d}.txnindex"), "wb") as f:
        f.write(AbortedTxn(3, 7, 14, 15).to_bytes())  # forged: P3 committed
    scanned = []
    real = LogSegment.batches

    def counting(self, *a, **kw):
        scanned.append(self.base_offset)
        return real(self, *a, **kw)

    # the state at 13 from a snapshot (P1 open since 11, P3 since 7): no replay reads 6
    write_snapshot(os.path.join(part, f"{13:020d}.snapshot"),
                   [(1, 0, 1, 11, 0, T0, 5, 11), (2, 0, 1, 6, 0, T0, 5, -1),
                    (3, 0, 0, 10, 0, T0, -1, 7), (5, 0, 0, 12, 0, T0, -1, -1)])
    lg = ro_log(part, recovery_point=13)
    monkeypatch.setattr(LogSegment, "batches", counting)
    assert lg.aborted_txns(0, 22) == model.aborted
    assert 6 not in scanned and 13 in scanned
    # computed once per sealed segment: asking again reads nothing
    scanned.clear()
    assert lg.aborted_txns(0, 22) == model.aborted
    assert scanned == []
    lg.close()


def test_segments_without_abort_markers_need_no_producer_state(tmp_path, monkeypatch):
    """Only a segment holding an ABORT needs the producer state at its base; the others are
    known empty from one look at their control batches."""
    from kafkafs.log import txnscan

    model = Model(SCENARIO)
    part = str(tmp_path / "t-0")
    write_partition(part, model, indexes=False)
    states = []
    real = txnscan.TxnScanner._state_at

    def spy(self, segments, k, log_start):
        states.append(segments[k].base_offset)
        return real(self, segments, k, log_start)

    monkeypatch.setattr(txnscan.TxnScanner, "_state_at", spy)
    lg = ro_log(part)
    assert lg.aborted_txns(0, 22) == model.aborted
    assert states == [6, 13, 18]  # segments 0 and 10 hold no ABORT marker
    lg.close()


def test_a_point_read_stops_where_its_transactions_are_decided(tmp_path, monkeypatch):
    """The search for the transactions overlapping one batch ends with the first segment
    whose end holds none of them open, not at the log end."""
    model = Model(SCENARIO)
    part = str(tmp_path / "t-0")
    write_partition(part, model, indexes=False)
    scanned = set()
    real = LogSegment.batches

    def counting(self, *a, **kw):
        scanned.add(self.base_offset)
        return real(self, *a, **kw)

    lg = ro_log(part)
    monkeypatch.setattr(LogSegment, "batches", counting)
    assert lg.aborted_txns(3, 4) == [AbortedTxn(2, 3, 8, 7)]  # Kafka's rule: its LSO 7 >= 4
    assert scanned == {0, 6}
    scanned.clear()
    # no entry of segment 13 reaches 18, but its end (18) does, with nothing open there
    assert lg.aborted_txns(17, 18) == []
    assert 13 in scanned and 18 not in scanned
    lg.close()


def test_the_active_segment_grows_with_new_markers(tmp_path):
    """Beside a writer: bytes appended to the active segment, then a new segment, are
    picked up by refresh_from_disk; their ABORTs join the computed entries."""
    model = Model(SCENARIO)
    part = str(tmp_path / "t-0")
    write_partition(part, model, indexes=False)
    lg = ro_log(part)
    assert lg.aborted_txns(0, 22) == model.aborted
    assert lg.last_stable_offset == 18
    with open(os.path.join(part, f"{18:020d}.log"), "ab") as f:
        f.write(data_batch(22, [b"w2"], pid=4, epoch=0, seq=1, transactional=True))
        f.write(marker_batch(23, ABORT, pid=4))
    assert lg.refresh_from_disk()
    assert lg.last_stable_offset == 24
    assert lg.aborted_txns(0, 24) == model.aborted + [AbortedTxn(4, 18, 23, 24)]
    with open(os.path.join(part, f"{24:020d}.log"), "wb") as f:
        f.write(data_batch(24, [b"y1"], pid=7, epoch=0, seq=0, transactional=True))
        f.write(data_batch(25, [b"a5"]))
        f.write(marker_batch(26, ABORT, pid=7))
    assert lg.refresh_from_disk()
    assert lg.aborted_txns(0, 27)[-2:] == [AbortedTxn(4, 18, 23, 24),
                                           AbortedTxn(7, 24, 26, 27)]
    assert txnindex_files(part) == []
    lg.close()


def test_damage_ends_the_computation_quietly(tmp_path):
    """A damaged segment: the entries before the damage are known, aborted_txns does not
    raise (readers meet the damage where it lies), later segments are still computed."""
    model = Model(SCENARIO)
    part = str(tmp_path / "t-0")
    write_partition(part, model, indexes=False)
    path = os.path.join(part, f"{13:020d}.log")
    data = bytearray(read_bytes(path))
    cut = len(model.segments[3][0]) + len(model.segments[3][1])  # after ABORT P1, COMMIT P3
    data[cut + 8:cut + 12] = b"\xff\xff\xff\xff"  # the next batch's length
    write_bytes(path, bytes(data))
    lg = ro_log(part)
    got = lg.aborted_txns(0, 22)
    assert AbortedTxn(1, 11, 13, 7) in got and AbortedTxn(2, 15, 16, 17) not in got
    assert AbortedTxn(6, 20, 21, 18) in got
    lg.close()


def test_writable_log_below_the_recovery_point_computes_in_memory(tmp_path):
    """A writable load does not rebuild a missing ``.txnindex`` below the recovery point
    (Kafka's LogLoader does not either); readers still know its aborted transactions, and
    nothing is written for them."""
    model = Model(SCENARIO)
    part = str(tmp_path / "t-0")
    write_partition(part, model, indexes=True)
    lg = load_log(part, "t", 0, LogConfig(), writable=True, recovery_point=13)
    assert txnindex_files(part) == [f"{13:020d}.txnindex", f"{18:020d}.txnindex"]
    assert lg.aborted_txns(0, 22) == model.aborted
    assert lg.committed_filter(3, 4).is_aborted_offset(2, 3)
    assert txnindex_files(part) == [f"{13:020d}.txnindex", f"{18:020d}.txnindex"]
    lg.close()


# -- the mount ---------------------------------------------------------------------------------
def _check_partition(part, model: Model):
    assert read_bytes(os.path.join(part, "messages")).splitlines() == model.committed()
    lines = [json.loads(x) for x in read_bytes(os.path.join(part, "records.jsonl")).splitlines()]
    assert [x["value"].encode() for x in lines if "control" not in x] == model.committed()
    names = sorted(int(n) for n in os.listdir(os.path.join(part, "offset")))
    assert names == [o for o, _p, txn, v in model.records
                     if o < model.last_stable_offset and v in model.committed()]
    for gone in model.aborted_offsets():
        with pytest.raises(OSError) as e:
            read_bytes(os.path.join(part, "offset", str(gone)))
        assert e.value.errno == errno.ENOENT
    assert read_bytes(os.path.join(part, "offset", "7")) == b"v1"  # committed at 14


def test_read_only_then_read_write_mount_hide_aborted_records(tmp_path, mount_factory):
    """One log dir per variant under one mount: first ``--read-only`` (nothing written),
    then read-write (its recovery writes ``.txnindex`` where Kafka's would): the same
    records either way."""
    dirs = {v: str(tmp_path / f"logs-{v}") for v in sorted(VARIANTS)}
    models = {v: build_dir(d, f"t-{v}", v) for v, d in dirs.items()}
    before = {v: tree_state(d) for v, d in dirs.items()}
    m = mount_factory(log_dirs=list(dirs.values()), extra_args=["--read-only"])
    for v in dirs:
        _check_partition(m.path(f"t-{v}", "0"), models[v])
    assert m.umount() == 0
    assert {v: tree_state(d) for v, d in dirs.items()} == before

    m = mount_factory(log_dirs=list(dirs.values()))
    for v in dirs:
        _check_partition(m.path(f"t-{v}", "0"), models[v])
    assert m.umount() == 0
    # Kafka's recovery rebuilt the indexes of the segments it recovered, no others
    assert txnindex_files(os.path.join(dirs["bare"], "t-bare-0")) == \
        [f"{b:020d}.txnindex" for b in (6, 13, 18)]
    assert txnindex_files(os.path.join(dirs["rp-past"], "t-rp-past-0")) == \
        [f"{b:020d}.txnindex" for b in (13, 18)]
    assert txnindex_files(os.path.join(dirs["clean"], "t-clean-0")) == []


def test_legacy_entries_big_batches_and_a_zero_tail(tmp_path):
    """What the header walk leaves to the readers' iterator -- a legacy (magic 1) message
    set, a batch larger than one read, a preallocated zero tail -- is still walked, and the
    ABORT after them found."""
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    legacy = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    for i in range(2):
        legacy.append(i, timestamp=T0 + i, key=None, value=b"old-%d" % i)
    big = data_batch(3, [b"b" * 1000] * 2100)  # about 2 MiB: more than one read
    assert len(big) > 2 << 20
    segment = bytes(legacy.build()) + data_batch(2, [b"t"], pid=1, epoch=0, seq=0,
                                                 transactional=True) + big
    segment += marker_batch(2103, ABORT, pid=1) + data_batch(2104, [b"after"])
    part = str(tmp_path / "t-0")
    os.makedirs(part)
    with open(os.path.join(part, f"{0:020d}.log"), "wb") as f:
        f.write(segment + bytes(4096))  # the unwritten rest of a preallocated segment
    lg = ro_log(part)
    assert lg.log_end_offset == 2105
    assert lg.aborted_txns(0, 2105) == [AbortedTxn(1, 2, 2103, 2104)]
    values = [r.value for r in lg.records(0)]
    assert b"t" in values  # read_uncommitted sees it; read_committed does not:
    f = lg.committed_filter(0, 2105)
    assert [b.base_offset for b in lg.batches(0) if f.is_aborted(b)] == [2]
    lg.close()


def test_a_replaced_segment_is_computed_anew(tmp_path):
    """The cache follows the segment objects: after a writable log starts over (new
    segment objects at the same base offset), the entries are those of the new data."""
    model = Model(SCENARIO)
    part = str(tmp_path / "t-0")
    write_partition(part, model, indexes=True)
    lg = load_log(part, "t", 0, LogConfig(), writable=True, recovery_point=22)
    assert lg.aborted_txns(0, 22) == model.aborted  # all computed: nothing was recovered
    lg.truncate_fully_and_start_at(0)
    lg.append_encoded(bytearray(data_batch(0, [b"n"], pid=8, epoch=0, seq=0,
                                           transactional=True)))
    lg.append_encoded(bytearray(marker_batch(0, ABORT, pid=8)))
    assert lg.aborted_txns(0, 2) == [AbortedTxn(8, 0, 1, 2)]
    lg.close()
