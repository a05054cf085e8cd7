"""Byte-addressed text views of a partition: ``messages`` and ``records.jsonl``.

A view renders every record of a log as one line and shows the concatenation as a file.
To read at any byte position without rendering the whole log, a :class:`LineView` keeps
sparse *marks* — (view position, batch offset, segment base offset, file position) — at the
first batch of every segment and then about every ``MARK_BYTES`` of output, much like Kafka's
sparse offset index. A read renders from the mark at or before the position. Marks are
*measured* from the log start on: all at once by :meth:`LineView.refresh`, or only as far
as a read needs by :meth:`LineView.read`, so the first bytes of a large partition's view
come before the rest is measured (the size is known once the marks reach the log end; the
fs layer shows an unmeasured view's size as 0, as /proc does, and streams it). They are
extended as the log grows; when retention removes the oldest segments the view drops the
marks before the new log start and shifts (the file shrinks from the front, as
``messages`` then starts at the new log start offset).

Damage (docs/design.md §5): a view ends where the first damaged batch begins. Everything before it
is shown, :attr:`LineView.damage` holds the error, and a read at the view's end raises it
(the fs layer answers EIO there), so ``cat`` delivers every intact line and then fails. The
damage is reported once (``on_damage``), and the view stops growing until retention or a
truncation moves its start.

Thread safety: every public method takes the view's lock; the fs layer calls them from
worker threads.
"""

from __future__ import annotations

import base64
import bisect
import json
import os
import struct
import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable

from ..log.isolation import AbortedFilter
from ..log.log import Log
from ..log.segment import READ_CHUNK
from ..record import control, fast, jsonl, plain
from ..record.batch import (
    BATCH_OVERHEAD,
    LAST_OFFSET_DELTA_OFFSET,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_NAMES,
    RecordBatch,
    batch_values,
)
from ..record.errors import CorruptRecordError

MARK_BYTES = 256 * 1024
LOCK_WAIT_S = 0.01
DEFAULT_CACHE_BYTES = 64 * 1024 * 1024


class ChunkCache:
    """Rendered chunks of every :class:`LineView`, least recently used first out, under one
    budget of ``max_bytes`` (the views' text is rendered again when needed): however many
    partitions are read, and however many readers follow them, the daemon keeps at most
    this much rendered text. Thread-safe. Keys are :meth:`LineView._chunk_key`'s ``(view,
    epoch of its marks, chunk index, offset the chunk stops before)``; a view's entries go
    with :meth:`drop` (its partition gone) or age out."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES):
        self.max_bytes = max_bytes
        self.bytes = 0
        self._lock = threading.Lock()
        self._chunks: OrderedDict[tuple, bytes] = OrderedDict()

    def get(self, key: tuple) -> bytes | None:
        with self._lock:
            data = self._chunks.get(key)
            if data is not None:
                self._chunks.move_to_end(key)
            return data

    def __contains__(self, key: tuple) -> bool:
        return key in self._chunks

    def put(self, key: tuple, data: bytes) -> None:
        """Keep ``data`` (not when it alone is over a quarter of the budget: a reader of a
        huge chunk renders it again rather than flush everyone else's)."""
        if len(data) > self.max_bytes // 4:
            return
        with self._lock:
            old = self._chunks.pop(key, None)
            if old is not None:
                self.bytes -= len(old)
            self._chunks[key] = data
            self.bytes += len(data)
            while self.bytes > self.max_bytes and self._chunks:
                _key, gone = self._chunks.popitem(last=False)
                self.bytes -= len(gone)

    def drop(self, view) -> None:
        """Forget every chunk of ``view``."""
        with self._lock:
            for key in [k for k in self._chunks if k[0] is view]:
                self.bytes -= len(self._chunks.pop(key))


_DEFAULT_CACHE = ChunkCache()


# -- renderers: RecordBatch -> bytes (every line of the batch) ---------------------------

def render_messages(batch: RecordBatch, start: int | None = None) -> bytes:
    """kafka-console-consumer's default output: each value, ``null`` for a null value, one
    per line; only the records at or after offset ``start`` when given (a log start offset
    inside the batch). Control batches render as nothing. Raises CorruptRecordError."""
    if batch.is_control:
        return b""
    if start is not None and batch.base_offset < start:
        return b"".join((b"null" if r.value is None else r.value) + b"\n"
                        for r in batch.records() if r.offset >= start)
    if batch.magic < 2:  # legacy message set: a handful of messages, no fast path needed
        return b"".join((b"null" if v is None else v) + b"\n" for v in batch_values(batch))
    try:
        payload, exact = batch.payload()
        return fast.render_values(payload, batch.records_count, exact=exact)
    except CorruptRecordError as exc:
        raise _located(exc, batch) from None


def measure_messages(batch: RecordBatch) -> int:
    """Length of :func:`render_messages` of ``batch`` without building it."""
    if batch.is_control:
        return 0
    if batch.magic < 2:
        return len(render_messages(batch))
    try:
        payload, exact = batch.payload()
        return fast.rendered_size(payload, batch.records_count, exact=exact)
    except CorruptRecordError as exc:
        raise _located(exc, batch) from None


def _control_json(batch: RecordBatch, ts_type: str, start: int | None = None) -> list[str]:
    """Control records as flagged objects: ``offset``, ``timestamp``, ``timestamp_type``,
    ``control`` (Kafka's ControlRecordType name: COMMIT, ABORT, LEADER_CHANGE, ...), and
    ``coordinator_epoch`` for transaction markers."""
    out = []
    for r in batch.records():
        if start is not None and r.offset < start:
            continue
        obj = {"offset": r.offset, "timestamp": r.timestamp, "timestamp_type": ts_type}
        _version, type_id = control.parse_control_key(r.key)
        obj["control"] = control.control_type_name(type_id)
        if type_id in (control.ABORT, control.COMMIT):
            obj["coordinator_epoch"] = control.end_txn_marker(r.key, r.value).coordinator_epoch
        out.append(json.dumps(obj, separators=(",", ":")))
    return out


def render_jsonl(batch: RecordBatch, start: int | None = None) -> bytes:
    """One JSON object per record: ``offset``, ``timestamp`` (ms), ``timestamp_type``,
    ``key``, ``value``, ``headers`` (list of ``{"key", "value"}``); bytes that are not UTF-8
    appear as ``{"base64": "..."}`` (:mod:`kafkafs.record.jsonl`: in C for a v2 batch,
    compressed or not). Control records (transaction markers, KRaft records) appear flagged
    with ``control`` instead of key, value and headers. Only the records at or after offset
    ``start`` when given. Raises CorruptRecordError naming the batch's file and position."""
    ts_type = TIMESTAMP_TYPE_NAMES[batch.timestamp_type]
    if batch.is_control:
        out = _control_json(batch, ts_type, start)
        return ("\n".join(out) + "\n").encode() if out else b""
    if batch.magic < 2:  # a legacy message set: a handful of messages
        return jsonl.record_lines(batch.records(), ts_type, start)
    try:
        payload, exact = batch.payload()
        return jsonl.render(payload, batch.records_count, batch.base_offset,
                            batch.base_timestamp, _fixed_timestamp(batch), start, exact=exact)
    except CorruptRecordError as exc:
        raise _located(exc, batch) from None


def measure_jsonl(batch: RecordBatch) -> int:
    """``len(render_jsonl(batch))``, without building the lines of a v2 data batch."""
    if batch.is_control or batch.magic < 2:
        return len(render_jsonl(batch))
    try:
        payload, exact = batch.payload()
        return jsonl.rendered_size(payload, batch.records_count, batch.base_offset,
                                   batch.base_timestamp, _fixed_timestamp(batch), exact=exact)
    except CorruptRecordError as exc:
        raise _located(exc, batch) from None


def _fixed_timestamp(batch: RecordBatch) -> int | None:
    """Every record's timestamp in a LogAppendTime batch (its max timestamp), else None."""
    return batch.max_timestamp if batch.timestamp_type == LOG_APPEND_TIME else None


#: ``render_run`` of the ``records.jsonl`` view: the lines of a run of plain batches
#: rendered straight from the segment file in one native pass (``render_jsonl``'s bytes)
render_jsonl_run = jsonl.render_file


def _located(exc: CorruptRecordError, batch: RecordBatch) -> CorruptRecordError:
    """``exc`` naming the file and position of ``batch`` (the walker set them) where it
    names none: the damage line and the EIO must say where (docs/design.md §5.1)."""
    if exc.path is not None and exc.position is not None:
        return exc
    return exc.located(path=batch.path, position=batch.position)


_HEADER_OFFSETS = struct.Struct(">qi")  # baseOffset, batchLength
_LAST_OFFSET_DELTA = struct.Struct(">i")


def _offsets_follow(buf: bytes, first: int, end: int) -> bool:
    """Whether ``buf`` is whole batches whose offsets run from ``first`` to just before
    ``end`` with no gap or overlap (headers only: the run renderer checks the rest)."""
    pos, expected = 0, first
    while pos < len(buf):
        if len(buf) - pos < BATCH_OVERHEAD:
            return False
        base, length = _HEADER_OFFSETS.unpack_from(buf, pos)
        delta = _LAST_OFFSET_DELTA.unpack_from(buf, pos + LAST_OFFSET_DELTA_OFFSET)[0]
        if base != expected or delta < 0 or length < BATCH_OVERHEAD - LOG_OVERHEAD:
            return False
        expected = base + delta + 1
        pos += length + LOG_OVERHEAD
    return pos == len(buf) and expected == end


def _is_plain(batch) -> bool:
    """Whether ``render_file_values`` takes the batch (bar its CRC and records)."""
    return batch.magic >= 2 and not batch.attributes & plain.NOT_PLAIN


class LineView:
    """A growing text file rendered from ``log`` one batch at a time.

    ``render(batch) -> bytes`` gives the batch's lines; ``measure(batch) -> int`` their
    length (defaults to ``len(render(batch))``). ``size`` is in bytes. ``generation`` grows
    whenever bytes already shown change (retention, rebuild), so the fs layer can drop the
    kernel's cached pages.

    ``committed`` (Kafka's ``isolation.level=read_committed``): the view ends at the log's
    last stable offset and batches of aborted transactions render as nothing, so what it
    shows only ever grows at the end. Otherwise (read_uncommitted) it ends at the log end
    offset and shows every data batch.

    ``render_run(fd, position, length, stop_offset) -> (bytes, next_position, stopped)``
    (optional) renders a run of batches straight from a segment file as ``render`` would,
    and stops at the first batch it does not take, which ``render`` then gets:
    :func:`kafkafs.record.plain.render_file_values` for ``messages`` (plain batches in one
    native pass). Aborted transactions stay hidden: it never takes a transactional batch.

    ``damage``: the CorruptRecordError where the view stops (None while the log is intact);
    ``on_damage(error)`` is called once when it is found. ``cache``: the
    :class:`ChunkCache` its rendered chunks are kept in (default: one for the process).
    """

    def __init__(self, log: Log, render: Callable[[RecordBatch], bytes],
                 measure: Callable[[RecordBatch], int] | None = None, committed: bool = False,
                 render_run: Callable | None = None,
                 on_damage: Callable[[CorruptRecordError], None] | None = None,
                 cache: ChunkCache | None = None):
        self.log = log
        self.chunks = _DEFAULT_CACHE if cache is None else cache
        self.on_damage = on_damage
        self.committed = committed
        self._render = render
        self._measure = measure or (lambda b: len(render(b)))
        self._render_run = render_run
        self.lock = threading.RLock()
        self.generation = 0
        self.ever_sized = False  # the marks reached the log end once (kept across resets)
        self._reset()

    def _reset(self) -> None:
        self._pos = array("q")
        self._offset = array("q")
        self._seg = array("q")
        self._filepos = array("q")
        self.size = 0
        self._since_mark = 0
        self._last_seg = None
        self.start_offset = None  # log start offset the view begins at
        self._aborted: dict[tuple[int, int], object] = {}  # (pid, first) -> AbortedTxn
        self._filter = None  # AbortedFilter over self._aborted (committed views)
        self._learned: list[tuple[int, int]] = []  # offset ranges _aborted covers
        self.end_offset = None  # next offset not yet in the view
        self._end_filepos = None  # where the last batch in the view ends in _last_seg
        self.damage: CorruptRecordError | None = None
        self._epoch = getattr(self, "_epoch", -1) + 1  # chunk keys of earlier marks are void

    # -- building --------------------------------------------------------------------
    def _visible_end(self) -> int:
        """The offset the view ends before: last stable or log end offset."""
        return self.log.last_stable_offset if self.committed else self.log.log_end_offset

    def _hidden(self, batch: RecordBatch) -> bool:
        """Whether ``batch`` belongs to an aborted transaction (committed views). The
        aborted transactions are learned when the first transactional batch of a range not
        learned yet is met, from it to the visible end: a log without transactions never
        asks (finding them may scan the segments' control batches), and a stream's first
        read asks for no more than it reads."""
        if not (self.committed and batch.is_transactional):
            return False
        base = batch.base_offset
        if not any(start <= base < end for start, end in self._learned):
            end = max(self._visible_end(), self.end_offset or 0, base + 1)
            self._learn_aborted(base, end)
            self._learned.append((base, end))
        return self._filter is not None and self._filter.is_aborted(batch)

    def _straddles_start(self, batch: RecordBatch) -> bool:
        """Whether the log start offset lies inside ``batch`` (Kafka's DeleteRecords, a
        checkpointed log start): its records below it are not shown."""
        return self.start_offset is not None and batch.base_offset < self.start_offset

    def render(self, batch: RecordBatch) -> bytes:
        """The batch's lines as this view shows them (nothing for an aborted batch, no
        record below the log start offset). Raises CorruptRecordError naming the batch's
        segment file and position, whatever the renderer named."""
        if self._hidden(batch):
            return b""
        try:
            if self._straddles_start(batch):
                return self._render(batch, self.start_offset)
            return self._render(batch)
        except CorruptRecordError as exc:
            raise _located(exc, batch) from None

    def measure(self, batch: RecordBatch) -> int:
        """``len(self.render(batch))``, without building it when the renderer can; raises
        as :meth:`render`."""
        if self._hidden(batch):
            return 0
        if self._straddles_start(batch):
            return len(self.render(batch))
        try:
            return self._measure(batch)
        except CorruptRecordError as exc:
            raise _located(exc, batch) from None

    def _learn_aborted(self, start: int, end: int) -> None:
        """Add the aborted transactions overlapping [start, end) to the view's filter."""
        if not self.committed or end <= start:
            return
        new = [t for t in self.log.aborted_txns(start, end)
               if (t.producer_id, t.first_offset) not in self._aborted]
        if new:
            for t in new:
                self._aborted[(t.producer_id, t.first_offset)] = t
            self._filter = AbortedFilter(list(self._aborted.values()))

    def is_current(self) -> bool:
        """Whether the view already covers the log exactly, or as far as its damage lets it
        (``size`` is then right); cheap enough for every getattr."""
        lg = self.log
        return (self.end_offset is not None and lg.log_start_offset == self.start_offset
                and (self.damage is not None or self._visible_end() == self.end_offset))

    def unmeasured_bytes(self) -> int:
        """Log bytes (segment file bytes) between where the marks end and the log end: the
        work a :meth:`refresh` still has to do (an estimate when segments change meanwhile;
        0 once the view is current)."""
        if self.is_current():
            return 0
        segs = self.log.segments()
        if self.end_offset is None or self._last_seg is None:
            return sum(seg.size for seg in segs)
        done = self._end_filepos or 0
        return sum(seg.size - (done if seg.base_offset == self._last_seg else 0)
                   for seg in segs if seg.base_offset >= self._last_seg)

    def refresh(self) -> int:
        """Bring the view up to the log's current end; returns ``size``. The first call
        scans the whole log (run it off the event loop)."""
        with self.lock:
            self._measure_to(None)
            return self.size

    def measure_step(self, max_bytes: int) -> bool:
        """Measure about ``max_bytes`` more of the view (a background measurer's step, off
        the event loop); returns whether the view is current now."""
        with self.lock:
            self._measure_to(self.size + max_bytes)
            return self.is_current()

    def _measure_to(self, position: int | None) -> None:
        """Extend the marks towards the log's current end: all the way, or (``position``)
        until the view is at least that many bytes long. Damage met ends the view there
        (:attr:`damage`). Call with the lock held."""
        lg = self.log
        start = lg.log_start_offset
        first = self.start_offset is None
        if first:
            self.start_offset = start
            self.end_offset = start
        elif start != self.start_offset:
            self._drop_before(start)
        if lg.log_end_offset < (self.end_offset or 0):  # truncated under us
            self._reset()
            self.generation += 1
            self.start_offset = self.end_offset = start
        end = self._visible_end()
        # the first refresh looks even at an empty log: damage at its very start kept
        # the log end offset from moving past it
        if (end > self.end_offset or first) and self.damage is None:
            try:
                self._extend(end, position)
            except CorruptRecordError as exc:
                self.damage = exc
                if self.on_damage is not None:
                    self.on_damage(exc)
        if not self.ever_sized and self.is_current():
            self.ever_sized = True

    # -- persistence (a remount skips the first scan) ------------------------------------
    def export_state(self) -> dict | None:
        """The marks and the identity (inode, size, mtime) of every segment they cover, for
        :meth:`import_state` in a later process; None when there is nothing to keep."""
        with self.lock:
            if self.end_offset is None or not len(self._pos):
                return None
            segments = {}
            for base in sorted(set(self._seg)):
                seg = self.log.segment_at(base)
                if seg is None:
                    return None
                st = seg.pdir.lstat(os.path.basename(seg.log_path))  # never through a link
                segments[str(base)] = [st.st_ino, st.st_size, st.st_mtime_ns]
            return {"version": 1, "committed": self.committed,
                    "start_offset": self.start_offset,
                    "end_offset": self.end_offset, "size": self.size,
                    "marks": [base64.b64encode(a.tobytes()).decode() for a in
                              (self._pos, self._offset, self._seg, self._filepos)],
                    "segments": segments}

    def import_state(self, state: dict) -> bool:
        """Adopt marks exported earlier, as far as the segments they cover are unchanged
        (same inode, size and mtime); the rest is rebuilt by :meth:`refresh`. Returns
        whether anything was adopted."""
        try:
            if state.get("version") != 1 or state["start_offset"] != self.log.log_start_offset \
                    or state.get("committed", False) != self.committed:
                return False
            arrays = []
            for text in state["marks"]:
                a = array("q")
                a.frombytes(base64.b64decode(text))
                arrays.append(a)
            pos, offset, seg, filepos = arrays
            if not len(pos) == len(offset) == len(seg) == len(filepos):
                return False
            keep = len(pos)  # marks kept: those before the first changed segment
            for base in sorted({int(b) for b in state["segments"]}):
                live = self.log.segment_at(base)
                try:
                    st = live.pdir.lstat(os.path.basename(live.log_path)) \
                        if live is not None else None
                except OSError:
                    st = None
                if st is None or [st.st_ino, st.st_size, st.st_mtime_ns] != \
                        state["segments"][str(base)]:
                    keep = bisect.bisect_left(seg, base)
                    break
        except (KeyError, ValueError, TypeError):
            return False
        if keep == 0:
            return False
        with self.lock:
            self._reset()
            self._pos, self._offset = pos[:keep], offset[:keep]
            self._seg, self._filepos = seg[:keep], filepos[:keep]
            self.start_offset = state["start_offset"]
            if keep == len(pos):
                self.end_offset, self.size = state["end_offset"], state["size"]
            else:
                # a segment starts with a mark, so the kept chunks end where the changed
                # segment begins: rebuild from its base offset
                self.end_offset, self.size = seg[keep], pos[keep]
            self._last_seg = self._seg[-1]
            self._since_mark = self.size - self._pos[-1]
            self.ever_sized = True  # positions are known from the start on
        return True

    def _extend(self, end: int, until: int | None = None) -> None:
        """Measure the batches from :attr:`end_offset` up to offset ``end``, or (``until``)
        only until the view is that many bytes long (then one mark further, so that a
        reader streaming the view measures a chunk per mark, not per batch)."""
        if self._extend_tail(end):
            return
        stop_at = None if until is None else until + MARK_BYTES
        for seg, batch in self.log.segment_batches(self.end_offset):
            if batch.last_offset < self.end_offset:
                continue
            if batch.base_offset >= end or (stop_at is not None and self.size >= stop_at):
                break
            if seg.base_offset != self._last_seg or self._since_mark >= MARK_BYTES:
                self._pos.append(self.size)
                self._offset.append(batch.base_offset)
                self._seg.append(seg.base_offset)
                self._filepos.append(batch.position)
                self._since_mark = 0
                self._last_seg = seg.base_offset
            n = self.measure(batch)
            self.size += n
            self._since_mark += n
            self.end_offset = batch.next_offset
            self._end_filepos = batch.position + batch.size

    def _extend_tail(self, end: int) -> bool:
        """The tail of a growing log in one native pass: when the view ends at a batch
        boundary of the active segment and what follows, up to the log end (``end``, taken
        with the segment's size: :meth:`Log.end_position`), is at most ``MARK_BYTES`` of
        plain batches whose offsets follow each other exactly, measure it with the run
        renderer (the GIL released) instead of a :class:`RecordBatch` per batch. A steady
        trickle of small batches (a producer with ``linger.ms=0``) otherwise costs the
        background measurer ~40 us of Python per batch, which the event loop's thread
        waits for. Returns False, having changed nothing, whenever anything else is met
        (the general path then decides, damage included)."""
        run = self._render_run
        if run is None or self.end_offset is None:
            return False
        leo, base, size = self.log.end_position()
        if self._last_seg is None:  # nothing measured yet: from the segment's start
            if self.size or self.end_offset != base:
                return False
            start = 0
        elif base == self._last_seg and self._end_filepos is not None:
            start = self._end_filepos
        else:
            return False
        if end != leo or not 0 < size - start <= MARK_BYTES:
            return False
        seg = self.log.segment_at(base)
        if seg is None:
            return False
        try:
            with seg.reader() as fd:
                if not _offsets_follow(os.pread(fd, size - start, start), self.end_offset,
                                       leo):
                    return False
                data, pos, stopped = run(fd, start, size - start, leo)
        except (OSError, ValueError):
            return False
        if stopped or pos != size:
            return False
        if self._last_seg is None or self._since_mark >= MARK_BYTES:
            self._pos.append(self.size)
            self._offset.append(self.end_offset)
            self._seg.append(base)
            self._filepos.append(start)
            self._since_mark = 0
            self._last_seg = base
        self.size += len(data)
        self._since_mark += len(data)
        self.end_offset = leo
        self._end_filepos = size
        return True

    def _drop_before(self, new_start: int) -> None:
        """The log start moved (retention): keep marks of segments at or after it."""
        first_seg = self.log.segments()[0].base_offset
        j = bisect.bisect_left(self._seg, first_seg)
        self.generation += 1
        if j >= len(self._seg) or new_start > first_seg:
            # not on a mark boundary (or nothing left): rebuild from scratch
            self._reset()
            self.start_offset = self.end_offset = new_start
            return
        shift = self._pos[j]
        self._pos = array("q", (p - shift for p in self._pos[j:]))
        self._offset = self._offset[j:]
        self._seg = self._seg[j:]
        self._filepos = self._filepos[j:]
        self.size -= shift
        self.start_offset = new_start
        self._epoch += 1  # chunk numbers moved: the cached chunks are void

    # -- reading ---------------------------------------------------------------------
    def _chunk_log_bytes(self, i: int) -> int | None:
        """Log bytes behind chunk ``i`` (None when it ends at the end of a segment)."""
        if i + 1 < len(self._pos) and self._seg[i + 1] == self._seg[i]:
            return self._filepos[i + 1] - self._filepos[i]
        return None

    def _chunk_key(self, i: int) -> tuple:
        """Cache key of chunk ``i``: the view, its marks' epoch, the chunk's index and the
        offset it stops before (the last chunk's end moves as the log grows)."""
        return (self, self._epoch, i,
                self.end_offset if i + 1 >= len(self._pos) else self._offset[i + 1])

    def _render_chunk(self, seg_base: int, filepos: int, stop: int, known: int | None) -> bytes:
        """Render the batches of segment ``seg_base`` from ``filepos`` up to offset
        ``stop``; ``known`` is the chunk's length in log bytes when known (one pread then)."""
        seg = self.log.segment_at(seg_base)
        if seg is None:
            return b""
        end = filepos + known if known is not None else seg.size
        if known is None and seg_base == self._last_seg and self._end_filepos is not None:
            end = min(end, self._end_filepos)  # what was measured: never past the damage
        window = max(known or 0, READ_CHUNK)
        run = self._render_run
        parts = []
        pos = filepos
        if run is not None and (seg_base, filepos) == (self._seg[0], self._filepos[0]) and \
                self._offset[0] < self.start_offset:
            # the first batch holds records below the log start offset: render_run would
            # show them, render() leaves them out
            for batch in seg.batches(pos, end, validate=True, chunk_size=window):
                parts.append(self.render(batch))
                pos = batch.position + batch.size
                break
        while pos < end:
            if run is not None:
                with seg.reader() as fd:  # a lease: the descriptor stays ours meanwhile
                    data, pos, stopped = run(fd, pos, min(end - pos, window), stop)
                if data:
                    parts.append(data)
                if stopped or pos >= end:
                    break
            # the general path: every batch, or from the one render_run stopped at until
            # the next plain batch (render_run takes over again there)
            first = True
            for batch in seg.batches(pos, end, validate=True, chunk_size=window):
                if run is not None and not first and _is_plain(batch):
                    pos = batch.position
                    break
                first = False
                if batch.base_offset >= stop:
                    return b"".join(parts)
                parts.append(self.render(batch))
                pos = batch.position + batch.size
            else:
                break  # the end of the bytes, a torn or a zero tail
        return b"".join(parts)

    def _chunk(self, i: int, render: bool | int = True) -> bytes | None:
        """The rendered bytes from mark ``i`` to mark ``i + 1`` (cached). ``render``: True
        renders when not cached; False never does (None then); an int renders only chunks
        of at most that many log bytes."""
        key = self._chunk_key(i)
        data = self.chunks.get(key)
        if data is not None:
            return data
        known = self._chunk_log_bytes(i)
        if render is False or (render is not True and (known is None or known > render)):
            return None
        data = self._render_chunk(self._seg[i], self._filepos[i], key[-1], known)
        self.chunks.put(key, data)
        return data

    def read(self, off: int, size: int, render: bool | int = True,
             zero_copy: bool = False) -> bytes | memoryview | None:
        """Up to ``size`` bytes at view position ``off`` (short or empty at the end); with
        ``zero_copy`` a read inside one chunk is a memoryview of the cached chunk (FUSE
        copies it to the kernel straight from there).

        ``render=True`` renders whatever is needed. ``False`` (or an int: render only chunks
        of at most that many log bytes) waits at most ``LOCK_WAIT_S`` for the lock and does
        no unbounded work: it returns None instead, and the caller retries with ``True`` in
        a worker thread."""
        if render is True:
            self.lock.acquire()
        elif not self.lock.acquire(timeout=LOCK_WAIT_S):
            return None
        try:
            if size <= 0:
                return b""
            if off + size > self.size and not self.is_current():
                # not measured that far yet (a stream from an unmeasured view): measure as
                # far as this read needs, a bounded caller only a little way
                if render is not True and off + size + MARK_BYTES - self.size > int(render):
                    return None
                self._measure_to(off + size)
            if off >= self.size:
                if self.damage is not None:
                    raise self.damage
                return b""
            i = bisect.bisect_right(self._pos, off) - 1
            out = []
            need = min(size, self.size - off)
            while need > 0 and i < len(self._pos):
                chunk = self._chunk(i, render)
                if chunk is None:
                    return None
                start = off - self._pos[i]
                piece = memoryview(chunk)[start:start + need]
                if not piece:
                    if not chunk and start == 0:  # renders as nothing (all aborted, control)
                        i += 1
                        continue
                    break
                out.append(piece)
                need -= len(piece)
                off += len(piece)
                i += 1
            if len(out) == 1:
                return out[0] if zero_copy else out[0].tobytes()
            return b"".join(out)
        finally:
            self.lock.release()

    def cached(self, off: int) -> bool:
        """Whether the chunk holding view position ``off`` is rendered already (a hint)."""
        i = bisect.bisect_right(self._pos, off) - 1
        if i < 0 or off >= self.size:
            return True
        return self._chunk_key(i) in self.chunks
