"""Where view marks outlive the daemon: ``$XDG_CACHE_HOME/kafkafs/views`` (default
``~/.cache/kafkafs/views``), one small JSON file per partition directory and view, outside
the log dirs (which stay exactly as a broker would leave them). A missing, stale or
unreadable file only means the first read scans the log again."""

from __future__ import annotations

import hashlib
import json
import logging
import os

from ..log.checkpoint import atomic_write

log = logging.getLogger(__name__)


def cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kafkafs", "views")


def _path(partition_dir: str, kind: str) -> str:
    digest = hashlib.sha256(os.path.realpath(partition_dir).encode()).hexdigest()[:32]
    return os.path.join(cache_dir(), f"{digest}-{kind}.json")


def load(partition_dir: str, kind: str) -> dict | None:
    """The state saved for this partition's view, or None."""
    try:
        with open(_path(partition_dir, kind), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def save(partition_dir: str, kind: str, state: dict) -> None:
    """Keep ``state`` for a later daemon; failures are logged, never raised."""
    try:
        os.makedirs(cache_dir(), exist_ok=True)
        atomic_write(_path(partition_dir, kind), json.dumps(state).encode())
    except OSError as exc:
        log.warning("cannot save the marks of %s: %s", partition_dir, exc)
