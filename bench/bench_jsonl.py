"""The ``records.jsonl`` view (issue 19 item 4), each figure against a reference in the same
run:

* through the mount: ``cat records.jsonl`` against ``cat messages`` of the same partition,
  ``--records`` records of 150 B in batches of 100 (bench_walk's topic), each ``cat`` on a
  fresh mount with no saved view marks (so the view is measured as it is read), both sides
  alternating, best of ``--repeat``; MB/s of each file's own bytes, and their ratio
  (target >= 0.3x);
* in process, on the same kind of records: MB/s of the lines (and of the log bytes behind
  them) of the renderer the view used before (``RecordBatch.records()`` and a
  ``json.dumps`` per record, :func:`kafkafs.record.jsonl.record_lines`), of
  ``jsonl.render`` per batch and of ``jsonl.rendered_size`` (the view's measure), C and
  Python twin, and of ``jsonl.render_file`` over the segment file in 1 MiB windows (the
  view's read path), C and Python twin.

Run as root (FUSE): ``python bench/bench_jsonl.py [--records 1000000] [--repeat 3]
[--skip mount|inproc]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_fs import ROOT
from bench_walk import build_topic, fresh_daemon

sys.path.insert(0, ROOT)

TOPIC = "j"


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _cat(path: str) -> int:
    """``cat path > /dev/null``; returns the file's size once read (exact then)."""
    subprocess.run(["cat", path], check=True, stdout=subprocess.DEVNULL)
    return os.path.getsize(path)


def through_the_mount(work: str, logs: str, repeat: int) -> None:
    mnt = os.path.join(work, "mnt")
    os.makedirs(mnt, exist_ok=True)
    best = {"messages": float("inf"), "records.jsonl": float("inf")}
    size = {}
    for _ in range(repeat):
        for view in ("messages", "records.jsonl"):
            d = fresh_daemon(mnt, logs, work)
            try:
                t = time.perf_counter()
                size[view] = _cat(f"{mnt}/{TOPIC}/0/{view}")
                best[view] = min(best[view], time.perf_counter() - t)
            finally:
                d.stop()
    rate = {v: size[v] / best[v] / 1e6 for v in best}
    ratio = rate["records.jsonl"] / rate["messages"]
    print(f"#   messages {size['messages']} bytes, records.jsonl {size['records.jsonl']} "
          f"bytes; each cat on a fresh mount, best of {repeat}", flush=True)
    print(f"cat records.jsonl (fresh mount)    kafkafs {rate['records.jsonl']:8.1f} MB/s | "
          f"cat messages {rate['messages']:8.1f} MB/s | {ratio:5.2f}x "
          f"(target >= 0.3x){'  ok' if ratio >= 0.3 else '  BELOW target'}", flush=True)


def in_process(logs: str, repeat: int) -> None:
    from kafkafs.daemon import malloc
    from kafkafs.log.config import LogConfig
    from kafkafs.log.loader import load_log
    from kafkafs.record import jsonl
    from kafkafs.record.batch import TIMESTAMP_TYPE_NAMES

    malloc.tune()  # as the daemon does
    lg = load_log(os.path.join(logs, f"{TOPIC}-0"), TOPIC, 0, LogConfig(), writable=False)
    try:
        batches = [(seg, b) for seg, b in lg.segment_batches()]
        log_bytes = sum(b.size for _s, b in batches)
        args = [(b.payload()[0], b.records_count, b.base_offset, b.base_timestamp, None)
                for _s, b in batches]
        out_bytes = sum(len(jsonl.record_lines(b.records(), "CreateTime")) for _s, b in batches)

        def old():
            for _s, b in batches:
                jsonl.record_lines(b.records(), TIMESTAMP_TYPE_NAMES[b.timestamp_type])

        def per_batch(fn):
            def go():
                for a in args:
                    fn(*a)
            return go

        def run(impl):
            def go():
                for seg in lg.segments():
                    with seg.reader() as fd:
                        pos, end = 0, seg.size
                        while pos < end:
                            _data, nxt, _stopped = impl.render_file(fd, pos, min(end - pos,
                                                                             1 << 20), 1 << 62)
                            assert nxt > pos
                            pos = nxt
            return go

        cases = [("before: records() + json.dumps", old, 1)]
        for impl in [jsonl.C, jsonl.PYTHON] if jsonl.C is not None else [jsonl.PYTHON]:
            n = repeat if impl is jsonl.C else 1
            cases += [(f"render per batch, {impl.name}", per_batch(impl.render), n),
                      (f"rendered_size, {impl.name}", per_batch(impl.rendered_size), n),
                      (f"render_file 1 MiB, {impl.name}", run(impl), n)]
        print(f"#   {len(batches)} batches, {log_bytes / 1e6:.1f} MB of log, "
              f"{out_bytes / 1e6:.1f} MB of lines", flush=True)
        for name, fn, n in cases:
            t = _best(fn, n)
            print(f"{name:<34} {out_bytes / t / 1e6:8.1f} MB/s of lines "
                  f"({log_bytes / t / 1e6:7.1f} MB/s of log, {t * 1000:7.1f} ms)", flush=True)
    finally:
        lg.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip", action="append", default=[], help="mount, inproc")
    ap.add_argument("--work", default=None, help="work dir (default: a temp dir, removed)")
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="kafkafs-bench-jsonl-")
    logs = os.path.join(work, "logs")
    try:
        if not os.path.isdir(os.path.join(logs, f"{TOPIC}-0")):
            t = time.perf_counter()
            build_topic(logs, TOPIC, args.records)
            print(f"# built a topic of {args.records} records of 150 B in "
                  f"{time.perf_counter() - t:.1f} s", flush=True)
        if "inproc" not in args.skip:
            in_process(logs, args.repeat)
        if "mount" not in args.skip:
            through_the_mount(work, logs, args.repeat)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
