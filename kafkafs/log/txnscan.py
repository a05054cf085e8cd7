"""Transaction index entries computed in memory, for segments whose ``.txnindex`` cannot be
trusted.

A ``read_committed`` reader learns the aborted transactions from the segments' ``.txnindex``
files (:meth:`Log.aborted_txns <kafkafs.log.log.Log.aborted_txns>`). A copy of a broker's
log dir may lack them (a broker killed before writing them, a backup of the ``.log`` files
only), and a file in a segment that Kafka's recovery would rebuild is not what a broker would
use. For those segments :class:`TxnScanner` computes the entries from the control batches,
as Kafka's recovery would write them (``LogLoader.recoverSegment`` -> ``LogSegment.recover``
-> ``updateProducerState`` -> ``ProducerAppendInfo.appendEndTxnMarker`` -> ``CompletedTxn``
-> ``TransactionIndex.append`` with ``ProducerStateManager.lastStableOffset``), and never
writes a byte.

When a segment's file is trusted (:func:`txn_index_trusted`), following what Kafka's
``LogLoader`` does with it:

* a segment this process created (its appends wrote the file) or recovered (the recovery
  rebuilt it): the file, and a missing file means no aborted transaction;
* otherwise the file must exist, beside the segment's ``.index`` and ``.timeindex`` (Kafka
  recovers a segment without its offset index, kafkafs one without either), and the segment
  must lie wholly below the recovery point a writable load would recover from
  (``recovery_point``: None when that load recovers nothing, after a clean shutdown, or
  when the log was loaded writable and its recovery already ran). A missing file is *not*
  trusted: Kafka takes it for an empty index, which is how aborted records reappear.

Cost: a segment is first scanned for ABORT markers (batch headers, and the one record of
each control batch). One without any has no entries and needs nothing else. One with an
ABORT needs the producer state at its base offset -- the newest of a producer snapshot in
``(log start offset, base]`` (read-only, as the loader reads it), a state this scanner kept
from an earlier segment, or an empty state at the log start offset -- brought up to the
base by replaying the batches in between
(:func:`~kafkafs.log.producer_replay.replay_producer_state`), then the segment's batches are
applied to it in order. The entries of a sealed segment are computed once; the last
segment's grow as it grows (the state at its scanned end is kept).
"""

from __future__ import annotations

import logging
import struct
import threading
from collections.abc import Iterable, Sequence

from ..record.batch import (
    BATCH_OVERHEAD,
    CONTROL_MASK,
    CURRENT_MAGIC,
    LOG_OVERHEAD,
    RecordBatch,
)
from ..record.control import ABORT, end_txn_marker
from ..record.errors import CorruptRecordError
from . import safeio
from .errors import LogError, report_damage
from .producer_replay import replay_producer_state
from .producer_state import ProducerStateEntry, ProducerStateManager
from .segment import READ_CHUNK, LogSegment
from .txnindex import AbortedTxn, TxnIndexSearchResult
from .walk import BatchOrder

__all__ = ["TxnScanner", "aborted_from_markers", "open_transactions", "txn_index_trusted"]

log = logging.getLogger(__name__)

#: producer states kept at segment boundaries (each: one entry per producer id)
MAX_KEPT_STATES = 8


def txn_index_trusted(seg: LogSegment, file_present: bool, next_base: int | None,
                      recovery_point: int | None) -> bool:
    """Whether the ``.txnindex`` of ``seg`` (``file_present``: it exists, and so do the
    segment's ``.index`` and ``.timeindex``) tells every aborted transaction of the segment
    (see the module). ``next_base``: the base offset of the segment after it, None for the
    last one; ``recovery_point``: where a writable load's recovery starts (Kafka's
    ``recoverLog`` recovers the segment holding it and every later one), None when it
    recovers nothing."""
    if seg.created or seg.last_recovery is not None:
        return True  # written by this process's appends, or rebuilt by its recovery
    if not file_present:
        return False
    if recovery_point is None:
        return True
    return next_base is not None and next_base <= recovery_point


class _Scanned:
    """What is known of one segment: scanned up to byte ``pos`` (a batch boundary), the
    offset the next batch must reach (``expected``), its ``entries``; ``pm``: the producer
    state at ``pos`` once an ABORT made it needed (kept while the segment may grow);
    ``open_first``: once the state is known, the first offset of the earliest transaction
    still ongoing at ``pos`` (None: none); ``final``: sealed and scanned to its end (or to
    damage)."""

    __slots__ = ("damaged", "entries", "expected", "final", "open_first", "pm", "pos",
                 "seg", "state_known")

    def __init__(self, seg: LogSegment):
        self.seg = seg
        self.pos = 0
        self.expected: int | None = None
        self.entries: list[AbortedTxn] = []
        self.pm: ProducerStateManager | None = None
        self.state_known = False
        self.open_first: int | None = None
        self.damaged = False
        self.final = False


class TxnScanner:
    """The computed transaction index entries of one partition's segments, cached per
    segment (Kafka has no such thing: its recovery writes them to ``.txnindex``).

    ``pdir``: the partition directory (producer snapshots are read from it, never written);
    ``log_name`` names the partition in log messages. Thread-safe: one lock serialises the
    computations (a second reader of the same segment waits for the first instead of
    scanning again); callers must not hold the log's lock meanwhile.

    The cache is keyed by segment object and checked against its size: a segment replaced
    (the cleaner's swap, a truncation that creates new segment objects) or shrunk is scanned
    anew, and one removed (retention) is forgotten at the next scan -- no hook to call.
    """

    def __init__(self, pdir: safeio.Dir, log_name: str = ""):
        self._pdir = pdir
        self._log_name = log_name
        self._lock = threading.Lock()
        self._scans: dict[int, _Scanned] = {}
        # offset -> the producer entries at that offset (a segment boundary)
        self._states: dict[int, tuple[ProducerStateEntry, ...]] = {}

    # -- public ---------------------------------------------------------------------------
    def collect(self, segments: Sequence[LogSegment], k: int, fetch_offset: int,
                upper_bound_offset: int, log_start_offset: int,
                log_end: tuple[int, int] | None = None) -> TxnIndexSearchResult:
        """What :meth:`TransactionIndex.collect_aborted
        <kafkafs.log.txnindex.TransactionIndex.collect_aborted>` would answer for
        ``segments[k]`` had Kafka's recovery written its ``.txnindex``: the entries with
        ``last_offset >= fetch_offset`` and ``first_offset < upper_bound_offset``, and
        ``is_complete`` when one's last stable offset reaches ``upper_bound_offset`` -- or,
        a shortcut Kafka's files cannot offer, when the producer state at the segment's end
        is known, that end is at or past ``upper_bound_offset`` and no transaction begun
        below it is still open there.

        ``segments``: the log's segments, oldest first (a snapshot; the last may grow
        between calls); ``log_end``: ``(log end offset, the last segment's size in bytes)``
        taken with the snapshot, under the log's lock: the last segment is scanned up to
        that size, and a batch there reaching the log end offset is damage, as for every
        reader (:class:`~kafkafs.log.walk.BatchOrder`'s ``end``); None: the size as it is
        now, no such rule. Raises OSError and ValueError when the segment is closed under
        the scan (retention); damage in the data ends the scan there, quietly (readers meet
        it themselves)."""
        scan = self._scanned(segments, k, log_start_offset, log_end)
        found = []
        for txn in scan.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(found, True)
        # the shortcut: the scan reached the bound, and nothing begun below it is open there
        # (a transaction begun later begins at or past the bound)
        complete = scan.state_known and not scan.damaged and \
            scan.expected is not None and scan.expected >= upper_bound_offset and \
            (scan.open_first is None or scan.open_first >= upper_bound_offset)
        return TxnIndexSearchResult(found, complete)

    # -- the cache ------------------------------------------------------------------------
    def _scanned(self, segments: Sequence[LogSegment], k: int, log_start_offset: int,
                 log_end: tuple[int, int] | None = None) -> _Scanned:
        seg = segments[k]
        sealed = k + 1 < len(segments)
        next_base = segments[k + 1].base_offset if sealed else None
        end = None if sealed or log_end is None else log_end[0]
        with self._lock:
            scan = self._scans.get(seg.base_offset)
            if scan is None or scan.seg is not seg or seg.size < scan.pos:
                if scan is not None:  # replaced or truncated: what follows it is stale too
                    self._drop_states_after(seg.base_offset)
                self._prune(segments)  # (and forget the segments retention removed)
                scan = self._scans[seg.base_offset] = _Scanned(seg)
            if scan.final:
                return scan
            size = seg.size if end is None else min(seg.size, log_end[1])
            if scan.pos < size and not scan.damaged:
                if scan.pm is None and self._find_abort(scan, size, next_base, end):
                    # an ABORT: the entries need the producer state; apply the segment from
                    # its first batch to the state at its base
                    scan.pm = self._state_at(segments, k, log_start_offset)
                    scan.pos, scan.expected, scan.entries = 0, None, []
                    scan.damaged = False
                if scan.pm is not None:
                    self._apply(scan, size, next_base, end)
            if scan.pm is not None:
                scan.state_known = True
                scan.open_first = scan.pm.first_undecided_offset()
            if sealed and (scan.pos >= size or scan.damaged):
                scan.final = True
                if scan.pm is not None and not scan.damaged:
                    self._keep_state(next_base, scan.pm)
                scan.pm = None
            return scan

    def _prune(self, segments: Sequence[LogSegment]) -> None:
        live = {s.base_offset: s for s in segments}
        for b in [b for b, s in self._scans.items() if live.get(b) is not s.seg]:
            del self._scans[b]

    def _drop_states_after(self, offset: int) -> None:
        for o in [o for o in self._states if o > offset]:
            del self._states[o]

    def _keep_state(self, offset: int, pm: ProducerStateManager) -> None:
        self._states[offset] = tuple(pm.producers.values())
        while len(self._states) > MAX_KEPT_STATES:
            del self._states[min(self._states)]

    # -- scanning -------------------------------------------------------------------------
    def _batches(self, scan: _Scanned, size: int, next_base: int | None,
                 end: int | None = None):
        """The segment's batches from ``scan.pos`` up to ``size``, their order checked as
        every reader's (the walker's :class:`~kafkafs.log.walk.BatchOrder`; ``end``: the
        log end offset, in the last segment); ``scan.pos`` and ``scan.expected`` move past
        each batch as it is yielded. Damage sets ``scan.damaged`` and ends the iteration."""
        seg = scan.seg
        order = BatchOrder(seg.base_offset, next_base, end, expected=scan.expected)
        try:
            for batch in seg.batches(scan.pos, size, order=order):
                scan.pos, scan.expected = batch.position + batch.size, batch.next_offset
                yield batch
        except CorruptRecordError as exc:
            report_damage(exc)  # once per place: the readers meet the same batch
            log.debug("%s: transaction markers are looked for up to damage at %s",
                      self._log_name, exc)
            scan.damaged = True

    def _find_abort(self, scan: _Scanned, size: int, next_base: int | None,
                    end: int | None = None) -> bool:
        """Scan on from ``scan.pos`` up to ``size`` for a control batch that may be an ABORT
        marker (one whose marker cannot be parsed counts: the producer state decides).
        Returns True when one is found.

        Most segments hold none, so this reads batch headers only (:func:`_quick_walk`):
        whatever that walk does not take -- a legacy entry, a batch larger than a read, the
        end of the data, damage -- goes one batch at a time through the readers' iterator
        (:meth:`_batches`), which frames, checks and reports it as every reader does."""
        while scan.pos < size and not scan.damaged:
            found = _quick_walk(scan, size, next_base, end)
            if found is not None:
                return found
            for batch in self._batches(scan, size, next_base, end):
                if batch.is_control and batch.producer_id >= 0 and _may_abort(batch):
                    return True
                break
            else:
                return False  # the end of the data (a torn tail), or damage
        return False

    def _apply(self, scan: _Scanned, size: int, next_base: int | None,
               end: int | None = None) -> None:
        """Apply the batches from ``scan.pos`` on to ``scan.pm`` (``LogSegment.recover``'s
        ``updateProducerState``), collecting each ABORT's entry. A batch the producer state
        refuses is logged and skipped, as in every read-only replay."""
        pm = scan.pm
        for batch in self._batches(scan, size, next_base, end):
            try:
                aborted = pm.update(batch)
            except (LogError, CorruptRecordError) as exc:
                log.warning("%s: producer state skips the batch at offset %d of %s: %s",
                            self._log_name, batch.base_offset, scan.seg.log_path, exc)
                pm.update_map_end_offset(batch.last_offset + 1)
                continue
            if aborted is not None:
                scan.entries.append(aborted)

    def _state_at(self, segments: Sequence[LogSegment], k: int,
                  log_start_offset: int) -> ProducerStateManager:
        """The producer state after every batch below ``segments[k]``'s base offset, in
        memory (what ``LogLoader.recoverSegment`` rebuilds with ``rebuildProducerState``):
        from the newest of a readable snapshot in ``(log_start_offset, base]``, a state kept
        here, or nothing at the log start offset, the batches in between replayed."""
        base = segments[k].base_offset
        pm = ProducerStateManager(self._pdir, writable=False)
        if base <= log_start_offset:
            pm.update_map_end_offset(base)
            return pm
        # a state kept here stands for the snapshot Kafka would have written at that offset:
        # like a snapshot, one at the log start offset itself is not used (truncateAndReload)
        kept = max((o for o in self._states if log_start_offset < o <= base), default=None)
        on_disk = [o for o in pm.snapshot_offsets() if log_start_offset < o <= base]
        if kept is None or (on_disk and on_disk[-1] > kept):
            # truncateAndReload: the newest readable snapshot in range (a corrupt one is
            # passed over, never deleted: the manager is read-only), else empty at the start
            pm.truncate_and_reload(log_start_offset, base)
        if kept is not None and kept > pm.map_end_offset:
            pm = ProducerStateManager(self._pdir, writable=False)
            for entry in self._states[kept]:
                pm.load_producer_entry(entry)
            pm.update_map_end_offset(kept)
        start = pm.map_end_offset
        if start < base:
            replay_producer_state(pm, segments[:k], start, base, strict=False,
                                  log_name=self._log_name)
        pm.update_map_end_offset(base)
        self._keep_state(base, pm)
        return pm


_V2_HEADER = struct.Struct(">qi4xb4xhi")  # base offset, length, magic, attributes, delta
_PRODUCER_ID = struct.Struct(">q")
_PRODUCER_ID_OFFSET = 43
_INT_MAX = 0x7FFFFFFF


def _quick_walk(scan: _Scanned, size: int, next_base: int | None,
                log_end: int | None = None) -> bool | None:
    """Walk the whole v2 batches from ``scan.pos`` by their headers alone, reading
    :data:`~kafkafs.log.segment.READ_CHUNK` bytes at a time, moving ``scan.pos`` and
    ``scan.expected`` past each; decode a control batch with a producer id only. Returns
    True at one that may be an ABORT (``scan.pos`` at it), False when the walk reached
    ``size``, None at a batch it leaves to the full iterator: anything but a whole v2 batch
    within one read whose offsets are in place (checked as
    :func:`~kafkafs.log.walk.offset_order_problem` does, ``log_end`` its ``end``)."""
    seg = scan.seg
    low = seg.base_offset
    while size - scan.pos >= BATCH_OVERHEAD:
        pos = scan.pos
        buf = seg.read_at(pos, min(READ_CHUNK, size - pos))
        n = len(buf)
        p = 0
        floor = low if scan.expected is None else scan.expected
        try:
            while n - p >= BATCH_OVERHEAD:
                base, length, magic, attributes, delta = _V2_HEADER.unpack_from(buf, p)
                end = p + length + LOG_OVERHEAD
                last = base + delta
                if magic != CURRENT_MAGIC or length < BATCH_OVERHEAD - LOG_OVERHEAD or \
                        end > n or delta < 0 or base < floor or last - low > _INT_MAX or \
                        (next_base is not None and last >= next_base) or \
                        (log_end is not None and last >= log_end):
                    break
                if attributes & CONTROL_MASK and \
                        _PRODUCER_ID.unpack_from(buf, p + _PRODUCER_ID_OFFSET)[0] >= 0 and \
                        _may_abort(RecordBatch.from_buffer(buf, p, pos + p)):
                    return True
                p, floor = end, last + 1
        finally:
            if p:
                scan.pos, scan.expected = pos + p, floor
        if p == 0 or p < n and n - p >= BATCH_OVERHEAD and end <= n:
            return None  # the batch at scan.pos is not for this walk
    return False if scan.pos >= size else None


def _may_abort(batch) -> bool:
    """Whether a control batch with a producer id may end a transaction with ABORT."""
    try:
        records = batch.record_tuples()
        if not records:
            return False  # emptied by the cleaner: it ends nothing
        _offset, _ts, key, value, _headers = records[0]
        return end_txn_marker(key, value).control_type == ABORT
    except CorruptRecordError:
        return True


# -- the consumer's view: from the markers, for files without a Log ----------------------------

def aborted_from_markers(batches: Iterable, start: int, end: int) -> list[AbortedTxn]:
    """The transactions with data in ``[start, end)`` that end with an ABORT marker, from
    ``batches`` (walked in offset order from the batch holding ``start``, across segments:
    :func:`~kafkafs.log.walk.walk_batches` over any byte source), read only until the marker
    of every transaction met below ``end`` is found: what Kafka's consumer learns from the
    ``abortedTransactions`` of a fetch, without ``.txnindex`` files or producer snapshots
    (the ``kafkalog`` source on a copy of a log dir that may lack them; a :class:`Log
    <kafkafs.log.log.Log>` answers from those, :meth:`~kafkafs.log.log.Log.aborted_txns`).
    Each is ``AbortedTxn(producer id, first data offset met, marker offset, -1)``. Raises
    what the walk raises (CorruptRecordError at damage met before the answer)."""
    pending: dict[int, int] = {}  # producer id -> first offset of its open transaction
    out = []
    for batch in batches:
        if batch.magic < 2 or not batch.is_transactional:
            if batch.base_offset >= end and not pending:
                return out
            continue
        pid = batch.producer_id
        if batch.is_control:
            first = pending.pop(pid, None)
            records = batch.record_tuples() if first is not None else ()
            if records and end_txn_marker(records[0][2], records[0][3]).control_type == ABORT:
                out.append(AbortedTxn(pid, first, batch.base_offset, -1))
        elif batch.last_offset >= start and batch.base_offset < end:
            pending.setdefault(pid, batch.base_offset)
        if batch.base_offset >= end and not pending:
            return out
    return out


def open_transactions(ongoing: dict[int, int], batches: Iterable, since: int) -> dict[int, int]:
    """``ongoing`` (producer id -> first offset of its open transaction, as a producer
    snapshot at ``since`` holds them: ``current_txn_first_offset``) brought past
    ``batches`` (walked in order from the batch holding ``since``): a transactional data
    batch opens its producer's transaction, a marker closes it. The earliest first offset
    left is the first undecided offset, where the last stable offset stands (Kafka's
    ``ProducerStateManager.firstUndecidedOffset`` without the sequence and epoch checks a
    :class:`~kafkafs.log.producer_state.ProducerStateManager` makes). Returns ``ongoing``."""
    for batch in batches:
        if batch.magic < 2 or not batch.is_transactional or batch.last_offset < since:
            continue
        if batch.is_control:
            ongoing.pop(batch.producer_id, None)
        else:
            ongoing.setdefault(batch.producer_id, batch.base_offset)
    return ongoing
