"""A KRaft cluster's metadata, replayed from ``__cluster_metadata-0`` (docs/design.md §3.5;
Kafka's ``MetadataLoader``/``MetadataDelta``): the newest snapshot
(``<end offset>-<epoch>.checkpoint``), then the log's records from the snapshot's end
offset on.

What is kept: topics (``TopicRecord``, ``RemoveTopicRecord``), their partitions
(``PartitionRecord``, then ``PartitionChangeRecord`` changes: leader, ISR, replicas, ELR,
last known ELR, adding and removing replicas), topic and broker configs (``ConfigRecord``;
a null value removes a key) and brokers (``RegisterBrokerRecord``: rack;
``UnregisterBrokerRecord``). Records the tables cannot decode are skipped (Kafka's loader
would stop; a copy of a damaged log dir is still worth reading). No trio, no errno.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from ..record.errors import CorruptRecordError
from ..record.internal import METADATA_TOPIC, decode_metadata
from ..record.schema_json import uuid_string
from .bytesource import FdSource
from .errors import LogError
from .walk import walk_batches

__all__ = ["ClusterMetadata", "PartitionInfo", "TopicInfo", "load_metadata"]

TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4  # ConfigRecord.resourceType (ConfigResource.Type)
_SNAPSHOT = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


@dataclass
class PartitionInfo:
    """A partition's registration: ``replicas``, ``isr``, ``leader`` (-1: none),
    ``leader_epoch``, ``elr``, ``last_known_elr``, ``adding``, ``removing``."""

    partition: int
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int = 0
    elr: list[int] = field(default_factory=list)
    last_known_elr: list[int] = field(default_factory=list)
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)


@dataclass
class TopicInfo:
    """A topic: ``name``, ``topic_id`` (Kafka's text form), ``partitions`` by id,
    ``configs`` (its ConfigRecords)."""

    name: str
    topic_id: str
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)


@dataclass
class ClusterMetadata:
    """The replayed state: ``topics`` by name, ``brokers`` ({id: rack or None}),
    ``broker_configs`` ({broker id or "" for the cluster default: {key: value}}), and
    ``records``/``skipped`` (counts) and the ``snapshot`` used (a file name, or None)."""

    topics: dict[str, TopicInfo] = field(default_factory=dict)
    brokers: dict[int, str | None] = field(default_factory=dict)
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    records: int = 0
    skipped: int = 0
    snapshot: str | None = None
    _by_id: dict[str, str] = field(default_factory=dict)

    def apply(self, value) -> None:
        """Replay one metadata record's value."""
        try:
            message, _version, d = decode_metadata(value)
        except CorruptRecordError:
            self.skipped += 1
            return
        self.records += 1
        name = message.name
        if name == "TopicRecord":
            tid = uuid_string(d["topicId"])
            self.topics[d["name"]] = TopicInfo(d["name"], tid)
            self._by_id[tid] = d["name"]
        elif name == "RemoveTopicRecord":
            topic = self._by_id.pop(uuid_string(d["topicId"]), None)
            if topic is not None:
                self.topics.pop(topic, None)
        elif name == "PartitionRecord":
            t = self._topic(d["topicId"])
            if t is not None:
                t.partitions[d["partitionId"]] = PartitionInfo(
                    d["partitionId"], list(d["replicas"]), list(d["isr"]), d["leader"],
                    d.get("leaderEpoch", 0), list(d.get("eligibleLeaderReplicas") or []),
                    list(d.get("lastKnownElr") or []), list(d.get("addingReplicas") or []),
                    list(d.get("removingReplicas") or []))
        elif name == "PartitionChangeRecord":
            self._change(d)
        elif name == "ConfigRecord":
            self._config(d)
        elif name == "RegisterBrokerRecord":
            self.brokers[d["brokerId"]] = d.get("rack")
        elif name == "UnregisterBrokerRecord":
            self.brokers.pop(d["brokerId"], None)

    def _topic(self, topic_id: bytes) -> TopicInfo | None:
        name = self._by_id.get(uuid_string(topic_id))
        return None if name is None else self.topics.get(name)

    def _change(self, d: dict) -> None:
        t = self._topic(d["topicId"])
        p = None if t is None else t.partitions.get(d["partitionId"])
        if p is None:
            return
        # (fields at their default mean "no change": PartitionChangeRecord's tagged
        # fields, and a leader of -2, NO_LEADER_CHANGE)
        if d.get("isr") is not None:
            p.isr = list(d["isr"])
        if d.get("leader", -2) != -2:
            p.leader = d["leader"]
            p.leader_epoch += 1
        for key, attr in (("replicas", "replicas"), ("removingReplicas", "removing"),
                          ("addingReplicas", "adding"), ("eligibleLeaderReplicas", "elr"),
                          ("lastKnownElr", "last_known_elr")):
            if d.get(key) is not None:
                setattr(p, attr, list(d[key]))

    def _config(self, d: dict) -> None:
        kind, resource, key, value = d["resourceType"], d["resourceName"], d["name"], \
            d.get("value")
        if kind == TOPIC_RESOURCE:
            t = self.topics.get(resource)
            if t is None:
                return
            configs = t.configs
        elif kind == BROKER_RESOURCE:
            configs = self.broker_configs.setdefault(resource, {})
        else:
            return
        if value is None:
            configs.pop(key, None)
        else:
            configs[key] = value


def _latest_snapshot(pdir: str) -> tuple[str, int] | None:
    best = None
    try:
        names = os.listdir(pdir)
    except OSError:
        return None
    for name in names:
        m = _SNAPSHOT.match(name)
        if m and (best is None or int(m.group(1)) > best[1]):
            best = (name, int(m.group(1)))
    return best


def _replay_file(meta: ClusterMetadata, path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        source = FdSource(fd, path)
        for batch in walk_batches(source, 0, os.fstat(fd).st_size, validate=True):
            if batch.is_control:
                continue
            for _o, _ts, _k, value, _h in batch.record_tuples():
                meta.apply(value)
    finally:
        os.close(fd)


def load_metadata(manager) -> ClusterMetadata | None:
    """The cluster metadata of the log dirs of ``manager`` (a LogManager), or None when they
    hold no ``__cluster_metadata-0``. Raises CorruptRecordError at damage in the snapshot or
    the log (every record before it replayed)."""
    if 0 not in manager.partitions(METADATA_TOPIC):
        return None
    try:
        lg = manager.get_log(METADATA_TOPIC, 0)
    except LogError:
        return None
    meta = ClusterMetadata()
    start = lg.log_start_offset
    snap = _latest_snapshot(lg.dir)
    if snap is not None:
        _replay_file(meta, os.path.join(lg.dir, snap[0]))
        meta.snapshot = snap[0]
        start = max(start, snap[1])
    for batch in lg.batches(start):
        if batch.is_control:
            continue
        for offset, _ts, _k, value, _h in batch.record_tuples():
            if offset >= start:
                meta.apply(value)
    return meta

