"""Decoded batches kept for point reads (``offset/N``: lookup, getattr, open, read and the
xattrs all ask for the same record within microseconds; neighbours are often next)."""

from __future__ import annotations

import bisect
from collections import OrderedDict

from ..log.log import Log
from ..record import fast
from ..record.batch import LOG_APPEND_TIME
from ..record.errors import CorruptRecordError
from ..record.types import Record

MAX_BATCHES = 512
MAX_BYTES = 64 * 1024 * 1024  # encoded bytes of the cached batches
FULL_DECODE_AFTER = 2  # records decoded one by one before a batch is decoded whole


class _Entry:
    """A batch kept as its (decompressed) records section; records are decoded one at a
    time on demand and kept (creating and freeing a whole batch of objects per miss would
    cost more than the read itself)."""

    __slots__ = ("base", "base_timestamp", "count", "decoded", "exact", "fixed",
                 "is_control", "is_transactional", "last", "payload", "producer_id", "size",
                 "timestamp_type")

    def __init__(self, batch):
        self.base = batch.base_offset
        self.last = batch.last_offset
        self.is_control = batch.is_control
        self.is_transactional = batch.is_transactional
        self.producer_id = batch.producer_id
        self.timestamp_type = batch.timestamp_type
        self.size = batch.size
        self.count = batch.records_count
        self.base_timestamp = batch.base_timestamp
        self.fixed = batch.max_timestamp if batch.timestamp_type == LOG_APPEND_TIME else None
        self.decoded: dict[int, tuple | None] = {}
        if batch.magic < 2:  # a legacy entry: decode its few messages at once
            self.payload, self.exact = None, True
            self.decoded = {t[0]: t for t in batch.record_tuples()}
        else:
            self.payload, self.exact = (b"", True) if self.is_control else batch.payload()

    @property
    def base_offset(self) -> int:
        return self.base

    @property
    def next_offset(self) -> int:
        return self.last + 1

    def record(self, offset: int) -> tuple | None:
        if self.payload is None:
            return self.decoded.get(offset)
        if offset not in self.decoded:
            if len(self.decoded) >= FULL_DECODE_AFTER:
                # many records of this batch are wanted (ls, a scan): decode it whole once,
                # rather than once per record
                self.decoded = {t[0]: t for t in fast.decode(
                    self.payload, self.count, self.base, self.base_timestamp, self.fixed,
                    exact=self.exact)}
                self.payload = None
                return self.decoded.get(offset)
            found = fast.decode(self.payload, self.count, self.base, self.base_timestamp,
                                self.fixed, exact=self.exact, only=offset)
            self.decoded[offset] = found[0] if found else None
        return self.decoded[offset]


class BatchCache:
    """LRU of decoded batches of every partition, bounded by count and bytes."""

    def __init__(self, max_batches: int = MAX_BATCHES, max_bytes: int = MAX_BYTES):
        self.max_batches = max_batches
        self.max_bytes = max_bytes
        self._lru: OrderedDict[tuple, _Entry] = OrderedDict()  # (topic, p, base) -> entry
        self._bases: dict[tuple, list[int]] = {}  # (topic, p) -> sorted cached bases
        self._bytes = 0
        # (log, entry) of the last batch returned: lookup, getattr, open and read of one
        # offset/N ask for it in turn. Always the LRU's newest entry.
        self._last: tuple[Log, _Entry] | None = None

    def _find(self, tp, offset: int) -> _Entry | None:
        bases = self._bases.get(tp)
        if not bases:
            return None
        i = bisect.bisect_right(bases, offset) - 1
        if i < 0:
            return None
        entry = self._lru[(tp[0], tp[1], bases[i])]
        return entry if entry.last >= offset else None

    def batch(self, lg: Log, offset: int) -> _Entry | None:
        """The cached or freshly decoded batch holding ``offset`` (None when no batch does).
        Raises OffsetOutOfRangeError outside [log start, log end)."""
        lg.check_offset(offset)
        last = self._last
        if last is not None and last[0] is lg and last[1].base <= offset <= last[1].last:
            return last[1]
        tp = (lg.topic, lg.partition)
        entry = self._find(tp, offset)
        if entry is not None:
            self._lru.move_to_end((lg.topic, lg.partition, entry.base))
            self._last = (lg, entry)
            return entry
        batch = lg.batch_for(offset)
        if batch is None:
            return None
        try:
            entry = _Entry(batch)
        except CorruptRecordError as exc:
            raise exc.located(position=batch.position) from None
        key = (lg.topic, lg.partition, entry.base)
        if key not in self._lru:
            self._lru[key] = entry
            bisect.insort(self._bases.setdefault(tp, []), entry.base)
            self._bytes += entry.size
            self._evict()
            self._last = (lg, entry)
        return entry

    def record(self, lg: Log, offset: int) -> tuple[Record, _Entry] | None:
        """``(record, its batch entry)`` at exactly ``offset``; None when the offset holds no
        record (a control record, or compacted away)."""
        entry = self.batch(lg, offset)
        if entry is None or entry.is_control:
            return None
        try:
            found = entry.record(offset)
        except CorruptRecordError as exc:
            raise exc.located(path=lg.segment_path(entry.base)) from None
        return (Record._make(found), entry) if found is not None else None

    def _evict(self) -> None:
        while len(self._lru) > self.max_batches or (self._bytes > self.max_bytes
                                                     and len(self._lru) > 1):
            (topic, p, base), entry = self._lru.popitem(last=False)
            self._bytes -= entry.size
            bases = self._bases[(topic, p)]
            bases.pop(bisect.bisect_left(bases, base))

    def drop(self, topic: str, partition: int | None = None) -> None:
        """Forget the batches of a topic (or one partition): deleted, truncated, retained."""
        self._last = None
        for key in [k for k in self._lru if k[0] == topic and
                    (partition is None or k[1] == partition)]:
            self._bytes -= self._lru.pop(key).size
        for tp in [tp for tp in self._bases if tp[0] == topic and
                   (partition is None or tp[1] == partition)]:
            del self._bases[tp]
