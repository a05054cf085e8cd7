"""Where the ``kafkalog`` source's log dirs live: the one place it touches files.

A log dir is named by a local path (``/data/kafka-logs``) or by a URI of any filesystem
``pyarrow.fs`` opens (``s3://bucket/backup/broker-1``, ``hdfs://nn/kafka``,
``file:///data/kafka-logs``), for archived segments. Local paths go through
:mod:`kafkafs.log.safeio` (a log dir is untrusted input: no link followed, regular files
only) and the planner reads them with the log layer itself; URIs go through
``pyarrow.fs.FileSystem.from_uri`` (credentials as pyarrow finds them: environment,
instance profile, ...).

:func:`display` is how every path kafkalog shows (messages, warnings) is written: as the
user wrote it, credentials masked, partition dir and file in the path part of a URI.

:class:`SegmentFile` is what an executor reads a segment through: ``read(pos, n)`` and the
bytes it has read so far (:attr:`SegmentFile.bytes_read`, what the benchmark reports).
:class:`ArrowDir` is what the planner lists and reads a partition dir through on a pyarrow
filesystem.
"""

from __future__ import annotations

import functools
import os
import re

from ..log import safeio

__all__ = ["ArrowDir", "SegmentFile", "arrow_filesystem", "display", "is_uri", "join",
           "list_segments"]

_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
MASK = "***"
#: URI query parameters whose values are never shown (pyarrow's and object stores' names)
_SECRET_PARAM = re.compile(r"key|secret|token|password|passwd|credential|signature|sig$",
                           re.IGNORECASE)


def is_uri(root: str) -> bool:
    """Whether ``root`` is a URI (``scheme://...``) rather than a local path."""
    return _URI.match(root) is not None


@functools.lru_cache(maxsize=32)
def arrow_filesystem(uri: str):
    """``(pyarrow filesystem, path inside it)`` for ``uri`` (cached per process)."""
    from pyarrow import fs

    return fs.FileSystem.from_uri(uri)


def display(root: str, *names: str) -> str:
    """How to show the log dir ``root`` (a local path or a URI) with ``names`` (a partition
    dir, a file) under it in a message or a log line: as the user wrote it, credentials
    masked, the names in the path part. ``s3://KEY:SECRET@bucket/dir?region=us-east-1``
    with ``t-0`` shows as ``s3://***:***@bucket/dir/t-0?region=us-east-1``: the user info
    of the URI (before ``@``) is masked whole, and so is the value of every query parameter
    whose name says it holds a secret (``access_key``, ``secret_key``, ``session_token``,
    ``password``, ...). Every path kafkalog shows goes through this function."""
    if not is_uri(root):
        return os.path.join(root, *names)
    scheme, rest = root.split("://", 1)
    cut = len(rest)
    for sep in ("?", "#"):
        if sep in rest:
            cut = min(cut, rest.index(sep))
    head, tail = rest[:cut], rest[cut:]
    slash = head.find("/")
    authority = head if slash < 0 else head[:slash]
    if "@" in authority:
        at = authority.rindex("@")
    elif "@" in head and ":" in authority:  # a secret holding an unescaped '/'
        at = head.rindex("@")
    else:
        at = -1
    if at >= 0:
        user = head[:at]
        head = (f"{MASK}:{MASK}" if ":" in user else MASK) + head[at:]
    path = head.rstrip("/") if names else head
    path = "/".join([path, *names]) if names else path
    query, fragment = tail, ""
    if "#" in query:
        query, fragment = query.split("#", 1)
        fragment = "#" + fragment
    if query.startswith("?"):
        params = []
        for item in query[1:].split("&"):
            name, eq, _value = item.partition("=")
            params.append(f"{name}={MASK}" if eq and _SECRET_PARAM.search(name) else item)
        query = "?" + "&".join(params)
    return f"{scheme}://{path}{query}{fragment}"


def join(root: str, *names: str) -> str:
    """``root`` and ``names`` for messages: :func:`display`."""
    return display(root, *names)


def list_segments(root: str, dir_name: str) -> list:
    """``[(base offset, file name), ...]`` of the ``.log`` files in the partition dir, oldest
    first ([] when the dir is gone). Local dirs list regular files only."""
    from ..log.names import LOG_SUFFIX, parse_segment_filename

    try:
        if is_uri(root):
            names = [n for n, (d, _s, _m) in ArrowDir.open(root, dir_name).entries().items()
                     if not d]
        else:
            with safeio.Dir.open(os.path.join(root, dir_name)) as d:
                names = d.files()
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted((p[0], n) for n in names
                  if (p := parse_segment_filename(n)) and p[1] == LOG_SUFFIX and p[2] == "")


class ArrowDir:
    """A directory on a pyarrow filesystem (``fs`` and ``path`` in it), ``names`` below the
    log dir URI ``root``; ``shown``: how to name it in messages (:func:`display`). Names are
    single components."""

    def __init__(self, fs, path: str, root: str, names: tuple = ()):
        self.fs = fs
        self.path = path.rstrip("/")
        self.root, self.names = root, tuple(names)
        self.shown = display(root, *names)

    @classmethod
    def open(cls, root: str, *names: str) -> ArrowDir:
        fs, path = arrow_filesystem(root)
        return cls(fs, "/".join([path.rstrip("/"), *names]), root, names)

    def child(self, name: str) -> ArrowDir:
        return ArrowDir(self.fs, f"{self.path}/{name}", self.root, (*self.names, name))

    def entries(self) -> dict:
        """``{name: (is_dir, size, mtime_ns)}`` of the directory's entries. Raises
        FileNotFoundError when it does not exist."""
        from pyarrow import fs

        out = {}
        for info in self.fs.get_file_info(fs.FileSelector(self.path, allow_not_found=False)):
            name = info.path.rstrip("/").rsplit("/", 1)[-1]
            if info.type == fs.FileType.Directory:
                out[name] = (True, 0, None)
            elif info.type == fs.FileType.File:
                out[name] = (False, info.size, info.mtime_ns)
        return out

    def read(self, name: str) -> bytes:
        """The whole file ``name``. Raises FileNotFoundError, OSError."""
        with self.fs.open_input_file(f"{self.path}/{name}") as f:
            return f.read()

    def read_at(self, name: str, pos: int, n: int) -> bytes:
        """Bytes ``[pos, pos + n)`` of ``name`` (short at its end)."""
        with self.fs.open_input_file(f"{self.path}/{name}") as f:
            return f.read_at(n, pos)

    def join(self, name: str) -> str:
        """How to show the entry ``name`` of this directory (:func:`display`)."""
        return display(self.root, *self.names, name)


class SegmentFile:
    """A segment's ``.log`` open for reading on an executor.

    ``root``: the log dir (path or URI), ``dir_name``: the partition dir, ``name``: the
    file; ``parent``: the partition dir already open (a local :class:`~kafkafs.log.safeio.Dir`:
    a task reading many segments opens it once); ``path``: how to show the file
    (:func:`display`). Raises FileNotFoundError when it is gone (retention, a cleaner swap, a topic
    deleted) -- for a local file also when it is a link or special file. ``identity``:
    ``(st_dev, st_ino)`` of a local file (a cleaner replaces a segment by renaming a new
    file over it), None on a pyarrow filesystem."""

    def __init__(self, root: str, dir_name: str, name: str, parent: safeio.Dir | None = None):
        self._where = (root, dir_name, name)
        self.name = name
        self.bytes_read = 0
        self._fd = -1
        self._file = None
        if is_uri(root):
            fs, base = arrow_filesystem(root)
            self._file = fs.open_input_file(f"{base.rstrip('/')}/{dir_name}/{name}")
            self.identity = None
        else:
            if parent is not None:  # the partition dir, opened once for several files
                self._fd = parent.open_file(name)
            else:
                with safeio.Dir.open(os.path.join(root, dir_name)) as d:
                    self._fd = d.open_file(name)
            st = os.fstat(self._fd)
            self.identity = (st.st_dev, st.st_ino)

    @property
    def path(self) -> str:
        """How to show the file (:func:`display`; formatted when first needed: a task
        reading tens of thousands of small segments shows none of them)."""
        return display(*self._where)

    def fileno(self) -> int:
        """The local file's descriptor (-1 on a pyarrow filesystem)."""
        return self._fd

    def size(self) -> int:
        """The file's size now (bytes)."""
        if self._file is not None:
            return self._file.size()
        return os.fstat(self._fd).st_size

    def read(self, pos: int, n: int) -> bytes:
        """Bytes ``[pos, pos + n)`` (short at the end of the file). Raises OSError."""
        if n <= 0:
            return b""
        if self._file is not None:
            data = self._file.read_at(n, pos)
        else:
            data = os.pread(self._fd, n, pos)
            while len(data) < n:  # pread may return less than asked before the end
                more = os.pread(self._fd, n - len(data), pos + len(data))
                if not more:
                    break
                data += more
        self.bytes_read += len(data)
        return data

    def read_into(self, buf, pos: int) -> int:
        """Read ``len(buf)`` bytes at ``pos`` into the writable buffer ``buf`` (a
        memoryview); returns how many were read (fewer at the end of the file)."""
        view = memoryview(buf)
        got = 0
        while got < len(view):
            if self._file is not None:
                self._file.seek(pos + got)
                n = self._file.readinto(view[got:])
            else:
                n = os.preadv(self._fd, [view[got:]], pos + got)
            if not n:
                break
            got += n
        self.bytes_read += got
        return got

    def source(self):
        """The file as the log layer's walker reads it (a
        :class:`~kafkafs.log.bytesource.ByteSource`: docs/design.md §5.3)."""
        from ..log.bytesource import ArrowSource, FdSource

        if self._file is not None:
            return ArrowSource(self._file, self.path)
        return FdSource(self._fd, self.path)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
