"""``<topic>/<p>/segments/``: the partition's files, read-only and byte-identical
(docs/tree.md "Segments"; docs/design.md §3.1, §2.4).

Only regular files show: links, FIFOs and devices planted in a log dir never do
(:meth:`kafkafs.log.safeio.Dir.files`), nor hidden names or the transient ``.deleted``,
``.cleaned`` and ``.swap`` files. A file is opened through the partition dir's descriptor
(``O_NOFOLLOW``, checked with ``fstat``) and read with ``pread`` in a worker thread.
"""

from __future__ import annotations

import errno
import os
import stat

import trio

from ...log.names import parse_segment_filename
from .. import tree as T
from .base import SHORT_TIMEOUT, Directory, Handle, Kind, err


def name_visible(fname: str) -> bool:
    """Whether ``segments/`` shows a regular file of this name (links and special files
    in the partition dir never show: see :meth:`~kafkafs.log.safeio.Dir.files`)."""
    if "/" in fname or fname.startswith(".") or not fname:
        return False
    p = parse_segment_filename(fname)
    return p is None or not p[2]  # .deleted / .cleaned / .swap: transient


class SegmentsDir(Directory):
    """``segments/``: listed only with ``-o list_all`` (fs.tree); its entries are the
    partition dir's visible files, sorted."""

    kind = T.SEGMENTS
    name = b"segments"
    parents = (T.PARTITION,)
    listed = False
    attr_timeout = SHORT_TIMEOUT

    async def lookup_name(self, parent: T.Node, name: bytes) -> T.Node:
        fname = name.decode("utf-8", "surrogateescape")
        lg = self.fs.manager.get_log(parent.topic, parent.partition)
        if not (name_visible(fname) and lg.pdir.is_file(fname)):
            raise err(errno.ENOENT)
        return self.fs.inodes.get(T.SEGFILE, parent.topic, parent.partition, fname)

    def entries(self, node: T.Node):
        inodes = self.fs.inodes
        return [(f.encode("utf-8", "surrogateescape"),
                 inodes.get(T.SEGFILE, node.topic, node.partition, f))
                for f in sorted(self.log(node).pdir.files()) if name_visible(f)]


class SegmentFile(Kind):
    """``segments/<file>``: size, times and blocks are the file's own (``lstat`` through
    the partition dir); ENOENT when the name is no longer a regular file. The kernel keeps
    the pages of every file but the active segment's ``.log``."""

    kind = T.SEGFILE
    dynamic = True
    entry_timeout = attr_timeout = SHORT_TIMEOUT

    async def getattr(self, node: T.Node):
        st = self.log(node).pdir.lstat(node.name)  # the entry itself, through the dir's fd
        if not stat.S_ISREG(st.st_mode):  # swapped for a link since the lookup
            raise err(errno.ENOENT)
        return self.attr(node, st.st_size, st.st_mtime_ns, st.st_blocks)

    async def open(self, node: T.Node, flags: int, info) -> Handle:
        self.refuse_writing(flags)
        lg = self.log(node)
        h = Handle(node, self)
        # never follow a link planted in a log dir, nor open a FIFO or device: the name
        # was checked at lookup; the partition dir's descriptor, O_NOFOLLOW and fstat
        # close the race with a swap after that (ENOENT then)
        h.fd = lg.pdir.open_file(node.name)
        info.keep_cache = not node.name.endswith(".log") or \
            lg.active_segment.log_path != os.path.join(lg.dir, node.name)
        return h

    async def read(self, h: Handle, off: int, size: int) -> bytes:
        return await trio.to_thread.run_sync(os.pread, h.fd, size, off)

    async def release(self, h: Handle) -> None:
        if h.fd >= 0:
            os.close(h.fd)
