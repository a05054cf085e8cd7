"""Inodes of the mounted tree, and the names of its node kinds (docs/design.md §8.1).

Every node is identified by a key ``(kind, topic, partition, name)``; the :class:`InodeTable`
hands out inode numbers, counts the kernel's lookups and drops dynamic nodes (one per
timestamp or segment file looked up) when the kernel forgets them, so memory stays
bounded however many are read. What a kind's nodes do is the kind's class in fs.nodes;
the constants here are the kinds' names (``Node.kind``).

``offset/N`` nodes are not kept at all: their inode number is computed, ``OFFSET_INODES |
partition number << 40 | N`` (the partition numbered on first use, never reused), and
turned back into the node on every request. A listing of millions of offsets therefore
costs no memory, and the kernel may keep and forget those inodes as it likes. (Offsets of
2^40 and more, and partitions past 2^22, get kept nodes as the other kinds do.)

``key/<k>`` nodes (fs.nodes.keys) are numbered the same way with ``KEY_INODES`` added: one
inode per version of a key, named by the offset of the record holding it, so that the
listing of millions of keys keeps no node either. A key created by ``open(O_CREAT)`` and not produced
yet is a kept ``NEW_KEY`` node named by the key's bytes.
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
KEYS = "keys"  # <topic>/key/ (partition None) and <topic>/<p>/key/
KEY = "key"  # a version of a key: name = the offset of its record
NEW_KEY = "new_key"  # created, not produced yet: name = the key's bytes
GROUPS = "groups"  # __consumer_offsets/groups/ (fs.nodes.groups)
GROUP = "group"  # groups/<g>/: name = the group id
GROUP_TOPIC = "group_topic"  # groups/<g>/<t>/: name = (group, topic)
GROUP_OFFSET = "group_offset"  # groups/<g>/<t>/<p>: name = (group, topic, partition)
GROUP_STATE = "group_state"  # groups/<g>/state: name = the group id
GROUP_LAG = "group_lag"  # groups/<g>/lag: name = the group id
TXNS = "txns"  # __transaction_state/transactions/ (fs.nodes.transactions)
TXN = "txn"  # transactions/<id>: name = the transactional id

OFFSET_INODES = 1 << 62  # the computed inode numbers of offset/N (module docstring)
KEY_INODES = 1 << 63  # added for key/<k> versions
OFFSET_BITS = 40
PARTITION_BITS = 62 - OFFSET_BITS
_OFFSET_MASK = (1 << OFFSET_BITS) - 1


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
    """Map keys to :class:`Node` objects with stable inode numbers. ``dynamic``: the kinds
    whose nodes go when the kernel forgets them (one node per name looked up:
    :data:`kafkafs.fs.nodes.DYNAMIC`)."""

    def __init__(self, dynamic: frozenset[str]):
        self.dynamic = dynamic
        self._next = itertools.count(pyfuse3.ROOT_INODE + 1)
        self.by_inode: dict[int, Node] = {}
        self.by_key: dict[tuple, Node] = {}
        root = Node(pyfuse3.ROOT_INODE, ROOT)
        self.by_inode[root.inode] = root
        self.by_key[root.key] = root
        self._numbers: dict[tuple, int] = {}  # (topic, partition) -> its number, for offsets
        self._partitions: dict[int, tuple] = {}
        self._next_number = itertools.count(1)

    def offset_inodes(self, topic: str, partition: int) -> int | None:
        """The inode number of ``offset/0`` of this partition: ``offset/N`` is this plus N
        for N < 2^40. None when the partition numbers are used up (kept nodes then)."""
        number = self._numbers.get((topic, partition))
        if number is None:
            number = next(self._next_number)
            if number >= 1 << PARTITION_BITS:
                return None
            self._numbers[(topic, partition)] = number
            self._partitions[number] = (topic, partition)
        return OFFSET_INODES | number << OFFSET_BITS

    def get(self, kind, topic=None, partition=None, name=None) -> Node:
        """The node for this key, created on first use (an ``offset/N`` node is made anew
        each time, with its computed inode number; ``key`` versions too)."""
        if kind in (OFFSET, KEY) and 0 <= name <= _OFFSET_MASK:
            base = self.offset_inodes(topic, partition)
            if base is not None:
                return Node(base | name | (KEY_INODES if kind == KEY else 0), kind, topic,
                            partition, name)
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
        """The node of ``inode``; None when it is unknown or its partition is gone."""
        node = self.by_inode.get(inode)
        if node is None and inode & OFFSET_INODES:
            tp = self._partitions.get((inode >> OFFSET_BITS) & ((1 << PARTITION_BITS) - 1))
            if tp is not None:
                node = Node(inode, KEY if inode & KEY_INODES else OFFSET, tp[0], tp[1],
                            inode & _OFFSET_MASK)
        return node

    def forget(self, inode: int, n: int) -> None:
        """The kernel dropped ``n`` references; dynamic nodes go when none are left."""
        node = self.by_inode.get(inode)
        if node is None:
            return
        node.lookups -= n
        if node.lookups <= 0 and node.kind in self.dynamic:
            self._drop(node)

    def _drop(self, node: Node) -> None:
        self.by_inode.pop(node.inode, None)
        if self.by_key.get(node.key) is node:
            del self.by_key[node.key]

    def drop_partition(self, topic: str, partition: int) -> list[Node]:
        """Forget every node of one partition (gone), its offsets' inode numbers too (a
        partition made again under the name gets new ones). Returns the kept nodes removed."""
        self._retire(lambda tp: tp == (topic, partition))
        return self._drop_where(lambda n: n.topic == topic and n.partition == partition)

    def drop_topic(self, topic: str, keep_dir: bool = False) -> list[Node]:
        """Forget every node of ``topic`` (deleted), as :meth:`drop_partition`.
        ``keep_dir``: the topic's data was replaced, the topic itself goes on -- its
        directory and ``config`` keep their nodes (and inode numbers), so a path the kernel
        cached still leads to the topic."""
        self._retire(lambda tp: tp[0] == topic)
        kept = (TOPIC, CONFIG) if keep_dir else ()
        return self._drop_where(lambda n: n.topic == topic and n.kind not in kept)

    def _retire(self, matches) -> None:
        for tp in [tp for tp in self._numbers if matches(tp)]:
            del self._partitions[self._numbers.pop(tp)]

    def _drop_where(self, matches) -> list[Node]:
        gone = [n for n in self.by_inode.values() if matches(n)]
        for n in gone:
            self._drop(n)
        return gone
