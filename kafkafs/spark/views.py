"""One partition of a log dir as the ``kafkalog`` planner sees it: its offsets, segments,
index entries, aborted transactions and timestamp lookups, at one moment.

Two kinds, one interface (:class:`PartitionView`):

* :class:`LocalView` -- a partition dir on a local path, loaded read-only by the log layer
  (:func:`kafkafs.log.loader.load_log` with the log dir's checkpoints, as ``kafkafs
  consume`` opens one beside a running daemon): Kafka's log start offset, log end offset and
  last stable offset (:class:`~kafkafs.log.log.Log`: the producer state from the newest
  snapshot and the batches after it), timestamps through the ``.timeindex`` files
  (:meth:`~kafkafs.log.log.Log.offset_for_timestamp`), positions through the ``.index``
  files with every entry checked (:meth:`~kafkafs.log.segment.LogSegment.translate_offset`).
* :class:`ArrowView` -- a partition dir on a pyarrow filesystem (an archived backup on
  s3://, hdfs://): the same answers from the same files read through ``pyarrow.fs``, with
  what a broker trusts after a clean shutdown: the log start offset from the log dir's
  ``log-start-offset-checkpoint``, the log end offset as a segment finds it
  (:func:`kafkafs.log.walk.next_offset_after`), the last stable offset from the newest
  producer snapshot plus the transactional batches after it
  (:func:`kafkafs.log.txnscan.open_transactions`; every batch of the partition when there
  is no snapshot), indexes checked for order and ignored when out of order.

Aborted transactions: a :class:`LocalView` answers with the Log's
(:meth:`~kafkafs.log.log.Log.aborted_txns`); an :class:`ArrowView`, and an executor that
meets a transactional batch the plan did not resolve, with :func:`scan_aborted`: walking
forward from the batch holding the first offset asked for to the markers of the
transactions met, the way a consumer learns them
(:func:`kafkafs.log.txnscan.aborted_from_markers`) -- ``.txnindex`` files are not needed (a
copy of a log dir may lack them) and nothing past the markers is read.

Sizes are bytes, offsets Kafka offsets, timestamps ms. A view is a snapshot taken when it
was opened: the log end offset and every segment's size are those of that moment, which is
what makes a read of a partition being appended to consistent. Views hold open files: call
:meth:`PartitionView.close`; they are not picklable (input partitions carry what executors
need).
"""

from __future__ import annotations

import bisect
import itertools
import json
import logging
import os
from dataclasses import dataclass

from ..log import bulk_commit, safeio
from ..log import checkpoint as ckpt
from ..log.config import LogConfig
from ..log.errors import CorruptCheckpointError, InvalidConfigError
from ..log.loader import load_log
from ..log.manager import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    load_topic_overrides,
    open_partition_dir,
    partition_dirs,
)
from ..log.names import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TOPIC_CONFIG_FILE,
    filename_prefix,
    parse_partition_dir,
    parse_segment_filename,
)
from ..log.producer_state import (
    CorruptSnapshotError,
    decode_snapshot,
    parse_snapshot_filename,
)
from ..log.segment import LogSegment
from ..log.txnscan import aborted_from_markers, open_transactions
from ..log.walk import next_offset_after, walk_batches
from .fileio import ArrowDir, SegmentFile, is_uri, join

__all__ = ["ArrowView", "LocalView", "PartitionView", "SegmentInfo", "open_arrow_views",
           "open_local_views", "open_views"]

log = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"  # (kafkafs.log.cleaner_manager's)
SCAN_CHUNK = 1024 * 1024  # bytes read at a time when the planner scans batches
EARLIEST_TIMESTAMP, LATEST_TIMESTAMP = -2, -1  # ListOffsets sentinels


@dataclass(frozen=True)
class SegmentInfo:
    """A segment as planned: ``base_offset``, file ``name``, ``size`` (bytes, at planning),
    ``identity`` (``(st_dev, st_ino)`` of a local file, else None)."""

    base_offset: int
    name: str
    size: int
    identity: tuple | None = None


class PartitionView:
    """The interface (see the module). Attributes: ``topic``, ``partition``, ``root`` (the
    log dir as given), ``dir_name`` (``topic-partition``), ``path`` (for messages),
    ``log_start_offset``, ``log_end_offset``, ``last_stable_offset``, ``segments`` (list of
    :class:`SegmentInfo`, oldest first), ``compacted`` (whether the topic's offsets may have
    gaps: see :func:`compacted_partitions`)."""

    topic: str
    partition: int
    root: str
    dir_name: str
    path: str
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int
    segments: list
    compacted: bool = False

    @property
    def tp(self) -> tuple:
        return (self.topic, self.partition)

    def available_end(self, read_committed: bool) -> int:
        """Where a read may end: the last stable offset under read_committed, else the log
        end offset (the high watermark of a single replica)."""
        return self.last_stable_offset if read_committed else self.log_end_offset

    def segment_end(self, k: int) -> int:
        """The offset after segment ``k``'s offsets: the next segment's base offset, or the
        log end offset for the last one."""
        return self.segments[k + 1].base_offset if k + 1 < len(self.segments) \
            else self.log_end_offset

    def aborted_txns(self, start: int, end: int) -> list:
        """The :class:`~kafkafs.log.txnindex.AbortedTxn` of the transactions with data in
        ``[start, end)`` that end with an ABORT marker (:func:`scan_aborted` from the batch
        holding ``start``); ``last_stable_offset`` of each is -1 (not known here)."""
        for k, seg in enumerate(self.segments):
            if self.segment_end(k) <= start or seg.base_offset >= end:
                continue
            position = self.start_position(k, start)
            if position is not None:
                return scan_aborted(self.root, self.dir_name,
                                    [(s.base_offset, s.name) for s in self.segments], k,
                                    position, start, end)
        return []

    def offset_for_timestamp(self, timestamp: int) -> int | None:
        """Kafka ListOffsets for ``timestamp`` (ms; -2 earliest, -1 latest): the first
        offset at or above the log start offset whose record's timestamp is >= it, or None."""
        raise NotImplementedError

    def start_position(self, k: int, offset: int) -> int | None:
        """The position in segment ``k`` of the first batch holding offsets >= ``offset``
        (None when the segment has none): where a read of ``offset`` starts."""
        raise NotImplementedError

    def index_entries(self, k: int) -> list:
        """Segment ``k``'s ``.index`` entries ``[(offset, position), ...]``, checked for
        order (empty when there is no usable index)."""
        raise NotImplementedError

    def end_hint(self, k: int, end_offset: int) -> int:
        """A position in segment ``k`` from which every batch holds offsets >= ``end_offset``
        by its ``.index`` (the segment's planned size when the index does not tell): how far
        a read of ``[.., end_offset)`` needs to go. An entry ``(o, p)`` names the last offset
        ``o`` of the append starting at ``p``, so the entry after the first one with
        ``o >= end_offset - 1`` starts past it."""
        entries = self.index_entries(k)
        size = self.segments[k].size
        i = bisect.bisect_left([o for o, _p in entries], end_offset - 1)
        return min(entries[i + 1][1], size) if i + 1 < len(entries) else size

    def close(self) -> None:
        pass

    def __repr__(self):
        return (f"{type(self).__name__}({self.path}: log start {self.log_start_offset}, "
                f"end {self.log_end_offset}, stable {self.last_stable_offset}, "
                f"{len(self.segments)} segments)")


def scan_aborted(root: str, dir_name: str, segments: list, k: int, position: int,
                 start: int, end: int) -> list:
    """The transactions with data in ``[start, end)`` that end with an ABORT marker, by
    walking the batches forward from ``position`` (a batch start) of segment ``k`` through
    the later ones (``segments``: ``(base offset, file name)``, oldest first): the log
    layer's :func:`~kafkafs.log.txnscan.aborted_from_markers` over the one walker, reading
    only as far as the markers. Raises CorruptRecordError at damage met before the answer."""
    def batches():
        pos = position
        for _base, name in segments[k:]:
            try:
                f = SegmentFile(root, dir_name, name)
            except FileNotFoundError:
                continue  # removed by retention meanwhile
            with f:
                yield from _scan(f, pos, f.size())
            pos = 0

    walk = batches()
    try:
        return aborted_from_markers(walk, start, end)
    finally:
        walk.close()


def compacted_partitions(topic_configs: dict, cleaner_checkpoint: dict, tps) -> set:
    """The topic-partitions of ``tps`` whose offsets may have gaps between segments (a
    compacted topic: the cleaner drops records, so a segment may end before the next one's
    base offset): the topic's ``cleanup.policy`` in the log dir's
    ``kafkafs-topic-configs.json`` (``topic_configs``: ``{topic: {key: value}}``) holds
    ``compact``, or the partition is in the log dir's ``cleaner-offset-checkpoint``
    (``cleaner_checkpoint``: a broker's log dir keeps no topic configs, but its cleaner
    records every partition it cleaned there), or it is an internal topic (compacted by
    Kafka's defaults). Every other partition is taken as ``cleanup.policy=delete``, Kafka's
    default: its segments follow each other without gaps."""
    out = set()
    for tp in tps:
        policy = str((topic_configs.get(tp[0]) or {}).get("cleanup.policy", ""))
        if "compact" in policy.split(",") or tp in cleaner_checkpoint or \
                tp[0] in ("__consumer_offsets", "__transaction_state"):
            out.add(tp)
    return out


def _local_topic_configs(root: str) -> dict:
    try:
        return load_topic_overrides([root])
    except (OSError, ValueError, InvalidConfigError) as exc:
        log.warning("Ignoring unreadable topic configs in %s: %s", root, exc)
        return {}


# -- local paths: the log layer ---------------------------------------------------------------

class LocalView(PartitionView):
    """A local partition dir through a read-only :class:`~kafkafs.log.log.Log`."""

    def __init__(self, root: str, dir_name: str, lg):
        self.root, self.dir_name, self.log = root, dir_name, lg
        self.topic, self.partition = lg.topic, lg.partition
        self.path = lg.dir
        self.log_start_offset = lg.log_start_offset
        self.log_end_offset = lg.log_end_offset
        self.last_stable_offset = lg.last_stable_offset
        self._segs = lg.segments()
        LogSegment.load_sizes(self._segs)
        # identities from the load's one listing of the dir (its entries' inode numbers and
        # the dir's device: segments are opened on first use), sizes by one fstatat each
        self.segments = [SegmentInfo(seg.base_offset, os.path.basename(seg.log_path),
                                     seg.size, seg.identity) for seg in self._segs]
        self._entries: dict[int, list] = {}

    def offset_for_timestamp(self, timestamp: int) -> int | None:
        found = self.log.offset_for_timestamp(timestamp)
        return None if found is None else found[0]

    def start_position(self, k: int, offset: int) -> int | None:
        limit = self.segments[k + 1].base_offset if k + 1 < len(self.segments) else None
        batch = self._segs[k].translate_offset(offset, limit=limit)
        return None if batch is None else batch.position

    def aborted_txns(self, start: int, end: int) -> list:
        """The Log's (:meth:`~kafkafs.log.log.Log.aborted_txns`: ``.txnindex`` files where
        they can be trusted, else computed as Kafka's recovery would write them)."""
        return self.log.aborted_txns(start, end)

    def index_entries(self, k: int) -> list:
        if k not in self._entries:
            idx = self._segs[k].index  # opened (its order checked, rebuilt if bad) on use
            self._entries[k] = [idx.entry(n) for n in range(idx.entries)]
        return self._entries[k]

    def close(self) -> None:
        self.log.close(take_snapshot=False)


def _read_checkpoint(root: str, name: str) -> dict:
    try:
        return ckpt.read_offset_checkpoint(os.path.join(root, name))
    except FileNotFoundError:
        return {}
    except (OSError, CorruptCheckpointError) as exc:
        log.warning("Ignoring unreadable checkpoint %s: %s", os.path.join(root, name), exc)
        return {}


def open_local_views(root: str, selected) -> list:
    """The :class:`LocalView` of every partition dir in the local log dir ``root`` whose
    topic ``selected(topic)`` takes. A partition that cannot be loaded (no segment yet, a
    file it may not read) is skipped with a warning, as a read-only LogManager does; a
    topic an unfinished bulk commit creates or replaces is left out, a partition it appends
    to is cut at its ``before`` (:func:`kafkafs.log.bulk_commit.read_view`). Raises
    FileNotFoundError / NotADirectoryError for a missing root."""
    if not os.path.isdir(root):
        if os.path.exists(root):
            raise NotADirectoryError(f"log dir {root} is not a directory")
        raise FileNotFoundError(f"log dir {root} does not exist")
    # a bulk commit not finished yet: the partitions it appends to are read as they were
    # before it, the topics it creates or replaces not at all (looked for before and after
    # the listing: a commit that began or ended meanwhile)
    _limits, hidden = bulk_commit.read_view(root)
    parts = [(tp, path) for tp, path in partition_dirs(root) if selected(tp[0])]
    limits, hidden_now = bulk_commit.read_view(root)
    hidden |= hidden_now
    parts = [(tp, path) for tp, path in parts if tp[0] not in hidden]
    if not parts:
        return []
    with safeio.Dir.open(root, follow=True) as d:
        clean = d.is_file(CLEAN_SHUTDOWN_FILE)
    recovery = _read_checkpoint(root, RECOVERY_POINT_CHECKPOINT)
    starts = _read_checkpoint(root, LOG_START_OFFSET_CHECKPOINT)
    compacted = compacted_partitions(_local_topic_configs(root),
                                     _read_checkpoint(root, CLEANER_OFFSET_CHECKPOINT),
                                     [tp for tp, _path in parts])
    views = []
    for tp, path in parts:
        pdir = open_partition_dir(path)
        if pdir is None:
            continue
        try:
            view = _local_view(root, path, pdir, tp, recovery.get(tp, 0), starts.get(tp, 0),
                               clean, limits.get(tp))
        except (OSError, ValueError) as exc:
            log.warning("Skipping partition %s-%d in %s: %s", tp[0], tp[1], path, exc)
            continue
        view.compacted = tp in compacted
        views.append(view)
    return views


def _local_view(root, path, pdir, tp, recovery_point, log_start, clean, limit) -> LocalView:
    """The :class:`LocalView` of one partition dir, loaded read-only. Segments open on first
    use (their sizes are read here): one removed between the listing and its ``stat`` (a
    live broker's retention) makes the load start again, once, from a new listing. Raises
    OSError, ValueError."""
    def load() -> LocalView:
        lg = load_log(pdir, tp[0], tp[1], LogConfig(), recovery_point=recovery_point,
                      log_start_offset=log_start, had_clean_shutdown=clean,
                      writable=False, limit=limit)
        try:
            return LocalView(root, os.path.basename(path), lg)
        except BaseException:
            lg.close(take_snapshot=False)
            raise

    try:
        return load()
    except FileNotFoundError:
        return load()


# -- pyarrow filesystems ---------------------------------------------------------------------

def _scan(f: SegmentFile, pos: int, end: int):
    """Yield the batches of ``f`` from ``pos`` (a batch start) to ``end`` (bytes): the one
    walker (:func:`kafkafs.log.walk.walk_batches`, docs/design.md §5.3) over the file's
    byte source, CRCs unchecked. Stops quietly at a zero tail or an incomplete batch at the
    end. Raises CorruptRecordError (framing; zeros followed by data)."""
    return walk_batches(f.source(), pos, end, chunk_size=SCAN_CHUNK)


def _checked_entries(raw: bytes, fmt: str, base: int, size: int) -> list:
    """Index entries of a ``.index`` (``fmt`` "offset") or ``.timeindex`` ("time") file's
    bytes, the zero tail of a preallocated file dropped; [] when out of order."""
    import struct

    width = 8 if fmt == "offset" else 12
    n = len(raw) // width
    while n and not any(raw[(n - 1) * width:n * width]):
        n -= 1
    out = []
    for i in range(n):
        if fmt == "offset":
            rel, pos = struct.unpack_from(">ii", raw, i * 8)
            out.append((base + rel, pos))
        else:
            ts, rel = struct.unpack_from(">qi", raw, i * 12)
            out.append((ts, base + rel))
    if fmt == "offset":
        ok = all(a[0] < b[0] and a[1] < b[1] for a, b in itertools.pairwise(out)) and \
            all(0 < p < size for _o, p in out)
    else:
        ok = all(a[0] <= b[0] and a[1] <= b[1] for a, b in itertools.pairwise(out))
    return out if ok else []


class ArrowView(PartitionView):
    """A partition dir on a pyarrow filesystem (see the module). ``log_start_hint``: the
    log dir's checkpointed log start offset for it (0 when unknown)."""

    def __init__(self, root: str, dir_name: str, topic: str, partition: int,
                 log_start_hint: int = 0):
        self.root, self.dir_name = root, dir_name
        self.topic, self.partition = topic, partition
        self.dir = ArrowDir.open(root, dir_name)
        self.path = self.dir.shown
        entries = self.dir.entries()
        self._names = {n for n, (is_dir, _s, _m) in entries.items() if not is_dir}
        segs = []
        for name in self._names:
            p = parse_segment_filename(name)
            if p and p[1] == LOG_SUFFIX and p[2] == "":
                segs.append(SegmentInfo(p[0], name, entries[name][1], None))
        if not segs:
            raise FileNotFoundError(f"{self.path} holds no log segments")
        self.segments = sorted(segs, key=lambda s: s.base_offset)
        self._entries: dict[int, list] = {}
        self._time_entries: dict[int, list] = {}
        self.log_end_offset = self._log_end_offset()
        self.log_start_offset = min(max(log_start_hint, self.segments[0].base_offset),
                                    self.log_end_offset)
        self._lso: int | None = None

    def _file(self, k: int) -> SegmentFile:
        return SegmentFile(self.root, self.dir_name, self.segments[k].name)

    def cut_at(self, limit: int) -> None:
        """Plan the partition as if it ended at offset ``limit`` (an unfinished bulk commit
        began there: :mod:`kafkafs.log.bulk_commit`): the segments past it are left out and
        the last one kept ends where the batch holding ``limit`` begins."""
        if limit >= self.log_end_offset:
            return
        keep = [s for s in self.segments if s.base_offset <= limit] or self.segments[:1]
        k = len(keep) - 1
        pos = 0 if keep[k].base_offset >= limit else self.start_position(k, limit)
        if pos is not None:
            keep[k] = SegmentInfo(keep[k].base_offset, keep[k].name,
                                  min(pos, keep[k].size), keep[k].identity)
        self.segments = keep
        self.log_end_offset = max(limit, keep[0].base_offset)
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        self._lso = None

    def _index_file(self, k: int, suffix: str) -> bytes:
        name = filename_prefix(self.segments[k].base_offset) + suffix
        return self.dir.read(name) if name in self._names else b""

    def index_entries(self, k: int) -> list:
        if k not in self._entries:
            seg = self.segments[k]
            self._entries[k] = _checked_entries(self._index_file(k, INDEX_SUFFIX), "offset",
                                                seg.base_offset, seg.size)
        return self._entries[k]

    def _time_index(self, k: int) -> list:
        if k not in self._time_entries:
            seg = self.segments[k]
            self._time_entries[k] = _checked_entries(self._index_file(k, TIME_INDEX_SUFFIX),
                                                     "time", seg.base_offset, seg.size)
        return self._time_entries[k]

    def _floor_position(self, k: int, offset: int) -> int:
        entries = self.index_entries(k)
        i = bisect.bisect_right([o for o, _p in entries], offset) - 1
        return entries[i][1] if i >= 0 else 0

    def _log_end_offset(self) -> int:
        """The log layer's one computation (:func:`~kafkafs.log.walk.next_offset_after`, as
        a :class:`~kafkafs.log.segment.LogSegment` finds it) on the last segment's file."""
        k = len(self.segments) - 1
        seg = self.segments[k]
        with self._file(k) as f:
            return next_offset_after(f.source(), seg.base_offset,
                                     self._floor_position(k, 1 << 62), seg.size)

    @property
    def last_stable_offset(self) -> int:
        """(Worked out on first use: a read_uncommitted read never needs it.)"""
        if self._lso is None:
            self._lso = self._last_stable_offset()
        return self._lso

    def _last_stable_offset(self) -> int:
        """The first offset of the earliest transaction without a marker: the newest
        producer snapshot at or below the log end offset, then the batches after it."""
        snaps = sorted(o for n in self._names if (o := parse_snapshot_filename(n)) is not None
                       and self.log_start_offset <= o <= self.log_end_offset)
        ongoing: dict[int, int] = {}
        scan_from = self.log_start_offset
        if snaps:
            scan_from = snaps[-1]
            name = filename_prefix(scan_from) + ".snapshot"
            try:
                for e in decode_snapshot(self.dir.read(name), self.dir.join(name)):
                    if e.current_txn_first_offset is not None:
                        ongoing[e.producer_id] = e.current_txn_first_offset
            except (CorruptSnapshotError, OSError) as exc:  # unreadable: from the log start
                log.warning("Ignoring producer snapshot %s: %s", self.dir.join(name), exc)
                ongoing, scan_from = {}, self.log_start_offset
        if scan_from < self.log_end_offset:
            for k, seg in enumerate(self.segments):
                if self.segment_end(k) <= scan_from:
                    continue
                with self._file(k) as f:
                    open_transactions(ongoing, _scan(f, self._floor_position(k, scan_from),
                                                     seg.size), scan_from)
        first = min(ongoing.values(), default=None)
        if first is None or first >= self.log_end_offset:
            return self.log_end_offset
        return max(first, self.log_start_offset)

    def offset_for_timestamp(self, timestamp: int) -> int | None:
        if timestamp == EARLIEST_TIMESTAMP:
            return self.log_start_offset
        if timestamp == LATEST_TIMESTAMP:
            return self.log_end_offset
        start = self.log_start_offset
        last = len(self.segments) - 1
        for k, seg in enumerate(self.segments):
            if self.segment_end(k) <= start:
                continue
            times = self._time_index(k)
            if k < last and times and times[-1][0] < timestamp:
                continue
            i = bisect.bisect_right([t for t, _o in times], timestamp) - 1
            from_offset = max(times[i][1] if i >= 0 else seg.base_offset, start)
            with self._file(k) as f:
                for batch in _scan(f, self._floor_position(k, from_offset), seg.size):
                    if batch.max_timestamp < timestamp or batch.last_offset < start:
                        continue
                    batch.path = f.path
                    batch.ensure_valid()
                    for r in batch.record_tuples():
                        if r[1] >= timestamp and r[0] >= start:
                            return r[0]
        return None

    def start_position(self, k: int, offset: int) -> int | None:
        seg = self.segments[k]
        with self._file(k) as f:
            for batch in _scan(f, self._floor_position(k, offset), seg.size):
                if batch.last_offset >= offset:
                    return batch.position
        return None


def _arrow_log_starts(root: str, name: str = LOG_START_OFFSET_CHECKPOINT) -> dict:
    d = ArrowDir.open(root)
    try:
        raw = d.read(name)
    except (FileNotFoundError, OSError):
        return {}
    path = join(root, name)
    try:
        return ckpt.parse_offset_checkpoint(raw, path)
    except CorruptCheckpointError as exc:  # as _read_checkpoint does for a local log dir
        log.warning("Ignoring unreadable checkpoint %s: %s", path, exc)
        return {}


def _arrow_commit_limits(d: ArrowDir, entries: dict) -> tuple[dict, set]:
    """``({(topic, partition): before}, hidden topics)`` of the unfinished bulk commits
    whose records lie in the log dir ``d`` (:func:`kafkafs.log.bulk_commit.read_view` for a
    URI)."""
    out: dict = {}
    hidden: set = set()
    for name, (is_dir, _size, _mtime) in entries.items():
        if is_dir or not bulk_commit.is_record_name(name):
            continue
        try:
            rec = bulk_commit.parse_record(d.shown, name, d.read(name))
        except (OSError, bulk_commit.CommitRecoveryError) as exc:
            log.warning("Ignoring commit record %s: %s", d.join(name), exc)
            continue
        for pc in rec.partitions:
            key = (pc.topic, pc.partition)
            out[key] = min(pc.before, out.get(key, pc.before))
        hidden.update(ta.topic for ta in rec.topics)
    return out, hidden


def open_arrow_views(root: str, selected) -> list:
    """:class:`ArrowView` of every partition dir under the URI ``root`` whose topic
    ``selected(topic)`` takes (a partition without segments is skipped with a warning; an
    unfinished bulk commit's topics and limits as for :func:`open_local_views`). Raises
    FileNotFoundError for a missing root."""
    d = ArrowDir.open(root)
    entries = d.entries()
    starts = None
    limits, hidden = _arrow_commit_limits(d, entries)
    views = []
    for name in sorted(entries):
        tp = parse_partition_dir(name)
        if tp is None or not entries[name][0] or not selected(tp[0]) or tp[0] in hidden:
            continue
        if starts is None:
            starts = _arrow_log_starts(root)
            try:
                configs = json.loads(d.read(TOPIC_CONFIG_FILE)).get("topics") or {}
            except (OSError, ValueError, AttributeError):
                configs = {}
            cleaned = _arrow_log_starts(root, CLEANER_OFFSET_CHECKPOINT)
        try:
            view = ArrowView(root, name, tp[0], tp[1], starts.get(tp, 0))
            if tp in limits:
                view.cut_at(limits[tp])
            view.compacted = bool(compacted_partitions(configs, cleaned, [tp]))
            views.append(view)
        except (OSError, ValueError) as exc:
            log.warning("Skipping partition %s-%d in %s: %s", tp[0], tp[1], d.join(name), exc)
    return views


def open_views(root: str, selected) -> list:
    """The partition views of the log dir ``root`` (a local path or a URI) for the topics
    ``selected(topic)`` takes."""
    if is_uri(root):
        return open_arrow_views(root, selected)
    return open_local_views(os.path.abspath(root), selected)

