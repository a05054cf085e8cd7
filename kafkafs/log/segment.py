"""One log segment: a ``.log`` file of record batches with its ``.index``, ``.timeindex`` and
``.txnindex``.

Follows Kafka's ``LogSegment`` (storage module): batches are appended at the end; an index
entry (largest offset of the append, position where it starts) and a time index entry
(largest timestamp so far, its offset) are added once more than ``index.interval.bytes`` were
appended since the last entry; reads translate an offset through the sparse index then scan
forward; recovery revalidates every batch and rebuilds both indexes with the same rule, and --
given the producer state at the segment's base offset -- the transaction index too
(``LogSegment.recover`` with ``updateProducerState``).

The transaction index (``<base>.txnindex``, :class:`~kafkafs.log.txnindex.TransactionIndex`)
holds one entry per transaction whose ABORT marker lies in the segment. Like Kafka's, it is
opened lazily, created by its first entry only (a segment without aborted transactions has
no such file) and handled like the other index files on roll, rename, truncation, deletion.

The ``.log`` is the truth and the indexes are hints (docs/design.md §5.1): an index is checked for
order when first opened (:meth:`~kafkafs.log.index.OffsetIndex.order_problem`) and every
entry a lookup lands on must point at a batch that fits it; a bad index is rebuilt from the
``.log`` (:meth:`LogSegment.rebuild_indexes`: on disk when writable, in memory otherwise)
and the lookup repeated. Reads check what the bytes themselves promise: batches follow each
other with offsets that strictly increase (:func:`check_batch_order`), a run of zeros ends
the data only when it reaches the end of the file (a preallocated tail), and an incomplete
batch is a torn write only at the end of the last segment (``strict_end``).

The ``.log`` descriptor is not held for the segment's life: it is a
:class:`~kafkafs.log.handles.Handle` of the process-wide descriptor budget
(``kafkafs.max.open.files``), leased by every read and write (``with seg.reader() as fd:``
for readers that ``pread`` it themselves), closed when evicted and reopened through the
partition dir on the next use -- as the very file first opened (the same ``(st_dev,
st_ino)``): a segment whose file was removed or replaced meanwhile is gone (closed, its
reads raise :class:`StaleSegmentError`, a FileNotFoundError). So are its indexes' maps.

Synchronous and thread-compatible: reads use ``os.pread`` and may run in several threads;
appends, truncation and recovery must be serialised by the caller (:class:`~kafkafs.log.log.Log`).
"""

from __future__ import annotations

import errno
import logging
import math
import os
import stat
import struct
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from ..record.batch import (
    BATCH_OVERHEAD,
    CURRENT_MAGIC,
    HEADER_PEEK,
    LAST_OFFSET_DELTA_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    NO_TIMESTAMP,
    RecordBatch,
    min_entry_length,
    peek_offset_and_size,
)
from ..record.compaction import index_entries
from ..record.errors import CorruptRecordError
from ..record.types import Record
from . import handles, safeio
from .bytesource import FdSource, first_data_at
from .config import LogConfig
from .errors import CorruptIndexError, ReadOnlyLogError
from .index import OffsetIndex, TimeIndex
from .names import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    filename_prefix,
)
from .txnindex import TransactionIndex, TxnIndexSearchResult
from .walk import (  # noqa: F401  (the rules' old home: readers import them from here too)
    READ_CHUNK,
    BatchOrder,
    ZeroTail,
    check_batch_order,
    first_offset,
    next_offset_after,
    offset_order_problem,
    walk_batches,
    zeroed_range_error,
)

log = logging.getLogger(__name__)

TRANSLATE_CHUNK = 32 * 1024  # ... and when looking for one offset from an index entry
_INT_MAX = 0x7FFFFFFF


class StaleSegmentError(FileNotFoundError):
    """A segment's ``.log``, reopened after its descriptor was evicted, is not the file first
    opened (removed, or another file took its name): the segment is gone (ESTALE)."""

    def __init__(self, path: str):
        super().__init__(errno.ESTALE, "the segment file was removed or replaced since it was "
                         "opened", path)


@dataclass
class SegmentScan:
    """What a validating scan of a ``.log`` found (the loop of Kafka's ``LogSegment.recover``).

    ``valid_bytes``: length of the prefix of whole, valid batches (recovery truncates the file
    to it); ``size``: bytes scanned (the file size, or the ``end`` asked for); ``error``: the
    CorruptRecordError that stopped the scan at ``valid_bytes`` (bad size, magic, CRC, or a last
    offset that does not fit the segment), None when the scan reached ``size`` or stopped at an
    incomplete batch (a torn write); ``batches``: whole valid batches; ``first_offset``: base
    offset of the first of them and ``next_offset``: the offset after the last (None when
    there is none); ``disorder``: ``(position, offset, expected)`` of the first batch whose
    offsets go back (``offset`` below ``expected``, the previous batch's next offset), else
    None -- recovery does not check this, a reader's offset lookups assume it.
    """

    valid_bytes: int
    size: int
    error: CorruptRecordError | None = None
    batches: int = 0
    first_offset: int | None = None
    next_offset: int | None = None
    disorder: tuple[int, int, int] | None = None

    @property
    def truncated(self) -> int:
        """Bytes recovery removes from the end (``size - valid_bytes``)."""
        return self.size - self.valid_bytes

    @property
    def torn(self) -> bool:
        """Whether the scan stopped at an incomplete batch (not at an invalid one)."""
        return self.error is None and self.valid_bytes < self.size


_LAST_DELTA = struct.Struct(">i")
APPEND_HINTS = 16  # appends remembered per segment for translate_offset


class LogSegment:
    """A segment of a partition's log (Kafka ``LogSegment``).

    ``dir``: the partition directory, a path or the log's open
    :class:`~kafkafs.log.safeio.Dir` (kept as ``pdir``; every file of the segment is opened,
    renamed and removed through it, never through a link, and only as a regular file: a
    ``.log`` that is a link or special file raises
    :class:`~kafkafs.log.safeio.NotRegularFileError`, a FileNotFoundError);
    ``base_offset``: first offset the segment may hold (its name). ``writable=False`` never
    changes a file (read-only mounts). Sizes are bytes, times ms. Index objects open lazily
    (an old segment's indexes cost nothing until a lookup). ``check_indexes``: check an
    index's order when it is opened and rebuild a bad one (see the module); False leaves the
    files as they are for those who report on them (the loader, ``kafkafs check``).
    ``created``: the segment was made by this process (``create=True``), so its indexes and
    ``.txnindex`` are its own writes from the first byte.

    ``lazy`` (read-only segments only): nothing is opened until the segment is first used
    (its :attr:`size` then costs one ``fstatat``), so loading a partition of tens of
    thousands of segments to read a few of them does not touch the others; the file met at
    first use is the segment's from then on. ``identity``: the ``(st_dev, st_ino)`` a
    listing of the partition dir gave (shown by :attr:`identity` until the file is used).
    """

    def __init__(self, dir: str | safeio.Dir, base_offset: int, config: LogConfig, *,
                 writable: bool = True, create: bool = False, suffix: str = "",
                 check_indexes: bool = True, lazy: bool = False,
                 identity: tuple | None = None):
        self.pdir = safeio.Dir.of(dir)
        self.dir = dir = self.pdir.path
        self.base_offset = base_offset
        self.config = config
        self.writable = writable
        self.suffix = suffix
        name = filename_prefix(base_offset) + LOG_SUFFIX + suffix
        self.log_path = dir + name if dir.endswith("/") else f"{dir}/{name}"  # (os.path.join)
        self._flags = os.O_RDWR if writable else os.O_RDONLY
        if lazy and not writable and not create:
            self._ident = None
            self._listed = identity
            self._file = handles.Handle(self._reopen, name=self.log_path,
                                        gone=(FileNotFoundError,))
            self._size: int | None = None
            self._init_state(base_offset, create, check_indexes)
            return
        if create:
            if not writable:
                raise ReadOnlyLogError(f"cannot create {self.log_path} read-only")
            fd = self.pdir.create_file(name)
        else:
            fd = self.pdir.open_file(name, self._flags)
        try:
            st = os.fstat(fd)
            if create and config.preallocate:
                os.posix_fallocate(fd, 0, config.segment_bytes)
        except BaseException:
            os.close(fd)
            raise
        self._ident = (st.st_dev, st.st_ino)
        self._listed = None
        self._file = handles.Handle(self._reopen, resource=fd, name=self.log_path)
        self._size = st.st_size
        self._init_state(base_offset, create, check_indexes)

    def _init_state(self, base_offset: int, create: bool, check_indexes: bool) -> None:
        self.created_ms = int(time.time() * 1000)
        # (base offset, position) of the latest appends: where a consumer at the log end
        # reads next, without the walk from the index's floor entry (translate_offset)
        self._appended: deque[tuple[int, int]] = deque(maxlen=APPEND_HINTS)
        self._index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        self._txn_index: TransactionIndex | None = None
        self.bytes_since_last_index_entry = 0
        self._max_ts_loaded = create
        self._max_timestamp_so_far = NO_TIMESTAMP
        self._offset_of_max_timestamp_so_far = base_offset
        self._max_ts_scanned_to = 0  # position up to which the batches were looked at
        self._max_ts_size_seen = 0  # (read-only) the size then: look again when it changes
        self._rolling_ts_loaded = create
        self._rolling_based_timestamp: int | None = None
        self.last_recovery: SegmentScan | None = None
        self.check_indexes = check_indexes
        self.created = create  # made by this process: its files are ours from the first byte
        self._zeros = ZeroTail()  # a checked zero tail, remembered

    @property
    def size(self) -> int:
        """Bytes of the ``.log`` this segment holds (as of its load or last change)."""
        size = self._size
        if size is None:  # a lazy segment's first use
            size = self._take_stat(self.pdir.lstat(os.path.basename(self.log_path)))
        return size

    def _take_stat(self, st: os.stat_result) -> int:
        """(a lazy segment's first use) The ``.log``'s size and identity from its ``lstat``
        ``st``; returns the size. Raises NotRegularFileError, StaleSegmentError."""
        if not stat.S_ISREG(st.st_mode):
            raise self.pdir._refuse(os.path.basename(self.log_path), st.st_mode)
        if self._ident is None:
            self._ident = (st.st_dev, st.st_ino)
        elif (st.st_dev, st.st_ino) != self._ident:
            raise StaleSegmentError(self.log_path)
        self._size = st.st_size
        return st.st_size

    @size.setter
    def size(self, value: int) -> None:
        if self._size is not None and value < self._size:
            self._appended.clear()  # (truncated: the batches they name may be gone)
        self._size = value

    @staticmethod
    def load_sizes(segments: Sequence[LogSegment]) -> None:
        """Find the :attr:`size` of every lazy segment of ``segments`` (one partition dir)
        not used yet, through one lease of the dir: what a planner reading all their sizes
        pays (one ``fstatat`` each) without a lease per call. Raises what :attr:`size`
        raises."""
        todo = [s for s in segments if s._size is None]
        if not todo:
            return
        with todo[0].pdir.lease() as dfd:
            for seg in todo:
                try:
                    st = os.stat(os.path.basename(seg.log_path), dir_fd=dfd,
                                 follow_symlinks=False)
                except OSError:
                    continue  # (the size getter raises it, with its path)
                if seg._size is None:
                    seg._take_stat(st)
        for seg in todo:
            seg.size  # noqa: B018 - the ones left: raises as the getter does

    @property
    def identity(self) -> tuple | None:
        """``(st_dev, st_ino)`` of the ``.log`` first opened; of a lazy segment not used
        yet, the one its listing gave (None when not given)."""
        return self._ident if self._ident is not None else self._listed

    def _reopen(self) -> int:
        """(the handle's opener) The ``.log`` opened again through the partition dir, checked
        to be the file first opened. Raises StaleSegmentError, DirGoneError, OSError."""
        fd = self.pdir.open_file(os.path.basename(self.log_path), self._flags)
        try:
            st = os.fstat(fd)
        except BaseException:
            os.close(fd)
            raise
        if self._ident is None:  # a lazy segment's first use
            self._ident = (st.st_dev, st.st_ino)
        elif (st.st_dev, st.st_ino) != self._ident:
            os.close(fd)
            log.warning("%s was replaced since kafkafs opened it: the segment is gone for "
                        "this process", self.log_path)
            raise StaleSegmentError(self.log_path)
        return fd

    # -- files -----------------------------------------------------------------------
    @property
    def index_path(self) -> str:
        return os.path.join(self.dir, filename_prefix(self.base_offset) + INDEX_SUFFIX + self.suffix)

    @property
    def time_index_path(self) -> str:
        return os.path.join(self.dir,
                            filename_prefix(self.base_offset) + TIME_INDEX_SUFFIX + self.suffix)

    @property
    def index(self) -> OffsetIndex:
        """The ``.index`` (opened on first use, its order checked then: see the module)."""
        if self._index is None:
            self._index = OffsetIndex(self.index_path, self.base_offset,
                                      self.config.segment_index_bytes, writable=self.writable,
                                      dir=self.pdir)
            self._check_opened_index(self._index)
        return self._index

    @property
    def time_index(self) -> TimeIndex:
        """The ``.timeindex`` (opened on first use, its order checked then)."""
        if self._time_index is None:
            self._time_index = TimeIndex(self.time_index_path, self.base_offset,
                                         self.config.segment_index_bytes, writable=self.writable,
                                         dir=self.pdir)
            self._check_opened_index(self._time_index)
        return self._time_index

    def _open_indexes_unchecked(self) -> None:
        """Open both index files without the order check (their entries are about to be
        replaced: recovery, a rebuild)."""
        if self._index is None:
            self._index = OffsetIndex(self.index_path, self.base_offset,
                                      self.config.segment_index_bytes, writable=self.writable,
                                      dir=self.pdir)
        if self._time_index is None:
            self._time_index = TimeIndex(self.time_index_path, self.base_offset,
                                         self.config.segment_index_bytes, writable=self.writable,
                                         dir=self.pdir)

    def _check_opened_index(self, idx) -> None:
        if self.created or not self.check_indexes or not idx.entries:
            return
        problem = idx.order_problem(self.size)
        if problem is not None and isinstance(idx, OffsetIndex) and not self.writable:
            # beside a live writer the index may already point past the size read earlier
            problem = idx.order_problem(self.reload_size())
        if problem is not None:
            self.rebuild_indexes(problem)

    @property
    def txn_index_path(self) -> str:
        return os.path.join(self.dir,
                            filename_prefix(self.base_offset) + TXN_INDEX_SUFFIX + self.suffix)

    @property
    def txn_index(self) -> TransactionIndex:
        """The segment's :class:`~kafkafs.log.txnindex.TransactionIndex` (``LogSegment.txnIndex``),
        opened on first use; a missing file reads as no aborted transactions and is created
        by the first entry only (never on a read-only segment)."""
        if self._txn_index is None:
            self._txn_index = TransactionIndex(self.txn_index_path, self.base_offset,
                                               writable=self.writable, dir=self.pdir)
        return self._txn_index

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int
                             ) -> TxnIndexSearchResult:
        """The aborted transactions of this segment's index overlapping
        ``[fetch_offset, upper_bound_offset)`` (``LogSegment.collectAbortedTxns``); see
        :meth:`TransactionIndex.collect_aborted`. Raises CorruptIndexError."""
        return self.txn_index.collect_aborted(fetch_offset, upper_bound_offset)

    def open_indexes(self) -> None:
        """Open (creating if missing) both index files now."""
        _ = self.index, self.time_index

    @property
    def closed(self) -> bool:
        """Closed (by :meth:`close`, or its file found gone)."""
        return self._file.closed

    def reader(self) -> handles.Handle:
        """The ``.log``'s descriptor, for readers that ``pread`` it themselves, as a lease:
        ``with seg.reader() as fd: os.pread(fd, ...)``. Use the number inside the block only
        (it may be closed and reused once the lease ends), and never write through it.
        Raises OSError (EBADF once closed), StaleSegmentError, DirGoneError."""
        return self._file

    def stat(self) -> os.stat_result:
        """``fstat`` of the ``.log`` (through a lease)."""
        with self._file as fd:
            return os.fstat(fd)

    @property
    def source(self) -> FdSource:
        """The ``.log`` as the walker's :class:`~kafkafs.log.bytesource.ByteSource` (leased
        per read, named by its current path)."""
        return FdSource(self._file, self.log_path)

    def first_data_at(self, pos: int) -> int | None:
        """:func:`first_data_at` of the ``.log`` (through a lease)."""
        with self._file as fd:
            return first_data_at(fd, pos)

    def reload_size(self) -> int:
        """Re-read the ``.log`` size (a file grown by another process); returns it."""
        with self._file as fd:
            self.size = os.fstat(fd).st_size
        return self.size

    # -- timestamps ------------------------------------------------------------------
    def _load_max_timestamp(self) -> None:
        """Load the largest timestamp and its offset once: the last time index entry
        (Kafka's ``loadLargestTimestamp``), and the batches after the last offset index
        entry. Kafka trusts the entry alone (a broker's segment gets its final entry when it
        rolls or closes); kafkafs also reads what the entry may not cover yet: a writer adds
        one only every ``index.interval.bytes``, so the active segment of a live writer,
        read beside it, holds newer batches. A read-only segment that grew since
        (:meth:`reload_size`) has the new batches read on the next call."""
        if self._max_ts_loaded:
            if not self.writable and self.size != self._max_ts_size_seen:
                if self.size < self._max_ts_scanned_to:  # truncated by its writer: again
                    self._max_timestamp_so_far = NO_TIMESTAMP
                    self._offset_of_max_timestamp_so_far = self.base_offset
                    self._max_ts_loaded = False
                    self._load_max_timestamp()
                else:
                    self._scan_max_timestamp(self._max_ts_scanned_to)
            return
        ts, off = self.time_index.last_entry
        if ts >= 0 and self.check_indexes and not self.created:
            problem = self._time_entry_problem(ts, off)
            if problem is not None:
                self.rebuild_indexes(f"time index entry ({ts}, {off}): {problem}")
                ts, off = self.time_index.last_entry
        if ts > self._max_timestamp_so_far:
            self._max_timestamp_so_far, self._offset_of_max_timestamp_so_far = ts, off
        self._scan_max_timestamp(self._last_indexed_position())
        self._max_ts_loaded = True

    def _scan_max_timestamp(self, position: int) -> None:
        """Take the batches from ``position`` (a batch start) to the end into the largest
        timestamp (and the last offset of its batch, as appends record it); damage, offsets
        out of order among them included, ends the look quietly (readers meet it where it
        lies; :attr:`max_timestamp_covers_segment` tells it)."""
        end = position
        try:
            for batch in self.batches(position, order=BatchOrder(self.base_offset)):
                if batch.max_timestamp > self._max_timestamp_so_far:
                    self._max_timestamp_so_far = batch.max_timestamp
                    self._offset_of_max_timestamp_so_far = batch.last_offset
                end = batch.position + batch.size
        except CorruptRecordError:
            pass
        self._max_ts_scanned_to = end
        self._max_ts_size_seen = self.size

    def _time_entry_problem(self, timestamp: int, offset: int) -> str | None:
        """Why the time index entry ``(timestamp, offset)`` cannot be right, or None: it
        names the largest timestamp up to ``offset``, so the batch holding ``offset`` has
        that maximum timestamp (Kafka's ``maybeAppend`` after each append)."""
        try:
            batch = self.translate_offset(offset)
        except CorruptRecordError as exc:
            return f"the log cannot be read there ({exc.reason})"
        if batch is None or first_offset(batch) > offset:
            return "no batch holds that offset"
        if batch.max_timestamp != timestamp:
            return f"the batch holding it has the largest timestamp {batch.max_timestamp}"
        return None

    @property
    def max_timestamp_so_far(self) -> int:
        """Largest batch max timestamp seen in the segment (ms), or -1."""
        self._load_max_timestamp()
        return self._max_timestamp_so_far

    @property
    def max_timestamp_covers_segment(self) -> bool:
        """Whether :attr:`max_timestamp_so_far` covers every byte of the ``.log``: False
        when the look at the batches after the last index entry stopped short of the end
        (damage, a torn tail), where records of any timestamp may lie. A segment this
        process created holds only what its appends wrote."""
        self._load_max_timestamp()
        return self.created or self._max_ts_scanned_to >= self.size

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        self._load_max_timestamp()
        return self._offset_of_max_timestamp_so_far

    def largest_timestamp(self) -> int:
        """The segment's largest timestamp for time retention: the max record timestamp, or
        the file's mtime when the segment has no timestamps (``LogSegment.largestTimestamp``)."""
        ts = self.max_timestamp_so_far
        if ts >= 0:
            return ts
        return self.last_modified_ms()

    def last_modified_ms(self) -> int:
        return int(self.stat().st_mtime * 1000)

    def rolling_based_timestamp(self) -> int | None:
        """Max timestamp of the first batch (``segment.ms`` ages from it), None when empty."""
        if not self._rolling_ts_loaded:
            try:
                for batch in self.batches(0):
                    self._rolling_based_timestamp = batch.max_timestamp
                    break
            except CorruptRecordError:
                pass  # damaged from the first byte: the segment ages from its creation
            self._rolling_ts_loaded = True
        return self._rolling_based_timestamp

    def should_roll(self, incoming_bytes: int, max_timestamp: int, max_offset: int,
                    now_ms: int, roll_jitter_ms: int = 0) -> bool:
        """Whether an append of ``incoming_bytes`` must go to a new segment
        (``LogSegment.shouldRoll``): size, age (``segment.ms``), full index, or an offset
        that does not fit in an int relative to the base offset."""
        room, latest, last = self.roll_limits(now_ms, roll_jitter_ms)
        return incoming_bytes > room or max_timestamp > latest or \
            not self.base_offset <= max_offset <= last

    def roll_limits(self, now_ms: int, roll_jitter_ms: int = 0,
                    first_timestamp: int | None = None) -> tuple[int, float, int]:
        """:meth:`should_roll` as limits, found once for a run of appends: ``(bytes,
        timestamp, offset)``, an append of more bytes, a later max timestamp (ms) or a
        larger offset than these needs a new segment (``bytes`` is -1 when an index is
        full; ``timestamp`` is ``-inf`` when the segment is old by its creation time,
        ``inf`` when it is empty or never old). ``first_timestamp``: the max timestamp of
        the run's first batch, for the batches after it when the segment is empty (that
        batch starts its age)."""
        cfg = self.config
        room = -1 if self.index.is_full() or self.time_index.is_full() else \
            cfg.segment_bytes - self.size
        latest: float = math.inf
        if self.size > 0 or first_timestamp is not None:
            # LogSegment.timeWaitedForRoll: the max timestamp less the first batch's, or
            # (no timestamps) the time since the segment was created
            allowed = cfg.segment_ms - roll_jitter_ms
            t = self.rolling_based_timestamp() if self.size > 0 else first_timestamp
            if t is not None and t >= 0:
                latest = t + allowed
            elif now_ms - self.created_ms > allowed:
                latest = -math.inf
        return room, latest, self.base_offset + 0x7FFFFFFF

    # -- writing ---------------------------------------------------------------------
    def append(self, data) -> None:
        """Append encoded v2 batches, whole and back to back in ``data`` (bytes-like; one
        batch or a run of them), at the end with one write (``LogSegment.append``). Their
        index entries are those of Kafka's rule applied batch by batch -- an offset index
        entry (the batch's last offset, its position), and a time index entry when the
        largest timestamp so far grew past the time index's last, before a batch once more
        than ``index.interval.bytes`` were appended since the last entry -- found in one
        native pass over the bytes (:func:`kafkafs.record.compaction.index_entries`, the
        cleaner's too) and written with one update of each index. Raises OSError (ENOSPC,
        ...) with the file unchanged in size as far as the OS allows, CorruptRecordError
        when ``data`` is not whole batches (nothing written)."""
        if not self.writable:
            raise ReadOnlyLogError(f"{self.log_path} is read-only")
        if not len(data):
            return
        self._load_max_timestamp()  # before the write: it may read the batches on disk
        position = self.size
        last_time = self.time_index.last_entry[0]
        state = (self.bytes_since_last_index_entry, self.max_timestamp_so_far,
                 self._offset_of_max_timestamp_so_far, last_time)
        offsets, times, state = index_entries(data, position,
                                              self.config.index_interval_bytes, state)
        written = 0
        with self._file as fd:
            try:
                while written < len(data):
                    written += os.pwrite(fd, memoryview(data)[written:], position + written)
            except OSError:
                # leave no partial batch behind: the caller reports the error, nothing was
                # appended
                try:
                    os.ftruncate(fd, position)
                except OSError:
                    pass
                raise
        if self.size == 0:  # the first batch's max timestamp starts segment.ms
            self._rolling_based_timestamp = RecordBatch.from_buffer(data).max_timestamp
            self._rolling_ts_loaded = True
        self.size = position + len(data)
        self._appended.append((int.from_bytes(data[:8], "big", signed=True), position))
        (self.bytes_since_last_index_entry, self._max_timestamp_so_far,
         self._offset_of_max_timestamp_so_far, _last) = state
        if offsets:
            self.index.append_entries(offsets)
        if times:
            self.time_index.maybe_append_entries(times)

    def resume_after_close(self) -> None:
        """Make a segment reopened after a clean close take appends as if it had never been
        closed (a bulk load going on with a run another process wrote and closed,
        :mod:`kafkafs.log.staging`): the bytes appended since the last offset index entry
        count again (a load starts that count at 0, as Kafka's does), and the final time
        index entry the close wrote (``LogSegment.close``) is taken back, its timestamp
        staying the running maximum. That entry is the one naming an offset past the batch
        of the last offset index entry: the entries appends write never do. Raises
        ReadOnlyLogError."""
        if not self.writable:
            raise ReadOnlyLogError(f"{self.log_path} is read-only")
        index, time_index = self.index, self.time_index
        if index.entries:
            indexed, position = index.entry(index.entries - 1)
        else:
            indexed, position = self.base_offset - 1, 0
        self.bytes_since_last_index_entry = self.size - position
        if time_index.entries:
            timestamp, offset = time_index.last_entry
            if offset > indexed:
                self._max_timestamp_so_far = timestamp
                self._offset_of_max_timestamp_so_far = offset
                self._max_ts_loaded = True
                time_index.truncate_to(offset)

    def index_room(self) -> int:
        """How many more entries both the offset and the time index can take."""
        # (either index is full with one slot left: is_full's rule)
        return min(self.index.max_entries - 1 - self.index.entries,
                   self.time_index.max_entries - 1 - self.time_index.entries)

    def flush(self) -> None:
        """fsync the ``.log`` and the three indexes (``LogSegment.flush``)."""
        if not self.writable:
            return
        with self._file as fd:
            os.fsync(fd)
        # fsync the index files through their own descriptors: this writes back pages dirtied
        # through the mmap too, and never touches the mmap object an appender may be using
        for path in (self.index_path, self.time_index_path, self.txn_index_path):
            self.pdir.fsync_file(os.path.basename(path))

    def on_become_inactive(self) -> None:
        """Called when a newer segment becomes active: write the final time index entry and
        trim both preallocated indexes to their entries (``LogSegment.onBecomeInactiveSegment``)."""
        if not self.writable:
            return
        self.time_index.maybe_append(self.max_timestamp_so_far,
                                     self.offset_of_max_timestamp_so_far, skip_full_check=True)
        self.index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    # -- reading ---------------------------------------------------------------------
    def read_at(self, position: int, size: int) -> bytes:
        """Raw bytes ``[position, position + size)`` of the ``.log`` (short at EOF)."""
        with self._file as fd:
            return os.pread(fd, size, position)

    def batches(self, start_position: int = 0, end_position: int | None = None,
                validate: bool = False, chunk_size: int = READ_CHUNK,
                strict_end: bool = False, order: BatchOrder | None = None
                ) -> Iterator[RecordBatch]:
        """Yield batches from ``start_position`` (must be a batch start) to ``end_position``
        (default: the current size). ``RecordBatch.position`` is the position in the file.
        The one walker's rules (:func:`~kafkafs.log.walk.walk_batches` over the ``.log``'s
        :attr:`source`): stops quietly at a preallocated zero tail and, unless
        ``strict_end``, at a torn tail (an incomplete batch at the end: a writer's append in
        progress, or a crash). Raises CorruptRecordError (naming the file and position) on a
        bad header or size, zeros followed by data, with ``validate`` a bad CRC, with
        ``strict_end`` an incomplete batch (the end of a segment that is not the last), and
        with ``order`` (a :class:`~kafkafs.log.walk.BatchOrder`) offsets out of place.
        """
        end = self.size if end_position is None else min(end_position, self.size)
        return walk_batches(self.source, start_position, end, validate=validate,
                            strict_end=strict_end, chunk_size=chunk_size, order=order,
                            zeros=self._zeros)

    def translate_offset(self, offset: int, start_position: int = 0, *,
                         limit: int | None = None, skip_damaged: bool = False,
                         strict_end: bool = False) -> RecordBatch | None:
        """The first batch at or after ``start_position`` whose last offset is >= ``offset``,
        starting from the index's floor entry (``LogSegment.translateOffset``); None if the
        segment has no such batch. An index entry that does not point at a batch fitting it
        gets the index rebuilt (:meth:`rebuild_indexes`) and the lookup repeated.

        Raises CorruptRecordError when the batches scanned cannot be framed or their offsets
        are out of place (:func:`offset_order_problem`; ``limit``: the offset no batch may
        reach, the next segment's base or the log end offset). With ``skip_damaged`` (a
        point read) a batch whose offsets are out of place is stepped over instead, so that
        a record of an intact batch after it is still found; framing damage still raises.
        ``strict_end`` (a sealed segment): an incomplete batch met at its end raises too."""
        # (an offset at or below the base: the first batch; no index to open)
        position = 0 if offset <= self.base_offset else self._index_floor(offset)
        for base, at in reversed(self._appended):  # a batch appended since: closer still
            if base <= offset:
                if at > position:
                    position = at
                break
        position, expected = self._skip_large_before(position, offset, limit)
        # a point lookup scans about index.interval.bytes: read small chunks
        if start_position > position:
            expected = None
        order = BatchOrder(self.base_offset, limit, expected=expected, skip=skip_damaged)
        for batch in self.batches(max(position, start_position), chunk_size=TRANSLATE_CHUNK,
                                  strict_end=strict_end, order=order):
            if batch.last_offset >= offset:
                return batch
        return None

    def _skip_large_before(self, position: int, offset: int, limit: int | None
                           ) -> tuple[int, int | None]:
        """Step over the batches from ``position`` that are larger than a lookup's read and
        end below ``offset``, by their headers alone (as Kafka's ``searchForOffsetWithSize``
        reads only headers): the walk would read each of them whole (a producer's batch of
        1 MB, before the one a Fetch asks for). Stops, leaving the rest to the walk and its
        rules, at anything but a whole v2 batch of this segment whose offsets follow the
        ones stepped over and lie below ``offset`` (and ``limit``). Returns ``(position,
        the offset after the last batch stepped over or None)``: the walk's order check
        goes on from there."""
        expected = None
        with self._file as fd:
            while True:
                head = os.pread(fd, BATCH_OVERHEAD, position)
                if len(head) < BATCH_OVERHEAD or head[MAGIC_OFFSET] != CURRENT_MAGIC:
                    return position, expected
                base, size, _magic = peek_offset_and_size(head)
                last = base + _LAST_DELTA.unpack_from(head, LAST_OFFSET_DELTA_OFFSET)[0]
                if size <= TRANSLATE_CHUNK or position + size > self.size or last >= offset \
                        or offset_order_problem(base, last, expected, self.base_offset,
                                                limit) is not None:
                    return position, expected
                position += size
                expected = last + 1

    def _index_floor(self, offset: int) -> int:
        """The position of the index's floor entry for ``offset`` (0 without one), checked:
        the batch there must be whole and may not hold offsets past the entry's (an entry
        names the last offset of the append that starts at its position). Otherwise the
        index is rebuilt and asked again."""
        entry_offset, position = self.index.lookup(offset)
        if position == 0:
            return 0
        problem = self._entry_problem(entry_offset, position)
        if problem is None:
            return position
        self.rebuild_indexes(f"index entry ({entry_offset}, {position}): {problem}")
        return self.index.lookup(offset)[1]

    def _entry_problem(self, entry_offset: int, position: int) -> str | None:
        """Why the index entry ``(entry_offset, position)`` cannot be right, or None."""
        with self._file as fd:
            head = os.pread(fd, BATCH_OVERHEAD, position)
            file_size = os.fstat(fd).st_size
        if len(head) < HEADER_PEEK:
            return f"position past the end of the log segment ({self.size} bytes)"
        base, size, magic = peek_offset_and_size(head)
        if magic not in (0, 1, 2):
            return f"no batch starts there (magic {magic})"
        if size < LOG_OVERHEAD + min_entry_length(magic) or \
                position + size > max(self.size, file_size):
            return f"no batch starts there (a size of {size} bytes)"
        last = base + _LAST_DELTA.unpack_from(head, LAST_OFFSET_DELTA_OFFSET)[0] \
            if magic == 2 else base
        if not base <= last <= entry_offset:
            return f"the batch there holds offsets [{base}, {last}]"
        return None

    def rebuild_indexes(self, reason: str) -> None:
        """Rebuild the ``.index`` and ``.timeindex`` from the ``.log`` by Kafka's rule (an
        entry after every ``index.interval.bytes``; the time index's largest timestamp so
        far), without validating CRCs or changing the ``.log``: on disk when the segment is
        writable, in memory when not (a read-only mount, a CLI reader). The scan stops at
        the first batch it cannot frame. ``reason`` is logged, once per rebuild."""
        # a writer's rebuild changes files (a warning); a reader's is its own business (a CLI
        # reader prints only what it reads and its one error line; a read-only mount's log
        # shows it at INFO)
        log.log(logging.WARNING if self.writable else logging.INFO,
                "Rebuilding the indexes of %s %s: %s", self.log_path,
                "on disk" if self.writable else "in memory (the files are left alone)", reason)
        offsets: list[tuple[int, int]] = []
        stamps: list[tuple[int, int]] = []
        max_ts, offset_of_max_ts = NO_TIMESTAMP, self.base_offset
        last_entry = 0
        position = 0
        try:
            for batch in self.batches(0, order=BatchOrder(self.base_offset)):
                if batch.max_timestamp > max_ts:
                    max_ts, offset_of_max_ts = batch.max_timestamp, batch.last_offset
                if position - last_entry > self.config.index_interval_bytes and \
                        (not offsets or batch.last_offset > offsets[-1][0]):
                    offsets.append((batch.last_offset, position))
                    if not stamps or max_ts > stamps[-1][0]:
                        stamps.append((max_ts, offset_of_max_ts))
                    last_entry = position
                position = batch.position + batch.size
        except CorruptRecordError:
            pass  # indexes cover the batches before the damage; readers meet it themselves
        if max_ts >= 0 and (not stamps or max_ts > stamps[-1][0]):
            stamps.append((max_ts, offset_of_max_ts))
        self._open_indexes_unchecked()
        self._index.replace_entries(offsets)
        self._time_index.replace_entries(stamps)
        self._max_ts_loaded = False

    def _last_indexed_position(self) -> int:
        if not self.index.entries:
            return 0
        return self._index_floor(self.index.last_offset)

    def read_next_offset(self) -> int:
        """The offset after the segment's last batch, or the base offset when empty
        (``LogSegment.readNextOffset``): the last complete batch framed from the last index
        entry (checked as every lookup's; from position 0 when nothing is readable there),
        whatever its CRC or the order of the offsets before it -- readers judge those where
        they lie (a batch at or past this offset is damage). A batch whose offsets cannot
        lie in this segment is not counted; one that cannot be framed ends the scan: the
        offset after the last counted one before it is returned. Never raises
        CorruptRecordError."""
        return next_offset_after(self.source, self.base_offset, self._last_indexed_position(),
                                 self.size, self._zeros)

    def tail_is_valid(self) -> bool:
        """Whether the bytes after the last index entry are whole batches with valid CRCs
        (no torn or hand-appended tail)."""
        end, error = self.scan_tail()
        if error is not None:
            log.warning("Invalid data at the end of %s: %s", self.log_path, error.reason)
            return False
        return end == self.size

    def scan_tail(self) -> tuple[int, CorruptRecordError | None]:
        """Validate the batches after the last index entry without changing anything:
        ``(end of the last whole valid batch, the error that stopped the scan or None)``.
        The tail is valid when the error is None and the end is the file size."""
        end = self._last_indexed_position()
        try:
            for batch in self.batches(end, validate=True):
                end = batch.position + batch.size
        except CorruptRecordError as exc:
            return end, exc.located(path=self.log_path, position=end)
        return end, None

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int, *,
                                 next_base: int | None = None, end: int | None = None,
                                 end_position: int | None = None) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record with timestamp >= ``timestamp`` and
        offset >= ``start_offset`` (``LogSegment.findOffsetByTimestamp``), else None. The
        time index only says where to start; every batch from there is framed and ordered
        as any read's (``next_base``, ``end``: :func:`offset_order_problem`; a segment with
        a ``next_base`` is sealed, so an incomplete batch at its end is damage), and the one
        whose records are read has its CRC checked. ``end_position``: the bytes to look at
        (the size that goes with ``end``, for the last segment; default: the size now).
        Raises CorruptRecordError at damage met before the answer."""
        entry_ts, index_offset = self.time_index.lookup(timestamp)
        # (NO_TIMESTAMP, base offset): no entry at or below ``timestamp``, start at the
        # beginning; any other entry, a negative timestamp too, is checked before use
        sentinel = entry_ts == -1 and index_offset == self.base_offset
        if not sentinel and self.check_indexes:
            problem = self._time_entry_problem(entry_ts, index_offset)
            if problem is not None:
                self.rebuild_indexes(f"time index entry ({entry_ts}, {index_offset}): {problem}")
                _ts, index_offset = self.time_index.lookup(timestamp)
        position = self._index_floor(max(index_offset, start_offset))
        for batch in self.batches(position, end_position, strict_end=next_base is not None,
                                  order=BatchOrder(self.base_offset, next_base, end)):
            if batch.max_timestamp < timestamp or batch.last_offset < start_offset:
                continue
            batch.ensure_valid()
            for record in batch.records():
                if record.timestamp >= timestamp and record.offset >= start_offset:
                    return record.offset, record.timestamp
        return None

    def records(self, start_offset: int) -> Iterator[Record]:
        """Every record with offset >= ``start_offset`` in offset order."""
        batch = self.translate_offset(start_offset)
        if batch is None:
            return
        for b in self.batches(batch.position):
            if b.is_control:
                continue
            for record in b.records():
                if record.offset >= start_offset:
                    yield record

    # -- recovery and truncation -----------------------------------------------------
    def validate(self, end: int | None = None,
                 on_batch: Callable[[RecordBatch, int], None] | None = None) -> SegmentScan:
        """Scan the ``.log`` from position 0 to ``end`` (default: its size) checking every
        batch as recovery does (size, magic, CRC, last offset relative to the base offset must
        fit an int), without changing anything. ``on_batch(batch, position)`` is called for
        each valid batch (recovery builds the indexes there; what it raises propagates).
        Returns a :class:`SegmentScan`; OSError on I/O failure."""
        end = self.size if end is None else min(end, self.size)
        scan = SegmentScan(valid_bytes=0, size=end)
        try:
            for batch in self.batches(0, end, validate=True):
                if not 0 <= batch.last_offset - self.base_offset <= _INT_MAX:
                    raise CorruptRecordError(
                        f"batch last offset {batch.last_offset} is out of range for a segment "
                        f"with base offset {self.base_offset}", path=self.log_path,
                        position=batch.position)
                if on_batch is not None:
                    on_batch(batch, scan.valid_bytes)
                first = batch.base_offset if batch.magic >= 2 else batch.last_offset
                if scan.first_offset is None:
                    scan.first_offset = first
                elif scan.disorder is None and first < scan.next_offset:
                    scan.disorder = (batch.position, first, scan.next_offset)
                scan.next_offset = max(batch.next_offset, scan.next_offset or 0)
                scan.batches += 1
                scan.valid_bytes += batch.size
        except CorruptRecordError as exc:
            scan.error = exc.located(path=self.log_path, position=scan.valid_bytes)
        return scan

    def recover(self, producer_state=None) -> int:
        """Rebuild the indexes from the ``.log``, validating every batch; truncate the file at
        the first invalid or torn batch (``LogSegment.recover``). Returns bytes truncated;
        :attr:`last_recovery` keeps the :class:`SegmentScan` (where and why).

        ``producer_state``: a :class:`~kafkafs.log.producer_state.ProducerStateManager`
        holding the state at the segment's base offset (Kafka's ``recover(producerStateManager,
        ...)``): the ``.txnindex`` is then rebuilt too, every v2 batch applied to the state in
        order (``updateProducerState``), each ABORT that ends a transaction appended to the
        index; a marker that cannot be parsed counts as invalid data (truncated there). Without
        it the ``.txnindex`` is kept, minus entries past the recovered end. Raises
        ReadOnlyLogError, OSError, and InvalidTxnStateError from the producer state (as
        Kafka's recovery does: nothing a broker writes has one)."""
        if not self.writable:
            raise ReadOnlyLogError(f"{self.log_path} is read-only")
        self._open_indexes_unchecked()
        self.index.reset()
        self.time_index.reset()
        if producer_state is not None:
            self.txn_index.reset()
        state = {"last_index_entry": 0, "max_ts": NO_TIMESTAMP,
                 "offset_of_max_ts": self.base_offset}

        def index_batch(batch: RecordBatch, valid_bytes: int) -> None:
            if producer_state is not None and batch.magic >= 2:
                # first, so that a marker that cannot be parsed leaves no index entry behind
                producer_state.update(batch, self.txn_index)
            if batch.max_timestamp > state["max_ts"]:
                state["max_ts"] = batch.max_timestamp
                state["offset_of_max_ts"] = batch.last_offset
            if valid_bytes - state["last_index_entry"] > self.config.index_interval_bytes:
                self.index.append(batch.last_offset, valid_bytes)
                self.time_index.maybe_append(state["max_ts"], state["offset_of_max_ts"])
                state["last_index_entry"] = valid_bytes

        scan = self.validate(on_batch=index_batch)
        self.last_recovery = scan
        valid_bytes = scan.valid_bytes
        max_ts, offset_of_max_ts = state["max_ts"], state["offset_of_max_ts"]
        if scan.error is not None:
            log.warning("Found invalid messages in log segment %s at byte offset %d: %s",
                        self.log_path, valid_bytes, scan.error.reason)
        truncated = self.size - valid_bytes
        if truncated > 0:
            log.warning("Truncating %s to %d bytes (%d invalid bytes at the end)",
                        self.log_path, valid_bytes, truncated)
            with self._file as fd:
                os.ftruncate(fd, valid_bytes)
            self.size = valid_bytes
        if producer_state is None:
            end_offset = self.base_offset if scan.next_offset is None else scan.next_offset
            self.txn_index.truncate_to(end_offset)
        self.index.trim_to_valid_size()
        self.time_index.maybe_append(max_ts, offset_of_max_ts, skip_full_check=True)
        self.time_index.trim_to_valid_size()
        self._max_timestamp_so_far, self._offset_of_max_timestamp_so_far = max_ts, offset_of_max_ts
        self._max_ts_loaded = True
        self._max_ts_scanned_to = self._max_ts_size_seen = valid_bytes
        self._rolling_ts_loaded = False
        self.bytes_since_last_index_entry = valid_bytes - state["last_index_entry"]
        return truncated

    def sanity_check(self) -> None:
        """Raise CorruptIndexError if an index file is inconsistent (missing offset or time
        index files count as corrupt so that recovery rebuilds them; a missing ``.txnindex``
        is an empty one, as in Kafka)."""
        for path in (self.index_path, self.time_index_path):
            if not self.pdir.is_file(os.path.basename(path)):
                raise CorruptIndexError(f"Index file {path} is missing")
        self.index.sanity_check()
        self.time_index.sanity_check()
        self.txn_index.sanity_check()

    def truncate_to(self, offset: int) -> int:
        """Remove every batch with base offset >= ``offset`` and every transaction index entry
        whose ABORT marker is at or past it (``LogSegment.truncateTo``); returns bytes
        removed."""
        self.txn_index.truncate_to(offset)
        batch = self.translate_offset(offset)
        if batch is None:
            return 0
        position = batch.position
        self.index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        removed = self.size - position
        with self._file as fd:
            os.ftruncate(fd, position)
        self.size = position
        self._max_ts_loaded = False
        self._max_timestamp_so_far = NO_TIMESTAMP
        self._offset_of_max_timestamp_so_far = self.base_offset
        self._rolling_ts_loaded = position > 0 and self._rolling_ts_loaded
        if position == 0:
            self._rolling_based_timestamp = None
            self._rolling_ts_loaded = True
        self.bytes_since_last_index_entry = 0
        return removed

    # -- lifecycle -------------------------------------------------------------------
    def _files(self):
        return [(self.log_path, None), (self.index_path, self._index),
                (self.time_index_path, self._time_index),
                (self.txn_index_path, self._txn_index)]

    def rename_suffix(self, new_suffix: str) -> None:
        """Rename all files of the segment to carry ``new_suffix`` (``""``, ``.deleted``,
        ``.swap``, ``.cleaned``), as Kafka's ``changeFileSuffixes``."""
        prefix = filename_prefix(self.base_offset)
        # the .log stays open over its rename: no thread reopens it by a name in between
        try:
            self._file.acquire()
            leased = True
        except OSError:  # closed, or gone: nothing reopens it
            leased = False
        try:
            for suffix, idx in ((LOG_SUFFIX, None), (INDEX_SUFFIX, self._index),
                                (TIME_INDEX_SUFFIX, self._time_index),
                                (TXN_INDEX_SUFFIX, self._txn_index)):
                old = prefix + suffix + self.suffix
                new = prefix + suffix + new_suffix
                if idx is not None:
                    idx.rename_to(self.pdir.join(new))
                else:
                    try:
                        self.pdir.rename(old, new)  # a planted link is renamed, not followed
                    except FileNotFoundError:
                        pass
                    if suffix == LOG_SUFFIX:
                        self.log_path = self.pdir.join(new)
            self.suffix = new_suffix
        finally:
            if leased:
                self._file.release()

    def mark_deleted(self) -> None:
        """Rename to ``.deleted`` (the files are removed later by :meth:`delete`)."""
        self.rename_suffix(DELETED_SUFFIX)

    def close(self) -> None:
        """Write the final time index entry (as ``LogSegment.close``), trim writable indexes
        and close every file."""
        if self.writable and not self._file.closed and self._max_ts_loaded and \
                self._max_timestamp_so_far >= 0:
            try:
                self.time_index.maybe_append(self._max_timestamp_so_far,
                                             self._offset_of_max_timestamp_so_far,
                                             skip_full_check=True)
            except Exception as exc:  # noqa: BLE001 - closing must go on
                log.warning("cannot write the final time index entry of %s: %s",
                            self.log_path, exc)
        try:
            for idx in (self._index, self._time_index, self._txn_index):
                if idx is not None:
                    try:
                        idx.close()
                    except OSError as exc:  # (trimming it): closed anyway
                        log.warning("closing %s: %s", idx.path, exc)
        finally:
            self._index = self._time_index = self._txn_index = None
            self._file.close()

    def delete(self) -> None:
        """Close and remove all files of the segment (whatever their suffix); a segment
        deleted by retention (``.deleted``) also takes its producer snapshot,
        ``<base>.snapshot.deleted``, marked with it (``deleteProducerSnapshots``)."""
        paths = [self.log_path, self.index_path, self.time_index_path, self.txn_index_path]
        if self.suffix == DELETED_SUFFIX:
            paths.append(os.path.join(self.dir, filename_prefix(self.base_offset) +
                                      SNAPSHOT_SUFFIX + DELETED_SUFFIX))
        self.close()
        for p in paths:
            self.pdir.unlink(os.path.basename(p))

    def __repr__(self):
        size = "?" if self._size is None else self._size  # (a lazy segment not used yet)
        return f"LogSegment({self.log_path!r}, base_offset={self.base_offset}, size={size})"
