"""Kafka's log cleaner: log compaction (``Cleaner`` and ``LogCleaner`` of
``core/src/main/scala/kafka/log/LogCleaner.scala``), synchronous, for worker threads.

A log is a clean section (cleaned before) followed by a dirty one, up to the first
uncleanable offset (:mod:`kafkafs.log.cleaner_manager`). One pass of :class:`Cleaner`:

1. **Offset map.** The dirty section is read in order and the offset of the last record of
   each key goes into a :class:`~kafkafs.log.offset_map.SkimpyOffsetMap` of fixed memory.
   Batches of aborted transactions are skipped (known ahead from the ``.txnindex`` files,
   through :meth:`Log.aborted_txns <kafkafs.log.log.Log.aborted_txns>`). When the map
   reaches its load factor the build stops, even inside a segment: the pass cleans up to
   the last offset the map holds, and the next pass starts there.
2. **Groups.** The segments from the first one up to that offset are grouped: consecutive
   segments whose sizes add up to at most ``segment.bytes``, whose indexes add up to at
   most ``segment.index.bytes`` each, and whose offsets fit 32 bits above the group's base
   (an empty segment always joins) -- Kafka's ``groupSegmentsBySize``.
3. **Filter.** Each group is copied into one ``.cleaned`` segment
   (:mod:`kafkafs.log.cleaned_segment`), record by record by Kafka's rules
   (``MemoryRecords.filterTo`` with the cleaner's ``RecordFilter``):

   * a record stays when its offset is past the map's last offset, or when it is the last
     record of its key and has a value, or is a tombstone whose batch has no delete horizon
     yet or one in the future; records without a key are dropped (counted invalid);
   * a batch that keeps a tombstone (or a marker whose transaction has no data left) and has
     no delete horizon gets one: ``now + delete.retention.ms`` as its base timestamp with
     attribute bit 6 (KIP-534), so that a later pass drops it -- however old its records'
     timestamps are (KAFKA-4529); legacy (v0/v1) tombstones go once their segment is older
     than the last cleaned segment's modification time minus ``delete.retention.ms``;
   * batches of aborted transactions go whatever their keys; COMMIT/ABORT markers stay
     while their transaction has batches left, then get a delete horizon and go after it
     (:mod:`kafkafs.log.cleaner_txn`); an ABORT marker that stays keeps its ``.txnindex``
     entry in the cleaned segment;
   * the last batch of each active producer stays -- empty when all its records go, with
     its base and last offsets, producer id, epoch and sequence -- so the producer state
     survives (and the last batch of the pass stays, so that its last offset does);
   * a kept batch keeps its base offset and last offset delta; a batch that loses records
     is rebuilt with its codec, producer fields and timestamps; one whose records all stay
     is copied byte for byte.
4. **Swap.** The cleaned segment is flushed and swapped in for the group
   (:meth:`Log.replace_segments <kafkafs.log.log.Log.replace_segments>`: ``.cleaned`` →
   ``.swap``, old → ``.deleted``, ``.swap`` → final, directory fsynced).

Nothing at or past the first uncleanable offset is read for the map, and nothing in the
active segment or past it is rewritten. The work is batch-at-a-time: runs of plain batches
(uncompressed, not transactional) go through C (:mod:`kafkafs.record.compaction`), other
batches one by one through Python. Every batch read is checked (framing, CRC, records): a
damaged one fails the pass with CorruptRecordError naming the file and position, and
nothing is swapped. Reads and writes go through the shared :class:`~kafkafs.log.throttler.
Throttler` (``log.cleaner.io.max.bytes.per.second``), in chunks of the I/O buffer
(``log.cleaner.io.buffer.size / threads / 2``), grown for a larger batch.

Legacy compressed wrappers that lose some records are written back as uncompressed legacy
entries of the records kept (Kafka re-compresses them); an emptied legacy entry is dropped
(Kafka cannot write an empty legacy batch either).

:class:`LogCleaner` is the entry point: ``clean_filthiest()`` (the daemon's worker threads)
and ``clean_log(log)`` (``kafkafs compact``), each returning a
:class:`~kafkafs.log.cleaner_manager.CleanResult`.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise

from ..record import compaction as _rc
from ..record.batch import HEADER_PEEK, LOG_APPEND_TIME
from ..record.errors import CorruptRecordError
from ..record.legacy import encode_entry as encode_legacy_entry
from .bytesource import BufferSource
from .cleaned_segment import CleanedSegmentWriter
from .cleaner_manager import (
    CleanResult,
    LogCleanerManager,
    LogToClean,
    log_segments,
    now_ms,
)
from .cleaner_txn import CleanedTransactionMetadata
from .config import DOUBLE_MAX, INT_MAX, BrokerConfig
from .errors import LogCleaningAbortedError, ReadOnlyLogError
from .log import Log
from .offset_map import SkimpyOffsetMap
from .segment import LogSegment
from .throttler import Throttler
from .walk import BatchOrder, walk_batches

log = logging.getLogger(__name__)

_RETAIN_EMPTY, _DELETE, _DELETE_EMPTY = range(3)


@dataclass(frozen=True)
class CleanerConfig:
    """The cleaner's settings (Kafka ``CleanerConfig``): ``num_threads``
    (``log.cleaner.threads``), ``dedupe_buffer_size`` (total for all threads),
    ``dedupe_buffer_load_factor`` (``log.cleaner.io.buffer.load.factor``),
    ``io_buffer_size`` (total for all threads' read and write buffers),
    ``max_message_size`` (``message.max.bytes``), ``max_io_bytes_per_second``,
    ``backoff_ms``, ``enable_cleaner``."""

    num_threads: int = 1
    dedupe_buffer_size: int = 128 * 1024 * 1024
    dedupe_buffer_load_factor: float = 0.9
    io_buffer_size: int = 512 * 1024
    max_message_size: int = 1024 * 1024 + 12
    max_io_bytes_per_second: float = DOUBLE_MAX
    backoff_ms: int = 15000
    enable_cleaner: bool = True

    @classmethod
    def from_broker(cls, broker: BrokerConfig) -> CleanerConfig:
        """The cleaner settings of a ``server.properties`` (``LogCleaner.cleanerConfig``)."""
        return cls(num_threads=broker.log_cleaner_threads,
                   dedupe_buffer_size=broker.log_cleaner_dedupe_buffer_size,
                   dedupe_buffer_load_factor=broker.log_cleaner_io_buffer_load_factor,
                   io_buffer_size=broker.log_cleaner_io_buffer_size,
                   max_message_size=broker.log.max_message_bytes,
                   max_io_bytes_per_second=broker.log_cleaner_io_max_bytes_per_second,
                   backoff_ms=broker.log_cleaner_backoff_ms,
                   enable_cleaner=broker.log_cleaner_enable)

    @property
    def map_memory_per_thread(self) -> int:
        """Bytes of offset map per cleaner thread (at most 2 GiB, as Kafka)."""
        return min(self.dedupe_buffer_size // max(self.num_threads, 1), INT_MAX)

    @property
    def io_buffer_per_thread(self) -> int:
        """The read (and write) buffer of one thread: ``io_buffer_size / threads / 2``."""
        return self.io_buffer_size // max(self.num_threads, 1) // 2


class CleanerStats:
    """What a pass did (Kafka ``CleanerStats``): bytes and records read and written, map
    bytes read, invalid records, tombstones dropped, the map's utilization, and times
    (``elapsed_secs``, ``elapsed_index_secs``)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self.start = clock()
        self.map_complete: float | None = None
        self.end: float | None = None
        self.bytes_read = 0
        self.bytes_written = 0
        self.map_bytes_read = 0
        self.records_read = 0
        self.records_written = 0
        self.invalid_records = 0
        self.tombstones_dropped = 0
        self.buffer_utilization = 0.0
        self.segments_before = 0
        self.segments_after = 0

    def add_filter_stats(self, st: tuple) -> None:
        read, kept, bytes_read, bytes_written, invalid, dropped = st
        self.records_read += read
        self.records_written += kept
        self.bytes_read += bytes_read
        self.bytes_written += bytes_written
        self.invalid_records += invalid
        self.tombstones_dropped += dropped

    def index_done(self) -> None:
        self.map_complete = self._clock()

    def all_done(self) -> None:
        self.end = self._clock()

    @property
    def elapsed_secs(self) -> float:
        return ((self.end or self._clock()) - self.start)

    @property
    def elapsed_index_secs(self) -> float:
        return ((self.map_complete or self._clock()) - self.start)


def group_segments_by_size(segments: list[LogSegment], max_size: int, max_index_size: int,
                           first_uncleanable_offset: int) -> list[list[LogSegment]]:
    """Kafka's ``groupSegmentsBySize``: consecutive segments whose log sizes add up to at most
    ``max_size`` and whose offset and time index sizes each add up to at most
    ``max_index_size``, and whose last offset -- estimated by the next segment's base offset,
    or ``first_uncleanable_offset`` for the last -- is within an int of the group's first
    base offset (an empty segment joins whatever its offsets)."""
    grouped: list[list[LogSegment]] = []
    segs = list(segments)
    i = 0
    while i < len(segs):
        group = [segs[i]]
        log_size = segs[i].size
        index_size = segs[i].index.size_in_bytes
        time_index_size = segs[i].time_index.size_in_bytes
        i += 1
        while i < len(segs):
            seg = segs[i]
            last = segs[i + 1].base_offset - 1 if i + 1 < len(segs) else \
                first_uncleanable_offset - 1
            if not (log_size + seg.size <= max_size
                    and index_size + seg.index.size_in_bytes <= max_index_size
                    and time_index_size + seg.time_index.size_in_bytes <= max_index_size
                    and (seg.size == 0 or last - group[0].base_offset <= INT_MAX)):
                break
            group.append(seg)
            log_size += seg.size
            index_size += seg.index.size_in_bytes
            time_index_size += seg.time_index.size_in_bytes
            i += 1
        grouped.append(group)
    return grouped


def last_records_of_active_producers(lg: Log) -> dict[int, tuple[int | None, int]]:
    """``producer id -> (last data offset or None, epoch)`` of the log's producer state
    (``UnifiedLog.lastRecordsOfActiveProducers``)."""
    with lg.lock:
        return {pid: (e.last_offset if e.last_offset >= 0 else None, e.producer_epoch)
                for pid, e in lg.producer_state.producers.items()}


class _Pass:
    """The per-pass context of :meth:`Cleaner.clean` (what Kafka passes as arguments)."""

    def __init__(self, lg: Log, now: int, stats: CleanerStats,
                 progress: Callable[[int, int], None] | None,
                 segments: list[LogSegment] = ()):
        self.log = lg
        self.now = now
        self.stats = stats
        self.progress = progress
        self.done = 0
        self.total = 0
        # base offset -> the next segment's base offset: the order every batch must keep
        self._next_bases = {s.base_offset: n.base_offset for s, n in pairwise(segments)}

    def order(self, seg: LogSegment) -> BatchOrder:
        """The order rules of a walk over ``seg`` from its start (docs/design.md §5.1): its
        base offset, the next segment's, and the offsets increasing from batch to batch. The
        cleaner reads only sealed segments, so no log end offset."""
        return BatchOrder(seg.base_offset, self._next_bases.get(seg.base_offset))

    def advance(self, nbytes: int) -> None:
        self.done += nbytes
        if self.progress is not None:
            self.progress(self.done, max(self.total, self.done))


class Cleaner:
    """One cleaner (Kafka ``Cleaner``): an offset map, I/O buffers of ``io_buffer_size``
    bytes grown up to a batch's size (at least ``max_io_buffer_size`` may be needed), the
    shared ``throttler``, and ``check_done(log)``, called between chunks, which raises
    LogCleaningAbortedError to stop the pass."""

    def __init__(self, id: int, offset_map: SkimpyOffsetMap, io_buffer_size: int,
                 max_io_buffer_size: int, throttler: Throttler,
                 check_done: Callable[[Log], None] = lambda lg: None):
        self.id = id
        self.offset_map = offset_map
        self.io_buffer_size = max(int(io_buffer_size), HEADER_PEEK)
        self.max_io_buffer_size = max_io_buffer_size
        self.throttler = throttler
        self.check_done = check_done

    # -- the pass ---------------------------------------------------------------------------
    def clean(self, ltc: LogToClean, now: int | None = None,
              progress: Callable[[int, int], None] | None = None) -> tuple[int, CleanerStats]:
        """Clean ``ltc.log`` from its first dirty offset (``Cleaner.doClean``); returns
        ``(the next first dirty offset, stats)``. ``now`` (epoch ms) decides tombstone and
        marker horizons; ``progress(bytes_done, bytes_total)`` is called as chunks are read.
        Raises LogCleaningAbortedError, CorruptRecordError, OSError; nothing is swapped in
        for a group whose cleaning failed (groups before it stay swapped in)."""
        lg = ltc.log
        now = now_ms() if now is None else now
        if not lg.writable:
            raise ReadOnlyLogError(f"{lg.name} is read-only")
        stats = CleanerStats()
        segs = lg.segments()
        ctx = _Pass(lg, now, stats, progress, segs)
        below_dirty = [s for s in segs if s.base_offset < ltc.first_dirty_offset]
        legacy_horizon = below_dirty[-1].last_modified_ms() - lg.config.delete_retention_ms \
            if below_dirty else 0
        upper = ltc.first_uncleanable_offset
        dirty = log_segments(segs, ltc.first_dirty_offset, upper)
        ctx.total = sum(s.size for s in dirty) + sum(s.size for s in segs
                                                     if s.base_offset < upper)
        log.info("Cleaning %s: dirty section [%d, %d) in %d segment(s)", lg.name,
                 ltc.first_dirty_offset, upper, len(dirty))
        self.build_offset_map(ctx, dirty, ltc.first_dirty_offset, upper)
        end_offset = self.offset_map.latest_offset + 1
        stats.index_done()
        txn = CleanedTransactionMetadata()
        to_clean = log_segments(segs, 0, end_offset)
        ctx.total = stats.map_bytes_read + sum(s.size for s in to_clean)
        groups = group_segments_by_size(to_clean, lg.config.segment_bytes,
                                        lg.config.segment_index_bytes, upper)
        stats.segments_before = len(to_clean)
        stats.segments_after = len(groups)
        for group in groups:
            self.clean_segments(ctx, group, txn, legacy_horizon, upper)
        stats.buffer_utilization = self.offset_map.utilization
        stats.all_done()
        return end_offset, stats

    # -- reading ----------------------------------------------------------------------------
    def _chunks(self, ctx: _Pass, seg: LogSegment, pos: int, on_chunk) -> None:
        """Read ``seg`` from ``pos`` in chunks of the I/O buffer and call
        ``on_chunk(chunk, file_position, end) -> (bytes consumed, stop)`` (``end``: the
        segment's size when the loop starts; bytes consumed may pass the chunk's end, when
        the walker read a batch larger than it). Stops at ``end`` or at ``stop``."""
        end = seg.size
        while pos < end:
            self.check_done(ctx.log)
            chunk = seg.read_at(pos, min(self.io_buffer_size, end - pos))
            if not chunk:
                break
            self.throttler.maybe_throttle(len(chunk))
            consumed, stop = on_chunk(chunk, pos, end)
            if consumed > len(chunk):  # (a batch larger than the chunk, read whole)
                self.throttler.maybe_throttle(consumed - len(chunk))
            pos += consumed
            ctx.advance(consumed)
            if stop:
                return

    @staticmethod
    def _batch_at(seg: LogSegment, chunk, p: int, file_pos: int, end: int,
                  order: BatchOrder):
        """The batch at ``chunk[p:]`` (file position ``file_pos + p``) where a C loop stopped,
        through the one walker (docs/design.md §5.3) over the chunk and then the ``.log``:
        its CRC checked, its offsets in ``order`` (which moves past it), a batch larger than
        the chunk read whole; None at the zero tail of a preallocated segment or ``end``
        (the segment's size). A cleaned segment is sealed, so an incomplete batch at its end
        is damage (``strict_end``). Raises CorruptRecordError (naming the file and position)
        at a bad batch, offsets out of order, zeros followed by data or an incomplete
        batch."""
        walk = walk_batches(BufferSource(chunk, file_pos, seg.source), file_pos + p, end,
                            validate=True, strict_end=True, order=order,
                            chunk_size=max(len(chunk) - p, HEADER_PEEK))
        try:
            return next(walk, None)
        finally:
            walk.close()

    # -- step 1: the offset map ----------------------------------------------------------------
    def build_offset_map(self, ctx: _Pass, dirty: list[LogSegment], start: int,
                         end: int) -> None:
        """Fill the offset map from the dirty segments (``buildOffsetMap``) until it is full
        or ``end`` is reached; its latest offset says where the pass ends."""
        m = self.offset_map
        m.clear()
        txn = CleanedTransactionMetadata()
        txn.add_aborted_transactions(ctx.log.aborted_txns(start, end))
        next_starts = [s.base_offset for s in dirty[1:]] + [end]
        for seg, next_start in zip(dirty, next_starts):
            self.check_done(ctx.log)
            if self._map_segment(ctx, seg, start, next_start, txn):
                log.debug("Offset map of %s is full in segment %d", ctx.log.name,
                          seg.base_offset)
                return

    def _map_segment(self, ctx: _Pass, seg: LogSegment, start: int, next_start: int,
                     txn: CleanedTransactionMetadata) -> bool:
        m = self.offset_map
        pos = 0
        order = ctx.order(seg)
        if seg.base_offset < start:
            first = seg.translate_offset(start)
            pos = first.position if first is not None else seg.size
        full = False

        def on_chunk(chunk, file_pos, end):
            nonlocal full
            p = 0
            while p < len(chunk):
                p, status = m.put_batches(chunk, p, len(chunk), start, order)
                if status == _rc.STATUS_FULL:
                    full = True
                    return p, True
                if status == _rc.STATUS_END and p > 0:
                    return p, False  # (the next chunk starts at the batch cut by this one)
                batch = self._batch_at(seg, chunk, p, file_pos, end, order)
                if batch is None:
                    return p, True
                if self._map_batch(batch, start, txn):
                    full = True
                    return p, True
                p += batch.size
            return p, False

        def counted(chunk, file_pos, end):
            consumed, stop = on_chunk(chunk, file_pos, end)
            ctx.stats.map_bytes_read += consumed
            return consumed, stop

        self._chunks(ctx, seg, pos, counted)
        if full:
            return True
        # in the case of offset gaps, fast forward to the last offset of this segment
        m.update_latest_offset(next_start - 1)
        return False

    def _map_batch(self, batch, start: int, txn: CleanedTransactionMetadata) -> bool:
        """One batch the C loop left (not plain) into the map; True when the map filled."""
        m = self.offset_map
        if batch.is_control:
            txn.on_control_batch_read(batch)
        elif not txn.on_batch_read(batch):
            if batch.magic >= 2:
                payload, _ = batch.payload()
                try:
                    if m.put_records(payload, batch.records_count, batch.base_offset, start):
                        return True
                except CorruptRecordError as exc:
                    raise exc.located(path=batch.path, position=batch.position) from None
            else:
                for offset, _ts, key, _value, _h in batch.record_tuples():
                    if key is None or offset < start:
                        continue
                    if m.size >= m.max_entries:
                        return True
                    m.put(key, offset)
        if batch.last_offset >= start:
            m.update_latest_offset(batch.last_offset)
        return False

    # -- steps 3 and 4: filter a group into a cleaned segment and swap it in -----------------
    def clean_segments(self, ctx: _Pass, group: list[LogSegment],
                       txn: CleanedTransactionMetadata, legacy_horizon: int,
                       upper_bound: int) -> None:
        """Clean ``group`` into one segment and swap it in (``cleanSegments``)."""
        lg = ctx.log
        writer = CleanedSegmentWriter(lg.pdir, group[0].base_offset, lg.config)
        txn.cleaned_index = writer.append_aborted
        try:
            last_records = last_records_of_active_producers(lg)
            protected = array("q", sorted(o for o, _e in last_records.values()
                                          if o is not None)).tobytes()
            for i, seg in enumerate(group):
                upper = group[i + 1].base_offset if i + 1 < len(group) else \
                    seg.read_next_offset()
                txn.add_aborted_transactions(lg.aborted_txns(seg.base_offset, upper))
                retain_legacy = seg.last_modified_ms() > legacy_horizon
                self.clean_into(ctx, seg, writer, retain_legacy, txn, last_records, protected,
                                upper_bound)
            cleaned = writer.finish(group[-1].last_modified_ms())
            self.check_done(lg)
            lg.replace_segments([cleaned], group)
        except BaseException:
            try:
                writer.abort()
            except OSError as exc:
                log.warning("Cannot remove the .cleaned files of %s at %d: %s", lg.name,
                            group[0].base_offset, exc)
            raise
        finally:
            txn.cleaned_index = None

    def clean_into(self, ctx: _Pass, seg: LogSegment, writer: CleanedSegmentWriter,
                   retain_legacy_deletes: bool, txn: CleanedTransactionMetadata,
                   last_records: dict, protected: bytes, upper_bound: int) -> None:
        """Copy what stays of ``seg`` to ``writer`` (``cleanInto``)."""
        m = self.offset_map
        cfg = ctx.log.config
        stats = ctx.stats
        order = ctx.order(seg)

        def on_chunk(chunk, file_pos, end):
            p = 0
            while p < len(chunk):
                p, out, status, st, expected = _rc.filter_batches(
                    chunk, p, len(chunk), m.buffer, m.slots, m.latest_offset, ctx.now,
                    cfg.delete_retention_ms, protected, upper_bound, *order.bounds())
                order.moved_to(expected)
                stats.add_filter_stats(st)
                if out:
                    writer.write(out)
                    self.throttler.maybe_throttle(len(out))
                if status == _rc.STATUS_END and p > 0:
                    return p, False  # (the next chunk starts at the batch cut by this one)
                batch = self._batch_at(seg, chunk, p, file_pos, end, order)
                if batch is None:
                    return p, True
                kept = self._filter_batch(ctx, batch, retain_legacy_deletes, txn,
                                          last_records, upper_bound)
                if kept:
                    writer.write(kept)
                    self.throttler.maybe_throttle(len(kept))
                p += batch.size
            return p, False

        self._chunks(ctx, seg, 0, on_chunk)

    def _filter_batch(self, ctx: _Pass, batch, retain_legacy_deletes: bool,
                      txn: CleanedTransactionMetadata, last_records: dict,
                      upper_bound: int) -> bytes | None:
        """What stays of one batch the C loop left (``checkBatchRetention`` and
        ``shouldRetainRecord`` of the cleaner's ``RecordFilter``, ``filterTo``)."""
        stats = ctx.stats
        now = ctx.now
        stats.bytes_read += batch.size
        if batch.magic < 2:
            return self._filter_legacy(ctx, batch, retain_legacy_deletes, upper_bound)
        is_control = batch.is_control
        can_discard = txn.on_control_batch_read(batch) if is_control else \
            txn.on_batch_read(batch)
        if is_control:
            discard_records = can_discard and batch.has_delete_horizon and \
                batch.delete_horizon_ms <= now
        else:
            discard_records = can_discard
        if batch.producer_id >= 0 and self._is_last_of_producer(batch, last_records):
            retention = _RETAIN_EMPTY
        elif batch.next_offset == upper_bound:
            retention = _RETAIN_EMPTY  # keep the round's last offset
        elif discard_records:
            retention = _DELETE
        else:
            retention = _DELETE_EMPTY
        if retention == _DELETE:
            stats.records_read += batch.records_count
            return None
        payload, _ = batch.payload()
        mode = _rc.MODE_DROP if discard_records else \
            (_rc.MODE_KEEP if is_control else _rc.MODE_FILTER)
        m = self.offset_map
        retain_deletes = not batch.has_delete_horizon or now < batch.delete_horizon_ms
        fixed = batch.max_timestamp if batch.timestamp_type == LOG_APPEND_TIME else None
        try:
            kept, records, base_ts, horizon, max_ts, invalid, dropped = _rc.filter_records(
                payload, batch.records_count, batch.base_offset, batch.base_timestamp, fixed,
                m.buffer, m.slots, m.latest_offset, retain_deletes, mode,
                batch.delete_horizon_ms, now + ctx.log.config.delete_retention_ms,
                can_discard and is_control)
        except CorruptRecordError as exc:
            raise exc.located(path=batch.path, position=batch.position) from None
        stats.records_read += batch.records_count
        stats.records_written += kept
        stats.invalid_records += invalid
        stats.tombstones_dropped += dropped
        if kept:
            out = bytes(batch.buffer) if records is None else \
                _rc.retained_batch(batch, records, kept, base_ts, horizon, max_ts)
        elif retention == _RETAIN_EMPTY:
            out = _rc.empty_batch(batch)
        else:
            return None
        stats.bytes_written += len(out)
        return out

    @staticmethod
    def _is_last_of_producer(batch, last_records: dict) -> bool:
        """Whether the batch holds what the producer state keeps of its producer: its last
        data batch, or (no data batch known) a marker of its current epoch."""
        entry = last_records.get(batch.producer_id)
        if entry is None:
            return False
        last_data, epoch = entry
        if last_data is not None:
            return batch.last_offset == last_data
        return batch.is_control and batch.producer_epoch == epoch

    def _filter_legacy(self, ctx: _Pass, batch, retain_deletes: bool,
                       upper_bound: int) -> bytes | None:
        """A legacy (v0/v1) entry: its records stay by the same rule, tombstones by the
        legacy horizon; see the module for what is written."""
        m = self.offset_map
        stats = ctx.stats
        records = batch.record_tuples()
        kept = []
        for rec in records:
            offset, _ts, key, value, _h = rec
            if offset > m.latest_offset:
                keep = True
            elif key is None:
                stats.invalid_records += 1
                keep = False
            else:
                keep = offset >= m.get(key) and (value is not None or retain_deletes)
                if not keep and value is None:
                    stats.tombstones_dropped += 1
            if keep:
                kept.append(rec)
        stats.records_read += len(records)
        stats.records_written += len(kept)
        if len(kept) == len(records):
            out = bytes(batch.buffer)
        elif kept:
            attributes = batch.attributes if batch.timestamp_type == LOG_APPEND_TIME else 0
            out = b"".join(encode_legacy_entry(o, batch.magic, attributes, ts, k, v)
                           for o, ts, k, v, _h in kept)
        else:
            return None
        stats.bytes_written += len(out)
        return out


class LogCleaner:
    """The log cleaner over a set of log dirs, without threads of its own (Kafka
    ``LogCleaner``): the daemon calls :meth:`clean_filthiest` from its worker threads (one
    call at a time per thread, ``log.cleaner.threads`` of them) and :meth:`clean_log` for
    ``kafkafs compact``; both may run at once (each takes one of the cleaners, with its own
    offset map of ``dedupe.buffer.size / threads`` bytes, allocated on first use).

    ``config``: a :class:`CleanerConfig`; ``log_dirs`` and ``logs``: see
    :class:`~kafkafs.log.cleaner_manager.LogCleanerManager` (exposed as :attr:`manager`);
    ``clock``: epoch ms (tests).
    """

    def __init__(self, config: CleanerConfig, log_dirs, logs, *,
                 clock: Callable[[], int] = now_ms, read_only: bool = False):
        self.config = config
        self.clock = clock
        self.manager = LogCleanerManager(log_dirs, logs, backoff_ms=config.backoff_ms,
                                         clock=clock, read_only=read_only)
        self.throttler = Throttler(config.max_io_bytes_per_second, 300)
        self._free: queue.Queue[Cleaner] = queue.Queue()
        self._made = 0
        self._lock = threading.Lock()
        self._shutdown = threading.Event()

    # -- cleaners -------------------------------------------------------------------------
    def _check_done(self, lg: Log) -> None:
        if self._shutdown.is_set():
            raise LogCleaningAbortedError("the cleaner is shutting down")
        if lg.closed:
            raise LogCleaningAbortedError(f"{lg.name} was closed")
        self.manager.check_cleaning_aborted((lg.topic, lg.partition))

    def _acquire(self) -> Cleaner:
        with self._lock:
            if self._free.empty() and self._made < max(self.config.num_threads, 1):
                self._made += 1
                cfg = self.config
                return Cleaner(self._made - 1,
                               SkimpyOffsetMap(cfg.map_memory_per_thread,
                                               cfg.dedupe_buffer_load_factor),
                               cfg.io_buffer_per_thread, cfg.max_message_size,
                               self.throttler, self._check_done)
        return self._free.get()

    def _release(self, cleaner: Cleaner) -> None:
        self._free.put(cleaner)

    def shutdown(self) -> None:
        """Make running passes stop at their next check (aborted, nothing swapped in)."""
        self._shutdown.set()

    # -- passes -----------------------------------------------------------------------------
    def clean_filthiest(self, now: int | None = None) -> CleanResult | None:
        """Pick the dirtiest cleanable log, clean it and return the result, or None when no
        log needs cleaning (the caller then sleeps ``log.cleaner.backoff.ms``). A failure
        is not raised: the partition is marked uncleanable and the result carries the
        error."""
        if self._shutdown.is_set():
            return None
        now = self.clock() if now is None else now
        ltc = self.manager.grab_filthiest_compacted_log(now)
        self.manager.maintain_uncleanable_partitions()
        if ltc is None:
            return None
        return self._run(ltc, now, None)

    def clean_log(self, lg: Log, *, progress: Callable[[int, int], None] | None = None,
                  now: int | None = None, timeout: float | None = None) -> CleanResult:
        """Clean ``lg`` now, whatever its dirty ratio (``kafkafs compact``), waiting for a
        pass over it that runs already; ``progress(bytes_done, bytes_total)`` as chunks are
        read. Returns the result (a failure marks the partition uncleanable and is in the
        result, as for :meth:`clean_filthiest`). Raises ReadOnlyLogError, ValueError for a
        log whose cleanup.policy has no ``compact``, LogCleaningAbortedError (``timeout``
        s passed while another pass or a pause held the partition)."""
        if not lg.writable:
            raise ReadOnlyLogError(f"{lg.name} is read-only: it is never cleaned")
        if not lg.config.compact:
            raise ValueError(f"{lg.name} has cleanup.policy={lg.config.cleanup_policy}: only "
                             "compacted topics are cleaned")
        tp = (lg.topic, lg.partition)
        now = self.clock() if now is None else now
        self.manager.begin_cleaning(tp, timeout)
        try:
            ltc = self.manager.log_to_clean(tp, lg, now)
        except BaseException as exc:
            self.manager.done_cleaning(tp, self.manager.log_dir_of(lg), None)
            if isinstance(exc, Exception):
                return self._failed(tp, lg, exc, now, ltc=None)
            raise
        return self._run(ltc, now, progress)

    def _run(self, ltc: LogToClean, now: int, progress) -> CleanResult:
        lg = ltc.log
        tp = ltc.topic_partition
        log_dir = self.manager.log_dir_of(lg)
        if ltc.first_dirty_offset >= ltc.first_uncleanable_offset:
            self.manager.done_cleaning(tp, log_dir, None)
            result = CleanResult(lg.topic, lg.partition, self.clock(),
                                 ltc.first_dirty_offset, ltc.first_dirty_offset)
            self.manager.record_result(tp, result)
            return result
        cleaner = self._acquire()
        started = time.monotonic()
        end_offset = None
        try:
            end_offset, stats = cleaner.clean(ltc, now, progress)
        except LogCleaningAbortedError as exc:
            log.info("Cleaning of %s aborted: %s", lg.name, exc)
            result = CleanResult(lg.topic, lg.partition, self.clock(), ltc.first_dirty_offset,
                                 ltc.first_dirty_offset,
                                 int((time.monotonic() - started) * 1000), aborted=True)
        except Exception as exc:  # noqa: BLE001 (any failure marks only this partition)
            if lg.closed or self._shutdown.is_set():  # taken away under the pass
                result = CleanResult(lg.topic, lg.partition, self.clock(),
                                     ltc.first_dirty_offset, ltc.first_dirty_offset,
                                     int((time.monotonic() - started) * 1000), aborted=True)
            else:
                result = self._failed(tp, lg, exc, now, ltc)
        else:
            result = CleanResult(
                lg.topic, lg.partition, self.clock(), ltc.first_dirty_offset, end_offset,
                int(stats.elapsed_secs * 1000), stats.bytes_read, stats.bytes_written,
                stats.map_bytes_read, stats.records_read, stats.records_written,
                stats.tombstones_dropped, stats.invalid_records, stats.buffer_utilization,
                stats.segments_before, stats.segments_after)
            self.manager.clear_uncleanable(tp)
            log.info("%s", result.log_line())
            if stats.invalid_records:
                log.warning("Found %d invalid messages (without a key) during compaction of "
                            "%s.", stats.invalid_records, lg.name)
        finally:
            self._release(cleaner)
            self.manager.done_cleaning(tp, log_dir, end_offset)
        self.manager.record_result(tp, result)
        return result

    def _failed(self, tp, lg: Log, exc: Exception, now: int, ltc: LogToClean | None
                ) -> CleanResult:
        error = f"{type(exc).__name__}: {exc}"
        info = self.manager.mark_uncleanable(tp, lg, error, now)
        log.warning("Unexpected exception thrown when cleaning log %s. Marking its partition "
                    "as uncleanable (retry in %d ms or after a config change): %s", lg.name,
                    info.retry_at_ms - now, error, exc_info=exc)
        first = ltc.first_dirty_offset if ltc is not None else 0
        result = CleanResult(lg.topic, lg.partition, self.clock(), first, first, error=error)
        self.manager.record_result(tp, result)
        return result

    def status(self, lg: Log, now: int | None = None):
        """The :class:`~kafkafs.log.cleaner_manager.CleanerStatus` of ``lg``."""
        return self.manager.partition_status((lg.topic, lg.partition), lg, now)


__all__ = [
    "Cleaner",
    "CleanerConfig",
    "CleanerStats",
    "LogCleaner",
    "group_segments_by_size",
    "last_records_of_active_producers",
]
