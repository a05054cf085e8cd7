"""``<topic>/<p>/append``: each line written becomes a record (docs/tree.md "Writing:
append"; docs/design.md §4.1). The line rules are fs.append's :class:`LineWriter`; the
writes go to the log on the event loop, after any bulk commit holding the log
(:meth:`~kafkafs.fs.operations.KafkaFS.commit_wait`)."""

from __future__ import annotations

import errno
import logging
import os

import trio

from .. import tree as T
from ..append import LineWriter
from .base import Handle, Kind, err

log = logging.getLogger(__name__)


class AppendFile(Kind):
    """Write-only in effect: read, it is an empty file (so ``grep -r`` passes it), writable
    by its owner. ``direct_io``: every ``write(2)`` reaches the daemon. ``close`` produces
    a last line without newline; ``fsync`` flushes the log (:meth:`Log.flush`, in a worker
    thread); both report a refusal the writer may have missed."""

    kind = T.APPEND
    name = b"append"
    parents = (T.PARTITION,)
    perm = 0o644
    ro_perm = 0o444
    writable = True

    async def truncate(self, node: T.Node, h: Handle | None, size: int) -> bool:
        if self.fs.options.read_only:
            raise err(errno.EROFS)
        return False  # O_TRUNC (``>``): accepted, there is nothing to truncate

    async def open(self, node: T.Node, flags: int, info) -> Handle:
        self.log(node)  # ENOENT when the partition is gone
        h = Handle(node, self)
        if flags & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR):
            options = self.fs.options
            if options.read_only:
                raise err(errno.EROFS)
            h.writer = LineWriter(options.parse_key, options.key_separator, options.batch_size)
        h.record = b""  # reads see an empty file
        info.direct_io = True
        return h

    async def read(self, h: Handle, off: int, size: int) -> bytes:
        return (h.record or b"")[off:off + size]

    async def write(self, h: Handle, off: int, buf: bytes) -> int:
        if h.writer is None:
            raise err(errno.EBADF)
        node = h.node
        # the lines go to the log on the loop, a pwrite each batch
        await self.fs.commit_wait(node.topic, node.partition)
        return h.writer.write(self.log(node), buf)

    async def flush(self, h: Handle) -> None:
        if h.writer is None:
            return
        node = h.node
        await self.fs.commit_wait(node.topic, node.partition)
        h.writer.close(self.log(node))

    async def fsync(self, h: Handle) -> None:
        await trio.to_thread.run_sync(self.log(h.node).flush)
        if h.writer is not None:
            h.writer.raise_pending()

    async def release(self, h: Handle) -> None:
        if h.writer is None or not h.writer.buf:
            return
        # flush() normally produced it; a handle closed without flush still loses nothing
        size = len(h.writer.buf)
        node = h.node
        try:
            await self.fs.commit_wait(node.topic, node.partition)
            h.writer.finish_line(self.log(node))
        except Exception:
            log.exception("dropping %d bytes of a partial line at close", size)
