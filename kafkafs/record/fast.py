"""Fast paths for the records section of a v2 batch, in C when it is built.

Each function here is the C version from :mod:`kafkafs.record._speedups` when that
extension imports, else the pure-Python twin defined below; both give identical results
and raise the same errors (``tests/test_speedups.py`` holds them to it). ``HAVE_C`` says
which is in use; set ``KAFKAFS_NO_SPEEDUPS=1`` to force the pure-Python versions. Both sets
stay reachable as :data:`C` (None without the extension) and :data:`PYTHON`.

``payload`` is the UNCOMPRESSED records section of a batch (bytes, bytearray or
memoryview): the bytes after the 61-byte header, or the decompressed stream; ``count`` is
the batch's recordsCount. Record layout (docs/design.md §2.2): length varint ·
attributes i8 · timestampDelta varlong · offsetDelta varint · keyLen varint (-1 null) + key ·
valueLen varint (-1 null) + value · headerCount varint, then per header keyLen varint (>= 0)
+ UTF-8 key, valueLen varint (-1 null) + value. Every varint is zigzag.

Reading validates like Kafka's ``DefaultRecord.readFrom`` (``ByteUtils.readVarint`` /
``readVarlong``: the 32-bit fields take at most 5 bytes, the timestamp delta at most 10),
and raises :class:`~kafkafs.record.errors.CorruptRecordError` on: an overlong varint; the
buffer ending inside a record; a negative record length or one past the end of the buffer;
a body whose consumed size differs from its length ("invalid record size: expected to read
N bytes in record payload, but instead read M"); a key, value or header value length below
-1; a negative header count or one larger than the bytes left; a null or non-UTF-8 header
key; with ``exact=True`` (the default, right for uncompressed batches), bytes left after
``count`` records; and a negative ``count``. Offsets and timestamps are 64-bit and wrap as
in Java.
"""

from __future__ import annotations

import os
import struct
import sys
import types
from operator import index as _index

from crc32c import crc32c as _crc32c

from .errors import CorruptRecordError
from .varint import encode_varint

__all__ = [
    "HAVE_C",
    "PYTHON",
    "C",
    "decode",
    "encode",
    "encode_headers",
    "encode_lines",
    "encode_text",
    "encode_text_batches",
    "render_values",
    "rendered_size",
    "values",
]

_M32 = 0xFFFFFFFF
_M64 = 0xFFFFFFFFFFFFFFFF
# the signed value of every zigzag form a one- or two-byte varint holds (z < 2**14)
_UNZIGZAG = [(z >> 1) ^ -(z & 1) for z in range(1 << 14)]
_I64_MIN = -(1 << 63)
_I64_MAX = (1 << 63) - 1
_I32_MIN = -(1 << 31)
_I32_MAX = (1 << 31) - 1
_NULL = b"\x01"  # zigzag varint -1
_ZERO = b"\x00"

# zigzag varint of n for 0 <= n < _SMALL (one or two bytes)
_SMALL = 1 << 13
_SMALL_VARINTS = []
for _n in range(_SMALL):
    _z = _n << 1
    _SMALL_VARINTS.append(bytes((_z,)) if _z < 0x80 else bytes(((_z & 0x7F) | 0x80, _z >> 7)))
del _n, _z


# -- reading ------------------------------------------------------------------------------

def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """``ByteUtils.readVarint`` at ``pos``: at most 5 bytes, a 32-bit zigzag value.

    Raises IndexError when the buffer ends inside it (the caller reports the record).
    """
    b = buf[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    r = b & 0x7F
    pos += 1
    for shift in (7, 14, 21):
        b = buf[pos]
        pos += 1
        r |= (b & 0x7F) << shift
        if b < 0x80:
            return (r >> 1) ^ -(r & 1), pos
    b = buf[pos]
    pos += 1
    if b >= 0x80:
        raise CorruptRecordError("varint is too long, the most significant bit in the 5th "
                                 f"byte is set, converted value: {r:x}")
    r = (r | (b << 28)) & _M32
    return (r >> 1) ^ -(r & 1), pos


def _varlong(buf: bytes, pos: int) -> tuple[int, int]:
    """``ByteUtils.readVarlong`` at ``pos``: at most 10 bytes, a 64-bit zigzag value."""
    r = 0
    for shift in range(0, 70, 7):
        b = buf[pos]
        pos += 1
        r |= (b & 0x7F) << shift
        if b < 0x80:
            r &= _M64
            return (r >> 1) ^ -(r & 1), pos
    r &= _M64
    raise CorruptRecordError("varlong is too long, the most significant bit in the 10th byte "
                             f"is set, converted value: {r:x}")


def _as_bytes(obj) -> bytes:
    """``obj``'s bytes (buffer protocol; bytes itself without a copy)."""
    if type(obj) is bytes:
        return obj
    return memoryview(obj).tobytes()


def _check_count(count: int) -> None:
    if count < 0:
        raise CorruptRecordError(f"found invalid record count {count} in magic v2 batch")


def _i64(n, what: str) -> int:
    n = _index(n)
    if not _I64_MIN <= n <= _I64_MAX:
        raise OverflowError(f"{what} {n} does not fit in 64 bits")
    return n


def _wrap64(n: int) -> int:
    if _I64_MIN <= n <= _I64_MAX:
        return n
    return ((n - _I64_MIN) & _M64) + _I64_MIN


def _headers(buf: bytes, pos: int, n: int, build: bool):
    """Read ``n`` (> 0) headers at ``pos`` (``DefaultRecord.readHeaders``); returns
    ``(tuple of (str, bytes | None) or None, next_pos)``."""
    end = len(buf)
    out = [] if build else None
    for _ in range(n):
        kl, pos = _varint(buf, pos)
        if kl < 0:
            raise CorruptRecordError(f"invalid negative header key size {kl}")
        if end - pos < kl:
            raise IndexError
        key = buf[pos:pos + kl]
        pos += kl
        try:
            key = key.decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptRecordError("header key is not valid UTF-8") from None
        vl, pos = _varint(buf, pos)
        if vl >= 0:
            if end - pos < vl:
                raise IndexError
            value = buf[pos:pos + vl]
            pos += vl
        elif vl == -1:
            value = None
        else:
            raise CorruptRecordError(f"invalid negative header value size {vl}")
        if build:
            out.append((key, value))
    return (tuple(out) if build else None), pos


def _scan(buf: bytes, count: int, exact: bool, decode: bool = False, base_offset: int = 0,
          base_ts: int = 0, fixed_ts=None) -> list:
    """Parse ``count`` records in ``buf``: the list of values, or of decoded 5-tuples with
    ``decode``. (Arguments are checked in the order the C versions check theirs, so both
    raise the same error when several are wrong.)"""
    _check_count(count)
    end = len(buf)
    out = []
    append = out.append
    varint = _varint
    unzigzag = _UNZIGZAG
    pos = 0
    i = 0
    try:
        for i in range(count):
            # length
            b = buf[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif buf[pos + 1] < 0x80:  # two bytes: a table lookup, no call
                length = unzigzag[(b & 0x7F) | (buf[pos + 1] << 7)]
                pos += 2
            else:
                length, pos = varint(buf, pos)
            if length < 0:
                raise CorruptRecordError(f"invalid record size: negative record length {length}")
            if end - pos < length:
                raise CorruptRecordError(
                    f"invalid record size: expected {length} bytes in record payload, but "
                    f"instead the buffer has only {end - pos} remaining bytes")
            start = pos
            # attributes (unused), timestampDelta
            b = buf[pos + 1]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                pos += 2
            else:
                ts_delta, pos = _varlong(buf, pos + 1)
            # offsetDelta
            b = buf[pos]
            if b < 0x80:
                off_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            elif buf[pos + 1] < 0x80:
                off_delta = unzigzag[(b & 0x7F) | (buf[pos + 1] << 7)]
                pos += 2
            else:
                off_delta, pos = varint(buf, pos)
            # key
            b = buf[pos]
            if b < 0x80:
                kl = (b >> 1) ^ -(b & 1)
                pos += 1
            elif buf[pos + 1] < 0x80:
                kl = unzigzag[(b & 0x7F) | (buf[pos + 1] << 7)]
                pos += 2
            else:
                kl, pos = varint(buf, pos)
            if kl >= 0:
                if end - pos < kl:
                    raise IndexError
                key = buf[pos:pos + kl] if decode else None
                pos += kl
            elif kl == -1:
                key = None
            else:
                raise CorruptRecordError(f"invalid negative key size {kl}")
            # value
            b = buf[pos]
            if b < 0x80:
                vl = (b >> 1) ^ -(b & 1)
                pos += 1
            elif buf[pos + 1] < 0x80:
                vl = unzigzag[(b & 0x7F) | (buf[pos + 1] << 7)]
                pos += 2
            else:
                vl, pos = varint(buf, pos)
            if vl >= 0:
                if end - pos < vl:
                    raise IndexError
                value = buf[pos:pos + vl]
                pos += vl
            elif vl == -1:
                value = None
            else:
                raise CorruptRecordError(f"invalid negative value size {vl}")
            # headers
            b = buf[pos]
            if b == 0:
                headers = ()
                pos += 1
            else:
                if b < 0x80:
                    hc = (b >> 1) ^ -(b & 1)
                    pos += 1
                else:
                    hc, pos = varint(buf, pos)
                if hc < 0:
                    raise CorruptRecordError(f"found invalid number of record headers {hc}")
                if hc > end - pos:
                    raise CorruptRecordError(
                        "found invalid number of record headers. The number of record headers "
                        "is larger than the remaining size of the buffer, numHeaders: "
                        f"{hc}")
                if hc:
                    headers, pos = _headers(buf, pos, hc, decode)
                else:
                    headers = ()
            if pos - start != length:
                raise CorruptRecordError(
                    f"invalid record size: expected to read {length} bytes in record payload, "
                    f"but instead read {pos - start}")
            if decode:
                off = base_offset + off_delta
                if not _I64_MIN <= off <= _I64_MAX:
                    off = _wrap64(off)
                if fixed_ts is None:
                    ts = base_ts + ts_delta
                    if not _I64_MIN <= ts <= _I64_MAX:
                        ts = _wrap64(ts)
                else:
                    ts = fixed_ts
                append((off, ts, key, value, headers))
            else:
                append(value)
    except IndexError:
        raise CorruptRecordError(f"batch ends inside record {i} of {count}") from None
    if exact and pos != end:
        raise CorruptRecordError("incorrect declared batch size, records still remaining "
                                 f"({end - pos} bytes left after {count} records)")
    return out


def _py_values(payload, count, *, exact=True) -> list:
    """The value (bytes, or None for a null value) of each of the ``count`` records."""
    count = _index(count)
    return _scan(_as_bytes(payload), count, exact)


def _py_render_values(payload, count, null_literal=b"null", separator=b"\n", *,
                      exact=True) -> bytes:
    """Every value (a null value as ``null_literal``) followed by ``separator``, joined."""
    count = _index(count)
    buf = _as_bytes(payload)
    null_literal = _as_bytes(null_literal)
    separator = _as_bytes(separator)
    vals = _scan(buf, count, exact)
    if not vals:
        return b""
    if None in vals:
        vals = [null_literal if v is None else v for v in vals]
    vals.append(b"")
    return separator.join(vals)


def _py_rendered_size(payload, count, null_len=4, separator_len=1, *, exact=True) -> int:
    """``len(render_values(...))`` for a null literal of ``null_len`` bytes and a separator
    of ``separator_len`` bytes, without building it."""
    count = _index(count)
    null_len = _index(null_len)
    separator_len = _index(separator_len)
    if null_len < 0 or separator_len < 0:
        raise ValueError("null_len and separator_len must be >= 0")
    vals = _scan(_as_bytes(payload), count, exact)
    total = 0
    nulls = 0
    for v in vals:
        if v is None:
            nulls += 1
        else:
            total += len(v)
    total += nulls * null_len + len(vals) * separator_len
    if total > sys.maxsize:
        raise OverflowError("rendered size does not fit in a Py_ssize_t")
    return total


def _py_decode(payload, count, base_offset, base_timestamp, fixed_timestamp, *,
               exact=True, only=None, cls=None) -> list:
    """``(offset, timestamp, key, value, headers)`` for each record: offset = base_offset +
    offsetDelta; timestamp = ``fixed_timestamp`` unless None (LogAppendTime), else
    base_timestamp + timestampDelta; headers a tuple of ``(str, bytes | None)``. With
    ``only=N`` every record is validated but only the one at offset N is returned. ``cls``:
    a tuple subclass (a namedtuple such as ``Record``) to build instead of plain tuples.
    Raises TypeError for a ``cls`` that is not one."""
    if cls is not None:
        if not (isinstance(cls, type) and issubclass(cls, tuple)):
            raise TypeError("cls must be a subclass of tuple")
        new = tuple.__new__
        return [new(cls, t) for t in _py_decode(payload, count, base_offset, base_timestamp,
                                                fixed_timestamp, exact=exact, only=only)]
    if only is not None:
        return [r for r in _py_decode(payload, count, base_offset, base_timestamp,
                                      fixed_timestamp, exact=exact) if r[0] == only]
    count = _index(count)
    base_offset = _i64(base_offset, "base_offset")
    base_timestamp = _i64(base_timestamp, "base_timestamp")
    if fixed_timestamp is not None:
        fixed_timestamp = _i64(fixed_timestamp, "fixed_timestamp")
    return _scan(_as_bytes(payload), count, exact, True, base_offset, base_timestamp,
                 fixed_timestamp)


# -- writing ------------------------------------------------------------------------------

def _enc(n: int) -> bytes:
    """Zigzag varint of ``n`` (signed 64-bit), from a table for small values."""
    if 0 <= n < _SMALL:
        return _SMALL_VARINTS[n]
    return encode_varint(n)


def _blob(obj, what: str) -> bytes:
    """A bytes-like ``obj`` as bytes, no longer than a record field may be."""
    if type(obj) is not bytes:
        obj = memoryview(obj).tobytes()
    if len(obj) > _I32_MAX:
        raise ValueError(f"{what} of {len(obj)} bytes is too long for a record")
    return obj


def encode_headers(headers) -> tuple[int, bytes]:
    """``(count, the headers as DefaultRecord.writeTo writes them, without the count
    varint)`` of ``(key, value)`` pairs: key str (UTF-8) or bytes-like, value bytes-like or
    None. Raises TypeError for a None key, ValueError for a malformed pair or a field over
    2^31 - 1 bytes."""
    parts = []
    n = 0
    for header in headers:
        if type(header) is not tuple:
            header = tuple(header)
        if len(header) != 2:
            raise ValueError(f"a header must be a (key, value) pair, not {len(header)} items")
        hk, hv = header
        if hk is None:
            raise TypeError("header key must be str or bytes-like, not None")
        hk = hk.encode("utf-8") if isinstance(hk, str) else _blob(hk, "header key")
        if len(hk) > _I32_MAX:
            raise ValueError(f"header key of {len(hk)} bytes is too long for a record")
        if hv is None:
            parts += (_enc(len(hk)), hk, _NULL)
        else:
            hv = _blob(hv, "header value")
            parts += (_enc(len(hk)), hk, _enc(len(hv)), hv)
        n += 1
    return n, b"".join(parts)


def _py_encode(records, base_timestamp, offset_deltas=None, log_append_time=False) -> bytes:
    """The record bodies of ``records`` (``(timestamp, key, value[, headers])``) back to back,
    as ``DefaultRecord.writeTo`` writes them: timestampDelta = timestamp - base_timestamp (0
    for every record under ``log_append_time``), offsetDelta = the index or
    ``offset_deltas[i]``."""
    base_timestamp = _i64(base_timestamp, "base_timestamp")
    if type(records) is not list and type(records) is not tuple:
        records = list(records)
    n = len(records)
    if offset_deltas is not None:
        if type(offset_deltas) is not list and type(offset_deltas) is not tuple:
            offset_deltas = list(offset_deltas)
        if len(offset_deltas) != n:
            raise ValueError(f"{len(offset_deltas)} offset deltas for {n} records")
    log_append_time = bool(log_append_time)
    small = _SMALL_VARINTS
    parts = []
    extend = parts.extend
    for i, rec in enumerate(records):
        if type(rec) is not tuple:
            rec = tuple(rec)
        if len(rec) == 4:
            ts, key, value, headers = rec
        elif len(rec) == 3:
            ts, key, value = rec
            headers = None
        else:
            raise ValueError("a record must be (timestamp, key, value, headers), not "
                             f"{len(rec)} items")
        if log_append_time:
            tsv = _ZERO
        else:
            dt = _i64(ts, "timestamp") - base_timestamp
            if not _I64_MIN <= dt <= _I64_MAX:
                raise ValueError(f"timestamp delta {ts} - {base_timestamp} does not fit in "
                                 "64 bits")
            tsv = small[dt] if 0 <= dt < _SMALL else _enc(dt)
        if offset_deltas is None:
            od = i
            if od > _I32_MAX:
                raise ValueError("offset delta does not fit in 32 bits")
        else:
            od = _index(offset_deltas[i])
            if not _I32_MIN <= od <= _I32_MAX:
                raise ValueError("offset delta does not fit in 32 bits")
        ofv = small[od] if 0 <= od < _SMALL else _enc(od)
        if key is None:
            kv = _NULL
            key = b""
        else:
            key = _blob(key, "key")
            kl = len(key)
            kv = small[kl] if kl < _SMALL else _enc(kl)
        if value is None:
            vv = _NULL
            value = b""
        else:
            value = _blob(value, "value")
            vl = len(value)
            vv = small[vl] if vl < _SMALL else _enc(vl)
        if headers:
            hc, hb = encode_headers(headers)
            hb = _enc(hc) + hb
        else:
            hb = _ZERO
        size = 1 + len(tsv) + len(ofv) + len(kv) + len(key) + len(vv) + len(value) + len(hb)
        if size > _I32_MAX:
            raise ValueError(f"record of {size} bytes is too large")
        extend((small[size] if size < _SMALL else _enc(size), _ZERO, tsv, ofv, kv, key, vv,
                value, hb))
    return b"".join(parts)


def _py_encode_lines(lines, timestamp) -> bytes:
    """``encode([(timestamp, None, line, ()) for line in lines], timestamp)``: each line a
    record with a null key, no headers, timestamp delta 0 and offset delta = its index."""
    _i64(timestamp, "timestamp")
    small = _SMALL_VARINTS
    parts = []
    extend = parts.extend
    pre = b"\x00\x00"  # attributes, timestampDelta 0
    for i, line in enumerate(lines):
        if type(line) is not bytes:
            line = memoryview(line).tobytes()
        vl = len(line)
        if vl > _I32_MAX:
            raise ValueError(f"value of {vl} bytes is too long for a record")
        if i > _I32_MAX:
            raise ValueError("offset delta does not fit in 32 bits")
        ofv = small[i] if i < _SMALL else _enc(i)
        vv = small[vl] if vl < _SMALL else _enc(vl)
        size = 4 + len(ofv) + len(vv) + vl
        if size > _I32_MAX:
            raise ValueError(f"record of {size} bytes is too large")
        extend((small[size] if size < _SMALL else _enc(size), pre, ofv, _NULL, vv, line, _ZERO))
    return b"".join(parts)


def _py_encode_text(text, timestamp, budget, ratio=1.0, separator=None):
    """``(payload, count, consumed)``: the ``\\n``-terminated lines at the start of
    ``text`` encoded as :func:`encode_lines` would -- or, with a non-empty ``separator``,
    each line as a record keyed by what precedes the separator's first occurrence, the rest
    its value (``encode([(timestamp, key, value, ())], timestamp)``; ValueError for a line
    without it) -- stopping before the line whose record would take ``int(payload bytes so
    far * ratio)`` plus its size past ``budget`` bytes (the first line is always taken:
    the producer's ``batch.size`` rule, kafkafs.record.producer_batch); bytes after the
    last newline are never consumed. Raises ValueError for a ``ratio`` not in (0, 1e6]."""
    if isinstance(ratio, (str, bytes, bytearray)):  # as C's "d": numbers only
        raise TypeError(f"must be real number, not {type(ratio).__name__}")
    ratio = float(ratio)
    if not 0.0 < ratio <= 1e6:
        raise ValueError("ratio must be above 0 and at most 1e6")
    sep = _as_bytes(separator) if separator is not None else b""
    text = _as_bytes(text)
    end = text.rfind(b"\n") + 1
    lines = text[:end].split(b"\n")[:-1] if end else []
    records = []
    used = 0
    for i, line in enumerate(lines):
        if sep:
            key, found, value = line.partition(sep)
            if not found:
                raise ValueError(f"line {i} has no key separator")
            kl = len(key)
        else:
            key, value, kl = None, line, -1
        vl = len(value)
        body = 3 + len(_enc(i)) + len(_enc(kl)) + max(kl, 0) + len(_enc(vl)) + vl
        need = len(_enc(body)) + body
        if i and (used if ratio == 1.0 else int(used * ratio)) + need > budget:
            break
        used += need
        records.append((timestamp, key, value, ()))
    taken = len(records)
    payload = _py_encode_lines(lines[:taken], timestamp) if not sep else \
        _py_encode(records, timestamp, None)
    return payload, taken, sum(len(x) for x in lines[:taken]) + taken


_TEXT_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")  # the v2 batch header (record.batch)
_CRC_AT = 17  # the header's CRC, of the bytes from the attributes (21) on
_TEXT_BATCH_HEADER_CRC = struct.Struct(">I")


def _py_encode_text_batches(text, timestamp, budget, timestamp_type=0, head=b""):
    """``(batches, ends)``: the ``\\n``-terminated lines of ``head + text`` (``head``, the
    start of the first line, holds no newline) as consecutive v2 batches in one bytearray,
    each what :func:`encode_text` ``(rest, timestamp, budget)`` takes of the lines left
    (at least one line, then lines while its records fit in ``budget`` bytes: the
    producer's ``batch.size`` rule), with base offset 0, null keys, every timestamp
    ``timestamp`` (ms), no producer, uncompressed, ``timestamp_type`` 0 (CreateTime) or 1
    (LogAppendTime) and its CRC-32C; ``ends``: per batch, the end in ``text`` of its lines
    (newline included). Bytes after the last newline are never taken; ``(bytearray(), [])``
    when ``text`` holds no newline. Raises ValueError for a newline in ``head``, another
    ``timestamp_type``, or a line or offset delta too large for a record."""
    timestamp = _i64(timestamp, "timestamp")
    budget = _index(budget)
    timestamp_type = _index(timestamp_type)
    if timestamp_type not in (0, 1):
        raise ValueError("timestamp_type must be 0 (CreateTime) or 1 (LogAppendTime)")
    head = _as_bytes(head)
    text = _as_bytes(text)
    if b"\n" in head:
        raise ValueError("head holds a newline")
    end = text.rfind(b"\n") + 1
    out, ends = bytearray(), []
    if not end:
        return out, ends
    if max(len(head) + text.find(b"\n"), *map(len, text[:end].split(b"\n"))) \
            > _I32_MAX - 16:
        raise ValueError("line or offset delta too large for a record")
    data = head + text[:end] if head else text[:end]
    attributes = 8 if timestamp_type else 0
    pos = 0
    while pos < len(data):
        payload, n, consumed = _py_encode_text(data[pos:], timestamp, budget)
        header = bytearray(_TEXT_BATCH_HEADER.pack(
            0, _TEXT_BATCH_HEADER.size - 12 + len(payload), -1, 2, 0, attributes, n - 1,
            timestamp, timestamp, -1, -1, -1, n))
        crc = _crc32c(payload, _crc32c(memoryview(header)[21:]))
        _TEXT_BATCH_HEADER_CRC.pack_into(header, _CRC_AT, crc)
        out += header
        out += payload
        pos += consumed
        ends.append(pos - len(head))
    return out, ends


# -- selection ----------------------------------------------------------------------------

PYTHON = types.SimpleNamespace(
    name="python", values=_py_values, render_values=_py_render_values,
    rendered_size=_py_rendered_size, decode=_py_decode, encode=_py_encode,
    encode_lines=_py_encode_lines, encode_text=_py_encode_text,
    encode_text_batches=_py_encode_text_batches)

try:
    from . import _speedups
except ImportError:  # not built (no compiler, or an install without it)
    _speedups = None


def twins(python: types.SimpleNamespace, c_names: dict[str, str]
          ) -> tuple[types.SimpleNamespace | None, bool, types.SimpleNamespace]:
    """``(C, HAVE_C, chosen)`` for a set of pure-Python functions ``python`` (a namespace
    with ``name="python"``) and the names of their C twins in ``_speedups``
    (``{python name: C name}``): ``C`` is the namespace of the C functions, None when the
    extension is not built or lacks one of them; ``HAVE_C`` whether they are used (not
    with ``KAFKAFS_NO_SPEEDUPS=1``); ``chosen`` the namespace in use."""
    c = None
    if _speedups is not None and all(hasattr(_speedups, n) for n in c_names.values()):
        c = types.SimpleNamespace(name="c", **{k: getattr(_speedups, n)
                                               for k, n in c_names.items()})
    have = c is not None and os.environ.get("KAFKAFS_NO_SPEEDUPS", "") in ("", "0")
    return c, have, c if have else python


C, HAVE_C, _impl = twins(PYTHON, {n: n for n in (
    "values", "render_values", "rendered_size", "decode", "encode", "encode_lines",
    "encode_text", "encode_text_batches")})

values = _impl.values
render_values = _impl.render_values
rendered_size = _impl.rendered_size
decode = _impl.decode
encode = _impl.encode
encode_lines = _impl.encode_lines
encode_text = _impl.encode_text
encode_text_batches = _impl.encode_text_batches
