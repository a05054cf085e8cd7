"""The daemon's control requests: their names, the client side and the handler, in one
place (docs/design.md §7).

A log dir whose ``.lock`` a running daemon holds is written only by that daemon. A client
(a CLI writer, Spark's commit) finds the daemon by the log dirs its mount serves
(:func:`find_mount`) and asks it through extended attributes on the mount: reads on the
root tell about the daemon (:data:`PID`, :data:`LOG_DIRS`, :data:`NUM_PARTITIONS`,
:data:`TOPIC_DEFAULTS`); writes ask it to do work and return when it is done, the outcome
being the call's errno (:data:`COMPACT`, :data:`COMMIT_STAGED`, and for older writers
:data:`ADOPT` and :data:`APPEND_STAGED`).

The handler (:class:`ControlHandler`) does the work on a :class:`~kafkafs.core.storage.
StorageCore` and raises the log engine's errors or this module's :class:`RequestError`
classes; a frontend turns them into its own answers (the FUSE mount: errno, in
``kafkafs/fs/errors.py``). Nothing here knows errno values except the client side, which
reads them back from ``setxattr``.
"""

from __future__ import annotations

import errno
import json
import logging
import os

from ..log import bulk_commit, cleaner_status, faults
from ..log.config import LogConfig, format_properties, parse_properties
from ..log.errors import ReadOnlyLogError
from ..mounttable import kafkafs_mount_points

log = logging.getLogger(__name__)

# -- names ---------------------------------------------------------------------------------
PID = "user.kafkafs.pid"  # get, root: the daemon's pid (decimal)
LOG_DIRS = "user.kafkafs.log_dirs"  # get, root: the log dirs it serves, comma-separated
NUM_PARTITIONS = "user.kafkafs.num_partitions"  # get, root: the broker's num.partitions
TOPIC_DEFAULTS = "user.kafkafs.topic_defaults"  # get, root: topic config defaults (key=value)
COMPACT = "user.kafkafs.compact"  # set, topic or partition dir: a cleaning pass now
COMMIT_STAGED = "user.kafkafs.commit_staged"  # set, root: publish a bulk write's job
ADOPT = "user.kafkafs.adopt"  # set, root or topic dir: a topic from staged dirs (older writers)
APPEND_STAGED = "user.kafkafs.append_staged"  # set, partition dir: a staged run (older writers)
GROUP_RECORDS = "user.kafkafs.group_records"  # set, root: a group coordinator's records
APPEND_MARKER = "user.kafkafs.append_marker"  # set, partition dir: an end transaction marker

# where each settable request is taken: "root", "topic" (a topic dir), "partition"
TARGETS = {
    COMPACT: ("topic", "partition"),
    COMMIT_STAGED: ("root",),
    ADOPT: ("root", "topic"),
    APPEND_STAGED: ("partition",),
    GROUP_RECORDS: ("root",),
    APPEND_MARKER: ("partition",),
}


async def _in_thread(fn, *args):
    """``fn(*args)`` in one of trio's worker threads. trio is imported here, in the daemon:
    the client side of this module runs where trio is not installed (a Spark worker with
    ``kafkafs[spark]`` only)."""
    import trio

    return await trio.to_thread.run_sync(fn, *args)


# -- errors of the handler -----------------------------------------------------------------
class RequestError(Exception):
    """A control request the handler refuses (base class)."""


class InvalidRequestError(RequestError):
    """The request's value is malformed or names something it may not (EINVAL at the
    mount)."""


class NotTakenError(RequestError):
    """No such request, or not on this target (EACCES at the mount)."""


class NoCleanerError(RequestError):
    """``user.kafkafs.compact`` to a daemon that runs no cleaner
    (``log.cleaner.enable=false``; ENOTSUP at the mount)."""


class PassFailedError(RequestError):
    """A cleaning pass asked for failed (EIO at the mount); the passes of the other
    partitions ran."""


# -- the handler ---------------------------------------------------------------------------
class ControlHandler:
    """Does what a control request asks, on ``core`` (a started
    :class:`~kafkafs.core.storage.StorageCore`). Runs on the trio loop; the work goes to
    worker threads. A request's target is ``(topic, partition)``: ``(None, None)`` the
    root, ``(topic, None)`` a topic dir, both set a partition dir."""

    def __init__(self, core):
        self.core = core

    def attributes(self) -> dict[str, bytes]:
        """The root's readable attributes: name -> value."""
        config = self.core.manager.config
        return {PID: str(os.getpid()).encode(),
                LOG_DIRS: ",".join(self.core.manager.log_dirs).encode(),
                # what a bulk writer needs to lay out a new topic as this daemon would
                NUM_PARTITIONS: str(config.num_partitions).encode(),
                TOPIC_DEFAULTS: format_properties(config.log.to_properties()).encode()}

    async def handle(self, name: str, topic: str | None, partition: int | None,
                     value: bytes) -> None:
        """Do request ``name`` on the target with ``value``; returns when it is done.
        Raises NotTakenError (unknown request or target), ReadOnlyLogError (a read-only
        daemon), and what each request raises."""
        where = "root" if topic is None else "topic" if partition is None else "partition"
        if where not in TARGETS.get(name, ()):
            raise NotTakenError(f"{name} is not a request taken on a {where}")
        if self.core.read_only:
            raise ReadOnlyLogError("a read-only daemon takes no requests")
        if name == COMPACT:
            await self.compact(topic, partition)
        elif name == COMMIT_STAGED:
            await self.commit_staged(value)
        elif name == ADOPT:
            await self.adopt(topic, value)
        elif name == GROUP_RECORDS:
            await self.group_records(value)
        elif name == APPEND_MARKER:
            await self.append_marker(topic, partition, value)
        else:
            await self.append_staged(topic, partition, value)

    async def compact(self, topic: str, partition: int | None) -> None:
        """``user.kafkafs.compact``: a cleaning pass over the partition, or over every
        partition of the topic, now (``kafkafs compact`` beside a daemon), then the key maps
        and the saved cleaner status updated. Raises NoCleanerError, InvalidRequestError (a
        topic that is not compacted), PassFailedError."""
        manager = self.core.manager
        cleaner = manager.cleaner
        if cleaner is None:
            raise NoCleanerError("the daemon runs no cleaner (log.cleaner.enable=false)")
        parts = [partition] if partition is not None else manager.partitions(topic)
        logs = [manager.get_log(topic, p) for p in parts]
        if not all(lg.config.compact for lg in logs):
            raise InvalidRequestError(f"{topic} is not compacted (cleanup.policy)")
        failed = False
        for lg in logs:
            result = await _in_thread(cleaner.clean_log, lg)
            failed = failed or result.error is not None
            if result.ok:
                await _in_thread(self.core.key_maps.after_cleaning, lg)
        try:
            await _in_thread(cleaner_status.save_all, manager.log_dirs,
                                          manager.logs, cleaner.manager)
        except OSError as exc:  # informational: the passes are done either way
            log.warning("cannot save the cleaner status: %s", exc)
        if failed:
            raise PassFailedError(f"a cleaning pass of {topic} failed")

    async def group_records(self, value: bytes) -> None:
        """``user.kafkafs.group_records`` on the root: the value is JSON ``{"group": G,
        "records": [[key, value or null], ...]}`` (Base64), a group coordinator's records
        of group G -- offset commits and tombstones, group tombstones -- appended as one
        batch to G's partition of ``__consumer_offsets`` (created when missing:
        :func:`~kafkafs.log.group_writes.append_group_records`), then flushed. Raises
        InvalidRequestError for a value that is not that, or a record that is no record of
        G."""
        import base64

        from ..log.group_writes import append_group_records
        from ..record.internal import decode_coordinator

        try:
            req = json.loads(value)
            group = str(req["group"])
            records = [(base64.b64decode(k), None if v is None else base64.b64decode(v))
                       for k, v in req["records"]]
            for k, v in records:
                rec = decode_coordinator("group", k, v)
                if next(iter(rec.key.values()), None) != group:
                    raise ValueError(f"a record of another group: {rec.key}")
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidRequestError(f"a malformed group records request: {exc}") from None
        manager = self.core.manager

        def work():
            where = append_group_records(manager, group, records)
            if where is not None:
                manager.get_log("__consumer_offsets", where[0]).flush()
            return where

        where = await _in_thread(work)
        if where is not None:
            log.info("Appended %d record(s) of group %s to __consumer_offsets-%d",
                     len(records), group, where[0])

    async def append_marker(self, topic: str, partition: int, value: bytes) -> None:
        """``user.kafkafs.append_marker`` on ``<topic>/<p>``: the value is one COMMIT or
        ABORT marker batch (``kafkafs transactions abort``), appended as a broker appends
        ``WriteTxnMarkers``' markers (:meth:`Log.append_encoded`: the producer state and
        ``.txnindex`` follow), then flushed. Raises InvalidRequestError for anything that
        is not one such batch, and the log's errors."""
        from ..record.batch import RecordBatch
        from ..record.control import parse_control_key

        try:
            batch = RecordBatch.from_buffer(bytearray(value))
            (record,) = batch.record_tuples()
            _version, kind = parse_control_key(record[2])
            if not (batch.is_control and batch.is_transactional and kind in (0, 1)) or \
                    batch.size != len(value):
                raise ValueError("not one end transaction marker batch")
        except (ValueError, TypeError) as exc:
            raise InvalidRequestError(f"a malformed marker: {exc}") from None
        await self.core.commits.wait(topic, partition)
        lg = self.core.manager.get_log(topic, partition)

        def work():
            first = lg.append_encoded(bytearray(value))[0]
            lg.flush()
            return first

        offset = await _in_thread(work)
        log.info("Appended a %s marker of producer %d at offset %d of %s",
                 "COMMIT" if kind else "ABORT", batch.producer_id, offset, lg.name)

    async def adopt(self, target_topic: str | None, value: bytes) -> None:
        """``user.kafkafs.adopt``: the value is JSON ``{"log_dir": one of the daemon's log
        dirs, "topic": T, "stage": stage id, "partitions": N, "config": {overrides}}``; the
        staged dirs ``<T>-<p>.<stage>-delete`` (p in 0..N-1, made by
        :mod:`kafkafs.log.staging`) become topic T, recovered as a restored backup is
        (:meth:`LogManager.adopt_topic <kafkafs.log.manager.LogManager.adopt_topic>`). On
        the root it creates T (TopicExistsError when T exists); on T's own dir
        (``target_topic``) it replaces T's data, and the frontends are told
        (:meth:`StorageCore.topic_replaced`). Raises InvalidRequestError, OSError (ENOENT:
        a staged dir that is not there)."""
        from ..log.staging import stage_dir_name

        try:
            req = json.loads(value)
            topic, stage, n = str(req["topic"]), str(req["stage"]), int(req["partitions"])
            log_dir = str(req["log_dir"])
            config = {str(k): str(v) for k, v in (req.get("config") or {}).items()}
        except (ValueError, KeyError, TypeError, AttributeError):
            raise InvalidRequestError("a malformed adopt request") from None
        replace = target_topic is not None
        if replace and target_topic != topic:
            raise InvalidRequestError(f"adopt of {topic} set on {target_topic}'s dir")
        staged = {p: stage_dir_name(topic, p, stage) for p in range(n)}
        await _in_thread(
            lambda: self.core.manager.adopt_topic(log_dir, topic, staged, config,
                                                  replace=replace))
        if replace:
            await self.core.topic_replaced(topic, on_topic_dir=True)
        log.info("%s topic %s (%d partitions) from staged dirs %s",
                 "Replaced" if replace else "Adopted", topic, n, stage)

    async def append_staged(self, topic: str, partition: int, value: bytes) -> None:
        """``user.kafkafs.append_staged`` on ``<topic>/<p>``: the value names a staged dir
        ``<topic>-<p>.<stage id>-delete`` in one of the daemon's log dirs (the partition's
        own first); its batches are checked through, appended
        (:func:`~kafkafs.log.staging.append_runs`) and flushed, once no bulk commit holds
        the partition. Raises InvalidRequestError (not a staged dir of this partition),
        OSError (ENOENT), CorruptRecordError, RecordTooLargeError, CommitUnfinishedError."""
        from ..log.staging import append_runs, parse_stage_dir

        manager = self.core.manager
        lg = manager.get_log(topic, partition)
        name = value.decode("utf-8", "replace")
        if "/" in name or (parse_stage_dir(name) or ())[:2] != (topic, partition):
            raise InvalidRequestError(f"{name!r} is no staged dir of {topic}-{partition}")
        await self.core.commits.wait(topic, partition)
        roots = [os.path.dirname(lg.dir)] + list(manager.log_dirs)
        path = next((os.path.join(r, name) for r in roots
                     if os.path.isdir(os.path.join(r, name))), os.path.join(roots[0], name))

        def work():
            stats = append_runs(lg, [path], verify=True)
            lg.flush()
            return stats

        stats = await _in_thread(work)
        log.info("Appended %d records (%d bytes) from %s to %s", stats.records, stats.bytes,
                 name, lg.name)

    async def commit_staged(self, value: bytes) -> None:
        """``user.kafkafs.commit_staged`` on the root: the value is JSON ``{"log_dir": one
        of the daemon's log dirs, "request": the name of a commit request there}``
        (:func:`kafkafs.log.bulk_commit.write_request`: topics to create or replace from
        staged partition dirs, staged runs per existing partition). The whole job is
        published as one commit decided by a durable commit record
        (:meth:`LogManager.commit_job <kafkafs.log.manager.LogManager.commit_job>`), on a
        worker thread holding every appended log's lock, while the commit gate keeps the
        frontends' appends to those partitions waiting; a crash meanwhile is finished by
        the next start-up. Replaced topics are then announced
        (:meth:`StorageCore.topic_replaced`). Raises InvalidRequestError,
        TopicExistsError, OSError (ENOENT), CorruptRecordError, RecordTooLargeError,
        CommitUnfinishedError (an earlier commit of these partitions was not finished),
        and whatever failed the commit (after a durable record, its partitions are then
        marked unfinished: :meth:`CommitGate.mark_unfinished`)."""
        manager = self.core.manager
        try:
            req = json.loads(value)
            log_dir, name = str(req["log_dir"]), str(req["request"])
        except (ValueError, KeyError, TypeError):
            raise InvalidRequestError("a malformed commit request") from None
        if log_dir not in manager.log_dirs:
            raise InvalidRequestError(f"{log_dir} is not a log dir of this daemon")
        try:
            job, runs, adoptions = await _in_thread(bulk_commit.read_request,
                                                                 log_dir, name)
        except ValueError as exc:
            log.warning("commit request refused: %s", exc)
            raise InvalidRequestError(str(exc)) from None
        topics = {ta.topic for ta in adoptions} | {t for t, _p in runs}
        async with self.core.commits.holding(runs, topics):
            try:
                rec = await _in_thread(manager.commit_job, log_dir, job,
                                                    adoptions, runs)
            except BaseException:
                if os.path.lexists(os.path.join(log_dir, bulk_commit.record_name(job))):
                    self.core.commits.mark_unfinished(runs, (ta.topic for ta in adoptions))
                    log.error("The commit of job %s was recorded but could not be finished; "
                              "appends to its %d partition(s) are refused until the daemon "
                              "restarts and finishes it", job, len(runs))
                raise
        for ta in adoptions:
            if ta.replace:
                await self.core.topic_replaced(ta.topic)
        if rec is not None:
            log.info("Committed job %s: %d offset(s) to %d partition(s), %d topic(s) created "
                     "or replaced", rec.job_id, sum(p.after - p.before for p in rec.partitions),
                     len(rec.partitions), len(rec.topics))


# -- the client side -----------------------------------------------------------------------
class DaemonRefusedError(RuntimeError):
    """The daemon behind a mount refused a request; the message says why, as far as an
    errno tells, and points at the daemon's log."""


_REASONS = {
    errno.EEXIST: "the topic exists already",
    errno.EINVAL: "the request or a staged batch is invalid",
    errno.ENOENT: "a staged dir or the partition is not there",
    errno.EMSGSIZE: "a batch is larger than the topic's max.message.bytes",
    errno.EIO: "damaged staged data, or an I/O error",
    errno.EROFS: "the mount is read-only",
    errno.EACCES: "the daemon does not take this request (an older kafkafs?)",
    errno.ENOSPC: "no space left on the log dir's device",
}


def served_log_dirs(mount: str) -> list[str]:
    """The log dirs the daemon mounted at ``mount`` serves, as it spells them (its root's
    :data:`LOG_DIRS`). Raises OSError when the mount does not tell."""
    return [d for d in os.getxattr(mount, LOG_DIRS).decode().split(",") if d]


def daemon_pid(mount: str) -> int:
    """The pid of the daemon mounted at ``mount`` (:data:`PID`). Raises OSError,
    ValueError."""
    return int(os.getxattr(mount, PID))


def find_mount(log_dirs, *, exact: bool = True) -> str | None:
    """The mount point of a live kafkafs mount whose daemon serves ``log_dirs`` (paths,
    compared by realpath with its root's :data:`LOG_DIRS`): exactly that set, or with
    ``exact=False`` a set holding all of them. None when there is none or a mount cannot be
    asked."""
    want = {os.path.realpath(d) for d in log_dirs}
    for mnt in kafkafs_mount_points():
        try:
            served = {os.path.realpath(d) for d in served_log_dirs(mnt)}
        except OSError:
            continue
        if served == want or (not exact and want <= served):
            return mnt
    return None


def daemon_log_dir(mount: str, log_dir: str) -> str:
    """``log_dir`` as the daemon mounted at ``mount`` spells it (the same directory, maybe
    named through a link)."""
    try:
        dirs = served_log_dirs(mount)
    except OSError:
        return log_dir
    want = os.path.realpath(log_dir)
    return next((d for d in dirs if os.path.realpath(d) == want), log_dir)


def daemon_defaults(mount: str) -> tuple[int, LogConfig] | None:
    """``(num.partitions, topic config defaults)`` of the daemon mounted at ``mount``, or
    None when it does not tell (an older daemon)."""
    try:
        n = int(os.getxattr(mount, NUM_PARTITIONS))
        props = parse_properties(os.getxattr(mount, TOPIC_DEFAULTS).decode())
    except (OSError, ValueError):
        return None
    return n, LogConfig().with_overrides(props)


def request(path: str, name: str, value: bytes, what: str, mount: str) -> None:
    """Ask the daemon mounted at ``mount`` to do request ``name`` on ``path`` (the root, a
    topic or partition dir under it) with ``value``; returns when it is done. ``what`` says
    the job in words for the error. Raises DaemonRefusedError."""
    try:
        os.setxattr(path, name, value)
    except OSError as exc:
        reason = _REASONS.get(exc.errno, exc.strerror)
        raise DaemonRefusedError(
            f"the kafkafs daemon mounted at {mount} refused to {what}: {reason} "
            f"({errno.errorcode.get(exc.errno, exc.errno)}; its log tells more)") from None


def group_records(mount: str, group: str, records: list[tuple]) -> None:
    """Have the daemon mounted at ``mount`` append a group coordinator's ``records``
    (``(key, value or None)``) of ``group`` (:meth:`ControlHandler.group_records`). Raises
    DaemonRefusedError."""
    import base64

    req = {"group": group, "records": [
        [base64.b64encode(k).decode(), None if v is None else base64.b64encode(v).decode()]
        for k, v in records]}
    request(mount, GROUP_RECORDS, json.dumps(req).encode(),
            f"append {len(records)} record(s) of group {group}", mount)


def append_marker(mount: str, topic: str, partition: int, marker: bytes) -> None:
    """Have the daemon mounted at ``mount`` append an end transaction ``marker`` batch to
    ``topic``-``partition`` (:meth:`ControlHandler.append_marker`). Raises
    DaemonRefusedError."""
    request(os.path.join(mount, topic, str(partition)), APPEND_MARKER, marker,
            f"append a transaction marker to {topic}-{partition}", mount)


def compact(path: str) -> None:
    """Ask the daemon to clean the topic or partition whose dir under its mount is
    ``path`` now. Raises OSError with the daemon's errno (EINVAL: not compacted, ENOTSUP:
    no cleaner, EIO: a pass failed, EROFS: a read-only mount, ENOENT: no such topic)."""
    os.setxattr(path, COMPACT, b"now")


def commit_staged(mount: str, log_dir: str, job_id: str,
                  runs: dict[tuple[str, int], list[str]],
                  adoptions=()) -> None:
    """Have the daemon mounted at ``mount`` publish a whole job as one commit
    (:meth:`ControlHandler.commit_staged`): create or replace the topics ``adoptions``
    (:class:`~kafkafs.log.bulk_commit.TopicAdoption`) and append the staged runs ``runs``
    (``(topic, partition) -> [staged dir names in log_dir]``, in order) to existing
    partitions: one request, whatever the number of topics and partitions. They are named
    in a request file in ``log_dir`` (:func:`~kafkafs.log.bulk_commit.write_request`,
    removed afterwards); the attribute's value is ``{"log_dir": ..., "request": name}``.
    Raises DaemonRefusedError (EEXIST: a topic to create exists), OSError (the request file
    cannot be written)."""
    adoptions = list(adoptions)
    name = bulk_commit.write_request(log_dir, job_id, runs, adoptions)
    faults.point("commit-request-written")
    try:
        req = {"log_dir": daemon_log_dir(mount, log_dir), "request": name}
        what = f"commit {len(runs)} partition(s)"
        if adoptions:
            what += f" and {len(adoptions)} new or replaced topic(s)"
        request(mount, COMMIT_STAGED, json.dumps(req).encode(), f"{what} of job {job_id}",
                mount)
    finally:
        try:
            bulk_commit.remove_request(log_dir, job_id)
        except OSError:
            pass
