"""Configuration: Kafka's key names, synonyms, defaults and validation."""

import pytest

from kafkafs.log.config import (
    LONG_MAX,
    BrokerConfig,
    LogConfig,
    format_properties,
    parse_properties,
    validate_topic_overrides,
)
from kafkafs.log.errors import InvalidConfigError


def test_defaults_are_kafkas():
    c = LogConfig()
    assert c.segment_bytes == 1073741824
    assert c.segment_ms == 604800000
    assert c.segment_index_bytes == 10485760
    assert c.index_interval_bytes == 4096
    assert c.retention_ms == 604800000
    assert c.retention_bytes == -1
    assert c.flush_messages == LONG_MAX and c.flush_ms == LONG_MAX
    assert c.file_delete_delay_ms == 60000
    assert c.max_message_bytes == 1048588
    assert c.cleanup_policy == "delete" and c.compression_type == "producer"
    b = BrokerConfig()
    assert b.log_retention_check_interval_ms == 300000
    assert b.num_partitions == 1


def test_broker_synonyms_and_precedence():
    c = BrokerConfig.from_properties({
        "log.retention.hours": "1", "log.retention.minutes": "2",
        "log.roll.hours": "3", "log.segment.bytes": "1234",
        "log.dirs": "/a, /b", "num.partitions": "4", "message.max.bytes": "999",
        "log.cleanup.policy": "compact,delete", "some.broker.key": "kept",
    })
    assert c.log.retention_ms == 2 * 60 * 1000  # minutes beat hours, as in Kafka
    assert c.log.segment_ms == 3 * 3600 * 1000
    assert c.log.segment_bytes == 1234
    assert c.log.max_message_bytes == 999
    assert c.log.compact and c.log.delete
    assert c.log_dirs == ("/a", "/b")
    assert c.num_partitions == 4
    assert c.extra == {"some.broker.key": "kept"}
    assert BrokerConfig.from_properties({"log.retention.ms": "5",
                                         "log.retention.hours": "9"}).log.retention_ms == 5


def test_bad_values_name_the_key():
    with pytest.raises(InvalidConfigError, match="log.segment.bytes"):
        BrokerConfig.from_properties({"log.segment.bytes": "lots"})
    with pytest.raises(InvalidConfigError, match="retention.ms"):
        validate_topic_overrides({"retention.ms": "soon"})
    with pytest.raises(InvalidConfigError, match="Unknown topic config"):
        validate_topic_overrides({"retention.mss": "1"})
    with pytest.raises(InvalidConfigError):
        validate_topic_overrides({"cleanup.policy": "archive"})
    with pytest.raises(InvalidConfigError):
        validate_topic_overrides({"min.cleanable.dirty.ratio": "1.5"})


def test_overrides_apply_over_broker_values():
    broker = BrokerConfig.from_properties({"log.retention.hours": "1"})
    topic = broker.log.with_overrides({"segment.bytes": "2048"})
    assert topic.retention_ms == 3600000 and topic.segment_bytes == 2048
    assert topic.to_properties()["segment.bytes"] == "2048"
    assert topic.to_properties()["preallocate"] == "false"


def test_java_properties_syntax():
    text = "# comment\n! also\na=1\nb : 2\nc 3\nd=multi \\\n    line\ne=tab\\tand\\u0041\nf\n"
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "3", "d": "multi line",
                                      "e": "tab\tandA", "f": ""}
    props = {"x.y": "1", "key with space": "v=1"}
    assert parse_properties(format_properties(props)) == props


def test_load_reads_file(tmp_path):
    p = tmp_path / "server.properties"
    p.write_text("log.dirs=/x\nlog.flush.interval.messages=10\n")
    c = BrokerConfig.load(str(p), {"num.partitions": "3"})
    assert c.log_dirs == ("/x",) and c.log.flush_messages == 10 and c.num_partitions == 3
