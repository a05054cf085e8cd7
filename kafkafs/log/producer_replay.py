"""Producer state from the log's batches: replay and rebuild (Kafka
``UnifiedLog.rebuildProducerState`` and ``loadProducersFromRecords``).

:func:`rebuild_producer_state` brings a
:class:`~kafkafs.log.producer_state.ProducerStateManager` to a given offset from its
snapshots and the segments after them (a log's load, a segment's recovery);
:func:`replay_producer_state` applies a run of segments' batches to one (a read-only log
following a writer, :mod:`kafkafs.log.txnscan` computing a segment's aborted transactions);
:func:`try_take_snapshot` writes a snapshot where failing to is no error. Used by
:mod:`kafkafs.log.log`, :mod:`kafkafs.log.loader` and :mod:`kafkafs.log.txnscan`; imports
none of them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ..record.batch import RecordBatch
from ..record.errors import CorruptRecordError
from .errors import LogError, report_damage
from .producer_state import ProducerStateManager
from .segment import LogSegment
from .walk import BatchOrder

log = logging.getLogger(__name__)


def replay_producer_state(pm: ProducerStateManager, segments: Sequence[LogSegment],
                          start_offset: int, end_offset: int, *, strict: bool = True,
                          log_name: str = "") -> int:
    """Apply to ``pm`` every batch of ``segments`` (oldest first) from the one holding
    ``start_offset`` up to, not including, the one holding ``end_offset``, without touching
    any transaction index (Kafka ``loadProducersFromRecords``: batches are read as they are,
    CRCs unchecked). Returns the number of batches applied.

    ``strict`` (loading): an error from the producer state propagates -- InvalidTxnStateError,
    CorruptRecordError for a marker that cannot be parsed -- as in Kafka. ``strict=False``
    (following a live writer, a read-only reader): such a batch is logged and skipped.
    Damage in the bytes themselves (a batch that cannot be framed, offsets that go back)
    ends the replay there, logged: the state is what the log holds up to it, and readers
    meet the damage themselves (docs/design.md §5.1: a damaged log still shows its intact part)."""
    applied = 0
    order = BatchOrder()  # offsets increase across the segments too
    for i, seg in enumerate(segments):
        if seg.base_offset >= end_offset:
            break
        next_base = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if seg.closed:
            continue
        batches: list[RecordBatch] = []
        reached_end = False
        try:
            pos = 0
            if seg.base_offset < start_offset:
                first = seg.translate_offset(start_offset)
                if first is None:
                    continue
                pos = first.position
            order.segment_base, order.next_base = seg.base_offset, next_base
            for batch in seg.batches(pos, order=order):
                if batch.last_offset >= end_offset:
                    reached_end = True
                    break
                batches.append(batch)
                if len(batches) >= 256:
                    applied += _apply_batches(pm, batches, start_offset, strict, log_name)
                    batches = []
        except CorruptRecordError as exc:
            applied += _apply_batches(pm, batches, start_offset, strict, log_name)
            report_damage(exc)  # once per place: the readers meet the same batch
            log.debug("%s: the producer state stops at damage at %s", log_name, exc)
            return applied
        applied += _apply_batches(pm, batches, start_offset, strict, log_name)
        if reached_end:
            break
    return applied


def _apply_batches(pm: ProducerStateManager, batches: Sequence[RecordBatch], start_offset: int,
                   strict: bool, log_name: str) -> int:
    """Apply ``batches`` (those at or past ``start_offset``) to ``pm``; see
    :func:`replay_producer_state`. Returns how many were applied."""
    applied = 0
    for batch in batches:
        if batch.last_offset < start_offset:
            continue
        try:
            pm.update(batch)
        except (LogError, CorruptRecordError) as exc:
            if strict:
                raise
            log.warning("%s: producer state skips the batch at offset %d of %s: %s",
                        log_name, batch.base_offset, batch.path, exc)
            pm.update_map_end_offset(batch.last_offset + 1)
        applied += 1
    return applied


def try_take_snapshot(pm: ProducerStateManager, log_name: str = "") -> str | None:
    """``pm.take_snapshot()`` on a writable manager, an OSError (a full disk) logged and
    ignored: a snapshot only saves a later load the replay of the log, so loading and
    recovery go on without one. Returns the path written or None."""
    if not pm.writable:
        return None
    try:
        return pm.take_snapshot()
    except OSError as exc:
        log.warning("%s: cannot write the producer snapshot at offset %d: %s", log_name,
                    pm.map_end_offset, exc)
        return None


def rebuild_producer_state(pm: ProducerStateManager, segments: Sequence[LogSegment],
                           log_start_offset: int, last_offset: int,
                           reload_from_clean_shutdown: bool, *, log_name: str = "") -> None:
    """Bring ``pm`` to the state after every batch below ``last_offset`` (Kafka
    ``UnifiedLog.rebuildProducerState``). ``segments``: the log's segments, oldest first.

    With no snapshot at all after a clean shutdown the state is taken as empty (Kafka's
    upgrade shortcut) and empty snapshots are written at the base offsets of the last two
    segments and at ``last_offset``. Otherwise the snapshots outside ``(log_start_offset,
    last_offset]`` are deleted, the newest readable one is loaded (an unreadable one is
    deleted, as Kafka does), and the batches after it are replayed
    (:func:`replay_producer_state`), a snapshot taken at each of those offsets reached on
    the way and at ``last_offset``. A read-only ``pm`` writes and deletes nothing: the
    state is only built in memory. A snapshot that cannot be written is logged and skipped
    (:func:`try_take_snapshot`). Raises OSError (reading), and what the replay raises."""
    offsets_to_snapshot: list[int] = []
    if segments:
        if len(segments) > 1:
            offsets_to_snapshot.append(segments[-2].base_offset)
        offsets_to_snapshot.append(segments[-1].base_offset)
    offsets_to_snapshot.append(last_offset)
    if pm.latest_snapshot_offset() is None and reload_from_clean_shutdown:
        for offset in offsets_to_snapshot:
            pm.update_map_end_offset(offset)
            try_take_snapshot(pm, log_name)
        pm.update_map_end_offset(last_offset)
        return
    empty_before = pm.is_empty() and pm.map_end_offset >= last_offset
    pm.truncate_and_reload(log_start_offset, last_offset)
    if last_offset > pm.map_end_offset and not empty_before:
        for i, seg in enumerate(segments):
            if seg.base_offset >= last_offset:
                break
            if i + 1 < len(segments) and segments[i + 1].base_offset <= pm.map_end_offset:
                continue  # wholly below where the state ends (LogSegments.values(from, to))
            start = max(seg.base_offset, pm.map_end_offset, log_start_offset)
            pm.update_map_end_offset(start)
            if seg.base_offset in offsets_to_snapshot:
                try_take_snapshot(pm, log_name)
            replay_producer_state(pm, [seg], start, last_offset, strict=pm.writable,
                                  log_name=log_name)
    pm.update_map_end_offset(last_offset)
    try_take_snapshot(pm, log_name)
