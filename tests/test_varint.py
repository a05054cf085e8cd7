"""Zigzag varints (kafkafs.record.varint) against Kafka's ByteUtils byte vectors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkafs.record.errors import CorruptRecordError
from kafkafs.record.varint import decode_varint, encode_varint, varint_size, zigzag

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1


# Vectors: zigzag maps 0, -1, 1, -2, ... to 0, 1, 2, 3, ...; then 7 bits per byte, least
# significant group first, high bit on every byte but the last (ByteUtils.writeVarlong).
KNOWN = [
    (0, b"\x00"),
    (-1, b"\x01"),
    (1, b"\x02"),
    (-2, b"\x03"),
    (29, b"\x3a"),  # a record length of 29 is the byte 0x3a
    (63, b"\x7e"),
    (-64, b"\x7f"),
    (64, b"\x80\x01"),
    (-65, b"\x81\x01"),
    (300, b"\xd8\x04"),
    (8191, b"\xfe\x7f"),
    (8192, b"\x80\x80\x01"),
    (INT32_MAX, b"\xfe\xff\xff\xff\x0f"),
    (INT32_MIN, b"\xff\xff\xff\xff\x0f"),
    (INT64_MAX, b"\xfe" + b"\xff" * 8 + b"\x01"),
    (INT64_MIN, b"\xff" * 9 + b"\x01"),
]


@pytest.mark.parametrize("value,encoded", KNOWN)
def test_known_vectors(value, encoded):
    assert encode_varint(value) == encoded
    assert varint_size(value) == len(encoded)
    assert decode_varint(encoded, 0) == (value, len(encoded))


def test_zigzag_order():
    assert [zigzag(n) for n in (0, -1, 1, -2, 2)] == [0, 1, 2, 3, 4]
    assert zigzag(INT64_MAX) == 2**64 - 2
    assert zigzag(INT64_MIN) == 2**64 - 1


@pytest.mark.parametrize("value", [INT64_MIN, INT64_MIN + 1, -1, 0, 1, INT64_MAX - 1, INT64_MAX,
                                   INT32_MIN - 1, INT32_MAX + 1, 2**35, -(2**49)])
def test_round_trip_extremes(value):
    enc = encode_varint(value)
    assert 1 <= len(enc) <= 10
    assert decode_varint(enc, 0) == (value, len(enc))


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=INT64_MIN, max_value=INT64_MAX), st.binary(max_size=4))
def test_round_trip_property(value, prefix):
    enc = encode_varint(value)
    assert len(enc) == varint_size(value)
    # every byte but the last has the continuation bit
    assert all(b & 0x80 for b in enc[:-1]) and not enc[-1] & 0x80
    buf = prefix + enc + b"\xff\xff"  # decoding stops at the end of the varint
    assert decode_varint(buf, len(prefix)) == (value, len(prefix) + len(enc))
    assert decode_varint(memoryview(buf), len(prefix)) == (value, len(prefix) + len(enc))


def test_decode_sequence_advances_position():
    buf = b"".join(encode_varint(n) for n in (5, -300, 2**40, 0))
    pos = 0
    out = []
    for _ in range(4):
        v, pos = decode_varint(buf, pos)
        out.append(v)
    assert out == [5, -300, 2**40, 0]
    assert pos == len(buf)


@pytest.mark.parametrize("value", [64, 300, INT32_MAX, INT64_MIN])
def test_truncated_input_raises(value):
    enc = encode_varint(value)
    for cut in range(len(enc)):
        with pytest.raises(CorruptRecordError, match="ends inside a varint"):
            decode_varint(enc[:cut], 0)


def test_empty_buffer_and_position_past_end_raise():
    with pytest.raises(CorruptRecordError):
        decode_varint(b"", 0)
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\x02", 1)


def test_longer_than_ten_bytes_raises():
    with pytest.raises(CorruptRecordError, match="longer than 10 bytes"):
        decode_varint(b"\x80" * 10 + b"\x00", 0)
    # ten bytes is still a varlong
    assert decode_varint(b"\x80" * 9 + b"\x00", 0) == (0, 10)


def test_out_of_range_values_rejected():
    with pytest.raises(ValueError):
        encode_varint(INT64_MAX + 1)
    with pytest.raises(ValueError):
        encode_varint(INT64_MIN - 1)


def test_corrupt_record_error_is_value_error():
    # callers that only know ValueError (e.g. CLI parsing) still catch it
    assert issubclass(CorruptRecordError, ValueError)
