"""Which kafkafs daemon holds the log dir a ``kafkalog`` write goes to, and what its mount
shows.

A log dir whose ``.lock`` a running daemon holds is written only by that daemon
(docs/design.md §7: writers go through the daemon or refuse); the requests themselves
(``commit_staged``, the daemon's defaults) are :mod:`kafkafs.core.control`'s client side.
"""

from __future__ import annotations

import os
import time

from ..core.control import find_mount
from ..log.errors import LogDirLockedError
from ..log.manager import is_locked


def mount_holding(log_dir: str) -> str | None:
    """The mount point of a live kafkafs mount whose daemon serves ``log_dir`` (one of the
    log dirs in its root's ``user.kafkafs.log_dirs``), or None."""
    return find_mount([log_dir], exact=False)


def holder_mount(log_dir: str, timeout_s: float) -> str | None:
    """Who may write ``log_dir``: None when nobody holds its ``.lock`` (the caller may take
    it), else the mount point of the kafkafs daemon holding it. A holder that is not a
    kafkafs daemon with a mount (a Kafka broker, another writer briefly) is waited for up
    to ``timeout_s`` seconds, then refused. Never call it in a process holding the lock.
    Raises LogDirLockedError."""
    deadline = time.monotonic() + timeout_s
    while is_locked([log_dir]):
        mount = mount_holding(log_dir)
        if mount is not None:
            return mount
        if time.monotonic() >= deadline:
            raise LogDirLockedError(
                f"{log_dir} is held by another process (its .lock is taken) and no kafkafs "
                "mount serves it: a Kafka broker, or another writer that did not finish within "
                f"lockTimeoutMs={int(timeout_s * 1000)}. Nothing was written; stop the broker, "
                "or mount the log dir with kafkafs (writes then go through the daemon), and "
                "write again.")
        time.sleep(0.1)
    return None


def topic_counts(mount: str) -> dict[str, int]:
    """Every topic the daemon shows and its partition count (its partitions may lie in
    several log dirs)."""
    out = {}
    for topic in os.listdir(mount):
        parts = topic_partitions(mount, topic)
        if parts:
            out[topic] = max(parts) + 1
    return out


def topic_partitions(mount: str, topic: str) -> list[int]:
    """The partitions of ``topic`` as the daemon shows them (empty: no such topic)."""
    try:
        names = os.listdir(os.path.join(mount, topic))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(int(n) for n in names if n.isdigit())
