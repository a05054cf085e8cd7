"""``kafkafs consumer-groups`` (kafka-consumer-groups.sh 4.1 on log dirs): its output
against Kafka's formats (ConsumerGroupCommand's format strings, widths, blank lines and
Java HashMap row order), and its writes read back three ways: by ``--describe``, by
kafka-python reading the raw batches of ``__consumer_offsets`` (the key and value bytes
parsed here by hand, not by kafkafs), and through a running mount, whose daemon takes the
writes when it holds the log dirs; beside a process that is no kafkafs daemon they are
refused."""

from __future__ import annotations

import os
import struct
import subprocess
import sys

from conftest import kafkafs, needs_fuse
from kafka.record import MemoryRecords

from kafkafs.log.config import BrokerConfig
from kafkafs.log.manager import LogManager
from kafkafs.record import tables

PARTITIONS = 4  # of __consumer_offsets here


def _java_hash(s: str) -> int:
    """String.hashCode, written here (UTF-16 code units, 32-bit wrap)."""
    h = 0
    for unit in struct.unpack(f">{len(s.encode('utf-16-be')) // 2}H", s.encode("utf-16-be")):
        h = (h * 31 + unit) % (1 << 32)
    return h - (1 << 32) if h >= 1 << 31 else h


def _partition_for(group: str) -> int:
    h = _java_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % PARTITIONS


def _key(record_type, data):
    m = tables.schema("group").by_api(record_type, "Key")
    return struct.pack(">h", record_type) + m.encode(data, 0)


def _value(record_type, version, data):
    m = tables.schema("group").by_api(record_type, "Value")
    return struct.pack(">h", version) + m.encode(data, version)


def _commit(group, topic, partition, offset, epoch=0):
    return (_key(1, {"group": group, "topic": topic, "partition": partition}),
            _value(1, 3, {"offset": offset, "leaderEpoch": epoch, "metadata": "",
                          "commitTimestamp": 1000}))


def _consumer_protocol(name, data):
    m = tables.schema("consumer_protocol").message(name)
    return struct.pack(">h", 0) + m.encode(data, 0)


def _stable_group(group, member, topic, partitions):
    return (_key(2, {"group": group}), _value(2, 3, {
        "protocolType": "consumer", "generation": 3, "protocol": "range", "leader": member,
        "currentStateTimestamp": 1000, "members": [{
            "memberId": member, "groupInstanceId": None, "clientId": "consumer-1",
            "clientHost": "/127.0.0.1", "rebalanceTimeout": 300000, "sessionTimeout": 45000,
            "subscription": _consumer_protocol("ConsumerProtocolSubscription",
                                               {"topics": [topic]}),
            "assignment": _consumer_protocol("ConsumerProtocolAssignment", {
                "assignedPartitions": [{"topic": topic, "partitions": partitions}]})}]}))


def make_log_dir(d: str) -> None:
    """Topic orders (3 partitions of 10, 20, 30 records); group billing (Stable, one member
    owning orders-0 and orders-1, commits for 0 and 2), group audit (offsets only)."""
    m = LogManager(BrokerConfig.from_properties({}).with_log_dirs([d]))
    m.startup()
    try:
        m.create_topic("orders", 3)
        m.create_topic("__consumer_offsets", PARTITIONS, {"cleanup.policy": "compact"})
        for p in range(3):
            m.get_log("orders", p).append([(1000 + i, None, b"v%d" % i, ())
                                           for i in range(10 * (p + 1))])
        groups = {"billing": [_commit("billing", "orders", 0, 5),
                              _commit("billing", "orders", 2, 30),
                              _stable_group("billing", "consumer-1-abc", "orders", [0, 1])],
                  "audit": [_commit("audit", "orders", 1, 7, epoch=4)]}
        for g, recs in groups.items():
            m.get_log("__consumer_offsets", _partition_for(g)).append(
                [(1000, k, v, ()) for k, v in recs])
    finally:
        m.shutdown()


def cg(d, *args, check=True):
    r = kafkafs("consumer-groups", "--log-dirs", d, *args, check=check)
    return r.returncode, r.stdout.decode(), r.stderr.decode()


def test_list_and_describe(tmp_path):
    d = str(tmp_path / "logs")
    make_log_dir(d)
    _rc, out, _err = cg(d, "--list")
    assert sorted(out.splitlines()) == ["audit", "billing"]
    _rc, out, _err = cg(d, "--list", "--state", "--type")
    lines = out.splitlines()
    assert lines[0] == "GROUP" + " " * 21 + "TYPE" + " " * 17 + "STATE" + " " * 15
    assert sorted(lines[1:]) == [
        "audit" + " " * 21 + "Classic" + " " * 14 + "Empty" + " " * 15,
        "billing" + " " * 19 + "Classic" + " " * 14 + "Stable" + " " * 14]
    _rc, out, _err = cg(d, "--list", "--state", "empty")
    assert [line.split() for line in out.splitlines()] == [["GROUP", "STATE"],
                                                          ["audit", "Empty"]]

    rc, out, err = cg(d, "--describe", "--all-groups")
    assert rc == 0
    assert "\nConsumer group 'audit' has no active members." in err
    head = ("GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG"
            "             CONSUMER-ID     HOST            CLIENT-ID")
    assert out == (  # groups in String order, each after a blank line; member rows first
        "\n" + head + "\n"
        "audit           orders          1          7               20              13"
        "              -               -               -\n"
        "\n" + head + "\n"
        "billing         orders          0          5               10              5"
        "               consumer-1-abc  /127.0.0.1      consumer-1\n"
        "billing         orders          1          -               20              -"
        "               consumer-1-abc  /127.0.0.1      consumer-1\n"
        "billing         orders          2          30              30              0"
        "               -               -               -\n")
    _rc, out, _err = cg(d, "--describe", "--group", "audit", "--verbose")
    assert out.splitlines()[2].split() == ["audit", "orders", "1", "4", "7", "20", "13", "-",
                                           "-", "-"]  # with the commit's leader epoch
    _rc, out, _err = cg(d, "--describe", "--group", "billing", "--members", "--verbose")
    assert out.splitlines()[1:] == [
        ("GROUP           CONSUMER-ID     HOST            CLIENT-ID       #PARTITIONS     "
        "CURRENT-EPOCH   CURRENT-ASSIGNMENT   TARGET-EPOCH    TARGET-ASSIGNMENT   "),
        ("billing         consumer-1-abc  /127.0.0.1      consumer-1      2               "
        "-               orders:0,1           -               -                   ")]
    _rc, out, _err = cg(d, "--describe", "--group", "billing", "--state")
    assert out.splitlines()[1].split() == ["GROUP", "COORDINATOR", "(ID)",
                                           "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
    assert out.splitlines()[2].split()[0] == "billing"
    assert out.splitlines()[2].split()[-3:] == ["range", "Stable", "1"]
    rc, out, _err = cg(d, "--describe", "--group", "nope", check=False)
    assert rc == 1 and out == ("\nError: Executing consumer group command failed due to "
                               "org.apache.kafka.common.errors.GroupIdNotFoundException: Group "
                               "nope not found.\n")


def test_usage_errors_are_kafkas(tmp_path):
    d = str(tmp_path / "logs")
    make_log_dir(d)
    for args, message in [
        (("--describe",), ("Option [describe] takes one of these options: [all-groups], "
                          "[group]")),
        (("--describe", "--group", "g", "--members", "--state"),
         ("Option [describe] takes at most one of these options: [members], [offsets], "
         "[state]")),
        (("--reset-offsets", "--group", "g", "--dry-run", "--execute"),
         "Option [reset-offsets] only accepts one of [execute] and [dry-run]"),
        (("--list", "--describe", "--all-groups"), ("Command must include exactly one action: --list, "
                                   "--describe, --delete, --reset-offsets, --delete-offsets, "
                                   "--validate-regex")),
        (("--delete-offsets", "--group", "g"),
         "Option [delete-offsets] takes the following options: [topic], [group]"),
        (("--reset-offsets", "--group", "audit", "--to-earliest", "--dry-run"),
         "One of the reset scopes should be defined: --all-topics, --topic."),
    ]:
        rc, _out, err = cg(d, *args, check=False)
        assert rc == 1 and err.splitlines()[0] == message, (args, err)


def _raw_commits(d: str, group: str) -> list[tuple]:
    """``(topic, partition, value version, offset, leader epoch, metadata)`` of the offset
    commits of ``group`` in its partition, read with kafka-python and parsed by hand
    (OffsetCommitKey: int16 type 1, int16-length group and topic, int32 partition;
    OffsetCommitValue v4: int16 4, int64 offset, int32 leader epoch, a compact string,
    int64 commit timestamp, an empty tagged-field section; None for a tombstone)."""
    pdir = os.path.join(d, f"__consumer_offsets-{_partition_for(group)}")
    out = []
    for name in sorted(n for n in os.listdir(pdir) if n.endswith(".log")):
        with open(os.path.join(pdir, name), "rb") as f:
            records = MemoryRecords(f.read())
        while records.has_next():
            batch = records.next_batch()
            for r in batch:
                key = r.key
                (record_type, n) = struct.unpack_from(">hh", key)
                if record_type != 1:
                    continue
                g = key[4:4 + n].decode()
                (m,) = struct.unpack_from(">h", key, 4 + n)
                topic = key[6 + n:6 + n + m].decode()
                (partition,) = struct.unpack_from(">i", key, 6 + n + m)
                if g != group:
                    continue
                if r.value is None:
                    out.append((topic, partition, None))
                    continue
                version, offset = struct.unpack_from(">hq", r.value)
                if version != 4:
                    out.append((topic, partition, version, offset))
                    continue
                (epoch,) = struct.unpack_from(">i", r.value, 10)
                length = r.value[14] - 1  # a short compact string: one varint byte
                metadata = r.value[15:15 + length].decode()
                assert r.value[15 + length + 8:] == b"\x00"  # no tagged fields
                out.append((topic, partition, version, offset, epoch, metadata))
    return out


def test_reset_execute_and_deletes_write_the_coordinators_records(tmp_path):
    d = str(tmp_path / "logs")
    make_log_dir(d)
    # a dry run plans and writes nothing
    rc, out, err = cg(d, "--reset-offsets", "--group", "audit", "--topic", "orders",
                      "--to-earliest")
    assert "WARN: No action will be performed as the --execute option is missing." in err
    assert out.splitlines()[1] == (
        "GROUP                          TOPIC                          PARTITION  NEW-OFFSET"
        "     ")
    assert [line.split() for line in out.splitlines()[2:]] == [
        ["audit", "orders", "0", "0"], ["audit", "orders", "1", "0"],
        ["audit", "orders", "2", "0"]]
    assert _raw_commits(d, "audit") == [("orders", 1, 3, 7)]
    # --execute: out of range is clamped (a WARN on stderr), written as Kafka 4.1 writes it
    rc, out, err = cg(d, "--reset-offsets", "--group", "audit", "--topic", "orders:1",
                      "--to-offset", "99", "--execute")
    assert rc == 0 and "New offset (99) is higher than latest offset for topic partition " \
        "orders-1. Value will be set to 20" in err
    assert _raw_commits(d, "audit")[-1] == ("orders", 1, 4, 20, -1, "")
    _rc, out, _err = cg(d, "--describe", "--group", "audit")
    assert out.splitlines()[2].split()[:6] == ["audit", "orders", "1", "20", "20", "0"]
    # shift-by from the committed offset, to an exported CSV
    _rc, out, _err = cg(d, "--reset-offsets", "--group", "audit", "--all-topics",
                        "--shift-by", "-3", "--execute", "--export")
    assert out == "orders,1,17\n\n"
    assert _raw_commits(d, "audit")[-1][3] == 17
    # an active group is refused
    rc, out, _err = cg(d, "--reset-offsets", "--group", "billing", "--all-topics",
                       "--to-latest", "--execute", check=False)
    assert rc == 1 and "\nError: Assignments can only be reset if the group 'billing' is " \
        "inactive, but the current state is Stable." in out
    # delete-offsets: a tombstone; delete of a group with members: refused
    _rc, out, _err = cg(d, "--delete-offsets", "--group", "audit", "--topic", "orders:1")
    assert out.splitlines()[0] == "Request succeeded for deleting offsets from group audit."
    assert out.splitlines()[3].split() == ["orders", "1", "Successful"]
    assert _raw_commits(d, "audit")[-1] == ("orders", 1, None)
    rc, out, _err = cg(d, "--delete", "--group", "billing", check=False)
    assert rc == 1 and "* Group 'billing' could not be deleted due to: org.apache.kafka." \
        "common.errors.GroupNotEmptyException: The group is not empty." in out
    # a new group's commit goes to abs(hashCode) % partitions, creating nothing else
    cg(d, "--reset-offsets", "--group", "fresh-group", "--topic", "orders", "--to-latest",
       "--execute")
    assert [c[:4] for c in _raw_commits(d, "fresh-group")] == [
        ("orders", p, 4, 10 * (p + 1)) for p in range(3)]
    _rc, out, _err = cg(d, "--delete", "--group", "fresh-group")
    assert out == "Deletion of requested consumer groups ('fresh-group') was successful.\n"
    assert [c for c in _raw_commits(d, "fresh-group") if c[2] is None] == [
        ("orders", p, None) for p in range(3)]
    assert sorted(cg(d, "--list")[1].splitlines()) == ["billing"]


def test_datetime_and_duration_scenarios(tmp_path):
    d = str(tmp_path / "logs")
    make_log_dir(d)
    # orders-2 holds timestamps 1000..1029: the first record at or after 1.010 s
    _rc, out, _err = cg(d, "--reset-offsets", "--group", "audit", "--topic", "orders:2",
                        "--to-datetime", "1970-01-01T00:00:01.010")
    assert out.splitlines()[2].split() == ["audit", "orders", "2", "10"]
    _rc, out, _err = cg(d, "--reset-offsets", "--group", "audit", "--topic", "orders:2",
                        "--to-datetime", "1970-01-01T01:00:01.010+01:00")
    assert out.splitlines()[2].split() == ["audit", "orders", "2", "10"]
    # a time after every record: Kafka's warning, then the latest offset
    _rc, out, _err = cg(d, "--reset-offsets", "--group", "audit", "--topic", "orders:2",
                        "--by-duration", "PT1S")
    assert "Warn: Partition 2 from topic orders is empty. Falling back to latest known " \
        "offset." in out
    assert out.splitlines()[-1].split() == ["audit", "orders", "2", "30"]
    rc, out, _err = cg(d, "--reset-offsets", "--group", "audit", "--topic", "orders:2",
                       "--to-datetime", "1970-01-01T00:00:01", check=False)
    assert rc == 1 and "java.text.ParseException: Unparseable date" in out


@needs_fuse
def test_writes_go_through_the_daemon_holding_the_log_dirs(mount_factory, tmp_path):
    d = str(tmp_path / "logs")
    make_log_dir(d)
    mount_factory(log_dirs=[d])
    rc, out, err = cg(d, "--reset-offsets", "--group", "audit", "--topic", "orders:0",
                      "--to-offset", "3", "--execute")
    assert rc == 0, err
    assert _raw_commits(d, "audit")[-1] == ("orders", 0, 4, 3, -1, "")
    _rc, out, _err = cg(d, "--describe", "--group", "audit")
    assert ["audit", "orders", "0", "3", "10", "7", "-", "-", "-"] in \
        [line.split() for line in out.splitlines()]


def test_writes_are_refused_beside_a_broker(tmp_path):
    d = str(tmp_path / "logs")
    make_log_dir(d)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         ("import fcntl, os, time\n"
          f"fd = os.open({os.path.join(d, '.lock')!r}, os.O_RDWR)\n"
          "fcntl.lockf(fd, fcntl.LOCK_EX)\n"
          "print('locked', flush=True); time.sleep(60)\n")], stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline() == b"locked\n"
        before = _raw_commits(d, "audit")
        rc, _out, err = cg(d, "--reset-offsets", "--group", "audit", "--topic", "orders",
                           "--to-earliest", "--execute", check=False)
        assert rc == 1 and "which is not a kafkafs daemon (a Kafka broker?)" in err, err
        assert "kafka-consumer-groups.sh --bootstrap-server" in err
        assert _raw_commits(d, "audit") == before
        # reading needs no lock
        assert cg(d, "--list")[0] == 0
    finally:
        holder.kill()
        holder.wait()


def test_consume_with_a_group_starts_from_and_commits_its_offsets(tmp_path):
    """``kafkafs consume --group``: the group's committed offsets, else auto.offset.reset
    (earliest with --from-beginning); what it printed is committed at the end, so the next
    run goes on from there; a group with members is refused."""
    d = str(tmp_path / "logs")
    make_log_dir(d)

    def consume(*args):
        r = kafkafs("consume", "--log-dirs", d, "--topic", "orders", "--timeout-ms", "0",
                    "--property", "print.partition=true", "--property", "print.offset=true",
                    *args, check=False)
        return r.returncode, r.stdout.decode().splitlines(), r.stderr.decode()

    # audit committed orders-1 at 7: from there; the others from the beginning
    rc, lines, _err = consume("--group", "audit", "--from-beginning")
    assert rc == 0
    assert next(x for x in lines if x.startswith("Partition:1")) == "Partition:1\tOffset:7\tv7"
    assert len(lines) == 10 + 13 + 30
    assert sorted(c[:4] for c in _raw_commits(d, "audit")[1:]) == [
        ("orders", 0, 4, 10), ("orders", 1, 4, 20), ("orders", 2, 4, 30)]
    rc, lines, _err = consume("--group", "audit")
    assert rc == 0 and lines == []  # everything was committed
    # a new group without --from-beginning: latest (nothing printed)
    rc, lines, _err = consume("--group", "fresh")
    assert rc == 0 and lines == []
    rc, _lines, err = consume("--group", "audit", "--partition", "0")
    assert rc == 1 and "Options group and partition cannot be specified together." in err
    rc, _lines, err = consume("--group", "billing")
    assert rc == 1 and "has active members" in err
