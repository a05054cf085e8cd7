"""Consumer groups as the group coordinator keeps them, replayed from ``__consumer_offsets``
(docs/design.md §3.5; Kafka's ``GroupCoordinatorShard.replay``, ``OffsetMetadataManager``,
``GroupMetadataManager``).

A group lives in one partition of ``__consumer_offsets``, ``abs(Java hashCode of the group
id) % partitions`` (:func:`coordinator_partition`). Each partition's records are replayed in
offset order, as a coordinator loading the partition replays them:

* **offset commits** (record types 0 and 1): the latest record of a (group, topic,
  partition) wins, a tombstone removes it. A commit written inside a transaction (its batch
  has a producer id) is pending until the producer's end marker: COMMIT makes it the
  committed offset unless a commit with a later record offset is already there (Kafka
  keeps the most recent record), ABORT drops it, and a tombstone drops the pending ones of
  its key too (``replayEndTransactionMarker``);
* **group records** (classic ``GroupMetadata``, and the consumer, share and streams groups'
  records of the new protocol, types 2-23): the latest value of each record (one per key:
  the group's metadata, one per member, ...) wins, a tombstone removes it.

A group is there while it has a record or a committed offset (a group that commits offsets
without membership is Kafka's "simple" group: an empty classic group with no protocol
type); deleting a group is tombstoning all of them, after which it is gone. Offset commit
keys are kept as their bytes and their values decoded only when asked for, so a partition
of millions of commits costs a dict entry per (group, topic, partition) that still has one.

A :class:`GroupPartition` follows one partition (:meth:`~GroupPartition.catch_up` reads only
what was appended since it last read; a log that shrank under it or whose start moved past
where it read is replayed anew). No trio, no errno.
"""

from __future__ import annotations

import struct
import threading
from dataclasses import dataclass, field

from ..record import tables
from ..record.control import ABORT, COMMIT
from ..record.errors import CorruptRecordError
from ..record.internal import CONSUMER_OFFSETS, decode_coordinator
from .log import Log

__all__ = ["CONSUMER_OFFSETS", "Group", "GroupPartition", "OffsetCommit",
           "coordinator_partition", "java_string_hash", "offset_commit_key",
           "parse_offset_commit_key"]

#: record types of offset commits (the legacy key and the current one)
OFFSET_COMMIT_TYPES = (0, 1)
#: record type -> the kind of group it belongs to
GROUP_TYPES = {2: "classic", **dict.fromkeys((3, 4, 5, 6, 7, 8, 16), "consumer"),
               **dict.fromkeys(range(9, 16), "share"),
               **dict.fromkeys(range(17, 24), "streams")}
#: the record type holding a group's own metadata, per kind
METADATA_TYPES = {"classic": 2, "consumer": 3, "share": 11, "streams": 17}

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units, 32-bit signed)."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def coordinator_partition(group_id: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition of ``group_id`` (``GroupCoordinatorService.
    partitionFor``: ``Utils.abs(groupId.hashCode()) % partitions``, where ``Utils.abs`` of
    Integer.MIN_VALUE is 0)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def parse_offset_commit_key(key: bytes) -> tuple[str, str, int]:
    """``(group, topic, partition)`` of an offset commit key (type 0 or 1: an int16 type,
    then two int16-length strings and an int32; the tables' ``OffsetCommitKey``). Raises
    CorruptRecordError."""
    try:
        n = _I16.unpack_from(key, 2)[0]
        group = key[4:4 + n].decode("utf-8")
        p = 4 + n
        m = _I16.unpack_from(key, p)[0]
        topic = key[p + 2:p + 2 + m].decode("utf-8")
        (partition,) = _I32.unpack_from(key, p + 2 + m)
        if n < 0 or m < 0:
            raise ValueError("a null string")
    except (struct.error, ValueError, UnicodeDecodeError) as exc:
        raise CorruptRecordError(f"an offset commit key that does not parse: {exc}") from None
    return group, topic, partition


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    """The key bytes of an offset commit (record type 1, ``OffsetCommitKey``)."""
    m = tables.schema("group").by_api(1, "Key")
    return _I16.pack(1) + m.encode({"group": group, "topic": topic, "partition": partition}, 0)


@dataclass(frozen=True)
class OffsetCommit:
    """A committed offset (``OffsetAndMetadata``): ``offset``, ``leader_epoch`` (-1: none),
    ``metadata``, ``commit_timestamp`` and ``expire_timestamp`` (ms; -1: none),
    ``record_offset`` (of the record in ``__consumer_offsets``)."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int
    record_offset: int


@dataclass
class Group:
    """A group's records: ``kind`` ("classic", "consumer", "share", "streams"; None for a
    group known only by its offsets), ``records``: record type -> {the key's fields past
    the group id (a tuple) -> the decoded value dict} (record type 2's value is the
    classic group's metadata)."""

    group_id: str
    kind: str | None = None
    records: dict[int, dict[tuple, dict]] = field(default_factory=dict)

    @property
    def metadata(self) -> dict | None:
        """The value of the group's own metadata record, or None."""
        if self.kind is None:
            return None
        return self.records.get(METADATA_TYPES[self.kind], {}).get(())


class GroupPartition:
    """The groups of one ``__consumer_offsets`` partition, replayed from its Log (see the
    module). Thread-safe: one catch-up at a time, readers take a short lock."""

    def __init__(self, lg: Log):
        self.log = lg
        self._lock = threading.Lock()
        self._update = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self.start_offset = self.end_offset = self.log.log_start_offset
        # group id bytes -> {offset commit key bytes -> (record offset, value bytes)}
        self._offsets: dict[bytes, dict[bytes, tuple[int, bytes]]] = {}
        # producer id -> {key bytes -> (record offset, value bytes)}: not committed yet
        self._pending: dict[int, dict[bytes, tuple[int, bytes]]] = {}
        self._groups: dict[str, Group] = {}
        self.damage: CorruptRecordError | None = None

    # -- reading the log ------------------------------------------------------------------
    @property
    def up_to_date(self) -> bool:
        """Whether the replay has read up to the log end offset (and the log did not
        shrink or start past it): :meth:`catch_up` has nothing to do."""
        lg = self.log
        return lg.log_end_offset == self.end_offset and lg.log_start_offset <= self.end_offset

    def catch_up(self) -> int:
        """Replay what was appended since the last call (every record up to the log end
        offset); replay anew when the log shrank below where it was read or its start moved
        past it. Returns the records read. Damage ends the reading where it is (kept in
        :attr:`damage`; the next call tries again from there)."""
        with self._update:
            lg = self.log
            if lg.log_end_offset < self.end_offset or lg.log_start_offset > self.end_offset:
                with self._lock:
                    self._reset()
            n = 0
            try:
                for batch in lg.batches(self.end_offset):
                    if batch.last_offset < self.end_offset:
                        continue
                    with self._lock:
                        n += self._apply(batch)
                        self.end_offset = batch.next_offset
                self.damage = None
            except CorruptRecordError as exc:
                self.damage = exc
            return n

    def _apply(self, batch) -> int:
        if batch.is_control:
            pid = batch.producer_id
            for r in batch.record_tuples():
                if r[2] is not None and len(r[2]) >= 4:
                    marker = _I16.unpack_from(r[2], 2)[0]
                    if marker in (COMMIT, ABORT):
                        self._end_transaction(pid, marker == COMMIT)
            return 0
        pid = batch.producer_id if batch.is_transactional else -1
        records = batch.record_tuples()
        start = self.end_offset
        for offset, _ts, key, value, _headers in records:
            if offset < start or key is None or len(key) < 2:
                continue
            record_type = _I16.unpack_from(key)[0]
            if record_type in OFFSET_COMMIT_TYPES:
                self._offset_record(offset, pid, bytes(key), value)
            elif record_type in GROUP_TYPES:
                self._group_record(record_type, key, value)
        return len(records)

    def _offset_record(self, offset: int, pid: int, key: bytes, value) -> None:
        gb = _group_bytes(key)
        if gb is None:
            return  # a key that does not parse: the coordinator would fail to load it
        if value is None:  # a tombstone: the committed offset and the pending ones go
            group_offsets = self._offsets.get(gb)
            if group_offsets is not None:
                group_offsets.pop(key, None)
                if not group_offsets:
                    del self._offsets[gb]
                    self._forget_if_gone(gb)
            for pending in self._pending.values():
                pending.pop(key, None)
            return
        if pid >= 0:
            self._pending.setdefault(pid, {})[key] = (offset, bytes(value))
            return
        self._commit(gb, key, offset, bytes(value))

    def _commit(self, gb: bytes, key: bytes, offset: int, value: bytes) -> None:
        group_offsets = self._offsets.get(gb)
        if group_offsets is None:
            group_offsets = self._offsets[gb] = {}
            group_id = gb.decode("utf-8", "replace")
            if group_id not in self._groups:  # a "simple" group: offsets, no membership
                self._groups[group_id] = Group(group_id)
        group_offsets[key] = (offset, value)

    def _end_transaction(self, pid: int, committed: bool) -> None:
        pending = self._pending.pop(pid, None)
        if not pending or not committed:
            return
        for key, (offset, value) in pending.items():
            gb = _group_bytes(key)
            current = self._offsets.get(gb, {}).get(key)
            # the most recent record wins (a later regular commit is kept)
            if current is None or offset > current[0]:
                self._commit(gb, key, offset, value)

    def _forget_if_gone(self, gb: bytes) -> None:
        group_id = gb.decode("utf-8", "replace")
        g = self._groups.get(group_id)
        if g is not None and not g.records and gb not in self._offsets:
            del self._groups[group_id]

    def _group_record(self, record_type: int, key, value) -> None:
        try:
            rec = decode_coordinator("group", bytes(key), None if value is None else
                                     bytes(value))
        except CorruptRecordError:
            return  # a record the tables do not read: the coordinator would fail to load
        fields = list(rec.key.values())
        if not fields or not isinstance(fields[0], str):
            return
        group_id, subkey = fields[0], tuple(fields[1:])
        g = self._groups.get(group_id)
        if rec.value is None:
            if g is None:
                return
            records = g.records.get(record_type, {})
            records.pop(subkey, None)
            if not records:
                g.records.pop(record_type, None)
            if not g.records:
                g.kind = None
                self._forget_if_gone(group_id.encode("utf-8"))
            return
        if g is None:
            g = self._groups[group_id] = Group(group_id)
        g.kind = GROUP_TYPES[record_type]
        g.records.setdefault(record_type, {})[subkey] = rec.value

    # -- what was replayed ------------------------------------------------------------------
    def groups(self) -> list[str]:
        """The group ids of this partition, sorted."""
        with self._lock:
            return sorted(self._groups)

    def has(self, group_id: str) -> bool:
        with self._lock:
            return group_id in self._groups

    def group(self, group_id: str) -> Group | None:
        with self._lock:
            g = self._groups.get(group_id)
            return None if g is None else Group(g.group_id, g.kind,
                                                {t: dict(r) for t, r in g.records.items()})

    def offsets(self, group_id: str | None = None) -> dict[tuple[str, str, int], OffsetCommit]:
        """``{(group, topic, partition): OffsetCommit}`` of one group (every group when
        None), decoded now."""
        with self._lock:
            if group_id is None:
                items = [kv for d in self._offsets.values() for kv in d.items()]
            else:
                items = list(self._offsets.get(group_id.encode("utf-8"), {}).items())
        schema = tables.schema("group")
        out = {}
        for key, (record_offset, value) in items:
            try:
                tp = parse_offset_commit_key(key)
            except CorruptRecordError:
                continue
            commit = _offset_commit(schema, value, record_offset)
            if commit is not None:
                out[tp] = commit
        return out

    def pending_offsets(self) -> dict[int, list[tuple[str, str, int]]]:
        """``{producer id: [(group, topic, partition), ...]}`` of transactional offset
        commits not ended yet (their transactions are still open)."""
        with self._lock:
            return {pid: [parse_offset_commit_key(k) for k in d]
                    for pid, d in self._pending.items() if d}


def _group_bytes(key: bytes) -> bytes | None:
    """The group id's bytes of an offset commit key, or None when it does not parse."""
    if len(key) < 4:
        return None
    n = _I16.unpack_from(key, 2)[0]
    if n < 0 or 4 + n > len(key):
        return None
    return key[4:4 + n]


def _offset_commit(schema, value: bytes, record_offset: int) -> OffsetCommit | None:
    if len(value) < 2:
        return None
    version = _I16.unpack_from(value)[0]
    try:
        v = schema.by_api(1, "Value").decode(value, version, pos=2, exact=False)
    except (CorruptRecordError, ValueError):
        return None
    return OffsetCommit(v["offset"], v.get("leaderEpoch", -1), v["metadata"] or "",
                        v["commitTimestamp"], v.get("expireTimestamp", -1), record_offset)


class GroupStore:
    """The groups of every ``__consumer_offsets`` partition a :class:`LogManager` holds:
    one :class:`GroupPartition` per partition, made on first use (and anew when the
    partition's Log was replaced). Thread-safe."""

    def __init__(self, manager):
        self.manager = manager
        self._lock = threading.Lock()
        self._parts: dict[int, GroupPartition] = {}

    def partitions(self) -> dict[int, GroupPartition]:
        """``{partition: GroupPartition}`` of the ``__consumer_offsets`` partitions here."""
        out = {}
        with self._lock:
            for p in self.manager.partitions(CONSUMER_OFFSETS):
                lg = self.manager.get_log(CONSUMER_OFFSETS, p)
                gp = self._parts.get(p)
                if gp is None or gp.log is not lg:
                    gp = self._parts[p] = GroupPartition(lg)
                out[p] = gp
            for p in [p for p in self._parts if p not in out]:
                del self._parts[p]
        return out

    def catch_up(self) -> int:
        """:meth:`GroupPartition.catch_up` of every partition; the records read."""
        return sum(gp.catch_up() for gp in self.partitions().values())

    def groups(self) -> dict[str, int]:
        """``{group id: its partition}`` of every group (as replayed so far)."""
        out = {}
        for p, gp in sorted(self.partitions().items()):
            for g in gp.groups():
                out.setdefault(g, p)
        return out

    def home(self, group_id: str) -> GroupPartition | None:
        """The coordinator's partition of ``group_id`` (whether it has the group yet or
        not), None without ``__consumer_offsets``."""
        parts = self.partitions()
        return parts.get(coordinator_partition(group_id, max(parts) + 1)) if parts else None

    def partition_of(self, group_id: str) -> GroupPartition | None:
        """The partition holding ``group_id``: the coordinator's, else (a copy whose
        partitions were renumbered) any that has it; None when none has."""
        parts = self.partitions()
        if not parts:
            return None
        home = parts.get(coordinator_partition(group_id, max(parts) + 1))
        if home is not None and home.has(group_id):
            return home
        return next((gp for gp in parts.values() if gp.has(group_id)), None)
