"""Staged partition dirs: how a bulk writer prepares data out of sight and publishes it.

The Spark ``kafkalog`` sink (:mod:`kafkafs.spark.writer`) writes with many tasks at once, and
one Kafka partition may get records from several of them; never two writers on one log, so
each task writes, per topic-partition, a *run* of its own into a **staged dir** in the log
dir root, and the job's commit publishes the runs:

* The staged dir is named ``<topic>-<partition>.<stage id>-delete``: the name Kafka gives a
  partition dir marked for deletion. Whatever a killed job leaves behind is therefore
  ignored by kafkafs (``kafkafs check`` notes it) and deleted by a Kafka broker at startup,
  never a foreign directory a broker refuses to start on (docs/design.md §2.3). The stage id is 32
  hex digits: the job id (16, :func:`new_job_id`) then the run's own 16
  (:func:`new_stage_id`), so the job's driver finds every dir its tasks made, those of
  killed attempts included (:func:`job_stage_dirs`).
* Inside, a staged dir is a partition dir exactly as a :class:`~kafkafs.log.log.Log` writes
  one (:func:`create_stage_log`: segments rolled at ``segment.bytes``, sparse ``.index`` /
  ``.timeindex`` entries every ``index.interval.bytes``, producer snapshots), its offsets
  starting at 0.
* A new (or overwritten) topic takes a staged dir as a partition dir with one rename that
  never replaces anything (:func:`rename_noreplace`). More runs of the same partition are
  first appended to it (:func:`append_runs`), so the partition holds what one log appending
  all of them would hold, byte for byte.
* An existing partition takes runs through its own log: the log restamps the base
  offsets from its log end offset, rolls and indexes as for any append.
* A job's topics created or replaced and its appends to existing partitions are published
  as one commit, all or nothing (:mod:`kafkafs.log.bulk_commit`,
  :meth:`LogManager.commit_job <kafkafs.log.manager.LogManager.commit_job>`). Beside a
  running daemon the log dir is the daemon's: the driver asks it through the mount, one
  request for the job (``user.kafkafs.commit_staged``, :mod:`kafkafs.fs.operations`).

Synchronous, no trio or pyspark. Every file in a staged dir is reached through
:mod:`kafkafs.log.safeio` (no link followed, regular files only).
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import stat
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ..record.batch import RECORDS_COUNT_OFFSET, RecordBatch
from . import safeio
from .bytesource import FdSource
from .config import LogConfig
from .errors import InvalidRecordError
from .loader import load_log
from .log import Log
from .names import LOG_SUFFIX, parse_segment_filename, validate_topic
from .walk import walk_batches

STAGE_SUFFIX = "-delete"  # Kafka's LocalLog.DeleteDirSuffix
_STAGE_DIR = re.compile(r"^(.+)-(\d+)\.([0-9a-f]{32})-delete$")
READ_CHUNK = 8 * 1024 * 1024  # bytes of a staged segment read (and appended) at a time


def new_job_id() -> str:
    """A new job id: 16 hex digits, the first half of every stage id of one job."""
    return uuid.uuid4().hex[:16]


def new_stage_id(job_id: str) -> str:
    """A new stage id of the job ``job_id``: the job id and 16 more hex digits."""
    if not re.fullmatch(r"[0-9a-f]{16}", job_id):
        raise ValueError(f"not a job id: {job_id!r}")
    return job_id + uuid.uuid4().hex[:16]


def stage_dir_name(topic: str, partition: int, stage_id: str) -> str:
    """``<topic>-<partition>.<stage id>-delete``."""
    return f"{topic}-{partition}.{stage_id}{STAGE_SUFFIX}"


def parse_stage_dir(name: str) -> tuple[str, int, str] | None:
    """``(topic, partition, stage id)`` of a staged dir name, None for any other name."""
    m = _STAGE_DIR.match(name)
    if not m:
        return None
    return m.group(1), int(m.group(2)), m.group(3)


def job_stage_dirs(log_dir: str, job_id: str) -> list[str]:
    """Names of the staged dirs of job ``job_id`` in the log dir root ``log_dir`` (directories
    only; a link with such a name is left alone), sorted."""
    out = []
    try:
        entries = safeio.scan(log_dir)
    except FileNotFoundError:
        return out
    for name, mode in entries.items():
        parsed = parse_stage_dir(name)
        if parsed and parsed[2].startswith(job_id) and stat.S_ISDIR(mode):
            out.append(name)
    return sorted(out)


def remove_stage_dir(log_dir: str, name: str) -> None:
    """Remove the staged dir ``name`` of ``log_dir`` and everything in it, never following a
    link (:func:`~kafkafs.log.safeio.remove_tree`). Missing is fine."""
    if parse_stage_dir(name) is None:
        raise ValueError(f"not a staged dir: {name!r}")
    safeio.remove_tree(os.path.join(log_dir, name))


def remove_job_stage_dirs(log_dir: str, job_id: str) -> int:
    """Remove every staged dir of job ``job_id`` from ``log_dir``; returns how many."""
    names = job_stage_dirs(log_dir, job_id)
    for name in names:
        remove_stage_dir(log_dir, name)
    return len(names)


def create_stage_log(log_dir: str, topic: str, partition: int, stage_id: str,
                     config: LogConfig) -> Log:
    """Create the staged dir of ``topic``-``partition`` for ``stage_id`` in ``log_dir`` and
    return its (empty, writable) :class:`Log`, whose appends write exactly what the daemon's
    would. Close it with :func:`finish_stage_log`. Raises InvalidTopicError,
    FileExistsError, OSError."""
    validate_topic(topic)
    path = os.path.join(log_dir, stage_dir_name(topic, partition, stage_id))
    os.mkdir(path)  # FileExistsError for anything there, a planted link too
    return load_log(path, topic, partition, config, had_clean_shutdown=True)


def reopen_stage_log(log_dir: str, topic: str, partition: int, stage_id: str,
                     config: LogConfig) -> Log:
    """The :class:`Log` of a staged dir closed by :func:`finish_stage_log`, to append more:
    its active segment goes on as if it had never been closed
    (:meth:`~kafkafs.log.segment.LogSegment.resume_after_close`), so the dir ends up as one
    log appending everything in one go writes it. Raises FileNotFoundError, OSError."""
    path = os.path.join(log_dir, stage_dir_name(topic, partition, stage_id))
    lg = load_log(path, topic, partition, config, had_clean_shutdown=True)
    lg.active_segment.resume_after_close()
    return lg


def finish_stage_log(lg: Log, *, sync: bool = True) -> None:
    """Flush (with ``sync``: fsync the segments and the directory) and close a staged log:
    its indexes are trimmed and its producer snapshot written, as at a clean shutdown."""
    if sync:
        lg.flush()
    lg.close()


@dataclass
class RunStats:
    """What a staged run holds: ``records``, ``batches``, ``bytes`` (of batches)."""

    records: int = 0
    batches: int = 0
    bytes: int = 0

    def add(self, batches) -> None:
        """Count encoded v2 batches (bytes-like each) in."""
        for view in batches:
            self.batches += 1
            self.bytes += len(view)
            self.records += int.from_bytes(
                view[RECORDS_COUNT_OFFSET:RECORDS_COUNT_OFFSET + 4], "big", signed=True)


def _check_bulk_batch(batch) -> None:
    """Refuse what a bulk run never holds: legacy entries, producer ids (idempotent or
    transactional batches), control batches."""
    if not isinstance(batch, RecordBatch):
        raise InvalidRecordError(f"a staged run holds a magic-{batch.magic} entry at byte "
                                 f"{batch.position} of {batch.path}: only v2 batches are staged")
    if batch.producer_id >= 0 or batch.is_control:
        raise InvalidRecordError(
            f"a staged run holds a batch with producer id {batch.producer_id}"
            f"{' (control)' if batch.is_control else ''} at byte {batch.position} of "
            f"{batch.path}: staged runs hold plain batches only")


def iter_run(path: str, *, validate: bool = True, chunk_bytes: int = READ_CHUNK
             ) -> Iterator[list[memoryview]]:
    """The batches of the staged dir ``path``, segment after segment in offset order, as
    lists of writable memoryviews (one list per chunk of about ``chunk_bytes`` read; a log
    restamps their base offsets when it appends them: in place for a list of one batch,
    in its joined copy of a longer list, ``Log.append_encoded_run``). ``validate``: check every
    CRC.

    Raises CorruptRecordError (file and position) for a damaged or incomplete batch,
    InvalidRecordError for a batch a bulk run may not hold (:func:`_check_bulk_batch`),
    FileNotFoundError when ``path`` is no directory of segments, OSError."""
    with safeio.Dir.open(path) as d:
        bases = sorted(p[0] for p in map(parse_segment_filename, d.files())
                       if p and p[1] == LOG_SUFFIX and p[2] == "")
        if not bases:
            raise FileNotFoundError(errno.ENOENT, "no log segment in the staged dir", path)
        for base in bases:
            name = f"{base:020d}{LOG_SUFFIX}"
            fd = d.open_file(name)
            try:
                yield from _segment_chunks(fd, d.join(name), validate, chunk_bytes)
            finally:
                os.close(fd)


def _segment_chunks(fd: int, path: str, validate: bool, chunk_bytes: int
                    ) -> Iterator[list[memoryview]]:
    """The batches of one staged segment, a list per chunk read: the one walker
    (docs/design.md §5.3) over the file, strict as for untrusted input -- an incomplete
    batch at the end is damage and so are zeros however far they reach (a staged segment is
    never preallocated)."""
    size = os.fstat(fd).st_size
    group: list[memoryview] = []
    chunk = None
    for b in walk_batches(FdSource(fd, path, writable=True), 0, size, validate=validate,
                          strict_end=True, chunk_size=chunk_bytes, zero_tail=False):
        _check_bulk_batch(b)
        if b.buffer.obj is not chunk and group:  # the walker read the next chunk
            yield group
            group = []
        chunk = b.buffer.obj
        group.append(b.buffer)
    if group:
        yield group


def scan_run(path: str) -> RunStats:
    """Read the whole staged dir ``path``, every CRC checked, and count what it holds.
    Raises like :func:`iter_run`."""
    stats = RunStats()
    for chunk in iter_run(path, validate=True):
        stats.add(chunk)
    return stats


def append_runs(lg: Log, paths: Iterable[str], *, verify: bool = True) -> RunStats:
    """Append the batches of the staged dirs ``paths``, in that order, to ``lg`` with
    :meth:`Log.append_encoded_run` (offsets from its log end offset; its rolls, indexes,
    ``max.message.bytes`` and compacted-key checks). ``verify``: first read every run
    through (:func:`scan_run`), so that damage is found before anything is appended;
    otherwise each batch's CRC is checked as it is appended.

    Returns what was appended. Raises what :func:`iter_run` and the log's append raise
    (RecordTooLargeError, InvalidRecordError, OSError such as ENOSPC): with ``verify``, a
    damaged run appends nothing; an error from the log itself leaves the batches appended
    before it in the log (as a producer's are)."""
    paths = list(paths)
    if verify:
        for path in paths:
            scan_run(path)
    stats = RunStats()
    for path in paths:
        for chunk in iter_run(path, validate=not verify):
            append_batches(lg, chunk, stats)
    return stats


def append_batches(lg: Log, batches: list, stats: RunStats | None = None) -> RunStats:
    """Append encoded v2 batches without producer ids (any base offsets: restamped) to
    ``lg`` with :meth:`Log.append_encoded_run`, counting them into ``stats`` (a new
    :class:`RunStats` when None), which is returned. Raises what the append raises, the
    batches before the one refused appended and counted."""
    stats = RunStats() if stats is None else stats
    rest = batches
    while rest:
        done = lg.append_encoded_run(rest)
        stats.add(rest[:done])
        rest = rest[done:]
    return stats


_RENAME_NOREPLACE = 1
_AT_FDCWD = -100
try:
    _renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    _renameat2.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                           ctypes.c_uint)
except (OSError, AttributeError):  # no renameat2 in this libc
    _renameat2 = None


def rename_noreplace(src: str, dst: str) -> None:
    """Rename ``src`` to ``dst`` unless ``dst`` exists (``renameat2(RENAME_NOREPLACE)``:
    atomic, so a partition dir a daemon creates at the same moment is never replaced --
    ``rename(2)`` would replace an empty directory). Where the kernel or filesystem lacks
    it, the check and the rename are two steps. Raises FileExistsError, OSError."""
    if _renameat2 is not None:
        if _renameat2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst),
                      _RENAME_NOREPLACE) == 0:
            return
        code = ctypes.get_errno()
        if code not in (errno.ENOSYS, errno.EINVAL):
            raise OSError(code, os.strerror(code), src, None, dst)
    if os.path.lexists(dst):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), src, None, dst)
    os.rename(src, dst)
