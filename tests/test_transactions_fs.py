"""Transactions through the mount and the consumer: control records never appear as
messages, aborted transactions are hidden under read_committed (the default) and shown
under read_uncommitted, and nothing past the last stable offset is shown as committed."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import time

import pytest
from conftest import kafkafs

from kafkafs.log.log import now_ms
from kafkafs.log.producer_state import read_snapshot
from kafkafs.record import control, encode_batch

T0 = 1_700_000_000_000


def _txn_batch(values, pid, epoch=0, seq=0, ts=T0):
    return bytearray(encode_batch([(ts + i, None, v, ()) for i, v in enumerate(values)],
                                  producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                  is_transactional=True))


def _marker(kind, pid, epoch=0):
    return bytearray(control.encode_end_txn_marker_batch(
        kind, base_offset=0, timestamp=T0 + 99, producer_id=pid, producer_epoch=epoch,
        coordinator_epoch=7))


def build(manager_factory, ongoing=True):
    """A partition holding, in offset order (offsets in brackets):
    plain a0 [0]; txn P1 c1 c2 [1-2]; txn P2 x1 [3]; COMMIT P1 [4]; plain a1 [5];
    txn P2 x2 [6]; ABORT P2 [7]; plain a2 [8]; and, when ``ongoing``, txn P3 o1 [9] with no
    marker yet (the last stable offset is then 9)."""
    m = manager_factory(log_segment_bytes=300)  # small segments: markers in other segments
    m.create_topic("tx", 1)
    lg = m.get_log("tx", 0)
    lg.append([(T0, None, b"a0", ())])
    lg.append_encoded(_txn_batch([b"c1", b"c2"], pid=1))
    lg.append_encoded(_txn_batch([b"x1"], pid=2))
    lg.append_encoded(_marker(control.COMMIT, pid=1))
    lg.append([(T0, None, b"a1", ())])
    lg.append_encoded(_txn_batch([b"x2"], pid=2, seq=1))
    lg.append_encoded(_marker(control.ABORT, pid=2))
    lg.append([(T0, None, b"a2", ())])
    if ongoing:
        lg.append_encoded(_txn_batch([b"o1"], pid=3, ts=T0 + 500))
    assert len(lg.segments()) > 2
    m.shutdown()


COMMITTED = [b"a0", b"c1", b"c2", b"a1", b"a2"]
EVERYTHING = [b"a0", b"c1", b"c2", b"x1", b"a1", b"x2", b"a2", b"o1"]


def test_messages_and_offsets_under_read_committed(manager_factory, mount_factory):
    build(manager_factory)
    m = mount_factory()
    part = m.path("tx", "0")
    assert open(os.path.join(part, "messages"), "rb").read().splitlines() == COMMITTED
    names = sorted(int(n) for n in os.listdir(os.path.join(part, "offset")))
    assert names == [0, 1, 2, 5, 8]  # no markers, no aborted x1/x2, nothing past the LSO
    for gone in (3, 4, 6, 7, 9):
        with pytest.raises(OSError) as e:
            open(os.path.join(part, "offset", str(gone)), "rb")
        assert e.value.errno == errno.ENOENT
    assert open(os.path.join(part, "offset", "2"), "rb").read() == b"c2"
    lines = [json.loads(x) for x in open(os.path.join(part, "records.jsonl"), "rb")]
    assert [x.get("value") for x in lines if "control" not in x] == \
        [v.decode() for v in COMMITTED]
    markers = [(x["offset"], x["control"], x["coordinator_epoch"]) for x in lines
               if "control" in x]
    assert markers == [(4, "COMMIT", 7), (7, "ABORT", 7)]
    assert m.umount() == 0


def test_read_uncommitted_mount_option_shows_everything(manager_factory, mount_factory):
    build(manager_factory)
    m = mount_factory(options=["isolation.level=read_uncommitted"])
    part = m.path("tx", "0")
    assert open(os.path.join(part, "messages"), "rb").read().splitlines() == EVERYTHING
    names = sorted(int(n) for n in os.listdir(os.path.join(part, "offset")))
    assert names == [0, 1, 2, 3, 5, 6, 8, 9]  # control records hold no visible offset
    assert open(os.path.join(part, "offset", "6"), "rb").read() == b"x2"
    assert m.umount() == 0


def test_bad_isolation_level_is_refused(manager_factory, tmp_path):
    build(manager_factory)
    os.makedirs(tmp_path / "mnt2")
    r = kafkafs("mount", str(tmp_path / "mnt2"), "--log-dirs", str(tmp_path / "logs"),
                "-o", "isolation.level=serializable", check=False)
    assert r.returncode != 0
    assert b"isolation.level must be one of read_uncommitted, read_committed" in r.stderr


def test_consume_isolation_levels(manager_factory, tmp_path):
    build(manager_factory)
    args = ["consume", "--log-dirs", str(tmp_path / "logs"), "--topic", "tx",
            "--from-beginning", "--timeout-ms", "300", "--property", "print.offset=true"]
    out = kafkafs(*args).stdout.splitlines()
    assert out == [b"Offset:0\ta0", b"Offset:1\tc1", b"Offset:2\tc2", b"Offset:5\ta1",
                   b"Offset:8\ta2"]
    out = kafkafs(*args, "--isolation-level", "read_uncommitted").stdout.splitlines()
    assert [x.split(b"\t")[1] for x in out] == EVERYTHING


def test_a_decided_transaction_appears_at_the_end(manager_factory, mount_factory, tmp_path):
    """Once the open transaction commits, the last stable offset moves to the log end and
    its records (and everything after them) appear."""
    build(manager_factory)
    m = mount_factory()
    msg = m.path("tx", "0", "messages")
    assert open(msg, "rb").read().splitlines() == COMMITTED
    assert m.umount() == 0
    mgr = manager_factory()
    lg = mgr.get_log("tx", 0)
    assert lg.last_stable_offset == 9
    lg.append_encoded(_marker(control.COMMIT, pid=3))
    assert lg.last_stable_offset == lg.log_end_offset == 11
    mgr.shutdown()
    m.start()
    assert open(msg, "rb").read().splitlines() == COMMITTED + [b"o1"]
    assert m.umount() == 0


def test_by_time_stops_at_the_last_stable_offset(manager_factory, mount_factory):
    build(manager_factory)
    m = mount_factory()
    bytime = m.path("tx", "0", "by-time")
    assert os.readlink(os.path.join(bytime, str(T0))) == "../offset/0"
    # the first record at T0+400 or later is o1 [9], in the open transaction: past the
    # last stable offset, so not found under read_committed (Kafka's ListOffsets)
    with pytest.raises(OSError) as e:
        os.readlink(os.path.join(bytime, str(T0 + 400)))
    assert e.value.errno == errno.ENOENT
    assert m.umount() == 0
    m = mount_factory(options=["isolation.level=read_uncommitted"])
    assert os.readlink(os.path.join(bytime, str(T0 + 400))) == "../offset/9"
    assert m.umount() == 0


def test_cat_reads_past_a_segment_of_aborted_records(manager_factory, mount_factory):
    """A segment holding only an aborted transaction and its marker shows as nothing; the
    ``cat`` reading across it (one request spans it) still gets every line after it."""
    m = manager_factory()
    m.create_topic("ab", 1)
    lg = m.get_log("ab", 0)
    lg.append([(T0, None, b"before %d" % i, ()) for i in range(100)])
    lg.roll()
    lg.append_encoded(_txn_batch([b"gone %d" % i for i in range(100)], pid=5))
    lg.append_encoded(_marker(control.ABORT, pid=5))
    lg.roll()
    lg.append([(T0, None, b"after %d" % i, ()) for i in range(100)])
    m.shutdown()
    mnt = mount_factory()
    out = subprocess.run(["cat", mnt.path("ab", "0", "messages")], capture_output=True,
                         check=True).stdout
    assert out.splitlines() == [b"before %d" % i for i in range(100)] + \
        [b"after %d" % i for i in range(100)]
    assert mnt.umount() == 0


@pytest.mark.parametrize("expiration_ms, kept", [("1", False), ("86400000", True)])
def test_the_daemon_expires_idle_producer_ids(manager_factory, mount_factory, expiration_ms,
                                              kept):
    """producer.id.expiration.ms, checked every producer.id.expiration.check.interval.ms:
    an idle idempotent producer is left out of the next snapshot the daemon takes (at
    unmount, the log having grown); with the default (a day) it stays."""
    m = manager_factory()
    m.create_topic("idem", 1)
    lg = m.get_log("idem", 0)
    lg.append_encoded(bytearray(encode_batch([(now_ms(), None, b"once", ())], producer_id=77,
                                             producer_epoch=0, base_sequence=0)))
    assert 77 in lg.producer_state.producers
    part = lg.dir
    m.shutdown()
    mnt = mount_factory(extra_args=[
        "--override", f"producer.id.expiration.ms={expiration_ms}",
        "--override", "producer.id.expiration.check.interval.ms=100"])
    time.sleep(0.5)  # a few checks
    subprocess.run(f"echo later >> {mnt.path('idem', '0', 'append')}", shell=True, check=True)
    assert open(mnt.path("idem", "0", "messages"), "rb").read() == b"once\nlater\n"
    assert mnt.umount() == 0
    newest = max(n for n in os.listdir(part) if n.endswith(".snapshot"))
    assert newest == "00000000000000000002.snapshot"
    pids = [e.producer_id for e in read_snapshot(os.path.join(part, newest))]
    assert (77 in pids) is kept
