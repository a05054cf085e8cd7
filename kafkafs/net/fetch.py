"""Fetch (api 1): byte ranges of the segment files, sent with ``sendfile``.

Kafka 4.1's ``KafkaApis.handleFetchRequest`` and ``ReplicaManager.fetchMessages`` on one
node. Each partition is read through the one read path, :meth:`kafkafs.log.log.Log.read`,
which answers a byte range of one segment (Kafka's ``FetchDataInfo``); the response carries
that range as a :class:`~kafkafs.record.schema.Deferred` and the sender copies it from the
file to the socket with ``os.sendfile``: no record byte passes through Python. The rules:

* a consumer's fetch (replica id below 0) reads up to the high watermark (the log end
  offset of a single replica) under ``read_uncommitted`` and up to the last stable offset
  under ``read_committed``, with the aborted transactions of the range; a replica id of 0
  or more reads to the log end offset;
* ``max.bytes`` (capped by ``fetch.max.bytes``) bounds the whole response and
  ``PartitionMaxBytes`` each partition, except that the first partition that has data
  returns its whole first batch however large (KIP-74); a later partition whose first
  batch does not fit what is left returns nothing;
* an offset below the log start offset or above the log end offset is
  OFFSET_OUT_OF_RANGE; a current leader epoch below the partition's is
  FENCED_LEADER_EPOCH, above it UNKNOWN_LEADER_EPOCH; an error partition reports -1 for its
  high watermark, last stable offset and log start offset;
* the answer waits (``max.wait.ms``) until ``min.bytes`` are readable, woken by every
  append to a partition it reads -- from a producer, the mount (``>>``), a bulk commit --
  and answers at once on any error;
* fetch sessions as :mod:`kafkafs.net.fetch_sessions` keeps them.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict

import trio
import trio.lowlevel

from ..log.errors import LogError, OffsetOutOfRangeError, UnknownTopicOrPartitionError
from ..log.read import FETCH_HIGH_WATERMARK, FETCH_LOG_END, FETCH_TXN_COMMITTED
from ..record.errors import CorruptRecordError
from ..record.schema import Deferred
from . import errors as K
from .fetch_sessions import FINAL_EPOCH, INITIAL_EPOCH, FetchSessions, PartitionState, \
    SessionError
from .metadata import leader_epoch

log = logging.getLogger(__name__)


def make_state(broker) -> FetchSessions:
    return FetchSessions(broker.config.max_incremental_fetch_session_cache_slots)


def _error_part(index: int, code: int) -> dict:
    return {"partitionIndex": index, "errorCode": code, "highWatermark": -1,
            "lastStableOffset": -1, "logStartOffset": -1, "abortedTransactions": None,
            "preferredReadReplica": -1, "records": b""}


class _Read:
    """One partition's read: ``part`` (its response dict), ``size`` (record bytes),
    ``log`` (None on an error)."""

    __slots__ = ("key", "part", "size", "log", "error")

    def __init__(self, key, part, size=0, lg=None, error=False):
        self.key, self.part, self.size, self.log, self.error = key, part, size, lg, error


def _read_partition(broker, topic, index, st: PartitionState, isolation, limit, min_one):
    key = (topic, index)
    if topic is None or isinstance(topic, tuple):  # (an id no topic has: ("?id", id))
        return _Read(key, _error_part(index, K.UNKNOWN_TOPIC_ID), error=True)
    try:
        lg = broker.manager.get_log(topic, index)
    except UnknownTopicOrPartitionError:
        return _Read(key, _error_part(index, K.UNKNOWN_TOPIC_OR_PARTITION), error=True)
    except Exception as exc:
        log.warning("fetch from %s-%d: the partition cannot be loaded: %s", topic, index, exc)
        return _Read(key, _error_part(index, K.KAFKA_STORAGE_ERROR), error=True)
    cle = st.current_leader_epoch
    if cle >= 0:
        epoch = leader_epoch(lg)
        if cle < epoch:
            return _Read(key, _error_part(index, K.FENCED_LEADER_EPOCH), lg=lg, error=True)
        if cle > epoch:
            return _Read(key, _error_part(index, K.UNKNOWN_LEADER_EPOCH), lg=lg, error=True)
    try:
        info = lg.read(st.fetch_offset, limit, isolation, min_one_message=min_one)
    except OffsetOutOfRangeError:
        return _Read(key, _error_part(index, K.OFFSET_OUT_OF_RANGE), lg=lg, error=True)
    except (LogError, CorruptRecordError, OSError) as exc:
        log.warning("fetch from %s at %d failed: %s", lg.name, st.fetch_offset, exc)
        return _Read(key, _error_part(index, K.code_of(exc)), lg=lg, error=True)
    size = 0 if info.first_entry_incomplete and not min_one else info.size
    aborted = None
    if isolation == FETCH_TXN_COMMITTED:
        aborted = [{"producerId": a.producer_id, "firstOffset": a.first_offset}
                   for a in (info.aborted or ())]
    part = {"partitionIndex": index, "errorCode": K.NONE,
            "highWatermark": info.high_watermark, "lastStableOffset": info.last_stable_offset,
            "logStartOffset": info.log_start_offset, "abortedTransactions": aborted,
            "preferredReadReplica": -1,
            "records": Deferred(size, info) if size else b""}
    return _Read(key, part, size, lg)


def _read_all(broker, wanted, ids, isolation, max_bytes) -> list[_Read]:
    out = []
    remaining = max_bytes
    min_one = True
    for (topic, index), st in wanted.items():
        r = _read_partition(broker, topic, index, st, isolation,
                            max(0, min(st.max_bytes, remaining)), min_one)
        if r.size:
            min_one = False
            remaining -= r.size
        out.append(r)
    return out


async def _wait_for_data(logs, deadline: float) -> None:
    """Return once one of ``logs`` changed (an append, a roll, a truncation) or at
    ``deadline`` (trio time)."""
    event = trio.Event()
    token = trio.lowlevel.current_trio_token()

    def changed(_lg):
        try:
            token.run_sync_soon(event.set)
        except trio.RunFinishedError:
            pass

    for lg in logs:
        lg.on_change.append(changed)
    try:
        with trio.move_on_at(deadline):
            await event.wait()
    finally:
        for lg in logs:
            try:
                lg.on_change.remove(changed)
            except ValueError:
                pass


def _request_partitions(broker, body, v) -> tuple[OrderedDict, dict]:
    """(topic, partition) -> PartitionState in request order, and topic -> topic id."""
    wanted: OrderedDict = OrderedDict()
    ids: dict = {}
    for t in body["topics"]:
        if v >= 13:
            topic = broker.topic_by_id(t["topicId"])
            tid = t["topicId"]
        else:
            topic, tid = t["topic"], b""
        for p in t["partitions"]:
            key = (topic if topic is not None else ("?id", tid), p["partition"])
            wanted[key] = PartitionState(tid, p["fetchOffset"], p["partitionMaxBytes"],
                                         p["currentLeaderEpoch"])
            ids[key[0]] = tid
    return wanted, ids


def _group(reads: list[_Read], ids: dict, v: int) -> list[dict]:
    out: list[dict] = []
    for r in reads:
        topic = r.key[0]
        name = topic if isinstance(topic, str) else ""
        if out and out[-1]["_key"] == topic:
            out[-1]["partitions"].append(r.part)
        else:
            out.append({"_key": topic, "topic": name, "topicId": ids.get(topic, bytes(16)) or
                        bytes(16), "partitions": [r.part]})
    for t in out:
        del t["_key"]
    return out


async def fetch(broker, request, conn) -> dict:
    """``KafkaApis.handleFetchRequest``: the response body, its records as
    :class:`~kafkafs.record.schema.Deferred` ranges of segment files (waits up to
    ``maxWaitMs`` for ``minBytes``)."""
    body, v = request.body, request.api_version
    sessions: FetchSessions = broker.state["fetch"]
    replica = body["replicaId"] if v < 15 else (body["replicaState"] or {}).get("replicaId", -1)
    if replica >= 0:
        isolation = FETCH_LOG_END
    elif body.get("isolationLevel", 0) == 1:
        isolation = FETCH_TXN_COMMITTED
    else:
        isolation = FETCH_HIGH_WATERMARK
    max_bytes = min(body.get("maxBytes", 2**31 - 1), broker.config.fetch_max_bytes)
    min_bytes = min(body["minBytes"], max_bytes)
    sid = body.get("sessionId", 0) if v >= 7 else 0
    sepoch = body.get("sessionEpoch", FINAL_EPOCH) if v >= 7 else FINAL_EPOCH
    wanted, ids = _request_partitions(broker, body, v)
    session = None
    incremental = False
    try:
        if sepoch in (FINAL_EPOCH, INITIAL_EPOCH):
            if sid:
                sessions.close(sid)
            if sepoch == INITIAL_EPOCH and v >= 7 and wanted:
                session = sessions.open(v >= 13, OrderedDict(wanted))
        else:
            session = sessions.incremental(sid, sepoch, v >= 13)
            incremental = True
            for key, st in wanted.items():
                old = session.partitions.get(key)
                if old is not None:
                    st.high_watermark, st.log_start_offset = old.high_watermark, \
                        old.log_start_offset
                session.partitions[key] = st
            for t in body.get("forgottenTopicsData", ()):
                topic = broker.topic_by_id(t["topicId"]) if v >= 13 else t["topic"]
                for p in t["partitions"]:
                    session.partitions.pop((topic, p), None)
            wanted = session.partitions
            ids = {k[0]: st.topic_id for k, st in wanted.items()}
    except SessionError as exc:
        return {"throttleTimeMs": 0, "errorCode": exc.code, "sessionId": 0, "responses": []}
    deadline = trio.current_time() + max(0, body["maxWaitMs"]) / 1000
    while True:
        reads = _read_all(broker, wanted, ids, isolation, max_bytes)
        total = sum(r.size for r in reads)
        if total >= min_bytes or body["maxWaitMs"] <= 0 or any(r.error for r in reads) \
                or not reads or trio.current_time() >= deadline:
            break
        async with broker.parked():
            await _wait_for_data({r.log for r in reads if r.log is not None}, deadline)
    if session is not None:
        if incremental:
            shown = []
            for r in reads:
                st = session.partitions.get(r.key)
                p = r.part
                changed = r.size > 0 or p["errorCode"] != K.NONE or st is None or \
                    st.high_watermark != p["highWatermark"] or \
                    st.log_start_offset != p["logStartOffset"]
                if st is not None:
                    st.high_watermark = -1 if p["errorCode"] else p["highWatermark"]
                    st.log_start_offset = p["logStartOffset"]
                if changed:
                    shown.append(r)
            reads = shown
        else:
            for r in reads:
                st = session.partitions.get(r.key)
                if st is not None:
                    st.high_watermark = r.part["highWatermark"]
                    st.log_start_offset = r.part["logStartOffset"]
        for r in reads:  # those that returned data go last next time
            if r.size and r.key in session.partitions:
                session.partitions.move_to_end(r.key)
        if incremental:  # (a new session expects epoch 1 next: it was made with it)
            session.epoch = FetchSessions.next_epoch(session.epoch)
        session.last_used = time.monotonic()
        if incremental and not session.partitions:
            sessions.close(session.id)
            session = None
    # readable partitions first, then the erroneous ones (KafkaApis' order)
    reads = [r for r in reads if not r.error] + [r for r in reads if r.error]
    return {"throttleTimeMs": 0, "errorCode": K.NONE,
            "sessionId": session.id if session is not None else 0,
            "responses": _group(reads, ids, v)}


HANDLERS = {1: fetch}
