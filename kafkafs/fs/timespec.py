"""Timestamps as people type them in ``by-time/<T>``."""

from __future__ import annotations

from datetime import datetime, timezone


def parse_timestamp(text: str) -> int:
    """Epoch milliseconds from ``text``: an integer (epoch ms) or ISO 8601
    (``2026-11-22T10:00:00Z``, ``2026-11-22T10:00:00.250+01:00``, ``2026-11-22``); a time
    without a zone is UTC. Raises ValueError."""
    t = text.strip()
    if t.lstrip("-").isdigit():
        return int(t)
    if t.endswith(("Z", "z")):
        t = t[:-1] + "+00:00"
    dt = datetime.fromisoformat(t)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return int(dt.timestamp() * 1000)
