"""The names of a partition's ``offset/`` directory, streamed (docs/tree.md "Reading").

``ls -l offset`` of a partition of millions of records must not cost a request per name:
the listing reads the batches in order (their CRC checked), decodes each batch once in one
native pass (so only intact records are listed) and gives every entry its real attributes
-- the value's size and the record's timestamp -- which the kernel keeps (a record at an
offset never changes), so ``ls -l`` and ``find -size`` need no ``getattr`` per name.
A directory handle keeps its place between the kernel's readdir calls.

A damaged batch (CRC mismatch, bad header) never fails the listing: the offsets before it
are listed, the rest of its segment is skipped, and the listing goes on with the next
segment; the damage is logged once per batch (not once per readdir call).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from ..log.log import Log
from ..log.names import parse_segment_filename
from ..record.errors import CorruptRecordError
from .errors import report_damage


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
