"""``kafkafs dump`` on producer-state ``.snapshot`` and ``.txnindex`` files: Kafka
DumpLogSegments' ``dumpProducerIdSnapshot`` / ``dumpTxnIndex`` lines."""

from __future__ import annotations

import argparse
import io
import struct

import pytest
from crc32c import crc32c

from kafkafs.cli import dump
from kafkafs.log.producer_state import (
    ProducerStateEntry,
    ProducerStateManager,
    snapshot_filename,
    write_snapshot,
)
from kafkafs.log.txnindex import TransactionIndex
from kafkafs.record import control
from kafkafs.record.batch import RecordBatch, encode_batch, iter_batches

NAME = "00000000000000000000"


def run_dump(*argv):
    parser = argparse.ArgumentParser(prog="kafkafs")
    sub = parser.add_subparsers(dest="command")
    dump.register(sub)
    args = parser.parse_args(["dump", *argv])
    out, err = io.StringIO(), io.StringIO()
    status = args.func(args, out=out, err=err)
    return status, out.getvalue().splitlines(), err.getvalue().splitlines()


def snapshot_bytes(rows) -> bytes:
    """Snapshot bytes laid out here from Kafka's schema (version 1, CRC-32C over [6, end))."""
    body = struct.pack(">i", len(rows)) + b"".join(struct.pack(">qhiqiqiq", *r) for r in rows)
    return struct.pack(">hI", 1, crc32c(body)) + body


# -- .snapshot ---------------------------------------------------------------------------
def test_snapshot_lines_match_kafka(tmp_path):
    path = tmp_path / snapshot_filename(120)
    path.write_bytes(snapshot_bytes([
        # pid, epoch, last seq, last offset, offset delta, timestamp, coord epoch, txn first
        (1000, 3, 41, 99, 4, 1700000000123, 7, -1),
        (1001, 0, 2, 110, 5, 1700000000456, -1, 105),  # first sequence wraps (2 - 5)
        (1002, 1, 9, -1, 0, 1700000000789, 4, -1),     # markers only: no batch metadata
    ]))
    status, out, err = run_dump("--files", str(path))
    assert (status, err) == (0, [])
    assert out == [
        f"Dumping {path}",
        ("producerId: 1000 producerEpoch: 3 coordinatorEpoch: 7 currentTxnFirstOffset: "
        "OptionalLong.empty lastTimestamp: 1700000000123 firstSequence: 37 lastSequence: 41 "
        "lastOffset: 99 offsetDelta: 4 timestamp: 1700000000123"),
        ("producerId: 1001 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: "
        "OptionalLong[105] lastTimestamp: 1700000000456 firstSequence: 2147483645 "
        "lastSequence: 2 lastOffset: 110 offsetDelta: 5 timestamp: 1700000000456"),
        ("producerId: 1002 producerEpoch: 1 coordinatorEpoch: 4 currentTxnFirstOffset: "
        "OptionalLong.empty lastTimestamp: 1700000000789"),
    ]


def test_empty_snapshot_prints_nothing(tmp_path):
    path = tmp_path / snapshot_filename(0)
    write_snapshot(path, [])
    assert run_dump("--files", str(path)) == (0, [f"Dumping {path}"], [])


@pytest.mark.parametrize("damage, message", [
    (lambda d: d[:-1] + bytes([d[-1] ^ 0x10]), "Snapshot is corrupt (CRC is no longer valid)."),
    (lambda d: b"\x00\x07" + d[2:], "Snapshot contained an unknown file version 7"),
    (lambda d: d[:30], "Snapshot failed schema validation"),
    (lambda d: b"", "Snapshot failed schema validation"),
])
def test_corrupt_snapshot_is_an_error_naming_the_file(tmp_path, damage, message):
    path = tmp_path / snapshot_filename(5)
    path.write_bytes(damage(snapshot_bytes([(1, 0, 0, 4, 0, 9, 0, -1)])))
    other = tmp_path / snapshot_filename(6)
    write_snapshot(other, [ProducerStateEntry(2)])
    status, out, err = run_dump("--files", f"{path},{other}")
    assert status == 1
    assert out == [f"Dumping {path}", f"Dumping {other}",
                   ("producerId: 2 producerEpoch: -1 coordinatorEpoch: -1 currentTxnFirstOffset: "
                   "OptionalLong.empty lastTimestamp: -1")]
    assert len(err) == 1 and err[0].startswith(f"error: {path}: {message}")


def test_missing_snapshot(tmp_path):
    path = tmp_path / snapshot_filename(5)
    assert run_dump("--files", str(path)) == (
        1, [f"Dumping {path}"], [f"error: {path}: No such file or directory"])


# -- .txnindex ---------------------------------------------------------------------------
def test_txn_index_lines_match_kafka(tmp_path):
    path = tmp_path / f"{NAME}.txnindex"
    path.write_bytes(struct.pack(">hqqqq", 0, 7, 10, 25, 11)
                     + struct.pack(">hqqqq", 0, 8, 3, 30, 26))
    status, out, err = run_dump("--files", str(path))
    assert (status, err) == (0, [])
    assert out == [f"Dumping {path}",
                   "version: 0 producerId: 7 firstOffset: 10 lastOffset: 25 lastStableOffset: 11",
                   "version: 0 producerId: 8 firstOffset: 3 lastOffset: 30 lastStableOffset: 26"]


def test_empty_and_missing_txn_index_print_nothing(tmp_path):
    empty = tmp_path / f"{NAME}.txnindex"
    empty.write_bytes(b"")
    missing = tmp_path / "00000000000000000050.txnindex"
    assert run_dump("--files", f"{empty},{missing}") == (
        0, [f"Dumping {empty}", f"Dumping {missing}"], [])
    assert not missing.exists()


def test_torn_txn_index_prints_whole_entries_then_fails(tmp_path):
    path = tmp_path / f"{NAME}.txnindex"
    path.write_bytes(struct.pack(">hqqqq", 0, 7, 10, 25, 11) + b"\0" * 12)
    status, out, err = run_dump("--files", str(path))
    assert status == 1
    assert out[1] == "version: 0 producerId: 7 firstOffset: 10 lastOffset: 25 lastStableOffset: 11"
    assert len(err) == 1 and str(path) in err[0] and "position 34" in err[0]


def test_unknown_txn_entry_version_fails_before_printing(tmp_path):
    path = tmp_path / f"{NAME}.txnindex"
    path.write_bytes(struct.pack(">hqqqq", 0, 7, 10, 25, 11) + b"\x01" + bytes(33))
    status, out, err = run_dump("--files", str(path))
    assert (status, out) == (1, [f"Dumping {path}"])
    assert "Unexpected aborted transaction version 1" in err[0]


# -- a transactional segment end to end ----------------------------------------------------
def test_transactional_segment_log_txnindex_and_snapshot(tmp_path):
    d = tmp_path / "t-0"
    d.mkdir()
    batches = [
        encode_batch([(1000, None, b"a", ()), (1001, None, b"b", ())], base_offset=0,
                     producer_id=5, producer_epoch=1, base_sequence=0, is_transactional=True),
        encode_batch([(1002, None, b"c", ())], base_offset=2, producer_id=6, producer_epoch=0,
                     base_sequence=0, is_transactional=True),
        control.encode_end_txn_marker_batch(control.ABORT, base_offset=3, timestamp=1003,
                                            producer_id=5, producer_epoch=1,
                                            coordinator_epoch=2),
    ]
    log = d / f"{NAME}.log"
    log.write_bytes(b"".join(batches))
    index = TransactionIndex(d / f"{NAME}.txnindex", 0)
    psm = ProducerStateManager(d)
    for b in iter_batches(log.read_bytes()):
        psm.update(b, index)
    index.close()
    snap = psm.take_snapshot()
    status, out, err = run_dump("--files", f"{log},{d / (NAME + '.txnindex')},{snap}",
                                "--deep-iteration")
    assert (status, err) == (0, [])
    marker_line = [line for line in out if "endTxnMarker" in line]
    assert marker_line == [("| offset: 3 CreateTime: 1003 keySize: 4 valueSize: 6 sequence: -1 "
                           "headerKeys: [] endTxnMarker: ABORT coordinatorEpoch: 2")]
    txn_at = out.index(f"Dumping {d / (NAME + '.txnindex')}")
    # transaction of producer 5 from 0 to its marker at 3; producer 6's (from 2) still open
    assert out[txn_at + 1] == ("version: 0 producerId: 5 firstOffset: 0 lastOffset: 3 "
                               "lastStableOffset: 2")
    assert out[txn_at + 2:] == [
        f"Dumping {snap}",
        ("producerId: 5 producerEpoch: 1 coordinatorEpoch: 2 currentTxnFirstOffset: "
        "OptionalLong.empty lastTimestamp: 1003 firstSequence: 0 lastSequence: 1 lastOffset: 1 "
        "offsetDelta: 1 timestamp: 1003"),
        ("producerId: 6 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: "
        "OptionalLong[2] lastTimestamp: 1002 firstSequence: 0 lastSequence: 0 lastOffset: 2 "
        "offsetDelta: 0 timestamp: 1002"),
    ]
    assert snap.endswith(snapshot_filename(4))


def test_control_records_with_bad_keys_or_values(tmp_path):
    recs = [(1, b"\0\0", b"", ()),                        # key too short
            (1, control.encode_control_key(control.COMMIT), b"\0\0", ()),  # value too short
            (1, control.encode_control_key(42), b"", ())]  # a type Kafka does not know
    log = tmp_path / f"{NAME}.log"
    log.write_bytes(encode_batch(recs, base_offset=0, is_control=True))
    assert RecordBatch.from_buffer(log.read_bytes()).is_control
    _s, out, _e = run_dump("--files", str(log), "--deep-iteration")
    tails = [line.split("headerKeys: [] ", 1)[1] for line in out if line.startswith("|")]
    assert tails == ["controlType: UNKNOWN(-1)", "controlType: COMMIT(1)",
                     "controlType: UNKNOWN(42)"]
