"""``spark.read.format("kafkalog")`` (issue 12 item 1): what Spark reads equals what
kafka-python decodes from the same segment files (tests/spark_expect.py), for every option,
at segment boundaries, for compacted topics with offset gaps, transactional data under both
isolation levels, every codec and legacy format (tests/corpus), local paths and file://
URIs (pyarrow.fs); damage fails clearly; a partition being appended to reads as planned;
PySpark 4.3.0's pushdown leak does not touch kafkalog."""

from __future__ import annotations

import json
import os
import random
import shutil
import struct
from dataclasses import replace

import pytest
from spark_expect import (
    aio_visible,
    kp_batch,
    kp_visible,
    offset_for_timestamp,
    rows,
    spark_rows,
    write_segments,
)

from kafkafs.log.config import LogConfig
from kafkafs.log.loader import load_log
from kafkafs.record import compression as codecs
from kafkafs.record.errors import CorruptRecordError
from kafkafs.spark.columns import read_slice
from kafkafs.spark.options import parse_options
from kafkafs.spark.plan import DataLossError, plan_read

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000
CODECS = [codecs.NONE, codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD]


def build_plain(logs: str, topic: str = "plain", partitions: int = 2, n: int = 1500,
                seed: int = 0) -> None:
    """A topic written by kafkafs's log layer: small segments and a dense index, batches of
    1-40 records in every codec, null and empty keys and values, headers (a null value, a
    non-ASCII key, an empty one), timestamps that now and then go back; partition 1 under
    LogAppendTime."""
    cfg = LogConfig(segment_bytes=8 * 1024, index_interval_bytes=512)
    for p in range(partitions):
        rnd = random.Random(seed * 100 + p)
        path = os.path.join(logs, f"{topic}-{p}")
        os.makedirs(path, exist_ok=True)
        lg = load_log(path, topic, p, replace(cfg, message_timestamp_type="LogAppendTime")
                      if p == 1 else cfg)
        off = 0
        while off < n:
            recs = []
            for o in range(off, min(n, off + rnd.randint(1, 40))):
                ts = T0 + o * 10 - (rnd.randint(1, 30) if o % 17 == 0 else 0)
                key = None if o % 5 == 0 else b"" if o % 7 == 0 else b"key-%d" % (o % 50)
                value = None if o % 11 == 0 else (b"v%d-" % o) * rnd.randint(0, 30)
                headers = [] if o % 3 else [("h", b"x"), ("\u00e9-\u00fc", None), ("", b"")]
                recs.append((ts, key, value, headers))
            lg.append(recs, compression=rnd.choice(CODECS))
            off += len(recs)
        lg.flush()
        lg.close()


def bases(part_dir: str) -> list:
    return sorted(int(n[:20]) for n in os.listdir(part_dir) if n.endswith(".log"))


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    logs = str(tmp_path_factory.mktemp("plain-logs"))
    build_plain(logs)
    return logs


def read(spark, path, **options):
    r = spark.read.format("kafkalog")
    for k, v in options.items():
        r = r.option(k, v)
    return r.load(path)


def expected(logs, topic, ranges, committed=True, headers=True):
    """Rows of ``ranges`` ``{partition: (start, end or None)}`` from kafka-python."""
    out = []
    for p, (start, end) in sorted(ranges.items()):
        recs, stop = kp_visible(os.path.join(logs, f"{topic}-{p}"), committed)
        end = stop if end is None else end
        out += rows(topic, p, [r for r in recs if start <= r[0] < end], headers)
    return out


# -- everything, every codec -------------------------------------------------------------------

def test_reads_every_record_like_kafka_python(spark, plain):
    df = read(spark, plain, subscribe="plain", includeHeaders="true")
    assert spark_rows(df) == expected(plain, "plain", {0: (0, None), 1: (0, None)})
    assert df.count() == 3000
    # without headers the schema has no headers column and the rows are the same
    df = read(spark, plain, subscribe="plain")
    assert "headers" not in df.columns
    assert spark_rows(df, headers=False) == \
        expected(plain, "plain", {0: (0, None), 1: (0, None)}, headers=False)


def _ts(logs, p, offset):
    recs, _ = kp_visible(os.path.join(logs, f"plain-{p}"), True)
    return next(r[1] for r in recs if r[0] == offset)


def _first_at(logs, p, ts):
    recs, end = kp_visible(os.path.join(logs, f"plain-{p}"), True)
    found = offset_for_timestamp(recs, ts)
    return end if found is None else found


def _cases(logs):
    """(options, expected {partition: (start, end)}) at segment boundaries."""
    b0, b1 = bases(os.path.join(logs, "plain-0")), bases(os.path.join(logs, "plain-1"))
    assert len(b0) > 4 and len(b1) > 4
    t0, t1 = _ts(logs, 0, b0[2]), _ts(logs, 1, b1[1])
    cases = [
        ({"startingOffsets": json.dumps({"plain": {"0": b0[1], "1": b1[2] - 1}}),
          "endingOffsets": json.dumps({"plain": {"0": b0[2], "1": b1[3] + 1}})},
         {0: (b0[1], b0[2]), 1: (b1[2] - 1, b1[3] + 1)}),
        ({"startingOffsets": json.dumps({"plain": {"0": -2, "1": b1[4]}}),
          "endingOffsets": json.dumps({"plain": {"0": b0[1] - 1, "1": -1}})},
         {0: (0, b0[1] - 1), 1: (b1[4], None)}),
        ({"startingTimestamp": str(t0)},
         {0: (_first_at(logs, 0, t0), None), 1: (_first_at(logs, 1, t0), None)}),
        ({"startingOffsetsByTimestamp": json.dumps({"plain": {"0": t0, "1": t1}}),
          "endingOffsetsByTimestamp": json.dumps({"plain": {"0": t0 + 3000, "1": t1 + 1}})},
         {0: (_first_at(logs, 0, t0), _first_at(logs, 0, t0 + 3000)),
          1: (_first_at(logs, 1, t1), _first_at(logs, 1, t1 + 1))}),
        ({"endingTimestamp": str(t0), "startingOffsets": "earliest"},
         {0: (0, _first_at(logs, 0, t0)), 1: (0, _first_at(logs, 1, t0))}),
        # precedence: startingTimestamp over startingOffsetsByTimestamp over startingOffsets
        ({"startingTimestamp": str(t0), "startingOffsets": "earliest",
          "startingOffsetsByTimestamp": json.dumps({"plain": {"0": 0, "1": 0}})},
         {0: (_first_at(logs, 0, t0), None), 1: (_first_at(logs, 1, t0), None)}),
        ({"startingOffsetsByTimestamp": json.dumps({"plain": {"0": t0, "1": 0}}),
          "startingOffsets": json.dumps({"plain": {"0": 5, "1": 5}})},
         {0: (_first_at(logs, 0, t0), None), 1: (0, None)}),
        # no record that late: latest (nothing), as startingOffsetsByTimestampStrategy says
        ({"startingTimestamp": str(T0 * 2), "startingOffsetsByTimestampStrategy": "latest"},
         {0: (1500, None), 1: (1500, None)}),
        ({"assign": json.dumps({"plain": [1]}),
          "startingOffsets": json.dumps({"plain": {"1": b1[1]}})},
         {1: (b1[1], None)}),
    ]
    return cases


def test_offsets_and_timestamps_at_segment_boundaries(spark, plain):
    for options, ranges in _cases(plain):
        df = read(spark, plain, **{"subscribe": "plain", "includeHeaders": "true", **options}) \
            if "assign" not in options else \
            read(spark, plain, **{"includeHeaders": "true", **options})
        assert spark_rows(df) == expected(plain, "plain", ranges), options


def test_partitioning_options_keep_the_records(spark, plain):
    """minPartitions, maxRecordsPerPartition and maxBytesPerPartition change how many tasks
    read, never what they read."""
    want = expected(plain, "plain", {0: (0, None), 1: (0, None)}, headers=False)
    natural = read(spark, plain, subscribe="plain").rdd.getNumPartitions()
    assert natural == 2  # one task per topic-partition, as Spark's Kafka source, whatever
    assert len(bases(os.path.join(plain, "plain-0"))) > 2  # the count of segments
    for options, check in (
            ({"minPartitions": str(natural * 3)},
             lambda n: natural * 2 <= n <= natural * 4),
            ({"maxRecordsPerPartition": "100"}, lambda n: n >= 30),
            ({"maxBytesPerPartition": "4096"}, lambda n: n > natural * 1.5),
            ({"minPartitions": "1"}, lambda n: n == natural)):
        df = read(spark, plain, subscribe="plain", **options)
        assert check(df.rdd.getNumPartitions()), (options, df.rdd.getNumPartitions())
        assert spark_rows(df, headers=False) == want, options


# -- pushdown ----------------------------------------------------------------------------------

def test_filtered_scans_of_one_dataframe_are_right(spark, plain):
    """PySpark 4.3.0 leaks pushed filters into later scans of the same DataFrame; kafkalog
    pushes none, so reuse gives right answers with pushdown enabled or not."""
    for enabled in ("true", "false"):
        spark.conf.set("spark.sql.python.filterPushdown.enabled", enabled)
        try:
            df = read(spark, plain, subscribe="plain")
            assert df.where("offset = 9").count() == 2
            assert df.count() == 3000
            both = df.where("offset = 9").union(df.where("offset = 10 AND partition = 1"))
            assert sorted((r.partition, r.offset) for r in both.collect()) == \
                [(0, 9), (1, 9), (1, 10)]
            assert df.where("offset < 5").count() == 10
        finally:
            spark.conf.unset("spark.sql.python.filterPushdown.enabled")


# -- compacted topics --------------------------------------------------------------------------

def build_compacted(logs: str) -> None:
    """A compacted topic as a broker's cleaner leaves it, written with kafka-python: gaps
    inside batches (offset deltas that skip), between batches and at segment boundaries, a
    batch emptied to its last offset, tombstones (null values)."""
    def recs(offsets, tombstone=()):
        return [(T0 + o, b"k%d" % (o % 7), None if o in tombstone else b"v%d" % o, [])
                for o in offsets]

    seg0 = [kp_batch(0, recs([0, 3, 4]), offset_deltas=[0, 3, 4]),
            kp_batch(10, recs([10, 11]), compression=codecs.GZIP),
            kp_batch(15, recs([15, 19], tombstone=(19,)), offset_deltas=[0, 4])]
    seg1 = [kp_batch(30, recs([31, 35]), offset_deltas=[1, 5]),
            kp_batch(40, recs([40]), compression=codecs.ZSTD)]
    seg2 = [kp_batch(50, recs([52]), offset_deltas=[2])]
    write_segments(os.path.join(logs, "compacted-0"), {0: seg0, 30: seg1, 50: seg2})
    # the broker's cleaner records the partitions it cleaned: that is how a reader of a
    # broker's log dir (which keeps no topic configs) knows the gaps are compaction's
    with open(os.path.join(logs, "cleaner-offset-checkpoint"), "w") as f:
        f.write("0\n1\ncompacted 0 53\n")


def test_compacted_topic_with_offset_gaps(spark, tmp_path):
    logs = str(tmp_path)
    build_compacted(logs)
    want = expected(logs, "compacted", {0: (0, None)})
    assert [r[4] for r in want] == [0, 3, 4, 10, 11, 15, 19, 31, 35, 40, 52]
    assert spark_rows(read(spark, logs, subscribe="compacted", includeHeaders="true")) == want
    # starting and ending in gaps, inside a batch, at a segment without its first offsets
    for start, end in ((1, 12), (5, 31), (20, 36), (36, 53), (16, 19)):
        df = read(spark, logs, subscribe="compacted", includeHeaders="true",
                  startingOffsets=json.dumps({"compacted": {"0": start}}),
                  endingOffsets=json.dumps({"compacted": {"0": end}}))
        assert spark_rows(df) == expected(logs, "compacted", {0: (start, end)}), (start, end)


# -- transactions ------------------------------------------------------------------------------

def build_transactions(logs: str, topic: str, variant: str) -> None:
    """The transactional scenario of tests/test_txn_without_index.py (kafka-python batches:
    interleaved producers, commits, aborts, transactions across segments, one left open) as
    a broker-like dir: ``bare`` (no index files, no .txnindex, no snapshot) or ``clean``
    (a clean shutdown's snapshot at the log end offset)."""
    import test_txn_without_index as txn

    txn.build_dir(logs, topic, variant)


@pytest.mark.parametrize("variant", ["bare", "clean"])
def test_transactions_under_both_isolation_levels(spark, tmp_path, variant):
    logs = str(tmp_path / "logs")
    build_transactions(logs, "tx", variant)
    for uri in (logs, "file://" + logs):
        for level, committed in (("read_committed", True), ("read_uncommitted", False)):
            df = read(spark, uri, subscribe="tx", includeHeaders="true",
                      **{"kafka.isolation.level": level})
            want = expected(logs, "tx", {0: (0, None)}, committed)
            assert spark_rows(df) == want, (uri, level)
        # read_committed is the default
        assert spark_rows(read(spark, uri, subscribe="tx", includeHeaders="true")) == \
            expected(logs, "tx", {0: (0, None)}, True)
    # nothing past the last stable offset: an explicit end beyond it is refused
    _records, lso = kp_visible(os.path.join(logs, "tx-0"), True)
    with pytest.raises(Exception, match="last stable offset"):
        read(spark, logs, subscribe="tx",
             endingOffsets=json.dumps({"tx": {"0": lso + 1}})).count()


def test_transactions_written_by_kafkafs_with_txnindex(spark, tmp_path):
    """Transactions appended through kafkafs's log layer (which writes .txnindex files)."""
    from kafkafs.record.batch import encode_batch
    from kafkafs.record.control import ABORT as K_ABORT
    from kafkafs.record.control import COMMIT as K_COMMIT
    from kafkafs.record.control import encode_end_txn_marker_batch

    logs = str(tmp_path)
    path = os.path.join(logs, "ktx-0")
    os.makedirs(path)
    lg = load_log(path, "ktx", 0, LogConfig(segment_bytes=2048, index_interval_bytes=256))
    seq = {}
    for i in range(60):
        pid = 100 + i % 3
        if i % 4 == 3:
            kind = K_ABORT if i % 8 == 3 else K_COMMIT
            lg.append_encoded(bytearray(encode_end_txn_marker_batch(
                kind, base_offset=0, timestamp=T0 + i, producer_id=pid, producer_epoch=0,
                coordinator_epoch=1)))
            continue
        recs = [(T0 + i, b"k", b"txn-%d-%d" % (i, j), ()) for j in range(3)]
        lg.append_encoded(bytearray(encode_batch(
            recs, producer_id=pid, producer_epoch=0, base_sequence=seq.get(pid, 0),
            is_transactional=True, compression=codecs.LZ4 if i % 5 == 0 else codecs.NONE)))
        seq[pid] = seq.get(pid, 0) + 3
        lg.append([(T0 + i, None, b"plain-%d" % i, ())])
    lg.flush()
    lg.close()
    assert any(n.endswith(".txnindex") for n in os.listdir(path))
    for level, committed in (("read_committed", True), ("read_uncommitted", False)):
        df = read(spark, logs, subscribe="ktx", includeHeaders="true",
                  **{"kafka.isolation.level": level})
        assert spark_rows(df) == expected(logs, "ktx", {0: (0, None)}, committed), level


# -- every record format ---------------------------------------------------------------------

def test_every_record_format_and_codec_of_the_corpus(spark):
    """tests/corpus: v0/v1 messages and wrappers (gzip, snappy, lz4 with the historic header
    checksum), v2 in every codec, headers, transactions, LogAppendTime, a preallocated zero
    tail: each topic as kafka-python decodes it (aiokafka for the one kafka-python cannot
    read; read_uncommitted, so the markers' transactions show)."""
    from build_corpus import CORPUS

    bad_crc = "vec-kafka-python-control"  # a stored CRC that is wrong in its source
    by_aiokafka = {"vec-sarama-v1-lz4"}  # kafka-python fails on its v0 inner messages
    topics = sorted(d[:-2] for d in os.listdir(CORPUS) if d.endswith("-0") and d[:-2] != bad_crc)
    df = read(spark, CORPUS, subscribePattern="|".join(t.replace(".", r"\.") for t in topics),
              includeHeaders="true", **{"kafka.isolation.level": "read_uncommitted"})
    want = []
    for t in topics:
        recs = aio_visible(os.path.join(CORPUS, f"{t}-0")) if t in by_aiokafka else \
            kp_visible(os.path.join(CORPUS, f"{t}-0"), False)[0]
        want += rows(t, 0, recs)
    got = spark_rows(df)
    assert len(got) > 250 and {r[2] for r in got} == set(topics)
    assert got == sorted(want, key=lambda x: (x[2], x[3], x[4]))
    with pytest.raises(Exception, match="record batch is corrupt"):
        read(spark, CORPUS, subscribe=bad_crc, **{"kafka.isolation.level":
                                                  "read_uncommitted"}).count()


def test_damaged_batch_fails_the_query_clearly(spark, tmp_path):
    logs = str(tmp_path)
    build_plain(logs, "dmg", partitions=1, n=300)
    seg = os.path.join(logs, "dmg-0", f"{bases(os.path.join(logs, 'dmg-0'))[0]:020d}.log")
    with open(seg, "rb") as f:
        data = bytearray(f.read())
    pos = 0
    for _ in range(3):  # the fourth batch's payload gets a flipped byte
        pos += struct.unpack_from(">i", data, pos + 8)[0] + 12
    data[pos + 70] ^= 0xFF
    with open(seg, "wb") as f:
        f.write(bytes(data))
    with pytest.raises(Exception) as info:
        read(spark, logs, subscribe="dmg").count()
    assert "crc" in str(info.value).lower() and seg in str(info.value)
    assert f"position {pos}" in str(info.value)
    # every intact record before the damage is delivered first
    opts = parse_options({"path": logs, "subscribe": "dmg"})
    got = []
    with pytest.raises(CorruptRecordError) as info:
        for sl in plan_read(opts):
            for b in read_slice(sl):
                got += b.column("offset").to_pylist()
    assert info.value.position == pos
    first_damaged = struct.unpack_from(">q", data, pos)[0]
    assert got == list(range(first_damaged))


# -- data loss, live partitions ----------------------------------------------------------------

def test_fail_on_data_loss(spark, tmp_path):
    logs = str(tmp_path)
    build_plain(logs, "gone", partitions=1, n=600)
    b = bases(os.path.join(logs, "gone-0"))
    # retention removed the first two segments; the checkpoint says where the log starts
    for base in b[:2]:
        for suffix in (".log", ".index", ".timeindex"):
            p = os.path.join(logs, "gone-0", f"{base:020d}{suffix}")
            if os.path.exists(p):
                os.unlink(p)
    with open(os.path.join(logs, "log-start-offset-checkpoint"), "w") as f:
        f.write(f"0\n1\ngone 0 {b[2] + 3}\n")
    start = json.dumps({"gone": {"0": 5}})
    with pytest.raises(Exception, match="KAFKA_DATA_LOSS"):
        read(spark, logs, subscribe="gone", startingOffsets=start).count()
    df = read(spark, logs, subscribe="gone", startingOffsets=start, failOnDataLoss="false")
    assert spark_rows(df, headers=False) == \
        expected(logs, "gone", {0: (b[2] + 3, None)}, headers=False)
    # earliest is the log start offset, not the first segment's base offset
    assert read(spark, logs, subscribe="gone").agg({"offset": "min"}).first()[0] == b[2] + 3


def test_segment_deleted_after_planning(tmp_path):
    logs = str(tmp_path)
    build_plain(logs, "late", partitions=1, n=400)
    for fail in (True, False):
        slices = plan_read(parse_options({"path": logs, "subscribe": "late",
                                          "failOnDataLoss": str(fail).lower()}))
        victim = slices[0]
        saved = os.path.join(logs, "saved.log")
        shutil.copy(os.path.join(logs, "late-0", victim.file_name), saved)
        os.unlink(os.path.join(logs, "late-0", victim.file_name))
        try:
            if fail:
                with pytest.raises(DataLossError, match=r"offset \[0, "):
                    list(read_slice(victim))
            else:
                assert list(read_slice(victim)) == []
            # the other slices still read
            assert sum(b.num_rows for b in read_slice(slices[1])) == \
                slices[1].end_offset - slices[1].start_offset
        finally:
            shutil.move(saved, os.path.join(logs, "late-0", victim.file_name))


def test_segment_replaced_by_the_cleaner_after_planning(tmp_path):
    """A cleaner's swap renames a new file over a segment: the slice reads its offsets from
    the new file (what a consumer would read now), never stale positions."""
    logs = str(tmp_path)
    build_plain(logs, "swap", partitions=1, n=400)
    part = os.path.join(logs, "swap-0")
    slices = plan_read(parse_options({"path": logs, "subscribe": "swap",
                                      "includeHeaders": "true"}))
    victim = slices[1]
    # the cleaned segment: every third record, in batches with offset gaps
    recs, _ = kp_visible(part, False)
    kept = [r for r in recs if victim.base_offset <= r[0] < victim.end_offset and r[0] % 3 == 0]
    batches = [kp_batch(kept[i][0], [(r[1], r[3], r[4], r[5]) for r in kept[i:i + 5]],
                        offset_deltas=[r[0] - kept[i][0] for r in kept[i:i + 5]])
               for i in range(0, len(kept), 5)]
    tmp = os.path.join(part, victim.file_name + ".cleaned")
    with open(tmp, "wb") as f:
        f.write(b"".join(batches))
    os.replace(tmp, os.path.join(part, victim.file_name))
    got = [tuple(r.values()) for b in read_slice(victim) for r in b.to_pylist()]
    assert [g[4] for g in got] == [r[0] for r in kept]
    assert [(g[0], g[1], [(h["key"], h["value"]) for h in g[7]]) for g in got] == \
        [(r[3], r[4], r[5]) for r in kept]


def test_partition_being_appended_reads_as_planned(tmp_path):
    """Records appended (and segments rolled) after planning are not read; what was there
    is read whole."""
    logs = str(tmp_path)
    path = os.path.join(logs, "live-0")
    os.makedirs(path)
    cfg = LogConfig(segment_bytes=8192, index_interval_bytes=256)
    lg = load_log(path, "live", 0, cfg)
    for i in range(50):
        lg.append([(T0 + i, None, b"before-%d" % i * 5, ())] * 3)
    lg.flush()
    slices = plan_read(parse_options({"path": logs, "subscribe": "live"}))
    for i in range(200):  # appends into the planned active segment, then rolls
        lg.append([(T0 + i, None, b"after-%d" % i * 5, ())] * 3)
    lg.flush()
    got = [v for sl in slices for b in read_slice(sl) for v in b.column("value").to_pylist()]
    lg.close()
    assert len(got) == 150 and all(v.startswith(b"before-") for v in got)


def test_bytes_read_for_a_narrow_range(tmp_path):
    """startingOffsets/endingOffsets selecting a few records of a large segment read about
    an index interval around them, not the segment."""
    logs = str(tmp_path)
    path = os.path.join(logs, "big-0")
    os.makedirs(path)
    lg = load_log(path, "big", 0, LogConfig(index_interval_bytes=4096))
    for i in range(2000):
        lg.append([(T0 + i, b"k", b"x" * 200, ())] * 5)
    lg.flush()
    lg.close()
    size = os.path.getsize(os.path.join(path, f"{0:020d}.log"))
    opts = parse_options({"path": logs, "subscribe": "big",
                          "startingOffsets": json.dumps({"big": {"0": 5000}}),
                          "endingOffsets": json.dumps({"big": {"0": 5100}})})
    from kafkafs.spark.fileio import SegmentFile

    reads = []
    orig = SegmentFile.read

    def counting(self, pos, n):
        data = orig(self, pos, n)
        reads.append(len(data))
        return data

    SegmentFile.read = counting
    try:
        offs = [o for sl in plan_read(opts) for b in read_slice(sl)
                for o in b.column("offset").to_pylist()]
    finally:
        SegmentFile.read = orig
    assert offs == list(range(5000, 5100))
    assert sum(reads) <= 100 * 250 + 3 * 4096 + 8192, (sum(reads), size)
    assert sum(reads) < size / 50


def test_empty_reads(spark, plain, tmp_path):
    """A topic in no log dir, an empty partition, an empty range: no rows, no error."""
    assert read(spark, plain, subscribe="absent").count() == 0
    os.makedirs(tmp_path / "empty-0")
    load_log(str(tmp_path / "empty-0"), "empty", 0, LogConfig()).close()
    assert read(spark, str(tmp_path), subscribe="empty", includeHeaders="true").count() == 0
    assert read(spark, plain, subscribe="plain",
                startingOffsets=json.dumps({"plain": {"0": 7, "1": 1500}}),
                endingOffsets=json.dumps({"plain": {"0": 7, "1": 1500}})).count() == 0


def test_bad_options_fail_the_query_with_spark_messages(spark, plain):
    with pytest.raises(Exception, match="One of the following options must be specified"):
        read(spark, plain).count()
    with pytest.raises(Exception, match="KAFKA_START_OFFSET_DOES_NOT_MATCH_ASSIGNED"):
        read(spark, plain, subscribe="plain",
             startingOffsets=json.dumps({"plain": {"0": 1}})).count()
