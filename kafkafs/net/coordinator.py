"""The group coordinator: the classic group protocol over ``__consumer_offsets`` (docs/design.md §9.6).

FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
OffsetDelete, ListGroups, DescribeGroups and DeleteGroups as Kafka 4.1's
``GroupMetadataManager`` and ``OffsetMetadataManager`` answer them for classic groups on one
node: the state machine Empty -> PreparingRebalance -> CompletingRebalance -> Stable, with
``group.initial.rebalance.delay.ms`` before the first rebalance of an empty group, session
timeouts (a member that stops heartbeating is removed and the group rebalances), rebalance
timeouts (members that do not rejoin or sync in time are dropped), MEMBER_ID_REQUIRED for a
dynamic member's first join (version 4+), static membership (``group.instance.id``: a
rejoin takes over the old member's id and fences it, FENCED_INSTANCE_ID).

What a group keeps goes where Kafka's coordinator puts it, in the records Kafka 4.1 writes,
in the group's partition of ``__consumer_offsets`` (``abs(String.hashCode) % partitions``):
``GroupMetadataValue`` version 3 when a group is created by a join, when the leader's
SyncGroup sets the assignment and when a group becomes empty; ``OffsetCommitValue``
version 4 (version 1 with an expire timestamp for a version 2-4 commit giving a retention)
per committed partition; tombstones for OffsetDelete and DeleteGroups. Committed offsets are
read back from the log (:class:`kafkafs.log.groups.GroupStore`, the replay every door
shares), so what the mount's groups view, ``kafkafs consumer-groups`` and OffsetFetch show
is one answer; membership lives in memory and starts from the last ``GroupMetadata`` record
(a group with members comes back Stable, and its members must heartbeat within their
session timeout). Transactional offset commits and the KIP-848 consumer protocol are not
served (their apis are not advertised).
"""

from __future__ import annotations

import logging
import struct
import time
import uuid
from collections import Counter

import trio

from ..log.errors import LogError
from ..log.group_writes import group_tombstones, offset_tombstones, offsets_topic_config
from ..log.groups import CONSUMER_OFFSETS, coordinator_partition, offset_commit_key
from ..record import tables
from ..record.batch import encode_batch
from . import errors as K

log = logging.getLogger(__name__)

NEW_MEMBER_JOIN_TIMEOUT_MS = 300000  # CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS
OFFSET_METADATA_MAX_BYTES = 4096  # offset.metadata.max.bytes
GROUP_OPERATIONS = 3400
AUTHORIZED_NONE = -2147483648
_I16 = struct.Struct(">h")
_TICK_S = 0.1

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = ("Empty", "PreparingRebalance",
                                              "CompletingRebalance", "Stable", "Dead")


class _Waiter:
    """A parked JoinGroup or SyncGroup: ``result`` once ``event`` is set."""

    __slots__ = ("event", "result")

    def __init__(self):
        self.event = trio.Event()
        self.result: dict | None = None

    def answer(self, result: dict) -> None:
        if not self.event.is_set():
            self.result = result
            self.event.set()


class Member:
    """A classic group member (Kafka ``ClassicGroupMember``); times are trio seconds."""

    def __init__(self, member_id, instance_id, client_id, client_host, session_ms,
                 rebalance_ms, protocol_type, protocols):
        self.member_id = member_id
        self.instance_id = instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.session_ms = session_ms
        self.rebalance_ms = rebalance_ms
        self.protocol_type = protocol_type
        self.protocols: list[tuple[str, bytes]] = protocols
        self.assignment = b""
        self.join: _Waiter | None = None
        self.sync: _Waiter | None = None
        self.deadline = 0.0
        self.is_new = False

    def metadata(self, protocol: str | None) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""


class Group:
    """A classic group (Kafka ``ClassicGroup``)."""

    def __init__(self, group_id: str):
        self.id = group_id
        self.state = EMPTY
        self.previous = DEAD
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol: str | None = None
        self.leader: str | None = None
        self.members: dict[str, Member] = {}
        self.pending: dict[str, float] = {}  # member id -> deadline (MEMBER_ID_REQUIRED)
        self.static: dict[str, str] = {}  # instance id -> member id
        self.pending_sync: set[str] = set()
        self.join_deadline: float | None = None
        self.initial_remaining_ms = 0
        self.new_member_added = False
        self.sync_deadline: float | None = None
        self.state_timestamp = -1
        self.recorded = False  # a GroupMetadata record of it is in the log

    def transition(self, state: str) -> None:
        self.previous, self.state = self.state, state
        self.state_timestamp = int(time.time() * 1000)

    @property
    def rebalance_ms(self) -> int:
        return max((m.rebalance_ms for m in self.members.values()), default=0)

    def all_joined(self) -> bool:
        return not self.pending and all(m.join is not None for m in self.members.values())

    def supports(self, protocol_type: str, protocols) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        names = {n for n, _d in protocols}
        return bool(self._candidates() & names)

    def _candidates(self) -> set[str]:
        sets = [{n for n, _d in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str | None:
        candidates = self._candidates()
        votes = Counter()
        order = []
        for m in self.members.values():
            for name, _d in m.protocols:
                if name in candidates:
                    votes[name] += 1
                    if name not in order:
                        order.append(name)
                    break
        return max(order, key=lambda n: votes[n]) if order else None

    def is_subscribed(self, topic: str) -> bool | None:
        """Whether a member's consumer-protocol subscription names ``topic`` (None: not
        known)."""
        if self.protocol_type != "consumer" or not self.members:
            return False if not self.members else None
        for m in self.members.values():
            data = m.metadata(self.protocol)
            topics = _subscription_topics(data)
            if topics is None:
                return None
            if topic in topics:
                return True
        return False


def _subscription_topics(data: bytes) -> set[str] | None:
    """The topics of a ConsumerProtocolSubscription (version prefix, then an array of
    strings), None when it does not parse."""
    try:
        n = struct.unpack_from(">i", data, 2)[0]
        pos, out = 6, set()
        for _ in range(n):
            ln = _I16.unpack_from(data, pos)[0]
            out.add(data[pos + 2:pos + 2 + ln].decode("utf-8"))
            pos += 2 + ln
        return out
    except (struct.error, UnicodeDecodeError):
        return None


class Coordinator:
    """The classic groups of one node over ``broker``'s storage core."""

    def __init__(self, broker):
        self.broker = broker
        self.config = broker.config
        self.groups: dict[str, Group] = {}
        self.schema = tables.schema("group")

    # -- the log ------------------------------------------------------------------------
    def _partitions(self) -> int:
        parts = self.broker.manager.partitions(CONSUMER_OFFSETS)
        return max(parts) + 1 if parts else self.config.offsets_topic_num_partitions

    async def ensure_offsets_topic(self) -> bool:
        """Whether ``__consumer_offsets`` exists; creates it when it does not (False then,
        as Kafka answers COORDINATOR_NOT_AVAILABLE while it is made)."""
        manager = self.broker.manager
        if manager.partitions(CONSUMER_OFFSETS):
            return True
        if self.broker.core.read_only:
            return False
        n, overrides = offsets_topic_config(manager.config)
        try:
            await trio.to_thread.run_sync(manager.create_topic, CONSUMER_OFFSETS, n, overrides)
            log.info("Created %s with %d partitions", CONSUMER_OFFSETS, n)
        except LogError as exc:
            log.debug("creating %s: %s", CONSUMER_OFFSETS, exc)
        return False

    async def _append(self, group_id: str, records: list[tuple],
                      producer: tuple[int, int] | None = None) -> int:
        """Append ``records`` ((key, value or None)) as one batch to the group's partition
        (a transactional one of ``producer`` (id, epoch) when given: TxnOffsetCommit); the
        error code (NONE, or Kafka's mapping of a failed write: 15/16/-1)."""
        if not records:
            return K.NONE
        manager = self.broker.manager
        try:
            if not manager.partitions(CONSUMER_OFFSETS):
                await self.ensure_offsets_topic()
            p = coordinator_partition(group_id, self._partitions())
            lg = manager.get_log(CONSUMER_OFFSETS, p)
            ts = int(time.time() * 1000)
            rows = [(ts, k, v, ()) for k, v in records]
            if producer is None:
                lg.append(rows)
            else:  # (as GroupMetadataManager.storeOffsets writes a transactional commit)
                lg.append_encoded(bytearray(encode_batch(
                    rows, producer_id=producer[0], producer_epoch=producer[1],
                    base_sequence=0, is_transactional=True)))
            return K.NONE
        except (LogError, OSError) as exc:
            log.warning("writing group %r's records failed: %s", group_id, exc)
            code = K.code_of(exc)
            return {K.UNKNOWN_TOPIC_OR_PARTITION: K.COORDINATOR_NOT_AVAILABLE,
                    K.KAFKA_STORAGE_ERROR: K.NOT_COORDINATOR,
                    K.MESSAGE_TOO_LARGE: K.UNKNOWN_SERVER_ERROR}.get(code, code)

    def _group_key(self, group_id: str) -> bytes:
        return _I16.pack(2) + self.schema.by_api(2, "Key").encode({"group": group_id}, 0)

    def _metadata_record(self, g: Group) -> tuple[bytes, bytes]:
        value = {"protocolType": g.protocol_type or "", "generation": g.generation,
                 "protocol": g.protocol, "leader": g.leader,
                 "currentStateTimestamp": g.state_timestamp,
                 "members": [{"memberId": m.member_id, "groupInstanceId": m.instance_id,
                              "clientId": m.client_id, "clientHost": m.client_host,
                              "rebalanceTimeout": m.rebalance_ms,
                              "sessionTimeout": m.session_ms,
                              "subscription": m.metadata(g.protocol),
                              "assignment": m.assignment} for m in g.members.values()]
                 if g.protocol is not None else []}
        data = _I16.pack(3) + self.schema.by_api(2, "Value").encode(value, 3)
        g.recorded = True
        return self._group_key(g.id), data

    def _home(self, group_id: str):
        gp = self.broker.core.groups.home(group_id)
        if gp is not None:
            gp.catch_up()
        return gp

    def stored(self, group_id: str):
        """The group as its records left it (a :class:`kafkafs.log.groups.Group`), None."""
        gp = self._home(group_id)
        if gp is None:
            return None
        g = gp.group(group_id)
        if g is None and gp.offsets(group_id):
            from ..log.groups import Group as StoredGroup
            return StoredGroup(group_id)
        return g

    def committed(self, group_id: str) -> dict:
        """``{(topic, partition): OffsetCommit}`` of ``group_id``, from the log."""
        gp = self._home(group_id)
        if gp is None:
            return {}
        return {(t, p): c for (_g, t, p), c in gp.offsets(group_id).items()}

    def get(self, group_id: str) -> Group | None:
        """The live group, loaded from its records on first use; an empty one that another
        door deleted since is forgotten."""
        g = self.groups.get(group_id)
        if g is not None:
            if g.state == EMPTY and not g.members and not g.pending and g.recorded:
                if self.stored(group_id) is None:  # (deleted through another door)
                    del self.groups[group_id]
                    return None
            return g
        stored = self.stored(group_id)
        if stored is None:
            return None
        if stored.kind not in (None, "classic"):
            g = Group(group_id)
            g.protocol_type = "consumer"
            g.state = DEAD  # another protocol's group: not served here
            return g
        g = Group(group_id)
        g.recorded = stored.kind is not None
        md = stored.metadata
        if md is not None:
            g.generation = md["generation"]
            g.protocol_type = md["protocolType"] or None
            g.protocol = md["protocol"]
            g.leader = md["leader"]
            g.state_timestamp = md.get("currentStateTimestamp", -1)
            now = trio.current_time()
            for mm in md["members"]:
                m = Member(mm["memberId"], mm.get("groupInstanceId"), mm["clientId"],
                           mm["clientHost"], mm["sessionTimeout"],
                           mm.get("rebalanceTimeout", -1) if mm.get("rebalanceTimeout", -1) >= 0
                           else mm["sessionTimeout"], g.protocol_type,
                           [(g.protocol, mm["subscription"])] if g.protocol else [])
                m.assignment = mm["assignment"]
                m.deadline = now + m.session_ms / 1000
                g.members[m.member_id] = m
                if m.instance_id:
                    g.static[m.instance_id] = m.member_id
            g.state = STABLE if g.members else EMPTY
        self.groups[group_id] = g
        return g

    # -- the state machine --------------------------------------------------------------
    def _join_result(self, g: Group, m: Member, code: int = K.NONE) -> dict:
        return {"errorCode": code, "generationId": g.generation,
                "protocolType": g.protocol_type, "protocolName": g.protocol,
                "leader": g.leader or "", "skipAssignment": False, "memberId": m.member_id,
                "members": [{"memberId": x.member_id, "groupInstanceId": x.instance_id,
                             "metadata": x.metadata(g.protocol)}
                            for x in g.members.values()] if m.member_id == g.leader else []}

    def _add_member(self, g: Group, m: Member) -> None:
        if g.state == PREPARING and g.previous == EMPTY:
            g.new_member_added = True
        if not g.members:
            g.protocol_type = m.protocol_type
        g.members[m.member_id] = m
        if m.instance_id:
            g.static[m.instance_id] = m.member_id
        if g.leader is None:
            g.leader = m.member_id
        m.is_new = True
        m.deadline = trio.current_time() + NEW_MEMBER_JOIN_TIMEOUT_MS / 1000
        m.join = _Waiter()

    def _drop(self, g: Group, member_id: str) -> Member | None:
        """Take a member out of ``g`` (``removeMember``): its static id mapping goes, its
        parked JoinGroup gets UNKNOWN_MEMBER_ID, a new leader is the next member. No
        rebalance here. Returns the member (None: it was not there)."""
        m = g.members.pop(member_id, None)
        if m is None:
            return None
        if m.instance_id and g.static.get(m.instance_id) == member_id:
            del g.static[m.instance_id]
        if m.join is not None:
            m.join.answer(self._error_join(K.UNKNOWN_MEMBER_ID, ""))
        if g.leader == member_id:
            g.leader = next(iter(g.members), None)
        g.pending_sync.discard(member_id)
        return m

    async def _remove_member(self, g: Group, member_id: str) -> None:
        if self._drop(g, member_id) is None:
            return
        if g.state in (STABLE, COMPLETING):
            await self._prepare_rebalance(g)
        elif g.state == PREPARING:
            await self._maybe_complete_join(g)

    @staticmethod
    def _error_join(code: int, member_id: str) -> dict:
        return {"errorCode": code, "generationId": -1, "protocolType": None,
                "protocolName": None, "leader": "", "skipAssignment": False,
                "memberId": member_id, "members": []}

    async def _prepare_rebalance(self, g: Group) -> None:
        if g.state == COMPLETING:
            for m in g.members.values():
                m.assignment = b""
                if m.sync is not None:
                    m.sync.answer({"errorCode": K.REBALANCE_IN_PROGRESS, "assignment": b""})
                    m.sync = None
        g.pending_sync.clear()
        g.sync_deadline = None
        log.info("Preparing to rebalance group %s in state %s with old generation %d",
                 g.id, g.state, g.generation)
        now = trio.current_time()
        if g.state == EMPTY:
            delay = self.config.group_initial_rebalance_delay_ms
            g.transition(PREPARING)
            g.initial_remaining_ms = max(g.rebalance_ms - delay, 0)
            g.new_member_added = False
            g.join_deadline = now + delay / 1000
        else:
            g.transition(PREPARING)
            if g.all_joined():
                await self._complete_join(g)
            else:
                g.join_deadline = now + g.rebalance_ms / 1000

    async def _maybe_complete_join(self, g: Group) -> None:
        if g.state == PREPARING and g.previous != EMPTY and g.all_joined():
            await self._complete_join(g)

    async def _complete_join(self, g: Group) -> None:
        for mid in [mid for mid, m in g.members.items() if m.join is None and not m.instance_id]:
            self._drop(g, mid)
        joined = [m for m in g.members.values() if m.join is not None]
        if g.leader is None or g.leader not in g.members or g.members[g.leader].join is None:
            g.leader = joined[0].member_id if joined else next(iter(g.members), None)
        if g.members and not joined:
            g.join_deadline = trio.current_time() + g.rebalance_ms / 1000
            return
        g.join_deadline = None
        g.generation += 1
        if not g.members:
            g.protocol = None
            g.leader = None
            g.transition(EMPTY)
            await self._append(g.id, [self._metadata_record(g)])
            return
        g.protocol = g.select_protocol()
        g.transition(COMPLETING)
        log.info("Stabilized group %s generation %d with %d members", g.id, g.generation,
                 len(g.members))
        now = trio.current_time()
        for m in g.members.values():
            if m.join is not None:
                m.join.answer(self._join_result(g, m))
                m.join = None
            m.is_new = False
            m.deadline = now + m.session_ms / 1000
            g.pending_sync.add(m.member_id)
        g.sync_deadline = now + g.rebalance_ms / 1000

    async def tick(self) -> None:
        """Expire sessions, pending members and the join and sync timers."""
        now = trio.current_time()
        for g in list(self.groups.values()):
            for mid, deadline in list(g.pending.items()):
                if deadline <= now:
                    del g.pending[mid]
                    await self._maybe_complete_join(g)
            for m in list(g.members.values()):
                if m.deadline <= now:
                    satisfied = not m.is_new and (m.join is not None or m.sync is not None)
                    if not satisfied:
                        log.info("Member %s of group %s expired (session timeout %d ms)",
                                 m.member_id, g.id, m.session_ms)
                        await self._remove_member(g, m.member_id)
            if g.state == PREPARING and g.join_deadline is not None and g.join_deadline <= now:
                if g.previous == EMPTY and g.new_member_added and g.initial_remaining_ms > 0:
                    g.new_member_added = False
                    delay = min(self.config.group_initial_rebalance_delay_ms,
                                g.initial_remaining_ms)
                    g.initial_remaining_ms = max(
                        g.initial_remaining_ms - self.config.group_initial_rebalance_delay_ms, 0)
                    g.join_deadline = now + delay / 1000
                else:
                    await self._complete_join(g)
            if g.state == COMPLETING and g.sync_deadline is not None and g.sync_deadline <= now:
                g.sync_deadline = None
                for mid in list(g.pending_sync):
                    self._drop(g, mid)
                await self._prepare_rebalance(g)

    async def run(self) -> None:
        """The timers, until cancelled."""
        while True:
            await trio.sleep(_TICK_S)
            try:
                await self.tick()
            except Exception:
                log.exception("the group coordinator's timers failed")

    def _validate_member(self, g: Group, member_id: str, instance_id: str | None) -> int:
        if instance_id is not None:
            known = g.static.get(instance_id)
            if known is None:
                return K.UNKNOWN_MEMBER_ID
            if known != member_id:
                return K.FENCED_INSTANCE_ID
        if member_id not in g.members:
            return K.UNKNOWN_MEMBER_ID
        return K.NONE

    # -- JoinGroup ---------------------------------------------------------------------
    async def join(self, body: dict, version: int, client_id: str, host: str) -> dict:
        gid, mid = body["groupId"], body["memberId"]
        session = body["sessionTimeoutMs"]
        rebalance = body.get("rebalanceTimeoutMs", -1) if version >= 1 else session
        if rebalance < 0:
            rebalance = session
        instance = body.get("groupInstanceId")
        ptype = body["protocolType"]
        protocols = [(p["name"], p["metadata"]) for p in body["protocols"]]
        if not gid:
            return self._error_join(K.INVALID_GROUP_ID, mid)
        if not (self.config.group_min_session_timeout_ms <= session <=
                self.config.group_max_session_timeout_ms):
            return self._error_join(K.INVALID_SESSION_TIMEOUT, mid)
        if not await self.ensure_offsets_topic():
            return self._error_join(K.COORDINATOR_NOT_AVAILABLE, mid)
        g = self.get(gid)
        if g is None:
            if mid:
                return self._error_join(K.UNKNOWN_MEMBER_ID, mid)
            g = self.groups[gid] = Group(gid)
            await self._append(gid, [self._metadata_record(g)])
        if g.state == DEAD:
            return self._error_join(K.INCONSISTENT_GROUP_PROTOCOL if g.protocol_type ==
                                    "consumer" else K.COORDINATOR_NOT_AVAILABLE, "")
        if len(g.members) >= self.config.group_max_size and mid not in g.members:
            return self._error_join(K.GROUP_MAX_SIZE_REACHED, "")
        if not mid:
            if not g.supports(ptype, protocols):
                return self._error_join(K.INCONSISTENT_GROUP_PROTOCOL, "")
            if instance is not None and instance in g.static:
                return await self._replace_static(g, instance, client_id, host, session,
                                                  rebalance, ptype, protocols, version)
            new_id = f"{instance or client_id}-{uuid.uuid4()}"
            if instance is None and version >= 4:
                g.pending[new_id] = trio.current_time() + session / 1000
                return self._error_join(K.MEMBER_ID_REQUIRED, new_id)
            m = Member(new_id, instance, client_id, host, session, rebalance, ptype, protocols)
            return await self._add_and_park(g, m)
        if mid in g.pending:
            del g.pending[mid]
            if not g.supports(ptype, protocols):
                return self._error_join(K.INCONSISTENT_GROUP_PROTOCOL, mid)
            m = Member(mid, instance, client_id, host, session, rebalance, ptype, protocols)
            return await self._add_and_park(g, m)
        code = self._validate_member(g, mid, instance)
        if code:
            return self._error_join(code, mid)
        if not g.supports(ptype, protocols) and not (len(g.members) == 1 and mid in g.members):
            return self._error_join(K.INCONSISTENT_GROUP_PROTOCOL, mid)
        m = g.members[mid]
        same = m.protocols == protocols
        m.session_ms, m.rebalance_ms, m.protocols = session, rebalance, protocols
        m.protocol_type = ptype
        if g.state == PREPARING:
            return await self._park(g, m, complete=True)
        if g.state == COMPLETING:
            if same:
                return self._join_result(g, m)
            return await self._park(g, m, rebalance=True)
        if g.state == STABLE:
            if mid == g.leader or not same:
                return await self._park(g, m, rebalance=True)
            return self._join_result(g, m)
        return self._error_join(K.UNKNOWN_MEMBER_ID, mid)

    async def _add_and_park(self, g: Group, m: Member) -> dict:
        self._add_member(g, m)
        waiter = m.join
        if g.state in (EMPTY, STABLE, COMPLETING):
            await self._prepare_rebalance(g)
        else:
            await self._maybe_complete_join(g)
        async with self.broker.parked():
            await waiter.event.wait()
        return waiter.result

    async def _park(self, g: Group, m: Member, *, complete=False, rebalance=False) -> dict:
        if m.join is None:
            m.join = _Waiter()
        waiter = m.join
        if rebalance:
            await self._prepare_rebalance(g)
        elif complete:
            await self._maybe_complete_join(g)
        async with self.broker.parked():
            await waiter.event.wait()
        return waiter.result

    async def _replace_static(self, g, instance, client_id, host, session, rebalance, ptype,
                              protocols, version) -> dict:
        old_id = g.static[instance]
        old = g.members.pop(old_id)
        new_id = f"{instance}-{uuid.uuid4()}"
        if old.join is not None:
            old.join.answer(self._error_join(K.FENCED_INSTANCE_ID, old_id))
        if old.sync is not None:
            old.sync.answer({"errorCode": K.FENCED_INSTANCE_ID, "assignment": b""})
        m = Member(new_id, instance, client_id, host, session, rebalance, ptype, protocols)
        m.assignment = old.assignment
        m.deadline = trio.current_time() + session / 1000
        g.members[new_id] = m
        g.static[instance] = new_id
        if g.leader == old_id:
            g.leader = new_id
        if old_id in g.pending_sync:
            g.pending_sync.discard(old_id)
            g.pending_sync.add(new_id)
        if g.state == STABLE and g.select_protocol() == g.protocol:
            code = await self._append(g.id, [self._metadata_record(g)])
            if code:
                return self._error_join(code, new_id)
            res = self._join_result(g, m)
            if version >= 9 and new_id == g.leader:
                res["skipAssignment"] = True
            elif new_id == g.leader:
                res["members"] = []
            return res
        m.join = _Waiter()
        waiter = m.join
        if g.state == PREPARING:
            await self._maybe_complete_join(g)
        else:
            await self._prepare_rebalance(g)
        async with self.broker.parked():
            await waiter.event.wait()
        return waiter.result

    # -- SyncGroup, Heartbeat, LeaveGroup ---------------------------------------------------
    async def sync(self, body: dict, version: int) -> dict:
        gid, mid = body["groupId"], body["memberId"]
        out = {"errorCode": K.NONE, "protocolType": None, "protocolName": None,
               "assignment": b""}
        if version >= 5 and (body.get("protocolType") is None or
                             body.get("protocolName") is None):
            out["errorCode"] = K.INCONSISTENT_GROUP_PROTOCOL
            return out
        if not gid:
            out["errorCode"] = K.INVALID_GROUP_ID
            return out
        g = self.get(gid)
        if g is None or g.state == EMPTY:
            out["errorCode"] = K.UNKNOWN_MEMBER_ID
            return out
        if g.state == DEAD:
            out["errorCode"] = K.COORDINATOR_NOT_AVAILABLE
            return out
        code = self._validate_member(g, mid, body.get("groupInstanceId"))
        if not code and body["generationId"] != g.generation:
            code = K.ILLEGAL_GENERATION
        if not code and ((body.get("protocolType") is not None and
                          body["protocolType"] != g.protocol_type) or
                         (body.get("protocolName") is not None and
                          body["protocolName"] != g.protocol)):
            code = K.INCONSISTENT_GROUP_PROTOCOL
        if code:
            out["errorCode"] = code
            return out
        if g.state == PREPARING:
            out["errorCode"] = K.REBALANCE_IN_PROGRESS
            return out
        m = g.members[mid]
        if g.state == STABLE:
            out.update(protocolType=g.protocol_type, protocolName=g.protocol,
                       assignment=m.assignment)
            return out
        # CompletingRebalance: park; the leader's assignment ends it
        m.sync = waiter = _Waiter()
        g.pending_sync.discard(mid)
        if mid == g.leader:
            generation = g.generation
            log.info("Assignment received from leader %s for group %s for generation %d. The "
                     "group has %d members, %d of which are static.", mid, g.id, generation,
                     len(g.members), len(g.static))
            assignments = {a["memberId"]: a["assignment"] for a in body["assignments"]}
            for x in g.members.values():
                x.assignment = assignments.get(x.member_id, b"")
            code = await self._append(g.id, [self._metadata_record(g)])
            if g.state == COMPLETING and g.generation == generation:
                if code:
                    for x in g.members.values():
                        x.assignment = b""
                        if x.sync is not None:
                            x.sync.answer({"errorCode": code, "assignment": b""})
                            x.sync = None
                    await self._prepare_rebalance(g)
                else:
                    g.transition(STABLE)
                    g.sync_deadline = None
                    now = trio.current_time()
                    for x in g.members.values():
                        x.deadline = now + x.session_ms / 1000
                        if x.sync is not None:
                            x.sync.answer({"errorCode": K.NONE, "protocolType": g.protocol_type,
                                           "protocolName": g.protocol,
                                           "assignment": x.assignment})
                            x.sync = None
        async with self.broker.parked():
            await waiter.event.wait()
        return {**out, **waiter.result}

    def heartbeat(self, body: dict) -> int:
        gid, mid = body["groupId"], body["memberId"]
        if not gid:
            return K.INVALID_GROUP_ID
        g = self.get(gid)
        if g is None:
            return K.UNKNOWN_MEMBER_ID
        if g.state == DEAD:
            return K.COORDINATOR_NOT_AVAILABLE
        code = self._validate_member(g, mid, body.get("groupInstanceId"))
        if code:
            return code
        if body["generationId"] != g.generation:
            return K.ILLEGAL_GENERATION
        if g.state == EMPTY:
            return K.UNKNOWN_MEMBER_ID
        m = g.members[mid]
        m.deadline = trio.current_time() + m.session_ms / 1000
        return K.REBALANCE_IN_PROGRESS if g.state == PREPARING else K.NONE

    async def leave(self, gid: str, members: list[dict]) -> tuple[int, list[dict]]:
        if not gid:
            return K.INVALID_GROUP_ID, []
        g = self.get(gid)
        if g is None:
            return K.NONE, [{"memberId": m["memberId"], "groupInstanceId": m.get("groupInstanceId"),
                             "errorCode": K.UNKNOWN_MEMBER_ID} for m in members]
        if g.state == DEAD:
            return K.COORDINATOR_NOT_AVAILABLE, []
        out = []
        left = []
        for req in members:
            mid, inst = req["memberId"], req.get("groupInstanceId")
            code = K.NONE
            if not mid and inst is not None:
                if inst in g.static:
                    left.append(g.static[inst])
                else:
                    code = K.UNKNOWN_MEMBER_ID
            elif mid in g.pending:
                del g.pending[mid]
            else:
                code = self._validate_member(g, mid, inst)
                if not code:
                    left.append(mid)
            out.append({"memberId": mid, "groupInstanceId": inst, "errorCode": code})
        for mid in left:
            self._drop(g, mid)
        if left:
            if g.state in (STABLE, COMPLETING):
                await self._prepare_rebalance(g)
            elif g.state == PREPARING:
                await self._maybe_complete_join(g)
        return K.NONE, out

    # -- offsets ------------------------------------------------------------------------
    async def commit(self, body: dict, version: int) -> tuple[int, list[tuple]]:
        """(group error, [(topic, partition, offset, epoch, metadata)] accepted)."""
        gid = body["groupId"]
        gen = body.get("generationIdOrMemberEpoch", -1)
        mid = body.get("memberId", "")
        inst = body.get("groupInstanceId")
        g = self.get(gid)
        if g is None:
            if gen >= 0:
                return (K.GROUP_ID_NOT_FOUND if version >= 9 else K.ILLEGAL_GENERATION), []
            g = self.groups[gid] = Group(gid)  # a simple group
        elif g.state == DEAD:
            return K.COORDINATOR_NOT_AVAILABLE, []
        elif gen >= 0 or mid or inst is not None:
            code = self._validate_member(g, mid, inst)
            if code:
                return code, []
            if gen != g.generation:
                return K.ILLEGAL_GENERATION, []
            if g.state == COMPLETING:
                return K.REBALANCE_IN_PROGRESS, []
            m = g.members[mid]
            m.deadline = trio.current_time() + m.session_ms / 1000
        elif g.state != EMPTY:
            return K.UNKNOWN_MEMBER_ID, []
        return K.NONE, []

    def offset_value(self, offset: int, epoch: int, metadata: str, now: int,
                     expire: int) -> bytes:
        msg = self.schema.by_api(1, "Value")
        if expire >= 0:
            return _I16.pack(1) + msg.encode({"offset": offset, "metadata": metadata,
                                              "commitTimestamp": now,
                                              "expireTimestamp": expire}, 1)
        return _I16.pack(4) + msg.encode({"offset": offset, "leaderEpoch": epoch,
                                          "metadata": metadata, "commitTimestamp": now}, 4)

    async def write_commits(self, gid: str, commits: list[tuple], retention: int,
                            producer: tuple[int, int] | None = None) -> int:
        """Write ``commits`` ([(topic, partition, offset, leader epoch, metadata)]) of
        ``gid``, as ``producer``'s (id, epoch) transactional batch when given; the error
        code."""
        now = int(time.time() * 1000)
        expire = now + retention if retention >= 0 else -1
        records = [(offset_commit_key(gid, t, p), self.offset_value(o, e, md, now, expire))
                   for t, p, o, e, md in commits]
        return await self._append(gid, records, producer)

    async def delete_group(self, gid: str) -> int:
        g = self.get(gid)
        stored = self.stored(gid)
        if stored is None and g is not None and not g.recorded and g.state == EMPTY:
            self.groups.pop(gid, None)  # a simple group whose offsets are all gone
            return K.NONE
        if g is None and stored is None:
            return K.GROUP_ID_NOT_FOUND
        if g is not None and g.state == DEAD and stored is None:
            return K.GROUP_ID_NOT_FOUND
        if g is not None and g.state in (STABLE, PREPARING, COMPLETING):
            return K.NON_EMPTY_GROUP
        records = offset_tombstones(gid, sorted(self.committed(gid)))
        if stored is not None and stored.records:
            records += group_tombstones(stored)
        else:
            records.append((self._group_key(gid), None))
        code = await self._append(gid, records)
        if not code:
            self.groups.pop(gid, None)
        return code

    def listed(self) -> list[tuple[str, str, str, str]]:
        """(group id, protocol type, state, type) of every group: the live ones and those
        only the log knows."""
        out = {}
        for gid in list(self.groups):
            g = self.get(gid)
            if g is not None and g.state != DEAD:
                out[gid] = (gid, g.protocol_type or "", g.state, "classic")
        for gid in self.broker.core.groups.groups():
            if gid in out:
                continue
            g = self.get(gid)
            if g is None:
                continue
            if g.state == DEAD:
                out[gid] = (gid, "consumer", "Stable", "consumer")
            else:
                out[gid] = (gid, g.protocol_type or "", g.state, "classic")
        return list(out.values())


def make_state(broker) -> Coordinator:
    return Coordinator(broker)


# -- the apis ---------------------------------------------------------------------------

_COORD_NAMES = {0: "group", 1: "transaction", 2: "share"}


async def find_coordinator(broker, request, conn) -> dict:
    """``KafkaApis.handleFindCoordinatorRequest``: this node for group and transaction
    keys (creating ``__consumer_offsets`` or ``__transaction_state`` first,
    COORDINATOR_NOT_AVAILABLE meanwhile); share keys are not served."""
    body, v = request.body, request.api_version
    coord: Coordinator = broker.state["coordinator"]
    ktype = body.get("keyType", 0)
    keys = body["coordinatorKeys"] if v >= 4 else [body["key"]]
    ep = broker.endpoint
    results = []
    for key in keys:
        r = {"key": key, "nodeId": -1, "host": "", "port": -1, "errorCode": K.NONE,
             "errorMessage": ""}
        if ktype not in (0, 1, 2):
            r["errorCode"] = K.INVALID_REQUEST
            r["errorMessage"] = "This most likely occurs because of a request being malformed " \
                "by the client library or the message was sent to an incompatible broker. " \
                "See the broker logs for more details."
        elif ktype == 2 and v < 6:
            r["errorCode"] = K.INVALID_REQUEST
        elif ktype == 1:  # (read-only: this node, whose InitProducerId then refuses)
            if broker.core.read_only or await broker.state["transactions"].ensure_topic():
                r.update(nodeId=broker.node_id, host=ep.host, port=ep.port)
            else:
                r["errorCode"] = K.COORDINATOR_NOT_AVAILABLE
                r["errorMessage"] = "The coordinator is not available."
        elif ktype != 0:
            r["errorCode"] = K.COORDINATOR_NOT_AVAILABLE
            r["errorMessage"] = f"kafkafs has no {_COORD_NAMES[ktype]} coordinator"
        elif not await coord.ensure_offsets_topic():
            r["errorCode"] = K.COORDINATOR_NOT_AVAILABLE
            r["errorMessage"] = "The coordinator is not available."
        else:
            r.update(nodeId=broker.node_id, host=ep.host, port=ep.port)
        results.append(r)
    if v >= 4:
        return {"throttleTimeMs": 0, "coordinators": results}
    r = results[0]
    msg = "NONE" if r["errorCode"] == K.NONE else r["errorMessage"]
    return {"throttleTimeMs": 0, "errorCode": r["errorCode"], "errorMessage": msg,
            "nodeId": r["nodeId"], "host": r["host"], "port": r["port"]}


async def join_group(broker, request, conn) -> dict:
    """``GroupCoordinator.joinGroup``: parks until the join phase completes."""
    coord: Coordinator = broker.state["coordinator"]
    res = await coord.join(request.body, request.api_version, request.client_id or "",
                           "/" + conn.peer.rsplit(":", 1)[0])
    if request.api_version < 7 and res.get("protocolName") is None:
        res["protocolName"] = ""
    return {"throttleTimeMs": 0, **res}


async def sync_group(broker, request, conn) -> dict:
    """``GroupCoordinator.syncGroup``: parks until the leader's assignment is written."""
    coord: Coordinator = broker.state["coordinator"]
    return {"throttleTimeMs": 0, **await coord.sync(request.body, request.api_version)}


async def heartbeat(broker, request, conn) -> dict:
    """``GroupCoordinator.heartbeat``."""
    coord: Coordinator = broker.state["coordinator"]
    return {"throttleTimeMs": 0, "errorCode": coord.heartbeat(request.body)}


async def leave_group(broker, request, conn) -> dict:
    """``GroupCoordinator.leaveGroup`` (version 0-2: one member, the error folded)."""
    coord: Coordinator = broker.state["coordinator"]
    body, v = request.body, request.api_version
    members = body["members"] if v >= 3 else [{"memberId": body["memberId"],
                                               "groupInstanceId": None}]
    code, results = await coord.leave(body["groupId"], members)
    if v >= 3:
        return {"throttleTimeMs": 0, "errorCode": code, "members": results}
    return {"throttleTimeMs": 0,
            "errorCode": code or (results[0]["errorCode"] if results else K.NONE)}


async def offset_commit(broker, request, conn) -> dict:
    """``GroupCoordinator.commitOffsets``: OffsetCommitValue records, the response after
    they are written."""
    coord: Coordinator = broker.state["coordinator"]
    body, v = request.body, request.api_version
    manager = broker.manager
    if not await coord.ensure_offsets_topic():
        return {"throttleTimeMs": 0, "topics": [
            {"name": t["name"], "partitions": [{"partitionIndex": p["partitionIndex"],
                                                "errorCode": K.COORDINATOR_NOT_AVAILABLE}
                                               for p in t["partitions"]]}
            for t in body["topics"]]}
    code, _ = await coord.commit(body, v)
    retention = body.get("retentionTimeMs", -1) if 2 <= v <= 4 else -1
    return {"throttleTimeMs": 0, "topics": await write_commit_request(
        coord, manager, body["groupId"], body["topics"], code, retention)}


async def write_commit_request(coord: Coordinator, manager, gid: str, topics: list, code: int,
                               retention: int,
                               producer: tuple[int, int] | None = None) -> list[dict]:
    """The response topics of an OffsetCommit or TxnOffsetCommit of ``topics`` (the
    request's) once the accepted commits are written (as ``producer``'s (id, epoch)
    transactional batch when given): per partition UNKNOWN_TOPIC_OR_PARTITION (KafkaApis
    filters those first), else the request's ``code``, OFFSET_METADATA_TOO_LARGE over
    ``offset.metadata.max.bytes`` (characters), else the write's code."""
    topics_out, commits, places = [], [], []
    for t in topics:
        parts = []
        known = set(manager.partitions(t["name"]))
        for p in t["partitions"]:
            index = p["partitionIndex"]
            md = p["committedMetadata"]
            if index not in known:
                pc = K.UNKNOWN_TOPIC_OR_PARTITION
            elif code:
                pc = code
            elif md is not None and len(md.encode("utf-16-le")) // 2 > OFFSET_METADATA_MAX_BYTES:
                pc = K.OFFSET_METADATA_TOO_LARGE
            else:
                pc = K.NONE
                commits.append((t["name"], index, p["committedOffset"],
                                p.get("committedLeaderEpoch", -1), md or ""))
                places.append((len(topics_out), len(parts)))
            parts.append({"partitionIndex": index, "errorCode": pc})
        topics_out.append({"name": t["name"], "partitions": parts})
    if commits:
        wcode = await coord.write_commits(gid, commits, retention, producer)
        if wcode:
            for ti, pi in places:
                topics_out[ti]["partitions"][pi]["errorCode"] = wcode
    return topics_out


def _fetch_group(coord: Coordinator, gid: str, topics, v: int,
                 require_stable: bool = False) -> list[dict]:
    """The OffsetFetch topics of ``gid``; with ``require_stable`` (v7+: a read_committed
    consumer) a partition whose offset a transaction has pending is UNSTABLE_OFFSET_COMMIT,
    which the consumer retries until the transaction ends (Kafka's ``fetchOffsets``)."""
    committed = coord.committed(gid)
    unstable = set()
    if require_stable:
        gp = coord._home(gid)
        if gp is not None:
            unstable = {(t, p) for rows in gp.pending_offsets().values()
                        for g, t, p in rows if g == gid}
    if topics is None:
        by_topic: dict[str, list] = {}
        for (t, p), c in sorted(committed.items()):
            by_topic.setdefault(t, []).append((p, c))
        wanted = [(t, [p for p, _c in ps]) for t, ps in by_topic.items()]
    else:
        wanted = [(t["name"], t["partitionIndexes"]) for t in topics]
    out = []
    for name, parts in wanted:
        ps = []
        for p in parts:
            if (name, p) in unstable:
                ps.append({"partitionIndex": p, "committedOffset": -1,
                           "committedLeaderEpoch": -1, "metadata": "",
                           "errorCode": K.UNSTABLE_OFFSET_COMMIT})
                continue
            c = committed.get((name, p))
            ps.append({"partitionIndex": p, "committedOffset": c.offset if c else -1,
                       "committedLeaderEpoch": c.leader_epoch if c else -1,
                       "metadata": c.metadata if c else "", "errorCode": K.NONE})
        out.append({"name": name, "partitions": ps})
    return out


async def offset_fetch(broker, request, conn) -> dict:
    """``GroupCoordinator.fetchOffsets``: from the log's replay (a worker thread)."""
    coord: Coordinator = broker.state["coordinator"]
    body, v = request.body, request.api_version
    ready = await coord.ensure_offsets_topic()
    if v >= 8:
        groups = []
        for gr in body["groups"]:
            if not ready:
                groups.append({"groupId": gr["groupId"], "topics": [],
                               "errorCode": K.COORDINATOR_NOT_AVAILABLE})
                continue
            groups.append({"groupId": gr["groupId"],
                           "topics": await trio.to_thread.run_sync(
                               _fetch_group, coord, gr["groupId"], gr["topics"], v,
                               body["requireStable"]),
                           "errorCode": K.NONE})
        return {"throttleTimeMs": 0, "groups": groups}
    if not ready:
        return {"throttleTimeMs": 0, "topics": [], "errorCode": K.COORDINATOR_NOT_AVAILABLE}
    topics = body["topics"]
    return {"throttleTimeMs": 0, "errorCode": K.NONE,
            "topics": await trio.to_thread.run_sync(
                _fetch_group, coord, body["groupId"], topics, v,
                body.get("requireStable", False))}


async def offset_delete(broker, request, conn) -> dict:
    """``GroupCoordinator.deleteOffsets``: tombstones."""
    coord: Coordinator = broker.state["coordinator"]
    body = request.body
    gid = body["groupId"]
    out = {"errorCode": K.NONE, "throttleTimeMs": 0, "topics": []}
    if not gid:
        out["errorCode"] = K.INVALID_GROUP_ID
        return out
    g = coord.get(gid)
    if g is None or g.state == DEAD:
        out["errorCode"] = K.GROUP_ID_NOT_FOUND
        return out
    if g.state in (STABLE, PREPARING, COMPLETING) and g.protocol_type != "consumer":
        out["errorCode"] = K.NON_EMPTY_GROUP
        return out
    committed = coord.committed(gid)
    doomed = []
    for t in body["topics"]:
        parts = []
        known = set(broker.manager.partitions(t["name"]))
        subscribed = g.state != EMPTY and g.is_subscribed(t["name"]) is not False
        for p in t["partitions"]:
            index = p["partitionIndex"]
            if index not in known:
                code = K.UNKNOWN_TOPIC_OR_PARTITION
            elif subscribed:
                code = K.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                code = K.NONE
                if (t["name"], index) in committed:
                    doomed.append((t["name"], index))
            parts.append({"partitionIndex": index, "errorCode": code})
        out["topics"].append({"name": t["name"], "partitions": parts})
    if doomed:
        code = await coord._append(gid, offset_tombstones(gid, doomed))
        if code:
            out["errorCode"] = code
    return out


async def list_groups(broker, request, conn) -> dict:
    """``GroupCoordinator.listGroups``: live groups and those only the log knows."""
    coord: Coordinator = broker.state["coordinator"]
    body = request.body
    states = {s.strip().lower() for s in body.get("statesFilter") or ()}
    types = {s.strip().lower() for s in body.get("typesFilter") or ()}
    groups = [{"groupId": gid, "protocolType": ptype, "groupState": state, "groupType": gtype}
              for gid, ptype, state, gtype in coord.listed()
              if (not states or state.lower() in states) and (not types or gtype in types)]
    return {"throttleTimeMs": 0, "errorCode": K.NONE, "groups": groups}


async def describe_groups(broker, request, conn) -> dict:
    """``GroupCoordinator.describeGroups``."""
    coord: Coordinator = broker.state["coordinator"]
    body, v = request.body, request.api_version
    ops = GROUP_OPERATIONS if body.get("includeAuthorizedOperations") else AUTHORIZED_NONE
    out = []
    for gid in body["groups"]:
        g = coord.get(gid)
        if g is None or g.state == DEAD:
            d = {"errorCode": K.GROUP_ID_NOT_FOUND if v >= 6 else K.NONE,
                 "errorMessage": (f"Group {gid} not found." if g is None else
                                  f"Group {gid} is not a classic group.") if v >= 6 else None,
                 "groupId": gid, "groupState": DEAD, "protocolType": "", "protocolData": "",
                 "members": [], "authorizedOperations": ops if v < 6 else AUTHORIZED_NONE}
        else:
            stable = g.state == STABLE
            d = {"errorCode": K.NONE, "errorMessage": None, "groupId": gid,
                 "groupState": g.state, "protocolType": g.protocol_type or "",
                 "protocolData": g.protocol or "" if stable else "",
                 "members": [{"memberId": m.member_id, "groupInstanceId": m.instance_id,
                              "clientId": m.client_id, "clientHost": m.client_host,
                              "memberMetadata": m.metadata(g.protocol) if stable else b"",
                              "memberAssignment": m.assignment}
                             for m in g.members.values()],
                 "authorizedOperations": ops}
        out.append(d)
    return {"throttleTimeMs": 0, "groups": out}


async def delete_groups(broker, request, conn) -> dict:
    """``GroupCoordinator.deleteGroups``: offset and group tombstones."""
    coord: Coordinator = broker.state["coordinator"]
    results = []
    for gid in dict.fromkeys(request.body["groupsNames"]):
        code = K.INVALID_GROUP_ID if gid is None else await coord.delete_group(gid)
        results.append({"groupId": gid, "errorCode": code})
    return {"throttleTimeMs": 0, "results": results}


HANDLERS = {10: find_coordinator, 11: join_group, 14: sync_group, 12: heartbeat,
            13: leave_group, 8: offset_commit, 9: offset_fetch, 47: offset_delete,
            16: list_groups, 15: describe_groups, 42: delete_groups}
