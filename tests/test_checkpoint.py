"""Checkpoint files, partition.metadata, meta.properties: Kafka's bytes, round trips,
corrupt files, and atomic replacement."""

from __future__ import annotations

import base64
import os
import re
import time

import pytest

from kafkafs.log import checkpoint as ckpt
from kafkafs.log.errors import CorruptCheckpointError


def write(path, data: bytes):
    with open(path, "wb") as f:
        f.write(data)


def read(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


# -- offset checkpoints ------------------------------------------------------------------
def test_offset_checkpoint_bytes(tmp_path):
    p = str(tmp_path / "recovery-point-offset-checkpoint")
    ckpt.write_offset_checkpoint(p, {("topic-b", 2): 30, ("topic-a", 10): 7,
                                     ("topic-a", 0): 12345678901234})
    assert read(p) == (b"0\n3\n"
                       b"topic-a 0 12345678901234\n"
                       b"topic-a 10 7\n"
                       b"topic-b 2 30\n")
    assert ckpt.read_offset_checkpoint(p) == {("topic-b", 2): 30, ("topic-a", 10): 7,
                                              ("topic-a", 0): 12345678901234}
    assert not os.path.exists(p + ".tmp")


def test_offset_checkpoint_empty_and_missing(tmp_path):
    p = str(tmp_path / "log-start-offset-checkpoint")
    assert ckpt.read_offset_checkpoint(p) == {}  # missing
    ckpt.write_offset_checkpoint(p, {})
    assert read(p) == b"0\n0\n"
    assert ckpt.read_offset_checkpoint(p) == {}
    write(p, b"")
    assert ckpt.read_offset_checkpoint(p) == {}
    write(p, b"0\n")  # only a version line: no entries (CheckpointReadBuffer)
    assert ckpt.read_offset_checkpoint(p) == {}


def test_offset_checkpoint_reads_what_java_accepts(tmp_path):
    p = str(tmp_path / "cleaner-offset-checkpoint")
    write(p, b"0\r\n2\r\n__consumer_offsets  7\t99\nt 0 -1")  # \s+ separators, CRLF, no final EOL
    assert ckpt.read_offset_checkpoint(p) == {("__consumer_offsets", 7): 99, ("t", 0): -1}


@pytest.mark.parametrize("content, line, number", [
    (b"0\n1\nfoo 1\n", "foo 1", 3),
    (b"0\n1\nfoo 1 2 3\n", "foo 1 2 3", 3),
    (b"0\n1\nfoo x 2\n", "foo x 2", 3),
    (b"0\n1\nfoo 1 99999999999999999999\n", "foo 1 99999999999999999999", 3),
    (b"0\n1\n foo 1 2\n", " foo 1 2", 3),  # a leading blank makes an empty first field
    (b"0\n2\nfoo 1 2\n\n", "", 4),
    (b"0\nzz\n", "zz", 2),
    (b"x\n", "x", 1),
])
def test_offset_checkpoint_malformed_line(tmp_path, content, line, number):
    p = str(tmp_path / "replication-offset-checkpoint")
    write(p, content)
    with pytest.raises(CorruptCheckpointError) as exc:
        ckpt.read_offset_checkpoint(p)
    assert str(exc.value) == f"Malformed line in checkpoint file [{os.path.abspath(p)}]: {line}"
    assert exc.value.path == os.path.abspath(p)
    assert exc.value.line_number == number


def test_offset_checkpoint_wrong_count_and_version(tmp_path):
    p = str(tmp_path / "recovery-point-offset-checkpoint")
    write(p, b"0\n3\nt 0 1\nt 1 2\n")
    with pytest.raises(CorruptCheckpointError) as exc:
        ckpt.read_offset_checkpoint(p)
    assert str(exc.value) == (f"Expected [3] entries in checkpoint file [{os.path.abspath(p)}], "
                              "but found only [2]")
    write(p, b"1\n0\n")
    with pytest.raises(CorruptCheckpointError) as exc:
        ckpt.read_offset_checkpoint(p)
    assert str(exc.value) == ("Unrecognised version:1, expected version: 0 in checkpoint file "
                              f"at: {os.path.abspath(p)}")


def test_offset_checkpoint_refuses_unwritable_topic(tmp_path):
    p = str(tmp_path / "ckpt")
    with pytest.raises(ValueError):
        ckpt.write_offset_checkpoint(p, {("a b", 0): 1})
    assert not os.path.exists(p)


# -- leader epochs -----------------------------------------------------------------------
def test_leader_epoch_checkpoint(tmp_path):
    p = str(tmp_path / "leader-epoch-checkpoint")
    assert ckpt.read_leader_epoch_checkpoint(p) == []
    ckpt.write_leader_epoch_checkpoint(p, [(0, 0), (3, 120), (7, 9000000000)])
    assert read(p) == b"0\n3\n0 0\n3 120\n7 9000000000\n"
    assert ckpt.read_leader_epoch_checkpoint(p) == [(0, 0), (3, 120), (7, 9000000000)]
    write(p, b"0\n1\n0 0 0\n")
    with pytest.raises(CorruptCheckpointError, match=re.escape(
            f"Malformed line in checkpoint file [{os.path.abspath(p)}]: 0 0 0")):
        ckpt.read_leader_epoch_checkpoint(p)


# -- atomicity ---------------------------------------------------------------------------
def test_failed_rename_keeps_old_content_and_leaves_no_tmp(tmp_path, monkeypatch):
    p = str(tmp_path / "recovery-point-offset-checkpoint")
    ckpt.write_offset_checkpoint(p, {("t", 0): 5})
    old = read(p)

    def broken_replace(src, dst, **dir_fds):  # names relative to the log dir's descriptor
        assert read(os.path.join(tmp_path, src)) == b"0\n1\nt 0 6\n"  # fully written first
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        ckpt.write_offset_checkpoint(p, {("t", 0): 6})
    assert read(p) == old
    assert os.listdir(tmp_path) == ["recovery-point-offset-checkpoint"]


def test_failed_write_keeps_old_content(tmp_path, monkeypatch):
    p = str(tmp_path / "partition.metadata")
    ckpt.write_partition_metadata(p, "AAAAAAAAAAAAAAAAAAAAAQ")
    old = read(p)
    real_write = os.write

    def short_disk(fd, data):
        real_write(fd, bytes(data)[:3])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", short_disk)
    with pytest.raises(OSError):
        ckpt.write_partition_metadata(p, ckpt.new_topic_id())
    assert read(p) == old
    assert sorted(os.listdir(tmp_path)) == ["partition.metadata"]


def test_atomic_write_fsyncs_file_and_directory(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync

    def spy(fd):
        synced.append(os.path.realpath(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    p = str(tmp_path / "f")
    write(p + ".tmp", b"stale leftover of a crash, longer than the new content")
    ckpt.atomic_write(p, b"new")
    assert read(p) == b"new"
    assert not os.path.exists(p + ".tmp")
    assert synced == [os.path.realpath(p + ".tmp"), os.path.realpath(str(tmp_path))]


# -- partition.metadata and Uuids --------------------------------------------------------
def test_partition_metadata_bytes_have_no_final_newline(tmp_path):
    p = str(tmp_path / "partition.metadata")
    ckpt.write_partition_metadata(p, "owMdavrOSemQ6GyX_vSMkg")
    assert read(p) == b"version: 0\ntopic_id: owMdavrOSemQ6GyX_vSMkg"
    assert ckpt.read_partition_metadata(p) == "owMdavrOSemQ6GyX_vSMkg"
    write(p, b"version: 0\ntopic_id: owMdavrOSemQ6GyX_vSMkg\n")  # a final newline reads too
    assert ckpt.read_partition_metadata(p) == "owMdavrOSemQ6GyX_vSMkg"
    write(p, b"version: 1\ntopic_id:\towMdavrOSemQ6GyX_vSMkg\n")  # newer versions, any blank
    assert ckpt.read_partition_metadata(p) == "owMdavrOSemQ6GyX_vSMkg"


@pytest.mark.parametrize("content, message", [
    (b"", "Malformed line in partition metadata file [{p}]: None"),
    (b"version: 0", "Malformed line in partition metadata file [{p}]: None"),
    (b"version:0\ntopic_id: owMdavrOSemQ6GyX_vSMkg",
     "Malformed line in partition metadata file [{p}]: version:0"),
    (b"version: x\ntopic_id: owMdavrOSemQ6GyX_vSMkg",
     "Malformed line in partition metadata file [{p}]: version: x"),
    (b"version: -1\ntopic_id: owMdavrOSemQ6GyX_vSMkg",
     "Unrecognized version of partition metadata file ({p}): -1"),
    (b"version: 0\ntopic: owMdavrOSemQ6GyX_vSMkg",
     "Malformed line in partition metadata file [{p}]: topic: owMdavrOSemQ6GyX_vSMkg"),
    (b"version: 0\ntopic_id: owMdavrOSemQ6GyX_vSMk",
     "Malformed line in partition metadata file [{p}]: topic_id: owMdavrOSemQ6GyX_vSMk"),
    (b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA",
     "Invalid topic ID in partition metadata file ({p})"),
])
def test_partition_metadata_malformed(tmp_path, content, message):
    p = str(tmp_path / "partition.metadata")
    write(p, content)
    with pytest.raises(CorruptCheckpointError) as exc:
        ckpt.read_partition_metadata(p)
    assert str(exc.value) == message.format(p=os.path.abspath(p))


def test_partition_metadata_missing_and_bad_ids(tmp_path):
    p = str(tmp_path / "partition.metadata")
    with pytest.raises(FileNotFoundError):
        ckpt.read_partition_metadata(p)
    for bad in ("AAAAAAAAAAAAAAAAAAAAAA", "short", "owMdavrOSemQ6GyX_vSMk+"):
        with pytest.raises(ValueError):
            ckpt.write_partition_metadata(p, bad)
    assert not os.path.exists(p)


def test_uuid_strings_match_kafka():
    # Uuid(0, 1) is Kafka's metadata topic id; all-ones checks the last 2-bit group
    assert ckpt.uuid_to_string(bytes(15) + b"\x01") == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert ckpt.uuid_to_string(b"\xff" * 16) == "_____________________w"
    assert ckpt.parse_uuid("_____________________w") == b"\xff" * 16
    assert ckpt.parse_uuid("AAAAAAAAAAAAAAAAAAAAAQ==") == bytes(15) + b"\x01"
    for bad in ("", "AAAA", "AAAAAAAAAAAAAAAAAAAAA!", "AAAAAAAAAAAAAAAAAAAAAAAA"):
        with pytest.raises(ValueError):
            ckpt.parse_uuid(bad)


def test_new_topic_id_is_a_random_v4_uuid():
    ids = {ckpt.new_topic_id() for _ in range(2000)}
    assert len(ids) == 2000
    for text in ids:
        assert re.fullmatch(r"[A-Za-z0-9_-]{22}", text) and not text.startswith("-")
        raw = base64.urlsafe_b64decode(text + "==")
        assert len(raw) == 16
        assert raw[6] >> 4 == 4 and raw[8] >> 6 == 0b10  # version 4, RFC 4122 variant


# -- meta.properties ---------------------------------------------------------------------
def test_read_kafka_meta_properties(tmp_path):
    p = str(tmp_path / "meta.properties")
    write(p, b"#\n#Tue Mar 12 10:00:00 UTC 2024\nnode.id=1\n"
             b"directory.id=owMdavrOSemQ6GyX_vSMkg\nversion=1\n"
             b"cluster.id=MkU3OEVBNTcwNTJENDM2Qk\n")
    assert ckpt.read_properties(p) == {"node.id": "1", "directory.id": "owMdavrOSemQ6GyX_vSMkg",
                                       "version": "1", "cluster.id": "MkU3OEVBNTcwNTJENDM2Qk"}


def test_read_properties_java_syntax(tmp_path):
    p = str(tmp_path / "x.properties")
    write(p, b"! bang comment\n"
             b"   # indented comment\n"
             b"\n"
             b"broker.id : 7\n"
             b"spaced   value with  spaces  \n"
             b"multi = one, \\\n"
             b"        two\n"
             b"esc\\=key = a\\tb\\u00e9\\\\\n"
             b"empty\n"
             b"version=0\n"
             b"version=1\n")
    assert ckpt.read_properties(p) == {"broker.id": "7", "spaced": "value with  spaces  ",
                                       "multi": "one, two", "esc=key": "a\tb\u00e9\\",
                                       "empty": "", "version": "1"}
    write(p, b"bad=\\u12x4\n")
    with pytest.raises(CorruptCheckpointError):
        ckpt.read_properties(p)


def test_write_properties_bytes(tmp_path, monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        p = str(tmp_path / "meta.properties")
        # 2024-03-12T10:00:05Z, a Tuesday
        ckpt.write_properties(p, {"version": "1", "node.id": "3",
                                  "cluster.id": "MkU3OEVBNTcwNTJENDM2Qk",
                                  "directory.id": "owMdavrOSemQ6GyX_vSMkg"}, now=1710237605)
        assert read(p) == (b"#\n#Tue Mar 12 10:00:05 UTC 2024\n"
                           b"cluster.id=MkU3OEVBNTcwNTJENDM2Qk\n"
                           b"directory.id=owMdavrOSemQ6GyX_vSMkg\n"
                           b"node.id=3\nversion=1\n")
        ckpt.write_properties(p, {"broker.id": "0"}, comment="kafkafs", now=0)
        assert read(p) == b"#kafkafs\n#Thu Jan 01 00:00:00 UTC 1970\nbroker.id=0\n"
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_properties_round_trip_escapes(tmp_path):
    p = str(tmp_path / "x.properties")
    props = {"a key": " leading and: = # ! \\ chars", "uni": "é€😀", "tab\t": "line\nbreak",
             "version": "0"}
    ckpt.write_properties(p, props)
    data = read(p)
    assert data.isascii()
    assert b"\\ leading and\\: \\= \\# \\! \\\\ chars" in data
    assert b"uni=\\u00E9\\u20AC\\uD83D\\uDE00" in data
    assert ckpt.read_properties(p) == props
