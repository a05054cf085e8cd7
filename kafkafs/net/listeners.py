"""Kafka's listener settings: ``listeners`` and ``advertised.listeners`` (docs/design.md §9.1).

``listeners`` is a comma-separated list of ``NAME://host:port`` (``SocketServerConfigs``:
an empty host binds every interface, ``0.0.0.0`` too; port 0 picks a free port); kafkafs
speaks PLAINTEXT only, so a listener with another security protocol (``SSL``,
``SASL_PLAINTEXT``, ``SASL_SSL``, or a name mapped to one by
``listener.security.protocol.map``) is refused with a clear error, never served
unprotected. ``advertised.listeners`` (default: ``listeners``) is what Metadata tells
clients; an advertised empty host or ``0.0.0.0`` is the machine's host name there, as Kafka's
broker advertises its canonical host name.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

from ..log.errors import InvalidConfigError

DEFAULT_LISTENERS = "PLAINTEXT://127.0.0.1:9092"


@dataclass(frozen=True)
class Listener:
    """One listener: ``name`` (``PLAINTEXT``), ``host`` ("" for every interface), ``port``."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


def parse_listeners(text: str, protocol_map: str = "") -> list[Listener]:
    """The listeners of a ``listeners`` value. ``protocol_map``: the
    ``listener.security.protocol.map`` value (``NAME:PROTOCOL,...``). Raises
    InvalidConfigError for a malformed entry, a repeated name or port, or a listener
    whose security protocol is not PLAINTEXT."""
    protocols = {"PLAINTEXT": "PLAINTEXT"}
    for item in filter(None, (p.strip() for p in protocol_map.split(","))):
        name, _, proto = item.partition(":")
        protocols[name.strip().upper()] = proto.strip().upper()
    out: list[Listener] = []
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, sep, rest = item.partition("://")
        if not sep:
            raise InvalidConfigError(f"Invalid value {item} for configuration listeners: "
                                     "not of the form NAME://host:port")
        host, colon, port = rest.rpartition(":")
        if not colon or not port.isdigit() or int(port) > 65535:
            raise InvalidConfigError(f"Invalid value {item} for configuration listeners: "
                                     "no port")
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        name = name.strip().upper()
        proto = protocols.get(name, name)
        if proto != "PLAINTEXT":
            raise InvalidConfigError(
                f"listener {item}: security protocol {proto} is not supported by kafkafs "
                "(PLAINTEXT only: put it behind a TLS proxy, or bind it to loopback)")
        if any(lst.name == name for lst in out):
            raise InvalidConfigError(f"listeners: the name {name} is given twice")
        if int(port) and any(lst.port == int(port) for lst in out):
            raise InvalidConfigError(f"listeners: the port {port} is given twice")
        out.append(Listener(name, host, int(port)))
    if not out:
        raise InvalidConfigError("listeners is empty")
    return out


def advertised(listeners: list[Listener], text: str) -> dict[str, Listener]:
    """Listener name -> what Metadata tells clients: the ``advertised.listeners`` entry of
    that name, else the listener itself with an empty or ``0.0.0.0`` host replaced by this
    machine's name. ``listeners`` carry their bound ports (port 0 resolved). Raises
    InvalidConfigError."""
    given = {lst.name: lst for lst in parse_listeners(text)} if text.strip() else {}
    out = {}
    for lst in listeners:
        a = given.get(lst.name, lst)
        if a.port == 0:
            a = Listener(a.name, a.host, lst.port)
        if a.host in ("", "0.0.0.0", "::"):
            a = Listener(a.name, socket.getfqdn(), a.port)
        out[lst.name] = a
    return out
