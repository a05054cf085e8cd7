"""Consumer groups replayed from ``__consumer_offsets`` (kafkafs/log/groups.py) against an
independent model, and the coordinator partition of a group id (Java's String.hashCode).

The model is declarative, not a replay: for each (group, topic, partition) the committed
offset is, among the commits after the key's last tombstone, the one with the greatest
record offset -- a regular commit, or a transactional one whose transaction ended with
COMMIT and saw no tombstone of the key before its marker -- and a group record's value
is its key's last record unless that is a tombstone. A group is there while it has a live
record or a committed offset. Random sequences of commits, transactional commits (ended by
COMMIT or ABORT, or left open), group metadata, member records, offset deletes and group
tombstones are appended to a real log, replayed at random points as they grow, and again
after a cleaner pass compacted the log (compaction must not change the state).
"""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kafkafs.log.cleaner import CleanerConfig, LogCleaner
from kafkafs.log.config import BrokerConfig
from kafkafs.log.groups import GroupPartition, coordinator_partition, java_string_hash
from kafkafs.log.manager import LogManager
from kafkafs.record import tables
from kafkafs.record.batch import encode_batch
from kafkafs.record.control import encode_end_txn_marker_batch

GROUPS = ["g1", "g2", "g3"]
TOPICS = ["orders", "pay"]


def _key(record_type, data):
    m = tables.schema("group").by_api(record_type, "Key")
    return struct.pack(">h", record_type) + m.encode(data, 0)


def _value(record_type, version, data):
    m = tables.schema("group").by_api(record_type, "Value")
    return struct.pack(">h", version) + m.encode(data, version)


def commit_record(group, topic, partition, offset):
    return (_key(1, {"group": group, "topic": topic, "partition": partition}),
            _value(1, 3, {"offset": offset, "leaderEpoch": -1, "metadata": "",
                          "commitTimestamp": 1000}))


def group_record(group, generation):
    return (_key(2, {"group": group}),
            _value(2, 3, {"protocolType": "consumer", "generation": generation,
                          "protocol": "range", "leader": "m", "currentStateTimestamp": 1,
                          "members": []}))


def member_record(group, member, epoch):
    return (_key(5, {"groupId": group, "memberId": member}),
            _value(5, 0, {"clientId": f"c-{member}", "clientHost": "/127.0.0.1",
                          "rebalanceTimeoutMs": epoch, "subscribedTopicNames": TOPICS}))


ops = st.lists(st.one_of(
    st.tuples(st.just("commit"), st.sampled_from(GROUPS), st.sampled_from(TOPICS),
              st.integers(0, 1), st.integers(0, 1000)),
    st.tuples(st.just("txn"), st.integers(1, 3), st.sampled_from(GROUPS),
              st.sampled_from(TOPICS), st.integers(0, 1), st.integers(0, 1000)),
    st.tuples(st.just("end"), st.integers(1, 3), st.sampled_from(["COMMIT", "ABORT"])),
    st.tuples(st.just("delete"), st.sampled_from(GROUPS), st.sampled_from(TOPICS),
              st.integers(0, 1)),
    st.tuples(st.just("group"), st.sampled_from(GROUPS), st.integers(0, 9)),
    st.tuples(st.just("member"), st.sampled_from(GROUPS), st.sampled_from(["a", "b"]),
              st.integers(0, 9)),
    st.tuples(st.just("drop_member"), st.sampled_from(GROUPS), st.sampled_from(["a", "b"])),
    st.tuples(st.just("drop_group"), st.sampled_from(GROUPS)),
), max_size=60)


class Writer:
    """Appends the operations to a log and keeps, per record, what the model needs."""

    def __init__(self, lg):
        self.lg = lg
        self.events = []  # (record offset, kind, key tuple, payload)
        self.epochs = {}  # producer id -> its epoch, while its transaction is open
        self.sequences = {}

    def apply(self, op):
        lg = self.lg
        kind = op[0]
        if kind == "commit":
            _k, g, t, p, off = op
            first, _ = lg.append([(1000, *commit_record(g, t, p, off), ())])
            self.events.append((first, "commit", (g, t, p), off))
        elif kind == "txn":
            _k, pid, g, t, p, off = op
            first = self._txn_append(pid, commit_record(g, t, p, off))
            self.events.append((first, "txn", (g, t, p), (pid, off)))
        elif kind == "end":
            _k, pid, result = op
            if pid not in self.epochs:
                return
            marker = bytearray(encode_end_txn_marker_batch(
                1 if result == "COMMIT" else 0, base_offset=0, timestamp=2000,
                producer_id=pid, producer_epoch=self.epochs[pid], coordinator_epoch=0))
            first = lg.append_encoded(marker)[0]
            self.events.append((first, "end", pid, result))
            del self.epochs[pid]
        elif kind == "delete":
            _k, g, t, p = op
            key = commit_record(g, t, p, 0)[0]
            first, _ = lg.append([(1000, key, None, ())])
            self.events.append((first, "tombstone", (g, t, p), None))
        elif kind == "group":
            _k, g, gen = op
            first, _ = lg.append([(1000, *group_record(g, gen), ())])
            self.events.append((first, "record", (g, 2, ()), gen))
        elif kind == "member":
            _k, g, m, epoch = op
            first, _ = lg.append([(1000, *member_record(g, m, epoch), ())])
            self.events.append((first, "record", (g, 5, (m,)), epoch))
        elif kind == "drop_member":
            _k, g, m = op
            first, _ = lg.append([(1000, _key(5, {"groupId": g, "memberId": m}), None, ())])
            self.events.append((first, "record", (g, 5, (m,)), None))
        elif kind == "drop_group":
            _k, g = op
            first, _ = lg.append([(1000, _key(2, {"group": g}), None, ())])
            self.events.append((first, "record", (g, 2, ()), None))

    def _txn_append(self, pid, record):
        epoch = self.epochs.setdefault(pid, 0)
        seq = self.sequences.get(pid, 0)
        self.sequences[pid] = seq + 1
        batch = bytearray(encode_batch([(1000, *record, ())], producer_id=pid,
                                       producer_epoch=epoch, base_sequence=seq,
                                       is_transactional=True))
        return self.lg.append_encoded(batch)[0]


def model(events):
    """The declarative state of the module docstring: (offsets, group records, groups)."""
    ends = {}  # the offset of each transactional commit -> (marker offset, result)
    open_txn: dict[int, list] = {}
    for offset, kind, key, payload in events:
        if kind == "txn":
            open_txn.setdefault(payload[0], []).append(offset)
        elif kind == "end":
            for o in open_txn.pop(key, []):
                ends[o] = (offset, payload)
    offsets = {}
    keys = {e[2] for e in events if e[1] in ("commit", "txn", "tombstone")}
    for k in keys:
        mine = [e for e in events if e[2] == k and e[1] in ("commit", "txn", "tombstone")]
        tombstones = [e[0] for e in mine if e[1] == "tombstone"]
        last_tomb = max(tombstones, default=-1)
        candidates = []
        for offset, kind, _key, payload in mine:
            if offset <= last_tomb or kind == "tombstone":
                continue
            if kind == "commit":
                candidates.append((offset, payload))
            else:
                end = ends.get(offset)
                if end is None or end[1] != "COMMIT":
                    continue
                if any(offset < t < end[0] for t in tombstones):
                    continue
                candidates.append((offset, payload[1]))
        if candidates:
            offsets[k] = max(candidates)[1]
    records = {}
    for _offset, kind, key, payload in events:
        if kind == "record":
            records[key] = payload
    records = {k: v for k, v in records.items() if v is not None}
    groups = {k[0] for k in offsets} | {k[0] for k in records}
    return offsets, records, groups


def replayed(gp: GroupPartition):
    offsets = {k: c.offset for k, c in gp.offsets().items()}
    records = {}
    for g in gp.groups():
        group = gp.group(g)
        for t, recs in group.records.items():
            for sub, value in recs.items():
                records[(g, t, sub)] = value["generation"] if t == 2 else \
                    value["rebalanceTimeoutMs"]
    return offsets, records, set(gp.groups())


def _manager(tmp_path):
    cfg = BrokerConfig.from_properties({}).with_log_dirs([str(tmp_path / "logs")])
    m = LogManager(cfg)
    m.startup()
    if not m.partitions("__consumer_offsets"):
        m.create_topic("__consumer_offsets", 1, {"cleanup.policy": "compact",
                                                 "segment.bytes": "1024"})
    return m


TXN_THEN_REGULAR = [("txn", 1, "g1", "orders", 0, 5), ("commit", "g1", "orders", 0, 7),
                    ("end", 1, "COMMIT")]  # the regular commit is the more recent record
REGULAR_THEN_TXN = [("commit", "g1", "orders", 0, 7), ("txn", 1, "g1", "orders", 0, 5),
                    ("end", 1, "COMMIT")]  # the transactional one is
TOMBSTONE_IN_TXN = [("txn", 1, "g1", "orders", 0, 5), ("delete", "g1", "orders", 0),
                    ("end", 1, "COMMIT")]  # the tombstone drops the pending commit
ABORTED = [("commit", "g1", "orders", 0, 7), ("txn", 2, "g1", "orders", 0, 9),
           ("end", 2, "ABORT"), ("txn", 3, "g2", "pay", 1, 4)]  # and one left open
DELETED_GROUP = [("group", "g1", 3), ("member", "g1", "a", 1), ("commit", "g1", "pay", 1, 2),
                 ("drop_member", "g1", "a"), ("drop_group", "g1"), ("delete", "g1", "pay", 1)]


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=ops, data=st.data())
@example(ops=TXN_THEN_REGULAR, data=None)
@example(ops=REGULAR_THEN_TXN, data=None)
@example(ops=TOMBSTONE_IN_TXN, data=None)
@example(ops=ABORTED, data=None)
@example(ops=DELETED_GROUP, data=None)
def test_replay_matches_the_model(tmp_path_factory, ops, data):
    tmp_path = tmp_path_factory.mktemp("groups")
    m = _manager(tmp_path)
    try:
        lg = m.get_log("__consumer_offsets", 0)
        w = Writer(lg)
        gp = GroupPartition(lg)
        for i, op in enumerate(ops):
            w.apply(op)
            if data is not None and data.draw(st.integers(0, 5)) == 0:  # now and then
                gp.catch_up()
                assert replayed(gp) == model(w.events), f"after {i + 1} operations"
        gp.catch_up()
        expected = model(w.events)
        assert replayed(gp) == expected
        assert replayed(_fresh(lg)) == expected  # a replay from scratch agrees
        # a cleaner pass (records without a key do not occur here) keeps the state
        lg.roll()
        cleaner = LogCleaner(CleanerConfig.from_broker(m.config), m.config.log_dirs, m.logs)
        try:
            result = cleaner.clean_log(lg)
            assert result.error is None, result.error
        finally:
            cleaner.shutdown()
        assert replayed(_fresh(lg)) == expected
        gp.catch_up()  # and one that read before the pass reads on to the same state
        assert replayed(gp) == expected
    finally:
        m.shutdown()


def _fresh(lg) -> GroupPartition:
    gp = GroupPartition(lg)
    gp.catch_up()
    return gp


def _java_hash_reference(s: str) -> int:
    """String.hashCode written differently: the sum of c_i * 31^(n-1-i) over the UTF-16
    code units (surrogate pairs for characters past U+FFFF), reduced to a signed int32."""
    units = []
    for ch in s:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            units += [0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)]
        else:
            units.append(cp)
    n = len(units)
    total = sum(u * pow(31, n - 1 - i, 1 << 32) for i, u in enumerate(units)) % (1 << 32)
    return total - (1 << 32) if total >= 1 << 31 else total


def test_coordinator_partition_is_javas_rule():
    rnd = random.Random(5)
    alphabet = "abcXYZ019-_.é€😀"
    ids = ["", "hello", "my-group", "console-consumer-12345"] + [
        "".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 40))) for _ in range(2000)]
    for g in ids:
        h = _java_hash_reference(g)
        assert java_string_hash(g) == h, g
        assert coordinator_partition(g, 50) == (0 if h == -2**31 else abs(h)) % 50
    assert java_string_hash("hello") == 99162322  # known from Java
    # Integer.MIN_VALUE's abs is 0 (Utils.abs): "polygenelubricants".hashCode() == MIN_VALUE
    assert java_string_hash("polygenelubricants") == -2**31
    assert coordinator_partition("polygenelubricants", 50) == 0


@pytest.mark.spark
def test_coordinator_partition_matches_the_jvm(spark):
    """The JVM's own String.hashCode (through Spark's py4j gateway), on many group ids."""
    rnd = random.Random(9)
    alphabet = "abcXYZ019-_.é€😀"
    ids = ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 30))) for _ in range(300)]
    jvm = spark.sparkContext._jvm
    for g in ids:
        assert java_string_hash(g) == jvm.java.util.Objects.hashCode(g), g
