"""The schema tables and their codec (kafkafs/record/schema.py, schema_json.py, tables/,
internal.py; docs/design.md §2.5): the table language, a round trip of every message of
every table in every version, the JSON Kafka's generated converters write, and the
coordinator and metadata records as kafka-dump-log's decoders print them (the expected
strings are Kafka's own test expectations, DumpLogSegmentsTest)."""

from __future__ import annotations

import base64
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkafs.record import internal, tables
from kafkafs.record.errors import CorruptRecordError
from kafkafs.record.schema import Versions, parse_tables
from kafkafs.record.schema_json import (
    java_double,
    json_string,
    struct_json,
    uuid_string,
)

ALL = [(family, m.name, v) for family in tables.FAMILIES for m in tables.schema(family)
       for v in range(m.versions.low, (m.versions.high or m.versions.low) + 1)]


# -- the language ---------------------------------------------------------------------------

def test_version_ranges():
    assert [v in Versions.parse("2+") for v in (1, 2, 9)] == [False, True, True]
    assert [v in Versions.parse("1-3") for v in (0, 1, 3, 4)] == [False, True, True, False]
    assert [v in Versions.parse("4") for v in (3, 4, 5)] == [False, True, False]
    assert 0 not in Versions.parse("none")
    assert [str(Versions.parse(t)) for t in ("0+", "1-3", "4", "none")] == \
        ["0+", "1-3", "4", "none"]


def test_a_bad_table_names_its_line():
    with pytest.raises(ValueError, match="table line 3: .*names no struct"):
        parse_tables("message M versions 0\n  a int32 0+\n  b []Nope 0+\n")
    with pytest.raises(ValueError, match="table line 2: unknown attribute 'nulable'"):
        parse_tables("message M versions 0\n  a string 0+ nulable 0+\n")
    with pytest.raises(ValueError, match="table line 2: bad indentation"):
        parse_tables("message M versions 0\n   a int32 0+\n")


def test_field_names_are_the_generated_codes():
    s = parse_tables("message M versions 0 flexible 0+\n  GroupId string 0+\n"
                     "  KRaftVersion int16 0+\n")
    assert [f.name for f in s.message("M").fields] == ["groupId", "kRaftVersion"]


def test_the_tables_cover_every_record_type_of_kafka_4():
    """The record types Kafka 4.1 defines (group coordinator: 0-17 and 19-23, 9 being
    4.0's share partition metadata; metadata records: their apiKeys; control records 2-6),
    each a key and a value where the topic has both."""
    group = tables.schema("group")
    assert sorted({m.api for m in group}) == [*range(18), *range(19, 24)]
    for t in {m.api for m in group}:
        assert group.by_api(t, "Key") is not None and group.by_api(t, "Value") is not None
    assert sorted(m.api for m in tables.schema("metadata")) == \
        [0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 14, 15, *range(17, 29)]
    assert sorted(m.api for m in tables.schema("raft")) == [2, 3, 4, 5, 6]
    assert tables.schema("txn").by_api(0, "Value").versions == Versions(0, 1)


# -- a round trip of everything ---------------------------------------------------------------

_INTS = {"int8": (-2**7, 2**7 - 1), "int16": (-2**15, 2**15 - 1),
         "int32": (-2**31, 2**31 - 1), "int64": (-2**63, 2**63 - 1),
         "uint16": (0, 2**16 - 1), "uint32": (0, 2**32 - 1)}


def _value(f, t, version):
    """A strategy of values of type ``t`` of field ``f`` in ``version``."""
    nullable = version in f.nullable
    if t.startswith("[]"):
        s = st.lists(_value(f, t[2:], version) if t[2:].startswith("[]") or
                     t[2:] != f.element else _element(f, t[2:], version), max_size=3)
    else:
        s = _element(f, t, version)
    if nullable and (t.startswith("[]") or t in ("string", "bytes") or f.struct is not None):
        s = st.none() | s
    return s


def _element(f, t, version):
    if t in _INTS:
        return st.integers(*_INTS[t])
    if t == "bool":
        return st.booleans()
    if t == "float64":
        return st.floats(allow_nan=False)
    if t == "string":
        return st.text(max_size=12)
    if t == "bytes":
        return st.binary(max_size=12)
    if t == "records":
        return st.none() | st.binary(max_size=12)
    if t == "uuid":
        return st.binary(min_size=16, max_size=16)
    return _struct(f.struct, version)


def _struct(s, version):
    return st.fixed_dictionaries({f.name: _value(f, f.type, version) for f in s.fields
                                  if version in f.versions})


@pytest.mark.parametrize("family,name,version", ALL,
                         ids=[f"{n}-v{v}" for _f, n, v in ALL])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_message_round_trips_in_every_version(family, name, version, data):
    m = tables.schema(family).message(name)
    value = data.draw(_struct(m, version))
    raw = m.encode(value, version)
    assert m.decode(raw, version) == value
    assert m.encode(m.decode(raw, version), version) == raw
    struct_json(m, value, version)  # every value has a JSON form
    if raw:  # a message cut short is an error, never a shorter message
        with pytest.raises(CorruptRecordError):
            m.decode(raw[:-1], version)


def test_kafka_python_consumer_protocol_bytes_decode():
    """An independent encoder: kafka-python's consumer protocol structs (version 0: an
    int16 version, then the message) read by our tables."""
    from kafka.protocol.old.consumer_protocol import (
        ConsumerProtocolMemberAssignment_v0,
        ConsumerProtocolMemberMetadata_v0,
    )

    cp = tables.schema("consumer_protocol")
    sub = ConsumerProtocolMemberMetadata_v0(0, ["orders", "payments"], b"ud").encode()
    assert struct.unpack_from(">h", sub)[0] == 0
    assert cp.message("ConsumerProtocolSubscription").decode(sub, 0, pos=2) == \
        {"topics": ["orders", "payments"], "userData": b"ud"}
    asg = ConsumerProtocolMemberAssignment_v0(0, [("orders", [0, 2])], b"").encode()
    assert cp.message("ConsumerProtocolAssignment").decode(asg, 0, pos=2) == \
        {"assignedPartitions": [{"topic": "orders", "partitions": [0, 2]}], "userData": b""}


# -- JSON as Kafka writes it ----------------------------------------------------------------

def test_json_conventions():
    assert uuid_string(bytes(16)) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert uuid_string(base64.urlsafe_b64decode("Uj5wn_FqTXirEASvVZRY1w==")) == \
        "Uj5wn_FqTXirEASvVZRY1w"
    assert json_string('a"\\\n\x1f\x7f\u2028é/') == '"a\\"\\\\\\n\\u001F\x7f\u2028é/"'
    assert [java_double(d) for d in (1.0, 1e7, 1e-4, -2.5e10, 1234567.5, 0.001, 0.0, -0.0,
                                     float("nan"), float("inf"))] == \
        ["1.0", "1.0E7", "1.0E-4", "-2.5E10", "1234567.5", "0.001", "0.0", "-0.0", '"NaN"',
         '"Infinity"']


def _key(family, record_type, data):
    m = tables.schema(family).by_api(record_type, "Key")
    return struct.pack(">h", record_type) + m.encode(data, 0)


def _val(family, record_type, version, data):
    m = tables.schema(family).by_api(record_type, "Value")
    return struct.pack(">h", version) + m.encode(data, version)


def _consumer_protocol(name, data, version=3):
    m = tables.schema("consumer_protocol").message(name)
    return struct.pack(">h", version) + m.encode(data, version)


MEMBER = {"memberId": "member", "groupInstanceId": "instance", "clientId": "client",
          "clientHost": "host", "rebalanceTimeout": 1000, "sessionTimeout": 100}
GROUP = {"protocolType": "consumer", "generation": 10, "protocol": "range", "leader": "member",
         "currentStateTimestamp": -1}
GROUP_HEAD = ('{"version":"4","data":{"protocolType":"consumer","generation":10,"protocol":'
              '"range","leader":"member","currentStateTimestamp":-1,"members":[{"memberId":'
              '"member","groupInstanceId":"instance","clientId":"client","clientHost":"host",'
              '"rebalanceTimeout":1000,"sessionTimeout":100,')


def test_group_metadata_shows_the_consumer_protocol_decoded():
    """DumpLogSegmentsTest.testOffsetsMessageParser's expectations, byte for byte."""
    sub = _consumer_protocol("ConsumerProtocolSubscription", {
        "topics": ["foo"], "ownedPartitions": [{"topic": "foo", "partitions": [0]}],
        "generationId": 0, "rackId": "rack"})
    asg = _consumer_protocol("ConsumerProtocolAssignment",
                             {"assignedPartitions": [{"topic": "foo", "partitions": [0]}]})
    value = {**GROUP, "members": [{**MEMBER, "subscription": sub, "assignment": asg}]}
    key, payload = internal.coordinator_text("group", 0, _key("group", 2, {"group": "group"}),
                                             _val("group", 2, 4, value))
    assert key == '{"type":"2","data":{"group":"group"}}'
    assert payload == GROUP_HEAD + (
        '"subscription":{"topics":["foo"],"userData":null,"ownedPartitions":[{"topic":"foo",'
        '"partitions":[0]}],"generationId":0,"rackId":"rack"},"assignment":{'
        '"assignedPartitions":[{"topic":"foo","partitions":[0]}],"userData":null}}]}}')
    # bytes that do not decode stay Base64, each field on its own
    value["members"][0].update(subscription=b"Subscription", assignment=b"Assignment")
    _key_text, payload = internal.coordinator_text(
        "group", 0, _key("group", 2, {"group": "group"}), _val("group", 2, 4, value))
    assert payload == GROUP_HEAD + \
        '"subscription":"U3Vic2NyaXB0aW9u","assignment":"QXNzaWdubWVudA=="}]}}'
    # another protocol type: Base64 whatever the bytes
    value.update(protocolType="connect", members=[{**MEMBER, "subscription": sub,
                                                   "assignment": asg}])
    _key_text, payload = internal.coordinator_text(
        "group", 0, _key("group", 2, {"group": "group"}), _val("group", 2, 4, value))
    assert f'"subscription":"{base64.b64encode(sub).decode()}"' in payload


def test_coordinator_records_tombstones_and_unknown_types():
    key = _key("group", 3, {"groupId": "group"})
    assert internal.coordinator_text("group", 0, key, _val("group", 3, 0, {"epoch": 10})) == \
        ('{"type":"3","data":{"groupId":"group"}}', '{"version":"0","data":{"epoch":10}}')
    assert internal.coordinator_text("group", 0, key, None) == \
        ('{"type":"3","data":{"groupId":"group"}}', "<DELETE>")
    assert internal.coordinator_text("group", 0, struct.pack(">h", 32767) + b"x", b"\0\0") == \
        ("Unknown record type 32767 at offset 0, skipping.", None)
    assert internal.coordinator_text("group", 7, b"\x00", None) == \
        ("Error at offset 7, skipping. Could not read version from key's buffer.", None)
    with pytest.raises(CorruptRecordError, match="at offset 3 using the specified decoder "
                                                 r"\(message had a missing key\)"):
        internal.coordinator_text("group", 3, None, b"\0\0")
    text, _ = internal.coordinator_text("group", 0, key, b"\x00\x00\xff\xff")
    assert text.startswith("Error at offset 0, skipping. Could not read record with version 0 "
                           "from value's buffer due to: ")


def test_transaction_log_records():
    """DumpLogSegmentsTest.testTransactionLogMessageParser's expectations: v0 with its
    defaults, v1 with tagged fields written only when not their defaults."""
    key = _key("txn", 0, {"transactionalId": "txnId"})
    _k, payload = internal.coordinator_text("txn", 0, key, _val("txn", 0, 0, {"producerId": 123}))
    assert payload == (
        '{"version":"0","data":{"producerId":123,"producerEpoch":0,"transactionTimeoutMs":0,'
        '"transactionStatus":0,"transactionPartitions":[],"transactionLastUpdateTimestampMs":0,'
        '"transactionStartTimestampMs":0}}')
    v1 = {"producerId": 12, "previousProducerId": 11, "nextProducerId": 10,
          "producerEpoch": 2, "transactionTimeoutMs": 14, "transactionStatus": 0,
          "transactionPartitions": [{"topic": "topic1", "partitionIds": [0, 1, 2]},
                                    {"topic": "topic2", "partitionIds": [3, 4, 5]}],
          "transactionLastUpdateTimestampMs": 123, "transactionStartTimestampMs": 13}
    _k, payload = internal.coordinator_text("txn", 0, key, _val("txn", 0, 1, v1))
    assert payload == (
        '{"version":"1","data":{"producerId":12,"previousProducerId":11,"nextProducerId":10,'
        '"producerEpoch":2,"transactionTimeoutMs":14,"transactionStatus":0,'
        '"transactionPartitions":[{"topic":"topic1","partitionIds":[0,1,2]},{"topic":"topic2",'
        '"partitionIds":[3,4,5]}],"transactionLastUpdateTimestampMs":123,'
        '"transactionStartTimestampMs":13}}')


def test_a_nullable_array_of_structs_has_no_presence_byte_per_element():
    """Kafka's generated code writes a nullable array as its count (-1: null) and then the
    elements as they are: the int8 presence byte is a nullable struct field's (KIP-893),
    never an array element's. TransactionLogValue v0 and v1 packed by hand as
    TransactionLogValue.write does (the v1 partitions: compact array, compact string,
    compact array of int32, each element's empty tagged-field section)."""
    m = tables.schema("txn").message("TransactionLogValue")
    v0 = (struct.pack(">qhib", 7, 1, 60000, 1) + struct.pack(">i", 1)
          + struct.pack(">h", 6) + b"orders" + struct.pack(">iii", 2, 0, 3)
          + struct.pack(">qq", 123, 100))
    assert m.decode(v0, 0)["transactionPartitions"] == [{"topic": "orders",
                                                         "partitionIds": [0, 3]}]
    assert m.encode(m.decode(v0, 0), 0) == v0
    v1 = (struct.pack(">qhib", 7, 1, 60000, 1) + bytes([2])  # one element, count + 1
          + bytes([7]) + b"orders" + bytes([3]) + struct.pack(">ii", 0, 3) + b"\0"
          + struct.pack(">qq", 123, 100) + b"\0")
    assert m.decode(v1, 1)["transactionPartitions"] == [{"topic": "orders",
                                                         "partitionIds": [0, 3]}]
    assert m.encode(m.decode(v1, 1), 1) == v1
    null = struct.pack(">qhib", 7, 1, 60000, 0) + struct.pack(">i", -1) + struct.pack(">qq", 1, 1)
    assert m.decode(null, 0)["transactionPartitions"] is None
    assert m.encode(m.decode(null, 0), 0) == null


def test_a_null_struct_in_a_tagged_field_is_the_varint_zero():
    """Kafka's generated code reads a tagged nullable struct's presence as an unsigned
    varint (<= 0: null) and, having no default for ConsumerGroupMemberMetadataValue's
    ClassicMemberMetadata (its JSON default is a JSON null), writes every consumer-protocol
    member's null one as tag 0, size 1, byte 00 (GroupCoordinatorRecordHelpers)."""
    m = tables.schema("group").message("ConsumerGroupMemberMetadataValue")
    head = (b"\0" + b"\0" + bytes([2]) + b"c" + bytes([2]) + b"h" + bytes([2, 2]) + b"t"
            + b"\0" + struct.pack(">i", 45000) + bytes([6]) + b"range")
    with_null = head + bytes([1, 0, 1, 0])  # one tagged field: tag 0, size 1, varint 0
    data = m.decode(with_null, 0)
    assert data["classicMemberMetadata"] is None and data["subscribedTopicNames"] == ["t"]
    assert m.encode(data, 0) == with_null
    classic = {"sessionTimeoutMs": 10, "supportedProtocols": [{"name": "r", "metadata": b"x"}]}
    body = b"\1" + struct.pack(">i", 10) + bytes([2, 2]) + b"r" + bytes([2]) + b"x" + b"\0\0"
    with_struct = head + bytes([1, 0, len(body)]) + body
    assert m.decode(with_struct, 0)["classicMemberMetadata"] == classic
    assert m.encode(m.decode(with_struct, 0), 0) == with_struct


def test_a_field_of_its_own_flexibility_requests_responses_and_unstable_versions():
    """RequestHeader.ClientId keeps its int16 length in the flexible header v2
    ("flexibleVersions": "none"); a request and its response share an api key and are told
    apart by their names; ``unstable`` is latestVersionUnstable."""
    s = parse_tables(
        "message RequestHeader versions 1-2 flexible 2+\n"
        "  RequestApiKey int16 0+\n  RequestApiVersion int16 0+\n  CorrelationId int32 0+\n"
        "  ClientId string 1+ nullable 1+ flexible none\n"
        "message PingRequest api 99 versions 0-1 flexible 1+ unstable\n  Id int32 0+\n"
        "message PingResponse api 99 versions 0-1 flexible 1+\n  Name string 0+\n")
    h = s.message("RequestHeader")
    v2 = struct.pack(">hhih", 3, 12, 7, 2) + b"me" + b"\0"  # int16 length, then no tags
    assert h.decode(v2, 2) == {"requestApiKey": 3, "requestApiVersion": 12,
                               "correlationId": 7, "clientId": "me"}
    assert h.encode(h.decode(v2, 2), 2) == v2
    assert h.encode({"requestApiKey": 3, "requestApiVersion": 12, "correlationId": 7,
                     "clientId": None}, 2) == struct.pack(">hhih", 3, 12, 7, -1) + b"\0"
    assert s.by_api(99, "Request").name == "PingRequest" and s.message("PingRequest").unstable
    assert s.by_api(99, "Response").name == "PingResponse"
    assert not s.message("PingResponse").unstable
    assert s.message("PingResponse").encode({"name": "ab"}, 1) == b"\3ab\0"


def _metadata_value(name, version, data):
    m = tables.schema("metadata").message(name)
    return bytes([1, m.api, version]) + m.encode(data, version)


def test_metadata_records_and_their_errors():
    value = _metadata_value("FeatureLevelRecord", 0, {"name": "kraft.version",
                                                      "featureLevel": 1})
    assert len(value) == 20  # valueSize 20, a Kafka 4.0 broker's record (PR #19205)
    assert internal.metadata_text(540, value) == (
        '{"type":"FEATURE_LEVEL_RECORD","version":0,"data":{"name":"kraft.version",'
        '"featureLevel":1}}')
    tid = base64.urlsafe_b64decode("Uj5wn_FqTXirEASvVZRY1w==")
    value = _metadata_value("PartitionRecord", 1, {
        "partitionId": 0, "topicId": tid, "replicas": [1], "isr": [1], "removingReplicas": [],
        "addingReplicas": [], "leader": 1, "leaderEpoch": 0, "partitionEpoch": 0,
        "directories": [bytes(16)]})
    assert internal.metadata_text(0, value) == (
        '{"type":"PARTITION_RECORD","version":1,"data":{"partitionId":0,"topicId":'
        '"Uj5wn_FqTXirEASvVZRY1w","replicas":[1],"isr":[1],"removingReplicas":[],'
        '"addingReplicas":[],"leader":1,"leaderEpoch":0,"partitionEpoch":0,"directories":'
        '["AAAAAAAAAAAAAAAAAAAAAA"]}}')
    assert internal.metadata_text(5, bytes([0x90, 0x4E, 0x90, 0x4E])) == (
        "Error at 5, skipping. Could not deserialize metadata record due to unknown frame "
        "version 10000(only frame version 1 is supported)")
    assert internal.metadata_text(5, bytes([0, 2, 0])).startswith(
        "Error at 5, skipping. Could not deserialize metadata record with frame version 0.")
    assert internal.metadata_text(5, bytes([1, 99, 0])) == (
        "Error at 5, skipping. org.apache.kafka.common.errors.UnsupportedVersionException: "
        "Unknown metadata id 99")
    assert internal.metadata_text(5, value + b"xy") == \
        "Error at 5, skipping. Found 2 byte(s) of garbage after 3"


def test_kraft_control_records():
    raft = tables.schema("raft")
    voters = raft.message("VotersRecord").encode({"version": 0, "voters": [{
        "voterId": 1, "voterDirectoryId": base64.urlsafe_b64decode("tpx8pd1IQDqJwMfGzXj6GA=="),
        "endpoints": [{"name": "CONTROLLER", "host": "localhost", "port": 9093}],
        "kRaftVersionFeature": {"minSupportedVersion": 0, "maxSupportedVersion": 1}}]}, 0)
    assert len(voters) == 55  # valueSize 55 in a 4.0 broker's dump (PR #19729)
    assert internal.control_text(6, voters) == (
        'KRaftVoters {"version":0,"voters":[{"voterId":1,"voterDirectoryId":'
        '"tpx8pd1IQDqJwMfGzXj6GA","endpoints":[{"name":"CONTROLLER","host":"localhost",'
        '"port":9093}],"kRaftVersionFeature":{"minSupportedVersion":0,"maxSupportedVersion":1}}]}')
    header = raft.message("SnapshotHeaderRecord").encode(
        {"version": 0, "lastContainedLogTimestamp": 10000}, 0)
    assert len(header) == 11 and internal.control_text(3, header) == \
        'SnapshotHeader {"version":0,"lastContainedLogTimestamp":10000}'
    assert internal.control_text(4, b"\0\0\0") == 'SnapshotFooter {"version":0}'
    assert internal.control_text(2, b"\0") is None  # does not decode: the generic line
    assert internal.control_text(9, b"") is None
