"""A log dir is untrusted input (docs/design.md §2.4, issue 10 §1): whoever can write into
it must not make kafkafs create, write, truncate, rename, delete -- or read -- anything
outside it.

Each test plants links (and FIFOs) in a log dir the way an attacker would, runs the real
daemon or the real CLI on it, and compares a directory outside the log dir before and after
(every name, byte, size and mtime, :func:`conftest.tree_state`). The daemon must also say
once, naming the path, what it skipped."""

from __future__ import annotations

import os
import shutil
import time

import pytest
from conftest import Mount, fuse_available, kafkafs, tree_state

from kafkafs.log.config import BrokerConfig
from kafkafs.log.manager import LogManager

needs_fuse = pytest.mark.skipif(not fuse_available(), reason="FUSE is not available")

SHADOW = b"root:$6$hash:19000:0:99999:7:::\n"  # 32 bytes
SEG0 = "00000000000000000000"


@pytest.fixture
def outside(tmp_path):
    """A directory outside the log dir: ``shadow`` (the issue's victim, mtime set in the
    past so that any write shows) and ``data/`` (a directory with a file)."""
    d = tmp_path / "outside"
    (d / "data").mkdir(parents=True)
    (d / "shadow").write_bytes(SHADOW)
    (d / "data" / "keep.txt").write_bytes(b"keep me\n")
    for p in (d / "shadow", d / "data" / "keep.txt"):
        os.utime(p, ns=(1_500_000_000_000_000_000, 1_500_000_000_000_000_000))
    return str(d)


@pytest.fixture
def ld(tmp_path):
    """A log dir with topic ``v`` holding one record ``a`` (offset 0; a producer snapshot at
    1), made with the CLI as the issue does: ``kafkafs topics --create``, ``produce``."""
    d = str(tmp_path / "logs")
    kafkafs("topics", "--log-dirs", d, "--create", "--topic", "v")
    kafkafs("produce", "--log-dirs", d, "--topic", "v", input=b"a\n")
    return d


def _warned(log: str, path: str) -> int:
    """How many times the daemon logged that it skipped ``path``."""
    return log.count(f"Skipping {path}: ")


def _cycle(tmp_path, log_dir, **kw) -> Mount:
    """Mount ``log_dir``, read ``v``'s messages, unmount; returns the (stopped) Mount."""
    m = Mount(tmp_path, log_dirs=[log_dir], **kw)
    m.start()
    try:
        with open(m.path("v", "0", "messages"), "rb") as f:
            assert f.read() == b"a\n"
    finally:
        rc = m.umount()
    assert rc == 0, m.log()
    return m


# -- the reproduction ---------------------------------------------------------------
@needs_fuse
def test_planted_segment_link_does_not_truncate_a_file_outside(tmp_path, ld, outside):
    victim = os.path.join(outside, "shadow")
    link = os.path.join(ld, "v-0", "00000000000000000005.log")
    os.symlink(victim, link)
    before = tree_state(outside)
    m = _cycle(tmp_path, ld)
    assert tree_state(outside) == before  # bytes, size and mtime of the victim unchanged
    log = m.log()
    assert _warned(log, link) == 1 and "symbolic link" in log, log
    assert "Truncating" not in log
    assert os.path.islink(link)  # left alone: it does not exist for kafkafs


# -- the same plant for every file kafkafs keeps in a log dir ---------------------------------
DAEMON_PLANTS = [
    "v-0/" + SEG0 + ".index",
    "v-0/" + SEG0 + ".timeindex",
    "v-0/" + SEG0 + ".txnindex",
    "v-0/00000000000000000001.snapshot",
    "v-0/leader-epoch-checkpoint",
    "v-0/partition.metadata",
    "recovery-point-offset-checkpoint",
    "log-start-offset-checkpoint",
    "meta.properties",
    "kafkafs-topic-configs.json",
    ".kafka_cleanshutdown",
]


@needs_fuse
@pytest.mark.parametrize("name", DAEMON_PLANTS)
def test_a_planted_link_is_never_written_through(tmp_path, ld, outside, name):
    """A link in place of each file the daemon reads or writes: the daemon mounts, serves,
    unmounts cleanly, warns once, and nothing outside changes. The files it writes at
    startup or shutdown (meta.properties, the checkpoints, the clean-shutdown marker, the
    active segment's offset and time index) are regular files afterwards: the link was
    replaced, not written through."""
    path = os.path.join(ld, name)
    if os.path.exists(path):
        os.unlink(path)
    os.symlink(os.path.join(outside, "shadow"), path)
    before = tree_state(outside)
    m = _cycle(tmp_path, ld)
    assert tree_state(outside) == before
    assert _warned(m.log(), path) == 1, m.log()
    rewritten = ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                 "meta.properties", ".kafka_cleanshutdown", "v-0/" + SEG0 + ".index",
                 "v-0/" + SEG0 + ".timeindex")
    if name in rewritten:
        assert not os.path.islink(path) and os.path.isfile(path)


@needs_fuse
def test_a_planted_tmp_file_of_an_atomic_write_is_replaced(tmp_path, ld, outside):
    """Checkpoints and producer snapshots are written as ``<name>.tmp`` then renamed: a link
    planted at the ``.tmp`` name (before the daemon starts, or while it runs) is unlinked
    first, never written through."""
    victim = os.path.join(outside, "shadow")
    ckpt_tmp = os.path.join(ld, "recovery-point-offset-checkpoint.tmp")
    os.symlink(victim, ckpt_tmp)
    before = tree_state(outside)
    m = Mount(tmp_path, log_dirs=[ld])
    m.start()
    try:
        # the snapshot written at shutdown, at the log end offset 2 (the loader already ran)
        snap_tmp = os.path.join(ld, "v-0", "00000000000000000002.snapshot.tmp")
        os.symlink(victim, snap_tmp)
        with open(m.path("v", "0", "append"), "ab") as f:
            f.write(b"b\n")
    finally:
        assert m.umount() == 0, m.log()
    assert tree_state(outside) == before
    assert not os.path.lexists(ckpt_tmp) and not os.path.lexists(snap_tmp)
    assert os.path.isfile(os.path.join(ld, "v-0", "00000000000000000002.snapshot"))


@needs_fuse
def test_a_planted_lock_file_refuses_the_start(tmp_path, ld, outside):
    """``.lock`` as a link (here dangling: open(O_CREAT) would create its target): the
    daemon refuses to start with one clear error naming it, and creates nothing outside."""
    lock = os.path.join(ld, ".lock")
    os.unlink(lock)
    os.symlink(os.path.join(outside, "created-by-kafkafs"), lock)
    before = tree_state(outside)
    m = Mount(tmp_path, log_dirs=[ld])
    try:
        with pytest.raises(RuntimeError) as exc:
            m.start(timeout=10)
    finally:
        m.stop()  # (when it did start)
    assert f"Refusing to use {lock}: it is a symbolic link" in str(exc.value)
    assert "Traceback" not in str(exc.value)
    assert tree_state(outside) == before


@needs_fuse
def test_a_partition_dir_that_is_a_link_is_skipped(tmp_path, ld, outside):
    """``w-0`` linking to a directory outside that holds a whole partition: not loaded (not
    shown), warned about once, and not a name, byte or mtime changes there."""
    shutil.copytree(os.path.join(ld, "v-0"), os.path.join(outside, "data", "w-0"))
    link = os.path.join(ld, "w-0")
    os.symlink(os.path.join(outside, "data", "w-0"), link)
    before = tree_state(outside)
    m = _cycle(tmp_path, ld)
    assert tree_state(outside) == before
    assert _warned(m.log(), link) == 1, m.log()


# -- reading ----------------------------------------------------------------------------------
@needs_fuse
def test_a_read_only_mount_never_serves_a_file_outside(tmp_path, ld):
    """A ``.log`` link to another log dir's segment (records the reader may not see): a
    read-only mount shows nothing of it through messages, records.jsonl, offset/N or
    segments/."""
    secret_dir = str(tmp_path / "private")
    m = LogManager(BrokerConfig.from_properties({}).with_log_dirs([secret_dir]))
    m.startup()
    lg = m.create_topic("s", 1)[0]
    lg.truncate_fully_and_start_at(1)  # offsets 1.. in 00000000000000000001.log
    lg.append([(1_700_000_000_000, None, b"top-secret-%d" % i, ()) for i in range(3)])
    assert m.shutdown()
    secret = os.path.join(secret_dir, "s-0", "00000000000000000001.log")
    link = os.path.join(ld, "v-0", "00000000000000000001.log")
    os.symlink(secret, link)
    mnt = Mount(tmp_path, log_dirs=[ld], options=["ro"])
    mnt.start()
    try:
        p = mnt.path("v", "0")
        shown = b""
        for name in ("messages", "records.jsonl"):
            with open(os.path.join(p, name), "rb") as f:
                shown += f.read()
        for n in os.listdir(os.path.join(p, "offset")):
            with open(os.path.join(p, "offset", n), "rb") as f:
                shown += f.read()
        assert b"a" in shown and b"top-secret" not in shown
        assert not os.path.exists(os.path.join(p, "offset", "1"))
        assert "00000000000000000001.log" not in os.listdir(os.path.join(p, "segments"))
        assert not os.path.exists(os.path.join(p, "segments", "00000000000000000001.log"))
    finally:
        assert mnt.umount() == 0
    assert _warned(mnt.log(), link) == 1, mnt.log()


@needs_fuse
@pytest.mark.parametrize("name", ["v-0/00000000000000000005.log", "v-0/" + SEG0 + ".index",
                                  "recovery-point-offset-checkpoint"])
def test_a_planted_fifo_never_hangs_the_daemon(tmp_path, ld, name):
    """A FIFO as a segment, an index, a checkpoint: opened non-blocking and refused after
    fstat, so the daemon mounts and unmounts within seconds, with one warning."""
    path = os.path.join(ld, name)
    if os.path.exists(path):
        os.unlink(path)
    os.mkfifo(path)
    t0 = time.monotonic()
    m = Mount(tmp_path, log_dirs=[ld])
    try:
        m.start(timeout=10)
        with open(m.path("v", "0", "messages"), "rb") as f:
            assert f.read() == b"a\n"
    finally:
        m.stop()
    assert time.monotonic() - t0 < 10
    assert _warned(m.log(), path) == 1 and "FIFO" in m.log(), m.log()


# -- retention -------------------------------------------------------------------------------
@needs_fuse
def test_retention_of_a_segment_whose_time_index_is_a_link(tmp_path, outside):
    """Retention reads every old segment's time index (largest timestamp) and, after the
    delay, closes and deletes the segment: with its ``.timeindex`` replaced by a link to a
    file outside, that file is neither written nor truncated, and retention still works."""
    d = str(tmp_path / "logs")
    m = LogManager(BrokerConfig.from_properties({"log.segment.bytes": "1000"})
                   .with_log_dirs([d]))
    m.startup()
    lg = m.create_topic("v", 1)[0]
    for i in range(40):
        lg.append([(1_700_000_000_000 + i, None, b"line-%02d-" % i + b"x" * 40, ())])
    assert m.shutdown()
    victim = os.path.join(outside, "shadow")
    tindex = os.path.join(d, "v-0", SEG0 + ".timeindex")
    os.unlink(tindex)
    os.symlink(victim, tindex)
    before = tree_state(outside)
    args = []
    for k, v in {"log.retention.bytes": "1500", "log.retention.check.interval.ms": "200",
                 "log.segment.delete.delay.ms": "300"}.items():
        args += ["--override", f"{k}={v}"]
    mnt = Mount(tmp_path, log_dirs=[d], extra_args=args)
    mnt.start()
    try:
        deadline = time.monotonic() + 15
        while os.path.exists(os.path.join(d, "v-0", SEG0 + ".log")) or \
                any(n.endswith(".deleted") for n in os.listdir(os.path.join(d, "v-0"))):
            assert time.monotonic() < deadline, mnt.log()
            time.sleep(0.05)
    finally:
        assert mnt.umount() == 0, mnt.log()
    assert tree_state(outside) == before
    assert "by retention" in mnt.log()


# -- the command line ------------------------------------------------------------------------
def _plant_segment(ld, outside) -> str:
    link = os.path.join(ld, "v-0", "00000000000000000005.log")
    os.symlink(os.path.join(outside, "shadow"), link)
    return link


def test_check_and_repair_leave_a_file_outside_alone(tmp_path, ld, outside):
    """``kafkafs check`` names the planted link (a note: kafkafs ignores it) and
    ``--repair`` recovers the partition without truncating what it points to."""
    link = _plant_segment(ld, outside)
    before = tree_state(outside)
    r = kafkafs("check", "--log-dirs", ld, check=False)
    assert "v-0/00000000000000000005.log: 00000000000000000005.log is a symbolic link" \
        in r.stdout.decode(), r.stdout
    r = kafkafs("check", "--repair", "--log-dirs", ld, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert tree_state(outside) == before
    assert os.path.islink(link)


@pytest.mark.parametrize("name", ["replication-offset-checkpoint",
                                  "cleaner-offset-checkpoint",
                                  "v-0/leader-epoch-checkpoint", "meta.properties"])
@pytest.mark.parametrize("kind", ["link", "fifo"])
def test_check_reports_planted_files_without_reading_them(tmp_path, ld, outside, name, kind):
    """Files only ``kafkafs check`` reads (and a broker): a link is reported, not read; a
    FIFO neither blocks it."""
    path = os.path.join(ld, name)
    if os.path.exists(path):
        os.unlink(path)
    if kind == "link":
        os.symlink(os.path.join(outside, "shadow"), path)
    else:
        os.mkfifo(path)
    before = tree_state(outside)
    r = kafkafs("check", "--log-dirs", ld, check=False, timeout=20)
    what = "symbolic link" if kind == "link" else "FIFO"
    assert f"{os.path.basename(name)} is a {what}, not a regular file" in r.stdout.decode(), \
        r.stdout + r.stderr
    r = kafkafs("check", "--repair", "--log-dirs", ld, check=False, timeout=20)
    assert b"Traceback" not in r.stderr, r.stderr
    assert tree_state(outside) == before


def test_produce_leaves_a_file_outside_alone(tmp_path, ld, outside):
    _plant_segment(ld, outside)
    before = tree_state(outside)
    kafkafs("produce", "--log-dirs", ld, "--topic", "v", input=b"b\nc\n")
    assert tree_state(outside) == before
    r = kafkafs("consume", "--log-dirs", ld, "--topic", "v", "--from-beginning",
                "--timeout-ms", "200")
    assert r.stdout == b"a\nb\nc\n"


def test_topics_create_leaves_files_outside_alone(tmp_path, ld, outside):
    """``topics --create`` loads every partition (a planted segment link) and writes the
    topic configs as ``<file>.tmp`` then a rename (a planted ``.tmp`` link)."""
    _plant_segment(ld, outside)
    os.symlink(os.path.join(outside, "shadow"),
               os.path.join(ld, "kafkafs-topic-configs.json.tmp"))
    before = tree_state(outside)
    kafkafs("topics", "--log-dirs", ld, "--create", "--topic", "w", "--config",
            "retention.ms=60000")
    assert tree_state(outside) == before
    r = kafkafs("topics", "--log-dirs", ld, "--describe", "--topic", "w")
    assert b"retention.ms=60000" in r.stdout


def test_topics_delete_never_follows_a_link_inside(tmp_path, ld, outside):
    """Deleting a topic whose partition dir holds a link to a directory outside and a
    planted segment link: the topic goes, the directory outside keeps its files."""
    _plant_segment(ld, outside)
    os.symlink(os.path.join(outside, "data"), os.path.join(ld, "v-0", "data"))
    before = tree_state(outside)
    kafkafs("topics", "--log-dirs", ld, "--delete", "--topic", "v")
    assert tree_state(outside) == before
    assert not [n for n in os.listdir(ld) if n.startswith("v-")]


def test_dump_follows_the_named_file_but_not_what_it_finds_beside_it(tmp_path, ld):
    """``dump --files`` opens the file it is given even through a link (the user's choice);
    the ``.log`` it looks up beside an index is never a link nor a FIFO (which would block
    the open): an error naming it, exit 1, no traceback."""
    index = os.path.join(ld, "v-0", SEG0 + ".index")
    os.mkdir(tmp_path / "named")
    link = str(tmp_path / "named" / (SEG0 + ".index"))
    os.symlink(index, link)
    r = kafkafs("dump", "--files", link, check=False, timeout=20)
    assert r.returncode == 0 and b"Traceback" not in r.stderr, r.stderr
    log = os.path.join(ld, "v-0", SEG0 + ".log")
    with open(index, "wb") as f:  # one entry, so that dump looks into the .log
        f.write((1).to_bytes(4, "big") + bytes(4))
    os.unlink(log)
    os.mkfifo(log)
    r = kafkafs("dump", "--files", index, check=False, timeout=20)
    assert r.returncode == 1 and b"Traceback" not in r.stderr, r.stderr
    assert f"{log}: not a regular file but a FIFO".encode() in r.stderr, r.stderr


# -- a partition dir swapped for a link while the log is open ----------------------------------
def test_partition_dir_swapped_for_a_link_after_the_load(tmp_path, outside):
    """Every file operation of a loaded log goes through its partition dir's descriptor:
    after the dir is moved away and a link to a directory outside (holding files of the
    same names) put in its place, appends, rolls, retention, flushes and the shutdown all
    happen in the moved dir -- nothing outside changes, nothing is lost."""
    d = str(tmp_path / "logs")
    cfg = BrokerConfig.from_properties({"log.segment.bytes": "1000",
                                        "log.retention.bytes": "3000",
                                        "log.segment.delete.delay.ms": "0"}).with_log_dirs([d])
    m = LogManager(cfg)
    m.startup()
    lg = m.create_topic("v", 1)[0]
    for i in range(20):
        lg.append([(1_700_000_000_000 + i, None, b"line-%02d-" % i + b"x" * 40, ())])
    pdir = os.path.join(d, "v-0")
    lure = os.path.join(outside, "data", "v-0")
    shutil.copytree(pdir, lure)  # the same names outside: a path-based open would use them
    moved = os.path.join(str(tmp_path), "moved-v-0")
    os.rename(pdir, moved)
    os.symlink(lure, pdir)
    before = tree_state(outside)
    for i in range(20, 60):  # appends, several rolls
        lg.append([(1_700_000_000_000 + i, None, b"line-%02d-" % i + b"x" * 40, ())])
    assert lg.delete_old_segments() > 0
    lg.remove_deleted_segments(force=True)
    lg.flush()
    m.checkpoint_recovery_points()
    start = lg.log_start_offset
    assert m.shutdown()
    assert tree_state(outside) == before
    # everything went to the moved dir: it loads with every record from the start on
    os.unlink(pdir)
    os.rename(moved, pdir)
    m2 = LogManager(cfg)
    m2.startup()
    got = [r.value for b in m2.get_log("v", 0).batches(validate=True) for r in b.records()]
    assert got == [b"line-%02d-" % i + b"x" * 40 for i in range(start, 60)]
    m2.shutdown()
