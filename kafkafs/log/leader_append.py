"""A producer's batch appended as a partition leader appends it (docs/design.md §9.4).

Kafka's ``UnifiedLog.appendAsLeader`` (origin CLIENT) validates what a producer sent before
anything is written, then assigns offsets: ``analyzeAndValidateRecords`` and
``LogValidator.validateMessagesAndAssignOffsets``, then ``analyzeAndValidateProducerState``.
:func:`append_as_leader` does the same for one v2 batch, in Kafka's order:

1. the batch: base offset 0 (INVALID_RECORD otherwise), at most ``max.message.bytes``
   (RecordTooLargeError), its CRC (CorruptRecordError), a codec kafkafs knows, a consistent
   offset range and record count, no control batch, a sequence when it has a producer id
   (InvalidRecordError);
2. the records (all of them, every error listed as Kafka's ``RecordErrors``): a key on a
   compacted topic (InvalidRecordError), a timestamp inside
   ``[now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms]`` on a
   CreateTime topic, no LogAppendTime claimed by the producer (InvalidTimestampError);
3. offsets: the batch keeps its bytes when its codec is the topic's (``compression.type``
   ``producer`` or the same codec) and its records carry the offset deltas 0, 1, 2, ...: only
   the header changes (base offset, partition leader epoch, on a LogAppendTime topic the
   timestamp type and max timestamp, on a CreateTime one the max timestamp the records hold,
   the CRC when either changed); otherwise it is rebuilt in the topic's codec with the same
   producer fields (``buildRecordsAndAssignOffsets``);
4. the producer (a batch with a producer id), under the log's lock with the append: a batch
   equal to one of the producer's last five (same epoch, first and last sequence) is a
   duplicate: nothing is written and the original offsets are answered
   (``ProducerStateEntry.findDuplicateBatch``); an epoch below the last one seen raises
   InvalidProducerEpochError; a first sequence that does not follow the last one
   (``ProducerAppendInfo.checkSequence``: the next one, 0 after Integer.MAX_VALUE, 0 for a
   new epoch; anything when the partition knows no epoch of the producer) raises
   OutOfOrderSequenceError.

The five batches a producer sent last are kept per log here (Kafka keeps them in its
``ProducerStateEntry``; kafkafs's entry and snapshot keep the last one, which seeds them).
Times are ms, sizes bytes.
"""

from __future__ import annotations

import collections
import struct
import weakref
from typing import NamedTuple

import numpy as np
from crc32c import crc32c

from ..record import columnar
from ..record import compression as codecs
from ..record.batch import (ATTRIBUTES_OFFSET, CRC_OFFSET, LOG_APPEND_TIME, TIMESTAMP_TYPE_MASK,
                            RecordBatch, encode_batch)
from ..record.errors import CorruptRecordError, UnsupportedCodecError
from .errors import (InvalidProducerEpochError, InvalidRecordError, InvalidTimestampError,
                     OutOfOrderSequenceError, RecordTooLargeError)

__all__ = ["AppendResult", "append_as_leader"]

_INT_MAX = 2**31 - 1
_I32, _I64, _U32, _I16 = struct.Struct(">i"), struct.Struct(">q"), struct.Struct(">I"), \
    struct.Struct(">h")
_PLE_OFFSET, _MAX_TS_OFFSET = 12, 35
_RETAINED = 5  # ProducerStateEntry.NUM_BATCHES_TO_RETAIN

# Log -> {producer id: deque of (epoch, first seq, last seq, first offset, last offset)}
_recent: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class AppendResult(NamedTuple):
    """What an append answered: ``base_offset`` and ``last_offset`` of the batch (the
    original ones for a duplicate), ``log_append_time`` (ms; -1 on a CreateTime topic),
    ``log_start_offset``, ``duplicate``."""

    base_offset: int
    last_offset: int
    log_append_time: int
    log_start_offset: int
    duplicate: bool = False


def _check_batch(b: RecordBatch, config, name: str) -> None:
    if b.base_offset != 0:
        raise InvalidRecordError(f"The baseOffset of the record batch in the append to {name} "
                                 f"should be 0, but it is {b.base_offset}")
    if b.size > config.max_message_bytes:
        raise RecordTooLargeError(
            f"The record batch size in the append to {name} is {b.size} bytes which exceeds "
            f"the maximum configured value of {config.max_message_bytes}.")
    computed = b.compute_crc()
    if computed != b.crc:
        raise CorruptRecordError(f"Record is corrupt (stored crc = {b.crc}, computed crc = "
                                 f"{computed}) in topic partition {name}.")
    if b.compression not in codecs.CODEC_NAMES:
        raise UnsupportedCodecError(f"Unknown compression type id: {b.compression}")
    if b.last_offset_delta < 0:
        raise InvalidRecordError(f"Last offset delta {b.last_offset_delta} is negative in "
                                 f"topic partition {name}: invalid offset range")
    if b.records_count <= 0:
        raise InvalidRecordError(f"Invalid reported count for record batch: "
                                 f"{b.records_count} in topic partition {name}.")
    if b.last_offset_delta + 1 != b.records_count:
        raise InvalidRecordError(
            f"Inconsistent batch offset range [0, {b.last_offset_delta}] and count of "
            f"records {b.records_count} in topic partition {name}.")
    if b.is_control:
        raise InvalidRecordError("Clients are not allowed to write control records in topic "
                                 f"partition {name}.")
    if b.producer_id >= 0 and b.base_sequence < 0:
        raise InvalidRecordError(f"Invalid sequence number {b.base_sequence} in record batch "
                                 f"with producerId {b.producer_id} in topic partition {name}.")


def _check_records(b: RecordBatch, records: list, config, name: str, now: int,
                   stamps: list[int]) -> None:
    """LogValidator's per-record checks; ``stamps``: the records' timestamps. The records
    are walked one by one (to name each refused one) only when the batch-wide test (keys
    present, every timestamp inside the bounds: C-level ``min``/``max``) fails."""
    create_time = config.message_timestamp_type == "CreateTime"
    lo = now - config.message_timestamp_before_max_ms
    hi = now + config.message_timestamp_after_max_ms
    log_append_claimed = bool(b.attributes & TIMESTAMP_TYPE_MASK)
    compact = config.compact
    if not compact or None not in [r[2] for r in records]:
        compact = False  # (no key missing: nothing to refuse for it)
        if not log_append_claimed and (not create_time or not stamps or (
                lo <= max(stamps) <= hi and lo <= min(
                    (t for t in stamps if t != -1), default=lo) <= hi)):
            return
    errors: list[tuple[int, str]] = []
    timestamps = False
    for i, (offset, ts, key, _value, _headers) in enumerate(records):
        # LogValidator.validateRecord: the key first, then the timestamp
        if compact and key is None:
            errors.append((i, "Compacted topic cannot accept message without key in topic "
                              f"partition {name}."))
        elif create_time and ts != -1:
            if not lo <= ts <= hi:
                timestamps = True
                errors.append((i, f"Timestamp {ts} of message with offset {offset} is out of "
                                  f"range. The timestamp should be within [{lo}, {hi}]"))
        elif log_append_claimed:
            timestamps = True
            errors.append((i, f"Invalid timestamp type in message at offset {offset}. "
                              "Producer should not set timestamp type to LogAppendTime."))
    if not errors:
        return
    if timestamps:
        raise InvalidTimestampError("One or more records have been rejected due to invalid "
                                    "timestamp", errors)
    shown = ", ".join(f"{{{i}: {m}}}" for i, m in errors[:3])
    raise InvalidRecordError(f"One or more records have been rejected due to {len(errors)} "
                             "record errors in total, and only showing the first three errors "
                             f"at most: [{shown}]", errors)


def _target_codec(compression_type: str, batch_codec: int) -> int:
    """Kafka's ``BrokerCompressionType.targetCompression``: the batch's own codec under
    ``producer``, none under ``uncompressed``, else the topic's."""
    if compression_type == "producer":
        return batch_codec
    if compression_type in ("uncompressed", "none"):
        return codecs.NONE
    return codecs.codec_id(compression_type)


def _prepare(buf: bytearray, b: RecordBatch, records: list, config, now: int,
             leader_epoch: int, stamps: list[int]) -> tuple[bytearray, int]:
    """The batch to append (``buf`` changed in place, or a rebuilt one) and its log append
    time (-1 on a CreateTime topic)."""
    target = _target_codec(config.compression_type, b.compression)
    log_append = config.message_timestamp_type == "LogAppendTime"
    in_order = [r[0] for r in records] == list(range(len(records)))
    if target != b.compression or not in_order:
        out = bytearray(encode_batch(
            [(ts, key, value, headers) for _o, ts, key, value, headers in records],
            compression=target, timestamp_type=LOG_APPEND_TIME if log_append else 0,
            log_append_time=now if log_append else None, producer_id=b.producer_id,
            producer_epoch=b.producer_epoch, base_sequence=b.base_sequence,
            partition_leader_epoch=leader_epoch, is_transactional=b.is_transactional))
        return out, now if log_append else -1
    return _stamp(buf, b, config, now, leader_epoch, max(stamps, default=-1))


def _stamp(buf: bytearray, b: RecordBatch, config, now: int, leader_epoch: int,
           max_ts: int) -> tuple[bytearray, int]:
    """The in-place path: the header's partition leader epoch, timestamp type and max
    timestamp (``max_ts``: the records' largest, on a CreateTime topic), and the CRC when
    they changed. Returns ``(buf, log append time or -1)``."""
    log_append = config.message_timestamp_type == "LogAppendTime"
    _I32.pack_into(buf, _PLE_OFFSET, leader_epoch)
    if log_append:
        attrs, max_ts = b.attributes | TIMESTAMP_TYPE_MASK, now
    else:
        attrs = b.attributes & ~TIMESTAMP_TYPE_MASK
    if attrs != b.attributes or max_ts != b.max_timestamp:
        _I16.pack_into(buf, ATTRIBUTES_OFFSET, attrs)
        _I64.pack_into(buf, _MAX_TS_OFFSET, max_ts)
        _U32.pack_into(buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
    return buf, now if log_append else -1


#: batches of at most this many records are summed up from their decoded tuples: the
#: column builder's and numpy's fixed cost (~30 us) is ten times a small batch's decoding
SMALL_BATCH = 16


def _small_summary(b: RecordBatch) -> tuple | None:
    """:func:`_summary` of a small batch from :meth:`RecordBatch.record_tuples` (the C
    decoder, with Kafka's ``DefaultRecord.readFrom`` checks); None when it does not decode
    or holds no record."""
    try:
        recs = b.record_tuples()
    except CorruptRecordError:
        return None
    if not recs or len(recs) != b.records_count:
        return None
    base = b.base_offset
    stamps = [r[1] for r in recs]
    real = [t for t in stamps if t != -1]
    return (min(real) if real else None, max(stamps),
            all(r[0] == base + i for i, r in enumerate(recs)),
            any(r[2] is None for r in recs))


def _summary(b: RecordBatch) -> tuple | None:
    """``(smallest timestamp other than -1 or None, largest timestamp, offset deltas are
    0..n-1, a key is null)`` of the batch's records, from the C column builder and numpy
    without a Python object per record; None when the extension is not built or the records
    do not decode there (the record-by-record path then decides, and names the damage)."""
    if b.records_count <= SMALL_BATCH:
        return _small_summary(b)
    if not columnar.HAVE_C:
        return None
    try:
        payload, _exact = b.payload()
        fixed = b.max_timestamp if b.attributes & TIMESTAMP_TYPE_MASK else None
        cb = columnar.ColumnBuilder()
        n = cb.add_section(payload, b.records_count, 0, b.base_timestamp, fixed,
                           0 if fixed is None else 1, 0, 2**63 - 1)
        cols = cb.finish()
    except (CorruptRecordError, ValueError, OverflowError):
        return None
    if n != b.records_count or n == 0:
        return None
    offsets = np.frombuffer(cols["offset"], dtype=np.int64)
    stamps = np.frombuffer(cols["timestamp"], dtype=np.int64) // 1000  # (microseconds)
    real = stamps[stamps != -1]
    return (int(real.min()) if real.size else None, int(stamps.max()),
            bool((offsets == np.arange(n, dtype=np.int64)).all()), cols["key_nulls"] > 0)


def _fast_path(b: RecordBatch, config, now: int) -> int | None:
    """The largest timestamp of a batch that passes every per-record check and keeps its
    bytes (the topic's codec, offset deltas 0..n-1), else None (walk it record by
    record)."""
    if _target_codec(config.compression_type, b.compression) != b.compression:
        return None
    summary = _summary(b)
    if summary is None:
        return None
    low, high, in_order, null_key = summary
    if not in_order or (null_key and config.compact) or b.attributes & TIMESTAMP_TYPE_MASK:
        return None
    if config.message_timestamp_type == "CreateTime" and low is not None and not (
            now - config.message_timestamp_before_max_ms <= low and
            high <= now + config.message_timestamp_after_max_ms):
        return None
    return high


def _in_sequence(last: int, first: int) -> bool:
    return first == last + 1 or (first == 0 and last == _INT_MAX)


def _producer_check(lg, b: RecordBatch, recent) -> tuple[int, int] | None:
    """(under the log's lock) The original offsets of a duplicate, None for a batch to
    append; raises InvalidProducerEpochError, OutOfOrderSequenceError."""
    pid, epoch, first = b.producer_id, b.producer_epoch, b.base_sequence
    last = first + b.last_offset_delta
    if last > _INT_MAX:
        last -= _INT_MAX + 1
    entry = lg.producer_state.last_entry(pid)
    if entry is None:
        return None  # a producer this partition does not know: any sequence
    if entry.producer_epoch == epoch:
        seen = list(recent) if recent and recent[0][0] == epoch else []
        if entry.has_batch_metadata:
            seen.append((epoch, entry.first_sequence, entry.last_sequence,
                         entry.first_data_offset, entry.last_offset))
        for _e, f, lst, fo, lo in seen:
            if f == first and lst == last:
                return fo, lo
    current = entry.producer_epoch
    if current >= 0 and epoch < current:
        raise InvalidProducerEpochError(
            f"Epoch of producer {pid} in {lg.name} is {epoch}, which is smaller than the last "
            f"seen epoch {current}")
    if epoch != current:
        if first != 0 and current >= 0:
            raise OutOfOrderSequenceError(
                f"Invalid sequence number for new epoch of producer {pid} in partition "
                f"{lg.name}: {epoch} (request epoch), {first} (seq. number), {current} "
                "(current producer epoch)")
    elif current >= 0 and not _in_sequence(entry.last_sequence, first):
        raise OutOfOrderSequenceError(
            f"Out of order sequence number for producer {pid} in partition {lg.name}: "
            f"{first} (incoming seq. number), {entry.last_sequence} (current end sequence "
            "number)")
    return None


def append_as_leader(lg, data, *, now: int, leader_epoch: int = 0) -> AppendResult:
    """Append the one v2 batch ``data`` (bytes-like, base offset 0, as a producer sends it)
    to ``lg`` (a :class:`~kafkafs.log.log.Log`) after validating it as Kafka's leader does
    (see the module); ``now``: the broker's clock (ms); ``leader_epoch``: stamped in the
    batch header. Returns an :class:`AppendResult`. Raises CorruptRecordError (a batch that
    does not frame or fails its CRC or its records do not decode), UnsupportedCodecError,
    RecordTooLargeError, InvalidRecordError (``record_errors`` listing records),
    InvalidTimestampError, InvalidProducerEpochError, OutOfOrderSequenceError,
    InvalidTxnStateError, ReadOnlyLogError, OSError: nothing appended in every case."""
    buf = bytearray(data)
    b = RecordBatch.from_buffer(buf)
    if b.size != len(buf):
        raise CorruptRecordError(f"{len(buf) - b.size} bytes after the record batch")
    config = lg.config
    _check_batch(b, config, lg.name)
    high = _fast_path(b, config, now)
    if high is not None:  # (the common case: no Python object per record)
        out, append_time = _stamp(buf, b, config, now, leader_epoch, high)
    else:
        records = b.record_tuples()
        if len(records) != b.records_count:
            raise InvalidRecordError(f"Incorrect declared batch size, {b.records_count} "
                                     f"records declared, {len(records)} found in {lg.name}")
        stamps = [r[1] for r in records]
        _check_records(b, records, config, lg.name, now, stamps)
        out, append_time = _prepare(buf, b, records, config, now, leader_epoch, stamps)
    if out is not buf and len(out) > config.max_message_bytes:
        raise RecordTooLargeError(
            f"The record batch size in the append to {lg.name} is {len(out)} bytes which "
            f"exceeds the maximum configured value of {config.max_message_bytes}.")
    pid = b.producer_id
    with lg.lock:
        recent = None
        if pid >= 0:
            per_log = _recent.setdefault(lg, {})
            recent = per_log.get(pid)
            dup = _producer_check(lg, b, recent)
            if dup is not None:
                return AppendResult(dup[0], dup[1], -1, lg.log_start_offset, True)
        base, last = lg.append_encoded(out)
        if pid >= 0:
            if recent is None or (recent and recent[0][0] != b.producer_epoch):
                recent = per_log[pid] = collections.deque(maxlen=_RETAINED)
            last_seq = b.base_sequence + b.last_offset_delta
            if last_seq > _INT_MAX:
                last_seq -= _INT_MAX + 1
            recent.append((b.producer_epoch, b.base_sequence, last_seq, base, last))
        return AppendResult(base, last, append_time, lg.log_start_offset)
