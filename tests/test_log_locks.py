"""An append never waits for the file work of the cleaner's swap or of retention
(docs/design.md §6.4): the renames to ``.swap``/``.deleted``, the unlinks and the directory
fsync run outside ``Log.lock``.

Each test holds one such step still (a rename or fsync that blocks until released, in a
worker thread) and requires that an append, a read and the log's offsets answer meanwhile,
then that the step finishes the change on disk as before.
"""

from __future__ import annotations

import os
import threading

import pytest

from kafkafs.log import safeio
from kafkafs.log.cleaner import CleanerConfig, LogCleaner
from kafkafs.log.config import LogConfig
from kafkafs.log.loader import load_log
from kafkafs.log.names import DELETED_SUFFIX, SWAP_SUFFIX

NOW = 1_700_000_000_000
WAIT = 10.0  # s: what a stuck step may take before the test gives up on it


class Gate:
    """Make the first call of ``safeio.Dir.<method>`` that ``match(args)`` selects block
    until :meth:`open` (the others pass)."""

    def __init__(self, monkeypatch, method: str, match):
        self.reached = threading.Event()
        self._open = threading.Event()
        self._done = False
        real = getattr(safeio.Dir, method)

        def gated(d, *args, **kw):
            if not self._done and match(args):
                self._done = True
                self.reached.set()
                assert self._open.wait(WAIT), "the gate was never opened"
            return real(d, *args, **kw)

        monkeypatch.setattr(safeio.Dir, method, gated)

    def open(self) -> None:
        self._open.set()


def in_thread(fn, *args):
    """Run ``fn(*args)`` in a thread; returns (thread, result dict)."""
    out: dict = {}

    def run():
        try:
            out["value"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - the test looks at it
            out["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def must_finish(fn, *args, timeout=3.0):
    """``fn(*args)`` in a thread, which must finish within ``timeout`` seconds: a call
    that waits for the held step fails the test."""
    t, out = in_thread(fn, *args)
    t.join(timeout)
    assert not t.is_alive(), f"{fn.__name__} waited for the held rename or fsync"
    if "error" in out:
        raise out["error"]
    return out.get("value")


def make_log(tmp_path, **cfg):
    d = tmp_path / "logs" / "t-0"
    d.mkdir(parents=True)
    conf = {"segment_bytes": 1024, "index_interval_bytes": 100, "file_delete_delay_ms": 60_000}
    conf.update(cfg)
    return load_log(str(d), "t", 0, LogConfig(**conf))


def fill(lg, n, keys=20):
    for i in range(n):
        lg.append([(NOW + i, b"k%02d" % (i % keys), b"value-%06d" % i, ())])


def values(lg):
    return [(r.offset, r.value) for r in lg.records()]


# -- the cleaner's swap -----------------------------------------------------------------------
SWAP_STEPS = {
    # step 1: a new segment's .cleaned file renamed .swap
    "cleaned-to-swap": ("rename", lambda a: a[1].endswith(".log" + SWAP_SUFFIX)),
    # step 3: an old segment renamed .deleted
    "old-to-deleted": ("rename", lambda a: a[1].endswith(".log" + DELETED_SUFFIX)),
    # step 4: the .swap suffix removed
    "swap-to-live": ("rename", lambda a: a[0].endswith(".log" + SWAP_SUFFIX)),
    # step 4: the directory fsync
    "dir-fsync": ("fsync", lambda a: True),
}


@pytest.mark.parametrize("step", sorted(SWAP_STEPS))
def test_an_append_does_not_wait_for_the_swaps_file_work(tmp_path, monkeypatch, step):
    lg = make_log(tmp_path, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0)
    fill(lg, 300)
    lg.roll()
    lg.append([(NOW, b"tail", b"t", ())])
    before = {r.key: r.value for r in lg.records()}
    size_before = lg.size_in_bytes()
    cl = LogCleaner(CleanerConfig(dedupe_buffer_size=1 << 20), [os.path.dirname(lg.dir)],
                    {("t", 0): lg}, clock=lambda: NOW)
    method, match = SWAP_STEPS[step]
    gate = Gate(monkeypatch, method, match)
    cleaning, out = in_thread(lambda: cl.clean_log(lg, now=NOW))
    try:
        assert gate.reached.wait(WAIT), f"the pass never reached {step}"
        first, _ = must_finish(lg.append, [(NOW, b"k00", b"during", ())])
        assert must_finish(lg.read_record, first).value == b"during"
        must_finish(lg.roll)
        got = {r.key: r.value for r in must_finish(list, lg.records())}
        assert got == {**before, b"k00": b"during"}
    finally:
        gate.open()
        cleaning.join(WAIT)
    assert not cleaning.is_alive()
    assert "error" not in out and out["value"].ok, out
    assert lg.size_in_bytes() < size_before / 2  # the swaps happened
    assert {r.key: r.value for r in lg.records()} == {**before, b"k00": b"during"}
    names = os.listdir(lg.dir)
    assert not [n for n in names if n.endswith((SWAP_SUFFIX, ".cleaned"))], names
    assert [n for n in names if n.endswith(DELETED_SUFFIX)]  # removed when due
    assert lg.remove_deleted_segments(force=True) > 0
    assert not [n for n in os.listdir(lg.dir) if n.endswith(DELETED_SUFFIX)]
    lg.close()
    again = load_log(lg.dir, "t", 0, lg.config)
    assert {r.key: r.value for r in again.records()} == {**before, b"k00": b"during"}
    again.close()


# -- retention ------------------------------------------------------------------------------
def test_an_append_does_not_wait_for_retention_renames(tmp_path, monkeypatch):
    lg = make_log(tmp_path, cleanup_policy="delete", retention_bytes=2048)
    fill(lg, 300)
    end = lg.log_end_offset
    first_base = lg.segments()[0].base_offset
    gate = Gate(monkeypatch, "rename", lambda a: a[1].endswith(".log" + DELETED_SUFFIX))
    deleting, out = in_thread(lg.delete_old_segments, NOW)
    try:
        assert gate.reached.wait(WAIT), "retention renamed nothing"
        # the map changed first: the log start offset moved, the segment is no longer read
        start = lg.log_start_offset
        assert start > first_base
        first, _ = must_finish(lg.append, [(NOW, b"k", b"during", ())])
        assert first == end
        got = must_finish(values, lg)
        assert got[0][0] == start and got[-1] == (end, b"during")
        # the file still has its live name: the watcher's adoption must not take it back
        assert os.path.exists(os.path.join(lg.dir, f"{first_base:020d}.log"))
        assert must_finish(lg.adopt_segment, first_base) is False
    finally:
        gate.open()
        deleting.join(WAIT)
    assert not deleting.is_alive() and "error" not in out, out
    assert out["value"] > 1
    assert lg.log_start_offset == start
    names = os.listdir(lg.dir)
    assert f"{first_base:020d}.log{DELETED_SUFFIX}" in names
    assert f"{first_base:020d}.log" not in names
    assert lg.remove_deleted_segments(force=True) == out["value"]
    assert not [n for n in os.listdir(lg.dir) if n.endswith(DELETED_SUFFIX)]
    lg.close()


def test_a_reader_in_a_segment_retention_removes_reads_on_or_ends_quietly(tmp_path):
    lg = make_log(tmp_path, cleanup_policy="delete", retention_bytes=2048)
    fill(lg, 300)
    walk = lg.segment_batches()
    seen = [next(walk)[1].base_offset]
    assert lg.delete_old_segments(NOW) > 1
    seen += [b.base_offset for _s, b in walk]  # the .deleted files are still open
    assert seen == sorted(seen) and seen[0] == 0
    walk = lg.segment_batches(0)
    next(walk)
    lg.remove_deleted_segments(force=True)
    rest = [b.base_offset for _s, b in walk]  # closed under it: ends, or reads on
    assert rest == sorted(rest)
    lg.close()


def test_close_waits_for_a_retention_pass_and_removes_what_it_renamed(tmp_path, monkeypatch):
    lg = make_log(tmp_path, cleanup_policy="delete", retention_bytes=2048)
    fill(lg, 300)
    gate = Gate(monkeypatch, "rename", lambda a: a[1].endswith(".log" + DELETED_SUFFIX))
    deleting, out = in_thread(lg.delete_old_segments, NOW)
    assert gate.reached.wait(WAIT)
    closing, _ = in_thread(lg.close)
    closing.join(0.3)
    assert closing.is_alive()  # it waits for the renames, not the other way round
    gate.open()
    deleting.join(WAIT)
    closing.join(WAIT)
    assert not closing.is_alive() and "error" not in out, out
    names = os.listdir(lg.dir)
    assert not [n for n in names if n.endswith(DELETED_SUFFIX)], names
