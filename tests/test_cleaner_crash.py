"""Crash safety of cleaning (issue 11 §2): a "kill -9" at every rename boundary of a pass and
at points while the ``.cleaned`` files are written.

A crash is emulated by an image: a copy of the whole log dir taken at that instant, before
the rename (or just after a partial write: the ``.cleaned`` file cut at a random length),
while the pass goes on in the live copy. Each image is then opened by a fresh
:class:`~kafkafs.log.manager.LogManager` (no clean-shutdown marker: Kafka's recovery, with
its completion or roll-back of interrupted swaps) and must hold:

* every key's latest value and every unexpired tombstone (an expired one may be gone, and
  then nothing of its key is left); nothing older after a key's latest record;
* at most what the log held before the pass and at least what it holds after it;
* no ``.swap``, ``.cleaned`` or ``.deleted`` file left;
* offsets strictly increasing, every batch's CRC valid (read with kafka-python), indexes
  that pass the sanity and order checks;
* after a clean shutdown, ``kafkafs check`` (:func:`~kafkafs.log.inspect.inspect_log_dirs`,
  thorough) finds no problem;
* a pass over the recovered log ends where the uninterrupted pass ended.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile

import pytest
from cleaner_model import Model, check_indexes, check_offsets, read_partition

from kafkafs.log import cleaned_segment
from kafkafs.log.cleaner import CleanerConfig, LogCleaner
from kafkafs.log.config import BrokerConfig
from kafkafs.log.inspect import inspect_log_dirs
from kafkafs.log.manager import LogManager

NOW = 1_700_000_000_000
DAY = 86_400_000
TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": "1000",
                "index.interval.bytes": "200", "min.cleanable.dirty.ratio": "0.01",
                "delete.retention.ms": str(DAY), "file.delete.delay.ms": "0"}


def broker(log_dir) -> BrokerConfig:
    return BrokerConfig.from_properties({"log.dirs": str(log_dir)})


def start(log_dir) -> LogManager:
    m = LogManager(broker(log_dir))
    m.startup()
    return m


def kill(m: LogManager) -> None:
    """Drop a manager the way kill -9 does: no flush, no checkpoint, no marker."""
    m._release_locks()
    m.started = False


def build(log_dir, seed=1):
    """A compacted partition with overwritten keys and tombstones across segments, cleaned
    once (so a later pass rewrites a clean section too). Returns the model."""
    m = start(log_dir)
    (lg,) = m.create_topic("c", 1, TOPIC_CONFIG)
    model = Model()
    rnd = random.Random(seed)
    for i in range(200):
        k = b"k%02d" % rnd.randrange(30)
        v = None if rnd.random() < 0.1 else b"v%d" % i
        first, _ = lg.append([(NOW + i, k, v, ())])
        model.append(first, k, v)
    lg.roll()
    cl = LogCleaner(CleanerConfig(dedupe_buffer_size=1 << 20), [str(log_dir)], m.logs,
                    clock=lambda: NOW)
    r = cl.clean_log(lg, now=NOW)
    assert r.ok
    model.cleaned(r.end_offset, NOW, DAY)
    for i in range(200, 350):
        k = b"k%02d" % rnd.randrange(30)
        v = None if rnd.random() < 0.1 else b"v%d" % i
        first, _ = lg.append([(NOW + i, k, v, ())])
        model.append(first, k, v)
    lg.roll()
    lg.append([(NOW, b"tail", b"t", ())])
    model.append(lg.log_end_offset - 1, b"tail", b"t")
    # the pass under test groups several segments into one (more renames per swap)
    m.alter_topic_config("c", {**TOPIC_CONFIG, "segment.bytes": "3500"})
    m.shutdown()
    return model


def copy_state(model: Model) -> Model:
    out = Model()
    out.records = dict(model.records)
    out.latest = dict(model.latest)
    out.horizon = dict(model.horizon)
    out.gone = set(model.gone)
    return out


def run_with_images(log_dir, images_dir, now, monkeypatch, seed=0):
    """Run one pass in ``log_dir``, taking an image before every rename and after every
    write of a ``.cleaned`` file. Returns ``(result, [(label, image dir)])``."""
    images = []
    rnd = random.Random(seed)

    def snap(label, cut=None):
        dst = os.path.join(images_dir, f"img{len(images):04d}")
        shutil.copytree(log_dir, dst, ignore=shutil.ignore_patterns(".lock"))
        if cut is not None:  # a write torn by the crash
            name, keep = cut
            path = os.path.join(dst, "c-0", name)
            if os.path.exists(path):
                with open(path, "r+b") as f:
                    f.truncate(keep)
        images.append((label, dst))

    real_replace = os.replace

    def replace(src, dst, *args, **kwargs):
        snap(f"before rename {src} -> {dst}")
        return real_replace(src, dst, *args, **kwargs)

    real_write = cleaned_segment.CleanedSegmentWriter.write

    def write(self, data):
        real_write(self, data)
        name = f"{self.base_offset:020d}.log.cleaned"
        snap(f"after writing {len(data)} bytes to {name}",
             (name, self.position - rnd.randint(0, len(data))))

    m = start(log_dir)
    lg = m.get_log("c", 0)
    cl = LogCleaner(CleanerConfig(dedupe_buffer_size=1 << 20), [str(log_dir)], m.logs,
                    clock=lambda: now)
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(cleaned_segment.CleanedSegmentWriter, "write", write)
    try:
        result = cl.clean_log(lg, now=now)
    finally:
        monkeypatch.undo()
    assert result.ok, result
    snap("after the pass")
    m.shutdown()
    return result, images


def check_image(image, before: Model, after: Model, now):
    m = start(image)
    try:
        lg = m.get_log("c", 0)
        # the load finished or rolled back the swap: no transient file is left
        left = [n for n in os.listdir(lg.dir) if n.endswith((".swap", ".cleaned", ".deleted"))]
        assert not left, left
        batches = read_partition(lg.dir)
        check_offsets(batches)
        check_indexes(lg)
        got = {r[0]: (r[2], r[3]) for b in batches if not b.is_control for r in b.records}
        lo, hi = after.expected(), before.expected()
        assert set(lo) <= set(got) <= set(hi), (sorted(set(lo) - set(got))[:10],
                                                 sorted(set(got) - set(hi))[:10])
        assert all(got[o] == hi[o] for o in got)
        last: dict = {}
        for o in sorted(got):
            last[got[o][0]] = o
        for key, o in before.latest.items():
            value = before.records[o][1]
            expired = value is None and o in before.horizon and now >= before.horizon[o]
            if expired:
                assert key not in last or last[key] == o, key
            else:
                assert last[key] == o, (key, last.get(key), o)
    finally:
        m.shutdown()
    reports = inspect_log_dirs([image], broker(image))
    problems = [f for r in reports for f in r.problems]
    assert not problems, [(f.kind, f.message) for f in problems]


@pytest.mark.parametrize("now", [NOW + 1, NOW + 2 * DAY], ids=["first-pass", "tombstones-expire"])
def test_a_crash_at_any_point_of_a_pass_loses_nothing(tmp_path, monkeypatch, request,
                                                       now):
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    model = build(log_dir)
    template = tmp_path / "template"
    shutil.copytree(log_dir, template)
    # images live in memory when it can (hundreds of small directories)
    shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    images_dir = tempfile.mkdtemp(prefix="kafkafs-crash-", dir=shm or str(tmp_path))
    request.addfinalizer(lambda: shutil.rmtree(images_dir, ignore_errors=True))
    result, images = run_with_images(str(log_dir), str(images_dir), now, monkeypatch)
    after = copy_state(model)
    after.cleaned(result.end_offset, now, DAY)
    renames = [label for label, _ in images if label.startswith("before rename")]
    assert len(renames) >= 30 and any(".swap" in r for r in renames)
    # opening the images need not reach the disk: fsync (what the crash is about) was
    # emulated by the image itself
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    reference = None
    for label, image in images:
        try:
            check_image(image, model, after, now)
        except AssertionError as exc:
            raise AssertionError(f"image {image} ({label}): {exc}") from None
        # the recovered log, cleaned again, ends where the uninterrupted pass ended
        m = start(image)
        lg = m.get_log("c", 0)
        cl = LogCleaner(CleanerConfig(dedupe_buffer_size=1 << 20), [image], m.logs,
                        clock=lambda: now)
        r = cl.clean_log(lg, now=now)
        assert r.ok, (label, r)
        final = {rec[0]: (rec[2], rec[3]) for b in read_partition(lg.dir) if not b.is_control
                 for rec in b.records}
        m.shutdown()
        if reference is None:
            reference = final
        assert final == reference, label
        shutil.rmtree(image)
    assert set(reference) == set(after.expected())
