"""Requests and responses of Kafka's wire protocol: producing, fetching and the offsets of
partitions (``Produce``, ``Fetch``, ``ListOffsets``, ``OffsetForLeaderEpoch``,
``DeleteRecords``), in the table language of :mod:`kafkafs.record.schema`; ``api`` is the
api key, which a request and its response share.

The facts are Apache Kafka's (``clients/src/main/resources/common/message``, 4.1.1,
be816b82d25370ceac697ccf7c88cea873e9b4e3); the form is ours. Generated from the JSON files
by json2ks.py."""

TABLE = r"""
# ProduceRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker
message ProduceRequest api 0 versions 3-13 flexible 9+
  TransactionalId string 3+ nullable 3+ default null
  Acks int16 0+
  TimeoutMs int32 0+
  TopicData []TopicProduceData 0+
    Name string 0-12 ignorable
    TopicId uuid 13+ ignorable
    PartitionData []PartitionProduceData 0+
      Index int32 0+
      Records records 0+ nullable 0+

# ProduceResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message ProduceResponse api 0 versions 3-13 flexible 9+
  Responses []TopicProduceResponse 0+
    Name string 0-12 ignorable
    TopicId uuid 13+ ignorable
    PartitionResponses []PartitionProduceResponse 0+
      Index int32 0+
      ErrorCode int16 0+
      BaseOffset int64 0+
      LogAppendTimeMs int64 2+ default -1 ignorable
      LogStartOffset int64 5+ default -1 ignorable
      RecordErrors []BatchIndexAndErrorMessage 8+ ignorable
        BatchIndex int32 8+
        BatchIndexErrorMessage string 8+ nullable 8+ default null
      ErrorMessage string 8+ nullable 8+ default null ignorable
      CurrentLeader LeaderIdAndEpoch 10+ tag 0 tagged 10+
        LeaderId int32 10+ default -1
        LeaderEpoch int32 10+ default -1
  ThrottleTimeMs int32 1+ default 0 ignorable
  NodeEndpoints []NodeEndpoint 10+ tag 0 tagged 10+
    NodeId int32 10+
    Host string 10+
    Port int32 10+
    Rack string 10+ nullable 10+ default null

# FetchRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker controller
message FetchRequest api 1 versions 4-18 flexible 12+
  ClusterId string 12+ nullable 12+ tag 0 tagged 12+ default null ignorable
  ReplicaId int32 0-14 default -1
  ReplicaState ReplicaState 15+ tag 1 tagged 15+
    ReplicaId int32 15+ default -1
    ReplicaEpoch int64 15+ default -1
  MaxWaitMs int32 0+
  MinBytes int32 0+
  MaxBytes int32 3+ default 0x7fffffff ignorable
  IsolationLevel int8 4+ default 0 ignorable
  SessionId int32 7+ default 0 ignorable
  SessionEpoch int32 7+ default -1 ignorable
  Topics []FetchTopic 0+
    Topic string 0-12 ignorable
    TopicId uuid 13+ ignorable
    Partitions []FetchPartition 0+
      Partition int32 0+
      CurrentLeaderEpoch int32 9+ default -1 ignorable
      FetchOffset int64 0+
      LastFetchedEpoch int32 12+ default -1
      LogStartOffset int64 5+ default -1 ignorable
      PartitionMaxBytes int32 0+
      ReplicaDirectoryId uuid 17+ tag 0 tagged 17+ ignorable
      HighWatermark int64 18+ tag 1 tagged 18+ default 9223372036854775807 ignorable
  ForgottenTopicsData []ForgottenTopic 7+
    Topic string 7-12 ignorable
    TopicId uuid 13+ ignorable
    Partitions []int32 7+
  RackId string 11+ default "" ignorable

# FetchResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message FetchResponse api 1 versions 4-18 flexible 12+
  ThrottleTimeMs int32 1+ ignorable
  ErrorCode int16 7+ ignorable
  SessionId int32 7+ default 0
  Responses []FetchableTopicResponse 0+
    Topic string 0-12 ignorable
    TopicId uuid 13+ ignorable
    Partitions []PartitionData 0+
      PartitionIndex int32 0+
      ErrorCode int16 0+
      HighWatermark int64 0+
      LastStableOffset int64 4+ default -1 ignorable
      LogStartOffset int64 5+ default -1 ignorable
      DivergingEpoch EpochEndOffset 12+ tag 0 tagged 12+
        Epoch int32 12+ default -1
        EndOffset int64 12+ default -1
      CurrentLeader LeaderIdAndEpoch 12+ tag 1 tagged 12+
        LeaderId int32 12+ default -1
        LeaderEpoch int32 12+ default -1
      SnapshotId SnapshotId 12+ tag 2 tagged 12+
        EndOffset int64 0+ default -1
        Epoch int32 0+ default -1
      AbortedTransactions []AbortedTransaction 4+ nullable 4+ ignorable
        ProducerId int64 4+
        FirstOffset int64 4+
      PreferredReadReplica int32 11+ default -1
      Records records 0+ nullable 0+
  NodeEndpoints []NodeEndpoint 16+ tag 0 tagged 16+
    NodeId int32 16+
    Host string 16+
    Port int32 16+
    Rack string 16+ nullable 16+ default null

# ListOffsetsRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker; latestVersionUnstable: false
message ListOffsetsRequest api 2 versions 1-10 flexible 6+
  ReplicaId int32 0+
  IsolationLevel int8 2+
  Topics []ListOffsetsTopic 0+
    Name string 0+
    Partitions []ListOffsetsPartition 0+
      PartitionIndex int32 0+
      CurrentLeaderEpoch int32 4+ default -1 ignorable
      Timestamp int64 0+
  TimeoutMs int32 10+ ignorable

# ListOffsetsResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message ListOffsetsResponse api 2 versions 1-10 flexible 6+
  ThrottleTimeMs int32 2+ ignorable
  Topics []ListOffsetsTopicResponse 0+
    Name string 0+
    Partitions []ListOffsetsPartitionResponse 0+
      PartitionIndex int32 0+
      ErrorCode int16 0+
      Timestamp int64 1+ default -1
      Offset int64 1+ default -1
      LeaderEpoch int32 4+ default -1

# OffsetForLeaderEpochRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker
message OffsetForLeaderEpochRequest api 23 versions 2-4 flexible 4+
  ReplicaId int32 3+ default -2 ignorable
  Topics []OffsetForLeaderTopic 0+
    Topic string 0+
    Partitions []OffsetForLeaderPartition 0+
      Partition int32 0+
      CurrentLeaderEpoch int32 2+ default -1 ignorable
      LeaderEpoch int32 0+

# OffsetForLeaderEpochResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message OffsetForLeaderEpochResponse api 23 versions 2-4 flexible 4+
  ThrottleTimeMs int32 2+ ignorable
  Topics []OffsetForLeaderTopicResult 0+
    Topic string 0+
    Partitions []EpochEndOffset 0+
      ErrorCode int16 0+
      Partition int32 0+
      LeaderEpoch int32 1+ default -1 ignorable
      EndOffset int64 0+ default -1

# DeleteRecordsRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker
message DeleteRecordsRequest api 21 versions 0-2 flexible 2+
  Topics []DeleteRecordsTopic 0+
    Name string 0+
    Partitions []DeleteRecordsPartition 0+
      PartitionIndex int32 0+
      Offset int64 0+
  TimeoutMs int32 0+

# DeleteRecordsResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message DeleteRecordsResponse api 21 versions 0-2 flexible 2+
  ThrottleTimeMs int32 0+
  Topics []DeleteRecordsTopicResult 0+
    Name string 0+
    Partitions []DeleteRecordsPartitionResult 0+
      PartitionIndex int32 0+
      LowWatermark int64 0+
      ErrorCode int16 0+
"""
