"""Background tasks of the daemon (Kafka's ``LogManager`` scheduler jobs), each a trio task.

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
"""

from __future__ import annotations

import logging

import trio

from ..log.config import LONG_MAX
from ..log.log import now_ms
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
