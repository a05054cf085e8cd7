"""Kafka's transaction index: the ``<20-digit base offset>.txnindex`` file of a segment.

Follows Apache Kafka's ``TransactionIndex`` and ``AbortedTxn`` (storage module) byte for byte
(docs/design.md §2.2). The file is a plain sequence of 34-byte big-endian entries,
one per transaction whose ABORT marker sits in the segment:

    version i16 (0) · producerId i64 · firstOffset i64 · lastOffset i64 · lastStableOffset i64

``firstOffset`` is the transaction's first data offset (possibly in an earlier segment),
``lastOffset`` the offset of its ABORT marker, ``lastStableOffset`` the partition's last
stable offset when the marker was written (see ``ProducerStateManager.lastStableOffset``).
Entries are appended in marker order, so ``lastOffset`` strictly increases.

Like Kafka, the file is not preallocated and not created until the first append: a segment
without aborted transactions usually has no ``.txnindex`` at all, and a missing file reads as
an empty index.

Where this differs from Kafka, on purpose:

* Kafka's reader stops silently before a partial trailing entry; here reading one raises
  CorruptIndexError naming the file and the position of the partial entry (a crash between
  the write of an entry and its fsync, or a damaged copy). :meth:`~TransactionIndex.sanity_check`
  reports it too, so the loader rebuilds the index; ``allow_torn_tail=True`` reads the whole
  entries only, as Kafka does.
* Kafka checks that ``lastOffset`` increases only against entries appended since the index
  was opened; here the last entry already in the file counts too.
* An append to a file with a partial trailing entry is refused (it would misalign every
  entry after it).

No descriptor is kept: an append opens the file, writes its entry and closes it (ABORT
markers are rare), and :meth:`~TransactionIndex.flush` fsyncs it by name.

The file is reached through its directory's descriptor (:class:`~kafkafs.log.safeio.Dir`),
never through a link, and only as a regular file: a planted link, FIFO or device reads as a
missing file (no aborted transactions) and the first append replaces it by a new file.

The version is read as Kafka reads it (``AbortedTxn.version()``: the first byte of the i16,
signed) and an entry whose version is above 0 is refused, as Kafka does.
"""

from __future__ import annotations

import os
import stat
import struct
import threading
from typing import NamedTuple

from . import safeio
from .errors import CorruptIndexError, ReadOnlyLogError

__all__ = [
    "CURRENT_VERSION",
    "ENTRY_SIZE",
    "AbortedTxn",
    "TransactionIndex",
    "TxnIndexSearchResult",
    "decode_entries",
]

CURRENT_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
_READ_CHUNK = 1024 * 1024


class AbortedTxn(NamedTuple):
    """One transaction index entry (Kafka ``AbortedTxn``), offsets absolute.

    ``producer_id``; ``first_offset`` (first data offset of the transaction);
    ``last_offset`` (offset of its ABORT marker); ``last_stable_offset`` (the LSO when the
    marker was written); ``version`` (0; as read, Kafka's first-byte reading).
    """

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = CURRENT_VERSION

    def to_bytes(self) -> bytes:
        """The 34-byte entry. Raises ValueError for a value out of its field's range."""
        try:
            return _ENTRY.pack(self.version, self.producer_id, self.first_offset,
                               self.last_offset, self.last_stable_offset)
        except struct.error as exc:
            raise ValueError(f"cannot encode {self!r}: {exc}") from None

    @classmethod
    def from_bytes(cls, buf, pos: int = 0) -> AbortedTxn:
        """The entry at ``buf[pos:pos + 34]`` (no version check; see :func:`decode_entries`)."""
        _v, pid, first, last, lso = _ENTRY.unpack_from(buf, pos)
        version = int.from_bytes(bytes(buf[pos:pos + 1]), "big", signed=True)
        return cls(pid, first, last, lso, version)

    def __str__(self):
        return (f"AbortedTxn(version={self.version}, producerId={self.producer_id}, "
                f"firstOffset={self.first_offset}, lastOffset={self.last_offset}, "
                f"lastStableOffset={self.last_stable_offset})")


class TxnIndexSearchResult(NamedTuple):
    """What :meth:`TransactionIndex.collect_aborted` found (Kafka ``TxnIndexSearchResult``):
    ``aborted_txns`` (list of AbortedTxn) and ``is_complete`` (True when no later segment
    can hold another transaction overlapping the range)."""

    aborted_txns: list
    is_complete: bool


def decode_entries(data, path: str | None = None, *, allow_torn_tail: bool = False,
                   base_position: int = 0) -> list[AbortedTxn]:
    """The entries in ``data`` (the bytes of a ``.txnindex``), in file order.

    ``path`` and ``base_position`` (where ``data`` starts in the file) only name the place in
    errors. Raises CorruptIndexError for an entry whose version is above 0 (Kafka's
    "Unexpected aborted transaction version") and, unless ``allow_torn_tail``, for a partial
    entry at the end.
    """
    whole = len(data) - len(data) % ENTRY_SIZE
    if whole != len(data) and not allow_torn_tail:
        raise CorruptIndexError(
            f"{path or '<buffer>'}: partial transaction index entry at position "
            f"{base_position + whole}: {len(data) - whole} bytes where an entry takes "
            f"{ENTRY_SIZE}")
    out = []
    for pos in range(0, whole, ENTRY_SIZE):
        txn = AbortedTxn.from_bytes(data, pos)
        if txn.version > CURRENT_VERSION:
            raise CorruptIndexError(
                f"Unexpected aborted transaction version {txn.version} in transaction index "
                f"{path or '<buffer>'} at position {base_position + pos}, current version is "
                f"{CURRENT_VERSION}")
        out.append(txn)
    return out


class TransactionIndex:
    """The transaction index of the segment starting at ``start_offset`` (Kafka
    ``TransactionIndex``), stored at ``path``.

    ``writable=False`` opens it read-only: nothing is ever created, written, truncated,
    renamed or deleted (those calls raise ReadOnlyLogError), and every read looks at the file
    as it is now (a live broker may append to it). A writable index creates its file on the
    first :meth:`append`. Thread-safe: every operation holds the index's lock. ``dir``: the
    segment's open partition dir (:class:`~kafkafs.log.safeio.Dir`); without it the
    directory of ``path`` is opened, trusted (a path the caller named).
    """

    def __init__(self, path, start_offset: int, writable: bool = True, *,
                 dir: safeio.Dir | None = None):
        self._path = os.fspath(path)
        self._dir = dir if dir is not None else \
            safeio.Dir.open(os.path.dirname(self._path) or ".", follow=True)
        self._start_offset = int(start_offset)
        self._writable = bool(writable)
        self._lock = threading.RLock()
        self._dirty = False  # appended since the last flush
        self._last_offset: int | None = None
        if self._writable:
            size = self._size()
            whole = size - size % ENTRY_SIZE
            if whole:
                last = self._read(whole - ENTRY_SIZE, whole)
                if len(last) == ENTRY_SIZE:
                    self._last_offset = AbortedTxn.from_bytes(last).last_offset

    # -- properties ---------------------------------------------------------------------
    @property
    def path(self) -> str:
        return self._path

    @property
    def start_offset(self) -> int:
        """The base offset of the segment this index belongs to."""
        return self._start_offset

    @property
    def writable(self) -> bool:
        return self._writable

    @property
    def last_offset(self) -> int | None:
        """``last_offset`` of the last entry (what the next append must exceed), or None."""
        return self._last_offset

    @property
    def _name(self) -> str:
        return os.path.basename(self._path)

    def exists(self) -> bool:
        """Whether the file exists as a regular file."""
        return self._dir.is_file(self._name)

    def size_in_bytes(self) -> int:
        """The file's length (0 when it does not exist)."""
        with self._lock:
            return self._size()

    # -- file plumbing ------------------------------------------------------------------
    def _size(self) -> int:
        try:
            st = self._dir.lstat(self._name)
        except FileNotFoundError:
            return 0
        return st.st_size if stat.S_ISREG(st.st_mode) else 0

    def _read(self, start: int = 0, end: int | None = None) -> bytes:
        """Bytes ``[start, end)`` of the file (to EOF when ``end`` is None; b"" if missing)."""
        try:
            fd = self._dir.open_file(self._name)
        except FileNotFoundError:  # also a link or special file (safeio.NotRegularFileError)
            return b""
        try:
            parts, pos = [], start
            while end is None or pos < end:
                want = _READ_CHUNK if end is None else min(_READ_CHUNK, end - pos)
                part = os.pread(fd, want, pos)
                if not part:
                    break
                parts.append(part)
                pos += len(part)
            return b"".join(parts)
        finally:
            os.close(fd)

    def _check_writable(self) -> None:
        if not self._writable:
            raise ReadOnlyLogError(f"transaction index {self._path} is open read-only")

    # -- reading ------------------------------------------------------------------------
    def all_aborted_txns(self, *, allow_torn_tail: bool = False) -> list[AbortedTxn]:
        """Every entry in file order (Kafka ``allAbortedTxns``); [] when the file is missing.

        Raises CorruptIndexError on an entry version above 0 and, unless
        ``allow_torn_tail``, on a partial trailing entry (naming the file and position).
        """
        with self._lock:
            return decode_entries(self._read(), self._path, allow_torn_tail=allow_torn_tail)

    def collect_aborted(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """The aborted transactions overlapping offsets ``[fetch_offset, upper_bound_offset)``
        (Kafka ``collectAbortedTxns``): those with ``last_offset >= fetch_offset`` and
        ``first_offset < upper_bound_offset``, in file order.

        ``is_complete`` is True as soon as an entry's ``last_stable_offset`` reaches
        ``upper_bound_offset`` (the search stops there: no transaction in a later segment can
        start below that LSO and overlap the range); False means the caller must look at the
        next segment's index too. Raises CorruptIndexError like :meth:`all_aborted_txns`.
        """
        found = []
        for txn in self.all_aborted_txns():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    def sanity_check(self) -> None:
        """Raise CorruptIndexError if an entry's ``last_offset`` is below the segment's
        start offset (Kafka ``sanityCheck``), an entry has an unknown version, or the file
        ends with a partial entry. A missing file passes."""
        for txn in self.all_aborted_txns():
            if txn.last_offset < self._start_offset:
                raise CorruptIndexError(
                    f"Last offset of aborted transaction {txn} in index {self._path} is less "
                    f"than start offset {self._start_offset}")

    # -- writing ------------------------------------------------------------------------
    def append(self, txn: AbortedTxn) -> None:
        """Append ``txn`` (Kafka ``append``), creating the file if needed. Not fsynced:
        see :meth:`flush`.

        Raises ValueError when ``txn.last_offset`` is not greater than :attr:`last_offset`
        (Kafka's IllegalArgumentException) or a field is out of range, CorruptIndexError when
        the file ends with a partial entry, ReadOnlyLogError on a read-only index.
        """
        with self._lock:
            self._check_writable()
            if self._last_offset is not None and self._last_offset >= txn.last_offset:
                raise ValueError(
                    f"The last offset of appended transactions must increase sequentially, but "
                    f"{txn.last_offset} is not greater than current last offset "
                    f"{self._last_offset} of index {os.path.abspath(self._path)}")
            data = AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset,
                              txn.last_stable_offset).to_bytes()
            size = self._size()
            if size % ENTRY_SIZE:
                raise CorruptIndexError(
                    f"{self._path}: partial transaction index entry at position "
                    f"{size - size % ENTRY_SIZE}: {size % ENTRY_SIZE} bytes where an entry "
                    f"takes {ENTRY_SIZE}; not appending after it")
            fd, _created = self._dir.open_or_create(self._name, os.O_RDWR | os.O_APPEND)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
            self._dirty = True
            self._last_offset = txn.last_offset

    def truncate_to(self, offset: int) -> None:
        """Drop every entry from the first one whose ``last_offset >= offset`` on (Kafka
        ``truncateTo``; entries are in ``last_offset`` order). Nothing changes when no entry
        reaches ``offset``. Raises ReadOnlyLogError on a read-only index."""
        with self._lock:
            self._check_writable()
            new_last = None
            for n, txn in enumerate(self.all_aborted_txns(allow_torn_tail=True)):
                if txn.last_offset >= offset:
                    self._dir.truncate(self._name, n * ENTRY_SIZE)
                    self._last_offset = new_last
                    return
                new_last = txn.last_offset

    def reset(self) -> None:
        """Remove every entry (Kafka ``reset``): truncate an existing file to 0 bytes; a
        missing file stays missing. Raises ReadOnlyLogError on a read-only index."""
        with self._lock:
            self._check_writable()
            try:
                self._dir.truncate(self._name, 0)
            except FileNotFoundError:  # missing, or not a regular file (never written)
                pass
            self._last_offset = None

    def flush(self) -> None:
        """fsync what was appended since the last flush (no-op when nothing was, or
        read-only)."""
        with self._lock:
            if self._dirty:
                self._dir.fsync_file(self._name)
                self._dirty = False

    def close(self) -> None:
        """Nothing to release (no descriptor is kept); the index stays usable, as Kafka's
        ``TransactionIndexFile`` reopens its channel."""

    def delete_if_exists(self) -> bool:
        """Close and delete the file; True if it existed (Kafka ``deleteIfExists``). Raises
        ReadOnlyLogError on a read-only index."""
        with self._lock:
            self._check_writable()
            self.close()
            return self._dir.unlink(self._name)

    def rename_to(self, new_path) -> None:
        """Rename the file (if it exists) to ``new_path`` and follow it there (Kafka
        ``renameTo``; used for the ``.deleted``/``.cleaned``/``.swap`` suffixes). Raises
        ReadOnlyLogError on a read-only index."""
        with self._lock:
            self._check_writable()
            new_path = os.fspath(new_path)
            try:
                self._dir.rename(self._name, os.path.basename(new_path))  # same directory
            except FileNotFoundError:
                pass
            self._path = new_path

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        mode = "rw" if self._writable else "ro"
        return f"TransactionIndex({self._path!r}, start_offset={self._start_offset}, {mode})"
