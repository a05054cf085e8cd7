"""Control records: the key every control record carries and the transaction markers.

Follows Apache Kafka's ``ControlRecordType`` and ``EndTransactionMarker`` (clients module,
``org.apache.kafka.common.record``) byte for byte (docs/design.md §2.2):

* key (every control record): ``version`` i16 (0) + ``type`` i16, big-endian. A newer key
  version is read as version 0 (the type stays at bytes 2-4), a negative one is corrupt.
* COMMIT/ABORT value (``EndTransactionMarker``): ``version`` i16 (0) + ``coordinatorEpoch``
  i32. A newer value version is read as version 0, a negative one is corrupt.

Control records sit in batches with the control attribute bit set; the broker writes a
COMMIT or ABORT marker batch (also transactional, no sequence) when a transaction ends, and
KRaft writes the other types (producer id -1). No I/O here.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from .batch import encode_batch
from .errors import CorruptRecordError

__all__ = [
    "ABORT",
    "COMMIT",
    "CONTROL_TYPE_NAMES",
    "KRAFT_VERSION",
    "KRAFT_VOTERS",
    "LEADER_CHANGE",
    "SNAPSHOT_FOOTER",
    "SNAPSHOT_HEADER",
    "UNKNOWN",
    "EndTransactionMarker",
    "control_type_name",
    "encode_control_key",
    "encode_end_txn_marker_batch",
    "encode_end_txn_marker_value",
    "end_txn_marker",
    "parse_control_key",
    "parse_end_txn_marker",
]

# ControlRecordType ids
ABORT = 0
COMMIT = 1
LEADER_CHANGE = 2
SNAPSHOT_HEADER = 3
SNAPSHOT_FOOTER = 4
KRAFT_VERSION = 5
KRAFT_VOTERS = 6
UNKNOWN = -1  # what Kafka calls every type id it does not know

#: type id → ``ControlRecordType`` constant name
CONTROL_TYPE_NAMES = {ABORT: "ABORT", COMMIT: "COMMIT", LEADER_CHANGE: "LEADER_CHANGE",
                      SNAPSHOT_HEADER: "SNAPSHOT_HEADER", SNAPSHOT_FOOTER: "SNAPSHOT_FOOTER",
                      KRAFT_VERSION: "KRAFT_VERSION", KRAFT_VOTERS: "KRAFT_VOTERS"}

CONTROL_KEY_VERSION = 0
CONTROL_KEY_SIZE = 4
END_TXN_MARKER_VERSION = 0
END_TXN_MARKER_VALUE_SIZE = 6

_KEY = struct.Struct(">hh")
_MARKER = struct.Struct(">hi")


class EndTransactionMarker(NamedTuple):
    """A decoded COMMIT/ABORT marker (Kafka ``EndTransactionMarker``): ``control_type``
    (:data:`ABORT` or :data:`COMMIT`) and ``coordinator_epoch`` (i32)."""

    control_type: int
    coordinator_epoch: int


def control_type_name(type_id: int) -> str:
    """Kafka's name for a control type id; ``"UNKNOWN"`` for ids it does not know
    (``ControlRecordType.fromTypeId``)."""
    return CONTROL_TYPE_NAMES.get(type_id, "UNKNOWN")


def parse_control_key(key) -> tuple[int, int]:
    """``(version, type id)`` of a control record key (``ControlRecordType.parseTypeId``).

    ``key``: bytes-like, at least 4 bytes (more are allowed: a newer key version may add
    fields). The type id is returned as stored, known or not (see :func:`control_type_name`).
    Raises CorruptRecordError for a missing or short key or a negative version.
    """
    if key is None or len(key) < CONTROL_KEY_SIZE:
        found = 0 if key is None else len(key)
        raise CorruptRecordError(
            f"Invalid value size found for control record key. Must have at least "
            f"{CONTROL_KEY_SIZE} bytes, but found only {found}")
    version, type_id = _KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(
            f"Invalid version found for control record: {version}. May indicate data corruption")
    return version, type_id


def parse_end_txn_marker(value) -> tuple[int, int]:
    """``(version, coordinator epoch)`` of a COMMIT/ABORT marker's value
    (``EndTransactionMarker.deserializeValue``).

    ``value``: bytes-like, at least 6 bytes. Raises CorruptRecordError for a missing or short
    value or a negative version.
    """
    if value is None or len(value) < END_TXN_MARKER_VALUE_SIZE:
        found = 0 if value is None else len(value)
        raise CorruptRecordError(
            f"Invalid value size found for end transaction marker. Must have at least "
            f"{END_TXN_MARKER_VALUE_SIZE} bytes, but found only {found}")
    version, epoch = _MARKER.unpack_from(value)
    if version < 0:
        raise CorruptRecordError(f"Invalid version found for end transaction marker: {version}. "
                                 "May indicate data corruption")
    return version, epoch


def end_txn_marker(key, value) -> EndTransactionMarker:
    """The marker a control record's ``key``/``value`` hold
    (``EndTransactionMarker.deserialize``).

    Raises CorruptRecordError when the key or value cannot be parsed or the key's type is
    not COMMIT or ABORT.
    """
    _version, type_id = parse_control_key(key)
    if type_id not in (ABORT, COMMIT):
        raise CorruptRecordError(f"Invalid control record type for end transaction marker: "
                                 f"{control_type_name(type_id)} ({type_id})")
    _version, epoch = parse_end_txn_marker(value)
    return EndTransactionMarker(type_id, epoch)


def encode_control_key(type_id: int, version: int = CONTROL_KEY_VERSION) -> bytes:
    """The 4-byte key of a control record of type ``type_id``
    (``ControlRecordType.recordKey``)."""
    return _KEY.pack(version, type_id)


def encode_end_txn_marker_value(coordinator_epoch: int,
                                version: int = END_TXN_MARKER_VERSION) -> bytes:
    """The 6-byte value of a COMMIT/ABORT marker (``EndTransactionMarker.serializeValue``)."""
    return _MARKER.pack(version, coordinator_epoch)


def encode_end_txn_marker_batch(control_type: int, *, base_offset: int, timestamp: int,
                                producer_id: int, producer_epoch: int,
                                coordinator_epoch: int,
                                partition_leader_epoch: int = -1) -> bytes:
    """A marker batch as the broker writes it (``MemoryRecords.withEndTransactionMarker``):
    one control record (key :func:`encode_control_key`, value
    :func:`encode_end_txn_marker_value`, no headers) at ``base_offset`` with ``timestamp``
    (ms), attributes transactional + control, base sequence -1, no compression.

    Raises ValueError unless ``control_type`` is :data:`ABORT` or :data:`COMMIT`.
    """
    if control_type not in (ABORT, COMMIT):
        raise ValueError(f"not an end transaction marker type: {control_type}")
    record = (timestamp, encode_control_key(control_type),
              encode_end_txn_marker_value(coordinator_epoch), ())
    return encode_batch([record], base_offset=base_offset, producer_id=producer_id,
                        producer_epoch=producer_epoch,
                        partition_leader_epoch=partition_leader_epoch,
                        is_transactional=True, is_control=True)
