#!/usr/bin/env python3
"""RecordBatch v2 encode/decode throughput: kafkafs against kafka-python and aiokafka.

    python bench/bench_codec.py [--records N] [--batch 500] [--rounds 5] [--codecs none,lz4]

Every implementation works on the same records (small keys, 100-200 byte JSON-like values
that compress about 2-3x, no headers; timestamps 1 ms apart) cut into batches of
``--batch`` records, and prints records/s with the ratio of kafkafs to each other library
measured in the same run:

    decode none: kafkafs 1.1M rec/s | kafka-python 230k (4.7x) | aiokafka 670k (1.6x)

* encode: records (Python tuples) -> batch bytes. kafkafs: ``encode_batch(list)``;
  kafka-python / aiokafka: ``DefaultRecordBatchBuilder`` + ``append`` per record + ``build``
  (their only API for it).
* decode: the concatenated batches (written by kafkafs, the same bytes for everyone) ->
  record objects. kafkafs: ``iter_batches`` + ``RecordBatch.records()``; the others:
  ``MemoryRecords.next_batch()`` + iteration. The same consumer loop then reads offset,
  timestamp, key, value and headers of every record for every implementation, so each one
  materialises all five. No CRC checks anywhere (none of the three checks CRCs while
  iterating).
* values (codec none only): what the ``messages`` view does: kafkafs ``batch_values``
  against the others' full decode reading ``.value`` (they have no cheaper way).

Times are CPU time of this process (``time.process_time``, so other load on the machine
disturbs less), best of ``--rounds`` (``--compressed-rounds`` for codecs), rounds
interleaved between the libraries, garbage collector off while timing (as ``timeit``).
aiokafka is its C extension (``aiokafka.record._crecords``) when importable.
For compressed codecs the libraries use different compression levels and bindings, so
encode there compares the compressors as much as the codecs.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kafka.record.default_records import DefaultRecordBatchBuilder as KPBuilder
from kafka.record.memory_records import MemoryRecords as KPMemoryRecords

from kafkafs.record import compression as codecs
from kafkafs.record import fast as _fast
from kafkafs.record.batch import batch_values, encode_batch, iter_batches

try:
    from aiokafka.record._crecords import DefaultRecordBatchBuilder as AIOBuilder
    from aiokafka.record._crecords import MemoryRecords as AIOMemoryRecords
    AIO_NAME = "aiokafka"
except ImportError:  # no C extension in this install: the pure-Python classes
    from aiokafka.record.default_records import (
        _DefaultRecordBatchBuilderPy as AIOBuilder,
    )
    from aiokafka.record.memory_records import _MemoryRecordsPy as AIOMemoryRecords
    AIO_NAME = "aiokafka-py"

CODECS = {"none": codecs.NONE, "gzip": codecs.GZIP, "snappy": codecs.SNAPPY,
          "lz4": codecs.LZ4, "zstd": codecs.ZSTD}
WORDS = [b"alpha", b"bravo", b"charlie", b"delta", b"echo", b"foxtrot", b"golf", b"hotel",
         b"india", b"juliet", b"kilo", b"lima", b"mike", b"november", b"oscar", b"papa"]


def make_records(n: int, seed: int = 1) -> list[tuple]:
    """``n`` records ``(timestamp_ms, key, value, headers)``: keys of 6-8 bytes, values of
    100-200 bytes of JSON-like text (compressible), no headers."""
    rnd = random.Random(seed)
    base = 1_700_000_000_000
    out = []
    for i in range(n):
        size = rnd.randint(100, 200)
        words = b" ".join(rnd.choice(WORDS) for _ in range(30))
        value = (b'{"id":%d,"user":"u%05d","msg":"%s' % (i, rnd.randrange(100000), words))
        value = value[: size - 2] + b'"}'
        value += b" " * (size - len(value))
        # headers as a list: aiokafka's C builder accepts nothing else
        out.append((base + i, b"key-%04d" % rnd.randrange(10000), value, []))
    return out


# -- the three implementations ---------------------------------------------------------------

def encode_ours(batches, codec):
    return [encode_batch(b, compression=codec) for b in batches]


def _encode_builder(builder_cls, batches, codec):
    out = []
    for recs in batches:
        builder = builder_cls(2, codec, 0, -1, -1, -1, 1 << 30)
        append = builder.append
        for i, (ts, key, value, headers) in enumerate(recs):
            append(i, ts, key, value, headers)
        out.append(builder.build())
    return out


def encode_kafka_python(batches, codec):
    return _encode_builder(KPBuilder, batches, codec)


def encode_aiokafka(batches, codec):
    return _encode_builder(AIOBuilder, batches, codec)


def _consume(records) -> int:
    """The consumer loop shared by every decoder: read the five fields of each record."""
    n = 0
    for r in records:
        _fields = (r.offset, r.timestamp, r.key, r.value, r.headers)
        n += 1
    return n


def decode_ours(buf) -> int:
    n = 0
    for batch in iter_batches(buf):
        n += _consume(batch.records())
    return n


def _decode_memory_records(mr_cls, buf) -> int:
    records = mr_cls(buf)
    n = 0
    while True:
        batch = records.next_batch()
        if batch is None:
            return n
        n += _consume(batch)


def decode_kafka_python(buf) -> int:
    return _decode_memory_records(KPMemoryRecords, buf)


def decode_aiokafka(buf) -> int:
    return _decode_memory_records(AIOMemoryRecords, buf)


def values_ours(buf) -> int:
    n = 0
    for batch in iter_batches(buf):
        for _v in batch_values(batch):
            n += 1
    return n


def _values_memory_records(mr_cls, buf) -> int:
    records = mr_cls(buf)
    n = 0
    while True:
        batch = records.next_batch()
        if batch is None:
            return n
        for r in batch:
            _value = r.value
            n += 1


def values_kafka_python(buf) -> int:
    return _values_memory_records(KPMemoryRecords, buf)


def values_aiokafka(buf) -> int:
    return _values_memory_records(AIOMemoryRecords, buf)


# -- timing and output -----------------------------------------------------------------------

def best_rates(funcs, arg, n_records: int, rounds: int) -> list[float]:
    """Records/s of each function on ``arg``: best CPU time of ``rounds`` interleaved runs."""
    best = [float("inf")] * len(funcs)
    for _ in range(rounds):
        for i, f in enumerate(funcs):
            gc.collect()
            gc.disable()
            try:
                t0 = time.process_time()
                f(*arg)
                elapsed = time.process_time() - t0
            finally:
                gc.enable()
            best[i] = min(best[i], elapsed)
    return [n_records / t if t > 0 else float("inf") for t in best]


def human(rate: float, digits: int = 1) -> str:
    """812k, 1.9M: records/s the way the issue writes them (``digits`` after the point of
    millions)."""
    if rate >= 1e6:
        return f"{rate / 1e6:.{digits}f}M"
    if rate >= 1e3:
        return f"{rate / 1e3:.0f}k"
    return f"{rate:.0f}"


def ratio(a: float, b: float) -> str:
    r = a / b
    return f"{r:.2f}x" if r < 1 else f"{r:.1f}x"


def line(label: str, rates: list[float]) -> str:
    """``label: kafkafs R | kafka-python R (ratio) | aiokafka R (ratio)``; a ratio is
    kafkafs's rate over that library's (above 1: kafkafs is faster)."""
    ours, kp, aio = rates
    return (f"{label}: kafkafs {human(ours)} rec/s | kafka-python {human(kp)} "
            f"({ratio(ours, kp)}) | {AIO_NAME} {human(aio)} ({ratio(ours, aio)})")


def check_same(buf: bytes, n: int, records: list[tuple]) -> None:
    """Every decoder sees all records; ours gives back the input (outside the timing)."""
    assert decode_ours(buf) == decode_kafka_python(buf) == decode_aiokafka(buf) == n
    got = [(r.timestamp, r.key, r.value, r.headers)
           for batch in iter_batches(buf) for r in batch.records()]
    assert got == [(t, k, v, tuple(h)) for t, k, v, h in records]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=200_000, help="records per run (200000)")
    p.add_argument("--batch", type=int, default=500, help="records per batch (500)")
    p.add_argument("--rounds", type=int, default=5, help="runs per figure, best kept (5)")
    p.add_argument("--codecs", default="none,gzip,snappy,lz4,zstd",
                   help="comma-separated codecs (none,gzip,snappy,lz4,zstd)")
    p.add_argument("--compressed-records", type=int, default=None,
                   help="records for compressed codecs (default: same as --records)")
    p.add_argument("--compressed-rounds", type=int, default=3,
                   help="runs per figure for compressed codecs (3)")
    args = p.parse_args(argv)

    records = make_records(args.records)
    print(f"# Python {platform.python_version()} on {platform.machine()}; "
          f"{args.records} records, {args.batch} per batch, values 100-200 B, keys 8 B; "
          f"best of {args.rounds} ({args.compressed_rounds} compressed), CPU time; {AIO_NAME} = "
          f"{'C extension' if AIO_NAME == 'aiokafka' else 'pure Python'}; kafkafs record "
          f"codec = {'C speedups' if _fast.HAVE_C else 'pure Python (KAFKAFS_NO_SPEEDUPS)'}")
    for name in args.codecs.split(","):
        codec = CODECS[name]
        n, rounds = args.records, args.rounds
        if codec != codecs.NONE:
            rounds = args.compressed_rounds
            if args.compressed_records:
                n = min(n, args.compressed_records)
        recs = records[:n]
        batches = [recs[i:i + args.batch] for i in range(0, n, args.batch)]
        buf = b"".join(encode_ours(batches, codec))
        check_same(buf, n, recs)
        rates = best_rates([encode_ours, encode_kafka_python, encode_aiokafka],
                           (batches, codec), n, rounds)
        print(line(f"encode {name}", rates), flush=True)
        rates = best_rates([decode_ours, decode_kafka_python, decode_aiokafka],
                           (buf,), n, rounds)
        print(line(f"decode {name}", rates), flush=True)
        if codec == codecs.NONE:
            rates = best_rates([values_ours, values_kafka_python, values_aiokafka],
                               (buf,), n, args.rounds)
            print(line(f"values {name} (messages view)", rates), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
