"""The refusals and rules no well-behaved client shows: raw requests to ``kafkafs serve``,
answered (or refused by closing the connection) as Kafka 4.1 does. Requests are encoded with
the project's tables; real clients check the bytes elsewhere (test_net_clients)."""

from __future__ import annotations

import socket
import struct
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkafs.record import encode_batch
from netutil import Server, frame, read_frame, request

NO_ID = bytes(16)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    d = tmp_path_factory.mktemp("proto") / "logs"
    d.mkdir()
    s = Server(d, overrides=["socket.request.max.bytes=2000000",
                             "auto.create.topics.enable=true"]).start()
    yield s
    assert s.stop() == 0, s.log()


def metadata(server, topics):
    return request(server.bootstrap, 3, 12, {"topics": [{"name": t, "topicId": NO_ID}
                                                        for t in topics],
                                             "allowAutoTopicCreation": True,
                                             "includeTopicAuthorizedOperations": False})


def create(server, topic, partitions=1, configs=None):
    r = request(server.bootstrap, 19, 7, {"topics": [
        {"name": topic, "numPartitions": partitions, "replicationFactor": 1,
         "assignments": [], "configs": [{"name": k, "value": v}
                                        for k, v in (configs or {}).items()]}],
        "timeoutMs": 10000, "validateOnly": False})
    assert r["topics"][0]["errorCode"] == 0, r


def produce(server, topic, records, acks=-1, version=9, partition=0, txn=None):
    r = request(server.bootstrap, 0, version, {
        "transactionalId": txn, "acks": acks, "timeoutMs": 5000,
        "topicData": [{"name": topic, "partitionData": [{"index": partition,
                                                         "records": records}]}]})
    return None if r is None else r["responses"][0]["partitionResponses"][0]


def batch(values, **kw):
    now = int(time.time() * 1000)
    return bytes(encode_batch([(now, b"k", v, ()) for v in values], **kw))


def test_api_versions_and_the_unknown_version_fallback(server):
    r = request(server.bootstrap, 18, 3, {"clientSoftwareName": "kafkafs-test",
                                          "clientSoftwareVersion": "1.0"})
    assert r["errorCode"] == 0
    keys = {k["apiKey"]: (k["minVersion"], k["maxVersion"]) for k in r["apiKeys"]}
    assert keys[0] == (0, 13) and keys[1] == (4, 18) and keys[18] == (0, 4)
    assert keys[8][1] == 9 and keys[9][1] == 9 and keys[22][1] == 5
    assert 69 not in keys and 71 not in keys  # not served: not advertised
    # a version the node does not know: version 0, UNSUPPORTED_VERSION, ApiVersions alone
    host, port = server.bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(struct.pack(">ihhi", 12, 18, 99, 7) + struct.pack(">h", 0) + b"\x00\x00")
        data = read_frame(s)
    assert struct.unpack(">i", data[:4])[0] == 7  # correlation id, header version 0
    code, n = struct.unpack(">hi", data[4:10])
    assert code == 35 and n == 1
    assert struct.unpack(">hhh", data[10:16]) == (18, 0, 4)
    bad = request(server.bootstrap, 18, 3, {"clientSoftwareName": "bad name!",
                                            "clientSoftwareVersion": "1"})
    assert bad["errorCode"] == 42 and bad["apiKeys"] == []


@pytest.mark.parametrize("what", ["unknown key", "produce v2", "oversize", "garbage body"])
def test_unservable_requests_close_the_connection(server, what):
    host, port = server.bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        if what == "unknown key":
            s.sendall(struct.pack(">ihhih", 10, 93, 0, 1, -1))
        elif what == "produce v2":
            s.sendall(frame(0, 3, {"transactionalId": None, "acks": 1, "timeoutMs": 1,
                                   "topicData": []})[:6] + b"\x00\x02" +
                      frame(0, 3, {"transactionalId": None, "acks": 1, "timeoutMs": 1,
                                   "topicData": []})[8:])
        elif what == "oversize":
            s.sendall(struct.pack(">i", 3_000_000))
        else:
            s.sendall(struct.pack(">ihhih", 14, 3, 12, 1, -1) + b"\xff\xff\xff\xff")
        assert read_frame(s) is None  # closed without a response
    assert "closing the connection" in server.log()
    # and the node serves on
    assert metadata(server, [])["brokers"][0]["port"] == server.port


def test_produce_validation(server):
    create(server, "val")
    create(server, "compacted", configs={"cleanup.policy": "compact"})
    good = batch([b"a", b"b"])
    ok = produce(server, "val", good)
    assert ok["errorCode"] == 0 and ok["baseOffset"] == 0
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0xFF
    assert produce(server, "val", bytes(bad_crc))["errorCode"] == 2  # CORRUPT_MESSAGE
    nonzero = bytearray(good)
    nonzero[7] = 5
    assert produce(server, "val", bytes(nonzero))["errorCode"] == 87  # base offset 5
    assert produce(server, "val", good + good)["errorCode"] == 87  # two batches
    assert produce(server, "val", good, acks=5)["errorCode"] == 21
    assert produce(server, "__consumer_offsets", good)["errorCode"] in (3, 17)
    assert produce(server, "no-such-topic", good)["errorCode"] == 3  # Produce never creates
    future = bytes(encode_batch([(int(time.time() * 1000) + 7_200_000, b"k", b"x", ())]))
    r = produce(server, "val", future)
    assert r["errorCode"] == 32 and r["recordErrors"][0]["batchIndex"] == 0
    r = produce(server, "compacted", bytes(encode_batch([(0, b"k", b"v", ()),
                                                          (0, None, b"v", ())])))
    assert r["errorCode"] == 87 and [e["batchIndex"] for e in r["recordErrors"]] == [1]
    assert "Compacted topic cannot accept message without key" in r["errorMessage"]
    # nothing of the refused ones was written
    lo = request(server.bootstrap, 2, 7, {"replicaId": -1, "isolationLevel": 0, "topics": [
        {"name": "val", "partitions": [{"partitionIndex": 0, "currentLeaderEpoch": -1,
                                        "timestamp": -1}]}]})
    assert lo["topics"][0]["partitions"][0]["offset"] == 2


def test_acks_zero_gets_no_answer_and_an_error_closes(server):
    create(server, "acks0")
    host, port = server.bootstrap.split(":")
    body = {"transactionalId": None, "acks": 0, "timeoutMs": 1000,
            "topicData": [{"name": "acks0", "partitionData": [{"index": 0,
                                                              "records": batch([b"z"])}]}]}
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(frame(0, 9, body, correlation_id=1))
        s.sendall(frame(3, 12, {"topics": None, "allowAutoTopicCreation": False,
                                "includeTopicAuthorizedOperations": False}, correlation_id=2))
        data = read_frame(s)
        assert struct.unpack(">i", data[:4])[0] == 2  # the produce was not answered
        body["topicData"][0]["partitionData"][0]["index"] = 9  # no such partition
        s.sendall(frame(0, 9, body, correlation_id=3))
        assert read_frame(s) is None


def test_idempotence(server):
    create(server, "idem")
    pid = request(server.bootstrap, 22, 4, {"transactionalId": None,
                                            "transactionTimeoutMs": 60000,
                                            "producerId": -1, "producerEpoch": -1})
    assert pid["errorCode"] == 0 and pid["producerEpoch"] == 0
    pid2 = request(server.bootstrap, 22, 4, {"transactionalId": None,
                                             "transactionTimeoutMs": 60000,
                                             "producerId": -1, "producerEpoch": -1})
    assert pid2["producerId"] != pid["producerId"]
    p = pid["producerId"]
    b0 = batch([b"0", b"1"], producer_id=p, producer_epoch=0, base_sequence=0)
    b1 = batch([b"2"], producer_id=p, producer_epoch=0, base_sequence=2)
    assert produce(server, "idem", b0)["baseOffset"] == 0
    assert produce(server, "idem", b1)["baseOffset"] == 2
    dup = produce(server, "idem", b0)  # a retry of an acknowledged batch: its offsets
    assert dup["errorCode"] == 0 and dup["baseOffset"] == 0
    gap = batch([b"9"], producer_id=p, producer_epoch=0, base_sequence=9)
    assert produce(server, "idem", gap)["errorCode"] == 45
    bumped = batch([b"3"], producer_id=p, producer_epoch=1, base_sequence=0)
    assert produce(server, "idem", bumped)["baseOffset"] == 3
    old = batch([b"x"], producer_id=p, producer_epoch=0, base_sequence=3)
    assert produce(server, "idem", old)["errorCode"] == 47
    no_seq = batch([b"x"], producer_id=p, producer_epoch=1, base_sequence=-1)
    assert produce(server, "idem", no_seq)["errorCode"] == 87
    txn = batch([b"t"], producer_id=p, producer_epoch=1, base_sequence=1,
                is_transactional=True)
    assert produce(server, "idem", txn)["errorCode"] == 53  # no transactional id
    lo = request(server.bootstrap, 2, 7, {"replicaId": -1, "isolationLevel": 0, "topics": [
        {"name": "idem", "partitions": [{"partitionIndex": 0, "currentLeaderEpoch": -1,
                                         "timestamp": -1}]}]})
    assert lo["topics"][0]["partitions"][0]["offset"] == 4  # 0, 1, 2, 3: no duplicate


def _fetch(server, topic, offset, version=12, max_bytes=1 << 20, part_max=1 << 20,
           session_id=0, epoch=-1, min_bytes=1, wait=0):
    return request(server.bootstrap, 1, version, {
        "replicaId": -1, "maxWaitMs": wait, "minBytes": min_bytes, "maxBytes": max_bytes,
        "isolationLevel": 0, "sessionId": session_id, "sessionEpoch": epoch,
        "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "currentLeaderEpoch": -1, "fetchOffset": offset,
             "lastFetchedEpoch": -1, "logStartOffset": -1, "partitionMaxBytes": part_max}]}],
        "forgottenTopicsData": [], "rackId": ""})


def test_fetch_rules(server):
    create(server, "fr")
    big = batch([b"x" * 5000])
    produce(server, "fr", big)
    produce(server, "fr", batch([b"small"]))
    r = _fetch(server, "fr", 0, part_max=100)  # KIP-74: the first batch whole
    p = r["responses"][0]["partitions"][0]
    assert p["errorCode"] == 0 and len(p["records"]) == len(big)
    assert p["highWatermark"] == 2 and p["lastStableOffset"] == 2 and p["logStartOffset"] == 0
    r = _fetch(server, "fr", 99)
    p = r["responses"][0]["partitions"][0]
    assert (p["errorCode"], p["highWatermark"], p["logStartOffset"]) == (1, -1, -1)
    r = _fetch(server, "fr", 2)  # at the log end: nothing, no error
    assert r["responses"][0]["partitions"][0]["records"] == b""
    t0 = time.monotonic()
    r = _fetch(server, "fr", 2, wait=600, min_bytes=1)  # long poll expires quietly
    assert 0.5 <= time.monotonic() - t0 < 3
    assert r["responses"][0]["partitions"][0]["errorCode"] == 0


def test_fetch_sessions(server):
    create(server, "fs")
    produce(server, "fs", batch([b"a"]))
    r = _fetch(server, "fs", 0, epoch=0)  # a new session
    sid = r["sessionId"]
    assert sid > 0 and len(r["responses"][0]["partitions"]) == 1
    r = _fetch(server, "fs", 1, session_id=sid, epoch=1)
    assert r["errorCode"] == 0 and r["sessionId"] == sid
    assert r["responses"] == [] or r["responses"][0]["partitions"] == [] or \
        r["responses"][0]["partitions"][0]["records"] == b""
    assert _fetch(server, "fs", 1, session_id=sid, epoch=7)["errorCode"] == 71
    assert _fetch(server, "fs", 1, session_id=12345, epoch=1)["errorCode"] == 70
    # an incremental answer lists a partition once it has new records
    produce(server, "fs", batch([b"b"]))
    r = _fetch(server, "fs", 1, session_id=sid, epoch=2)
    assert r["responses"][0]["partitions"][0]["highWatermark"] == 2


def test_list_offsets(server):
    create(server, "lo")
    t = int(time.time() * 1000)
    for i in range(3):
        produce(server, "lo", bytes(encode_batch([(t + i * 1000, b"k", b"%d" % i, ())])))

    def lo(ts, v=7):
        r = request(server.bootstrap, 2, v, {"replicaId": -1, "isolationLevel": 0, "topics": [
            {"name": "lo", "partitions": [{"partitionIndex": 0, "currentLeaderEpoch": -1,
                                           "timestamp": ts}]}]})
        p = r["topics"][0]["partitions"][0]
        return p["errorCode"], p["offset"], p["timestamp"]

    assert lo(-2) == (0, 0, -1)
    assert lo(-1) == (0, 3, -1)
    assert lo(-3) == (0, 2, t + 2000)
    assert lo(t + 500) == (0, 1, t + 1000)
    assert lo(t + 99999) == (0, -1, -1)
    assert lo(-3, v=6)[0] == 35  # -3 needs version 7
    assert lo(-5, v=9) == (0, -1, -1)  # no tiered storage


def test_idle_connections_close(tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    s = Server(d, overrides=["connections.max.idle.ms=300"]).start()
    try:
        host, port = s.bootstrap.split(":")
        with socket.create_connection((host, int(port)), timeout=5) as c:
            time.sleep(1.0)
            c.settimeout(5)
            assert c.recv(1) == b""
    finally:
        assert s.stop() == 0


def _send_raw(server, data: bytes) -> None:
    """Send ``data`` as one frame and read one answer, or see the connection closed."""
    host, port = server.bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(struct.pack(">i", len(data)) + data)
        s.settimeout(1.5)  # (a valid long poll or join may park: the node goes on)
        try:
            read_frame(s)  # one answer, or the connection closed
        except TimeoutError:
            pass


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.integers(-1, 80), version=st.integers(-1, 20),
       body=st.binary(max_size=300))
def test_fuzzed_requests_never_take_the_node_down(server, key, version, body):
    _send_raw(server, struct.pack(">hhih", key, version, 1, 4) + b"fuzz" + body)
    r = request(server.bootstrap, 18, 0, {})
    assert r is not None and r["errorCode"] == 0



def _valid_frames():
    """(api key, version, frame) for every api and version the node answers: the request
    with its defaults (empty lists, empty names), as Kafka's generated code writes it."""
    from kafkafs.net.broker import all_handlers, supported_versions
    from kafkafs.record.tables import protocol

    handlers = all_handlers()
    out = []
    for key, (lo, hi) in sorted(supported_versions(handlers).items()):
        msg = protocol().by_api(key, "Request")
        for v in range(max(lo, msg.versions.low), hi + 1):
            body = {f.name: f.default_value() for f in msg.fields if v in f.versions}
            out.append((key, v, frame(key, v, body)))
    return out


VALID = _valid_frames()


def _fetch_records(server, topic):
    r = _fetch(server, topic, 0)
    return r["responses"][0]["partitions"][0]["records"]


@pytest.fixture(scope="module")
def guarded(server):
    """A topic with records the fuzzer must leave as they are; its record bytes."""
    create(server, "keep")
    assert produce(server, "keep", batch([b"guarded %d" % i for i in range(20)]))[
        "errorCode"] == 0
    return _fetch_records(server, "keep")


def test_every_api_and_version_has_a_valid_frame():
    assert len(VALID) > 150
    assert {k for k, _v, _f in VALID} >= {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 18, 19, 22}


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.integers(0, len(VALID) - 1),
       edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255),
                                st.sampled_from(["flip", "cut", "insert"])), max_size=4))
def test_mutated_valid_frames(server, guarded, which, edits):
    """Every supported api and version, its valid default request mutated byte by byte:
    the node answers or closes, serves on, and the records it holds stay as they were."""
    _key, _version, data = VALID[which]
    data = bytearray(data)
    for pos, byte, op in edits:
        pos = 4 + pos % max(1, len(data) - 4)
        if op == "flip" and pos < len(data):
            data[pos] ^= byte or 1
        elif op == "cut":
            data = data[:pos]
        else:
            data[pos:pos] = bytes([byte])
    _send_raw(server, bytes(data[4:]))
    assert request(server.bootstrap, 18, 0, {})["errorCode"] == 0
    assert _fetch_records(server, "keep")[:len(guarded)] == guarded


def test_fetch_by_an_unknown_topic_id(server):
    r = request(server.bootstrap, 1, 13, {
        "replicaId": -1, "maxWaitMs": 0, "minBytes": 1, "maxBytes": 1 << 20,
        "isolationLevel": 0, "sessionId": 0, "sessionEpoch": -1,
        "topics": [{"topicId": b"\x07" * 16, "partitions": [
            {"partition": 0, "currentLeaderEpoch": -1, "fetchOffset": 0,
             "lastFetchedEpoch": -1, "logStartOffset": -1, "partitionMaxBytes": 1 << 20}]}],
        "forgottenTopicsData": [], "rackId": ""})
    p = r["responses"][0]["partitions"][0]
    assert p["errorCode"] == 100 and r["responses"][0]["topicId"] == b"\x07" * 16
