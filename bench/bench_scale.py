"""A broker-sized log dir (issue 19): 2,000 partitions (200 topics x 10) of 10 segments each,
generated off the mount with the log layer, then each figure printed beside its target:

* ``clean mount``: a clean start until ``ls MOUNT`` answers (target <= 5 s);
* ``ls -R MOUNT`` of the whole mount, and the ``kafkafs umount`` after it (no target: the
  file system's side, measured so that a change shows);
* ``produce``: ``kafkafs produce`` of one line to one topic of that log dir against the same
  on a log dir holding only that topic (target <= 1.5x the time); ``topics --describe``,
  ``get-offsets`` and ``consume`` of one topic beside it (no target);
* ``topics --delete`` of one topic of 10 partitions (no target: the issue measured 6.9 s);
* ``crash``: ``kill -9`` of the daemon while a writer appends to every partition through
  the mount, then the time until a remount answers ``ls MOUNT`` (target <= 15 s on this
  2-core machine; the issue measured 59-81 s);
* ``check`` after that crash (no daemon) and beside the running daemon (no target: the issue
  measured 68-119 s);
* starts after a clean shutdown whose marker was removed, and with the recovery-point
  checkpoint removed too (a full recovery of every segment) (no targets);
* the daemon's peak open descriptors over every daemon of the run (``/proc/PID/fd``, sampled
  every 20 ms) against the documented budget, ``kafkafs.max.open.files`` + 128.

Hooks: :data:`FIGURES` lists the figures in the order they run, each a function of a
:class:`Run` (the log dir, the mount point, a daemon started and stopped by it with
descriptors and RSS sampled, timing helpers); add a function there to add a figure (e.g. the
daemon's RSS after reading every view of every partition: :meth:`Run.mount`, read, then
:meth:`Run.daemon_rss_kb`; the first ``tail -n 10 messages`` of a large partition after a
remount: :func:`build_partition` makes one, :meth:`Run.remount` remounts). ``--only NAME``
runs some of them.

``--code DIR`` runs the daemon and the CLI of another checkout (its ``kafkafs`` package
first on ``PYTHONPATH``), e.g. an older commit extracted with ``git archive``, so that
today's code and a change are measured on the same machine and data: the log dir is
generated once (``--data DIR`` keeps and reuses it) and copied afresh for each run.

Run as root (FUSE): ``python bench/bench_scale.py [--topics 200] [--partitions 10]
[--segments 10] [--data DIR] [--code DIR] [--only crash,produce]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

BUDGET_HEADROOM = 128  # kafkafs.log.handles.HEADROOM: what the daemon needs besides its budget
DEFAULT_MAX_OPEN_FILES = 1000  # kafkafs.max.open.files


# -- generating the log dir --------------------------------------------------------------------
def generate(logs: str, topics: int, partitions: int, segments: int, segment_bytes: int,
             record_bytes: int = 100, batch_records: int = 40) -> float:
    """Write ``topics`` x ``partitions`` partitions of ``segments`` segments each into
    ``logs`` with the log layer (the topic config ``segment.bytes`` = ``segment_bytes``, so
    that the mount rolls the same way), shut down cleanly. The indexes are preallocated
    small while writing (a broker setting, not the topics': the mount preallocates the
    active ones to the default 10 MiB again); every file ends as a broker's would. Returns
    the seconds taken."""
    from kafkafs.log.config import BrokerConfig
    from kafkafs.log.manager import LogManager

    t = time.perf_counter()
    config = BrokerConfig.from_properties({"log.index.size.max.bytes": "4096"})
    m = LogManager(config.with_log_dirs([logs]))
    m.startup()
    try:
        lines = [(b"record-%06d-" % i).ljust(record_bytes, b"x") for i in range(batch_records)]
        ts = int(time.time() * 1000)
        for n in range(topics):
            for lg in m.create_topic(topic_name(n), partitions,
                                     {"segment.bytes": str(segment_bytes)}):
                while len(lg.segments()) < segments:
                    lg.append([(ts, None, line, ()) for line in lines])
    finally:
        m.shutdown()
    return time.perf_counter() - t


def topic_name(n: int) -> str:
    return f"t{n:03d}"


def build_partition(logs: str, topic: str, records: int, record_bytes: int = 150,
                    batch_records: int = 100, segment_bytes: int | None = None) -> None:
    """One topic of one partition of ``records`` records of ``record_bytes`` bytes (for a
    figure on a large partition), written with the log layer and shut down cleanly."""
    from kafkafs.log.config import BrokerConfig
    from kafkafs.log.manager import LogManager

    m = LogManager(BrokerConfig().with_log_dirs([logs]))
    m.startup()
    try:
        overrides = {} if segment_bytes is None else {"segment.bytes": str(segment_bytes)}
        lg = m.create_topic(topic, 1, overrides)[0]
        ts = int(time.time() * 1000)
        for start in range(0, records, batch_records):
            lg.append([(ts, None, (b"value-%d-" % i).ljust(record_bytes, b"x"), ())
                       for i in range(start, min(records, start + batch_records))])
    finally:
        m.shutdown()


# -- the run -----------------------------------------------------------------------------------
class Run:
    """One run of the figures: ``logs`` (the log dir), ``mnt`` (the mount point), ``code``
    (the checkout whose daemon and CLI run), ``work`` (scratch space). At most one daemon at
    a time; every daemon's open descriptors are sampled while it runs (:attr:`peak_fds`)."""

    def __init__(self, work: str, logs: str, code: str, args):
        self.work = work
        self.logs = logs
        self.code = code
        self.args = args
        self.mnt = os.path.join(work, "mnt")
        os.makedirs(self.mnt, exist_ok=True)
        self.env = dict(os.environ, PYTHONPATH=code, XDG_CACHE_HOME=os.path.join(work, "cache"))
        self.env.pop("KAFKAFS_LOG_DIRS", None)
        self.proc: subprocess.Popen | None = None
        self.peak_fds = 0
        self._sampler: threading.Thread | None = None
        self._stop_sampling = threading.Event()
        self.daemon_log = os.path.join(work, "daemon.log")

    # -- the daemon ---------------------------------------------------------------------------
    def start(self) -> subprocess.Popen:
        """Start ``kafkafs mount`` (not waiting for it); its descriptors are sampled."""
        assert self.proc is None, "one daemon at a time"
        err = open(self.daemon_log, "ab")  # noqa: SIM115 - the daemon's, closed below
        self.proc = subprocess.Popen([sys.executable, "-m", "kafkafs", "mount", self.mnt,
                                      "--log-dirs", self.logs], cwd=self.work, env=self.env,
                                     stdout=err, stderr=err)
        err.close()
        self._stop_sampling.clear()
        self._sampler = threading.Thread(target=self._sample, args=(self.proc.pid,),
                                         daemon=True)
        self._sampler.start()
        return self.proc

    def _sample(self, pid: int) -> None:
        while not self._stop_sampling.is_set():
            try:
                n = len(os.listdir(f"/proc/{pid}/fd"))
            except OSError:
                n = 0
            self.peak_fds = max(self.peak_fds, n)
            self._stop_sampling.wait(0.02)

    def wait_answers(self, timeout: float = 600.0) -> float:
        """Wait until ``ls MOUNT`` lists the topics; returns the seconds since :meth:`start`
        was called (measured by the caller's clock: see :meth:`mount`)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the daemon exited with {self.proc.returncode}; see "
                                   f"{self.daemon_log}")
            if os.path.ismount(self.mnt):
                r = subprocess.run(["ls", self.mnt], capture_output=True, check=False)
                if r.returncode == 0 and r.stdout.strip():
                    return time.monotonic()
            time.sleep(0.01)
        raise RuntimeError(f"the mount did not answer in {timeout} s")

    def mount(self) -> float:
        """Start a daemon and wait until ``ls MOUNT`` answers; returns the seconds that took."""
        t = time.monotonic()
        self.start()
        return self.wait_answers() - t

    def umount(self) -> float:
        """``kafkafs umount MOUNT``; returns the seconds until the daemon exited."""
        t = time.monotonic()
        subprocess.run([sys.executable, "-m", "kafkafs", "umount", self.mnt, "--timeout", "600"],
                       env=self.env, check=True, cwd=self.work)
        rc = self.proc.wait(600)
        took = time.monotonic() - t
        self._end()
        if rc != 0:
            raise RuntimeError(f"the daemon exited with {rc}; see {self.daemon_log}")
        return took

    def kill(self) -> None:
        """``kill -9`` the daemon and detach its dead mount."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(60)
        self._end()
        subprocess.run(["fusermount3", "-u", "-z", self.mnt], capture_output=True, check=False)

    def remount(self) -> float:
        """Unmount and mount again; returns the seconds until the new mount answers."""
        self.umount()
        return self.mount()

    def _end(self) -> None:
        self._stop_sampling.set()
        if self._sampler is not None:
            self._sampler.join()
        self.proc = None

    def daemon_rss_kb(self) -> int:
        """The running daemon's resident set (VmRSS), KiB."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for text in f:
                if text.startswith("VmRSS:"):
                    return int(text.split()[1])
        return 0

    # -- the command line ---------------------------------------------------------------------
    def cli(self, *argv: str, stdin: bytes | None = None, logs: str | None = None,
            ok: tuple[int, ...] = (0,)) -> float:
        """Run ``kafkafs ARGV --log-dirs LOGS``; returns the seconds it took. Raises when the
        exit status is not in ``ok``."""
        cmd = [sys.executable, "-m", "kafkafs", *argv, "--log-dirs", logs or self.logs]
        t = time.monotonic()
        r = subprocess.run(cmd, input=stdin, capture_output=True, env=self.env, cwd=self.work,
                           check=False)
        took = time.monotonic() - t
        if r.returncode not in ok:
            raise RuntimeError(f"{' '.join(argv)}: exit {r.returncode}: "
                               f"{r.stderr.decode(errors='replace')[-2000:]}")
        return took

    def best_cli(self, *argv: str, repeat: int = 3, **kw) -> float:
        return min(self.cli(*argv, **kw) for _ in range(repeat))


def report(label: str, value: float, unit: str, target: float | None = None,
           op: str = "<=", note: str = "") -> None:
    """Print one figure and its target."""
    if target is None:
        verdict = ""
    else:
        met = value <= target if op == "<=" else value >= target
        verdict = f"(target {op} {target:g} {unit})  {'ok' if met else 'MISSED'}"
    print(f"{label:<52} {value:9.2f} {unit:<3} {verdict}{note}", flush=True)


# -- the figures -------------------------------------------------------------------------------
def fig_clean_mount(run: Run) -> None:
    """A clean start until ``ls MOUNT`` answers; ``ls -R MOUNT``; the umount after it."""
    report("clean mount until ls MOUNT answers", run.mount(), "s", 5)
    t = time.monotonic()
    r = subprocess.run(f"ls -R {run.mnt} | wc -l", shell=True, capture_output=True, text=True,
                       check=False)
    took = time.monotonic() - t
    report("ls -R MOUNT", took, "s", note=f"  ({r.stdout.strip()} lines)")
    report("kafkafs umount after ls -R", run.umount(), "s")
    run.mount()
    report("kafkafs umount without a listing", run.umount(), "s")


def fig_cli(run: Run) -> None:
    """``produce`` of one line here against a log dir holding only that topic; readers of one
    topic; ``topics --delete`` of one topic."""
    topic = topic_name(0)
    alone = os.path.join(run.work, "alone")
    shutil.rmtree(alone, ignore_errors=True)
    run.cli("topics", "--create", "--topic", topic, "--partitions",
            str(run.args.partitions), logs=alone)
    ref = run.best_cli("produce", "--topic", topic, stdin=b"one line\n", logs=alone, repeat=5)
    ours = run.best_cli("produce", "--topic", topic, stdin=b"one line\n", repeat=5)
    report(f"produce one line, {topic} alone (reference)", ref, "s")
    report(f"produce one line, {topic} of the big log dir", ours, "s")
    report("  ratio", ours / ref, "x", 1.5)
    for argv in (("topics", "--describe", "--topic", topic),
                 ("get-offsets", "--topic", topic),
                 ("consume", "--topic", topic, "--from-beginning", "--max-messages", "1",
                  "--timeout-ms", "100")):
        report(" ".join(argv[:2 if argv[0] == "topics" else 1]) + f" {topic}",
               run.best_cli(*argv), "s")
    doomed = topic_name(run.args.topics - 1)
    report(f"topics --delete --topic {doomed}", run.cli("topics", "--delete", "--topic",
                                                          doomed), "s")


def _appender(mnt: str, topics: list[str], partitions: int, stop: threading.Event,
              counts: list[int]) -> None:
    """Append a few lines at a time to every partition in turn until ``stop`` (or the mount
    dies)."""
    chunk = b"".join((b"crash-%04d-" % i).ljust(120, b"y") + b"\n" for i in range(30))
    while not stop.is_set():
        for t in topics:
            for p in range(partitions):
                if stop.is_set():
                    return
                try:
                    with open(os.path.join(mnt, t, str(p), "append"), "ab") as f:
                        f.write(chunk)
                    counts[0] += 1
                except OSError:
                    return


def fig_crash(run: Run) -> None:
    """kill -9 during appends to every partition; ``check`` after it; the remount until it
    answers; ``check`` beside the running daemon."""
    run.mount()
    topics = [t for t in sorted(os.listdir(run.mnt))]
    stop = threading.Event()
    counts = [0]
    writers = [threading.Thread(target=_appender, args=(run.mnt, topics[i::2],
                                                         run.args.partitions, stop, counts))
               for i in range(2)]
    for w in writers:
        w.start()
    time.sleep(run.args.append_seconds)
    run.kill()
    stop.set()
    for w in writers:
        w.join()
    print(f"#   kill -9 after {counts[0]} appends of 30 lines to {len(topics)} topics",
          flush=True)
    if not run.args.skip_check:
        report("check after the crash", run.cli("check", ok=(0, 1)), "s")
    report("crash: remount until ls MOUNT answers", run.mount(), "s", 15)
    if not run.args.skip_check:
        report("check beside the running daemon", run.cli("check", ok=(0, 1)), "s")
    report("kafkafs umount after the recovery", run.umount(), "s")


def fig_recovery(run: Run) -> None:
    """A start with the clean-shutdown marker removed (every partition recovered from its
    recovery point, with nothing written since), then with the recovery-point checkpoint
    removed too (every segment of every partition re-validated, its indexes rebuilt and
    fsynced: a full recovery). No targets: the issue measured 24 s for the first."""
    marker = os.path.join(run.logs, ".kafka_cleanshutdown")
    os.unlink(marker)
    report("marker removed: mount until ls MOUNT answers", run.mount(), "s")
    run.umount()
    os.unlink(marker)
    os.unlink(os.path.join(run.logs, "recovery-point-offset-checkpoint"))
    report("full recovery: mount until ls MOUNT answers", run.mount(), "s")
    run.umount()


def _rss_mb(run: Run) -> float:
    return run.daemon_rss_kb() / 1024


def _read_all(paths: list[str], parallel: int = 4) -> None:
    """``cat`` every path to /dev/null, ``parallel`` at a time (xargs -P)."""
    subprocess.run(["xargs", "-0", "-P", str(parallel), "-n", "50", "cat"],
                   input=b"\0".join(p.encode() for p in paths), stdout=subprocess.DEVNULL,
                   check=True)


def fig_memory(run: Run) -> None:
    """The daemon's RSS after reading every view (``messages``, ``records.jsonl``) of every
    partition once, the files closed (target <= 300 MB), and with 200 ``tail -f`` readers
    of as many partitions while 10 appenders write to them."""
    run.mount()
    report("daemon RSS after the mount", _rss_mb(run), "MB")
    parts = [os.path.join(run.mnt, t, p) for t in sorted(os.listdir(run.mnt))
             for p in sorted(os.listdir(os.path.join(run.mnt, t))) if p.isdigit()]
    t = time.monotonic()
    _read_all([os.path.join(p, v) for p in parts for v in ("messages", "records.jsonl")])
    took = time.monotonic() - t
    time.sleep(1)
    report("daemon RSS after reading every view once", _rss_mb(run), "MB", 300,
           note=f"  ({2 * len(parts)} files in {took:.1f} s)")
    readers = [subprocess.Popen(["tail", "-n", "1", "-f", os.path.join(p, "messages")],
                                stdout=subprocess.DEVNULL) for p in parts[:200]]
    stop = threading.Event()
    counts = [0]
    writers = [threading.Thread(target=_appender_of, args=(parts[i:200:10], stop, counts))
               for i in range(10)]
    for w in writers:
        w.start()
    time.sleep(run.args.append_seconds)
    peak = _rss_mb(run)
    stop.set()
    for w in writers:
        w.join()
    for r in readers:
        r.kill()
        r.wait()
    report("daemon RSS with 200 tail -f and 10 appenders", peak, "MB",
           note=f"  ({counts[0]} appends of 30 lines)")
    time.sleep(1)
    report("daemon RSS after they stopped", _rss_mb(run), "MB", 300)
    run.umount()


def _appender_of(parts: list[str], stop: threading.Event, counts: list[int]) -> None:
    chunk = b"".join((b"mem-%04d-" % i).ljust(120, b"z") + b"\n" for i in range(30))
    while not stop.is_set():
        for p in parts:
            with open(os.path.join(p, "append"), "ab") as f:
                f.write(chunk)
            counts[0] += 1


def _drop_caches() -> None:
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def _timed(cmd: str) -> tuple[float, bytes]:
    t = time.monotonic()
    r = subprocess.run(cmd, shell=True, capture_output=True, check=True)
    return time.monotonic() - t, r.stdout


def fig_large(run: Run) -> None:
    """One partition of ``--large-records`` records of 150 B (53 M: 8 GB), written with the
    log layer (as a broker's copy or a bulk load: its views never seen by a daemon), then
    after a cold mount (page cache dropped): the first byte of ``records.jsonl`` and of
    ``messages`` (``head -c 100``; target <= 100 ms), ``tail -n 10 messages`` never seen
    (a full pass: no target can hold), then after that read and a cold remount (target <=
    2 s); and the same for a partition of ``--through-mb`` MB appended through the mount."""
    n = run.args.large_records
    data = (run.args.data + f"-large-{n}") if run.args.data else os.path.join(run.work, "large")
    if not os.path.isdir(data):
        t = time.monotonic()
        build_partition(data, "big", n)
        print(f"# built a partition of {n} records in {time.monotonic() - t:.1f} s", flush=True)
    size = sum(os.path.getsize(os.path.join(data, "big-0", f))
               for f in os.listdir(os.path.join(data, "big-0")) if f.endswith(".log"))
    big = Run(run.work, data, run.code, run.args)
    shutil.rmtree(os.path.join(run.work, "cache"), ignore_errors=True)  # no marks: never seen
    pdir = os.path.join(big.mnt, "big", "0")
    _drop_caches()
    big.mount()
    gb = f"{size / 1e9:.1f} GB, {n / 1e6:g} M records"
    took, _ = _timed(f"head -c 100 {pdir}/records.jsonl")
    report(f"never seen, cold: head -c 100 records.jsonl ({gb})", took * 1000, "ms", 100)
    took, _ = _timed(f"head -c 100 {pdir}/messages")
    report("never seen, cold: head -c 100 messages", took * 1000, "ms", 100)
    took, out = _timed(f"tail -n 10 {pdir}/messages")
    assert out.splitlines()[-1].startswith(b"value-%d-" % (n - 1)), out[-200:]
    report("never seen, cold: tail -n 10 messages (a full pass)", took, "s")
    big.umount()
    _drop_caches()
    raw, _ = _timed(f"cat {data}/big-0/*.log > /dev/null")
    report("  reference: cold cat of its .log files", raw, "s",
           note=f"  (the full pass takes {took / raw:.2f}x)")
    _drop_caches()
    big.mount()
    took, out = _timed(f"tail -n 10 {pdir}/messages")
    assert out.splitlines()[-1].startswith(b"value-%d-" % (n - 1)), out[-200:]
    report("read once before, cold remount: tail -n 10 messages", took, "s", 2)
    big.umount()
    run.peak_fds = max(run.peak_fds, big.peak_fds)

    # a partition written through the mount
    through = os.path.join(run.work, "through")
    shutil.rmtree(through, ignore_errors=True)
    os.makedirs(through)
    w = Run(run.work, through, run.code, run.args)
    w.cli("topics", "--create", "--topic", "w", "--partitions", "1")
    w.mount()
    line = b"through-%09d-".ljust(150, b"w") + b"\n"
    per = (1 << 20) // len(line)
    total = run.args.through_mb * (1 << 20) // len(line) // per * per
    t = time.monotonic()
    with open(os.path.join(w.mnt, "w", "0", "append"), "ab", buffering=0) as f:
        for start in range(0, total, per):
            f.write(b"".join(line % i for i in range(start, start + per)))
    took = time.monotonic() - t
    report(f"through the mount: append {total * len(line) / 1e6:.0f} MB", took, "s",
           note=f"  ({total * len(line) / 1e6 / took:.0f} MB/s)")
    deadline = time.monotonic() + 600
    while os.stat(os.path.join(w.mnt, "w", "0", "messages")).st_size < total * len(line) - 1:
        if time.monotonic() > deadline:
            raise RuntimeError("messages was not measured in 600 s")
        time.sleep(0.5)
    report("through the mount: measured after the last append", time.monotonic() - t - took,
           "s")
    w.umount()
    _drop_caches()
    w.mount()
    took, out = _timed(f"tail -n 10 {w.mnt}/w/0/messages")
    assert out.splitlines()[-1].startswith(b"through-%09d-" % (total - 1)), out[-200:]
    report("written through the mount, cold remount: tail -n 10", took, "s", 2)
    w.umount()
    run.peak_fds = max(run.peak_fds, w.peak_fds)
    shutil.rmtree(through, ignore_errors=True)


def fig_descriptors(run: Run) -> None:
    """The peak of open descriptors over every daemon so far, against the budget."""
    budget = DEFAULT_MAX_OPEN_FILES + BUDGET_HEADROOM
    report("peak open descriptors of the daemon", run.peak_fds, "fds", budget)


#: the figures, in the order they run (``--only`` picks some by name); add one here
FIGURES: dict[str, Callable[[Run], None]] = {
    "mount": fig_clean_mount,
    "cli": fig_cli,
    "crash": fig_crash,
    "recovery": fig_recovery,
    "memory": fig_memory,
    "large": fig_large,
    "fds": fig_descriptors,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topics", type=int, default=200)
    ap.add_argument("--partitions", type=int, default=10, help="per topic")
    ap.add_argument("--segments", type=int, default=10, help="per partition")
    ap.add_argument("--segment-bytes", type=int, default=16384)
    ap.add_argument("--append-seconds", type=float, default=5.0,
                    help="appending before the kill -9")
    ap.add_argument("--large-records", type=int, default=53_000_000,
                    help="records of 150 B in the large partition (53 M: 8 GB)")
    ap.add_argument("--through-mb", type=int, default=8192,
                    help="MB appended through the mount for the large-partition figure")
    ap.add_argument("--skip-check", action="store_true", help="no check figures (slow)")
    ap.add_argument("--data", help="keep the generated log dir here (reused when it exists)")
    ap.add_argument("--code", default=ROOT, help="the checkout whose daemon and CLI run")
    ap.add_argument("--work", help="work dir (default: a temp dir, removed)")
    ap.add_argument("--only", help="comma-separated figures: " + ",".join(FIGURES))
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="kafkafs-bench-scale-")
    os.makedirs(work, exist_ok=True)
    data = args.data or os.path.join(work, "pristine")
    try:
        if not os.path.isdir(data):
            took = generate(data, args.topics, args.partitions, args.segments,
                            args.segment_bytes)
            print(f"# generated {args.topics * args.partitions} partitions x {args.segments} "
                  f"segments of {args.segment_bytes} B in {took:.1f} s", flush=True)
        logs = os.path.join(work, "logs")
        shutil.rmtree(logs, ignore_errors=True)
        subprocess.run(["cp", "-a", data, logs], check=True)
        subprocess.run(["sync"], check=True)  # the copy's writeback is no figure's cost
        run = Run(work, logs, os.path.abspath(args.code), args)
        print(f"# code: {run.code}", flush=True)
        wanted = args.only.split(",") if args.only else list(FIGURES)
        for name in wanted:
            FIGURES[name](run)
        if "fds" not in wanted:
            fig_descriptors(run)
    finally:
        if os.path.ismount(os.path.join(work, "mnt")):
            subprocess.run(["fusermount3", "-u", "-z", os.path.join(work, "mnt")], check=False)
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
