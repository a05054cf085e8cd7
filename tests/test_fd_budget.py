"""The descriptor budget (issue 18 item 1, the descriptor part of issue 19): kafkafs keeps at
most ``kafkafs.max.open.files`` descriptors and index maps, however many partitions and
segments its log dirs hold; a descriptor is never closed under a thread using it; running
out fails one operation only and never wedges a partition; partition counts are bounded and
a creation is all or nothing; a read-only filesystem is refused clearly; ``get-offsets
--time -3`` is right beside a live writer.

Real files, real limits (``prlimit``, ``RLIMIT_NOFILE``), real tmpfs mounts where a disk
must fill up or turn read-only; the only patch is a failure injected into a roll at each of
its steps."""

from __future__ import annotations

import errno
import os
import random
import shutil
import struct
import subprocess
import sys
import threading
import time

import pytest
from conftest import ROOT, Mount, fuse_available, kafkafs, tree_state

from kafkafs.log import handles
from kafkafs.log.config import BrokerConfig
from kafkafs.log.errors import InvalidConfigError
from kafkafs.log.index import TimeIndex
from kafkafs.log.manager import LogManager, ReadOnlyFilesystemError
from kafkafs.log.segment import LogSegment
from kafkafs.record.batch import encode_batch, set_base_offset

needs_fuse = pytest.mark.skipif(not fuse_available(), reason="FUSE is not available")
TS = 1_700_000_000_000


def _manager(log_dir, **props) -> LogManager:
    cfg = BrokerConfig.from_properties({k: str(v) for k, v in props.items()})
    m = LogManager(cfg.with_log_dirs([log_dir]))
    m.startup()
    return m


def _values(lg) -> list[bytes]:
    return [r.value for r in lg.records()]


@pytest.fixture
def tmpfs(tmp_path):
    """``mount(options) -> path``: a fresh tmpfs under ``tmp_path`` (root only; where it
    cannot be mounted the test is skipped -- or, with ``required=False``, the directory is a
    plain one); every one is unmounted after the test."""
    made = []

    def mount(options: str = "size=64m", name: str = "tmpfs", required: bool = True) -> str:
        d = tmp_path / name
        d.mkdir()
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(d)],
                           check=False, capture_output=True)
        if r.returncode != 0:
            if not required:
                return str(d)
            pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
        made.append(str(d))
        return str(d)

    yield mount
    for d in reversed(made):
        subprocess.run(["umount", "-l", d], check=False, capture_output=True)


# -- the cache and its leases -------------------------------------------------------------------
def _files(tmp_path, n: int) -> list[str]:
    out = []
    for i in range(n):
        p = tmp_path / f"f{i}"
        p.write_bytes(bytes([i % 256]) * 4096)
        out.append(str(p))
    return out


def test_a_leased_descriptor_is_closed_only_by_its_last_release(tmp_path):
    paths = _files(tmp_path, 6)
    cache = handles.HandleCache(2)
    hs = [handles.Handle(lambda p=p: os.open(p, os.O_RDONLY), cache=cache, name=p)
          for p in paths]
    fd0 = hs[0].acquire()
    for h in hs[1:]:  # more opens than the capacity: idle ones are evicted, never hs[0]
        with h as fd:
            assert os.pread(fd, 1, 0) == bytes([hs.index(h)])
    assert len(cache) <= 2 and cache.leased() == 1
    assert os.pread(fd0, 4, 0) == b"\0" * 4
    hs[0].close()  # its owner is done while a reader still uses it: it stays open
    assert os.pread(fd0, 4, 100) == b"\0" * 4
    hs[0].release()  # the last lease ends: now it is closed
    with pytest.raises(OSError) as exc:
        os.fstat(fd0)
    assert exc.value.errno == errno.EBADF
    with pytest.raises(OSError):
        hs[0].acquire()
    for h in hs[1:]:
        h.close()
    assert len(cache) == 0


def test_a_collected_cached_dir_does_not_take_the_cache_lock(tmp_path):
    """A cached Dir evicted from the cache is cyclic garbage (its handle's opener is a method
    of it); the collector may finalize it in any thread at any allocation, also one holding
    the cache's lock (inside an eviction). Its finalizer must not take that lock: it did, and
    a plan of 71,429 segments hung for good under cProfile."""
    import gc

    from kafkafs.log.safeio import Dir

    gc.disable()
    try:
        d = Dir.open(str(tmp_path), cached=True)
        handles.CACHE.shrink(0)  # evicted: its descriptor is closed by the eviction
        del d  # now garbage in a cycle, left for the collector
        done = threading.Event()
        with handles.CACHE._lock:  # as an eviction in this process holds it
            t = threading.Thread(target=lambda: (gc.collect(), done.set()), daemon=True)
            t.start()
            finished = done.wait(5)
        t.join(10)
        assert finished, "finalizing a cached Dir waited for the handle cache's lock"
    finally:
        gc.enable()


def test_concurrent_readers_never_read_another_file(tmp_path):
    """Threads read 40 files through a cache of 3 while another opens and closes files all
    the time (so a closed number is reused at once): every byte read is the right file's."""
    paths = _files(tmp_path, 40)
    cache = handles.HandleCache(3)
    hs = [handles.Handle(lambda p=p: os.open(p, os.O_RDONLY), cache=cache, name=p)
          for p in paths]
    wrong, stop = [], threading.Event()

    def reader(seed):
        rnd = random.Random(seed)
        for _ in range(3000):
            i = rnd.randrange(len(hs))
            with hs[i] as fd:
                time.sleep(0) if rnd.random() < 0.1 else None
                if os.pread(fd, 64, rnd.randrange(4000)) != bytes([i]) * 64:
                    wrong.append(i)

    def churn():
        while not stop.is_set():
            os.close(os.open(os.devnull, os.O_RDONLY))

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(6)]
    churner = threading.Thread(target=churn)
    churner.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    churner.join()
    assert wrong == []
    assert len(cache) <= 3
    for h in hs:
        h.close()


def test_a_log_of_many_segments_stays_within_the_budget(tmp_path):
    """A log of 300 segments read while it is appended to, in a cache of 20: the process's
    descriptors and index maps stay within the budget, every record is read back."""
    old = handles.CACHE.capacity
    m = _manager(str(tmp_path / "logs"), **{"log.segment.bytes": 300,
                                             "log.index.interval.bytes": 50,
                                             "kafkafs.max.open.files": 20})
    try:
        assert handles.CACHE.capacity == 20
        lg = m.create_topic("t", 1)[0]
        for i in range(1200):
            lg.append([(TS + i, None, b"record-%05d" % i, ())])
        assert len(lg.segments()) >= 300
        errors = []

        def read():
            try:
                for _ in range(3):
                    got = _values(lg)
                    assert got[:1200] == [b"record-%05d" % i for i in range(1200)]
                    assert lg.read_record(777).value == b"record-00777"
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        readers = [threading.Thread(target=read) for _ in range(3)]
        for t in readers:
            t.start()
        for i in range(1200, 1500):
            lg.append([(TS + i, None, b"record-%05d" % i, ())])
        for t in readers:
            t.join()
        assert errors == []
        assert _fds(os.getpid(), str(tmp_path)) <= 20
        assert _index_maps(os.getpid(), str(tmp_path)) <= 20
        assert _values(lg) == [b"record-%05d" % i for i in range(1500)]
    finally:
        m.shutdown()
        handles.CACHE.capacity = old


def _fds(pid: int, under: str = "/") -> int:
    """Descriptors of process ``pid`` open on files under ``under`` (a log dir's ``.lock``
    left out: it is held for the manager's life, outside the budget)."""
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        n += target.startswith(under) and not target.endswith("/.lock")
    return n


def _all_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _index_maps(pid, under: str) -> int:
    with open(f"/proc/{pid}/maps") as f:
        return sum(1 for line in f if under in line and
                   line.rstrip().endswith((".index", ".timeindex")))


# -- what a reopen finds ------------------------------------------------------------------------
def test_a_partition_dir_swapped_while_its_descriptor_was_closed_is_gone(tmp_path):
    """Once its descriptor was evicted, a partition dir replaced by a link to a directory
    outside (holding files of the same names), or by another directory, is gone for
    kafkafs: appends fail with ENOENT, nothing outside changes, nothing is followed."""
    d = str(tmp_path / "logs")
    m = _manager(d)
    lgs = m.create_topic("v", 2)
    for lg in lgs:
        lg.append([(TS, None, b"a", ())])
    outside = tmp_path / "outside"
    outside.mkdir()
    for p, replace in ((0, "link"), (1, "dir")):
        pdir = os.path.join(d, f"v-{p}")
        lure = str(outside / f"v-{p}")
        shutil.copytree(pdir, lure)
        handles.CACHE.shrink(0)  # every idle descriptor closed: the next use reopens
        os.rename(pdir, str(tmp_path / f"moved-{p}"))
        if replace == "link":
            os.symlink(lure, pdir)
        else:
            shutil.copytree(lure, pdir)
    before = tree_state(str(outside)), tree_state(os.path.join(d, "v-1"))
    for lg in lgs:
        with pytest.raises(FileNotFoundError, match="partition dir gone"):
            lg.append([(TS, None, b"b", ())])
        assert not lg.pdir.at_path()
    assert (tree_state(str(outside)), tree_state(os.path.join(d, "v-1"))) == before
    m.shutdown()


def test_a_segment_file_replaced_while_closed_is_gone_not_read(tmp_path):
    """A segment whose ``.log`` another file replaced while its descriptor was evicted is
    gone (ESTALE): its reads fail, none returns the other file's bytes."""
    d = str(tmp_path / "logs")
    m = _manager(d, **{"log.segment.bytes": 500})
    lg = m.create_topic("t", 1)[0]
    for i in range(6):
        lg.append([(TS + i, None, b"x" * 100, ())])
    seg = lg.segments()[0]
    handles.CACHE.shrink(0)
    other = os.path.join(d, "t-0", "other")
    with open(other, "wb") as f:
        f.write(b"\xff" * seg.size)
    os.replace(other, seg.log_path)
    with pytest.raises(FileNotFoundError) as exc:
        seg.read_at(0, 10)
    assert exc.value.errno == errno.ESTALE and seg.closed
    m.shutdown()


def test_an_index_replaced_while_unmapped_becomes_an_empty_one(tmp_path):
    """A writable index whose file was replaced while unmapped is not mapped: a new empty
    file takes its place (said once) and lookups, which then scan the log, stay right."""
    d = str(tmp_path / "logs")
    m = _manager(d, **{"log.index.interval.bytes": 100})
    lg = m.create_topic("t", 1)[0]
    for i in range(50):
        lg.append([(TS + i, None, b"record-%02d-%s" % (i, b"x" * 60), ())])
    seg = lg.active_segment
    assert seg.index.entries > 5
    handles.CACHE.shrink(0)
    path = seg.index.path
    junk = path + ".junk"
    with open(junk, "wb") as f:
        f.write(b"\x7f" * seg.index.length)
    os.replace(junk, path)
    assert lg.read_record(37).value.startswith(b"record-37-")
    assert seg.index.entries == 0 or seg.index.lookup(37)[0] <= 37
    with open(path, "rb") as f:
        assert b"\x7f" not in f.read()
    for i in range(50, 60):
        lg.append([(TS + i, None, b"record-%02d-%s" % (i, b"x" * 60), ())])
    assert [r.value[:9] for r in lg.records()] == [b"record-%02d" % i for i in range(60)]
    m.shutdown()


# -- rolls that fail ----------------------------------------------------------------------------
def _log_names(d):
    return sorted(n for n in os.listdir(d) if n.endswith((".log", ".index", ".timeindex")))


@pytest.mark.parametrize("where", [(LogSegment, "open_indexes"),
                                   (TimeIndex, "trim_to_valid_size")],
                         ids=["new-segment-indexes", "old-segment-trim"])
def test_a_failed_roll_is_undone_and_the_partition_appends_again(tmp_path, monkeypatch, where):
    """EMFILE injected where a roll makes the new segment's indexes, or where it trims the
    old segment's: the roll fails alone, leaves no file at the new base offset, the old
    segment stays active with its indexes preallocated, and the next appends roll."""
    cls, step = where
    d = str(tmp_path / "logs")
    m = _manager(d, **{"log.segment.bytes": 500})
    lg = m.create_topic("t", 1)[0]
    pdir = os.path.join(d, "t-0")
    for i in range(4):
        lg.append([(TS + i, None, b"x" * 100, ())])
    before = _log_names(pdir)
    active = lg.active_segment
    real = getattr(cls, step)

    def emfile(self, *a, **kw):
        raise OSError(errno.EMFILE, "Too many open files (injected)")

    monkeypatch.setattr(cls, step, emfile)
    with pytest.raises(OSError) as exc:
        for i in range(4, 10):  # the next roll fails
            lg.append([(TS + i, None, b"x" * 100, ())])
    assert exc.value.errno == errno.EMFILE
    acked = i
    assert _log_names(pdir) == before  # no stray .log (nor index) at the new base offset
    assert lg.active_segment is active
    assert active.index.length == lg.config.segment_index_bytes  # grown back
    monkeypatch.setattr(cls, step, real)
    for i in range(acked, acked + 6):  # the partition takes appends, and rolls, again
        lg.append([(TS + i, None, b"x" * 100, ())])
    assert len(lg.segments()) > 2
    assert m.shutdown()
    m2 = _manager(d)
    assert len(_values(m2.get_log("t", 0))) == acked + 6
    m2.shutdown()


def test_a_segment_left_at_the_new_base_offset_is_deleted_first(tmp_path):
    """A ``.log`` left where the next roll goes (by a roll that failed in an older version,
    or by hand) does not wedge the partition with EEXIST: the roll deletes it first, as
    Kafka's does."""
    d = str(tmp_path / "logs")
    m = _manager(d, **{"log.segment.bytes": 500})
    lg = m.create_topic("t", 1)[0]
    for i in range(3):
        lg.append([(TS + i, None, b"x" * 100, ())])
    leo = lg.log_end_offset
    stale = os.path.join(d, "t-0", f"{leo:020d}.log")
    with open(stale, "wb") as f:
        f.write(b"left behind")
    with open(stale[:-4] + ".index", "wb") as f:
        f.write(b"\1" * 8)
    segments = len(lg.segments())
    lg.append([(TS + 3, None, b"x" * 400, ())])  # does not fit: rolls at offset 3
    assert [seg.base_offset for seg in lg.segments()][-1] == leo
    assert len(lg.segments()) == segments + 1
    for i in range(4, 10):
        lg.append([(TS + i, None, b"x" * 100, ())])
    assert lg.log_end_offset == 10
    assert m.shutdown()
    m2 = _manager(d)
    assert len(_values(m2.get_log("t", 0))) == 10
    m2.shutdown()


_EXHAUST = r"""
import errno, logging, os, resource, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
from kafkafs.log import handles
from kafkafs.log.config import BrokerConfig
from kafkafs.log.manager import LogManager
d = sys.argv[1]
m = LogManager(BrokerConfig.from_properties({"log.segment.bytes": "500"}).with_log_dirs([d]))
m.startup()
lg = m.create_topic("t", 1)[0]
for i in range(4):
    lg.append([(i, None, b"x" * 100, ())])
def logs():
    return sorted(n for n in os.listdir(os.path.join(d, "t-0")) if n.endswith(".log"))
before = logs()
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 16, hard))
handles.CACHE.shrink(0)
fillers = []
try:
    while True:
        fillers.append(os.open(os.devnull, os.O_RDONLY))
except OSError:
    pass
failed = 0
for i in range(4, 12):  # every descriptor is taken: the appends that roll fail alone
    try:
        lg.append([(i, None, b"x" * 100, ())])
    except OSError as exc:
        assert exc.errno == errno.EMFILE, exc
        failed += 1
for fd in fillers:
    os.close(fd)
unchanged = int(logs() == before)
for i in range(12, 20):
    lg.append([(i, None, b"x" * 100, ())])
print(failed, unchanged, lg.log_end_offset, len(lg.segments()))
assert m.shutdown()
"""


def test_out_of_descriptors_fails_only_the_operations_that_meet_it(tmp_path):
    """With every descriptor of the process taken, appends that must roll fail with EMFILE
    (logged once, with what to do), leave no file behind, and once descriptors are free
    again the same partition appends and rolls."""
    d = str(tmp_path / "logs")
    r = subprocess.run([sys.executable, "-c", _EXHAUST, d], check=False, capture_output=True,
                       cwd=ROOT, timeout=60, env=dict(os.environ, PYTHONPATH=ROOT))
    assert r.returncode == 0, r.stderr.decode()
    failed, unchanged, leo, segments = map(int, r.stdout.split())
    assert failed > 0 and unchanged  # no .log left by a roll that failed
    assert segments > 2
    err = r.stderr.decode()
    assert err.count("Too many open files") >= 1
    assert err.count("raise the limit (ulimit -n") == 1  # said once, with what to do
    m = _manager(d)
    assert len(_values(m.get_log("t", 0))) == leo == 20 - failed
    m.shutdown()


# -- partition counts ---------------------------------------------------------------------------
def test_a_partition_count_above_the_bound_is_refused_at_once(tmp_path):
    d = str(tmp_path / "logs")
    m = _manager(d)
    before = sorted(os.listdir(d))
    with pytest.raises(InvalidConfigError) as exc:
        m.create_topic("orders", 10001)
    assert "kafkafs.max.partitions.per.topic=10000" in str(exc.value)
    assert sorted(os.listdir(d)) == before and m.topics() == []
    m.create_topic("orders", 2)
    with pytest.raises(InvalidConfigError, match="kafkafs.max.partitions.per.topic"):
        m.add_partitions("orders", 100_000_000)
    assert m.partitions("orders") == [0, 1]
    m.shutdown()
    m = _manager(d, **{"kafkafs.max.partitions.per.topic": 5})
    with pytest.raises(InvalidConfigError, match="at most 5 partitions"):
        m.add_partitions("orders", 6)
    assert len(m.add_partitions("orders", 5)) == 3
    m.shutdown()


def test_a_creation_that_fails_part_way_leaves_nothing(tmp_path):
    """A name taken half-way (partition 500 of 1000) makes the whole request fail: none of
    the 499 partitions made before stays, on disk, in memory or after a restart."""
    d = str(tmp_path / "logs")
    m = _manager(d)
    m.create_topic("t", 1)[0].append([(TS, None, b"kept", ())])
    planted = os.path.join(d, "t-500")
    with open(planted, "w") as f:
        f.write("not a partition")
    before = sorted(os.listdir(d))
    with pytest.raises(FileExistsError):
        m.add_partitions("t", 1000)
    assert sorted(os.listdir(d)) == before  # no t-1..t-499, no -delete leftovers
    assert m.partitions("t") == [0]
    os.mkdir(os.path.join(d, "u-7"))  # taken: a new topic fails at its partition 7
    with pytest.raises(FileExistsError):
        m.create_topic("u", 10, {"retention.ms": "1000"})
    os.rmdir(os.path.join(d, "u-7"))
    assert m.topics() == ["t"] and m.topic_overrides("u") == {}
    assert sorted(os.listdir(d)) == before
    assert m.shutdown()
    m2 = _manager(d)
    assert m2.topics() == ["t"] and m2.partitions("t") == [0]
    assert _values(m2.get_log("t", 0)) == [b"kept"]
    m2.shutdown()


def test_a_full_disk_part_way_removes_what_the_request_made(tmp_path, tmpfs):
    """ENOSPC half-way through 1000 new partitions (a tmpfs out of inodes): nothing of the
    request stays, the topic's old partition is intact, a restart shows the same."""
    d = os.path.join(tmpfs("size=64m,nr_inodes=600"), "logs")
    m = _manager(d)
    m.create_topic("t", 1)[0].append([(TS, None, b"kept", ())])
    before = sorted(os.listdir(d))
    with pytest.raises(OSError) as exc:
        m.add_partitions("t", 1000)
    assert exc.value.errno == errno.ENOSPC
    assert sorted(os.listdir(d)) == before
    assert m.partitions("t") == [0]
    with pytest.raises(OSError):
        m.create_topic("u", 1000, {"retention.ms": "1000"})
    assert m.topics() == ["t"] and m.topic_overrides("u") == {}
    assert sorted(os.listdir(d)) == before
    assert m.shutdown()
    m2 = _manager(d)
    assert m2.topics() == ["t"] and _values(m2.get_log("t", 0)) == [b"kept"]
    m2.shutdown()


def _files_alone(root, n: int = 1000) -> float:
    """Seconds this machine takes now to make the dir and files of ``n`` new partitions,
    with nothing else."""
    root.mkdir()
    t0 = time.monotonic()
    for i in range(n):
        p = root / f"t-{i}"
        p.mkdir()
        for name in ("partition.metadata", "0.log", "0.index", "0.timeindex"):
            os.close(os.open(p / name, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644))
    return time.monotonic() - t0


def test_a_thousand_partitions_are_created_without_an_fsync_each(tmp_path):
    """``add_partitions(t, 1000)`` costs about what the filesystem takes to make their
    files (measured just before and just after, for this machine's load), not a storm of
    fsyncs."""
    d = str(tmp_path / "logs")
    m = _manager(d)
    m.create_topic("t", 1)
    before = _files_alone(tmp_path / "raw1")
    t0 = time.monotonic()
    m.add_partitions("t", 1001)
    took = time.monotonic() - t0
    baseline = max(before, _files_alone(tmp_path / "raw2"))
    print(f"add_partitions(t, 1000): {took:.2f} s (the files alone: {baseline:.2f} s)")
    assert took < 2 * baseline + 1.0
    assert m.partitions("t") == list(range(1001))
    assert m.shutdown()
    m2 = _manager(d)
    assert m2.partitions("t") == list(range(1001))
    m2.shutdown()


# -- a read-only filesystem ---------------------------------------------------------------------
def test_a_log_dir_on_a_read_only_filesystem_is_refused_clearly(tmp_path, tmpfs):
    root = tmpfs("size=16m", "ro")
    d = os.path.join(root, "logs")
    m = _manager(d)
    m.create_topic("v", 1)[0].append([(TS, None, b"a", ())])
    m.shutdown()
    assert subprocess.run(["mount", "-o", "remount,ro", root], check=False).returncode == 0
    state = tree_state(root)
    with pytest.raises(ReadOnlyFilesystemError) as exc:
        _manager(d)
    assert f"the log dir {d} is on a read-only filesystem" in str(exc.value)
    assert "kafkafs mount --read-only" in str(exc.value)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    for args in (["mount", str(mnt), "--log-dirs", d], ["produce", "--log-dirs", d,
                                                        "--topic", "v"]):
        r = kafkafs(*args, input=b"b\n", check=False)
        err = r.stderr.decode()
        assert r.returncode == 1, err
        assert f"error: the log dir {d} is on a read-only filesystem" in err, err
        assert "Traceback" not in err
    assert not os.path.ismount(str(mnt))
    assert tree_state(root) == state  # not a byte written
    r = kafkafs("consume", "--log-dirs", d, "--topic", "v", "--from-beginning",
                "--max-messages", "1")
    assert r.stdout == b"a\n"


# -- get-offsets --time -3 beside a live writer -------------------------------------------------
def test_max_timestamp_offset_beside_a_live_writer(tmp_path):
    """A writable log keeps appending (its time index lags, one entry per
    index.interval.bytes); a read-only reader (``kafkafs get-offsets --time -3``) finds the
    record with the largest timestamp anyway, also in a segment indexed up to an older
    offset, and a following reader sees the bytes appended since."""
    d = str(tmp_path / "logs")
    m = _manager(d)
    lg = m.create_topic("mt", 1)[0]
    lg.append([(TS + 1000, None, b"one", ())])
    lg.append([(TS + 2000, None, b"two", ())])
    r = kafkafs("get-offsets", "--log-dirs", d, "--topic", "mt", "--time", "-3")
    assert r.stdout == b"mt:0:1\n"
    reader = LogManager(BrokerConfig.from_properties({}).with_log_dirs([d]), read_only=True)
    reader.startup()
    ro = reader.get_log("mt", 0)
    assert ro.offset_for_timestamp(-3) == (1, TS + 2000)
    # an older topic: its time index has entries (a close wrote the last one), then more
    # records come, in batches of several, the largest timestamp inside the second one
    m.shutdown()
    m = _manager(d)
    lg = m.get_log("mt", 0)
    lg.append([(TS + 3000, None, b"three", ()), (TS + 9000, None, b"four", ()),
               (TS + 4000, None, b"five", ())])
    lg.append([(TS + 5000, None, b"six", ())])
    r = kafkafs("get-offsets", "--log-dirs", d, "--topic", "mt", "--time", "-3")
    assert r.stdout == b"mt:0:3\n"  # the record itself, not its batch's end (KAFKA-16310)
    assert ro.offset_for_timestamp(-3) == (1, TS + 2000)  # what it read so far ...
    ro.refresh_from_disk()
    assert ro.offset_for_timestamp(-3) == (3, TS + 9000)  # ... the record itself (KIP-734)
    assert lg.offset_for_timestamp(-3) == (3, TS + 9000)
    reader.shutdown()
    m.shutdown()


# -- the daemon ---------------------------------------------------------------------------------
class LimitedMount(Mount):
    """A daemon started under ``prlimit --nofile=N:N`` (soft and hard: it cannot raise it)."""

    def __init__(self, *a, nofile: int, **kw):
        super().__init__(*a, **kw)
        self.nofile = nofile

    def command(self) -> list[str]:
        return ["prlimit", f"--nofile={self.nofile}:{self.nofile}", "--"] + super().command()


def _daemon_pid(m: Mount) -> int:
    return int(os.getxattr(m.mnt, "user.kafkafs.pid"))


@needs_fuse
@pytest.mark.slow
def test_a_daemon_under_ulimit_256_serves_100_partitions_of_many_segments(tmp_path, tmpfs):
    """``ulimit -n 256`` and 100 partitions of over 20 segments each (3,000 .log files, on a
    tmpfs where one can be mounted: it is about descriptors, not disks): the daemon loads
    them, serves every partition (``messages``, ``offset/N``), takes appends everywhere
    (rolling), is killed with -9 and recovers with every acknowledged record; it never runs
    out of descriptors and no partition is wedged."""
    d = os.path.join(tmpfs("size=256m", required=False), "logs")
    props = {"log.segment.bytes": "1000", "log.index.interval.bytes": "200"}
    config = tmp_path / "server.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    m = _manager(d, **props)
    expected = {}
    for lg in m.create_topic("big", 100):
        vals = [b"p%02d-r%03d-%s" % (lg.partition, i, b"x" * 80) for i in range(200)]
        for i in range(0, 200, 2):
            lg.append([(TS + i, None, v, ()) for v in vals[i:i + 2]])
        expected[lg.partition] = vals
    assert sum(len(lg.segments()) for lg in m.logs.values()) >= 2000
    assert m.shutdown()

    mnt = LimitedMount(tmp_path, log_dirs=[d], config=str(config), nofile=256)
    mnt.start(timeout=120)
    try:
        pid = _daemon_pid(mnt)
        for p in range(100):
            with open(mnt.path("big", str(p), "messages"), "rb") as f:
                assert f.read().splitlines() == expected[p], p
            for off in (0, 99, 199):
                with open(mnt.path("big", str(p), "offset", str(off)), "rb") as f:
                    assert f.read().rstrip(b"\n") == expected[p][off]
        assert _all_fds(pid) <= 256
        for p in range(100):  # appends everywhere: more rolls
            new = [b"p%02d-new%d-%s" % (p, k, b"y" * 300) for k in range(4)]
            for v in new:
                with open(mnt.path("big", str(p), "append"), "ab") as f:
                    f.write(v + b"\n")
            expected[p] += new
        assert _all_fds(pid) <= 256
        mnt.kill9()
        log = mnt.log()
        assert "Too many open files" not in log, log[-3000:]
        assert "kafkafs.max.open.files=1000 needs 1128 descriptors" in log
        mnt.start(timeout=120)
        for p in range(100):
            with open(mnt.path("big", str(p), "messages"), "rb") as f:
                assert f.read().splitlines() == expected[p], p
        with open(mnt.path("big", "7", "append"), "ab") as f:
            f.write(b"after\n")
        assert mnt.umount() == 0
    finally:
        mnt.stop()
    assert "Too many open files" not in mnt.log()


def _write_segments(root: str, partitions: int, segments: int) -> None:
    """Partition dirs ``seg-<p>`` of ``segments`` segments each, of two one-record batches
    (offsets ``2s`` and ``2s + 1``) with an index entry and a time index entry for the
    second, written as files (a clean shutdown marker and checkpoints included): a log dir
    as a broker leaves it, made in seconds."""
    os.makedirs(root, exist_ok=True)
    rp = []
    for p in range(partitions):
        pd = os.path.join(root, f"seg-{p}")
        os.mkdir(pd)
        for s in range(segments):
            base = 2 * s
            data = b""
            for off in (base, base + 1):
                batch = bytearray(encode_batch([(TS + off, None, b"p%d-o%d" % (p, off), ())]))
                set_base_offset(batch, off)
                if off == base + 1:
                    position = len(data)
                data += batch
            prefix = os.path.join(pd, f"{base:020d}")
            with open(prefix + ".log", "wb") as f:
                f.write(data)
            with open(prefix + ".index", "wb") as f:
                f.write(struct.pack(">ii", 1, position))
            with open(prefix + ".timeindex", "wb") as f:
                f.write(struct.pack(">qi", TS + base + 1, 1))
        rp.append(f"seg {p} {2 * segments}\n")
    with open(os.path.join(root, "recovery-point-offset-checkpoint"), "w") as f:
        f.write(f"0\n{partitions}\n" + "".join(rp))
    with open(os.path.join(root, ".kafka_cleanshutdown"), "w") as f:
        f.write('{"version":0,"brokerEpoch":-1}')


@needs_fuse
@pytest.mark.slow
def test_20000_segments_stay_within_the_documented_bound(tmp_path, tmpfs):
    """20,000 segments (20 partitions of 1,000): after the start and after every partition
    was read (and 2,000 segments looked up through their indexes), the daemon holds at most
    kafkafs.max.open.files + 128 descriptors and at most kafkafs.max.open.files index maps."""
    budget = 1000
    d = os.path.join(tmpfs("size=512m"), "logs")
    _write_segments(d, 20, 1000)
    mnt = Mount(tmp_path, log_dirs=[d])
    mnt.start(timeout=120)
    try:
        pid = _daemon_pid(mnt)
        after_start = (_all_fds(pid), _index_maps(pid, d))
        for p in range(20):
            with open(mnt.path("seg", str(p), "messages"), "rb") as f:
                lines = f.read().splitlines()
            assert lines == [b"p%d-o%d" % (p, o) for o in range(2000)], p
        for p in (0, 7):  # a lookup by offset in every segment: each one's index is used
            for o in range(1, 2000, 2):
                with open(mnt.path("seg", str(p), "offset", str(o)), "rb") as f:
                    assert f.read().rstrip(b"\n") == b"p%d-o%d" % (p, o)
        after_reads = (_all_fds(pid), _index_maps(pid, d))
        print(f"20,000 segments: (descriptors, index maps) after the start {after_start}, "
              f"after reading every partition {after_reads}")
        for fds, maps in (after_start, after_reads):
            assert fds <= budget + handles.HEADROOM
            assert maps <= budget
        assert mnt.umount() == 0
    finally:
        mnt.stop()
