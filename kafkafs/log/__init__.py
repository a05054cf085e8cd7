"""The storage engine: Kafka's log format on disk, synchronous, no trio or FUSE
(docs/design.md §1, §2)."""
