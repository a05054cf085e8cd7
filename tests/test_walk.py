"""What the tools that walk a tree do on a mount (docs/tree.md "Walking the mount"):
``ls -lR``, ``find``, ``grep -r``, ``du``, ``tar``, ``rsync -a``, and ``ls -l offset/``; the
views of a large partition streaming before they are measured; the errno of each change the
tree does not allow; partition names."""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import tarfile
import threading
import time

import pytest
from conftest import fuse_available, sh

from kafkafs.log.log import now_ms

pytestmark = pytest.mark.skipif(not fuse_available(), reason="FUSE is not available")

C = dict(os.environ, LC_ALL="C")


def _fill(manager_factory, topic: str, records: int, *, value_bytes: int = 40,
          partitions: int = 1, per_batch: int = 500, **props):
    """A log dir with ``topic`` holding ``records`` records per partition, values
    ``value-<offset>`` padded to ``value_bytes``, written with the log layer (fast) and
    closed; returns the log dir."""
    m = manager_factory(**props)
    m.create_topic(topic, partitions)
    for p in range(partitions):
        lg = m.get_log(topic, p)
        for start in range(0, records, per_batch):
            lg.append([(now_ms(), None, (b"value-%d-" % n).ljust(value_bytes, b"x"), ())
                       for n in range(start, min(records, start + per_batch))])
    log_dir = m.log_dirs[0]
    m.shutdown()
    return log_dir


def _value(n: int, value_bytes: int = 40) -> bytes:
    return (b"value-%d-" % n).ljust(value_bytes, b"x")


def test_recursive_tools_walk_each_record_once(manager_factory, mount_factory, tmp_path):
    """On a mount of two topics: ``ls -lR`` and ``find`` list no per-record file and no
    segment file (offset/, key/, records.jsonl and segments/ are there by name only),
    ``grep -r`` finds a record once, in ``messages``, and exits 0 (1 for no match) without
    a word on stderr (``append`` reads as empty); ``du`` of the mount adds up to what the
    log dir holds for the partitions; ``tar`` and ``rsync -a`` of a topic exit 0 and copy
    its text, of ``segments/`` its files byte for byte; the by-name entries answer."""
    log_dir = _fill(manager_factory, "big", 20000, partitions=2, log_segment_bytes=200_000)
    m = mount_factory(log_dirs=[log_dir])
    os.mkdir(m.path("small"))
    assert sh(f"printf 'needle one\\nhay\\n' >> {m.path('small', '0', 'append')}").returncode == 0

    r = sh(f"ls -lR {m.mnt}", env=C, timeout=60)
    assert (r.returncode, r.stderr) == (0, b"")
    out = r.stdout.decode()
    for hidden in ("records.jsonl", "offset", "key", "segments", ".log"):
        assert hidden not in out, hidden
    assert out.count(" messages\n") == 3
    found = sh(f"find {m.mnt}", env=C).stdout.decode().splitlines()
    assert len(found) < 100, len(found)  # no name per record
    assert sorted(f[len(m.mnt) + 1:] for f in found if f.endswith(("/messages", "/append"))) \
        == ["big/0/append", "big/0/messages", "big/1/append", "big/1/messages",
            "small/0/append", "small/0/messages"]

    r = sh(f"grep -r needle {m.mnt}", env=C)
    assert (r.returncode, r.stdout, r.stderr) == \
        (0, f"{m.mnt}/small/0/messages:needle one\n".encode(), b"")
    r = sh(f"grep -r {_value(12345).decode()} {m.mnt}/big", env=C)
    assert (r.returncode, r.stderr) == (0, b"")
    assert r.stdout.decode().splitlines() == [f"{m.mnt}/big/{p}/messages:{_value(12345).decode()}"
                                              for p in (0, 1)]
    r = sh(f"grep -r no-such-thing {m.mnt}", env=C)
    assert (r.returncode, r.stdout, r.stderr) == (1, b"", b"")

    du_mount = int(sh(f"du -sk {m.mnt}", env=C).stdout.split()[0])
    du_parts = int(sh(f"du -sk {log_dir}/big-0 {log_dir}/big-1 {log_dir}/small-0 -c",
                      env=C).stdout.split()[-2])
    assert abs(du_mount - du_parts) <= 16, (du_mount, du_parts)  # directories' own blocks
    r = sh(f"du -sk --apparent-size {m.path('big', '0', 'messages')}", env=C)
    assert r.returncode == 0

    text = b"".join(_value(i) + b"\n" for i in range(20000))
    tar = str(tmp_path / "big.tar")
    r = sh(f"tar -C {m.mnt} -cf {tar} big", env=C, timeout=60)
    assert (r.returncode, r.stderr) == (0, b""), r.stderr
    with tarfile.open(tar) as tf:
        assert sorted(tf.getnames()) == ["big", "big/0", "big/0/append", "big/0/by-time",
                                         "big/0/messages", "big/1", "big/1/append",
                                         "big/1/by-time", "big/1/messages", "big/config"]
        assert tf.extractfile("big/1/messages").read() == text  # measured by grep above
    seg_tar = str(tmp_path / "seg.tar")
    r = sh(f"tar -C {m.path('big', '0', 'segments')} -cf {seg_tar} .", env=C, timeout=60)
    assert (r.returncode, r.stderr) == (0, b""), r.stderr
    with tarfile.open(seg_tar) as tf:
        assert tf.extractfile("./00000000000000000000.log").read() == \
            open(f"{log_dir}/big-0/00000000000000000000.log", "rb").read()
    dest = tmp_path / "copy"
    r = sh(f"rsync -a {m.path('big')}/ {dest}/", env=C, timeout=60)
    assert (r.returncode, r.stderr) == (0, b""), r.stderr
    assert open(dest / "1" / "messages", "rb").read() == text
    r = sh(f"rsync -a {m.path('big', '1', 'segments')}/ {dest}/seg/", env=C, timeout=60)
    assert (r.returncode, r.stderr) == (0, b""), r.stderr
    for name in os.listdir(f"{log_dir}/big-1"):
        if os.path.isfile(f"{log_dir}/big-1/{name}"):
            assert open(dest / "seg" / name, "rb").read() == \
                open(f"{log_dir}/big-1/{name}", "rb").read(), name

    # reached by name
    assert open(m.path("big", "1", "offset", "7"), "rb").read() == _value(7)
    assert sh(f"ls {m.path('big', '1', 'offset')}/ | wc -l").stdout.strip() == b"20000"
    assert open(m.path("small", "0", "records.jsonl"), "rb").read().count(b"\n") == 2
    assert os.path.isdir(m.path("big", "key")) and os.path.isdir(m.path("big", "0", "key"))


def test_list_all_lists_every_entry(mount_factory):
    """``-o list_all`` lists the by-name entries too."""
    m = mount_factory(options=["list_all"])
    os.mkdir(m.path("t"))
    assert sorted(os.listdir(m.path("t"))) == ["0", "config", "key"]
    assert sorted(os.listdir(m.path("t", "0"))) == \
        ["append", "by-time", "key", "messages", "offset", "records.jsonl", "segments"]
    assert "segments" in sh(f"ls -R {m.mnt}").stdout.decode()


def test_ls_l_offset_needs_no_request_per_name(manager_factory, mount_factory):
    """``ls -l offset/`` shows each value's size and each record's timestamp (as mtime)
    from the listing itself: stat of every name right after the listing gives the same,
    and the daemon answered no getattr or getxattr per name (its --debug log counts the
    requests); the security label and ACL queries of ``ls -l`` get ENOTSUP once."""
    m0 = manager_factory()
    m0.create_topic("t", 1)
    lg = m0.get_log("t", 0)
    lg.append([(1_700_000_000_000 + n * 1000, None, b"v" * n, []) for n in range(1, 301)])
    log_dir = m0.log_dirs[0]
    m0.shutdown()
    m = mount_factory(log_dirs=[log_dir], extra_args=["--debug"])
    d = m.path("t", "0", "offset")
    os.listdir(m.path("t", "0"))
    before = m.log().count("request getattr") + m.log().count("request getxattr")
    assert m.log().count("request lookup") > 0  # every request is logged
    r = sh(f"ls -l --time-style=+%s {d}/", env=C)
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    rows = [line.split() for line in r.stdout.decode().splitlines()[1:]]
    assert [(int(f[4]), int(f[5]), f[6]) for f in rows] == \
        sorted([(k + 1, 1_700_000_001 + k, str(k)) for k in range(300)], key=lambda t: t[2])
    st = os.stat(os.path.join(d, "41"))
    assert (st.st_size, st.st_mtime, st.st_blocks) == (42, 1_700_000_042, 0)
    with pytest.raises(OSError) as e:
        os.getxattr(os.path.join(d, "41"), "security.selinux")
    assert e.value.errno == errno.ENOTSUP
    assert os.getxattr(os.path.join(d, "41"), "user.kafka.timestamp") == b"1700000042000"
    time.sleep(0.5)
    # a few for the directory itself and the names asked for above, none per name
    after = m.log().count("request getattr") + m.log().count("request getxattr")
    assert after - before < 20, after - before


def test_large_view_streams_before_it_is_measured(manager_factory, mount_factory):
    """A partition whose ``messages`` and ``records.jsonl`` were never measured and are
    too large to measure at once: the first byte comes at once, the size shows 0 until a
    read reaches the end, ``head``, ``cat``, ``wc``, ``grep -c``, ``cp`` and ``tail -n``
    (which then reads it as a pipe) give exactly the records; after a full read the size is
    exact; ``tail -f`` started on an unmeasured view follows new records."""
    n = 400_000  # ~21 MiB of segments: past the 16 MiB measured before a stat answers
    log_dir = _fill(manager_factory, "t", n, per_batch=1000)
    assert _fill(manager_factory, "u", n, per_batch=1000) == log_dir
    m = mount_factory(log_dirs=[log_dir])
    p = m.path("t", "0")
    t0 = time.monotonic()
    with open(f"{p}/messages", "rb") as f:
        assert f.read(20) == _value(0)[:20]
    assert time.monotonic() - t0 < 1.0
    assert os.stat(f"{p}/messages").st_size == 0
    with open(f"{p}/records.jsonl", "rb") as f:
        assert f.read(12) == b'{"offset":0,'
    want_size = sum(len(_value(i)) + 1 for i in range(n))
    assert sh(f"tail -n 2 {p}/messages").stdout == _value(n - 2) + b"\n" + _value(n - 1) + b"\n"
    assert os.stat(f"{p}/messages").st_size == want_size  # the tail read it to its end
    assert sh(f"wc -l < {p}/records.jsonl").stdout.strip() == str(n).encode()
    jsize = os.stat(f"{p}/records.jsonl").st_size
    assert jsize > want_size
    assert sh(f"grep -c value-39999- {p}/messages").stdout.strip() == b"1"

    # the second topic, never read: tail -f starts on its unmeasured view
    assert os.stat(m.path("u", "0", "messages")).st_size == 0
    with open(os.devnull, "wb") as null:
        tail = subprocess.Popen(["tail", "-n", "1", "-f", m.path("u", "0", "messages")],
                                stdout=subprocess.PIPE, stderr=null)
    try:
        first = tail.stdout.readline()
        assert first == _value(n - 1) + b"\n"
        assert sh(f"echo followed >> {m.path('u', '0', 'append')}").returncode == 0
        assert tail.stdout.readline() == b"followed\n"
    finally:
        tail.kill()
        tail.wait()
    assert sh(f"cp {m.path('u', '0', 'messages')} {log_dir}/../copied && "
              f"wc -l < {log_dir}/../copied").stdout.strip() == str(n + 1).encode()


def test_one_errno_per_change_the_tree_does_not_allow(mount):
    """rename and link: EPERM everywhere (a topic, a partition, a file); chmod and chown:
    EPERM; setting the times of a read-only file: EPERM (``touch`` fails), of ``append``,
    ``config`` or a key: accepted, nothing changes; ``touch`` of a new name: EACCES."""
    os.mkdir(mount.path("t"))
    os.mkdir(mount.path("t", "1"))
    p = mount.path("t", "0")
    assert sh(f"echo x >> {p}/append").returncode == 0

    def errno_of(fn):
        try:
            fn()
        except OSError as exc:
            return exc.errno
        return 0

    got = {
        "mv topic": errno_of(lambda: os.rename(mount.path("t"), mount.path("u"))),
        "mv partition": errno_of(lambda: os.rename(mount.path("t", "1"), mount.path("t", "2"))),
        "mv file": errno_of(lambda: os.rename(f"{p}/messages", f"{p}/m2")),
        "ln": errno_of(lambda: os.link(f"{p}/messages", f"{p}/m2")),
        "chmod dir": errno_of(lambda: os.chmod(mount.path("t"), 0o700)),
        "chmod file": errno_of(lambda: os.chmod(f"{p}/messages", 0o600)),
        "chown": errno_of(lambda: os.chown(f"{p}/messages", 1, 1)),
        "utime messages": errno_of(lambda: os.utime(f"{p}/messages")),
        "utime offset": errno_of(lambda: os.utime(f"{p}/offset/0")),
        "utime topic": errno_of(lambda: os.utime(mount.path("t"))),
        "utime append": errno_of(lambda: os.utime(f"{p}/append")),
        "utime config": errno_of(lambda: os.utime(mount.path("t", "config"))),
    }
    assert got == {"mv topic": errno.EPERM, "mv partition": errno.EPERM,
                   "mv file": errno.EPERM, "ln": errno.EPERM, "chmod dir": errno.EPERM,
                   "chmod file": errno.EPERM, "chown": errno.EPERM,
                   "utime messages": errno.EPERM, "utime offset": errno.EPERM,
                   "utime topic": errno.EPERM, "utime append": 0, "utime config": 0}
    r = sh(f"touch {p}/messages", env=C)
    assert r.returncode != 0 and b"touch" in r.stderr
    assert (sh(f"touch {p}/append {mount.path('t', 'config')}", env=C).returncode) == 0
    r = sh(f"touch {p}/new", env=C)
    assert r.returncode != 0 and b"Permission denied" in r.stderr
    r = sh(f"mv {mount.path('t')} {mount.path('u')}", env=C)
    assert r.returncode != 0 and b"Operation not permitted" in r.stderr
    assert sorted(os.listdir(mount.mnt)) == ["t"]
    assert open(f"{p}/messages", "rb").read() == b"x\n"


def test_partition_names_are_canonical(mount):
    """``mkdir t/03``, ``t/+5``, ``t/-1``, ``t/ 4`` fail with EINVAL at once and create
    nothing; ``mkdir t/3`` grows the topic to 4 partitions."""
    os.mkdir(mount.path("t"))
    log_dir = mount.log_dirs[0]
    for bad in ("03", "+5", "-1", " 4", "4 ", "٣", "0x3", "3.0"):
        with pytest.raises(OSError) as e:
            os.mkdir(mount.path("t", bad))
        assert e.value.errno == errno.EINVAL, bad
    assert sorted(os.listdir(mount.path("t"))) == ["0", "config"]
    assert sorted(n for n in os.listdir(log_dir) if n.startswith("t-")) == ["t-0"]
    os.mkdir(mount.path("t", "3"))
    assert sorted(os.listdir(mount.path("t"))) == ["0", "1", "2", "3", "config"]
    for bad in ("03", "+3"):
        assert not os.path.exists(mount.path("t", bad))
    st = os.stat(mount.path("t", "3"))
    assert stat.S_ISDIR(st.st_mode)


def test_too_many_partitions_are_refused_at_once(mount):
    """``mkdir MOUNT/orders/99999999`` (issue 18: it made the daemon create 4,985 partition
    dirs in 2 min 15 s and run out of descriptors) fails at once with EINVAL: nothing is
    created, the daemon holds no more descriptors than before, other topics work, and the
    topic still has its one partition after a restart."""
    os.mkdir(mount.path("orders"))
    log_dir = mount.log_dirs[0]
    fds = len(os.listdir(f"/proc/{mount.proc.pid}/fd"))
    t0 = time.monotonic()
    with pytest.raises(OSError) as e:
        os.mkdir(mount.path("orders", "99999999"))
    assert e.value.errno == errno.EINVAL
    assert time.monotonic() - t0 < 2.0
    assert sorted(n for n in os.listdir(log_dir) if n.startswith("orders")) == ["orders-0"]
    assert len(os.listdir(f"/proc/{mount.proc.pid}/fd")) <= fds
    os.mkdir(mount.path("audit"))
    assert sh(f"echo ok >> {mount.path('audit', '0', 'append')}").returncode == 0
    assert mount.umount() == 0
    mount.start()
    assert sorted(os.listdir(mount.path("orders"))) == ["0", "config"]
    assert open(mount.path("audit", "0", "messages"), "rb").read() == b"ok\n"


def test_a_partition_written_through_the_mount_stays_sized(mount_factory, tmp_path):
    """~24 MiB appended through the mount (past the 16 MiB a first stat measures): the
    daemon measures ``messages`` in the background, so its size is exact without a read;
    the marks are saved every log.flush.offset.checkpoint.interval.ms, so after kill -9 and
    a remount the size is known at once and ``tail -n 1`` reads only the end."""
    lines = tmp_path / "lines"
    with open(lines, "wb") as f:
        for n in range(200_000):
            f.write(b"line-%07d-%s\n" % (n, b"z" * 100))
    want = os.path.getsize(lines)
    m = mount_factory(extra_args=["--override", "log.flush.offset.checkpoint.interval.ms=1000",
                                  "--override", "log.segment.bytes=4194304"])
    os.mkdir(m.path("w"))
    r = sh(f"dd if={lines} of={m.path('w', '0', 'append')} bs=1M oflag=append "
           "conv=notrunc,fsync status=none")
    assert r.returncode == 0, r.stderr
    deadline = time.monotonic() + 20
    while os.stat(m.path("w", "0", "messages")).st_size != want:
        assert time.monotonic() < deadline, os.stat(m.path("w", "0", "messages")).st_size
        time.sleep(0.2)
    time.sleep(2.5)  # a save of the marks
    m.kill9()
    m.start()
    assert os.stat(m.path("w", "0", "messages")).st_size == want
    assert sh(f"tail -n 1 {m.path('w', '0', 'messages')}").stdout == \
        b"line-0199999-" + b"z" * 100 + b"\n"
    assert os.stat(m.path("w", "0", "records.jsonl")).st_size > want  # measured too


def test_the_size_of_a_growing_view_never_goes_back(mount_factory):
    """``stat`` of ``messages``/``records.jsonl`` while appenders write through the mount:
    a size never goes down (a getattr that brought the view up to date while an append
    landed once answered 0 as if the view had never been measured, and ``tail -f`` said
    "file truncated" and printed the file again), and ``tail -f`` prints each line once."""
    m = mount_factory()
    os.mkdir(m.path("g"))
    append = m.path("g", "0", "append")
    with open(append, "ab") as f:
        f.write(b"".join(b"first-%03d\n" % i for i in range(100)))
    stop = threading.Event()
    written = [100]

    def appender():
        chunk = b"".join(b"more-%05d-%s\n" % (i, b"y" * 60) for i in range(20))
        while not stop.is_set():
            with open(append, "ab") as f:
                f.write(chunk)
            written[0] += 20

    tail = subprocess.Popen(["tail", "-n", "+1", "-f", "-s", "0.05", m.path("g", "0", "messages")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    threads = [threading.Thread(target=appender) for _ in range(2)]
    for t in threads:
        t.start()
    last = {"messages": 0, "records.jsonl": 0}
    deadline = time.monotonic() + 4
    stats = 0
    try:
        while time.monotonic() < deadline:
            for name in last:
                size = os.stat(m.path("g", "0", name)).st_size
                assert size >= last[name], (name, last[name], size, stats)
                last[name] = size
                stats += 1
        stop.set()
        for t in threads:
            t.join()
        want = os.stat(m.path("g", "0", "messages")).st_size
        deadline = time.monotonic() + 20
        out = b""
        os.set_blocking(tail.stdout.fileno(), False)
        while len(out) < want and time.monotonic() < deadline:
            out += tail.stdout.read() or b""
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join()
        tail.kill()
        _, err = tail.communicate()
    assert b"truncated" not in err, err
    assert len(out) == want and out.count(b"\n") == written[0]
