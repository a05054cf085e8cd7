"""An independent model of a compacted partition and a reader of its files, for the cleaner
tests (tests/test_cleaner.py, tests/test_cleaner_crash.py).

:class:`Model` follows Kafka's rules written out plainly, from what was appended and which
passes ran: a dict key -> (last offset, value), tombstones with the delete horizon their
first cleaning gave them. :func:`read_partition` decodes a partition's ``.log`` files with
kafka-python (``kafka.record``), never with kafkafs's decoder, and checks every batch's CRC.
"""

from __future__ import annotations

import os

from kafka.record.memory_records import MemoryRecords

from kafkafs.log.segment import LogSegment


class Batch:
    """A batch as kafka-python reads it."""

    def __init__(self, segment: str, kp):
        self.segment = segment
        self.magic = kp.magic
        self.records = [(r.offset, r.timestamp, r.key, r.value) for r in kp]
        if kp.magic >= 2:
            self.base_offset = kp.base_offset
            self.last_offset = kp.base_offset + kp.last_offset_delta
        else:  # a legacy entry: its offset field is its last (inner) offset
            self.base_offset = self.records[0][0]
            self.last_offset = kp.base_offset
        self.attributes = kp.attributes if kp.magic >= 2 else 0
        self.producer_id = kp.producer_id if kp.magic >= 2 else -1
        self.producer_epoch = kp.producer_epoch if kp.magic >= 2 else -1
        self.base_sequence = kp.base_sequence if kp.magic >= 2 else -1
        self.is_control = bool(kp.is_control_batch) if kp.magic >= 2 else False
        self.is_transactional = bool(kp.is_transactional) if kp.magic >= 2 else False
        self.first_timestamp = kp.first_timestamp if kp.magic >= 2 else None
        self.max_timestamp = kp.max_timestamp if kp.magic >= 2 else None

    @property
    def delete_horizon(self):
        return self.first_timestamp if self.attributes & 0x40 else None


def read_partition(pdir: str) -> list[Batch]:
    """Every batch of the partition directory's ``.log`` files in offset order, decoded by
    kafka-python; asserts every CRC and that the bytes are whole batches."""
    batches = []
    for name in sorted(n for n in os.listdir(pdir) if n.endswith(".log")):
        with open(os.path.join(pdir, name), "rb") as f:
            data = f.read()
        recs = MemoryRecords(data)
        assert recs.valid_bytes() == len(data), f"{name}: trailing bytes are not a batch"
        while recs.has_next():
            kp = recs.next_batch()
            if kp is None:
                break
            assert kp.validate_crc(), f"{name}: bad CRC at offset {kp.base_offset}"
            batches.append(Batch(name, kp))
    return batches


def check_offsets(batches: list[Batch]) -> None:
    """Batches and records strictly increase in offset, and each record lies in its batch."""
    last = -1
    for b in batches:
        assert b.base_offset > last, f"batch {b.base_offset} after offset {last}"
        prev = None
        for r in b.records:
            assert b.base_offset <= r[0] <= b.last_offset
            assert prev is None or r[0] > prev
            prev = r[0]
        last = b.last_offset


def check_indexes(lg) -> None:
    """Every segment's indexes pass Kafka's sanity check and kafkafs's order checks."""
    for seg in lg.segments():
        seg.sanity_check()
        assert seg.index.order_problem(seg.size) is None, seg
        assert seg.time_index.order_problem() is None, seg


def check_index_lookups(lg, offsets) -> None:
    """Each record offset is found through the index (``translate_offset``)."""
    for o in offsets:
        b = lg.batch_for(o)
        assert b is not None and b.base_offset <= o <= b.last_offset, o


class Model:
    """What a compacted partition must hold (Kafka's rules, plainly).

    ``append(offset, key, value, timestamp)`` records what was written;
    ``cleaned(end_offset, now, delete_retention_ms)`` a pass that cleaned below
    ``end_offset`` at ``now``: below it, only the last record of each key stays (the last
    below ``end_offset``: the pass does not look further), and records without a key go.
    Tombstones cleaned for the first time get the horizon ``now + delete_retention_ms``; a
    later pass at or after it removes them.
    """

    def __init__(self):
        self.records: dict[int, tuple] = {}  # offset -> (key, value, timestamp)
        self.latest: dict[bytes, int] = {}  # key -> offset of its last record
        self.horizon: dict[int, int] = {}  # tombstone offset -> delete horizon
        self.gone: set[int] = set()  # offsets removed by cleaning
        self.cleaned_below = 0

    def append(self, offset: int, key, value, timestamp: int = 0) -> None:
        self.records[offset] = (key, value, timestamp)
        if key is not None:
            self.latest[key] = offset

    def discard(self, offsets) -> None:
        """Records that never count (aborted transactions): gone, the keys' latest records
        recomputed."""
        for o in offsets:
            self.records.pop(o, None)
        self.latest = {}
        for o in sorted(self.records):
            key = self.records[o][0]
            if key is not None:
                self.latest[key] = o

    def cleaned(self, end_offset: int, now: int, delete_retention_ms: int) -> None:
        # the pass knows the keys below end_offset only: a record there goes when a later
        # one of its key is there too (later ones past end_offset are not looked at)
        latest_below: dict = {}
        for offset in sorted(self.records):
            key = self.records[offset][0]
            if offset < end_offset and key is not None and offset not in self.gone:
                latest_below[key] = offset
        for offset, (key, value, _ts) in self.records.items():
            if offset >= end_offset or offset in self.gone:
                continue
            if key is None or latest_below[key] != offset:
                self.gone.add(offset)
            elif value is None:
                h = self.horizon.get(offset)
                if h is None:
                    self.horizon[offset] = now + delete_retention_ms
                elif now >= h:
                    self.gone.add(offset)
        self.cleaned_below = max(self.cleaned_below, end_offset)

    def expected(self) -> dict[int, tuple]:
        """offset -> (key, value) of every record the log must still hold."""
        return {o: (k, v) for o, (k, v, _t) in self.records.items() if o not in self.gone}

    def check(self, batches: list[Batch]) -> None:
        """The partition's records are exactly the expected ones (offset, key, value), and
        each key's last record is the model's latest (or gone: an expired tombstone, with
        nothing older left behind)."""
        got = {r[0]: (r[2], r[3]) for b in batches if not b.is_control for r in b.records}
        want = self.expected()
        missing = sorted(set(want) - set(got))
        extra = sorted(set(got) - set(want))
        assert not missing, f"records missing: {missing[:20]}"
        assert not extra, f"records that should be gone: {extra[:20]}"
        for o, kv in want.items():
            assert got[o] == kv, (o, got[o], kv)
        last: dict = {}
        for o in sorted(got):
            if got[o][0] is not None:
                last[got[o][0]] = o
        for key, o in self.latest.items():
            if o in self.gone:  # an expired tombstone: nothing of the key is left
                assert key not in last, f"{key!r} came back at offset {last[key]}"
            else:
                assert last[key] == o, (key, last[key], o)


def open_segments(pdir, config):
    """LogSegment objects of the ``.log`` files of ``pdir`` (read-only), oldest first."""
    bases = sorted(int(n[:20]) for n in os.listdir(pdir) if n.endswith(".log"))
    return [LogSegment(pdir, b, config, writable=False) for b in bases]
