"""LogManager: several log dirs, locks, checkpoints, topic configs, adoption."""

from __future__ import annotations

import os
import shutil

import pytest

from kafkafs.log import checkpoint as ckpt
from kafkafs.log.config import BrokerConfig
from kafkafs.log.errors import (
    InvalidConfigError,
    InvalidTopicError,
    LogDirLockedError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from kafkafs.log.manager import LogManager


def start(dirs, **props):
    m = LogManager(BrokerConfig.from_properties(props).with_log_dirs(dirs))
    m.startup()
    return m


def test_new_partitions_go_to_the_dir_with_fewest(tmp_path):
    dirs = [str(tmp_path / f"d{i}") for i in range(3)]
    m = start(dirs)
    m.create_topic("a", 4)
    m.create_topic("b", 2)
    counts = [sum(1 for n in os.listdir(d) if n[:2] in ("a-", "b-")) for d in dirs]
    assert sorted(counts) == [2, 2, 2]
    for d in dirs:
        props = ckpt.read_properties(os.path.join(d, "meta.properties"))
        assert props["version"] == "1" and len(props["directory.id"]) == 22
    clusters = {ckpt.read_properties(os.path.join(d, "meta.properties"))["cluster.id"]
                for d in dirs}
    assert len(clusters) == 1
    m.shutdown()


def test_lock_excludes_a_second_owner_and_readers_need_none(tmp_path):
    d = str(tmp_path / "logs")
    m = start([d])
    m.create_topic("t")
    m.get_log("t", 0).append([(1, None, b"x", ())])
    with pytest.raises(LogDirLockedError, match="lock"):
        start([d])
    ro = LogManager(BrokerConfig().with_log_dirs([d]), read_only=True)
    ro.startup()
    assert [r.value for r in ro.get_log("t", 0).records()] == [b"x"]
    ro.shutdown()
    m.shutdown()
    start([d]).shutdown()  # released


def test_checkpoints_and_clean_shutdown(tmp_path):
    d = str(tmp_path / "logs")
    m = start([d], **{"log.segment.bytes": "200", "log.segment.delete.delay.ms": "0"})
    m.create_topic("t", overrides={"retention.bytes": "300"})
    lg = m.get_log("t", 0)
    for i in range(20):
        lg.append([(i, None, b"v" * 40, ())])
    assert m.apply_retention() > 0
    start_offset = lg.log_start_offset
    assert m.shutdown() is True
    assert os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
    assert ckpt.read_offset_checkpoint(os.path.join(d, "recovery-point-offset-checkpoint")) \
        == {("t", 0): 20}
    assert ckpt.read_offset_checkpoint(os.path.join(d, "log-start-offset-checkpoint")) \
        == {("t", 0): start_offset}
    m = start([d])
    assert not os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
    lg = m.get_log("t", 0)
    assert lg.log_start_offset == start_offset and lg.log_end_offset == 20
    assert m.topic_config("t").retention_bytes == 300  # overrides survive a restart
    m.shutdown()


def test_topic_errors_and_config(tmp_path):
    m = start([str(tmp_path / "logs")], **{"num.partitions": "2"})
    assert len(m.create_topic("t")) == 2
    with pytest.raises(TopicExistsError):
        m.create_topic("t")
    with pytest.raises(InvalidTopicError):
        m.create_topic("no/slash")
    with pytest.raises(InvalidConfigError):
        m.create_topic("u", overrides={"retention.ms": "x"})
    assert "u" not in m.topics()
    m.create_topic("t.x")
    with pytest.raises(InvalidConfigError, match="collides"):
        m.create_topic("t_x")
    m.alter_topic_config("t", {"segment.bytes": "1024"})
    assert m.get_log("t", 0).config.segment_bytes == 1024
    m.add_partitions("t", 3)
    assert m.partitions("t") == [0, 1, 2]
    m.delete_topic("t")
    with pytest.raises(UnknownTopicOrPartitionError):
        m.get_log("t", 0)
    m.shutdown()


def test_restored_partition_is_adopted(tmp_path):
    src = str(tmp_path / "src")
    m = start([src])
    m.create_topic("r")
    m.get_log("r", 0).append([(1, None, b"restored", ())])
    m.shutdown()
    dst = str(tmp_path / "dst")
    m = start([dst])
    shutil.copytree(os.path.join(src, "r-0"), os.path.join(dst, "r-0"))
    new = m.scan_for_new_partitions()
    assert [lg.name for lg in new] == ["r-0"]
    assert [r.value for r in m.get_log("r", 0).records()] == [b"restored"]
    m.shutdown()
