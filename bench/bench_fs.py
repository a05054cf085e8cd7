"""Filesystem benchmarks of issue 2, each printed as a ratio against a reference measured in
the same run:

* append: ``dd ... of=topic/0/append oflag=append conv=notrunc,fsync bs=1M`` of 100-200 byte
  lines vs the same dd into a plain file on the same disk (``conv=fsync``), in alternating
  rounds, best of ``--repeat``; the lines go into producer-sized batches (``batch.size``:
  16384 bytes unless ``--batch-size`` sets the mount's ``-o batch.size``), the line says
  which; with ``--compression lz4`` (or gzip, snappy, zstd) the topics appended to have
  that ``compression.type`` (written to ``topic/config`` before the dd);
* read cold: ``cat messages`` right after a remount vs ``cat`` of a trivial pyfuse3
  filesystem serving as many bytes from memory; read warm: a second ``cat messages`` vs
  ``cat`` of a plain file in the page cache;
* point reads: open+read+close of random ``offset/N`` per second vs the same loop over the
  trivial filesystem's small files; and the per-read cost on a log of many records vs few
  (both pairs mounted together and measured in alternating rounds);
* point reads after dd: the same loop over random offsets of the topic the append figure
  filled with ``dd bs=1M`` (batches as ``append`` cuts them: ``batch.size``) vs the trivial
  filesystem's small files, in alternating rounds;
* memory: the daemon's peak RSS (VmHWM) while appending and with many partitions open;
* listing: ``ls -f offset | wc -l`` of a partition of ``--list-records`` records vs ``ls -f``
  of a directory of as many names served by the trivial filesystem, each on a fresh mount.

Run as root (FUSE): ``python bench/bench_fs.py [--mb 200] [--big-records 10000000]``;
``--only append`` (repeatable) runs only the figures named.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)


FIGURES = ("append", "ddpoint", "read", "point", "memory", "list")
DEFAULT_BATCH_SIZE = 16384  # the topic config kafkafs.batch.size's default


def drop_caches() -> bool:
    try:
        subprocess.run(["sync"], check=True)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def make_lines(path: str, total: int, seed: int = 1) -> int:
    rnd = random.Random(seed)
    words = [bytes(rnd.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(2, 9)))
             for _ in range(5000)]
    n = 0
    lines = 0
    with open(path, "wb") as f:
        buf = []
        while n < total:
            want = rnd.randint(100, 199)
            line = b""
            while len(line) < want:
                line += rnd.choice(words) + b" "
            line = line[:want] + b"\n"
            buf.append(line)
            n += len(line)
            lines += 1
            if len(buf) >= 10000:
                f.write(b"".join(buf))
                buf = []
        f.write(b"".join(buf))
    return lines


def wait_mount(path: str, proc, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.ismount(path):
            return
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited with {proc.returncode}")
        time.sleep(0.05)
    raise RuntimeError(f"{path} did not mount")


class Daemon:
    def __init__(self, mnt, logs, extra=(), env=None):
        self.mnt, self.logs, self.extra, self.env = mnt, logs, list(extra), env
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen([sys.executable, "-m", "kafkafs", "mount", self.mnt,
                                      "--log-dirs", self.logs, *self.extra], cwd=ROOT,
                                     stderr=subprocess.DEVNULL, env=self.env)
        wait_mount(self.mnt, self.proc)
        return self

    def hwm_kb(self) -> int:
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        return 0

    def rss_kb(self) -> int:
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stop(self):
        subprocess.run([sys.executable, "-m", "kafkafs", "umount", self.mnt], cwd=ROOT,
                       check=False)
        self.proc.wait(120)


def timed(cmd, **kw) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, **kw)
    return time.perf_counter() - t


def mbps(nbytes, secs):
    return nbytes / secs / 1e6


def line(name, ours, ref, unit, target=None):
    ratio = ours / ref if ref else float("nan")
    verdict = "" if target is None else ("  ok" if ratio >= target else f"  BELOW target {target}x")
    print(f"{name:<34} kafkafs {ours:10.1f} {unit} | reference {ref:10.1f} {unit} | "
          f"{ratio:5.2f}x{verdict}", flush=True)
    return ratio


def first_reads(dir_path: str, names: list[str]) -> float:
    """open+read+close of each of ``names`` once (none is in the kernel's dentry cache
    yet, so every read pays a lookup); returns ops/s."""
    t0 = time.perf_counter()
    for name in names:
        fd = os.open(os.path.join(dir_path, name), os.O_RDONLY)
        os.read(fd, 65536)
        os.close(fd)
    return len(names) / (time.perf_counter() - t0)


def point_reads(dir_path: str, names: list[str], seconds: float = 3.0) -> float:
    """open+read+close of random names in ``dir_path``; returns ops/s."""
    rnd = random.Random(3)
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        name = names[rnd.randrange(len(names))]
        fd = os.open(os.path.join(dir_path, name), os.O_RDONLY)
        os.read(fd, 65536)
        os.close(fd)
        n += 1
    return n / (time.perf_counter() - t0)


def build_log(logs: str, topic: str, n: int, batch: int = 100):
    """Write ``n`` records of ~150 bytes into ``logs`` with the log engine directly, in
    batches of ``batch`` records (100 x 150 B: about a Kafka producer's default 16 KiB
    batch.size)."""
    from kafkafs.log.config import BrokerConfig
    from kafkafs.log.manager import LogManager

    m = LogManager(BrokerConfig().with_log_dirs([logs]))
    m.startup()
    lg = m.create_topic(topic)[0]
    value = b"v" * 150
    ts = int(time.time() * 1000)
    for start in range(0, n, batch):
        lg.append([(ts, None, value, ())] * min(batch, n - start))
    m.shutdown()


def batch_stats(logs: str, topic: str) -> tuple[int, int, float, int]:
    """``(batches, records, mean records per batch, largest batch in bytes)`` of partition 0
    of ``topic``, read from its segment files."""
    from kafkafs.record.batch import iter_batches

    pdir = os.path.join(logs, f"{topic}-0")
    batches = records = biggest = 0
    for name in sorted(os.listdir(pdir)):
        if name.endswith(".log"):
            with open(os.path.join(pdir, name), "rb") as f:
                data = f.read()
            for b in iter_batches(data):
                batches += 1
                records += b.records_count
                biggest = max(biggest, b.size)
    return batches, records, records / max(batches, 1), biggest


def dd_point_reads(work: str, mnt: str, logs: str, topic: str, n_records: int,
                   rounds: int = 6) -> float:
    """open+read+close of random ``offset/N`` of ``topic`` (filled by ``dd bs=1M`` into its
    ``append``) against the same loop over the trivial fs's small files, both mounted
    together, ``rounds`` x 0.5 s a side in alternating rounds. Each side draws from 10^4
    distinct names. Returns the ratio."""
    batches, records, per_batch, biggest = batch_stats(logs, topic)
    print(f"#   {topic}: {records} records in {batches} batches ({per_batch:.1f} records "
          f"per batch, the largest {biggest} bytes)", flush=True)
    rnd = random.Random(7)
    names = [str(i) for i in rnd.sample(range(n_records), min(10_000, n_records))]
    tmnt = os.path.join(work, "trivial-dd")
    os.makedirs(tmnt, exist_ok=True)
    d = Daemon(mnt, logs).start()
    tp = subprocess.Popen([sys.executable, os.path.join(HERE, "trivialfs.py"), tmnt, "1",
                           "10000"])
    try:
        wait_mount(tmnt, tp)
        small = [str(i) for i in range(10_000)]
        ours, ref = [], []
        for _ in range(rounds):
            ours.append(point_reads(f"{mnt}/{topic}/0/offset", names, 0.5))
            ref.append(point_reads(f"{tmnt}/small", small, 0.5))
    finally:
        d.stop()
        subprocess.run(["fusermount3", "-u", tmnt], check=False)
        tp.wait(30)
    return line("point reads, dd-filled append", sum(ours) / rounds, sum(ref) / rounds,
                "ops/s", 0.5)


def timed_unmount(mnt: str) -> float:
    return timed(["fusermount3", "-u", mnt])


def list_offsets(work: str, n: int, repeat: int) -> None:
    """``ls -f offset | wc -l`` of an ``n``-record partition against ``ls -f`` of the trivial
    filesystem's directory of ``n`` names, each the first listing of a fresh mount (the
    kernel then makes an inode per name: a second listing is cheaper on both sides), in
    alternating rounds, best of ``repeat``; the unmounts after them are timed too (the
    kernel drops those inodes)."""
    logs = os.path.join(work, "list-logs")
    build_log(logs, "p", n)
    mnt, tmnt = os.path.join(work, "mnt-list"), os.path.join(work, "trivial-list")
    os.makedirs(mnt)
    os.makedirs(tmnt)
    listing = "ls -f {} | wc -l"
    t_ours = t_triv = u_ours = u_triv = float("inf")
    for _ in range(repeat):
        d = Daemon(mnt, logs).start()
        t = time.perf_counter()
        out = subprocess.run(listing.format(f"{mnt}/p/0/offset"), shell=True, check=True,
                             capture_output=True).stdout
        t_ours = min(t_ours, time.perf_counter() - t)
        assert int(out) == n, out
        t = time.perf_counter()
        d.stop()
        u_ours = min(u_ours, time.perf_counter() - t)
        tp = subprocess.Popen([sys.executable, os.path.join(HERE, "trivialfs.py"), tmnt, "1",
                               "1", "--big", str(n)])
        wait_mount(tmnt, tp)
        t = time.perf_counter()
        out = subprocess.run(listing.format(f"{tmnt}/big"), shell=True, check=True,
                             capture_output=True).stdout
        t_triv = min(t_triv, time.perf_counter() - t)
        assert int(out) == n, out
        u_triv = min(u_triv, timed_unmount(tmnt))
        tp.wait(60)
    line(f"ls -f offset/, {n} names", n / t_ours, n / t_triv, "names/s", 0.5)
    print(f"#   listing {t_ours:.1f} s against {t_triv:.1f} s; unmount after it (kafkafs umount) "
          f"{u_ours:.1f} s against {u_triv:.1f} s (fusermount3 -u of the trivial fs)",
          flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=200, help="MB of lines to append (default 200)")
    ap.add_argument("--big-records", type=int, default=10_000_000,
                    help="records in the large log of the point-read scaling test")
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs per throughput figure, best taken (default 3)")
    ap.add_argument("--list-records", type=int, default=3_000_000,
                    help="records in the partition whose offset/ is listed (default 3M)")
    ap.add_argument("--skip", action="append", default=[],
                    help="append, ddpoint, read, point, memory, list (repeatable)")
    ap.add_argument("--compression", default=None,
                    help="compression.type of the topics the append figure writes")
    ap.add_argument("--batch-size", type=int, default=None,
                    help="the mount's -o batch.size for the append figure (bytes; default: "
                         "the topic's kafkafs.batch.size, 16384)")
    ap.add_argument("--only", action="append", default=[],
                    help="run only these figures (repeatable; the names of --skip)")
    args = ap.parse_args()
    if args.only:
        args.skip = [f for f in FIGURES if f not in args.only]
    work = tempfile.mkdtemp(prefix="kafkafs-bench-", dir=os.path.join(ROOT, "var")
                            if os.path.isdir(os.path.join(ROOT, "var")) else None)
    mnt, logs = os.path.join(work, "mnt"), os.path.join(work, "logs")
    os.makedirs(mnt)
    lines_path = os.path.join(work, "lines.txt")
    total = args.mb * 1024 * 1024
    n_lines = make_lines(lines_path, total)
    size = os.path.getsize(lines_path)
    print(f"# {size} bytes, {n_lines} lines of 100-199 bytes; work dir {work}", flush=True)
    results = {}
    try:
        mount_opts = [] if args.batch_size is None else ["-o", f"batch.size={args.batch_size}"]
        d = Daemon(mnt, logs, mount_opts).start()
        os.mkdir(os.path.join(mnt, "bench"))
        if "append" not in args.skip:
            t_ref = t = t_sink = float("inf")
            smnt = os.path.join(work, "sink")
            os.makedirs(smnt, exist_ok=True)
            sink = subprocess.Popen([sys.executable, os.path.join(HERE, "sinkfs.py"), smnt,
                                     os.path.join(work, "sink.out")])
            wait_mount(smnt, sink)
            for rep in range(args.repeat):  # best of N: this machine's disk is noisy
                plain = os.path.join(work, "plain.out")
                t_ref = min(t_ref, timed(["dd", f"if={lines_path}", f"of={plain}", "conv=fsync",
                                          "bs=1M"], stderr=subprocess.DEVNULL))
                os.unlink(plain)
                t_sink = min(t_sink, timed(["dd", f"if={lines_path}", f"of={smnt}/f",
                                            "oflag=append", "conv=notrunc,fsync", "bs=1M"],
                                           stderr=subprocess.DEVNULL))
                topic = "bench" if rep == 0 else f"bench{rep}"
                if rep:
                    os.mkdir(os.path.join(mnt, topic))
                if args.compression:
                    with open(os.path.join(mnt, topic, "config"), "w") as f:
                        f.write(f"compression.type={args.compression}\n")
                t = min(t, timed(["dd", f"if={lines_path}", f"of={mnt}/{topic}/0/append",
                                  "oflag=append", "conv=notrunc,fsync", "bs=1M"],
                                 stderr=subprocess.DEVNULL))
            codec = f", compression.type={args.compression}" if args.compression else ""
            batch = DEFAULT_BATCH_SIZE if args.batch_size is None else args.batch_size
            label = "16 KiB" if batch == 16384 else \
                "1 MiB" if batch == 1 << 20 else f"{batch} B"
            results["append"] = line(f"append {label} batches (dd conv=fsync){codec}",
                                     mbps(size, t),
                                     mbps(size, t_ref), "MB/s",
                                     None if args.compression else 0.5)
            line("  the same against pyfuse3's floor", mbps(size, t), mbps(size, t_sink), "MB/s")
            print(f"#   (the floor: dd into bench/sinkfs.py, a pyfuse3 file system that only "
                  f"pwrites its writes: {mbps(size, t_sink):.0f} MB/s, "
                  f"{t_ref / t_sink:.2f}x the plain file)", flush=True)
            subprocess.run(["fusermount3", "-u", smnt], check=False)
            sink.wait(30)
            print(f"#   daemon peak RSS while appending: {d.hwm_kb() / 1024:.0f} MB", flush=True)
        else:
            subprocess.run(["dd", f"if={lines_path}", f"of={mnt}/bench/0/append",
                            "oflag=append", "conv=notrunc", "bs=1M"], check=True,
                           stderr=subprocess.DEVNULL)
        d.stop()
        if "ddpoint" not in args.skip:
            results["ddpoint"] = dd_point_reads(work, mnt, logs, "bench", n_lines)
        if "read" not in args.skip:
            msg = f"{mnt}/bench/0/messages"
            t_cold = t_disk = t_warm = t_triv = t_plain = float("inf")
            dropped = False
            nbytes = 0
            tmnt = os.path.join(work, "trivial")
            os.makedirs(tmnt)
            for _rep in range(args.repeat):  # each round measures both sides (drift hits both)
                # cold: a fresh mount (the kernel has no page of messages); the segment
                # files may sit in the OS page cache, as the trivial fs's bytes sit in memory
                d = Daemon(mnt, logs).start()
                t_cold = min(t_cold, timed(["cat", msg], stdout=subprocess.DEVNULL))
                nbytes = os.path.getsize(msg)
                t_warm = min(t_warm, timed(["cat", msg], stdout=subprocess.DEVNULL))
                d.stop()
                tp = subprocess.Popen([sys.executable, os.path.join(HERE, "trivialfs.py"), tmnt,
                                       str(nbytes), "1"])
                wait_mount(tmnt, tp)
                t_triv = min(t_triv, timed(["cat", f"{tmnt}/data"], stdout=subprocess.DEVNULL))
                subprocess.run(["fusermount3", "-u", tmnt], check=True)
                tp.wait(30)
                # cold disk too: the segments are read from the device
                dropped = drop_caches()
                d = Daemon(mnt, logs).start()
                t_disk = min(t_disk, timed(["cat", msg], stdout=subprocess.DEVNULL))
                d.stop()
            timed(["cat", lines_path], stdout=subprocess.DEVNULL)  # warm it
            for _rep in range(args.repeat):
                t_plain = min(t_plain, timed(["cat", lines_path], stdout=subprocess.DEVNULL))
            print(f"#   messages: {nbytes} bytes; best of {args.repeat}", flush=True)
            results["cold"] = line("read cold (cat messages, remount)", mbps(nbytes, t_cold),
                                   mbps(nbytes, t_triv), "MB/s", 0.7)
            if dropped:
                line("read cold disk (+ drop_caches)", mbps(nbytes, t_disk),
                     mbps(nbytes, t_triv), "MB/s")
            results["warm"] = line("read warm (second cat)", mbps(nbytes, t_warm),
                                   mbps(size, t_plain), "MB/s", 0.5)
        if "point" not in args.skip:
            small_logs = os.path.join(work, "small-logs")
            big_logs = os.path.join(work, "big-logs")
            build_log(small_logs, "p", 10_000)
            t0 = time.perf_counter()
            build_log(big_logs, "p", args.big_records)
            print(f"#   built a log of {args.big_records} records in "
                  f"{time.perf_counter() - t0:.1f}s", flush=True)
            # all three mounted at once and measured in alternating rounds, so that a
            # slower minute of this shared machine falls on both sides of each ratio
            rnd = random.Random(5)
            small_mnt, big_mnt = os.path.join(work, "mnt-small"), os.path.join(work, "mnt-big")
            tmnt = os.path.join(work, "trivial2")
            for m in (small_mnt, big_mnt, tmnt):
                os.makedirs(m)
            small_d = Daemon(small_mnt, small_logs).start()
            big_d = Daemon(big_mnt, big_logs).start()
            tp = subprocess.Popen([sys.executable, os.path.join(HERE, "trivialfs.py"), tmnt,
                                   "1", "10000"])
            wait_mount(tmnt, tp)
            small_names = [str(i) for i in rnd.sample(range(10_000), 3000)]
            big_names = [str(i) for i in rnd.sample(range(args.big_records), 3000)]
            t_small = t_big = 0.0
            for r in range(0, 3000, 250):  # 12 rounds of 250 first reads each
                t_small += len(small_names[r:r + 250]) / first_reads(
                    f"{small_mnt}/p/0/offset", small_names[r:r + 250])
                t_big += len(big_names[r:r + 250]) / first_reads(
                    f"{big_mnt}/p/0/offset", big_names[r:r + 250])
            small_first, big_first = 3000 / t_small, 3000 / t_big
            all_names = [str(i) for i in range(10_000)]
            rates_small, rates_triv = [], []
            for _ in range(6):  # 6 rounds of 0.5 s each side
                rates_small.append(point_reads(f"{small_mnt}/p/0/offset", all_names, 0.5))
                rates_triv.append(point_reads(f"{tmnt}/small", all_names, 0.5))
            small_rate = sum(rates_small) / len(rates_small)
            triv_rate = sum(rates_triv) / len(rates_triv)
            small_d.stop()
            big_d.stop()
            subprocess.run(["fusermount3", "-u", tmnt], check=True)
            tp.wait(30)
            results["point"] = line("point reads (open+read+close)", small_rate, triv_rate,
                                    "ops/s", 0.5)
            slow = small_first / big_first
            print(f"{'first reads, ' + str(args.big_records) + ' vs 10^4 records':<34} "
                  f"{big_first:10.0f} vs {small_first:.0f} ops/s: {slow:.2f}x slower per read "
                  f"(target <= 1.3x){'  ok' if slow <= 1.3 else '  ABOVE target'}", flush=True)
        if "memory" not in args.skip:
            many = os.path.join(work, "many-logs")
            d = Daemon(mnt, many).start()
            for i in range(args.partitions):
                os.mkdir(os.path.join(mnt, f"t{i}"))
                with open(os.path.join(mnt, f"t{i}", "0", "append"), "ab") as f:
                    f.write(b"hello %d\n" % i)
            for i in range(args.partitions):
                with open(os.path.join(mnt, f"t{i}", "0", "messages"), "rb") as f:
                    f.read()
            hwm = d.hwm_kb() / 1024
            d.stop()
            d = Daemon(mnt, many).start()
            reopened = d.rss_kb() / 1024
            d.stop()
            print(f"{'memory, ' + str(args.partitions) + ' partitions open':<34} peak RSS "
                  f"{hwm:.0f} MB, after a restart {reopened:.0f} MB (target < 200 MB)"
                  f"{'  ok' if max(hwm, reopened) < 200 else '  ABOVE target'}", flush=True)
        if "list" not in args.skip:
            list_offsets(work, args.list_records, args.repeat)
    finally:
        for p in (mnt,):
            if os.path.ismount(p):
                subprocess.run(["fusermount3", "-uz", p], check=False)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
