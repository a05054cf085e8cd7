"""Every partition in a set of ``log.dirs`` (Kafka ``LogManager``).

A :class:`LogManager` locks each log dir (``.lock``, a POSIX lock as Java's ``FileLock``
takes, so a broker and kafkafs exclude each other), reads ``meta.properties`` and the
checkpoint files, loads every partition dir (recovering after an unclean shutdown, told by a
missing ``.kafka_cleanshutdown``, which is deleted before the first load as Kafka does since
KAFKA-10471), creates and deletes topics, keeps topic config overrides in a regular file
per log dir, writes checkpoints, and on shutdown flushes and writes the clean-shutdown
marker.

Loading: the partitions of each log dir are loaded on ``num.recovery.threads.per.data.dir``
threads (Kafka's ``LogManager.loadLogs`` runs a pool of that size per log dir). The loads
are mostly Python work under the GIL: more threads help only where they wait on the disk
(2,000 crashed partitions on a 2-core VM: 6.1 s with one thread and a warm page cache, 6.2
s with two; from a cold cache 9.3 s with one, 8.2 s with eight). A lazy manager (the
command-line tools) lists the partition dirs and loads each on first use (see
:class:`LogManager`).

Read-only managers (``read_only=True``) take no lock and write nothing. A log dir on a
read-only filesystem is refused by a writable manager at once
(:class:`ReadOnlyFilesystemError`), before anything is written.

Descriptors: :meth:`LogManager.startup` applies the budget ``kafkafs.max.open.files``
(:func:`kafkafs.log.handles.apply_budget`: the soft ``RLIMIT_NOFILE`` raised to the hard
limit, a warning when the budget does not fit); every partition dir, segment and index is
opened on demand within it, whatever the number of partitions and segments.

Topics: a topic gets at most ``kafkafs.max.partitions.per.topic`` partitions (a larger
count is refused at once with InvalidConfigError, nothing created), and a request that
fails part-way (EMFILE, ENOSPC, anything) removes every partition dir it made: all or
nothing. New partitions are made without an fsync each: one fsync of each log dir root ends
the request, and their ``partition.metadata`` files are fsynced with the next
recovery-point checkpoint (Kafka flushes that file asynchronously too).

A log dir is untrusted input (:mod:`kafkafs.log.safeio`): a partition dir is loaded only when
it is a directory itself (a link is skipped with a warning) and is then used through its
open descriptor; every file is read and written as a regular file only, never through a
link (a planted checkpoint reads as missing and is replaced when written); a ``.lock`` that
is not a regular file refuses the start. The log dir roots themselves are the
administrator's and trusted.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import stat
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from . import bulk_commit, handles, safeio
from . import checkpoint as ckpt
from .config import BrokerConfig, LogConfig, validate_topic_overrides
from .errors import (
    CorruptCheckpointError,
    CorruptRecordError,
    InvalidConfigError,
    LogDirLockedError,
    LogError,
    ReadOnlyLogError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
    UnsafeLogDirError,
)
from .loader import create_log, load_log
from .log import Log
from .names import (
    TOPIC_CONFIG_FILE,
    parse_partition_dir,
    partition_dir_name,
    validate_topic,
)

log = logging.getLogger(__name__)

LOCK_FILE = ".lock"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
META_PROPERTIES = "meta.properties"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
PARTITION_METADATA = "partition.metadata"

TopicPartition = tuple  # (topic: str, partition: int)
MAX_PARTITIONS_KEY = "kafkafs.max.partitions.per.topic"


class ReadOnlyFilesystemError(ReadOnlyLogError):
    """A log dir to be opened writable is on a read-only filesystem (EROFS)."""

    def __init__(self, log_dir: str):
        super().__init__(
            f"the log dir {log_dir} is on a read-only filesystem: open it read-only with "
            "`kafkafs mount --read-only` (or -o ro); the readers (consume, get-offsets, "
            "topics --list/--describe, dump) work on it as it is")
        self.log_dir = log_dir


@dataclass
class _Unloaded:
    """A partition dir listed at startup and not loaded yet: its ``path``, the ``log_dir``
    holding it, and what the log dir said of it then (the checkpointed ``recovery_point``
    and ``log_start_offset``, 0 when none; ``clean``: the clean-shutdown marker was there)."""

    path: str
    log_dir: str
    recovery_point: int
    log_start_offset: int
    clean: bool
    #: (read-only) where an unfinished bulk commit leaves the partition visible, or None
    limit: int | None = None

    @property
    def dir(self) -> str:
        return self.path


class LogManager:
    """All logs of one kafkafs instance (Kafka ``LogManager``).

    ``config``: the broker configuration (``log_dirs`` are created when missing unless
    ``read_only``). Call :meth:`startup` before use and :meth:`shutdown` after.
    Raises LogDirLockedError from startup when another process holds a log dir.
    ``cleaner``: the :class:`~kafkafs.log.cleaner.LogCleaner` working on these logs, if
    any (set by its owner); topic deletion stops its pass over a partition first.

    ``lazy`` (the command-line tools): :meth:`startup` does everything a startup does to
    the log dirs -- the lock, ``meta.properties``, the checkpoints and the clean-shutdown
    marker read (and the marker deleted) -- and lists the partition dirs, but loads a
    partition only when it is first used (:meth:`get_log`); :attr:`logs` holds the loaded
    ones, :meth:`topics` and :meth:`partitions` name them all. Checkpoints keep the
    entries of the partitions not loaded as they were read, and :meth:`shutdown` writes
    the clean-shutdown marker of a log dir whose startup found none only when every
    partition in it was loaded (recovered): the next full load recovers the others.
    """

    def __init__(self, config: BrokerConfig, *, read_only: bool = False, lazy: bool = False):
        self.config = config
        self.read_only = read_only
        self.lazy = lazy
        self.log_dirs = list(config.log_dirs)
        #: the loaded logs (a lazy manager's grows as partitions are first used)
        self.logs: dict[TopicPartition, Log] = {}
        #: (lazy) the partition dirs listed at startup and not loaded yet
        self._unloaded: dict[TopicPartition, _Unloaded] = {}
        self._lock_fds: list[int] = []
        self._overrides: dict[str, dict[str, str]] = {}
        self.lock = threading.RLock()
        # serialises topic creation, partition addition, deletion and adoption, whose slow
        # file work (mkdir, create_log, root fsyncs, removing dirs) runs under it, outside
        # self.lock (docs/design.md §6.4); taken before self.lock, never while holding it
        self._topic_lock = threading.Lock()
        # (under self.lock) topics whose dirs are being made or removed outside self.lock:
        # scan_for_new_partitions leaves their dirs alone
        self._busy: set[str] = set()
        self._scan_lock = threading.Lock()  # one scan_for_new_partitions at a time
        self.started = False
        # called with (topic, partition) after forget_partition, in the caller's thread
        self.on_forget: list = []
        self.cleaner = None  # a LogCleaner, set by whoever runs one over these logs
        # logs made by create_topic/add_partitions whose partition.metadata is not fsynced
        # yet (the next checkpoint_recovery_points does it)
        self._unsynced_metadata: list[Log] = []
        #: (read-only) (topic, partition) -> the offset an unfinished bulk commit began at
        self._limits: dict[TopicPartition, int] = {}
        #: (read-only) the topics an unfinished bulk commit adopts: not shown
        self._hidden: set[str] = set()

    def _read_commit_view(self) -> set[str]:
        """(read-only) Add the limits and hidden topics of the unfinished bulk commits of
        every log dir (:func:`kafkafs.log.bulk_commit.read_view`); returns the topics
        hidden now."""
        now: set[str] = set()
        for d in self.log_dirs:
            limits, hidden = bulk_commit.read_view(d)
            for tp, before in limits.items():
                self._limits[tp] = min(before, self._limits.get(tp, before))
            now |= hidden
        self._hidden |= now
        return now

    # -- startup / shutdown ----------------------------------------------------------
    def startup(self) -> None:
        """Apply the descriptor budget (``kafkafs.max.open.files``), lock and load every log
        dir (a lazy manager lists them); producer ids already expired are dropped (Kafka
        skips them when it loads a snapshot). The partitions of each log dir are loaded on
        ``num.recovery.threads.per.data.dir`` threads (Kafka's ``LogManager.loadLogs``).
        A writable manager finishes the bulk commits a killed writer left unfinished (rolled
        forward): the topics they create or replace before it lists the partition dirs
        (:func:`kafkafs.log.bulk_commit.finish_adoptions`; their overrides saved in every log
        dir), their appends once the logs are loaded
        (:func:`kafkafs.log.bulk_commit.finish_interrupted`). A read-only one shows each
        partition such a commit appends to only up to where it was before it, and not the
        topics it creates or replaces.
        Raises LogDirLockedError, ReadOnlyFilesystemError (a writable manager on a read-only
        filesystem: nothing is written), OSError (NotADirectoryError when a log dir is some
        other file), what loading a partition raises (the first, in listing order), and
        CommitRecoveryError (an unfinished commit that cannot be rolled forward)."""
        handles.apply_budget(self.config.kafkafs_max_open_files)
        try:
            for d in self.log_dirs:
                if os.path.exists(d) and not os.path.isdir(d):
                    raise NotADirectoryError(errno.ENOTDIR, "log dir is not a directory", d)
                if not self.read_only:
                    self._prepare_writable(d)
                elif not os.path.isdir(d):
                    raise FileNotFoundError(errno.ENOENT, "log dir does not exist", d)
            # a bulk commit not finished yet: a writable startup first finishes the topics
            # it adopts (renames only), before listing the partition dirs
            adopted = {}
            if not self.read_only:
                for d in self.log_dirs:
                    adopted.update(bulk_commit.finish_adoptions(d))
            self._load_topic_overrides()
            if adopted:
                for topic, overrides in adopted.items():
                    if overrides:
                        self._overrides[topic] = dict(overrides)
                    else:
                        self._overrides.pop(topic, None)
                self._save_topic_overrides()
            # (its record is in the log dir its writer staged in; its partitions may lie in
            # any): readers see the partitions it appends to as they were before it, and
            # not the topics it adopts (a writable startup finishes it after loading)
            self._limits = {}
            self._hidden = set()
            if self.read_only:
                self._read_commit_view()
            for d in self.log_dirs:
                self._load_dir(d)
            if not self.read_only:
                for d in self.log_dirs:
                    bulk_commit.finish_interrupted(d, self.get_log)
        except BaseException:
            self._release_locks()
            raise
        self.remove_expired_producers()
        self.started = True

    def _prepare_writable(self, d: str) -> None:
        """Create (when missing), lock and give ``meta.properties`` to the log dir ``d``.
        Raises ReadOnlyFilesystemError -- before writing anything -- when it is on a
        read-only filesystem."""
        try:
            if os.path.isdir(d) and os.statvfs(d).f_flag & os.ST_RDONLY:
                raise ReadOnlyFilesystemError(d)
            os.makedirs(d, exist_ok=True)
            self._lock_dir(d)
            self._ensure_meta(d)
        except OSError as exc:
            if exc.errno == errno.EROFS:
                raise ReadOnlyFilesystemError(d) from None
            raise

    def _lock_dir(self, d: str) -> None:
        fd = open_lock_file(d, create=True)
        try:
            # flock excludes other kafkafs managers (in this process too); the POSIX lock is
            # the one Java's FileLock takes, so a broker and kafkafs exclude each other
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise LogDirLockedError(
                f"Failed to acquire lock on file .lock in {d}. A Kafka instance in another "
                "process or thread is using this directory (a running kafkafs daemon or broker)."
            ) from None
        self._lock_fds.append(fd)

    def _release_locks(self) -> None:
        for fd in self._lock_fds:
            try:
                os.close(fd)  # closing releases the POSIX lock
            except OSError:
                pass
        self._lock_fds = []

    def _ensure_meta(self, d: str) -> None:
        path = os.path.join(d, META_PROPERTIES)
        with safeio.Dir.open(d, follow=True) as root:
            if root.is_file(META_PROPERTIES):
                return  # (a planted link or special file is replaced below)
        cluster = self._cluster_id()
        props = {"version": "1", "cluster.id": cluster,
                 "node.id": str(max(self.config.node_id, 0)),
                 "directory.id": ckpt.new_topic_id()}
        ckpt.write_properties(path, props)

    def _cluster_id(self) -> str:
        for d in self.log_dirs:
            try:
                props = ckpt.read_properties(os.path.join(d, META_PROPERTIES))
            except (OSError, CorruptCheckpointError):
                continue
            if props.get("cluster.id"):
                return props["cluster.id"]
        return ckpt.new_topic_id()

    def _load_dir(self, d: str) -> None:
        """List the partition dirs of the log dir ``d`` with what the checkpoints say of
        them, and load them (unless lazy). The clean-shutdown marker is deleted first, as
        Kafka does (KAFKA-10471): a crash while loading means recovery at the next start."""
        with safeio.Dir.open(d, follow=True) as root:
            clean = root.is_file(CLEAN_SHUTDOWN_FILE)
            if clean and not self.read_only:
                root.unlink(CLEAN_SHUTDOWN_FILE)
        recovery = _read_ckpt(os.path.join(d, RECOVERY_POINT_CHECKPOINT))
        starts = _read_ckpt(os.path.join(d, LOG_START_OFFSET_CHECKPOINT))
        parts = partition_dirs(d)
        if self.read_only:
            self._read_commit_view()  # (again: a commit that began while listing)
            parts = [(tp, path) for tp, path in parts if tp[0] not in self._hidden]
        if not clean and not self.read_only and parts and not self.lazy:
            log.info("No clean shutdown marker in %s: recovering unflushed segments", d)
        listed = []
        for tp, path in parts:
            known = self.logs.get(tp) or self._unloaded.get(tp)
            if known is not None:
                log.error("Duplicate log directories for %s-%d: %s and %s; ignoring the second",
                          tp[0], tp[1], known.dir, path)
                continue
            entry = _Unloaded(path, d, recovery.get(tp, 0), starts.get(tp, 0), clean,
                              self._limits.get(tp))
            self._unloaded[tp] = entry
            listed.append(tp)
        if not self.lazy:
            self._load_partitions(d, listed)

    def _load_partitions(self, d: str, tps: list[TopicPartition]) -> dict[TopicPartition, str]:
        """Load the listed partitions ``tps`` of the log dir ``d`` on
        ``num.recovery.threads.per.data.dir`` threads (one: in this thread), as Kafka's
        ``loadLogs`` does for each log dir; the logs join :attr:`logs` in listing order.
        A partition whose dir is gone (or no longer a directory) is skipped, and so is, by a
        read-only manager, one it cannot load (a reader shows what it can); both are
        logged and forgotten. Returns ``{tp: why}`` of those skipped. A writable manager
        raises the first failure (in listing order) once every load started has ended; the
        partitions that failed stay listed, not loaded."""
        started = time.monotonic()
        threads = max(1, min(self.config.num_recovery_threads_per_data_dir, len(tps)))
        if threads == 1:
            outcomes = [self._try_load(tp) for tp in tps]
        else:
            with ThreadPoolExecutor(threads, thread_name_prefix="log-recovery") as pool:
                outcomes = list(pool.map(self._try_load, tps))
        failure = None
        skipped = {}
        for tp, (lg, why) in zip(tps, outcomes):
            if isinstance(why, BaseException):
                failure = failure or why
                continue
            self._unloaded.pop(tp, None)
            if lg is not None:
                self.logs[tp] = lg
            else:
                skipped[tp] = why
        if failure is not None:
            raise failure
        if len(tps) > 1:
            log.info("Loaded %d partition(s) of %s in %.1f s (%d thread(s))",
                     len(tps) - len(skipped), d, time.monotonic() - started, threads)
        return skipped

    def _try_load(self, tp: TopicPartition) -> tuple[Log | None, BaseException | str | None]:
        """(a loader thread) ``(log, None)``; ``(None, why)`` for a partition skipped (see
        :meth:`_load_partitions`); ``(None, error)`` for a writable manager's failure."""
        u = self._unloaded[tp]
        try:
            pdir = open_partition_dir(u.path)
        except FileNotFoundError:
            why = f"its directory {u.path} disappeared"
            log.warning("Skipping partition %s-%d: %s", tp[0], tp[1], why)
            return None, why
        except BaseException as exc:  # noqa: BLE001 - raised by the caller, in order
            return None, exc
        if pdir is None:  # warned by open_partition_dir
            return None, f"{u.path} is no longer a directory"
        try:
            lg = load_log(pdir, tp[0], tp[1], self.topic_config(tp[0]),
                          recovery_point=u.recovery_point, log_start_offset=u.log_start_offset,
                          had_clean_shutdown=u.clean, writable=not self.read_only,
                          limit=u.limit)
            if u.limit is not None:  # (a follower sees the rest once the commit finished)
                lg.limit_source = lambda: _limit_of(self.log_dirs, tp)
        except (OSError, LogError, CorruptRecordError) as exc:
            pdir.close()
            if not self.read_only:
                return None, exc
            # a reader shows what it can: one partition it cannot open (no segment yet, a
            # segment it may not read) does not take the others with it; the watcher adopts
            # it once it holds a segment
            log.warning("Skipping partition %s-%d in %s: %s", tp[0], tp[1], u.path, exc)
            return None, str(exc)
        except BaseException as exc:  # noqa: BLE001 - raised by the caller, in order
            pdir.close()
            return None, exc
        if self.lazy and not self.read_only:  # (a startup does it for all, after loading)
            lg.remove_expired_producers(int(time.time() * 1000),
                                        self.config.producer_id_expiration_ms)
        return lg, None

    def _load_on_first_use(self, tp: TopicPartition) -> Log:
        """(lazy; under the lock) Load the listed partition ``tp`` now. Raises
        UnknownTopicOrPartitionError when its dir is gone (or no longer a directory), or
        when a read-only manager cannot load it; for a writable one what loading raises
        (OSError, LogError, CorruptRecordError): the partition stays listed, not loaded."""
        skipped = self._load_partitions(self._unloaded[tp].log_dir, [tp])
        if tp in self.logs:
            return self.logs[tp]
        raise UnknownTopicOrPartitionError(
            f"Partition {tp[0]}-{tp[1]} cannot be used: {skipped.get(tp, 'not loaded')}")

    def load_topic(self, topic: str) -> list[int]:
        """Load every partition of ``topic`` not loaded yet (a lazy manager), each log dir's
        on its threads; returns the partitions then loaded, which leaves out those skipped
        (see :meth:`_load_partitions`). Raises as :meth:`startup` does."""
        self._load_where(lambda tp, _u: tp[0] == topic)
        return self.partitions(topic)

    def load_all(self) -> None:
        """Load every partition not loaded yet (a lazy manager), each log dir's on its
        threads. Raises as :meth:`startup` does."""
        self._load_where(lambda _tp, _u: True)

    def _load_where(self, wanted) -> None:
        with self.lock:
            for d in self.log_dirs:
                self._load_partitions(d, [tp for tp, u in self._unloaded.items()
                                          if u.log_dir == d and wanted(tp, u)])

    def _open_log(self, tp, pdir: safeio.Dir, recovery_point, log_start, clean) -> Log:
        lg = self._load_log(tp, pdir, recovery_point, log_start, clean)
        self.logs[tp] = lg
        return lg

    def _load_log(self, tp, pdir: safeio.Dir, recovery_point, log_start, clean) -> Log:
        """:func:`~kafkafs.log.loader.load_log` of ``tp`` from ``pdir``, not yet listed in
        :attr:`logs`."""
        topic, partition = tp
        return load_log(pdir, topic, partition, self.topic_config(topic),
                        recovery_point=recovery_point, log_start_offset=log_start,
                        had_clean_shutdown=clean, writable=not self.read_only)

    def flush_all(self) -> None:
        for lg in list(self.logs.values()):
            lg.flush()

    def snapshot_producer_states(self) -> None:
        """Write every writable log's producer snapshot at its log end offset, fsynced (what
        Kafka's ``UnifiedLog.close`` does at shutdown, before the clean-shutdown marker: a
        later clean load then starts from it). Raises OSError."""
        for lg in list(self.logs.values()):
            lg.take_producer_snapshot()

    def shutdown(self) -> bool:
        """Flush every log, write each log's producer snapshot at its log end offset, the
        checkpoints and ``.kafka_cleanshutdown`` (not in a log dir whose startup found none
        while partitions of it are still not loaded), close every file and release the locks
        (``LogManager.shutdown``). Returns whether the shutdown was clean. When a flush,
        snapshot or checkpoint fails (a full disk), the marker is not written — the next
        start recovers and replays the producer state from an older snapshot — and every
        file is still closed and every lock released.
        """
        clean = True
        with self.lock:
            writable = not self.read_only and self.started
            if writable:
                for step in (self.flush_all, self.snapshot_producer_states,
                             self.checkpoint_recovery_points,
                             self.checkpoint_log_start_offsets):
                    try:
                        step()
                    except OSError as exc:
                        clean = False
                        log.error("Shutdown: %s failed: %s; the next start will recover",
                                  step.__name__, exc)
                        break
            for lg in list(self.logs.values()):
                try:
                    lg.close()
                except OSError as exc:  # every other log still closes, every lock goes
                    clean = False
                    log.error("Shutdown: closing %s failed: %s", lg.name, exc)
            if writable and clean:
                marker = json.dumps({"version": 0, "brokerEpoch": -1},
                                    separators=(",", ":")).encode()
                for d in self.log_dirs:
                    unrecovered = sum(1 for u in self._unloaded.values()
                                      if u.log_dir == d and not u.clean)
                    if unrecovered:
                        # never loaded since an unclean shutdown: the next start recovers them
                        log.info("Not writing %s in %s: %d partition(s) there were not loaded "
                                 "since an unclean shutdown; the next start recovers them",
                                 CLEAN_SHUTDOWN_FILE, d, unrecovered)
                        continue
                    try:
                        ckpt.atomic_write(os.path.join(d, CLEAN_SHUTDOWN_FILE), marker)
                    except OSError as exc:
                        clean = False
                        log.error("Shutdown: cannot write %s in %s: %s", CLEAN_SHUTDOWN_FILE,
                                  d, exc)
            self._release_locks()
            self.started = False
        return clean

    # -- checkpoints -----------------------------------------------------------------
    def _by_dir(self) -> dict[str, dict]:
        """Log dir -> {tp: Log or _Unloaded} of every partition, loaded or not."""
        out: dict[str, dict] = {d: {} for d in self.log_dirs}
        for tp, u in list(self._unloaded.items()):
            out.setdefault(u.log_dir, {})[tp] = u
        for tp, lg in list(self.logs.items()):
            out.setdefault(os.path.dirname(lg.dir), {})[tp] = lg
        return out

    def checkpoint_recovery_points(self) -> None:
        """Write ``recovery-point-offset-checkpoint`` in every log dir (a partition not
        loaded keeps the entry it had)."""
        if self.read_only:
            return
        self.sync_new_partitions()
        for d, logs in self._by_dir().items():
            ckpt.write_offset_checkpoint(os.path.join(d, RECOVERY_POINT_CHECKPOINT),
                                         {tp: lg.recovery_point for tp, lg in logs.items()})

    def sync_new_partitions(self) -> None:
        """fsync the ``partition.metadata`` (and directory) of every partition created since
        the last call (Kafka's asynchronous ``maybeFlushMetadataFile``). Raises OSError;
        the partitions not done are kept for the next call."""
        with self.lock:
            pending, self._unsynced_metadata = self._unsynced_metadata, []
        try:
            while pending:
                lg = pending[-1]
                if not lg.closed:
                    lg.pdir.fsync_file(PARTITION_METADATA)
                    lg.pdir.fsync()
                pending.pop()
        finally:
            if pending:
                with self.lock:
                    self._unsynced_metadata.extend(pending)

    def checkpoint_log_start_offsets(self) -> None:
        """Write ``log-start-offset-checkpoint`` in every log dir (entries above 0 only, as
        Kafka does; a partition not loaded keeps the entry it had)."""
        if self.read_only:
            return
        for d, logs in self._by_dir().items():
            ckpt.write_offset_checkpoint(
                os.path.join(d, LOG_START_OFFSET_CHECKPOINT),
                {tp: lg.log_start_offset for tp, lg in logs.items() if lg.log_start_offset > 0})

    # -- topics ----------------------------------------------------------------------
    def topics(self) -> list[str]:
        """Every topic, loaded or not."""
        with self.lock:
            return sorted({t for t, _p in self.logs} | {t for t, _p in self._unloaded})

    def partitions(self, topic: str) -> list[int]:
        """Every partition of ``topic``, loaded or not."""
        with self.lock:
            return sorted([p for t, p in self.logs if t == topic]
                          + [p for t, p in self._unloaded if t == topic])

    def get_log(self, topic: str, partition: int) -> Log:
        """The log of ``topic``-``partition``, loaded now when it was not (a lazy manager).
        Raises UnknownTopicOrPartitionError (also when the partition's dir disappeared since
        the startup listed it); what loading raises (OSError, LogError, CorruptRecordError:
        the partition stays unloaded, nothing else changes)."""
        tp = (topic, partition)
        lg = self.logs.get(tp)
        if lg is not None:
            return lg
        with self.lock:
            lg = self.logs.get(tp)
            if lg is not None:
                return lg
            if tp in self._unloaded:
                return self._load_on_first_use(tp)
        raise UnknownTopicOrPartitionError(
            f"This server does not host this topic-partition: {topic}-{partition}")

    def loaded(self) -> int:
        """How many partitions are loaded (all of them, unless lazy)."""
        return len(self.logs)

    def _check_writable(self) -> None:
        if self.read_only:
            raise ReadOnlyLogError("the log dirs are open read-only")

    def _assign_dirs(self, n: int) -> list[str]:
        """The log dir of each of ``n`` new partitions: each goes to the dir with the fewest
        partitions then (the first such dir on a tie), as Kafka's ``nextLogDirs``."""
        counts = {d: len(logs) for d, logs in self._by_dir().items()}
        order = {d: i for i, d in enumerate(self.log_dirs)}
        out = []
        for _ in range(n):
            d = min(self.log_dirs, key=lambda d: (counts[d], order[d]))
            counts[d] += 1
            out.append(d)
        return out

    def _check_collision(self, topic: str) -> None:
        """Refuse ``topic`` when another topic has the same name with ``.`` and ``_``
        swapped (Kafka's ``Topic.hasCollision``: their metric names would clash);
        InvalidConfigError naming it."""
        collides = [t for t in self.topics()
                    if t != topic and t.replace(".", "_") == topic.replace(".", "_")]
        if collides:
            raise InvalidConfigError(
                f"Topic '{topic}' collides with existing topic: {collides[0]}")

    def _check_partition_count(self, count: int) -> None:
        """Refuse ``count`` partitions for one topic above ``kafkafs.max.partitions.per.topic``
        (InvalidConfigError naming the bound and the key)."""
        bound = self.config.kafkafs_max_partitions_per_topic
        if count > bound:
            raise InvalidConfigError(
                f"A topic may have at most {bound} partitions ({MAX_PARTITIONS_KEY}={bound}), "
                f"not {count}; nothing was created. Raise {MAX_PARTITIONS_KEY} in "
                "server.properties to allow more.")

    def create_topic(self, topic: str, partitions: int | None = None,
                     overrides: Mapping[str, str] | None = None) -> list[Log]:
        """Create ``topic`` with ``partitions`` (default ``num.partitions``, at most
        ``kafkafs.max.partitions.per.topic``) and config ``overrides``: all of them or, when
        one fails, none (see :meth:`_create_partitions`). Raises InvalidTopicError,
        TopicExistsError, InvalidConfigError, OSError."""
        self._check_writable()
        validate_topic(topic)
        n = self.config.num_partitions if partitions is None else partitions
        if n < 1:
            raise InvalidConfigError(f"Number of partitions must be larger than 0, got {n}")
        self._check_partition_count(n)
        overrides = validate_topic_overrides(overrides or {})
        with self._topic_lock:
            with self.lock:
                if self.partitions(topic):
                    raise TopicExistsError(f"Topic '{topic}' already exists.")
                self._check_collision(topic)
                if overrides:  # (in memory first: the new logs take their config from it)
                    self._overrides[topic] = dict(overrides)
                dirs = self._assign_dirs(n)
                self._busy.add(topic)
            try:
                logs = self._create_partitions(topic, range(n), dirs, ckpt.new_topic_id())
                with self.lock:
                    if overrides:
                        try:
                            self._save_topic_overrides()
                        except BaseException as exc:
                            self._remove_created([((topic, lg.partition), lg.dir, lg)
                                                  for lg in logs], exc)
                            raise
                    self._publish(logs)
                return logs
            except BaseException:
                with self.lock:
                    self._overrides.pop(topic, None)
                raise
            finally:
                with self.lock:
                    self._busy.discard(topic)

    def _publish(self, logs: list[Log]) -> None:
        """(under the lock) List the new ``logs`` in :attr:`logs`: from here on they are
        seen and used."""
        for lg in logs:
            self.logs[(lg.topic, lg.partition)] = lg
        self._unsynced_metadata.extend(logs)

    def topic_id(self, topic: str) -> str | None:
        """The topic's id (Kafka's ``Uuid`` text, from a ``partition.metadata``), None when
        it has none here or it cannot be read."""
        return self._topic_id(topic)

    def topic_names_by_id(self) -> dict[str, str]:
        """``{topic id: topic name}`` of every topic here with an id."""
        out = {}
        for topic in self.topics():
            tid = self._topic_id(topic)
            if tid is not None:
                out[tid] = topic
        return out

    def _topic_id(self, topic: str) -> str | None:
        for (t, _p), lg in self.logs.items():
            if t == topic:
                try:
                    return ckpt.read_partition_metadata(lg.pdir.join(PARTITION_METADATA),
                                                        dir=lg.pdir)
                except (OSError, CorruptCheckpointError):
                    return None
        for (t, _p), u in self._unloaded.items():
            if t == topic:  # read through the dir, not loaded for it
                try:
                    with safeio.Dir.open(u.path) as pdir:
                        return ckpt.read_partition_metadata(pdir.join(PARTITION_METADATA),
                                                            dir=pdir)
                except (OSError, CorruptCheckpointError):
                    return None
        return None

    def _create_partitions(self, topic: str, partitions: range, dirs: list[str],
                           topic_id: str) -> list[Log]:
        """(under the topic lock, not :attr:`lock`) Make the partition dirs ``partitions``
        of ``topic`` (topic id ``topic_id``), each in its log dir of ``dirs``, and their
        empty logs (:func:`~kafkafs.log.loader.create_log`), without an fsync each; one
        fsync of each log dir root ends it (``partition.metadata`` is fsynced by the next
        :meth:`checkpoint_recovery_points`). The logs are returned, not yet listed: the
        caller publishes them (:meth:`_publish`) once all are durable, so nobody sees a
        partition half made. All or nothing: when one fails (EMFILE, ENOSPC, a name taken,
        anything), every dir made here is renamed ``-delete`` and removed, its log closed,
        and the error propagates."""
        config = self.topic_config(topic)
        metadata = ckpt.partition_metadata_bytes(topic_id)
        made: list[tuple[TopicPartition, str, Log | None]] = []
        try:
            for p, root in zip(partitions, dirs):
                path = os.path.join(root, partition_dir_name(topic, p))
                os.mkdir(path)  # FileExistsError for anything already there, a planted link too
                made.append(((topic, p), path, None))
                pdir = safeio.Dir.open(path, cached=True)
                pdir.write_new(PARTITION_METADATA, metadata)
                made[-1] = ((topic, p), path, create_log(pdir, topic, p, config))
            for root in {os.path.dirname(path) for _tp, path, _lg in made}:
                with safeio.Dir.open(root, follow=True) as rdir:
                    rdir.fsync()
        except BaseException as exc:
            self._remove_created(made, exc)
            raise
        return [lg for _tp, _path, lg in made]

    def _remove_created(self, made: list[tuple[TopicPartition, str, Log | None]],
                        exc: BaseException) -> None:
        """Undo :meth:`_create_partitions` after ``exc``: close each new log (never
        listed), rename its dir ``<dir>.<uuid>-delete`` (ignored by every loader, even when
        its removal cannot finish now) and remove it."""
        if not made:
            return
        log.error("Creating partitions of topic %s failed after %d of them (the last %s): "
                  "%s; removing them", made[0][0][0], len(made), made[-1][1], exc)
        for _tp, path, lg in reversed(made):
            if lg is not None:
                try:
                    lg.close(take_snapshot=False)
                except Exception as close_exc:  # noqa: BLE001 - its dir goes anyway
                    log.debug("closing %s: %s", path, close_exc)
        roots = set()
        for _tp, path, _lg in reversed(made):
            doomed = f"{path}.{uuid.uuid4().hex}-delete"
            try:
                os.rename(path, doomed)
            except FileNotFoundError:
                continue
            except OSError as rename_exc:
                log.error("Cannot remove %s of the failed request: %s", path, rename_exc)
                continue
            roots.add(os.path.dirname(path))
            safeio.remove_tree(doomed)
        for root in roots:
            try:
                with safeio.Dir.open(root, follow=True) as rdir:
                    rdir.fsync()
            except OSError:
                pass

    def add_partitions(self, topic: str, total: int) -> list[Log]:
        """Grow ``topic`` to ``total`` partitions (Kafka ``createPartitions``; at most
        ``kafkafs.max.partitions.per.topic``): all of them or, when one fails, none (see
        :meth:`_create_partitions`). Raises UnknownTopicOrPartitionError, InvalidConfigError
        when not an increase or above the bound, OSError."""
        self._check_writable()
        with self._topic_lock:
            with self.lock:
                current = self.partitions(topic)
                if not current:
                    raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist.")
                if total <= len(current):
                    raise InvalidConfigError(
                        f"Topic currently has {len(current)} partitions, which is higher "
                        f"than or equal to the requested {total}.")
                self._check_partition_count(total)
                topic_id = self._topic_id(topic) or ckpt.new_topic_id()
                first = max(current) + 1
                new = range(first, first + total - len(current))
                dirs = self._assign_dirs(len(new))
                self._busy.add(topic)
            try:
                logs = self._create_partitions(topic, new, dirs, topic_id)
                with self.lock:
                    self._publish(logs)
                return logs
            finally:
                with self.lock:
                    self._busy.discard(topic)

    def adopt_topic(self, log_dir: str, topic: str, staged: Mapping[int, str],
                    overrides: Mapping[str, str] | None = None, *, replace: bool = False,
                    trusted: bool = False) -> list[Log]:
        """Create ``topic`` from whole partition dirs prepared out of sight in ``log_dir``
        (one of this manager's log dirs): a bulk load, taken in as a restored backup is.
        ``staged`` maps every partition 0..N-1 to the name of its staged dir in that root
        (:mod:`kafkafs.log.staging`); each gets the ``partition.metadata`` of a new topic
        id, is renamed ``<topic>-<p>`` (never over an existing entry) and loaded: recovered
        as after an unclean shutdown, unless ``trusted`` (the caller wrote the files with a
        :class:`Log` and fsynced them). ``overrides``: the topic's config overrides.
        ``replace``: an existing topic of that name is replaced (its partition dirs renamed
        ``<topic>-<p>.<uuid>-delete`` first and removed once the new ones are in: a Spark
        overwrite). Returns the new logs.

        Raises InvalidTopicError, TopicExistsError, InvalidConfigError (bad overrides,
        partitions that are not 0..N-1, a name that is not a staged dir of the partition, a
        log dir that is not ours), FileNotFoundError (a staged dir missing), OSError. A
        failure while publishing puts back what was done: the published dirs get their
        staged names again and a replaced topic its dirs."""
        from .staging import parse_stage_dir, rename_noreplace

        self._check_writable()
        validate_topic(topic)
        overrides = validate_topic_overrides(overrides or {})
        root = os.path.abspath(log_dir)
        if root not in {os.path.abspath(d) for d in self.log_dirs}:
            raise InvalidConfigError(f"{log_dir} is not one of the log dirs "
                                     f"{', '.join(self.log_dirs)}")
        n = len(staged)
        if n < 1 or sorted(staged) != list(range(n)):
            raise InvalidConfigError(f"the partitions of topic {topic} must be 0..N-1, not "
                                     f"{sorted(staged)}")
        self._check_partition_count(n)
        for p, name in staged.items():
            if (parse_stage_dir(name) or ())[:2] != (topic, p):
                raise InvalidConfigError(f"{name!r} is not a staged dir of {topic}-{p}")
        with self._topic_lock:
            with self.lock:
                if self.partitions(topic) and not replace:
                    raise TopicExistsError(f"Topic '{topic}' already exists.")
                self._check_collision(topic)
                sources = {p: os.path.join(root, staged[p]) for p in range(n)}
                for path in sources.values():
                    safeio.Dir.open(path).close()  # a directory, not a link: else OSError now
                old = self._take_out(topic)
                published: list[tuple[int, str, str]] = []
                topic_id = ckpt.new_topic_id()
                try:
                    for p in range(n):
                        with safeio.Dir.open(sources[p]) as sdir:
                            ckpt.write_partition_metadata(sdir.join(PARTITION_METADATA), topic_id,
                                                          dir=sdir)
                        final = os.path.join(root, partition_dir_name(topic, p))
                        rename_noreplace(sources[p], final)
                        published.append((p, sources[p], final))
                        self._open_log((topic, p), safeio.Dir.open(final, cached=True), 0, 0,
                                       clean=trusted)
                    with safeio.Dir.open(root, follow=True) as rdir:
                        rdir.fsync()
                except BaseException:
                    for p, src, final in reversed(published):
                        lg = self.logs.pop((topic, p), None)
                        if lg is not None:
                            lg.close(take_snapshot=False)
                        try:
                            os.rename(final, src)
                        except OSError as exc:
                            log.error("Cannot put %s back to %s: %s", final, src, exc)
                    self._put_back(old)
                    raise
                for (tp, _path, _points, _doomed, _listed) in old:
                    if self.cleaner is not None:
                        self.cleaner.manager.remove_partition(tp)
                if overrides:
                    self._overrides[topic] = dict(overrides)
                else:
                    self._overrides.pop(topic, None)
                self._save_topic_overrides()
                logs = [self.logs[(topic, p)] for p in range(n)]
            for (_tp, _path, _points, doomed, _listed) in old:
                safeio.remove_tree(doomed)  # (renamed -delete: no loader takes it; not under the lock)
            return logs

    def commit_job(self, log_dir: str, job_id: str,
                   adoptions: Iterable[bulk_commit.TopicAdoption],
                   appends: Mapping[TopicPartition, list[str]]) -> bulk_commit.CommitRecord | None:
        """Publish a bulk write (a ``kafkalog`` job) all or nothing, under one durable commit
        record in ``log_dir`` (one of this manager's log dirs;
        :func:`kafkafs.log.bulk_commit.commit`): create -- or, for an adoption with
        ``replace``, overwrite -- each topic of ``adoptions`` from its staged partition dirs
        (``staged``: every partition 0..N-1 -> a staged dir name of the job in ``log_dir``;
        ``config``: its overrides) and append the staged runs ``appends`` (``(topic,
        partition) -> [staged dir names]``, in order) to existing partitions. Each adopted
        topic gets a new topic id, written into its staged dirs before the record; a replaced
        topic's partition dirs (in any log dir) are renamed to doomed names of the job after
        the record is durable and removed once the new dirs are in. The new logs are loaded
        as written by a :class:`Log` and fsynced (the staged dirs' writers did that).

        Returns the record (already removed), or None when there was nothing to do. Raises
        before the record (nothing published): InvalidTopicError, TopicExistsError (a topic
        to create that exists), InvalidConfigError (bad overrides, partitions that are not
        0..N-1 or above ``kafkafs.max.partitions.per.topic``, a name that is not a staged
        dir of the job's partition, a log dir that is not ours), FileNotFoundError (a staged
        dir missing), CorruptRecordError; after it, what the adoption and the appends raise
        (CommitRecoveryError, OSError...): the record then stays and the next writable open
        finishes the job."""
        self._check_writable()
        root = os.path.abspath(log_dir)
        if root not in {os.path.abspath(d) for d in self.log_dirs}:
            raise InvalidConfigError(f"{log_dir} is not one of the log dirs "
                                     f"{', '.join(self.log_dirs)}")
        adoptions = list(adoptions)
        self.lock.acquire()
        held = [True]

        def release():
            if held[0]:
                held[0] = False
                self.lock.release()

        try:
            for ta in adoptions:
                self._plan_adoption(root, job_id, ta)
            return bulk_commit.commit(log_dir, job_id, dict(appends), self.get_log,
                                      adoptions, adopt=self._adopt_recorded,
                                      after_adopt=release)
        finally:
            release()

    def _plan_adoption(self, root: str, job_id: str, ta: bulk_commit.TopicAdoption) -> None:
        """(under the lock, before the record) Check the adoption ``ta`` (see
        :meth:`commit_job`), give it a new topic id -- written into each staged dir's
        ``partition.metadata``, fsynced -- and the doomed names of the old topic's dirs."""
        from .staging import new_stage_id, parse_stage_dir, stage_dir_name

        topic = ta.topic
        validate_topic(topic)
        ta.config = validate_topic_overrides(ta.config or {})
        n = len(ta.staged)
        if n < 1 or sorted(ta.staged) != list(range(n)):
            raise InvalidConfigError(f"the partitions of topic {topic} must be 0..N-1, not "
                                     f"{sorted(ta.staged)}")
        self._check_partition_count(n)
        for p, name in ta.staged.items():
            parsed = parse_stage_dir(name)
            if parsed is None or parsed[:2] != (topic, p) or not parsed[2].startswith(job_id):
                raise InvalidConfigError(f"{name!r} is not a staged dir of {topic}-{p} of job "
                                         f"{job_id}")
        current = self.partitions(topic)
        if current and not ta.replace:
            raise TopicExistsError(f"Topic '{topic}' already exists.")
        self._check_collision(topic)
        ta.old = []
        for p in current:
            tp = (topic, p)
            path = self.logs[tp].dir if tp in self.logs else self._unloaded[tp].path
            ta.old.append((os.path.abspath(os.path.dirname(path)), os.path.basename(path),
                           stage_dir_name(topic, p, new_stage_id(job_id))))
        ta.replace = bool(current)
        ta.topic_id = ckpt.new_topic_id()
        for name in ta.staged.values():
            with safeio.Dir.open(os.path.join(root, name)) as sdir:  # not a link: else OSError
                ckpt.write_partition_metadata(sdir.join(PARTITION_METADATA), ta.topic_id,
                                              dir=sdir)

    def _adopt_recorded(self, rec: bulk_commit.CommitRecord,
                        ta: bulk_commit.TopicAdoption) -> None:
        """(under the lock, the record durable) Close and forget the old topic's partitions,
        carry the adoption out on disk (:func:`kafkafs.log.bulk_commit.adopt_on_disk`) and
        load the new partitions."""
        topic = ta.topic
        for p in self.partitions(topic):
            tp = (topic, p)
            if self.cleaner is not None:  # a running pass stops before the dir goes
                self.cleaner.manager.abort_cleaning(tp)
            lg = self.logs.pop(tp, None)
            if lg is not None:
                lg.close(take_snapshot=False)
            self._unloaded.pop(tp, None)
            if self.cleaner is not None:
                self.cleaner.manager.remove_partition(tp)

        def save_config(t: str, overrides: dict[str, str]) -> None:
            if overrides:
                self._overrides[t] = dict(overrides)
            else:
                self._overrides.pop(t, None)
            self._save_topic_overrides()

        bulk_commit.adopt_on_disk(rec, ta, save_config)
        for p in sorted(ta.staged):
            final = os.path.join(rec.log_dir, partition_dir_name(topic, p))
            self._open_log((topic, p), safeio.Dir.open(final, cached=True), 0, 0, clean=True)
        log.info("%s topic %s with %d partition(s) in %s (job %s)",
                 "Replaced" if ta.replace else "Created", topic, len(ta.staged), rec.log_dir,
                 rec.job_id)

    def _take_out(self, topic: str) -> list[tuple]:
        """Close every partition of ``topic`` and rename its dir ``<dir>.<uuid>-delete``;
        returns ``[(tp, dir, (recovery point, log start offset), doomed path, listed)]``
        for :meth:`_put_back` or removal (``listed``: the entry of a partition a lazy
        manager had not loaded, else None)."""
        taken = []
        try:
            for p in self.partitions(topic):
                tp = (topic, p)
                if self.cleaner is not None:  # a running pass stops before the dir goes
                    self.cleaner.manager.abort_cleaning(tp)
                lg = self.logs.pop(tp, None)
                if lg is not None:
                    lg.close()
                    entry = (tp, lg.dir, (lg.recovery_point, lg.log_start_offset), None)
                else:
                    listed = self._unloaded.pop(tp)
                    entry = (tp, listed.path, (listed.recovery_point, listed.log_start_offset),
                             listed)
                doomed = f"{entry[1]}.{uuid.uuid4().hex}-delete"
                taken.append((*entry[:3], doomed, entry[3]))
                os.rename(entry[1], doomed)
        except BaseException:
            self._put_back(taken)
            raise
        return taken

    def _put_back(self, taken: list[tuple]) -> None:
        """Undo :meth:`_take_out`: rename the dirs back and load them again (recovering from
        their recovery points; a partition that was not loaded is listed again). Failures
        are logged."""
        for tp, path, (recovery_point, log_start), doomed, listed in taken:
            try:
                if os.path.isdir(doomed):
                    os.rename(doomed, path)
                if listed is not None:
                    self._unloaded[tp] = listed
                    continue
                self._open_log(tp, safeio.Dir.open(path, cached=True), recovery_point,
                               log_start, clean=False)
            except (OSError, LogError, CorruptRecordError) as exc:
                log.error("Cannot restore %s-%d from %s: %s", tp[0], tp[1], doomed, exc)

    def delete_topic(self, topic: str) -> None:
        """Delete every partition of ``topic``: each dir is renamed
        ``<topic>-<p>.<uuid>-delete`` (as Kafka does) and then removed; a partition a lazy
        manager has not loaded is not loaded for it. Under :attr:`lock` the partitions are
        only taken out of :attr:`logs` (from then on the topic is unknown); running cleaner
        passes are stopped, the logs closed and the dirs renamed and removed after it, under
        the topic lock (``docs/design.md §6.4``). Raises UnknownTopicOrPartitionError."""
        self._check_writable()
        with self._topic_lock:
            with self.lock:
                parts = self.partitions(topic)
                if not parts:
                    raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist.")
                taken = []
                for p in parts:
                    lg = self.logs.pop((topic, p), None)
                    # (lazy) a partition never loaded: nothing to close, nothing to recover
                    path = lg.dir if lg is not None else self._unloaded.pop((topic, p)).path
                    taken.append(((topic, p), lg, path))
                self._busy.add(topic)
            try:
                doomed = []
                for _tp, _lg, path in taken:  # first, so no scan adopts a dir back
                    doomed.append(f"{path}.{uuid.uuid4().hex}-delete")
                    try:
                        os.replace(path, doomed[-1])  # the entry itself: never a link's target
                    except FileNotFoundError:
                        doomed[-1] = None  # gone already (by hand): deleted all the same
                for (tp, lg, _path), gone in zip(taken, doomed):
                    if self.cleaner is not None:  # a running pass stops before the dir goes
                        self.cleaner.manager.abort_cleaning(tp)
                    if lg is not None:
                        lg.close(take_snapshot=False)  # (through its open dir)
                    if self.cleaner is not None:
                        self.cleaner.manager.remove_partition(tp)
                    if gone is not None:
                        safeio.remove_tree(gone)
            finally:
                with self.lock:
                    self._busy.discard(topic)
                    if self._overrides.pop(topic, None) is not None:
                        self._save_topic_overrides()

    # -- topic configuration ---------------------------------------------------------
    def topic_overrides(self, topic: str) -> dict[str, str]:
        return dict(self._overrides.get(topic, {}))

    def topic_config(self, topic: str) -> LogConfig:
        """Effective config of ``topic``: broker defaults with its overrides applied."""
        return self.config.log.with_overrides(self._overrides.get(topic, {}))

    def alter_topic_config(self, topic: str, overrides: Mapping[str, str]) -> LogConfig:
        """Replace ``topic``'s overrides (like ``kafka-configs --alter`` of every key) and
        apply the new config to its open logs. Raises InvalidConfigError,
        UnknownTopicOrPartitionError."""
        self._check_writable()
        overrides = validate_topic_overrides(overrides)
        with self.lock:
            if not self.partitions(topic):
                raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist.")
            if overrides:
                self._overrides[topic] = dict(overrides)
            else:
                self._overrides.pop(topic, None)
            self._save_topic_overrides()
            cfg = self.topic_config(topic)
            for p in self.partitions(topic):
                lg = self.logs.get((topic, p))
                if lg is None:
                    continue  # (lazy) not loaded: it takes the new config when it is
                with lg.lock:
                    lg.config = cfg
                    for seg in lg.segments():
                        seg.config = cfg
            return cfg

    def _load_topic_overrides(self) -> None:
        self._overrides = load_topic_overrides(self.log_dirs)

    def _save_topic_overrides(self) -> None:
        data = json.dumps({"version": 1, "topics": self._overrides}, indent=1,
                          sort_keys=True).encode() + b"\n"
        for d in self.log_dirs:
            ckpt.atomic_write(os.path.join(d, TOPIC_CONFIG_FILE), data)

    # -- adoption of external changes ------------------------------------------------
    def scan_for_new_partitions(self) -> list[Log]:
        """Load partition dirs that appeared in the log dirs from outside (a restored backup,
        a bulk load). Returns the newly loaded logs. (Segments copied into a known partition
        are the daemon watcher's job, through :meth:`Log.adopt_segment`.) The dirs are
        chosen under :attr:`lock` and loaded (recovered) outside it, each listed once
        loaded unless the partition became known meanwhile (``docs/design.md §6.4``); one
        scan runs at a time."""
        with self._scan_lock:
            found = []
            with self.lock:
                hidden = set()
                if self.read_only:  # a topic an unfinished bulk commit adopts: not yet
                    self._hidden = set()
                    hidden = self._read_commit_view()
                for d in self.log_dirs:
                    try:
                        parts = partition_dirs(d)
                    except OSError:
                        continue
                    if self.read_only:
                        hidden |= self._read_commit_view()
                    found += [(tp, path) for tp, path in parts if not self._known(tp)
                              and tp[0] not in hidden]
            new = []
            for tp, path in found:
                try:
                    pdir = open_partition_dir(path)
                    if pdir is None or not any(n.endswith(".log") for n in pdir.files()):
                        continue  # still being copied, or empty
                    lg = self._load_log(tp, pdir, 0, 0, clean=False)
                except (OSError, ValueError) as exc:
                    log.warning("Cannot adopt %s yet: %s", path, exc)
                    continue
                with self.lock:
                    if not self._known(tp):
                        self.logs[tp] = lg
                        new.append(lg)
                        lg = None
                if lg is not None:  # made or adopted meanwhile: that one stands
                    lg.close(take_snapshot=False)
                    continue
                log.info("Adopted partition %s-%d from %s", tp[0], tp[1], path)
        return new

    def _known(self, tp: TopicPartition) -> bool:
        """(under the lock) Whether ``tp`` is loaded, listed, or of a topic being made or
        removed: not for :meth:`scan_for_new_partitions` to load."""
        return tp in self.logs or tp in self._unloaded or tp[0] in self._busy

    def forget_partition(self, topic: str, partition: int) -> bool:
        """Close and drop a partition whose dir another process took away: a broker deleting
        the topic (it renames the dir ``<topic>-<p>.<uuid>-delete``), or moving the replica to
        another log dir (where :meth:`scan_for_new_partitions` finds it again). Nothing on disk
        is touched. Tells the ``on_forget`` listeners. Returns whether it was known."""
        with self.lock:
            lg = self.logs.pop((topic, partition), None)
            if lg is None and self._unloaded.pop((topic, partition), None) is not None:
                log.info("Partition %s-%d is gone", topic, partition)
                for listener in list(self.on_forget):
                    listener(topic, partition)
                return True
        if lg is None:
            return False
        try:
            lg.close(take_snapshot=False)
        except OSError as exc:  # its files are going: nothing to keep
            log.debug("closing forgotten %s: %s", lg.dir, exc)
        log.info("Partition %s-%d is gone from %s", topic, partition, lg.dir)
        for listener in list(self.on_forget):
            listener(topic, partition)
        return True

    def dir_of(self, topic: str, partition: int) -> str:
        return self.get_log(topic, partition).dir

    def apply_retention(self, now: int | None = None) -> int:
        """Run retention on every log and remove due ``.deleted`` files. Returns segments
        deleted."""
        if self.read_only:
            return 0
        now = int(time.time() * 1000) if now is None else now
        n = 0
        for lg in list(self.logs.values()):
            n += lg.delete_old_segments(now)
            lg.remove_deleted_segments(now)
        return n

    def remove_expired_producers(self, now: int | None = None) -> int:
        """Expire idle producer ids in every log (``producer.id.expiration.ms``; Kafka's
        ``LogManager`` runs it every ``producer.id.expiration.check.interval.ms``). Returns
        how many were removed; nothing on a read-only manager (the broker's state is
        followed, not kept)."""
        if self.read_only:
            return 0
        now = int(time.time() * 1000) if now is None else now
        expiration = self.config.producer_id_expiration_ms
        return sum(len(lg.remove_expired_producers(now, expiration))
                   for lg in list(self.logs.values()))


def load_topic_overrides(log_dirs: Iterable[str]) -> dict[str, dict[str, str]]:
    """Every topic's config overrides kept in ``log_dirs`` (the ``kafkafs-topic-configs.json``
    of each; for a topic in several, the first dir's value of a key wins), read without a
    lock. Raises InvalidConfigError for a file that cannot be read or holds a bad value."""
    merged: dict[str, dict[str, str]] = {}
    for d in log_dirs:
        path = os.path.join(d, TOPIC_CONFIG_FILE)
        try:
            data = json.loads(ckpt.read_file(path).decode("utf-8"))
        except FileNotFoundError:  # (also a planted link or special file: warned once)
            continue
        except (OSError, ValueError) as exc:
            raise InvalidConfigError(f"cannot read topic configs {path}: {exc}") from None
        for topic, conf in (data.get("topics") or {}).items():
            merged.setdefault(topic, {}).update(
                {k: v for k, v in conf.items() if k not in merged.get(topic, {})})
    for topic, conf in merged.items():
        validate_topic_overrides(conf)
    return merged


def _limit_of(log_dirs: Iterable[str], tp: TopicPartition) -> int | None:
    """The offset an unfinished bulk commit in ``log_dirs`` began ``tp`` at, or None."""
    found = [lim for d in log_dirs if (lim := bulk_commit.read_limits(d).get(tp)) is not None]
    return min(found, default=None)


def partition_dirs(log_dir: str) -> list[tuple[TopicPartition, str]]:
    """``[((topic, partition), path), ...]`` of the partition dirs in the log dir root
    ``log_dir``, sorted by name: the entries named ``<topic>-<partition>`` that are
    directories themselves -- a link (or any other file) with such a name is skipped with
    one warning. Raises OSError when the root cannot be listed."""
    out = []
    for name, mode in sorted(safeio.scan(log_dir).items()):
        tp = parse_partition_dir(name)
        if tp is None:
            continue
        path = os.path.join(log_dir, name)
        if stat.S_ISDIR(mode):
            out.append((tp, path))
        else:
            safeio.warn_once(path, safeio.describe(mode), "partition directory")
    return out


def open_partition_dir(path: str) -> safeio.Dir | None:
    """The partition dir ``path`` opened (``O_DIRECTORY | O_NOFOLLOW``; its descriptor in the
    budget, reopened as the same directory on demand: :mod:`kafkafs.log.safeio`), or None --
    with one warning -- when it is no longer a directory (swapped for a link since it was
    listed). Raises OSError otherwise."""
    try:
        return safeio.Dir.open(path, cached=True)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        safeio.warn_once(path, "symbolic link" if exc.errno == errno.ELOOP
                         else "file that is not a directory", "partition directory")
        return None


def open_lock_file(log_dir: str, *, create: bool) -> int:
    """A read-write descriptor of ``log_dir``/.lock (created when missing with ``create``).
    Raises UnsafeLogDirError when ``.lock`` is a link, FIFO, device or anything but a
    regular file (kafkafs refuses to start on it), FileNotFoundError, OSError."""
    path = os.path.join(log_dir, LOCK_FILE)
    with safeio.Dir.open(log_dir, follow=True) as root:
        try:
            if create:
                return root.open_or_create(LOCK_FILE, replace=False)[0]
            return root.open_file(LOCK_FILE, os.O_RDWR)
        except safeio.NotRegularFileError as exc:
            raise UnsafeLogDirError(
                f"Refusing to use {path}: it is a {exc.kind}, not a regular file. Someone "
                f"planted it in the log dir; remove it (kafkafs never follows a link or opens "
                f"a special file in a log dir).") from None


def _read_ckpt(path: str) -> dict:
    try:
        return ckpt.read_offset_checkpoint(path)
    except Exception as exc:  # noqa: BLE001 - a corrupt checkpoint means "recover everything"
        log.warning("Ignoring unreadable checkpoint %s: %s", path, exc)
        return {}


def is_locked(log_dirs: Iterable[str]) -> str | None:
    """The first of ``log_dirs`` whose ``.lock`` another process holds, else None (a log
    dir on a read-only filesystem counts as free). Never call it in a process that holds the lock: closing any descriptor of the file
    drops that process's POSIX lock."""
    for d in log_dirs:
        try:
            fd = open_lock_file(d, create=False)
        except (FileNotFoundError, UnsafeLogDirError):
            continue
        except OSError as exc:
            if exc.errno == errno.EROFS:
                continue  # nobody writes there: a writable open says why (startup)
            raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return d
        finally:
            os.close(fd)
    return None
