"""OffsetIndex and TimeIndex: Kafka's bytes, lookups, truncation, sizing, reopening,
zero tails, read-only snapshots and sanity checks."""

from __future__ import annotations

import os
import random
import struct

import pytest

from kafkafs.log import index as index_module
from kafkafs.log.errors import (
    CorruptIndexError,
    IndexFullError,
    InvalidOffsetError,
    ReadOnlyLogError,
)
from kafkafs.log.index import OffsetIndex, TimeIndex, _used_entries


@pytest.fixture
def ipath(tmp_path):
    return str(tmp_path / "00000000000000000100.index")


@pytest.fixture
def tpath(tmp_path):
    return str(tmp_path / "00000000000000000100.timeindex")


def read(path):
    with open(path, "rb") as f:
        return f.read()


# -- OffsetIndex: file layout ------------------------------------------------------------
def test_new_index_is_preallocated_zero_filled_and_rounded_down(ipath, tpath):
    idx = OffsetIndex(ipath, 100, max_index_size=100)
    assert os.path.getsize(ipath) == 96  # 12 entries of 8 bytes
    assert read(ipath) == bytes(96)
    assert (idx.entries, idx.max_entries, idx.size_in_bytes) == (0, 12, 0)
    assert idx.last_offset == 100
    tidx = TimeIndex(tpath, 100, max_index_size=100)
    assert os.path.getsize(tpath) == 96  # 8 entries of 12 bytes
    assert tidx.max_entries == 8


def test_default_sizes_are_segment_index_bytes(tmp_path):
    idx = OffsetIndex(str(tmp_path / "0.index"), 0)
    tidx = TimeIndex(str(tmp_path / "0.timeindex"), 0)
    assert os.path.getsize(idx.path) == 10 * 1024 * 1024
    assert os.path.getsize(tidx.path) == 10485756  # 873813 * 12
    assert idx.max_index_size == 10 * 1024 * 1024


def test_append_writes_kafka_bytes_and_close_trims(ipath):
    idx = OffsetIndex(ipath, 100, max_index_size=64)
    idx.append(105, 0x1234)
    idx.append(110, 4096)
    idx.append(100 + 0x7FFFFFFF, 0x7FFFFFFF)  # the largest relative offset and position
    assert idx.entries == 3 and idx.size_in_bytes == 24
    idx.close()
    # relative offset i32 BE, position i32 BE
    assert read(ipath) == bytes.fromhex("00000005" "00001234"
                                        "0000000a" "00001000"
                                        "7fffffff" "7fffffff")


def test_lookup_is_largest_entry_at_or_below(ipath):
    idx = OffsetIndex(ipath, 100, max_index_size=1024)
    assert idx.lookup(150) == (100, 0)  # empty
    for off, pos in [(103, 300), (107, 700), (112, 1200), (120, 2000)]:
        idx.append(off, pos)
    assert idx.lookup(50) == (100, 0)
    assert idx.lookup(102) == (100, 0)
    assert idx.lookup(103) == (103, 300)
    assert idx.lookup(106) == (103, 300)
    assert idx.lookup(107) == (107, 700)
    assert idx.lookup(119) == (112, 1200)
    assert idx.lookup(10**12) == (120, 2000)
    assert [idx.entry(i) for i in range(idx.entries)] == \
        [(103, 300), (107, 700), (112, 1200), (120, 2000)]
    with pytest.raises(IndexError):
        idx.entry(4)
    with pytest.raises(IndexError):
        idx.entry(-1)


def test_lookup_on_many_entries(ipath):
    idx = OffsetIndex(ipath, 1000, max_index_size=8 * 5000)
    for i in range(5000):
        idx.append(1000 + 3 * i + 1, 10 * i)
    for target in (999, 1000, 1001, 1002, 4000, 4001, 16000, 16001, 20000):
        i = (target - 1001) // 3
        expected = (1000, 0) if target < 1001 else (1000 + 3 * min(i, 4999) + 1, 10 * min(i, 4999))
        assert idx.lookup(target) == expected


def test_append_must_increase(ipath):
    idx = OffsetIndex(ipath, 100, max_index_size=64)
    idx.append(100, 10)  # the base offset is fine in an empty index
    idx.append(105, 20)
    for bad in (105, 104):
        with pytest.raises(InvalidOffsetError) as exc:
            idx.append(bad, 30)
        assert str(exc.value) == (
            f"Attempt to append an offset {bad} to position 2 no larger than the last offset "
            f"appended (105) to {os.path.abspath(ipath)}")
    assert idx.entries == 2


def test_append_offset_must_fit_an_int(ipath):
    idx = OffsetIndex(ipath, 100, max_index_size=64)
    with pytest.raises(InvalidOffsetError, match=r"Integer overflow for offset: 99 "):
        idx.append(99, 0)
    with pytest.raises(InvalidOffsetError, match=r"Integer overflow for offset: 2147483748 "):
        idx.append(100 + 2**31, 0)
    assert idx.can_append_offset(100 + 2**31 - 1) and not idx.can_append_offset(100 + 2**31)
    with pytest.raises(ValueError):
        idx.append(101, 2**31)
    assert idx.entries == 0


def test_full_index(ipath):
    idx = OffsetIndex(ipath, 0, max_index_size=16)
    idx.append(1, 1)
    assert not idx.is_full()
    idx.append(2, 2)
    assert idx.is_full()
    with pytest.raises(IndexFullError, match=r"Attempt to append to a full index \(size = 2\)"):
        idx.append(3, 3)


def test_truncate_to(ipath):
    def fresh():
        if os.path.exists(ipath):
            os.unlink(ipath)
        idx = OffsetIndex(ipath, 100, max_index_size=80)
        for off in (102, 104, 106, 108):
            idx.append(off, off * 10)
        return idx

    idx = fresh()
    idx.truncate_to(106)  # an exact entry goes, with everything after it
    assert [idx.entry(i) for i in range(idx.entries)] == [(102, 1020), (104, 1040)]
    assert idx.last_offset == 104
    idx.append(105, 1050)  # appends continue after the new last entry
    assert idx.last_offset == 105
    idx.close()

    idx = fresh()
    idx.truncate_to(105)  # between entries: the entries above go
    assert idx.entries == 2
    idx.truncate_to(1000)  # above the last entry: nothing changes
    assert idx.entries == 2
    idx.truncate_to(50)  # below the first: everything goes
    assert idx.entries == 0 and idx.last_offset == 100
    idx.close()

    idx = fresh()
    idx.truncate()
    assert idx.entries == 0 and idx.lookup(200) == (100, 0)
    idx.close()
    assert os.path.getsize(ipath) == 0


def test_truncated_entries_are_zeroed_so_an_untrimmed_file_reopens_right(ipath):
    idx = OffsetIndex(ipath, 100, max_index_size=80)
    for off in (102, 104, 106, 108):
        idx.append(off, off)
    idx.truncate_to(106)
    idx.flush()
    # a crash now leaves the preallocated file untrimmed
    assert os.path.getsize(ipath) == 80
    assert read(ipath)[16:] == bytes(64)
    again = OffsetIndex(ipath, 100, max_index_size=80, writable=False)
    assert again.entries == 2 and again.last_offset == 104


def test_trim_reopen_resize(ipath):
    idx = OffsetIndex(ipath, 100, max_index_size=80)
    idx.append(101, 1)
    idx.append(102, 2)
    idx.trim_to_valid_size()
    assert os.path.getsize(ipath) == 16 and idx.max_entries == 2 and idx.is_full()
    idx.close()
    # Kafka assumes a reopened file is trimmed: its length is the entry count
    idx = OffsetIndex(ipath, 100, max_index_size=80)
    assert (idx.entries, idx.max_entries, idx.last_offset) == (2, 2, 102)
    assert os.path.getsize(ipath) == 16  # an existing file is not resized on open
    assert idx.resize(80) is True
    assert idx.resize(83) is False  # rounds down to the same size
    assert os.path.getsize(ipath) == 80 and read(ipath)[16:] == bytes(64)
    assert (idx.entries, idx.max_entries) == (2, 10)
    idx.append(103, 3)
    assert idx.resize(16) is True  # shrinking below the entries drops them
    assert idx.entries == 2 and idx.last_offset == 102
    idx.reset()
    assert (idx.entries, os.path.getsize(ipath)) == (0, 80)
    idx.close()
    assert os.path.getsize(ipath) == 0


def test_zero_tail_of_a_crashed_preallocated_file_is_ignored(ipath):
    entries = struct.pack(">ii", 3, 100) + struct.pack(">ii", 9, 250)
    with open(ipath, "wb") as f:
        f.write(entries + bytes(80))
    ro = OffsetIndex(ipath, 100, writable=False)
    assert (ro.entries, ro.max_entries, ro.last_offset) == (2, 12, 109)
    assert read(ipath) == entries + bytes(80)  # untouched
    idx = OffsetIndex(ipath, 100, max_index_size=1000)
    assert (idx.entries, idx.max_entries, idx.length) == (2, 12, 96)
    idx.append(115, 400)
    idx.close()
    assert read(ipath) == entries + struct.pack(">ii", 15, 400)


def test_zero_tail_rounds_up_to_a_whole_entry(ipath):
    # an entry whose position is 0 ends in zero bytes: it still counts
    with open(ipath, "wb") as f:
        f.write(struct.pack(">ii", 4, 0) + struct.pack(">ii", 7, 0) + bytes(16))
    idx = OffsetIndex(ipath, 0, writable=False)
    assert idx.entries == 2 and idx.entry(1) == (7, 0)


def _scanned_entries(data: bytes, size: int) -> int:
    """The rule the binary search keeps (the scan kafkafs used before): the entries up to
    the last non-zero byte, rounded up to a whole entry, at most ``len(data) // size``."""
    used = len(data.rstrip(b"\x00"))
    return min(-(-used // size), len(data) // size)


def _entry(rnd: random.Random, size: int, n: int) -> bytes:
    """A well-formed entry ``n`` (never all zero but for a first time index entry of
    timestamp 0 at the base offset)."""
    if size == 8:
        return struct.pack(">ii", n + 1, rnd.choice([0, 4096 * (n + 1)]))
    if n == 0 and rnd.random() < 0.3:
        return bytes(12)  # (timestamp 0, base offset): all zero
    return struct.pack(">qi", rnd.choice([n + 1, 1700000000000 + n]), rnd.choice([0, n]))


def test_used_entries_equal_the_scan_on_generated_well_formed_files():
    rnd = random.Random(19)
    for case in range(3000):
        size = rnd.choice([8, 12])
        slots = rnd.choice([0, 1, 2, 3, 7, 64, 1000, rnd.randrange(1, 5000)])
        n = rnd.randint(0, slots)
        data = b"".join(_entry(rnd, size, i) for i in range(n)) + bytes((slots - n) * size)
        data += bytes(rnd.choice([0, 0, 0, rnd.randrange(1, size)]))  # a partial tail
        reads = []

        def read(a, b, data=data, reads=reads):
            reads.append((a, b))
            return data[a:b]

        got = _used_entries(read, len(data), size)
        assert got == _scanned_entries(data, size), (case, size, slots, n)
        assert len(reads) <= 2 + max(1, slots).bit_length()


def test_used_entries_of_damaged_files_are_never_more_than_the_scan():
    rnd = random.Random(7)
    for case in range(3000):
        size = rnd.choice([8, 12])
        slots = rnd.randrange(1, 400)
        data = bytearray(slots * size)
        for _ in range(rnd.randrange(0, 12)):  # stray bytes anywhere, zero runs between
            data[rnd.randrange(len(data))] = rnd.randrange(1, 256)
        got = _used_entries(lambda a, b, d=bytes(data): d[a:b], len(data), size)
        assert 0 <= got <= _scanned_entries(bytes(data), size), case


def test_used_entries_of_a_file_that_shrinks_while_read():
    # a live writer trims its index under a reader: the missing bytes are zero tail
    data = struct.pack(">ii", 1, 10) * 3 + bytes(8 * 5)
    assert _used_entries(lambda a, b: data[a:b][:max(0, 16 - a)], len(data), 8) == 2


def test_opening_a_preallocated_10_mib_index_reads_a_few_entries(ipath, tpath, monkeypatch):
    """A crashed active segment's preallocated index: its entries are counted by reading a
    few slots, not the 10 MiB zero tail (32 of 65 s of a 2,000-partition recovery)."""
    entries = struct.pack(">ii", 3, 100) + struct.pack(">ii", 9, 250)
    with open(ipath, "wb") as f:
        f.write(entries)
        f.truncate(10 * 1024 * 1024)
    with open(tpath, "wb") as f:
        f.write(struct.pack(">qi", 0, 0) + struct.pack(">qi", 5, 9))
        f.truncate(10 * 1024 * 1024 // 12 * 12)
    read_bytes = []
    real = os.pread

    def counting(fd, n, pos):
        data = real(fd, n, pos)
        read_bytes.append(len(data))
        return data

    monkeypatch.setattr(index_module.os, "pread", counting)
    idx = OffsetIndex(ipath, 100)
    tidx = TimeIndex(tpath, 100)
    ro = OffsetIndex(ipath, 100, writable=False)
    assert (idx.entries, tidx.entries, ro.entries) == (2, 2, 2)
    assert tidx.entry(0) == (0, 100) and tidx.last_entry == (5, 109)
    assert sum(read_bytes) < 1000, sum(read_bytes)
    idx.close()
    tidx.close()
    ro.close()


def test_bad_max_index_size_creates_nothing(ipath):
    with pytest.raises(ValueError, match="Invalid max index size: 7"):
        OffsetIndex(ipath, 0, max_index_size=7)
    assert not os.path.exists(ipath)


def test_rename_and_delete(tmp_path, ipath):
    idx = OffsetIndex(ipath, 100, max_index_size=80)
    idx.append(101, 5)
    new = str(tmp_path / "00000000000000000100.index.deleted")
    idx.rename_to(new)
    assert idx.path == new and os.path.exists(new) and not os.path.exists(ipath)
    idx.append(102, 6)
    assert idx.lookup(102) == (102, 6)
    assert idx.delete() is True
    assert not os.path.exists(new)


def test_flush_keeps_entries_on_disk(ipath):
    idx = OffsetIndex(ipath, 0, max_index_size=80)
    idx.append(1, 100)
    idx.flush()
    assert read(ipath)[:8] == struct.pack(">ii", 1, 100)
    idx.close()


# -- read-only ---------------------------------------------------------------------------
def test_read_only_never_modifies_or_creates(tmp_path, ipath):
    missing = str(tmp_path / "00000000000000000005.index")
    ro = OffsetIndex(missing, 5, writable=False)
    assert (ro.entries, ro.lookup(9)) == (0, (5, 0))
    ro.close()
    assert not os.path.exists(missing)

    w = OffsetIndex(ipath, 100, max_index_size=80)
    w.append(101, 1)
    w.flush()
    ro = OffsetIndex(ipath, 100, writable=False)
    before = read(ipath)
    for call in (lambda: ro.append(102, 2), lambda: ro.truncate_to(0), ro.truncate,
                 lambda: ro.resize(8), ro.trim_to_valid_size, ro.delete,
                 lambda: ro.rename_to(ipath + ".x")):
        with pytest.raises(ReadOnlyLogError):
            call()
    ro.flush()
    ro.close()
    assert read(ipath) == before and os.path.getsize(ipath) == 80


def test_reload_follows_a_live_writer(ipath):
    w = OffsetIndex(ipath, 100, max_index_size=80)
    ro = OffsetIndex(ipath, 100, writable=False)
    assert ro.entries == 0
    w.append(101, 10)
    w.append(103, 30)
    assert ro.entries == 0  # a snapshot until reloaded
    assert ro.reload() is True
    assert ro.entries == 2 and ro.lookup(104) == (103, 30)
    assert ro.reload() is False
    w.close()  # trimmed on roll: the length changes
    assert ro.reload() is True
    assert (ro.entries, ro.length) == (2, 16)
    os.unlink(ipath)
    assert ro.reload() is True and ro.entries == 0
    assert w.reload() is False  # a writable index owns its file


def _reads(monkeypatch):
    """Count the bytes the index module preads."""
    from kafkafs.log import index as index_mod
    counted = [0]
    real = os.pread

    def pread(fd, n, pos):
        data = real(fd, n, pos)
        counted[0] += len(data)
        return data
    monkeypatch.setattr(index_mod.os, "pread", pread)
    return counted


@pytest.mark.parametrize("kind", ["offset", "time"])
def test_reload_reads_only_what_the_writer_appended(ipath, tpath, monkeypatch, kind):
    """A broker's active index is preallocated (10 MiB by default) and grows by an entry
    every index.interval.bytes: a follower's reload reads the new entries, not the file
    (it used to scan the whole zero tail each time, up to 20 times a second). After a
    truncation, a rewrite or a trim the result is what a fresh load gives."""
    cls, path = (OffsetIndex, ipath) if kind == "offset" else (TimeIndex, tpath)
    w = cls(path, 100)  # 10 MiB preallocated, as Kafka's segment.index.bytes

    def add(i):
        if kind == "offset":
            w.append(100 + i, 4096 * i)
        else:
            w.maybe_append(1_700_000_000_000 + i, 100 + i)
    for i in range(1, 2001):
        add(i)
    ro = cls(path, 100, writable=False)
    assert ro.entries == 2000
    counted = _reads(monkeypatch)
    for i in range(2001, 2101):
        add(i)
        w.flush()
        assert ro.reload() is True
        assert ro.entries == i and ro.entry(i - 1) == w.entry(i - 1)
    assert ro.reload() is False
    assert counted[0] < 100 * 2 * 64 * 1024  # a chunk per reload at most, not 10 MiB each
    monkeypatch.undo()

    def fresh():
        f = cls(path, 100, writable=False)
        try:
            return [f.entry(n) for n in range(f.entries)]
        finally:
            f.close()
    # truncation (a broker truncating its log): the last known entry changed
    w.truncate_to(100 + 1500)  # both indexes truncate by offset
    w.flush()
    ro.reload()
    assert [ro.entry(n) for n in range(ro.entries)] == fresh()
    add(3000)
    w.flush()
    ro.reload()
    assert [ro.entry(n) for n in range(ro.entries)] == fresh()
    w.close()  # trimmed on roll
    ro.reload()
    assert [ro.entry(n) for n in range(ro.entries)] == fresh() and ro.length == ro.entries * (
        8 if kind == "offset" else 12)
    ro.close()


# -- OffsetIndex sanity ------------------------------------------------------------------
def test_offset_index_sanity_check(ipath):
    with open(ipath, "wb") as f:
        f.write(struct.pack(">ii", 1, 10) + b"\x01\x02\x03")
    idx = OffsetIndex(ipath, 100, writable=False)
    assert idx.entries == 1
    with pytest.raises(CorruptIndexError) as exc:
        idx.sanity_check()
    assert str(exc.value) == (f"Index file {os.path.abspath(ipath)} is corrupt, found 11 bytes "
                              "which is neither positive nor a multiple of 8")
    with open(ipath, "wb") as f:
        f.write(struct.pack(">ii", 1, 10) + struct.pack(">ii", -3, 20))
    idx = OffsetIndex(ipath, 100, writable=False)
    with pytest.raises(CorruptIndexError) as exc:
        idx.sanity_check()
    assert str(exc.value) == (
        f"Corrupt index found, index file {os.path.abspath(ipath)} has non-zero size but the "
        "last offset is 97 which is less than the base offset 100")
    os.unlink(ipath)
    good = OffsetIndex(ipath, 100, max_index_size=80)
    good.append(150, 7)
    good.sanity_check()


# -- TimeIndex ---------------------------------------------------------------------------
def test_time_index_bytes_and_only_increasing_timestamps(tpath):
    t = TimeIndex(tpath, 50, max_index_size=120)
    assert t.last_entry == (-1, 50)
    t.maybe_append(-1, 50)  # timestamp-less data (magic 0) leaves the index empty
    assert t.entries == 0
    t.maybe_append(1000, 52)
    t.maybe_append(1000, 53)  # same timestamp: ignored
    assert t.entries == 1 and t.last_entry == (1000, 52)
    t.maybe_append(1005, 55)
    with pytest.raises(InvalidOffsetError) as exc:
        t.maybe_append(2000, 54)
    assert str(exc.value) == ("Attempt to append an offset (54) to slot 2 no larger than the last "
                              f"offset appended (55) to {os.path.abspath(tpath)}")
    with pytest.raises(InvalidOffsetError,
                       match=r"Attempt to append a timestamp \(999\) to slot 2"):
        t.maybe_append(999, 60)
    with pytest.raises(InvalidOffsetError, match="Integer overflow"):
        t.maybe_append(3000, 50 + 2**31)
    assert t.entries == 2
    t.close()
    # timestamp i64 BE, relative offset i32 BE
    assert read(tpath) == bytes.fromhex("00000000000003e8" "00000002"
                                        "00000000000003ed" "00000005")


def test_time_index_negative_and_large_timestamps_encode_as_i64(tpath):
    t = TimeIndex(tpath, 0, max_index_size=120)
    t.maybe_append(2**62, 1)
    t.close()
    assert read(tpath) == bytes.fromhex("4000000000000000" "00000001")


def test_time_index_reserves_the_last_slot(tpath):
    t = TimeIndex(tpath, 0, max_index_size=36)  # 3 slots
    t.maybe_append(10, 1)
    assert not t.is_full()
    t.maybe_append(20, 2)
    assert t.is_full() and t.entries == 2 and t.max_entries == 3
    with pytest.raises(IndexFullError, match=r"full time index \(size = 2\)"):
        t.maybe_append(30, 3)
    t.maybe_append(30, 3, skip_full_check=True)  # the roll writes the final entry
    assert t.entries == 3
    with pytest.raises(IndexFullError):
        t.maybe_append(40, 4, skip_full_check=True)
    t.maybe_append(30, 3, skip_full_check=True)  # the same final entry again: ignored


def test_time_index_lookup_and_entries(tpath):
    t = TimeIndex(tpath, 100, max_index_size=1200)
    assert t.lookup(5) == (-1, 100)
    for ts, off in [(1000, 103), (1500, 110), (2500, 111), (4000, 130)]:
        t.maybe_append(ts, off)
    assert t.lookup(999) == (-1, 100)
    assert t.lookup(1000) == (1000, 103)
    assert t.lookup(2499) == (1500, 110)
    assert t.lookup(10**15) == (4000, 130)
    assert t.entry(2) == (2500, 111)
    assert t.last_offset == 130 and t.last_entry == (4000, 130)


def test_time_index_truncate_to_offset(tpath):
    t = TimeIndex(tpath, 100, max_index_size=1200)
    for ts, off in [(1000, 103), (1500, 110), (2500, 111), (4000, 130)]:
        t.maybe_append(ts, off)
    t.truncate_to(111)
    assert t.entries == 2 and t.last_entry == (1500, 110)
    t.maybe_append(1600, 111)  # appends continue after the new last entry
    t.truncate_to(105)
    assert t.last_entry == (1000, 103)
    t.truncate_to(0)
    assert t.entries == 0 and t.last_entry == (-1, 100)


def test_time_index_reopen_and_resize_keep_last_entry(tpath):
    t = TimeIndex(tpath, 100, max_index_size=120)
    t.maybe_append(1000, 101)
    t.maybe_append(2000, 105)
    t.close()
    assert os.path.getsize(tpath) == 24
    t = TimeIndex(tpath, 100, max_index_size=120)
    assert t.last_entry == (2000, 105) and t.is_full()
    t.resize(120)
    assert t.last_entry == (2000, 105) and not t.is_full()
    t.maybe_append(3000, 107)
    t.flush()
    ro = TimeIndex(tpath, 100, writable=False)  # untrimmed: the zero tail is ignored
    assert ro.entries == 3 and ro.lookup(2500) == (2000, 105)


def test_time_index_sanity_check(tpath):
    p = os.path.abspath(tpath)

    def check(data):
        with open(tpath, "wb") as f:
            f.write(data)
        with pytest.raises(CorruptIndexError) as exc:
            TimeIndex(tpath, 100, writable=False).sanity_check()
        return str(exc.value)

    assert check(struct.pack(">qi", 500, 1) + struct.pack(">qi", 400, 2)) == (
        f"Corrupt time index found, time index file ({p}) has non-zero size but the last "
        "timestamp is 400 which is less than the first timestamp 500")
    assert check(struct.pack(">qi", 500, 1) + struct.pack(">qi", 600, -2)) == (
        f"Corrupt time index found, time index file ({p}) has non-zero size but the last "
        "offset is 98 which is less than the first offset 100")
    assert check(struct.pack(">qi", 500, 1) + b"\x01") == (
        f"Time index file {p} is corrupt, found 13 bytes which is neither positive nor a "
        "multiple of 12")
    with open(tpath, "wb") as f:
        f.write(struct.pack(">qi", 500, 1) + struct.pack(">qi", 600, 2))
    TimeIndex(tpath, 100, writable=False).sanity_check()


def test_closed_index_refuses_lookups(ipath):
    idx = OffsetIndex(ipath, 0, max_index_size=16)
    idx.close()
    idx.close()  # idempotent
    with pytest.raises(ValueError):
        idx.lookup(1)
