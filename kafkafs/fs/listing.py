"""The names of a partition's ``offset/`` directory, streamed (docs/tree.md "Reading").

``ls -f offset`` of a partition of millions of records must not build a node or decode a
record per name: the listing reads the batches in order (their CRC checked and their
records walked without building objects, so only intact records are listed) and names every
offset of a batch that holds one record per offset; only a batch with gaps (compacted) or a
legacy wrapper is decoded for its offsets.
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
    """The offsets ``offset/`` shows, from ``start`` on, in increasing order: every offset
    of [log start offset, end) holding a data record (``end``: the last stable offset under
    ``committed`` (read_committed), else the log end offset, as they stand when the
    listing starts); control records and, under ``committed``, aborted transactions are
    left out. Iterate it; :meth:`push_back` returns the one offset the kernel had no room
    for; ``next_id`` is the readdir position the listing continues from."""

    def __init__(self, lg: Log, start: int, committed: bool):
        self.log = lg
        self.next_id = start
        self._pushed: int | None = None
        self._offsets = self._generate(lg, start, committed)

    def __iter__(self) -> Iterator[int]:
        return self

    def __next__(self) -> int:
        if self._pushed is not None:
            offset, self._pushed = self._pushed, None
            return offset
        return next(self._offsets)

    def push_back(self, offset: int) -> None:
        """Give back ``offset`` (not listed yet): the next iteration yields it first."""
        self._pushed = offset

    @staticmethod
    def _generate(lg: Log, start: int, committed: bool) -> Iterator[int]:
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
                    # a name listed is a record a stat can read: the records must decode
                    # (a valid CRC over records that do not is rare, but ls -l would fail)
                    batch.check_records()
                    if batch.records_count == batch.last_offset_delta + 1:
                        if last >= nxt:  # one record per offset: no need to decode
                            yield from range(max(batch.base_offset, nxt), last + 1)
                            nxt = last + 1
                        continue
                    for r in batch.records():  # gaps (compaction), legacy wrappers
                        if nxt <= r.offset <= last:
                            yield r.offset
                            nxt = r.offset + 1
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
