"""The mounted tree driven by real tools: echo >>, cat, grep, tail, head, ls, readlink,
getfattr, less, tar, rsync, mkdir/rmdir, mv — against a daemon running as its own process."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import re
import select
import signal
import struct
import subprocess
import sys
import tarfile
import termios
import time

import pytest
from conftest import Mount, fuse_available, kafkafs, sh, tree_state, wait_for


def test_topic_mkdir_append_and_read_back(mount):
    os.mkdir(mount.path("orders"))
    assert sorted(os.listdir(mount.path("orders"))) == ["0", "config"]
    assert sorted(os.listdir(mount.path("orders", "0"))) == \
        ["append", "by-time", "messages"]
    for name in ("offset", "key", "records.jsonl", "segments"):  # there by name, not listed
        assert os.path.exists(mount.path("orders", "0", name))
    p = mount.path("orders", "0")
    for i in range(5):
        r = sh(f"echo 'order {i}' >> {p}/append")
        assert r.returncode == 0, r.stderr
    assert sh(f"cat {p}/messages").stdout == b"".join(b"order %d\n" % i for i in range(5))
    assert sh(f"grep -c 'order [24]' {p}/messages").stdout.strip() == b"2"
    assert sh(f"tail -n 2 {p}/messages").stdout == b"order 3\norder 4\n"
    assert sh(f"head -n 1 {p}/messages").stdout == b"order 0\n"
    assert sh(f"cat {p}/offset/3").stdout == b"order 3"
    assert sorted(os.listdir(f"{p}/offset"), key=int) == ["0", "1", "2", "3", "4"]
    lines = sh(f"cat {p}/records.jsonl").stdout.decode().splitlines()
    objs = [json.loads(line) for line in lines]
    assert [o["value"] for o in objs] == [f"order {i}" for i in range(5)]
    assert objs[0]["offset"] == 0 and objs[0]["key"] is None
    assert objs[0]["timestamp_type"] == "CreateTime"


def test_partial_last_line_is_produced_at_close(mount):
    os.mkdir(mount.path("t"))
    p = mount.path("t", "0")
    assert sh(f"printf 'a\\nb\\nno-newline' >> {p}/append").returncode == 0
    assert sh(f"cat {p}/messages").stdout == b"a\nb\nno-newline\n"


def test_writes_split_lines_anywhere(mount):
    os.mkdir(mount.path("t"))
    p = mount.path("t", "0", "append")
    fd = os.open(p, os.O_WRONLY | os.O_APPEND)
    for chunk in [b"hel", b"lo\nwor", b"ld\n\n", b"x"]:
        assert os.write(fd, chunk) == len(chunk)
    os.fsync(fd)
    os.close(fd)
    assert open(mount.path("t", "0", "messages"), "rb").read() == b"hello\nworld\n\nx\n"


def test_tail_f_follows_appends(mount):
    os.mkdir(mount.path("t"))
    p = mount.path("t", "0")
    sh(f"echo first >> {p}/append")
    out = open(mount.path("..", "tail.out"), "wb")
    tail = subprocess.Popen(["tail", "-f", "-n", "+1", f"{p}/messages"], stdout=out)
    try:
        assert wait_for(lambda: os.path.getsize(out.name) >= 6)
        for i in range(3):
            sh(f"echo 'line {i}' >> {p}/append")
        assert wait_for(lambda: open(out.name, "rb").read() ==
                        b"first\nline 0\nline 1\nline 2\n", timeout=15)
    finally:
        tail.kill()
        tail.wait()
        out.close()


def test_xattrs_and_by_time(mount, tmp_path):
    os.mkdir(mount.path("t"))
    p = mount.path("t", "0")
    sh(f"echo one >> {p}/append")
    time.sleep(0.05)
    t_ms = int(time.time() * 1000)
    time.sleep(0.05)
    sh(f"echo two >> {p}/append")
    r = sh(f"getfattr -d -m 'user.kafka' {p}/offset/1")
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode()
    assert 'user.kafka.timestamp_type="CreateTime"' in text
    assert 'user.kafka.offset="1"' in text
    ts = int(os.getxattr(f"{p}/offset/1", "user.kafka.timestamp"))
    assert ts >= t_ms
    with pytest.raises(OSError) as e:
        os.getxattr(f"{p}/offset/1", "user.kafka.key")  # null key: no attribute
    assert e.value.errno == errno.ENODATA
    assert os.readlink(f"{p}/by-time/{t_ms}") == "../offset/1"
    assert open(f"{p}/by-time/{t_ms}", "rb").read() == b"two"
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t_ms / 1000 - 3600)) + "Z"
    assert os.readlink(f"{p}/by-time/{iso}") == "../offset/0"
    assert sh(f"readlink {p}/by-time/{t_ms}").stdout.strip() == b"../offset/1"
    assert not os.path.exists(f"{p}/by-time/{t_ms + 10**9}")


def test_parse_key_mount_option(mount_factory, tmp_path):
    m = mount_factory(options=["parse.key=true,key.separator=:"])
    os.mkdir(m.path("k"))
    p = m.path("k", "0")
    assert sh(f"printf 'user1:hello\\nuser2:world\\n' >> {p}/append").returncode == 0
    assert os.getxattr(f"{p}/offset/0", "user.kafka.key") == b"user1"
    assert open(f"{p}/offset/1", "rb").read() == b"world"
    r = sh(f"echo 'no separator here' >> {p}/append")
    assert r.returncode != 0
    fd = os.open(f"{p}/append", os.O_WRONLY | os.O_APPEND)
    with pytest.raises(OSError) as e:
        os.write(fd, b"still none\n")
    os.close(fd)
    assert e.value.errno == errno.EINVAL
    assert open(f"{p}/messages", "rb").read() == b"hello\nworld\n"


def test_errors_are_errno(mount):
    os.mkdir(mount.path("t"))
    p = mount.path("t", "0")
    sh(f"echo x >> {p}/append")
    # read-only files
    for path in (f"{p}/offset/0", f"{p}/messages", f"{p}/records.jsonl"):
        with pytest.raises(OSError) as e:
            os.open(path, os.O_WRONLY)
        assert e.value.errno in (errno.EACCES, errno.EROFS)
    # append reads as an empty file (recursive readers pass it without an error)
    assert open(f"{p}/append", "rb").read() == b""
    # offsets outside the log
    for n in ("1", "999", "-1", "01", "+0", "abc"):
        assert not os.path.exists(f"{p}/offset/{n}")
    with pytest.raises(FileNotFoundError):
        open(f"{p}/offset/5", "rb")
    # illegal topic names
    for bad in ("a b", "x" * 250, "ü"):
        with pytest.raises(OSError) as e:
            os.mkdir(mount.path(bad))
        assert e.value.errno == errno.EINVAL, bad
    with pytest.raises(FileExistsError):
        os.mkdir(mount.path("t"))
    # no new files anywhere
    with pytest.raises(OSError) as e:
        open(mount.path("t", "0", "newfile"), "wb")
    assert e.value.errno in (errno.EACCES, errno.EROFS)
    # no partition that does not exist
    assert not os.path.exists(mount.path("t", "1"))


def test_message_max_bytes_emsgsize(mount_factory):
    m = mount_factory(extra_args=["--override", "message.max.bytes=1000"])
    os.mkdir(m.path("t"))
    p = m.path("t", "0")
    fd = os.open(f"{p}/append", os.O_WRONLY | os.O_APPEND)
    try:
        assert os.write(fd, b"small\n") == 6
        with pytest.raises(OSError) as e:
            os.write(fd, b"y" * 5000 + b"\n")
        assert e.value.errno == errno.EMSGSIZE
        # a huge line without a newline is refused, not buffered
        with pytest.raises(OSError) as e:
            os.write(fd, b"z" * 2000)
        assert e.value.errno == errno.EMSGSIZE
        # every write of its rest fails too, the one with its newline included, and
        # nothing of that write is stored; the next line goes in
        with pytest.raises(OSError) as e:
            os.write(fd, b"zzzz\nlost\n")
        assert e.value.errno == errno.EMSGSIZE
        assert os.write(fd, b"after\n") == 6
        # lines before an oversized one in the same write go in: a short count says so,
        # and the write that starts at the oversized line fails
        mixed = b"ok1\nok2\n" + b"w" * 5000 + b"\nlater\n"
        assert os.write(fd, mixed) == 8
        with pytest.raises(OSError) as e:
            os.write(fd, mixed[8:])
        assert e.value.errno == errno.EMSGSIZE
    finally:
        os.close(fd)
    assert open(f"{p}/messages", "rb").read() == b"small\nafter\nok1\nok2\n"


def test_config_file_read_and_write(mount):
    os.mkdir(mount.path("t"))
    cfg = mount.path("t", "config")
    text = open(cfg).read()
    assert "retention.ms=604800000" in text
    with open(cfg, "w") as f:
        f.write("retention.ms=1000\nsegment.bytes=4096\n")
    text = open(cfg).read()
    assert "retention.ms=1000" in text and "segment.bytes=4096" in text
    assert text.count("# (override)\n") == 2
    with pytest.raises(OSError) as e, open(cfg, "w") as f:
        f.write("retention.ms=soon\n")
    assert e.value.errno == errno.EINVAL
    assert "retention.ms=1000" in open(cfg).read()


def test_mkdir_partition_and_rmdir_topic(mount):
    os.mkdir(mount.path("t"))
    os.mkdir(mount.path("t", "2"))
    assert sorted(os.listdir(mount.path("t"))) == ["0", "1", "2", "config"]
    log_dir = mount.log_dirs[0]
    assert {"t-0", "t-1", "t-2"} <= set(os.listdir(log_dir))
    os.rmdir(mount.path("t"))
    assert "t" not in os.listdir(mount.mnt)
    assert not any(n.startswith("t-") for n in os.listdir(log_dir))


def test_segments_tar_and_rsync_are_byte_identical(mount, tmp_path):
    os.mkdir(mount.path("t"))
    p = mount.path("t", "0")
    sh(f"seq 1 2000 >> {p}/append")
    seg_dir = f"{p}/segments"
    names = sorted(os.listdir(seg_dir))
    assert "00000000000000000000.log" in names
    real = os.path.join(mount.log_dirs[0], "t-0")
    for n in names:
        assert open(f"{seg_dir}/{n}", "rb").read() == open(f"{real}/{n}", "rb").read(), n
    tar = tmp_path / "seg.tar"
    assert sh(f"tar -C {seg_dir} -cf {tar} .").returncode == 0
    with tarfile.open(tar) as tf:
        member = tf.extractfile("./00000000000000000000.log").read()
    assert member == open(f"{real}/00000000000000000000.log", "rb").read()
    dest = tmp_path / "rsynced"
    r = sh(f"rsync -a {seg_dir}/ {dest}/")
    assert r.returncode == 0, r.stderr
    assert open(dest / "00000000000000000000.log", "rb").read() == \
        open(f"{real}/00000000000000000000.log", "rb").read()


def test_restored_backup_appears_in_mount(mount_factory, tmp_path):
    # a partition written elsewhere (kafkafs produce into another log dir) ...
    other = tmp_path / "other"
    kafkafs("produce", "--log-dirs", str(other), "--topic", "restored",
            input=b"r1\nr2\nr3\n")
    m = mount_factory()
    assert "restored" not in os.listdir(m.mnt)
    # ... copied into the live log dir shows up without a restart
    subprocess.run(["cp", "-r", str(other / "restored-0"), m.log_dirs[0]], check=True)
    assert wait_for(lambda: "restored" in os.listdir(m.mnt), timeout=15), m.log()
    assert open(m.path("restored", "0", "messages"), "rb").read() == b"r1\nr2\nr3\n"


# a daemon that ends slowly: its main thread returns from ``kafkafs mount`` and ends
# (the kernel then shows the process as a zombie, "Z") while another of its threads goes on
# for LINGER seconds -- as a thread finishing a write or unmapping a large heap does
_LINGERING_DAEMON = """
import ctypes, os, sys, threading, time
from kafkafs.cli.main import main
rc = main(sys.argv[2:])
def finish():
    time.sleep(float(sys.argv[1]))
    os._exit(rc)
threading.Thread(target=finish).start()
ctypes.CDLL(None).pthread_exit(None)  # this thread only (ctypes lets go of the GIL)
"""


class _LingeringMount(Mount):
    linger = 2.0

    def command(self):
        python, _m, _kafkafs, *args = super().command()
        return [python, "-c", _LINGERING_DAEMON, str(self.linger), *args]


@pytest.mark.skipif(not fuse_available(), reason="FUSE is not available")
def test_umount_returns_once_the_daemon_has_exited(tmp_path):
    """docs/cli.md: umount waits for the daemon to exit -- every thread of it, not only the
    main one: when it returns the daemon's parent can reap it at once, and with --timeout
    too short it says the daemon still runs and exits 1."""
    m = _LingeringMount(tmp_path).start()
    try:
        pid = int(os.getxattr(m.mnt, "user.kafkafs.pid"))
        assert pid == m.proc.pid
        t0 = time.monotonic()
        r = kafkafs("umount", m.mnt, check=False)
        took = time.monotonic() - t0
        assert r.returncode == 0, r.stderr
        assert m.proc.poll() == 0  # exited, every thread (a waitpid reaps it at once)
        assert took >= _LingeringMount.linger - 0.5
        assert not os.path.ismount(m.mnt)
    finally:
        m.stop()
    m = _LingeringMount(tmp_path)
    m.linger = 5.0
    m.start()
    try:
        pid = m.proc.pid
        r = kafkafs("umount", m.mnt, "--timeout", "1", check=False)
        assert r.returncode == 1
        assert f"unmounted, but the daemon (pid {pid}) is still running after 1s" in \
            r.stderr.decode()
        assert m.proc.poll() is None
        assert m.proc.wait(15) == 0
    finally:
        m.stop()


def test_umount_flushes_and_exits_zero(mount_factory):
    m = mount_factory()
    os.mkdir(m.path("t"))
    sh(f"seq 1 100 >> {m.path('t', '0', 'append')}")
    assert m.umount() == 0
    log_dir = m.log_dirs[0]
    assert os.path.exists(os.path.join(log_dir, ".kafka_cleanshutdown"))
    assert "t 0 100" in open(os.path.join(log_dir, "recovery-point-offset-checkpoint")).read()
    out = kafkafs("consume", "--log-dirs", log_dir, "--topic", "t", "--from-beginning",
                  "--timeout-ms", "500").stdout
    assert out == b"".join(b"%d\n" % i for i in range(1, 101))


def test_sigterm_shuts_down_cleanly(mount_factory):
    m = mount_factory()
    os.mkdir(m.path("t"))
    sh(f"echo x >> {m.path('t', '0', 'append')}")
    m.proc.terminate()
    assert m.proc.wait(30) == 0
    m.proc = None
    assert not os.path.ismount(m.mnt)
    assert os.path.exists(os.path.join(m.log_dirs[0], ".kafka_cleanshutdown"))


def test_writers_refuse_while_daemon_runs_and_readers_work(mount):
    os.mkdir(mount.path("t"))
    sh(f"echo hi >> {mount.path('t', '0', 'append')}")
    r = kafkafs("produce", "--log-dirs", mount.log_dirs[0], "--topic", "t", input=b"x\n",
                check=False)
    assert r.returncode == 1
    assert b"daemon" in r.stderr and b"lock" in r.stderr
    r = kafkafs("consume", "--log-dirs", mount.log_dirs[0], "--topic", "t",
                "--from-beginning", "--timeout-ms", "300")
    assert r.stdout == b"hi\n"


def test_ready_is_sent_to_systemd_once_mounted(tmp_path):
    import socket

    from conftest import Mount

    sock_path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(sock_path)
    sock.settimeout(20)
    os.environ["NOTIFY_SOCKET"] = sock_path
    try:
        m = Mount(tmp_path).start()
    finally:
        del os.environ["NOTIFY_SOCKET"]
    try:
        msg = sock.recv(4096).decode()
        assert "READY=1" in msg and f"MAINPID={m.proc.pid}" in msg
        assert os.path.ismount(m.mnt)  # READY only once the mount is up
    finally:
        m.stop()
        sock.close()


def test_read_only_mount_writes_nothing_and_takes_no_lock(mount_factory, tmp_path):
    logs = str(tmp_path / "logs")
    kafkafs("produce", "--log-dirs", logs, "--topic", "ro", input=b"a\nb\n")

    def snapshot():
        return {os.path.join(r, f): (os.stat(os.path.join(r, f)).st_mtime_ns,
                                     os.path.getsize(os.path.join(r, f)))
                for r, _d, fs in os.walk(logs) for f in fs}

    before = snapshot()
    m = mount_factory(extra_args=["--read-only"])
    assert open(m.path("ro", "0", "messages"), "rb").read() == b"a\nb\n"
    for act in (lambda: open(m.path("ro", "0", "append"), "ab"),
                lambda: os.mkdir(m.path("new")),
                lambda: os.rmdir(m.path("ro"))):
        with pytest.raises(OSError) as e:
            act()
        assert e.value.errno in (errno.EROFS, errno.EACCES)
    assert m.umount() == 0
    assert snapshot() == before  # not a byte, not a file (no marker, no checkpoint)
    # no lock taken: a writer runs beside a read-only mount
    m.start()
    kafkafs("produce", "--log-dirs", logs, "--topic", "ro", input=b"c\n")
    assert m.umount() == 0


# -- extended attributes: headers, LogAppendTime --------------------------------------------

def getfattr_dump(path) -> str:
    """``getfattr -d -m user.kafka`` of ``path``, as text (asserts it ran cleanly)."""
    r = sh(f"getfattr --absolute-names -d -m user.kafka {path}")
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    return r.stdout.decode()


def test_headers_xattr_read_with_getfattr(manager_factory, mount_factory):
    """``user.kafka.headers`` of ``offset/N``, as getfattr prints it, is the record's headers
    as a JSON list of {"key","value"} in the record's order (repeated keys kept, a null header
    value as null, non-ASCII text as itself), and equals records.jsonl's ``headers``; a record
    without headers has ``[]``. The whole getfattr dump of both records is checked."""
    ts = 1_700_000_000_123
    mgr = manager_factory()
    mgr.create_topic("h")
    mgr.get_log("h", 0).append([
        (ts, b"k1", b"v1", [("trace", b"abc"), ("trace", b"def"),
                            ("n\u00e9", "\u00fc\u20ac".encode()), ("empty", None), ("blank", b"")]),
        (ts + 5, None, b"v2", []),
    ])
    mgr.shutdown()
    m = mount_factory()
    p = m.path("h", "0")
    expected = [{"key": "trace", "value": "abc"}, {"key": "trace", "value": "def"},
                {"key": "n\u00e9", "value": "\u00fc\u20ac"}, {"key": "empty", "value": None},
                {"key": "blank", "value": ""}]
    r = sh(f"getfattr --only-values -n user.kafka.headers {p}/offset/0")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.decode("utf-8")) == expected
    assert r.stdout == os.getxattr(f"{p}/offset/0", "user.kafka.headers")
    jsonl = [json.loads(line) for line in open(f"{p}/records.jsonl", "rb")]
    assert jsonl[0]["headers"] == expected and jsonl[1]["headers"] == []
    # the getfattr dump, exactly (getfattr sorts names and escapes '"')
    headers_text = json.dumps(expected, ensure_ascii=False).replace('"', '\\"')
    assert getfattr_dump(f"{p}/offset/0") == (
        f"# file: {p}/offset/0\n"
        f'user.kafka.headers="{headers_text}"\n'
        'user.kafka.key="k1"\n'
        'user.kafka.offset="0"\n'
        'user.kafka.partition="0"\n'
        f'user.kafka.timestamp="{ts}"\n'
        'user.kafka.timestamp_type="CreateTime"\n'
        'user.kafka.topic="h"\n\n')
    # no headers: [] (and no key attribute for the null key)
    assert getfattr_dump(f"{p}/offset/1") == (
        f"# file: {p}/offset/1\n"
        'user.kafka.headers="[]"\n'
        'user.kafka.offset="1"\n'
        'user.kafka.partition="0"\n'
        f'user.kafka.timestamp="{ts + 5}"\n'
        'user.kafka.timestamp_type="CreateTime"\n'
        'user.kafka.topic="h"\n\n')
    # a line appended through the mount has no headers either
    assert sh(f"echo v3 >> {p}/append").returncode == 0
    assert os.getxattr(f"{p}/offset/2", "user.kafka.headers") == b"[]"


def test_headers_xattr_keeps_bytes_that_are_not_utf8(manager_factory, mount_factory):
    """A header value that is not UTF-8 must not be lost in ``user.kafka.headers``: it reads
    as records.jsonl shows it (``{"base64": ...}``, docs/tree.md), not with the bytes replaced
    by U+FFFD, which no reader could turn back into the header."""
    mgr = manager_factory()
    mgr.create_topic("h")
    mgr.get_log("h", 0).append([(1_700_000_000_000, None, b"v", [("bin", b"\xff\x00\x80")])])
    mgr.shutdown()
    m = mount_factory()
    p = m.path("h", "0")
    jsonl = json.loads(open(f"{p}/records.jsonl", "rb").read())
    assert jsonl["headers"] == [{"key": "bin", "value": {"base64": "/wCA"}}]
    r = sh(f"getfattr --only-values -n user.kafka.headers {p}/offset/0")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.decode("utf-8")) == jsonl["headers"]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def test_log_append_time_topic_xattrs_and_by_time(manager_factory, mount_factory):
    """Under ``message.timestamp.type=LogAppendTime`` (a topic override) a record's timestamp
    is the time of the append, not the one the producer gave: ``user.kafka.timestamp_type``
    is LogAppendTime, ``user.kafka.timestamp`` falls in the window around the append, and
    ``by-time/`` resolves with that time (producer timestamps 1000/2000 would point
    elsewhere). Both for records written before the mount and lines appended through it,
    and for a topic switched to LogAppendTime by writing its ``config`` file."""
    mgr = manager_factory()
    mgr.create_topic("lat", overrides={"message.timestamp.type": "LogAppendTime"})
    lg = mgr.get_log("lat", 0)
    t0 = now_ms()
    lg.append([(1000, None, b"a", []), (1001, None, b"b", [])])
    t1 = now_ms()
    time.sleep(0.02)
    t2 = now_ms()
    lg.append([(2000, None, b"c", [])])
    t3 = now_ms()
    mgr.shutdown()
    assert t2 > t1
    m = mount_factory()
    p = m.path("lat", "0")
    time.sleep(0.02)
    t4 = now_ms()
    assert sh(f"echo d >> {p}/append").returncode == 0
    t5 = now_ms()
    windows = {0: (t0, t1), 1: (t0, t1), 2: (t2, t3), 3: (t4, t5)}
    stamps = {}
    for off, (lo, hi) in windows.items():
        text = getfattr_dump(f"{p}/offset/{off}")
        assert 'user.kafka.timestamp_type="LogAppendTime"\n' in text, text
        stamps[off] = int(os.getxattr(f"{p}/offset/{off}", "user.kafka.timestamp"))
        assert lo <= stamps[off] <= hi, (off, stamps[off], lo, hi)
    assert stamps[0] == stamps[1]  # one batch, one append time
    objs = [json.loads(line) for line in open(f"{p}/records.jsonl", "rb")]
    assert [(o["timestamp"], o["timestamp_type"]) for o in objs] == \
        [(stamps[i], "LogAppendTime") for i in range(4)]
    # by-time uses the append times: 1500 (between the producer's 1000 and 2000) is before
    # every record; just after the first batch's append comes the second batch
    assert os.readlink(f"{p}/by-time/1500") == "../offset/0"
    assert os.readlink(f"{p}/by-time/{stamps[0]}") == "../offset/0"
    assert os.readlink(f"{p}/by-time/{stamps[0] + 1}") == "../offset/2"
    assert os.readlink(f"{p}/by-time/{stamps[3]}") == "../offset/3"
    assert open(f"{p}/by-time/{stamps[2]}", "rb").read() == b"c"
    assert not os.path.lexists(f"{p}/by-time/{stamps[3] + 1}")
    # the same for a topic switched to LogAppendTime through the mounted config file
    os.mkdir(m.path("lat2"))
    with open(m.path("lat2", "config"), "w") as f:
        f.write("message.timestamp.type=LogAppendTime\n")
    assert "# (override)\nmessage.timestamp.type=LogAppendTime\n" in \
        open(m.path("lat2", "config")).read()
    q = m.path("lat2", "0")
    t6 = now_ms()
    assert sh(f"echo e >> {q}/append").returncode == 0
    t7 = now_ms()
    assert 'user.kafka.timestamp_type="LogAppendTime"\n' in getfattr_dump(f"{q}/offset/0")
    ts = int(os.getxattr(f"{q}/offset/0", "user.kafka.timestamp"))
    assert t6 <= ts <= t7
    assert os.readlink(f"{q}/by-time/{t6}") == "../offset/0"


# -- less, ls -l, mkdir/rmdir as commands ------------------------------------------------------

def less_env() -> dict:
    """The environment without LESS* settings (no LESSOPEN preprocessor, no default flags)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LESS")}
    env["TERM"] = "xterm"
    return env


ANSI = re.compile(rb"\x1b(\[[?0-9;]*[A-Za-z]|[=>])")


def less_on_tty(args, rows, until, keys=b"", cwd=None, timeout=8.0) -> bytes:
    """Run ``less ARGS`` (in ``cwd``) on a pseudo-terminal of ``rows`` lines, read its output until
    ``until`` appears (after escape sequences and CRs are removed), send ``keys``, wait for
    less to exit; returns the cleaned output."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, 80, 0, 0))
    proc = subprocess.Popen(["less", *args], stdin=slave, stdout=slave, stderr=slave,
                            env=less_env(), cwd=cwd, start_new_session=True)
    os.close(slave)
    raw = b""

    def clean():
        return ANSI.sub(b"", raw).replace(b"\r", b"")

    try:
        deadline = time.monotonic() + timeout
        sent = False
        while time.monotonic() < deadline:
            if not sent and until in clean():
                if keys:
                    os.write(master, keys)
                sent = True
            r, _w, _x = select.select([master], [], [], 0.1)
            if r:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: less exited and closed the terminal
                    data = b""
                if not data:
                    break
                raw += data
            elif sent and proc.poll() is not None:
                break
        assert proc.wait(5) == 0
        return clean()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


def test_less_reads_messages(mount):
    """``less`` shows ``messages`` exactly: with stdout not a terminal it copies the file
    (all 3000 lines); on a terminal ``less -F -X`` prints a short file and exits; and
    ``less +G`` jumps to the end of a long one and shows its last screen (the lines before
    the ``(END)`` prompt are exactly the last rows-1 values)."""
    os.mkdir(mount.path("t"))
    p = mount.path("t", "0")
    assert sh(f"seq 1 3000 >> {p}/append").returncode == 0
    expected = b"".join(b"%d\n" % i for i in range(1, 3001))
    r = subprocess.run(["less", f"{p}/messages"], capture_output=True, timeout=30,
                       env=less_env(), check=False)
    assert (r.returncode, r.stdout, r.stderr) == (0, expected, b"")
    r = sh(f"less -F -X {p}/messages | cat", env=less_env())
    assert (r.returncode, r.stdout) == (0, expected)
    # on a terminal: the end of a long file, found by seeking (rows 10: 9 lines + prompt)
    out = less_on_tty(["+G", "-X", "messages"], rows=10, until=b"(END)", keys=b"q", cwd=p)
    assert out == b"".join(b"%d\n" % i for i in range(2992, 3001)) + b"messages (END)", out
    # a file that fits the screen: -F prints it and exits at once
    os.mkdir(mount.path("short"))
    q = mount.path("short", "0")
    assert sh(f"printf 'alpha\\nbeta\\ngamma\\n' >> {q}/append").returncode == 0
    out = less_on_tty(["-F", "-X", f"{q}/messages"], rows=10, until=b"gamma\n")
    assert out == b"alpha\nbeta\ngamma\n", out


def ls_l(path) -> list[tuple]:
    """``ls -ln`` of ``path`` as (mode, links, uid, gid, size, name) rows (date left out)."""
    r = sh(f"ls -ln --time-style=+ {path}", env=dict(os.environ, LC_ALL="C"))
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    lines = r.stdout.decode().splitlines()
    assert lines[0].startswith("total ")
    rows = []
    for line in lines[1:]:
        mode, links, uid, gid, size, name = line.split(None, 5)
        rows.append((mode, int(links), int(uid), int(gid), int(size), name))
    return rows


def test_ls_l_shows_names_modes_and_sizes(mount):
    """``ls -l`` shows what docs/tree.md promises: a partition dir lists ``append``
    (written by the owner, read by anyone as an empty file: 0644), ``messages`` (0444, its
    exact size) and the read-only directory ``by-time`` (0555); ``offset`` and
    ``segments`` (0555), ``key`` (0755) and ``records.jsonl`` (0444, its exact size) are
    there by name only; a topic dir lists ``config`` (0644) and its partitions; the root, topics and ``key``
    dirs are 0755 (keys are written there); offset files are 0444 with the value's size, given
    by the listing itself; every node belongs to the user who mounted."""
    os.mkdir(mount.path("t"))
    p = mount.path("t", "0")
    assert sh(f"printf 'one\\ntwo22\\n' >> {p}/append").returncode == 0
    uid, gid = os.getuid(), os.getgid()
    msize = len(b"one\ntwo22\n")
    jsize = len(open(f"{p}/records.jsonl", "rb").read())
    assert jsize > 0
    assert ls_l(p) == [
        ("-rw-r--r--", 1, uid, gid, 0, "append"),
        ("dr-xr-xr-x", 2, uid, gid, 0, "by-time"),
        ("-r--r--r--", 1, uid, gid, msize, "messages"),
    ]
    env = dict(os.environ, LC_ALL="C")
    by_name = sh(f"cd {p} && ls -ld offset key records.jsonl segments", env=env)
    assert [(f[0], int(f[4]), f[-1]) for f in map(str.split, by_name.stdout.decode().splitlines())] \
        == [("drwxr-xr-x", 0, "key"), ("dr-xr-xr-x", 0, "offset"),
            ("-r--r--r--", jsize, "records.jsonl"), ("dr-xr-xr-x", 0, "segments")]
    csize = len(open(mount.path("t", "config"), "rb").read())
    assert ls_l(mount.path("t")) == [
        ("dr-xr-xr-x", 2, uid, gid, 0, "0"),
        ("-rw-r--r--", 1, uid, gid, csize, "config"),
    ]
    assert ls_l(mount.mnt) == [("drwxr-xr-x", 2, uid, gid, 0, "t")]
    assert ls_l(f"{p}/offset") == [("-r--r--r--", 1, uid, gid, 3, "0"),
                                   ("-r--r--r--", 1, uid, gid, 5, "1")]
    r = sh(f"ls -ld {mount.mnt}", env=dict(os.environ, LC_ALL="C"))
    assert r.stdout.decode().startswith("drwxr-xr-x ")
    # segments: every regular file of the partition dir, 0444, the real sizes
    real = os.path.join(mount.log_dirs[0], "t-0")
    assert ls_l(f"{p}/segments") == [
        ("-r--r--r--", 1, uid, gid, os.path.getsize(os.path.join(real, n)), n)
        for n in sorted(os.listdir(real)) if os.path.isfile(os.path.join(real, n))]


def test_mkdir_and_rmdir_commands(mount):
    """``mkdir`` and ``rmdir`` run as commands: ``mkdir MNT/T`` creates a topic (one
    partition, the default num.partitions), ``mkdir MNT/T/2`` grows it to three partitions,
    ``mkdir`` of an existing topic says "File exists", ``rmdir MNT/T`` deletes the topic with
    its partition dirs; ``ls`` of the root shows exactly the topics left."""
    env = dict(os.environ, LC_ALL="C")
    log_dir = mount.log_dirs[0]
    r = sh(f"mkdir {mount.path('orders')} {mount.path('audit')}", env=env)
    assert (r.returncode, r.stdout, r.stderr) == (0, b"", b"")
    assert sh(f"ls {mount.mnt}", env=env).stdout == b"audit\norders\n"
    assert sh(f"ls {mount.path('orders')}", env=env).stdout == b"0\nconfig\n"
    r = sh(f"mkdir {mount.path('orders', '2')}", env=env)
    assert (r.returncode, r.stderr) == (0, b"")
    assert sh(f"ls {mount.path('orders')}", env=env).stdout == b"0\n1\n2\nconfig\n"
    assert sorted(n for n in os.listdir(log_dir) if n.startswith("orders-")) == \
        ["orders-0", "orders-1", "orders-2"]
    r = sh(f"mkdir {mount.path('orders')}", env=env)
    assert r.returncode == 1
    assert r.stderr.decode().strip() == \
        f"mkdir: cannot create directory '{mount.path('orders')}': File exists"
    assert sh(f"echo kept >> {mount.path('audit', '0', 'append')}").returncode == 0
    r = sh(f"rmdir {mount.path('orders')}", env=env)
    assert (r.returncode, r.stdout, r.stderr) == (0, b"", b"")
    assert sh(f"ls {mount.mnt}", env=env).stdout == b"audit\n"
    assert not any(n.startswith("orders") for n in os.listdir(log_dir))
    assert not os.path.exists(mount.path("orders"))
    assert open(mount.path("audit", "0", "messages"), "rb").read() == b"kept\n"
    r = sh(f"rmdir {mount.path('audit')}", env=env)
    assert (r.returncode, r.stderr) == (0, b"")
    assert sh(f"ls -A {mount.mnt}", env=env).stdout == b""


# -- segments/ is read-only --------------------------------------------------------------------

def segment_files(real_dir) -> dict:
    """name -> (sha256, size) of every regular file in a partition dir."""
    out = {}
    for n in sorted(os.listdir(real_dir)):
        path = os.path.join(real_dir, n)
        if os.path.isfile(path):
            with open(path, "rb") as f:
                out[n] = (hashlib.sha256(f.read()).hexdigest(), os.path.getsize(path))
    return out


def errno_of(action) -> int | None:
    """The errno ``action()`` fails with (None when it succeeds)."""
    try:
        action()
    except OSError as exc:
        return exc.errno
    return None


def _topic_with_segments(mount, lines: int):
    """Topic ``t`` with ``seq 1 LINES`` appended: (partition dir, its ``segments/``, the
    first segment's ``.log`` there, the partition's dir in the log dir, and
    :func:`segment_files` of it)."""
    os.mkdir(mount.path("t"))
    p = mount.path("t", "0")
    assert sh(f"seq 1 {lines} >> {p}/append").returncode == 0
    seg = f"{p}/segments"
    real = os.path.join(mount.log_dirs[0], "t-0")
    return p, seg, f"{seg}/00000000000000000000.log", real, segment_files(real)


def test_segments_are_read_only(mount):
    """Nothing under ``segments/`` can be changed: writing (append, overwrite, O_RDWR),
    truncating (O_TRUNC and truncate(2)), creating a file or directory and removing a file
    fail with EACCES, chmod with EPERM, setting an xattr with EACCES — from Python and from
    the shell tools (``>>``, ``truncate``, ``touch``, ``cp``, ``rm``) — and every segment file
    stays byte-identical to the log dir's, which does not change either."""
    p, seg, log_file, real, before = _topic_with_segments(mount, 500)
    assert "00000000000000000000.log" in before
    names = sorted(os.listdir(seg))
    assert names == sorted(before)

    def open_close(path, flags):
        os.close(os.open(path, flags, 0o644))

    results = {
        "append": errno_of(lambda: open_close(log_file, os.O_WRONLY | os.O_APPEND)),
        "overwrite": errno_of(lambda: open_close(log_file, os.O_WRONLY)),
        "read-write": errno_of(lambda: open_close(log_file, os.O_RDWR)),
        "O_TRUNC": errno_of(lambda: open_close(log_file, os.O_WRONLY | os.O_TRUNC)),
        "truncate": errno_of(lambda: os.truncate(log_file, 0)),
        "truncate index": errno_of(lambda: os.truncate(f"{seg}/00000000000000000000.index", 8)),
        "create": errno_of(lambda: open_close(f"{seg}/new.log", os.O_WRONLY | os.O_CREAT)),
        "create existing": errno_of(lambda: open_close(log_file, os.O_WRONLY | os.O_CREAT)),
        "mkdir": errno_of(lambda: os.mkdir(f"{seg}/sub")),
        "unlink": errno_of(lambda: os.unlink(log_file)),
        "unlink metadata": errno_of(lambda: os.unlink(f"{seg}/partition.metadata")),
        "chmod": errno_of(lambda: os.chmod(log_file, 0o666)),
        "setxattr": errno_of(lambda: os.setxattr(log_file, "user.x", b"1")),
    }
    assert results == {
        "append": errno.EACCES, "overwrite": errno.EACCES, "read-write": errno.EACCES,
        "O_TRUNC": errno.EACCES, "truncate": errno.EACCES, "truncate index": errno.EACCES,
        "create": errno.EACCES, "create existing": errno.EACCES, "mkdir": errno.EACCES,
        "unlink": errno.EACCES, "unlink metadata": errno.EACCES, "chmod": errno.EPERM,
        "setxattr": errno.EACCES,
    }
    env = dict(os.environ, LC_ALL="C")
    for cmd in (f"echo x >> {log_file}", f"echo x > {log_file}", f"truncate -s 0 {log_file}",
                f"touch {seg}/new", f"cp /etc/hostname {seg}/", f"rm -f {log_file}",
                f"dd if=/dev/zero of={log_file} bs=1 count=1 conv=notrunc"):
        r = sh(cmd, env=env)
        assert r.returncode != 0 and b"Permission denied" in r.stderr, (cmd, r.stderr)
    assert sorted(os.listdir(seg)) == names
    assert segment_files(real) == before
    for n in names:
        assert open(f"{seg}/{n}", "rb").read() == open(os.path.join(real, n), "rb").read(), n
    assert open(f"{p}/messages", "rb").read() == b"".join(b"%d\n" % i for i in range(1, 501))


def test_segments_rename_and_new_names_are_refused(mount):
    """Renaming a segment file (``mv``, rename(2)) fails with EPERM, as every rename in the
    tree (docs/tree.md, Errors), and making a symlink or a FIFO under ``segments/`` with
    EACCES, as creating or removing files there — never with ENOSYS ("Function not
    implemented"), which tells a user the operation exists nowhere. The files stay as they
    were."""
    _p, seg, log_file, real, before = _topic_with_segments(mount, 50)
    results = {
        "rename": errno_of(lambda: os.rename(log_file, f"{seg}/00000000000000000050.log")),
        "rename over": errno_of(lambda: os.rename(log_file, f"{seg}/partition.metadata")),
        "symlink": errno_of(lambda: os.symlink("00000000000000000000.log", f"{seg}/l")),
        "mkfifo": errno_of(lambda: os.mkfifo(f"{seg}/fifo")),
    }
    r = sh(f"mv {log_file} {seg}/moved.log", env=dict(os.environ, LC_ALL="C"))
    results["mv"] = r.stderr.decode().rsplit(": ", 1)[-1].strip()
    assert segment_files(real) == before
    assert sorted(os.listdir(seg)) == sorted(before)
    assert results == {"rename": errno.EPERM, "rename over": errno.EPERM,
                       "symlink": errno.EACCES, "mkfifo": errno.EACCES,
                       "mv": "Operation not permitted"}


# -- SIGINT, --config --------------------------------------------------------------------------

def test_sigint_shuts_down_cleanly(mount_factory):
    """SIGINT (Ctrl-C on a foreground ``kafkafs mount``) shuts down like SIGTERM: exit status
    0, the mount gone, the log flushed and checkpointed (``.kafka_cleanshutdown``,
    ``recovery-point-offset-checkpoint`` at the log end), no traceback; the next daemon
    starts without recovery and serves every record."""
    m = mount_factory()
    os.mkdir(m.path("t"))
    assert sh(f"seq 1 100 >> {m.path('t', '0', 'append')}").returncode == 0
    m.proc.send_signal(signal.SIGINT)
    assert m.proc.wait(30) == 0, m.log()
    m.proc = None
    m._err.close()
    assert not os.path.ismount(m.mnt)
    log_dir = m.log_dirs[0]
    assert os.path.exists(os.path.join(log_dir, ".kafka_cleanshutdown"))
    assert open(os.path.join(log_dir, "recovery-point-offset-checkpoint")).read() == \
        "0\n1\nt 0 100\n"
    assert open(os.path.join(log_dir, "log-start-offset-checkpoint")).read() == "0\n0\n"
    text = m.log()
    assert "Received SIGINT, shutting down" in text
    assert "logs flushed and checkpointed" in text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text
    m.start()
    assert "No clean shutdown marker" not in m.log()
    assert open(m.path("t", "0", "messages"), "rb").read() == \
        b"".join(b"%d\n" % i for i in range(1, 101))
    assert m.umount() == 0


class ConfigMount(Mount):
    """A daemon started as ``kafkafs mount --config FILE`` alone: the mount point, the log
    dirs and the mount options all come from the file."""

    def command(self) -> list[str]:
        return [sys.executable, "-m", "kafkafs", "mount", "--config", self.config]


def test_mount_with_config_file(tmp_path):
    """``kafkafs mount --config server.properties`` with nothing else honours the file:
    ``kafkafs.mount.point`` is where it mounts, ``log.dirs`` is where topics go (the default
    log dir stays untouched), ``kafkafs.mount.options`` turns on parse.key with ``:``,
    ``num.partitions=2`` gives ``mkdir`` two partitions, ``log.segment.bytes=200`` rolls a
    segment every two one-record batches (visible in ``segments/``), and
    ``message.max.bytes=1000`` refuses a longer line with EMSGSIZE; the topic's ``config``
    shows the broker values as its defaults (no override marks)."""
    if not fuse_available():
        pytest.skip("FUSE is not available")
    logs = tmp_path / "configured-logs"
    cfg = tmp_path / "server.properties"
    cfg.write_text(
        "# a broker's server.properties, with kafkafs's keys\n"
        f"kafkafs.mount.point={tmp_path / 'mnt'}\n"
        "kafkafs.mount.options=parse.key=true,key.separator=:\n"
        f"log.dirs={logs}\n"
        "num.partitions=2\n"
        "log.segment.bytes=200\n"
        "message.max.bytes=1000\n"
        "zookeeper.connect=localhost:2181\n")  # a key kafkafs does not use: ignored
    m = ConfigMount(tmp_path, log_dirs=[str(logs)], config=str(cfg))
    m.start()
    try:
        assert m.mnt == str(tmp_path / "mnt")
        assert os.getxattr(m.mnt, "user.kafkafs.log_dirs") == str(logs).encode()
        os.mkdir(m.path("c"))
        assert sorted(os.listdir(m.path("c"))) == ["0", "1", "config"]
        assert sorted(n for n in os.listdir(logs) if not n.startswith(".")) == \
            ["c-0", "c-1", "meta.properties"]
        assert not os.path.exists(tmp_path / "logs")
        config_text = open(m.path("c", "config")).read()
        assert "\nsegment.bytes=200\n" in config_text
        assert "\nmax.message.bytes=1000\n" in config_text
        assert "(override)\n" not in config_text.split("are not stored.\n", 1)[1]
        p = m.path("c", "0")
        fd = os.open(f"{p}/append", os.O_WRONLY | os.O_APPEND)
        try:
            for i in range(8):  # one write, one batch (about 80 bytes) each
                line = b"k%d:value %d\n" % (i, i)
                assert os.write(fd, line) == len(line)
            with pytest.raises(OSError) as e:
                os.write(fd, b"big:" + b"x" * 1200 + b"\n")
            assert e.value.errno == errno.EMSGSIZE
        finally:
            os.close(fd)
        assert open(f"{p}/messages", "rb").read() == \
            b"".join(b"value %d\n" % i for i in range(8))
        assert [os.getxattr(f"{p}/offset/{i}", "user.kafka.key") for i in range(8)] == \
            [b"k%d" % i for i in range(8)]
        real = os.path.join(logs, "c-0")
        seg_logs = sorted(n for n in os.listdir(f"{p}/segments") if n.endswith(".log"))
        assert seg_logs == [f"{o:020d}.log" for o in (0, 2, 4, 6)]
        for n in seg_logs:
            data = open(f"{p}/segments/{n}", "rb").read()
            assert data == open(os.path.join(real, n), "rb").read()
            assert 0 < len(data) <= 200
        assert m.umount() == 0
        assert os.path.exists(logs / ".kafka_cleanshutdown")
        assert f"Mounted {logs} at {tmp_path / 'mnt'}" in m.log()
    finally:
        m.stop()


def test_unusable_log_dir_or_option_is_a_one_line_error(tmp_path):
    """A log dir that is a regular file, or a FUSE option libfuse does not know, ends
    ``kafkafs mount`` with exit 1 and an ``error:`` line naming the cause, not a Python
    traceback; nothing is mounted, and the log dir is not created."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    afile = tmp_path / "afile"
    afile.write_bytes(b"not a log dir")
    r = kafkafs("mount", str(mnt), "--log-dirs", str(afile), check=False)
    err = r.stderr.decode()
    assert r.returncode == 1 and "Traceback" not in err
    assert f"error: [Errno 20] log dir is not a directory: '{afile}'" in err
    assert afile.read_bytes() == b"not a log dir"
    r = kafkafs("mount", str(mnt), "--log-dirs", str(tmp_path / "logs"), "-o", "no_such_opt",
                check=False)
    err = r.stderr.decode()
    assert r.returncode == 1 and "Traceback" not in err, err
    assert err.startswith("error: unknown mount option 'no_such_opt': neither kafkafs's ("), err
    assert len(err.splitlines()) == 1 and not os.path.ismount(mnt)
    assert not os.path.exists(tmp_path / "logs")


#: -o options libfuse 3 (or the kernel, for kafkafs's mount) refuses inside pyfuse3.init,
#: after the log dirs were loaded, and what kafkafs now says first
REFUSED_OPTIONS = {
    "frobnicate": "unknown mount option 'frobnicate': neither kafkafs's (",
    "nonempty": "FUSE option 'nonempty': nonempty is a libfuse 2 option",
    "allow_other=1": "FUSE option 'allow_other=1': libfuse 3 takes it as allow_other (no value)",
    "fsname": "FUSE option 'fsname': libfuse 3 takes it as fsname=VALUE",
    "blkdev": "FUSE option 'blkdev': blkdev is for file systems on a block device",
    "blksize=4096": "FUSE option 'blksize=4096': blksize is for file systems on a block device",
    "relatime": "unknown mount option 'relatime'",
}
if not os.path.isdir("/sys/fs/selinux"):
    REFUSED_OPTIONS["context=system_u:object_r:tmp_t:s0"] = (
        "FUSE option 'context=system_u:object_r:tmp_t:s0': an SELinux context, and SELinux is "
        "not enabled here")


@pytest.mark.parametrize("option", sorted(REFUSED_OPTIONS))
def test_failed_mount_leaves_the_log_dirs_as_they_were(tmp_path, option):
    """``kafkafs mount MNT --log-dirs D -o frobnicate``: libfuse refuses the option only
    inside pyfuse3.init, and the daemon had already created D with meta.properties and
    written its checkpoints. Every option is checked before the first write now: a missing
    log dir stays missing, an existing one (with records, cleanly shut down) stays byte for
    byte, name for name and mtime for mtime as it was."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    missing = tmp_path / "missing"
    r = kafkafs("mount", str(mnt), "--log-dirs", str(missing), "-o", option, check=False)
    err = r.stderr.decode()
    assert r.returncode == 1 and err.startswith("error: " + REFUSED_OPTIONS[option]), err
    assert len(err.splitlines()) == 1, err
    assert not os.path.lexists(missing) and not os.path.ismount(mnt)
    existing = str(tmp_path / "existing")
    kafkafs("produce", "--log-dirs", existing, "--topic", "t", input=b"a\nb\n")
    before = tree_state(existing)
    time.sleep(0.01)  # an mtime written now would differ
    r = kafkafs("mount", str(mnt), "--log-dirs", existing, "-o", f"allow_other,{option}",
                check=False)
    assert r.returncode == 1 and REFUSED_OPTIONS[option] in r.stderr.decode()
    assert tree_state(existing) == before


def test_allow_other_for_a_user_needs_user_allow_other(tmp_path):
    """fusermount3 refuses allow_other/allow_root to a user other than root unless
    /etc/fuse.conf says user_allow_other: so does the check, before anything is written."""
    from kafkafs.daemon.options import check_fuse_options

    conf = tmp_path / "fuse.conf"
    conf.write_text("# user_allow_other\nmount_max = 1000\n")
    for opt in ("allow_other", "allow_root"):
        with pytest.raises(ValueError, match=f"FUSE option '{opt}': only root may use it "
                                             f"unless {conf} has user_allow_other"):
            check_fuse_options({opt, "default_permissions"}, uid=1000, fuse_conf=str(conf))
        check_fuse_options({opt}, uid=0, fuse_conf=str(conf))
    conf.write_text("user_allow_other\n")
    check_fuse_options({"allow_other", "default_permissions"}, uid=1000, fuse_conf=str(conf))


def test_failed_mount_of_several_log_dirs_creates_none(tmp_path):
    """The second log dir is unusable (a regular file, or locked by another process): the
    first, missing one, is not created on the way (the LogManager locks and formats its log
    dirs one after the other)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    new = tmp_path / "new"
    afile = tmp_path / "afile"
    afile.write_bytes(b"x")
    r = kafkafs("mount", str(mnt), "--log-dirs", f"{new},{afile}", check=False)
    assert r.returncode == 1 and b"log dir is not a directory" in r.stderr, r.stderr
    assert not os.path.lexists(new)
    locked = tmp_path / "locked"
    kafkafs("topics", "--log-dirs", str(locked), "--create", "--topic", "t")
    before = tree_state(str(locked))
    holder = _hold_lock(locked, 30)
    try:
        r = kafkafs("mount", str(mnt), "--log-dirs", f"{new},{locked}", "--lock-timeout", "0",
                    check=False)
        err = r.stderr.decode()
        assert r.returncode == 1 and err.startswith(
            f"error: Failed to acquire lock on file .lock in {locked}. A Kafka instance in "
            f"another process or thread is using this directory: pid {holder.pid} ("), err
    finally:
        holder.kill()
        holder.wait()
    assert not os.path.lexists(new) and tree_state(str(locked)) == before


def test_fsname_option_names_the_mount(mount_factory):
    """``-o fsname=NAME`` is what /proc/mounts (findmnt, df) shows as the source; kafkafs's
    default, ``kafkafs``, applies only when none is given."""
    m = mount_factory(options=["fsname=orders-logs"])
    with open("/proc/self/mountinfo") as f:
        fields = [line.split(" - ")[1].split() for line in f if f" {m.mnt} " in line]
    assert fields == [["fuse.kafkafs", "orders-logs", fields[0][2]]]


def _daemon_read_bytes(m) -> int:
    """Bytes the daemon has read with read/pread so far (/proc/PID/io ``rchar``)."""
    with open(f"/proc/{m.proc.pid}/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("rchar:"))


def test_kernel_caches_what_cannot_change_and_drops_what_did(mount_factory):
    """Kernel caching, seen from the daemon's side: a second ``cat`` of ``messages`` and of
    a sealed segment under ``segments/`` is served from the page cache (the daemon reads
    next to nothing); after an append, ``messages`` shows the new line."""
    m = mount_factory(extra_args=["--override", "log.segment.bytes=1000000"])
    os.mkdir(m.path("t"))
    lines = [b"line-%06d-" % i + b"y" * 90 for i in range(30000)]  # ~3 MB: 3 segments
    with open(m.path("t", "0", "append"), "ab") as f:
        f.writelines(b"\n".join(lines[i:i + 1000]) + b"\n" for i in range(0, len(lines), 1000))
    sealed = sorted(n for n in os.listdir(m.path("t", "0", "segments")) if n.endswith(".log"))
    assert len(sealed) >= 3
    log_bytes = sum(os.path.getsize(m.path("t", "0", "segments", n)) for n in sealed)

    def cat(*path) -> tuple[bytes, int]:
        before = _daemon_read_bytes(m)
        out = subprocess.run(["cat", m.path(*path)], capture_output=True, check=True).stdout
        return out, _daemon_read_bytes(m) - before

    out, first = cat("t", "0", "messages")
    assert out.splitlines() == lines and first >= log_bytes * 0.9
    out, second = cat("t", "0", "messages")
    assert out.splitlines() == lines and second < log_bytes * 0.02
    seg = m.path("t", "0", "segments", sealed[0])
    out, first = cat(seg)
    assert out == open(os.path.join(m.log_dirs[0], "t-0", sealed[0]), "rb").read()
    out, second = cat(seg)
    assert len(out) == len(open(seg, "rb").read()) and second < len(out) * 0.02
    with open(m.path("t", "0", "append"), "ab") as f:
        f.write(b"the new line\n")
    out, _ = cat("t", "0", "messages")
    assert out.splitlines() == lines + [b"the new line"]
    # (the kernel drops every cached page of a FUSE file whose size changes, unless the
    # file system asks for FUSE_CAP_EXPLICIT_INVAL_DATA, which pyfuse3 does not offer: the
    # whole of messages is read from the daemon again)


def test_max_read_is_refused_before_mounting(tmp_path):
    """``-o max_read=N`` would mount and then die at the kernel's INIT (libfuse wants
    init() to ask for the same size, which pyfuse3 cannot): kafkafs refuses it up front
    with one error line, and nothing is mounted or written."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = kafkafs("mount", str(mnt), "--log-dirs", str(tmp_path / "logs"), "-o",
                "allow_other,max_read=65536", check=False)
    assert r.returncode == 1 and b"Traceback" not in r.stderr
    assert r.stderr.endswith(b"error: max_read is not supported by kafkafs (pyfuse3 cannot "
                             b"negotiate it); read_ahead_kb sets how far the kernel reads "
                             b"ahead\n")
    assert not os.path.ismount(mnt) and not (tmp_path / "logs").exists()


@pytest.mark.parametrize("given, sep", [("→", "→".encode()), (r"\u2192", "→".encode()),
                                        (r"\t", b"\t"), (" | ", b" | ")])
def test_key_separator_mount_option_keeps_any_text(mount_factory, given, sep):
    """``-o key.separator=`` as kafka-console-producer's property, with kafkafs's backslash
    escapes: a non-ASCII separator is itself in UTF-8 (it was read as Latin-1 and split
    nothing), ``\\u2192`` is the same arrow, ``\\t`` a tab."""
    m = mount_factory(options=[f"parse.key=true,key.separator={given}"])
    os.mkdir(m.path("k"))
    p = m.path("k", "0")
    with open(f"{p}/append", "ab") as f:
        f.write(b"user1" + sep + b"hello" + sep + b"again\n")
    assert os.getxattr(f"{p}/offset/0", "user.kafka.key") == b"user1"
    assert open(f"{p}/offset/0", "rb").read() == b"hello" + sep + b"again"


# -- the mount point ------------------------------------------------------------------------

def test_missing_mount_point_does_not_exist_and_a_file_is_not_a_directory(tmp_path):
    """``kafkafs mount`` names what is wrong with its mount point in one line, exit 1, before
    it creates the log dir: a missing path "does not exist", a regular file "is not a
    directory"."""
    logs = tmp_path / "logs"
    missing = tmp_path / "no-such-dir"
    r = kafkafs("mount", str(missing), "--log-dirs", str(logs), check=False)
    assert r.returncode == 1, r.stderr
    assert r.stderr.decode().splitlines() == [f"error: mount point {missing} does not exist"]
    afile = tmp_path / "afile"
    afile.write_text("x")
    r = kafkafs("mount", str(afile), "--log-dirs", str(logs), check=False)
    assert r.returncode == 1, r.stderr
    assert r.stderr.decode().splitlines() == [f"error: mount point {afile} is not a directory"]
    assert not logs.exists()


def test_mount_over_a_kafkafs_mount_is_refused(mount_factory, tmp_path):
    """A second ``kafkafs mount`` on a mount point that shows a kafkafs mount already would
    stack a mount that hides the first: it is refused with exit 1 and a message naming the
    running daemon, before it takes any lock or loads its log dirs (a log dir of its own,
    free, is not even created); the first mount keeps serving."""
    m = mount_factory()
    os.mkdir(m.path("t"))
    assert sh(f"echo one >> {m.path('t', '0', 'append')}").returncode == 0
    other = tmp_path / "other-logs"
    r = kafkafs("mount", m.mnt, "--log-dirs", str(other), check=False, timeout=30)
    err = r.stderr.decode()
    assert r.returncode == 1, err
    expected = (f"error: {m.mnt} already holds a kafkafs mount (daemon pid {m.proc.pid}); "
                f"unmount it first (kafkafs umount {m.mnt})")
    assert err.splitlines() == [expected]
    assert not other.exists()
    with open("/proc/self/mounts") as f:
        assert sum(line.split()[1] == m.mnt for line in f) == 1
    assert open(m.path("t", "0", "messages"), "rb").read() == b"one\n"
    # the same log dirs again: refused for the mount point, not for the lock
    r = kafkafs("mount", m.mnt, "--log-dirs", m.log_dirs[0], check=False, timeout=30)
    assert r.returncode == 1 and b"already holds a kafkafs mount" in r.stderr
    assert m.umount() == 0


# -- the log dir's lock at shutdown and at the next mount -------------------------------------

LOCK_HOLDER = """
import fcntl, os, sys, time
fd = os.open(os.path.join(sys.argv[1], ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
fcntl.lockf(fd, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
"""


def _hold_lock(log_dir, seconds: float) -> subprocess.Popen:
    """A process holding ``log_dir``'s ``.lock`` as a daemon does, for ``seconds``."""
    p = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, str(log_dir), str(seconds)],
                         stdout=subprocess.PIPE)
    assert p.stdout.readline() == b"locked\n"
    return p


def test_mount_waits_briefly_for_a_log_dir_being_released(tmp_path):
    """``kafkafs mount`` while another process holds the log dir's lock (a daemon finishing
    its shutdown) says once that it waits and for whom, and mounts as soon as the lock is
    free; with ``--lock-timeout 0.5`` it gives up after that with the usual message."""
    if not fuse_available():
        pytest.skip("FUSE is not available")
    logs = tmp_path / "logs"
    logs.mkdir()
    holder = _hold_lock(logs, 1.5)
    m = Mount(tmp_path)
    try:
        m.start()
        assert holder.poll() is not None  # mounted only once the holder let go
        lines = [line for line in m.log().splitlines() if "waiting" in line]
        assert len(lines) == 1 and lines[0].startswith(
            f"kafkafs: waiting up to 10s for the lock on {logs}, held by pid {holder.pid} ("), \
            m.log()
        assert m.umount() == 0
    finally:
        holder.wait()
        m.stop()
    holder = _hold_lock(logs, 30)
    try:
        t0 = time.monotonic()
        r = kafkafs("mount", m.mnt, "--log-dirs", str(logs), "--lock-timeout", "0.5",
                    check=False)
        err = r.stderr.decode()
        assert r.returncode == 1 and time.monotonic() - t0 >= 0.5, err
        assert f"kafkafs: waiting up to 0.5s for the lock on {logs}, held by pid {holder.pid}" \
            in err
        assert "error: Failed to acquire lock on file .lock in" in err
    finally:
        holder.kill()
        holder.wait()


def test_log_dir_is_free_before_the_mount_goes_after_sigint(manager_factory, mount_factory):
    """After a listing of 300,000 offsets (the kernel then holds an inode per name, and
    dropping them at unmount takes it a while) SIGINT flushes, checkpoints and frees the
    log dir before the unmount: a ``kafkafs mount`` started as soon as the mount point is
    empty takes the lock at once (no wait), and the first daemon still exits 0."""
    mgr = manager_factory()
    lg = mgr.create_topic("big")[0]
    for i in range(0, 300_000, 1000):
        lg.append([(1000, None, b"v", ())] * 1000)
    mgr.shutdown()
    m = mount_factory()
    r = sh(f"ls -f {m.path('big', '0', 'offset')} | wc -l", timeout=300)
    assert r.stdout.strip() == b"300000"
    first = m.proc
    first.send_signal(signal.SIGINT)
    # (ismount is False while stat fails too, ENOTCONN as the session ends: wait for the
    # mount point itself)
    assert wait_for(lambda: os.path.isdir(m.mnt) and not os.path.ismount(m.mnt), timeout=30)
    m.proc = None
    m._err.close()
    again = mount_factory()
    assert "waiting" not in again.log() and "Failed to acquire lock" not in again.log()
    assert first.wait(60) == 0
    assert sh(f"cat {again.path('big', '0', 'offset', '299999')}").stdout == b"v"
    assert again.umount() == 0
