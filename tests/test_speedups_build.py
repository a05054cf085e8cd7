"""kafkafs.record._speedups as one module built from one C file per Python twin (setup.py):
every twin finds all its C functions (a file left out of the module's init would silently
send that twin to its pure-Python path, and the tests of its C side would skip), and the
one CRC-32C routine (kafkafs/record/_crc32c.c) behind every C batch check agrees with the
crc32c package on batches of every length, the odd tails of its 8-byte loops included."""

from __future__ import annotations

import os
import random
import tempfile

import crc32c
import pytest

from kafkafs.record import columnar, compaction, fast, jsonl, plain
from kafkafs.record.batch import encode_batch

_speedups = pytest.importorskip("kafkafs.record._speedups",
                                reason="C extension not built")

FAST = {"values", "render_values", "rendered_size", "decode", "encode", "encode_lines",
        "encode_text", "encode_text_batches"}
COMPACTION = {"cl_key_hash", "cl_map_get", "cl_map_put", "cl_map_clear", "cl_map_records",
              "cl_map_batches", "cl_filter_records", "cl_filter_batches", "cl_index_entries",
              "cl_null_key_index"}
JSONL = {"jsonl_render", "jsonl_size", "jsonl_render_file"}
PLAIN = {"render_file_values"}  # only with ISA-L (setup.py)


def test_every_source_file_registers_its_functions():
    names = {n for n in vars(_speedups) if not n.startswith("__")}
    want = FAST | COMPACTION | JSONL | {"ColumnBuilder", "CorruptRecordError"}
    assert want <= names
    assert names - want <= PLAIN
    # each twin takes its C side (None would mean a name it looks for is missing)
    assert fast.C is not None and compaction.C is not None
    assert columnar.C is not None and jsonl.C is not None
    assert (plain._c_render_file_values is not None) == ("render_file_values" in names)


def _batch(value_len: int, base_offset: int = 0) -> bytes:
    return encode_batch([(1_700_000_000_000, None, bytes(range(256)) * (value_len // 256)
                          + bytes(value_len % 256), [])], base_offset=base_offset)


def _taken_by_every_c_check(batch: bytes) -> dict[str, bool]:
    """Whether each C path that checks a plain batch's CRC-32C takes ``batch``."""
    taken = {}
    slots = 64
    pos, _size, _latest, _status, _expected = _speedups.cl_map_batches(
        batch, 0, len(batch), bytearray(24 * slots), slots, 0, slots // 2, 0)
    taken["cl_map_batches"] = pos == len(batch)
    pos, _out, _status, _stats, _expected = _speedups.cl_filter_batches(
        batch, 0, len(batch), bytearray(24 * slots), slots, 1 << 62, 0, 0, b"", -1)
    taken["cl_filter_batches"] = pos == len(batch)
    pos, _status, _expected = _speedups.ColumnBuilder().add_batches(batch, 0, len(batch), 0,
                                                                    1 << 62)
    taken["ColumnBuilder.add_batches"] = pos == len(batch)
    with tempfile.TemporaryFile() as f:
        f.write(batch)
        f.flush()
        _out, nxt, _stopped = _speedups.jsonl_render_file(f.fileno(), 0, len(batch), 1 << 62)
        taken["jsonl_render_file"] = nxt == len(batch)
        if hasattr(_speedups, "render_file_values"):
            _out, nxt, _stopped = _speedups.render_file_values(f.fileno(), 0, len(batch),
                                                               1 << 62)
            taken["render_file_values"] = nxt == len(batch)
    return taken


@pytest.mark.parametrize("value_len", list(range(17)) + [255, 4093, 70_001, 1 << 20])
def test_one_crc32c_behind_every_batch_check(value_len):
    batch = _batch(value_len)
    crc = int.from_bytes(batch[17:21], "big")
    assert crc == crc32c.crc32c(batch[21:])  # encode_batch's CRC: the crc32c package's
    assert all(_taken_by_every_c_check(batch).values())
    for bad in (crc ^ 1, crc ^ 0x80000000):
        damaged = batch[:17] + bad.to_bytes(4, "big") + batch[21:]
        assert not any(_taken_by_every_c_check(damaged).values())
    # a flipped bit in the records (the CRC left as it was) is refused as well
    if value_len:
        i = random.Random(value_len).randrange(61, len(batch))
        damaged = batch[:i] + bytes([batch[i] ^ 0x10]) + batch[i + 1:]
        assert not any(_taken_by_every_c_check(damaged).values())


def test_cleaner_writes_the_crc32c_of_the_package():
    """A batch the C cleaner re-encodes (a record dropped) carries the crc32c package's
    CRC-32C (_compaction.c writes it with the shared routine)."""
    recs = [(1_700_000_000_000 + i, b"k%d" % (i % 3), os.urandom(i * 37 % 500), [])
            for i in range(40)]
    batch = encode_batch(recs)
    slots = 64
    m = bytearray(24 * slots)
    _speedups.cl_map_batches(batch, 0, len(batch), m, slots, 0, slots // 2, 0)
    pos, out, _status, stats, _expected = _speedups.cl_filter_batches(
        batch, 0, len(batch), m, slots, 1 << 62, 0, 0, b"", -1)
    assert pos == len(batch) and stats[1] == 3 and out != batch
    assert int.from_bytes(out[17:21], "big") == crc32c.crc32c(out[21:])
