#!/usr/bin/env python3
"""The long run of the damaged-log-dir fuzzer (issue 10 §2): seeded, chunked, resumable.

    python bench/fuzz_logdir.py [--cases 100000] [--seed 1] [--workers 2] [--timeout 20]
                                [--minutes M] [--chunk 100] [--out var/fuzz_logdir]
                                [--readers consume,dump,get-offsets,messages]
                                [--subprocess-every 100] [--mount-every 0] [--repros 3]
    python bench/fuzz_logdir.py --replay DIR/mutations.json

Case ``i`` of seed ``S`` is always the same mutation list (``logdir_fuzz.random_case``), so
a run is chunked (``--chunk`` cases per task) and resumable: each finished chunk is one
line of ``OUT/seed-S/results.jsonl``; a rerun with the same ``--out`` and seed skips the
chunks done and adds to the figures. ``--minutes`` stops dispatching after that long.
Workers (``--workers``, default every core) each run a case's readers in forked children
killed after ``--timeout`` s (a hang). Every ``--subprocess-every``-th case also runs a real
``python -m kafkafs consume`` (reader ``consume-subprocess``), every ``--mount-every``-th
(0: never) a real read-only mount (``mount:cat_messages``, ``mount:ls``, ``mount:offset``).

Printed at the end: cases run and cases/s; per reader the count of each verdict kind
(crash, hang, wrote, dirty, silent_loss, silent_skip, short, overrun, false_alarm,
wrong_offset, bad_error, clean, clear, ambiguous; see ``tests/logdir_fuzz.py``); per
mutation kind the cases and the failing cases per reader; the distinct crash messages. The
first ``--repros`` cases of each (reader, failure kind) are minimized and written to
``OUT/seed-S/repro/<reader>-<kind>-<case>/`` (the mutated log dir and mutations.json), with
a line each in ``OUT/seed-S/repro/README``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import sys
import time
from collections import Counter, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

import logdir_fuzz as F

DETAIL_CHARS = 300


def _worker_init(template: str, scratch: str) -> None:
    F.use_work_root(os.path.join(scratch, f"w{os.getpid()}"))
    F.use_template(template)


def _case_result(args, index: int) -> dict:
    mutations = F.random_case(args.seed, index)
    readers = [r for r in args.readers if r in F.READERS]
    verdicts = {}
    case_dir = F.make_case_dir(mutations)
    try:
        isolation = F.isolation_level(mutations)
        for name in readers:
            verdicts[name] = F.judge_reader(name, case_dir, isolation, args.timeout)
        if args.subprocess_every and index % args.subprocess_every == 0:
            res = F.run_consume_subprocess(case_dir, isolation, args.timeout)
            verdicts["consume-subprocess"] = F.Verdict("hang", "subprocess") if \
                res.get("hang") else F.judge_consume(res, case_dir, isolation)
        if args.mount_every and index % args.mount_every == 0:
            scratch = case_dir + "-mount"
            os.makedirs(scratch)
            try:
                for check, v in F.check_mount(case_dir, scratch, args.timeout).items():
                    verdicts[f"mount:{check}"] = v
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
    finally:
        shutil.rmtree(case_dir, ignore_errors=True)
    return {"i": index, "m": [m["kind"] for m in mutations],
            "v": {r: [v.kind, v.detail[:DETAIL_CHARS]] if v.failed else v.kind
                  for r, v in verdicts.items()}}


def _run_chunk(job) -> dict:
    args, chunk = job
    t0 = time.monotonic()
    first = chunk * args.chunk
    cases = [_case_result(args, i) for i in range(first, min(first + args.chunk, args.cases))]
    return {"chunk": chunk, "seconds": time.monotonic() - t0, "cases": cases}


def _load(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    out = []
    with open(path) as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except ValueError:
                pass  # a line cut by a kill: that chunk runs again
    return out


class Figures:
    """The tallies printed at the end."""

    def __init__(self):
        self.cases = 0
        self.by_reader = defaultdict(Counter)
        self.by_mutation = defaultdict(Counter)  # kind -> Counter(cases, reader failures)
        self.first = defaultdict(list)  # (reader, kind) -> [case index]
        self.crashes = Counter()

    def add(self, case: dict) -> None:
        self.cases += 1
        failed_readers = set()
        for reader, v in case["v"].items():
            kind, detail = (v, "") if isinstance(v, str) else v
            self.by_reader[reader][kind] += 1
            if kind in F.FAIL_KINDS:
                failed_readers.add(reader)
                self.first[(reader, kind)].append(case["i"])
                if kind == "crash":
                    self.crashes[detail[:120]] += 1
        for m in set(case["m"]):
            self.by_mutation[m]["cases"] += 1
            for r in failed_readers:
                self.by_mutation[m][r] += 1

    def print(self) -> None:
        print(f"cases run (every chunk of this seed so far): {self.cases}")
        kinds = [k for k in F.FAIL_KINDS + F.PASS_KINDS
                 if any(c[k] for c in self.by_reader.values())]
        width = max(len(r) for r in self.by_reader) if self.by_reader else 8
        print("\nper reader (cases):")
        print(" " * (width + 2) + " ".join(f"{k:>11}" for k in kinds))
        for reader in sorted(self.by_reader):
            c = self.by_reader[reader]
            print(f"  {reader:<{width}}" + " ".join(f"{c[k]:>11}" for k in kinds))
        readers = sorted(self.by_reader)
        print("\nper mutation kind (cases containing it; of those, cases a reader failed):")
        print(f"  {'':<22}{'cases':>7} " + " ".join(f"{r[:11]:>11}" for r in readers))
        for m in sorted(self.by_mutation):
            c = self.by_mutation[m]
            print(f"  {m:<22}{c['cases']:>7} " + " ".join(f"{c[r]:>11}" for r in readers))
        if self.crashes:
            print("\ncrashes (distinct last lines):")
            for msg, n in self.crashes.most_common(15):
                print(f"  {n:>6}  {msg}")


def _write_repros(args, figures: Figures, out: str) -> None:
    repro_root = os.path.join(out, "repro")
    os.makedirs(repro_root, exist_ok=True)
    readme = os.path.join(repro_root, "README")
    if not os.path.exists(readme):
        with open(readme, "w") as f:
            f.write("# <reader>-<kind>-<case>: minimized mutations -> verdict. Each dir holds the "
                    "mutated log dir (logs/) and mutations.json;\n# replay one with: python "
                    "bench/fuzz_logdir.py --replay <dir>/mutations.json\n")
    done = set(os.listdir(repro_root))
    print(f"\nminimized reproductions in {repro_root}:")
    for (reader, kind), indexes in sorted(figures.first.items()):
        if reader not in F.READERS:
            continue  # mount and subprocess samples: replay by case index
        for index in sorted(indexes)[:args.repros]:
            name = f"{reader}-{kind}-{index}"
            if name in done:
                continue
            mutations = F.random_case(args.seed, index)
            # a hang costs the whole time limit per try
            small = F.minimize(mutations, reader, kind, args.timeout,
                               budget=4 if kind == "hang" else 40)
            verdict = F.run_case(small, (reader,), args.timeout)[reader]
            case = os.path.join(repro_root, name)
            os.makedirs(case)
            F.make_case_dir(small, os.path.join(case, "logs"))
            with open(os.path.join(case, "mutations.json"), "w") as f:
                json.dump(small, f, indent=1)
            line = (f"{name}: {'; '.join(F.describe(m) for m in small)} -> {verdict.kind}: "
                    f"{verdict.detail[:200]}")
            with open(readme, "a") as f:
                f.write(line + "\n")
            print(f"  {line}")


def replay(path: str, timeout: float) -> None:
    """Run the case in ``path`` (a mutations.json) and print the judge's view and verdicts."""
    with open(path) as f:
        mutations = json.load(f)
    for m in mutations:
        print(F.describe(m))
    case_dir = F.make_case_dir(mutations)
    try:
        print(F.explain(case_dir))
        for name, v in F.run_case(mutations, timeout=timeout).items():
            print(f"{name}: {v.kind} {v.detail}")
    finally:
        shutil.rmtree(case_dir, ignore_errors=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=100_000)
    p.add_argument("--seed", default="1")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    p.add_argument("--timeout", type=float, default=20.0, help="seconds per reader run")
    p.add_argument("--minutes", type=float, default=None, help="stop dispatching after this")
    p.add_argument("--chunk", type=int, default=100, help="cases per task")
    p.add_argument("--out", default=os.path.join(ROOT, "var", "fuzz_logdir"))
    p.add_argument("--readers", default=",".join(F.READERS))
    p.add_argument("--subprocess-every", type=int, default=100)
    p.add_argument("--mount-every", type=int, default=0)
    p.add_argument("--repros", type=int, default=3, help="minimized cases per failure kind")
    p.add_argument("--replay", metavar="mutations.json")
    args = p.parse_args()
    if args.replay:
        replay(args.replay, args.timeout)
        return 0
    args.readers = [r.strip() for r in args.readers.split(",") if r.strip()]
    out = os.path.join(args.out, f"seed-{args.seed}")
    os.makedirs(out, exist_ok=True)
    results = os.path.join(out, "results.jsonl")
    figures = Figures()
    done = set()
    for chunk in _load(results):
        if chunk["chunk"] in done:
            continue
        done.add(chunk["chunk"])
        for case in chunk["cases"]:
            figures.add(case)
    todo = [c for c in range((args.cases + args.chunk - 1) // args.chunk) if c not in done]
    print(f"seed {args.seed}: {len(done)} chunks done before, {len(todo)} to run, "
          f"{args.workers} workers, timeout {args.timeout:g} s", flush=True)
    template = F.template_dir()
    scratch = F.work_root()
    t0 = time.monotonic()
    ran = 0
    deadline = None if args.minutes is None else t0 + 60 * args.minutes
    ctx = multiprocessing.get_context("fork")
    pool = ctx.Pool(args.workers, _worker_init, (template, scratch))
    try:
        pending = iter(todo)
        running = []
        with open(results, "a") as sink:
            while True:
                while len(running) < 2 * args.workers and (deadline is None or
                                                           time.monotonic() < deadline):
                    chunk = next(pending, None)
                    if chunk is None:
                        break
                    running.append(pool.apply_async(_run_chunk, ((args, chunk),)))
                if not running:
                    break
                ready = [r for r in running if r.ready()]
                if not ready:
                    time.sleep(0.2)
                    continue
                for r in ready:
                    running.remove(r)
                    res = r.get()
                    sink.write(json.dumps(res) + "\n")
                    sink.flush()
                    ran += len(res["cases"])
                    for case in res["cases"]:
                        figures.add(case)
                    elapsed = time.monotonic() - t0
                    print(f"  chunk {res['chunk']}: {len(res['cases'])} cases in "
                          f"{res['seconds']:.0f} s; this run {ran} cases, "
                          f"{ran / elapsed:.1f} cases/s", flush=True)
    finally:
        pool.terminate()
        pool.join()
    elapsed = time.monotonic() - t0
    print()
    figures.print()
    print(f"\nthis run: {ran} cases in {elapsed:.0f} s = {ran / max(elapsed, 1e-9):.2f} cases/s "
          f"on {args.workers} workers")
    if args.repros:
        _write_repros(args, figures, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
