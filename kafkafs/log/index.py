"""Kafka's sparse segment indexes: ``.index`` (OffsetIndex) and ``.timeindex`` (TimeIndex).

Follows Apache Kafka's ``AbstractIndex``, ``OffsetIndex`` and ``TimeIndex`` (storage module)
byte for byte (docs/design.md §2.2):

* ``.index``: 8-byte entries, relative offset i32 + position i32 in the ``.log``, big-endian.
* ``.timeindex``: 12-byte entries, timestamp i64 (ms) + relative offset i32, big-endian.

Offsets are stored relative to the segment's base offset; every public method takes and
returns absolute offsets.

A writable index is memory-mapped while in use. A file created here is preallocated to ``max_index_size``
rounded down to a multiple of the entry size and zero filled (as ``AbstractIndex`` does);
an existing file keeps its length until :meth:`~_Index.resize` (the loader resizes the
active segment's indexes). :meth:`~_Index.trim_to_valid_size` (roll, close) cuts the file to
its entries.

Kafka assumes an existing index file is trimmed (entries = length / entry size). A crash, or
a live broker's active segment, leaves a preallocated file with a zero tail; here the entry
count is the number of entries before it: the entries up to the last non-zero byte (rounded
up to a whole entry, at most length / entry size), found by a binary search for the first
all-zero slot (:func:`_used_entries`: about 20 reads of one entry for a 10 MiB file, not a
read of the whole tail). The only entry that can be all zero is a first ``.timeindex``
entry ``(timestamp 0, base offset)`` -- counted when entries follow it, as the rule says.
Entries dropped by truncation are zeroed so that this rule stays true for a file that is
never trimmed; a damaged file (zero slots between entries) may count fewer entries than
the rule, never more, which is safe: an index is a hint.

A read-only index (``writable=False``) never modifies, creates or maps its file: it reads a
snapshot of the entries with ``pread`` (a live broker may shrink the file under a mapping,
which would be a SIGBUS) and :meth:`~_Index.reload` refreshes it. A missing file reads as an
empty index.

An index is a hint, never the truth (docs/design.md §5.1): :meth:`~_Index.order_problem` finds
entries that break the order every lookup's binary search relies on (offsets, positions and
timestamps that do not increase, positions past the end of the ``.log``), and
:meth:`~_Index.replace_entries` installs entries rebuilt from the ``.log`` -- written to the
file when the index is writable, kept in memory (the file untouched) when it is not.

The file is reached through its directory's descriptor (:class:`~kafkafs.log.safeio.Dir`),
never through a link, and only as a regular file: a planted link, FIFO or device reads as a
missing file (an empty index: lookups scan the ``.log``) and a writable index replaces it
by a new empty file, as Kafka deletes and rebuilds a corrupt index.

The mapping (or snapshot) is a :class:`~kafkafs.log.handles.Handle` of the process-wide
descriptor budget (``kafkafs.max.open.files``): leased by each operation, evicted when
idle and the budget is full, made again on the next use -- the writable file reopened
through its directory and checked to be the file first opened (the same inode and length),
the read-only one read again. A writable index whose file was removed or replaced while
unmapped gets a new empty file of the same length (its entries are lost: an index is a
hint, lookups then scan the ``.log`` from the segment's start), said once in the log.

Synchronous and thread-safe: every operation holds the index's lock (and its lease).
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import mmap
import operator
import os
import struct
import sys
import threading
from array import array
from collections.abc import Callable, Sequence

from . import handles, safeio
from .errors import (
    CorruptIndexError,
    IndexFullError,
    InvalidOffsetError,
    ReadOnlyLogError,
)

__all__ = ["DEFAULT_MAX_INDEX_SIZE", "NO_TIMESTAMP", "OffsetIndex", "TimeIndex"]

log = logging.getLogger(__name__)

DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024  # segment.index.bytes
NO_TIMESTAMP = -1  # RecordBatch.NO_TIMESTAMP
_INT_MAX = 0x7FFFFFFF
_SCAN_CHUNK = 64 * 1024  # bytes read at a time when reading entries appended since


def _round_down(number: int, factor: int) -> int:
    return factor * (number // factor)


def _used_entries(read: Callable[[int, int], bytes], length: int, size: int) -> int:
    """The number of ``size``-byte entries before the zero tail of a ``length``-byte index
    file: the slots ``[0, n)`` hold entries, ``[n, length // size)`` are zero.

    ``read(start, end)`` returns bytes ``[start, end)`` (shorter if the file shrank: the
    missing bytes count as zero tail). Kafka's ``AbstractIndex`` sizes an index by its
    entries (it takes an existing file for trimmed, ``length / entrySize`` entries); here a
    file that ends in an entry is taken whole (one read), otherwise the first all-zero slot
    is found by binary search over the slots -- about 20 reads of one entry for a
    preallocated 10 MiB file, where a scan of the zero tail read all of it.

    On a well-formed file (entries, then zeros; only the first entry of a ``.timeindex``
    may be all zero) this is the number of entries up to the last non-zero byte, rounded up
    to a whole entry, at most ``length // size``. On a damaged one (zero slots between
    entries, bytes after the tail) it is never more than that: fewer entries, which is safe
    (an index is a hint; lookups then scan the ``.log`` from an earlier entry).
    """
    slots = length // size
    if slots == 0:
        return 0
    zero = bytes(size)

    def is_zero(slot: int) -> bool:
        data = read(slot * size, (slot + 1) * size)
        return len(data) < size or data == zero

    if not is_zero(slots - 1):
        return slots  # a trimmed file (Kafka's assumption) or a full preallocated one
    lo, hi = 0, slots - 1  # slot hi is zero; every slot before lo holds an entry
    while lo < hi:
        mid = (lo + hi) // 2
        if is_zero(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


class _Using:
    """The lease of an index's buffer for one operation (the index's lock held): reentrant,
    the buffer is :attr:`_Index._buf` inside, None outside."""

    __slots__ = ("_idx",)

    def __init__(self, idx: _Index):
        self._idx = idx

    def __enter__(self):
        idx = self._idx
        if idx._depth == 0:
            idx._buf = idx._acquire_buf()
        idx._depth += 1
        return idx._buf

    def __exit__(self, *exc) -> None:
        idx = self._idx
        idx._depth -= 1
        if idx._depth == 0:
            idx._buf = None
            if idx._leased:
                idx._leased = False
                idx._handle.release()


def _unmap(buf) -> None:
    buf.close()


def _forget(_buf) -> None:
    pass


class _Index:
    """Entry-layout-agnostic mechanics shared by the offset and time index
    (Kafka ``AbstractIndex``): the file, its mapping or snapshot, resizing, the entry count
    and binary search. Subclasses define ``ENTRY_SIZE``, how an entry is parsed and which
    field is its search key.

    The entry count and the file's length are kept in memory; the entries themselves are in
    the mapping (writable) or snapshot (read-only), used only inside ``with self._using:``
    under ``self._lock`` (see the module).
    """

    ENTRY_SIZE = 0  # set by subclasses
    _KIND = "index"  # used in messages

    def __init__(self, path, base_offset: int, max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
                 writable: bool = True, *, dir: safeio.Dir | None = None):
        self._path = os.fspath(path)
        # the directory holding the file: a segment's open partition dir, or (a path named
        # by the caller, e.g. dump's argument) the directory of ``path``, trusted
        self._dir = dir if dir is not None else \
            safeio.Dir.open(os.path.dirname(self._path) or ".", follow=True)
        self._base_offset = int(base_offset)
        self._max_index_size = int(max_index_size)
        self._writable = bool(writable)
        self._lock = threading.RLock()
        self._buf = None  # inside an operation: the mapping (writable) or snapshot
        self._depth = 0  # nested ``with self._using`` blocks
        self._leased = False  # whether the outermost block leased the handle
        self._using = _Using(self)
        self._length = 0
        self._entries = 0
        self._closed = False
        self._ident: tuple[int, int] | None = None  # (writable) (st_dev, st_ino) of the file
        self._snapshot_ino = None  # (read-only) inode the snapshot was read from
        self._pinned = False  # (read-only) entries rebuilt in memory: reload() keeps them
        self._pinned_buf: bytearray | None = None
        if self._writable:
            self._handle = handles.Handle(self._map, _unmap, name=self._path)
            self._open_writable()
        else:
            self._handle = handles.Handle(self._load_snapshot, _forget, name=self._path,
                                          resource=self._load_snapshot())

    # -- opening ---------------------------------------------------------------------
    def _acquire_buf(self):
        """The buffer for an operation: the pinned snapshot, None for an empty writable
        file, else the handle's resource (leased)."""
        if self._pinned_buf is not None:
            return self._pinned_buf
        if self._writable and self._length == 0:
            return None
        self._check_open()
        buf = self._handle.acquire()
        self._leased = True
        return buf

    def _open_writable(self) -> None:
        """Open (or create, preallocated) the file and count its entries; the mapping is
        made by the first operation that needs it."""
        size = self.ENTRY_SIZE
        fd, created = self._dir.open_or_create(self._name)
        try:
            if created:
                if self._max_index_size < size:
                    os.close(fd)
                    fd = -1
                    self._dir.unlink(self._name)
                    raise ValueError(f"Invalid max index size: {self._max_index_size}")
                os.ftruncate(fd, _round_down(self._max_index_size, size))
            st = os.fstat(fd)
            self._length = st.st_size
            self._ident = (st.st_dev, st.st_ino)
            self._entries = 0 if created else \
                self._count_entries(lambda a, b: os.pread(fd, b - a, a), self._length)
        finally:
            if fd >= 0:
                os.close(fd)

    def _map(self) -> mmap.mmap:
        """(writable; the handle's opener, under the index's lock) Map the file again,
        checking it is the one first opened at the length known; else (removed or replaced
        since) a new empty file of that length takes its place."""
        try:
            fd = self._dir.open_file(self._name, os.O_RDWR)
        except safeio.DirGoneError:
            raise
        except FileNotFoundError:  # (also a link or special file planted: warned once)
            fd = -1
        try:
            if fd >= 0:
                st = os.fstat(fd)
                if (st.st_dev, st.st_ino) != self._ident or st.st_size != self._length:
                    os.close(fd)
                    fd = -1
            if fd < 0:
                fd = self._replace_file()
            return handles.call(mmap.mmap, fd, self._length)
        finally:
            if fd >= 0:
                os.close(fd)

    def _replace_file(self) -> int:
        """(writable) A new empty file of the known length under the index's name, for a
        file removed or replaced while unmapped; returns its descriptor."""
        log.warning("%s %s was removed or replaced while kafkafs had it closed: a new empty "
                    "one takes its place (lookups scan the log segment instead)",
                    self._KIND, self._path)
        self._dir.unlink(self._name)
        fd = self._dir.create_file(self._name)
        try:
            os.ftruncate(fd, self._length)
            st = os.fstat(fd)
        except BaseException:
            os.close(fd)
            raise
        self._ident = (st.st_dev, st.st_ino)
        self._entries = 0
        return fd

    def _count_entries(self, read, length: int) -> int:
        return _used_entries(read, length, self.ENTRY_SIZE)

    def _load_snapshot(self) -> bytearray:
        """(read-only; also the handle's opener) Read the file's length and entries into
        memory; returns them (empty when the file is missing)."""
        try:
            fd = self._dir.open_file(self._name)
        except safeio.DirGoneError:
            raise
        except FileNotFoundError:  # also a link or special file (safeio.NotRegularFileError)
            self._length, self._entries = 0, 0
            return bytearray()
        try:
            st = os.fstat(fd)
            length = st.st_size
            self._snapshot_ino = st.st_ino
            entries = self._count_entries(lambda a, b: os.pread(fd, b - a, a), length)
            want = entries * self.ENTRY_SIZE
            parts, got = [], 0
            while got < want:
                part = os.pread(fd, want - got, got)
                if not part:
                    break
                parts.append(part)
                got += len(part)
        finally:
            os.close(fd)
        data = bytearray().join(parts)  # a bytearray: _load_appended extends it in place
        self._length = length
        self._entries = len(data) // self.ENTRY_SIZE
        return data

    # -- properties ------------------------------------------------------------------
    @property
    def path(self) -> str:
        """The index file's current path."""
        return self._path

    @property
    def _name(self) -> str:
        return os.path.basename(self._path)

    @property
    def base_offset(self) -> int:
        """The base offset of the segment this index belongs to."""
        return self._base_offset

    @property
    def writable(self) -> bool:
        return self._writable

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def entries(self) -> int:
        """Number of valid entries."""
        return self._entries

    @property
    def max_entries(self) -> int:
        """Entries the file can hold at its current length."""
        return self._length // self.ENTRY_SIZE

    @property
    def max_index_size(self) -> int:
        """Size in bytes the file is preallocated (and :meth:`reset`) to."""
        return self._max_index_size

    @property
    def length(self) -> int:
        """Current length of the file in bytes (preallocated space included)."""
        return self._length

    @property
    def size_in_bytes(self) -> int:
        """Bytes used by the entries (``entries * ENTRY_SIZE``)."""
        return self._entries * self.ENTRY_SIZE

    @property
    def last_offset(self) -> int:
        """Absolute offset of the last entry, or the base offset when empty."""
        with self._lock:
            if self._entries == 0:
                return self._base_offset
            with self._using:
                return self._offset_at(self._entries - 1)

    @contextlib.contextmanager
    def held(self):
        """Hold the index (its lock and its buffer's lease) for a run of operations, so that
        each of them takes neither again: an append of many batches adds many entries."""
        with self._lock, self._using:
            yield self

    def is_full(self) -> bool:
        """True iff no slot is left for an append (``AbstractIndex.isFull``)."""
        return self._entries >= self.max_entries

    def can_append_offset(self, offset: int) -> bool:
        """Whether ``offset`` fits the index (``0 <= offset - base_offset <= 2**31 - 1``)."""
        return 0 <= offset - self._base_offset <= _INT_MAX

    # -- subclass hooks --------------------------------------------------------------
    def _offset_at(self, n: int) -> int:
        """Absolute offset stored in slot ``n``."""
        raise NotImplementedError

    def _key_at(self, n: int) -> int:
        """The value lookups search by in slot ``n``."""
        raise NotImplementedError

    def _parse(self, n: int) -> tuple[int, int]:
        raise NotImplementedError

    # -- helpers ---------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"{self._KIND} {self._path} is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if not self._writable:
            raise ReadOnlyLogError(f"{self._KIND} {self._path} is opened read-only")

    def _relative_offset(self, offset: int) -> int:
        """``offset - base_offset``; raises InvalidOffsetError unless it fits an i32
        (Kafka ``IndexOffsetOverflowException``)."""
        rel = offset - self._base_offset
        if not 0 <= rel <= _INT_MAX:
            raise InvalidOffsetError(
                f"Integer overflow for offset: {offset} ({os.path.abspath(self._path)})")
        return rel

    def _largest_lower_bound(self, target: int, key: Callable[[int], int]) -> int:
        """Slot of the largest entry whose ``key`` is <= ``target``; -1 if none (empty
        index, or every entry is larger). Keys are non-decreasing across slots."""
        return bisect.bisect_right(range(self._entries), target, key=key) - 1

    def entry(self, n: int) -> tuple[int, int]:
        """The ``n``-th entry (0-based) as the subclass's absolute pair.

        Raises IndexError (Kafka: IllegalArgumentException) outside ``[0, entries)``.
        """
        with self._lock:
            self._check_open()
            with self._using:
                if not 0 <= n < self._entries:
                    raise IndexError(f"Attempt to fetch the {n}th entry from {self._KIND} "
                                     f"{os.path.abspath(self._path)}, which has size "
                                     f"{self._entries}")
                return self._parse(n)

    def _truncate_to_entries(self, n: int) -> None:
        """Keep the first ``n`` entries; zero the dropped ones (keeps the zero-tail rule)."""
        old = self._entries
        if n >= old:
            return
        size = self.ENTRY_SIZE
        with self._using as buf:
            buf[n * size:old * size] = bytes((old - n) * size)
        self._entries = n

    # -- mutation --------------------------------------------------------------------
    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset`` (``truncateTo``). Truncating to
        an offset above the last entry changes nothing. Raises ReadOnlyLogError."""
        with self._lock, self._using:
            self._check_writable()
            slot = self._largest_lower_bound(offset, self._offset_at)
            if slot < 0:
                n = 0
            elif self._offset_at(slot) == offset:
                n = slot
            else:
                n = slot + 1
            self._truncate_to_entries(n)

    def truncate(self) -> None:
        """Remove every entry (the file keeps its length). Raises ReadOnlyLogError."""
        with self._lock:
            self._check_writable()
            self._truncate_to_entries(0)

    def resize(self, new_size: int) -> bool:
        """Set the file length to ``new_size`` rounded down to a multiple of
        ``ENTRY_SIZE`` (``AbstractIndex.resize``); growing zero-fills. Entries beyond the
        new length are dropped; the mapping is made again at the next use. Returns whether
        the length changed. Raises ReadOnlyLogError, ValueError on a negative size, OSError."""
        with self._lock:
            self._check_writable()
            if new_size < 0:
                raise ValueError(f"Invalid index size: {new_size}")
            if self._depth:
                raise RuntimeError("an index is resized outside its operations' lease")
            rounded = _round_down(new_size, self.ENTRY_SIZE)
            if rounded == self._length:
                return False
            # the file as named now: when something was planted in its place since (a link,
            # a FIFO), it was removed or another file took its name, a new file holding the
            # entries replaces it
            fd, created = self._dir.open_or_create(self._name)
            try:
                st = os.fstat(fd)
                if created or (st.st_dev, st.st_ino) != self._ident:
                    os.ftruncate(fd, 0)
                    self._write_entries_to(fd, min(self._length, rounded))
                self._handle.drop()  # (no lease is held: every one is under the lock)
                os.ftruncate(fd, rounded)
                self._length = rounded
                self._ident = (st.st_dev, st.st_ino)
            finally:
                os.close(fd)
            self._entries = min(self._entries, rounded // self.ENTRY_SIZE)
            return True

    def _write_entries_to(self, fd: int, length: int) -> None:
        """Copy the first ``length`` bytes of the mapping, when it is still open, into the
        file ``fd``; when it is not, the entries are lost (the file they were in is gone)."""
        buf = self._handle.leased_if_open() if self._length else None
        if buf is None:
            if self._entries:
                log.warning("%s %s was removed or replaced: its entries are lost (lookups "
                            "scan the log segment instead)", self._KIND, self._path)
            self._entries = 0
            return
        try:
            data = buf[:length]  # a copy (bytes)
        finally:
            self._handle.release()
        written = 0
        while written < len(data):
            written += os.pwrite(fd, data[written:], written)

    def trim_to_valid_size(self) -> None:
        """Cut the file to its entries (``trimToValidSize``: on roll and close).
        Raises ReadOnlyLogError."""
        with self._lock:
            self._check_writable()
            self.resize(self.size_in_bytes)

    def reset(self) -> None:
        """Remove every entry and resize to ``max_index_size`` (``AbstractIndex.reset``)."""
        with self._lock:
            self.truncate()
            self.resize(self._max_index_size)

    def flush(self) -> None:
        """Write dirty pages of the mapping and the file's metadata to disk (msync + fsync).
        A no-op for a read-only index."""
        with self._lock:
            if not self._writable or self._closed:
                return
            buf = self._handle.leased_if_open()
            if buf is not None:
                try:
                    buf.flush()
                finally:
                    self._handle.release()
            self._dir.fsync_file(self._name)

    def close(self) -> None:
        """Trim (writable) and release the mapping. Idempotent."""
        with self._lock:
            if self._closed:
                return
            try:
                if self._writable:
                    self.trim_to_valid_size()
            finally:
                self._close_handler()

    def _close_handler(self) -> None:
        self._handle.close()
        self._pinned_buf = None
        self._entries = 0
        self._closed = True

    def delete(self) -> bool:
        """Release the mapping and remove the file (``deleteIfExists``); returns whether a
        file was removed. Raises ReadOnlyLogError."""
        with self._lock:
            if not self._writable:
                raise ReadOnlyLogError(f"{self._KIND} {self._path} is opened read-only")
            self._close_handler()
            return self._dir.unlink(self._name)

    def rename_to(self, new_path) -> None:
        """Rename the backing file (the mapping stays valid). Raises ReadOnlyLogError,
        OSError."""
        with self._lock:
            if not self._writable:
                raise ReadOnlyLogError(f"{self._KIND} {self._path} is opened read-only")
            new_path = os.fspath(new_path)
            self._dir.rename(self._name, os.path.basename(new_path))  # in the same directory
            self._path = new_path

    def reload(self) -> bool:
        """(read-only) Re-read the file: a live broker appends into its preallocated file,
        trims it on roll, or it appears later. Returns whether the entry count or length
        changed. A writable index owns its file: no-op, returns False."""
        with self._lock:
            if self._writable or self._closed or self._pinned:
                return False
            before = (self._entries, self._length)
            with self._using:
                appended = self._load_appended()
            if not appended:
                self._handle.drop()  # read again by the next lease: now
                with self._using:
                    pass
            return before != (self._entries, self._length)

    def _load_appended(self) -> bool:
        """(read-only) Extend the snapshot with the entries a writer appended since it was
        read, reading only those: the same file (inode) at the same length (a broker's
        preallocated active index), its last known entry unchanged. They end at the first
        all-zero entry (none is ever written: Kafka indexes a batch only after
        ``index.interval.bytes``, so relative offset and position are never both 0).
        Returns False when that does not hold (a resize, a truncation, a new file): the
        caller reads the whole file again (its entries counted by :func:`_used_entries`)."""
        size = self.ENTRY_SIZE
        n = self._entries
        if n == 0 or not self._buf:
            return False
        try:
            fd = self._dir.open_file(self._name)
        except OSError:
            return False
        try:
            st = os.fstat(fd)
            if (st.st_ino, st.st_size) != (self._snapshot_ino, self._length) or \
                    os.pread(fd, size, (n - 1) * size) != self._buf[(n - 1) * size:n * size]:
                return False
            zero = bytes(size)
            parts = []
            pos = n * size
            while pos + size <= st.st_size:
                chunk = os.pread(fd, min(_SCAN_CHUNK, _round_down(st.st_size - pos, size)), pos)
                lo, hi = 0, len(chunk) // size  # the first all-zero entry (entries, then zeros)
                while lo < hi:
                    mid = (lo + hi) // 2
                    if chunk[mid * size:(mid + 1) * size] == zero:
                        hi = mid
                    else:
                        lo = mid + 1
                parts.append(chunk[:lo * size])
                if lo * size < len(chunk) or not chunk:
                    break
                pos += len(chunk)
        finally:
            os.close(fd)
        new = b"".join(parts)
        if new:
            del self._buf[n * size:]  # a partial last entry, if one was read
            self._buf += new  # in place (readers hold no buffer export across calls)
            self._entries = len(self._buf) // size
        return True

    def sanity_check(self) -> None:
        """Raise CorruptIndexError on obvious damage (Kafka's messages). Subclasses."""
        raise NotImplementedError

    # -- order checks and rebuilt entries --------------------------------------------
    def _columns(self) -> tuple[list[int], list[int]]:
        """The entries as two lists: (key field, value field) per entry, as stored
        (relative offsets, not absolute)."""
        raise NotImplementedError

    def order_problem(self, log_size: int | None = None) -> str | None:
        """The first way the entries break the order lookups rely on, in the style of Kafka's
        index messages; None when they are in order. Subclasses say what is checked
        (:meth:`_order_rules`); ``log_size``: the ``.log``'s size in bytes (positions must
        lie below it), or None. Costs a pass over the entries at C speed (no Python loop
        per entry)."""
        with self._lock:
            self._check_open()
            with self._using:
                columns = self._columns()
            if not columns[0]:
                return None
            for find, describe in self._order_rules(*columns, log_size):
                n = find()
                if n >= 0:
                    return (f"Corrupt {self._KIND} found, {self._KIND} file "
                            f"({os.path.abspath(self._path)}) has entry {n} with {describe(n)}")
            return None

    def _order_rules(self, keys: list[int], values: list[int], log_size: int | None):
        """``[(find, describe)]``: ``find()`` gives the first entry breaking a rule (-1: none),
        ``describe(n)`` what is wrong with entry ``n``."""
        raise NotImplementedError

    @staticmethod
    def _first_below(values: Sequence[int], bound: int) -> int:
        """Index of the first value below ``bound``, or -1 (a C-speed test first)."""
        if not values or min(values) >= bound:
            return -1
        return next(n for n, v in enumerate(values) if v < bound)

    @staticmethod
    def _first_break(values: Sequence[int], strict: bool) -> int:
        """Index ``n >= 1`` of the first value that does not increase over ``values[n - 1]``
        (strictly or not), or -1 when they are in order."""
        ok = operator.lt if strict else operator.le
        if all(map(ok, values, values[1:])):
            return -1
        return next(n for n in range(1, len(values)) if not ok(values[n - 1], values[n]))

    def _pack(self, entries: Sequence[tuple[int, int]]) -> bytes:
        raise NotImplementedError

    def replace_entries(self, entries: Sequence[tuple[int, int]]) -> None:
        """Replace every entry with ``entries`` (absolute pairs as :meth:`entry` returns them,
        in order), rebuilt from the ``.log`` by the caller. A writable index writes them to
        its file (grown when needed; a file that was trimmed to its entries is trimmed again).
        A read-only index keeps them in memory and leaves the file alone; :meth:`reload` then
        keeps them. Raises InvalidOffsetError for an offset that does not fit the index."""
        with self._lock:
            self._check_open()
            data = self._pack(entries)
            if not self._writable:
                self._pinned_buf = bytearray(data)
                self._entries = len(entries)
                self._length = len(data)
                self._pinned = True
                self._handle.close()  # the file's snapshot is not used any more
                return
            trimmed = self._length == self.size_in_bytes
            self._truncate_to_entries(0)
            if len(data) > self._length:
                self.resize(len(data))
            if data:
                with self._using as buf:
                    buf[:len(data)] = data
            self._entries = len(entries)
            if trimmed:
                self.trim_to_valid_size()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return (f"{type(self).__name__}({self._path!r}, base_offset={self._base_offset}, "
                f"entries={self._entries}, max_entries={self.max_entries}"
                f"{'' if self._writable else ', read-only'})")


class OffsetIndex(_Index):
    """Offset → position in the ``.log`` (Kafka ``OffsetIndex``).

    Entries are 8 bytes: relative offset i32, position i32 (bytes), big-endian. Offsets must
    strictly increase. ``path``: the ``.index`` file; ``base_offset``: the segment's base
    offset; ``max_index_size``: bytes a new file is preallocated to (``segment.index.bytes``);
    ``writable=False``: never modify the file (see the module docs).
    """

    ENTRY_SIZE = 8
    _KIND = "index"
    _ENTRY = struct.Struct(">ii")
    _REL = struct.Struct(">i")

    def _offset_at(self, n: int) -> int:
        return self._base_offset + self._REL.unpack_from(self._buf, n * 8)[0]

    _key_at = _offset_at

    def _parse(self, n: int) -> tuple[int, int]:
        rel, pos = self._ENTRY.unpack_from(self._buf, n * 8)
        return self._base_offset + rel, pos

    def entry(self, n: int) -> tuple[int, int]:
        """The ``n``-th entry as ``(absolute offset, position)``. Raises IndexError."""
        return super().entry(n)

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """``(offset, position)`` of the largest entry with offset <= ``target_offset``;
        ``(base_offset, 0)`` when there is none (``OffsetIndex.lookup``)."""
        with self._lock:
            self._check_open()
            if self._entries == 0:
                return self._base_offset, 0
            with self._using:
                slot = self._largest_lower_bound(target_offset, self._offset_at)
                if slot < 0:
                    return self._base_offset, 0
                return self._parse(slot)

    def fetch_upper_bound_offset(self, position: int) -> int | None:
        """The offset of the first entry whose position is at or past ``position`` (bytes),
        or None when there is none (``OffsetIndex.fetchUpperBoundOffset``): no offset of a
        read ending at ``position`` reaches it. Entries are in position order (checked when
        the index was opened)."""
        with self._lock:
            self._check_open()
            with self._using:
                lo, hi = 0, self._entries
                while lo < hi:
                    mid = (lo + hi) // 2
                    if self._ENTRY.unpack_from(self._buf, mid * 8)[1] < position:
                        lo = mid + 1
                    else:
                        hi = mid
                return None if lo == self._entries else self._offset_at(lo)

    def append(self, offset: int, position: int) -> None:
        """Add ``(offset, position)`` (``OffsetIndex.append``).

        Raises IndexFullError when full; InvalidOffsetError unless ``offset`` is larger than
        the last entry's offset (any offset is accepted in an empty index) or when
        ``offset - base_offset`` does not fit an i32; ValueError for a position outside
        ``[0, 2**31 - 1]``; ReadOnlyLogError.
        """
        self.append_entries(((offset, position),))

    def append_entries(self, entries: Sequence[tuple[int, int]]) -> None:
        """Add ``entries`` (``(offset, position)`` pairs, in order) as :meth:`append` of each
        would, in one pass: one lease, one write into the mapping (an append of many
        batches, ``LogSegment.append``'s index pass). Raises as :meth:`append` does, with
        none of them added."""
        if not entries:
            return
        with self._lock, self._using:
            self._check_writable()
            n = self._entries
            if n + len(entries) > self.max_entries:
                raise IndexFullError(f"Attempt to append to a full index (size = {n}).")
            prev = self._offset_at(n - 1) if n else None
            words = []
            for offset, position in entries:
                if prev is not None and offset <= prev:
                    raise InvalidOffsetError(
                        f"Attempt to append an offset {offset} to position {n} no larger "
                        f"than the last offset appended ({prev}) to "
                        f"{os.path.abspath(self._path)}")
                rel = self._relative_offset(offset)
                if not 0 <= position <= _INT_MAX:
                    raise ValueError(f"Index position {position} does not fit an int "
                                     f"({os.path.abspath(self._path)})")
                words += (rel, position)
                prev = offset
                n += 1
            start = self._entries * 8
            self._buf[start:n * 8] = struct.pack(f">{len(words)}i", *words)
            self._entries = n

    def _columns(self) -> tuple[list[int], list[int]]:
        words = array("i")
        words.frombytes(bytes(self._buf[:self._entries * 8]) if self._buf else b"")
        if sys.byteorder == "little":
            words.byteswap()
        return words[0::2].tolist(), words[1::2].tolist()

    def _order_rules(self, rels: list[int], positions: list[int], log_size: int | None):
        """Offsets at or above the base offset and strictly increasing, positions at or above
        0, strictly increasing and below ``log_size``."""
        base = self._base_offset
        rules = [
            (lambda: self._first_below(rels, 0), lambda n: f"offset {base + rels[n]} which is "
             f"less than the base offset {base}"),
            (lambda: self._first_break(rels, strict=True), lambda n: f"offset {base + rels[n]} "
             f"which is not larger than the offset {base + rels[n - 1]} of the entry before it"),
            (lambda: self._first_below(positions, 0), lambda n: f"position {positions[n]} "
             "which is negative"),
            (lambda: self._first_break(positions, strict=True), lambda n: f"position "
             f"{positions[n]} which is not larger than the position {positions[n - 1]} of the "
             "entry before it")]
        if log_size is not None:  # positions increase here: the first past the end, if any
            rules.append((lambda: bisect.bisect_left(positions, log_size)
                          if positions[-1] >= log_size else -1,
                          lambda n: f"position {positions[n]} which is past the end of the "
                          f"log segment ({log_size} bytes)"))
        return rules

    def _pack(self, entries: Sequence[tuple[int, int]]) -> bytes:
        return b"".join(self._ENTRY.pack(self._relative_offset(o), p) for o, p in entries)

    def sanity_check(self) -> None:
        """Raise CorruptIndexError when the last offset is below the base offset or the file
        length is not a multiple of 8 (``OffsetIndex.sanityCheck``)."""
        with self._lock:
            path = os.path.abspath(self._path)
            last = self.last_offset
            if self._entries != 0 and last < self._base_offset:
                raise CorruptIndexError(
                    f"Corrupt index found, index file {path} has non-zero size but the last "
                    f"offset is {last} which is less than the base offset {self._base_offset}")
            if self._length % self.ENTRY_SIZE != 0:
                raise CorruptIndexError(
                    f"Index file {path} is corrupt, found {self._length} bytes which is neither "
                    f"positive nor a multiple of {self.ENTRY_SIZE}")


class TimeIndex(_Index):
    """Timestamp → offset (Kafka ``TimeIndex``).

    Entries are 12 bytes: timestamp i64 (ms), relative offset i32, big-endian. An entry
    ``(T, O)`` says that the largest timestamp seen up to offset ``O`` is ``T``: a record
    with a timestamp above ``T`` comes after ``O``. Timestamps strictly increase across
    entries. The last slot of the file is reserved for the entry written when the segment
    rolls (:meth:`is_full`). Arguments as for :class:`OffsetIndex`.
    """

    ENTRY_SIZE = 12
    _KIND = "time index"
    _ENTRY = struct.Struct(">qi")
    _TS = struct.Struct(">q")
    _REL = struct.Struct(">i")

    def _offset_at(self, n: int) -> int:
        return self._base_offset + self._REL.unpack_from(self._buf, n * 12 + 8)[0]

    def _key_at(self, n: int) -> int:
        return self._TS.unpack_from(self._buf, n * 12)[0]

    def _parse(self, n: int) -> tuple[int, int]:
        ts, rel = self._ENTRY.unpack_from(self._buf, n * 12)
        return ts, self._base_offset + rel

    def is_full(self) -> bool:
        """True when only the reserved last slot is left (``entries >= max_entries - 1``)."""
        return self._entries >= self.max_entries - 1

    @property
    def last_entry(self) -> tuple[int, int]:
        """``(timestamp, offset)`` of the last entry; ``(-1, base_offset)`` when empty."""
        with self._lock:
            if self._entries == 0:
                return NO_TIMESTAMP, self._base_offset
            with self._using:
                return self._parse(self._entries - 1)

    def entry(self, n: int) -> tuple[int, int]:
        """The ``n``-th entry as ``(timestamp, absolute offset)``. Raises IndexError."""
        return super().entry(n)

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """``(timestamp, offset)`` of the largest entry with timestamp <= ``target_timestamp``;
        ``(-1, base_offset)`` when there is none (``TimeIndex.lookup``)."""
        with self._lock:
            self._check_open()
            if self._entries == 0:
                return NO_TIMESTAMP, self._base_offset
            with self._using:
                slot = self._largest_lower_bound(target_timestamp, self._key_at)
                if slot < 0:
                    return NO_TIMESTAMP, self._base_offset
                return self._parse(slot)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append ``(timestamp, offset)`` if ``timestamp`` is larger than the last entry's
        (-1 when empty, so an index of timestamp-less data stays empty); an equal timestamp
        is silently ignored (``TimeIndex.maybeAppend``).

        ``skip_full_check``: used on roll and close, where Kafka writes the final entry into
        the reserved slot. Raises IndexFullError when full (unless skipped, or when not even
        the reserved slot is left); InvalidOffsetError when ``offset`` is below the last
        entry's offset, when ``timestamp`` is below the last entry's timestamp (Kafka:
        IllegalStateException), or when ``offset - base_offset`` does not fit an i32;
        ReadOnlyLogError.
        """
        self.maybe_append_entries(((timestamp, offset),), skip_full_check)

    def maybe_append_entries(self, entries: Sequence[tuple[int, int]],
                             skip_full_check: bool = False) -> None:
        """:meth:`maybe_append` of each of ``entries`` (``(timestamp, offset)`` pairs, in
        order) in one pass: one lease, one write into the mapping (an append of many
        batches, ``LogSegment.append``'s index pass). Raises as :meth:`maybe_append` does,
        with none of them added."""
        with self._lock, self._using:
            self._check_writable()
            n = self._entries
            last_ts, last_off = self.last_entry
            words = []
            for timestamp, offset in entries:
                if not skip_full_check and n >= self.max_entries - 1:
                    raise IndexFullError(
                        f"Attempt to append to a full time index (size = {n}).")
                if n != 0 and offset < last_off:
                    raise InvalidOffsetError(
                        f"Attempt to append an offset ({offset}) to slot {n} no larger than "
                        f"the last offset appended ({last_off}) to "
                        f"{os.path.abspath(self._path)}")
                if n != 0 and timestamp < last_ts:
                    raise InvalidOffsetError(
                        f"Attempt to append a timestamp ({timestamp}) to slot {n} no larger "
                        f"than the last timestamp appended ({last_ts}) to "
                        f"{os.path.abspath(self._path)}")
                if timestamp > last_ts:
                    rel = self._relative_offset(offset)
                    if n >= self.max_entries:
                        raise IndexFullError(
                            f"Attempt to append to a full time index (size = {n}).")
                    words += (timestamp, rel)
                    last_ts, last_off = timestamp, offset
                    n += 1
            if words:
                start = self._entries * 12
                self._buf[start:n * 12] = struct.pack(f">{'qi' * (len(words) // 2)}", *words)
                self._entries = n

    def _columns(self) -> tuple[list[int], list[int]]:
        data = bytes(self._buf[:self._entries * 12]) if self._buf else b""
        pairs = list(self._ENTRY.iter_unpack(data))
        return [p[0] for p in pairs], [p[1] for p in pairs]

    def _order_rules(self, stamps: list[int], rels: list[int], log_size: int | None):
        """Timestamps strictly increasing, offsets at or above the base offset and never
        decreasing (``log_size`` is not used: the entries hold no positions)."""
        base = self._base_offset
        return [
            (lambda: self._first_break(stamps, strict=True), lambda n: f"timestamp {stamps[n]} "
             f"which is not larger than the timestamp {stamps[n - 1]} of the entry before it"),
            (lambda: self._first_below(rels, 0), lambda n: f"offset {base + rels[n]} which is "
             f"less than the base offset {base}"),
            (lambda: self._first_break(rels, strict=False), lambda n: f"offset {base + rels[n]} "
             f"which is less than the offset {base + rels[n - 1]} of the entry before it")]

    def _pack(self, entries: Sequence[tuple[int, int]]) -> bytes:
        return b"".join(self._ENTRY.pack(t, self._relative_offset(o)) for t, o in entries)

    def sanity_check(self) -> None:
        """Raise CorruptIndexError when the last timestamp is below the first, the last offset
        below the base offset, or the length not a multiple of 12
        (``TimeIndex.sanityCheck``)."""
        with self._lock:
            path = os.path.abspath(self._path)
            last_ts, last_off = self.last_entry
            if self._entries != 0:
                with self._using:
                    first_ts = self._key_at(0)
                if last_ts < first_ts:
                    raise CorruptIndexError(
                        f"Corrupt time index found, time index file ({path}) has non-zero size "
                        f"but the last timestamp is {last_ts} which is less than the first "
                        f"timestamp {first_ts}")
                if last_off < self._base_offset:
                    raise CorruptIndexError(
                        f"Corrupt time index found, time index file ({path}) has non-zero size "
                        f"but the last offset is {last_off} which is less than the first offset "
                        f"{self._base_offset}")
            if self._length % self.ENTRY_SIZE != 0:
                raise CorruptIndexError(
                    f"Time index file {path} is corrupt, found {self._length} bytes which is "
                    f"neither positive nor a multiple of {self.ENTRY_SIZE}")
