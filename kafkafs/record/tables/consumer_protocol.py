"""The consumer protocol's member metadata (``ConsumerProtocolSubscription``) and
assignment (``ConsumerProtocolAssignment``): the bytes a classic group's members exchange
through the coordinator, kept in ``GroupMetadataValue``'s ``subscription`` and
``assignment`` (each an int16 version, then the message), in the table language of
:mod:`kafkafs.record.schema`.

The facts are Apache Kafka's (``clients/src/main/resources/common/message``, 4.1.1,
be816b82d25370ceac697ccf7c88cea873e9b4e3); the form is ours. A version above 3 is read
with version 3's layout, as Kafka's ``ConsumerProtocol`` does (new versions may only add
fields at the end)."""

TABLE = r"""
# ConsumerProtocolSubscription.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1)
message ConsumerProtocolSubscription versions 0-3 flexible none
  topics []string 0+
  userData bytes 0+ nullable 0+ default null
  ownedPartitions []TopicPartition 1+ ignorable
    topic string 1+
    partitions []int32 1+
  generationId int32 2+ default -1 ignorable
  rackId string 3+ nullable 3+ default null ignorable

# ConsumerProtocolAssignment.json @ be816b82d25370ceac697ccf7c88cea873e9b4e3 (4.1.1)
message ConsumerProtocolAssignment versions 0-3 flexible none
  assignedPartitions []TopicPartition 0+
    topic string 0+
    partitions []int32 0+
  userData bytes 0+ nullable 0+ default null
"""
