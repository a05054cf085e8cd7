"""Background tasks of the storage core (Kafka's ``LogManager`` scheduler jobs), each a trio
task, started by :meth:`StorageCore.start_tasks <kafkafs.core.storage.StorageCore.start_tasks>`.

* :func:`flush_scheduler` — ``log.flush.interval.messages`` / ``log.flush.interval.ms``
  (topic ``flush.messages`` / ``flush.ms``), checked every
  ``log.flush.scheduler.interval.ms`` (at most every second); fsync runs in a worker thread.
* :func:`retention_task` — ``retention.ms`` / ``retention.bytes`` every
  ``log.retention.check.interval.ms``; ``.deleted`` files removed after
  ``file.delete.delay.ms``.
* :func:`producer_expiration_task` — producer ids idle for ``producer.id.expiration.ms``
  forgotten every ``producer.id.expiration.check.interval.ms``.
* :func:`checkpoint_task` — ``recovery-point-offset-checkpoint`` every
  ``log.flush.offset.checkpoint.interval.ms`` and ``log-start-offset-checkpoint`` every
  ``log.flush.start.offset.checkpoint.interval.ms``.
* :func:`cleaner_task` — the log cleaner (Kafka ``LogCleaner``'s ``CleanerThread``s):
  ``log.cleaner.threads`` loops, each cleaning the dirtiest log in a worker thread and
  sleeping ``log.cleaner.backoff.ms`` when none needs cleaning.
* :func:`key_maps_task` — the key maps in use kept up to date with their logs and saved
  every ``log.flush.offset.checkpoint.interval.ms``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

import trio
import trio.lowlevel

from ..log import cleaner_status
from ..log.cleaner import LogCleaner
from ..log.config import LONG_MAX
from ..log.keymap import KeyMaps
from ..log.log import Log, now_ms
from ..log.manager import LogManager

log = logging.getLogger(__name__)

MAX_SLEEP_S = 1.0


def _interval_s(ms: int, cap: float = MAX_SLEEP_S) -> float:
    if ms >= LONG_MAX:
        return cap
    return max(0.01, min(cap, ms / 1000))


async def flush_scheduler(manager: LogManager) -> None:
    """Flush every log whose flush policy is due; fsync off the event loop."""
    interval = _interval_s(manager.config.log_flush_scheduler_interval_ms)
    while True:
        await trio.sleep(interval)
        now = now_ms()
        due = [lg for lg in list(manager.logs.values()) if lg.needs_flush(now)]
        for lg in due:
            try:
                await trio.to_thread.run_sync(lg.flush)
            except OSError as exc:
                log.error("flush of %s failed: %s", lg.name, exc)


async def retention_task(manager: LogManager) -> None:
    """Apply retention every ``log.retention.check.interval.ms``; ``.deleted`` files go
    once their delay is over (checked every second)."""
    interval_ms = manager.config.log_retention_check_interval_ms
    next_check = now_ms() + interval_ms
    while True:
        await trio.sleep(MAX_SLEEP_S)
        now = now_ms()
        if now >= next_check:
            next_check = now + interval_ms
            try:
                await trio.to_thread.run_sync(manager.apply_retention, now)
            except OSError as exc:
                log.error("retention failed: %s", exc)
        else:
            for lg in list(manager.logs.values()):
                if lg.pending_deletes:
                    await trio.to_thread.run_sync(lg.remove_deleted_segments, now)


async def producer_expiration_task(manager: LogManager) -> None:
    """Expire idle producer ids every ``producer.id.expiration.check.interval.ms`` (Kafka's
    ``PRODUCER_EXPIRATION_CHECK`` job)."""
    interval_ms = manager.config.producer_id_expiration_check_interval_ms
    next_check = now_ms() + interval_ms
    while True:
        await trio.sleep(_interval_s(max(0, next_check - now_ms())))
        now = now_ms()
        if now >= next_check:
            next_check = now + interval_ms
            n = await trio.to_thread.run_sync(manager.remove_expired_producers, now)
            if n:
                log.info("expired %d producer id(s)", n)


async def checkpoint_task(manager: LogManager) -> None:
    """Write the recovery-point and log-start-offset checkpoints on their intervals."""
    rp_ms = manager.config.log_flush_offset_checkpoint_interval_ms
    ls_ms = manager.config.log_flush_start_offset_checkpoint_interval_ms
    next_rp = now_ms() + rp_ms
    next_ls = now_ms() + ls_ms
    while True:
        await trio.sleep(MAX_SLEEP_S)
        now = now_ms()
        try:
            if now >= next_rp:
                next_rp = now + rp_ms
                await trio.to_thread.run_sync(manager.checkpoint_recovery_points)
            if now >= next_ls:
                next_ls = now + ls_ms
                await trio.to_thread.run_sync(manager.checkpoint_log_start_offsets)
        except OSError as exc:
            log.error("writing checkpoints failed: %s", exc)


async def cleaner_task(manager: LogManager, cleaner: LogCleaner,
                       after_pass: Callable[[Log], None] | None = None) -> None:
    """Run ``log.cleaner.threads`` cleaner loops until cancelled. Each pass runs in a worker
    thread (appends and reads go on beside it); its result is logged by the cleaner and
    saved to each log dir's ``kafkafs-cleaner-status.json`` for ``topics --describe``.
    Cancelling asks running passes to stop at their next check (nothing half-swapped:
    :meth:`LogCleaner.shutdown`) and returns when they have. ``after_pass(log)`` runs in
    the worker thread after each successful pass (the key view drops what it removed)."""
    threads = max(1, cleaner.config.num_threads)
    async with trio.open_nursery() as nursery:
        for _ in range(threads):
            nursery.start_soon(_cleaner_loop, manager, cleaner, after_pass)
        try:
            await trio.sleep_forever()
        finally:
            cleaner.shutdown()  # the loops' threads return at their next check


async def _cleaner_loop(manager: LogManager, cleaner: LogCleaner, after_pass) -> None:
    backoff_s = max(0.01, cleaner.config.backoff_ms / 1000)
    while True:
        try:
            result = await trio.to_thread.run_sync(cleaner.clean_filthiest)
        except Exception:  # a bug in choosing a log must not take the daemon down
            log.exception("The log cleaner failed; it tries again in %.1f s", backoff_s)
            result = None
        if result is None:
            await trio.sleep(backoff_s)
            continue
        lg = manager.logs.get((result.topic, result.partition))
        if result.ok and after_pass is not None and lg is not None:
            try:
                await trio.to_thread.run_sync(after_pass, lg)
            except Exception:
                log.exception("updating the key map of %s after cleaning failed", lg.name)
        try:
            await trio.to_thread.run_sync(cleaner_status.save_all, manager.config.log_dirs,
                                          manager.logs, cleaner.manager)
        except OSError as exc:
            log.warning("cannot save the cleaner status: %s", exc)
        await trio.lowlevel.checkpoint()



async def key_maps_task(maps: KeyMaps, manager: LogManager, save_interval_ms: int) -> None:
    """Open the saved key maps (:meth:`KeyMaps.open_saved`), then keep the maps in use up to
    date with their logs (when a log pauses: :meth:`KeyMaps.maintain`), off the event loop,
    and save the changed ones every ``save_interval_ms``
    (``log.flush.offset.checkpoint.interval.ms``, as the other checkpoints)."""
    await trio.to_thread.run_sync(maps.open_saved, list(manager.logs.values()))
    next_save = now_ms() + save_interval_ms
    while True:
        await trio.sleep(1.0)
        if not len(maps):
            continue
        save = now_ms() >= next_save
        if save:
            next_save = now_ms() + save_interval_ms
        await trio.to_thread.run_sync(partial(maps.maintain, save=save))
