"""The cleaner's key → last offset map in fixed memory (Kafka ``SkimpyOffsetMap``).

A :class:`SkimpyOffsetMap` holds, for each key of the dirty section of a log, the offset of
its last record, in a buffer whose size is given in bytes and never grows: the share of
``log.cleaner.dedupe.buffer.size`` of one cleaner thread. Keys are not stored: each slot
(:data:`~kafkafs.record.compaction.MAP_ENTRY_SIZE` = 24 bytes) holds a 16-byte hash of the
key and an 8-byte offset, as Kafka's map does with MD5; kafkafs hashes with MurmurHash3 x64
128 (much cheaper per key; a collision between two keys' 128-bit hashes is as unlikely as
with MD5). The map is filled up to ``slots * load_factor`` entries
(``log.cleaner.io.buffer.load.factor``, 0.9): the cleaner stops building it there and cleans
up to the last offset it holds (:attr:`latest_offset`); the next pass goes on from there.

The storage is anonymous memory (``mmap``, no numpy; zeroed, on transparent huge pages
where the kernel allows: the map is probed at random) handed to the batch-at-a-time functions of
:mod:`kafkafs.record.compaction` (C when built) together with the slot count.

Not thread-safe: one map per cleaner thread (Kafka's ``Cleaner`` owns one too).
"""

from __future__ import annotations

import mmap

from ..record import compaction as _rc
from .walk import BatchOrder

ENTRY_SIZE = _rc.MAP_ENTRY_SIZE


def _allocate(size: int):
    """Zeroed anonymous memory of ``size`` bytes (writable buffer protocol), backed by
    transparent huge pages where the kernel offers them: a map of 128 MiB is probed at
    random, and 2 MiB pages spare it most page faults and TLB misses."""
    # private, not mmap's default MAP_SHARED: shared anonymous memory is shmem, which gets
    # huge pages only where shmem_enabled says so (rarely); private memory follows
    # transparent_hugepage/enabled (madvise on Debian)
    buf = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if advice is not None:
        try:
            buf.madvise(advice)
        except OSError:
            pass
    return buf


class SkimpyOffsetMap:
    """A fixed-memory hash map of key → offset (Kafka ``SkimpyOffsetMap``/``OffsetMap``).

    ``memory``: bytes of storage (``slots = memory // 24``); ``load_factor``: the fraction of
    the slots the cleaner fills (:attr:`max_entries`), ``0 < load_factor <= 1``. Raises
    ValueError when the map could not hold a single entry at that load factor (Kafka's
    Cleaner: "offset map is too small to fit in even a single message").
    """

    def __init__(self, memory: int, load_factor: float = 0.9):
        if not 0 < load_factor <= 1:
            raise ValueError(f"load factor {load_factor} is not in (0, 1]")
        self.slots = int(memory) // ENTRY_SIZE
        self.load_factor = float(load_factor)
        if self.slots * self.load_factor <= 1:
            raise ValueError(
                f"offset map of {memory} bytes ({self.slots} slots at load factor "
                f"{load_factor}) is too small to fit in even a single message, so log "
                "cleaning will never make progress. You can increase "
                "log.cleaner.dedupe.buffer.size or decrease log.cleaner.threads")
        self.buffer = _allocate(self.slots * ENTRY_SIZE)
        self.size = 0
        self.latest_offset = -1
        self._dirty = False

    @property
    def memory(self) -> int:
        """Bytes of storage (``slots * 24``)."""
        return len(self.buffer)

    @property
    def max_entries(self) -> int:
        """Entries the cleaner puts at most (``slots * load_factor``, Kafka's
        ``maxDesiredMapSize``)."""
        return int(self.slots * self.load_factor)

    @property
    def utilization(self) -> float:
        """``size / slots`` (Kafka's buffer utilization statistic)."""
        return self.size / self.slots

    def clear(self) -> None:
        """Empty the map: every slot, the size and the latest offset (-1)."""
        if self._dirty:
            _rc.map_clear(self.buffer)
        self.size = 0
        self.latest_offset = -1
        self._dirty = False

    def put(self, key, offset: int) -> None:
        """Associate ``offset`` with ``key`` (bytes-like); the latest offset becomes
        ``offset``. Raises ValueError when the map already holds one entry per slot."""
        self.size = _rc.map_put(self.buffer, self.slots, self.size, key, offset)
        self.latest_offset = offset
        self._dirty = True

    def get(self, key) -> int:
        """The offset stored for ``key``, -1 when it is not in the map."""
        return _rc.map_get(self.buffer, self.slots, key)

    def update_latest_offset(self, offset: int) -> None:
        """Set :attr:`latest_offset` (``OffsetMap.updateLatestOffset``): the cleaner moves it
        past the batches it has read, and to the end of a segment with gaps."""
        self.latest_offset = offset

    # -- batch-at-a-time (kafkafs.record.compaction) ------------------------------------
    def put_records(self, payload, count: int, base_offset: int, start_offset: int) -> bool:
        """Put the keyed records at or past ``start_offset`` of one batch's uncompressed
        records section (``count`` records, first offset ``base_offset``) while the map
        holds fewer than :attr:`max_entries`. Returns True when it filled up (the rest of
        the batch is not in the map). Raises CorruptRecordError (nothing put)."""
        self._dirty = True
        self.size, last, full = _rc.map_records(payload, count, base_offset, self.buffer,
                                                self.slots, self.size, self.max_entries,
                                                start_offset)
        if last >= 0:
            self.latest_offset = last
        return full

    def put_batches(self, buf, pos: int, end: int, start_offset: int,
                    order: BatchOrder | None = None) -> tuple[int, int]:
        """:meth:`put_records` over the run of plain batches of ``buf[pos:end]`` (see
        :func:`kafkafs.record.compaction.map_batches`), moving :attr:`latest_offset` past
        each. ``order``: the walk's order rules (its segment base, next segment's base and
        ``expected``, which moves past each batch taken); a batch out of them stops the run
        as one that is not plain does (the caller's walker then names the damage). Returns
        ``(position, status)``."""
        self._dirty = True
        pos, self.size, latest, status, expected = _rc.map_batches(
            buf, pos, end, self.buffer, self.slots, self.size, self.max_entries, start_offset,
            *(() if order is None else order.bounds()))
        if order is not None:
            order.moved_to(expected)
        if latest >= 0:
            self.latest_offset = latest
        return pos, status

    def __len__(self) -> int:
        return self.size

    def __repr__(self):
        return (f"SkimpyOffsetMap(slots={self.slots}, size={self.size}, "
                f"latest_offset={self.latest_offset})")
