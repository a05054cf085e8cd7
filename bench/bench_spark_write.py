"""Bulk write through the ``kafkalog`` writer against Spark writing the same DataFrame as Parquet.

Issue 12's target: 10^7 records of 100 B written through the writer at >= 0.5x the records/s
of Spark writing the same DataFrame as Parquet, both on ``local[2]``, in the same run.

    python bench/bench_spark_write.py                  # 10^6 records (quick)
    python bench/bench_spark_write.py --records 10000000

The DataFrame: ``--records`` rows of a key (``k<id mod --keys>``, or no key with
``--keys 0``) and a 100-byte binary value of hashed bytes (incompressible, as for Parquet),
in ``--tasks`` Spark partitions, written into a new topic of ``--partitions`` partitions.
Each side runs ``--repeat`` times (alternating, after one warm-up write of each); the best
time counts. Prints records/s of each side, the ratio, and how the writer's time splits
between the tasks (Spark stage) and the commit on the driver.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def session(tasks: int):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ["PYTHONPATH"] = ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")
    from pyspark.sql import SparkSession

    import kafkafs.spark

    spark = (SparkSession.builder.master("local[2]").appName("bench-spark-write")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", str(tasks))
             .config("spark.driver.memory", "3g")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    kafkafs.spark.register(spark)
    return spark


def frame(spark, records: int, keys: int, tasks: int):
    from pyspark.sql import functions as F

    ids = spark.range(0, records, 1, tasks)
    sid = F.col("id").cast("string")
    hexed = F.concat(F.sha2(sid, 512), F.sha2(F.concat(sid, F.lit("v")), 512))
    value = F.unhex(F.substring(hexed, 1, 200))  # 100 bytes
    cols = [value.alias("value")]
    if keys:
        cols.insert(0, F.concat(F.lit("k"), (F.col("id") % keys).cast("string")).alias("key"))
    return ids.select(*cols)


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=100_000,
                    help="distinct keys (0: records without key)")
    ap.add_argument("--partitions", type=int, default=8, help="Kafka partitions of the topic")
    ap.add_argument("--tasks", type=int, default=2, help="Spark partitions of the DataFrame")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    args = ap.parse_args(argv)

    scratch = args.dir or tempfile.mkdtemp(prefix="bench-spark-write-")
    spark = session(args.tasks)
    df = frame(spark, args.records, args.keys, args.tasks)
    value_len = len(df.limit(1).collect()[0]["value"])
    print(f"{args.records:,} records, {value_len}-byte values, "
          f"{'keys: ' + format(args.keys, ',') if args.keys else 'no keys'}, "
          f"{args.tasks} tasks -> {args.partitions} Kafka partitions; local[2]", flush=True)

    def parquet(i):
        path = os.path.join(scratch, f"parquet-{i}")
        df.write.mode("overwrite").parquet(path)
        shutil.rmtree(path, ignore_errors=True)

    def kafkalog(i):
        path = os.path.join(scratch, f"logs-{i}")
        (df.write.format("kafkalog").mode("append").option("topic", "bench")
         .option("partitions", args.partitions).save(path))
        shutil.rmtree(path, ignore_errors=True)

    parquet("warm")
    kafkalog("warm")
    best = {"parquet": float("inf"), "kafkalog": float("inf")}
    for i in range(args.repeat):
        best["parquet"] = min(best["parquet"], timed(lambda: parquet(i)))
        best["kafkalog"] = min(best["kafkalog"], timed(lambda: kafkalog(i)))
    rp = args.records / best["parquet"]
    rk = args.records / best["kafkalog"]
    print(f"parquet   {best['parquet']:7.2f} s  {rp:12,.0f} records/s")
    print(f"kafkalog  {best['kafkalog']:7.2f} s  {rk:12,.0f} records/s")
    print(f"ratio kafkalog/parquet: {rk / rp:.2f}x (target >= 0.5x)")
    spark.stop()
    if not args.dir:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
