"""Cross-checks of the v2 codec against two independent implementations (docs/design.md §2.2).

* ours -> theirs: bytes from :func:`encode_batch` decoded by kafka-python
  (``kafka.record.default_records.DefaultRecordBatch`` and ``MemoryRecords``) and by aiokafka
  (its C extension ``aiokafka.record._crecords`` and its pure-Python classes).
* theirs -> ours: batches from kafka-python's and aiokafka's ``DefaultRecordBatchBuilder``
  read with :func:`iter_batches` / ``records()``.

Byte-for-byte equality (codec none, same input). The builders fix the fields a producer
does not choose, and ``encode_batch`` reproduces them with these options:

* base offset 0 (``encode_batch`` default) and offset deltas ``0..n-1`` (default), because
  the builders are fed offsets ``0, 1, 2, ...``;
* ``partition_leader_epoch=0`` for kafka-python (its builder writes 0), the default -1 for
  aiokafka (it writes ``NO_PARTITION_LEADER_EPOCH``);
* producer id/epoch/base sequence and ``is_transactional`` passed the same on both sides;
* CreateTime (the builders never set LogAppendTime: the broker does).

With a codec set, the compressed bytes differ (other levels and framing libraries; both
builders even fall back to an uncompressed batch when compression does not pay), so there
the decompressed record bytes are compared instead.
"""

from __future__ import annotations

import struct

import pytest
from aiokafka.record.default_records import _DefaultRecordBatchBuilderPy as AIOPyBuilder
from aiokafka.record.default_records import _DefaultRecordBatchPy as AIOPyBatch
from aiokafka.record.memory_records import _MemoryRecordsPy as AIOPyMemoryRecords
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch as KPBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KPBuilder
from kafka.record.memory_records import MemoryRecords as KPMemoryRecords

from kafkafs.record import compression as codecs
from kafkafs.record.batch import (
    BATCH_OVERHEAD,
    LOG_APPEND_TIME,
    encode_batch,
    iter_batches,
)

try:  # the C extension (what aiokafka uses when it is built)
    from aiokafka.record._crecords import DefaultRecordBatch as AIOCBatch
    from aiokafka.record._crecords import DefaultRecordBatchBuilder as AIOCBuilder
    from aiokafka.record._crecords import MemoryRecords as AIOCMemoryRecords
except ImportError:  # pragma: no cover - depends on the installed wheel
    AIOCBatch = AIOCBuilder = AIOCMemoryRecords = None

CODECS = {"none": codecs.NONE, "gzip": codecs.GZIP, "snappy": codecs.SNAPPY,
          "lz4": codecs.LZ4, "zstd": codecs.ZSTD}

DECODERS = [("kafka-python", KPBatch), ("aiokafka-py", AIOPyBatch)]
MEMORY_RECORDS = [("kafka-python", KPMemoryRecords), ("aiokafka-py", AIOPyMemoryRecords)]
# (name, builder class, partition leader epoch the builder writes)
BUILDERS = [("kafka-python", KPBuilder, 0), ("aiokafka-py", AIOPyBuilder, -1)]
if AIOCBatch is not None:
    DECODERS.append(("aiokafka-c", AIOCBatch))
    MEMORY_RECORDS.append(("aiokafka-c", AIOCMemoryRecords))
    BUILDERS.append(("aiokafka-c", AIOCBuilder, -1))

INTEROP = settings(max_examples=50, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

optional_bytes = st.one_of(st.none(), st.binary(max_size=200))
headers_st = st.lists(st.tuples(st.text(max_size=12), optional_bytes), max_size=3)
timestamp_st = st.integers(min_value=0, max_value=2**42)  # ms: up to the year 2109
record_st = st.tuples(timestamp_st, optional_bytes, optional_bytes, headers_st)
records_st = st.lists(record_st, min_size=1, max_size=50)


def their_view(rec):
    """A decoded record of theirs as (offset, timestamp, key, value, headers tuple)."""
    return (rec.offset, rec.timestamp, rec.key, rec.value,
            tuple((k, v) for k, v in rec.headers))


def expected(recs, base_offset=0):
    return [(base_offset + i, t, k, v, tuple(h)) for i, (t, k, v, h) in enumerate(recs)]


def build_theirs(builder_cls, recs, codec, producer=(-1, -1, -1), transactional=False):
    pid, epoch, seq = producer
    builder = builder_cls(2, codec, int(transactional), pid, epoch, seq, 1 << 30)
    for i, (t, k, v, h) in enumerate(recs):
        assert builder.append(i, t, k, v, list(h)) is not None
    return bytes(builder.build())


# -- ours -> theirs --------------------------------------------------------------------------

@pytest.mark.parametrize("codec_name", list(CODECS))
@INTEROP
@given(recs=records_st, base_offset=st.integers(0, 2**40))
def test_ours_decoded_by_theirs(codec_name, recs, base_offset):
    data = encode_batch(recs, base_offset=base_offset, compression=CODECS[codec_name])
    want = expected(recs, base_offset)
    for name, batch_cls in DECODERS:
        batch = batch_cls(data)
        assert batch.validate_crc(), name
        assert batch.compression_type == CODECS[codec_name], name
        assert (batch.base_offset, batch.max_timestamp) == (base_offset,
                                                            max(r[0] for r in recs)), name
        assert [their_view(r) for r in batch] == want, name


@pytest.mark.parametrize("codec_name", list(CODECS))
def test_ours_read_by_their_memory_records(codec_name):
    codec = CODECS[codec_name]
    batches = [[(1_700_000_000_000 + i * 3 + j, b"k%d" % j, b"v%d-%d" % (i, j) * 20, ())
                for j in range(7)] for i in range(4)]
    buf = b"".join(encode_batch(b, base_offset=7 * i, compression=codec)
                   for i, b in enumerate(batches))
    want = [(7 * i + j, t, k, v, ()) for i, b in enumerate(batches)
            for j, (t, k, v, _h) in enumerate(b)]
    for name, mr_cls in MEMORY_RECORDS:
        records = mr_cls(buf)
        got = []
        while True:
            batch = records.next_batch()
            if batch is None:
                break
            got.extend(their_view(r) for r in batch)
        assert got == want, name


def test_ours_log_append_time_and_flags_read_by_theirs():
    recs = [(1000, b"a", b"1", ()), (1005, b"b", b"2", [("h", b"x")])]
    data = encode_batch(recs, base_offset=40, timestamp_type=LOG_APPEND_TIME,
                        log_append_time=99_000, producer_id=12, producer_epoch=2,
                        base_sequence=5, is_transactional=True, partition_leader_epoch=8)
    for name, batch_cls in DECODERS:
        batch = batch_cls(data)
        assert batch.validate_crc(), name
        assert batch.timestamp_type == 1 and batch.is_transactional, name
        assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (12, 2, 5), name
        assert [r.timestamp for r in batch] == [99_000, 99_000], name
    assert KPBatch(data).leader_epoch == 8


def test_ours_control_batch_read_by_kafka_python():
    commit = (0, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 3), ())
    data = encode_batch([commit], base_offset=9, producer_id=4, producer_epoch=0,
                        is_transactional=True, is_control=True)
    batch = KPBatch(data)
    assert batch.is_control_batch and batch.validate_crc()
    (rec,) = list(batch)
    assert rec.commit and rec.version == 0 and rec.offset == 9
    for name, batch_cls in DECODERS:
        assert batch_cls(data).is_control_batch, name


# -- theirs -> ours --------------------------------------------------------------------------

@pytest.mark.parametrize("codec_name", list(CODECS))
@INTEROP
@given(recs=records_st)
def test_theirs_decoded_by_ours(codec_name, recs):
    codec = CODECS[codec_name]
    for name, builder_cls, leader_epoch in BUILDERS:
        data = build_theirs(builder_cls, recs, codec)
        (batch,) = list(iter_batches(data, validate=True))
        assert batch.compression in (codec, codecs.NONE), name  # they may skip compression
        assert batch.partition_leader_epoch == leader_epoch, name
        assert batch.records_count == len(recs) and batch.last_offset_delta == len(recs) - 1
        assert batch.max_timestamp == max(r[0] for r in recs), name
        assert [tuple(r) for r in batch.records()] == expected(recs), name
        ours = encode_batch(recs, partition_leader_epoch=leader_epoch)
        if codec == codecs.NONE:
            assert data == ours, name  # byte for byte (see the module docstring)
        else:
            # the records inside, once decompressed, are the same bytes as ours
            payload = bytes(batch.buffer[BATCH_OVERHEAD:])
            if batch.compression != codecs.NONE:
                payload = codecs.decompress(batch.compression, payload)
            assert payload == ours[BATCH_OVERHEAD:], name


@pytest.mark.parametrize("codec_name", list(CODECS))
def test_theirs_with_producer_state_decoded_by_ours(codec_name):
    codec = CODECS[codec_name]
    recs = [(1_700_000_000_000 + i, b"key", b"value %d " % i * 30, [("trace", b"t%d" % i)])
            for i in range(20)]
    for name, builder_cls, leader_epoch in BUILDERS:
        data = build_theirs(builder_cls, recs, codec, producer=(77, 3, 1000), transactional=True)
        (batch,) = list(iter_batches(data, validate=True))
        assert batch.compression == codec, name  # this payload compresses well
        assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (77, 3, 1000)
        assert batch.is_transactional and not batch.is_control, name
        assert batch.last_sequence == 1019, name
        assert [tuple(r) for r in batch.records()] == expected(recs), name
        if codec == codecs.NONE:
            assert data == encode_batch(recs, partition_leader_epoch=leader_epoch,
                                        producer_id=77, producer_epoch=3, base_sequence=1000,
                                        is_transactional=True), name


def test_their_codecs_read_our_framings_and_back():
    """kafka-python's codec functions against ours, framing by framing."""
    from kafka import codec as kc

    data = b"interop " * 5000
    assert kc.snappy_decode(codecs.compress(codecs.SNAPPY, data)) == data
    assert kc.lz4_decode(codecs.compress(codecs.LZ4, data)) == data
    assert kc.zstd_decode(codecs.compress(codecs.ZSTD, data)) == data
    assert kc.gzip_decode(codecs.compress(codecs.GZIP, data)) == data
    assert codecs.decompress(codecs.SNAPPY, kc.snappy_encode(data)) == data
    assert codecs.decompress(codecs.SNAPPY, kc.snappy_encode(data, xerial_compatible=False)) == data
    assert codecs.decompress(codecs.LZ4, kc.lz4_encode(data)) == data
    assert codecs.decompress(codecs.ZSTD, kc.zstd_encode(data)) == data
    assert codecs.decompress(codecs.GZIP, kc.gzip_encode(data)) == data


def test_old_kafka_lz4_framing_from_kafka_python():
    """kafka-python's encoder for 0.8/0.9 brokers writes the wrong header checksum
    (KAFKA-3160); readers must take it (test_compression covers the bytes by hand)."""
    pytest.importorskip("xxhash")
    from kafka import codec as kc

    data = b"old kafka " * 3000
    old = kc.lz4_encode_old_kafka(data)
    assert old[6] != 0x82
    assert codecs.decompress(codecs.LZ4, old) == data
