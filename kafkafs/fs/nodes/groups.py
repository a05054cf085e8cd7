"""Consumer groups as files: ``MOUNT/__consumer_offsets/groups/`` (docs/tree.md "Consumer
groups"; docs/design.md §3.5).

* ``groups/<group>/``: one directory per group (its name escaped as a key's:
  fs.keys.key_name), holding ``state``, ``lag`` and a directory per topic it committed
  offsets of;
* ``groups/<group>/<topic>/<partition>``: the committed offset and a newline; its mtime the
  commit's timestamp; xattrs ``user.kafka.commit_timestamp`` (ms),
  ``user.kafka.leader_epoch``, ``user.kafka.metadata``. Writing a number to it
  (``echo 42 > ...``) commits that offset, as ``kafkafs consumer-groups --reset-offsets
  --to-offset 42 --execute`` does (clamped to the partition's earliest and latest offsets;
  EBUSY while the group has members); ``rm`` deletes the commit (a tombstone, as
  ``--delete-offsets``); a new file in a topic directory commits a partition not committed
  yet;
* ``groups/<group>/state``: JSON -- type, state, protocol type, protocol (or assignor),
  generation (or group epoch), target epoch, leader, members with their assignments;
* ``groups/<group>/lag``: the table ``kafka-consumer-groups --describe --group <group>``
  prints (GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST
  CLIENT-ID).

Everything is the core's :class:`~kafkafs.log.groups.GroupStore`, caught up (in a worker
thread) before a listing or a read answers, so the view follows appends and compaction of
``__consumer_offsets``; deleted groups and offsets disappear. Names and contents are never
cached by the kernel (timeouts 0): the next commit changes them.
"""

from __future__ import annotations

import errno
import json
import os

import trio

from ...log.errors import LogError
from ...log.group_view import GroupDescription, describe, offset_rows, offsets_table
from ...log.group_writes import (
    append_group_records,
    offset_commit_records,
    offset_tombstones,
)
from ...log.groups import CONSUMER_OFFSETS
from ...record.errors import CorruptRecordError
from .. import tree as T
from ..keys import Hashed, key_name, parse_name
from .base import Directory, Handle, Kind, canonical_number, err

__all__ = ["GroupDir", "GroupLagFile", "GroupOffsetFile", "GroupStateFile", "GroupTopicDir",
           "GroupsDir"]


def _group_of(name: bytes) -> str:
    parsed = parse_name(name)
    if isinstance(parsed, Hashed):
        raise err(errno.ENOENT)  # a digest name: group ids are never that long
    try:
        return parsed.decode("utf-8")
    except UnicodeDecodeError:
        raise err(errno.ENOENT) from None


class _GroupKind(Kind):
    """What every kind of the groups view shares: the store, caught up off the loop."""

    entry_timeout = attr_timeout = 0.0

    @property
    def store(self):
        return self.fs.core.groups

    async def fresh(self, group: str | None = None) -> None:
        """Catch the store up (the group's partition, or every partition)."""
        store = self.store
        # a group's own partition first (the coordinator's); every partition only when it
        # is not there (a copy whose partitions were renumbered)
        gp = None if group is None else store.home(group)
        if gp is not None:
            if not gp.up_to_date:
                await trio.to_thread.run_sync(gp.catch_up)
            if gp.has(group):
                return
        if not all(p.up_to_date for p in store.partitions().values()):
            await trio.to_thread.run_sync(store.catch_up)

    async def description(self, group: str) -> GroupDescription:
        await self.fresh(group)
        d = describe(self.store, group, self.fs.manager.topic_names_by_id())
        if d is None:
            raise err(errno.ENOENT)
        return d

    async def offsets(self, group: str) -> dict:
        """``{(topic, partition): OffsetCommit}`` of ``group``, caught up; ENOENT when no
        partition has the group (cheaper than :meth:`description`: only offsets)."""
        await self.fresh(group)
        gp = self.store.partition_of(group)
        if gp is None:
            raise err(errno.ENOENT)
        return {(t, p): c for (_g, t, p), c in gp.offsets(group).items()}

    async def refuse_if_active(self, group: str) -> None:
        """EBUSY while the group has members: Kafka resets only inactive groups (at the
        open, so that the shell's ``echo N > file`` reports it)."""
        d = await self.description(group)
        if d.state not in ("Empty", "Dead"):
            raise err(errno.EBUSY)


class GroupsDir(Directory, _GroupKind):
    """``groups/``: a directory per group (in ``__consumer_offsets`` only)."""

    kind = T.GROUPS
    name = b"groups"
    parents = (T.TOPIC,)

    def present(self, parent: T.Node) -> bool:
        return parent.topic == CONSUMER_OFFSETS

    async def lookup_name(self, parent: T.Node, name: bytes) -> T.Node:
        group = _group_of(name)
        await self.fresh(group)
        if self.store.partition_of(group) is None:
            raise err(errno.ENOENT)
        return self.fs.inodes.get(T.GROUP, parent.topic, None, group)

    async def readdir(self, h: Handle, start_id: int, token) -> None:
        await self.fresh()
        names = sorted(self.store.groups())
        await self.reply_names(h, token, start_id, [
            (key_name(g.encode("utf-8")), self.fs.inodes.get(T.GROUP, h.node.topic, None, g))
            for g in names])


class GroupDir(Directory, _GroupKind):
    """``groups/<group>/``: ``state``, ``lag``, a directory per topic with commits."""

    kind = T.GROUP
    dynamic = True

    async def lookup(self, parent: T.Node, name: bytes) -> T.Node:
        group = parent.name
        inodes = self.fs.inodes
        if name == b"state":
            return inodes.get(T.GROUP_STATE, parent.topic, None, group)
        if name == b"lag":
            return inodes.get(T.GROUP_LAG, parent.topic, None, group)
        topic = name.decode("utf-8", "replace")
        if not any(t == topic for t, _p in await self.offsets(group)):
            raise err(errno.ENOENT)
        return inodes.get(T.GROUP_TOPIC, parent.topic, None, (group, topic))

    async def getattr(self, node: T.Node):
        await self.offsets(node.name)
        return self.attr(node)

    async def readdir(self, h: Handle, start_id: int, token) -> None:
        group = h.node.name
        offsets = await self.offsets(group)
        inodes = self.fs.inodes
        entries = [(b"state", inodes.get(T.GROUP_STATE, h.node.topic, None, group)),
                   (b"lag", inodes.get(T.GROUP_LAG, h.node.topic, None, group))]
        entries += [(t.encode("utf-8"), inodes.get(T.GROUP_TOPIC, h.node.topic, None,
                                                   (group, t)))
                    for t in sorted({t for t, _p in offsets})]
        await self.reply_names(h, token, start_id, entries)


class GroupTopicDir(Directory, _GroupKind):
    """``groups/<group>/<topic>/``: a file per partition with a committed offset."""

    kind = T.GROUP_TOPIC
    dynamic = True
    perm = 0o755
    ro_perm = 0o555

    async def lookup(self, parent: T.Node, name: bytes) -> T.Node:
        group, topic = parent.name
        if not canonical_number(name):
            raise err(errno.ENOENT)
        if (topic, int(name)) not in await self.offsets(group):
            raise err(errno.ENOENT)
        return self.fs.inodes.get(T.GROUP_OFFSET, parent.topic, None,
                                  (group, topic, int(name)))

    async def getattr(self, node: T.Node):
        group, topic = node.name
        if not any(t == topic for t, _p in await self.offsets(group)):
            raise err(errno.ENOENT)
        return self.attr(node)

    async def readdir(self, h: Handle, start_id: int, token) -> None:
        group, topic = h.node.name
        parts = sorted(p for t, p in await self.offsets(group) if t == topic)
        await self.reply_names(h, token, start_id, [
            (str(p).encode(), self.fs.inodes.get(T.GROUP_OFFSET, h.node.topic, None,
                                                  (group, topic, p))) for p in parts])

    async def create(self, parent: T.Node, name: bytes, flags: int, info):
        """``echo N > groups/g/t/P`` for a partition without a commit yet."""
        if self.fs.options.read_only:
            raise err(errno.EROFS)
        group, topic = parent.name
        if not canonical_number(name):
            raise err(errno.EINVAL)
        await self.refuse_if_active(group)
        node = self.fs.inodes.get(T.GROUP_OFFSET, parent.topic, None,
                                  (group, topic, int(name)))
        h = Handle(node, self.fs.kinds[T.GROUP_OFFSET])
        h.writer = bytearray()
        info.direct_io = True
        return node, h

    async def unlink(self, parent: T.Node, name: bytes) -> None:
        """``rm groups/g/t/P``: the commit's tombstone (``--delete-offsets``)."""
        if self.fs.options.read_only:
            raise err(errno.EROFS)
        group, topic = parent.name
        if not canonical_number(name):
            raise err(errno.ENOENT)
        d = await self.description(group)
        tp = (topic, int(name))
        if tp not in d.offsets:
            raise err(errno.ENOENT)
        if d.type == "Classic" and d.state != "Empty" and d.protocol_type != "consumer":
            raise err(errno.EBUSY)  # Kafka: NON_EMPTY_GROUP
        await _write(self, group, offset_tombstones(group, [tp]))


async def _write(kind: _GroupKind, group: str, records) -> None:
    manager = kind.fs.manager

    def work():
        where = append_group_records(manager, group, records)
        if where is not None:
            manager.get_log(CONSUMER_OFFSETS, where[0]).flush()

    await trio.to_thread.run_sync(work)
    await kind.fresh(group)


class GroupOffsetFile(_GroupKind):
    """``groups/<group>/<topic>/<partition>``: the committed offset (see the module)."""

    kind = T.GROUP_OFFSET
    dynamic = True
    perm = 0o644
    ro_perm = 0o444
    writable = True

    async def commit(self, node: T.Node):
        """The commit the file shows (its group's partition caught up first)."""
        group, topic, partition = node.name
        await self.fresh(group)
        gp = self.store.partition_of(group)
        c = None if gp is None else gp.offsets(group).get((group, topic, partition))
        if c is None:
            raise err(errno.ENOENT)
        return group, c

    async def getattr(self, node: T.Node):
        _d, c = await self.commit(node)
        return self.attr(node, len(f"{c.offset}\n"), mtime_ns=max(c.commit_timestamp, 0)
                         * 1_000_000)

    async def xattrs(self, node: T.Node) -> dict[str, bytes | None]:
        _d, c = await self.commit(node)
        return {"user.kafka.commit_timestamp": str(c.commit_timestamp).encode(),
                "user.kafka.leader_epoch": str(c.leader_epoch).encode(),
                "user.kafka.metadata": c.metadata.encode("utf-8")}

    async def truncate(self, node: T.Node, h: Handle | None, size: int) -> bool:
        if self.fs.options.read_only:
            raise err(errno.EROFS)
        return False  # O_TRUNC: the number written replaces the commit anyway

    async def open(self, node: T.Node, flags: int, info) -> Handle:
        accmode = flags & os.O_ACCMODE
        if accmode != os.O_RDONLY and self.fs.options.read_only:
            raise err(errno.EROFS)
        if accmode == os.O_RDWR:
            raise err(errno.EACCES)
        h = Handle(node, self)
        if accmode == os.O_WRONLY:
            await self.refuse_if_active(node.name[0])
            h.writer = bytearray()
        else:
            _d, c = await self.commit(node)
            h.record = f"{c.offset}\n".encode()
        info.direct_io = True
        return h

    async def read(self, h: Handle, off: int, size: int) -> bytes:
        return (h.record or b"")[off:off + size]

    async def write(self, h: Handle, off: int, buf: bytes) -> int:
        if h.writer is None:
            raise err(errno.EBADF)
        if len(h.writer) + len(buf) > 64 or bytes(buf).strip(b"0123456789 \t\n"):
            raise err(errno.EINVAL)  # an offset, in decimal
        h.writer += buf
        return len(buf)

    async def flush(self, h: Handle) -> None:
        """The close after a write: commit the number written (EINVAL for anything else,
        EBUSY while the group has members, ENOENT for a partition not in the log dirs)."""
        if h.writer is None or not h.writer.strip():
            return
        text, h.writer = bytes(h.writer), bytearray()
        try:
            offset = int(text.strip())
        except ValueError:
            raise err(errno.EINVAL) from None
        if offset < 0:
            raise err(errno.EINVAL)
        group, topic, partition = h.node.name
        try:
            lg = self.fs.manager.get_log(topic, partition)
        except LogError:
            raise err(errno.ENOENT) from None
        offset = min(max(offset, lg.log_start_offset), lg.high_watermark)
        await _write(self, group, offset_commit_records(group, [(topic, partition, offset)]))


class _GroupTextFile(_GroupKind):
    """A read-only file whose text is made at open."""

    async def text(self, group: str) -> bytes:
        raise NotImplementedError

    async def getattr(self, node: T.Node):
        return self.attr(node, len(await self.text(node.name)))

    async def open(self, node: T.Node, flags: int, info) -> Handle:
        self.refuse_writing(flags)
        h = Handle(node, self)
        h.record = await self.text(node.name)
        info.direct_io = True
        return h

    async def read(self, h: Handle, off: int, size: int) -> bytes:
        return h.record[off:off + size]


class GroupStateFile(_GroupTextFile):
    """``groups/<group>/state``: the group as JSON (see the module)."""

    kind = T.GROUP_STATE
    dynamic = True

    async def text(self, group: str) -> bytes:
        d = await self.description(group)
        doc = {"group": d.group_id, "type": d.type, "state": d.state,
               "protocol_type": d.protocol_type, "protocol": d.protocol,
               "generation": d.generation, "target_epoch": d.target_epoch,
               "leader": d.leader, "coordinator_partition": d.partition,
               "members": [{
                   "member_id": m.member_id, "group_instance_id": m.instance_id,
                   "client_id": m.client_id, "client_host": m.host,
                   "member_epoch": m.epoch, "session_timeout_ms": m.session_timeout_ms,
                   "rebalance_timeout_ms": m.rebalance_timeout_ms,
                   "subscription": sorted(set(m.subscribed_topics) | set(
                       (m.subscription or {}).get("topics") or [])),
                   "assignment": _assignment(m.assignment),
                   "target_assignment": _assignment(m.target)} for m in d.members]}
        return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _assignment(parts) -> list[dict]:
    by_topic: dict[str, list[int]] = {}
    for t, p in parts:
        by_topic.setdefault(t, []).append(p)
    return [{"topic": t, "partitions": sorted(ps)} for t, ps in sorted(by_topic.items())]


class GroupLagFile(_GroupTextFile):
    """``groups/<group>/lag``: kafka-consumer-groups' describe table of the group."""

    kind = T.GROUP_LAG
    dynamic = True

    async def text(self, group: str) -> bytes:
        d = await self.description(group)
        try:
            rows = await trio.to_thread.run_sync(offset_rows, d, self.fs.manager)
        except (LogError, CorruptRecordError, OSError):
            raise err(errno.EIO) from None
        table = offsets_table(rows) if rows else ""
        return (table.lstrip("\n") + "\n").encode("utf-8") if table else b""
