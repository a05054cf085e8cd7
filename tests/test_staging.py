"""Staged partition dirs (kafkafs.log.staging), LogManager.adopt_topic, the daemon's bulk-load
requests (user.kafkafs.adopt / append_staged through a real mount) and the column-wise
partitioner and batch cutter of the Spark writer (kafkafs.spark.encode) -- without Spark."""

from __future__ import annotations

import json
import os
import random
import struct
import subprocess
import sys

import numpy as np
import pytest
from conftest import needs_fuse, sh, tree_state

from kafkafs.log import checkpoint as ckpt
from kafkafs.log.config import LogConfig
from kafkafs.log.errors import InvalidConfigError, InvalidRecordError, TopicExistsError
from kafkafs.log.loader import load_log
from kafkafs.log.staging import (
    append_runs,
    create_stage_log,
    finish_stage_log,
    iter_run,
    job_stage_dirs,
    new_job_id,
    new_stage_id,
    parse_stage_dir,
    remove_job_stage_dirs,
    rename_noreplace,
    reopen_stage_log,
    scan_run,
    stage_dir_name,
)
from kafkafs.record.batch import encode_batch
from kafkafs.record.errors import CorruptRecordError
from kafkafs.record.producer_batch import BatchSizer
from kafkafs.spark.encode import murmur2_array
from kafkafs.spark.records import (
    cut_batch,
    cut_uniform,
    encode_columns,
    frame_batches,
    varint_sizes,
)

TS = 1_700_000_000_000


def batches_of(n_batches, per_batch=20, size=60, start=0):
    out = []
    for b in range(n_batches):
        recs = [(TS + start + b * per_batch + i, b"k%d" % (start + b * per_batch + i),
                 bytes([65 + (b + i) % 26]) * size) for i in range(per_batch)]
        out.append(bytearray(encode_batch(recs)))
    return out


def staged_run(log_dir, topic, partition, job, batches, config=None):
    sid = new_stage_id(job)
    lg = create_stage_log(log_dir, topic, partition, sid, config or LogConfig())
    lg.append_encoded_run([bytearray(b) for b in batches])
    finish_stage_log(lg)
    return stage_dir_name(topic, partition, sid)


def segment_files(d):
    return {n: open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d))
            if n.endswith((".log", ".index", ".timeindex"))}


def test_stage_dir_names_are_a_brokers_deletion_dirs(log_dir):
    from kafkafs.log.names import parse_partition_dir

    job = new_job_id()
    sid = new_stage_id(job)
    name = stage_dir_name("orders.v1", 3, sid)
    assert name == f"orders.v1-3.{sid}-delete" and len(sid) == 32 and sid.startswith(job)
    assert parse_stage_dir(name) == ("orders.v1", 3, sid)
    assert parse_partition_dir(name) is None  # kafkafs never loads it as a partition
    assert parse_stage_dir("orders-3") is None
    os.mkdir(os.path.join(log_dir, name))
    other = stage_dir_name("orders.v1", 4, new_stage_id(new_job_id()))
    os.mkdir(os.path.join(log_dir, other))
    os.symlink("/tmp", os.path.join(log_dir, stage_dir_name("x", 0, new_stage_id(job))))
    assert job_stage_dirs(log_dir, job) == [name]  # the link is not a staged dir
    assert remove_job_stage_dirs(log_dir, job) == 1
    assert sorted(os.listdir(log_dir))[0] == other


def test_runs_appended_to_a_log_are_what_one_log_appending_them_writes(tmp_path):
    root = tmp_path / "logs"
    root.mkdir()
    cfg = LogConfig(segment_bytes=20000, index_interval_bytes=500)
    job = new_job_id()
    parts = [batches_of(7, start=0), batches_of(5, start=1000), batches_of(9, start=2000)]
    names = [staged_run(str(root), "t", 0, job, p, cfg) for p in parts]
    assert scan_run(str(root / names[1])).records == 5 * 20
    # the first run takes the others
    lg = reopen_stage_log(str(root), "t", 0, parse_stage_dir(names[0])[2], cfg)
    stats = append_runs(lg, [str(root / n) for n in names[1:]])
    assert (stats.records, stats.batches) == (14 * 20, 14)
    finish_stage_log(lg)
    # the reference: one log fed every batch in that order
    ref = tmp_path / "ref"
    ref.mkdir()
    rl = load_log(str(ref), "t", 0, cfg, had_clean_shutdown=True)
    rl.append_encoded_run([bytearray(b) for p in parts for b in p])
    rl.close()
    got = segment_files(root / names[0])
    assert got == segment_files(ref)
    assert len([n for n in got if n.endswith(".log")]) > 1  # rolled at segment.bytes
    assert all(len(v) <= 20000 for n, v in got.items() if n.endswith(".log"))


def test_a_damaged_run_appends_nothing(tmp_path):
    root = tmp_path / "logs"
    root.mkdir()
    job = new_job_id()
    good = staged_run(str(root), "t", 0, job, batches_of(3))
    bad = staged_run(str(root), "t", 0, job, batches_of(3, start=100))
    path = root / bad / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF
    path.write_bytes(bytes(data))
    target = tmp_path / "target"
    target.mkdir()
    lg = load_log(str(target), "t", 0, LogConfig(), had_clean_shutdown=True)
    with pytest.raises(CorruptRecordError):
        append_runs(lg, [str(root / good), str(root / bad)])
    assert lg.log_end_offset == 0  # checked through before anything went in
    lg.close()


def test_a_run_holding_producer_batches_is_refused(tmp_path):
    root = tmp_path / "logs"
    root.mkdir()
    sid = new_stage_id(new_job_id())
    lg = create_stage_log(str(root), "t", 0, sid, LogConfig())
    lg.append_encoded(bytearray(encode_batch([(TS, b"k", b"v")], producer_id=7,
                                             producer_epoch=0, base_sequence=0)))
    finish_stage_log(lg)
    with pytest.raises(InvalidRecordError, match="producer id 7"):
        list(iter_run(str(root / stage_dir_name("t", 0, sid))))


def test_rename_noreplace_never_replaces_even_an_empty_dir(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with pytest.raises(FileExistsError):
        rename_noreplace(str(tmp_path / "a"), str(tmp_path / "b"))
    rename_noreplace(str(tmp_path / "a"), str(tmp_path / "c"))
    assert sorted(os.listdir(tmp_path)) == ["b", "c"]


def test_adopt_topic_publishes_staged_dirs(manager_factory, log_dir):
    m = manager_factory()
    job = new_job_id()
    staged = {p: staged_run(log_dir, "fresh", p, job, batches_of(2 + p, start=100 * p))
              for p in range(3)}
    logs = m.adopt_topic(log_dir, "fresh", staged, {"retention.ms": "-1"}, trusted=True)
    assert [lg.log_end_offset for lg in logs] == [40, 60, 80]
    assert m.partitions("fresh") == [0, 1, 2]
    assert m.topic_overrides("fresh") == {"retention.ms": "-1"}
    assert sorted(n for n in os.listdir(log_dir) if n.startswith("fresh")) == \
        ["fresh-0", "fresh-1", "fresh-2"]
    ids = {ckpt.read_partition_metadata(os.path.join(log_dir, f"fresh-{p}",
                                                     "partition.metadata")) for p in range(3)}
    assert len(ids) == 1
    assert [r.offset for r in logs[1].records()] == list(range(60))
    with pytest.raises(TopicExistsError):
        m.adopt_topic(log_dir, "fresh", {0: staged_run(log_dir, "fresh", 0, job,
                                                       batches_of(1))})
    m.shutdown()
    # a later start finds the topic as written
    m2 = manager_factory()
    assert m2.get_log("fresh", 2).log_end_offset == 80
    assert m2.topic_overrides("fresh") == {"retention.ms": "-1"}


def test_adopt_topic_replace_and_failures_put_everything_back(manager_factory, log_dir):
    m = manager_factory()
    m.create_topic("t", 2, {"cleanup.policy": "compact"})
    m.get_log("t", 0).append([(TS, b"old", b"data")])
    job = new_job_id()
    # a missing staged dir: nothing changes
    staged = {0: staged_run(log_dir, "t", 0, job, batches_of(2)),
              1: stage_dir_name("t", 1, new_stage_id(job))}
    before = tree_state(log_dir)
    with pytest.raises(FileNotFoundError):
        m.adopt_topic(log_dir, "t", staged, replace=True)
    assert tree_state(log_dir) == before
    assert m.get_log("t", 0).log_end_offset == 1
    # names that are not staged dirs of the partition, partitions with a gap
    with pytest.raises(InvalidConfigError):
        m.adopt_topic(log_dir, "t", {0: staged[1]}, replace=True)
    with pytest.raises(InvalidConfigError):
        m.adopt_topic(log_dir, "t", {0: staged[0], 2: staged[1]}, replace=True)
    # a failure after some partitions were published (the second is in the way)
    other = staged_run(log_dir, "u", 1, job, batches_of(1))
    os.mkdir(os.path.join(log_dir, "u-1"))
    before = tree_state(log_dir)
    with pytest.raises(FileExistsError):
        m.adopt_topic(log_dir, "u", {0: staged_run(log_dir, "u", 0, job, batches_of(1)),
                                     1: other})
    assert m.partitions("u") == []
    assert not os.path.exists(os.path.join(log_dir, "u-0"))
    os.rmdir(os.path.join(log_dir, "u-1"))
    # replace: the new data in, the old dirs gone, overrides as given
    staged[1] = staged_run(log_dir, "t", 1, job, batches_of(1))
    m.adopt_topic(log_dir, "t", staged, {"cleanup.policy": "compact"}, replace=True,
                  trusted=True)
    assert [m.get_log("t", p).log_end_offset for p in (0, 1)] == [40, 20]
    assert not [n for n in os.listdir(log_dir) if n.startswith("t-") and "delete" in n]
    assert m.get_log("t", 0).config.compact


# -- the Spark writer's column-wise partitioner and batch cutter ---------------------------

def test_murmur2_array_agrees_with_kafka_python():
    from kafka.partitioner.default import murmur2

    rng = random.Random(7)
    keys = [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 70))) for _ in range(3000)]
    keys += [b"", b"a", b"ab", b"abc", b"abcd", "ключ".encode()]
    data = np.frombuffer(b"".join(keys), dtype=np.uint8)
    lengths = np.array([len(k) for k in keys])
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    got = murmur2_array(data, starts, lengths)
    assert got.tolist() == [murmur2(k) & 0xFFFFFFFF for k in keys]
    for n in (1, 3, 8, 50):
        parts = ((got & np.uint32(0x7FFFFFFF)) % n).tolist()
        assert parts == [(murmur2(k) & 0x7FFFFFFF) % n for k in keys]


def test_varint_sizes():
    from kafkafs.record.varint import varint_size

    vals = [0, 1, -1, 63, 64, -64, -65, 8191, 8192, 2**31 - 1, -2**31, 2**62, -2**63, 2**63 - 1]
    assert varint_sizes(np.array(vals)).tolist() == [varint_size(v) for v in vals]


@pytest.mark.parametrize("seed", range(6))
def test_cut_batch_agrees_with_the_producers_rule(seed):
    rng = random.Random(seed)
    n = rng.randrange(1, 900)
    keys = [rng.choice([-1, rng.randrange(0, 40)]) for _ in range(n)]
    values = [rng.choice([-1, rng.randrange(0, 300), rng.randrange(0, 20000)]) for _ in range(n)]
    stamps = [TS + rng.choice([0, rng.randrange(-10**7, 10**7)]) for _ in range(n)]
    budget = rng.choice([16384 - 61, 2000, 100, 0])
    ratio = rng.choice([1.0, 0.4 * 1.05, 1.2])
    expected, s = [], 0
    while s < n:
        sizer, k = BatchSizer(budget, ratio), 0
        while s + k < n and sizer.add(stamps[s + k], keys[s + k], values[s + k]):
            k += 1
        expected.append(k)
        s += k
    base = 2 + varint_sizes(np.array(keys)) + np.maximum(keys, 0) \
        + varint_sizes(np.array(values)) + np.maximum(values, 0)
    ts = np.array(stamps)
    got, s = [], 0
    while s < n:
        k, full, _sizes = cut_batch(ts[s:], base[s:], budget, ratio, rng.choice([1, 8, 64]))
        assert full or s + k == n
        got.append(k)
        s += k
    assert got == expected


@pytest.mark.parametrize("seed", range(8))
def test_cut_uniform_agrees_with_the_producers_rule(seed):
    rng = random.Random(seed)
    n = rng.randrange(1, 3000)
    keys = [rng.choice([-1, rng.randrange(0, 40)]) for _ in range(n)]
    big = rng.choice([60, 300, 20000])
    values = [rng.choice([-1, rng.randrange(0, big)]) for _ in range(n)]
    stamps = [TS + rng.randrange(0, 64) for _ in range(n)]  # deltas of one byte
    budget = rng.choice([16384 - 61, 2000, 100, 0, 100000])
    expected, s = [0], 0
    while s < n:
        sizer, k = BatchSizer(budget, 1.0), 0
        while s + k < n and sizer.add(stamps[s + k], keys[s + k], values[s + k]):
            k += 1
        s += k
        expected.append(s)
    base = 2 + varint_sizes(np.array(keys)) + np.maximum(keys, 0) \
        + varint_sizes(np.array(values)) + np.maximum(values, 0)
    got = cut_uniform(base, budget, final=True)
    assert got is None or got == expected
    if got is not None:  # not final: the last batch, which could take more, stays open
        assert cut_uniform(base, budget, final=False) == expected[:-1]


@pytest.mark.parametrize("codec,log_append", [(0, False), (1, False), (4, False), (0, True)])
def test_columns_encode_as_the_record_layer_encodes(codec, log_append):
    import pyarrow as pa

    from kafkafs.record.varint import encode_varint

    rng = random.Random(codec)
    rows = []
    for i in range(700):
        key = None if i % 5 == 0 else bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
        value = None if i % 11 == 3 else b"v" * rng.choice([0, 1, 63, 64, 200, 9000])
        headers = () if i % 3 else (("h", b"%d" % i), ("empty", None), ("ключ", b""))
        ts = TS + (0 if log_append else rng.randrange(-10**9, 10**9))
        rows.append((ts, key, value, headers))
    bounds = [0, 1, 64, 65, 300, 301, 700]

    def tail(hs):
        out = encode_varint(len(hs))
        for k, v in hs:
            kb = k.encode()
            out += encode_varint(len(kb)) + kb + (encode_varint(-1) if v is None
                                                  else encode_varint(len(v)) + v)
        return out

    keys = pa.array([r[1] for r in rows], pa.large_binary())
    values = pa.array([r[2] for r in rows], pa.large_binary())
    tails = pa.array([tail(r[3]) for r in rows], pa.large_binary())
    lens = [np.array([-1 if x is None else len(x) for x in col], dtype=np.int64)
            for col in ([r[1] for r in rows], [r[2] for r in rows], [tail(r[3]) for r in rows])]
    ts = np.array([r[0] for r in rows], dtype=np.int64)
    cut = np.array(bounds, dtype=np.int64)
    buf, offsets = encode_columns(keys, values, tails, *lens, ts, cut)
    got = frame_batches(buf, offsets, ts, cut, codec, log_append)
    for (s, e), batch in zip(zip(bounds, bounds[1:]), got):
        kw = {"timestamp_type": 1, "log_append_time": TS} if log_append else {}
        assert bytes(batch) == encode_batch(rows[s:e], compression=codec, **kw)


# -- the Spark writer's commit, driven without Spark ---------------------------------------

def _plan(log_dir, **kw):
    from kafkafs.spark.write_plan import WritePlan

    args = dict(log_dir=log_dir, job_id=new_job_id(), topic="t", overwrite=False,
                default_partitions=2, partitions_option=2, topic_defaults=LogConfig(),
                config_overrides={}, existing={}, existing_overrides={}, lock_timeout_ms=100)
    args.update(kw)
    return WritePlan(**args)


class _Message:
    def __init__(self, runs):
        self.runs = runs


class _Run:
    def __init__(self, topic, partition, stage_id):
        self.topic, self.partition, self.dir_name = topic, partition, \
            stage_dir_name(topic, partition, stage_id)


def test_commit_refuses_a_topic_changed_meanwhile_and_a_missing_run(manager_factory, log_dir):
    from kafkafs.spark.publish import StagedRunMissingError, TopicChangedError, publish

    m = manager_factory()
    m.create_topic("t", 3)
    m.shutdown()
    before = tree_state(log_dir)
    plan = _plan(log_dir, existing={"t": 2})  # planned when t had 2 partitions
    sid = new_stage_id(plan.job_id)
    staged_run(log_dir, "t", 0, plan.job_id, batches_of(1))
    run = parse_stage_dir(job_stage_dirs(log_dir, plan.job_id)[0])[2]
    with pytest.raises(TopicChangedError, match="resized while the write ran"):
        publish(plan, [_Message([_Run("t", 0, run)]), None])
    assert job_stage_dirs(log_dir, plan.job_id) == []
    plan = _plan(log_dir)
    with pytest.raises(StagedRunMissingError, match="every executor see at the same path"):
        publish(plan, [_Message([_Run("new", 0, sid)])])
    after = tree_state(log_dir)
    after[log_dir] = before[log_dir]  # (the root's mtime: staged dirs came and went)
    assert after == before


# -- the daemon's bulk-load requests, through a real mount ---------------------------------

@needs_fuse
def test_daemon_adopts_and_appends_staged_dirs(mount):
    log_dir = mount.log_dirs[0]
    root = mount.mnt
    assert sh(f"getfattr --only-values -n user.kafkafs.num_partitions {root}").stdout == b"1"
    job = new_job_id()
    sid = new_stage_id(job)
    for p in range(2):
        lg = create_stage_log(log_dir, "bulk", p, sid, LogConfig())
        lg.append_encoded_run([bytearray(encode_batch([(TS, None, b"p%d-%d" % (p, i))
                                                       for i in range(3)]))])
        finish_stage_log(lg)
    req = json.dumps({"log_dir": log_dir, "topic": "bulk", "stage": sid, "partitions": 2,
                      "config": {"retention.ms": "-1"}})
    r = subprocess.run(["setfattr", "-n", "user.kafkafs.adopt", "-v", req, root],
                       capture_output=True)
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(os.path.join(root, "bulk"))) == ["0", "1", "config"]
    assert open(os.path.join(root, "bulk", "1", "messages"), "rb").read() == b"p1-0\np1-1\np1-2\n"
    assert b"retention.ms=-1" in open(os.path.join(root, "bulk", "config"), "rb").read()
    # the same again: EEXIST, nothing changes
    r = subprocess.run(["setfattr", "-n", "user.kafkafs.adopt", "-v", req, root],
                       capture_output=True)
    assert r.returncode != 0 and b"File exists" in r.stderr
    # a staged run appended to partition 0 through the daemon
    sh(f"echo through-append >> {root}/bulk/0/append")
    run = staged_run(log_dir, "bulk", 0, job, [encode_batch([(TS, b"k", b"staged-%d" % i)
                                                             for i in range(2)])])
    r = subprocess.run(["setfattr", "-n", "user.kafkafs.append_staged", "-v", run,
                        os.path.join(root, "bulk", "0")], capture_output=True)
    assert r.returncode == 0, r.stderr
    assert open(os.path.join(root, "bulk", "0", "messages"), "rb").read() == \
        b"p0-0\np0-1\np0-2\nthrough-append\nstaged-0\nstaged-1\n"
    assert open(os.path.join(root, "bulk", "0", "offset", "5"), "rb").read() == b"staged-1"
    # a run of another partition, a name with a slash: refused
    for bad in (run, "../" + run):
        r = subprocess.run(["setfattr", "-n", "user.kafkafs.append_staged", "-v", bad,
                            os.path.join(root, "bulk", "1")], capture_output=True)
        assert r.returncode != 0 and b"Invalid argument" in r.stderr
    remove_job_stage_dirs(log_dir, job)
    assert mount.umount() == 0
    check = sh(f"{sys.executable} -m kafkafs check {log_dir}")
    assert check.returncode == 0 and b"clean" in check.stdout, check.stdout + check.stderr


def test_stage_files_are_what_kafka_python_reads(tmp_path):
    from kafka.record import MemoryRecords

    root = tmp_path / "logs"
    root.mkdir()
    name = staged_run(str(root), "t", 0, new_job_id(), batches_of(3, per_batch=4))
    data = (root / name / "00000000000000000000.log").read_bytes()
    mr, seen = MemoryRecords(data), []
    while mr.has_next():
        seen.extend((r.offset, r.key) for r in mr.next_batch())
    assert seen == [(i, b"k%d" % i) for i in range(12)]
    idx = (root / name / "00000000000000000000.index").read_bytes()
    assert len(idx) % 8 == 0 and all(struct.unpack_from(">i", idx, i)[0] > 0
                                     for i in range(0, len(idx), 8))


@needs_fuse
def test_a_replaced_topic_reads_new_at_once_through_cached_paths(mount):
    """A commit replacing a topic answers only once the kernel forgot the old partitions:
    the path ``t/0/messages`` read just before (its dentries cached) reads the new data
    right after, and a partition the new topic lacks is gone (CI once listed ENOENT for
    the topic itself: its directory's node had been dropped with the old data)."""
    from kafkafs.core import control
    from kafkafs.log import bulk_commit

    log_dir, root = mount.log_dirs[0], mount.mnt
    os.mkdir(os.path.join(root, "swap"))
    sh(f"echo first >> {root}/swap/0/append")
    for round_ in range(12):
        n = 3 if round_ % 2 == 0 else 2
        for name in os.listdir(os.path.join(root, "swap")):  # every dentry cached
            os.stat(os.path.join(root, "swap", name))
        job = new_job_id()
        staged = {p: staged_run(log_dir, "swap", p, job,
                                [encode_batch([(TS, None, b"r%d-p%d" % (round_, p))])])
                  for p in range(n)}
        control.commit_staged(root, log_dir, job, {},
                              [bulk_commit.TopicAdoption("swap", staged, replace=True)])
        names = [str(p) for p in range(n)] + ["config"]
        assert sorted(os.listdir(os.path.join(root, "swap"))) == names
        for p in range(n):
            got = open(os.path.join(root, "swap", str(p), "messages"), "rb").read()
            assert got == b"r%d-p%d\n" % (round_, p)
        assert os.path.exists(os.path.join(root, "swap", "2")) == (n == 3)
        remove_job_stage_dirs(log_dir, job)
