"""kafkalog's options as Spark's built-in Kafka source takes them (names, defaults,
precedence, error messages: KafkaSourceProvider, JsonUtils, KafkaExceptions), and how the
planner resolves them against log dirs: partition sets, timestamps, data loss, splitting,
and the same answers for a log dir reached through pyarrow.fs (a file:// URI)."""

from __future__ import annotations

import itertools
import os
import pickle

import pytest

from kafkafs.log.config import LogConfig
from kafkafs.log.loader import load_log
from kafkafs.spark.options import OffsetLimit, parse_options
from kafkafs.spark.plan import (
    DataLossError,
    close_views,
    open_partitions,
    plan_read,
    plan_slices,
    resolve_offsets,
)

T0 = 1_700_000_000_000


def opts(**kw):
    base = {"path": "/logs"}
    base.update({k: v for k, v in kw.items() if v is not None})
    return parse_options(base)


def refused(match, **kw):
    with pytest.raises(ValueError) as info:
        opts(**kw)
    assert match in str(info.value), str(info.value)


# -- parsing ------------------------------------------------------------------------------------

def test_exactly_one_subscription():
    refused("One of the following options must be specified for Kafka source: subscribe, "
            "subscribepattern, assign. See the docs for more details.")
    refused("Only one of the following options can be specified", subscribe="a",
            subscribePattern="b")
    refused("No topics to subscribe to as specified value for option 'subscribe' is ' , '",
            subscribe=" , ")
    refused("Pattern to subscribe is empty as specified value for option 'subscribePattern' "
            "is ' '", subscribePattern=" ")
    refused("is not a valid regular expression", subscribePattern="a(")
    refused("No topicpartitions to assign as specified value for option 'assign' is 't'",
            assign="t")
    refused('Expected e.g. {"topicA":[0,1],"topicB":[0,1]}, got {"t": 0}', assign='{"t": 0}')
    o = opts(assign='{"t": [1, 0], "u": [2]}')
    assert (o.strategy, o.assigned) == ("assign", (("t", 1), ("t", 0), ("u", 2)))
    o = parse_options({"PATH": "/a, /b", "SubScribe": " x, y ,"})  # keys in any case
    assert (o.paths, o.topics) == (("/a", "/b"), ("x", "y"))
    assert parse_options({"paths": '["/a", "/b,/c"]', "subscribe": "t"}).paths == \
        ("/a", "/b", "/c")
    with pytest.raises(ValueError, match="needs the log dirs"):
        parse_options({"subscribe": "t"})


def test_pattern_matches_whole_names_and_no_internal_topic():
    o = opts(subscribePattern="ord.*")
    assert o.topic_selected("orders") and not o.topic_selected("my-orders")
    assert not opts(subscribePattern=".*").topic_selected("__consumer_offsets")
    assert opts(subscribe="__consumer_offsets").topic_selected("__consumer_offsets")


def test_defaults():
    o = opts(subscribe="t")
    assert (o.starting, o.ending) == (OffsetLimit("earliest"), OffsetLimit("latest"))
    assert (o.fail_on_data_loss, o.include_headers, o.isolation_level) == \
        (True, False, "read_committed")
    assert (o.min_partitions, o.max_records_per_partition) == (None, None)
    s = parse_options({"path": "/l", "subscribe": "t"}, streaming=True)
    assert (s.starting, s.ending) == (OffsetLimit("latest"), None)


def test_precedence_timestamp_over_by_timestamp_over_offsets():
    both = {"startingOffsetsByTimestamp": '{"t": {"0": 5}}', "startingOffsets": "earliest"}
    assert opts(subscribe="t", startingTimestamp="7", **both).starting == \
        OffsetLimit("timestamp", timestamp=7)
    assert opts(subscribe="t", **both).starting == OffsetLimit("timestamps", {("t", 0): 5})
    assert opts(subscribe="t", endingTimestamp="9", endingOffsets="latest",
                endingOffsetsByTimestamp='{"t": {"0": 8}}').ending == \
        OffsetLimit("timestamp", timestamp=9)
    o = opts(subscribe="t", startingTimestamp="1", startingOffsetsByTimestampStrategy="LATEST")
    assert o.starting.strategy == "latest"
    refused("No value found for 'NEWEST'", subscribe="t",
            startingOffsetsByTimestampStrategy="newest")


def test_batch_and_stream_limits():
    refused("starting offset can't be latest for batch queries on Kafka", subscribe="t",
            startingOffsets="latest")
    refused("startingOffsets for t-1 can't be latest for batch queries on Kafka",
            subscribe="t", startingOffsets='{"t": {"0": 3, "1": -1}}')
    refused("ending offset can't be earliest for batch queries on Kafka", subscribe="t",
            endingOffsets="earliest")
    refused("ending offset for t-0 can't be earliest for batch queries on Kafka",
            subscribe="t", endingOffsets='{"t": {"0": -2}}')
    with pytest.raises(ValueError, match="ending offset not valid in streaming queries"):
        parse_options({"path": "/l", "subscribe": "t", "endingOffsets": "latest"},
                      streaming=True)
    with pytest.raises(ValueError, match="ending timestamp not valid in streaming queries"):
        parse_options({"path": "/l", "subscribe": "t", "endingOffsetsByTimestamp": "{}"},
                      streaming=True)


def test_json_and_numbers():
    refused('Expected e.g. {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}, got {"t": [1]}',
            subscribe="t", startingOffsets='{"t": [1]}')
    refused('Expected e.g. {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}, got {"t": {"x": 1}}',
            subscribe="t", startingOffsets='{"t": {"x": 1}}')
    refused('Expected e.g. {"topicA": {"0": 123456789, "1": 123456789},\n"topicB": {"0": '
            '123456789, "1": 123456789}}, got nope', subscribe="t",
            endingOffsetsByTimestamp="nope")
    refused("Expected a single long value, got 12.5", subscribe="t", startingTimestamp="12.5")
    refused('For input string: "many"', subscribe="t", minPartitions="many")
    refused("minPartitions must be positive", subscribe="t", minPartitions="0")
    refused("maxRecordsPerPartition must be positive", subscribe="t",
            maxRecordsPerPartition="-3")
    refused('For input string: "yes"', subscribe="t", failOnDataLoss="yes")
    refused('For input string: "1"', subscribe="t", includeHeaders="1")
    o = opts(subscribe="t", failOnDataLoss="FALSE", includeHeaders="True", minPartitions="+4",
             maxRecordsPerPartition="1000")
    assert (o.fail_on_data_loss, o.include_headers, o.min_partitions,
            o.max_records_per_partition) == (False, True, 4, 1000)


def test_offset_limit_validity():
    refused("[MISMATCHED_TOPIC_PARTITIONS_BETWEEN_START_OFFSET_AND_END_OFFSET] The specified "
            "start offset and end offset should have the same topic-partitions. "
            "Topic-partitions for start offset: Set(t-0, t-1), topic-partitions for end "
            "offset: Set(t-0).", subscribe="t", startingOffsets='{"t": {"0": 1, "1": 1}}',
            endingOffsets='{"t": {"0": 5}}')
    refused("[UNRESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET] The specified start offset 9 "
            "is greater than the end offset 5 for topic t partition 0.", subscribe="t",
            startingOffsets='{"t": {"0": 9}}', endingOffsets='{"t": {"0": 5}}')
    refused("The specified start timestamp 9 is greater than the end timestamp 5",
            subscribe="t", startingOffsetsByTimestamp='{"t": {"0": 9}}',
            endingOffsetsByTimestamp='{"t": {"0": 5}}')
    # -2 and -1 are not compared
    opts(subscribe="t", startingOffsets='{"t": {"0": -2}}', endingOffsets='{"t": {"0": -1}}')


def test_kafka_options():
    assert opts(subscribe="t", **{"kafka.isolation.level": "READ_UNCOMMITTED"}) \
        .isolation_level == "read_uncommitted"
    refused("Invalid value read_all for configuration isolation.level: String must be one "
            "of: read_committed, read_uncommitted", subscribe="t",
            **{"kafka.isolation.level": "read_all"})
    refused("Kafka option 'auto.offset.reset' is not supported.", subscribe="t",
            **{"kafka.auto.offset.reset": "earliest"})
    refused("Kafka option 'key.deserializer' is not supported as keys are deserialized as "
            "byte arrays with ByteArrayDeserializer.", subscribe="t",
            **{"kafka.key.deserializer": "x"})
    refused("Kafka option 'enable.auto.commit' is not supported", subscribe="t",
            **{"kafka.enable.auto.commit": "true"})
    refused("The value of minOffsetPerTrigger(10) is higher than the "
            "maxOffsetsPerTrigger(5).", subscribe="t", minOffsetsPerTrigger="10",
            maxOffsetsPerTrigger="5")
    opts(subscribe="t", **{"kafka.bootstrap.servers": "ignored:9092"})


# -- resolving against log dirs ---------------------------------------------------------------

def build(root, topic="t", partitions=2, batches=30, per_batch=10, segment_bytes=2048):
    cfg = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=128)
    for p in range(partitions):
        path = os.path.join(root, f"{topic}-{p}")
        os.makedirs(path, exist_ok=True)
        lg = load_log(path, topic, p, cfg)
        for b in range(batches):
            lg.append([(T0 + (b * per_batch + i) * 10, b"k", b"v" * 20, ())
                       for i in range(per_batch)])
        lg.flush()
        lg.close()
    return root


@pytest.fixture
def logs(tmp_path):
    return build(str(tmp_path / "logs"))


def resolve(logs, **kw):
    o = parse_options({"path": logs, "subscribe": "t", **kw})
    views = open_partitions(o)
    try:
        return resolve_offsets(views, o.starting, o.ending, o)
    finally:
        close_views(views)


def test_partition_sets_must_match(logs):
    with pytest.raises(ValueError) as info:
        resolve(logs, startingOffsets='{"t": {"0": 1}}')
    assert str(info.value) == (
        "[KAFKA_START_OFFSET_DOES_NOT_MATCH_ASSIGNED] Partitions specified for Kafka start "
        "offsets don't match what are assigned. Maybe topic partitions are created or deleted "
        "while the query is running. Use -1 for latest, -2 for earliest. Specified: Set(t-0) "
        "Assigned: Set(t-0, t-1)")
    with pytest.raises(ValueError, match=r"Specified: Set\(t-0, t-1, t-2\)"):
        resolve(logs, endingOffsets='{"t": {"0": 1, "1": 2, "2": 3}}')
    with pytest.raises(ValueError, match="KAFKA_TIMESTAMP_OFFSET_DOES_NOT_MATCH_ASSIGNED.*"
                                         "timestamp based end offsets"):
        resolve(logs, endingOffsetsByTimestamp=f'{{"t": {{"1": {T0}}}}}')
    assert resolve(logs, startingOffsets='{"t": {"0": 7, "1": -2}}',
                   endingOffsets='{"t": {"0": 9, "1": -1}}') == {("t", 0): (7, 9),
                                                               ("t", 1): (0, 300)}


def test_assign_and_subscribe(logs, tmp_path):
    o = parse_options({"path": logs, "assign": '{"t": [1]}'})
    assert list(open_partitions(o)) == [("t", 1)]
    with pytest.raises(ValueError, match="Topic-partition t-7 of option 'assign' is in none"):
        open_partitions(parse_options({"path": logs, "assign": '{"t": [1, 7]}'}))
    assert open_partitions(parse_options({"path": logs, "subscribe": "nope"})) == {}
    with pytest.raises(FileNotFoundError):
        open_partitions(parse_options({"path": str(tmp_path / "absent"), "subscribe": "t"}))


def test_timestamps(logs):
    # record o has timestamp T0 + 10 o: the first offset with timestamp >= T0 + 25 is 3
    assert resolve(logs, startingTimestamp=str(T0 + 25), endingTimestamp=str(T0 + 1000)) == \
        {("t", 0): (3, 100), ("t", 1): (3, 100)}
    late = str(T0 * 2)
    with pytest.raises(ValueError, match=f"No offset matched from request of topic-partition "
                                         f"t-0 and timestamp {late}."):
        resolve(logs, startingTimestamp=late)
    assert resolve(logs, startingTimestamp=late, startingOffsetsByTimestampStrategy="latest") \
        == {("t", 0): (300, 300), ("t", 1): (300, 300)}
    # no record that late for an end: latest
    assert resolve(logs, endingTimestamp=late)[("t", 0)] == (0, 300)
    assert resolve(logs, startingOffsetsByTimestamp=f'{{"t": {{"0": {T0 + 1991}, "1": -2}}}}') \
        == {("t", 0): (200, 300), ("t", 1): (0, 300)}


def test_data_loss_and_impossible_ranges(logs):
    with open(os.path.join(logs, "log-start-offset-checkpoint"), "w") as f:
        f.write("0\n2\nt 0 50\nt 1 0\n")
    start = '{"t": {"0": 10, "1": 10}}'
    with pytest.raises(DataLossError, match=r"KAFKA_DATA_LOSS.*offset \[10, 50\) for topic "
                                            "partition t-0"):
        resolve(logs, startingOffsets=start)
    assert resolve(logs, startingOffsets=start, failOnDataLoss="false")[("t", 0)] == (50, 300)
    assert resolve(logs)[("t", 0)] == (50, 300)  # earliest is the log start offset
    end = '{"t": {"0": 400, "1": 300}}'
    with pytest.raises(DataLossError, match=r"offset \[300, 400\).*log end offset of .* is 300"):
        resolve(logs, endingOffsets=end)
    assert resolve(logs, endingOffsets=end, failOnDataLoss="false")[("t", 0)] == (50, 300)
    with pytest.raises(ValueError, match="RESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET.*start "
                                         "offset 320 .* end offset 300 for topic t partition"):
        resolve(logs, startingOffsets='{"t": {"0": 320, "1": 0}}', failOnDataLoss="false")


def test_a_partition_in_several_log_dirs(tmp_path):
    a = build(str(tmp_path / "a"), partitions=1, batches=10)
    b = build(str(tmp_path / "b"), partitions=1, batches=20)
    o = parse_options({"path": f"{a},{b}", "subscribe": "t"})
    views = open_partitions(o)
    assert views[("t", 0)].path.startswith(b) and views[("t", 0)].log_end_offset == 200
    close_views(views)


def test_slices(logs):
    o = parse_options({"path": logs, "subscribe": "t"})
    slices = plan_read(o)
    segs = sorted(n for n in os.listdir(os.path.join(logs, "t-0")) if n.endswith(".log"))
    assert len(slices) == 2 * len(segs) > 4
    for sl in slices:
        assert pickle.loads(pickle.dumps(sl)) == sl
        assert sl.start_position < sl.end_hint <= sl.end_position
    # every offset once, in order, per partition
    for p in (0, 1):
        mine = [sl for sl in slices if sl.partition == p]
        assert mine[0].start_offset == 0 and mine[-1].end_offset == 300
        assert all(a.end_offset == b.start_offset for a, b in itertools.pairwise(mine))
    small = plan_read(parse_options({"path": logs, "subscribe": "t",
                                     "maxRecordsPerPartition": "7"}))
    assert all(sl.end_offset - sl.start_offset <= 7 for sl in small)
    assert len(small) >= 600 // 7
    many = plan_read(parse_options({"path": logs, "subscribe": "t",
                                    "minPartitions": str(len(slices) * 3)}))
    assert len(slices) * 2 <= len(many) <= len(slices) * 4
    split = plan_read(parse_options({"path": logs, "subscribe": "t",
                                     "maxBytesPerPartition": "512"}))
    assert len(split) > len(slices) * 2
    for cut in (small, many, split):
        for p in (0, 1):
            mine = [sl for sl in cut if sl.partition == p]
            assert mine[0].start_offset == 0 and mine[-1].end_offset == 300
            assert all(a.end_offset == b.start_offset for a, b in itertools.pairwise(mine))


def test_a_file_uri_plans_like_the_local_path(logs):
    """The pyarrow.fs view of a log dir answers as the log layer does."""
    for extra in ({}, {"startingTimestamp": str(T0 + 1234)},
                  {"startingOffsets": '{"t": {"0": 33, "1": 150}}',
                   "endingOffsets": '{"t": {"0": 61, "1": 299}}'},
                  {"maxBytesPerPartition": "700"}):
        local = plan_read(parse_options({"path": logs, "subscribe": "t", **extra}))
        remote = plan_read(parse_options({"path": "file://" + logs, "subscribe": "t",
                                          **extra}))
        strip = [{k: v for k, v in vars(sl).items() if k not in ("root", "identity")}
                 for sl in local]
        assert strip == [{k: v for k, v in vars(sl).items()
                          if k not in ("root", "identity")} for sl in remote], extra
        assert all(sl.root == "file://" + logs and sl.identity is None for sl in remote)


def test_plan_slices_with_aborted_transactions_resolved(tmp_path):
    import test_txn_without_index as txn

    logs = str(tmp_path)
    model = txn.build_dir(logs, "tx", "bare")
    for uri in (logs, "file://" + logs):
        o = parse_options({"path": uri, "subscribe": "tx"})
        views = open_partitions(o)
        assert views[("tx", 0)].last_stable_offset == model.last_stable_offset
        ranges = resolve_offsets(views, o.starting, o.ending, o)
        slices = plan_slices(views, ranges, o, resolve_aborted=True)
        close_views(views)
        found = {a for sl in slices for a in sl.aborted}
        want = {(t.producer_id, t.last_offset) for t in model.aborted
                if t.first_offset < model.last_stable_offset}
        assert {(pid, last) for pid, _first, last in found} == want
        assert all(sl.aborted is None for sl in plan_read(o))  # looked up by the reader
