"""The replica placement of one node: DescribeTopicPartitions (75), ElectLeaders (43),
Alter/ListPartitionReassignments (45/46), AlterReplicaLogDirs (34), ListConfigResources (74).

One node holds one replica of every partition and leads it, so Kafka's answers are the
stable cluster's: DescribeTopicPartitions lists partitions as Metadata does, in name order,
at most ``ResponsePartitionLimit`` per answer with a cursor to the next (KIP-966's
pagination); a preferred or unclean election is not needed (ELECTION_NOT_NEEDED); a
reassignment to this node alone is done already, one naming another broker is
INVALID_REPLICA_ASSIGNMENT, and none is ever ongoing; a replica moved to the log dir it is in
stays (NONE), to a dir that is not one of ``log.dirs`` is LOG_DIR_NOT_FOUND, and to another
of them is refused (KAFKA_STORAGE_ERROR: kafkafs moves replicas between log dirs offline,
``kafkafs reassign``); ListConfigResources lists the topics and this broker.
"""

from __future__ import annotations

import os

from . import errors as K
from .metadata import AUTHORIZED_NONE, INTERNAL_TOPICS, TOPIC_OPERATIONS, _partitions

ELECTION_NOT_NEEDED = 84


async def describe_topic_partitions(broker, request, conn) -> dict:
    """DescribeTopicPartitions (KIP-966): Metadata's partitions, paginated."""
    body = request.body
    limit = max(1, body["responsePartitionLimit"])
    cursor = body["cursor"]
    manager = broker.manager
    names = sorted({t["name"] for t in body["topics"]}) if body["topics"] else \
        manager.topics()
    if cursor is not None:
        names = [n for n in names if n >= cursor["topicName"]]
    topics, left, next_cursor = [], limit, None
    for name in names:
        if not manager.partitions(name):
            topics.append({"errorCode": K.UNKNOWN_TOPIC_OR_PARTITION, "name": name,
                           "topicId": bytes(16), "isInternal": False, "partitions": [],
                           "topicAuthorizedOperations": AUTHORIZED_NONE})
            continue
        parts = _partitions(broker, name, 13)
        if cursor is not None and name == cursor["topicName"]:
            parts = [p for p in parts if p["partitionIndex"] >= cursor["partitionIndex"]]
        if left <= 0:
            next_cursor = {"topicName": name, "partitionIndex": parts[0]["partitionIndex"]
                           if parts else 0}
            break
        shown = parts[:left]
        left -= len(shown)
        topics.append({"errorCode": K.NONE, "name": name, "topicId": broker.topic_id(name),
                       "isInternal": name in INTERNAL_TOPICS,
                       "partitions": [{**p, "eligibleLeaderReplicas": None,
                                       "lastKnownElr": None} for p in shown],
                       "topicAuthorizedOperations": TOPIC_OPERATIONS})
        if len(shown) < len(parts):
            next_cursor = {"topicName": name, "partitionIndex": parts[len(shown)]
                           ["partitionIndex"]}
            break
    return {"throttleTimeMs": 0, "topics": topics, "nextCursor": next_cursor}


async def elect_leaders(broker, request, conn) -> dict:
    """ElectLeaders: ELECTION_NOT_NEEDED for every known partition."""
    manager = broker.manager
    wanted = request.body["topicPartitions"]
    if wanted is None:
        wanted = [{"topic": t, "partitions": manager.partitions(t)} for t in manager.topics()]
    results = []
    for t in wanted:
        known = set(manager.partitions(t["topic"]))
        results.append({"topic": t["topic"], "partitionResult": [
            {"partitionId": p, "errorCode": ELECTION_NOT_NEEDED if p in known else
             K.UNKNOWN_TOPIC_OR_PARTITION,
             "errorMessage": "Leader election not needed for topic partition." if p in known
             else "The partition does not exist."} for p in t["partitions"]]})
    return {"throttleTimeMs": 0, "errorCode": K.NONE, "replicaElectionResults": results}


async def alter_partition_reassignments(broker, request, conn) -> dict:
    """AlterPartitionReassignments: this node alone is already the assignment."""
    manager = broker.manager
    out = []
    for t in request.body["topics"]:
        known = set(manager.partitions(t["name"]))
        parts = []
        for p in t["partitions"]:
            index, replicas = p["partitionIndex"], p["replicas"]
            if index not in known:
                code, msg = K.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
            elif replicas is None:
                code, msg = 85, "No reassignment is in progress for this partition."
            elif replicas != [broker.node_id]:
                code, msg = K.INVALID_REPLICA_ASSIGNMENT, (
                    f"The manual partition assignment includes brokers other than "
                    f"{broker.node_id}, the only one registered.")
            else:
                code, msg = K.NONE, None
            parts.append({"partitionIndex": index, "errorCode": code, "errorMessage": msg})
        out.append({"name": t["name"], "partitions": parts})
    return {"throttleTimeMs": 0, "allowReplicationFactorChange": True, "errorCode": K.NONE,
            "errorMessage": None, "responses": out}


async def list_partition_reassignments(broker, request, conn) -> dict:
    """ListPartitionReassignments: none is ever ongoing."""
    return {"throttleTimeMs": 0, "errorCode": K.NONE, "errorMessage": None, "topics": []}


async def alter_replica_log_dirs(broker, request, conn) -> dict:
    """AlterReplicaLogDirs: a replica stays in its log dir (see the module)."""
    manager = broker.manager
    dirs = {os.path.abspath(d) for d in manager.log_dirs}
    results: dict[str, list] = {}
    for d in request.body["dirs"]:
        path = os.path.abspath(d["path"])
        for t in d["topics"]:
            for p in t["partitions"]:
                if path not in dirs:
                    code = K.LOG_DIR_NOT_FOUND
                else:
                    try:
                        lg = manager.get_log(t["name"], p)
                        code = K.NONE if os.path.dirname(lg.dir) == path else \
                            K.KAFKA_STORAGE_ERROR
                    except Exception:
                        code = 9  # REPLICA_NOT_AVAILABLE
                results.setdefault(t["name"], []).append({"partitionIndex": p,
                                                          "errorCode": code})
    return {"throttleTimeMs": 0, "results": [{"topicName": n, "partitions": ps}
                                             for n, ps in results.items()]}


async def list_config_resources(broker, request, conn) -> dict:
    """ListConfigResources: the topics and this broker."""
    types = set(request.body.get("resourceTypes") or ()) if request.api_version >= 1 else {16}
    out = []
    if request.api_version >= 1 and (not types or 2 in types):
        out += [{"resourceName": t, "resourceType": 2} for t in broker.manager.topics()]
    if request.api_version >= 1 and (not types or 4 in types):
        out.append({"resourceName": str(broker.node_id), "resourceType": 4})
    return {"throttleTimeMs": 0, "errorCode": K.NONE, "configResources": out}


HANDLERS = {75: describe_topic_partitions, 43: elect_leaders,
            45: alter_partition_reassignments, 46: list_partition_reassignments,
            34: alter_replica_log_dirs, 74: list_config_resources}
