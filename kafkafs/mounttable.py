"""The kafkafs mounts in the mount table: the one place that reads ``/proc/self/mounts``
(for ``kafkafs umount`` and :func:`kafkafs.core.control.find_mount`, which finds the daemon
serving a log dir among them)."""

from __future__ import annotations

FSTYPE = "fuse.kafkafs"  # the type /proc/self/mounts shows for a kafkafs mount


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
