#!/usr/bin/env python3
"""Append latency through the mount while the cleaner swaps segments and retention deletes
them, against the idle latency of the same run (issue 21: no swap, deletion or directory
fsync runs under a lock an append on the loop waits for; docs/design.md §6.4).

    python bench/bench_append_latency.py [--mb 48] [--segment-kb 128] [--keys 20000]
        [--idle-s 3] [--code DIR] [--dir DIR]

Builds topic ``t`` (``cleanup.policy=compact,delete``) with one partition of ``--mb`` MB of
keyed 100-byte records in ``--segment-kb`` KiB segments, mounts it (``-o parse.key=true``;
the topic's ``min.cleanable.dirty.ratio=1`` keeps the daemon's own cleaner away) and
appends one keyed line per ``write`` to ``MOUNT/t/0/append`` in a loop while a second
thread runs three phases:

1. idle: ``--idle-s`` seconds of appends alone;
2. cleaner: ``setfattr -n user.kafkafs.compact MOUNT/t/0``, a pass over every segment,
   one swap per group of segments (renames and a directory fsync each); the window is the
   ``setxattr`` call;
3. retention: ``retention.bytes`` lowered through ``MOUNT/t/config`` so that the next
   retention check (``log.retention.check.interval.ms=1000``) deletes every segment but
   the last few; the window runs from the ``config`` file's close to 0.2 s after the daemon
   logged the deletion.

Prints the ``write`` latency p50 / p99 / p99.9 / max of each window and each as a ratio of
the idle p99 of the same run (the target: the p99 during the swaps and the deletion within
2x of the idle p99). ``--code DIR`` runs the daemon from another checkout (the commit
before the change, with its C extension copied in), so both are measured on one machine
and one set of data.

``--in-process`` measures the same three phases without the mount, in one process, with the
log layer of ``--code``: ``Log.append`` of one record from the main
thread while a worker thread idles, runs ``LogCleaner.clean_log``, or
``Log.delete_old_segments``; besides the append latency it prints how long the appends
waited to acquire ``Log.lock``: the part of the latency this bench is about, apart from
the GIL and the disk the other thread shares.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# --in-process measures the log layer of --code itself (the mount's daemon runs from it)
_CODE = sys.argv[sys.argv.index("--code") + 1] if "--code" in sys.argv[:-1] else ROOT
sys.path.insert(0, os.path.abspath(_CODE) if "--in-process" in sys.argv else ROOT)

from kafkafs.log.config import LogConfig
from kafkafs.log.loader import load_log
from kafkafs.record.batch import encode_batch

NOW = int(time.time() * 1000)
TOPIC_CONFIG = {"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": "1"}


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def build(pdir: str, mb: int, segment_bytes: int, keys: int) -> int:
    """``mb`` MB of keyed records (100-record batches, 100-byte values) into the partition
    dir ``pdir``; returns the segment count."""
    lg = load_log(pdir, "t", 0, LogConfig(cleanup_policy="compact,delete",
                                          segment_bytes=segment_bytes))
    rnd = random.Random(1)
    filler = os.urandom(92)
    i = 0
    while lg.size_in_bytes() < mb << 20:
        recs = []
        for _ in range(100):
            recs.append((NOW + i, b"key-%09d" % rnd.randrange(keys), filler + b"%08d" % i, ()))
            i += 1
        lg.append_encoded(bytearray(encode_batch(recs)))
    lg.flush()
    n = len(lg.segments())
    lg.close()
    return n


def config_text(overrides: dict[str, str]) -> bytes:
    return "".join(f"{k}={v}\n" for k, v in overrides.items()).encode()


class Phases(threading.Thread):
    """The second thread: the idle, cleaner and retention windows, as (name, start, end)
    in ``time.time()`` seconds."""

    def __init__(self, mnt: str, daemon_log: str, idle_s: float, keep_bytes: int):
        super().__init__(daemon=True)
        self.mnt, self.daemon_log, self.idle_s = mnt, daemon_log, idle_s
        self.keep_bytes = keep_bytes
        self.windows: list[tuple[str, float, float]] = []
        self.done = threading.Event()
        self.error: BaseException | None = None

    def _logged(self, pattern: str) -> bool:
        with open(self.daemon_log, errors="replace") as f:
            return re.search(pattern, f.read()) is not None

    def run(self):
        try:
            time.sleep(0.5)  # (the first appends open the active segment's pages)
            t0 = time.time()
            time.sleep(self.idle_s)
            self.windows.append(("idle", t0, time.time()))
            t1 = time.time()
            os.setxattr(os.path.join(self.mnt, "t", "0"), "user.kafkafs.compact", b"1")
            self.windows.append(("cleaner pass (swaps)", t1, time.time()))
            time.sleep(1.0)
            with open(os.path.join(self.mnt, "t", "config"), "wb") as f:
                f.write(config_text({**TOPIC_CONFIG, "retention.bytes": str(self.keep_bytes)}))
            t3 = time.time()  # (after the close: its store fsyncs, on the loop, in both)
            deadline = t3 + 30
            while not self._logged(r"Deleted \d+ segment\(s\) of t-0 by retention"):
                if time.time() > deadline:
                    raise RuntimeError("retention deleted nothing within 30 s")
                time.sleep(0.02)
            time.sleep(0.2)
            self.windows.append(("retention deletion", t3, time.time()))
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            self.error = exc
        finally:
            self.done.set()


class TimedLock:
    """``Log.lock`` wrapped: the time each acquisition by the thread ``watch`` waited."""

    def __init__(self, inner):
        self.inner, self.waits, self.watch = inner, [], None

    def acquire(self, *args, **kw):
        t = time.perf_counter()
        got = self.inner.acquire(*args, **kw)
        if threading.get_ident() == self.watch:
            self.waits.append(time.perf_counter() - t)
        return got

    def release(self):
        self.inner.release()

    __enter__ = acquire

    def __exit__(self, *exc):
        self.inner.release()


def in_process(args, work: str) -> None:
    """The three phases on a :class:`Log` in this process (see the module)."""
    from kafkafs.log.cleaner import CleanerConfig, LogCleaner

    pdir = os.path.join(work, "t-0")
    os.makedirs(pdir)
    segments = build(pdir, args.mb, args.segment_kb << 10, args.keys)
    cfg = LogConfig(cleanup_policy="compact,delete", segment_bytes=args.segment_kb << 10)
    lg = load_log(pdir, "t", 0, cfg, had_clean_shutdown=True, recovery_point=1 << 62)
    lg.lock = TimedLock(lg.lock)
    cleaner = LogCleaner(CleanerConfig(dedupe_buffer_size=64 << 20), [work], {("t", 0): lg},
                         clock=lambda: NOW)
    print(f"# in one process: {args.mb} MB in {segments} segments of {args.segment_kb} KiB")

    def retention():
        lg.config = cfg.with_overrides({"retention.bytes": str(4 * (args.segment_kb << 10))})
        for seg in lg.segments():
            seg.config = lg.config
        lg.delete_old_segments()
        time.sleep(0.2)

    idle_p99 = None
    for name, action in (("idle", lambda: time.sleep(args.idle_s)),
                         ("cleaner pass (swaps)", lambda: cleaner.clean_log(lg, now=NOW)),
                         ("retention deletion", retention)):
        done = threading.Event()
        worker = threading.Thread(target=lambda a=action, d=done: (a(), d.set()),
                                  daemon=True)
        lg.lock.waits, lg.lock.watch = [], threading.get_ident()
        lat, k = [], 0
        t0 = time.perf_counter()
        worker.start()
        while not done.is_set():
            a = time.perf_counter()
            lg.append([(NOW, b"key-%09d" % k, b"v", ())])
            lat.append((time.perf_counter() - a) * 1000)
            k += 1
            time.sleep(0.0005)
        worker.join()
        waits = [w * 1000 for w in lg.lock.waits]
        p99 = pct(lat, 0.99)
        idle_p99 = idle_p99 or p99
        print(f"{name:22s} {time.perf_counter() - t0:5.2f} s {len(lat):6d} appends  p50 "
              f"{pct(lat, 0.5):6.3f} ms  p99 {p99:6.3f} ms ({p99 / idle_p99:5.2f}x)  max "
              f"{max(lat):8.3f} ms | waiting for Log.lock: p99 {pct(waits, 0.99):6.3f} ms  "
              f"max {max(waits):8.3f} ms  total {sum(waits):7.1f} ms", flush=True)
    lg.remove_deleted_segments(force=True)
    lg.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=48)
    ap.add_argument("--segment-kb", type=int, default=128)
    ap.add_argument("--keys", type=int, default=20_000)
    ap.add_argument("--idle-s", type=float, default=3.0)
    ap.add_argument("--code", default=ROOT, help="the checkout whose daemon is measured")
    ap.add_argument("--dir", default=None, help="where the data goes (default: ROOT/var)")
    ap.add_argument("--in-process", action="store_true",
                    help="no mount: Log.append beside the cleaner and retention in one process")
    args = ap.parse_args()
    base = args.dir or os.path.join(ROOT, "var")
    os.makedirs(base, exist_ok=True)
    work = tempfile.mkdtemp(prefix="kafkafs-applat-", dir=base)
    if args.in_process:
        try:
            in_process(args, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return 0
    logs, mnt = os.path.join(work, "logs"), os.path.join(work, "mnt")
    os.makedirs(mnt)
    code = os.path.abspath(args.code)
    env = dict(os.environ, PYTHONPATH=code)
    kafkafs = [sys.executable, "-m", "kafkafs"]
    cmd = kafkafs + ["topics", "--log-dirs", logs, "--create", "--topic", "t"]
    for k, v in TOPIC_CONFIG.items():
        cmd += ["--config", f"{k}={v}"]
    subprocess.run(cmd + ["--config", f"segment.bytes={args.segment_kb << 10}"], check=True,
                   cwd=code, env=env, capture_output=True)
    segments = build(os.path.join(logs, "t-0"), args.mb, args.segment_kb << 10, args.keys)
    print(f"# {args.mb} MB in {segments} segments of {args.segment_kb} KiB, {args.keys} keys; "
          f"daemon from {code}", flush=True)
    daemon_log = os.path.join(work, "daemon.log")
    with open(daemon_log, "w") as err:
        daemon = subprocess.Popen(
            kafkafs + ["mount", mnt, "--log-dirs", logs, "-o", "parse.key=true",
                       "--override", "log.retention.check.interval.ms=1000"],
            cwd=code, env=env, stderr=err, stdout=err)
    try:
        deadline = time.monotonic() + 60
        while not os.path.ismount(mnt):
            if daemon.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the daemon did not mount: see {daemon_log}")
            time.sleep(0.05)
        fd = os.open(os.path.join(mnt, "t", "0", "append"), os.O_WRONLY | os.O_APPEND)
        rnd = random.Random(3)
        samples: list[tuple[float, float]] = []
        phases = Phases(mnt, daemon_log, args.idle_s, 4 * (args.segment_kb << 10))
        phases.start()
        i = 0
        while not phases.done.is_set():
            line = b"key-%09d\tvalue-%d\n" % (rnd.randrange(args.keys), i)
            t = time.time()
            t0 = time.perf_counter()
            os.write(fd, line)
            samples.append((t, time.perf_counter() - t0))
            i += 1
            time.sleep(0.0005)
        os.close(fd)
        if phases.error is not None:
            raise phases.error
        with open(daemon_log, errors="replace") as f:
            text = f.read()
        swaps = len(re.findall(r"Swapped \d+ cleaned segment", text))
        deleted = re.search(r"Deleted (\d+) segment\(s\) of t-0 by retention", text)
        print(f"# {i} appends; {swaps} swaps in the pass; "
              f"{deleted.group(1) if deleted else '?'} segments deleted by retention")
        idle_p99 = None
        for name, start, end in phases.windows:
            xs = [d * 1000 for t, d in samples if start <= t <= end]
            if not xs:
                print(f"{name}: no samples")
                continue
            p50, p99, p999, top = pct(xs, 0.5), pct(xs, 0.99), pct(xs, 0.999), max(xs)
            if idle_p99 is None:
                idle_p99 = p99
            print(f"{name:22s} {end - start:5.2f} s {len(xs):6d} writes  p50 {p50:6.3f} ms "
                  f"({p50 / idle_p99:5.2f}x)  p99 {p99:6.3f} ms ({p99 / idle_p99:5.2f}x)  "
                  f"p99.9 {p999:7.3f} ms ({p999 / idle_p99:6.2f}x)  max {top:8.3f} ms "
                  f"({top / idle_p99:7.2f}x idle p99)", flush=True)
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(60)
        except subprocess.TimeoutExpired:
            daemon.kill()
        subprocess.run(["fusermount3", "-uz", mnt], check=False, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
