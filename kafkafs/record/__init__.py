"""Kafka record formats: codec only, no I/O (docs/design.md §1, §2)."""

from .batch import (  # noqa: F401
    CREATE_TIME,
    LOG_APPEND_TIME,
    RecordBatch,
    encode_batch,
    iter_batches,
)
from .errors import CorruptRecordError  # noqa: F401
from .types import Record  # noqa: F401
