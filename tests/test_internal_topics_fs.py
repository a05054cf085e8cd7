"""Kafka's internal topics in the mount (docs/tree.md "Internal topics"): ``records.jsonl``
of ``__consumer_offsets``, ``__transaction_state`` and ``__cluster_metadata`` carries each
record's key and value decoded, the same JSON ``kafkafs dump``'s decoders print
(``kafka-dump-log``'s), read with a real ``cat`` through a real mount."""

from __future__ import annotations

import json
import struct
import subprocess

from conftest import kafkafs, needs_fuse

from kafkafs.log.config import BrokerConfig
from kafkafs.log.manager import LogManager
from kafkafs.record import tables

pytestmark = needs_fuse


def _key(family, record_type, data):
    m = tables.schema(family).by_api(record_type, "Key")
    return struct.pack(">h", record_type) + m.encode(data, 0)


def _value(family, record_type, version, data):
    m = tables.schema(family).by_api(record_type, "Value")
    return struct.pack(">h", version) + m.encode(data, version)


def _metadata(name, data, version=0):
    m = tables.schema("metadata").message(name)
    return bytes([1, m.api, version]) + m.encode(data, version)


def _write(log_dir: str, topics: dict) -> None:
    manager = LogManager(BrokerConfig.from_properties({}).with_log_dirs([log_dir]))
    manager.startup()
    try:
        for topic, records in topics.items():
            manager.create_topic(topic, 1)
            manager.get_log(topic, 0).append(records)
    finally:
        manager.shutdown()


def test_records_jsonl_of_internal_topics_is_decoded(mount_factory, tmp_path):
    log_dir = str(tmp_path / "logs")
    commit_key = _key("group", 1, {"group": "g", "topic": "orders", "partition": 2})
    _write(log_dir, {
        "__consumer_offsets": [
            (1000, commit_key, _value("group", 1, 3, {"offset": 42, "leaderEpoch": 7,
                                                      "metadata": "m", "commitTimestamp": 1000}),
             ()),
            (1001, _key("group", 3, {"groupId": "cg"}), None, ()),  # a tombstone
            (1002, struct.pack(">h", 99), b"\x00\x00", ()),  # no table knows type 99
        ],
        "__transaction_state": [
            (2000, _key("txn", 0, {"transactionalId": "tx"}),
             _value("txn", 0, 1, {"producerId": 5, "producerEpoch": 1,
                                  "transactionTimeoutMs": 60000, "transactionStatus": 1,
                                  "transactionPartitions": [{"topic": "orders",
                                                             "partitionIds": [0]}],
                                  "transactionLastUpdateTimestampMs": 2000,
                                  "transactionStartTimestampMs": 1999}), ()),
        ],
        "__cluster_metadata": [
            (3000, None, _metadata("TopicRecord", {"name": "orders", "topicId": b"\x01" * 16}),
             ()),
        ],
        "plain": [(4000, b"k", b"v", ())],
    })
    m = mount_factory(log_dirs=[log_dir], extra_args=["--read-only"])

    def lines(topic):
        out = subprocess.run(["cat", m.path(topic, "0", "records.jsonl")], check=True,
                             capture_output=True).stdout
        return [json.loads(line) for line in out.splitlines()]

    offsets = lines("__consumer_offsets")
    assert offsets[0]["key"] == {"type": "1", "data": {"group": "g", "topic": "orders",
                                                       "partition": 2}}
    assert offsets[0]["value"] == {"version": "3", "data": {
        "offset": 42, "leaderEpoch": 7, "metadata": "m", "commitTimestamp": 1000}}
    assert offsets[1]["key"] == {"type": "3", "data": {"groupId": "cg"}}
    assert offsets[1]["value"] is None
    assert offsets[2]["key"] == "\x00c" and offsets[2]["value"] == "\x00\x00"
    assert offsets[2]["decode_error"] == "Unknown record type 99"
    assert [o["offset"] for o in offsets] == [0, 1, 2]
    txn = lines("__transaction_state")[0]
    assert txn["key"]["data"] == {"transactionalId": "tx"}
    assert txn["value"]["data"]["transactionPartitions"] == [{"topic": "orders",
                                                              "partitionIds": [0]}]
    meta = lines("__cluster_metadata")[0]
    assert meta["key"] is None and meta["value"] == {
        "type": "TOPIC_RECORD", "version": 0,
        "data": {"name": "orders", "topicId": "AQEBAQEBAQEBAQEBAQEBAQ"}}
    assert lines("plain")[0]["key"] == "k"  # a data topic is as it always was

    # the same JSON as kafkafs dump --offsets-decoder prints
    dumped = kafkafs("dump", "--offsets-decoder", "--json", "--files",
                     f"{log_dir}/__consumer_offsets-0/{0:020d}.log").stdout
    records = [json.loads(line) for line in dumped.splitlines()
               if json.loads(line)["type"] == "record"]
    assert records[0]["key"] == offsets[0]["key"]
    assert records[0]["payload"] == offsets[0]["value"]
