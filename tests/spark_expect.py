"""What a read of a Kafka-format partition dir must return, worked out with kafka-python
(``kafka.record.MemoryRecords``) from the segment files themselves -- an independent decoder
-- and Kafka's consumer rules written out plainly: control records are never data;
read_committed drops the records of transactions that end with an ABORT marker and stops at
the first offset of the earliest transaction without a marker (the last stable offset);
ListOffsets for a timestamp T is the first offset whose record has a timestamp >= T.

Also builders of test topics: kafkafs's own log layer (``Log.append``), and broker-like
segments written with kafka-python's builders (offset gaps of a compacted topic)."""

from __future__ import annotations

import os
import struct

from kafka.errors import CorruptRecordError as KafkaCorruptRecordError
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder

ABORT, COMMIT = 0, 1


def kp_batches(part_dir: str) -> list:
    """Every batch of every ``.log`` of the partition dir in order, as dicts: ``control``,
    ``transactional``, ``producer_id``, ``records`` (tuples ``(offset, timestamp ms,
    timestamp type, key, value, headers)``, timestamp type -1 for v0), ``marker`` (the
    control type of a control batch)."""
    out = []
    names = sorted(n for n in os.listdir(part_dir) if n.endswith(".log"))
    for name in names:
        with open(os.path.join(part_dir, name), "rb") as f:
            data = f.read()
        mr = MemoryRecords(data)
        while True:
            try:
                b = mr.next_batch()
            except KafkaCorruptRecordError:
                # a preallocated segment's zero tail: kafka-python stops with "record size
                # < 14"; zeros to the end of the file are the end of the data
                start = mr._pos - len(mr._next_slice)
                if not any(data[start:]):
                    break
                raise
            if b is None:
                break
            magic = b.magic
            control = magic >= 2 and b.is_control_batch
            recs = []
            for r in b:
                tt = -1 if r.timestamp_type is None else r.timestamp_type
                ts = -1 if r.timestamp is None else r.timestamp
                headers = [(k, v) for k, v in r.headers] if magic >= 2 else []
                recs.append((r.offset, ts, tt, r.key, r.value, headers))
            marker = None
            if control and recs:
                marker = struct.unpack(">hh", recs[0][3][:4])[1]
            out.append({"control": control,
                        "transactional": magic >= 2 and b.is_transactional,
                        "producer_id": b.producer_id if magic >= 2 else -1,
                        "records": recs, "marker": marker})
    return out


def kp_visible(part_dir: str, read_committed: bool) -> tuple[list, int]:
    """``(records, end)``: the data records a reader at that isolation level sees, and the
    offset it may read up to (the last stable offset under read_committed, else the offset
    after the last batch)."""
    batches = kp_batches(part_dir)
    pending: dict[int, list] = {}  # producer id -> record offsets of its open transaction
    first_open: dict[int, int] = {}
    aborted: set = set()
    end = 0
    for b in batches:
        if b["records"]:
            end = max(end, b["records"][-1][0] + 1)
        pid = b["producer_id"]
        if b["control"]:
            if b["marker"] == ABORT:
                aborted.update(pending.get(pid, []))
            pending.pop(pid, None)
            first_open.pop(pid, None)
            continue
        if b["transactional"]:
            pending.setdefault(pid, []).extend(r[0] for r in b["records"])
            if b["records"]:
                first_open.setdefault(pid, b["records"][0][0])
    lso = min(first_open.values(), default=end)
    records = []
    for b in batches:
        if b["control"]:
            continue
        for r in b["records"]:
            if read_committed and (r[0] in aborted or r[0] >= lso):
                continue
            records.append(r)
    return records, (lso if read_committed else end)


def aio_visible(part_dir: str) -> list:
    """The data records of a partition dir of legacy entries as aiokafka's C reader decodes
    them (for files kafka-python cannot read), entry by entry; a record's timestamp type is
    its entry's (-1 for magic 0, else attribute bit 3), as Java's consumer reports it, and
    a missing timestamp is -1."""
    from aiokafka.record._crecords import MemoryRecords as AioMemoryRecords

    out = []
    for name in sorted(n for n in os.listdir(part_dir) if n.endswith(".log")):
        with open(os.path.join(part_dir, name), "rb") as f:
            data = f.read()
        pos = 0
        while len(data) - pos >= 17:
            size = struct.unpack_from(">i", data, pos + 8)[0] + 12
            entry = data[pos:pos + size]
            magic, attributes = entry[16], entry[17]
            tt = -1 if magic == 0 else 1 if attributes & 0x08 else 0
            for r in AioMemoryRecords(entry).next_batch():
                out.append((r.offset, -1 if r.timestamp is None else r.timestamp, tt, r.key,
                            r.value, []))
            pos += size
    return out


def offset_for_timestamp(records: list, ts: int) -> int | None:
    """ListOffsets: the first offset whose record has a timestamp >= ``ts``."""
    for r in records:
        if r[1] >= ts:
            return r[0]
    return None


def rows(topic: str, partition: int, records: list, headers: bool = True) -> list:
    """Expected rows ``(key, value, topic, partition, offset, ts ms, ts type[, headers])``."""
    out = []
    for off, ts, tt, key, value, hdrs in records:
        row = (key, value, topic, partition, off, ts, tt)
        out.append(row + (tuple(hdrs),) if headers else row)
    return out


def spark_rows(df, headers: bool = True) -> list:
    """The rows of a kafkalog DataFrame in the shape of :func:`rows`, sorted by topic,
    partition, offset (timestamps as epoch ms, read in SQL so no time zone plays a part)."""
    cols = ["key", "value", "topic", "partition", "offset", "unix_millis(timestamp) AS ts",
            "timestampType"] + (["headers"] if headers else [])
    out = []
    for r in df.selectExpr(*cols).collect():
        row = (None if r[0] is None else bytes(r[0]), None if r[1] is None else bytes(r[1]),
               r[2], r[3], r[4], r[5], r[6])
        if headers:
            row += (tuple((h["key"], None if h["value"] is None else bytes(h["value"]))
                          for h in r[7]),)
        out.append(row)
    return sorted(out, key=lambda x: (x[2], x[3], x[4]))


# -- broker-like segments ------------------------------------------------------------------

def kp_batch(base: int, records, *, compression: int = 0, offset_deltas=None,
             pid: int = -1, transactional: bool = False) -> bytes:
    """One v2 batch built by kafka-python: ``records`` are ``(ts, key, value, headers)``,
    offsets ``base + offset_deltas[i]`` (default i); the base offset stamped as a broker
    does (bytes 0-7 are outside the CRC)."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=compression,
                                  is_transactional=transactional, producer_id=pid,
                                  producer_epoch=0 if pid >= 0 else -1,
                                  base_sequence=0 if pid >= 0 else -1, batch_size=16 << 20)
    for i, (ts, key, value, headers) in enumerate(records):
        delta = offset_deltas[i] if offset_deltas is not None else i
        assert b.append(delta, timestamp=ts, key=key, value=value, headers=headers) is not None
    buf = b.build()
    struct.pack_into(">q", buf, 0, base)
    return bytes(buf)


def write_segments(part_dir: str, segments: dict) -> None:
    """``{base offset: [batch bytes, ...]}`` as ``.log`` files (no index files: a broker's
    copy without them reads through the log)."""
    os.makedirs(part_dir, exist_ok=True)
    for base, batches in segments.items():
        with open(os.path.join(part_dir, f"{base:020d}.log"), "wb") as f:
            f.write(b"".join(batches))
