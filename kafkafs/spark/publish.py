"""The commit and abort of a ``kafkalog`` write, on the driver.

The tasks left staged runs (:mod:`kafkafs.spark.stage`) in the log dir, out of sight. The
commit publishes them, per topic:

* **A new topic** (or, with ``mode("overwrite")``, a replaced one): for each partition the
  first task's run is the partition dir to be, the other tasks' runs of that partition are
  appended to it in task order by its own log (so the partition holds what one log fed
  every batch in that order holds, segment for segment), partitions that got no rows get
  an empty log; then the staged dirs become the topic with one rename each. A replaced
  topic's old dirs are renamed away first and deleted once the new ones are in.
* **An existing topic**: each partition's log appends the runs in task order: offsets
  follow its log end offset, rolls and index entries as for any append.

The whole job -- every topic it creates or replaces and every append -- is **one commit**,
decided by one durable commit record in the log dir
(:meth:`LogManager.commit_job <kafkafs.log.manager.LogManager.commit_job>`,
:func:`kafkafs.log.bulk_commit.commit`): a commit killed after the record is durable is
rolled forward by whoever next opens the log dir for writing (the daemon's start, a CLI
writer, the next write's commit); one killed before it changed nothing. Readers meanwhile
show the partitions it appends to as they were before it, and not the topics it creates or
replaces.

Who does it depends on who holds the log dir (its ``.lock``):

* nobody: the commit takes the lock itself (a :class:`~kafkafs.log.manager.LogManager` on
  the one log dir, as ``kafkafs topics --create`` does), publishes, writes the checkpoints
  and the clean-shutdown marker and lets go;
* a kafkafs daemon with a mount: the daemon, asked through its mount
  (:mod:`kafkafs.spark.mountlink`): a new topic's staged dirs are prepared here as above;
  the daemon commits the whole job as above, asked once
  (:func:`~kafkafs.core.control.commit_staged`). Nothing here writes into a partition
  the daemon holds;
* another process (a broker, another writer): the commit waits up to ``lockTimeoutMs`` for
  the lock, then refuses with a clear message -- never racing the holder.

Whatever happens, every staged dir of the job is removed at the end (those of killed task
attempts too) -- except while the job's commit record is there (decided, not finished: the
runs are needed to finish it). The abort only removes them, with the same exception:
PySpark runs the commit in a Python worker, and when that worker dies Spark calls the
abort.
"""

from __future__ import annotations

import logging
import os
import time
from collections import defaultdict

from ..core import control
from ..log import bulk_commit
from ..log.errors import LogDirLockedError
from ..log.manager import LogManager, partition_dirs
from ..log.staging import (
    append_runs,
    create_stage_log,
    finish_stage_log,
    new_stage_id,
    parse_stage_dir,
    remove_job_stage_dirs,
    reopen_stage_log,
    stage_dir_name,
)
from . import mountlink
from .write_plan import TopicPlan, WritePlan

log = logging.getLogger(__name__)


class TopicChangedError(RuntimeError):
    """A topic the job planned for was created, deleted or resized by someone else while the
    job ran: its rows were partitioned for another partition count."""


def runs_by_partition(messages) -> dict[tuple[str, int], list[str]]:
    """``(topic, partition) -> [staged dir names]`` in task order (Spark hands the commit
    messages over in the order of its partitions; a failed task's message is None)."""
    out: dict[tuple[str, int], list[str]] = defaultdict(list)
    for message in messages:
        for run in getattr(message, "runs", None) or ():
            out[(run.topic, run.partition)].append(run.dir_name)
    return out


def publish(plan: WritePlan, messages) -> None:
    """Commit: publish every run of ``messages`` (see the module), then remove the job's
    staged dirs. Raises TopicChangedError, LogDirLockedError (held by a process that is not
    a kafkafs daemon with a mount), DaemonRefusedError (:mod:`kafkafs.core.control`), and what publishing raises."""
    runs = runs_by_partition(messages)
    topics = sorted({t for t, _p in runs} | ({plan.topic} if plan.topic else set()))
    try:
        _check_runs_present(plan, runs)
        _publish(plan, runs, topics)
    finally:
        if _recorded(plan):
            # decided but not finished (an error while appending): the next writable open
            # of the log dir rolls it forward and needs the runs
            log.error("kafkalog: the commit of job %s is recorded but not finished; the next "
                      "writer on %s finishes it", plan.job_id, plan.log_dir)
        else:
            remove_job_stage_dirs(plan.log_dir, plan.job_id)


def _recorded(plan: WritePlan) -> bool:
    """Whether the commit record of the job is in the log dir: decided, not finished."""
    return os.path.lexists(os.path.join(plan.log_dir, bulk_commit.record_name(plan.job_id)))


class StagedRunMissingError(RuntimeError):
    """A task reported a staged run the driver does not find in the log dir."""


def _check_runs_present(plan: WritePlan, runs) -> None:
    for names in runs.values():
        for name in names:
            if not os.path.isdir(os.path.join(plan.log_dir, name)):
                raise StagedRunMissingError(
                    f"a task wrote {name} into {plan.log_dir}, but the driver does not find "
                    "it there: on a cluster the log dir must be one filesystem that the driver "
                    "and every executor see at the same path (NFS, a shared volume). Nothing "
                    "was written.")


ABORT_QUIET_S = 2.5  # the abort sweeps until no staged dir of the job was seen for this long
ABORT_MAX_S = 15.0  # ... or this long at most


def discard(plan: WritePlan, messages=()) -> None:
    """Abort: remove every staged dir of the job; nothing was published. Spark calls the
    abort as soon as the job fails, while the tasks it cancels may still run for a moment
    (a Python worker gets ``spark.python.task.killTimeout``, 2 s, to stop) and stage more:
    the sweep goes on until no staged dir of the job has been seen for
    :data:`ABORT_QUIET_S` seconds."""
    if _recorded(plan):
        # the commit was decided (its record is durable) and then failed or its process
        # died: the write happened, the next writer rolls it forward and needs the runs
        log.error("kafkalog: abort after the commit of job %s was recorded: the write is kept "
                  "and finished by the next writer on %s", plan.job_id, plan.log_dir)
        return
    start = quiet_since = time.monotonic()
    removed = 0
    while True:
        n = remove_job_stage_dirs(plan.log_dir, plan.job_id)
        removed += n
        now = time.monotonic()
        if n:
            quiet_since = now
        if now - quiet_since >= ABORT_QUIET_S or now - start >= ABORT_MAX_S:
            break
        time.sleep(0.25)
    log.info("kafkalog write aborted: %d staged dir(s) removed from %s", removed, plan.log_dir)


def _publish(plan: WritePlan, runs, topics) -> None:
    while True:
        mount = mountlink.holder_mount(plan.log_dir, plan.lock_timeout_ms / 1000)
        if mount is not None:
            _through_daemon(plan, runs, topics, mount)
            return
        _precheck(plan, topics)  # refuse before the log dir is opened for writing
        manager = LogManager(plan.broker_config())
        try:
            manager.startup()
        except LogDirLockedError:
            continue  # taken meanwhile: look again who holds it
        try:
            _locally(plan, runs, topics, manager)
        finally:
            manager.shutdown()
        return


def _check_partitions(plan: WritePlan, tp: TopicPlan, now: list[int]) -> None:
    """Refuse a topic that changed since the job was planned, where that matters."""
    if plan.overwrite:
        return
    if tp.exists and not now:
        raise TopicChangedError(f"Topic '{tp.topic}' was deleted while the write ran; nothing "
                                "of it was written")
    if now and len(now) != tp.partitions:
        what = "resized" if tp.exists else "created by someone else"
        raise TopicChangedError(
            f"Topic '{tp.topic}' was {what} while the write ran: it has {len(now)} partitions, "
            f"its rows were partitioned for {tp.partitions}; nothing of it was written")


def _precheck(plan: WritePlan, topics) -> None:
    """:func:`_check_partitions` of every topic from a listing of the log dir (the commit
    checks again under the lock)."""
    counts: dict[str, list[int]] = defaultdict(list)
    for (t, p), _path in partition_dirs(plan.log_dir):
        counts[t].append(p)
    for topic in topics:
        _check_partitions(plan, plan.topic_plan(topic), counts.get(topic, []))


def _prepare_partition(plan: WritePlan, tp: TopicPlan, partition: int, names: list[str]
                       ) -> str:
    """The staged dir that becomes ``partition`` of a new (or replaced) topic: the first
    run with the later ones appended, or a new empty log. Returns its name."""
    if not names:
        sid = new_stage_id(plan.job_id)
        finish_stage_log(create_stage_log(plan.log_dir, tp.topic, partition, sid, tp.config))
        return stage_dir_name(tp.topic, partition, sid)
    if len(names) > 1:
        sid = parse_stage_dir(names[0])[2]
        lg = reopen_stage_log(plan.log_dir, tp.topic, partition, sid, tp.config)
        try:
            append_runs(lg, [os.path.join(plan.log_dir, n) for n in names[1:]], verify=False)
        finally:
            finish_stage_log(lg)
    return names[0]


def _locally(plan: WritePlan, runs, topics, manager: LogManager) -> None:
    adoptions, appends = [], {}
    for topic in topics:
        tp = plan.topic_plan(topic)
        now = manager.partitions(topic)
        _check_partitions(plan, tp, now)
        if plan.overwrite or not now:
            adoptions.append(_adoption(plan, tp, runs, replace=bool(now)))
            continue
        appends.update(_appends_of(tp, runs))
    manager.commit_job(plan.log_dir, plan.job_id, adoptions, appends)
    for ta in adoptions:
        log.info("kafkalog: %s topic %s with %d partitions in %s",
                 "replaced" if ta.replace else "created", ta.topic, len(ta.staged),
                 plan.log_dir)


def _adoption(plan: WritePlan, tp: TopicPlan, runs, replace: bool
              ) -> bulk_commit.TopicAdoption:
    """The staged dirs of every partition of the new (or replaced) topic ``tp``, prepared
    (:func:`_prepare_partition`), as an adoption of the job's commit."""
    staged = {p: _prepare_partition(plan, tp, p, runs.get((tp.topic, p), []))
              for p in range(tp.partitions)}
    return bulk_commit.TopicAdoption(tp.topic, staged, dict(tp.overrides), replace=replace)


def _appends_of(tp: TopicPlan, runs) -> dict[tuple[str, int], list[str]]:
    return {(tp.topic, p): runs[(tp.topic, p)] for p in range(tp.partitions)
            if runs.get((tp.topic, p))}


def _through_daemon(plan: WritePlan, runs, topics, mount: str) -> None:
    adoptions, appends = [], {}
    for topic in topics:
        tp = plan.topic_plan(topic)
        now = mountlink.topic_partitions(mount, topic)
        _check_partitions(plan, tp, now)
        if plan.overwrite or not now:
            adoptions.append(_adoption(plan, tp, runs, replace=bool(now)))
            continue
        appends.update(_appends_of(tp, runs))
    if appends or adoptions:
        control.commit_staged(mount, plan.log_dir, plan.job_id, appends, adoptions)
