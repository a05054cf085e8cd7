"""The cleaner's offset map (Kafka ``SkimpyOffsetMap``, ``OffsetMapTest``) and the storage
functions of kafkafs.record.compaction in both implementations (C and Python twins)."""

from __future__ import annotations

import os
import random

import pytest

from kafkafs.log.offset_map import ENTRY_SIZE, SkimpyOffsetMap
from kafkafs.record import compaction
from kafkafs.record.batch import encode_batch
from kafkafs.record.errors import CorruptRecordError

IMPLS = [compaction.PYTHON] + ([compaction.C] if compaction.C is not None else [])


@pytest.fixture(params=IMPLS, ids=lambda i: i.name)
def impl(request):
    return request.param


def _verification(h) -> int:
    """SMHasher's VerificationTest: hash keys {}, {0}, {0,1}, ... {0..254} with seed 256-i,
    then the 256 hashes with seed 0; the first 4 bytes, little-endian."""
    key = bytes(range(256))
    hashes = b"".join(h(key[:i], 256 - i) for i in range(256))
    return int.from_bytes(h(hashes, 0)[:4], "little")


def test_key_hash_is_murmur3_x64_128(impl):
    # 0x6384BA69: SMHasher's published verification value of MurmurHash3_x64_128
    assert _verification(impl.key_hash) == 0x6384BA69
    assert len(impl.key_hash(b"")) == 16


def test_key_hash_twins_agree():
    if compaction.C is None:
        pytest.skip("C extension not built")
    rnd = random.Random(3)
    for n in list(range(40)) + [rnd.randint(40, 5000) for _ in range(50)]:
        key = rnd.randbytes(n)
        assert compaction.C.key_hash(key) == compaction.PYTHON.key_hash(key)
        assert compaction.C.key_hash(bytearray(key)) == compaction.PYTHON.key_hash(memoryview(key))


def test_basic_put_get(impl, monkeypatch):
    # OffsetMapTest.testBasicValidation: every key put is found with its offset
    buf = bytearray(1000 * ENTRY_SIZE)
    size = 0
    for i in range(900):
        size = impl.map_put(buf, 1000, size, b"%d" % i, i)
    assert size == 900
    for i in range(900):
        assert impl.map_get(buf, 1000, b"%d" % i) == i
    assert impl.map_get(buf, 1000, b"absent") == -1
    # a key put again keeps the size and takes the new offset
    assert impl.map_put(buf, 1000, size, b"7", 12345) == 900
    assert impl.map_get(buf, 1000, b"7") == 12345


def test_full_map_refuses_a_put_and_still_answers(impl):
    buf = bytearray(5 * ENTRY_SIZE)
    size = 0
    for i in range(5):
        size = impl.map_put(buf, 5, size, b"k%d" % i, i)
    with pytest.raises(ValueError, match="full offset map, entries: 5, slots: 5"):
        impl.map_put(buf, 5, size, b"k0", 9)
    assert [impl.map_get(buf, 5, b"k%d" % i) for i in range(5)] == list(range(5))
    assert impl.map_get(buf, 5, b"other") == -1  # every slot probed, none matches


def test_map_arguments_are_checked(impl):
    with pytest.raises(TypeError, match="writable"):
        impl.map_get(bytes(48), 2, b"k")
    with pytest.raises(ValueError, match="3 slots do not fit a buffer of 48 bytes"):
        impl.map_get(bytearray(48), 3, b"k")
    with pytest.raises(ValueError, match="0 slots"):
        impl.map_put(bytearray(48), 0, 0, b"k", 1)


def test_both_implementations_build_the_same_bytes():
    if compaction.C is None:
        pytest.skip("C extension not built")
    rnd = random.Random(5)
    a, b = bytearray(97 * ENTRY_SIZE), bytearray(97 * ENTRY_SIZE)
    sa = sb = 0
    for _ in range(80):
        key, off = rnd.randbytes(rnd.randint(0, 20)), rnd.randint(0, 1 << 40)
        sa = compaction.PYTHON.map_put(a, 97, sa, key, off)
        sb = compaction.C.map_put(b, 97, sb, key, off)
    assert (a, sa) == (b, sb)
    compaction.C.map_clear(a)
    compaction.PYTHON.map_clear(b)
    assert a == b == bytearray(len(a))


def test_skimpy_offset_map():
    m = SkimpyOffsetMap(100 * ENTRY_SIZE + 7, 0.9)
    assert (m.slots, m.memory, m.max_entries) == (100, 100 * ENTRY_SIZE, 90)
    for i in range(50):
        m.put(b"key-%d" % (i % 20), i)
    assert (len(m), m.latest_offset) == (20, 49)
    assert m.get(b"key-3") == 43 and m.get(b"nope") == -1
    assert m.utilization == 0.2
    m.update_latest_offset(77)
    assert m.latest_offset == 77
    m.clear()
    assert (len(m), m.latest_offset, m.get(b"key-3")) == (0, -1, -1)
    assert bytes(m.buffer[:]) == bytes(m.memory)
    with pytest.raises(ValueError, match="too small to fit in even a single message"):
        SkimpyOffsetMap(ENTRY_SIZE, 0.9)
    with pytest.raises(ValueError, match="load factor"):
        SkimpyOffsetMap(1000, 1.5)


def test_put_records_stops_at_the_load_factor():
    # Cleaner.buildOffsetMapForSegment: a put is tried only while size < slots * load factor
    m = SkimpyOffsetMap(10 * ENTRY_SIZE, 0.5)
    data = encode_batch([(0, b"k%d" % i, b"v", ()) for i in range(8)], base_offset=100)
    full = m.put_records(data[61:], 8, 100, 0)
    assert full and len(m) == 5 and m.latest_offset == 104
    assert m.get(b"k4") == 104 and m.get(b"k5") == -1


@pytest.mark.parametrize("starts,bounds,stops_at", [
    ([100, 108, 104], (100, -1, -1), 2),  # the third goes back below the one before it
    ([100, 108, 104], (-1, -1, -1), 2),   # the same with no bounds: a run always increases
    ([100, 108, 116], (100, 110, -1), 1),  # the second reaches 110, the next segment's base
    ([100, 108, 116], (105, -1, -1), 0),  # the first starts below the segment's base
    ([100, 108, 116], (-1, -1, 101), 0),  # the first starts below the offset expected
    ([100, 108, 116], (100, 124, 100), 3),  # every batch in place
])
def test_map_and_filter_loops_stop_at_offsets_out_of_order(impl, starts, bounds, stops_at):
    """The batch loops take only batches in the walk's order (docs/design.md §5.1: the
    segment's base, the next segment's, increasing offsets) and stop at the first that is
    not, as at one that is not plain: the cleaner's walker then names the damage. The
    offset after the last batch taken comes back as ``expected``."""
    batches = [encode_batch([(0, b"k%d" % (b + i), b"v", ()) for i in range(8)],
                            base_offset=b) for b in starts]
    buf = b"".join(batches)
    stop = sum(len(b) for b in batches[:stops_at])
    expected = starts[stops_at - 1] + 8 if stops_at else bounds[2]
    status = compaction.STATUS_END if stops_at == 3 else compaction.STATUS_OTHER
    m = bytearray(64 * ENTRY_SIZE)
    pos, _size, _latest, st, got = impl.map_batches(buf, 0, len(buf), m, 64, 0, 60, 0, *bounds)
    assert (pos, st, got) == (stop, status, expected)
    pos, _out, st, _stats, got = impl.filter_batches(
        buf, 0, len(buf), m, 64, 1 << 40, 0, 0, b"", -1, *bounds)
    assert (pos, st, got) == (stop, status, expected)


def _records_batch(n, base, rnd, keyless=0.1):
    recs = [(1000 + i, None if rnd.random() < keyless else b"k%d" % rnd.randint(0, 30),
             None if rnd.random() < 0.2 else rnd.randbytes(rnd.randint(0, 40)),
             [("h", b"1")] if rnd.random() < 0.2 else ()) for i in range(n)]
    return encode_batch(recs, base_offset=base)


def test_map_records_and_batches_twins_on_valid_and_garbled_input():
    if compaction.C is None:
        pytest.skip("C extension not built")
    rnd = random.Random(11)
    for trial in range(300):
        buf = b""
        base = rnd.randint(0, 50)
        for _ in range(rnd.randint(1, 6)):
            n = rnd.randint(0, 8) if rnd.random() < 0.9 else 0
            if n == 0:
                n = 1
            buf += _records_batch(n, base, rnd)
            base += n + rnd.randint(0, 5)
        if trial % 3 == 0:  # damage: a byte flipped (CRC) or the records garbled
            b = bytearray(buf)
            b[rnd.randrange(len(b))] ^= 1 << rnd.randrange(8)
            buf = bytes(b)
        end = rnd.randint(0, len(buf)) if trial % 5 == 0 else len(buf)
        slots = rnd.randint(1, 40)
        max_size = rnd.randint(0, slots)
        start = rnd.randint(0, 60)
        ma, mb = bytearray(slots * ENTRY_SIZE), bytearray(slots * ENTRY_SIZE)
        # the order bounds (segment base, next base, expected; -1 none): often ones the
        # batches break, so that both twins stop at the same batch
        order = () if trial % 4 == 0 else (rnd.choice([-1, 0, rnd.randint(0, 60)]),
                                           rnd.choice([-1, rnd.randint(0, base + 5)]),
                                           rnd.choice([-1, rnd.randint(0, base + 5)]))
        assert compaction.PYTHON.map_batches(buf, 0, end, ma, slots, 0, max_size, start,
                                             *order) == \
            compaction.C.map_batches(buf, 0, end, mb, slots, 0, max_size, start, *order)
        assert ma == mb
        # one payload at a time, garbled too: the same result or the same error
        payload = bytearray(buf[61:120])
        if trial % 2:
            payload[rnd.randrange(len(payload))] = rnd.randrange(256)
        outs = []
        count = rnd.randint(0, 6)
        for impl in (compaction.PYTHON, compaction.C):
            m = bytearray(slots * ENTRY_SIZE)
            try:
                outs.append((impl.map_records(bytes(payload), count, 5, m, slots, 0, slots, 0),
                             m))
            except (CorruptRecordError, ValueError) as exc:
                outs.append((type(exc), str(exc)))
        assert outs[0] == outs[1]


def test_clear_of_a_large_map_is_quick():
    m = SkimpyOffsetMap(32 << 20, 0.9)
    for i in range(1000):
        m.put(os.urandom(8), i)
    m.clear()
    assert len(m) == 0 and not any(m.buffer[:1 << 20])
