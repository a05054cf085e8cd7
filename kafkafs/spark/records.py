"""Kafka v2 records and batches from Arrow columns, without a Python object per record.

The record layer (:mod:`kafkafs.record.batch`) encodes records one by one from tuples; a
Spark task hands over columns of 10,000 rows. Here the same bytes are built column-wise:

* :func:`cut_batch` finds where a producer closes a batch (``MemoryRecordsBuilder.hasRoomFor``,
  the rule of :class:`kafkafs.record.producer_batch.BatchSizer`) from the records' sizes;
* :func:`encode_columns` lays out ``DefaultRecord`` for every row at once -- the varints
  (length, timestamp delta, offset delta, key and value lengths) written with numpy into
  a prefix and a middle column, then Arrow joins prefix, key, middle, value and headers
  row by row into one buffer, records back to back;
* :func:`frame_batches` puts the record layer's batch header (``finish_batch``: attributes,
  CRC-32C, compression) in front of each batch's slice of that buffer.

The bytes equal :func:`kafkafs.record.batch.encode_batch`'s for the same records (tested).
"""

from __future__ import annotations

import numpy as np

from ..record.batch import CREATE_TIME, LOG_APPEND_TIME, finish_batch

# a zigzag value below 2^(7k) takes k bytes; a value v >= 0 is zigzagged to 2v
_VARINT_LIMITS = np.array([1 << (7 * k) for k in range(1, 10)], dtype=np.uint64)
_HALF_LIMITS = np.array([1 << (7 * k - 1) for k in range(1, 10)], dtype=np.int64)


def zigzag(values: np.ndarray) -> np.ndarray:
    """ZigZag encoding of int64 values, as uint64."""
    v = values.astype(np.int64, copy=False)
    return ((v << 1) ^ (v >> 63)).view(np.uint64)


def varint_sizes(values: np.ndarray) -> np.ndarray:
    """Bytes of each value of an int64 array as a zigzag varint (``ByteUtils.sizeOfVarlong``)."""
    return 1 + np.searchsorted(_VARINT_LIMITS, zigzag(values), side="right").astype(np.int64)


def _sizes_of_nonnegative(values: np.ndarray) -> np.ndarray:
    return 1 + np.searchsorted(_HALF_LIMITS, values, side="right").astype(np.int64)


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
        sizes = body + _sizes_of_nonnegative(body)
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


def cut_uniform(base_sizes: np.ndarray, budget: int, final: bool) -> list[int] | None:
    """:func:`cut_batch` for every batch of a run of uncompressed records at once, when all
    their timestamp deltas take one byte (the run's timestamps lie within 63 ms): a record's
    size then depends only on whether it is among the first 64 of its batch (a one-byte
    offset delta) or not (two bytes, up to 8192 records), so two prefix sums tell where
    each batch ends. Returns the cut points ``[0, e1, e2, ...]`` of the batches that are
    full (all of them when ``final``), or None for a batch of 8192 records or more (the
    caller cuts one by one)."""
    n = len(base_sizes)
    body = base_sizes + 2  # the one-byte timestamp and offset deltas
    short = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(body + _sizes_of_nonnegative(body), out=short[1:])
    body += 1  # a two-byte offset delta
    long_ = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(body + _sizes_of_nonnegative(body), out=long_[1:])
    bounds, s = [0], 0
    while s < n:
        lim = min(s + 64, n)
        first = int(short[lim] - short[s])
        if first > budget or lim == n:
            e = int(np.searchsorted(short, short[s] + budget, side="right")) - 1
        else:
            e = int(np.searchsorted(long_, long_[lim] + budget - first, side="right")) - 1
        e = max(e, s + 1)
        if e - s >= 8192:
            return None
        if e >= n and not final:
            break  # every record left fits: the batch may take more
        s = min(e, n)
        bounds.append(s)
    return bounds


def _put_varints(out: np.ndarray, at: np.ndarray, z: np.ndarray, sizes: np.ndarray) -> None:
    """Write the varint of each zigzag value ``z[i]`` (``sizes[i]`` bytes) at ``out[at[i]]``."""
    rows = np.arange(len(z))
    for i in range(int(sizes.max()) if len(sizes) else 0):
        if i:
            rows = rows[sizes[rows] > i]
        byte = ((z[rows] >> np.uint64(7 * i)) & np.uint64(0x7F)).astype(np.uint8)
        byte[sizes[rows] > i + 1] |= 0x80
        out[at[rows] + i] = byte


def _binary_column(offsets: np.ndarray, data: np.ndarray):
    import pyarrow as pa

    n = len(offsets) - 1
    return pa.Array.from_buffers(pa.large_binary(), n,
                                 [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def constant_column(n: int, value: bytes):
    """An Arrow ``large_binary`` column of ``n`` times ``value``."""
    offsets = np.arange(0, (n + 1) * len(value), len(value), dtype=np.int64)
    return _binary_column(offsets, np.frombuffer(value * n, dtype=np.uint8))


def encode_columns(keys, values, tails, key_lengths: np.ndarray, value_lengths: np.ndarray,
                   tail_lengths: np.ndarray, timestamps: np.ndarray, bounds: np.ndarray):
    """The records of rows ``[0, bounds[-1])``, cut into batches at ``bounds`` (``[0, e1,
    e2, ...]``), as ``DefaultRecord.writeTo`` writes them in their batches: offset delta
    = the row's place in its batch, timestamp delta = its timestamp less its batch's first.
    ``keys``/``values``: Arrow ``large_binary`` columns (nulls written as length -1);
    ``tails``: the headers part of each record (its count varint, then the headers) as a
    ``large_binary`` column; the ``*_lengths`` are int64 arrays (-1 for null).
    Returns ``(buffer, offsets)``: record ``i`` is ``buffer[offsets[i]:offsets[i + 1]]``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = int(bounds[-1])
    counts = np.diff(bounds)
    first = np.repeat(bounds[:-1], counts)
    offset_deltas = np.arange(n, dtype=np.int64) - first
    ts = timestamps[:n]
    ts_deltas = ts - ts[first]
    klen, vlen = key_lengths[:n], value_lengths[:n]
    s_ts, s_od = varint_sizes(ts_deltas), varint_sizes(offset_deltas)
    s_k, s_v = varint_sizes(klen), varint_sizes(vlen)
    body = 1 + s_ts + s_od + s_k + np.maximum(klen, 0) + s_v + np.maximum(vlen, 0) \
        + tail_lengths[:n]
    s_body = _sizes_of_nonnegative(body)
    prefix_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(s_body + 1 + s_ts + s_od + s_k, out=prefix_offsets[1:])
    prefix = np.zeros(int(prefix_offsets[-1]), dtype=np.uint8)
    at = prefix_offsets[:-1].copy()
    _put_varints(prefix, at, zigzag(body), s_body)
    at += s_body + 1  # the attributes byte stays 0
    _put_varints(prefix, at, zigzag(ts_deltas), s_ts)
    at += s_ts
    _put_varints(prefix, at, zigzag(offset_deltas), s_od)
    at += s_od
    _put_varints(prefix, at, zigzag(klen), s_k)
    middle_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(s_v, out=middle_offsets[1:])
    middle = np.zeros(int(middle_offsets[-1]), dtype=np.uint8)
    _put_varints(middle, middle_offsets[:-1], zigzag(vlen), s_v)
    joined = pc.binary_join_element_wise(
        _binary_column(prefix_offsets, prefix), keys.slice(0, n),
        _binary_column(middle_offsets, middle), values.slice(0, n), tails.slice(0, n),
        pa.scalar(b"", pa.large_binary()), null_handling="replace", null_replacement=b"")
    bufs = joined.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int64)[joined.offset:joined.offset + n + 1]
    return bufs[2], offsets


def frame_batches(buffer, offsets: np.ndarray, timestamps: np.ndarray, bounds: np.ndarray,
                  codec: int, log_append_time: bool) -> list[bytearray]:
    """The batches of records ``buffer``/``offsets`` (:func:`encode_columns`) cut at
    ``bounds``, each with its header (base offset 0, compressed with ``codec``) as the
    record layer frames them; under ``log_append_time`` the timestamps are the append time
    (``timestamps`` holds it for every row)."""
    view = memoryview(buffer)
    starts = bounds[:-1]
    maxima = np.maximum.reduceat(timestamps[:int(bounds[-1])], starts).tolist() \
        if len(starts) else []
    ts_type = LOG_APPEND_TIME if log_append_time else CREATE_TIME
    out = []
    for i, (s, e) in enumerate(zip(starts.tolist(), bounds[1:].tolist())):
        payload = view[int(offsets[s]):int(offsets[e])]
        out.append(bytearray(finish_batch(
            bytes(payload) if codec else payload, e - s, base_offset=0, compression=codec,
            timestamp_type=ts_type, last_offset_delta=e - s - 1,
            base_ts=int(timestamps[s]), max_ts=maxima[i])))
    return out
