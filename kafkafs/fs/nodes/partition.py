"""A partition's directory, ``<topic>/<p>/`` (docs/tree.md "Partitions"): its children are
the kinds that name :data:`~kafkafs.fs.tree.PARTITION` among their ``parents``
(``append``, ``offset/``, ``by-time/``, ``messages``, ``records.jsonl``, ``segments/``,
``key/``), in the order they are registered (fs.nodes)."""

from __future__ import annotations

from .. import tree as T
from .base import SHORT_TIMEOUT, Directory


def stored_blocks(lg) -> int:
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


class PartitionDir(Directory):
    """``<topic>/<p>/``: fixed children only; its blocks are those of the partition dir's
    files, so ``du`` of the mount adds up to the log dirs."""

    kind = T.PARTITION
    entry_timeout = attr_timeout = SHORT_TIMEOUT

    async def getattr(self, node: T.Node):
        return self.attr(node, blocks=stored_blocks(self.log(node)))
