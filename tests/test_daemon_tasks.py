"""The daemon's background tasks (kafkafs/core/tasks.py, Kafka's LogManager scheduler
jobs) at work inside a running mount: retention with its delayed file removal and the
log-start-offset checkpoint, and the flush scheduler with the recovery-point checkpoint.
Each is watched from outside, in the log dir and through the mount, while the daemon runs;
a mount with Kafka's defaults is the control where the task must not have run yet."""

from __future__ import annotations

import os
import time

import pytest
from conftest import needs_fuse

from kafkafs.log.checkpoint import read_offset_checkpoint

pytestmark = needs_fuse


def _overrides(**props) -> list[str]:
    out = []
    for k, v in props.items():
        out += ["--override", f"{k.replace('_', '.')}={v}"]
    return out


def _checkpoint(path: str) -> dict[tuple[str, int], int]:
    """The offsets of a Kafka offset checkpoint file; {} before it is first written."""
    return read_offset_checkpoint(path) if os.path.exists(path) else {}


def _append_lines(m, topic: str, lines: list[bytes]) -> None:
    """One write (so one batch) per line, as ``echo >>`` in a loop would."""
    fd = os.open(m.path(topic, "0", "append"), os.O_WRONLY | os.O_APPEND)
    try:
        for line in lines:
            os.write(fd, line + b"\n")
    finally:
        os.close(fd)


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_retention_runs_in_the_daemon_and_files_go_after_the_delay(mount_factory, tmp_path):
    """With retention.bytes and a short log.retention.check.interval.ms, the running daemon
    deletes the oldest segments (never the active one): ``messages`` then starts at the new
    log start offset with exactly the lines from there on; the files are first renamed
    ``.deleted`` and stay for file.delete.delay.ms, then go; log-start-offset-checkpoint
    shows the new start while the daemon still runs."""
    m = mount_factory(extra_args=_overrides(
        log_segment_bytes=2000, log_retention_bytes=5000,
        log_retention_check_interval_ms=300, log_segment_delete_delay_ms=1500,
        log_flush_start_offset_checkpoint_interval_ms=300))
    os.mkdir(m.path("t"))
    lines = [b"line-%04d-" % i + b"x" * 40 for i in range(300)]
    _append_lines(m, "t", lines)
    pdir = os.path.join(m.log_dirs[0], "t-0")
    ckpt = os.path.join(m.log_dirs[0], "log-start-offset-checkpoint")

    def trimmed():
        """The partition dir once a retention pass after the last append has run: some
        segments renamed ``.deleted`` and every log byte left in segments retention may
        keep, plus the active one. A pass may already have run while the appends went on
        (the interval is 300 ms), so the first ``.deleted`` alone does not say the log is
        trimmed; a daemon whose retention never trims to the limit times out here."""
        try:
            names = os.listdir(pdir)
            live = sorted(n for n in names if n.endswith(".log"))
            sizes = [os.path.getsize(os.path.join(pdir, n)) for n in live]
        except FileNotFoundError:  # a segment renamed between the listing and its stat
            return None
        deleted = [n for n in names if n.endswith(".deleted")]
        if any(n.endswith(".log.deleted") for n in deleted) and sum(sizes[:-1]) <= 5000:
            return deleted, live
        return None

    deleted, live = _wait(trimmed, 10, "retention to trim the log to retention.bytes")
    with open(m.path("t", "0", "messages"), "rb") as f:
        shown = f.read().splitlines()
    start = int(shown[0].split(b"-")[1])
    assert start > 0 and shown == lines[start:]
    assert int(live[0].split(".")[0]) == start  # the oldest segment left starts the log
    assert sorted(n for n in os.listdir(m.path("t", "0", "segments"))
                  if n.endswith(".log")) == live

    # the checkpoint task writes the new log start offset while the daemon runs
    _wait(lambda: _checkpoint(ckpt).get(("t", 0)) == start, 10,
          f"log-start-offset-checkpoint to show {start}")
    # file.delete.delay.ms: the renamed files are still there a moment later, then gone
    first_seen = time.monotonic()
    assert [n for n in os.listdir(pdir) if n in deleted]
    _wait(lambda: not [n for n in os.listdir(pdir) if n.endswith(".deleted")], 10,
          ".deleted files to be removed")
    assert time.monotonic() - first_seen > 0.3  # not at once: the delay is honoured
    assert m.umount() == 0


def test_retention_waits_for_its_interval(mount_factory):
    """The control: with Kafka's default log.retention.check.interval.ms (5 minutes) the
    same log keeps every segment while the test watches."""
    m = mount_factory(extra_args=_overrides(log_segment_bytes=2000, log_retention_bytes=5000))
    os.mkdir(m.path("t"))
    lines = [b"line-%04d-" % i + b"x" * 40 for i in range(300)]
    _append_lines(m, "t", lines)
    time.sleep(2.5)
    pdir = os.path.join(m.log_dirs[0], "t-0")
    assert not [n for n in os.listdir(pdir) if n.endswith(".deleted")]
    with open(m.path("t", "0", "messages"), "rb") as f:
        assert f.read().splitlines() == lines
    assert m.umount() == 0


@pytest.mark.parametrize("scheduled", [True, False])
def test_flush_scheduler_advances_the_recovery_point_checkpoint(mount_factory, scheduled):
    """log.flush.interval.ms makes the flush scheduler fsync the log and move its recovery
    point; the checkpoint task writes it to recovery-point-offset-checkpoint while the
    daemon runs, so a kill -9 afterwards recovers nothing below it. With Kafka's defaults
    (no time-based flush, the checkpoint once a minute) the checkpoint stays behind."""
    props = {"log_flush_offset_checkpoint_interval_ms": 300}
    if scheduled:
        props.update(log_flush_interval_ms=200, log_flush_scheduler_interval_ms=100)
    m = mount_factory(extra_args=_overrides(**props))
    os.mkdir(m.path("t"))
    lines = [b"r%03d" % i for i in range(50)]
    _append_lines(m, "t", lines)
    ckpt = os.path.join(m.log_dirs[0], "recovery-point-offset-checkpoint")
    if scheduled:
        _wait(lambda: _checkpoint(ckpt).get(("t", 0)) == 50, 10,
              "recovery-point-offset-checkpoint to reach the log end offset 50")
    else:
        time.sleep(2.5)
        assert _checkpoint(ckpt).get(("t", 0), 0) < 50
    m.kill9()
    m.start()
    with open(m.path("t", "0", "messages"), "rb") as f:
        assert f.read().splitlines() == lines


def test_a_failing_cleaner_does_not_take_the_daemon_down(caplog):
    """An unexpected error from the cleaner (not a failed pass: those are results) is
    logged and the loop tries again after log.cleaner.backoff.ms; shutdown still reaches
    the cleaner."""
    import types

    import trio

    from kafkafs.core import tasks

    calls = []

    class Cleaner:
        config = types.SimpleNamespace(num_threads=2, backoff_ms=10)
        manager = None
        stopped = False

        def clean_filthiest(self):
            calls.append(1)
            raise RuntimeError("boom")

        def shutdown(self):
            self.stopped = True

    cleaner = Cleaner()
    manager = types.SimpleNamespace(logs={}, config=types.SimpleNamespace(log_dirs=[]))

    async def main():
        with trio.move_on_after(0.3):
            await tasks.cleaner_task(manager, cleaner)

    trio.run(main)
    assert len(calls) >= 4  # both loops went on after the error
    assert cleaner.stopped
    assert "The log cleaner failed" in caplog.text
