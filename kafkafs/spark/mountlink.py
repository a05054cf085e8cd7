"""Talking to the kafkafs daemon that holds a log dir, through its mount.

A log dir whose ``.lock`` a running daemon holds is written only by that daemon (docs/design.md §7:
writers go through the daemon or refuse). The daemon's mount answers requests made as
extended attributes (:mod:`kafkafs.fs.operations`): its root tells the log dirs it serves
(``user.kafkafs.log_dirs``), its ``num.partitions`` and topic config defaults; setting
``user.kafkafs.commit_staged`` on the root has it commit a whole write -- new and
replaced topics, appends to existing partitions -- all or nothing (:func:`commit_staged`,
what the ``kafkalog`` commit uses). Still served, one step at a time and outside any commit
record: ``user.kafkafs.adopt`` on the root (a new topic made of staged partition dirs,
:func:`adopt`) and ``user.kafkafs.append_staged`` on ``<topic>/<p>`` (a staged run
appended). Each request returns when the daemon is done.
"""

from __future__ import annotations

import errno
import json
import os
import time

from ..log import bulk_commit, faults
from ..log.config import LogConfig, parse_properties
from ..log.errors import LogDirLockedError
from ..log.manager import is_locked
from ..mounttable import (
    ADOPT_XATTR,
    APPEND_STAGED_XATTR,
    COMMIT_STAGED_XATTR,
    find_mount,
    served_log_dirs,
)


class DaemonRefusedError(RuntimeError):
    """The daemon behind a mount refused a request; the message says why, as far as an
    errno tells, and points at the daemon's log."""


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


def daemon_defaults(mount: str) -> tuple[int, LogConfig] | None:
    """``(num.partitions, topic config defaults)`` of the daemon mounted at ``mount``, or
    None when it does not tell (an older daemon)."""
    try:
        n = int(os.getxattr(mount, "user.kafkafs.num_partitions"))
        props = parse_properties(os.getxattr(mount, "user.kafkafs.topic_defaults").decode())
    except (OSError, ValueError):
        return None
    return n, LogConfig().with_overrides(props)


def topic_counts(mount: str) -> dict[str, int]:
    """Every topic the daemon shows and its partition count (its partitions may lie in
    several log dirs)."""
    out = {}
    for topic in os.listdir(mount):
        parts = topic_partitions(mount, topic)
        if parts:
            out[topic] = max(parts) + 1
    return out


def daemon_log_dir(mount: str, log_dir: str) -> str:
    """``log_dir`` as the daemon mounted at ``mount`` spells it (the same directory, maybe
    named through a link)."""
    try:
        dirs = served_log_dirs(mount)
    except OSError:
        return log_dir
    want = os.path.realpath(log_dir)
    return next((d for d in dirs if os.path.realpath(d) == want), log_dir)


def topic_partitions(mount: str, topic: str) -> list[int]:
    """The partitions of ``topic`` as the daemon shows them (empty: no such topic)."""
    try:
        names = os.listdir(os.path.join(mount, topic))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(int(n) for n in names if n.isdigit())


_REASONS = {
    errno.EEXIST: "the topic exists already",
    errno.EINVAL: "the request or a staged batch is invalid",
    errno.ENOENT: "a staged dir or the partition is not there",
    errno.EMSGSIZE: "a batch is larger than the topic's max.message.bytes",
    errno.EIO: "damaged staged data, or an I/O error",
    errno.EROFS: "the mount is read-only",
    errno.EACCES: "the daemon does not take this request (an older kafkafs?)",
    errno.ENOSPC: "no space left on the log dir's device",
}


def _request(path: str, name: str, value: bytes, what: str, mount: str) -> None:
    try:
        os.setxattr(path, name, value)
    except OSError as exc:
        reason = _REASONS.get(exc.errno, exc.strerror)
        raise DaemonRefusedError(
            f"the kafkafs daemon mounted at {mount} refused to {what}: {reason} "
            f"({errno.errorcode.get(exc.errno, exc.errno)}; its log tells more)") from None


def adopt(mount: str, log_dir: str, topic: str, stage_id: str, partitions: int,
          overrides: dict[str, str], replace: bool) -> None:
    """Have the daemon take the staged dirs ``<topic>-<p>.<stage_id>-delete`` (p in
    ``range(partitions)``, in ``log_dir``) as topic ``topic``: asked on the mount's root for
    a new topic, on the topic's dir to replace its data (``replace``). One topic, outside
    any commit record: the ``kafkalog`` commit asks :func:`commit_staged` instead. Raises
    DaemonRefusedError."""
    req = {"log_dir": daemon_log_dir(mount, log_dir), "topic": topic, "stage": stage_id,
           "partitions": partitions, "config": overrides}
    _request(os.path.join(mount, topic) if replace else mount, ADOPT_XATTR,
             json.dumps(req).encode(), f"{'replace' if replace else 'create'} topic {topic}",
             mount)


def append_staged(mount: str, topic: str, partition: int, stage_dir: str) -> None:
    """Have the daemon append the staged run ``stage_dir`` (a name in the partition's log
    dir) to ``topic``-``partition``. Raises DaemonRefusedError."""
    _request(os.path.join(mount, topic, str(partition)), APPEND_STAGED_XATTR,
             stage_dir.encode(), f"append to {topic}-{partition}", mount)


def commit_staged(mount: str, log_dir: str, job_id: str,
                  runs: dict[tuple[str, int], list[str]],
                  adoptions=()) -> None:
    """Have the daemon mounted at ``mount`` publish a whole job as one commit
    (:meth:`LogManager.commit_job <kafkafs.log.manager.LogManager.commit_job>`): create or
    replace the topics ``adoptions`` (:class:`~kafkafs.log.bulk_commit.TopicAdoption`: the
    topic, its staged dir per partition, its overrides, whether it replaces an existing
    topic) and append the staged runs ``runs`` (``(topic, partition) -> [staged dir names
    in log_dir]``, in order) to existing partitions: one request, whatever the number of
    topics and partitions. They are named in a request file in ``log_dir``
    (:func:`~kafkafs.log.bulk_commit.write_request`, removed afterwards); the xattr's value
    is ``{"log_dir": ..., "request": name}``. Raises DaemonRefusedError (EEXIST: a topic to
    create exists), OSError (the request file cannot be written)."""
    adoptions = list(adoptions)
    name = bulk_commit.write_request(log_dir, job_id, runs, adoptions)
    faults.point("commit-request-written")
    try:
        req = {"log_dir": daemon_log_dir(mount, log_dir), "request": name}
        what = f"commit {len(runs)} partition(s)"
        if adoptions:
            what += f" and {len(adoptions)} new or replaced topic(s)"
        _request(mount, COMMIT_STAGED_XATTR, json.dumps(req).encode(),
                 f"{what} of job {job_id}", mount)
    finally:
        try:
            bulk_commit.remove_request(log_dir, job_id)
        except OSError:
            pass
