"""Notice what other processes do to the log dirs, using watchdog's inotify observer.

* Always: adopt partitions and segments copied in from outside (restored backups, bulk
  loads). The adoption runs once the log dirs have been quiet for ``settle_s`` seconds, so a
  copy in progress is not loaded half-written.
* ``follow=True`` (read-only mounts beside a live broker): also follow the broker's appends,
  rolls and deletions. A change to a partition dir refreshes that log within ``FOLLOW_S``
  seconds (:meth:`Log.refresh_from_disk`; the log tells its listeners, so ``tail -f`` sees
  the growth and retention under the mount shifts ``messages``); every log is also polled
  each ``POLL_S`` seconds in case inotify misses a change (network filesystems), and a
  partition whose dir went away (a deleted topic) is forgotten then.

Events arrive on watchdog's thread and are handed to trio through a memory channel; the work
itself runs in worker threads.
"""

from __future__ import annotations

import logging
import os

import trio

from ..log.manager import LogManager

log = logging.getLogger(__name__)

FOLLOW_S = 0.05  # seconds changes to one partition are gathered before it is refreshed
POLL_S = 2.0  # seconds between refreshes of every log when following


async def watch_log_dirs(manager: LogManager, settle_s: float = 1.0, follow: bool = False,
                         task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Watch every log dir (see the module docstring). Runs until cancelled."""
    from watchdog.events import (
        DirCreatedEvent,
        DirMovedEvent,
        FileCreatedEvent,
        FileDeletedEvent,
        FileModifiedEvent,
        FileMovedEvent,
        FileSystemEventHandler,
    )
    from watchdog.observers import Observer

    token = trio.lowlevel.current_trio_token()
    send_new, receive_new = trio.open_memory_channel(1024)
    send_changed, receive_changed = trio.open_memory_channel(4096)
    roots = {os.path.abspath(d) for d in manager.log_dirs}

    def partition_dir(path: str) -> str | None:
        parent = os.path.dirname(path)
        return parent if os.path.dirname(parent) in roots else None

    def put(channel, item) -> None:  # on the loop
        try:
            channel.send_nowait(item)
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            pass  # a full channel already holds a wake-up; the poll catches the rest

    def deliver(channel, item) -> None:
        # hand the event over without waiting for the loop: observer.stop() on the loop
        # (cancellation) waits for this thread, which must then not be waiting for the loop
        try:
            token.run_sync_soon(put, channel, item)
        except trio.RunFinishedError:
            pass

    class Handler(FileSystemEventHandler):
        def on_any_event(self, event):
            if event.event_type in ("created", "moved"):
                deliver(send_new, event.src_path)
            if follow:
                part = partition_dir(os.path.abspath(event.src_path))
                if part is not None:
                    deliver(send_changed, part)

    # only the events that matter: otherwise the kernel wakes watchdog's thread for every
    # write and open of a segment (and the GIL it takes slows appends and reads)
    wanted = [FileCreatedEvent, DirCreatedEvent, FileMovedEvent, DirMovedEvent]
    if follow:
        wanted += [FileModifiedEvent, FileDeletedEvent]
    observer = Observer()
    handler = Handler()
    for d in manager.log_dirs:
        observer.schedule(handler, d, recursive=True, event_filter=wanted)
    observer.daemon = True
    observer.start()
    task_status.started()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_adopt_new, manager, receive_new, settle_s)
            if follow:
                nursery.start_soon(_follow, manager, receive_changed)
    finally:
        observer.stop()
        await trio.to_thread.run_sync(observer.join, 5)


async def _adopt_new(manager: LogManager, receive, settle_s: float) -> None:
    while True:
        await receive.receive()
        # wait until the dirs are quiet
        while True:
            with trio.move_on_after(settle_s) as scope:
                await receive.receive()
            if scope.cancelled_caught:
                break
        await trio.to_thread.run_sync(_adopt, manager)


async def _follow(manager: LogManager, receive) -> None:
    """Refresh the logs whose dirs changed (gathered for ``FOLLOW_S``), and every log each
    ``POLL_S``."""
    seen: dict[str, tuple] = {}
    next_poll = trio.current_time() + POLL_S
    while True:
        dirs: set[str] = set()
        with trio.move_on_at(next_poll):
            dirs.add(await receive.receive())
            with trio.move_on_after(FOLLOW_S):
                while True:
                    dirs.add(await receive.receive())
        if trio.current_time() >= next_poll:
            dirs = None  # everything
            next_poll = trio.current_time() + POLL_S
        gone: list[tuple[str, int]] = []
        await trio.to_thread.run_sync(refresh_logs, manager, dirs, seen, gone)
        for topic, partition in gone:  # here, on the loop: the fs drops what it kept of them
            manager.forget_partition(topic, partition)


def _fingerprint(lg) -> tuple | None:
    """What changes when a writer touches a partition: the directory's mtime (segments
    created, renamed, deleted) and the active segment's size and mtime (appends, also into
    a preallocated file). None once the dir's path no longer names the log's directory.
    Nothing is followed: the stats go through the log's open partition dir."""
    if not lg.pdir.at_path():
        return None
    try:
        d = lg.pdir.fstat()
        f = lg.pdir.lstat(os.path.basename(lg.active_segment.log_path))
    except OSError:
        return None
    return (d.st_mtime_ns, f.st_size, f.st_mtime_ns)


def refresh_logs(manager: LogManager, dirs: set[str] | None = None,
                 seen: dict[str, tuple] | None = None,
                 gone: list[tuple[str, int]] | None = None) -> int:
    """Refresh the logs in ``dirs`` (partition dir paths; None: every log) from disk, and
    load partitions that appeared. Returns how many logs moved. With ``seen`` (dir ->
    fingerprint, kept between calls) a poll of every log skips the ones whose directory and
    active segment show no change since their last refresh: two stats instead of re-reading
    the active segment's indexes. Partitions whose dir is no longer there (a topic the
    broker deleted) are added to ``gone`` as (topic, partition), for
    :meth:`LogManager.forget_partition`. Errors are logged: a broker may delete a file
    between our listing and our open."""
    logs = {os.path.abspath(lg.dir): lg for lg in list(manager.logs.values())}
    if dirs is None or not dirs <= logs.keys():
        manager.scan_for_new_partitions()
        logs = {os.path.abspath(lg.dir): lg for lg in list(manager.logs.values())}
    moved = 0
    for d, lg in logs.items():
        if dirs is not None and d not in dirs:
            continue
        # taken before the refresh: a write after it shows at the next poll
        mark = _fingerprint(lg) if seen is not None else None
        if mark is None and not lg.pdir.at_path():
            if gone is not None:
                gone.append((lg.topic, lg.partition))
            if seen is not None:
                seen.pop(d, None)
            continue
        if dirs is None and mark is not None and seen.get(d) == mark:
            continue
        try:
            moved += bool(lg.refresh_from_disk())
            if mark is not None:
                seen[d] = mark
        except (OSError, ValueError) as exc:
            log.warning("Cannot follow %s: %s", lg.dir, exc)
    return moved


def _adopt(manager: LogManager) -> bool:
    from ..log.names import LOG_SUFFIX, parse_segment_filename

    changed = bool(manager.scan_for_new_partitions())
    for lg in list(manager.logs.values()):
        try:
            names = lg.pdir.files()  # regular files only: a planted link is never adopted
        except OSError:
            continue
        for name in sorted(names):
            p = parse_segment_filename(name)
            if p and p[1] == LOG_SUFFIX and p[2] == "":
                try:
                    if lg.adopt_segment(p[0]):
                        log.info("Adopted segment %s of %s", name, lg.name)
                        changed = True
                except (OSError, ValueError) as exc:
                    log.warning("Cannot adopt %s of %s: %s", name, lg.name, exc)
    return changed
