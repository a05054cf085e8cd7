#!/usr/bin/env python3
"""Kafka's wire protocol against the mount, in one run (issue 23): produce and fetch with
kcat against ``cat`` through the mount and a plain file, the daemon's CPU per MB fetched,
produce-to-consume latency with librdkafka, and 1,000 client connections beside busy
producers and consumers.

    python bench/bench_protocol.py [--records 10000000] [--latency-seconds 60] [--work DIR]

One daemon: ``kafkafs mount`` with ``listeners=PLAINTEXT://127.0.0.1:PORT`` over a fresh log
dir. Figures, each a ratio against a reference measured in the same run:

* produce: ``kcat -P`` of ``--records`` lines of 100 B (librdkafka's default batching) into
  topic ``p``, against ``cat`` of the same file into ``MOUNT/a/0/append`` (target >= 1.0x)
  and against ``cat`` of it into a plain file on the same file system (target >= 0.5x);
  records/s beside Kafka's single-producer headline (821,557 records/s of 100 B, 6 cores);
* fetch: ``kcat -C -e -o beginning`` of ``p`` to /dev/null against ``cat MOUNT/p/0/messages
  > /dev/null`` (target >= 1.0x), and the daemon's CPU seconds per MB for each (target
  <= 0.3x: the record bytes go by ``sendfile``);
* latency: a confluent-kafka producer (``linger.ms=0``) at 1,000 records/s for
  ``--latency-seconds`` while a consumer reads them: p50/p99/max of produce-to-consume
  (target p99 <= 5 ms), and meanwhile an ``open/append/close`` of one line through the mount
  every 100 ms (target: none over 50 ms);
* connections: 1,000 idle client connections (each past ApiVersions) plus 8 producers and 8
  consumers busy for 20 s: the daemon's peak RSS (target < 300 MB) and ``cat offset/N``
  through the mount meanwhile (target: every one under 50 ms);
* transactions: 1,000 transactions of 100 records from librdkafka's transactional producer
  against the same records from an idempotent producer flushed as often, and the latency
  of ``commit_transaction``.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import resource
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

from bench_fs import wait_mount  # noqa: E402

KCAT = shutil.which("kcat")
KAFKA_HEADLINE = 821_557  # records/s, one producer, 100 B records (Kafka's own benchmark)


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def timed(cmd, **kw) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, **kw)
    return time.perf_counter() - t


def timed_cpu(cmd, **kw) -> tuple[float, float]:
    """``(wall seconds, the command's own CPU seconds)``: how far the client itself is the
    bound (a client at 100% of a core cannot go faster whatever the daemon does)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = timed(cmd, **kw)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))]


class Daemon:
    def __init__(self, work: str):
        self.logs = os.path.join(work, "logs")
        self.mnt = os.path.join(work, "mnt")
        os.makedirs(self.mnt, exist_ok=True)
        self.log = os.path.join(work, "daemon.log")
        out = open(self.log, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kafkafs", "mount", self.mnt, "--log-dirs", self.logs,
             "--override", "listeners=PLAINTEXT://127.0.0.1:0"], stdout=out, stderr=out,
            cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
        wait_mount(self.mnt, self.proc)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = re.search(r"Listening for Kafka clients on PLAINTEXT://[^:]*:(\d+)",
                          open(self.log).read())
            if m:
                self.bootstrap = f"127.0.0.1:{m.group(1)}"
                return
            time.sleep(0.05)
        raise RuntimeError(open(self.log).read())

    def stop(self):
        subprocess.run([sys.executable, "-m", "kafkafs", "umount", self.mnt], cwd=ROOT,
                       check=False)
        self.proc.wait(120)


def bench_produce_fetch(d: Daemon, work: str, records: int) -> None:
    data = os.path.join(work, "lines.txt")
    line = b"x" * 99 + b"\n"
    with open(data, "wb") as f:
        chunk = line * 10000
        for _ in range(records // 10000):
            f.write(chunk)
        f.write(line * (records % 10000))
    size = os.path.getsize(data)
    os.mkdir(os.path.join(d.mnt, "p"))
    os.mkdir(os.path.join(d.mnt, "a"))
    with open(data, "rb") as f:
        c0 = cpu_seconds(d.proc.pid)
        t_kcat, kcat_p_cpu = timed_cpu([KCAT, "-b", d.bootstrap, "-P", "-t", "p"], stdin=f)
        daemon_p_cpu = cpu_seconds(d.proc.pid) - c0
    with open(data, "rb") as f, open(os.path.join(d.mnt, "a", "0", "append"), "ab") as out:
        t_cat = timed(["cat"], stdin=f, stdout=out)
    plain = os.path.join(work, "plain.txt")
    with open(data, "rb") as f, open(plain, "wb") as out:
        t_plain = timed(["cat"], stdin=f, stdout=out)
    os.unlink(plain)
    r = records / t_kcat
    print(f"produce  kcat -P {t_kcat:7.2f} s ({r:,.0f} records/s, {r / KAFKA_HEADLINE:.2f}x "
          f"Kafka's headline) | cat >> append {t_cat:6.2f} s: {t_cat / t_kcat:5.2f}x "
          f"(target >= 1.0) | plain file {t_plain:6.2f} s: {t_plain / t_kcat:5.2f}x "
          f"(target >= 0.5) | kcat's own CPU {kcat_p_cpu / t_kcat:.0%} of its run, the "
          f"daemon's {daemon_p_cpu / t_kcat:.0%}", flush=True)
    seg_bytes = sum(os.path.getsize(os.path.join(d.logs, "p-0", n))
                    for n in os.listdir(os.path.join(d.logs, "p-0")) if n.endswith(".log"))
    with open(os.devnull, "wb") as null:
        c0 = cpu_seconds(d.proc.pid)
        t_kc, kcat_c_cpu = timed_cpu([KCAT, "-b", d.bootstrap, "-C", "-t", "p", "-e", "-o",
                                      "beginning", "-q"], stdout=null)
        c1 = cpu_seconds(d.proc.pid)
        t_cm = timed(["cat", os.path.join(d.mnt, "p", "0", "messages")], stdout=null)
        c2 = cpu_seconds(d.proc.pid)
    cpu_kc, cpu_cm = (c1 - c0) / (seg_bytes / 1e6), (c2 - c1) / (size / 1e6)
    print(f"fetch    kcat -C {t_kc:7.2f} s ({records / t_kc:,.0f} records/s) | cat messages "
          f"{t_cm:6.2f} s: {t_cm / t_kc:5.2f}x (target >= 1.0) | daemon CPU {cpu_kc * 1000:.3f}"
          f" ms/MB vs {cpu_cm * 1000:.3f} ms/MB: {cpu_kc / cpu_cm if cpu_cm else 0:5.2f}x "
          f"(target <= 0.3) | kcat's own CPU {kcat_c_cpu / t_kc:.0%} of its run", flush=True)


def bench_latency(d: Daemon, seconds: float) -> None:
    import confluent_kafka as ck

    os.mkdir(os.path.join(d.mnt, "lat"))
    os.mkdir(os.path.join(d.mnt, "side"))
    c = ck.Consumer({"bootstrap.servers": d.bootstrap, "group.id": "lat",
                     "auto.offset.reset": "latest", "fetch.wait.max.ms": 100,
                     "fetch.min.bytes": 1, "enable.auto.commit": False})
    c.subscribe(["lat"])
    while not c.assignment():
        c.poll(0.1)
    time.sleep(1)
    lat: list[float] = []
    stop = threading.Event()

    def consume():
        while not stop.is_set():
            m = c.poll(0.05)
            if m is not None and m.error() is None:
                lat.append(time.perf_counter() - struct.unpack(">d", m.value())[0])

    appends: list[float] = []

    def append_side():
        path = os.path.join(d.mnt, "side", "0", "append")
        while not stop.is_set():
            t = time.perf_counter()
            with open(path, "ab") as f:
                f.write(b"beside the producer\n")
            appends.append(time.perf_counter() - t)
            time.sleep(0.1)

    threads = [threading.Thread(target=consume), threading.Thread(target=append_side)]
    for t in threads:
        t.start()
    p = ck.Producer({"bootstrap.servers": d.bootstrap, "linger.ms": 0, "acks": "all"})
    n = int(seconds * 1000)
    cpu0 = cpu_seconds(d.proc.pid)
    start = time.perf_counter()
    for i in range(n):
        due = start + i / 1000
        while time.perf_counter() < due:
            time.sleep(max(0.0, due - time.perf_counter()))
        p.produce("lat", struct.pack(">d", time.perf_counter()))
        p.poll(0)
    p.flush(30)
    busy = (cpu_seconds(d.proc.pid) - cpu0) / (time.perf_counter() - start)
    time.sleep(1)
    stop.set()
    for t in threads:
        t.join()
    c.close()
    ms = [x * 1000 for x in lat]
    print(f"latency  {len(ms)} of {n} records: p50 {pct(ms, .5):.2f} ms, p99 {pct(ms, .99):.2f}"
          f" ms (target <= 5), max {max(ms):.2f} ms | {len(appends)} appends through the "
          f"mount meanwhile: max {max(appends) * 1000:.1f} ms (target <= 50) | daemon CPU "
          f"{busy:.0%} of a core", flush=True)


def bench_connections(d: Daemon, seconds: float = 20) -> None:
    import confluent_kafka as ck

    host, port = d.bootstrap.split(":")
    rss0 = rss_mb(d.proc.pid)
    socks = []
    req = struct.pack(">hhi", 18, 0, 1) + struct.pack(">h", 1) + b"c"
    for _ in range(1000):
        s = socket.create_connection((host, int(port)))
        s.sendall(struct.pack(">i", len(req)) + req)
        socks.append(s)
    for s in socks:
        n = struct.unpack(">i", s.recv(4))[0]
        while n > 0:
            n -= len(s.recv(n))
    os.mkdir(os.path.join(d.mnt, "busy"))
    os.mkdir(os.path.join(d.mnt, "busy", "7"))  # 8 partitions
    stop = threading.Event()
    peak = [rss_mb(d.proc.pid)]

    def produce(i):
        p = ck.Producer({"bootstrap.servers": d.bootstrap, "linger.ms": 5})
        while not stop.is_set():
            for _ in range(200):
                p.produce("busy", b"y" * 100, partition=i)
            p.poll(0.01)
        p.flush(30)

    def consume(i):
        c = ck.Consumer({"bootstrap.servers": d.bootstrap, "group.id": f"busy{i}",
                         "auto.offset.reset": "earliest"})
        c.assign([ck.TopicPartition("busy", i, 0)])
        while not stop.is_set():
            c.poll(0.1)
        c.close()

    threads = [threading.Thread(target=produce, args=(i,)) for i in range(8)] + \
        [threading.Thread(target=consume, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    cats = []
    end = time.monotonic() + seconds
    time.sleep(2)
    while time.monotonic() < end:
        peak.append(rss_mb(d.proc.pid))
        part = random.randrange(8)
        offset = random.randrange(1000)  # (each partition holds far more within 2 s)
        t = time.perf_counter()
        try:
            with open(os.path.join(d.mnt, "busy", str(part), "offset", str(offset)), "rb") as f:
                f.read()
        except FileNotFoundError:
            continue
        cats.append(time.perf_counter() - t)
        time.sleep(0.05)
    stop.set()
    for t in threads:
        t.join()
    for s in socks:
        s.close()
    print(f"connect  1000 idle connections + 8 producers + 8 consumers for {seconds:.0f} s: "
          f"daemon RSS {rss0:.0f} MB before, peak {max(peak):.0f} MB (target < 300) | "
          f"{len(cats)} cat offset/N: p50 {pct(cats, .5) * 1000:.1f} ms, max "
          f"{max(cats) * 1000:.1f} ms (target < 50)", flush=True)


def bench_transactions(d: Daemon, transactions: int = 1000, per: int = 100) -> None:
    """librdkafka's transactional producer: ``transactions`` commits of ``per`` records of
    100 B each, against the same records from an idempotent producer flushed as often (the
    reference: what the commit protocol -- AddPartitionsToTxn, EndTxn, the markers --
    costs beside the records), and the latency of one commit."""
    import confluent_kafka as ck

    os.mkdir(os.path.join(d.mnt, "txb"))
    value = b"t" * 100
    idem = ck.Producer({"bootstrap.servers": d.bootstrap, "enable.idempotence": True,
                        "linger.ms": 0})
    t0 = time.perf_counter()
    for _ in range(transactions):
        for _ in range(per):
            idem.produce("txb", value)
        idem.flush(30)
    t_idem = time.perf_counter() - t0
    p = ck.Producer({"bootstrap.servers": d.bootstrap, "transactional.id": "bench-tx",
                     "linger.ms": 0})
    p.init_transactions(30)
    commits = []
    t0 = time.perf_counter()
    for _ in range(transactions):
        p.begin_transaction()
        for _ in range(per):
            p.produce("txb", value)
        t = time.perf_counter()
        p.commit_transaction(30)
        commits.append(time.perf_counter() - t)
    t_txn = time.perf_counter() - t0
    ms = [x * 1000 for x in commits]
    print(f"txn      {transactions} transactions of {per} records: {t_txn:6.2f} s "
          f"({transactions / t_txn:,.0f} commits/s, {transactions * per / t_txn:,.0f} records/s)"
          f" | the same records idempotent, flushed as often: {t_idem:6.2f} s: "
          f"{t_idem / t_txn:5.2f}x | commit_transaction p50 {pct(ms, .5):.2f} ms, "
          f"p99 {pct(ms, .99):.2f} ms", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=10_000_000)
    ap.add_argument("--latency-seconds", type=float, default=60)
    ap.add_argument("--work")
    ap.add_argument("--only", choices=["produce", "latency", "connections", "transactions"])
    args = ap.parse_args()
    if KCAT is None:
        print("kcat is not installed (apt-get install kcat)", file=sys.stderr)
        return 2
    work = args.work or tempfile.mkdtemp(prefix="bench-protocol-")
    d = Daemon(work)
    try:
        if args.only in (None, "produce"):
            bench_produce_fetch(d, work, args.records)
        if args.only in (None, "latency"):
            bench_latency(d, args.latency_seconds)
        if args.only in (None, "connections"):
            bench_connections(d)
        if args.only in (None, "transactions"):
            bench_transactions(d)
    finally:
        d.stop()
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
