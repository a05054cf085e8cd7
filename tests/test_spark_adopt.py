"""The commit of a ``kafkalog`` write that creates a topic, or replaces one with
``mode("overwrite")``, is all or nothing under the job's one commit record, with the appends
of the same job to existing topics: kill -9 of the committing process (the driver, or the
daemon beside a mount) at every step of the adoption (``KAFKAFS_KILL_AT``,
:mod:`kafkafs.log.faults`); then a reader before any recovery (a read-only LogManager, the
Spark local and URI views) sees the topic absent, old or complete -- never some of its new
partitions -- and the next writer finishes it: the topic complete, ``kafkafs check``
clean, no staged dir or record left.

The runs are staged in-process; :func:`kafkafs.spark.publish.publish` runs in a subprocess
without Spark."""

from __future__ import annotations

import os
import pickle
import subprocess

import pytest
from conftest import Mount, kafkafs, needs_fuse
from test_spark_commit import DRIVER, RECOVER, run_py

from kafkafs.log import bulk_commit
from kafkafs.log.config import BrokerConfig, LogConfig
from kafkafs.log.manager import LogManager
from kafkafs.log.staging import new_job_id, remove_job_stage_dirs
from kafkafs.record.batch import encode_batch

KEEP = "keep"  # an existing topic: appended to (mixed job) or replaced (overwrite)
FRESH = "fresh"  # a topic the mixed job creates
OLD_PARTS = 5  # keep's partitions before
NEW_PARTS = 4  # keep's partitions after an overwrite
FRESH_PARTS = 3
PRE = 20
TASKS = 2
BATCHES = 3
PER_BATCH = 20
SEGMENT_BYTES = 4096
OVERRIDES = {"segment.bytes": str(SEGMENT_BYTES)}
NEW_OVERRIDES = {"retention.ms": "-1"}  # an overwrite's config.* option


def manager(logs, **kw) -> LogManager:
    m = LogManager(BrokerConfig().with_log_dirs([str(logs)]), **kw)
    m.startup()
    return m


def pre_value(p, i):
    return b"pre-%d-%d" % (p, i)


def run_value(topic, task, p, i):
    return b"%s-t%d-p%d-%d" % (topic.encode(), task, p, i) + b"x" * 40


def make_keep(logs):
    m = manager(logs)
    try:
        m.create_topic(KEEP, OLD_PARTS, OVERRIDES)
        for p in range(OLD_PARTS):
            lg = m.get_log(KEEP, p)
            for i in range(PRE):
                lg.append([(1_700_000_000_000 + i, None, pre_value(p, i), ())])
    finally:
        m.shutdown()


def plan_of(logs, overwrite: bool):
    from kafkafs.spark.write_plan import WritePlan

    if overwrite:  # keep replaced by NEW_PARTS partitions
        return WritePlan(log_dir=str(logs), job_id=new_job_id(), topic=KEEP, overwrite=True,
                         default_partitions=1, partitions_option=NEW_PARTS,
                         topic_defaults=LogConfig(), config_overrides=dict(NEW_OVERRIDES),
                         existing={KEEP: OLD_PARTS}, existing_overrides={KEEP: dict(OVERRIDES)},
                         lock_timeout_ms=5000)
    # a topic column: keep appended to, fresh created
    return WritePlan(log_dir=str(logs), job_id=new_job_id(), topic=None, overwrite=False,
                     default_partitions=FRESH_PARTS, partitions_option=None,
                     topic_defaults=LogConfig(), config_overrides=dict(OVERRIDES),
                     existing={KEEP: OLD_PARTS}, existing_overrides={KEEP: dict(OVERRIDES)},
                     lock_timeout_ms=5000)


def written(overwrite: bool) -> dict[str, int]:
    """topic -> partitions the job stages rows for."""
    return {KEEP: NEW_PARTS} if overwrite else {KEEP: OLD_PARTS, FRESH: FRESH_PARTS}


def stage(logs, overwrite: bool):
    """Stage TASKS tasks' runs (the last partition of each written topic gets no rows: an
    empty log); returns the pickle of (plan, messages)."""
    from kafkafs.spark.stage import TaskStager

    plan = plan_of(logs, overwrite)
    messages = []
    for task in range(TASKS):
        stager = TaskStager(plan)
        for topic, n in written(overwrite).items():
            for p in range(n - 1 if topic != KEEP or overwrite else n):
                batches = []
                for b in range(BATCHES):
                    recs = [(1_700_000_100_000, None,
                             run_value(topic, task, p, b * PER_BATCH + i), ())
                            for i in range(PER_BATCH)]
                    batches.append(bytearray(encode_batch(recs)))
                stager.append(topic, p, batches)
        messages.append(stager.finish())
    path = os.path.join(os.path.dirname(str(logs)), f"job-{plan.job_id}.pickle")
    with open(path, "wb") as f:
        pickle.dump((plan, messages), f)
    return path


def new_values(topic, p, n) -> list[bytes]:
    if p == n - 1 and (topic == FRESH or n == NEW_PARTS):
        return []
    return [run_value(topic, t, p, i) for t in range(TASKS) for i in range(BATCHES * PER_BATCH)]


def expected(overwrite: bool, published: bool) -> dict[str, dict[int, list[bytes]]]:
    old = {p: [pre_value(p, i) for i in range(PRE)] for p in range(OLD_PARTS)}
    if not published:
        return {KEEP: old}
    if overwrite:
        return {KEEP: {p: new_values(KEEP, p, NEW_PARTS) for p in range(NEW_PARTS)}}
    return {KEEP: {p: old[p] + new_values(KEEP, p, OLD_PARTS) for p in range(OLD_PARTS)},
            FRESH: {p: new_values(FRESH, p, FRESH_PARTS) for p in range(FRESH_PARTS)}}


def seen_read_only(logs) -> dict[str, dict[int, list[bytes]]]:
    """What a read-only LogManager (``kafkafs consume``, a read-only mount) shows."""
    m = manager(logs, read_only=True)
    try:
        return {t: {p: [r.value for r in m.get_log(t, p).records()] for p in m.partitions(t)}
                for t in m.topics()}
    finally:
        m.shutdown()


def seen_spark_views(logs) -> dict[str, dict[int, list[bytes]]]:
    """What the Spark read path's local views plan over; a URI plans the same."""
    from kafkafs.spark.views import open_arrow_views, open_local_views

    out: dict = {}
    planned = {}
    for v in open_local_views(str(logs), lambda t: True):
        try:
            out.setdefault(v.topic, {})[v.partition] = [
                r.value for r in v.log.records(end_offset=v.log_end_offset)]
            planned[(v.topic, v.partition)] = v.log_end_offset
        finally:
            v.close()
    arrow = {(v.topic, v.partition): v.log_end_offset
             for v in open_arrow_views(f"file://{logs}", lambda t: True)}
    assert arrow == planned
    return out


def assert_whole(seen, overwrite: bool) -> set[str]:
    """Each topic absent, as before or complete, and the job all or nothing; returns the
    states seen ("before", "after")."""
    before, after = expected(overwrite, False), expected(overwrite, True)
    states = set()
    assert set(seen) <= set(before) | set(after), sorted(seen)
    for topic in sorted(set(before) | set(after)):
        got = seen.get(topic)
        if got is None:
            assert topic in after, topic  # (absent: a topic being adopted, hidden)
            states.add("hidden")
        elif got == before.get(topic):
            states.add("before")
        else:
            assert got == after.get(topic), (topic, {p: len(v) for p, v in got.items()})
            states.add("after")
    assert not {"before", "after"} <= states and not {"hidden", "after"} <= states, states
    if not overwrite:  # fresh appears only with keep's appends
        assert ("after" in states) == (seen.get(FRESH) is not None), states
    return states


def assert_finished(logs, overwrite: bool, published: bool):
    assert seen_read_only(logs) == expected(overwrite, published)
    names = os.listdir(logs)
    assert not [n for n in names if n.startswith(bulk_commit.RECORD_PREFIX)], names
    if published:  # (a job killed before its record leaves its staged dirs, harmless)
        assert not [n for n in names if n.endswith("-delete")], names
    r = kafkafs("check", "--log-dirs", str(logs), check=False)
    assert r.returncode == 0 and b"clean" in r.stdout, r.stdout + r.stderr
    if published and overwrite:
        m = manager(logs, read_only=True)
        try:
            assert m.topic_overrides(KEEP) == {**OVERRIDES, **NEW_OVERRIDES}
        finally:
            m.shutdown()


def records_left(logs) -> bool:
    return any(bulk_commit.is_record_name(n) for n in os.listdir(logs))


# (overwrite, step) -> published once the next writer is done
STEPS = {
    (False, "commit-before-record"): False,
    (False, "commit-record-tmp"): False,
    (False, "commit-record-written"): True,  # nothing renamed yet
    (False, "adopt-rename#1"): True,         # fresh-0 in, fresh-1 and -2 staged
    (False, "adopt-rename#3"): True,         # every dir of fresh in, checkpoints, config
    (False, "adopt-topic-done"): True,       # fresh done, keep not appended to yet
    (False, "commit-append#2"): True,        # keep-0 half appended (torn)
    (False, "commit-partition-done#5"): True,
    (False, "commit-record-removed"): True,
    (True, "commit-before-record"): False,
    (True, "commit-record-written"): True,
    (True, "adopt-old-renamed#1"): True,     # keep-0 renamed away, the others still there
    (True, "adopt-old-renamed#5"): True,     # every old dir away, no new one in
    (True, "adopt-rename#2"): True,          # two new dirs in
    (True, "adopt-rename#4"): True,          # all new in, old ones not yet removed
    (True, "adopt-topic-done"): True,
    (True, "commit-record-removed"): True,
}


@pytest.mark.parametrize("overwrite,step", list(STEPS),
                         ids=[f"{'overwrite' if o else 'new'}-{s}" for o, s in STEPS])
def test_driver_killed_at_each_step_of_an_adoption(tmp_path, overwrite, step):
    logs = tmp_path / "logs"
    make_keep(logs)
    job = stage(logs, overwrite)
    published = STEPS[(overwrite, step)]
    run_py(DRIVER, job, kill_at=step)
    recorded = records_left(logs)
    assert recorded == (published and step != "commit-record-removed")
    for seen in (seen_read_only(logs), seen_spark_views(logs)):
        states = assert_whole(seen, overwrite)
        if recorded:  # a commit not finished: its new topics hidden, its appends not shown
            assert states <= {"hidden", "before"}, states
            assert "hidden" in states
    run_py(RECOVER, str(logs))
    assert_finished(logs, overwrite, published)


def test_a_recovery_killed_midway_is_finished_by_the_next(tmp_path):
    logs = tmp_path / "logs"
    make_keep(logs)
    run_py(DRIVER, stage(logs, True), kill_at="adopt-old-renamed#2")
    run_py(RECOVER, str(logs), kill_at="adopt-old-renamed#2")
    assert_whole(seen_read_only(logs), True)
    run_py(RECOVER, str(logs), kill_at="adopt-rename#2")
    assert_whole(seen_read_only(logs), True)
    run_py(RECOVER, str(logs), kill_at="adopt-topic-done")
    assert_whole(seen_read_only(logs), True)
    run_py(RECOVER, str(logs))
    assert_finished(logs, True, True)


def test_check_repair_finishes_an_adoption(tmp_path):
    logs = tmp_path / "logs"
    make_keep(logs)
    run_py(DRIVER, stage(logs, False), kill_at="adopt-rename#2")
    r = kafkafs("check", "--log-dirs", str(logs), check=False)
    assert r.returncode == 1 and b"topic fresh (created, 3 partition(s))" in r.stdout, r.stdout
    r = kafkafs("check", "--repair", "--log-dirs", str(logs), check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert_finished(logs, False, True)


def test_a_staged_dir_gone_is_refused(tmp_path):
    """A staged dir deleted before it was renamed in (a Kafka broker started on the log dir
    deletes -delete dirs): the recovery refuses, record kept."""
    logs = tmp_path / "logs"
    make_keep(logs)
    run_py(DRIVER, stage(logs, False), kill_at="commit-record-written")
    for n in os.listdir(logs):
        if n.startswith(f"{FRESH}-1.") and n.endswith("-delete"):
            bulk_commit.safeio.remove_tree(os.path.join(logs, n))
    with pytest.raises(bulk_commit.CommitRecoveryError, match="gone"):
        manager(logs, lazy=True)
    assert records_left(logs)


def test_an_existing_topic_to_create_is_refused_before_the_record(tmp_path):
    """A topic the job meant to create that someone else created meanwhile: refused,
    nothing published (the appends of the job neither)."""
    logs = tmp_path / "logs"
    make_keep(logs)
    job = stage(logs, False)
    m = manager(logs)
    try:
        m.create_topic(FRESH, FRESH_PARTS - 1)
    finally:
        m.shutdown()
    r = run_py(DRIVER, job)
    assert r.returncode != 0 and b"created by someone else" in r.stderr, r.stderr[-2000:]
    seen = seen_read_only(logs)
    assert seen[KEEP] == expected(False, False)[KEEP]
    assert seen[FRESH] == {p: [] for p in range(FRESH_PARTS - 1)}
    assert not records_left(logs)
    assert not [n for n in os.listdir(logs) if n.endswith("-delete")]


# -- beside a mount: the daemon publishes the whole job in one request --------------------

DAEMON_STEPS = [(False, "commit-record-written"), (False, "adopt-rename#2"),
                (False, "adopt-topic-done"), (False, "commit-append#2"),
                (True, "adopt-old-renamed#3"), (True, "adopt-rename#1"),
                (True, "adopt-topic-done")]


def mount_values(m, topics) -> dict[str, dict[int, list[bytes]]]:
    out = {}
    for t in topics:
        parts = sorted(int(n) for n in os.listdir(m.path(t)) if n.isdigit())
        out[t] = {}
        for p in parts:
            with open(m.path(t, str(p), "messages"), "rb") as f:
                out[t][p] = f.read().splitlines()
    return out


@needs_fuse
@pytest.mark.parametrize("overwrite,step", DAEMON_STEPS,
                         ids=[f"{'overwrite' if o else 'new'}-{s}" for o, s in DAEMON_STEPS])
def test_daemon_killed_at_each_step_of_an_adoption(tmp_path, monkeypatch, overwrite, step):
    logs = tmp_path / "logs"
    make_keep(logs)
    job = stage(logs, overwrite)
    monkeypatch.setenv(bulk_commit.faults.ENV, step)
    m = Mount(tmp_path)
    m.start()
    monkeypatch.delenv(bulk_commit.faults.ENV)
    try:
        r = run_py(DRIVER, job)
        assert r.returncode != 0 and b"refused" in r.stderr, r.stderr.decode()[-2000:]
        m.proc.wait(10)
        assert m.proc.returncode == -9, m.log()[-2000:]
    finally:
        m.stop()
        subprocess.run(["fusermount3", "-uz", m.mnt], capture_output=True, check=False)
    assert records_left(logs)
    for seen in (seen_read_only(logs), seen_spark_views(logs)):
        states = assert_whole(seen, overwrite)
        assert states <= {"hidden", "before"} and "hidden" in states, states
    m2 = Mount(tmp_path)  # the daemon's next startup finishes it
    m2.start()
    try:
        want = expected(overwrite, True)
        assert mount_values(m2, want) == want
    finally:
        assert m2.umount() == 0
    assert_finished(logs, overwrite, True)


@needs_fuse
@pytest.mark.parametrize("overwrite", [False, True], ids=["new", "overwrite"])
def test_a_job_through_the_daemon(tmp_path, overwrite):
    """A driver killed before it asked changes nothing; the next job is published in one
    request, visible through the mount at once (a replaced topic's old partitions gone)."""
    logs = tmp_path / "logs"
    make_keep(logs)
    m = Mount(tmp_path)
    m.start()
    killed = stage(logs, overwrite)
    try:
        run_py(DRIVER, killed, kill_at="commit-request-written")
        assert mount_values(m, [KEEP]) == expected(overwrite, False)
        r = run_py(DRIVER, stage(logs, overwrite))
        assert r.returncode == 0, r.stderr.decode()[-2000:]
        want = expected(overwrite, True)
        assert mount_values(m, want) == want
        assert sorted(n for n in os.listdir(m.mnt) if not n.startswith(".")) == sorted(want)
        assert "Committed job" in m.log()
    finally:
        assert m.umount() == 0
    run_py(RECOVER, str(logs))  # (removes the killed driver's request)
    with open(killed, "rb") as f:  # its staged dirs: removed by hand (docs/spark.md)
        remove_job_stage_dirs(str(logs), pickle.load(f)[0].job_id)
    assert_finished(logs, overwrite, True)


def test_a_read_only_follower_takes_a_new_topic_in_once_complete(tmp_path):
    """A read-only manager (a read-only mount's watcher) does not take in the partition dirs
    of a topic being adopted, and takes them in once the record is gone."""
    logs = tmp_path / "logs"
    make_keep(logs)
    run_py(DRIVER, stage(logs, False), kill_at="adopt-rename#2")
    m = manager(logs, read_only=True)
    try:
        assert m.topics() == [KEEP]
        assert m.scan_for_new_partitions() == []
        run_py(RECOVER, str(logs))
        new = m.scan_for_new_partitions()
        assert sorted((lg.topic, lg.partition) for lg in new) == \
            [(FRESH, p) for p in range(FRESH_PARTS)]
        assert {p: [r.value for r in m.get_log(FRESH, p).records()]
                for p in range(FRESH_PARTS)} == expected(False, True)[FRESH]
    finally:
        m.shutdown()


@needs_fuse
def test_an_adoption_failing_in_the_daemon_after_its_record(tmp_path, monkeypatch):
    """ENOSPC (injected) among the renames of an overwrite: the driver is told, the daemon
    goes on serving (its locks released), and its next start finishes the job."""
    logs = tmp_path / "logs"
    make_keep(logs)
    job = stage(logs, True)
    monkeypatch.setenv(bulk_commit.faults.FAIL_ENV, "adopt-rename#2")
    m = Mount(tmp_path)
    m.start()
    monkeypatch.delenv(bulk_commit.faults.FAIL_ENV)
    try:
        r = run_py(DRIVER, job)
        assert r.returncode != 0 and b"no space left" in r.stderr, r.stderr.decode()[-2000:]
        assert records_left(logs)
        os.listdir(m.mnt)  # still served
        assert m.proc.poll() is None
        second = stage(logs, True)  # another job on that topic: refused until the restart
        r = run_py(DRIVER, second)
        assert r.returncode != 0 and b"EIO" in r.stderr, r.stderr.decode()[-2000:]
    finally:
        assert m.umount() == 0
    m2 = Mount(tmp_path)
    m2.start()
    try:
        want = expected(True, True)
        assert mount_values(m2, want) == want
    finally:
        assert m2.umount() == 0
    with open(second, "rb") as f:  # the refused job's staged dirs (its driver's abort)
        remove_job_stage_dirs(str(logs), pickle.load(f)[0].job_id)
    assert_finished(logs, True, True)


MULTI = """
import pickle, sys
from kafkafs.log import bulk_commit
from kafkafs.log.config import BrokerConfig
from kafkafs.log.manager import LogManager
dirs, job, staged = pickle.loads(bytes.fromhex(sys.argv[1]))
m = LogManager(BrokerConfig().with_log_dirs(dirs))
m.startup()
try:
    m.commit_job(dirs[0], job, [bulk_commit.TopicAdoption("keep", staged, {}, replace=True)],
                 {})
finally:
    m.shutdown()
"""

MULTI_RECOVER = """
import sys
from kafkafs.log.config import BrokerConfig
from kafkafs.log.manager import LogManager
m = LogManager(BrokerConfig().with_log_dirs(sys.argv[1:]))
m.startup()
m.shutdown()
"""


@pytest.mark.parametrize("step", ["adopt-old-renamed#2", "adopt-old-renamed#4",
                                  "adopt-rename#1", "adopt-topic-done"])
def test_an_overwrite_with_old_partitions_in_another_log_dir(tmp_path, step):
    """A manager on two log dirs: the replaced topic's partitions lie in both, the new ones
    are staged in the first; killed at each step, the topic is hidden, then whole."""
    from kafkafs.log.staging import create_stage_log, finish_stage_log, new_stage_id

    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    m = LogManager(BrokerConfig().with_log_dirs(dirs))
    m.startup()
    try:
        m.create_topic(KEEP, 4)
        assert {os.path.dirname(m.get_log(KEEP, p).dir) for p in range(4)} == set(dirs)
        for p in range(4):
            m.get_log(KEEP, p).append([(1, None, b"old-%d" % p, ())])
    finally:
        m.shutdown()
    job = new_job_id()
    staged = {}
    for p in range(3):
        sid = new_stage_id(job)
        lg = create_stage_log(dirs[0], KEEP, p, sid, LogConfig())
        lg.append([(2, None, b"new-%d" % p, ())])
        finish_stage_log(lg)
        staged[p] = f"{KEEP}-{p}.{sid}-delete"
    run_py(MULTI, pickle.dumps((dirs, job, staged)).hex(), kill_at=step)

    def seen():
        ro = LogManager(BrokerConfig().with_log_dirs(dirs), read_only=True)
        ro.startup()
        try:
            return {p: [r.value for r in ro.get_log(KEEP, p).records()]
                    for p in ro.partitions(KEEP)}
        finally:
            ro.shutdown()

    assert seen() == {}  # hidden while the record exists
    run_py(MULTI_RECOVER, *dirs)
    assert seen() == {p: [b"new-%d" % p] for p in range(3)}
    for d in dirs:
        names = os.listdir(d)
        assert not [n for n in names if n.endswith("-delete") or bulk_commit.is_record_name(n)]
        r = kafkafs("check", "--log-dirs", d, check=False)
        assert r.returncode == 0 and b"clean" in r.stdout, r.stdout + r.stderr
    assert not [n for n in os.listdir(dirs[1]) if n.startswith(f"{KEEP}-")]
