"""Configuration: Kafka's key names, synonyms, defaults and validation."""

import errno
import os

import pytest
from conftest import kafkafs, sh

from kafkafs.log.config import (
    LONG_MAX,
    BrokerConfig,
    LogConfig,
    check_topic_config,
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


@pytest.mark.parametrize("key, value, rule", [
    ("retention.ms", "banana", "Not a number of type LONG"),
    ("retention.ms", "1_000", "Not a number of type LONG"),
    ("retention.ms", "-2", "Value must be at least -1"),
    ("segment.bytes", "10", "Value must be at least 14"),
    ("segment.bytes", "2147483648", "Not a number of type INT"),
    ("min.cleanable.dirty.ratio", "1.5", "Value must be no more than 1"),
    ("min.cleanable.dirty.ratio", "half", "Not a number of type DOUBLE"),
    ("preallocate", "yes", "Expected value to be either true or false"),
    ("message.timestamp.type", "Now", "String must be one of: CreateTime, LogAppendTime"),
    ("compression.type", "brotli",
     "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
])
def test_bad_values_are_refused_in_kafkas_words(key, value, rule):
    """Kafka's ConfigException message for each type and validator of LogConfig (ConfigDef
    parseType, Range.atLeast/between, ValidString): key, value and rule, no Python."""
    with pytest.raises(InvalidConfigError) as e:
        check_topic_config(key, value)
    assert str(e.value) == f"Invalid value {value} for configuration {key}: {rule}"
    with pytest.raises(InvalidConfigError) as e:
        validate_topic_overrides({key: value})
    assert str(e.value) == f"Invalid value {value} for configuration {key}: {rule}"


def test_bad_list_element_and_broker_keys_in_kafkas_words():
    """A cleanup.policy list names the element that is wrong (ValidList); a broker key is
    named itself, with its own type (log.retention.hours is an INT of hours)."""
    with pytest.raises(InvalidConfigError) as e:
        check_topic_config("cleanup.policy", "compact,archive")
    assert str(e.value) == ("Invalid value archive for configuration cleanup.policy: "
                            "String must be one of: compact, delete")
    with pytest.raises(InvalidConfigError) as e:
        BrokerConfig.from_properties({"log.retention.hours": "1.5"})
    assert str(e.value) == ("Invalid value 1.5 for configuration log.retention.hours: "
                            "Not a number of type INT")
    with pytest.raises(InvalidConfigError) as e:
        BrokerConfig.from_properties({"log.segment.bytes": "lots"})
    assert str(e.value) == ("Invalid value lots for configuration log.segment.bytes: "
                            "Not a number of type INT")
    check_topic_config("retention.ms", " 1000 ")  # Kafka trims, as Long.parseLong of trim()


def test_config_file_write_fails_at_write_and_says_why(mount, tmp_path):
    """``echo 'retention.ms=banana' > t/config`` (bash's builtin echo ignores close errors,
    not write errors) exits 1 and changes nothing; the daemon logs one line naming key,
    value and rule; a bad line after good ones fails its write too, and a bad last line
    without a newline fails close. ``kafkafs topics`` says the same without Python."""
    os.mkdir(mount.path("t"))
    cfg = mount.path("t", "config")
    before = open(cfg).read()
    r = sh(f"echo 'retention.ms=banana' > {cfg}", executable="/bin/bash")
    assert r.returncode == 1 and b"echo: write error: Invalid argument" in r.stderr
    assert open(cfg).read() == before
    rule = "Invalid value banana for configuration retention.ms: Not a number of type LONG"
    assert sum(rule in line for line in mount.log().splitlines()) == 1
    r = sh(f"printf 'retention.ms=1000\\ncleanup.policy=archive\\n' > {cfg}",
           executable="/bin/bash")
    assert r.returncode == 1 and b"printf: write error: Invalid argument" in r.stderr
    assert open(cfg).read() == before
    f = open(cfg, "wb", buffering=0)  # noqa: SIM115 (close is what is tested)
    assert f.write(b"retention.ms=1000\nsegment.bytes=1") == 33
    with pytest.raises(OSError) as e:
        f.close()
    assert e.value.errno == errno.EINVAL
    assert open(cfg).read() == before
    assert "Value must be at least 14" in mount.log()
    with open(cfg, "w") as f:
        f.write("retention.ms=1000\\\n   000\n")  # a continued line, checked once complete
    assert "# (override)\nretention.ms=1000000\n" in open(cfg).read()
    assert mount.umount() == 0
    r = kafkafs("topics", "--log-dirs", mount.log_dirs[0], "--alter", "--topic", "t",
                "--config", "retention.ms=banana", check=False)
    assert (r.returncode, r.stderr.decode()) == (1, f"error: {rule}\n")
    r = kafkafs("topics", "--log-dirs", mount.log_dirs[0], "--create", "--topic", "u",
                "--config", "segment.bytes=10", check=False)
    assert (r.returncode, r.stderr.decode()) == (
        1, "error: Invalid value 10 for configuration segment.bytes: Value must be at least 14\n")
