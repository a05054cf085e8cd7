"""The all-or-nothing commit of a bulk write (a ``kafkalog`` Spark job), decided by one
durable commit record: the topics it creates or replaces and its appends to existing
partitions.

A bulk write stages its data as runs (:mod:`kafkafs.log.staging`), fsynced, out of sight:
whole partition dirs for a topic it creates (or, overwriting, replaces), runs to append for
an existing partition. Publishing them takes several renames and writes; a process killed
among them would leave some partitions with the write and some without, a new topic with
some of its partitions, and a torn batch at a tail. So the commit (:func:`commit`) goes:

1. every partition to append to is flushed and its log end offset taken (``before``), and
   each run's offsets counted from its batch headers; each topic to adopt gets a new topic
   id, already written into its staged dirs' ``partition.metadata`` (by the caller,
   :meth:`LogManager.commit_job <kafkafs.log.manager.LogManager.commit_job>`), and the
   doomed names of a replaced topic's dirs are chosen;
2. one **commit record** is written into the log dir root: the regular file
   ``.kafkafs-commit-<job id>.json`` (JSON, below), written to a temporary name, fsynced,
   renamed, and the root fsynced. A Kafka broker loads only the directories of a log dir
   and leaves its regular files alone (as ``.lock`` or ``meta.properties``); kafkafs lists
   only ``<topic>-<partition>`` directories. **Once the record is durable, the write
   happened**;
3. each topic is adopted (:func:`adopt_on_disk`): a replaced topic's dirs renamed to their
   doomed names, the staged dirs renamed ``<topic>-<p>``, the roots fsynced, the topic's
   checkpoint entries dropped, its overrides saved, the doomed dirs removed;
4. the runs are appended to each partition in order and each log flushed;
5. the job's staged dirs are removed, then the record (and the root fsynced).

Whoever next opens the log dir for writing -- a writable
:class:`~kafkafs.log.manager.LogManager` at startup: the daemon, a CLI writer, the next
Spark write's commit; ``kafkafs check --repair`` -- finishes an interrupted commit first:
it **rolls forward**. The adoptions first (:func:`finish_adoptions`, before the partition
dirs are listed; :func:`adopt_on_disk` is idempotent: an old dir still named
``<topic>-<p>`` -- its ``partition.metadata`` not of the new topic id -- is renamed away, a
staged dir still there is renamed in, one gone must have become a partition dir of the new
topic id). Then the appends (:func:`finish_interrupted`): a partition at ``after`` (=
``before`` + the runs' offsets) is done; one at ``before`` gets the runs; one between (its
loader has already truncated a torn batch at the tail) holds a prefix of the runs'
batches, each with the offsets it would get (the runs are plain batches appended one for
one, offsets restamped from ``before``): the batches past that prefix are appended, which
ends as truncating to ``before`` and appending everything again would, without writing it
twice. Then the staged dirs of the job and the record are removed. Doing it again after a
crash of the recovery itself is the same: every step is idempotent. A temporary record
(killed before the rename) decided nothing and is removed.

A partition outside ``[before, after]``, a batch boundary that does not fall at its log end
offset, a staged run or staged partition dir gone while still needed (a Kafka broker
started on the log dir in between deletes ``-delete`` dirs), or a ``<topic>-<p>`` that is
not the replaced topic's in the way of a new one cannot be rolled forward:
:class:`CommitRecoveryError`, nothing more changed, the record kept.

Readers never show a torn commit: while a record exists, each partition it appends to is
read up to its ``before``, and each topic it adopts is not shown at all (:func:`read_view`,
used by read-only loads and the Spark read path): a new topic appears complete, a
replaced one disappears while the commit runs and comes back with its new data.

The record (all offsets are Kafka offsets; ``version`` 2 when it has ``topics``, which a
kafkafs that knows only version 1 refuses rather than half-finishes)::

    {"version": 1|2, "job": "<16 hex>",
     "partitions": [{"topic": T, "partition": P, "before": LEO, "after": LEO + n,
                     "runs": [{"dir": "<T>-<P>.<stage id>-delete", "offsets": n1}, ...]},
                    ...],
     "topics": [{"topic": T, "topic_id": "<base64 uuid>", "replace": bool,
                 "config": {overrides},
                 "partitions": [{"partition": P, "dir": "<T>-<P>.<stage id>-delete"}, ...],
                 "old": [{"log_dir": "/abs/root", "dir": "<T>-<P>",
                          "doomed": "<T>-<P>.<stage id>-delete"}, ...]},
                ...]}

Synchronous, no trio; callers in the daemon run it off the event loop.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
import stat
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..record.batch import LOG_OVERHEAD, MAGIC_OFFSET, RecordBatch
from ..record.errors import CorruptRecordError
from . import checkpoint as ckpt
from . import faults, safeio
from .errors import CorruptCheckpointError, LogError
from .log import Log
from .names import (
    LOG_SUFFIX,
    TOPIC_CONFIG_FILE,
    parse_partition_dir,
    parse_segment_filename,
    partition_dir_name,
)
from .staging import (
    iter_run,
    parse_stage_dir,
    remove_job_stage_dirs,
    remove_stage_dir,
    rename_noreplace,
)

log = logging.getLogger(__name__)

RECORD_PREFIX = ".kafkafs-commit-"
RECORD_SUFFIX = ".json"
TMP_SUFFIX = ".tmp"
_RECORD = re.compile(r"^\.kafkafs-commit-([0-9a-f]{16})\.json$")
_LAST_OFFSET_DELTA = struct.Struct(">i")
_LAST_OFFSET_DELTA_AT = 23  # base offset 8, length 4, leader epoch 4, magic 1, crc 4, attrs 2


class CommitRecoveryError(LogError):
    """An interrupted commit cannot be rolled forward (see the module); the message names
    the record and the partition. The record is kept."""


@dataclass
class PartitionCommit:
    """One partition of a commit: ``before``/``after`` log end offsets, ``runs`` (staged dir
    names, in append order) and ``offsets`` (each run's offset count)."""

    topic: str
    partition: int
    before: int
    runs: list[str]
    offsets: list[int]

    @property
    def after(self) -> int:
        return self.before + sum(self.offsets)


@dataclass
class TopicAdoption:
    """One topic a commit creates (or, ``replace``, overwrites) from whole staged partition
    dirs of the record's log dir: ``staged`` maps every partition 0..N-1 to its staged dir
    name (renamed ``<topic>-<p>`` there), ``config`` the topic's overrides, ``topic_id`` the
    new topic id (already in each staged dir's ``partition.metadata`` when the record is
    written) and ``old`` the old topic's partition dirs to rename away, as ``(log dir root,
    dir name, doomed name)`` (the doomed name a staged-dir name of the job, removed once every
    new dir is in)."""

    topic: str
    staged: dict[int, str]
    config: dict[str, str] = field(default_factory=dict)
    replace: bool = False
    topic_id: str = ""
    old: list[tuple[str, str, str]] = field(default_factory=list)


@dataclass
class CommitRecord:
    """A commit record of job ``job_id`` in ``log_dir``: the ``partitions`` it appends to and
    the ``topics`` it adopts."""

    log_dir: str
    job_id: str
    partitions: list[PartitionCommit] = field(default_factory=list)
    topics: list[TopicAdoption] = field(default_factory=list)

    @property
    def name(self) -> str:
        return record_name(self.job_id)

    @property
    def path(self) -> str:
        return os.path.join(self.log_dir, self.name)

    def to_json(self) -> bytes:
        doc = {
            "version": 2 if self.topics else 1, "job": self.job_id,
            "partitions": [{"topic": p.topic, "partition": p.partition, "before": p.before,
                            "after": p.after,
                            "runs": [{"dir": d, "offsets": n}
                                     for d, n in zip(p.runs, p.offsets)]}
                           for p in self.partitions]}
        if self.topics:
            doc["topics"] = [{"topic": t.topic, "topic_id": t.topic_id, "replace": t.replace,
                              "config": dict(t.config),
                              "partitions": [{"partition": p, "dir": d}
                                             for p, d in sorted(t.staged.items())],
                              "old": [{"log_dir": r, "dir": n, "doomed": x}
                                      for r, n, x in t.old]}
                             for t in self.topics]
        return json.dumps(doc, indent=1).encode()


def record_name(job_id: str) -> str:
    """``.kafkafs-commit-<job id>.json``."""
    return f"{RECORD_PREFIX}{job_id}{RECORD_SUFFIX}"


def is_record_name(name: str) -> bool:
    """Whether ``name`` is a commit record's name (``.kafkafs-commit-<job id>.json``)."""
    return _RECORD.match(name) is not None


def parse_record(log_dir: str, name: str, data: bytes) -> CommitRecord:
    """The :class:`CommitRecord` in ``data`` (the file ``name`` of ``log_dir``). Raises
    CommitRecoveryError for what is not a record kafkafs wrote."""
    m = _RECORD.match(name)
    try:
        doc = json.loads(data)
        if not m or doc.get("version") not in (1, 2) or doc.get("job") != m.group(1):
            raise ValueError("not a version-1 or 2 record of its job")
        parts = []
        for p in doc["partitions"]:
            runs = [str(r["dir"]) for r in p["runs"]]
            pc = PartitionCommit(str(p["topic"]), int(p["partition"]), int(p["before"]),
                                 runs, [int(r["offsets"]) for r in p["runs"]])
            if pc.after != int(p["after"]) or any(
                    (parse_stage_dir(r) or ())[:2] != (pc.topic, pc.partition) for r in runs):
                raise ValueError(f"inconsistent entry for {pc.topic}-{pc.partition}")
            parts.append(pc)
        topics = [_parse_adoption(t, m.group(1)) for t in doc.get("topics") or ()]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CommitRecoveryError(
            f"{os.path.join(log_dir, name)} is not a commit record kafkafs can read ({exc}); "
            "nothing was done. Remove it by hand to give the write up (its partitions may "
            "then hold part of it)") from None
    return CommitRecord(log_dir, m.group(1), parts, topics)


def _parse_adoption(t: dict, job: str) -> TopicAdoption:
    topic = str(t["topic"])
    staged = {int(p["partition"]): str(p["dir"]) for p in t["partitions"]}
    if not staged or sorted(staged) != list(range(len(staged))):
        raise ValueError(f"the partitions of {topic} are not 0..N-1")
    for p, name in staged.items():
        parsed = parse_stage_dir(name)
        if parsed is None or parsed[:2] != (topic, p) or not parsed[2].startswith(job):
            raise ValueError(f"{name!r} is not a staged dir of {topic}-{p} of the job")
    old = []
    for o in t.get("old") or ():
        root, name, doomed = str(o["log_dir"]), str(o["dir"]), str(o["doomed"])
        tp = parse_partition_dir(name)
        parsed = parse_stage_dir(doomed)
        if tp is None or tp[0] != topic or parsed is None or parsed[:2] != tp \
                or not parsed[2].startswith(job) or not os.path.isabs(root):
            raise ValueError(f"bad old dir entry {o!r} of {topic}")
        old.append((root, name, doomed))
    topic_id = str(t["topic_id"])
    if not topic_id:
        raise ValueError(f"no topic id for {topic}")
    return TopicAdoption(topic, staged, {str(k): str(v) for k, v in t["config"].items()},
                         bool(t["replace"]), topic_id, old)


def list_records(log_dir: str) -> list[str]:
    """Names of the commit records (regular files) in the log dir root ``log_dir``, sorted;
    empty when it does not exist."""
    try:
        entries = safeio.scan(log_dir)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(n for n, mode in entries.items()
                  if _RECORD.match(n) and stat.S_ISREG(mode))


def read_records(log_dir: str) -> list[CommitRecord]:
    """Every commit record of ``log_dir``. Raises CommitRecoveryError, OSError."""
    out = []
    with safeio.Dir.open(log_dir, follow=True) as root:
        for name in list_records(log_dir):
            try:
                data = root.read(name)
            except FileNotFoundError:
                continue  # finished meanwhile
            out.append(parse_record(log_dir, name, data))
    return out


def read_limits(log_dir: str) -> dict[tuple[str, int], int]:
    """``{(topic, partition): before}`` of every partition an interrupted (or running)
    commit in ``log_dir`` appends to: readers show each only up to that offset. A record
    that cannot be read is warned about and adds nothing."""
    return read_view(log_dir)[0]


def hidden_topics(log_dir: str) -> set[str]:
    """The topics an interrupted (or running) commit in ``log_dir`` adopts (creates or
    overwrites): readers do not show them at all while its record exists (see the
    module)."""
    return read_view(log_dir)[1]


def read_view(log_dir: str) -> tuple[dict[tuple[str, int], int], set[str]]:
    """``(read_limits, hidden_topics)`` of ``log_dir`` from one reading of its records."""
    out: dict[tuple[str, int], int] = {}
    hidden: set[str] = set()
    for name in list_records(log_dir):
        try:
            with safeio.Dir.open(log_dir, follow=True) as root:
                rec = parse_record(log_dir, name, root.read(name))
        except FileNotFoundError:
            continue
        except (OSError, CommitRecoveryError) as exc:
            log.warning("cannot read the commit record %s: %s", name, exc)
            continue
        for p in rec.partitions:
            key = (p.topic, p.partition)
            out[key] = min(out.get(key, p.before), p.before)
        hidden.update(t.topic for t in rec.topics)
    return out, hidden


def run_offsets(path: str) -> int:
    """How many offsets the staged run ``path`` holds: the sum of ``last offset delta + 1``
    over its batches, read from the batch headers only (the appends check every CRC).
    Raises CorruptRecordError for a batch that cannot be framed, FileNotFoundError,
    OSError."""
    total = 0
    with safeio.Dir.open(path) as d:
        bases = sorted(p[0] for p in map(parse_segment_filename, d.files())
                       if p and p[1] == LOG_SUFFIX and p[2] == "")
        if not bases:  # (as iter_run: refused before a record names it)
            raise FileNotFoundError(errno.ENOENT, "no log segment in the staged dir", path)
        for base in bases:
            name = f"{base:020d}{LOG_SUFFIX}"
            fd = d.open_file(name)
            try:
                size = os.fstat(fd).st_size
                pos = 0
                while pos < size:
                    head = os.pread(fd, _LAST_OFFSET_DELTA_AT + 4, pos)
                    if len(head) < _LAST_OFFSET_DELTA_AT + 4 or head[MAGIC_OFFSET] != 2:
                        raise CorruptRecordError("a batch that cannot be framed in a staged "
                                                 "run", path=d.join(name), position=pos)
                    length = int.from_bytes(head[8:12], "big", signed=True)
                    if length <= 0 or pos + LOG_OVERHEAD + length > size:
                        raise CorruptRecordError("an incomplete batch in a staged run",
                                                 path=d.join(name), position=pos)
                    total += _LAST_OFFSET_DELTA.unpack_from(head, _LAST_OFFSET_DELTA_AT)[0] + 1
                    pos += LOG_OVERHEAD + length
            finally:
                os.close(fd)
    return total


def write_record(rec: CommitRecord) -> None:
    """Write ``rec`` durably (temporary file, fsync, rename, fsync of the root). Raises
    FileExistsError when a record of the job exists, OSError."""
    with safeio.Dir.open(rec.log_dir, follow=True) as root:
        if root.is_file(rec.name):
            raise FileExistsError(f"{rec.path} exists")
        tmp = rec.name + TMP_SUFFIX
        root.unlink(tmp)
        fd = root.create_file(tmp, os.O_WRONLY)
        try:
            safeio._write_all(fd, rec.to_json())
            faults.point("commit-record-tmp")
            os.fsync(fd)
        finally:
            os.close(fd)
        root.rename(tmp, rec.name)
        root.fsync()


def remove_record(log_dir: str, name: str) -> None:
    """Unlink the record ``name`` (and its temporary file) and fsync the root."""
    with safeio.Dir.open(log_dir, follow=True) as root:
        root.unlink(name + TMP_SUFFIX)
        root.unlink(name)
        root.fsync()


def _staged_path(log_dir: str, name: str) -> str:
    return os.path.join(log_dir, name)


def apply_partition(lg: Log, pc: PartitionCommit, log_dir: str) -> int:
    """Bring ``lg`` to ``pc.after``: append the batches of ``pc``'s runs it does not hold
    yet (all of them at ``before``; none at ``after``), then flush it. Returns the offsets
    appended. Raises CommitRecoveryError (see the module), and what reading the runs and
    appending raise (CorruptRecordError, RecordTooLargeError, OSError)."""
    leo = lg.log_end_offset
    if leo == pc.after:
        return 0
    if not pc.before <= leo < pc.after:
        raise CommitRecoveryError(
            f"{lg.name} is at offset {leo}, outside the {pc.before}..{pc.after} of the "
            "commit record: it changed since the commit began")
    skip = leo - pc.before
    for name in pc.runs:
        path = _staged_path(log_dir, name)
        if not os.path.isdir(path):
            raise CommitRecoveryError(
                f"{lg.name} needs the staged run {name}, which is gone from {log_dir} (a "
                "Kafka broker started on the log dir deletes -delete dirs)")
        for chunk in iter_run(path, validate=True):
            if skip:
                keep = []
                for view in chunk:
                    n = RecordBatch.from_buffer(view).last_offset_delta + 1
                    if skip >= n:
                        skip -= n
                    elif skip:
                        raise CommitRecoveryError(
                            f"{lg.name} ends at offset {leo}, inside a batch of {name}: "
                            "not a prefix of the commit")
                    else:
                        keep.append(view)
                chunk = keep
            done = 0
            while done < len(chunk):
                done += lg.append_encoded_run(chunk[done:])
                faults.point("commit-append")
    lg.flush()
    return lg.log_end_offset - leo

# -- topics adopted whole (new topics, overwrites) ----------------------------------------
#: the offset checkpoints of a log dir that may still name the partitions of a replaced
#: topic (or of a topic of that name deleted earlier): their entries are dropped
_CHECKPOINTS = ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                "cleaner-offset-checkpoint")


def _topic_id_of(path: str) -> str | None:
    """The topic id in the ``partition.metadata`` of the directory ``path``; None when it
    is no directory (a link is none), has no such file or one that cannot be read."""
    try:
        with safeio.Dir.open(path) as d:
            return ckpt.read_partition_metadata(d.join("partition.metadata"), dir=d)
    except (OSError, CorruptCheckpointError):
        return None


def _forget_checkpointed(root: str, topic: str) -> None:
    """Drop the entries of ``topic`` from the offset checkpoints of the log dir ``root``."""
    for name in _CHECKPOINTS:
        path = os.path.join(root, name)
        try:
            entries = ckpt.read_offset_checkpoint(path)
        except (OSError, CorruptCheckpointError):
            continue  # (a corrupt one is ignored by every loader anyway)
        kept = {tp: o for tp, o in entries.items() if tp[0] != topic}
        if len(kept) != len(entries):
            ckpt.write_offset_checkpoint(path, kept)


def save_topic_config(root: str, topic: str, overrides: dict[str, str]) -> None:
    """Set ``topic``'s overrides in the topic configs file of the log dir ``root`` (none:
    its entry removed), atomically and durably. Raises OSError, ValueError (a file that is
    not JSON)."""
    path = os.path.join(root, TOPIC_CONFIG_FILE)
    try:
        doc = json.loads(ckpt.read_file(path).decode("utf-8"))
    except FileNotFoundError:
        doc = {"version": 1, "topics": {}}
    topics = doc.setdefault("topics", {})
    if topics.get(topic) == (overrides or None):
        return
    if overrides:
        topics[topic] = dict(overrides)
    else:
        topics.pop(topic, None)
    ckpt.atomic_write(path, json.dumps(doc, indent=1, sort_keys=True).encode() + b"\n")


def adopt_on_disk(rec: CommitRecord, ta: TopicAdoption,
                  save_config: Callable[[str, dict[str, str]], None] | None = None) -> None:
    """Carry the adoption ``ta`` of the record ``rec`` out on disk, idempotently (a step
    already done is skipped, so a crash anywhere is finished by doing it again):

    1. every old partition dir still there (its ``partition.metadata`` not of the new topic
       id) is renamed to its doomed name;
    2. every staged dir still there is renamed ``<topic>-<p>`` (never over an existing
       entry); one gone must have become a partition dir of the new topic id;
    3. the roots are fsynced, the topic's entries dropped from their offset checkpoints
       and its overrides saved (``save_config(topic, overrides)``; default: the topic
       configs file of the record's log dir);
    4. the doomed old dirs are removed.

    Raises CommitRecoveryError when a staged dir is gone without having been renamed (a
    Kafka broker started on the log dir in between deletes ``-delete`` dirs) or a
    ``<topic>-<p>`` not of the old topic is in the way; OSError."""
    roots = {rec.log_dir} | {r for r, _n, _x in ta.old}
    for root, name, doomed in ta.old:
        path = os.path.join(root, name)
        if os.path.isdir(path) and not os.path.islink(path) \
                and _topic_id_of(path) != ta.topic_id:
            os.rename(path, os.path.join(root, doomed))
            faults.point("adopt-old-renamed")
    for p, name in sorted(ta.staged.items()):
        src = os.path.join(rec.log_dir, name)
        final = os.path.join(rec.log_dir, partition_dir_name(ta.topic, p))
        if os.path.isdir(src) and not os.path.islink(src):
            try:
                rename_noreplace(src, final)
            except FileExistsError:
                raise CommitRecoveryError(
                    f"the commit record {rec.path} creates {final}, but a directory of that "
                    "name that is not of the replaced topic is in the way") from None
            faults.point("adopt-rename")
        elif _topic_id_of(final) != ta.topic_id:
            raise CommitRecoveryError(
                f"the commit record {rec.path} creates {final} from the staged dir {name}, "
                f"which is gone from {rec.log_dir} (a Kafka broker started on the log dir "
                "deletes -delete dirs)")
    for root in sorted(roots):
        with safeio.Dir.open(root, follow=True) as rdir:
            rdir.fsync()
        _forget_checkpointed(root, ta.topic)
    if save_config is None:
        save_topic_config(rec.log_dir, ta.topic, ta.config)
    else:
        save_config(ta.topic, ta.config)
    for root, _name, doomed in ta.old:
        safeio.remove_tree(os.path.join(root, doomed))
    faults.point("adopt-topic-done")


def finish_adoptions(log_dir: str) -> dict[str, dict[str, str]]:
    """(a writable open, before it lists the partition dirs) Carry out the adoptions of
    every commit record of ``log_dir`` (:func:`adopt_on_disk`; the records stay: the appends
    are finished by :func:`finish_interrupted` once the logs are loaded). Returns
    ``{topic: overrides}`` of the topics adopted, for the caller to save in every log dir.
    Raises CommitRecoveryError, OSError."""
    out = {}
    for rec in read_records(log_dir):
        for ta in rec.topics:
            log.warning("Finishing the adoption of topic %s (%d partition(s)) by the "
                        "interrupted commit %s", ta.topic, len(ta.staged), rec.path)
            adopt_on_disk(rec, ta)
            out[ta.topic] = dict(ta.config)
    return out



def _locked(logs: Iterable[Log]):
    stack = contextlib.ExitStack()
    for lg in sorted(logs, key=lambda g: (g.topic, g.partition)):
        stack.enter_context(lg.lock)
    return stack


def commit(log_dir: str, job_id: str, runs: dict[tuple[str, int], list[str]],
           get_log: Callable[[str, int], Log], adoptions: Iterable[TopicAdoption] = (),
           adopt: Callable[[CommitRecord, TopicAdoption], None] | None = None,
           after_adopt: Callable[[], None] | None = None) -> CommitRecord | None:
    """Publish a job all or nothing (see the module): adopt the topics ``adoptions`` (their
    staged dirs already hold the ``partition.metadata`` of their ``topic_id``) with
    ``adopt(record, adoption)`` (default :func:`adopt_on_disk`), then append the staged runs
    ``runs`` (``(topic, partition) -> [staged dir names in log_dir]``, in order) to the
    logs ``get_log(topic, partition)``, holding every appended log's lock throughout;
    ``after_adopt()`` is called once the adoptions are done (or failed). Returns the record
    (already removed), or None when there was nothing to do. Raises what reading the runs
    raises before the record is written (nothing changed: CorruptRecordError,
    FileNotFoundError), and once it is written what adopting (CommitRecoveryError, OSError)
    and appending raise -- the record then stays, and the next writable open of the log dir
    finishes the commit."""
    wanted = {tp: names for tp, names in runs.items() if names}
    adoptions = list(adoptions)
    adopt = adopt or adopt_on_disk
    try:
        if not wanted and not adoptions:
            return None
        logs = {tp: get_log(*tp) for tp in sorted(wanted)}
        offsets = {tp: [run_offsets(_staged_path(log_dir, n)) for n in names]
                   for tp, names in wanted.items()}
        with _locked(logs.values()):
            rec = CommitRecord(log_dir, job_id, topics=adoptions)
            for tp, lg in logs.items():
                lg.flush()
                rec.partitions.append(PartitionCommit(tp[0], tp[1], lg.log_end_offset,
                                                      list(wanted[tp]), offsets[tp]))
            faults.point("commit-before-record")
            write_record(rec)
            faults.point("commit-record-written")
            for ta in rec.topics:
                adopt(rec, ta)
            if after_adopt is not None:
                after_adopt()
                after_adopt = None
            for pc in rec.partitions:
                apply_partition(logs[(pc.topic, pc.partition)], pc, log_dir)
                faults.point("commit-partition-done")
            for pc in rec.partitions:
                for name in pc.runs:
                    remove_stage_dir(log_dir, name)
            # and every other staged dir of the job (runs merged into an adopted topic's
            # dirs, those of killed task attempts), as finish() does
            remove_job_stage_dirs(log_dir, job_id)
            remove_record(log_dir, rec.name)
            faults.point("commit-record-removed")
        return rec
    finally:
        if after_adopt is not None:
            after_adopt()


def finish(rec: CommitRecord, get_log: Callable[[str, int], Log]) -> None:
    """Roll the interrupted commit ``rec`` forward (see the module): finish its adoptions
    (:func:`adopt_on_disk`; nothing left to do after :func:`finish_adoptions`) and its
    appends, then remove its job's staged dirs and the record. Raises CommitRecoveryError
    (record kept; also for a damaged staged run: the batches before the damage are
    appended), and what appending raises (OSError such as ENOSPC: record kept, the next
    writer goes on)."""
    for ta in rec.topics:
        adopt_on_disk(rec, ta)
    for pc in rec.partitions:
        try:
            lg = get_log(pc.topic, pc.partition)
        except (LogError, OSError) as exc:
            raise CommitRecoveryError(
                f"the commit record {rec.path} names {pc.topic}-{pc.partition}, which cannot "
                f"be opened: {exc}") from None
        with lg.lock:
            try:
                appended = apply_partition(lg, pc, rec.log_dir)
            except (CommitRecoveryError, CorruptRecordError) as exc:
                raise CommitRecoveryError(
                    f"cannot finish the interrupted commit {rec.path}: {exc}. Nothing more was "
                    f"changed in {lg.name}; remove the record by hand to give the rest of the "
                    "write up") from None
        if appended:
            log.warning("Finished an interrupted commit in %s: appended %d offset(s) to %s",
                        rec.log_dir, appended, lg.name)
        faults.point("recover-partition-done")
    remove_job_stage_dirs(rec.log_dir, rec.job_id)
    remove_record(rec.log_dir, rec.name)


def finish_interrupted(log_dir: str, get_log: Callable[[str, int], Log]) -> int:
    """Finish every interrupted commit of ``log_dir``. Its temporary records, which decided
    nothing, are removed, and so are the requests left by writers killed while they asked
    a daemon (:func:`write_request`): whoever opens the log dir for writing holds its lock,
    so no daemon serves it and no request is in flight. Returns how many commits were
    finished. Raises as :func:`finish`."""
    with safeio.Dir.open(log_dir, follow=True) as root:
        for name in root.listdir():
            if _REQUEST.match(name) or (name.startswith(RECORD_PREFIX)
                                        and name.endswith(RECORD_SUFFIX + TMP_SUFFIX)):
                root.unlink(name)
    recs = read_records(log_dir)
    for rec in recs:
        log.warning("Found an interrupted commit in %s (%s, %d partition(s), %d topic(s) "
                    "adopted): rolling it forward", log_dir, rec.name, len(rec.partitions),
                    len(rec.topics))
        finish(rec, get_log)
    return len(recs)


# -- a commit asked of the daemon holding the log dir ------------------------------------
REQUEST_SUFFIX = ".request.json"
_REQUEST = re.compile(r"^\.kafkafs-commit-([0-9a-f]{16})\.request\.json$")


def request_name(job_id: str) -> str:
    """``.kafkafs-commit-<job id>.request.json``: what a writer asks the daemon holding the
    log dir to commit (:func:`write_request`); a regular file, ignored as records are."""
    return f"{RECORD_PREFIX}{job_id}{REQUEST_SUFFIX}"


def write_request(log_dir: str, job_id: str, runs: dict[tuple[str, int], list[str]],
                  adoptions: Iterable[TopicAdoption] = ()) -> str:
    """Write the request to commit ``runs`` and ``adoptions`` (as :func:`commit` takes
    them; of each adoption its ``topic``, ``staged``, ``config`` and ``replace``) of job
    ``job_id`` into ``log_dir``; returns its name. It needs no fsync: the daemon's commit
    record decides. Raises OSError."""
    name = request_name(job_id)
    doc = {"version": 1, "job": job_id,
           "runs": [{"topic": t, "partition": p, "dirs": list(names)}
                    for (t, p), names in sorted(runs.items())],
           "topics": [{"topic": a.topic, "replace": a.replace, "config": dict(a.config),
                       "dirs": [{"partition": p, "dir": d} for p, d in sorted(a.staged.items())]}
                      for a in adoptions]}
    with safeio.Dir.open(log_dir, follow=True) as root:
        root.unlink(name)
        root.write_new(name, json.dumps(doc).encode())
    return name


def read_request(log_dir: str, name: str
                 ) -> tuple[str, dict[tuple[str, int], list[str]], list[TopicAdoption]]:
    """``(job id, runs, adoptions)`` of the request ``name`` in ``log_dir`` (the adoptions
    without topic id or old dirs: the committer fills them in). Raises ValueError for a
    name or content that is not a request (a staged dir of another job or partition
    included), FileNotFoundError, OSError."""
    m = _REQUEST.match(name)
    if not m:
        raise ValueError(f"not a commit request: {name!r}")
    with safeio.Dir.open(log_dir, follow=True) as root:
        data = root.read(name)
    try:
        doc = json.loads(data)
        job = m.group(1)
        if doc.get("version") != 1 or doc.get("job") != job:
            raise ValueError("not a version-1 request of its job")
        runs: dict[tuple[str, int], list[str]] = {}
        for r in doc["runs"]:
            tp = (str(r["topic"]), int(r["partition"]))
            dirs = [str(d) for d in r["dirs"]]
            for d in dirs:
                parsed = parse_stage_dir(d)
                if parsed is None or parsed[:2] != tp or not parsed[2].startswith(job):
                    raise ValueError(f"{d!r} is not a staged run of job {job} for {tp}")
            runs[tp] = dirs
        adoptions = []
        for t in doc.get("topics") or ():
            ta = _parse_adoption({"topic": t["topic"], "topic_id": "-", "replace": t["replace"],
                                  "config": t["config"], "partitions": t["dirs"]}, job)
            ta.topic_id = ""
            adoptions.append(ta)
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"malformed commit request {name}: {exc}") from None
    return job, runs, adoptions


def remove_request(log_dir: str, job_id: str) -> None:
    """Remove the request of ``job_id`` (missing is fine)."""
    with safeio.Dir.open(log_dir, follow=True) as root:
        root.unlink(request_name(job_id))
