"""Records a group coordinator writes, for the offline tools and the mount (docs/design.md
§3.5): offset commits, offset deletions and group deletions, appended to the group's
``__consumer_offsets`` partition as Kafka 4.1 writes them, so that a broker started on the
log dir loads them back.

* An offset commit is record type 1 (``OffsetCommitKey``) with an ``OffsetCommitValue`` of
  version 4 (the version Kafka 4.1 writes without an expire timestamp:
  ``GroupCoordinatorRecordHelpers.offsetCommitValueVersion``): the offset, leader epoch
  -1, metadata ``""``, the commit time (what ``AlterConsumerGroupOffsets`` makes the
  coordinator write: ``kafka-consumer-groups --reset-offsets --execute``).
* Deleting offsets writes their tombstones (``OffsetDelete``); deleting a group writes the
  tombstones of its offsets, then of its records: a classic group's ``GroupMetadata``, a
  consumer group's member assignments, target assignment, members, regular expressions,
  partition metadata and metadata, in Kafka's order (``ConsumerGroup.
  createGroupTombstoneRecords``).

The records of one request go in one batch (magic 2, CreateTime, no producer id), as the
coordinator writes a request's records. ``__consumer_offsets`` is created when it is not
there, with Kafka's defaults for it (``offsets.topic.num.partitions``, compacted). No trio,
no errno.
"""

from __future__ import annotations

import struct
import time

from ..record import tables
from .groups import CONSUMER_OFFSETS, coordinator_partition, offset_commit_key

__all__ = ["OFFSET_COMMIT_VALUE_VERSION", "append_group_records", "group_tombstones",
           "offset_commit_records", "offset_tombstones", "offsets_topic_config"]

OFFSET_COMMIT_VALUE_VERSION = 4  # Kafka 4.1 (4.0: 3), without an expire timestamp
_I16 = struct.Struct(">h")
#: a consumer group's records deleted with it, per record type, in Kafka's order: the
#: ones keyed by member (8, 7), the group's own (6), the members (5), then 16, 4, 3
_CONSUMER_TOMBSTONE_ORDER = (8, 7, 6, 5, 16, 4, 3)


def offset_commit_records(group: str, commits, now_ms: int | None = None) -> list[tuple]:
    """``(key, value)`` of an offset commit per ``(topic, partition, offset)`` of
    ``commits``, committed at ``now_ms`` (default: now). Raises ValueError for a negative
    offset (Kafka's ``Invalid negative offset``)."""
    ts = int(time.time() * 1000) if now_ms is None else now_ms
    value_message = tables.schema("group").by_api(1, "Value")
    out = []
    for topic, partition, offset in commits:
        if offset < 0:
            raise ValueError("Invalid negative offset")
        value = _I16.pack(OFFSET_COMMIT_VALUE_VERSION) + value_message.encode(
            {"offset": offset, "leaderEpoch": -1, "metadata": "", "commitTimestamp": ts},
            OFFSET_COMMIT_VALUE_VERSION)
        out.append((offset_commit_key(group, topic, partition), value))
    return out


def offset_tombstones(group: str, partitions) -> list[tuple]:
    """``(key, None)`` deleting the committed offset of each ``(topic, partition)``."""
    return [(offset_commit_key(group, t, p), None) for t, p in partitions]


def group_tombstones(group) -> list[tuple]:
    """``(key, None)`` of every record of ``group`` (a :class:`~kafkafs.log.groups.Group`),
    in the order Kafka deletes them (offsets are not among them: see
    :func:`offset_tombstones`)."""
    schema = tables.schema("group")
    order = _CONSUMER_TOMBSTONE_ORDER if group.kind == "consumer" else \
        sorted(group.records)
    out = []
    for record_type in order:
        key_message = schema.by_api(record_type, "Key")
        field_names = [f.name for f in key_message.fields]
        for subkey in sorted(group.records.get(record_type, {})):
            data = dict(zip(field_names, (group.group_id, *subkey), strict=True))
            out.append((_I16.pack(record_type) + key_message.encode(data, 0), None))
    return out


def offsets_topic_config(config) -> tuple[int, dict[str, str]]:
    """``(partitions, topic overrides)`` ``__consumer_offsets`` is created with (Kafka's
    ``offsets.topic.num.partitions``, default 50, ``offsets.topic.segment.bytes``,
    compacted), from a :class:`~kafkafs.log.config.BrokerConfig`'s raw properties."""
    props = config.extra
    partitions = config.offsets_topic_num_partitions
    overrides = {"cleanup.policy": "compact",
                 "segment.bytes": str(props.get("offsets.topic.segment.bytes", 104857600))}
    return partitions, overrides


def append_group_records(manager, group: str, records: list[tuple],
                         now_ms: int | None = None) -> tuple[int, int] | None:
    """Append ``records`` (``(key, value or None)``) as one batch to ``group``'s partition
    of ``__consumer_offsets`` (created when missing); ``(partition, first offset)``, or
    None for no records. Raises the log's errors (ReadOnlyLogError, OSError ...)."""
    if not records:
        return None
    if not manager.partitions(CONSUMER_OFFSETS):
        n, overrides = offsets_topic_config(manager.config)
        manager.create_topic(CONSUMER_OFFSETS, n, overrides)
    partition = coordinator_partition(group, max(manager.partitions(CONSUMER_OFFSETS)) + 1)
    lg = manager.get_log(CONSUMER_OFFSETS, partition)
    ts = int(time.time() * 1000) if now_ms is None else now_ms
    first, _last = lg.append([(ts, key, value, ()) for key, value in records])
    return partition, first
