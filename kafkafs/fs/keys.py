"""The key view: ``<topic>/key/<k>`` and ``<topic>/<p>/key/<k>`` (docs/design.md §3.1, docs/tree.md
"The key view").

Reading ``key/<k>`` gives the value of key k's latest committed record -- in the partition
Kafka's default partitioner picks for k (``<topic>/key/``: murmur2 of the key bytes,
positive, mod the partition count, taken as the highest partition number + 1), or in one
partition whatever the partitioner says (``<topic>/<p>/key/``). ``echo v > key/k``
produces one record keyed k whose value is exactly the bytes written (when the descriptor
is closed), ``rm key/k`` a tombstone, ``ls key/`` lists the live keys. The index behind it is
:class:`~kafkafs.log.keymap.KeyMap`, one per partition, made on first use.

Names. A key is its own file name when it is one (not empty, at most 255 bytes, valid
UTF-8, no ``/`` or NUL, not ``.`` or ``..``) and does not begin with the reserved prefix
``%=``. Every other key is named ``%=`` + its base64url encoding without padding, or, when
that is longer than 255 bytes, ``%=#`` + the 32 hex digits of its 128-bit BLAKE2b digest
(:func:`~kafkafs.log.keymap.key_digest`). Each key has exactly one name and each name
names at most one key (:func:`key_name`, :func:`parse_name`); other spellings are ENOENT.
A digest name can read, overwrite and remove a key the map knows; it cannot create one
(EINVAL: append it with ``parse.key``).

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
"""

from __future__ import annotations

import base64
import errno
import logging
import os

import pyfuse3
import trio

from ..log.errors import OffsetOutOfRangeError, RecordTooLargeError
from ..log.keymap import KeyMap, KeyMaps, key_digest
from ..log.log import Log, now_ms
from ..log.partitioner import partition_for_key
from ..record.batch import single_record_batch_size
from ..record.errors import CorruptRecordError
from . import tree as T
from .append import _uncompressed
from .listing import _after_damage

log = logging.getLogger(__name__)

ESCAPE = b"%="  # the reserved prefix of escaped names
HASHED = b"#"  # after the prefix: a digest name (not in the base64url alphabet)
NAME_MAX = 255
INLINE_CATCH_UP = 1000  # offsets a map may lag and still be caught up on the event loop
SEEK_GAP = 4096  # a listing seeks (index lookup) rather than read through a longer gap
MEMO_S = 0.5  # seconds a lookup's answer may be reused while its log is unchanged
MEMO_SIZE = 1024
_POS_BITS = 43  # readdir positions: partition << 43 | offset + 1
_POS_MASK = (1 << _POS_BITS) - 1


# -- names --------------------------------------------------------------------------------
def _plain(key: bytes) -> bool:
    """Whether ``key`` is its own file name."""
    if not key or len(key) > NAME_MAX or key in (b".", b"..") or b"/" in key or \
            b"\0" in key or key.startswith(ESCAPE):
        return False
    try:
        key.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def key_name(key: bytes) -> bytes:
    """The one file name of ``key`` in a key view (module docstring)."""
    if _plain(key):
        return key
    enc = base64.urlsafe_b64encode(key).rstrip(b"=")
    if len(ESCAPE) + len(enc) <= NAME_MAX:
        return ESCAPE + enc
    return ESCAPE + HASHED + key_digest(key).hex().encode()


class Hashed:
    """A digest name: the key is known only by its 16-byte ``digest``."""

    __slots__ = ("digest",)

    def __init__(self, digest: bytes):
        self.digest = digest


def parse_name(name: bytes) -> bytes | Hashed:
    """The key named ``name`` (bytes), or :class:`Hashed` for a digest name. Raises
    ValueError for a name no key has (a spelling other than :func:`key_name`'s)."""
    if not name.startswith(ESCAPE):
        if not _plain(name):
            raise ValueError("not a key name")
        return name
    body = name[len(ESCAPE):]
    if body.startswith(HASHED):
        hx = body[len(HASHED):]
        if len(hx) != 32 or hx != hx.lower():
            raise ValueError("not a digest name")
        return Hashed(bytes.fromhex(hx.decode("ascii")))
    key = base64.urlsafe_b64decode(body + b"=" * (-len(body) % 4))
    if key_name(key) != name:
        raise ValueError("not the canonical name of its key")
    return key


def _err(code: int) -> pyfuse3.FUSEError:
    return pyfuse3.FUSEError(code)


# -- writing ------------------------------------------------------------------------------
class KeyWriter:
    """The content a descriptor writes to ``key/<k>`` (module docstring): ``key`` bytes,
    the ``partition`` it goes to, ``buf`` the file's content so far, ``append``
    (``O_APPEND``). ``fresh``: created or truncated (``O_TRUNC``): the content is due even
    if nothing is written (``: > key/k`` makes an empty value)."""

    __slots__ = ("append", "buf", "dirty", "fresh", "key", "partition", "produced")

    def __init__(self, key: bytes, partition: int, content: bytes = b"", *,
                 append: bool = False, fresh: bool = False):
        self.key = key
        self.partition = partition
        self.buf = bytearray(content)
        self.append = append
        self.fresh = fresh
        self.dirty = False  # written since the last record produced
        self.produced = False

    def check(self, lg: Log, size: int) -> None:
        """Raise RecordTooLargeError unless a value of ``size`` bytes fits with the key in
        one record batch of ``max.message.bytes`` (exact for uncompressed topics; the
        others are checked when the batch is made)."""
        limit = lg.config.max_message_bytes
        if _uncompressed(lg) and single_record_batch_size(len(self.key), size) > limit:
            raise RecordTooLargeError(
                f"a value of {size} bytes for a key of {len(self.key)} bytes does not fit in "
                f"one record batch of max.message.bytes ({limit}) of {lg.name}")

    def write(self, lg: Log, data: bytes, off: int) -> int:
        """Put ``data`` at ``off`` (at the end with ``O_APPEND``). Returns its length.
        Raises RecordTooLargeError (EMSGSIZE) when the content would no longer fit
        (:meth:`check`), leaving the content as it was."""
        if self.append:
            off = len(self.buf)
        end = off + len(data)
        self.check(lg, max(end, len(self.buf)))
        if off > len(self.buf):
            self.buf.extend(bytes(off - len(self.buf)))
        self.buf[off:end] = data
        self.dirty = True
        return len(data)

    def truncate(self, lg: Log, size: int) -> None:
        """``ftruncate``: cut or zero-extend the content to ``size`` bytes."""
        self.check(lg, size)
        if size < len(self.buf):
            del self.buf[size:]
        else:
            self.buf.extend(bytes(size - len(self.buf)))
        self.dirty = True

    def flush(self, lg: Log) -> int | None:
        """A ``close`` of a descriptor (``flush``; one per duplicate, so the shell's
        ``close`` after ``dup2`` comes before any write): produce the content when it was
        written since the last record. Returns the offset or None (nothing due). A content
        refused here (RecordTooLargeError, OSError such as ENOSPC, ReadOnlyLogError) is
        dropped: the error goes to the caller, the content is never produced later."""
        if not self.dirty:
            return None
        return self._produce(lg)

    def release(self, lg: Log) -> int | None:
        """The last descriptor is gone: produce what :meth:`flush` did not -- the content
        of a file created or truncated with nothing written, or written after the last
        flush. Raises like :meth:`flush` (the caller can only log it)."""
        if self.dirty or (self.fresh and not self.produced):
            return self._produce(lg)
        return None

    def _produce(self, lg: Log) -> int:
        self.dirty = False
        self.produced = True
        return lg.append([(now_ms(), self.key, bytes(self.buf), ())])[0]


# -- the view -----------------------------------------------------------------------------
class KeyView:
    """The key view of a :class:`~kafkafs.fs.operations.KafkaFS` (``fs``): name lookups,
    listings, writers and tombstones. ``maps``: the :class:`~kafkafs.log.keymap.KeyMaps`
    (the daemon saves them at shutdown and keeps them current)."""

    def __init__(self, fs, maps: KeyMaps | None = None):
        self.fs = fs
        self.maps = maps or KeyMaps()
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

    def _partitions(self, topic: str, partition: int | None) -> list[int]:
        """The partitions a view looks in: ``[partition]``, or every partition of the
        topic for its view (``partition`` None). FUSEError(ENOENT) when there is none."""
        if partition is not None:
            if (topic, partition) not in self.fs.manager.logs:
                raise _err(errno.ENOENT)
            return [partition]
        parts = self.fs.manager.partitions(topic)
        if not parts:
            raise _err(errno.ENOENT)
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
            raise _err(errno.ENOENT) from None
        parts = self._partitions(parent.topic, parent.partition)
        if isinstance(parsed, Hashed):
            return await self._resolve_digest(parent, name, parsed.digest, parts, known)
        p = parts[0] if parent.partition is not None else self._home(parsed, parts)
        if p not in parts:
            raise _err(errno.ENOENT)  # the partitioner's partition is not in these log dirs
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
            raise _err(errno.ENOENT)
        if len(self._memo) >= MEMO_SIZE:
            self._memo.clear()
        self._memo[memo_key] = (self._state(lg), lg, offset, trio.current_time())
        return self.fs.inodes.get(T.KEY, lg.topic, lg.partition, offset)

    def _state(self, lg: Log) -> tuple:
        manager = self.fs.manager
        return (manager.logs.get((lg.topic, lg.partition)) is lg, lg.log_start_offset,
                lg.log_end_offset, len(manager.logs))

    # -- files --------------------------------------------------------------------------
    async def open(self, node: T.Node, flags: int, info: pyfuse3.FileInfo):
        """What a descriptor of a key file holds: ``(record, None)`` to read a version,
        ``(None, KeyWriter)`` to write. Raises FUSEError: EROFS (read-only mount), EACCES
        (``O_RDWR``), ENOENT (reading a key that is not produced yet)."""
        accmode = flags & os.O_ACCMODE
        if accmode == os.O_RDONLY:
            if node.kind != T.KEY:
                raise _err(errno.ENOENT)
            info.keep_cache = True  # a version never changes
            return await self.fs._record(node.topic, node.partition, node.name), None
        if self.fs.options.read_only:
            raise _err(errno.EROFS)
        if accmode != os.O_WRONLY:
            raise _err(errno.EACCES)
        info.direct_io = True
        trunc = bool(flags & os.O_TRUNC)
        if node.kind == T.KEY:
            rec = await self.fs._record(node.topic, node.partition, node.name)
            key, content = rec.key, rec.value or b""
        else:
            key, content = node.name, b""
        return None, KeyWriter(key, node.partition, b"" if trunc else content,
                               append=bool(flags & os.O_APPEND), fresh=trunc)

    async def create(self, parent: T.Node, name: bytes, flags: int):
        """``open(O_CREAT)`` of a name no live key has: ``(node, KeyWriter)``. Raises
        FUSEError: EROFS, EACCES (``O_RDWR``), EINVAL (a name no key can have, or a digest
        name of a key nobody knows), EEXIST (``O_EXCL`` and the key lives), ENOENT (the
        partition is not in these log dirs), EMSGSIZE (the key alone is too large)."""
        if self.fs.options.read_only:
            raise _err(errno.EROFS)
        if flags & os.O_ACCMODE != os.O_WRONLY:
            raise _err(errno.EACCES)
        try:
            parse_name(name)
        except ValueError:
            raise _err(errno.EINVAL) from None
        lg, key, live = await self.resolve(parent, name, known=True)
        if key is None:
            raise _err(errno.EINVAL)  # a digest name creates nothing (module docstring)
        if live is not None and flags & os.O_EXCL:
            raise _err(errno.EEXIST)
        trunc = live is None or bool(flags & os.O_TRUNC)
        content = b"" if trunc else \
            ((await self.fs._record(lg.topic, lg.partition, live)).value or b"")
        writer = KeyWriter(key, lg.partition, content, append=bool(flags & os.O_APPEND),
                           fresh=trunc)
        writer.check(lg, len(content))
        return self.fs.inodes.get(T.NEW_KEY, lg.topic, lg.partition, key), writer

    async def unlink(self, parent: T.Node, name: bytes) -> None:
        """``rm key/<k>``: append a tombstone for k. FUSEError(ENOENT) when k has no value;
        errors of the append (ENOSPC, ...) propagate."""
        if parent.partition is not None:
            await self.fs.commit_wait(parent.topic, parent.partition)
        lg, key, offset = await self.resolve(parent, name)
        if offset is None:
            raise _err(errno.ENOENT)
        await self.fs.commit_wait(lg.topic, lg.partition)  # (a bulk commit appending there)
        lg.append([(now_ms(), key, None, ())])

    # -- listing ------------------------------------------------------------------------
    async def readdir(self, h, start_id: int, token) -> None:
        """Stream ``ls key/``: every live key (in the partitioner's partition for the
        topic's view), in partition then offset order; positions are ``partition << 43 |
        offset + 1``. Names come with their real attributes (the inode of the version)."""
        node = h.node
        listing = h.listing
        if listing is None or listing.next_id != start_id:
            parts = self._partitions(node.topic, node.partition)
            logs = [self.fs.manager.get_log(node.topic, p) for p in parts]
            home = max(parts) + 1 if node.partition is None else None
            offsets = await trio.to_thread.run_sync(self._live, logs)
            listing = h.listing = KeyListing(logs, offsets, start_id, home)
        fs = self.fs
        attr = fs._attr(fs.inodes.get(T.KEY, node.topic, listing.logs[0].partition, 0))
        reply = pyfuse3.readdir_reply
        for lg, name, offset, size, ts in listing:
            child = fs.inodes.get(T.KEY, lg.topic, lg.partition, offset)
            attr.st_ino = child.inode
            attr.st_size = size
            attr.st_blocks = (size + 511) // 512
            if ts >= 0:
                attr.st_mtime_ns = attr.st_ctime_ns = attr.st_atime_ns = ts * 1_000_000
            next_id = listing.position(lg.partition, offset)
            if not reply(token, name, attr, next_id):
                listing.push_back()
                return
            if child.inode in fs.inodes.by_inode:
                child.lookups += 1  # a kept node (offsets past the computed numbers)
            listing.next_id = next_id

    def _live(self, logs: list[Log]) -> list:
        return [self.maps.caught_up(lg).live_offsets(lg) for lg in logs]


class KeyListing:
    """The entries of a ``key/`` listing from readdir position ``start``: iterate
    ``(log, name, offset, value size, timestamp ms)``; ``offsets``: per log, the sorted
    offsets of its live keys (numpy arrays) (taken when the listing starts); ``home``: the partition count
    of the topic's view (only keys whose partitioner partition is theirs are listed), None
    for a partition's view."""

    def __init__(self, logs: list[Log], offsets: list, start: int,
                 home: int | None):
        self.logs = logs
        self.next_id = start
        self._pushed = None
        self._last = None
        self._gen = self._generate(offsets, start, home)

    @staticmethod
    def position(partition: int, offset: int) -> int:
        return (partition << _POS_BITS) | min(offset + 1, _POS_MASK)

    def __iter__(self):
        return self

    def __next__(self):
        if self._pushed is not None:
            item, self._pushed = self._pushed, None
        else:
            item = next(self._gen)
        self._last = item
        return item

    def push_back(self) -> None:
        """The last entry did not fit: the next iteration yields it again."""
        self._pushed = self._last

    def _generate(self, offsets, start: int, home: int | None):
        first_p, first_off = start >> _POS_BITS, start & _POS_MASK
        for lg, offs in zip(self.logs, offsets):
            if lg.partition < first_p:
                continue
            begin = first_off if lg.partition == first_p else 0
            for off, key, size, ts in _records_at(lg, offs, begin):
                if home is not None and partition_for_key(key, home) != lg.partition:
                    continue
                yield lg, key_name(key), off, size, ts


def _records_at(lg: Log, offsets, begin: int):
    """``(offset, key, value size, timestamp)`` of the records of ``lg`` at ``offsets``
    (a sorted int64 numpy array) from ``begin`` on, reading batches in order and decoding
    only those holding one; a long gap is skipped by an index lookup, and the reading
    starts again where it stopped when a segment was swapped under it (the cleaner).
    Damage skips the rest of its segment (fs.listing)."""
    import numpy as np  # (loaded with the key maps: kafkafs.log.keymap)

    i = int(np.searchsorted(offsets, begin))
    n = len(offsets)
    while i < n:
        at = int(offsets[i])
        before = i
        try:
            for batch in lg.batches(at):
                if batch.last_offset < at:
                    continue
                j = int(np.searchsorted(offsets, batch.last_offset, "right"))
                if j > i:
                    wanted = set(offsets[i:j].tolist())
                    for r in batch.record_tuples():
                        if r[0] in wanted and r[2] is not None and r[3] is not None:
                            yield r[0], r[2], len(r[3]), r[1]
                    i = j
                if i >= n:
                    return
                at = int(offsets[i])
                if at > batch.next_offset + SEEK_GAP:
                    break  # seek there through the index
            else:  # the batches ended: the log's end, or a segment swapped under us
                if i == before:
                    return  # nothing more to be had (the log was truncated under us)
        except CorruptRecordError as exc:
            after = _after_damage(lg, exc)
            if after is None:
                return
            i = int(np.searchsorted(offsets, after))
