"""The FUSE filesystem: pyfuse3 ``Operations``, the first frontend of the storage core
(:class:`~kafkafs.core.storage.StorageCore`).

Tree (docs/tree.md; docs/design.md §3.1, §8.1)::

    <topic>/               mkdir: create topic; rmdir: delete it
      config               effective topic config; writing replaces the overrides
      <partition>/         mkdir <topic>/<n>: grow the topic to n+1 partitions
        append             write-only: each line a record (kafka-console-producer rules)
        offset/<N>         value of the record at offset N; xattrs user.kafka.*
        by-time/<T>        symlink to ../offset/<N>, first record with timestamp >= T
        messages           every value, one per line (grows; tail -f works)
        records.jsonl      every record as a JSON object per line
        segments/          the partition's files, read-only, byte-identical
        key/<k>            the latest value of key k in this partition (fs.nodes.keys)
      key/<k>              the latest value of key k where Kafka's partitioner puts it

Each node kind is a class in fs.nodes; :class:`KafkaFS` looks the node up, hands the
request to its kind's handler (``self.kinds[node.kind]``, or the handle's ``kind``) and is
the errno boundary (:func:`fs.errors.fuse_errors`). It is also the context the kinds share:
the manager, the options, the inode table, the caches, the views (``views``), the key view
(``keys``) and the bulk commits in progress. Besides the tree it answers the daemon's
control requests (docs/design.md §7): the root's extended attributes and ``setxattr``.

Handlers run on the trio event loop; anything that may scan (views, segment file reads,
fsync) goes to a worker thread.
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
import time
from dataclasses import dataclass, field

import pyfuse3
import trio

from ..core.storage import StorageCore
from ..log.isolation import DEFAULT_ISOLATION_LEVEL
from . import nodes
from . import tree as T
from .cache import BatchCache
from .errors import fuse_errors
from .nodes.base import Handle
from .nodes.keys import KeyView
from .nodes.rendered import ViewTable
from .views import ChunkCache, LineView

log = logging.getLogger(__name__)



@dataclass
class FsOptions:
    """Mount options that shape the tree (``-o`` on ``kafkafs mount``).

    ``parse_key``/``key_separator``: split appended lines into key and value as
    kafka-console-producer's ``parse.key``/``key.separator`` do. ``read_only``: refuse every
    write with EROFS. ``uid``/``gid``: owner reported for every node. ``isolation_level``
    (Kafka's consumer setting): ``read_committed`` (default) shows records up to the last
    stable offset and hides aborted transactions; ``read_uncommitted`` shows every record.
    ``batch_size``: the producer's ``batch.size`` for lines written to ``append`` (bytes;
    None: each topic's ``kafkafs.batch.size``). ``list_all``: readdir lists the entries
    reached by name only too (``offset/``, ``key/``, ``records.jsonl``, ``segments/``: a
    kind's ``listed``, fs.nodes.base), so that recursive tools walk every record.
    """

    parse_key: bool = False
    key_separator: bytes = b"\t"
    batch_size: int | None = None
    read_only: bool = False
    list_all: bool = False
    isolation_level: str = DEFAULT_ISOLATION_LEVEL
    uid: int = field(default_factory=os.getuid)
    gid: int = field(default_factory=os.getgid)



def _err(code: int):
    return pyfuse3.FUSEError(code)


def _forget_entry(parent_inode: int, name: bytes) -> None:
    """Have the kernel drop its cached entry ``name`` of ``parent_inode`` (waits for it;
    never call it while the request being answered holds the parent's lock)."""
    try:
        pyfuse3.invalidate_entry(parent_inode, name)
    except OSError:
        pass  # not known to the kernel



class KafkaFS(pyfuse3.Operations):
    """pyfuse3 operations for the kafkafs tree (see module docstring).

    ``core``: the started :class:`~kafkafs.core.storage.StorageCore` (its ``manager``, key
    maps, commit gate and control requests); ``options``: :class:`FsOptions`.
    """

    supports_dot_lookup = False
    enable_writeback_cache = False
    enable_acl = False

    def __init__(self, core: StorageCore, options: FsOptions | None = None):
        super().__init__()
        self.core = core
        self.manager = manager = core.manager
        self.options = options or FsOptions()
        self._handles: dict[int, Handle] = {}
        self._fh = itertools.count(1)
        # the caches share one budget (kafkafs.cache.max.bytes): half each
        budget = manager.config.kafkafs_cache_max_bytes
        self.cache = BatchCache(max_bytes=budget // 2)
        self.chunk_cache = ChunkCache(budget - budget // 2)
        self.nursery: trio.Nursery | None = None  # set by the daemon: background work
        self.mount_time_ns = time.time_ns()
        self.initialized = trio.Event()  # set when the kernel's INIT request is answered
        self.keys = KeyView(self, core.key_maps)  # key/<k> (fs.nodes.keys): the core's key maps
        self.views = ViewTable(self)  # messages, records.jsonl (fs.nodes.rendered)
        self.kinds = nodes.handlers(self)  # node kind -> its handler (fs.nodes)
        self.inodes = T.InodeTable(nodes.DYNAMIC)
        manager.on_forget.append(self._partition_gone)
        core.on_topic_replaced.append(self._topic_replaced)

    def init(self):
        """pyfuse3: the kernel's INIT request arrived; the reply goes out as this returns
        (a task waiting on :attr:`initialized` runs after it)."""
        self.initialized.set()

    # -- the context the node kinds share --------------------------------------------
    def _node(self, inode: int) -> T.Node:
        """The node of ``inode``; FUSEError(ENOENT) when it is gone."""
        node = self.inodes.find(inode)
        if node is None:
            raise _err(errno.ENOENT)
        return node

    @property
    def committed(self) -> bool:
        """Whether the tree reads as Kafka's ``isolation.level=read_committed``."""
        return self.options.isolation_level == "read_committed"

    def view(self, topic: str, partition: int, kind: str) -> LineView:
        """The LineView of a partition's rendered view ``kind`` (``tree.MESSAGES`` or
        ``tree.JSONL``), built on first use (fs.nodes.rendered); UnknownTopicOrPartitionError
        when the partition is not here."""
        return self.kinds[kind].view(topic, partition)

    def save_views(self, changed_only: bool = False) -> int:
        """Keep every built view's marks for the next daemon (at unmount; with
        ``changed_only``, periodically: those whose end moved since they were last saved).
        Returns how many were saved."""
        return self.views.save(changed_only)

    def _partition_gone(self, topic: str, partition: int) -> None:
        """The manager forgot a partition (its dir went away under a read-only mount): drop
        its views, cached batches and nodes, so a topic re-created under the same name
        shows its new records, not ours. Runs on the loop (core.watcher)."""
        self.views.drop(topic, partition)
        self.cache.drop(topic, partition)
        self.keys.maps.forget(topic, partition)
        self.inodes.drop_partition(topic, partition)

    def _topic_gone(self, topic: str, keep_dir: bool = False) -> list[T.Node]:
        """Drop what the tree kept of a deleted or replaced topic: views, cached batches,
        key maps, nodes (but the topic's directory and ``config`` with ``keep_dir``).
        Returns the kept nodes dropped."""
        self.views.drop(topic)
        self.cache.drop(topic)
        self.keys.maps.forget(topic)
        return self.inodes.drop_topic(topic, keep_dir)

    # -- lookup / getattr / forget ---------------------------------------------------
    @fuse_errors
    async def lookup(self, parent_inode, name, ctx=None):
        parent = self._node(parent_inode)
        if name in (b".", b".."):
            raise _err(errno.ENOENT)
        node = await self.kinds[parent.kind].lookup(parent, name)
        attr = await self.kinds[node.kind].getattr(node)
        node.lookups += 1
        return attr

    @fuse_errors
    async def getattr(self, inode, ctx=None):
        node = self._node(inode)
        return await self.kinds[node.kind].getattr(node)

    async def forget(self, inode_list):
        for inode, n in inode_list:
            self.inodes.forget(inode, n)

    @fuse_errors
    async def setattr(self, inode, attr, fields, fh, ctx):
        """Truncation of a key file (its value); ``O_TRUNC`` on ``append`` and ``config``
        (accepted: nothing to truncate), and times set on the files one may write
        (``append``, ``config``, ``key/<k>``: accepted and not kept, their times follow the
        data, so ``touch`` works there). Every other change is refused with one errno per
        kind (docs/tree.md "Errors"): the size of a read-only file EACCES, a mode or owner
        EPERM, the times of a read-only file EPERM; EROFS on a read-only mount
        (fs.nodes.base ``Kind.setattr``)."""
        node = self._node(inode)
        h = self._handles.get(fh) if fh is not None else None
        return await self.kinds[node.kind].setattr(node, attr, fields, h)

    @fuse_errors
    async def readlink(self, inode, ctx):
        node = self.inodes.find(inode)
        if node is None:
            raise _err(errno.EINVAL)
        return await self.kinds[node.kind].readlink(node)

    @fuse_errors
    async def statfs(self, ctx):
        st = os.statvfs(self.manager.log_dirs[0])
        out = pyfuse3.StatvfsData()
        for f in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files",
                  "f_ffree", "f_favail"):
            setattr(out, f, getattr(st, f))
        out.f_namemax = 255
        return out

    # -- directories -----------------------------------------------------------------
    @fuse_errors
    async def opendir(self, inode, ctx):
        node = self._node(inode)
        h = self.kinds[node.kind].opendir(node)
        fh = next(self._fh)
        self._handles[fh] = h
        return fh

    @fuse_errors
    async def releasedir(self, fh):
        self._handles.pop(fh, None)

    @fuse_errors
    async def readdir(self, fh, start_id, token):
        h = self._handles[fh]
        await h.kind.readdir(h, start_id, token)

    @fuse_errors
    async def mkdir(self, parent_inode, name, mode, ctx):
        parent = self._node(parent_inode)
        if self.options.read_only:
            raise _err(errno.EROFS)
        node = await self.kinds[parent.kind].mkdir(parent, name)
        attr = await self.kinds[node.kind].getattr(node)
        node.lookups += 1
        return attr

    @fuse_errors
    async def rmdir(self, parent_inode, name, ctx):
        parent = self._node(parent_inode)
        if self.options.read_only:
            raise _err(errno.EROFS)
        await self.kinds[parent.kind].rmdir(parent, name)

    @fuse_errors
    async def unlink(self, parent_inode, name, ctx):
        parent = self._node(parent_inode)
        if self.options.read_only:
            raise _err(errno.EROFS)
        await self.kinds[parent.kind].unlink(parent, name)

    @fuse_errors
    async def create(self, parent_inode, name, mode, flags, ctx):
        parent = self._node(parent_inode)
        if self.options.read_only:
            raise _err(errno.EROFS)
        info = pyfuse3.FileInfo()
        node, h = await self.kinds[parent.kind].create(parent, name, flags, info)
        info.fh = next(self._fh)
        self._handles[info.fh] = h
        attr = self.kinds[node.kind].attr(node)
        node.lookups += 1
        return info, attr

    # names are Kafka's (topics, partitions, offsets, segment files): none can be renamed or
    # linked (EPERM, as chmod: an operation this filesystem never allows, whoever asks), nor
    # made by hand (EACCES, as create and unlink outside key/); never ENOSYS
    @fuse_errors
    async def rename(self, parent_inode_old, name_old, parent_inode_new, name_new, flags, ctx):
        raise _err(errno.EROFS if self.options.read_only else errno.EPERM)

    @fuse_errors
    async def link(self, inode, new_parent_inode, new_name, ctx):
        raise _err(errno.EROFS if self.options.read_only else errno.EPERM)

    @fuse_errors
    async def symlink(self, parent_inode, name, target, ctx):
        raise _err(errno.EROFS if self.options.read_only else errno.EACCES)

    @fuse_errors
    async def mknod(self, parent_inode, name, mode, rdev, ctx):
        raise _err(errno.EROFS if self.options.read_only else errno.EACCES)

    # -- files -----------------------------------------------------------------------
    @fuse_errors
    async def open(self, inode, flags, ctx):
        node = self._node(inode)
        info = pyfuse3.FileInfo()
        h = await self.kinds[node.kind].open(node, flags, info)
        info.fh = fh = next(self._fh)
        self._handles[fh] = h
        return info

    @fuse_errors
    async def read(self, fh, off, size):
        h = self._handles[fh]
        return await h.kind.read(h, off, size)

    @fuse_errors
    async def write(self, fh, off, buf):
        h = self._handles[fh]
        return await h.kind.write(h, off, buf)

    async def commit_wait(self, topic: str, partition: int) -> None:
        """Wait until no bulk commit holds the lock of the partition's log
        (:meth:`CommitGate.wait <kafkafs.core.commits.CommitGate.wait>`); FUSEError(EIO)
        when a commit recorded for it could not be finished (an append would land past it:
        refused until the next start finishes the commit)."""
        await self.core.commits.wait(topic, partition)

    @fuse_errors
    async def flush(self, fh):
        h = self._handles.get(fh)
        if h is not None:
            await h.kind.flush(h)

    @fuse_errors
    async def fsync(self, fh, datasync):
        h = self._handles.get(fh)
        if h is not None:
            await h.kind.fsync(h)

    @fuse_errors
    async def release(self, fh):
        h = self._handles.pop(fh, None)
        if h is not None:
            await h.kind.release(h)

    # -- extended attributes ---------------------------------------------------------
    async def _xattr_values(self, node: T.Node) -> dict[str, bytes | None]:
        """xattr name -> value of ``node`` (None: not set): its kind's."""
        return await self.kinds[node.kind].xattrs(node)

    @fuse_errors
    async def getxattr(self, inode, name, ctx):
        node = self._node(inode)
        if not name.startswith(b"user."):
            # no security labels or ACLs here: ENOTSUP, which ls -l and cp -a take as "not
            # supported on this filesystem" and stop asking for (one request, not one per
            # file); nothing is decoded for it
            raise _err(errno.ENOTSUP)
        value = (await self._xattr_values(node)).get(name.decode("utf-8", "replace"))
        if value is None:
            raise _err(pyfuse3.ENOATTR)
        return value

    @fuse_errors
    async def listxattr(self, inode, ctx):
        node = self._node(inode)
        return [k.encode() for k, v in (await self._xattr_values(node)).items()
                if v is not None]

    @fuse_errors
    async def setxattr(self, inode, name, value, ctx):
        """The daemon's control requests (docs/design.md §7, :mod:`kafkafs.core.control`):
        set on the root, a topic or a partition dir, each answered when done, its outcome
        the errno (``fs/errors.py``). Nothing else is settable (EACCES); a read-only mount
        takes none (EROFS)."""
        if self.options.read_only:
            raise _err(errno.EROFS)
        node = self._node(inode)
        if node.kind not in (T.ROOT, T.TOPIC, T.PARTITION):
            raise _err(errno.EACCES)
        await self.core.control.handle(name.decode("utf-8", "replace"), node.topic,
                                       node.partition, value)

    async def _topic_replaced(self, topic: str, on_topic_dir: bool) -> None:
        """A control request replaced ``topic``'s data (:attr:`StorageCore.on_topic_replaced
        <kafkafs.core.storage.StorageCore.on_topic_replaced>`): drop what the tree kept of
        it -- but the topic's own directory and ``config`` nodes, which go on -- and have
        the kernel forget the names in the topic's directory (its partitions, ``key``). The
        kernel's invalidation waits for the directory's lock: a request made on the root
        waits for it, so the next path lookup after the answer finds the new partitions; a
        request made on the topic's directory holds that lock, so there it runs once the
        request has been answered."""
        tp_dir = self.inodes.by_key.get((T.TOPIC, topic, None, None))
        gone = self._topic_gone(topic, keep_dir=True)
        if tp_dir is None:
            return
        names = sorted({str(n.partition).encode() for n in gone if n.kind == T.PARTITION}
                       | {b"key"})

        def forget_names() -> None:
            for name in names:
                _forget_entry(tp_dir.inode, name)

        if not on_topic_dir:
            await trio.to_thread.run_sync(forget_names)
        elif self.nursery is not None:
            self.nursery.start_soon(trio.to_thread.run_sync, forget_names)

    @fuse_errors
    async def removexattr(self, inode, name, ctx):
        raise _err(errno.EROFS if self.options.read_only else errno.EACCES)
