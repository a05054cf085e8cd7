"""What a new user meets first (issue 18), each figure a ratio against a reference measured
in the same run:

* ``ls -l offset/`` of a partition of 10^5 records against ``ls -l`` of the trivial pyfuse3
  filesystem's directory of as many files (target >= 0.5x), and the time per entry with
  10^6 records against 10^5 (target <= 2x); both sides alternate, best of ``--repeat``;
* ``grep -r PATTERN MOUNT/<topic>`` over a topic of 10^6 records (exit status 0 or 1 as
  grep's own) against ``grep PATTERN`` over that topic's ``messages`` files (target: at most
  3x the time), for a pattern that matches nothing (every byte read) and one that matches;
* the first byte of ``messages`` and of ``records.jsonl`` (open + read of 1 byte) on a fresh
  mount with no saved view marks, for 10^4 and 10^6 records (target < 100 ms, independent
  of the size);
* ``mkdir MOUNT/<topic>/999``: 1,000 partitions at once (target <= 5 s), and the daemon's
  open descriptors after it.

Run as root (FUSE): ``python bench/bench_walk.py [--records 1000000] [--repeat 3]``.
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

from bench_fs import ROOT, Daemon, line, timed_unmount, wait_mount  # noqa: E402

sys.path.insert(0, ROOT)


def build_topic(logs: str, topic: str, n: int, batch: int = 100) -> None:
    """``n`` records of 150 B, ``value-<offset>-xxx...``, in batches of ``batch`` (about a
    producer's 16 KiB batch.size), written with the log engine directly."""
    from kafkafs.log.config import BrokerConfig
    from kafkafs.log.manager import LogManager

    m = LogManager(BrokerConfig().with_log_dirs([logs]))
    m.startup()
    lg = m.create_topic(topic)[0]
    ts = int(time.time() * 1000)
    for start in range(0, n, batch):
        lg.append([(ts, None, (b"value-%d-" % i).ljust(150, b"x"), ())
                   for i in range(start, min(n, start + batch))])
    m.shutdown()


def fresh_daemon(mnt: str, logs: str, work: str) -> Daemon:
    """A daemon with an empty view-mark cache: its views are measured from scratch."""
    cache = tempfile.mkdtemp(dir=work, prefix="cache-")
    return Daemon(mnt, logs, env=dict(os.environ, XDG_CACHE_HOME=cache)).start()


def trivial(mnt: str, n_big: int) -> subprocess.Popen:
    os.makedirs(mnt, exist_ok=True)
    tp = subprocess.Popen([sys.executable, os.path.join(HERE, "trivialfs.py"), mnt, "1", "1",
                           "--big", str(n_big)], stderr=subprocess.DEVNULL)
    wait_mount(mnt, tp)
    return tp


def time_shell(cmd: str) -> tuple[float, int]:
    t = time.perf_counter()
    r = subprocess.run(cmd, shell=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t, r.returncode


def ls_l(work: str, logs: str, sizes: list[int], repeat: int) -> None:
    """``ls -l offset/`` against ``ls -l`` of the trivial fs, per size, alternating."""
    mnt = os.path.join(work, "mnt-ls")
    os.makedirs(mnt, exist_ok=True)
    per_entry = {}
    d = fresh_daemon(mnt, logs, work)
    try:
        for n in sizes:
            tmnt = os.path.join(work, f"trivial-ls-{n}")
            tp = trivial(tmnt, n)
            try:
                ours = ref = float("inf")
                for _ in range(repeat):
                    ours = min(ours, time_shell(f"ls -l {mnt}/w{n}/0/offset/ >/dev/null")[0])
                    ref = min(ref, time_shell(f"ls -l {tmnt}/big/ >/dev/null")[0])
            finally:
                timed_unmount(tmnt)
                tp.wait(60)
            per_entry[n] = ours / n
            line(f"ls -l offset/, {n} records", n / ours, n / ref, "names/s",
                 0.5 if n == min(sizes) else None)
    finally:
        d.stop()
    small, big = min(sizes), max(sizes)
    if big > small:
        ratio = per_entry[big] / per_entry[small]
        verdict = "ok" if ratio <= 2 else "ABOVE target 2x"
        print(f"#   time per entry, {big} vs {small} records: {per_entry[big] * 1e6:.1f} vs "
              f"{per_entry[small] * 1e6:.1f} us: {ratio:.2f}x (target <= 2x)  {verdict}",
              flush=True)


def grep_r(work: str, logs: str, topic: str, partitions: int, repeat: int) -> None:
    """``grep -r`` over a topic against ``grep`` over its ``messages`` files: cold (each on
    a fresh mount with no saved view marks, so ``messages`` is measured as it streams) and
    warm (one mount, alternating). The output goes to a file: grep stops at the first match
    when it writes to /dev/null."""
    mnt = os.path.join(work, "mnt-grep")
    os.makedirs(mnt, exist_ok=True)
    out = os.path.join(work, "grep.out")
    files = " ".join(f"{mnt}/{topic}/{p}/messages" for p in range(partitions))
    cases = (("no match", "no-such-pattern", 1), ("a match", "value-77777-", 0))

    def run(cmd: str, want: int) -> float:
        t, rc = time_shell(f"{cmd} > {out}")
        assert rc == want, (cmd, rc)
        return t

    for label, pattern, want in cases:
        cold = {"r": float("inf"), "m": float("inf")}
        for _ in range(repeat):
            for side, cmd in (("r", f"grep -r {pattern} {mnt}/{topic}"),
                              ("m", f"grep {pattern} {files}")):
                d = fresh_daemon(mnt, logs, work)
                try:
                    cold[side] = min(cold[side], run(cmd, want))
                finally:
                    d.stop()
        _grep_line(f"{topic}, cold ({label}, exit {want})", cold["r"], cold["m"])
    d = fresh_daemon(mnt, logs, work)
    try:
        for label, pattern, want in cases:
            ours = ref = float("inf")
            for _ in range(repeat):
                ours = min(ours, run(f"grep -r {pattern} {mnt}/{topic}", want))
                ref = min(ref, run(f"grep {pattern} {files}", want))
            _grep_line(f"{topic}, warm ({label}, exit {want})", ours, ref)
    finally:
        d.stop()


def _grep_line(label: str, ours: float, ref: float) -> None:
    ratio = ours / ref
    verdict = "ok" if ratio <= 3 else "ABOVE target 3x"
    print(f"grep -r {label:<32} {ours:6.2f} s | grep messages {ref:6.2f} s | {ratio:5.2f}x "
          f"the time (target <= 3x)  {verdict}", flush=True)


def walks(work: str, logs: str) -> None:
    """``ls -lR``, ``find``, ``du -sh`` of the whole mount on a fresh mount (no reference:
    the issue measured minutes), and du's sum against du of the log dir."""
    mnt = os.path.join(work, "mnt-walk")
    os.makedirs(mnt, exist_ok=True)
    d = fresh_daemon(mnt, logs, work)
    try:
        for cmd in (f"ls -lR {mnt}", f"find {mnt}", f"du -sh {mnt}"):
            t, rc = time_shell(cmd)
            print(f"{cmd.replace(mnt, 'MOUNT'):<14} exit {rc} in {t:.2f} s", flush=True)
        du = subprocess.run(["du", "-sk", mnt], capture_output=True, text=True).stdout.split()[0]
        parts = [os.path.join(logs, n) for n in os.listdir(logs)
                 if os.path.isdir(os.path.join(logs, n))]
        ref = subprocess.run(["du", "-skc", *parts], capture_output=True,
                             text=True).stdout.split()[-2]
        print(f"#   du -sk MOUNT {du} KiB, du -skc of the partition dirs {ref} KiB", flush=True)
    finally:
        d.stop()


def first_byte(work: str, logs: str, sizes: list[int], repeat: int) -> None:
    """Open + read(1) of ``messages`` and ``records.jsonl`` on a fresh mount (no marks)."""
    mnt = os.path.join(work, "mnt-first")
    os.makedirs(mnt, exist_ok=True)
    for view in ("messages", "records.jsonl"):
        for n in sizes:
            best = float("inf")
            for _ in range(repeat):
                d = fresh_daemon(mnt, logs, work)
                try:
                    path = f"{mnt}/w{n}/0/{view}"
                    t = time.perf_counter()
                    with open(path, "rb") as f:
                        assert f.read(1)
                    best = min(best, time.perf_counter() - t)
                finally:
                    d.stop()
            verdict = "ok" if best < 0.1 else "ABOVE target 100 ms"
            print(f"first byte of {view}, {n} records: {best * 1000:7.1f} ms "
                  f"(target < 100 ms)  {verdict}", flush=True)


def mkdir_partitions(work: str, n: int) -> None:
    logs = os.path.join(work, "mkdir-logs")
    mnt = os.path.join(work, "mnt-mkdir")
    os.makedirs(mnt, exist_ok=True)
    d = Daemon(mnt, logs).start()
    try:
        os.mkdir(f"{mnt}/many")
        t = time.perf_counter()
        os.mkdir(f"{mnt}/many/{n - 1}")
        took = time.perf_counter() - t
        fds = len(os.listdir(f"/proc/{d.proc.pid}/fd"))
        made = len(os.listdir(f"{mnt}/many")) - 1
        verdict = "ok" if took <= 5 else "ABOVE target 5 s"
        print(f"mkdir many/{n - 1}: {made} partitions in {took:.2f} s (target <= 5 s)  "
              f"{verdict}; the daemon then holds {fds} descriptors", flush=True)
    finally:
        d.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000, help="the large partition")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=1000, help="for the mkdir figure")
    ap.add_argument("--work", default=None, help="work dir (default: a temp dir, removed)")
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="kafkafs-bench-walk-")
    logs = os.path.join(work, "logs")
    big, mid, small = args.records, max(args.records // 10, 1), max(args.records // 100, 1)
    try:
        t = time.perf_counter()
        for n in sorted({small, mid, big}):
            build_topic(logs, f"w{n}", n)
        print(f"# built topics of {small}, {mid} and {big} records of 150 B in "
              f"{time.perf_counter() - t:.1f} s", flush=True)
        ls_l(work, logs, [mid, big], args.repeat)
        grep_r(work, logs, f"w{big}", 1, args.repeat)
        walks(work, logs)
        first_byte(work, logs, [small, big], args.repeat)
        mkdir_partitions(work, args.partitions)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
