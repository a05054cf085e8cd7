"""The decoded record: :class:`Record`, what every reader of a batch (v2 or legacy) returns.

Its own module so that :mod:`kafkafs.record.batch` and :mod:`kafkafs.record.legacy` both
build records without importing each other. No I/O; imports nothing of kafkafs.
"""

from __future__ import annotations

from collections import namedtuple as _namedtuple

Header = tuple  # (key: str, value: bytes | None)

_new_tuple = tuple.__new__


class Record(_namedtuple("Record", ("offset", "timestamp", "key", "value", "headers"))):
    """One decoded record, an immutable 5-tuple ``(offset, timestamp, key, value, headers)``.

    Attributes: ``offset`` (absolute), ``timestamp`` (ms since epoch; under LogAppendTime the
    batch's max timestamp), ``key`` and ``value`` (``bytes`` or None), ``headers`` (tuple of
    ``(str, bytes | None)``). Kafka's ``DefaultRecord`` without its size and attributes.
    A named tuple: equality compares all five, records are hashable and picklable, and the
    decoder creates them with ``tuple.__new__`` (no Python-level constructor per record).
    """

    __slots__ = ()

    def __new__(cls, offset: int, timestamp: int, key, value, headers=()):
        return _new_tuple(cls, (offset, timestamp, key, value, tuple(headers)))

    def __repr__(self):
        return (f"Record(offset={self[0]}, timestamp={self[1]}, key={self[2]!r}, "
                f"value={self[3]!r}, headers={self[4]!r})")
