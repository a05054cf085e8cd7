"""Real Kafka clients against ``kafkafs serve``: kcat (librdkafka 2.0), confluent-kafka
(librdkafka 2.16), kafka-python and aiokafka produce, fetch, commit and administer through
the wire protocol, and what they wrote is Kafka's own log format (read back by
``kafkafs consume`` and the other clients)."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import threading
import time
import uuid

import pytest

from netutil import Server

kcat_bin = shutil.which("kcat") or shutil.which("kafkacat")
needs_kcat = pytest.mark.skipif(kcat_bin is None, reason="kcat is not installed")

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    d = tmp_path_factory.mktemp("net") / "logs"
    d.mkdir()
    s = Server(d).start()
    yield s
    assert s.stop() == 0, s.log()


def topic_name(prefix="t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def kcat(server, *args, input=None, timeout=30) -> subprocess.CompletedProcess:
    return subprocess.run([kcat_bin, "-b", server.bootstrap, *args], input=input,
                          capture_output=True, timeout=timeout)


def consume_all(server, topic, n, group=None, **conf):
    c = ck.Consumer({"bootstrap.servers": server.bootstrap,
                     "group.id": group or f"g-{uuid.uuid4().hex[:6]}",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False, **conf})
    c.subscribe([topic])
    out = []
    deadline = time.monotonic() + 30
    while len(out) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        assert m.error() is None, m.error()
        out.append(m)
    return c, out


@needs_kcat
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_kcat_produce_then_consume(server, codec):
    topic = topic_name(codec)
    lines = "".join(f"k{i}:value {i}\n" for i in range(300))
    p = kcat(server, "-P", "-t", topic, "-K:", "-z", codec, input=lines.encode())
    assert p.returncode == 0, p.stderr
    c = kcat(server, "-C", "-t", topic, "-e", "-f", "%o %k %s\n")
    assert c.returncode == 0, c.stderr
    got = c.stdout.decode().splitlines()
    assert got == [f"{i} k{i} value {i}" for i in range(300)]


def test_confluent_idempotent_producer_and_group(server):
    topic = topic_name("idem")
    a = AdminClient({"bootstrap.servers": server.bootstrap})
    a.create_topics([NewTopic(topic, 3, 1)])[topic].result(10)
    p = ck.Producer({"bootstrap.servers": server.bootstrap, "enable.idempotence": True,
                     "compression.type": "zstd", "linger.ms": 5})
    for i in range(600):
        p.produce(topic, key=str(i % 11).encode(), value=f"v{i}".encode())
    assert p.flush(20) == 0
    c, got = consume_all(server, topic, 600, group="g-idem")
    assert sorted(m.value() for m in got) == sorted(f"v{i}".encode() for i in range(600))
    per_key_partition = {}
    for m in got:
        per_key_partition.setdefault(m.key(), set()).add(m.partition())
    assert all(len(s) == 1 for s in per_key_partition.values())  # murmur2 partitioner
    c.commit(asynchronous=False)
    committed = c.committed([ck.TopicPartition(topic, p) for p in range(3)], timeout=10)
    assert sum(tp.offset for tp in committed) == 600
    c.close()
    groups = a.list_consumer_groups().result(10).valid
    assert "g-idem" in {g.group_id for g in groups}


def test_confluent_admin(server):
    a = AdminClient({"bootstrap.servers": server.bootstrap})
    topic = topic_name("adm")
    fs = a.create_topics([NewTopic(topic, 2, 1, config={"retention.ms": "3600000"}),
                          NewTopic("bad name!", 1, 1), NewTopic(topic_name(), 1, 3)])
    results = {}
    for t, f in fs.items():
        try:
            f.result(10)
            results[t] = None
        except ck.KafkaException as exc:
            results[t] = exc.args[0].code()
    assert results[topic] is None
    assert results["bad name!"] == ck.KafkaError.TOPIC_EXCEPTION
    assert ck.KafkaError.INVALID_REPLICATION_FACTOR in results.values()
    a.create_partitions([NewPartitions(topic, 4)])[topic].result(10)
    assert len(a.list_topics(timeout=10).topics[topic].partitions) == 4
    from confluent_kafka.admin import ConfigResource
    r = ConfigResource("topic", topic)
    cfg = a.describe_configs([r])[r].result(10)
    assert cfg["retention.ms"].value == "3600000"
    assert cfg["retention.ms"].source == 1  # DYNAMIC_TOPIC_CONFIG
    assert cfg["cleanup.policy"].value == "delete"
    a.delete_topics([topic])[topic].result(10)
    assert topic not in a.list_topics(timeout=10).topics


def test_kafka_python_producer_consumer_group(server):
    kafka = pytest.importorskip("kafka")
    topic = topic_name("kp")
    prod = kafka.KafkaProducer(bootstrap_servers=server.bootstrap, acks="all",
                               compression_type="gzip", enable_idempotence=True)
    for i in range(200):
        prod.send(topic, key=b"k%d" % (i % 5), value=b"kp %d" % i)
    prod.flush(20)
    prod.close()
    cons = kafka.KafkaConsumer(topic, bootstrap_servers=server.bootstrap, group_id="g-kp",
                               auto_offset_reset="earliest", enable_auto_commit=False,
                               consumer_timeout_ms=15000)
    got = []
    for m in cons:
        got.append(m.value)
        if len(got) == 200:
            break
    assert got == [b"kp %d" % i for i in range(200)]
    cons.commit()
    tp = kafka.TopicPartition(topic, 0)
    assert cons.committed(tp) == 200
    cons.close()
    admin = kafka.KafkaAdminClient(bootstrap_servers=server.bootstrap)
    listed = admin.list_groups()
    assert "g-kp" in str(listed), listed
    offsets = admin.list_group_offsets("g-kp")["g-kp"]
    assert offsets[tp].offset == 200, offsets
    described = admin.describe_groups(["g-kp"])["g-kp"]
    assert (described["group_state"], described["protocol_type"]) == ("Empty", "consumer")
    admin.close()


def test_aiokafka_producer_consumer(server):
    aiokafka = pytest.importorskip("aiokafka")
    topic = topic_name("aio")

    async def run():
        prod = aiokafka.AIOKafkaProducer(bootstrap_servers=server.bootstrap,
                                         enable_idempotence=True)
        await prod.start()
        try:
            for i in range(100):
                await prod.send_and_wait(topic, b"aio %d" % i, key=b"k")
        finally:
            await prod.stop()
        cons = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=server.bootstrap,
                                         group_id="g-aio", auto_offset_reset="earliest",
                                         enable_auto_commit=False)
        await cons.start()
        try:
            got = []
            async for m in cons:
                got.append(m.value)
                if len(got) == 100:
                    break
            await cons.commit()
            return got, await cons.committed(aiokafka.TopicPartition(topic, 0))
        finally:
            await cons.stop()

    got, committed = asyncio.run(asyncio.wait_for(run(), 60))
    assert got == [b"aio %d" % i for i in range(100)]
    assert committed == 100


def test_long_poll_answers_on_append(server):
    """A consumer waiting in Fetch (fetch.wait.max.ms) gets a record the moment another
    client produces it, not at the end of its wait."""
    topic = topic_name("poll")
    p = ck.Producer({"bootstrap.servers": server.bootstrap})
    p.produce(topic, b"first")
    p.flush(10)
    c, got = consume_all(server, topic, 1, **{"fetch.wait.max.ms": 5000})
    assert [m.value() for m in got] == [b"first"]
    time.sleep(0.5)  # the consumer is parked in a Fetch now
    t0 = time.monotonic()
    p.produce(topic, b"second")
    p.flush(10)
    m = None
    while m is None and time.monotonic() - t0 < 10:
        m = c.poll(0.1)
    latency = time.monotonic() - t0
    assert m is not None and m.value() == b"second"
    assert latency < 2.0, latency
    c.close()


def test_consume_reads_what_clients_wrote(server, tmp_path):
    """Records produced over the network are Kafka's own log format: ``kafkafs consume``
    reads them from the log dir (the daemon holds it: a read-only open)."""
    topic = topic_name("fmt")
    p = ck.Producer({"bootstrap.servers": server.bootstrap, "compression.type": "lz4",
                     "enable.idempotence": True})
    for i in range(50):
        p.produce(topic, key=b"k%d" % i, value=json.dumps({"i": i}).encode(),
                  headers=[("h", b"x")])
    p.flush(10)
    out = subprocess.run([sys.executable, "-m", "kafkafs", "consume", "--log-dirs",
                          server.log_dir, "--topic", topic, "--from-beginning",
                          "--property", "print.key=true", "--timeout-ms", "2000"],
                         capture_output=True, timeout=60)
    lines = out.stdout.decode().splitlines()
    assert lines == [f"k{i}\t" + json.dumps({"i": i}) for i in range(50)], out.stderr


@needs_kcat
def test_kcat_metadata_headers_timestamps_and_groups(server):
    topic = topic_name("kc")
    lines = "".join(f"line {i}\n" for i in range(10))
    p = kcat(server, "-P", "-t", topic, "-H", "origin=kcat", "-H", "n=1", input=lines.encode())
    assert p.returncode == 0, p.stderr
    meta = kcat(server, "-L", "-t", topic)
    assert f'topic "{topic}" with 1 partitions' in meta.stdout.decode(), meta.stdout
    assert "leader 0, replicas: 0, isrs: 0" in meta.stdout.decode()
    c = kcat(server, "-C", "-t", topic, "-e", "-f", "%o %h %s\n")
    assert c.stdout.decode().splitlines()[0] == "0 origin=kcat,n=1 line 0"
    # offsets by time (-Q) and consuming from a timestamp (-o s@T)
    ts = [int(x) for x in kcat(server, "-C", "-t", topic, "-e", "-f", "%T\n")
          .stdout.decode().split()]
    q = kcat(server, "-Q", "-t", f"{topic}:0:{ts[3]}")
    assert f"{topic} [0] offset " in q.stdout.decode(), q.stdout + q.stderr
    offset = int(q.stdout.decode().split("offset")[1].split()[0])
    assert ts[offset] >= ts[3] and (offset == 0 or ts[offset - 1] < ts[3])
    c = kcat(server, "-C", "-t", topic, "-o", f"s@{ts[offset]}", "-e", "-f", "%o\n")
    assert int(c.stdout.decode().split()[0]) == offset
    # a balanced consumer group (-G): every record once, then the committed offsets
    g = subprocess.Popen([kcat_bin, "-b", server.bootstrap, "-u", "-G", "kcat-group", "-o",
                          "beginning", "-f", "%o %s\n", topic], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 10 and time.monotonic() < deadline:
        got.append(g.stdout.readline().decode().strip())
    g.terminate()
    g.wait(10)
    assert got == [f"{i} line {i}" for i in range(10)]


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_on_disk_bytes_read_by_kafka_python_and_checked(tmp_path, codec):
    """What network produces leave in the segment files is Kafka's format: kafka-python's
    own record reader decodes every batch (CRC checked), and ``kafkafs check`` finds
    nothing to say after the daemon stopped."""
    from kafka.record import MemoryRecords

    d = tmp_path / "logs"
    d.mkdir()
    s = Server(d).start()
    try:
        p = ck.Producer({"bootstrap.servers": s.bootstrap, "compression.type": codec,
                         "enable.idempotence": True, "linger.ms": 20})
        for i in range(500):
            p.produce("disk", key=b"k%d" % (i % 9), value=b"value %d" % i,
                      headers=[("i", b"%d" % i)])
        assert p.flush(10) == 0
    finally:
        assert s.stop() == 0
    data = (d / "disk-0" / "00000000000000000000.log").read_bytes()
    records = MemoryRecords(data)
    values, offsets = [], []
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        assert batch.producer_id >= 0 and batch.compression_type == \
            {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}[codec]
        for r in batch:
            values.append(r.value)
            offsets.append(r.offset)
            assert dict(r.headers)["i"] == r.value.split()[1]
    assert values == [b"value %d" % i for i in range(500)]
    assert offsets == list(range(500))
    check = subprocess.run([sys.executable, "-m", "kafkafs", "check", "--log-dirs", str(d)],
                           capture_output=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr


def test_a_three_member_group_survives_a_killed_member(server, tmp_path):
    """Three librdkafka consumers share 6 partitions; one is killed (SIGKILL, no leave);
    the others take its partitions after its session timeout and resume from the committed
    offsets: every record is seen, and none twice but those after the dead one's last
    commit."""
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = topic_name("g3")
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic(topic, 6, 1)])[topic].result(10)
    p = ck.Producer({"bootstrap.servers": server.bootstrap})
    for i in range(600):
        p.produce(topic, value=b"%d" % i, partition=i % 6)
    assert p.flush(10) == 0
    script = tmp_path / "member.py"
    script.write_text(f"""
import sys, confluent_kafka as ck
c = ck.Consumer({{"bootstrap.servers": "{server.bootstrap}", "group.id": "three",
                 "auto.offset.reset": "earliest", "enable.auto.commit": False,
                 "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                 "max.poll.interval.ms": 60000}})
c.subscribe(["{topic}"])
n = 0
while True:
    m = c.poll(0.2)
    if m is None or m.error():
        continue
    print(m.partition(), m.offset(), flush=True)
    n += 1
    if n % 10 == 0:
        c.commit(asynchronous=False)
    if len(sys.argv) > 1 and n >= int(sys.argv[1]):
        import time; time.sleep(3600)
""")
    seen: dict[tuple[int, int], int] = {}
    lock = threading.Lock()
    procs = []

    def reader(proc):
        for line in proc.stdout:
            part, off = map(int, line.split())
            with lock:
                seen[(part, off)] = seen.get((part, off), 0) + 1

    # the victim consumes 25 records then hangs (still heartbeating) until killed
    for args in (["25"], [], []):
        proc = subprocess.Popen([sys.executable, str(script), *args], stdout=subprocess.PIPE,
                                text=True)
        procs.append(proc)
        threading.Thread(target=reader, args=(proc,), daemon=True).start()
        time.sleep(1)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with lock:
                if len(seen) >= 300:
                    break
            time.sleep(0.2)
        procs[0].kill()  # no LeaveGroup
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with lock:
                if len(seen) == 600:
                    break
            time.sleep(0.2)
        with lock:
            assert len(seen) == 600, f"only {len(seen)} of 600 records seen"
            twice = [k for k, n in seen.items() if n > 1]
        assert len(twice) <= 25  # at most what the victim read past its last commit
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(10)


def test_parked_requests_give_their_io_place_up(tmp_path):
    """With ``num.io.threads=1`` a handler runs one at a time, yet consumers parked in long
    polls and members parked in a rebalance do not hold that place: a producer's acks come
    at once and a two-member group forms."""
    d = tmp_path / "logs"
    d.mkdir()
    s = Server(d, overrides=["num.io.threads=1", "group.initial.rebalance.delay.ms=0"]).start()
    try:
        topic = topic_name("io")
        admin = AdminClient({"bootstrap.servers": s.bootstrap})
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(10)
        parked = []
        for i in range(2):  # long polls of 5 s on empty partitions
            c = ck.Consumer({"bootstrap.servers": s.bootstrap, "group.id": f"x{i}",
                             "fetch.wait.max.ms": 5000, "fetch.min.bytes": 1 << 20,
                             "auto.offset.reset": "earliest"})
            c.assign([ck.TopicPartition(topic, i, 0)])
            c.poll(0.5)
            parked.append(c)
        members = [ck.Consumer({"bootstrap.servers": s.bootstrap, "group.id": "both",
                                "auto.offset.reset": "earliest",
                                "session.timeout.ms": 6000}) for _ in range(2)]
        for m in members:
            m.subscribe([topic])
        p = ck.Producer({"bootstrap.servers": s.bootstrap, "linger.ms": 0})
        acks = []
        for i in range(20):
            t0 = time.monotonic()
            p.produce(topic, b"r%d" % i, partition=i % 2)
            assert p.flush(10) == 0
            acks.append(time.monotonic() - t0)
        assert max(acks) < 1.0, acks
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all(m.assignment() for m in members):
            for m in members:
                m.poll(0.2)
        assert sorted(tp.partition for m in members for tp in m.assignment()) == [0, 1]
        for c in parked + members:
            c.close()
    finally:
        assert s.stop() == 0, s.log()
