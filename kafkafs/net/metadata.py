"""Metadata (api 3) and DescribeCluster (api 60): one node leading every partition.

As Kafka 4.1's ``KafkaApis.handleTopicMetadataRequest`` answers on a single node: every
partition's leader, replicas and in-sync replicas are this node, its leader epoch the last
of the partition's ``leader-epoch-checkpoint`` (0 without one); ``Topics`` null (or an empty
list in version 0) means every topic; from version 12 topics asked for by id are looked up
by id only (an unknown id: UNKNOWN_TOPIC_ID); a topic named but missing is created when
``auto.create.topics.enable`` and the request's ``AllowAutoTopicCreation`` say so (with
``num.partitions``), and answered UNKNOWN_TOPIC_OR_PARTITION this time, as Kafka's
``AutoTopicCreationManager`` answers while the creation runs; an invalid name is
INVALID_TOPIC_EXCEPTION. Topics made meanwhile through the mount (``mkdir``) or by another
door are listed at once: the answer is built from the log manager each time.
"""

from __future__ import annotations

import logging
import weakref

import trio

from ..log import checkpoint as ckpt
from ..log.errors import InvalidTopicError, LogError, TopicExistsError
from ..log.names import validate_topic
from . import errors as K

log = logging.getLogger(__name__)

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
AUTHORIZED_NONE = -2147483648
TOPIC_OPERATIONS = 3576  # every topic operation (no authorizer)
CLUSTER_OPERATIONS = 8096
_ZERO_ID = bytes(16)

_epochs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def leader_epoch(lg) -> int:
    """The partition's leader epoch: the last entry of its ``leader-epoch-checkpoint`` (the
    epoch a broker last led it in), 0 when it has none. Read once per log."""
    epoch = _epochs.get(lg)
    if epoch is None:
        epoch = _epochs[lg] = max((e for e, _s in epoch_entries(lg)), default=0)
    return epoch


def epoch_entries(lg) -> list[tuple[int, int]]:
    """``(epoch, start offset)`` of the partition's ``leader-epoch-checkpoint`` ([] without
    one)."""
    try:
        return ckpt.read_leader_epoch_checkpoint(lg.pdir.join("leader-epoch-checkpoint"),
                                                 dir=lg.pdir)
    except (OSError, LogError):
        return []


def _partitions(broker, topic: str, version: int) -> list[dict]:
    out = []
    node = broker.node_id
    for p in broker.manager.partitions(topic):
        try:
            epoch = leader_epoch(broker.manager.get_log(topic, p))
            code, leader = K.NONE, node
        except Exception as exc:  # a partition that cannot be loaded: offline
            log.debug("metadata: %s-%d cannot be loaded: %s", topic, p, exc)
            code, leader, epoch = K.KAFKA_STORAGE_ERROR, -1, -1
        out.append({"errorCode": code, "partitionIndex": p, "leaderId": leader,
                    "leaderEpoch": epoch, "replicaNodes": [node], "isrNodes": [node],
                    "offlineReplicas": [] if leader >= 0 else [node]})
    return out


def topic_entry(broker, topic: str, version: int, include_ops: bool) -> dict:
    """The Metadata answer for an existing ``topic``."""
    return {"errorCode": K.NONE, "name": topic, "topicId": broker.topic_id(topic),
            "isInternal": topic in INTERNAL_TOPICS,
            "partitions": _partitions(broker, topic, version),
            "topicAuthorizedOperations": TOPIC_OPERATIONS if include_ops else AUTHORIZED_NONE}


def _missing(name: str | None, code: int, include_ops: bool, topic_id: bytes = _ZERO_ID) -> dict:
    return {"errorCode": code, "name": name, "topicId": topic_id,
            "isInternal": name in INTERNAL_TOPICS, "partitions": [],
            "topicAuthorizedOperations": AUTHORIZED_NONE if code == K.UNKNOWN_TOPIC_ID or
            not include_ops else TOPIC_OPERATIONS}


async def auto_create(broker, topic: str) -> int:
    """Create ``topic`` as Kafka's ``AutoTopicCreationManager`` would (``num.partitions``;
    the internal topics with their own partition counts); the error code to answer now:
    UNKNOWN_TOPIC_OR_PARTITION once it was asked for, INVALID_TOPIC_EXCEPTION for a bad
    name."""
    try:
        validate_topic(topic)
    except InvalidTopicError:
        return K.INVALID_TOPIC_EXCEPTION
    if broker.core.read_only:
        return K.UNKNOWN_TOPIC_OR_PARTITION
    try:
        await trio.to_thread.run_sync(broker.manager.create_topic, topic)
        log.info("Created topic %s (auto.create.topics.enable)", topic)
    except TopicExistsError:
        pass
    except (LogError, OSError) as exc:
        log.warning("auto-creating topic %s failed: %s", topic, exc)
    return K.UNKNOWN_TOPIC_OR_PARTITION


async def metadata(broker, request, conn) -> dict:
    """``KafkaApis.handleTopicMetadataRequest``: the Metadata response body (auto-creating
    named topics, see the module)."""
    body, v = request.body, request.api_version
    include_ops = bool(body.get("includeTopicAuthorizedOperations"))
    asked = body["topics"]
    topics_out: list[dict] = []
    if v in (10, 11) and asked and any(t["name"] is None or t["topicId"] != _ZERO_ID
                                       for t in asked):
        return {"throttleTimeMs": 0, "brokers": [], "clusterId": None, "controllerId": -1,
                "topics": [_missing(t["name"] or "", K.INVALID_REQUEST, include_ops,
                                    t["topicId"]) for t in asked], "errorCode": K.NONE}
    existing = broker.manager.topics()
    if asked is None or (v == 0 and not asked):
        names = existing
    elif v >= 12 and any(t["topicId"] != _ZERO_ID for t in asked):
        names = []
        for t in asked:
            topic = broker.topic_by_id(t["topicId"])
            if topic is None:
                topics_out.append(_missing(None, K.UNKNOWN_TOPIC_ID, include_ops, t["topicId"]))
            else:
                names.append(topic)
    else:
        names = list(dict.fromkeys(t["name"] for t in asked))
    present = set(existing)
    allow = body.get("allowAutoTopicCreation", True) if v >= 4 else True
    all_topics = asked is None or (v == 0 and not asked)
    for name in names:
        if name in present:
            topics_out.append(topic_entry(broker, name, v, include_ops))
        elif not all_topics and allow and broker.config.auto_create_topics_enable:
            topics_out.append(_missing(name, await auto_create(broker, name), include_ops))
        else:
            try:
                validate_topic(name)
                code = K.UNKNOWN_TOPIC_OR_PARTITION
            except InvalidTopicError:
                code = K.INVALID_TOPIC_EXCEPTION
            topics_out.append(_missing(name, code, include_ops))
    ep = broker.endpoint
    return {"throttleTimeMs": 0,
            "brokers": [{"nodeId": broker.node_id, "host": ep.host, "port": ep.port,
                         "rack": None}],
            "clusterId": broker.cluster_id, "controllerId": broker.node_id,
            "topics": topics_out,
            "clusterAuthorizedOperations": CLUSTER_OPERATIONS
            if body.get("includeClusterAuthorizedOperations") else AUTHORIZED_NONE,
            "errorCode": K.NONE}


async def describe_cluster(broker, request, conn) -> dict:
    """``KafkaApis.handleDescribeCluster``: this node as the cluster."""
    body = request.body
    etype = body.get("endpointType", 1)
    if etype not in (1, 2):
        return {"errorCode": 115 if request.api_version else K.INVALID_REQUEST,
                "errorMessage": f"Unsupported endpoint type {etype}", "clusterId": "",
                "controllerId": -1, "brokers": []}
    if etype == 2:
        return {"errorCode": 114 if request.api_version else K.INVALID_REQUEST,
                "errorMessage": "The request was sent to an endpoint of type BROKER, but we "
                "wanted an endpoint of type CONTROLLER", "clusterId": "", "controllerId": -1,
                "brokers": []}
    ep = broker.endpoint
    return {"throttleTimeMs": 0, "errorCode": K.NONE, "errorMessage": None,
            "endpointType": 1, "clusterId": broker.cluster_id, "controllerId": broker.node_id,
            "brokers": [{"brokerId": broker.node_id, "host": ep.host, "port": ep.port,
                         "rack": None, "isFenced": False}],
            "clusterAuthorizedOperations": CLUSTER_OPERATIONS
            if body.get("includeClusterAuthorizedOperations") else AUTHORIZED_NONE}


HANDLERS = {3: metadata, 60: describe_cluster}
