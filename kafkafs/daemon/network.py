"""``kafkafs serve``: the daemon with the Kafka listener and no mount (docs/design.md §9.1).

The same storage core as a mount (:class:`~kafkafs.core.storage.StorageCore`: the log
dirs' locks, recovery, flush, retention, the cleaner), with the network frontend
(:class:`~kafkafs.net.server.NetServer`) as its one frontend: for machines and containers
without FUSE (nothing here imports pyfuse3). Start-up: the listener settings and log dirs
checked, the log dirs loaded and recovered, the listeners bound (a port in use is refused
before anything is served), the core's tasks started, READY=1 to systemd; SIGTERM, SIGINT
or SIGHUP stop serving, then flush, checkpoint and release the locks (exit status 0 after
a clean shutdown).
"""

from __future__ import annotations

import logging
import signal

import trio

from ..core.storage import StorageCore
from ..log.config import BrokerConfig
from ..net.broker import Broker
from ..net.listeners import DEFAULT_LISTENERS
from ..net.server import NetServer
from . import gc_tuning, malloc, notify
from .logdirs import check_log_dirs, listeners_of

log = logging.getLogger(__name__)


async def serve_network(config: BrokerConfig, read_only: bool = False) -> int:
    """Serve ``config.log_dirs`` over Kafka's protocol on ``listeners`` (default
    PLAINTEXT://127.0.0.1:9092) until signalled. Returns the exit status. Raises
    InvalidConfigError, OSError (a log dir, a port), LogDirLockedError before serving."""
    listeners = listeners_of(config, DEFAULT_LISTENERS)
    check_log_dirs(config, read_only)
    core = StorageCore(config, read_only=read_only)
    net = NetServer(Broker(core))
    clean = False
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        await core.startup()
        try:
            await net.bind(listeners)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_on_signal, signals, nursery.cancel_scope)
                await core.start_tasks(nursery)
                bound = await nursery.start(net.serve)
                notify.ready("Serving " + ", ".join(map(str, bound)))
                gc_tuning.settle()
        finally:
            notify.stopping()
            if core.cleaner is not None:
                core.cleaner.shutdown()
            with trio.CancelScope(shield=True):
                clean = await core.shutdown()
            if clean:
                log.info("Stopped serving %s; logs flushed and checkpointed",
                         ",".join(config.log_dirs))
            else:
                log.error("Stopped serving, but the shutdown was not clean (see above)")
    return 0 if clean else 1


async def _on_signal(signals, cancel_scope: trio.CancelScope) -> None:
    async for signum in signals:
        log.info("Received %s, shutting down", signal.Signals(signum).name)
        cancel_scope.cancel()
        return


def run(config: BrokerConfig, read_only: bool = False) -> int:
    """Blocking entry point used by ``kafkafs serve``."""
    malloc.tune()
    return trio.run(serve_network, config, read_only)
