"""render_file_values (kafkafs.record.plain): the C version equals its Python twin on every
input, the run ends exactly where it must, and a view that uses it shows the same bytes as
one that does not, for every kind of batch and every damage."""

from __future__ import annotations

import glob
import os
import random
import shutil

import build_corpus as bc
import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkafs.fs.views import LineView, measure_messages, render_messages
from kafkafs.log.config import LogConfig
from kafkafs.log.loader import load_log
from kafkafs.record import compression, control, fast, plain
from kafkafs.record.batch import encode_batch, iter_batches
from kafkafs.record.errors import CorruptRecordError

C = plain._c_render_file_values
PY = plain._py_render_file_values
need_c = pytest.mark.skipif(C is None, reason="built without ISA-L (no render_file_values)")
FAR = 1 << 62


def test_native_render_is_built_where_isal_is_installed():
    """CI installs libisal-dev: a build that silently left the C version out fails here."""
    if not os.path.exists("/usr/include/isa-l/crc.h"):
        pytest.skip("ISA-L is not installed")
    assert C is not None and plain.NATIVE == fast.HAVE_C


def write(path, batches: list[bytes]) -> list[int]:
    """Write the batches (base offsets stamped consecutively); returns their positions."""
    positions, pos, offset = [], 0, 0
    out = bytearray()
    for b in batches:
        b = bytearray(b)
        count = int.from_bytes(b[57:61], "big") if b[16] == 2 else 1
        b[0:8] = offset.to_bytes(8, "big")
        offset += max(count, 1)
        positions.append(pos)
        out += b
        pos += len(b)
    with open(path, "wb") as f:
        f.write(out)
    return positions


def plain_batch(rnd, n=None, **kw):
    n = rnd.randint(1, 20) if n is None else n
    recs = []
    for i in range(n):
        value = None if rnd.random() < 0.1 else bytes(rnd.randrange(256)
                                                      for _ in range(rnd.randint(0, 300)))
        key = None if rnd.random() < 0.5 else b"k%d" % i
        headers = [("h", b"x")] if rnd.random() < 0.1 else []
        recs.append((1_700_000_000_000 + i, key, value, headers))
    if not recs:  # an emptied batch (the cleaner leaves them)
        kw.setdefault("last_offset_delta", 0)
    return encode_batch(recs, **kw)


def both(fd, *args, **kw):
    c = C(fd, *args, **kw)
    p = PY(fd, *args, **kw)
    assert c == p
    return c


def expected(path, start_pos, end_pos, stop):
    """render_messages over the batches in [start_pos, end_pos) below offset ``stop``."""
    with open(path, "rb") as f:
        buf = f.read()
    return b"".join(render_messages(b) for b in iter_batches(buf, start_pos, end_pos)
                    if b.base_offset < stop)


@need_c
def test_a_run_of_plain_batches_renders_whole_and_stops_at_the_offset(tmp_path):
    rnd = random.Random(1)
    path = str(tmp_path / "seg.log")
    positions = write(path, [plain_batch(rnd) for _ in range(30)])
    size = os.path.getsize(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        data, nxt, stopped = both(fd, 0, size, FAR)
        assert (nxt, stopped) == (size, False)
        assert data == expected(path, 0, size, FAR)
        # stop at the base offset of batch 10
        with open(path, "rb") as f:
            stop = int.from_bytes(f.read()[positions[10]:positions[10] + 8], "big")
        data, nxt, stopped = both(fd, positions[3], size, stop)
        assert (nxt, stopped) == (positions[10], True)
        assert data == expected(path, positions[3], positions[10], FAR)
        # a window that ends inside batch 5: batches 0-4, then the caller's business
        data, nxt, stopped = both(fd, 0, positions[5] + 30, FAR)
        assert (nxt, stopped) == (positions[5], False)
        # an empty window, a window past the end
        assert both(fd, size, 100, FAR) == (b"", size, False)
        assert both(fd, 0, 0, FAR) == (b"", 0, False)
    finally:
        os.close(fd)


@need_c
@pytest.mark.parametrize("kind", ["gzip", "transactional", "control", "legacy", "crc",
                                  "record", "zero", "torn"])
def test_the_run_stops_before_a_batch_it_does_not_take(tmp_path, kind):
    rnd = random.Random(2)
    batches = [plain_batch(rnd) for _ in range(3)]
    odd = {
        "gzip": lambda: plain_batch(rnd, compression=compression.GZIP),
        "transactional": lambda: plain_batch(rnd, producer_id=7, producer_epoch=0,
                                             base_sequence=0, is_transactional=True),
        "control": lambda: _marker(7, commit=True),
        "legacy": lambda: bytes.fromhex(  # a v1 message (kafka-python's test vector)
            "0000000000000000" "00000016" "3ba4ab6e" "01" "00" "0000015e8b2ff5e6"
            "ffffffff" "00000000"),
        "crc": lambda: _flip(plain_batch(rnd), 70),
        "record": lambda: _bad_record(rnd),
        "zero": lambda: bytes(200),
        "torn": lambda: plain_batch(rnd)[:-5],
    }[kind]()
    path = str(tmp_path / "seg.log")
    positions = write(path, batches + [odd] + ([plain_batch(rnd)] if kind not in
                                               ("zero", "torn") else []))
    fd = os.open(path, os.O_RDONLY)
    try:
        data, nxt, stopped = both(fd, 0, os.path.getsize(path), FAR)
    finally:
        os.close(fd)
    assert (nxt, stopped) == (positions[3], False)
    assert data == expected(path, 0, positions[3], FAR)


def _flip(batch: bytes, at: int) -> bytes:
    b = bytearray(batch)
    b[at] ^= 0x40
    return bytes(b)


def _bad_record(rnd) -> bytes:
    """A batch with a valid CRC whose records section has a byte left over (a producer
    bug no CRC catches): Kafka's readFrom refuses it, so the run must too."""
    good = bytearray(plain_batch(rnd, n=2) + b"\x00")
    good[8:12] = (int.from_bytes(good[8:12], "big") + 1).to_bytes(4, "big")
    good[17:21] = crc32c.crc32c(bytes(good[21:])).to_bytes(4, "big")
    return bytes(good)


@need_c
@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), damage=st.integers(-1, 4000),
       window=st.integers(0, 6000), start=st.integers(0, 5), stop=st.integers(0, 80),
       literals=st.sampled_from([(b"null", b"\n"), (b"", b""), (b"NUL", b"\r\n"),
                                 (b"-", b"\x00\x01\x02\x03\x04\x05")]))
def test_c_equals_python_on_any_bytes(tmp_path, seed, damage, window, start, stop, literals):
    """Random logs of every batch kind, one byte flipped anywhere (or none), any window,
    start batch and stop offset, and every null literal/separator the function allows."""
    rnd = random.Random(seed)
    kinds = [lambda: plain_batch(rnd, n=rnd.randint(0, 6)),
             lambda: plain_batch(rnd, n=3, compression=compression.LZ4),
             lambda: plain_batch(rnd, n=2, producer_id=1, producer_epoch=0, base_sequence=0,
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
        null_literal, separator = literals
        got = both(fd, pos, window, stop, null_literal=null_literal, separator=separator)
    finally:
        os.close(fd)
    assert pos <= got[1] <= pos + window


@need_c
def test_bad_arguments_are_refused_clearly(tmp_path):
    path = str(tmp_path / "seg.log")
    write(path, [plain_batch(random.Random(3))])
    fd = os.open(path, os.O_RDONLY)
    try:
        for f in (C, PY):
            with pytest.raises(ValueError, match="<= 7 bytes"):
                f(fd, 0, 100, FAR, null_literal=b"nothing")
            with pytest.raises(ValueError, match="separator <= 6"):
                f(fd, 0, 100, FAR, null_literal=b"", separator=b"1234567")
            with pytest.raises(ValueError, match=">= 0"):
                f(fd, -1, 100, FAR)
    finally:
        os.close(fd)
    for f in (C, PY):
        with pytest.raises(OSError):
            f(fd, 0, 100, FAR)  # closed


# -- the messages view with and without the run -------------------------------------

def _views(lg):
    with_run = LineView(lg, render_messages, measure_messages, render_run=plain.render_file_values)
    without = LineView(lg, render_messages, measure_messages)
    return with_run, without


def _read_all(v, step):
    out, off = [], 0
    while True:
        chunk = v.read(off, step)
        if not chunk:
            return b"".join(out)
        out.append(bytes(chunk))
        off += len(chunk)


@pytest.mark.parametrize("topic", sorted(os.path.basename(d)[:-2] for d in
                                         glob.glob(os.path.join(bc.CORPUS, "*-0"))))
def test_corpus_messages_are_the_same_with_the_run(tmp_path, topic):
    """Every corpus log (every format, codec, transactions, a preallocated zero tail):
    the view that renders plain runs natively shows exactly what the general path shows,
    read whole and in odd steps."""
    part = str(tmp_path / f"{topic}-0")
    shutil.copytree(os.path.join(bc.CORPUS, f"{topic}-0"), part)
    lg = load_log(part, topic, 0, LogConfig(), writable=False)
    try:
        for committed in (False, True):
            a = LineView(lg, render_messages, measure_messages, committed=committed,
                         render_run=plain.render_file_values)
            b = LineView(lg, render_messages, measure_messages, committed=committed)
            want = _outcome(b, 1 << 20)
            assert _outcome(a, 1 << 20) == want
            assert _outcome(a, 777) == want
            if want[0] == "ok":
                assert len(want[1]) == b.size == a.size
    finally:
        lg.close()


def _outcome(v, step):
    """("ok", every byte) or ("error", path, position): a vector with a wrong CRC must
    fail the same way with and without the run."""
    try:
        v.refresh()
        return ("ok", _read_all(v, step))
    except CorruptRecordError as exc:
        return ("error", exc.path, exc.position)


def test_mixed_log_reads_the_same_with_the_run(tmp_path, monkeypatch):
    """Plain, compressed, aborted and committed transactional batches and control markers
    interleaved over several segments; small marks so chunks start everywhere."""
    from kafkafs.fs import views
    monkeypatch.setattr(views, "MARK_BYTES", 2000)
    part = str(tmp_path / "t-0")
    os.makedirs(part)
    lg = load_log(part, "t", 0, LogConfig(segment_bytes=20000), had_clean_shutdown=True)
    rnd = random.Random(4)
    pid = 0
    for i in range(200):
        r = rnd.random()
        recs = [(1000 + i, None, b"v%d-%d" % (i, j) * rnd.randint(1, 20), ())
                for j in range(rnd.randint(1, 8))]
        if r < 0.15:
            lg.append(recs, compression=compression.ZSTD)
        elif r < 0.25:
            pid += 1
            lg.append_encoded(bytearray(encode_batch(
                recs, producer_id=pid, producer_epoch=0, base_sequence=0,
                is_transactional=True)))
            lg.append_encoded(bytearray(_marker(pid, commit=rnd.random() < 0.5)))
        else:
            lg.append(recs)
    try:
        for committed in (False, True):
            a = LineView(lg, render_messages, measure_messages, committed=committed,
                         render_run=plain.render_file_values)
            b = LineView(lg, render_messages, measure_messages, committed=committed)
            assert a.refresh() == b.refresh()
            want = _read_all(b, 4096)
            assert _read_all(a, 4096) == want
            rnd2 = random.Random(5)
            for _ in range(200):
                off, size = rnd2.randrange(len(want)), rnd2.randint(1, 9000)
                assert a.read(off, size) == want[off:off + size]
    finally:
        lg.close()


def _marker(pid: int, commit: bool) -> bytes:
    return control.encode_end_txn_marker_batch(
        control.COMMIT if commit else control.ABORT, base_offset=0, timestamp=2000,
        producer_id=pid, producer_epoch=0, coordinator_epoch=0)


def test_a_corrupt_plain_batch_is_reported_with_its_file_and_position(tmp_path):
    """The run stops quietly at a bad CRC; the general path then raises the located error,
    as without the run."""
    part = str(tmp_path / "t-0")
    os.makedirs(part)
    lg = load_log(part, "t", 0, LogConfig(), had_clean_shutdown=True)
    try:
        for i in range(5):
            lg.append([(1000, None, b"line %d" % i, ())])
        seg = lg.segments()[0]
        third = [b.position for b in seg.batches()][2]
        v = LineView(lg, render_messages, measure_messages, render_run=plain.render_file_values)
        v.refresh()
        with open(seg.log_path, "r+b") as f:  # a bit flips on disk after the view was built
            f.seek(third + 70)
            byte = f.read(1)
            f.seek(third + 70)
            f.write(bytes([byte[0] ^ 0xFF]))
        with pytest.raises(CorruptRecordError) as exc:
            v.read(0, 1000)
        assert exc.value.path == seg.log_path and exc.value.position == third
    finally:
        lg.close()
