"""The kafkafs daemon: one trio process per mount (docs/design.md §6).

The daemon composes a storage core (:class:`~kafkafs.core.storage.StorageCore`: the log
manager, its tasks, the key maps, the control requests) with its frontends, today the FUSE
mount (:class:`~kafkafs.fs.operations.KafkaFS`), which is given the core. Start-up order
(as s3ql's mount.s3ql): load and recover the log dirs, create the filesystem,
``pyfuse3.init`` (the mount), start the frontend's and the core's background tasks in one
nursery, tell systemd READY=1, then serve. Shutdown — on SIGTERM/SIGINT, or when the mount point is
unmounted (``kafkafs umount``, ``fusermount3 -u``) — stops serving and the tasks, flushes
every log, writes the checkpoints and ``.kafka_cleanshutdown``, releases the log dirs'
locks, then unmounts, and returns 0. The unmount comes last because it can take seconds
the log dirs need not wait for: the kernel drops every inode it holds for the mount, one
per name listed (a listing of 3 million offsets leaves 3 million; the trivial filesystem
of bench/ takes as long to unmount after the same listing). Requests arriving meanwhile
wait for the unmount, then fail.
"""

from __future__ import annotations

import logging
import os
import signal

import pyfuse3
import trio
import trio.lowlevel

from ..core.storage import StorageCore
from ..escapes import unescape
from ..fs.measure import keep_views_measured
from ..fs.operations import FsOptions, KafkaFS
from ..log.config import BrokerConfig
from ..log.isolation import DEFAULT_ISOLATION_LEVEL, ISOLATION_LEVELS
from ..net.broker import Broker
from ..net.server import NetServer
from . import gc_tuning, malloc, notify, readahead
from .logdirs import check_log_dirs, listeners_of
from .options import batch_size_option, check_fuse_options, split_options

log = logging.getLogger(__name__)

def read_ahead_kb(own: dict[str, str]) -> int:
    """The ``read_ahead_kb`` option (KiB; 0 keeps the kernel's window). Raises ValueError."""
    text = own.get("read_ahead_kb", str(readahead.DEFAULT_READ_AHEAD_KB))
    if not text.isdigit():
        raise ValueError(f"read_ahead_kb must be a number of KiB, not {text!r}")
    return int(text)


def fs_options(own: dict[str, str]) -> FsOptions:
    """FsOptions from kafkafs's own ``-o`` options. Raises ValueError on a bad value."""
    isolation = own.get("isolation.level", DEFAULT_ISOLATION_LEVEL)
    if isolation not in ISOLATION_LEVELS:
        raise ValueError(f"isolation.level must be one of {', '.join(ISOLATION_LEVELS)}, "
                         f"not {isolation!r}")
    sep = own.get("key.separator", "\t")
    sep = unescape(sep).encode("utf-8") if sep else b"\t"
    return FsOptions(
        parse_key=own.get("parse.key", "false").lower() in ("true", "1", "yes", ""),
        key_separator=sep,
        read_only="read_only" in own or "ro" in own,
        list_all="list_all" in own,
        isolation_level=isolation,
        batch_size=batch_size_option(own),
    )


class MountError(Exception):
    """The kernel or libfuse refused the mount (a FUSE option it does not know, a mount
    point it cannot use); libfuse has printed its own reason on stderr."""


def preflight(config: BrokerConfig, options: list[str], read_only: bool = False, *,
              locks: bool = True) -> tuple[FsOptions, int, set[str]]:
    """Everything a mount can be refused for that can be known before the first write to a
    log dir (:meth:`LogManager.startup` creates a log dir, its ``.lock`` and
    ``meta.properties``, and recovers; a failure after it -- libfuse refusing an option
    inside ``pyfuse3.init`` -- left those behind): kafkafs's own ``-o`` options, the FUSE
    options (:func:`~kafkafs.daemon.options.check_fuse_options`), /dev/fuse, every log dir
    (a directory, or one that can be created; read-only: one that exists) and, with
    ``locks``, no log dir locked by another process (a writable mount). Returns the file
    system options, ``read_ahead_kb`` and the FUSE options. Raises ValueError, OSError,
    LogDirLockedError, MountError, InvalidConfigError (``listeners``)."""
    own, fuse_opts = split_options(options)
    fsopt = fs_options(own)
    ra_kb = read_ahead_kb(own)
    fsopt.read_only = fsopt.read_only or read_only
    check_fuse_options(fuse_opts)
    if not os.path.exists("/dev/fuse"):
        raise MountError("FUSE is not available here: there is no /dev/fuse (modprobe fuse)")
    listeners_of(config)  # (InvalidConfigError for a bad listeners value)
    check_log_dirs(config, fsopt.read_only, locks=locks)
    return fsopt, ra_kb, fuse_opts


async def serve(mountpoint: str, config: BrokerConfig, options: list[str],
                read_only: bool = False) -> int:
    """Mount ``config.log_dirs`` at ``mountpoint`` and serve until unmounted or signalled.
    Returns the exit status (0 after a clean shutdown). Nothing is written to a log dir
    before :func:`preflight` passes. Raises LogDirLockedError, OSError, ValueError,
    MountError."""
    fsopt, ra_kb, fuse_opts = preflight(config, options, read_only)
    listeners = listeners_of(config)
    core = StorageCore(config, read_only=fsopt.read_only)
    await core.startup()
    operations = KafkaFS(core, fsopt)  # the first frontend
    net = NetServer(Broker(core)) if listeners else None  # the second, when configured
    for name in ("fsname", "subtype"):  # kafkafs, unless -o gives its own
        if not any(o.startswith(name + "=") for o in fuse_opts):
            fuse_opts.add(f"{name}=kafkafs")
    if fsopt.read_only:
        fuse_opts.add("ro")
    mounted = False
    clean = False
    # signals are received for the whole life of the daemon, shutdown included, so a second
    # SIGTERM (systemd after ExecStop) cannot kill it half-way through flushing
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        try:
            if net is not None:
                await net.bind(listeners)  # (a port in use: refused before the mount)
            try:
                pyfuse3.init(operations, mountpoint, fuse_opts)
            except RuntimeError as exc:  # libfuse printed its reason on stderr already
                raise MountError(f"cannot mount at {mountpoint} with options "
                                 f"{','.join(sorted(fuse_opts))} ({exc})") from None
            mounted = True
            log.info("Mounted %s at %s", ",".join(config.log_dirs), mountpoint)
            async with trio.open_nursery() as nursery:
                operations.nursery = nursery
                nursery.start_soon(_on_signal, signals, nursery.cancel_scope)
                # the frontend's own tasks, then the core's
                nursery.start_soon(_widen_read_ahead, operations, mountpoint, ra_kb)
                nursery.start_soon(keep_views_measured, operations,
                                   config.log_flush_offset_checkpoint_interval_ms)
                await core.start_tasks(nursery)
                if net is not None:
                    await nursery.start(net.serve)
                notify.ready(f"Mounted {mountpoint}")
                gc_tuning.settle()
                await pyfuse3.main()
                # pyfuse3.main returns when the kernel ends the session (fusermount3 -u)
                nursery.cancel_scope.cancel()
        finally:
            notify.stopping()
            if core.cleaner is not None:  # a pass asked for by a request stops at once
                core.cleaner.shutdown()
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(operations.save_views)  # the frontend first
                clean = await core.shutdown()  # locks released
            if mounted:
                pyfuse3.close(unmount=True)
            if clean and not mounted:
                log.info("Not mounted at %s; logs flushed and checkpointed", mountpoint)
            elif clean:
                log.info("Unmounted %s; logs flushed and checkpointed", mountpoint)
            else:
                log.error("Unmounted %s, but the shutdown was not clean (see above)", mountpoint)
    return 0 if clean else 1


async def _widen_read_ahead(operations: KafkaFS, mountpoint: str, kb: int) -> None:
    # the kernel narrows the window to what the INIT reply allows: widen it after that
    await operations.initialized.wait()
    await trio.lowlevel.checkpoint()
    if readahead.set_read_ahead(mountpoint, kb):
        log.debug("read_ahead_kb of %s set to %d", mountpoint, kb)


async def _on_signal(signals, cancel_scope: trio.CancelScope) -> None:
    async for signum in signals:
        log.info("Received %s, shutting down", signal.Signals(signum).name)
        pyfuse3.terminate()
        cancel_scope.cancel()
        return


def run(mountpoint: str, config: BrokerConfig, options: list[str], read_only: bool = False) -> int:
    """Blocking entry point used by ``kafkafs mount``."""
    if not os.path.exists(mountpoint):
        raise FileNotFoundError(f"mount point {mountpoint} does not exist")
    if not os.path.isdir(mountpoint):
        raise NotADirectoryError(f"mount point {mountpoint} is not a directory")
    malloc.tune()
    return trio.run(serve, mountpoint, config, options, read_only)
