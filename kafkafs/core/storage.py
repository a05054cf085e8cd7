"""The storage core the daemon's frontends share (docs/design.md §6.2, §8.2).

A :class:`StorageCore` is one set of log dirs served by one process: the
:class:`~kafkafs.log.manager.LogManager` and its logs, the background tasks (flush,
retention, checkpoints, producer expiration, the cleaner, the key maps, and on a read-only
core the watcher that follows a live broker), the key maps, the commit gate and the
control requests. A frontend (the FUSE mount, :class:`kafkafs.fs.operations.KafkaFS`) is
built from a started core, runs in the same trio nursery, and tells the core nothing but
what it asks of it; it learns of changes through the listeners (``Log.on_change``,
``LogManager.on_forget``, :attr:`StorageCore.on_topic_replaced`).

Life cycle, as the daemon runs it::

    core = StorageCore(config, read_only=...)
    await core.startup()                 # load and recover the log dirs (a thread)
    fs = KafkaFS(core, options)          # frontends
    async with trio.open_nursery() as nursery:
        await core.start_tasks(nursery)  # the background tasks
        ...                              # the frontends serve
    await core.shutdown()                # shielded: flush, checkpoints, locks released
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial

import trio

from ..log.cleaner import CleanerConfig, LogCleaner
from ..log.config import BrokerConfig
from ..log.groups import GroupStore
from ..log.keymap import KeyMaps
from ..log.manager import LogManager
from ..log.txn_state import TransactionStore
from . import tasks
from .commits import CommitGate
from .control import ControlHandler
from .watcher import watch_log_dirs

log = logging.getLogger(__name__)


class StorageCore:
    """One process's storage: ``manager`` (a :class:`LogManager` over ``config.log_dirs``,
    read-only or not), ``key_maps`` (:class:`~kafkafs.log.keymap.KeyMaps`, the compacted
    topics' key -> offset maps every frontend's key lookups share), ``commits``
    (:class:`~kafkafs.core.commits.CommitGate`), ``control``
    (:class:`~kafkafs.core.control.ControlHandler`) and ``on_topic_replaced``: async
    callables ``(topic, on_topic_dir)`` awaited on the loop when a control request replaced
    a topic's data, before the request is answered (a frontend drops what it kept of the
    old one; ``on_topic_dir``: the request was made on the topic's own directory, not on
    the root). ``cleaner`` is the
    :class:`~kafkafs.log.cleaner.LogCleaner` once :meth:`start_tasks` made one
    (``log.cleaner.enable``, writable cores only)."""

    def __init__(self, config: BrokerConfig, *, read_only: bool = False,
                 manager: LogManager | None = None):
        self.config = config
        self.read_only = read_only
        self.manager = manager or LogManager(config, read_only=read_only)
        self.key_maps = KeyMaps()
        self.groups = GroupStore(self.manager)  # __consumer_offsets replayed (log.groups)
        self.transactions = TransactionStore(self.manager)  # __transaction_state (log.txn_state)
        self.commits = CommitGate()
        self.control = ControlHandler(self)
        self.on_topic_replaced: list[Callable[[str, bool], Awaitable[None]]] = []

    @property
    def cleaner(self) -> LogCleaner | None:
        return self.manager.cleaner

    async def startup(self) -> None:
        """Load and recover the log dirs (:meth:`LogManager.startup`, in a worker thread).
        Raises what it raises (LogDirLockedError, OSError, ...)."""
        await trio.to_thread.run_sync(self.manager.startup)

    async def start_tasks(self, nursery: trio.Nursery) -> None:
        """Start the background tasks in ``nursery`` (:mod:`kafkafs.core.tasks`): the key
        maps always; flush, retention, checkpoints, producer expiration and the cleaner on
        a writable core; the watcher of the log dirs (following a live broker's appends,
        rolls and retention when read-only). Returns once the watcher has started."""
        config, manager = self.config, self.manager
        nursery.start_soon(tasks.key_maps_task, self.key_maps, manager,
                           config.log_flush_offset_checkpoint_interval_ms)
        if not self.read_only:
            nursery.start_soon(tasks.flush_scheduler, manager)
            nursery.start_soon(tasks.retention_task, manager)
            nursery.start_soon(tasks.checkpoint_task, manager)
            nursery.start_soon(tasks.producer_expiration_task, manager)
            if config.log_cleaner_enable:
                cleaner = LogCleaner(CleanerConfig.from_broker(config), config.log_dirs,
                                     manager.logs)
                manager.cleaner = cleaner  # also for the control request (compact)
                if cleaner.config.num_threads > 0:  # 0: no background cleaning
                    nursery.start_soon(tasks.cleaner_task, manager, cleaner,
                                       self.key_maps.after_cleaning)
        await nursery.start(partial(watch_log_dirs, manager, follow=self.read_only))

    async def topic_replaced(self, topic: str, on_topic_dir: bool = False) -> None:
        """Tell the frontends that ``topic``'s data was replaced (its partitions and files
        are new), and wait until each has forgotten the old data. ``on_topic_dir``: see
        :attr:`on_topic_replaced`."""
        for listener in list(self.on_topic_replaced):
            await listener(topic, on_topic_dir)

    async def shutdown(self) -> bool:
        """Stop the cleaner's passes, save the key maps as far as they go, then
        :meth:`LogManager.shutdown` (flush, producer snapshots, checkpoints,
        ``.kafka_cleanshutdown``, locks released), off the loop and shielded from
        cancellation. Call it after the frontends saved their own state. Returns whether
        the shutdown was clean."""
        if self.manager.cleaner is not None:  # a pass asked for by a request stops too
            self.manager.cleaner.shutdown()
        with trio.CancelScope(shield=True):
            # the key maps as far as they go, while the logs are open (a read-only core
            # writes nothing); what they miss is read at their next use
            await trio.to_thread.run_sync(partial(self.key_maps.maintain, save=True,
                                                  catch_up=False))
            return await trio.to_thread.run_sync(self.manager.shutdown)

