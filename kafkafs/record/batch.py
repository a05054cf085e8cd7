"""RecordBatch v2 (magic 2): encode, decode, validate.

Follows Apache Kafka's ``DefaultRecordBatch`` and ``DefaultRecord`` byte for byte
(docs/design.md §2.2). A batch is a 61-byte big-endian header followed by
``recordsCount`` records, compressed together when the codec bits of the attributes are set.
The CRC-32C covers bytes ``[21, end)`` so the base offset and partition leader epoch can be
stamped without recomputing it.

No I/O happens here: functions take and return bytes-like objects.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence

from crc32c import crc32c

from . import compression as _codec
from . import fast as _fast
from . import legacy as _legacy
from .errors import CorruptRecordError
from .types import Record
from .varint import varint_size

HEADER = struct.Struct(">qiibIhiqqqhii")
BATCH_OVERHEAD = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset i64 + length i32: what precedes "length" bytes
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23  # the v2 header's lastOffsetDelta (int32)
RECORDS_COUNT_OFFSET = 57  # the v2 header's record count (int32), after producer id/epoch/seq
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


class RecordBatch:
    """A v2 batch over a buffer holding exactly its bytes.

    Construct with :meth:`from_buffer`. Header fields are attributes named as in Kafka
    (``base_offset``, ``batch_length``, ``partition_leader_epoch``, ``magic``, ``crc``,
    ``attributes``, ``last_offset_delta``, ``base_timestamp``, ``max_timestamp``,
    ``producer_id``, ``producer_epoch``, ``base_sequence``, ``records_count``); ``position``
    is where the batch starts in the file or buffer it was read from, ``path`` that file
    (None for a buffer): every error the batch raises names both.
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
        "path",
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
        self.path = None
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
                path=self.path, position=self.position)

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
        return self.record_tuples(Record)

    def record_tuples(self, cls=None) -> list[tuple]:
        """Like :meth:`records`, as plain ``(offset, timestamp, key, value, headers)``
        tuples (cheaper when most records are not needed as objects); ``cls`` builds that
        tuple subclass instead (the C decoder allocates it directly)."""
        try:
            payload, exact = self.payload()
            fixed = self.max_timestamp if self.attributes & TIMESTAMP_TYPE_MASK else None
            return _fast.decode(payload, self.records_count, self.base_offset,
                                self.base_timestamp, fixed, exact=exact, cls=cls)
        except CorruptRecordError as exc:
            raise exc.located(path=self.path, position=self.position) from None

    def check_records(self) -> None:
        """Raise CorruptRecordError (naming file and position) unless the records section
        decodes exactly into ``records_count`` records, decompressing first; no record
        object is built (a walk of the varints in C where the extension is built)."""
        try:
            payload, exact = self.payload()
            _fast.rendered_size(payload, self.records_count, exact=exact)
        except CorruptRecordError as exc:
            raise exc.located(path=self.path, position=self.position) from None

    def payload(self) -> tuple[bytes | memoryview, bool]:
        """``(records section, exact)``: the bytes after the 61-byte header (a memoryview
        of the batch's buffer, no copy), decompressed when the codec bits are set;
        ``exact`` is always True: no bytes may follow the last record, compressed or not
        (Kafka's ``ensureNoneRemaining``: "Incorrect declared batch size, records still
        remaining"). Raises CorruptRecordError on damaged compressed data."""
        codec = self.attributes & COMPRESSION_MASK
        if codec == _codec.NONE:
            return self.buffer[BATCH_OVERHEAD:], True
        try:
            return _codec.decompress(codec, self.buffer[BATCH_OVERHEAD:]), True
        except CorruptRecordError as exc:
            raise exc.located(path=self.path, position=self.position) from None

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def __repr__(self):
        return (f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
                f"count={self.records_count}, position={self.position}, size={self.size})")


def batch_values(batch: RecordBatch) -> list:
    """The values of every record of ``batch`` in offset order: ``bytes``, or None for a
    null value.

    What the ``messages`` view needs, decoded faster than :meth:`RecordBatch.records` (no
    key copies, no Record objects). Decompresses like ``records()`` and validates the same
    way (record lengths, header structure, bytes left over). Raises CorruptRecordError
    naming the batch's position.
    """
    if batch.magic < 2:  # a legacy (magic 0/1) entry: no v2 payload
        return batch.values()
    try:
        payload, exact = batch.payload()
        return _fast.values(payload, batch.records_count, exact=exact)
    except CorruptRecordError as exc:
        raise exc.located(position=batch.position) from None


def encode_record_body(offset_delta: int, timestamp_delta: int, key, value, headers=()) -> bytes:
    """Encode one record (``DefaultRecord.writeTo``) including its length prefix.

    ``key``/``value``: bytes-like or None; ``headers``: sequence of ``(str, bytes | None)``.
    Returns the record's bytes as they sit in an uncompressed batch.
    """
    return _fast.encode([(timestamp_delta, key, value, headers)], 0, [offset_delta])


def single_record_batch_size(key_size: int, value_size: int) -> int:
    """Bytes (in the log, ``LOG_OVERHEAD`` included) of an uncompressed batch holding one
    record without headers whose key and value have these sizes (-1: null), timestamp
    and offset deltas 0: ``DefaultRecordBatch.RECORD_BATCH_OVERHEAD`` +
    ``DefaultRecord.sizeInBytes``. What ``max.message.bytes`` is checked against for one
    line written to ``append``."""
    body = 3 + varint_size(key_size) + max(key_size, 0) + varint_size(value_size) + \
        max(value_size, 0) + 1
    return BATCH_OVERHEAD + varint_size(body) + body


def max_single_value_size(max_batch_bytes: int, key_size: int = -1) -> int:
    """The largest value (bytes) that fits, with a key of ``key_size`` (-1: null), in an
    uncompressed one-record batch of at most ``max_batch_bytes``
    (:func:`single_record_batch_size`); -1 when not even an empty value does."""
    v = max_batch_bytes - BATCH_OVERHEAD - 5 - max(key_size, 0)
    while v >= 0 and single_record_batch_size(key_size, v) > max_batch_bytes:
        v -= 1
    return max(v, -1)


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
    for r in records[:1]:
        if len(r) not in (3, 4):
            raise ValueError(f"a record to encode is (timestamp, key, value[, headers]), "
                             f"not {len(r)} fields: {r!r:.80}")
    payload = _fast.encode(records, base_ts, offset_deltas)
    return finish_batch(payload, n, base_offset=base_offset, compression=compression,
                         timestamp_type=timestamp_type, last_offset_delta=last_offset_delta,
                         base_ts=base_ts, max_ts=max_ts, producer_id=producer_id,
                         producer_epoch=producer_epoch, base_sequence=base_sequence,
                         partition_leader_epoch=partition_leader_epoch,
                         is_transactional=is_transactional, is_control=is_control,
                         has_delete_horizon=delete_horizon_ms is not None)


def finish_batch(payload: bytes, n: int, *, base_offset: int, compression: int,
                  timestamp_type: int, last_offset_delta: int, base_ts: int, max_ts: int,
                  producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                  base_sequence: int = NO_SEQUENCE,
                  partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                  is_transactional: bool = False, is_control: bool = False,
                  has_delete_horizon: bool = False) -> bytes:
    """A v2 record batch (bytes) of ``n`` records: ``payload`` (their encoded bodies,
    ``encode_record_body``) compressed with ``compression`` (a codec id), behind the 61-byte
    header with its CRC-32C (``DefaultRecordBatch.writeHeader``); timestamps in ms.
    Raises ValueError for an unknown codec."""
    if compression != _codec.NONE:
        payload = _codec.compress(compression, payload)
    attributes = compression & COMPRESSION_MASK
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    if is_control:
        attributes |= CONTROL_MASK
    if has_delete_horizon:
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


def offsets_in_place(base: int, last: int, segment_base: int = -1, next_base: int = -1,
                     expected: int = -1) -> bool:
    """Whether a batch holding offsets ``[base, last]`` may stand where it is: the order rules
    of ``log/walk.py``'s ``offset_order_problem`` but the log end offset's, for the C loops
    and their Python twins (``rb_offsets_in_place`` in ``_speedups.h``). Its last offset not
    below its base; at or above ``segment_base`` and within an int of it; below
    ``next_base`` (the next segment's base offset); its base at or above ``expected`` (the
    offset after the batch before). A bound of -1 is none (offsets are never negative)."""
    return last >= base and \
        (segment_base < 0 or (base >= segment_base and last - segment_base <= 0x7FFFFFFF)) and \
        (next_base < 0 or last < next_base) and (expected < 0 or base >= expected)


def peek_offset_and_size(buf, pos: int = 0) -> tuple[int, int, int]:
    """Read ``(base_offset, size, magic)`` of the entry at ``buf[pos:]`` without validating.

    Works for every message format (the magic sits at byte 16). Raises CorruptRecordError
    when fewer than 17 bytes remain.
    """
    if len(buf) - pos < HEADER_PEEK:
        raise CorruptRecordError("fewer than 17 bytes left for a batch header", position=pos)
    offset, length = _OFFSET_LENGTH.unpack_from(buf, pos)
    return offset, length + LOG_OVERHEAD, buf[pos + MAGIC_OFFSET]


def min_entry_length(magic: int) -> int:
    """The smallest ``length`` field an entry of ``magic`` may have: a v2 batch's header
    after the length (49), else a v0 message's (14: Kafka's ``RECORD_OVERHEAD_V0``, the
    check ``FileLogInputStream`` makes before it looks at the magic). A smaller one is
    damage, never a torn write."""
    return BATCH_OVERHEAD - LOG_OVERHEAD if magic == CURRENT_MAGIC else _legacy.RECORD_OVERHEAD_V0


def iter_batches(buf, start: int = 0, end: int | None = None, *, base_position: int = 0,
                 validate: bool = False, path: str | None = None,
                 zero_tail: bool = False) -> Iterator[RecordBatch]:
    """Yield the batches in ``buf[start:end]`` in order: RecordBatch for magic 2,
    :class:`~kafkafs.record.legacy.LegacyBatch` for legacy (magic 0/1) entries.

    Stops quietly at a partial batch at the end (fewer than 17 bytes left, or a batch running
    past ``end``) — a torn tail is the caller's business. ``base_position`` is added to
    positions reported in batches and errors (the buffer's place in its file). With
    ``validate`` each batch's CRC is checked. Raises CorruptRecordError (with ``path`` and
    position) on a bad size, magic or CRC. With ``zero_tail`` an entry header of zeros (offset
    0, size 0: never written by anyone) also ends the scan quietly: the unwritten rest of a
    preallocated segment (a live broker's active segment under ``log.preallocate=true``).
    """
    if end is None:
        end = len(buf)
    pos = start
    while end - pos >= HEADER_PEEK:
        off, length = _OFFSET_LENGTH.unpack_from(buf, pos)
        if zero_tail and length == 0 and off == 0:
            return
        size = length + LOG_OVERHEAD
        magic = buf[pos + MAGIC_OFFSET]
        legacy = magic in (0, 1)  # magic 0/1: a legacy message-set entry
        minimum = min_entry_length(magic)
        if length < minimum:
            raise CorruptRecordError(f"record size {length} is smaller than the minimum record "
                                     f"overhead ({minimum})",
                                     path=path, position=base_position + pos)
        if pos + size > end:
            return
        try:
            if legacy:
                batch = _legacy.LegacyBatch.from_buffer(buf, pos, base_position + pos)
            else:
                batch = RecordBatch.from_buffer(buf, pos, base_position + pos)
            batch.path = path
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
