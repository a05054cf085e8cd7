"""Kafka's error codes, and the one place where kafkafs errors become them (docs/design.md §9).

The codes are Kafka's (``org.apache.kafka.common.protocol.Errors``, 4.1); :func:`code_of`
maps an exception of the storage engine to the code Kafka's broker answers for the same
condition (``Errors.forException``: anything unknown is ``UNKNOWN_SERVER_ERROR``), as
``kafkafs.fs.errors`` maps them to errno values for the mount.
"""

from __future__ import annotations

from ..log import errors as E
from ..log.producer_state import InvalidTxnStateError
from ..record.errors import CorruptRecordError, UnsupportedCodecError

UNKNOWN_SERVER_ERROR = -1
NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_FETCH_SIZE = 4
LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
MESSAGE_TOO_LARGE = 10
OFFSET_METADATA_TOO_LARGE = 12
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
INVALID_TOPIC_EXCEPTION = 17
RECORD_LIST_TOO_LARGE = 18
INVALID_REQUIRED_ACKS = 21
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
INVALID_COMMIT_OFFSET_SIZE = 28
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
INVALID_TIMESTAMP = 32
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_CONFIG = 40
NOT_CONTROLLER = 41
INVALID_REQUEST = 42
POLICY_VIOLATION = 44
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
OPERATION_NOT_ATTEMPTED = 55
KAFKA_STORAGE_ERROR = 56
LOG_DIR_NOT_FOUND = 57
UNKNOWN_PRODUCER_ID = 59
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
UNSUPPORTED_COMPRESSION_TYPE = 76
OFFSET_NOT_AVAILABLE = 78
MEMBER_ID_REQUIRED = 79
GROUP_MAX_SIZE_REACHED = 81
FENCED_INSTANCE_ID = 82
INVALID_RECORD = 87
GROUP_SUBSCRIBED_TO_TOPIC = 86
UNSTABLE_OFFSET_COMMIT = 88
PRODUCER_FENCED = 90
UNKNOWN_TOPIC_ID = 100
INCONSISTENT_TOPIC_ID = 103
FETCH_SESSION_TOPIC_ID_ERROR = 106

#: engine exceptions -> codes, the first match wins (subclasses before their bases)
_CODES = [
    (E.OffsetOutOfRangeError, OFFSET_OUT_OF_RANGE),
    (E.UnknownTopicOrPartitionError, UNKNOWN_TOPIC_OR_PARTITION),
    (E.RecordTooLargeError, MESSAGE_TOO_LARGE),
    (E.InvalidTimestampError, INVALID_TIMESTAMP),
    (E.OutOfOrderSequenceError, OUT_OF_ORDER_SEQUENCE_NUMBER),
    (E.InvalidProducerEpochError, INVALID_PRODUCER_EPOCH),
    (E.InvalidTopicError, INVALID_TOPIC_EXCEPTION),
    (E.InvalidConfigError, INVALID_CONFIG),
    (E.InvalidRecordError, INVALID_RECORD),
    (E.TopicExistsError, TOPIC_ALREADY_EXISTS),
    (InvalidTxnStateError, INVALID_TXN_STATE),
    (E.ReadOnlyLogError, KAFKA_STORAGE_ERROR),
    (UnsupportedCodecError, UNKNOWN_SERVER_ERROR),
    (CorruptRecordError, CORRUPT_MESSAGE),
    (OSError, KAFKA_STORAGE_ERROR),
]


def code_of(exc: BaseException) -> int:
    """Kafka's error code for ``exc`` (``Errors.forException``; UNKNOWN_SERVER_ERROR for
    anything kafkafs does not map)."""
    for cls, code in _CODES:
        if isinstance(exc, cls):
            return code
    return UNKNOWN_SERVER_ERROR


class ProtocolError(Exception):
    """A request Kafka's broker answers by closing the connection (a frame over
    ``socket.request.max.bytes``, an unknown api key, a version it does not support, a
    body that does not parse); the message says why, for the log."""
