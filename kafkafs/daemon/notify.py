"""systemd readiness notification (``sd_notify``) through the sdnotify package.

Does nothing when ``NOTIFY_SOCKET`` is unset (not started by systemd).
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)


def _send(message: str) -> None:
    if not os.environ.get("NOTIFY_SOCKET"):
        return
    try:
        import sdnotify

        sdnotify.SystemdNotifier().notify(message)
    except Exception as exc:  # noqa: BLE001 - readiness must never take the daemon down
        log.warning("sd_notify failed: %s", exc)


def ready(status: str = "") -> None:
    """Tell systemd the mount is up (``READY=1``), with an optional status line."""
    _send("READY=1" + (f"\nSTATUS={status}" if status else "") + f"\nMAINPID={os.getpid()}")


def stopping() -> None:
    """Tell systemd shutdown has begun (``STOPPING=1``)."""
    _send("STOPPING=1")
