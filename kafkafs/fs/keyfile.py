"""Writing a key file, ``key/<k>`` (docs/tree.md "The key view"; the view is fs.nodes.keys).

A descriptor opened for writing holds the file's content: empty with ``O_TRUNC`` (``>``) or
for a new key, else the current value; writes land at their offset, and at the end with
``O_APPEND``. The content is produced as one record keyed k by each ``close`` after which it
was written, and by the last ``close`` of a file created or truncated with nothing written
(an empty value). A content refused (EMSGSIZE, ENOSPC, EROFS) is dropped, never produced
later.
"""

from __future__ import annotations

from ..log.errors import RecordTooLargeError
from ..log.log import Log, now_ms
from ..record.batch import single_record_batch_size
from .append import _uncompressed


class KeyWriter:
    """The content a descriptor writes to ``key/<k>`` (module docstring): ``key`` bytes,
    the ``partition`` it goes to, ``buf`` the file's content so far, ``append``
    (``O_APPEND``). ``fresh``: created or truncated (``O_TRUNC``): the content is due even
    if nothing is written (``: > key/k`` makes an empty value)."""

    __slots__ = ("append", "buf", "dirty", "fresh", "key", "partition", "produced")

    def __init__(self, key: bytes, partition: int, content: bytes = b"", *,
                 append: bool = False, fresh: bool = False):
        self.key = key
        self.partition = partition
        self.buf = bytearray(content)
        self.append = append
        self.fresh = fresh
        self.dirty = False  # written since the last record produced
        self.produced = False

    def check(self, lg: Log, size: int) -> None:
        """Raise RecordTooLargeError unless a value of ``size`` bytes fits with the key in
        one record batch of ``max.message.bytes`` (exact for uncompressed topics; the
        others are checked when the batch is made)."""
        limit = lg.config.max_message_bytes
        if _uncompressed(lg) and single_record_batch_size(len(self.key), size) > limit:
            raise RecordTooLargeError(
                f"a value of {size} bytes for a key of {len(self.key)} bytes does not fit in "
                f"one record batch of max.message.bytes ({limit}) of {lg.name}")

    def write(self, lg: Log, data: bytes, off: int) -> int:
        """Put ``data`` at ``off`` (at the end with ``O_APPEND``). Returns its length.
        Raises RecordTooLargeError (EMSGSIZE) when the content would no longer fit
        (:meth:`check`), leaving the content as it was."""
        if self.append:
            off = len(self.buf)
        end = off + len(data)
        self.check(lg, max(end, len(self.buf)))
        if off > len(self.buf):
            self.buf.extend(bytes(off - len(self.buf)))
        self.buf[off:end] = data
        self.dirty = True
        return len(data)

    def truncate(self, lg: Log, size: int) -> None:
        """``ftruncate``: cut or zero-extend the content to ``size`` bytes."""
        self.check(lg, size)
        if size < len(self.buf):
            del self.buf[size:]
        else:
            self.buf.extend(bytes(size - len(self.buf)))
        self.dirty = True

    def flush(self, lg: Log) -> int | None:
        """A ``close`` of a descriptor (``flush``; one per duplicate, so the shell's
        ``close`` after ``dup2`` comes before any write): produce the content when it was
        written since the last record. Returns the offset or None (nothing due). A content
        refused here (RecordTooLargeError, OSError such as ENOSPC, ReadOnlyLogError) is
        dropped: the error goes to the caller, the content is never produced later."""
        if not self.dirty:
            return None
        return self._produce(lg)

    def release(self, lg: Log) -> int | None:
        """The last descriptor is gone: produce what :meth:`flush` did not -- the content
        of a file created or truncated with nothing written, or written after the last
        flush. Raises like :meth:`flush` (the caller can only log it)."""
        if self.dirty or (self.fresh and not self.produced):
            return self._produce(lg)
        return None

    def _produce(self, lg: Log) -> int:
        self.dirty = False
        self.produced = True
        return lg.append([(now_ms(), self.key, bytes(self.buf), ())])[0]
