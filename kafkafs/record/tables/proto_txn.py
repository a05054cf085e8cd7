"""Requests and responses of Kafka's wire protocol: producer ids and transactions
(``InitProducerId``, ``AddPartitionsToTxn``, ``AddOffsetsToTxn``, ``EndTxn``,
``TxnOffsetCommit``, ``WriteTxnMarkers``, ``DescribeProducers``, ``DescribeTransactions``,
``ListTransactions``), in the table language of :mod:`kafkafs.record.schema`; ``api`` is the
api key, which a request and its response share.

The facts are Apache Kafka's (``clients/src/main/resources/common/message``, 4.1.1,
be816b82d25370ceac697ccf7c88cea873e9b4e3); the form is ours. Generated from the JSON files
by json2ks.py."""

TABLE = r"""
# InitProducerIdRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker; latestVersionUnstable: true
message InitProducerIdRequest api 22 versions 0-6 flexible 2+ unstable
  TransactionalId string 0+ nullable 0+
  TransactionTimeoutMs int32 0+
  ProducerId int64 3+ default -1
  ProducerEpoch int16 3+ default -1
  Enable2Pc bool 6+ default false
  KeepPreparedTxn bool 6+ default false

# InitProducerIdResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message InitProducerIdResponse api 22 versions 0-6 flexible 2+
  ThrottleTimeMs int32 0+ ignorable
  ErrorCode int16 0+
  ProducerId int64 0+ default -1
  ProducerEpoch int16 0+
  OngoingTxnProducerId int64 6+ default -1
  OngoingTxnProducerEpoch int16 6+ default -1

# AddPartitionsToTxnRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker; latestVersionUnstable: false
message AddPartitionsToTxnRequest api 24 versions 0-5 flexible 3+
  Transactions []AddPartitionsToTxnTransaction 4+
    TransactionalId string 4+
    ProducerId int64 4+
    ProducerEpoch int16 4+
    VerifyOnly bool 4+ default false
    Topics []AddPartitionsToTxnTopic 4+
  V3AndBelowTransactionalId string 0-3
  V3AndBelowProducerId int64 0-3
  V3AndBelowProducerEpoch int16 0-3
  V3AndBelowTopics []AddPartitionsToTxnTopic 0-3

struct AddPartitionsToTxnTopic versions 0+
  Name string 0+
  Partitions []int32 0+

# AddPartitionsToTxnResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message AddPartitionsToTxnResponse api 24 versions 0-5 flexible 3+
  ThrottleTimeMs int32 0+
  ErrorCode int16 4+ ignorable
  ResultsByTransaction []AddPartitionsToTxnResult 4+
    TransactionalId string 4+
    TopicResults []AddPartitionsToTxnTopicResult 4+
  ResultsByTopicV3AndBelow []AddPartitionsToTxnTopicResult 0-3

struct AddPartitionsToTxnTopicResult versions 0+
  Name string 0+
  ResultsByPartition []AddPartitionsToTxnPartitionResult 0+

struct AddPartitionsToTxnPartitionResult versions 0+
  PartitionIndex int32 0+
  PartitionErrorCode int16 0+

# AddOffsetsToTxnRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker
message AddOffsetsToTxnRequest api 25 versions 0-4 flexible 3+
  TransactionalId string 0+
  ProducerId int64 0+
  ProducerEpoch int16 0+
  GroupId string 0+

# AddOffsetsToTxnResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message AddOffsetsToTxnResponse api 25 versions 0-4 flexible 3+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+

# EndTxnRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker; latestVersionUnstable: false
message EndTxnRequest api 26 versions 0-5 flexible 3+
  TransactionalId string 0+
  ProducerId int64 0+
  ProducerEpoch int16 0+
  Committed bool 0+

# EndTxnResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message EndTxnResponse api 26 versions 0-5 flexible 3+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+
  ProducerId int64 5+ default -1 ignorable
  ProducerEpoch int16 5+ default -1 ignorable

# TxnOffsetCommitRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker
message TxnOffsetCommitRequest api 28 versions 0-5 flexible 3+
  TransactionalId string 0+
  GroupId string 0+
  ProducerId int64 0+
  ProducerEpoch int16 0+
  GenerationId int32 3+ default -1
  MemberId string 3+ default ""
  GroupInstanceId string 3+ nullable 3+ default null
  Topics []TxnOffsetCommitRequestTopic 0+
    Name string 0+
    Partitions []TxnOffsetCommitRequestPartition 0+
      PartitionIndex int32 0+
      CommittedOffset int64 0+
      CommittedLeaderEpoch int32 2+ default -1 ignorable
      CommittedMetadata string 0+ nullable 0+

# TxnOffsetCommitResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message TxnOffsetCommitResponse api 28 versions 0-5 flexible 3+
  ThrottleTimeMs int32 0+
  Topics []TxnOffsetCommitResponseTopic 0+
    Name string 0+
    Partitions []TxnOffsetCommitResponsePartition 0+
      PartitionIndex int32 0+
      ErrorCode int16 0+

# WriteTxnMarkersRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker
message WriteTxnMarkersRequest api 27 versions 1 flexible 1+
  Markers []WritableTxnMarker 0+
    ProducerId int64 0+
    ProducerEpoch int16 0+
    TransactionResult bool 0+
    Topics []WritableTxnMarkerTopic 0+
      Name string 0+
      PartitionIndexes []int32 0+
    CoordinatorEpoch int32 0+

# WriteTxnMarkersResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message WriteTxnMarkersResponse api 27 versions 1 flexible 1+
  Markers []WritableTxnMarkerResult 0+
    ProducerId int64 0+
    Topics []WritableTxnMarkerTopicResult 0+
      Name string 0+
      Partitions []WritableTxnMarkerPartitionResult 0+
        PartitionIndex int32 0+
        ErrorCode int16 0+

# DescribeProducersRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker
message DescribeProducersRequest api 61 versions 0 flexible 0+
  Topics []TopicRequest 0+
    Name string 0+
    PartitionIndexes []int32 0+

# DescribeProducersResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message DescribeProducersResponse api 61 versions 0 flexible 0+
  ThrottleTimeMs int32 0+
  Topics []TopicResponse 0+
    Name string 0+
    Partitions []PartitionResponse 0+
      PartitionIndex int32 0+
      ErrorCode int16 0+
      ErrorMessage string 0+ nullable 0+ default null
      ActiveProducers []ProducerState 0+
        ProducerId int64 0+
        ProducerEpoch int32 0+
        LastSequence int32 0+ default -1
        LastTimestamp int64 0+ default -1
        CoordinatorEpoch int32 0+
        CurrentTxnStartOffset int64 0+ default -1

# DescribeTransactionsRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker
message DescribeTransactionsRequest api 65 versions 0 flexible 0+
  TransactionalIds []string 0+

# DescribeTransactionsResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message DescribeTransactionsResponse api 65 versions 0 flexible 0+
  ThrottleTimeMs int32 0+
  TransactionStates []TransactionState 0+
    ErrorCode int16 0+
    TransactionalId string 0+
    TransactionState string 0+
    TransactionTimeoutMs int32 0+
    TransactionStartTimeMs int64 0+
    ProducerId int64 0+
    ProducerEpoch int16 0+
    Topics []TopicData 0+
      Topic string 0+
      Partitions []int32 0+

# ListTransactionsRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker
message ListTransactionsRequest api 66 versions 0-2 flexible 0+
  StateFilters []string 0+
  ProducerIdFilters []int64 0+
  DurationFilter int64 1+ default -1
  TransactionalIdPattern string 2+ nullable 2+ default null

# ListTransactionsResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message ListTransactionsResponse api 66 versions 0-2 flexible 0+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+
  UnknownStateFilters []string 0+
  TransactionStates []TransactionState 0+
    TransactionalId string 0+
    ProducerId int64 0+
    TransactionState string 0+
"""
