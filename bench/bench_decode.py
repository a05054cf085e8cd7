#!/usr/bin/env python3
"""Decode throughput per codec and batch size: kafkafs against aiokafka's C decoder (and
kafka-python for reference).

    python bench/bench_decode.py [--records 100000] [--rounds 5] [--codecs none,lz4]
                                 [--batch-bytes 16384,1048576] [--profile]

The records are bench_codec.py's (small keys, 100-200 byte JSON-like values that compress
2-3x, no headers, timestamps 1 ms apart). For each codec and each batch size they are cut
into batches of about that many bytes of encoded records (16 KiB: a producer's default
``batch.size``; 1 MiB: about ``message.max.bytes``), encoded ONCE with kafkafs's encoder
(Kafka's default compression levels) and concatenated like a segment. Every decoder then
reads the same bytes:

* kafkafs ``record_tuples``: ``iter_batches`` + ``RecordBatch.record_tuples()`` (the C
  decoder of ``kafkafs.record.fast``), unpacking ``(offset, timestamp, key, value,
  headers)`` of each record;
* kafkafs ``records``: the same through ``RecordBatch.records()`` (Record named tuples),
  reading the five fields by attribute;
* aiokafka: ``aiokafka.record._crecords.MemoryRecords`` (its Cython extension: C
  ``DefaultRecordBatch``/``DefaultRecord``) + iteration, reading the five attributes;
* kafka-python: ``kafka.record.MemoryRecords`` + iteration, the same attributes.

No CRC checks (none of them checks CRCs while iterating). Times are CPU time
(``time.process_time``), best of ``--rounds`` interleaved runs, garbage collector off while
timing. MB/s counts the bytes of the batches as stored (compressed size for a codec), so
compressed figures are lower for the same record rate. Each line gives the kafkafs/aiokafka
ratio and the target: >= 0.5x uncompressed, >= 0.8x compressed (compressed batches spend
much of their time in the decompressor, which both sides call).

``--profile`` adds, below each line where a kafkafs path misses its target, where the time
goes (see :func:`profile`): framing, decompression, the C record decoder, Record objects,
the consumer loop, for kafkafs and aiokafka.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import aiokafka
import kafka
from aiokafka import codec as aio_codec
from aiokafka.record import _crecords
from aiokafka.record._crecords import MemoryRecords as AIOMemoryRecords
from bench_codec import human, make_records
from kafka.record.memory_records import MemoryRecords as KPMemoryRecords

from kafkafs.record import compression as codecs
from kafkafs.record import fast as _fast
from kafkafs.record.batch import encode_batch, encode_record_body, iter_batches

CODECS = {"none": codecs.NONE, "gzip": codecs.GZIP, "snappy": codecs.SNAPPY,
          "lz4": codecs.LZ4, "zstd": codecs.ZSTD}
TARGET_NONE = 0.5
TARGET_COMPRESSED = 0.8
AIO_DECOMPRESS = {codecs.GZIP: aio_codec.gzip_decode, codecs.SNAPPY: aio_codec.snappy_decode,
                  codecs.LZ4: aio_codec.lz4_decode, codecs.ZSTD: aio_codec.zstd_decode}


# -- the data -----------------------------------------------------------------------------------

def cut(records: list[tuple], batch_bytes: int) -> list[list[tuple]]:
    """Consecutive groups of records whose encoded size reaches ``batch_bytes`` (the last
    one may be smaller)."""
    out, cur, size = [], [], 0
    for i, r in enumerate(records):
        cur.append(r)
        size += len(encode_record_body(len(cur) - 1, r[0] - cur[0][0], r[1], r[2], r[3]))
        if size >= batch_bytes or i == len(records) - 1:
            out.append(cur)
            cur, size = [], 0
    return out


def segment(records, batch_bytes: int, codec: int) -> tuple[bytes, int]:
    """The records as one segment's bytes (batches at consecutive offsets) and the number of
    batches."""
    parts, base = [], 0
    groups = cut(records, batch_bytes)
    for group in groups:
        parts.append(encode_batch(group, base_offset=base, compression=codec))
        base += len(group)
    return b"".join(parts), len(groups)


# -- the decoders (same consumer loop shape for all) -------------------------------------------

def kafkafs_tuples(buf) -> int:
    n = 0
    for batch in iter_batches(buf):
        for _offset, _ts, _key, _value, _headers in batch.record_tuples():
            n += 1
    return n


def kafkafs_records(buf) -> int:
    n = 0
    for batch in iter_batches(buf):
        for r in batch.records():
            _fields = (r.offset, r.timestamp, r.key, r.value, r.headers)
            n += 1
    return n


def _memory_records(cls, buf) -> int:
    records = cls(buf)
    n = 0
    while (batch := records.next_batch()) is not None:
        for r in batch:
            _fields = (r.offset, r.timestamp, r.key, r.value, r.headers)
            n += 1
    return n


def aiokafka_c(buf) -> int:
    return _memory_records(AIOMemoryRecords, buf)


def kafka_python(buf) -> int:
    return _memory_records(KPMemoryRecords, buf)


DECODERS = [("kafkafs record_tuples", kafkafs_tuples), ("kafkafs records", kafkafs_records),
            ("aiokafka", aiokafka_c), ("kafka-python", kafka_python)]


# -- timing -------------------------------------------------------------------------------------

def cpu_time(f, *args) -> float:
    gc.collect()
    gc.disable()
    try:
        t0 = time.process_time()
        f(*args)
        return time.process_time() - t0
    finally:
        gc.enable()


def best_times(funcs, args, rounds: int) -> list[float]:
    best = [float("inf")] * len(funcs)
    for _ in range(rounds):
        for i, f in enumerate(funcs):
            best[i] = min(best[i], cpu_time(f, *args))
    return best


def line(label: str, n: int, nbytes: int, times: list[float], target: float) -> str:
    """``label: kafkafs R rec/s M MB/s | ... | kafkafs/aiokafka X (target >= T) ok``."""
    names = [name for name, _f in DECODERS]
    parts = [f"{name} {human(n / t, 2)} rec/s {nbytes / t / 1e6:.0f} MB/s"
             for name, t in zip(names, times, strict=True)]
    aio = times[2]
    verdict = []
    for name, t in (("record_tuples", times[0]), ("records", times[1])):
        r = aio / t
        verdict.append(f"{name} {r:.2f}x {'ok' if r >= target else 'BELOW'}")
    return (f"{label}: " + " | ".join(parts)
            + f" || kafkafs/aiokafka: {', '.join(verdict)} (target >= {target}x)")


# -- where the time goes ------------------------------------------------------------------------

def _stage_framing(buf):
    for _batch in iter_batches(buf):
        pass


def _stage_payload(buf):
    for batch in iter_batches(buf):
        batch.payload()


def _stage_tuples(buf):
    for batch in iter_batches(buf):
        batch.record_tuples()


def _stage_records(buf):
    for batch in iter_batches(buf):
        batch.records()


def _aio_stage_framing(buf):
    records = AIOMemoryRecords(buf)
    while records.next_batch() is not None:
        pass


def _aio_stage_records(buf):
    records = AIOMemoryRecords(buf)
    while (batch := records.next_batch()) is not None:
        list(batch)


def profile(buf: bytes, codec: int, rounds: int) -> str:
    """Where the time goes: the decode pipeline timed with one more step each time (same
    bytes, same style), the difference between two stages being that step's cost:
    framing (``iter_batches``), decompression (``payload()``), the C record decoder
    (``record_tuples()``), Record objects (``records()``), the consumer loop. For aiokafka:
    framing (``next_batch``), decompression + record objects (``list(batch)``), the loop;
    and both decompressors timed alone on the same compressed payloads."""
    stages = [_stage_framing, _stage_payload, _stage_tuples, _stage_records, kafkafs_tuples,
              kafkafs_records, _aio_stage_framing, _aio_stage_records, aiokafka_c]
    (t_frame, t_payload, t_tuples, t_records, t_full_t, t_full_r, a_frame, a_records,
     a_full) = best_times(stages, (buf,), rounds)
    alone = ""
    if codec != codecs.NONE:
        raw = [bytes(b.buffer[61:]) for b in iter_batches(buf)]
        ours_f, theirs_f = codecs.decompress, AIO_DECOMPRESS[codec]

        def our_decompress():
            for p in raw:
                ours_f(codec, p)

        def aio_decompress():
            for p in raw:
                theirs_f(p)

        t_ours, t_theirs = best_times([our_decompress, aio_decompress], (), rounds)
        alone = (f"\n    decompressors alone: kafkafs {1000 * t_ours:.1f} ms, aiokafka "
                 f"{1000 * t_theirs:.1f} ms")

    def ms(x, whole):
        return f"{1000 * x:.1f} ms ({100 * x / whole:.0f}%)"

    return (f"    kafkafs records {1000 * t_full_r:.1f} ms = framing {ms(t_frame, t_full_r)} + "
            f"decompress {ms(t_payload - t_frame, t_full_r)} + C decode "
            f"{ms(t_tuples - t_payload, t_full_r)} + Record objects "
            f"{ms(t_records - t_tuples, t_full_r)} + loop {ms(t_full_r - t_records, t_full_r)}"
            f"\n    kafkafs record_tuples {1000 * t_full_t:.1f} ms (loop over tuples "
            f"{ms(t_full_t - t_tuples, t_full_t)})"
            f"\n    aiokafka {1000 * a_full:.1f} ms = framing {ms(a_frame, a_full)} + "
            f"decompress and records {ms(a_records - a_frame, a_full)} + loop "
            f"{ms(a_full - a_records, a_full)}" + alone)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=100_000, help="records per run (100000)")
    p.add_argument("--batch-bytes", default="16384,1048576",
                   help="comma-separated batch sizes in bytes of encoded records")
    p.add_argument("--rounds", type=int, default=5, help="runs per figure, best kept (5)")
    p.add_argument("--codecs", default="none,gzip,snappy,lz4,zstd")
    p.add_argument("--profile", action="store_true",
                   help="split the time of lines below target (decompress / decode / rest)")
    args = p.parse_args(argv)

    assert _crecords.DefaultRecordBatch.__module__.startswith("aiokafka.record._crecords")
    records = make_records(args.records)
    print(f"# Python {platform.python_version()} on {platform.machine()}; {args.records} "
          f"records, values 100-200 B, keys 8 B, no headers; best of {args.rounds}, CPU time; "
          f"kafkafs record codec = {'C speedups' if _fast.HAVE_C else 'pure Python'}; "
          f"aiokafka {aiokafka.__version__} (C extension), kafka-python {kafka.__version__}; "
          f"MB/s of stored batch bytes")
    for name in args.codecs.split(","):
        codec = CODECS[name]
        target = TARGET_NONE if codec == codecs.NONE else TARGET_COMPRESSED
        for batch_bytes in (int(x) for x in args.batch_bytes.split(",")):
            buf, nbatches = segment(records, batch_bytes, codec)
            counts = {f(buf) for _n, f in DECODERS}
            assert counts == {args.records}, counts
            times = best_times([f for _n, f in DECODERS], (buf,), args.rounds)
            size = f"{batch_bytes // 1024} KiB" if batch_bytes < 1 << 20 else \
                f"{batch_bytes / (1 << 20):g} MiB"
            label = f"decode {name:6s} {size:>7s} batches ({nbatches}, {len(buf) / 1e6:.1f} MB)"
            print(line(label, args.records, len(buf), times, target), flush=True)
            if args.profile and times[2] / max(times[0], times[1]) < target:
                print(profile(buf, codec, args.rounds), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
