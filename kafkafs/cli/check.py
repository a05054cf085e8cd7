"""``kafkafs check [--log-dirs DIR[,DIR...]] [--repair] [--json]``: what a Kafka broker's
startup would find in these log dirs, and, with ``--repair``, what its recovery would fix
(nothing else). The old spelling ``kafkafs check LOGDIR...`` still works, with a note.

Without ``--repair`` every file is opened read-only and no lock is taken: not a byte, a name
or an mtime changes, so it runs beside a daemon (whose live log it then describes). With
``--repair`` it takes each log dir's ``.lock`` as the daemon does and refuses, naming the
holder, while a daemon or broker holds one. The checks and the repair are
:mod:`kafkafs.log.inspect`'s, which runs the loader's own steps (:mod:`kafkafs.log.loader`).

Output: one line per finding (``problem:``/``note:``, the file relative to the log dir, the
byte position where there is one, Kafka's message, ``=>`` what recovery does), then a summary
line per log dir. With ``--repair``, one ``did:`` line per step carried out, then the check
made afterwards. ``--json`` prints one JSON document instead.

Exit status: 0 clean (notes allowed); 1 problems found (without ``--repair``), problems left
after ``--repair`` (ones recovery does not fix), or the lock is held; 2 usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from ..log.errors import LogDirLockedError
from ..log.inspect import (
    NOTE,
    LogDirReport,
    inspect_log_dirs,
    relative,
    repair_log_dirs,
)
from .common import CliError, add_log_dir_args, broker_config, silenced
from .holder import find_holder

EXIT_CLEAN, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2


def register(subparsers) -> None:
    """Add the ``check`` sub-command to ``subparsers``."""
    p = subparsers.add_parser(
        "check", help="report what a broker's startup would find in log dirs; --repair fixes "
                      "what Kafka's recovery fixes",
        description="Check Kafka log dirs as a broker's startup would (LogManager, LogLoader, "
                    "LogSegment.recover, the index sanity checks) and report every problem, "
                    "read-only. With --repair, take the log dir lock and fix what Kafka's "
                    "recovery would fix, and nothing else.")
    add_log_dir_args(p)
    p.add_argument("legacy_log_dirs", nargs="*", metavar="LOGDIR", help=argparse.SUPPRESS)
    p.add_argument("--repair", action="store_true",
                   help="fix what Kafka's recovery fixes: delete leftovers, rebuild indexes, "
                        "truncate torn or corrupt data (and later segments), rewrite the "
                        "checkpoints; refuses while a daemon or broker holds the lock")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=run)


def _dirs(args) -> list[str] | int:
    if args.legacy_log_dirs:  # the old spelling: kafkafs check LOGDIR...
        if args.log_dirs:
            print("error: give the log dirs once, with --log-dirs", file=sys.stderr)
            return EXIT_USAGE
        print(f"kafkafs check: note: a LOGDIR argument is deprecated; use --log-dirs "
              f"{','.join(args.legacy_log_dirs)}", file=sys.stderr)
        args.log_dirs = ",".join(args.legacy_log_dirs)
    config = broker_config(args)
    dirs = list(config.log_dirs)
    out, seen = [], {}
    for d in dirs:
        if not os.path.isdir(d):
            print(f"error: {d} is not a directory", file=sys.stderr)
            return EXIT_USAGE
        real = os.path.realpath(d)
        if real in seen:
            print(f"error: Duplicate log directory found: {seen[real]}, {d}", file=sys.stderr)
            return EXIT_USAGE
        seen[real] = d
        out.append(os.path.abspath(d))
    args.broker_config = config.with_log_dirs(out)
    return out


def _where(report: LogDirReport, f) -> str:
    where = relative(report, f.path)
    if f.position is not None:
        where += f": position {f.position}"
    return where


def _finding_line(report: LogDirReport, f) -> str:
    if f.severity == NOTE:
        level = "note"
    elif f.repairable:
        level = "problem"
    else:
        level = "problem (not repairable)"
    extra = "" if f.at_startup or f.severity == NOTE else \
        " (found by check only: a plain startup does not look here)"
    message = f.message.replace("\n", " ")
    return f"{level}: {_where(report, f)}: {message} => {f.action}{extra}"


def _summary(report: LogDirReport) -> str:
    problems = report.problems
    parts = [f"{len(report.partitions)} partition(s)"]
    if not problems:
        parts.append("clean")
    else:
        fixable = sum(1 for f in problems if f.repairable)
        parts.append(f"{len(problems)} problem(s) ({fixable} repairable with --repair, "
                     f"{len(problems) - fixable} not)")
    if report.notes:
        parts.append(f"{len(report.notes)} note(s)")
    return f"{report.path}: " + ", ".join(parts)


def _print_reports(reports: list[LogDirReport], out) -> None:
    for report in reports:
        for f in report.findings:
            out.write(_finding_line(report, f) + "\n")
        out.write(_summary(report) + "\n")


def run(args, out=None) -> int:
    """Run ``kafkafs check`` with parsed ``args``; returns the exit status."""
    out = out or sys.stdout
    dirs = _dirs(args)
    if isinstance(dirs, int):
        return dirs
    config = args.broker_config
    try:
        return _run(args, dirs, config, out)
    except BrokenPipeError:
        raise
    except OSError as exc:
        what = f"{exc.strerror}: {exc.filename}" if exc.filename else str(exc)
        raise CliError(f"cannot check: {what}") from None


def _run(args, dirs: list[str], config, out) -> int:
    with silenced("kafkafs.log"):  # the loader logs each step; check reports them itself
        if not args.repair:
            reports = inspect_log_dirs(dirs, config)
            if args.json:
                _print_json(out, reports, None)
            else:
                _print_reports(reports, out)
            return EXIT_PROBLEMS if any(r.problems for r in reports) else EXIT_CLEAN
        try:
            before = repair_log_dirs(dirs, config)
        except LogDirLockedError as exc:
            holder = find_holder(dirs)
            mount = holder.mount if holder is not None and holder.mount else "MOUNT"
            raise CliError(
                f"{exc}\nkafkafs check --repair needs the log dirs to itself: stop the daemon "
                f"(kafkafs umount {mount}) or the broker first. Nothing was changed; kafkafs "
                "check without --repair runs beside it.") from None
        after = inspect_log_dirs(dirs, config)
    if args.json:
        _print_json(out, before, after)
    else:
        for report in before:
            for f in report.findings:
                out.write(_finding_line(report, f) + "\n")
            for a in report.done:
                out.write(f"did: {relative(report, a.path)}"
                          f"{'' if a.position is None else f': position {a.position}'}: "
                          f"{a.action}\n")
            if not report.done:
                out.write(f"{report.path}: nothing to repair\n")
        out.write("after repair:\n")
        _print_reports(after, out)
    return EXIT_PROBLEMS if any(r.problems for r in after) else EXIT_CLEAN


def _print_json(out, reports, after) -> None:
    doc = {"log_dirs": [r.to_dict() for r in reports],
           "problems": sum(len(r.problems) for r in reports),
           "unrepairable": sum(1 for r in reports for f in r.problems if not f.repairable),
           "repaired": after is not None}
    if after is not None:
        doc["after_repair"] = [r.to_dict() for r in after]
        doc["problems_after_repair"] = sum(len(r.problems) for r in after)
    json.dump(doc, out, indent=1)
    out.write("\n")
