"""``spark.readStream.format("kafkalog")`` (issue 12 item 2): what a streaming query reads,
batch after batch, equals what kafka-python decodes from the same segment files
(tests/spark_expect.py), exactly once: records appended while the query runs (by the log
layer, and through a real mount's ``append``), restarts from the checkpoint,
maxOffsetsPerTrigger, new partitions and topics under subscribePattern, segments deleted
by retention (failOnDataLoss), transactions under both isolation levels. The reader's
offset arithmetic (start offsets, rate limit, min/max with the trigger delay, the
AvailableNow target, the data-loss rules of a micro-batch) is checked directly too."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest
from conftest import sh
from spark_expect import kp_visible, rows, spark_rows

from kafkafs.log.config import LogConfig
from kafkafs.log.loader import load_log
from kafkafs.spark.plan import DataLossError
from kafkafs.spark.stream import (
    KafkaLogStreamReader,
    offsets_from_json,
    rate_limit,
    time_string_ms,
)

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000
SMALL = LogConfig(segment_bytes=2048, index_interval_bytes=256)


# -- helpers ---------------------------------------------------------------------------------

def open_log(logs: str, topic: str, partition: int = 0, cfg: LogConfig = SMALL):
    path = os.path.join(logs, f"{topic}-{partition}")
    os.makedirs(path, exist_ok=True)
    return load_log(path, topic, partition, cfg)


def put(lg, first: int, n: int, tag: str = "r", per_batch: int = 3) -> None:
    """Append records ``tag-first`` .. ``tag-(first+n-1)`` (keys now and then, headers)."""
    i = first
    while i < first + n:
        recs = [(T0 + j, b"k%d" % (j % 7) if j % 4 else None, b"%s-%d" % (tag.encode(), j),
                 [("h", b"%d" % j)] if j % 5 == 0 else [])
                for j in range(i, min(first + n, i + per_batch))]
        lg.append(recs)
        i += len(recs)


def expected(logs: str, topic: str, partitions, committed: bool = True, start=None,
             end=None) -> list:
    """Rows kafka-python decodes for ``partitions`` (``{p: from offset}`` or a list: from
    0), up to what that isolation level may read (or ``end[p]``)."""
    if not isinstance(partitions, dict):
        partitions = {p: 0 for p in partitions}
    out = []
    for p, lo in sorted(partitions.items()):
        recs, stop = kp_visible(os.path.join(logs, f"{topic}-{p}"), committed)
        hi = stop if end is None else end[p]
        out += rows(topic, p, [r for r in recs if lo <= r[0] < hi])
    return out


class Batches:
    """A foreachBatch sink: every micro-batch's rows (spark_rows shape), by batch id."""

    def __init__(self):
        self.batches: list[tuple[int, list]] = []
        self.lock = threading.Lock()

    def __call__(self, df, batch_id):
        got = spark_rows(df)
        with self.lock:
            self.batches.append((batch_id, got))

    @property
    def rows(self) -> list:
        with self.lock:
            out = [r for _b, rs in self.batches for r in rs]
        return sorted(out, key=lambda x: (x[2], x[3], x[4]))

    def sizes(self) -> list:
        with self.lock:
            return [len(rs) for _b, rs in self.batches]


def stream(spark, logs, **options):
    r = spark.readStream.format("kafkalog").option("includeHeaders", "true")
    for k, v in options.items():
        r = r.option(k, v)
    return r.load(logs)


def run_available_now(spark, logs, checkpoint, sink=None, **options) -> Batches:
    sink = sink or Batches()
    q = (stream(spark, logs, **options).writeStream.foreachBatch(sink)
         .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    try:
        q.awaitTermination(120)
    finally:
        q.stop()
    return sink


def start_query(spark, logs, checkpoint, sink, trigger="200 milliseconds", **options):
    return (stream(spark, logs, **options).writeStream.foreachBatch(sink)
            .option("checkpointLocation", checkpoint).trigger(processingTime=trigger).start())


def reader(logs, **options) -> KafkaLogStreamReader:
    return KafkaLogStreamReader({"path": logs, **options}, None)


def dups(rows_) -> list:
    keys = [(r[2], r[3], r[4]) for r in rows_]
    return [k for k in set(keys) if keys.count(k) > 1]


# -- through Spark ---------------------------------------------------------------------------

def test_appended_while_running_arrive_exactly_once(spark, tmp_path):
    """Two partitions appended to by the log layer (segments rolling) while a query runs
    every 200 ms: every record arrives once, in the micro-batches, as kafka-python reads
    the files; the stream offset is the built-in source's JSON."""
    logs = str(tmp_path / "logs")
    lgs = [open_log(logs, "live", p) for p in range(2)]
    for p, lg in enumerate(lgs):
        put(lg, 0, 40, f"p{p}")
    sink = Batches()
    q = start_query(spark, logs, str(tmp_path / "ck"), sink, subscribe="live",
                    startingOffsets="earliest")
    try:
        q.processAllAvailable()
        assert sink.rows == expected(logs, "live", [0, 1])
        stop = time.monotonic() + 2.5
        n = [40, 40]
        while time.monotonic() < stop:  # appends land between and during triggers
            for p, lg in enumerate(lgs):
                put(lg, n[p], 7, f"p{p}", per_batch=7)
                n[p] += 7
            time.sleep(0.05)
        q.processAllAvailable()
        got = sink.rows
        progress = q.lastProgress
    finally:
        q.stop()
        for lg in lgs:
            lg.close()
    assert len(lgs[0].segments()) > 3  # rolled while the query ran
    assert dups(got) == []
    assert got == expected(logs, "live", [0, 1])
    assert len(sink.batches) >= 3
    assert json.loads(progress["sources"][0]["endOffset"]) == \
        {"live": {"0": n[0], "1": n[1]}}


@pytest.mark.parametrize("uri", [False, True], ids=["local", "file-uri"])
def test_restart_from_checkpoint_reads_only_new_records(spark, tmp_path, uri):
    """Local paths through the log layer, file:// URIs through pyarrow.fs (an archive being
    copied in): the restarted query reads only what came after its checkpoint."""
    logs, ck = str(tmp_path / "logs"), str(tmp_path / "ck")
    where = "file://" + logs if uri else logs
    lg = open_log(logs, "rs")
    put(lg, 0, 30)
    first = run_available_now(spark, where, ck, subscribe="rs", startingOffsets="earliest")
    assert first.rows == expected(logs, "rs", [0])
    put(lg, 30, 25)
    lg.close()
    # startingOffsets only applies to a new query: the checkpoint says where to go on
    second = run_available_now(spark, where, ck, subscribe="rs", startingOffsets="earliest")
    assert second.rows == expected(logs, "rs", {0: 30})
    third = run_available_now(spark, where, ck, subscribe="rs")
    assert third.rows == [] and third.batches == []


def test_starting_offsets_latest_is_the_stream_default(spark, tmp_path):
    logs, ck = str(tmp_path / "logs"), str(tmp_path / "ck")
    lg = open_log(logs, "lt")
    put(lg, 0, 12)
    sink = Batches()
    q = start_query(spark, logs, ck, sink, subscribe="lt")
    try:
        q.processAllAvailable()
        assert sink.rows == []
        put(lg, 12, 5)
        q.processAllAvailable()
    finally:
        q.stop()
        lg.close()
    assert sink.rows == expected(logs, "lt", {0: 12})


def test_max_offsets_per_trigger_splits_micro_batches(spark, tmp_path):
    """AvailableNow with maxOffsetsPerTrigger: several micro-batches of at most the limit,
    each split across the partitions in proportion to their lag (Kafka's rateLimit)."""
    logs = str(tmp_path / "logs")
    for p, n in ((0, 90), (1, 30)):
        lg = open_log(logs, "mx", p)
        put(lg, 0, n)
        lg.close()
    sink = run_available_now(spark, logs, str(tmp_path / "ck"), subscribe="mx",
                             startingOffsets="earliest", maxOffsetsPerTrigger="40")
    assert sink.sizes() == [40, 40, 40]
    assert sink.rows == expected(logs, "mx", [0, 1])
    first = sink.batches[0][1]
    assert sum(r[3] == 0 for r in first) == 30 and sum(r[3] == 1 for r in first) == 10


def test_new_partition_and_topic_matching_the_pattern(spark, tmp_path):
    """A partition added to a topic and a new topic matching subscribePattern are read from
    their start; a topic that does not match never is."""
    logs = str(tmp_path / "logs")
    lg = open_log(logs, "ev-a", 0)
    put(lg, 0, 10, "a0")
    sink = Batches()
    q = start_query(spark, logs, str(tmp_path / "ck"), sink, subscribePattern="ev-.*",
                    startingOffsets="latest")
    try:
        q.processAllAvailable()
        assert sink.rows == []
        put(lg, 10, 4, "a0")
        for topic, p, tag in (("ev-a", 1, "a1"), ("ev-b", 0, "b0"), ("other", 0, "o")):
            new = open_log(logs, topic, p)
            put(new, 0, 8, tag)
            new.close()
        q.processAllAvailable()
    finally:
        q.stop()
        lg.close()
    want = expected(logs, "ev-a", {0: 10, 1: 0}) + expected(logs, "ev-b", [0])
    assert sink.rows == sorted(want, key=lambda x: (x[2], x[3], x[4]))


@pytest.mark.parametrize("fail", [True, False])
def test_retention_deletes_segments_under_the_query(spark, tmp_path, fail):
    """Segments deleted by retention while the query is stopped: under failOnDataLoss the
    restarted query fails with KAFKA_DATA_LOSS; without, it skips to the log start offset."""
    logs, ck = str(tmp_path / "logs"), str(tmp_path / "ck")
    lg = open_log(logs, "ret", 0, LogConfig(segment_bytes=1024, index_interval_bytes=128,
                                           retention_bytes=2500))
    put(lg, 0, 20)
    opts = {"subscribe": "ret", "startingOffsets": "earliest",
            "failOnDataLoss": str(fail).lower()}
    first = run_available_now(spark, logs, ck, **opts)
    assert first.rows == expected(logs, "ret", [0])
    put(lg, 20, 60)
    assert lg.delete_old_segments() > 0
    lg.remove_deleted_segments(force=True)
    log_start = lg.log_start_offset
    lg.close()
    assert log_start > 20
    if fail:
        with pytest.raises(Exception, match=r"KAFKA_DATA_LOSS.*offset \[20, "):
            run_available_now(spark, logs, ck, **opts)
    else:
        second = run_available_now(spark, logs, ck, **opts)
        assert second.rows == expected(logs, "ret", {0: log_start})


def _txn_log(logs: str, topic: str):
    """0-9 plain, 10-12 aborted (pid 8), marker 13, 14-16 plain, 17-19 an open transaction
    (pid 7), 20-24 plain: the last stable offset is 17."""
    from kafkafs.record.batch import encode_batch
    from kafkafs.record.control import ABORT as K_ABORT
    from kafkafs.record.control import encode_end_txn_marker_batch

    lg = open_log(logs, topic)
    put(lg, 0, 10)
    lg.append_encoded(bytearray(encode_batch(
        [(T0, b"t", b"aborted-%d" % j, ()) for j in range(3)], producer_id=8,
        producer_epoch=0, base_sequence=0, is_transactional=True)))
    lg.append_encoded(bytearray(encode_end_txn_marker_batch(
        K_ABORT, base_offset=0, timestamp=T0, producer_id=8, producer_epoch=0,
        coordinator_epoch=1)))
    put(lg, 14, 3)
    lg.append_encoded(bytearray(encode_batch(
        [(T0, b"t", b"open-%d" % j, ()) for j in range(3)], producer_id=7,
        producer_epoch=0, base_sequence=0, is_transactional=True)))
    put(lg, 20, 5)
    return lg


def test_isolation_levels_with_an_open_transaction(spark, tmp_path):
    """read_committed (the default) reads up to the last stable offset and nothing aborted;
    once the transaction commits, the restarted query reads the rest. read_uncommitted
    reads every data record at once."""
    from kafkafs.record.control import COMMIT as K_COMMIT
    from kafkafs.record.control import encode_end_txn_marker_batch

    logs = str(tmp_path / "logs")
    lg = _txn_log(logs, "tx")
    committed = run_available_now(spark, logs, str(tmp_path / "ck1"), subscribe="tx",
                                  startingOffsets="earliest")
    assert committed.rows == expected(logs, "tx", [0], committed=True)
    assert max(r[4] for r in committed.rows) == 16
    assert not any(r[1].startswith(b"aborted") for r in committed.rows)
    uncommitted = run_available_now(spark, logs, str(tmp_path / "ck2"), subscribe="tx",
                                    startingOffsets="earliest",
                                    **{"kafka.isolation.level": "read_uncommitted"})
    assert uncommitted.rows == expected(logs, "tx", [0], committed=False)
    assert len(uncommitted.rows) == 24
    lg.append_encoded(bytearray(encode_end_txn_marker_batch(
        K_COMMIT, base_offset=0, timestamp=T0, producer_id=7, producer_epoch=0,
        coordinator_epoch=1)))
    put(lg, 26, 2)
    lg.close()
    rest = run_available_now(spark, logs, str(tmp_path / "ck1"), subscribe="tx")
    assert rest.rows == expected(logs, "tx", {0: 17}, committed=True)
    assert [r[1] for r in rest.rows[:3]] == [b"open-0", b"open-1", b"open-2"]


def test_records_appended_through_the_mount_arrive_exactly_once(spark, mount, tmp_path):
    """``echo >> MOUNT/t/0/append`` while the query runs: each line arrives once, and the
    rows are what kafka-python decodes from the daemon's log dir."""
    os.mkdir(mount.path("feed"))
    p = mount.path("feed", "0")
    logs = mount.log_dirs[0]
    assert sh(f"echo 'line 0' >> {p}/append").returncode == 0
    sink = Batches()
    q = start_query(spark, logs, str(tmp_path / "ck"), sink, subscribe="feed",
                    startingOffsets="earliest")
    try:
        q.processAllAvailable()
        for i in range(1, 31):
            r = sh(f"echo 'line {i}' >> {p}/append")
            assert r.returncode == 0, r.stderr
            if i % 10 == 0:
                time.sleep(0.3)
        assert sh(f"printf 'line 31\\nline 32\\n' >> {p}/append").returncode == 0
        q.processAllAvailable()
    finally:
        q.stop()
    got = sink.rows
    assert [r[1] for r in got] == [b"line %d" % i for i in range(33)]
    assert [r[4] for r in got] == list(range(33))
    assert got == expected(logs, "feed", [0])


# -- the reader's arithmetic, without Spark ------------------------------------------------------

def test_initial_offsets_from_the_starting_options(tmp_path):
    logs = str(tmp_path / "logs")
    for p in range(2):
        lg = open_log(logs, "io", p)
        put(lg, 0, 20 + p)
        lg.close()
    assert reader(logs, subscribe="io").initialOffset() == {"io": {"0": 20, "1": 21}}
    assert reader(logs, subscribe="io", startingOffsets="earliest").initialOffset() == \
        {"io": {"0": 0, "1": 0}}
    start = json.dumps({"io": {"0": 5, "1": -1}})
    assert reader(logs, subscribe="io", startingOffsets=start).initialOffset() == \
        {"io": {"0": 5, "1": 21}}
    assert reader(logs, subscribe="io", startingTimestamp=str(T0 + 7)).initialOffset() == \
        {"io": {"0": 7, "1": 7}}
    by_ts = json.dumps({"io": {"0": T0 + 3, "1": T0 + 100}})
    with pytest.raises(ValueError, match="No offset matched"):
        reader(logs, subscribe="io", startingOffsetsByTimestamp=by_ts).initialOffset()
    assert reader(logs, subscribe="io", startingOffsetsByTimestamp=by_ts,
                  startingOffsetsByTimestampStrategy="latest").initialOffset() == \
        {"io": {"0": 3, "1": 21}}
    with pytest.raises(ValueError, match="KAFKA_START_OFFSET_DOES_NOT_MATCH_ASSIGNED"):
        reader(logs, subscribe="io", startingOffsets=json.dumps({"io": {"0": 1}})) \
            .initialOffset()
    # a topic that is not there yet: no partitions, read from earliest when they come
    assert reader(logs, subscribe="later").initialOffset() == {}


def test_a_partition_missing_for_a_moment_is_looked_for_again(tmp_path, monkeypatch):
    """A partition of the start offset not found when the log dirs are opened (a segment
    removed while it was loaded) is looked for again (fetchOffset.numRetries /
    retryIntervalMs); only when it stays away is it taken as gone."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from kafkafs.spark import plan

    logs = str(tmp_path / "logs")
    lg = open_log(logs, "rt")
    put(lg, 0, 6)
    lg.close()
    real, calls = plan.open_partitions, []

    def flaky(opts):
        views = real(opts)
        calls.append(1)
        if len(calls) == 1:
            views.pop(("rt", 0)).close()
        return views

    monkeypatch.setattr(plan, "open_partitions", flaky)
    r = reader(logs, subscribe="rt", **{"fetchOffset.retryIntervalMs": "20"})
    assert r.latestOffset({"rt": {"0": 2}}, ReadAllAvailable()) == {"rt": {"0": 6}}
    assert len(calls) == 2
    calls.clear()
    r = reader(logs, subscribe="rt", **{"fetchOffset.numRetries": "1"})
    assert r.latestOffset({"rt": {"0": 2}}, ReadAllAvailable()) == {}
    assert len(calls) == 1


def test_planner_warnings_once_a_query(tmp_path, caplog):
    """The log dirs are opened every trigger: a note about them is logged once, not every
    second."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    logs = str(tmp_path / "logs")
    os.makedirs(logs)
    r = reader(logs, subscribe="later")
    with caplog.at_level("WARNING"):
        for _ in range(3):
            assert r.latestOffset({}, ReadAllAvailable()) == {}
    assert caplog.text.count("Topics later are in none of the log dirs") == 1


def test_stream_options_are_checked(tmp_path):
    logs = str(tmp_path)
    with pytest.raises(ValueError, match="ending offset not valid in streaming queries"):
        reader(logs, subscribe="t", endingOffsets="latest")
    with pytest.raises(ValueError, match=r"minOffsetPerTrigger\(5\) is higher"):
        reader(logs, subscribe="t", minOffsetsPerTrigger="5", maxOffsetsPerTrigger="4")
    with pytest.raises(ValueError, match='Invalid suffix: "parsecs"'):
        reader(logs, subscribe="t", maxTriggerDelay="5parsecs")
    with pytest.raises(ValueError, match="maxOffsetsPerTrigger must be positive"):
        reader(logs, subscribe="t", maxOffsetsPerTrigger="0")
    with pytest.raises(ValueError, match='For input string: "x"'):
        reader(logs, subscribe="t", maxOffsetsPerTrigger="x")
    assert [time_string_ms(s) for s in ("15m", "250", "2s", "1500us", " 1H ", "1d")] == \
        [900_000, 250, 2000, 1, 3_600_000, 86_400_000]
    with pytest.raises(ValueError, match="is not a stream offset of this source"):
        offsets_from_json({"t": [1, 2]})
    with pytest.raises(ValueError, match="is not a stream offset of this source"):
        reader(logs, subscribe="t").latestOffset({"offset": 3}, None)


def test_rate_limit_is_kafkas():
    a, b, c = ("t", 0), ("t", 1), ("u", 0)
    # lags 90, 10, 1 (c is new: from its earliest, 4) of 101: shares 17.8, 1.98 (rounded
    # down) and 0.198 (rounded up: no partition starves)
    assert rate_limit(20, {a: 0, b: 5}, {a: 90, b: 15, c: 5}, {c: 4}) == \
        {a: 17, b: 6, c: 5}
    # nothing to read: the latest offsets as they are; never past the latest
    assert rate_limit(5, {a: 3}, {a: 3}, {}) == {a: 3}
    assert rate_limit(1000, {a: 0, b: 0}, {a: 4, b: 2}, {}) == {a: 4, b: 2}


def test_latest_offset_limits(tmp_path):
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxRows,
        ReadMinRows,
    )

    logs = str(tmp_path / "logs")
    lg = open_log(logs, "lim")
    put(lg, 0, 10)
    r = reader(logs, subscribe="lim", minOffsetsPerTrigger="8", maxTriggerDelay="1500ms")
    assert isinstance(r.getDefaultReadLimit(), ReadMinRows)
    start = {"lim": {"0": 0}}
    assert r.latestOffset(start, r.getDefaultReadLimit()) == {"lim": {"0": 10}}  # first: due
    start = {"lim": {"0": 10}}
    put(lg, 10, 5)
    assert r.latestOffset(start, r.getDefaultReadLimit()) is start  # 5 < 8: wait
    assert r.latestOffset(start, ReadAllAvailable()) == {"lim": {"0": 15}}
    put(lg, 15, 3)
    assert r.latestOffset(start, r.getDefaultReadLimit()) == {"lim": {"0": 18}}  # 8 new
    start = {"lim": {"0": 18}}
    put(lg, 18, 2)
    assert r.latestOffset(start, r.getDefaultReadLimit()) is start
    time.sleep(1.6)  # maxTriggerDelay passed: whatever there is
    assert r.latestOffset(start, r.getDefaultReadLimit()) == {"lim": {"0": 20}}
    # max and min together: the max limit arrives, the min applies too
    r = reader(logs, subscribe="lim", minOffsetsPerTrigger="3", maxOffsetsPerTrigger="4")
    assert r.getDefaultReadLimit() == ReadMaxRows(4)
    assert r.latestOffset({"lim": {"0": 0}}, r.getDefaultReadLimit()) == {"lim": {"0": 4}}
    assert r.latestOffset({"lim": {"0": 18}}, r.getDefaultReadLimit()) == {"lim": {"0": 18}}
    # AvailableNow: nothing appended after prepareForTriggerAvailableNow, min not waited for
    r = reader(logs, subscribe="lim", minOffsetsPerTrigger="100", maxOffsetsPerTrigger="150")
    r.prepareForTriggerAvailableNow()
    put(lg, 20, 5)
    lg.close()
    assert r.latestOffset({"lim": {"0": 0}}, r.getDefaultReadLimit()) == {"lim": {"0": 20}}
    assert r.latestOffset({"lim": {"0": 20}}, ReadAllAvailable()) == {"lim": {"0": 20}}


def test_micro_batch_reads_to_its_end_while_appended(tmp_path):
    """A batch planned while the partition is appended to (and rolled) reads exactly its
    offsets, whenever it is read."""
    logs = str(tmp_path / "logs")
    lg = open_log(logs, "grow")
    put(lg, 0, 30)
    r = reader(logs, subscribe="grow")
    slices = r.partitions({"grow": {"0": 4}}, {"grow": {"0": 27}})
    put(lg, 30, 60)  # after planning: more records, new segments
    lg.close()
    got = [o for sl in slices for b in r.read(sl) for o in b.column("offset").to_pylist()]
    assert got == list(range(4, 27))
    assert r.partitions({"grow": {"0": 9}}, {"grow": {"0": 9}}) == []


def test_micro_batch_data_loss_rules(tmp_path, caplog):
    """getOffsetRangesFromResolvedOffsets' rules: a partition gone, a new partition that
    does not start at 0, offsets that went back -- raised under failOnDataLoss, else
    warned and skipped; a new partition starting at 0 is read from its start."""
    logs = str(tmp_path / "logs")
    for p in range(2):
        lg = open_log(logs, "dl", p)
        put(lg, 0, 10)
        lg.close()
    fast = {"subscribe": "dl", "fetchOffset.retryIntervalMs": "10"}
    strict, lax = reader(logs, **fast), reader(logs, failOnDataLoss="false", **fast)
    cases = [
        ({"dl": {"0": 0, "1": 0, "9": 0}}, {"dl": {"0": 5, "1": 5}}, r"Set\(dl-9\) are gone"),
        ({"dl": {"0": 0}}, {"dl": {"0": 5, "1": 5, "7": 3}},
         r"Cannot find earliest offsets of Set\(dl-7\)"),
        ({"dl": {"0": 8, "1": 0}}, {"dl": {"0": 6, "1": 5}},
         "Partition dl-0's offset was changed from 8 to 6"),
    ]
    for start, end, message in cases:
        with pytest.raises(DataLossError, match=message):
            strict.partitions(start, end)
        with caplog.at_level("WARNING"):
            slices = lax.partitions(start, end)
        assert message.replace("\\", "") in caplog.text
        offsets = sorted((sl.partition, sl.start_offset, sl.end_offset) for sl in slices)
        assert {(p, lo) for p, lo, _hi in offsets} <= {(0, 0), (1, 0)}
    # a new partition is read from its start: dl-1 was not in the start offset
    slices = strict.partitions({"dl": {"0": 2}}, {"dl": {"0": 4, "1": 3}})
    assert sorted((sl.partition, sl.start_offset, sl.end_offset) for sl in slices) == \
        [(0, 2, 4), (1, 0, 3)]
    # ... unless its log start offset is not 0: what came before is lost
    with open(os.path.join(logs, "log-start-offset-checkpoint"), "w") as f:
        f.write("0\n1\ndl 1 4\n")
    with pytest.raises(DataLossError, match="Added partition dl-1 starts from 4 instead of 0"):
        strict.partitions({"dl": {"0": 2}}, {"dl": {"0": 4, "1": 8}})
    slices = lax.partitions({"dl": {"0": 2}}, {"dl": {"0": 4, "1": 8}})
    assert sorted((sl.partition, sl.start_offset, sl.end_offset) for sl in slices) == \
        [(0, 2, 4), (1, 4, 8)]
