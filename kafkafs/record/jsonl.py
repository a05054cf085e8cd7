"""The lines of the ``records.jsonl`` view, in C when it is built.

Each record of a v2 batch is one line, ``json.dumps(obj, ensure_ascii=False,
separators=(",", ":"))`` followed by ``\\n``, of ::

    {"offset": N, "timestamp": N (ms), "timestamp_type": "CreateTime" | "LogAppendTime",
     "key": K, "value": V, "headers": [{"key": "...", "value": V}, ...]}

where a key, value or header value is ``null`` when null, a string when its bytes are
UTF-8 (Python's strict decoder: no surrogates, no overlong forms, nothing past U+10FFFF),
else ``{"base64": "..."}`` (standard alphabet, padded). Strings are escaped as CPython's
``json`` escapes them without ``ensure_ascii``: ``"`` and ``\\`` with a backslash, ``\\b
\\f \\n \\r \\t``, every other byte below 0x20 as ``\\u00XX`` (lower-case hex), nothing else
(DEL, U+2028 and U+2029 stay as they are). The whole output is UTF-8.

Functions (as in :mod:`kafkafs.record.fast`: the C version from
:mod:`kafkafs.record._speedups` (kafkafs/record/_jsonl.c) when the extension is built, else
the pure-Python twin below, ``KAFKAFS_NO_SPEEDUPS=1`` forcing the twins; both sets stay
reachable as :data:`C` (None without the extension) and :data:`PYTHON`; ``HAVE_C`` says
which is in use; ``tests/test_jsonl.py`` holds them to identical bytes and errors):

* ``render(payload, count, base_offset, base_timestamp, fixed_timestamp, start=None, *,
  exact=True) -> bytes``: the lines of the ``count`` records of ``payload`` (the
  UNCOMPRESSED records section of a batch: bytes, bytearray or memoryview) whose offset is
  >= ``start`` (every record when None). Offsets are ``base_offset`` + offsetDelta;
  ``timestamp_type`` is LogAppendTime and every timestamp ``fixed_timestamp`` (the batch's
  max timestamp) when that is not None, else CreateTime and ``base_timestamp`` +
  timestampDelta (64-bit, wrapping as in Java). Raises CorruptRecordError exactly as
  :func:`kafkafs.record.fast.decode` does (every record is validated, those below
  ``start`` too).
* ``rendered_size(...)``, same arguments: ``len(render(...))``, validating the same way
  (the C version without building the lines).
* ``render_file(fd, position, length, stop_offset) -> (bytes, next_position, stopped)``:
  what :func:`kafkafs.record.plain.render_file_values` is to ``messages``: read ``length``
  bytes of a segment file at ``position`` (a batch start) and render every record of each
  whole *plain* batch there (magic 2, uncompressed, neither transactional nor control, a
  right CRC-32C, well-formed records), stopping without raising before the first batch it
  does not take — another kind, a bad CRC or size, damaged records, a batch running past
  the bytes read, a zero tail — or whose base offset is >= ``stop_offset`` (``stopped``
  True). The caller's general path takes that batch (and raises the located error when it
  is damaged). The C version reads, checks and renders with the GIL released. Raises
  OSError from the read, ValueError for a negative position or length.

Control batches and legacy (magic 0/1) message sets are not for these functions: the view
renders them record by record (:func:`record_lines`, ``kafkafs.fs.views._control_json``).
"""

from __future__ import annotations

import base64
import json
import types
from collections.abc import Iterable

from . import fast, plain
from .batch import BATCH_OVERHEAD, HEADER, TIMESTAMP_TYPE_MASK

__all__ = ["HAVE_C", "PYTHON", "C", "record_lines", "render", "render_file", "rendered_size",
           "text_or_base64"]


def text_or_base64(b: bytes | None):
    """JSON form of a key, value or header value: the text when ``b`` is UTF-8, else
    ``{"base64": "..."}``; None stays None."""
    if b is None:
        return None
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(b).decode("ascii")}


def record_lines(records: Iterable[tuple], ts_type: str, start: int | None = None) -> bytes:
    """The lines (UTF-8 bytes, each ending in ``\\n``) of ``records`` — ``(offset,
    timestamp, key, value, headers)`` tuples such as :class:`~kafkafs.record.types.Record`
    — whose offset is >= ``start`` (every one when None), each with ``timestamp_type``
    ``ts_type``: the pure-Python renderer, also of legacy message sets."""
    out = []
    dumps = json.dumps
    for offset, timestamp, key, value, headers in records:
        if start is not None and offset < start:
            continue
        out.append(dumps({
            "offset": offset, "timestamp": timestamp, "timestamp_type": ts_type,
            "key": text_or_base64(key), "value": text_or_base64(value),
            "headers": [{"key": k, "value": text_or_base64(v)} for k, v in headers],
        }, ensure_ascii=False, separators=(",", ":")))
    if not out:
        return b""
    return ("\n".join(out) + "\n").encode("utf-8")


# -- the pure-Python twins ----------------------------------------------------------------

def _py_render(payload, count, base_offset, base_timestamp, fixed_timestamp, start=None, *,
               exact=True) -> bytes:
    """:func:`render`: the records decoded by :func:`kafkafs.record.fast.decode`, each
    line made by ``json.dumps``."""
    records = fast.decode(payload, count, base_offset, base_timestamp, fixed_timestamp,
                          exact=exact)
    return record_lines(records, "CreateTime" if fixed_timestamp is None else "LogAppendTime",
                        start)


def _py_rendered_size(payload, count, base_offset, base_timestamp, fixed_timestamp,
                      start=None, *, exact=True) -> int:
    """:func:`rendered_size`: the length of :func:`_py_render`'s lines."""
    return len(_py_render(payload, count, base_offset, base_timestamp, fixed_timestamp,
                          start, exact=exact))


def _render_plain_batch(batch: memoryview, count: int) -> bytes:
    """The lines of a whole plain batch (its header and records section)."""
    (base_offset, _length, _epoch, _magic, _crc, attributes, _lod, base_ts, max_ts, _pid,
     _pe, _seq, _count) = HEADER.unpack_from(batch)
    return _py_render(batch[BATCH_OVERHEAD:], count, base_offset, base_ts,
                      max_ts if attributes & TIMESTAMP_TYPE_MASK else None)


def _py_render_file(fd: int, position: int, length: int,
                    stop_offset: int) -> tuple[bytes, int, bool]:
    """:func:`render_file`: ``os.pread``, the crc32c package and :func:`_py_render` per
    batch (:func:`kafkafs.record.plain.walk_plain_run`)."""
    plain.check_window(position, length)
    return plain.walk_plain_run(fd, position, length, stop_offset, _render_plain_batch)


# -- selection ----------------------------------------------------------------------------

PYTHON = types.SimpleNamespace(name="python", render=_py_render,
                               rendered_size=_py_rendered_size, render_file=_py_render_file)

C, HAVE_C, _impl = fast.twins(PYTHON, {"render": "jsonl_render", "rendered_size": "jsonl_size",
                                       "render_file": "jsonl_render_file"})

render = _impl.render
rendered_size = _impl.rendered_size
render_file = _impl.render_file
