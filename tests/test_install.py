"""After README's first command (scripts/main-job.sh runs scripts/install.sh), ``kafkafs`` is
on PATH and ``mount.fuse.kafkafs`` is where mount(8) looks for helpers: install.sh runs
scripts/link-commands.sh, which links them into /usr/local/bin and /sbin. The test runs
that script with its places moved into a temporary dir (this machine's /usr/local/bin and
/sbin are left alone), then lets a shell and mount(8) itself find the commands."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

LINKER = os.path.join(ROOT, "scripts", "link-commands.sh")
VENV = os.path.dirname(os.path.dirname(sys.executable))  # the venv running these tests


def link_commands(bin_dir, helper_dir) -> subprocess.CompletedProcess:
    env = dict(os.environ, KAFKAFS_BIN_DIR=str(bin_dir), KAFKAFS_HELPER_DIR=str(helper_dir),
               KAFKAFS_VENV=VENV)
    return subprocess.run([LINKER], env=env, capture_output=True, text=True, timeout=60,
                          check=False)


def test_install_runs_the_link_step_with_the_places_a_user_and_mount_look():
    """install.sh ends with the link step, after the venv install; its default places are
    /usr/local/bin (on every user's PATH, where the systemd units run kafkafs from) and
    /sbin (util-linux mount(8)'s helper path is /sbin:/sbin/fs.d:/sbin/fs)."""
    with open(os.path.join(ROOT, "scripts", "install.sh")) as f:
        lines = [line.strip() for line in f]
    assert lines[-1] == "./scripts/link-commands.sh"
    assert any(line.startswith(".venv/bin/pip install") for line in lines)
    with open(LINKER) as f:
        text = f.read()
    assert 'BIN_DIR=${KAFKAFS_BIN_DIR:-/usr/local/bin}' in text
    assert 'HELPER_DIR=${KAFKAFS_HELPER_DIR:-/sbin}' in text
    assert 'VENV=${KAFKAFS_VENV:-$PWD/.venv}' in text


def test_links_make_kafkafs_found_on_path_and_are_idempotent(tmp_path):
    """The links point into the venv; a shell with the bin dir on PATH finds ``kafkafs``
    and runs it; a second run changes nothing and says nothing; a file that is not a link
    (a ``pip install`` as root) is left as it is."""
    bin_dir, helper_dir = tmp_path / "bin", tmp_path / "sbin"
    r = link_commands(bin_dir, helper_dir)
    assert r.returncode == 0, r.stderr
    assert os.readlink(bin_dir / "kafkafs") == f"{VENV}/bin/kafkafs"
    assert os.readlink(helper_dir / "mount.fuse.kafkafs") == f"{VENV}/bin/mount.fuse.kafkafs"
    found = subprocess.run(["sh", "-c", "command -v kafkafs && kafkafs --version"],
                           env=dict(os.environ, PATH=f"{bin_dir}:/usr/bin:/bin"),
                           capture_output=True, text=True, timeout=60, check=False)
    assert found.stdout.splitlines() == [str(bin_dir / "kafkafs"), "kafkafs 0.1.0"]
    before = os.lstat(bin_dir / "kafkafs").st_mtime_ns
    r = link_commands(bin_dir, helper_dir)
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    assert os.lstat(bin_dir / "kafkafs").st_mtime_ns == before
    os.unlink(bin_dir / "kafkafs")
    (bin_dir / "kafkafs").write_text("#!/bin/sh\n")
    r = link_commands(bin_dir, helper_dir)
    assert r.returncode == 0 and "is not a link: left as it is" in r.stderr
    assert (bin_dir / "kafkafs").read_text() == "#!/bin/sh\n"


def test_mount_finds_the_helper_on_its_own_path(tmp_path):
    """mount(8) itself, in a private mount namespace whose /sbin (merged /usr: /usr/sbin) is
    the linked dir: ``mount -f -t fuse.kafkafs`` runs the helper (which, faked, says what it
    would start) — the lookup an /etc/fstab line of type fuse.kafkafs relies on."""
    unshare, mount = shutil.which("unshare"), shutil.which("mount")
    if os.geteuid() != 0 or not unshare or not mount:
        pytest.skip("needs root, unshare(1) and mount(8)")
    sbin = os.path.realpath("/sbin")
    helper_dir, mnt = tmp_path / "sbin", tmp_path / "mnt"
    mnt.mkdir()
    assert link_commands(tmp_path / "bin", helper_dir).returncode == 0
    script = (f"mount --bind {helper_dir} {sbin}; "
              f"mount -f -v -t fuse.kafkafs {tmp_path / 'logs'} {mnt}")
    r = subprocess.run([unshare, "-m", "sh", "-ec", script], capture_output=True, text=True,
                       timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    assert "mount.fuse.kafkafs: fake mount (-f): would run" in r.stderr
    assert f"-m kafkafs mount {mnt} --log-dirs {tmp_path / 'logs'}" in r.stderr
