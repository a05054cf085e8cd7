"""How close to the trivial filesystem a faithful ``messages`` can get: the bounds behind
issue 2's cold-read figure.

Writes ``--mb`` of text lines through a kafkafs mount, then in each of ``--repeat``
rounds times ``cat`` of:

* kafkafs ``messages`` after a remount (cold, as bench_fs.py);
* ``trivialfs.py`` serving as many bytes from memory (the reference);
* ``trivialfs.py --crc-of SEGMENT``: the same, but each read first preads the same range of
  the segment file and computes its CRC-32C — the least any filesystem serving Kafka's
  records with their checksums verified must add, before parsing a record;
* ``trivialfs.py --crc-of SEGMENT --mmap``: that read through a mapping (no copy).

Prints the best time of each and its ratio to the reference. Run as root:
``python bench/bench_bounds.py [--mb 200] [--repeat 6]``.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_fs import ROOT, Daemon, make_lines, mbps, timed, wait_mount


def trivial(tmnt: str, nbytes: int, extra: list[str]) -> float:
    tp = subprocess.Popen([sys.executable, os.path.join(HERE, "trivialfs.py"), tmnt,
                           str(nbytes), "1", *extra], cwd=ROOT)
    try:
        wait_mount(tmnt, tp)
        return timed(["cat", f"{tmnt}/data"], stdout=subprocess.DEVNULL)
    finally:
        subprocess.run(["fusermount3", "-u", tmnt], check=False)
        tp.wait(30)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=6)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="kafkafs-bounds-")
    try:
        mnt, logs, tmnt = (os.path.join(work, n) for n in ("mnt", "logs", "trivial"))
        os.makedirs(mnt)
        os.makedirs(tmnt)
        lines = os.path.join(work, "lines.txt")
        make_lines(lines, args.mb * 1024 * 1024)
        d = Daemon(mnt, logs).start()
        os.mkdir(os.path.join(mnt, "bench"))
        subprocess.run(["dd", f"if={lines}", f"of={mnt}/bench/0/append", "oflag=append",
                        "conv=notrunc", "bs=1M"], check=True, stderr=subprocess.DEVNULL)
        msg = f"{mnt}/bench/0/messages"
        nbytes = os.path.getsize(msg)
        d.stop()
        segment = sorted(glob.glob(os.path.join(logs, "bench-0", "*.log")))[0]
        cases = {
            "kafkafs messages (cold)": None,
            "trivial fs (reference)": [],
            "trivial + pread + CRC-32C": ["--crc-of", segment],
            "trivial + mmap + CRC-32C": ["--crc-of", segment, "--mmap"],
        }
        best = {name: float("inf") for name in cases}
        for _ in range(args.repeat):  # every case in every round: drift hits them all
            for name, extra in cases.items():
                if extra is None:
                    d = Daemon(mnt, logs).start()
                    best[name] = min(best[name], timed(["cat", msg], stdout=subprocess.DEVNULL))
                    d.stop()
                else:
                    best[name] = min(best[name], trivial(tmnt, nbytes, extra))
        ref = best["trivial fs (reference)"]
        print(f"# {nbytes} bytes of messages; best of {args.repeat} rounds")
        for name, t in best.items():
            print(f"{name:<28} {t * 1000:7.0f} ms {mbps(nbytes, t):8.1f} MB/s  "
                  f"{ref / t:5.2f}x of the reference", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
