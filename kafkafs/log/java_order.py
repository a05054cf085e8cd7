"""Orders Kafka's tools print in without sorting: Java ``HashMap`` iteration, and
``String.compareTo`` (kafka-consumer-groups' rows, groups and member lists).

A ``HashMap`` filled by sequential puts (``Collectors.toMap``) iterates its buckets in
ascending order, each bucket's keys in insertion order; a key's bucket is
``spread(hashCode) & (capacity - 1)`` with ``spread(h) = h ^ (h >>> 16)``, and the
capacity starts at 16 and doubles whenever the size passes 0.75 of it (a resize keeps each
bucket's relative order). Trees in buckets of 8 and more keys are not modelled (they need
thousands of keys of one tool's map to matter).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .groups import java_string_hash

__all__ = ["hashmap_order", "java_string_key", "topic_partition_hash"]


def _spread(h: int) -> int:
    h &= 0xFFFFFFFF
    return h ^ (h >> 16)


def hashmap_order(keys: Iterable, hash_code: Callable[[object], int]) -> list:
    """``keys`` (distinct, in insertion order) in the order a Java ``HashMap`` of them
    iterates, ``hash_code`` giving each key's Java ``hashCode`` (a signed 32-bit int)."""
    keys = list(keys)
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2
    mask = capacity - 1
    indexed = [(_spread(hash_code(k)) & mask, i, k) for i, k in enumerate(keys)]
    indexed.sort(key=lambda t: (t[0], t[1]))
    return [k for _b, _i, k in indexed]


def topic_partition_hash(tp: tuple[str, int]) -> int:
    """``TopicPartition.hashCode``: ``31 * (31 + partition) + topic.hashCode()``, 32-bit."""
    topic, partition = tp
    h = (31 * (31 + partition) + java_string_hash(topic)) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def java_string_key(s: str) -> bytes:
    """A sort key ordering strings as Java's ``String.compareTo`` (UTF-16 code units)."""
    return s.encode("utf-16-be", "surrogatepass")
