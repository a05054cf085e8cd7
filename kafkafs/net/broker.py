"""The broker the network frontend plays: one node over one storage core (docs/design.md §9).

:class:`Broker` holds what every api handler shares -- the storage core, the broker
configuration, this node's id and endpoints, the cluster id of the log dirs, the api
versions answered (:data:`SUPPORTED`) -- and dispatches each decoded request to its
handler. Handlers live in one module per family of apis (``metadata``, ``produce``,
``fetch``, ``offsets``, ``producer_ids``, ``coordinator``, ``transactions``, ``admin``,
``configs``); each
module's ``HANDLERS`` maps api keys to ``async fn(broker, request, conn) -> dict | None``
(the response body, None for no response). A handler answers errors as Kafka does, in the
response; an exception escaping it is a defect of kafkafs: it is logged with the request
and the connection is closed.
"""

from __future__ import annotations

import base64
import logging
import os
from collections.abc import Callable
from contextlib import asynccontextmanager

import trio

from ..core.storage import StorageCore
from ..log import checkpoint as ckpt
from ..log.config import BrokerConfig
from ..log.errors import CorruptCheckpointError
from ..record.tables import protocol
from . import errors as K
from .errors import ProtocolError
from .listeners import Listener, advertised
from .wire import API_VERSIONS, Request

log = logging.getLogger(__name__)

#: api key -> the newest version kafkafs answers when that is below the table's newest
#: stable one (what the current clients use and kafkafs answers as Kafka does)
_CAPS = {
    8: 9,    # OffsetCommit 10 addresses topics by id (KIP-848's): clients use 9
    9: 9,    # OffsetFetch likewise
}


class Connection:
    """One client connection: ``peer`` (``host:port``), and what handlers keep for it."""

    def __init__(self, peer: str):
        self.peer = peer
        self.client_software: tuple[str, str] | None = None


class Broker:
    """One node's answers over ``core`` (a started
    :class:`~kafkafs.core.storage.StorageCore`), configured by ``config``. ``bind`` tells it
    the listeners it serves (before the first request)."""

    def __init__(self, core: StorageCore, config: BrokerConfig | None = None):
        from . import coordinator, fetch, producer_ids, transactions
        self.core = core
        self.config = config or core.config
        self.manager = core.manager
        meta = self._meta_properties()
        nid = meta.get("node.id") or meta.get("broker.id") or ""
        self.node_id = self.config.node_id if self.config.node_id >= 0 else \
            int(nid) if nid.isdigit() else 0
        self.cluster_id = meta.get("cluster.id") or "kafkafs"
        self.listeners: list[Listener] = []
        self.endpoints: dict[str, Listener] = {}
        # num.io.threads: the handlers running at once (one event loop: a bound on how many
        # requests' work stands between the loop's other tasks -- the mount's requests --
        # and their next turn); a handler parked in a wait gives its place up (parked())
        self.io = trio.CapacityLimiter(self.config.num_io_threads)
        self.handlers: dict[int, Callable] = all_handlers()
        self.supported = supported_versions(self.handlers)
        self._topic_ids: dict[str, tuple] = {}  # topic -> (its partition 0's Log, id)
        self.state: dict[str, object] = {}  # per-family state, by module name
        for mod in (fetch, producer_ids, coordinator, transactions):
            self.state[mod.__name__.rsplit(".", 1)[1]] = mod.make_state(self)

    def _meta_properties(self) -> dict[str, str]:
        """The keys of the log dirs' ``meta.properties``, each from the first dir that has it
        set ({} without any)."""
        out: dict[str, str] = {}
        for d in self.config.log_dirs:
            try:
                props = ckpt.read_properties(os.path.join(d, "meta.properties"))
            except (OSError, CorruptCheckpointError):
                continue
            for k, v in props.items():
                if v and k not in out:
                    out[k] = v
        return out

    def bind(self, listeners: list[Listener]) -> None:
        """The listeners served (ports resolved); what Metadata advertises follows."""
        self.listeners = listeners
        self.endpoints = advertised(listeners, self.config.advertised_listeners)

    @property
    def endpoint(self) -> Listener:
        """The endpoint Metadata and FindCoordinator give (the first listener's)."""
        return self.endpoints[self.listeners[0].name]

    async def run(self) -> None:
        """The node's own timers (the group and transaction coordinators'), until
        cancelled."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.state["coordinator"].run)
            nursery.start_soon(self.state["transactions"].run)

    def connection(self, peer: str) -> Connection:
        return Connection(peer)

    def connection_closed(self, conn: Connection) -> None:
        pass

    # -- topics -------------------------------------------------------------------------
    def topic_id(self, topic: str) -> bytes:
        """The topic's id as 16 bytes (zero when it has none), cached per topic while its
        first partition's Log is the same object (a topic deleted and made again by any
        door has new logs, and a new id)."""
        first = self.manager.logs.get((topic, 0))
        hit = self._topic_ids.get(topic)
        if hit is not None and first is not None and hit[0] is first:
            return hit[1]
        text = self.manager.topic_id(topic)
        tid = uuid_bytes(text) if text else bytes(16)
        if text and first is not None:
            self._topic_ids[topic] = (first, tid)
        return tid

    def topic_by_id(self, raw: bytes) -> str | None:
        """The topic whose id is ``raw`` (16 bytes), or None."""
        for topic, (_lg, tid) in list(self._topic_ids.items()):
            if tid == raw and self.manager.partitions(topic) and self.topic_id(topic) == raw:
                return topic
        topic = self.manager.topic_names_by_id().get(ckpt.uuid_to_string(raw))
        if topic is not None:
            self.topic_id(topic)
        return topic

    def forget_topic(self, topic: str) -> None:
        """Drop what is cached of ``topic`` (deleted or replaced)."""
        self._topic_ids.pop(topic, None)

    # -- dispatch ---------------------------------------------------------------------
    @asynccontextmanager
    async def parked(self):
        """Inside a handler: while the block runs, the request waits for something other
        requests do (a long poll for appends, a rebalance, a leader's assignment), so it
        gives its ``num.io.threads`` place up and takes one again afterwards (Kafka's
        purgatory frees the request handler thread the same way)."""
        self.io.release()
        try:
            yield
        finally:
            with trio.CancelScope(shield=True):  # (handle's release needs it back)
                await self.io.acquire()

    async def handle(self, request: Request, conn: Connection) -> dict | None:
        """The response body to ``request`` (None: no response). Raises ProtocolError when
        the connection must close."""
        handler = self.handlers.get(request.api_key)
        if handler is None:
            raise ProtocolError(f"api key {request.api_key} is not served")
        try:
            async with self.io:
                return await handler(self, request, conn)
        except ProtocolError:
            raise
        except Exception as exc:
            log.exception("%s v%d from %s (client %r, correlation id %d) failed",
                          request.response.name.removesuffix("Response"), request.api_version,
                          conn.peer, request.client_id, request.correlation_id)
            raise ProtocolError(f"internal error answering it: {exc!r}") from exc


def all_handlers() -> dict[int, Callable]:
    """api key -> handler of every api this node answers (each family module's
    ``HANDLERS``)."""
    from . import (admin, apis, cluster, configs, coordinator, fetch, metadata, offsets,
                   produce, producer_ids, transactions)
    out: dict[int, Callable] = {}
    for mod in (apis, metadata, produce, fetch, offsets, producer_ids, coordinator, admin,
                configs, cluster, transactions):
        out.update(mod.HANDLERS)
    return out


def supported_versions(handlers) -> dict[int, tuple[int, int]]:
    """api key -> (min, max) versions answered: the request table's versions (its newest
    left out while it is unstable), capped by :data:`_CAPS`; Produce from 0, as Kafka
    advertises it (a version below 3 is refused when it comes: KAFKA-18659)."""
    schema = protocol()
    out = {}
    for key in handlers:
        msg = schema.by_api(key, "Request")
        lo, hi = msg.versions.low, msg.versions.high
        if msg.unstable:
            hi -= 1
        hi = min(hi, _CAPS.get(key, hi))
        out[key] = (0 if key == 0 else lo, hi)
    return out


def uuid_bytes(text: str) -> bytes:
    """Kafka's ``Uuid.fromString``: the 16 bytes of unpadded base64url text."""
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


__all__ = ["API_VERSIONS", "Broker", "Connection", "K", "all_handlers", "supported_versions",
           "uuid_bytes"]
