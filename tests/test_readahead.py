"""The mount's read-ahead window (``-o read_ahead_kb``): 1024 KiB by default, so the kernel
asks for up to 1 MiB per read of a big file instead of 128 KiB."""

from __future__ import annotations

import os

import pytest
from conftest import kafkafs, wait_for

from kafkafs.daemon.readahead import mount_device


def _window(mnt: str) -> int:
    dev = mount_device(os.path.abspath(mnt))
    with open(f"/sys/class/bdi/{dev}/read_ahead_kb") as f:
        return int(f.read())


def _settled_window(mnt: str, expected: int) -> int:
    """The window once the daemon has set it: it does so just after the kernel's INIT,
    which may come after the mount point appears (on a busy machine, later still)."""
    wait_for(lambda: _window(mnt) == expected, timeout=10)
    return _window(mnt)


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="sysfs read_ahead_kb needs root")


@needs_root
def test_default_window_is_widened(mount):
    assert _settled_window(mount.mnt, 1024) == 1024
    # and reading still works, a big file included
    os.mkdir(mount.path("ra"))
    lines = b"".join(b"line %06d %s\n" % (i, b"x" * 100) for i in range(30000))
    with open(mount.path("ra", "0", "append"), "ab") as f:
        f.write(lines)
    assert open(mount.path("ra", "0", "messages"), "rb").read() == lines


@needs_root
def test_window_option(mount_factory):
    m = mount_factory(options=["read_ahead_kb=0"])  # 0: the kernel's own window
    assert _window(m.mnt) == 128
    assert m.umount() == 0
    m.options = ["read_ahead_kb=4096"]
    m.start()
    assert _settled_window(m.mnt, 4096) == 4096


def test_bad_window_is_refused(tmp_path):
    os.makedirs(tmp_path / "mnt")
    r = kafkafs("mount", str(tmp_path / "mnt"), "--log-dirs", str(tmp_path / "logs"),
                "-o", "read_ahead_kb=lots", check=False)
    assert r.returncode != 0 and b"read_ahead_kb must be a number of KiB" in r.stderr
    assert not os.path.ismount(tmp_path / "mnt")


def test_mount_device_reads_mountinfo(tmp_path):
    info = tmp_path / "mountinfo"
    info.write_text("42 27 0:39 / /mnt/with\\040space rw - fuse.kafkafs kafkafs rw\n"
                    "43 27 0:40 / /mnt/k rw - fuse.kafkafs kafkafs rw\n"
                    "44 27 0:41 / /mnt/k rw - fuse.kafkafs kafkafs rw\n")
    assert mount_device("/mnt/with space", str(info)) == "0:39"
    assert mount_device("/mnt/k", str(info)) == "0:41"  # the last mount there is on top
    assert mount_device("/elsewhere", str(info)) is None
