"""The storage engine: Kafka's log format on disk, synchronous, no trio or FUSE
(DESIGN §1, §2)."""
