"""Writing a partition's ``append`` file: each ``\\n``-terminated line becomes one record
(kafka-console-producer's rules; docs/tree.md "Writing: append").

What one descriptor has written is kept by a :class:`LineWriter`. Lines of one ``write``
request go into record batches cut as a Kafka producer cuts them at its ``batch.size``
(kafkafs.record.producer_batch: the mount's ``-o batch.size``, else the topic's
``kafkafs.batch.size``, default 16384 bytes; never past ``max.message.bytes``), the C
encoder taking them straight from the request's buffer -- on an uncompressed topic all
the batches of a request in one call, appended as one buffer (one ``pwrite``, one index
pass: docs/design.md §4.1, §4.2); a line split across requests is joined; a last line
without ``\\n`` is produced when the descriptor is closed. Like a producer with
``linger.ms=0``, a request's last batch is written with the request, full or not: what a
``write`` returned for is in the log. The log knows nothing of lines: this module makes
them encoded batches.

A refused line (longer than one batch of ``max.message.bytes`` may hold, without
``key.separator`` under ``parse.key``, or not stored because the disk is full) must reach
the writer as an error, and nothing of it may be stored. Two facts of the kernel shape
how:

* one ``write(2)`` of more than ``max_write`` bytes (128 KiB) arrives as several requests,
  and when one of them fails after others succeeded, ``write(2)`` returns the short count of
  those: the error itself is lost, and a writer that handles short writes sends the rest
  again — starting with the bytes of the request that failed;
* a request that fails as the first of its ``write(2)`` is seen by the writer as that
  call's error. A request is surely the first when the one before it on the descriptor
  failed, was cut short, or was smaller than a full request (``max_write``, less the part
  of a page a misaligned buffer loses): only the last request of a ``write(2)`` is.

So: the lines of a request before a refused one go in and the request returns the short
count covering exactly them (the writer's next ``write`` starts at the refused line and
fails); a line refused as too long is dropped up to its newline, and every request carrying
a part of it fails with ``EMSGSIZE`` too; a request that fails after the line was begun by
earlier requests remembers its bytes up to the newline, so that the writer sending them
again (after the short count) fails again instead of storing the line's tail as a record.
A refusal the writer may not have seen (a short count it may ignore, a failure that may
have been turned into one) is reported once more by ``fsync`` or ``close``.
"""

from __future__ import annotations

import errno
from functools import lru_cache

import pyfuse3

from ..log.errors import LogError, RecordTooLargeError
from ..log.log import Log, now_ms
from ..record import compression as codecs
from ..record import fast
from ..record.batch import (
    BATCH_OVERHEAD,
    finish_batch,
    max_single_value_size,
    single_record_batch_size,
)
from ..record.producer_batch import ESTIMATOR, batch_limits, effective_codec

RECORD_OVERHEAD_MAX = 80  # at most: batch header, record header and varints of one line
PAGE = 4096  # a write(2)'s first request may be short by a misaligned buffer: < a page


@lru_cache(maxsize=64)
def _max_value(limit: int) -> int:
    return max_single_value_size(limit)


def _uncompressed(lg: Log) -> bool:
    """Whether the batches written to ``lg`` from ``append`` are uncompressed (as
    ``Log._codec(None)``: compression.type producer or uncompressed)."""
    return lg.config.compression_type in ("producer", "none")


def _too_long(limit: int) -> RecordTooLargeError:
    return RecordTooLargeError(
        f"a line longer than one record batch of max.message.bytes ({limit}) can hold "
        "was refused")


def _no_separator() -> pyfuse3.FUSEError:
    return pyfuse3.FUSEError(errno.EINVAL)


def _append_text(lg: Log, text: memoryview, budget: int, head=b"") -> int:
    """Append the ``\\n``-terminated lines of ``head + text`` (``text`` ends with one) to
    the uncompressed ``lg`` as batches of records of at most ``budget`` bytes each (at
    least one line), null keys, timestamped now: all of them encoded in one native call
    (:func:`~kafkafs.record.fast.encode_text_batches`) and handed to
    :meth:`Log.append_encoded_run` as one buffer (one write, one index pass). Returns the
    bytes of ``text`` of the batches that went in; raises the log's errors
    (RecordTooLargeError, OSError, ...) when the first did not."""
    _codec, ts_type = lg.encoding()
    run, ends = fast.encode_text_batches(text, now_ms(), budget, ts_type, head)
    return ends[lg.append_encoded_run(run) - 1]


def encode_payload(lg: Log, payload, count: int, timestamp: int) -> bytearray:
    """One batch as :meth:`Log.encode` makes it (:meth:`Log.encoding`), of ``count``
    records already encoded as ``payload`` (bytes-like: their bodies, every timestamp
    delta 0, as :func:`~kafkafs.record.fast.encode_text` returns them), all timestamped
    ``timestamp`` (ms; under LogAppendTime the append time): compressed with
    ``compression.type`` here, not encoded again. ``max.message.bytes`` is the append's
    to check (Log.append_encoded: RecordTooLargeError)."""
    codec, ts_type = lg.encoding()
    return bytearray(finish_batch(payload, count, base_offset=0, compression=codec,
                                  timestamp_type=ts_type, last_offset_delta=count - 1,
                                  base_ts=timestamp, max_ts=timestamp))


class _Short(Exception):
    """Internal: the first ``count`` bytes of a request went in, then ``error``."""

    def __init__(self, count: int, error: BaseException):
        super().__init__(count)
        self.count = count
        self.error = error


class _LinesRefused(Exception):
    """Internal: lines ``0..index`` (``index`` > 0) went in, then line ``index`` got
    ``error``."""

    def __init__(self, index: int, error: BaseException):
        super().__init__(index)
        self.index = index
        self.error = error


class LineWriter:
    """The lines one descriptor writes to an ``append`` file (module docstring).

    ``parse_key``/``separator``: kafka-console-producer's ``parse.key``/``key.separator``
    (each line is ``KEY<separator>VALUE``; a line without it is refused with EINVAL).
    ``batch_size``: the producer's ``batch.size`` in bytes (the mount's ``-o batch.size``);
    None: the topic's ``kafkafs.batch.size``.
    """

    __slots__ = ("batch_size", "buf", "discarding", "ended", "last_size", "parse_key",
                 "pending", "repeat", "separator")

    max_request = 128 * 1024  # the largest write request seen (the kernel's max_write)

    def __init__(self, parse_key: bool = False, separator: bytes = b"\t",
                 batch_size: int | None = None):
        self.parse_key = parse_key
        self.separator = separator
        self.batch_size = batch_size
        self.buf = bytearray()      # the line begun by earlier requests, not yet a record
        self.discarding = False     # that line was refused: drop the rest up to its newline
        self.repeat: tuple[bytes, BaseException] | None = None  # a failed request's bytes
        self.pending: BaseException | None = None  # a refusal perhaps unseen: for close/fsync
        self.ended = True           # the last request ended its write(2) (failed or short)
        self.last_size = 0          # bytes of the last request

    # -- write ----------------------------------------------------------------------------
    def write(self, lg: Log, data: bytes) -> int:
        """Take the bytes of one ``write`` request. Returns the bytes consumed (a short
        count when a line after the first ones is refused). Raises RecordTooLargeError
        (EMSGSIZE), FUSEError(EINVAL) for a line without the key separator, OSError
        (ENOSPC, ...) and the log's errors, with nothing of the refused line stored."""
        # whether this request starts a write(2): then an error of it reaches the writer
        first = self.ended or self.last_size <= LineWriter.max_request - PAGE
        self.last_size = len(data)
        LineWriter.max_request = max(LineWriter.max_request, len(data))
        try:
            count = self._write(lg, data)
        except _Short as r:
            self.ended = True
            self.pending = r.error
            return r.count
        except BaseException as exc:
            self.ended = True
            self.pending = None if first else exc
            raise
        self.ended = False
        return count

    def _write(self, lg: Log, data: bytes) -> int:
        if self.repeat is not None:
            head, error = self.repeat
            if data[:len(head)] == head[:len(data)]:
                raise error  # the same bytes again: the refused request sent once more
            self.repeat = None
        if self.discarding:  # the rest of a refused line; the request with its newline too
            nl = data.find(b"\n")
            error = _too_long(lg.config.max_message_bytes)
            if nl >= 0:
                self.discarding = False
                self.repeat = (bytes(data[:nl + 1]), error)
            raise error
        mv = memoryview(data)
        last_nl = data.rfind(b"\n")
        if last_nl < 0:
            self._keep_partial(lg, mv)
            return len(data)
        pos = 0
        if self.buf:  # the line begun by earlier requests ends here
            nl = data.find(b"\n")
            try:
                if self._heads_run(lg, nl):  # it heads the first batch of the request's run
                    self._write_plain(lg, mv, 0, last_nl, self.buf)
                    pos = last_nl + 1
                else:
                    pos = self._end_line(lg, data, nl)
            except _Short:  # the line went in, then a later one failed
                self.buf.clear()
                raise
            except (LogError, pyfuse3.FUSEError) as exc:  # the line is refused for good
                self.buf.clear()
                self.repeat = (bytes(mv[:nl + 1]), exc)
                raise
            # OSError (a full disk) keeps the line's head for the writer's retry
            self.buf.clear()
        if pos <= last_nl:
            if self.parse_key:
                self._write_keyed(lg, mv, pos, last_nl)
            else:
                self._write_plain(lg, mv, pos, last_nl)
        try:
            self._keep_partial(lg, mv[last_nl + 1:])
        except RecordTooLargeError as exc:  # the lines before it went in
            raise _Short(last_nl + 1, exc) from None
        return len(data)

    def _heads_run(self, lg: Log, nl: int) -> bool:
        """Whether the line begun by earlier requests, which the request's byte ``nl``
        ends, heads the request's run of batches (:meth:`_write_plain`), as a producer
        would batch it with the lines after it: plain lines of an uncompressed topic, the
        line within ``max.message.bytes`` alone (known before)."""
        return not self.parse_key and _uncompressed(lg) and \
            single_record_batch_size(-1, len(self.buf) + nl) <= lg.config.max_message_bytes

    def _end_line(self, lg: Log, data: bytes, nl: int) -> int:
        """Append alone the line begun by earlier requests, which ``data[:nl + 1]`` ends
        (keyed, compressed, or too large: :meth:`_heads_run` is false); returns the bytes
        of ``data`` that went in. Raises like :meth:`_append_lines`."""
        self._append_lines(lg, [bytes(self.buf) + bytes(data[:nl])])
        return nl + 1

    def _limits(self, lg: Log) -> tuple[int, float, int]:
        """``(budget, ratio, codec)`` of the next batch written to ``lg``
        (:func:`~kafkafs.record.producer_batch.batch_limits`); an uncompressed batch's
        budget also keeps it within ``max.message.bytes``."""
        size = self.batch_size if self.batch_size is not None else lg.config.kafkafs_batch_size
        codec = effective_codec(lg.config.compression_type)
        budget, ratio = batch_limits(size, lg.topic, codec)
        if codec == codecs.NONE:
            budget = min(budget, lg.config.max_message_bytes - BATCH_OVERHEAD)
        return budget, ratio, codec

    def _write_plain(self, lg: Log, mv: memoryview, pos: int, last_nl: int,
                     head=b"") -> None:
        """Append the lines of ``mv[pos:last_nl + 1]`` in batches of ``batch.size``,
        straight from the buffer (C encoder); ``head``: the start of the first line, begun
        by earlier requests (uncompressed topics). Raises _Short when lines of this request
        went in before one failed, else the error."""
        budget, ratio, codec = self._limits(lg)
        while pos <= last_nl:
            if codec != codecs.NONE:  # the ratio follows the batches written
                budget, ratio, codec = self._limits(lg)
            try:
                if codec == codecs.NONE:
                    pos += _append_text(lg, mv[pos:last_nl + 1], budget, head)
                    head = b""
                else:
                    pos += self._append_compressed(lg, mv[pos:last_nl + 1], budget, ratio)
            except _Short as r:
                raise _Short(pos + r.count, r.error) from None
            except (LogError, OSError) as exc:
                if pos > 0:
                    raise _Short(pos, exc) from None
                raise

    def _append_compressed(self, lg: Log, text: memoryview, budget: int, ratio: float) -> int:
        """Append the first lines of ``text`` that a compressed batch of ``budget`` and
        ``ratio`` takes (the cut found by the C encoder); returns the bytes consumed.
        Raises _Short when a first part went in (a batch over ``max.message.bytes`` is
        split), else the error."""
        payload, n, consumed = fast.encode_text(text, 0, budget, ratio)
        try:
            self._append_payload(lg, payload, n)
        except RecordTooLargeError:
            if n == 1:
                raise
            lines = bytes(text[:consumed - 1]).split(b"\n")
            try:
                self._append_halves(lg, lines)
            except _LinesRefused as r:
                raise _Short(sum(len(line) + 1 for line in lines[:r.index]), r.error) from None
        return consumed

    def _write_keyed(self, lg: Log, mv: memoryview, pos: int, last_nl: int) -> None:
        """``parse.key``: the lines of ``mv[pos:last_nl + 1]`` as keyed records. Raises
        like :meth:`_write_plain`."""
        lines = bytes(mv[pos:last_nl]).split(b"\n")
        try:
            self._append_lines(lg, lines)
        except _LinesRefused as r:
            raise _Short(pos + sum(len(line) + 1 for line in lines[:r.index]), r.error) from None
        except (LogError, OSError, pyfuse3.FUSEError) as exc:
            if pos > 0:
                raise _Short(pos, exc) from None
            raise

    def _keep_partial(self, lg: Log, part: memoryview) -> None:
        """Keep ``part``, the start of a line, unless the line can no longer fit in a batch
        of ``max.message.bytes``: then RecordTooLargeError, and the rest of the line is
        dropped up to its newline."""
        if not part:
            return
        limit = lg.config.max_message_bytes
        longest = limit
        if _uncompressed(lg):  # exact: the line alone in a batch, and its key if any
            longest = _max_value(limit) + (len(self.separator) if self.parse_key else 0)
        if len(self.buf) + len(part) > longest:
            self.buf.clear()
            self.discarding = True
            raise _too_long(limit)
        self.buf += part

    def _append_lines(self, lg: Log, lines: list[bytes]) -> None:
        """Append ``lines`` in batches that fit ``max.message.bytes``, up to the first one
        refused (no key separator under ``parse.key``; too large). Raises _LinesRefused
        when lines before the refused one went in, else its error (RecordTooLargeError,
        FUSEError(EINVAL), OSError, ...)."""
        limit = lg.config.max_message_bytes
        bad, error = len(lines), None
        if self.parse_key:
            sep = self.separator
            for i, line in enumerate(lines):
                if sep not in line:
                    bad, error = i, _no_separator()
                    break
        if bad and _uncompressed(lg) and max(map(len, lines[:bad])) + RECORD_OVERHEAD_MAX > limit:
            for i in range(bad):
                if self._batch_size(lines[i]) > limit:
                    bad, error = i, _too_long(limit)
                    break
        ok = lines[:bad]
        for i, j, payload in self._cuts(lg, ok):
            try:
                self._append_group(lg, ok[i:j], payload)
            except _LinesRefused as r:
                raise _LinesRefused(i + r.index, r.error) from None
            except (LogError, OSError) as exc:
                if i == 0:
                    raise
                raise _LinesRefused(i, exc) from None
        if error is not None:
            if bad == 0:
                raise error
            raise _LinesRefused(bad, error)

    def _cuts(self, lg: Log, lines: list[bytes]):
        """Yield ``(i, j, payload)``: ``lines[i:j]`` make the next batch (at least one
        line), ``payload`` their records encoded (uncompressed); the cut is the C encoder's
        (``encode_text``, keyed under ``parse.key``). Each batch's limits are read when it
        starts (a compressed batch's ratio follows the ones written)."""
        text = memoryview(b"\n".join(lines) + b"\n")
        sep = self.separator if self.parse_key else None
        i = pos = 0
        while i < len(lines):
            budget, ratio, _codec = self._limits(lg)
            payload, n, consumed = fast.encode_text(text[pos:], 0, budget, ratio, sep)
            yield i, i + n, payload
            i += n
            pos += consumed

    def _append_group(self, lg: Log, group: list[bytes], payload=None) -> None:
        """Append ``group`` as one batch; a batch found too large (a compressed topic,
        where sizes are not known before) is split in halves. ``payload``: the group's
        records as ``encode_text`` encoded them (:meth:`_append_payload`); None: encode
        them here. Raises like :meth:`_append_lines`."""
        try:
            if payload is not None:
                self._append_payload(lg, payload, len(group))
                return
            ts = now_ms()
            if self.parse_key:
                sep = self.separator
                data = lg.encode([(ts, *line.partition(sep)[::2], ()) for line in group])
            else:
                data = lg.encode([(ts, None, line, ()) for line in group])
            lg.append_encoded(bytearray(data))
        except RecordTooLargeError:
            if len(group) == 1:
                raise
            self._append_halves(lg, group)

    def _append_halves(self, lg: Log, group: list[bytes]) -> None:
        """Append ``group`` (two lines or more) as two batches or more: its halves, each
        split again while too large. Raises like :meth:`_append_lines`."""
        mid = len(group) // 2
        self._append_group(lg, group[:mid])
        try:
            self._append_group(lg, group[mid:])
        except _LinesRefused as r:
            raise _LinesRefused(mid + r.index, r.error) from None
        except (LogError, OSError) as exc:
            raise _LinesRefused(mid, exc) from None

    @staticmethod
    def _append_payload(lg: Log, payload, count: int) -> None:
        """Append ``count`` records already encoded as ``payload`` (``encode_text``) as one
        batch, compressed as they are rather than encoded again (:func:`encode_payload`); the
        batch's size then feeds the topic's compression ratio estimate. Raises
        RecordTooLargeError (nothing appended) and the log's errors."""
        data = encode_payload(lg, payload, count, now_ms())
        lg.append_encoded(data)
        ESTIMATOR.observe(lg.topic, effective_codec(lg.config.compression_type), len(data),
                          len(payload))

    def _batch_size(self, line: bytes) -> int:
        if self.parse_key:
            k, _sep, v = line.partition(self.separator)
            return single_record_batch_size(len(k), len(v))
        return single_record_batch_size(-1, len(line))

    # -- close / fsync ----------------------------------------------------------------------
    def close(self, lg: Log) -> None:
        """The descriptor is closed (``flush``): produce the last line if it has no newline,
        then report a refusal the writer may not have seen. Raises like :meth:`write`."""
        try:
            self.finish_line(lg)
        except BaseException:
            self.pending = None  # this error is the one close reports
            raise
        self.raise_pending()

    def finish_line(self, lg: Log) -> None:
        """Produce the last line if it has no newline (nothing to do when there is none).
        Raises like :meth:`write`."""
        if self.buf:
            line = bytes(self.buf)
            self.buf.clear()
            self._append_lines(lg, [line])

    def raise_pending(self) -> None:
        """Raise, once, a refusal the writer may not have seen (``fsync``, ``close``)."""
        error, self.pending = self.pending, None
        if error is not None:
            raise error
