"""``offset/`` listings (kafkafs.fs.listing) driven by ``ls``: streamed without a node or a
decoded record per name, the same names an independent reader finds, inode numbers that
``stat`` agrees with, and a damaged batch that never fails the listing."""

from __future__ import annotations

import errno
import glob
import os
import shutil
import time

import pytest
import test_corpus as tc
from conftest import sh

from kafkafs.record.batch import iter_batches

pytestmark = pytest.mark.skipif(not os.path.exists("/dev/fuse"), reason="FUSE is not available")


def rss_kb(pid: int, field: str = "VmRSS") -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


def ls_f(path: str) -> list[int]:
    """The names ``ls -f`` prints for ``path`` (exit status checked), as numbers in order."""
    r = sh(f"ls -f {path}", timeout=300)
    assert r.returncode == 0, r.stderr
    return [int(n) for n in r.stdout.decode().split() if n not in (".", "..")]


def test_listing_streams_without_memory_per_name(manager_factory, mount_factory):
    """``ls -f offset | wc -l`` of 300,000 records lists every offset once, in order, and
    the daemon's memory does not grow with the names listed (a node per offset cost about
    370 bytes each: 110 MB here); ``ls -l`` of a few still shows each value's size."""
    m = manager_factory()
    lg = m.create_topic("big")[0]
    ts = int(time.time() * 1000)
    for i in range(0, 300_000, 1000):
        lg.append([(ts, None, b"v%d" % (i + j), ()) for j in range(1000)])
    m.shutdown()
    mnt = mount_factory()
    offsets = mnt.path("big", "0", "offset")
    before = rss_kb(mnt.proc.pid)
    r = sh(f"ls -f {offsets} | wc -l", timeout=300)
    assert r.stdout.strip() == b"300000"
    grown = rss_kb(mnt.proc.pid, "VmHWM") - before
    assert grown < 30_000, f"the daemon grew by {grown} kB while listing"
    assert ls_f(offsets) == list(range(300_000))
    r = sh(f"ls -l {offsets}/0 {offsets}/299999")
    assert [line.split()[4] for line in r.stdout.decode().splitlines()] == ["2", "7"]
    # the numbers the listing gives are the ones stat gives, and reading works after it
    with os.scandir(offsets) as it:
        some = [e for _, e in zip(range(5), it)]
    for e in some:
        assert e.inode() == os.stat(e.path).st_ino
    with open(os.path.join(offsets, "123456"), "rb") as f:
        assert f.read() == b"v123456"


def _corpus_expected(data: bytes, reader: str) -> list[int]:
    """Offsets of the data records an independent reader finds in ``data``, up to the
    first entry whose CRC fails or that it cannot frame (kafkafs lists what is intact)."""
    entries, _stopped = tc.split_entries(data)
    out = []
    for _pos, entry in entries:
        batch = tc._their_batch(reader, entry)
        if not batch.validate_crc():
            break
        if getattr(batch, "is_control_batch", False):
            continue
        out += [r.offset for r in batch]
    return out


def test_corpus_listings_equal_an_independent_reader(tmp_path, mount_factory):
    """Every partition of the segment corpus (every record format, legacy wrappers, raw and
    framed snappy, transactions, a preallocated zero tail, a control batch with a bad CRC)
    mounted read-only and listed by ``ls -f``: exit 0 and exactly the offsets of the data
    records aiokafka (kafka-python where aiokafka cannot) reads, in order."""
    logs = tmp_path / "logs"
    logs.mkdir()
    dirs = sorted(glob.glob(os.path.join(tc.CORPUS, "*-0")))
    for d in dirs:
        shutil.copytree(d, logs / os.path.basename(d))
    m = mount_factory(log_dirs=[str(logs)], extra_args=["--read-only"],
                      options=["isolation.level=read_uncommitted"])
    for d in dirs:
        name = os.path.basename(d)
        reader = "kafka-python" if (name, "aiokafka") in tc.UNREADABLE else "aiokafka"
        (seg,) = glob.glob(os.path.join(d, "*.log"))
        expected = _corpus_expected(tc.read(seg), reader)
        assert ls_f(m.path(name[:-2], "0", "offset")) == expected, name


def _segments_with_damage(manager_factory):
    """A partition of 30 batches of 10 records (offsets 0-299) over segments of 2000 bytes,
    written and shut down cleanly; then the CRC of the third batch of the second segment is
    broken by flipping one byte of its first value. Returns ``(log dir, base offset of the
    damaged batch, base offset of the third segment)``."""
    m = manager_factory(log_segment_bytes=2000)
    lg = m.create_topic("t")[0]
    for b in range(30):
        lg.append([(1000, None, b"value-%03d" % (b * 10 + i), ()) for i in range(10)])
    part = lg.dir
    m.shutdown()
    segs = sorted(glob.glob(os.path.join(part, "*.log")))
    assert len(segs) >= 3
    with open(segs[1], "r+b") as f:
        data = f.read()
        victim = list(iter_batches(data))[2]
        at = data.index(b"value-%03d" % victim.base_offset, victim.position)
        f.seek(at)
        f.write(b"V")
    third = int(os.path.basename(segs[2])[:20])
    assert third >= victim.base_offset + 20  # an intact batch follows the damaged one
    return os.path.dirname(part), victim.base_offset, third


def test_a_damaged_batch_never_fails_the_listing(manager_factory, mount_factory):
    """With one CRC-corrupt batch in the middle segment: ``ls -f`` and ``ls -lR`` of
    ``offset/``, and ``ls -f`` of the partition, exit 0; the listing holds the first segment, the second up to the damaged
    batch and the rest (the rest of the damaged segment is skipped); the daemon logs the
    damage once however often the directory is listed or the damaged names looked up; the
    damaged offsets fail with EIO and an intact one after them in the same segment still
    reads."""
    log_dir, bad, third = _segments_with_damage(manager_factory)
    m = mount_factory(log_dirs=[log_dir])
    offsets = m.path("t", "0", "offset")
    expected = list(range(bad)) + list(range(third, 300))
    for _ in range(3):
        assert ls_f(offsets) == expected
    r = sh(f"ls -lR {offsets}", timeout=120)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.decode().splitlines()) == 2 + len(expected)  # "DIR:", "total", names
    # the partition's own listing names its files even where a size cannot be had (the
    # entries reached by name only are not listed: docs/tree.md "Walking the mount")
    r = sh(f"ls -f {m.path('t', '0')}")
    assert (r.returncode, sorted(r.stdout.decode().split())) == \
        (0, ["append", "by-time", "messages"]), r.stderr
    for _ in range(2):
        with pytest.raises(OSError) as e:
            os.stat(os.path.join(offsets, str(bad + 5)))
        assert e.value.errno == errno.EIO
    assert sum("Damaged data" in line for line in m.log().splitlines()) == 1, m.log()
    with open(os.path.join(offsets, str(bad + 15)), "rb") as f:
        assert f.read() == b"value-%03d" % (bad + 15)
