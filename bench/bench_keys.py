"""The key view (issue 11 item 4), each figure against a reference measured in the same run:

* point reads: open+read+close of ``key/<k>`` for distinct random keys of a topic of
  ``--keys`` live keys against the same loop over distinct random ``offset/N`` of the
  same topic (every name read once, so each read pays a lookup, as ``cat`` of a name not
  in the kernel's cache does), in alternating rounds; target >= 0.5x;
* memory: the daemon's RSS (VmRSS, and the peak VmHWM) with the key map of ``--keys`` live
  keys built, after ``ls -f key`` of every key, and after a remount that loads the saved
  map; target < 300 MB;
* the key map: time to build it by one scan (first use), to load it after a remount, and
  ``ls -f key | wc -l`` of every key;
* append with the key map on: ``dd bs=1M`` of ``key<TAB>value`` lines into ``append``
  (``-o parse.key=true``) with the key map of the partition in use (kept up to date by
  the daemon while the append runs) against the same ``dd`` on a mount where no key map
  exists; target >= 0.9x.

The topic is written with the log engine directly: ``--keys`` records of distinct keys
(``key-0000000``...) and ``--value-bytes`` values, in batches of 100 records.
Run as root (FUSE): ``python bench/bench_keys.py [--keys 1000000] [--rounds 6]``.
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
sys.path.insert(0, HERE)

from bench_fs import ROOT, Daemon, first_reads, line, mbps, timed


def build_keyed_log(logs: str, topic: str, n: int, value_bytes: int, batch: int = 100):
    """``n`` records with distinct keys ``key-%07d`` (compacted topic), batches of
    ``batch``."""
    sys.path.insert(0, ROOT)
    from kafkafs.log.config import BrokerConfig
    from kafkafs.log.manager import LogManager

    m = LogManager(BrokerConfig().with_log_dirs([logs]))
    m.startup()
    lg = m.create_topic(topic, 1, {"cleanup.policy": "compact"})[0]
    value = b"v" * value_bytes
    ts = int(time.time() * 1000)
    for start in range(0, n, batch):
        lg.append([(ts, b"key-%07d" % i, value, ())
                   for i in range(start, min(n, start + batch))])
    m.shutdown()


def rss_mb(d: Daemon) -> tuple[float, float]:
    return d.rss_kb() / 1024, d.hwm_kb() / 1024


def keyed_lines(path: str, mb: int, keys: int, seed: int = 5) -> int:
    rnd = random.Random(seed)
    total = 0
    with open(path, "wb") as f:
        while total < mb * 1024 * 1024:
            chunk = b"".join(b"key-%07d\t%s\n" % (rnd.randrange(keys), b"x" * rnd.randint(80, 180))
                             for _ in range(10000))
            f.write(chunk)
            total += len(chunk)
    return total


def append_rate(work: str, lines: str, nbytes: int, use_keys: bool) -> tuple[float, float]:
    """MB/s of ``dd`` of keyed lines into a fresh topic's append (parse.key), with or
    without the partition's key map in use; and the seconds the first ``ls key`` after
    it took (the map reading what was appended: the daemon waits for a pause)."""
    logs = os.path.join(work, f"alogs-{use_keys}")
    mnt = os.path.join(work, f"amnt-{use_keys}")
    shutil.rmtree(logs, ignore_errors=True)
    os.makedirs(mnt, exist_ok=True)
    d = Daemon(mnt, logs, ["-o", "parse.key=true"]).start()
    try:
        os.mkdir(os.path.join(mnt, "a"))
        if use_keys:
            os.listdir(os.path.join(mnt, "a", "0", "key"))  # the map exists from now on
        secs = timed(["dd", f"if={lines}", f"of={mnt}/a/0/append", "oflag=append",
                      "conv=notrunc,fsync", "bs=1M"], stderr=subprocess.DEVNULL)
        t = time.perf_counter()
        if use_keys:  # the map catches up with what was appended
            os.listdir(os.path.join(mnt, "a", "0", "key"))
        return mbps(nbytes, secs), time.perf_counter() - t
    finally:
        d.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--reads", type=int, default=500, help="reads per round and side")
    ap.add_argument("--append-mb", type=int, default=100)
    ap.add_argument("--skip", action="append", default=[], choices=["append"])
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="kafkafs-keys-")
    try:
        logs, mnt = os.path.join(work, "logs"), os.path.join(work, "mnt")
        os.makedirs(mnt)
        t = time.perf_counter()
        build_keyed_log(logs, "kv", args.keys, args.value_bytes)
        print(f"# wrote {args.keys} keyed records in {time.perf_counter() - t:.1f} s", flush=True)

        d = Daemon(mnt, logs).start()
        print(f"# daemon RSS after mount: {rss_mb(d)[0]:.0f} MB", flush=True)
        keydir, offdir = f"{mnt}/kv/key", f"{mnt}/kv/0/offset"
        t = time.perf_counter()
        with open(f"{keydir}/key-0000000", "rb") as f:
            f.read()
        print(f"# key map built by one scan (first cat): {time.perf_counter() - t:.1f} s; "
              f"daemon RSS {rss_mb(d)[0]:.0f} MB, peak {rss_mb(d)[1]:.0f} MB", flush=True)

        rnd = random.Random(7)
        picks = rnd.sample(range(args.keys), 2 * args.rounds * args.reads)
        key_names = [f"key-{i:07d}" for i in picks[::2]]
        off_names = [str(i) for i in picks[1::2]]
        ours = ref = 0.0
        for r in range(args.rounds):  # alternating rounds: drift hits both sides
            sl = slice(r * args.reads, (r + 1) * args.reads)
            ours = max(ours, first_reads(keydir, key_names[sl]))
            ref = max(ref, first_reads(offdir, off_names[sl]))
        line("cat key/k (random, first reads)", ours, ref, "ops/s", 0.5)
        rss, hwm = rss_mb(d)
        print(f"memory, {args.keys} live keys        RSS {rss:.0f} MB, peak {hwm:.0f} MB "
              f"(target < 300 MB)  {'ok' if hwm < 300 else 'ABOVE target'}", flush=True)

        t = time.perf_counter()
        out = subprocess.run(f"ls -f {keydir} | wc -l", shell=True, capture_output=True,
                             check=True).stdout
        secs = time.perf_counter() - t
        print(f"ls -f key | wc -l: {int(out)} names in {secs:.1f} s "
              f"({int(out) / secs:.0f} names/s)", flush=True)
        rss, hwm = rss_mb(d)
        print(f"# after ls: RSS {rss:.0f} MB, peak {hwm:.0f} MB", flush=True)
        d.stop()
        saved = os.path.getsize(os.path.join(logs, "kv-0", "kafkafs-keymap"))
        print(f"# saved key map: {saved / 1e6:.1f} MB", flush=True)

        d = Daemon(mnt, logs).start()
        t = time.perf_counter()
        with open(f"{keydir}/key-0000001", "rb") as f:
            f.read()
        rss, hwm = rss_mb(d)
        print(f"key map loaded after a remount: first cat {time.perf_counter() - t:.2f} s; "
              f"RSS {rss:.0f} MB, peak {hwm:.0f} MB", flush=True)
        d.stop()

        if "append" not in args.skip:
            lines = os.path.join(work, "keyed.txt")
            nbytes = keyed_lines(lines, args.append_mb, args.keys)
            with_map = without = 0.0
            lag = []
            for _ in range(3):
                without = max(without, append_rate(work, lines, nbytes, False)[0])
                rate, secs = append_rate(work, lines, nbytes, True)
                with_map = max(with_map, rate)
                lag.append(secs)
            line("append keyed lines, key map on", with_map, without, "MB/s", 0.9)
            print(f"# then ls key (the map reads the {args.append_mb} MB appended): "
                  f"{min(lag):.1f} s", flush=True)
    finally:
        for m in os.listdir(work):
            p = os.path.join(work, m)
            if os.path.ismount(p):
                subprocess.run(["fusermount3", "-uz", p], check=False)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
