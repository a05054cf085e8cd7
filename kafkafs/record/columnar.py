"""The records of v2 batches gathered as Arrow column buffers, without a Python object per
record on the hot path (what the Spark reader, :mod:`kafkafs.spark.columns`, builds its
``pyarrow.RecordBatch`` from).

:class:`ColumnBuilder` is the C version from :mod:`kafkafs.record._speedups` when the
extension is built, else the pure-Python twin defined here; both give identical buffers and
raise the same errors (``tests/test_columnar.py``). ``HAVE_C`` says which is in use
(``KAFKAFS_NO_SPEEDUPS=1`` forces the twin); both stay reachable as :data:`C` and
:data:`PYTHON`.

A builder gathers records one after the other:

* :meth:`ColumnBuilder.add_batches` walks the *plain* v2 batches of a buffer -- magic 2,
  uncompressed, not control (and not transactional with ``skip_transactional``) -- checks
  each (whole in the buffer, CRC-32C, last offset delta and record count not negative,
  offsets within the segment ``[segment_base, next_base)`` and not below ``expected``, the
  offset after the batch before it; records as Kafka's ``DefaultRecord.readFrom`` reads
  them) and gathers its records. It stops, gathering nothing of it, at the first batch it
  does not take, and says why: ``END`` (fewer than 17 bytes left), ``OTHER`` (any other
  batch: a legacy or compressed or control one, a damaged one: the caller's general path
  takes it and raises the located error when it is damaged), ``PAST`` (a batch whose base
  offset is >= ``end_offset``: nothing more to gather), ``PARTIAL`` (the batch runs past
  ``end``: read more). The C version runs without the GIL for large buffers.
* :meth:`ColumnBuilder.add_section` gathers the records of one records section (a
  decompressed batch payload, or legacy records re-encoded by the caller).

Only records with ``start_offset <= offset < end_offset`` are gathered. :meth:`finish`
returns the buffers -- bytes-like: the C version hands its
memory over without a copy as read-only buffer objects -- in native byte order, as Arrow
wants them, and empties the builder:

======================  ========================================================
``offset``              int64 per record
``timestamp``           int64 per record: microseconds (the record's ms * 1000)
``timestamp_type``      int32 per record (0 CreateTime, 1 LogAppendTime, -1 none)
``key_validity``        Arrow validity bitmap (LSB first; bit set: not null)
``key_offsets``         int32, rows + 1 entries, into ``key_data``
``key_data``            the keys back to back
``value_*``             the same for values
``header_offsets``      int32, rows + 1 entries, into the headers (with headers)
``header_key_*``        offsets (headers + 1) and UTF-8 data of header keys
``header_value_*``      validity, offsets and data of header values
======================  ========================================================

and the counts ``rows``, ``headers_count``, ``key_nulls``, ``value_nulls``,
``header_value_nulls``. A column's data may not pass 2 GiB (int32 offsets): call
:meth:`finish` well before (OverflowError otherwise). A timestamp whose microseconds do not
fit an int64 raises ValueError (Spark's timestamps are microseconds).
"""

from __future__ import annotations

import struct
import types
from array import array

from crc32c import crc32c as _crc32c

from . import fast
from .batch import offsets_in_place
from .errors import CorruptRecordError

__all__ = ["END", "HAVE_C", "OTHER", "PARTIAL", "PAST", "PYTHON", "C", "ColumnBuilder"]

END, OTHER, PAST, PARTIAL = 0, 1, 2, 3

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PEEK = 17
_OVERHEAD = 61
_ATTR_CODEC, _ATTR_LOG_APPEND_TIME, _ATTR_TRANSACTIONAL, _ATTR_CONTROL = 0x07, 0x08, 0x10, 0x20
_INT32_MAX = 0x7FFFFFFF
_TS_LIMIT = (1 << 63) // 1000  # |ms| above it has no int64 microseconds
_M64 = 0xFFFFFFFFFFFFFFFF
_BUFFERS = ("offset", "timestamp", "timestamp_type", "key_validity", "key_offsets",
            "key_data", "value_validity", "value_offsets", "value_data", "header_offsets",
            "header_key_offsets", "header_key_data", "header_value_validity",
            "header_value_offsets", "header_value_data")


def _wrap64(n: int) -> int:
    n &= _M64
    return n - (1 << 64) if n >> 63 else n


def _bitmap(bits: list) -> bytes:
    out = bytearray((len(bits) + 7) // 8)
    for i, valid in enumerate(bits):
        if valid:
            out[i >> 3] |= 1 << (i & 7)
    return bytes(out)


class _PyColumnBuilder:
    """The pure-Python :class:`ColumnBuilder` (see the module)."""

    def __init__(self, headers: bool = False):
        self._headers = bool(headers)
        self._reset()

    def _reset(self) -> None:
        self._off = array("q")
        self._ts = array("q")
        self._tt = array("i")
        self._keys: list = []
        self._values: list = []
        self._hdrs: list = []  # per record: tuple of (str, bytes | None)
        self._size = 0

    @property
    def headers(self) -> bool:
        return self._headers

    @property
    def rows(self) -> int:
        return len(self._off)

    @property
    def nbytes(self) -> int:
        return self._size

    # -- gathering --------------------------------------------------------------------------
    def _gather(self, records, ts_type: int, start: int, end: int) -> int:
        """Append decoded ``(offset, ts, key, value, headers)`` tuples in range, all or none."""
        keep = [r for r in records if start <= r[0] < end]
        for r in keep:
            if not -_TS_LIMIT <= r[1] <= _TS_LIMIT:
                raise ValueError(f"timestamp {r[1]} ms is out of the range of Spark's "
                                 "timestamps (microseconds in a long)")
        size = 20 * len(keep)
        for r in keep:
            size += (len(r[2]) if r[2] is not None else 0) + \
                (len(r[3]) if r[3] is not None else 0) + 8
            if self._headers:
                size += 4 + sum(8 + len(k.encode()) + len(v or b"") for k, v in r[4])
        for r in keep:
            self._off.append(r[0])
            self._ts.append(r[1] * 1000)
            self._tt.append(ts_type)
            self._keys.append(r[2])
            self._values.append(r[3])
            if self._headers:
                self._hdrs.append(r[4])
        self._size += size
        return len(keep)

    def add_section(self, payload, count, base_offset, base_timestamp, fixed_timestamp,
                    timestamp_type, start_offset, end_offset) -> int:
        """Gather the records with ``start_offset <= offset < end_offset`` of an uncompressed
        records section of ``count`` records (offset = base_offset + delta; timestamp =
        ``fixed_timestamp`` unless None, else base_timestamp + delta). Returns how many were
        gathered. Raises CorruptRecordError (the records as ``fast.decode`` judges them),
        ValueError for a timestamp out of Spark's range; gathers nothing then."""
        records = fast.PYTHON.decode(payload, count, base_offset, base_timestamp,
                                     fixed_timestamp, exact=True)
        return self._gather(records, timestamp_type, start_offset, end_offset)

    def add_batches(self, buf, pos, end, start_offset, end_offset, expected=-1,
                    segment_base=0, next_base=-1, skip_transactional=False):
        """Walk the plain batches of ``buf[pos:end]``: ``(pos, status, expected)`` (see the
        module)."""
        view = memoryview(buf)
        if not 0 <= pos <= end <= len(view):
            raise ValueError("need 0 <= pos <= end <= len(buf)")
        status = END
        while end - pos >= _PEEK:
            base, length = struct.unpack_from(">qi", view, pos)
            if view[pos + 16] != 2 or length < _OVERHEAD - 12:
                status = OTHER
                break
            size = length + 12
            if end - pos < size:
                status = PARTIAL
                break
            if base >= end_offset:
                status = PAST
                break
            (_b, _l, _e, _m, crc, attrs, lod, base_ts, max_ts, _pid, _pe, _bs,
             count) = _HEADER.unpack_from(view, pos)
            last = _wrap64(base + lod)
            if attrs & (_ATTR_CODEC | _ATTR_CONTROL) or \
                    (attrs & _ATTR_TRANSACTIONAL and skip_transactional) or lod < 0 or \
                    count < 0 or \
                    not offsets_in_place(base, last, segment_base, next_base, expected) or \
                    _crc32c(view[pos + 21:pos + size]) != crc:
                status = OTHER
                break
            if last >= start_offset:
                fixed = max_ts if attrs & _ATTR_LOG_APPEND_TIME else None
                try:
                    records = fast.PYTHON.decode(view[pos + _OVERHEAD:pos + size], count,
                                                 base, base_ts, fixed, exact=True)
                    self._gather(records, 1 if fixed is not None else 0, start_offset,
                                 end_offset)
                except (CorruptRecordError, ValueError):
                    status = OTHER
                    break
            expected = last + 1
            pos += size
        return pos, status, expected

    # -- the buffers ----------------------------------------------------------------------
    def finish(self) -> dict:
        """The buffers and counts (see the module); the builder is empty again."""
        out = {}
        n = len(self._off)
        out["offset"] = self._off.tobytes()
        out["timestamp"] = self._ts.tobytes()
        out["timestamp_type"] = self._tt.tobytes()
        for name, items in (("key", self._keys), ("value", self._values)):
            offsets = array("i", [0])
            total = 0
            for item in items:
                total += len(item) if item is not None else 0
                if total > _INT32_MAX:
                    raise OverflowError("a column of the batch being built would pass 2 GiB "
                                        "(int32 offsets): finish() the builder more often")
                offsets.append(total)
            out[f"{name}_validity"] = _bitmap([x is not None for x in items])
            out[f"{name}_offsets"] = offsets.tobytes()
            out[f"{name}_data"] = b"".join(x for x in items if x is not None)
            out[f"{name}_nulls"] = sum(1 for x in items if x is None)
        hk, hv = [], []
        list_offsets = array("i", [0])
        for hdrs in self._hdrs:
            for k, v in hdrs:
                hk.append(k.encode("utf-8"))
                hv.append(v)
            list_offsets.append(len(hk))
        out["header_offsets"] = list_offsets.tobytes() if self._headers else \
            array("i", [0]).tobytes()
        hko, hvo = array("i", [0]), array("i", [0])
        for k in hk:
            hko.append(hko[-1] + len(k))
        for v in hv:
            hvo.append(hvo[-1] + (len(v) if v is not None else 0))
        out["header_key_offsets"] = hko.tobytes()
        out["header_key_data"] = b"".join(hk)
        out["header_value_validity"] = _bitmap([v is not None for v in hv])
        out["header_value_offsets"] = hvo.tobytes()
        out["header_value_data"] = b"".join(v for v in hv if v is not None)
        out["rows"] = n
        out["headers_count"] = len(hk)
        out["header_value_nulls"] = sum(1 for v in hv if v is None)
        self._reset()
        return out


PYTHON = types.SimpleNamespace(name="python", ColumnBuilder=_PyColumnBuilder)
C, HAVE_C, _impl = fast.twins(PYTHON, {"ColumnBuilder": "ColumnBuilder"})

#: the builder in use (C when built, see the module)
ColumnBuilder = _impl.ColumnBuilder
