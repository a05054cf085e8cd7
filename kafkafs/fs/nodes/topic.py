"""A topic's directory: ``config``, ``key/`` and one directory per partition (docs/tree.md
"Topics"). ``mkdir MOUNT/t/N`` grows the topic to N+1 partitions."""

from __future__ import annotations

import errno

import trio

from .. import tree as T
from .base import SHORT_TIMEOUT, Directory, canonical_number, err


class TopicDir(Directory):
    """``<topic>/``: the fixed children (``config``, ``key``), then the partitions by
    number. ENOENT once the topic has no partition here."""

    kind = T.TOPIC
    perm = 0o755
    ro_perm = 0o555
    entry_timeout = attr_timeout = SHORT_TIMEOUT

    async def getattr(self, node: T.Node):
        if not self.fs.manager.partitions(node.topic):
            raise err(errno.ENOENT)
        return self.attr(node)

    async def lookup_name(self, parent: T.Node, name: bytes) -> T.Node:
        if not canonical_number(name):
            raise err(errno.ENOENT)
        p = int(name)
        self.fs.manager.get_log(parent.topic, p)  # ENOENT when not here
        return self.fs.inodes.get(T.PARTITION, parent.topic, p)

    def entries(self, node: T.Node) -> list[tuple[bytes, T.Node]]:
        inodes = self.fs.inodes
        return super().entries(node) + [
            (str(p).encode(), inodes.get(T.PARTITION, node.topic, p))
            for p in self.fs.manager.partitions(node.topic)]

    async def mkdir(self, parent: T.Node, name: bytes) -> T.Node:
        """``mkdir t/N``: grow the topic to N+1 partitions (:meth:`LogManager.add_partitions`);
        EINVAL for a name that is no partition number, EEXIST when N exists."""
        if not canonical_number(name):  # "03", "+5", "-1": not a partition's name
            raise err(errno.EINVAL)
        p = int(name)
        manager = self.fs.manager
        if p in manager.partitions(parent.topic):
            raise err(errno.EEXIST)
        await trio.to_thread.run_sync(manager.add_partitions, parent.topic, p + 1)
        return self.fs.inodes.get(T.PARTITION, parent.topic, p)
