#!/usr/bin/env python3
"""``count()`` of a ``kafkalog`` read over a topic in tiny segments against the same records
in one large segment, on local[2], ratio in one run (issue 20, "Performance": target
>= 0.8x).

The same ``--records`` records (default 10^6: 16-byte keys, ``--value-bytes`` (100) JSON
values, uncompressed batches of ``--batch`` (7) records, about 1 KB) are in two log dirs:
topic ``large`` written by kafkafs's log layer with ``segment.bytes`` 1 GiB (one segment),
and topic ``small``, the same batches cut into segments of at most 2048 bytes (two batches a
segment, the issue's 2 KB segments; :func:`split`). Both log dirs are closed as a broker
leaves them after a clean shutdown (checkpoints, the producer snapshot at the log end
offset, ``.kafka_cleanshutdown``), so planning opens them as it would a broker's. Each
``spark.read.format("kafkalog")...count()`` is timed ``--runs`` times (planning included,
Spark's start-up not) and the best kept; the number of tasks of each is shown.
``--small-bytes`` takes a comma-separated list of segment sizes (default ``2048``): each
gets its own topic and row (``2048,65536,1048576`` shows where the cost of a segment stops
mattering). Each small topic's row also shows the floor of any per-segment loop in Python:
listing its partition dir, a ``stat`` of each ``.log``, and an open, ``fstat``, ``pread``
and close of each, timed on their own.

    .venv/bin/python bench/bench_spark_segments.py [--records 1000000] [--dir DIR]
        [--small-bytes 2048,65536,1048576]

``--dir`` keeps the log dirs (and reuses them on the next run with the same shape).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from kafkafs.log import checkpoint as ckpt
from kafkafs.log.config import LogConfig
from kafkafs.log.loader import load_log
from kafkafs.log.manager import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
)

T0 = 1_700_000_000_000


def build(root: str, topic: str, records: int, segment_bytes: int, value_bytes: int,
          batch: int) -> int:
    """Write ``records`` records into ``root/topic-0`` with kafkafs's log layer; returns
    the segment count."""
    path = os.path.join(root, f"{topic}-0")
    os.makedirs(path, exist_ok=True)
    lg = load_log(path, topic, 0, LogConfig(segment_bytes=segment_bytes))
    for i in range(0, records, batch):
        recs = []
        for j in range(i, min(records, i + batch)):
            head = f'{{"id":{j},"pad":"'
            value = (head + "x" * max(0, value_bytes - len(head) - 2) + '"}').encode()
            recs.append((T0 + j, b"key-%012d" % (j % 100000), value, ()))
        lg.append(recs)
    lg.flush()
    end = lg.log_end_offset
    n = len(lg.segments())
    lg.close()
    clean_shutdown(root, topic, end)
    return n


def clean_shutdown(root: str, topic: str, end: int) -> None:
    """The checkpoints and ``.kafka_cleanshutdown`` a broker leaves in a log dir."""
    ckpt.write_offset_checkpoint(os.path.join(root, RECOVERY_POINT_CHECKPOINT), {(topic, 0): end})
    ckpt.write_offset_checkpoint(os.path.join(root, LOG_START_OFFSET_CHECKPOINT),
                                 {(topic, 0): 0})
    with open(os.path.join(root, CLEAN_SHUTDOWN_FILE), "w"):
        pass


def split(large_root: str, large: str, root: str, topic: str, segment_bytes: int) -> int:
    """The segment of ``large`` cut into segments of at most ``segment_bytes`` (whole
    batches; a batch alone when larger), as a broker rolling at that size would have
    written them (index files empty: one entry per ``index.interval.bytes``, 4 KiB, and
    none in a segment smaller than that), with the producer snapshot of the log end
    offset; returns the segment count. Much faster than appending through the log layer,
    which takes a producer snapshot at every roll."""
    from kafkafs.record.batch import iter_batches

    src = os.path.join(large_root, f"{large}-0")
    dst = os.path.join(root, f"{topic}-0")
    os.makedirs(dst, exist_ok=True)
    with open(os.path.join(src, "00000000000000000000.log"), "rb") as f:
        data = f.read()
    segments, cur, cur_base, end = 0, [], None, 0

    def flush():
        nonlocal segments, cur, cur_base
        if not cur:
            return
        name = os.path.join(dst, f"{cur_base:020d}")
        with open(name + ".log", "wb") as out:
            out.write(b"".join(cur))
        for suffix in (".index", ".timeindex"):
            open(name + suffix, "wb").close()
        segments += 1
        cur, cur_base = [], None

    size = 0
    for b in iter_batches(data, 0, len(data)):
        raw = data[b.position:b.position + b.size]
        if cur and size + len(raw) > segment_bytes:
            flush()
            size = 0
        if cur_base is None:
            cur_base = b.base_offset
        cur.append(raw)
        size += len(raw)
        end = b.next_offset
    flush()
    for n in os.listdir(src):
        if n.endswith(".snapshot"):
            shutil.copyfile(os.path.join(src, n), os.path.join(dst, n))
    clean_shutdown(root, topic, end)
    return segments


def floor(path: str) -> tuple[float, float, float]:
    """Seconds of the system calls any Python loop over the segments of ``path`` makes:
    ``(listdir, stat of each .log, open + fstat + pread + close of each)``."""
    t = time.perf_counter()
    names = sorted(n for n in os.listdir(path) if n.endswith(".log"))
    t_list = time.perf_counter() - t
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        t = time.perf_counter()
        for n in names:
            os.stat(n, dir_fd=fd)
        t_stat = time.perf_counter() - t
        t = time.perf_counter()
        for n in names:
            f = os.open(n, os.O_RDONLY, dir_fd=fd)
            os.pread(f, os.fstat(f).st_size, 0)
            os.close(f)
        t_read = time.perf_counter() - t
    finally:
        os.close(fd)
    return t_list, t_stat, t_read


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--batch", type=int, default=7)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir")
    ap.add_argument("--small-bytes", default="2048",
                    help="segment sizes of the small topics, bytes, comma-separated")
    args = ap.parse_args()
    small_sizes = [int(x) for x in args.small_bytes.split(",")]

    base = args.dir or tempfile.mkdtemp(prefix="bench-spark-segments-")
    shape = f"{args.records}-{args.value_bytes}-{args.batch}"
    smalls = ["small" if n == 2048 else f"small{n}" for n in small_sizes]
    dirs = {"large": os.path.join(base, f"large-{shape}")}
    dirs.update((t, os.path.join(base, f"{t}-{shape}")) for t in smalls)
    segs = {}
    try:
        for topic in ["large", *smalls]:
            root = dirs[topic]
            if not os.path.isdir(root):
                t = time.perf_counter()
                os.makedirs(root)
                if topic == "large":
                    build(root, topic, args.records, 1 << 30, args.value_bytes, args.batch)
                else:
                    split(dirs["large"], "large", root, topic,
                          small_sizes[smalls.index(topic)])
                print(f"wrote {topic} in {time.perf_counter() - t:.1f} s", flush=True)
            segs[topic] = sum(1 for n in os.listdir(os.path.join(root, f"{topic}-0"))
                              if n.endswith(".log"))
        size = sum(os.path.getsize(os.path.join(dirs["large"], "large-0", n))
                   for n in os.listdir(os.path.join(dirs["large"], "large-0"))
                   if n.endswith(".log"))

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        import kafkafs.spark

        spark = kafkafs.spark.session("local[2]", "bench-spark-segments", {
            "spark.ui.enabled": "false", "spark.driver.memory": "2g"})

        def df(topic):
            return spark.read.format("kafkalog").option("subscribe", topic).load(dirs[topic])

        results = {}
        for topic in ["large", *smalls] * 2:  # interleaved: load moves
            best, tasks = results.get(topic, (None, None))
            for _ in range(args.runs if best is None else 1):
                t = time.perf_counter()
                frame = df(topic)
                n = frame.count()
                elapsed = time.perf_counter() - t
                assert n == args.records, (topic, n)
                best = elapsed if best is None else min(best, elapsed)
            tasks = frame.rdd.getNumPartitions()
            results[topic] = (best, tasks)
        spark.stop()
    finally:
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)

    t_large, n_large = results["large"]
    print(f"{args.records} records, {size / 1e6:.0f} MB of segments, local[2], count():")
    print(f"  1 GiB segments:   {segs['large']:6d} segment(s), {n_large:3d} task(s), "
          f"{t_large:.2f} s ({args.records / t_large / 1e6:.2f} M rec/s)")
    for topic, n in zip(smalls, small_sizes, strict=True):
        t_small, n_small = results[topic]
        label = f"{n / 1024:g} KiB" if n < 1 << 20 else f"{n / (1 << 20):g} MiB"
        print(f"  {label + ' segments:':17s} {segs[topic]:6d} segments,    {n_small:3d} "
              f"task(s), {t_small:.2f} s ({args.records / t_small / 1e6:.2f} M rec/s): "
              f"{t_large / t_small:.2f}x the 1 GiB throughput"
              + (" (target >= 0.8x)" if n == 2048 else ""))
        t_list, t_stat, t_read = floor(os.path.join(dirs[topic], f"{topic}-0"))
        print(f"    floor of a Python loop over its segments: listdir {t_list:.2f} s, stat "
              f"{t_stat:.2f} s, open/fstat/pread/close {t_read:.2f} s = "
              f"{t_list + t_stat + t_read:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
