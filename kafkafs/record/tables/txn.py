"""The transaction coordinator's records in ``__transaction_state`` (``TransactionLogKey``,
``TransactionLogValue``), in the table language of :mod:`kafkafs.record.schema`; ``api``
is the record type.

The facts are Apache Kafka's (the JSON message definitions named above each block); the
form is ours."""

TABLE = r"""
# txn.ks -- records of __transaction_state (transaction coordinator), Apache Kafka 4.1
# Language: kafkafs schema table language v1 (/work/research/DSL.md).
#
# Source: apache/kafka transaction-coordinator/src/main/resources/common/message/*.json at release
# tag 4.1.1, commit be816b82d25370ceac697ccf7c88cea873e9b4e3 (2025-10-26). Byte-identical at 4.1.0
# (13f70256db3c994c590e5d262a7cc50b9e973204); facts unchanged in 4.2.0-rc1. Read with git from the local
# mirror /work/.mirror/aiven+inkless/repo, a fork that carries apache/kafka's release tags.
#
# Record types: 0 TransactionLogKey / TransactionLogValue (the only record type in the topic).
#   4.1: apiKey 0; TransactionCoordinatorRecordSerde maps it with CoordinatorRecordType.fromId,
#        and TransactionLog.scala writes keys with MessageUtil.toCoordinatorTypePrefixedBytes.
#   4.0.0 (985bc99521dd22bbf620591b8db8613c54f596b2) and the Oct 2024 snapshot: "type": "data",
#        no apiKey. TransactionLog.scala prefixes the key with TransactionLogKey.HIGHEST_SUPPORTED_VERSION
#        = 0 (validVersions "0"), so the key bytes are the same. The switch to coordinator-key/
#        coordinator-value is KAFKA-18604 (PR #18636, Jan 2025), i.e. 4.1, not 4.0.
#   The value's int16 prefix is its own schema version: 0, or 1 (flexible) when transaction.version >= 1.
#
# Doubts / notes:
# - PreviousProducerId, NextProducerId, NextProducerEpoch and ClientTransactionVersion have no
#   "versions" in the JSON. Kafka's generator (FieldSpec) then uses taggedVersions, so the
#   versions column below shows that effective value (1+).
# - NextProducerEpoch (tag 3) is in 4.1 but not in 4.0.0 (KIP-939, KAFKA-15370, PR #18316). The indexed version
#   @ 054b66e3cbaca56df136922090606e5dfbeb516c (apiKey 0, trunk in 2025) lacks it too.
#   The indexed TransactionLogKey versions (e.g. @ 53364c539970785f9317c2ddab26a4e350f12b23)
#   are all the older "type": "data" form; none has the apiKey.

# TransactionLogKey.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by 76bf38a4fd06 2025-01-21 KAFKA-18604)
# 4.0.0: "type": "data", same fields and versions, no apiKey.
message TransactionLogKey api 0 versions 0 flexible none
  TransactionalId string 0

# TransactionLogValue.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3
#   (tag 4.1.1, same file at 4.1.0 13f70256db3c; last changed by 247c0f0ba5dc 2025-01-21 KAFKA-15370)
# 4.0.0: the same without NextProducerEpoch. Oct 2024 snapshot: the same as 4.0.0.
# Tagged fields without "versions" in the JSON: the versions column is the effective taggedVersions.
message TransactionLogValue api 0 versions 0-1 flexible 1+
  ProducerId int64 0+
  PreviousProducerId int64 1+ tag 0 tagged 1+ default -1
  NextProducerId int64 1+ tag 1 tagged 1+ default -1
  ProducerEpoch int16 0+
  NextProducerEpoch int16 1+ tag 3 tagged 1+ default -1
  TransactionTimeoutMs int32 0+
  TransactionStatus int8 0+
  TransactionPartitions []PartitionsSchema 0+ nullable 0+
    Topic string 0+
    PartitionIds []int32 0+
  TransactionLastUpdateTimestampMs int64 0+
  TransactionStartTimestampMs int64 0+
  ClientTransactionVersion int16 1+ tag 2 tagged 1+ default 0
"""
