"""Producer state snapshots (``.snapshot``), control records and the producer-state manager:
Kafka's ``ProducerStateManager``, ``ProducerStateEntry``, ``ProducerAppendInfo``,
``ControlRecordType``, ``EndTransactionMarker``."""

from __future__ import annotations

import os
import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkafs.log.errors import ReadOnlyLogError
from kafkafs.log.producer_state import (
    ENTRY_SIZE,
    CompletedTxn,
    CorruptSnapshotError,
    InvalidTxnStateError,
    ProducerStateEntry,
    ProducerStateManager,
    TxnMetadata,
    decode_snapshot,
    delete_snapshots_after,
    delete_snapshots_before,
    encode_snapshot,
    latest_snapshot,
    list_snapshot_files,
    parse_snapshot_filename,
    read_snapshot,
    snapshot_filename,
    take_snapshot,
    write_snapshot,
)
from kafkafs.log.txnindex import AbortedTxn, TransactionIndex
from kafkafs.record import control
from kafkafs.record.batch import RecordBatch, encode_batch
from kafkafs.record.errors import CorruptRecordError

SNAP = "00000000000000000042.snapshot"


def kafka_snapshot_bytes(entries) -> bytes:
    """A snapshot laid out here from Kafka's PID_SNAPSHOT_MAP_SCHEMA, independently of the
    module: version i16 = 1, crc u32, array count i32, then per entry producer_id i64,
    epoch i16, last_sequence i32, last_offset i64, offset_delta i32, timestamp i64,
    coordinator_epoch i32, current_txn_first_offset i64; CRC-32C over bytes [6, end)."""
    body = len(entries).to_bytes(4, "big", signed=True)
    for pid, epoch, seq, off, delta, ts, coord, txn in entries:
        body += (pid.to_bytes(8, "big", signed=True) + epoch.to_bytes(2, "big", signed=True)
                 + seq.to_bytes(4, "big", signed=True) + off.to_bytes(8, "big", signed=True)
                 + delta.to_bytes(4, "big", signed=True) + ts.to_bytes(8, "big", signed=True)
                 + coord.to_bytes(4, "big", signed=True) + txn.to_bytes(8, "big", signed=True))
    return (1).to_bytes(2, "big") + crc32c(body).to_bytes(4, "big") + body


ROWS = [(1000, 3, 41, 99, 4, 1700000000123, 7, -1),
        (1001, 0, 0, 100, 0, 1700000000456, -1, 95)]


# -- snapshot bytes ---------------------------------------------------------------------
def test_entry_is_46_bytes_and_encoding_matches_the_schema_by_hand():
    assert ENTRY_SIZE == 46
    entries = [ProducerStateEntry(*r[:7], None if r[7] < 0 else r[7]) for r in ROWS]
    data = encode_snapshot(entries)
    assert data == kafka_snapshot_bytes(ROWS)
    assert len(data) == 10 + 2 * 46
    assert data[:2] == b"\x00\x01"
    assert decode_snapshot(data) == entries


def test_literal_bytes_of_a_one_entry_snapshot():
    e = ProducerStateEntry(producer_id=1, producer_epoch=0, last_sequence=4, last_offset=9,
                           offset_delta=4, last_timestamp=5, coordinator_epoch=-1,
                           current_txn_first_offset=None)
    body = bytes.fromhex("00000001" "0000000000000001" "0000" "00000004" "0000000000000009"
                         "00000004" "0000000000000005" "ffffffff" "ffffffffffffffff")
    assert encode_snapshot([e]) == b"\x00\x01" + struct.pack(">I", crc32c(body)) + body


def test_empty_snapshot():
    data = encode_snapshot([])
    assert data == b"\x00\x01" + struct.pack(">I", crc32c(b"\0\0\0\0")) + b"\0\0\0\0"
    assert decode_snapshot(data) == []


def test_entry_without_batch_metadata_reads_as_kafka_reads_it():
    # last_offset < 0: Kafka keeps no BatchMetadata, so sequence -1 and delta 0
    data = kafka_snapshot_bytes([(5, 2, 17, -1, 3, 1234, 9, -1)])
    (e,) = decode_snapshot(data)
    assert e == ProducerStateEntry(5, 2, -1, -1, 0, 1234, 9, None)
    assert not e.has_batch_metadata and e.first_sequence == -1 and e.first_data_offset == -1


def test_first_sequence_wraps_like_kafka():
    e = ProducerStateEntry(1, 0, last_sequence=2, last_offset=10, offset_delta=5)
    assert e.first_sequence == 2147483645  # decrementSequence(2, 5)
    assert e.first_data_offset == 5
    assert ProducerStateEntry(1, 0, 10, 10, 5).first_sequence == 5


def test_write_and_read_a_file(tmp_path):
    path = tmp_path / SNAP
    entries = [ProducerStateEntry(*r[:7], None if r[7] < 0 else r[7]) for r in ROWS]
    write_snapshot(path, entries)
    assert path.read_bytes() == kafka_snapshot_bytes(ROWS)
    assert read_snapshot(path) == entries
    assert os.listdir(tmp_path) == [SNAP]  # the .tmp was renamed
    with pytest.raises(ValueError, match="cannot encode"):
        write_snapshot(path, [ProducerStateEntry(1, producer_epoch=1 << 15)])
    assert read_snapshot(path) == entries and os.listdir(tmp_path) == [SNAP]


@pytest.mark.parametrize("damage, message", [
    (lambda d: d[:-1] + bytes([d[-1] ^ 1]), ("Snapshot is corrupt (CRC is no longer valid). "
                                            "Stored crc: ")),
    (lambda d: b"\x00\x02" + d[2:], "Snapshot contained an unknown file version 2"),
    (lambda d: b"\x00\x00" + d[2:], "Snapshot contained an unknown file version 0"),
    (lambda d: d[:-10], ("Snapshot failed schema validation: Error reading field "
                        "'producer_entries': 2 entries take 92 bytes, only 82 bytes available")),
    (lambda d: d[:5], "Snapshot failed schema validation: Error reading field 'crc'"),
    (lambda d: b"", "Snapshot failed schema validation: Error reading field 'version'"),
    (lambda d: d[:6] + b"\xff\xff\xff\xff" + d[10:], "Array size -1 cannot be negative"),
])
def test_corrupt_snapshots_raise_naming_the_file(tmp_path, damage, message):
    path = tmp_path / SNAP
    path.write_bytes(damage(kafka_snapshot_bytes(ROWS)))
    with pytest.raises(CorruptSnapshotError) as exc:
        read_snapshot(path)
    assert message in str(exc.value)
    assert str(exc.value).startswith(f"{path}: ")
    assert exc.value.path == str(path) and message in exc.value.reason


def test_trailing_bytes_are_covered_by_the_crc():
    data = kafka_snapshot_bytes(ROWS)
    with pytest.raises(CorruptSnapshotError, match="CRC"):
        decode_snapshot(data + b"\0")
    body = data[6:] + b"junk"  # Kafka's schema read ignores them when the CRC holds
    assert len(decode_snapshot(data[:2] + struct.pack(">I", crc32c(body)) + body)) == 2


entry_st = st.builds(
    ProducerStateEntry,
    producer_id=st.integers(0, (1 << 63) - 1),
    producer_epoch=st.integers(-1, (1 << 15) - 1),
    last_sequence=st.integers(0, (1 << 31) - 1),
    last_offset=st.integers(0, (1 << 63) - 1),
    offset_delta=st.integers(0, (1 << 31) - 1),
    last_timestamp=st.integers(-1, (1 << 63) - 1),
    coordinator_epoch=st.integers(-(1 << 31), (1 << 31) - 1),
    current_txn_first_offset=st.none() | st.integers(0, (1 << 63) - 1),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(entry_st, max_size=8))
def test_property_round_trip_and_independent_layout(entries):
    data = encode_snapshot(entries)
    rows = [(e.producer_id, e.producer_epoch, e.last_sequence, e.last_offset, e.offset_delta,
             e.last_timestamp, e.coordinator_epoch,
             -1 if e.current_txn_first_offset is None else e.current_txn_first_offset)
            for e in entries]
    assert data == kafka_snapshot_bytes(rows)
    assert decode_snapshot(data) == entries


@settings(max_examples=100, deadline=None)
@given(st.lists(entry_st, min_size=1, max_size=4), st.data())
def test_property_any_flipped_bit_is_detected(entries, data):
    raw = bytearray(encode_snapshot(entries))
    bit = data.draw(st.integers(0, len(raw) * 8 - 1))
    raw[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(raw)


# -- file names and listing -------------------------------------------------------------
def test_snapshot_names_and_listing(tmp_path):
    assert snapshot_filename(42) == SNAP
    assert parse_snapshot_filename(SNAP) == 42
    for name in (SNAP + ".deleted", "00000000000000000042.log", "x.snapshot", ".snapshot"):
        assert parse_snapshot_filename(name) is None
    assert list_snapshot_files(tmp_path / "missing") == []
    for off in (100, 7, 42):
        take_snapshot(tmp_path, off, [])
    (tmp_path / (snapshot_filename(5) + ".deleted")).write_bytes(b"")
    (tmp_path / snapshot_filename(9)).mkdir()  # not a regular file
    assert [o for o, _p in list_snapshot_files(tmp_path)] == [7, 42, 100]
    assert latest_snapshot(tmp_path) == (100, str(tmp_path / snapshot_filename(100)))
    assert delete_snapshots_before(tmp_path, 42) == [7]
    assert delete_snapshots_after(tmp_path, 42) == [100]
    assert [o for o, _p in list_snapshot_files(tmp_path)] == [42]


def test_take_snapshot_sorts_by_producer_id(tmp_path):
    path = take_snapshot(tmp_path, 3, [ProducerStateEntry(9), ProducerStateEntry(2)])
    assert [e.producer_id for e in read_snapshot(path)] == [2, 9]


# -- control records --------------------------------------------------------------------
def test_control_types_and_key_value_layout():
    assert (control.ABORT, control.COMMIT, control.LEADER_CHANGE, control.SNAPSHOT_HEADER,
            control.SNAPSHOT_FOOTER, control.KRAFT_VERSION, control.KRAFT_VOTERS) == tuple(range(7))
    assert control.control_type_name(6) == "KRAFT_VOTERS"
    assert control.control_type_name(42) == "UNKNOWN"
    assert control.encode_control_key(control.COMMIT) == b"\x00\x00\x00\x01"
    assert control.encode_end_txn_marker_value(5) == b"\x00\x00\x00\x00\x00\x05"
    assert control.parse_control_key(b"\x00\x00\x00\x01") == (0, 1)
    assert control.parse_control_key(b"\x00\x03\x00\x01extra") == (3, 1)  # newer: as v0
    assert control.parse_end_txn_marker(b"\x00\x00\xff\xff\xff\xfe") == (0, -2)
    assert control.end_txn_marker(b"\0\0\0\0", b"\0\0\0\0\0\x07") == (control.ABORT, 7)


@pytest.mark.parametrize("call, message", [
    (lambda: control.parse_control_key(b"\0\0\0"), "at least 4 bytes, but found only 3"),
    (lambda: control.parse_control_key(None), "found only 0"),
    (lambda: control.parse_control_key(b"\xff\xff\0\0"), ("Invalid version found for control "
                                                          "record: -1")),
    (lambda: control.parse_end_txn_marker(b"\0\0\0\0\0"), "at least 6 bytes, but found only 5"),
    (lambda: control.parse_end_txn_marker(b"\x80\0\0\0\0\0"), ("Invalid version found for end "
                                                               "transaction marker: -32768")),
    (lambda: control.end_txn_marker(b"\0\0\0\x02", b"\0" * 6), ("Invalid control record type "
                                                               "for end transaction marker: "
                                                               "LEADER_CHANGE")),
])
def test_control_parse_errors(call, message):
    with pytest.raises(CorruptRecordError, match=message.replace("(", r"\(")):
        call()


def test_marker_batch_read_by_kafka_python():
    from kafka.record.default_records import DefaultRecordBatch

    data = control.encode_end_txn_marker_batch(control.ABORT, base_offset=7, timestamp=2000,
                                               producer_id=5, producer_epoch=2,
                                               coordinator_epoch=3, partition_leader_epoch=4)
    kb = DefaultRecordBatch(bytearray(data))
    assert kb.validate_crc() and kb.is_control_batch and kb.is_transactional
    assert (kb.producer_id, kb.producer_epoch, kb.base_sequence, kb.base_offset) == (5, 2, -1, 7)
    (rec,) = list(kb)
    assert (rec.offset, rec.timestamp, rec.version, rec.type, rec.abort) == (7, 2000, 0, 0, True)
    assert rec.value == b"\x00\x00\x00\x00\x00\x03"
    with pytest.raises(ValueError):
        control.encode_end_txn_marker_batch(control.LEADER_CHANGE, base_offset=0, timestamp=0,
                                            producer_id=1, producer_epoch=0, coordinator_epoch=0)


# -- the manager ------------------------------------------------------------------------
def batch(data: bytes) -> RecordBatch:
    return RecordBatch.from_buffer(data)


def data_batch(base, n, pid, epoch=0, seq=0, txn=True, ts=1000):
    return batch(encode_batch([(ts + i, None, b"v%d" % i, ()) for i in range(n)],
                              base_offset=base, producer_id=pid, producer_epoch=epoch,
                              base_sequence=seq, is_transactional=txn))


def marker(base, pid, kind, epoch=0, coordinator_epoch=0, ts=5000):
    return batch(control.encode_end_txn_marker_batch(
        kind, base_offset=base, timestamp=ts, producer_id=pid, producer_epoch=epoch,
        coordinator_epoch=coordinator_epoch))


def test_transactions_aborted_and_committed_with_kafka_lso(tmp_path):
    idx = TransactionIndex(tmp_path / "00000000000000000000.txnindex", 0)
    psm = ProducerStateManager(tmp_path)
    plain = batch(encode_batch([(1, None, b"x", ())], base_offset=0))  # no producer id
    assert psm.update(plain) is None and psm.map_end_offset == 1 and psm.is_empty()
    assert psm.update(data_batch(1, 2, pid=1), idx) is None          # txn A: 1-2
    assert psm.first_undecided_offset() == 1
    assert psm.update(data_batch(3, 2, pid=2, seq=0), idx) is None   # txn B: 3-4
    assert psm.update(data_batch(5, 1, pid=3, txn=False), idx) is None  # idempotent only
    assert psm.update(data_batch(6, 2, pid=1, seq=2), idx) is None   # A continues
    assert psm.ongoing_txns() == [TxnMetadata(1, 1), TxnMetadata(2, 3)]
    # ABORT A at 8: B (another producer) is still open from 3, so LSO = 3
    aborted = psm.update(marker(8, pid=1, kind=control.ABORT, coordinator_epoch=4), idx)
    assert aborted == AbortedTxn(1, 1, 8, 3)
    assert psm.first_undecided_offset() == 3
    # COMMIT B at 9: nothing for the index
    assert psm.update(marker(9, pid=2, kind=control.COMMIT), idx) is None
    assert psm.first_undecided_offset() is None
    # a new txn of B, aborted alone: LSO = marker + 1
    psm.update(data_batch(10, 3, pid=2, seq=2), idx)
    assert psm.update(marker(13, pid=2, kind=control.ABORT), idx) == AbortedTxn(2, 10, 13, 14)
    assert idx.all_aborted_txns() == [AbortedTxn(1, 1, 8, 3), AbortedTxn(2, 10, 13, 14)]
    assert psm.map_end_offset == 14
    p = psm.producers
    assert p[1] == ProducerStateEntry(1, 0, last_sequence=3, last_offset=7, offset_delta=1,
                                      last_timestamp=5000, coordinator_epoch=4)
    assert p[2] == ProducerStateEntry(2, 0, 4, 12, 2, 5000, 0, None)
    assert p[3] == ProducerStateEntry(3, 0, 0, 5, 0, 1000, -1, None)
    assert p[2].first_sequence == 2 and p[2].first_data_offset == 10


def test_lso_is_the_earliest_other_open_transaction(tmp_path):
    psm = ProducerStateManager(tmp_path)
    psm.update(data_batch(0, 1, pid=7))
    psm.update(data_batch(1, 1, pid=8))
    psm.update(data_batch(2, 1, pid=9))
    # 9 aborts: the earliest open transaction of another producer starts at 0
    assert psm.update(marker(3, pid=9, kind=control.ABORT)) == AbortedTxn(9, 2, 3, 0)
    assert psm.update(marker(4, pid=7, kind=control.ABORT)) == AbortedTxn(7, 0, 4, 1)
    assert psm.update(marker(5, pid=8, kind=control.ABORT)) == AbortedTxn(8, 1, 5, 6)


def test_marker_without_transaction_and_empty_marker_batch(tmp_path):
    psm = ProducerStateManager(tmp_path)
    # a marker for a producer with nothing open: no completed transaction, entry updated
    assert psm.update(marker(0, pid=4, kind=control.ABORT, epoch=1, coordinator_epoch=2)) is None
    assert psm.producers[4] == ProducerStateEntry(4, 1, -1, -1, 0, 5000, 2, None)
    # a control batch emptied by the cleaner: nothing to parse, state kept
    empty = batch(encode_batch([], base_offset=1, last_offset_delta=0, producer_id=5,
                               producer_epoch=0, is_transactional=True, is_control=True))
    assert psm.update(empty) is None
    assert psm.producers[5] == ProducerStateEntry.empty(5)
    assert psm.map_end_offset == 2


def test_epoch_bump_forgets_batch_metadata(tmp_path):
    psm = ProducerStateManager(tmp_path)
    psm.update(data_batch(0, 2, pid=1, epoch=0, seq=0))
    # the coordinator bumps the epoch when it aborts (transactions v2): metadata dropped
    psm.update(marker(2, pid=1, kind=control.ABORT, epoch=1))
    assert psm.producers[1] == ProducerStateEntry(1, 1, -1, -1, 0, 5000, 0, None)
    psm.update(data_batch(3, 1, pid=1, epoch=1, seq=0, txn=False, ts=7000))
    assert psm.producers[1] == ProducerStateEntry(1, 1, 0, 3, 0, 7000, 0, None)


def test_non_transactional_write_inside_a_transaction_is_refused(tmp_path):
    psm = ProducerStateManager(tmp_path)
    psm.update(data_batch(0, 1, pid=1))
    before = dict(psm.producers)
    with pytest.raises(InvalidTxnStateError, match="Expected transactional write from producer "
                                                   "1 at offset 1"):
        psm.update(data_batch(1, 1, pid=1, seq=1, txn=False))
    assert dict(psm.producers) == before and psm.map_end_offset == 1


def test_marker_of_another_control_type_is_corrupt(tmp_path):
    psm = ProducerStateManager(tmp_path)
    rec = (0, control.encode_control_key(control.LEADER_CHANGE), b"\0\0\0\0\0\0", ())
    bad = batch(encode_batch([rec], base_offset=0, producer_id=1, producer_epoch=0,
                             is_transactional=True, is_control=True))
    with pytest.raises(CorruptRecordError, match="position 0: Invalid control record type"):
        psm.update(bad)
    assert psm.is_empty() and psm.map_end_offset == 0


def test_complete_txn_that_was_not_started(tmp_path):
    psm = ProducerStateManager(tmp_path)
    with pytest.raises(ValueError, match="which was not started"):
        psm.complete_txn(CompletedTxn(1, 0, 5, True))


def test_batches_written_by_aiokafka(tmp_path):
    """aiokafka's builder as an independent writer of transactional batches; its marker is
    the same builder's batch with the control bit set and the CRC recomputed here."""
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    def build(base, pid, epoch, seq, records, is_control=False):
        b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=1,
                                      producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                      batch_size=1 << 20)
        for i, (ts, key, value) in enumerate(records):
            b.append(i, timestamp=ts, key=key, value=value, headers=[])
        buf = bytearray(b.build())
        struct.pack_into(">q", buf, 0, base)
        if is_control:
            buf[22] |= 0x20
            struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
        return RecordBatch.from_buffer(bytes(buf))

    psm = ProducerStateManager(tmp_path)
    psm.update(build(0, 11, 3, 100, [(1000, b"k", b"a"), (1001, None, b"b")]))
    psm.update(build(2, 12, 0, 0, [(1002, None, b"c")]))
    abort = build(3, 11, 3, -1, [(2000, b"\0\0\0\0", b"\0\0\0\0\0\x09")], is_control=True)
    assert abort.is_valid() and abort.is_control
    assert psm.update(abort) == AbortedTxn(11, 0, 3, 2)
    assert psm.producers[11] == ProducerStateEntry(11, 3, 101, 1, 1, 2000, 9, None)
    assert psm.producers[12].current_txn_first_offset == 2


# -- snapshots through the manager ------------------------------------------------------
def build_log():
    """Batches of a small transactional log: (batch, ...) in offset order."""
    return [data_batch(0, 2, pid=1), data_batch(2, 1, pid=2, txn=False),
            data_batch(3, 2, pid=3), marker(5, pid=1, kind=control.ABORT),
            data_batch(6, 1, pid=2, seq=1, txn=False), marker(7, pid=3, kind=control.COMMIT),
            data_batch(8, 1, pid=1, seq=2, epoch=0)]


def test_snapshot_and_reload_replays_to_the_same_state(tmp_path):
    log = build_log()
    os.mkdir(tmp_path / "a")
    full = ProducerStateManager(tmp_path / "a")
    for b in log[:4]:
        full.update(b)
    path = full.take_snapshot()
    assert path == str(tmp_path / "a" / snapshot_filename(6))
    assert full.take_snapshot() is None  # nothing new since
    assert [e.producer_id for e in read_snapshot(path)] == [1, 2, 3]
    for b in log[4:]:
        full.update(b)
    # a fresh manager: load the snapshot at 6, replay the rest
    again = ProducerStateManager(tmp_path / "a")
    assert again.snapshot_offsets() == [6]
    again.truncate_and_reload(0, 9)
    assert again.map_end_offset == 6
    assert again.ongoing_txns() == [TxnMetadata(3, 3)]
    for b in log[4:]:
        again.update(b)
    assert dict(again.producers) == dict(full.producers)
    assert again.ongoing_txns() == full.ongoing_txns() == [TxnMetadata(1, 8)]


def test_truncate_and_reload_drops_out_of_range_and_corrupt_snapshots(tmp_path):
    for off in (3, 5, 8, 12):
        take_snapshot(tmp_path, off, [ProducerStateEntry(off, 0, 0, off - 1, 0, off, 0, None)])
    (tmp_path / snapshot_filename(8)).write_bytes(b"\0\1garbage")
    psm = ProducerStateManager(tmp_path)
    psm.truncate_and_reload(3, 10)  # drops 3 (<= start) and 12 (> end); 8 is corrupt
    assert [o for o, _p in list_snapshot_files(tmp_path)] == [5]
    assert psm.map_end_offset == 5 and list(psm.producers) == [5]
    psm.truncate_and_reload(6, 10)  # nothing usable left: empty state at the log start
    assert psm.map_end_offset == 6 and psm.is_empty() and list_snapshot_files(tmp_path) == []


def test_delete_before_stray_and_truncate_fully(tmp_path):
    for off in (0, 10, 20, 25, 30):
        take_snapshot(tmp_path, off, [])
    psm = ProducerStateManager(tmp_path)
    psm.delete_snapshots_before(10)
    assert psm.snapshot_offsets() == [10, 20, 25, 30]
    # segments at 0, 10, 20: 25 and 30 match no segment; only the newest stray is kept,
    # and only because it lies past the newest segment (the clean-shutdown snapshot)
    psm.remove_stray_snapshots([0, 10, 20])
    assert [o for o, _p in list_snapshot_files(tmp_path)] == [10, 20, 30]
    psm.remove_stray_snapshots([0, 10, 20, 40])  # 30 is now below the newest segment
    assert [o for o, _p in list_snapshot_files(tmp_path)] == [10, 20]
    psm.truncate_fully_and_start_at(50)
    assert list_snapshot_files(tmp_path) == [] and psm.map_end_offset == 50
    assert psm.latest_snapshot_offset() is None


def test_read_only_manager_never_touches_files(tmp_path):
    for off in (3, 9):
        take_snapshot(tmp_path, off, [ProducerStateEntry(1, 0, 0, off - 1, 0, off, 0, None)])
    before = {n: os.stat(tmp_path / n).st_mtime_ns for n in os.listdir(tmp_path)}
    psm = ProducerStateManager(tmp_path, writable=False)
    psm.truncate_and_reload(3, 9)  # would delete 3; read-only only forgets it
    assert psm.map_end_offset == 9 and psm.snapshot_offsets() == [9]
    psm.update(data_batch(9, 1, pid=1, seq=1))
    with pytest.raises(ReadOnlyLogError):
        psm.take_snapshot()
    psm.truncate_fully_and_start_at(0)
    assert {n: os.stat(tmp_path / n).st_mtime_ns for n in os.listdir(tmp_path)} == before


# -- property: the manager against a plain model ----------------------------------------------
ops_st = st.lists(st.tuples(st.sampled_from(["data", "commit", "abort"]), st.integers(1, 4),
                            st.integers(1, 3)), max_size=40)


@settings(max_examples=80, deadline=None)
@given(ops_st, st.data())
def test_property_aborted_txns_and_snapshot_replay_match_a_model(tmp_path_factory, ops, data):
    """Random transactional traffic of four producers: every ABORT yields the AbortedTxn a
    plain model of Kafka's rules predicts, and a manager reloaded from a snapshot taken at a
    random batch boundary ends in the same state after replaying the rest."""
    d = tmp_path_factory.mktemp("psm")
    log, offset, seqs, open_txns, expected = [], 0, {}, {}, []
    for kind, pid, n in ops:
        if kind == "data":
            log.append(data_batch(offset, n, pid=pid, seq=seqs.get(pid, 0), ts=offset))
            seqs[pid] = seqs.get(pid, 0) + n
            open_txns.setdefault(pid, offset)
            offset += n
        else:
            log.append(marker(offset, pid=pid, ts=offset,
                              kind=control.ABORT if kind == "abort" else control.COMMIT))
            first = open_txns.pop(pid, None)
            if first is not None and kind == "abort":
                others = [f for p, f in open_txns.items() if p != pid]
                expected.append(AbortedTxn(pid, first, offset, min(others, default=offset + 1)))
            offset += 1
    psm = ProducerStateManager(d)
    got = [a for a in (psm.update(b) for b in log) if a is not None]
    assert got == expected
    assert psm.first_undecided_offset() == min(open_txns.values(), default=None)
    assert psm.map_end_offset == offset
    # snapshot at a random boundary, reload, replay the rest
    cut = data.draw(st.integers(0, len(log)))
    first_half = ProducerStateManager(d)
    for b in log[:cut]:
        first_half.update(b)
    first_half.take_snapshot()
    again = ProducerStateManager(d)
    again.truncate_and_reload(0, offset)
    assert again.map_end_offset == (log[cut - 1].last_offset + 1 if cut else 0)
    for b in log[cut:]:
        again.update(b)
    assert dict(again.producers) == dict(psm.producers)
    assert again.ongoing_txns() == psm.ongoing_txns()


def test_idle_producers_expire_unless_in_a_transaction(tmp_path):
    """``removeExpiredProducers``: a producer whose last timestamp is at least
    producer.id.expiration.ms old goes, unless a transaction of it is open; the next
    snapshot leaves it out."""
    psm = ProducerStateManager(tmp_path)
    psm.update(data_batch(0, 1, pid=1, txn=False, ts=1000))  # idle since 1000
    psm.update(data_batch(1, 1, pid=2, ts=1000))             # open transaction since 1000
    psm.update(data_batch(2, 1, pid=3, txn=False, ts=9000))  # recent
    psm.update_map_end_offset(3)
    assert psm.remove_expired_producers(now_ms=10_999, expiration_ms=10_000) == []
    assert psm.remove_expired_producers(now_ms=11_000, expiration_ms=10_000) == [1]  # >=
    assert sorted(psm.producers) == [2, 3]
    assert psm.first_undecided_offset() == 1  # the open transaction is untouched
    path = psm.take_snapshot()
    assert sorted(e.producer_id for e in read_snapshot(path)) == [2, 3]
    psm.update(marker(3, pid=2, kind=control.COMMIT, ts=1500))
    assert psm.remove_expired_producers(now_ms=20_000, expiration_ms=10_000) == [2, 3]
    assert psm.is_empty()
