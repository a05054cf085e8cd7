"""What every ``kafkafs`` sub-command shares: finding the log dirs and opening them.

The log dirs come from ``--log-dirs``, else ``log.dirs`` of ``--config``, else
``$KAFKAFS_LOG_DIRS``, else the per-user default ``$XDG_DATA_HOME/kafkafs/logs``
(``~/.local/share/kafkafs/logs``), which is also where ``kafkafs demo`` keeps its data.
Readers open the dirs read-only and never take the lock, so they run beside a daemon;
writers take the lock and refuse clearly while a daemon (or broker) holds it. Either loads a
partition only when it first uses it (:func:`open_manager`).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from contextlib import contextmanager

from ..log.config import BrokerConfig, parse_log_dirs
from ..log.errors import LogDirLockedError
from ..log.manager import LogManager
from .holder import Job, refusal


class CliError(Exception):
    """A user-facing failure: printed as ``error: ...`` with exit status 1."""


def default_log_dir() -> str:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local",
                                                             "share")
    return os.path.join(base, "kafkafs", "logs")


LOG_DIRS_HELP = ("Kafka log directories (default: log.dirs of --config, $KAFKAFS_LOG_DIRS, "
                 "or ~/.local/share/kafkafs/logs)")


def add_log_dir_args(p: argparse.ArgumentParser, *, topic_configs: bool = False) -> None:
    """Add the options every sub-command finds its log dirs with: ``--log-dirs
    DIR[,DIR...]``, ``--config FILE`` (server.properties, dest ``config``) and ``--override
    KEY=VALUE``; ``--server-config FILE`` is the old spelling of ``--config`` (still taken,
    with a deprecation note).

    ``topic_configs`` (``topics``, as kafka-topics.sh): ``--config KEY=VALUE`` is also a
    topic config (appended to ``topic_config``); :func:`is_topic_config` tells the two
    apart."""
    p.add_argument("--log-dirs", metavar="DIR[,DIR...]", help=LOG_DIRS_HELP)
    if topic_configs:
        p.set_defaults(topic_config=[])
        p.add_argument("--config", dest="config", action=_FileOrTopicConfig,
                       metavar="FILE|KEY=VALUE",
                       help="without '=': the broker's server.properties (log.dirs and "
                            "defaults, Kafka's key names); KEY=VALUE: a topic config override "
                            "as in kafka-topics.sh (repeatable)")
    else:
        p.add_argument("--config", dest="config", metavar="FILE",
                       help="the broker's server.properties (log.dirs and defaults, Kafka's "
                            "key names)")
    p.add_argument("--server-config", dest="config", action=_DeprecatedConfig,
                   help=argparse.SUPPRESS)
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="override a server.properties key (repeatable)")


def is_topic_config(value: str) -> bool:
    """Whether a ``topics --config`` value is a topic config ``KEY=VALUE`` rather than a
    server.properties path: it has a ``=`` and no ``/`` before it (a topic config key never
    has one; ``--config ./odd=name.properties`` is a file)."""
    key, sep, _ = value.partition("=")
    return bool(sep) and "/" not in key


def deprecated(parser: argparse.ArgumentParser, namespace, old: str, new: str) -> None:
    """Print ``old``'s deprecation note on stderr, once per command line."""
    said = getattr(namespace, "_deprecation_notes", None)
    if said is None:
        said = set()
        namespace._deprecation_notes = said
    if old in said:
        return
    said.add(old)
    print(f"{parser.prog}: note: {old} is deprecated; use {new}", file=sys.stderr)


class _FileOrTopicConfig(argparse.Action):
    """``topics --config``: KEY=VALUE is a topic config, anything else the server.properties
    file."""

    def __call__(self, parser, namespace, values, option_string=None):
        if is_topic_config(values):
            namespace.topic_config = [*namespace.topic_config, values]
        else:
            namespace.config = values


class _DeprecatedConfig(argparse.Action):
    """``--server-config FILE``: ``--config FILE``, with a note."""

    def __call__(self, parser, namespace, values, option_string=None):
        deprecated(parser, namespace, option_string, f"--config {values}")
        namespace.config = values


def parse_kv(items, what: str = "property", strip_values: bool = False) -> dict[str, str]:
    """``["k=v", ...]`` → ``{"k": "v"}`` (keys stripped; values too with ``strip_values``:
    a console property such as ``key.separator= `` keeps its spaces). Raises CliError."""
    out = {}
    for item in items or []:
        k, sep, v = item.partition("=")
        if not sep:
            raise CliError(f"invalid {what} {item!r}: expected KEY=VALUE")
        out[k.strip()] = v.strip() if strip_values else v
    return out


def broker_config(args) -> BrokerConfig:
    """The configuration the arguments describe. Raises CliError."""
    overrides = parse_kv(args.override, "--override")
    try:
        config = BrokerConfig.load(args.config, overrides)
    except OSError as exc:
        raise CliError(f"cannot read {args.config}: {exc.strerror}") from None
    if args.log_dirs:
        return config.with_log_dirs(parse_log_dirs(args.log_dirs))
    if (args.config is not None and _config_names_dirs(args.config)) \
            or "log.dirs" in overrides or "log.dir" in overrides:
        return config
    env = os.environ.get("KAFKAFS_LOG_DIRS")
    return config.with_log_dirs(parse_log_dirs(env) if env else (default_log_dir(),))


def _config_names_dirs(path: str) -> bool:
    from ..log.config import parse_properties

    with open(path, encoding="utf-8") as f:
        props = parse_properties(f.read())
    return bool(props.get("log.dirs") or props.get("log.dir"))


def open_manager(args, *, write: bool, job: Job | None = None,
                 lazy: bool = True) -> LogManager:
    """Start a LogManager for the command. Readers: read-only, no lock. Writers: take the
    lock or fail with a clear CliError naming who holds it and, for a kafkafs daemon, the
    command that does ``job`` through its mount (:mod:`kafkafs.cli.holder`).

    ``lazy`` (default): the partition dirs are listed, and a partition is loaded (recovered,
    for a writer after an unclean shutdown) only when the command first uses it
    (:class:`~kafkafs.log.manager.LogManager`'s lazy mode): a command on one topic opens
    that topic's dirs only, whatever else the log dirs hold."""
    config = broker_config(args)
    if not write:
        dirs = [d for d in config.log_dirs if os.path.isdir(d)]
        if not dirs:
            raise CliError(f"no log directory found at {', '.join(config.log_dirs)}")
        config = config.with_log_dirs(dirs)
    manager = LogManager(config, read_only=not write, lazy=lazy)
    try:
        manager.startup()
    except LogDirLockedError:
        job = job or Job("write", lambda mnt: f"write through {mnt}", "its own tools")
        raise CliError(refusal(config.log_dirs, job)) from None
    return manager


@contextmanager
def silenced(logger_name: str):
    """Drop what the logger ``logger_name`` (and those below it) logs while the block runs,
    for a command that says the same itself; the logger is restored afterwards (tests call
    the commands in-process)."""
    logger = logging.getLogger(logger_name)
    saved = logger.propagate, logger.handlers[:]
    logger.propagate = False
    logger.handlers = [logging.NullHandler()]
    try:
        yield
    finally:
        logger.propagate, logger.handlers = saved


def fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 1
