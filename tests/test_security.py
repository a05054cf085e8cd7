"""Who may see and change what, and bad input that must lose nothing: a private mount,
allow_other with kernel-enforced modes, names that must not reach outside the log dirs,
an endless line, garbage appended to a segment by hand, a full disk."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest
from conftest import ROOT, Mount, fuse_available, kafkafs

pytestmark = pytest.mark.skipif(not fuse_available(), reason="FUSE is not available")

NOBODY = 65534


def as_nobody(cmd: str):
    return subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
                           "--clear-groups", "sh", "-c", cmd], capture_output=True, timeout=30)


@pytest.fixture
def public_tmp():
    """A directory every user may traverse (pytest's tmp dirs are private to root, which
    would make the permission tests pass for the wrong reason)."""
    d = tempfile.mkdtemp(prefix="kafkafs-sec-", dir="/tmp")
    os.chmod(d, 0o755)
    yield d
    for sub in ("mnt",):
        p = os.path.join(d, sub)
        if os.path.ismount(p):
            subprocess.run(["fusermount3", "-uz", p])
    shutil.rmtree(d, ignore_errors=True)


class _P:
    def __init__(self, d):
        self.d = d

    def __truediv__(self, other):
        return os.path.join(self.d, other)


def _mount(public_tmp, options=()):
    m = Mount(_P(public_tmp), options=options)
    m.mnt = os.path.join(public_tmp, "mnt")
    os.makedirs(m.mnt, exist_ok=True)
    os.chmod(m.mnt, 0o755)
    m.log_dirs = [os.path.join(public_tmp, "logs")]
    m.stderr_path = os.path.join(public_tmp, "daemon.log")
    return m.start()


def test_mount_is_private_without_allow_other(public_tmp):
    assert as_nobody(f"ls {public_tmp}").returncode == 0  # the parent is reachable
    m = _mount(public_tmp)
    try:
        os.mkdir(m.path("t"))
        r = as_nobody(f"ls {m.mnt}")
        assert r.returncode != 0 and b"Permission denied" in r.stderr
    finally:
        m.stop()


def test_allow_other_enforces_modes(public_tmp):
    m = _mount(public_tmp, options=["allow_other"])
    try:
        os.mkdir(m.path("t"))
        with open(m.path("t", "0", "append"), "ab") as f:
            f.write(b"secret-free line\n")
        # others read ...
        r = as_nobody(f"cat {m.mnt}/t/0/messages")
        assert r.returncode == 0 and r.stdout == b"secret-free line\n"
        assert as_nobody(f"cat {m.mnt}/t/0/offset/0").stdout == b"secret-free line"
        # ... but change nothing: no append, no topic, no config, no delete
        r = as_nobody(f"echo intruder >> {m.mnt}/t/0/append")
        assert r.returncode != 0 and b"Permission denied" in r.stderr
        # append reads as an empty file, for them too: a recursive grep passes it quietly
        assert as_nobody(f"cat {m.mnt}/t/0/append").returncode == 0
        r = as_nobody(f"grep -r secret {m.mnt}/t")
        assert (r.returncode, r.stderr) == (0, b""), r.stderr
        assert r.stdout == f"{m.mnt}/t/0/messages:secret-free line\n".encode()
        assert as_nobody(f"mkdir {m.mnt}/evil").returncode != 0
        assert as_nobody(f"echo retention.ms=1 > {m.mnt}/t/config").returncode != 0
        assert as_nobody(f"rmdir {m.mnt}/t").returncode != 0
        assert open(m.path("t", "0", "messages"), "rb").read() == b"secret-free line\n"
        assert "t" in os.listdir(m.mnt)
        modes = {n: oct(os.stat(m.path("t", "0", n)).st_mode & 0o777)
                 for n in ("append", "messages", "records.jsonl")}
        assert modes == {"append": "0o644", "messages": "0o444", "records.jsonl": "0o444"}
    finally:
        m.stop()


def test_symlinks_in_log_dirs_are_not_followed(mount, tmp_path):
    os.mkdir(mount.path("t"))
    part = os.path.join(mount.log_dirs[0], "t-0")
    os.symlink("/etc/passwd", os.path.join(part, "00000000000000000099.log"))
    os.symlink("/etc/hostname", os.path.join(part, "leak.txt"))
    os.symlink("/etc", os.path.join(mount.log_dirs[0], "etc-0"))
    time.sleep(2.5)  # let the watcher look at the new names
    seg = os.listdir(mount.path("t", "0", "segments"))
    assert "00000000000000000099.log" not in seg and "leak.txt" not in seg
    assert not os.path.exists(mount.path("t", "0", "segments", "leak.txt"))
    assert "etc" not in os.listdir(mount.mnt)
    assert not os.path.exists(os.path.join(mount.mnt, "t", "0", "offset", "%2e%2e"))
    # dot-dot is the kernel's business and stays inside the tree
    assert os.path.realpath(os.path.join(mount.mnt, "t", "0", "offset", "..", "..")) == \
        os.path.realpath(mount.path("t"))


def test_endless_line_is_refused_not_buffered(mount):
    os.mkdir(mount.path("t"))
    fd = os.open(mount.path("t", "0", "append"), os.O_WRONLY | os.O_APPEND)
    chunk = b"x" * (1024 * 1024)
    written = 0
    with pytest.raises(OSError) as e:
        for _ in range(64):  # 64 MB without a newline
            written += os.write(fd, chunk)
    os.close(fd)
    assert e.value.errno == errno.EMSGSIZE
    assert written <= 2 * 1024 * 1024  # refused at message.max.bytes (1 MiB), not later
    pid = mount.proc.pid
    rss_mb = int(open(f"/proc/{pid}/status").read().split("VmHWM:")[1].split()[0]) / 1024
    assert rss_mb < 150
    assert open(mount.path("t", "0", "messages"), "rb").read() == b""


def test_garbage_appended_to_a_segment_by_hand(mount_factory, tmp_path):
    m = mount_factory()
    os.mkdir(m.path("t"))
    subprocess.run(f"seq 1 1000 >> {m.path('t', '0', 'append')}", shell=True, check=True)
    assert m.umount() == 0
    seg = os.path.join(m.log_dirs[0], "t-0", "00000000000000000000.log")
    good = os.path.getsize(seg)
    with open(seg, "ab") as f:
        f.write(b"\x00" * 8 + b"\x00\x00\x00\x50" + os.urandom(200))  # a plausible header
    m.start()
    assert open(m.path("t", "0", "messages"), "rb").read() == \
        b"".join(b"%d\n" % i for i in range(1, 1001))
    assert os.path.getsize(seg) == good
    subprocess.run(f"echo after >> {m.path('t', '0', 'append')}", shell=True, check=True)
    assert open(m.path("t", "0", "offset", "1000"), "rb").read() == b"after"
    m.umount()
    r = kafkafs("dump", "--files", seg, "--deep-iteration")
    assert b"isvalid: true" in r.stdout and b"isvalid: false" not in r.stdout


def test_full_disk_reaches_the_writer_and_loses_nothing(small_disk_mount):
    m = small_disk_mount
    m.start()
    os.mkdir(m.path("t"))
    fd = os.open(m.path("t", "0", "append"), os.O_WRONLY | os.O_APPEND)
    acked = 0
    with pytest.raises(OSError) as e:
        for i in range(100000):
            os.write(fd, b"record-%06d-" % i + b"y" * 100 + b"\n")
            acked = i + 1
    assert e.value.errno == errno.ENOSPC
    os.close(fd)
    assert acked > 1000
    data = open(m.path("t", "0", "messages"), "rb").read().splitlines()
    assert len(data) == acked
    assert all(line.startswith(b"record-%06d-" % i) for i, line in enumerate(data))
    # no room for the checkpoints: the daemon says so and exits 1; nothing is lost
    assert m.umount() == 1
    assert "shutdown was not clean" in m.log()
    m.start()
    assert len(open(m.path("t", "0", "messages"), "rb").read().splitlines()) == acked


def test_corrupt_batch_is_eio_naming_file_and_position(mount_factory):
    m = mount_factory(extra_args=["--override", "log.segment.bytes=4000"])
    os.mkdir(m.path("t"))
    for i in range(60):
        subprocess.run(f"echo 'line-{i:03d}-' >> {m.path('t', '0', 'append')}", shell=True,
                       check=True)
    assert m.umount() == 0
    seg = os.path.join(m.log_dirs[0], "t-0", "00000000000000000000.log")
    data = bytearray(open(seg, "rb").read())
    pos = data.index(b"line-005-")
    data[pos + 5] ^= 0x01  # a bit flip inside a sealed segment: its CRC no longer matches
    open(seg, "wb").write(bytes(data))
    m.start()
    p = m.path("t", "0")
    with pytest.raises(OSError) as e:
        open(f"{p}/offset/5", "rb").read()
    assert e.value.errno == errno.EIO
    with pytest.raises(OSError) as e:
        open(f"{p}/messages", "rb").read()
    assert e.value.errno == errno.EIO
    assert open(f"{p}/offset/59", "rb").read() == b"line-059-"  # the rest stays readable
    assert "00000000000000000000.log" in m.log() and "crc" in m.log()
    r = kafkafs("consume", "--log-dirs", m.log_dirs[0], "--topic", "t", "--from-beginning",
                "--timeout-ms", "200", check=False)
    assert r.returncode == 1 and b"00000000000000000000.log: position" in r.stderr
    assert b"\nerror: " in r.stderr and b"Traceback" not in r.stderr


def _mounted(mnt: str) -> bool:
    """Whether ``mnt`` is a mount point, from mountinfo: a mount private to another user
    cannot even be stat'ed by root."""
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == mnt for line in f)


@pytest.fixture
def fuse_for_users():
    """/dev/fuse open to every user, as udev makes it on a normal machine (this container
    leaves it 0600); the original mode comes back afterwards."""
    mode = os.stat("/dev/fuse").st_mode & 0o777
    os.chmod("/dev/fuse", 0o666)
    yield
    os.chmod("/dev/fuse", mode)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv(1)")
@pytest.mark.parametrize("how", ["ambient CAP_SYS_ADMIN", "setuid fusermount3"])
def test_daemon_runs_as_a_dedicated_unprivileged_user(public_tmp, fuse_for_users, how):
    """The daemon as the systemd unit runs it: a user of its own (User=kafkafs), mounting
    either with the ambient CAP_SYS_ADMIN the unit grants or, without any capability,
    through the setuid fusermount3 (docs/systemd.md). It owns what it writes, its mount is
    private to it (root gets EACCES without allow_other), and it unmounts and exits 0."""
    py = sys.executable
    nobody = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    if subprocess.run([*nobody, py, "-c", "import kafkafs, pyfuse3"], cwd=ROOT,
                      capture_output=True).returncode != 0:
        pytest.skip("the checkout is not readable by other users")
    mnt, logs = os.path.join(public_tmp, "mnt"), os.path.join(public_tmp, "logs")
    os.makedirs(mnt)
    os.makedirs(logs)
    os.chown(mnt, NOBODY, NOBODY)
    os.chown(logs, NOBODY, NOBODY)
    caps = ["--inh-caps=+sys_admin", "--ambient-caps=+sys_admin"] \
        if how.startswith("ambient") else []
    err = open(os.path.join(public_tmp, "daemon.log"), "wb")
    proc = subprocess.Popen([*nobody, *caps, py, "-m", "kafkafs", "mount", mnt,
                             "--log-dirs", logs], stdout=err, stderr=err, cwd=ROOT)
    try:
        deadline = time.monotonic() + 20
        while not _mounted(mnt):
            assert proc.poll() is None and time.monotonic() < deadline, \
                open(os.path.join(public_tmp, "daemon.log")).read()
            time.sleep(0.05)
        with open(f"/proc/{proc.pid}/status") as f:
            uids = next(line for line in f if line.startswith("Uid:")).split()[1:]
        assert uids == [str(NOBODY)] * 4
        r = as_nobody(f"mkdir {mnt}/t && echo one >> {mnt}/t/0/append && "
                      f"echo two >> {mnt}/t/0/append && cat {mnt}/t/0/messages")
        assert r.returncode == 0 and r.stdout == b"one\ntwo\n", r.stderr
        with pytest.raises(PermissionError):
            os.listdir(mnt)  # private to its user: not even root may look
        r = subprocess.run([*nobody, py, "-m", "kafkafs", "umount", mnt], cwd=ROOT,
                           capture_output=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        err.close()
    owned = {os.stat(os.path.join(d, n)).st_uid
             for d, _dirs, files in os.walk(logs) for n in files}
    assert owned == {NOBODY}
    assert os.path.exists(os.path.join(logs, ".kafka_cleanshutdown"))
