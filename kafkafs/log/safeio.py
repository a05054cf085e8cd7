"""The one way the log layer touches files inside a log dir, which is untrusted input
(docs/design.md §2.4: nothing kafkafs does inside a log dir may reach outside it).

Whoever can write into a log dir must not make kafkafs create, write, truncate, rename,
delete or read anything elsewhere, by planting a symbolic link, a FIFO or a device node, or
by swapping a partition dir for a link after it was looked at. So:

* A partition dir is opened as a directory descriptor (``O_DIRECTORY | O_NOFOLLOW``,
  :meth:`Dir.open`), and every open, rename, unlink, stat and listing of its files is made
  relative to that descriptor (``dir_fd=``): a swap of the dir for a link later changes
  nothing (reopened, it must be the same directory: see below). Names are single path
  components (no ``/``).
* A file is opened with ``O_NOFOLLOW | O_NONBLOCK`` (a planted FIFO cannot block the open)
  and checked with ``fstat`` on the opened descriptor, not with a racy ``lstat`` before the
  open. Anything but a regular file is closed again and raised as
  :class:`NotRegularFileError`, a ``FileNotFoundError``: for kafkafs the file does not
  exist. One warning per path is logged (:func:`warn_once`), naming the path and what it is.
* A file kafkafs creates is created with ``O_CREAT | O_EXCL | O_NOFOLLOW``; an entry that is
  not a regular file standing in the way is unlinked first (``unlink`` never follows a link,
  it removes the link itself): planted entries are replaced, never written through.
* :meth:`Dir.atomic_write`: unlink a planted ``<name>.tmp``, create it exclusively, write,
  fsync, rename over ``<name>`` (``rename`` replaces a link, not its target), fsync the dir.

The configured log dir roots are the administrator's and trusted: they are opened with
``follow=True``. A device node can only be planted with ``CAP_MKNOD`` (by root); it is
opened non-blocking and closed at once. Hard links are regular files: Linux's
``fs.protected_hardlinks`` (on by default) keeps a user from linking a file they do not own.

A log's partition dir is not held open while idle (:meth:`Dir.open` with ``cached=True``,
:meth:`Dir.of`): its descriptor is a :class:`~kafkafs.log.handles.Handle` of the process-wide
descriptor budget, leased for each operation and reopened by its path when it was evicted --
``O_DIRECTORY | O_NOFOLLOW`` again (the log dir root, the path's parent, is trusted; the
partition dir is not), and the directory reached must be the one first opened (the same
``(st_dev, st_ino)``). A partition dir moved, removed, or swapped for a link or another
directory since is gone for kafkafs (:class:`DirGoneError`, a FileNotFoundError): never
followed, never taken for the old one. While its descriptor stays in the cache, a dir moved
away is still used where it is (the log goes on in the moved dir).

Synchronous, thread-safe; no trio. A descriptor is closed only when no thread uses it (leases,
:mod:`kafkafs.log.handles`): a pinned :class:`Dir` (``Dir.open`` without ``cached``, the
scoped opens of roots and named paths) by :meth:`Dir.close` or garbage collection, a cached
one by eviction or :meth:`Dir.close`, after the last lease -- so no thread can ever use a
descriptor number that was closed and reused.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import shutil
import stat
import threading

from . import handles

__all__ = ["Dir", "DirGoneError", "NotRegularFileError", "describe", "is_file", "parent", "scan",
           "warn_once"]

log = logging.getLogger(__name__)

TMP_SUFFIX = ".tmp"  # an atomic write's temporary file: <name>.tmp

_OPEN = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE = os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
# what open(2) says when O_NOFOLLOW meets a link (ELOOP), an O_WRONLY FIFO has no reader or
# the name is a socket (ENXIO), a directory is opened for writing (EISDIR), or a device has
# no driver (ENODEV)
_NOT_REGULAR_ERRNOS = (errno.ELOOP, errno.ENXIO, errno.EISDIR, errno.ENODEV)

# what reopening a cached partition dir by its path says when it is no longer there
_GONE = {errno.ENOENT: "moved or removed", errno.ELOOP: "a link in its place",
         errno.ENOTDIR: "a link or file in its place"}

_warned: set[str] = set()
_warned_lock = threading.Lock()


class NotRegularFileError(FileNotFoundError):
    """A name in a log dir is a symbolic link, FIFO, socket, device or directory where
    kafkafs expects a regular file. A ``FileNotFoundError`` (errno ENOENT): for kafkafs the
    file does not exist. ``filename``: its path; ``kind``: what it is (:func:`describe`)."""

    def __init__(self, path: str, kind: str):
        super().__init__(errno.ENOENT, f"not a regular file but a {kind}", path)
        self.kind = kind


class DirGoneError(FileNotFoundError):
    """A cached partition dir cannot be reopened as the directory first opened: it was
    moved, removed, or replaced by a link or another directory since (ENOENT). For kafkafs
    the partition is gone; nothing is followed."""

    def __init__(self, path: str, why: str):
        super().__init__(errno.ENOENT, f"partition dir gone ({why}): kafkafs never follows "
                         "it to another directory", path)


def describe(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, in ls(1)'s words: ``"symbolic link"``,
    ``"FIFO"``, ``"socket"``, ``"character device"``, ``"block device"``, ``"directory"``,
    ``"regular file"``."""
    for test, name in ((stat.S_ISLNK, "symbolic link"), (stat.S_ISFIFO, "FIFO"),
                       (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device"), (stat.S_ISDIR, "directory"),
                       (stat.S_ISREG, "regular file")):
        if test(mode):
            return name
    return "special file"


def warn_once(path: str, kind: str, expected: str = "regular file") -> None:
    """Log, once per ``path`` for the life of the process, that kafkafs skips ``path``
    because it is a ``kind`` where a ``expected`` belongs."""
    with _warned_lock:
        if path in _warned:
            return
        _warned.add(path)
    log.warning("Skipping %s: it is a %s, not a %s (kafkafs never follows a symbolic link "
                "nor opens a special file in a log dir)", path, kind, expected)


def scan(directory: str | int) -> dict[str, int]:
    """``{name: st_mode}`` of every entry of ``directory`` (a path or a directory
    descriptor), symbolic links not followed; only the file type bits are reliable (taken
    from the directory entry when the filesystem gives it). Entries removed meanwhile are
    left out. Raises OSError when the directory cannot be listed."""
    out = {}
    with os.scandir(directory) as entries:
        for e in entries:
            try:
                if e.is_file(follow_symlinks=False):
                    out[e.name] = stat.S_IFREG
                elif e.is_dir(follow_symlinks=False):
                    out[e.name] = stat.S_IFDIR
                elif e.is_symlink():
                    out[e.name] = stat.S_IFLNK
                else:
                    out[e.name] = e.stat(follow_symlinks=False).st_mode
            except FileNotFoundError:
                continue
    return out


def _write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` at ``fd``'s position (``os.write`` may write less)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _check_name(name: str) -> str:
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"not a file name inside a directory: {name!r}")
    return name


@contextlib.contextmanager
def parent(path, dir: Dir | None = None):
    """``(Dir, name)`` of the file ``path``, as a context manager: ``dir`` and the last
    component of ``path`` when ``dir`` is given (a partition dir, open already); else the
    directory holding ``path``, opened following links -- for trusted paths only (a file at
    a log dir root, a path the user named, kafkafs's own cache) -- and closed on exit."""
    path = os.fspath(path)
    name = os.path.basename(path)
    if dir is not None:
        yield dir, name
        return
    with Dir.open(os.path.dirname(path) or ".", follow=True) as d:
        yield d, name


def is_file(path, dir: Dir | None = None) -> bool:
    """Whether ``path`` (in ``dir``, see :func:`parent`) is a regular file, its last
    component not followed; anything else there is warned about once."""
    with parent(path, dir) as (d, name):
        return d.is_file(name)


def remove_tree(path: str) -> None:
    """Remove the entry ``path`` and, when it is a directory, everything in it, never
    following a link: a link there is unlinked itself (``shutil.rmtree`` walks by
    descriptors, so no link inside is followed either). Missing is fine; other errors are
    ignored, as a leftover ``-delete`` dir is harmless."""
    if os.path.islink(path):
        os.unlink(path)
        return
    shutil.rmtree(path, ignore_errors=True)


class _Pinned:
    """The lease of a pinned :class:`Dir`: its one descriptor, for the Dir's life."""

    __slots__ = ("_dir",)

    def __init__(self, d: Dir):
        self._dir = d

    def __enter__(self) -> int:
        return self._dir.fd

    def __exit__(self, *exc) -> None:
        pass


class Dir:
    """A directory inside (or at the root of) a log dir, open as a descriptor; every file
    operation on a name in it is made relative to the descriptor and never follows a link.

    ``path``: the directory's path, for messages (and :meth:`join`), and where a cached Dir
    is reopened. Make one with :meth:`open` or :meth:`of`. A pinned Dir holds its descriptor
    until :meth:`close`; a cached one (``cached=True``) holds it in the descriptor budget
    (see the module). Methods raise OSError like the system calls they make,
    :class:`NotRegularFileError` for an entry that is not a regular file,
    :class:`DirGoneError` for a cached Dir that cannot be reopened as itself.
    """

    __slots__ = ("__weakref__", "_fd", "_handle", "_ident", "_lease", "path")

    def __init__(self, path: str, fd: int, *, cached: bool = False):
        self.path = path
        st = os.fstat(fd)
        self._ident = (st.st_dev, st.st_ino)
        if cached:
            self._fd = -1
            self._handle = handles.Handle(self._reopen, resource=fd, name=path)
            self._lease = self._handle
        else:
            self._fd = fd
            self._handle = None
            self._lease = _Pinned(self)

    @classmethod
    def open(cls, path, *, follow: bool = False, cached: bool = False) -> Dir:
        """Open the directory ``path`` (``O_DIRECTORY``; ``O_NOFOLLOW`` unless ``follow``:
        a partition dir that is a link is refused with ELOOP, one that is not a directory
        with ENOTDIR). ``follow=True`` is for trusted paths only (log dir roots, a path the
        user named on the command line). ``cached=True`` (a partition dir, never followed):
        the descriptor goes to the budget and is reopened on demand (see the module)."""
        path = os.fspath(path)
        if cached and follow:
            raise ValueError("a cached directory is never reached through a link")
        flags = _OPEN_DIR if follow else _OPEN_DIR | os.O_NOFOLLOW
        fd = handles.call(os.open, path, flags)
        try:
            return cls(path, fd, cached=cached)
        except BaseException:
            os.close(fd)
            raise

    @classmethod
    def of(cls, directory) -> Dir:
        """``directory`` itself when it is a :class:`Dir`, else :meth:`open` of that path,
        cached (not following a link)."""
        return directory if isinstance(directory, Dir) else cls.open(directory, cached=True)

    @property
    def cached(self) -> bool:
        """Whether the descriptor is held in the budget (reopened on demand)."""
        return self._handle is not None

    @property
    def fd(self) -> int:
        """The descriptor of a pinned Dir. Raises OSError (EBADF) once closed, TypeError
        for a cached Dir (its descriptor changes: use :meth:`lease`)."""
        if self._handle is not None:
            raise TypeError(f"{self.path}: a cached directory has no fixed descriptor; "
                            "use `with dir.lease() as fd:`")
        if self._fd < 0:
            raise OSError(errno.EBADF, "directory closed", self.path)
        return self._fd

    def lease(self):
        """A context manager giving the directory's descriptor for a few system calls
        (``with d.lease() as fd:``); never keep the number past the block."""
        return self._lease

    def _reopen(self) -> int:
        """(cached) Open :attr:`path` again, not following a link, and check that it is the
        directory first opened. Raises DirGoneError, OSError."""
        try:
            fd = handles.call(os.open, self.path, _OPEN_DIR | os.O_NOFOLLOW)
        except OSError as exc:
            if exc.errno in _GONE:
                raise self._gone(_GONE[exc.errno]) from None
            raise
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != self._ident:
            os.close(fd)
            raise self._gone("another directory took its place")
        return fd

    def _gone(self, why: str) -> DirGoneError:
        warn_once(self.path, f"partition dir that is gone ({why})", "directory to follow")
        return DirGoneError(self.path, why)

    def join(self, name: str) -> str:
        """The path of ``name`` in this directory (for messages)."""
        return os.path.join(self.path, name)

    def _located(self, exc: OSError) -> OSError:
        """``exc`` naming its files by path, not by the bare names given with ``dir_fd``."""
        for attr in ("filename", "filename2"):
            name = getattr(exc, attr)
            if isinstance(name, str) and "/" not in name:
                setattr(exc, attr, self.join(name))
        return exc

    # -- opening files ----------------------------------------------------------------------
    def _refuse(self, name: str, mode: int | None = None) -> NotRegularFileError:
        if mode is None:
            try:
                with self._lease as fd:
                    mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
            except OSError:
                mode = 0
        kind = describe(mode)
        path = self.join(name)
        warn_once(path, kind)
        return NotRegularFileError(path, kind)

    def open_file(self, name: str, flags: int = os.O_RDONLY) -> int:
        """Open the existing regular file ``name`` with ``flags`` (``O_RDONLY``, ``O_RDWR``,
        ``O_WRONLY``, ``O_APPEND``; never ``O_CREAT``: see :meth:`create_file`). Returns a
        blocking, close-on-exec descriptor. Raises FileNotFoundError,
        NotRegularFileError (warned once), OSError."""
        _check_name(name)
        if flags & os.O_CREAT:
            raise ValueError("open_file does not create: use create_file or open_or_create")
        try:
            with self._lease as dfd:
                fd = handles.call(os.open, name, flags | _OPEN, dir_fd=dfd)
        except OSError as exc:
            if exc.errno in _NOT_REGULAR_ERRNOS:
                raise self._refuse(name) from None
            raise self._located(exc) from None
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                raise self._refuse(name, mode)
            if not flags & os.O_NONBLOCK:
                fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def create_file(self, name: str, flags: int = os.O_RDWR, mode: int = 0o644, *,
                    replace: bool = True) -> int:
        """Create the regular file ``name`` (``O_CREAT | O_EXCL | O_NOFOLLOW`` with
        ``flags``) and return its descriptor. An entry that is not a regular file in the
        way is unlinked first (warned once) -- with ``replace=False`` it raises
        NotRegularFileError instead; a regular file in the way raises FileExistsError, a
        directory IsADirectoryError. Raises OSError."""
        _check_name(name)
        for _attempt in range(3):
            try:
                with self._lease as dfd:
                    return handles.call(os.open, name, flags | _CREATE, mode, dir_fd=dfd)
            except FileExistsError as exc:
                try:
                    st = self.lstat(name)
                except FileNotFoundError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    raise self._located(exc) from None
                refused = self._refuse(name, st.st_mode)
                if not replace:
                    raise refused from None
                if stat.S_ISDIR(st.st_mode):
                    raise IsADirectoryError(errno.EISDIR, "a directory is in the way",
                                            self.join(name)) from None
                self.unlink(name)
            except OSError as exc:
                raise self._located(exc) from None
        raise FileExistsError(errno.EEXIST, "created and removed meanwhile", self.join(name))

    def open_or_create(self, name: str, flags: int = os.O_RDWR, mode: int = 0o644, *,
                       replace: bool = True) -> tuple[int, bool]:
        """Open the regular file ``name``, creating it when missing; an entry that is not a
        regular file is replaced by a new empty file (warned once) -- with
        ``replace=False`` it raises NotRegularFileError. Returns ``(descriptor, created)``.
        Raises OSError."""
        for _attempt in range(3):
            try:
                return self.create_file(name, flags, mode, replace=replace), True
            except FileExistsError:
                pass
            try:
                return self.open_file(name, flags), False
            except NotRegularFileError:
                if not replace:
                    raise
            except FileNotFoundError:  # removed meanwhile
                pass
        raise FileNotFoundError(errno.ENOENT, "created and removed meanwhile", self.join(name))

    def read(self, name: str) -> bytes:
        """The whole content of the regular file ``name``. Raises FileNotFoundError,
        NotRegularFileError, OSError."""
        fd = self.open_file(name)
        try:
            parts = []
            while True:
                part = os.read(fd, 1 << 20)
                if not part:
                    return b"".join(parts)
                parts.append(part)
        finally:
            os.close(fd)

    def truncate(self, name: str, length: int) -> None:
        """Truncate the regular file ``name`` to ``length`` bytes (never through a link).
        Raises FileNotFoundError, NotRegularFileError, OSError."""
        fd = self.open_file(name, os.O_WRONLY)
        try:
            os.ftruncate(fd, length)
        finally:
            os.close(fd)

    def fsync_file(self, name: str) -> bool:
        """fsync the regular file ``name``; False when it does not exist (or is not a
        regular file). Raises OSError."""
        try:
            fd = self.open_file(name)
        except FileNotFoundError:
            return False
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        return True

    def write_new(self, name: str, data: bytes) -> None:
        """Create the regular file ``name`` (exclusively: see :meth:`create_file`) holding
        ``data``, without fsync -- for a file in a directory just made, where nothing can be
        replaced (the caller makes it durable). On failure the file is removed and the
        OSError propagates."""
        fd = self.create_file(name, os.O_WRONLY)
        try:
            _write_all(fd, data)
        except BaseException:
            os.close(fd)
            self.unlink(name)
            raise
        os.close(fd)

    def atomic_write(self, name: str, data: bytes, sync: bool = True) -> None:
        """Replace ``name`` with ``data`` atomically and (with ``sync``) durably: a planted
        ``<name>.tmp`` is unlinked, the temporary file created exclusively, written, fsynced,
        renamed over ``name`` (which replaces a planted link itself), and the directory
        fsynced. On failure the temporary file is removed, ``name`` is untouched and the
        OSError propagates."""
        tmp = _check_name(name) + TMP_SUFFIX
        self.unlink(tmp)
        try:
            fd = self.create_file(tmp, os.O_WRONLY)
            try:
                _write_all(fd, data)
                if sync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            self.rename(tmp, name)
        except BaseException:
            self.unlink(tmp)
            raise
        if sync:
            self.fsync()

    # -- names ------------------------------------------------------------------------------
    def lstat(self, name: str) -> os.stat_result:
        """``stat`` of ``name`` itself (a link is not followed). Raises OSError."""
        try:
            with self._lease as fd:
                return os.stat(_check_name(name), dir_fd=fd, follow_symlinks=False)
        except OSError as exc:
            raise self._located(exc) from None

    def fstat(self) -> os.stat_result:
        """``stat`` of the directory itself (through its descriptor). Raises OSError."""
        with self._lease as fd:
            return os.fstat(fd)

    def utime(self, name: str, ns: tuple[int, int]) -> None:
        """Set the access and modification times of the regular file ``name`` (ns), never
        through a link. Raises OSError."""
        try:
            with self._lease as fd:
                os.utime(_check_name(name), ns=ns, dir_fd=fd, follow_symlinks=False)
        except OSError as exc:
            raise self._located(exc) from None

    def is_file(self, name: str) -> bool:
        """Whether ``name`` is a regular file; anything else there is warned about once."""
        try:
            mode = self.lstat(name).st_mode
        except FileNotFoundError:
            return False
        if stat.S_ISREG(mode):
            return True
        warn_once(self.join(name), describe(mode))
        return False

    def listdir(self) -> list[str]:
        """Every name in the directory (``os.listdir`` of the descriptor)."""
        with self._lease as fd:
            return os.listdir(fd)

    def files(self) -> set[str]:
        """The names of the regular files in the directory; every other entry is left out
        and warned about once (a partition dir holds files only)."""
        return set(self.file_inodes())

    def file_inodes(self) -> dict[str, int]:
        """``{name: inode number}`` of the regular files in the directory, from one
        listing (the entries' ``d_ino``: on some filesystems, overlayfs among them, not
        always the ``st_ino`` a ``stat`` gives); every other entry is left out and warned
        about once."""
        with self._lease as fd:
            with os.scandir(fd) as it:
                entries = list(it)
            out = {e.name: e.inode() for e in entries if e.is_file(follow_symlinks=False)}
            if len(out) < len(entries):  # the rare case: something else is there
                for e in entries:
                    if e.name not in out:
                        try:
                            warn_once(self.join(e.name),
                                      describe(e.stat(follow_symlinks=False).st_mode))
                        except FileNotFoundError:
                            pass
        return out

    def unlink(self, name: str) -> bool:
        """Remove the entry ``name`` (a link itself, never its target); False when there
        was none. Raises OSError (IsADirectoryError for a directory)."""
        try:
            with self._lease as fd:
                os.unlink(_check_name(name), dir_fd=fd)
            return True
        except FileNotFoundError as exc:
            if isinstance(exc, DirGoneError):
                raise
            return False
        except OSError as exc:
            raise self._located(exc) from None

    def rename(self, old: str, new: str) -> None:
        """Rename the entry ``old`` to ``new`` in this directory, replacing ``new`` (a link
        at either name is renamed or replaced itself, never followed). Raises OSError."""
        try:
            with self._lease as fd:
                os.replace(_check_name(old), _check_name(new), src_dir_fd=fd, dst_dir_fd=fd)
        except DirGoneError:
            raise
        except OSError as exc:
            raise self._located(exc) from None

    def fsync(self) -> None:
        """fsync the directory (its entries: creations, renames, deletions); filesystems
        that cannot fsync a directory are ignored."""
        try:
            with self._lease as fd:
                os.fsync(fd)
        except OSError as exc:
            if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
                raise

    def at_path(self) -> bool:
        """Whether :attr:`path` still names this directory: False once it was removed,
        renamed away, or replaced (by a link, or another directory)."""
        try:
            there = os.stat(self.path, follow_symlinks=False)
        except OSError:
            return False
        if self._handle is not None and self._handle.closed:
            return False
        return (there.st_dev, there.st_ino) == self._ident

    # -- lifetime ---------------------------------------------------------------------------
    def drop(self) -> None:
        """(cached) Close the descriptor now unless in use; the next operation reopens it.
        A pinned Dir keeps its descriptor."""
        if self._handle is not None:
            self._handle.drop()

    def close(self) -> None:
        """Close the descriptor for good (idempotent; a cached Dir's once no thread uses
        it)."""
        if self._handle is not None:
            self._handle.close()
            return
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self):
        # A cached Dir is reachable from the handle cache (its handle's opener is a method
        # of it) until evicted: by the time it is garbage its descriptor is closed or being
        # closed by whoever evicted it. Taking the cache's lock here could deadlock: the
        # collector runs a finalizer at any allocation, also in a thread holding that lock.
        try:
            if self._handle is None:
                self.close()
        except (OSError, AttributeError):
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        where = "cached" if self._handle is not None else f"fd={self._fd}"
        return f"Dir({self.path!r}, {where})"
