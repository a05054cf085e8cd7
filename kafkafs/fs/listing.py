"""The names of a partition's ``offset/`` and of a ``key/`` directory, streamed (docs/tree.md
"Reading", "The key view").

``ls -l offset`` of a partition of millions of records must not cost a request per name:
the listing reads the batches in order (their CRC checked), decodes each batch once in one
native pass (so only intact records are listed) and gives every entry its real attributes
-- the value's size and the record's timestamp -- which the kernel keeps (a record at an
offset never changes), so ``ls -l`` and ``find -size`` need no ``getattr`` per name.
A directory handle keeps its place between the kernel's readdir calls.

A damaged batch (CRC mismatch, bad header) never fails the listing: the offsets before it
are listed, the rest of its segment is skipped, and the listing goes on with the next
segment; the damage is logged once per batch (not once per readdir call). A ``key/``
listing (:class:`KeyListing`) reads the records of the live keys the same way.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from ..log.log import Log
from ..log.names import parse_segment_filename
from ..log.partitioner import partition_for_key
from ..record.errors import CorruptRecordError
from .errors import report_damage
from .keys import key_name

SEEK_GAP = 4096  # a key listing seeks (index lookup) rather than read through a longer gap
_POS_BITS = 43  # key listing readdir positions: partition << 43 | offset + 1
_POS_MASK = (1 << _POS_BITS) - 1


class OffsetListing:
    """The entries ``offset/`` shows, from ``start`` on, in increasing order of offset:
    ``(offset, value size in bytes, timestamp in ms)`` for every offset
    of [log start offset, end) holding a data record (``end``: the last stable offset under
    ``committed`` (read_committed), else the log end offset, as they stand when the
    listing starts); control records and, under ``committed``, aborted transactions are
    left out. Iterate it; :meth:`push_back` returns the one entry the kernel had no room
    for; ``next_id`` is the readdir position the listing continues from."""

    def __init__(self, lg: Log, start: int, committed: bool):
        self.log = lg
        self.next_id = start
        self._pushed: tuple[int, int, int] | None = None
        self._entries = self._generate(lg, start, committed)

    def __iter__(self) -> Iterator[tuple[int, int, int]]:
        return self

    def __next__(self) -> tuple[int, int, int]:
        if self._pushed is not None:
            entry, self._pushed = self._pushed, None
            return entry
        return next(self._entries)

    def push_back(self, entry: tuple[int, int, int]) -> None:
        """Give back ``entry`` (not listed yet): the next iteration yields it first."""
        self._pushed = entry

    @staticmethod
    def _generate(lg: Log, start: int, committed: bool) -> Iterator[tuple[int, int, int]]:
        end = lg.last_stable_offset if committed else lg.log_end_offset
        start = max(start, lg.log_start_offset)
        aborted = lg.committed_filter(start, end) if committed else None
        at = nxt = start  # where reading (re)starts; the lowest offset not listed yet
        while at is not None:
            try:
                for batch in lg.batches(at):
                    if batch.base_offset >= end:
                        return
                    if batch.is_control or (aborted is not None and batch.is_transactional
                                            and aborted.is_aborted(batch)):
                        continue
                    last = min(batch.last_offset, end - 1)
                    if last < nxt:
                        continue
                    # a name listed is a record a stat can read: the records must decode
                    # (one native pass; a valid CRC over records that do not is rare)
                    for offset, timestamp, _key, value, _headers in batch.record_tuples():
                        if nxt <= offset <= last:
                            yield offset, 0 if value is None else len(value), timestamp
                            nxt = offset + 1
                return
            except CorruptRecordError as exc:
                at = _after_damage(lg, exc)


def _after_damage(lg: Log, exc: CorruptRecordError) -> int | None:
    """Log ``exc`` once (:func:`~kafkafs.fs.errors.report_damage`) and return the base
    offset of the segment after the damaged one: where the listing goes on; None when there
    is none (or the damage names no segment)."""
    report_damage(exc)
    parsed = parse_segment_filename(os.path.basename(exc.path)) if exc.path else None
    if parsed is None:
        return None
    later = [s.base_offset for s in lg.segments() if s.base_offset > parsed[0]]
    return min(later) if later else None


class KeyListing:
    """The entries of a ``key/`` listing from readdir position ``start``: iterate
    ``(log, name, offset, value size, timestamp ms)``; ``offsets``: per log, the sorted
    offsets of its live keys (numpy arrays, taken when the listing starts); ``home``: the
    partition count of the topic's view (only keys whose partitioner partition is theirs
    are listed), None for a partition's view."""

    def __init__(self, logs: list[Log], offsets: list, start: int,
                 home: int | None):
        self.logs = logs
        self.next_id = start
        self._pushed = None
        self._last = None
        self._gen = self._generate(offsets, start, home)

    @staticmethod
    def position(partition: int, offset: int) -> int:
        return (partition << _POS_BITS) | min(offset + 1, _POS_MASK)

    def __iter__(self):
        return self

    def __next__(self):
        if self._pushed is not None:
            item, self._pushed = self._pushed, None
        else:
            item = next(self._gen)
        self._last = item
        return item

    def push_back(self) -> None:
        """The last entry did not fit: the next iteration yields it again."""
        self._pushed = self._last

    def _generate(self, offsets, start: int, home: int | None):
        first_p, first_off = start >> _POS_BITS, start & _POS_MASK
        for lg, offs in zip(self.logs, offsets):
            if lg.partition < first_p:
                continue
            begin = first_off if lg.partition == first_p else 0
            for off, key, size, ts in _records_at(lg, offs, begin):
                if home is not None and partition_for_key(key, home) != lg.partition:
                    continue
                yield lg, key_name(key), off, size, ts


def _records_at(lg: Log, offsets, begin: int):
    """``(offset, key, value size, timestamp)`` of the records of ``lg`` at ``offsets``
    (a sorted int64 numpy array) from ``begin`` on, reading batches in order and decoding
    only those holding one; a long gap is skipped by an index lookup, and the reading
    starts again where it stopped when a segment was swapped under it (the cleaner).
    Damage skips the rest of its segment (fs.listing)."""
    import numpy as np  # (loaded with the key maps: kafkafs.log.keymap)

    i = int(np.searchsorted(offsets, begin))
    n = len(offsets)
    while i < n:
        at = int(offsets[i])
        before = i
        try:
            for batch in lg.batches(at):
                if batch.last_offset < at:
                    continue
                j = int(np.searchsorted(offsets, batch.last_offset, "right"))
                if j > i:
                    wanted = set(offsets[i:j].tolist())
                    for r in batch.record_tuples():
                        if r[0] in wanted and r[2] is not None and r[3] is not None:
                            yield r[0], r[2], len(r[3]), r[1]
                    i = j
                if i >= n:
                    return
                at = int(offsets[i])
                if at > batch.next_offset + SEEK_GAP:
                    break  # seek there through the index
            else:  # the batches ended: the log's end, or a segment swapped under us
                if i == before:
                    return  # nothing more to be had (the log was truncated under us)
        except CorruptRecordError as exc:
            after = _after_damage(lg, exc)
            if after is None:
                return
            i = int(np.searchsorted(offsets, after))
