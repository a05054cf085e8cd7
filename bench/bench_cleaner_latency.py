#!/usr/bin/env python3
"""Append latency through the mount while the daemon's cleaner runs a pass (issue 11: the
cleaner runs in worker threads and never stalls reads or appends).

    python bench/bench_cleaner_latency.py [--mb 192] [--keys 1000000] [--dir DIR]

Builds a compacted partition of ``--mb`` MB (bench_cleaner.py's data: 100-record batches,
64 MiB segments), mounts it with ``log.cleaner.backoff.ms=100`` so a pass starts at once,
and appends one keyed line per ``write`` (``-o parse.key=true``) to the same partition and
reads ``key/<k>`` of random keys, in a loop, until two seconds after the daemon logged the
pass. Prints p50 / p99 / max of the ``write`` and ``cat key/k`` latencies during the pass
and after it, and their ratio (1.0x: the pass costs appends nothing).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from bench_cleaner import build

from kafkafs.record import compression as codecs


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=192)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="kafkafs-cleanlat-", dir=args.dir or os.path.join(ROOT, "var"))
    logs, mnt = os.path.join(work, "logs"), os.path.join(work, "mnt")
    os.makedirs(mnt)
    kafkafs = [sys.executable, "-m", "kafkafs"]
    subprocess.run(kafkafs + ["topics", "--log-dirs", logs, "--create", "--topic", "kv",
                              "--config", "cleanup.policy=compact",
                              "--config", "min.cleanable.dirty.ratio=0.01"], check=True,
                   cwd=ROOT, capture_output=True)
    print(f"# building {args.mb} MB of keyed batches ...", flush=True)
    build(os.path.join(logs, "kv-0"), args.mb, args.keys, 100, 100, codecs.NONE)
    err = open(os.path.join(work, "daemon.log"), "w+")
    daemon = subprocess.Popen(kafkafs + ["mount", mnt, "--log-dirs", logs, "-o", "parse.key=true",
                                         "--override", "log.cleaner.backoff.ms=100"],
                              cwd=ROOT, stderr=err, stdout=err)
    try:
        while not os.path.ismount(mnt):
            time.sleep(0.05)
        fd = os.open(os.path.join(mnt, "kv", "0", "append"), os.O_WRONLY | os.O_APPEND)
        rnd = random.Random(3)
        writes: list[tuple[float, float]] = []
        reads: list[tuple[float, float]] = []
        done_at = None
        i = 0
        while done_at is None or time.monotonic() < done_at + 2.0:
            t0 = time.monotonic()
            os.write(fd, b"key-%09d\tvalue-%d\n" % (rnd.randrange(args.keys), i))
            t1 = time.monotonic()
            writes.append((t0, t1 - t0))
            try:
                with open(os.path.join(mnt, "kv", "key", "key-%09d" % rnd.randrange(args.keys)),
                          "rb") as f:
                    f.read()
            except FileNotFoundError:
                pass
            t2 = time.monotonic()
            reads.append((t1, t2 - t1))
            i += 1
            if done_at is None and i % 50 == 0:
                err.seek(0)
                m = re.search(r"Cleaned kv-0 .*?(\d+\.\d) s \((\d+\.\d) MB/s\)", err.read())
                if m:
                    done_at = time.monotonic()
                    pass_s, mbs = float(m.group(1)), m.group(2)
            time.sleep(0.001)
        os.close(fd)
        start = done_at - pass_s
        print(f"# cleaning pass: {pass_s:.1f} s at {mbs} MB/s; {i} appends and key reads")
        for name, xs in (("append write", writes), ("cat key/k", reads)):
            during = [d * 1000 for t, d in xs if start <= t <= done_at]
            after = [d * 1000 for t, d in xs if t > done_at]
            if not during or not after:
                print(f"{name}: too few samples ({len(during)} during, {len(after)} after)")
                continue
            p50d, p99d = statistics.median(during), pct(during, 0.99)
            p50a, p99a = statistics.median(after), pct(after, 0.99)
            print(f"{name:14s} during the pass p50 {p50d:6.2f} ms p99 {p99d:6.2f} ms max "
                  f"{max(during):7.2f} ms | after p50 {p50a:6.2f} ms p99 {p99a:6.2f} ms max "
                  f"{max(after):7.2f} ms | p99 ratio {p99d / p99a:4.2f}x")
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(60)
        subprocess.run(["fusermount3", "-uz", mnt], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
