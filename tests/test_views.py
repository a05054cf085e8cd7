"""Byte-addressed views (messages, records.jsonl) over a log, without FUSE."""

from __future__ import annotations

import json
import os
import random
import weakref

from kafkafs.fs import views
from kafkafs.fs.views import LineView, measure_messages, render_jsonl, render_messages
from kafkafs.log.config import LogConfig
from kafkafs.log.loader import load_log
from kafkafs.record import control
from kafkafs.record.batch import encode_batch


def make_log(d, **cfg):
    part = os.path.join(d, "t-0")
    os.makedirs(part, exist_ok=True)
    return load_log(part, "t", 0, LogConfig(**cfg), had_clean_shutdown=True)


def expected_messages(lg):
    return b"".join((b"null" if r.value is None else r.value) + b"\n" for r in lg.records())


def test_messages_view_matches_records_at_every_position(log_dir, monkeypatch):
    monkeypatch.setattr(views, "MARK_BYTES", 300)
    lg = make_log(log_dir, segment_bytes=2000)
    rnd = random.Random(7)
    for i in range(120):
        n = rnd.randint(1, 5)
        lg.append([(1000 + i, None, None if rnd.random() < 0.05 else
                    b"v%d-" % i + b"x" * rnd.randint(0, 80), ()) for _ in range(n)])
    v = LineView(lg, render_messages, measure_messages)
    want = expected_messages(lg)
    assert v.refresh() == len(want)
    assert len(lg.segments()) > 3
    for _ in range(300):
        off = rnd.randrange(0, len(want) + 10)
        size = rnd.randint(1, 2000)
        assert v.read(off, size) == want[off:off + size]
    # sequential reads as cat does
    got = b""
    while True:
        chunk = v.read(len(got), 4096)
        if not chunk:
            break
        got += chunk
    assert got == want
    # growth
    lg.append([(5000, None, b"new", ())])
    assert v.refresh() == len(want) + 4
    assert v.read(len(want), 100) == b"new\n"
    lg.close()


def test_view_shifts_after_retention(log_dir):
    lg = make_log(log_dir, segment_bytes=500, retention_bytes=1000, file_delete_delay_ms=0)
    for i in range(40):
        lg.append([(1000 + i, None, b"record-%03d" % i, ())])
    v = LineView(lg, render_messages, measure_messages)
    v.refresh()
    gen = v.generation
    assert lg.delete_old_segments(now=2000) > 0
    want = expected_messages(lg)
    assert v.refresh() == len(want)
    assert v.read(0, 10**6) == want
    assert v.generation > gen
    lg.close()


def test_jsonl_view(log_dir):
    lg = make_log(log_dir)
    lg.append([(1, b"k", b"caf\xc3\xa9", [("h", b"\xff")]), (2, None, b"\x00\xff", ())])
    v = LineView(lg, render_jsonl)
    v.refresh()
    lines = v.read(0, 10**6).decode().splitlines()
    a, b = (json.loads(x) for x in lines)
    assert a == {"offset": 0, "timestamp": 1, "timestamp_type": "CreateTime", "key": "k",
                 "value": "café", "headers": [{"key": "h", "value": {"base64": "/w=="}}]}
    assert b["value"] == {"base64": "AP8="} and b["key"] is None
    lg.close()


def test_marks_survive_a_restart_and_changed_segments_are_rescanned(log_dir, monkeypatch):
    monkeypatch.setattr(views, "MARK_BYTES", 300)
    lg = make_log(log_dir, segment_bytes=1500)
    for i in range(80):
        lg.append([(1000 + i, None, b"value-%03d-" % i + b"x" * (i % 40), ())])
    v = LineView(lg, render_messages, measure_messages)
    v.refresh()
    state = v.export_state()
    want = expected_messages(lg)
    # a new view adopts the marks and measures nothing
    measured = []
    w = LineView(lg, render_messages, lambda b: measured.append(b) or measure_messages(b))
    assert w.import_state(state)
    assert w.refresh() == len(want) and not measured
    assert w.read(0, 10**6) == want
    # the active segment grew: its marks are dropped and only it is scanned again
    lg.append([(5000, None, b"more", ())])
    active = lg.active_segment.base_offset
    measured.clear()
    x = LineView(lg, render_messages, lambda b: measured.append(b) or measure_messages(b))
    assert x.import_state(state)
    assert x.refresh() == len(want) + 5
    assert measured and all(b.base_offset >= active for b in measured)
    assert x.read(0, 10**6) == want + b"more\n"
    # a log whose start moved on does not take them at all
    state["start_offset"] = 999
    assert not LineView(lg, render_messages, measure_messages).import_state(state)
    lg.close()


def _chunked_log(log_dir, monkeypatch, n=200):
    monkeypatch.setattr(views, "MARK_BYTES", 400)
    lg = make_log(log_dir, segment_bytes=3000)
    for i in range(n):
        lg.append([(1000 + i, None, b"rec-%04d-" % i + b"y" * (i % 50), ()) for _ in range(3)])
    return lg


def test_zero_copy_reads_are_views_of_the_cached_chunk(log_dir, monkeypatch):
    lg = _chunked_log(log_dir, monkeypatch)
    v = LineView(lg, render_messages, measure_messages)
    want = expected_messages(lg)
    v.refresh()
    assert v.read(0, 1000) == want[:1000]
    piece = v.read(10, 100, zero_copy=True)
    assert isinstance(piece, memoryview) and piece == want[10:110]
    assert isinstance(v.read(10, 100), bytes)
    # a read across chunks is joined into bytes
    across = v.read(0, 3000, zero_copy=True)
    assert isinstance(across, bytes) and across == want[:3000]
    # cached chunks serve reads without rendering again
    monkeypatch.setattr(v, "_render_chunk", None)
    assert v.read(0, 1000, zero_copy=True) == want[:1000]
    lg.close()


def test_a_read_goes_on_past_a_chunk_that_renders_as_nothing(log_dir):
    """read_committed: a chunk holding only an aborted transaction (or only control
    records) renders as nothing; a read across it must go on to the next chunk, not come
    back short (a short read in the middle of ``messages`` ends ``cat`` there)."""
    lg = make_log(log_dir)
    lg.append([(1000, None, b"before", ())])
    lg.roll()  # a segment starts a chunk: this one holds the transaction and its marker
    lg.append_encoded(bytearray(encode_batch(
        [(1001, None, b"aborted %d" % i, ()) for i in range(50)], producer_id=9,
        producer_epoch=0, base_sequence=0, is_transactional=True)))
    lg.append_encoded(bytearray(control.encode_end_txn_marker_batch(
        control.ABORT, base_offset=0, timestamp=1002, producer_id=9, producer_epoch=0,
        coordinator_epoch=0)))
    lg.roll()
    lg.append([(1003, None, b"after", ())])
    v = LineView(lg, render_messages, measure_messages, committed=True)
    assert v.refresh() == len(b"before\nafter\n")
    assert len(v._pos) == 3  # the aborted transaction has a chunk of its own
    assert v.read(0, 4096) == b"before\nafter\n"
    assert v.read(3, 4096) == b"ore\nafter\n"
    lg.close()


def test_the_background_measurer_follows_a_view_it_began_while_appends_outrun_it(
        log_dir, monkeypatch):
    """fs.measure: a view the measurer began while its unmeasured part was small is followed
    to the log end on later passes even when appends made the rest larger than
    UNMEASURED_LIMIT meanwhile (an 8 GB partition written through the mount at 200 MB/s
    stayed at size 0); a view it never began and that is too large is left alone."""
    import trio

    from kafkafs.fs import measure

    monkeypatch.setattr(measure, "UNMEASURED_LIMIT", 1000)
    monkeypatch.setattr(measure, "MEASURE_STEP_BYTES", 100)
    monkeypatch.setattr(views, "MARK_BYTES", 50)
    lg = make_log(log_dir)
    line = [(1000, None, b"x" * 19, ())]  # 20 bytes of messages each
    for _ in range(40):
        lg.append(line)  # 800 bytes of view, ~2.8 KB of segment: over the limit in log bytes
    v = LineView(lg, render_messages, measure_messages)
    monkeypatch.setattr(measure, "UNMEASURED_LIMIT", v.unmeasured_bytes())
    real_step = v.measure_step

    def outrun(max_bytes):  # appends land faster than the steps measure
        for _ in range(10):
            lg.append(line)
        return real_step(max_bytes)

    v.measure_step = outrun
    begun = weakref.WeakSet()
    trio.run(measure._measure_view, v, begun)
    assert not v.is_current() and not v.ever_sized and v in begun
    assert v.unmeasured_bytes() > measure.UNMEASURED_LIMIT
    v.measure_step = real_step
    trio.run(measure._measure_view, v, begun)
    assert v.is_current() and v.size == len(expected_messages(lg))

    other = LineView(lg, render_messages, measure_messages)  # never begun, too large
    trio.run(measure._measure_view, other, weakref.WeakSet())
    assert other.end_offset is None
    trio.run(measure._measure_view, other, weakref.WeakSet(), True)  # small when first seen
    assert other.is_current()
    lg.close()


def test_the_background_measurer_sizes_partitions_that_were_small_when_first_seen(
        manager_factory, monkeypatch):
    """fs.measure.keep_views_measured: a partition small when the daemon first saw it (at
    start, or created later) is kept measured however fast it grows (it was skipped for
    good when more than UNMEASURED_LIMIT landed before the first poll); one already large
    at start is left to its readers."""
    import trio
    import trio.testing

    from kafkafs.fs import measure
    from kafkafs.fs import tree as T

    monkeypatch.setattr(measure, "UNMEASURED_LIMIT", 2000)
    monkeypatch.setattr(measure, "POLL_S", 0.01)
    m = manager_factory()
    small, large = m.create_topic("small", 1)[0], m.create_topic("large", 1)[0]
    line = [(1000, None, b"x" * 99, ())]
    for _ in range(40):
        large.append(line)

    class FS:  # what the measurer uses of KafkaFS
        manager = m
        views: dict = {}

        def view(self, topic, partition, kind):
            key = (topic, partition, kind)
            if key not in self.views:
                self.views[key] = LineView(m.get_log(topic, partition), render_messages,
                                           measure_messages)
            return self.views[key]

        def save_views(self, changed_only=False):
            return 0

    fs = FS()

    async def run():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(measure.keep_views_measured, fs, 60_000)
            await trio.testing.wait_all_tasks_blocked()  # it noted the partitions as they are
            later = m.create_topic("later", 1)[0]
            for _ in range(40):  # all past the limit before the first poll
                small.append(line)
                large.append(line)
                later.append(line)
            deadline = trio.current_time() + 10
            while not all(fs.view(t, 0, k).is_current() for t in ("small", "later")
                          for k in (T.MESSAGES, T.JSONL)):
                assert trio.current_time() < deadline
                await trio.sleep(0.01)
            await trio.sleep(0.1)
            nursery.cancel_scope.cancel()

    trio.run(run)
    assert fs.view("small", 0, T.MESSAGES).size == 40 * 100
    assert fs.view("later", 0, T.MESSAGES).size == 40 * 100
    assert fs.view("large", 0, T.MESSAGES).end_offset is None


def test_the_tail_pass_agrees_with_the_batch_walk(log_dir, monkeypatch):
    """A view kept measured as its log grows (the background measurer's steps) takes the
    tail of the active segment in one native pass (LineView._extend_tail); its size, marks
    and every byte read equal a view measured batch by batch, through compressed batches
    (not plain: the walk takes over), new segments and marks, for messages and
    records.jsonl alike."""
    from kafkafs.fs.views import measure_jsonl, render_jsonl_run
    from kafkafs.record import plain
    from kafkafs.record.compression import GZIP

    monkeypatch.setattr(views, "MARK_BYTES", 700)
    lg = make_log(log_dir, segment_bytes=6000)
    kinds = [(render_messages, measure_messages, plain.render_file_values),
             (render_jsonl, measure_jsonl, render_jsonl_run)]
    fast = [LineView(lg, r, m, render_run=run) for r, m, run in kinds]
    taken = []
    real = LineView._extend_tail
    monkeypatch.setattr(LineView, "_extend_tail",
                        lambda self, end: taken.append(real(self, end)) or taken[-1])
    rnd = random.Random(3)
    for step in range(150):
        for _ in range(rnd.randint(0, 4)):
            recs = [(1000 + step, b"k%d" % step, b"v%d-" % step + b"y" * rnd.randint(0, 60),
                     ()) for _ in range(rnd.randint(1, 3))]
            lg.append(recs, compression=GZIP if rnd.random() < 0.1 else None)
        for v in fast:
            v.measure_step(rnd.choice([100, 5000]))
    assert any(taken) and not all(taken)
    monkeypatch.setattr(LineView, "_extend_tail", lambda self, end: False)
    for v, (r, m, run) in zip(fast, kinds):
        v.refresh()
        slow = LineView(lg, r, m, render_run=run)
        slow.refresh()
        assert v.size == slow.size and v.end_offset == slow.end_offset == lg.log_end_offset
        ends = list(v._pos) + [v.size]  # a chunk per mark stays about MARK_BYTES long
        assert max(b - a for a, b in zip(ends, ends[1:])) <= 4 * views.MARK_BYTES
        whole = slow.read(0, slow.size + 10)
        assert v.read(0, v.size + 10) == whole and len(whole) == v.size
        for _ in range(100):
            off = rnd.randrange(0, v.size + 5)
            assert v.read(off, 900) == whole[off:off + 900]
    assert len(lg.segments()) > 3
    lg.close()


def test_the_tail_pass_leaves_damage_to_the_batch_walk(log_dir):
    """A batch of the active segment's tail whose CRC is wrong: the tail pass takes
    nothing and the walk stops the view there with the located error, as it would
    without the pass."""
    from kafkafs.record import plain

    lg = make_log(log_dir)
    lg.append([(1, None, b"first", ())])
    v = LineView(lg, render_messages, measure_messages, render_run=plain.render_file_values)
    v.refresh()
    _first, last = lg.append([(2, None, b"second", ())])
    lg.append([(3, None, b"third", ())])
    seg = lg.active_segment
    pos = lg.end_position()[2] - 3  # inside the last batch's value
    with open(seg.log_path, "r+b") as f:
        f.seek(pos)
        f.write(b"XYZ")
    v.refresh()
    assert v.damage is not None and v.end_offset == last + 1
    assert v.read(0, 100) == b"first\nsecond\n"
    lg.close()


def test_translate_offset_from_the_latest_appends_finds_what_the_index_walk_finds(log_dir):
    """LogSegment remembers where its latest appends went, so a consumer at the log end
    reads from there instead of walking from the index's floor entry: every offset finds
    the same batch with and without that memory, also after a truncation."""
    lg = make_log(log_dir, index_interval_bytes=1 << 20)
    rnd = random.Random(5)

    def check(end):
        seg = lg.active_segment
        for off in range(seg.base_offset, end + 1):
            hinted = seg.translate_offset(off)
            saved = list(seg._appended)
            seg._appended.clear()
            walked = seg.translate_offset(off)
            seg._appended.extend(saved)
            assert (hinted and (hinted.position, hinted.base_offset)) == \
                (walked and (walked.position, walked.base_offset))

    for i in range(60):
        lg.append([(i, None, b"x" * rnd.randint(0, 40), ()) for _ in range(rnd.randint(1, 3))])
    assert len(lg.active_segment._appended) == 16
    check(lg.log_end_offset)
    cut = lg.log_end_offset - 20
    lg.active_segment.truncate_to(cut)  # (the segment alone: what a truncation does to it)
    assert not lg.active_segment._appended
    check(cut)
    lg.close()


def test_translate_offset_steps_over_large_batches_by_their_headers(log_dir, monkeypatch):
    """Batches larger than a lookup's read that end below the offset looked up are stepped
    over by their headers (not read whole): the same batch is found for every offset, and
    offsets that go back after such batches are still damage."""
    import pytest

    from kafkafs.log.segment import LogSegment
    from kafkafs.record.errors import CorruptRecordError

    lg = make_log(log_dir, index_interval_bytes=1 << 22)
    for i in range(12):
        lg.append([(i, None, b"%d" % i + b"z" * 40_000, ())] * (1 + i % 3))
    seg = lg.active_segment
    real = LogSegment._skip_large_before

    def found(off, skip):
        if not skip:
            monkeypatch.setattr(LogSegment, "_skip_large_before",
                                lambda self, pos, o, lim: (pos, None))
        try:
            b = seg.translate_offset(off)
            return b and (b.position, b.base_offset)
        finally:
            monkeypatch.setattr(LogSegment, "_skip_large_before", real)

    for off in range(lg.log_end_offset + 1):
        assert found(off, True) == found(off, False)
    # a large batch whose offsets go back, written behind the log's back, read by a reader
    end, path = lg.log_end_offset, seg.log_path
    lg.close()
    with open(path, "ab") as f:
        f.write(encode_batch([(99, None, b"q" * 40_000, ())], base_offset=3))
    reader = LogSegment(os.path.dirname(path), 0, LogConfig(index_interval_bytes=1 << 22),
                        writable=False)
    with pytest.raises(CorruptRecordError, match="offsets go back"):
        reader.translate_offset(end + 5)
