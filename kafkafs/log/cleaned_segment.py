"""Writing one cleaned segment: ``<base>.log.cleaned`` and its indexes (the destination of
Kafka's ``Cleaner.cleanSegments``, ``UnifiedLog.createNewCleanedSegment``).

A :class:`CleanedSegmentWriter` creates ``<base>.log.cleaned`` in the partition directory
(stale ``.cleaned`` files of an earlier attempt are removed first, as Kafka's
``deleteIfExists`` does), appends the kept batches as the cleaner produces them, and keeps
the ``.index``/``.timeindex`` entries of what it wrote by the rule of every append
(:func:`kafkafs.record.compaction.index_entries`: an entry after more than
``index.interval.bytes``, computed per batch, so a cleaned segment is indexed as densely as
one written by appends). :meth:`~CleanedSegmentWriter.finish` writes the indexes, the
``.txnindex`` entries of the aborted transactions whose markers stayed, fsyncs everything,
gives the files the last modification time of the segments they replace
(``setLastModified``) and returns the :class:`~kafkafs.log.segment.LogSegment`, still
``.cleaned``, for :meth:`Log.replace_segments <kafkafs.log.log.Log.replace_segments>`.
:meth:`~CleanedSegmentWriter.abort` removes the ``.cleaned`` files.

Every file goes through the partition's open directory (:mod:`kafkafs.log.safeio`).
"""

from __future__ import annotations

import dataclasses
import os

from ..record import compaction as _rc
from .config import LogConfig
from .names import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    filename_prefix,
)
from .safeio import Dir
from .segment import LogSegment
from .txnindex import AbortedTxn

_KINDS = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


class CleanedSegmentWriter:
    """The ``.cleaned`` segment at ``base_offset`` in ``pdir`` (the log's open partition
    directory) under ``config`` (the log's; preallocation is never used for it). Raises
    OSError."""

    def __init__(self, pdir: Dir, base_offset: int, config: LogConfig):
        self.pdir = pdir
        self.base_offset = base_offset
        self.config = dataclasses.replace(config, preallocate=False)
        self._prefix = filename_prefix(base_offset)
        self._remove_files()
        self._fd = pdir.create_file(self._prefix + LOG_SUFFIX + CLEANED_SUFFIX)
        self.position = 0
        self._state = (0, -1, base_offset, -1)
        self._offsets: list[tuple[int, int]] = []
        self._times: list[tuple[int, int]] = []
        self._aborted: list[AbortedTxn] = []
        self.segment: LogSegment | None = None

    def _remove_files(self) -> None:
        for kind in _KINDS:
            self.pdir.unlink(self._prefix + kind + CLEANED_SUFFIX)

    def write(self, data) -> None:
        """Append whole batches (``bytes``-like, back to back). Raises OSError."""
        if not data:
            return
        offsets, times, self._state = _rc.index_entries(data, self.position,
                                                        self.config.index_interval_bytes,
                                                        self._state)
        view = memoryview(data)
        written = 0
        while written < len(view):
            written += os.pwrite(self._fd, view[written:], self.position + written)
        self.position += len(view)
        self._offsets += offsets
        self._times += times

    def append_aborted(self, txn: AbortedTxn) -> None:
        """Add ``txn`` to the segment's ``.txnindex`` (an ABORT marker that stays)."""
        self._aborted.append(txn)

    def finish(self, last_modified_ms: int) -> LogSegment:
        """Close the log file and write the indexes: the offset and time index entries
        (with the final time index entry for the largest timestamp, as a segment that
        becomes inactive gets it), the ``.txnindex``; fsync them all; set the modification
        time of the log and both indexes to ``last_modified_ms``. Returns the segment
        (suffix ``.cleaned``). Raises OSError."""
        os.close(self._fd)
        self._fd = -1
        seg = LogSegment(self.pdir, self.base_offset, self.config, suffix=CLEANED_SUFFIX,
                         check_indexes=False)
        self.segment = seg
        seg.index.replace_entries(self._offsets)
        seg.time_index.replace_entries(self._times)
        _since, max_ts, offset_of_max, _last = self._state
        if max_ts >= 0:
            seg.time_index.maybe_append(max_ts, offset_of_max, skip_full_check=True)
        seg.index.trim_to_valid_size()
        seg.time_index.trim_to_valid_size()
        for txn in self._aborted:
            seg.txn_index.append(txn)
        seg.flush()
        ns = last_modified_ms * 1_000_000
        for kind in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            self.pdir.utime(self._prefix + kind + CLEANED_SUFFIX, (ns, ns))
        seg.check_indexes = True
        return seg

    def abort(self) -> None:
        """Remove the ``.cleaned`` files (nothing when they were swapped in already)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self.segment is not None:
            if self.segment.suffix != CLEANED_SUFFIX:
                return  # renamed by Log.replace_segments: part of the log now
            self.segment.close()
        self._remove_files()
