"""Where the batch walker reads a segment's bytes from: one small protocol, two kinds.

The walker (:mod:`kafkafs.log.walk`, docs/design.md §5.3) holds the damage rules and knows
nothing of files: it asks a :class:`ByteSource` for

* ``pread(pos, n) -> bytes``: up to ``n`` bytes at byte position ``pos`` (fewer only at the
  end of the file), raising OSError;
* ``size() -> int``: the file's size in bytes now (a writer may have grown it);
* ``first_data_at(pos) -> int | None``: the position of the first byte that is not zero at
  or after ``pos``, None when zeros reach the end (the unwritten rest of a preallocated
  segment);
* ``name``: how to name the file in a :class:`~kafkafs.record.errors.CorruptRecordError`.

:class:`FdSource` reads a local file through a descriptor or a
:class:`~kafkafs.log.handles.Handle` lease (``pread``; holes skipped with
``SEEK_DATA``/``SEEK_HOLE``); :class:`ArrowSource` reads a ``pyarrow`` ``RandomAccessFile``
(``read_at``: an object store, HDFS), comparing bytes in chunks; :class:`BufferSource`
serves bytes a reader already holds (the cleaner's chunk a C loop stopped in) before it asks
the file. ``pyarrow`` is never imported here: the source only calls the file's methods.
Sizes and positions are bytes.
"""

from __future__ import annotations

import os
from typing import Protocol

__all__ = ["ArrowSource", "BufferSource", "ByteSource", "FdSource", "first_data_at"]

ZERO_CHECK_CHUNK = 1024 * 1024  # bytes compared at a time when checking a zero tail


class ByteSource(Protocol):
    """The protocol (see the module)."""

    name: str

    def pread(self, pos: int, n: int) -> bytes: ...

    def size(self) -> int: ...

    def first_data_at(self, pos: int) -> int | None: ...


def first_nonzero(read, pos: int, end: int, chunk: int = ZERO_CHECK_CHUNK) -> int | None:
    """The position of the first byte that is not zero in ``[pos, end)``, reading ``chunk``
    bytes at a time with ``read(position, n) -> bytes``; None when zeros reach ``end`` or
    a read comes back empty (the file ended early). Raises what ``read`` raises."""
    while pos < end:
        data = read(pos, min(chunk, end - pos))
        if not data:
            return None
        if any(data):
            return pos + len(data) - len(data.lstrip(b"\x00"))
        pos += len(data)
    return None


def first_data_at(fd: int, pos: int) -> int | None:
    """The position of the first byte that is not zero at or after ``pos`` in the file open
    as ``fd``, or None when zeros reach its end (the unwritten rest of a preallocated
    segment). Holes are skipped without reading (SEEK_DATA/SEEK_HOLE). Raises OSError."""
    size = os.fstat(fd).st_size
    at = pos
    while at < size:
        try:
            data_at = max(os.lseek(fd, at, os.SEEK_DATA), at)
        except OSError:  # ENXIO: nothing but a hole to the end
            return None
        hole_at = min(os.lseek(fd, data_at, os.SEEK_HOLE), size)
        found = first_nonzero(lambda p, n: os.pread(fd, n, p), data_at, hole_at)
        if found is not None:
            return found
        at = max(hole_at, at + 1)
    return None


class FdSource:
    """A local file as a :class:`ByteSource`. ``file``: a descriptor (int; the caller keeps
    it open and closes it) or a :class:`~kafkafs.log.handles.Handle` (leased for each call,
    never held across the walker's yields); ``name``: the path for errors. ``writable``:
    reads are ``bytearray`` s, so the batches walked are writable views (a staged run's
    base offsets are stamped in place when a log appends them)."""

    __slots__ = ("_file", "name", "writable")

    def __init__(self, file, name: str, writable: bool = False):
        self._file = file
        self.name = name
        self.writable = writable

    def _lease(self):
        f = self._file
        return _Plain(f) if isinstance(f, int) else f

    def pread(self, pos: int, n: int) -> bytes | bytearray:
        with self._lease() as fd:
            if self.writable:
                return _pread_into(fd, n, pos)
            data = os.pread(fd, n, pos)
            while 0 < len(data) < n:  # pread may return less than asked before the end
                more = os.pread(fd, n - len(data), pos + len(data))
                if not more:
                    break
                data += more
            return data

    def size(self) -> int:
        with self._lease() as fd:
            return os.fstat(fd).st_size

    def first_data_at(self, pos: int) -> int | None:
        with self._lease() as fd:
            return first_data_at(fd, pos)


def _pread_into(fd: int, n: int, pos: int) -> bytearray:
    """Up to ``n`` bytes at ``pos`` of ``fd`` in a new bytearray (short only at the end)."""
    buf = bytearray(n)
    got = 0
    while got < n:
        k = os.preadv(fd, [memoryview(buf)[got:]], pos + got)
        if not k:
            break
        got += k
    del buf[got:]
    return buf


class _Plain:
    """A bare descriptor used like a Handle lease (``with _Plain(fd) as fd``)."""

    __slots__ = ("fd",)

    def __init__(self, fd: int):
        self.fd = fd

    def __enter__(self) -> int:
        return self.fd

    def __exit__(self, *exc) -> None:
        return None


class ArrowSource:
    """A ``pyarrow`` ``RandomAccessFile`` (``read_at(n, pos)``, ``size()``) as a
    :class:`ByteSource`; ``name``: how to show it (credentials masked by the caller)."""

    __slots__ = ("_file", "name")

    def __init__(self, file, name: str):
        self._file = file
        self.name = name

    def pread(self, pos: int, n: int) -> bytes:
        return self._file.read_at(n, pos) if n > 0 else b""

    def size(self) -> int:
        return self._file.size()

    def first_data_at(self, pos: int) -> int | None:
        return first_nonzero(self.pread, pos, self.size())


class BufferSource:
    """Bytes already read from a file as a :class:`ByteSource`: ``buf`` holds the file's bytes
    ``[at, at + len(buf))``; a read inside them is a ``memoryview`` of ``buf`` (no copy), any
    other read, the size and the zero check go to ``file`` (a :class:`ByteSource`)."""

    __slots__ = ("_at", "_buf", "_file", "name")

    def __init__(self, buf, at: int, file):
        self._buf, self._at, self._file = memoryview(buf), at, file
        self.name = file.name

    def pread(self, pos: int, n: int):
        i = pos - self._at
        if 0 <= i and i + n <= len(self._buf):
            return self._buf[i:i + n]
        return self._file.pread(pos, n)

    def size(self) -> int:
        return self._file.size()

    def first_data_at(self, pos: int) -> int | None:
        return self._file.first_data_at(pos)
