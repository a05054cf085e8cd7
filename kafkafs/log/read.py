"""One read of a partition as Kafka's fetch path answers it: a byte range of one segment.

Kafka's broker serves a Fetch through ``UnifiedLog.read`` -> ``LocalLog.read`` ->
``LogSegment.read``, which return a ``FetchDataInfo``: where the fetch starts (offset,
segment, position) and a slice of one segment file (``FileRecords.slice``) that the network
layer sends with ``sendfile``, plus the aborted transactions a ``read_committed`` consumer
needs. :func:`read_log` (and :meth:`kafkafs.log.log.Log.read`) answer the same way: a
:class:`FetchDataInfo` naming a segment, a position and a size in bytes, never the bytes
themselves, so that a reader can ``pread`` them, send them with ``os.sendfile`` or walk their
batches (:meth:`FetchDataInfo.batches`) under the log layer's damage rules (the one
walker, :func:`~kafkafs.log.walk.walk_batches`, docs/design.md §5.3).

The rules, Kafka's:

* the read is bounded by the isolation's maximum offset (:data:`FETCH_LOG_END`: the log end
  offset; :data:`FETCH_HIGH_WATERMARK`: the high watermark, the log end offset of a single
  replica; :data:`FETCH_TXN_COMMITTED`: the last stable offset): no byte of a batch at or past
  it is included;
* it starts at the batch holding the start offset (the first batch whose last offset is at or
  past it, through the ``.index``), in the segment whose base offset is the floor of the start
  offset, or in a later segment when that one holds nothing from there;
* it is at most ``max_bytes`` long, except that with ``min_one_message`` (Kafka's
  ``minOneMessage``, what a fetch's first partition gets) it takes the whole first batch
  however large; without it a first batch larger than ``max_bytes`` is cut
  (``first_entry_incomplete``). The last batch of a range may be cut too: a reader stops
  quietly at an incomplete batch at the end of a range (Kafka's consumers do the same);
* a start offset below the log start offset or above the log end offset raises
  :class:`~kafkafs.log.errors.OffsetOutOfRangeError`; one at the maximum offset (or between
  it and the log end offset) reads nothing;
* under :data:`FETCH_TXN_COMMITTED` the aborted transactions overlapping the range are listed
  (Kafka's ``addAbortedTransactions``: up to the offset the ``.index`` gives for the range's
  end, else the next segment's base offset, else the log end offset;
  :meth:`~kafkafs.log.log.Log.aborted_txns`).

The log start offset, high watermark, last stable offset and log end offset of the moment of
the read come with the answer, taken under the log's lock with the segment list. Sizes are
bytes, offsets Kafka offsets. No record is decoded here.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from ..record.batch import RecordBatch
from .errors import OffsetOutOfRangeError
from .segment import LogSegment
from .txnindex import AbortedTxn
from .walk import BatchOrder

__all__ = ["FETCH_HIGH_WATERMARK", "FETCH_ISOLATIONS", "FETCH_LOG_END", "FETCH_TXN_COMMITTED",
           "FetchDataInfo", "read_log"]

#: Kafka's ``FetchIsolation``: how far a read may go
FETCH_LOG_END = "log_end"
FETCH_HIGH_WATERMARK = "high_watermark"
FETCH_TXN_COMMITTED = "txn_committed"
FETCH_ISOLATIONS = (FETCH_LOG_END, FETCH_HIGH_WATERMARK, FETCH_TXN_COMMITTED)


@dataclass(frozen=True)
class FetchDataInfo:
    """What a read found (Kafka ``FetchDataInfo``).

    ``fetch_offset``: the start offset asked for; ``segment``: the
    :class:`~kafkafs.log.segment.LogSegment` holding the bytes (None for an empty read);
    ``base_offset``: its base offset (-1 when empty); ``position`` and ``size``: the byte
    range ``[position, position + size)`` of its ``.log``, starting at a batch;
    ``first_entry_incomplete``: the range ends inside its first batch (``max_bytes`` below
    that batch's size without ``min_one_message``); ``aborted``: the aborted transactions
    overlapping the range (:class:`~kafkafs.log.txnindex.AbortedTxn`, marker order) under
    :data:`FETCH_TXN_COMMITTED`, else None; ``log_start_offset``, ``high_watermark``,
    ``last_stable_offset``, ``log_end_offset``: the partition's at the time of the read;
    ``next_base``: the next segment's base offset (None for the last segment): no batch of
    the range may reach it.
    """

    fetch_offset: int
    segment: LogSegment | None
    base_offset: int
    position: int
    size: int
    first_entry_incomplete: bool
    aborted: tuple[AbortedTxn, ...] | None
    log_start_offset: int
    high_watermark: int
    last_stable_offset: int
    log_end_offset: int
    next_base: int | None = None

    @property
    def empty(self) -> bool:
        """Whether the read holds no byte."""
        return self.size == 0

    @property
    def path(self) -> str | None:
        """The ``.log`` file read (None when empty)."""
        return None if self.segment is None else self.segment.log_path

    def read_bytes(self) -> bytes:
        """The bytes of the range (one ``pread`` through the segment's lease; shorter when
        the file was truncated meanwhile). Raises OSError, StaleSegmentError."""
        if self.segment is None or self.size == 0:
            return b""
        with self.segment.reader() as fd:
            return os.pread(fd, self.size, self.position)

    def batches(self, validate: bool = True, strict_end: bool = False
                ) -> Iterator[RecordBatch]:
        """The batches of the range in order (the first holds :attr:`fetch_offset`; records
        below it are the reader's to skip), walked by
        :meth:`~kafkafs.log.segment.LogSegment.batches`: each CRC checked with ``validate``,
        a batch cut by the end of the range ends the walk quietly, offsets checked to
        increase and to stay inside the segment, and in the last segment below the log end
        offset of the read (:func:`~kafkafs.log.segment.check_batch_order`); ``strict_end``: an incomplete batch
        at the end of the range is damage too (the range ends where a sealed segment ends).
        Raises CorruptRecordError (naming the file and position) at damage inside the range,
        after every batch before it."""
        seg = self.segment
        if seg is None or self.size == 0:
            return
        end = self.log_end_offset if self.next_base is None else None
        yield from seg.batches(self.position, self.position + self.size, validate=validate,
                               strict_end=strict_end,
                               order=BatchOrder(seg.base_offset, self.next_base, end))


def _empty(offset: int, marks: tuple, isolation: str) -> FetchDataInfo:
    return FetchDataInfo(offset, None, -1, 0, 0, False,
                         () if isolation == FETCH_TXN_COMMITTED else None, *marks)


def read_log(log, start_offset: int, max_bytes: int, isolation: str = FETCH_LOG_END,
             min_one_message: bool = True) -> FetchDataInfo:
    """Read from ``log`` (a :class:`~kafkafs.log.log.Log`) at ``start_offset``, at most
    ``max_bytes`` bytes (see the module; Kafka ``UnifiedLog.read`` and ``LocalLog.read``:
    the floor segment, then the next ones while they hold nothing from the start offset on,
    each found by one lookup). ``isolation``: one of :data:`FETCH_ISOLATIONS`. Returns a
    :class:`FetchDataInfo`. Raises ValueError (a negative ``max_bytes``, an unknown
    isolation), OffsetOutOfRangeError, CorruptRecordError when the batches leading to the
    start offset cannot be framed, OSError."""
    if max_bytes < 0:
        raise ValueError(f"Invalid max size {max_bytes} for log read from segment")
    if isolation not in FETCH_ISOLATIONS:
        raise ValueError(f"unknown fetch isolation {isolation!r}")
    with log.lock:
        log_start, leo = log.log_start_offset, log.log_end_offset
        hw, lso = log.high_watermark, log.last_stable_offset
        active = log.active_segment
        last_base, last_size = active.base_offset, active.size  # with the log end offset
        seg, next_base = log.segment_after(start_offset, inclusive=True)
    marks = (log_start, hw, lso, leo)
    if start_offset < log_start or start_offset > leo or seg is None:
        raise OffsetOutOfRangeError(
            f"Received request for offset {start_offset} for partition {log.name}, but we "
            f"only have log segments upto {leo} (log start offset {log_start}).")
    max_offset = lso if isolation == FETCH_TXN_COMMITTED else (
        hw if isolation == FETCH_HIGH_WATERMARK else leo)
    if start_offset >= max_offset:
        return _empty(start_offset, marks, isolation)
    while seg is not None and seg.base_offset < max_offset:
        # (a segment based at or past the maximum offset: Kafka has no max position in it)
        if seg.base_offset == last_base:
            size, limit = last_size, leo  # the last segment as the log end offset saw it
        else:
            size, limit = seg.size, leo if next_base is None else next_base
        # (a batch reaching past the last segment's end is named by the walk, against the
        # log end offset: batches())
        lookup_limit = None if next_base is None else limit
        batch = seg.translate_offset(start_offset, limit=lookup_limit,
                                     strict_end=next_base is not None)
        if batch is None or batch.position >= size:
            # nothing from the start offset on here (compacted away, or appended since the
            # log end offset was taken): the next segment
            seg, next_base = log.segment_after(seg.base_offset)
            continue
        max_position = size
        if max_offset < limit:  # the maximum offset lies in this segment
            bound = batch if batch.last_offset >= max_offset else \
                seg.translate_offset(max_offset, batch.position, limit=lookup_limit)
            if bound is not None:
                max_position = min(size, bound.position)
        adjusted = max(max_bytes, batch.size) if min_one_message else max_bytes
        fetch = min(max_position - batch.position, adjusted)
        if fetch <= 0:
            break
        aborted = None
        if isolation == FETCH_TXN_COMMITTED:
            upper = seg.index.fetch_upper_bound_offset(batch.position + fetch)
            aborted = tuple(log.aborted_txns(start_offset, limit if upper is None else upper))
        return FetchDataInfo(start_offset, seg, seg.base_offset, batch.position, fetch,
                             adjusted < batch.size, aborted, *marks, next_base=next_base)
    return _empty(start_offset, marks, isolation)
