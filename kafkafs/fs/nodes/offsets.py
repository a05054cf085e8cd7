"""``<topic>/<p>/offset/`` and ``offset/<N>``: one file per record, its value (docs/tree.md
"Reading"; docs/design.md §3.1).

``offset/N`` nodes are not kept: their inode numbers are computed (fs.tree), so a lookup
makes a fresh node and ``ls offset/`` keeps none. A name is a record when it is written as
Kafka writes an offset and the record is visible at the mount's isolation level
(:func:`visible_record`); its extended attributes ``user.kafka.*`` tell the rest of it
(:func:`record_xattrs`, also the key view's).
"""

from __future__ import annotations

import errno
import json

import pyfuse3
import trio

from ...log.log import Log
from ...record.batch import TIMESTAMP_TYPE_NAMES
from ...record.jsonl import text_or_base64
from ...record.types import Record
from .. import tree as T
from ..listing import OffsetListing
from .base import SHORT_TIMEOUT, Directory, Handle, Kind, canonical_number, err

XATTR_PREFIX = "user.kafka."


async def visible_record(fs, lg: Log, offset: int):
    """``(record, batch entry)`` at ``offset`` of ``lg`` as the mount ``fs`` shows it
    (fs.cache :class:`BatchCache`); FUSEError(ENOENT) for no record, a control record, and
    under read_committed an offset at or past the last stable offset or in an aborted
    transaction (found in a worker thread). OffsetOutOfRangeError (ENOENT) outside
    [log start, log end); CorruptRecordError (EIO) for a damaged batch."""
    committed = fs.committed
    if committed and offset >= lg.last_stable_offset:
        raise err(errno.ENOENT)
    found = fs.cache.record(lg, offset)
    if found is None:
        raise err(errno.ENOENT)
    entry = found[1]
    if committed and entry.is_transactional:
        # in a worker thread: without a trusted .txnindex the first look at a segment
        # computes its aborted transactions from the log (kafkafs.log.txnscan)
        aborted = await trio.to_thread.run_sync(lg.committed_filter, entry.base_offset,
                                                entry.next_offset)
        if aborted.is_aborted(entry):
            raise err(errno.ENOENT)
    return found


async def record(fs, topic: str, partition: int, offset: int) -> Record:
    """The record at ``offset`` of the partition, as :func:`visible_record`."""
    return (await visible_record(fs, fs.manager.get_log(topic, partition), offset))[0]


async def record_attr(kind: Kind, node: T.Node) -> pyfuse3.EntryAttributes:
    """The attributes of a node whose content is the value of the record at offset
    ``node.name``: the value's size, the record's timestamp as its times."""
    rec = await record(kind.fs, node.topic, node.partition, node.name)
    return kind.attr(node, len(rec.value or b""),
                     rec.timestamp * 1_000_000 if rec.timestamp >= 0 else None)


async def record_xattrs(fs, node: T.Node) -> dict[str, bytes]:
    """``user.kafka.*`` of the record at offset ``node.name``: key (raw bytes), timestamp
    (ms, decimal), timestamp_type (Kafka's name), headers (JSON, a value that is not UTF-8
    as ``{"base64": ...}`` as records.jsonl shows it), offset, partition, topic."""
    rec, entry = await visible_record(fs, fs.manager.get_log(node.topic, node.partition),
                                      node.name)
    ts_type = TIMESTAMP_TYPE_NAMES[entry.timestamp_type]
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


class OffsetDir(Directory):
    """``offset/``: listed only with ``-o list_all`` (fs.tree); a name is looked up as an
    offset, the listing streamed (:meth:`readdir`)."""

    kind = T.OFFSETS
    name = b"offset"
    parents = (T.PARTITION,)
    listed = False
    attr_timeout = SHORT_TIMEOUT

    async def lookup_name(self, parent: T.Node, name: bytes) -> T.Node:
        if not canonical_number(name):
            raise err(errno.ENOENT)
        offset = int(name)
        # damage: EIO, logged once (fuse_errors)
        await visible_record(self.fs, self.fs.manager.get_log(parent.topic, parent.partition),
                             offset)
        return self.fs.inodes.get(T.OFFSET, parent.topic, parent.partition, offset)

    async def readdir(self, h: Handle, start_id: int, token) -> None:
        """Stream ``offset/`` (fs.listing): names, computed inode numbers and each record's
        real attributes (value size, timestamp as mtime), no node per entry. The kernel
        keeps them as a lookup's (a record never changes), so ``ls -l`` asks nothing more
        per name. ``next_id`` of an entry is its offset + 1."""
        fs = self.fs
        node = h.node
        lg = self.log(node)
        listing = h.listing
        if listing is None or listing.next_id != start_id or listing.log is not lg:
            listing = h.listing = OffsetListing(lg, start_id, fs.committed)
        inodes = fs.inodes
        base = inodes.offset_inodes(node.topic, node.partition)
        attr = fs.kinds[T.OFFSET].attr(inodes.get(T.OFFSET, node.topic, node.partition, 0))
        reply = pyfuse3.readdir_reply
        for entry in listing:
            offset, size, timestamp = entry
            child = None
            if base is not None and offset < 1 << T.OFFSET_BITS:
                attr.st_ino = base | offset
            else:  # past the computed numbers: a kept node, counted as a lookup
                child = inodes.get(T.OFFSET, node.topic, node.partition, offset)
                attr.st_ino = child.inode
            attr.st_size = size
            attr.st_atime_ns = attr.st_ctime_ns = attr.st_mtime_ns = \
                timestamp * 1_000_000 if timestamp >= 0 else fs.mount_time_ns
            if not reply(token, str(offset).encode(), attr, offset + 1):
                listing.push_back(entry)
                return
            if child is not None:
                child.lookups += 1
            listing.next_id = offset + 1


class OffsetFile(Kind):
    """``offset/N``: the value of the record at offset N, read-only, its pages kept by the
    kernel (a record never changes). The record is fetched by the first read, so a reopened
    offset whose page the kernel keeps costs none; one gone since its lookup (retention)
    fails the open with ENOENT."""

    kind = T.OFFSET
    dynamic = True

    async def getattr(self, node: T.Node):
        return await record_attr(self, node)

    async def open(self, node: T.Node, flags: int, info) -> Handle:
        self.refuse_writing(flags)
        lg = self.log(node)
        if not lg.log_start_offset <= node.name < lg.log_end_offset:
            raise err(errno.ENOENT)
        info.keep_cache = True
        return Handle(node, self)

    async def read(self, h: Handle, off: int, size: int) -> bytes:
        if h.record is None:  # the first read
            node = h.node
            h.record = await record(self.fs, node.topic, node.partition, node.name)
        return (h.record.value or b"")[off:off + size]

    async def xattrs(self, node: T.Node) -> dict[str, bytes | None]:
        return await record_xattrs(self.fs, node)
