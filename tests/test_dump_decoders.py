"""``kafkafs dump``'s decoders (``--offsets-decoder``, ``--transaction-log-decoder``,
``--cluster-metadata-decoder``, ``--share-group-state-decoder``) and the KRaft control
records, against kafka-dump-log's output published by Kafka's developers.

Each published sample is rebuilt as the segment it was printed from: the records its lines
describe, written by kafka-python's batch builder (not kafkafs's encoder) with the broker's
stamps (base offset and partition leader epoch, outside the CRC; the control bit, with the
CRC recomputed by kafka-python), their values encoded from the decoded JSON the lines show.
When the CRC equals the one the published batch line prints, the bytes are the broker's;
the dump of them must then print the published lines exactly. Samples (see each test):

* F2, ``__transaction_state``: PR apache/kafka#22615 (KAFKA-20712), a comment of
  2026-06-18 -- printed by a trunk that names the transaction status; Kafka 4.0-4.2 print
  its number, ``"transactionStatus":0``, every other byte the same;
* F3, ``__cluster_metadata``, a leader's start-of-epoch control batch: PR apache/kafka#19729
  (KAFKA-19069), "Before" (Kafka 4.0, which printed ``controlType: LEADER_CHANGE(2)``;
  4.1 prints ``LeaderChange: {json}``, the 4.1 line asserted here; the leader change's
  content is what the CRC admits: leader 1, voter 1, granted by 1);
* F4, a KRaft snapshot's header batch: PR apache/kafka#12084 (KAFKA-13845);
* F5, a metadata record: PR apache/kafka#19205 (KAFKA-18979), a comment of 2025-03-13
  (a record line only: no CRC to check);
* F6, a transaction marker in ``__consumer_offsets``: strimzi/strimzi.github.io#362.
"""

from __future__ import annotations

import base64
import json
import os
import struct
import subprocess
import sys

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.util import calc_crc32c

from kafkafs.record import tables

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build(records, *, base=0, ple=0, control=False) -> bytes:
    """One batch of ``records`` [(timestamp ms, key, value)] by kafka-python's builder,
    stamped as a broker stamps it (``base`` offset, partition leader epoch ``ple``; the
    control bit with the CRC recomputed)."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 20)
    for i, (ts, key, value) in enumerate(records):
        b.append(i, ts, key, value, [])
    buf = bytearray(b.build())
    struct.pack_into(">q", buf, 0, base)
    struct.pack_into(">i", buf, 12, ple)
    if control:
        struct.pack_into(">h", buf, 21, struct.unpack_from(">h", buf, 21)[0] | 0x20)
        struct.pack_into(">I", buf, 17, calc_crc32c(bytes(buf[21:])))
    return bytes(buf)


def crc(batch: bytes) -> int:
    return struct.unpack_from(">I", batch, 17)[0]


def dump(path, *args) -> list[str]:
    r = subprocess.run([sys.executable, "-m", "kafkafs", "dump", "--files", str(path), *args],
                       cwd=ROOT, capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def raft(name, data):
    return tables.schema("raft").message(name).encode(data, 0)


def control_key(type_id):
    return struct.pack(">hh", 0, type_id)


def test_transaction_log_published_sample(tmp_path):
    """F2: a transactional id's first record (state Empty, no partitions)."""
    txn = tables.schema("txn")
    key = struct.pack(">h", 0) + txn.message("TransactionLogKey").encode(
        {"transactionalId": "kafka-txn-0"}, 0)
    value = struct.pack(">h", 1) + txn.message("TransactionLogValue").encode({
        "producerId": 0, "previousProducerId": 0, "producerEpoch": 0,
        "transactionTimeoutMs": 60000, "transactionStatus": 0, "transactionPartitions": None,
        "transactionLastUpdateTimestampMs": 1781778768194, "transactionStartTimestampMs": -1},
        1)
    batch = build([(1781778768196, key, value)])
    assert (len(batch), crc(batch)) == (129, 326836132)  # the broker's bytes
    path = tmp_path / "__transaction_state-0" / f"{0:020d}.log"
    path.parent.mkdir()
    path.write_bytes(batch)
    assert dump(path, "--transaction-log-decoder")[2:] == [
        ("baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 "
        "producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false "
        "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1781778768196 size: 129 "
        "magic: 2 compresscodec: none crc: 326836132 isvalid: true"),
        ("| offset: 0 CreateTime: 1781778768196 keySize: 15 valueSize: 45 sequence: -1 "
        'headerKeys: [] key: {"type":"0","data":{"transactionalId":"kafka-txn-0"}} payload: '
        '{"version":"1","data":{"producerId":0,"previousProducerId":0,"producerEpoch":0,'
        '"transactionTimeoutMs":60000,"transactionStatus":0,"transactionPartitions":null,'
        '"transactionLastUpdateTimestampMs":1781778768194,"transactionStartTimestampMs":-1}}')]
    # --json: the same record, key and payload as JSON values
    record = json.loads(dump(path, "--transaction-log-decoder", "--json")[-1])
    assert record["key"] == {"type": "0", "data": {"transactionalId": "kafka-txn-0"}}
    assert record["payload"]["data"]["transactionTimeoutMs"] == 60000


def test_metadata_log_control_batch_published_sample(tmp_path):
    """F3: a new leader's leader change, kraft.version and voters, in one control batch;
    every decoder shows control records (data records need --cluster-metadata-decoder)."""
    ts = 1747299887693
    leader_change = raft("LeaderChangeMessage", {"version": 0, "leaderId": 1,
                                                 "voters": [{"voterId": 1}],
                                                 "grantingVoters": [{"voterId": 1}]})
    voters = raft("VotersRecord", {"version": 0, "voters": [{
        "voterId": 1, "voterDirectoryId": base64.urlsafe_b64decode("tpx8pd1IQDqJwMfGzXj6GA=="),
        "endpoints": [{"name": "CONTROLLER", "host": "localhost", "port": 9093}],
        "kRaftVersionFeature": {"minSupportedVersion": 0, "maxSupportedVersion": 1}}]})
    batch = build([(ts, control_key(2), leader_change),
                   (ts, control_key(5), raft("KRaftVersionRecord",
                                             {"version": 0, "kRaftVersion": 1})),
                   (ts, control_key(6), voters)], ple=1, control=True)
    assert (len(batch), crc(batch)) == (174, 3714449884)
    path = tmp_path / "__cluster_metadata-0" / f"{0:020d}.log"
    path.parent.mkdir()
    path.write_bytes(batch)
    expected = [
        ("baseOffset: 0 lastOffset: 2 count: 3 baseSequence: -1 lastSequence: -1 producerId: -1 "
        "producerEpoch: -1 partitionLeaderEpoch: 1 isTransactional: false isControl: true "
        "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1747299887693 size: 174 "
        "magic: 2 compresscodec: none crc: 3714449884 isvalid: true"),
        ("| offset: 0 CreateTime: 1747299887693 keySize: 4 valueSize: 19 sequence: -1 "
        'headerKeys: [] LeaderChange: {"version":0,"leaderId":1,"voters":[{"voterId":1}],'
        '"grantingVoters":[{"voterId":1}]}'),
        ("| offset: 1 CreateTime: 1747299887693 keySize: 4 valueSize: 5 sequence: -1 "
        'headerKeys: [] KRaftVersion {"version":0,"kRaftVersion":1}'),
        ("| offset: 2 CreateTime: 1747299887693 keySize: 4 valueSize: 55 sequence: -1 "
        'headerKeys: [] KRaftVoters {"version":0,"voters":[{"voterId":1,"voterDirectoryId":'
        '"tpx8pd1IQDqJwMfGzXj6GA","endpoints":[{"name":"CONTROLLER","host":"localhost",'
        '"port":9093}],"kRaftVersionFeature":{"minSupportedVersion":0,"maxSupportedVersion":1}}]}')]
    assert dump(path, "--cluster-metadata-decoder")[2:] == expected
    assert dump(path, "--deep-iteration")[2:] == expected


def test_kraft_snapshot_header_published_sample(tmp_path):
    """F4: the header batch a snapshot file starts with."""
    header = raft("SnapshotHeaderRecord", {"version": 0, "lastContainedLogTimestamp": 10000})
    batch = build([(1653548892941, control_key(3), header)], control=True)
    assert (len(batch), crc(batch)) == (83, 3406426388)
    path = tmp_path / "__cluster_metadata-0" / f"{0:020d}-{0:010d}.checkpoint"
    path.parent.mkdir()
    path.write_bytes(batch)
    assert dump(path, "--cluster-metadata-decoder")[1:] == [
        "Snapshot end offset: 0, epoch: 0",
        ("baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 "
        "producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: true "
        "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1653548892941 size: 83 "
        "magic: 2 compresscodec: none crc: 3406426388 isvalid: true"),
        ("| offset: 0 CreateTime: 1653548892941 keySize: 4 valueSize: 11 sequence: -1 "
        'headerKeys: [] SnapshotHeader {"version":0,"lastContainedLogTimestamp":10000}')]


def test_metadata_record_published_sample(tmp_path):
    """F5: a FeatureLevelRecord at offset 540 (a record line; no batch line published)."""
    m = tables.schema("metadata").message("FeatureLevelRecord")
    value = bytes([1, m.api, 0]) + m.encode({"name": "kraft.version", "featureLevel": 1}, 0)
    path = tmp_path / "__cluster_metadata-0" / f"{540:020d}.log"
    path.parent.mkdir()
    path.write_bytes(build([(1741886527606, None, value)], base=540, ple=1))
    assert dump(path, "--cluster-metadata-decoder")[3] == (
        "| offset: 540 CreateTime: 1741886527606 keySize: -1 valueSize: 20 sequence: -1 "
        'headerKeys: [] payload: {"type":"FEATURE_LEVEL_RECORD","version":0,"data":{"name":'
        '"kraft.version","featureLevel":1}}')
    # without the decoder the value is bytes, as Kafka's StringDecoder shows them
    assert "FEATURE_LEVEL_RECORD" not in dump(path, "--print-data-log")[3]


def test_transaction_marker_published_sample(tmp_path):
    """F6: a COMMIT marker in __consumer_offsets, under the offsets decoder."""
    marker = struct.pack(">hi", 0, 0)  # version 0, coordinator epoch 0
    path = tmp_path / "__consumer_offsets-0" / f"{2:020d}.log"
    path.parent.mkdir()
    path.write_bytes(build([(1665506597998, control_key(1), marker)], base=2, control=True))
    assert dump(path, "--offsets-decoder")[3] == (
        "| offset: 2 CreateTime: 1665506597998 keySize: 4 valueSize: 6 sequence: -1 "
        "headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 0")


def _group_key(record_type, data):
    m = tables.schema("group").by_api(record_type, "Key")
    return struct.pack(">h", record_type) + m.encode(data, 0)


def _group_value(record_type, version, data):
    m = tables.schema("group").by_api(record_type, "Value")
    return struct.pack(">h", version) + m.encode(data, version)


def test_offsets_decoder_lines(tmp_path):
    """A commit, a tombstone, an unknown record type and value bytes that do not decode,
    each as Kafka 4.x prints it; a record without a key stops the file with Kafka's
    message, as an error (Kafka's tool dies with a stack trace there)."""
    commit = (_group_key(1, {"group": "g", "topic": "orders", "partition": 3}),
              _group_value(1, 3, {"offset": 42, "leaderEpoch": 5, "metadata": "",
                                  "commitTimestamp": 1000}))
    path = tmp_path / "__consumer_offsets-0" / f"{0:020d}.log"
    path.parent.mkdir()
    path.write_bytes(build([(1000, *commit), (1001, _group_key(3, {"groupId": "cg"}), None),
                            (1002, struct.pack(">h", 99), b"\0\0"),
                            (1003, commit[0], b"\x00\x03\xff")]))
    lines = dump(path, "--offsets-decoder")
    tails = [line.split(" headerKeys: [] ", 1)[1] for line in lines[3:]]
    assert tails == [
        ('key: {"type":"1","data":{"group":"g","topic":"orders","partition":3}} payload: '
        '{"version":"3","data":{"offset":42,"leaderEpoch":5,"metadata":"",'
        '"commitTimestamp":1000}}'),
        'key: {"type":"3","data":{"groupId":"cg"}} payload: <DELETE>',
        "key: Unknown record type 99 at offset 2, skipping.",
        ("key: Error at offset 3, skipping. Could not read record with version 3 from value's "
        "buffer due to: the message ends inside a field at 2.")]
    # --skip-record-metadata: Kafka's "| key: ..." prefix
    assert dump(path, "--offsets-decoder", "--skip-record-metadata")[3].startswith(
        '| key: {"type":"1",')
    keyless = tmp_path / "keyless" / f"{0:020d}.log"
    keyless.parent.mkdir()
    keyless.write_bytes(build([(1000, None, b"\0\0")]))
    r = subprocess.run([sys.executable, "-m", "kafkafs", "dump", "--offsets-decoder",
                        "--files", str(keyless)], cwd=ROOT, capture_output=True, text=True,
                       check=False)
    assert r.returncode == 1
    assert "Failed to decode message at offset 0 using the specified decoder (message had a " \
           "missing key)" in r.stderr


@pytest.mark.parametrize("option,family", [("--offsets-decoder", "group"),
                                           ("--share-group-state-decoder", "share_state")])
def test_every_coordinator_record_type_decodes(tmp_path, option, family):
    """One record of every key and value type of the tables, at their last version, each
    printed with its type and version (no "Error" or "Unknown")."""
    schema = tables.schema(family)
    records = []
    for m in schema:
        if not m.name.endswith("Key"):
            continue
        value_message = schema.by_api(m.api, "Value")
        v = value_message.versions.high if value_message.versions.high is not None else \
            value_message.versions.low
        key_version = 0 if 0 in m.versions else m.api
        records.append((1000, struct.pack(">h", m.api) + m.encode({}, key_version),
                        struct.pack(">h", v) + value_message.encode({}, v)))
    path = tmp_path / "x-0" / f"{0:020d}.log"
    path.parent.mkdir()
    path.write_bytes(build(records))
    lines = dump(path, option)[3:]
    assert len(lines) == len(records)
    for line, (_ts, key, value) in zip(lines, records):
        t, v = struct.unpack_from(">h", key)[0], struct.unpack_from(">h", value)[0]
        assert f'key: {{"type":"{t}","data":' in line and \
            f'payload: {{"version":"{v}","data":' in line, line
