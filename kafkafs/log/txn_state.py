"""Transactional producers as the transaction coordinator keeps them, replayed from
``__transaction_state`` (docs/design.md §3.5; Kafka's ``TransactionStateManager``
loading its partitions), and what ``kafka-transactions.sh`` asks brokers about them.

Each record is a transactional id's latest ``TransactionLogValue`` (record type 0: the key
``TransactionLogKey``); a tombstone removes the id (an expired transactional id). The
replay keeps the latest value per id, incrementally (:meth:`TransactionStore.catch_up`).
A transactional id lives in partition ``abs(String.hashCode(id)) % partitions``, as a group
does.

Hanging transactions (KIP-664, ``FindHangingTransactionsCommand``): an open transaction in
a data partition -- a producer whose state has a current transaction start offset -- whose
producer's last timestamp is older than the maximum transaction timeout, and which the
coordinator does not know of: no transactional id has the producer id, or the id's state
does not list the partition (a transaction the coordinator completed or never began there:
its markers never reached the partition). Such a transaction pins the partition's last
stable offset; aborting it (:func:`abort_marker`) moves it on. No trio, no errno.
"""

from __future__ import annotations

import struct
import threading
from dataclasses import dataclass

from ..record import tables
from ..record.control import ABORT, encode_end_txn_marker_batch
from ..record.errors import CorruptRecordError
from .groups import coordinator_partition

__all__ = ["STATES", "STATUS", "TRANSACTION_STATE", "Candidate", "TransactionStore", "Txn",
           "abort_marker", "encode_txn_record", "find_hanging", "state_topic_config"]

TRANSACTION_STATE = "__transaction_state"
#: TransactionLogValue.transactionStatus -> Kafka's state name
STATES = {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort",
          4: "CompleteCommit", 5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence"}
#: Kafka's state name -> TransactionLogValue.transactionStatus
STATUS = {name: code for code, name in STATES.items()}
_I16 = struct.Struct(">h")


def encode_txn_record(txn: Txn) -> tuple[bytes, bytes]:
    """The ``(key, value)`` of ``__transaction_state`` a transaction coordinator writes for
    ``txn`` (Kafka's ``TransactionLog.keyToBytes``/``valueToBytes``: key version 0, value
    version 0 -- what a broker at ``transaction.version`` 0 or 1 writes; partitions
    grouped by topic, null in the Empty state)."""
    schema = tables.schema("txn")
    key = _I16.pack(0) + schema.by_api(0, "Key").encode(
        {"transactionalId": txn.transactional_id}, 0)
    by_topic: dict[str, list[int]] = {}
    for topic, p in sorted(txn.partitions):
        by_topic.setdefault(topic, []).append(p)
    value = _I16.pack(0) + schema.by_api(0, "Value").encode({
        "producerId": txn.producer_id, "producerEpoch": txn.producer_epoch,
        "transactionTimeoutMs": txn.timeout_ms, "transactionStatus": STATUS[txn.state],
        "transactionPartitions": [{"topic": t, "partitionIds": ps}
                                  for t, ps in by_topic.items()]
        if txn.state != "Empty" else None,
        "transactionLastUpdateTimestampMs": txn.last_update_ms,
        "transactionStartTimestampMs": txn.start_ms}, 0)
    return key, value


def state_topic_config(config) -> tuple[int, dict[str, str]]:
    """``(partitions, topic overrides)`` ``__transaction_state`` is created with (Kafka's
    ``transaction.state.log.num.partitions``, default 50, ``transaction.state.log.segment
    .bytes``, compacted), from a :class:`~kafkafs.log.config.BrokerConfig`."""
    segment = config.extra.get("transaction.state.log.segment.bytes", 104857600)
    return config.transaction_state_log_num_partitions, {
        "cleanup.policy": "compact", "segment.bytes": str(segment)}


@dataclass(frozen=True)
class Txn:
    """A transactional id's state: ``transactional_id``, ``producer_id``,
    ``producer_epoch``, ``timeout_ms``, ``state`` (Kafka's name), ``partitions``
    ([(topic, partition)]), ``last_update_ms``, ``start_ms`` (-1: not started), and the
    ``__transaction_state`` ``partition`` holding it."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: str
    partitions: tuple
    last_update_ms: int
    start_ms: int
    partition: int


class _TxnPartition:
    def __init__(self, lg):
        self.log = lg
        self.end_offset = lg.log_start_offset
        self.ids: dict[str, Txn] = {}
        self.damage: CorruptRecordError | None = None

    def catch_up(self) -> None:
        lg = self.log
        if lg.log_end_offset < self.end_offset or lg.log_start_offset > self.end_offset:
            self.end_offset, self.ids = lg.log_start_offset, {}
        schema = tables.schema("txn")
        key_message, value_message = schema.by_api(0, "Key"), schema.by_api(0, "Value")
        try:
            for batch in lg.batches(self.end_offset):
                if not batch.is_control:
                    for offset, _ts, key, value, _h in batch.record_tuples():
                        if offset >= self.end_offset:
                            self._apply(key_message, value_message, key, value)
                self.end_offset = batch.next_offset
            self.damage = None
        except CorruptRecordError as exc:
            self.damage = exc

    def _apply(self, key_message, value_message, key, value) -> None:
        if key is None or len(key) < 2 or _I16.unpack_from(key)[0] != 0:
            return
        try:
            txn_id = key_message.decode(key, 0, pos=2, exact=False)["transactionalId"]
            if value is None:
                self.ids.pop(txn_id, None)
                return
            version = _I16.unpack_from(value)[0]
            v = value_message.decode(value, version, pos=2, exact=False)
        except (CorruptRecordError, ValueError, struct.error):
            return  # a record the tables cannot read: the coordinator would not load it
        parts = tuple((tp["topic"], p) for tp in v.get("transactionPartitions") or []
                      for p in tp["partitionIds"])
        self.ids[txn_id] = Txn(txn_id, v["producerId"], v["producerEpoch"],
                               v["transactionTimeoutMs"],
                               STATES.get(v["transactionStatus"], "Unknown"), parts,
                               v["transactionLastUpdateTimestampMs"],
                               v["transactionStartTimestampMs"], self.log.partition)


class TransactionStore:
    """The transactional ids of every ``__transaction_state`` partition of a LogManager.
    Thread-safe."""

    def __init__(self, manager):
        self.manager = manager
        self._lock = threading.Lock()
        self._parts: dict[int, _TxnPartition] = {}

    def catch_up(self) -> None:
        with self._lock:
            for p in self.manager.partitions(TRANSACTION_STATE):
                lg = self.manager.get_log(TRANSACTION_STATE, p)
                tp = self._parts.get(p)
                if tp is None or tp.log is not lg:
                    tp = self._parts[p] = _TxnPartition(lg)
                tp.catch_up()

    def transactions(self) -> dict[str, Txn]:
        """``{transactional id: Txn}`` (Dead ones left out, as ListTransactions does)."""
        self.catch_up()
        with self._lock:
            return {i: t for part in self._parts.values() for i, t in part.ids.items()
                    if t.state != "Dead"}

    def get(self, transactional_id: str) -> Txn | None:
        txns = self.transactions()
        return txns.get(transactional_id)

    def home(self, transactional_id: str) -> int | None:
        """The ``__transaction_state`` partition of an id (None without the topic)."""
        parts = self.manager.partitions(TRANSACTION_STATE)
        return coordinator_partition(transactional_id, max(parts) + 1) if parts else None


@dataclass(frozen=True)
class Candidate:
    """An open transaction of a data partition: ``topic``, ``partition``, the producer's
    ``producer_id``, ``producer_epoch``, ``coordinator_epoch``, ``start_offset`` (of its
    transaction), ``last_timestamp`` (ms)."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    start_offset: int
    last_timestamp: int


def open_transactions(lg) -> list[Candidate]:
    """The producers of ``lg`` (a Log) with an ongoing transaction (DescribeProducers)."""
    out = []
    for e in lg.producer_state.producers.values():
        if e.current_txn_first_offset is not None:
            out.append(Candidate(lg.topic, lg.partition, e.producer_id, e.producer_epoch,
                                 e.coordinator_epoch, e.current_txn_first_offset,
                                 e.last_timestamp))
    return out


def find_hanging(manager, store: TransactionStore, partitions, max_timeout_ms: int,
                 now_ms: int) -> list[Candidate]:
    """The hanging transactions of ``partitions`` ([(topic, partition)]): open ones whose
    producer's last timestamp is more than ``max_timeout_ms`` before ``now_ms`` and that
    the coordinator does not know of (see the module)."""
    by_pid = {t.producer_id: t for t in store.transactions().values()}
    out = []
    for topic, p in partitions:
        lg = manager.get_log(topic, p)
        for c in open_transactions(lg):
            if now_ms - c.last_timestamp <= max_timeout_ms:
                continue
            txn = by_pid.get(c.producer_id)
            if txn is None or (topic, p) not in txn.partitions:
                out.append(c)
    return out


def abort_marker(c: Candidate, now_ms: int) -> bytearray:
    """The ABORT marker batch a broker appends for ``kafka-transactions abort`` of ``c``
    (``WriteTxnMarkers``: the producer's id and epoch unchanged, its coordinator epoch, or
    0 when it has none)."""
    return bytearray(encode_end_txn_marker_batch(
        ABORT, base_offset=0, timestamp=now_ms, producer_id=c.producer_id,
        producer_epoch=c.producer_epoch, coordinator_epoch=max(c.coordinator_epoch, 0)))
