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
