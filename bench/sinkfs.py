#!/usr/bin/env python3
"""The floor of any append through pyfuse3: a file system of one file, ``f``, whose writes
are ``pwrite`` to a backing file at its end and whose ``fsync`` fsyncs it (in a worker
thread, as kafkafs does), with nothing decoded, encoded or indexed. bench_fs.py's append
figure is printed against it as well as against the plain file.

    python bench/sinkfs.py MOUNTPOINT BACKING_FILE
"""

from __future__ import annotations

import errno
import os
import stat
import sys

import pyfuse3
import trio


class SinkFS(pyfuse3.Operations):
    """``/f``: writes appended to ``backing`` (bytes), its size kept in memory."""

    def __init__(self, backing: str):
        super().__init__()
        self.fd = os.open(backing, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.size = 0

    async def getattr(self, inode, ctx=None):
        a = pyfuse3.EntryAttributes()
        a.st_ino = inode
        if inode == pyfuse3.ROOT_INODE:
            a.st_mode, a.st_nlink = stat.S_IFDIR | 0o755, 2
        else:
            a.st_mode, a.st_nlink, a.st_size = stat.S_IFREG | 0o644, 1, self.size
        a.entry_timeout = a.attr_timeout = 1.0
        return a

    async def lookup(self, parent_inode, name, ctx=None):
        if parent_inode != pyfuse3.ROOT_INODE or name != b"f":
            raise pyfuse3.FUSEError(errno.ENOENT)
        return await self.getattr(2)

    async def setattr(self, inode, attr, fields, fh, ctx):
        return await self.getattr(inode)

    async def open(self, inode, flags, ctx):
        return pyfuse3.FileInfo(fh=inode)

    async def write(self, fh, off, buf):
        os.pwrite(self.fd, buf, self.size)
        self.size += len(buf)
        return len(buf)

    async def fsync(self, fh, datasync):
        await trio.to_thread.run_sync(os.fsync, self.fd)

    async def flush(self, fh):
        pass

    async def release(self, fh):
        pass


def main() -> None:
    ops = SinkFS(sys.argv[2])
    opts = set(pyfuse3.default_options)
    opts.add("fsname=sinkfs")
    pyfuse3.init(ops, sys.argv[1], opts)
    try:
        trio.run(pyfuse3.main)
    finally:
        pyfuse3.close()


if __name__ == "__main__":
    main()
