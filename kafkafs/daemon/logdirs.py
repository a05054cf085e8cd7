"""Checks of the log dirs and the listener settings before a daemon writes a byte
(docs/design.md §6.1); no FUSE here, so ``kafkafs serve`` runs where there is none."""

from __future__ import annotations

import errno
import os

from ..log.config import BrokerConfig
from ..log.errors import LogDirLockedError
from ..log.inspect import lock_holder
from ..log.manager import is_locked
from ..net.listeners import Listener, parse_listeners


def listeners_of(config: BrokerConfig, default: str | None = None) -> list[Listener]:
    """The listeners ``config`` names (``listeners``, ``listener.security.protocol.map``),
    else those of ``default``, else none. Raises InvalidConfigError."""
    text = config.listeners or default
    if not text:
        return []
    return parse_listeners(text, config.extra.get("listener.security.protocol.map", ""))


def check_log_dirs(config: BrokerConfig, read_only: bool, *, locks: bool = True) -> None:
    """:func:`check_log_dir` of every log dir and, with ``locks`` on a writable daemon, no
    log dir locked by another process. Raises OSError, LogDirLockedError."""
    for d in config.log_dirs:
        check_log_dir(d, read_only)
    if locks and not read_only:
        held = is_locked(config.log_dirs)
        if held is not None:
            who = lock_holder(held)
            raise LogDirLockedError(
                f"Failed to acquire lock on file .lock in {held}. A Kafka instance in another "
                "process or thread is using this directory"
                + (f": {who}." if who else " (a running kafkafs daemon or broker)."))


def check_log_dir(d: str, read_only: bool) -> None:
    """Refuse a log dir the LogManager would fail on part-way: some other file, a missing
    one on a read-only mount, one that cannot be created (its nearest existing ancestor is
    no directory this user may write). Raises OSError."""
    if os.path.lexists(d) and not os.path.isdir(d):
        raise NotADirectoryError(errno.ENOTDIR, "log dir is not a directory", d)
    if os.path.isdir(d):
        return
    if read_only:
        raise FileNotFoundError(errno.ENOENT, "log dir does not exist", d)
    parent = os.path.dirname(os.path.abspath(d))
    while not os.path.lexists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise NotADirectoryError(errno.ENOTDIR, "cannot create the log dir: not a directory",
                                 parent)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, "cannot create the log dir: permission denied",
                              parent)
