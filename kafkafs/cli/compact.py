"""``kafkafs compact``: run a log cleaner pass over a compacted topic now, with a progress bar.

Kafka has no such tool (its cleaner runs on its own schedule inside the broker); this is
what ``log.cleaner`` would do at its next pass, whatever the dirty ratio. It is a writer:
it takes the log dirs' lock, so it refuses beside a running kafkafs daemon (whose own
cleaner compacts the topic every ``log.cleaner.backoff.ms`` once it is dirty enough) or a
broker. It prints one line per partition, as the daemon logs it, and records the result for
``kafkafs topics --describe``. Exit status 1 when a partition's pass failed.
"""

from __future__ import annotations

import sys

from ..log import cleaner_status
from ..log.cleaner import CleanerConfig, LogCleaner
from ..log.errors import LogError
from .common import CliError, add_log_dir_args, open_manager


def register(sub) -> None:
    p = sub.add_parser("compact", help="run a log cleaner pass over a compacted topic now")
    add_log_dir_args(p, config_flag="--server-config")
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
    manager = open_manager(args, write=True)
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



def _save_status(manager, cleaner: LogCleaner) -> None:
    try:
        cleaner_status.save_all(manager.config.log_dirs, manager.logs, cleaner.manager)
    except OSError as exc:
        print(f"warning: cannot save the cleaner status: {exc}", file=sys.stderr)
