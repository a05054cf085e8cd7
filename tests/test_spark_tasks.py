"""How kafkalog cuts a read into Spark tasks, and missing segments (issue 20):

* tasks sized like Spark's Kafka source: its offset ranges (``KafkaOffsetRangeCalculator``:
  one per topic-partition, split for ``minPartitions`` / ``maxRecordsPerPartition``), the
  small segments of a range packed into one task up to ``maxPartitionBytes`` -- a topic in
  2 KB segments no longer makes one task per segment, in batch reads and micro-batches;
* a segment missing from the middle of a partition that is not compacted is data loss
  (``failOnDataLoss``), found at planning when a range starts in the hole and by the
  executor when it reads up to it; compacted partitions' gaps are not."""

from __future__ import annotations

import json
import logging
import os

import pytest
from spark_expect import kp_visible

from kafkafs.log.config import LogConfig
from kafkafs.log.loader import load_log
from kafkafs.spark.columns import read_slices
from kafkafs.spark.options import parse_options
from kafkafs.spark.plan import DataLossError, group_tasks, offset_ranges, plan_read
from kafkafs.spark.stream import KafkaLogStreamReader

T0 = 1_700_000_000_000
SMALL = LogConfig(segment_bytes=2048, index_interval_bytes=4096)


def build(root: str, topic: str = "t", partitions: int = 1, n: int = 2000,
          cfg: LogConfig = SMALL) -> None:
    for p in range(partitions):
        path = os.path.join(root, f"{topic}-{p}")
        os.makedirs(path, exist_ok=True)
        lg = load_log(path, topic, p, cfg)
        for i in range(0, n, 4):
            lg.append([(T0 + j, b"k%d" % j, b"value-%06d-" % j + b"x" * 150, [])
                       for j in range(i, min(n, i + 4))])
        lg.close()


def segments(root: str, topic: str = "t", p: int = 0) -> list:
    return sorted(int(n[:20]) for n in os.listdir(os.path.join(root, f"{topic}-{p}"))
                  if n.endswith(".log"))


def read_offsets(tasks) -> list:
    return [o for t in tasks for b in read_slices(t.slices)
            for o in b.column("offset").to_pylist()]


# -- Spark's offset ranges ------------------------------------------------------------------

def test_offset_ranges_as_kafka_offset_range_calculator():
    a, b = ("a", 0), ("b", 0)
    assert offset_ranges({a: (1, 5), b: (1, 21)}, None, None) == [(a, 1, 5), (b, 1, 21)]
    assert offset_ranges({a: (1, 5), b: (1, 21)}, 2, None) == [(a, 1, 5), (b, 1, 21)]
    # tp a: round(4/24*3) = 1, left whole; b: the other two parts
    assert offset_ranges({a: (1, 5), b: (1, 21)}, 3, None) == \
        [(a, 1, 5), (b, 1, 11), (b, 11, 21)]
    assert offset_ranges({a: (0, 10)}, None, 3) == \
        [(a, 0, 2), (a, 2, 4), (a, 4, 7), (a, 7, 10)]
    assert offset_ranges({a: (0, 10), b: (5, 5)}, 4, 5) == \
        [(a, 0, 2), (a, 2, 5), (a, 5, 7), (a, 7, 10)]
    # every range rounds to one part: no split (Spark would divide by zero)
    three = {("c", p): (0, 10) for p in range(3)}
    assert len(offset_ranges(three, 4, None)) == 3


# -- tasks ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def small_segments(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("small-segments"))
    build(root, partitions=3, n=800)
    return root


def test_small_segments_pack_into_one_task_per_partition(small_segments):
    assert len(segments(small_segments)) > 50
    o = parse_options({"path": small_segments, "subscribe": "t"})
    slices = plan_read(o)
    tasks = group_tasks(slices)
    assert len(slices) > 150 and len(tasks) == 3  # was one task per segment
    assert [t.tp for t in tasks] == [("t", 0), ("t", 1), ("t", 2)]
    assert all((t.start_offset, t.end_offset) == (0, 800) for t in tasks)
    assert read_offsets(tasks) == list(range(800)) * 3
    # minPartitions=2 on 3 partitions: 3 tasks, as Spark's source
    assert len(group_tasks(plan_read(parse_options({
        "path": small_segments, "subscribe": "t", "minPartitions": "2"})))) == 3
    # minPartitions=7: offset ranges split as Spark's calculator (round(800/2400*7) = 2
    # parts each: 6, as Spark's source gives)
    many = group_tasks(plan_read(parse_options({
        "path": small_segments, "subscribe": "t", "minPartitions": "7"})))
    assert len(many) == 6 and read_offsets(many) == list(range(800)) * 3
    # a byte target packs up to it
    target = 32 * 1024
    packed = group_tasks(plan_read(parse_options({
        "path": small_segments, "subscribe": "t", "maxPartitionBytes": str(target)})))
    total = sum(t.planned_bytes for t in packed)
    assert len(packed) >= total // target and all(t.planned_bytes <= target for t in packed)
    assert read_offsets(packed) == list(range(800)) * 3


def test_a_large_segment_is_cut_by_bytes(tmp_path):
    root = str(tmp_path)
    build(root, n=2000, cfg=LogConfig(segment_bytes=1 << 30, index_interval_bytes=4096))
    assert len(segments(root)) == 1
    tasks = group_tasks(plan_read(parse_options({"path": root, "subscribe": "t",
                                                 "maxPartitionBytes": "65536"})))
    assert len(tasks) >= 5 and all(t.planned_bytes <= 65536 + 4096 for t in tasks)
    assert read_offsets(tasks) == list(range(2000))


@pytest.mark.spark
def test_spark_tasks_and_rows(spark, small_segments):
    def df(**options):
        r = spark.read.format("kafkalog").option("subscribe", "t")
        for k, v in options.items():
            r = r.option(k, v)
        return r.load(small_segments)

    assert df().rdd.getNumPartitions() == 3
    assert df(minPartitions="2").rdd.getNumPartitions() == 3
    assert df(minPartitions="12").rdd.getNumPartitions() == 12
    assert df().count() == 2400
    got = sorted((r.partition, r.offset, bytes(r.value)) for r in df().collect())
    want = sorted((p, r[0], r[4]) for p in range(3)
                  for r in kp_visible(os.path.join(small_segments, f"t-{p}"), True)[0])
    assert got == want


@pytest.mark.spark
def test_micro_batches_are_packed_too(small_segments):
    reader = KafkaLogStreamReader({"path": small_segments, "subscribe": "t",
                                   "startingOffsets": "earliest"}, None)
    start = reader.initialOffset()
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    tasks = reader.partitions(start, end)
    assert len(tasks) == 3
    assert read_offsets(tasks) == list(range(800)) * 3


# -- missing segments -------------------------------------------------------------------------

@pytest.fixture
def holed(tmp_path):
    """Topic t, one partition of 600 records in small segments, the third segment deleted:
    returns (log dir, first missing offset, next segment's base offset)."""
    root = str(tmp_path / "logs")
    build(root, n=600)
    bases = segments(root)
    gone, after = bases[2], bases[3]
    path = os.path.join(root, "t-0")
    for suffix in (".log", ".index", ".timeindex"):
        name = os.path.join(path, f"{gone:020d}{suffix}")
        if os.path.exists(name):
            os.unlink(name)
    return root, gone, after


def opts(root, **kw):
    return parse_options({"path": root, "subscribe": "t", **kw})


def test_missing_segment_fails_the_read(holed):
    root, gone, after = holed
    tasks = group_tasks(plan_read(opts(root)))
    with pytest.raises(DataLossError) as info:
        read_offsets(tasks)
    text = str(info.value)
    assert "[KAFKA_DATA_LOSS]" in text and f"offset [{gone}, {after})" in text
    assert "a segment is missing" in text


def test_missing_segment_skipped_with_a_warning(holed, caplog):
    root, gone, after = holed
    with caplog.at_level(logging.WARNING):
        got = read_offsets(group_tasks(plan_read(opts(root, failOnDataLoss="false"))))
    assert got == [o for o in range(600) if not gone <= o < after]
    assert any(f"offset [{gone}, {after})" in r.getMessage() for r in caplog.records)


def test_a_range_starting_in_the_hole(holed, caplog):
    root, gone, after = holed
    start = json.dumps({"t": {"0": gone + 1}})
    with pytest.raises(DataLossError, match=rf"offset \[{gone + 1}, {after}\)"):
        plan_read(opts(root, startingOffsets=start, endingOffsets='{"t": {"0": -1}}'))
    got = read_offsets(group_tasks(plan_read(opts(
        root, startingOffsets=start, endingOffsets='{"t": {"0": -1}}',
        failOnDataLoss="false"))))
    assert got == list(range(after, 600))


def test_a_read_beside_the_hole_is_fine(holed):
    root, gone, _after = holed
    got = read_offsets(group_tasks(plan_read(opts(
        root, startingOffsets='{"t": {"0": 0}}', endingOffsets=json.dumps({"t": {"0": gone}})))))
    assert got == list(range(gone))


@pytest.mark.parametrize("how", ["topic-config", "cleaner-checkpoint"])
def test_compacted_partitions_have_gaps(holed, how):
    root, gone, after = holed
    if how == "topic-config":
        with open(os.path.join(root, "kafkafs-topic-configs.json"), "w") as f:
            json.dump({"version": 1, "topics": {"t": {"cleanup.policy": "compact"}}}, f)
    else:
        with open(os.path.join(root, "cleaner-offset-checkpoint"), "w") as f:
            f.write(f"0\n1\nt 0 {gone}\n")
    for path in (root, "file://" + root):
        got = read_offsets(group_tasks(plan_read(opts(path))))
        assert got == [o for o in range(600) if not gone <= o < after]


def test_missing_segment_through_pyarrow(holed):
    root, gone, after = holed
    with pytest.raises(DataLossError, match=rf"offset \[{gone}, {after}\)"):
        read_offsets(group_tasks(plan_read(opts("file://" + root))))


@pytest.mark.spark
def test_missing_segment_in_spark(spark, holed):
    root, gone, after = holed

    def df(**kw):
        r = spark.read.format("kafkalog").option("subscribe", "t")
        for k, v in kw.items():
            r = r.option(k, v)
        return r.load(root)

    with pytest.raises(Exception, match=rf"KAFKA_DATA_LOSS.*offset \[{gone}, {after}\)"):
        df().count()
    assert df(failOnDataLoss="false").count() == 600 - (after - gone)


def test_a_segment_removed_between_listing_and_planning_is_planned_from_a_new_listing(
        tmp_path, monkeypatch):
    """Read-only loads open segments on first use: a segment a live broker's retention
    removes after the partition dir was listed but before the planner reads its size makes
    the planner list the dir again (it skipped the whole partition before)."""
    from kafkafs.log import segment as segment_mod
    from kafkafs.spark import views as views_mod

    logs = tmp_path / "logs"
    (logs / "ret-0").mkdir(parents=True)
    lg = load_log(str(logs / "ret-0"), "ret", 0, LogConfig(segment_bytes=300))
    for i in range(40):
        lg.append([(1_000 + i, None, b"value-%03d" % i * 4, ())])
    assert len(lg.segments()) > 3
    lg.close()
    first = min(n for n in os.listdir(logs / "ret-0") if n.endswith(".log"))
    real = segment_mod.LogSegment.load_sizes
    calls = []

    def load_sizes(segments):
        if not calls:  # retention removes the oldest segment right after the listing
            os.unlink(logs / "ret-0" / first)
        calls.append(len(segments))
        return real(segments)

    monkeypatch.setattr(views_mod.LogSegment, "load_sizes", staticmethod(load_sizes))
    views = views_mod.open_local_views(str(logs), lambda t: True)
    try:
        assert [v.tp for v in views] == [("ret", 0)]
        assert len(calls) == 2 and calls[1] == calls[0] - 1
        assert views[0].segments[0].name != first
    finally:
        for v in views:
            v.close()
