"""The record-level work of Kafka's log cleaner, in C when the extension is built.

What :mod:`kafkafs.log.cleaner` needs from the bytes of a log, batch-at-a-time (Kafka's
``Cleaner.buildOffsetMapForSegment`` and ``MemoryRecords.filterTo`` with the cleaner's
``RecordFilter``), without building a Python object per record:

* the offset map's storage (Kafka's ``SkimpyOffsetMap``): a flat buffer of
  :data:`MAP_ENTRY_SIZE`-byte slots, each the 16-byte hash of a key (:func:`key_hash`,
  MurmurHash3 x64 128) followed by the key's last offset (i64, big-endian); an all-zero slot
  is empty; a key's first slot is the hash's first 8 bytes (little-endian) modulo the slot
  count, collisions are resolved by linear probing. :func:`map_get`, :func:`map_put`,
  :func:`map_records` (one batch's records), :func:`map_batches` (a run of plain batches);
* the filter: :func:`filter_records` (one batch's records: which stay, re-encoded with a new
  base timestamp when needed) and :func:`filter_batches` (a run of plain batches, copied or
  rebuilt); :func:`retained_batch` and :func:`empty_batch` rebuild a batch's header;
* :func:`index_entries`: the ``.index``/``.timeindex`` entries of a run of batches written
  to a segment (the rule of ``LogSegment.append`` applied per batch);
* :func:`null_key_index`: the first record without a key (Kafka's ``LogValidator`` refuses
  it on a compacted topic).

A "plain" batch is what the C loops take on without Python: magic 2, uncompressed, neither
transactional nor control, whole in the buffer, with a valid CRC-32C and well-formed records.
The loops stop at any other batch (status :data:`STATUS_OTHER`) and the caller handles it
with the per-batch functions; they stop at a batch that does not fit the buffer with
:data:`STATUS_END`. Each function here is the C version from
:mod:`kafkafs.record._speedups` when that extension imports (``HAVE_C``), else the
pure-Python twin defined below: both give identical results and raise the same errors
(``tests/test_offset_map.py`` and ``tests/test_cleaner.py`` hold them to it); both sets stay
reachable as :data:`C` and :data:`PYTHON`. ``KAFKAFS_NO_SPEEDUPS=1`` forces Python.

Payloads are UNCOMPRESSED records sections (see :mod:`kafkafs.record.fast`), validated as a
whole before anything else happens (CorruptRecordError with Kafka's wording); offsets and
timestamps are ms / Kafka offsets, 64-bit. No I/O.
"""

from __future__ import annotations

import struct
import types
from array import array
from bisect import bisect_left

from crc32c import crc32c

from . import compression as _codec
from . import fast as _fast
from .batch import (
    ATTRIBUTES_OFFSET,
    BATCH_OVERHEAD,
    COMPRESSION_MASK,
    CONTROL_MASK,
    CRC_OFFSET,
    CURRENT_MAGIC,
    DELETE_HORIZON_MASK,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    offsets_in_place,
)
from .errors import CorruptRecordError
from .varint import decode_varint, encode_varint

__all__ = [
    "HASH_SIZE",
    "HAVE_C",
    "MAP_ENTRY_SIZE",
    "MODE_DROP",
    "MODE_FILTER",
    "MODE_KEEP",
    "PYTHON",
    "STATUS_END",
    "STATUS_FULL",
    "STATUS_OTHER",
    "C",
    "empty_batch",
    "filter_batches",
    "filter_records",
    "index_entries",
    "key_hash",
    "map_batches",
    "map_clear",
    "map_get",
    "map_put",
    "map_records",
    "null_key_index",
    "retained_batch",
]

HASH_SIZE = 16
MAP_ENTRY_SIZE = HASH_SIZE + 8

STATUS_END = 0    # every whole batch of the buffer was handled; the next one is not whole
STATUS_FULL = 1   # the map reached its maximum size
STATUS_OTHER = 2  # stopped at a batch that is not plain: the caller handles it

MODE_FILTER = 0   # keep a record by the offset map and the tombstone rule
MODE_KEEP = 1     # keep every record (a control batch)
MODE_DROP = 2     # drop every record (a batch whose records may all be discarded)

_NOT_PLAIN = COMPRESSION_MASK | TRANSACTIONAL_MASK | CONTROL_MASK
_M64 = 0xFFFFFFFFFFFFFFFF
_EMPTY_SLOT = bytes(MAP_ENTRY_SIZE)
_I64 = struct.Struct(">q")
_OFFSET_LEN = struct.Struct(">qi")
_HEAD = struct.Struct(">qiibIhiqqqhii")  # = batch.HEADER
_LEGACY_TS = struct.Struct(">q")


# -- MurmurHash3 x64 128 ------------------------------------------------------------------
_C1 = 0x87C37B91114253D5
_C2 = 0x4CF5AD432745937F


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _fmix(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _M64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _M64
    return k ^ (k >> 33)


def _py_key_hash(key, seed: int = 0) -> bytes:
    """MurmurHash3_x64_128 of ``key`` (bytes-like) with ``seed`` (32-bit): 16 bytes, h1 then
    h2, each little-endian (what ``mmh3.hash_bytes`` returns)."""
    data = bytes(key)
    n = len(data)
    h1 = h2 = seed & 0xFFFFFFFF
    nblocks = n // 16
    for i in range(nblocks):
        k1, k2 = struct.unpack_from("<QQ", data, i * 16)
        k1 = (_rotl((k1 * _C1) & _M64, 31) * _C2) & _M64
        h1 ^= k1
        h1 = (((_rotl(h1, 27) + h2) & _M64) * 5 + 0x52DCE729) & _M64
        k2 = (_rotl((k2 * _C2) & _M64, 33) * _C1) & _M64
        h2 ^= k2
        h2 = (((_rotl(h2, 31) + h1) & _M64) * 5 + 0x38495AB5) & _M64
    tail = data[nblocks * 16:]
    t = len(tail)
    if t > 8:
        k2 = int.from_bytes(tail[8:], "little")
        h2 ^= (_rotl((k2 * _C2) & _M64, 33) * _C1) & _M64
    if t > 0:
        k1 = int.from_bytes(tail[:8], "little")
        h1 ^= (_rotl((k1 * _C1) & _M64, 31) * _C2) & _M64
    h1 ^= n
    h2 ^= n
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    h1 = _fmix(h1)
    h2 = _fmix(h2)
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    return h1.to_bytes(8, "little") + h2.to_bytes(8, "little")


# -- the offset map's storage ---------------------------------------------------------------
def _check_map(map_buf, slots: int) -> memoryview:
    mv = memoryview(map_buf)
    if mv.readonly:
        raise TypeError("the offset map's buffer must be writable")
    if slots <= 0 or slots * MAP_ENTRY_SIZE > mv.nbytes:
        raise ValueError(f"{slots} slots do not fit a buffer of {mv.nbytes} bytes")
    return mv.cast("B") if mv.format != "B" else mv


def _find(mv: memoryview, slots: int, h: bytes) -> tuple[int, bool]:
    """``(byte position, found)``: the slot holding hash ``h``, else the first empty slot
    on its probe sequence (-1 when every slot is taken by other keys)."""
    slot = (int.from_bytes(h[:8], "little") * slots) >> 64  # as the C: multiply-shift
    for _attempt in range(slots):
        pos = slot * MAP_ENTRY_SIZE
        entry = mv[pos:pos + MAP_ENTRY_SIZE]
        if entry == _EMPTY_SLOT:
            return pos, False
        if entry[:HASH_SIZE] == h:
            return pos, True
        slot += 1
        if slot == slots:
            slot = 0
    return -1, False


def _py_map_get(map_buf, slots: int, key) -> int:
    """The offset stored for ``key`` in the map (``SkimpyOffsetMap.get``), -1 when absent."""
    mv = _check_map(map_buf, slots)
    pos, found = _find(mv, slots, _py_key_hash(key))
    return _I64.unpack_from(mv, pos + HASH_SIZE)[0] if found else -1


def _put_hash(mv: memoryview, slots: int, size: int, h: bytes, offset: int) -> int:
    if size >= slots:
        raise ValueError(f"Attempted to add a new entry to a full offset map, entries: {size}, "
                         f"slots: {slots}")
    pos, found = _find(mv, slots, h)
    if pos < 0:  # cannot happen with size < slots
        raise ValueError(f"offset map has no free slot ({size} entries, {slots} slots)")
    if not found:
        mv[pos:pos + HASH_SIZE] = h
        size += 1
    _I64.pack_into(mv, pos + HASH_SIZE, offset)
    return size


def _py_map_put(map_buf, slots: int, size: int, key, offset: int) -> int:
    """Store ``offset`` for ``key`` (``SkimpyOffsetMap.put``: a key already there gets the
    new offset). ``size``: entries in the map now. Returns the new size. Raises ValueError
    when ``size >= slots`` (Kafka: "Attempted to add a new entry to a full offset map")."""
    mv = _check_map(map_buf, slots)
    return _put_hash(mv, slots, size, _py_key_hash(key), offset)


def _py_map_clear(map_buf) -> None:
    """Zero the map's buffer (every slot empty)."""
    mv = memoryview(map_buf).cast("B")
    step = 1 << 20
    zeros = bytes(min(step, mv.nbytes))
    for pos in range(0, mv.nbytes, step):
        n = min(step, mv.nbytes - pos)
        mv[pos:pos + n] = zeros[:n]


# -- walking records ------------------------------------------------------------------------
def _wrap64(n: int) -> int:
    n &= _M64
    return n - (1 << 64) if n >> 63 else n


def _validate(payload, count: int) -> bytes:
    """The payload as bytes, after the validation every function here starts with
    (that of :func:`kafkafs.record.fast.values`)."""
    _fast.PYTHON.rendered_size(payload, count)
    return bytes(payload)


def _walk(buf: bytes, count: int):
    """Per record of a validated payload: ``(start, end, attributes position, position after
    the timestamp delta, timestamp delta, offset delta, key or None, value is null)``."""
    pos = 0
    for _i in range(count):
        length, pos = decode_varint(buf, pos)
        start = pos
        end = pos + length
        attr_pos = pos
        ts_delta, pos = decode_varint(buf, pos + 1)
        after_ts = pos
        off_delta, pos = decode_varint(buf, pos)
        kl, pos = decode_varint(buf, pos)
        key = None
        if kl >= 0:
            key = buf[pos:pos + kl]
            pos += kl
        vl, pos = decode_varint(buf, pos)
        yield start, end, attr_pos, after_ts, ts_delta, off_delta, key, vl < 0
        pos = end


def _py_map_records(payload, count: int, base_offset: int, map_buf, slots: int, size: int,
                    max_size: int, start_offset: int) -> tuple[int, int, bool]:
    """Put every keyed record at or past ``start_offset`` of one batch into the map, in
    order, until it holds ``max_size`` entries (``buildOffsetMapForSegment``: a put is only
    tried while ``size < max_size``). Returns ``(size, offset of the last record put or -1,
    full)``; ``full``: a record found the map at ``max_size`` (it and the records after it
    are not in the map). Raises CorruptRecordError (a malformed payload: nothing is put),
    ValueError (a map of no slot)."""
    buf = _validate(payload, count)
    mv = _check_map(map_buf, slots)
    last = -1
    for _s, _e, _a, _t, _ts, off_delta, key, _null in _walk(buf, count):
        offset = _wrap64(base_offset + off_delta)
        if key is None or offset < start_offset:
            continue
        if size >= max_size:
            return size, last, True
        size = _put_hash(mv, slots, size, _py_key_hash(key), offset)
        last = offset
    return size, last, False


def _plain_batch(buf: bytes, pos: int, end: int, order: tuple = (-1, -1, -1)):
    """The header of the batch at ``pos`` if the C loops would take it on (see the module),
    else ``(status, None)``: STATUS_END when it is not whole in ``buf[:end]``, STATUS_OTHER
    when it is not plain or its offsets are out of ``order`` (segment base, next segment's
    base, the offset after the batch before: :func:`~kafkafs.record.batch.offsets_in_place`)."""
    if end - pos < 17:
        return STATUS_END, None
    if buf[pos + 16] != CURRENT_MAGIC:
        return STATUS_OTHER, None
    length = int.from_bytes(buf[pos + 8:pos + 12], "big", signed=True)
    if length < BATCH_OVERHEAD - LOG_OVERHEAD:
        return STATUS_OTHER, None
    size = length + LOG_OVERHEAD
    if size > end - pos:
        return STATUS_END, None
    head = _HEAD.unpack_from(buf, pos)
    attributes, count = head[5], head[12]
    if attributes & _NOT_PLAIN or count < 0:
        return STATUS_OTHER, None
    if not offsets_in_place(head[0], _wrap64(head[0] + head[6]), *order):
        return STATUS_OTHER, None
    if crc32c(buf[pos + ATTRIBUTES_OFFSET:pos + size]) != head[4]:
        return STATUS_OTHER, None
    payload = buf[pos + BATCH_OVERHEAD:pos + size]
    try:
        _fast.PYTHON.rendered_size(payload, count)
    except CorruptRecordError:
        return STATUS_OTHER, None
    return size, head


def _py_map_batches(buf, pos: int, end: int, map_buf, slots: int, size: int, max_size: int,
                    start_offset: int, segment_base: int = -1, next_base: int = -1,
                    expected: int = -1) -> tuple[int, int, int, int, int]:
    """:func:`map_records` over the plain batches of ``buf[pos:end]``, one after the other;
    after each batch whose last offset is at or past ``start_offset`` the latest offset
    becomes that last offset (``map.updateLatestOffset``). The batches must keep the order
    of ``segment_base``, ``next_base`` and ``expected`` (the offset after the batch before;
    -1: no such bound, :func:`~kafkafs.record.batch.offsets_in_place`). Returns
    ``(position, size, latest offset or -1, status, expected)``: STATUS_FULL (position: the
    batch that filled it; the latest offset is the last record put), STATUS_OTHER
    (position: the batch that is not plain or out of order) or STATUS_END (position: the
    first batch that is not whole); ``expected`` the offset after the last batch taken."""
    data = bytes(memoryview(buf)[:end])
    latest = -1
    while True:
        size_or_status, head = _plain_batch(data, pos, end, (segment_base, next_base, expected))
        if head is None:
            return pos, size, latest, size_or_status, expected
        base, count = head[0], head[12]
        payload = data[pos + BATCH_OVERHEAD:pos + size_or_status]
        size, last, full = _py_map_records(payload, count, base, map_buf, slots, size,
                                           max_size, start_offset)
        if last >= 0:
            latest = last
        if full:
            return pos, size, latest, STATUS_FULL, expected
        last_offset = _wrap64(base + head[6])
        if last_offset >= start_offset:
            latest = last_offset
        expected = _wrap64(last_offset + 1)
        pos += size_or_status


# -- filtering ------------------------------------------------------------------------------
def _py_filter_records(payload, count: int, base_offset: int, base_timestamp: int,
                       fixed_timestamp, map_buf, slots: int, latest_offset: int,
                       retain_deletes: bool, mode: int, batch_horizon: int, new_horizon: int,
                       marker: bool) -> tuple:
    """Decide which records of one v2 batch stay (``MemoryRecords.filterBatch`` with the
    cleaner's ``shouldRetainRecord``) and re-encode them when the batch changes.

    ``mode`` MODE_FILTER: a record stays when its offset is past ``latest_offset`` (the
    map's latest offset), or when it has a key, its offset is at least the map's offset for
    that key (a key not in the map: -1) and it has a value or ``retain_deletes``; a record
    without a key is dropped and counted invalid. MODE_KEEP keeps every record, MODE_DROP
    none (``map_buf`` may be None in those modes). ``fixed_timestamp``: every record's
    timestamp (LogAppendTime: the batch's max timestamp) or None. The batch needs a delete
    horizon when it has none (``batch_horizon`` -1) and a kept record is a tombstone or
    ``marker`` (a COMMIT/ABORT marker whose transaction has no data left): it is then
    ``new_horizon``.

    Returns ``(kept, payload, base timestamp, delete horizon or -1, max timestamp, invalid,
    tombstones dropped)``. ``payload`` is ``b""`` when no record stays (a batch of no record
    included; the timestamps are then -1); None when every record stays and no horizon must
    be set (the batch is copied as it is; the other fields are then the batch's own:
    ``base_timestamp``, ``batch_horizon``, max timestamp -1).
    Otherwise the kept records are re-encoded with their offset deltas and everything but
    the timestamp delta unchanged, relative to the new base timestamp: the horizon when there
    is one, else the first kept record's timestamp (``MemoryRecordsBuilder``); the max
    timestamp is the largest kept timestamp, or ``fixed_timestamp``. Raises
    CorruptRecordError (malformed payload), ValueError (bad mode or map)."""
    if mode not in (MODE_FILTER, MODE_KEEP, MODE_DROP):
        raise ValueError(f"bad filter mode {mode}")
    buf = _validate(payload, count)
    mv = _check_map(map_buf, slots) if mode == MODE_FILTER else None
    kept = []
    invalid = dropped_tombstones = 0
    tombstones = False
    for rec in _walk(buf, count):
        _s, _e, _a, _t, ts_delta, off_delta, key, null = rec
        offset = _wrap64(base_offset + off_delta)
        if mode == MODE_KEEP:
            keep = True
        elif mode == MODE_DROP:
            keep = False
        elif offset > latest_offset:
            keep = True
        elif key is None:
            invalid += 1
            keep = False
        else:
            pos, found = _find(mv, slots, _py_key_hash(key))
            found_offset = _I64.unpack_from(mv, pos + HASH_SIZE)[0] if found else -1
            keep = offset >= found_offset and (not null or retain_deletes)
        if keep:
            kept.append(rec)
            tombstones = tombstones or null
        elif null and key is not None:
            dropped_tombstones += 1
    if not kept:
        return 0, b"", NO_TIMESTAMP, NO_TIMESTAMP, NO_TIMESTAMP, invalid, dropped_tombstones
    need_horizon = batch_horizon < 0 and (tombstones or marker)
    if len(kept) == count and not need_horizon:
        return count, None, base_timestamp, batch_horizon, NO_TIMESTAMP, invalid, \
            dropped_tombstones
    horizon = batch_horizon if batch_horizon >= 0 else (new_horizon if need_horizon else -1)

    def ts_of(ts_delta):
        return fixed_timestamp if fixed_timestamp is not None else \
            _wrap64(base_timestamp + ts_delta)

    new_base = horizon if horizon >= 0 else ts_of(kept[0][4])
    max_ts = NO_TIMESTAMP
    parts = []
    for start, end, attr_pos, after_ts, ts_delta, _o, _k, _n in kept:
        ts = ts_of(ts_delta)
        max_ts = max(max_ts, ts)
        tsv = encode_varint(_wrap64(ts - new_base))
        body = 1 + len(tsv) + end - after_ts
        parts += (encode_varint(body), buf[attr_pos:attr_pos + 1], tsv, buf[after_ts:end])
    if fixed_timestamp is not None:
        max_ts = fixed_timestamp
    return len(kept), b"".join(parts), new_base, horizon, max_ts, invalid, dropped_tombstones


def _header_bytes(base_offset: int, partition_leader_epoch: int, attributes: int,
                  last_offset_delta: int, base_ts: int, max_ts: int, producer_id: int,
                  producer_epoch: int, base_sequence: int, count: int, payload) -> bytes:
    """A whole v2 batch: the header (CRC-32C computed) followed by ``payload``."""
    length = BATCH_OVERHEAD - LOG_OVERHEAD + len(payload)
    header = bytearray(_HEAD.pack(base_offset, length, partition_leader_epoch, CURRENT_MAGIC,
                                  0, attributes, last_offset_delta, base_ts, max_ts,
                                  producer_id, producer_epoch, base_sequence, count))
    crc = crc32c(payload, crc32c(memoryview(header)[ATTRIBUTES_OFFSET:]))
    struct.pack_into(">I", header, CRC_OFFSET, crc)
    return bytes(header) + bytes(payload)


def _py_filter_batches(buf, pos: int, end: int, map_buf, slots: int, latest_offset: int,
                       now: int, delete_retention_ms: int, protected, upper_bound: int,
                       segment_base: int = -1, next_base: int = -1, expected: int = -1
                       ) -> tuple[int, bytes, int, tuple, int]:
    """:func:`filter_records` (MODE_FILTER) over the plain batches of ``buf[pos:end]``, the
    kept batches written out one after the other: a batch whose records all stay (and that
    needs no delete horizon) byte for byte, a changed one rebuilt (:func:`retained_batch`), an
    emptied one dropped. A v2 tombstone stays while its batch has no delete horizon or ``now``
    is below it; a horizon set here is ``now + delete_retention_ms``.

    Stops (STATUS_OTHER) at a batch the caller must decide on as a whole as well: one whose
    producer id is set and whose last offset is in ``protected`` (a sorted buffer of native
    int64: the last data offsets of the active producers) and one that ends at
    ``upper_bound`` (the cleaning round's last batch) -- both are kept even when empty.

    It stops (STATUS_OTHER) at a batch out of the order of ``segment_base``, ``next_base``
    and ``expected`` too (as :func:`map_batches`).

    Returns ``(position, output, status, stats, expected)`` with stats ``(records read,
    records kept, bytes read, bytes written, invalid records, tombstones dropped)`` and
    ``expected`` the offset after the last batch taken."""
    data = bytes(memoryview(buf)[:end])
    prot = array("q")
    prot.frombytes(bytes(protected))
    out = []
    stats = [0, 0, 0, 0, 0, 0]
    while True:
        size_or_status, head = _plain_batch(data, pos, end, (segment_base, next_base, expected))
        if head is None:
            return pos, b"".join(out), size_or_status, tuple(stats), expected
        size = size_or_status
        (base, _len, ple, _magic, _crc, attributes, lod, base_ts, max_ts, pid, epoch, seq,
         count) = head
        last_offset = _wrap64(base + lod)
        if pid >= 0:
            i = bisect_left(prot, last_offset)
            if i < len(prot) and prot[i] == last_offset:
                return pos, b"".join(out), STATUS_OTHER, tuple(stats), expected
        if _wrap64(last_offset + 1) == upper_bound:
            return pos, b"".join(out), STATUS_OTHER, tuple(stats), expected
        horizon = base_ts if attributes & DELETE_HORIZON_MASK else -1
        retain_deletes = horizon < 0 or now < horizon
        fixed = max_ts if attributes & TIMESTAMP_TYPE_MASK else None
        kept, payload, nbase, nhorizon, nmax, invalid, dropped = _py_filter_records(
            data[pos + BATCH_OVERHEAD:pos + size], count, base, base_ts, fixed, map_buf, slots,
            latest_offset, retain_deletes, MODE_FILTER, horizon,
            _wrap64(now + delete_retention_ms), False)
        stats[0] += count
        stats[1] += kept
        stats[2] += size
        stats[4] += invalid
        stats[5] += dropped
        if payload is None:
            out.append(data[pos:pos + size])
            stats[3] += size
        elif kept:
            attrs = attributes | DELETE_HORIZON_MASK if nhorizon >= 0 else \
                attributes & ~DELETE_HORIZON_MASK
            batch = _header_bytes(base, ple, attrs, lod, nbase, nmax, pid, epoch, seq, kept,
                                  payload)
            out.append(batch)
            stats[3] += len(batch)
        expected = _wrap64(last_offset + 1)
        pos += size


# -- index entries ---------------------------------------------------------------------------
def _py_index_entries(buf, position: int, interval: int, state: tuple
                      ) -> tuple[list, list, tuple]:
    """The index entries of the whole batches in ``buf`` (v2 batches and legacy entries,
    back to back) written at file position ``position`` of a segment, by the rule of
    ``LogSegment.append`` applied per batch: the largest timestamp so far and its offset
    (a batch's last offset) follow each batch; when more than ``interval`` bytes were
    written since the last entry, an offset entry (the batch's last offset, its position)
    and a time entry (the largest timestamp so far, its offset -- only when larger than the
    last time entry's) are added before the batch counts.

    ``state``: ``(bytes since the last entry, largest timestamp so far, its offset, the
    last time entry's timestamp)``, ``(0, -1, base offset, -1)`` for an empty segment.
    Returns ``(offset entries, time entries, new state)``, entries as absolute
    ``(offset, position)`` / ``(timestamp, offset)`` pairs. Raises CorruptRecordError when
    the buffer does not hold whole batches."""
    data = memoryview(buf)
    since, max_ts, offset_of_max, last_time = state
    offsets: list = []
    times: list = []
    pos = 0
    end = len(data)
    while pos < end:
        if end - pos < 17:
            raise CorruptRecordError("not a whole batch", position=position + pos)
        base, length = _OFFSET_LEN.unpack_from(data, pos)
        size = length + LOG_OVERHEAD
        magic = data[pos + 16]
        if length < 14 or size > end - pos:
            raise CorruptRecordError("not a whole batch", position=position + pos)
        if magic == CURRENT_MAGIC:
            if size < BATCH_OVERHEAD:
                raise CorruptRecordError("not a whole batch", position=position + pos)
            last = _wrap64(base + int.from_bytes(data[pos + 23:pos + 27], "big", signed=True))
            batch_max = _I64.unpack_from(data, pos + 35)[0]
        else:
            last = base
            batch_max = _LEGACY_TS.unpack_from(data, pos + 18)[0] \
                if magic == 1 and size >= 26 else NO_TIMESTAMP
        if batch_max > max_ts:
            max_ts, offset_of_max = batch_max, last
        if since > interval:
            offsets.append((last, position + pos))
            if max_ts > last_time:
                times.append((max_ts, offset_of_max))
                last_time = max_ts
            since = 0
        since += size
        pos += size
    return offsets, times, (since, max_ts, offset_of_max, last_time)


def _py_null_key_index(payload, count: int) -> int:
    """The index of the first record without a key in a batch's records, -1 when every
    record has one. Raises CorruptRecordError (a malformed payload)."""
    buf = _validate(payload, count)
    for i, rec in enumerate(_walk(buf, count)):
        if rec[6] is None:
            return i
    return -1


# -- batch headers (Python only: once per batch) ---------------------------------------------
def retained_batch(batch, payload, kept: int, base_timestamp: int, delete_horizon: int,
                   max_timestamp: int) -> bytes:
    """The bytes of ``batch`` (a :class:`~kafkafs.record.batch.RecordBatch`) rebuilt around
    ``kept`` records whose uncompressed section is ``payload`` (from
    :func:`filter_records`): the same base offset, last offset delta, producer id, epoch,
    base sequence, partition leader epoch, codec (the records are compressed again with it),
    timestamp type and flags; the base timestamp, max timestamp and delete horizon flag
    (attribute bit 6, set when ``delete_horizon`` >= 0) given (``buildRetainedRecordsInto``
    with ``overrideLastOffset``)."""
    codec = batch.attributes & COMPRESSION_MASK
    body = _codec.compress(codec, payload) if codec != _codec.NONE else payload
    attributes = batch.attributes | DELETE_HORIZON_MASK if delete_horizon >= 0 else \
        batch.attributes & ~DELETE_HORIZON_MASK
    return _header_bytes(batch.base_offset, batch.partition_leader_epoch, attributes,
                         batch.last_offset_delta, base_timestamp, max_timestamp,
                         batch.producer_id, batch.producer_epoch, batch.base_sequence, kept,
                         body)


def empty_batch(batch) -> bytes:
    """``batch`` with every record removed (``DefaultRecordBatch.writeEmptyHeader``): a
    61-byte batch with the same base offset, last offset delta, producer id, epoch, base
    sequence, partition leader epoch, timestamp type, transactional and control flags and
    max timestamp; no codec, no delete horizon, base timestamp -1, record count 0."""
    attributes = batch.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK | CONTROL_MASK)
    return _header_bytes(batch.base_offset, batch.partition_leader_epoch, attributes,
                         batch.last_offset_delta, NO_TIMESTAMP, batch.max_timestamp,
                         batch.producer_id, batch.producer_epoch, batch.base_sequence, 0, b"")


# -- selection --------------------------------------------------------------------------------
PYTHON = types.SimpleNamespace(
    name="python", key_hash=_py_key_hash, map_get=_py_map_get, map_put=_py_map_put,
    map_clear=_py_map_clear, map_records=_py_map_records, map_batches=_py_map_batches,
    filter_records=_py_filter_records, filter_batches=_py_filter_batches,
    index_entries=_py_index_entries, null_key_index=_py_null_key_index)

C, HAVE_C, _impl = _fast.twins(PYTHON, {n: "cl_" + n for n in (
    "key_hash", "map_get", "map_put", "map_clear", "map_records", "map_batches",
    "filter_records", "filter_batches", "index_entries", "null_key_index")})

key_hash = _impl.key_hash
map_get = _impl.map_get
map_put = _impl.map_put
map_clear = _impl.map_clear
map_records = _impl.map_records
map_batches = _impl.map_batches
filter_records = _impl.filter_records
filter_batches = _impl.filter_batches
index_entries = _impl.index_entries
null_key_index = _impl.null_key_index
