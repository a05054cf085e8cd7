"""The share coordinator's records in ``__share_group_state`` (``ShareSnapshot``,
``ShareUpdate``), in the table language of :mod:`kafkafs.record.schema`; ``api`` is the
record type.

The facts are Apache Kafka's (the JSON message definitions named above each block); the
form is ours."""

TABLE = r"""
# ==========================================================================================
# SHARE-COORDINATOR RECORDS: NOT in __consumer_offsets.
# ShareSnapshot and ShareUpdate live in __share_group_state, the share coordinator's own topic,
# with their own record types (0 ShareSnapshot, 1 ShareUpdate). Kept here only for reference.
# Source: share-coordinator/src/main/resources/common/message/*.json.
# ==========================================================================================

# ShareSnapshotKey.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by 5a607db6eae1 2025-05-28 MINOR: Improve share coordinator record schemas (#19830))
# 4.0.0: "type": "data" with validVersions 0 (the record type). Same bytes.
message ShareSnapshotKey api 0 versions 0 flexible none
  GroupId string 0
  TopicId uuid 0
  Partition int32 0

# ShareSnapshotValue.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by 150412d7f770 2025-06-23 MINOR: Change snapshot epoch type to int32 in schema. (#20016) (#20018))
# 4.1 vs 4.0.0: in 4.0 SnapshotEpoch was uint16 with versions 0, and StartOffset, StateBatches and the StateBatch
# fields had versions 0. CreateTimestamp and WriteTimestamp are new in 4.1 (KAFKA-18170, PR #19432).
# SnapshotEpoch became int32 in PR #20016, backported to 4.1 as #20018.
# later (4.2, KIP-1226; 4.2.0-rc1 and indexed @ 0c9eef59f75de8c0235dcc5740c47b1a18a0a6d8): DeliveryCompleteCount int32 0+ tag 0 tagged 0+ default -1
message ShareSnapshotValue api 0 versions 0 flexible 0+
  SnapshotEpoch int32 0+
  StateEpoch int32 0+
  LeaderEpoch int32 0+
  StartOffset int64 0+
  CreateTimestamp int64 0+
  WriteTimestamp int64 0+
  StateBatches []StateBatch 0+
    FirstOffset int64 0+
    LastOffset int64 0+
    DeliveryState int8 0+
    DeliveryCount int16 0+

# ShareUpdateKey.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by 5a607db6eae1 2025-05-28 MINOR: Improve share coordinator record schemas (#19830))
# 4.0.0: "type": "data" with validVersions 1 (the record type). Same bytes.
message ShareUpdateKey api 1 versions 0 flexible none
  GroupId string 0
  TopicId uuid 0
  Partition int32 0

# ShareUpdateValue.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by 150412d7f770 2025-06-23 MINOR: Change snapshot epoch type to int32 in schema. (#20016) (#20018))
# 4.1 vs 4.0.0: in 4.0 SnapshotEpoch was uint16 with versions 0, and StartOffset, StateBatches and the StateBatch
# fields had versions 0. SnapshotEpoch is int32 since PR #20016 (4.1 backport #20018).
# later (4.2, KIP-1226; indexed @ 0c9eef59f75de8c0235dcc5740c47b1a18a0a6d8): DeliveryCompleteCount int32 0+ tag 0 tagged 0+ default -1
message ShareUpdateValue api 1 versions 0 flexible 0+
  SnapshotEpoch int32 0+
  LeaderEpoch int32 0+
  StartOffset int64 0+
  StateBatches []StateBatch 0+
    FirstOffset int64 0+
    LastOffset int64 0+
    DeliveryState int8 0+
    DeliveryCount int16 0+
"""
