"""ListOffsets (api 2), OffsetForLeaderEpoch (api 23) and DeleteRecords (api 21).

As Kafka 4.1 answers them on one node (``ReplicaManager.fetchOffset``,
``UnifiedLog.fetchOffsetByTimestamp``, ``LeaderEpochFileCache.endOffsetFor``,
``ReplicaManager.deleteRecords``):

* ListOffsets: -2 the log start offset, -4 the same (no tiered storage), -1 the high
  watermark (read_uncommitted) or last stable offset (read_committed), -3 the record with the
  largest timestamp (version 7+), -5 nothing (-1: no tiered storage), a timestamp of 0 or
  more the first record at or after it, through the ``.timeindex`` (:meth:`Log.offset_for_timestamp`);
  an offset at or past what a consumer may read, or none found, is answered -1 without an
  error; a partition asked twice is INVALID_REQUEST, a negative timestamp Kafka does not
  know (or that the version cannot carry) UNSUPPORTED_VERSION;
* OffsetForLeaderEpoch: the end offset of a leader epoch from the partition's
  ``leader-epoch-checkpoint`` (the current epoch ends at the log end offset);
* DeleteRecords: the log start offset moves up to the offset given (-1: the high
  watermark), above the high watermark is OFFSET_OUT_OF_RANGE, a topic whose
  ``cleanup.policy`` lacks ``delete`` is POLICY_VIOLATION; the segments below it go with the
  next retention pass, and every door stops showing the records at once.
"""

from __future__ import annotations

import logging

import trio

from ..log.errors import LogError, OffsetOutOfRangeError, UnknownTopicOrPartitionError
from ..record.errors import CorruptRecordError
from . import errors as K
from .metadata import INTERNAL_TOPICS, epoch_entries, leader_epoch

log = logging.getLogger(__name__)

_SPECIAL = {-1: 0, -2: 0, -3: 7, -4: 8, -5: 9}  # timestamp -> the first version carrying it


def _log_or_error(broker, topic, index):
    try:
        return broker.manager.get_log(topic, index), K.NONE
    except UnknownTopicOrPartitionError:
        return None, K.UNKNOWN_TOPIC_OR_PARTITION
    except Exception as exc:
        log.warning("%s-%d cannot be loaded: %s", topic, index, exc)
        return None, K.KAFKA_STORAGE_ERROR


def _epoch_check(lg, current: int) -> int:
    if current < 0:
        return K.NONE
    epoch = leader_epoch(lg)
    return K.FENCED_LEADER_EPOCH if current < epoch else \
        K.UNKNOWN_LEADER_EPOCH if current > epoch else K.NONE


def _list_one(broker, topic, p, v, isolation, replica) -> dict:
    index, ts = p["partitionIndex"], p["timestamp"]
    out = {"partitionIndex": index, "errorCode": K.NONE, "timestamp": -1, "offset": -1,
           "leaderEpoch": -1}
    if ts < 0 and _SPECIAL.get(ts, 99) > v:
        out["errorCode"] = K.UNSUPPORTED_VERSION
        return out
    lg, code = _log_or_error(broker, topic, index)
    if lg is None:
        out["errorCode"] = code
        return out
    code = _epoch_check(lg, p.get("currentLeaderEpoch", -1))
    if code:
        out["errorCode"] = code
        return out
    epoch = leader_epoch(lg)
    if replica == -1:
        fetchable = lg.last_stable_offset if isolation == 1 else lg.high_watermark
    else:
        fetchable = lg.log_end_offset
    if ts == -1:
        out.update(offset=fetchable, leaderEpoch=epoch)
        return out
    if ts in (-2, -4):
        out.update(offset=lg.log_start_offset, leaderEpoch=_earliest_epoch(lg))
        return out
    if ts == -5:
        return out
    try:
        found = lg.offset_for_timestamp(ts)
    except (LogError, CorruptRecordError, OSError) as exc:
        log.warning("ListOffsets of %s at %d failed: %s", lg.name, ts, exc)
        out["errorCode"] = K.code_of(exc)
        return out
    if found is not None and found[0] < fetchable:
        out.update(offset=found[0], timestamp=found[1], leaderEpoch=epoch)
    return out


def _earliest_epoch(lg) -> int:
    entries = epoch_entries(lg)
    if entries and entries[0][1] <= lg.log_start_offset:
        return entries[0][0]
    return -1 if entries else 0


async def list_offsets(broker, request, conn) -> dict:
    """``ReplicaManager.fetchOffset`` per partition: the ListOffsets response body."""
    body, v = request.body, request.api_version
    isolation = body.get("isolationLevel", 0)
    replica = body["replicaId"]
    topics = []
    for t in body["topics"]:
        seen: dict[int, dict] = {}
        dup: set[int] = set()
        for p in t["partitions"]:
            if p["partitionIndex"] in seen:
                dup.add(p["partitionIndex"])
                continue
            seen[p["partitionIndex"]] = _list_one(broker, t["name"], p, v, isolation, replica)
        for i in dup:
            seen[i] = {"partitionIndex": i, "errorCode": K.INVALID_REQUEST, "timestamp": -1,
                       "offset": -1, "leaderEpoch": -1}
        topics.append({"name": t["name"], "partitions": list(seen.values())})
    return {"throttleTimeMs": 0, "topics": topics}


def end_offset_for(entries: list[tuple[int, int]], requested: int, current: int,
                   leo: int) -> tuple[int, int]:
    """``LeaderEpochFileCache.endOffsetFor``: (epoch, end offset) of ``requested`` over the
    cache ``entries`` ((epoch, start offset), ascending) whose latest epoch is ``current``
    and which ends at ``leo``."""
    if requested < 0:
        return -1, -1
    if requested == current:
        return requested, leo
    later = [(e, s) for e, s in entries if e > requested]
    if not later:
        return -1, -1
    if not entries or requested < entries[0][0]:
        return requested, later[0][1]
    floor = max(e for e, _s in entries if e <= requested)
    return floor, later[0][1]


async def offset_for_leader_epoch(broker, request, conn) -> dict:
    """``Partition.lastOffsetForLeaderEpoch`` per partition: the response body."""
    topics = []
    for t in request.body["topics"]:
        parts = []
        for p in t["partitions"]:
            out = {"errorCode": K.NONE, "partition": p["partition"], "leaderEpoch": -1,
                   "endOffset": -1}
            lg, code = _log_or_error(broker, t["topic"], p["partition"])
            code = code or _epoch_check(lg, p.get("currentLeaderEpoch", -1))
            if code:
                out["errorCode"] = code
            else:
                entries = epoch_entries(lg) or [(0, 0)]
                epoch, end = end_offset_for(entries, p["leaderEpoch"], leader_epoch(lg),
                                            lg.log_end_offset)
                out.update(leaderEpoch=epoch, endOffset=end)
            parts.append(out)
        topics.append({"topic": t["topic"], "partitions": parts})
    return {"throttleTimeMs": 0, "topics": topics}


async def delete_records(broker, request, conn) -> dict:
    """``ReplicaManager.deleteRecords``: moves log start offsets (in a worker thread)."""
    topics = []
    for t in request.body["topics"]:
        parts = []
        for p in t["partitions"]:
            index, offset = p["partitionIndex"], p["offset"]
            out = {"partitionIndex": index, "lowWatermark": -1, "errorCode": K.NONE}
            lg, code = _log_or_error(broker, t["name"], index)
            if lg is None:
                out["errorCode"] = code
            elif t["name"] in INTERNAL_TOPICS:
                out["errorCode"] = K.INVALID_TOPIC_EXCEPTION
            elif not lg.config.delete:
                out["errorCode"] = K.POLICY_VIOLATION
            elif offset < -1:
                out["errorCode"] = K.OFFSET_OUT_OF_RANGE
            else:
                target = lg.high_watermark if offset == -1 else offset
                try:
                    out["lowWatermark"] = await trio.to_thread.run_sync(
                        lg.increment_log_start_offset, target)
                except OffsetOutOfRangeError:
                    out["errorCode"] = K.OFFSET_OUT_OF_RANGE
                except (LogError, OSError) as exc:
                    out["errorCode"] = K.code_of(exc)
            parts.append(out)
        topics.append({"name": t["name"], "partitions": parts})
    return {"throttleTimeMs": 0, "topics": topics}


HANDLERS = {2: list_offsets, 23: offset_for_leader_epoch, 21: delete_records}
