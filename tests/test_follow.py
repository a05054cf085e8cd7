"""A read-only mount beside a live broker: a second process plays the broker (appends
batches, rolls segments, deletes old ones by retention) while ``tail -f messages`` and
``cat offset/N`` run on the mount."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import ROOT

from kafkafs.log.log import now_ms


def _broker_script() -> str:
    # a broker of kafkafs's own log engine, in its own process, holding the log dir lock
    return textwrap.dedent("""
        import os, sys, time
        from kafkafs.log.config import BrokerConfig
        from kafkafs.log.manager import LogManager

        logs, state, total = sys.argv[1], sys.argv[2], int(sys.argv[3])
        cfg = BrokerConfig.from_properties({
            "log.segment.bytes": "4096", "file.delete.delay.ms": "0"}).with_log_dirs([logs])
        m = LogManager(cfg)
        m.startup()
        m.create_topic("live", 1)
        lg = m.get_log("live", 0)

        def say(text):
            with open(state + ".tmp", "w") as f:
                f.write(text)
            os.replace(state + ".tmp", state)

        i = 0
        now = lambda: int(time.time() * 1000)
        lg.append([(now(), None, b"line-%05d" % i, ()) for i in range(50)]); i = 50
        lg.flush()
        say("started")
        while not os.path.exists(state + ".go"):
            time.sleep(0.02)
        while i < total:
            lg.append([(now(), None, b"line-%05d" % j, ()) for j in range(i, i + 25)])
            i += 25
            lg.flush()
            if i % 500 == 0:
                # retention: keep about 12 KB, the oldest segments go
                m.alter_topic_config("live", {"retention.bytes": "12000"})
                lg.delete_old_segments()
                lg.remove_deleted_segments(force=True)
            time.sleep(0.01)
        say(f"done {lg.log_start_offset} {lg.log_end_offset}")
        m.shutdown()
    """)


def _wait_for(path, prefix, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                text = f.read()
            if text.startswith(prefix):
                return text
        except FileNotFoundError:
            pass
        time.sleep(0.02)
    raise AssertionError(f"broker never said {prefix!r}")


def _read_offset(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        return exc.errno


@pytest.mark.slow
def test_read_only_mount_follows_a_live_broker(mount_factory, tmp_path):
    logs = str(tmp_path / "logs")
    os.makedirs(logs)
    state = str(tmp_path / "broker.state")
    total = 2000
    broker = subprocess.Popen([sys.executable, "-c", _broker_script(), logs, state,
                               str(total)], cwd=ROOT)
    try:
        _wait_for(state, "started")
        m = mount_factory(extra_args=["--read-only"])
        msg = m.path("live", "0", "messages")
        assert open(msg, "rb").read().splitlines() == [b"line-%05d" % i for i in range(50)]
        tail = subprocess.Popen(["tail", "-n", "+1", "-F", "-s", "0.05", msg],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        open(state + ".go", "w").close()
        seen_values, seen_gone = 0, 0
        deadline = time.monotonic() + 120
        while not open(state).read().startswith("done"):
            assert time.monotonic() < deadline, "the broker did not finish"
            # point reads while the broker appends and deletes: the right value, or ENOENT
            # for an offset retention removed (or not written yet) — never other bytes
            names = os.listdir(m.path("live", "0", "offset"))
            for name in (names[:1] + names[-1:]) if names else []:
                got = _read_offset(m.path("live", "0", "offset", name))
                if isinstance(got, bytes):
                    assert got == b"line-%05d" % int(name)
                    seen_values += 1
                else:
                    assert got == errno.ENOENT
                    seen_gone += 1
            time.sleep(0.05)
        start, end = map(int, open(state).read().split()[1:])
        assert end == total and start > 0  # retention ran under the mount
        assert broker.wait(30) == 0
        # the mount catches up: messages holds exactly the broker's log
        want = b"".join(b"line-%05d\n" % i for i in range(start, end))
        deadline = time.monotonic() + 10
        while open(msg, "rb").read() != want:
            assert time.monotonic() < deadline, "messages never caught up with the broker"
            time.sleep(0.1)
        # tail -F kept going to the last line the broker wrote
        deadline = time.monotonic() + 10
        out = b""
        os.set_blocking(tail.stdout.fileno(), False)
        while not out.endswith(b"line-%05d\n" % (total - 1)):
            assert time.monotonic() < deadline, f"tail -F stopped at {out[-40:]!r}"
            out += tail.stdout.read() or b""
            time.sleep(0.05)
        lines = out.splitlines()
        assert lines[:50] == [b"line-%05d" % i for i in range(50)]
        assert set(lines) <= {b"line-%05d" % i for i in range(total)}
        # offsets retention removed are gone, the rest read right
        assert _read_offset(m.path("live", "0", "offset", "0")) == errno.ENOENT
        assert _read_offset(m.path("live", "0", "offset", str(start))) == b"line-%05d" % start
        assert _read_offset(m.path("live", "0", "offset", str(end - 1))) == \
            b"line-%05d" % (end - 1)
        assert seen_values > 0
        tail.kill()
        tail.wait(5)
        assert m.umount() == 0
    finally:
        if broker.poll() is None:
            broker.kill()
            broker.wait(10)


def test_a_poll_refreshes_only_the_logs_that_changed(manager_factory, tmp_path):
    from kafkafs.core.watcher import refresh_logs

    writer = manager_factory()
    for t in ("a", "b"):
        writer.create_topic(t, 1)
        writer.get_log(t, 0).append([(now_ms(), None, b"x", ())])
    reader = manager_factory(read_only=True)
    calls = []
    for lg in reader.logs.values():
        real = lg.refresh_from_disk
        lg.refresh_from_disk = (lambda lg=lg, real=real: calls.append(lg.topic) or real())
    seen = {}
    refresh_logs(reader, None, seen)
    assert sorted(calls) == ["a", "b"]  # the first poll looks at everything
    calls.clear()
    refresh_logs(reader, None, seen)
    assert calls == []  # nothing changed: two stats each, no refresh
    time.sleep(0.01)
    writer.get_log("b", 0).append([(now_ms(), None, b"y", ())])
    assert refresh_logs(reader, None, seen) == 1
    assert calls == ["b"]
    assert reader.get_log("b", 0).log_end_offset == 2
    # an event names a dir: it is refreshed whatever the fingerprint says
    calls.clear()
    refresh_logs(reader, {os.path.abspath(reader.get_log("a", 0).dir)}, seen)
    assert calls == ["a"]


def test_a_topic_the_broker_deletes_leaves_the_mount(manager_factory, mount_factory):
    """The broker deletes a topic (renames its dirs ``-delete``, then removes them): within
    a poll the read-only mount stops listing it and its files are gone. The broker
    re-creates it with other records: the mount shows those, never what it had cached."""
    broker = manager_factory()
    for t in ("keep", "doomed"):
        broker.create_topic(t, 1)
        broker.get_log(t, 0).append([(now_ms(), None, b"%s old %d" % (t.encode(), i), ())
                                     for i in range(3)])
        broker.get_log(t, 0).flush()
    m = mount_factory(extra_args=["--read-only"])
    assert sorted(os.listdir(m.path())) == ["doomed", "keep"]
    assert open(m.path("doomed", "0", "offset", "1"), "rb").read() == b"doomed old 1"
    assert open(m.path("doomed", "0", "messages"), "rb").read().startswith(b"doomed old 0")
    held = open(m.path("doomed", "0", "records.jsonl"), "rb")  # open, nothing read yet
    broker.delete_topic("doomed")
    deadline = time.monotonic() + 15
    while "doomed" in os.listdir(m.path()):
        assert time.monotonic() < deadline, "the deleted topic stayed in the mount"
        time.sleep(0.1)
    with pytest.raises(FileNotFoundError):
        open(m.path("doomed", "0", "messages"), "rb")
    with pytest.raises(OSError) as stale:  # a file of it left open: ESTALE, not garbage
        os.pread(held.fileno(), 100, 0)
    assert stale.value.errno == errno.ESTALE
    held.close()
    broker.create_topic("doomed", 1)
    broker.get_log("doomed", 0).append([(now_ms(), None, b"new %d" % i, ())
                                        for i in range(5)])
    broker.get_log("doomed", 0).flush()
    deadline = time.monotonic() + 15
    while True:
        try:
            if open(m.path("doomed", "0", "messages"), "rb").read() == \
                    b"".join(b"new %d\n" % i for i in range(5)):
                break
        except FileNotFoundError:
            pass
        assert time.monotonic() < deadline, "the re-created topic never showed"
        time.sleep(0.1)
    assert open(m.path("doomed", "0", "offset", "1"), "rb").read() == b"new 1"
    assert open(m.path("keep", "0", "messages"), "rb").read().startswith(b"keep old 0")
    assert m.umount() == 0
