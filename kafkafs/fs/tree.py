"""Inodes of the mounted tree (DESIGN §3).

Every node is identified by a key ``(kind, topic, partition, name)``; the :class:`InodeTable`
hands out inode numbers, counts the kernel's lookups and drops dynamic nodes (one per
offset, timestamp or segment file looked up) when the kernel forgets them, so memory stays
bounded however many offsets are read.
"""

from __future__ import annotations

import itertools

import pyfuse3

ROOT = "root"
TOPIC = "topic"
CONFIG = "config"
PARTITION = "partition"
APPEND = "append"
OFFSETS = "offsets"
OFFSET = "offset"
BYTIME = "bytime"
BYTIME_LINK = "bytime_link"
MESSAGES = "messages"
JSONL = "jsonl"
SEGMENTS = "segments"
SEGFILE = "segfile"

DYNAMIC = frozenset({OFFSET, BYTIME_LINK, SEGFILE})

# fixed children of a partition directory: name -> kind
PARTITION_CHILDREN = {
    b"append": APPEND,
    b"offset": OFFSETS,
    b"by-time": BYTIME,
    b"messages": MESSAGES,
    b"records.jsonl": JSONL,
    b"segments": SEGMENTS,
}


class Node:
    """One inode: ``kind`` (module constants), ``topic``, ``partition``, ``name`` (offset,
    timestamp or file name for dynamic nodes) and the kernel's lookup count."""

    __slots__ = ("data", "inode", "kind", "lookups", "name", "partition", "topic")

    def __init__(self, inode, kind, topic=None, partition=None, name=None):
        self.inode = inode
        self.kind = kind
        self.topic = topic
        self.partition = partition
        self.name = name
        self.lookups = 0
        self.data = None  # per-kind cache (e.g. the symlink target)

    @property
    def key(self):
        return (self.kind, self.topic, self.partition, self.name)

    def __repr__(self):
        return f"Node({self.inode}, {self.kind}, {self.topic}, {self.partition}, {self.name})"


class InodeTable:
    """Map keys to :class:`Node` objects with stable inode numbers."""

    def __init__(self):
        self._next = itertools.count(pyfuse3.ROOT_INODE + 1)
        self.by_inode: dict[int, Node] = {}
        self.by_key: dict[tuple, Node] = {}
        root = Node(pyfuse3.ROOT_INODE, ROOT)
        self.by_inode[root.inode] = root
        self.by_key[root.key] = root

    def get(self, kind, topic=None, partition=None, name=None) -> Node:
        """The node for this key, created on first use."""
        key = (kind, topic, partition, name)
        node = self.by_key.get(key)
        if node is None:
            node = Node(next(self._next), kind, topic, partition, name)
            self.by_key[key] = node
            self.by_inode[node.inode] = node
        return node

    def __getitem__(self, inode: int) -> Node:
        return self.by_inode[inode]

    def find(self, inode: int) -> Node | None:
        return self.by_inode.get(inode)

    def forget(self, inode: int, n: int) -> None:
        """The kernel dropped ``n`` references; dynamic nodes go when none are left."""
        node = self.by_inode.get(inode)
        if node is None:
            return
        node.lookups -= n
        if node.lookups <= 0 and node.kind in DYNAMIC:
            self._drop(node)

    def _drop(self, node: Node) -> None:
        self.by_inode.pop(node.inode, None)
        if self.by_key.get(node.key) is node:
            del self.by_key[node.key]

    def drop_partition(self, topic: str, partition: int) -> list[Node]:
        """Forget every node of one partition (gone). Returns the nodes removed."""
        return self._drop_where(lambda n: n.topic == topic and n.partition == partition)

    def drop_topic(self, topic: str) -> list[Node]:
        """Forget every node of ``topic`` (deleted). Returns the nodes removed."""
        return self._drop_where(lambda n: n.topic == topic)

    def _drop_where(self, matches) -> list[Node]:
        gone = [n for n in self.by_inode.values() if matches(n)]
        for n in gone:
            self._drop(n)
        return gone
