"""The KRaft metadata records of ``__cluster_metadata`` (Kafka 4.x
``metadata/src/main/resources/common/metadata``) in the table language of
:mod:`kafkafs.record.schema`; ``api`` is the record's apiKey.

The facts are Apache Kafka's (the JSON message definitions named above each block); the
form is ours."""

TABLE = r"""
# KRaft metadata records of Apache Kafka 4.x (`__cluster_metadata`), as defined in
# metadata/src/main/resources/common/metadata/*.json of apache/kafka.
#
# Source: the tree of the Apache Kafka release tag 4.1.1, commit be816b82d25370ceac697ccf7c88cea873e9b4e3
# (2025-10-26), read with git from the stored snapshot of the fork aiven/inkless, which carries the
# upstream release tags and history. All 26 files are byte-identical at 4.1.0 (13f70256db3c994c590e5d262a7cc50b9e973204),
# and unchanged up to 4.2.0-rc1 (6eef66363478d2946fbc7d8f93c863246f7c14d5). Compared with 4.0.0
# (985bc99521dd22bbf620591b8db8613c54f596b2) and with the Oct-2024 apache/kafka snapshot (1eb7644349cb07139d6a3c1ad1986979647cac99):
#   - 4.0.0 adds ClearElrRecord (6235a73622d58a9c70b4f581aa2b7d48ace446b3, KAFKA-16540) and a 4.0 comment in
#     ZkMigrationRecord.json (772aa241b2f1c3e8c8b7ad73ddc910c8272f2d1d, KAFKA-18136); no other change.
#   - 4.1.0 writes the tags of RegisterBrokerRecord.LogDirs / BrokerRegistrationChangeRecord.LogDirs as JSON numbers
#     instead of strings "0" / "2" (c40cc5740f1edc0230279e7c5857e07a13737cfb, KAFKA-18408); same tag values.
#   - no validVersions changed anywhere between Oct 2024 and 4.2.0-rc1.
# and ZkMigrationRecord.json @ de929d3e472a9cfc146afe162f19f96f6e9696ec hold the same facts as 4.1.1.
# Cross-checked with the file store (read_file, repo apache/kafka): ClearElrRecord.json @ 9e1f0bb07f5d0d8e81360d103868b0333f5c054e
# changed the file.
# The line `# <File>.json @ <sha>` of each block names the 4.1.1 commit read, then the upstream commit that last
#
# Record types (apiKey -> message), 26 in all:
#    0 RegisterBrokerRecord            1 UnregisterBrokerRecord          2 TopicRecord
#    3 PartitionRecord                 4 ConfigRecord                    5 PartitionChangeRecord
#    7 FenceBrokerRecord               8 UnfenceBrokerRecord             9 RemoveTopicRecord
#   10 DelegationTokenRecord          11 UserScramCredentialRecord      12 FeatureLevelRecord
#   14 ClientQuotaRecord              15 ProducerIdsRecord              17 BrokerRegistrationChangeRecord
#   18 AccessControlEntryRecord       19 RemoveAccessControlEntryRecord 20 NoOpRecord
#   21 ZkMigrationStateRecord (file ZkMigrationRecord.json)             22 RemoveUserScramCredentialRecord
#   23 BeginTransactionRecord         24 EndTransactionRecord           25 AbortTransactionRecord
#   26 RemoveDelegationTokenRecord    27 RegisterControllerRecord       28 ClearElrRecord
#   apiKeys 6, 13 and 16 are unused in 4.x (6 and 16 belonged to definitions deleted from the tree long
#   before 4.0: an early AccessControlRecord and RemoveFeatureLevelRecord).
#
# Doubts / notes:
#   - Field names are written lower-camel-case (first letter lowered, the rest as in Kafka: "KRaftVersion" ->
#     kRaftVersion), as in the DSL example; struct type names are kept as Kafka spells them.
#   - Every metadata record is flexible (flexible 0+); none has an `ignorable` field or a commonStructs section.
#   - ZkMigrationRecord.json defines the message ZkMigrationStateRecord; it is kept in 4.x only so that logs written
#     by a 3.x migration stay readable (its states: 0 None, 2 PreMigration, 1 Migration, 3 PostMigration since 3.5).
#     RegisterBrokerRecord.isMigratingZkBroker and RegisterControllerRecord.zkMigrationReady are likewise still
#     defined in 4.x.
#   - FeatureLevelRecord: Kafka's JSON notes its version can never advance beyond 0 (logs and snapshots start with it).
#   - Fields with no `default` here take the generator's implicit default (0, false, "", empty array, zero UUID).
#   - The file store (find_files/read_file) returns one arbitrary stored version per file and could not list the
#     others, so the 2025 versions were taken from the release tags in the aiven/inkless git snapshot; the
#     commit named is an upstream Apache commit (the 4.1.1 release commit), not an inkless one.
#   - Framing of these records on disk: see the comment at the top of raft.ks (frame version 1, apiKey,
#     version as unsigned varints, then the body; null record key).

# RegisterBrokerRecord.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1; last changed c40cc5740f1edc0230279e7c5857e07a13737cfb)
message RegisterBrokerRecord api 0 versions 0-3 flexible 0+
  brokerId int32 0+
  isMigratingZkBroker bool 2+ default false
  incarnationId uuid 0+
  brokerEpoch int64 0+
  endPoints []BrokerEndpoint 0+
    name string 0+
    host string 0+
    port uint16 0+
    securityProtocol int16 0+
  features []BrokerFeature 0+
    name string 0+
    minSupportedVersion int16 0+
    maxSupportedVersion int16 0+
  rack string 0+ nullable 0+
  fenced bool 0+ default true
  inControlledShutdown bool 1+ default false
  logDirs []uuid 3+ tag 0 tagged 3+

# UnregisterBrokerRecord.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1; last changed d20865ae792baa287cf9707ab6c05ea6da6be517)
message UnregisterBrokerRecord api 1 versions 0 flexible 0+
  brokerId int32 0+
  brokerEpoch int64 0+

# TopicRecord.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1; last changed 8438c4339e0a103d95575336a9f3653698cd0b8e)
message TopicRecord api 2 versions 0 flexible 0+
  name string 0+
  topicId uuid 0+

# v1 adds directories (KIP-858); v2 adds eligibleLeaderReplicas and lastKnownElr (KIP-966).
# PartitionRecord.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1; last changed 7e5ef9b509a00973d271def5f70ca2062208e778)
message PartitionRecord api 3 versions 0-2 flexible 0+
  partitionId int32 0+ default -1
  topicId uuid 0+
  replicas []int32 0+
  isr []int32 0+
  removingReplicas []int32 0+
  addingReplicas []int32 0+
  leader int32 0+ default -1
  leaderRecoveryState int8 0+ tag 0 tagged 0+ default 0
  leaderEpoch int32 0+ default -1
  partitionEpoch int32 0+ default -1
  directories []uuid 1+
  eligibleLeaderReplicas []int32 2+ nullable 2+ tag 1 tagged 2+ default null
  lastKnownElr []int32 2+ nullable 2+ tag 2 tagged 2+ default null

# ConfigRecord.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1; last changed d20865ae792baa287cf9707ab6c05ea6da6be517)
message ConfigRecord api 4 versions 0 flexible 0+
  resourceType int8 0+
  resourceName string 0+
  name string 0+
  value string 0+ nullable 0+

# All fields after topicId are tagged. Tags in field order: 0 1 2 3 4 5 8 6 7 (directories is tag 8).
# PartitionChangeRecord.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1; last changed 7e5ef9b509a00973d271def5f70ca2062208e778)
message PartitionChangeRecord api 5 versions 0-2 flexible 0+
  partitionId int32 0+ default -1
  topicId uuid 0+
  isr []int32 0+ nullable 0+ tag 0 tagged 0+ default null
  leader int32 0+ tag 1 tagged 0+ default -2
  replicas []int32 0+ nullable 0+ tag 2 tagged 0+ default null
  removingReplicas []int32 0+ nullable 0+ tag 3 tagged 0+ default null
  addingReplicas []int32 0+ nullable 0+ tag 4 tagged 0+ default null
  leaderRecoveryState int8 0+ tag 5 tagged 0+ default -1
  directories []uuid 1+ nullable 1+ tag 8 tagged 1+ default null
  eligibleLeaderReplicas []int32 2+ nullable 2+ tag 6 tagged 2+ default null
  lastKnownElr []int32 2+ nullable 2+ tag 7 tagged 2+ default null

# FenceBrokerRecord.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1; last changed d20865ae792baa287cf9707ab6c05ea6da6be517)
message FenceBrokerRecord api 7 versions 0 flexible 0+
  id int32 0+
  epoch int64 0+

# UnfenceBrokerRecord.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1; last changed d20865ae792baa287cf9707ab6c05ea6da6be517)
message UnfenceBrokerRecord api 8 versions 0 flexible 0+
  id int32 0+
  epoch int64 0+

# RemoveTopicRecord.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1; last changed d20865ae792baa287cf9707ab6c05ea6da6be517)
message RemoveTopicRecord api 9 versions 0 flexible 0+
  topicId uuid 0+

# DelegationTokenRecord.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1; last changed c2759df0676cef252596239baf8f1f361e76c49f)
message DelegationTokenRecord api 10 versions 0 flexible 0+
  owner string 0+
  requester string 0+
  renewers []string 0+
  issueTimestamp int64 0+
  maxTimestamp int64 0+
  expirationTimestamp int64 0+
  tokenId string 0+

# UserScramCredentialRecord.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1; last changed abca86511ecc9e081d676976ff6d3b845308f444)
message UserScramCredentialRecord api 11 versions 0 flexible 0+
  name string 0+
  mechanism int8 0+
  salt bytes 0+
  storedKey bytes 0+
  serverKey bytes 0+
  iterations int32 0+

# FeatureLevelRecord.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1; last changed f0f918b242e223d9329ae61be8bf12894ba23d77)
message FeatureLevelRecord api 12 versions 0 flexible 0+
  name string 0+
  featureLevel int16 0+

# ClientQuotaRecord.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1; last changed d20865ae792baa287cf9707ab6c05ea6da6be517)
message ClientQuotaRecord api 14 versions 0 flexible 0+
  entity []EntityData 0+
    entityType string 0+
    entityName string 0+ nullable 0+
  key string 0+
  value float64 0+
  remove bool 0+

# ProducerIdsRecord.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1; last changed fc20c551d6b4f5c675d9bd80876950e23d194933)
message ProducerIdsRecord api 15 versions 0 flexible 0+
  brokerId int32 0+
  brokerEpoch int64 0+ default -1
  nextProducerId int64 0+

# fenced: -1 unfenced, 0 no change, 1 fenced; inControlledShutdown: 0 no change, 1 in controlled shutdown.
# BrokerRegistrationChangeRecord.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1; last changed c40cc5740f1edc0230279e7c5857e07a13737cfb)
message BrokerRegistrationChangeRecord api 17 versions 0-2 flexible 0+
  brokerId int32 0+
  brokerEpoch int64 0+
  fenced int8 0+ tag 0 tagged 0+
  inControlledShutdown int8 1+ tag 1 tagged 1+
  logDirs []uuid 2+ tag 2 tagged 2+

# AccessControlEntryRecord.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1; last changed d35283f011a797902fc9c4d896a1a6f039eb7d06)
message AccessControlEntryRecord api 18 versions 0 flexible 0+
  id uuid 0+
  resourceType int8 0+
  resourceName string 0+
  patternType int8 0+
  principal string 0+
  host string 0+
  operation int8 0+
  permissionType int8 0+

# RemoveAccessControlEntryRecord.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1; last changed d35283f011a797902fc9c4d896a1a6f039eb7d06)
message RemoveAccessControlEntryRecord api 19 versions 0 flexible 0+
  id uuid 0+

# no fields
# NoOpRecord.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1; last changed 7d1b0926fab104311a505826831ddc45864e9a6a)
message NoOpRecord api 20 versions 0 flexible 0+

# ZkMigrationRecord.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1; last changed 772aa241b2f1c3e8c8b7ad73ddc910c8272f2d1d)
message ZkMigrationStateRecord api 21 versions 0 flexible 0+
  zkMigrationState int8 0+

# RemoveUserScramCredentialRecord.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1; last changed 38c409cf33cad1e18e4080f04ba21f127a0c4028)
message RemoveUserScramCredentialRecord api 22 versions 0 flexible 0+
  name string 0+
  mechanism int8 0+

# BeginTransactionRecord.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1; last changed adc16d0f310dc1350bca66d5da013d599b990cfa)
message BeginTransactionRecord api 23 versions 0 flexible 0+
  name string 0+ nullable 0+ tag 0 tagged 0+ default null

# no fields
# EndTransactionRecord.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1; last changed adc16d0f310dc1350bca66d5da013d599b990cfa)
message EndTransactionRecord api 24 versions 0 flexible 0+

# AbortTransactionRecord.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1; last changed adc16d0f310dc1350bca66d5da013d599b990cfa)
message AbortTransactionRecord api 25 versions 0 flexible 0+
  reason string 0+ nullable 0+ tag 0 tagged 0+ default null

# RemoveDelegationTokenRecord.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1; last changed c2759df0676cef252596239baf8f1f361e76c49f)
message RemoveDelegationTokenRecord api 26 versions 0 flexible 0+
  tokenId string 0+

# RegisterControllerRecord.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1; last changed 41b695b6e30baa4243d9ca4f359b833e17ed0e77)
message RegisterControllerRecord api 27 versions 0 flexible 0+
  controllerId int32 0+
  incarnationId uuid 0+
  zkMigrationReady bool 0+
  endPoints []ControllerEndpoint 0+
    name string 0+
    host string 0+
    port uint16 0+
    securityProtocol int16 0+
  features []ControllerFeature 0+
    name string 0+
    minSupportedVersion int16 0+
    maxSupportedVersion int16 0+

# topicName empty = clear the ELRs of all topics.
# ClearElrRecord.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1; last changed 6235a73622d58a9c70b4f581aa2b7d48ace446b3)
message ClearElrRecord api 28 versions 0 flexible 0+
  topicName string 0+
"""
