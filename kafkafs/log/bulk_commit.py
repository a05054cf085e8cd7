"""The all-or-nothing commit of a bulk write (a ``kafkalog`` Spark write) to existing
partitions, decided by one durable commit record.

A bulk write stages its data as runs (:mod:`kafkafs.log.staging`), fsynced, out of sight.
Appending the runs to several partitions takes several writes; a process killed among them
would leave some partitions with the write and some without, and a torn batch at a tail.
So the commit (:func:`commit`) goes:

1. every partition's log is flushed and its log end offset taken (``before``), and each
   run's offsets counted from its batch headers;
2. one **commit record** is written into the log dir root: the regular file
   ``.kafkafs-commit-<job id>.json`` (JSON, below), written to a temporary name, fsynced,
   renamed, and the root fsynced. A Kafka broker loads only the directories of a log dir
   and leaves its regular files alone (as ``.lock`` or ``meta.properties``); kafkafs lists
   only ``<topic>-<partition>`` directories. **Once the record is durable, the write
   happened**;
3. the runs are appended to each partition in order and each log flushed;
4. the runs are removed, then the record (and the root fsynced).

Whoever next opens the log dir for writing -- a writable
:class:`~kafkafs.log.manager.LogManager` at startup: the daemon, a CLI writer, the next
Spark write's commit -- finishes an interrupted commit first (:func:`finish_interrupted`):
it **rolls forward**. A partition at ``after`` (= ``before`` + the runs' offsets) is done;
one at ``before`` gets the runs; one between (its loader has already truncated a torn
batch at the tail) holds a prefix of the runs' batches, each with the offsets it would get
(the runs are plain batches appended one for one, offsets restamped from ``before``): the
batches past that prefix are appended, which ends as truncating to ``before`` and
appending everything again would, without writing it twice. Then the staged dirs of the
job and the record are removed. Doing it again after a crash of the recovery itself is the
same: every step is idempotent. A temporary record (killed before the rename) decided
nothing and is removed.

A partition outside ``[before, after]``, a batch boundary that does not fall at its log end
offset, or a staged run gone while a partition still needs it (a Kafka broker started on
the log dir in between deletes ``-delete`` dirs) cannot be rolled forward:
:class:`CommitRecoveryError`, nothing changed by that partition, the record kept.

Readers never show a torn commit: while a record exists, each partition it names is read
up to its ``before`` (:func:`read_limits`, used by read-only loads).

The record (all offsets are Kafka offsets)::

    {"version": 1, "job": "<16 hex>",
     "partitions": [{"topic": T, "partition": P, "before": LEO, "after": LEO + n,
                     "runs": [{"dir": "<T>-<P>.<stage id>-delete", "offsets": n1}, ...]},
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
from . import faults, safeio
from .errors import LogError
from .log import Log
from .names import LOG_SUFFIX, parse_segment_filename
from .staging import iter_run, parse_stage_dir, remove_job_stage_dirs, remove_stage_dir

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
class CommitRecord:
    """A commit record of job ``job_id`` in ``log_dir``."""

    log_dir: str
    job_id: str
    partitions: list[PartitionCommit] = field(default_factory=list)

    @property
    def name(self) -> str:
        return record_name(self.job_id)

    @property
    def path(self) -> str:
        return os.path.join(self.log_dir, self.name)

    def to_json(self) -> bytes:
        return json.dumps({
            "version": 1, "job": self.job_id,
            "partitions": [{"topic": p.topic, "partition": p.partition, "before": p.before,
                            "after": p.after,
                            "runs": [{"dir": d, "offsets": n}
                                     for d, n in zip(p.runs, p.offsets)]}
                           for p in self.partitions]}, indent=1).encode()


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
        if not m or doc.get("version") != 1 or doc.get("job") != m.group(1):
            raise ValueError("not a version-1 record of its job")
        parts = []
        for p in doc["partitions"]:
            runs = [str(r["dir"]) for r in p["runs"]]
            pc = PartitionCommit(str(p["topic"]), int(p["partition"]), int(p["before"]),
                                 runs, [int(r["offsets"]) for r in p["runs"]])
            if pc.after != int(p["after"]) or any(
                    (parse_stage_dir(r) or ())[:2] != (pc.topic, pc.partition) for r in runs):
                raise ValueError(f"inconsistent entry for {pc.topic}-{pc.partition}")
            parts.append(pc)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CommitRecoveryError(
            f"{os.path.join(log_dir, name)} is not a commit record kafkafs can read ({exc}); "
            "nothing was done. Remove it by hand to give the write up (its partitions may "
            "then hold part of it)") from None
    return CommitRecord(log_dir, m.group(1), parts)


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
    commit in ``log_dir`` names: readers show each only up to that offset. A record that
    cannot be read is warned about and adds nothing."""
    out: dict[tuple[str, int], int] = {}
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
    return out


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


def _locked(logs: Iterable[Log]):
    stack = contextlib.ExitStack()
    for lg in sorted(logs, key=lambda g: (g.topic, g.partition)):
        stack.enter_context(lg.lock)
    return stack


def commit(log_dir: str, job_id: str, runs: dict[tuple[str, int], list[str]],
           get_log: Callable[[str, int], Log]) -> CommitRecord | None:
    """Append the staged runs ``runs`` (``(topic, partition) -> [staged dir names in
    log_dir]``, in order) to the logs ``get_log(topic, partition)`` all or nothing (see the
    module), holding every log's lock throughout. Returns the record (already removed), or
    None when there was nothing to append. Raises what reading the runs raises before the
    record is written (nothing appended: CorruptRecordError, FileNotFoundError), and once it
    is written what appending raises -- the record then stays, and the next writable open
    of the log dir finishes the commit."""
    wanted = {tp: names for tp, names in runs.items() if names}
    if not wanted:
        return None
    logs = {tp: get_log(*tp) for tp in sorted(wanted)}
    offsets = {tp: [run_offsets(_staged_path(log_dir, n)) for n in names]
               for tp, names in wanted.items()}
    with _locked(logs.values()):
        rec = CommitRecord(log_dir, job_id)
        for tp, lg in logs.items():
            lg.flush()
            rec.partitions.append(PartitionCommit(tp[0], tp[1], lg.log_end_offset,
                                                  list(wanted[tp]), offsets[tp]))
        faults.point("commit-before-record")
        write_record(rec)
        faults.point("commit-record-written")
        for pc in rec.partitions:
            apply_partition(logs[(pc.topic, pc.partition)], pc, log_dir)
            faults.point("commit-partition-done")
        for pc in rec.partitions:  # (the rest of the job's: its writer's to remove)
            for name in pc.runs:
                remove_stage_dir(log_dir, name)
        remove_record(log_dir, rec.name)
        faults.point("commit-record-removed")
    return rec


def finish(rec: CommitRecord, get_log: Callable[[str, int], Log]) -> None:
    """Roll the interrupted commit ``rec`` forward (see the module), then remove its job's
    staged dirs and the record. Raises CommitRecoveryError (record kept; also for a damaged
    staged run: the batches before the damage are appended), and what appending raises
    (OSError such as ENOSPC: record kept, the next writer goes on)."""
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
        log.warning("Found an interrupted commit in %s (%s, %d partition(s)): rolling it "
                    "forward", log_dir, rec.name, len(rec.partitions))
        finish(rec, get_log)
    return len(recs)


# -- a commit asked of the daemon holding the log dir ------------------------------------
REQUEST_SUFFIX = ".request.json"
_REQUEST = re.compile(r"^\.kafkafs-commit-([0-9a-f]{16})\.request\.json$")


def request_name(job_id: str) -> str:
    """``.kafkafs-commit-<job id>.request.json``: what a writer asks the daemon holding the
    log dir to commit (:func:`write_request`); a regular file, ignored as records are."""
    return f"{RECORD_PREFIX}{job_id}{REQUEST_SUFFIX}"


def write_request(log_dir: str, job_id: str, runs: dict[tuple[str, int], list[str]]) -> str:
    """Write the request to commit ``runs`` (as :func:`commit` takes them) of job
    ``job_id`` into ``log_dir``; returns its name. It needs no fsync: the daemon's commit
    record decides. Raises OSError."""
    name = request_name(job_id)
    doc = {"version": 1, "job": job_id,
           "runs": [{"topic": t, "partition": p, "dirs": list(names)}
                    for (t, p), names in sorted(runs.items())]}
    with safeio.Dir.open(log_dir, follow=True) as root:
        root.unlink(name)
        root.write_new(name, json.dumps(doc).encode())
    return name


def read_request(log_dir: str, name: str) -> tuple[str, dict[tuple[str, int], list[str]]]:
    """``(job id, runs)`` of the request ``name`` in ``log_dir``. Raises ValueError for a
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
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"malformed commit request {name}: {exc}") from None
    return job, runs


def remove_request(log_dir: str, job_id: str) -> None:
    """Remove the request of ``job_id`` (missing is fine)."""
    with safeio.Dir.open(log_dir, follow=True) as root:
        root.unlink(request_name(job_id))
