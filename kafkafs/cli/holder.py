"""Who holds a log dir a writer needs, and how to do the job anyway (issue 18 §2).

A writer (``produce``, ``topics --create/--delete/--alter``, ``compact``) takes the log
dirs' lock and is refused while another process holds one. The refusal says who: the
kafkafs daemon mounted at MOUNT (found by the log dirs it serves,
:func:`kafkafs.core.control.find_mount`), then with the command that does the job through
that mount (``mkdir MOUNT/<topic>``, ``>> MOUNT/<topic>/<p>/append``, ...); another kafkafs
process that serves no mount here; or a process that is no kafkafs at all (a Kafka broker:
then the broker's own tool does the job).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..core.control import daemon_pid, find_mount
from ..log.inspect import describe_pid, lock_holder_pid
from ..log.manager import is_locked


@dataclass
class Job:
    """What a refused writer wanted: ``what`` in words ("create the topic"), ``through``
    MOUNT -> the shell command that does it through a daemon's mount, ``kafka_tool`` the
    broker's tool that does it beside a broker."""

    what: str
    through: Callable[[str], str]
    kafka_tool: str


@dataclass
class Holder:
    """Who holds ``log_dir``'s lock: the ``mount`` of the kafkafs daemon serving it (None:
    none found), the holder's ``pid`` and ``process`` (``"pid N (command line)"``) when
    known, and whether that process is a kafkafs command (``kafkafs``)."""

    log_dir: str
    mount: str | None = None
    pid: int | None = None
    process: str | None = None
    kafkafs: bool = False


def find_holder(log_dirs: Iterable[str]) -> Holder | None:
    """The holder of the first of ``log_dirs`` another process holds, None when none is
    held (any more). Never call it while this process holds one of the locks."""
    held = is_locked(log_dirs)
    if held is None:
        return None
    holder = Holder(held, mount=find_mount([held], exact=False))
    if holder.mount is not None:
        try:
            holder.pid = daemon_pid(holder.mount)
        except (OSError, ValueError):
            pass
    if holder.pid is None:
        pid = lock_holder_pid(held)
        holder.pid = pid if pid is not None and pid > 0 else None  # (another pid namespace)
    if holder.pid is not None:
        holder.process = describe_pid(holder.pid)
        holder.kafkafs = is_kafkafs_process(holder.pid)
    return holder


def is_kafkafs_process(pid: int) -> bool:
    """Whether process ``pid`` runs a kafkafs command (``kafkafs ...``,
    ``python -m kafkafs ...``, ``mount.fuse.kafkafs``); False when it cannot be told."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return False
    names = {os.path.basename(a) for a in argv[:2]}
    if names & {"kafkafs", "mount.fuse.kafkafs"}:
        return True
    return any(a == "-m" and b == "kafkafs" for a, b in itertools.pairwise(argv))


def held_message(holder: Holder) -> str:
    """Who holds the lock, in a clause: ``the kafkafs daemon mounted at M (pid N) holds
    it`` and so on."""
    if holder.mount is not None:
        pid = f" (pid {holder.pid})" if holder.pid is not None else ""
        return f"the kafkafs daemon mounted at {holder.mount}{pid} holds it"
    if holder.process is None:
        return "another process holds it (a kafkafs daemon or a Kafka broker)"
    if holder.kafkafs:
        return (f"{holder.process} holds it, a kafkafs process serving no mount this process "
                "can see (a command still running, or a daemon in another mount namespace)")
    return f"{holder.process} holds it, which is not a kafkafs daemon (a Kafka broker?)"


def refusal(log_dirs: Iterable[str], job: Job) -> str:
    """The one-line refusal of a writer whose ``job`` found one of ``log_dirs`` locked:
    Kafka's words, who holds it and what to do instead."""
    dirs = list(log_dirs)
    holder = find_holder(dirs)
    if holder is None:  # released meanwhile
        return (f"Failed to acquire lock on file .lock in {', '.join(dirs)}: another process "
                "held it; try again")
    head = f"Failed to acquire lock on file .lock in {holder.log_dir}: {held_message(holder)}"
    if holder.mount is not None:
        return f"{head}; {job.what} through its mount: {job.through(holder.mount)}"
    if holder.process is not None and holder.kafkafs:
        return f"{head}; try again when it is done, or stop it"
    return f"{head}; {job.what} with the broker's own tools ({job.kafka_tool}), or stop it first"
