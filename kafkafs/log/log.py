"""The log of one topic-partition: an ordered set of segments (Kafka ``UnifiedLog``/``LocalLog``).

A :class:`Log` assigns offsets on append, rolls segments, reads by offset and by timestamp,
flushes, and applies retention. It is built by :func:`kafkafs.log.loader.load_log`, which
also does crash recovery. kafkafs is a single replica, so the high watermark is the log end
offset.

Transactions (as ``UnifiedLog``): the log owns a
:class:`~kafkafs.log.producer_state.ProducerStateManager` updated by every append and rebuilt
at load (:func:`~kafkafs.log.producer_replay.rebuild_producer_state`); an ABORT marker
appended adds its :class:`~kafkafs.log.txnindex.AbortedTxn` to the active segment's
``.txnindex``. Producer snapshots (``<offset>.snapshot``) are written on roll (at the new
segment's base offset) and on close (at the log end offset), deleted below the log start
offset by retention; never by a read-only log. Readers above use
:attr:`Log.last_stable_offset`, :meth:`Log.aborted_txns` and :meth:`Log.committed_filter`
(:mod:`kafkafs.log.isolation`).

Thread safety: one ``threading.RLock`` per log, :attr:`Log.lock`, serialises every change of
the in-memory log (append, roll, flush bookkeeping, the segment map of retention, swaps and
truncation); reads take it only to snapshot the segment list, then read with ``pread``
outside it, so a long scan never blocks an append. The slow file work of retention and of
the cleaner's swap -- renames to ``.swap``/``.deleted``, unlinks, the directory fsync --
runs outside it, serialised by a second lock, ``_file_lock``, that appends never take
(taken before :attr:`Log.lock`, never while holding it; ``docs/design.md §6.4``).
"""

from __future__ import annotations

import bisect
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence

from ..record import compression as codecs
from ..record.batch import (
    BATCH_OVERHEAD,
    CREATE_TIME,
    HEADER,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    RecordBatch,
    encode_batch,
    set_base_offset,
)
from ..record.compaction import null_key_index
from ..record.control import end_txn_marker
from ..record.errors import CorruptRecordError
from ..record.types import Record
from . import safeio
from .config import LogConfig
from .errors import (
    InvalidRecordError,
    LogCleaningAbortedError,
    LogError,
    OffsetOutOfRangeError,
    ReadOnlyLogError,
    RecordTooLargeError,
)
from .isolation import AbortedFilter
from .names import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    filename_prefix,
    parse_segment_filename,
)
from .producer_replay import rebuild_producer_state, replay_producer_state
from .producer_state import (
    InvalidTxnStateError,
    ProducerStateManager,
    fsync_snapshot,
    mark_snapshot_file_deleted,
)
from .read import FETCH_LOG_END, FetchDataInfo, read_log
from .segment import LogSegment, check_batch_order
from .txnindex import AbortedTxn
from .txnscan import TxnScanner, txn_index_trusted

log = logging.getLogger(__name__)

_WHOLE_SEGMENT = 1 << 62  # a read's max_bytes that takes the rest of a segment

EARLIEST_TIMESTAMP = -2  # ListOffsets sentinel: log start offset
LATEST_TIMESTAMP = -1  # ListOffsets sentinel: log end offset
MAX_TIMESTAMP = -3  # ListOffsets sentinel (KIP-734): the record with the largest timestamp


def now_ms() -> int:
    return int(time.time() * 1000)


# fields of a v2 batch header as record.batch.HEADER unpacks it
_PRODUCER_ID, _LAST_OFFSET_DELTA, _MAX_TIMESTAMP, _RECORDS_COUNT = 9, 6, 8, 12


def _run_headers(buf: memoryview) -> list[tuple[int, int, tuple]]:
    """``(position, size, header fields)`` of each v2 batch of ``buf``, which holds whole
    batches back to back (the header unpacked, nothing else read: an append's cost per
    batch). Raises CorruptRecordError (RecordBatch.from_buffer's) for anything else."""
    out = []
    pos, end = 0, len(buf)
    unpack = HEADER.unpack_from
    while pos < end:
        if end - pos >= BATCH_OVERHEAD:
            h = unpack(buf, pos)
            size = h[1] + LOG_OVERHEAD
            if h[3] == 2 and BATCH_OVERHEAD <= size <= end - pos:
                out.append((pos, size, h))
                pos += size
                continue
        RecordBatch.from_buffer(buf, pos)  # raises what is wrong with it
        raise CorruptRecordError("not a v2 record batch", position=pos)
    return out


class Log:
    """One partition's log (Kafka ``UnifiedLog``).

    Attributes: ``dir`` (partition directory path), ``pdir`` (the partition directory, open:
    :class:`~kafkafs.log.safeio.Dir`; every file of the log is reached through it, so a
    dir swapped for a link after the load redirects nothing), ``topic``, ``partition``, ``config``
    (:class:`LogConfig`), ``log_start_offset``, ``recovery_point`` (offsets below it are
    flushed), ``writable``. Offsets are Kafka offsets, sizes bytes, times ms.
    Listeners in ``on_change`` are called as ``fn(log)`` after every append, roll, truncation
    or retention pass, adoption and refresh. After an append or roll they run under the lock
    (keep them cheap); after the changes that move the log start offset (retention,
    truncation, adoption, :meth:`refresh_from_disk`) they run once the lock is released, so a
    listener may wait for a reader that needs the lock (the FUSE layer dropping cached pages
    waits for a read it has yet to answer).

    ``producer_state``: the partition's
    :class:`~kafkafs.log.producer_state.ProducerStateManager` (default: a new one, empty,
    ending at the log end offset; :func:`~kafkafs.log.loader.load_log` passes the one it
    rebuilt). Exposed as :attr:`producer_state`; change it only under :attr:`lock`.

    ``txn_recovery_point``: set by a read-only :func:`~kafkafs.log.loader.load_log` after an
    unclean shutdown to the checkpointed recovery point, from which a writable load would
    recover (and rebuild the ``.txnindex`` files): :meth:`aborted_txns` computes the entries
    of those segments instead of reading their files. None (the default): every present
    file is trusted.
    """

    def __init__(self, dir: str | safeio.Dir, topic: str, partition: int, config: LogConfig,
                 segments: Sequence[LogSegment], *, log_start_offset: int, recovery_point: int,
                 writable: bool = True, producer_state: ProducerStateManager | None = None,
                 names=None):
        self.pdir = safeio.Dir.of(dir)
        self.dir = self.pdir.path
        self.topic = topic
        self.partition = partition
        self.config = config
        self.writable = writable
        self.lock = threading.RLock()
        self._bases: list[int] = [s.base_offset for s in segments]
        self._segments: dict[int, LogSegment] = {s.base_offset: s for s in segments}
        self.log_start_offset = log_start_offset
        self.recovery_point = recovery_point
        self._log_end_offset = self.active_segment.read_next_offset() if segments else 0
        self.unflushed_messages = 0
        self.last_flush_ms = now_ms()
        # the file work of retention, swaps, truncation and close (see the module): taken
        # before self.lock, never while holding it
        self._file_lock = threading.RLock()
        # (under _file_lock) segments renamed .deleted, removed when due
        self.pending_deletes: list[tuple[int, LogSegment]] = []  # (due ms, segment)
        # (under self.lock) segments out of the map whose files may still carry their live
        # names (being renamed .deleted, or waiting in pending_deletes): never adopted again
        self._doomed: list[LogSegment] = []
        self.on_change: list[Callable[[Log], None]] = []
        self.closed = False
        if producer_state is None:
            producer_state = ProducerStateManager(self.pdir, writable=writable)
            producer_state.update_map_end_offset(self._log_end_offset)
        self.producer_state = producer_state
        self._first_unstable_offset: int | None = None
        self._unsynced_snapshots: list[str] = []
        self._txn_index_bases: set[int] = self._list_txn_indexes() if names is None \
            else self._txn_indexes_in(names)
        # where a writable load's recovery would start (read-only loads; see aborted_txns)
        self.txn_recovery_point: int | None = None
        self._txn_scan = TxnScanner(self.pdir, self.name)
        self._update_first_unstable_offset()
        #: (read-only) the offset the log is shown as ending at while an unfinished bulk
        #: commit appends past it (:mod:`kafkafs.log.bulk_commit`), else None; and a
        #: callable telling whether that still holds (the offset, or None once the commit
        #: finished), asked by :meth:`refresh_from_disk`
        self.limit: int | None = None
        self.limit_source: Callable[[], int | None] | None = None

    # -- basic state -----------------------------------------------------------------
    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record gets (LEO)."""
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        """Single replica: everything appended is committed."""
        return self._log_end_offset

    # -- transactions ----------------------------------------------------------------
    @property
    def last_stable_offset(self) -> int:
        """The last stable offset (``UnifiedLog.lastStableOffset``): the first offset of the
        earliest transaction still ongoing (not below the log start offset), or the high
        watermark -- here the log end offset -- when there is none. Every offset below it is
        decided: non-transactional, committed or aborted. A ``read_committed`` reader stops
        here."""
        first = self._first_unstable_offset
        hw = self._log_end_offset
        return first if first is not None and first < hw else hw

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest ongoing transaction (at least the log start
        offset), or None (``UnifiedLog.firstUnstableOffset``)."""
        return self._first_unstable_offset

    def _update_first_unstable_offset(self) -> None:
        # UnifiedLog.maybeIncrementFirstUnstableOffset: never below the log start offset
        first = self.producer_state.first_undecided_offset()
        if first is not None:
            first = max(first, self.log_start_offset)
        self._first_unstable_offset = first

    def aborted_txns(self, start_offset: int, end_offset: int) -> list[AbortedTxn]:
        """Every aborted transaction overlapping offsets ``[start_offset, end_offset)`` (Kafka
        ``collectAbortedTransactions``): those whose ABORT marker is at or after
        ``start_offset`` and whose first offset is below ``end_offset``. The search starts at
        the segment holding ``start_offset`` and goes on through later segments until an
        entry's last stable offset reaches ``end_offset`` (no later transaction can overlap
        the range then).

        A segment's entries come from its ``.txnindex`` when that file can be trusted
        (:func:`~kafkafs.log.txnscan.txn_index_trusted`: written or rebuilt by this process,
        or present beside its indexes below :attr:`txn_recovery_point`); otherwise -- the
        file is missing, or Kafka's recovery would rebuild it -- they are computed from the
        segment's control batches as that recovery would write them, in memory, once per
        sealed segment (:class:`~kafkafs.log.txnscan.TxnScanner`; nothing is written).

        Returns :class:`~kafkafs.log.txnindex.AbortedTxn` tuples in marker order (empty when
        ``end_offset <= start_offset``). Transactions still ongoing are not included: bound
        reads by :attr:`last_stable_offset`. Raises CorruptIndexError naming a damaged
        ``.txnindex``, OSError; damage in the data stops the computation there quietly (a
        reader meets it where it lies)."""
        if end_offset <= start_offset:
            return []
        with self.lock:
            segs = self.segments()
            with_index = set(self._txn_index_bases)
            recovery_point = self.txn_recovery_point
            log_start = self.log_start_offset
            # the last segment is scanned as far as the log end offset says, as readers read
            log_end = (self._log_end_offset, segs[-1].size) if segs else None
        bases = [s.base_offset for s in segs]
        i = max(0, bisect.bisect_right(bases, start_offset) - 1)
        found: list[AbortedTxn] = []
        for k in range(i, len(segs)):
            seg = segs[k]
            present = seg.base_offset in with_index
            next_base = bases[k + 1] if k + 1 < len(bases) else None
            try:
                if txn_index_trusted(seg, present, next_base, recovery_point):
                    if not present:
                        continue  # written here: no file, no aborted transaction
                    result = seg.collect_aborted_txns(start_offset, end_offset)
                else:
                    result = self._txn_scan.collect(segs, k, start_offset, end_offset,
                                                    log_start, log_end)
            except (OSError, ValueError):
                if seg.closed:  # removed by retention under us
                    continue
                raise
            found.extend(result.aborted_txns)
            if result.is_complete:
                break
        return found

    def committed_filter(self, start_offset: int, end_offset: int) -> AbortedFilter:
        """An :class:`~kafkafs.log.isolation.AbortedFilter` of the transactions aborted in
        ``[start_offset, end_offset)`` (:meth:`aborted_txns`): what a ``read_committed``
        consumer skips. Read up to :attr:`last_stable_offset` with it."""
        return AbortedFilter(self.aborted_txns(start_offset, end_offset))

    def _list_txn_indexes(self) -> set[int]:
        """Base offsets of the segments whose ``.txnindex`` file exists."""
        try:
            names = self.pdir.files()
        except OSError:
            return set()
        return self._txn_indexes_in(names)

    def _txn_indexes_in(self, names) -> set[int]:
        """Base offsets of the segments whose ``.txnindex``, ``.index`` and ``.timeindex``
        are all among ``names`` (Kafka's loader recovers a segment without its offset index,
        rebuilding its ``.txnindex``: such a file is not the one a broker would use)."""
        names = set(names)
        out = set()
        for n in names:
            if not n.endswith(TXN_INDEX_SUFFIX):
                continue
            p = parse_segment_filename(n)
            if p and p[1] == TXN_INDEX_SUFFIX and p[2] == "" and p[0] in self._segments:
                prefix = n[:-len(TXN_INDEX_SUFFIX)]
                if prefix + INDEX_SUFFIX in names and prefix + TIME_INDEX_SUFFIX in names:
                    out.add(p[0])
        return out

    def take_producer_snapshot(self) -> str | None:
        """Write the producer state at the log end offset as ``<LEO>.snapshot``, fsynced
        (``UnifiedLog.takeProducerSnapshot``, what ``close`` does) unless one exists at that
        offset. Returns the path written or None; None on a read-only log. Raises OSError."""
        if not self.writable:
            return None
        with self.lock:
            return self.producer_state.take_snapshot()

    def remove_expired_producers(self, now: int, expiration_ms: int) -> list[int]:
        """Forget the producers idle for ``expiration_ms`` without an ongoing transaction
        (``UnifiedLog.removeExpiredProducers``, under the log's lock). Returns their ids."""
        with self.lock:
            return self.producer_state.remove_expired_producers(now, expiration_ms)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[self._bases[-1]]

    def segments(self) -> list[LogSegment]:
        """A snapshot of the segments, oldest first."""
        with self.lock:
            return [self._segments[b] for b in self._bases]

    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments())

    def _notify(self) -> None:
        for fn in list(self.on_change):
            try:
                fn(self)
            except Exception:  # a listener must never break the log
                log.exception("log change listener failed for %s", self.name)

    def _segment_floor(self, offset: int) -> LogSegment | None:
        i = bisect.bisect_right(self._bases, offset) - 1
        if i < 0:
            return None
        return self._segments[self._bases[i]]

    def segment_after(self, offset: int, inclusive: bool = False
                      ) -> tuple[LogSegment | None, int | None]:
        """``(segment, next segment's base offset or None)``: the segment holding ``offset``
        (``inclusive``: the floor segment, Kafka ``floorSegment``) or the first one based
        past it (Kafka ``higherSegment``); ``(None, None)`` when there is none. One lookup
        under the lock: no copy of the segment list."""
        with self.lock:
            bases = self._bases
            i = bisect.bisect_right(bases, offset) - 1 if inclusive else \
                bisect.bisect_right(bases, offset)
            if i < 0 or i >= len(bases):
                return None, None
            return self._segments[bases[i]], bases[i + 1] if i + 1 < len(bases) else None

    # -- appending -------------------------------------------------------------------
    # Kafka's append surface (UnifiedLog.appendAsLeader): encoded batches in, offsets
    # assigned from the log end offset. What the batches hold (lines, keys, how a producer
    # cuts them) is the caller's: the mount's append file (kafkafs.fs.append), produce,
    # Spark's staged runs (kafkafs.log.staging). docs/design.md §4.1, §4.2.
    def encoding(self, compression: int | None = None) -> tuple[int, int]:
        """``(codec, timestamp_type)`` of the batches this log encodes (:meth:`encode`):
        the codec id of ``compression.type`` (none for ``producer``) unless ``compression``
        names one, and LOG_APPEND_TIME or CREATE_TIME by ``message.timestamp.type``."""
        if compression is None:
            ct = self.config.compression_type
            compression = codecs.NONE if ct in ("producer", "none") else codecs.codec_id(ct)
        ts_type = LOG_APPEND_TIME if self.config.message_timestamp_type == "LogAppendTime" \
            else CREATE_TIME
        return compression, ts_type

    def encode(self, records: Sequence[tuple], *, compression: int | None = None) -> bytes:
        """Encode ``records`` ((timestamp_ms, key, value, headers) tuples) as one batch the
        way this log stores it (:meth:`encoding`), with base offset 0 (stamped at append).
        Raises RecordTooLargeError over ``max.message.bytes``."""
        codec, ts_type = self.encoding(compression)
        if ts_type == LOG_APPEND_TIME:
            data = encode_batch(records, compression=codec, timestamp_type=ts_type,
                                log_append_time=now_ms())
        else:
            data = encode_batch(records, compression=codec, timestamp_type=ts_type)
        if len(data) > self.config.max_message_bytes:
            raise RecordTooLargeError(
                f"The record batch size {len(data)} bytes is larger than max.message.bytes "
                f"({self.config.max_message_bytes}) of {self.name}")
        return data

    def append(self, records: Sequence[tuple], *, compression: int | None = None) -> tuple[int, int]:
        """Append ``records`` ((timestamp_ms, key, value, headers) tuples) as one batch.

        Returns ``(first_offset, last_offset)``. Raises RecordTooLargeError (nothing
        appended), OSError such as ENOSPC (nothing appended), ReadOnlyLogError.
        """
        if not records:
            raise ValueError("nothing to append")
        return self.append_encoded(bytearray(self.encode(records, compression=compression)))

    def append_encoded_run(self, batches) -> int:
        """Append encoded v2 batches without a producer id (re-stamped with consecutive
        offsets from the log end offset), as :meth:`append_encoded` would one by one --
        same rolls, index entries and checks -- but with one write per segment and one
        index update pass. ``batches``: a sequence of batches (bytes-like, writable), or
        one bytearray holding them back to back (Kafka's ``MemoryRecords``; what
        :func:`kafkafs.record.fast.encode_text_batches` returns). Returns how many were
        appended: all of them, or, when an error (OSError such as ENOSPC,
        RecordTooLargeError, InvalidRecordError) meets a later one, those before it; the
        error is raised when it meets the first. A batch with a producer id goes through
        :meth:`append_encoded`. Raises CorruptRecordError for bytes that are not whole v2
        batches (nothing appended), ReadOnlyLogError."""
        if not self.writable:
            raise ReadOnlyLogError(f"{self.name} is read-only")
        if isinstance(batches, (bytearray, memoryview)):
            buf = memoryview(batches)
        elif len(batches) == 1:
            buf = memoryview(batches[0])
        else:
            buf = memoryview(bytearray().join(batches))
        headers = _run_headers(buf)
        done = 0
        with self.lock:
            try:
                while done < len(headers):
                    done += self._append_run(buf, headers, done)
            except (LogError, OSError):
                if done == 0:
                    raise
            finally:
                if done:
                    self._notify()
        return done

    def _append_run(self, buf: memoryview, headers: Sequence[tuple], first: int) -> int:
        """Write the batches ``headers[first:]`` (:func:`_run_headers`) of ``buf`` up to the
        next roll into the active segment (after rolling it when the first one needs
        that), with one write. Returns the count written."""
        if self.closed:
            raise ReadOnlyLogError(f"{self.name} is closed")
        base = self._log_end_offset
        max_bytes = self.config.max_message_bytes
        compact = self.config.compact
        count = pending = records = 0
        segment = None
        room = latest = last_offset = index_room = 0
        for pos, size, h in headers[first:]:
            if h[_PRODUCER_ID] >= 0:
                if count:
                    break
                self.append_encoded(buf[pos:pos + size])
                return 1
            if size > max_bytes or compact:
                try:
                    self._check_batch(RecordBatch.from_buffer(buf, pos))
                except (RecordTooLargeError, InvalidRecordError):
                    if count:
                        break  # those before it go in; the next call meets the error
                    raise
            last = base + h[_LAST_OFFSET_DELTA]
            max_ts = h[_MAX_TIMESTAMP]
            if segment is None:
                segment = self._maybe_roll(size, max_ts, last)
                # should_roll of each later batch, as limits found once for the run
                room, latest, last_offset = segment.roll_limits(
                    now_ms(), self.config.segment_jitter_ms,
                    max_ts if segment.size == 0 else None)
                index_room = segment.index_room()
            elif pending + size > room or max_ts > latest or last > last_offset or \
                    count >= index_room:
                break
            set_base_offset(buf[pos:pos + 8], base)
            count += 1
            pending += size
            records += h[_RECORDS_COUNT]
            base = last + 1
        start = headers[first][0]
        segment.append(buf[start:start + pending])
        self._log_end_offset = base
        self.unflushed_messages += records
        self.producer_state.update_map_end_offset(base)
        return count

    def append_encoded(self, batch: bytearray) -> tuple[int, int]:
        """Append one encoded v2 batch (any base offset; it is re-stamped with the log end
        offset). Returns ``(first_offset, last_offset)``.

        A batch with a producer id (idempotent, transactional, or a COMMIT/ABORT marker
        batch) updates the producer state as Kafka's ``UnifiedLog.append`` does (replication
        origin: sequences and epochs are not validated); an ABORT that ends a transaction
        adds its entry to the active segment's ``.txnindex``. Raises RecordTooLargeError,
        ReadOnlyLogError, InvalidTxnStateError (a non-transactional batch from a producer
        inside a transaction), CorruptRecordError (a control batch with producer id that
        is not a COMMIT/ABORT marker) and InvalidRecordError (a record without a key on a
        compacted topic) with nothing appended; OSError from the write."""
        if not self.writable:
            raise ReadOnlyLogError(f"{self.name} is read-only")
        header = RecordBatch.from_buffer(batch)
        self._check_batch(header)
        with self.lock:
            if self.closed:
                raise ReadOnlyLogError(f"{self.name} is closed")
            has_producer = header.producer_id >= 0
            if has_producer:
                self._check_producer_batch(header)
            base = self._log_end_offset
            last = base + header.last_offset_delta
            set_base_offset(batch, base)
            max_ts = header.max_timestamp
            segment = self._maybe_roll(header.size, max_ts, last)
            segment.append(header.buffer)
            self._log_end_offset = last + 1
            self.unflushed_messages += header.records_count
            try:
                if has_producer:
                    # as UnifiedLog.append: the log end offset moved first; an error from the
                    # transaction index propagates and recovery cleans the index up
                    header.base_offset = base
                    if self.producer_state.update(header, segment.txn_index) is not None:
                        self._txn_index_bases.add(segment.base_offset)
                    self._update_first_unstable_offset()
                else:
                    self.producer_state.update_map_end_offset(last + 1)
            finally:
                self._notify()
        return base, last

    def _check_batch(self, header: RecordBatch) -> None:
        """Refuse, before anything is written, a batch over ``max.message.bytes``
        (RecordTooLargeError) or, on a compacted topic, holding a record without a key
        (InvalidRecordError)."""
        if header.size > self.config.max_message_bytes:
            raise RecordTooLargeError(
                f"The record batch size {header.size} bytes is larger than max.message.bytes "
                f"({self.config.max_message_bytes}) of {self.name}")
        if self.config.compact and not header.is_control:
            self._check_keys(header)

    def _check_keys(self, header: RecordBatch) -> None:
        """Refuse a batch holding a record without a key on a compacted topic (Kafka
        ``LogValidator.validateKey``): InvalidRecordError, nothing appended."""
        payload, _exact = header.payload()
        if null_key_index(payload, header.records_count) >= 0:
            raise InvalidRecordError(
                f"Compacted topic cannot accept message without key in topic partition "
                f"{self.name}.")

    def _check_producer_batch(self, header: RecordBatch) -> None:
        """Refuse, before anything is written, a batch the producer state would refuse
        (``ProducerAppendInfo``, replication origin: no sequence or epoch checks): a
        non-transactional batch from a producer inside a transaction (InvalidTxnStateError),
        a control batch whose first record is not a COMMIT/ABORT marker
        (CorruptRecordError)."""
        if header.is_control:
            records = header.record_tuples()
            if records:
                end_txn_marker(records[0][2], records[0][3])
            return
        entry = self.producer_state.last_entry(header.producer_id)
        if entry is not None and entry.current_txn_first_offset is not None \
                and not header.is_transactional:
            raise InvalidTxnStateError(
                f"Expected transactional write from producer {header.producer_id} in "
                f"{self.name}: its transaction started at offset "
                f"{entry.current_txn_first_offset} is still ongoing")

    def _maybe_roll(self, incoming: int, max_timestamp: int, max_offset: int) -> LogSegment:
        seg = self.active_segment
        if seg.should_roll(incoming, max_timestamp, max_offset, now_ms(),
                           self.config.segment_jitter_ms):
            return self.roll()
        return seg

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset (``UnifiedLog.roll``); the old one
        gets its final time index entry and trimmed indexes, and a producer snapshot is
        written at the new base offset (fsynced by the next :meth:`flush`; a failure to write
        it is logged, the roll goes on). Files already at the new base offset are deleted
        first, as Kafka does ("Newly rolled segment file ... already exists; deleting it
        first": they lie past the log end). Returns the new segment (or the current one when
        it is empty and already at the log end offset).

        A roll that fails (EMFILE, ENOSPC, ...) is undone before the error propagates: the
        new segment's files are removed and the old segment stays active, its indexes grown
        back, so the next append rolls again."""
        with self.lock:
            active = self.active_segment
            new_base = self._log_end_offset
            if active.base_offset == new_base:
                if active.size == 0:
                    return active
                raise RuntimeError(f"cannot roll {self.name}: segment {new_base} exists")
            self._remove_segment_files(new_base, stale=True)
            segment = None
            try:
                segment = LogSegment(self.pdir, new_base, self.config, create=True)
                segment.open_indexes()
                active.on_become_inactive()
            except BaseException as exc:
                self._undo_roll(active, segment, new_base, exc)
                raise
            self._bases.append(new_base)
            self._segments[new_base] = segment
            # UnifiedLog.roll: a snapshot at the new segment's base offset, so that recovering
            # the segment can start from it; fsynced by the next flush, not under the lock
            self.producer_state.update_map_end_offset(new_base)
            try:
                path = self.producer_state.take_snapshot(sync=False)
            except OSError as exc:
                log.warning("Cannot write the producer snapshot of %s at offset %d: %s",
                            self.name, new_base, exc)
            else:
                if path is not None:
                    self._unsynced_snapshots.append(path)
            self._notify()
            return segment

    def _remove_segment_files(self, base: int, stale: bool = False) -> None:
        """Remove the ``.log``, ``.index``, ``.timeindex`` and ``.txnindex`` named ``base``
        (not part of the log: past its end); ``stale``: say so for each one found."""
        prefix = filename_prefix(base)
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            if self.pdir.unlink(prefix + suffix) and stale:
                log.warning("Newly rolled segment file %s already exists; deleting it first",
                            self.pdir.join(prefix + suffix))

    def _undo_roll(self, active: LogSegment, segment: LogSegment | None, new_base: int,
                   exc: BaseException) -> None:
        """After a roll failed with ``exc``: remove what it created at ``new_base`` and give
        ``active``, which stays the active segment, its preallocated indexes back. Best
        effort: what cannot be undone now (a descriptor still missing) is met again, and
        done, by the next roll (stale files are deleted first, a trimmed index makes the
        next append roll)."""
        log.error("Cannot roll %s to a new segment at offset %d: %s; segment %d stays the "
                  "active one", self.name, new_base, exc, active.base_offset)
        if segment is not None:
            try:
                segment.close()
            except Exception as undo:  # noqa: BLE001 - its files go below anyway
                log.debug("%s: closing the failed segment %d: %s", self.name, new_base, undo)
        try:
            self._remove_segment_files(new_base)
        except OSError as undo:
            log.warning("%s: cannot remove the files of the failed roll yet (%s): the next "
                        "roll deletes them", self.name, undo)
        size = self.config.segment_index_bytes
        try:
            for idx in (active.index, active.time_index):
                if idx.length < size:
                    idx.resize(size)
        except (OSError, LogError) as undo:
            log.warning("%s: cannot grow the indexes of segment %d back yet (%s): the next "
                        "append rolls again", self.name, active.base_offset, undo)

    # -- flushing --------------------------------------------------------------------
    def flush(self, up_to: int | None = None) -> None:
        """fsync every segment holding offsets in [recovery point, ``up_to``) (default the
        log end offset) and the producer snapshots written by rolls since the last flush, and
        advance the recovery point (``UnifiedLog.flush``). Called from a worker thread by the
        daemon: the lock is held only to snapshot state."""
        with self.lock:
            target = self._log_end_offset if up_to is None else min(up_to, self._log_end_offset)
            if target <= self.recovery_point:
                return
            segs = [s for s in self.segments()
                    if s.base_offset < target and self._segment_end(s) > self.recovery_point]
            unflushed = self.unflushed_messages
            snapshots, self._unsynced_snapshots = self._unsynced_snapshots, []
        for s in segs:
            s.flush()
        try:
            for path in snapshots:
                fsync_snapshot(path, dir=self.pdir)
        except OSError:
            with self.lock:
                self._unsynced_snapshots[:0] = snapshots
            raise
        try:
            self.pdir.fsync()
        except OSError:
            pass
        with self.lock:
            self.recovery_point = max(self.recovery_point, target)
            self.unflushed_messages = max(0, self.unflushed_messages - unflushed)
            self.last_flush_ms = now_ms()

    def _segment_end(self, seg: LogSegment) -> int:
        i = self._bases.index(seg.base_offset)
        return self._bases[i + 1] if i + 1 < len(self._bases) else self._log_end_offset

    def needs_flush(self, now: int) -> bool:
        """Whether the flush policy asks for a flush now: ``flush.messages`` unflushed
        records, or ``flush.ms`` passed since the last flush with data unflushed. The caller
        runs :meth:`flush` (off the event loop)."""
        if self.recovery_point >= self._log_end_offset:
            return False
        return (self.unflushed_messages >= self.config.flush_messages
                or now - self.last_flush_ms >= self.config.flush_ms)

    # -- reading ---------------------------------------------------------------------
    def check_offset(self, offset: int) -> None:
        if not self.log_start_offset <= offset < self._log_end_offset:
            raise OffsetOutOfRangeError(
                f"Offset {offset} is out of range for {self.name}: log start offset "
                f"{self.log_start_offset}, log end offset {self._log_end_offset}")

    def segment_path(self, offset: int) -> str | None:
        """The ``.log`` path of the segment that holds ``offset`` (for error messages)."""
        with self.lock:
            seg = self._segment_floor(offset)
        return seg.log_path if seg is not None else None

    def end_position(self) -> tuple[int, int, int]:
        """``(log end offset, base offset of the active segment, its size in bytes)``, taken
        together under the log's lock: the active segment's bytes before that size hold
        exactly its offsets before that log end offset (a reader that measured up to a
        batch boundary there may take the rest in one pass)."""
        with self.lock:
            active = self.active_segment
            return self._log_end_offset, active.base_offset, active.size

    def segment_at(self, base_offset: int) -> LogSegment | None:
        """The live segment with this base offset, None if retention removed it."""
        with self.lock:
            return self._segments.get(base_offset)

    def segment_batches(self, start_offset: int | None = None, validate: bool = True
                        ) -> Iterator[tuple[LogSegment, RecordBatch]]:
        """Yield ``(segment, batch)`` for batches holding offsets >= ``start_offset``
        (default: log start), in order across segments, up to the log end offset as it
        stands when the call starts. Segments removed by retention meanwhile end the
        iteration early. Each batch's CRC is checked unless ``validate`` is False (as a
        Kafka consumer's ``check.crcs``). The walk goes through :meth:`read`, one segment's
        range at a time (the one read path, :mod:`kafkafs.log.read`).

        Raises CorruptRecordError, naming the file and position, at the first damage: a bad
        batch (with ``validate``, a control batch whose records do not decode too), zeros
        followed by data, an incomplete batch at the end of a segment that is not the last
        (at the end of the last one it is a torn write and ends the iteration quietly),
        offsets that do not strictly increase from batch to batch, within a segment and
        across segments, or that reach into the next segment
        (:func:`~kafkafs.log.segment.check_batch_order`), and a batch reaching the log end
        offset before the last one. Every batch before the damage has been yielded."""
        with self.lock:
            end = self._log_end_offset
            start = self.log_start_offset if start_offset is None else \
                max(start_offset, self.log_start_offset)
            active = self.active_segment
            active_size = active.size
        offset, expected = start, None
        seg, reached = None, 0
        while offset < end:
            try:
                info = self.read(offset, _WHOLE_SEGMENT)
            except OffsetOutOfRangeError:
                return  # the log start offset moved past it meanwhile (retention)
            except (OSError, ValueError):
                floor, _next = self.segment_after(offset, inclusive=True)
                if floor is None or floor.closed:  # removed by retention under us
                    return
                raise
            if info.empty:
                seg = None  # nothing readable from ``offset`` on: see below
                break
            seg, last_one = info.segment, info.next_base is None
            range_end = info.position + info.size
            reached, seg_next = info.position, offset
            try:
                for batch in info.batches(validate=validate,
                                          strict_end=not last_one and range_end >= seg.size):
                    if batch.base_offset >= end:
                        return  # appended since the walk began
                    # the log end offset is where the last segment's last batch ends: a
                    # batch before it that reaches that far contradicts it
                    check_batch_order(batch, expected, seg.base_offset, seg.log_path,
                                      info.next_base, end)
                    expected = seg_next = batch.next_offset
                    reached = batch.position + batch.size
                    if batch.last_offset < start:
                        continue
                    if validate and batch.is_control:
                        batch.check_records()  # no reader shows them, but they must decode
                    yield seg, batch
            except (OSError, ValueError):
                if seg.closed:  # removed by retention under us
                    return
                raise
            if last_one:
                break  # (the last segment: what it holds ends the walk)
            # a sealed segment read to its end (a zero tail stops the range early): the
            # next one, past offsets compacted away at its end
            offset = max(seg_next, info.next_base)
        if offset >= end or seg is None:
            # a segment based at or past the end is still looked into: its first batch either
            # starts at or past the end (appended since) or is damage that kept the log end
            # offset from reaching into it
            if active.base_offset >= end and active_size > 0 and (
                    seg is None or active.base_offset > seg.base_offset):
                try:
                    for batch in active.batches(0, active_size, validate=validate):
                        check_batch_order(batch, expected, active.base_offset,
                                          active.log_path, None, end)
                except (OSError, ValueError):
                    if active.closed:
                        return
                    raise
            if offset >= end:
                return
        if seg is None or expected is None or expected < end:
            # the last segment's bytes end (an incomplete batch, zeros) before the log end
            # offset its tail gave (or nothing is readable from ``offset`` on): what lies
            # between cannot be read
            at = offset if seg is None or expected is None else expected
            raise CorruptRecordError(
                f"the data ends before the log end offset {end} (an incomplete or "
                f"unreadable batch where offset {at} should start)",
                path=(active if seg is None else seg).log_path,
                position=0 if seg is None else reached)

    def batches(self, start_offset: int | None = None, validate: bool = True
                ) -> Iterator[RecordBatch]:
        """Like :meth:`segment_batches`, batches only."""
        for _seg, batch in self.segment_batches(start_offset, validate):
            yield batch

    def records(self, start_offset: int | None = None, end_offset: int | None = None,
                include_control: bool = False) -> Iterator[Record]:
        """Every record with ``start_offset <= offset < end_offset`` in order (control batches
        skipped unless ``include_control``)."""
        start = self.log_start_offset if start_offset is None else start_offset
        for batch in self.batches(start):
            if batch.is_control and not include_control:
                continue
            for r in batch.records():
                if r.offset < start:
                    continue
                if end_offset is not None and r.offset >= end_offset:
                    return
                yield r

    def read(self, start_offset: int, max_bytes: int, isolation: str = FETCH_LOG_END,
             min_one_message: bool = True) -> FetchDataInfo:
        """A byte range of one segment from the batch holding ``start_offset``, at most
        ``max_bytes`` long and bounded by ``isolation``'s maximum offset (Kafka
        ``UnifiedLog.read``): see :mod:`kafkafs.log.read`. Raises OffsetOutOfRangeError,
        ValueError, CorruptRecordError, OSError."""
        return read_log(self, start_offset, max_bytes, isolation, min_one_message)

    def read_record(self, offset: int) -> Record | None:
        """The record at exactly ``offset``; None when the offset is inside the log but holds
        no record (compacted away, or a control record). Raises OffsetOutOfRangeError,
        CorruptRecordError."""
        batch = self.batch_for(offset)
        if batch is None or batch.is_control:
            return None
        for r in batch.records():
            if r.offset == offset:
                return r
        return None

    def batch_for(self, offset: int) -> RecordBatch | None:
        """The batch containing ``offset`` (None if none does), its CRC checked; batches
        whose offsets are out of place are stepped over on the way (see
        :meth:`LogSegment.translate_offset`). Raises OffsetOutOfRangeError,
        CorruptRecordError (naming file and position)."""
        self.check_offset(offset)
        with self.lock:
            seg = self._segment_floor(offset)
            i = bisect.bisect_right(self._bases, offset)
            limit = self._bases[i] if i < len(self._bases) else self._log_end_offset
        if seg is None:
            return None
        # a record of an intact batch answers even after a batch whose offsets are out of
        # place (it is stepped over); framing damage before it is still an error
        batch = seg.translate_offset(offset, limit=limit, skip_damaged=True)
        if batch is None or batch.base_offset > offset:
            return None
        try:
            batch.ensure_valid()
        except CorruptRecordError as exc:
            raise exc.located(path=seg.log_path) from None
        return batch

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """Kafka ListOffsets: ``-2`` → (log start offset, -1), ``-1`` → (log end offset, -1),
        ``-3`` → :meth:`max_timestamp_and_offset`, otherwise ``(offset, timestamp)`` of the first record with timestamp >= ``timestamp``,
        or None when there is none (``UnifiedLog.fetchOffsetByTimestamp``)."""
        if timestamp == EARLIEST_TIMESTAMP:
            return self.log_start_offset, -1
        if timestamp == LATEST_TIMESTAMP:
            return self._log_end_offset, -1
        if timestamp == MAX_TIMESTAMP:
            return self.max_timestamp_and_offset()
        with self.lock:
            segs = self.segments()
            start = self.log_start_offset
            end = self._log_end_offset
            last_size = segs[-1].size if segs else 0  # the bytes the log end offset covers
        # the first segment whose largest timestamp reaches the target (segments are not
        # ordered by timestamp under CreateTime, so test each in turn)
        for i, seg in enumerate(segs):
            if i + 1 < len(segs) and segs[i + 1].base_offset <= start:
                continue  # wholly below the log start offset: not part of the log
            # a sealed segment's time index is complete; the active one's may lag (a log
            # read beside its writer), so it is always scanned, and so is one whose bytes
            # after the index could not all be read (the damage is met there, as by readers)
            if seg is not segs[-1] and seg.time_index.entries and \
                    seg.max_timestamp_so_far < timestamp and seg.max_timestamp_covers_segment:
                continue
            # batches are judged as every reader judges them (segment_batches)
            sealed = i + 1 < len(segs)
            found = seg.find_offset_by_timestamp(
                timestamp, start, next_base=segs[i + 1].base_offset if sealed else None,
                end=end, end_position=None if sealed else last_size)
            if found is not None:
                return found
        return None

    def max_timestamp_and_offset(self) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the record with the largest timestamp (ListOffsets
        ``-3``, KIP-734; ``UnifiedLog.fetchOffsetByTimestamp`` with ``MAX_TIMESTAMP``): the
        first segment holding the largest ``maxTimestampSoFar``, in it the first batch whose
        max timestamp it is, in that batch the first record with that timestamp (Kafka
        3.8's ``offsetOfMaxTimestamp``; a legacy batch: its last offset). None when no record
        has a timestamp. Raises CorruptRecordError at damage met on the way."""
        best = None
        for seg in self.segments():
            ts = seg.max_timestamp_so_far
            if ts >= 0 and (best is None or ts > best[1]):
                best = (seg, ts)
        if best is None:
            return None
        seg, ts = best
        offset = seg.offset_of_max_timestamp_so_far
        first = seg.translate_offset(offset)
        if first is None:
            return offset, ts
        for batch in seg.batches(first.position):
            if batch.max_timestamp != ts:
                continue
            if batch.magic >= 2:
                for record in batch.records():
                    if record.timestamp == ts:
                        return record.offset, ts
            return batch.last_offset, ts
        return offset, ts

    # -- retention -------------------------------------------------------------------
    def increment_log_start_offset(self, new_offset: int) -> int:
        """Move the log start offset up to ``new_offset`` (Kafka
        ``UnifiedLog.maybeIncrementLogStartOffset``, what DeleteRecords does): records below
        it are gone for every reader at once, and the segments wholly below it go with the
        next retention pass (:meth:`delete_old_segments`). An offset at or below the log
        start offset changes nothing. Returns the log start offset. Raises
        OffsetOutOfRangeError for an offset above the high watermark (the log end offset),
        ReadOnlyLogError."""
        if not self.writable:
            raise ReadOnlyLogError(f"{self.name} is read-only")
        with self.lock:
            if new_offset > self._log_end_offset:
                raise OffsetOutOfRangeError(
                    f"Cannot increment the log start offset to {new_offset} of partition "
                    f"{self.name} since it is larger than the high watermark "
                    f"{self._log_end_offset}")
            if new_offset <= self.log_start_offset:
                return self.log_start_offset
            self.log_start_offset = new_offset
            self.recovery_point = max(self.recovery_point, new_offset)
            self.producer_state.on_log_start_offset_incremented(new_offset)
            self._update_first_unstable_offset()
            start = self.log_start_offset
        log.info("Incremented the log start offset of %s to %d (records deleted)", self.name,
                 start)
        self._notify()  # outside the lock (see the class docstring)
        return start

    def delete_old_segments(self, now: int | None = None) -> int:
        """Apply retention (``UnifiedLog.deleteOldSegments``): whole segments from the oldest
        that are past ``retention.ms`` (by largest timestamp), beyond ``retention.bytes``, or
        entirely below the log start offset. Never the active segment. Deleted segments are
        renamed ``.deleted`` (their ``.txnindex`` and the producer snapshot at their base
        offset too) and removed after ``file.delete.delay.ms`` (``deleteSegmentFiles``,
        ``deleteProducerSnapshots``); other producer snapshots below the new log start
        offset are deleted at once. Returns the count.

        Under :attr:`lock` only the segment map, the log start offset and the producer
        state change (as ``LocalLog.removeAndDeleteSegments`` with an asynchronous delete);
        the segments are chosen before it (their largest timestamps may need a look at their
        files) and renamed after it, under the log's file lock alone, so an append waits for
        none of it (``docs/design.md §6.4``). Readers holding a removed segment read on: its
        files stay open until removed. Raises OSError from a rename once the log has changed
        (the segment is removed with whatever name it has when due; a crash before that
        leaves its files to the next load, below the checkpointed log start offset)."""
        if not self.writable:
            return 0
        now = now_ms() if now is None else now
        taken: list[LogSegment] = []
        try:
            with self._file_lock:
                self._delete_old_segments(now, taken)
        finally:
            if taken:
                self._notify()  # outside the locks (see the class docstring)
        return len(taken)

    def _delete_old_segments(self, now: int, taken: list[LogSegment]) -> None:
        """(under ``_file_lock``) :meth:`delete_old_segments`; the segments taken out of
        the log are added to ``taken`` as soon as they are (before their renames)."""
        with self.lock:
            segs = self.segments()
            log_start = self.log_start_offset
        chosen = self._deletable_segments(segs, log_start, now)  # (file reads: no lock)
        if not chosen:
            return
        snapshots: list[str] = []  # of the deleted segments: renamed .deleted
        older: list[str] = []  # other snapshots below the new log start offset
        with self.lock:
            bases = [s.base_offset for s in chosen]
            if self.closed or self._bases[:len(bases)] != bases or \
                    len(self._bases) <= len(bases) or \
                    any(self._segments[s.base_offset] is not s for s in chosen):
                return  # changed meanwhile (an adoption below it): the next check
            for seg in chosen:
                del self._segments[seg.base_offset]
                self._txn_index_bases.discard(seg.base_offset)
            del self._bases[:len(chosen)]
            self._doomed.extend(chosen)
            self.log_start_offset = max(self.log_start_offset, self._bases[0])
            self.recovery_point = max(self.recovery_point, self.log_start_offset)
            pm = self.producer_state
            # its snapshot goes with it, after the same delay (deleteProducerSnapshots)
            snapshots = [p for p in map(pm.forget_snapshot,
                                        (s.base_offset for s in chosen)) if p]
            # maybeIncrementLogStartOffset + deleteSnapshotsBefore
            pm.on_log_start_offset_incremented(self.log_start_offset)
            older = [p for p in map(pm.forget_snapshot,
                                    [o for o in pm.snapshot_offsets()
                                     if o < self.log_start_offset]) if p]
            self._update_first_unstable_offset()
            start = self.log_start_offset
            taken.extend(chosen)
        try:
            self._retire_files(chosen, snapshots, now + self.config.file_delete_delay_ms)
            for path in older:
                self.pdir.unlink(os.path.basename(path))
        finally:
            log.info("Deleted %d segment(s) of %s by retention; log start offset is now %d",
                     len(chosen), self.name, start)

    def _deletable_segments(self, segs: Sequence[LogSegment], log_start: int,
                            now: int) -> list[LogSegment]:
        """The segments retention deletes, oldest first, of ``segs`` (the log's segments
        when it starts, the active one last, never chosen) and the log start offset
        ``log_start``: a segment goes when the next one starts at or below the log start
        offset, or it is past ``retention.ms`` (by its largest timestamp) or beyond
        ``retention.bytes`` (``UnifiedLog.deletableSegments``); the first that does not
        ends the list. Reads segment files (timestamps): called without :attr:`lock`."""
        cfg = self.config
        deletable: list[LogSegment] = []
        total = sum(s.size for s in segs)
        size_excess = total - cfg.retention_bytes if cfg.retention_bytes >= 0 else -1
        for i, seg in enumerate(segs[:-1]):
            by_start = segs[i + 1].base_offset <= log_start
            by_time = cfg.delete and cfg.retention_ms >= 0 and \
                now - seg.largest_timestamp() > cfg.retention_ms
            by_size = cfg.delete and size_excess >= 0 and size_excess - seg.size >= 0
            if not (by_start or by_time or by_size):
                break
            if by_size:
                size_excess -= seg.size
            deletable.append(seg)
        return deletable

    def _retire_files(self, segs: Sequence[LogSegment], snapshots: Sequence[str],
                      due: int) -> None:
        """(under ``_file_lock``, not :attr:`lock`) Rename the files of ``segs``, already out
        of the segment map, and the producer snapshot files ``snapshots`` ``.deleted``
        (lowest first) and queue the segments for removal at ``due`` (ms;
        :meth:`remove_deleted_segments`). A segment whose rename fails is queued all the
        same (its files are then removed by the names they have); the first error is raised
        once every segment is queued."""
        error: OSError | None = None
        for seg in segs:
            self.pending_deletes.append((due, seg))
            try:
                seg.mark_deleted()
            except OSError as exc:
                log.warning("Cannot rename %r of %s .deleted: %s", seg, self.name, exc)
                error = error or exc
        for path in snapshots:
            try:
                mark_snapshot_file_deleted(self.pdir, path)
            except OSError as exc:
                error = error or exc
        if error is not None:
            raise error

    def remove_deleted_segments(self, now: int | None = None, force: bool = False) -> int:
        """Remove the files of ``.deleted`` segments whose delay has passed (under the log's
        file lock, not :attr:`lock`). Returns the count."""
        now = now_ms() if now is None else now
        with self._file_lock:
            due = [(t, s) for t, s in self.pending_deletes if force or t <= now]
            if not due:
                return 0
            self.pending_deletes = [(t, s) for t, s in self.pending_deletes
                                    if not (force or t <= now)]
            try:
                for _t, seg in due:
                    seg.delete()
            finally:
                self._forget_doomed([s for _t, s in due])
        return len(due)

    def _forget_doomed(self, segs: Sequence[LogSegment]) -> None:
        """(files removed) ``segs`` may be adopted again should a file of that name appear."""
        with self.lock:
            gone = {id(s) for s in segs}
            self._doomed = [s for s in self._doomed if id(s) not in gone]

    # -- cleaning --------------------------------------------------------------------
    def replace_segments(self, new_segments: Sequence[LogSegment],
                         old_segments: Sequence[LogSegment]) -> None:
        """Swap cleaned segments in for the segments they replace (Kafka
        ``UnifiedLog.replaceSegments`` / ``LocalLog.replaceSegments``), crash-safe:

        1. every new segment's files (written as ``<name>.cleaned``, flushed) are renamed
           ``.swap``, the highest base offset first -- from here on the load completes the
           swap (:mod:`kafkafs.log.loader`): before, it deletes the ``.cleaned`` files;
        2. the segment map is updated (under :attr:`lock`);
        3. the old segments are renamed ``.deleted`` (lowest first), their producer
           snapshots too when no new segment takes their base offset
           (``deleteProducerSnapshots``), and are removed after ``file.delete.delay.ms``
           (:attr:`pending_deletes`): readers that hold them read on meanwhile;
        4. the ``.swap`` suffix is removed (lowest first) and the directory fsynced.

        Only step 2 holds :attr:`lock`: an append waits for no rename or fsync
        (``docs/design.md §6.4``). The steps keep their order on disk, under the log's
        file lock, which retention, truncation and close take too; between steps 2 and 4
        the new segments are read through their open files (a reopen follows the renames,
        each made with the ``.log`` leased open) and an old segment whose name is still
        live is never adopted back (:meth:`adopt_segment`).

        ``new_segments``: :class:`LogSegment` objects of the cleaned files (suffix
        ``.cleaned``), the first with the base offset of the first old segment, all of them
        within the old segments' range; ``old_segments``: consecutive live segments of this
        log, never the active one. Listeners in :attr:`on_change` are called once the lock
        is released.

        Raises LogCleaningAbortedError, with nothing changed, when the log is closed or an
        old segment is no longer live here (retention, truncation or deletion ran meanwhile)
        or another segment appeared in the range; ValueError for segments that cannot
        replace each other; ReadOnlyLogError; OSError from a rename (when step 1 failed,
        the ``.swap`` files are renamed back; after it, the in-memory swap stands and the
        next load completes the one on disk)."""
        if not self.writable:
            raise ReadOnlyLogError(f"{self.name} is read-only")
        new = sorted(new_segments, key=lambda s: s.base_offset)
        old = sorted(old_segments, key=lambda s: s.base_offset)
        if not new or not old:
            raise ValueError("replace_segments needs new and old segments")
        lo, hi = old[0].base_offset, old[-1].base_offset
        new_bases = [s.base_offset for s in new]
        if new_bases[0] != lo or new_bases[-1] > hi or len(set(new_bases)) != len(new):
            raise ValueError(f"segments {new_bases} cannot replace segments "
                             f"{[s.base_offset for s in old]} of {self.name}")
        replaced = set(new_bases)
        with self._file_lock:
            with self.lock:
                self._check_replaceable(old, lo, hi)
            done: list[LogSegment] = []
            try:
                for seg in reversed(new):  # step 1
                    seg.rename_suffix(SWAP_SUFFIX)
                    done.append(seg)
                with_txn = {s.base_offset for s in new if s.txn_index.exists()}
                with self.lock:  # step 2: the swap is decided
                    # (retention, truncation and close wait for the file lock: only an
                    # adoption into a gap of the range could have come in meanwhile)
                    self._check_replaceable(old, lo, hi)
                    for seg in old:
                        del self._segments[seg.base_offset]
                        self._txn_index_bases.discard(seg.base_offset)
                    for seg in new:
                        self._segments[seg.base_offset] = seg
                    self._txn_index_bases |= with_txn
                    self._bases = sorted(self._segments)
                    self._doomed.extend(old)
                    snapshots = [p for p in map(self.producer_state.forget_snapshot,
                                                (s.base_offset for s in old
                                                 if s.base_offset not in replaced)) if p]
            except BaseException:
                for seg in done:
                    try:
                        seg.rename_suffix(CLEANED_SUFFIX)
                    except OSError:
                        pass
                raise
            try:  # steps 3 and 4, outside self.lock
                self._retire_files(old, snapshots,
                                   now_ms() + self.config.file_delete_delay_ms)
                for seg in new:
                    seg.rename_suffix("")
                self.pdir.fsync()
            finally:
                log.info("Swapped %d cleaned segment(s) %s into %s for %d segment(s) [%d, %d]",
                         len(new), new_bases, self.name, len(old), lo, hi)
        self._notify()  # outside the locks (see the class docstring)

    def _check_replaceable(self, old: Sequence[LogSegment], lo: int, hi: int) -> None:
        """(under :attr:`lock`) Refuse a swap of ``old`` (bases ``lo``..``hi``) that no
        longer fits the log: LogCleaningAbortedError when it is closed, an old segment is
        no longer live or another one appeared in the range; ValueError when the range
        reaches the active segment."""
        if self.closed:
            raise LogCleaningAbortedError(f"{self.name} is closed")
        for seg in old:
            if self._segments.get(seg.base_offset) is not seg:
                raise LogCleaningAbortedError(
                    f"segment {seg.base_offset} of {self.name} is no longer part of the "
                    "log (retention, truncation or deletion ran during the cleaning)")
        live = [b for b in self._bases if lo <= b <= hi]
        if live != [s.base_offset for s in old]:
            raise LogCleaningAbortedError(
                f"the segments of {self.name} in [{lo}, {hi}] changed during the "
                f"cleaning: {live}")
        if self._bases[-1] <= hi:
            raise ValueError(f"the active segment of {self.name} cannot be replaced")

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and every producer snapshot and start empty at
        ``new_offset`` (``UnifiedLog.truncateFullyAndStartAt``). Holds :attr:`lock`
        across the deletions (the new segment takes a name an old one may hold)."""
        with self._file_lock, self.lock:
            for seg in self.segments():
                seg.delete()
            self.producer_state.truncate_fully_and_start_at(new_offset)
            self._txn_index_bases = set()
            self._first_unstable_offset = None
            seg = LogSegment(self.pdir, new_offset, self.config, create=True)
            seg.open_indexes()
            self._bases = [new_offset]
            self._segments = {new_offset: seg}
            self._log_end_offset = new_offset
            self.log_start_offset = new_offset
            self.recovery_point = new_offset
        self._notify()  # outside the lock (see the class docstring)

    # -- external changes -----------------------------------------------------------
    def adopt_segment(self, base_offset: int) -> bool:
        """Add a segment file that appeared in the directory from outside (a restored
        backup) when it fits, without overlap, below the first segment or in a gap between
        two segments (never past the active one). Below the first segment the log start
        offset moves down to it. Restored segments may come in any order: each one that
        fits is taken, so a whole restored range joins over one pass. Returns whether it
        was adopted. Raises OSError, CorruptRecordError."""
        with self.lock:
            if base_offset in self._segments or \
                    any(s.base_offset == base_offset for s in self._doomed):
                return False  # (one retention or a swap removed: its files are going)
            i = bisect.bisect_left(self._bases, base_offset)
            if i >= len(self._bases):
                return False  # past the active segment: only appends extend the log
            if i > 0 and self._segments[self._bases[i - 1]].read_next_offset() > base_offset:
                return False  # the segment before it reaches into it
            seg = LogSegment(self.pdir, base_offset, self.config, writable=self.writable)
            if seg.read_next_offset() > self._bases[i]:
                seg.close()
                return False  # it reaches into the segment after it
            self._bases.insert(i, base_offset)
            self._segments[base_offset] = seg
            if seg.txn_index.exists():
                self._txn_index_bases.add(base_offset)
            if i == 0 and (self.log_start_offset == self._bases[1] or
                           self.log_start_offset > base_offset):
                self.log_start_offset = base_offset
            self._update_first_unstable_offset()
        self._notify()  # outside the lock (see the class docstring)
        return True

    def refresh_from_disk(self) -> bool:
        """Pick up what another process did to the directory (a live broker, or the daemon
        beside a read-only reader): new segments, bytes appended to the active one,
        segments deleted by retention, new ``.txnindex`` files and entries (nothing while
        an unfinished bulk commit holds the log at :attr:`limit`). The producer
        state is brought up to the new log end offset by replaying the new batches (a batch
        the producer state refuses is logged and skipped: a reader must go on), so
        :attr:`last_stable_offset` follows the writer's transactions. Returns whether the log
        end, start or last stable offset moved."""
        with self.lock:
            if self.limit is not None:
                now = self.limit_source() if self.limit_source is not None else self.limit
                if now is not None:
                    return False  # an unfinished bulk commit: shown as before it, still
                self.limit = None  # finished: everything is shown from now on
            before = (self.log_start_offset, self._log_end_offset, self.last_stable_offset)
            try:
                names = self.pdir.files()
            except FileNotFoundError:
                return False
            bases = sorted(p[0] for p in map(parse_segment_filename, names)
                           if p and p[1] == LOG_SUFFIX and p[2] == "")
            if not bases:
                return False
            present = set(bases)
            previous_active = self._bases[-1] if self._bases else -1
            for b in list(self._bases):
                if b not in present:
                    self._bases.remove(b)
                    self._segments.pop(b).close()
            for b in bases:
                known = self._segments.get(b)
                if known is not None and known.closed:
                    # found gone when reopened (kafkafs.log.handles): another file took its
                    # name (a broker's cleaner swapped it), the one there now is read
                    del self._segments[b]
                    self._bases.remove(b)
                if b not in self._segments:
                    try:
                        seg = LogSegment(self.pdir, b, self.config, writable=False)
                    except FileNotFoundError:
                        continue
                    self._segments[b] = seg
                    bisect.insort(self._bases, b)
            if not self._bases:
                return False
            for seg in self.segments():
                if seg.base_offset < previous_active:
                    continue  # sealed before: its files no longer change
                seg.reload_size()
                if seg._index is not None:
                    seg._index.reload()
                if seg._time_index is not None:
                    seg._time_index.reload()
            self._log_end_offset = max(self._log_end_offset, self.active_segment.read_next_offset())
            self.log_start_offset = max(self.log_start_offset, self._bases[0])
            self._txn_index_bases = self._txn_indexes_in(names)
            pm = self.producer_state
            if self.log_start_offset > before[0]:
                pm.on_log_start_offset_incremented(self.log_start_offset)
            if pm.map_end_offset < self._log_end_offset:
                replay_producer_state(pm, self.segments(),
                                      max(pm.map_end_offset, self.log_start_offset),
                                      self._log_end_offset, strict=False, log_name=self.name)
                pm.update_map_end_offset(self._log_end_offset)
            self._update_first_unstable_offset()
            changed = before != (self.log_start_offset, self._log_end_offset,
                                 self.last_stable_offset)
        if changed:
            self._notify()  # outside the lock (see the class docstring)
        return changed

    def close(self, take_snapshot: bool = True) -> None:
        """Flush nothing (the caller flushes first); write the producer snapshot at the log
        end offset (``UnifiedLog.close``; writable logs, unless ``take_snapshot`` is False --
        a log about to be deleted; a failure is logged: call :meth:`take_producer_snapshot`
        first to see it), trim the active indexes and close files. Waits for a retention
        pass or a swap renaming files (the log's file lock)."""
        with self._file_lock:
            with self.lock:
                if self.closed:
                    return
                if take_snapshot and self.writable:
                    try:
                        self.producer_state.take_snapshot()
                    except (OSError, ValueError) as exc:
                        log.error("Cannot write the producer snapshot of %s at offset %d: %s",
                                  self.name, self._log_end_offset, exc)
                self.closed = True
                for seg in self.segments():
                    try:
                        seg.close()
                    except OSError as exc:  # (a partition dir gone): its files are closed
                        log.warning("Closing %r of %s: %s", seg, self.name, exc)
                self._doomed = []
            # .deleted files wait file.delete.delay.ms for readers still in them; once the
            # log closes there are none: remove them now (outside self.lock: the log is
            # closed), so that a clean shutdown leaves no leftovers for `kafkafs check`
            # (Kafka leaves them to the next load)
            for _due, seg in self.pending_deletes:
                try:
                    seg.delete() if self.writable else seg.close()
                except OSError as exc:
                    log.warning("Cannot delete %r of %s: %s (the next load does)", seg,
                                self.name, exc)
                    seg.close()
            self.pending_deletes = []
            self.pdir.drop()  # (a later look at the dir, e.g. its files, reopens it)

    def load_producer_state(self, reload_from_clean_shutdown: bool) -> None:
        """Build the producer state of a freshly loaded log (what ``LogLoader.load`` does
        after recovery): delete stray snapshots (``removeStraySnapshots``), then
        :func:`~kafkafs.log.producer_replay.rebuild_producer_state` up to the log end offset.
        Writes snapshots on a writable log only. Raises OSError, and what
        :func:`~kafkafs.log.producer_replay.replay_producer_state` raises."""
        with self.lock:
            pm = self.producer_state
            pm.remove_stray_snapshots(self._bases)
            rebuild_producer_state(pm, self.segments(), self.log_start_offset,
                                   self._log_end_offset, reload_from_clean_shutdown,
                                   log_name=self.name)
            self._update_first_unstable_offset()

    def __repr__(self):
        return (f"Log({self.name}, start={self.log_start_offset}, end={self._log_end_offset}, "
                f"segments={len(self._bases)})")

