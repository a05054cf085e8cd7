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
        key/<k>            the latest value of key k in this partition (fs.keys)
      key/<k>              the latest value of key k where Kafka's partitioner puts it

Handlers run on the trio event loop; anything that may scan (views, segment file reads,
fsync) goes to a worker thread. Errors leave through :func:`fs.errors.fuse_errors`.
"""

from __future__ import annotations

import errno
import itertools
import json
import logging
import os
import stat
import time
import weakref
from dataclasses import dataclass, field

import pyfuse3
import trio

from ..core.storage import StorageCore
from ..log.errors import LogError
from ..log.isolation import DEFAULT_ISOLATION_LEVEL
from ..log.log import Log
from ..log.names import parse_segment_filename
from ..record import plain
from ..record.batch import TIMESTAMP_TYPE_NAMES
from ..record.errors import CorruptRecordError
from ..record.jsonl import text_or_base64
from ..record.types import Record
from . import markstore
from . import tree as T
from .append import LineWriter
from .cache import BatchCache
from .configfile import ConfigTooLargeError, ConfigWriter
from .errors import fuse_errors, report_damage
from .keys import KeyView
from .listing import OffsetListing
from .timespec import parse_timestamp
from .views import (
    ChunkCache,
    LineView,
    measure_jsonl,
    measure_messages,
    render_jsonl,
    render_jsonl_run,
    render_messages,
)

log = logging.getLogger(__name__)

INLINE_RENDER_BYTES = 4 * 1024 * 1024  # view chunks up to this much log render on the loop
# log bytes a view is measured over before a stat or an open answers, the first time (views.py):
# past them the view streams with its size shown as 0 until a read reaches its end
MEASURE_FIRST_BYTES = {T.MESSAGES: 16 * 1024 * 1024, T.JSONL: 16 * 1024 * 1024}
LONG_TIMEOUT = 3600.0  # seconds the kernel may cache names and attributes that never change
SHORT_TIMEOUT = 1.0
BLOCK_SIZE = 128 * 1024

XATTR_PREFIX = "user.kafka."


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
    reached by name only too (:data:`~kafkafs.fs.tree.BY_NAME_ONLY`: ``offset/``,
    ``key/``, ``records.jsonl``), so that recursive tools walk every record.
    """

    parse_key: bool = False
    key_separator: bytes = b"\t"
    batch_size: int | None = None
    read_only: bool = False
    list_all: bool = False
    isolation_level: str = DEFAULT_ISOLATION_LEVEL
    uid: int = field(default_factory=os.getuid)
    gid: int = field(default_factory=os.getgid)


class _Handle:
    __slots__ = ("direct", "fd", "listing", "node", "record", "view", "writer")

    def __init__(self, node):
        self.node = node
        self.direct = False
        self.view = None
        self.fd = -1
        self.record = None
        self.writer = None  # append: a LineWriter; config opened for writing: a ConfigWriter
        self.listing = None  # offset/ opened as a directory: its OffsetListing


def _err(code: int):
    return pyfuse3.FUSEError(code)


def _canonical_number(name: bytes) -> bool:
    """Whether ``name`` is a non-negative number written as Kafka writes one (digits, no
    sign, no leading zero): the only names of partitions and offsets."""
    return name.isdigit() and name.isascii() and (len(name) == 1 or name[:1] != b"0")


def _stored_blocks(lg: Log) -> int:
    """512-byte blocks the partition's files take in its log dir (``du`` of the dir)."""
    total = 0
    try:
        for name in lg.pdir.files():
            try:
                total += lg.pdir.lstat(name).st_blocks
            except OSError:
                pass  # removed meanwhile (retention)
    except OSError:
        return 0
    return total


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
        self.inodes = T.InodeTable()
        self._handles: dict[int, _Handle] = {}
        self._fh = itertools.count(1)
        self._views: dict[tuple, LineView] = {}
        # view -> (start, end offset) when its marks were last saved
        self._saved: weakref.WeakKeyDictionary[LineView, tuple] = weakref.WeakKeyDictionary()
        # the caches share one budget (kafkafs.cache.max.bytes): half each
        budget = manager.config.kafkafs_cache_max_bytes
        self.cache = BatchCache(max_bytes=budget // 2)
        self.chunk_cache = ChunkCache(budget - budget // 2)
        self.nursery: trio.Nursery | None = None  # set by the daemon: background work
        self.mount_time_ns = time.time_ns()
        self.initialized = trio.Event()  # set when the kernel's INIT request is answered
        self.keys = KeyView(self, core.key_maps)  # key/<k> (fs.keys): the core's key maps
        manager.on_forget.append(self._partition_gone)
        core.on_topic_replaced.append(self._forget_topic_later)

    def init(self):
        """pyfuse3: the kernel's INIT request arrived; the reply goes out as this returns
        (a task waiting on :attr:`initialized` runs after it)."""
        self.initialized.set()

    # -- helpers ---------------------------------------------------------------------
    def _node(self, inode: int) -> T.Node:
        """The node of ``inode``; FUSEError(ENOENT) when it is gone."""
        node = self.inodes.find(inode)
        if node is None:
            raise _err(errno.ENOENT)
        return node

    def _log(self, node) -> Log:
        return self.manager.get_log(node.topic, node.partition)

    def view(self, topic: str, partition: int, kind: str) -> LineView:
        key = (topic, partition, kind)
        v = self._views.get(key)
        lg = self.manager.get_log(topic, partition)
        if v is None or v.log is not lg:
            if v is not None:
                self.chunk_cache.drop(v)
            committed = self.committed
            if kind == T.MESSAGES:
                v = LineView(lg, render_messages, measure_messages, committed=committed,
                             render_run=plain.render_file_values, on_damage=report_damage,
                             cache=self.chunk_cache)
            else:
                v = LineView(lg, render_jsonl, measure_jsonl, committed=committed,
                             render_run=render_jsonl_run, on_damage=report_damage,
                             cache=self.chunk_cache)
            state = markstore.load(lg.dir, self._mark_kind(kind))
            if state is not None:
                v.import_state(state)
            self._views[key] = v
            if self._log_changed not in lg.on_change:
                lg.on_change.append(self._log_changed)
        return v

    @property
    def committed(self) -> bool:
        """Whether the tree reads as Kafka's ``isolation.level=read_committed``."""
        return self.options.isolation_level == "read_committed"

    def _mark_kind(self, kind: str) -> str:
        return kind if self.committed else f"{kind}.read_uncommitted"

    def save_views(self, changed_only: bool = False) -> int:
        """Keep every built view's marks for the next daemon (at unmount; with
        ``changed_only``, periodically: those whose end moved since they were last saved).
        Returns how many were saved."""
        saved = 0
        for (_topic, _partition, kind), v in list(self._views.items()):
            mark = (v.start_offset, v.end_offset)
            if changed_only and self._saved.get(v) == mark:
                continue
            state = v.export_state()
            if state is not None:
                markstore.save(v.log.dir, self._mark_kind(kind), state)
                self._saved[v] = mark
                saved += 1
        return saved

    def _partition_gone(self, topic: str, partition: int) -> None:
        """The manager forgot a partition (its dir went away under a read-only mount): drop
        its views, cached batches and nodes, so a topic re-created under the same name
        shows its new records, not ours. Runs on the loop (daemon.watcher)."""
        for key in [k for k in self._views if k[:2] == (topic, partition)]:
            self.chunk_cache.drop(self._views.pop(key))
        self.cache.drop(topic, partition)
        self.keys.maps.forget(topic, partition)
        self.inodes.drop_partition(topic, partition)

    def _log_changed(self, lg: Log) -> None:
        """A log grew, shrank or was rewritten: drop the kernel's cached attributes of its
        views so the next stat (tail -f, cat after echo >>) asks again. Only attributes are
        invalidated (no page locks are taken), which is safe from inside any handler; the
        kernel drops stale pages itself when it sees the new size."""
        for kind in (T.MESSAGES, T.JSONL):
            node = self.inodes.by_key.get((kind, lg.topic, lg.partition, None))
            if node is None or node.lookups <= 0:
                continue
            v = self._views.get((lg.topic, lg.partition, kind))
            # the front moved (retention, truncation): every cached page is wrong. That only
            # happens off the request handlers (retention task, adoption), where dropping
            # pages cannot wait on a read this daemon has yet to answer.
            shifted = v is not None and v.start_offset is not None and \
                v.start_offset != lg.log_start_offset
            try:
                pyfuse3.invalidate_inode(node.inode, attr_only=not shifted)
            except OSError:
                pass  # not known to the kernel (any more), or not supported

    async def _record(self, topic: str, partition: int, offset: int) -> Record:
        """The record at ``offset``; FUSEError(ENOENT) when there is none."""
        return (await self._visible_record(self.manager.get_log(topic, partition), offset))[0]

    async def _visible_record(self, lg: Log, offset: int):
        """``(record, batch entry)`` at ``offset`` as this mount's isolation level shows it;
        FUSEError(ENOENT) for no record, a control record, and under read_committed an
        offset at or past the last stable offset or in an aborted transaction."""
        if self.committed and offset >= lg.last_stable_offset:
            raise _err(errno.ENOENT)
        found = self.cache.record(lg, offset)
        if found is None:
            raise _err(errno.ENOENT)
        entry = found[1]
        if self.committed and entry.is_transactional:
            # in a worker thread: without a trusted .txnindex the first look at a segment
            # computes its aborted transactions from the log (kafkafs.log.txnscan)
            aborted = await trio.to_thread.run_sync(lg.committed_filter, entry.base_offset,
                                                    entry.next_offset)
            if aborted.is_aborted(entry):
                raise _err(errno.ENOENT)
        return found

    def _attr(self, node: T.Node, size: int = 0, mtime_ns: int | None = None,
              blocks: int = 0) -> pyfuse3.EntryAttributes:
        """The attributes of ``node`` (``size`` in bytes, ``mtime_ns``: default the mount's
        start). ``blocks``: 512-byte blocks the node takes on disk: those of its files in
        the log dir for a partition dir and a segment file, 0 for everything else (the
        rendered views are not stored, as /proc's files are not), so that ``du`` of the
        mount, which walks the partition dirs but not ``segments/``, adds up to what the
        log dirs hold."""
        a = pyfuse3.EntryAttributes()
        a.st_ino = node.inode
        a.generation = 0
        a.st_uid = self.options.uid
        a.st_gid = self.options.gid
        a.st_blksize = BLOCK_SIZE
        t = self.mount_time_ns if mtime_ns is None else mtime_ns
        a.st_atime_ns = a.st_ctime_ns = a.st_mtime_ns = t
        kind = node.kind
        ro = self.options.read_only
        entry, attr_to = LONG_TIMEOUT, LONG_TIMEOUT
        if kind in (T.ROOT, T.TOPIC):
            a.st_mode = stat.S_IFDIR | (0o555 if ro else 0o755)
            a.st_nlink = 2
            entry = attr_to = SHORT_TIMEOUT
        elif kind == T.PARTITION:
            a.st_mode = stat.S_IFDIR | 0o555
            a.st_nlink = 2
            entry = attr_to = SHORT_TIMEOUT
        elif kind in (T.OFFSETS, T.BYTIME, T.SEGMENTS):
            a.st_mode = stat.S_IFDIR | 0o555
            a.st_nlink = 2
            attr_to = SHORT_TIMEOUT
        elif kind == T.KEYS:
            a.st_mode = stat.S_IFDIR | (0o555 if ro else 0o755)
            a.st_nlink = 2
            entry = attr_to = SHORT_TIMEOUT
        elif kind in (T.KEY, T.NEW_KEY):
            # a name may point at another version (inode) after any append: never cached;
            # a version's attributes never change (fs.keys)
            a.st_mode = stat.S_IFREG | (0o444 if ro else 0o644)
            a.st_nlink = 1
            entry = 0.0
            attr_to = LONG_TIMEOUT if kind == T.KEY else 0.0
        elif kind == T.CONFIG:
            a.st_mode = stat.S_IFREG | (0o444 if ro else 0o644)
            a.st_nlink = 1
            entry = attr_to = 0.0
        elif kind == T.APPEND:
            # only the owner appends; anyone may read it, as an empty file, so that grep -r
            # and other recursive readers pass it without an error
            a.st_mode = stat.S_IFREG | (0o444 if ro else 0o644)
            a.st_nlink = 1
        elif kind in (T.MESSAGES, T.JSONL, T.OFFSET):
            # messages/records.jsonl grow, but every change of the log invalidates their
            # attributes (_log_changed), so the kernel may keep them (and its pages) until then
            a.st_mode = stat.S_IFREG | 0o444
            a.st_nlink = 1
        elif kind == T.BYTIME_LINK:
            a.st_mode = stat.S_IFLNK | 0o777
            a.st_nlink = 1
            entry = attr_to = SHORT_TIMEOUT
        elif kind == T.SEGFILE:
            a.st_mode = stat.S_IFREG | 0o444
            a.st_nlink = 1
            entry = attr_to = SHORT_TIMEOUT
        a.st_size = size
        a.st_blocks = blocks
        a.entry_timeout = entry
        a.attr_timeout = attr_to
        return a

    async def _node_attr(self, node: T.Node) -> pyfuse3.EntryAttributes:
        kind = node.kind
        if kind == T.ROOT:
            return self._attr(node)
        if kind == T.TOPIC:
            if not self.manager.partitions(node.topic):
                raise _err(errno.ENOENT)
            return self._attr(node)
        if kind == T.CONFIG:
            return self._attr(node, len(self._config_text(node.topic)))
        if kind == T.KEYS and node.partition is None:
            if not self.manager.partitions(node.topic):
                raise _err(errno.ENOENT)
            return self._attr(node)
        lg = self._log(node)  # ENOENT for a deleted partition
        if kind == T.PARTITION:
            return self._attr(node, blocks=_stored_blocks(lg))
        seg_mtime = None
        if kind in (T.MESSAGES, T.JSONL):
            v = await self._sized_view(node)
            seg_mtime = lg.active_segment.last_modified_ms() * 1_000_000
            if not v.is_current():
                # never measured and too large to measure before answering: size unknown,
                # shown as 0 (as /proc does); cat, grep and tail read it to its end. A view
                # measured before that is behind (an append landed while it was brought up
                # to date, or the background measurer is part-way) shows what it measured:
                # a size never goes back (tail -f would say "file truncated" and print the
                # file again); the next stat asks again.
                attr = self._attr(node, v.size if v.ever_sized else 0, seg_mtime)
                attr.attr_timeout = 0
                return attr
            size = v.size
            if v.damage is not None:
                size += 1  # the byte at the damage: reading it is the EIO (see read)
            return self._attr(node, size, seg_mtime)
        if kind in (T.OFFSET, T.KEY):
            rec = await self._record(node.topic, node.partition, node.name)
            return self._attr(node, len(rec.value or b""), rec.timestamp * 1_000_000
                              if rec.timestamp >= 0 else None)
        if kind == T.BYTIME_LINK:
            return self._attr(node, len(node.data or b""))
        if kind == T.SEGFILE:
            st = lg.pdir.lstat(node.name)  # the entry itself, through the partition dir's fd
            if not stat.S_ISREG(st.st_mode):  # swapped for a link since the lookup
                raise _err(errno.ENOENT)
            return self._attr(node, st.st_size, st.st_mtime_ns, st.st_blocks)
        return self._attr(node)

    async def _sized_view(self, node: T.Node) -> LineView:
        """The ``messages``/``records.jsonl`` view of ``node``, brought up to the log end
        (in a worker thread) unless it was never measured and the log is larger than
        ``MEASURE_FIRST_BYTES``: a first stat or open of a large partition's view answers at
        once and the reads measure it as they stream (views.py)."""
        v = self.view(node.topic, node.partition, node.kind)
        if not v.is_current() and \
                (v.ever_sized or v.unmeasured_bytes() <= MEASURE_FIRST_BYTES[node.kind]):
            await trio.to_thread.run_sync(v.refresh)
        return v

    def _config_text(self, topic: str) -> bytes:
        cfg = self.manager.topic_config(topic)
        overrides = self.manager.topic_overrides(topic)
        out = [f"# effective configuration of topic {topic}",
               "# (override) marks keys set for this topic; the others are the broker's.",
               ("# Writing this file replaces the overrides; keys equal to the broker's value"
                " are not stored.")]
        for k, v in sorted(cfg.to_properties().items()):
            if k in overrides:
                out.append("# (override)")
            out.append(f"{k}={v}")
        return ("\n".join(out) + "\n").encode()

    def _reply_entry(self, node: T.Node, attr: pyfuse3.EntryAttributes) -> pyfuse3.EntryAttributes:
        node.lookups += 1
        return attr

    # -- lookup / getattr / forget ---------------------------------------------------
    @fuse_errors
    async def lookup(self, parent_inode, name, ctx=None):
        parent = self._node(parent_inode)
        if parent.kind == T.KEYS:
            node = await self.keys.lookup(parent, name)
        else:
            node = await self._child(parent, name)
        attr = await self._node_attr(node)
        return self._reply_entry(node, attr)

    async def _child(self, parent: T.Node, name: bytes) -> T.Node:
        kind = parent.kind
        if name in (b".", b".."):
            raise _err(errno.ENOENT)
        if kind == T.ROOT:
            topic = name.decode("utf-8", "surrogateescape")
            if not self.manager.partitions(topic):
                raise _err(errno.ENOENT)
            return self.inodes.get(T.TOPIC, topic)
        if kind == T.TOPIC:
            if name == b"config":
                return self.inodes.get(T.CONFIG, parent.topic)
            if name == b"key":
                return self.inodes.get(T.KEYS, parent.topic)
            if not _canonical_number(name):
                raise _err(errno.ENOENT)
            p = int(name)
            self.manager.get_log(parent.topic, p)
            return self.inodes.get(T.PARTITION, parent.topic, p)
        if kind == T.PARTITION:
            child = T.PARTITION_CHILDREN.get(name)
            if child is None:
                raise _err(errno.ENOENT)
            return self.inodes.get(child, parent.topic, parent.partition)
        if kind == T.OFFSETS:
            if not _canonical_number(name):
                raise _err(errno.ENOENT)
            offset = int(name)
            # damage: EIO, logged once (fuse_errors)
            await self._visible_record(self.manager.get_log(parent.topic, parent.partition),
                                       offset)
            return self.inodes.get(T.OFFSET, parent.topic, parent.partition, offset)
        if kind == T.BYTIME:
            try:
                ts = parse_timestamp(name.decode("utf-8", "replace"))
            except ValueError:
                raise _err(errno.ENOENT) from None
            lg = self.manager.get_log(parent.topic, parent.partition)
            found = lg.offset_for_timestamp(ts)
            # like ListOffsets under read_committed: nothing at or past the last stable offset
            if found is None or (self.committed and found[0] >= lg.last_stable_offset):
                raise _err(errno.ENOENT)
            node = self.inodes.get(T.BYTIME_LINK, parent.topic, parent.partition,
                                   name.decode("utf-8", "replace"))
            node.data = f"../offset/{found[0]}".encode()
            return node
        if kind == T.SEGMENTS:
            fname = name.decode("utf-8", "surrogateescape")
            lg = self.manager.get_log(parent.topic, parent.partition)
            if not (self._segment_name_visible(fname) and lg.pdir.is_file(fname)):
                raise _err(errno.ENOENT)
            return self.inodes.get(T.SEGFILE, parent.topic, parent.partition, fname)
        raise _err(errno.ENOTDIR)

    @staticmethod
    def _segment_name_visible(fname: str) -> bool:
        """Whether ``segments/`` shows a regular file of this name (links and special files
        in the partition dir never show: see :meth:`~kafkafs.log.safeio.Dir.files`)."""
        if "/" in fname or fname.startswith(".") or not fname:
            return False
        p = parse_segment_filename(fname)
        return p is None or not p[2]  # .deleted / .cleaned / .swap: transient

    @fuse_errors
    async def getattr(self, inode, ctx=None):
        node = self._node(inode)
        return await self._node_attr(node)

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
        EPERM, the times of a read-only file EPERM; EROFS on a read-only mount."""
        node = self._node(inode)
        writable_kind = node.kind in (T.APPEND, T.CONFIG, T.KEY, T.NEW_KEY)
        if fields.update_size:
            h = self._handles.get(fh) if fh is not None else None
            if h is not None and node.kind in (T.KEY, T.NEW_KEY) and h.writer is not None:
                h.writer.truncate(self._log(node), attr.st_size)  # ftruncate of a key file
                return await self._node_attr(node)
            # O_TRUNC on append/config is accepted (nothing to truncate); elsewhere refused
            if node.kind not in (T.APPEND, T.CONFIG) or self.options.read_only:
                raise _err(errno.EACCES if not self.options.read_only else errno.EROFS)
        if fields.update_mode or fields.update_uid or fields.update_gid:
            raise _err(errno.EROFS if self.options.read_only else errno.EPERM)
        if fields.update_atime or fields.update_mtime or fields.update_ctime:
            if self.options.read_only:
                raise _err(errno.EROFS)
            if not writable_kind:
                raise _err(errno.EPERM)
        return await self._node_attr(node)

    @fuse_errors
    async def readlink(self, inode, ctx):
        node = self.inodes.find(inode)
        if node is None or node.kind != T.BYTIME_LINK:
            raise _err(errno.EINVAL)
        return node.data

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
        if node.kind not in (T.ROOT, T.TOPIC, T.PARTITION, T.OFFSETS, T.BYTIME, T.SEGMENTS,
                             T.KEYS):
            raise _err(errno.ENOTDIR)
        fh = next(self._fh)
        self._handles[fh] = _Handle(node)
        return fh

    @fuse_errors
    async def releasedir(self, fh):
        self._handles.pop(fh, None)

    def _dir_entries(self, node: T.Node, start_id: int):
        """Yield (name, child node, next_id) from ``start_id`` on."""
        kind = node.kind
        if kind == T.ROOT:
            names = [(t.encode(), self.inodes.get(T.TOPIC, t)) for t in self.manager.topics()]
        elif kind == T.TOPIC:
            names = [(b"config", self.inodes.get(T.CONFIG, node.topic))]
            if self.options.list_all:
                names.append((b"key", self.inodes.get(T.KEYS, node.topic)))
            names += [(str(p).encode(), self.inodes.get(T.PARTITION, node.topic, p))
                      for p in self.manager.partitions(node.topic)]
        elif kind == T.PARTITION:
            names = [(n, self.inodes.get(k, node.topic, node.partition))
                     for n, k in T.PARTITION_CHILDREN.items()
                     if self.options.list_all or n not in T.BY_NAME_ONLY]
        elif kind == T.SEGMENTS:
            lg = self._log(node)
            names = [(f.encode("utf-8", "surrogateescape"),
                      self.inodes.get(T.SEGFILE, node.topic, node.partition, f))
                     for f in sorted(lg.pdir.files()) if self._segment_name_visible(f)]
        else:
            names = []
        for i, (name, child) in enumerate(names[start_id:], start_id):
            yield name, child, i + 1

    def _readdir_offsets(self, h: _Handle, start_id: int, token) -> None:
        """Stream ``offset/`` (fs.listing): names, computed inode numbers and each record's
        real attributes (value size, timestamp as mtime), no node per entry. The kernel
        keeps them as a lookup's (a record never changes), so ``ls -l`` asks nothing more
        per name. ``next_id`` of an entry is its offset + 1."""
        node = h.node
        lg = self._log(node)
        listing = h.listing
        if listing is None or listing.next_id != start_id or listing.log is not lg:
            listing = h.listing = OffsetListing(lg, start_id, self.committed)
        base = self.inodes.offset_inodes(node.topic, node.partition)
        attr = self._attr(self.inodes.get(T.OFFSET, node.topic, node.partition, 0))
        reply = pyfuse3.readdir_reply
        for entry in listing:
            offset, size, timestamp = entry
            child = None
            if base is not None and offset < 1 << T.OFFSET_BITS:
                attr.st_ino = base | offset
            else:  # past the computed numbers: a kept node, counted as a lookup
                child = self.inodes.get(T.OFFSET, node.topic, node.partition, offset)
                attr.st_ino = child.inode
            attr.st_size = size
            attr.st_atime_ns = attr.st_ctime_ns = attr.st_mtime_ns = \
                timestamp * 1_000_000 if timestamp >= 0 else self.mount_time_ns
            if not reply(token, str(offset).encode(), attr, offset + 1):
                listing.push_back(entry)
                return
            if child is not None:
                child.lookups += 1
            listing.next_id = offset + 1

    @fuse_errors
    async def readdir(self, fh, start_id, token):
        h = self._handles[fh]
        if h.node.kind == T.OFFSETS:
            self._readdir_offsets(h, start_id, token)
            return
        if h.node.kind == T.KEYS:
            await self.keys.readdir(h, start_id, token)
            return
        for name, child, next_id in self._dir_entries(h.node, start_id):
            try:
                attr = await self._node_attr(child)
            except pyfuse3.FUSEError:
                continue  # gone meanwhile
            except (LogError, CorruptRecordError, OSError):
                # a file whose size cannot be had now (damage in the log): listed all the
                # same, without attributes the kernel may keep; a stat of it says why
                attr = self._attr(child)
                attr.attr_timeout = 0
            if not pyfuse3.readdir_reply(token, name, attr, next_id):
                break
            child.lookups += 1

    @fuse_errors
    async def mkdir(self, parent_inode, name, mode, ctx):
        parent = self._node(parent_inode)
        if self.options.read_only:
            raise _err(errno.EROFS)
        sname = name.decode("utf-8", "surrogateescape")
        if parent.kind == T.ROOT:
            if self.manager.partitions(sname):
                raise _err(errno.EEXIST)
            await trio.to_thread.run_sync(self.manager.create_topic, sname)
            node = self.inodes.get(T.TOPIC, sname)
        elif parent.kind == T.TOPIC:
            if not _canonical_number(name):  # "03", "+5", "-1": not a partition's name
                raise _err(errno.EINVAL)
            p = int(name)
            if p in self.manager.partitions(parent.topic):
                raise _err(errno.EEXIST)
            await trio.to_thread.run_sync(self.manager.add_partitions, parent.topic, p + 1)
            node = self.inodes.get(T.PARTITION, parent.topic, p)
        else:
            raise _err(errno.EACCES)
        return self._reply_entry(node, await self._node_attr(node))

    @fuse_errors
    async def rmdir(self, parent_inode, name, ctx):
        parent = self._node(parent_inode)
        if self.options.read_only:
            raise _err(errno.EROFS)
        if parent.kind != T.ROOT:
            raise _err(errno.EACCES)
        topic = name.decode("utf-8", "surrogateescape")
        if not self.manager.partitions(topic):
            raise _err(errno.ENOENT)
        await trio.to_thread.run_sync(self.manager.delete_topic, topic)
        self._topic_gone(topic)

    def _topic_gone(self, topic: str) -> None:
        """Drop what the tree kept of a deleted or replaced topic: views, cached batches,
        key maps, nodes."""
        for key in [k for k in self._views if k[0] == topic]:
            self.chunk_cache.drop(self._views.pop(key))
        self.cache.drop(topic)
        self.keys.maps.forget(topic)
        self.inodes.drop_topic(topic)

    @fuse_errors
    async def unlink(self, parent_inode, name, ctx):
        parent = self._node(parent_inode)
        if parent.kind == T.KEYS and not self.options.read_only:
            return await self.keys.unlink(parent, name)  # a tombstone
        raise _err(errno.EROFS if self.options.read_only else errno.EACCES)

    @fuse_errors
    async def create(self, parent_inode, name, mode, flags, ctx):
        parent = self._node(parent_inode)
        if parent.kind == T.KEYS and not self.options.read_only:
            node, writer = await self.keys.create(parent, name, flags)
            h = _Handle(node)
            h.writer = writer
            info = pyfuse3.FileInfo(fh=next(self._fh), direct_io=True)
            self._handles[info.fh] = h
            return info, self._reply_entry(node, self._attr(node))
        raise _err(errno.EROFS if self.options.read_only else errno.EACCES)

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
        accmode = flags & os.O_ACCMODE
        writing = accmode in (os.O_WRONLY, os.O_RDWR)
        kind = node.kind
        h = _Handle(node)
        info = pyfuse3.FileInfo()
        if kind == T.APPEND:
            self._log(node)
            if writing:
                if self.options.read_only:
                    raise _err(errno.EROFS)
                h.writer = LineWriter(self.options.parse_key, self.options.key_separator,
                                      self.options.batch_size)
            h.record = b""  # reads see an empty file
            info.direct_io = True
        elif kind == T.CONFIG:
            if writing and self.options.read_only:
                raise _err(errno.EROFS)
            if accmode == os.O_RDWR:
                raise _err(errno.EACCES)
            if writing:
                h.writer = ConfigWriter(node.topic)
            else:
                h.record = self._config_text(node.topic)
            info.direct_io = True
        elif kind in (T.KEY, T.NEW_KEY):
            h.record, h.writer = await self.keys.open(node, flags, info)
        elif writing:
            raise _err(errno.EROFS if self.options.read_only else errno.EACCES)
        elif kind == T.OFFSET:
            # the record is fetched by the first read: a reopened offset whose page the
            # kernel keeps needs none. One gone since its lookup (retention) fails here.
            lg = self._log(node)
            if not lg.log_start_offset <= node.name < lg.log_end_offset:
                raise _err(errno.ENOENT)
            info.keep_cache = True
        elif kind in (T.MESSAGES, T.JSONL):
            v = await self._sized_view(node)
            h.view = v
            if v.damage is not None or not v.is_current():
                # the view ends at damage: reads go past the size to the daemon, which
                # answers the one at the end with EIO (the page cache would stop at the size
                # and the reader would see a clean end of file); an unmeasured view's size
                # is not known yet: its reads stream to the end the same way
                info.direct_io = h.direct = True
            else:
                # the kernel keeps its pages across opens; when earlier bytes change
                # (retention) _log_changed drops them explicitly
                info.keep_cache = True
        elif kind == T.SEGFILE:
            lg = self._log(node)
            # never follow a link planted in a log dir, nor open a FIFO or device: the name
            # was checked at lookup; the partition dir's descriptor, O_NOFOLLOW and fstat
            # close the race with a swap after that (ENOENT then)
            h.fd = lg.pdir.open_file(node.name)
            info.keep_cache = not node.name.endswith(".log") or \
                lg.active_segment.log_path != os.path.join(lg.dir, node.name)
        else:
            raise _err(errno.EISDIR)
        fh = next(self._fh)
        self._handles[fh] = h
        info.fh = fh
        return info

    @fuse_errors
    async def read(self, fh, off, size):
        h = self._handles[fh]
        kind = h.node.kind
        if kind in (T.OFFSET, T.CONFIG, T.KEY, T.APPEND):
            if h.record is None and kind == T.OFFSET:  # offset/N, first read
                h.record = await self._record(h.node.topic, h.node.partition, h.node.name)
            data = h.record if kind in (T.CONFIG, T.APPEND) else h.record.value
            return (data or b"")[off:off + size]
        if h.view is not None:
            v = h.view
            if self.manager.logs.get((v.log.topic, v.log.partition)) is not v.log:
                raise _err(errno.ESTALE)  # the partition went away (a topic deleted under ro)
            damage = v.damage
            if damage is not None and not h.direct and off + size > v.size:
                # a page-cache handle (opened before the damage was found): a short answer
                # would have the kernel fill the page with zeros and show them as data, so
                # the whole request that reaches the damage fails
                raise damage
            # chunks of bounded size render right here (a pread, a CRC and a C loop over at
            # most INLINE_RENDER_BYTES): a hop to a worker thread costs more than the work.
            # Rendering the next chunks ahead in another thread was measured no faster on
            # this 2-vCPU machine, twice in Python (the threads waited on each other's GIL:
            # 0.41 s against 0.27 s for 200 MB) and once on a native thread that never took
            # the GIL (173 ms against 166 ms inline, best of 10): the trivial fs alone keeps
            # both cores busy, so the render costs the same CPU wherever it runs.
            data = v.read(off, size, render=INLINE_RENDER_BYTES, zero_copy=True)
            if data is None:
                data = await trio.to_thread.run_sync(v.read, off, size)
            return data
        if h.fd >= 0:
            return await trio.to_thread.run_sync(os.pread, h.fd, size, off)
        raise _err(errno.EBADF)

    @fuse_errors
    async def write(self, fh, off, buf):
        h = self._handles[fh]
        if h.writer is None:
            raise _err(errno.EBADF)
        if h.node.kind == T.CONFIG:
            try:
                return h.writer.write(buf)
            except ConfigTooLargeError:
                raise _err(errno.EFBIG) from None
        if h.node.kind in (T.KEY, T.NEW_KEY):  # fs.keys: kept until close
            return h.writer.write(self._log(h.node), buf, off)
        # append (fs.append): the lines go to the log on the loop, a pwrite each batch
        await self._commit_wait(h.node)
        return h.writer.write(self._log(h.node), buf)

    async def _commit_wait(self, node) -> None:
        """Wait (off the loop's thread: the loop runs on) until no bulk commit holds the
        lock of ``node``'s log (:meth:`_commit_staged`)."""
        await self.commit_wait(node.topic, node.partition)

    async def commit_wait(self, topic: str, partition: int) -> None:
        """Wait until no bulk commit holds the lock of the partition's log
        (:meth:`CommitGate.wait <kafkafs.core.commits.CommitGate.wait>`); FUSEError(EIO)
        when a commit recorded for it could not be finished (an append would land past it:
        refused until the next start finishes the commit)."""
        await self.core.commits.wait(topic, partition)

    @fuse_errors
    async def flush(self, fh):
        h = self._handles.get(fh)
        if h is None or h.writer is None:
            return
        if h.node.kind == T.APPEND:
            await self._commit_wait(h.node)
            h.writer.close(self._log(h.node))
        elif h.node.kind in (T.KEY, T.NEW_KEY):
            if h.writer.dirty:
                await self._commit_wait(h.node)
            h.writer.flush(self._log(h.node))  # one keyed record (fs.keys)
        else:
            props = h.writer.finish()
            if props is not None:
                self._store_config(h.node.topic, props)

    def _store_config(self, topic: str, props: dict[str, str]) -> None:
        """Replace ``topic``'s overrides with the checked ``props`` written to its config
        file; keys whose value equals the broker's are not stored."""
        defaults = self.manager.config.log.to_properties()
        overrides = {k: v for k, v in props.items() if defaults.get(k) != v.strip()}
        self.manager.alter_topic_config(topic, overrides)

    @fuse_errors
    async def fsync(self, fh, datasync):
        h = self._handles.get(fh)
        if h is None or h.node.kind != T.APPEND:
            return
        lg = self._log(h.node)
        await trio.to_thread.run_sync(lg.flush)
        if h.writer is not None:
            h.writer.raise_pending()

    @fuse_errors
    async def release(self, fh):
        h = self._handles.pop(fh, None)
        if h is None:
            return
        if h.fd >= 0:
            os.close(h.fd)
        if h.node.kind == T.APPEND and h.writer is not None and h.writer.buf:
            # flush() normally produced it; a handle closed without flush still loses nothing
            size = len(h.writer.buf)
            try:
                await self._commit_wait(h.node)
                h.writer.finish_line(self._log(h.node))
            except Exception:
                log.exception("dropping %d bytes of a partial line at close", size)
        if h.node.kind in (T.KEY, T.NEW_KEY) and h.writer is not None:
            try:  # an empty value of a file created or truncated (fs.keys)
                if h.writer.dirty or (h.writer.fresh and not h.writer.produced):
                    await self._commit_wait(h.node)
                h.writer.release(self._log(h.node))
            except Exception:
                log.exception("dropping the value of a key file at close")

    # -- extended attributes ---------------------------------------------------------
    async def _xattr_values(self, node: T.Node) -> dict[str, bytes | None]:
        """xattr name -> value of ``node`` (None: not set)."""
        if node.kind == T.ROOT:
            return self.core.control.attributes()  # core.control
        if node.kind not in (T.OFFSET, T.KEY):
            return {}
        rec, entry = await self._visible_record(self._log(node), node.name)
        ts_type = TIMESTAMP_TYPE_NAMES[entry.timestamp_type]
        # as records.jsonl shows them: a value that is not UTF-8 as {"base64": "..."}
        headers = [{"key": k, "value": text_or_base64(v)} for k, v in rec.headers]
        values = {
            "key": rec.key,
            "timestamp": str(rec.timestamp).encode(),
            "timestamp_type": ts_type.encode(),
            "headers": json.dumps(headers, ensure_ascii=False).encode(),
            "offset": str(rec.offset).encode(),
            "partition": str(node.partition).encode(),
            "topic": node.topic.encode(),
        }
        return {XATTR_PREFIX + k: v for k, v in values.items()}

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

    def _forget_topic_later(self, topic: str) -> None:
        """A control request replaced ``topic``'s data (:attr:`StorageCore.on_topic_replaced
        <kafkafs.core.storage.StorageCore.on_topic_replaced>`): drop what the tree kept of
        it now, and have the kernel forget its name once the request has been answered (it
        may hold the root's lock, which the kernel's invalidation waits for)."""
        self._topic_gone(topic)
        if self.nursery is not None:
            self.nursery.start_soon(trio.to_thread.run_sync, _forget_entry,
                                    pyfuse3.ROOT_INODE,
                                    topic.encode("utf-8", "surrogateescape"))

    @fuse_errors
    async def removexattr(self, inode, name, ctx):
        raise _err(errno.EROFS if self.options.read_only else errno.EACCES)
