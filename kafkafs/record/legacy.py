"""Legacy message sets (magic 0 and 1): read, and one uncompressed entry written.

Follows Apache Kafka's ``LegacyRecord`` and ``AbstractLegacyRecordBatch``
(docs/design.md §2.2). Every entry of a legacy log is ``offset i64 + size i32 +
message`` where a message is ``crc u32 · magic i8 · attributes i8 · [timestamp i64, v1 only]
· keyLen i32 + key · valueLen i32 + value`` (a length of -1 is null). The CRC is CRC-32 (IEEE)
over ``magic..end``.

An uncompressed entry is one record at the entry's offset. A compressed entry (a "wrapper")
has a null key and holds, as its compressed value, inner entries in the same framing: v0
inner offsets are absolute; v1 inner offsets are relative and ``absolute = wrapperOffset -
lastInnerRelative + inner`` (a wrapper offset of 0 — data some producers wrote — means the
inner offsets are taken as they are; any other wrapper offset below the last inner one is
corrupt, as in Kafka). Under LogAppendTime the wrapper's timestamp is every
inner record's timestamp.

:class:`LegacyBatch` has the read interface of :class:`~kafkafs.record.batch.RecordBatch`
(duck typed), so everything that reads batches reads legacy entries too. The one writer,
:func:`encode_entry`, builds an uncompressed entry: the log cleaner writes back the records
it keeps of a compressed wrapper that way (kafkafs writes no other legacy data).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

from . import compression as _codec
from .errors import CorruptRecordError
from .types import Record

LOG_OVERHEAD = 12  # offset i64 + size i32
CRC_OFFSET = 12  # of the entry (first byte of the message)
MAGIC_OFFSET = 16
ATTRIBUTES_OFFSET = 17
TIMESTAMP_OFFSET = 18  # v1 only
RECORD_OVERHEAD_V0 = 14  # crc 4 + magic 1 + attributes 1 + keyLen 4 + valueLen 4
RECORD_OVERHEAD_V1 = 22  # ... + timestamp 8
HEADER_PEEK = 17

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08

NO_TIMESTAMP_TYPE = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1
NO_TIMESTAMP = -1

_ENTRY_HEADER = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_OFFSET_SIZE = struct.Struct(">qi")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

_new_tuple = tuple.__new__


def encode_entry(offset: int, magic: int, attributes: int, timestamp: int, key, value
                 ) -> bytes:
    """One uncompressed legacy message-set entry, ``offset i64 + size i32 + message``
    (Kafka ``LegacyRecord.write`` with its entry header).

    ``magic``: 0 or 1. ``attributes``: only the timestamp-type bit (0x08, LogAppendTime) is
    kept, and only for magic 1; the codec bits are cleared (the entry is uncompressed).
    ``timestamp``: ms since epoch, written for magic 1 only. ``key``, ``value``: bytes-like
    or None (written as length -1). The CRC is CRC-32 (IEEE) over ``magic..end``. Raises
    struct.error when ``offset`` or ``timestamp`` is out of the int64 range.
    """
    body = bytes((magic, attributes & TIMESTAMP_TYPE_MASK if magic == 1 else 0))
    if magic == 1:
        body += struct.pack(">q", timestamp)
    body += struct.pack(">i", -1) if key is None else struct.pack(">i", len(key)) + bytes(key)
    body += struct.pack(">i", -1) if value is None else \
        struct.pack(">i", len(value)) + bytes(value)
    message = struct.pack(">I", zlib.crc32(body)) + body
    return _OFFSET_SIZE.pack(offset, len(message)) + message


def _overhead(magic: int) -> int:
    return RECORD_OVERHEAD_V0 if magic == 0 else RECORD_OVERHEAD_V1


def _parse_message(buf, start: int, end: int):
    """Decode the message in ``buf[start:end]`` (from its CRC to its end).

    Returns ``(magic, attributes, timestamp, key, value)`` (key/value ``bytes`` or None,
    timestamp -1 for magic 0). Raises CorruptRecordError (no position) when the message is
    shorter than its overhead or a key/value runs past its end.
    """
    size = end - start
    if size < RECORD_OVERHEAD_V0:
        raise CorruptRecordError(f"message size {size} is smaller than the minimum record "
                                 f"overhead ({RECORD_OVERHEAD_V0})")
    magic = buf[start + 4]
    if magic > 127:
        magic -= 256
    if magic not in (0, 1):
        raise CorruptRecordError(f"message has unknown magic {magic}")
    if size < _overhead(magic):
        raise _below_overhead(size, magic)
    attributes = buf[start + 5]
    pos = start + 6
    if magic == 1:
        (timestamp,) = _I64.unpack_from(buf, pos)
        pos += 8
    else:
        timestamp = NO_TIMESTAMP
    key_at, key_len, value_at, value_len = _layout(buf, pos, end, magic)
    key = None if key_len < 0 else bytes(buf[key_at:key_at + key_len])
    value = None if value_len < 0 else bytes(buf[value_at:value_at + value_len])
    return magic, attributes, timestamp, key, value


def _layout(buf, pos: int, end: int, magic: int) -> tuple[int, int, int, int]:
    """``(key start, key length, value start, value length)`` of a message whose key length
    sits at ``buf[pos]`` and which ends at ``end`` (lengths -1 for null). Raises
    CorruptRecordError when a length is invalid or the key and value do not fill the
    message exactly."""
    found = []
    for what in ("key", "value"):
        if pos + 4 > end:
            raise CorruptRecordError(f"legacy message (magic {magic}): {what} length runs past "
                                     f"the end of the message")
        (n,) = _I32.unpack_from(buf, pos)
        pos += 4
        if n < -1 or pos + max(n, 0) > end:
            raise CorruptRecordError(f"legacy message (magic {magic}): {what} length {n} is "
                                     f"out of bounds")
        found += (pos, n)
        pos += max(n, 0)
    if pos != end:
        raise CorruptRecordError(f"legacy message (magic {magic}): {end - pos} bytes left "
                                 f"after its key and value")
    return found[0], found[1], found[2], found[3]


def _below_overhead(size: int, magic: int) -> CorruptRecordError:
    return CorruptRecordError(f"message size {size} is smaller than the minimum v{magic} "
                              f"record overhead ({_overhead(magic)})")


def _bad_codec(magic: int, codec: int) -> str:
    return f"legacy message (magic {magic}) has invalid compression codec {codec}"


def _check_message(entry, magic: int) -> None:
    """Raise CorruptRecordError (no position) unless the message of ``entry`` (an entry's
    bytes, offset and size included) is whole: at least its version's header, a codec
    legacy messages may have (none, gzip, snappy, lz4), a key and a value that fill it
    exactly. The CRC is not looked at."""
    length = len(entry) - LOG_OVERHEAD
    if length < _overhead(magic):
        raise _below_overhead(length, magic)
    codec = entry[ATTRIBUTES_OFFSET] & COMPRESSION_MASK
    if codec > _codec.LZ4:
        raise CorruptRecordError(_bad_codec(magic, codec))
    _layout(entry, LOG_OVERHEAD + _overhead(magic) - 8, len(entry), magic)


class LegacyBatch:
    """One legacy (magic 0/1) message-set entry over a buffer holding exactly its bytes.

    Construct with :meth:`from_buffer`. Offers what the rest of kafkafs reads on a
    :class:`~kafkafs.record.batch.RecordBatch`: ``position``, ``base_offset``,
    ``last_offset``, ``next_offset``, ``size``, ``magic``, ``crc``, ``attributes``,
    ``compression``, ``timestamp_type``, ``records_count``, ``max_timestamp``,
    ``base_timestamp``, the v2-only fields at their "none" values, :meth:`ensure_valid`,
    :meth:`records`, :meth:`record_tuples` and :meth:`values`. No ``payload()``: the records
    of a legacy entry are not in v2 layout (``batch_values`` calls :meth:`values`).

    ``max_timestamp`` and ``base_timestamp`` are the outer message's timestamp (Kafka's
    ``AbstractLegacyRecordBatch.maxTimestamp``), -1 for magic 0. ``base_offset`` and
    ``records_count`` of a compressed wrapper need its inner entries: they are decoded (once)
    on first use and may raise CorruptRecordError.
    """

    __slots__ = (
        "_tuples",
        "attributes",
        "batch_length",
        "buffer",
        "crc",
        "magic",
        "offset",
        "path",
        "position",
        "timestamp",
    )

    is_control = False
    is_transactional = False
    has_delete_horizon = False
    delete_horizon_ms = NO_TIMESTAMP
    producer_id = -1
    producer_epoch = -1
    base_sequence = -1
    last_sequence = -1
    partition_leader_epoch = -1

    @classmethod
    def from_buffer(cls, buf, pos: int = 0, position: int | None = None) -> LegacyBatch:
        """Frame the entry at ``buf[pos:]``; ``buf`` must hold all of it (``size + 12``
        bytes). ``position`` (default ``pos``) is recorded for errors. Raises
        CorruptRecordError when the entry is short (below ``RECORD_OVERHEAD_V0``), out of
        bounds or not magic 0/1 -- what Kafka's ``FileLogInputStream.nextBatch`` checks
        before it hands out a ``LegacyFileChannelRecordBatch``. The message itself (a v1
        header, its codec, its key and value filling it) is checked by :meth:`ensure_valid`
        and when its records are read: a damaged entry whose size is sane is framed, so
        readers and the log end scan step over it to the entries after it, as Kafka's do."""
        self = cls.__new__(cls)
        self.position = pos if position is None else position
        self.path = None
        if len(buf) - pos < LOG_OVERHEAD + RECORD_OVERHEAD_V0:
            raise CorruptRecordError("legacy message shorter than its header",
                                     position=self.position)
        (self.offset, self.batch_length, self.crc, self.magic,
         self.attributes) = _ENTRY_HEADER.unpack_from(buf, pos)
        self.attributes &= 0xFF
        if self.magic not in (0, 1):
            raise CorruptRecordError(f"legacy message has magic {self.magic}, expected 0 or 1",
                                     position=self.position)
        end = pos + LOG_OVERHEAD + self.batch_length
        if self.batch_length < RECORD_OVERHEAD_V0 or end > len(buf):
            raise CorruptRecordError(
                f"legacy message size {self.batch_length} is out of bounds (minimum "
                f"{RECORD_OVERHEAD_V0})", position=self.position)
        self.buffer = memoryview(buf)[pos:end]
        # (a v1 message shorter than its header has no timestamp to read: it is damaged)
        self.timestamp = (_I64.unpack_from(self.buffer, TIMESTAMP_OFFSET)[0]
                          if self.magic == 1 and self.batch_length >= RECORD_OVERHEAD_V1
                          else NO_TIMESTAMP)
        self._tuples = None
        return self

    # -- header values ------------------------------------------------------------------
    @property
    def size(self) -> int:
        """Bytes the entry occupies in the log (``size + 12``)."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        if self.magic == 0:
            return NO_TIMESTAMP_TYPE
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def max_timestamp(self) -> int:
        return self.timestamp

    @property
    def base_timestamp(self) -> int:
        return self.timestamp

    @property
    def last_offset(self) -> int:
        """The entry's offset (a wrapper carries the offset of its last inner message)."""
        return self.offset

    @property
    def next_offset(self) -> int:
        return self.offset + 1

    @property
    def base_offset(self) -> int:
        if self.compression == _codec.NONE:
            return self.offset
        return self.record_tuples()[0][0]

    @property
    def last_offset_delta(self) -> int:
        return self.last_offset - self.base_offset

    @property
    def records_count(self) -> int:
        if self.compression == _codec.NONE:
            return 1
        return len(self.record_tuples())

    # -- validation -----------------------------------------------------------------------
    def compute_crc(self) -> int:
        """CRC-32 (IEEE) of the message from its magic byte to its end."""
        return zlib.crc32(self.buffer[MAGIC_OFFSET:])

    def is_valid(self) -> bool:
        """Whether :meth:`ensure_valid` passes."""
        try:
            self.ensure_valid()
        except CorruptRecordError:
            return False
        return True

    def ensure_valid(self) -> None:
        """Raise CorruptRecordError unless the stored CRC matches (``LegacyRecord.ensureValid``)
        and the message is whole: its header fits, its codec is one of magic 0/1's and its
        key and value fill it exactly (kafkafs's recovery truncates at an entry whose CRC
        was forged over a broken message)."""
        computed = self.compute_crc()
        if computed != self.crc:
            raise CorruptRecordError(
                f"legacy message is corrupt (stored crc = {self.crc}, computed crc = "
                f"{computed})", path=self.path, position=self.position)
        try:
            _check_message(self.buffer, self.magic)
        except CorruptRecordError as exc:
            raise exc.located(path=self.path, position=self.position) from None

    # -- records --------------------------------------------------------------------------
    def record_tuples(self, cls=None) -> list[tuple]:
        """Every record in offset order as ``(offset, timestamp, key, value, ())`` tuples
        (``cls``: that tuple subclass instead, as RecordBatch.record_tuples).

        Decompresses a wrapper and resolves its inner offsets and timestamps like Kafka's
        ``DeepRecordsIterator``. The CRC is not checked here (:meth:`ensure_valid`).
        Raises CorruptRecordError naming the entry's position."""
        if self._tuples is None:
            try:
                self._tuples = self._decode()
            except CorruptRecordError as exc:
                raise exc.located(path=self.path, position=self.position) from None
        if cls is not None:
            return [_new_tuple(cls, t) for t in self._tuples]
        return self._tuples

    def check_records(self) -> None:
        """Raise CorruptRecordError unless the entry's messages decode (a wrapper's inner
        messages; see :meth:`record_tuples`)."""
        self.record_tuples()

    def records(self) -> list:
        """Like :meth:`record_tuples`, as :class:`~kafkafs.record.types.Record` tuples."""
        return self.record_tuples(Record)

    def values(self) -> list:
        """The value of every record in offset order (``bytes`` or None)."""
        return [t[3] for t in self.record_tuples()]

    def __iter__(self) -> Iterator:
        return iter(self.records())

    def _decode(self) -> list[tuple]:
        buf = self.buffer
        magic, attributes, timestamp, key, value = _parse_message(buf, CRC_OFFSET, len(buf))
        codec = attributes & COMPRESSION_MASK
        if codec > _codec.LZ4:
            raise CorruptRecordError(_bad_codec(magic, codec))
        if codec == _codec.NONE:
            return [(self.offset, timestamp, key, value, ())]
        if value is None:
            raise CorruptRecordError("compressed legacy message has a null value")
        inner = _codec.decompress(codec, value)
        log_append = magic == 1 and attributes & TIMESTAMP_TYPE_MASK
        entries = []
        pos = 0
        n = len(inner)
        while pos < n:
            if n - pos < LOG_OVERHEAD:
                raise CorruptRecordError("truncated inner message header in compressed "
                                         "legacy message")
            offset, size = _OFFSET_SIZE.unpack_from(inner, pos)
            start = pos + LOG_OVERHEAD
            end = start + size
            if size < RECORD_OVERHEAD_V0 or end > n:
                raise CorruptRecordError(f"inner message size {size} is out of bounds in "
                                         f"compressed legacy message")
            i_magic, i_attr, i_ts, i_key, i_value = _parse_message(inner, start, end)
            if i_attr & COMPRESSION_MASK:
                raise CorruptRecordError("compressed legacy message holds a compressed "
                                         "inner message")
            if log_append and i_magic > 0:  # a v0 message has no timestamp (LegacyRecord)
                i_ts = timestamp
            entries.append((offset, i_ts, i_key, i_value, ()))
            pos = end
        if not entries:
            raise CorruptRecordError("compressed legacy message holds no inner messages")
        # Kafka's AbstractLegacyRecordBatch.DeepRecordsIterator: v0 inner offsets are
        # absolute; a v1 wrapper at offset 0 (librdkafka produce data) keeps them as they are
        if magic == 0 or self.offset == 0:
            return entries
        last_inner = entries[-1][0]
        if self.offset < last_inner:
            raise CorruptRecordError(f"wrapper offset {self.offset} is below its last inner "
                                     f"relative offset {last_inner} and is not zero")
        base = self.offset - last_inner
        return [(base + e[0],) + e[1:] for e in entries]

    def __repr__(self):
        return (f"LegacyBatch(magic={self.magic}, offset={self.offset}, "
                f"codec={self.compression}, position={self.position}, size={self.size})")
