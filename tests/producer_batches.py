"""An independent model of where a Kafka producer closes a record batch, for tests of
``append`` and ``kafkafs produce``: the batches are read back from the segment files with
kafka-python and checked against the Java producer's rule (``MemoryRecordsBuilder.hasRoomFor``
with ``batch.size``, record sizes from kafka-python's ``DefaultRecordBatchBuilder.size_in_bytes``,
and for compressed batches ``CompressionRatioEstimator``'s estimate times 1.05)."""

from __future__ import annotations

import os
import random

from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder

HEADER = 61  # DefaultRecordBatch.RECORD_BATCH_OVERHEAD


class Batch:
    """One batch as kafka-python reads it: ``size`` in bytes, ``compressed``, ``records``
    (kafka-python records: offset, timestamp, key, value, headers)."""

    def __init__(self, kp_batch):
        self.size = kp_batch.size_in_bytes
        self.compressed = kp_batch.compression_type != 0
        self.records = list(kp_batch)

    def __repr__(self):
        return f"Batch(size={self.size}, records={len(self.records)}, " \
               f"offsets={self.records[0].offset}..{self.records[-1].offset})"


def read_batches(partition_dir: str) -> list[Batch]:
    """Every batch of the partition's ``.log`` files, in order, read with kafka-python."""
    out = []
    for name in sorted(n for n in os.listdir(partition_dir) if n.endswith(".log")):
        with open(os.path.join(partition_dir, name), "rb") as f:
            mr = MemoryRecords(f.read())
        while mr.has_next():
            b = mr.next_batch()
            if b is None:
                break
            out.append(Batch(b))
    return out


def values(batches: list[Batch]) -> list[bytes]:
    return [r.value for b in batches for r in b.records]


def _size(delta: int, first, record) -> int:
    return DefaultRecordBatchBuilder.size_in_bytes(
        delta, record.timestamp - first.timestamp, record.key, record.value, record.headers)


def check_batches(batches: list[Batch], batch_size: int, may_end=frozenset()) -> None:
    """Assert that ``batches`` (in the order they were written, as one producer wrote them
    to one topic) are cut by the producer's rule for ``batch_size``: each record after a
    batch's first had room when it was taken, and a batch was closed only when the record
    after it had none, or where the writer stopped (its last offset in ``may_end``: the end
    of a write request or of the input). An uncompressed batch of several records is
    therefore at most ``batch_size`` bytes."""
    estimate = 1.0  # the topic's compression ratio estimate, per codec (one codec here)
    for k, b in enumerate(batches):
        recs = b.records
        ratio = estimate * 1.05 if b.compressed else 1.0
        used = 0
        for i, r in enumerate(recs):
            size = _size(i, recs[0], r)
            if i:
                assert int(used * ratio) + size <= batch_size - HEADER, \
                    f"record {r.offset} had no room in {b} (batch.size {batch_size})"
            used += size
        if not b.compressed:
            assert b.size == HEADER + used
            assert len(recs) == 1 or b.size <= batch_size, (b, batch_size)
        if k + 1 < len(batches) and recs[-1].offset not in may_end:
            nxt = batches[k + 1].records[0]
            assert int(used * ratio) + _size(len(recs), recs[0], nxt) > batch_size - HEADER, \
                f"{b} was closed with room for record {nxt.offset} (batch.size {batch_size})"
        if b.compressed:
            observed = (b.size - HEADER) / used
            if observed > estimate:
                estimate = max(estimate + 0.05, observed)
            elif observed < estimate:
                estimate -= 0.005


def random_lines(n: int, seed: int, longest: int = 300, keyed: bool = False) -> list[bytes]:
    """``n`` lines of 0 to ``longest`` bytes after a prefix: the line number (``"i "``), or
    with ``keyed`` one of 50 keys and ``:``."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        value = bytes(rnd.choice(b"abcdefghij ") for _ in range(rnd.randint(0, longest)))
        out.append(b"k%d:" % rnd.randrange(50) + value if keyed else b"%d " % i + value)
    return out
