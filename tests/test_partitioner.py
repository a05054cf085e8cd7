"""Kafka's murmur2 partitioner: Kafka's own test vectors, and kafka-python agrees."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkafs.log.partitioner import murmur2, partition_for_key

# from Apache Kafka's UtilsTest.testMurmur2
VECTORS = [(b"21", -973932308), (b"foobar", -790332482),
           (b"a-little-bit-long-string", -985981536),
           (b"a-little-bit-longer-string", -1486304829),
           (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
           (b"abc", 479470107)]


@pytest.mark.parametrize("data,expected", VECTORS)
def test_kafka_vectors(data, expected):
    assert murmur2(data) == expected


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64), st.integers(1, 100))
def test_agrees_with_kafka_python(key, n):
    from kafka.partitioner.default import murmur2 as their_murmur2

    assert partition_for_key(key, n) == (their_murmur2(key) & 0x7FFFFFFF) % n
