"""LogManager: several log dirs, locks, checkpoints, topic configs, adoption."""

from __future__ import annotations

import os
import shutil
import time

import pytest
from conftest import tree_state

from kafkafs.daemon.watcher import _adopt
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
