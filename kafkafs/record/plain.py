"""Values of *plain* batches rendered straight from a segment file: the hot path of the
``messages`` view.

A plain batch is what a producer without transactions or compression writes: magic 2, no
codec, neither transactional nor control. For a run of them ``render_file_values`` reads
the file, checks each CRC-32C and renders every value (as
:func:`kafkafs.record.fast.render_values`) in one call. Its C version
(``_speedups.render_file_values``, built when Intel's ISA-L is installed for the CRC)
does all of it in one pass with the GIL released, rendering in place in the buffer it read
into (``bench/bench_speedups.py``: 4.7 GB/s against 3.5 GB/s for the Python twin, which
preads, checks the CRC with the crc32c package and calls the C ``render_values``). It
stops, without raising, before the first batch it does not take — any other kind, a bad
CRC or size, damaged records, a batch running past the bytes read, the zero tail of a
preallocated segment — and reports where: the caller's general path
(``LogSegment.batches`` + ``RecordBatch``) takes that batch and raises the located error
when it is corrupt. Both versions give identical results (``tests/test_plain.py``).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable

from crc32c import crc32c as _crc32c

from . import fast
from .batch import (
    ATTRIBUTES_OFFSET,
    BATCH_OVERHEAD,
    COMPRESSION_MASK,
    CONTROL_MASK,
    CRC_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    TRANSACTIONAL_MASK,
)
from .errors import CorruptRecordError

NOT_PLAIN = COMPRESSION_MASK | TRANSACTIONAL_MASK | CONTROL_MASK
MIN_RECORD_SIZE = 7  # the smallest record: 7 one-byte fields
_HEAD = struct.Struct(">qi")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_COUNT_OFFSET = 57


def _check_literals(null_literal, separator) -> None:
    if len(null_literal) + len(separator) > MIN_RECORD_SIZE or \
            len(separator) > MIN_RECORD_SIZE - 1:
        raise ValueError("null literal + separator must be <= 7 bytes, separator <= 6")


def check_window(position: int, length: int) -> None:
    """Raise ValueError unless ``position`` and ``length`` (of a file window) are >= 0."""
    if position < 0 or length < 0:
        raise ValueError("position and length must be >= 0")


def walk_plain_run(fd: int, position: int, length: int, stop_offset: int,
                   render: Callable[[memoryview, int], bytes]) -> tuple[bytes, int, bool]:
    """The Python side of a run over plain batches (the twins of the C file renderers):
    ``(rendered, next_position, stopped)`` for the plain batches in the ``length`` bytes of
    file ``fd`` at ``position`` (a batch start), each rendered by ``render(batch, count)``
    (``batch``: a memoryview of the whole batch, its CRC checked; ``count``: its
    recordsCount) which raises CorruptRecordError for damaged records: the run stops
    before that batch, as before any batch it does not take. ``stopped`` is True when it
    stopped at a batch whose base offset is >= ``stop_offset``. Raises OSError from the
    read."""
    buf = os.pread(fd, length, position)
    view = memoryview(buf)
    parts = []
    pos = 0
    stopped = False
    while len(buf) - pos >= BATCH_OVERHEAD:
        base_offset, batch_length = _HEAD.unpack_from(buf, pos)
        if base_offset >= stop_offset:
            stopped = True
            break
        size = batch_length + LOG_OVERHEAD
        if buf[pos + MAGIC_OFFSET] != 2 or size < BATCH_OVERHEAD or size > len(buf) - pos:
            break
        if _I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)[0] & NOT_PLAIN:
            break
        count = _I32.unpack_from(buf, pos + _COUNT_OFFSET)[0]
        if count < 0:
            break
        if _crc32c(view[pos + ATTRIBUTES_OFFSET:pos + size]) != \
                _U32.unpack_from(buf, pos + CRC_OFFSET)[0]:
            break
        try:
            parts.append(render(view[pos:pos + size], count))
        except CorruptRecordError:
            break
        pos += size
    return b"".join(parts), position + pos, stopped


def _py_render_file_values(fd: int, position: int, length: int, stop_offset: int,
                           null_literal: bytes = b"null",
                           separator: bytes = b"\n") -> tuple[bytes, int, bool]:
    """``(rendered, next_position, stopped)`` for the plain batches in the ``length`` bytes
    of file ``fd`` at ``position`` (a batch start); ``stopped`` is True when it stopped at a
    batch whose base offset is >= ``stop_offset``. Raises OSError from the read, ValueError
    for literals that could outgrow the input (null literal + separator over 7 bytes)."""
    check_window(position, length)
    null_literal, separator = bytes(null_literal), bytes(separator)
    _check_literals(null_literal, separator)
    return walk_plain_run(
        fd, position, length, stop_offset,
        lambda batch, count: fast.render_values(batch[BATCH_OVERHEAD:], count, null_literal,
                                                separator, exact=True))


try:
    from ._speedups import render_file_values as _c_render_file_values
except ImportError:  # not built, or built without ISA-L
    _c_render_file_values = None

#: whether the C version (the read, CRC and render with the GIL released) is in use
NATIVE: bool = _c_render_file_values is not None and fast.HAVE_C
render_file_values = _c_render_file_values if NATIVE else _py_render_file_values
