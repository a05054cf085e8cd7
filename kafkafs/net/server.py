"""The network frontend's sockets: listen, frame, answer in order (docs/design.md §9.2).

As Kafka's ``SocketServer``: each connection's requests are read one frame at a time and
answered in the order they came (Kafka mutes a channel while its request is handled, so a
client's pipelined requests wait in the socket); a frame larger than
``socket.request.max.bytes`` closes the connection, as does a request Kafka would not parse
(an unknown api key, an unsupported version other than ApiVersions', a body that does not
decode) -- each with a line in the log saying why; a connection idle for
``connections.max.idle.ms`` is closed. ``queued.max.requests`` bounds the requests handled at
once over all connections (a request beyond it waits, as Kafka's request queue makes the
network threads wait). The record bytes of a Fetch response are sent from the segment files
with ``os.sendfile`` (page cache straight to the socket, no copy through Python), between
the encoded bytes around them.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import struct

import trio
import trio.lowlevel

from ..record.schema import Deferred
from .broker import Broker
from .errors import ProtocolError
from .listeners import Listener
from .wire import decode_request, encode_response

log = logging.getLogger(__name__)
_I32 = struct.Struct(">i")


class _Reader:
    """Exact reads from a trio stream, through one buffer."""

    def __init__(self, stream: trio.SocketStream):
        self.stream = stream
        self.buf = bytearray()

    async def read_exactly(self, n: int) -> bytes | None:
        """``n`` bytes, or None at the end of the stream (before or inside them)."""
        while len(self.buf) < n:
            chunk = await self.stream.receive_some(max(65536, n - len(self.buf)))
            if not chunk:
                return None
            self.buf += chunk
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out


async def send_parts(stream: trio.SocketStream, parts: list) -> None:
    """Send a response's parts in order: bytes-like ones with ``send_all`` (adjacent ones
    joined), :class:`~kafkafs.record.schema.Deferred` ones (``ref``: a
    :class:`~kafkafs.log.read.FetchDataInfo`) with ``os.sendfile`` from their segment file.
    Raises ConnectionError when a segment file ends before its range does (truncated since
    it was read: the frame cannot be completed, so the connection must close, as Kafka's
    ``FileRecords.writeTo`` throws), trio.BrokenResourceError."""
    pending: list = []
    for part in parts:
        if not isinstance(part, Deferred):
            pending.append(part)
            continue
        if pending:
            await stream.send_all(b"".join(pending))
            pending = []
        await _send_file(stream.socket, part.ref, part.size)
    if pending:
        await stream.send_all(b"".join(pending) if len(pending) > 1 else pending[0])


async def _send_file(sock, info, size: int) -> None:
    segment, position = info.segment, info.position
    with segment.reader() as fd:
        sent = 0
        while sent < size:
            try:
                n = os.sendfile(sock.fileno(), fd, position + sent, size - sent)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(sock)
                continue
            except OSError as exc:
                if exc.errno in (errno.EPIPE, errno.ECONNRESET):
                    raise trio.BrokenResourceError(str(exc)) from None
                raise
            if n == 0:
                raise ConnectionError(f"{segment.log_path} ends at {position + sent}, inside "
                                      f"the range sent ({position}+{size})")
            sent += n
            await trio.lowlevel.checkpoint()


class NetServer:
    """The Kafka listener of one daemon over its storage core: ``broker`` answers the
    requests (:class:`~kafkafs.net.broker.Broker`); :meth:`serve` binds the listeners and
    serves until cancelled."""

    def __init__(self, broker: Broker):
        self.broker = broker
        config = broker.config
        self.max_frame = config.socket_request_max_bytes
        idle = config.connections_max_idle_ms
        self.idle_s = idle / 1000 if idle >= 0 else float("inf")
        self.limiter = trio.CapacityLimiter(config.queued_max_requests)
        self.connections = 0
        self.socks: list = []

    async def bind(self, listeners: list[Listener]) -> list[Listener]:
        """Bind every listener; returns them with their bound ports (port 0 resolved).
        Raises OSError (a port in use, an address this machine does not have) with nothing
        bound."""
        socks, bound = [], []
        try:
            for lst in listeners:
                family = socket.AF_INET6 if ":" in lst.host else socket.AF_INET
                sock = trio.socket.socket(family, socket.SOCK_STREAM)
                socks.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    await sock.bind((lst.host, lst.port))
                except OSError as exc:
                    raise OSError(exc.errno, f"cannot listen on {lst}: {exc.strerror}") \
                        from None
                sock.listen(socket.SOMAXCONN)
                bound.append(Listener(lst.name, lst.host, sock.getsockname()[1]))
        except BaseException:
            for s in socks:
                s.close()
            raise
        self.socks = socks
        self.broker.bind(bound)
        return bound

    async def serve(self, listeners: list[Listener] | None = None, *,
                    task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Accept connections on the bound listeners (binding ``listeners`` first when
        given) until cancelled; ``task_status`` is told the bound listeners."""
        if listeners is not None:
            await self.bind(listeners)
        for lst in self.broker.listeners:
            log.info("Listening for Kafka clients on %s", lst)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self.broker.run)
                for sock in self.socks:
                    nursery.start_soon(trio.serve_listeners, self._connection,
                                       [trio.SocketListener(sock)])
                task_status.started(self.broker.listeners)
        finally:
            for sock in self.socks:
                sock.close()

    async def _connection(self, stream: trio.SocketStream) -> None:
        try:
            peer = "%s:%s" % stream.socket.getpeername()[:2]
        except OSError:
            peer = "?"
        self.connections += 1
        conn = self.broker.connection(peer)
        reader = _Reader(stream)
        try:
            while True:
                head = None
                with trio.move_on_after(self.idle_s):
                    head = await reader.read_exactly(4)
                    if head is None:
                        return
                if head is None:
                    log.debug("closing the idle connection from %s", peer)
                    return
                size = _I32.unpack(head)[0]
                if size < 0 or size > self.max_frame:
                    log.warning("closing the connection from %s: a request of %d bytes, over "
                                "socket.request.max.bytes (%d)", peer, size, self.max_frame)
                    return
                frame = await reader.read_exactly(size)
                if frame is None:
                    return
                try:
                    request = decode_request(frame, self.broker.supported)
                except ProtocolError as exc:
                    log.warning("closing the connection from %s: %s", peer, exc)
                    return
                async with self.limiter:
                    try:
                        body = await self.broker.handle(request, conn)
                    except ProtocolError as exc:
                        log.warning("closing the connection from %s: %s", peer, exc)
                        return
                if body is None:  # (acks=0: no response)
                    continue
                parts, _size = encode_response(request, body)
                await send_parts(stream, parts)
        except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError) as exc:
            log.debug("connection from %s ended: %s", peer, exc)
        except Exception as exc:  # (a segment gone while its range was sent, a defect)
            log.warning("closing the connection from %s: %r", peer, exc)
        finally:
            self.connections -= 1
            self.broker.connection_closed(conn)
            with trio.CancelScope(shield=True):
                await stream.aclose()
