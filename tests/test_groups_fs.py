"""Consumer groups as files (``MOUNT/__consumer_offsets/groups/``, kafkafs/fs/nodes/groups.py)
through a real mount, driven with real ``ls``, ``cat``, ``getfattr``, ``echo >`` and ``rm``:
the committed offsets, ``state`` and ``lag``; commits written through the files and by
``kafkafs consumer-groups`` beside the mount (the daemon takes them), the view following
them and a compaction of ``__consumer_offsets``; a deleted group disappears."""

from __future__ import annotations

import json
import os
import subprocess

from conftest import kafkafs, needs_fuse
from test_consumer_groups import _partition_for, _raw_commits, make_log_dir

pytestmark = needs_fuse


def sh(*args) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, check=False)


def test_groups_view(mount_factory, tmp_path):
    d = str(tmp_path / "logs")
    make_log_dir(d)
    m = mount_factory(log_dirs=[d])
    groups = m.path("__consumer_offsets", "groups")
    assert "groups" not in os.listdir(m.path("orders"))  # only in __consumer_offsets
    assert sh("ls", groups).stdout.split() == ["audit", "billing"]
    assert sh("ls", os.path.join(groups, "billing")).stdout.split() == ["lag", "orders",
                                                                        "state"]
    assert sh("ls", os.path.join(groups, "billing", "orders")).stdout.split() == ["0", "2"]
    assert sh("cat", os.path.join(groups, "billing", "orders", "0")).stdout == "5\n"
    attrs = sh("getfattr", "-d", os.path.join(groups, "audit", "orders", "1")).stdout
    assert 'user.kafka.commit_timestamp="1000"' in attrs
    assert 'user.kafka.leader_epoch="4"' in attrs and 'user.kafka.metadata=""' in attrs
    state = json.loads(sh("cat", os.path.join(groups, "billing", "state")).stdout)
    assert (state["type"], state["state"], state["protocol"], state["generation"]) == \
        ("Classic", "Stable", "range", 3)
    assert state["members"][0]["assignment"] == [{"topic": "orders", "partitions": [0, 1]}]
    assert state["coordinator_partition"] == _partition_for("billing")
    lag = sh("cat", os.path.join(groups, "billing", "lag")).stdout.splitlines()
    assert lag[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET",
                              "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    assert [row.split() for row in lag[1:]] == [
        ["billing", "orders", "0", "5", "10", "5", "consumer-1-abc", "/127.0.0.1",
         "consumer-1"],
        ["billing", "orders", "1", "-", "20", "-", "consumer-1-abc", "/127.0.0.1",
         "consumer-1"],
        ["billing", "orders", "2", "30", "30", "0", "-", "-", "-"]]

    # echo N > commits N (as --reset-offsets --to-offset N), as Kafka 4.1 writes it
    audit1 = os.path.join(groups, "audit", "orders", "1")
    r = subprocess.run(f"echo 12 > {audit1}", shell=True, check=False)
    assert r.returncode == 0 and sh("cat", audit1).stdout == "12\n"
    assert _raw_commits(d, "audit")[-1] == ("orders", 1, 4, 12, -1, "")
    # refused: an active group (EBUSY), not a number (EINVAL)
    r = sh("bash", "-c", f"echo 3 > {os.path.join(groups, 'billing', 'orders', '0')}")
    assert r.returncode != 0 and "busy" in r.stderr.lower()
    r = sh("bash", "-c", f"echo abc > {audit1}")
    assert r.returncode != 0 and "invalid argument" in r.stderr.lower()
    assert sh("cat", audit1).stdout == "12\n"
    # a new file commits a partition without a commit yet; rm deletes one
    audit0 = os.path.join(groups, "audit", "orders", "0")
    assert subprocess.run(f"echo 99 > {audit0}", shell=True, check=False).returncode == 0
    assert sh("cat", audit0).stdout == "10\n"  # clamped to the latest offset, as Kafka
    assert sh("rm", audit0).returncode == 0
    assert sh("ls", os.path.join(groups, "audit", "orders")).stdout.split() == ["1"]

    # the CLI beside the mount writes through the daemon; the view follows
    r = kafkafs("consumer-groups", "--log-dirs", d, "--reset-offsets", "--group", "audit",
                "--topic", "orders:1", "--to-offset", "17", "--execute")
    assert r.returncode == 0
    assert sh("cat", audit1).stdout == "17\n"
    # a compaction of __consumer_offsets changes nothing that the view shows
    os.setxattr(m.path("__consumer_offsets"), "user.kafkafs.compact", b"now")
    assert sh("cat", audit1).stdout == "17\n"
    assert sh("ls", groups).stdout.split() == ["audit", "billing"]
    # a deleted group is gone
    r = kafkafs("consumer-groups", "--log-dirs", d, "--delete", "--group", "audit")
    assert r.returncode == 0, r.stdout
    assert sh("ls", groups).stdout.split() == ["billing"]
    assert not os.path.exists(audit1)
