"""Which logs the cleaner works on, and its state per partition (the log-layer part of Kafka's
``LogCleanerManager``).

* **What is dirty** (:func:`cleanable_offsets`, :class:`LogToClean`): a log's first dirty
  offset is its ``cleaner-offset-checkpoint`` entry (the log start offset without one; an
  entry below the log start offset or past the log end offset is reset to the log start
  offset and rewritten, as Kafka does). Cleaning stops before the first uncleanable offset:
  the active segment, the last stable offset, and (``min.compaction.lag.ms``) the first
  segment whose largest timestamp is younger than the lag -- rounded down to the base offset
  of the segment holding it. The dirty ratio is the size of the segments from the first
  dirty offset up to that point over the size of every segment below it.
* **Who is next** (:meth:`LogCleanerManager.grab_filthiest_compacted_log`): among the
  compacted (``cleanup.policy`` containing ``compact``), writable, not in progress, not
  uncleanable logs with data, those whose dirty ratio is above ``min.cleanable.dirty.ratio``
  or that hold dirty records older than ``max.compaction.lag.ms`` (KIP-354). kafkafs takes
  the logs past their maximum lag first (the longest overdue first), then the dirtiest;
  Kafka orders all of them by dirty ratio alone.
* **In progress** (Kafka's ``LogCleaningState``): a pass marks its partition in progress;
  :meth:`~LogCleanerManager.abort_and_pause_cleaning` (retention of a compacted log,
  truncation, topic deletion) asks a running pass to stop and waits for it, and pauses
  the partition until :meth:`~LogCleanerManager.resume_cleaning`
  (:meth:`~LogCleanerManager.paused` does both around a block).
* **Uncleanable partitions**: a pass that fails marks its partition uncleanable with the
  error text (for ``topics --describe``); later passes skip it until a backoff has passed --
  ``log.cleaner.backoff.ms`` doubled after each failure in a row, at most one hour
  (:data:`MAX_RETRY_BACKOFF_MS`; at least ``log.cleaner.backoff.ms``) -- or at once when
  the topic's config changed. Kafka keeps such a partition uncleanable until a restart. A
  successful pass clears the mark. Other partitions are never affected.
* **Checkpoints**: ``cleaner-offset-checkpoint`` in each log dir is read when the manager
  starts and rewritten after each successful pass (entries of partitions no longer loaded
  are dropped), through :mod:`kafkafs.log.checkpoint`.
* **Results**: the last :class:`CleanResult` of each partition (time, bytes and records read
  and written, records and tombstones dropped, duration, MB/s, or the error) for the
  daemon's log line and ``topics --describe``; :meth:`~LogCleanerManager.partition_status`
  puts it together with the dirty ratio and the uncleanable mark.

Thread-safe (one condition variable); never imports trio. Times are ms, sizes bytes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass

from . import checkpoint as ckpt
from .config import LogConfig
from .errors import LogCleaningAbortedError
from .log import Log
from .segment import LogSegment

log = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
MAX_RETRY_BACKOFF_MS = 3_600_000

TopicPartition = tuple  # (topic, partition)

_IN_PROGRESS = "in-progress"
_ABORTED = "aborted"


def now_ms() -> int:
    return int(time.time() * 1000)


def log_segments(lg_segments: list[LogSegment], start: int, end: int) -> list[LogSegment]:
    """The segments holding offsets in ``[start, end)`` of a log's segment list, oldest first
    (Kafka ``LogSegments.values(from, to)``: from the segment holding ``start``, or the first,
    to the last one whose base offset is below ``end``)."""
    if end <= start:
        return []
    bases = [s.base_offset for s in lg_segments]
    first = 0
    for i, b in enumerate(bases):
        if b <= start:
            first = i
    return [s for s in lg_segments[first:] if s.base_offset < end]


def non_active_segments_from(lg_segments: list[LogSegment], start: int) -> list[LogSegment]:
    """``LogSegments.nonActiveLogSegmentsFrom``: the segments from the one holding ``start``
    up to, not including, the active (last) one."""
    active = lg_segments[-1]
    if start > active.base_offset:
        return []
    return log_segments(lg_segments, start, active.base_offset)


@dataclass(frozen=True)
class OffsetsToClean:
    """``first_dirty_offset`` (inclusive), ``first_uncleanable_dirty_offset`` (exclusive)
    and whether the checkpoint must be reset to the first dirty offset (Kafka
    ``OffsetsToClean``)."""

    first_dirty_offset: int
    first_uncleanable_dirty_offset: int
    force_update_checkpoint: bool = False


def cleanable_offsets(lg: Log, last_clean_offset: int | None, now: int,
                      segments: list[LogSegment] | None = None) -> OffsetsToClean:
    """The range of dirty offsets that may be cleaned (``LogCleanerManager.cleanableOffsets``):
    see the module. ``segments``: a snapshot of the log's segments (default: taken now)."""
    segs = lg.segments() if segments is None else segments
    start = lg.log_start_offset
    checkpoint = start if last_clean_offset is None else last_clean_offset
    force = False
    if checkpoint < start:
        if not (lg.config.compact and lg.config.delete):
            log.warning("Resetting first dirty offset of %s to log start offset %d since the "
                        "checkpointed offset %d is invalid.", lg.name, start, checkpoint)
        first_dirty, force = start, True
    elif checkpoint > lg.log_end_offset:
        log.warning("The last checkpoint dirty offset for partition %s is %d, which is larger "
                    "than the log end offset %d. Resetting to the log start offset %d.",
                    lg.name, checkpoint, lg.log_end_offset, start)
        first_dirty, force = start, True
    else:
        first_dirty = checkpoint
    candidates = [lg.last_stable_offset, segs[-1].base_offset]
    lag = max(lg.config.min_compaction_lag_ms, 0)
    if lag > 0:
        for seg in non_active_segments_from(segs, first_dirty):
            if seg.largest_timestamp() > now - lag:
                candidates.append(seg.base_offset)
                break
    return OffsetsToClean(first_dirty, max(first_dirty, min(candidates)), force)


def calculate_cleanable_bytes(segments: list[LogSegment], first_dirty: int,
                              uncleanable_offset: int) -> tuple[int, int]:
    """``(first uncleanable offset, cleanable bytes)`` (``calculateCleanableBytes``): the base
    offset of the segment holding ``uncleanable_offset`` (the active one at the latest), and
    the size of the segments from the one holding ``first_dirty`` up to it."""
    first_uncleanable = next(iter(non_active_segments_from(segments, uncleanable_offset)),
                             segments[-1]).base_offset
    cleanable = sum(s.size for s in log_segments(segments, min(first_dirty, first_uncleanable),
                                                 first_uncleanable))
    return first_uncleanable, cleanable


def max_compaction_delay(lg: Log, segments: list[LogSegment], first_dirty: int,
                         now: int) -> int:
    """How long (ms) past ``max.compaction.lag.ms`` the oldest dirty record is
    (``maxCompactionDelay``, KIP-354): 0 when none is overdue. A segment's age is its first
    batch's timestamp."""
    stamps = [t for t in (s.rolling_based_timestamp() for s in
                          non_active_segments_from(segments, first_dirty))
              if t is not None and t > 0]
    earliest = min(stamps) if stamps else None
    clean_until = now - max(lg.config.max_compaction_lag_ms, 0)
    if earliest is not None and earliest < clean_until:
        return clean_until - earliest
    return 0


class LogToClean:
    """A log and its dirty range, measured (Kafka ``LogToClean``): ``first_dirty_offset``,
    ``first_uncleanable_offset`` (a segment base offset), ``clean_bytes`` (segments below the
    first dirty offset), ``cleanable_bytes``, ``total_bytes``, ``cleanable_ratio``,
    ``compaction_delay_ms`` (> 0: past ``max.compaction.lag.ms``, compact now)."""

    def __init__(self, tp: TopicPartition, lg: Log, first_dirty_offset: int,
                 uncleanable_offset: int, compaction_delay_ms: int = 0,
                 segments: list[LogSegment] | None = None):
        segs = lg.segments() if segments is None else segments
        self.topic_partition = tp
        self.log = lg
        self.first_dirty_offset = first_dirty_offset
        self.compaction_delay_ms = compaction_delay_ms
        self.clean_bytes = sum(s.size for s in segs if s.base_offset < first_dirty_offset)
        self.first_uncleanable_offset, self.cleanable_bytes = calculate_cleanable_bytes(
            segs, first_dirty_offset, uncleanable_offset)
        self.total_bytes = self.clean_bytes + self.cleanable_bytes
        self.cleanable_ratio = self.cleanable_bytes / self.total_bytes if self.total_bytes \
            else 0.0

    @property
    def need_compaction_now(self) -> bool:
        return self.compaction_delay_ms > 0

    def __repr__(self):
        return (f"LogToClean({self.log.name}, dirty=[{self.first_dirty_offset}, "
                f"{self.first_uncleanable_offset}), ratio={self.cleanable_ratio:.3f})")


@dataclass(frozen=True)
class CleanResult:
    """The outcome of one cleaning pass of a partition.

    ``time_ms``: when it ended (epoch ms); ``first_dirty_offset`` and ``end_offset``: the
    dirty range it cleaned (``end_offset`` is the next first dirty offset); ``duration_ms``;
    ``bytes_read`` / ``bytes_written``: of the segments rewritten (``map_bytes_read``: read
    to build the offset map); ``records_read`` / ``records_written``; ``records_dropped``;
    ``tombstones_dropped``; ``invalid_records`` (records without a key, dropped);
    ``mb_per_sec`` (MiB of log rewritten per second); ``buffer_utilization`` (of the offset
    map); ``segments_before`` / ``segments_after``; ``error``: the error text of a failed
    pass (None when it succeeded); ``aborted``: the pass was aborted (paused, truncated,
    deleted, shut down) -- neither success nor failure.
    """

    topic: str
    partition: int
    time_ms: int
    first_dirty_offset: int = 0
    end_offset: int = 0
    duration_ms: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    map_bytes_read: int = 0
    records_read: int = 0
    records_written: int = 0
    tombstones_dropped: int = 0
    invalid_records: int = 0
    buffer_utilization: float = 0.0
    segments_before: int = 0
    segments_after: int = 0
    error: str | None = None
    aborted: bool = False

    @property
    def records_dropped(self) -> int:
        return self.records_read - self.records_written

    @property
    def mb_per_sec(self) -> float:
        return self.bytes_read / (1024 * 1024) / (self.duration_ms / 1000) \
            if self.duration_ms > 0 else 0.0

    @property
    def ok(self) -> bool:
        return self.error is None and not self.aborted

    def log_line(self) -> str:
        """One line for the daemon's log."""
        name = f"{self.topic}-{self.partition}"
        if self.error is not None:
            return f"Cleaning of {name} failed (marked uncleanable): {self.error}"
        if self.aborted:
            return f"Cleaning of {name} was aborted"
        return (f"Cleaned {name} (dirty section [{self.first_dirty_offset}, "
                f"{self.end_offset})): {self.bytes_read / 1048576:.1f} MB read, "
                f"{self.bytes_written / 1048576:.1f} MB written, "
                f"{self.records_dropped} of {self.records_read} records dropped "
                f"({self.tombstones_dropped} tombstones, {self.invalid_records} without key), "
                f"{self.segments_before} -> {self.segments_after} segments, "
                f"{self.duration_ms / 1000:.1f} s ({self.mb_per_sec:.1f} MB/s)")

    def to_dict(self) -> dict:
        """Every field and derived value, JSON-ready."""
        d = asdict(self)
        d.update(records_dropped=self.records_dropped, mb_per_sec=self.mb_per_sec)
        return d


@dataclass(frozen=True)
class UncleanableInfo:
    """Why and since when a partition is uncleanable: ``error`` text, ``since_ms``,
    ``failures`` in a row, ``retry_at_ms`` (the earliest retry unless the config changes),
    ``config`` (the topic config the pass failed with)."""

    error: str
    since_ms: int
    failures: int
    retry_at_ms: int
    config: LogConfig


@dataclass(frozen=True)
class CleanerStatus:
    """What ``topics --describe`` shows of a partition's cleaning: ``cleanup_policy``,
    ``compact``, ``first_dirty_offset``, ``first_uncleanable_offset``, ``dirty_ratio``,
    ``cleanable_bytes``, ``total_bytes``, ``compaction_delay_ms``, ``in_progress``,
    ``paused``, ``uncleanable`` (an :class:`UncleanableInfo` or None), ``last_result`` (a
    :class:`CleanResult` or None)."""

    cleanup_policy: str
    compact: bool
    first_dirty_offset: int
    first_uncleanable_offset: int
    dirty_ratio: float
    cleanable_bytes: int
    total_bytes: int
    compaction_delay_ms: int
    in_progress: bool
    paused: bool
    uncleanable: UncleanableInfo | None
    last_result: CleanResult | None


class LogCleanerManager:
    """The cleaner's state over a set of log dirs (Kafka ``LogCleanerManager``); see the
    module.

    ``log_dirs``: the log dir roots (each holds a ``cleaner-offset-checkpoint``); ``logs``:
    the live mapping ``(topic, partition) -> Log`` (the :class:`LogManager`'s ``logs``) or a
    callable returning one; ``backoff_ms``: ``log.cleaner.backoff.ms``; ``clock``: epoch ms
    (tests); ``read_only``: never write a checkpoint.
    """

    def __init__(self, log_dirs, logs: Mapping | Callable[[], Mapping], *,
                 backoff_ms: int = 15000, clock: Callable[[], int] = now_ms,
                 read_only: bool = False):
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self._logs = logs
        self.backoff_ms = backoff_ms
        self.clock = clock
        self.read_only = read_only
        self._cond = threading.Condition(threading.RLock())
        self._states: dict[TopicPartition, object] = {}  # in-progress / aborted / paused count
        self._uncleanable: dict[TopicPartition, UncleanableInfo] = {}
        self._results: dict[TopicPartition, CleanResult] = {}
        self._checkpoints: dict[str, dict[TopicPartition, int]] = {
            d: self._read_checkpoint(d) for d in self.log_dirs}
        self.dirtiest_ratio = 0.0
        self.time_of_last_run_ms = clock()

    # -- logs -------------------------------------------------------------------------------
    def logs(self) -> dict[TopicPartition, Log]:
        """A snapshot of the live logs."""
        logs = self._logs() if callable(self._logs) else self._logs
        return dict(logs)

    @staticmethod
    def log_dir_of(lg: Log) -> str:
        return os.path.dirname(os.path.abspath(lg.dir))

    # -- checkpoints ------------------------------------------------------------------------
    @staticmethod
    def _read_checkpoint(log_dir: str) -> dict[TopicPartition, int]:
        path = os.path.join(log_dir, CLEANER_OFFSET_CHECKPOINT)
        try:
            return dict(ckpt.read_offset_checkpoint(path))
        except FileNotFoundError:
            return {}
        except Exception as exc:  # noqa: BLE001 (garbled: clean from the log start offsets)
            log.warning("Ignoring unreadable cleaner checkpoint %s: %s", path, exc)
            return {}

    def all_cleaner_checkpoints(self) -> dict[TopicPartition, int]:
        """Every partition's first dirty offset as checkpointed (``allCleanerCheckpoints``)."""
        with self._cond:
            out: dict[TopicPartition, int] = {}
            for entries in self._checkpoints.values():
                out.update(entries)
            return out

    def update_checkpoints(self, log_dir: str, update: tuple[TopicPartition, int] | None = None,
                           remove: TopicPartition | None = None) -> None:
        """Rewrite ``log_dir``'s ``cleaner-offset-checkpoint``: entries of partitions no
        longer loaded dropped, ``remove`` dropped, ``update`` (tp, offset) set
        (``updateCheckpoints``). A write error is logged (the file keeps its old content)."""
        log_dir = os.path.abspath(log_dir)
        with self._cond:
            entries = self._checkpoints.setdefault(log_dir, {})
            live = self.logs()
            entries = {tp: o for tp, o in entries.items() if tp in live and tp != remove}
            if update is not None:
                entries[update[0]] = update[1]
            self._checkpoints[log_dir] = entries
            if self.read_only:
                return
            path = os.path.join(log_dir, CLEANER_OFFSET_CHECKPOINT)
            try:
                ckpt.write_offset_checkpoint(path, entries)
            except OSError as exc:
                log.error("Failed to write %s: %s", path, exc)

    def remove_partition(self, tp: TopicPartition, log_dir: str | None = None) -> None:
        """Forget a deleted partition: its checkpoint entry (in ``log_dir``, or every log
        dir), uncleanable mark and last result."""
        with self._cond:
            self._uncleanable.pop(tp, None)
            self._results.pop(tp, None)
            for d in ([os.path.abspath(log_dir)] if log_dir else list(self._checkpoints)):
                if tp in self._checkpoints.get(d, {}):
                    self.update_checkpoints(d, remove=tp)

    # -- picking a log ----------------------------------------------------------------------
    def log_to_clean(self, tp: TopicPartition, lg: Log, now: int | None = None) -> LogToClean:
        """Measure ``lg`` (:class:`LogToClean`); a checkpoint that had to be reset is
        rewritten. Raises what reading the segments raises."""
        now = self.clock() if now is None else now
        segs = lg.segments()
        offsets = cleanable_offsets(lg, self.all_cleaner_checkpoints().get(tp), now, segs)
        if offsets.force_update_checkpoint:
            self.update_checkpoints(self.log_dir_of(lg),
                                    update=(tp, offsets.first_dirty_offset))
        delay = max_compaction_delay(lg, segs, offsets.first_dirty_offset, now)
        return LogToClean(tp, lg, offsets.first_dirty_offset,
                          offsets.first_uncleanable_dirty_offset, delay, segs)

    def grab_filthiest_compacted_log(self, now: int | None = None) -> LogToClean | None:
        """Choose the next log to clean and mark it in progress
        (``grabFilthiestCompactedLog``), or None. A log that cannot even be measured is
        marked uncleanable (and skipped). See the module for the order."""
        now = self.clock() if now is None else now
        with self._cond:
            self.time_of_last_run_ms = now
            candidates: list[LogToClean] = []
            for tp, lg in self.logs().items():
                if not (lg.config.compact and lg.writable) or lg.closed or \
                        tp in self._states or self.is_uncleanable(tp, lg, now):
                    continue
                try:
                    ltc = self.log_to_clean(tp, lg, now)
                except Exception as exc:  # noqa: BLE001 (marks only this partition)
                    self.mark_uncleanable(tp, lg, f"Failed to calculate log cleaning stats for "
                                                  f"partition {lg.name}: {exc}", now)
                    continue
                if ltc.total_bytes > 0:
                    candidates.append(ltc)
            self.dirtiest_ratio = max((c.cleanable_ratio for c in candidates), default=0.0)
            cleanable = [c for c in candidates
                         if (c.need_compaction_now and c.cleanable_bytes > 0)
                         or c.cleanable_ratio > c.log.config.min_cleanable_dirty_ratio]
            if not cleanable:
                return None
            best = max(cleanable, key=lambda c: (c.need_compaction_now and c.cleanable_bytes > 0,
                                                 c.compaction_delay_ms, c.cleanable_ratio))
            self._states[best.topic_partition] = _IN_PROGRESS
            return best

    # -- in progress, abort, pause ----------------------------------------------------------
    def begin_cleaning(self, tp: TopicPartition, timeout: float | None = None) -> None:
        """Mark ``tp`` in progress for a pass asked for now (``kafkafs compact``), waiting
        while another pass or a pause holds it. Raises LogCleaningAbortedError when
        ``timeout`` (s) passes first."""
        with self._cond:
            if not self._cond.wait_for(lambda: tp not in self._states, timeout):
                raise LogCleaningAbortedError(
                    f"{tp[0]}-{tp[1]} is being cleaned or its cleaning is paused")
            self._states[tp] = _IN_PROGRESS

    def in_progress(self, tp: TopicPartition) -> bool:
        with self._cond:
            return self._states.get(tp) in (_IN_PROGRESS, _ABORTED)

    def check_cleaning_aborted(self, tp: TopicPartition) -> None:
        """Raise LogCleaningAbortedError when an abort of ``tp``'s pass was asked for
        (``checkCleaningAborted``)."""
        with self._cond:
            if self._states.get(tp) == _ABORTED:
                raise LogCleaningAbortedError(f"the cleaning of {tp[0]}-{tp[1]} was aborted")

    def done_cleaning(self, tp: TopicPartition, log_dir: str, end_offset: int | None) -> None:
        """End ``tp``'s pass (``doneCleaning``): with ``end_offset`` (a pass that succeeded)
        the checkpoint becomes it; an aborted pass leaves the partition paused for whoever
        aborted it."""
        with self._cond:
            state = self._states.get(tp)
            if state == _IN_PROGRESS:
                if end_offset is not None:
                    self.update_checkpoints(log_dir, update=(tp, end_offset))
                del self._states[tp]
            elif state == _ABORTED:
                self._states[tp] = 1  # paused once
            self._cond.notify_all()

    def abort_and_pause_cleaning(self, tp: TopicPartition, timeout: float | None = None
                                 ) -> None:
        """Stop ``tp``'s pass if one runs and pause its cleaning until
        :meth:`resume_cleaning` (``abortAndPauseCleaning``); pauses nest. Waits until the
        pass has stopped; raises LogCleaningAbortedError when ``timeout`` (s) passes first
        (the pause then holds anyway)."""
        with self._cond:
            state = self._states.get(tp)
            if state == _IN_PROGRESS:
                self._states[tp] = _ABORTED  # done_cleaning turns it into our pause
                stopped = self._cond.wait_for(
                    lambda: self._states.get(tp) in (None, 1) or
                    isinstance(self._states.get(tp), int), timeout)
                if stopped and self._states.get(tp) is None:
                    self._states[tp] = 1
            else:
                # no pass, or another caller's abort on its way: wait for it, then pause
                stopped = self._cond.wait_for(lambda: self._states.get(tp) != _ABORTED,
                                              timeout)
                if stopped:
                    state = self._states.get(tp)
                    self._states[tp] = 1 if state is None else state + 1
            if not stopped:
                raise LogCleaningAbortedError(f"the pass over {tp[0]}-{tp[1]} did not stop "
                                              f"within {timeout} s")

    def abort_cleaning(self, tp: TopicPartition, timeout: float | None = None) -> None:
        """Stop ``tp``'s pass if one runs, and let cleaning go on afterwards
        (``abortCleaning``)."""
        with self._cond:
            self.abort_and_pause_cleaning(tp, timeout)
            self.resume_cleaning([tp])

    def resume_cleaning(self, tps) -> None:
        """Undo one pause of each partition (``resumeCleaning``). Raises ValueError for a
        partition that is not paused."""
        with self._cond:
            for tp in tps:
                state = self._states.get(tp)
                if not isinstance(state, int):
                    raise ValueError(  # noqa: TRY004 (a state, not a type, is wrong)f"Compaction for partition {tp[0]}-{tp[1]} cannot be "
                                     f"resumed since it is not paused ({state}).")
                if state == 1:
                    del self._states[tp]
                else:
                    self._states[tp] = state - 1
            self._cond.notify_all()

    @contextlib.contextmanager
    def paused(self, tp: TopicPartition, timeout: float | None = None) -> Iterator[None]:
        """``with manager.paused(tp):`` -- no pass over ``tp`` runs inside (a running one is
        aborted first): for retention of a compacted log, truncation, deletion."""
        self.abort_and_pause_cleaning(tp, timeout)
        try:
            yield
        finally:
            self.resume_cleaning([tp])

    def is_paused(self, tp: TopicPartition) -> bool:
        with self._cond:
            return isinstance(self._states.get(tp), int)

    # -- uncleanable partitions ---------------------------------------------------------------
    def mark_uncleanable(self, tp: TopicPartition, lg: Log, error: str,
                         now: int | None = None) -> UncleanableInfo:
        """Mark ``tp`` uncleanable after a failed pass (``markPartitionUncleanable``), with
        the retry backoff of the module. Returns the mark."""
        now = self.clock() if now is None else now
        with self._cond:
            old = self._uncleanable.get(tp)
            failures = old.failures + 1 if old is not None and old.config == lg.config else 1
            delay = max(self.backoff_ms, min(self.backoff_ms * 2 ** (failures - 1),
                                             MAX_RETRY_BACKOFF_MS))
            info = UncleanableInfo(error, old.since_ms if old is not None else now, failures,
                                   now + delay, lg.config)
            self._uncleanable[tp] = info
            return info

    def clear_uncleanable(self, tp: TopicPartition) -> None:
        with self._cond:
            self._uncleanable.pop(tp, None)

    def uncleanable(self, tp: TopicPartition) -> UncleanableInfo | None:
        """The uncleanable mark of ``tp``, or None."""
        with self._cond:
            return self._uncleanable.get(tp)

    def uncleanable_partitions(self) -> dict[TopicPartition, UncleanableInfo]:
        with self._cond:
            return dict(self._uncleanable)

    def is_uncleanable(self, tp: TopicPartition, lg: Log, now: int | None = None) -> bool:
        """Whether passes skip ``tp`` now: marked, its backoff not over and its config
        unchanged."""
        now = self.clock() if now is None else now
        with self._cond:
            info = self._uncleanable.get(tp)
            return info is not None and now < info.retry_at_ms and lg.config == info.config

    def maintain_uncleanable_partitions(self) -> None:
        """Forget the marks of partitions no longer loaded (``maintainUncleanablePartitions``)."""
        with self._cond:
            live = self.logs()
            for tp in [tp for tp in self._uncleanable if tp not in live]:
                del self._uncleanable[tp]

    # -- results and status -------------------------------------------------------------------
    def record_result(self, tp: TopicPartition, result: CleanResult) -> None:
        with self._cond:
            self._results[tp] = result

    def last_result(self, tp: TopicPartition) -> CleanResult | None:
        """The last pass's :class:`CleanResult` of ``tp``, or None."""
        with self._cond:
            return self._results.get(tp)

    def partition_status(self, tp: TopicPartition, lg: Log, now: int | None = None
                         ) -> CleanerStatus:
        """The :class:`CleanerStatus` of ``lg`` now (reads segment sizes and, with a
        compaction lag, timestamps; call it off an event loop)."""
        now = self.clock() if now is None else now
        segs = lg.segments()
        offsets = cleanable_offsets(lg, self.all_cleaner_checkpoints().get(tp), now, segs)
        ltc = LogToClean(tp, lg, offsets.first_dirty_offset,
                         offsets.first_uncleanable_dirty_offset,
                         max_compaction_delay(lg, segs, offsets.first_dirty_offset, now), segs)
        with self._cond:
            state = self._states.get(tp)
            return CleanerStatus(
                cleanup_policy=lg.config.cleanup_policy, compact=lg.config.compact,
                first_dirty_offset=ltc.first_dirty_offset,
                first_uncleanable_offset=ltc.first_uncleanable_offset,
                dirty_ratio=ltc.cleanable_ratio, cleanable_bytes=ltc.cleanable_bytes,
                total_bytes=ltc.total_bytes, compaction_delay_ms=ltc.compaction_delay_ms,
                in_progress=state in (_IN_PROGRESS, _ABORTED), paused=isinstance(state, int),
                uncleanable=self._uncleanable.get(tp), last_result=self._results.get(tp))
