"""Transactions as the log cleaner walks through a log (Kafka ``CleanedTransactionMetadata``).

The cleaner only reads below the last stable offset, so every transaction it meets is
decided; the aborted ones are known ahead from the ``.txnindex`` files
(:meth:`Log.aborted_txns <kafkafs.log.log.Log.aborted_txns>`). Walking the batches in offset
order, :class:`CleanedTransactionMetadata` says which data batches belong to an aborted
transaction (they are removed, whatever their keys) and which COMMIT/ABORT markers may go:
a marker is kept while any batch of its transaction is still in the log (an ABORT marker
kept also re-enters the cleaned segment's ``.txnindex``), and once no batch is left it gets
a delete horizon like a tombstone and goes after it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable

from ..record.control import ABORT, COMMIT, parse_control_key
from .txnindex import AbortedTxn


class _AbortedTxnMetadata:
    __slots__ = ("aborted_txn", "last_observed_batch_offset")

    def __init__(self, aborted_txn: AbortedTxn):
        self.aborted_txn = aborted_txn
        self.last_observed_batch_offset: int | None = None


class CleanedTransactionMetadata:
    """The transactions open at the cleaner's position in the log (Kafka
    ``CleanedTransactionMetadata``). ``cleaned_index``: where an ABORT marker that stays
    puts its transaction's index entry (``fn(AbortedTxn)``, the cleaned segment's
    ``.txnindex``), or None while the offset map is built."""

    def __init__(self):
        self._ongoing_committed: set[int] = set()
        self._ongoing_aborted: dict[int, _AbortedTxnMetadata] = {}
        self._aborted: list[tuple[int, int, AbortedTxn]] = []  # heap by first offset
        self._seq = 0
        self.cleaned_index: Callable[[AbortedTxn], None] | None = None

    def add_aborted_transactions(self, txns: Iterable[AbortedTxn]) -> None:
        """Add aborted transactions found ahead (``addAbortedTransactions``)."""
        for txn in txns:
            self._seq += 1
            heapq.heappush(self._aborted, (txn.first_offset, self._seq, txn))

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._aborted and self._aborted[0][0] <= offset:
            txn = heapq.heappop(self._aborted)[2]
            self._ongoing_aborted.setdefault(txn.producer_id, _AbortedTxnMetadata(txn))

    def on_control_batch_read(self, batch) -> bool:
        """A control batch was reached; returns whether it may be discarded
        (``onControlBatchRead``): an ABORT marker none of whose transaction's batches was
        met on the way (when one was, the transaction's entry goes to :attr:`cleaned_index`
        and the marker stays), a COMMIT marker likewise, and an empty control batch
        (emptied by an earlier pass). Other control records stay."""
        self._consume_aborted_up_to(batch.last_offset)
        records = batch.record_tuples()
        if not records:
            return True  # an empty control batch was already cleaned
        control_type = parse_control_key(records[0][2])[1]
        pid = batch.producer_id
        if control_type == ABORT:
            meta = self._ongoing_aborted.pop(pid, None)
            if meta is not None and meta.last_observed_batch_offset is not None:
                # retain the marker until every batch of the transaction is removed
                if self.cleaned_index is not None:
                    self.cleaned_index(meta.aborted_txn)
                return False
            return True
        if control_type == COMMIT:
            # discardable when no batch of the transaction was traversed
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False
            return True
        return False

    def on_batch_read(self, batch) -> bool:
        """A data batch was reached; returns whether it belongs to an aborted transaction
        (and may be discarded whatever its records, ``onBatchRead``)."""
        self._consume_aborted_up_to(batch.last_offset)
        if batch.is_transactional:
            meta = self._ongoing_aborted.get(batch.producer_id)
            if meta is not None:
                meta.last_observed_batch_offset = batch.last_offset
                return True
            self._ongoing_committed.add(batch.producer_id)
        return False
