"""Produce (api 0): a producer's batches appended as a leader appends them.

Kafka 4.1's ``KafkaApis.handleProduceRequest`` and ``ReplicaManager.appendRecords`` on one
node, in their order: a transactional batch without a transactional id fails the whole
request (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); per partition an unknown topic or
partition is UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID by id, version 13; Produce never
creates a topic), a partition's data must be exactly one v2 batch (INVALID_RECORD; ZSTD
below version 7: UNSUPPORTED_COMPRESSION_TYPE), ``acks`` must be -1, 0 or 1
(INVALID_REQUIRED_ACKS), an internal topic takes no client's writes
(INVALID_TOPIC_EXCEPTION); then the batch is validated and appended by
:func:`kafkafs.log.leader_append.append_as_leader`. With one replica, ``acks=all`` is
``acks=1``: the answer comes once the batch is in the segment file (the page cache),
and, when ``flush.messages`` is reached with it, once the log is flushed (as Kafka's
``UnifiedLog.append`` flushes before it returns: ``log.flush.interval.messages=1`` fsyncs
every acknowledged batch); otherwise it reaches the disk by the flush scheduler
(``flush.ms``), as on a broker. ``acks=0`` gets no answer; an error then closes the connection, as Kafka does.
A transactional batch is appended only to a partition of its producer's Ongoing
transaction (the transaction coordinator's verification, :mod:`kafkafs.net.transactions`).
A daemon serving its log dirs read-only (``--read-only``) refuses every produce with
TOPIC_AUTHORIZATION_FAILED, which clients do not retry.
A record is readable through every door (``offset/N``, ``messages``, Fetch, Spark) the
moment its answer is sent.
"""

from __future__ import annotations

import logging
import time

import trio

from ..log.errors import LogError, UnknownTopicOrPartitionError
from ..log.leader_append import append_as_leader
from ..record.batch import ATTRIBUTES_OFFSET, TRANSACTIONAL_MASK, RecordBatch, iter_batches
from ..record.compression import ZSTD
from ..record.errors import CorruptRecordError
from . import errors as K
from .errors import ProtocolError
from .metadata import INTERNAL_TOPICS, leader_epoch

log = logging.getLogger(__name__)


def _error(index: int, code: int, message: str | None = None, log_start: int = -1,
           record_errors=()) -> dict:
    return {"index": index, "errorCode": code, "baseOffset": -1, "logAppendTimeMs": -1,
            "logStartOffset": log_start,
            "recordErrors": [{"batchIndex": i, "batchIndexErrorMessage": m}
                             for i, m in record_errors],
            "errorMessage": message}


def _first_is_transactional(records) -> bool:
    if not records or len(records) < 61:
        return False
    if records[16] > 2:  # (RequestUtils.hasTransactionalRecords: a magic no batch has)
        raise CorruptRecordError(f"a record batch of magic {records[16]}")
    if records[16] < 2:
        return False  # (a legacy message set: validateRecords refuses it, INVALID_RECORD)
    return bool(records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_MASK)


def _one_batch(records, version: int) -> tuple[int, int]:
    """ProduceRequest.validateRecords: (error code, 0) for data that is not one v2 batch,
    (NONE, the batch's size) otherwise (bytes after it that do not make a batch are left
    out, as Kafka trims them)."""
    batches = []
    try:
        for b in iter_batches(records or b""):
            batches.append(b)
            if len(batches) > 1:
                return K.INVALID_RECORD, 0  # "exactly one record batch per partition"
    except CorruptRecordError:
        return K.CORRUPT_MESSAGE, 0
    if not batches:
        return K.INVALID_RECORD, 0  # "at least one record batch per partition"
    b = batches[0]
    if b.magic != 2:
        return K.INVALID_RECORD, 0
    if version < 7 and b.compression == ZSTD:
        return K.UNSUPPORTED_COMPRESSION_TYPE, 0
    return K.NONE, b.size


async def produce(broker, request, conn) -> dict | None:
    """``KafkaApis.handleProduceRequest``: the response body, None for ``acks=0``. Raises
    ProtocolError when an ``acks=0`` produce failed (the connection closes)."""
    body, v = request.body, request.api_version
    acks = body["acks"]
    txn_id = body["transactionalId"]
    topics = body["topicData"]
    try:
        transactional = any(_first_is_transactional(p["records"])
                            for t in topics for p in t["partitionData"])
        whole = K.TRANSACTIONAL_ID_AUTHORIZATION_FAILED \
            if transactional and txn_id is None else None
    except CorruptRecordError:
        transactional, whole = False, K.CORRUPT_MESSAGE
    if transactional:
        await broker.state["transactions"].ready()
    responses = []
    failed = False
    now = int(time.time() * 1000)
    to_flush = []
    for t in topics:
        name = t["name"] if v <= 12 else broker.topic_by_id(t["topicId"])
        parts = []
        for p in t["partitionData"]:
            r = _produce_partition(broker, request, name, p, acks, v, whole, transactional,
                                   now)
            failed = failed or r["errorCode"] != K.NONE
            parts.append(r)
            lg = r.pop("_log", None)
            if lg is not None and lg.unflushed_messages >= lg.config.flush_messages:
                to_flush.append(lg)
        responses.append({"name": t["name"] if v <= 12 else "",
                          "topicId": t.get("topicId", bytes(16)), "partitionResponses": parts})
    for lg in to_flush:  # (the flush policy's count reached: on disk before the answer)
        try:
            await trio.to_thread.run_sync(lg.flush)
        except OSError as exc:
            log.error("flushing %s after a produce failed: %s", lg.name, exc)
    if acks == 0:
        if failed:
            raise ProtocolError("a produce with acks=0 failed: " + "; ".join(
                f"{r['name']}-{pr['index']}: error {pr['errorCode']} {pr['errorMessage'] or ''}"
                for r in responses for pr in r["partitionResponses"] if pr["errorCode"]))
        return None
    return {"responses": responses, "throttleTimeMs": 0}


def _produce_partition(broker, request, topic, p, acks, v, whole, transactional, now) -> dict:
    index = p["index"]
    if whole is not None:
        return _error(index, whole)
    if topic is None:
        return _error(index, K.UNKNOWN_TOPIC_ID)
    try:
        lg = broker.manager.get_log(topic, index)
    except UnknownTopicOrPartitionError:
        return _error(index, K.UNKNOWN_TOPIC_OR_PARTITION)
    except Exception as exc:
        log.warning("produce to %s-%d: the partition cannot be loaded: %s", topic, index, exc)
        return _error(index, K.KAFKA_STORAGE_ERROR, str(exc))
    code, size = _one_batch(p["records"], v)
    if code != K.NONE:
        return _error(index, code)
    if acks not in (-1, 0, 1):
        return _error(index, K.INVALID_REQUIRED_ACKS)
    if topic in INTERNAL_TOPICS and request.client_id != "__admin_client":
        return _error(index, K.INVALID_TOPIC_EXCEPTION)
    if broker.core.read_only:  # (not retriable: a client must not retry it forever)
        return _error(index, K.TOPIC_AUTHORIZATION_FAILED, "kafkafs serves these log dirs "
                      "read-only: produce is refused")
    if transactional:
        header = RecordBatch.from_buffer(memoryview(p["records"])[:size])
        code = broker.state["transactions"].verify_produce(
            request.body["transactionalId"], header.producer_id, header.producer_epoch, topic,
            index) if header.is_transactional else K.NONE
        if code:
            return _error(index, code)
    try:
        res = append_as_leader(lg, memoryview(p["records"])[:size], now=now, leader_epoch=leader_epoch(lg))
    except (LogError, CorruptRecordError, OSError) as exc:
        code = K.code_of(exc)
        errors = getattr(exc, "record_errors", ())
        if code in (K.KAFKA_STORAGE_ERROR, K.UNKNOWN_SERVER_ERROR):
            log.warning("produce to %s failed: %s", lg.name, exc)
        msg = str(exc) if errors or code in (K.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                              K.INVALID_PRODUCER_EPOCH, K.KAFKA_STORAGE_ERROR) \
            else None
        return _error(index, code, msg, lg.log_start_offset if errors else -1, errors)
    return {"index": index, "errorCode": K.NONE, "baseOffset": res.base_offset,
            "logAppendTimeMs": res.log_append_time, "logStartOffset": res.log_start_offset,
            "recordErrors": [], "errorMessage": None, "_log": lg}


HANDLERS = {0: produce}
