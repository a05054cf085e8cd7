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
from collections import namedtuple as _namedtuple
from collections.abc import Iterator, Sequence
from itertools import repeat as _repeat

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

# Lookup tables for the hot loops (a list index is far cheaper than a function call).
# _VARINT_LIMIT: values 0 <= n < limit have a precomputed zigzag varint (1 or 2 bytes).
_VARINT_LIMIT = 1 << 13
_SMALL_VARINTS = [encode_varint(n) for n in range(_VARINT_LIMIT)]
_MINUS_ONE = encode_varint(-1)
_NO_HEADERS = b"\x00"  # header count 0
_ATTRIBUTES_ZERO = b"\x00"  # record attributes (unused, always 0)
# _UNZIGZAG[z] is the signed value of the unsigned zigzag form z, for every z a one- or
# two-byte varint can hold (z < 2**14): one byte b -> _UNZIGZAG[b]; two bytes b, c (b has
# the continuation bit) -> _UNZIGZAG[b - 128 + (c << 7)].
_UNZIGZAG = [(z >> 1) ^ -(z & 1) for z in range(1 << 14)]
# _UNZIGZAG2[b][c]: the same for two bytes without arithmetic on the way (indexes are
# small ints; "b - 128 + (c << 7)" would allocate). Rows below 128 are never used.
_UNZIGZAG2 = [None] * 0x80 + [_UNZIGZAG[b - 0x80:1 << 14:0x80] for b in range(0x80, 0x100)]


def _varint(n: int) -> bytes:
    if 0 <= n < _VARINT_LIMIT:
        return _SMALL_VARINTS[n]
    return encode_varint(n)


Header = tuple  # (key: str, value: bytes | None)

_new_tuple = tuple.__new__


class Record(_namedtuple("Record", ("offset", "timestamp", "key", "value", "headers"))):
    """One decoded record, an immutable 5-tuple ``(offset, timestamp, key, value, headers)``.

    Attributes: ``offset`` (absolute), ``timestamp`` (ms since epoch; under LogAppendTime the
    batch's max timestamp), ``key`` and ``value`` (``bytes`` or None), ``headers`` (tuple of
    ``(str, bytes | None)``). Kafka's ``DefaultRecord`` without its size and attributes.
    A named tuple: equality compares all five, records are hashable and picklable, and the
    decoder creates them with ``tuple.__new__`` (no Python-level constructor per record).
    """

    __slots__ = ()

    def __new__(cls, offset: int, timestamp: int, key, value, headers=()):
        return _new_tuple(cls, (offset, timestamp, key, value, tuple(headers)))

    def __repr__(self):
        return (f"Record(offset={self[0]}, timestamp={self[1]}, key={self[2]!r}, "
                f"value={self[3]!r}, headers={self[4]!r})")


class RecordBatch:
    """A v2 batch over a buffer holding exactly its bytes.

    Construct with :meth:`from_buffer`. Header fields are attributes named as in Kafka
    (``base_offset``, ``batch_length``, ``partition_leader_epoch``, ``magic``, ``crc``,
    ``attributes``, ``last_offset_delta``, ``base_timestamp``, ``max_timestamp``,
    ``producer_id``, ``producer_epoch``, ``base_sequence``, ``records_count``); ``position``
    is where the batch starts in the file or buffer it was read from.
    """

    __slots__ = (
        "attributes",
        "base_offset",
        "base_sequence",
        "base_timestamp",
        "batch_length",
        "buffer",
        "crc",
        "last_offset_delta",
        "magic",
        "max_timestamp",
        "partition_leader_epoch",
        "position",
        "producer_epoch",
        "producer_id",
        "records_count",
    )

    @classmethod
    def from_buffer(cls, buf, pos: int = 0, position: int | None = None) -> RecordBatch:
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
        """Every record of the batch in offset order, as :class:`Record` tuples.

        Decompresses first when the codec bits are set. Offsets are ``base_offset +
        offsetDelta``; timestamps ``base_timestamp + timestampDelta`` (CreateTime) or
        ``max_timestamp`` for every record (LogAppendTime). Checks what Kafka's
        ``DefaultRecord.readFrom`` checks (each record's length against what it holds, no
        bytes left after ``records_count`` records of an uncompressed batch), not the CRC
        (:meth:`ensure_valid`). Raises CorruptRecordError naming the batch's position.
        """
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
    """``(records bytes, uncompressed?)`` of ``batch``: decompressed, or a copy of the raw
    bytes (slicing ``bytes`` gives ``bytes`` directly, cheaper than memoryview + copy)."""
    codec = batch.attributes & COMPRESSION_MASK
    if codec == _codec.NONE:
        return bytes(batch.buffer[BATCH_OVERHEAD:]), True
    return _codec.decompress(codec, batch.buffer[BATCH_OVERHEAD:]), False


def _decode_headers(buf: bytes, pos: int, end: int):
    """Decode a header count and the headers that follow (``DefaultRecord.readHeaders``).

    ``end`` bounds the record (sanity check of the count). Returns ``(headers tuple,
    next_pos)``. Raises CorruptRecordError on a negative or impossible count, a null or
    non-UTF-8 header key, or a buffer that ends inside a varint.
    """
    n_headers, pos = decode_varint(buf, pos)
    if n_headers == 0:
        return (), pos
    if n_headers < 0:
        raise CorruptRecordError(f"negative header count {n_headers}")
    if n_headers > end - pos:  # every header takes at least 2 bytes; don't loop on garbage
        raise CorruptRecordError(f"header count {n_headers} exceeds the record")
    headers = []
    for _h in range(n_headers):
        hk_len, pos = decode_varint(buf, pos)
        if hk_len < 0:
            raise CorruptRecordError("null header key")
        hkey = buf[pos:pos + hk_len]
        pos += hk_len
        hv_len, pos = decode_varint(buf, pos)
        if hv_len >= 0:
            hval = buf[pos:pos + hv_len]
            pos += hv_len
        else:
            hval = None
        try:
            headers.append((hkey.decode("utf-8"), hval))
        except UnicodeDecodeError:
            raise CorruptRecordError("header key is not UTF-8") from None
    return tuple(headers), pos


def _decode_records(batch: RecordBatch, values_only: bool = False) -> list:
    """Decode the records of ``batch`` (``DefaultRecord.readFrom`` for each).

    One flat loop: every varint takes an inline path for one and two bytes (a table
    lookup), longer ones call :func:`decode_varint`. With ``values_only`` the result is the
    list of values instead of :class:`Record` objects (keys are skipped, not copied);
    validation is the same either way.
    """
    count = batch.records_count
    if count < 0:
        raise CorruptRecordError(f"negative record count {count}")
    buf, uncompressed = _payload(batch)
    base_offset = batch.base_offset
    base_ts = batch.base_timestamp
    out = []
    append = out.append
    pos = 0
    end = len(buf)
    unzz = _UNZIGZAG
    unzz2 = _UNZIGZAG2
    dv = decode_varint
    new = _new_tuple
    rec = Record
    # Positions past 256 are int objects of their own: every "pos + k" allocates, so the
    # loop computes each sum once (rec_end, key_end, value_end) and reuses it.
    try:
        for _ in _repeat(None, count):  # (no int object per iteration, unlike range)
            # length
            b = buf[pos]
            if b < 0x80:
                length = unzz[b]
                pos += 1
            else:
                c = buf[pos + 1]
                if c < 0x80:
                    length = unzz2[b][c]
                    pos += 2
                else:
                    length, pos = dv(buf, pos)
            rec_end = pos + length
            if length < 0 or rec_end > end:
                raise CorruptRecordError(f"record length {length} is out of bounds")
            # attributes (one byte, unused), then timestampDelta
            b = buf[pos + 1]
            if b < 0x80:
                ts_delta = unzz[b]
                pos += 2
            else:
                c = buf[pos + 2]
                if c < 0x80:
                    ts_delta = unzz2[b][c]
                    pos += 3
                else:
                    ts_delta, pos = dv(buf, pos + 1)
            # offsetDelta
            b = buf[pos]
            if b < 0x80:
                off_delta = unzz[b]
                pos += 1
            else:
                c = buf[pos + 1]
                if c < 0x80:
                    off_delta = unzz2[b][c]
                    pos += 2
                else:
                    off_delta, pos = dv(buf, pos)
            # key
            b = buf[pos]
            if b < 0x80:
                key_len = unzz[b]
                pos += 1
            else:
                c = buf[pos + 1]
                if c < 0x80:
                    key_len = unzz2[b][c]
                    pos += 2
                else:
                    key_len, pos = dv(buf, pos)
            if key_len >= 0:
                key_end = pos + key_len
                key = None if values_only else buf[pos:key_end]
                pos = key_end
            else:
                key = None
            # value
            b = buf[pos]
            if b < 0x80:
                value_len = unzz[b]
                pos += 1
            else:
                c = buf[pos + 1]
                if c < 0x80:
                    value_len = unzz2[b][c]
                    pos += 2
                else:
                    value_len, pos = dv(buf, pos)
            if value_len >= 0:
                value_end = pos + value_len
                value = buf[pos:value_end]
                pos = value_end
            else:
                value = None
            # headers (almost always none: a single 0 byte)
            if buf[pos] == 0:
                headers = ()
                pos += 1
            else:
                headers, pos = _decode_headers(buf, pos, rec_end)
            if pos != rec_end:
                raise CorruptRecordError(
                    f"invalid record size: expected to read {length} bytes in record payload, "
                    f"but instead read {pos - (rec_end - length)}")
            if values_only:
                append(value)
            else:
                append(new(rec, (base_offset + off_delta, base_ts + ts_delta, key, value,
                                 headers)))
    except IndexError:
        raise CorruptRecordError(f"batch ends inside record {len(out)} of {count}") from None
    if uncompressed and pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left in the batch after its {count} records")
    if not values_only and batch.attributes & TIMESTAMP_TYPE_MASK:
        # LogAppendTime: every record reads as the batch's max timestamp (rare: rebuild)
        ts = batch.max_timestamp
        out = [new(rec, (r[0], ts, r[2], r[3], r[4])) for r in out]
    return out


def batch_values(batch: RecordBatch) -> list:
    """The values of every record of ``batch`` in offset order: ``bytes``, or None for a
    null value.

    What the ``messages`` view needs, decoded faster than :meth:`RecordBatch.records` (no
    key copies, no Record objects). Decompresses like ``records()`` and validates the same
    way (record lengths, header structure, bytes left over). Raises CorruptRecordError
    naming the batch's position.
    """
    try:
        return _decode_records(batch, True)
    except CorruptRecordError as exc:
        raise exc.located(position=batch.position) from None


def _encode_headers(headers) -> bytes:
    """Header count varint + headers (``DefaultRecord.writeTo``); keys str (UTF-8) or bytes."""
    parts = [_varint(len(headers))]
    for hkey, hval in headers:
        hk = hkey.encode("utf-8") if isinstance(hkey, str) else bytes(hkey)
        parts.append(_varint(len(hk)))
        parts.append(hk)
        if hval is None:
            parts.append(_MINUS_ONE)
        else:
            parts.append(_varint(len(hval)))
            parts.append(hval)
    return b"".join(parts)


def encode_record_body(offset_delta: int, timestamp_delta: int, key, value, headers=()) -> bytes:
    """Encode one record (``DefaultRecord.writeTo``) including its length prefix.

    ``key``/``value``: bytes-like or None; ``headers``: sequence of ``(str, bytes | None)``.
    Returns the record's bytes as they sit in an uncompressed batch.
    """
    parts = [_ATTRIBUTES_ZERO, _varint(timestamp_delta), _varint(offset_delta)]
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
    parts.append(_encode_headers(headers) if headers else _NO_HEADERS)
    body = b"".join(parts)
    return _varint(len(body)) + body


def _encode_records(records, base_ts: int, offset_deltas) -> list:
    """The parts (bytes-like objects) of ``records`` encoded back to back, to be joined.

    ``records``: sequence of 4-tuples ``(timestamp, key, value, headers)``; raises
    ValueError when one has another length (the caller normalises and retries).
    Timestamp deltas are relative to ``base_ts``; ``offset_deltas``: sequence of ints or
    None for ``0, 1, 2, ...``.
    """
    parts = []
    extend = parts.extend
    small = _SMALL_VARINTS
    limit = _VARINT_LIMIT
    ev = encode_varint
    minus_one = _MINUS_ONE
    no_headers = _NO_HEADERS
    attributes = _ATTRIBUTES_ZERO
    empty = b""
    if offset_deltas is None:
        offset_deltas = range(len(records))
    for delta, (ts, key, value, headers) in zip(offset_deltas, records):
        dt = ts - base_ts
        tsv = small[dt] if 0 <= dt < limit else ev(dt)
        ofv = small[delta] if 0 <= delta < limit else ev(delta)
        if key is None:
            kv = minus_one
            key = empty
            kl = 0
        else:
            kl = len(key)
            kv = small[kl] if kl < limit else ev(kl)
        if value is None:
            vv = minus_one
            value = empty
            vl = 0
        else:
            vl = len(value)
            vv = small[vl] if vl < limit else ev(vl)
        if headers:
            hb = _encode_headers(headers)
            size = 1 + len(tsv) + len(ofv) + len(kv) + kl + len(vv) + vl + len(hb)
        else:
            hb = no_headers
            size = 2 + len(tsv) + len(ofv) + len(kv) + kl + len(vv) + vl
        extend((small[size] if size < limit else ev(size), attributes, tsv, ofv, kv, key, vv,
                value, hb))
    return parts


def _four_fields(r) -> tuple:
    """``(timestamp, key, value, headers)`` from a 3- or 4-field record; ValueError else
    (a decoded :class:`Record` has 5 fields and an offset first: not an input record)."""
    if len(r) == 4:
        return r
    if len(r) == 3:
        return (r[0], r[1], r[2], ())
    raise ValueError(f"a record to encode is (timestamp, key, value[, headers]), "
                     f"not {len(r)} fields: {r!r:.80}")


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
    max_timestamp: int | None = None,
) -> bytes:
    """Encode a v2 batch (``MemoryRecordsBuilder`` + ``DefaultRecordBatch.writeHeader``).

    ``records``: sequence of ``(timestamp_ms, key, value, headers)`` (``headers`` may be
    left out) where key/value are bytes-like or None and headers a sequence of
    ``(str, bytes | None)``. Offsets are ``base_offset + offset_deltas[i]`` (default ``i``).
    Timestamp deltas are relative to the first record's timestamp, or to
    ``delete_horizon_ms`` when given (it becomes baseTimestamp and sets attribute bit 6, as
    Kafka's cleaner writes it). Under ``LOG_APPEND_TIME`` every record's stored delta is 0
    and ``log_append_time`` (ms) becomes base and max timestamp. ``last_offset_delta``
    defaults to the last delta (a compacted batch may keep a larger one); ``max_timestamp``
    defaults to the largest record timestamp, or -1 for an empty batch (an emptied batch
    keeps its old one: ``DefaultRecordBatch.writeEmptyHeader``). ``compression`` is a codec
    id from :mod:`kafkafs.record.compression`; the records are compressed as one stream.

    Returns the batch bytes, CRC-32C included. Raises ValueError on an empty batch with no
    ``last_offset_delta`` given, a LogAppendTime batch without ``log_append_time``, or
    ``offset_deltas`` whose length differs from ``records``.
    """
    n = len(records)
    if offset_deltas is not None and len(offset_deltas) != n:
        raise ValueError(f"{len(offset_deltas)} offset deltas for {n} records")
    if last_offset_delta is None:
        if n == 0:
            raise ValueError("an empty batch needs last_offset_delta")
        last_offset_delta = offset_deltas[-1] if offset_deltas is not None else n - 1
    if timestamp_type == LOG_APPEND_TIME:
        if log_append_time is None:
            raise ValueError("LogAppendTime batches need log_append_time")
        max_ts = log_append_time
        base_ts = log_append_time if delete_horizon_ms is None else delete_horizon_ms
        # every stored delta is 0: readers return max timestamp for each record anyway
        records = [(base_ts,) + tuple(r[1:]) for r in records]
    else:
        if n:
            max_ts = max([r[0] for r in records])
            base_ts = records[0][0] if delete_horizon_ms is None else delete_horizon_ms
        else:
            max_ts = NO_TIMESTAMP
            base_ts = NO_TIMESTAMP if delete_horizon_ms is None else delete_horizon_ms
    if max_timestamp is not None:
        max_ts = max_timestamp
    try:
        parts = _encode_records(records, base_ts, offset_deltas)
    except ValueError:  # a record without headers (3-tuple): normalise and retry
        parts = _encode_records([_four_fields(r) for r in records], base_ts, offset_deltas)
    payload = b"".join(parts)
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
    return b"".join((header, payload))


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
