"""kafkafs.record.columnar.ColumnBuilder: the C version and its pure-Python twin gather the
same buffers and stop at the same batches for the same reasons; what they gather, as Arrow
arrays (kafkafs.spark.columns.to_record_batch), is what kafka-python decodes."""

from __future__ import annotations

import random
import struct

import pytest
from kafka.record import MemoryRecords

from kafkafs.record import columnar
from kafkafs.record import compression as codecs
from kafkafs.record.batch import encode_batch
from kafkafs.record.errors import CorruptRecordError

IMPLS = [columnar.PYTHON] + ([columnar.C] if columnar.C is not None else [])
T0 = 1_700_000_000_000


def random_batches(seed: int, n: int = 12, **kw) -> bytes:
    rnd = random.Random(seed)
    out, base = [], 0
    for _ in range(n):
        recs = []
        for i in range(rnd.randint(1, 20)):
            key = rnd.choice([None, b"", bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 300)))])
            value = rnd.choice([None, b"", b"v" * rnd.randint(1, 2000)])
            headers = rnd.choice([(), (("h", b"x"),), (("\u00e9", None), ("", b""), ("k", b"yy"))])
            recs.append((T0 + rnd.randint(-5000, 5000), key, value, headers))
        deltas = sorted(rnd.sample(range(len(recs) * 3), len(recs)))
        out.append(encode_batch(recs, base_offset=base, offset_deltas=deltas, **kw))
        base += deltas[-1] + 1 + rnd.randint(0, 3)
    return b"".join(out)


def gather(impl, buf, *args, headers=True, **kw):
    b = impl.ColumnBuilder(headers=headers)
    result = b.add_batches(buf, *args, **kw)
    d = b.finish()
    return result, {k: v if isinstance(v, int) else bytes(v) for k, v in d.items()}


def test_the_twins_gather_the_same_buffers():
    for seed in range(8):
        buf = random_batches(seed)
        for headers in (False, True):
            for args in ((0, len(buf), 0, 1 << 62), (0, len(buf), 40, 90),
                         (0, len(buf) - 7, 0, 1 << 62)):
                got = [gather(impl, buf, *args, headers=headers) for impl in IMPLS]
                assert all(g == got[0] for g in got), (seed, headers, args)
                (_pos, status, _e), d = got[0]
                assert status in (columnar.END, columnar.PARTIAL, columnar.PAST)
                assert d["rows"] == len(d["offset"]) // 8


def _kp_records(buf):
    mr, out = MemoryRecords(buf), []
    while (b := mr.next_batch()) is not None:
        out += [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in b]
    return out


@pytest.mark.parametrize("impl", IMPLS, ids=lambda i: i.name)
def test_arrow_columns_equal_kafka_python(impl):
    from kafkafs.spark.columns import to_record_batch

    buf = random_batches(99)
    b = impl.ColumnBuilder(headers=True)
    pos, status, _e = b.add_batches(buf, 0, len(buf), 0, 1 << 62)
    assert (pos, status) == (len(buf), columnar.END)
    rb = to_record_batch(b.finish(), "t", 3, True)
    rb.validate(full=True)
    got = [(r["offset"], int(r["timestamp"].timestamp() * 1000 + 0.5) if r["timestamp"]
            else None, r["key"], r["value"],
            [(h["key"], h["value"]) for h in r["headers"]]) for r in rb.to_pylist()]
    want = _kp_records(buf)
    assert [g[0] for g in got] == [w[0] for w in want]
    assert [g[2:] for g in got] == [w[2:] for w in want]
    assert rb.column("offset").to_pylist() == [w[0] for w in want]
    assert [t.value // 1000 for t in rb.column("timestamp")] == [w[1] for w in want]
    assert set(rb.column("topic").to_pylist()) == {"t"}
    assert set(rb.column("partition").to_pylist()) == {3}


def _batch(records=None, base=0, **kw):
    records = records or [(T0 + i, b"k%d" % i, b"v%d" % i, ()) for i in range(3)]
    return encode_batch(records, base_offset=base, **kw)


@pytest.mark.parametrize("impl", IMPLS, ids=lambda i: i.name)
def test_stops_before_batches_it_does_not_take(impl):
    plain = _batch(base=0)
    for other in (_batch(base=3, compression=codecs.GZIP),
                  _batch(base=3, is_control=True, is_transactional=True, producer_id=1,
                         producer_epoch=0),
                  b"\x00" * 8 + struct.pack(">i", 20) + b"\x00" * 20):  # a legacy entry
        buf = plain + other + _batch(base=6)
        b = impl.ColumnBuilder()
        assert b.add_batches(buf, 0, len(buf), 0, 100) == (len(plain), columnar.OTHER, 3)
        assert b.rows == 3
    # transactional batches are taken unless asked to leave them
    txn = _batch(base=3, is_transactional=True, producer_id=7, producer_epoch=0,
                 base_sequence=0)
    buf = plain + txn
    assert impl.ColumnBuilder().add_batches(buf, 0, len(buf), 0, 100) == \
        (len(buf), columnar.END, 6)
    assert impl.ColumnBuilder().add_batches(buf, 0, len(buf), 0, 100,
                                            skip_transactional=True) == \
        (len(plain), columnar.OTHER, 3)


@pytest.mark.parametrize("impl", IMPLS, ids=lambda i: i.name)
def test_damage_is_left_to_the_general_path(impl):
    good = _batch(base=0)
    bad = bytearray(_batch(base=3))
    bad[-2] ^= 0x01  # payload: the CRC no longer matches
    back = _batch(base=1)  # offsets that go back
    outside = _batch(base=200)
    for tail, kw in ((bytes(bad), {}), (back, {}), (outside, {"next_base": 100}),
                     (_batch(base=3), {"segment_base": 50})):
        buf = good + tail
        b = impl.ColumnBuilder()
        pos, status, _e = b.add_batches(buf, 0, len(buf), 0, 1000, **kw)
        if kw.get("segment_base"):
            assert (pos, status, b.rows) == (0, columnar.OTHER, 0)
        else:
            assert (pos, status, b.rows) == (len(good), columnar.OTHER, 3), kw
    # records that do not decode under a valid CRC: nothing of the batch is gathered
    body = bytearray(_batch(base=3))
    body[61] = 0x7F  # the first record's length varint
    from crc32c import crc32c

    struct.pack_into(">I", body, 17, crc32c(bytes(body[21:])))
    buf = good + bytes(body)
    b = impl.ColumnBuilder()
    assert b.add_batches(buf, 0, len(buf), 0, 100)[:2] == (len(good), columnar.OTHER)
    assert b.rows == 3 and b.finish()["rows"] == 3


@pytest.mark.parametrize("impl", IMPLS, ids=lambda i: i.name)
def test_partial_past_and_offsets(impl):
    buf = _batch(base=0) + _batch(base=3) + _batch(base=10)
    first = len(_batch(base=0))
    b = impl.ColumnBuilder()
    assert b.add_batches(buf, 0, len(buf) - 1, 0, 100)[:2] == (2 * first, columnar.PARTIAL)
    b = impl.ColumnBuilder()
    assert b.add_batches(buf, 0, len(buf), 1, 10)[:2] == (2 * first, columnar.PAST)
    assert bytes(b.finish()["offset"]) == struct.pack("=5q", 1, 2, 3, 4, 5)
    # LogAppendTime: every record gets the batch's max timestamp
    lat = encode_batch([(1, None, b"a", ()), (2, None, b"b", ())], timestamp_type=1,
                       log_append_time=T0)
    b = impl.ColumnBuilder()
    b.add_batches(lat, 0, len(lat), 0, 10)
    d = b.finish()
    assert bytes(d["timestamp"]) == struct.pack("=2q", T0 * 1000, T0 * 1000)
    assert bytes(d["timestamp_type"]) == struct.pack("=2i", 1, 1)


@pytest.mark.parametrize("impl", IMPLS, ids=lambda i: i.name)
def test_add_section_errors(impl):
    from kafkafs.record import fast

    payload = fast.encode([(T0, b"k", b"v", ())] * 3, T0)
    b = impl.ColumnBuilder()
    assert b.add_section(payload, 3, 10, T0, None, 0, 0, 12) == 2
    with pytest.raises(CorruptRecordError, match="records still remaining"):
        b.add_section(payload, 2, 20, T0, None, 0, 0, 100)
    with pytest.raises(CorruptRecordError, match="invalid record size"):
        b.add_section(payload[:-3], 3, 20, T0, None, 0, 0, 100)
    with pytest.raises(ValueError, match="out of the range of Spark's timestamps"):
        b.add_section(payload, 3, 20, 1 << 62, None, 0, 0, 100)
    assert b.rows == 2  # nothing of the failed sections stays
    d = b.finish()
    assert bytes(d["offset"]) == struct.pack("=2q", 10, 11)
    assert bytes(d["value_data"]) == b"vv"
