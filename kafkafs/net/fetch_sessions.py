"""Incremental fetch sessions (KIP-227; Kafka ``FetchSession``, ``FetchSessionCache``).

A consumer that sends session epoch 0 asks for a session: the partitions of that full
request are kept under a new session id, and later requests (epoch 1, 2, ...) carry only
the partitions that changed and the ones to forget. Kafka's rules, as
``FetchManager.newContext`` applies them: epoch -1 is a full request without a session
(a session id given is closed); epoch 0 a full one that opens a session (closing the one
named); an epoch above 0 must name a live session (FETCH_SESSION_ID_NOT_FOUND) at its
current epoch (INVALID_FETCH_SESSION_EPOCH), with the same way of naming topics, by id or
by name, as the request that opened it (FETCH_SESSION_TOPIC_ID_ERROR). An incremental
answer holds only the partitions with records, an error, or a high watermark or log start
offset that changed since the last answer; a partition that returned records moves to the
end of the session's order, so the next fetch starts with the others. The cache holds at
most ``max.incremental.fetch.session.cache.slots`` sessions (default 1000); when it is full
a new session takes the slot of the least recently used one idle for more than 120 s, and
otherwise gets no session (session id 0), as Kafka's cache answers.
"""

from __future__ import annotations

import random
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from . import errors as K

EVICTION_MS = 120000  # KafkaBroker: MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS
FINAL_EPOCH = -1
INITIAL_EPOCH = 0


@dataclass
class PartitionState:
    """One partition of a session: what the consumer last asked and what it was told."""

    topic_id: bytes
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    high_watermark: int = -1
    log_start_offset: int = -1


@dataclass
class Session:
    """``id``, ``epoch`` (the next request's), ``uses_ids`` (opened by version 13+),
    ``partitions`` ((topic, partition) -> :class:`PartitionState`, in fetch order)."""

    id: int
    epoch: int
    uses_ids: bool
    partitions: OrderedDict = field(default_factory=OrderedDict)
    last_used: float = 0.0


class SessionError(Exception):
    """A session request Kafka answers with a top-level error: ``code``."""

    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


class FetchSessions:
    """The session cache of one node (``slots`` sessions at most)."""

    def __init__(self, slots: int):
        self.slots = slots
        self.sessions: dict[int, Session] = {}

    def _new_id(self) -> int:
        while True:
            sid = random.randint(1, 2**31 - 1)
            if sid not in self.sessions:
                return sid

    def close(self, session_id: int) -> None:
        self.sessions.pop(session_id, None)

    def open(self, uses_ids: bool, partitions: OrderedDict) -> Session | None:
        """A new session over ``partitions`` (epoch 1 next), or None when the cache is full
        of sessions used within the last 120 s."""
        now = time.monotonic()
        if self.slots <= 0:
            return None
        if len(self.sessions) >= self.slots:
            victim = min(self.sessions.values(), key=lambda s: s.last_used)
            if (now - victim.last_used) * 1000 < EVICTION_MS:
                return None
            del self.sessions[victim.id]
        s = Session(self._new_id(), 1, uses_ids, partitions, now)
        self.sessions[s.id] = s
        return s

    def incremental(self, session_id: int, epoch: int, uses_ids: bool) -> Session:
        """The live session for an incremental request. Raises SessionError."""
        s = self.sessions.get(session_id)
        if s is None:
            raise SessionError(K.FETCH_SESSION_ID_NOT_FOUND)
        if s.epoch != epoch:
            raise SessionError(K.INVALID_FETCH_SESSION_EPOCH)
        if s.uses_ids != uses_ids:
            raise SessionError(K.FETCH_SESSION_TOPIC_ID_ERROR)
        s.last_used = time.monotonic()
        return s

    @staticmethod
    def next_epoch(epoch: int) -> int:
        """``FetchMetadata.nextEpoch``: wraps from Integer.MAX_VALUE to 1."""
        return 1 if epoch >= 2**31 - 1 else epoch + 1
