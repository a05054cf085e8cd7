"""The key map (kafkafs.log.keymap): every key's latest committed offset, built
incrementally, saved and checked against the log, bounded in memory; held against a plain
dict model of the same appends."""

from __future__ import annotations

import os
import random
import shutil
import tracemalloc

import pytest

from kafkafs.log import keymap as KM
from kafkafs.log.config import LogConfig
from kafkafs.log.keymap import KEYMAP_FILE, KeyMap, KeyMaps, key_digest
from kafkafs.log.loader import load_log
from kafkafs.log.names import parse_segment_filename
from kafkafs.record.batch import encode_batch
from kafkafs.record.control import ABORT, COMMIT, encode_end_txn_marker_batch


def make_log(d, name="t-0", **cfg):
    part = os.path.join(d, name)
    os.makedirs(part, exist_ok=True)
    topic, p = name.rsplit("-", 1)
    return load_log(part, topic, int(p), LogConfig(**cfg), had_clean_shutdown=True)


def reopen(lg, **cfg):
    lg.close()
    return load_log(lg.dir, lg.topic, lg.partition, LogConfig(**cfg), had_clean_shutdown=True)


class Model:
    """What the map must say: key -> (offset, value) of its latest committed record."""

    def __init__(self):
        self.latest: dict[bytes, tuple[int, bytes | None]] = {}

    def apply(self, first: int, records):
        for i, (_ts, key, value, _h) in enumerate(records):
            if key is not None:
                self.latest[key] = (first + i, value)

    def live(self) -> dict[bytes, int]:
        return {k: off for k, (off, v) in self.latest.items() if v is not None}


def append(lg, model, records):
    first, _last = lg.append(records)
    if model is not None:
        model.apply(first, records)
    return first


def lookup(km: KeyMap, lg, key: bytes):
    """What the key view does: the entry, checked against the record (a stale one
    rescanned). Returns the offset or None."""
    offset = km.get(key)
    if offset is None:
        return None

    def read(lg, off):
        r = lg.read_record(off)
        return None if r is None else (r,)

    status = km.verify(lg, offset, read, lambda k: k == key)
    if status == "ok":
        return offset
    if status == "gone":
        return None
    return km.rescan(lg, lambda k: k == key, key_digest(key))


def assert_matches(km, lg, model, extra=(b"never-written",)):
    live = model.live()
    for key in list(model.latest) + list(extra):
        assert lookup(km, lg, key) == live.get(key), key
    assert km.live_offsets(lg).tolist() == sorted(live.values())


def random_records(rnd, n, keys=30):
    out = []
    for _ in range(n):
        key = None if rnd.random() < 0.1 else b"k%d" % rnd.randrange(keys)
        value = None if rnd.random() < 0.15 else b"v%d" % rnd.randrange(10**6)
        out.append((1000, key, value, ()))
    return out


def test_incremental_updates_follow_every_append(tmp_path):
    rnd = random.Random(1)
    lg = make_log(str(tmp_path), segment_bytes=2000)  # many rolls
    model = Model()
    km = KeyMap.open(lg)
    assert km.rebuild_reason == "no saved key map"
    total = 0
    for step in range(60):
        recs = random_records(rnd, rnd.randint(1, 20))
        append(lg, model, recs)
        total += len(recs)
        if step % 7 == 0:
            km.catch_up(lg)
            assert km.end_offset == lg.log_end_offset
            assert_matches(km, lg, model)
    km.catch_up(lg)
    assert_matches(km, lg, model)
    assert len(lg.segments()) > 5


def test_catch_up_reads_only_the_new_batches(tmp_path):
    lg = make_log(str(tmp_path))
    km = KeyMap.open(lg)
    for i in range(10):
        lg.append([(1, b"a%d" % i, b"x", ())] * 3)
    assert km.catch_up(lg) == 30
    assert km.catch_up(lg) == 0  # nothing new: nothing read
    lg.append([(1, b"b", b"y", ())] * 2)
    assert km.catch_up(lg) == 2
    assert km.pending(lg) == 0
    lg.append([(1, b"c", b"z", ())])
    assert km.pending(lg) == 1


def test_tombstones_and_null_keys(tmp_path):
    lg = make_log(str(tmp_path))
    model = Model()
    km = KeyMap.open(lg)
    append(lg, model, [(1, b"a", b"1", ()), (1, b"b", b"2", ()), (1, None, b"nokey", ())])
    append(lg, model, [(1, b"a", None, ())])  # a deleted
    append(lg, model, [(1, b"b", None, ()), (1, b"b", b"3", ())])  # b deleted and back
    append(lg, model, [(1, b"", b"empty key", ()), (1, b"e", b"", ())])  # empty key, value
    km.catch_up(lg)
    assert km.get(b"a") is None
    assert km.get(b"b") == 5
    assert km.get(b"") == 6
    assert km.get(b"e") == 7  # an empty value is a value, not a tombstone
    assert_matches(km, lg, model)
    km.merge()  # tombstones leave the arrays: an absent key and a deleted one read the same
    assert len(km) == 3 and km.nbytes() == 3 * 24
    assert_matches(km, lg, model)


# -- transactions ---------------------------------------------------------------------------
def txn(pid, records, *, epoch=0):
    return bytearray(encode_batch(records, producer_id=pid, producer_epoch=epoch,
                                  base_sequence=0, is_transactional=True))


def end_txn(kind, pid, epoch=0):
    return bytearray(encode_end_txn_marker_batch(kind, base_offset=0, timestamp=2,
                                                 producer_id=pid, producer_epoch=epoch,
                                                 coordinator_epoch=1))


def test_aborted_transactions_leave_the_previous_value(tmp_path):
    lg = make_log(str(tmp_path))
    km = KeyMap.open(lg)
    lg.append([(1, b"k", b"committed", ()), (1, b"gone", b"x", ())])
    lg.append_encoded(txn(7, [(1, b"k", b"aborted", ()), (1, b"new", b"aborted", ()),
                              (1, b"gone", None, ())]))
    lg.append_encoded(end_txn(ABORT, 7))
    km.catch_up(lg)
    assert km.get(b"k") == 0  # a key whose latest record was aborted shows the one before
    assert km.get(b"new") is None
    assert km.get(b"gone") == 1  # an aborted tombstone deletes nothing
    lg.append_encoded(txn(8, [(1, b"k", b"in txn", ())]))
    lg.append_encoded(end_txn(COMMIT, 8))
    km.catch_up(lg)
    assert km.get(b"k") == 6


def test_nothing_past_the_last_stable_offset(tmp_path):
    lg = make_log(str(tmp_path))
    km = KeyMap.open(lg)
    lg.append([(1, b"k", b"v0", ())])
    lg.append_encoded(txn(9, [(1, b"k", b"open", ())]))  # offset 1: an open transaction
    lg.append([(1, b"k", b"v2", ()), (1, b"plain", b"p", ())])  # offsets 2-3, past the LSO
    assert lg.last_stable_offset == 1
    km.catch_up(lg)
    assert km.end_offset == 1
    assert km.get(b"k") == 0 and km.get(b"plain") is None
    assert km.pending(lg) == 0
    lg.append_encoded(end_txn(COMMIT, 9))
    km.catch_up(lg)
    assert km.get(b"k") == 2 and km.get(b"plain") == 3


# -- persistence ----------------------------------------------------------------------------
def filled(tmp_path, n=50, **cfg):
    lg = make_log(str(tmp_path), **cfg)
    model = Model()
    for i in range(n):
        append(lg, model, [(1, b"k%d" % (i % 20), b"v%d" % i, ())])
    km = KeyMap.open(lg)
    km.catch_up(lg)
    return lg, model, km


def test_saved_map_is_loaded_not_rebuilt(tmp_path, caplog):
    lg, model, km = filled(tmp_path)
    assert km.save(lg)
    assert not km.save(lg)  # nothing changed since
    path = os.path.join(lg.dir, KEYMAP_FILE)
    assert os.path.isfile(path) and not os.path.islink(path)
    # a broker leaves it alone: no segment suffix, no leading offset (LogLoader's rules)
    assert parse_segment_filename(KEYMAP_FILE) is None and not KEYMAP_FILE[0].isdigit()
    assert not KEYMAP_FILE.endswith((".log", ".index", ".timeindex", ".txnindex", ".deleted",
                                     ".cleaned", ".swap", ".snapshot"))
    lg = reopen(lg)
    caplog.set_level("INFO", logger="kafkafs.log.keymap")
    again = KeyMap.open(lg)
    assert again.source == "loaded" and again.rebuild_reason is None
    assert "Key map of t-0 loaded: 20 keys up to offset 50" in caplog.text
    assert again.catch_up(lg) == 0  # nothing to read: not rebuilt
    assert_matches(again, lg, model)
    for i in range(5):  # appended after the save: read incrementally from where it ended
        append(lg, model, [(1, b"k%d" % i, b"later", ())])
    assert again.catch_up(lg) == 5
    assert_matches(again, lg, model)


def stale(tmp_path, mutate) -> tuple[KeyMap, object, Model]:
    lg, model, km = filled(tmp_path, segment_bytes=500)
    assert km.save(lg)
    lg, model = mutate(lg, model)
    again = KeyMap.open(lg)
    assert again.rebuild_reason is not None
    again.catch_up(lg)  # rebuilt by one scan
    assert again.rebuild_reason is None and again.source == "built"
    assert_matches(again, lg, model)
    return again, lg, model


def test_truncated_log_rebuilds_the_map(tmp_path):
    backup = str(tmp_path / "backup")

    def mutate(lg, model):
        lg.close()
        shutil.rmtree(lg.dir)
        shutil.copytree(backup, lg.dir)  # the older backup, without the map's last batches
        lg = load_log(lg.dir, "t", 0, LogConfig(segment_bytes=500), had_clean_shutdown=True)
        m = Model()
        for r in lg.records():
            m.apply(r.offset, [(1, r.key, r.value, ())])
        return lg, m

    lg = make_log(str(tmp_path), segment_bytes=500)
    for i in range(20):
        lg.append([(1, b"k%d" % (i % 20), b"v%d" % i, ())])
    lg.close()
    shutil.copytree(lg.dir, backup)
    shutil.rmtree(lg.dir)
    km, lg, model = stale(tmp_path, mutate)
    assert "truncated" in (km.rebuild_reason or "") or km.end_offset == 20


def test_diverged_history_rebuilds_the_map(tmp_path, caplog):
    """A restored older backup that then went on differently: same offsets, other
    batches. The map's last batch no longer matches."""
    caplog.set_level("INFO", logger="kafkafs.log.keymap")
    lg = make_log(str(tmp_path), segment_bytes=500)
    for i in range(40):
        lg.append([(1, b"k%d" % (i % 20), b"v%d" % i, ())])
    lg.close()
    backup = str(tmp_path / "backup")
    shutil.copytree(lg.dir, backup)
    lg = make_log(str(tmp_path), segment_bytes=500)
    for i in range(10):
        lg.append([(1, b"k%d" % i, b"first history", ())])
    km = KeyMap.open(lg)
    km.catch_up(lg)
    assert km.save(lg)
    lg.close()
    saved = open(os.path.join(lg.dir, KEYMAP_FILE), "rb").read()
    shutil.rmtree(lg.dir)
    shutil.copytree(backup, lg.dir)
    open(os.path.join(lg.dir, KEYMAP_FILE), "wb").write(saved)
    lg = make_log(str(tmp_path), segment_bytes=500)
    model = Model()
    for r in lg.records():
        model.apply(r.offset, [(1, r.key, r.value, ())])
    for i in range(10):
        append(lg, model, [(1, b"k%d" % i, b"second history %d" % i, ())])
    again = KeyMap.open(lg)
    assert "differs" in again.rebuild_reason
    again.catch_up(lg)
    assert_matches(again, lg, model)
    assert "the saved key map does not match the log" in caplog.text
    assert "building it by one scan of the log" in caplog.text


def test_damaged_or_foreign_file_rebuilds_the_map(tmp_path):
    lg, model, km = filled(tmp_path)
    assert km.save(lg)
    path = os.path.join(lg.dir, KEYMAP_FILE)
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(path, "wb").write(data)
    assert "checksum" in KeyMap.open(lg).rebuild_reason
    open(path, "wb").write(b"not a key map at all")
    assert KeyMap.open(lg).rebuild_reason.startswith("the saved key map does not match")
    # a partition dir copied under another name keeps the file of its old one
    km._saved_end = None
    assert km.save(lg)
    other = make_log(str(tmp_path), "u-3")
    shutil.copy(path, os.path.join(other.dir, KEYMAP_FILE))
    assert "belongs to t-0" in KeyMap.open(other).rebuild_reason
    os.unlink(path)
    assert KeyMap.open(lg).rebuild_reason == "no saved key map"


def test_another_topic_id_rebuilds_the_map(tmp_path):
    from kafkafs.log import checkpoint as ckpt

    lg, model, km = filled(tmp_path)
    ckpt.write_partition_metadata(os.path.join(lg.dir, "partition.metadata"),
                                  ckpt.new_topic_id())
    km._saved_end = None
    assert km.save(lg)
    ckpt.write_partition_metadata(os.path.join(lg.dir, "partition.metadata"),
                                  ckpt.new_topic_id())
    assert "topic id" in KeyMap.open(lg).rebuild_reason


def test_older_data_restored_below_the_start_rebuilds(tmp_path):
    """Retention removed the first segment, the map was saved; the segment comes back
    from a backup (the log start offset moves down): its keys must show."""
    lg = make_log(str(tmp_path), segment_bytes=300, retention_ms=1000)
    lg.append([(1, b"old-only", b"from the first segment", ())])
    while len(lg.segments()) < 3:
        lg.append([(10**13, b"k", b"x" * 40, ())])
    first = lg.segments()[0]
    saved = {n: open(os.path.join(lg.dir, n), "rb").read() for n in os.listdir(lg.dir)
             if n.startswith(f"{first.base_offset:020d}.")}
    assert lg.delete_old_segments(now=10**12) == 1  # old timestamps go
    lg.remove_deleted_segments(force=True)
    km = KeyMap.open(lg)
    km.catch_up(lg)
    assert km.get(b"old-only") is None
    assert km.save(lg)
    for n, data in saved.items():
        open(os.path.join(lg.dir, n), "wb").write(data)
    assert lg.adopt_segment(first.base_offset)
    assert lg.log_start_offset == 0
    again = KeyMap.open(lg)
    assert "older data restored" in again.rebuild_reason
    again.catch_up(lg)
    assert again.get(b"old-only") == 0
    # the map in memory sees the same at its next catch-up
    assert km.pending(lg) > 0
    km.catch_up(lg)
    assert km.get(b"old-only") == 0


def test_truncation_under_a_live_map_rebuilds_it(tmp_path):
    lg, model, km = filled(tmp_path)
    lg.truncate_fully_and_start_at(10)  # the log now starts empty at 10 < end_offset 50
    lg.append([(1, b"fresh", b"1", ())])
    km.catch_up(lg)
    assert km.get(b"fresh") == 10
    assert km.get(b"k1") is None


def test_read_only_log_never_saves(tmp_path):
    lg, model, km = filled(tmp_path)
    lg.close()
    ro = load_log(lg.dir, "t", 0, LogConfig(), had_clean_shutdown=True, writable=False)
    km = KeyMap.open(ro)
    km.catch_up(ro)
    assert not km.save(ro)
    assert not os.path.exists(os.path.join(lg.dir, KEYMAP_FILE))
    assert_matches(km, ro, model)


# -- hints --------------------------------------------------------------------------------
def test_entries_below_the_log_start_are_absent(tmp_path):
    lg = make_log(str(tmp_path), segment_bytes=300, retention_ms=1000)
    lg.append([(1, b"old", b"v", ())])
    while len(lg.segments()) < 3:
        lg.append([(10**13, b"k", b"x" * 40, ())])
    km = KeyMap.open(lg)
    km.catch_up(lg)
    assert km.get(b"old") == 0
    lg.delete_old_segments(now=10**12)  # retention after the map was built
    assert lg.log_start_offset > 0
    assert lookup(km, lg, b"old") is None  # its latest record is gone: the key is gone
    assert lookup(km, lg, b"k") is not None
    assert 0 not in km.live_offsets(lg).tolist()


def test_full_digest_collisions_never_give_another_keys_value(tmp_path, monkeypatch):
    """Every key given the same 128-bit digest (never expected: ~10^-27 for 10^6 keys):
    the one entry names the latest record of any of them; a read checks the record's key,
    finds its own by a scan, and never answers with another key's value."""
    monkeypatch.setattr(KM, "key_digest", lambda key: b"\x01" * 16)
    rnd = random.Random(5)
    lg = make_log(str(tmp_path))
    model = Model()
    km = KeyMap.open(lg)
    for _ in range(10):
        append(lg, model, random_records(rnd, 10, keys=6))
    append(lg, model, [(1, b"k0", b"last", ())])  # the shared entry is live
    km.catch_up(lg)
    live = model.live()
    rescanned = 0
    for key in [b"k%d" % i for i in range(6)]:
        if km.get(key) != live.get(key):
            rescanned += 1
        assert lookup(km, lg, key) == live.get(key), key
    assert rescanned >= 1  # the collision was met and resolved


def test_keys_sharing_the_first_half_of_their_digest(tmp_path, monkeypatch):
    """Keys whose digests share h1 (about 10^-8 in a map of 10^6 keys) take the merge's
    plain way; every answer stays exact."""
    real = KM.key_digest
    monkeypatch.setattr(KM, "key_digest", lambda key: b"\0" * 8 + real(key)[8:])
    rnd = random.Random(6)
    lg = make_log(str(tmp_path))
    model = Model()
    km = KeyMap.open(lg)
    for step in range(20):
        append(lg, model, random_records(rnd, 30, keys=40))
        km.catch_up(lg)
        km.merge()
        assert_matches(km, lg, model)
    assert len(set(km._arrays[0].tolist())) == 1 and len(km._arrays[0]) > 10


def test_a_stale_entry_is_rescanned(tmp_path):
    """An entry whose offset holds no record (as after a rewrite the map did not see) is
    never answered from: the reader scans."""
    lg, model, km = filled(tmp_path)
    offset = km.get(b"k3")
    status = km.verify(lg, offset, lambda lg, off: None, lambda k: True)
    assert status == "stale"
    assert km.rescan(lg, lambda k: k == b"k3", key_digest(b"k3")) == model.live()[b"k3"]
    assert km.rescan(lg, lambda k: k == b"zz", key_digest(b"zz")) is None
    assert km.get(b"zz") is None


def test_damaged_batch_ends_the_catch_up(tmp_path, caplog):
    lg = make_log(str(tmp_path))
    for i in range(10):
        lg.append([(1, b"k%d" % i, b"v" * 50, ())])
    pos = lg.segments()[0].size // 2
    lg.close()
    path = os.path.join(str(tmp_path), "t-0", "00000000000000000000.log")
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(b"\xff\xff")
    lg = load_log(os.path.dirname(path), "t", 0, LogConfig(), had_clean_shutdown=True,
                  writable=False)
    km = KeyMap.open(lg)
    caplog.set_level("ERROR", logger="kafkafs.damage")
    km.catch_up(lg)
    km.catch_up(lg)
    assert 0 < km.end_offset < 10
    assert km.get(b"k0") == 0 and km.get(b"k9") is None
    assert caplog.text.count("Damaged data") == 1


# -- memory ---------------------------------------------------------------------------------
def test_memory_is_24_bytes_per_live_key(tmp_path):
    n = 200_000
    lg = make_log(str(tmp_path), segment_bytes=64 * 1024 * 1024)
    for start in range(0, n, 1000):
        lg.append([(1, b"key-%07d" % i, b"v", ()) for i in range(start, start + 1000)])
    km = KeyMap.open(lg)
    tracemalloc.start()
    try:
        km.catch_up(lg)
        km.merge()
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(km) == n and km.nbytes() == 24 * n
    # the transient peak of building (a chunk of changes, then one merge) stays a small
    # multiple of the arrays: about 10^6 keys -> 24 MB kept, under ~150 MB while merging
    assert peak < 160 * n, peak
    for start in range(0, n, 1000):  # every other key deleted
        lg.append([(1, b"key-%07d" % i, None, ()) for i in range(start, start + 1000, 2)])
    km.catch_up(lg)
    km.merge()
    assert km.nbytes() == 24 * (n // 2)
    assert km.get(b"key-0000000") is None and km.get(b"key-0000001") == 1


def test_key_maps_registry(tmp_path):
    lg, model, km = filled(tmp_path)
    maps = KeyMaps()
    assert maps.peek(lg) is None
    a = maps.caught_up(lg)
    assert maps.get(lg) is a and maps.peek(lg) is a and len(maps) == 1
    assert maps.stats == {"loaded": 0, "built": 1}
    assert maps.maintain(save=True) == 1
    lg2 = reopen(lg)  # a new Log object for the partition: a new map, loaded
    b = maps.get(lg2)
    assert b is not a and b.source == "loaded" and maps.stats["loaded"] == 1
    maps.forget("t")
    assert len(maps) == 0
    # at start the daemon opens the saved maps, and only those
    other = make_log(str(tmp_path), "u-0")
    fresh = KeyMaps()
    assert fresh.open_saved([lg2, other]) == 1
    assert fresh.peek(lg2).source == "loaded" and fresh.peek(other) is None
    fresh.after_cleaning(lg2)  # a pass that rewrote nothing: the map stays usable
    fresh.after_cleaning(other)  # no map: nothing to do
    assert fresh.maintain(save=True) == 1
    assert KeyMap.open(lg2).source == "loaded"


def test_after_cleaning_keeps_the_saved_map_usable(tmp_path):
    lg, model, km = filled(tmp_path)
    assert km.save(lg)
    km.after_cleaning(lg)  # nothing rewritten: same identity, saved again
    assert km.changed and km.save(lg)
    assert KeyMap.open(lg).source == "loaded"


@pytest.mark.parametrize("n", [0, 1, 5])
def test_small_and_empty_maps_round_trip(tmp_path, n):
    lg = make_log(str(tmp_path))
    model = Model()
    for i in range(n):
        append(lg, model, [(1, b"k%d" % i, b"v", ())])
    km = KeyMap.open(lg)
    km.catch_up(lg)
    km._saved_end = None
    assert km.save(lg)
    lg = reopen(lg)
    again = KeyMap.open(lg)
    assert again.source == "loaded", again.rebuild_reason
    assert_matches(again, lg, model)


def test_the_daemon_waits_for_a_pause_of_a_stream(tmp_path, monkeypatch):
    """KeyMaps.maintain reads a few new records at once, but leaves many to a pause of the
    log (or to the reader who needs them), so a stream of appends keeps its speed."""
    monkeypatch.setattr(KM, "LAG_SMALL", 10)
    monkeypatch.setattr(KM, "LAG_MAX", 1000)
    lg = make_log(str(tmp_path))
    maps = KeyMaps()
    km = maps.caught_up(lg)
    maps.maintain()
    lg.append([(1, b"k", b"v", ())] * 5)
    maps.maintain()
    assert km.pending(lg) == 0  # a trickle: read at once
    lg.append([(1, b"k", b"v", ())] * 50)
    maps.maintain()
    assert km.pending(lg) == 50  # a stream: left for later
    lg.append([(1, b"k", b"v", ())] * 50)
    maps.maintain()
    assert km.pending(lg) == 100
    maps.maintain()  # the log paused
    assert km.pending(lg) == 0
    lg.append([(1, b"k", b"v", ())] * 1001)
    maps.maintain()
    assert km.pending(lg) == 0  # too far behind: read even under the stream


def test_a_scan_cut_short_by_a_swapped_segment_is_done_again(tmp_path, monkeypatch):
    """A segment swapped or deleted under a scan (the cleaner, retention) ends the log's
    batch iteration early; a scan for a key then starts over instead of answering from
    half the log."""
    lg, model, km = filled(tmp_path)
    real = lg.batches
    calls = []

    def cut_short(start=None, validate=True):
        calls.append(start)
        for i, batch in enumerate(real(start, validate)):
            if len(calls) == 1 and i == 3:
                return  # as when the segment being read was swapped
            yield batch

    monkeypatch.setattr(lg, "batches", cut_short)
    key = b"k19"  # last written near the end of the log
    assert km.rescan(lg, lambda k: k == key, key_digest(key)) == model.live()[key]
    assert len(calls) == 2
