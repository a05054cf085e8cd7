"""Finding a live kafkafs mount from the mount table: the one place that reads
``/proc/self/mounts`` for the commands and the Spark writer that go through a running
daemon instead of writing its log dirs themselves."""

from __future__ import annotations

import os

FSTYPE = "fuse.kafkafs"  # the type /proc/self/mounts shows for a kafkafs mount
# the daemon's requests and answers as extended attributes (kafkafs.fs.operations serves
# them; the CLI and kafkafs.spark.mountlink ask): on the root, the log dirs it serves; set on
# the root (or a topic's dir), adopt staged partition dirs as a topic; set on a partition
# dir, append a staged run; set on the root, commit a write's staged runs to existing
# partitions all or nothing
LOG_DIRS_XATTR = "user.kafkafs.log_dirs"
ADOPT_XATTR = "user.kafkafs.adopt"
APPEND_STAGED_XATTR = "user.kafkafs.append_staged"
COMMIT_STAGED_XATTR = "user.kafkafs.commit_staged"


def mount_entries() -> list[tuple[str, str]]:
    """``(mount point, type)`` of every line of ``/proc/self/mounts``, in table order (the
    last one at a point is the topmost). Raises OSError when the table cannot be read."""
    with open("/proc/self/mounts", encoding="utf-8", errors="replace") as f:
        return [(fl[1].replace("\\040", " "), fl[2]) for fl in map(str.split, f)
                if len(fl) > 2]


def kafkafs_mount_points() -> list[str]:
    """The mount points of type :data:`FSTYPE`, in mount-table order; [] when the table
    cannot be read."""
    try:
        return [point for point, fstype in mount_entries() if fstype == FSTYPE]
    except OSError:
        return []


def find_mount(log_dirs, *, exact: bool = True) -> str | None:
    """The mount point of a live kafkafs mount whose daemon serves ``log_dirs`` (paths,
    compared by realpath with its root's ``user.kafkafs.log_dirs``): exactly that set, or
    with ``exact=False`` a set holding all of them. None when there is none or a mount
    cannot be asked."""
    want = {os.path.realpath(d) for d in log_dirs}
    for mnt in kafkafs_mount_points():
        try:
            served = {os.path.realpath(d) for d in served_log_dirs(mnt)}
        except OSError:
            continue
        if served == want or (not exact and want <= served):
            return mnt
    return None


def served_log_dirs(mount: str) -> list[str]:
    """The log dirs the daemon mounted at ``mount`` serves, as it spells them (its root's
    :data:`LOG_DIRS_XATTR`). Raises OSError when the mount does not tell."""
    return [d for d in os.getxattr(mount, LOG_DIRS_XATTR).decode().split(",") if d]
