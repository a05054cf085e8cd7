"""glibc malloc tuning for the daemon's read path.

A view chunk is about 1 MiB rendered from about 1 MiB read: with glibc's defaults every such
buffer is a fresh ``mmap`` (or heap top released with ``brk`` right after) whose pages the
kernel must fault in and zero again — measured here at ~300 page faults and ~1.1 ms per
chunk, two thirds of the cost of rendering it. Keeping buffers up to ``MMAP_THRESHOLD`` on
the heap and not trimming it below ``TRIM_THRESHOLD`` reuses the same pages (render
throughput 0.6 → 1.6 GB/s). The cost is that up to ``TRIM_THRESHOLD`` bytes freed stay
resident. Same knobs as ``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_`` (mallopt(3)).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 1024 * 1024  # bytes; glibc's own ceiling for its dynamic threshold
TRIM_THRESHOLD = 64 * 1024 * 1024  # bytes of free heap kept before returning it


def tune() -> bool:
    """Apply the thresholds with ``mallopt``; returns whether it took (False off glibc)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    ok = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and \
        bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    if not ok:
        log.debug("mallopt refused the read-path thresholds")
    return ok
