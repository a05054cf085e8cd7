"""The mount's root: one directory per topic (docs/tree.md "Topics"; docs/design.md §4.4).

``mkdir MOUNT/t`` creates topic t with the broker's defaults, ``rmdir MOUNT/t`` deletes
it, both in a worker thread. The root's extended attributes tell about the daemon (the
storage core's control handler, :mod:`kafkafs.core.control`; docs/design.md §7); the
control requests set on it are dispatched by :meth:`KafkaFS.setxattr
<kafkafs.fs.operations.KafkaFS.setxattr>`.
"""

from __future__ import annotations

import errno

import trio

from .. import tree as T
from .base import SHORT_TIMEOUT, Directory, err


class RootDir(Directory):
    """The root: its children are the topics (names as the log dirs spell them)."""

    kind = T.ROOT
    perm = 0o755
    ro_perm = 0o555
    entry_timeout = attr_timeout = SHORT_TIMEOUT

    async def lookup_name(self, parent: T.Node, name: bytes) -> T.Node:
        topic = name.decode("utf-8", "surrogateescape")
        if not self.fs.manager.partitions(topic):
            raise err(errno.ENOENT)
        return self.fs.inodes.get(T.TOPIC, topic)

    def entries(self, node: T.Node) -> list[tuple[bytes, T.Node]]:
        inodes = self.fs.inodes
        return [(t.encode(), inodes.get(T.TOPIC, t)) for t in self.fs.manager.topics()]

    async def mkdir(self, parent: T.Node, name: bytes) -> T.Node:
        """``mkdir t``: create topic t (:meth:`LogManager.create_topic`); EEXIST when it
        exists, EINVAL for a name Kafka refuses (InvalidTopicError)."""
        topic = name.decode("utf-8", "surrogateescape")
        manager = self.fs.manager
        if manager.partitions(topic):
            raise err(errno.EEXIST)
        await trio.to_thread.run_sync(manager.create_topic, topic)
        return self.fs.inodes.get(T.TOPIC, topic)

    async def xattrs(self, node: T.Node) -> dict[str, bytes | None]:
        """The daemon's pid, log dirs and topic defaults (``ControlHandler.attributes``)."""
        return self.fs.core.control.attributes()

    async def rmdir(self, parent: T.Node, name: bytes) -> None:
        """``rmdir t``: delete topic t (:meth:`LogManager.delete_topic`) and what the tree
        kept of it; ENOENT when there is none."""
        topic = name.decode("utf-8", "surrogateescape")
        manager = self.fs.manager
        if not manager.partitions(topic):
            raise err(errno.ENOENT)
        await trio.to_thread.run_sync(manager.delete_topic, topic)
        self.fs._topic_gone(topic)
