#!/usr/bin/env python3
"""The ``kafkalog`` Spark source's batch read against its references, ratios in one run
(issue 12, "Performance"):

1. read throughput (records/s) of ``spark.read.format("kafkalog")`` on local[2] over a topic
   of ``--mb`` MB (default 300; the issue's figure is 2048) against Spark reading the same
   records from Parquet written beforehand (target >= 0.5x). Both are read whole into
   Spark's ``noop`` sink, every column materialized;
2. the same against kafkafs's own single-process decoder (every batch of every partition
   through ``Log.batches`` and the C record decoder into tuples; target: Spark on 2 cores
   >= 1.6x), and against ``Log.records()`` (a Record object per record) for comparison;
   A Python source yielding ready-made Arrow batches of the same rows (no decoding) shows
   what Spark's intake from any Python data source costs by itself: the bound;
3. bytes read when ``startingOffsets``/``endingOffsets`` select 1% of the topic (the middle
   of each partition), counted by the executors' file seam (``KAFKAFS_SPARK_READ_STATS``),
   against the topic's size (target <= 2%); the planner's own reads are shown beside
   (``/proc/self/io`` of a planning run in this process).

    .venv/bin/python bench/bench_spark_read.py [--mb 300] [--partitions 4] [--value-bytes 200]

The topic is written once into ``--dir`` (default: a temporary directory; kept when given,
and reused by the next run) by kafkafs's log layer: uncompressed batches of 64 records
(about 16 KiB, a producer's default batch.size), JSON values of ``--value-bytes``, 16-byte
keys, 128 MiB segments. Spark's own start-up and the Parquet write are not timed; each read
is timed ``--runs`` times and the best kept.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from kafkafs.log.config import LogConfig
from kafkafs.log.loader import load_log

T0 = 1_700_000_000_000


def build_topic(logs: str, topic: str, partitions: int, total_bytes: int,
                value_bytes: int) -> int:
    """Write the topic, ``total_bytes`` of segments; returns the record count."""
    count = 0
    for p in range(partitions):
        path = os.path.join(logs, f"{topic}-{p}")
        os.makedirs(path, exist_ok=True)
        lg = load_log(path, topic, p, LogConfig(segment_bytes=128 * 1024 * 1024))
        n = 0
        while lg.size_in_bytes() < total_bytes // partitions:
            recs = []
            for i in range(n, n + 64):
                head = f'{{"id":{i},"p":{p},"pad":"'
                value = (head + "x" * max(0, value_bytes - len(head) - 2) + '"}').encode()
                recs.append((T0 + i, b"key-%012d" % (i % 100000), value, ()))
            lg.append(recs)
            n += len(recs)
        lg.flush()
        lg.close()
        count += n
    return count


def topic_bytes(logs: str) -> int:
    return sum(os.path.getsize(os.path.join(root, f)) for root, _d, files in os.walk(logs)
               for f in files if f.endswith(".log"))


def _each_log(logs: str, topic: str, partitions: int):
    """Each partition's Log, opened read-only, closed after use."""
    for p in range(partitions):
        lg = load_log(os.path.join(logs, f"{topic}-{p}"), topic, p, LogConfig(),
                      writable=False)
        try:
            yield lg
        finally:
            lg.close(take_snapshot=False)


def decode_single_process(logs: str, topic: str, partitions: int) -> tuple[int, float]:
    """kafkafs's own decoder, one process: every record of every batch as tuples."""
    t = time.perf_counter()
    n = sum(len(batch.record_tuples()) for lg in _each_log(logs, topic, partitions)
            for batch in lg.batches())
    return n, time.perf_counter() - t


def records_single_process(logs: str, topic: str, partitions: int) -> tuple[int, float]:
    """kafkafs's record API, one process: ``Log.records()``, a Record per record."""
    t = time.perf_counter()
    n = sum(1 for lg in _each_log(logs, topic, partitions) for _record in lg.records())
    return n, time.perf_counter() - t


def register_bound_source(spark, logs: str, topic: str, records: int, partitions: int):
    """A Python data source that decodes nothing: it yields one ready 8192-row Arrow batch
    of the topic (the same schema) over and over, ``records`` rows in ``partitions`` tasks --
    what Spark's intake of Arrow batches from a Python source costs by itself."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from kafkafs.spark.source import BASE_SCHEMA

    class BoundReader(DataSourceReader):
        def partitions(self):
            share = records // partitions
            return [InputPartition(share + (records % partitions if i == 0 else 0))
                    for i in range(partitions)]

        def read(self, partition):
            from kafkafs.spark.columns import read_slice
            from kafkafs.spark.options import parse_options
            from kafkafs.spark.plan import plan_read

            first = plan_read(parse_options({"path": logs, "subscribe": topic}))[0]
            batch = next(iter(read_slice(first)))
            left = partition.value
            while left > 0:
                yield batch.slice(0, min(left, batch.num_rows))
                left -= batch.num_rows

    class BoundSource(DataSource):
        @classmethod
        def name(cls):
            return "kafkalog_bound"

        def schema(self):
            return BASE_SCHEMA

        def reader(self, schema):
            return BoundReader()

    spark.dataSource.register(BoundSource)


def rchar() -> int:
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=int, default=300,
                    help="size of the topic's segments in MB (default 300)")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--value-bytes", type=int, default=200)
    ap.add_argument("--dir", help="where the topic and the Parquet copy go (kept)")
    ap.add_argument("--runs", type=int, default=2, help="timed runs of each read (best kept)")
    args = ap.parse_args()

    base = args.dir or tempfile.mkdtemp(prefix="bench-spark-read-")
    logs, parquet = os.path.join(base, "logs"), os.path.join(base, "parquet")
    stats = os.path.join(base, "read-stats.jsonl")
    topic = "bench"
    if not os.path.isdir(os.path.join(logs, f"{topic}-0")):
        t = time.perf_counter()
        records = build_topic(logs, topic, args.partitions, args.mb * 1_000_000,
                              args.value_bytes)
        print(f"wrote {records:,} records in {time.perf_counter() - t:.1f} s")
    size = topic_bytes(logs)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ["KAFKAFS_SPARK_READ_STATS"] = stats  # inherited by the Python workers
    from pyspark.sql import SparkSession

    import kafkafs.spark

    spark = (SparkSession.builder.master("local[2]").appName("bench-spark-read")
             .config("spark.ui.enabled", "false").config("spark.driver.memory", "2g")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    kafkafs.spark.register(spark)

    def kafkalog(**options):
        r = spark.read.format("kafkalog").option("subscribe", topic)
        for k, v in options.items():
            r = r.option(k, v)
        return r.load(logs)

    if not os.path.isdir(parquet):
        kafkalog().write.parquet(parquet)
    records = spark.read.parquet(parquet).count()

    def timed(make_df) -> float:
        best = None
        for _ in range(args.runs):
            t = time.perf_counter()
            make_df().write.format("noop").mode("overwrite").save()
            elapsed = time.perf_counter() - t
            best = elapsed if best is None else min(best, elapsed)
        return best

    t_parquet = timed(lambda: spark.read.parquet(parquet))
    t_kafkalog = timed(kafkalog)
    register_bound_source(spark, logs, topic, records, args.partitions)
    t_bound = timed(lambda: spark.read.format("kafkalog_bound").load())
    n_single, t_single = decode_single_process(logs, topic, args.partitions)
    assert n_single == records, (n_single, records)
    n_objects, t_objects = records_single_process(logs, topic, args.partitions)
    assert n_objects == records, (n_objects, records)

    # 1%: the middle of every partition
    ends = {}
    for p in range(args.partitions):
        lg = load_log(os.path.join(logs, f"{topic}-{p}"), topic, p, LogConfig(),
                      writable=False)
        ends[p] = lg.log_end_offset
        lg.close(take_snapshot=False)
    start = {topic: {str(p): e // 2 for p, e in ends.items()}}
    end = {topic: {str(p): e // 2 + max(1, e // 100) for p, e in ends.items()}}
    selected = sum(max(1, e // 100) for e in ends.values())
    if os.path.exists(stats):
        os.unlink(stats)
    narrow = kafkalog(startingOffsets=json.dumps(start), endingOffsets=json.dumps(end))
    got = narrow.count()
    assert got == selected, (got, selected)
    with open(stats) as f:
        lines = [json.loads(line) for line in f]
    executor_bytes = sum(x["bytes_read"] for x in lines)
    from kafkafs.spark.options import parse_options
    from kafkafs.spark.plan import plan_read

    before = rchar()
    plan_read(parse_options({"path": logs, "subscribe": topic,
                             "startingOffsets": json.dumps(start),
                             "endingOffsets": json.dumps(end)}))
    planner_bytes = rchar() - before
    spark.stop()

    rate = lambda seconds: records / seconds
    print(f"topic: {records:,} records, {size / 1e6:,.0f} MB in {args.partitions} partitions "
          f"({size / records:.0f} B/record in the log)")
    print(f"{'reader':44} {'seconds':>8} {'records/s':>12} {'MB/s':>8}")
    for name, seconds in (("Spark local[2], Parquet (noop sink)", t_parquet),
                          ("Spark local[2], kafkalog (noop sink)", t_kafkalog),
                          ("Spark local[2], ready Arrow batches (bound)", t_bound),
                          ("kafkafs single process (Log.batches+decode)", t_single),
                          ("kafkafs single process (Log.records)", t_objects)):
        print(f"{name:44} {seconds:8.2f} {rate(seconds):12,.0f} {size / seconds / 1e6:8.0f}")
    print(f"kafkalog / Parquet:            {t_parquet / t_kafkalog:5.2f}x  (target >= 0.5x)")
    print(f"kafkalog / single process:     {t_single / t_kafkalog:5.2f}x  (target >= 1.6x; "
          f"{t_objects / t_kafkalog:.2f}x against Log.records)")
    print(f"1% selection ({selected:,} records): executors read {executor_bytes:,} bytes = "
          f"{executor_bytes / size * 100:.3f}% of the topic (target <= 2%); the planner read "
          f"{planner_bytes:,} bytes ({planner_bytes / size * 100:.3f}%)")
    if not args.dir:
        shutil.rmtree(base)
    return 0


if __name__ == "__main__":
    sys.exit(main())
