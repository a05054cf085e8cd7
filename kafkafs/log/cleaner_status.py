"""The cleaner's last result per partition, kept where ``kafkafs topics --describe`` (another
process) can read it: ``kafkafs-cleaner-status.json`` in each log dir, a regular file of
kafkafs's own (a broker ignores it, as it ignores ``kafkafs-topic-configs.json``).

Kafka keeps this in memory and shows it through JMX (``LogCleaner``'s
``max-clean-time-secs``, ``uncleanable-partitions-count``, ...); kafkafs's daemon writes it
after every pass so the command line sees it beside a running mount and after a restart.

File content: ``{"version": 1, "partitions": {"<topic>-<partition>": {"last_result": {...},
"uncleanable": {"error": str, "since_ms": int, "failures": int, "retry_at_ms": int} or
null}}}``; the result fields are :meth:`~kafkafs.log.cleaner_manager.CleanResult.to_dict`'s.
Written atomically (``.tmp``, fsync, rename) through :mod:`kafkafs.log.checkpoint`.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping

from . import checkpoint as ckpt
from .cleaner_manager import CleanResult, LogCleanerManager, UncleanableInfo

log = logging.getLogger(__name__)

CLEANER_STATUS_FILE = "kafkafs-cleaner-status.json"
VERSION = 1


def partition_entry(result: CleanResult | None, uncleanable: UncleanableInfo | None) -> dict:
    """The JSON object of one partition: its last result and its uncleanable mark."""
    bad = None
    if uncleanable is not None:
        bad = {"error": uncleanable.error, "since_ms": uncleanable.since_ms,
               "failures": uncleanable.failures, "retry_at_ms": uncleanable.retry_at_ms}
    return {"last_result": result.to_dict() if result is not None else None,
            "uncleanable": bad}


def save(log_dir: str, entries: dict[str, dict]) -> None:
    """Replace ``log_dir``'s status file with ``entries`` (``"<topic>-<partition>"`` ->
    :func:`partition_entry`). Raises OSError (the caller logs it: the status is
    informational)."""
    data = json.dumps({"version": VERSION, "partitions": entries}, indent=1,
                      sort_keys=True).encode() + b"\n"
    ckpt.atomic_write(os.path.join(log_dir, CLEANER_STATUS_FILE), data)


def load(log_dirs: Iterable[str]) -> dict[str, dict]:
    """Every partition entry of the status files in ``log_dirs`` (a missing, unreadable or
    malformed file gives none: logged at debug level, the status is informational)."""
    out: dict[str, dict] = {}
    for d in log_dirs:
        path = os.path.join(d, CLEANER_STATUS_FILE)
        try:
            data = json.loads(ckpt.read_file(path).decode("utf-8"))
            parts = data["partitions"]
            if data.get("version") != VERSION or not isinstance(parts, dict):
                raise ValueError(f"unknown version {data.get('version')!r}")
        except FileNotFoundError:
            continue
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.debug("ignoring cleaner status %s: %s", path, exc)
            continue
        out.update({k: v for k, v in parts.items() if isinstance(v, dict)})
    return out


def save_all(log_dirs: Iterable[str], logs: Mapping, cm: LogCleanerManager) -> None:
    """Write every log dir's status file from ``cm``'s last results and uncleanable marks
    for the partitions in ``logs`` (``(topic, partition) -> Log``); a partition without
    either in ``cm`` keeps the entry an earlier run saved. Raises OSError."""
    by_dir: dict[str, dict] = {os.path.abspath(d): {} for d in log_dirs}
    earlier = {d: load([d]) for d in by_dir}
    for (topic, partition), lg in list(logs.items()):
        d = os.path.dirname(os.path.abspath(lg.dir))
        name = f"{topic}-{partition}"
        result = cm.last_result((topic, partition))
        bad = cm.uncleanable((topic, partition))
        if result is None and bad is None:
            if name in earlier.get(d, {}):
                by_dir.setdefault(d, {})[name] = earlier[d][name]
            continue
        by_dir.setdefault(d, {})[name] = partition_entry(result, bad)
    for d, entries in by_dir.items():
        save(d, entries)
