"""The commit of a ``kafkalog`` write to existing partitions is all or nothing: kill -9 of
the committing process (the driver, or the daemon beside a mount) at every step of the
commit (``KAFKAFS_KILL_AT``, :mod:`kafkafs.log.faults`), then a reader before any recovery
sees each partition without the write or with all of it, and the next writer (a CLI
LogManager, the daemon's startup, the next Spark write) finishes it: every partition holds
every row once, in order, no torn tail, ``kafkafs check`` clean.

Most tests stage runs in-process and run :func:`kafkafs.spark.publish.publish` in a
subprocess without Spark (fast); one goes through a real Spark write."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT, Mount, kafkafs, needs_fuse

from kafkafs.log import bulk_commit
from kafkafs.log.config import BrokerConfig, LogConfig
from kafkafs.log.loader import load_log
from kafkafs.log.manager import LogManager
from kafkafs.log.staging import new_job_id
from kafkafs.record.batch import encode_batch

TOPIC = "keep"
PARTS = 4
PRE = 30  # records per partition before the write
TASKS = 2
BATCHES = 4  # per run
PER_BATCH = 25
SEGMENT_BYTES = 4096  # small: the commit rolls segments
OVERRIDES = {"segment.bytes": str(SEGMENT_BYTES)}


def manager(logs, **kw) -> LogManager:
    m = LogManager(BrokerConfig().with_log_dirs([str(logs)]), **kw)
    m.startup()
    return m


def pre_value(p, i):
    return b"pre-%d-%d" % (p, i)


def run_value(task, p, i):
    return b"t%d-p%d-%d" % (task, p, i) + b"x" * 40


def make_topic(logs):
    m = manager(logs)
    try:
        m.create_topic(TOPIC, PARTS, OVERRIDES)
        for p in range(PARTS):
            lg = m.get_log(TOPIC, p)
            for i in range(PRE):
                lg.append([(1_700_000_000_000 + i, None, pre_value(p, i), ())])
    finally:
        m.shutdown()


def plan_of(logs):
    from kafkafs.spark.write_plan import WritePlan

    return WritePlan(log_dir=str(logs), job_id=new_job_id(), topic=TOPIC, overwrite=False,
                     default_partitions=1, partitions_option=None, topic_defaults=LogConfig(),
                     config_overrides={}, existing={TOPIC: PARTS},
                     existing_overrides={TOPIC: dict(OVERRIDES)}, lock_timeout_ms=5000)


def stage(logs):
    """Stage TASKS tasks' runs for every partition; returns the pickle of (plan, messages)."""
    from kafkafs.spark.stage import TaskStager

    plan = plan_of(logs)
    messages = []
    for task in range(TASKS):
        stager = TaskStager(plan)
        for p in range(PARTS):
            batches = []
            for b in range(BATCHES):
                recs = [(1_700_000_100_000, None, run_value(task, p, b * PER_BATCH + i), ())
                        for i in range(PER_BATCH)]
                batches.append(bytearray(encode_batch(recs)))
            stager.append(TOPIC, p, batches)
        messages.append(stager.finish())
    path = os.path.join(os.path.dirname(str(logs)), "job.pickle")
    with open(path, "wb") as f:
        pickle.dump((plan, messages), f)
    return path


def expected(p, published: bool) -> list[bytes]:
    out = [pre_value(p, i) for i in range(PRE)]
    if published:
        out += [run_value(t, p, i) for t in range(TASKS) for i in range(BATCHES * PER_BATCH)]
    return out


DRIVER = textwrap.dedent("""
    import pickle, sys
    from kafkafs.spark.publish import publish
    with open(sys.argv[1], "rb") as f:
        plan, messages = pickle.load(f)
    publish(plan, messages)
""")

RECOVER = textwrap.dedent("""
    import sys
    from kafkafs.log.config import BrokerConfig
    from kafkafs.log.manager import LogManager
    m = LogManager(BrokerConfig().with_log_dirs([sys.argv[1]]), lazy=True)
    m.startup()
    m.load_all()  # (recovers the torn tails, so that the shutdown is clean)
    m.shutdown()
""")


def run_py(code, *args, kill_at=None, check_killed=True):
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop(bulk_commit.faults.ENV, None)
    if kill_at:
        env[bulk_commit.faults.ENV] = kill_at
    r = subprocess.run([sys.executable, "-c", code, *args], env=env, cwd=ROOT,
                       capture_output=True, timeout=120, check=False)
    if kill_at and check_killed:
        assert r.returncode == -9, (r.returncode, r.stderr.decode()[-3000:])
    return r


def values_read_only(logs) -> dict[int, list[bytes]]:
    """What a read-only LogManager (``kafkafs consume``, a read-only mount) shows."""
    m = manager(logs, read_only=True)
    try:
        return {p: [r.value for r in m.get_log(TOPIC, p).records()] for p in range(PARTS)}
    finally:
        m.shutdown()


def values_spark_views(logs) -> dict[int, list[bytes]]:
    """What the Spark read path's local views plan over (end offsets, segment sizes)."""
    from kafkafs.spark.views import open_arrow_views, open_local_views

    out, planned = {}, {}
    for v in open_local_views(str(logs), lambda t: t == TOPIC):
        try:
            assert sum(s.size for s in v.segments) == v.log.size_in_bytes()
            out[v.partition] = [r.value for r in v.log.records(end_offset=v.log_end_offset)]
            planned[v.partition] = (v.log_end_offset, [(s.base_offset, s.size)
                                                       for s in v.segments])
        finally:
            v.close()
    # a URI (object storage) plans the same offsets and bytes
    for v in open_arrow_views(f"file://{logs}", lambda t: t == TOPIC):
        assert (v.log_end_offset, [(s.base_offset, s.size) for s in v.segments]) == \
            planned[v.partition]
    return out


def values_consumed(logs) -> dict[int, list[bytes]]:
    """What ``kafkafs consume --from-beginning`` prints, per partition."""
    out = {}
    for p in range(PARTS):
        r = kafkafs("consume", "--log-dirs", str(logs), "--topic", TOPIC, "--partition",
                    str(p), "--from-beginning", "--timeout-ms", "0")
        out[p] = r.stdout.splitlines()
    return out


def assert_all_or_nothing(seen: dict[int, list[bytes]], allow_published=True):
    states = set()
    for p in range(PARTS):
        if seen[p] == expected(p, False):
            states.add(False)
        else:
            assert allow_published and seen[p] == expected(p, True), (p, len(seen[p]))
            states.add(True)
    return states


def assert_finished(logs, published: bool):
    seen = values_read_only(logs)
    for p in range(PARTS):
        assert seen[p] == expected(p, published), (p, len(seen[p]), len(expected(p, published)))
    names = os.listdir(logs)
    assert not [n for n in names if n.startswith(bulk_commit.RECORD_PREFIX)], names
    r = kafkafs("check", "--log-dirs", str(logs), check=False)
    assert r.returncode == 0 and b"clean" in r.stdout, r.stdout + r.stderr


def tear_tail(logs, p):
    """What a kill in the middle of a write(2) leaves: part of a batch at the tail."""
    pdir = os.path.join(logs, f"{TOPIC}-{p}")
    last = max(n for n in os.listdir(pdir) if n.endswith(".log"))
    batch = encode_batch([(1, None, b"torn" * 50, ())], base_offset=10**6)
    with open(os.path.join(pdir, last), "ab") as f:
        f.write(batch[: len(batch) // 2])


# step -> (published once the next writer is done, partition left with a torn tail)
STEPS = {
    "commit-before-record": (False, None),
    "commit-record-tmp": (False, None),
    "commit-record-written": (True, None),
    # each staged run has 2 segments (segment.bytes), each appended as one chunk: 4 per
    # partition
    "commit-append#1": (True, 0),   # keep-0 holds half of task 0's run, then a torn batch
    "commit-append#3": (True, 0),   # keep-0 holds task 0's run and half of task 1's, torn
    "commit-append#6": (True, 1),   # keep-0 done, keep-1 half-way, torn
    "commit-partition-done#1": (True, None),
    "commit-partition-done#4": (True, None),  # all appended, record still there
    "commit-record-removed": (True, None),
}


@pytest.mark.parametrize("step", list(STEPS))
def test_driver_killed_at_each_step_of_the_commit(tmp_path, step):
    logs = tmp_path / "logs"
    make_topic(logs)
    job = stage(logs)
    published, torn = STEPS[step]
    run_py(DRIVER, job, kill_at=step)
    if torn is not None:
        # the partition is between before and after (on disk: the readers' limit aside)
        lg = load_log(str(logs / f"{TOPIC}-{torn}"), TOPIC, torn, LogConfig(), writable=False)
        try:
            assert PRE < lg.log_end_offset < PRE + TASKS * BATCHES * PER_BATCH
        finally:
            lg.close()
        tear_tail(str(logs), torn)
    recorded = any(n.startswith(bulk_commit.RECORD_PREFIX) and n.endswith(".json")
                   for n in os.listdir(logs))
    assert recorded == (published and step != "commit-record-removed")
    # readers before any recovery: each partition without the write or with all of it
    for seen in (values_read_only(logs), values_spark_views(logs), values_consumed(logs)):
        states = assert_all_or_nothing(seen)
        if recorded:
            assert states == {False}  # a commit not finished is not shown
    # the next writer (a CLI writer: a lazy LogManager) finishes the commit
    run_py(RECOVER, str(logs))
    assert_finished(logs, published)
    if published:
        assert not [n for n in os.listdir(logs) if n.endswith("-delete")]


def test_a_recovery_killed_midway_is_finished_by_the_next(tmp_path):
    logs = tmp_path / "logs"
    make_topic(logs)
    job = stage(logs)
    run_py(DRIVER, job, kill_at="commit-append#1")
    tear_tail(str(logs), 0)
    run_py(RECOVER, str(logs), kill_at="recover-partition-done#2")
    assert_all_or_nothing(values_read_only(logs))
    run_py(RECOVER, str(logs), kill_at="commit-append#2")  # killed again, in the middle
    assert_all_or_nothing(values_read_only(logs))
    run_py(RECOVER, str(logs))
    assert_finished(logs, True)


def test_the_next_spark_commit_finishes_an_interrupted_one(tmp_path):
    logs = tmp_path / "logs"
    make_topic(logs)
    job = stage(logs)
    run_py(DRIVER, job, kill_at="commit-append#3")
    job2 = stage(logs)  # a second write, committed by a driver that finds the first one
    r = run_py(DRIVER, job2)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    seen = values_read_only(logs)
    for p in range(PARTS):
        runs = expected(p, True)[PRE:]
        assert seen[p] == expected(p, False) + runs + runs
    assert not [n for n in os.listdir(logs) if n.endswith("-delete")]


def test_a_record_that_cannot_be_rolled_forward_is_refused(tmp_path):
    logs = tmp_path / "logs"
    make_topic(logs)
    job = stage(logs)
    run_py(DRIVER, job, kill_at="commit-record-written")
    for n in os.listdir(logs):
        if n.endswith("-delete") and n.startswith(f"{TOPIC}-2."):
            bulk_commit.safeio.remove_tree(os.path.join(logs, n))  # as a broker would
    with pytest.raises(bulk_commit.CommitRecoveryError, match="gone"):
        manager(logs, lazy=True)
    assert [n for n in os.listdir(logs) if n.startswith(bulk_commit.RECORD_PREFIX)]


# -- beside a mount: the daemon commits, in one request -----------------------------------

DAEMON_STEPS = ["commit-record-written", "commit-append#1", "commit-append#3",
                "commit-partition-done#4"]


@needs_fuse
@pytest.mark.parametrize("step", DAEMON_STEPS)
def test_daemon_killed_at_each_step_of_the_commit(tmp_path, monkeypatch, step):
    logs = tmp_path / "logs"
    make_topic(logs)
    job = stage(logs)
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
        # the dead daemon's mount (ismount cannot see it: ENOTCONN)
        subprocess.run(["fusermount3", "-uz", m.mnt], capture_output=True, check=False)
    states = assert_all_or_nothing(values_read_only(logs))
    assert states == {False}
    # the daemon's next startup finishes it
    m2 = Mount(tmp_path)
    m2.start()
    try:
        for p in range(PARTS):
            with open(m2.path(TOPIC, str(p), "messages"), "rb") as f:
                assert f.read().splitlines() == expected(p, True)
    finally:
        assert m2.umount() == 0
    assert_finished(logs, True)


@needs_fuse
def test_driver_killed_beside_a_mount(tmp_path):
    logs = tmp_path / "logs"
    make_topic(logs)
    m = Mount(tmp_path)
    m.start()
    try:
        run_py(DRIVER, stage(logs), kill_at="commit-request-written")
        for p in range(PARTS):  # nothing asked, nothing written
            with open(m.path(TOPIC, str(p), "messages"), "rb") as f:
                assert f.read().splitlines() == expected(p, False)
        r = run_py(DRIVER, stage(logs))  # one request: every partition at once
        assert r.returncode == 0, r.stderr.decode()[-2000:]
        for p in range(PARTS):
            with open(m.path(TOPIC, str(p), "messages"), "rb") as f:
                got = f.read().splitlines()
            assert got == expected(p, True), (p, len(got))
        assert "Committed job" in m.log()
    finally:
        assert m.umount() == 0
    # the killed driver's request is left (a regular file, ignored); the next writable open
    # of the log dir removes it
    assert [n for n in os.listdir(logs) if n.endswith(".request.json")]
    run_py(RECOVER, str(logs))
    assert_finished(logs, True)
    assert not [n for n in os.listdir(logs) if n.startswith(bulk_commit.RECORD_PREFIX)]


# -- through a real Spark write -----------------------------------------------------------

SPARK_DRIVER = textwrap.dedent("""
    import sys
    import kafkafs.spark
    spark = kafkafs.spark.session("local[2]", "commit-kill")
    rows = [(b"k%d" % i, b"v%d" % i) for i in range(4000)]
    df = spark.createDataFrame(rows, "key binary, value binary").repartition(2)
    df.write.format("kafkalog").mode("append").option("topic", "keep").save(sys.argv[1])
""")


@pytest.mark.spark
def test_a_spark_commit_killed_midway(tmp_path):
    """PySpark runs a data source's commit in a Python worker of the driver: killed there,
    the job fails and Spark calls the abort, which must leave a recorded commit alone."""
    logs = tmp_path / "logs"
    make_topic(logs)
    r = run_py(SPARK_DRIVER, str(logs), kill_at="commit-append#3", check_killed=False)
    assert r.returncode != 0 and b"Python worker exited unexpectedly" in r.stderr
    assert [n for n in os.listdir(logs) if n.startswith(bulk_commit.RECORD_PREFIX)]
    seen = values_read_only(logs)
    assert assert_all_or_nothing_counts(seen) == {PRE}
    run_py(RECOVER, str(logs))
    seen = values_read_only(logs)
    assert sum(len(v) for v in seen.values()) == PARTS * PRE + 4000
    assert sorted(v for p in range(PARTS) for v in seen[p][PRE:]) == \
        sorted(b"v%d" % i for i in range(4000))
    r = kafkafs("check", "--log-dirs", str(logs), check=False)
    assert r.returncode == 0 and b"clean" in r.stdout, r.stdout + r.stderr


def assert_all_or_nothing_counts(seen):
    return {len(v) for v in seen.values()}


def test_check_reports_an_interrupted_commit_and_repair_finishes_it(tmp_path):
    logs = tmp_path / "logs"
    make_topic(logs)
    run_py(DRIVER, stage(logs), kill_at="commit-append#3")
    tear_tail(str(logs), 1)
    r = kafkafs("check", "--log-dirs", str(logs), check=False)
    assert r.returncode == 1 and b"interrupted kafkalog commit" in r.stdout, r.stdout
    assert b"keep-0 (30..230)" in r.stdout
    r = kafkafs("check", "--repair", "--log-dirs", str(logs), check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert b"rolled forward" in r.stdout, r.stdout
    assert_finished(logs, True)


def test_a_reader_held_at_before_sees_the_rest_once_the_commit_finished(tmp_path):
    logs = tmp_path / "logs"
    make_topic(logs)
    run_py(DRIVER, stage(logs), kill_at="commit-append#6")
    m = manager(logs, read_only=True)
    try:
        logs_ = [m.get_log(TOPIC, p) for p in range(PARTS)]
        for lg in logs_:  # following (consume, a read-only mount): still held back
            assert not lg.refresh_from_disk()
            assert lg.log_end_offset == PRE
        run_py(RECOVER, str(logs))
        for p, lg in enumerate(logs_):
            assert lg.refresh_from_disk()
            assert [r.value for r in lg.records()] == expected(p, True)
    finally:
        m.shutdown()


@needs_fuse
def test_a_commit_failing_in_the_daemon_after_its_record(tmp_path, monkeypatch):
    """ENOSPC (injected) after the record: the driver is told, appends through the mount to
    those partitions are refused (they would land past the commit), and the daemon's next
    start finishes it."""
    logs = tmp_path / "logs"
    make_topic(logs)
    m0 = manager(logs)  # a keyed record in partition 0, for the key view's rm below
    try:
        m0.get_log(TOPIC, 0).append([(1_700_000_100_000, b"k0", b"keyed", ())])
    finally:
        m0.shutdown()
    job = stage(logs)
    monkeypatch.setenv(bulk_commit.faults.FAIL_ENV, "commit-partition-done#2")
    m = Mount(tmp_path)
    m.start()
    monkeypatch.delenv(bulk_commit.faults.FAIL_ENV)
    try:
        r = run_py(DRIVER, job)
        assert r.returncode != 0 and b"no space left" in r.stderr, r.stderr.decode()[-2000:]
        for p in range(PARTS):
            with pytest.raises(OSError) as exc, \
                    open(m.path(TOPIC, str(p), "append"), "ab") as f:
                f.write(b"late\n")
            assert exc.value.errno == 5  # EIO
            # keyed writes and tombstones through the key view are appends too
            with pytest.raises(OSError) as exc, \
                    open(m.path(TOPIC, str(p), "key", "late"), "wb") as f:
                f.write(b"v")
            assert exc.value.errno == 5
        with pytest.raises(OSError) as exc:
            os.unlink(m.path(TOPIC, "0", "key", "k0"))
        assert exc.value.errno == 5
        assert "could not be finished" in m.log()
    finally:
        assert m.umount() == 0
    m2 = Mount(tmp_path)
    m2.start()
    try:
        for p in range(PARTS):
            want = expected(p, True)
            if p == 0:
                want.insert(PRE, b"keyed")
            with open(m2.path(TOPIC, str(p), "messages"), "rb") as f:
                assert f.read().splitlines() == want
    finally:
        assert m2.umount() == 0
    assert not [n for n in os.listdir(logs) if n.startswith(bulk_commit.RECORD_PREFIX)]
    r = kafkafs("check", "--log-dirs", str(logs), check=False)
    assert r.returncode == 0 and b"clean" in r.stdout, r.stdout + r.stderr


def test_a_damaged_or_missing_run_is_refused_before_the_record(tmp_path):
    """What the commit can see before its record (a run without segments, a batch that
    cannot be framed) refuses the commit with nothing written."""
    from kafkafs.log.staging import job_stage_dirs

    logs = tmp_path / "logs"
    make_topic(logs)
    job = stage(logs)
    with open(job, "rb") as f:
        plan, _messages = pickle.load(f)
    names = job_stage_dirs(str(logs), plan.job_id)
    victim = os.path.join(logs, names[3])
    seg = max(n for n in os.listdir(victim) if n.endswith(".log"))
    with open(os.path.join(victim, seg), "r+b") as f:
        f.truncate(os.path.getsize(os.path.join(victim, seg)) - 7)
    r = run_py(DRIVER, job)
    assert r.returncode != 0 and b"incomplete batch in a staged run" in r.stderr, \
        r.stderr.decode()[-2000:]
    assert_finished(logs, False)
    assert not [n for n in os.listdir(logs) if n.endswith("-delete")]
