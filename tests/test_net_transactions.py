"""The transaction coordinator with real clients: librdkafka's transactional producer
(commit, abort, offsets sent to a transaction, a new instance fencing the old, a
transaction past its timeout, a daemon killed mid-transaction), what read_committed and
read_uncommitted consumers see, the ``__transaction_state`` records ``kafkafs transactions``
reads back, and the refusals Kafka answers (raw requests: no client sends them)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
from conftest import ROOT

from kafkafs.record import encode_batch
from netutil import Server, request

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


@pytest.fixture
def server(tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    s = Server(d, overrides=[
        "transaction.abort.timed.out.transaction.cleanup.interval.ms=300"])
    s.start()
    yield s
    s.stop()


def _topic(server, name=None, partitions=2):
    name = name or f"tx-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)
    return name


def _producer(server, tid, **conf):
    return ck.Producer({"bootstrap.servers": server.bootstrap, "transactional.id": tid,
                        **conf})


def _consume(server, topic, isolation, want, timeout=20, group=None):
    """The values a consumer of ``isolation`` reads from the beginning, once it has
    ``want`` of them or ``timeout`` s passed (then whatever came)."""
    c = ck.Consumer({"bootstrap.servers": server.bootstrap,
                     "group.id": group or f"read-{uuid.uuid4().hex[:6]}",
                     "auto.offset.reset": "earliest", "isolation.level": isolation,
                     "enable.auto.commit": False})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(got) < want:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    return sorted(got)


def _cli(command, *args, log_dir):
    return subprocess.run([sys.executable, "-m", "kafkafs", command, "--log-dirs", str(log_dir),
                           *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)


def test_commit_and_abort_as_read_committed_and_read_uncommitted_see_them(server):
    topic = _topic(server)
    p = _producer(server, "tx-a")
    p.init_transactions(20)
    p.begin_transaction()
    for i in range(6):
        p.produce(topic, value=b"c%d" % i, partition=i % 2)
    p.commit_transaction(20)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, value=b"a%d" % i, partition=i % 2)
    p.flush(10)
    p.abort_transaction(20)
    p.begin_transaction()
    p.produce(topic, value=b"last", partition=1)
    p.commit_transaction(20)
    committed = sorted([b"c%d" % i for i in range(6)] + [b"last"])
    assert _consume(server, topic, "read_committed", 7) == committed
    assert _consume(server, topic, "read_uncommitted", 11) == \
        sorted(committed + [b"a%d" % i for i in range(4)])
    # nothing more comes to read_committed: the aborted records stay out
    assert _consume(server, topic, "read_committed", 8, timeout=2) == committed
    assert server.stop() == 0
    out = _cli("transactions", "describe", "--transactional-id", "tx-a",
               log_dir=server.log_dir)
    assert out.returncode == 0, out.stderr
    assert "CompleteCommit" in out.stdout
    check = subprocess.run([sys.executable, "-m", "kafkafs", "check", server.log_dir],
                           capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr


def test_offsets_sent_to_a_transaction_commit_with_it_and_not_with_an_abort(server):
    src, dst = _topic(server, partitions=1), _topic(server, partitions=1)
    feed = ck.Producer({"bootstrap.servers": server.bootstrap})
    for i in range(10):
        feed.produce(src, value=b"%d" % i)
    assert feed.flush(10) == 0
    c = ck.Consumer({"bootstrap.servers": server.bootstrap, "group.id": "eos",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "isolation.level": "read_committed"})
    c.subscribe([src])
    p = _producer(server, "tx-eos")
    p.init_transactions(20)

    def step(n, commit):
        got = []
        deadline = time.monotonic() + 20
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append(m)
        assert len(got) == n
        p.begin_transaction()
        for m in got:
            p.produce(dst, value=b"out-" + m.value())
        p.send_offsets_to_transaction(c.position(c.assignment()),
                                      c.consumer_group_metadata(), 20)
        (p.commit_transaction if commit else p.abort_transaction)(20)

    step(4, True)
    assert [tp.offset for tp in c.committed(c.assignment(), 10)] == [4]
    step(3, False)  # aborted: the group's offset stays where the commit left it
    assert [tp.offset for tp in c.committed(c.assignment(), 10)] == [4]
    c.close()
    assert _consume(server, dst, "read_committed", 4) == sorted(
        b"out-%d" % i for i in range(4))


def test_a_new_instance_fences_the_old_and_its_open_transaction_is_aborted(server):
    topic = _topic(server, partitions=1)
    old = _producer(server, "tx-f")
    old.init_transactions(20)
    old.begin_transaction()
    old.produce(topic, value=b"from-the-old-one")
    old.flush(10)
    new = _producer(server, "tx-f")
    new.init_transactions(30)  # aborts the old one's transaction under the next epoch
    new.begin_transaction()
    new.produce(topic, value=b"from-the-new-one")
    new.commit_transaction(20)
    with pytest.raises(ck.KafkaException) as exc:
        old.commit_transaction(20)
    assert exc.value.args[0].fatal() or "fenced" in str(exc.value).lower()
    assert _consume(server, topic, "read_committed", 1) == [b"from-the-new-one"]
    assert _consume(server, topic, "read_uncommitted", 2) == [b"from-the-new-one",
                                                               b"from-the-old-one"]


def test_a_transaction_past_its_timeout_is_aborted_and_stops_pinning_the_lso(server):
    topic = _topic(server, partitions=1)
    p = _producer(server, "tx-t", **{"transaction.timeout.ms": 2000})
    p.init_transactions(20)
    p.begin_transaction()
    p.produce(topic, value=b"never-committed")
    p.flush(10)
    t0 = time.monotonic()
    plain = ck.Producer({"bootstrap.servers": server.bootstrap})
    plain.produce(topic, value=b"after")
    assert plain.flush(10) == 0
    assert _consume(server, topic, "read_committed", 1, timeout=1) == []  # pinned
    got = _consume(server, topic, "read_committed", 1, timeout=20)
    assert got == [b"after"]
    assert 1.5 < time.monotonic() - t0 < 20
    assert "past its timeout" in server.log()
    with pytest.raises(ck.KafkaException):  # its epoch was bumped: fenced
        p.commit_transaction(10)


def test_a_daemon_killed_mid_transaction_comes_back_with_it_open(tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    s = Server(d).start()
    try:
        topic = _topic(s, partitions=1)
        p = _producer(s, "tx-k")
        p.init_transactions(20)
        p.begin_transaction()
        p.produce(topic, value=b"in-flight")
        p.flush(10)
        s.proc.send_signal(signal.SIGKILL)
        s.proc.wait(10)
        s.stop()
        del p
        s = Server(d).start()
        # the id's Ongoing transaction was replayed from __transaction_state: a new
        # instance aborts it (CONCURRENT_TRANSACTIONS meanwhile, which librdkafka retries)
        q = _producer(s, "tx-k")
        q.init_transactions(30)
        q.begin_transaction()
        q.produce(topic, value=b"after-restart")
        q.commit_transaction(20)
        assert _consume(s, topic, "read_committed", 1) == [b"after-restart"]
        assert _consume(s, topic, "read_uncommitted", 2) == [b"after-restart", b"in-flight"]
    finally:
        s.stop()
    out = _cli("transactions", "describe", "--transactional-id", "tx-k", log_dir=d)
    assert out.returncode == 0, out.stderr
    assert "CompleteCommit" in out.stdout


def _init(server, tid, timeout_ms=60000, v=4):
    return request(server.bootstrap, 22, v, {"transactionalId": tid,
                                             "transactionTimeoutMs": timeout_ms,
                                             "producerId": -1, "producerEpoch": -1})


def _add(server, tid, pid, epoch, topic, partitions, v=3):
    r = request(server.bootstrap, 24, v, {
        "v3AndBelowTransactionalId": tid, "v3AndBelowProducerId": pid,
        "v3AndBelowProducerEpoch": epoch,
        "v3AndBelowTopics": [{"name": topic, "partitions": partitions}]})
    return {p["partitionIndex"]: p["partitionErrorCode"]
            for t in r["resultsByTopicV3AndBelow"] for p in t["resultsByPartition"]}


def _end(server, tid, pid, epoch, commit, v=3):
    return request(server.bootstrap, 26, v, {"transactionalId": tid, "producerId": pid,
                                             "producerEpoch": epoch,
                                             "committed": commit})["errorCode"]


def _produce(server, topic, partition, data, tid):
    r = request(server.bootstrap, 0, 9, {
        "transactionalId": tid, "acks": -1, "timeoutMs": 5000,
        "topicData": [{"name": topic, "partitionData": [{"index": partition,
                                                         "records": data}]}]})
    return r["responses"][0]["partitionResponses"][0]


def _txn_batch(pid, epoch, seq, value=b"v"):
    return bytes(encode_batch([(int(time.time() * 1000), None, value, ())], producer_id=pid,
                              producer_epoch=epoch, base_sequence=seq, is_transactional=True))


def test_refusals_as_kafka_answers_them(server):
    topic = _topic(server)
    assert _init(server, "r", timeout_ms=900001)["errorCode"] == 50  # over the max
    assert _init(server, "r", timeout_ms=0)["errorCode"] == 50
    assert _init(server, "")["errorCode"] == 42
    first = _init(server, "r")
    assert first["errorCode"] == 0 and first["producerEpoch"] == 0
    again = _init(server, "r")  # the next instance: the same id, the next epoch
    assert (again["producerId"], again["producerEpoch"]) == (first["producerId"], 1)
    pid = first["producerId"]
    assert _add(server, "nobody", pid, 1, topic, [0]) == {0: 49}  # INVALID_PRODUCER_ID_MAPPING
    assert _add(server, "r", pid + 1, 1, topic, [0]) == {0: 49}
    assert _add(server, "r", pid, 0, topic, [0]) == {0: 90}  # PRODUCER_FENCED
    assert _add(server, "r", pid, 0, topic, [0], v=1) == {0: 47}  # (before v2)
    assert _add(server, "r", pid, 1, topic, [0, 7]) == {0: 55, 7: 3}  # NOT_ATTEMPTED
    assert _end(server, "r", pid, 1, True) == 48  # nothing begun: INVALID_TXN_STATE
    # a transactional batch to a partition outside the transaction
    assert _produce(server, topic, 0, _txn_batch(pid, 1, 0), "r")["errorCode"] == 48
    assert _add(server, "r", pid, 1, topic, [0]) == {0: 0}
    assert _produce(server, topic, 1, _txn_batch(pid, 1, 0), "r")["errorCode"] == 48
    ok = _produce(server, topic, 0, _txn_batch(pid, 1, 0), "r")
    assert ok["errorCode"] == 0
    assert _produce(server, topic, 0, _txn_batch(pid, 0, 1), "r")["errorCode"] == 47
    listed = request(server.bootstrap, 66, 1, {"stateFilters": ["Ongoing"],
                                               "producerIdFilters": [], "durationFilter": -1})
    assert [(t["transactionalId"], t["transactionState"])
            for t in listed["transactionStates"]] == [("r", "Ongoing")]
    def running_longer_than(ms):
        r = request(server.bootstrap, 66, 1, {"stateFilters": ["Ongoing", "Bogus"],
                                               "producerIdFilters": [pid],
                                               "durationFilter": ms})
        assert r["unknownStateFilters"] == ["Bogus"]
        return [t["transactionalId"] for t in r["transactionStates"]]

    assert running_longer_than(0) == ["r"]
    assert running_longer_than(10**9) == []
    described = request(server.bootstrap, 65, 0, {"transactionalIds": ["r", "nobody"]})
    r, nobody = described["transactionStates"]
    assert (r["transactionState"], r["producerId"], r["producerEpoch"]) == ("Ongoing", pid, 1)
    assert r["topics"] == [{"topic": topic, "partitions": [0]}]
    assert nobody["errorCode"] == 105  # TRANSACTIONAL_ID_NOT_FOUND
    producers = request(server.bootstrap, 61, 0, {"topics": [
        {"name": topic, "partitionIndexes": [0, 1, 9]}]})["topics"][0]["partitions"]
    assert [p["errorCode"] for p in producers] == [0, 0, 3]
    (active,) = producers[0]["activeProducers"]
    assert (active["producerId"], active["producerEpoch"], active["lastSequence"],
            active["currentTxnStartOffset"]) == (pid, 1, 0, 0)
    assert producers[1]["activeProducers"] == []
    assert _end(server, "r", pid, 0, True) == 90
    assert _end(server, "r", pid, 1, False) == 0
    assert _end(server, "r", pid, 1, False) == 0  # a retry of the same end
    assert _end(server, "r", pid, 1, True) == 48  # the other end: INVALID_TXN_STATE
    lso = request(server.bootstrap, 2, 7, {"replicaId": -1, "isolationLevel": 1, "topics": [
        {"name": topic, "partitions": [{"partitionIndex": 0, "currentLeaderEpoch": -1,
                                        "timestamp": -1}]}]})
    assert lso["topics"][0]["partitions"][0]["offset"] == 2  # the batch and its marker


def test_transaction_records_are_what_kafka_writes(server):
    topic = _topic(server, partitions=1)
    p = _producer(server, "tx-rec")
    p.init_transactions(20)
    p.begin_transaction()
    p.produce(topic, value=b"x")
    p.commit_transaction(20)
    assert server.stop() == 0
    out = subprocess.run(
        [sys.executable, "-m", "kafkafs", "dump", "--transaction-log-decoder", "--files",
         *sorted(os.path.join(server.log_dir, d, f) for d in os.listdir(server.log_dir)
                 if d.startswith("__transaction_state-")
                 for f in os.listdir(os.path.join(server.log_dir, d)) if f.endswith(".log")
                 and os.path.getsize(os.path.join(server.log_dir, d, f)))],
        capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    values = [json.loads(line.split(" payload: ")[1])["data"]
              for line in out.stdout.splitlines() if " payload: " in line]
    # Empty, Ongoing, PrepareCommit, CompleteCommit -- as TransactionLog.valueToBytes
    # writes them: no partitions (null) when Empty, the set while open, [] once complete
    assert [(v["transactionStatus"], v["transactionPartitions"]) for v in values] == [
        (0, None), (1, [{"topic": topic, "partitionIds": [0]}]),
        (2, [{"topic": topic, "partitionIds": [0]}]), (4, [])]
    assert {(v["producerId"], v["producerEpoch"], v["transactionTimeoutMs"])
            for v in values} == {(values[0]["producerId"], 0, 60000)}
    start = values[1]["transactionStartTimestampMs"]
    assert values[0]["transactionStartTimestampMs"] == -1 and start > 0
    assert [v["transactionStartTimestampMs"] for v in values[1:]] == [start] * 3


def _offset_fetch(server, group, topic, stable):
    r = request(server.bootstrap, 9, 7, {"groupId": group, "topics": [
        {"name": topic, "partitionIndexes": [0]}], "requireStable": stable})
    p = r["topics"][0]["partitions"][0]
    return p["errorCode"], p["committedOffset"]


def test_transactional_offsets_are_pending_until_the_marker(server):
    topic = _topic(server, partitions=1)
    pid = _init(server, "o")["producerId"]
    commit = {"transactionalId": "o", "groupId": "og", "producerId": pid, "producerEpoch": 0,
              "generationId": -1, "memberId": "", "groupInstanceId": None,
              "topics": [{"name": topic, "partitions": [
                  {"partitionIndex": 0, "committedOffset": 17, "committedLeaderEpoch": -1,
                   "committedMetadata": "m"}]}]}

    def txn_commit():
        r = request(server.bootstrap, 28, 3, commit)
        return r["topics"][0]["partitions"][0]["errorCode"]

    for _ in range(50):  # (as a client does first: __consumer_offsets is made meanwhile)
        found = request(server.bootstrap, 10, 3, {"key": "og", "keyType": 0})
        if found["errorCode"] == 0:
            break
        time.sleep(0.1)
    assert txn_commit() == 48  # the group's partition is not in the transaction yet
    added = request(server.bootstrap, 25, 3, {"transactionalId": "o", "producerId": pid,
                                              "producerEpoch": 0, "groupId": "og"})
    assert added["errorCode"] == 0
    assert txn_commit() == 0
    assert _offset_fetch(server, "og", topic, True) == (88, -1)  # UNSTABLE_OFFSET_COMMIT
    assert _offset_fetch(server, "og", topic, False) == (0, -1)  # not committed yet
    assert _end(server, "o", pid, 0, True) == 0
    assert _offset_fetch(server, "og", topic, True) == (0, 17)


def test_a_commit_a_killed_daemon_left_prepared_is_finished_when_it_starts(
        tmp_path, manager_factory):
    """A PrepareCommit record whose markers were never written (the daemon killed between
    the two): the coordinator writes them when it starts, then CompleteCommit, and the
    transaction's records reach read_committed readers."""
    from kafkafs.log.groups import coordinator_partition
    from kafkafs.log.txn_state import TRANSACTION_STATE, Txn, encode_txn_record

    now = int(time.time() * 1000)
    m = manager_factory()
    m.create_topic("data", 1)
    m.create_topic(TRANSACTION_STATE, 4, {"cleanup.policy": "compact"})
    m.get_log("data", 0).append_encoded(bytearray(encode_batch(
        [(now, None, b"prepared", ())], producer_id=7, producer_epoch=3, base_sequence=0,
        is_transactional=True)))
    key, value = encode_txn_record(Txn("tx-p", 7, 3, 60000, "PrepareCommit",
                                       (("data", 0),), now, now, -1))
    m.get_log(TRANSACTION_STATE, coordinator_partition("tx-p", 4)).append(
        [(now, key, value, ())])
    m.shutdown()
    s = Server(tmp_path / "logs").start()
    try:
        assert _consume(s, "data", "read_committed", 1, timeout=15) == [b"prepared"]
    finally:
        assert s.stop() == 0
    out = _cli("transactions", "describe", "--transactional-id", "tx-p",
               log_dir=tmp_path / "logs")
    assert out.returncode == 0, out.stderr
    assert "CompleteCommit" in out.stdout and "7" in out.stdout


def test_aiokafka_and_kafka_python_transactional_producers(server):
    """aiokafka's transactional producer (commit, then an abort raised inside its
    ``transaction()`` block) and kafka-python's; read back by aiokafka's read_committed
    consumer."""
    import asyncio

    aiokafka = pytest.importorskip("aiokafka")
    kafka = pytest.importorskip("kafka")
    topic = _topic(server, partitions=1)

    async def produce():
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=server.bootstrap,
                                      transactional_id="aio-tx")
        await p.start()
        try:
            async with p.transaction():
                await p.send_and_wait(topic, b"aio-committed")
            with pytest.raises(RuntimeError):
                async with p.transaction():
                    await p.send_and_wait(topic, b"aio-aborted")
                    raise RuntimeError("abort it")
        finally:
            await p.stop()

    asyncio.run(produce())
    kp = kafka.KafkaProducer(bootstrap_servers=server.bootstrap, transactional_id="kp-tx")
    kp.init_transactions()
    kp.begin_transaction()
    kp.send(topic, b"kp-committed")
    kp.commit_transaction()
    kp.close()

    async def consume():
        c = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=server.bootstrap,
                                      isolation_level="read_committed",
                                      auto_offset_reset="earliest", enable_auto_commit=False)
        await c.start()
        try:
            got = []
            end = time.monotonic() + 15
            while len(got) < 2 and time.monotonic() < end:
                for msgs in (await c.getmany(timeout_ms=500)).values():
                    got += [m.value for m in msgs]
            return got
        finally:
            await c.stop()

    assert asyncio.run(consume()) == [b"aio-committed", b"kp-committed"]


def test_an_unused_transactional_id_expires(tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    s = Server(d, overrides=[
        "transaction.abort.timed.out.transaction.cleanup.interval.ms=200",
        "transactional.id.expiration.ms=1000",
        "transactions.remove.expired.transaction.cleanup.interval.ms=200"]).start()
    try:
        first = _init(s, "short-lived")
        assert first["errorCode"] == 0
        listed = lambda: [t["transactionalId"] for t in request(  # noqa: E731
            s.bootstrap, 66, 0, {"stateFilters": [], "producerIdFilters": []}
        )["transactionStates"]]
        assert listed() == ["short-lived"]
        deadline = time.monotonic() + 15
        while listed() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert listed() == []
        assert "Expired transactional id 'short-lived'" in s.log()
        again = _init(s, "short-lived")  # a new id: a new producer id, epoch 0
        assert again["producerEpoch"] == 0 and again["producerId"] != first["producerId"]
    finally:
        assert s.stop() == 0
    out = _cli("transactions", "list", log_dir=d)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("short-lived") == 1  # the tombstone, then the new record


def test_a_marker_that_cannot_be_written_is_written_again(tmp_path, monkeypatch):
    """The first COMMIT marker fails (ENOSPC, injected): EndTxn is answered once
    PrepareCommit is written, as Kafka answers, and the coordinator's timer writes the
    marker again, after which read_committed readers get the records."""
    d = tmp_path / "logs"
    d.mkdir()
    monkeypatch.setenv("KAFKAFS_FAIL_AT", "txn.marker#1")
    s = Server(d, overrides=[
        "transaction.abort.timed.out.transaction.cleanup.interval.ms=300"]).start()
    monkeypatch.delenv("KAFKAFS_FAIL_AT")
    try:
        topic = _topic(s, partitions=1)
        p = _producer(s, "tx-enospc")
        p.init_transactions(20)
        p.begin_transaction()
        p.produce(topic, value=b"kept")
        p.commit_transaction(20)
        assert _consume(s, topic, "read_committed", 1, timeout=15) == [b"kept"]
        assert "injected failure at txn.marker" in s.log()
    finally:
        assert s.stop() == 0


def test_a_daemon_killed_between_prepare_and_the_markers_commits_when_it_starts(
        tmp_path, monkeypatch):
    d = tmp_path / "logs"
    d.mkdir()
    monkeypatch.setenv("KAFKAFS_KILL_AT", "txn.marker#1")
    s = Server(d).start()
    monkeypatch.delenv("KAFKAFS_KILL_AT")
    try:
        topic = _topic(s, partitions=1)
        p = _producer(s, "tx-killed", **{"transaction.timeout.ms": 60000})
        p.init_transactions(20)
        p.begin_transaction()
        p.produce(topic, value=b"prepared-then-killed")
        p.flush(10)
        with pytest.raises(ck.KafkaException):
            p.commit_transaction(5)  # the daemon dies inside EndTxn
        assert s.proc.wait(10) == -signal.SIGKILL
        s.stop()
        del p
        s = Server(d).start()
        assert _consume(s, topic, "read_committed", 1, timeout=15) == [b"prepared-then-killed"]
    finally:
        s.stop()
    out = _cli("transactions", "describe", "--transactional-id", "tx-killed", log_dir=d)
    assert "CompleteCommit" in out.stdout, out.stdout + out.stderr
