"""Damaged log dirs (issue 10 §2, docs/design.md §5): the log is the truth, indexes are hints, and
every reader delivers every intact record up to the first damaged batch and then fails
clearly -- never a traceback, never a hang, never exit 0 with records missing.

The log dir: one partition, 10 segments of 3 batches of 10 records (offsets 0..299, values
``value-000``..``value-299``), codecs none/gzip/snappy/lz4/zstd in turn, an index entry
every 100 bytes. Each test damages a copy the way a disk, a copy or a person does, and
drives the real readers: ``kafkafs consume``/``dump``/``get-offsets`` as subprocesses, and a
real mount read with ``cat``, ``tail``, ``tar``, ``grep``, ``readlink``.
"""

from __future__ import annotations

import errno
import itertools
import json
import os
import struct
import time

import pytest
from conftest import Mount, fuse_available, kafkafs, sh
from crc32c import crc32c

from kafkafs.log.config import BrokerConfig
from kafkafs.log.manager import LogManager
from kafkafs.record.batch import iter_batches

needs_fuse = pytest.mark.skipif(not fuse_available(), reason="FUSE is not available")

TS = 1_700_000_000_000
VALUES = [b"value-%03d" % i for i in range(300)]


def _build(d: str) -> None:
    cfg = BrokerConfig.from_properties({"log.segment.bytes": "700",
                                        "log.index.interval.bytes": "100"}).with_log_dirs([d])
    m = LogManager(cfg)
    m.startup()
    m.create_topic("t", 1)
    lg = m.get_log("t", 0)
    for i in range(30):
        lg.append([(TS + i * 10 + j, b"k%d" % j if j % 2 else None, VALUES[i * 10 + j], ())
                   for j in range(10)], compression=i % 5)
    m.shutdown()


@pytest.fixture
def ld(tmp_path):
    d = str(tmp_path / "logs")
    _build(d)
    return d


def seg(ld: str, base: int, kind: str = ".log") -> str:
    return os.path.join(ld, "t-0", f"{base:020d}{kind}")


def positions(path: str) -> list[int]:
    with open(path, "rb") as f:
        return [b.position for b in iter_batches(f.read())]


def forge(path: str, position: int, edit) -> None:
    """Change the batch at ``position`` with ``edit(bytearray)`` and recompute its CRC, so
    that it looks valid to a CRC check."""
    with open(path, "r+b") as f:
        f.seek(position)
        head = f.read(12)
        size = struct.unpack(">i", head[8:12])[0] + 12
        f.seek(position)
        batch = bytearray(f.read(size))
        edit(batch)
        struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
        f.seek(position)
        f.write(batch)


def patch(path: str, position: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        f.write(data)


def consume(ld: str, *extra, timeout: float = 30):
    r = kafkafs("consume", "--log-dirs", ld, "--topic", "t", "--from-beginning",
                "--timeout-ms", "300", *extra, check=False, timeout=timeout)
    return r.returncode, r.stdout.splitlines(), r.stderr.decode()


def assert_consume_fails_at(ld: str, n: int, path: str, position: int, reason: str) -> None:
    """``consume`` prints the first ``n`` records, then one clean error (exit 1)."""
    rc, out, err = consume(ld)
    assert rc == 1 and out == VALUES[:n], err
    assert_clean_error(err, path, position, reason)


def assert_clean_error(err: str, path: str, position: int, reason: str) -> None:
    """One ``error:`` line naming file, position and reason; no traceback."""
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err
    assert errors[0].startswith(f"error: {path}: position {position}: "), err
    assert reason in errors[0], err


# -- indexes are hints ----------------------------------------------------------------------

@pytest.mark.parametrize("entry", [b"\x00\x00\x00\x05\xff\xff\xff\xf0",
                                   b"\x00\x00\x00\x05\x7f\xff\xff\xf0"],
                         ids=["negative-position", "position-past-end"])
@pytest.mark.parametrize("how", ["replace", "append"])
def test_bogus_index_entry_of_the_active_segment(ld, entry, how):
    """The issue's two entries written into the active segment's .index (as its only entry,
    or after the others): a traceback (EINVAL from pread) and 270 of 300 records with exit 0
    on the old code."""
    with open(seg(ld, 270, ".index"), "wb" if how == "replace" else "ab") as f:
        f.write(entry)
    rc, out, err = consume(ld)
    assert "Traceback" not in err
    assert (rc, out) == (0, VALUES), err
    # the reader rebuilt the index in memory: the file is left as it was
    with open(seg(ld, 270, ".index"), "rb") as f:
        assert f.read().endswith(entry)


def test_bogus_index_entries_of_sealed_segments_through_the_mount(ld, tmp_path):
    """Every index of a read-only mount scrambled: each offset/N still reads its own value
    (a lookup never trusts an entry the .log does not confirm)."""
    for base in range(0, 300, 30):
        path = seg(ld, base, ".index")
        size = os.path.getsize(path)
        if size >= 16:  # swap the first two entries: positions no longer increase
            with open(path, "r+b") as f:
                a, b = f.read(8), f.read(8)
                f.seek(0)
                f.write(b + a)
        with open(path, "ab") as f:
            f.write(struct.pack(">ii", 29, 0x7FFFFFF0))
    m = Mount(tmp_path, log_dirs=[ld], extra_args=["--read-only"]).start()
    try:
        for n in (0, 3, 29, 31, 57, 150, 229, 270, 299):
            with open(m.path("t", "0", "offset", str(n)), "rb") as f:
                assert f.read() == VALUES[n], n
    finally:
        m.stop()


def test_time_index_with_decreasing_timestamps(ld, tmp_path):
    """A .timeindex whose timestamps go down sent by-time to offset 30 for a timestamp of
    offset 3 on the old code; it is detected and rebuilt (ListOffsets semantics hold)."""
    with open(seg(ld, 0, ".timeindex"), "wb") as f:
        f.write(struct.pack(">qi", TS + 500, 5) + struct.pack(">qi", TS + 1, 10))
    r = kafkafs("get-offsets", "--log-dirs", ld, "--topic", "t", "--time", str(TS + 3))
    assert r.stdout == b"t:0:3\n"
    m = Mount(tmp_path, log_dirs=[ld], extra_args=["--read-only"]).start()
    try:
        assert os.readlink(m.path("t", "0", "by-time", str(TS + 3))) == "../offset/3"
        assert os.readlink(m.path("t", "0", "by-time", str(TS + 155))) == "../offset/155"
        with open(m.path("t", "0", "messages"), "rb") as f:
            assert f.read().splitlines() == VALUES
    finally:
        m.stop()


@needs_fuse
def test_time_index_entry_with_a_negative_timestamp_is_checked(ld):
    """A .timeindex entry whose timestamp was damaged to a negative number was taken for
    the "no entry" sentinel and used unchecked: get-offsets started at the offset it named
    and answered a later offset (found by bench/fuzz_logdir.py, seed 100, case 56811)."""
    bases = sorted(int(n[:20]) for n in os.listdir(os.path.join(ld, "t-0"))
                   if n.endswith(".log"))
    last_of_first = bases[1] - 1
    with open(seg(ld, 0, ".timeindex"), "wb") as f:
        f.write(struct.pack(">qi", -5946277112565304742, last_of_first) +
                struct.pack(">qi", TS + last_of_first, last_of_first))
    r = kafkafs("get-offsets", "--log-dirs", ld, "--topic", "t", "--time", str(TS + 1))
    assert r.stdout == b"t:0:1\n"


def test_bad_time_index_does_not_make_retention_delete_a_segment(tmp_path):
    """Retention ages a segment by its time index's last entry: a .timeindex whose
    timestamps go down to an ancient one had a read-write mount delete a segment of fresh
    records (messages then started at offset 30). The bad index is rebuilt first."""
    d = str(tmp_path / "logs")
    cfg = BrokerConfig.from_properties({"log.segment.bytes": "700"}).with_log_dirs([d])
    m = LogManager(cfg)
    m.startup()
    m.create_topic("t", 1)
    now = int(time.time() * 1000)
    for i in range(30):
        m.get_log("t", 0).append([(now + j, None, VALUES[i * 10 + j], ()) for j in range(10)])
    m.shutdown()
    with open(seg(d, 0, ".timeindex"), "wb") as f:
        f.write(struct.pack(">qi", now + 5, 5) + struct.pack(">qi", 1000, 10))
    mnt = Mount(tmp_path, log_dirs=[d],
                extra_args=["--override", "log.retention.check.interval.ms=100"]).start()
    try:
        time.sleep(2)  # twenty retention passes
        with open(mnt.path("t", "0", "messages"), "rb") as f:
            assert f.read().splitlines() == VALUES
    finally:
        assert mnt.umount() == 0
    assert os.path.exists(seg(d, 0))


def test_read_write_mount_rebuilds_a_bad_active_index_on_disk(ld, tmp_path):
    """The daemon's recovery rewrites an index that fails the order check (Kafka's own
    sanity check passes it: the last offset is above the base offset)."""
    path = seg(ld, 270, ".index")
    with open(path, "ab") as f:
        f.write(b"\x00\x00\x00\x05\xff\xff\xff\xf0")
    m = Mount(tmp_path, log_dirs=[ld],
              extra_args=["--override", "log.index.interval.bytes=100"]).start()
    try:
        with open(m.path("t", "0", "messages"), "rb") as f:
            assert f.read().splitlines() == VALUES
        with open(m.path("t", "0", "append"), "ab") as f:
            f.write(b"after\n")
    finally:
        assert m.umount() == 0
    with open(path, "rb") as f:
        data = f.read()
    entries = [struct.unpack_from(">ii", data, i) for i in range(0, len(data), 8)]
    assert entries and all(0 <= p < os.path.getsize(seg(ld, 270)) for _o, p in entries)
    assert all(a[0] < b[0] and a[1] < b[1] for a, b in itertools.pairwise(entries))
    assert "Corrupt index found" in m.log()
    rc, out, _err = consume(ld)
    assert (rc, out) == (0, VALUES + [b"after"])


# -- damaged batches ------------------------------------------------------------------------

def test_truncated_active_segment_keeps_its_intact_batches(ld):
    """A torn write at the end of the last segment: every whole batch before it is read
    (the old code hid the whole segment: 270 of 300, exit 0)."""
    pos = positions(seg(ld, 270))
    os.truncate(seg(ld, 270), pos[2] + 50)
    rc, out, err = consume(ld)
    assert (rc, out) == (0, VALUES[:290]), err


def test_offsets_that_go_back_are_damage(ld):
    """A batch whose lastOffsetDelta is rewritten negative (CRC recomputed): the old code
    looped from offset 0 forever."""
    path = seg(ld, 90)
    pos = positions(path)[1]
    forge(path, pos, lambda b: struct.pack_into(">i", b, 23, -200))
    assert_consume_fails_at(ld, 100, path, pos, "below its base offset")


def test_base_offset_that_goes_back_is_damage(ld):
    """A batch whose base offset (outside the CRC) repeats earlier offsets."""
    path = seg(ld, 150)
    pos = positions(path)[2]
    patch(path, pos, struct.pack(">q", 165))
    assert_consume_fails_at(ld, 170, path, pos, "offsets go back")


def test_zeroed_range_is_not_the_end_of_the_data(ld):
    """Zeros where a batch should start, data after them: the old code took the zeros for a
    preallocated tail and skipped the rest of the segment silently (exit 0)."""
    path = seg(ld, 120)
    pos = positions(path)[1]
    patch(path, pos, bytes(40))
    assert_consume_fails_at(ld, 130, path, pos, "zeroed bytes")


def test_incomplete_batch_at_the_end_of_a_sealed_segment(ld):
    """A torn batch is a torn write only at the end of the last segment; at the end of an
    earlier one, records are gone: the old code went on with the next segment, exit 0."""
    path = seg(ld, 60)
    pos = positions(path)[2]
    os.truncate(path, pos + 30)
    assert_consume_fails_at(ld, 80, path, pos, "incomplete batch")


def without_snapshots_or_clean_shutdown(ld: str) -> None:
    """Remove the producer snapshots and the clean-shutdown marker: a load replays every
    batch into the producer state, and the .txnindex files are not trusted (read_committed
    readers scan for transaction markers)."""
    for name in os.listdir(os.path.join(ld, "t-0")):
        if name.endswith(".snapshot"):
            os.unlink(os.path.join(ld, "t-0", name))
    os.unlink(os.path.join(ld, ".kafka_cleanshutdown"))

def test_damage_met_while_loading_the_producer_state(ld, tmp_path):
    """Without snapshots and a clean-shutdown marker, loading replays every batch into the
    producer state: the old code's load failed at the damage and consume printed nothing.
    A read-write mount comes up too, and shows the same prefix."""
    without_snapshots_or_clean_shutdown(ld)
    path = seg(ld, 150)
    pos = positions(path)[1]
    patch(path, pos, bytes(40))
    assert_consume_fails_at(ld, 160, path, pos, "zeroed bytes")
    if fuse_available():
        m = Mount(tmp_path, log_dirs=[ld]).start()
        try:
            r = sh(f"cat {m.path('t', '0', 'messages')}")
            assert r.returncode == 1 and r.stdout.splitlines() == VALUES[:160]
        finally:
            assert m.umount() == 0



def legacy_looking(path: str, position: int) -> None:
    """Zero the v2 batch at ``position`` from its partition leader epoch on (its magic byte
    with it), keeping its base offset and length: Kafka's FileLogInputStream frames it as a
    legacy (magic 0) entry whose CRC does not match."""
    with open(path, "rb") as f:
        f.seek(position + 8)
        (length,) = struct.unpack(">i", f.read(4))
    patch(path, position + 12, bytes(length))


@pytest.mark.parametrize("which", [0, 1], ids=["first-batch", "middle-batch"])
def test_legacy_looking_frame_is_a_damaged_batch_not_the_end_of_the_log(ld, tmp_path, which):
    """A v2 batch of the active segment whose magic byte (and more) was zeroed frames as a
    legacy entry whose message is broken. The old code stopped framing there: the log end
    offset became the damaged batch's base (get-offsets said 270 or 280, not 300) and
    offset/N of an intact batch after it was "No such file or directory" (found by
    bench/fuzz_logdir.py, seed 300, case 3000). Kafka frames it by its size (offset, size,
    magic: ``FileLogInputStream``) and so does kafkafs now: the log end is 300, readers in
    order fail at it, offset/N after it answers. The indexes are emptied, as a segment
    written with Kafka's 4096-byte index interval has none, so every read frames from
    position 0."""
    path = seg(ld, 270)
    pos = positions(path)[which]
    first = 270 + 10 * which
    legacy_looking(path, pos)
    for kind in (".index", ".timeindex"):
        os.truncate(seg(ld, 270, kind), 0)
    r = kafkafs("get-offsets", "--log-dirs", ld, "--topic", "t", "--time", "-1")
    assert r.stdout == b"t:0:300\n"
    assert_consume_fails_at(ld, first, path, pos, "legacy message is corrupt")
    if not fuse_available():
        return
    m = Mount(tmp_path, log_dirs=[ld], extra_args=["--read-only"]).start()
    try:
        part = m.path("t", "0")
        for _ in range(2):
            r = sh(f"cat {part}/messages")
            assert r.returncode == 1 and b"Input/output error" in r.stderr
            assert r.stdout.splitlines() == VALUES[:first]
        # the damaged entry holds its offset field's offset (a legacy entry's last offset):
        # EIO; its other offsets are lost with the v2 header, a gap as Kafka frames it
        r = sh(f"cat {part}/offset/{first}")
        assert r.returncode == 1 and b"Input/output error" in r.stderr
        for n in (first + 15, 299):
            with open(os.path.join(part, "offset", str(n)), "rb") as f:
                assert f.read() == VALUES[n]
        assert sh(f"ls -lR {m.mnt}").returncode == 0
    finally:
        assert m.umount() == 0
    assert sum(f"{path}: position {pos}:" in x for x in m.log().splitlines()) == 1, m.log()
    assert "Traceback" not in m.log()

def test_crc_damage_stops_consume_after_the_intact_records(ld):
    path = seg(ld, 90)
    patch(path, 100, b"X")
    assert_consume_fails_at(ld, 90, path, 0, "record batch is corrupt")


def test_dump_exits_1_on_a_damaged_batch(ld):
    """kafka-dump-log prints the batch with isvalid: false, goes on and exits 0; kafkafs
    prints the batches up to that line and then names the damage (exit 1)."""
    path = seg(ld, 120)
    pos = positions(path)[1]
    patch(path, pos + 100, b"X")
    r = kafkafs("dump", "--files", path, check=False)
    lines = r.stdout.decode().splitlines()
    assert len([x for x in lines if x.startswith("baseOffset")]) == 2
    assert "isvalid: true" in lines[2] and "isvalid: false" in lines[3]
    assert r.returncode == 1
    assert_clean_error(r.stderr.decode(), path, pos, "record batch is corrupt")


def test_get_offsets_meets_damage_with_one_line(ld):
    path = seg(ld, 90)
    pos = positions(path)[1]
    patch(path, pos + 8, struct.pack(">i", 3))  # a size below the minimum
    r = kafkafs("get-offsets", "--log-dirs", ld, "--topic", "t", "--time", str(TS + 105),
                check=False)
    assert r.returncode == 1 and r.stdout == b""
    assert_clean_error(r.stderr.decode(), path, pos, "smaller than the minimum")
    # what lies before the damage is still answered
    r = kafkafs("get-offsets", "--log-dirs", ld, "--topic", "t", "--time", str(TS + 55))
    assert r.stdout == b"t:0:55\n"


# -- through the mount ----------------------------------------------------------------------

@needs_fuse
def test_read_only_mount_skips_a_partition_it_cannot_open(ld, tmp_path):
    """A partition dir with no segment (a broker creating it, a copy in progress, or a
    planted link hiding the only .log): the other partitions are served, with a warning; the
    old code refused to mount at all."""
    os.mkdir(os.path.join(ld, "u-0"))
    os.symlink("/etc/hostname", os.path.join(ld, "u-0", f"{0:020d}.log"))
    m = Mount(tmp_path, log_dirs=[ld], extra_args=["--read-only"]).start()
    try:
        with open(m.path("t", "0", "messages"), "rb") as f:
            assert f.read().splitlines() == VALUES
        assert sorted(os.listdir(m.mnt)) == ["t"]
    finally:
        assert m.umount() == 0
    assert "Skipping partition u-0" in m.log()
    rc, out, _err = consume(ld)
    assert (rc, out) == (0, VALUES)


@needs_fuse
@pytest.mark.parametrize("read_only", [True, False], ids=["read-only", "read-write"])
def test_mount_delivers_the_intact_prefix_then_eio(ld, tmp_path, read_only):
    """One CRC-corrupt batch: cat messages failed with EIO after 0 bytes on the old code.
    Now every reader gets every line before the damage, then EIO; stat and ls work; offset/N
    past the damage answers; the daemon logs the damage once however often it is read."""
    path = seg(ld, 90)
    patch(path, 100, b"X")
    m = Mount(tmp_path, log_dirs=[ld],
              extra_args=["--read-only"] if read_only else []).start()
    try:
        part = m.path("t", "0")
        for _ in range(3):
            r = sh(f"cat {part}/messages")
            assert r.returncode == 1 and b"Input/output error" in r.stderr
            assert r.stdout.splitlines() == VALUES[:90]
        r = sh(f"cat {part}/records.jsonl")
        assert r.returncode == 1 and len(r.stdout.splitlines()) == 90
        r = sh(f"tail -n 2 {part}/messages")
        assert r.returncode == 1 and b"Input/output error" in r.stderr
        r = sh(f"grep -c value- {part}/messages")
        assert r.returncode == 2 and r.stdout == b"90\n"
        r = sh(f"tar -cf {tmp_path}/m.tar -C {part} messages")
        assert r.returncode != 0  # never an archive that looks whole
        assert sh(f"ls -l {part}").returncode == 0
        with open(os.path.join(part, "offset", "150"), "rb") as f:
            assert f.read() == VALUES[150]
        r = sh(f"cat {part}/offset/95")
        assert r.returncode == 1 and b"Input/output error" in r.stderr
    finally:
        assert m.umount() == 0
    damage_lines = [x for x in m.log().splitlines() if "Damaged data" in x]
    assert len(damage_lines) == 1, m.log()
    assert f"{path}: position 0: record batch is corrupt" in damage_lines[0]
    assert "Traceback" not in m.log()


@needs_fuse
def test_damage_is_logged_once_whoever_meets_it(ld, tmp_path):
    """Framing damage (a size below the minimum) in a log dir without producer snapshots
    or clean-shutdown marker is met by the producer state's replay at load, by the
    transaction scan behind the read_committed views and by the readers: the daemon
    logged the same place three times, each in its own words (the fuzz run's seed 300,
    case 3000 saw the transaction scan's line beside the readers')."""
    without_snapshots_or_clean_shutdown(ld)
    path = seg(ld, 270)
    pos = positions(path)[1]
    patch(path, pos + 8, struct.pack(">i", 3))
    m = Mount(tmp_path, log_dirs=[ld], extra_args=["--read-only"]).start()
    try:
        for _ in range(2):
            r = sh(f"cat {m.path('t', '0', 'messages')}")
            assert r.returncode == 1 and r.stdout.splitlines() == VALUES[:280]
    finally:
        assert m.umount() == 0
    lines = [x for x in m.log().splitlines() if f"{path}: position {pos}:" in x]
    assert len(lines) == 1 and "Damaged data" in lines[0], m.log()


def test_report_damage_logs_a_place_once_whatever_its_reason(caplog):
    """Readers word the same damage differently (one frames the batch, one checks its CRC,
    one decodes its records): the daemon's log names each place once."""
    from kafkafs.log.errors import CorruptRecordError, report_damage

    path = f"/nowhere/{time.monotonic_ns()}/t-0/00000000000000000000.log"
    with caplog.at_level("ERROR", logger="kafkafs.damage"):
        report_damage(CorruptRecordError("legacy message (magic 0): 124 bytes left after its "
                                         "key and value", path=path, position=0))
        report_damage(CorruptRecordError("legacy message is corrupt (stored crc = 0, "
                                         "computed crc = 1)", path=path, position=0))
        report_damage(CorruptRecordError("record batch is corrupt", path=path, position=150))
    assert sum(f"{path}: position 0:" in r.getMessage() for r in caplog.records) == 1
    assert sum(f"{path}: position 150:" in r.getMessage() for r in caplog.records) == 1

@needs_fuse
def test_log_start_offset_inside_a_batch(ld, tmp_path):
    """The log start offset (log-start-offset-checkpoint; Kafka's DeleteRecords moves it so)
    may lie inside a batch: messages and records.jsonl start at it, as consume does. The old
    view rendered the whole first batch (value-000..value-004 shown)."""
    with open(os.path.join(ld, "log-start-offset-checkpoint"), "w") as f:
        f.write("0\n1\nt 0 5\n")
    rc, out, _err = consume(ld)
    assert (rc, out) == (0, VALUES[5:])
    m = Mount(tmp_path, log_dirs=[ld], extra_args=["--read-only"]).start()
    try:
        with open(m.path("t", "0", "messages"), "rb") as f:
            assert f.read().splitlines() == VALUES[5:]
        with open(m.path("t", "0", "records.jsonl"), "rb") as f:
            assert [json.loads(x)["offset"] for x in f] == list(range(5, 300))
    finally:
        assert m.umount() == 0


@needs_fuse
def test_view_opened_before_the_damage_never_shows_zeros(ld, tmp_path):
    """A reader following messages (page cache) when a damaged batch lands: it gets an
    error, never the kernel's zero fill of a short page."""
    m = Mount(tmp_path, log_dirs=[ld], extra_args=["--read-only"]).start()
    try:
        mpath = m.path("t", "0", "messages")
        with open(mpath, "rb") as f:
            assert f.read().splitlines() == VALUES
            # a writer (a broker) appends a batch whose CRC is wrong
            last = seg(ld, 270)
            with open(last, "rb") as src:
                data = src.read()
            batch = bytearray(data[positions(last)[2]:])
            struct.pack_into(">q", batch, 0, 300)
            batch[-1] ^= 0xFF
            with open(last, "ab") as dst:
                dst.write(batch)
            more = b""
            with pytest.raises(OSError) as exc:
                for _ in range(100):
                    more += f.read()
                    time.sleep(0.1)
            assert exc.value.errno == errno.EIO
            assert more == b""
    finally:
        m.stop()


def test_no_reader_hangs_or_crashes_on_damage(ld):
    """get-offsets -1/-2, dump of every segment and consume of a log with every kind of
    damage above at once: each exits (0 or 1), none with a traceback."""
    patch(seg(ld, 30), positions(seg(ld, 30))[1], bytes(40))
    forge(seg(ld, 60), positions(seg(ld, 60))[1], lambda b: struct.pack_into(">i", b, 23, -5))
    patch(seg(ld, 90), 100, b"X")
    os.truncate(seg(ld, 120), positions(seg(ld, 120))[2] + 20)
    with open(seg(ld, 270, ".index"), "ab") as f:
        f.write(b"\x00\x00\x00\x05\xff\xff\xff\xf0")
    runs = [consume(ld)]
    for t in ("-1", "-2", str(TS + 250)):
        r = kafkafs("get-offsets", "--log-dirs", ld, "--time", t, check=False)
        runs.append((r.returncode, r.stdout, r.stderr.decode()))
    for base in range(0, 300, 30):
        r = kafkafs("dump", "--files", seg(ld, base), "--deep-iteration", check=False)
        runs.append((r.returncode, r.stdout, r.stderr.decode()))
    for rc, _out, err in runs:
        assert rc in (0, 1) and "Traceback" not in err, err
    assert runs[0][0] == 1 and runs[0][1] == VALUES[:40]


# -- one damage, one message, one position in every tool (issue 18 §4) ------------------------

def _error_lines(err: str) -> list[str]:
    """The lines of ``err`` that name a byte position (an error, or a log-style line)."""
    return [line for line in err.splitlines() if "position " in line]


@pytest.mark.parametrize("where", ["last-segment", "sealed-segment", "last-below-base"])
def test_every_tool_names_a_forged_base_offset_at_the_same_place(ld, where):
    """A flipped byte in a batch's base offset (which no CRC covers) makes the batch claim
    offsets it cannot hold: past the log end offset where the last segment's last batch
    ends, or into the next segment. consume named that batch (the readers' rule), after a
    log-style "Damaged data, readers get EIO from here on" line naming the batch after it
    (the transaction scan's rule: offsets going back), which dump and check named too, and
    get-offsets answered an offset past the log end. Now every tool names the forged batch,
    with the same reason, in one line, and the independent judge agrees. A negative last
    offset delta (CRC recomputed, as a broken producer writes it) was not found by check at
    all: it checks what recovery checks."""
    import logdir_judge as J

    base, victim = (270, 1) if where == "last-segment" else (150, 1)
    path = seg(ld, base)
    pos = positions(path)[victim]
    first = base + 10 * victim
    if where == "last-below-base":
        forge(path, pos, lambda b: struct.pack_into(">i", b, 23, -5))
        reason = f"batch last offset {first - 5} is below its base offset {first} (last " \
                 "offset delta -5)"
    else:
        forged, bound = ((380, ("reach the log end offset 300, where the segment's last "
                                "batch ends")) if where == "last-segment" else
                         (260, "reach into the next segment, which starts at offset 180"))
        patch(path, pos, struct.pack(">q", forged))
        reason = f"batch offsets [{forged}, {forged + 9}] {bound}"
    truth = J.judge_partition(ld, 0)
    assert truth.damage[:2] == (f"t-0/{base:020d}.log", pos) and not truth.ambiguous
    assert J.judge_file(ld, f"t-0/{base:020d}.log").damage[:2] == truth.damage[:2]
    line = f"error: {path}: position {pos}: {reason}"

    rc, out, err = consume(ld)
    assert rc == 1 and out == VALUES[:first] and _error_lines(err) == [line], err
    r = kafkafs("get-offsets", "--log-dirs", ld, "--topic", "t", "--time", str(TS + 10 * (
        first // 10) + 5), check=False)
    assert r.returncode == 1 and r.stdout == b"", r
    assert _error_lines(r.stderr.decode()) == [line], r.stderr
    r = kafkafs("dump", "--files", path, "--deep-iteration", check=False)
    assert r.returncode == 1 and _error_lines(r.stderr.decode()) == [line], r.stderr
    r = kafkafs("dump", "--log-dirs", ld, "--files", f"t-0/{base:020d}.log", check=False)
    assert r.returncode == 1 and _error_lines(r.stderr.decode()) == [line], r.stderr
    r = kafkafs("check", "--log-dirs", ld, "--json", check=False)
    assert r.returncode == 1 and r.stderr == b"", r.stderr
    hits = [f for d in json.loads(r.stdout)["log_dirs"] for f in d["findings"]
            if f["kind"] == "offsets-out-of-order"]
    assert len(hits) == 1, hits
    (hit,) = hits
    assert (hit["path"], hit["position"], hit["repairable"]) == (path, pos, False)
    assert hit["message"].endswith(f" at byte offset {pos}: {reason}"), hit
    r = kafkafs("check", "--log-dirs", ld, check=False)
    assert f"t-0/{base:020d}.log: position {pos}: " in r.stdout.decode()
    assert [x for x in r.stdout.decode().splitlines() if "position " in x and
            f"position {pos}:" not in x] == []
