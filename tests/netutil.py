"""Helpers for the wire-protocol tests: a ``kafkafs serve`` daemon, a mount with a listener,
and raw requests over a socket.

:class:`Server` runs ``python -m kafkafs serve`` as a child process on a free port
(``listeners=PLAINTEXT://127.0.0.1:0``; the port is read from its log line "Listening for
Kafka clients on ...") with ``group.initial.rebalance.delay.ms=0`` unless told otherwise,
so group tests do not wait 3 s per first rebalance. :func:`start_mounted` does the same for
``kafkafs mount`` (the :class:`conftest.Mount`). :func:`request` sends one request encoded
by the project's tables and returns the decoded response, for the refusals no client sends.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LISTENING = re.compile(rb"Listening for Kafka clients on PLAINTEXT://[^:]*:(\d+)")


def _port_from(path: str, proc, timeout: float, start: int = 0) -> int:
    """The port of the first "Listening" line written to ``path`` past byte ``start``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(path, "rb") as f:
            f.seek(start)
            m = _LISTENING.search(f.read())
        if m:
            return int(m.group(1))
        if proc.poll() is not None:
            with open(path, errors="replace") as f:
                raise RuntimeError(f"daemon exited with {proc.returncode}:\n{f.read()}")
        time.sleep(0.05)
    with open(path, errors="replace") as f:
        raise RuntimeError(f"no listener after {timeout} s:\n{f.read()}")


NET_OVERRIDES = ("listeners=PLAINTEXT://127.0.0.1:0", "group.initial.rebalance.delay.ms=0")


class Server:
    """A ``kafkafs serve`` child process over ``log_dir``; ``bootstrap`` is
    ``127.0.0.1:PORT``."""

    def __init__(self, log_dir, overrides=(), extra_args=(), config=None):
        self.log_dir = str(log_dir)
        self.overrides = list(NET_OVERRIDES) + list(overrides)
        self.extra_args = list(extra_args)
        self.config = config
        self.log_path = os.path.join(os.path.dirname(self.log_dir),
                                     f"serve-{time.monotonic_ns()}.log")
        self.proc = None
        self.port = None

    def start(self, timeout: float = 30.0) -> Server:
        args = [sys.executable, "-m", "kafkafs", "serve", "--log-dirs", self.log_dir]
        if self.config:
            args += ["--config", self.config]
        for o in self.overrides:
            args += ["--override", o]
        args += self.extra_args
        self._out = open(self.log_path, "ab")
        start = self._out.tell()
        env = dict(os.environ)
        env.pop("KAFKAFS_LOG_DIRS", None)
        self.proc = subprocess.Popen(args, stdout=self._out, stderr=self._out, cwd=ROOT,
                                     env=env)
        self.port = _port_from(self.log_path, self.proc, timeout, start)
        return self

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log(self) -> str:
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM, then the exit status (the daemon flushes and checkpoints first)."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait(10)
        self._out.close()
        self.proc = None
        return rc


def start_mounted(mount, timeout: float = 30.0) -> str:
    """Start ``mount`` (a conftest Mount) with a listener on a free port; returns the
    bootstrap address."""
    for o in NET_OVERRIDES:
        mount.extra_args += ["--override", o]
    start = os.path.getsize(mount.stderr_path) if os.path.exists(mount.stderr_path) else 0
    mount.start()
    port = _port_from(mount.stderr_path, mount.proc, timeout, start)
    return f"127.0.0.1:{port}"


# -- raw requests -------------------------------------------------------------------------

def frame(api_key: int, version: int, body: dict, correlation_id: int = 1,
          client_id: str | None = "kafkafs-test") -> bytes:
    """A request frame encoded by the project's tables."""
    from kafkafs.record.tables import protocol

    msg = protocol().by_api(api_key, "Request")
    cid = b"\xff\xff" if client_id is None else \
        struct.pack(">h", len(client_id.encode())) + client_id.encode()
    head = struct.pack(">hhi", api_key, version, correlation_id) + cid
    if version in msg.flexible:
        head += b"\x00"
    data = head + msg.encode(body, version)
    return struct.pack(">i", len(data)) + data


def read_frame(sock: socket.socket) -> bytes | None:
    """One response frame (without its size), None when the server closed."""
    head = _read_exactly(sock, 4)
    if head is None:
        return None
    return _read_exactly(sock, struct.unpack(">i", head)[0])


def _read_exactly(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def decode_response(api_key: int, version: int, data: bytes, header_version: int) -> dict:
    from kafkafs.record.tables import protocol

    pos = 4
    if header_version >= 1:
        pos += 1  # no tagged fields
    return protocol().by_api(api_key, "Response").decode(data, version, pos)


def request(address: str, api_key: int, version: int, body: dict, *,
            timeout: float = 10.0) -> dict | None:
    """Send one request and decode its response (None when the server closed the
    connection instead)."""
    from kafkafs.record.tables import protocol

    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(frame(api_key, version, body))
        data = read_frame(s)
    if data is None:
        return None
    flexible = version in protocol().by_api(api_key, "Request").flexible
    return decode_response(api_key, version, data, 1 if flexible and api_key != 18 else 0)
