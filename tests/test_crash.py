"""kill -9 the daemon while writers append with fsync after each line, many times over;
remount; every acknowledged record is present exactly once, in order, and the indexes pass
the sanity check."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from conftest import Mount, fuse_available, kafkafs

WRITER = r"""
import os, sys
path, start = sys.argv[1], int(sys.argv[2])
ack = open(sys.argv[3], "a", buffering=1)
fd = os.open(path, os.O_WRONLY | os.O_APPEND)
i = start
try:
    while True:
        line = b"rec-%08d\n" % i
        os.write(fd, line)
        os.fsync(fd)
        ack.write("%d\n" % i)   # acknowledged: durable from here on
        i += 1
except OSError:
    pass
"""


@pytest.mark.slow
@pytest.mark.skipif(not fuse_available(), reason="FUSE is not available")
def test_kill9_during_fsynced_appends_loses_nothing_acknowledged(tmp_path):
    rounds = int(os.environ.get("KAFKAFS_CRASH_ROUNDS", "15"))
    acks = tmp_path / "acks"
    next_i = 0
    m = Mount(tmp_path, extra_args=["--override", "log.segment.bytes=20000",
                                    "--override", "log.index.interval.bytes=256"])
    m.start()
    os.mkdir(m.path("c"))
    for rnd in range(rounds):
        if rnd:
            m.start()
        writer = subprocess.Popen([sys.executable, "-c", WRITER, m.path("c", "0", "append"),
                                   str(next_i), str(acks)])
        time.sleep(0.4 + 0.1 * (rnd % 3))
        m.kill9()
        writer.wait(20)
        acked = [int(x) for x in acks.read_text().split()]
        # the writer may have written one line past its last acknowledgement (or its first
        # line, if it acknowledged none) that may or may not be there: start past it
        next_i = max(next_i, (acked[-1] + 1) if acked else 0) + 1
    acked = [int(x) for x in acks.read_text().split()]
    assert len(acked) > 50
    m.start()
    values = open(m.path("c", "0", "messages"), "rb").read().split(b"\n")[:-1]
    m.umount()
    got = [int(v[4:]) for v in values]
    # in order, no duplicates, every acknowledged record present
    dups = sorted({g for g in got if got.count(g) > 1}) if len(got) != len(set(got)) else []
    assert not dups, f"duplicated records: {dups[:10]}"
    assert got == sorted(got)
    missing = set(acked) - set(got)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"
    out = kafkafs("dump", "--files", ",".join(
        os.path.join(m.log_dirs[0], "c-0", n) for n in sorted(os.listdir(
            os.path.join(m.log_dirs[0], "c-0"))) if n.endswith((".index", ".timeindex"))),
        "--index-sanity-check").stdout.decode()
    assert "corrupt" not in out.lower(), out
