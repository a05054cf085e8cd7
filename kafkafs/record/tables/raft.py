"""KRaft's control records (``LeaderChangeMessage``, the snapshot header and footer,
``kraft.version``, the voters) in the metadata log and its snapshots, in the table language
of :mod:`kafkafs.record.schema`; ``api`` is the ControlRecordType.

The facts are Apache Kafka's (the JSON message definitions named above each block); the
form is ours."""

TABLE = r"""
# KRaft control records of Apache Kafka 4.x: the records that KRaft itself writes into the metadata log
# `__cluster_metadata-0` and into its snapshots (`<offset>-<epoch>.checkpoint`). Definitions live in
# clients/src/main/resources/common/message/ ("type": "data", no apiKey); `api` below is the record's
# ControlRecordType number.
#
# Source: the tree of the Apache Kafka release tag 4.1.1, commit be816b82d25370ceac697ccf7c88cea873e9b4e3
# (2025-10-26), read with git from the stored snapshot of the fork aiven/inkless (which carries the upstream
# tags). The five JSON files are identical at 4.0.0 (985bc99521dd22bbf620591b8db8613c54f596b2), 4.1.0
# (13f70256db3c994c590e5d262a7cc50b9e973204) and 4.2.0-rc1 (6eef66363478d2946fbc7d8f93c863246f7c14d5); they last changed in
# 38e727fe4d7f992534ff797208b9ad16f81c68a6 (2024-12-07, KAFKA-17864, "about" texts only) -- the Oct-2024
# apache/kafka snapshot (1eb7644349cb07139d6a3c1ad1986979647cac99) has the same names, types and versions.
#
# Control record types -- clients/src/main/java/org/apache/kafka/common/record/ControlRecordType.java
# @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (unchanged since 80f31224aa, 2024-06-20; same in the Oct-2024 snapshot):
#    0 ABORT, 1 COMMIT    transaction markers (EndTransactionMarker), not KRaft records
#    2 LEADER_CHANGE      LeaderChangeMessage
#    3 SNAPSHOT_HEADER    SnapshotHeaderRecord
#    4 SNAPSHOT_FOOTER    SnapshotFooterRecord
#    5 KRAFT_VERSION      KRaftVersionRecord
#    6 KRAFT_VOTERS       VotersRecord
#   -1 UNKNOWN            any other type id read from a key; ignored
#
# How records are framed on disk (all in RecordBatch magic v2):
#  * Metadata records (metadata.ks) sit in ordinary (non-control) batches, one per record; record key null
#    (varint -1), no headers, timestampDelta 0 -- raft/src/main/java/org/apache/kafka/raft/internals/BatchBuilder.java
#    writeRecord @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (last changed 7495e70365ebeba4806fc4da23c2ca75fa191649).
#    The record value is
#        unsigned varint frame version   = 1 (DEFAULT_FRAME_VERSION)
#        unsigned varint apiKey          (the metadata record's apiKey)
#        unsigned varint version         (the record's version, within validVersions)
#        the message body at that version (flexible encoding: compact strings/arrays, tagged-field section)
#    -- server-common/src/main/java/org/apache/kafka/server/common/serialization/AbstractApiMessageSerde.java
#    write()/read() @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (blob a29b6a00fc00, last changed
#    eed5e68880c0d4fe088fcb9493baecc3db667176; the same blob in 4.0.0 and in the Oct-2024 snapshot), used through
#    metadata/src/main/java/org/apache/kafka/metadata/MetadataRecordSerde.java, which maps apiKey -> record via
#    MetadataRecordType.fromId. On read: frame version 0 is rejected (the 2.8 KRaft preview format), any other
#    frame version than 1 is rejected, a varint above 32767 is rejected, and trailing bytes after the body are an error.
#  * Control records (this file) sit in control batches (isControlBatch, no producer id). Key = 4 bytes: int16 key
#    version 0, int16 ControlRecordType (big-endian; ControlRecordType.recordKey / MemoryRecordsBuilder.appendControlRecord).
#    Value = the message body alone, no frame/apiKey/version prefix, written and read at version
#    ControlRecordUtils.*_CURRENT_VERSION = 0 for all five (MessageUtil.toByteBufferAccessor in
#    MemoryRecordsBuilder.append{LeaderChange,SnapshotHeader,SnapshotFooter,KRaftVersion,Voters}Message;
#    ControlRecordUtils.deserialize*), each message also carrying its own `version` int16 field set to that value
#    -- clients/src/main/java/org/apache/kafka/common/record/ControlRecordUtils.java and MemoryRecordsBuilder.java
#    @ be816b82d25370ceac697ccf7c88cea873e9b4e3.
#  * A snapshot starts with one control batch holding SnapshotHeaderRecord, then (when kraft.version supports
#    reconfiguration) KRaftVersionRecord and VotersRecord, and ends with a control batch holding SnapshotFooterRecord
#    (raft/src/main/java/org/apache/kafka/snapshot/RecordsSnapshotWriter.java @ be816b82d25370ceac697ccf7c88cea873e9b4e3).
#    A new leader writes LeaderChangeMessage (plus, with reconfiguration, the voter set) at the start of its epoch
#    (raft/.../LeaderState.appendStartOfEpochControlRecords).
#
# Doubts / notes:
#  - LeaderChangeMessage has validVersions 0-1 (v1 adds Voter.voterDirectoryId, KIP-853), but 4.1.1 writes and reads
#    it only at version 0 (LEADER_CHANGE_CURRENT_VERSION = 0), so voterDirectoryId does not reach the disk.
#  - AbstractApiMessageSerde's Javadoc says the frame version's "current value is 0", but the code writes 1 and
#    refuses 0; the code is taken as the fact.
#  - Field names are written lower-camel-case (first letter lowered: "KRaftVersion" -> kRaftVersion); struct type
#    names as Kafka spells them.
#  - Two different structs are both named Voter: LeaderChangeMessage's commonStruct (`struct Voter` below:
#    voterId, voterDirectoryId 1+) and VotersRecord's inline []Voter (voterId, voterDirectoryId 0+, endpoints,
#    kRaftVersionFeature). In Kafka each belongs to its own message; a reader of this file must not merge them.
#  - raft/src/main/resources/common/message/QuorumStateData.json (the quorum-state file) is not a log record and is
#    left out.

# LeaderChangeMessage.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1; last changed 38e727fe4d7f992534ff797208b9ad16f81c68a6)
message LeaderChangeMessage api 2 versions 0-1 flexible 0+
  version int16 0+
  leaderId int32 0+
  voters []Voter 0+
  grantingVoters []Voter 0+

# LeaderChangeMessage.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (commonStructs)
struct Voter versions 0+
  voterId int32 0+
  voterDirectoryId uuid 1+

# SnapshotHeaderRecord.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1; last changed 38e727fe4d7f992534ff797208b9ad16f81c68a6)
message SnapshotHeaderRecord api 3 versions 0 flexible 0+
  version int16 0+
  lastContainedLogTimestamp int64 0+

# SnapshotFooterRecord.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1; last changed 38e727fe4d7f992534ff797208b9ad16f81c68a6)
message SnapshotFooterRecord api 4 versions 0 flexible 0+
  version int16 0+

# KRaftVersionRecord.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1; last changed 38e727fe4d7f992534ff797208b9ad16f81c68a6)
message KRaftVersionRecord api 5 versions 0 flexible 0+
  version int16 0+
  kRaftVersion int16 0+

# VotersRecord.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1; last changed 38e727fe4d7f992534ff797208b9ad16f81c68a6)
message VotersRecord api 6 versions 0 flexible 0+
  version int16 0+
  voters []Voter 0+
    voterId int32 0+
    voterDirectoryId uuid 0+
    endpoints []Endpoint 0+
      name string 0+
      host string 0+
      port uint16 0+
    kRaftVersionFeature KRaftVersionFeature 0+
      minSupportedVersion int16 0+
      maxSupportedVersion int16 0+
"""
