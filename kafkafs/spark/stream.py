"""``spark.readStream.format("kafkalog")``: the streaming reader of the ``kafkalog`` source,
after Spark's ``KafkaMicroBatchStream`` and ``KafkaOffsetReaderAdmin``.

The stream offset is the next offset to read of every partition, as JSON shaped like the
built-in source's ``KafkaSourceOffset``: ``{"orders": {"0": 42, "1": 17}}`` (topics and
partitions in order, so equal offsets are equal strings: Spark compares them as text).

* :meth:`KafkaLogStreamReader.initialOffset` resolves ``startingOffsets`` (``latest`` by
  default for a stream, ``earliest``, JSON per partition with -2/-1, or the timestamp
  options through the ``.timeindex`` files) against the partitions present when a new
  query starts. A restarted query continues from its checkpoint instead.
* :meth:`~KafkaLogStreamReader.latestOffset` re-opens the log dirs on every trigger (a
  daemon or a broker may be appending; retention and new partitions change the dirs) and
  answers each selected partition's last stable offset (``read_committed``, the default:
  nothing past an open transaction) or log end offset (``read_uncommitted``), limited by
  ``maxOffsetsPerTrigger`` (split across partitions in proportion to their lag, as
  ``KafkaMicroBatchStream.rateLimit``) and ``minOffsetsPerTrigger`` / ``maxTriggerDelay``
  (``delayBatch``). Partitions that appear later -- a topic grown, a new topic matching
  ``subscribePattern`` -- are read from their log start offset, as Spark's Kafka source
  reads new partitions from earliest.
* :meth:`~KafkaLogStreamReader.partitions` re-opens the log dirs, turns a micro-batch's
  ``start``/``end`` into ``{tp: (from, until)}`` with the data-loss rules of
  ``getOffsetRangesFromResolvedOffsets`` (partitions gone, a new partition that does not
  start at 0, offsets that went back) and of :func:`~kafkafs.spark.plan.bound_ranges`
  (offsets deleted by retention, an end past what can be read): ``failOnDataLoss=true``
  raises :class:`~kafkafs.spark.plan.DataLossError`, ``false`` logs a warning and skips.
  The slices are planned from the segment sizes of that moment and read no further than the
  batch's end offsets, so a partition being appended to reads the same records whenever the
  batch is (re)run.
* ``Trigger.AvailableNow``: :meth:`~KafkaLogStreamReader.prepareForTriggerAvailableNow`
  (PySpark's ``SupportsTriggerAvailableNow``) records the offsets available at that moment;
  the query reads up to them (in several micro-batches under ``maxOffsetsPerTrigger``;
  ``minOffsetsPerTrigger`` is not waited for) and stops.

Nothing is stored besides Spark's checkpoint: a restarted query replays its last planned
batch from the checkpointed offsets and goes on, without loss or duplicates.

The reader object is pickled to the executors that call :meth:`read`: it holds the parsed
options and a few numbers, never open files.
"""

from __future__ import annotations

import contextlib
import logging
import time

from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from .fileio import display
from .options import (
    format_tp,
    format_tp_set,
    java_long,
    parse_options,
    stream_settings,
    time_string_ms,
)

__all__ = ["KafkaLogStreamReader", "offsets_from_json", "offsets_to_json", "rate_limit",
           "time_string_ms"]

log = logging.getLogger(__name__)

_SEEN_LIMIT = 1000  # distinct planner warnings remembered per query


def offsets_to_json(offsets: dict) -> dict:
    """``{(topic, partition): offset}`` → the stream offset ``{"topic": {"0": offset}}``,
    topics and partitions in order."""
    out: dict = {}
    for (topic, partition), off in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(off)
    return out


def offsets_from_json(offset) -> dict:
    """A stream offset (as Spark hands it back: parsed JSON) → ``{(topic, partition):
    offset}``. Raises ValueError for anything else (a checkpoint of another source)."""
    out = {}
    try:
        if not isinstance(offset, dict):
            raise TypeError
        for topic, parts in offset.items():
            if not isinstance(parts, dict):
                raise TypeError
            for part, off in parts.items():
                if isinstance(off, bool) or not isinstance(off, int):
                    raise TypeError
                out[(topic, java_long(str(part)))] = off
    except (TypeError, ValueError):
        raise ValueError(f"kafkalog: {offset!r} is not a stream offset of this source "
                         '({"topic": {"partition": offset}}): was the checkpoint written by '
                         "another source?") from None
    return out


def rate_limit(limit: int, start: dict, latest: dict, earliest: dict) -> dict:
    """``KafkaMicroBatchStream.rateLimit``: the end offsets of a micro-batch of about
    ``limit`` offsets from ``start`` towards ``latest`` (both ``{tp: offset}``), split across
    the partitions in proportion to their lag; a partition new since ``start`` lags from
    ``earliest[tp]``. A share below one offset is rounded up (no partition starves), others
    down. Partitions in ``latest`` only; never past ``latest``."""
    sizes = {}
    for tp, end in latest.items():
        begin = start.get(tp, earliest.get(tp))
        if begin is not None and end - begin > 0:
            sizes[tp] = end - begin
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(latest)
    out = {}
    for tp, end in latest.items():
        if tp not in sizes:
            out[tp] = end
            continue
        begin = start.get(tp, earliest.get(tp))
        share = limit * (sizes[tp] / total)
        share = int(-(-share // 1)) if share < 1 else int(share // 1)
        out[tp] = min(end, begin + share)
    return out


class _OncePerQuery(logging.Filter):
    """Lets a warning through once per query: the planner's notes about the log dirs
    (topics absent, a partition skipped) would otherwise repeat every trigger."""

    def __init__(self, seen: set):
        super().__init__()
        self.seen = seen

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        msg = record.getMessage()
        if msg in self.seen:
            return False
        if len(self.seen) < _SEEN_LIMIT:
            self.seen.add(msg)
        return True


class KafkaLogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The stream reader (see the module). ``options``: Spark's option map (``path``
    included); ``schema``: the source's schema. Raises ValueError for bad options, with
    Spark's messages (``endingOffsets`` in a stream, min above max, a bad
    ``maxTriggerDelay``)."""

    def __init__(self, options, schema):
        self.options = parse_options(options, streaming=True)
        self.schema = schema
        settings = stream_settings(self.options.raw)
        self.max_offsets = settings["max_offsets"]
        self.min_offsets = settings["min_offsets"]
        self.max_trigger_delay_ms = settings["max_trigger_delay_ms"]
        self.fetch_attempts = settings["fetch_attempts"]
        self.retry_interval_ms = settings["retry_interval_ms"]
        self._last_trigger_ms = 0
        self._target: dict | None = None  # Trigger.AvailableNow: {tp: offset} to read up to
        self._latest: dict | None = None
        self._seen: set = set()

    # -- the log dirs now -------------------------------------------------------------------

    @contextlib.contextmanager
    def _views(self, expect=()):
        """The selected partitions' views, opened now; each planner warning once a query.
        When a partition of ``expect`` is not found (a segment removed while it was
        loaded, a dir being replaced), the log dirs are opened again after
        ``fetchOffset.retryIntervalMs``, up to ``fetchOffset.numRetries`` attempts in all
        (Spark's Kafka source retries its offset requests the same way); after that the
        partition is taken as gone."""
        from . import plan, views

        once = _OncePerQuery(self._seen)
        loggers = [logging.getLogger(plan.__name__), logging.getLogger(views.__name__)]
        for lg in loggers:
            lg.addFilter(once)
        try:
            for attempt in range(1, self.fetch_attempts + 1):
                opened = plan.open_partitions(self.options)
                missing = [tp for tp in expect if tp not in opened]
                if not missing or attempt == self.fetch_attempts:
                    break
                plan.close_views(opened)
                log.warning("Partitions %s are in none of the log dirs (attempt %d of %d): "
                            "looking again in %d ms", format_tp_set(missing), attempt,
                            self.fetch_attempts, self.retry_interval_ms)
                time.sleep(self.retry_interval_ms / 1000)
            try:
                yield opened
            finally:
                plan.close_views(opened)
        finally:
            for lg in loggers:
                lg.removeFilter(once)

    def _available(self, expect=()) -> tuple[dict, dict]:
        """``(latest, earliest)``: ``{tp: offset}`` of what can be read now (last stable
        offset or log end offset by the isolation level) and of each log start offset."""
        committed = self.options.read_committed
        with self._views(expect) as views:
            return ({tp: v.available_end(committed) for tp, v in views.items()},
                    {tp: v.log_start_offset for tp, v in views.items()})

    # -- Spark's calls ----------------------------------------------------------------------

    def initialOffset(self) -> dict:
        """Where a new query starts: ``startingOffsets`` (or the timestamp options) against
        the partitions present now. A JSON map must name exactly those partitions
        (``KAFKA_START_OFFSET_DOES_NOT_MATCH_ASSIGNED``); offsets >= 0 are taken as given
        (checked when the first batch is planned)."""
        from .plan import limit_offsets

        with self._views() as views:
            starts = limit_offsets(views, self.options.starting, True,
                                    self.options.read_committed)
        log.info("kafkalog stream starts at %s", starts)
        return offsets_to_json(starts)

    def getDefaultReadLimit(self):
        """``ReadMaxRows(maxOffsetsPerTrigger)``, else ``ReadMinRows(minOffsetsPerTrigger)``,
        else ``ReadAllAvailable``. (PySpark has no composite limit: with both options set,
        any limit other than ``ReadAllAvailable`` applies both.)"""
        if self.max_offsets is not None:
            return ReadMaxRows(self.max_offsets)
        if self.min_offsets is not None:
            return ReadMinRows(self.min_offsets)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """``Trigger.AvailableNow``: fix the offsets available now as the end of this run."""
        self._target, _earliest = self._available()
        log.info("Trigger.AvailableNow: reading up to %s", self._target)

    def latestOffset(self, start: dict, limit) -> dict:
        """The end offset of the next micro-batch (``start`` itself when there is nothing to
        read yet). See the module for the limits."""
        begin = offsets_from_json(start)
        latest, earliest = self._available(begin)
        if self._target is not None:
            latest = dict(self._target)
            for tp, off in begin.items():  # never back, never drop a partition read so far
                if latest.get(tp, -1) < off:
                    latest[tp] = off
        self._latest = latest
        if isinstance(limit, ReadAllAvailable):
            end = latest
        else:
            min_rows = limit.min_rows if isinstance(limit, ReadMinRows) else self.min_offsets
            max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else self.max_offsets
            if min_rows is not None and self._target is None and \
                    self._delay_batch(min_rows, begin, latest):
                return start
            end = latest if max_rows is None else rate_limit(max_rows, begin, latest, earliest)
        if end == begin:
            return start
        return offsets_to_json(end)

    def _delay_batch(self, min_rows: int, begin: dict, latest: dict) -> bool:
        """``KafkaMicroBatchStream.delayBatch``: wait while fewer than ``min_rows`` offsets
        are new, unless ``maxTriggerDelay`` has passed since the last batch."""
        now = int(time.time() * 1000)
        if now - self._last_trigger_ms >= self.max_trigger_delay_ms:
            self._last_trigger_ms = now
            return False
        new = sum(off - begin.get(tp, 0) for tp, off in latest.items())
        if new < min_rows:
            return True
        self._last_trigger_ms = now
        return False

    def reportLatestOffset(self):
        """The offsets available at the last ``latestOffset`` (for the query's progress)."""
        return offsets_to_json(self._latest) if self._latest else None

    def partitions(self, start: dict, end: dict) -> list:
        """The :class:`~kafkafs.spark.plan.ReadTask` input partitions of the micro-batch
        ``[start, end)`` (see the module). Raises DataLossError under failOnDataLoss."""
        from .plan import bound_ranges, data_loss, group_tasks, plan_slices

        begin, until = offsets_from_json(start), offsets_from_json(end)
        if begin == until:
            return []
        opts = self.options
        fail = opts.fail_on_data_loss
        wanted = [tp for tp, off in until.items() if off > begin.get(tp, -1)]
        with self._views(wanted) as views:
            new = sorted(tp for tp in until if tp not in begin)
            initial = {tp: views[tp].log_start_offset for tp in new if tp in views}
            if len(initial) != len(new):
                data_loss(fail, "Cannot find earliest offsets of "
                          f"{format_tp_set(tp for tp in new if tp not in initial)}. Some data "
                          "may have been missed")
            for tp, off in initial.items():
                if off != 0:
                    data_loss(fail, f"Added partition {format_tp(tp)} starts from {off} "
                              "instead of 0. Some data may have been missed")
            gone = [tp for tp in begin if tp not in until]
            if gone:
                data_loss(fail, f"{format_tp_set(gone)} are gone. Some data may have been "
                          "missed.")
            ranges = {}
            for tp, stop in sorted(until.items()):
                first = begin.get(tp, initial.get(tp))
                if first is None:
                    continue
                if stop < first:
                    data_loss(fail, f"Partition {format_tp(tp)}'s offset was changed from "
                              f"{first} to {stop}, some data may have been missed")
                    continue
                if stop == first:
                    continue
                if tp not in views:
                    data_loss(fail, f"Could not read records in offset [{first}, {stop}) for "
                              f"topic partition {format_tp(tp)}: it is in none of the log "
                              f"dirs {', '.join(map(display, opts.paths))} any more.")
                    continue
                ranges[tp] = (first, stop)
            bounded = bound_ranges(views, ranges, opts)
            return group_tasks(plan_slices(views, bounded, opts))

    def read(self, partition):
        """The records of one task, as ``pyarrow.RecordBatch`` es (on an executor)."""
        from .reader import read_partition

        return read_partition(partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: the log dirs are never changed by a reader (as Spark's Kafka source
        commits nothing to Kafka)."""
