"""Names in a log dir: topics, partition dirs, segment files."""

import pytest

from kafkafs.log.errors import InvalidTopicError
from kafkafs.log.names import (
    log_filename,
    parse_partition_dir,
    parse_segment_filename,
    validate_topic,
)


@pytest.mark.parametrize("name", ["orders", "a.b_c-D9", "x" * 249, "__consumer_offsets"])
def test_legal_topics(name):
    assert validate_topic(name) == name


@pytest.mark.parametrize("name", ["", ".", "..", "x" * 250, "a/b", "a b", "ü", "a\x00", "../etc"])
def test_illegal_topics(name):
    with pytest.raises(InvalidTopicError):
        validate_topic(name)


def test_partition_dirs():
    assert parse_partition_dir("orders-3") == ("orders", 3)
    assert parse_partition_dir("my-topic-12") == ("my-topic", 12)
    assert parse_partition_dir("t-0.5f3c9e8a1b2c4d5e6f708192a3b4c5d6-delete") is None
    assert parse_partition_dir("t-0.abc-future") is None
    assert parse_partition_dir("t-0.abc-stray") is None
    assert parse_partition_dir("noPartition") is None
    assert parse_partition_dir("bad name-0") is None


def test_segment_names():
    assert log_filename(42) == "00000000000000000042.log"
    assert parse_segment_filename("00000000000000000042.log") == (42, ".log", "")
    assert parse_segment_filename("00000000000000000042.timeindex.deleted") == \
        (42, ".timeindex", ".deleted")
    assert parse_segment_filename("42.log") is None
    assert parse_segment_filename("leader-epoch-checkpoint") is None
