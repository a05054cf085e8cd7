"""Legacy message sets (magic 0/1): read through LegacyBatch, iter_batches and the log."""

from __future__ import annotations

import json
import os
import struct
import zlib

import pytest
from aiokafka.record.legacy_records import LegacyRecordBatchBuilder as AioBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KafkaBuilder

from kafkafs.log.config import LogConfig
from kafkafs.log.loader import load_log
from kafkafs.record import compression as codec
from kafkafs.record.batch import (
    LOG_APPEND_TIME,
    TIMESTAMP_TYPE_NAMES,
    batch_values,
    encode_batch,
    iter_batches,
)
from kafkafs.record.errors import CorruptRecordError
from kafkafs.record.legacy import LegacyBatch, encode_entry
from kafkafs.record.types import Record

TS = 1_700_000_000_000
RECS = [(b"k0", b"v0"), (None, b"v1"), (b"k2", None), (None, None), (b"", b"")]
CODECS = [codec.NONE, codec.GZIP, codec.SNAPPY, codec.LZ4]


def build(builder_cls, magic, compression, offsets, recs, ts=TS):
    """Entries from a client's legacy builder (a compressed set is one wrapper at offset 0,
    as a producer sends it)."""
    b = builder_cls(magic, compression, 1 << 20)
    for i, (off, (k, v)) in enumerate(zip(offsets, recs)):
        assert b.append(off, ts + i, k, v) is not None
    return bytes(b.build())


def message(offset, magic, attributes, ts, key, value):
    """One legacy entry, encoded by hand (LegacyRecord.write)."""
    body = bytes([magic, attributes])
    if magic == 1:
        body += struct.pack(">q", ts)
    for f in (key, value):
        body += struct.pack(">i", -1) if f is None else struct.pack(">i", len(f)) + f
    msg = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(msg)) + msg


def wrapper(offset, magic, compression, ts, inner, log_append=False):
    attrs = compression | (0x08 if log_append else 0)
    return message(offset, magic, attrs, ts, None, codec.compress(compression, inner))


def one(data) -> LegacyBatch:
    (b,) = list(iter_batches(data, validate=True))
    assert isinstance(b, LegacyBatch)
    return b


@pytest.mark.parametrize("builder", [KafkaBuilder, AioBuilder], ids=["kafka", "aiokafka"])
@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("compression", CODECS, ids=codec.CODEC_NAMES.get)
def test_client_built_sets_decode(builder, magic, compression):
    if builder is AioBuilder and magic == 0 and compression == codec.LZ4:
        pytest.skip("aiokafka refuses lz4 for magic 0")
    if compression == codec.NONE:
        offsets = [40 + i for i in range(len(RECS))]
        data = build(builder, magic, compression, offsets, RECS)
        batches = list(iter_batches(data, validate=True))
        assert len(batches) == len(RECS)
    else:
        # v0 inner offsets are absolute; v1 inner offsets are relative (0..n-1)
        offsets = [40 + i for i in range(len(RECS))] if magic == 0 else list(range(len(RECS)))
        data = bytearray(build(builder, magic, compression, offsets, RECS))
        struct.pack_into(">q", data, 0, 40 + len(RECS) - 1)  # the broker's wrapper offset
        batches = [one(bytes(data))]
    records = [r for b in batches for r in b.records()]
    assert [r.offset for r in records] == [40 + i for i in range(len(RECS))]
    assert [(r.key, r.value) for r in records] == RECS
    want_ts = [-1] * len(RECS) if magic == 0 else [TS + i for i in range(len(RECS))]
    assert [r.timestamp for r in records] == want_ts
    assert all(isinstance(r, Record) and r.headers == () for r in records)
    assert [v for b in batches for v in batch_values(b)] == [v for _k, v in RECS]
    b = batches[-1]
    assert b.magic == magic and b.compression == compression
    assert b.last_offset == 40 + len(RECS) - 1 and b.next_offset == 40 + len(RECS)
    assert batches[0].base_offset == 40
    assert sum(x.size for x in batches) == len(data)
    assert b.timestamp_type == (-1 if magic == 0 else 0)
    assert TIMESTAMP_TYPE_NAMES[b.timestamp_type]
    assert not b.is_control and not b.is_transactional
    assert (b.producer_id, b.producer_epoch, b.base_sequence, b.partition_leader_epoch) == \
        (-1, -1, -1, -1)
    assert sum(x.records_count for x in batches) == len(RECS)
    assert b.is_valid()
    assert [tuple(r) for r in records] == \
        [t for x in batches for t in x.record_tuples()]


def test_v1_wrapper_offsets_and_log_append_time():
    inner = b"".join(message(i, 1, 0, TS + i, None, b"m%d" % i) for i in range(3))
    b = one(wrapper(102, 1, codec.GZIP, TS + 99, inner, log_append=True))
    assert b.timestamp_type == LOG_APPEND_TIME
    assert [(r.offset, r.timestamp, r.value) for r in b.records()] == \
        [(100, TS + 99, b"m0"), (101, TS + 99, b"m1"), (102, TS + 99, b"m2")]
    assert (b.base_offset, b.last_offset, b.last_offset_delta, b.records_count) == (100, 102, 2, 3)
    assert b.max_timestamp == TS + 99
    # CreateTime keeps each inner timestamp
    b = one(wrapper(102, 1, codec.GZIP, TS + 2, inner))
    assert [r.timestamp for r in b.records()] == [TS, TS + 1, TS + 2]
    # a wrapper offset of 0 leaves the inner offsets as they are
    b = one(wrapper(0, 1, codec.SNAPPY, TS, inner))
    assert [r.offset for r in b.records()] == [0, 1, 2]
    # a wrapper offset below its last inner relative offset is corrupt
    with pytest.raises(CorruptRecordError, match="wrapper offset"):
        one(wrapper(1, 1, codec.GZIP, TS, inner)).records()


def test_v0_messages_in_a_log_append_time_wrapper_keep_no_timestamp():
    """Kafka's LegacyRecord.timestamp(): a magic-0 message has none (-1), even inside a v1
    wrapper whose LogAppendTime every v1 inner message takes (sarama writes such sets)."""
    inner = message(0, 0, 0, None, None, b"old") + message(1, 1, 0, TS, None, b"new")
    b = one(wrapper(11, 1, codec.GZIP, TS + 99, inner, log_append=True))
    assert [(r.offset, r.timestamp, r.value) for r in b.records()] == \
        [(10, -1, b"old"), (11, TS + 99, b"new")]


def test_v0_lz4_with_old_kafka_header_checksum():
    data = bytearray(build(KafkaBuilder, 0, codec.LZ4, [7, 8], [(b"a", b"b"), (None, b"c")]))
    struct.pack_into(">q", data, 0, 8)
    b = one(bytes(data))
    assert [(r.offset, r.key, r.value) for r in b.records()] == [(7, b"a", b"b"), (8, None, b"c")]


def mixed() -> tuple[bytes, list]:
    """v0 none, v0 gzip, v1 none, v1 snappy, v1 lz4 LogAppendTime, v2 — offsets 0..10."""
    parts = [message(0, 0, 0, -1, b"k", b"a")]
    parts.append(wrapper(2, 0, codec.GZIP, -1,
                         message(1, 0, 0, -1, None, b"b") + message(2, 0, 0, -1, None, b"c")))
    parts.append(message(3, 1, 0, TS, None, b"d"))
    parts.append(wrapper(6, 1, codec.SNAPPY, TS + 6, b"".join(
        message(i, 1, 0, TS + 4 + i, None, v) for i, v in enumerate([b"e", b"f", None]))))
    parts.append(wrapper(8, 1, codec.LZ4, TS + 50, b"".join(
        message(i, 1, 0, TS, None, v) for i, v in enumerate([b"h", b"i"])), log_append=True))
    parts.append(encode_batch([(TS + 9, None, b"j", ()), (TS + 10, b"k", b"k", ())],
                              base_offset=9))
    values = [b"a", b"b", b"c", b"d", b"e", b"f", None, b"h", b"i", b"j", b"k"]
    return b"".join(parts), values


def test_mixed_formats_in_order():
    data, values = mixed()
    batches = list(iter_batches(data, validate=True))
    assert [b.magic for b in batches] == [0, 0, 1, 1, 1, 2]
    recs = [r for b in batches for r in b.records()]
    assert [r.offset for r in recs] == list(range(11))
    assert [r.value for r in recs] == values
    assert [r.timestamp for r in recs] == [-1, -1, -1, TS, TS + 4, TS + 5, TS + 6,
                                           TS + 50, TS + 50, TS + 9, TS + 10]
    assert [b.base_offset for b in batches] == [0, 1, 3, 4, 7, 9]
    assert [b.last_offset for b in batches] == [0, 2, 3, 6, 8, 10]
    pos = 0
    for b in batches:
        assert b.position == pos
        pos += b.size
    assert pos == len(data)
    # positions are shifted by base_position and the scan can start mid-buffer
    later = list(iter_batches(data, batches[2].position, base_position=1000))
    assert [b.position for b in later] == [1000 + b.position for b in batches[2:]]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("attributes", [0, 0x08, 0x08 | codec.GZIP], ids=["create", "append",
                                                                         "append-gzip-bits"])
@pytest.mark.parametrize("key, value", [(b"k", b"v"), (None, b"v"), (b"k", None), (None, None),
                                        (b"", b"")])
def test_encode_entry_is_a_hand_encoded_message(magic, attributes, key, value):
    """The cleaner's writer: an uncompressed entry, byte for byte what LegacyRecord.write
    gives; only the timestamp-type bit of ``attributes`` is kept, for magic 1 only."""
    data = encode_entry(77, magic, attributes, TS, key, value)
    kept = attributes & 0x08 if magic == 1 else 0
    assert data == message(77, magic, kept, TS, key, value)
    b = one(data)
    assert b.is_valid() and b.compression == codec.NONE
    assert b.record_tuples() == [(77, TS if magic == 1 else -1, key, value, ())]


def test_crc_corruption_detected():
    data = bytearray(message(5, 1, 0, TS, b"key", b"value"))
    data[-1] ^= 0xFF
    (b,) = list(iter_batches(bytes(data)))  # not validated: read as is
    assert not b.is_valid() and b.records()[0].value == b"valu" + bytes([ord("e") ^ 0xFF])
    with pytest.raises(CorruptRecordError, match="crc") as exc:
        list(iter_batches(message(4, 0, 0, -1, None, b"x") + bytes(data),
                          validate=True, path="x.log"))
    assert exc.value.position == len(message(4, 0, 0, -1, None, b"x"))
    assert exc.value.path == "x.log"


def test_torn_tail_stops_quietly():
    data, _values = mixed()
    whole = list(iter_batches(data))
    for cut in range(1, whole[-1].size + 1):
        got = list(iter_batches(data[:-cut], validate=True))
        assert len(got) == len(whole) - 1
    first = message(0, 1, 0, TS, None, b"hello")
    for cut in range(1, len(first)):
        assert list(iter_batches(first + first[:cut], validate=True))[-1].position == 0


def test_size_below_minimum_raises():
    bad = struct.pack(">qi", 0, 13) + b"\x00\x00\x00\x00\x01" + bytes(8)
    with pytest.raises(CorruptRecordError, match="smaller than the minimum"):
        list(iter_batches(message(0, 1, 0, TS, None, b"x") + bad))


def _crc_fixed(entry: bytes) -> bytes:
    return entry[:12] + struct.pack(">I", zlib.crc32(entry[16:])) + entry[16:]


@pytest.mark.parametrize("broken, reason", [
    # a v1 message shorter than the v1 overhead
    (struct.pack(">qi", 0, 14) + b"\x00\x00\x00\x00\x01\x00" + struct.pack(">ii", -1, -1),
     "smaller than the minimum v1 record overhead"),
    # key and value not filling the message
    (struct.pack(">qi", 0, 16) + message(0, 0, 0, -1, None, b"x")[12:] + b"\x00", "left"),
    # a codec legacy messages cannot have (zstd)
    (message(0, 0, 4, -1, None, b"x"), "invalid compression codec 4"),
], ids=["short-v1", "padded", "zstd"])
def test_broken_message_frames_then_fails_validation(broken, reason):
    """An entry whose size is sane but whose message is not frames, as Kafka's
    FileLogInputStream frames by offset, size and magic alone (a v2 batch whose magic byte
    was damaged to 0 looks so): the entry after it is reached, the log end counts it. Its
    validation and its records fail at its position, with a CRC forged right too."""
    broken = _crc_fixed(broken)
    data = broken + message(1, 0, 0, -1, None, b"y")
    first, after = list(iter_batches(data))
    assert (first.position, first.last_offset, after.position) == (0, 0, len(broken))
    assert after.values() == [b"y"] and not first.is_valid()
    for read in (first.records, first.ensure_valid):
        with pytest.raises(CorruptRecordError, match=reason) as exc:
            read()
        assert exc.value.position == 0
    with pytest.raises(CorruptRecordError, match=reason) as exc:
        list(iter_batches(data, validate=True))
    assert exc.value.position == 0


def test_damaged_wrapper_raises_with_position():
    w = bytearray(wrapper(3, 1, codec.GZIP, TS, message(0, 1, 0, TS, None, b"x")))
    w[-3] ^= 0xFF  # inside the gzip trailer: the CRC no longer matches either
    data = message(0, 0, 0, -1, None, b"a") + bytes(w)
    b = list(iter_batches(data))[-1]
    with pytest.raises(CorruptRecordError) as exc:
        b.records()
    assert exc.value.position == b.position
    with pytest.raises(CorruptRecordError):
        list(iter_batches(data, validate=True))


def test_log_recovers_and_reads_a_legacy_segment(tmp_path):
    from kafkafs.fs.views import measure_messages, render_jsonl, render_messages

    data, values = mixed()
    part = tmp_path / "t-0"
    part.mkdir()
    seg = part / "00000000000000000000.log"
    seg.write_bytes(data + data[:20])  # a torn tail after the valid entries
    lg = load_log(str(part), "t", 0, LogConfig(), had_clean_shutdown=False)
    try:
        assert os.path.getsize(seg) == len(data)  # recovery keeps every legacy entry
        assert lg.log_end_offset == 11
        assert [r.value for r in lg.records()] == values
        assert [r.offset for r in lg.records(5)] == list(range(5, 11))
        assert lg.read_record(5).value == b"f"
        assert lg.read_record(0).key == b"k"
        batches = list(lg.batches())
        assert [b.magic for b in batches] == [0, 0, 1, 1, 1, 2]
        rendered = b"".join(render_messages(b) for b in batches)
        assert rendered == b"".join((b"null" if v is None else v) + b"\n" for v in values)
        assert all(measure_messages(b) == len(render_messages(b)) for b in batches)
        jsonl = b"".join(render_jsonl(b) for b in batches).decode().splitlines()
        assert [json.loads(line)["offset"] for line in jsonl] == list(range(11))
        assert json.loads(jsonl[0])["timestamp_type"] == "NoTimestampType"
        assert json.loads(jsonl[7])["timestamp_type"] == "LogAppendTime"
    finally:
        lg.close()
