"""The transaction coordinator: transactional producers over ``__transaction_state``
(docs/design.md §9.7).

Kafka's ``TransactionCoordinator`` and ``TransactionStateManager`` on one node, at
``transaction.version`` 0/1 (what a broker without finalized features runs: the producer
keeps its epoch for all its transactions and ends each with EndTxn):

* InitProducerId with a transactional id: a new id gets a producer id and epoch 0; a known
  one in Empty or Complete* gets its epoch bumped (a new producer id once the epoch is
  exhausted), which fences its older instance; one with an Ongoing transaction has it
  aborted under the next epoch and is answered CONCURRENT_TRANSACTIONS, so the client
  retries, as Kafka does;
* AddPartitionsToTxn (the client's v0-3 and the brokers' batched v4-5, ``VerifyOnly``
  included) and AddOffsetsToTxn (the group's ``__consumer_offsets`` partition) add
  partitions and move the transaction to Ongoing;
* TxnOffsetCommit: the group's offset commits as one transactional batch of
  OffsetCommitValue records in its ``__consumer_offsets`` partition, pending until the
  transaction's marker (the groups' replay, :mod:`kafkafs.log.groups`, applies them then);
* EndTxn: PrepareCommit/PrepareAbort written, then a COMMIT or ABORT marker appended to
  every partition of the transaction (the producer state and ``.txnindex`` follow, so the
  last stable offset moves for read_committed readers of every door), then
  CompleteCommit/CompleteAbort. A marker that cannot be written leaves the transaction
  in its Prepare state and the coordinator's timer writes it again, as Kafka's marker
  channel retries;
* a transaction open longer than its ``transaction.timeout.ms`` is aborted by the timer
  (every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``) under the next
  epoch, fencing the producer;
* Produce of a transactional batch is accepted only for a partition of the producer's
  Ongoing transaction (INVALID_TXN_STATE otherwise; INVALID_PRODUCER_EPOCH for a fenced
  epoch), as Kafka's partition verification (KIP-890) decides;
* ListTransactions and DescribeTransactions answer from the same state, DescribeProducers
  from each partition's producer state;
* a daemon serving its log dirs read-only refuses InitProducerId with a transactional id
  (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which clients do not retry).

Every state change is a ``TransactionLogValue`` record (version 0) in the id's partition of
``__transaction_state`` (``abs(String.hashCode(id)) % partitions``, created on first use with
``transaction.state.log.num.partitions``), written before the answer; at start-up the
coordinator replays those records (:class:`kafkafs.log.txn_state.TransactionStore`) and
finishes what a killed daemon left in PrepareCommit/PrepareAbort. An id with no transaction
open is deleted (a tombstone) once unused for ``transactional.id.expiration.ms``. A broker
started on the same log dirs loads the same records. Not done: transaction.version 2
(KIP-890 part 2), two-phase commit (KIP-939).
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field, replace

import trio

from ..log import faults
from ..log.errors import LogError, UnknownTopicOrPartitionError
from ..log.groups import CONSUMER_OFFSETS, coordinator_partition
from ..log.txn_state import (STATES, TRANSACTION_STATE, Txn, encode_txn_record,
                             state_topic_config)
from ..record.control import ABORT, COMMIT, encode_end_txn_marker_batch
from . import errors as K
from .coordinator import write_commit_request

log = logging.getLogger(__name__)

_EPOCH_MAX = 32767  # Short.MAX_VALUE: an epoch that cannot be bumped again
_PREPARED = {"PrepareCommit", "PrepareAbort"}
_COMPLETE = {"Empty", "CompleteCommit", "CompleteAbort"}


@dataclass
class TxnMeta:
    """One transactional id's live state (Kafka's ``TransactionMetadata``): times in ms,
    ``partitions`` a set of (topic, partition)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: str = "Empty"
    partitions: set = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1

    def record(self) -> Txn:
        return Txn(self.transactional_id, self.producer_id, self.producer_epoch,
                   self.timeout_ms, self.state, tuple(sorted(self.partitions)),
                   self.last_update_ms, self.start_ms, -1)


def _now() -> int:
    return int(time.time() * 1000)


def _fenced(version: int, cutoff: int) -> int:
    """PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH for a request version older than the
    one that introduced it (``cutoff``)."""
    return K.PRODUCER_FENCED if version >= cutoff else K.INVALID_PRODUCER_EPOCH


def _fencing_epoch(meta: TxnMeta) -> int:
    """The epoch an abort that fences ``meta``'s producer is written with (the next one;
    the same when the next would be the last, ``prepareFenceProducerEpoch``)."""
    return meta.producer_epoch + 1 if meta.producer_epoch < _EPOCH_MAX - 1 \
        else meta.producer_epoch


class TxnCoordinator:
    """The transactional ids of one node over ``broker``'s storage core."""

    def __init__(self, broker):
        self.broker = broker
        self.config = broker.config
        self.txns: dict[str, TxnMeta] = {}
        self.lock = trio.Lock()
        self._loaded = False
        self._expired_at = 0  # ms: the last look for expired ids

    # -- the log ------------------------------------------------------------------------
    async def ensure_topic(self) -> bool:
        """Whether ``__transaction_state`` exists; creates it when it does not (False then:
        COORDINATOR_NOT_AVAILABLE while it is made, as Kafka answers)."""
        manager = self.broker.manager
        if manager.partitions(TRANSACTION_STATE):
            return True
        if self.broker.core.read_only:
            return False
        n, overrides = state_topic_config(manager.config)
        try:
            await trio.to_thread.run_sync(manager.create_topic, TRANSACTION_STATE, n, overrides)
            log.info("Created %s with %d partitions", TRANSACTION_STATE, n)
        except LogError as exc:
            log.debug("creating %s: %s", TRANSACTION_STATE, exc)
        return bool(manager.partitions(TRANSACTION_STATE))

    async def ready(self) -> None:
        """Load the ids ``__transaction_state`` holds, once, in a worker thread (the replay
        reads the whole topic); what this coordinator writes later is kept in memory as it
        writes it. Every request and the timer wait for it first."""
        if self._loaded:
            return
        found = await trio.to_thread.run_sync(self.broker.core.transactions.transactions)
        if self._loaded:
            return
        self._loaded = True
        for tid, t in found.items():
            if tid not in self.txns:
                self.txns[tid] = TxnMeta(tid, t.producer_id, t.producer_epoch, t.timeout_ms,
                                         t.state, set(t.partitions), t.start_ms,
                                         t.last_update_ms)

    def get(self, tid: str) -> TxnMeta | None:
        """The live state of ``tid`` (None: unknown); after :meth:`ready`."""
        return self.txns.get(tid)

    def _state_log(self, tid: str):
        """The ``__transaction_state`` partition's Log of ``tid``. Raises LogError."""
        manager = self.broker.manager
        parts = manager.partitions(TRANSACTION_STATE)
        return manager.get_log(TRANSACTION_STATE, coordinator_partition(tid, max(parts) + 1))

    def _persist(self, meta: TxnMeta) -> int:
        """Write ``meta`` as its id's latest TransactionLogValue; the error code (NONE, or
        COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR for a write that failed)."""
        if not self.broker.manager.partitions(TRANSACTION_STATE):
            return K.COORDINATOR_NOT_AVAILABLE
        key, value = encode_txn_record(meta.record())
        try:
            self._state_log(meta.transactional_id).append([(_now(), key, value, ())])
        except (LogError, OSError) as exc:
            log.warning("writing transaction %r's state failed: %s", meta.transactional_id, exc)
            return K.NOT_COORDINATOR
        return K.NONE

    def _transition(self, meta: TxnMeta, **changes) -> int:
        """Apply ``changes`` to ``meta`` once they are written (nothing changes when the
        write fails); the error code."""
        new = replace(meta, **changes, last_update_ms=_now())
        code = self._persist(new)
        if code == K.NONE:
            meta.__dict__.update(new.__dict__)
        return code

    # -- ending a transaction -----------------------------------------------------------
    def _write_markers(self, meta: TxnMeta) -> bool:
        """Append the marker of ``meta``'s Prepare state to each of its partitions not yet
        marked; whether all are (a partition gone meanwhile counts as marked, as Kafka
        drops markers of deleted partitions)."""
        control = COMMIT if meta.state == "PrepareCommit" else ABORT
        manager = self.broker.manager
        done = set()
        for topic, p in sorted(meta.partitions):
            marker = encode_end_txn_marker_batch(
                control, base_offset=0, timestamp=_now(), producer_id=meta.producer_id,
                producer_epoch=meta.producer_epoch, coordinator_epoch=0)
            try:
                faults.point("txn.marker")  # (the crash and ENOSPC tests' step)
                manager.get_log(topic, p).append_encoded(bytearray(marker))
            except UnknownTopicOrPartitionError:
                pass
            except (LogError, OSError) as exc:
                log.warning("writing the %s marker of transaction %r to %s-%d failed "
                            "(retried): %s", "COMMIT" if control == COMMIT else "ABORT",
                            meta.transactional_id, topic, p, exc)
                continue
            done.add((topic, p))
        meta.partitions -= done  # (in memory only: the record keeps the whole set)
        return not meta.partitions

    def _complete(self, meta: TxnMeta, partitions: set) -> int:
        """Markers, then Complete*; NONE, or the code of a write that failed (the markers
        left are retried by the timer)."""
        pending = replace(meta, partitions=set(partitions))
        if not self._write_markers(pending):
            meta.partitions = pending.partitions | set()
            return K.NONE  # (the answer does not wait for the markers: Kafka's neither)
        done = "CompleteCommit" if meta.state == "PrepareCommit" else "CompleteAbort"
        return self._transition(meta, state=done, partitions=set())

    def _end(self, meta: TxnMeta, commit: bool, epoch: int | None = None) -> int:
        """End ``meta``'s Ongoing (or Empty, for an abort) transaction; the error code."""
        changes = {"state": "PrepareCommit" if commit else "PrepareAbort"}
        if epoch is not None:
            changes["producer_epoch"] = epoch
        partitions = set(meta.partitions)
        code = self._transition(meta, **changes)
        if code:
            return code
        return self._complete(meta, partitions)

    def _expire(self, now: int) -> None:
        """Delete the ids with no transaction open whose last update is older than
        ``transactional.id.expiration.ms`` (``removeExpiredTransactionalIds``: a tombstone
        in the id's partition, then the id is forgotten)."""
        for meta in list(self.txns.values()):
            if meta.state not in _COMPLETE or \
                    now - meta.last_update_ms <= self.config.transactional_id_expiration_ms:
                continue
            key, _value = encode_txn_record(meta.record())
            try:
                self._state_log(meta.transactional_id).append([(now, key, None, ())])
            except (LogError, OSError) as exc:
                log.warning("expiring transactional id %r failed: %s", meta.transactional_id,
                            exc)
                continue
            log.info("Expired transactional id %r (producer %d): last updated %d ms ago",
                     meta.transactional_id, meta.producer_id, now - meta.last_update_ms)
            del self.txns[meta.transactional_id]

    async def tick(self) -> None:
        """Retry markers left unwritten; abort transactions past their timeout (under the
        next epoch, which fences the producer: ``abortTimedOutTransactions``); expire
        ids (every ``transactions.remove.expired.transaction.cleanup.interval.ms``)."""
        await self.ready()
        now = _now()
        async with self.lock:
            interval = self.config.transactions_remove_expired_transaction_cleanup_interval_ms
            if now - self._expired_at >= interval:
                self._expired_at = now
                self._expire(now)
            for meta in list(self.txns.values()):
                if meta.state in _PREPARED:
                    self._complete(meta, meta.partitions)
                elif meta.state == "Ongoing" and now > meta.start_ms + meta.timeout_ms:
                    log.info("aborting transaction %r of producer %d: open for %d ms, past "
                             "its timeout of %d ms", meta.transactional_id, meta.producer_id,
                             now - meta.start_ms, meta.timeout_ms)
                    self._end(meta, False, _fencing_epoch(meta))

    async def run(self) -> None:
        """The coordinator's timer, until cancelled."""
        interval = self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms
        first = True
        while True:
            if self.broker.manager.partitions(TRANSACTION_STATE) and not \
                    self.broker.core.read_only:
                try:
                    await self.tick()
                except Exception:  # (a defect: logged, the timer goes on)
                    log.exception("the transaction coordinator's timer failed")
            await trio.sleep(0.5 if first else interval / 1000)
            first = False

    # -- the requests -------------------------------------------------------------------
    async def init_producer_id(self, tid: str, timeout_ms: int, pid: int, epoch: int,
                               version: int) -> tuple[int, int, int]:
        """``handleInitProducerId`` with a transactional id: (error, producer id, epoch)."""
        if not 0 < timeout_ms <= self.config.transaction_max_timeout_ms:
            return K.INVALID_TRANSACTION_TIMEOUT, -1, -1
        if self.broker.core.read_only:  # (not retriable, as produce's refusal)
            return K.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1
        if not await self.ensure_topic():
            return K.COORDINATOR_NOT_AVAILABLE, -1, -1
        await self.ready()
        async with self.lock:
            meta = self.get(tid)
            if meta is None:
                try:
                    new_pid = await self.broker.state["producer_ids"].allocate()
                except OSError:
                    return K.COORDINATOR_LOAD_IN_PROGRESS, -1, -1
                meta = TxnMeta(tid, new_pid, -1, timeout_ms)
                self.txns[tid] = meta
                code = self._transition(meta, producer_epoch=0)
                if code:
                    self.txns.pop(tid, None)
                    return code, -1, -1
                return K.NONE, meta.producer_id, meta.producer_epoch
            if pid != -1 and (pid, epoch) != (meta.producer_id, meta.producer_epoch):
                return _fenced(version, 4), -1, -1
            if meta.state in _PREPARED:
                self._complete(meta, meta.partitions)
                return K.CONCURRENT_TRANSACTIONS, -1, -1
            if meta.state == "Ongoing":  # fence the old instance: abort under the next epoch
                self._end(meta, False, _fencing_epoch(meta))
                return K.CONCURRENT_TRANSACTIONS, -1, -1
            if meta.state not in _COMPLETE:
                return K.CONCURRENT_TRANSACTIONS, -1, -1
            changes: dict = {"state": "Empty", "partitions": set(), "start_ms": -1,
                             "timeout_ms": timeout_ms}
            if meta.producer_epoch >= _EPOCH_MAX - 1:  # exhausted: a new producer id
                try:
                    changes["producer_id"] = await self.broker.state["producer_ids"].allocate()
                except OSError:
                    return K.COORDINATOR_LOAD_IN_PROGRESS, -1, -1
                changes["producer_epoch"] = 0
            else:
                changes["producer_epoch"] = meta.producer_epoch + 1
            code = self._transition(meta, **changes)
            if code:
                return code, -1, -1
            return K.NONE, meta.producer_id, meta.producer_epoch

    def _check(self, meta: TxnMeta | None, pid: int, epoch: int, version: int,
               cutoff: int) -> int:
        if meta is None or meta.producer_id != pid:
            return K.INVALID_PRODUCER_ID_MAPPING
        if meta.producer_epoch != epoch:
            return _fenced(version, cutoff)
        if meta.state in _PREPARED:
            return K.CONCURRENT_TRANSACTIONS
        return K.NONE

    async def add_partitions(self, tid: str, pid: int, epoch: int, partitions: list,
                             version: int, verify_only: bool = False) -> dict:
        """``handleAddPartitionsToTransaction``: {(topic, partition): error code}."""
        if not tid:
            return dict.fromkeys(partitions, K.INVALID_REQUEST)
        manager = self.broker.manager
        missing = {tp for tp in partitions if tp[1] not in manager.partitions(tp[0])}
        if missing:  # (KafkaApis: those are unknown, the others not attempted)
            return {tp: K.UNKNOWN_TOPIC_OR_PARTITION if tp in missing
                    else K.OPERATION_NOT_ATTEMPTED for tp in partitions}
        await self.ready()
        async with self.lock:
            meta = self.get(tid)
            code = self._check(meta, pid, epoch, version, 2)
            if code == K.NONE and verify_only:
                code = K.NONE if meta.state == "Ongoing" and \
                    set(partitions) <= meta.partitions else K.INVALID_TXN_STATE
            elif code == K.NONE and not (meta.state == "Ongoing" and
                                         set(partitions) <= meta.partitions):
                changes: dict = {"state": "Ongoing",
                                 "partitions": meta.partitions | set(partitions)}
                if meta.state != "Ongoing":
                    changes["start_ms"] = _now()
                code = self._transition(meta, **changes)
        return dict.fromkeys(partitions, code)

    async def end_txn(self, tid: str, pid: int, epoch: int, commit: bool,
                      version: int) -> int:
        """``handleEndTransaction``: the error code."""
        await self.ready()
        async with self.lock:
            meta = self.get(tid)
            if meta is None or meta.producer_id != pid:
                return K.INVALID_PRODUCER_ID_MAPPING
            if meta.producer_epoch != epoch:
                return _fenced(version, 2)
            want = "Commit" if commit else "Abort"
            if meta.state == "Ongoing":
                return self._end(meta, commit)
            if meta.state == "Complete" + want:
                return K.NONE  # (a retry of an EndTxn already done)
            if meta.state == "Prepare" + want:
                return K.CONCURRENT_TRANSACTIONS
            return K.INVALID_TXN_STATE

    def verify_produce(self, tid: str | None, pid: int, epoch: int, topic: str,
                       partition: int) -> int:
        """Whether a transactional batch of producer ``pid``/``epoch`` may go to
        ``topic``-``partition`` (KIP-890's verification): NONE, INVALID_PRODUCER_EPOCH for an
        epoch below the id's, INVALID_TXN_STATE for a partition outside its Ongoing
        transaction. Call it after :meth:`ready`."""
        meta = self.get(tid) if tid else None
        if meta is None or meta.producer_id != pid:
            return K.INVALID_TXN_STATE
        if epoch < meta.producer_epoch:
            return K.INVALID_PRODUCER_EPOCH
        if meta.state != "Ongoing" or (topic, partition) not in meta.partitions \
                or epoch != meta.producer_epoch:
            return K.INVALID_TXN_STATE
        return K.NONE

    def listed(self) -> list[TxnMeta]:
        """The ids not Dead; after :meth:`ready`."""
        return [m for m in self.txns.values() if m.state != "Dead"]


def make_state(broker) -> TxnCoordinator:
    return TxnCoordinator(broker)


def _offsets_partition(broker, group_id: str) -> tuple[str, int] | None:
    parts = broker.manager.partitions(CONSUMER_OFFSETS)
    return (CONSUMER_OFFSETS, coordinator_partition(group_id, max(parts) + 1)) if parts else None


# -- the apis ---------------------------------------------------------------------------

async def add_partitions_to_txn(broker, request, conn) -> dict:
    """AddPartitionsToTxn (api 24): v0-3 one transaction, v4+ a batch of them."""
    coord: TxnCoordinator = broker.state["transactions"]
    body, v = request.body, request.api_version

    async def one(tid, pid, epoch, topics, verify_only=False) -> list[dict]:
        partitions = [(t["name"], p) for t in topics for p in t["partitions"]]
        codes = await coord.add_partitions(tid, pid, epoch, partitions, v, verify_only)
        out: dict[str, list] = {}
        for (topic, p), code in codes.items():
            out.setdefault(topic, []).append({"partitionIndex": p, "partitionErrorCode": code})
        return [{"name": t, "resultsByPartition": r} for t, r in out.items()]

    if v <= 3:
        return {"throttleTimeMs": 0, "resultsByTopicV3AndBelow": await one(
            body["v3AndBelowTransactionalId"], body["v3AndBelowProducerId"],
            body["v3AndBelowProducerEpoch"], body["v3AndBelowTopics"])}
    results = []
    for txn in body["transactions"]:
        results.append({"transactionalId": txn["transactionalId"], "topicResults": await one(
            txn["transactionalId"], txn["producerId"], txn["producerEpoch"], txn["topics"],
            txn["verifyOnly"])})
    return {"throttleTimeMs": 0, "errorCode": K.NONE, "resultsByTransaction": results}


async def add_offsets_to_txn(broker, request, conn) -> dict:
    """AddOffsetsToTxn (api 25): the group's ``__consumer_offsets`` partition joins the
    transaction."""
    coord: TxnCoordinator = broker.state["transactions"]
    body, v = request.body, request.api_version
    if not await broker.state["coordinator"].ensure_offsets_topic():
        return {"throttleTimeMs": 0, "errorCode": K.COORDINATOR_NOT_AVAILABLE}
    tp = _offsets_partition(broker, body["groupId"])
    codes = await coord.add_partitions(body["transactionalId"], body["producerId"],
                                       body["producerEpoch"], [tp], v)
    return {"throttleTimeMs": 0, "errorCode": codes[tp]}


async def end_txn(broker, request, conn) -> dict:
    """EndTxn (api 26): commit or abort, markers written before the answer."""
    coord: TxnCoordinator = broker.state["transactions"]
    body, v = request.body, request.api_version
    code = await coord.end_txn(body["transactionalId"], body["producerId"],
                               body["producerEpoch"], body["committed"], v)
    return {"throttleTimeMs": 0, "errorCode": code, "producerId": -1, "producerEpoch": -1}


async def txn_offset_commit(broker, request, conn) -> dict:
    """TxnOffsetCommit (api 28): the offsets as one transactional batch in the group's
    partition, pending until the transaction's marker."""
    coord: TxnCoordinator = broker.state["transactions"]
    groups = broker.state["coordinator"]
    body, v = request.body, request.api_version
    gid = body["groupId"]
    code = K.NONE
    if not await groups.ensure_offsets_topic():
        code = K.COORDINATOR_NOT_AVAILABLE
    if code == K.NONE:
        await coord.ready()
        meta = coord.get(body["transactionalId"])
        code = coord._check(meta, body["producerId"], body["producerEpoch"], v, 3)
        if code == K.NONE and (meta.state != "Ongoing" or
                               _offsets_partition(broker, gid) not in meta.partitions):
            code = K.INVALID_TXN_STATE  # (AddOffsetsToTxn first)
    if code == K.NONE:
        code, _ = await groups.commit({"groupId": gid,
                                       "generationIdOrMemberEpoch": body.get("generationId", -1),
                                       "memberId": body.get("memberId", ""),
                                       "groupInstanceId": body.get("groupInstanceId")}, 9)
    return {"throttleTimeMs": 0, "topics": await write_commit_request(
        groups, broker.manager, gid, body["topics"], code, -1,
        producer=(body["producerId"], body["producerEpoch"]))}


def _described(m: TxnMeta) -> dict:
    by_topic: dict[str, list[int]] = {}
    for topic, p in sorted(m.partitions):
        by_topic.setdefault(topic, []).append(p)
    return {"errorCode": K.NONE, "transactionalId": m.transactional_id,
            "transactionState": m.state, "transactionTimeoutMs": m.timeout_ms,
            "transactionStartTimeMs": m.start_ms, "producerId": m.producer_id,
            "producerEpoch": m.producer_epoch,
            "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]}


async def describe_transactions(broker, request, conn) -> dict:
    """DescribeTransactions (api 65); TRANSACTIONAL_ID_NOT_FOUND for an unknown id."""
    coord: TxnCoordinator = broker.state["transactions"]
    await coord.ready()
    out = []
    for tid in request.body["transactionalIds"]:
        m = coord.get(tid)
        if m is None or m.state == "Dead":
            out.append({"errorCode": 105, "transactionalId": tid, "transactionState": "",
                        "transactionTimeoutMs": 0, "transactionStartTimeMs": -1,
                        "producerId": -1, "producerEpoch": -1, "topics": []})
        else:
            out.append(_described(m))
    return {"throttleTimeMs": 0, "transactionStates": out}


async def list_transactions(broker, request, conn) -> dict:
    """ListTransactions (api 66): filtered by state names, producer ids, the time open
    (``DurationFilter``, ms) and a regular expression on the id (v2)."""
    coord: TxnCoordinator = broker.state["transactions"]
    body = request.body
    states = set(body["stateFilters"])
    known = set(STATES.values())
    pids = set(body["producerIdFilters"])
    duration = body.get("durationFilter", -1)
    pattern = body.get("transactionalIdPattern")
    try:
        rx = re.compile(pattern) if pattern else None
    except re.error:
        return {"throttleTimeMs": 0, "errorCode": K.INVALID_REQUEST,
                "unknownStateFilters": [], "transactionStates": []}
    await coord.ready()
    now = _now()
    out = []
    for m in coord.listed():
        if states and m.state not in states or pids and m.producer_id not in pids:
            continue
        if duration >= 0 and now - m.start_ms <= duration:  # (shouldInclude's rule)
            continue
        if rx is not None and not rx.fullmatch(m.transactional_id):
            continue
        out.append({"transactionalId": m.transactional_id, "producerId": m.producer_id,
                    "transactionState": m.state})
    return {"throttleTimeMs": 0, "errorCode": K.NONE,
            "unknownStateFilters": sorted(states - known), "transactionStates": out}


async def describe_producers(broker, request, conn) -> dict:
    """DescribeProducers (api 61, KIP-664): each partition's active producers from its
    producer state (what ``kafka-transactions describe-producers`` prints);
    UNKNOWN_TOPIC_OR_PARTITION for a partition this node does not have."""
    manager = broker.manager
    topics = []
    for t in request.body["topics"]:
        parts = []
        for index in t["partitionIndexes"]:
            out = {"partitionIndex": index, "errorCode": K.NONE, "errorMessage": None,
                   "activeProducers": []}
            try:
                lg = manager.get_log(t["name"], index)
            except UnknownTopicOrPartitionError:
                out["errorCode"] = K.UNKNOWN_TOPIC_OR_PARTITION
                parts.append(out)
                continue
            for e in sorted(lg.producer_state.producers.values(), key=lambda e: e.producer_id):
                first = e.current_txn_first_offset
                out["activeProducers"].append({
                    "producerId": e.producer_id, "producerEpoch": e.producer_epoch,
                    "lastSequence": e.last_sequence, "lastTimestamp": e.last_timestamp,
                    "coordinatorEpoch": e.coordinator_epoch,
                    "currentTxnStartOffset": -1 if first is None else first})
            parts.append(out)
        topics.append({"name": t["name"], "partitions": parts})
    return {"throttleTimeMs": 0, "topics": topics}


HANDLERS = {24: add_partitions_to_txn, 25: add_offsets_to_txn, 26: end_txn,
            28: txn_offset_commit, 61: describe_producers, 65: describe_transactions,
            66: list_transactions}

__all__ = ["HANDLERS", "TxnCoordinator", "TxnMeta", "make_state"]
