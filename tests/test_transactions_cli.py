"""``kafkafs transactions`` (kafka-transactions.sh 4.1 on log dirs) and
``MOUNT/__transaction_state/transactions/``, on a log built with kafka-python's
transactional batch builder: a committed transaction, and one its producer never ended
(no coordinator state knows it) that pins the last stable offset. ``find-hanging`` finds
it; ``abort --start-offset`` appends the ABORT marker a broker would (the bytes checked
against Kafka's own layout), after which read_committed readers -- consume, the mount,
Spark's reader planning -- move past it, ``kafkafs check`` is clean and nothing hangs."""

from __future__ import annotations

import os
import struct

from conftest import fuse_available, kafkafs
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkafs.log.config import BrokerConfig
from kafkafs.log.groups import coordinator_partition
from kafkafs.log.manager import LogManager
from kafkafs.log.txn_state import Candidate, abort_marker
from kafkafs.record import tables
from kafkafs.record.control import COMMIT, encode_end_txn_marker_batch


def kp_batch(pid, epoch, seq, values, ts):
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True,
                                  producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                  batch_size=1 << 20)
    for i, v in enumerate(values):
        b.append(i, ts + i, None, v, [])
    return bytearray(b.build())


def make_log_dir(d):
    m = LogManager(BrokerConfig.from_properties({}).with_log_dirs([d]))
    m.startup()
    try:
        m.create_topic("orders", 1)
        m.create_topic("__transaction_state", 2, {"cleanup.policy": "compact"})
        lg = m.get_log("orders", 0)
        lg.append([(1000, None, b"before", ())])
        lg.append_encoded(kp_batch(2000, 0, 0, [b"committed-1"], 1000))
        lg.append_encoded(bytearray(encode_end_txn_marker_batch(
            COMMIT, base_offset=0, timestamp=1001, producer_id=2000, producer_epoch=0,
            coordinator_epoch=0)))
        lg.append_encoded(kp_batch(1000, 3, 0, [b"hanging-1", b"hanging-2"], 1002))
        lg.append([(1005, None, b"after", ())])
        txn = tables.schema("txn")
        key = struct.pack(">h", 0) + txn.message("TransactionLogKey").encode(
            {"transactionalId": "tx-ok"}, 0)
        value = struct.pack(">h", 0) + txn.message("TransactionLogValue").encode({
            "producerId": 2000, "producerEpoch": 0, "transactionTimeoutMs": 60000,
            "transactionStatus": 4, "transactionPartitions": [],
            "transactionLastUpdateTimestampMs": 1001, "transactionStartTimestampMs": 999}, 0)
        m.get_log("__transaction_state", coordinator_partition("tx-ok", 2)).append(
            [(1001, key, value, ())])
    finally:
        m.shutdown()


def tx(d, *args, check=True):
    r = kafkafs("transactions", "--log-dirs", d, *args, check=check)
    return r.returncode, r.stdout.decode(), r.stderr.decode()


def table(out):
    return [line.split("\t")[:-1] for line in out.splitlines()]


def consume(d):
    return kafkafs("consume", "--log-dirs", d, "--topic", "orders", "--from-beginning",
                   "--timeout-ms", "0").stdout.splitlines()


def spark_values(d):
    """The values Spark's kafkalog source reads under read_committed (its planner and
    executor in this process)."""
    from kafkafs.spark.options import parse_options
    from kafkafs.spark.plan import group_tasks, plan_read
    from kafkafs.spark.reader import read_partition

    opts = parse_options({"path": d, "subscribe": "orders",
                          "kafka.isolation.level": "read_committed"})
    out = []
    for task in group_tasks(plan_read(opts)):
        for rb in read_partition(task):
            out += rb.to_pydict()["value"]
    return out


def test_the_abort_marker_is_kafkas():
    """The marker of Kafka's worked example (WriteTxnMarkers, MemoryRecords.
    withEndTransactionMarker): offset 5, leader epoch 0, time 1700000000000, producer 1000
    epoch 0, coordinator epoch 0."""
    marker = abort_marker(Candidate("t", 0, 1000, 0, -1, 3, 0), 1700000000000)
    struct.pack_into(">q", marker, 0, 5)
    struct.pack_into(">i", marker, 12, 0)
    assert marker.hex() == (
        "000000000000000500000042000000000255929fd70030000000000000018bcfe5680000000"
        "18bcfe5680000000000000003e80000ffffffff000000012000000008000000000c00000000000000")


def test_find_hanging_and_abort(tmp_path):
    d = str(tmp_path / "logs")
    make_log_dir(d)
    _rc, out, _err = tx(d, "list")
    assert out.splitlines()[0] == "TransactionalId\tCoordinator\tProducerId\tTransactionState\t"
    assert table(out)[1:] == [["tx-ok          ", "0          ", "2000      ",
                               "CompleteCommit  "]]
    _rc, out, _err = tx(d, "describe", "--transactional-id", "tx-ok")
    row = [c.strip() for c in table(out)[1]]
    assert row[:7] == ["0", "tx-ok", "2000", "0", "CompleteCommit", "60000", "999"]
    rc, _out, err = tx(d, "describe", "--transactional-id", "nope", check=False)
    assert rc == 1 and "failed because the ID could not be found" in err
    _rc, out, _err = tx(d, "describe-producers", "--topic", "orders", "--partition", "0")
    rows = {r[0].strip(): [c.strip() for c in r] for r in table(out)[1:]}
    assert rows["1000"] == ["1000", "3", "-1", "1", "1003", "3"]
    assert rows["2000"] == ["2000", "0", "0", "0", "1001", "None"]

    assert consume(d) == [b"before", b"committed-1"]  # the open transaction pins the LSO
    _rc, out, _err = tx(d, "find-hanging", "--topic", "orders")
    (hanging,) = [[c.strip() for c in r] for r in table(out)[1:]]
    assert hanging[:7] == ["orders", "0", "1000", "3", "-1", "3", "1003"]
    rc, _out, err = tx(d, "find-hanging", check=False)
    assert rc == 1 and "requires either --topic or --broker-id" in err
    rc, _out, err = tx(d, "abort", "--topic", "orders", "--partition", "0",
                       "--start-offset", "4", check=False)
    assert rc == 1 and "Could not find any open transactions starting at offset 4" in err

    assert spark_values(d) == [b"before", b"committed-1"]
    rc, _out, err = tx(d, "abort", "--topic", "orders", "--partition", "0",
                       "--start-offset", "3")
    assert rc == 0, err
    assert consume(d) == [b"before", b"committed-1", b"after"]  # aborted records hidden
    assert spark_values(d) == [b"before", b"committed-1", b"after"]
    assert table(tx(d, "find-hanging", "--topic", "orders")[1])[1:] == []
    r = kafkafs("check", "--log-dirs", d)
    assert b"clean" in r.stdout
    txnindex = [n for n in os.listdir(os.path.join(d, "orders-0")) if n.endswith(".txnindex")]
    assert txnindex  # the aborted transaction is indexed for read_committed readers


def test_the_transactions_view(mount_factory, tmp_path):
    import json

    if not fuse_available():
        return
    d = str(tmp_path / "logs")
    make_log_dir(d)
    m = mount_factory(log_dirs=[d])
    tdir = m.path("__transaction_state", "transactions")
    assert os.listdir(tdir) == ["tx-ok"]
    assert "transactions" not in os.listdir(m.path("orders"))
    with open(os.path.join(tdir, "tx-ok")) as f:
        doc = json.load(f)
    assert (doc["producer_id"], doc["state"], doc["start_ms"]) == (2000, "CompleteCommit", 999)
    # abort beside the mount goes through the daemon; the mount's read_committed view moves
    with open(m.path("orders", "0", "messages"), "rb") as f:
        assert f.read().splitlines() == [b"before", b"committed-1"]
    rc, _out, err = tx(d, "abort", "--topic", "orders", "--partition", "0", "--start-offset",
                       "3")
    assert rc == 0, err
    with open(m.path("orders", "0", "messages"), "rb") as f:
        assert f.read().splitlines() == [b"before", b"committed-1", b"after"]
