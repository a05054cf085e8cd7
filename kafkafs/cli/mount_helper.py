"""``mount.fuse.kafkafs``: the mount(8) helper that makes ``/etc/fstab`` lines (and the
systemd ``.mount`` units generated from them) mount kafkafs.

For a file system type ``fuse.kafkafs`` mount(8) runs ``/sbin/mount.fuse.kafkafs`` when it
exists (mount(8), "External helpers") as::

    mount.fuse.kafkafs SOURCE MOUNTPOINT [-sfnv] [-t TYPE] [-o OPTION[,OPTION...]]

and waits for it to exit. ``kafkafs mount`` stays in the foreground for the life of the
mount, so this helper starts it in the background (a new session, stdin from /dev/null)
with ``NOTIFY_SOCKET`` pointing at a private datagram socket, and returns only once the
daemon has said ``READY=1`` (exit 0: the file system is mounted and usable) or has failed
(non-zero, with the daemon's own error on stderr; nothing is left mounted or running).

SOURCE is the log dirs, comma-separated; they override ``log.dirs`` of ``config=``. (No
word such as ``kafkafs`` stands for "the log dirs of the config file": mount(8) turns a
SOURCE that names an existing file relative to its working directory into that file's
absolute path before the helper sees it, so a word could become somebody's directory.)
When MOUNTPOINT already shows a kafkafs mount of the same log dirs, the helper says so
(with ``-v``) and exits 0: ``mount -a`` compares the fstab SOURCE with the mount's source,
which kafkafs reports as ``kafkafs``, so it would otherwise try again at every run. A
kafkafs mount of other log dirs there fails the mount (``kafkafs mount`` never stacks a mount
that would hide one); a stale one (its daemon gone) is detached first, as ``kafkafs mount``
does too (both ask :func:`kafkafs.cli.mount.kafkafs_mount_state`).
Options, as mount.fuse3 treats them:

* mount(8)'s generic options that are not for the file system are dropped: ``rw``,
  ``defaults``, ``auto``/``noauto``, ``user``/``nouser``/``users``/``owner``/``group``,
  ``_netdev``, ``nofail``, ``comment=...``, ``x-*`` (``x-systemd.*``), and the permissive
  ``suid``/``dev``/``exec`` (a FUSE mount is ``nosuid,nodev`` anyway; the restrictive
  ``nosuid``, ``nodev``, ``noexec`` go on to FUSE);
* ``ro`` becomes ``kafkafs mount --read-only``;
* the helper's own: ``config=FILE`` (``--config``), ``setuid=USER`` (run the daemon as
  USER, mount.fuse3's option), ``log_file=FILE`` (append the daemon's log there; without
  it the log is discarded once the mount is up), ``ready_timeout=SECONDS`` (how long to
  wait for the mount, default 60);
* everything else goes to the daemon as ``-o``: kafkafs's own (``parse.key``,
  ``key.separator``, ``batch.size``, ``read_ahead_kb``, ``isolation.level``, ``read_only``)
  and FUSE's (``allow_other``, ``default_permissions``, ...).

Flags: ``-f`` fake (do nothing, exit 0), ``-n`` no mtab (ignored: FUSE mounts are in
/proc/self/mountinfo), ``-v`` verbose (the command, and the daemon's log until ready, on
stderr), ``-s`` sloppy (drop options neither kafkafs nor libfuse know instead of failing
on them), ``-t TYPE`` (given when mount(8) runs a helper of another name; must be
``fuse.kafkafs``).

The daemon's stdout and stderr go through a pipe the helper reads until readiness; after
it, a small process (``mount.fuse.kafkafs`` in ps, in the daemon's session) holds the pipe's
read end and copies to ``log_file`` or discards, so the daemon never writes into a closed
pipe and the helper itself can exit. That process exits when the daemon does.
"""

from __future__ import annotations

import errno
import os
import pwd
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

from ..core.control import daemon_pid, served_log_dirs
from ..daemon.options import FUSE_OPTIONS, FUSE_VALUE_OPTIONS, OWN_OPTIONS
from .mount import FSTYPE, is_mounted, kafkafs_mount_state, lazy_unmount

PROG = "mount.fuse.kafkafs"
DEFAULT_READY_TIMEOUT = 60.0

# exit statuses: mount(8)'s (RETURN CODES)
EX_USAGE = 1     # incorrect invocation or permissions
EX_SYSERR = 2    # system error (cannot fork, no socket, ...)
EX_FAIL = 32     # mount failure

# mount(8)'s generic options that are not for the file system (mount.fuse3 drops the same;
# libmount itself already keeps x-* and comment= from most helpers, but not always)
GENERIC_OPTIONS = frozenset({
    "rw", "defaults", "auto", "noauto", "user", "nouser", "users", "owner", "group",
    "_netdev", "nofail", "suid", "dev", "exec", "loud", "silent",
    "relatime",  # the kernel's default, and libfuse 3 refuses the word
})
GENERIC_PREFIXES = ("x-", "comment=")

# what -s keeps besides kafkafs's own: libfuse 3's mount and session options
# (kafkafs.daemon.options.FUSE_OPTIONS and FUSE_VALUE_OPTIONS, as libfuse 3.14 takes them)


class UsageError(Exception):
    """The helper was called wrongly (bad arguments or option values): exit status 1."""


@dataclass
class MountRequest:
    """What one ``mount.fuse.kafkafs`` invocation asks for, after option sorting."""

    source: str
    mountpoint: str                    # absolute
    log_dirs: list[str]                # absolute
    config: str | None = None          # absolute path for --config
    options: list[str] = field(default_factory=list)   # -o options for the daemon
    read_only: bool = False
    setuid: str | None = None
    log_file: str | None = None
    ready_timeout: float = DEFAULT_READY_TIMEOUT
    fake: bool = False
    verbose: bool = False
    sloppy: bool = False
    dropped: list[str] = field(default_factory=list)   # options not passed on


def split_mount_options(text: str) -> list[str]:
    """Split a mount(8) option string at commas outside double quotes, as libmount does,
    and drop the quotes around a value: ``'a,b="x,y",c'`` -> ``['a', 'b=x,y', 'c']``.
    Empty items are skipped."""
    items: list[str] = []
    cur: list[str] = []
    quoted = False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        elif ch == "," and not quoted:
            items.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    items.append("".join(cur))
    return [item.strip() for item in items if item.strip()]


def _known_to_daemon(option: str) -> bool:
    name, eq, _ = option.partition("=")
    if eq:
        return name in OWN_OPTIONS or name in FUSE_VALUE_OPTIONS
    return name in OWN_OPTIONS or name in FUSE_OPTIONS


def parse_args(argv: list[str]) -> MountRequest:
    """Parse mount(8)'s helper calling convention (``SOURCE MOUNTPOINT [-sfnv] [-t TYPE]
    [-o OPTIONS]``, flags before, between or after the two operands, clustered or not,
    ``-oOPTS`` attached or separate, several ``-o`` joined) and sort the options as the
    module docstring describes. Paths become absolute (the daemon runs in ``/``).
    Raises UsageError."""
    positional: list[str] = []
    raw_options: list[str] = []
    flags: set[str] = set()
    fstype = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            positional.extend(argv[i + 1:])
            break
        if arg in ("-h", "--help"):
            raise UsageError("help")
        if arg.startswith("-") and len(arg) > 1:
            j = 1
            while j < len(arg):
                ch = arg[j]
                if ch in "ot":
                    value = arg[j + 1:]
                    if not value:
                        i += 1
                        if i >= len(argv):
                            raise UsageError(f"option -{ch} needs a value")
                        value = argv[i]
                    if ch == "o":
                        raw_options.append(value)
                    else:
                        fstype = value
                    break
                if ch in "sfnv":
                    flags.add(ch)
                elif ch == "N":
                    raise UsageError("mounting in another mount namespace (-N) is not "
                                     "supported")
                else:
                    raise UsageError(f"unknown flag -{ch}")
                j += 1
        else:
            positional.append(arg)
        i += 1
    if len(positional) != 2:
        raise UsageError("expected SOURCE and MOUNTPOINT")
    if fstype is not None and fstype not in (FSTYPE, "kafkafs"):
        raise UsageError(f"file system type {fstype!r} is not {FSTYPE}")
    source, mountpoint = positional
    log_dirs = [os.path.abspath(d.strip()) for d in source.split(",") if d.strip()]
    if not log_dirs:
        raise UsageError(f"no log dir in SOURCE {source!r} (give the log dirs, "
                         "comma-separated)")
    req = MountRequest(source=source, mountpoint=os.path.abspath(mountpoint),
                       log_dirs=log_dirs, fake="f" in flags, verbose="v" in flags,
                       sloppy="s" in flags)
    for text in raw_options:
        for opt in split_mount_options(text):
            _sort_option(req, opt)
    return req


def _sort_option(req: MountRequest, opt: str) -> None:
    name, eq, value = opt.partition("=")
    if opt in GENERIC_OPTIONS or opt.startswith(GENERIC_PREFIXES):
        req.dropped.append(opt)
    elif opt == "ro":
        req.read_only = True
    elif name in ("config", "setuid", "log_file", "ready_timeout"):
        if not eq or not value:
            raise UsageError(f"option {name} needs a value ({name}=...)")
        if name == "config":
            req.config = os.path.abspath(value)
        elif name == "log_file":
            req.log_file = os.path.abspath(value)
        elif name == "setuid":
            req.setuid = value
        else:
            try:
                req.ready_timeout = float(value)
            except ValueError:
                raise UsageError(f"ready_timeout must be a number of seconds, not {value!r}") \
                    from None
            if not req.ready_timeout > 0:
                raise UsageError("ready_timeout must be more than 0 seconds")
    elif req.sloppy and not _known_to_daemon(opt):
        req.dropped.append(opt)
    elif name == "key.separator" and "," in value:
        # the daemon splits -o values at commas, and reads backslash escapes in this one
        req.options.append("key.separator=" + value.replace(",", "\\x2c"))
    else:
        req.options.append(opt)


def daemon_command(req: MountRequest) -> list[str]:
    """The ``kafkafs mount`` command line the helper runs for ``req``: this Python
    (``sys.executable -m kafkafs``), so the daemon is the same installation as the helper."""
    cmd = [sys.executable, "-m", "kafkafs", "mount", req.mountpoint,
           "--log-dirs", ",".join(req.log_dirs)]
    if req.config is not None:
        cmd += ["--config", req.config]
    if req.read_only:
        cmd.append("--read-only")
    for opt in req.options:
        cmd += ["-o", opt]
    return cmd


def already_mounted(req: MountRequest) -> int | None:
    """The pid of the daemon serving ``req.log_dirs`` at ``req.mountpoint`` already, from
    its ``user.kafkafs.log_dirs`` and ``user.kafkafs.pid`` attributes; None when the mount
    point shows no kafkafs mount, another one, or one the caller may not look into."""
    if not is_mounted(req.mountpoint):
        return None
    try:
        dirs = served_log_dirs(req.mountpoint)
        pid = daemon_pid(req.mountpoint)
    except (OSError, ValueError):
        return None
    served = {os.path.realpath(d) for d in dirs}
    return pid if served == {os.path.realpath(d) for d in req.log_dirs} else None


def is_stale_kafkafs_mount(mountpoint: str) -> bool:
    """Whether the topmost mount at ``mountpoint`` is a ``fuse.kafkafs`` mount whose daemon
    is gone (stat fails with ENOTCONN, "Transport endpoint is not connected"): the same test
    ``kafkafs mount`` makes (:func:`kafkafs.cli.mount.kafkafs_mount_state`)."""
    return kafkafs_mount_state(mountpoint) == "stale"


def _say(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)


class _Interrupted(Exception):
    pass


def _raise_interrupted(signum, frame):
    raise _Interrupted(signal.Signals(signum).name)


def start_daemon(req: MountRequest) -> int:
    """Start ``kafkafs mount`` for ``req`` in the background and wait for ``READY=1``.

    Returns 0 once the daemon reported readiness (the mount is up; the daemon keeps
    running in a session of its own) or when the same log dirs are mounted there already
    (nothing started), ``EX_FAIL`` (32) when the daemon exited first, did
    not become ready within ``req.ready_timeout`` seconds (it is then stopped) or the helper
    was interrupted, ``EX_USAGE`` (1) for an unknown ``setuid`` user or a ``log_file`` that
    cannot be opened, ``EX_SYSERR`` (2) when the socket or the process cannot be made.
    On failure the daemon's output is printed to stderr and nothing is left mounted."""
    run_as = None
    if req.setuid is not None:
        try:
            run_as = pwd.getpwnam(req.setuid)
        except KeyError:
            _say(f"setuid: no such user {req.setuid!r}")
            return EX_USAGE
    log_fd = None
    if req.log_file is not None:
        try:
            log_fd = os.open(req.log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
                             0o640)
        except OSError as exc:
            _say(f"cannot open log_file {req.log_file}: {exc.strerror}")
            return EX_USAGE

    running = already_mounted(req)
    if running is not None:
        if req.verbose:
            _say(f"{req.mountpoint} is already mounted (daemon pid {running})")
        if log_fd is not None:
            os.close(log_fd)
        return 0
    if is_stale_kafkafs_mount(req.mountpoint):
        # what the service's ExecStartPre does: a crashed daemon's mount is detached
        _say(f"detaching the stale kafkafs mount at {req.mountpoint} (its daemon is gone)")
        lazy_unmount(req.mountpoint)
    was_mounted = is_mounted(req.mountpoint)
    cmd = daemon_command(req)
    if req.verbose:
        dropped = f" (dropped: {','.join(req.dropped)})" if req.dropped else ""
        _say("running " + " ".join(cmd) + dropped)
    tmpdir = sock = None
    rfd = wfd = -1
    old_handlers = {}
    try:
        tmpdir = tempfile.mkdtemp(prefix="kafkafs-mount-",
                                  dir="/run" if os.access("/run", os.W_OK) else None)
        sock_path = os.path.join(tmpdir, "notify")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        sock.bind(sock_path)
        if run_as is not None:
            os.chown(tmpdir, run_as.pw_uid, run_as.pw_gid)
            os.chown(sock_path, run_as.pw_uid, run_as.pw_gid)
        rfd, wfd = os.pipe2(os.O_CLOEXEC)
        env = dict(os.environ, NOTIFY_SOCKET=sock_path)
        env.pop("LISTEN_FDS", None)
        env.pop("LISTEN_PID", None)
        popen_kw = {}
        if run_as is not None:
            env.update(HOME=run_as.pw_dir, USER=run_as.pw_name, LOGNAME=run_as.pw_name)
            popen_kw = {"user": run_as.pw_uid, "group": run_as.pw_gid,
                        "extra_groups": os.getgrouplist(run_as.pw_name, run_as.pw_gid)}
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=wfd, stderr=wfd,
                                cwd="/", env=env, start_new_session=True, close_fds=True,
                                **popen_kw)
        # from here on a signal (mount(8) or systemd giving up, ^C) stops the daemon too
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            old_handlers[signum] = signal.signal(signum, _raise_interrupted)
    except OSError as exc:
        who = f" as {req.setuid}" if req.setuid else ""
        _say(f"cannot start the kafkafs daemon{who}: {exc}")
        for fd in (rfd, wfd, log_fd):
            if fd is not None and fd >= 0:
                os.close(fd)
        if sock is not None:
            sock.close()
        if tmpdir is not None:
            shutil.rmtree(tmpdir, ignore_errors=True)
        _restore(old_handlers)
        return EX_SYSERR
    os.close(wfd)

    output = bytearray()
    try:
        status = _wait_ready(req, proc, sock, rfd, output)
    except _Interrupted as exc:
        status = f"interrupted by {exc}"
    finally:
        sock.close()
        shutil.rmtree(tmpdir, ignore_errors=True)
        _restore(old_handlers)

    if status == "ready":
        try:
            _hand_over_output(rfd, log_fd, bytes(output))
        except OSError as exc:  # cannot fork: the daemon keeps running, its log is lost
            _say(f"warning: cannot keep the daemon's log: {exc}")
        os.close(rfd)
        if log_fd is not None:
            os.close(log_fd)
        if req.verbose:
            _say(f"mounted {req.mountpoint} (daemon pid {proc.pid})")
        return 0

    # failure: stop what is left, keep nothing mounted, show what the daemon said
    _stop(proc, rfd, output)
    os.close(rfd)
    if log_fd is not None:
        os.write(log_fd, bytes(output))
        os.close(log_fd)
    if not was_mounted and is_mounted(req.mountpoint):
        lazy_unmount(req.mountpoint)
    text = output.decode("utf-8", "replace").rstrip()
    _say(f"mounting {req.mountpoint} failed: {status}" + (":" if text else ""))
    if text:
        print(text, file=sys.stderr, flush=True)
    return EX_FAIL


def _restore(handlers: dict) -> None:
    for signum, handler in handlers.items():
        signal.signal(signum, handler)


def _wait_ready(req: MountRequest, proc: subprocess.Popen, sock: socket.socket, rfd: int,
                output: bytearray) -> str:
    """Read the notify socket and the daemon's output until READY=1 from the daemon, its
    exit or the timeout. Returns ``"ready"`` or a description of the failure."""
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ, "notify")
    sel.register(rfd, selectors.EVENT_READ, "output")
    deadline = time.monotonic() + req.ready_timeout
    eof = False
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return (f"the daemon did not report readiness within {req.ready_timeout:g} s "
                        "(raise ready_timeout=SECONDS for log dirs that take longer to "
                        "recover)")
            if eof:  # the daemon closed its output: it has exited, or is about to
                try:
                    rc = proc.wait(min(remaining, 0.2))
                except subprocess.TimeoutExpired:
                    continue
                return f"the daemon exited with status {rc} before the mount was ready"
            for key, _ in sel.select(min(remaining, 1.0)):
                if key.data == "notify":
                    msg = sock.recv(4096).decode("utf-8", "replace").split("\n")
                    mainpid = next((m[8:] for m in msg if m.startswith("MAINPID=")), None)
                    if "READY=1" in msg and mainpid in (None, str(proc.pid)):
                        return _check_usable(req.mountpoint, proc,
                                             deadline - time.monotonic())
                else:
                    chunk = os.read(rfd, 65536)
                    if not chunk:
                        eof = True
                        sel.unregister(rfd)
                        continue
                    output += chunk
                    del output[:-256 * 1024]  # keep the last 256 KiB
                    if req.verbose:
                        sys.stderr.buffer.write(chunk)
                        sys.stderr.flush()
            if not eof and proc.poll() is not None:
                # exited; read what is left before reporting
                _drain(rfd, output)
                eof = True
    finally:
        sel.close()


def _check_usable(mountpoint: str, proc: subprocess.Popen, timeout: float) -> str:
    """After READY=1: stat the mount's root, which waits for the kernel's INIT exchange
    with the daemon and a first request, then check the daemon still runs and the mount is
    still there (a daemon whose INIT fails unmounts and exits right after READY). A stat
    refused with EACCES (a daemon of another user without allow_other) proves less, and is
    accepted. Returns ``"ready"`` or a description of the failure."""
    result: list = []

    def probe():
        try:
            os.stat(mountpoint)
            result.append(None)
        except OSError as exc:
            result.append(exc)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(max(timeout, 1.0))
    if not result:
        return f"the mount at {mountpoint} does not answer (stat hangs)"
    exc = result[0]
    if exc is not None and exc.errno not in (errno.EACCES, errno.EPERM):
        return f"the mount at {mountpoint} is not usable: {exc.strerror}"
    if proc.poll() is not None:
        return f"the daemon exited with status {proc.returncode} right after mounting"
    if not is_mounted(mountpoint):
        return "the daemon reported readiness, but the mount is gone"
    return "ready"


def _drain(rfd: int, output: bytearray, timeout: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    sel = selectors.DefaultSelector()
    sel.register(rfd, selectors.EVENT_READ)
    try:
        while time.monotonic() < deadline:
            if not sel.select(max(0.0, deadline - time.monotonic())):
                return
            chunk = os.read(rfd, 65536)
            if not chunk:
                return
            output += chunk
    finally:
        sel.close()


def _stop(proc: subprocess.Popen, rfd: int, output: bytearray) -> None:
    """End a daemon that did not become ready: SIGTERM (it unmounts and flushes), then
    after 20 s SIGKILL."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    _drain(rfd, output)


def _hand_over_output(rfd: int, log_fd: int | None, early: bytes) -> None:
    """Fork the process that holds the read end of the daemon's output pipe from now on:
    it writes ``early`` and everything after it to ``log_fd`` (or nowhere) and exits when
    the daemon closes the pipe (exits). It runs in a session of its own, with stdin,
    stdout and stderr on /dev/null, ignoring SIGHUP, SIGINT and SIGTERM (a terminal or
    mount(8) going away must not cut the daemon's stderr). Raises OSError (fork)."""
    pid = os.fork()
    if pid:
        return
    try:  # the child: never returns
        os.setsid()
        for signum in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_IGN)
        os.chdir("/")
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)
        if log_fd is not None and early:
            os.write(log_fd, early)
        while True:
            chunk = os.read(rfd, 65536)
            if not chunk:
                break
            if log_fd is not None:
                try:
                    os.write(log_fd, chunk)
                except OSError:
                    pass  # a full disk must not stop the draining
    finally:
        os._exit(0)


USAGE = f"""\
usage: {PROG} LOG_DIR[,LOG_DIR...] MOUNTPOINT [-sfnv] [-o OPTION[,OPTION...]]

The mount(8) helper for file system type {FSTYPE} (/etc/fstab, systemd .mount units):
starts `kafkafs mount` in the background and returns once the mount is ready.

Options: config=FILE, setuid=USER, log_file=FILE, ready_timeout=SECONDS (default
{DEFAULT_READY_TIMEOUT:g}), ro; kafkafs's own (parse.key, key.separator, batch.size,
read_ahead_kb, isolation.level, read_only) and FUSE options are passed to the daemon;
mount(8)'s generic options (rw, defaults, noauto, user, _netdev, nofail, x-*, comment=,
...) are dropped.
"""


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``mount.fuse.kafkafs`` (mount(8)'s "External helpers" convention, as
    mount.fuse3 follows it). ``argv`` excludes the program name (default ``sys.argv[1:]``).
    Returns the exit status: 0 mounted (or ``-f``, or ``--help``), 1 bad invocation, 2
    system error, 32 mount failure."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        req = parse_args(argv)
    except UsageError as exc:
        if str(exc) == "help":
            print(USAGE, end="")
            return 0
        _say(f"{exc} (see {PROG} --help)")
        return EX_USAGE
    if req.fake:
        if req.verbose:
            _say("fake mount (-f): would run " + " ".join(daemon_command(req)))
        return 0
    return start_daemon(req)


if __name__ == "__main__":
    sys.exit(main())
