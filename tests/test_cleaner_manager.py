"""Which logs the cleaner takes and its per-partition state (Kafka ``LogCleanerManagerTest``):
first dirty and first uncleanable offsets (checkpoint resets, the active segment, the last
stable offset, min.compaction.lag.ms), the dirty ratio, max.compaction.lag.ms (KIP-354),
the order of logs, cleaner-offset-checkpoint, in progress / abort / pause, uncleanable
partitions with their backoff, results and status."""

from __future__ import annotations

import os
import threading
import time

import pytest

from kafkafs.log import checkpoint as ckpt
from kafkafs.log.cleaner import CleanerConfig, LogCleaner
from kafkafs.log.cleaner_manager import (
    CLEANER_OFFSET_CHECKPOINT,
    MAX_RETRY_BACKOFF_MS,
    LogCleanerManager,
    LogToClean,
    cleanable_offsets,
    max_compaction_delay,
)
from kafkafs.log.config import LogConfig
from kafkafs.log.errors import LogCleaningAbortedError
from kafkafs.log.loader import load_log
from kafkafs.record.batch import encode_batch
from kafkafs.record.control import COMMIT, encode_end_txn_marker_batch

NOW = 1_700_000_000_000
HOUR = 3_600_000


def make_log(tmp_path, name="t-0", **cfg):
    d = tmp_path / "logs" / name
    d.mkdir(parents=True, exist_ok=True)
    conf = dict(cleanup_policy="compact", segment_bytes=100_000)
    conf.update(cfg)
    topic, _, part = name.rpartition("-")
    return load_log(str(d), topic, int(part), LogConfig(**conf))


def segments_of(lg, n, per=5, ts=None, key=b"k"):
    """Append ``n`` segments of ``per`` records each (timestamps ``ts(i)``), then roll."""
    for s in range(n):
        for i in range(per):
            t = ts(s) if ts else NOW
            lg.append([(t, key + b"%d" % i, b"v" * 50, ())])
        lg.roll()


def manager(*logs, **kw):
    dirs = sorted({os.path.dirname(lg.dir) for lg in logs})
    return LogCleanerManager(dirs, {(lg.topic, lg.partition): lg for lg in logs},
                             clock=kw.pop("clock", lambda: NOW), **kw)


def test_first_dirty_offset_is_the_checkpoint_or_the_log_start(tmp_path):
    lg = make_log(tmp_path)
    segments_of(lg, 3)
    o = cleanable_offsets(lg, None, NOW)
    assert (o.first_dirty_offset, o.first_uncleanable_dirty_offset, o.force_update_checkpoint) \
        == (0, 15, False)
    assert cleanable_offsets(lg, 5, NOW).first_dirty_offset == 5
    # testDirtyOffsetResetIfLargerThanEndOffset / ...SmallerThanStartOffset
    o = cleanable_offsets(lg, 999, NOW)
    assert (o.first_dirty_offset, o.force_update_checkpoint) == (0, True)
    lg.log_start_offset = 5
    o = cleanable_offsets(lg, 2, NOW)
    assert (o.first_dirty_offset, o.force_update_checkpoint) == (5, True)


def test_a_reset_checkpoint_is_rewritten(tmp_path):
    lg = make_log(tmp_path)
    segments_of(lg, 2)
    d = os.path.dirname(lg.dir)
    ckpt.write_offset_checkpoint(os.path.join(d, CLEANER_OFFSET_CHECKPOINT), {("t", 0): 500})
    m = manager(lg)
    assert m.all_cleaner_checkpoints() == {("t", 0): 500}  # read at start
    ltc = m.log_to_clean(("t", 0), lg)
    assert ltc.first_dirty_offset == 0
    assert ckpt.read_offset_checkpoint(os.path.join(d, CLEANER_OFFSET_CHECKPOINT)) == \
        {("t", 0): 0}


def test_the_active_segment_is_never_cleanable(tmp_path):
    lg = make_log(tmp_path)
    lg.append([(NOW, b"a", b"1", ())])
    o = cleanable_offsets(lg, None, NOW)
    assert o.first_uncleanable_dirty_offset == 0
    ltc = LogToClean(("t", 0), lg, 0, 0)
    assert (ltc.cleanable_bytes, ltc.first_uncleanable_offset) == (0, 0)


def test_undecided_transactional_data_is_not_cleanable(tmp_path):
    # testUndecidedTransactionalDataNotCleanable
    lg = make_log(tmp_path)
    segments_of(lg, 2)
    first, _ = lg.append_encoded(bytearray(encode_batch([(NOW, b"t", b"x", ())],
                                                        producer_id=4, producer_epoch=0,
                                                        base_sequence=0,
                                                        is_transactional=True)))
    segments_of(lg, 2)
    o = cleanable_offsets(lg, None, NOW)
    assert o.first_uncleanable_dirty_offset == first == lg.last_stable_offset
    ltc = LogToClean(("t", 0), lg, 0, o.first_uncleanable_dirty_offset)
    assert ltc.first_uncleanable_offset == 10  # the segment holding the LSO
    lg.append_encoded(bytearray(encode_end_txn_marker_batch(
        COMMIT, base_offset=0, timestamp=NOW, producer_id=4, producer_epoch=0,
        coordinator_epoch=0)))
    lg.roll()
    assert cleanable_offsets(lg, None, NOW).first_uncleanable_dirty_offset == \
        lg.active_segment.base_offset


def test_min_compaction_lag_keeps_young_segments(tmp_path):
    # testCleanableOffsetsForTime / ForShortTime
    lg = make_log(tmp_path, min_compaction_lag_ms=HOUR)
    segments_of(lg, 2, ts=lambda s: NOW - 2 * HOUR)
    segments_of(lg, 2, ts=lambda s: NOW - HOUR // 2)
    o = cleanable_offsets(lg, None, NOW)
    assert o.first_uncleanable_dirty_offset == 10
    assert cleanable_offsets(lg, None, NOW + HOUR).first_uncleanable_dirty_offset == 20
    # the lag is 0: everything but the active segment
    lg.config = LogConfig(cleanup_policy="compact")
    assert cleanable_offsets(lg, None, NOW).first_uncleanable_dirty_offset == 20


def test_max_compaction_lag_makes_a_log_cleanable_whatever_its_ratio(tmp_path):
    # KIP-354: a log whose dirty records are older than max.compaction.lag.ms is cleaned now
    lg = make_log(tmp_path, min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=HOUR)
    segments_of(lg, 3, ts=lambda s: NOW - 3 * HOUR + s)
    m = manager(lg)
    assert max_compaction_delay(lg, lg.segments(), 0, NOW) == 2 * HOUR
    ltc = m.grab_filthiest_compacted_log()
    assert ltc is not None and ltc.need_compaction_now and ltc.cleanable_ratio == 1.0
    m.done_cleaning(("t", 0), os.path.dirname(lg.dir), 15)
    # with young data the ratio rules, and 0.99 is not reached... (1.0 > 0.99 is)
    lg2 = make_log(tmp_path, "u-0", min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=HOUR)
    segments_of(lg2, 1, ts=lambda s: NOW)
    assert max_compaction_delay(lg2, lg2.segments(), 0, NOW) == 0


def test_dirtiest_log_first_and_overdue_logs_before_it(tmp_path):
    a = make_log(tmp_path, "a-0", min_cleanable_dirty_ratio=0.1)
    b = make_log(tmp_path, "b-0", min_cleanable_dirty_ratio=0.1)
    c = make_log(tmp_path, "c-0", min_cleanable_dirty_ratio=0.9, max_compaction_lag_ms=HOUR)
    for lg in (a, b):
        segments_of(lg, 4)
    segments_of(c, 2, ts=lambda s: NOW - 2 * HOUR)
    segments_of(c, 2)
    d = os.path.dirname(a.dir)
    # a: half cleaned, b: a quarter; c: a quarter, below its own ratio but with dirty
    # records older than max.compaction.lag.ms
    ckpt.write_offset_checkpoint(os.path.join(d, CLEANER_OFFSET_CHECKPOINT),
                                 {("a", 0): 10, ("b", 0): 5, ("c", 0): 5})
    m = manager(a, b, c)
    order, ratios = [], []
    while (ltc := m.grab_filthiest_compacted_log()) is not None:
        order.append((ltc.log.topic, round(ltc.cleanable_ratio, 2), ltc.need_compaction_now))
        ratios.append(m.dirtiest_ratio)
    assert [o[0] for o in order] == ["c", "b", "a"]
    assert order[0][1] < 0.9 and order[0][2] and order[1][1] > order[2][1]
    assert ratios == [0.75, 0.75, 0.5]  # the dirtiest of the logs not taken yet


def test_logs_that_are_not_compacted_read_only_or_empty_are_skipped(tmp_path):
    deleting = make_log(tmp_path, "d-0", cleanup_policy="delete")
    segments_of(deleting, 2)
    empty = make_log(tmp_path, "e-0")
    ro_src = make_log(tmp_path, "r-0")
    segments_of(ro_src, 2)
    ro_src.close()
    ro = load_log(ro_src.dir, "r", 0, ro_src.config, writable=False)
    both = make_log(tmp_path, "cd-0", cleanup_policy="compact,delete")
    segments_of(both, 2)
    m = manager(deleting, empty, ro, both)
    ltc = m.grab_filthiest_compacted_log()
    assert ltc.log is both
    assert m.grab_filthiest_compacted_log() is None  # in progress now


def test_done_cleaning_writes_the_checkpoint_and_an_aborted_pass_pauses(tmp_path):
    lg = make_log(tmp_path)
    segments_of(lg, 2)
    m = manager(lg)
    d = os.path.dirname(lg.dir)
    tp = ("t", 0)
    assert m.grab_filthiest_compacted_log() is not None and m.in_progress(tp)
    m.done_cleaning(tp, d, 10)
    assert not m.in_progress(tp)
    assert ckpt.read_offset_checkpoint(os.path.join(d, CLEANER_OFFSET_CHECKPOINT)) == {tp: 10}
    # a pass that is aborted: the aborter waits, the partition stays paused
    m.begin_cleaning(tp)
    stopped = threading.Event()

    def aborter():
        m.abort_and_pause_cleaning(tp)
        stopped.set()

    th = threading.Thread(target=aborter)
    th.start()
    time.sleep(0.1)
    assert not stopped.is_set()
    with pytest.raises(LogCleaningAbortedError):
        m.check_cleaning_aborted(tp)
    m.done_cleaning(tp, d, None)
    th.join(5)
    assert stopped.is_set() and m.is_paused(tp)
    assert m.grab_filthiest_compacted_log() is None
    with pytest.raises(LogCleaningAbortedError):
        m.begin_cleaning(tp, timeout=0.05)
    m.abort_and_pause_cleaning(tp)  # pauses nest
    m.resume_cleaning([tp])
    assert m.is_paused(tp)
    m.resume_cleaning([tp])
    assert not m.is_paused(tp)
    with pytest.raises(ValueError, match="not paused"):
        m.resume_cleaning([tp])
    with m.paused(tp):
        with pytest.raises(LogCleaningAbortedError):
            m.begin_cleaning(tp, timeout=0.05)
    m.begin_cleaning(tp, timeout=0.05)
    m.done_cleaning(tp, d, None)
    assert ckpt.read_offset_checkpoint(os.path.join(d, CLEANER_OFFSET_CHECKPOINT)) == {tp: 10}


def test_abort_cleaning_stops_a_running_pass(tmp_path):
    lg = make_log(tmp_path, segment_bytes=4000, min_cleanable_dirty_ratio=0.0)
    for i in range(12000):
        lg.append([(NOW, b"k%d" % (i % 100), b"v" * 100, ())])
    lg.roll()
    lg.append([(NOW, b"x", b"y", ())])
    cl = LogCleaner(CleanerConfig(dedupe_buffer_size=1 << 20, max_io_bytes_per_second=3e5),
                    [os.path.dirname(lg.dir)], {("t", 0): lg}, clock=lambda: NOW)
    out = []
    th = threading.Thread(target=lambda: out.append(cl.clean_log(lg)))
    th.start()
    time.sleep(0.3)
    cl.manager.abort_cleaning(("t", 0))
    th.join(30)
    assert out and out[0].aborted
    assert not cl.manager.is_paused(("t", 0)) and not cl.manager.in_progress(("t", 0))
    assert not [n for n in os.listdir(lg.dir) if n.endswith((".cleaned", ".swap"))]


def test_uncleanable_backoff_doubles_up_to_the_cap_and_a_config_change_resets_it(tmp_path):
    lg = make_log(tmp_path)
    segments_of(lg, 2)
    clock = [NOW]
    m = manager(lg, backoff_ms=15_000, clock=lambda: clock[0])
    tp = ("t", 0)
    delays = []
    for _ in range(12):
        info = m.mark_uncleanable(tp, lg, "boom")
        delays.append(info.retry_at_ms - clock[0])
        assert m.is_uncleanable(tp, lg)
        clock[0] = info.retry_at_ms - 1
        assert m.is_uncleanable(tp, lg)
        clock[0] = info.retry_at_ms
        assert not m.is_uncleanable(tp, lg)  # retried now
    assert delays[:8] == [15_000 * 2 ** i for i in range(8)]
    assert delays[8:] == [MAX_RETRY_BACKOFF_MS] * 4
    assert info.failures == 12 and info.since_ms == NOW and info.error == "boom"
    info = m.mark_uncleanable(tp, lg, "again")
    lg.config = LogConfig(cleanup_policy="compact", segment_bytes=100_001)
    assert not m.is_uncleanable(tp, lg)  # the config changed
    assert m.mark_uncleanable(tp, lg, "x").failures == 1
    # a partition that is gone is forgotten
    m._logs = {}
    m.maintain_uncleanable_partitions()
    assert m.uncleanable(tp) is None


def test_partition_status(tmp_path):
    lg = make_log(tmp_path)
    segments_of(lg, 4)
    d = os.path.dirname(lg.dir)
    cl = LogCleaner(CleanerConfig(dedupe_buffer_size=1 << 20), [d], {("t", 0): lg},
                    clock=lambda: NOW)
    st = cl.status(lg)
    assert (st.cleanup_policy, st.compact, st.first_dirty_offset, st.first_uncleanable_offset,
            st.dirty_ratio, st.in_progress, st.uncleanable, st.last_result) == \
        ("compact", True, 0, 20, 1.0, False, None, None)
    result = cl.clean_log(lg)
    assert result.ok
    st = cl.status(lg)
    assert st.first_dirty_offset == 20 and st.dirty_ratio == 0.0
    assert st.last_result == result and result.end_offset == 20
    assert "Cleaned t-0 (dirty section [0, 20))" in result.log_line()
    d = result.to_dict()
    assert d["records_dropped"] == result.records_read - result.records_written == 15
    assert d["mb_per_sec"] >= 0


def test_checkpoints_of_several_log_dirs_and_removed_partitions(tmp_path):
    a = make_log(tmp_path, "a-0")
    other = tmp_path / "other"
    (other / "b-0").mkdir(parents=True)
    b = load_log(str(other / "b-0"), "b", 0, LogConfig(cleanup_policy="compact"))
    for lg in (a, b):
        segments_of(lg, 2)
    logs = {("a", 0): a, ("b", 0): b}
    m = LogCleanerManager([os.path.dirname(a.dir), str(other)], logs, clock=lambda: NOW)
    m.done_cleaning(("a", 0), os.path.dirname(a.dir), None)  # not in progress: no-op
    for tp, lg in logs.items():
        m.begin_cleaning(tp)
        m.done_cleaning(tp, m.log_dir_of(lg), 7)
    assert ckpt.read_offset_checkpoint(str(other / CLEANER_OFFSET_CHECKPOINT)) == \
        {("b", 0): 7}
    assert m.all_cleaner_checkpoints() == {("a", 0): 7, ("b", 0): 7}
    del logs[("b", 0)]
    m.remove_partition(("b", 0))
    assert ckpt.read_offset_checkpoint(str(other / CLEANER_OFFSET_CHECKPOINT)) == {}
    # a garbled checkpoint reads as empty
    (other / CLEANER_OFFSET_CHECKPOINT).write_text("garbage\n")
    m2 = LogCleanerManager([str(other)], {}, clock=lambda: NOW)
    assert m2.all_cleaner_checkpoints() == {}
