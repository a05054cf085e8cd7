"""``kafkafs compact``: run a log cleaner pass over a compacted topic now, with a progress bar.

Kafka has no such tool (its cleaner runs on its own schedule inside the broker); this is
what ``log.cleaner`` would do at its next pass, whatever the dirty ratio. It is a writer:
it takes the log dirs' lock, so it refuses beside a broker; beside a running kafkafs daemon it asks the
daemon to run the pass (``setfattr -n user.kafkafs.compact`` on the topic's or partition's
dir in its mount, which returns when the pass is done). It prints one line per partition, as the daemon logs it, and records the result for
``kafkafs topics --describe``. Exit status 1 when a partition's pass failed.
"""

from __future__ import annotations

import errno
import os
import shlex
import sys

from ..core import control
from ..log import cleaner_status
from ..log.cleaner import CleanerConfig, LogCleaner
from ..log.errors import LogError
from .common import CliError, add_log_dir_args, broker_config, open_manager
from .holder import Job
from .mount import mount_serving


def register(sub) -> None:
    p = sub.add_parser("compact", help="run a log cleaner pass over a compacted topic now")
    add_log_dir_args(p)
    p.add_argument("--topic", required=True, help="the topic to compact")
    p.add_argument("--partition", type=int, action="append", default=None,
                   help="only this partition (repeatable; default: every partition)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar (it is also left out when stderr is not a terminal)")
    p.set_defaults(func=run)


def _progress(enabled: bool):
    if not enabled:
        return None
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    return Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                    TransferSpeedColumn(), TimeRemainingColumn(), transient=True)


def run(args) -> int:
    try:
        # every partition loaded: the cleaner's checkpoint keeps the entries of live logs only
        manager = open_manager(args, write=True, job=_job(args), lazy=False)
    except CliError:
        mnt = mount_serving(broker_config(args).log_dirs)
        if mnt is None:
            raise
        return _through_daemon(args, mnt)
    failed = 0
    try:
        parts = manager.partitions(args.topic)
        if not parts:
            raise CliError(f"Topic '{args.topic}' does not exist")
        wanted = args.partition if args.partition is not None else parts
        missing = sorted(set(wanted) - set(parts))
        if missing:
            raise CliError(f"Topic '{args.topic}' has no partition {missing[0]} "
                           f"(it has {len(parts)})")
        config = manager.config
        cleaner = LogCleaner(CleanerConfig.from_broker(config), config.log_dirs, manager.logs)
        bar = _progress(not args.no_progress and sys.stderr.isatty())
        if bar is not None:
            bar.start()
        try:
            for p in wanted:
                lg = manager.get_log(args.topic, p)
                if not lg.config.compact:
                    raise CliError(f"Topic '{args.topic}' has cleanup.policy="
                                   f"{lg.config.cleanup_policy}: only compacted topics are "
                                   "cleaned (kafkafs topics --alter --config "
                                   "cleanup.policy=compact)")
                task = bar.add_task(lg.name, total=None) if bar is not None else None

                def progress(done: int, total: int, task=task) -> None:
                    if bar is not None:
                        bar.update(task, completed=done, total=total)

                result = cleaner.clean_log(lg, progress=progress)
                if bar is not None:
                    bar.remove_task(task)
                print(result.log_line())
                failed += result.error is not None
        finally:
            if bar is not None:
                bar.stop()
        _save_status(manager, cleaner)
    except (LogError, ValueError) as exc:
        raise CliError(str(exc)) from None
    finally:
        manager.shutdown()
    return 1 if failed else 0



def _job(args) -> Job:
    """A pass through a daemon's mount: the setxattr :func:`_through_daemon` makes."""
    def through(mnt: str) -> str:
        targets = [os.path.join(mnt, args.topic)] if args.partition is None else \
            [os.path.join(mnt, args.topic, str(p)) for p in args.partition]
        return f"setfattr -n {control.COMPACT} -v now {' '.join(map(shlex.quote, targets))}"

    return Job("run the cleaner pass", through, "none: a broker's log cleaner runs on its own")


def _save_status(manager, cleaner: LogCleaner) -> None:
    try:
        cleaner_status.save_all(manager.config.log_dirs, manager.logs, cleaner.manager)
    except OSError as exc:
        print(f"warning: cannot save the cleaner status: {exc}", file=sys.stderr)


def _through_daemon(args, mnt: str) -> int:
    """Ask the daemon mounted at ``mnt`` to clean the topic (or its partitions) now and print
    what its passes did, from the status it saves after each pass."""
    targets = [os.path.join(mnt, args.topic)] if args.partition is None else \
        [os.path.join(mnt, args.topic, str(p)) for p in args.partition]
    print(f"Cleaning through the kafkafs daemon mounted at {mnt} ...", file=sys.stderr)
    failed = 0
    for path in targets:
        try:
            control.compact(path)
        except FileNotFoundError:
            raise CliError(f"{os.path.relpath(path, mnt)} does not exist in {mnt}") from None
        except OSError as exc:
            reason = {errno.EINVAL: "only compacted topics are cleaned (cleanup.policy)",
                      errno.ENOTSUP: "the daemon runs no cleaner (log.cleaner.enable=false)",
                      errno.EIO: "a pass failed (see topics --describe and the daemon's log)",
                      errno.EROFS: "the mount is read-only: a read-only mount never cleans"
                      }.get(exc.errno, exc.strerror)
            if exc.errno != errno.EIO:
                raise CliError(f"{args.topic}: {reason}") from None
            print(f"error: {os.path.relpath(path, mnt)}: {reason}", file=sys.stderr)
            failed += 1
    saved = cleaner_status.load(broker_config(args).log_dirs)
    parts = args.partition
    for name, entry in sorted(saved.items()):
        topic, _, p = name.rpartition("-")
        if topic != args.topic or (parts is not None and int(p) not in parts):
            continue
        last = entry.get("last_result") or {}
        if last:
            print(f"{name}: {last.get('bytes_read', 0)} bytes read, "
                  f"{last.get('bytes_written', 0)} written, "
                  f"{last.get('records_dropped', 0)} records dropped "
                  f"({last.get('tombstones_dropped', 0)} tombstones)"
                  + (f", error: {last['error']}" if last.get("error") else ""))
    return 1 if failed else 0
