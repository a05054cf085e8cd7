"""The daemon's memory is bounded by configuration, not by history (issue 19): the rendered
text of every view read stays under ``kafkafs.cache.max.bytes``, however many partitions
are read."""

from __future__ import annotations

import os

import pytest
from conftest import fuse_available, sh

from kafkafs.log.log import now_ms

pytestmark = pytest.mark.skipif(not fuse_available(), reason="FUSE is not available")


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_reading_every_view_of_many_partitions_keeps_memory_bounded(manager_factory,
                                                                     mount_factory):
    """60 partitions of ~1 MiB each: ``cat`` of every ``messages`` and ``records.jsonl``
    (about 200 MB of text) leaves the daemon's RSS within the cache budget (16 MiB here)
    plus a margin of what it holds besides; before the budget each view kept up to 8 chunks
    of 256 KiB, and the views were never dropped: RSS grew by every view read."""
    m = manager_factory()
    for t in range(6):
        m.create_topic(f"t{t}", 10)
        for p in range(10):
            lg = m.get_log(f"t{t}", p)
            for start in range(0, 8000, 500):
                lg.append([(now_ms(), None, b"value-%d-%d-%s" % (p, n, b"y" * 100), ())
                           for n in range(start, start + 500)])
    log_dir = m.log_dirs[0]
    m.shutdown()
    mount = mount_factory(log_dirs=[log_dir],
                          extra_args=["--override", "kafkafs.cache.max.bytes=16777216"])
    pid = mount.proc.pid
    assert sh(f"cat {mount.path('t0', '0', 'messages')} > /dev/null").returncode == 0
    base = _rss_mb(pid)
    for view in ("messages", "records.jsonl"):
        r = sh(f"cat {mount.mnt}/t*/*/{view} | wc -l", timeout=300)
        assert r.stdout.strip() == b"480000", r.stderr
    grown = _rss_mb(pid) - base
    assert grown < 48, f"RSS grew by {grown:.0f} MB reading 120 views with a 16 MiB cache"
    # and the views still read right after their chunks were dropped
    with open(mount.path("t3", "7", "messages"), "rb") as f:
        first = f.readline()
    assert first == b"value-7-0-" + b"y" * 100 + b"\n"
    assert os.path.getsize(mount.path("t3", "7", "messages")) == \
        sum(len(b"value-7-%d-" % n) + 101 for n in range(8000))
