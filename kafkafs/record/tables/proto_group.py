"""Requests and responses of Kafka's wire protocol: the group coordinator's APIs, for classic
and KIP-848 consumer groups and their offsets (``FindCoordinator``, ``JoinGroup``,
``SyncGroup``, ``Heartbeat``, ``LeaveGroup``, ``OffsetCommit``, ``OffsetFetch``,
``OffsetDelete``, ``ListGroups``, ``DescribeGroups``, ``DeleteGroups``,
``ConsumerGroupHeartbeat``, ``ConsumerGroupDescribe``), in the table language of
:mod:`kafkafs.record.schema`; ``api`` is the api key, which a request and its response
share.

The facts are Apache Kafka's (``clients/src/main/resources/common/message``, 4.1.1,
be816b82d25370ceac697ccf7c88cea873e9b4e3); the form is ours. Generated from the JSON files
by json2ks.py."""

TABLE = r"""
# FindCoordinatorRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker
message FindCoordinatorRequest api 10 versions 0-6 flexible 3+
  Key string 0-3
  KeyType int8 1+ default 0
  CoordinatorKeys []string 4+

# FindCoordinatorResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message FindCoordinatorResponse api 10 versions 0-6 flexible 3+
  ThrottleTimeMs int32 1+ ignorable
  ErrorCode int16 0-3
  ErrorMessage string 1-3 nullable 1-3 ignorable
  NodeId int32 0-3
  Host string 0-3
  Port int32 0-3
  Coordinators []Coordinator 4+
    Key string 4+
    NodeId int32 4+
    Host string 4+
    Port int32 4+
    ErrorCode int16 4+
    ErrorMessage string 4+ nullable 4+ ignorable

# JoinGroupRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker
message JoinGroupRequest api 11 versions 0-9 flexible 6+
  GroupId string 0+
  SessionTimeoutMs int32 0+
  RebalanceTimeoutMs int32 1+ default -1 ignorable
  MemberId string 0+
  GroupInstanceId string 5+ nullable 5+ default null
  ProtocolType string 0+
  Protocols []JoinGroupRequestProtocol 0+
    Name string 0+
    Metadata bytes 0+
  Reason string 8+ nullable 8+ default null ignorable

# JoinGroupResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message JoinGroupResponse api 11 versions 0-9 flexible 6+
  ThrottleTimeMs int32 2+ ignorable
  ErrorCode int16 0+
  GenerationId int32 0+ default -1
  ProtocolType string 7+ nullable 7+ default null ignorable
  ProtocolName string 0+ nullable 7+
  Leader string 0+
  SkipAssignment bool 9+ default false
  MemberId string 0+
  Members []JoinGroupResponseMember 0+
    MemberId string 0+
    GroupInstanceId string 5+ nullable 5+ default null ignorable
    Metadata bytes 0+

# SyncGroupRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker
message SyncGroupRequest api 14 versions 0-5 flexible 4+
  GroupId string 0+
  GenerationId int32 0+
  MemberId string 0+
  GroupInstanceId string 3+ nullable 3+ default null
  ProtocolType string 5+ nullable 5+ default null ignorable
  ProtocolName string 5+ nullable 5+ default null ignorable
  Assignments []SyncGroupRequestAssignment 0+
    MemberId string 0+
    Assignment bytes 0+

# SyncGroupResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message SyncGroupResponse api 14 versions 0-5 flexible 4+
  ThrottleTimeMs int32 1+ ignorable
  ErrorCode int16 0+
  ProtocolType string 5+ nullable 5+ default null ignorable
  ProtocolName string 5+ nullable 5+ default null ignorable
  Assignment bytes 0+

# HeartbeatRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker
message HeartbeatRequest api 12 versions 0-4 flexible 4+
  GroupId string 0+
  GenerationId int32 0+
  MemberId string 0+
  GroupInstanceId string 3+ nullable 3+ default null

# HeartbeatResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message HeartbeatResponse api 12 versions 0-4 flexible 4+
  ThrottleTimeMs int32 1+ ignorable
  ErrorCode int16 0+

# LeaveGroupRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker
message LeaveGroupRequest api 13 versions 0-5 flexible 4+
  GroupId string 0+
  MemberId string 0-2
  Members []MemberIdentity 3+
    MemberId string 3+
    GroupInstanceId string 3+ nullable 3+ default null
    Reason string 5+ nullable 5+ default null ignorable

# LeaveGroupResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message LeaveGroupResponse api 13 versions 0-5 flexible 4+
  ThrottleTimeMs int32 1+ ignorable
  ErrorCode int16 0+
  Members []MemberResponse 3+
    MemberId string 3+
    GroupInstanceId string 3+ nullable 3+
    ErrorCode int16 3+

# OffsetCommitRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker; latestVersionUnstable: true
message OffsetCommitRequest api 8 versions 2-10 flexible 8+ unstable
  GroupId string 0+
  GenerationIdOrMemberEpoch int32 1+ default -1 ignorable
  MemberId string 1+ ignorable
  GroupInstanceId string 7+ nullable 7+ default null
  RetentionTimeMs int64 2-4 default -1 ignorable
  Topics []OffsetCommitRequestTopic 0+
    Name string 0-9 ignorable
    TopicId uuid 10+ ignorable
    Partitions []OffsetCommitRequestPartition 0+
      PartitionIndex int32 0+
      CommittedOffset int64 0+
      CommittedLeaderEpoch int32 6+ default -1 ignorable
      CommittedMetadata string 0+ nullable 0+

# OffsetCommitResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message OffsetCommitResponse api 8 versions 2-10 flexible 8+
  ThrottleTimeMs int32 3+ ignorable
  Topics []OffsetCommitResponseTopic 0+
    Name string 0-9 ignorable
    TopicId uuid 10+ ignorable
    Partitions []OffsetCommitResponsePartition 0+
      PartitionIndex int32 0+
      ErrorCode int16 0+

# OffsetFetchRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker; latestVersionUnstable: true
message OffsetFetchRequest api 9 versions 1-10 flexible 6+ unstable
  GroupId string 0-7
  Topics []OffsetFetchRequestTopic 0-7 nullable 2-7
    Name string 0-7
    PartitionIndexes []int32 0-7
  Groups []OffsetFetchRequestGroup 8+
    GroupId string 8+
    MemberId string 9+ nullable 9+ default null ignorable
    MemberEpoch int32 9+ default -1 ignorable
    Topics []OffsetFetchRequestTopics 8+ nullable 8+
      Name string 8-9 ignorable
      TopicId uuid 10+ ignorable
      PartitionIndexes []int32 8+
  RequireStable bool 7+ default false

# OffsetFetchResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message OffsetFetchResponse api 9 versions 1-10 flexible 6+
  ThrottleTimeMs int32 3+ ignorable
  Topics []OffsetFetchResponseTopic 0-7
    Name string 0-7
    Partitions []OffsetFetchResponsePartition 0-7
      PartitionIndex int32 0-7
      CommittedOffset int64 0-7
      CommittedLeaderEpoch int32 5-7 default -1 ignorable
      Metadata string 0-7 nullable 0-7
      ErrorCode int16 0-7
  ErrorCode int16 2-7 default 0 ignorable
  Groups []OffsetFetchResponseGroup 8+
    GroupId string 8+
    Topics []OffsetFetchResponseTopics 8+
      Name string 8-9 ignorable
      TopicId uuid 10+ ignorable
      Partitions []OffsetFetchResponsePartitions 8+
        PartitionIndex int32 8+
        CommittedOffset int64 8+
        CommittedLeaderEpoch int32 8+ default -1 ignorable
        Metadata string 8+ nullable 8+
        ErrorCode int16 8+
    ErrorCode int16 8+ default 0

# OffsetDeleteRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker
message OffsetDeleteRequest api 47 versions 0 flexible none
  GroupId string 0+
  Topics []OffsetDeleteRequestTopic 0+
    Name string 0+
    Partitions []OffsetDeleteRequestPartition 0+
      PartitionIndex int32 0+

# OffsetDeleteResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message OffsetDeleteResponse api 47 versions 0 flexible none
  ErrorCode int16 0+
  ThrottleTimeMs int32 0+ ignorable
  Topics []OffsetDeleteResponseTopic 0+
    Name string 0+
    Partitions []OffsetDeleteResponsePartition 0+
      PartitionIndex int32 0+
      ErrorCode int16 0+

# ListGroupsRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker
message ListGroupsRequest api 16 versions 0-5 flexible 3+
  StatesFilter []string 4+
  TypesFilter []string 5+

# ListGroupsResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message ListGroupsResponse api 16 versions 0-5 flexible 3+
  ThrottleTimeMs int32 1+ ignorable
  ErrorCode int16 0+
  Groups []ListedGroup 0+
    GroupId string 0+
    ProtocolType string 0+
    GroupState string 4+ ignorable
    GroupType string 5+ ignorable

# DescribeGroupsRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker
message DescribeGroupsRequest api 15 versions 0-6 flexible 5+
  Groups []string 0+
  IncludeAuthorizedOperations bool 3+

# DescribeGroupsResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message DescribeGroupsResponse api 15 versions 0-6 flexible 5+
  ThrottleTimeMs int32 1+ ignorable
  Groups []DescribedGroup 0+
    ErrorCode int16 0+
    ErrorMessage string 6+ nullable 6+ default null
    GroupId string 0+
    GroupState string 0+
    ProtocolType string 0+
    ProtocolData string 0+
    Members []DescribedGroupMember 0+
      MemberId string 0+
      GroupInstanceId string 4+ nullable 4+ default null ignorable
      ClientId string 0+
      ClientHost string 0+
      MemberMetadata bytes 0+
      MemberAssignment bytes 0+
    AuthorizedOperations int32 3+ default -2147483648

# DeleteGroupsRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker
message DeleteGroupsRequest api 42 versions 0-2 flexible 2+
  GroupsNames []string 0+

# DeleteGroupsResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message DeleteGroupsResponse api 42 versions 0-2 flexible 2+
  ThrottleTimeMs int32 0+
  Results []DeletableGroupResult 0+
    GroupId string 0+
    ErrorCode int16 0+

# ConsumerGroupHeartbeatRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker
message ConsumerGroupHeartbeatRequest api 68 versions 0-1 flexible 0+
  GroupId string 0+
  MemberId string 0+
  MemberEpoch int32 0+
  InstanceId string 0+ nullable 0+ default null
  RackId string 0+ nullable 0+ default null
  RebalanceTimeoutMs int32 0+ default -1
  SubscribedTopicNames []string 0+ nullable 0+ default null
  SubscribedTopicRegex string 1+ nullable 1+ default null
  ServerAssignor string 0+ nullable 0+ default null
  TopicPartitions []TopicPartitions 0+ nullable 0+ default null
    TopicId uuid 0+
    Partitions []int32 0+

# ConsumerGroupHeartbeatResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message ConsumerGroupHeartbeatResponse api 68 versions 0-1 flexible 0+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+
  ErrorMessage string 0+ nullable 0+ default null
  MemberId string 0+ nullable 0+ default null
  MemberEpoch int32 0+
  HeartbeatIntervalMs int32 0+
  Assignment Assignment 0+ nullable 0+ default null
    TopicPartitions []TopicPartitions 0+

struct TopicPartitions versions 0+
  TopicId uuid 0+
  Partitions []int32 0+

# ConsumerGroupDescribeRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker
message ConsumerGroupDescribeRequest api 69 versions 0-1 flexible 0+
  GroupIds []string 0+
  IncludeAuthorizedOperations bool 0+

# ConsumerGroupDescribeResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message ConsumerGroupDescribeResponse api 69 versions 0-1 flexible 0+
  ThrottleTimeMs int32 0+
  Groups []DescribedGroup 0+
    ErrorCode int16 0+
    ErrorMessage string 0+ nullable 0+ default null
    GroupId string 0+
    GroupState string 0+
    GroupEpoch int32 0+
    AssignmentEpoch int32 0+
    AssignorName string 0+
    Members []Member 0+
      MemberId string 0+
      InstanceId string 0+ nullable 0+ default null
      RackId string 0+ nullable 0+ default null
      MemberEpoch int32 0+
      ClientId string 0+
      ClientHost string 0+
      SubscribedTopicNames []string 0+
      SubscribedTopicRegex string 0+ nullable 0+ default null
      Assignment Assignment 0+
      TargetAssignment Assignment 0+
      MemberType int8 1+ default -1 ignorable
    AuthorizedOperations int32 0+ default -2147483648

struct TopicPartitions versions 0+
  TopicId uuid 0+
  TopicName string 0+
  Partitions []int32 0+

struct Assignment versions 0+
  TopicPartitions []TopicPartitions 0+
"""
