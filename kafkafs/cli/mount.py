"""``kafkafs mount`` and ``kafkafs umount``."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import subprocess
import sys
import time

from ..core.control import daemon_pid, find_mount
from ..log.errors import LogDirLockedError
from ..mounttable import FSTYPE, mount_entries
from .common import CliError, add_log_dir_args, broker_config

DEFAULT_LOCK_TIMEOUT = 10.0  # seconds kafkafs mount waits for a log dir's lock


def register(sub) -> None:
    m = sub.add_parser("mount", help="mount log dirs as a filesystem (stays in the foreground)")
    m.add_argument("mountpoint", nargs="?",
                   help="where to mount (default: kafkafs.mount.point of --config)")
    add_log_dir_args(m)
    m.add_argument("-o", dest="options", action="append", default=[], metavar="OPTION[,...]",
                   help="allow_other, parse.key=true, key.separator=SEP, batch.size=BYTES, "
                        "read_only, or any FUSE option")
    m.add_argument("--read-only", action="store_true",
                   help="never write to the log dirs (and take no lock)")
    m.add_argument("--debug", action="store_true", help="log every request")
    m.add_argument("--lock-timeout", type=float, default=DEFAULT_LOCK_TIMEOUT, metavar="S",
                   help="seconds to wait for a log dir another process holds (a daemon "
                        f"still shutting down; default {DEFAULT_LOCK_TIMEOUT:g})")
    m.set_defaults(func=run_mount)

    u = sub.add_parser("umount", help="unmount; the daemon then flushes and exits 0")
    u.add_argument("mountpoint")
    u.add_argument("--timeout", type=float, default=60.0,
                   help="seconds to wait for the daemon to finish (default 60)")
    u.set_defaults(func=run_umount)


def run_mount(args) -> int:
    from ..daemon import main as daemon

    daemon_logging(args.debug)
    config = broker_config(args)
    mountpoint = args.mountpoint or config.mount_point
    if not mountpoint:
        raise CliError("no mount point: give one, or set kafkafs.mount.point in --config")
    mountpoint = os.path.abspath(mountpoint)
    check_mount_point(mountpoint)  # before any lock is taken or log dir loaded
    options = list(config.mount_options) + list(args.options)
    try:
        # every option and log dir checked before waiting for a lock or writing a byte
        fsopt, _ra, _fuse = daemon.preflight(config, options, args.read_only, locks=False)
        if not fsopt.read_only:  # a read-only mount takes no lock
            wait_for_log_dirs(config.log_dirs, args.lock_timeout)
        return daemon.run(mountpoint, config, options, args.read_only)
    except LogDirLockedError as exc:
        raise CliError(str(exc)) from None
    except (OSError, ValueError, daemon.MountError) as exc:  # bad mount point, log dir, -o
        raise CliError(str(exc)) from None


def daemon_logging(debug: bool) -> None:
    """A daemon's log on stderr (``mount``, ``serve``): every request with ``--debug``."""
    logging.basicConfig(level=logging.DEBUG if debug else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("watchdog").setLevel(logging.INFO)


def wait_for_log_dirs(log_dirs, timeout: float) -> None:
    """Wait up to ``timeout`` seconds while another process holds the lock of one of
    ``log_dirs`` (a daemon that is still shutting down), saying once on stderr for whom it
    waits. Returns when they are free or the time is up: taking the locks then fails with
    the usual message."""
    from ..log.inspect import lock_holder
    from ..log.manager import is_locked

    dirs = [d for d in log_dirs if os.path.isdir(d)]
    deadline = time.monotonic() + timeout
    held = is_locked(dirs)
    if held is None or timeout <= 0:
        return
    who = lock_holder(held) or "another process"
    print(f"kafkafs: waiting up to {timeout:g}s for the lock on {held}, held by {who}",
          file=sys.stderr, flush=True)
    while held is not None and time.monotonic() < deadline:
        time.sleep(0.05)
        held = is_locked(dirs)


def _daemon_pid(mountpoint: str) -> int | None:
    try:
        return daemon_pid(mountpoint)
    except (OSError, ValueError):
        return None


def mount_fstype(mountpoint: str) -> str | None:
    """The type of the topmost mount at ``mountpoint`` in /proc/self/mounts (``fuse.kafkafs``
    for a kafkafs mount), None when nothing is mounted there. Works where stat is refused,
    as for root on a FUSE mount without allow_other. Raises OSError when the table cannot be
    read."""
    fstype = None
    for point, kind in mount_entries():
        if point == mountpoint:
            fstype = kind  # the last one listed is the topmost
    return fstype


def mount_serving(log_dirs) -> str | None:
    """The mount point of a live kafkafs mount whose daemon serves exactly ``log_dirs`` (from
    its root's ``user.kafkafs.log_dirs``), or None (none, or the mount table or mount cannot
    be read)."""
    return find_mount(log_dirs, exact=True)


def kafkafs_mount_state(mountpoint: str) -> str | None:
    """``"live"`` when the topmost mount at ``mountpoint`` is a kafkafs mount whose daemon
    answers, ``"stale"`` when its daemon is gone (stat fails with ENOTCONN, "Transport
    endpoint is not connected"), None when it is no kafkafs mount or the mount table cannot
    be read. A mount the caller may not look into (EACCES: root on a mount without
    allow_other) counts as live."""
    try:
        if mount_fstype(mountpoint) != FSTYPE:
            return None
    except OSError:
        return None
    try:
        os.stat(mountpoint)
    except OSError as exc:
        return "stale" if exc.errno == errno.ENOTCONN else "live"
    return "live"


def lazy_unmount(mountpoint: str) -> None:
    """Detach whatever is mounted at ``mountpoint`` (``fusermount3 -u -z``; ``umount -l``
    without it); failures are ignored."""
    tool = shutil.which("fusermount3") or shutil.which("fusermount")
    cmd = [tool, "-u", "-z", "-q", mountpoint] if tool else ["umount", "-l", mountpoint]
    subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, check=False)


def check_mount_point(mountpoint: str) -> None:
    """Refuse a mount point ``kafkafs mount`` cannot use, with a message saying why: it does
    not exist, it is not a directory, or it holds a live kafkafs mount already (a second one
    would hide the first). A stale kafkafs mount there (its daemon is gone) is detached, as
    mount.fuse.kafkafs and the service's ExecStartPre do. Raises CliError."""
    state = kafkafs_mount_state(mountpoint)
    if state == "live":
        pid = _daemon_pid(mountpoint)
        who = f" (daemon pid {pid})" if pid is not None else ""
        raise CliError(f"{mountpoint} already holds a kafkafs mount{who}; unmount it first "
                       f"(kafkafs umount {mountpoint})")
    if state == "stale":
        print(f"kafkafs: detaching the stale kafkafs mount at {mountpoint} (its daemon is "
              "gone)", file=sys.stderr, flush=True)
        lazy_unmount(mountpoint)
    if not os.path.lexists(mountpoint):
        raise CliError(f"mount point {mountpoint} does not exist")
    if not os.path.isdir(mountpoint):
        raise CliError(f"mount point {mountpoint} is not a directory")


def is_mounted(mountpoint: str) -> bool:
    """Whether anything is mounted at ``mountpoint`` (:func:`mount_fstype`; without a
    readable /proc/self/mounts, ``os.path.ismount``)."""
    try:
        return mount_fstype(mountpoint) is not None
    except OSError:
        return os.path.ismount(mountpoint)


def run_umount(args) -> int:
    """Unmount ``args.mountpoint`` (``fusermount3 -u``, else ``umount``) and wait up to
    ``args.timeout`` seconds for its daemon to exit (:func:`wait_for_exit`; the daemon's pid
    is its root's ``user.kafkafs.pid``, read before unmounting). Returns 0 once the daemon
    has exited; raises CliError when nothing is mounted there, the unmount fails, or the
    daemon still runs when the time is up. When the pid cannot be read (a mount the caller
    may not look into) it says so on stderr and returns 0 without waiting."""
    mountpoint = os.path.abspath(args.mountpoint)
    if not is_mounted(mountpoint):
        raise CliError(f"{mountpoint} is not mounted")
    pid = _daemon_pid(mountpoint)
    start = _start_time(pid) if pid is not None else None
    tool = shutil.which("fusermount3") or shutil.which("fusermount")
    cmd = [tool, "-u", mountpoint] if tool else ["umount", mountpoint]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise CliError(res.stderr.strip() or f"{cmd[0]} failed with status {res.returncode}")
    if pid is None or start is None:
        print(f"kafkafs umount: note: unmounted; the daemon's pid could not be read from "
              f"{mountpoint} (user.kafkafs.pid), so this did not wait for it to exit",
              file=sys.stderr)
        return 0
    if not wait_for_exit(pid, start, args.timeout):
        raise CliError(f"unmounted, but the daemon (pid {pid}) is still running after "
                       f"{args.timeout:g}s")
    return 0


def wait_for_exit(pid: int, start: str, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds (polling every 50 ms) for process ``pid``, started at
    ``start`` (:func:`_start_time`), to have exited: every one of its threads gone, so that
    its files, locks and memory are released and its parent can reap it (a zombie counts as
    exited). Returns whether it has."""
    deadline = time.monotonic() + timeout
    while not _exited(pid, start):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state first), or None when
    the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _start_time(pid: int) -> str | None:
    """The start time of process ``pid`` in clock ticks since boot (``/proc/PID/stat``
    field 22), which tells it from a later process given the same pid; None when gone."""
    fields = _stat_fields(pid)
    return fields[19] if fields is not None and len(fields) > 19 else None


def _exited(pid: int, start: str) -> bool:
    """Whether the process ``pid`` started at ``start`` has exited. A zombie has only when
    it is the last of its threads: the kernel marks a thread-group leader whose own thread
    ended ``Z`` while its other threads may still be exiting (finishing a write, unmapping
    memory), holding the process's files and locks; only once they are gone can its parent
    reap it (``/proc/PID/task`` lists only the leader then)."""
    fields = _stat_fields(pid)
    if fields is None or len(fields) <= 19 or fields[19] != start:
        return True  # gone (or its pid given to another process since)
    if fields[0] not in ("Z", "X"):
        return False
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    return all(t == str(pid) for t in threads)
