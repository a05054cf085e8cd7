"""Decoded batches kept for point reads (``offset/N``: lookup, getattr, open, read and the
xattrs all ask for the same record within microseconds; neighbours are often next)."""

from __future__ import annotations

import bisect
from collections import OrderedDict

from ..log.log import Log
from ..record.batch import Record

MAX_BATCHES = 512
MAX_BYTES = 64 * 1024 * 1024  # encoded bytes of the cached batches


class _Entry:
    __slots__ = ("base", "last", "records", "size", "timestamp_type", "is_control")

    def __init__(self, base, last, records, size, timestamp_type, is_control):
        self.base = base
        self.last = last
        self.records = records
        self.size = size
        self.timestamp_type = timestamp_type
        self.is_control = is_control


class BatchCache:
    """LRU of decoded batches of every partition, bounded by count and bytes."""

    def __init__(self, max_batches: int = MAX_BATCHES, max_bytes: int = MAX_BYTES):
        self.max_batches = max_batches
        self.max_bytes = max_bytes
        self._lru: OrderedDict[tuple, _Entry] = OrderedDict()  # (topic, p, base) -> entry
        self._bases: dict[tuple, list[int]] = {}  # (topic, p) -> sorted cached bases
        self._bytes = 0

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
        tp = (lg.topic, lg.partition)
        entry = self._find(tp, offset)
        if entry is not None:
            self._lru.move_to_end((lg.topic, lg.partition, entry.base))
            return entry
        batch = lg.batch_for(offset)
        if batch is None:
            return None
        # plain tuples: a Record is made only for the offset asked for
        records = [] if batch.is_control else batch.record_tuples()
        entry = _Entry(batch.base_offset, batch.last_offset, records, batch.size,
                       batch.timestamp_type, batch.is_control)
        key = (lg.topic, lg.partition, entry.base)
        if key not in self._lru:
            self._lru[key] = entry
            bisect.insort(self._bases.setdefault(tp, []), entry.base)
            self._bytes += entry.size
            self._evict()
        return entry

    def record(self, lg: Log, offset: int) -> tuple[Record, _Entry] | None:
        """``(record, its batch entry)`` at exactly ``offset``; None when the offset holds no
        record (a control record, or compacted away)."""
        entry = self.batch(lg, offset)
        if entry is None or entry.is_control:
            return None
        recs = entry.records
        # offsets inside a batch are increasing; usually dense (index = offset - base)
        i = offset - entry.base
        if 0 <= i < len(recs) and recs[i][0] == offset:
            return Record._make(recs[i]), entry
        for r in recs:
            if r[0] == offset:
                return Record._make(r), entry
        return None

    def _evict(self) -> None:
        while len(self._lru) > self.max_batches or (self._bytes > self.max_bytes
                                                     and len(self._lru) > 1):
            (topic, p, base), entry = self._lru.popitem(last=False)
            self._bytes -= entry.size
            bases = self._bases[(topic, p)]
            bases.pop(bisect.bisect_left(bases, base))

    def drop(self, topic: str, partition: int | None = None) -> None:
        """Forget the batches of a topic (or one partition): deleted, truncated, retained."""
        for key in [k for k in self._lru if k[0] == topic and
                    (partition is None or k[1] == partition)]:
            self._bytes -= self._lru.pop(key).size
        for tp in [tp for tp in self._bases if tp[0] == topic and
                   (partition is None or tp[1] == partition)]:
            del self._bases[tp]
