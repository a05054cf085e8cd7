"""kafkafs.record.producer_batch: record sizes as kafka-python computes them, the compression
ratio estimate as Kafka's CompressionRatioEstimator moves it, and the batch.size rule."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder as KPBuilder

from kafkafs.record import compression as codecs
from kafkafs.record.batch import encode_batch
from kafkafs.record.producer_batch import (
    DEFAULT_BATCH_SIZE,
    BatchSizer,
    CompressionRatioEstimator,
    batch_limits,
    effective_codec,
    record_size,
)

_bytes = st.none() | st.binary(max_size=20000)
_headers = st.lists(st.tuples(st.text(max_size=20), st.none() | st.binary(max_size=50)),
                    max_size=3)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(-2**40, 2**40), _bytes, _bytes, _headers)
def test_record_size_is_kafkas(offset_delta, ts_delta, key, value, headers):
    want = KPBuilder.size_in_bytes(offset_delta, ts_delta, key, value, headers)
    got = record_size(offset_delta, ts_delta, -1 if key is None else len(key),
                      -1 if value is None else len(value), headers)
    assert got == want


def test_batch_size_is_the_records_plus_the_header():
    records = [(1000 + i, b"k%d" % i, b"v" * (i * 37), (("h", b"x"),)) for i in range(50)]
    sizer = BatchSizer(10**9)
    for ts, k, v, h in records:
        assert sizer.add(ts, len(k), len(v), h)
    assert len(encode_batch(records)) == 61 + sizer.used


def test_sizer_takes_records_while_they_have_room():
    sizer = BatchSizer(100)  # a record of a 20-byte value and no key: 27 bytes
    assert [sizer.add(0, -1, 20) for _ in range(5)] == [True, True, True, False, False]
    assert sizer.count == 3 and sizer.used == 81
    big = BatchSizer(100)
    assert big.add(0, -1, 5000) and not big.add(0, -1, 0)  # the first always goes in
    zero = BatchSizer(DEFAULT_BATCH_SIZE - 16384 - 61)  # batch.size=0
    assert zero.add(0, -1, 1) and not zero.add(0, -1, 0)
    # compressed: the bytes so far count at the ratio, the next record in full
    half = BatchSizer(100, ratio=0.5)
    assert [half.add(0, -1, 20) for _ in range(7)] == [True] * 6 + [False]
    assert int(half.used * 0.5) + 27 > 100


def test_batch_limits():
    est = CompressionRatioEstimator()
    assert batch_limits(16384, "t", codecs.NONE, est) == (16323, 1.0)
    assert batch_limits(16384, "t", codecs.GZIP, est) == (16323, 1.05)
    est.update("t", codecs.GZIP, 0.2)
    assert batch_limits(16384, "t", codecs.GZIP, est) == (16323, (1.0 - 0.005) * 1.05)
    assert batch_limits(16384, "u", codecs.GZIP, est)[1] == 1.05  # per topic
    assert batch_limits(16384, "t", codecs.LZ4, est)[1] == 1.05  # and per codec


def test_estimator_moves_as_kafkas():
    """CompressionRatioEstimator.updateEstimation: a better batch lowers the estimate by
    0.005; a worse one raises it at once to at least the observed ratio, by at least 0.05."""
    est = CompressionRatioEstimator()
    assert est.estimation("t", codecs.GZIP) == 1.0
    assert est.update("t", codecs.GZIP, 0.3) == 0.995
    assert est.update("t", codecs.GZIP, 0.3) == 0.99
    assert est.update("t", codecs.GZIP, 0.991) == 0.99 + 0.05
    assert est.update("t", codecs.GZIP, 1.5) == 1.5
    assert est.update("t", codecs.GZIP, 1.5) == 1.5
    est.observe("t", codecs.GZIP, 61 + 100, 1000)  # 0.1: lower by a step
    assert est.estimation("t", codecs.GZIP) == 1.5 - 0.005
    est.observe("t", codecs.NONE, 61 + 100, 1000)  # uncompressed batches are not observed
    assert est.estimation("t", codecs.NONE) == 1.0
    est.forget("t")
    assert est.estimation("t", codecs.GZIP) == 1.0


def test_effective_codec():
    assert effective_codec("producer") == codecs.NONE
    assert effective_codec("none") == codecs.NONE
    assert effective_codec("zstd") == codecs.ZSTD
    assert effective_codec("none", codecs.GZIP) == codecs.GZIP
