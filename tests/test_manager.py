"""LogManager: several log dirs, locks, checkpoints, topic configs, adoption."""

from __future__ import annotations

import os
import shutil
import time

import pytest
from conftest import tree_state

from kafkafs.core.watcher import _adopt
from kafkafs.log import checkpoint as ckpt
from kafkafs.log.config import BrokerConfig
from kafkafs.log.errors import (
    InvalidConfigError,
    InvalidTopicError,
    LogDirLockedError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from kafkafs.log.manager import LogManager


def start(dirs, **props):
    m = LogManager(BrokerConfig.from_properties(props).with_log_dirs(dirs))
    m.startup()
    return m


def test_new_partitions_go_to_the_dir_with_fewest(tmp_path):
    dirs = [str(tmp_path / f"d{i}") for i in range(3)]
    m = start(dirs)
    m.create_topic("a", 4)
    m.create_topic("b", 2)
    counts = [sum(1 for n in os.listdir(d) if n[:2] in ("a-", "b-")) for d in dirs]
    assert sorted(counts) == [2, 2, 2]
    for d in dirs:
        props = ckpt.read_properties(os.path.join(d, "meta.properties"))
        assert props["version"] == "1" and len(props["directory.id"]) == 22
    clusters = {ckpt.read_properties(os.path.join(d, "meta.properties"))["cluster.id"]
                for d in dirs}
    assert len(clusters) == 1
    m.shutdown()


def test_lock_excludes_a_second_owner_and_readers_need_none(tmp_path):
    d = str(tmp_path / "logs")
    m = start([d])
    m.create_topic("t")
    m.get_log("t", 0).append([(1, None, b"x", ())])
    with pytest.raises(LogDirLockedError, match="lock"):
        start([d])
    ro = LogManager(BrokerConfig().with_log_dirs([d]), read_only=True)
    ro.startup()
    assert [r.value for r in ro.get_log("t", 0).records()] == [b"x"]
    ro.shutdown()
    m.shutdown()
    start([d]).shutdown()  # released


def test_checkpoints_and_clean_shutdown(tmp_path):
    d = str(tmp_path / "logs")
    m = start([d], **{"log.segment.bytes": "200", "log.segment.delete.delay.ms": "0"})
    m.create_topic("t", overrides={"retention.bytes": "300"})
    lg = m.get_log("t", 0)
    for i in range(20):
        lg.append([(i, None, b"v" * 40, ())])
    assert m.apply_retention() > 0
    start_offset = lg.log_start_offset
    assert m.shutdown() is True
    assert os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
    assert ckpt.read_offset_checkpoint(os.path.join(d, "recovery-point-offset-checkpoint")) \
        == {("t", 0): 20}
    assert ckpt.read_offset_checkpoint(os.path.join(d, "log-start-offset-checkpoint")) \
        == {("t", 0): start_offset}
    m = start([d])
    assert not os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
    lg = m.get_log("t", 0)
    assert lg.log_start_offset == start_offset and lg.log_end_offset == 20
    assert m.topic_config("t").retention_bytes == 300  # overrides survive a restart
    m.shutdown()


def test_topic_errors_and_config(tmp_path):
    m = start([str(tmp_path / "logs")], **{"num.partitions": "2"})
    assert len(m.create_topic("t")) == 2
    with pytest.raises(TopicExistsError):
        m.create_topic("t")
    with pytest.raises(InvalidTopicError):
        m.create_topic("no/slash")
    with pytest.raises(InvalidConfigError):
        m.create_topic("u", overrides={"retention.ms": "x"})
    assert "u" not in m.topics()
    m.create_topic("t.x")
    with pytest.raises(InvalidConfigError, match="collides"):
        m.create_topic("t_x")
    m.alter_topic_config("t", {"segment.bytes": "1024"})
    assert m.get_log("t", 0).config.segment_bytes == 1024
    m.add_partitions("t", 3)
    assert m.partitions("t") == [0, 1, 2]
    m.delete_topic("t")
    with pytest.raises(UnknownTopicOrPartitionError):
        m.get_log("t", 0)
    m.shutdown()


def test_restored_partition_is_adopted(tmp_path):
    src = str(tmp_path / "src")
    m = start([src])
    m.create_topic("r")
    m.get_log("r", 0).append([(1, None, b"restored", ())])
    m.shutdown()
    dst = str(tmp_path / "dst")
    m = start([dst])
    shutil.copytree(os.path.join(src, "r-0"), os.path.join(dst, "r-0"))
    new = m.scan_for_new_partitions()
    assert [lg.name for lg in new] == ["r-0"]
    assert [r.value for r in m.get_log("r", 0).records()] == [b"restored"]
    m.shutdown()


def read_bytes(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def deleted_files(d):
    return sorted(n for n in os.listdir(d) if n.endswith(".deleted"))


def live_segment_files(d):
    return sorted(n for n in os.listdir(d)
                  if n.endswith((".log", ".index", ".timeindex", ".txnindex")))


def fill(lg, n, start=0):
    for i in range(start, start + n):
        lg.append([(1000 + i, None, b"value-%03d" % i + b"x" * 40, ())])


def test_apply_retention_removes_deleted_files_once_the_delay_passed(manager_factory):
    """With log.segment.delete.delay.ms=300 and the real clock, ``apply_retention`` (what
    the daemon's retention task runs) renames the old segments ``.deleted`` and keeps
    them on disk for 300 ms -- every pass before that leaves them -- then removes them;
    reads start at the new log start offset from the first pass on."""
    m = manager_factory(log_segment_bytes=300, log_retention_bytes=600,
                        log_segment_delete_delay_ms=300)
    m.create_topic("t", 1)
    lg = m.get_log("t", 0)
    fill(lg, 30)
    t0 = time.time()
    assert m.apply_retention() > 0
    pending = deleted_files(lg.dir)
    assert pending and all(int(n[:20]) < lg.log_start_offset for n in pending)
    assert lg.log_start_offset == lg.segments()[0].base_offset > 0
    assert [r.offset for r in lg.records()] == list(range(lg.log_start_offset, 30))
    deadline, seen_at = t0 + 10, None
    while deleted_files(lg.dir) == pending and time.time() < deadline:
        time.sleep(0.02)
        assert m.apply_retention() == 0
        seen_at = time.time()
    assert deleted_files(lg.dir) == []
    assert seen_at - t0 >= 0.299  # not before the delay
    assert [r.offset for r in lg.records()] == list(range(lg.log_start_offset, 30))


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "crash"])
def test_deleted_files_go_at_shutdown_or_at_the_next_load(tmp_path, clean):
    """``.deleted`` files wait ``file.delete.delay.ms`` for readers still in them. A clean
    shutdown has none left, so it removes them (Kafka leaves them to the next load; kafkafs
    leaves no leftovers for `kafkafs check`, tar or rsync); after a crash that left them the
    next start removes every one while loading (``LogLoader``: stray ``.deleted`` files).
    The log keeps the same segments, log start offset and records."""
    d = str(tmp_path / "logs")
    m = start([d], **{"log.segment.bytes": "300", "log.retention.bytes": "600",
                      "log.segment.delete.delay.ms": "60000"})
    m.create_topic("t", 1)
    lg = m.get_log("t", 0)
    fill(lg, 30)
    assert m.apply_retention() > 0
    pending = deleted_files(lg.dir)
    assert pending
    saved = {n: open(os.path.join(lg.dir, n), "rb").read() for n in pending}
    live = live_segment_files(lg.dir)
    start_offset = lg.log_start_offset
    assert m.shutdown() is True
    assert deleted_files(lg.dir) == []  # nobody reads them any more
    if not clean:  # as a crash leaves them
        for n, data in saved.items():
            with open(os.path.join(lg.dir, n), "wb") as f:
                f.write(data)
        os.unlink(os.path.join(d, ".kafka_cleanshutdown"))
    m = start([d])
    lg = m.get_log("t", 0)
    assert deleted_files(lg.dir) == []
    assert live_segment_files(lg.dir) == live
    assert lg.log_start_offset == start_offset
    assert [r.offset for r in lg.records()] == list(range(start_offset, 30))
    m.shutdown()


def test_new_partitions_go_to_the_dir_with_fewest_not_round_robin(tmp_path):
    """Kafka's ``LogManager.nextLogDirs``: each new partition goes to the log dir holding
    the fewest partitions at that moment, counting those already there; a tie goes to the
    dir listed first in log.dirs (Kafka keeps that order for up to four dirs). Dirs A, B, C
    holding 3, 0 and 1 partitions receive new ones in the order B, B, C, B, C, A -- round
    robin would give A, B, C, A, B, C."""
    a, b, c = (str(tmp_path / n) for n in "ABC")
    m = start([a])
    m.create_topic("x", 3)
    m.shutdown()
    m = start([a, c])
    m.create_topic("y", 1)  # A holds 3: C
    m.shutdown()

    def where(topic, p=0):
        return os.path.basename(os.path.dirname(m.get_log(topic, p).dir))

    m = start([a, b, c])
    assert [where("x", p) for p in range(3)] + [where("y")] == ["A", "A", "A", "C"]
    got = []
    for i in range(6):
        m.create_topic(f"n{i}", 1)
        got.append(where(f"n{i}"))
    assert got == ["B", "B", "C", "B", "C", "A"]
    # now 4/3/3: the partitions of one request each see those created before them
    m.add_partitions("n0", 5)
    assert [where("n0", p) for p in range(1, 5)] == ["B", "C", "A", "B"]
    m.shutdown()


def backup_partition(root, segments):
    """A copy of partition r-0 written elsewhere: one sealed segment per ``(start, count)``
    holding values ``b"bak<offset>"``. Returns its partition dir."""
    m = start([root])
    m.create_topic("r", 1)
    lg = m.get_log("r", 0)
    for first, count in segments:
        if lg.log_end_offset != first:
            lg.truncate_fully_and_start_at(first)
        for o in range(first, first + count):
            lg.append([(1000 + o, None, b"bak%d" % o, ())])
        lg.roll()
    m.shutdown()
    return os.path.join(root, "r-0")


def test_restored_older_segments_are_all_adopted(tmp_path, manager_factory):
    """Restoring the lost segments [10, 20) and [20, 30) of a partition that now starts at
    30, both copied in at once (a restore from backup), then one adoption pass of the
    daemon's watcher (``watcher._adopt``: new partitions, then ``Log.adopt_segment`` for every
    ``.log`` of a known partition): both segments join the log and offsets 10..34 are all
    readable, with no hole."""
    backup = backup_partition(str(tmp_path / "backup"), [(0, 10), (10, 10), (20, 10)])
    m = manager_factory()
    m.create_topic("r", 1)
    lg = m.get_log("r", 0)
    lg.truncate_fully_and_start_at(30)
    for o in range(30, 35):
        lg.append([(1000 + o, None, b"live%d" % o, ())])
    for base in (10, 20):
        for suffix in (".log", ".index", ".timeindex"):
            name = f"{base:020d}{suffix}"
            shutil.copy2(os.path.join(backup, name), os.path.join(lg.dir, name))
    assert _adopt(m) is True
    assert [s.base_offset for s in lg.segments()] == [10, 20, 30]
    assert lg.log_start_offset == 10
    assert [(r.offset, r.value) for r in lg.records()] == \
        [(o, b"bak%d" % o) for o in range(10, 30)] + [(o, b"live%d" % o) for o in range(30, 35)]


def test_unclean_restart_recovers_only_from_the_checkpointed_recovery_point(tmp_path):
    """Kafka's ``LogLoader.recoverLog`` after a crash: only the segments from the one holding
    the checkpointed recovery point (17: segment 15) on are recovered. Segments 0, 5 and 10
    are not even rewritten (every file keeps its bytes and mtime); 15 to 30 get their
    indexes rebuilt (same bytes, new mtime); the last one loses its torn tail and gets a
    good index back for the garbage one. Every record is readable, and the recovery point
    is the log end offset."""
    d = str(tmp_path / "logs")
    props = {"log.segment.bytes": "600", "log.index.interval.bytes": "100"}
    m = start([d], **props)
    m.create_topic("t", 1)
    lg = m.get_log("t", 0)
    fill(lg, 40)
    assert [s.base_offset for s in lg.segments()] == [0, 5, 10, 15, 20, 25, 30, 35]
    pdir = lg.dir
    assert m.shutdown() is True
    # the crash: no clean-shutdown marker, the last checkpoint at offset 17, a torn append
    # at the end of the last segment and its index garbage
    os.unlink(os.path.join(d, ".kafka_cleanshutdown"))
    ckpt.write_offset_checkpoint(os.path.join(d, "recovery-point-offset-checkpoint"),
                                 {("t", 0): 17})
    last_log = os.path.join(pdir, "00000000000000000035.log")
    last_index = os.path.join(pdir, "00000000000000000035.index")
    good_log, good_index = read_bytes(last_log), read_bytes(last_index)
    assert len(good_index) > 0
    with open(last_log, "ab") as f:
        f.write(bytes(8) + b"\x00\x00\x01\x00" + b"torn")  # a batch header cut short
    with open(last_index, "wb") as f:
        f.write(b"\xff" * 16)  # relative offset -1: below the base offset
    old = 1_600_000_000 * 10**9
    for n in os.listdir(pdir):
        os.utime(os.path.join(pdir, n), ns=(old, old))
    before = tree_state(pdir)

    m = start([d], **props)
    lg = m.get_log("t", 0)
    after = tree_state(pdir)

    def state(base, suffix):
        path = os.path.join(pdir, f"{base:020d}{suffix}")
        return before[path], after[path]

    for base in (0, 5, 10):  # below the recovery point's segment: not touched at all
        for suffix in (".log", ".index", ".timeindex"):
            was, now = state(base, suffix)
            assert now == was, (base, suffix)
    for base in (15, 20, 25, 30):  # recovered: rebuilt identical
        for suffix in (".index", ".timeindex"):
            was, now = state(base, suffix)
            assert now[:2] == was[:2] and now[2] != old, (base, suffix)
        was, now = state(base, ".log")
        assert now[:2] == was[:2]
    assert os.path.getsize(last_log) == len(good_log)
    assert read_bytes(last_log) == good_log
    assert lg.log_end_offset == 40 and lg.recovery_point == 40
    assert [(r.offset, r.value) for r in lg.records()] == \
        [(i, b"value-%03d" % i + b"x" * 40) for i in range(40)]
    assert m.shutdown() is True
    assert read_bytes(last_index) == good_index  # rebuilt, trimmed at close


# -- loading: recovery threads, lazy managers (issue 19) ---------------------------------------
def _many(d, topics=3, partitions=4, n=12, **props):
    """Topics ``a``, ``b``, ... of ``partitions`` partitions with ``n`` records each, several
    segments, shut down cleanly. Returns the startup properties."""
    props = {"log.segment.bytes": "300", "log.index.interval.bytes": "100", **props}
    m = start([d], **props)
    for t in "abcdefgh"[:topics]:
        m.create_topic(t, partitions)
        for p in range(partitions):
            fill(m.get_log(t, p), n)
    assert m.shutdown() is True
    return props


def _crash(d, torn=()):
    """The state a kill -9 leaves: no clean-shutdown marker, and a torn append at the end of
    the last segment of each partition dir in ``torn``."""
    os.unlink(os.path.join(d, ".kafka_cleanshutdown"))
    for name in torn:
        pdir = os.path.join(d, name)
        last = max(n for n in os.listdir(pdir) if n.endswith(".log"))
        with open(os.path.join(pdir, last), "ab") as f:
            f.write(bytes(8) + b"\x00\x00\x01\x00" + b"torn")


def _loads(monkeypatch):
    """Record the (topic, partition, thread name) of every load_log the manager makes."""
    import threading

    from kafkafs.log import manager as manager_module

    seen = []
    real = manager_module.load_log

    def recording(pdir, topic, partition, *args, **kw):
        seen.append((topic, partition, threading.current_thread().name))
        return real(pdir, topic, partition, *args, **kw)

    monkeypatch.setattr(manager_module, "load_log", recording)
    return seen


def _contents(m):
    return {tp: [(r.offset, r.value) for r in lg.records()] for tp, lg in sorted(m.logs.items())}


@pytest.mark.parametrize("threads", [1, 4])
def test_recovery_threads_recover_every_partition(tmp_path, monkeypatch, threads):
    """``num.recovery.threads.per.data.dir``: the partitions of a log dir are loaded on that
    many threads (Kafka's ``LogManager.loadLogs``) with the same outcome as one: every torn
    tail truncated, every record there, the logs listed in order."""
    d = str(tmp_path / "logs")
    props = _many(d)
    ref = str(tmp_path / "ref")
    shutil.copytree(d, ref)
    names = sorted(n for n in os.listdir(d) if os.path.isdir(os.path.join(d, n)))
    _crash(d, torn=names)
    seen = _loads(monkeypatch)
    m = start([d], **props, **{"num.recovery.threads.per.data.dir": str(threads)})
    assert list(m.logs) == sorted(m.logs)
    assert all(lg.log_end_offset == 12 and lg.recovery_point == 12 for lg in m.logs.values())
    got = _contents(m)
    assert m.shutdown() is True
    if threads > 1:
        assert len({name for _t, _p, name in seen}) > 1  # not all in one thread
        assert all(name.startswith("log-recovery") for _t, _p, name in seen)
    r = start([ref], **props)
    assert got == _contents(r)
    r.shutdown()


def test_recovery_threads_raise_the_first_failure_in_listing_order(tmp_path, monkeypatch):
    from kafkafs.log import manager as manager_module

    d = str(tmp_path / "logs")
    props = _many(d)
    real = manager_module.load_log

    def failing(pdir, topic, partition, *args, **kw):
        if (topic, partition) in (("b", 1), ("c", 2)):
            raise OSError(5, f"disk error in {topic}-{partition}")
        return real(pdir, topic, partition, *args, **kw)

    monkeypatch.setattr(manager_module, "load_log", failing)
    m = LogManager(BrokerConfig.from_properties(
        {**props, "num.recovery.threads.per.data.dir": "3"}).with_log_dirs([d]))
    with pytest.raises(OSError, match="disk error in b-1"):
        m.startup()
    # the marker went before the loads (KAFKA-10471): the next start recovers
    assert not os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
    monkeypatch.undo()
    start([d], **props).shutdown()  # the lock was released


def test_a_lazy_manager_loads_only_what_is_used_and_keeps_the_rest_as_it_was(tmp_path,
                                                                            monkeypatch):
    """The command-line tools' manager: the startup lists the partition dirs and loads none;
    a partition is loaded when first used; the checkpoints keep the entries of the others
    byte for byte (a log start offset above 0 too); a clean start ends with the marker."""
    d = str(tmp_path / "logs")
    props = _many(d)
    m = start([d], **props)
    m.get_log("c", 3).log_start_offset = 5  # a log start offset above 0 to keep
    assert m.shutdown() is True
    checkpoints = {n: read_bytes(os.path.join(d, n)) for n in
                   ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint")}
    assert b"c 3 5" in checkpoints["log-start-offset-checkpoint"]
    seen = _loads(monkeypatch)
    m = LogManager(BrokerConfig.from_properties(props).with_log_dirs([d]), lazy=True)
    m.startup()
    assert not os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))  # as Kafka's startup
    assert (m.loaded(), m.topics(), m.partitions("b")) == (0, ["a", "b", "c"], [0, 1, 2, 3])
    assert seen == []
    lg = m.get_log("b", 2)
    assert lg is m.get_log("b", 2) and [(t, p) for t, p, _n in seen] == [("b", 2)]
    lg.append([(5000, None, b"new", ())])
    assert m.shutdown() is True
    assert [(t, p) for t, p, _n in seen] == [("b", 2)]
    assert os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
    assert read_bytes(os.path.join(d, "log-start-offset-checkpoint")) == \
        checkpoints["log-start-offset-checkpoint"]
    points = ckpt.read_offset_checkpoint(os.path.join(d, "recovery-point-offset-checkpoint"))
    assert points == {**ckpt.parse_offset_checkpoint(
        checkpoints["recovery-point-offset-checkpoint"], "before"), ("b", 2): 13}
    m = start([d], **props)
    assert m.get_log("b", 2).log_end_offset == 13 and m.get_log("c", 3).log_start_offset == 5
    m.shutdown()


def test_a_lazy_writer_after_a_crash_leaves_the_others_to_the_next_full_load(tmp_path):
    """After an unclean shutdown a lazy writer recovers the partitions it uses; its clean
    shutdown does not write the marker while others were never loaded (recovered), so the
    next full load recovers them: a torn tail in one the writer never touched is truncated
    then. A lazy writer that loaded every partition writes the marker."""
    d = str(tmp_path / "logs")
    props = _many(d)
    _crash(d, torn=["a-0", "c-1"])
    m = LogManager(BrokerConfig.from_properties(props).with_log_dirs([d]), lazy=True)
    m.startup()
    lg = m.get_log("a", 0)
    assert lg.log_end_offset == 12  # recovered: the torn tail is gone
    lg.append([(5000, None, b"new", ())])
    assert m.shutdown() is True
    assert not os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
    torn = os.path.join(d, "c-1")
    last = os.path.join(torn, max(n for n in os.listdir(torn) if n.endswith(".log")))
    size = os.path.getsize(last)
    m = LogManager(BrokerConfig.from_properties(props).with_log_dirs([d]), lazy=True)
    m.startup()
    m.load_all()
    assert os.path.getsize(last) == size - 16  # recovered now
    assert m.get_log("c", 1).log_end_offset == 12 and m.get_log("a", 0).log_end_offset == 13
    assert m.shutdown() is True
    assert os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))


def test_a_lazy_manager_deletes_and_alters_topics_without_loading_them(tmp_path, monkeypatch):
    d = str(tmp_path / "logs")
    props = _many(d)
    topic_id = ckpt.read_partition_metadata(os.path.join(d, "b-0", "partition.metadata"))
    seen = _loads(monkeypatch)
    m = LogManager(BrokerConfig.from_properties(props).with_log_dirs([d]), lazy=True)
    m.startup()
    m.delete_topic("a")
    m.add_partitions("b", 6)
    m.alter_topic_config("b", {"retention.ms": "1000"})
    assert m.topics() == ["b", "c"] and m.partitions("b") == list(range(6))
    assert [(t, p) for t, p, _n in seen] == []
    assert m.shutdown() is True
    assert not any(n.startswith("a-") for n in os.listdir(d))
    assert ckpt.read_partition_metadata(os.path.join(d, "b-5", "partition.metadata")) == \
        topic_id
    points = ckpt.read_offset_checkpoint(os.path.join(d, "recovery-point-offset-checkpoint"))
    assert {t for t, _p in points} == {"b", "c"} and points[("b", 5)] == 0
    assert points[("b", 0)] == 12
    m = start([d], **props)
    assert m.get_log("b", 0).config.retention_ms == 1000 and m.topics() == ["b", "c"]
    m.shutdown()


def test_a_lazy_load_that_fails_or_finds_the_dir_gone_loses_nothing(tmp_path, monkeypatch):
    """A partition dir removed after the listing: its first use is a clear
    UnknownTopicOrPartitionError naming the dir, the others work. A load that fails (a disk
    error) fails that use only: the partition stays as it was, checkpoint entries kept."""
    from kafkafs.log import manager as manager_module

    d = str(tmp_path / "logs")
    props = _many(d)
    before = ckpt.read_offset_checkpoint(os.path.join(d, "recovery-point-offset-checkpoint"))
    m = LogManager(BrokerConfig.from_properties(props).with_log_dirs([d]), lazy=True)
    m.startup()
    shutil.rmtree(os.path.join(d, "a-1"))
    with pytest.raises(UnknownTopicOrPartitionError,
                       match="a-1 cannot be used: its directory .*a-1 disappeared"):
        m.get_log("a", 1)
    assert m.partitions("a") == [0, 2, 3]
    real = manager_module.load_log
    calls = []

    def failing(*args, **kw):
        calls.append(args[1:3])
        if len(calls) == 1:
            raise OSError(5, "disk error")
        return real(*args, **kw)

    monkeypatch.setattr(manager_module, "load_log", failing)
    with pytest.raises(OSError, match="disk error"):
        m.get_log("b", 0)
    assert m.loaded() == 0 and m.partitions("b") == [0, 1, 2, 3]
    assert m.get_log("b", 0).log_end_offset == 12  # tried again on the next use
    assert m.shutdown() is True
    after = ckpt.read_offset_checkpoint(os.path.join(d, "recovery-point-offset-checkpoint"))
    assert after == {tp: v for tp, v in before.items() if tp != ("a", 1)}
