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
  :class:`kafkafs.record.producer_batch.BatchSizer` follows), encoded column-wise and
  compressed with the topic's codec (or the producer's ``compression.type`` when the topic
  keeps the producer's) by :mod:`kafkafs.spark.records`. A batch not yet full waits for
  the partition's next rows (in a later Arrow batch), as a producer's batch waits for more
  records; :meth:`TaskEncoder.finish` closes them at the end of the task.
* **Timestamps**: the ``timestamp`` column (Spark timestamp, or a double of seconds) in ms,
  truncated as ``KafkaWriteTask`` truncates micros; null means the time of sending;
  negative ones are refused (``ProducerRecord``); under ``LogAppendTime`` every record gets
  the time of writing.

No Python object is made per record (but for the headers of rows that have some).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..log.names import validate_topic
from ..record import compression as codecs
from ..record.producer_batch import ESTIMATOR, batch_limits
from .records import (
    constant_column,
    cut_batch,
    cut_uniform,
    encode_columns,
    frame_batches,
    varint_sizes,
)

_M = np.uint32(0x5BD1E995)
_SEED = np.uint32(0x9747B28C)


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


def _header_tails(arr) -> list[bytes]:
    """The headers part of each row's record: the header count varint, then the headers
    (:func:`kafkafs.record.fast.encode_headers`). Raises ValueError for a null header key
    (``RecordHeader``)."""
    from ..record.fast import encode_headers
    from ..record.varint import encode_varint

    out = []
    for hs in arr.to_pylist():
        if not hs:
            out.append(b"\x00")
            continue
        pairs = [(h["key"], h["value"]) for h in hs]
        if any(k is None for k, _v in pairs):
            raise ValueError("Null header keys are not permitted")
        n, body = encode_headers(pairs)
        out.append(encode_varint(n) + body)
    return out


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


def _uniform_suffix(ts: np.ndarray) -> int:
    """The first row from which every later timestamp lies within 63 ms of each other (the
    timestamp deltas of a batch starting there take one byte)."""
    hi = np.maximum.accumulate(ts[::-1])[::-1]
    lo = np.minimum.accumulate(ts[::-1])[::-1]
    wide = np.flatnonzero(hi - lo >= 64)
    return int(wide[-1]) + 1 if wide.size else 0


class _Pending:
    """Rows of one topic-partition not yet in a closed batch, as pieces (Arrow slices and
    numpy arrays) of the Arrow batches they came in."""

    __slots__ = ("pieces", "window")

    def __init__(self):
        self.pieces: list[tuple] = []
        self.window = 64

    def columns(self) -> tuple:
        """``(keys, values, tails, key_lengths, value_lengths, tail_lengths, timestamps,
        base_sizes)`` of every pending row."""
        import pyarrow as pa

        if len(self.pieces) == 1:
            return self.pieces[0]
        cols = list(zip(*self.pieces))
        return (pa.concat_arrays(cols[0]), pa.concat_arrays(cols[1]), pa.concat_arrays(cols[2]),
                *(np.concatenate(c) for c in cols[3:]))


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
            key_arr, key_data = pa.nulls(n, pa.large_binary()), np.zeros(0, dtype=np.uint8)
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
        tails = None
        if "headers" in col and col["headers"].null_count < n:
            tails = _header_tails(col["headers"])
        # partition of every row, then the rows of each topic-partition in order
        part = np.empty(n, dtype=np.int64)
        for t, lay in enumerate(layouts):
            rows = np.flatnonzero(tidx == t) if len(layouts) > 1 else np.arange(n)
            part[rows] = self._partitions(lay, rows, explicit, key_data, key_starts,
                                          key_lengths, val_lengths)
            if lay.log_append_time:
                ts[rows] = now
        width = max(lay.partitions for lay in layouts) + 1
        group = tidx * width + part
        order = np.argsort(group, kind="stable")
        sorted_group = group[order]
        bounds = np.flatnonzero(np.diff(sorted_group)) + 1
        starts = np.concatenate(([0], bounds)).tolist()
        ends = np.concatenate((bounds, [n])).tolist()
        take = pa.array(order)
        keys = key_arr.take(take).cast(pa.large_binary())
        values = val_arr.take(take).cast(pa.large_binary())
        if tails is None:
            tail_col = constant_column(n, b"\x00")
            tail_lengths = np.ones(n, dtype=np.int64)
        else:
            tail_col = pa.array([tails[i] for i in order.tolist()], pa.large_binary())
            tail_lengths = np.array([len(t) for t in tails], dtype=np.int64)[order]
        klen, vlen = key_lengths[order], val_lengths[order]
        ts_sorted = ts[order]
        base = 1 + varint_sizes(klen) + np.maximum(klen, 0) + varint_sizes(vlen) \
            + np.maximum(vlen, 0) + tail_lengths
        for s, e in zip(starts, ends):
            g = int(sorted_group[s])
            topic, p = topics[g // width], g % width
            pend = self._pending.get((topic, p))
            if pend is None:
                pend = self._pending[(topic, p)] = _Pending()
            pend.pieces.append((keys.slice(s, e - s), values.slice(s, e - s),
                                tail_col.slice(s, e - s), klen[s:e], vlen[s:e],
                                tail_lengths[s:e], ts_sorted[s:e], base[s:e]))
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
        """Cut and encode the closed batches of ``pend`` (all of them when ``final``); the
        rows of a batch still open stay pending. Uncompressed batches are encoded together;
        compressed ones one by one, as the producer's compression ratio estimate (which
        decides the next cut) moves after each."""
        if not pend.pieces:
            return []
        lay = self.layout(topic)
        cols = pend.columns()
        keys, values, tails, klen, vlen, tlen, ts, base = cols
        n = len(ts)
        out: list[bytearray] = []
        budget0 = batch_limits(lay.batch_size, topic, lay.codec)[0]
        if not lay.codec:  # where the rows left lie within 63 ms, cut_uniform cuts the rest
            uniform_from = _uniform_suffix(ts)
        bounds, s = [0], 0
        while s < n:
            if not lay.codec and s >= uniform_from:
                rest = cut_uniform(base[s:], budget0, final)
                if rest is not None:
                    bounds += [s + e for e in rest[1:]]
                    s = bounds[-1]
                    break
            budget, ratio = batch_limits(lay.batch_size, topic, lay.codec)
            k, full, sizes = cut_batch(ts[s:], base[s:], budget, ratio, pend.window)
            if not full and not final:
                break
            pend.window = max(8, 2 * k)
            if lay.codec:
                one = np.array([0, k])
                buf, offs = encode_columns(keys.slice(s), values.slice(s), tails.slice(s),
                                           klen[s:], vlen[s:], tlen[s:], ts[s:], one)
                batch = frame_batches(buf, offs, ts[s:], one, lay.codec, lay.log_append_time)
                ESTIMATOR.observe(topic, lay.codec, len(batch[0]), int(sizes[:k].sum()))
                out.extend(batch)
            s += k
            bounds.append(s)
        if not lay.codec and s:
            cut = np.array(bounds, dtype=np.int64)
            buf, offs = encode_columns(keys, values, tails, klen, vlen, tlen, ts, cut)
            out = frame_batches(buf, offs, ts, cut, lay.codec, lay.log_append_time)
        if s >= n:
            pend.pieces = []
        elif s:
            pend.pieces = [(keys.slice(s), values.slice(s), tails.slice(s), klen[s:], vlen[s:],
                            tlen[s:], ts[s:], base[s:])]
        else:
            pend.pieces = [cols]
        return out
