"""A KRaft broker's ``__cluster_metadata`` replayed (kafkafs/log/cluster_metadata.py): a
snapshot then the log; ``kafkafs topics --describe`` in kafka-topics' lines, the topic's
ConfigRecords in the mount's ``config``, and ``kafkafs reassign-partitions --generate``
against the examples of Kafka's ``AdminUtils`` (rack-unaware and rack-aware)."""

from __future__ import annotations

import base64
import json
import os

from conftest import fuse_available, kafkafs
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkafs.log.config import BrokerConfig
from kafkafs.log.manager import LogManager
from kafkafs.record import tables

ORDERS_ID = base64.urlsafe_b64decode("Uj5wn_FqTXirEASvVZRY1w==")
PAY_ID = bytes(range(16))


def metadata_value(name, data, version=0):
    m = tables.schema("metadata").message(name)
    return bytes([1, m.api, version]) + m.encode(data, version)


def batch(values, base=0):
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 20)
    for i, v in enumerate(values):
        b.append(i, 1000 + i, None, v, [])
    buf = bytearray(b.build())
    buf[0:8] = base.to_bytes(8, "big")
    return bytes(buf)


def make_kraft_dir(d):
    """A broker's log dir: the topic ``orders`` and its partitions in a snapshot at offset
    3, then in the log a second topic, a leader and ISR change, a topic config and one
    removed; three brokers with racks."""
    m = LogManager(BrokerConfig.from_properties({}).with_log_dirs([d]))
    m.startup()
    m.create_topic("orders", 1)
    m.shutdown()
    meta = os.path.join(d, "__cluster_metadata-0")
    os.makedirs(meta)
    brokers = [metadata_value("RegisterBrokerRecord", {
        "brokerId": b, "incarnationId": bytes(16), "brokerEpoch": 1, "endPoints": [],
        "features": [], "rack": f"r{b % 2}", "fenced": False}, 1) for b in (1, 2, 3)]
    snapshot = brokers + [
        metadata_value("TopicRecord", {"name": "orders", "topicId": ORDERS_ID}),
        *[metadata_value("PartitionRecord", {
            "partitionId": p, "topicId": ORDERS_ID, "replicas": [1, 2], "isr": [1, 2],
            "removingReplicas": [], "addingReplicas": [], "leader": 1, "leaderEpoch": 0,
            "partitionEpoch": 0}) for p in range(2)],
    ]
    with open(os.path.join(meta, f"{3:020d}-{1:010d}.checkpoint"), "wb") as f:
        f.write(batch(snapshot))
    log = [
        metadata_value("TopicRecord", {"name": "old", "topicId": bytes([9] * 16)}),  # < 3
        metadata_value("TopicRecord", {"name": "pay", "topicId": PAY_ID}),
        metadata_value("PartitionRecord", {
            "partitionId": 0, "topicId": PAY_ID, "replicas": [2, 3], "isr": [2, 3],
            "removingReplicas": [], "addingReplicas": [], "leader": 2, "leaderEpoch": 0,
            "partitionEpoch": 0}),
        metadata_value("PartitionChangeRecord", {"partitionId": 1, "topicId": ORDERS_ID,
                                                 "leader": 2, "isr": [2]}),
        metadata_value("ConfigRecord", {"resourceType": 2, "resourceName": "orders",
                                        "name": "retention.ms", "value": "1000"}),
        metadata_value("ConfigRecord", {"resourceType": 2, "resourceName": "orders",
                                        "name": "segment.ms", "value": "5"}),
        metadata_value("ConfigRecord", {"resourceType": 2, "resourceName": "orders",
                                        "name": "segment.ms", "value": None}),
    ]
    with open(os.path.join(meta, f"{0:020d}.log"), "wb") as f:
        f.write(batch(log[:1], 2) + batch(log[1:], 3))


def test_topics_describe_from_the_metadata(tmp_path):
    d = str(tmp_path / "logs")
    make_kraft_dir(d)
    out = kafkafs("topics", "--log-dirs", d, "--describe").stdout.decode().splitlines()
    assert out == [
        ("Topic: orders\tTopicId: Uj5wn_FqTXirEASvVZRY1w\tPartitionCount: 2\t"
        "ReplicationFactor: 2\tConfigs: retention.ms=1000"),
        ("\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2\tElr: \t"
        "LastKnownElr: "),
        ("\tTopic: orders\tPartition: 1\tLeader: 2\tReplicas: 1,2\tIsr: 2\tElr: \t"
        "LastKnownElr: "),
        ("Topic: pay\tTopicId: AAECAwQFBgcICQoLDA0ODw\tPartitionCount: 1\t"
        "ReplicationFactor: 2\tConfigs: "),
        ("\tTopic: pay\tPartition: 0\tLeader: 2\tReplicas: 2,3\tIsr: 2,3\tElr: \t"
        "LastKnownElr: ")]
    r = kafkafs("topics", "--log-dirs", d, "--describe", "--topic", "nope", check=False)
    assert r.returncode == 1 and b"Topic 'nope' does not exist as expected" in r.stderr


def test_reassign_generate(tmp_path):
    d = str(tmp_path / "logs")
    make_kraft_dir(d)
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"topics": [{"topic": "orders"}], "version": 1}))
    r = kafkafs("reassign-partitions", "--log-dirs", d, "--generate", "--broker-list",
                "1,2,3", "--topics-to-move-json-file", str(topics), "--disable-rack-aware",
                "--start-index", "0", "--shift", "0")
    assert r.stdout.decode() == (
        "Current partition replica assignment\n"
        '{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[1,2],'
        '"log_dirs":["any","any"]},{"topic":"orders","partition":1,"replicas":[1,2],'
        '"log_dirs":["any","any"]}]}\n\n'
        "Proposed partition reassignment configuration\n"
        '{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[1,2],'
        '"log_dirs":["any","any"]},{"topic":"orders","partition":1,"replicas":[2,3],'
        '"log_dirs":["any","any"]}]}\n')
    # the brokers' racks (r1, r0, r1) make it rack aware: no partition on one rack only
    r = kafkafs("reassign-partitions", "--log-dirs", d, "--generate", "--broker-list",
                "1,2,3", "--topics-to-move-json-file", str(topics), "--start-index", "0",
                "--shift", "0")
    proposed = json.loads(r.stdout.decode().splitlines()[-1])["partitions"]
    racks = {1: "r1", 2: "r0", 3: "r1"}
    assert all(len({racks[b] for b in p["replicas"]}) == 2 for p in proposed)


def test_adminutils_examples():
    """AdminUtils' own examples: rack-unaware with start 0 and shift 0, and the Javadoc's
    rack-aware one (0:r1, 1:r3, 2:r3, 3:r2, 4:r2, 5:r1; 6 partitions, 3 replicas)."""
    from kafkafs.cli.reassign import (
        assign_rack_aware,
        assign_rack_unaware,
        rack_alternated,
    )

    assert assign_rack_unaware([1, 2, 3], 3, 2, 0, 0) == {0: [1, 2], 1: [2, 3], 2: [3, 1]}
    # partition i on broker i mod n, its j-th replica on (i + j) mod n
    n = 5
    plan = assign_rack_unaware(list(range(n)), 12, 3, 0, 0)
    assert all(plan[i][0] == i % n for i in range(n))
    assert all(plan[i][j] == (i + j) % n for i in range(n) for j in range(3))
    racks = {0: "r1", 1: "r3", 2: "r3", 3: "r2", 4: "r2", 5: "r1"}
    assert rack_alternated(racks) == [0, 3, 1, 5, 4, 2]
    assert list(assign_rack_aware(racks, 6, 3, 0, 0).values()) == [
        [0, 3, 1], [3, 1, 5], [1, 5, 4], [5, 4, 2], [4, 2, 0], [2, 0, 3]]


def test_the_mounts_config_shows_the_config_records(mount_factory, tmp_path):
    if not fuse_available():
        return
    d = str(tmp_path / "logs")
    make_kraft_dir(d)
    m = mount_factory(log_dirs=[d], extra_args=["--read-only"])
    with open(m.path("orders", "config")) as f:
        text = f.read()
    assert "# retention.ms=1000" in text and "segment.ms=5" not in text
