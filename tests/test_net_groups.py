"""The group coordinator with real clients: rebalances between consumers, a member that
stops heartbeating is removed, static membership, commits that a restarted node (and
``kafkafs consumer-groups``, ``kafkafs dump --offsets-decoder``) reads back from
``__consumer_offsets`` -- the records Kafka 4.1 writes."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid

import pytest
from conftest import ROOT

from netutil import Server, request

kafka = pytest.importorskip("kafka")
ck = pytest.importorskip("confluent_kafka")


@pytest.fixture
def server(tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    s = Server(d)
    s.start()
    yield s
    s.stop()


def _produce(server, topic, n, partitions=4):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)
    p = ck.Producer({"bootstrap.servers": server.bootstrap})
    for i in range(n):
        p.produce(topic, value=b"%d" % i, partition=i % partitions)
    assert p.flush(10) == 0


def _wait_assigned(consumers, total, timeout=30):
    """The assignment sizes once ``consumers`` share ``total`` partitions, each some.

    Each consumer polls in a thread of its own, as applications do: kafka-python 3.0.11's
    ``join_group_async`` drops a join it finished between two polls of the same consumer
    (a done ``_join_task`` is replaced, its assignment unread) and rejoins -- as the
    group's leader, a new rebalance each time -- so one thread polling two consumers in
    turn could keep the group rebalancing for good (seen here: 30 s of generations, each
    stabilized, none taken up by the leader)."""
    stop = threading.Event()

    def spin(c):
        while not stop.is_set():
            c.poll(timeout_ms=100)

    threads = [threading.Thread(target=spin, args=(c,), daemon=True) for c in consumers]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            sizes = [len(c.assignment()) for c in consumers]
            if sum(sizes) == total and all(sizes):
                return sizes
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    raise AssertionError(f"no balanced assignment: {[c.assignment() for c in consumers]}")


def test_rebalance_between_two_consumers_and_a_leave(server):
    topic = f"rb-{uuid.uuid4().hex[:6]}"
    _produce(server, topic, 40)
    conf = dict(bootstrap_servers=server.bootstrap, group_id="rb", auto_offset_reset="earliest",
                enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=500)
    a = kafka.KafkaConsumer(topic, client_id="a", **conf)
    a.poll(timeout_ms=3000)
    b = kafka.KafkaConsumer(topic, client_id="b", **conf)
    sizes = _wait_assigned([a, b], 4)
    assert sorted(sizes) == [2, 2]
    assert not set(a.assignment()) & set(b.assignment())
    b.close()  # LeaveGroup: a takes all four partitions
    deadline = time.monotonic() + 20
    while len(a.assignment()) != 4 and time.monotonic() < deadline:
        a.poll(timeout_ms=200)
    assert len(a.assignment()) == 4
    a.close()


def test_a_silent_member_is_removed_after_its_session_timeout(server):
    topic = f"st-{uuid.uuid4().hex[:6]}"
    _produce(server, topic, 8, partitions=2)
    conf = dict(bootstrap_servers=server.bootstrap, group_id="st", auto_offset_reset="earliest",
                enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=500)
    a = kafka.KafkaConsumer(topic, client_id="a", **conf)
    b = kafka.KafkaConsumer(topic, client_id="b", **conf)
    _wait_assigned([a, b], 2)
    # b stops without leaving (its heartbeat thread goes with it)
    b._coordinator._close_heartbeat_thread() if hasattr(b._coordinator,
                                                        "_close_heartbeat_thread") else None
    b._client.close()
    t0 = time.monotonic()
    while len(a.assignment()) != 2 and time.monotonic() - t0 < 30:
        a.poll(timeout_ms=200)
    assert len(a.assignment()) == 2
    assert 4 < time.monotonic() - t0 < 25  # after the session timeout, not before
    a.close()


def test_static_membership(server):
    topic = f"sm-{uuid.uuid4().hex[:6]}"
    _produce(server, topic, 4, partitions=2)
    conf = {"bootstrap.servers": server.bootstrap, "group.id": "sm",
            "group.instance.id": "instance-1", "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000}
    c = ck.Consumer(conf)
    c.subscribe([topic])
    deadline = time.monotonic() + 20
    while not c.assignment() and time.monotonic() < deadline:
        c.poll(0.2)
    first = c.memberid()
    assert first.startswith("instance-1-")
    c.close()  # a static member's close does not leave the group (KIP-345)
    c2 = ck.Consumer(conf)
    c2.subscribe([topic])
    deadline = time.monotonic() + 20
    while not c2.assignment() and time.monotonic() < deadline:
        c2.poll(0.2)
    assert c2.assignment() and c2.memberid() != first  # the instance took over
    g = request(server.bootstrap, 15, 5, {"groups": ["sm"], "includeAuthorizedOperations": False})
    members = g["groups"][0]["members"]
    assert [m["groupInstanceId"] for m in members] == ["instance-1"]
    c2.close()


def test_commits_survive_a_restart_and_read_as_kafka_records(server):
    topic = f"cr-{uuid.uuid4().hex[:6]}"
    _produce(server, topic, 12, partitions=3)
    c = ck.Consumer({"bootstrap.servers": server.bootstrap, "group.id": "cr",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 30
    while got < 12 and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            got += 1
    c.commit(asynchronous=False)
    c.close()
    assert server.stop() == 0
    out = subprocess.run([sys.executable, "-m", "kafkafs", "consumer-groups", "--log-dirs",
                          server.log_dir, "--describe", "--group", "cr"], capture_output=True,
                         cwd=ROOT, timeout=60)
    rows = [line.split() for line in out.stdout.decode().splitlines() if line.startswith("cr ")]
    assert sorted((r[1], r[2], r[3], r[5]) for r in rows) == \
        [(topic, str(p), "4", "0") for p in range(3)], out.stdout
    from kafkafs.log.groups import coordinator_partition
    seg = f"{server.log_dir}/__consumer_offsets-{coordinator_partition('cr', 50)}/" \
        "00000000000000000000.log"
    dump = subprocess.run([sys.executable, "-m", "kafkafs", "dump", "--offsets-decoder",
                           "--files", seg], capture_output=True, cwd=ROOT, timeout=60)
    text = dump.stdout.decode()
    assert '"type":"2","data":{"group":"cr"}' in text  # GroupMetadata
    assert '"version":"3"' in text  # GroupMetadataValue v3
    assert '"version":"4","data":{"offset":4' in text  # OffsetCommitValue v4
    server.start()  # the node loads them back: OffsetFetch answers from the log
    r = request(server.bootstrap, 9, 8, {"groups": [{"groupId": "cr", "topics": None}],
                                         "requireStable": False})
    parts = {(t["name"], p["partitionIndex"]): p["committedOffset"]
             for t in r["groups"][0]["topics"] for p in t["partitions"]}
    assert parts == {(topic, p): 4 for p in range(3)}


def test_delete_groups_and_offset_delete(server):
    topic = f"dg-{uuid.uuid4().hex[:6]}"
    _produce(server, topic, 2, partitions=1)
    commit = {"groupId": "dg", "generationIdOrMemberEpoch": -1, "memberId": "",
              "groupInstanceId": None,
              "topics": [{"name": topic, "partitions": [
                  {"partitionIndex": 0, "committedOffset": 1, "committedLeaderEpoch": -1,
                   "committedMetadata": "m"}]}]}
    find = {"keyType": 0, "coordinatorKeys": ["dg"]}
    first = request(server.bootstrap, 10, 4, find)["coordinators"][0]
    assert first["errorCode"] == 15  # __consumer_offsets is being made, as Kafka answers
    assert request(server.bootstrap, 10, 4, find)["coordinators"][0]["errorCode"] == 0
    r = request(server.bootstrap, 8, 8, commit)  # a simple group's commit
    assert r["topics"][0]["partitions"][0]["errorCode"] == 0
    r = request(server.bootstrap, 8, 9, {**commit, "generationIdOrMemberEpoch": 3})
    assert r["topics"][0]["partitions"][0]["errorCode"] == 25  # UNKNOWN_MEMBER_ID
    r = request(server.bootstrap, 8, 9, {**commit, "groupId": "nope",
                                         "generationIdOrMemberEpoch": 3})
    assert r["topics"][0]["partitions"][0]["errorCode"] == 69  # GROUP_ID_NOT_FOUND
    listed = request(server.bootstrap, 16, 5, {"statesFilter": [], "typesFilter": []})
    assert {g["groupId"]: g["groupState"] for g in listed["groups"]}["dg"] == "Empty"
    r = request(server.bootstrap, 47, 0, {"groupId": "dg", "topics": [
        {"name": topic, "partitions": [{"partitionIndex": 0}]}]})
    assert r["errorCode"] == 0 and r["topics"][0]["partitions"][0]["errorCode"] == 0
    r = request(server.bootstrap, 9, 8, {"groups": [{"groupId": "dg", "topics": None}],
                                         "requireStable": False})
    assert r["groups"][0]["topics"] == []
    r = request(server.bootstrap, 42, 2, {"groupsNames": ["dg", "never-was"]})
    assert [(x["groupId"], x["errorCode"]) for x in r["results"]] == [("dg", 0),
                                                                       ("never-was", 69)]
    listed = request(server.bootstrap, 16, 5, {"statesFilter": [], "typesFilter": []})
    assert "dg" not in {g["groupId"] for g in listed["groups"]}
