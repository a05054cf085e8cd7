"""Bad clients lose nothing and take nothing down: clients that stop reading, half-sent
requests, hundreds of idle connections, and a daemon killed with SIGKILL while it
acknowledges produces under ``log.flush.interval.messages=1`` (every acknowledged record is
there after recovery)."""

from __future__ import annotations

import signal
import socket
import struct
import threading
import time

import pytest

from netutil import Server, frame, request

ck = pytest.importorskip("confluent_kafka")


@pytest.fixture
def server(tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    s = Server(d).start()
    yield s
    s.stop()


def _api_versions_ok(server) -> bool:
    r = request(server.bootstrap, 18, 0, {}, timeout=5)
    return r is not None and r["errorCode"] == 0


def _produce_some(server, topic, n=200):
    p = ck.Producer({"bootstrap.servers": server.bootstrap})
    for i in range(n):
        p.produce(topic, b"v" * 1000)
    assert p.flush(10) == 0


def test_a_client_that_stops_reading_blocks_only_itself(server):
    _produce_some(server, "big", 2000)
    host, port = server.bootstrap.split(":")
    greedy = socket.create_connection((host, int(port)))
    greedy.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    fetch = {"replicaId": -1, "maxWaitMs": 0, "minBytes": 1, "maxBytes": 1 << 24,
             "isolationLevel": 0, "sessionId": 0, "sessionEpoch": -1,
             "topics": [{"topic": "big", "partitions": [
                 {"partition": 0, "currentLeaderEpoch": -1, "fetchOffset": 0,
                  "lastFetchedEpoch": -1, "logStartOffset": -1,
                  "partitionMaxBytes": 1 << 24}]}], "forgottenTopicsData": [], "rackId": ""}
    for i in range(50):  # megabytes of answers it never reads
        greedy.sendall(frame(1, 12, fetch, correlation_id=i))
    time.sleep(0.5)
    t0 = time.monotonic()
    assert _api_versions_ok(server)
    _produce_some(server, "other", 10)
    assert time.monotonic() - t0 < 5
    greedy.close()
    assert _api_versions_ok(server)


def test_half_sent_requests_and_many_idle_connections(server):
    host, port = server.bootstrap.split(":")
    idle = [socket.create_connection((host, int(port))) for _ in range(500)]
    half = socket.create_connection((host, int(port)))
    data = frame(18, 3, {"clientSoftwareName": "x", "clientSoftwareVersion": "1"})
    half.sendall(data[:len(data) // 2])
    half.close()  # killed mid-request
    cut = socket.create_connection((host, int(port)))
    cut.sendall(struct.pack(">i", 1000) + b"\x00" * 10)  # promises more than it sends
    t0 = time.monotonic()
    assert _api_versions_ok(server)
    _produce_some(server, "alive", 10)
    assert time.monotonic() - t0 < 5
    for s in idle:
        s.close()
    cut.close()
    assert server.proc.poll() is None


def test_kill9_during_acknowledged_produces_loses_nothing(tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    s = Server(d, overrides=["log.flush.interval.messages=1"]).start()
    acked: list[bytes] = []
    lock = threading.Lock()
    stop = threading.Event()

    def produce():
        p = ck.Producer({"bootstrap.servers": s.bootstrap, "linger.ms": 1,
                         "message.timeout.ms": 3000, "retries": 0})

        def done(err, msg):
            if err is None:
                with lock:
                    acked.append(msg.value())

        i = 0
        while not stop.is_set():
            p.produce("durable", b"record %08d" % i, on_delivery=done)
            i += 1
            p.poll(0)
            if i % 50 == 0:
                time.sleep(0.005)
        p.flush(5)

    t = threading.Thread(target=produce)
    t.start()
    deadline = time.monotonic() + 20
    while len(acked) < 500 and time.monotonic() < deadline:
        time.sleep(0.05)
    s.proc.send_signal(signal.SIGKILL)
    s.proc.wait(10)
    s._out.close()
    s.proc = None
    stop.set()
    t.join(30)
    with lock:
        acknowledged = list(acked)
    assert len(acknowledged) >= 500
    s2 = Server(d).start()  # recovery is the loader's
    try:
        c = ck.Consumer({"bootstrap.servers": s2.bootstrap, "group.id": "after",
                         "auto.offset.reset": "earliest"})
        c.subscribe(["durable"])
        got = set()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not set(acknowledged) <= got:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.add(m.value())
        c.close()
        missing = set(acknowledged) - got
        assert not missing, f"{len(missing)} acknowledged records lost, e.g. {min(missing)}"
    finally:
        assert s2.stop() == 0


def test_a_read_only_daemon_refuses_produce_for_good(tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    s = Server(d).start()
    _produce_some(s, "ro", 5)
    assert s.stop() == 0
    ro = Server(d, extra_args=["--read-only"]).start()
    try:
        errors = []
        p = ck.Producer({"bootstrap.servers": ro.bootstrap, "message.timeout.ms": 10000})
        p.produce("ro", b"x", on_delivery=lambda e, m: errors.append(e))
        t0 = time.monotonic()
        p.flush(15)
        assert errors and errors[0].code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert time.monotonic() - t0 < 5  # refused, not retried until the timeout
        c = ck.Consumer({"bootstrap.servers": ro.bootstrap, "group.id": "ro",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.assign([ck.TopicPartition("ro", 0, 0)])
        got = []
        deadline = time.monotonic() + 15
        while len(got) < 5 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append(m)
        c.close()
        assert len(got) == 5  # reading still works
        tp = ck.Producer({"bootstrap.servers": ro.bootstrap, "transactional.id": "ro-tx"})
        with pytest.raises(ck.KafkaException) as exc:
            tp.init_transactions(10)
        assert exc.value.args[0].code() == \
            ck.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    finally:
        assert ro.stop() == 0


def test_a_failure_while_sending_closes_only_that_connection(tmp_path):
    """A response whose record range cannot be sent (its segment went away between the
    read and the send) closes its connection with a line in the log; the listener serves
    the next connection (in process: the failure is injected into the sender)."""
    import trio

    from kafkafs.core.storage import StorageCore
    from kafkafs.log.config import BrokerConfig
    from kafkafs.net.broker import Broker
    from kafkafs.net.listeners import Listener
    from kafkafs.net.server import NetServer
    from kafkafs.record.schema import Deferred

    class Gone:
        log_path = "gone.log"

        def reader(self):
            raise OSError(9, "Bad file descriptor")

    class Info:
        segment, position = Gone(), 0

    async def main():
        core = StorageCore(BrokerConfig.from_properties({}).with_log_dirs([str(tmp_path)]))
        await core.startup()
        net = NetServer(Broker(core))
        import kafkafs.net.server as server_mod
        orig = server_mod.send_parts
        failed = []

        async def send_parts(stream, parts):  # the first answer: a range that is gone
            if not failed:
                failed.append(True)
                parts = [parts[0], Deferred(10, Info())]
            await orig(stream, parts)

        server_mod.send_parts = send_parts
        try:
            async with trio.open_nursery() as nursery:
                bound = await nursery.start(net.serve, [Listener("PLAINTEXT", "127.0.0.1", 0)])
                port = bound[0].port
                for expect_answer in (False, True):
                    s = await trio.open_tcp_stream("127.0.0.1", port)
                    await s.send_all(frame(18, 0, {}))
                    data = b""
                    with trio.move_on_after(5):
                        while True:
                            chunk = await s.receive_some(65536)
                            if not chunk:
                                break
                            data += chunk
                            if expect_answer and len(data) >= 4 and \
                                    len(data) >= 4 + struct.unpack(">i", data[:4])[0]:
                                break
                    await s.aclose()
                    if expect_answer:
                        assert len(data) > 4 + 4  # a whole ApiVersions answer
                nursery.cancel_scope.cancel()
        finally:
            server_mod.send_parts = orig
            await core.shutdown()

    trio.run(main)
