"""The key view (``<topic>/key/<k>``, ``<topic>/<p>/key/<k>``) driven by real tools through a
real mount: echo >, echo >>, cat, rm, ls, getfattr, touch; awkward keys through the escaped
names; the partitioner checked against kafka-python's; read-only mounts; the key map kept
across remounts; what was written read back with kafka-python's decoder."""

from __future__ import annotations

import base64
import errno
import hashlib
import os
import shutil

import pytest
from conftest import sh, wait_for

from kafkafs.fs.keys import ESCAPE, Hashed, key_name, parse_name
from kafkafs.log.keymap import KEYMAP_FILE


def records_of(log_dir: str, topic: str, partition: int = 0) -> list[tuple]:
    """``(offset, key, value)`` of every record in the partition's segments, decoded by
    kafka-python (an independent decoder)."""
    from kafka.record import MemoryRecords

    pdir = os.path.join(log_dir, f"{topic}-{partition}")
    out = []
    for name in sorted(n for n in os.listdir(pdir) if n.endswith(".log")):
        mr = MemoryRecords(open(os.path.join(pdir, name), "rb").read())
        while mr.has_next():
            batch = mr.next_batch()
            if batch.is_control_batch:
                continue
            out.extend((r.offset, r.key, r.value) for r in batch)
    return out


def their_partition(key: bytes, n: int) -> int:
    """kafka-python's DefaultPartitioner for a topic of ``n`` partitions."""
    from kafka.partitioner.default import DefaultPartitioner

    class Cluster:  # the little of ClusterMetadata the partitioner asks
        def topics(self):
            return {"t"}

        def partitions_for_topic(self, topic):
            return set(range(n))

        def available_partitions_for_topic(self, topic):
            return set(range(n))

    return DefaultPartitioner().partition("t", key, key, None, None, Cluster())


# -- names (no mount) ----------------------------------------------------------------------
@pytest.mark.parametrize("key,name", [
    (b"plain", b"plain"),
    (b"caf\xc3\xa9", b"caf\xc3\xa9"),
    (b"a/b", ESCAPE + base64.urlsafe_b64encode(b"a/b").rstrip(b"=")),
    (b"nul\0here", ESCAPE + base64.urlsafe_b64encode(b"nul\0here").rstrip(b"=")),
    (b".", ESCAPE + b"Lg"), (b"..", ESCAPE + b"Li4"), (b"", ESCAPE),
    (b"\xff\xfe", ESCAPE + b"__4"),
    (b"%=looks escaped", ESCAPE + base64.urlsafe_b64encode(b"%=looks escaped").rstrip(b"=")),
    (b"%single percent is fine", b"%single percent is fine"),
])
def test_names(key, name):
    assert key_name(key) == name
    assert parse_name(name) == key


def test_long_keys_are_named_by_digest():
    for key in (b"x" * 255, b"y" * 256, bytes(range(256)) * 2):
        name = key_name(key)
        assert len(name) <= 255 and b"/" not in name and b"\0" not in name
        parsed = parse_name(name)
        if len(key) <= 255 and b"/" not in key:
            assert parsed == key
        else:
            assert isinstance(parsed, Hashed)
            assert parsed.digest == hashlib.blake2b(key, digest_size=16).digest()
            assert name == ESCAPE + b"#" + parsed.digest.hex().encode()
    # base64 up to what fits in 255 bytes; a digest name beyond
    assert parse_name(key_name(b"\xff" * 189)) == b"\xff" * 189
    assert isinstance(parse_name(key_name(b"\xff" * 190)), Hashed)


@pytest.mark.parametrize("name", [
    ESCAPE + b"cGxhaW4",  # 'plain' escaped: plain keys have only their own name
    ESCAPE + b"Lg==",  # padding
    ESCAPE + b"L!g",  # not base64url
    ESCAPE + b"#" + b"AB" * 16,  # upper-case hex
    ESCAPE + b"#abc",  # too short
    b"\xff",  # not UTF-8: only the escaped name
])
def test_other_spellings_name_no_key(name):
    with pytest.raises(ValueError):
        parse_name(name)


def test_names_are_a_bijection_on_random_keys():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=500, deadline=None)
    @given(st.binary(max_size=300))
    def check(key):
        name = key_name(key)
        assert 0 < len(name) <= 255 and b"/" not in name and b"\0" not in name
        assert name not in (b".", b"..")
        name.decode("utf-8")
        parsed = parse_name(name)
        assert parsed == key or (isinstance(parsed, Hashed) and
                                 parsed.digest == hashlib.blake2b(key, digest_size=16).digest())

    check()


# -- through the mount -----------------------------------------------------------------------
def test_echo_cat_rm_ls_getfattr(mount):
    os.mkdir(mount.path("t"))
    k = mount.path("t", "key")
    assert os.listdir(k) == []
    assert sh(f"echo hello > {k}/greeting").returncode == 0
    assert sh(f"cat {k}/greeting").stdout == b"hello\n"  # the trailing newline as written
    assert sh(f"printf 'no newline' > {k}/other").returncode == 0
    assert open(f"{k}/other", "rb").read() == b"no newline"
    assert sorted(os.listdir(k)) == ["greeting", "other"]
    st = os.stat(f"{k}/greeting")
    assert st.st_size == 6
    # overwrite: the new value, a new version
    assert sh(f"echo bye > {k}/greeting").returncode == 0
    assert sh(f"cat {k}/greeting").stdout == b"bye\n"
    # >> appends to the current value
    assert sh(f"echo more >> {k}/greeting").returncode == 0
    assert sh(f"cat {k}/greeting").stdout == b"bye\nmore\n"
    r = sh(f"getfattr -d -m user.kafka {k}/greeting")
    out = r.stdout.decode()
    recs = records_of(mount.log_dirs[0], "t")
    last = max(off for off, key, _v in recs if key == b"greeting")
    assert f'user.kafka.offset="{last}"' in out
    assert 'user.kafka.partition="0"' in out
    assert 'user.kafka.key="greeting"' in out
    assert 'user.kafka.topic="t"' in out and "user.kafka.timestamp=" in out
    assert 'user.kafka.timestamp_type="CreateTime"' in out
    ts = int(out.split('user.kafka.timestamp="')[1].split('"')[0])
    assert int(os.stat(f"{k}/greeting").st_mtime * 1000) == ts  # st_mtime: the record's
    # the same record as offset/N, byte for byte
    assert open(mount.path("t", "0", "offset", str(last)), "rb").read() == b"bye\nmore\n"
    assert sh(f"rm {k}/greeting").returncode == 0
    r = sh(f"cat {k}/greeting")
    assert r.returncode != 0 and b"No such file" in r.stderr
    assert os.listdir(k) == ["other"]
    assert sh(f"rm {k}/greeting").returncode != 0  # ENOENT: nothing to delete
    assert sh(f"rm -f {k}/greeting").returncode == 0
    # the log holds exactly what a producer would have sent (kafka-python decodes it)
    recs = records_of(mount.log_dirs[0], "t")
    assert [(key, v) for _o, key, v in recs] == [
        (b"greeting", b"hello\n"), (b"other", b"no newline"), (b"greeting", b"bye\n"),
        (b"greeting", b"bye\nmore\n"), (b"greeting", None)]


def test_truncate_touch_and_empty_values(mount):
    os.mkdir(mount.path("t"))
    k = mount.path("t", "key")
    sh(f"echo v > {k}/a")
    assert sh(f": > {k}/a").returncode == 0  # truncated to an empty value
    assert open(f"{k}/a", "rb").read() == b"" and os.path.exists(f"{k}/a")
    assert sh(f"touch {k}/new").returncode == 0  # a new key with an empty value
    assert open(f"{k}/new", "rb").read() == b""
    sh(f"echo keep > {k}/b")
    assert sh(f"touch {k}/b").returncode == 0  # touching an existing key changes nothing
    assert open(f"{k}/b", "rb").read() == b"keep\n"
    assert sh(f"truncate -s 2 {k}/b").returncode == 0
    assert open(f"{k}/b", "rb").read() == b"ke"
    fd = os.open(f"{k}/b", os.O_WRONLY)  # no O_TRUNC: writes land at their offset
    os.pwrite(fd, b"XY", 1)
    os.close(fd)
    assert open(f"{k}/b", "rb").read() == b"kXY"
    with pytest.raises(OSError) as e:
        os.open(f"{k}/b", os.O_RDWR)
    assert e.value.errno == errno.EACCES
    with pytest.raises(OSError) as e:
        os.open(f"{k}/b", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    assert e.value.errno == errno.EEXIST
    values = [(key, v) for _o, key, v in records_of(mount.log_dirs[0], "t")]
    assert values == [(b"a", b"v\n"), (b"a", b""), (b"new", b""), (b"b", b"keep\n"),
                      (b"b", b"ke"), (b"b", b"kXY")]


def test_writes_through_append_show_in_the_key_view(mount_factory):
    m = mount_factory(options=["parse.key=true,key.separator=:"])
    os.mkdir(m.path("t"))
    sh(f"printf 'a:1\\nb:2\\na:3\\n' >> {m.path('t', '0', 'append')}")
    assert open(m.path("t", "key", "a"), "rb").read() == b"3"
    assert sorted(os.listdir(m.path("t", "key"))) == ["a", "b"]
    sh(f"printf 'b:22\\n' >> {m.path('t', '0', 'append')}")
    assert open(m.path("t", "key", "b"), "rb").read() == b"22"  # never a cached name


def test_awkward_keys(mount_factory):
    m = mount_factory(options=["parse.key=true,key.separator=:"])
    os.mkdir(m.path("t"))
    k = m.path("t", "key")
    slash = key_name(b"orders/2024").decode()
    nul = key_name(b"a\0b").decode()
    dot, dotdot = key_name(b".").decode(), key_name(b"..").decode()
    for name, value in ((slash, "s"), (nul, "n"), (dot, "d"), (dotdot, "dd")):
        assert sh(f"printf '{value}' > '{k}/{name}'").returncode == 0, name
        assert open(f"{k}/{name}", "rb").read() == value.encode()
    # a key that begins with the reserved prefix is escaped too
    prefixed = key_name(b"%=x").decode()
    assert prefixed != "%=x"
    sh(f"printf p > '{k}/{prefixed}'")
    assert not os.path.exists(f"{k}/%=x")
    # a 300-byte key and a key that is not UTF-8, appended with parse.key
    long_key = b"L" * 300
    bad = b"\xff\xfebad"
    with open(m.path("t", "0", "append"), "ab") as f:
        f.write(long_key + b":long value\n" + bad + b":not utf-8\n")
    long_name = key_name(long_key).decode()
    assert long_name.startswith("%=#") and len(long_name) == 35
    assert open(f"{k}/{long_name}", "rb").read() == b"long value"
    bad_name = key_name(bad).decode()
    assert open(f"{k}/{bad_name}", "rb").read() == b"not utf-8"
    assert sorted(os.listdir(k)) == sorted([slash, nul, dot, dotdot, prefixed, long_name,
                                            bad_name])
    r = sh(f"getfattr --only-values -n user.kafka.key '{k}/{long_name}'")
    assert r.stdout == long_key
    # a digest name rewrites and removes the key it names
    assert sh(f"printf again > '{k}/{long_name}'").returncode == 0
    assert open(f"{k}/{long_name}", "rb").read() == b"again"
    assert sh(f"rm '{k}/{long_name}'").returncode == 0
    assert not os.path.exists(f"{k}/{long_name}")
    # ... but creates nothing: the key's bytes are not in the name
    r = sh(f"printf x > '{k}/%=#{'0' * 32}'")
    assert r.returncode != 0 and b"Invalid argument" in r.stderr
    # other spellings of a name are no name
    assert not os.path.exists(f"{k}/%=b3JkZXJzLzIwMjQ=")  # padded
    r = sh(f"printf x > '{k}/%=!!'")
    assert r.returncode != 0
    keys = {key: v for _o, key, v in records_of(m.log_dirs[0], "t")}
    assert keys[b"orders/2024"] == b"s" and keys[b"a\0b"] == b"n"
    assert keys[b"."] == b"d" and keys[b".."] == b"dd" and keys[b"%=x"] == b"p"
    assert keys[long_key] is None and keys[bad] == b"not utf-8"


def test_topic_view_follows_kafkas_partitioner(mount_factory):
    m = mount_factory(options=["parse.key=true,key.separator=:"],
                      extra_args=["--override", "num.partitions=3"])
    os.mkdir(m.path("t"))
    keys = [b"k%d" % i for i in range(30)]
    for key in keys:
        assert sh(f"printf 'v-{key.decode()}' > {m.path('t', 'key', key.decode())}").returncode == 0
    homes = {}
    for p in range(3):
        for _o, key, value in records_of(m.log_dirs[0], "t", p):
            homes[key] = p
            assert value == b"v-" + key
    assert homes == {key: their_partition(key, 3) for key in keys}
    assert len(set(homes.values())) == 3
    for p in range(3):
        assert sorted(os.listdir(m.path("t", str(p), "key"))) == \
            sorted(k.decode() for k in keys if homes[k] == p)
    assert sorted(os.listdir(m.path("t", "key"))) == sorted(k.decode() for k in keys)
    # a key appended into a partition the partitioner does not pick: that partition's
    # view shows it, the topic's view does not
    key = next(k for k in (b"x%d" % i for i in range(100)) if their_partition(k, 3) != 1)
    with open(m.path("t", "1", "append"), "ab") as f:
        f.write(key + b":elsewhere\n")
    assert open(m.path("t", "1", "key", key.decode()), "rb").read() == b"elsewhere"
    assert not os.path.exists(m.path("t", "key", key.decode()))
    assert key.decode() not in os.listdir(m.path("t", "key"))
    # writing in a partition's view goes into that partition, whatever the partitioner
    sh(f"printf here > {m.path('t', '1', 'key', key.decode())}")
    assert (key, b"here") in [(k, v) for _o, k, v in records_of(m.log_dirs[0], "t", 1)]
    sh(f"rm {m.path('t', '1', 'key', key.decode())}")
    assert not os.path.exists(m.path("t", "1", "key", key.decode()))


def test_aborted_transaction_shows_the_previous_value(mount_factory, tmp_path):
    from kafkafs.log.config import BrokerConfig
    from kafkafs.log.manager import LogManager
    from kafkafs.record.batch import encode_batch
    from kafkafs.record.control import ABORT, encode_end_txn_marker_batch

    logs = str(tmp_path / "logs")
    mgr = LogManager(BrokerConfig().with_log_dirs([logs]))
    mgr.startup()
    lg = mgr.create_topic("t", 1)[0]
    lg.append([(1, b"k", b"committed", ())])
    lg.append_encoded(bytearray(encode_batch([(2, b"k", b"aborted", ()), (2, b"n", b"x", ())],
                                             producer_id=5, producer_epoch=0,
                                             base_sequence=0, is_transactional=True)))
    lg.append_encoded(bytearray(encode_end_txn_marker_batch(
        ABORT, base_offset=0, timestamp=3, producer_id=5, producer_epoch=0,
        coordinator_epoch=1)))
    lg.append_encoded(bytearray(encode_batch([(4, b"open", b"txn", ())], producer_id=6,
                                             producer_epoch=0, base_sequence=0,
                                             is_transactional=True)))
    lg.append([(5, b"late", b"past the LSO", ())])
    mgr.shutdown()
    m = mount_factory()
    assert open(m.path("t", "key", "k"), "rb").read() == b"committed"
    assert os.listdir(m.path("t", "key")) == ["k"]  # nothing aborted, nothing past the LSO
    assert not os.path.exists(m.path("t", "key", "late"))


def test_read_only_mount(mount_factory):
    m = mount_factory()
    os.mkdir(m.path("t"))
    sh(f"echo v > {m.path('t', 'key', 'a')}")
    assert m.umount() == 0
    m = mount_factory(extra_args=["--read-only"])
    k = m.path("t", "key")
    assert open(f"{k}/a", "rb").read() == b"v\n"
    for cmd in (f"echo w > {k}/a", f"echo w > {k}/b", f"echo w >> {k}/a", f"rm {k}/a",
                f"touch {k}/c"):
        r = sh(cmd)
        assert r.returncode != 0 and b"Read-only file system" in r.stderr, cmd
    with pytest.raises(OSError) as e:
        os.open(f"{k}/a", os.O_WRONLY)
    assert e.value.errno == errno.EROFS
    assert open(f"{k}/a", "rb").read() == b"v\n"
    assert oct(os.stat(f"{k}/a").st_mode & 0o777) == "0o444"


def test_value_too_large_is_refused_at_the_write(mount_factory):
    m = mount_factory(extra_args=["--override", "message.max.bytes=1000"])
    os.mkdir(m.path("t"))
    k = m.path("t", "key")
    sh(f"echo small > {k}/a")
    fd = os.open(f"{k}/a", os.O_WRONLY | os.O_TRUNC)
    assert os.write(fd, b"x" * 500) == 500
    with pytest.raises(OSError) as e:
        os.write(fd, b"x" * 600)
    assert e.value.errno == errno.EMSGSIZE
    os.close(fd)  # what fitted is produced: 500 bytes
    assert open(f"{k}/a", "rb").read() == b"x" * 500
    r = sh(f"head -c 2000 /dev/zero > {k}/b")
    assert r.returncode != 0 and b"Message too long" in r.stderr


def test_remount_loads_the_saved_map(mount_factory):
    m = mount_factory(options=["parse.key=true,key.separator=:"])
    os.mkdir(m.path("t"))
    lines = b"".join(b"k%d:v%d\n" % (i % 500, i) for i in range(2000))
    with open(m.path("t", "0", "append"), "ab") as f:
        f.write(lines)
    assert open(m.path("t", "key", "k7"), "rb").read() == b"v1507"
    assert "Key map of t-0: no saved key map; building it by one scan" in m.log()
    assert m.umount() == 0
    mapfile = os.path.join(m.log_dirs[0], "t-0", KEYMAP_FILE)
    assert os.path.isfile(mapfile)
    # the broker-facing view of the partition: one regular file more, nothing else
    m = mount_factory(options=["parse.key=true,key.separator=:"])
    assert open(m.path("t", "key", "k7"), "rb").read() == b"v1507"
    log = m.log()
    assert "Key map of t-0 loaded: 500 keys up to offset 2000" in log
    assert "building it by one scan" not in log
    # appended while mounted again, then unmounted: read incrementally at the next mount
    with open(m.path("t", "0", "append"), "ab") as f:
        f.write(b"k7:newer\n")
    assert open(m.path("t", "key", "k7"), "rb").read() == b"newer"
    assert m.umount() == 0
    m = mount_factory()
    assert open(m.path("t", "key", "k7"), "rb").read() == b"newer"
    assert "Key map of t-0 loaded: 500 keys up to offset 2001" in m.log()
    assert m.umount() == 0
    # the map deleted: rebuilt by one scan
    os.unlink(mapfile)
    m = mount_factory()
    assert open(m.path("t", "key", "k8"), "rb").read() == b"v1508"
    assert "no saved key map; building it by one scan" in m.log()


def test_stale_map_after_restoring_an_older_backup_is_rebuilt(mount_factory, tmp_path):
    m = mount_factory()
    os.mkdir(m.path("t"))
    k = m.path("t", "key")
    for i in range(5):
        sh(f"echo old-{i} > {k}/k{i}")
    assert m.umount() == 0
    pdir = os.path.join(m.log_dirs[0], "t-0")
    backup = str(tmp_path / "backup")
    shutil.copytree(pdir, backup)  # segments and the map as they were
    m = mount_factory()
    for i in range(5):
        sh(f"echo new-{i} > {k}/k{i}")
    sh(f"echo only-new > {k}/fresh")
    assert m.umount() == 0
    # restore the older segments but keep the newer map: it covers offsets the log lacks
    newer_map = open(os.path.join(pdir, KEYMAP_FILE), "rb").read()
    shutil.rmtree(pdir)
    shutil.copytree(backup, pdir)
    open(os.path.join(pdir, KEYMAP_FILE), "wb").write(newer_map)
    m = mount_factory()
    assert open(f"{k}/k3", "rb").read() == b"old-3\n"
    assert not os.path.exists(f"{k}/fresh")
    assert "the saved key map does not match the log" in m.log()
    assert "truncated" in m.log()


def test_retention_removing_a_keys_latest_record(mount_factory):
    m = mount_factory(extra_args=["--override", "log.segment.bytes=1024",
                                  "--override", "log.retention.bytes=3000",
                                  "--override", "log.retention.check.interval.ms=500"])
    os.mkdir(m.path("t"))
    k = m.path("t", "key")
    sh(f"echo first > {k}/early")
    # the map knows it (read now: once the busy writes pass retention.bytes, the next
    # retention check, every 0.5 s, may remove it before a slow loop ends)
    assert open(f"{k}/early", "rb").read() == b"first\n"
    for i in range(60):
        sh(f"echo value-{i:04d}-{'x' * 40} > {k}/busy")
    assert wait_for(lambda: "0" not in os.listdir(m.path("t", "0", "offset")), 20)
    # its record is gone with the oldest segment: the key is gone (ENOENT, never stale)
    assert not os.path.exists(f"{k}/early")
    assert os.listdir(k) == ["busy"]
    assert open(f"{k}/busy", "rb").read().startswith(b"value-0059-")


def test_many_keys_are_listed_streaming(mount_factory):
    m = mount_factory(options=["parse.key=true,key.separator=:"])
    os.mkdir(m.path("t"))
    n = 20000
    with open(m.path("t", "0", "append"), "ab") as f:
        f.write(b"".join(b"key-%05d:%d\n" % (i, i) for i in range(n)))
        f.write(b"".join(b"key-%05d:again %d\n" % (i, i) for i in range(0, n, 2)))
    r = sh(f"ls -f {m.path('t', 'key')}")
    names = r.stdout.decode().split()
    assert len(names) == n and len(set(names)) == n
    assert set(names) == {f"key-{i:05d}" for i in range(n)}
    r = sh(f"ls -l {m.path('t', '0', 'key')} | head -3")
    assert r.returncode == 0
    assert open(m.path("t", "key", "key-00004"), "rb").read() == b"again 4"
    assert open(m.path("t", "key", "key-00005"), "rb").read() == b"5"


def test_full_disk_fails_the_close(small_disk_mount):
    m = small_disk_mount
    m.start()
    os.mkdir(m.path("t"))
    sh(f"echo before > {m.path('t', 'key', 'k')}")
    fd = os.open(m.path("t", "0", "append"), os.O_WRONLY | os.O_APPEND)
    with pytest.raises(OSError):
        for i in range(100000):
            os.write(fd, b"filler-%06d-" % i + b"y" * 100 + b"\n")
    os.close(fd)
    fd = os.open(m.path("t", "key", "k"), os.O_WRONLY | os.O_TRUNC)
    os.write(fd, b"z" * 4000)
    with pytest.raises(OSError) as e:
        os.close(fd)
    assert e.value.errno == errno.ENOSPC
    assert open(m.path("t", "key", "k"), "rb").read() == b"before\n"
