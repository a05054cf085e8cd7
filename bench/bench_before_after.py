#!/usr/bin/env python3
"""A change against the commit before it, side by side (issue 21's protocol): the same
figures measured on an old checkout and on this one, in alternating rounds, each printed as
the ratio new / old (1.00x: unchanged; the target is none more than 5% worse, >= 0.95x).

    python bench/bench_before_after.py --base REV [--rounds 3] [--mb 100] [--spark-mb 200]
                                       [--no-spark] [--work DIR]

``REV`` is checked out (``git worktree add --detach``) under ``WORK/base`` and its C
extension built there; this checkout is the new side (its extension must be built:
``python setup.py build_ext --inplace``). Each side runs its own ``kafkafs`` (the daemon and
the Spark workers get ``PYTHONPATH`` of their tree). Figures, per side and round:

* append: ``dd bs=1M conv=fsync`` of ``--mb`` MB of 100-200 byte lines into a new topic's
  ``append`` (MB/s);
* ``ls -f offset/ | wc -l`` of that topic on a fresh mount (names/s);
* cold ``cat messages`` (caches dropped before it) and warm ``cat messages`` (MB/s);
* random ``offset/N``: open+read+close of random offsets for three seconds (reads/s);
* Spark: ``spark.read.format("kafkalog")`` of a topic of ``--spark-mb`` MB on local[2],
  written to Spark's noop sink (records/s), best of two after a warm-up, in a new Spark
  application per side and round.

The reads run on a copy of one log dir (built once, by the old side) made before every
mount, so that neither side finds the other's saved view marks. Each figure's line gives
the best of the rounds on each side and their ratio; every round's numbers follow it.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from bench_fs import drop_caches, make_lines, wait_mount

SPARK_SCRIPT = r"""
import os, sys, time
from pyspark.sql import SparkSession
import kafkafs.spark
logs, topic = sys.argv[1], sys.argv[2]
spark = (SparkSession.builder.master("local[2]").appName("before-after")
         .config("spark.ui.enabled", "false").config("spark.driver.memory", "2g")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
kafkafs.spark.register(spark)
def run():
    t = time.perf_counter()
    spark.read.format("kafkalog").option("subscribe", topic).load(logs) \
        .write.format("noop").mode("overwrite").save()
    return time.perf_counter() - t
run()
print(min(run() for _ in range(2)))
n = spark.read.format("kafkalog").option("subscribe", topic).load(logs).count()
print(n)
spark.stop()
"""


class Side:
    """One checkout: ``name`` ("old"/"new"), its ``root`` and the environment its
    processes get."""

    def __init__(self, name: str, root: str):
        self.name, self.root = name, root
        self.env = dict(os.environ, PYTHONPATH=root, PYSPARK_PYTHON=sys.executable,
                        PYSPARK_DRIVER_PYTHON=sys.executable)

    def kafkafs(self, *args, **kw):
        return subprocess.run([sys.executable, "-m", "kafkafs", *args], cwd=self.root,
                              env=self.env, check=True, **kw)

    def mount(self, mnt: str, logs: str, *extra: str):
        proc = subprocess.Popen([sys.executable, "-m", "kafkafs", "mount", mnt, "--log-dirs",
                                 logs, *extra], cwd=self.root, env=self.env,
                                stderr=subprocess.DEVNULL)
        wait_mount(mnt, proc)
        return proc

    def umount(self, mnt: str, proc) -> None:
        self.kafkafs("umount", mnt)
        proc.wait(120)


def checkout(rev: str, where: str) -> str:
    """``rev`` checked out at ``where`` (kept between runs) with its C extension built."""
    if not os.path.isdir(where):
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", where, rev],
                       check=True, capture_output=True)
    else:
        subprocess.run(["git", "-C", where, "checkout", "-q", "--detach", rev], check=True)
    subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=where,
                   check=True, capture_output=True)
    return where


def append_figure(side: Side, work: str, lines: str, size: int) -> float:
    logs, mnt = os.path.join(work, f"append-{side.name}"), os.path.join(work, "mnt")
    shutil.rmtree(logs, ignore_errors=True)
    os.makedirs(logs)
    proc = side.mount(mnt, logs)
    try:
        os.mkdir(os.path.join(mnt, "t"))
        t = time.perf_counter()
        subprocess.run(["dd", f"if={lines}", f"of={mnt}/t/0/append", "bs=1M", "oflag=append",
                        "conv=notrunc,fsync", "status=none"], check=True)
        return size / (time.perf_counter() - t) / 1e6
    finally:
        side.umount(mnt, proc)
        shutil.rmtree(logs, ignore_errors=True)


def read_figures(side: Side, work: str, pristine: str, records: int) -> dict[str, float]:
    logs, mnt = os.path.join(work, f"read-{side.name}"), os.path.join(work, "mnt")
    shutil.rmtree(logs, ignore_errors=True)
    shutil.copytree(pristine, logs)
    out = {}
    proc = side.mount(mnt, logs)
    try:
        part = os.path.join(mnt, "t", "0")
        drop_caches()
        t = time.perf_counter()
        n = subprocess.run(f"ls -f {part}/offset | wc -l", shell=True, check=True,
                           capture_output=True).stdout
        out["ls -f offset/ (names/s)"] = int(n) / (time.perf_counter() - t)
        for what in ("cold", "warm"):
            if what == "cold":
                drop_caches()
            t = time.perf_counter()
            with open(os.path.join(part, "messages"), "rb") as f:
                nbytes = 0
                while chunk := f.read(1 << 20):
                    nbytes += len(chunk)
            out[f"cat messages, {what} (MB/s)"] = nbytes / (time.perf_counter() - t) / 1e6
        rnd = random.Random(7)
        reads = 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 3.0:
            fd = os.open(os.path.join(part, "offset", str(rnd.randrange(records))), os.O_RDONLY)
            os.read(fd, 65536)
            os.close(fd)
            reads += 1
        out["random offset/N (reads/s)"] = reads / (time.perf_counter() - t0)
    finally:
        side.umount(mnt, proc)
        shutil.rmtree(logs, ignore_errors=True)
    return out


def spark_figure(side: Side, spark_logs: str) -> float:
    r = subprocess.run([sys.executable, "-c", SPARK_SCRIPT, spark_logs, "s"], cwd=side.root,
                       env=side.env, check=True, capture_output=True, text=True)
    secs, n = r.stdout.split()[-2:]
    return int(n) / float(secs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", required=True, help="the old commit (any git revision)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--mb", type=int, default=100, help="MB of lines appended (default 100)")
    ap.add_argument("--spark-mb", type=int, default=200, help="MB of Spark's topic")
    ap.add_argument("--no-spark", action="store_true")
    ap.add_argument("--work", help="working dir (kept: the old checkout and the data)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("run as root (FUSE, drop_caches)", file=sys.stderr)
        return 2

    work = args.work or tempfile.mkdtemp(prefix="bench-before-after-")
    os.makedirs(work, exist_ok=True)
    old = Side("old", checkout(args.base, os.path.join(work, "base")))
    new = Side("new", ROOT)
    rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                         check=False, capture_output=True, text=True).stdout.strip()
    print(f"old: {args.base} ({old.root}); new: {rev} ({ROOT}) with local changes if any",
          flush=True)
    lines = os.path.join(work, "lines.txt")
    if not os.path.exists(lines):
        make_lines(lines, args.mb * 1_000_000)
    size = os.path.getsize(lines)

    # the read test's log dir, built once by the old side
    pristine = os.path.join(work, "pristine")
    records = 0
    with open(lines, "rb") as f:
        records = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    if not os.path.isdir(pristine):
        os.makedirs(pristine)
        mnt = os.path.join(work, "mnt")
        os.makedirs(mnt, exist_ok=True)
        proc = old.mount(mnt, pristine)
        os.mkdir(os.path.join(mnt, "t"))
        subprocess.run(["dd", f"if={lines}", f"of={mnt}/t/0/append", "bs=1M", "oflag=append",
                        "conv=notrunc", "status=none"], check=True)
        old.umount(mnt, proc)
    os.makedirs(os.path.join(work, "mnt"), exist_ok=True)
    spark_logs = os.path.join(work, "spark-logs")
    if not args.no_spark and not os.path.isdir(spark_logs):
        sys.path.insert(0, HERE)
        from bench_spark_read import build_topic
        build_topic(spark_logs, "s", 2, args.spark_mb * 1_000_000, 200)

    results: dict[str, dict[str, list[float]]] = {}

    def note(side: Side, name: str, value: float) -> None:
        results.setdefault(name, {"old": [], "new": []})[side.name].append(value)

    for rnd in range(args.rounds):
        order = (old, new) if rnd % 2 == 0 else (new, old)
        for side in order:
            note(side, "append, dd bs=1M conv=fsync (MB/s)", append_figure(side, work, lines,
                                                                          size))
            for name, value in read_figures(side, work, pristine, records).items():
                note(side, name, value)
            if not args.no_spark:
                note(side, "Spark kafkalog read (records/s)", spark_figure(side, spark_logs))
        print(f"round {rnd + 1} of {args.rounds} done", flush=True)

    print(f"\n{'figure':<38} {'old (best)':>14} {'new (best)':>14}  new/old")
    worst = float("inf")
    for name, sides in results.items():
        o, n = max(sides["old"]), max(sides["new"])
        ratio = n / o
        worst = min(worst, ratio)
        flag = "" if ratio >= 0.95 else "  WORSE than 0.95x"
        print(f"{name:<38} {o:14,.1f} {n:14,.1f}  {ratio:5.2f}x{flag}")
        print(f"{'':<38} rounds old {', '.join(f'{x:,.0f}' for x in sides['old'])}; "
              f"new {', '.join(f'{x:,.0f}' for x in sides['new'])}")
    print(f"\nworst ratio {worst:.2f}x (target: none below 0.95x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
