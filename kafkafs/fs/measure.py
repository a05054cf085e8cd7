"""Keeping the views (``messages``, ``records.jsonl``) of the partitions that grow measured,
in the background, and their marks saved (docs/tree.md, "The size of messages").

A view's size is the length of its text, which only a pass over the records gives
(:mod:`kafkafs.fs.views`). Measured when first read, a large partition's view shows size 0
until a read reaches its end. So the daemon measures, a step at a time and off the event
loop, both views of every partition that grows while it runs (appends through
the mount, a bulk load, a live broker followed by a read-only mount), as long as the view
was measured before, or the partition held at most ``UNMEASURED_LIMIT`` bytes of segments
when the daemon started or was created while it runs, or this measurer began on it, or
what is left to measure is at most that: a partition written through kafkafs from
the start is always sized, at the cost of one native pass over each byte appended (even
while appends outrun the passes: an 8 GB partition written at 200 MB/s is sized once the
appends pause), while a broker's partitions of many GB are not read whole behind the
user's back. The marks of views that moved are saved every
``log.flush.offset.checkpoint.interval.ms`` (and at unmount), so a remount, even after a
crash, knows the sizes without a scan: ``tail -n`` of a large partition then reads only
its end.
"""

from __future__ import annotations

import logging
import weakref

import trio
import trio.lowlevel

from ..log.log import now_ms
from . import tree as T

log = logging.getLogger(__name__)

MEASURE_STEP_BYTES = 4 * 1024 * 1024  # bytes of view measured per step in a worker thread
UNMEASURED_LIMIT = 256 * 1024 * 1024  # a never-measured view measured in the background
POLL_S = 1.0


async def keep_views_measured(fs, save_interval_ms: int) -> None:
    """Run until cancelled: every ``POLL_S`` look for partitions whose log end offset moved
    (or that are new), measure their views up to the log end (see the
    module), and every ``save_interval_ms`` save the marks of the views that moved
    (:meth:`~kafkafs.fs.operations.KafkaFS.save_views`)."""
    seen = {tp: lg.log_end_offset for tp, lg in list(fs.manager.logs.items())}
    # partitions small when first seen: everything past that is growth kept up with
    small = {tp for tp, lg in list(fs.manager.logs.items()) if _is_small(lg)}
    # views this measurer began: followed whatever is left of them (weak: a view dropped
    # with its partition goes)
    begun: weakref.WeakSet = weakref.WeakSet()
    next_save = now_ms() + save_interval_ms
    while True:
        await trio.sleep(POLL_S)
        for tp, lg in list(fs.manager.logs.items()):
            end = lg.log_end_offset
            if seen.get(tp) == end:
                continue
            if tp not in seen:  # created while the daemon runs: all of it came since
                small.add(tp)
            seen[tp] = end
            try:
                await _measure(fs, tp, begun, tp in small)
            except Exception as exc:  # noqa: BLE001 - a view a read measures again later
                log.debug("measuring %s-%d: %s", tp[0], tp[1], exc)
        for tp in [tp for tp in seen if tp not in fs.manager.logs]:
            del seen[tp]
            small.discard(tp)
        if now_ms() >= next_save:
            next_save = now_ms() + save_interval_ms
            try:
                await trio.to_thread.run_sync(fs.save_views, True)
            except OSError as exc:  # informational: a read measures again
                log.warning("cannot save the views' marks: %s", exc)


def _is_small(lg) -> bool:
    return sum(seg.size for seg in lg.segments()) <= UNMEASURED_LIMIT


async def _measure(fs, tp: tuple[str, int], begun: weakref.WeakSet, small: bool) -> None:
    for kind in (T.MESSAGES, T.JSONL):
        if tp not in fs.manager.logs:
            return
        await _measure_view(fs.view(tp[0], tp[1], kind), begun, small)


async def _measure_view(v, begun: weakref.WeakSet, small: bool = False) -> None:
    """Measure ``v`` up to where the log ended when this began, a step at a time off the
    loop, unless it is a large view nobody measured (see the module); ``small``: its
    partition was small when first seen."""
    left = await trio.to_thread.run_sync(v.unmeasured_bytes)
    if not (v.ever_sized or small or v in begun) and left > UNMEASURED_LIMIT:
        return
    begun.add(v)
    # as far as the log went when this pass began: appends meanwhile are the next pass's
    while left > 0 and v.damage is None:
        if await trio.to_thread.run_sync(v.measure_step, MEASURE_STEP_BYTES):
            return
        left -= MEASURE_STEP_BYTES
        await trio.lowlevel.checkpoint()  # let the requests waiting in between go first
