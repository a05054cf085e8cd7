"""RecordBatch v2 (magic 2): encode, decode, validate.

Follows Apache Kafka's ``DefaultRecordBatch`` and ``DefaultRecord`` byte for byte
(KAFKA_FORMAT.md, "RecordBatch v2"). A batch is a 61-byte big-endian header followed by
``recordsCount`` records, compressed together when the codec bits of the attributes are set.
The CRC-32C covers bytes ``[21, end)`` so the base offset and partition leader epoch can be
stamped without recomputing it.

No I/O happens here: functions take and return bytes-like objects.
"""

from __future__ import annotations

import struct
from typing import Iterable, Iterator, Sequence

from crc32c import crc32c

from . import compression as _codec
from .errors import CorruptRecordError
from .varint import decode_varint, encode_varint

HEADER = struct.Struct(">qiibIhiqqqhii")
BATCH_OVERHEAD = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset i64 + length i32: what precedes "length" bytes
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
HEADER_PEEK = 17  # bytes needed to learn the magic of any message format

CURRENT_MAGIC = 2

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_TIMESTAMP_TYPE = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1
TIMESTAMP_TYPE_NAMES = {NO_TIMESTAMP_TYPE: "NoTimestampType", CREATE_TIME: "CreateTime",
                        LOG_APPEND_TIME: "LogAppendTime"}

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

_OFFSET_LENGTH = struct.Struct(">qi")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")

# zigzag varints of small non-negative values and -1, the overwhelmingly common cases
_SMALL_VARINTS = [encode_varint(n) for n in range(0, 1 << 14)]
_MINUS_ONE = encode_varint(-1)


def _varint(n: int) -> bytes:
    if 0 <= n < 16384:
        return _SMALL_VARINTS[n]
    return encode_varint(n)


Header = tuple  # (key: str, value: bytes | None)


class Record:
    """One decoded record.

    Attributes: ``offset`` (absolute), ``timestamp`` (ms since epoch; under LogAppendTime the
    batch's max timestamp), ``key`` and ``value`` (bytes or None), ``headers`` (tuple of
    ``(str, bytes | None)``). Equality compares all five.
    """

    __slots__ = ("offset", "timestamp", "key", "value", "headers")

    def __init__(self, offset: int, timestamp: int, key, value, headers=()):
        self.offset = offset
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.headers = headers

    def __eq__(self, other):
        return isinstance(other, Record) and (
            self.offset, self.timestamp, self.key, self.value, tuple(self.headers)
        ) == (other.offset, other.timestamp, other.key, other.value, tuple(other.headers))

    def __repr__(self):
        return (f"Record(offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
                f"value={self.value!r}, headers={self.headers!r})")


class RecordBatch:
    """A v2 batch over a buffer holding exactly its bytes.

    Construct with :meth:`from_buffer`. Header fields are attributes named as in Kafka
    (``base_offset``, ``batch_length``, ``partition_leader_epoch``, ``magic``, ``crc``,
    ``attributes``, ``last_offset_delta``, ``base_timestamp``, ``max_timestamp``,
    ``producer_id``, ``producer_epoch``, ``base_sequence``, ``records_count``); ``position``
    is where the batch starts in the file or buffer it was read from.
    """

    __slots__ = ("buffer", "position", "base_offset", "batch_length", "partition_leader_epoch",
                 "magic", "crc", "attributes", "last_offset_delta", "base_timestamp",
                 "max_timestamp", "producer_id", "producer_epoch", "base_sequence",
                 "records_count")

    @classmethod
    def from_buffer(cls, buf, pos: int = 0, position: int | None = None) -> "RecordBatch":
        """Parse the header of the batch at ``buf[pos:]``.

        ``buf`` must hold the whole batch (``length + 12`` bytes from ``pos``); ``position``
        (default ``pos``) is recorded for error messages. Raises CorruptRecordError when the
        header is short or names another magic.
        """
        self = cls.__new__(cls)
        if len(buf) - pos < BATCH_OVERHEAD:
            raise CorruptRecordError("record batch shorter than its 61-byte header",
                                     position=pos if position is None else position)
        (self.base_offset, self.batch_length, self.partition_leader_epoch, self.magic,
         self.crc, self.attributes, self.last_offset_delta, self.base_timestamp,
         self.max_timestamp, self.producer_id, self.producer_epoch, self.base_sequence,
         self.records_count) = HEADER.unpack_from(buf, pos)
        self.position = pos if position is None else position
        if self.magic != CURRENT_MAGIC:
            raise CorruptRecordError(f"record batch has magic {self.magic}, expected 2",
                                     position=self.position)
        end = pos + self.batch_length + LOG_OVERHEAD
        if self.batch_length < BATCH_OVERHEAD - LOG_OVERHEAD or end > len(buf):
            raise CorruptRecordError(
                f"record batch length {self.batch_length} is out of bounds", position=self.position)
        self.buffer = memoryview(buf)[pos:end]
        return self

    # -- derived header values -------------------------------------------------------
    @property
    def size(self) -> int:
        """Bytes the batch occupies in the log (``length + 12``)."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self) -> int:
        """The delete horizon (ms) set by the cleaner, or -1 (``NO_TIMESTAMP``)."""
        return self.base_timestamp if self.has_delete_horizon else NO_TIMESTAMP

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF

    # -- validation -------------------------------------------------------------------
    def compute_crc(self) -> int:
        """CRC-32C of bytes [21, end) (what ``crc`` must equal)."""
        return crc32c(self.buffer[ATTRIBUTES_OFFSET:])

    def is_valid(self) -> bool:
        return self.compute_crc() == self.crc

    def ensure_valid(self) -> None:
        """Raise CorruptRecordError unless the stored CRC matches (``ensureValid``)."""
        computed = self.compute_crc()
        if computed != self.crc:
            raise CorruptRecordError(
                f"record batch is corrupt (stored crc = {self.crc}, computed crc = {computed})",
                position=self.position)

    # -- records ----------------------------------------------------------------------
    def records(self) -> list[Record]:
        """Decode every record (decompressing first). Raises CorruptRecordError."""
        try:
            return _decode_records(self)
        except CorruptRecordError as exc:
            raise exc.located(position=self.position) from None

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def __repr__(self):
        return (f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
                f"count={self.records_count}, position={self.position}, size={self.size})")


def _payload(batch: RecordBatch):
    raw = batch.buffer[BATCH_OVERHEAD:]
    codec = batch.attributes & COMPRESSION_MASK
    if codec == _codec.NONE:
        return raw, True
    return _codec.decompress(codec, raw), False


def _decode_records(batch: RecordBatch) -> list[Record]:
    count = batch.records_count
    if count < 0:
        raise CorruptRecordError(f"negative record count {count}")
    buf, uncompressed = _payload(batch)
    base_offset = batch.base_offset
    if batch.attributes & TIMESTAMP_TYPE_MASK:
        fixed_ts = batch.max_timestamp
    else:
        fixed_ts = None
    base_ts = batch.base_timestamp
    out = []
    append = out.append
    pos = 0
    end = len(buf)
    for _ in range(count):
        # length (usually 1-2 bytes)
        b = buf[pos] if pos < end else None
        if b is None:
            raise CorruptRecordError(f"batch ends after {len(out)} of {count} records")
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            length, pos = decode_varint(buf, pos)
        body_start = pos
        if length < 0 or pos + length > end:
            raise CorruptRecordError(f"record length {length} is out of bounds")
        pos += 1  # attributes (unused)
        ts_delta, pos = decode_varint(buf, pos)
        off_delta, pos = decode_varint(buf, pos)
        key_len, pos = decode_varint(buf, pos)
        if key_len >= 0:
            key = bytes(buf[pos:pos + key_len])
            pos += key_len
        else:
            key = None
        value_len, pos = decode_varint(buf, pos)
        if value_len >= 0:
            value = bytes(buf[pos:pos + value_len])
            pos += value_len
        else:
            value = None
        n_headers, pos = decode_varint(buf, pos)
        if n_headers:
            if n_headers < 0:
                raise CorruptRecordError(f"negative header count {n_headers}")
            headers = []
            for _h in range(n_headers):
                hk_len, pos = decode_varint(buf, pos)
                if hk_len < 0:
                    raise CorruptRecordError("null header key")
                hkey = bytes(buf[pos:pos + hk_len])
                pos += hk_len
                hv_len, pos = decode_varint(buf, pos)
                if hv_len >= 0:
                    hval = bytes(buf[pos:pos + hv_len])
                    pos += hv_len
                else:
                    hval = None
                try:
                    headers.append((hkey.decode("utf-8"), hval))
                except UnicodeDecodeError:
                    raise CorruptRecordError("header key is not UTF-8") from None
            headers = tuple(headers)
        else:
            headers = ()
        if pos - body_start != length:
            raise CorruptRecordError(
                f"invalid record size: expected to read {length} bytes in record payload, "
                f"but instead read {pos - body_start}")
        append(Record(base_offset + off_delta,
                      fixed_ts if fixed_ts is not None else base_ts + ts_delta,
                      key, value, headers))
    if uncompressed and pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left in the batch after its {count} records")
    return out


def encode_record_body(offset_delta: int, timestamp_delta: int, key, value, headers=()) -> bytes:
    """Encode one record (``DefaultRecord.writeTo``) including its length prefix."""
    parts = [b"\x00", _varint(timestamp_delta), _varint(offset_delta)]
    if key is None:
        parts.append(_MINUS_ONE)
    else:
        parts.append(_varint(len(key)))
        parts.append(key)
    if value is None:
        parts.append(_MINUS_ONE)
    else:
        parts.append(_varint(len(value)))
        parts.append(value)
    parts.append(_varint(len(headers)))
    for hkey, hval in headers:
        hk = hkey.encode("utf-8") if isinstance(hkey, str) else bytes(hkey)
        parts.append(_varint(len(hk)))
        parts.append(hk)
        if hval is None:
            parts.append(_MINUS_ONE)
        else:
            parts.append(_varint(len(hval)))
            parts.append(hval)
    body = b"".join(parts)
    return _varint(len(body)) + body


def encode_batch(
    records: Sequence[tuple],
    *,
    base_offset: int = 0,
    compression: int = _codec.NONE,
    timestamp_type: int = CREATE_TIME,
    log_append_time: int | None = None,
    offset_deltas: Sequence[int] | None = None,
    last_offset_delta: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    is_transactional: bool = False,
    is_control: bool = False,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """Encode a v2 batch (``MemoryRecordsBuilder`` + ``DefaultRecordBatch.writeHeader``).

    ``records``: sequence of ``(timestamp_ms, key, value, headers)`` where key/value are
    bytes or None and headers a sequence of ``(str, bytes | None)``. Offsets are
    ``base_offset + offset_deltas[i]`` (default ``i``). Under ``LOG_APPEND_TIME`` every
    record's stored delta is 0 and ``log_append_time`` (ms) becomes max timestamp.
    ``last_offset_delta`` defaults to the last delta (a compacted batch may keep a larger
    one). Returns the batch bytes, CRC included. Raises ValueError on an empty batch with no
    ``last_offset_delta`` given.
    """
    n = len(records)
    if offset_deltas is None:
        offset_deltas = range(n)
    if last_offset_delta is None:
        if n == 0:
            raise ValueError("an empty batch needs last_offset_delta")
        last_offset_delta = offset_deltas[-1]
    if timestamp_type == LOG_APPEND_TIME:
        if log_append_time is None:
            raise ValueError("LogAppendTime batches need log_append_time")
        base_ts = log_append_time
        max_ts = log_append_time
        bodies = [encode_record_body(d, 0, r[1], r[2], r[3] if len(r) > 3 else ())
                  for d, r in zip(offset_deltas, records)]
    else:
        if n:
            base_ts = records[0][0]
            max_ts = max(r[0] for r in records)
        else:
            base_ts = max_ts = NO_TIMESTAMP
        bodies = [encode_record_body(d, r[0] - base_ts, r[1], r[2], r[3] if len(r) > 3 else ())
                  for d, r in zip(offset_deltas, records)]
    if delete_horizon_ms is not None:
        base_ts = delete_horizon_ms
    payload = b"".join(bodies)
    if compression != _codec.NONE:
        payload = _codec.compress(compression, payload)
    attributes = compression & COMPRESSION_MASK
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    if is_control:
        attributes |= CONTROL_MASK
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_MASK
    length = BATCH_OVERHEAD - LOG_OVERHEAD + len(payload)
    header = bytearray(HEADER.pack(base_offset, length, partition_leader_epoch, CURRENT_MAGIC, 0,
                                   attributes, last_offset_delta, base_ts, max_ts, producer_id,
                                   producer_epoch, base_sequence, n))
    crc = crc32c(payload, crc32c(memoryview(header)[ATTRIBUTES_OFFSET:]))
    _U32.pack_into(header, CRC_OFFSET, crc)
    return bytes(header) + payload


def set_base_offset(batch: bytearray | memoryview, base_offset: int) -> None:
    """Stamp ``base_offset`` into an encoded batch in place (not covered by the CRC)."""
    _I64.pack_into(batch, 0, base_offset)


def peek_offset_and_size(buf, pos: int = 0) -> tuple[int, int, int]:
    """Read ``(base_offset, size, magic)`` of the entry at ``buf[pos:]`` without validating.

    Works for every message format (the magic sits at byte 16). Raises CorruptRecordError
    when fewer than 17 bytes remain.
    """
    if len(buf) - pos < HEADER_PEEK:
        raise CorruptRecordError("fewer than 17 bytes left for a batch header", position=pos)
    offset, length = _OFFSET_LENGTH.unpack_from(buf, pos)
    return offset, length + LOG_OVERHEAD, buf[pos + MAGIC_OFFSET]


def iter_batches(buf, start: int = 0, end: int | None = None, *, base_position: int = 0,
                 validate: bool = False, path: str | None = None) -> Iterator[RecordBatch]:
    """Yield the batches in ``buf[start:end]`` in order.

    Stops quietly at a partial batch at the end (fewer than 17 bytes left, or a batch running
    past ``end``) — a torn tail is the caller's business. ``base_position`` is added to
    positions reported in batches and errors (the buffer's place in its file). With
    ``validate`` each batch's CRC is checked. Raises CorruptRecordError (with ``path`` and
    position) on a bad size, magic or CRC.
    """
    if end is None:
        end = len(buf)
    pos = start
    while end - pos >= HEADER_PEEK:
        _off, length = _OFFSET_LENGTH.unpack_from(buf, pos)
        size = length + LOG_OVERHEAD
        if length < BATCH_OVERHEAD - LOG_OVERHEAD:
            raise CorruptRecordError(f"record size {length} is smaller than the minimum record "
                                     f"overhead ({BATCH_OVERHEAD - LOG_OVERHEAD})",
                                     path=path, position=base_position + pos)
        if pos + size > end:
            return
        try:
            batch = RecordBatch.from_buffer(buf, pos, base_position + pos)
            if validate:
                batch.ensure_valid()
        except CorruptRecordError as exc:
            raise exc.located(path=path) from None
        yield batch
        pos += size


def decode_all(buf) -> list[Record]:
    """Every record of every batch in ``buf`` (test and tooling convenience)."""
    out = []
    for batch in iter_batches(buf):
        out.extend(batch.records())
    return out
