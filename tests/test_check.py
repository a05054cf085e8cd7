"""``kafkafs check``: each kind of damage made by hand is reported with its file and byte
position without a byte changing; ``--repair`` fixes what Kafka's recovery fixes, a second
check is clean, and every record before the damage still reads."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import time

import pytest
from conftest import ROOT, tree_state

from kafkafs.cli.main import main
from kafkafs.log.config import BrokerConfig, LogConfig
from kafkafs.log.loader import LoadAction, load_log, plan_load
from kafkafs.log.manager import LogManager
from kafkafs.record.batch import iter_batches

SEGMENT_BYTES = 1200
INTERVAL = 100


def make_log_dir(tmp_path, partitions=1, batches=40, name="logs"):
    """A log dir written by a LogManager and shut down cleanly: topic ``t``, several segments
    of several batches, an index entry about every batch."""
    d = str(tmp_path / name)
    cfg = BrokerConfig.from_properties({
        "log.segment.bytes": str(SEGMENT_BYTES),
        "log.index.interval.bytes": str(INTERVAL)}).with_log_dirs([d])
    m = LogManager(cfg)
    m.startup()
    m.create_topic("t", partitions)
    for p in range(partitions):
        lg = m.get_log("t", p)
        for i in range(batches):
            lg.append([(1_000_000 + i * 10 + j, b"k%d" % i, b"value-%03d-%d" % (i, j), ())
                       for j in range(3)])
    assert m.shutdown()
    return d


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def part(d, p=0):
    return os.path.join(d, f"t-{p}")


def seg_logs(pdir):
    return sorted(os.path.join(pdir, n) for n in os.listdir(pdir) if n.endswith(".log"))


def read_records(pdir):
    """Every record as (offset, key, value), read through the log engine (read-only)."""
    lg = load_log(pdir, "t", 0, LogConfig(), writable=False)
    try:
        return [(r.offset, r.key, r.value) for r in lg.records()]
    finally:
        lg.close()




# the topic defaults the log dirs were written with: a rebuilt index is then byte-identical
CONFIG = ["--override", f"log.segment.bytes={SEGMENT_BYTES}",
          "--override", f"log.index.interval.bytes={INTERVAL}"]


def check(capsys, d, *args):
    """Run ``kafkafs check --log-dirs D ARGS`` in-process: (exit status, stdout, stderr)."""
    capsys.readouterr()
    rc = main(["check", *CONFIG, "--log-dirs", d, *args])
    out, err = capsys.readouterr()
    return rc, out, err


def check_json(capsys, d, *args):
    rc, out, _err = check(capsys, d, *args, "--json")
    return rc, json.loads(out)


def findings(doc, kind=None):
    out = [f for d in doc["log_dirs"] for f in d["findings"]]
    return [f for f in out if kind is None or f["kind"] == kind]


def assert_reported_read_only(capsys, d, kind, **expect):
    """Check ``d``: exit 1, a finding of ``kind`` with the expected fields, no byte or mtime
    changed. Returns the matching findings."""
    before = tree_state(d)
    rc, doc = check_json(capsys, d)
    assert tree_state(d) == before
    assert rc == 1
    hits = [f for f in findings(doc, kind)
            if all(f[k] == v for k, v in expect.items())]
    assert hits, (kind, expect, findings(doc))
    return hits


def repair_and_recheck(capsys, d):
    rc, out, err = check(capsys, d, "--repair")
    assert rc == 0, out + err
    assert "did: " in out
    rc, out, err = check(capsys, d)
    assert rc == 0, out + err
    assert out.rstrip().endswith("clean")
    return out


# -- a clean log dir ------------------------------------------------------------------------
def test_clean_log_dir_exits_0_and_changes_nothing(tmp_path, capsys):
    d = make_log_dir(tmp_path, partitions=2)
    before = tree_state(d)
    rc, out, err = check(capsys, d)
    assert rc == 0 and err == ""
    assert out == f"{d}: 2 partition(s), clean\n"
    assert tree_state(d) == before
    rc, out, _ = check(capsys, d, "--repair")
    assert rc == 0 and "nothing to repair" in out
    assert tree_state(d) == before


def test_usage_errors_exit_2(tmp_path, capsys):
    rc, _out, err = check(capsys, str(tmp_path / "nope"))
    assert rc == 2 and "is not a directory" in err
    d = make_log_dir(tmp_path)
    rc, _out, err = check(capsys, f"{d},{d}")
    assert rc == 2 and "Duplicate log directory" in err
    with pytest.raises(SystemExit) as exc:
        main(["check", "--no-such-flag"])
    assert exc.value.code == 2


# -- the .log ----------------------------------------------------------------------------------
def test_garbage_appended_to_the_active_segment(tmp_path, capsys):
    d = make_log_dir(tmp_path)
    p = part(d)
    good = read_records(p)
    active = seg_logs(p)[-1]
    size = os.path.getsize(active)
    with open(active, "ab") as f:
        f.write(b"\x00" * 8 + b"\x00\x00\x00\x30" + b"garbage!" * 4)
    hits = assert_reported_read_only(capsys, d, "truncate", path=active)
    assert hits[0]["position"] == size and hits[0]["nbytes"] == 44
    assert hits[0]["at_startup"] is True  # a clean startup checks the active tail too
    _rc, out, _ = check(capsys, d)
    assert f"t-0/{os.path.basename(active)}: position {size}:" in out
    repair_and_recheck(capsys, d)
    assert os.path.getsize(active) == size
    assert read_records(p) == good


def test_flipped_crc_byte_in_a_middle_segment(tmp_path, capsys):
    d = make_log_dir(tmp_path)
    p = part(d)
    good = read_records(p)
    logs = seg_logs(p)
    assert len(logs) >= 4
    victim = logs[1]
    data = bytearray(read_bytes(victim))
    # the third batch of the segment: its body no longer matches its CRC
    position = [b.position for b in iter_batches(bytes(data))][2]
    damaged_offset = struct.unpack_from(">q", data, position)[0]
    data[position + 40] ^= 0xFF
    with open(victim, "wb") as f:
        f.write(data)
    hits = assert_reported_read_only(capsys, d, "truncate", path=victim)
    f = hits[0]
    assert f["position"] == position and f["nbytes"] == len(data) - position
    assert "record batch is corrupt (stored crc = " in f["message"]
    assert f["at_startup"] is False  # below the recovery point after a clean shutdown
    doc = check_json(capsys, d)[1]
    deleted = {x["path"] for x in findings(doc, "delete-segment")}
    assert deleted == set(logs[2:])
    repair_and_recheck(capsys, d)
    assert seg_logs(p) == logs[:2]
    assert os.path.getsize(victim) == position
    assert read_records(p) == [r for r in good if r[0] < damaged_offset]


def test_offsets_that_go_back_are_reported_and_left_alone(tmp_path, capsys):
    d = make_log_dir(tmp_path, batches=3)
    p = part(d)
    (log_path,) = seg_logs(p)
    data = read_bytes(log_path)
    first_batch = data[:12 + struct.unpack_from(">i", data, 8)[0]]
    with open(log_path, "ab") as f:
        f.write(first_batch)  # a valid batch (the CRC skips the offset) with offset 0 again
    # the log end offset is where the last batch ends (3): readers -- and so check -- name
    # the first batch reaching it, the second, not the copy whose offsets go back (which
    # batch lies cannot be told; every tool names the same one, see test_damage)
    second = [b.position for b in iter_batches(data)][1]
    hits = assert_reported_read_only(capsys, d, "offsets-out-of-order", path=log_path)
    assert len(hits) == 1 and hits[0]["repairable"] is False
    assert hits[0]["position"] == second
    assert hits[0]["message"].endswith(f"at byte offset {second}: batch offsets [3, 5] reach "
                                       "the log end offset 3, where the segment's last batch "
                                       "ends")
    before = tree_state(p)
    rc, out, _ = check(capsys, d, "--repair")
    assert rc == 1 and "problem (not repairable)" in out
    assert tree_state(p) == before


# -- a partition dir without a .log ----------------------------------------------------------
def _no_log_partition(d: str, how: str) -> str:
    """A partition dir ``u-0`` in ``d`` with no ``.log``: empty, or whose only ``.log`` is a
    planted symbolic link (to a file outside the log dir, which must stay untouched)."""
    pdir = os.path.join(d, "u-0")
    os.mkdir(pdir)
    if how == "link":
        target = os.path.join(os.path.dirname(d), "outside")
        with open(target, "wb") as f:
            f.write(b"not a segment\n")
        os.symlink(target, os.path.join(pdir, f"{0:020d}.log"))
    return pdir


@pytest.mark.parametrize("how", ["empty", "link"])
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_partition_dir_without_a_log_is_a_finding_not_a_traceback(tmp_path, how, fmt):
    """``mkdir LOGDIR/u-0; kafkafs check LOGDIR`` (and a .log that is a planted link) crashed
    with ``TypeError: expected str, bytes or os.PathLike object, not Dir``, with and without
    --repair. It is the "no .log" finding of docs/cli.md; --repair creates the empty segment
    (replacing the link, never writing through it) and the log dir then checks clean."""
    d = make_log_dir(tmp_path)
    pdir = _no_log_partition(d, how)
    json_flag = ["--json"] if fmt == "json" else []
    before = tree_state(d)
    r = subprocess.run([sys.executable, "-m", "kafkafs", "check", *CONFIG, "--log-dirs", d,
                        *json_flag], capture_output=True, cwd=ROOT, timeout=60, check=False)
    err = r.stderr.decode()
    assert "Traceback" not in err and r.returncode == 1, err
    assert tree_state(d) == before
    segment = os.path.join(pdir, f"{0:020d}.log")
    if fmt == "json":
        doc = json.loads(r.stdout)
        (hit,) = findings(doc, "no-segments")
        assert hit["path"] == segment and hit["repairable"] is True
    else:
        assert f"problem: u-0/{0:020d}.log: No log segment in {pdir} => create an empty " \
               "segment at the log start offset 0" in r.stdout.decode()
    r = subprocess.run([sys.executable, "-m", "kafkafs", "check", *CONFIG, "--log-dirs", d,
                        "--repair", *json_flag], capture_output=True, cwd=ROOT, timeout=60,
                       check=False)
    err = r.stderr.decode()
    assert "Traceback" not in err and r.returncode == 0, r.stdout.decode() + err
    if fmt == "json":
        doc = json.loads(r.stdout)
        assert doc["problems_after_repair"] == 0
        assert any(a["kind"] == "no-segments" for a in doc["log_dirs"][0]["done"])
    else:
        assert f"did: u-0/{0:020d}.log: create an empty segment" in r.stdout.decode()
    assert not os.path.islink(segment) and os.path.getsize(segment) == 0
    if how == "link":
        assert read_bytes(os.path.join(tmp_path, "outside")) == b"not a segment\n"
    r = subprocess.run([sys.executable, "-m", "kafkafs", "check", *CONFIG, "--log-dirs", d],
                       capture_output=True, cwd=ROOT, timeout=60, check=False)
    assert r.returncode == 0 and r.stdout.decode().rstrip().endswith("clean"), r.stdout


# -- the indexes -------------------------------------------------------------------------------
def test_truncated_index_is_rebuilt(tmp_path, capsys):
    d = make_log_dir(tmp_path)
    p = part(d)
    good = read_records(p)
    log_path = seg_logs(p)[1]
    index = log_path[:-4] + ".index"
    data = read_bytes(index)
    assert len(data) >= 16
    with open(index, "wb") as f:
        f.write(data[:-3])
    hits = assert_reported_read_only(capsys, d, "corrupt-index", path=log_path)
    assert (f"Index file {index} is corrupt, found {len(data) - 3} bytes which is neither "
            "positive nor a multiple of 8") in hits[0]["message"]
    repair_and_recheck(capsys, d)
    assert read_bytes(index) == data
    assert read_records(p) == good


def test_index_entry_out_of_order_is_rebuilt(tmp_path, capsys):
    d = make_log_dir(tmp_path)
    p = part(d)
    good = read_records(p)
    log_path = seg_logs(p)[0]
    index = log_path[:-4] + ".index"
    data = read_bytes(index)
    assert len(data) >= 24
    with open(index, "wb") as f:
        f.write(data[8:16] + data[:8] + data[16:])
    hits = assert_reported_read_only(capsys, d, "corrupt-index", path=log_path)
    assert f"Corrupt index found, index file ({index}) has entry 1 with offset" in \
        hits[0]["message"]
    repair_and_recheck(capsys, d)
    assert read_bytes(index) == data
    assert read_records(p) == good


def test_last_offset_below_base_offset_in_kafkas_words(tmp_path, capsys):
    d = make_log_dir(tmp_path)
    p = part(d)
    log_path = seg_logs(p)[-1]
    index = log_path[:-4] + ".index"
    data = read_bytes(index)
    assert len(data) >= 8
    with open(index, "wb") as f:
        f.write(data[:-8] + struct.pack(">ii", -5, 0))
    base = int(os.path.basename(log_path)[:20])
    hits = assert_reported_read_only(capsys, d, "corrupt-index", path=log_path)
    assert (f"Corrupt index found, index file {index} has non-zero size but the last offset "
            f"is {base - 5} which is less than the base offset {base}") in hits[0]["message"]
    assert hits[0]["at_startup"] is True  # the loader sanity-checks the active segment
    repair_and_recheck(capsys, d)


def test_a_bad_index_a_crash_recovery_rebuilds_is_fixed_at_startup(tmp_path, capsys):
    """After an unclean shutdown the loader recovers the active segment without checking its
    indexes first (KAFKA-7283): a bad index there is still a startup's business, not
    "found by check only"."""
    d = make_log_dir(tmp_path)
    os.unlink(os.path.join(d, ".kafka_cleanshutdown"))
    log_path = seg_logs(part(d))[-1]
    index = log_path[:-4] + ".index"
    data = read_bytes(index)
    with open(index, "wb") as f:
        f.write(data[:-8] + struct.pack(">ii", -5, 0))
    hits = assert_reported_read_only(capsys, d, "corrupt-index", path=log_path)
    assert hits[0]["at_startup"] is True
    _rc, out, _err = check(capsys, d)
    assert "found by check only" not in out, out
    repair_and_recheck(capsys, d)
    assert read_bytes(index) == data


def test_missing_timeindex_and_orphan_index(tmp_path, capsys):
    d = make_log_dir(tmp_path)
    p = part(d)
    good = read_records(p)
    log_path = seg_logs(p)[1]
    timeindex = log_path[:-4] + ".timeindex"
    kept = read_bytes(timeindex)
    os.unlink(timeindex)
    orphan = os.path.join(p, "00000000000000099999.index")
    with open(orphan, "wb") as f:
        f.write(b"\0" * 8)
    assert_reported_read_only(capsys, d, "missing-index", path=log_path)
    hits = assert_reported_read_only(capsys, d, "orphan-index", path=orphan)
    assert "Found an orphaned index file" in hits[0]["message"]
    repair_and_recheck(capsys, d)
    assert not os.path.exists(orphan)
    assert read_bytes(timeindex) == kept
    assert read_records(p) == good


# -- leftovers ---------------------------------------------------------------------------------
def test_leftover_swap_cleaned_and_deleted_files(tmp_path, capsys):
    d = make_log_dir(tmp_path)
    p = part(d)
    good = read_records(p)
    logs = seg_logs(p)
    # a completed clean of the second segment whose .swap was not renamed yet
    shutil.copyfile(logs[1], logs[1] + ".swap")
    shutil.copyfile(logs[1][:-4] + ".index", logs[1][:-4] + ".index.swap")
    shutil.copyfile(logs[1][:-4] + ".timeindex", logs[1][:-4] + ".timeindex.swap")
    # an interrupted clean: a .cleaned file, and a .swap at its offset that must go
    cleaned = logs[3] + ".cleaned"
    invalid_swap = logs[3][:-4] + ".index.swap"
    shutil.copyfile(logs[3], cleaned)
    shutil.copyfile(logs[3][:-4] + ".index", invalid_swap)
    deleted = logs[0] + ".deleted"
    shutil.copyfile(logs[0], deleted)
    before = tree_state(d)
    rc, doc = check_json(capsys, d)
    assert rc == 1 and tree_state(d) == before
    kinds = {(f["kind"], f["path"]) for f in findings(doc)}
    assert ("stray-file", deleted) in kinds and ("stray-file", cleaned) in kinds
    assert ("invalid-swap", invalid_swap) in kinds
    assert ("swapped-out", logs[1]) in kinds and ("swap", logs[1] + ".swap") in kinds
    for f in findings(doc, "invalid-swap"):
        assert "minCleanedFileOffset: " in f["message"]
    repair_and_recheck(capsys, d)
    names = os.listdir(p)
    assert not [n for n in names if n.endswith((".swap", ".cleaned", ".deleted"))]
    assert read_records(p) == good


def test_unfinished_snapshot_write_is_a_stray_file(tmp_path, capsys):
    """A daemon killed inside write_snapshot leaves ``<offset>.snapshot.tmp`` (it writes,
    fsyncs, then renames): reported, removed by --repair (and by a writable load), and
    nothing else changes."""
    d = make_log_dir(tmp_path)
    p = part(d)
    good = read_records(p)
    tmp = os.path.join(p, "00000000000000000007.snapshot.tmp")
    with open(tmp, "wb") as f:
        f.write(b"\x00\x01half a snapshot")
    before = tree_state(d)
    rc, doc = check_json(capsys, d)
    assert rc == 1 and tree_state(d) == before
    assert ("stray-file", tmp) in {(f["kind"], f["path"]) for f in findings(doc)}
    repair_and_recheck(capsys, d)
    assert not os.path.exists(tmp)
    assert read_records(p) == good


# -- checkpoints, marker, meta.properties, foreign dirs ------------------------------------
def test_garbage_checkpoints(tmp_path, capsys):
    d = make_log_dir(tmp_path)
    good = read_records(part(d))
    for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                 "replication-offset-checkpoint"):
        with open(os.path.join(d, name), "w") as f:
            f.write("0\n3\nt 0 x\n")
    before = tree_state(d)
    rc, doc = check_json(capsys, d)
    assert rc == 1 and tree_state(d) == before
    paths = {f["path"] for f in findings(doc, "checkpoint")}
    assert paths == {os.path.join(d, n) for n in (
        "recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
        "replication-offset-checkpoint")}
    for f in findings(doc, "checkpoint"):
        assert "Malformed line in checkpoint file" in f["message"]
    repair_and_recheck(capsys, d)
    leo = good[-1][0] + 1
    assert read_bytes(os.path.join(d, "recovery-point-offset-checkpoint")).decode() == \
        f"0\n1\nt 0 {leo}\n"
    assert read_bytes(os.path.join(d, "replication-offset-checkpoint")).decode() == \
        f"0\n1\nt 0 {leo}\n"
    assert read_records(part(d)) == good


def test_missing_clean_shutdown_marker_means_recovery(tmp_path, capsys):
    d = make_log_dir(tmp_path)
    os.unlink(os.path.join(d, ".kafka_cleanshutdown"))
    hits = assert_reported_read_only(capsys, d, "clean-shutdown")
    assert hits[0]["severity"] == "problem"
    _rc, doc = check_json(capsys, d)
    notes = findings(doc, "revalidate")
    assert notes and notes[0]["severity"] == "note"
    repair_and_recheck(capsys, d)
    assert os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))


def test_meta_properties_problems(tmp_path, capsys):
    d = make_log_dir(tmp_path)
    meta = os.path.join(d, "meta.properties")
    os.unlink(meta)
    hits = assert_reported_read_only(capsys, d, "meta-properties", path=meta)
    assert hits[0]["repairable"] is True
    repair_and_recheck(capsys, d)
    text = read_bytes(meta).decode()
    assert "version=1" in text and "cluster.id=" in text and "directory.id=" in text
    with open(meta, "w") as f:
        f.write(text.replace("version=1", "version=7"))
    hits = assert_reported_read_only(capsys, d, "meta-properties", path=meta)
    assert hits[0]["message"] == "Unknown meta.properties version number 7"
    assert hits[0]["repairable"] is False
    before = tree_state(d)
    rc, _out, _err = check(capsys, d, "--repair")
    assert rc == 1 and tree_state(d) == before


def test_foreign_and_broker_dirs(tmp_path, capsys):
    d = make_log_dir(tmp_path)
    os.mkdir(os.path.join(d, "lost+found"))
    doomed = os.path.join(d, "t-0.0123456789abcdef0123456789abcdef-delete")
    os.mkdir(doomed)
    with open(os.path.join(doomed, "00000000000000000000.log"), "wb") as f:
        f.write(b"junk")
    hits = assert_reported_read_only(capsys, d, "foreign-dir",
                                     path=os.path.join(d, "lost+found"))
    assert "'lost+found' is not in the form of topic-partition" in hits[0]["message"]
    rc, doc = check_json(capsys, d)
    (ignored,) = findings(doc, "ignored-dir")
    assert ignored["path"] == doomed and ignored["severity"] == "note"
    # --repair never touches either; the foreign dir keeps the exit status at 1
    os.unlink(os.path.join(d, ".kafka_cleanshutdown"))
    before = tree_state(doomed)
    rc, _out, _ = check(capsys, d, "--repair")
    assert rc == 1
    assert tree_state(doomed) == before and os.path.isdir(os.path.join(d, "lost+found"))
    assert os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))


# -- the lock ----------------------------------------------------------------------------------
def test_repair_refuses_while_another_process_holds_the_lock(tmp_path):
    d = make_log_dir(tmp_path)
    log_path = seg_logs(part(d))[-1]
    with open(log_path, "ab") as f:
        f.write(b"torn")
    holder = subprocess.Popen(
        [sys.executable, "-c",
         ("import fcntl, os, sys, time\n"
          f"fd = os.open({os.path.join(d, '.lock')!r}, os.O_RDWR | os.O_CREAT)\n"
          "fcntl.flock(fd, fcntl.LOCK_EX); fcntl.lockf(fd, fcntl.LOCK_EX)\n"
          "print('locked', flush=True); time.sleep(60)\n")],
        stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline() == b"locked\n"
        before = tree_state(d)
        exe = os.path.join(os.path.dirname(sys.executable), "kafkafs")
        if not os.path.exists(exe):
            exe = shutil.which("kafkafs")
        r = subprocess.run([exe, "check", "--repair", "--log-dirs", d], capture_output=True,
                           cwd=ROOT, timeout=60, check=False)
        assert r.returncode == 1
        err = r.stderr.decode()
        assert "Failed to acquire lock on file .lock" in err
        assert f"held by pid {holder.pid}" in err
        assert tree_state(d) == before
        # without --repair it runs beside the holder, says so, and changes nothing
        r = subprocess.run([exe, "check", "--log-dirs", d], capture_output=True, cwd=ROOT,
                           timeout=60, check=False)
        assert r.returncode == 1
        assert f"pid {holder.pid}" in r.stdout.decode()
        assert tree_state(d) == before
    finally:
        holder.kill()
        holder.wait()
    r = subprocess.run([exe, "check", "--repair", "--json", "--log-dirs", d],
                       capture_output=True, cwd=ROOT, timeout=60, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["repaired"] is True and doc["problems_after_repair"] == 0
    assert any(a["kind"] == "truncate" for a in doc["log_dirs"][0]["done"])


def test_repair_takes_the_lock_the_daemon_takes(tmp_path, capsys):
    d = make_log_dir(tmp_path)
    cfg = BrokerConfig.from_properties({}).with_log_dirs([d])
    m = LogManager(cfg)
    m.startup()
    try:
        rc, _out, err = check(capsys, d, "--repair")
        assert rc == 1 and "Failed to acquire lock" in err
    finally:
        m.shutdown()


# -- one code path -----------------------------------------------------------------------------
def test_plan_is_what_the_loader_then_does(tmp_path):
    d = make_log_dir(tmp_path)
    p = part(d)
    logs = seg_logs(p)
    with open(logs[-1], "ab") as f:
        f.write(b"\0" * 30)
    os.unlink(logs[0][:-4] + ".timeindex")
    open(logs[0] + ".deleted", "wb").close()
    cfg = LogConfig(segment_bytes=SEGMENT_BYTES, index_interval_bytes=INTERVAL)
    before = tree_state(p)
    planned = plan_load(p, cfg, recovery_point=0, had_clean_shutdown=False)
    assert tree_state(p) == before
    done: list[LoadAction] = []
    lg = load_log(p, "t", 0, cfg, recovery_point=0, had_clean_shutdown=False,
                  on_action=done.append)
    lg.close()
    assert [(a.kind, a.path, a.position, a.nbytes) for a in planned] == \
        [(a.kind, a.path, a.position, a.nbytes) for a in done]
    assert {a.kind for a in planned} >= {"stray-file", "missing-index", "unflushed",
                                         "truncate"}


def test_check_beside_a_writer_reads_only(tmp_path, capsys):
    """A read-only check takes no lock and never creates a file (not even .lock)."""
    d = make_log_dir(tmp_path)
    os.unlink(os.path.join(d, ".lock"))
    before = tree_state(d)
    time.sleep(0.01)
    rc, _out, _err = check(capsys, d)
    assert rc == 0 and tree_state(d) == before


def test_beside_a_running_daemon(mount, tmp_path, capsys):
    """A live daemon: check reads beside it and names it; --repair refuses, naming it."""
    os.mkdir(mount.path("orders"))
    with open(mount.path("orders", "0", "append"), "ab") as f:
        f.write(b"".join(b"line %d\n" % i for i in range(100)))
        os.fsync(f.fileno())
    d = mount.log_dirs[0]
    rc, out, _err = check(capsys, d)
    assert f"pid {mount.proc.pid}" in out and "holds its .lock" in out
    assert rc == 0, out  # a live log: no clean-shutdown marker is expected
    # the daemon recovered its logs when it started: no recovery is simulated beside it
    _rc, doc = check_json(capsys, d)
    assert not findings(doc, "revalidate"), findings(doc)
    rc, _out, err = check(capsys, d, "--repair")
    assert rc == 1 and f"held by pid {mount.proc.pid}" in err
    assert f"stop the daemon (kafkafs umount {mount.mnt})" in err
    assert mount.umount() == 0
    rc, out, _err = check(capsys, d)
    assert rc == 0 and out.rstrip().endswith("clean"), out


@pytest.mark.parametrize("clean", [True, False])
def test_plan_matches_the_loader_on_swaps_and_leftovers(tmp_path, clean):
    d = make_log_dir(tmp_path)
    p = part(d)
    logs = seg_logs(p)
    # a swap of the active segment with no .index.swap (the loader's writable open creates
    # an empty one) and a torn tail
    shutil.copyfile(logs[-1], logs[-1] + ".swap")
    shutil.copyfile(logs[-1][:-4] + ".timeindex", logs[-1][:-4] + ".timeindex.swap")
    with open(logs[-1] + ".swap", "ab") as f:
        f.write(b"\1" * 20)
    # an interrupted clean past the end: its .cleaned and the .swap at its offset go
    shutil.copyfile(logs[2], os.path.join(p, "00000000000000099990.log.cleaned"))
    shutil.copyfile(logs[3][:-4] + ".index", os.path.join(p, "00000000000000099995.index.swap"))
    cfg = LogConfig(segment_bytes=SEGMENT_BYTES, index_interval_bytes=INTERVAL)
    for thorough in (False, True):
        before = tree_state(p)
        planned = plan_load(p, cfg, recovery_point=60, had_clean_shutdown=clean,
                            thorough=thorough)
        assert tree_state(p) == before
    done: list[LoadAction] = []
    lg = load_log(p, "t", 0, cfg, recovery_point=60, had_clean_shutdown=clean, thorough=True,
                  on_action=done.append)
    lg.close()
    assert [(a.kind, a.path, a.position, a.nbytes) for a in planned] == \
        [(a.kind, a.path, a.position, a.nbytes) for a in done]
    assert {"swap", "swapped-out", "stray-file", "invalid-swap", "truncate"} <= \
        {a.kind for a in done}


# -- a segment missing in the middle -------------------------------------------------------
def _drop_segment(pdir, i):
    """Delete the i-th segment (its .log and indexes) of ``pdir``: returns (first, last), the
    offsets it held, read before the deletion."""
    logs = seg_logs(pdir)
    first = int(os.path.basename(logs[i])[:-4])
    last = int(os.path.basename(logs[i + 1])[:-4]) - 1
    prefix = logs[i][:-4]
    for suffix in (".log", ".index", ".timeindex", ".txnindex"):
        if os.path.exists(prefix + suffix):
            os.unlink(prefix + suffix)
    return first, last


def test_a_segment_missing_in_the_middle_is_a_finding_with_its_offsets(tmp_path, capsys):
    d = make_log_dir(tmp_path, batches=60)
    p = part(d)
    assert len(seg_logs(p)) >= 4
    first, last = _drop_segment(p, 1)
    after = seg_logs(p)[1]
    (hit,) = assert_reported_read_only(capsys, d, "missing-offsets", path=after, position=0)
    assert hit["partition"] == "t-0"
    assert hit["repairable"] is False and hit["severity"] == "problem"
    assert f"Offsets {first} to {last} ({last - first + 1} offset(s)) are missing" \
        in hit["message"]
    rc, out, _ = check(capsys, d)
    assert rc == 1
    line = [ln for ln in out.splitlines() if "are missing" in ln]
    assert len(line) == 1 and line[0].startswith("problem (not repairable): t-0/")
    assert f"Offsets {first} to {last}" in line[0]
    assert out.rstrip().endswith("1 problem(s) (0 repairable with --repair, 1 not)")
    # --repair cannot bring the records back: it says so, repairs the rest and keeps the gap
    with open(seg_logs(p)[-1], "ab") as f:
        f.write(b"\1" * 20)  # a torn write at the tail: repairable
    rc, out, _ = check(capsys, d, "--repair")
    assert rc == 1
    assert "did: " in out and "truncate" not in out.split("after repair:")[1]
    after_repair = out.split("after repair:")[1]
    assert f"Offsets {first} to {last}" in after_repair
    assert after_repair.rstrip().endswith("1 problem(s) (0 repairable with --repair, 1 not)")
    offsets = [o for o, _k, _v in read_records(p)]
    assert offsets == [o for o in range(offsets[-1] + 1) if not first <= o <= last]


def test_consume_warns_on_stderr_where_it_skips_a_gap(tmp_path, capsys):
    d = make_log_dir(tmp_path, batches=60)
    first, last = _drop_segment(part(d), 2)
    capsys.readouterr()
    rc = main(["consume", "--log-dirs", d, "--topic", "t", "--from-beginning",
               "--timeout-ms", "0", "--property", "print.offset=true"])
    out, err = capsys.readouterr()
    assert rc == 0
    assert f"t-0: offsets {first} to {last} are missing from the log" in err
    assert err.count("are missing") == 1
    # the records around the gap are all printed
    assert f"Offset:{first - 1}\t" in out and f"Offset:{last + 1}\t" in out


def test_a_gap_in_a_compacted_topic_is_no_finding(tmp_path, capsys):
    d = make_log_dir(tmp_path, batches=60)
    _drop_segment(part(d), 1)
    # cleanup.policy=compact: a cleaned log has gaps by design
    rc, out, err = check(capsys, d, "--override", "log.cleanup.policy=compact")
    assert "are missing" not in out
    assert rc == 0, out + err


def test_the_mount_reads_across_a_gap_as_documented(tmp_path, mount_factory):
    """docs/operations.md: messages runs across the gap without an error, offset/N of the
    gap is ENOENT and not listed, the records on either side read."""
    d = make_log_dir(tmp_path, batches=60)
    first, last = _drop_segment(part(d), 1)
    m = mount_factory(log_dirs=[d], options=["ro"])
    with open(m.path("t", "0", "messages"), "rb") as f:
        lines = f.read().splitlines()
    expected = read_records(part(d))
    assert lines == [v for _o, _k, v in expected]
    for o in (first, last):
        assert not os.path.exists(m.path("t", "0", "offset", str(o)))
    with open(m.path("t", "0", "offset", str(first - 1)), "rb") as f:
        assert f.read() == {o: v for o, _k, v in expected}[first - 1]
    listed = {int(n) for n in os.listdir(m.path("t", "0", "offset"))}
    assert first - 1 in listed and last + 1 in listed
    assert not listed & set(range(first, last + 1))
    assert m.umount() == 0
    assert "Traceback" not in m.log() and "Damaged" not in m.log()
