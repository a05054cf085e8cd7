"""Shared fixtures: log dirs, a LogManager, and a real FUSE mount of the daemon."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from kafkafs.log.config import BrokerConfig, LogConfig
from kafkafs.log.manager import LogManager

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def small_config(**overrides) -> LogConfig:
    """A LogConfig with the given topic-config attributes changed."""
    return LogConfig(**overrides)


@pytest.fixture
def log_dir(tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    return str(d)


@pytest.fixture
def manager_factory(tmp_path):
    made = []

    def make(dirs=None, read_only=False, **props):
        dirs = dirs or [str(tmp_path / "logs")]
        cfg = BrokerConfig.from_properties({k.replace("_", "."): str(v) for k, v in props.items()})
        cfg = cfg.with_log_dirs(dirs)
        m = LogManager(cfg, read_only=read_only)
        m.startup()
        made.append(m)
        return m

    yield make
    for m in made:
        if m.started:
            m.shutdown()


def tree_state(root) -> dict:
    """Path -> state of every file and directory under ``root``: a directory's sorted names
    and mtime, a file's (sha256, size, mtime_ns). Equal before and after means not a byte,
    a name or an mtime changed."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        st = os.stat(dirpath)
        out[dirpath] = ("dir", sorted(dirnames + filenames), st.st_mtime_ns)
        for n in filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            with open(p, "rb") as f:
                out[p] = (hashlib.sha256(f.read()).hexdigest(), st.st_size, st.st_mtime_ns)
    return out


def sh(cmd: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    """Run ``cmd`` with the shell, output captured (bytes)."""
    return subprocess.run(cmd, shell=True, capture_output=True, timeout=timeout, **kw)


def wait_for(pred, timeout: float = 10.0) -> bool:
    """Poll ``pred`` every 50 ms until it is true (True) or ``timeout`` s pass (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return False


def fuse_available() -> bool:
    return os.path.exists("/dev/fuse") and shutil.which("fusermount3") is not None


needs_fuse = pytest.mark.skipif(not fuse_available(), reason="FUSE is not available")


class Mount:
    """A kafkafs daemon running as a child process with its mount point."""

    def __init__(self, tmp_path, log_dirs=None, options=(), extra_args=(), config=None):
        self.mnt = str(tmp_path / "mnt")
        os.makedirs(self.mnt, exist_ok=True)
        self.log_dirs = log_dirs or [str(tmp_path / "logs")]
        self.stderr_path = str(tmp_path / f"daemon-{time.monotonic_ns()}.log")
        self.options = list(options)
        self.extra_args = list(extra_args)
        self.config = config
        self.cache_dir = str(tmp_path / "cache")
        self.proc = None

    def command(self) -> list[str]:
        """The ``kafkafs mount`` command line :meth:`start` runs."""
        args = [sys.executable, "-m", "kafkafs", "mount", self.mnt,
                "--log-dirs", ",".join(self.log_dirs)]
        if self.config:
            args += ["--config", self.config]
        for o in self.options:
            args += ["-o", o]
        return args + self.extra_args

    def start(self, timeout=20.0):
        args = self.command()
        self._err = open(self.stderr_path, "ab")
        env = dict(os.environ, XDG_CACHE_HOME=self.cache_dir)  # view marks stay in the test
        env.pop("KAFKAFS_LOG_DIRS", None)
        self.proc = subprocess.Popen(args, stderr=self._err, stdout=self._err, cwd=ROOT, env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if os.path.ismount(self.mnt):
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited with {self.proc.returncode}:\n{self.log()}")
            time.sleep(0.05)
        raise RuntimeError(f"mount did not appear:\n{self.log()}")

    def log(self) -> str:
        try:
            with open(self.stderr_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def path(self, *parts) -> str:
        return os.path.join(self.mnt, *parts)

    def umount(self, timeout=30.0) -> int:
        """Unmount with ``kafkafs umount`` and return the daemon's exit status."""
        if self.proc is None:
            return 0
        if os.path.ismount(self.mnt):
            subprocess.run([sys.executable, "-m", "kafkafs", "umount", self.mnt], check=True,
                           cwd=ROOT, timeout=timeout)
        try:
            rc = self.proc.wait(timeout)
        finally:
            self._err.close()
        self.proc = None
        return rc

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.proc = None
        subprocess.run(["fusermount3", "-uz", self.mnt], capture_output=True)
        self._err.close()

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.umount()
            except Exception:
                self.proc.kill()
                self.proc.wait(10)
                self.proc = None
        if os.path.ismount(self.mnt):
            subprocess.run(["fusermount3", "-uz", self.mnt], capture_output=True)


@pytest.fixture
def mount(tmp_path):
    """Start a daemon on ``tmp_path/logs`` mounted at ``tmp_path/mnt``; yields the Mount."""
    if not fuse_available():
        pytest.skip("FUSE is not available")
    m = Mount(tmp_path)
    m.start()
    yield m
    m.stop()


@pytest.fixture
def small_disk_mount(tmp_path):
    """A Mount (not started) whose log dir is a 3 MiB tmpfs, with 64 KiB indexes: a disk
    that fills up. Skips where tmpfs cannot be mounted; stops the daemon and drops the
    tmpfs after the test."""
    if not fuse_available():
        pytest.skip("FUSE is not available")
    logs = tmp_path / "small"
    logs.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(logs)],
                       capture_output=True)
    if r.returncode != 0:
        pytest.skip("cannot mount a small tmpfs here")
    m = Mount(tmp_path, log_dirs=[str(logs)],
              extra_args=["--override", "log.index.size.max.bytes=65536"])
    yield m
    m.stop()
    subprocess.run(["umount", "-l", str(logs)])


@pytest.fixture
def mount_factory(tmp_path):
    if not fuse_available():
        pytest.skip("FUSE is not available")
    made = []

    def make(**kw):
        m = Mount(tmp_path, **kw)
        made.append(m)
        return m.start()

    yield make
    for m in made:
        m.stop()


def kafkafs(*args, input=None, check=True, timeout=60, **kw):
    """Run ``python -m kafkafs ARGS``; returns the CompletedProcess (bytes)."""
    return subprocess.run([sys.executable, "-m", "kafkafs", *args], input=input,
                          capture_output=True, check=check, timeout=timeout, cwd=ROOT, **kw)


# -- Spark ---------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def spark():
    """One SparkSession (local[2]) for the whole suite, with ``kafkalog`` registered.

    Cold start costs ~10 s, so every Spark test shares it. Executors run this venv's python
    (PYSPARK_PYTHON), or they would import the system python's packages."""
    import kafkafs.spark

    session = kafkafs.spark.session("local[2]", "kafkafs-tests", {
        "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4",
        "spark.driver.memory": "2g"})
    yield session
    session.stop()
