"""Requests and responses of Kafka's wire protocol: the request and response headers,
ApiVersions, Metadata, DescribeCluster, SASL and GetTelemetrySubscriptions (``Header``,
``ApiVersions``, ``Metadata``, ``DescribeCluster``, ``SaslHandshake``, ``SaslAuthenticate``,
``GetTelemetrySubscriptions``), in the table language of :mod:`kafkafs.record.schema`;
``api`` is the api key, which a request and its response share.

The facts are Apache Kafka's (``clients/src/main/resources/common/message``, 4.1.1,
be816b82d25370ceac697ccf7c88cea873e9b4e3); the form is ours. Generated from the JSON files
by json2ks.py."""

TABLE = r"""
# RequestHeader.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message RequestHeader versions 1-2 flexible 2+
  RequestApiKey int16 0+
  RequestApiVersion int16 0+
  CorrelationId int32 0+
  ClientId string 1+ nullable 1+ flexible none

# ResponseHeader.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message ResponseHeader versions 0-1 flexible 1+
  CorrelationId int32 0+

# ApiVersionsRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker controller
message ApiVersionsRequest api 18 versions 0-4 flexible 3+
  ClientSoftwareName string 3+ ignorable
  ClientSoftwareVersion string 3+ ignorable

# ApiVersionsResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message ApiVersionsResponse api 18 versions 0-4 flexible 3+
  ErrorCode int16 0+
  ApiKeys []ApiVersion 0+
    ApiKey int16 0+
    MinVersion int16 0+
    MaxVersion int16 0+
  ThrottleTimeMs int32 1+ ignorable
  SupportedFeatures []SupportedFeatureKey 3+ tag 0 tagged 3+ ignorable
    Name string 3+
    MinVersion int16 3+
    MaxVersion int16 3+
  FinalizedFeaturesEpoch int64 3+ tag 1 tagged 3+ default -1 ignorable
  FinalizedFeatures []FinalizedFeatureKey 3+ tag 2 tagged 3+ ignorable
    Name string 3+
    MaxVersionLevel int16 3+
    MinVersionLevel int16 3+
  ZkMigrationReady bool 3+ tag 3 tagged 3+ default false ignorable

# MetadataRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker
message MetadataRequest api 3 versions 0-13 flexible 9+
  Topics []MetadataRequestTopic 0+ nullable 1+
    TopicId uuid 10+ ignorable
    Name string 0+ nullable 10+
  AllowAutoTopicCreation bool 4+ default true
  IncludeClusterAuthorizedOperations bool 8-10
  IncludeTopicAuthorizedOperations bool 8+

# MetadataResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message MetadataResponse api 3 versions 0-13 flexible 9+
  ThrottleTimeMs int32 3+ ignorable
  Brokers []MetadataResponseBroker 0+
    NodeId int32 0+
    Host string 0+
    Port int32 0+
    Rack string 1+ nullable 1+ default null ignorable
  ClusterId string 2+ nullable 2+ default null ignorable
  ControllerId int32 1+ default -1 ignorable
  Topics []MetadataResponseTopic 0+
    ErrorCode int16 0+
    Name string 0+ nullable 12+
    TopicId uuid 10+ ignorable
    IsInternal bool 1+ default false ignorable
    Partitions []MetadataResponsePartition 0+
      ErrorCode int16 0+
      PartitionIndex int32 0+
      LeaderId int32 0+
      LeaderEpoch int32 7+ default -1 ignorable
      ReplicaNodes []int32 0+
      IsrNodes []int32 0+
      OfflineReplicas []int32 5+ ignorable
    TopicAuthorizedOperations int32 8+ default -2147483648
  ClusterAuthorizedOperations int32 8-10 default -2147483648
  ErrorCode int16 13+ ignorable

# DescribeClusterRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker controller
message DescribeClusterRequest api 60 versions 0-2 flexible 0+
  IncludeClusterAuthorizedOperations bool 0+
  EndpointType int8 1+ default 1
  IncludeFencedBrokers bool 2+

# DescribeClusterResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message DescribeClusterResponse api 60 versions 0-2 flexible 0+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+
  ErrorMessage string 0+ nullable 0+ default null
  EndpointType int8 1+ default 1
  ClusterId string 0+
  ControllerId int32 0+ default -1
  Brokers []DescribeClusterBroker 0+
    BrokerId int32 0+
    Host string 0+
    Port int32 0+
    Rack string 0+ nullable 0+ default null
    IsFenced bool 2+
  ClusterAuthorizedOperations int32 0+ default -2147483648

# SaslHandshakeRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker controller
message SaslHandshakeRequest api 17 versions 0-1 flexible none
  Mechanism string 0+

# SaslHandshakeResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message SaslHandshakeResponse api 17 versions 0-1 flexible none
  ErrorCode int16 0+
  Mechanisms []string 0+

# SaslAuthenticateRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker controller
message SaslAuthenticateRequest api 36 versions 0-2 flexible 2+
  AuthBytes bytes 0+

# SaslAuthenticateResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message SaslAuthenticateResponse api 36 versions 0-2 flexible 2+
  ErrorCode int16 0+
  ErrorMessage string 0+ nullable 0+
  AuthBytes bytes 0+
  SessionLifetimeMs int64 1+ default 0 ignorable

# GetTelemetrySubscriptionsRequest.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
#   listeners: broker
message GetTelemetrySubscriptionsRequest api 71 versions 0 flexible 0+
  ClientInstanceId uuid 0+

# GetTelemetrySubscriptionsResponse.json @ 4.1.1 (be816b82d25370ceac697ccf7c88cea873e9b4e3)
message GetTelemetrySubscriptionsResponse api 71 versions 0 flexible 0+
  ThrottleTimeMs int32 0+
  ErrorCode int16 0+
  ClientInstanceId uuid 0+
  SubscriptionId int32 0+
  AcceptedCompressionTypes []int8 0+
  PushIntervalMs int32 0+
  TelemetryMaxBytes int32 0+
  DeltaTemporality bool 0+
  RequestedMetrics []string 0+
"""
