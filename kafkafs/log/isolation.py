"""Read isolation: which records a ``read_committed`` reader skips.

Kafka's consumer with ``isolation.level=read_committed`` reads up to the partition's last
stable offset (:attr:`~kafkafs.log.log.Log.last_stable_offset`) and drops the records of
aborted transactions, which the broker lists with each fetch (``FetchResponse``
``abortedTransactions``, from the segments' ``.txnindex`` files:
:meth:`~kafkafs.log.log.Log.aborted_txns`). The consumer drops a transactional data batch when
its producer has an aborted transaction that started at or before the batch and whose ABORT
marker comes after it (``Fetcher``/``CompletedFetch``: ``abortedProducerIds`` between an
aborted transaction's first offset and its marker). :class:`AbortedFilter` answers that for
one batch at a time. Control batches (the markers themselves) are never data: readers skip
them at either level.

``read_uncommitted`` reads everything up to the high watermark (the log end offset here),
aborted records included.

No I/O here.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from .txnindex import AbortedTxn

__all__ = [
    "DEFAULT_ISOLATION_LEVEL",
    "ISOLATION_LEVELS",
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "AbortedFilter",
]

READ_UNCOMMITTED = "read_uncommitted"
READ_COMMITTED = "read_committed"
#: Kafka's ``isolation.level`` values
ISOLATION_LEVELS = (READ_UNCOMMITTED, READ_COMMITTED)
#: what kafkafs readers use unless told otherwise (Kafka's consumer defaults to
#: read_uncommitted; a file system should not show data its writer rolled back)
DEFAULT_ISOLATION_LEVEL = READ_COMMITTED


class AbortedFilter:
    """Tells the batches of aborted transactions from the others.

    Built from :class:`~kafkafs.log.txnindex.AbortedTxn` entries (any order, duplicates
    allowed), typically :meth:`Log.aborted_txns(start, end) <kafkafs.log.log.Log.aborted_txns>`
    for the range about to be read (:meth:`~kafkafs.log.log.Log.committed_filter`). The
    entries are indexed by producer id with their ranges sorted by first offset, so
    :meth:`is_aborted` costs one dict lookup and one bisection. Immutable once built.
    """

    __slots__ = ("_ranges", "_txns")

    def __init__(self, aborted: Iterable[AbortedTxn] = ()):
        self._txns: tuple[AbortedTxn, ...] = tuple(aborted)
        by_pid: dict[int, list[tuple[int, int]]] = {}
        for txn in self._txns:
            by_pid.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))
        # producer id -> (first offsets ascending, running max of the last offsets): with
        # the running max an overlap of ranges (damaged data) still answers correctly
        self._ranges: dict[int, tuple[list[int], list[int]]] = {}
        for pid, ranges in by_pid.items():
            ranges.sort()
            firsts, reach, top = [], [], None
            for first, last in ranges:
                top = last if top is None else max(top, last)
                firsts.append(first)
                reach.append(top)
            self._ranges[pid] = (firsts, reach)

    @property
    def aborted_txns(self) -> tuple[AbortedTxn, ...]:
        """The entries the filter was built from, in the order given."""
        return self._txns

    def __len__(self) -> int:
        return len(self._txns)

    def __bool__(self) -> bool:
        return bool(self._txns)

    def is_aborted_offset(self, producer_id: int, offset: int) -> bool:
        """Whether ``offset`` lies in an aborted transaction of ``producer_id``
        (``first_offset <= offset <= last_offset``)."""
        ranges = self._ranges.get(producer_id)
        if ranges is None:
            return False
        firsts, reach = ranges
        i = bisect.bisect_right(firsts, offset) - 1
        return i >= 0 and offset <= reach[i]

    def is_aborted(self, batch) -> bool:
        """Whether a ``read_committed`` reader drops ``batch`` (a
        :class:`~kafkafs.record.batch.RecordBatch` or anything with ``is_transactional``,
        ``is_control``, ``producer_id`` and ``base_offset``): True for a transactional data
        batch whose producer has an aborted transaction with ``first_offset <=
        batch.base_offset <= last_offset``; False for control batches, non-transactional
        batches (legacy ones included) and everything else."""
        if not batch.is_transactional or batch.is_control:
            return False
        return self.is_aborted_offset(batch.producer_id, batch.base_offset)

    def __repr__(self):
        return f"AbortedFilter({len(self._txns)} aborted transactions)"
