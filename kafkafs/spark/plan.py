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
3. :func:`plan_slices` -- cut the ranges as Spark's Kafka source does
   (:func:`offset_ranges`, ``KafkaOffsetRangeCalculator``: one offset range per
   topic-partition, split for ``maxRecordsPerPartition`` and ``minPartitions`` by offsets),
   then each range at segment boundaries into :class:`SegmentSlice` s (byte range from the
   ``.index``: the batch holding the start offset to the index entry past the end offset; a
   segment larger than ``maxPartitionBytes`` split along its index entries), and pack the
   slices of each range, in order, into tasks of at most ``maxPartitionBytes`` (default
   128 MiB, as Spark's ``spark.sql.files.maxPartitionBytes``): :func:`group_tasks` makes the
   :class:`ReadTask` input partitions, so the number of tasks follows the data's size, not
   its segment count. Each slice carries what an executor needs and nothing more: the file,
   byte range, offset range, the segment's size at planning (where reading stops whatever
   happens to the file later), the isolation level. Under read_committed, the aborted
   transactions are looked up by the executor that meets a transactional batch
   (:func:`~kafkafs.spark.views.scan_aborted`), so a read of data without transactions
   reads nothing more; ``plan_slices(..., resolve_aborted=True)`` looks them up while
   planning instead.

**Missing segments.** In a partition that is not compacted (see
:func:`~kafkafs.spark.views.compacted_partitions`) every segment ends where the next one
starts. A segment deleted from the middle leaves offsets no segment holds: the planner finds
a range that starts in such a hole (the segment before it holds no batch at or past the
start), the executor one that it reaches (it reads the segment before the hole to its end
and stops short of the next segment's base offset), with no byte read beyond what the read
needs either way. Both are data loss (:func:`data_loss`: ``KAFKA_DATA_LOSS`` naming the
offsets under ``failOnDataLoss=true``, else a warning and the offsets skipped). Compacted
partitions have such gaps by design and are not checked.

Errors: ValueError (Spark's IllegalArgumentException), :class:`DataLossError`,
FileNotFoundError for a log dir that does not exist.
"""

from __future__ import annotations

import array
import bisect
import itertools
import logging
import math
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from ..log.names import LOG_SUFFIX, filename_prefix
from .fileio import display
from .options import (
    EARLIEST,
    LATEST,
    OffsetLimit,
    ReadOptions,
    format_tp,
    format_tp_set,
)
from .views import PartitionView, open_views

__all__ = [
    "DataLossError",
    "ReadTask",
    "SegmentSlice",
    "bound_ranges",
    "close_views",
    "data_loss",
    "group_tasks",
    "limit_offsets",
    "offset_ranges",
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


# -- 3. slices and tasks ----------------------------------------------------------------------

class SegmentSlice(InputPartition):
    """One segment's part of a read: the records with ``start_offset <= offset <
    end_offset`` of one segment, read from the batch at ``start_position`` on; the
    ``.index`` says they end before ``end_hint``; nothing at or past ``end_position`` (the
    segment's size at planning) is read. ``root``/``dir_name``/``file_name`` name the file
    (local path or URI), ``identity`` the local file planned (a cleaner's swap replaces it),
    ``next_base`` the next segment's base offset (-1: none), ``log_end`` the log end offset
    at planning for the last segment (-1: not the last): no batch before the last may reach
    it (docs/design.md §5.1). ``aborted``: ``(producer_id,
    first_offset, last_offset)`` of the aborted transactions overlapping the slice, what a
    read_committed read drops; None: looked up by the reader when it meets a transactional
    batch. ``compacted``: the topic is compacted (offsets may be missing between segments:
    see :func:`~kafkafs.spark.views.compacted_partitions`); when it is not, offsets of
    ``[start_offset, end_offset)`` the segment does not hold are a missing segment, data
    loss. ``task``: the number of the Spark task (:class:`ReadTask`) that reads it. Small
    and picklable."""

    def __init__(self, *, topic: str, partition: int, root: str, dir_name: str,
                 file_name: str, base_offset: int, next_base: int, start_offset: int,
                 end_offset: int, start_position: int, end_hint: int, end_position: int,
                 identity, aborted: tuple | None, read_committed: bool, include_headers: bool,
                 fail_on_data_loss: bool, compacted: bool = False, task: int = 0,
                 log_end: int = -1):
        super().__init__(None)
        self.topic, self.partition = topic, partition
        self.root, self.dir_name, self.file_name = root, dir_name, file_name
        self.base_offset, self.next_base, self.log_end = base_offset, next_base, log_end
        self.start_offset, self.end_offset = start_offset, end_offset
        self.start_position, self.end_hint, self.end_position = \
            start_position, end_hint, end_position
        self.identity = identity
        self.aborted = aborted
        self.read_committed = read_committed
        self.include_headers = include_headers
        self.fail_on_data_loss = fail_on_data_loss
        self.compacted = compacted
        self.task = task

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


class ReadTask(InputPartition):
    """One Spark input partition (one task): ``slices``, :class:`SegmentSlice` s of one
    topic-partition whose offset ranges follow each other, read in order by one task
    (:func:`~kafkafs.spark.columns.read_slices`). Picklable."""

    def __init__(self, slices):
        super().__init__(None)
        self.slices = tuple(slices)

    @property
    def tp(self) -> tuple:
        return self.slices[0].tp

    @property
    def topic(self) -> str:
        return self.slices[0].topic

    @property
    def partition(self) -> int:
        return self.slices[0].partition

    @property
    def start_offset(self) -> int:
        return self.slices[0].start_offset

    @property
    def end_offset(self) -> int:
        return self.slices[-1].end_offset

    @property
    def planned_bytes(self) -> int:
        return sum(sl.planned_bytes for sl in self.slices)

    def __repr__(self):
        return (f"ReadTask({format_tp(self.tp)} offsets [{self.start_offset}, "
                f"{self.end_offset}), {len(self.slices)} slices, {self.planned_bytes} bytes)")

    def __eq__(self, other):
        return isinstance(other, ReadTask) and self.slices == other.slices

    __hash__ = None

    def __reduce__(self):
        # a task of tens of thousands of small segments pickles as columns (a few bytes a
        # slice, not a pickled object each: 9.3 MB and 0.2 s for 71,429 slices before)
        columns = _task_columns(self.slices)
        if columns is None:
            return (ReadTask, (self.slices,))
        return (_task_from_columns, columns)


_SHARED_FIELDS = ("topic", "partition", "root", "dir_name", "read_committed", "include_headers",
                  "fail_on_data_loss", "compacted", "task")
_SLICE_FIELDS = ("base_offset", "next_base", "log_end", "start_offset", "end_offset",
                 "start_position",
                 "end_hint", "end_position")


def _task_columns(slices):
    """``(shared, columns, names, identities, aborted)`` of ``slices`` for pickling, or None
    when they do not share the fields of :data:`_SHARED_FIELDS` (pickled as they are)."""
    if len(slices) < 2:
        return None
    first = vars(slices[0])
    shared = tuple(first[f] for f in _SHARED_FIELDS)
    if any(tuple(vars(sl)[f] for f in _SHARED_FIELDS) != shared for sl in slices):
        return None
    columns = tuple(array.array("q", [getattr(sl, f) for sl in slices]).tobytes()
                    for f in _SLICE_FIELDS)
    names = {i: sl.file_name for i, sl in enumerate(slices)
             if sl.file_name != filename_prefix(sl.base_offset) + LOG_SUFFIX}
    ids = [sl.identity for sl in slices]
    if all(i is not None for i in ids) and len({i[0] for i in ids}) == 1:
        identities = (ids[0][0], array.array("q", [i[1] for i in ids]).tobytes())
    else:
        identities = ids
    aborted = {i: sl.aborted for i, sl in enumerate(slices) if sl.aborted != slices[0].aborted}
    return (shared, columns, names, identities, (slices[0].aborted, aborted))


def _task_from_columns(shared, columns, names, identities, aborted) -> ReadTask:
    """The :class:`ReadTask` :func:`_task_columns` described."""
    common = dict(zip(_SHARED_FIELDS, shared, strict=True))
    cols = [array.array("q", raw) for raw in columns]
    if isinstance(identities, tuple):
        dev, inos = identities[0], array.array("q", identities[1])
        identities = [(dev, ino) for ino in inos]
    default, aborted_at = aborted
    slices = []
    for i, values in enumerate(zip(*cols, strict=True)):
        kw = dict(zip(_SLICE_FIELDS, values, strict=True))
        slices.append(SegmentSlice(
            **common, **kw, file_name=names.get(i) or filename_prefix(kw["base_offset"]) +
            LOG_SUFFIX, identity=identities[i], aborted=aborted_at.get(i, default)))
    return ReadTask(slices)


def _round_half_up(x: float) -> int:
    return math.floor(x + 0.5)  # Scala's math.round


def _divide(tp, start: int, end: int, parts: int) -> list:
    """``KafkaOffsetRangeCalculator.getDividedPartition``: ``[start, end)`` in ``parts``
    ranges of ``size // parts`` offsets (the last ones take the remainder), empty ones
    dropped."""
    out = []
    remaining = end - start
    for part in range(parts):
        this = remaining // (parts - part)
        remaining -= this
        stop = min(start + this, end)
        if stop > start:
            out.append((tp, start, stop))
        start = stop
    return out


def offset_ranges(ranges: dict, min_partitions: int | None,
                  max_records: int | None) -> list:
    """Spark's ``KafkaOffsetRangeCalculator.getRanges``: the ``[(tp, start, end), ...]``
    offset ranges Spark's Kafka source makes of ``ranges`` (``{tp: (start, end)}``): one per
    topic-partition with offsets to read; with ``maxRecordsPerPartition`` each split into
    ``ceil(size / maxRecords)`` ranges; then, while fewer than ``minPartitions``, the ranges
    whose share of the offsets (``round(size / total * minPartitions)``) is more than one
    are split in proportion, the others left whole. Sizes are offset counts, as Spark's."""
    out = [(tp, s, e) for tp, (s, e) in sorted(ranges.items()) if e > s]
    if (min_partitions is None or len(out) >= min_partitions) and max_records is None:
        return out
    if max_records is not None:
        out = [r for tp, s, e in out for r in _divide(tp, s, e, math.ceil((e - s) / max_records))]
    if min_partitions is not None and min_partitions > len(out):
        total = sum(e - s for _tp, s, e in out)

        def part_count(size, total_size, parts):
            if total_size <= 0:
                return 1
            return max(_round_half_up(size / total_size * parts), 1)

        unsplit = [r for r in out if part_count(r[2] - r[1], total, min_partitions) == 1]
        split_total = total - sum(e - s for _tp, s, e in unsplit)
        split_min = max(min_partitions - len(unsplit), 1)
        out = [r for tp, s, e in out
               for r in _divide(tp, s, e, part_count(e - s, split_total, split_min))]
    return out


@dataclass
class _Piece:
    view: PartitionView
    k: int  # segment index
    start: int  # offsets [start, end)
    end: int
    start_position: int
    end_hint: int
    task: int = 0

    @property
    def bytes(self) -> int:
        return max(1, self.end_hint - self.start_position)


def _piece(view: PartitionView, k: int, start: int, end: int) -> _Piece | None:
    """Segment ``k``'s part holding offsets ``[start, end)``, its byte range from the
    ``.index`` (a whole segment needs no index: bytes 0 to its size); None when the segment
    holds none of them."""
    seg = view.segments[k]
    if start == seg.base_offset:
        position = 0
    else:
        position = view.start_position(k, start)
        if position is None:
            return None
    hint = seg.size if end >= view.segment_end(k) else view.end_hint(k, end)
    return _Piece(view, k, start, end, position, max(position, hint))


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


def _missing_segment(view: PartitionView, k: int, start: int, end: int, fail: bool) -> None:
    data_loss(fail, f"Could not read records in offset [{start}, {end}) for topic partition "
                    f"{format_tp(view.tp)}: no segment of {view.path} holds them (the "
                    f"segment {view.segments[k].name} ends before {start}, the next one "
                    f"starts at {end}): a segment is missing from a partition that is not "
                    "compacted.")


def _range_pieces(view: PartitionView, bases: list, start: int, end: int,
                  fail: bool) -> list:
    """The per-segment pieces of offsets ``[start, end)`` of ``view`` (``bases``: its
    segments' base offsets). A segment that holds none of the offsets it should is, in a
    partition that is not compacted, a missing segment: data loss (:func:`data_loss`)."""
    out = []
    k = max(bisect.bisect_right(bases, start) - 1, 0)
    while k < len(bases) and bases[k] < end:
        lo, hi = max(start, bases[k]), min(end, view.segment_end(k))
        if lo < hi:
            piece = _piece(view, k, lo, hi)
            if piece is not None:
                out.append(piece)
            elif not view.compacted:
                _missing_segment(view, k, lo, hi, fail)
        k += 1
    return out


def plan_slices(views: dict, ranges: dict, opts: ReadOptions, *,
                resolve_aborted: bool = False) -> list:
    """The :class:`SegmentSlice` s reading ``ranges`` (``{tp: (start, end)}``, offsets
    within each view's ``[log start offset, log end offset]``) of ``views``, in topic,
    partition and offset order, each with the number of the task that reads it (see
    :func:`group_tasks`):

    1. :func:`offset_ranges` -- the offset ranges Spark's Kafka source would read in one task
       each (``minPartitions``, ``maxRecordsPerPartition``);
    2. each range cut at segment boundaries, byte ranges from the ``.index``; a part larger
       than ``maxPartitionBytes`` split along its index entries;
    3. the parts of one range packed, in order, into ``ceil(bytes / maxPartitionBytes)``
       tasks of about equal planned bytes: many small segments make one task, a large
       segment several.

    With ``resolve_aborted`` (and read_committed) each slice carries its aborted
    transactions. Raises DataLossError (a missing segment in a partition that is not
    compacted, under ``failOnDataLoss=true``)."""
    target = opts.max_bytes_per_partition
    aborted = {}
    bases = {}
    pieces = []
    task = 0
    for tp, start, end in offset_ranges(ranges, opts.min_partitions,
                                        opts.max_records_per_partition):
        view = views[tp]
        if tp not in aborted:
            aborted[tp] = None
            if not opts.read_committed:
                aborted[tp] = ()
            elif resolve_aborted:
                s, e = ranges[tp]
                aborted[tp] = tuple((t.producer_id, t.first_offset, t.last_offset)
                                    for t in view.aborted_txns(s, e))
            bases[tp] = [seg.base_offset for seg in view.segments]
        parts = [part for piece in _range_pieces(view, bases[tp], start, end,
                                                 opts.fail_on_data_loss)
                 for part in _split_bytes(piece, math.ceil(piece.bytes / target))]
        if not parts:
            continue
        # ceil(bytes / target) tasks of about equal bytes: a part goes to the task its
        # first byte falls in (contiguous, none much over the target)
        total = sum(part.bytes for part in parts)
        count = math.ceil(total / target)
        goal = total / count
        acc = 0
        for part in parts:
            part.task = task + min(count - 1, int(acc // goal))
            acc += part.bytes
            pieces.append(part)
        task += count
    out = []
    for p in pieces:
        view = p.view
        seg = view.segments[p.k]
        out.append(SegmentSlice(
            topic=view.topic, partition=view.partition, root=view.root,
            dir_name=view.dir_name, file_name=seg.name, base_offset=seg.base_offset,
            next_base=view.segments[p.k + 1].base_offset if p.k + 1 < len(view.segments)
            else -1,
            log_end=view.log_end_offset if p.k + 1 == len(view.segments) else -1,
            start_offset=p.start, end_offset=p.end, start_position=p.start_position,
            end_hint=min(p.end_hint, seg.size), end_position=seg.size,
            identity=seg.identity,
            aborted=None if aborted[view.tp] is None else
            tuple(a for a in aborted[view.tp] if a[2] >= p.start and a[1] < p.end),
            read_committed=opts.read_committed, include_headers=opts.include_headers,
            fail_on_data_loss=opts.fail_on_data_loss, compacted=view.compacted,
            task=p.task))
    return out


def group_tasks(slices: list) -> list:
    """The :class:`ReadTask` s of ``slices`` (from :func:`plan_slices`): consecutive slices
    with the same task number, one task each."""
    return [ReadTask(list(group)) for _task, group in
            itertools.groupby(slices, key=lambda sl: sl.task)]


def plan_read(opts: ReadOptions) -> list:
    """Steps 1-3 for a batch read: the :class:`SegmentSlice` s of ``opts`` (its ``starting``
    to its ``ending``); :func:`group_tasks` makes the tasks of them. Views are closed
    before returning."""
    views = open_partitions(opts)
    try:
        ranges = resolve_offsets(views, opts.starting, opts.ending, opts)
        return plan_slices(views, ranges, opts)
    finally:
        close_views(views)
