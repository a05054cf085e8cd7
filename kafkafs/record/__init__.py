"""Kafka record formats: the codec (docs/design.md §1, §2).

Bytes in, bytes or records out. The one kind of I/O here: the renderers of plain batches
(``plain.render_file_values``, ``jsonl.render_file`` and their C twins) read a byte range
with ``pread`` from a file descriptor the log layer hands them and leases for the call, so
that the C code reads and renders with the GIL released. Nothing in this package opens,
names, writes or closes a file; which file, which range and the rules of damage are the log
layer's (``kafkafs.log``).
"""

from .batch import (  # noqa: F401
    CREATE_TIME,
    LOG_APPEND_TIME,
    RecordBatch,
    encode_batch,
    iter_batches,
)
from .errors import CorruptRecordError  # noqa: F401
from .types import Record  # noqa: F401
