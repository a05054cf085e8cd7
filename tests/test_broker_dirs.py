"""The rest of a real broker's log dir: KRaft's ``__cluster_metadata-0`` (control batches,
``.checkpoint`` snapshots, ``quorum-state``) reads as a topic, and ``-delete`` / ``-future``
/ ``-stray`` directories are ignored and never touched, by read-only and read-write mounts
alike."""

from __future__ import annotations

import os

import pytest
from conftest import tree_state

from kafkafs.record import control, encode_batch

T0 = 1_700_000_000_000
UUID = "0123456789abcdef0123456789abcdef"


def _segment(values, base=0, is_control=False, key=None):
    return encode_batch([(T0 + i, key, v, ()) for i, v in enumerate(values)],
                        base_offset=base, is_control=is_control)


def _write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def build(logs):
    seg = "00000000000000000000.log"
    _write(os.path.join(logs, "t-0", seg), _segment([b"kept-0", b"kept-1"]))
    for name in (f"t-0.{UUID}-delete", f"t-1.{UUID}-future", f"t-2.{UUID}-stray"):
        _write(os.path.join(logs, name, seg), _segment([b"never-shown"]))
    meta = os.path.join(logs, "__cluster_metadata-0")
    # a KRaft log: a LEADER_CHANGE control batch, then metadata records (binary values)
    leader_change = _segment([b"\x00\x00\x00\x01"], base=0, is_control=True,
                             key=control.encode_control_key(control.LEADER_CHANGE))
    records = _segment([b"\x01\x0cmeta-record-1", b"\x01\x0cmeta-record-2"], base=1)
    _write(os.path.join(meta, seg), leader_change + records)
    _write(os.path.join(meta, "00000000000000000001-0000000001.checkpoint"), b"snapshot")
    _write(os.path.join(meta, "quorum-state"), b'{"leaderId":1,"leaderEpoch":1}')


def _ignored_dirs(logs) -> dict:
    """tree_state of every -delete, -future and -stray directory."""
    return {n: tree_state(os.path.join(logs, n)) for n in os.listdir(logs)
            if n.endswith(("-delete", "-future", "-stray"))}


@pytest.mark.parametrize("read_only", [True, False])
def test_broker_dir_leftovers_and_kraft_metadata(mount_factory, tmp_path, read_only):
    logs = str(tmp_path / "logs")
    build(logs)
    before = _ignored_dirs(logs)
    assert len(before) == 3
    m = mount_factory(extra_args=["--read-only"] if read_only else [])
    assert sorted(os.listdir(m.mnt)) == ["__cluster_metadata", "t"]
    assert sorted(os.listdir(m.path("t"))) == ["0", "config"]  # -future/-stray: no 1, 2
    assert open(m.path("t", "0", "messages"), "rb").read() == b"kept-0\nkept-1\n"
    meta = m.path("__cluster_metadata", "0")
    # the control record is left out; metadata records read as (binary) values
    assert open(os.path.join(meta, "messages"), "rb").read() == \
        b"\x01\x0cmeta-record-1\n\x01\x0cmeta-record-2\n"
    assert sorted(os.listdir(os.path.join(meta, "offset"))) == ["1", "2"]
    jsonl = open(os.path.join(meta, "records.jsonl"), "rb").read()
    assert b'"control":"LEADER_CHANGE"' in jsonl
    assert "quorum-state" in os.listdir(os.path.join(meta, "segments"))
    assert m.umount() == 0
    assert _ignored_dirs(logs) == before  # never touched: not a byte, a name or an mtime
