"""RecordBatch v2 codec (kafkafs.record.batch): header fields, records, validation.

The layout checks read bytes at the offsets of the v2 header (docs/design.md §2.2) directly,
and a small reference encoder below (written from that layout, one plain loop, no tables)
pins the exact bytes of the fast encoder and feeds the fast decoder.
"""

from __future__ import annotations

import pickle
import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkafs.record import compression as codecs
from kafkafs.record.batch import (
    BATCH_OVERHEAD,
    CREATE_TIME,
    LOG_APPEND_TIME,
    NO_TIMESTAMP,
    Record,
    RecordBatch,
    batch_values,
    decode_all,
    encode_batch,
    encode_record_body,
    iter_batches,
    peek_offset_and_size,
    set_base_offset,
)
from kafkafs.record.errors import CorruptRecordError

CODECS = [codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD]
TS = 1_700_000_000_000


# -- a reference encoder, straight from the layout (docs/design.md §2.2) -----------------

def ref_varint(n: int) -> bytes:
    z = ((n << 1) ^ (n >> 63)) & (2**64 - 1)
    out = bytearray()
    while True:
        if z < 0x80:
            out.append(z)
            return bytes(out)
        out.append(0x80 | (z & 0x7F))
        z >>= 7


def ref_bytes(b) -> bytes:
    return ref_varint(-1) if b is None else ref_varint(len(b)) + bytes(b)


def ref_record(offset_delta, ts_delta, key, value, headers) -> bytes:
    body = b"\x00" + ref_varint(ts_delta) + ref_varint(offset_delta) + ref_bytes(key)
    body += ref_bytes(value) + ref_varint(len(headers))
    for hk, hv in headers:
        body += ref_bytes(hk.encode("utf-8")) + ref_bytes(hv)
    return ref_varint(len(body)) + body


def ref_batch(records, base_offset=0, leader_epoch=-1, attributes=0, producer_id=-1,
              producer_epoch=-1, base_sequence=-1) -> bytes:
    base_ts = records[0][0]
    payload = b"".join(ref_record(i, r[0] - base_ts, r[1], r[2], r[3])
                       for i, r in enumerate(records))
    tail = struct.pack(">hiqqqhii", attributes, len(records) - 1, base_ts,
                       max(r[0] for r in records), producer_id, producer_epoch, base_sequence,
                       len(records)) + payload
    return (struct.pack(">qiib", base_offset, 49 + len(payload), leader_epoch, 2)
            + struct.pack(">I", crc32c(tail)) + tail)


def restamp(batch: bytes | bytearray) -> bytes:
    """Fix the length and CRC of a hand-edited batch so only the edit is 'wrong'."""
    b = bytearray(batch)
    struct.pack_into(">i", b, 8, len(b) - 12)
    struct.pack_into(">I", b, 17, crc32c(bytes(b[21:])))
    return bytes(b)


def one(data) -> RecordBatch:
    batches = list(iter_batches(data))
    assert len(batches) == 1
    return batches[0]


# -- header fields -------------------------------------------------------------------------

def test_every_header_field_round_trips():
    recs = [(TS + 5, b"k1", b"v1", ()), (TS, b"k2", b"v2", ()), (TS + 9, None, b"v3", ())]
    data = encode_batch(recs, base_offset=1234567890123, partition_leader_epoch=17,
                        producer_id=987654321, producer_epoch=3, base_sequence=42,
                        is_transactional=True)
    b = one(data)
    assert (b.base_offset, b.partition_leader_epoch, b.magic) == (1234567890123, 17, 2)
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (987654321, 3, 42)
    assert (b.last_offset_delta, b.records_count) == (2, 3)
    assert (b.base_timestamp, b.max_timestamp) == (TS + 5, TS + 9)
    assert b.attributes == 0x10 and b.is_transactional and not b.is_control
    assert b.timestamp_type == CREATE_TIME and b.compression == codecs.NONE
    assert not b.has_delete_horizon and b.delete_horizon_ms == NO_TIMESTAMP
    assert b.size == len(data) and b.batch_length == len(data) - 12
    assert (b.last_offset, b.next_offset) == (1234567890125, 1234567890126)
    assert b.last_sequence == 44
    assert b.position == 0 and b.is_valid()
    # the same values at the byte offsets of the format table
    assert struct.unpack_from(">q", data, 0)[0] == 1234567890123
    assert struct.unpack_from(">i", data, 8)[0] == len(data) - 12
    assert struct.unpack_from(">i", data, 12)[0] == 17
    assert data[16] == 2
    assert struct.unpack_from(">I", data, 17)[0] == crc32c(data[21:]) == b.crc
    assert struct.unpack_from(">hiqqqhii", data, 21) == (
        0x10, 2, TS + 5, TS + 9, 987654321, 3, 42, 3)
    assert data == ref_batch(recs, base_offset=1234567890123, leader_epoch=17, attributes=0x10,
                             producer_id=987654321, producer_epoch=3, base_sequence=42)


def test_defaults_are_kafkas_no_values():
    b = one(encode_batch([(TS, b"k", b"v", ())]))
    assert (b.partition_leader_epoch, b.producer_id, b.producer_epoch, b.base_sequence) == (
        -1, -1, -1, -1)
    assert b.last_sequence == -1


def test_sequence_wraps_at_int_max():
    b = one(encode_batch([(TS, None, b"a", ())] * 3, producer_id=1, producer_epoch=0,
                         base_sequence=2**31 - 2))
    assert b.last_sequence == 0


def test_record_bytes_match_the_format():
    # every integer zigzag: length 11 -> 0x16, offset delta 1 -> 0x02, key length 2 -> 0x04,
    # null value -> 0x01, one header -> 0x02, header key length 1 -> 0x02, null -> 0x01
    body = encode_record_body(1, 0, b"ab", None, [("h", None)])
    assert body == bytes([0x16, 0x00, 0x00, 0x02, 0x04]) + b"ab" + bytes(
        [0x01, 0x02, 0x02]) + b"h" + bytes([0x01])
    assert len(body) - 1 == 0x16 >> 1


# -- records -------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
def test_null_key_value_and_headers(codec):
    recs = [
        (TS, None, None, ()),
        (TS + 1, b"", b"", ()),
        (TS + 2, b"key", None, [("a", b"1"), ("nullvalue", None), ("", b"")]),
        (TS + 3, None, b"value", [("ünïcødé ключ", b"\x00\xff")]),
    ]
    b = one(encode_batch(recs, base_offset=10, compression=codec))
    assert b.compression == codec
    got = b.records()
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in got] == [
        (10, TS, None, None, ()),
        (11, TS + 1, b"", b"", ()),
        (12, TS + 2, b"key", None, (("a", b"1"), ("nullvalue", None), ("", b""))),
        (13, TS + 3, None, b"value", (("ünïcødé ключ", b"\x00\xff"),)),
    ]
    assert all(type(r.key) is bytes for r in got if r.key is not None)
    assert all(type(r.value) is bytes for r in got if r.value is not None)
    assert all(type(v) is bytes for r in got for _k, v in r.headers if v is not None)
    assert batch_values(b) == [None, b"", None, b"value"]


def test_records_without_headers_element():
    b = one(encode_batch([(TS, b"k", b"v"), (TS + 1, None, b"w", ())]))
    assert [(r.key, r.value, r.headers) for r in b] == [(b"k", b"v", ()), (None, b"w", ())]


def test_records_of_other_shapes_rejected():
    with pytest.raises(ValueError, match="not 5 fields"):
        encode_batch([Record(0, TS, b"k", b"v", ())])  # a decoded record is not an input
    with pytest.raises(ValueError, match="not 2 fields"):
        encode_batch([(TS, b"k")])


def test_create_time_timestamps_any_order_and_size():
    stamps = [TS, TS - 1, TS + 100_000, TS - 10**9, TS + 8191, TS + 2**40, 0, TS]
    recs = [(t, None, b"x", ()) for t in stamps]
    b = one(encode_batch(recs))
    assert (b.base_timestamp, b.max_timestamp) == (TS, TS + 2**40)
    assert b.timestamp_type == CREATE_TIME
    assert [r.timestamp for r in b.records()] == stamps


@pytest.mark.parametrize("codec", CODECS)
def test_log_append_time_every_record_reads_max_timestamp(codec):
    recs = [(TS + i * 7, b"k", b"v%d" % i, ()) for i in range(5)]
    b = one(encode_batch(recs, timestamp_type=LOG_APPEND_TIME, log_append_time=TS + 999,
                         compression=codec))
    assert b.attributes & 0x08 and b.timestamp_type == LOG_APPEND_TIME
    assert b.max_timestamp == TS + 999
    assert [r.timestamp for r in b.records()] == [TS + 999] * 5
    assert [r.value for r in b.records()] == [b"v%d" % i for i in range(5)]


def test_log_append_time_applies_even_to_stored_deltas():
    # a CreateTime batch whose attributes are flipped to LogAppendTime (what a broker does
    # in place) must read max timestamp for every record, whatever the stored deltas
    data = bytearray(encode_batch([(TS, None, b"a", ()), (TS + 50, None, b"b", ())]))
    struct.pack_into(">h", data, 21, 0x08)
    struct.pack_into(">q", data, 35, TS + 500)
    b = one(restamp(data))
    assert [r.timestamp for r in b.records()] == [TS + 500, TS + 500]


def test_log_append_time_needs_the_time():
    with pytest.raises(ValueError):
        encode_batch([(TS, None, b"a", ())], timestamp_type=LOG_APPEND_TIME)


def test_transactional_and_control_flags():
    commit_key = struct.pack(">hh", 0, 1)
    commit_value = struct.pack(">hi", 0, 5)
    data = encode_batch([(TS, commit_key, commit_value, ())], base_offset=77, producer_id=9,
                        producer_epoch=1, is_transactional=True, is_control=True)
    b = one(data)
    assert b.attributes == 0x30 and b.is_transactional and b.is_control
    (r,) = b.records()
    assert struct.unpack(">hh", r.key) == (0, 1)  # version 0, COMMIT
    assert struct.unpack(">hi", r.value) == (0, 5)  # coordinator epoch
    assert r.offset == 77


def test_delete_horizon():
    recs = [(TS + 3, b"k", None, ()), (TS + 1, b"j", b"v", ())]
    horizon = TS + 86_400_000
    b = one(encode_batch(recs, base_offset=5, offset_deltas=[0, 4], delete_horizon_ms=horizon))
    assert b.attributes & 0x40 and b.has_delete_horizon
    assert b.base_timestamp == horizon and b.delete_horizon_ms == horizon
    assert b.max_timestamp == TS + 3
    # record timestamps survive: deltas are relative to the horizon (MemoryRecordsBuilder)
    assert [(r.offset, r.timestamp) for r in b.records()] == [(5, TS + 3), (9, TS + 1)]


def test_empty_batch_with_last_offset_delta():
    data = encode_batch([], base_offset=100, last_offset_delta=9, producer_id=3,
                        producer_epoch=0, base_sequence=20, max_timestamp=TS + 4)
    b = one(data)
    assert b.size == BATCH_OVERHEAD == len(data)
    assert (b.records_count, b.last_offset_delta, b.last_offset, b.next_offset) == (0, 9, 109, 110)
    assert (b.base_timestamp, b.max_timestamp) == (NO_TIMESTAMP, TS + 4)
    assert b.records() == [] and batch_values(b) == []
    assert b.is_valid()
    assert one(encode_batch([], last_offset_delta=0)).max_timestamp == NO_TIMESTAMP
    with pytest.raises(ValueError):
        encode_batch([])


@pytest.mark.parametrize("codec", CODECS)
def test_offset_deltas_with_gaps(codec):
    deltas = [0, 3, 4, 9000, 70000]  # compacted: holes, and deltas past the varint tables
    recs = [(TS + i, b"k%d" % d, b"v", ()) for i, d in enumerate(deltas)]
    b = one(encode_batch(recs, base_offset=2**40, offset_deltas=deltas, compression=codec))
    assert [r.offset for r in b.records()] == [2**40 + d for d in deltas]
    assert b.last_offset_delta == 70000
    b = one(encode_batch(recs, offset_deltas=deltas, last_offset_delta=80000))
    assert b.last_offset_delta == 80000 and b.next_offset == 80001
    with pytest.raises(ValueError):
        encode_batch(recs, offset_deltas=deltas[:-1])


def test_large_keys_values_and_many_records():
    big = bytes(range(256)) * 100  # 25600 B: a 3-byte length varint
    recs = [(TS + i, big[: i * 37], big if i % 2 else None, ()) for i in range(300)]
    b = one(encode_batch(recs))
    assert [(r.key, r.value) for r in b.records()] == [(k, v) for _t, k, v, _h in recs]
    assert batch_values(b) == [v for _t, _k, v, _h in recs]


# lengths and deltas at every varint size boundary: 1 byte < 64 <= 2 bytes < 8192 <= 3 bytes
BOUNDARY_LENGTHS = [0, 1, 63, 64, 65, 127, 128, 200, 8191, 8192, 70000]


@pytest.mark.parametrize("codec", [codecs.NONE, codecs.LZ4])
def test_varint_size_boundaries(codec):
    recs = []
    for i, n in enumerate(BOUNDARY_LENGTHS):
        blob = bytes((i + j) % 251 for j in range(n))
        recs.append((TS + n, blob, blob[::-1], ()))  # key and value of length n
        recs.append((TS - n, None, blob, [("k" * min(n, 300), blob)]))
    deltas = sorted({0, 1, 63, 64, 65, 8191, 8192, 70000, 2**31 - 1} |
                    set(range(100, 100 + len(recs) - 9)))
    assert len(deltas) == len(recs)
    data = encode_batch(recs, offset_deltas=deltas, compression=codec)
    if codec == codecs.NONE:
        # reference bytes with the same deltas
        ref = bytearray(ref_batch(recs))
        payload = b"".join(ref_record(d, r[0] - TS, r[1], r[2], r[3])
                           for d, r in zip(deltas, recs))
        ref = restamp(ref[:61] + payload)
        ref = bytearray(ref)
        struct.pack_into(">i", ref, 23, deltas[-1])
        assert data == restamp(ref)
    b = one(data)
    assert [tuple(r) for r in b.records()] == [
        (d, t, k, v, tuple(h)) for d, (t, k, v, h) in zip(deltas, recs)]
    assert batch_values(b) == [r[2] for r in recs]


def test_record_length_varint_sizes():
    # record lengths (not only key/value lengths) of one, two and three bytes
    for n in (0, 50, 57, 58, 59, 60, 120, 8180, 8190, 9000):
        b = one(encode_batch([(TS, None, b"v" * n, ()), (TS, b"k", b"w" * n, ())]))
        assert batch_values(b) == [b"v" * n, b"w" * n]
        assert [r.key for r in b.records()] == [None, b"k"]


def test_record_type():
    r = Record(5, TS, b"k", b"v", [("h", None)])
    assert (r.offset, r.timestamp, r.key, r.value, r.headers) == (5, TS, b"k", b"v",
                                                                 (("h", None),))
    assert r == Record(5, TS, b"k", b"v", (("h", None),))
    assert r != Record(5, TS, b"k", b"w", (("h", None),))
    assert Record(1, 2, None, None).headers == ()
    assert pickle.loads(pickle.dumps(r)) == r
    assert "offset=5" in repr(r) and "b'k'" in repr(r)
    with pytest.raises(AttributeError):
        r.value = b"x"


# -- several batches, offsets, positions ---------------------------------------------------

def test_iter_batches_positions_and_helpers():
    a = encode_batch([(TS, None, b"a", ())], base_offset=0)
    b = encode_batch([(TS, None, b"b", ()), (TS, None, b"c", ())], base_offset=1)
    buf = a + b
    got = list(iter_batches(buf, base_position=1000))
    assert [x.position for x in got] == [1000, 1000 + len(a)]
    assert [x.base_offset for x in got] == [0, 1]
    assert next(iter_batches(buf, len(a))).base_offset == 1
    assert next(iter_batches(buf, 0, len(a))).base_offset == 0
    assert len(list(iter_batches(buf, 0, len(a)))) == 1
    assert peek_offset_and_size(buf, len(a)) == (1, len(b), 2)
    assert [r.value for r in decode_all(buf)] == [b"a", b"b", b"c"]
    with pytest.raises(CorruptRecordError):
        peek_offset_and_size(buf[:16])


def test_set_base_offset_keeps_crc():
    data = bytearray(encode_batch([(TS, None, b"a", ())]))
    set_base_offset(data, 555)
    b = one(bytes(data))
    assert b.base_offset == 555 and b.is_valid()
    assert b.records()[0].offset == 555


def test_leader_epoch_is_outside_the_crc():
    data = bytearray(encode_batch([(TS, None, b"a", ())]))
    struct.pack_into(">i", data, 12, 99)
    b = one(bytes(data))
    assert b.partition_leader_epoch == 99 and b.is_valid()


# -- corruption ----------------------------------------------------------------------------

def test_crc_corruption_names_position_and_path():
    first = encode_batch([(TS, None, b"first", ())])
    second = bytearray(encode_batch([(TS, None, b"second", ())], base_offset=1))
    second[-3] ^= 0x01  # flip a bit in the value
    buf = first + bytes(second)
    # without validation the damage goes unseen at this level
    assert len(list(iter_batches(buf))) == 2
    with pytest.raises(CorruptRecordError) as info:
        list(iter_batches(buf, validate=True, path="/logs/t-0/00000000000000000000.log",
                          base_position=4096))
    msg = str(info.value)
    assert "/logs/t-0/00000000000000000000.log" in msg
    assert f"position {4096 + len(first)}" in msg
    assert "crc" in msg
    assert info.value.position == 4096 + len(first)
    assert info.value.path == "/logs/t-0/00000000000000000000.log"
    b = list(iter_batches(buf))[1]
    assert not b.is_valid()
    with pytest.raises(CorruptRecordError, match=f"position {len(first)}"):
        b.ensure_valid()


@pytest.mark.parametrize("cut", [1, 17, 60, 61, 70])
def test_torn_tail_stops_quietly(cut):
    a = encode_batch([(TS, None, b"a" * 50, ())])
    b = encode_batch([(TS, None, b"b" * 50, ())], base_offset=1)
    buf = a + b[:cut]
    assert [x.base_offset for x in iter_batches(buf)] == [0]


def test_length_below_minimum_raises():
    data = bytearray(encode_batch([(TS, None, b"a", ())]))
    struct.pack_into(">i", data, 8, 48)
    with pytest.raises(CorruptRecordError, match="smaller than the minimum") as info:
        list(iter_batches(bytes(data), path="seg.log", base_position=8))
    assert "seg.log" in str(info.value) and "position 8" in str(info.value)


def test_other_magic_raises():
    """A v2 batch whose magic byte reads 1 frames as a legacy entry (Kafka's
    FileLogInputStream frames by offset, size and magic: readers step over it to the
    batches after it), whose validation and records fail; RecordBatch refuses it. An
    unknown magic ends the framing."""
    data = bytearray(encode_batch([(TS, None, b"a", ())]))
    data[16] = 1
    (legacy,) = list(iter_batches(bytes(data)))
    assert (legacy.magic, legacy.last_offset, legacy.is_valid()) == (1, 0, False)
    with pytest.raises(CorruptRecordError, match="legacy message"):
        list(iter_batches(bytes(data), validate=True))
    with pytest.raises(CorruptRecordError, match="legacy message"):
        legacy.records()
    with pytest.raises(CorruptRecordError):
        RecordBatch.from_buffer(bytes(data))
    data[16] = 3
    with pytest.raises(CorruptRecordError, match="magic 3"):
        list(iter_batches(bytes(data)))
    with pytest.raises(CorruptRecordError, match="61-byte header"):
        RecordBatch.from_buffer(bytes(data[:40]))


def test_bytes_left_after_records_raise():
    data = restamp(encode_batch([(TS, None, b"a", ()), (TS, None, b"b", ())]) + b"\x00\x00")
    b = one(data)
    assert b.is_valid()
    with pytest.raises(CorruptRecordError, match="2 bytes left"):
        b.records()
    with pytest.raises(CorruptRecordError, match="bytes left"):
        batch_values(b)


def test_count_larger_than_records_raises():
    data = bytearray(encode_batch([(TS, None, b"a", ())]))
    struct.pack_into(">i", data, 57, 2)
    b = one(restamp(data))
    with pytest.raises(CorruptRecordError, match="record 1 of 2"):
        b.records()
    struct.pack_into(">i", data, 57, -1)
    with pytest.raises(CorruptRecordError, match="invalid record count -1"):
        one(restamp(data)).records()


@pytest.mark.parametrize("delta", [+1, -1, +2])
def test_record_length_mismatch_raises(delta):
    data = bytearray(encode_batch([(TS, None, b"abc", ()), (TS, None, b"de", ())]))
    length = data[61] >> 1  # first record's length: a one-byte varint
    data[61] = (length + delta) << 1
    b = one(restamp(data))
    with pytest.raises(CorruptRecordError, match="record") as info:
        b.records()
    assert "position 0" in str(info.value)
    with pytest.raises(CorruptRecordError):
        batch_values(b)


def test_record_length_mismatch_message():
    data = bytearray(encode_batch([(TS, None, b"abc", ()), (TS, None, b"de", ())]))
    length = data[61] >> 1
    data[61] = (length + 1) << 1  # the first record claims one byte more than it holds
    with pytest.raises(CorruptRecordError,
                       match=f"invalid record size: expected to read {length + 1} bytes in "
                             f"record payload, but instead read {length}"):
        one(restamp(data)).records()


@pytest.mark.parametrize("codec", [codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD])
def test_damaged_compressed_payload_raises_located(codec):
    data = bytearray(encode_batch([(TS, b"k", b"v" * 300, ())] * 20, compression=codec))
    for i in range(BATCH_OVERHEAD + 20, len(data) - 8):
        data[i] ^= 0x33
    b = next(iter_batches(bytes(data), base_position=512))
    with pytest.raises(CorruptRecordError, match="position 512"):
        b.records()


def test_null_header_key_raises():
    body = b"\x00\x00\x00\x01\x01\x02" + b"\x01" + b"\x01"  # header key length -1
    rec = bytes([len(body) << 1]) + body
    data = bytearray(encode_batch([(TS, None, None, ())]))
    data = restamp(data[:61] + rec)
    with pytest.raises(CorruptRecordError, match="invalid negative header key size"):
        one(data).records()


# -- property: fast paths against the reference encoder ------------------------------------

optional_bytes = st.one_of(st.none(), st.binary(max_size=300))
headers_st = st.lists(st.tuples(st.text(max_size=10), optional_bytes), max_size=3)
record_st = st.tuples(st.integers(min_value=0, max_value=2**45), optional_bytes, optional_bytes,
                      headers_st)


@settings(max_examples=150, deadline=None)
@given(st.lists(record_st, min_size=1, max_size=40), st.integers(0, 2**50))
def test_matches_reference_encoder(recs, base_offset):
    data = encode_batch(recs, base_offset=base_offset)
    assert data == ref_batch(recs, base_offset=base_offset)
    b = one(data)
    assert b.is_valid()
    got = b.records()
    assert [tuple(r) for r in got] == [
        (base_offset + i, t, k, v, tuple(h)) for i, (t, k, v, h) in enumerate(recs)]
    assert batch_values(b) == [v for _t, _k, v, _h in recs]


@settings(max_examples=40, deadline=None)
@given(st.lists(record_st, min_size=1, max_size=20), st.sampled_from(CODECS[1:]))
def test_compressed_round_trip_property(recs, codec):
    b = one(encode_batch(recs, compression=codec))
    assert [(r.timestamp, r.key, r.value, r.headers) for r in b.records()] == [
        (t, k, v, tuple(h)) for t, k, v, h in recs]
