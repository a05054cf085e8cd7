"""The mounted tree driven by real tools: echo >>, cat, grep, tail, head, ls, readlink,
getfattr, tar, rsync, mkdir/rmdir — against a daemon running as its own process."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import tarfile
import time

import pytest

from conftest import kafkafs


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=True, capture_output=True, timeout=60, **kw)


def wait_for(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return False


def test_topic_mkdir_append_and_read_back(mount):
    os.mkdir(mount.path("orders"))
    assert sorted(os.listdir(mount.path("orders"))) == ["0", "config"]
    assert sorted(os.listdir(mount.path("orders", "0"))) == \
        ["append", "by-time", "messages", "offset", "records.jsonl", "segments"]
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
    # append is write-only
    with pytest.raises(OSError) as e:
        open(f"{p}/append", "rb")
    assert e.value.errno == errno.EACCES
    # offsets outside the log
    for n in ("1", "999", "-1", "01", "abc"):
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
        # its continuation up to the newline is dropped; the next line goes in
        os.write(fd, b"zzzz\nafter\n")
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
    with pytest.raises(OSError) as e:
        with open(cfg, "w") as f:
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
