"""``kafkafs serve``: the daemon speaking Kafka's protocol on the log dirs, without a mount."""

from __future__ import annotations

from ..log.errors import LogDirLockedError
from .common import CliError, add_log_dir_args, broker_config
from .mount import DEFAULT_LOCK_TIMEOUT, daemon_logging, wait_for_log_dirs


def register(sub) -> None:
    s = sub.add_parser("serve", help="serve the log dirs to Kafka clients (Kafka's wire "
                                     "protocol; no mount; stays in the foreground)")
    add_log_dir_args(s)
    s.add_argument("--read-only", action="store_true",
                   help="never write to the log dirs (and take no lock): Produce and every "
                        "other write is refused")
    s.add_argument("--debug", action="store_true", help="log every request")
    s.add_argument("--lock-timeout", type=float, default=DEFAULT_LOCK_TIMEOUT, metavar="S",
                   help="seconds to wait for a log dir another process holds (default "
                        f"{DEFAULT_LOCK_TIMEOUT:g})")
    s.set_defaults(func=run_serve)


def run_serve(args) -> int:
    from ..daemon import network

    daemon_logging(args.debug)
    config = broker_config(args)
    if not args.read_only:
        wait_for_log_dirs(config.log_dirs, args.lock_timeout)
    try:
        return network.run(config, args.read_only)
    except LogDirLockedError as exc:
        raise CliError(str(exc)) from None
    except (OSError, ValueError) as exc:
        raise CliError(str(exc)) from None
