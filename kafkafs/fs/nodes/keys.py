"""The key view: ``<topic>/key/<k>`` and ``<topic>/<p>/key/<k>`` (docs/design.md §3.1,
docs/tree.md "The key view").

Reading ``key/<k>`` gives the value of key k's latest committed record -- in the partition
Kafka's default partitioner picks for k (``<topic>/key/``: murmur2 of the key bytes,
positive, mod the partition count, taken as the highest partition number + 1), or in one
partition whatever the partitioner says (``<topic>/<p>/key/``). ``echo v > key/k``
produces one record keyed k whose value is exactly the bytes written (when the descriptor
is closed), ``rm key/k`` a tombstone, ``ls key/`` lists the live keys. The index behind it is
:class:`~kafkafs.log.keymap.KeyMap`, one per partition, made on first use.

Names: fs.keys (one name per key, ``%=`` escapes, ``%=#`` digest names).

Inodes. ``key/<k>`` resolves to the inode of the record holding the current value (fs.tree:
computed from the partition and the offset, so ``ls`` of millions of keys keeps no node):
names are never cached by the kernel (entry timeout 0: the next value is another inode),
a version's attributes and pages never change (but ``>`` on the name truncates the inode it
finds, as on any file: a reader still holding it then meets the end of the file).
``open(O_CREAT)`` of a new key gives a kept ``NEW_KEY`` inode until the kernel forgets it.

Writing. A descriptor opened for writing holds the file's content: empty with ``O_TRUNC``
(``>``) or for a new key, else the current value; writes land at their offset, and at the
end with ``O_APPEND`` (so ``>>`` appends to the current value, as a Unix user expects).
The content is produced as one record by each ``close`` of a descriptor after which it
was written (a file created or truncated and closed with nothing written -- ``: > key/k``,
``touch key/new`` -- gives an empty value when its last descriptor goes); an error
(EMSGSIZE, ENOSPC, EROFS) fails that ``write`` or the ``close``, and a content refused at
close is dropped, never produced later. ``O_RDWR`` is refused (EACCES), as on ``config``.

Three kinds: :class:`KeysDir` (``key/``), :class:`KeyFile` (a version of a key),
:class:`NewKeyFile` (created, not produced yet). The names' resolution and the key maps
are the mount's :class:`KeyView` (``fs.keys``), which the kinds share.
"""

from __future__ import annotations

import errno
import logging
import os

import pyfuse3
import trio

from ...log.errors import OffsetOutOfRangeError
from ...log.keymap import KeyMap, KeyMaps, key_digest
from ...log.log import Log, now_ms
from ...log.partitioner import partition_for_key
from .. import tree as T
from ..keyfile import KeyWriter
from ..keys import Hashed, key_name, parse_name
from ..listing import KeyListing
from .base import LONG_TIMEOUT, SHORT_TIMEOUT, Directory, Handle, Kind, err
from .offsets import record, record_attr, record_xattrs

log = logging.getLogger(__name__)

INLINE_CATCH_UP = 1000  # offsets a map may lag and still be caught up on the event loop
MEMO_S = 0.5  # seconds a lookup's answer may be reused while its log is unchanged
MEMO_SIZE = 1024


# -- names to records ---------------------------------------------------------------------
class KeyView:
    """The key view of a :class:`~kafkafs.fs.operations.KafkaFS` (``fs``), shared by the
    key kinds: names resolved to the offsets of their keys' latest records. ``maps``: the
    storage core's :class:`~kafkafs.log.keymap.KeyMaps` (the core keeps them current and
    saves them at shutdown)."""

    def __init__(self, fs, maps: KeyMaps):
        self.fs = fs
        self.maps = maps
        self._memo: dict[tuple, tuple] = {}  # (parent inode, name) -> lookup (see lookup)

    # -- maps ---------------------------------------------------------------------------
    async def ready(self, lg: Log) -> KeyMap:
        """The map of ``lg`` up to its last stable offset: caught up right here when it
        lags a little, else in a worker thread (a first use reads or builds it)."""
        km = self.maps.peek(lg)
        if km is not None:
            lag = km.pending(lg)
            if lag == 0:
                return km
            if lag <= INLINE_CATCH_UP and km.catch_up(lg, blocking=False, merge=False) is not None:
                return km
        return await trio.to_thread.run_sync(self.maps.caught_up, lg)

    def partitions(self, topic: str, partition: int | None) -> list[int]:
        """The partitions a view looks in: ``[partition]``, or every partition of the
        topic for its view (``partition`` None). FUSEError(ENOENT) when there is none."""
        if partition is not None:
            if (topic, partition) not in self.fs.manager.logs:
                raise err(errno.ENOENT)
            return [partition]
        parts = self.fs.manager.partitions(topic)
        if not parts:
            raise err(errno.ENOENT)
        return parts

    @staticmethod
    def _home(key: bytes, parts: list[int]) -> int:
        """The partition Kafka's default partitioner picks for ``key``."""
        return partition_for_key(key, max(parts) + 1)

    async def resolve(self, parent: T.Node, name: bytes, *, known: bool = False):
        """``(log, key, offset)`` of the key named ``name`` in the view ``parent``:
        ``offset`` is that of its latest record, None when the key is absent. ``key`` is
        None (and ``log`` too) for a digest name of a key not live here -- with ``known``,
        a deleted key's bytes are still found from its tombstone while the map holds it.
        Raises FUSEError(ENOENT) for a name no key has or a partition not here."""
        try:
            parsed = parse_name(name)
        except ValueError:
            raise err(errno.ENOENT) from None
        parts = self.partitions(parent.topic, parent.partition)
        if isinstance(parsed, Hashed):
            return await self._resolve_digest(parent, name, parsed.digest, parts, known)
        p = parts[0] if parent.partition is not None else self._home(parsed, parts)
        if p not in parts:
            raise err(errno.ENOENT)  # the partitioner's partition is not in these log dirs
        lg = self.fs.manager.get_log(parent.topic, p)
        km = await self.ready(lg)
        digest = key_digest(parsed)
        offset = await self._check(lg, km, km.get_digest(digest), digest,
                                   lambda k: k == parsed)
        return lg, parsed, offset

    async def _resolve_digest(self, parent, name, digest, parts, known):
        def named(k):
            return k is not None and key_digest(k) == digest

        for p in parts:
            lg = self.fs.manager.get_log(parent.topic, p)
            km = await self.ready(lg)
            live = await self._check(lg, km, km.get_digest(digest), digest, named)
            at = live if live is not None else (km.latest_offset(digest) if known else None)
            if at is None:
                continue
            try:
                found = self.fs.cache.record(lg, at)
            except OffsetOutOfRangeError:  # below the log start offset since
                found = None
            key = found[0].key if found is not None else None
            if not named(key) or key_name(key) != name or \
                    (parent.partition is None and self._home(key, parts) != p):
                continue
            return lg, key, live
        return None, None, None

    async def _check(self, lg: Log, km: KeyMap, offset: int | None, digest: bytes,
                     matches) -> int | None:
        """The offset of the key's latest record after checking the entry ``offset``
        against the log (a scan of the log repairs a stale one): None when absent."""
        if offset is None:
            return None
        status = km.verify(lg, offset, self.fs.cache.record, matches)
        if status == "ok":
            return offset
        if status == "gone":
            return None
        return await trio.to_thread.run_sync(km.rescan, lg, matches, digest)

    async def lookup(self, parent: T.Node, name: bytes) -> T.Node:
        """The inode of the current value of the key named ``name``; FUSEError(ENOENT)
        when there is none (never written, deleted, out of the log).

        The kernel looks a name up twice per ``open`` (the name is never cached, so the
        path walk's lookup is followed by a revalidation): an answer is reused for
        ``MEMO_S`` seconds while its log, the log's start and end offsets and the set of
        partitions are unchanged (the answer cannot have changed then)."""
        memo_key = (parent.inode, name)
        hit = self._memo.get(memo_key)
        if hit is not None and hit[0] == self._state(hit[1]) and \
                trio.current_time() - hit[3] < MEMO_S:
            return self.fs.inodes.get(T.KEY, hit[1].topic, hit[1].partition, hit[2])
        lg, _key, offset = await self.resolve(parent, name)
        if offset is None:
            raise err(errno.ENOENT)
        if len(self._memo) >= MEMO_SIZE:
            self._memo.clear()
        self._memo[memo_key] = (self._state(lg), lg, offset, trio.current_time())
        return self.fs.inodes.get(T.KEY, lg.topic, lg.partition, offset)

    def _state(self, lg: Log) -> tuple:
        manager = self.fs.manager
        return (manager.logs.get((lg.topic, lg.partition)) is lg, lg.log_start_offset,
                lg.log_end_offset, len(manager.logs))

    def live(self, logs: list[Log]) -> list:
        """Per log, the sorted offsets of its live keys (a worker thread: a first use reads
        or builds the map)."""
        return [self.maps.caught_up(lg).live_offsets(lg) for lg in logs]


# -- the kinds ----------------------------------------------------------------------------
class KeysDir(Directory):
    """``<topic>/key/`` (node partition None) and ``<topic>/<p>/key/``: listed only with
    ``-o list_all`` (fs.tree); names resolve through ``fs.keys``; ``open(O_CREAT)`` of a new
    key, ``rm`` (a tombstone). Writable unless the mount is read-only."""

    kind = T.KEYS
    name = b"key"
    parents = (T.TOPIC, T.PARTITION)
    listed = False
    perm = 0o755
    ro_perm = 0o555
    entry_timeout = attr_timeout = SHORT_TIMEOUT

    async def getattr(self, node: T.Node):
        if node.partition is None and not self.fs.manager.partitions(node.topic):
            raise err(errno.ENOENT)
        return await super().getattr(node)

    async def lookup_name(self, parent: T.Node, name: bytes) -> T.Node:
        return await self.fs.keys.lookup(parent, name)

    async def readdir(self, h: Handle, start_id: int, token) -> None:
        """Stream ``ls key/``: every live key (in the partitioner's partition for the
        topic's view), in partition then offset order; positions are ``partition << 43 |
        offset + 1``. Names come with their real attributes (the inode of the version)."""
        fs = self.fs
        node = h.node
        listing = h.listing
        if listing is None or listing.next_id != start_id:
            parts = fs.keys.partitions(node.topic, node.partition)
            logs = [fs.manager.get_log(node.topic, p) for p in parts]
            home = max(parts) + 1 if node.partition is None else None
            offsets = await trio.to_thread.run_sync(fs.keys.live, logs)
            listing = h.listing = KeyListing(logs, offsets, start_id, home)
        inodes = fs.inodes
        attr = fs.kinds[T.KEY].attr(inodes.get(T.KEY, node.topic, listing.logs[0].partition, 0))
        reply = pyfuse3.readdir_reply
        for lg, name, offset, size, ts in listing:
            child = inodes.get(T.KEY, lg.topic, lg.partition, offset)
            attr.st_ino = child.inode
            attr.st_size = size
            attr.st_blocks = (size + 511) // 512
            if ts >= 0:
                attr.st_mtime_ns = attr.st_ctime_ns = attr.st_atime_ns = ts * 1_000_000
            next_id = listing.position(lg.partition, offset)
            if not reply(token, name, attr, next_id):
                listing.push_back()
                return
            if child.inode in inodes.by_inode:
                child.lookups += 1  # a kept node (offsets past the computed numbers)
            listing.next_id = next_id

    async def create(self, parent: T.Node, name: bytes, flags: int,
                     info: pyfuse3.FileInfo) -> tuple[T.Node, Handle]:
        """``open(O_CREAT)`` of a name no live key has: a ``NEW_KEY`` node and a descriptor
        writing it (``direct_io``). Raises FUSEError: EROFS, EACCES (``O_RDWR``), EINVAL (a
        name no key can have, or a digest name of a key nobody knows), EEXIST (``O_EXCL``
        and the key lives), ENOENT (the partition is not in these log dirs), EMSGSIZE (the
        key alone is too large)."""
        fs = self.fs
        if fs.options.read_only:
            raise err(errno.EROFS)
        if flags & os.O_ACCMODE != os.O_WRONLY:
            raise err(errno.EACCES)
        try:
            parse_name(name)
        except ValueError:
            raise err(errno.EINVAL) from None
        lg, key, live = await fs.keys.resolve(parent, name, known=True)
        if key is None:
            raise err(errno.EINVAL)  # a digest name creates nothing (module docstring)
        if live is not None and flags & os.O_EXCL:
            raise err(errno.EEXIST)
        trunc = live is None or bool(flags & os.O_TRUNC)
        content = b"" if trunc else \
            ((await record(fs, lg.topic, lg.partition, live)).value or b"")
        writer = KeyWriter(key, lg.partition, content, append=bool(flags & os.O_APPEND),
                           fresh=trunc)
        writer.check(lg, len(content))
        node = fs.inodes.get(T.NEW_KEY, lg.topic, lg.partition, key)
        h = Handle(node, fs.kinds[T.NEW_KEY])
        h.writer = writer
        info.direct_io = True
        return node, h

    async def unlink(self, parent: T.Node, name: bytes) -> None:
        """``rm key/<k>``: append a tombstone for k. FUSEError(ENOENT) when k has no value;
        errors of the append (ENOSPC, ...) propagate."""
        fs = self.fs
        if parent.partition is not None:
            await fs.commit_wait(parent.topic, parent.partition)
        lg, key, offset = await fs.keys.resolve(parent, name)
        if offset is None:
            raise err(errno.ENOENT)
        await fs.commit_wait(lg.topic, lg.partition)  # (a bulk commit appending there)
        lg.append([(now_ms(), key, None, ())])


class KeyFileBase(Kind):
    """What both key file kinds do when written: a :class:`KeyWriter` per descriptor,
    produced at ``close``. Never cached by name (entry timeout 0)."""

    dynamic = True
    perm = 0o644
    ro_perm = 0o444
    entry_timeout = 0.0
    writable = True

    async def open_version(self, node: T.Node, info: pyfuse3.FileInfo) -> Handle:
        """A descriptor reading the key's value."""
        raise NotImplementedError

    async def content(self, node: T.Node) -> tuple[bytes, bytes]:
        """``(key, value)`` a descriptor opened for writing starts from (without
        ``O_TRUNC``)."""
        raise NotImplementedError

    async def open(self, node: T.Node, flags: int, info: pyfuse3.FileInfo) -> Handle:
        """Read-only: :meth:`open_version`. Else a :class:`KeyWriter` (``direct_io``).
        Raises FUSEError: EROFS (read-only mount), EACCES (``O_RDWR``)."""
        accmode = flags & os.O_ACCMODE
        if accmode == os.O_RDONLY:
            return await self.open_version(node, info)
        if self.fs.options.read_only:
            raise err(errno.EROFS)
        if accmode != os.O_WRONLY:
            raise err(errno.EACCES)
        info.direct_io = True
        trunc = bool(flags & os.O_TRUNC)
        key, content = await self.content(node)
        h = Handle(node, self)
        h.writer = KeyWriter(key, node.partition, b"" if trunc else content,
                             append=bool(flags & os.O_APPEND), fresh=trunc)
        return h

    async def truncate(self, node: T.Node, h: Handle | None, size: int) -> bool:
        if h is not None and h.writer is not None:
            h.writer.truncate(self.log(node), size)  # ftruncate of a key file
            return True
        return await super().truncate(node, h, size)

    async def write(self, h: Handle, off: int, buf: bytes) -> int:
        if h.writer is None:
            raise err(errno.EBADF)
        return h.writer.write(self.log(h.node), buf, off)  # kept until close

    async def flush(self, h: Handle) -> None:
        writer = h.writer
        if writer is None:
            return
        node = h.node
        if writer.dirty:
            await self.fs.commit_wait(node.topic, node.partition)
        writer.flush(self.log(node))  # one keyed record

    async def release(self, h: Handle) -> None:
        writer = h.writer
        if writer is None:
            return
        node = h.node
        try:  # an empty value of a file created or truncated
            if writer.dirty or (writer.fresh and not writer.produced):
                await self.fs.commit_wait(node.topic, node.partition)
            writer.release(self.log(node))
        except Exception:
            log.exception("dropping the value of a key file at close")


class NewKeyFile(KeyFileBase):
    """A key created by ``open(O_CREAT)`` and not produced yet (node name: the key's
    bytes): written only (reading it is ENOENT); its attributes are not cached either."""

    kind = T.NEW_KEY
    attr_timeout = 0.0

    async def open_version(self, node: T.Node, info: pyfuse3.FileInfo) -> Handle:
        raise err(errno.ENOENT)  # not produced yet

    async def content(self, node: T.Node) -> tuple[bytes, bytes]:
        return node.name, b""


class KeyFile(KeyFileBase):
    """A version of a key (node name: the offset of its record; inode computed, fs.tree):
    reads its value, as ``offset/N`` does. Its attributes never change; its name is never
    cached (the next value is another inode)."""

    kind = T.KEY
    attr_timeout = LONG_TIMEOUT

    async def getattr(self, node: T.Node):
        return await record_attr(self, node)

    async def open_version(self, node: T.Node, info: pyfuse3.FileInfo) -> Handle:
        info.keep_cache = True  # a version never changes
        h = Handle(node, self)
        h.record = await record(self.fs, node.topic, node.partition, node.name)
        return h

    async def content(self, node: T.Node) -> tuple[bytes, bytes]:
        rec = await record(self.fs, node.topic, node.partition, node.name)
        return rec.key, rec.value or b""

    async def read(self, h: Handle, off: int, size: int) -> bytes:
        return (h.record.value or b"")[off:off + size]

    async def xattrs(self, node: T.Node) -> dict[str, bytes | None]:
        return await record_xattrs(self.fs, node)
