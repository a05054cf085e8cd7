"""README command (a), the main job on real input (scripts/main-job.sh), run as a test so
CI proves it on every change: nginx's own access log streamed into a topic with ``>>``
while ApacheBench drives it, a /var/log file appended to another, both read back through
the mount and the segment files decoded by kafka-python."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess

import pytest
from conftest import ROOT, fuse_available

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not fuse_available(), reason="FUSE is not available"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the main job runs nginx and apt as root"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_main_job_streams_real_logs_and_reads_them_back(tmp_path):
    """The script exits 0 and its own checks hold: every access-log line is a record that
    kafka-python decodes from the segment files, the /var/log file reads back identical
    through ``messages``, grep finds the 404s ab asked for, by-time resolves, and the daemon
    leaves a clean shutdown marker."""
    if shutil.which("nginx") is None or shutil.which("ab") is None:
        pytest.skip("nginx and ab come from scripts/install.sh (apt)")
    demo = tmp_path / "demo"
    env = dict(os.environ, KAFKAFS_DEMO_DIR=str(demo), KAFKAFS_DEMO_PORT=str(_free_port()))
    r = subprocess.run([os.path.join(ROOT, "scripts", "main-job.sh")], check=False, cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=600)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    m = re.search(r"kafka-python read (\d+) records \(access log has (\d+) lines\)", out)
    assert m and m.group(1) == m.group(2) and int(m.group(1)) >= 4500, out[-4000:]
    # ab sent 500 requests for a missing page: nginx logged each as a 404
    m404 = re.search(r"grep -c '\" 404 ' \S+\n(?:\x1b\[0m)?\n?(\d+)", out)
    assert m404 and int(m404.group(1)) == 500, out[-4000:]
    if "diff /var/log" in out:
        assert re.search(r"identical: \d+ lines", out), out[-4000:]
    assert "main job done" in out
    logs = demo / "logs"
    assert (logs / ".kafka_cleanshutdown").exists()
    assert not os.path.ismount(demo / "mnt")
