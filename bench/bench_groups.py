#!/usr/bin/env python3
"""Consumer groups from a large ``__consumer_offsets`` (issue 22): ``kafkafs consumer-groups
--describe --all-groups`` against ``cat records.jsonl`` of the same partitions through the
mount, in the same run, and the latency of ``cat groups/<g>/<t>/<p>`` after the first load.

    python bench/bench_groups.py [--commits 1000000] [--groups 1000] [--work DIR]

The log dir: ``__consumer_offsets`` in 50 partitions, ``--commits`` offset commits (version
4 values, as Kafka 4.1 writes them) from ``--groups`` groups, each group committing to 5
partitions of topic ``orders`` again and again (so most records are superseded ones, as in
a real broker's uncompacted tail), written in batches of 500; ``orders`` has 10
partitions of 1,000 records. Targets: describe >= 0.5x the speed of ``cat records.jsonl``
(records/s of ``__consumer_offsets`` either way); a single ``cat`` of a group's offset file
under 10 ms once the view is loaded.
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
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

from bench_fs import drop_caches, wait_mount

from kafkafs.log.config import BrokerConfig
from kafkafs.log.group_writes import offset_commit_records
from kafkafs.log.groups import coordinator_partition
from kafkafs.log.manager import LogManager

PARTITIONS = 50


def build(log_dir: str, commits: int, groups: int) -> None:
    m = LogManager(BrokerConfig.from_properties({}).with_log_dirs([log_dir]))
    m.startup()
    try:
        m.create_topic("orders", 10)
        for p in range(10):
            m.get_log("orders", p).append([(1000 + i, None, b"x" * 100, ())
                                           for i in range(1000)])
        m.create_topic("__consumer_offsets", PARTITIONS, {"cleanup.policy": "compact",
                                                          "segment.bytes": str(64 << 20)})
        pending: dict[int, list] = {}
        now = int(time.time() * 1000)
        for i in range(commits):
            g = f"group-{i % groups:05d}"
            p = (i // groups) % 5 + (i % groups) % 5
            (key, value), = offset_commit_records(g, [("orders", p % 10, i // groups)], now)
            part = coordinator_partition(g, PARTITIONS)
            batch = pending.setdefault(part, [])
            batch.append((now, key, value, ()))
            if len(batch) >= 500:
                m.get_log("__consumer_offsets", part).append(batch)
                pending[part] = []
        for part, batch in pending.items():
            if batch:
                m.get_log("__consumer_offsets", part).append(batch)
    finally:
        m.shutdown()


def timed(cmd, **kw) -> tuple[float, bytes]:
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, check=True, **kw)
    return time.perf_counter() - t, r.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--commits", type=int, default=1_000_000)
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--work")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="bench-groups-")
    logs = os.path.join(work, "logs")
    if not os.path.isdir(logs):
        t = time.perf_counter()
        build(logs, args.commits, args.groups)
        print(f"# built {args.commits} commits of {args.groups} groups in "
              f"{time.perf_counter() - t:.1f} s", flush=True)
    kafkafs = [sys.executable, "-m", "kafkafs"]
    env = dict(os.environ, PYTHONPATH=ROOT)
    describe = []
    for _ in range(args.repeat):
        drop_caches()
        secs, out = timed(kafkafs + ["consumer-groups", "--log-dirs", logs, "--describe",
                                     "--all-groups"], env=env, cwd=ROOT)
        describe.append(secs)
    rows = sum(1 for line in out.decode().splitlines() if line.startswith("group-"))
    mnt = os.path.join(work, "mnt")
    os.makedirs(mnt, exist_ok=True)
    jsonl = []
    for _ in range(args.repeat):
        proc = subprocess.Popen(kafkafs + ["mount", mnt, "--log-dirs", logs, "--read-only"],
                                env=env, cwd=ROOT, stderr=subprocess.DEVNULL)
        wait_mount(mnt, proc)
        try:
            drop_caches()
            t = time.perf_counter()
            n = 0
            for p in range(PARTITIONS):
                with open(os.path.join(mnt, "__consumer_offsets", str(p), "records.jsonl"),
                          "rb") as f:
                    while chunk := f.read(1 << 20):
                        n += chunk.count(b"\n")
            jsonl.append(time.perf_counter() - t)
            # one group's offset file: the first cat loads the view, the next ones do not
            g = "group-00007"
            path = os.path.join(mnt, "__consumer_offsets", "groups", g, "orders")
            t = time.perf_counter()
            first = os.listdir(path)[0]
            load = time.perf_counter() - t
            lat = []
            for _ in range(50):
                t = time.perf_counter()
                with open(os.path.join(path, first), "rb") as f:
                    f.read()
                lat.append(time.perf_counter() - t)
        finally:
            subprocess.run(kafkafs + ["umount", mnt], env=env, cwd=ROOT, check=False)
            proc.wait(60)
    lat.sort()
    d, j = min(describe), min(jsonl)
    print(f"describe --all-groups     {d:7.2f} s ({args.commits / d:,.0f} records/s, "
          f"{rows} rows) | cat records.jsonl {j:7.2f} s ({n / j:,.0f} records/s) | "
          f"{j / d:5.2f}x (target >= 0.5x)")
    print(f"groups/<g>/<t>/<p>        first load {load * 1000:.0f} ms; cat p50 "
          f"{lat[len(lat) // 2] * 1000:.2f} ms, max {lat[-1] * 1000:.2f} ms (target < 10 ms)")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
