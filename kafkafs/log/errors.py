"""Errors of the log engine. No errno here: ``fs`` maps them (docs/design.md §1.2)."""

from __future__ import annotations

import logging

from ..record.errors import CorruptRecordError  # (re-exported)

_log = logging.getLogger("kafkafs.damage")
_REPORTED_MAX = 10_000
_reported: set = set()


def report_damage(exc: CorruptRecordError) -> None:
    """Log damage found in a log dir once per place (file and byte position; the message
    when it names no place), whoever meets it first and whatever reason it gives (a damaged
    batch is met by every read that reaches it, by the key map, the transaction scan, the
    producer state's replay, the cleaner -- a framing reader and a CRC-checking one may
    word it differently: the log shows it once). Thread-safe enough: a rare race logs a
    line twice."""
    key = (exc.path, exc.position) if exc.path is not None and exc.position is not None \
        else str(exc)
    if key in _reported:
        return
    if len(_reported) >= _REPORTED_MAX:
        _reported.clear()
    _reported.add(key)
    _log.error("Damaged data, readers get EIO from here on: %s", exc)


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
    device or anything but a regular file: kafkafs refuses the log dir (docs/design.md §2.4)."""


class ReadOnlyLogError(LogError):
    """A write to a log opened read-only."""


class InvalidRecordError(LogError):
    """A record the log refuses as it is (Kafka ``InvalidRecordException``), e.g. a record
    without a key appended to a compacted topic. ``record_errors``: ``(index in the batch,
    message)`` of each record refused, when records were (Kafka's ``RecordErrors``)."""

    def __init__(self, message: str, record_errors=()):
        super().__init__(message)
        self.record_errors = list(record_errors)


class InvalidTimestampError(InvalidRecordError):
    """A record whose timestamp is out of the topic's bounds
    (``message.timestamp.before.max.ms``/``after.max.ms``), or a producer's batch claiming
    LogAppendTime (Kafka ``InvalidTimestampException``)."""


class OutOfOrderSequenceError(LogError):
    """An idempotent producer's batch whose first sequence does not follow the last one the
    partition holds for that producer (Kafka ``OutOfOrderSequenceException``)."""


class InvalidProducerEpochError(LogError):
    """A producer's batch with an epoch below the one the partition last saw for it (Kafka
    ``InvalidProducerEpochException``: the producer was fenced)."""


class LogCleaningAbortedError(LogError):
    """A cleaning pass was aborted (Kafka ``LogCleaningAbortedException``): the partition
    was paused, truncated, deleted or closed meanwhile, or its segments changed under the
    pass. Nothing was swapped in; the ``.cleaned`` files are removed."""
