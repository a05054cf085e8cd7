"""Open a partition directory and recover it after an unclean shutdown (Kafka ``LogLoader``).

Order, as Kafka does it:

1. Remove leftovers: ``*.deleted`` and ``*.cleaned`` files; ``*.swap`` files at or past the
   smallest ``.cleaned`` offset (an interrupted clean); the files the other ``.swap``
   segments replace (offsets from the smallest swap base offset up to the largest swap
   next offset) are deleted and every remaining ``.swap`` file loses its suffix (the swap
   had completed; an index's ``.swap`` alone too: the rename of the log came first).
2. Delete index files whose ``.log`` is gone, and producer snapshots that cannot be read
   (Kafka deletes a snapshot it fails to load and rebuilds the state from the log), and
   ``<offset>.snapshot.tmp`` files (a snapshot kafkafs was writing when it died).
3. Open every ``.log`` in offset order; a segment whose index files are missing or fail the
   sanity check (the active segment's offset and time indexes, every segment's
   ``.txnindex``: Kafka's ``TransactionIndex.sanityCheck``) is recovered on its own. After
   an unclean shutdown the segments step 4 recovers are not checked (KAFKA-7283: they are
   validated and their indexes rebuilt anyway).
4. After an unclean shutdown, recover every segment from the recovery point on: validate
   every batch, rebuild the indexes, truncate at the first invalid batch and delete every
   later segment.
5. Build the producer state (:meth:`Log.load_producer_state
   <kafkafs.log.log.Log.load_producer_state>`): stray snapshots deleted, the newest one at
   or below the log end offset loaded, the batches after it replayed.

Recovering a segment (steps 3 and 4) also rebuilds its ``.txnindex``: as Kafka's
``LogLoader.recoverSegment``, the producer state at the segment's base offset is rebuilt from
the snapshots and the log first, the segment's batches are applied to it, and a snapshot is
written at the segment's end.

Read-only loads skip 1, 2 and 4, build the producer state in memory only, and never write a
byte. They record where step 4 would start (``Log.txn_recovery_point``): readers do not
trust a ``.txnindex`` that recovery would rebuild, and compute its entries in memory
(:mod:`kafkafs.log.txnscan`). A writable load does not rebuild a missing ``.txnindex`` below
the recovery point (neither does Kafka's, which takes it for an empty one): readers compute
those entries in memory too, and nothing is written for them.

Every file is reached through the partition dir's descriptor
(:class:`~kafkafs.log.safeio.Dir`), and only regular files take part: a planted link, FIFO
or device does not exist for the loader (warned once). A ``.log`` that is one is skipped;
an index that is one counts as missing, so a writable load recovers the segment and replaces
the planted entry by a rebuilt index (unlinking it: nothing it points to changes).

The same steps run in two ways: :func:`load_log` carries them out (the daemon's startup,
``kafkafs check --repair``) and :func:`plan_load` only works out what they would do, reading
the files read-only, and returns the list of :class:`LoadAction` (``kafkafs check``). Both go
through one function per step; the difference is the object that touches the disk
(:class:`_Executor` or :class:`_Planner`). ``thorough=True`` adds what ``kafkafs check`` looks
for beyond a startup: every segment's batches and indexes are verified, a segment with a bad
index is rebuilt, and recovery runs from the first segment with invalid data on.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

from . import safeio
from .config import LogConfig
from .errors import CorruptIndexError, LogError
from .log import Log
from .names import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    filename_prefix,
    parse_segment_filename,
)
from .producer_replay import rebuild_producer_state, try_take_snapshot
from .producer_state import (
    CorruptSnapshotError,
    ProducerStateManager,
    parse_snapshot_filename,
    read_snapshot,
)
from .safeio import TMP_SUFFIX
from .segment import LogSegment, SegmentScan

log = logging.getLogger(__name__)

#: the loader parses every name of every partition dir several times: the names repeat from
#: one partition to the next (00000000000000000000.log, ...)
_parse = functools.lru_cache(maxsize=1 << 16)(parse_segment_filename)

#: kinds of :class:`LoadAction`, in the order the loader meets them
ACTION_KINDS = (
    "stray-file",        # a *.deleted / *.cleaned file: deleted
    "invalid-swap",      # a *.swap at or past the smallest .cleaned offset: deleted
    "swapped-out",       # a segment file a completed swap replaces: deleted
    "swap",              # a *.swap file: renamed without the suffix
    "orphan-index",      # an .index/.timeindex/.txnindex without its .log: deleted
    "corrupt-snapshot",  # a producer .snapshot that cannot be read: deleted (state rebuilt)
    "missing-index",     # a segment without .index or .timeindex: recovered (indexes rebuilt)
    "corrupt-index",     # a segment whose index fails a check: recovered (indexes rebuilt)
    "unflushed",         # a segment at or past the recovery point after an unclean shutdown
    "recover",           # (thorough) a segment from the first one with invalid data on
    "invalid-tail",      # after a clean shutdown, invalid bytes after the active segment's
                         # last index entry: the segment is recovered
    "truncate",          # recovery truncates a .log at its first invalid or incomplete batch
    "delete-segment",    # a segment after a truncated one: deleted
    "no-segments",       # no .log at all: an empty segment is created
    "log-start-above-end",  # the checkpointed log start offset is past the log end offset
    "offsets-out-of-order",  # (thorough) offsets go back: nothing Kafka's recovery repairs
)

#: kinds that change nothing when carried out on a healthy segment (re-validation only)
REVALIDATION_KINDS = ("unflushed", "recover")
#: kinds that are reported and never acted on
UNREPAIRABLE_KINDS = ("offsets-out-of-order",)


@dataclass
class LoadAction:
    """One step the loader takes, or -- planned -- would take, in a partition directory.

    ``kind``: one of :data:`ACTION_KINDS`; ``path``: the file concerned (absolute when the
    directory was given absolute); ``message``: what is wrong, in the words of Kafka's
    ``LogLoader``/``LogSegment``/index classes where they have words for it; ``action``: what
    the loader does about it; ``position``: byte position in ``path`` (a batch in a ``.log``)
    or None; ``nbytes``: bytes removed by a truncation, or None; ``base_offset``: the segment
    concerned, or None.
    """

    kind: str
    path: str
    message: str
    action: str
    position: int | None = None
    nbytes: int | None = None
    base_offset: int | None = None

    def to_dict(self) -> dict:
        """The action as a JSON-ready dict (every field)."""
        return dict(self.__dict__)


class UnrepairableLogError(LogError):
    """A partition holds damage that Kafka's recovery does not repair (offsets that go back);
    raised by a thorough :func:`load_log` before it changes a segment."""


# -- the two ways of carrying the steps out ----------------------------------------------------
class _Executor:
    """Carries the loader's steps out on disk; reports each to ``on_action`` once done."""

    dry = False

    def __init__(self, dir: safeio.Dir, config: LogConfig,
                 on_action: Callable[[LoadAction], None] | None = None):
        self.pdir = dir
        self.dir = dir.path
        self.config = config
        self.on_action = on_action
        self.actions: list[LoadAction] = []
        self.segments: list[LogSegment] = []  # set by _load_segments: recovery replays them
        self.log_start_offset = 0
        self._names: set[str] | None = None

    def report(self, action: LoadAction) -> None:
        self.actions.append(action)
        if action.kind in ("stray-file", "invalid-swap", "swapped-out", "swap", "unflushed",
                           "recover", "no-segments"):
            log.info("%s: %s", action.message, action.action)
        else:
            log.warning("%s: %s", action.message, action.action)
        if self.on_action is not None:
            self.on_action(action)

    def names(self) -> set[str]:
        # listed once, then kept up to date by unlink and rename (the steps change names
        # through them only; opening a .swap segment may create a file: listed again)
        if self._names is None:
            self._names = self.pdir.files()
        return set(self._names)

    def unlink(self, name: str, action: LoadAction) -> None:
        self.pdir.unlink(name)
        if self._names is not None:
            self._names.discard(name)
        self.report(action)

    def rename(self, old: str, new: str, action: LoadAction) -> None:
        self.pdir.rename(old, new)
        if self._names is not None:
            self._names.discard(old)
            self._names.add(new)
        self.report(action)

    def swap_next_offset(self, base: int) -> int:
        self._names = None
        swap = LogSegment(self.pdir, base, self.config, suffix=SWAP_SUFFIX,
                          check_indexes=False)
        try:
            return swap.read_next_offset()
        finally:
            swap.close()

    def open_segment(self, base: int) -> LogSegment:
        return LogSegment(self.pdir, base, self.config, check_indexes=False)

    def size(self, seg: LogSegment) -> int:
        return seg.size

    def scan(self, seg: LogSegment) -> SegmentScan:
        return seg.validate()

    def sanity_check(self, seg: LogSegment) -> None:
        seg.sanity_check()
        _raise_order_problem(seg, seg.size)

    def scan_tail(self, seg: LogSegment):
        end, error = seg.scan_tail()
        if error is not None:
            log.warning("Invalid data at the end of %s: %s", seg.log_path, error.reason)
        return end, error

    def recover(self, seg: LogSegment) -> SegmentScan:
        # LogLoader.recoverSegment: the producer state at the segment's base offset (from
        # the snapshots and the segments before it) rebuilds its .txnindex; a snapshot at its
        # end spares the next segment's recovery the replay
        pm = ProducerStateManager(self.pdir)
        rebuild_producer_state(pm, self.segments, self.log_start_offset, seg.base_offset,
                               False, log_name=self.dir)
        seg.recover(pm)
        try_take_snapshot(pm, self.dir)
        return seg.last_recovery

    def delete_segment(self, seg: LogSegment, action: LoadAction) -> None:
        seg.delete()
        self.report(action)

    def close(self) -> None:
        pass


class _Planner:
    """Works the loader's steps out without changing a byte: files are opened read-only, and
    deletions, renames and truncations are applied to a simulated listing and sizes."""

    dry = True

    def __init__(self, dir: safeio.Dir, config: LogConfig, scans: dict | None = None):
        self.pdir = dir
        self.dir = dir.path
        self.config = config
        # simulated name -> the real name holding its bytes (None: an empty file the
        # executor would create)
        self.files: dict[str, str | None] = {n: n for n in dir.files()}
        self.actions: list[LoadAction] = []
        self.sizes: dict[int, int] = {}
        self.recovered: dict[int, SegmentScan] = {}
        self.scans = {} if scans is None else scans
        self.opened: list[LogSegment] = []

    def report(self, action: LoadAction) -> None:
        self.actions.append(action)

    def names(self) -> set[str]:
        return set(self.files)

    def unlink(self, name: str, action: LoadAction) -> None:
        self.files.pop(name, None)
        self.report(action)

    def rename(self, old: str, new: str, action: LoadAction) -> None:
        self.files[new] = self.files.pop(old)
        self.report(action)

    def swap_next_offset(self, base: int) -> int:
        swap = LogSegment(self.pdir, base, self.config, suffix=SWAP_SUFFIX, writable=False,
                          check_indexes=False)
        try:
            next_offset = swap.read_next_offset()
        finally:
            swap.close()
        # the executor opens the swap segment writable, which creates a missing .index.swap
        index = filename_prefix(base) + INDEX_SUFFIX + SWAP_SUFFIX
        self.files.setdefault(index, None)
        return next_offset

    def open_segment(self, base: int) -> LogSegment:
        real = self.files.get(filename_prefix(base) + LOG_SUFFIX) or ""
        suffix = SWAP_SUFFIX if real.endswith(SWAP_SUFFIX) else ""
        seg = LogSegment(self.pdir, base, self.config, writable=False, suffix=suffix,
                         check_indexes=False)
        self.opened.append(seg)
        self.sizes[base] = seg.size
        return seg

    def size(self, seg: LogSegment) -> int:
        return self.sizes[seg.base_offset]

    def _scan(self, seg: LogSegment, end: int) -> SegmentScan:
        key = (seg.log_path, end)
        if key not in self.scans:
            self.scans[key] = seg.validate(end=end)
        return self.scans[key]

    def scan(self, seg: LogSegment) -> SegmentScan:
        return self._scan(seg, self.sizes[seg.base_offset])

    def sanity_check(self, seg: LogSegment) -> None:
        # both files exist in the simulated listing (the caller checked); one may be an
        # empty file the executor would create, which reads as an empty index here
        seg.index.sanity_check()
        seg.time_index.sanity_check()
        seg.txn_index.sanity_check()
        _raise_order_problem(seg, max(self.sizes[seg.base_offset], seg.reload_size()))

    def scan_tail(self, seg: LogSegment):
        if seg.base_offset in self.recovered:
            return self.sizes[seg.base_offset], None
        return seg.scan_tail()

    def recover(self, seg: LogSegment) -> SegmentScan:
        scan = self._scan(seg, self.sizes[seg.base_offset])
        self.sizes[seg.base_offset] = scan.valid_bytes
        self.recovered[seg.base_offset] = scan
        return scan

    def delete_segment(self, seg: LogSegment, action: LoadAction) -> None:
        prefix = filename_prefix(seg.base_offset)
        for name in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            self.files.pop(prefix + name, None)
        self.sizes.pop(seg.base_offset, None)
        self.report(action)

    def next_offset(self, seg: LogSegment) -> int:
        """The offset after the segment's last batch once the plan is carried out."""
        scan = self.recovered.get(seg.base_offset)
        if scan is not None:
            return seg.base_offset if scan.next_offset is None else scan.next_offset
        return seg.read_next_offset()

    def close(self) -> None:
        for seg in self.opened:
            seg.close()
        self.opened = []


# -- the steps ---------------------------------------------------------------------------------
def _remove_leftovers(ops) -> None:
    dir = ops.dir
    names = ops.names()
    parsed = [(n, _parse(n)) for n in sorted(names)]
    cleaned = [p[0] for n, p in parsed if p and p[2] == CLEANED_SUFFIX]
    min_cleaned = min(cleaned) if cleaned else None
    log_swaps = []
    for name, p in parsed:
        if not p:
            continue
        base, kind, suffix = p
        path = os.path.join(dir, name)
        if suffix in (DELETED_SUFFIX, CLEANED_SUFFIX):
            ops.unlink(name, LoadAction(
                "stray-file", path, f"Deleting stray temporary file {path}",
                f"delete the {suffix} file", base_offset=base))
        elif suffix == SWAP_SUFFIX:
            if min_cleaned is not None and base >= min_cleaned:
                ops.unlink(name, LoadAction(
                    "invalid-swap", path,
                    f"Deleting invalid swap file {path} minCleanedFileOffset: {min_cleaned}",
                    "delete the .swap file (part of an interrupted clean)", base_offset=base))
            elif kind == LOG_SUFFIX:
                log_swaps.append(base)
    # LogLoader.load: the files the valid swaps replace -- every non-swap file whose offset is
    # in [smallest swap base offset, largest swap next offset) -- go; an empty swap segment
    # replaces at least the files at its own base offset (whose .txnindex would otherwise
    # survive beside the swapped-in segment)
    if log_swaps:
        lo = min(log_swaps)
        hi = max(max(ops.swap_next_offset(b), b + 1) for b in log_swaps)
        for name in sorted(ops.names()):
            p = _parse(name)
            if p and p[2] == "" and lo <= p[0] < hi:
                ops.unlink(name, LoadAction(
                    "swapped-out", os.path.join(dir, name),
                    f"Deleting segment files {name} that is compacted but has not been deleted "
                    "yet.", f"delete it: the {SWAP_SUFFIX} files replace offsets [{lo}, {hi})",
                    base_offset=p[0]))
    # every remaining .swap file is renamed, a log's or an index's alone (a swap interrupted
    # between the renames of a segment's files)
    for name in sorted(ops.names()):
        p = _parse(name)
        if p and p[2] == SWAP_SUFFIX:
            final = f"{filename_prefix(p[0])}{p[1]}"
            ops.rename(name, final, LoadAction(
                "swap", os.path.join(dir, name),
                f"Recovering file {name} by renaming from {SWAP_SUFFIX} files.",
                f"rename it to {final} (the swap had completed)", base_offset=p[0]))
    # indexes without a log file
    names = ops.names()
    for name in sorted(names):
        p = _parse(name)
        if p and p[2] == "" and p[1] in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX) \
                and f"{filename_prefix(p[0])}{LOG_SUFFIX}" not in names:
            path = os.path.join(dir, name)
            ops.unlink(name, LoadAction(
                "orphan-index", path,
                f"Found an orphaned index file {path}, with no corresponding log file.",
                "delete it", base_offset=p[0]))


def _remove_corrupt_snapshots(ops) -> None:
    """Delete the producer snapshots that cannot be read, and unfinished ones
    (``<offset>.snapshot.tmp``). Kafka deletes one when it fails to load it
    (``ProducerStateManager.loadFromSnapshot``) and falls back to an older snapshot or the
    log; doing it for every snapshot up front leaves the same state and lets a planned load
    name each one."""
    for name in sorted(ops.names()):
        offset = parse_snapshot_filename(name)
        if offset is None:
            tmp_of = parse_snapshot_filename(name[:-len(TMP_SUFFIX)]) \
                if name.endswith(TMP_SUFFIX) else None
            if tmp_of is not None:  # our write_snapshot died before its rename
                path = os.path.join(ops.dir, name)
                ops.unlink(name, LoadAction(
                    "stray-file", path, f"Deleting stray temporary file {path}",
                    "delete the unfinished snapshot (kafkafs writes <name>.tmp, then renames "
                    "it)", base_offset=tmp_of))
            continue
        path = os.path.join(ops.dir, name)
        try:
            read_snapshot(path, dir=ops.pdir)
        except FileNotFoundError:
            continue  # deleted meanwhile (beside a running daemon: retention)
        except CorruptSnapshotError as exc:
            ops.unlink(name, LoadAction(
                "corrupt-snapshot", path,
                f"Failed to load producer snapshot from '{path}': {exc.reason}",
                "delete it: the producer state is rebuilt from an older snapshot or the log "
                "(as Kafka does with a snapshot it cannot read)", base_offset=offset))


def _path(seg: LogSegment, kind: str = LOG_SUFFIX) -> str:
    """The absolute path of the segment's ``kind`` file under its final name: a planned load
    reads a swapped-in segment from its ``.swap`` files, the loader renames them first."""
    return os.path.abspath(os.path.join(seg.dir, filename_prefix(seg.base_offset) + kind))


def _unswap(seg: LogSegment, text: str) -> str:
    """``text`` with the paths of a segment read from its ``.swap`` files (planned loads)
    given under their final names."""
    if not seg.suffix:
        return text
    for kind in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
        text = text.replace(_path(seg, kind) + seg.suffix, _path(seg, kind))
    return text


def _index_order_problem(seg: LogSegment, log_size: int) -> str | None:
    """The first entry of the segment's indexes that breaks their order (see
    :meth:`~kafkafs.log.index.OffsetIndex.order_problem`), under the segment's final names;
    None when both are in order. Kafka's sanity check does not look at this, but every
    lookup's binary search assumes it."""
    problem = seg.index.order_problem(log_size) or seg.time_index.order_problem()
    return None if problem is None else _unswap(seg, problem)


def _raise_order_problem(seg: LogSegment, log_size: int) -> None:
    """Raise CorruptIndexError when :func:`_index_order_problem` finds something."""
    problem = _index_order_problem(seg, log_size)
    if problem is not None:
        raise CorruptIndexError(problem)


def _txn_index_problem(seg: LogSegment, scan: SegmentScan) -> str | None:
    """(thorough) The first ``.txnindex`` entry that breaks what Kafka's appends guarantee --
    ABORT marker offsets strictly increasing, each inside the segment's valid batches -- in
    the style of Kafka's index messages; None when the index is fine or absent. Kafka's
    ``sanityCheck`` only looks at the lower bound (checked at every load)."""
    try:
        seg.txn_index.sanity_check()  # Kafka's words first
        entries = seg.txn_index.all_aborted_txns()
    except CorruptIndexError as exc:
        return str(exc)
    path = _path(seg, TXN_INDEX_SUFFIX)
    end = seg.base_offset if scan.next_offset is None else scan.next_offset
    previous = None
    for n, txn in enumerate(entries):
        if previous is not None and txn.last_offset <= previous:
            return (f"Corrupt transaction index found, index file ({path}) has entry {n} with "
                    f"last offset {txn.last_offset} which is not larger than the last offset "
                    f"{previous} of the entry before it")
        if txn.last_offset >= end:
            return (f"Corrupt transaction index found, index file ({path}) has entry {n} with "
                    f"last offset {txn.last_offset}, past the last offset {end - 1} of the "
                    "valid batches of its log segment")
        if txn.first_offset > txn.last_offset:
            return (f"Corrupt transaction index found, index file ({path}) has entry {n} with "
                    f"first offset {txn.first_offset} above its last offset {txn.last_offset}")
        previous = txn.last_offset
    return None


def _missing_index(seg: LogSegment, names: set[str]) -> str | None:
    prefix = filename_prefix(seg.base_offset)
    if prefix + INDEX_SUFFIX not in names:
        return (f"Could not find offset index file corresponding to log file "
                f"{_path(seg)}, recovering segment and rebuilding index "
                "files...")
    if prefix + TIME_INDEX_SUFFIX not in names:
        # Kafka creates an empty time index here; kafkafs rebuilds both
        return (f"Time index file {_path(seg, TIME_INDEX_SUFFIX)} does not exist, "
                "recovering segment and rebuilding index files...")
    return None


def _corrupt_index_message(seg: LogSegment, reason: str) -> str:
    return (f"Found a corrupted index file corresponding to log file "
            f"{_path(seg)} due to {_unswap(seg, reason)}, recovering segment and "
            "rebuilding index files...")


def _truncation_action(seg: LogSegment, scan: SegmentScan) -> LoadAction:
    path = _path(seg)
    if scan.error is not None:
        message = (f"Found invalid messages in log segment {path} at byte offset "
                   f"{scan.valid_bytes}: {scan.error.reason}")
    else:
        message = (f"{scan.truncated} bytes at byte offset {scan.valid_bytes} of log segment "
                   f"{path} are not a complete batch (a torn write)")
    return LoadAction("truncate", path, message,
                      f"truncate {scan.truncated} bytes: the segment keeps {scan.valid_bytes} "
                      f"bytes ({scan.batches} valid batches)",
                      position=scan.valid_bytes, nbytes=scan.truncated,
                      base_offset=seg.base_offset)


def _recover(ops, seg: LogSegment, cause: LoadAction) -> int:
    """Recover ``seg`` because of ``cause``; report a truncation. Returns bytes truncated."""
    ops.report(cause)
    scan = ops.recover(seg)
    if scan is not None and scan.truncated > 0:
        ops.report(_truncation_action(seg, scan))
    return 0 if scan is None else scan.truncated


def _verify(ops, segments: list[LogSegment],
            names: set[str]) -> tuple[dict[int, str], int | None]:
    """(thorough) Check every segment's indexes and batches. Returns ``(bases whose indexes
    are rebuilt -> why, base of the first segment with invalid data or None)``; reports
    offsets that go back, which are left alone."""
    rebuild: dict[int, str] = {}
    first_bad = None
    previous: tuple[LogSegment, SegmentScan] | None = None
    for seg in segments:
        size = ops.size(seg)
        if _missing_index(seg, names) is None:
            # beside a live writer the index may already point past the size read earlier
            log_size = size if not ops.dry else max(size, seg.reload_size())
            try:
                seg.index.sanity_check()
                seg.time_index.sanity_check()
                problem = _index_order_problem(seg, log_size)
            except CorruptIndexError as exc:
                problem = str(exc)
            if problem is not None:
                rebuild[seg.base_offset] = problem
        scan = ops.scan(seg)
        if scan.truncated > 0 and first_bad is None:
            first_bad = seg.base_offset
        if seg.base_offset not in rebuild and not (ops.dry and seg is segments[-1]):
            # (beside a live writer the active segment's .txnindex may be ahead of the scan)
            problem = _txn_index_problem(seg, scan)
            if problem is not None:
                rebuild[seg.base_offset] = problem
        path = _path(seg)
        if scan.disorder is not None:
            position, offset, expected = scan.disorder
            ops.report(LoadAction(
                "offsets-out-of-order", path,
                f"Offsets go back in log segment {path} at byte offset {position}: a batch "
                f"starts at offset {offset}, below the offset {expected} that follows the "
                "batch before it",
                "none: Kafka's recovery does not repair this (a lookup by offset cannot find "
                "every record); move the partition away and restore it from a replica or "
                "backup", position=position, base_offset=seg.base_offset))
        elif previous is not None and scan.first_offset is not None \
                and previous[1].next_offset is not None \
                and scan.first_offset < previous[1].next_offset:
            prev_seg, prev_scan = previous
            ops.report(LoadAction(
                "offsets-out-of-order", path,
                f"Log segment {path} starts at offset {scan.first_offset}, below the offset "
                f"{prev_scan.next_offset} that follows the last batch of "
                f"{_path(prev_seg)}: the segments overlap",
                "none: Kafka's recovery does not repair this; move the partition away and "
                "restore it from a replica or backup", position=0,
                base_offset=seg.base_offset))
        if scan.batches:
            previous = (seg, scan)
    return rebuild, first_bad


def _load_segments(ops, *, recovery_point: int, log_start_offset: int,
                   had_clean_shutdown: bool, thorough: bool) -> list[LogSegment]:
    """Steps 1 to 4 for a writable load (carried out or planned by ``ops``). Returns the
    segments, oldest first; an empty list when none is left (the caller creates one)."""
    _remove_leftovers(ops)
    _remove_corrupt_snapshots(ops)
    names = ops.names()
    bases = sorted(p[0] for p in map(_parse, names)
                   if p and p[1] == LOG_SUFFIX and p[2] == "")
    segments = [ops.open_segment(b) for b in bases]
    ops.segments = segments
    ops.log_start_offset = log_start_offset
    rebuild: dict[int, str] = {}
    first_bad = None
    startup_recovery_point = None if had_clean_shutdown else recovery_point
    if thorough and segments:
        before = len(ops.actions)
        rebuild, first_bad = _verify(ops, segments, names)
        if not ops.dry and any(a.kind in UNREPAIRABLE_KINDS for a in ops.actions[before:]):
            raise UnrepairableLogError(f"offsets go back in {ops.dir}")
        if first_bad is not None:
            start = first_bad if had_clean_shutdown else min(recovery_point, first_bad)
            recovery_point, had_clean_shutdown = start, False
    # the segments step 4 recovers anyway (rebuilding every index): their indexes are not
    # checked first (KAFKA-7283), which spares a crashed log the opening of its active
    # segment's preallocated indexes twice
    recovered_from = None if had_clean_shutdown or not segments else \
        _floor_base(segments, recovery_point)
    for seg in segments:
        missing = _missing_index(seg, names)
        if missing is not None:
            _recover(ops, seg, LoadAction(
                "missing-index", _path(seg), missing,
                f"recover the segment: {_REBUILD}", base_offset=seg.base_offset))
            continue
        reason = rebuild.get(seg.base_offset)
        if reason is None and (recovered_from is None or seg.base_offset < recovered_from):
            try:
                if seg is segments[-1]:
                    ops.sanity_check(seg)
                elif filename_prefix(seg.base_offset) + TXN_INDEX_SUFFIX in names:
                    # LogSegment.sanityCheck: the transaction index of every segment (a
                    # missing one is an empty one)
                    seg.txn_index.sanity_check()
            except CorruptIndexError as exc:
                reason = str(exc)
        if reason is not None:
            _recover(ops, seg, LoadAction(
                "corrupt-index", _path(seg),
                _corrupt_index_message(seg, reason),
                f"recover the segment: {_REBUILD}", base_offset=seg.base_offset))
    if not had_clean_shutdown and segments:
        _recover_from(ops, segments, recovery_point, startup_recovery_point, first_bad)
    elif segments:
        # a clean shutdown skips recovery, but the tail of the active segment is still
        # checked: bytes appended by hand (or a partial copy) must not become "records"
        last = segments[-1]
        end, error = ops.scan_tail(last)
        if error is not None or end != ops.size(last):
            why = error.reason if error is not None else "an incomplete batch"
            path = _path(last)
            _recover(ops, last, LoadAction(
                "invalid-tail", path,
                f"Invalid data at the end of {path} after the last index entry (byte offset "
                f"{end}): {why}",
                "recover the segment although the shutdown was clean (kafkafs checks the "
                "active segment's tail)", position=end, base_offset=last.base_offset))
    return segments


_REBUILD = "validate every batch, rebuild .index, .timeindex and .txnindex"


def _floor_base(segments: list[LogSegment], offset: int) -> int:
    base = segments[0].base_offset
    for seg in segments:
        if seg.base_offset <= offset:
            base = seg.base_offset
    return base


def _recover_from(ops, segments: list[LogSegment], recovery_point: int,
                  startup_recovery_point: int | None = None,
                  first_bad: int | None = None) -> None:
    """Recover every segment from the one holding ``recovery_point`` on; after a truncation,
    delete the later segments (``LogLoader.recoverLog``). ``startup_recovery_point``: where a
    plain startup would start (None after a clean shutdown), ``first_bad``: the first segment
    with invalid data (thorough loads) -- they only change how the actions are described."""
    start = _floor_base(segments, recovery_point)
    startup_start = None if startup_recovery_point is None else \
        _floor_base(segments, startup_recovery_point)
    i = 0
    while i < len(segments):
        seg = segments[i]
        if seg.base_offset < start:
            i += 1
            continue
        if startup_start is None or seg.base_offset < startup_start:
            cause = LoadAction(
                "recover", _path(seg),
                f"Recovering segment {seg.base_offset}: recovery runs from segment "
                f"{first_bad}, the first that holds invalid data",
                "validate every batch and rebuild the indexes", base_offset=seg.base_offset)
        else:
            cause = LoadAction(
                "unflushed", _path(seg),
                f"Recovering unflushed segment {seg.base_offset}",
                "validate every batch and rebuild the indexes", base_offset=seg.base_offset)
        truncated = _recover(ops, seg, cause)
        if truncated > 0 and i + 1 < len(segments):
            later = segments[i + 1:]
            for other in later:
                path = _path(other)
                ops.delete_segment(other, LoadAction(
                    "delete-segment", path,
                    f"Corruption found in segment {seg.base_offset}: deleting segments as "
                    f"part of log recovery: {path}",
                    "delete the segment (it follows a truncated one)",
                    base_offset=other.base_offset))
            del segments[i + 1:]
        i += 1
    # an empty trailing segment after a truncation is fine; an empty one before others is not


def _no_segments_action(dir: str, log_start_offset: int) -> LoadAction:
    path = os.path.join(dir, filename_prefix(log_start_offset) + LOG_SUFFIX)
    return LoadAction("no-segments", os.path.abspath(path),
                      f"No log segment in {os.path.abspath(dir)}",
                      f"create an empty segment at the log start offset {log_start_offset}",
                      base_offset=log_start_offset)


def _log_start_action(dir: str, log_start_offset: int, leo: int) -> LoadAction:
    return LoadAction(
        "log-start-above-end", os.path.abspath(dir),
        f"logEndOffset ({leo}) is smaller than logStartOffset {log_start_offset}. This could "
        "happen if segment files were deleted from the file system.",
        f"move the log start offset down to {leo} (Kafka deletes every segment instead)")


# -- entry points ------------------------------------------------------------------------------
def load_log(dir: str | safeio.Dir, topic: str, partition: int, config: LogConfig, *,
             recovery_point: int = 0, log_start_offset: int = 0,
             had_clean_shutdown: bool = False, writable: bool = True,
             thorough: bool = False,
             on_action: Callable[[LoadAction], None] | None = None,
             limit: int | None = None) -> Log:
    """Load the partition in ``dir`` (a path, opened not following a link, or an open
    :class:`~kafkafs.log.safeio.Dir`) and return its :class:`Log`.

    ``recovery_point`` and ``log_start_offset`` come from the log dir's checkpoints (0 when
    unknown). ``thorough`` (writable loads, ``kafkafs check --repair``): also verify every
    segment, rebuild any index that fails a check and recover from the first segment with
    invalid data on; raises UnrepairableLogError, before changing a segment, when offsets go
    back. ``on_action`` is called with each :class:`LoadAction` once it is done. The log's
    producer state is built last (:meth:`Log.load_producer_state`; read-only loads build it
    in memory only). Raises OSError on I/O failure; corrupt data is truncated, never raised
    -- except what Kafka's loader raises too: InvalidTxnStateError (a non-transactional
    batch from a producer inside a transaction) and CorruptRecordError (a COMMIT/ABORT
    marker that cannot be parsed) met while replaying the producer state.

    ``limit`` (read-only loads only): show the log as if it ended at that offset -- the
    segments from it on are left out and the last one kept ends at the batch holding it
    (:func:`_cut_at`); what an unfinished bulk commit appended past ``limit`` is not seen
    (:mod:`kafkafs.log.bulk_commit`). ValueError for a writable load with a limit.
    """
    if limit is not None and writable:
        raise ValueError("a limit applies to read-only loads only")
    segments: list[LogSegment]
    pdir = safeio.Dir.of(dir)
    dir = pdir.path
    if writable:
        ops = _Executor(pdir, config, on_action)
        segments = _load_segments(ops, recovery_point=recovery_point,
                                  log_start_offset=log_start_offset,
                                  had_clean_shutdown=had_clean_shutdown, thorough=thorough)
    else:
        # one listing for the segments, the producer snapshots and the .txnindex files;
        # segments open on first use (a reader of a few of tens of thousands opens a few)
        inodes = pdir.file_inodes()
        names = set(inodes)
        dev = pdir.fstat().st_dev
        bases = sorted(p[0] for p in map(parse_segment_filename,
                                         (n for n in names if n.endswith(LOG_SUFFIX)))
                       if p and p[1] == LOG_SUFFIX and p[2] == "")
        segments = [LogSegment(pdir, b, config, writable=False, lazy=True,
                               identity=(dev, inodes.get(filename_prefix(b) + LOG_SUFFIX)))
                    for b in bases]
        if limit is not None:
            segments = _cut_at(segments, limit)
    if not segments:
        if not writable:
            raise FileNotFoundError(f"{dir} holds no log segments")
        seg = LogSegment(pdir, log_start_offset, config, create=True)
        seg.open_indexes()
        segments = [seg]
        ops.report(_no_segments_action(dir, log_start_offset))
    if writable:
        active = segments[-1]
        active.index.resize(config.segment_index_bytes)
        active.time_index.resize(config.segment_index_bytes)
        for seg in segments:  # from now on a bad index is rebuilt when first opened
            seg.check_indexes = True
    listed = None if writable else names
    log_obj = Log(pdir, topic, partition, config, segments,
                  log_start_offset=max(log_start_offset, segments[0].base_offset),
                  recovery_point=0, writable=writable,
                  producer_state=ProducerStateManager(pdir, writable=writable, names=listed),
                  names=listed)
    leo = log_obj.log_end_offset
    if had_clean_shutdown or not writable:
        log_obj.recovery_point = leo
        if not had_clean_shutdown:
            # the .txnindex files a writable load would rebuild are not trusted by readers
            log_obj.txn_recovery_point = recovery_point
    else:
        # everything recovered was re-validated; make it durable before claiming it
        for seg in segments:
            if seg.base_offset >= _floor_base(segments, recovery_point):
                seg.flush()
        log_obj.recovery_point = leo
    if log_obj.log_start_offset > leo:
        if writable:
            ops.report(_log_start_action(dir, log_obj.log_start_offset, leo))
        log_obj.log_start_offset = leo
    # LogLoader.load: the producer state is built last, from scratch, over the loaded log
    log_obj.load_producer_state(had_clean_shutdown)
    log_obj.limit = limit
    return log_obj


def _cut_at(segments: list[LogSegment], limit: int) -> list[LogSegment]:
    """(read-only) ``segments`` as if the log ended at offset ``limit``: those whose base
    is past it are closed and left out (one based at it stays, shown empty), and the size of
    the last one kept ends where the batch holding ``limit`` begins."""
    keep = [s for s in segments if s.base_offset <= limit] or segments[:1]
    for seg in segments[len(keep):]:
        seg.close()
    last = keep[-1]
    if last.base_offset >= limit:
        last.size = 0
    else:
        batch = last.translate_offset(limit)
        if batch is not None:
            last.size = min(last.size, batch.position)
    return keep


def create_log(dir: safeio.Dir, topic: str, partition: int, config: LogConfig) -> Log:
    """A new, empty :class:`Log` in ``dir``, a partition dir just made (what
    ``LogManager.getOrCreateLog`` does for a partition that does not exist yet): one empty
    segment at offset 0 with its indexes preallocated and an empty producer state. There is
    nothing to load, recover or replay, no producer snapshot is written (an empty state
    needs none) and nothing is fsynced: the caller makes the new dir durable. Raises
    OSError (the files made so far are left to the caller, who removes the dir)."""
    seg = LogSegment(dir, 0, config, create=True)
    try:
        seg.open_indexes()
    except BaseException:
        seg.close()
        raise
    return Log(dir, topic, partition, config, [seg], log_start_offset=0, recovery_point=0,
               writable=True, producer_state=ProducerStateManager(dir))


def plan_load(dir: str | safeio.Dir, config: LogConfig, *, recovery_point: int = 0,
              log_start_offset: int = 0, had_clean_shutdown: bool = False,
              thorough: bool = False, scans: dict | None = None) -> list[LoadAction]:
    """What a writable :func:`load_log` with the same arguments would do to the partition in
    ``dir``, as a list of :class:`LoadAction` in the order it would do them -- worked out
    with every file opened read-only: not a byte, name or mtime changes.

    ``scans`` (optional) caches the validating scans of ``.log`` files between calls on the
    same unchanged directory (``{(path, end): SegmentScan}``). Raises OSError on I/O failure
    (FileNotFoundError when a file vanishes meanwhile, e.g. beside a running daemon).
    """
    ops = _Planner(safeio.Dir.of(dir), config, scans)
    try:
        segments = _load_segments(ops, recovery_point=recovery_point,
                                  log_start_offset=log_start_offset,
                                  had_clean_shutdown=had_clean_shutdown, thorough=thorough)
        if not segments:
            ops.report(_no_segments_action(ops.dir, log_start_offset))
        else:
            try:
                leo = ops.next_offset(segments[-1])
            except (OSError, ValueError):
                leo = None
            start = max(log_start_offset, segments[0].base_offset)
            if leo is not None and start > leo:
                ops.report(_log_start_action(ops.dir, start, leo))
        return ops.actions
    finally:
        ops.close()
