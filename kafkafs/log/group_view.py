"""What a broker would say of a consumer group right after loading ``__consumer_offsets``
(docs/design.md §3.5): its type, state, members and their assignments, committed offsets
and lag -- what ``kafka-consumer-groups.sh --describe`` asks the broker for
(DescribeGroups / ConsumerGroupDescribe, OffsetFetch, ListOffsets).

* A **classic** group (``GroupMetadataValue``) is ``Empty`` without members, else
  ``Stable`` (the coordinator's state after loading); its members' assignments are the
  consumer protocol's ``ConsumerProtocolAssignment`` in their ``assignment`` bytes (shown
  only for protocol type ``consumer``, as DescribeGroups gives them only to a Stable group).
  A group known only by its offsets is Kafka's simple group: Classic, ``Empty``, protocol
  type ``""``.
* A **consumer** group (KIP-848 records) is ``Empty`` without members, ``Assigning`` while
  its epoch is past its target assignment's, ``Reconciling`` while a member's epoch is not
  the target's or its state is not STABLE, else ``Stable`` (``ConsumerGroup.
  maybeUpdateGroupState``); a member's assignment is its current assignment, topic ids
  resolved to names through the data topics' ``partition.metadata`` (a partition of a topic
  not here is left out, as the broker leaves it out).
* Share and streams groups are not consumer groups (the tool leaves them out).

Offsets are the committed ones only (``requireStable=false``: pending transactional
commits are not shown); the log end offset of a partition is its high watermark (ListOffsets
``latest``, read_uncommitted). No trio, no errno.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ..record import tables
from ..record.errors import CorruptRecordError
from ..record.schema_json import uuid_string
from .errors import LogError
from .groups import Group, GroupStore, OffsetCommit, java_string_hash
from .java_order import hashmap_order, topic_partition_hash

__all__ = ["GroupDescription", "Member", "describe", "high_watermark", "offset_rows",
           "offsets_table"]

_I16 = struct.Struct(">h")
MEMBER_STABLE = 0  # ConsumerGroupCurrentMemberAssignmentValue.State: MemberState.STABLE


@dataclass
class Member:
    """A member: ``member_id``, ``instance_id`` (None: none), ``client_id``, ``host``,
    ``assignment`` and ``target`` ([(topic, partition)]: current and target assignment),
    ``epoch`` (the member epoch; None for a classic member), and the classic member's
    ``session_timeout_ms``/``rebalance_timeout_ms``, or the consumer member's
    ``subscribed_topics``."""

    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    assignment: list[tuple[str, int]] = field(default_factory=list)
    target: list[tuple[str, int]] = field(default_factory=list)
    epoch: int | None = None
    session_timeout_ms: int | None = None
    rebalance_timeout_ms: int | None = None
    subscribed_topics: list[str] = field(default_factory=list)
    subscription: dict | None = None  # a classic member's decoded consumer protocol subscription


@dataclass
class GroupDescription:
    """A group as described (see the module): ``group_id``, ``type`` ("Classic",
    "Consumer", "Share", "Streams"), ``state``, ``protocol_type``, ``protocol`` (a classic
    group's protocol; a consumer group's assignor, "" when unknown), ``generation`` (the
    classic generation or the consumer group epoch), ``target_epoch`` (None for classic),
    ``leader``, ``members``, ``offsets`` ({(topic, partition): OffsetCommit}),
    ``partition`` (of ``__consumer_offsets``)."""

    group_id: str
    type: str
    state: str
    protocol_type: str
    protocol: str
    generation: int
    target_epoch: int | None
    leader: str | None
    members: list[Member]
    offsets: dict[tuple[str, int], OffsetCommit]
    partition: int

    @property
    def is_consumer_group(self) -> bool:
        """Whether ``kafka-consumer-groups`` shows it: a classic group of protocol type
        ``consumer`` or ``""``, or a consumer group."""
        return self.type == "Consumer" or (self.type == "Classic" and
                                           self.protocol_type in ("", "consumer"))


def high_watermark(manager, topic: str, partition: int) -> int | None:
    """The partition's high watermark (ListOffsets ``latest``), None when it is not here."""
    try:
        return manager.get_log(topic, partition).high_watermark
    except (LogError, OSError):
        return None


def describe(store: GroupStore, group_id: str, topic_names: dict[str, str] | None = None
             ) -> GroupDescription | None:
    """The description of ``group_id`` (None when no partition has it). ``topic_names``:
    topic id (Kafka's Base64 form) -> topic name, for consumer groups' assignments."""
    gp = store.partition_of(group_id)
    if gp is None:
        return None
    g = gp.group(group_id)
    if g is None:
        return None
    offsets = {(t, p): c for (_g, t, p), c in gp.offsets(group_id).items()}
    partition = gp.log.partition
    if g.kind == "consumer":
        return _consumer(g, offsets, partition, topic_names or {})
    if g.kind in ("share", "streams"):
        meta = g.metadata or {}
        return GroupDescription(group_id, g.kind.capitalize(), "Unknown", g.kind, "",
                                meta.get("epoch", -1), None, None, [], offsets, partition)
    return _classic(g, offsets, partition)


def _classic(g: Group, offsets, partition: int) -> GroupDescription:
    meta = g.metadata
    if meta is None:  # a simple group: offsets, no membership
        return GroupDescription(g.group_id, "Classic", "Empty", "", "", 0, None, None, [],
                                offsets, partition)
    protocol_type = meta.get("protocolType") or ""
    members = []
    cp = tables.schema("consumer_protocol")
    for m in meta.get("members") or []:
        member = Member(m["memberId"], m.get("groupInstanceId"), m["clientId"],
                        m["clientHost"], session_timeout_ms=m.get("sessionTimeout"),
                        rebalance_timeout_ms=m.get("rebalanceTimeout"))
        if protocol_type == "consumer":
            asg = _consumer_protocol(cp.message("ConsumerProtocolAssignment"),
                                     m.get("assignment"))
            if asg is not None:
                member.assignment = [(tp["topic"], p) for tp in asg["assignedPartitions"]
                                     for p in tp["partitions"]]
            member.subscription = _consumer_protocol(
                cp.message("ConsumerProtocolSubscription"), m.get("subscription"))
        members.append(member)
    return GroupDescription(g.group_id, "Classic", "Stable" if members else "Empty",
                            protocol_type, meta.get("protocol") or "",
                            meta.get("generation", 0), None, meta.get("leader"), members,
                            offsets, partition)


def _consumer_protocol(message, data) -> dict | None:
    """The consumer protocol message in ``data`` (an int16 version, then the message; a
    later version read as the last one), None when it does not decode."""
    if not data or len(data) < 2:
        return None
    version = min(_I16.unpack_from(data)[0], message.versions.high)
    if version < 0:
        return None
    try:
        return message.decode(data, version, pos=2, exact=False)
    except (CorruptRecordError, ValueError):
        return None


def _named(topic_partitions, topic_names: dict[str, str]) -> list[tuple[str, int]]:
    out = []
    for tp in topic_partitions or []:
        name = topic_names.get(uuid_string(tp["topicId"]))
        if name is None:
            continue  # a topic not here (deleted, or not in these log dirs)
        out.extend((name, p) for p in tp["partitions"])
    return out


def _consumer(g: Group, offsets, partition: int, topic_names) -> GroupDescription:
    meta = g.metadata or {}
    epoch = meta.get("epoch", 0)
    target_meta = g.records.get(6, {}).get((), {})
    target_epoch = target_meta.get("assignmentEpoch", 0)
    current = g.records.get(8, {})
    targets = g.records.get(7, {})
    members, reconciled, assignors = [], True, {}
    for (member_id,), m in sorted(g.records.get(5, {}).items()):
        cur = current.get((member_id,), {})
        member = Member(member_id, m.get("instanceId"), m.get("clientId", ""),
                        m.get("clientHost", ""),
                        assignment=_named(cur.get("assignedPartitions"), topic_names),
                        target=_named(targets.get((member_id,), {}).get("topicPartitions"),
                                      topic_names),
                        epoch=cur.get("memberEpoch", 0),
                        rebalance_timeout_ms=m.get("rebalanceTimeoutMs"),
                        subscribed_topics=list(m.get("subscribedTopicNames") or []))
        if cur.get("state", MEMBER_STABLE) != MEMBER_STABLE or member.epoch != target_epoch:
            reconciled = False
        if m.get("serverAssignor"):
            assignors[m["serverAssignor"]] = assignors.get(m["serverAssignor"], 0) + 1
        members.append(member)
    if not members:
        state = "Empty"
    elif epoch > target_epoch:
        state = "Assigning"
    elif not reconciled:
        state = "Reconciling"
    else:
        state = "Stable"
    # the most common assignor the members prefer, else the broker's default (uniform)
    assignor = max(sorted(assignors), key=assignors.get) if assignors else "uniform"
    return GroupDescription(g.group_id, "Consumer", state, "consumer", assignor, epoch,
                            target_epoch, None, members, offsets, partition)


# -- kafka-consumer-groups --describe's table (ConsumerGroupCommand.printOffsets) -------------

def _dash(value) -> str:
    return "-" if value is None or value == "" else str(value)


def offset_rows(d: GroupDescription, manager) -> list[list[str]]:
    """The rows of the group's offsets table, in Kafka's order: each member with partitions
    (the members as the broker's map iterates them, stably by assignment size, largest
    first), its partitions as a Java HashMap iterates them; then the committed partitions no
    member owns. A row: group, topic, partition, leader epoch, current offset, log end
    offset (the high watermark), lag, consumer id, host, client id (``-`` where unknown)."""
    rows = []
    assigned = set()
    members = hashmap_order(d.members, lambda m: java_string_hash(m.member_id))
    for m in sorted(members, key=lambda m: -len(m.assignment)):
        if not m.assignment:
            continue
        parts = sorted(set(m.assignment), key=lambda tp: tp[1])
        assigned.update(parts)
        rows += _partition_rows(d, parts, m, manager)
    unassigned = sorted(tp for tp in d.offsets if tp not in assigned)
    return rows + _partition_rows(d, unassigned, None, manager)


def _partition_rows(d: GroupDescription, parts, member, manager) -> list[list[str]]:
    rows = []
    for topic, p in hashmap_order(parts, topic_partition_hash):
        commit = d.offsets.get((topic, p))
        current = None if commit is None or commit.offset < 0 else commit.offset
        leo = high_watermark(manager, topic, p)
        lag = None if current is None or leo is None else leo - current
        epoch = None if commit is None or commit.leader_epoch < 0 else commit.leader_epoch
        rows.append([d.group_id, topic, str(p), _dash(epoch), _dash(current), _dash(leo),
                     _dash(lag), _dash(member and member.member_id),
                     _dash(member and member.host), _dash(member and member.client_id)])
    return rows


def offsets_table(rows: list[list[str]], verbose: bool = False) -> str:
    """The table of :func:`offset_rows` as ``kafka-consumer-groups --describe`` prints it
    (each line after a newline, the widths of ``%-Ns``: at least 15 for the group, topic,
    consumer id and host, the longest value beyond; LEADER-EPOCH only with ``verbose``);
    the caller's print adds the final newline."""
    def pad(text: str, width: int) -> str:
        return text + " " * max(0, width - len(text))

    header = ["GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "CURRENT-OFFSET",
              "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    widest = [max([15] + [len(r[i]) for r in rows]) for i in (0, 1, 7, 8)]
    widths = [widest[0], widest[1], 10, 15, 15, 15, 15, widest[2], widest[3], 0]
    keep = list(range(10)) if verbose else [0, 1, 2, 4, 5, 6, 7, 8, 9]
    return "".join("\n" + " ".join(pad(row[i], widths[i]) if widths[i] else row[i]
                                    for i in keep) for row in [header] + rows)
