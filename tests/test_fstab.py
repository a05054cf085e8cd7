"""``mount.fuse.kafkafs``, the mount(8) helper behind an ``/etc/fstab`` line of type
``fuse.kafkafs`` (and the systemd ``.mount`` unit generated from it).

* The helper called directly, as mount(8) calls it (``SOURCE MOUNTPOINT [-sfnv] -o OPTS``):
  it returns only once the mount is usable, leaves the daemon running in a session of its
  own without holding the caller's pipes, and a plain ``umount`` then ends the daemon with
  status 0 and a clean shutdown. kafkafs's options and ``config=`` reach the daemon,
  mount(8)'s generic options do not.
* The real thing: ``mount -T FSTAB MOUNTPOINT`` with the helper reachable as
  ``/sbin/mount.fuse.kafkafs`` (a symlink the test makes and removes; root only), and the
  exact command systemd runs for the unit systemd-fstab-generator makes of the line.
* Failures: a log dir that cannot be used, an option FUSE refuses, a lock held by another
  daemon, a readiness timeout: exit 32 with the daemon's own message on stderr, nothing
  mounted, no process left. ``-f`` (fake) does nothing.

The helper's daemon is not a child of the test (the helper exits first), so the test
process makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER) to adopt it and read
its exit status.
"""

from __future__ import annotations

import ctypes
import errno
import glob
import os
import pwd
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT, fuse_available, sh, wait_for

from kafkafs.cli import mount_helper

pytestmark = [pytest.mark.mount, pytest.mark.timeout(60)]

SCRIPT = os.path.join(os.path.dirname(sys.executable), "mount.fuse.kafkafs")
HELPER = [SCRIPT] if os.access(SCRIPT, os.X_OK) else \
    [sys.executable, "-m", "kafkafs.cli.mount_helper"]
SBIN_HELPER = "/sbin/mount.fuse.kafkafs"
FSTAB_GENERATOR = "/usr/lib/systemd/system-generators/systemd-fstab-generator"

PR_SET_CHILD_SUBREAPER = 36


def is_mounted(path) -> bool:
    from kafkafs.cli.mount import is_mounted as mounted

    return mounted(str(path))


def mount_options(path) -> list[str]:
    with open("/proc/self/mounts") as f:
        for line in f:
            fields = line.split()
            if fields[1] == str(path):
                return fields[3].split(",")
    return []


def processes_mentioning(path) -> list[int]:
    """Pids of live processes with ``path`` (a test's unique mount point) as one of their
    arguments: a daemon, or the process that keeps its log pipe."""
    out = []
    for d in glob.glob("/proc/[0-9]*"):
        try:
            with open(f"{d}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
            with open(f"{d}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if str(path).encode() in args and state != "Z" and int(d[6:]) != os.getpid():
            out.append(int(d[6:]))
    return out


def is_daemon(pid) -> bool:
    return cmdline(pid)[1:4] == ["-m", "kafkafs", "mount"]


def cmdline(pid) -> list[str]:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().decode().split("\0")[:-1]


def own_children() -> set[int]:
    """Pids whose parent is this process (adopted orphans included)."""
    pids = set()
    me = os.getpid()
    for d in glob.glob("/proc/[0-9]*"):
        try:
            with open(f"{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == me:
            pids.add(int(d[6:]))
    return pids


class Helper:
    """Runs ``mount.fuse.kafkafs`` as mount(8) would, on ``tmp_path/logs`` and
    ``tmp_path/mnt``; the test process adopts what the helper leaves running, so the
    daemon's exit status can be read, and teardown leaves no mount and no process."""

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.mnt = tmp_path / "mnt"
        self.logs = tmp_path / "logs"
        self.mnt.mkdir()
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.children_before = own_children()
        assert self.libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0

    def run(self, *args, source=None, timeout=30) -> subprocess.CompletedProcess:
        """Run the helper (``SOURCE MOUNTPOINT ARGS``) with its stdout and stderr on pipes,
        as text; fails the test if it does not return within ``timeout`` seconds (a
        daemon holding the pipes would keep it from returning)."""
        source = str(self.logs) if source is None else source
        return subprocess.run([*HELPER, source, str(self.mnt), *args], capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL, cwd=ROOT)

    def daemon_pid(self) -> int:
        return int(os.getxattr(self.mnt, "user.kafkafs.pid"))

    def wait_exit(self, pid, timeout=30.0) -> int:
        """The exit status of adopted process ``pid`` (it must end within ``timeout``)."""
        deadline = time.monotonic() + timeout
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
            if time.monotonic() > deadline:
                raise AssertionError(f"process {pid} still running after {timeout} s")
            time.sleep(0.05)

    def stray(self) -> list[int]:
        """Processes left over from this test (their command line names the mount point)."""
        return processes_mentioning(self.mnt)

    def cleanup(self):
        if is_mounted(self.mnt):
            subprocess.run(["fusermount3", "-uz", str(self.mnt)], capture_output=True)
        if not wait_for(lambda: not self.stray(), timeout=10):
            for pid in self.stray():
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            adopted = own_children() - self.children_before
            for pid in adopted:
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass
            if not own_children() - self.children_before:
                break
            time.sleep(0.05)
        self.libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


@pytest.fixture
def helper(tmp_path):
    """A Helper for the test's mount point; FUSE needed."""
    if not fuse_available():
        pytest.skip("FUSE is not available")
    h = Helper(tmp_path)
    yield h
    h.cleanup()


@pytest.fixture
def sbin_helper():
    """``/sbin/mount.fuse.kafkafs`` pointing at this checkout's console script, for the
    length of the test (root only; an existing helper that is not ours is left alone)."""
    if os.geteuid() != 0:
        pytest.skip("needs root: mount(8) runs helpers from /sbin")
    if HELPER != [SCRIPT]:
        pytest.skip("the mount.fuse.kafkafs console script is not installed "
                    "(pip install -e .)")
    made = False
    if os.path.lexists(SBIN_HELPER):
        if os.path.realpath(SBIN_HELPER) != os.path.realpath(SCRIPT):
            pytest.skip(f"{SBIN_HELPER} exists and is another installation's")
    else:
        os.symlink(SCRIPT, SBIN_HELPER)
        made = True
    yield SBIN_HELPER
    if made:
        os.unlink(SBIN_HELPER)


# --- the helper called directly, as mount(8) calls it ---------------------------------

def test_helper_returns_once_usable_and_daemon_outlives_it(helper):
    """Exit 0 means mounted and usable: with no waiting at all, mkdir, ``echo >> append``
    and ``cat messages`` work. The helper's stdout/stderr pipes are closed when it returns
    (subprocess.run would hang otherwise); the daemon keeps running in a session of its
    own, stdin on /dev/null, its log going to a pipe the helper no longer holds. mount(8)'s
    generic options (rw, noauto, _netdev, nofail, x-systemd.*, comment=) never reach the
    daemon. A plain ``umount`` ends it with status 0, a clean shutdown marker, and no
    process left behind."""
    t0 = time.monotonic()
    r = helper.run("-o", "rw,noauto,_netdev,nofail,x-systemd.requires=foo,comment=x")
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - t0 < 15
    p = helper.mnt / "t" / "0"
    os.mkdir(helper.mnt / "t")
    assert sh(f"echo hello >> {p}/append && echo world >> {p}/append").returncode == 0
    assert sh(f"cat {p}/messages").stdout == b"hello\nworld\n"

    pid = helper.daemon_pid()
    assert os.getsid(pid) == pid  # a session of its own: no terminal, no job control
    assert os.readlink(f"/proc/{pid}/fd/0") == "/dev/null"
    assert os.readlink(f"/proc/{pid}/fd/2").startswith("pipe:")
    assert os.readlink(f"/proc/{pid}/cwd") == "/"
    args = cmdline(pid)
    assert args[1:] == ["-m", "kafkafs", "mount", str(helper.mnt), "--log-dirs",
                        str(helper.logs)]
    assert r.stdout == "" and r.stderr == ""  # quiet without -v

    assert subprocess.run(["umount", str(helper.mnt)], capture_output=True).returncode == 0
    assert helper.wait_exit(pid) == 0
    assert not is_mounted(helper.mnt)
    assert os.path.exists(helper.logs / ".kafka_cleanshutdown")
    assert wait_for(lambda: not helper.stray(), timeout=5), helper.stray()


def test_kafkafs_options_and_config_reach_the_daemon(helper, tmp_path):
    """``parse.key=true,key.separator=:`` reach the daemon (keys split off), ``config=``
    becomes ``--config`` (``log.segment.bytes=200`` rolls a segment every two records),
    SOURCE overrides the file's ``log.dirs``, the restrictive ``noexec`` reaches FUSE, and
    ``-v`` shows the command, what was dropped and the daemon's start-up log."""
    cfg = tmp_path / "server.properties"
    cfg.write_text(f"log.dirs={tmp_path / 'elsewhere'}\nlog.segment.bytes=200\n")
    r = helper.run("-v", "-o", f"parse.key=true,key.separator=:,config={cfg},noexec,"
                               "defaults,_netdev")
    assert r.returncode == 0, r.stderr
    assert "running " in r.stderr and "(dropped: defaults,_netdev)" in r.stderr
    assert f"Mounted {helper.logs} at {helper.mnt}" in r.stderr
    assert "noexec" in mount_options(helper.mnt)
    args = cmdline(helper.daemon_pid())
    assert args[args.index("--config") + 1] == str(cfg)
    assert "_netdev" not in " ".join(args) and "defaults" not in args

    os.mkdir(helper.mnt / "c")
    p = helper.mnt / "c" / "0"
    fd = os.open(p / "append", os.O_WRONLY | os.O_APPEND)
    try:
        for i in range(6):  # one write, one batch each
            os.write(fd, b"k%d:value %d\n" % (i, i))
    finally:
        os.close(fd)
    assert open(p / "messages", "rb").read() == b"".join(b"value %d\n" % i for i in range(6))
    assert os.getxattr(p / "offset" / "3", "user.kafka.key") == b"k3"
    segments = sorted(n for n in os.listdir(p / "segments") if n.endswith(".log"))
    assert len(segments) >= 3, segments
    assert not os.path.exists(tmp_path / "elsewhere")
    pid = helper.daemon_pid()
    assert subprocess.run(["umount", str(helper.mnt)]).returncode == 0
    assert helper.wait_exit(pid) == 0


def test_ro_is_a_read_only_mount(helper):
    """``ro`` (which mount(8) passes for an fstab ``ro``) becomes ``--read-only``: the mount
    is read-only for the kernel and for kafkafs, and the log dir gets no lock file."""
    subprocess.run([sys.executable, "-m", "kafkafs", "produce", "--log-dirs",
                    str(helper.logs), "--topic", "t"], input=b"a\nb\n", check=True,
                   capture_output=True, cwd=ROOT)
    if os.path.exists(helper.logs / ".lock"):  # the producer's; a read-only daemon takes none
        os.unlink(helper.logs / ".lock")
    r = helper.run("-o", "ro")
    assert r.returncode == 0, r.stderr
    assert "ro" in mount_options(helper.mnt)
    assert "--read-only" in cmdline(helper.daemon_pid())
    assert open(helper.mnt / "t" / "0" / "messages", "rb").read() == b"a\nb\n"
    with pytest.raises(OSError) as e:
        os.mkdir(helper.mnt / "new")
    assert e.value.errno == errno.EROFS
    assert not os.path.exists(helper.logs / ".lock")
    pid = helper.daemon_pid()
    assert subprocess.run(["fusermount3", "-u", str(helper.mnt)]).returncode == 0
    assert helper.wait_exit(pid) == 0


def test_log_file_keeps_the_daemon_log(helper, tmp_path):
    """``log_file=FILE`` appends the daemon's whole log there, start-up and shutdown
    (without it the log is dropped once the mount is up)."""
    log = tmp_path / "kafkafs.log"
    r = helper.run("-o", f"log_file={log}")
    assert r.returncode == 0, r.stderr
    pid = helper.daemon_pid()
    assert subprocess.run(["umount", str(helper.mnt)]).returncode == 0
    assert helper.wait_exit(pid) == 0
    assert wait_for(lambda: "logs flushed and checkpointed" in log.read_text(), timeout=5)
    text = log.read_text()
    assert f"Mounted {helper.logs} at {helper.mnt}" in text


def test_stale_mount_of_a_crashed_daemon_is_replaced(helper):
    """After the daemon was SIGKILLed (its mount left behind: "Transport endpoint is not
    connected"), the next mount detaches the stale mount, as the service's ExecStartPre
    does, and mounts afresh; the data written before the crash is there."""
    assert helper.run().returncode == 0
    os.mkdir(helper.mnt / "t")
    assert sh(f"echo before >> {helper.mnt}/t/0/append").returncode == 0
    pid = helper.daemon_pid()
    os.kill(pid, signal.SIGKILL)
    assert helper.wait_exit(pid) == -signal.SIGKILL
    with pytest.raises(OSError) as e:
        os.stat(helper.mnt)
    assert e.value.errno == errno.ENOTCONN
    r = helper.run()
    assert r.returncode == 0, r.stderr
    assert "detaching the stale kafkafs mount" in r.stderr
    assert sh(f"cat {helper.mnt}/t/0/messages").stdout == b"before\n"
    assert mount_options(helper.mnt)  # one kafkafs mount, not two stacked
    with open("/proc/self/mounts") as f:
        assert [line.split()[1] for line in f].count(str(helper.mnt)) == 1
    pid = helper.daemon_pid()
    assert subprocess.run(["umount", str(helper.mnt)], check=False).returncode == 0
    assert helper.wait_exit(pid) == 0


def test_sloppy_drops_unknown_options(helper):
    """With ``-s`` an option neither kafkafs nor libfuse knows is dropped instead of
    failing the mount; known ones still arrive."""
    r = helper.run("-s", "-o", "no.such.option=1,parse.key=true")
    assert r.returncode == 0, r.stderr
    args = cmdline(helper.daemon_pid())
    assert "parse.key=true" in args and "no.such.option=1" not in " ".join(args)


def nobody_can_run_kafkafs() -> bool:
    """Whether user nobody can run this Python with kafkafs and open /dev/fuse (not where
    the interpreter lives under /root, or /dev/fuse is root's only)."""
    try:
        r = subprocess.run(
            [sys.executable, "-c", "import os, kafkafs, pyfuse3; "
             "os.close(os.open('/dev/fuse', os.O_RDWR))"],
            user="nobody", group=pwd.getpwnam("nobody").pw_gid, extra_groups=[], cwd="/",
            capture_output=True,
            timeout=30, env=dict(os.environ, PYTHONPATH=ROOT))
    except (OSError, KeyError, subprocess.SubprocessError):
        return False
    return r.returncode == 0


def test_setuid_runs_the_daemon_as_that_user():
    """``setuid=USER`` (mount.fuse3's option) runs the daemon as USER: it mounts through
    fusermount3, its log-dir files belong to USER, and readiness still reaches the
    helper (whose notify socket USER may use). Needs a machine where nobody can run the
    interpreter and open /dev/fuse."""
    if os.geteuid() != 0 or not fuse_available():
        pytest.skip("needs root and FUSE")
    if not nobody_can_run_kafkafs():
        pytest.skip("user nobody cannot run this interpreter or open /dev/fuse here")
    import pathlib
    import tempfile

    base = pathlib.Path(tempfile.mkdtemp(prefix="kafkafs-setuid-"))
    base.chmod(0o755)
    h = Helper(base)
    try:
        h.logs.mkdir()
        nobody = pwd.getpwnam("nobody")
        for d in (h.logs, h.mnt):
            os.chown(d, nobody.pw_uid, nobody.pw_gid)
        r = h.run("-o", "setuid=nobody")
        assert r.returncode == 0, r.stderr
        pid = int(subprocess.run(["runuser", "-u", "nobody", "--", "getfattr", "--only-values",
                                  "-n", "user.kafkafs.pid", str(h.mnt)], capture_output=True,
                                 text=True, check=True).stdout)
        assert os.stat(f"/proc/{pid}").st_uid == nobody.pw_uid
        assert os.stat(h.logs / "meta.properties").st_uid == nobody.pw_uid
        assert subprocess.run(["umount", str(h.mnt)], check=False).returncode == 0
        assert h.wait_exit(pid) == 0
    finally:
        h.cleanup()
        shutil.rmtree(base, ignore_errors=True)


# --- mount(8) and systemd ----------------------------------------------------------------

def fstab_line(helper, cfg) -> str:
    """The line docs/systemd.md gives, with the test's paths."""
    return (f"{helper.logs}  {helper.mnt}  fuse.kafkafs  config={cfg},allow_other,nofail,"
            f"x-systemd.requires-mounts-for={helper.logs}  0 0\n")


def test_mount_T_fstab_line(helper, sbin_helper, tmp_path):
    """``mount -T FSTAB MOUNTPOINT`` (util-linux --fstab) runs /sbin/mount.fuse.kafkafs for
    the documented ``fuse.kafkafs`` line and returns once the mount works; the options of
    the config file (``kafkafs.mount.options``) and of the line (``allow_other``) apply.
    ``mount -a`` run again starts no second daemon and succeeds (the helper sees the same
    log dirs mounted). ``umount`` ends the daemon cleanly."""
    cfg = tmp_path / "server.properties"
    cfg.write_text(f"log.dirs={tmp_path / 'not-these'}\n"
                   "kafkafs.mount.options=parse.key=true,key.separator=:\n")
    fstab = tmp_path / "fstab"
    fstab.write_text("# a test fstab\n" + fstab_line(helper, cfg))
    r = subprocess.run(["mount", "-T", str(fstab), str(helper.mnt)], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert "allow_other" in mount_options(helper.mnt)
    os.mkdir(helper.mnt / "t")
    p = helper.mnt / "t" / "0"
    assert sh(f"echo 'k:v' >> {p}/append").returncode == 0
    assert os.getxattr(p / "offset" / "0", "user.kafka.key") == b"k"
    assert os.path.isdir(helper.logs / "t-0")
    assert not os.path.exists(tmp_path / "not-these")
    pid = helper.daemon_pid()
    for _ in range(2):
        r = subprocess.run(["mount", "-a", "-v", "-T", str(fstab)], capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        assert "already mounted" in r.stdout + r.stderr
    assert helper.daemon_pid() == pid
    assert [q for q in helper.stray() if is_daemon(q)] == [pid]
    assert subprocess.run(["umount", str(helper.mnt)]).returncode == 0
    assert helper.wait_exit(pid) == 0
    assert os.path.exists(helper.logs / ".kafka_cleanshutdown")
    assert wait_for(lambda: not helper.stray(), timeout=5)


def test_systemd_mount_unit_from_fstab(helper, sbin_helper, tmp_path):
    """systemd-fstab-generator turns the documented line into a .mount unit that
    ``systemd-analyze verify`` accepts; the command systemd runs to start such a unit
    (``mount WHAT WHERE -t TYPE -o OPTIONS`` without nofail/noauto/auto, systemd 252's
    mount_enter_mounting) mounts, and ``umount -c WHERE`` (its stop command) ends the
    daemon with status 0. PID 1 here is not systemd, so the unit itself is not started."""
    if not os.access(FSTAB_GENERATOR, os.X_OK):
        pytest.skip("systemd-fstab-generator is not installed")
    cfg = tmp_path / "server.properties"
    cfg.write_text("log.segment.bytes=1048576\n")
    fstab = tmp_path / "fstab"
    fstab.write_text(fstab_line(helper, cfg))
    out = tmp_path / "generator"
    out.mkdir()
    subprocess.run([FSTAB_GENERATOR, out, out, out], env=dict(os.environ,
                   SYSTEMD_FSTAB=str(fstab)), check=True, capture_output=True)
    units = [u for u in os.listdir(out) if u.endswith(".mount")]
    assert len(units) == 1, os.listdir(out)
    unit = out / units[0]
    text = unit.read_text()
    assert f"RequiresMountsFor={helper.logs}" in text
    assert os.path.islink(out / "local-fs.target.wants" / units[0])  # wanted, not required
    analyze = shutil.which("systemd-analyze")
    if analyze:
        r = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True)
        assert r.returncode == 0 and r.stderr == "", r.stderr
    keys = dict(line.split("=", 1) for line in text.splitlines() if "=" in line
                and not line.startswith("#"))
    opts = ",".join(o for o in keys["Options"].split(",") if o not in ("nofail", "noauto",
                                                                        "auto"))
    r = subprocess.run(["mount", keys["What"], keys["Where"], "-t", keys["Type"], "-o", opts],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    os.mkdir(helper.mnt / "t")
    assert sh(f"echo x >> {helper.mnt}/t/0/append && cat {helper.mnt}/t/0/messages").stdout \
        == b"x\n"
    pid = helper.daemon_pid()
    assert subprocess.run(["umount", "-c", keys["Where"]]).returncode == 0
    assert helper.wait_exit(pid) == 0


# --- failures --------------------------------------------------------------------------

def notify_dirs() -> set[str]:
    return set(glob.glob("/run/kafkafs-mount-*")) | set(glob.glob("/tmp/kafkafs-mount-*"))


def assert_nothing_left(helper, dirs_before):
    assert not is_mounted(helper.mnt)
    assert wait_for(lambda: not helper.stray(), timeout=5), helper.stray()
    assert notify_dirs() == dirs_before


def test_unusable_log_dir_fails_with_the_daemons_error(helper, tmp_path):
    """A regular file as SOURCE: exit 32 (mount(8)'s "mount failure") once the daemon has
    exited, its error on stderr, nothing mounted, no process and no socket left."""
    bad = tmp_path / "not-a-dir"
    bad.write_text("x")
    before = notify_dirs()
    r = helper.run(source=str(bad))
    assert r.returncode == 32
    assert "exited with status 1 before the mount was ready" in r.stderr
    assert f"error: [Errno 20] log dir is not a directory: '{bad}'" in r.stderr
    assert "Traceback" not in r.stderr
    assert_nothing_left(helper, before)


def test_option_fuse_refuses_fails_cleanly(helper):
    """An option FUSE does not know fails the mount (without -s): exit 32, the daemon's
    complaint naming it on stderr (made before anything is mounted or written), nothing
    mounted or running."""
    before = notify_dirs()
    r = helper.run("-o", "no.such.option=1")
    assert r.returncode == 32
    assert "error: unknown mount option 'no.such.option=1'" in r.stderr
    assert_nothing_left(helper, before)


def test_second_mount_of_the_same_log_dirs_fails_on_the_lock(helper, tmp_path):
    """A second mount of log dirs a daemon already serves fails on the log-dir lock, with
    the daemon's lock error; the first mount is untouched."""
    assert helper.run().returncode == 0
    pid = helper.daemon_pid()
    other = tmp_path / "mnt2"
    other.mkdir()
    r = subprocess.run([*HELPER, str(helper.logs), str(other)], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 32
    assert "Failed to acquire lock" in r.stderr
    assert not is_mounted(other) and processes_mentioning(other) == []
    assert helper.daemon_pid() == pid and os.listdir(helper.mnt) == []
    assert subprocess.run(["umount", str(helper.mnt)]).returncode == 0
    assert helper.wait_exit(pid) == 0


def test_readiness_timeout_stops_the_daemon(helper):
    """``ready_timeout=`` shorter than the daemon's start: exit 32 with the reason, and the
    daemon is stopped (nothing mounted, no process)."""
    before = notify_dirs()
    r = helper.run("-o", "ready_timeout=0.05")
    assert r.returncode == 32
    assert "did not report readiness within 0.05 s" in r.stderr
    assert_nothing_left(helper, before)


@pytest.mark.parametrize("args, message", [
    ([], "expected SOURCE and MOUNTPOINT"),
    (["/l", "/m", "-x"], "unknown flag -x"),
    (["/l", "/m", "-o"], "option -o needs a value"),
    ([",", "/m"], "no log dir in SOURCE"),
    (["/l", "/m", "-o", "ready_timeout=soon"], "ready_timeout must be a number"),
    (["/l", "/m", "-o", "config="], "option config needs a value"),
    (["/l", "/m", "-t", "fuse.sshfs"], "is not fuse.kafkafs"),
    (["/l", "/m", "-o", "setuid=no-such-user-here"], "no such user"),
])
def test_bad_invocations_exit_1(args, message):
    """Wrong arguments exit 1 (mount(8)'s "incorrect invocation") with a one-line reason,
    before anything is started."""
    r = subprocess.run([*HELPER, *args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert message in r.stderr


def test_fake_does_nothing(tmp_path):
    """``-f`` (mount -f, "fake") does everything but the mount: exit 0, no daemon, the log
    dir not even created."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run([*HELPER, str(tmp_path / "logs"), str(mnt), "-f", "-v", "-o",
                        "parse.key=true"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert "fake mount" in r.stderr
    assert not is_mounted(mnt)
    assert not os.path.exists(tmp_path / "logs")
    assert processes_mentioning(mnt) == []


# --- option sorting (no mount) -----------------------------------------------------------

def test_options_are_sorted_as_mount_fuse3_does():
    """What mount(8) passes (flags anywhere, several -o, quoted values) is split into the
    daemon's -o options, the helper's own and the dropped generic ones."""
    req = mount_helper.parse_args([
        "/a,/b", "/m", "-nv", "-o", "rw,nosuid,nodev,noexec,config=/etc/k.properties",
        "-o", ('parse.key=true,key.separator=":",allow_other,_netdev,nofail,user,'
              "x-systemd.requires=foo,comment=bar,ro,ready_timeout=600,log_file=/var/log/k"),
        "-t", "fuse.kafkafs"])
    assert req.log_dirs == ["/a", "/b"] and req.mountpoint == "/m"
    assert req.config == "/etc/k.properties" and req.read_only
    assert req.ready_timeout == 600 and req.log_file == "/var/log/k"
    assert req.verbose and not req.fake and not req.sloppy
    assert req.options == ["nosuid", "nodev", "noexec", "parse.key=true", "key.separator=:",
                           "allow_other"]
    assert req.dropped == ["rw", "_netdev", "nofail", "user", "x-systemd.requires=foo",
                           "comment=bar"]
    assert mount_helper.daemon_command(req)[1:] == [
        "-m", "kafkafs", "mount", "/m", "--log-dirs", "/a,/b", "--config",
        "/etc/k.properties", "--read-only", "-o", "nosuid", "-o", "nodev", "-o", "noexec",
        "-o", "parse.key=true", "-o", "key.separator=:", "-o", "allow_other"]
    req = mount_helper.parse_args(["/l", "/m", "-o", 'key.separator=",",parse.key'])
    assert req.options == ["key.separator=\\x2c", "parse.key"]  # the daemon splits at commas
    req = mount_helper.parse_args(["-oconfig=c", "--", "logs", "m"])
    assert req.log_dirs == [os.path.abspath("logs")] and req.mountpoint == os.path.abspath("m")
    assert req.config == os.path.abspath("c") and req.options == []
