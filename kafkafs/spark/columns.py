"""Reading one :class:`~kafkafs.spark.plan.SegmentSlice` on an executor: a byte range of a
segment turned into ``pyarrow.RecordBatch`` es of Spark's Kafka schema.

The hot path builds no Python object per record: the segment is read in large chunks and
:class:`kafkafs.record.columnar.ColumnBuilder` walks the plain v2 batches in C, checking each
(CRC-32C, framing, offsets in order) and gathering offsets, timestamps, keys, values and
headers into Arrow buffers; :func:`to_record_batch` wraps those buffers with
``pyarrow.Array.from_buffers`` (key and value binary arrays from offsets + data buffers,
timestamps as ``timestamp[us, tz=UTC]``, partition and timestampType int32, topic a string
array) so that the batch matches ``to_arrow_schema`` of the source's schema exactly.

Every other batch goes through the general path of the record layer, one batch at a time:
compressed v2 batches are decompressed (:meth:`~kafkafs.record.batch.RecordBatch.payload`)
and their records section gathered by the same builder; legacy (v0/v1) entries are decoded
by :class:`~kafkafs.record.legacy.LegacyBatch` and re-encoded as a records section; control
batches are checked and skipped; under read_committed a transactional batch whose producer's
transaction was aborted (the slice's ``aborted`` list, :class:`~kafkafs.log.isolation.AbortedFilter`)
is skipped. Damage raises :class:`~kafkafs.record.errors.CorruptRecordError` naming the file
and position, after every intact record before it was delivered: a bad CRC, a bad size,
offsets that go back or leave the segment, zeros followed by data, an incomplete batch
inside the planned range.

Reading stops at the first batch whose base offset is at or past the slice's end offset, or
at the segment's size at planning: bytes appended later are never read, so a partition
being appended to reads as it was when the query was planned. A segment file that is gone
or was replaced since planning (retention; a cleaner's swap) is looked for again by offset
in the partition dir: the segment now holding the slice's start offset is read, by offset,
from its start; when none holds it the offsets are lost (:class:`~kafkafs.spark.plan.DataLossError`
under failOnDataLoss, else a warning and no rows).

A task reads its slices (:func:`read_slices`: the segments of one offset range of one
partition, in order) into one builder, so many small segments still make Arrow batches of
about ``BATCH_ROWS`` rows, and opens the partition dir once for all of them. A slice of a
partition that is not compacted and that is read to its segment's end must have met every
offset up to its end offset; offsets missing there are a missing segment
(:class:`~kafkafs.spark.plan.DataLossError` under failOnDataLoss, else a warning).

With the environment variable ``KAFKAFS_SPARK_READ_STATS`` naming a file, each slice read
appends one JSON line ``{"topic", "partition", "file", "rows", "bytes_read"}`` to it (what
``bench/bench_spark_read.py`` sums).
"""

from __future__ import annotations

import json
import logging
import os

from ..log import safeio
from ..log.bytesource import first_nonzero
from ..log.isolation import AbortedFilter
from ..log.txnindex import AbortedTxn
from ..log.walk import BatchOrder, walk_batches
from ..record import columnar, fast
from ..record.errors import CorruptRecordError
from .fileio import SegmentFile, is_uri, list_segments
from .views import scan_aborted

__all__ = ["arrow_schema", "read_slice", "read_slices", "to_record_batch"]

log = logging.getLogger(__name__)

CHUNK = 8 * 1024 * 1024  # bytes read at a time inside the planned range
PROBE = 4096  # bytes read first past the index's end hint (the next batch's header)
BATCH_ROWS = 8192  # rows per RecordBatch handed to Spark (its Arrow intake is fastest near this)
BATCH_BYTES = 4 * 1024 * 1024  # bytes of buffers per RecordBatch, at most about
HEADER_PEEK = 17
LOG_OVERHEAD = 12
STATS_ENV = "KAFKAFS_SPARK_READ_STATS"


def arrow_schema(include_headers: bool):
    """The Arrow schema Spark expects of the source (``to_arrow_schema`` of its schema)."""
    import pyarrow as pa

    fields = [pa.field("key", pa.binary()), pa.field("value", pa.binary()),
              pa.field("topic", pa.string()), pa.field("partition", pa.int32()),
              pa.field("offset", pa.int64()),
              pa.field("timestamp", pa.timestamp("us", tz="UTC")),
              pa.field("timestampType", pa.int32())]
    if include_headers:
        header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
        fields.append(pa.field("headers", pa.list_(pa.field("element", header))))
    return pa.schema(fields)


def to_record_batch(cols: dict, topic: str, partition: int, include_headers: bool):
    """A ``pyarrow.RecordBatch`` of Spark's Kafka schema from a builder's :meth:`finish`
    (:mod:`kafkafs.record.columnar`), the topic and partition repeated on every row."""
    import numpy as np
    import pyarrow as pa

    n = cols["rows"]
    buf = pa.py_buffer

    def validity(name, nulls):
        return buf(cols[name]) if nulls else None

    key = pa.Array.from_buffers(pa.binary(), n, [validity("key_validity", cols["key_nulls"]),
                                                 buf(cols["key_offsets"]),
                                                 buf(cols["key_data"])],
                                null_count=cols["key_nulls"])
    value = pa.Array.from_buffers(pa.binary(), n,
                                  [validity("value_validity", cols["value_nulls"]),
                                   buf(cols["value_offsets"]), buf(cols["value_data"])],
                                  null_count=cols["value_nulls"])
    name = topic.encode("utf-8")
    topic_col = pa.Array.from_buffers(
        pa.string(), n, [None, buf(np.arange(0, (n + 1) * len(name), len(name) or 1,
                                             dtype=np.int32)[:n + 1] if name
                                   else np.zeros(n + 1, dtype=np.int32)),
                         buf(name * n)], null_count=0)
    arrays = [key, value, topic_col,
              pa.Array.from_buffers(pa.int32(), n,
                                    [None, buf(np.full(n, partition, dtype=np.int32))],
                                    null_count=0),
              pa.Array.from_buffers(pa.int64(), n, [None, buf(cols["offset"])], null_count=0),
              pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), n,
                                    [None, buf(cols["timestamp"])], null_count=0),
              pa.Array.from_buffers(pa.int32(), n, [None, buf(cols["timestamp_type"])],
                                    null_count=0)]
    schema = arrow_schema(include_headers)
    if include_headers:
        m = cols["headers_count"]
        hkeys = pa.Array.from_buffers(pa.string(), m, [None, buf(cols["header_key_offsets"]),
                                                       buf(cols["header_key_data"])],
                                      null_count=0)
        hvalues = pa.Array.from_buffers(
            pa.binary(), m, [validity("header_value_validity", cols["header_value_nulls"]),
                             buf(cols["header_value_offsets"]), buf(cols["header_value_data"])],
            null_count=cols["header_value_nulls"])
        list_type = schema.field("headers").type
        structs = pa.StructArray.from_arrays([hkeys, hvalues], fields=list(list_type.value_type))
        arrays.append(pa.Array.from_buffers(list_type, n, [None, buf(cols["header_offsets"])],
                                            null_count=0, children=[structs]))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


# -- reading a slice ---------------------------------------------------------------------------

class _Window:
    """The bytes of a segment file read so far: ``buf[:len]`` holds the file's bytes
    ``[start, start + len)``. One bytearray, reused: a refill moves the unread tail to its
    front and reads after it (no copy of what is read)."""

    def __init__(self, f: SegmentFile, limit: int):
        self.f, self.limit = f, limit
        self.buf = bytearray(0)
        self.start = self.len = 0

    @property
    def stop(self) -> int:
        return self.start + self.len

    def fill(self, pos: int, want: int) -> int:
        """Make the window start at ``pos`` holding up to ``want`` bytes (never past the
        limit); returns the bytes it holds from ``pos``."""
        want = max(0, min(want, self.limit - pos))
        if self.start <= pos and pos + want <= self.stop:
            return self.stop - pos
        keep = self.stop - pos if self.start <= pos < self.stop else 0
        if len(self.buf) < want:
            self.buf = bytearray(max(want, min(2 * len(self.buf), CHUNK)))
            if keep:  # (the new buffer lost the tail: read it again)
                keep = 0
        elif keep:
            i = pos - self.start
            self.buf[:keep] = self.buf[i:i + keep]
        got = self.f.read_into(memoryview(self.buf)[keep:want], pos + keep)
        self.start, self.len = pos, keep + got
        return self.len


class _WindowSource:
    """The slice's file as the walker's byte source, read through the window (a batch the
    fast path stopped at is already in it) and ending at the planned size: bytes appended
    since planning are not the read's (docs/design.md §5.3)."""

    def __init__(self, win: _Window, f: SegmentFile):
        self.win, self.name = win, f.path
        self._file = f.source()

    def pread(self, pos: int, n: int) -> bytes:
        w = self.win
        got = w.fill(pos, n)
        i = pos - w.start
        return bytes(w.buf[i:i + min(n, got)])

    def size(self) -> int:
        return min(self._file.size(), self.win.limit)

    def first_data_at(self, pos: int) -> int | None:
        if self.win.f.identity is None:  # a pyarrow file: compare the planned range only
            return first_nonzero(self.win.f.read, pos, self.win.limit, CHUNK)
        data_at = self._file.first_data_at(pos)
        return None if data_at is None or data_at >= self.win.limit else data_at


class _SliceReader:
    """The state of one slice read (see the module)."""

    def __init__(self, sl, f: SegmentFile, start_position: int, end_hint: int,
                 end_position: int, builder=None):
        self.sl, self.f = sl, f
        self.pos, self.hint, self.limit = start_position, end_hint, end_position
        self.first_position = start_position
        self.win = _Window(f, end_position)
        # a builder shared by the slices of one task keeps its rows between them (Spark
        # takes fewer, larger Arrow batches); the caller finishes it
        self.shared = builder is not None
        self.builder = builder if builder is not None else \
            columnar.ColumnBuilder(headers=sl.include_headers)
        self.rows = 0  # rows this slice gave
        self.at_end = False  # the segment was read to its end (planned size or zero tail)
        self.expected = -1
        # read_committed: transactional batches go by the general path and the filter of
        # aborted transactions (looked up at the first one when the plan did not)
        self.filter = None
        if sl.read_committed and sl.aborted is not None:
            self.filter = AbortedFilter(AbortedTxn(pid, first, last, -1)
                                        for pid, first, last in sl.aborted)
        self.probe = PROBE
        self.source = _WindowSource(self.win, f)
        # the slice reads its segment to the end (the next segment's base offset, or the log
        # end offset in the last one): a batch past the end offset there is damage, not an
        # append since planning
        self.to_segment_end = sl.end_offset >= (sl.next_base if sl.next_base >= 0 else
                                                sl.log_end if sl.log_end >= 0 else 1 << 63)

    def _want(self) -> int:
        if self.pos < self.hint:
            return min(CHUNK, max(self.hint - self.pos, HEADER_PEEK))
        want, self.probe = self.probe, min(self.probe * 2, CHUNK)
        return want

    def batches(self):
        """Yield RecordBatches until the slice is read (with a shared builder, the rows
        left in it are the caller's to finish); then check for a missing segment."""
        b = self.builder
        rows_before, given = b.rows, 0
        for batch in self._batches():
            given += batch.num_rows
            yield batch
        self.rows = given + b.rows - rows_before
        self._check_continuity()

    def _check_continuity(self) -> None:
        """A slice of a partition that is not compacted, read to the end of its segment,
        must have met every offset up to its end offset: the segment ends where the next
        one starts. Offsets missing there are a missing segment (data loss)."""
        sl = self.sl
        if sl.compacted or not self.at_end:
            return
        got = max(self.expected, sl.start_offset)
        if got < sl.end_offset:
            from .plan import data_loss

            after = f"the next segment starts at offset {sl.next_base}" if sl.next_base >= 0 \
                else f"the log end offset was {sl.end_offset} when the query was planned"
            data_loss(sl.fail_on_data_loss,
                      f"Could not read records in offset [{got}, {sl.end_offset}) for topic "
                      f"partition {sl.topic}-{sl.partition}: {self.f.path} ends before offset "
                      f"{got} and {after}: a segment is missing from a partition that is "
                      "not compacted.")

    def _batches(self):
        b = self.builder
        while True:
            want = self._want()
            got = self.win.fill(self.pos, want)
            if got < HEADER_PEEK:
                if got < want and self.win.stop < self.limit:
                    self._shrunk()
                else:
                    self.at_end = True
                break  # the planned end: what is left is less than a header
            i = self.pos - self.win.start
            j, status, self.expected = b.add_batches(
                self.win.buf, i, self.win.len, self.sl.start_offset, self.sl.end_offset,
                self.expected, self.sl.base_offset,
                self.sl.next_base if self.sl.next_base >= 0 else self.sl.log_end,
                self.sl.read_committed and (self.filter is None or bool(self.filter)))
            self.pos = self.win.start + j
            if b.rows >= BATCH_ROWS or b.nbytes >= BATCH_BYTES:
                yield self._finish()
            try:
                if status == columnar.PAST:
                    if self.to_segment_end:
                        self._rest()  # raises at the batch
                    break
                if status in (columnar.OTHER, columnar.PARTIAL):
                    if not self._other():
                        break
                elif self.win.stop >= self.limit:  # END at the planned end
                    self.at_end = True
                    break
            except Exception:
                if b.rows:  # every intact record before the damage is delivered first
                    yield self._finish()
                raise
        if b.rows and not self.shared:
            yield self._finish()

    def _shrunk(self) -> None:
        from .plan import data_loss

        sl = self.sl
        data_loss(sl.fail_on_data_loss,
                  f"Could not read records in offset [{max(self.expected, sl.start_offset)}, "
                  f"{sl.end_offset}) for topic partition {sl.topic}-{sl.partition}: "
                  f"{self.f.path} holds {self.f.size()} bytes, {self.limit} when the query "
                  "was planned.")

    def _finish(self):
        return to_record_batch(self.builder.finish(), self.sl.topic, self.sl.partition,
                               self.sl.include_headers)

    def _order(self) -> BatchOrder:
        sl = self.sl
        return BatchOrder(sl.base_offset, sl.next_base if sl.next_base >= 0 else None,
                          sl.log_end if sl.log_end >= 0 else None,
                          self.expected if self.expected >= 0 else None)

    def _walk(self):
        """The one walker from ``pos`` to the planned end (docs/design.md §5.3): framing,
        CRC, zero and torn tails (an incomplete batch where a segment that is not the last
        must end is damage), offset order."""
        w, chunk = self.win, PROBE
        if w.start <= self.pos and w.stop - self.pos >= LOG_OVERHEAD:
            i = self.pos - w.start  # read the batch there exactly (it is in the window)
            chunk = max(int.from_bytes(w.buf[i + 8:i + 12], "big", signed=True) +
                        LOG_OVERHEAD, HEADER_PEEK)
        return walk_batches(self.source, self.pos, self.limit, validate=True,
                            strict_end=self.sl.next_base >= 0, chunk_size=chunk,
                            order=self._order())

    def _rest(self) -> None:
        """Walk what is left of a segment read to its end: its first batch lies at or past
        the end offset, which the walker's order rules name as damage."""
        for _batch in self._walk():
            pass

    def _other(self) -> bool:
        """Take the batch at ``pos`` through the walker; False when the read is over (the
        end of the data, or a batch at or past the end offset)."""
        batch = next(self._walk(), None)
        if batch is None:  # a zero tail or a torn write at the planned end
            self.at_end = True
            return False
        sl = self.sl
        if batch.base_offset >= sl.end_offset:  # (a legacy wrapper's first inner offset)
            return False
        if batch.last_offset >= sl.start_offset:
            if batch.is_control:
                batch.check_records()
            elif sl.read_committed and batch.is_transactional and \
                    self._aborted_filter().is_aborted(batch):
                pass
            else:
                self._gather(batch, self.pos - self.win.start)
        self.expected = batch.next_offset
        self.pos += batch.size
        return True

    def _aborted_filter(self) -> AbortedFilter:
        if self.filter is None:
            sl = self.sl
            segments = list_segments(sl.root, sl.dir_name)
            names = [n for _b, n in segments]
            k = names.index(sl.file_name) if sl.file_name in names else None
            found = [] if k is None else scan_aborted(
                sl.root, sl.dir_name, segments, k, self.first_position, sl.start_offset,
                sl.end_offset)
            self.filter = AbortedFilter(found)
        return self.filter

    def _gather(self, batch, i: int) -> None:
        sl, b = self.sl, self.builder
        if batch.magic < 2:
            records = [r for r in batch.record_tuples()
                       if sl.start_offset <= r[0] < sl.end_offset]
            if records:
                base, base_ts = records[0][0], records[0][1]
                payload = fast.encode([(r[1], r[2], r[3], ()) for r in records], base_ts,
                                      [r[0] - base for r in records])
                b.add_section(payload, len(records), base, base_ts, None,
                              batch.timestamp_type, sl.start_offset, sl.end_offset)
        elif batch.compression:
            payload, _exact = batch.payload()
            fixed = batch.max_timestamp if batch.timestamp_type == 1 else None
            try:
                b.add_section(payload, batch.records_count, batch.base_offset,
                              batch.base_timestamp, fixed, batch.timestamp_type,
                              sl.start_offset, sl.end_offset)
            except CorruptRecordError as exc:
                raise exc.located(path=self.f.path, position=batch.position) from None
        else:  # a plain transactional batch of a transaction not aborted
            _j, status, _e = b.add_batches(self.win.buf, i, i + batch.size, sl.start_offset,
                                           sl.end_offset, -1, sl.base_offset, -1, False)
            if status != columnar.END:
                batch.check_records()  # raises the record layer's located error
                raise self._error("the batch's records cannot be read")


def _relocate(sl):
    """``(file, base offset, size)`` of the segment holding ``sl.start_offset`` now (the
    planned file is gone or was replaced), to be read from its start; None when no segment
    holds it any more."""
    floor = [(b, n) for b, n in list_segments(sl.root, sl.dir_name) if b <= sl.start_offset]
    if not floor:
        return None
    try:
        f = SegmentFile(sl.root, sl.dir_name, floor[-1][1])
    except FileNotFoundError:
        return None
    return f, floor[-1][0], f.size()


def _report(sl, f: SegmentFile, rows: int, path: str | None) -> None:
    if not path:
        return
    line = json.dumps({"topic": sl.topic, "partition": sl.partition, "file": sl.file_name,
                       "rows": rows, "bytes_read": f.bytes_read}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def read_slice(sl):
    """Yield the ``pyarrow.RecordBatch`` es of the records of ``sl`` (a
    :class:`~kafkafs.spark.plan.SegmentSlice`) in offset order (see the module). Raises
    CorruptRecordError, DataLossError, OSError."""
    return read_slices([sl])


def read_slices(slices):
    """Yield the ``pyarrow.RecordBatch`` es of the records of ``slices`` (the
    :class:`~kafkafs.spark.plan.SegmentSlice` s of one task: one topic-partition, offset
    ranges in order), in offset order: one column builder for all of them, so small
    segments make batches of about ``BATCH_ROWS`` rows as large ones do. Raises
    CorruptRecordError, DataLossError, OSError."""
    if not slices:
        return
    first = slices[0]
    builder = columnar.ColumnBuilder(headers=first.include_headers)
    parent = None
    if len(slices) > 1 and not is_uri(first.root):
        try:
            parent = safeio.Dir.open(os.path.join(first.root, first.dir_name))
        except FileNotFoundError:
            parent = None  # (each slice finds its file gone)
    try:
        stats = os.environ.get(STATS_ENV)
        for sl in slices:
            yield from _read_one(sl, builder, parent, stats)
    finally:
        if parent is not None:
            parent.close()
    if builder.rows:
        yield to_record_batch(builder.finish(), first.topic, first.partition,
                              first.include_headers)


def _read_one(sl, builder, parent=None, stats=None):
    """The batches of one slice read into ``builder`` (see :func:`read_slices`); ``parent``:
    its partition dir, open (local log dirs); ``stats``: the file to report the read to
    (:data:`STATS_ENV`)."""
    from .plan import data_loss

    try:
        f = SegmentFile(sl.root, sl.dir_name, sl.file_name, parent)
    except FileNotFoundError:
        f = None
    start, hint, end = sl.start_position, sl.end_hint, sl.end_position
    if f is not None and sl.identity is not None and f.identity != sl.identity:
        f.close()
        f = None
    if f is None:
        found = _relocate(sl)
        if found is None:
            data_loss(sl.fail_on_data_loss,
                      f"Could not read records in offset [{sl.start_offset}, {sl.end_offset}) "
                      f"for topic partition {sl.topic}-{sl.partition}: the segment "
                      f"{sl.dir_name}/{sl.file_name} is gone since the query was planned.")
            return
        f, base, size = found
        log.info("Segment %s/%s changed since planning: reading offsets [%d, %d) from %s",
                 sl.dir_name, sl.file_name, sl.start_offset, sl.end_offset, f.path)
        sl = _with(sl, base_offset=base, file_name=f.name, next_base=-1)
        start, hint, end = 0, size, size
    reader = _SliceReader(sl, f, start, hint, end, builder)
    try:
        yield from reader.batches()
    finally:
        _report(sl, f, reader.rows, stats)
        f.close()


def _with(sl, **changes):
    import copy

    out = copy.copy(sl)
    for k, v in changes.items():
        setattr(out, k, v)
    return out
