"""One verdict from every reader on the same damaged partitions (issue 21, docs/design.md §5).

The damaged partitions come from the fuzzer's generator (``tests/logdir_fuzz.py``, which
``bench/fuzz_logdir.py`` runs at length): a template log dir written by kafkafs (topic ``t``,
partition 0 in ten segments, partition 1 in two), copied and mutated -- bytes flipped, ranges
zeroed with intact batches after them, files truncated, index entries made up, base offsets
forged back into earlier offsets, segments duplicated under other base offsets (overlapping
offsets), bytes appended. A handful of cases per kind, seeded: the same every run.

For each partition every reader gives a :class:`Verdict`: the data records it delivered in
order (offset, key, value), then the place ``(partition dir/file, byte position)`` of the
error it stopped at, or None. The readers:

* ``consume``: ``kafkafs consume --partition P`` (the CLI, in a forked child);
* ``dump``: ``kafkafs dump --json`` of the partition's ``.log`` files, in order, up to the
  first file it reports damage in (records below the log start offset left out: dump knows
  no partition);
* ``check``: ``kafkafs check --json``: the first finding that names a position (no records);
* ``log``: :meth:`kafkafs.log.log.Log.segment_batches` (through ``Log.read``) of a read-only
  load, as ``consume`` reads it;
* ``messages``, ``records.jsonl``: ``cat`` of the views of a real read-only mount (the error
  is the EIO; its place is the damage line the daemon logs for the partition), values only
  for ``messages``; ``offset/N``: a read of every delivered offset through the same mount
  must answer that record's value; ``by-time/T``: ``readlink`` of the timestamp of every
  delivered record must name the first delivered record at or after it, and one past the
  last must be ENOENT, or EIO when the readers stop at damage;
* ``key/``: ``ls`` and ``cat`` of the key view of the same mount (read first: its map is
  made then): each key's latest value among the records a read_committed reader delivers,
  and the damage line of the place where they stop;
* ``spark``: the ``kafkalog`` source's planner and executor (``plan_read``, ``group_tasks``,
  ``read_partition``) in-process with ``failOnDataLoss=true``: the rows handed over before
  the error and the error; and on one case per kind a real Spark query
  (``spark.read.format("kafkalog")``), slow;
* ``stream``: the ``kafkalog`` stream reader as Spark drives it, micro-batch by micro-batch
  (``maxOffsetsPerTrigger`` 70), in-process, one query per partition;
* ``cleaner``: a cleaner pass over a copy, the topic taken as compacted: it fails at the
  readers' place and changes nothing, or it meets no damage, keeps every keyed record and
  leaves the readers stopping where they did.

Required: one verdict. Every reader delivers the same records in the same order and stops
at the same place; none returns success with an intact record missing (the verdict is also
held to the independent judge, ``tests/logdir_judge.py``, where the judge is not
ambiguous). The only licensed difference is ``dump``'s, Kafka's ``DumpLogSegments``: it
reads each file on its own, so an incomplete batch at the end of a segment that is not the
last is "invalid bytes at the end" there, not an error, and it goes on with the next file.
"""

from __future__ import annotations

import json
import os
import pathlib
import random
import re
import shutil
import sys
from dataclasses import dataclass, field

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import logdir_fuzz as F
from conftest import Mount, fuse_available

TOPIC = F.TOPIC
#: mutation kinds fed to the readers, and how many cases of each
KINDS = ("flip", "zero", "truncate", "index_entry", "forge", "duplicate", "garbage")
PER_KIND = 3
TIMEOUT = 60.0


@dataclass(frozen=True)
class Verdict:
    """What a reader made of a partition: ``records`` [(offset, key, value)] in the order
    delivered (``values`` only for a reader that shows no offsets), ``error`` the place it
    stopped at, ``(rel path of the .log, byte position)``, or None."""

    records: tuple
    error: tuple | None
    #: the timestamp (ms) of each of ``records``, where the reader knows them (not compared)
    timestamps: tuple = field(default=(), compare=False)


def _cases() -> list[tuple[str, list[dict]]]:
    out = []
    for kind in KINDS:
        for i in range(PER_KIND):
            c = F.Chooser(rng=random.Random(f"one-verdict:{kind}:{i}"))
            out.append((f"{kind}-{i}", F.gen_case(c, [kind])))
    return out


CASES = _cases()


def _rel(path: str) -> str:
    return "/".join(path.split("/")[-2:])


def _place(text: str) -> tuple | None:
    """``(t-P/<file>.log, position)`` of the first ``<path>.log: position N`` in ``text``."""
    m = re.search(r"(\S+?\.log): position (\d+)", text)
    return (_rel(m.group(1)), int(m.group(2))) if m else None


def _isolated(fn, *args):
    out = F.run_isolated(fn, args, TIMEOUT)
    assert out.status == "ok", f"{fn.__name__}: {out.status}: {out.payload}"
    return out.payload


# -- the readers -------------------------------------------------------------------------

def read_consume(case_dir: str, isolation: str, p: int) -> Verdict:
    res = _isolated(F.run_cli, ["consume", "--log-dirs", case_dir, "--topic", TOPIC,
                                "--partition", str(p), "--from-beginning", "--timeout-ms",
                                "0", "--isolation-level", isolation, "--property",
                                "print.offset=true", "--property", "print.key=true"], True)
    assert "Traceback" not in res["stderr"], res["stderr"]
    records = []
    for line in F._split_lines(res["stdout"]):
        m = re.match(rb"^Offset:(\d+)\t(.*?)\t(.*)$", line, re.DOTALL)
        assert m, line
        key = None if m.group(2) == b"null" else m.group(2)
        value = None if m.group(3) == b"null" else m.group(3)
        records.append((int(m.group(1)), key, value))
    errors = F.error_lines(res["stderr"])
    assert (res["rc"] == 1) == bool(errors), res
    return Verdict(tuple(records), _place(errors[0]) if errors else None)


def _dump_value(v):
    if v is None or isinstance(v, str):
        return None if v is None else v.encode()
    import base64
    return base64.b64decode(v["base64"])


def read_dump(case_dir: str, isolation: str, p: int, log_start: int) -> Verdict:
    files = [os.path.join(case_dir, rel) for rel in F.log_files(case_dir)
             if rel.startswith(f"{TOPIC}-{p}/")]
    res = _isolated(F.run_cli, ["dump", "--files", ",".join(files), "--print-data-log",
                                "--json"])
    assert "Traceback" not in res["stderr"], res["stderr"]
    errors = {}
    for line in F.error_lines(res["stderr"]):
        where = _place(line)
        assert where is not None, line
        errors.setdefault(where[0], where)
    records, current = [], None
    for line in F._split_lines(res["stdout"]):
        obj = json.loads(line)
        if obj.get("type") == "file":
            if current in errors:
                break
            current = _rel(obj["path"])
        elif obj.get("type") == "record" and obj.get("control_type") is None and \
                obj["offset"] >= log_start:
            records.append((obj["offset"], _dump_value(obj.get("key")),
                            _dump_value(obj.get("payload"))))
    return Verdict(tuple(records), errors.get(current))


def read_check(case_dir: str) -> dict:
    """{partition: the first (rel, position) ``kafkafs check --json`` names, or None}."""
    res = _isolated(F.run_cli, ["check", "--log-dirs", case_dir, "--json"])
    assert "Traceback" not in res["stderr"], res["stderr"]
    doc = json.loads(res["stdout"])
    out: dict = {}
    for d in doc["log_dirs"]:
        for f in d["findings"]:
            if f.get("position") is None or not f.get("path", "").endswith(".log"):
                continue
            p = int(f["partition"].rsplit("-", 1)[1])
            where = (_rel(f["path"]), f["position"])
            base = int(os.path.basename(where[0])[:20])
            if p not in out or (base, where[1]) < (int(os.path.basename(out[p][0])[:20]),
                                                   out[p][1]):
                out[p] = where
    return out


def _walk(manager, isolation: str) -> dict:
    """{partition: Verdict} of ``Log.batches`` (through ``Log.read``) of every partition of
    ``manager``'s topic, as ``consume`` reads it."""
    from kafkafs.record.errors import CorruptRecordError

    out = {}
    for p in manager.partitions(TOPIC):
        lg = manager.get_log(TOPIC, p)
        committed = isolation == "read_committed"
        end = lg.last_stable_offset if committed else lg.log_end_offset
        aborted = lg.committed_filter(lg.log_start_offset, end) if committed else None
        records, stamps, error = [], [], None
        try:
            for batch in lg.batches(lg.log_start_offset):
                if batch.base_offset >= end:
                    break
                if batch.is_control or (aborted is not None and batch.is_transactional
                                        and aborted.is_aborted(batch)):
                    continue
                for r in batch.records():
                    if lg.log_start_offset <= r.offset < end:
                        records.append((r.offset, r.key, r.value))
                        stamps.append(r.timestamp)
        except CorruptRecordError as exc:
            error = (_rel(exc.path), exc.position)
        out[p] = Verdict(tuple(records), error, tuple(stamps))
    return out


def _log_walk(case_dir: str, isolation: str) -> dict:
    from kafkafs.log.config import BrokerConfig
    from kafkafs.log.manager import LogManager

    manager = LogManager(BrokerConfig.from_properties({}).with_log_dirs([case_dir]),
                         read_only=True, lazy=True)
    manager.startup()
    try:
        return _walk(manager, isolation)
    finally:
        manager.shutdown()


def read_log(case_dir: str, isolation: str) -> dict:
    return _isolated(_log_walk, case_dir, isolation)


def _spark_tasks(case_dir: str, isolation: str) -> dict:
    """The kafkalog source's planner and executor in this process: {partition: Verdict}."""
    from kafkafs.record.errors import CorruptRecordError
    from kafkafs.spark.options import parse_options
    from kafkafs.spark.plan import group_tasks, plan_read
    from kafkafs.spark.reader import read_partition

    opts = parse_options({"path": case_dir, "subscribe": TOPIC, "failOnDataLoss": "true",
                          "kafka.isolation.level": isolation})
    tasks = group_tasks(plan_read(opts))
    out: dict = {}
    for task in tasks:
        p = task.slices[0].partition
        prev = out.get(p, Verdict((), None))
        if prev.error is not None:
            continue
        records, error = list(prev.records), None
        try:
            for rb in read_partition(task):
                cols = rb.to_pydict()
                records.extend(zip(cols["offset"], cols["key"], cols["value"]))
        except CorruptRecordError as exc:
            error = (_rel(exc.path), exc.position)
        out[p] = Verdict(tuple(records), error)
    return out


def read_spark_tasks(case_dir: str, isolation: str) -> dict:
    return _isolated(_spark_tasks, case_dir, isolation)


#: the stream's maxOffsetsPerTrigger: several micro-batches a partition, cut mid-segment
STREAM_TRIGGER_OFFSETS = 70


def _spark_stream(case_dir: str, isolation: str) -> dict:
    """The kafkalog stream reader as Spark drives it (``initialOffset``, then
    ``latestOffset``/``partitions``/``read``/``commit`` a micro-batch at a time, at most
    :data:`STREAM_TRIGGER_OFFSETS` offsets each) in this process, one query per partition
    (``assign``): {partition: Verdict}. The query fails at the first error, whether the
    micro-batch's planning or its tasks meet it."""
    from kafkafs.spark.source import BASE_SCHEMA
    from kafkafs.spark.stream import KafkaLogStreamReader

    out: dict = {}
    for p in F.partitions(case_dir):
        reader = KafkaLogStreamReader({
            "path": case_dir, "assign": json.dumps({TOPIC: [p]}), "failOnDataLoss": "true",
            "startingOffsets": "earliest", "kafka.isolation.level": isolation,
            "maxOffsetsPerTrigger": str(STREAM_TRIGGER_OFFSETS)}, BASE_SCHEMA)
        records, error = [], None
        try:
            start, limit = reader.initialOffset(), reader.getDefaultReadLimit()
            for _ in range(10_000):
                end = reader.latestOffset(start, limit)
                if end == start:
                    break
                for task in reader.partitions(start, end):
                    for rb in reader.read(task):
                        cols = rb.to_pydict()
                        records.extend(zip(cols["offset"], cols["key"], cols["value"]))
                reader.commit(end)
                start = end
            else:
                raise AssertionError("the stream never caught up")
        except Exception as exc:  # CorruptRecordError, or the planning's data loss error
            error = _place(str(exc)) if getattr(exc, "path", None) is None else \
                (_rel(exc.path), exc.position)
            if error is None:
                raise
        out[p] = Verdict(tuple(records), error)
    return out


def read_spark_stream(case_dir: str, isolation: str) -> dict:
    return _isolated(_spark_stream, case_dir, isolation)


def _cleaned(case_dir: str, isolation: str, copy: str) -> dict:
    """A cleaner pass over each partition of a copy of the case, the topic taken as
    compacted (``log.cleanup.policy=compact``), as ``kafkafs compact`` runs it:
    {partition: (the pass's error place or None, Verdict before, Verdict after)}. "Before"
    is the log walk once the copy is open for writing (the loader's recovery has already
    cut an invalid tail of the active segment then, as Kafka's would: that is the
    loader's, not the cleaner's), "after" a read-only walk once the writer has shut down
    (what the next reader gets)."""
    from kafkafs.log.cleaner import CleanerConfig, LogCleaner
    from kafkafs.log.config import BrokerConfig
    from kafkafs.log.manager import LogManager

    shutil.copytree(case_dir, copy)
    config = BrokerConfig.from_properties({"log.cleanup.policy": "compact"}) \
        .with_log_dirs([copy])
    manager = LogManager(config)
    manager.startup()
    failed = {}
    try:
        before = _walk(manager, isolation)
        cleaner = LogCleaner(CleanerConfig.from_broker(config), config.log_dirs, manager.logs)
        try:
            for p in manager.partitions(TOPIC):
                result = cleaner.clean_log(manager.get_log(TOPIC, p))
                if result.error is not None:
                    failed[p] = _place(str(result.error)) or ("no place", str(result.error))
        finally:
            cleaner.shutdown()
    finally:
        manager.shutdown()
    after = _log_walk(copy, isolation)
    return {p: (failed.get(p), before[p], after.get(p, Verdict((), None))) for p in before}


def read_cleaner(case_dir: str, isolation: str, scratch: str) -> dict:
    return _isolated(_cleaned, case_dir, isolation, os.path.join(scratch, "cleaned"))


def _damage_places(log_text: str, p: int) -> list[tuple]:
    """The places of the daemon's damage lines for partition ``p``, in the order logged."""
    return [w for line in log_text.splitlines()
            if "Damaged data" in line and (w := _place(line)) and w[0].startswith(f"{TOPIC}-{p}/")]


def _mount_place(mnt: Mount, p: int, seen: int) -> tuple:
    """Where a view of partition ``p`` stopped, from the daemon's damage lines: the first
    line logged since the reader began (``seen`` lines of the partition were logged
    before), else -- the daemon logs a place once, whoever meets it first -- the first
    logged at all; ``("EIO", -1)`` when none names a place."""
    places = _damage_places(mnt.log(), p)
    return places[seen] if len(places) > seen else places[0] if places else ("EIO", -1)


def _read_view(mnt: Mount, p: int, view: str) -> Verdict:
    import base64

    seen = len(_damage_places(mnt.log(), p))
    data, failed = b"", None
    try:
        with open(mnt.path(TOPIC, str(p), view), "rb", buffering=0) as f:
            while True:
                chunk = f.read(F.READ_SIZE)
                if not chunk:
                    break
                data += chunk
    except OSError as exc:
        failed = exc.errno
    lines = F._split_lines(data)
    if view == "messages":
        records = tuple(None if v == b"null" else v for v in lines)
    else:
        dec = (lambda x: None if x is None else x.encode() if isinstance(x, str)
               else base64.b64decode(x["base64"]))
        records = tuple((obj["offset"], dec(obj.get("key")), dec(obj.get("value")))
                        for obj in map(json.loads, lines))
    where = None
    if failed is not None:
        assert failed == 5, (view, p, failed)  # EIO
        where = _mount_place(mnt, p, seen)
    return Verdict(records, where)


def _by_time(mnt: Mount, p: int, v: Verdict) -> list:
    """``readlink by-time/T`` for the timestamp T of every record of ``v`` and for one past
    the last: [(T, what it answered, what it should)] where they differ. It should name the
    first record of ``v`` whose timestamp is at or after T (timestamps may repeat or go
    back); past the last, ENOENT when ``v`` ends without damage, EIO when it ends at
    damage (what lies beyond is not known to be records)."""
    wrong = []
    probes = sorted(set(v.timestamps))
    for ts in probes + ([probes[-1] + 1] if probes else []):
        want = next((f"../offset/{r[0]}" for r, t in zip(v.records, v.timestamps) if t >= ts),
                    "ENOENT" if v.error is None else "EIO")
        try:
            got = os.readlink(mnt.path(TOPIC, str(p), "by-time", str(ts)))
        except OSError as exc:
            got = {2: "ENOENT", 5: "EIO"}.get(exc.errno, exc.strerror)
        if got != want:
            wrong.append((ts, got, want))
    return wrong


def _key_view(mnt: Mount, p: int) -> Verdict:
    """``ls key/`` and ``cat key/k`` of each name: Verdict of ((name, value), ...) sorted by
    name, the damage line's place when one was logged for the partition since it began."""
    seen = len(_damage_places(mnt.log(), p))
    kdir = mnt.path(TOPIC, str(p), "key")
    items = []
    for name in sorted(os.listdir(os.fsencode(kdir))):
        with open(os.path.join(os.fsencode(kdir), name), "rb") as f:
            items.append((name, f.read()))
    places = _damage_places(mnt.log(), p)
    return Verdict(tuple(items), places[seen] if len(places) > seen else
                   places[0] if places else None)


def expected_keys(v: Verdict) -> Verdict:
    """What the key view should show of the read_committed records ``v``: each key's latest
    record, tombstones absent, by name."""
    from kafkafs.fs.keys import key_name

    latest: dict = {}
    for _offset, key, value in v.records:
        if key is not None:
            latest[key] = value
    return Verdict(tuple(sorted((key_name(k), val) for k, val in latest.items()
                                if val is not None)), v.error)


def read_mount(case_dir: str, scratch: str, partitions, verdicts: dict,
               committed: dict) -> dict:
    """{(reader, partition): Verdict} of a real read-only mount: ``key/`` first (its map is
    made at first use), then ``messages`` (values), ``records.jsonl``, ``offset/N`` for the
    records ``verdicts[p]`` (the log's) holds, ``by-time/T`` for their timestamps."""
    mnt = Mount(pathlib.Path(scratch), log_dirs=[case_dir], extra_args=["--read-only"])
    mnt.start(timeout=TIMEOUT)
    out = {}
    try:
        for p in partitions:
            out[("key/", p)] = (_key_view(mnt, p), expected_keys(committed[p]))
            for view in ("messages", "records.jsonl"):
                out[(view, p)] = _read_view(mnt, p, view)
            answers = []
            for offset, _k, value in verdicts[p].records:
                try:
                    with open(mnt.path(TOPIC, str(p), "offset", str(offset)), "rb") as f:
                        answers.append((offset, f.read() == (value or b"")))
                except OSError as exc:
                    answers.append((offset, exc.strerror))
            out[("offset/N", p)] = answers
            out[("by-time/T", p)] = _by_time(mnt, p, verdicts[p])
        assert "Traceback" not in mnt.log(), mnt.log()
    finally:
        mnt.stop()
    return out


# -- the verdict -------------------------------------------------------------------------

def _values(v: Verdict) -> Verdict:
    return Verdict(tuple(r[2] for r in v.records), v.error)


def _torn_not_last(case_dir: str, where: tuple | None) -> bool:
    """Whether ``where`` is an incomplete batch at the end of a segment that is not the last
    (damage for a partition's readers, Kafka's "invalid bytes at the end" for dump)."""
    if where is None:
        return False
    rel, pos = where
    files = [r for r in F.log_files(case_dir) if r.startswith(rel.split("/")[0] + "/")]
    if rel not in files or rel == files[-1]:
        return False
    with open(os.path.join(case_dir, rel), "rb") as f:
        data = f.read()
    rest = len(data) - pos
    if rest < F.HEADER_UP_TO_MAGIC:
        return True
    length = int.from_bytes(data[pos + 8:pos + 12], "big", signed=True)
    return length + F.LOG_OVERHEAD > rest and length >= F.MIN_ENTRY_SIZE


def verdicts_of(case_dir: str, isolation: str, with_mount: bool, scratch: str) -> dict:
    """{partition: {reader: Verdict}} of every reader (see the module)."""
    parts = F.partitions(case_dir)
    logv = read_log(case_dir, isolation)
    committedv = logv if isolation == "read_committed" else read_log(case_dir,
                                                                     "read_committed")
    sparkv = read_spark_tasks(case_dir, isolation)
    streamv = read_spark_stream(case_dir, isolation)
    checkv = read_check(case_dir)
    cleanerv = read_cleaner(case_dir, isolation, scratch)
    mountv = read_mount(case_dir, os.path.join(scratch, "m"), parts, logv,
                        committedv) if with_mount else {}
    out = {}
    for p in parts:
        truth = F.judge_partition(case_dir, p)
        got = {"log": logv.get(p, Verdict((), None)),
               "consume": read_consume(case_dir, isolation, p),
               "dump": read_dump(case_dir, isolation, p, truth.log_start),
               "spark": sparkv.get(p, Verdict((), None)),
               "stream": streamv.get(p, Verdict((), None)),
               "cleaner": cleanerv[p],
               "check": checkv.get(p)}
        for key, v in mountv.items():
            if key[1] == p:
                got[key[0]] = v
        out[p] = (truth, got)
    return out


def disagreements(case_dir: str, per_partition: dict) -> list[str]:
    """What breaks the one verdict, in words ([] when every reader agrees)."""
    problems = []
    for p, (truth, got) in per_partition.items():
        one = got["log"]
        name = f"partition {p}"
        for reader, v in got.items():
            if reader == "log":
                continue
            if reader == "check":
                if v != one.error and not (one.error is None and v is not None
                                           and _torn_last_or_zero(case_dir, v)):
                    problems.append(f"{name}: check names {v}, the log {one.error}")
                continue
            if reader == "offset/N":
                bad = [a for a in v if a[1] is not True]
                if bad:
                    problems.append(f"{name}: offset/N does not answer {bad[:5]}")
                continue
            if reader == "by-time/T":
                if v:
                    problems.append(f"{name}: by-time/T answers (T, got, want) {v[:5]}")
                continue
            if reader == "key/":
                shown, want = v
                if shown.records != want.records:
                    problems.append(f"{name}: key/ shows {len(shown.records)} keys, the log "
                                    f"{len(want.records)}: "
                                    f"{sorted(set(shown.records) ^ set(want.records))[:3]}")
                if shown.error != want.error:
                    problems.append(f"{name}: key/ stops at {shown.error}, the log "
                                    f"(read_committed) at {want.error}")
                continue
            if reader == "cleaner":
                problems += _cleaner_problems(name, *v)
                continue
            want = _values(one) if reader == "messages" else one
            if reader == "dump" and _torn_not_last(case_dir, one.error):
                # dump: "invalid bytes at the end" of that file, and on with the next one
                if v.records[:len(want.records)] != want.records:
                    problems.append(f"{name}: dump's records are not the log's "
                                    f"({len(v.records)} vs {len(want.records)})")
                continue
            if v.records != want.records:
                n = next((i for i, (a, b) in enumerate(zip(v.records, want.records))
                          if a != b), min(len(v.records), len(want.records)))
                problems.append(f"{name}: {reader} delivered {len(v.records)} records, the "
                                f"log {len(want.records)}; first difference at item {n}")
            if v.error != want.error:
                problems.append(f"{name}: {reader} stops at {v.error}, the log at "
                                f"{want.error}")
        if not truth.ambiguous:
            expected = tuple((r.offset, r.key, r.value) for r in truth.expected)
            if one.records != expected:
                problems.append(f"{name}: the readers delivered {len(one.records)} records, "
                                f"the judge expects {len(expected)}")
            if (one.error is None) != (truth.damage is None) or \
                    (one.error is not None and one.error != truth.damage[:2]):
                problems.append(f"{name}: the readers stop at {one.error}, the judge's first "
                                f"damage is {truth.damage}")
    return problems


def _is_subsequence(short: tuple, long: tuple) -> bool:
    it = iter(long)
    return all(any(x == y for y in it) for x in short)


def _cleaner_problems(name: str, failed: tuple | None, one: Verdict,
                      after: Verdict) -> list[str]:
    """The cleaner's verdict against the log's (``one``, walked by the same writer before
    the pass): a pass that fails names the log's place of damage and changes nothing; a
    pass that succeeds met no damage (the readers still stop where they did: a damaged
    segment was not rewritten) and removed only what compaction may (records without a
    key, older records of a key -- every key is unique in the template, so every keyed
    record stays)."""
    problems = []
    if failed is not None:
        if failed != one.error:
            problems.append(f"{name}: the cleaner fails at {failed}, the log's damage is at "
                            f"{one.error}")
        if after != one:
            problems.append(f"{name}: a failed cleaner pass changed what readers get "
                            f"({len(after.records)} records, then {after.error})")
        return problems
    if after.error != one.error:
        problems.append(f"{name}: after a cleaner pass readers stop at {after.error}, before "
                        f"it at {one.error}")
    if not _is_subsequence(after.records, one.records):
        problems.append(f"{name}: a cleaner pass delivered records the log did not have")
    kept = {r[0] for r in after.records}
    lost = [r[0] for r in one.records if r[1] is not None and r[0] not in kept]
    if lost:
        problems.append(f"{name}: a cleaner pass lost keyed records at offsets {lost[:5]}")
    return problems


def _torn_last_or_zero(case_dir: str, where: tuple) -> bool:
    """A finding of ``check`` where readers see none: the torn tail of the last segment,
    which recovery truncates (readers end there quietly)."""
    rel, _pos = where
    files = [r for r in F.log_files(case_dir) if r.startswith(rel.split("/")[0] + "/")]
    return bool(files) and rel == files[-1]


@pytest.mark.mount
@pytest.mark.parametrize("name,mutations", CASES, ids=[c[0] for c in CASES])
def test_every_reader_reaches_one_verdict(name, mutations, tmp_path):
    case_dir = F.make_case_dir(mutations, str(tmp_path / "logs"))
    isolation = F.isolation_level(mutations)
    before = F.tree_stamp(case_dir)
    got = verdicts_of(case_dir, isolation, fuse_available(), str(tmp_path / "scratch"))
    assert F.tree_stamp(case_dir) == before, "a reader changed the log dir"
    problems = disagreements(case_dir, got)
    assert not problems, "\n".join([*map(F.describe, mutations), *problems])


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.parametrize("name,mutations", [c for c in CASES if c[0].endswith("-0")],
                         ids=[c[0] for c in CASES if c[0].endswith("-0")])
def test_a_spark_query_reaches_the_same_verdict(name, mutations, tmp_path, spark):
    """The real query: its rows when it succeeds, the CorruptRecordError's place when not."""
    case_dir = F.make_case_dir(mutations, str(tmp_path / "logs"))
    isolation = F.isolation_level(mutations)
    logv = read_log(case_dir, isolation)
    df = (spark.read.format("kafkalog").option("subscribe", TOPIC)
          .option("failOnDataLoss", "true").option("kafka.isolation.level", isolation)
          .load(case_dir))
    errors = [v.error for v in logv.values() if v.error is not None]
    try:
        rows = df.select("partition", "offset", "key", "value").collect()
    except Exception as exc:  # noqa: BLE001 - Spark wraps the executor's error
        text = str(exc)
        assert errors, f"the query failed on a log every reader reads whole: {text[-500:]}"
        where = _place(text)
        assert where in errors, (where, errors, text[-500:])
        return
    assert not errors, f"the query succeeded where the readers stop at {errors}"
    by_p: dict = {}
    for r in rows:
        by_p.setdefault(r["partition"], []).append(
            (r["offset"], None if r["key"] is None else bytes(r["key"]),
             None if r["value"] is None else bytes(r["value"])))
    for p, v in logv.items():
        assert tuple(by_p.get(p, [])) == v.records, f"partition {p}"


def teardown_module(module):
    shutil.rmtree(F.work_root(), ignore_errors=True)
