"""``kafkafs dump``: kafka-dump-log.sh's lines for segments, indexes and time indexes."""

from __future__ import annotations

import argparse
import io
import os
import struct
import zlib

import pytest
from crc32c import crc32c

from kafkafs.cli import dump
from kafkafs.log.index import OffsetIndex, TimeIndex
from kafkafs.record.batch import encode_batch

NAME = "00000000000000000000"


def crc(batch: bytes) -> int:
    """CRC-32C over bytes [21, end) computed here, independently of the codec."""
    return crc32c(batch[21:])


def run_dump(*argv):
    parser = argparse.ArgumentParser(prog="kafkafs")
    sub = parser.add_subparsers(dest="command")
    dump.register(sub)
    args = parser.parse_args(["dump", *argv])
    assert args.func is dump.run
    out, err = io.StringIO(), io.StringIO()
    status = args.func(args, out=out, err=err)
    return status, out.getvalue().splitlines(), err.getvalue().splitlines()


def batch_line(b: bytes, *, base, last, count, position, ts, ts_type="CreateTime",
               codec="none", seq=(-1, -1), pid=-1, epoch=-1, leader_epoch=-1, txn=False,
               control=False, horizon="OptionalLong.empty", valid=True) -> str:
    t = {True: "true", False: "false"}
    return (f"baseOffset: {base} lastOffset: {last} count: {count} baseSequence: {seq[0]} "
            f"lastSequence: {seq[1]} producerId: {pid} producerEpoch: {epoch} "
            f"partitionLeaderEpoch: {leader_epoch} isTransactional: {t[txn]} "
            f"isControl: {t[control]} deleteHorizonMs: {horizon} position: {position} "
            f"{ts_type}: {ts} size: {len(b)} magic: 2 compresscodec: {codec} crc: {crc(b)} "
            f"isvalid: {t[valid]}")


@pytest.fixture
def seg(tmp_path):
    """A segment of four batches, with the matching positions."""
    b1 = encode_batch([(1000, None, b"hello", ()),
                       (1001, b"k", b"w\xffrld", [("h1", b"x"), ("h2", None)])], base_offset=0)
    b2 = encode_batch([(2000, b"a", b"b", ())], base_offset=2, compression=1, producer_id=7,
                      producer_epoch=1, base_sequence=3, is_transactional=True,
                      partition_leader_epoch=4)
    b3 = encode_batch([(2001, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 5), ())],
                      base_offset=3, is_control=True, is_transactional=True, producer_id=7,
                      producer_epoch=1, partition_leader_epoch=4)
    b4 = encode_batch([(1, None, b"x", ())], base_offset=10, timestamp_type=1,
                      log_append_time=5000)
    assert len(b1) == 95  # 61-byte header + records of 12 and 22 bytes, counted by hand
    d = tmp_path / "t-0"
    d.mkdir()
    log = d / f"{NAME}.log"
    log.write_bytes(b1 + b2 + b3 + b4)
    pos = [0, len(b1), len(b1) + len(b2), len(b1) + len(b2) + len(b3)]
    return {"dir": d, "log": str(log), "batches": [b1, b2, b3, b4], "pos": pos,
            "index": str(d / f"{NAME}.index"), "timeindex": str(d / f"{NAME}.timeindex")}


# -- .log --------------------------------------------------------------------------------
def test_shallow_dump_of_a_log(seg):
    b1, b2, b3, b4 = seg["batches"]
    p = seg["pos"]
    status, out, err = run_dump("--files", seg["log"])
    assert status == 0 and err == []
    assert out == [
        f"Dumping {seg['log']}",
        "Log starting offset: 0",
        batch_line(b1, base=0, last=1, count=2, position=0, ts=1001),
        batch_line(b2, base=2, last=2, count=1, position=p[1], ts=2000, codec="gzip", seq=(3, 3),
                   pid=7, epoch=1, leader_epoch=4, txn=True),
        batch_line(b3, base=3, last=3, count=1, position=p[2], ts=2001, pid=7, epoch=1,
                   leader_epoch=4, txn=True, control=True),
        batch_line(b4, base=10, last=10, count=1, position=p[3], ts=5000,
                   ts_type="LogAppendTime"),
    ]


def test_first_batch_line_literally(seg):
    b1 = seg["batches"][0]
    _s, out, _e = run_dump("--files", seg["log"])
    assert out[2] == ("baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 "
                      "producerId: -1 producerEpoch: -1 partitionLeaderEpoch: -1 "
                      "isTransactional: false isControl: false deleteHorizonMs: "
                      "OptionalLong.empty position: 0 CreateTime: 1001 size: 95 magic: 2 "
                      f"compresscodec: none crc: {crc(b1)} isvalid: true")


def test_deep_iteration_prints_record_metadata(seg):
    status, out, err = run_dump("--files", seg["log"], "--deep-iteration")
    assert status == 0
    records = [line for line in out if line.startswith("|")]
    assert records == [
        "| offset: 0 CreateTime: 1000 keySize: -1 valueSize: 5 sequence: -1 headerKeys: []",
        "| offset: 1 CreateTime: 1001 keySize: 1 valueSize: 5 sequence: -1 headerKeys: [h1,h2]",
        "| offset: 2 CreateTime: 2000 keySize: 1 valueSize: 1 sequence: 3 headerKeys: []",
        "| offset: 3 CreateTime: 2001 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
        "endTxnMarker: COMMIT coordinatorEpoch: 5",
        "| offset: 10 LogAppendTime: 5000 keySize: -1 valueSize: 1 sequence: -1 headerKeys: []",
    ]
    # records follow their batch line
    assert out[3].startswith("| offset: 0") and out[5].startswith("baseOffset: 2")
    # the jump from 3 to 10 is reported after everything, as Kafka does
    assert err == [f"Non-consecutive offsets in {os.path.abspath(seg['log'])}",
                   "  3 is followed by 10"]


def test_print_data_log_prints_keys_and_payloads(seg):
    status, out, err = run_dump("--files", seg["log"], "--print-data-log")
    records = [line for line in out if line.startswith("|")]
    assert records == [
        "| offset: 0 CreateTime: 1000 keySize: -1 valueSize: 5 sequence: -1 headerKeys: [] "
        "payload: hello",
        "| offset: 1 CreateTime: 1001 keySize: 1 valueSize: 5 sequence: -1 headerKeys: [h1,h2] "
        "key: k payload: w\ufffdrld",
        "| offset: 2 CreateTime: 2000 keySize: 1 valueSize: 1 sequence: 3 headerKeys: [] "
        "key: a payload: b",
        # control records print their marker, not their key and value
        "| offset: 3 CreateTime: 2001 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
        "endTxnMarker: COMMIT coordinatorEpoch: 5",
        "| offset: 10 LogAppendTime: 5000 keySize: -1 valueSize: 1 sequence: -1 headerKeys: [] "
        "payload: x",
    ]


def test_skip_record_metadata(seg):
    _s, out, _e = run_dump("--files", seg["log"], "--print-data-log", "--skip-record-metadata")
    records = [line for line in out if not line.startswith(("Dumping", "Log starting",
                                                            "baseOffset"))]
    # Kafka's quirk: without metadata and key, the payload keeps its leading blank only
    assert records == [" payload: hello", "| key: k payload: w\ufffdrld", "| key: a payload: b",
                       "", " payload: x"]


def test_torn_tail_and_max_bytes(seg):
    b1 = seg["batches"][0]
    with open(seg["log"], "ab") as f:
        f.write(b1[:40])  # a partial batch, as a crash leaves it
    status, out, _e = run_dump("--files", seg["log"])
    assert status == 0
    assert out[-1] == f"Found 40 invalid bytes at the end of {NAME}.log"
    assert len(out) == 7
    status, out, _e = run_dump("--files", seg["log"], "--max-bytes", str(len(b1) + 10))
    assert out == [f"Dumping {seg['log']}", "Log starting offset: 0",
                   batch_line(b1, base=0, last=1, count=2, position=0, ts=1001)]


def test_corrupt_crc_shows_invalid(seg):
    b1 = seg["batches"][0]
    data = bytearray(open(seg["log"], "rb").read())
    data[80] ^= 0x01  # inside the first batch's records
    with open(seg["log"], "wb") as f:
        f.write(data)
    status, out, err = run_dump("--files", seg["log"])
    assert out[2] == (f"baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 "
                      "producerId: -1 producerEpoch: -1 partitionLeaderEpoch: -1 "
                      "isTransactional: false isControl: false deleteHorizonMs: "
                      "OptionalLong.empty position: 0 CreateTime: 1001 size: 95 magic: 2 "
                      f"compresscodec: none crc: {crc(b1)} isvalid: false")
    # the damaged batch's line is printed as Kafka prints it; the dump of the file ends there
    # with an error naming it (Kafka goes on and exits 0)
    assert len(out) == 3
    assert status == 1
    assert err == [f"error: {seg['log']}: position 0: record batch is corrupt (stored crc = "
                   f"{crc(b1)}, computed crc = {crc32c(bytes(data[21:95]))})"]


def test_record_size_below_minimum_is_an_error(seg):
    with open(seg["log"], "ab") as f:
        f.write(struct.pack(">qi", 11, 5) + bytes(20))
    status, out, err = run_dump("--files", seg["log"])
    assert status == 1
    assert len([line for line in out if line.startswith("baseOffset")]) == 4
    position = sum(len(b) for b in seg["batches"])
    assert err == [f"error: {seg['log']}: position {position}: record size 5 is smaller "
                   "than the minimum record overhead (14)"]  # the readers' words


def test_delete_horizon_and_sequences_wrap(tmp_path):
    b = encode_batch([(10, b"k", None, ()), (11, b"j", None, ())], base_offset=40,
                     delete_horizon_ms=86400000, producer_id=1, producer_epoch=0,
                     base_sequence=0x7FFFFFFF, partition_leader_epoch=2)
    log = tmp_path / "00000000000000000040.log"
    log.write_bytes(b)
    _s, out, _e = run_dump("--files", str(log), "--print-data-log")
    assert out[1] == "Log starting offset: 40"
    assert out[2] == batch_line(b, base=40, last=41, count=2, position=0, ts=11,
                                seq=(2147483647, 0), pid=1, epoch=0, leader_epoch=2,
                                horizon="OptionalLong[86400000]")
    # tombstones: no payload printed, sequence wraps past Integer.MAX_VALUE to 0
    assert out[3].endswith("keySize: 1 valueSize: -1 sequence: 2147483647 headerKeys: [] key: k")
    assert out[4].endswith("keySize: 1 valueSize: -1 sequence: 0 headerKeys: [] key: j")


def test_batch_written_by_kafka_python(tmp_path):
    from kafka.record.default_records import (
        DefaultRecordBatch,
        DefaultRecordBatchBuilder,
    )

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=10000)
    builder.append(0, timestamp=1234, key=b"k", value=b"v", headers=[("a", b"1")])
    builder.append(1, timestamp=1240, key=None, value=b"vv", headers=[])
    data = bytes(builder.build())
    theirs = DefaultRecordBatch(data)
    log = tmp_path / f"{NAME}.log"
    log.write_bytes(data)
    _s, out, _e = run_dump("--files", str(log), "--print-data-log")
    assert out[2:] == [
        f"baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 "
        f"producerEpoch: -1 partitionLeaderEpoch: {theirs.leader_epoch} isTransactional: false "
        f"isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1240 "
        f"size: {len(data)} magic: 2 compresscodec: none crc: {theirs.crc} isvalid: true",
        "| offset: 0 CreateTime: 1234 keySize: 1 valueSize: 1 sequence: -1 headerKeys: [a] "
        "key: k payload: v",
        "| offset: 1 CreateTime: 1240 keySize: -1 valueSize: 2 sequence: -1 headerKeys: [] "
        "payload: vv",
    ]


def test_kraft_snapshot_header_and_control_records(tmp_path):
    header = encode_batch([(7, struct.pack(">hh", 0, 3), struct.pack(">hqb", 0, 123, 0), ())],
                          base_offset=0, is_control=True)
    voters = encode_batch([(7, struct.pack(">hh", 0, 2), b"\x00\x00", ()),
                           (7, struct.pack(">hh", 0, 5), struct.pack(">hhb", 0, 1, 0), ()),
                           (7, struct.pack(">hh", 0, 4), struct.pack(">hb", 0, 0), ())],
                          base_offset=1, is_control=True)
    snap = tmp_path / "00000000000000000100-0000000003.checkpoint"
    snap.write_bytes(header + voters)
    _s, out, _e = run_dump("--files", str(snap), "--deep-iteration")
    assert out[1] == "Snapshot end offset: 100, epoch: 3"
    records = [line.split("headerKeys: [] ", 1)[1] for line in out if line.startswith("|")]
    assert records == ['SnapshotHeader {"version":0,"lastContainedLogTimestamp":123}',
                       "controlType: LEADER_CHANGE(2)",
                       'KRaftVersion {"version":0,"kRaftVersion":1}',
                       'SnapshotFooter {"version":0}']
    boot = tmp_path / "bootstrap.checkpoint"
    boot.write_bytes(header)
    _s, out, _e = run_dump("--files", str(boot))
    assert out[1] == "KRaft bootstrap snapshot"


def test_a_legacy_message_before_a_v2_batch(tmp_path):
    """Each entry in its own format (test_dump_legacy.py covers the legacy lines in full)."""
    body = struct.pack(">bbq", 1, 0, 123) + struct.pack(">i", -1) + struct.pack(">i", 3) + b"abc"
    crc = zlib.crc32(body)
    legacy = struct.pack(">qiI", 5, 4 + len(body), crc) + body
    b = encode_batch([(1, None, b"x", ())], base_offset=6)
    log = tmp_path / f"{NAME}.log"
    log.write_bytes(legacy + b)
    status, out, _e = run_dump("--files", str(log), "--deep-iteration")
    assert status == 0
    assert out[2] == (f"offset: 5 position: 0 CreateTime: 123 size: {len(legacy)} magic: 1 "
                      f"compresscodec: none crc: {crc} isvalid: true")
    # Kafka 3.x's record line, stray brace included (DumpLogSegments.scala)
    assert out[3] == (f"| offset: 5 CreateTime: 123 keySize: -1 valueSize: 3 isValid: true "
                      f"crc: {crc}}}")
    assert out[4] == batch_line(b, base=6, last=6, count=1, position=len(legacy), ts=1)
    assert out[5].startswith("| offset: 6 CreateTime: 1 ")


# -- .index ------------------------------------------------------------------------------
def make_index(seg, entries, max_index_size=1024, trim=True):
    idx = OffsetIndex(seg["index"], 0, max_index_size=max_index_size)
    for off, pos in entries:
        idx.append(off, pos)
    if trim:
        idx.close()
    else:
        idx.flush()
    return idx


def test_dump_index_with_mismatches(seg):
    p = seg["pos"]
    make_index(seg, [(2, p[1]), (4, p[2]), (11, p[3])])
    status, out, err = run_dump("--files", seg["index"])
    assert status == 0
    assert out == [f"Dumping {seg['index']}", f"offset: 2 position: {p[1]}",
                   f"offset: 4 position: {p[2]}", f"offset: 11 position: {p[3]}"]
    # Kafka lists them newest first
    assert err == [f"Mismatches in :{os.path.abspath(seg['index'])}",
                   "  Index offset: 11, log offset: 10",
                   "  Index offset: 4, log offset: 3"]
    status, out, err = run_dump("--files", seg["index"], "--verify-index-only")
    assert out == [f"Dumping {seg['index']}"] and len(err) == 3


def test_dump_index_of_a_live_untrimmed_index(seg):
    p = seg["pos"]
    idx = make_index(seg, [(2, p[1]), (3, p[2])], trim=False)
    assert os.path.getsize(seg["index"]) == 1024
    status, out, err = run_dump("--files", seg["index"])
    assert (status, err) == (0, [])
    assert out[1:] == [f"offset: 2 position: {p[1]}", f"offset: 3 position: {p[2]}"]
    assert os.path.getsize(seg["index"]) == 1024  # dumping changes nothing
    idx.close()


def test_index_position_without_a_batch_is_a_mismatch(seg):
    make_index(seg, [(2, 100000)])
    _s, _out, err = run_dump("--files", seg["index"])
    assert err[1] == "  Index offset: 2, log offset: -1"


def test_index_sanity_check(seg):
    make_index(seg, [(2, seg["pos"][1])])
    status, out, err = run_dump("--files", seg["index"], "--index-sanity-check")
    assert (status, out, err) == (0, [f"Dumping {seg['index']}",
                                      f"{seg['index']} passed sanity check."], [])
    with open(seg["index"], "ab") as f:
        f.write(b"\x07\x07\x07")
    status, out, err = run_dump("--files", seg["index"], "--index-sanity-check")
    assert status == 1
    assert err == [f"error: Index file {os.path.abspath(seg['index'])} is corrupt, found 11 "
                   "bytes which is neither positive nor a multiple of 8"]


def test_empty_index(seg):
    make_index(seg, [])
    status, out, _e = run_dump("--files", seg["index"])
    assert out == [f"Dumping {seg['index']}", f"{seg['index']} is empty."]


# -- .timeindex --------------------------------------------------------------------------
def test_dump_time_index(seg):
    p = seg["pos"]
    make_index(seg, [(2, p[1]), (3, p[2]), (10, p[3])])
    t = TimeIndex(seg["timeindex"], 0, max_index_size=120)
    for ts, off in [(1001, 1), (2000, 2), (2001, 3), (5000, 10)]:
        t.maybe_append(ts, off)
    t.close()
    status, out, err = run_dump("--files", seg["timeindex"])
    assert (status, err) == (0, [])
    assert out == [f"Dumping {seg['timeindex']}", "timestamp: 1001 offset: 1",
                   "timestamp: 2000 offset: 2", "timestamp: 2001 offset: 3",
                   "timestamp: 5000 offset: 10"]
    status, out, err = run_dump("--files", seg["timeindex"], "--index-sanity-check")
    assert out[1] == f"{seg['timeindex']} passed sanity check."


def test_time_index_findings(seg):
    p = seg["pos"]
    make_index(seg, [(2, p[1]), (3, p[2]), (10, p[3])])
    entries = [(1001, 1), (1999, 2), (1500, 3), (6000, 7), (7000, 50)]  # broken on purpose
    with open(seg["timeindex"], "wb") as f:
        f.write(b"".join(struct.pack(">qi", ts, off) for ts, off in entries))
    status, out, err = run_dump("--files", seg["timeindex"], "--verify-index-only")
    name = os.path.abspath(seg["timeindex"])
    assert status == 0 and out == [f"Dumping {seg['timeindex']}"]
    assert err == [f"Found timestamp mismatch in :{name}",
                   "  Index timestamp: 1999, log timestamp: 2000",
                   "  Index timestamp: 1500, log timestamp: 2001",
                   f"Found out of order timestamp in :{name}",
                   "  Index timestamp: 1500, Previously indexed timestamp: 1999",
                   "The following indexed offsets are not found in the log.",
                   "Indexed offset: 7, found log offset: 10",
                   "Indexed offset: 50, found log offset: -1"]


def test_segment_written_by_the_log_engine_verifies_clean(tmp_path):
    from kafkafs.log.config import LogConfig
    from kafkafs.log.loader import load_log

    part = tmp_path / "t-0"
    part.mkdir()
    lg = load_log(str(part), "t", 0, LogConfig(index_interval_bytes=100, segment_bytes=4000),
                  had_clean_shutdown=True)
    for i in range(80):
        lg.append([(10_000 + i, b"k%d" % i, b"v" * (i % 17), ()) for _ in range(1 + i % 3)])
    lg.close()
    files = sorted(str(part / n) for n in os.listdir(part)
                   if n.endswith((".log", ".index", ".timeindex")))
    assert len(files) >= 6
    status, out, err = run_dump("--files", ",".join(files), "--verify-index-only",
                                "--deep-iteration")
    assert (status, err) == (0, [])
    assert sum(line.startswith("| offset:") for line in out) == sum(1 + i % 3 for i in range(80))


# -- dispatch and options ----------------------------------------------------------------
def test_unknown_and_empty_files(seg, tmp_path):
    other = tmp_path / "notes.txt"
    other.write_text("x")
    status, out, err = run_dump("--files", str(other))
    assert (status, out, err) == (0, [f"Dumping {other}"], [f"Ignoring unknown file {other}"])
    # an empty transaction index holds no aborted transaction: nothing to print (Kafka);
    # the dumps of real .snapshot and .txnindex files are tested in test_dump_txn.py
    f = seg["dir"] / f"{NAME}.txnindex"
    f.write_bytes(b"")
    status, out, err = run_dump("--files", str(f))
    assert (status, out, err) == (0, [f"Dumping {f}"], [])


def test_several_files_and_a_missing_one(seg):
    missing = str(seg["dir"] / "00000000000000000099.log")
    status, out, err = run_dump("--files", f"{missing},{seg['log']}")
    assert status == 1
    assert out[:3] == [f"Dumping {missing}", "Log starting offset: 99", f"Dumping {seg['log']}"]
    assert err == [f"error: {missing}: No such file or directory"]
    assert len(out) == 8


def test_decoder_options_imply_print_data_log(seg):
    status, out, err = run_dump("--files", seg["log"], "--value-decoder-class")
    assert not any(line.startswith("Note") for line in err)  # StringDecoder is what we do
    assert "payload: hello" in out[3]
    status, out, err = run_dump("--files", seg["log"], "--key-decoder-class",
                                "org.apache.kafka.tools.api.LongDecoder")
    assert "payload: hello" in out[3]
    assert err[0] == ("Note: --key-decoder-class org.apache.kafka.tools.api.LongDecoder is "
                      "ignored: kafkafs prints keys and values as UTF-8 text (invalid bytes "
                      "replaced).")


def test_files_is_required():
    parser = argparse.ArgumentParser(prog="kafkafs")
    dump.register(parser.add_subparsers(dest="command"))
    with pytest.raises(SystemExit):
        parser.parse_args(["dump"])
    with pytest.raises(SystemExit):
        parser.parse_args(["dump", "--files", "x.log", "--max-bytes", "-1"])
