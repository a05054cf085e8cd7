"""A trivial pyfuse3 filesystem used as the reference in bench/: it serves, from memory,
``/data`` (a file of N bytes), ``/small/<n>`` (N_SMALL files of a few bytes each) and
``/big/<n>`` (a directory of ``--big`` names, ``0`` to ``N-1``, listed by a readdir that makes
each entry's name and attributes as it goes), with the same kernel-facing choices kafkafs
makes (page-cache reads, 128 KiB st_blksize, long timeouts for immutable files, the mount's
read-ahead window). Run:
``python trivialfs.py MOUNT SIZE_BYTES N_SMALL [--big N] [--crc-of FILE [--mmap]]``; it stays
in the foreground until unmounted.

``--crc-of FILE`` makes each read of ``/data`` also read the same range of FILE (a
segment) and compute its CRC-32C before answering: the least work a filesystem that serves
Kafka's records faithfully must add (bench/bench_bounds.py). ``--mmap`` reads it through
a mapping instead of ``pread`` (no copy)."""

from __future__ import annotations

import argparse
import errno
import mmap
import os
import stat

import pyfuse3
import trio
import trio.lowlevel
from crc32c import crc32c

from kafkafs.daemon.readahead import set_read_ahead

DATA_INODE = 2
SMALL_DIR_INODE = 3
BIG_DIR_INODE = 4
SMALL_BASE = 10
BIG_BASE = 1 << 40


class TrivialFS(pyfuse3.Operations):
    def __init__(self, size: int, n_small: int, crc_of: str | None = None,
                 use_mmap: bool = False, n_big: int = 0):
        super().__init__()
        line = b"x" * 149 + b"\n"
        self.data = (line * (size // len(line) + 1))[:size]
        self.crc_fd = os.open(crc_of, os.O_RDONLY) if crc_of else -1
        self.crc_map = memoryview(mmap.mmap(self.crc_fd, 0, prot=mmap.PROT_READ)) \
            if crc_of and use_mmap else None
        self.n_small = n_small
        self.n_big = n_big
        self.small_value = b"v" * 150
        self.initialized = trio.Event()

    def init(self):
        self.initialized.set()

    def _attr(self, inode):
        a = pyfuse3.EntryAttributes()
        a.st_ino = inode
        a.entry_timeout = a.attr_timeout = 3600
        a.st_uid, a.st_gid = os.getuid(), os.getgid()
        a.st_blksize = 128 * 1024
        if inode in (pyfuse3.ROOT_INODE, SMALL_DIR_INODE, BIG_DIR_INODE):
            a.st_mode = stat.S_IFDIR | 0o555
            a.st_nlink = 2
        elif inode == DATA_INODE:
            a.st_mode = stat.S_IFREG | 0o444
            a.st_size = len(self.data)
            a.st_nlink = 1
        else:
            a.st_mode = stat.S_IFREG | 0o444
            a.st_size = len(self.small_value)
            a.st_nlink = 1
        return a

    async def getattr(self, inode, ctx=None):
        return self._attr(inode)

    async def lookup(self, parent, name, ctx=None):
        if parent == pyfuse3.ROOT_INODE and name == b"data":
            return self._attr(DATA_INODE)
        if parent == pyfuse3.ROOT_INODE and name == b"small":
            return self._attr(SMALL_DIR_INODE)
        if parent == pyfuse3.ROOT_INODE and name == b"big":
            return self._attr(BIG_DIR_INODE)
        if parent == SMALL_DIR_INODE and name.isdigit() and int(name) < self.n_small:
            return self._attr(SMALL_BASE + int(name))
        if parent == BIG_DIR_INODE and name.isdigit() and int(name) < self.n_big:
            return self._attr(BIG_BASE + int(name))
        raise pyfuse3.FUSEError(errno.ENOENT)

    async def opendir(self, inode, ctx):
        return inode

    async def readdir(self, fh, start_id, token):
        if fh != BIG_DIR_INODE:
            return
        for n in range(start_id, self.n_big):
            if not pyfuse3.readdir_reply(token, str(n).encode(), self._attr(BIG_BASE + n), n + 1):
                break

    async def releasedir(self, fh):
        pass

    async def open(self, inode, flags, ctx):
        return pyfuse3.FileInfo(fh=inode, keep_cache=True)

    async def read(self, fh, off, size):
        if fh == DATA_INODE:
            if self.crc_map is not None:
                crc32c(self.crc_map[off:off + size])
            elif self.crc_fd >= 0:
                crc32c(os.pread(self.crc_fd, size, off))
            return self.data[off:off + size]
        return self.small_value[off:off + size]

    async def release(self, fh):
        pass


async def serve(fs: TrivialFS, mnt: str) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(widen_read_ahead, fs, mnt)
        await pyfuse3.main()
        nursery.cancel_scope.cancel()


async def widen_read_ahead(fs: TrivialFS, mnt: str) -> None:
    # the same read-ahead window kafkafs asks for its own mounts, once INIT is answered
    await fs.initialized.wait()
    await trio.lowlevel.checkpoint()
    set_read_ahead(mnt)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mount")
    ap.add_argument("size", type=int)
    ap.add_argument("n_small", type=int)
    ap.add_argument("--big", type=int, default=0, help="names in /big")
    ap.add_argument("--crc-of")
    ap.add_argument("--mmap", action="store_true")
    args = ap.parse_args()
    mnt = args.mount
    fs = TrivialFS(args.size, args.n_small, args.crc_of, args.mmap, args.big)
    pyfuse3.init(fs, mnt, {"fsname=trivialfs"})
    try:
        trio.run(serve, fs, os.path.abspath(mnt))
    finally:
        pyfuse3.close(unmount=True)


if __name__ == "__main__":
    main()
