"""Errors of the log engine. No errno here: ``fs`` maps them (DESIGN §1)."""

from __future__ import annotations

from ..record.errors import CorruptRecordError  # noqa: F401  (re-exported)


class LogError(Exception):
    """Base class of log-engine errors."""


class CorruptIndexError(LogError):
    """An offset or time index fails its sanity check (Kafka ``CorruptIndexException``)."""


class InvalidOffsetError(LogError):
    """An index append or lookup got an offset that breaks ordering
    (Kafka ``InvalidOffsetException``)."""


class IndexFullError(LogError):
    """An append to a full index (the segment must roll first)."""


class CorruptCheckpointError(LogError):
    """A checkpoint file cannot be parsed (Kafka's ``CheckpointFile`` ``IOException``)."""


class OffsetOutOfRangeError(LogError):
    """An offset outside [log start offset, log end offset) (Kafka
    ``OffsetOutOfRangeException``)."""


class RecordTooLargeError(LogError):
    """A record or batch over ``max.message.bytes`` (Kafka ``RecordTooLargeException``)."""


class InvalidTopicError(LogError):
    """An illegal topic name (Kafka ``InvalidTopicException``)."""


class InvalidConfigError(LogError):
    """A bad configuration key or value (Kafka ``ConfigException``)."""


class UnknownTopicOrPartitionError(LogError):
    """No such topic or partition (Kafka ``UnknownTopicOrPartitionException``)."""


class TopicExistsError(LogError):
    """The topic already exists (Kafka ``TopicExistsException``)."""


class LogDirLockedError(LogError):
    """Another process holds the log dir's ``.lock`` (a running daemon or broker)."""


class UnsafeLogDirError(LogError):
    """A file kafkafs cannot do without in a log dir (``.lock``) is a symbolic link, FIFO,
    device or anything but a regular file: kafkafs refuses the log dir (DESIGN §4)."""


class ReadOnlyLogError(LogError):
    """A write to a log opened read-only."""


class InvalidRecordError(LogError):
    """A record the log refuses as it is (Kafka ``InvalidRecordException``), e.g. a record
    without a key appended to a compacted topic."""


class LogCleaningAbortedError(LogError):
    """A cleaning pass was aborted (Kafka ``LogCleaningAbortedException``): the partition
    was paused, truncated, deleted or closed meanwhile, or its segments changed under the
    pass. Nothing was swapped in; the ``.cleaned`` files are removed."""
