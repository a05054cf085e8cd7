"""Arrow record batches (the rows of a Spark task) to Kafka record batches per topic-partition.

What a Java producer with Kafka's default partitioner does with the rows Spark's Kafka sink
sends (``KafkaWriteTask``), column-wise:

* **Partition**: the ``partition`` column when set (a value outside ``[0, N)`` is refused, as
  the producer refuses it); else a record with a key goes to ``toPositive(murmur2(key)) % N``
  (``BuiltInPartitioner.partitionForKey``; :func:`murmur2_array` computes it for a whole
  column at once, equal to :func:`kafkafs.log.partitioner.murmur2`); a record without a key
  goes to a *sticky* partition that moves on, round robin from a random start, after each
  ``batch.size`` bytes (KIP-794's uniform sticky partitioner, without its queue-size
  weights), so such records spread evenly.
* **Batches**: the records of one partition, in the order they came, are cut where the
  producer closes a batch (``MemoryRecordsBuilder.hasRoomFor``, the rule
  :class:`kafkafs.record.producer_batch.BatchSizer` follows; :func:`cut_batch` applies it to
  a column of record sizes), compressed with the topic's codec (or the producer's
  ``compression.type`` when the topic keeps the producer's) and encoded by the record
  layer (:func:`kafkafs.record.batch.encode_batch`). A batch not yet full waits for the
  partition's next rows (in a later Arrow batch), as a producer's batch waits for more
  records; :meth:`TaskEncoder.finish` closes them at the end of the task.
* **Timestamps**: the ``timestamp`` column (Spark timestamp, or a double of seconds) in ms,
  truncated as ``KafkaWriteTask`` truncates micros; null means the time of sending;
  negative ones are refused (``ProducerRecord``); under ``LogAppendTime`` every record gets
  the time of writing.

No per-record Python work but building the tuples the C encoder takes.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from ..log.names import validate_topic
from ..record import compression as codecs
from ..record.batch import CREATE_TIME, LOG_APPEND_TIME, encode_batch
from ..record.producer_batch import ESTIMATOR, batch_limits

_M = np.uint32(0x5BD1E995)
_SEED = np.uint32(0x9747B28C)
# varint sizes: a zigzag value below 2^(7k) takes k bytes
_VARINT_LIMITS = np.array([1 << (7 * k) for k in range(1, 10)], dtype=np.uint64)


@dataclass(frozen=True)
class TopicLayout:
    """How a task writes one topic: ``partitions`` (N), ``codec`` (record compression id),
    ``log_append_time`` (the topic's ``message.timestamp.type``), ``batch_size`` (the
    producer's ``batch.size``, bytes)."""

    topic: str
    partitions: int
    codec: int = codecs.NONE
    log_append_time: bool = False
    batch_size: int = 16384


def murmur2_array(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Kafka's murmur2 (``Utils.murmur2``, seed 0x9747b28c) of many keys at once, as uint32.

    ``data``: uint8 buffer holding the keys; key ``i`` is ``data[starts[i]:starts[i] +
    lengths[i]]`` (int64 arrays, lengths >= 0). The signed hash of
    :func:`kafkafs.log.partitioner.murmur2` is this value read as an int32."""
    lengths = lengths.astype(np.int64, copy=False)
    starts = starts.astype(np.int64, copy=False)
    h = _SEED ^ lengths.astype(np.uint32)
    n4 = lengths // 4
    active = np.flatnonzero(n4 > 0)
    i = 0
    while active.size:
        at = starts[active] + 4 * i
        k = (data[at].astype(np.uint32) | (data[at + 1].astype(np.uint32) << 8)
             | (data[at + 2].astype(np.uint32) << 16) | (data[at + 3].astype(np.uint32) << 24))
        k *= _M
        k ^= k >> 24
        k *= _M
        h[active] = (h[active] * _M) ^ k
        i += 1
        active = active[n4[active] > i]
    rest = lengths & 3
    tail = starts + n4 * 4
    sel = np.flatnonzero(rest == 3)
    h[sel] ^= data[tail[sel] + 2].astype(np.uint32) << 16
    sel = np.flatnonzero(rest >= 2)
    h[sel] ^= data[tail[sel] + 1].astype(np.uint32) << 8
    sel = np.flatnonzero(rest >= 1)
    h[sel] ^= data[tail[sel]].astype(np.uint32)
    h[sel] *= _M
    h ^= h >> 13
    h *= _M
    h ^= h >> 15
    return h


def varint_sizes(values: np.ndarray) -> np.ndarray:
    """Bytes of each value of an int64 array as a zigzag varint (``ByteUtils.sizeOfVarlong``)."""
    v = values.astype(np.int64, copy=False)
    z = ((v << 1) ^ (v >> 63)).view(np.uint64)
    return 1 + np.searchsorted(_VARINT_LIMITS, z, side="right").astype(np.int64)


_HALF_LIMITS = np.array([1 << (7 * k - 1) for k in range(1, 10)], dtype=np.int64)
_offset_sizes = varint_sizes(np.arange(1 << 12, dtype=np.int64))  # grown on demand


def _sizes_of_offsets(w: int) -> np.ndarray:
    """Varint sizes of the offset deltas 0..w-1."""
    global _offset_sizes
    if w > len(_offset_sizes):
        _offset_sizes = varint_sizes(np.arange(max(w, 2 * len(_offset_sizes)), dtype=np.int64))
    return _offset_sizes[:w]


def cut_batch(timestamps: np.ndarray, base_sizes: np.ndarray, budget: int, ratio: float,
              window: int = 64) -> tuple[int, bool, np.ndarray]:
    """Where the producer closes the batch that starts with the first record of the given
    columns: ``(count, full, sizes)``. ``timestamps`` (ms) and ``base_sizes`` (a record's
    body bytes without its timestamp and offset deltas: attributes, key and value with their
    lengths, headers) describe the records in order; the batch takes record ``j`` while
    ``int(used * ratio) + size(j) <= budget`` (or when it is the first), ``size(j)``
    being ``DefaultRecord.sizeInBytes`` at offset delta ``j`` and timestamp delta
    ``timestamps[j] - timestamps[0]`` and ``used`` the bytes of the records before it
    (:func:`~kafkafs.record.producer_batch.batch_limits` gives ``budget`` and ``ratio``).
    ``full``: a record that does not fit was met (False: every record fits, the batch could
    take more). ``sizes``: the sizes of at least the ``count`` records taken. ``window``:
    how many records to size at first (grown until the batch ends)."""
    n = len(timestamps)
    w = max(1, min(n, window))
    while True:
        body = base_sizes[:w] + _sizes_of_offsets(w)
        deltas = timestamps[:w] - timestamps[0]
        if deltas.any():
            body += varint_sizes(deltas)
        else:
            body += 1
        # the length varint of a body (>= 0): 1 byte below 2^6, 2 below 2^13, ...
        sizes = body + 1 + np.searchsorted(_HALF_LIMITS, body, side="right")
        ends = np.cumsum(sizes)
        if ratio == 1.0:  # ends grow: the first record past the budget ends the batch
            k = max(1, int(np.searchsorted(ends, budget, side="right")))
            if k < w:
                return k, True, sizes
        else:
            fits = np.floor((ends - sizes) * ratio).astype(np.int64) + sizes <= budget
            fits[0] = True
            bad = np.flatnonzero(~fits)
            if bad.size:
                return int(bad[0]), True, sizes
        if w == n:
            return w, False, sizes
        w = min(n, w * 4)


def _binary_parts(arr):
    """``(data uint8, starts int64, lengths int64 (-1 null))`` of a binary or string Arrow
    array (its buffers, not copied)."""
    import pyarrow as pa

    t = arr.type
    if pa.types.is_string(t):
        arr = arr.view(pa.binary())
    elif pa.types.is_large_string(t):
        arr = arr.view(pa.large_binary())
    large = pa.types.is_large_binary(arr.type)
    bufs = arr.buffers()
    n = len(arr)
    offsets = np.frombuffer(bufs[1], dtype=np.int64 if large else np.int32)
    offsets = offsets[arr.offset:arr.offset + n + 1].astype(np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None and n else \
        np.zeros(0, dtype=np.uint8)
    lengths = np.diff(offsets)
    if arr.null_count:
        lengths[arr.is_null().to_numpy(zero_copy_only=False)] = -1
    return arr, data, offsets[:-1], lengths


def _headers_of(arr) -> tuple[list, np.ndarray]:
    """The ``headers`` column as tuples of ``(key str, value bytes | None)`` per row (None
    for a null or empty list) and each row's header bytes in a record (the header count
    varint included). Raises ValueError for a null header key (``RecordHeader``)."""
    rows = arr.to_pylist()
    out, sizes = [], np.ones(len(rows), dtype=np.int64)
    for i, hs in enumerate(rows):
        if not hs:
            out.append(())
            continue
        tup = []
        size = int(varint_sizes(np.array([len(hs)]))[0])
        for h in hs:
            k, v = h["key"], h["value"]
            if k is None:
                raise ValueError("Null header keys are not permitted")
            kb = len(k.encode("utf-8"))
            vl = -1 if v is None else len(v)
            size += int(varint_sizes(np.array([kb, vl])).sum()) + kb + max(vl, 0)
            tup.append((k, v))
        out.append(tuple(tup))
        sizes[i] = size
    return out, sizes


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def timestamps_ms(arr, now: int) -> np.ndarray:
    """The ``timestamp`` column in ms (Spark timestamps in µs truncated to ms as
    ``KafkaWriteTask`` does; doubles are seconds, cast as Spark casts them); null rows get
    ``now``. Raises ValueError for a negative timestamp (``ProducerRecord``)."""
    import pyarrow as pa

    t = arr.type
    if pa.types.is_timestamp(t):
        per_second = {"s": 1, "ms": 1000, "us": 1_000_000, "ns": 1_000_000_000}[t.unit]
        raw = arr.cast(pa.int64()).fill_null(0).to_numpy()
        us = raw * (1_000_000 // per_second) if per_second <= 1_000_000 else raw // 1000
    elif pa.types.is_floating(t):
        secs = arr.cast(pa.float64()).fill_null(0.0).to_numpy()
        if not np.isfinite(secs).all():
            raise ValueError("a timestamp of the timestamp column is not a finite number")
        us = np.trunc(secs * 1_000_000).astype(np.int64)
    else:
        raise ValueError(f"timestamp attribute unsupported type {t}")
    bad = np.flatnonzero(us < 0)
    if bad.size:
        raise ValueError(f"Invalid timestamp: {-((-us[bad[0]]) // 1000)}. Timestamp should "
                         "always be non-negative or null.")
    ms = us // 1000
    if arr.null_count:
        ms[arr.is_null().to_numpy(zero_copy_only=False)] = now
    return ms


@dataclass
class _Pending:
    """Rows of one topic-partition not yet in a closed batch."""

    records: list = field(default_factory=list)
    timestamps: list = field(default_factory=list)  # np arrays
    base_sizes: list = field(default_factory=list)
    window: int = 64


class TaskEncoder:
    """Turn one task's Arrow batches into encoded Kafka batches, per topic-partition.

    ``layout(topic)``: the :class:`TopicLayout` of a topic (raising ValueError for one that
    cannot be written); ``topic``: the topic of every row (the ``topic`` option), or None
    to read the ``topic`` column. :meth:`add` and :meth:`finish` yield ``(topic, partition,
    [bytearray batches with base offset 0])``."""

    def __init__(self, layout, topic: str | None = None, rng: random.Random | None = None):
        self._layout = layout
        self._layouts: dict[str, TopicLayout] = {}
        self.topic = topic
        self._rng = rng or random.Random()
        self._sticky: dict[str, list[int]] = {}  # topic -> [start partition, bytes so far]
        self._pending: dict[tuple[str, int], _Pending] = {}

    def layout(self, topic: str) -> TopicLayout:
        lay = self._layouts.get(topic)
        if lay is None:
            validate_topic(topic)
            lay = self._layouts[topic] = self._layout(topic)
        return lay

    # -- rows to partitions ------------------------------------------------------------
    def _partitions(self, lay: TopicLayout, rows: np.ndarray, explicit, key_data, key_starts,
                    key_lengths, value_lengths) -> np.ndarray:
        """The partition of each of ``rows`` (indices into the batch's columns)."""
        n = lay.partitions
        out = np.empty(len(rows), dtype=np.int64)
        if explicit is not None:
            given, valid = explicit
            g, v = given[rows], valid[rows]
            bad = np.flatnonzero(v & ((g < 0) | (g >= n)))
            if bad.size:
                raise ValueError(f"Invalid partition given with record: {int(g[bad[0]])} is not "
                                 f"in the range [0...{n}].")
            out[v] = g[v]
            todo = ~v
        else:
            todo = np.ones(len(rows), dtype=bool)
        klen = key_lengths[rows]
        keyed = todo & (klen >= 0)
        if keyed.any():
            h = murmur2_array(key_data, key_starts[rows][keyed], klen[keyed])
            out[keyed] = (h & np.uint32(0x7FFFFFFF)).astype(np.int64) % n
        loose = todo & (klen < 0)
        if loose.any():
            state = self._sticky.setdefault(lay.topic, [self._rng.randrange(n), 0])
            est = np.maximum(value_lengths[rows][loose], 0) + 10  # a record's bytes, about
            before = state[1] + np.cumsum(est) - est
            out[loose] = (state[0] + before // max(lay.batch_size, 1)) % n
            state[1] += int(est.sum())
        return out

    def add(self, rb) -> Iterator[tuple[str, int, list[bytearray]]]:
        """Take the rows of the Arrow record batch ``rb`` (Spark's Kafka sink columns) and
        yield the batches they close. Raises ValueError for rows Kafka's producer refuses
        (null topic, bad partition, negative timestamp, null header key)."""
        import pyarrow as pa

        n = rb.num_rows
        if n == 0:
            return
        names = rb.schema.names
        col = {name: rb.column(i) for i, name in enumerate(names)}
        now = now_ms()
        # topics
        if self.topic is not None:
            topics = [self.topic]
            tidx = np.zeros(n, dtype=np.int64)
        else:
            tcol = col["topic"]
            if tcol.null_count:
                raise ValueError("null topic present in the data. Use the topic option for "
                                 "setting a default topic.")
            enc = tcol.dictionary_encode()
            topics = [str(t) for t in enc.dictionary.to_pylist()]
            tidx = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        layouts = [self.layout(t) for t in topics]
        # columns
        if "key" in col:
            key_arr, key_data, key_starts, key_lengths = _binary_parts(col["key"])
        else:
            key_arr, key_data = pa.nulls(n, pa.binary()), np.zeros(0, dtype=np.uint8)
            key_starts, key_lengths = np.zeros(n, dtype=np.int64), np.full(n, -1, np.int64)
        val_arr, _vdata, _vstarts, val_lengths = _binary_parts(col["value"])
        if "timestamp" in col:
            ts = timestamps_ms(col["timestamp"], now)
        else:
            ts = np.full(n, now, dtype=np.int64)
        explicit = None
        if "partition" in col:
            pcol = col["partition"]
            explicit = (pcol.cast(pa.int64()).fill_null(-1).to_numpy(),
                        ~pcol.is_null().to_numpy(zero_copy_only=False))
        headers, header_sizes = (None, None)
        if "headers" in col and col["headers"].null_count < n:
            headers, header_sizes = _headers_of(col["headers"])
        # partition of every row, then the rows of each topic-partition in order
        part = np.empty(n, dtype=np.int64)
        for t, lay in enumerate(layouts):
            rows = np.flatnonzero(tidx == t) if len(layouts) > 1 else np.arange(n)
            part[rows] = self._partitions(lay, rows, explicit, key_data, key_starts,
                                          key_lengths, val_lengths)
            if lay.log_append_time:
                ts[rows] = now
        group = tidx * (max(lay.partitions for lay in layouts) + 1) + part
        order = np.argsort(group, kind="stable")
        sorted_group = group[order]
        bounds = np.flatnonzero(np.diff(sorted_group)) + 1
        starts = np.concatenate(([0], bounds))
        ends = np.concatenate((bounds, [n]))
        take = pa.array(order)
        klist = key_arr.take(take).to_pylist()
        vlist = val_arr.take(take).to_pylist()
        ts_sorted = ts[order]
        base = 1 + varint_sizes(key_lengths) + np.maximum(key_lengths, 0) \
            + varint_sizes(val_lengths) + np.maximum(val_lengths, 0)
        if headers is None:
            base += 1
            records = list(zip(ts_sorted.tolist(), klist, vlist))
        else:
            base += header_sizes
            records = list(zip(ts_sorted.tolist(), klist, vlist,
                               [headers[i] for i in order.tolist()]))
        base_sorted = base[order]
        max_parts = max(lay.partitions for lay in layouts) + 1
        for s, e in zip(starts.tolist(), ends.tolist()):
            g = int(sorted_group[s])
            topic, p = topics[g // max_parts], g % max_parts
            pend = self._pending.setdefault((topic, p), _Pending())
            pend.records.extend(records[s:e])
            pend.timestamps.append(ts_sorted[s:e])
            pend.base_sizes.append(base_sorted[s:e])
            batches = self._drain(topic, p, pend, final=False)
            if batches:
                yield topic, p, batches

    def finish(self) -> Iterator[tuple[str, int, list[bytearray]]]:
        """Close every batch still open (the end of the task)."""
        for (topic, p), pend in sorted(self._pending.items()):
            batches = self._drain(topic, p, pend, final=True)
            if batches:
                yield topic, p, batches
        self._pending.clear()

    def _drain(self, topic: str, p: int, pend: _Pending, final: bool) -> list[bytearray]:
        """Cut and encode the closed batches of ``pend`` (all of them when ``final``)."""
        if not pend.records:
            return []
        lay = self.layout(topic)
        ts = np.concatenate(pend.timestamps) if len(pend.timestamps) > 1 else pend.timestamps[0]
        base = np.concatenate(pend.base_sizes) if len(pend.base_sizes) > 1 else \
            pend.base_sizes[0]
        recs = pend.records
        ts_type = LOG_APPEND_TIME if lay.log_append_time else CREATE_TIME
        out = []
        s, n = 0, len(recs)
        while s < n:
            budget, ratio = batch_limits(lay.batch_size, topic, lay.codec)
            k, full, sizes = cut_batch(ts[s:], base[s:], budget, ratio, pend.window)
            if not full and not final:
                break
            chunk = recs[s:s + k]
            if ts_type == LOG_APPEND_TIME:
                data = encode_batch(chunk, compression=lay.codec, timestamp_type=ts_type,
                                    log_append_time=int(ts[s]))
            else:
                data = encode_batch(chunk, compression=lay.codec)
            ESTIMATOR.observe(topic, lay.codec, len(data), int(sizes[:k].sum()))
            out.append(bytearray(data))
            pend.window = max(8, 2 * k)
            s += k
        if s:
            pend.records = recs[s:]
            pend.timestamps = [ts[s:]] if s < n else []
            pend.base_sizes = [base[s:]] if s < n else []
        else:
            pend.timestamps, pend.base_sizes = [ts], [base]
        return out
