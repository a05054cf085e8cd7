"""Adopt partitions and segments copied into the log dirs from outside (restored backups,
bulk loads), using watchdog's inotify observer.

Events arrive on watchdog's thread and are handed to trio through a memory channel; the
adoption itself runs once the log dirs have been quiet for ``settle_s`` seconds, so a copy in
progress is not loaded half-written.
"""

from __future__ import annotations

import logging

import trio

from ..log.manager import LogManager

log = logging.getLogger(__name__)


async def watch_log_dirs(manager: LogManager, settle_s: float = 1.0,
                         task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Watch every log dir; after changes settle, load new partitions and adopt older
    segments restored into known ones (a log that changes tells its listeners itself)."""
    from watchdog.events import (DirCreatedEvent, DirMovedEvent, FileCreatedEvent,
                                 FileMovedEvent, FileSystemEventHandler)
    from watchdog.observers import Observer

    token = trio.lowlevel.current_trio_token()
    send, receive = trio.open_memory_channel(1024)

    class Handler(FileSystemEventHandler):
        def on_any_event(self, event):
            # only new names matter (copied-in files and dirs); modifications are our own
            if event.event_type not in ("created", "moved"):
                return
            try:
                trio.from_thread.run_sync(send.send_nowait, event.src_path, trio_token=token)
            except (trio.WouldBlock, trio.RunFinishedError, trio.Cancelled):
                pass

    observer = Observer()
    handler = Handler()
    for d in manager.log_dirs:
        # only names appearing: the kernel then does not wake watchdog's thread for every
        # write and open of a segment (the GIL it would take slows appends and reads)
        observer.schedule(handler, d, recursive=True, event_filter=[
            FileCreatedEvent, DirCreatedEvent, FileMovedEvent, DirMovedEvent])
    observer.daemon = True
    observer.start()
    task_status.started()
    try:
        while True:
            await receive.receive()
            # wait until the dirs are quiet
            while True:
                with trio.move_on_after(settle_s) as scope:
                    await receive.receive()
                if scope.cancelled_caught:
                    break
            await trio.to_thread.run_sync(_adopt, manager)
    finally:
        observer.stop()
        await trio.to_thread.run_sync(observer.join, 5)


def _adopt(manager: LogManager) -> bool:
    import os

    from ..log.names import LOG_SUFFIX, parse_segment_filename

    changed = bool(manager.scan_for_new_partitions())
    for lg in list(manager.logs.values()):
        try:
            names = os.listdir(lg.dir)
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
