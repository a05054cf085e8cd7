"""CreateTopics (19), DeleteTopics (20), CreatePartitions (37), DescribeLogDirs (35).

As Kafka 4.1's controller checks them on one node (``ReplicationControlManager``), each
topic on its own, the first failed check its answer: more than 10000 partitions in one
request (POLICY_VIOLATION for all), a name given twice or ``__cluster_metadata``
(INVALID_REQUEST), an invalid name or one colliding with an existing topic through
``.``/``_`` (INVALID_TOPIC_EXCEPTION), an existing topic (TOPIC_ALREADY_EXISTS), a null or
bad config (INVALID_CONFIG), manual assignments naming other brokers
(INVALID_REPLICA_ASSIGNMENT), a replication factor other than 1 or -1
(INVALID_REPLICATION_FACTOR: one broker), a partition count below 1 other than -1
(INVALID_PARTITIONS); ``timeoutMs`` 0 or less fails every topic with REQUEST_TIMED_OUT, as
KRaft's controller queue does. The topics are made, deleted and grown through the log
manager, the same calls ``mkdir``/``rmdir`` of the mount and ``kafkafs topics`` make, so every
door sees them at once.
"""

from __future__ import annotations

import logging
import os
import uuid

import trio

from ..log.errors import (InvalidConfigError, InvalidTopicError, LogError, TopicExistsError,
                          UnknownTopicOrPartitionError)
from ..log.names import validate_topic
from . import errors as K
from .configs import topic_configs

log = logging.getLogger(__name__)

MAX_PARTITIONS_PER_REQUEST = 10000


def _created(name, code, message=None) -> dict:
    return {"name": name, "topicId": bytes(16), "errorCode": code, "errorMessage": message,
            "numPartitions": -1, "replicationFactor": -1, "configs": []}


def _check_rf(rf: int) -> tuple[int, str] | None:
    if rf == 0 or rf < -1:
        return K.INVALID_REPLICATION_FACTOR, ("Replication factor must be larger than 0, or "
                                              "-1 to use the default value.")
    if rf > 1:
        return K.INVALID_REPLICATION_FACTOR, (
            f"Unable to replicate the partition {rf} time(s): The target replication factor "
            f"of {rf} cannot be reached because only 1 broker(s) are registered.")
    return None


async def create_topics(broker, request, conn) -> dict:
    """``ReplicationControlManager.createTopics`` on one node: the response body."""
    body = request.body
    manager = broker.manager
    topics = body["topics"]
    default_n = broker.config.num_partitions
    total = sum(default_n if t["numPartitions"] == -1 else max(t["numPartitions"], 0)
                for t in topics)
    if total > MAX_PARTITIONS_PER_REQUEST:
        return {"throttleTimeMs": 0, "topics": [
            _created(t["name"], K.POLICY_VIOLATION,
                     "Excessively large number of partitions per request.") for t in topics]}
    names = [t["name"] for t in topics]
    out = []
    for t in topics:
        name = t["name"]
        if names.count(name) > 1:
            out.append(_created(name, K.INVALID_REQUEST, "Duplicate topic name."))
            continue
        if name == "__cluster_metadata":
            out.append(_created(name, K.INVALID_REQUEST,
                                "Creation of internal topic __cluster_metadata is prohibited."))
            continue
        if body["timeoutMs"] <= 0:
            out.append(_created(name, K.REQUEST_TIMED_OUT))
            continue
        out.append(await _create_one(broker, manager, t, body.get("validateOnly", False),
                                     default_n))
    return {"throttleTimeMs": 0, "topics": out}


async def _create_one(broker, manager, t, validate_only: bool, default_n: int) -> dict:
    name = t["name"]
    try:
        validate_topic(name)
    except InvalidTopicError as exc:
        return _created(name, K.INVALID_TOPIC_EXCEPTION, f"Topic name is invalid: {exc}")
    for other in manager.topics():
        if other != name and other.replace(".", "_") == name.replace(".", "_"):
            return _created(name, K.INVALID_TOPIC_EXCEPTION,
                            f"Topic '{name}' collides with existing topic: {other}")
    if manager.partitions(name):
        return _created(name, K.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    nulls = [c["name"] for c in t["configs"] if c["value"] is None]
    if nulls:
        return _created(name, K.INVALID_CONFIG,
                        f"Null value not supported for topic configs: {','.join(nulls)}")
    overrides = {c["name"]: c["value"] for c in t["configs"]}
    try:
        config = manager.config.log.with_overrides(overrides)
    except InvalidConfigError as exc:
        return _created(name, K.INVALID_CONFIG, str(exc))
    n, rf = t["numPartitions"], t["replicationFactor"]
    if t["assignments"]:
        if rf != -1:
            return _created(name, K.INVALID_REQUEST, "A manual partition assignment was "
                            "specified, but replication factor was not set to -1.")
        if n != -1:
            return _created(name, K.INVALID_REQUEST, "A manual partition assignment was "
                            "specified, but numPartitions was not set to -1.")
        indexes = sorted(a["partitionIndex"] for a in t["assignments"])
        for a in t["assignments"]:
            bad = [b for b in a["brokerIds"] if b != broker.node_id]
            if not a["brokerIds"] or bad or len(a["brokerIds"]) != 1:
                return _created(name, K.INVALID_REPLICA_ASSIGNMENT,
                                f"The manual partition assignment includes broker "
                                f"{bad[0] if bad else a['brokerIds']}, but no such broker is "
                                "registered." if bad else "Invalid replica assignment.")
        if indexes != list(range(len(indexes))):
            return _created(name, K.INVALID_REPLICA_ASSIGNMENT, "partitions should be a "
                            "consecutive 0-based integer sequence")
        n, rf = len(indexes), 1
    else:
        bad_rf = _check_rf(rf)
        if bad_rf:
            return _created(name, *bad_rf)
        if n == 0 or n < -1:
            return _created(name, K.INVALID_PARTITIONS,
                            "Number of partitions was set to an invalid non-positive value.")
        n = default_n if n == -1 else n
        rf = 1
    topic_id = bytes(16)
    if not validate_only:
        try:
            await trio.to_thread.run_sync(manager.create_topic, name, n, overrides)
        except TopicExistsError as exc:
            return _created(name, K.TOPIC_ALREADY_EXISTS, str(exc))
        except (LogError, OSError) as exc:
            return _created(name, K.code_of(exc), str(exc))
        log.info("Created topic %s with %d partition(s) (CreateTopics)", name, n)
        topic_id = broker.topic_id(name)
    else:
        topic_id = uuid.uuid4().bytes
    return {"name": name, "topicId": topic_id, "errorCode": K.NONE, "errorMessage": None,
            "numPartitions": n, "replicationFactor": rf,
            "configs": [{"name": c["name"], "value": c["value"], "readOnly": False,
                         "configSource": c["configSource"], "isSensitive": False}
                        for c in sorted(topic_configs(broker, config, overrides),
                                        key=lambda c: c["name"])]}


async def delete_topics(broker, request, conn) -> dict:
    """``ReplicationControlManager.deleteTopics``: every frontend drops the topic."""
    body, v = request.body, request.api_version
    manager = broker.manager
    if v >= 6:
        wanted = [(t["name"], t["topicId"]) for t in body["topics"]]
    else:
        wanted = [(n, bytes(16)) for n in body["topicNames"]]
    out = []
    seen_names, seen_ids = set(), set()
    for name, tid in wanted:
        r = {"name": name, "topicId": bytes(16), "errorCode": K.NONE, "errorMessage": None}
        has_id = tid != bytes(16)
        if name is None and not has_id:
            r.update(errorCode=K.INVALID_REQUEST,
                     errorMessage="Neither topic name nor id were specified.")
        elif name is not None and has_id:
            r.update(errorCode=K.INVALID_REQUEST,
                     errorMessage="You may not specify both topic name and topic id.")
        elif name is not None and name in seen_names:
            r.update(errorCode=K.INVALID_REQUEST, errorMessage="Duplicate topic name.")
        elif has_id and tid in seen_ids:
            r.update(errorCode=K.INVALID_REQUEST, errorMessage="Duplicate topic id.")
        elif body["timeoutMs"] <= 0:
            r.update(errorCode=K.REQUEST_TIMED_OUT)
        else:
            if has_id:
                seen_ids.add(tid)
                name = broker.topic_by_id(tid)
                if name is None:
                    r.update(name=None, topicId=tid, errorCode=K.UNKNOWN_TOPIC_ID,
                             errorMessage="This server does not host this topic ID.")
                    out.append(r)
                    continue
            seen_names.add(name)
            r["topicId"] = broker.topic_id(name)
            r["name"] = name
            try:
                await trio.to_thread.run_sync(manager.delete_topic, name)
                broker.forget_topic(name)
                broker.core.topic_replaced(name)  # the other frontends drop what they kept
                log.info("Deleted topic %s (DeleteTopics)", name)
            except UnknownTopicOrPartitionError:
                r.update(topicId=bytes(16), errorCode=K.UNKNOWN_TOPIC_OR_PARTITION,
                         errorMessage="This server does not host this topic-partition.")
            except (LogError, OSError) as exc:
                r.update(errorCode=K.code_of(exc), errorMessage=str(exc))
        out.append(r)
    return {"throttleTimeMs": 0, "responses": out}


async def create_partitions(broker, request, conn) -> dict:
    """``ReplicationControlManager.createPartitions``: grows topics."""
    body = request.body
    manager = broker.manager
    names = [t["name"] for t in body["topics"]]
    out = []
    for t in body["topics"]:
        name, count = t["name"], t["count"]
        r = {"name": name, "errorCode": K.NONE, "errorMessage": None}
        current = len(manager.partitions(name))
        if names.count(name) > 1:
            r.update(errorCode=K.INVALID_REQUEST, errorMessage="Duplicate topic name.")
        elif body["timeoutMs"] <= 0:
            r.update(errorCode=K.REQUEST_TIMED_OUT)
        elif not current:
            r.update(errorCode=K.UNKNOWN_TOPIC_OR_PARTITION)
        elif count == current:
            r.update(errorCode=K.INVALID_PARTITIONS,
                     errorMessage=f"Topic already has {current} partition(s).")
        elif count < current:
            r.update(errorCode=K.INVALID_PARTITIONS,
                     errorMessage=f"The topic {name} currently has {current} partition(s); "
                     f"{count} would not be an increase.")
        elif t["assignments"] is not None and len(t["assignments"]) != count - current:
            r.update(errorCode=K.INVALID_REPLICA_ASSIGNMENT,
                     errorMessage=f"Attempted to add {count - current} additional partition(s),"
                     f" but only {len(t['assignments'])} assignment(s) were specified.")
        elif t["assignments"] is not None and any(a["brokerIds"] != [broker.node_id]
                                                  for a in t["assignments"]):
            r.update(errorCode=K.INVALID_REPLICA_ASSIGNMENT,
                     errorMessage="The manual partition assignment names a broker other than "
                     f"{broker.node_id}, the only one registered.")
        elif not body["validateOnly"]:
            try:
                await trio.to_thread.run_sync(manager.add_partitions, name, count)
                log.info("Topic %s now has %d partitions (CreatePartitions)", name, count)
            except (LogError, OSError) as exc:
                r.update(errorCode=K.code_of(exc), errorMessage=str(exc))
        out.append(r)
    return {"throttleTimeMs": 0, "results": out}


async def describe_log_dirs(broker, request, conn) -> dict:
    """``ReplicaManager.describeLogDirs``: sizes of the loaded partitions, per log dir
    (bytes), and each dir's total and usable bytes."""
    manager = broker.manager
    wanted = request.body["topics"]
    want = None if wanted is None else {(t["topic"], p) for t in wanted
                                        for p in t["partitions"]}
    by_dir: dict[str, dict[str, list]] = {d: {} for d in manager.log_dirs}
    for (topic, p), lg in sorted(manager.logs.items()):
        if want is not None and (topic, p) not in want:
            continue
        root = os.path.dirname(lg.dir)
        by_dir.setdefault(root, {}).setdefault(topic, []).append(
            {"partitionIndex": p, "partitionSize": lg.size_in_bytes(), "offsetLag": 0,
             "isFutureKey": False})
    results = []
    for d, topics in by_dir.items():
        try:
            st = os.statvfs(d)
            total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
            code = K.NONE
        except OSError:
            total = usable = -1
            code = K.KAFKA_STORAGE_ERROR
        results.append({"errorCode": code, "logDir": d,
                        "topics": [{"name": t, "partitions": ps}
                                   for t, ps in sorted(topics.items())],
                        "totalBytes": total, "usableBytes": usable})
    return {"throttleTimeMs": 0, "errorCode": K.NONE, "results": results}


HANDLERS = {19: create_topics, 20: delete_topics, 37: create_partitions,
            35: describe_log_dirs}
