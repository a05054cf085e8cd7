"""Where a producer closes a record batch: Kafka's ``batch.size`` rule.

A Java producer fills one batch per partition (``RecordAccumulator``) through a
``MemoryRecordsBuilder`` whose write limit is ``batch.size`` (producer config, default
16384 bytes). ``hasRoomFor`` takes the next record while::

    61 + estimated records bytes + size of the next record <= batch.size

where the estimated records bytes are the bytes written so far (uncompressed batches), or
those bytes times the topic's estimated compression ratio times 1.05 (compressed ones:
``estimatedBytesWritten``; the ratio comes from ``CompressionRatioEstimator``, updated
after every batch). The first record always goes in: a record larger than ``batch.size``
gets a batch of its own (its writer then holds it alone: kafkafs does not squeeze tiny
records into the few spare bytes the Java producer's upper-bound buffer may leave), and
``batch.size=0`` makes every record a batch. Record sizes are ``DefaultRecord.sizeInBytes``
(length varint included) at the record's offset and timestamp delta in the batch.

Pure computation, no I/O: the mount's ``append`` (kafkafs.fs.append) and ``kafkafs
produce`` cut their batches with it; the C encoder ``encode_text`` applies the same rule
to lines (its ``budget`` and ``ratio``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from . import compression as codecs
from .varint import varint_size

DEFAULT_BATCH_SIZE = 16384  # ProducerConfig.DEFAULT_BATCH_SIZE
RECORD_BATCH_OVERHEAD = 61  # DefaultRecordBatch.RECORD_BATCH_OVERHEAD
COMPRESSION_RATE_ESTIMATION_FACTOR = 1.05  # MemoryRecordsBuilder
COMPRESSION_RATIO_IMPROVING_STEP = 0.005  # CompressionRatioEstimator
COMPRESSION_RATIO_DETERIORATE_STEP = 0.05


def _vsize(n: int) -> int:
    """:func:`varint_size`, with the sizes of lengths and deltas below 2^27 found at once."""
    z = (n << 1) ^ (n >> 63)
    if z < 0x80:
        return 1
    if z < 0x4000:
        return 2
    if z < 0x200000:
        return 3
    if z < 0x10000000:
        return 4
    return varint_size(n)


def record_size(offset_delta: int, timestamp_delta: int, key_size: int, value_size: int,
                headers: Sequence[tuple] = ()) -> int:
    """Bytes of one v2 record in an uncompressed batch, its length varint included
    (``DefaultRecord.sizeInBytes``). ``key_size``/``value_size``: -1 for null;
    ``headers``: ``(str, bytes | None)`` pairs."""
    # attributes and the header count (1 byte each below 64 headers), the key and value,
    # then the varints, the common small ones sized inline (a call costs more than the rest)
    body = 2 + max(key_size, 0) + max(value_size, 0) \
        + (1 if -64 <= timestamp_delta < 64 else _vsize(timestamp_delta)) \
        + (1 if offset_delta < 64 else _vsize(offset_delta)) \
        + (1 if key_size < 64 else _vsize(key_size)) \
        + (1 if value_size < 64 else 2 if value_size < 8192 else _vsize(value_size))
    if headers:
        body += _vsize(len(headers)) - 1
        for hkey, hvalue in headers:
            k = len(hkey.encode("utf-8"))
            v = -1 if hvalue is None else len(hvalue)
            body += _vsize(k) + k + _vsize(v) + max(v, 0)
    return (1 if body < 64 else 2 if body < 8192 else _vsize(body)) + body


def effective_codec(compression_type: str, requested: int | None = None) -> int:
    """The codec id a log writes with: ``requested`` when given, else the topic's
    ``compression.type`` (``producer``/``none``: uncompressed), as ``Log`` chooses."""
    if requested is not None:
        return requested
    if compression_type in ("producer", "none"):
        return codecs.NONE
    return codecs.codec_id(compression_type)


class CompressionRatioEstimator:
    """Kafka's ``CompressionRatioEstimator``: per topic and codec, the estimated ratio of
    compressed to uncompressed record bytes, starting at 1.0; after each batch it moves up
    at once to a worse observed ratio (at least by 0.05) and down by 0.005 towards a better
    one. Thread-safe."""

    def __init__(self):
        self._ratios: dict[tuple[str, int], float] = {}
        self._lock = threading.Lock()

    def estimation(self, topic: str, codec: int) -> float:
        return self._ratios.get((topic, codec), 1.0)

    def update(self, topic: str, codec: int, observed: float) -> float:
        """Fold the ``observed`` ratio of a batch just written in; returns the new
        estimate."""
        with self._lock:
            current = self._ratios.get((topic, codec), 1.0)
            if observed > current:
                current = max(current + COMPRESSION_RATIO_DETERIORATE_STEP, observed)
            elif observed < current:
                current -= COMPRESSION_RATIO_IMPROVING_STEP
            self._ratios[(topic, codec)] = current
            return current

    def observe(self, topic: str, codec: int, batch_bytes: int, records_bytes: int) -> None:
        """Update from a batch of ``batch_bytes`` (header included) holding
        ``records_bytes`` of records before compression (``MemoryRecordsBuilder.close``:
        compressed bytes after the header over uncompressed bytes). Does nothing for an
        uncompressed batch or an empty one."""
        if codec != codecs.NONE and records_bytes > 0:
            self.update(topic, codec, (batch_bytes - RECORD_BATCH_OVERHEAD) / records_bytes)

    def forget(self, topic: str | None = None) -> None:
        """Drop the estimates of ``topic`` (None: of every topic)."""
        with self._lock:
            if topic is None:
                self._ratios.clear()
            else:
                for k in [k for k in self._ratios if k[0] == topic]:
                    del self._ratios[k]


ESTIMATOR = CompressionRatioEstimator()  # one per process, as the Java producer's


def batch_limits(batch_size: int, topic: str, codec: int,
                 estimator: CompressionRatioEstimator = ESTIMATOR) -> tuple[int, float]:
    """``(budget, ratio)`` of a new batch: it takes the next record of ``size`` bytes while
    ``int(records_bytes * ratio) + size <= budget`` (or while it is empty). ``budget`` is
    ``batch_size`` less the batch header; ``ratio`` is 1.0 uncompressed, else the
    estimate for ``topic`` and ``codec`` times 1.05."""
    if codec == codecs.NONE:
        return batch_size - RECORD_BATCH_OVERHEAD, 1.0
    return (batch_size - RECORD_BATCH_OVERHEAD,
            estimator.estimation(topic, codec) * COMPRESSION_RATE_ESTIMATION_FACTOR)


class BatchSizer:
    """The records of one batch being filled, counted as ``MemoryRecordsBuilder`` counts
    them. ``budget``/``ratio`` as :func:`batch_limits` returns them."""

    __slots__ = ("budget", "count", "first_timestamp", "ratio", "used")

    def __init__(self, budget: int, ratio: float = 1.0):
        self.budget = budget
        self.ratio = ratio
        self.count = 0
        self.used = 0
        self.first_timestamp = 0

    def add(self, timestamp: int, key_size: int, value_size: int,
            headers: Sequence[tuple] = ()) -> bool:
        """Count the next record in when it has room (``hasRoomFor``; always for the first
        one). Returns whether it was taken."""
        if self.count == 0:
            self.first_timestamp = timestamp
        size = record_size(self.count, timestamp - self.first_timestamp, key_size,
                           value_size, headers)
        if self.count and int(self.used * self.ratio) + size > self.budget:
            return False
        self.used += size
        self.count += 1
        return True
