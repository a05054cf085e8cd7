"""Requests and responses of Kafka's wire protocol: topics, partitions, configs and log dirs
(``CreateTopics``, ``DeleteTopics``, ``CreatePartitions``, ``DescribeConfigs``,
``AlterConfigs``, ``IncrementalAlterConfigs``, ``DescribeLogDirs``), in the table language
of :mod:`kafkafs.record.schema`; ``api`` is the api key, which a request and its response
share.

The facts are Apache Kafka's (``clients/src/main/resources/common/message``, 4.1.1,
be816b82d25370ceac697ccf7c88cea873e9b4e3); the form is ours. Generated from the JSON files
by json2ks.py."""

TABLE = r"""
# CreateTopicsRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker controller
message CreateTopicsRequest api 19 versions 2-7 flexible 5+
  Topics []CreatableTopic 0+
    Name string 0+
    NumPartitions int32 0+
    ReplicationFactor int16 0+
    Assignments []CreatableReplicaAssignment 0+
      PartitionIndex int32 0+
      BrokerIds []int32 0+
    Configs []CreatableTopicConfig 0+
      Name string 0+
      Value string 0+ nullable 0+
  timeoutMs int32 0+ default 60000
  validateOnly bool 1+ default false

# CreateTopicsResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message CreateTopicsResponse api 19 versions 2-7 flexible 5+
  ThrottleTimeMs int32 2+ ignorable
  Topics []CreatableTopicResult 0+
    Name string 0+
    TopicId uuid 7+ ignorable
    ErrorCode int16 0+
    ErrorMessage string 1+ nullable 0+ ignorable
    TopicConfigErrorCode int16 5+ tag 0 tagged 5+ ignorable
    NumPartitions int32 5+ default -1 ignorable
    ReplicationFactor int16 5+ default -1 ignorable
    Configs []CreatableTopicConfigs 5+ nullable 5+ ignorable
      Name string 5+
      Value string 5+ nullable 5+
      ReadOnly bool 5+
      ConfigSource int8 5+ default -1 ignorable
      IsSensitive bool 5+

# DeleteTopicsRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker controller
message DeleteTopicsRequest api 20 versions 1-6 flexible 4+
  Topics []DeleteTopicState 6+
    Name string 6+ nullable 6+ default null
    TopicId uuid 6+
  TopicNames []string 0-5 ignorable
  TimeoutMs int32 0+

# DeleteTopicsResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message DeleteTopicsResponse api 20 versions 1-6 flexible 4+
  ThrottleTimeMs int32 1+ ignorable
  Responses []DeletableTopicResult 0+
    Name string 0+ nullable 6+
    TopicId uuid 6+ ignorable
    ErrorCode int16 0+
    ErrorMessage string 5+ nullable 5+ default null ignorable

# CreatePartitionsRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker controller
message CreatePartitionsRequest api 37 versions 0-3 flexible 2+
  Topics []CreatePartitionsTopic 0+
    Name string 0+
    Count int32 0+
    Assignments []CreatePartitionsAssignment 0+ nullable 0+
      BrokerIds []int32 0+
  TimeoutMs int32 0+
  ValidateOnly bool 0+

# CreatePartitionsResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message CreatePartitionsResponse api 37 versions 0-3 flexible 2+
  ThrottleTimeMs int32 0+
  Results []CreatePartitionsTopicResult 0+
    Name string 0+
    ErrorCode int16 0+
    ErrorMessage string 0+ nullable 0+ default null

# DescribeConfigsRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker controller
message DescribeConfigsRequest api 32 versions 1-4 flexible 4+
  Resources []DescribeConfigsResource 0+
    ResourceType int8 0+
    ResourceName string 0+
    ConfigurationKeys []string 0+ nullable 0+
  IncludeSynonyms bool 1+ default false
  IncludeDocumentation bool 3+ default false

# DescribeConfigsResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message DescribeConfigsResponse api 32 versions 1-4 flexible 4+
  ThrottleTimeMs int32 0+
  Results []DescribeConfigsResult 0+
    ErrorCode int16 0+
    ErrorMessage string 0+ nullable 0+
    ResourceType int8 0+
    ResourceName string 0+
    Configs []DescribeConfigsResourceResult 0+
      Name string 0+
      Value string 0+ nullable 0+
      ReadOnly bool 0+
      ConfigSource int8 1+ default -1 ignorable
      IsSensitive bool 0+
      Synonyms []DescribeConfigsSynonym 1+ ignorable
        Name string 1+
        Value string 1+ nullable 0+
        Source int8 1+
      ConfigType int8 3+ default 0 ignorable
      Documentation string 3+ nullable 0+ ignorable

# AlterConfigsRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker controller
message AlterConfigsRequest api 33 versions 0-2 flexible 2+
  Resources []AlterConfigsResource 0+
    ResourceType int8 0+
    ResourceName string 0+
    Configs []AlterableConfig 0+
      Name string 0+
      Value string 0+ nullable 0+
  ValidateOnly bool 0+

# AlterConfigsResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message AlterConfigsResponse api 33 versions 0-2 flexible 2+
  ThrottleTimeMs int32 0+
  Responses []AlterConfigsResourceResponse 0+
    ErrorCode int16 0+
    ErrorMessage string 0+ nullable 0+
    ResourceType int8 0+
    ResourceName string 0+

# IncrementalAlterConfigsRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker controller
message IncrementalAlterConfigsRequest api 44 versions 0-1 flexible 1+
  Resources []AlterConfigsResource 0+
    ResourceType int8 0+
    ResourceName string 0+
    Configs []AlterableConfig 0+
      Name string 0+
      ConfigOperation int8 0+
      Value string 0+ nullable 0+
  ValidateOnly bool 0+

# IncrementalAlterConfigsResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message IncrementalAlterConfigsResponse api 44 versions 0-1 flexible 1+
  ThrottleTimeMs int32 0+
  Responses []AlterConfigsResourceResponse 0+
    ErrorCode int16 0+
    ErrorMessage string 0+ nullable 0+
    ResourceType int8 0+
    ResourceName string 0+

# DescribeLogDirsRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker
message DescribeLogDirsRequest api 35 versions 1-4 flexible 2+
  Topics []DescribableLogDirTopic 0+ nullable 0+
    Topic string 0+
    Partitions []int32 0+

# DescribeLogDirsResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message DescribeLogDirsResponse api 35 versions 1-4 flexible 2+
  ThrottleTimeMs int32 0+
  ErrorCode int16 3+ ignorable
  Results []DescribeLogDirsResult 0+
    ErrorCode int16 0+
    LogDir string 0+
    Topics []DescribeLogDirsTopic 0+
      Name string 0+
      Partitions []DescribeLogDirsPartition 0+
        PartitionIndex int32 0+
        PartitionSize int64 0+
        OffsetLag int64 0+
        IsFutureKey bool 0+
    TotalBytes int64 4+ default -1 ignorable
    UsableBytes int64 4+ default -1 ignorable
"""
