"""kill -9 the daemon while writers append with fsync after each line, many times over;
remount; every acknowledged record is present exactly once, in each writer's order, and the
indexes pass the sanity check. Three writers share one partition (their lines interleave in
the log) and a fourth has a partition of its own."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from conftest import Mount, fuse_available, kafkafs

WRITER = r"""
import os, sys
path, start, name = sys.argv[1], int(sys.argv[2]), sys.argv[4].encode()
ack = open(sys.argv[3], "a", buffering=1)
fd = os.open(path, os.O_WRONLY | os.O_APPEND)
i = start
try:
    while True:
        line = b"%s-%08d\n" % (name, i)
        os.write(fd, line)
        os.fsync(fd)
        ack.write("%d\n" % i)   # acknowledged: durable from here on
        i += 1
except OSError:
    pass
"""


WRITERS = {"w0": "0", "w1": "0", "w2": "0", "solo": "1"}  # writer -> partition


@pytest.mark.slow
@pytest.mark.skipif(not fuse_available(), reason="FUSE is not available")
def test_kill9_during_fsynced_appends_loses_nothing_acknowledged(tmp_path):
    rounds = int(os.environ.get("KAFKAFS_CRASH_ROUNDS", "15"))
    acks = {w: tmp_path / f"acks-{w}" for w in WRITERS}
    next_i = dict.fromkeys(WRITERS, 0)
    m = Mount(tmp_path, extra_args=["--override", "log.segment.bytes=20000",
                                    "--override", "log.index.interval.bytes=256"])
    m.start()
    os.mkdir(m.path("c"))
    os.mkdir(m.path("c", "1"))
    for rnd in range(rounds):
        if rnd:
            m.start()
        writers = [subprocess.Popen([sys.executable, "-c", WRITER, m.path("c", p, "append"),
                                     str(next_i[w]), str(acks[w]), w])
                   for w, p in WRITERS.items()]
        time.sleep(0.4 + 0.1 * (rnd % 3))
        m.kill9()
        for w in writers:
            w.wait(20)
        for w in WRITERS:
            acked = [int(x) for x in acks[w].read_text().split()] if acks[w].exists() else []
            # the writer may have written one line past its last acknowledgement (or its
            # first line, if it acknowledged none) that may or may not be there: start past it
            next_i[w] = max(next_i[w], (acked[-1] + 1) if acked else 0) + 1
    m.start()
    shown = {p: open(m.path("c", p, "messages"), "rb").read().split(b"\n")[:-1]
             for p in ("0", "1")}
    m.umount()
    for w, p in WRITERS.items():
        acked = [int(x) for x in acks[w].read_text().split()]
        assert len(acked) > 20, w
        prefix = w.encode() + b"-"
        got = [int(v[len(prefix):]) for v in shown[p] if v.startswith(prefix)]
        # in order, no duplicates, every acknowledged record present
        dups = sorted({g for g in got if got.count(g) > 1}) if len(got) != len(set(got)) else []
        assert not dups, f"{w}: duplicated records: {dups[:10]}"
        assert got == sorted(got), w
        missing = set(acked) - set(got)
        assert not missing, f"{w}: {len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"
    assert all(v.split(b"-")[0] in (b"w0", b"w1", b"w2") for v in shown["0"])
    assert all(v.startswith(b"solo-") for v in shown["1"])
    for p in ("0", "1"):
        pdir = os.path.join(m.log_dirs[0], f"c-{p}")
        files = [os.path.join(pdir, n) for n in sorted(os.listdir(pdir))
                 if n.endswith((".index", ".timeindex"))]
        out = kafkafs("dump", "--files", ",".join(files), "--index-sanity-check").stdout.decode()
        assert "corrupt" not in out.lower(), out
        # each one passes, or is the active segment's, still empty
        assert out.count("passed sanity check.") + out.count(" is empty.") == len(files), out
