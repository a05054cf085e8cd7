"""The one batch walker: framing, zero tails, torn tails, offset order and damage, over a
:class:`~kafkafs.log.bytesource.ByteSource` (docs/design.md §5.1, §5.3).

Every reader of segment bytes walks them here: :meth:`LogSegment.batches
<kafkafs.log.segment.LogSegment.batches>` (and through it ``Log.read``, the views, ``consume``,
``check``, the key maps, the transaction scan, the producer replay, point reads and
timestamp lookups), the ``kafkalog`` planner and executors on local and ``pyarrow`` files,
``kafkafs dump``, the cleaner (where its C loops stop) and staged runs. Kafka's
``FileRecords.batchesFrom`` / ``FileLogInputStream.nextBatch`` frame the same way; its
``LogSegment.recover`` and ``ensureOffsetInRange`` give the order rules.

:func:`walk_batches` yields :class:`~kafkafs.record.batch.RecordBatch` es (legacy entries as
:class:`~kafkafs.record.legacy.LegacyBatch`) from a batch start to an end position, and
raises :class:`~kafkafs.record.errors.CorruptRecordError` naming the source and the byte
position, after every batch before it, when

* a size is below the minimum of its magic, or (``validate``) a CRC does not match;
* zeros stand where a batch should start and data follows them (:func:`zeroed_range_error`;
  zeros running to the end of the file are a preallocated tail and end the walk quietly,
  unless ``zero_tail`` is off: a staged run is never preallocated);
* (``strict_end``) the range ends inside a batch: an incomplete batch at the end of a
  sealed segment (not the last of its log, cleaned or staged: :func:`torn_error`). Without
  it (the last segment) that is a torn write and ends the walk quietly; so does a file that
  grew past ``end`` since;
* (``order``, a :class:`BatchOrder`) a batch's offsets are out of place
  (:func:`offset_order_problem`): last below first, outside the segment's range, not above
  the batch before it, reaching the next segment's base offset or the log end offset.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..record.batch import (
    HEADER_PEEK,
    LOG_OVERHEAD,
    RecordBatch,
    iter_batches,
    min_entry_length,
)
from ..record.errors import CorruptRecordError

__all__ = ["READ_CHUNK", "BatchOrder", "ZeroTail", "check_batch_order", "first_offset",
           "last_framed_batch", "next_offset_after", "offset_order_problem", "size_error",
           "torn_error", "walk_batches", "zeroed_range_error"]

READ_CHUNK = 1024 * 1024  # bytes read per pread when walking batches
_INT_MAX = 0x7FFFFFFF


def first_offset(batch: RecordBatch) -> int:
    """The first offset a batch may hold: its base offset (v2), or for a legacy entry its
    offset field (a compressed wrapper carries its last inner offset there, so this is the
    only offset known without decompressing)."""
    return batch.base_offset if batch.magic >= 2 else batch.last_offset


def zeroed_range_error(path: str, pos: int, data_at: int) -> CorruptRecordError:
    """The damage of zeros at ``pos`` where a batch should start, with data at ``data_at``
    after them (a zero run ends the data only when it reaches the end of the file)."""
    return CorruptRecordError(
        f"zeroed bytes where a batch should start, followed by data at byte {data_at} (a "
        "zero run ends the data only at the end of the file)", path=path, position=pos)


def size_error(path: str, pos: int, length: int, magic: int) -> CorruptRecordError:
    """The damage of a size field ``length`` below the minimum for ``magic``."""
    minimum = min_entry_length(magic)
    return CorruptRecordError(f"record size {length} is smaller than the minimum record "
                              f"overhead ({minimum})", path=path, position=pos)


def torn_error(path: str, pos: int, end: int, head: bytes) -> CorruptRecordError:
    """The damage of an incomplete batch at ``pos`` where a sealed segment ending at ``end``
    must end with a whole one (one that is not the last of its log, one the cleaner reads,
    one of a staged run; ``head``: the bytes read there, up to its 12-byte prefix)."""
    declared = (f" of the {int.from_bytes(head[8:12], 'big', signed=True) + LOG_OVERHEAD} "
                "its header declares") if len(head) >= LOG_OVERHEAD else ""
    return CorruptRecordError(
        f"incomplete batch: {end - pos} bytes{declared} at the end of a sealed segment (a "
        "torn write, or a truncated file)", path=path, position=pos)


def offset_order_problem(first: int, last: int, expected: int | None, segment_base: int | None,
                         next_base: int | None = None, end: int | None = None) -> str | None:
    """Why a batch holding offsets ``[first, last]`` cannot stand where it is, or None: its
    last offset not below its first, its offsets at or above ``segment_base`` and within an
    int of it (Kafka's ``ensureOffsetInRange``; None: not in a segment, no such bound),
    below ``next_base`` (the base offset of the next segment, when there is one: segments do
    not overlap), and ``first`` at or above ``expected``, the offset after the batch before
    it (None: no batch before it), and its last offset below ``end``, the log end offset
    (where the last segment's last batch ends; None: not known), which a batch before that
    last one contradicts. Offsets that go back are damage, not data: a reader that followed
    them would read records twice or never end."""
    if last < first:
        return (f"batch last offset {last} is below its base offset {first} (last offset "
                f"delta {last - first})")
    if segment_base is not None and (first < segment_base or last - segment_base > _INT_MAX):
        return (f"batch offsets [{first}, {last}] are out of range for a segment with base "
                f"offset {segment_base}")
    if next_base is not None and last >= next_base:
        return (f"batch offsets [{first}, {last}] reach into the next segment, which starts "
                f"at offset {next_base}")
    if expected is not None and first < expected:
        return (f"offsets go back: the batch starts at offset {first}, below the offset "
                f"{expected} that follows the batch before it")
    if end is not None and last >= end:
        return (f"batch offsets [{first}, {last}] reach the log end offset {end}, where the "
                "segment's last batch ends")
    return None


def check_batch_order(batch: RecordBatch, expected: int | None, segment_base: int,
                      path: str, next_base: int | None = None, end: int | None = None) -> None:
    """Raise CorruptRecordError (naming ``path`` and the batch's position) when
    :func:`offset_order_problem` finds the batch's offsets out of place."""
    reason = offset_order_problem(first_offset(batch), batch.last_offset, expected,
                                  segment_base, next_base, end)
    if reason is not None:
        raise CorruptRecordError(reason, path=path, position=batch.position)


class BatchOrder:
    """The order rules of one walk (:func:`offset_order_problem`): ``segment_base`` (None:
    no segment range), ``next_base`` (the next segment's base offset, None for the last),
    ``end`` (the log end offset no batch before the last may reach, None: not known) and
    ``expected``, the offset after the last batch accepted (None before the first), which
    :meth:`check` moves on. ``skip``: a batch out of place is stepped over instead of raising
    (a point read looking for a record of an intact batch after it)."""

    __slots__ = ("end", "expected", "next_base", "segment_base", "skip")

    def __init__(self, segment_base: int | None = None, next_base: int | None = None,
                 end: int | None = None, expected: int | None = None, skip: bool = False):
        self.segment_base, self.next_base, self.end = segment_base, next_base, end
        self.expected, self.skip = expected, skip

    def check(self, batch: RecordBatch, path: str) -> bool:
        """Whether ``batch`` stands in order (then ``expected`` moves past it); False when
        it does not and ``skip`` is set; else raises CorruptRecordError."""
        problem = offset_order_problem(first_offset(batch), batch.last_offset, self.expected,
                                       self.segment_base, self.next_base, self.end)
        if problem is not None:
            if self.skip:
                return False
            raise CorruptRecordError(problem, path=path, position=batch.position)
        self.expected = batch.next_offset
        return True

    def bounds(self) -> tuple[int, int, int]:
        """``(segment_base, next_base, expected)`` as the C loops take them (-1 for None;
        ``record.batch.offsets_in_place``: the same rules but the log end offset's)."""
        return tuple(-1 if v is None else v
                     for v in (self.segment_base, self.next_base, self.expected))

    def moved_to(self, expected: int) -> None:
        """Take ``expected`` from a C loop that walked on (-1: it took no batch)."""
        if expected >= 0:
            self.expected = expected


class ZeroTail:
    """A checked zero tail of a source, remembered: ``(position, file size)`` from which the
    file held only zeros, so that a reader at the end of a preallocated segment checks it
    once (owned by the caller: one per file)."""

    __slots__ = ("known",)

    def __init__(self):
        self.known: tuple[int, int] | None = None

    def check(self, source, pos: int) -> None:
        """Raise CorruptRecordError unless ``source`` holds only zeros from ``pos`` on."""
        size = source.size()
        known = self.known
        if known is not None and known[0] <= pos and known[1] == size:
            return
        data_at = source.first_data_at(pos)
        if data_at is not None:
            raise zeroed_range_error(source.name, pos, data_at)
        self.known = (pos, size)


def walk_batches(source, start: int, end: int, *, validate: bool = False,
                 strict_end: bool = False, chunk_size: int = READ_CHUNK,
                 order: BatchOrder | None = None, zeros: ZeroTail | None = None,
                 zero_tail: bool = True) -> Iterator[RecordBatch]:
    """Yield the batches of ``source`` (a :class:`~kafkafs.log.bytesource.ByteSource`) from
    ``start`` (a batch start) to ``end`` (bytes), read ``chunk_size`` bytes at a time (a
    larger batch is read whole); ``RecordBatch.position`` is the position in the file.
    ``zeros``: where checked zero tails are remembered (default: not remembered).
    ``zero_tail=False``: the file is never preallocated (a staged run), so zeros where a
    batch should start are damage even when they reach the end (a size below the minimum;
    with ``strict_end``, fewer than 17 bytes of them an incomplete batch). See the module
    for the rules and the CorruptRecordError raised; OSError propagates."""
    name = source.name
    zeros = zeros or ZeroTail()
    pos = start
    base_chunk = chunk_size
    while end - pos >= HEADER_PEEK:
        buf = source.pread(pos, min(max(chunk_size, 0), end - pos))
        if len(buf) < HEADER_PEEK:
            break
        consumed = 0
        for batch in iter_batches(buf, 0, len(buf), base_position=pos, validate=validate,
                                  path=name, zero_tail=zero_tail):
            if order is not None and not order.check(batch, name):
                consumed = batch.position - pos + batch.size
                continue
            consumed = batch.position - pos + batch.size
            yield batch
        if consumed == 0:
            # zeros, or the next batch is larger than the chunk: read exactly it
            if zero_tail and not any(buf[:LOG_OVERHEAD]):
                zeros.check(source, pos)
                return  # a preallocated zero tail: nothing written from here on
            length = int.from_bytes(buf[8:12], "big", signed=True)
            if length < min_entry_length(buf[16]):
                raise size_error(name, pos, length, buf[16])
            size = length + LOG_OVERHEAD
            if pos + size > end:
                break
            chunk_size = size
            continue
        pos += consumed  # (stopped at zeros: the next read checks them)
        chunk_size = base_chunk
    if strict_end and pos < end:
        if source.size() > end:
            return  # grown since the caller's size was taken (a live writer): not damage
        head = source.pread(pos, LOG_OVERHEAD)
        if zero_tail and not any(head):  # zeros, however few: a preallocated end, or damage
            zeros.check(source, pos)
            return
        raise torn_error(name, pos, end, head)


def last_framed_batch(source, start: int, end: int, segment_base: int,
                      zeros: ZeroTail | None = None) -> RecordBatch | None:
    """The last batch :func:`walk_batches` frames in ``source`` from ``start`` to ``end``
    (CRCs unchecked; up to one that cannot be framed) whose offsets can lie in a segment
    based at ``segment_base`` (not a negative last offset delta, not outside the segment's
    range: such a batch is stepped over); None when there is none. Never raises
    CorruptRecordError; OSError propagates."""
    last = None
    try:
        for batch in walk_batches(source, start, end, zeros=zeros):
            if offset_order_problem(first_offset(batch), batch.last_offset, None,
                                    segment_base) is not None:
                continue
            last = batch
    except CorruptRecordError:
        pass
    return last


def next_offset_after(source, segment_base: int, start: int, end: int,
                      zeros: ZeroTail | None = None) -> int:
    """The offset after a segment's last batch, or ``segment_base`` when it holds none
    (Kafka's ``LogSegment.readNextOffset``): the log end offset when the segment is the
    last. The last batch framed from ``start`` (the position of the segment's last index
    entry), else from position 0 (nothing readable from there), up to ``end`` (its size):
    :func:`last_framed_batch`. The one computation of the log end offset, for a
    :class:`~kafkafs.log.segment.LogSegment` and for the ``kafkalog`` planner's
    ``pyarrow`` files alike (docs/design.md §5.3). Never raises CorruptRecordError."""
    for position in dict.fromkeys((start, 0)):
        last = last_framed_batch(source, position, end, segment_base, zeros)
        if last is not None:
            return last.next_offset
    return segment_base
