"""What every node kind of the mounted tree answers, and its refusals (docs/design.md §8.1).

A kind is a class whose one instance per mount (made by :func:`kafkafs.fs.nodes.handlers`)
answers the requests :class:`~kafkafs.fs.operations.KafkaFS` dispatches to it for every
node of that kind. Nodes themselves stay plain :class:`~kafkafs.fs.tree.Node` records
(``offset/N`` nodes are not even kept, fs.tree): the kind holds the behaviour, the
``fs`` it is given (the ``KafkaFS``) holds the shared state -- ``manager``, ``options``,
``inodes``, ``cache``, ``views``, ``keys`` -- so a kind keeps nothing of its own.

:class:`Kind` refuses what a node does not do, with the errno the tree has always given
(docs/tree.md "Errors"): a lookup in a file ``ENOTDIR``, opening a directory or a symlink
``EISDIR`` (for writing ``EACCES``, ``EROFS`` on a read-only mount), a read or write
through a descriptor that cannot do it ``EBADF``, truncation ``EACCES``, a mode or owner
``EPERM``, times of a file no one writes ``EPERM``, ``readlink`` of a non-link ``EINVAL``,
``mkdir``/``rmdir``/``create``/``unlink`` ``EACCES``. :class:`Directory` adds what every
directory does: fixed children by name (declared by the child kinds, see
:func:`kafkafs.fs.nodes.handlers`), ``opendir`` and a ``readdir`` over :meth:`entries`.
"""

from __future__ import annotations

import errno
import os
import stat

import pyfuse3

from ...log.errors import LogError
from ...record.errors import CorruptRecordError
from .. import tree as T

LONG_TIMEOUT = 3600.0  # seconds the kernel may cache names and attributes that never change
SHORT_TIMEOUT = 1.0
BLOCK_SIZE = 128 * 1024


def err(code: int) -> pyfuse3.FUSEError:
    """The FUSEError for ``code`` (an errno value)."""
    return pyfuse3.FUSEError(code)


def canonical_number(name: bytes) -> bool:
    """Whether ``name`` is a non-negative number written as Kafka writes one (digits, no
    sign, no leading zero): the only names of partitions and offsets."""
    return name.isdigit() and name.isascii() and (len(name) == 1 or name[:1] != b"0")


class Handle:
    """What one open descriptor (or directory handle) of ``node`` holds; ``kind``: the
    node's kind handler, which answers its reads and writes. The kind sets what it uses:
    ``record`` (bytes or a Record to read), ``writer``, ``view`` (a LineView) and
    ``direct`` (opened with ``direct_io``), ``fd`` (a segment file), ``listing`` (a
    directory listing in progress)."""

    __slots__ = ("direct", "fd", "kind", "listing", "node", "record", "view", "writer")

    def __init__(self, node: T.Node, kind: Kind):
        self.node = node
        self.kind = kind
        self.direct = False
        self.view = None
        self.fd = -1
        self.record = None
        self.writer = None
        self.listing = None


class Kind:
    """One kind of node (module docstring). Class attributes describe it:

    * ``kind``: its name, the ``kind`` of its nodes (the constants of fs.tree);
    * ``name`` and ``parents``: a fixed child named ``name`` of every directory whose kind is
      in ``parents`` (empty for a kind reached by a name its parent works out);
    * ``listed``: readdir lists it without ``-o list_all``. ``offset/``, ``records.jsonl``,
      ``key/`` and ``segments/`` are reached by name only, so that the tools that walk a
      tree (ls -R, find, du, grep -r, tar, rsync) meet every record once, in ``messages``,
      instead of once per offset/ and key/ file, again in records.jsonl and again as the
      bytes of segments/ (with the active segment's 20 MiB of preallocated indexes), as ZFS
      keeps its .zfs dir out of listings (docs/tree.md "Walking the mount");
    * ``dynamic``: one node per name, dropped when the kernel forgets it (fs.tree);
    * ``file_type``, ``perm``, ``ro_perm`` (on a read-only mount; None: ``perm``),
      ``nlink``, ``entry_timeout``, ``attr_timeout`` (seconds): its attributes;
    * ``writable``: its times may be set (``touch``), accepted and not kept.

    ``fs``: the :class:`~kafkafs.fs.operations.KafkaFS` (the shared state);
    ``children``: fixed children, name -> kind handler (set by ``handlers``)."""

    kind = ""
    name: bytes | None = None
    parents: tuple[str, ...] = ()
    listed = True
    dynamic = False
    file_type = stat.S_IFREG
    perm = 0o444
    ro_perm: int | None = None
    nlink = 1
    entry_timeout = LONG_TIMEOUT
    attr_timeout = LONG_TIMEOUT
    writable = False

    def __init__(self, fs):
        self.fs = fs
        self.children: dict[bytes, Kind] = {}
        ro = fs.options.read_only and self.ro_perm is not None
        self.mode = self.file_type | (self.ro_perm if ro else self.perm)

    def present(self, parent: T.Node) -> bool:
        """Whether this fixed child is there under ``parent`` (a kind some directories of
        its parents' kind have, and others not: ``groups/`` under ``__consumer_offsets``
        only)."""
        return True

    def log(self, node: T.Node):
        """The Log of ``node``'s partition; UnknownTopicOrPartitionError (ENOENT) when it
        is gone."""
        return self.fs.manager.get_log(node.topic, node.partition)

    # -- attributes -----------------------------------------------------------------------
    def attr(self, node: T.Node, size: int = 0, mtime_ns: int | None = None,
             blocks: int = 0) -> pyfuse3.EntryAttributes:
        """The attributes of ``node`` (``size`` in bytes, ``mtime_ns``: default the mount's
        start). ``blocks``: 512-byte blocks the node takes on disk: those of its files in
        the log dir for a partition dir and a segment file, 0 for everything else (the
        rendered views are not stored, as /proc's files are not), so that ``du`` of the
        mount, which walks the partition dirs but not ``segments/``, adds up to what the
        log dirs hold."""
        fs = self.fs
        a = pyfuse3.EntryAttributes()
        a.st_ino = node.inode
        a.generation = 0
        a.st_uid = fs.options.uid
        a.st_gid = fs.options.gid
        a.st_blksize = BLOCK_SIZE
        t = fs.mount_time_ns if mtime_ns is None else mtime_ns
        a.st_atime_ns = a.st_ctime_ns = a.st_mtime_ns = t
        a.st_mode = self.mode
        a.st_nlink = self.nlink
        a.st_size = size
        a.st_blocks = blocks
        a.entry_timeout = self.entry_timeout
        a.attr_timeout = self.attr_timeout
        return a

    async def getattr(self, node: T.Node) -> pyfuse3.EntryAttributes:
        """``stat``: the attributes of ``node``; a node of a partition that is gone is
        ENOENT (UnknownTopicOrPartitionError)."""
        if node.partition is not None:
            self.log(node)
        return self.attr(node)

    async def setattr(self, node: T.Node, attr, fields, h: Handle | None):
        """``truncate``, ``chmod``, ``chown``, ``touch`` (``h``: the descriptor given, if
        any). Size through :meth:`truncate`; a mode or owner EPERM; times accepted on a
        ``writable`` kind, else EPERM; EROFS for any of them on a read-only mount."""
        ro = self.fs.options.read_only
        if fields.update_size and await self.truncate(node, h, attr.st_size):
            return await self.getattr(node)
        if fields.update_mode or fields.update_uid or fields.update_gid:
            raise err(errno.EROFS if ro else errno.EPERM)
        if fields.update_atime or fields.update_mtime or fields.update_ctime:
            if ro:
                raise err(errno.EROFS)
            if not self.writable:
                raise err(errno.EPERM)
        return await self.getattr(node)

    async def truncate(self, node: T.Node, h: Handle | None, size: int) -> bool:
        """Set the size: True when done (the other fields are then not looked at), False to
        go on with them. Refused here: EACCES (EROFS on a read-only mount)."""
        raise err(errno.EROFS if self.fs.options.read_only else errno.EACCES)

    async def xattrs(self, node: T.Node) -> dict[str, bytes | None]:
        """Extended attribute name -> value of ``node`` (None: not set). None here."""
        return {}

    async def readlink(self, node: T.Node) -> bytes:
        raise err(errno.EINVAL)

    # -- directories ----------------------------------------------------------------------
    async def lookup(self, parent: T.Node, name: bytes) -> T.Node:
        """The child ``name`` of ``parent`` (a node of this kind). Not a directory: ENOTDIR."""
        raise err(errno.ENOTDIR)

    def opendir(self, node: T.Node) -> Handle:
        raise err(errno.ENOTDIR)

    async def readdir(self, h: Handle, start_id: int, token) -> None:
        raise err(errno.ENOTDIR)

    async def mkdir(self, parent: T.Node, name: bytes) -> T.Node:
        raise err(errno.EACCES)

    async def rmdir(self, parent: T.Node, name: bytes) -> None:
        raise err(errno.EACCES)

    async def create(self, parent: T.Node, name: bytes, flags: int,
                     info: pyfuse3.FileInfo) -> tuple[T.Node, Handle]:
        raise err(errno.EACCES)

    async def unlink(self, parent: T.Node, name: bytes) -> None:
        raise err(errno.EACCES)

    # -- files ----------------------------------------------------------------------------
    def refuse_writing(self, flags: int) -> None:
        """EACCES (EROFS on a read-only mount) for an open for writing of a kind no one
        writes."""
        if flags & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR):
            raise err(errno.EROFS if self.fs.options.read_only else errno.EACCES)

    async def open(self, node: T.Node, flags: int, info: pyfuse3.FileInfo) -> Handle:
        """A descriptor of ``node`` (``info``: set ``direct_io``/``keep_cache``; the caller
        sets ``fh``). Not a regular file: EISDIR (after :meth:`refuse_writing`)."""
        self.refuse_writing(flags)
        raise err(errno.EISDIR)

    async def read(self, h: Handle, off: int, size: int) -> bytes:
        raise err(errno.EBADF)

    async def write(self, h: Handle, off: int, buf: bytes) -> int:
        raise err(errno.EBADF)

    async def flush(self, h: Handle) -> None:
        """Each ``close`` of a descriptor (one per duplicate). Nothing here."""

    async def fsync(self, h: Handle) -> None:
        """``fsync``. Nothing here."""

    async def release(self, h: Handle) -> None:
        """The last descriptor of ``h`` is gone (errors can only be logged). Nothing here."""


class Directory(Kind):
    """A directory kind: read-only (0555) unless it says otherwise."""

    file_type = stat.S_IFDIR
    perm = 0o555
    nlink = 2

    async def lookup(self, parent: T.Node, name: bytes) -> T.Node:
        """A fixed child, else :meth:`lookup_name`."""
        child = self.children.get(name)
        if child is not None and child.present(parent):
            return self.fs.inodes.get(child.kind, parent.topic, parent.partition)
        return await self.lookup_name(parent, name)

    async def lookup_name(self, parent: T.Node, name: bytes) -> T.Node:
        """A child that is not a fixed one: ENOENT here."""
        raise err(errno.ENOENT)

    def opendir(self, node: T.Node) -> Handle:
        return Handle(node, self)

    def entries(self, node: T.Node) -> list[tuple[bytes, T.Node]]:
        """``(name, child node)`` of every entry readdir lists, in order: here the fixed
        children (those not ``listed`` only with ``-o list_all``)."""
        inodes, list_all = self.fs.inodes, self.fs.options.list_all
        return [(name, inodes.get(child.kind, node.topic, node.partition))
                for name, child in self.children.items()
                if (list_all or child.listed) and child.present(node)]

    async def readdir(self, h: Handle, start_id: int, token) -> None:
        """Reply the :meth:`entries` from ``start_id`` on, each with its attributes
        (``next_id``: its index + 1); one whose attributes cannot be had now (damage in
        its log) is listed without attributes the kernel may keep, one gone meanwhile is
        left out."""
        await self.reply_names(h, token, start_id, self.entries(h.node))

    async def reply_names(self, h: Handle, token, start_id: int,
                          names: list[tuple[bytes, T.Node]]) -> None:
        """Reply ``names`` (``(name, child node)``, in order) from ``start_id`` on, as
        :meth:`readdir` describes."""
        fs = self.fs
        for i, (name, child) in enumerate(names[start_id:], start_id):
            kind = fs.kinds[child.kind]
            try:
                attr = await kind.getattr(child)
            except pyfuse3.FUSEError:
                continue  # gone meanwhile
            except (LogError, CorruptRecordError, OSError):
                # a file whose size cannot be had now (damage in the log): listed all the
                # same, without attributes the kernel may keep; a stat of it says why
                attr = kind.attr(child)
                attr.attr_timeout = 0
            if not pyfuse3.readdir_reply(token, name, attr, i + 1):
                break
            child.lookups += 1
