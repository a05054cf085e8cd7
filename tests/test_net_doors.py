"""One storage, many doors: a mount with a Kafka listener. What one door changes every
door shows at once: a produced record in ``offset/N``, a line appended with ``>>`` in
Fetch (kcat), ``rm key/k`` as a tombstone a compacted-topic consumer sees, ``mkdir`` in
Metadata, DeleteRecords in ``messages``, a group's commits in the groups view, and
read_committed the same in Fetch, the mount, ``kafkafs consume`` and Spark's reader."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid

import pytest
from conftest import ROOT, Mount, needs_fuse, wait_for

from netutil import start_mounted

ck = pytest.importorskip("confluent_kafka")
import confluent_kafka.admin  # noqa: E402,F401  (ck.admin)
kcat_bin = shutil.which("kcat")

pytestmark = [needs_fuse, pytest.mark.mount]


@pytest.fixture
def door(tmp_path):
    m = Mount(tmp_path)
    bootstrap = start_mounted(m)
    yield m, bootstrap
    m.stop()


def _consumer(bootstrap, topic, **conf):
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False, **conf})
    c.subscribe([topic])
    return c


def _poll(c, n, timeout=20):
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None:
            assert m.error() is None, m.error()
            out.append(m)
    return out


def test_produce_then_cat(door):
    m, bootstrap = door
    p = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    os.mkdir(m.path("doors"))
    for i in range(20):
        p.produce("doors", key=b"k", value=b"net %d" % i)
    assert p.flush(10) == 0
    # acknowledged: in offset/N and messages at once
    assert open(m.path("doors", "0", "offset", "19"), "rb").read() == b"net 19"
    assert open(m.path("doors", "0", "messages"), "rb").read().splitlines() == \
        [b"net %d" % i for i in range(20)]


@pytest.mark.skipif(kcat_bin is None, reason="kcat is not installed")
def test_append_then_kcat(door):
    m, bootstrap = door
    os.mkdir(m.path("shell"))
    with open(m.path("shell", "0", "append"), "ab") as f:
        f.write(b"line one\nline two\n")
    out = subprocess.run([kcat_bin, "-b", bootstrap, "-C", "-t", "shell", "-e", "-f",
                          "%o %s\n"], capture_output=True, timeout=30)
    assert out.stdout.decode().splitlines() == ["0 line one", "1 line two"], out.stderr
    # a consumer parked in Fetch is woken by an append through the mount
    c = _consumer(bootstrap, "shell", **{"fetch.wait.max.ms": 5000})
    assert len(_poll(c, 2)) == 2
    time.sleep(0.5)
    t0 = time.monotonic()
    with open(m.path("shell", "0", "append"), "ab") as f:
        f.write(b"line three\n")
    got = _poll(c, 1, timeout=10)
    assert [x.value() for x in got] == [b"line three"]
    assert time.monotonic() - t0 < 2.0
    c.close()


def test_mkdir_then_metadata_and_rmdir(door):
    m, bootstrap = door
    os.mkdir(m.path("made-by-mkdir"))
    os.mkdir(m.path("made-by-mkdir", "1"))  # two partitions
    md = ck.admin.AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    assert len(md.topics["made-by-mkdir"].partitions) == 2
    a = ck.admin.AdminClient({"bootstrap.servers": bootstrap})
    a.create_topics([ck.admin.NewTopic("made-by-net", 3, 1)])["made-by-net"].result(10)
    assert sorted(os.listdir(m.path("made-by-net"))) >= ["0", "1", "2"]
    a.delete_topics(["made-by-net"])["made-by-net"].result(10)
    assert wait_for(lambda: not os.path.exists(m.path("made-by-net")), 5)


def test_rm_key_is_a_tombstone_for_a_consumer(door):
    m, bootstrap = door
    os.mkdir(m.path("kv"))
    with open(m.path("kv", "config"), "a") as f:
        f.write("cleanup.policy=compact\n")
    p = ck.Producer({"bootstrap.servers": bootstrap})
    p.produce("kv", key=b"user1", value=b"alice")
    p.produce("kv", key=b"user2", value=b"bob")
    assert p.flush(10) == 0
    assert wait_for(lambda: os.path.exists(m.path("kv", "0", "key", "user1")), 10)
    os.unlink(m.path("kv", "0", "key", "user1"))
    c = _consumer(bootstrap, "kv")
    got = _poll(c, 3)
    assert [(x.key(), x.value()) for x in got] == [(b"user1", b"alice"), (b"user2", b"bob"),
                                                   (b"user1", None)]
    c.close()
    # a compacted topic refuses a record without a key (LogValidator)
    p2 = ck.Producer({"bootstrap.servers": bootstrap, "retries": 0})
    results = []
    p2.produce("kv", value=b"no key", on_delivery=lambda e, msg: results.append(e))
    p2.flush(10)
    assert results and results[0] is not None
    assert results[0].code() == ck.KafkaError.INVALID_RECORD


def test_delete_records_moves_messages(door):
    m, bootstrap = door
    p = ck.Producer({"bootstrap.servers": bootstrap})
    os.mkdir(m.path("dr"))
    for i in range(10):
        p.produce("dr", value=b"r%d" % i)
    p.flush(10)
    a = ck.admin.AdminClient({"bootstrap.servers": bootstrap})
    tp = ck.TopicPartition("dr", 0, 6)
    res = a.delete_records([tp])[tp].result(10)
    assert res.low_watermark == 6
    assert open(m.path("dr", "0", "messages"), "rb").read().splitlines() == \
        [b"r6", b"r7", b"r8", b"r9"]
    assert not os.path.exists(m.path("dr", "0", "offset", "5"))


def test_group_commits_in_the_groups_view(door):
    m, bootstrap = door
    p = ck.Producer({"bootstrap.servers": bootstrap})
    for i in range(5):
        p.produce("gv", value=b"%d" % i)
    p.flush(10)
    c = _consumer(bootstrap, "gv", **{"group.id": "viewed"})
    assert len(_poll(c, 5)) == 5
    c.commit(asynchronous=False)
    path = m.path("__consumer_offsets", "groups", "viewed", "gv", "0")
    assert wait_for(lambda: os.path.exists(path), 10)
    assert open(path).read() == "5\n"
    # the view's write is an OffsetCommit the consumer's OffsetFetch returns
    c.close()
    with open(path, "w") as f:
        f.write("2\n")
    c2 = _consumer(bootstrap, "gv", **{"group.id": "viewed"})
    got = _poll(c2, 3)
    assert [x.offset() for x in got] == [2, 3, 4]
    c2.close()


def test_a_transactional_producer_through_the_listener_as_the_mount_sees_it(door):
    """Records of an open transaction stay out of the mount's ``messages`` (read_committed
    there, as in Fetch) until the commit's marker; the transaction's state is in
    ``__transaction_state/transactions/<id>`` at each step."""
    import json
    m, bootstrap = door
    os.mkdir(m.path("txd"))
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "door-tx"})
    p.init_transactions(20)
    state = m.path("__transaction_state", "transactions", "door-tx")
    assert wait_for(lambda: os.path.exists(state), 10)
    assert json.loads(open(state).read())["state"] == "Empty"
    p.begin_transaction()
    p.produce("txd", value=b"inside")
    p.flush(10)
    with open(m.path("txd", "0", "append"), "ab") as f:
        f.write(b"beside\n")  # a line appended meanwhile: after the open transaction
    messages = m.path("txd", "0", "messages")
    assert open(messages, "rb").read() == b""  # pinned at the transaction's first offset
    assert json.loads(open(state).read())["state"] == "Ongoing"
    p.commit_transaction(20)
    assert wait_for(lambda: open(messages, "rb").read() == b"inside\nbeside\n", 10)
    assert json.loads(open(state).read())["state"] == "CompleteCommit"


def test_read_committed_same_in_every_door(manager_factory, tmp_path):
    """The transactions of test_transactions_fs.build: Fetch under read_committed returns
    what ``messages`` and ``kafkafs consume`` return, and read_uncommitted everything."""
    from test_transactions_fs import COMMITTED, EVERYTHING, build

    build(manager_factory)
    m = Mount(tmp_path)
    bootstrap = start_mounted(m)
    try:
        assert open(m.path("tx", "0", "messages"), "rb").read().splitlines() == COMMITTED
        c = _consumer(bootstrap, "tx", **{"isolation.level": "read_committed"})
        got = _poll(c, len(COMMITTED), timeout=15)
        assert [x.value() for x in got] == COMMITTED
        assert c.poll(1.0) is None  # nothing past the last stable offset
        c.close()
        c = _consumer(bootstrap, "tx", **{"isolation.level": "read_uncommitted"})
        got = _poll(c, len(EVERYTHING), timeout=15)
        assert [x.value() for x in got] == EVERYTHING
        c.close()
        out = subprocess.run([sys.executable, "-m", "kafkafs", "consume", "--log-dirs",
                              m.log_dirs[0], "--topic", "tx", "--from-beginning",
                              "--timeout-ms", "300"], capture_output=True, cwd=ROOT,
                             timeout=60)
        assert out.stdout.splitlines() == COMMITTED
        # and Spark's kafkalog source (its planner and executor, in this process)
        pytest.importorskip("pyarrow")
        from kafkafs.spark.options import parse_options
        from kafkafs.spark.plan import group_tasks, plan_read
        from kafkafs.spark.reader import read_partition

        opts = parse_options({"path": m.log_dirs[0], "subscribe": "tx",
                              "kafka.isolation.level": "read_committed"})
        values = []
        for task in group_tasks(plan_read(opts)):
            for rb in read_partition(task):
                values += rb.to_pydict()["value"]
        assert values == COMMITTED
    finally:
        m.stop()


def test_compaction_and_retention_are_the_same_for_every_door(tmp_path):
    """A compacted topic cleaned by ``kafkafs compact`` (through the daemon) and a topic
    trimmed by retention: a consumer over the network and the mount see the same records
    from the same first offset."""
    m = Mount(tmp_path, extra_args=["--override", "log.retention.check.interval.ms=300"])
    bootstrap = start_mounted(m)
    try:
        os.mkdir(m.path("cmp"))
        with open(m.path("cmp", "config"), "a") as f:
            f.write("cleanup.policy=compact\nsegment.bytes=2000\n")
        os.mkdir(m.path("ret"))
        with open(m.path("ret", "config"), "a") as f:
            f.write("retention.bytes=3000\nsegment.bytes=1000\n")
        p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        for i in range(300):
            p.produce("cmp", key=b"k%d" % (i % 10), value=b"v%03d" % i)
            p.produce("ret", value=b"r%03d" % i)
            if i % 10 == 9:
                assert p.flush(10) == 0  # batches of 10: many segments to clean and trim
        r = subprocess.run([sys.executable, "-m", "kafkafs", "compact", "--log-dirs",
                            m.log_dirs[0], "--topic", "cmp"], capture_output=True, cwd=ROOT,
                           timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert wait_for(lambda: sorted(int(n) for n in
                                       os.listdir(m.path("ret", "0", "offset")))[0] > 0, 20)
        for topic in ("cmp", "ret"):
            names = sorted(int(n) for n in os.listdir(m.path(topic, "0", "offset")))
            mount_view = [(n, open(m.path(topic, "0", "offset", str(n)), "rb").read())
                          for n in names]
            c = _consumer(bootstrap, topic)
            got = _poll(c, len(mount_view))
            c.close()
            assert [(x.offset(), x.value()) for x in got] == mount_view, topic
        assert len(mount_view) < 300  # retention took the oldest segments
        cmp_names = sorted(int(n) for n in os.listdir(m.path("cmp", "0", "offset")))
        assert len(cmp_names) < 300  # the cleaner took superseded records
    finally:
        m.stop()
