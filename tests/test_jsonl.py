"""kafkafs.record.jsonl: the records.jsonl lines in C (kafkafs/record/_jsonl.c) equal, byte
for byte and error for error, their pure-Python twins (json.dumps per record, the code the
view used before); the file run stops exactly where it must; and a view that uses the native
renderer, measure and run shows what the pure-Python path shows, for every corpus log, every
kind of batch and every damage."""

from __future__ import annotations

import glob
import json
import os
import random
import shutil
import subprocess
import sys

import build_corpus as bc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_plain import _bad_record, _flip, _marker, _read_all, plain_batch, write
from test_speedups import GuardedBuffer, field, outcome, raw
from test_speedups import zz as varint

from kafkafs.fs import views
from kafkafs.fs.views import (
    LineView,
    measure_jsonl,
    render_jsonl,
    render_jsonl_run,
)
from kafkafs.log.config import LogConfig
from kafkafs.log.loader import load_log
from kafkafs.record import compression, fast, jsonl
from kafkafs.record.jsonl import text_or_base64
from kafkafs.record.batch import (
    BATCH_OVERHEAD,
    LOG_APPEND_TIME,
    TIMESTAMP_TYPE_NAMES,
    RecordBatch,
    encode_batch,
    iter_batches,
)
from kafkafs.record.errors import CorruptRecordError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
C, PY = jsonl.C, jsonl.PYTHON
needs_c = pytest.mark.skipif(C is None, reason="C extension not built")
FAR = 1 << 62
TS = 1_700_000_000_000
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1


# -- the module ----------------------------------------------------------------------------

def test_the_c_version_is_built_with_the_extension():
    """A build of the extension that left _jsonl.c out (setup.py's sources) fails here."""
    assert (C is None) == (fast.C is None)
    assert jsonl.HAVE_C == fast.HAVE_C
    chosen = C if jsonl.HAVE_C else PY
    for name in ("render", "rendered_size", "render_file"):
        assert getattr(jsonl, name) is getattr(chosen, name)
    assert views.render_jsonl_run is jsonl.render_file


def test_env_var_forces_the_twins():
    code = ("from kafkafs.record import jsonl; "
            "print(jsonl.HAVE_C, jsonl.render is jsonl.PYTHON.render, "
            "jsonl.render_file is jsonl.PYTHON.render_file, jsonl.C is not None)")
    env = dict(os.environ, KAFKAFS_NO_SPEEDUPS="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout.split()
    assert out == ["False", "True", "True", str(C is not None)]


# -- helpers ---------------------------------------------------------------------------------

def payload_of(recs, **kw) -> bytes:
    return encode_batch(recs, **kw)[BATCH_OVERHEAD:]


def both(*args, **kw):
    """render and rendered_size of both versions: the same bytes or the same error."""
    want = outcome(PY.render, *args, **kw)
    assert outcome(C.render, *args, **kw) == want
    size = ("ok", len(want[1])) if want[0] == "ok" else want
    assert outcome(C.rendered_size, *args, **kw) == size
    assert outcome(PY.rendered_size, *args, **kw) == size
    return want


def json_reference(recs, base_offset=0, log_append_time=None, start=None) -> bytes:
    """The lines as the view wrote them before (json.dumps of each decoded record), from
    the records themselves: the expected side uses no kafkafs renderer."""
    ts_type = "CreateTime" if log_append_time is None else "LogAppendTime"
    out = []
    for i, (ts, key, value, headers) in enumerate(recs):
        if start is not None and base_offset + i < start:
            continue
        out.append(json.dumps({
            "offset": base_offset + i,
            "timestamp": ts if log_append_time is None else log_append_time,
            "timestamp_type": ts_type, "key": text_or_base64(key),
            "value": text_or_base64(value),
            "headers": [{"key": k, "value": text_or_base64(v)} for k, v in headers]},
            ensure_ascii=False, separators=(",", ":")))
    return "".join(x + "\n" for x in out).encode()


# -- bytes that matter to a JSON string or to UTF-8 ------------------------------------------

TRICKY = [bytes([c]) for c in range(0x20)] + [
    b'"', b"\\", b"/", b"\x7f", b"a", b" ",
    "\u2028".encode(), "\u2029".encode(), "é".encode(), "€".encode(), "😀".encode(),
    "\U0010ffff".encode(), "\ufeff".encode(), "\ufffd".encode(),
    b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xed\x9f\xbf",  # surrogates (invalid), U+D7FF (valid)
    b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xe0\x9f\xbf", b"\xf0\x80\x80\x80",
    b"\xf0\x8f\xbf\xbf",  # overlong forms
    b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xf8\x88\x80\x80\x80", b"\xff", b"\xfe",
    b"\x80", b"\xbf", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98",  # stray and cut-short bytes
]
ASCII_RUN = st.integers(1, 40).map(lambda n: b"plain ascii text, no escapes at all"[:n] * 2)
blob = st.lists(st.one_of(st.sampled_from(TRICKY), st.binary(max_size=24), ASCII_RUN,
                          st.text(max_size=12).map(lambda t: t.encode("utf-8", "surrogatepass"))),
                max_size=12).map(b"".join)
opt_blob = st.one_of(st.none(), st.just(b""), blob)
header_key = st.one_of(st.text(max_size=16),
                       st.lists(st.sampled_from(TRICKY[:40]), max_size=6).map(b"".join).map(
                           lambda b: b.decode("utf-8", "replace")))
headers_st = st.lists(st.tuples(header_key, opt_blob), max_size=3)
record_st = st.tuples(st.integers(-2**40, 2**42), opt_blob, opt_blob, headers_st)
PROPS = settings(max_examples=300, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@needs_c
@PROPS
@given(recs=st.lists(record_st, min_size=1, max_size=25),
       base_offset=st.one_of(st.integers(0, 2**40), st.sampled_from([I64_MAX - 3, I64_MIN])),
       log_append=st.one_of(st.none(), st.integers(I64_MIN, I64_MAX)),
       start=st.one_of(st.none(), st.integers(-5, 30)))
def test_property_c_equals_python_and_json_dumps(recs, base_offset, log_append, start):
    """Any keys, values and headers (invalid UTF-8, every control character, multi-byte
    characters, UTF-8-encoded surrogates, NUL, empty, null), any base offset (wrapping),
    CreateTime or LogAppendTime, any start offset."""
    if log_append is None:
        payload = payload_of(recs)
        base_ts, fixed = recs[0][0], None
    else:
        payload = payload_of(recs, timestamp_type=LOG_APPEND_TIME, log_append_time=log_append)
        base_ts, fixed = log_append, log_append
    start_abs = None if start is None else base_offset + start
    if start_abs is not None and not I64_MIN <= start_abs <= I64_MAX:
        start_abs = None
    got = both(payload, len(recs), base_offset, base_ts, fixed, start_abs)
    assert got[0] == "ok"
    if base_offset + len(recs) <= I64_MAX:  # no wrap: the reference's offsets are right
        assert got[1] == json_reference(recs, base_offset, fixed, start_abs)
    for line in got[1].splitlines():
        json.loads(line)


@needs_c
@PROPS
@given(recs=st.lists(record_st, min_size=1, max_size=8),
       edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1,
                      max_size=3),
       cut=st.integers(0, 10**6), count_delta=st.sampled_from([0, 0, 0, -1, 1, -10]),
       exact=st.booleans())
def test_property_damaged_payloads_raise_the_same(recs, edits, cut, count_delta, exact):
    """Mutated, truncated payloads and wrong counts: the same bytes or the same
    CorruptRecordError (type and message) from both versions, and the error decode raises."""
    payload = bytearray(payload_of(recs))
    for where, byte in edits:
        payload[where % len(payload)] = byte
    payload = bytes(payload[:len(payload) - cut % 4])
    count = len(recs) + count_delta
    got = both(payload, count, 7, TS, None, None, exact=exact)
    dec = outcome(fast.decode, payload, count, 7, TS, None, exact=exact)
    assert (got[0], got[1:] if got[0] == "error" else ()) == \
        (dec[0], dec[1:] if dec[0] == "error" else ())
    assert got[0] == "ok" or got[1] is CorruptRecordError


@needs_c
@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=90), count=st.integers(-2, 12), exact=st.booleans())
def test_property_garbage_raises_the_same(data, count, exact):
    got = both(data, count, 0, 0, None, None, exact=exact)
    assert got[0] == "ok" or got[1] is CorruptRecordError


@needs_c
def test_every_byte_at_every_place_of_a_vector():
    """Each byte that needs attention (escapes, the start of a UTF-8 sequence, valid or
    not) at every position of values of 0 to 48 bytes: the 16-byte vector steps, their
    tails and the boundaries between them."""
    specials = [bytes([c]) for c in (0x00, 0x08, 0x0a, 0x1f, 0x20, 0x22, 0x5c, 0x7f, 0x80,
                                     0xc3, 0xff)] + ["é".encode(), "😀".encode(),
                                                     b"\xed\xa0\x80"]
    recs = []
    for n in range(49):
        for p in range(n):
            for s in specials:
                recs.append((TS, None, (b"a" * p + s + b"b" * n)[:max(n, p + len(s))], ()))
    for i in range(0, len(recs), 500):
        chunk = recs[i:i + 500]
        got = both(payload_of(chunk), len(chunk), 0, TS, None)
        assert got == ("ok", json_reference(chunk))


@needs_c
def test_every_one_and_two_byte_value_and_the_edges_of_longer_sequences():
    """Whether bytes are text is Python's strict decoder's judgement: every 1- and 2-byte
    value, and 3- and 4-byte sequences around every boundary of Unicode table 3-7."""
    values = [bytes([a]) for a in range(256)]
    values += [bytes([a, b]) for a in range(0x80, 0x100) for b in range(256)]
    values += [bytes([a, b, c]) for a in range(0xe0, 0xf0)
               for b in (0x7f, 0x80, 0x9f, 0xa0, 0xbf, 0xc0) for c in (0x7f, 0x80, 0xbf, 0xc0)]
    values += [bytes([a, b, c, d]) for a in range(0xf0, 0xf8)
               for b in (0x7f, 0x80, 0x8f, 0x90, 0xbf, 0xc0) for c in (0x80, 0xc0)
               for d in (0x7f, 0x80, 0xbf)]
    values += [b"x" * 17 + v for v in values[::7]]  # the same after a vector step
    for i in range(0, len(values), 2000):
        recs = [(TS, v, v, [("h", v)]) for v in values[i:i + 2000]]
        got = both(payload_of(recs), len(recs), 0, TS, None)
        assert got == ("ok", json_reference(recs))


@needs_c
@pytest.mark.parametrize("value", [None, b"", b"x" * 70000, bytes(range(256)) * 300,
                                   "日本語のテキスト".encode() * 3000, b"\x00" * 5000])
def test_big_and_odd_values_grow_the_output(value):
    """Values whose lines are many times their size (every byte an escape: 6x) or large:
    the output grows as it goes, with and without the GIL (payloads over 64 KiB)."""
    recs = [(TS + i, value, value, [("k", value)]) for i in range(3)]
    got = both(payload_of(recs), 3, 5, TS, None)
    assert got == ("ok", json_reference(recs, 5))
    got = both(bytearray(payload_of(recs)), 3, 5, TS, None, 6)
    assert got == ("ok", json_reference(recs, 5, start=6))


@needs_c
def test_integers_at_their_limits():
    deltas = [I64_MIN, I64_MAX, 0, -1, 9, 10, 99, 100, -10**17, 10**17]
    payload = b"".join(raw(ts=varint(d), off=varint(i), value=field(b"v"))
                       for i, d in enumerate(deltas))
    recs = deltas
    for base in (0, -1, I64_MAX, I64_MIN, 10**18, -10**18):
        for base_ts in (0, I64_MIN, I64_MAX, -1):
            both(payload, len(recs), base, base_ts, None)
            both(payload, len(recs), base, base_ts, base_ts)
            both(payload, len(recs), base, base_ts, None, base + 3)


@needs_c
def test_every_record_is_validated_even_below_start():
    """start leaves records out, not their checks (RecordBatch.records() decodes all)."""
    good = raw(value=field(b"v"))
    bad = raw(headers=varint(1) + field(b"\xe2\x82"))  # a header key that is not UTF-8
    for payload in (bad + good, good + bad):
        got = both(payload, 2, 0, TS, None, 1)
        assert got[:2] == ("error", CorruptRecordError) and "UTF-8" in got[2]


@needs_c
def test_truncated_payloads_never_read_past_the_buffer():
    recs = [(TS, b"key", b"value " * 30, [("h1", b"x" * 40), ("h2", None)]),
            (TS + 300, None, b"v" * 130, ()), (TS - 2**35, b"k" * 70, None, [("ü", b"")])]
    payload = payload_of(recs)
    guard = GuardedBuffer(len(payload))
    assert both(guard.place(payload), 3, 0, TS, None) == ("ok", json_reference(recs))
    for cut in range(len(payload)):
        got = both(guard.place(payload[:cut]), 3, 0, TS, None)
        assert got[:2] == ("error", CorruptRecordError)


@needs_c
def test_c_reference_counts():
    recs = [(TS, b"k" * 33, "välue".encode() * 9, [("hk", b"\xff" * 5)])] * 3
    payload = payload_of(recs)
    objs = [payload]
    before = [sys.getrefcount(o) for o in objs]
    for _ in range(300):
        C.render(payload, 3, 0, TS, None)
        C.render(payload, 3, 0, TS, TS, 1, exact=True)
        C.rendered_size(payload, 3, 0, TS, None)
        for bad in ((payload, 4), (payload[:-1], 3)):
            with pytest.raises(CorruptRecordError):
                C.render(*bad, 0, TS, None)
            with pytest.raises(CorruptRecordError):
                C.rendered_size(*bad, 0, TS, None)
        with pytest.raises(TypeError):
            C.render(payload, 3, 0, TS, "x")
    assert [sys.getrefcount(o) for o in objs] == before


# -- the file run ---------------------------------------------------------------------------

def run_both(fd, *args):
    c = C.render_file(fd, *args)
    p = PY.render_file(fd, *args)
    assert c == p
    return c


def expected(path, start_pos, end_pos, stop):
    """render_jsonl of the batches in [start_pos, end_pos) below offset ``stop``."""
    with open(path, "rb") as f:
        buf = f.read()
    return b"".join(render_jsonl(b) for b in iter_batches(buf, start_pos, end_pos)
                    if b.base_offset < stop)


def odd_batch(rnd, n=None, **kw):
    """A plain batch with keys, values and headers of every sort (plain_batch's have
    random bytes)."""
    n = rnd.randint(1, 12) if n is None else n
    pick = [None, b"", "ünïcödé\n\"quoted\"\t".encode(), b"\xff\xfe", b"\xed\xa0\x80",
            bytes(range(32)), b"x" * 40]
    recs = [(TS + rnd.randint(-9, 9), rnd.choice(pick), rnd.choice(pick),
             [("h\x01", rnd.choice(pick))] if rnd.random() < 0.3 else ()) for _ in range(n)]
    if not recs:  # an emptied batch (the cleaner leaves them)
        kw.setdefault("last_offset_delta", 0)
    return encode_batch(recs, **kw)


@needs_c
def test_a_run_of_plain_batches_renders_whole_and_stops_at_the_offset(tmp_path):
    rnd = random.Random(1)
    path = str(tmp_path / "seg.log")
    batches = [odd_batch(rnd) if i % 2 else plain_batch(rnd) for i in range(30)]
    batches[7] = odd_batch(rnd, timestamp_type=LOG_APPEND_TIME, log_append_time=TS + 5)
    positions = write(path, batches)
    size = os.path.getsize(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        data, nxt, stopped = run_both(fd, 0, size, FAR)
        assert (nxt, stopped) == (size, False)
        assert data == expected(path, 0, size, FAR)
        assert b'"timestamp_type":"LogAppendTime"' in data
        with open(path, "rb") as f:
            stop = int.from_bytes(f.read()[positions[10]:positions[10] + 8], "big")
        data, nxt, stopped = run_both(fd, positions[3], size, stop)
        assert (nxt, stopped) == (positions[10], True)
        assert data == expected(path, positions[3], positions[10], FAR)
        data, nxt, stopped = run_both(fd, 0, positions[5] + 30, FAR)
        assert (nxt, stopped) == (positions[5], False)
        assert data == expected(path, 0, positions[5], FAR)
        assert run_both(fd, size, 100, FAR) == (b"", size, False)
        assert run_both(fd, 0, 0, FAR) == (b"", 0, False)
    finally:
        os.close(fd)


@needs_c
@pytest.mark.parametrize("kind", ["gzip", "transactional", "control", "legacy", "crc",
                                  "record", "zero", "torn"])
def test_the_run_stops_before_a_batch_it_does_not_take(tmp_path, kind):
    rnd = random.Random(2)
    batches = [odd_batch(rnd) for _ in range(3)]
    odd = {
        "gzip": lambda: odd_batch(rnd, compression=compression.GZIP),
        "transactional": lambda: odd_batch(rnd, producer_id=7, producer_epoch=0,
                                           base_sequence=0, is_transactional=True),
        "control": lambda: _marker(7, commit=True),
        "legacy": lambda: bytes.fromhex(
            "0000000000000000" "00000016" "3ba4ab6e" "01" "00" "0000015e8b2ff5e6"
            "ffffffff" "00000000"),
        "crc": lambda: _flip(odd_batch(rnd), 70),
        "record": lambda: _bad_record(rnd),
        "zero": lambda: bytes(200),
        "torn": lambda: odd_batch(rnd)[:-5],
    }[kind]()
    path = str(tmp_path / "seg.log")
    positions = write(path, batches + [odd] + ([odd_batch(rnd)] if kind not in
                                               ("zero", "torn") else []))
    fd = os.open(path, os.O_RDONLY)
    try:
        data, nxt, stopped = run_both(fd, 0, os.path.getsize(path), FAR)
    finally:
        os.close(fd)
    assert (nxt, stopped) == (positions[3], False)
    assert data == expected(path, 0, positions[3], FAR)


@needs_c
@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), damage=st.integers(-1, 4000),
       window=st.integers(0, 6000), start=st.integers(0, 5), stop=st.integers(0, 80))
def test_run_c_equals_python_on_any_bytes(tmp_path, seed, damage, window, start, stop):
    """Random logs of every batch kind, one bit flipped anywhere (or none), any window,
    start batch and stop offset."""
    rnd = random.Random(seed)
    kinds = [lambda: odd_batch(rnd, n=rnd.randint(0, 6)) if rnd.random() < 0.9 else
             plain_batch(rnd, n=0),
             lambda: odd_batch(rnd, timestamp_type=LOG_APPEND_TIME, log_append_time=TS),
             lambda: odd_batch(rnd, n=3, compression=compression.LZ4),
             lambda: odd_batch(rnd, n=2, producer_id=1, producer_epoch=0, base_sequence=0,
                               is_transactional=True)]
    batches = [rnd.choice(kinds[:1] * 4 + kinds[1:])() for _ in range(8)]
    path = str(tmp_path / f"{seed}.log")
    positions = write(path, batches)
    if damage >= 0:
        with open(path, "r+b") as f:
            data = bytearray(f.read())
            data[damage % len(data)] ^= 1 << (damage % 8)
            f.seek(0)
            f.write(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        pos = positions[min(start, len(positions) - 1)]
        got = run_both(fd, pos, window, stop)
    finally:
        os.close(fd)
    assert pos <= got[1] <= pos + window


@needs_c
def test_the_run_grows_its_output_while_it_renders(tmp_path):
    """Lines far longer than the batches read (every byte a \\u00XX escape: 6x, more
    than the room the run starts with): the output grows as the run goes, the GIL taken
    back for each growth."""
    path = str(tmp_path / "seg.log")
    batches = [encode_batch([(TS, bytes(range(32)) * 400, b"\x01" * 20000, [("h", b"\n" * 999)])
                             for _ in range(5)]) for _ in range(4)]
    write(path, batches)
    size = os.path.getsize(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        data, nxt, stopped = run_both(fd, 0, size, FAR)
    finally:
        os.close(fd)
    assert (nxt, stopped) == (size, False) and len(data) > 5 * size
    assert data == expected(path, 0, size, FAR)


@needs_c
def test_run_bad_arguments_are_refused_clearly(tmp_path):
    path = str(tmp_path / "seg.log")
    write(path, [odd_batch(random.Random(3))])
    fd = os.open(path, os.O_RDONLY)
    try:
        for f in (C.render_file, PY.render_file):
            with pytest.raises(ValueError, match=">= 0"):
                f(fd, -1, 100, FAR)
            with pytest.raises(ValueError, match=">= 0"):
                f(fd, 0, -1, FAR)
    finally:
        os.close(fd)
    for f in (C.render_file, PY.render_file):
        with pytest.raises(OSError):
            f(fd, 0, 100, FAR)  # closed


# -- the view: native render, measure and run against the pure-Python path --------------------

def python_render_jsonl(batch, start=None):
    """The view's renderer as it was: every record decoded, a json.dumps per record."""
    if batch.is_control:
        return render_jsonl(batch, start)
    return jsonl.record_lines(batch.records(), TIMESTAMP_TYPE_NAMES[batch.timestamp_type],
                              start)


def native_view(lg, committed):
    return LineView(lg, render_jsonl, measure_jsonl, committed=committed,
                    render_run=render_jsonl_run)


def outcome_of(v, step):
    """("ok", every byte) or ("error", path, position)."""
    try:
        v.refresh()
        return ("ok", _read_all(v, step))
    except CorruptRecordError as exc:
        return ("error", exc.path, exc.position)


@pytest.mark.parametrize("topic", sorted(os.path.basename(d)[:-2] for d in
                                         glob.glob(os.path.join(bc.CORPUS, "*-0"))))
def test_corpus_jsonl_is_the_same_natively(tmp_path, topic):
    """Every corpus log (every format, codec, transactions, headers, a preallocated zero
    tail, damaged vectors): the native view shows exactly what the old path shows, read
    whole and in odd steps, and fails at the same place."""
    part = str(tmp_path / f"{topic}-0")
    shutil.copytree(os.path.join(bc.CORPUS, f"{topic}-0"), part)
    lg = load_log(part, topic, 0, LogConfig(), writable=False)
    try:
        for committed in (False, True):
            a = native_view(lg, committed)
            b = LineView(lg, python_render_jsonl, committed=committed)
            want = outcome_of(b, 1 << 20)
            assert outcome_of(a, 1 << 20) == want
            assert outcome_of(native_view(lg, committed), 777) == want
            if want[0] == "ok":
                assert len(want[1]) == b.size == a.size
    finally:
        lg.close()


def test_mixed_log_reads_the_same_natively(tmp_path, monkeypatch):
    """Plain (CreateTime and LogAppendTime), compressed, aborted and committed
    transactional batches and control markers interleaved over several segments, records
    with odd bytes and headers; small marks so chunks start everywhere."""
    monkeypatch.setattr(views, "MARK_BYTES", 2000)
    part = str(tmp_path / "t-0")
    os.makedirs(part)
    lg = load_log(part, "t", 0, LogConfig(segment_bytes=20000), had_clean_shutdown=True)
    rnd = random.Random(4)
    pick = [None, b"", b"v\x00\"\\\n", "ü€😀".encode(), b"\xff\xc3(", b"x" * 60]
    pid = 0
    for i in range(200):
        r = rnd.random()
        recs = [(1000 + i, rnd.choice(pick), rnd.choice(pick) or b"v%d-%d" % (i, j),
                 [("h", rnd.choice(pick))] if rnd.random() < 0.2 else ())
                for j in range(rnd.randint(1, 8))]
        if r < 0.15:
            lg.append(recs, compression=compression.ZSTD)
        elif r < 0.25:
            pid += 1
            lg.append_encoded(bytearray(encode_batch(
                recs, producer_id=pid, producer_epoch=0, base_sequence=0,
                is_transactional=True)))
            lg.append_encoded(bytearray(_marker(pid, commit=rnd.random() < 0.5)))
        elif r < 0.35:
            lg.append_encoded(bytearray(encode_batch(recs, timestamp_type=LOG_APPEND_TIME,
                                                     log_append_time=5000 + i)))
        else:
            lg.append(recs)
    try:
        for committed in (False, True):
            a = native_view(lg, committed)
            b = LineView(lg, python_render_jsonl, committed=committed)
            assert a.refresh() == b.refresh()
            want = _read_all(b, 4096)
            assert _read_all(a, 4096) == want
            assert [json.loads(x)["offset"] for x in want.splitlines()] == sorted(
                json.loads(x)["offset"] for x in want.splitlines())
            rnd2 = random.Random(5)
            for _ in range(200):
                off, size = rnd2.randrange(len(want)), rnd2.randint(1, 9000)
                assert a.read(off, size) == want[off:off + size]
    finally:
        lg.close()


def test_log_start_inside_a_batch(tmp_path):
    """A log start offset inside the first batch: the records below it are left out (the
    view renders that batch with start, never through the run)."""
    part = str(tmp_path / "t-0")
    os.makedirs(part)
    lg = load_log(part, "t", 0, LogConfig(), had_clean_shutdown=True)
    for i in range(4):
        lg.append([(1000 + i, None, b"r%d-%d" % (i, j), ()) for j in range(5)])
    lg.close()
    lg = load_log(part, "t", 0, LogConfig(), log_start_offset=7, writable=False)
    try:
        a = native_view(lg, False)
        b = LineView(lg, python_render_jsonl)
        assert a.refresh() == b.refresh()
        got = _read_all(a, 100)
        assert got == _read_all(b, 100)
        assert [json.loads(x)["offset"] for x in got.splitlines()] == list(range(7, 20))
    finally:
        lg.close()


def test_damaged_records_are_located_as_before(tmp_path):
    """A batch whose CRC is right but whose records are not (bytes left over): the run
    refuses it, the general path raises the error the old path raised, with its file and
    position; the view shows every line before it."""
    part = str(tmp_path / "t-0")
    os.makedirs(part)
    lg = load_log(part, "t", 0, LogConfig(), had_clean_shutdown=True)
    for i in range(3):
        lg.append([(1000, b"k", b"line %d" % i, ())])
    seg_path, bad_at = lg.segments()[0].log_path, lg.segments()[0].size
    lg.close()
    bad = bytearray(_bad_record(random.Random(6)))
    bad[0:8] = (3).to_bytes(8, "big")
    with open(seg_path, "ab") as f:
        f.write(bad)
    batch = RecordBatch.from_buffer(bytes(bad), 0, bad_at)
    batch.path = seg_path
    with pytest.raises(CorruptRecordError) as native:
        render_jsonl(batch)
    with pytest.raises(CorruptRecordError) as old:
        python_render_jsonl(batch)
    assert str(native.value) == str(old.value)
    assert (native.value.path, native.value.position) == (seg_path, bad_at)
    with pytest.raises(CorruptRecordError) as measured:
        measure_jsonl(batch)
    assert str(measured.value) == str(old.value)
    lg = load_log(part, "t", 0, LogConfig(), writable=False)
    try:
        for v in (native_view(lg, False), LineView(lg, python_render_jsonl)):
            v.refresh()
            assert (v.damage.path, v.damage.position) == (seg_path, bad_at)
            assert [json.loads(x)["value"] for x in v.read(0, 10**6).splitlines()] == \
                ["line 0", "line 1", "line 2"]
            with pytest.raises(CorruptRecordError):
                v.read(v.size, 10)
    finally:
        lg.close()
