"""``df.write.format("kafkalog")``: what Spark writes is read back with kafka-python (an
independent decoder) and through a real mount; partitions as kafka-python's murmur2
partitioner chooses them; segments and indexes as the daemon writes them; a failed or killed
task leaves the log dir untouched; writes beside a running daemon go through it."""

from __future__ import annotations

import datetime as dt
import os
import signal
import threading
import time

import pytest
from conftest import kafkafs, needs_fuse, sh, tree_state

pytestmark = pytest.mark.spark

UTC = dt.timezone.utc
T0 = dt.datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def part_of(key: bytes, n: int) -> int:
    """kafka-python's DefaultPartitioner for a keyed record."""
    from kafka.partitioner.default import murmur2

    return (murmur2(key) & 0x7FFFFFFF) % n


def read_partition(path: str) -> list[list]:
    """The batches of a partition dir, segment after segment, each a list of kafka-python
    records (offset, timestamp, key, value, headers)."""
    from kafka.record import MemoryRecords

    out = []
    for name in sorted(n for n in os.listdir(path) if n.endswith(".log")):
        with open(os.path.join(path, name), "rb") as f:
            mr = MemoryRecords(f.read())
        while mr.has_next():
            out.append([(r.offset, r.timestamp, r.key, r.value, list(r.headers))
                        for r in mr.next_batch()])
    return out


def records_of(path: str) -> list:
    return [r for batch in read_partition(path) for r in batch]


def save(df, path, mode="append", **options):
    w = df.write.format("kafkalog").mode(mode)
    for k, v in options.items():
        w = w.option(k.replace("__", "."), str(v))
    w.save(str(path))


def topic_dirs(log_dir, topic):
    return sorted(n for n in os.listdir(log_dir) if n.rsplit("-", 1)[0] == topic)


def contents(log_dir) -> dict:
    """:func:`tree_state` of a log dir without the root's own mtime: staged dirs come and go
    in the root while a job runs; every name, byte and mtime below it must stay."""
    state = tree_state(str(log_dir))
    kind, names, _mtime = state[str(log_dir)]
    state[str(log_dir)] = (kind, names)
    return state


def assert_clean(log_dir):
    r = kafkafs("check", "--log-dirs", str(log_dir), check=False)
    assert r.returncode == 0 and b"clean" in r.stdout, r.stdout + r.stderr
    assert not [n for n in os.listdir(log_dir) if n.endswith("-delete")]


def test_what_spark_wrote_reads_back_with_kafka_python(spark, tmp_path):
    logs = tmp_path / "logs"
    rows = []
    for i in range(3000):
        key = None if i % 10 == 0 else b"key-%d" % (i % 97)
        value = b"value %d " % i + b"x" * (i % 50)
        if i % 333 == 5:
            key, value = b"tomb-%d" % i, None
        headers = [("h", b"%d" % i), ("n", None)] if i % 3 == 0 else ([] if i % 3 == 1 else None)
        ts = None if i % 7 == 0 else T0 + dt.timedelta(microseconds=i * 1_234_567)
        rows.append((key, value, headers, ts))
    df = spark.createDataFrame(rows, "key binary, value binary, headers array<struct<key:string,"
                                     "value:binary>>, timestamp timestamp")
    before = now_ms()
    save(df, logs, topic="t", partitions=5)
    after = now_ms()
    assert topic_dirs(logs, "t") == [f"t-{p}" for p in range(5)]
    row_of = {(r[0], r[1]): i for i, r in enumerate(rows)}
    seen = set()
    for p in range(5):
        recs = records_of(str(logs / f"t-{p}"))
        assert [r[0] for r in recs] == list(range(len(recs)))
        ids = [row_of[(r[2], r[3])] for r in recs]
        assert ids == sorted(ids)  # rows keep their order (tasks in order, rows in order)
        for (_off, ts, key, value, headers), i in zip(recs, ids):
            want_key, want_value, want_headers, want_ts = rows[i]
            assert (key, value) == (want_key, want_value)
            assert headers == [tuple(h) for h in (want_headers or [])]
            if want_ts is None:
                assert before <= ts <= after
            else:  # micros truncated to ms, as Spark's Kafka sink does
                assert ts == (want_ts - dt.datetime(1970, 1, 1, tzinfo=UTC)) // \
                    dt.timedelta(milliseconds=1)
            if key is not None:
                assert p == part_of(key, 5)
        seen.update(ids)
    assert seen == set(range(len(rows)))
    assert_clean(logs)


def test_records_without_key_spread_and_the_partition_column(spark, tmp_path):
    logs = tmp_path / "logs"
    rows = [(None, b"%06d" % i + b"v" * 94, None) for i in range(20000)]
    rows += [(b"k%d" % i, b"explicit", i % 3) for i in range(300)]  # partition column wins
    rows += [(b"k%d" % i, b"hashed", None) for i in range(300)]
    df = spark.createDataFrame(rows, "key binary, value binary, partition int")
    save(df, logs, topic="spread", partitions=4)
    counts = []
    for p in range(4):
        recs = records_of(str(logs / f"spread-{p}"))
        loose = [r for r in recs if r[2] is None]
        counts.append(len(loose))
        for r in recs:
            if r[3] == b"explicit":
                assert p == int(r[2][1:]) % 3
            elif r[3] == b"hashed":
                assert p == part_of(r[2], 4)
    assert sum(counts) == 20000
    assert min(counts) > 0.6 * 5000 and max(counts) < 1.4 * 5000, counts
    # a partition outside the topic: refused as the producer refuses it, nothing written
    before = contents(logs)
    bad = spark.createDataFrame([(b"v", 7)], "value binary, partition int")
    with pytest.raises(Exception, match=r"Invalid partition given with record: 7 is not in "
                                        r"the range \[0\.\.\.4\]"):
        save(bad, logs, topic="spread")
    assert contents(logs) == before


def test_topic_column_and_topic_option(spark, tmp_path):
    logs = tmp_path / "logs"
    rows = [("a" if i % 3 else "b", "v%d" % i) for i in range(60)]
    df = spark.createDataFrame(rows, "topic string, value string")
    save(df, logs, partitions=2)
    got = {t: sorted(r[3] for p in range(2) for r in records_of(str(logs / f"{t}-{p}")))
           for t in ("a", "b")}
    assert got == {t: sorted(("v%d" % i).encode() for i, (tt, _v) in enumerate(rows) if tt == t)
                   for t in ("a", "b")}
    # the topic option overrides the column
    save(df, logs, topic="c", partitions=1)
    assert len(records_of(str(logs / "c-0"))) == 60
    nulls = spark.createDataFrame([(None, "v")], "topic string, value string")
    with pytest.raises(Exception, match="null topic present in the data"):
        save(nulls, logs)
    with pytest.raises(Exception, match="is illegal"):
        save(spark.createDataFrame([("bad/name", "v")], "topic string, value string"), logs)
    assert not [n for n in os.listdir(logs) if n.endswith("-delete")]


@pytest.mark.parametrize("schema,options,message", [
    ("key binary", {"topic": "t"}, "Required attribute 'value' not found"),
    ("key int, value binary", {"topic": "t"}, "key attribute unsupported type int"),
    ("value binary", {}, "topic option required when no 'topic' attribute is present"),
    ("value binary, partition long", {"topic": "t"}, "partition attribute unsupported type"),
    ("value binary, headers array<string>", {"topic": "t"}, "headers attribute unsupported"),
    ("value binary", {"topic": "t", "partitions": "0"}, "partitions must be at least 1"),
    ("value binary", {"topic": "t", "config.retention.ms": "x"},
     "Invalid value x for configuration retention.ms"),
    ("value binary", {"topic": "t", "kafka.compression.type": "brotli"},
     "kafka.compression.type must be one of"),
])
def test_bad_writes_are_refused_before_any_task(spark, tmp_path, schema, options, message):
    logs = tmp_path / "logs"
    df = spark.createDataFrame([], schema)
    with pytest.raises(Exception, match=message):
        save(df, logs, **options)
    assert not os.path.exists(logs) or os.listdir(logs) == []


def test_default_mode_is_refused_by_spark(spark, tmp_path):
    df = spark.createDataFrame([(b"v",)], "value binary")
    with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
        df.write.format("kafkalog").option("topic", "t").save(str(tmp_path / "logs"))


def expected_index(batches, interval):
    """Kafka's rule, independently: an index entry for a batch once more than ``interval``
    bytes were appended to the segment since the last one (never for the first)."""
    entries, since, pos = [], 0, 0
    for size, last_offset in batches:
        if since > interval:
            entries.append((last_offset, pos))
            since = 0
        since += size
        pos += size
    return entries


def test_segments_and_indexes_are_what_the_daemon_writes(spark, tmp_path):
    import struct

    from kafkafs.log.config import LogConfig
    from kafkafs.log.loader import load_log
    from kafkafs.record.batch import iter_batches

    logs = tmp_path / "logs"
    rows = [(b"k%d" % (i % 11), b"%05d" % i + b"z" * (i % 200)) for i in range(4000)]
    df = spark.createDataFrame(rows, "key binary, value binary").repartition(3)
    save(df, logs, topic="lay", partitions=2, config__segment__bytes=40000,
         config__index__interval__bytes=1000)
    cfg = LogConfig(segment_bytes=40000, index_interval_bytes=1000)
    for p in range(2):
        pdir = logs / f"lay-{p}"
        segs = sorted(n for n in os.listdir(pdir) if n.endswith(".log"))
        assert len(segs) > 2
        batches = []
        for name in segs:
            data = (pdir / name).read_bytes()
            assert len(data) <= 40000
            parsed = list(iter_batches(data, validate=True))
            assert parsed[0].base_offset == int(name[:20])  # named by its base offset
            seg = [(b.size, b.last_offset) for b in parsed]
            idx = (pdir / name.replace(".log", ".index")).read_bytes()
            got = [struct.unpack_from(">ii", idx, i) for i in range(0, len(idx), 8)]
            base = int(name[:20])
            assert got == [(o - base, pos) for o, pos in expected_index(seg, 1000)]
            batches.extend(bytearray(data[b.position:b.position + b.size])
                           for b in iter_batches(data))
        # one log fed the same batches in the same order writes the same files
        ref = tmp_path / f"ref-{p}"
        ref.mkdir()
        lg = load_log(str(ref), "lay", p, cfg, had_clean_shutdown=True)
        lg.append_encoded_run(batches)
        lg.close()
        for name in sorted(os.listdir(ref)):
            if name.endswith((".log", ".index", ".timeindex")):
                assert (pdir / name).read_bytes() == (ref / name).read_bytes(), name
    ckpt = (logs / "recovery-point-offset-checkpoint").read_text().split("\n")
    ends = {f"lay {p}": sum(len(b) for b in read_partition(str(logs / f"lay-{p}")))
            for p in range(2)}
    assert {" ".join(line.split()[:2]): int(line.split()[2]) for line in ckpt[2:] if line} == ends
    assert "segment.bytes" in (logs / "kafkafs-topic-configs.json").read_text()
    assert_clean(logs)


def test_batches_are_cut_at_batch_size_as_the_producer_cuts_them(spark, tmp_path):
    from kafkafs.record.producer_batch import BatchSizer

    logs = tmp_path / "logs"
    rows = [(b"key%d" % i, b"v" * (i * 37 % 900), T0 + dt.timedelta(seconds=i * 13 % 1000))
            for i in range(3000)]
    df = spark.createDataFrame(rows, "key binary, value binary, timestamp timestamp")
    save(df.coalesce(1), logs, topic="cut", partitions=1, kafka__batch__size=5000)
    batches = read_partition(str(logs / "cut-0"))
    recs = [r for b in batches for r in b]
    expected, s = [], 0
    while s < len(recs):
        sizer, k = BatchSizer(5000 - 61), 0
        while s + k < len(recs) and sizer.add(recs[s + k][1], len(recs[s + k][2]),
                                              len(recs[s + k][3])):
            k += 1
        expected.append(k)
        s += k
    assert [len(b) for b in batches] == expected
    # compressed as the producer asks, when the topic keeps the producer's codec
    save(df.coalesce(1), logs, topic="zipped", partitions=1, kafka__compression__type="gzip")
    from kafkafs.record.batch import iter_batches

    data = (logs / "zipped-0" / "00000000000000000000.log").read_bytes()
    assert {b.compression for b in iter_batches(data)} == {1}
    assert [r[3] for r in records_of(str(logs / "zipped-0"))] == [r[1] for r in rows]


def test_append_overwrite_and_topic_config(spark, tmp_path):
    logs = tmp_path / "logs"
    first = spark.createDataFrame([(b"k%d" % i, b"a%d" % i) for i in range(100)],
                                  "key binary, value binary")
    save(first, logs, topic="t", partitions=3, config__retention__ms=-1)
    ends = [len(records_of(str(logs / f"t-{p}"))) for p in range(3)]
    assert sum(ends) == 100
    # append: the topic keeps its partitions; offsets go on
    second = spark.createDataFrame([(b"k%d" % i, b"b%d" % i) for i in range(50)],
                                   "key binary, value binary")
    save(second, logs, topic="t", partitions=7)
    assert topic_dirs(logs, "t") == ["t-0", "t-1", "t-2"]
    for p in range(3):
        recs = records_of(str(logs / f"t-{p}"))
        assert [r[0] for r in recs] == list(range(len(recs)))
        assert all(r[3].startswith(b"a") for r in recs[:ends[p]])
        assert all(r[3].startswith(b"b") for r in recs[ends[p]:])
        assert all(part_of(r[2], 3) == p for r in recs)
    # config.* that disagrees with the existing topic: refused, nothing written
    before = contents(logs)
    with pytest.raises(Exception, match="exists with retention.ms=-1"):
        save(second, logs, topic="t", config__retention__ms=5)
    assert contents(logs) == before
    # overwrite: the data replaced, the partitions option applies, the config stays
    third = spark.createDataFrame([(b"k%d" % i, b"c%d" % i) for i in range(20)],
                                  "key binary, value binary")
    save(third, logs, mode="overwrite", topic="t", partitions=2)
    assert topic_dirs(logs, "t") == ["t-0", "t-1"]
    recs = [r for p in range(2) for r in records_of(str(logs / f"t-{p}"))]
    assert sorted(r[3] for r in recs) == sorted(b"c%d" % i for i in range(20))
    assert '"retention.ms": "-1"' in (logs / "kafkafs-topic-configs.json").read_text()
    assert_clean(logs)
    # an empty DataFrame makes the topic, with empty partitions
    save(spark.createDataFrame([], "value binary"), logs, topic="empty", partitions=2)
    assert topic_dirs(logs, "empty") == ["empty-0", "empty-1"]
    assert_clean(logs)


def test_log_append_time_topic(spark, tmp_path):
    from kafka.record import MemoryRecords

    logs = tmp_path / "logs"
    df = spark.createDataFrame([(b"v%d" % i, T0) for i in range(50)],
                               "value binary, timestamp timestamp")
    before = now_ms()
    save(df, logs, topic="lat", partitions=1,
         config__message__timestamp__type="LogAppendTime")
    after = now_ms()
    mr = MemoryRecords((logs / "lat-0" / "00000000000000000000.log").read_bytes())
    seen = 0
    while mr.has_next():
        batch = mr.next_batch()
        assert batch.timestamp_type == 1
        for r in batch:
            assert before <= r.timestamp <= after  # the time of writing, not the column's
            seen += 1
    assert seen == 50


def test_compacted_topic_refuses_records_without_key(spark, tmp_path):
    logs = tmp_path / "logs"
    good = spark.createDataFrame([("k%d" % (i % 5), "v%d" % i) for i in range(40)],
                                 "key string, value string")
    save(good, logs, topic="cmp", partitions=2, config__cleanup__policy="compact")
    assert '"cleanup.policy": "compact"' in (logs / "kafkafs-topic-configs.json").read_text()
    before = contents(logs)
    bad = spark.createDataFrame([("k", "v"), (None, "v")], "key string, value string")
    with pytest.raises(Exception, match="Compacted topic cannot accept message without key"):
        save(bad.coalesce(1), logs, topic="cmp")
    assert contents(logs) == before


def test_a_failing_task_leaves_the_log_dir_untouched(spark, tmp_path):
    from pyspark.sql import functions as F

    logs = tmp_path / "logs"
    save(spark.createDataFrame([(b"x",)], "value binary"), logs, topic="t", partitions=2)
    before = contents(logs)

    @F.udf("binary")
    def boom(i):
        if i == 15000:
            raise ValueError("boom in the middle of a task")
        return b"%d" % i

    df = spark.range(0, 20000, 1, 2).select(boom("id").alias("value"))
    with pytest.raises(Exception, match="boom in the middle"):
        save(df, logs, topic="t")
    with pytest.raises(Exception, match="boom in the middle"):
        save(df, logs, topic="new-topic", partitions=3)
    assert contents(logs) == before


def _kill_the_writer(log_dir: str, stop: threading.Event, killed: list) -> None:
    """SIGKILL the Python worker that has a staged segment of ``log_dir`` open."""
    prefix = log_dir + "/"
    while not stop.is_set():
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
                for fd in fds:
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if target.startswith(prefix) and "-delete/" in target and \
                            target.endswith(".log") and os.path.getsize(target) > 100_000:
                        os.kill(int(pid), signal.SIGKILL)
                        killed.append(int(pid))
                        return
            except OSError:
                continue
        time.sleep(0.01)


def test_a_killed_writer_leaves_nothing(spark, tmp_path):
    from pyspark.sql import functions as F

    logs = tmp_path / "logs"
    save(spark.createDataFrame([(b"x",)], "value binary"), logs, topic="t", partitions=2)
    before = contents(logs)
    df = spark.range(0, 600_000, 1, 2).select(
        F.concat(F.lit("k"), (F.col("id") % 1000).cast("string")).alias("key"),
        F.repeat(F.lit("v"), 100).alias("value"))
    stop, killed = threading.Event(), []
    killer = threading.Thread(target=_kill_the_writer, args=(str(logs), stop, killed))
    killer.start()
    try:
        with pytest.raises(Exception):
            save(df, logs, topic="t")
    finally:
        stop.set()
        killer.join()
    assert killed, "the writer was not caught writing"
    assert contents(logs) == before
    assert_clean(logs)


# -- beside a running daemon ---------------------------------------------------------------

@needs_fuse
def test_writes_beside_a_running_mount_go_through_the_daemon(spark, mount):
    logs, mnt = mount.log_dirs[0], mount.mnt
    rows = [(b"k%d" % i, b"new-%d" % i) for i in range(200)]
    df = spark.createDataFrame(rows, "key binary, value binary")
    # a new topic: whole partition dirs, adopted by the daemon, visible at once
    save(df, logs, topic="fresh", partitions=3, config__retention__ms=-1)
    assert sorted(os.listdir(os.path.join(mnt, "fresh"))) == ["0", "1", "2", "config"]
    for p in range(3):
        want = [v for k, v in rows if part_of(k, 3) == p]
        got = open(os.path.join(mnt, "fresh", str(p), "messages"), "rb").read()
        assert got == b"".join(v + b"\n" for v in want)
        assert open(os.path.join(mnt, "fresh", str(p), "offset", "0"), "rb").read() == want[0]
    assert b"retention.ms=-1" in open(os.path.join(mnt, "fresh", "config"), "rb").read()
    # no partitions option: the daemon's num.partitions (1)
    save(df, logs, topic="dflt")
    assert sorted(os.listdir(os.path.join(mnt, "dflt"))) == ["0", "config"]
    # an existing topic: its runs appended by the daemon, after what came through the mount
    os.mkdir(os.path.join(mnt, "ex"))
    sh(f"echo through-the-mount >> {mnt}/ex/0/append")
    save(df, logs, topic="ex")
    lines = open(os.path.join(mnt, "ex", "0", "messages"), "rb").read().splitlines()
    assert lines == [b"through-the-mount"] + [v for _k, v in rows]
    assert open(os.path.join(mnt, "ex", "0", "offset", "200"), "rb").read() == b"new-199"
    # overwrite through the daemon
    few = spark.createDataFrame(rows[:5], "key binary, value binary")
    save(few, logs, mode="overwrite", topic="ex", partitions=2)
    assert sorted(os.listdir(os.path.join(mnt, "ex"))) == ["0", "1", "config"]
    for p in range(2):
        got = open(os.path.join(mnt, "ex", str(p), "messages"), "rb").read()
        assert got == b"".join(v + b"\n" for k, v in rows[:5] if part_of(k, 2) == p)
    assert not [n for n in os.listdir(logs) if n.endswith("-delete")]
    assert mount.umount() == 0
    assert_clean(logs)


def test_a_log_dir_held_without_a_mount_is_refused(spark, tmp_path, manager_factory):
    logs = tmp_path / "logs"
    m = manager_factory()  # holds the lock, as a broker would, with no mount
    m.create_topic("t", 1)
    before = contents(logs)
    df = spark.createDataFrame([(b"v",)], "value binary")
    with pytest.raises(Exception, match="no kafkafs mount serves it"):
        save(df, logs, topic="t", lockTimeoutMs=200)
    with pytest.raises(Exception, match="no kafkafs mount serves it"):
        save(df, logs, topic="other", lockTimeoutMs=200)
    assert contents(logs) == before
