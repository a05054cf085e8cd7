"""``kafkafs dump --deep-iteration --print-data-log`` of a large segment runs in bounded
memory: it streams the file through a window (``dump.READ_CHUNK``) and prints records as it
decodes them, so its peak RSS does not grow with the segment.

A 1 GiB segment (Kafka's default ``segment.bytes``) is written with kafkafs's encoder: 64
distinct batches of about 1 MiB (records of 100-200 bytes, keys, some headers, some lz4),
repeated with consecutive base offsets (bytes 0-7 sit outside the CRC) until the file
reaches the size (writing it takes a few seconds, so the full size is used; the test is
marked slow for the ~45 s the dump takes). ``.venv/bin/kafkafs dump`` runs as a subprocess
with stdout to /dev/null, and its own peak RSS is taken from ``wait4`` in a small wrapper
process (see :data:`PEAK_RSS` for why not straight from pytest). It must stay under 300 MB,
and not exceed the peak of a dump of a 32 MiB segment of the same batches by more than
20 MB (flat, not proportional to the segment).

``KAFKAFS_DUMP_RSS_BYTES`` changes the large size (for a quick local run).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time

import pytest

from kafkafs.record import compression as codecs
from kafkafs.record.batch import encode_batch, set_base_offset

LARGE = int(os.environ.get("KAFKAFS_DUMP_RSS_BYTES", str(1 << 30)))
SMALL = 32 << 20
LIMIT_MB = 300
FLAT_MB = 20
TS = 1_700_000_000_000
KAFKAFS = os.path.join(os.path.dirname(sys.executable), "kafkafs")


def distinct_batches(n: int = 64, batch_bytes: int = 1 << 20, seed: int = 7):
    """``n`` encoded batches of about ``batch_bytes`` each and their record counts."""
    rng = random.Random(seed)
    words = [b"alpha", b"bravo", b"charlie", b"delta", b"echo", b"foxtrot", b"golf"]
    text = b" ".join(rng.choice(words) for _ in range(1 << 16))
    out = []
    for b in range(n):
        recs, size = [], 0
        while size < batch_bytes:
            i = len(recs)
            start = rng.randrange(len(text) - 200)
            value = text[start:start + rng.randint(100, 200)]
            headers = [("trace", b"%d" % i)] if i % 10 == 0 else []
            recs.append((TS + i, b"key-%06d" % rng.randrange(10**6), value, headers))
            size += len(value) + 20
        codec = codecs.LZ4 if b % 4 == 3 else codecs.NONE
        out.append((bytearray(encode_batch(recs, compression=codec)), len(recs)))
    return out


def write_segment(path: str, size: int, batches) -> int:
    """Cycle ``batches`` at consecutive offsets until ``path`` holds ``size`` bytes;
    returns the number of records."""
    offset = 0
    written = 0
    with open(path, "wb", buffering=8 << 20) as f:
        while written < size:
            for batch, count in batches:
                set_base_offset(batch, offset)
                f.write(batch)
                offset += count
                written += len(batch)
                if written >= size:
                    break
    return offset


# Runs ARGV with stdout to /dev/null in a child of this small process and prints the child's
# peak RSS (KiB) and exit status. The extra process matters: Linux charges a process, at
# exec, the peak RSS of the address space it replaces (exec_mmap -> setmax_mm_hiwater_rss),
# so a child spawned (vfork/fork + exec) straight from pytest reports pytest's own RSS
# (~100 MB here) as its ru_maxrss. Forked from this wrapper it carries at most the
# wrapper's few MB. (/usr/bin/time does the same, but is not installed everywhere.)
PEAK_RSS = """
import os, sys
pid = os.fork()
if pid == 0:
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.execv(sys.argv[1], sys.argv[1:])
_pid, status, usage = os.wait4(pid, 0)
print(usage.ru_maxrss, os.waitstatus_to_exitcode(status))
"""


def dump_peak_rss_mb(path: str) -> tuple[float, float]:
    """(peak RSS in MB, wall seconds) of ``kafkafs dump --deep-iteration --print-data-log``
    of ``path``, stdout to /dev/null."""
    args = [KAFKAFS, "dump", "--files", path, "--deep-iteration", "--print-data-log"]
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", PEAK_RSS, *args], capture_output=True, check=True,
                       timeout=850)
    elapsed = time.monotonic() - t0
    peak_kib, status = map(int, r.stdout.split())
    assert status == 0, r.stderr.decode(errors="replace")
    return peak_kib / 1024, elapsed


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_dump_of_a_large_segment_stays_under_300_mb(tmp_path):
    batches = distinct_batches()
    small = tmp_path / f"{0:020d}.log"
    big_dir = tmp_path / "big"
    big_dir.mkdir()
    big = big_dir / f"{0:020d}.log"
    try:
        write_segment(str(small), SMALL, batches)
        t0 = time.monotonic()
        n = write_segment(str(big), LARGE, batches)
        gen_s = time.monotonic() - t0
        small_mb, _s = dump_peak_rss_mb(str(small))
        big_mb, dump_s = dump_peak_rss_mb(str(big))
        print(f"\n{os.path.getsize(big) / 2**20:.0f} MiB segment, {n} records: written in "
              f"{gen_s:.1f} s, dumped in {dump_s:.1f} s; peak RSS {big_mb:.1f} MB "
              f"(a {SMALL >> 20} MiB segment: {small_mb:.1f} MB)")
        assert big_mb < LIMIT_MB
        assert big_mb - small_mb < FLAT_MB, "dump memory grows with the segment"
    finally:
        for p in (small, big):
            if p.exists():
                p.unlink()
