"""Benchmark of kafkafs.record.fast: the C extension against its pure-Python twins.

200k records with values of 100-200 random bytes (keys null, no headers: what the FUSE
append file writes), cut into batch payloads of about 1 MiB (Kafka's message.max.bytes).
For each function prints MB/s and records/s of both implementations and their ratio.
MB/s counts the payload bytes read (values, render_values, rendered_size, decode) or the
record bytes written (encode, encode_lines). ``render_file_values`` (kafkafs.record.plain,
built with ISA-L) reads the batches from a file in 1 MiB windows, checks their CRC-32C and
renders them in one native pass; its "python" column is the twin that does the same with
``os.pread``, the crc32c package and ``render_values`` (the C one when built): the
``messages`` view's general path.

    python bench/bench_speedups.py [--records N] [--repeat R] [--batch-bytes B]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kafkafs.daemon import malloc
from kafkafs.record import fast, plain
from kafkafs.record.batch import encode_batch


def make_batches(n_records: int, batch_bytes: int, seed: int = 1):
    """Lists of lines, each list a batch of about ``batch_bytes`` bytes of values."""
    rng = random.Random(seed)
    blob = rng.randbytes(1 << 20)
    batches, cur, size = [], [], 0
    for _ in range(n_records):
        n = rng.randint(100, 200)
        start = rng.randrange(0, len(blob) - n)
        cur.append(blob[start:start + n])
        size += n
        if size >= batch_bytes:
            batches.append(cur)
            cur, size = [], 0
    if cur:
        batches.append(cur)
    return batches


def file_renderer(record_batches):
    """A run over a segment file of the batches in windows of at least 1 MiB, as the
    messages view reads them; ``impl`` C takes the native render_file_values, PYTHON its
    twin."""
    import tempfile
    f = tempfile.TemporaryFile()
    for b in record_batches:
        f.write(encode_batch(b))
    f.flush()
    fd, size = f.fileno(), f.tell()

    def run(impl):
        fn = plain._c_render_file_values if impl is fast.C else plain._py_render_file_values
        pos = 0
        while pos < size:
            batch_size = int.from_bytes(os.pread(fd, 12, pos)[8:12], "big") + 12
            _data, pos, _stopped = fn(fd, pos, max(1 << 20, batch_size), 1 << 62)
    run.file = f  # keep it open
    return run


def best_of(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--batch-bytes", type=int, default=1 << 20)
    args = ap.parse_args(argv)

    malloc.tune()  # as the daemon does: 1 MiB buffers reuse heap pages, no fresh mmaps
    if fast.C is None:
        print("the C extension is not built (pip install -e . or "
              "python setup.py build_ext --inplace): nothing to compare")
        return 1
    ts = 1_700_000_000_000
    line_batches = make_batches(args.records, args.batch_bytes)
    payloads = [(fast.C.encode_lines(lines, ts), len(lines)) for lines in line_batches]
    record_batches = [[(ts + (i % 7), None, line, ()) for i, line in enumerate(lines)]
                      for lines in line_batches]
    n_records = sum(n for _p, n in payloads)
    payload_bytes = sum(len(p) for p, _n in payloads)
    value_bytes = sum(len(line) for lines in line_batches for line in lines)
    encoded_bytes = sum(len(fast.C.encode(b, ts)) for b in record_batches)

    def reader(name):
        def run(impl):
            fn = getattr(impl, name)
            if name == "decode":
                for p, n in payloads:
                    fn(p, n, 0, ts, None)
            else:
                for p, n in payloads:
                    fn(p, n)
        return run

    def run_encode(impl):
        for b in record_batches:
            impl.encode(b, ts)

    def run_encode_lines(impl):
        for lines in line_batches:
            impl.encode_lines(lines, ts)

    cases = [(name, reader(name), payload_bytes)
             for name in ("values", "render_values", "rendered_size", "decode")]
    cases += [("encode", run_encode, encoded_bytes),
              ("encode_lines", run_encode_lines, encoded_bytes)]
    if plain.NATIVE:
        cases.append(("render_file", file_renderer(record_batches), encoded_bytes))

    print(f"{n_records} records, values {value_bytes / n_records:.0f} bytes on average, "
          f"{len(payloads)} payloads of ~{payload_bytes / len(payloads) / 1e6:.2f} MB "
          f"({payload_bytes / 1e6:.1f} MB in all); best of {args.repeat}")
    for name, run, nbytes in cases:
        run(fast.C)  # warm up
        t_c = best_of(lambda run=run: run(fast.C), args.repeat)
        t_py = best_of(lambda run=run: run(fast.PYTHON), max(1, min(args.repeat, 3)))
        print(f"{name:14s} C {nbytes / t_c / 1e6:8.1f} MB/s {n_records / t_c / 1e6:6.2f} M rec/s"
              f" | python {nbytes / t_py / 1e6:7.1f} MB/s {n_records / t_py / 1e6:5.2f} M rec/s"
              f" | C/python {t_py / t_c:5.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
