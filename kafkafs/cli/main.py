"""The ``kafkafs`` command: one sub-command per Kafka tool a user already knows
(docs/design.md §1.1, docs/cli.md)."""

from __future__ import annotations

import argparse
import sys
from contextlib import contextmanager

from .. import __version__
from ..log.errors import LogError
from ..record.errors import CorruptRecordError
from .common import CliError, fail, silenced


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafkafs",
        description="Apache Kafka's log storage as a filesystem: mount Kafka log dirs, and "
                    "the Kafka tools on them without a broker.")
    parser.add_argument("--version", action="version", version=f"kafkafs {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    from . import (
        check,
        clients,
        compact,
        consumer_groups,
        demo,
        dump,
        mount,
        pipeline,
        reassign,
        serve,
        topics,
        transactions,
    )

    mount.register(sub)
    serve.register(sub)
    topics.register(sub)
    clients.register(sub)
    dump.register(sub)
    check.register(sub)
    compact.register(sub)
    consumer_groups.register(sub)
    transactions.register(sub)
    reassign.register(sub)
    demo.register(sub)
    pipeline.register(sub)
    return parser


@contextmanager
def _damage_said_once(command: str):
    """Outside ``mount``, the log layer's damage log (``kafkafs.damage``: "Damaged data,
    readers get EIO from here on: ...", written for the daemon's log by whichever reader
    meets a damaged batch first -- a producer-state replay, a transaction scan) is not
    printed: a command that meets damage on its way says so itself, in its one ``error:
    FILE: position N: REASON`` line (docs/cli.md). Restored afterwards (tests call main()
    in-process)."""
    if command in ("mount", "serve"):
        yield
        return
    with silenced("kafkafs.damage"):
        yield


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with _damage_said_once(args.command):
            return args.func(args) or 0
    except (CliError, LogError, CorruptRecordError) as exc:
        return fail(str(exc))
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
