"""Requests and responses of Kafka's wire protocol: describing topic partitions and the replica
placement of one node (elections, reassignments, log dirs, config resources)
(``DescribeTopicPartitions``, ``ElectLeaders``, ``AlterPartitionReassignments``,
``ListPartitionReassignments``, ``AlterReplicaLogDirs``, ``ListConfigResources``), in the
table language of :mod:`kafkafs.record.schema`; ``api`` is the api key, which a request and
its response share.

The facts are Apache Kafka's (``clients/src/main/resources/common/message``, 4.1.1,
be816b82d25370ceac697ccf7c88cea873e9b4e3); the form is ours. Generated from the JSON files
by json2ks.py."""

TABLE = r"""
# DescribeTopicPartitionsRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker
message DescribeTopicPartitionsRequest api 75 versions 0 flexible 0+
  Topics []TopicRequest 0+
    Name string 0+
  ResponsePartitionLimit int32 0+ default 2000
  Cursor Cursor 0+ nullable 0+ default null
    TopicName string 0+
    PartitionIndex int32 0+

# DescribeTopicPartitionsResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message DescribeTopicPartitionsResponse api 75 versions 0 flexible 0+
  ThrottleTimeMs int32 0+ ignorable
  Topics []DescribeTopicPartitionsResponseTopic 0+
    ErrorCode int16 0+
    Name string 0+ nullable 0+
    TopicId uuid 0+ ignorable
    IsInternal bool 0+ default false ignorable
    Partitions []DescribeTopicPartitionsResponsePartition 0+
      ErrorCode int16 0+
      PartitionIndex int32 0+
      LeaderId int32 0+
      LeaderEpoch int32 0+ default -1 ignorable
      ReplicaNodes []int32 0+
      IsrNodes []int32 0+
      EligibleLeaderReplicas []int32 0+ nullable 0+ default null
      LastKnownElr []int32 0+ nullable 0+ default null
      OfflineReplicas []int32 0+ ignorable
    TopicAuthorizedOperations int32 0+ default -2147483648
  NextCursor Cursor 0+ nullable 0+ default null
    TopicName string 0+
    PartitionIndex int32 0+

# ElectLeadersRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker controller
message ElectLeadersRequest api 43 versions 0-2 flexible 2+
  ElectionType int8 1+
  TopicPartitions []TopicPartitions 0+ nullable 0+
    Topic string 0+
    Partitions []int32 0+
  TimeoutMs int32 0+ default 60000

# ElectLeadersResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message ElectLeadersResponse api 43 versions 0-2 flexible 2+
  ThrottleTimeMs int32 0+
  ErrorCode int16 1+
  ReplicaElectionResults []ReplicaElectionResult 0+
    Topic string 0+
    PartitionResult []PartitionResult 0+
      PartitionId int32 0+
      ErrorCode int16 0+
      ErrorMessage string 0+ nullable 0+

# AlterPartitionReassignmentsRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker controller
message AlterPartitionReassignmentsRequest api 45 versions 0-1 flexible 0+
  TimeoutMs int32 0+ default 60000
  AllowReplicationFactorChange bool 1+ default true
  Topics []ReassignableTopic 0+
    Name string 0+
    Partitions []ReassignablePartition 0+
      PartitionIndex int32 0+
      Replicas []int32 0+ nullable 0+ default null

# AlterPartitionReassignmentsResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message AlterPartitionReassignmentsResponse api 45 versions 0-1 flexible 0+
  ThrottleTimeMs int32 0+
  AllowReplicationFactorChange bool 1+ default true ignorable
  ErrorCode int16 0+
  ErrorMessage string 0+ nullable 0+
  Responses []ReassignableTopicResponse 0+
    Name string 0+
    Partitions []ReassignablePartitionResponse 0+
      PartitionIndex int32 0+
      ErrorCode int16 0+
      ErrorMessage string 0+ nullable 0+

# ListPartitionReassignmentsRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker controller
message ListPartitionReassignmentsRequest api 46 versions 0 flexible 0+
  TimeoutMs int32 0+ default 60000
  Topics []ListPartitionReassignmentsTopics 0+ nullable 0+ default null
    Name string 0+
    PartitionIndexes []int32 0+

# ListPartitionReassignmentsResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message ListPartitionReassignmentsResponse api 46 versions 0 flexible 0+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+
  ErrorMessage string 0+ nullable 0+
  Topics []OngoingTopicReassignment 0+
    Name string 0+
    Partitions []OngoingPartitionReassignment 0+
      PartitionIndex int32 0+
      Replicas []int32 0+
      AddingReplicas []int32 0+
      RemovingReplicas []int32 0+

# AlterReplicaLogDirsRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker
message AlterReplicaLogDirsRequest api 34 versions 1-2 flexible 2+
  Dirs []AlterReplicaLogDir 0+
    Path string 0+
    Topics []AlterReplicaLogDirTopic 0+
      Name string 0+
      Partitions []int32 0+

# AlterReplicaLogDirsResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message AlterReplicaLogDirsResponse api 34 versions 1-2 flexible 2+
  ThrottleTimeMs int32 0+
  Results []AlterReplicaLogDirTopicResult 0+
    TopicName string 0+
    Partitions []AlterReplicaLogDirPartitionResult 0+
      PartitionIndex int32 0+
      ErrorCode int16 0+

# ListConfigResourcesRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker
message ListConfigResourcesRequest api 74 versions 0-1 flexible 0+
  ResourceTypes []int8 1+

# ListConfigResourcesResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message ListConfigResourcesResponse api 74 versions 0-1 flexible 0+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+
  ConfigResources []ConfigResource 0+
    ResourceName string 0+
    ResourceType int8 1+ default 16 ignorable
"""
