"""kafkafs.record.fast: the C extension and its pure-Python twins.

Every test runs against both implementations (``impl`` is ``fast.PYTHON`` or ``fast.C``; the
C one is skipped when the extension is not built). They are held to:

* the bytes of :func:`kafkafs.record.batch.encode_batch` (codec none: the payload is
  ``encode_batch(...)[61:]``) and of kafka-python's ``DefaultRecordBatchBuilder``;
* the records :meth:`RecordBatch.records` and kafka-python decode;
* each other: same results and the same exception type and message, on valid input, on
  random garbage and on mutated payloads;
* Kafka's ``DefaultRecord.readFrom`` validation, with its wording;
* never reading past the buffer: truncated payloads are placed right before an
  inaccessible page, so an out-of-bounds read would crash the test run.
"""

from __future__ import annotations

import ctypes
import gc
import mmap
import os
import random
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch as KPBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KPBuilder

from kafkafs.record import fast
from kafkafs.record.batch import (
    BATCH_OVERHEAD,
    LOG_APPEND_TIME,
    RecordBatch,
    encode_batch,
)
from kafkafs.record.errors import CorruptRecordError
from kafkafs.record.varint import encode_varint as zz

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TS = 1_700_000_000_000
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1

IMPLS = [
    pytest.param(fast.PYTHON, id="python"),
    pytest.param(fast.C, id="c",
                 marks=pytest.mark.skipif(fast.C is None, reason="C extension not built")),
]
BOTH = [fast.PYTHON] + ([fast.C] if fast.C is not None else [])
needs_c = pytest.mark.skipif(fast.C is None, reason="C extension not built")

PROPS = settings(max_examples=60, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(params=IMPLS)
def impl(request):
    return request.param


# -- helpers ---------------------------------------------------------------------------------

def payload_of(recs, **kw) -> bytes:
    """The records section of encode_batch's batch (codec none)."""
    return encode_batch(recs, **kw)[BATCH_OVERHEAD:]


def ours(recs, base_offset=0, **kw):
    """What RecordBatch.records() makes of encode_batch's batch, as plain tuples."""
    (batch,) = [RecordBatch.from_buffer(encode_batch(recs, base_offset=base_offset, **kw))]
    return [tuple(r) for r in batch.records()]


def rendered(vals, null=b"null", sep=b"\n") -> bytes:
    return b"".join((null if v is None else v) + sep for v in vals)


def raw(ts=b"\x00", off=b"\x00", key=b"\x01", value=b"\x01", headers=b"\x00",
        attributes=b"\x00", length=None) -> bytes:
    """One record from raw field bytes (each field already a varint and its data); the
    length prefix is the body size unless given."""
    body = attributes + ts + off + key + value + headers
    return zz(len(body) if length is None else length) + body


def field(data) -> bytes:
    return zz(-1) if data is None else zz(len(data)) + data


def outcome(fn, *args, **kw):
    """("ok", result) or ("error", exception type, message): for comparing implementations."""
    try:
        return ("ok", fn(*args, **kw))
    except Exception as exc:  # noqa: BLE001 - any difference counts
        return ("error", type(exc), str(exc))


def all_readers(impl, payload, count, **kw):
    """Call every reading function; they must all agree on success or the same error."""
    return [
        outcome(impl.values, payload, count, **kw),
        outcome(impl.render_values, payload, count, **kw),
        outcome(impl.rendered_size, payload, count, **kw),
        outcome(impl.decode, payload, count, 0, 0, None, **kw),
    ]


def assert_all_raise(impl, payload, count, match, **kw):
    for fn, args in ((impl.values, ()), (impl.render_values, ()), (impl.rendered_size, ()),
                     (impl.decode, (5, TS, None))):
        with pytest.raises(CorruptRecordError, match=match):
            fn(payload, count, *args, **kw)


class GuardedBuffer:
    """Places data so that it ends right before a PROT_NONE page: reading one byte past
    the end of the returned view faults."""

    def __init__(self, size: int):
        page = mmap.PAGESIZE
        self.room = (size // page + 1) * page
        self.mm = mmap.mmap(-1, self.room + page)
        anchor = ctypes.c_char.from_buffer(self.mm)
        addr = ctypes.addressof(anchor)
        del anchor
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        if libc.mprotect(ctypes.c_void_p(addr + self.room), page, 0) != 0:
            pytest.skip("mprotect unavailable")

    def place(self, data: bytes) -> memoryview:
        start = self.room - len(data)
        self.mm[start:self.room] = data
        return memoryview(self.mm)[start:self.room]


# -- strategies ------------------------------------------------------------------------------

opt_bytes = st.one_of(st.none(), st.binary(max_size=300))
headers_st = st.lists(st.tuples(st.text(max_size=12), st.one_of(st.none(), st.binary(max_size=40))),
                      max_size=3)
ts_st = st.integers(min_value=0, max_value=2**42)
record_st = st.tuples(ts_st, opt_bytes, opt_bytes, headers_st)
records_st = st.lists(record_st, min_size=1, max_size=40)


# -- the module ------------------------------------------------------------------------------

def test_module_selects_c_when_built():
    assert fast.HAVE_C == (fast.C is not None
                           and os.environ.get("KAFKAFS_NO_SPEEDUPS", "") in ("", "0"))
    chosen = fast.C if fast.HAVE_C else fast.PYTHON
    for name in ("values", "render_values", "rendered_size", "decode", "encode",
                 "encode_lines"):
        assert getattr(fast, name) is getattr(chosen, name)


def test_env_var_forces_the_fallback():
    code = ("from kafkafs.record import fast; "
            "print(fast.HAVE_C, fast.values is fast.PYTHON.values, fast.C is not None)")
    env = dict(os.environ, KAFKAFS_NO_SPEEDUPS="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout.split()
    assert out[:2] == ["False", "True"]
    assert out[2] == str(fast.C is not None)  # still importable for tests and benchmarks


@needs_c
def test_c_raises_the_projects_error_class():
    from kafkafs.record import _speedups
    assert _speedups.CorruptRecordError is CorruptRecordError
    with pytest.raises(CorruptRecordError):
        _speedups.values(b"\x01", 1)


# -- agreement with encode_batch and RecordBatch.records() ------------------------------------

CASES = {
    "plain": [(TS + i, b"key%d" % i, b"value %d" % i, ()) for i in range(10)],
    "nulls": [(TS, None, None, ()), (TS + 1, b"", b"", ()), (TS + 2, None, b"v", ()),
              (TS + 3, b"k", None, ())],
    "headers": [(TS, b"k", b"v", [("a", b"1"), ("", b""), ("null", None)]),
                (TS - 5, None, b"x", [("ünïcödé ✓", b"\x00\xff" * 40)]),
                (TS + 9, b"k2", None, ())],
    "ts order": [(TS + 1000, b"a", b"1", ()), (TS, b"b", b"2", ()),
                 (TS + 2**40, b"c", b"3", ()), (0, b"d", b"4", ())],
    "varint sizes": [(TS, b"k" * n, b"v" * m, ())
                     for n, m in [(63, 64), (64, 63), (8191, 8192), (8192, 1), (0, 70000)]],
}


@pytest.mark.parametrize("case", list(CASES))
def test_encode_matches_encode_batch(impl, case):
    recs = CASES[case]
    assert impl.encode(recs, recs[0][0]) == payload_of(recs)
    assert impl.encode(tuple(recs), recs[0][0]) == payload_of(recs)


@pytest.mark.parametrize("case", list(CASES))
def test_readers_match_records(impl, case):
    recs = CASES[case]
    payload = payload_of(recs)
    want = ours(recs, base_offset=1234)
    n = len(recs)
    assert impl.decode(payload, n, 1234, recs[0][0], None) == want
    vals = [r[3] for r in want]
    assert impl.values(payload, n) == vals
    assert impl.render_values(payload, n) == rendered(vals)
    assert impl.render_values(payload, n, b"", b"") == rendered(vals, b"", b"")
    assert impl.render_values(payload, n, b"<NULL>", b"\r\n") == rendered(vals, b"<NULL>",
                                                                           b"\r\n")
    assert impl.rendered_size(payload, n) == len(rendered(vals))
    assert impl.rendered_size(payload, n, 6, 2) == len(rendered(vals, b"<NULL>", b"\r\n"))
    assert impl.rendered_size(payload, n, 0, 0) == len(rendered(vals, b"", b""))
    for buf in (bytearray(payload), memoryview(payload), memoryview(bytearray(payload))):
        assert impl.values(buf, n) == vals
        assert impl.decode(buf, n, 1234, recs[0][0], None) == want


def test_offset_deltas_with_gaps(impl):
    recs = [(TS + i, b"k", b"v%d" % i, ()) for i in range(5)]
    deltas = [0, 3, 4, 10, 9000]
    payload = impl.encode(recs, TS, deltas)
    assert payload == payload_of(recs, offset_deltas=deltas)
    assert impl.encode(recs, TS, offset_deltas=tuple(deltas)) == payload
    assert [r[0] for r in impl.decode(payload, 5, 100, TS, None)] == [100 + d for d in deltas]
    assert impl.decode(payload, 5, 100, TS, None) == ours(recs, 100, offset_deltas=deltas)


def test_log_append_time(impl):
    recs = [(TS + i * 7, b"k%d" % i, b"v", [("h", b"x")] if i == 2 else ()) for i in range(4)]
    lat = TS + 99_999
    payload = payload_of(recs, timestamp_type=LOG_APPEND_TIME, log_append_time=lat)
    assert impl.encode(recs, lat, log_append_time=True) == payload
    got = impl.decode(payload, 4, 50, lat, lat)
    assert got == ours(recs, 50, timestamp_type=LOG_APPEND_TIME, log_append_time=lat)
    assert {r[1] for r in got} == {lat}
    # the fixed timestamp wins over the stored deltas and the base timestamp
    assert {r[1] for r in impl.decode(payload_of(recs), 4, 0, TS, 7)} == {7}


def test_delete_horizon_base_timestamp(impl):
    recs = [(TS + i, b"k", b"v", ()) for i in range(3)]
    horizon = TS + 86_400_000
    payload = payload_of(recs, delete_horizon_ms=horizon)
    assert impl.encode(recs, horizon) == payload
    assert [r[1] for r in impl.decode(payload, 3, 0, horizon, None)] == [r[0] for r in recs]


def test_records_without_headers_element_and_other_sequences(impl):
    recs = [(TS, b"k", b"v"), [TS + 1, bytearray(b"k2"), memoryview(b"v2"), [["h", b"1"]]]]
    want = payload_of([(TS, b"k", b"v", ()), (TS + 1, b"k2", b"v2", [("h", b"1")])])
    assert impl.encode(recs, TS) == want
    assert impl.encode(iter(recs), TS) == want
    # header keys may be bytes-like, header lists and None mean "no headers" when empty
    assert impl.encode([(TS, None, b"v", [(b"h", bytearray(b"1"))])], TS) == \
        payload_of([(TS, None, b"v", [("h", b"1")])])
    assert impl.encode([(TS, None, b"v", None)], TS) == impl.encode([(TS, None, b"v", [])], TS)


def test_negative_and_extreme_deltas(impl):
    recs = [(TS, b"a", b"1", ()), (TS - 2**40, b"b", b"2", ()), (I64_MAX, b"c", b"3", ())]
    payload = impl.encode(recs, 0, [0, -1, 2**31 - 1])
    assert payload == payload_of(recs, delete_horizon_ms=0, offset_deltas=[0, -1, 2**31 - 1])
    got = impl.decode(payload, 3, 0, 0, None)
    assert [(r[0], r[1]) for r in got] == [(0, TS), (-1, TS - 2**40), (2**31 - 1, I64_MAX)]


def test_offsets_and_timestamps_wrap_as_in_java(impl):
    payload = impl.encode([(5, None, b"v", ())], 0, [1])
    (rec,) = impl.decode(payload, 1, I64_MAX, I64_MAX - 2, None)
    assert rec[0] == I64_MIN and rec[1] == I64_MIN + 2


def test_empty(impl):
    assert impl.values(b"", 0) == []
    assert impl.render_values(b"", 0) == b""
    assert impl.rendered_size(b"", 0) == 0
    assert impl.decode(b"", 0, 0, 0, None) == []
    assert impl.encode([], 0) == b""
    assert impl.encode_lines([], 0) == b""


# -- encode_lines ------------------------------------------------------------------------------

def test_encode_lines_equals_encode(impl):
    lines = [b"", b"x", b"hello world", b"\n", b"y" * 300, b"z" * 9000] + \
        [b"line %d" % i for i in range(9000)]
    want = impl.encode([(TS, None, line, ()) for line in lines], TS)
    assert impl.encode_lines(lines, TS) == want
    assert impl.encode_lines(tuple(lines), TS) == want
    assert impl.encode_lines(iter(lines), TS) == want
    assert want == payload_of([(TS, None, line, ()) for line in lines])
    assert impl.values(want, len(lines)) == lines
    mixed = [bytearray(b"a"), memoryview(b"bc"), b"d"]
    assert impl.encode_lines(mixed, 0) == impl.encode_lines([b"a", b"bc", b"d"], 0)


def test_encode_lines_timestamp_is_only_checked(impl):
    assert impl.encode_lines([b"a"], 0) == impl.encode_lines([b"a"], TS)
    with pytest.raises(TypeError):
        impl.encode_lines([b"a"], 1.5)
    with pytest.raises(OverflowError):
        impl.encode_lines([b"a"], 2**63)


# -- kafka-python -------------------------------------------------------------------------------

def kp_batch(recs) -> bytes:
    builder = KPBuilder(2, 0, 0, -1, -1, -1, 1 << 30)
    for i, (t, k, v, h) in enumerate(recs):
        assert builder.append(i, t, k, v, list(h)) is not None
    return bytes(builder.build())


def kp_decode(data: bytes):
    return [(r.offset, r.timestamp, r.key, r.value, tuple((k, v) for k, v in r.headers))
            for r in KPBatch(data)]


@pytest.mark.parametrize("case", list(CASES))
def test_kafka_python_builder_bytes(impl, case):
    recs = CASES[case]
    data = kp_batch(recs)
    assert impl.encode(recs, recs[0][0]) == data[BATCH_OVERHEAD:]
    assert impl.decode(data[BATCH_OVERHEAD:], len(recs), 0, recs[0][0], None) == kp_decode(data)


@PROPS
@given(recs=records_st)
def test_property_c_python_kafka_python_agree(recs):
    base_ts = recs[0][0]
    data = kp_batch(recs)
    theirs = kp_decode(data)
    payload = data[BATCH_OVERHEAD:]
    assert payload == payload_of(recs)
    n = len(recs)
    vals = [r[2] for r in recs]
    for impl in BOTH:
        assert impl.encode(recs, base_ts) == payload, impl.name
        assert impl.decode(payload, n, 0, base_ts, None) == theirs, impl.name
        assert impl.values(payload, n) == vals, impl.name
        assert impl.render_values(payload, n, b"-", b"|") == rendered(vals, b"-", b"|")
        assert impl.rendered_size(payload, n, 1, 1) == len(rendered(vals, b"-", b"|"))


@PROPS
@given(recs=records_st, base_offset=st.integers(0, 2**62), base_ts=ts_st,
       fixed=st.one_of(st.none(), ts_st), log_append=st.booleans(),
       deltas=st.one_of(st.none(), st.lists(st.integers(-2**31, 2**31 - 1), min_size=40,
                                            max_size=40)))
def test_property_c_equals_python(recs, base_offset, base_ts, fixed, log_append, deltas):
    od = None if deltas is None else deltas[:len(recs)]
    encoded = [outcome(impl.encode, recs, base_ts, od, log_append) for impl in BOTH]
    assert all(e == encoded[0] for e in encoded)
    assert encoded[0][0] == "ok"
    payload = encoded[0][1]
    n = len(recs)
    got = [impl.decode(payload, n, base_offset, base_ts, fixed) for impl in BOTH]
    assert all(g == got[0] for g in got)
    want_ts = [fixed if fixed is not None else (base_ts if log_append else r[0]) for r in recs]
    assert [g[1] for g in got[0]] == want_ts
    lines = [r[2] or b"" for r in recs]
    assert len({impl.encode_lines(lines, base_ts) for impl in BOTH}) == 1


# -- fuzzing: same result or same error on arbitrary bytes --------------------------------------

@needs_c
@PROPS
@given(data=st.binary(max_size=80), count=st.integers(-2, 12), exact=st.booleans())
def test_fuzz_garbage_same_outcome(data, count, exact):
    py = all_readers(fast.PYTHON, data, count, exact=exact)
    c = all_readers(fast.C, data, count, exact=exact)
    assert c == py
    for o in py:
        assert o[0] == "ok" or o[1] is CorruptRecordError, o


@needs_c
@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(recs=records_st, edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)),
                                       min_size=1, max_size=3),
       count_delta=st.sampled_from([0, 0, 0, -1, 1]))
def test_fuzz_mutated_payload_same_outcome(recs, edits, count_delta):
    payload = bytearray(payload_of(recs))
    for where, byte in edits:
        payload[where % len(payload)] = byte
    payload = bytes(payload)
    count = len(recs) + count_delta
    for exact in (True, False):
        py = all_readers(fast.PYTHON, payload, count, exact=exact)
        assert all_readers(fast.C, payload, count, exact=exact) == py
        for o in py:
            assert o[0] == "ok" or o[1] is CorruptRecordError, o


def test_utf8_header_keys_like_python():
    """The C UTF-8 check accepts exactly what Python's strict decoder does."""
    rng = random.Random(7)
    samples = [b"\xc2\x80", b"\xc1\xbf", b"\xe0\x9f\xbf", b"\xe0\xa0\x80", b"\xed\x9f\xbf",
               b"\xed\xa0\x80", b"\xef\xbf\xbf", b"\xf0\x8f\xbf\xbf", b"\xf0\x90\x80\x80",
               b"\xf4\x8f\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xff", b"\x80",
               b"a\xc3", b"\xe2\x82", b"\xf0\x9f\x98", "✓ ok".encode()]
    samples += [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 6)))
                for _ in range(3000)]
    samples += [bytes(rng.choice(b"\x41\x80\xbf\xc2\xdf\xe0\xed\xef\xf0\xf4\xf5")
                      for _ in range(rng.randrange(1, 6))) for _ in range(3000)]
    for key in samples:
        payload = raw(headers=zz(1) + field(key) + field(b"v"))
        try:
            want = [(0, 0, None, None, ((key.decode("utf-8"), b"v"),))]
        except UnicodeDecodeError:
            want = None
        for impl in BOTH:
            if want is None:
                with pytest.raises(CorruptRecordError, match="header key is not valid UTF-8"):
                    impl.decode(payload, 1, 0, 0, None)
                with pytest.raises(CorruptRecordError, match="header key is not valid UTF-8"):
                    impl.values(payload, 1)
            else:
                assert impl.decode(payload, 1, 0, 0, None) == want


# -- corruption, with Kafka's wording -----------------------------------------------------------

GOOD = raw(key=field(b"k"), value=field(b"value"))


def test_varint_too_long(impl):
    # record length with the high bit set on its 5th byte
    assert_all_raise(impl, b"\x80\x80\x80\x80\x80\x01" + b"\x00" * 20, 1,
                     r"varint is too long, the most significant bit in the 5th byte is set, "
                     r"converted value: 0$")
    # offset delta: 5 continuation bytes
    assert_all_raise(impl, raw(off=b"\xff\xff\xff\xff\xff\x01"), 1,
                     r"varint is too long.*converted value: fffffff$")
    # a value length
    assert_all_raise(impl, raw(value=b"\x81\x80\x80\x80\x80\x00"), 1,
                     r"varint is too long.*converted value: 1$")


def test_varlong_too_long(impl):
    assert_all_raise(impl, raw(ts=b"\xff" * 10 + b"\x01"), 1,
                     r"varlong is too long, the most significant bit in the 10th byte is set, "
                     r"converted value: ffffffffffffffff$")


def test_five_byte_varint_keeps_32_bits_as_java(impl):
    # 0x80 0x80 0x80 0x80 0x7f: Java's readVarint drops the bits past the 32nd -> 0xf0000000
    # (zigzag 2013265920): as an offset delta that is a valid, if odd, record
    payload = raw(off=b"\x80\x80\x80\x80\x7f")
    assert impl.decode(payload, 1, 0, 0, None)[0][0] == 2013265920
    # and a 10-byte varlong keeps only the lowest bit of its last byte
    payload = raw(ts=b"\x80" * 9 + b"\x7e")
    assert impl.decode(payload, 1, 0, 0, None)[0][1] == 0
    payload = raw(ts=b"\xfe" + b"\xff" * 8 + b"\x01")
    assert impl.decode(payload, 1, 0, 0, None)[0][1] == I64_MAX


def test_record_length_out_of_bounds(impl):
    assert_all_raise(impl, zz(10) + b"\x00\x00\x00", 1,
                     r"^invalid record size: expected 10 bytes in record payload, but instead "
                     r"the buffer has only 3 remaining bytes$")
    assert_all_raise(impl, GOOD + zz(2**31 - 1) + b"\x00", 2,
                     r"expected 2147483647 bytes in record payload, but instead the buffer "
                     r"has only 1 remaining bytes")
    assert_all_raise(impl, zz(-3) + GOOD, 1,
                     r"^invalid record size: negative record length -3$")


def test_body_length_mismatch(impl):
    body_len = len(GOOD) - 1
    longer = raw(key=field(b"k"), value=field(b"value"), length=body_len + 1) + b"\x00"
    assert_all_raise(impl, longer, 1,
                     rf"^invalid record size: expected to read {body_len + 1} bytes in record "
                     rf"payload, but instead read {body_len}$")
    shorter = raw(key=field(b"k"), value=field(b"value"), length=body_len - 1)
    assert_all_raise(impl, shorter + GOOD, 2,
                     rf"^invalid record size: expected to read {body_len - 1} bytes in record "
                     rf"payload, but instead read {body_len}$")
    # a key longer than the body but inside the buffer reads on, as Kafka does, then fails
    assert_all_raise(impl, raw(key=zz(2) + b"k") + b"\x00", 1,
                     r"^invalid record size: expected to read 7 bytes in record payload, but "
                     r"instead read 8$")


def test_negative_key_and_value_lengths(impl):
    assert_all_raise(impl, raw(key=zz(-2)), 1, r"^invalid negative key size -2$")
    assert_all_raise(impl, raw(value=zz(-7)), 1, r"^invalid negative value size -7$")
    assert_all_raise(impl, raw(headers=zz(1) + field(b"h") + zz(-2)), 1,
                     r"^invalid negative header value size -2$")


def test_header_count(impl):
    assert_all_raise(impl, raw(headers=zz(-1)), 1,
                     r"^found invalid number of record headers -1$")
    assert_all_raise(impl, raw(headers=zz(5) + field(b"h") + field(b"v")), 1,
                     r"^found invalid number of record headers. The number of record headers "
                     r"is larger than the remaining size of the buffer, numHeaders: 5$")


def test_null_header_key(impl):
    assert_all_raise(impl, raw(headers=zz(1) + zz(-1) + field(b"v")), 1,
                     r"^invalid negative header key size -1$")


def test_invalid_utf8_header_key(impl):
    assert_all_raise(impl, raw(headers=zz(1) + field(b"\xff\xfe") + field(b"v")), 1,
                     r"^header key is not valid UTF-8$")


def test_bytes_left_after_the_records(impl):
    payload = GOOD + GOOD + b"\x00"
    assert_all_raise(impl, payload, 2,
                     r"^incorrect declared batch size, records still remaining \(1 bytes left "
                     r"after 2 records\)$")
    assert_all_raise(impl, payload, 1, r"records still remaining \(\d+ bytes left after 1 ")
    # not checked for a decompressed stream
    assert impl.values(payload, 2, exact=False) == [b"value", b"value"]
    assert impl.rendered_size(payload, 1, exact=False) == 6
    assert len(impl.decode(payload, 2, 0, 0, None, exact=False)) == 2


def test_negative_count(impl):
    assert_all_raise(impl, GOOD, -1, r"^found invalid record count -1 in magic v2 batch$")


def test_too_few_records(impl):
    assert_all_raise(impl, GOOD, 2, r"^batch ends inside record 1 of 2$")
    assert_all_raise(impl, b"", 1, r"^batch ends inside record 0 of 1$")
    # a huge count from a corrupt header does not allocate for it
    assert_all_raise(impl, GOOD, 2**31 - 1, r"^batch ends inside record 1 of 2147483647$")


def test_errors_are_value_errors(impl):
    with pytest.raises(ValueError):
        impl.values(GOOD, 3)


# -- truncation at every cut point, against a guard page --------------------------------------

TRUNC_RECS = [(TS, b"key", b"value", [("h1", b"x"), ("h2", None)]),
              (TS + 300, None, b"v" * 130, ()),
              (TS - 2**35, b"k" * 70, None, [("ü", b"")])]


def test_truncated_at_every_cut(impl):
    payload = payload_of(TRUNC_RECS)
    guard = GuardedBuffer(len(payload))
    n = len(TRUNC_RECS)
    full = guard.place(payload)
    assert impl.values(full, n) == [r[2] for r in TRUNC_RECS]
    assert impl.decode(full, n, 0, TS, None) == ours(TRUNC_RECS)
    for cut in range(len(payload)):
        view = guard.place(payload[:cut])
        for exact in (True, False):
            for fn, args in ((impl.values, ()), (impl.render_values, ()),
                             (impl.rendered_size, ()), (impl.decode, (0, TS, None))):
                with pytest.raises(CorruptRecordError) as info:
                    fn(view, n, *args, exact=exact)
                assert "batch ends inside record" in str(info.value) or \
                    "invalid record size" in str(info.value), (cut, str(info.value))


def test_every_corrupt_record_against_a_guard_page(impl):
    """The corrupt records of the tests above, each ending at the guard page."""
    samples = [b"\x80\x80\x80\x80", raw(ts=b"\xff" * 9), raw(key=zz(100)), raw(value=zz(2**30)),
               raw(headers=zz(1) + zz(40)), raw(headers=zz(2) + field(b"h") + zz(9)),
               raw(headers=zz(1) + field(b"\xe2\x82")), zz(3) + b"\x00\x00\x00",
               raw(attributes=b"", ts=b"", off=b"", key=b"", value=b"", headers=b"")]
    guard = GuardedBuffer(max(map(len, samples)))
    for sample in samples:
        view = guard.place(sample)
        for o in all_readers(impl, view, 1):
            assert o[0] == "error" and o[1] is CorruptRecordError, (sample, o)


# -- big inputs ---------------------------------------------------------------------------------

def test_one_megabyte_payload(impl):
    rng = random.Random(3)
    recs = [(TS + rng.randrange(-1000, 1000), rng.choice([None, b"key%d" % i]),
             rng.randbytes(rng.randrange(100, 200)) if i % 50 else None,
             [("trace", b"%d" % i)] if i % 97 == 0 else ()) for i in range(6500)]
    payload = payload_of(recs)
    assert len(payload) > 1_000_000
    n = len(recs)
    assert impl.encode(recs, recs[0][0]) == payload
    vals = [r[2] for r in recs]
    assert impl.values(payload, n) == vals
    assert impl.render_values(payload, n) == rendered(vals)
    assert impl.rendered_size(payload, n) == len(rendered(vals))
    assert impl.decode(payload, n, 10, recs[0][0], None) == ours(recs, 10)
    # the same through a writable buffer (the C version releases the GIL on these)
    assert impl.render_values(bytearray(payload), n) == rendered(vals)
    with pytest.raises(CorruptRecordError, match="records still remaining"):
        impl.rendered_size(payload + b"\x00", n)


def test_one_megabyte_value(impl):
    big = bytes(range(256)) * 4096
    recs = [(TS, b"k", big, ()), (TS, None, b"", ())]
    payload = impl.encode(recs, TS)
    assert payload == payload_of(recs)
    assert impl.values(payload, 2) == [big, b""]
    assert impl.render_values(payload, 2, b"N", b"") == big
    assert impl.encode_lines([big], TS) == payload_of([(TS, None, big, ())])


# -- argument errors ----------------------------------------------------------------------------

ARG_ERRORS = [
    ("values", ("not bytes", 0), {}),
    ("values", (b"", 1.0), {}),
    ("render_values", (b"", 0, "null"), {}),
    ("rendered_size", (b"", 0, -1), {}),
    ("decode", (b"", 0, 0, 0, 1.5), {}),
    ("decode", (b"", 0, 2**63, 0, None), {}),
    ("encode", ([(TS, b"k")], TS), {}),
    ("encode", ([(TS, b"k", b"v", (), 1)], TS), {}),
    ("encode", ([(TS, "k", b"v", ())], TS), {}),
    ("encode", ([(1.5, None, b"v", ())], TS), {}),
    ("encode", ([(2**63, None, b"v", ())], TS), {}),
    ("encode", ([(I64_MIN, None, b"v", ())], 1), {}),
    ("encode", ([(TS, None, b"v", ())], TS, [0, 1]), {}),
    ("encode", ([(TS, None, b"v", ())], TS, [2**31]), {}),
    ("encode", ([(TS, None, b"v", ())], TS, [-2**31 - 1]), {}),
    ("encode", ([(TS, None, b"v", [("k",)])], TS), {}),
    ("encode", ([(TS, None, b"v", [(None, b"x")])], TS), {}),
    ("encode", ([(TS, None, b"v", [("k", "str")])], TS), {}),
    ("encode", ([(TS, None, b"v", [("\udc80", b"")])], TS), {}),
    ("encode", ([(TS, None, b"v", 5)], TS), {}),
    ("encode", (5, TS), {}),
    ("encode_lines", ([b"a", "b"], TS), {}),
    ("encode_lines", ([b"a", None], TS), {}),
]


@needs_c
@pytest.mark.parametrize("name,args,kw", ARG_ERRORS)
def test_argument_errors_match(name, args, kw):
    py = outcome(getattr(fast.PYTHON, name), *args, **kw)
    c = outcome(getattr(fast.C, name), *args, **kw)
    assert py[0] == "error", py
    assert c[0] == "error", c
    assert c[1] is py[1], (c, py)


def test_log_append_time_ignores_record_timestamps(impl):
    # under LogAppendTime the stored deltas are 0 whatever the records say
    payload = impl.encode([("ignored", None, b"v", ())], TS, log_append_time=True)
    assert payload == impl.encode([(TS, None, b"v", ())], TS)


# -- reference counts and leaks -----------------------------------------------------------------

@needs_c
def test_c_reference_counts():
    key, value, hval, hkey = b"k" * 33, b"v" * 44, b"h" * 55, "hk-unique-key"
    recs = [(TS, key, value, [(hkey, hval)])] * 3
    payload = fast.C.encode(recs, TS)
    null, sep = b"<null-literal>", b"<separator>"
    objs = [key, value, hval, hkey, recs, payload, null, sep]
    before = [sys.getrefcount(o) for o in objs]
    for _ in range(1000):
        fast.C.encode(recs, TS)
        fast.C.encode(recs, TS, [0, 1, 2], True)
        fast.C.encode_lines([value, key], TS)
        fast.C.values(payload, 3)
        fast.C.render_values(payload, 3, null, sep)
        fast.C.rendered_size(payload, 3)
        fast.C.decode(payload, 3, 0, TS, None)
        fast.C.decode(payload, 3, 0, TS, TS)
        for bad in ((payload, 4), (payload, 2), (payload[:-1], 3)):
            with pytest.raises(CorruptRecordError):
                fast.C.decode(*bad, 0, TS, None)
            with pytest.raises(CorruptRecordError):
                fast.C.render_values(*bad, null, sep)
        with pytest.raises(TypeError):
            fast.C.encode([(TS, key, value, [(hkey, "x")])], TS)
        with pytest.raises(TypeError):
            fast.C.encode([(TS, key, "x", [(hkey, hval)])], TS)
        with pytest.raises(ValueError):
            fast.C.encode(recs, TS, [0, 1, 2**40])
    gc.collect()
    assert [sys.getrefcount(o) for o in objs] == before


def _rss_kib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)


@needs_c
@pytest.mark.slow
def test_c_memory_stays_flat():
    rng = random.Random(5)
    recs = [(TS + i, b"key%d" % i, rng.randbytes(150), [("h", b"x")] if i % 3 else ())
            for i in range(20)]
    payload = fast.C.encode(recs, TS)
    lines = [r[2] for r in recs]
    bad = payload[:-3]

    def once():
        fast.C.values(payload, 20)
        fast.C.render_values(payload, 20)
        fast.C.rendered_size(payload, 20)
        fast.C.decode(payload, 20, 0, TS, None)
        fast.C.encode(recs, TS)
        fast.C.encode_lines(lines, TS)
        try:
            fast.C.decode(bad, 20, 0, TS, None)
        except CorruptRecordError:
            pass

    for _ in range(3000):
        once()
    gc.collect()
    start = _rss_kib()
    for _ in range(30000):
        once()
    gc.collect()
    grown = _rss_kib() - start
    # one leaked value per call would be > 4 MiB here
    assert grown < 2048, f"RSS grew by {grown} KiB"


@settings(max_examples=150, deadline=None)
@given(st.lists(st.binary(max_size=300).filter(lambda b: b"\n" not in b), max_size=40),
       st.binary(max_size=20).filter(lambda b: b"\n" not in b), st.integers(1, 6000))
def test_encode_text_takes_whole_lines_within_budget(lines, tail, budget):
    text = b"".join(line + b"\n" for line in lines) + tail
    impls = [fast.PYTHON] + ([fast.C] if fast.C is not None else [])
    results = [impl.encode_text(text, 7, budget) for impl in impls]
    assert all(r == results[0] for r in results)
    payload, n, consumed = results[0]
    assert payload == fast.PYTHON.encode_lines(lines[:n], 7)
    assert consumed == sum(len(x) + 1 for x in lines[:n])
    assert n == len(lines) or (n >= 1 and len(payload) <= budget) or n == 1
    if lines:
        assert n >= 1


def test_malloc_thresholds_take_on_glibc():
    import platform

    from kafkafs.daemon import malloc

    if platform.libc_ver()[0] != "glibc":
        return
    assert malloc.tune() is True


def test_decode_builds_a_tuple_subclass_in_both_implementations():
    from kafkafs.record import fast
    from kafkafs.record.batch import RecordBatch, encode_batch
    from kafkafs.record.types import Record

    data = encode_batch([(5, b"k", b"v", (("h", b"x"),)), (6, None, None, ())], base_offset=9)
    b = RecordBatch.from_buffer(data)
    payload, exact = b.payload()
    impls = [fast._py_decode] + ([fast._speedups.decode] if fast.HAVE_C else [])
    for decode in impls:
        got = decode(payload, 2, 9, 5, None, exact=exact, cls=Record)
        assert [type(r) for r in got] == [Record, Record]
        assert got == [(9, 5, b"k", b"v", (("h", b"x"),)), (10, 6, None, None, ())]
        assert got[0].value == b"v" and got[1].offset == 10
        one = decode(payload, 2, 9, 5, None, exact=exact, only=10, cls=Record)
        assert type(one[0]) is Record and one[0].offset == 10
        with pytest.raises(TypeError, match="subclass of tuple"):
            decode(payload, 2, 9, 5, None, exact=exact, cls=list)
    assert type(b.records()[0]) is Record


@settings(max_examples=150, deadline=None)
@given(st.lists(st.binary(max_size=300).filter(lambda b: b"\n" not in b), max_size=60),
       st.integers(-100, 6000), st.floats(0.01, 3.0))
def test_encode_text_ratio_is_the_producers_rule(lines, budget, ratio):
    """With ``ratio`` (a compressed batch's estimated ratio times 1.05) a line is taken while
    ``int(payload bytes so far * ratio) + its record's size`` stays within ``budget``
    (MemoryRecordsBuilder.hasRoomFor), the first always; both implementations agree and a
    ratio of 1.0 is the plain budget."""
    text = b"".join(line + b"\n" for line in lines)
    impls = [fast.PYTHON] + ([fast.C] if fast.C is not None else [])
    results = [impl.encode_text(text, 7, budget, ratio) for impl in impls]
    assert all(r == results[0] for r in results)
    payload, n, consumed = results[0]
    assert payload == fast.PYTHON.encode_lines(lines[:n], 7)
    assert consumed == sum(len(x) + 1 for x in lines[:n])
    used = 0
    for i, line in enumerate(lines):  # each record as kafka-python sizes it
        size = KPBuilder.size_in_bytes(i, 0, None, line, [])
        fits = i == 0 or int(used * ratio) + size <= budget
        assert fits == (i < n), (i, n)
        if not fits:
            break
        used += size
    assert [impl.encode_text(text, 7, budget, 1.0) for impl in impls] == \
        [impl.encode_text(text, 7, budget) for impl in impls]


@pytest.mark.parametrize("ratio, error", [(0.0, ValueError), (-1.0, ValueError),
                                          (float("nan"), ValueError), (1e7, ValueError),
                                          ("1", TypeError)])
def test_encode_text_refuses_a_bad_ratio(impl, ratio, error):
    with pytest.raises(error):
        impl.encode_text(b"a\n", 7, 100, ratio)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.binary(max_size=40), st.binary(max_size=300)), max_size=40),
       st.sampled_from([b"\t", b":", b"::", b"ab"]), st.integers(-100, 4000),
       st.floats(0.01, 3.0))
def test_encode_text_with_a_separator_encodes_keyed_records(pairs, sep, budget, ratio):
    """``separator``: each line is ``KEY<sep>VALUE`` split at the first separator, encoded
    as ``encode`` encodes ``(timestamp, key, value)``, cut by the same rule (the key counts
    in the record's size); both implementations agree."""
    lines = [k.replace(b"\n", b"") + sep + v.replace(b"\n", b"") for k, v in pairs]
    pairs = [line.partition(sep)[::2] for line in lines]  # split at the first separator
    text = b"".join(line + b"\n" for line in lines)
    results = [impl.encode_text(text, 7, budget, ratio, separator=sep) for impl in BOTH]
    assert all(r == results[0] for r in results)
    payload, n, consumed = results[0]
    assert payload == fast.PYTHON.encode([(7, k, v, ()) for k, v in pairs[:n]], 7)
    assert consumed == sum(len(line) + 1 for line in lines[:n])
    used = 0
    for i, (k, v) in enumerate(pairs):
        size = KPBuilder.size_in_bytes(i, 0, k, v, [])
        fits = i == 0 or int(used * ratio) + size <= budget
        assert fits == (i < n)
        if not fits:
            break
        used += size


def test_encode_text_refuses_a_line_without_the_separator(impl):
    with pytest.raises(ValueError, match="line 1 has no key separator"):
        impl.encode_text(b"a:1\nb\n", 7, 10000, separator=b":")
    assert impl.encode_text(b"a:1\n", 7, 10000, separator=b"") == \
        impl.encode_text(b"a:1\n", 7, 10000)


# -- encode_text_batches --------------------------------------------------------------------

def _batch_by_batch(head: bytes, text: bytes, timestamp: int, budget: int,
                    timestamp_type: int) -> tuple[bytes, list[int]]:
    """What ``encode_text_batches`` must equal: ``encode_text`` of the lines left, again
    and again, each payload made a batch by ``finish_batch``."""
    from kafkafs.record.batch import finish_batch

    end = text.rfind(b"\n") + 1
    data = head + text[:end] if end else b""
    out, ends, pos = b"", [], 0
    while pos < len(data):
        payload, n, consumed = fast.PYTHON.encode_text(data[pos:], timestamp, budget)
        out += finish_batch(payload, n, base_offset=0, compression=0,
                            timestamp_type=timestamp_type, last_offset_delta=n - 1,
                            base_ts=timestamp, max_ts=timestamp)
        pos += consumed
        ends.append(pos - len(head))
    return out, ends


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(st.one_of(st.binary(max_size=300), st.binary(min_size=2000, max_size=20000))
                .map(lambda b: b.replace(b"\n", b"")), max_size=60),
       st.binary(max_size=20).map(lambda b: b.replace(b"\n", b"")),
       st.binary(max_size=200).map(lambda b: b.replace(b"\n", b"")),
       st.integers(-100, 40000), st.sampled_from([0, 1]),
       st.integers(I64_MIN, I64_MAX))
def test_encode_text_batches_is_encode_text_batch_by_batch(lines, tail, head, budget,
                                                           timestamp_type, timestamp):
    """One call encodes every batch of a write (the lines of ``head + text``) byte for byte
    as ``encode_text`` of the lines left, batch after batch, each made a v2 batch (header,
    CRC) by ``finish_batch`` -- C and Python twins alike; ``ends`` are the batches' ends in
    ``text``; every batch reads back as a valid batch of those lines."""
    text = b"".join(line + b"\n" for line in lines) + tail
    want = _batch_by_batch(head, text, timestamp, budget, timestamp_type)
    for impl in BOTH:
        got = impl.encode_text_batches(text, timestamp, budget, timestamp_type, head)
        assert type(got[0]) is bytearray
        assert (bytes(got[0]), got[1]) == want, impl.name
    values, pos = [], 0
    while pos < len(want[0]):
        b = RecordBatch.from_buffer(want[0], pos)
        b.ensure_valid()
        assert b.timestamp_type == timestamp_type and b.max_timestamp == timestamp
        values += [r.value for r in b.records()]
        pos += b.size
    if lines:
        assert values == [head + lines[0]] + lines[1:]
        assert want[1][-1] == len(text) - len(tail)
    else:
        assert want == (b"", [])


def test_encode_text_batches_refuses_bad_arguments(impl):
    with pytest.raises(ValueError, match="head holds a newline"):
        impl.encode_text_batches(b"a\n", TS, 100, 0, b"x\ny")
    with pytest.raises(ValueError, match="timestamp_type must be 0"):
        impl.encode_text_batches(b"a\n", TS, 100, 2)
    with pytest.raises(TypeError):
        impl.encode_text_batches("a\n", TS, 100)
    assert impl.encode_text_batches(b"no newline", TS, 100, 0, b"head") == (bytearray(), [])
    assert impl.encode_text_batches(memoryview(b"a\nb\n"), TS, 1 << 20) == \
        impl.encode_text_batches(b"a\nb\n", TS, 1 << 20)


@pytest.mark.parametrize("budget", [0, 100, 1 << 20])
def test_encode_text_batches_of_empty_and_tiny_lines(budget):
    """Lines much shorter than their records (the output outgrows the text many times over:
    the C encoder grows its buffer) encode as batch by batch, C and Python alike."""
    text = b"\n" * 5000 + b"x\n" * 3000 + b"yz"
    want = _batch_by_batch(b"h", text, TS, budget, 0)
    assert [(bytes(r[0]), r[1]) for r in (impl.encode_text_batches(text, TS, budget, 0, b"h")
                                          for impl in BOTH)] == [want] * len(BOTH)
    assert len(want[1]) == (8000 if budget == 0 else len(want[1]))
