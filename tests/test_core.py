"""The storage core without any frontend (kafkafs/core, docs/design.md §8.2): a core is
started, runs its tasks, answers control requests and keeps appends out of a bulk commit
with no FUSE mount in the process, as a second frontend (a network listener) would use it;
and the FUSE mount takes its control requests from the core's handler."""

from __future__ import annotations

import errno
import os
import subprocess
import sys

import pytest
import trio
from conftest import needs_fuse

from kafkafs.core import control
from kafkafs.core.commits import CommitGate, CommitUnfinishedError
from kafkafs.core.storage import StorageCore
from kafkafs.log.config import BrokerConfig
from kafkafs.log.errors import ReadOnlyLogError


def _config(tmp_path, **props) -> BrokerConfig:
    cfg = BrokerConfig.from_properties({k.replace("_", "."): str(v) for k, v in props.items()})
    return cfg.with_log_dirs([str(tmp_path / "logs")])


def test_a_core_runs_and_answers_requests_without_a_frontend(tmp_path):
    """Start a core, its tasks in a nursery, create and append through its manager, clean
    a compacted topic through the control handler (the key maps and the cleaner status
    follow), see the handler's refusals as typed errors, shut down clean."""
    cfg = _config(tmp_path, log_cleaner_backoff_ms=60000)

    async def main():
        core = StorageCore(cfg)
        await core.startup()
        async with trio.open_nursery() as nursery:
            await core.start_tasks(nursery)
            assert core.cleaner is not None  # made by start_tasks on a writable core
            attrs = core.control.attributes()
            assert attrs[control.LOG_DIRS].decode() == cfg.log_dirs[0]
            assert int(attrs[control.PID]) == os.getpid()
            plain = core.manager.create_topic("plain")[0]
            plain.append([(0, b"k", b"v", ())])
            kv = core.manager.create_topic("kv", overrides={"cleanup.policy": "compact",
                                                           "segment.bytes": "1024"})[0]
            for i in range(200):
                kv.append([(0, b"k%d" % (i % 5), b"v%d" % i, ())])
            size_before = sum(s.size for s in kv.segments())
            await core.control.handle(control.COMPACT, "kv", 0, b"now")
            assert sum(s.size for s in kv.segments()) < size_before
            with pytest.raises(control.InvalidRequestError):  # not compacted
                await core.control.handle(control.COMPACT, "plain", None, b"now")
            with pytest.raises(control.NotTakenError):  # compact is not taken on the root
                await core.control.handle(control.COMPACT, None, None, b"now")
            with pytest.raises(control.NotTakenError):
                await core.control.handle("user.kafkafs.nonsense", "kv", None, b"")
            with pytest.raises(control.InvalidRequestError):
                await core.control.handle(control.COMMIT_STAGED, None, None, b"{not json")
            nursery.cancel_scope.cancel()
        assert await core.shutdown() is True
        assert os.path.exists(os.path.join(cfg.log_dirs[0], ".kafka_cleanshutdown"))

    trio.run(main)


def test_a_read_only_core_takes_no_requests(tmp_path):
    cfg = _config(tmp_path)
    os.makedirs(cfg.log_dirs[0])

    async def main():
        core = StorageCore(cfg, read_only=True)
        await core.startup()
        with pytest.raises(ReadOnlyLogError):
            await core.control.handle(control.COMMIT_STAGED, None, None, b"{}")
        assert core.cleaner is None
        await core.shutdown()

    trio.run(main)


def test_the_commit_gate_holds_appends_and_refuses_after_an_unfinished_commit():
    """An append waits while a commit holds its partition and goes on when it ends; a
    second commit of the same partition waits for the first; after mark_unfinished both
    are refused."""

    async def main():
        gate = CommitGate()
        order = []
        release = trio.Event()

        async def commit(name):
            async with gate.holding([("t", 0)], ["t"]):
                order.append(f"{name} start")
                await release.wait()
                order.append(f"{name} end")

        async def append():
            await gate.wait("t", 0)
            order.append("append")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(commit, "c1")
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(append)
            nursery.start_soon(commit, "c2")
            await trio.testing.wait_all_tasks_blocked()
            assert order == ["c1 start"]
            await gate.wait("t", 1)  # another partition does not wait
            release.set()
        assert order[:2] == ["c1 start", "c1 end"] and "append" in order
        assert order.index("c2 start") > order.index("c1 end")
        gate.mark_unfinished([("t", 0)], ["u"])
        with pytest.raises(CommitUnfinishedError):
            await gate.wait("t", 0)
        with pytest.raises(CommitUnfinishedError):
            async with gate.holding([("x", 0)], ["u"]):
                pass
        await gate.wait("x", 0)

    import trio.testing  # (wait_all_tasks_blocked)
    trio.run(main)


@needs_fuse
def test_the_mount_answers_control_requests_with_the_handlers_errno(mount_factory):
    """Through the mount: the root's attributes come from the core, an unknown request is
    EACCES, compact of a topic that is not compacted EINVAL, a malformed commit EINVAL."""
    m = mount_factory()
    os.mkdir(m.path("t"))
    assert control.served_log_dirs(m.mnt) == m.log_dirs
    assert control.daemon_pid(m.mnt) == m.proc.pid
    assert control.find_mount(m.log_dirs) == m.mnt
    for path, name, value, code in [
        (m.path("t"), "user.kafkafs.nonsense", b"x", errno.EACCES),
        (m.mnt, control.COMPACT, b"now", errno.EACCES),
        (m.path("t"), control.COMPACT, b"now", errno.EINVAL),
        (m.mnt, control.COMMIT_STAGED, b"{not json", errno.EINVAL),
        (m.path("t", "0", "append"), control.COMPACT, b"now", errno.EACCES),
    ]:
        with pytest.raises(OSError) as exc:
            os.setxattr(path, name, value)
        assert exc.value.errno == code, (path, name)


def test_spark_and_the_control_client_import_without_the_daemons_libraries():
    """A Spark worker installed with ``kafkafs[spark]`` has no trio, pyfuse3 or watchdog:
    every module of kafkafs.spark, and the control requests' client side they use
    (core/control.py), must import without them (the cluster recipe failed on it)."""
    code = r'''
import importlib, pkgutil, sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("trio", "pyfuse3", "watchdog"):
            raise ImportError("blocked " + name)
sys.meta_path.insert(0, Block())
import kafkafs.spark
bad = []
for m in pkgutil.walk_packages(kafkafs.spark.__path__, "kafkafs.spark."):
    try:
        importlib.import_module(m.name)
    except ImportError as e:
        bad.append(f"{m.name}: {e}")
importlib.import_module("kafkafs.core.control")
print("\n".join(bad))
'''
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       timeout=120, check=False)
    assert r.returncode == 0 and not r.stdout.strip(), r.stdout + r.stderr
