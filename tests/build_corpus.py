#!/usr/bin/env python3
"""Regenerate ``tests/corpus/``: small Kafka segment files in every record format.

    .venv/bin/python tests/build_corpus.py [--check]

Every file is written by an implementation that is NOT kafkafs's encoder:

* kafka-python's ``kafka.record`` builders (``LegacyRecordBatchBuilder`` for magic 0/1,
  ``DefaultRecordBatchBuilder`` for magic 2), pure Python;
* aiokafka's builders from its C extension (``aiokafka.record._crecords``);
* byte vectors copied from other projects' test suites (real broker bytes where the
  source says so), listed in :data:`VECTORS` with the repository and path they come from.

What a producer library cannot write, because only a broker writes it, is done here the way
a broker does it, on the library's bytes, and named in the segment's description: stamping
base offsets (bytes 0-7, outside every CRC), the wrapper offset of a legacy compressed
message (the offset of its last inner message), the LogAppendTime attribute and timestamp
(with the CRC recomputed by the library's own CRC function), and the control bit of a
COMMIT/ABORT marker batch (same). Nothing else is changed.

Determinism: every timestamp is fixed, and gzip's header mtime (which kafka-python and
aiokafka leave to ``time.time()``) is pinned to 0 while building. Running the script twice
gives identical files; ``--check`` rebuilds in memory and exits 1 if a file in the corpus
differs (the test suite runs that too).

Layout: ``tests/corpus/<topic>-<partition>/<20-digit base offset>.log``, one segment per
partition directory, so each directory loads as a log. ``tests/corpus/README.md`` lists
every file; keep it in step with :data:`SEGMENTS`.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gzip
import os
import struct
import sys
import types

import kafka.record.default_records as kp_default
import kafka.record.legacy_records as kp_legacy
from aiokafka.record._crecords import DefaultRecordBatchBuilder as AioDefaultBuilder
from aiokafka.record._crecords import LegacyRecordBatchBuilder as AioLegacyBuilder
from kafka.codec import snappy_encode as kp_snappy_encode
from kafka.record.util import calc_crc32, calc_crc32c

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

TS = 1_600_000_000_000  # 2020-09-13T12:26:40Z: every CreateTime is TS + something
LOG_APPEND_TS = 1_600_000_999_000  # the "broker clock" for LogAppendTime entries
BATCH_SIZE = 1 << 20

# v2 header offsets (DefaultRecordBatch)
V2_CRC, V2_ATTRIBUTES, V2_MAX_TS = 17, 21, 35
V2_LOG_APPEND_TIME, V2_TRANSACTIONAL, V2_CONTROL = 0x08, 0x10, 0x20
# legacy entry offsets (LegacyRecord): offset i64, size i32, crc u32, magic, attributes, ts
L_CRC, L_MAGIC, L_ATTRIBUTES, L_TIMESTAMP = 12, 16, 17, 18
L_LOG_APPEND_TIME = 0x08


# -- deterministic compression ------------------------------------------------------------

@contextlib.contextmanager
def fixed_gzip_mtime(mtime: int = 0):
    """gzip.GzipFile writes ``time.time()`` into the header when no mtime is given (both
    libraries' ``gzip_encode`` do that): make it ``mtime`` while building."""
    saved = gzip.time
    gzip.time = types.SimpleNamespace(time=lambda: mtime)
    try:
        yield
    finally:
        gzip.time = saved


@contextlib.contextmanager
def kafka_python_raw_snappy():
    """Make kafka-python's builders write one raw snappy block (``xerial_compatible=False``,
    what librdkafka and sarama write) instead of the xerial framing they write by default."""
    raw = functools.partial(kp_snappy_encode, xerial_compatible=False)
    saved = kp_default.snappy_encode, kp_legacy.snappy_encode
    kp_default.snappy_encode = kp_legacy.snappy_encode = raw
    try:
        yield
    finally:
        kp_default.snappy_encode, kp_legacy.snappy_encode = saved


# -- record content -----------------------------------------------------------------------

def text_value(i: int, size: int = 120) -> bytes:
    """A compressible JSON-ish value of ``size`` bytes (so every codec actually compresses:
    kafka-python sends a batch uncompressed when the codec does not shrink it)."""
    base = b'{"n":%d,"msg":"the quick brown fox jumps over the lazy dog %d"}' % (i, i % 7)
    return (base * (size // len(base) + 1))[:size]


def legacy_records(n: int, start: int = 0) -> list[tuple]:
    """``n`` (key, value) pairs with a null key, a null value, empty and binary ones."""
    out = []
    for i in range(start, start + n):
        key = None if i % 5 == 1 else b"key-%d" % i
        value = None if i % 5 == 3 else text_value(i)
        if i % 5 == 4:
            key, value = b"", b"\x00\xff\xfe binary \x80"
        out.append((key, value))
    return out


def v2_records(n: int, start: int = 0, headers: bool = False) -> list[tuple]:
    """``n`` (key, value, headers) triples; with ``headers`` a mix of none, one, several,
    a null header value, an empty header key and non-ASCII keys."""
    out = []
    for i, (key, value) in enumerate(legacy_records(n, start)):
        hdrs = []
        if headers:
            shape = (start + i) % 4
            if shape == 1:
                hdrs = [("trace-id", b"%08x" % (start + i))]
            elif shape == 2:
                hdrs = [("a", b"1"), ("a", b"2"), ("null-value", None), ("", b"empty key")]
            elif shape == 3:
                hdrs = [("clé-ünïcode", "välue ✓".encode()), ("bin", b"\x00\x01\xff")]
        out.append((key, value, hdrs))
    return out


# -- builders (the independent writers) ---------------------------------------------------

def kp_legacy_set(magic: int, codec: int, items) -> bytearray:
    """kafka-python ``LegacyRecordBatchBuilder``: ``items`` = (offset, timestamp, key, value).
    Uncompressed: one entry per item. Compressed: one wrapper at offset 0 holding the items."""
    b = kp_legacy.LegacyRecordBatchBuilder(magic, codec, BATCH_SIZE)
    for offset, ts, key, value in items:
        assert b.append(offset, ts, key, value) is not None
    return bytearray(b.build())


def aio_legacy_set(magic: int, codec: int, items) -> bytearray:
    """The same with aiokafka's C ``LegacyRecordBatchBuilder``."""
    b = AioLegacyBuilder(magic, codec, BATCH_SIZE)
    for offset, ts, key, value in items:
        assert b.append(offset, ts, key, value) is not None
    return bytearray(b.build())


def kp_v2_batch(codec: int, records, *, ts: int = TS, transactional: bool = False,
                producer_id: int = -1, producer_epoch: int = -1,
                base_sequence: int = -1) -> bytearray:
    """kafka-python ``DefaultRecordBatchBuilder``: ``records`` = (key, value, headers), one
    millisecond apart from ``ts``, offset deltas 0..n-1, base offset 0."""
    b = kp_default.DefaultRecordBatchBuilder(2, codec, transactional, producer_id,
                                             producer_epoch, base_sequence, BATCH_SIZE)
    for i, (key, value, headers) in enumerate(records):
        assert b.append(i, ts + i, key, value, list(headers)) is not None
    out = bytearray(b.build())
    assert out[V2_ATTRIBUTES + 1] & 0x07 == codec, "kafka-python did not compress"
    return out


def aio_v2_batch(codec: int, records, *, ts: int = TS, transactional: bool = False,
                 producer_id: int = -1, producer_epoch: int = -1,
                 base_sequence: int = -1) -> bytearray:
    """The same with aiokafka's C ``DefaultRecordBatchBuilder``."""
    b = AioDefaultBuilder(2, codec, int(transactional), producer_id, producer_epoch,
                          base_sequence, BATCH_SIZE)
    for i, (key, value, headers) in enumerate(records):
        assert b.append(i, ts + i, key, value, list(headers)) is not None
    out = bytearray(b.build())
    assert out[V2_ATTRIBUTES + 1] & 0x07 == codec, "aiokafka did not compress"
    return out


# -- what a broker does to a producer's bytes ----------------------------------------------

def stamp_offset(entry: bytearray, offset: int) -> bytearray:
    """Bytes 0-7 (base offset of a v2 batch, offset of a legacy entry): not under any CRC;
    the broker assigns them on append."""
    struct.pack_into(">q", entry, 0, offset)
    return entry


def v2_set_attributes(batch: bytearray, bits: int, max_timestamp: int | None = None
                      ) -> bytearray:
    """OR ``bits`` into a v2 batch's attributes (and set its max timestamp), then recompute
    its CRC-32C over bytes [21, end) with kafka-python's ``calc_crc32c``."""
    batch[V2_ATTRIBUTES + 1] |= bits
    if max_timestamp is not None:
        struct.pack_into(">q", batch, V2_MAX_TS, max_timestamp)
    struct.pack_into(">I", batch, V2_CRC, calc_crc32c(memoryview(batch)[V2_ATTRIBUTES:]))
    return batch


def legacy_log_append_time(entry: bytearray, timestamp: int) -> bytearray:
    """What a broker with message.timestamp.type=LogAppendTime does to a v1 entry: set
    attribute bit 3 and the timestamp, recompute the CRC-32 over magic..end with
    kafka-python's ``calc_crc32``."""
    assert entry[L_MAGIC] == 1
    entry[L_ATTRIBUTES] |= L_LOG_APPEND_TIME
    struct.pack_into(">q", entry, L_TIMESTAMP, timestamp)
    struct.pack_into(">I", entry, L_CRC, calc_crc32(memoryview(entry)[L_MAGIC:]))
    return entry


def marker_batch(builder, control_type: int, *, offset: int, ts: int, producer_id: int,
                 producer_epoch: int, coordinator_epoch: int) -> bytearray:
    """A COMMIT (1) / ABORT (0) marker as a broker writes it: one record, key = version 0 +
    type, value = version 0 + coordinator epoch, transactional, base sequence -1. Producer
    libraries cannot set the control bit: the record is built with ``builder``
    (kp_v2_batch / aio_v2_batch) and the bit set afterwards, CRC recomputed."""
    key = struct.pack(">hh", 0, control_type)
    value = struct.pack(">hi", 0, coordinator_epoch)
    batch = builder(NONE, [(key, value, [])], ts=ts, transactional=True,
                    producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=-1)
    return stamp_offset(v2_set_attributes(batch, V2_CONTROL), offset)


def entries_at(items, first: int) -> list[tuple]:
    """(offset, timestamp, key, value) for legacy ``items`` at consecutive offsets."""
    return [(first + i, TS + first + i, k, v) for i, (k, v) in enumerate(items)]


def wrapper(builder, magic: int, codec: int, items, first: int) -> bytearray:
    """A compressed legacy wrapper holding ``items`` at absolute offsets first.. as a broker
    stores it: v0 inner offsets absolute, v1 inner offsets relative (0..n-1); the wrapper's
    own offset is the absolute offset of its last inner message."""
    n = len(items)
    inner_first = first if magic == 0 else 0
    entries = [(inner_first + i, TS + first + i, k, v) for i, (k, v) in enumerate(items)]
    return stamp_offset(builder(magic, codec, entries), first + n - 1)


# -- the generated segments -----------------------------------------------------------------

def seg_legacy_plain(builder, magic: int) -> bytes:
    return bytes(builder(magic, NONE, entries_at(legacy_records(10), 0)))


def seg_legacy_wrapped(builder, magic: int, codecs) -> bytes:
    out, first = [], 0
    for codec in codecs:
        items = legacy_records(5, first)
        out.append(wrapper(builder, magic, codec, items, first))
        first += len(items)
    return b"".join(out)


def seg_v1_log_append_time() -> bytes:
    """An uncompressed v1 message, a gzip wrapper and an lz4 wrapper, all rewritten by a
    LogAppendTime broker (the wrapper's timestamp is every inner message's timestamp)."""
    plain = kp_legacy_set(1, NONE, entries_at(legacy_records(1), 0))
    plain = legacy_log_append_time(plain, LOG_APPEND_TS)
    gz = legacy_log_append_time(wrapper(kp_legacy_set, 1, GZIP, legacy_records(4, 1), 1),
                                LOG_APPEND_TS + 1)
    lz = legacy_log_append_time(wrapper(aio_legacy_set, 1, LZ4, legacy_records(3, 5), 5),
                                LOG_APPEND_TS + 2)
    return bytes(plain + gz + lz)


def seg_v2_codecs(builder) -> bytes:
    out, base = [], 0
    for codec in (NONE, GZIP, SNAPPY, LZ4, ZSTD):
        recs = v2_records(8, base)
        out.append(stamp_offset(builder(codec, recs, ts=TS + base), base))
        base += len(recs)
    return b"".join(out)


def seg_v2_headers(builder) -> bytes:
    """Headers (none, one, repeated keys, null value, empty key, non-ASCII), null keys and
    values, empty keys, uncompressed and lz4; then a LogAppendTime batch."""
    a = stamp_offset(builder(NONE, v2_records(12, 0, headers=True)), 0)
    b = stamp_offset(builder(LZ4, v2_records(12, 12, headers=True), ts=TS + 12), 12)
    c = builder(GZIP, v2_records(6, 24, headers=True), ts=TS + 24)
    c = stamp_offset(v2_set_attributes(c, V2_LOG_APPEND_TIME, max_timestamp=LOG_APPEND_TS), 24)
    return bytes(a + b + c)


def seg_transactions() -> bytes:
    """Producer 4242 epoch 3: a transaction of 3 records (kafka-python) COMMITted (marker
    from aiokafka), a second of 2 records (aiokafka, zstd) ABORTed (marker from
    kafka-python); then an idempotent non-transactional batch of producer 4243."""
    pid, epoch, coord = 4242, 3, 7
    t1 = stamp_offset(kp_v2_batch(NONE, v2_records(3, 0), transactional=True,
                                  producer_id=pid, producer_epoch=epoch, base_sequence=0), 0)
    commit = marker_batch(aio_v2_batch, 1, offset=3, ts=TS + 10, producer_id=pid,
                          producer_epoch=epoch, coordinator_epoch=coord)
    t2 = stamp_offset(aio_v2_batch(ZSTD, v2_records(2, 4), ts=TS + 20, transactional=True,
                                   producer_id=pid, producer_epoch=epoch, base_sequence=3), 4)
    abort = marker_batch(kp_v2_batch, 0, offset=6, ts=TS + 30, producer_id=pid,
                         producer_epoch=epoch, coordinator_epoch=coord)
    idem = stamp_offset(kp_v2_batch(GZIP, v2_records(4, 7), ts=TS + 40, producer_id=pid + 1,
                                    producer_epoch=0, base_sequence=0), 7)
    return bytes(t1 + commit + t2 + abort + idem)


def seg_mixed() -> bytes:
    """What a topic looks like after message format upgrades 0 -> 1 -> 2: v0 messages, a v0
    snappy wrapper, v1 messages, a v1 gzip wrapper, then v2 batches, one segment."""
    parts = [
        kp_legacy_set(0, NONE, entries_at(legacy_records(2, 0), 0)),
        wrapper(aio_legacy_set, 0, SNAPPY, legacy_records(3, 2), 2),
        aio_legacy_set(1, NONE, entries_at(legacy_records(2, 5), 5)),
        wrapper(kp_legacy_set, 1, GZIP, legacy_records(3, 7), 7),
        stamp_offset(kp_v2_batch(NONE, v2_records(3, 10, headers=True), ts=TS + 10), 10),
        stamp_offset(aio_v2_batch(LZ4, v2_records(3, 13), ts=TS + 13), 13),
    ]
    return b"".join(bytes(p) for p in parts)


PREALLOCATED_TAIL = 8 * 1024


def seg_preallocated() -> bytes:
    """An active segment of a broker with log.preallocate=true that did not shut down
    cleanly: batches, then the zeros of the preallocated file (Kafka sizes it to
    segment.bytes; a few KiB stand for them here). Kafka trims the file on a clean close;
    after a crash its recovery truncates at the first zero 'batch' (size 0 < 14)."""
    a = stamp_offset(kp_v2_batch(NONE, v2_records(4, 0)), 0)
    b = stamp_offset(aio_v2_batch(SNAPPY, v2_records(4, 4), ts=TS + 4), 4)
    return bytes(a + b) + b"\x00" * PREALLOCATED_TAIL


def seg_snappy_framings() -> bytes:
    """The snappy framings readers meet: xerial (kafka-python and aiokafka default; the Java
    client's SnappyOutputStream) and one raw block (librdkafka, sarama), in v2 batches and in
    legacy wrappers."""
    with kafka_python_raw_snappy():
        raw_v2 = kp_v2_batch(SNAPPY, v2_records(6, 6), ts=TS + 6)
        raw_v1 = wrapper(kp_legacy_set, 1, SNAPPY, legacy_records(3, 18), 18)
    assert not raw_v2[61:].startswith(b"\x82SNAPPY\x00")
    parts = [
        stamp_offset(kp_v2_batch(SNAPPY, v2_records(6, 0)), 0),       # xerial
        stamp_offset(raw_v2, 6),                                      # raw
        stamp_offset(aio_v2_batch(SNAPPY, v2_records(6, 12), ts=TS + 12), 12),  # xerial
        raw_v1,                                                       # raw, legacy
        wrapper(aio_legacy_set, 1, SNAPPY, legacy_records(3, 21), 21),  # xerial, legacy
    ]
    return b"".join(bytes(p) for p in parts)


def seg_big_snappy() -> bytes:
    """A v2 snappy batch whose records exceed one 32 KiB xerial chunk (several chunks) and an
    lz4 batch over one 64 KiB lz4 block, both from aiokafka."""
    recs = [(b"k%d" % i, text_value(i, 2000), []) for i in range(40)]  # ~80 KiB
    a = stamp_offset(aio_v2_batch(SNAPPY, recs), 0)
    b = stamp_offset(aio_v2_batch(LZ4, recs, ts=TS + 40), 40)
    return bytes(a + b)


# -- vectors from other projects' test suites -------------------------------------------------

def _legacy_entry(offset: int, message: bytes) -> bytes:
    """A message-set entry (offset i64 + size i32) around a message that starts at its CRC
    (how sarama's message_test.go writes its vectors)."""
    return struct.pack(">qi", offset, len(message)) + message


# kafka-python test/record/test_records.py (dpkp/kafka-python, Apache-2.0), repeated in
# aiokafka tests/record/test_records.py: "This is real live data from Kafka 11 broker".
# The byte literals are copied as the source spells them.
KP_V2_BROKER = (
    # First Batch value == "123"
    b'\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00;\x00\x00\x00\x01\x02\x03'
    b'\x18\xa2p\x00\x00\x00\x00\x00\x00\x00\x00\x01]\xff{\x06<\x00\x00\x01]'
    b'\xff{\x06<\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x00'
    b'\x00\x00\x01\x12\x00\x00\x00\x01\x06123\x00'
    # Second Batch value = "" and value = "". 2 records
    b'\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00@\x00\x00\x00\x02\x02\xc8'
    b'\\\xbd#\x00\x00\x00\x00\x00\x01\x00\x00\x01]\xff|\xddl\x00\x00\x01]\xff'
    b'|\xde\x14\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x00'
    b'\x00\x00\x02\x0c\x00\x00\x00\x01\x00\x00\x0e\x00\xd0\x02\x02\x01\x00'
    b'\x00'
    # Third batch value = "123"
    b'\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00;\x00\x00\x00\x02\x02.\x0b'
    b'\x85\xb7\x00\x00\x00\x00\x00\x00\x00\x00\x01]\xff|\xe7\x9d\x00\x00\x01]'
    b'\xff|\xe7\x9d\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff'
    b'\x00\x00\x00\x01\x12\x00\x00\x00\x01\x06123\x00'
)
# kafka-python only (not in aiokafka's copy): the fourth element, "Fourth batch value =
# "hdr" with header hkey=hval" (added later; the source does not say where it was captured)
KP_V2_HEADERS = (
    b'\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00E\x00\x00\x00\x00\x02\\'
    b'\xd8\xefR\x00\x00\x00\x00\x00\x00\x00\x00\x01e\x85\xb6\xf3\xc1\x00\x00'
    b'\x01e\x85\xb6\xf3\xc1\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff'
    b'\xff\xff\x00\x00\x00\x01&\x00\x00\x00\x01\x06hdr\x02\x08hkey\x08hval'
)
# record_batch_data_v1 of the same files (four v1 messages "123", "", "", "123"; listed
# under the "Kafka 11 broker" comment)
KP_V1_BROKER = (
    b'\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x19G\x86(\xc2\x01\x00\x00'
    b'\x00\x01^\x18g\xab\xae\xff\xff\xff\xff\x00\x00\x00\x03123'
    b'\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x16\xef\x98\xc9 \x01\x00'
    b'\x00\x00\x01^\x18g\xaf\xc0\xff\xff\xff\xff\x00\x00\x00\x00'
    b'\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x16_\xaf\xfb^\x01\x00\x00'
    b'\x00\x01^\x18g\xb0r\xff\xff\xff\xff\x00\x00\x00\x00'
    b'\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x19\xa8\x12W \x01\x00\x00'
    b'\x00\x01^\x18g\xb8\x03\xff\xff\xff\xff\x00\x00\x00\x03123'
)
# record_batch_data_v0: "This is real live data from Kafka 10 broker"
KP_V0_BROKER = (
    b'\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x11\xfe\xb0\x1d\xbf\x00'
    b'\x00\xff\xff\xff\xff\x00\x00\x00\x03123'
    b'\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x0eyWH\xe0\x00\x00\xff'
    b'\xff\xff\xff\x00\x00\x00\x00'
    b'\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x0eyWH\xe0\x00\x00\xff'
    b'\xff\xff\xff\x00\x00\x00\x00'
    b'\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x11\xfe\xb0\x1d\xbf\x00'
    b'\x00\xff\xff\xff\xff\x00\x00\x00\x03123'
)
# kafka-python only: control_batch_data_v2, "Single record control batch (abort)" (control
# bit without the transactional bit; its value is no end-transaction marker)
KP_CONTROL = (
    b'\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00R\x00\x00\x00\x00'
    b'\x02e\x97\xff\xd0\x00\x20\x00\x00\x00\x00\x00\x00\x00\x00\x00'
    b'\x98\x96\x7f\x00\x00\x00\x00\x00\x98\x96'
    b'\x7f\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff'
    b'\x00\x00\x00\x01@\x00\x00\x00\x08\x00\x00\x00\x00,opaque-control-message\x00'
)

# IBM/sarama record_test.go (MIT): recordBatchTestCases, the "encoded" bytes (decimal, as
# the source spells them). All sit at base offset 0 in the source; they are re-stamped to
# 0..n-1 here (bytes 0-7, outside the CRC) so that they form one segment.
_SARAMA_V2_HEADER_TAIL = [
    0, 0, 0, 0, 0, 0, 0, 0,  # Max Timestamp
    0, 0, 0, 0, 0, 0, 0, 0,  # Producer ID
    0, 0,  # Producer Epoch
    0, 0, 0, 0,  # First Sequence
]
_SARAMA_RECORD = [40, 0, 10, 0, 8, 1, 2, 3, 4, 6, 5, 6, 7, 2, 6, 8, 9, 10, 4, 11, 12]
_SARAMA_TS = [0, 0, 1, 88, 141, 205, 89, 56]  # First Timestamp 1479847795000


def _sarama_v2(length, crc, attributes, first_ts, count, payload) -> bytes:
    return bytes([0] * 8 + [0, 0, 0, length] + [0, 0, 0, 0] + [2] + crc + [0, attributes]
                 + [0, 0, 0, 0] + first_ts + _SARAMA_V2_HEADER_TAIL + [0, 0, 0, count]
                 + payload)


SARAMA_V2 = [
    ("empty record", _sarama_v2(49, [89, 95, 183, 221], 0, [0] * 8, 0, [])),
    ("control batch", _sarama_v2(49, [81, 46, 67, 217], 32, [0] * 8, 0, [])),
    ("uncompressed record", _sarama_v2(70, [84, 121, 97, 253], 0, _SARAMA_TS, 1,
                                       _SARAMA_RECORD)),
    ("gzipped record", _sarama_v2(95, [231, 74, 206, 165], 1, _SARAMA_TS, 1, [
        31, 139, 8, 0, 0, 9, 110, 136, 0, 255, 0, 21, 0, 234, 255, 40, 0, 10, 0, 8, 1, 2,
        3, 4, 6, 5, 6, 7, 2, 6, 8, 9, 10, 4, 11, 12, 3, 0, 173, 201, 88, 103, 21, 0, 0, 0])),
    # an older revision of record_test.go: Go's deflate output of the time
    ("gzipped record (older sarama)", _sarama_v2(94, [159, 236, 182, 189], 1, _SARAMA_TS, 1, [
        31, 139, 8, 0, 0, 0, 0, 0, 0, 255, 210, 96, 224, 98, 224, 96, 100, 98, 102, 97, 99,
        101, 99, 103, 98, 227, 224, 228, 98, 225, 230, 1, 4, 0, 0, 255, 255, 173, 201, 88,
        103, 21, 0, 0, 0])),
    ("snappy compressed record (raw snappy)", _sarama_v2(72, [21, 0, 159, 97], 2, _SARAMA_TS,
                                                         1, [21, 80] + _SARAMA_RECORD)),
    ("lz4 compressed record (FLG content checksum)", _sarama_v2(
        89, [169, 74, 119, 197], 3, _SARAMA_TS, 1, [
            4, 34, 77, 24, 100, 112, 185, 21, 0, 0, 128, 40, 0, 10, 0, 8, 1, 2, 3, 4, 6, 5,
            6, 7, 2, 6, 8, 9, 10, 4, 11, 12, 0, 0, 0, 0, 12, 59, 239, 146])),
]
# IBM/sarama message_test.go (MIT): legacy messages from their CRC on; framed as message-set
# entries (offset i64 + size i32) here
SARAMA_EMPTY_V0 = bytes([
    167, 236, 104, 3, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
SARAMA_EMPTY_V1 = bytes([
    204, 47, 121, 217, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
SARAMA_BULK_GZIP_V0 = bytes([
    139, 160, 63, 141, 0x00, 0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x27,
    0x1f, 0x8b, 0x08,
    0, 0, 0, 0, 0, 0, 0, 99, 96, 128, 3, 190, 202, 112, 143, 7, 12, 12, 255, 129, 0, 33, 200,
    192, 136, 41, 3, 0, 199, 226, 155, 70, 52, 0, 0, 0])
SARAMA_BULK_SNAPPY_V0 = bytes([
    180, 47, 53, 209, 0x00, 0x02, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 42,
    130, 83, 78, 65, 80, 80, 89, 0, 0, 0, 0, 1, 0, 0, 0, 1,
    0, 0, 0, 22, 52, 0, 0, 25, 1, 16, 14, 227, 138, 104, 118, 25, 15, 13, 1, 8, 1, 0, 0, 62,
    26, 0])
SARAMA_BULK_LZ4_V1 = bytes([
    246, 12, 188, 129, 0x01, 0x03, 255, 255, 249, 209, 212, 181, 73, 201,
    0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x47, 0x04, 0x22, 0x4D, 0x18, 100,
    112, 185, 52, 0, 0, 128, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 14, 121, 87, 72, 224, 0, 0, 255,
    255, 255, 255, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 14, 121, 87, 72, 224, 0, 0,
    255, 255, 255, 255, 0, 0, 0, 0, 0, 0, 0, 0,
    71, 129, 23, 111])

VECTORS_SOURCES = {
    "kafka-python": "dpkp/kafka-python test/record/test_records.py (also aio-libs/aiokafka "
                    "tests/record/test_records.py)",
    "sarama-record": "IBM/sarama record_test.go (recordBatchTestCases)",
    "sarama-message": "IBM/sarama message_test.go",
}


def seg_sarama_v2() -> bytes:
    return b"".join(bytes(stamp_offset(bytearray(b), i))
                    for i, (_name, b) in enumerate(SARAMA_V2))


# -- the corpus -------------------------------------------------------------------------------

#: (partition dir, base offset, builder, one-line description) — README.md has the details
SEGMENTS = [
    ("kp-v0-none-0", 0, lambda: seg_legacy_plain(kp_legacy_set, 0),
     "kafka-python v0 messages, uncompressed"),
    ("kp-v1-none-0", 0, lambda: seg_legacy_plain(kp_legacy_set, 1),
     "kafka-python v1 messages, uncompressed"),
    ("aio-v0-none-0", 0, lambda: seg_legacy_plain(aio_legacy_set, 0),
     "aiokafka v0 messages, uncompressed"),
    ("aio-v1-none-0", 0, lambda: seg_legacy_plain(aio_legacy_set, 1),
     "aiokafka v1 messages, uncompressed"),
    ("kp-v0-wrapped-0", 0, lambda: seg_legacy_wrapped(kp_legacy_set, 0, (GZIP, SNAPPY, LZ4)),
     ("kafka-python v0 wrappers gzip/snappy/lz4 (absolute inner offsets; lz4 with the "
      "pre-0.10 wrong header checksum)")),
    ("kp-v1-wrapped-0", 0, lambda: seg_legacy_wrapped(kp_legacy_set, 1, (GZIP, SNAPPY, LZ4)),
     "kafka-python v1 wrappers gzip/snappy/lz4 (relative inner offsets)"),
    ("aio-v0-wrapped-0", 0, lambda: seg_legacy_wrapped(aio_legacy_set, 0, (GZIP, SNAPPY)),
     "aiokafka v0 wrappers gzip/snappy (aiokafka refuses lz4 for magic 0)"),
    ("aio-v1-wrapped-0", 0, lambda: seg_legacy_wrapped(aio_legacy_set, 1, (GZIP, SNAPPY, LZ4)),
     "aiokafka v1 wrappers gzip/snappy/lz4"),
    ("v1-log-append-time-0", 0, seg_v1_log_append_time,
     "v1 message and gzip/lz4 wrappers under LogAppendTime"),
    ("kp-v2-codecs-0", 0, lambda: seg_v2_codecs(kp_v2_batch),
     "kafka-python v2 batches none/gzip/snappy/lz4/zstd"),
    ("aio-v2-codecs-0", 0, lambda: seg_v2_codecs(aio_v2_batch),
     "aiokafka v2 batches none/gzip/snappy/lz4/zstd"),
    ("kp-v2-headers-0", 0, lambda: seg_v2_headers(kp_v2_batch),
     "kafka-python v2 headers, null/empty keys and values, a LogAppendTime batch"),
    ("aio-v2-headers-0", 0, lambda: seg_v2_headers(aio_v2_batch),
     "aiokafka v2 headers, null/empty keys and values, a LogAppendTime batch"),
    ("transactions-0", 0, seg_transactions,
     "transactional batches, COMMIT and ABORT markers, an idempotent batch"),
    ("mixed-0", 0, seg_mixed, "v0, v1 and v2 in one segment"),
    ("preallocated-0", 0, seg_preallocated, "two v2 batches then 8 KiB of zeros"),
    ("snappy-framings-0", 0, seg_snappy_framings, "xerial and raw snappy, v2 and v1"),
    ("big-blocks-0", 0, seg_big_snappy, "snappy over several xerial chunks, lz4 over 64 KiB"),
    # vectors
    ("vec-kafka-python-v2-0", 0, lambda: KP_V2_BROKER,
     "Kafka 0.11 broker bytes (kafka-python/aiokafka tests)"),
    ("vec-kafka-python-v2-headers-0", 0, lambda: KP_V2_HEADERS,
     "v2 batch with a header (kafka-python tests)"),
    ("vec-kafka-python-v1-0", 0, lambda: KP_V1_BROKER, "v1 messages (kafka-python tests)"),
    ("vec-kafka-python-v0-0", 0, lambda: KP_V0_BROKER,
     "Kafka 0.10 broker bytes, v0 (kafka-python/aiokafka tests)"),
    ("vec-kafka-python-control-0", 0, lambda: KP_CONTROL,
     "control batch (kafka-python tests)"),
    ("vec-sarama-v2-0", 0, seg_sarama_v2,
     "sarama's v2 encodings: empty, control, plain, gzip x2, raw snappy, lz4"),
    ("vec-sarama-legacy-0", 0,
     lambda: _legacy_entry(0, SARAMA_EMPTY_V0) + _legacy_entry(1, SARAMA_EMPTY_V1),
     "sarama's empty v0 and v1 messages"),
    ("vec-sarama-v0-gzip-0", 0, lambda: _legacy_entry(1, SARAMA_BULK_GZIP_V0),
     "sarama's v0 gzip wrapper of two messages"),
    ("vec-sarama-v0-snappy-0", 0, lambda: _legacy_entry(1, SARAMA_BULK_SNAPPY_V0),
     "sarama's v0 xerial snappy wrapper of two messages"),
    ("vec-sarama-v1-lz4-0", 0, lambda: _legacy_entry(1, SARAMA_BULK_LZ4_V1),
     "sarama's v1 lz4 wrapper (content checksum, stored block) of two v0 messages"),
]


def segment_path(dirname: str, base_offset: int) -> str:
    return os.path.join(CORPUS, dirname, f"{base_offset:020d}.log")


def build_all() -> dict[str, bytes]:
    """{path relative to tests/corpus: bytes} of every segment."""
    out = {}
    with fixed_gzip_mtime(0):
        for dirname, base, build, _desc in SEGMENTS:
            out[os.path.relpath(segment_path(dirname, base), CORPUS)] = bytes(build())
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true",
                   help="do not write: exit 1 if a corpus file differs from a rebuild")
    args = p.parse_args(argv)
    files = build_all()
    bad = 0
    for rel, data in sorted(files.items()):
        path = os.path.join(CORPUS, rel)
        if args.check:
            try:
                with open(path, "rb") as f:
                    same = f.read() == data
            except FileNotFoundError:
                same = False
            if not same:
                print(f"differs: {rel}", file=sys.stderr)
                bad += 1
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        print(f"{len(data):7d}  {rel}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
