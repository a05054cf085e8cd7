"""``kafkafs dump --json``: the same dump as JSON Lines.

One directory holds every kind of file the dump reads: a ``.log`` of legacy entries (v0, v1,
a gzip v1 wrapper) followed by v2 batches (headers, null and non-UTF-8 keys and values,
compression, a delete horizon, LogAppendTime, transactions with COMMIT and ABORT markers,
control records Kafka cannot decode, an offset gap) and a torn tail; its ``.index`` (one
entry pointing at the wrong batch) and ``.timeindex`` (written byte by byte: a matching
entry, a timestamp mismatch, one out of order, an offset inside a batch); a ``.txnindex``;
a producer ``.snapshot``; a KRaft snapshot ``.checkpoint`` and ``bootstrap.checkpoint``; an
empty index, an index of 12 bytes, a missing file, a corrupt ``.log`` and a file the dump
does not know.

For every option combination, the ``--json`` objects are checked against the text lines of
the same dump (stdout and stderr written to one stream, so in the order they were printed):
one object per line, same order, and each object holds exactly the values its text line
shows, read back from the text by a parser of Kafka's line format written here (``label:
value`` pairs, ``CreateTime: T``, ``OptionalLong[N]``, ``[a,b]``, ``true``; the sentences
by pattern). The only text lines without an object are the headings Kafka prints above a
group of findings on stderr: each finding object names its heading. stderr is the same with
and without ``--json``.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import io
import json
import os
import re
import struct
import zlib
from contextlib import redirect_stderr, redirect_stdout

import pytest

from kafkafs.cli import dump
from kafkafs.cli.dump_decoders import Decoded
from kafkafs.cli.main import main
from kafkafs.log.index import OffsetIndex
from kafkafs.log.producer_state import (
    ProducerStateEntry,
    snapshot_filename,
    write_snapshot,
)
from kafkafs.log.txnindex import AbortedTxn, TransactionIndex
from kafkafs.record import control
from kafkafs.record.batch import encode_batch

NAME = "00000000000000000000"
TS = 1_700_000_000_000
GZIP, LZ4 = 1, 3
NOT_UTF8_KEY = b"\xff\xfekey"
NOT_UTF8_VALUE = b"\x80 binary \xc3\x28"
TEXT_VALUE = "välue ✓ \u2028 \"quoted\" \\ tab\t".encode()


# -- writing the files -------------------------------------------------------------------
def legacy_message(offset: int, magic: int, key, value, *, ts: int = TS, codec: int = 0
                   ) -> bytes:
    """A v0/v1 message framed as in a log: offset, size, crc, magic, attributes,
    [timestamp], key, value (Kafka's LegacyRecord layout; CRC-32 over magic..end)."""
    body = struct.pack(">bb", magic, codec)
    if magic == 1:
        body += struct.pack(">q", ts)
    for part in (key, value):
        body += struct.pack(">i", -1) if part is None else struct.pack(">i", len(part)) + part
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(message)) + message


def gzip_wrapper(first: int, values) -> bytes:
    """A v1 gzip wrapper of ``values`` at ``first``..: inner offsets relative, the wrapper's
    offset the last absolute one, its timestamp the largest inner one."""
    inner = b"".join(legacy_message(i, 1, b"w%d" % i, v, ts=TS + first + i)
                     for i, v in enumerate(values))
    last = len(values) - 1
    return legacy_message(first + last, 1, None, gzip.compress(inner), ts=TS + first + last,
                          codec=GZIP)


def control_record(type_id: int, value: bytes | None) -> tuple:
    return (TS + 30, control.encode_control_key(type_id), value, ())


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("dumpjson") / "t-0"
    d.mkdir()
    entries = [
        legacy_message(0, 0, b"k0", b"v0"),                                 # offset 0
        legacy_message(1, 1, None, TEXT_VALUE, ts=TS + 1),                  # offset 1
        gzip_wrapper(2, [b"a", None, NOT_UTF8_VALUE]),                      # offsets 2-4
        encode_batch([(TS + 5, b"k5", b"v5", [("h1", b"x"), ("h2", None)]),
                      (TS + 6, NOT_UTF8_KEY, NOT_UTF8_VALUE, ()),
                      (TS + 7, b"", None, [("\u00e9t\u00e9", b"y")])], base_offset=5,
                     partition_leader_epoch=3),                             # offsets 5-7
        encode_batch([(TS + 8, None, TEXT_VALUE, ()), (TS + 9, b"k9", b"v9", ())],
                     base_offset=8, compression=GZIP, producer_id=7, producer_epoch=1,
                     base_sequence=0, is_transactional=True),               # offsets 8-9
        control.encode_end_txn_marker_batch(control.COMMIT, base_offset=10, timestamp=TS + 10,
                                            producer_id=7, producer_epoch=1,
                                            coordinator_epoch=4),           # offset 10
        encode_batch([(TS + 11, None, b"aborted", ())], base_offset=11, producer_id=9,
                     producer_epoch=0, base_sequence=2147483647,
                     is_transactional=True),                                # offset 11
        control.encode_end_txn_marker_batch(control.ABORT, base_offset=12, timestamp=TS + 12,
                                            producer_id=9, producer_epoch=0,
                                            coordinator_epoch=4),           # offset 12
        # an offset gap (12 → 20), LogAppendTime, lz4
        encode_batch([(TS + 20, b"k20", b"v" * 40, ()), (TS + 21, None, b"w", ())],
                     base_offset=20, compression=LZ4, timestamp_type=1,
                     log_append_time=TS + 99),                              # offsets 20-21
        encode_batch([(TS + 22, b"k22", b"compacted", ())], base_offset=22,
                     delete_horizon_ms=TS + 500),                           # offset 22
        encode_batch([(TS + 23, b"\0\0", b"", ()),                          # key too short
                      control_record(control.COMMIT, b"\0\0"),              # value too short
                      control_record(42, b""),                              # unknown type
                      control_record(control.LEADER_CHANGE, b"\0\0")],
                     base_offset=23, is_control=True),                      # offsets 23-26
    ]
    positions = []
    pos = 0
    for e in entries:
        positions.append(pos)
        pos += len(e)
    torn = encode_batch([(TS + 27, b"k", b"torn", ())], base_offset=27)[:40]
    log = d / f"{NAME}.log"
    log.write_bytes(b"".join(entries) + torn)

    index = OffsetIndex(d / f"{NAME}.index", 0, max_index_size=1024)
    # the last entry points at the batch of offsets 20-21: a mismatch
    for offset, position in [(4, positions[2]), (7, positions[3]), (10, positions[5]),
                             (13, positions[8])]:
        index.append(offset, position)
    index.close()
    # (timestamp, offset): as the log says; a wrong timestamp; one going back; an offset
    # inside a batch (found 7)
    (d / f"{NAME}.timeindex").write_bytes(b"".join(
        struct.pack(">qi", ts, offset) for ts, offset in
        [(TS + 4, 4), (TS + 70, 7), (TS + 9, 9), (TS + 100, 6)]))

    txn = TransactionIndex(d / f"{NAME}.txnindex", 0)
    txn.append(AbortedTxn(producer_id=9, first_offset=11, last_offset=12, last_stable_offset=11))
    txn.close()
    snapshot = d / snapshot_filename(27)
    write_snapshot(snapshot, [
        ProducerStateEntry(7, 1, 1, 9, 1, TS + 10, 4, None),
        ProducerStateEntry(9, 0, 2147483647, -1, 0, TS + 12, 4, None),  # markers only
        ProducerStateEntry(11, 2, 5, 25, 2, TS + 25, -1, 23),           # ongoing transaction
    ])

    # KRaft's control records are flexible messages: a tagged-field count (0) ends each
    kraft = (encode_batch([control_record(control.SNAPSHOT_HEADER,
                                          struct.pack(">hqB", 0, TS, 0))],
                          base_offset=0, is_control=True)
             + encode_batch([(TS, b"meta", b"data", ())], base_offset=1)
             + encode_batch([control_record(control.SNAPSHOT_FOOTER, struct.pack(">hB", 0, 0)),
                             control_record(control.KRAFT_VERSION,
                                            struct.pack(">hhB", 0, 1, 0))],
                            base_offset=2, is_control=True))
    checkpoint = d / "00000000000000000004-0000000002.checkpoint"
    checkpoint.write_bytes(kraft)
    bootstrap = d / "bootstrap.checkpoint"
    bootstrap.write_bytes(kraft)

    empty_index = d / "00000000000000000100.index"
    OffsetIndex(empty_index, 100, max_index_size=1024).close()
    (d / "00000000000000000100.log").write_bytes(b"")
    odd_index = d / "00000000000000000400.index"
    odd_index.write_bytes(struct.pack(">iii", 5, 0, 1))  # 12 bytes; no .log beside it
    bad_log = d / "00000000000000000200.log"
    bad_log.write_bytes(encode_batch([(TS, b"k", b"v", ())], base_offset=200)
                        + struct.pack(">qiib", 201, 60, -1, 7) + b"\0" * 55)  # magic 7
    unknown = d / "leader-epoch-checkpoint"
    unknown.write_text("0\n0\n")
    missing = d / "00000000000000000300.index"
    return {
        "dir": d, "log": str(log), "positions": positions, "torn_at": pos,
        "all": [str(p) for p in (log, d / f"{NAME}.index", d / f"{NAME}.timeindex",
                                 d / f"{NAME}.txnindex", snapshot, checkpoint, bootstrap,
                                 empty_index, odd_index, bad_log, unknown, missing)],
    }


# -- running the dump --------------------------------------------------------------------
def parse(*argv):
    parser = argparse.ArgumentParser(prog="kafkafs")
    dump.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(["dump", *argv])


def run_text_merged(*argv):
    """The text dump with stdout and stderr in one stream: (status, lines in order)."""
    both = io.StringIO()
    status = dump.run(parse(*argv), out=both, err=both)
    return status, both.getvalue().split("\n")[:-1]


def run(*argv):
    """(status, stdout lines, stderr lines), lines split on "\\n" only."""
    out, err = io.StringIO(), io.StringIO()
    status = dump.run(parse(*argv), out=out, err=err)
    return status, out.getvalue().split("\n")[:-1], err.getvalue().split("\n")[:-1]


# -- reading Kafka's text back -----------------------------------------------------------
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime", "NoTimestampType")
CONTROL_DATA = {"SnapshotHeader": "SNAPSHOT_HEADER", "SnapshotFooter": "SNAPSHOT_FOOTER",
                "KRaftVersion": "KRAFT_VERSION", "KRaftVoters": "KRAFT_VOTERS",
                "LeaderChange:": "LEADER_CHANGE"}
FIELD_TYPES = {"batch", "record", "index_entry", "time_index_entry", "producer_snapshot_entry",
               "aborted_txn"}
SENTENCES = {
    "file": [r"Dumping (?P<path>.*)"],
    "log_start": [r"Log starting offset: (?P<offset>\d+)"],
    "kraft_snapshot": [r"(?P<bootstrap>KRaft bootstrap snapshot)",
                       r"Snapshot end offset: (?P<end_offset>\d+), epoch: (?P<epoch>\d+)"],
    "invalid_bytes": [r"Found (?P<bytes>\d+) invalid bytes at the end of (?P<name>.*)"],
    "index_empty": [r"(?P<path>.*) is empty\."],
}
#: fields an object may have beyond what its text line shows
EXTRA = {"invalid_bytes": {"position"}, "error": {"path", "position"},
         "finding": {"kind", "path", "heading"}}


def snake(label: str) -> str:
    return re.sub(r"(?<=[a-z])([A-Z])", r"_\1", label).lower()


def value_of(text: str):
    if text in ("true", "false"):
        return text == "true"
    if text == "OptionalLong.empty":
        return None
    m = re.fullmatch(r"OptionalLong\[(-?\d+)\]", text)
    if m:
        return int(m.group(1))
    if text.startswith("[") and text.endswith("]"):
        return text[1:-1].split(",") if len(text) > 2 else []
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return text


def label_pairs(text: str) -> dict:
    """``label: value label: value ...`` → ``{snake_label: value}``; ``CreateTime: T`` →
    timestamp_type and timestamp, Kafka's control record texts → control fields."""
    fields = {}
    m = re.search(r" (\w+:?) (\{.*\})$", text)
    if m and m.group(1) in CONTROL_DATA:
        fields["control_type"] = CONTROL_DATA[m.group(1)]
        fields["control_label"] = m.group(1)
        fields["control_data"] = json.loads(m.group(2))
        text = text[:m.start()]
    tokens = text.split(" ")
    assert len(tokens) % 2 == 0, text
    for label, value in zip(tokens[::2], tokens[1::2], strict=True):
        assert label.endswith(":"), (label, text)
        label = label[:-1]
        assert snake(label) not in fields, (label, text)
        if label in TIMESTAMP_TYPES:
            fields["timestamp_type"], fields["timestamp"] = label, int(value)
        elif label == "endTxnMarker":
            fields["control_type"] = value
        elif label == "controlType":
            name, type_id = re.fullmatch(r"(\w+)\((-?\d+)\)", value).groups()
            fields["control_type"], fields["control_type_id"] = name, int(type_id)
        else:
            fields[snake(label)] = value_of(value)
    return fields


def record_fields(line: str) -> dict:
    """A record line: metadata pairs (a legacy record's ``crc: N}``), then ``key: K`` and
    `` payload: V`` (none of this file's keys and payloads holds those words)."""
    head, sep, payload = line.partition(" payload: ")
    fields = {"payload": payload} if sep else {}
    if head.startswith("| key: "):
        return {"key": head[len("| key: "):], **fields}
    meta, sep, key = head.partition(" key: ")
    if sep:
        fields = {"key": key, **fields}
    if meta:
        assert meta.startswith("| "), line
        meta = meta[2:]
        if re.search(r" crc: \d+\}$", meta):
            meta = meta[:-1]
        fields = {**label_pairs(meta), **fields}
    return fields


def finding_fields(obj: dict, line: str) -> dict:
    """A finding line: its message (after Kafka's indentation) and the values it shows."""
    indent = "" if obj["kind"] in ("offset_not_found", "index_sanity_check") else "  "
    assert line == indent + obj["message"]
    message = obj["message"]
    fields = {"message": message}
    m = re.fullmatch(r"(-?\d+) is followed by (-?\d+)", message)
    if m:
        return {**fields, "offset": int(m.group(1)), "next_offset": int(m.group(2))}
    m = re.fullmatch(r"(.*) passed sanity check\.", message)
    if m:
        return {**fields, "path": m.group(1), "passed": True}
    for part in message.split(", "):
        label, value = part.split(": ")
        fields[snake(label.replace(" ", "_"))] = int(value)
    return fields


def text_fields(obj: dict, line: str) -> dict:
    """What ``line`` (the text dump's line for ``obj``) shows, as JSON fields."""
    kind = obj["type"]
    if kind == "record":
        return record_fields(line)
    if kind in FIELD_TYPES:
        return label_pairs(line)
    if kind == "finding":
        return finding_fields(obj, line)
    if kind == "error":
        return {"message": line}
    for pattern in SENTENCES[kind]:
        m = re.fullmatch(pattern, line)
        if m:
            fields = {k: (int(v) if v.isdigit() else v) for k, v in m.groupdict().items()
                      if v is not None}
            if kind == "kraft_snapshot":
                fields["bootstrap"] = "bootstrap" in fields
            return fields
    raise AssertionError(f"{kind}: {line!r} matches no pattern")


def same_data(json_value, text: str) -> bool:
    """A key or payload: JSON text as it is, bytes that are not UTF-8 as base64 (the text
    dump prints them with U+FFFD for each invalid byte)."""
    if isinstance(json_value, dict):
        assert set(json_value) == {"base64"}
        data = base64.b64decode(json_value["base64"], validate=True)
        with pytest.raises(UnicodeDecodeError):
            data.decode("utf-8")
        return data.decode("utf-8", "replace") == text
    return json_value == text


def check_correspondence(objects: list[dict], text_lines: list[str]) -> None:
    """Each object against its text line; a finding's heading line before its group."""
    lines = iter(text_lines)
    group = None
    for obj in objects:
        if obj["type"] == "finding" and "heading" in obj:
            if (obj["kind"], obj["path"]) != group:
                group = (obj["kind"], obj["path"])
                assert next(lines) == obj["heading"]
                if obj["kind"] != "offset_not_found":  # Kafka's heading names no file
                    assert obj["path"] in obj["heading"]
        else:
            group = None
        line = next(lines)
        shown = text_fields(obj, line)
        for key, value in shown.items():
            assert key in obj, (key, obj, line)
            if key in ("key", "payload"):
                assert same_data(obj[key], value), (key, obj, line)
            else:
                assert obj[key] == value, (key, obj, line)
                assert type(obj[key]) is type(value), (key, obj, line)
        for key, value in obj.items():
            if key in shown or key == "type" or key in EXTRA.get(obj["type"], ()):
                continue
            if obj["type"] == "record" and (key == "control_type_id"
                                            or key in ("key", "payload") and value is None):
                continue  # an end marker's or decoded value's type id; a null key/payload
            raise AssertionError(f"{key} of {obj} is not in the text line {line!r}")
    assert next(lines, None) is None, "text lines left over"


OPTIONS = [
    (),
    ("--deep-iteration",),
    ("--print-data-log",),
    ("--print-data-log", "--skip-record-metadata"),
    ("--deep-iteration", "--skip-record-metadata"),
    ("--index-sanity-check",),
    ("--verify-index-only",),
    ("--deep-iteration", "--max-bytes", "600"),
]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: " ".join(o) or "default")
def test_json_lines_match_the_text_lines(files, options):
    argv = ("--files", ",".join(files["all"]), *options)
    status, text_lines = run_text_merged(*argv)
    text_status, text_out, text_err = run(*argv)
    json_status, out, err = run(*argv, "--json")
    assert status == text_status == json_status == 1  # the corrupt .log, the missing file
    assert err == text_err  # stderr does not change with --json
    objects = [json.loads(line) for line in out]
    assert all(isinstance(o, dict) and next(iter(o)) == "type" for o in objects)
    check_correspondence(objects, text_lines)
    # the objects that are not errors or stderr findings are stdout's lines, one for one
    assert len([o for o in objects if o["type"] != "error" and "heading" not in o]) \
        == len(text_out)
    types = {o["type"] for o in objects}
    assert {"file", "log_start", "batch", "error", "kraft_snapshot"} <= types
    if "--deep-iteration" in options or "--print-data-log" in options:
        assert "record" in types
    if "--index-sanity-check" in options:
        assert not types & {"index_entry", "time_index_entry"}
        assert [o["path"] for o in objects if o["type"] == "finding"] == files["all"][1:3]
    if "--verify-index-only" in options:
        assert not types & {"index_entry", "time_index_entry"}
        assert {o["kind"] for o in objects if o["type"] == "finding"} == {
            "index_mismatch", "timestamp_mismatch", "timestamp_out_of_order",
            "offset_not_found"}


def objects_of(*argv):
    status, out, _err = run(*argv, "--json")
    return status, [json.loads(line) for line in out]


def test_the_objects_of_a_deep_dump(files):
    status, objects = objects_of("--files", ",".join(files["all"]), "--print-data-log")
    assert status == 1
    pos = files["positions"]
    batches = [o for o in objects if o["type"] == "batch"]
    assert batches[0] == {
        "type": "batch", "offset": 0, "position": 0, "timestamp_type": "NoTimestampType",
        "timestamp": -1, "size": batches[0]["size"], "magic": 0, "compresscodec": "none",
        "crc": batches[0]["crc"], "isvalid": True}
    assert batches[2]["compresscodec"] == "gzip" and batches[2]["offset"] == 4
    v2 = batches[3]
    assert list(v2) == [
        "type", "base_offset", "last_offset", "count", "base_sequence", "last_sequence",
        "producer_id", "producer_epoch", "partition_leader_epoch", "is_transactional",
        "is_control", "delete_horizon_ms", "position", "timestamp_type", "timestamp", "size",
        "magic", "compresscodec", "crc", "isvalid"]
    assert (v2["base_offset"], v2["last_offset"], v2["count"], v2["position"],
            v2["partition_leader_epoch"], v2["delete_horizon_ms"], v2["is_transactional"],
            v2["isvalid"], v2["magic"]) == (5, 7, 3, pos[3], 3, None, False, True, 2)
    assert batches[6]["base_sequence"] == batches[6]["last_sequence"] == 2147483647
    assert batches[8]["timestamp_type"] == "LogAppendTime"
    assert batches[8]["timestamp"] == TS + 99 and batches[8]["compresscodec"] == "lz4"
    assert batches[9]["delete_horizon_ms"] == TS + 500

    second_file = [i for i, o in enumerate(objects) if o["type"] == "file"][1]
    records = {o["offset"]: o for o in objects[:second_file]
               if o["type"] == "record" and "offset" in o}
    assert records[5]["header_keys"] == ["h1", "h2"] and records[7]["header_keys"] == ["été"]
    assert records[5]["key"] == "k5" and records[5]["payload"] == "v5"
    assert records[6]["key"] == {"base64": base64.b64encode(NOT_UTF8_KEY).decode()}
    assert records[6]["payload"] == {"base64": base64.b64encode(NOT_UTF8_VALUE).decode()}
    assert records[4]["payload"] == {"base64": base64.b64encode(NOT_UTF8_VALUE).decode()}
    assert records[7]["key"] == "" and records[7]["payload"] is None
    assert records[7]["value_size"] == -1
    assert records[1]["key"] is None and records[1]["payload"] == TEXT_VALUE.decode()
    assert records[3] == {"type": "record", "offset": 3, "timestamp_type": "CreateTime",
                          "timestamp": TS + 3, "key_size": 2, "value_size": -1,
                          "is_valid": True, "crc": records[3]["crc"], "key": "w1",
                          "payload": None}
    assert records[10] == {"type": "record", "offset": 10, "timestamp_type": "CreateTime",
                           "timestamp": TS + 10, "key_size": 4, "value_size": 6,
                           "sequence": -1, "header_keys": [], "control_type": "COMMIT",
                           "control_type_id": 1, "coordinator_epoch": 4}
    assert records[12]["control_type"] == "ABORT" and records[12]["coordinator_epoch"] == 4
    assert records[11]["sequence"] == 2147483647
    assert [(records[o]["control_type"], records[o]["control_type_id"]) for o in range(23, 27)] \
        == [("UNKNOWN", -1), ("COMMIT", 1), ("UNKNOWN", 42), ("LEADER_CHANGE", 2)]
    assert "coordinator_epoch" not in records[24]
    kraft = [o for o in objects if o.get("control_data")]
    assert [(o["control_type"], o["control_data"]) for o in kraft] == [
        ("SNAPSHOT_HEADER", {"version": 0, "lastContainedLogTimestamp": TS}),
        ("SNAPSHOT_FOOTER", {"version": 0}), ("KRAFT_VERSION", {"version": 0, "kRaftVersion": 1}),
    ] * 2
    assert [o for o in objects if o["type"] == "kraft_snapshot"] == [
        {"type": "kraft_snapshot", "bootstrap": False, "end_offset": 4, "epoch": 2},
        {"type": "kraft_snapshot", "bootstrap": True}]

    assert [o for o in objects if o["type"] == "invalid_bytes"] == [
        {"type": "invalid_bytes", "bytes": 40, "name": f"{NAME}.log",
         "position": files["torn_at"]}]
    assert [o for o in objects if o["type"] == "index_entry"][-1] == {
        "type": "index_entry", "offset": 13, "position": pos[8]}
    assert next(o for o in objects if o["type"] == "time_index_entry") == {
        "type": "time_index_entry", "timestamp": TS + 4, "offset": 4}
    assert [o for o in objects if o["type"] == "aborted_txn"] == [
        {"type": "aborted_txn", "version": 0, "producer_id": 9, "first_offset": 11,
         "last_offset": 12, "last_stable_offset": 11}]
    snapshot = [o for o in objects if o["type"] == "producer_snapshot_entry"]
    assert snapshot[0] == {
        "type": "producer_snapshot_entry", "producer_id": 7, "producer_epoch": 1,
        "coordinator_epoch": 4, "current_txn_first_offset": None, "last_timestamp": TS + 10,
        "first_sequence": 0, "last_sequence": 1, "last_offset": 9, "offset_delta": 1,
        "timestamp": TS + 10}
    assert "first_sequence" not in snapshot[1]
    assert snapshot[2]["current_txn_first_offset"] == 23
    assert {"type": "index_empty", "path": files["all"][7]} in objects

    errors = [o for o in objects if o["type"] == "error"]
    assert [e["path"] for e in errors] == files["all"][8:]
    assert errors[2] == {"type": "error", "path": files["all"][10],
                         "message": f"Ignoring unknown file {files['all'][10]}"}
    assert "record batch has magic 7, expected 2" in errors[1]["message"]  # as readers say

    index = os.path.abspath(files["all"][1])
    timeindex = os.path.abspath(files["all"][2])
    findings = [{k: v for k, v in o.items() if k not in ("type", "heading")}
                for o in objects if o["type"] == "finding"]
    assert findings == [
        {"kind": "index_mismatch", "path": index, "index_offset": 13, "log_offset": 21,
         "message": "Index offset: 13, log offset: 21"},
        {"kind": "timestamp_mismatch", "path": timeindex, "index_timestamp": TS + 70,
         "log_timestamp": TS + 7, "message": f"Index timestamp: {TS + 70}, log timestamp: "
                                             f"{TS + 7}"},
        {"kind": "timestamp_out_of_order", "path": timeindex, "index_timestamp": TS + 9,
         "previously_indexed_timestamp": TS + 70,
         "message": f"Index timestamp: {TS + 9}, Previously indexed timestamp: {TS + 70}"},
        {"kind": "offset_not_found", "path": timeindex, "indexed_offset": 6,
         "found_log_offset": 7, "message": "Indexed offset: 6, found log offset: 7"},
        {"kind": "non_consecutive_offsets", "path": os.path.abspath(files["log"]),
         "offset": 12, "next_offset": 20, "message": "12 is followed by 20"},
    ]


def test_non_utf8_and_non_ascii_text_on_the_json_line(files):
    _status, out, _err = run("--files", files["log"], "--print-data-log", "--json")
    line = next(x for x in out if x.startswith('{"type":"record","offset":6,'))
    assert json.loads(line)["key"] == {"base64": base64.b64encode(NOT_UTF8_KEY).decode()}
    assert "\ufffd" not in "".join(out)  # nothing replaced: text or base64
    line = next(x for x in out if x.startswith('{"type":"record","offset":1,'))
    assert "välue ✓" in line  # not \u-escaped (ensure_ascii=False)
    assert json.loads(line)["payload"] == TEXT_VALUE.decode()
    assert "\n" not in line and "\u2028" in line  # one object per line all the same


def test_through_the_command_line(files):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = main(["dump", "--json", "--files", files["all"][0], "--deep-iteration"])
    assert (status, err.getvalue()) == (0, (f"Non-consecutive offsets in "
                                           f"{os.path.abspath(files['log'])}\n"
                                           "  12 is followed by 20\n"))
    objects = [json.loads(line) for line in out.getvalue().split("\n")[:-1]]
    assert objects[0] == {"type": "file", "path": files["all"][0]}
    assert objects[1] == {"type": "log_start", "offset": 0}
    assert objects[-1]["type"] == "finding"
    assert out.getvalue().startswith('{"type":"file","path":')


def test_an_error_names_its_position(tmp_path):
    log = tmp_path / f"{NAME}.log"
    good = encode_batch([(TS, b"k", b"v", ())], base_offset=0)
    # a legacy gzip wrapper that does not decompress: the error names its position
    bad = legacy_message(1, 1, None, b"not gzip", codec=GZIP)
    log.write_bytes(good + bad)
    status, objects = objects_of("--files", str(log), "--deep-iteration")
    text_status, _out, text_err = run("--files", str(log), "--deep-iteration")
    assert status == text_status == 1
    error = objects[-1]
    assert error["type"] == "error" and error["path"] == str(log)
    assert error["position"] == len(good)
    assert [error["message"]] == text_err


def test_every_text_line_goes_through_an_object(files):
    """No text line is written around the objects: render_text of each object, plus the
    heading lines, is the whole text output."""
    argv = ("--files", ",".join(files["all"]), "--deep-iteration", "--print-data-log")
    _status, text_lines = run_text_merged(*argv)
    _status, out, _err = run(*argv, "--json")
    rendered, group = [], None
    for obj in map(json.loads, out):
        if "heading" in obj and (obj["kind"], obj["path"]) != group:
            group = (obj["kind"], obj["path"])
            rendered.append(obj["heading"])
        for key in ("key", "payload"):  # back to bytes, as the dump holds them
            if isinstance(obj.get(key), dict):
                obj[key] = base64.b64decode(obj[key]["base64"])
            elif isinstance(obj.get(key), str):
                obj[key] = obj[key].encode()
        if "control_data" in obj:  # back to the decoder's text (compact: as Kafka's JSON)
            obj["control_data"] = Decoded(json.dumps(obj["control_data"], separators=(",", ":")))
        rendered.append(dump.render_text(obj))
    assert rendered == text_lines
