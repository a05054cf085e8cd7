"""Planning a ``kafkalog`` read: which partitions, which offsets, which byte ranges.

Three steps, each usable alone (the batch reader uses all three; a stream reader opens the
partitions, works out its own ``{tp: (start, end)}`` offsets, checks them with
:func:`bound_ranges` and cuts them with :func:`plan_slices`):

1. :func:`open_partitions` -- find the partition dirs of the selected topics in the log dirs
   (comma-separated paths or URIs) and open a :class:`~kafkafs.spark.views.PartitionView`
   of each: log start offset, log end offset, last stable offset, segments, indexes. A
   partition found in several log dirs (replicas in several brokers' backups) is taken from
   the one with the highest log end offset (then the lowest log start offset), with a
   warning; ``assign`` naming a partition that is nowhere is an error.
2. :func:`resolve_offsets` -- turn the start and end :class:`~kafkafs.spark.options.OffsetLimit`
   into ``{(topic, partition): (start, end)}`` as Spark's ``KafkaOffsetReader`` does
   (partition sets checked, timestamps through the ``.timeindex`` files: the first offset
   with timestamp >= T, ``startingOffsetsByTimestampStrategy``), bounded by what can be read:
   ``[log start offset, last stable offset)`` under read_committed, ``[log start offset,
   log end offset)`` under read_uncommitted. A start below the log start offset, or an end
   past what can be read, is data loss: an error under ``failOnDataLoss=true`` (Spark's
   ``KAFKA_DATA_LOSS`` message), else a warning and the range narrowed.
3. :func:`plan_slices` -- cut each range into :class:`SegmentSlice` input partitions: one per
   segment the range touches, byte range from the ``.index`` (the batch holding the start
   offset to the index entry past the end offset), segments larger than
   ``maxBytesPerPartition`` split along their index entries, then split further for
   ``maxRecordsPerPartition`` (offset ranges of at most that many offsets) and
   ``minPartitions`` (the largest slices split in proportion to their bytes, as Spark's
   ``KafkaOffsetRangeCalculator`` splits by offsets). Each slice carries what an executor
   needs and nothing more: the file, byte range, offset range, the segment's size at planning
   (where reading stops whatever happens to the file later), the isolation level. Under
   read_committed, the aborted transactions are looked up by the executor that meets a
   transactional batch (:func:`~kafkafs.spark.views.scan_aborted`), so a read of data
   without transactions reads nothing more; ``plan_slices(..., resolve_aborted=True)``
   looks them up while planning instead.

Errors: ValueError (Spark's IllegalArgumentException), :class:`DataLossError`,
FileNotFoundError for a log dir that does not exist.
"""

from __future__ import annotations

import itertools
import logging
import math
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from .options import (
    EARLIEST,
    LATEST,
    OffsetLimit,
    ReadOptions,
    format_tp,
    format_tp_set,
)
from .fileio import display
from .views import PartitionView, open_views

__all__ = [
    "DataLossError",
    "SegmentSlice",
    "bound_ranges",
    "close_views",
    "data_loss",
    "limit_offsets",
    "open_partitions",
    "plan_read",
    "plan_slices",
    "resolve_offsets",
]

log = logging.getLogger(__name__)

DATA_LOSS_PREFIX = (
    "[KAFKA_DATA_LOSS] Some data may have been lost because they are not available in Kafka "
    "any more; either the data was aged out by Kafka or the topic may have been deleted "
    "before all the data in the topic was processed. If you don't want your streaming query "
    "to fail on such cases, set the source option failOnDataLoss to false. Reason: ")


class DataLossError(RuntimeError):
    """Offsets asked for are not in the log (Spark's ``KAFKA_DATA_LOSS``): deleted by
    retention, a topic recreated, a segment gone while the query ran. Raised only under
    ``failOnDataLoss=true``."""

    def __init__(self, reason: str):
        super().__init__(DATA_LOSS_PREFIX + reason)
        self.reason = reason


def data_loss(fail: bool, reason: str) -> None:
    """Raise :class:`DataLossError` when ``fail``, else log ``reason`` as a warning (Spark's
    ``logOnDataLoss``)."""
    if fail:
        raise DataLossError(reason)
    log.warning("%s Some data may have been lost; failOnDataLoss is false: going on.", reason)


# -- 1. partitions ----------------------------------------------------------------------------

def open_partitions(opts: ReadOptions) -> dict:
    """``{(topic, partition): PartitionView}`` of the partitions the subscription selects in
    the log dirs ``opts.paths`` (see the module). Raises ValueError when ``assign`` names a
    partition found nowhere, FileNotFoundError for a missing log dir."""
    found: dict = {}
    try:
        for root in opts.paths:
            for view in open_views(root, opts.topic_selected):
                other = found.get(view.tp)
                if other is None:
                    found[view.tp] = view
                    continue
                keep, drop = (view, other) if (view.log_end_offset, -view.log_start_offset) > \
                    (other.log_end_offset, -other.log_start_offset) else (other, view)
                log.warning("Partition %s is in %s and in %s: reading %s (log end offset %d), "
                            "the one with the most records", format_tp(view.tp), other.path,
                            view.path, keep.path, keep.log_end_offset)
                found[view.tp] = keep
                drop.close()
        if opts.strategy == "assign":
            missing = [tp for tp in opts.assigned if tp not in found]
            if missing:
                raise ValueError(
                    f"Topic-partition {format_tp(missing[0])} of option 'assign' is in none "
                    f"of the log dirs {', '.join(map(display, opts.paths))}")
            wanted = set(opts.assigned)
            for tp in [tp for tp in found if tp not in wanted]:
                found.pop(tp).close()
    except BaseException:
        close_views(found)
        raise
    if opts.strategy == "subscribe":
        absent = [t for t in opts.topics if not any(tp[0] == t for tp in found)]
        if absent:
            log.warning("Topics %s are in none of the log dirs %s: nothing to read from them",
                        ", ".join(absent), ", ".join(map(display, opts.paths)))
    return dict(sorted(found.items()))


def close_views(views: dict) -> None:
    for view in views.values():
        try:
            view.close()
        except OSError:
            pass


# -- 2. offsets -------------------------------------------------------------------------------

def limit_offsets(views: dict, limit: OffsetLimit, is_start: bool,
                  read_committed: bool) -> dict:
    """``{tp: offset}`` for one limit (``KafkaOffsetReader.fetchPartitionOffsets`` with the
    -2/-1 sentinels resolved against each view), without the data-loss checks of
    :func:`resolve_offsets` (a stream's start does not get them either). Raises ValueError
    for a JSON map that does not name exactly the partitions of ``views``."""
    tps = set(views)
    if limit.kind == "offsets":
        if set(limit.values) != tps:
            raise ValueError(
                "[KAFKA_START_OFFSET_DOES_NOT_MATCH_ASSIGNED] Partitions specified for Kafka "
                "start offsets don't match what are assigned. Maybe topic partitions are "
                "created or deleted while the query is running. Use -1 for latest, -2 for "
                f"earliest. Specified: {format_tp_set(limit.values)} Assigned: "
                f"{format_tp_set(tps)}")
        wanted = limit.values
    elif limit.kind == "timestamps":
        if set(limit.values) != tps:
            raise ValueError(
                "[KAFKA_TIMESTAMP_OFFSET_DOES_NOT_MATCH_ASSIGNED] Partitions specified for "
                f"Kafka timestamp based {'start' if is_start else 'end'} offsets don't match "
                "what are assigned. Maybe topic partitions are created or deleted while the "
                "query is running, or you didn't specify all the partitions. Specified: "
                f"{format_tp_set(limit.values)} Assigned: {format_tp_set(tps)}")
        wanted = {}
    else:
        wanted = {}
    out = {}
    for tp, view in views.items():
        end = view.available_end(read_committed)
        if limit.kind == "earliest":
            out[tp] = view.log_start_offset
        elif limit.kind == "latest":
            out[tp] = end
        elif limit.kind == "offsets":
            off = wanted[tp]
            out[tp] = view.log_start_offset if off == EARLIEST else end if off == LATEST \
                else off
        else:
            ts = limit.timestamp if limit.kind == "timestamp" else limit.values[tp]
            found = view.offset_for_timestamp(ts)
            if found is None:
                if is_start and limit.strategy == "error":
                    raise ValueError(f"No offset matched from request of topic-partition "
                                     f"{format_tp(tp)} and timestamp {ts}.")
                found = end
            # ListOffsets answers no offset past what the isolation level may read
            out[tp] = min(found, end)
    return out


def resolve_offsets(views: dict, starting: OffsetLimit, ending: OffsetLimit,
                    opts: ReadOptions) -> dict:
    """``{tp: (start, end)}`` for every view (see the module): partition sets checked,
    sentinels and timestamps resolved, then :func:`bound_ranges`. Raises ValueError
    (Spark's messages), DataLossError."""
    committed = opts.read_committed
    starts = limit_offsets(views, starting, True, committed)
    ends = limit_offsets(views, ending, False, committed)
    return bound_ranges(views, {tp: (starts[tp], ends[tp]) for tp in views}, opts)


def bound_ranges(views: dict, ranges: dict, opts: ReadOptions) -> dict:
    """``ranges`` (``{tp: (start, end)}``, offsets; every tp a key of ``views``) narrowed to
    what each partition holds: a start below the log start offset or an end past the last
    stable offset (read_committed) or log end offset is data loss (:func:`data_loss` by
    ``opts.fail_on_data_loss``: raised, or warned and narrowed). Raises ValueError
    (``RESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET``) for a start past its end, DataLossError.
    What a stream reader calls with the offsets of a micro-batch before :func:`plan_slices`."""
    committed = opts.read_committed
    out = {}
    for tp, (start, end) in sorted(ranges.items()):
        view = views[tp]
        low, high = view.log_start_offset, view.available_end(committed)
        if start < low:
            gone_to = min(low, end) if end >= start else low
            data_loss(opts.fail_on_data_loss,
                      f"Could not read records in offset [{start}, {gone_to}) for topic "
                      f"partition {format_tp(tp)}: the log start offset of {view.path} is "
                      f"{low}.")
            start = low
        if end > high:
            what = "last stable offset" if committed and high < view.log_end_offset \
                else "log end offset"
            data_loss(opts.fail_on_data_loss,
                      f"Could not read records in offset [{max(start, high)}, {end}) for topic "
                      f"partition {format_tp(tp)}: the {what} of {view.path} is {high}.")
            end = high
        if end < low:  # everything asked for is gone (reported above)
            start = end = low
        if start > end:
            raise ValueError(
                f"[RESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET] The resolved start offset "
                f"{start} is greater than the resolved end offset {end} for topic {tp[0]} "
                f"partition {tp[1]}.")
        out[tp] = (start, end)
    return out


# -- 3. slices --------------------------------------------------------------------------------

class SegmentSlice(InputPartition):
    """One input partition: the records with ``start_offset <= offset < end_offset`` of one
    segment, read from the batch at ``start_position`` on; the ``.index`` says they end
    before ``end_hint``; nothing at or past ``end_position`` (the segment's size at
    planning) is read. ``root``/``dir_name``/``file_name`` name the file (local path or
    URI), ``identity`` the local file planned (a cleaner's swap replaces it), ``next_base``
    the next segment's base offset (-1: none). ``aborted``: ``(producer_id, first_offset,
    last_offset)`` of the aborted transactions overlapping the slice, what a read_committed
    read drops; None: looked up by the reader when it meets a transactional batch. Small
    and picklable."""

    def __init__(self, *, topic: str, partition: int, root: str, dir_name: str,
                 file_name: str, base_offset: int, next_base: int, start_offset: int,
                 end_offset: int, start_position: int, end_hint: int, end_position: int,
                 identity, aborted: tuple | None, read_committed: bool, include_headers: bool,
                 fail_on_data_loss: bool):
        super().__init__(None)
        self.topic, self.partition = topic, partition
        self.root, self.dir_name, self.file_name = root, dir_name, file_name
        self.base_offset, self.next_base = base_offset, next_base
        self.start_offset, self.end_offset = start_offset, end_offset
        self.start_position, self.end_hint, self.end_position = \
            start_position, end_hint, end_position
        self.identity = identity
        self.aborted = aborted
        self.read_committed = read_committed
        self.include_headers = include_headers
        self.fail_on_data_loss = fail_on_data_loss

    @property
    def tp(self) -> tuple:
        return (self.topic, self.partition)

    @property
    def planned_bytes(self) -> int:
        return max(0, self.end_hint - self.start_position)

    def __repr__(self):
        return (f"SegmentSlice({self.dir_name}/{self.file_name} offsets [{self.start_offset}, "
                f"{self.end_offset}) bytes [{self.start_position}, {self.end_hint}))")

    def __eq__(self, other):
        return isinstance(other, SegmentSlice) and vars(self) == vars(other)

    __hash__ = None


@dataclass
class _Piece:
    view: PartitionView
    k: int  # segment index
    start: int  # offsets [start, end)
    end: int
    start_position: int
    end_hint: int

    @property
    def bytes(self) -> int:
        return max(1, self.end_hint - self.start_position)


def _piece(view: PartitionView, k: int, start: int, end: int) -> _Piece | None:
    position = view.start_position(k, start)
    if position is None:
        return None
    return _Piece(view, k, start, end, position, max(position, view.end_hint(k, end)))


def _cut(piece: _Piece, offsets: list) -> list:
    """``piece`` cut at the increasing ``offsets`` (inside it)."""
    bounds = [piece.start, *[o for o in offsets if piece.start < o < piece.end], piece.end]
    out = []
    for lo, hi in itertools.pairwise(bounds):
        p = _piece(piece.view, piece.k, lo, hi)
        if p is not None:
            out.append(p)
    return out


def _split_bytes(piece: _Piece, parts: int) -> list:
    """``piece`` in about ``parts`` pieces of equal bytes, cut after index entries (an entry
    ``(o, p)`` ends an append at offset ``o``: offset ``o + 1`` starts near ``p``'s next
    append); by offsets when the index has too few entries."""
    if parts <= 1:
        return [piece]
    entries = [(o, p) for o, p in piece.view.index_entries(piece.k)
               if piece.start_position < p < piece.end_hint and piece.start <= o < piece.end - 1]
    cuts = []
    if len(entries) >= parts - 1:
        step = piece.bytes / parts
        j = 0
        for i in range(1, parts):
            target = piece.start_position + i * step
            while j < len(entries) - 1 and entries[j][1] < target:
                j += 1
            cut = entries[j][0] + 1
            if not cuts or cut > cuts[-1]:
                cuts.append(cut)
    else:
        span = piece.end - piece.start
        cuts = sorted({piece.start + span * i // parts for i in range(1, parts)})
    return _cut(piece, cuts)


def _split_records(piece: _Piece, max_records: int) -> list:
    span = piece.end - piece.start
    if span <= max_records:
        return [piece]
    parts = math.ceil(span / max_records)
    return _cut(piece, [piece.start + span * i // parts for i in range(1, parts)])


def _min_partitions(pieces: list, min_partitions: int) -> list:
    """Spark's ``KafkaOffsetRangeCalculator.getRanges`` by bytes: pieces whose share of the
    bytes rounds to one part stay whole, the others are split in proportion."""
    if len(pieces) >= min_partitions:
        return pieces
    total = sum(p.bytes for p in pieces)

    def part_count(size, total_size, parts):
        return max(round(size / total_size * parts), 1)

    whole = {id(p) for p in pieces if part_count(p.bytes, total, min_partitions) == 1}
    split_total = total - sum(p.bytes for p in pieces if id(p) in whole)
    split_parts = max(min_partitions - len(whole), 1)
    out = []
    for p in pieces:
        if id(p) in whole:
            out.append(p)
        else:
            out.extend(_split_bytes(p, part_count(p.bytes, split_total, split_parts)))
    return out


def plan_slices(views: dict, ranges: dict, opts: ReadOptions, *,
                resolve_aborted: bool = False) -> list:
    """The :class:`SegmentSlice` input partitions reading ``ranges`` (``{tp: (start,
    end)}``, offsets within each view's ``[log start offset, log end offset]``) of
    ``views`` (see the module), in topic, partition and offset order; with
    ``resolve_aborted`` (and read_committed) each carries its aborted transactions."""
    pieces = []
    aborted = {}
    for tp, (start, end) in sorted(ranges.items()):
        if start >= end:
            continue
        view = views[tp]
        aborted[tp] = None
        if not opts.read_committed:
            aborted[tp] = ()
        elif resolve_aborted:
            aborted[tp] = tuple((t.producer_id, t.first_offset, t.last_offset)
                                for t in view.aborted_txns(start, end))
        for k, seg in enumerate(view.segments):
            lo, hi = max(start, seg.base_offset), min(end, view.segment_end(k))
            if lo >= hi:
                continue
            piece = _piece(view, k, lo, hi)
            if piece is None:
                continue
            parts = math.ceil(piece.bytes / opts.max_bytes_per_partition)
            pieces.extend(_split_bytes(piece, parts))
    if opts.max_records_per_partition:
        pieces = [q for p in pieces for q in _split_records(p, opts.max_records_per_partition)]
    if opts.min_partitions and pieces:
        pieces = _min_partitions(pieces, opts.min_partitions)
    out = []
    for p in pieces:
        view = p.view
        seg = view.segments[p.k]
        out.append(SegmentSlice(
            topic=view.topic, partition=view.partition, root=view.root,
            dir_name=view.dir_name, file_name=seg.name, base_offset=seg.base_offset,
            next_base=view.segments[p.k + 1].base_offset if p.k + 1 < len(view.segments)
            else -1,
            start_offset=p.start, end_offset=p.end, start_position=p.start_position,
            end_hint=min(p.end_hint, seg.size), end_position=seg.size,
            identity=seg.identity,
            aborted=None if aborted[view.tp] is None else
            tuple(a for a in aborted[view.tp] if a[2] >= p.start and a[1] < p.end),
            read_committed=opts.read_committed, include_headers=opts.include_headers,
            fail_on_data_loss=opts.fail_on_data_loss))
    return out


def plan_read(opts: ReadOptions) -> list:
    """Steps 1-3 for a batch read: the input partitions of ``opts`` (its ``starting`` to
    its ``ending``). Views are closed before returning."""
    views = open_partitions(opts)
    try:
        ranges = resolve_offsets(views, opts.starting, opts.ending, opts)
        return plan_slices(views, ranges, opts)
    finally:
        close_views(views)
