"""The group coordinator's records in ``__consumer_offsets`` (offset commits, classic group
metadata, the consumer, share and streams group records of the new protocol), in the
table language of :mod:`kafkafs.record.schema`; ``api`` is the record type (the int16
that starts every key).

The facts are Apache Kafka's (the JSON message definitions named above each block); the
form is ours."""

TABLE = r"""
# group.ks -- records of __consumer_offsets (group coordinator), Apache Kafka 4.1
# Language: kafkafs schema table language v1 (/work/research/DSL.md).
#
# Source: apache/kafka group-coordinator/src/main/resources/common/message/*.json at release tag
# 4.1.1, commit be816b82d25370ceac697ccf7c88cea873e9b4e3 (2025-10-26). Every file is byte-identical
# at 4.1.0 (13f70256db3c994c590e5d262a7cc50b9e973204). Read with git from the local mirror
# /work/.mirror/aiven+inkless/repo, a fork that carries apache/kafka's release tags, and
# checked against the indexed apache/kafka versions read with read_file: wherever a block
# names an "indexed version", that version has the same facts.
#
# api = the file's apiKey = the record type: the int16 that starts every key in the topic.
# A key and its value share it. The value starts with its own int16 schema version. Key
# schemas are version 0. The key's prefix is the record type, not a version; Kafka reads the
# key body the same way whatever that prefix is.
#
#   api  key / value                                                 4.1 status
#    0   LegacyOffsetCommitKey / LegacyOffsetCommitValue              read (old brokers)
#    1   OffsetCommitKey / OffsetCommitValue                          written
#    2   GroupMetadataKey / GroupMetadataValue                        classic groups
#    3   ConsumerGroupMetadataKey / ConsumerGroupMetadataValue
#    4   ConsumerGroupPartitionMetadataKey / ...Value                 deprecated in 4.1 (KIP-1101), still defined
#    5   ConsumerGroupMemberMetadataKey / ...Value
#    6   ConsumerGroupTargetAssignmentMetadataKey / ...Value
#    7   ConsumerGroupTargetAssignmentMemberKey / ...Value
#    8   ConsumerGroupCurrentMemberAssignmentKey / ...Value
#    9   ShareGroupPartitionMetadataKey / ...Value                    4.0 only; removed in 4.1, 9 unused
#   10   ShareGroupMemberMetadataKey / ...Value
#   11   ShareGroupMetadataKey / ShareGroupMetadataValue
#   12   ShareGroupTargetAssignmentMetadataKey / ...Value
#   13   ShareGroupTargetAssignmentMemberKey / ...Value
#   14   ShareGroupCurrentMemberAssignmentKey / ...Value
#   15   ShareGroupStatePartitionMetadataKey / ...Value
#   16   ConsumerGroupRegularExpressionKey / ...Value
#   17   StreamsGroupMetadataKey / StreamsGroupMetadataValue          new in 4.1 (KIP-1071, early access)
#   18   (StreamsGroupPartitionMetadata: trunk Dec 2024 to 2025 only, never in a release; 18 unused)
#   19   StreamsGroupMemberMetadataKey / ...Value
#   20   StreamsGroupTargetAssignmentMetadataKey / ...Value
#   21   StreamsGroupTargetAssignmentMemberKey / ...Value
#   22   StreamsGroupCurrentMemberAssignmentKey / ...Value
#   23   StreamsGroupTopologyKey / StreamsGroupTopologyValue
#   __share_group_state (share coordinator), last section: 0 ShareSnapshot, 1 ShareUpdate.
#
# Where the api numbers come from:
# - 4.1: each file's apiKey, mapped to classes by the generated CoordinatorRecordType
#   (GroupCoordinatorRecordSerde: CoordinatorRecordType.fromId(recordType)).
# - 4.0.0 (985bc99521dd22bbf620591b8db8613c54f596b2) and the Oct 2024 snapshot: files are
#   "type": "data" with no apiKey. The type is the key's version, and each key file's
#   validVersions is that number (e.g. ConsumerGroupCurrentMemberAssignmentKey validVersions 8).
#   The switch in GroupCoordinatorRecordSerde.apiMessageKeyFor maps it: 0,1 -> OffsetCommitKey,
#   2 GroupMetadata, 3-8 ConsumerGroup*, 9-15 ShareGroup*, 16 ConsumerGroupRegularExpression
#   (16 is in 4.0.0; the Oct 2024 snapshot stops at 15). Other record helpers write the same
#   numbers as (short) constants. The key bytes are the same in 4.0 and 4.1.
#   Note: the brief expected coordinator-key/apiKey files in 4.0; they came in 4.1
#   (KAFKA-18301 reached trunk after the 4.0 branch cut of 2024-12-16).
#
# Differences from 4.0.0 in facts, apart from the key versions above:
#   4.0 had no LegacyOffsetCommit*; its OffsetCommitKey had versions 0-1 (fields 0-1).
#   4.0 lacked OffsetCommitValue.topicId, ConsumerGroupMetadataValue.MetadataHash,
#   ShareGroupMetadataValue.MetadataHash, ShareGroupStatePartitionMetadataValue.InitializingTopics,
#   and every StreamsGroup* record. It had ShareGroupPartitionMetadata (api 9, given below).
#
# Doubts / notes:
# - "Newest" here means Kafka 4.1.1 (= 4.1.0 for these files), the newest 4.0/4.1 release. The store also
#   holds later trunk or PR versions from 4.2 to 4.4 and 2026. They are left out of the tables,
#   and each appears as a "# later:" comment under its message.
# - Struct names are per message: Kafka's commonStructs belong to one file. Each struct block
#   follows its message and serves only that message. TopicPartitions and TaskIds are declared
#   twice with the same fields. TopicInfo is declared twice with different fields
#   (ShareGroupStatePartitionMetadataValue vs StreamsGroupTopologyValue).
# - Field names keep Kafka's case (lowerCamel in the OffsetCommit and GroupMetadata files).
# - The indexed apache/kafka versions are a mix of trunk, PR branches and forks. No indexed
#   version matches 4.1 for some files (e.g. GroupMetadataValue; TransactionLogKey in txn.ks), so the
#   release tag is the authority throughout.

# ==========================================================================================
# Offsets (api 0, 1)
# ==========================================================================================

# LegacyOffsetCommitKey.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301; same facts as indexed @ 3fcb1f543cbaa2d779890924bf74f94d433b3ecd)
# Added in 4.1 to name key version 0 (4.0 read key versions 0 and 1 with OffsetCommitKey).
message LegacyOffsetCommitKey api 0 versions 0 flexible none
  group string 0
  topic string 0
  partition int32 0

# LegacyOffsetCommitValue.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301; same facts as indexed @ 09f382cf33d24ab9df0ea649fe88114dc1d68846)
message LegacyOffsetCommitValue api 0 versions 0 flexible none
  offset int64 0
  metadata string 0
  commitTimestamp int64 0

# OffsetCommitKey.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301; same facts as indexed @ 2be4c8f5cc280732fa47e3e83259d85580fe11b6)
message OffsetCommitKey api 1 versions 0 flexible none
  group string 0
  topic string 0
  partition int32 0

# OffsetCommitValue.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by 199772adc5a7 2025-05-16 KAFKA-19141)
# topicId: KAFKA-19141 (4.1). Reads as the zero uuid when absent. Indexed version @ 45b0af26e27ba05f79bc7e3f207683c51c0c11da is the
# same without topicId (trunk before May 2025).
message OffsetCommitValue api 1 versions 0-4 flexible 4+
  offset int64 0+
  leaderEpoch int32 3+ default -1 ignorable
  metadata string 0+
  commitTimestamp int64 0+
  expireTimestamp int64 1 default -1 ignorable
  topicId uuid 4+ tag 0 tagged 4+ ignorable

# ==========================================================================================
# Classic groups (api 2)
# ==========================================================================================

# GroupMetadataKey.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301; same facts as indexed @ 9323eef229e94327d0240ff32e96a08e4a48842b)
message GroupMetadataKey api 2 versions 0 flexible none
  group string 0

# GroupMetadataValue.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301)
message GroupMetadataValue api 2 versions 0-4 flexible 4+
  protocolType string 0+
  generation int32 0+
  protocol string 0+ nullable 0+
  leader string 0+ nullable 0+
  currentStateTimestamp int64 2+ default -1 ignorable
  members []MemberMetadata 0+

struct MemberMetadata versions 0+
  memberId string 0+
  groupInstanceId string 3+ nullable 3+ default null ignorable
  clientId string 0+
  clientHost string 0+
  rebalanceTimeout int32 1+ default -1 ignorable
  sessionTimeout int32 0+
  subscription bytes 0+
  assignment bytes 0+

# ==========================================================================================
# Consumer groups, KIP-848 (api 3-8, 16)
# ==========================================================================================

# ConsumerGroupMetadataKey.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301; same facts as indexed @ 45b0af26e27ba05f79bc7e3f207683c51c0c11da)
message ConsumerGroupMetadataKey api 3 versions 0 flexible none
  GroupId string 0

# ConsumerGroupMetadataValue.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by 369cc569b409 2025-04-25 KAFKA-17747)
# MetadataHash: added in 4.1 (KIP-1101, PR #19504).
# later: indexed version @ 266ed846e560e96f90575e4bb1a98b6f135177f0 (KIP-1282, 2026, not in 4.1/4.2.0-rc1) adds
#   CreationTimeMs int64 0+ tag 1 tagged 0+ default -1
message ConsumerGroupMetadataValue api 3 versions 0 flexible 0+
  Epoch int32 0+
  MetadataHash int64 0+ tag 0 tagged 0+ default 0

# ConsumerGroupPartitionMetadataKey.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by 369cc569b409 2025-04-25 KAFKA-17747; same facts as indexed @ 0c37e22a6c30708bcb57281e28346b60079aad0f)
# Deprecated in 4.1: replaced by ConsumerGroupMetadataValue.MetadataHash (KIP-1101); tombstoned when met.
message ConsumerGroupPartitionMetadataKey api 4 versions 0 flexible none
  GroupId string 0

# ConsumerGroupPartitionMetadataValue.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by 369cc569b409 2025-04-25 KAFKA-17747)
message ConsumerGroupPartitionMetadataValue api 4 versions 0 flexible 0+
  Topics []TopicMetadata 0+
    TopicId uuid 0+
    TopicName string 0+
    NumPartitions int32 0+
    PartitionMetadata []PartitionMetadata 0+
      Partition int32 0+
      Racks []string 0+

# ConsumerGroupMemberMetadataKey.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301)
message ConsumerGroupMemberMetadataKey api 5 versions 0 flexible none
  GroupId string 0
  MemberId string 0

# ConsumerGroupMemberMetadataValue.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301; same facts as indexed @ b091e287e82407780c72c00b0f4b1527d9fc6e0e)
# ClassicMemberMetadata, ClassicProtocol: inline structs. ClassicMemberMetadata's JSON
# "default": null is a JSON null, so Kafka's generator gives it no default (the empty struct),
# and writes a null one as tag 0, size 1, varint 0 (MessageDataGenerator): no default here.
message ConsumerGroupMemberMetadataValue api 5 versions 0 flexible 0+
  InstanceId string 0+ nullable 0+
  RackId string 0+ nullable 0+
  ClientId string 0+
  ClientHost string 0+
  SubscribedTopicNames []string 0+
  SubscribedTopicRegex string 0+ nullable 0+
  RebalanceTimeoutMs int32 0+ default -1
  ServerAssignor string 0+ nullable 0+
  ClassicMemberMetadata ClassicMemberMetadata 0+ nullable 0+ tag 0 tagged 0+
    SessionTimeoutMs int32 0+
    SupportedProtocols []ClassicProtocol 0+
      Name string 0+
      Metadata bytes 0+

# ConsumerGroupTargetAssignmentMetadataKey.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301)
message ConsumerGroupTargetAssignmentMetadataKey api 6 versions 0 flexible none
  GroupId string 0

# ConsumerGroupTargetAssignmentMetadataValue.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301)
# later: indexed version @ 07b06d0640a79700a3c09cbfb2ddc1e8bb78f16c ("Added in 4.3 (KIP-1263)") adds
#   AssignmentTimestamp int64 0+ tag 0 tagged 0+ default 0 ignorable
message ConsumerGroupTargetAssignmentMetadataValue api 6 versions 0 flexible 0+
  AssignmentEpoch int32 0+

# ConsumerGroupTargetAssignmentMemberKey.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301)
message ConsumerGroupTargetAssignmentMemberKey api 7 versions 0 flexible none
  GroupId string 0
  MemberId string 0

# ConsumerGroupTargetAssignmentMemberValue.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301; same facts as indexed @ 0c37e22a6c30708bcb57281e28346b60079aad0f)
message ConsumerGroupTargetAssignmentMemberValue api 7 versions 0 flexible 0+
  TopicPartitions []TopicPartition 0+
    TopicId uuid 0+
    Partitions []int32 0+

# ConsumerGroupCurrentMemberAssignmentKey.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301; same facts as indexed @ 2be4c8f5cc280732fa47e3e83259d85580fe11b6)
message ConsumerGroupCurrentMemberAssignmentKey api 8 versions 0 flexible none
  GroupId string 0
  MemberId string 0

# ConsumerGroupCurrentMemberAssignmentValue.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301; same facts as indexed @ b61b9bdd69436af446735480f399bc7a842dc13d)
# later: indexed version @ 6541f94017d844ae7b9656ababf6ce970c802f56 (KIP-1251) adds to struct TopicPartitions
#   AssignmentEpochs []int32 0+ nullable 0+ tag 0 tagged 0+ default null
message ConsumerGroupCurrentMemberAssignmentValue api 8 versions 0 flexible 0+
  MemberEpoch int32 0+
  PreviousMemberEpoch int32 0+
  State int8 0+
  AssignedPartitions []TopicPartitions 0+
  PartitionsPendingRevocation []TopicPartitions 0+

struct TopicPartitions versions 0+
  TopicId uuid 0+
  Partitions []int32 0+

# ConsumerGroupRegularExpressionKey.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301)
message ConsumerGroupRegularExpressionKey api 16 versions 0 flexible none
  GroupId string 0
  RegularExpression string 0

# ConsumerGroupRegularExpressionValue.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301)
# Indexed drafts ConsumerGroupRegexKey/Value.json (e.g. @ 3c16ac45377e84500bfeb6dd7c7f070b53424652) were never released.
message ConsumerGroupRegularExpressionValue api 16 versions 0 flexible 0+
  Topics []string 0+
  Version int64 0+
  Timestamp int64 0+

# ==========================================================================================
# Share groups, KIP-932 (api 9-15)
# ==========================================================================================

# ShareGroupPartitionMetadataKey.json @ 985bc99521dd22bbf620591b8db8613c54f596b2
#   (tag 4.0.0; last changed by 8d29bc1fa8ce 2024-08-14 KAFKA-17247 Revised share group record schemas (#16786))
# 4.0 ONLY: "type": "data" with no apiKey. api 9 comes from the 4.0 GroupCoordinatorRecordSerde switch (case 9).
# The key validVersions is the record type (9). Removed in 4.1 by KAFKA-17747 (PR #19796). The indexed
# trunk version @ cbf3d00a25fba6f781d319050a0074dfe9319d5e has apiKey 9 with versions 0 (same bytes).
message ShareGroupPartitionMetadataKey api 9 versions 9 flexible none
  GroupId string 9

# ShareGroupPartitionMetadataValue.json @ 985bc99521dd22bbf620591b8db8613c54f596b2
#   (tag 4.0.0; last changed by 38e727fe4d7f 2024-12-07 KAFKA-17864)
# 4.0 ONLY (see the key). TopicMetadata, PartitionMetadata: inline structs.
message ShareGroupPartitionMetadataValue api 9 versions 0 flexible 0+
  Topics []TopicMetadata 0+
    TopicId uuid 0+
    TopicName string 0+
    NumPartitions int32 0+
    PartitionMetadata []PartitionMetadata 0+
      Partition int32 0+
      Racks []string 0+

# ShareGroupMemberMetadataKey.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301)
message ShareGroupMemberMetadataKey api 10 versions 0 flexible none
  GroupId string 0
  MemberId string 0

# ShareGroupMemberMetadataValue.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301; same facts as indexed @ 2831e7d2f163ace271cbd7acf09a13b1c3b8e0db)
message ShareGroupMemberMetadataValue api 10 versions 0 flexible 0+
  RackId string 0+ nullable 0+
  ClientId string 0+
  ClientHost string 0+
  SubscribedTopicNames []string 0+

# ShareGroupMetadataKey.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301)
message ShareGroupMetadataKey api 11 versions 0 flexible none
  GroupId string 0

# ShareGroupMetadataValue.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by 369cc569b409 2025-04-25 KAFKA-17747; same facts as indexed @ 31f85dd07b1f8031e75f0030ea85510be4e715f0)
# MetadataHash: added in 4.1 (KIP-1101). Not tagged here, unlike ConsumerGroupMetadataValue.
message ShareGroupMetadataValue api 11 versions 0 flexible 0+
  Epoch int32 0+
  MetadataHash int64 0+

# ShareGroupTargetAssignmentMetadataKey.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301)
message ShareGroupTargetAssignmentMetadataKey api 12 versions 0 flexible none
  GroupId string 0

# ShareGroupTargetAssignmentMetadataValue.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301)
message ShareGroupTargetAssignmentMetadataValue api 12 versions 0 flexible 0+
  AssignmentEpoch int32 0+

# ShareGroupTargetAssignmentMemberKey.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301)
message ShareGroupTargetAssignmentMemberKey api 13 versions 0 flexible none
  GroupId string 0
  MemberId string 0

# ShareGroupTargetAssignmentMemberValue.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301)
message ShareGroupTargetAssignmentMemberValue api 13 versions 0 flexible 0+
  TopicPartitions []TopicPartition 0+
    TopicId uuid 0+
    Partitions []int32 0+

# ShareGroupCurrentMemberAssignmentKey.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301)
message ShareGroupCurrentMemberAssignmentKey api 14 versions 0 flexible none
  GroupId string 0
  MemberId string 0

# ShareGroupCurrentMemberAssignmentValue.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301)
message ShareGroupCurrentMemberAssignmentValue api 14 versions 0 flexible 0+
  MemberEpoch int32 0+
  PreviousMemberEpoch int32 0+
  State int8 0+
  AssignedPartitions []TopicPartitions 0+

struct TopicPartitions versions 0+
  TopicId uuid 0+
  Partitions []int32 0+

# ShareGroupStatePartitionMetadataKey.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301)
message ShareGroupStatePartitionMetadataKey api 15 versions 0 flexible none
  GroupId string 0

# ShareGroupStatePartitionMetadataValue.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by 37f7434eac63 2025-04-03 KAFKA-18827)
# InitializingTopics: added in 4.1 (KAFKA-18827).
# later: indexed version @ 25002b6a64b07c60e5777685732620ad6df6bbd5 adds CreateTimestamp int64 0+ (not tagged) to
#   struct TopicPartitionsInfo. It is in neither 4.1.0 nor 4.2.0-rc1: trunk or PR, date not established.
message ShareGroupStatePartitionMetadataValue api 15 versions 0 flexible 0+
  InitializingTopics []TopicPartitionsInfo 0+
  InitializedTopics []TopicPartitionsInfo 0+
  DeletingTopics []TopicInfo 0+

struct TopicPartitionsInfo versions 0+
  TopicId uuid 0+
  TopicName string 0+
  Partitions []int32 0+

struct TopicInfo versions 0+
  TopicId uuid 0+
  TopicName string 0+

# ==========================================================================================
# Streams groups, KIP-1071 (api 17, 19-23); new in 4.1, "in development" in the 4.1 files
# ==========================================================================================

# StreamsGroupMetadataKey.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301)
message StreamsGroupMetadataKey api 17 versions 0 flexible none
  GroupId string 0

# StreamsGroupMetadataValue.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by 369cc569b409 2025-04-25 KAFKA-17747)
# MetadataHash: not tagged (KIP-1101).
# later (4.2.0-rc1, 6eef66363478d2946fbc7d8f93c863246f7c14d5): ValidatedTopologyEpoch int32 0+ tag 0 tagged 0+ default -1;
#   LastAssignmentConfigs []LastAssignmentConfig 0+ nullable 0+ tag 1 tagged 0+ default null
#   (struct LastAssignmentConfig versions 0+: Key string 0+, Value string 0+).
message StreamsGroupMetadataValue api 17 versions 0 flexible 0+
  Epoch int32 0+
  MetadataHash int64 0+

# StreamsGroupMemberMetadataKey.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301)
message StreamsGroupMemberMetadataKey api 19 versions 0 flexible none
  GroupId string 0
  MemberId string 0

# StreamsGroupMemberMetadataValue.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301)
message StreamsGroupMemberMetadataValue api 19 versions 0 flexible 0+
  InstanceId string 0+ nullable 0+
  RackId string 0+ nullable 0+
  ClientId string 0+
  ClientHost string 0+
  RebalanceTimeoutMs int32 0+ default -1
  TopologyEpoch int32 0+
  ProcessId string 0+
  UserEndpoint Endpoint 0+ nullable 0+ default null
  ClientTags []KeyValue 0+

struct Endpoint versions 0+
  Host string 0+
  Port uint16 0+

struct KeyValue versions 0+
  Key string 0+
  Value string 0+

# StreamsGroupTargetAssignmentMetadataKey.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301)
message StreamsGroupTargetAssignmentMetadataKey api 20 versions 0 flexible none
  GroupId string 0

# StreamsGroupTargetAssignmentMetadataValue.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301)
message StreamsGroupTargetAssignmentMetadataValue api 20 versions 0 flexible 0+
  AssignmentEpoch int32 0+

# StreamsGroupTargetAssignmentMemberKey.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301)
message StreamsGroupTargetAssignmentMemberKey api 21 versions 0 flexible none
  GroupId string 0
  MemberId string 0

# StreamsGroupTargetAssignmentMemberValue.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301; same facts as indexed @ 75a150ae8002d03ad7061727797012f3e1f153e3)
message StreamsGroupTargetAssignmentMemberValue api 21 versions 0 flexible 0+
  ActiveTasks []TaskIds 0+
  StandbyTasks []TaskIds 0+
  WarmupTasks []TaskIds 0+

struct TaskIds versions 0+
  SubtopologyId string 0+
  Partitions []int32 0+

# StreamsGroupCurrentMemberAssignmentKey.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301)
message StreamsGroupCurrentMemberAssignmentKey api 22 versions 0 flexible none
  GroupId string 0
  MemberId string 0

# StreamsGroupCurrentMemberAssignmentValue.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301)
# later (4.2.0-rc1): struct TaskIds gains AssignmentEpochs []int32 0+ nullable 0+ tag 0 tagged 0+ default null.
message StreamsGroupCurrentMemberAssignmentValue api 22 versions 0 flexible 0+
  MemberEpoch int32 0+
  PreviousMemberEpoch int32 0+
  State int8 0+
  ActiveTasks []TaskIds 0+
  StandbyTasks []TaskIds 0+
  WarmupTasks []TaskIds 0+
  ActiveTasksPendingRevocation []TaskIds 0+
  StandbyTasksPendingRevocation []TaskIds 0+
  WarmupTasksPendingRevocation []TaskIds 0+

struct TaskIds versions 0+
  SubtopologyId string 0+
  Partitions []int32 0+

# StreamsGroupTopologyKey.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301)
message StreamsGroupTopologyKey api 23 versions 0 flexible none
  GroupId string 0

# StreamsGroupTopologyValue.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by d67379c3105c 2024-12-20 KAFKA-18301)
# Subtopology, CopartitionGroup: inline structs. TopicInfo below is this message's own (not the share one).
message StreamsGroupTopologyValue api 23 versions 0 flexible 0+
  Epoch int32 0+
  Subtopologies []Subtopology 0+
    SubtopologyId string 0+
    SourceTopics []string 0+
    SourceTopicRegex []string 0+
    StateChangelogTopics []TopicInfo 0+
    RepartitionSinkTopics []string 0+
    RepartitionSourceTopics []TopicInfo 0+
    CopartitionGroups []CopartitionGroup 0+
      SourceTopics []int16 0+
      SourceTopicRegex []int16 0+
      RepartitionSourceTopics []int16 0+

struct TopicConfig versions 0+
  key string 0+
  value string 0+

struct TopicInfo versions 0+
  Name string 0+
  Partitions int32 0+
  ReplicationFactor int16 0+
  TopicConfigs []TopicConfig 0+

# later, not in 4.1: indexed StreamsGroupTargetAssignmentResolvedTopicIdsKey/Value.json @ 14440d21214cd060d08774b4c190fff6dea0efee,
# apiKey 24 (trunk or PR, unreleased as far as checked).

"""
