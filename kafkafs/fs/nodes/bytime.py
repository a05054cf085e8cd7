"""``<topic>/<p>/by-time/<T>``: a symlink to ``../offset/<N>``, the first record whose
timestamp is at or after T (docs/tree.md "Reading"; docs/design.md §3.1).

T is what fs.timespec parses (ms since the epoch, or an ISO 8601 time); the offset is
:meth:`Log.offset_for_timestamp`'s, as Kafka's ListOffsets finds it, and under
read_committed nothing at or past the last stable offset. Each name looked up is a node
of its own (dropped when the kernel forgets it), holding its target.
"""

from __future__ import annotations

import errno
import stat

from .. import tree as T
from ..timespec import parse_timestamp
from .base import SHORT_TIMEOUT, Directory, Kind, err


class ByTimeDir(Directory):
    """``by-time/``: names are looked up only (readdir lists nothing)."""

    kind = T.BYTIME
    name = b"by-time"
    parents = (T.PARTITION,)
    attr_timeout = SHORT_TIMEOUT

    async def lookup_name(self, parent: T.Node, name: bytes) -> T.Node:
        try:
            ts = parse_timestamp(name.decode("utf-8", "replace"))
        except ValueError:
            raise err(errno.ENOENT) from None
        lg = self.fs.manager.get_log(parent.topic, parent.partition)
        found = lg.offset_for_timestamp(ts)
        # like ListOffsets under read_committed: nothing at or past the last stable offset
        if found is None or (self.fs.committed and found[0] >= lg.last_stable_offset):
            raise err(errno.ENOENT)
        node = self.fs.inodes.get(T.BYTIME_LINK, parent.topic, parent.partition,
                                  name.decode("utf-8", "replace"))
        node.data = f"../offset/{found[0]}".encode()
        return node

    def entries(self, node: T.Node):
        return []


class ByTimeLink(Kind):
    """``by-time/<T>``: the link; ``node.data`` is its target, set by each lookup."""

    kind = T.BYTIME_LINK
    dynamic = True
    file_type = stat.S_IFLNK
    perm = 0o777
    entry_timeout = attr_timeout = SHORT_TIMEOUT

    async def getattr(self, node: T.Node):
        self.log(node)
        return self.attr(node, len(node.data or b""))

    async def readlink(self, node: T.Node) -> bytes:
        return node.data
