"""One Spark task of a ``kafkalog`` write: its rows become staged runs (executor side).

The task encodes its Arrow batches (:class:`~kafkafs.spark.encode.TaskEncoder`) and appends
each topic-partition's batches to a staged log of its own
(:func:`kafkafs.log.staging.create_stage_log`, in the log dir, out of sight). At the end
every staged log is flushed (fsynced: the commit may take the files as they are) and closed,
and the task reports its runs to the driver in a :class:`StagedRuns` commit message. A task
that fails removes its staged dirs; a task that is killed leaves them to the driver's
commit or abort, which removes every staged dir of the job.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

from pyspark.sql.datasource import WriterCommitMessage

from ..log.log import Log
from ..log.staging import (
    RunStats,
    append_batches,
    create_stage_log,
    finish_stage_log,
    new_stage_id,
    remove_stage_dir,
    reopen_stage_log,
    stage_dir_name,
)
from .encode import TaskEncoder
from .write_plan import WritePlan

MAX_OPEN_LOGS = 32  # staged logs a task keeps open at once (files, index mappings)


@dataclass
class StagedRun:
    """A task's run for one topic-partition: the staged dir's ``stage_id`` and what it
    holds (``stats``: records, batches, bytes)."""

    topic: str
    partition: int
    stage_id: str
    stats: RunStats = field(default_factory=RunStats)

    @property
    def dir_name(self) -> str:
        return stage_dir_name(self.topic, self.partition, self.stage_id)


@dataclass
class StagedRuns(WriterCommitMessage):
    """The commit message of a task: its :class:`StagedRun` list."""

    runs: list = field(default_factory=list)


class TaskStager:
    """The staged logs of one task, at most :data:`MAX_OPEN_LOGS` open at a time (the
    least recently used ones are closed and reopened when more comes)."""

    def __init__(self, plan: WritePlan):
        self.plan = plan
        self.runs: dict[tuple[str, int], StagedRun] = {}
        self._open: OrderedDict[tuple[str, int], Log] = OrderedDict()

    def _log(self, topic: str, partition: int) -> Log:
        key = (topic, partition)
        lg = self._open.get(key)
        if lg is not None:
            self._open.move_to_end(key)
            return lg
        config = self.plan.topic_plan(topic).config
        run = self.runs.get(key)
        if run is None:
            run = self.runs[key] = StagedRun(topic, partition, new_stage_id(self.plan.job_id))
            lg = create_stage_log(self.plan.log_dir, topic, partition, run.stage_id, config)
        else:
            lg = reopen_stage_log(self.plan.log_dir, topic, partition, run.stage_id, config)
        self._open[key] = lg
        while len(self._open) > MAX_OPEN_LOGS:
            _key, old = self._open.popitem(last=False)
            finish_stage_log(old)
        return lg

    def append(self, topic: str, partition: int, batches: list) -> None:
        """Append encoded batches (base offset 0, restamped) to the partition's staged log."""
        lg = self._log(topic, partition)
        append_batches(lg, batches, self.runs[(topic, partition)].stats)

    def finish(self) -> StagedRuns:
        """Flush and close every staged log; the commit message."""
        while self._open:
            _key, lg = self._open.popitem(last=False)
            finish_stage_log(lg)
        return StagedRuns(sorted(self.runs.values(), key=lambda r: (r.topic, r.partition)))

    def discard(self) -> None:
        """Close and remove every staged dir of the task (it failed)."""
        for lg in self._open.values():
            try:
                lg.close(take_snapshot=False)
            except OSError:
                pass
        self._open.clear()
        for run in self.runs.values():
            remove_stage_dir(self.plan.log_dir, run.dir_name)


ROWS_PER_CHUNK = 65536  # Arrow rows encoded together (Spark hands over 10,000 at a time)
BYTES_PER_CHUNK = 16 * 1024 * 1024


def chunks(batches: Iterable) -> Iterable:
    """Spark's Arrow record batches joined into record batches of about
    :data:`ROWS_PER_CHUNK` rows or :data:`BYTES_PER_CHUNK` bytes: the column-wise work costs
    per call, not per row."""
    import pyarrow as pa

    held, rows, size = [], 0, 0
    for rb in batches:
        held.append(rb)
        rows += rb.num_rows
        size += rb.nbytes
        if rows >= ROWS_PER_CHUNK or size >= BYTES_PER_CHUNK:
            yield held[0] if len(held) == 1 else _concat(pa, held)
            held, rows, size = [], 0, 0
    if held:
        yield held[0] if len(held) == 1 else _concat(pa, held)


def _concat(pa, batches):
    if hasattr(pa, "concat_batches"):  # pyarrow >= 19
        return pa.concat_batches(batches)
    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]


def stage_task(plan: WritePlan, batches: Iterable) -> StagedRuns:
    """Write one task's Arrow record batches as staged runs; the task's commit message.
    Raises what encoding and appending raise (ValueError for rows Kafka's producer refuses,
    RecordTooLargeError, InvalidRecordError on a compacted topic, OSError), with the task's
    staged dirs removed."""
    os.makedirs(plan.log_dir, exist_ok=True)
    stager = TaskStager(plan)
    encoder = TaskEncoder(plan.layout, plan.topic)
    try:
        for rb in chunks(batches):
            for topic, partition, encoded in encoder.add(rb):
                stager.append(topic, partition, encoded)
        for topic, partition, encoded in encoder.finish():
            stager.append(topic, partition, encoded)
        return stager.finish()
    except BaseException:
        stager.discard()
        raise
