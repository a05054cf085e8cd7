"""The FUSE filesystem: pyfuse3 ``Operations`` over a :class:`~kafkafs.log.manager.LogManager`.

Tree (docs/tree.md; docs/design.md §3.1, §8.1)::

    <topic>/               mkdir: create topic; rmdir: delete it
      config               effective topic config; writing replaces the overrides
      <partition>/         mkdir <topic>/<n>: grow the topic to n+1 partitions
        append             write-only: each line a record (kafka-console-producer rules)
        offset/<N>         value of the record at offset N; xattrs user.kafka.*
        by-time/<T>        symlink to ../offset/<N>, first record with timestamp >= T
        messages           every value, one per line (grows; tail -f works)
        records.jsonl      every record as a JSON object per line
        segments/          the partition's files, read-only, byte-identical
        key/<k>            the latest value of key k in this partition (fs.nodes.keys)
      key/<k>              the latest value of key k where Kafka's partitioner puts it

Each node kind is a class in fs.nodes; :class:`KafkaFS` looks the node up, hands the
request to its kind's handler (``self.kinds[node.kind]``, or the handle's ``kind``) and is
the errno boundary (:func:`fs.errors.fuse_errors`). It is also the context the kinds share:
the manager, the options, the inode table, the caches, the views (``views``), the key view
(``keys``) and the bulk commits in progress. Besides the tree it answers the daemon's
control requests (docs/design.md §7): the root's extended attributes and ``setxattr``.

Handlers run on the trio event loop; anything that may scan (views, segment file reads,
fsync) goes to a worker thread.
"""

from __future__ import annotations

import errno
import itertools
import json
import logging
import os
import time
from dataclasses import dataclass, field

import pyfuse3
import trio

from ..log import cleaner_status
from ..log.config import format_properties
from ..log.isolation import DEFAULT_ISOLATION_LEVEL
from ..log.log import Log
from ..log.manager import LogManager
from ..mounttable import (
    ADOPT_XATTR,
    APPEND_STAGED_XATTR,
    COMMIT_STAGED_XATTR,
    LOG_DIRS_XATTR,
)
from . import nodes
from . import tree as T
from .cache import BatchCache
from .errors import fuse_errors
from .nodes.base import Handle
from .nodes.keys import KeyView
from .nodes.rendered import ViewTable
from .views import ChunkCache, LineView

log = logging.getLogger(__name__)

COMPACT_XATTR = "user.kafkafs.compact"  # set on a topic/partition dir: clean it now


@dataclass
class FsOptions:
    """Mount options that shape the tree (``-o`` on ``kafkafs mount``).

    ``parse_key``/``key_separator``: split appended lines into key and value as
    kafka-console-producer's ``parse.key``/``key.separator`` do. ``read_only``: refuse every
    write with EROFS. ``uid``/``gid``: owner reported for every node. ``isolation_level``
    (Kafka's consumer setting): ``read_committed`` (default) shows records up to the last
    stable offset and hides aborted transactions; ``read_uncommitted`` shows every record.
    ``batch_size``: the producer's ``batch.size`` for lines written to ``append`` (bytes;
    None: each topic's ``kafkafs.batch.size``). ``list_all``: readdir lists the entries
    reached by name only too (``offset/``, ``key/``, ``records.jsonl``, ``segments/``: a
    kind's ``listed``, fs.nodes.base), so that recursive tools walk every record.
    """

    parse_key: bool = False
    key_separator: bytes = b"\t"
    batch_size: int | None = None
    read_only: bool = False
    list_all: bool = False
    isolation_level: str = DEFAULT_ISOLATION_LEVEL
    uid: int = field(default_factory=os.getuid)
    gid: int = field(default_factory=os.getgid)



def _err(code: int):
    return pyfuse3.FUSEError(code)


def _forget_entry(parent_inode: int, name: bytes) -> None:
    """Have the kernel drop its cached entry ``name`` of ``parent_inode`` (waits for it;
    never call it while the request being answered holds the parent's lock)."""
    try:
        pyfuse3.invalidate_entry(parent_inode, name)
    except OSError:
        pass  # not known to the kernel



class KafkaFS(pyfuse3.Operations):
    """pyfuse3 operations for the kafkafs tree (see module docstring).

    ``manager``: the started LogManager; ``options``: :class:`FsOptions`.
    """

    supports_dot_lookup = False
    enable_writeback_cache = False
    enable_acl = False

    def __init__(self, manager: LogManager, options: FsOptions | None = None):
        super().__init__()
        self.manager = manager
        self.options = options or FsOptions()
        self._handles: dict[int, Handle] = {}
        self._fh = itertools.count(1)
        # the caches share one budget (kafkafs.cache.max.bytes): half each
        budget = manager.config.kafkafs_cache_max_bytes
        self.cache = BatchCache(max_bytes=budget // 2)
        self.chunk_cache = ChunkCache(budget - budget // 2)
        self.nursery: trio.Nursery | None = None  # set by the daemon: background work
        self.mount_time_ns = time.time_ns()
        self.initialized = trio.Event()  # set when the kernel's INIT request is answered
        self.keys = KeyView(self)  # key/<k> (fs.nodes.keys); its maps are the daemon's to save
        self.views = ViewTable(self)  # messages, records.jsonl (fs.nodes.rendered)
        self.kinds = nodes.handlers(self)  # node kind -> its handler (fs.nodes)
        self.inodes = T.InodeTable(nodes.DYNAMIC)
        # (topic, partition) -> set when the bulk commit holding that log's lock ends: the
        # writes through the mount wait for it off the lock, so the loop never blocks on it
        self._committing: dict[tuple[str, int], trio.Event] = {}
        # partitions of a commit that was recorded and then failed (ENOSPC, ...): appends
        # through the mount would land past it; refused (EIO) until the next startup
        # finishes the commit
        self._unfinished: set[tuple[str, int]] = set()
        # topics a recorded commit was creating or replacing when it failed: no other bulk
        # commit touches them until the next start has finished it
        self._unfinished_topics: set[str] = set()
        manager.on_forget.append(self._partition_gone)

    def init(self):
        """pyfuse3: the kernel's INIT request arrived; the reply goes out as this returns
        (a task waiting on :attr:`initialized` runs after it)."""
        self.initialized.set()

    # -- the context the node kinds share --------------------------------------------
    def _node(self, inode: int) -> T.Node:
        """The node of ``inode``; FUSEError(ENOENT) when it is gone."""
        node = self.inodes.find(inode)
        if node is None:
            raise _err(errno.ENOENT)
        return node

    def _log(self, node) -> Log:
        return self.manager.get_log(node.topic, node.partition)

    @property
    def committed(self) -> bool:
        """Whether the tree reads as Kafka's ``isolation.level=read_committed``."""
        return self.options.isolation_level == "read_committed"

    def view(self, topic: str, partition: int, kind: str) -> LineView:
        """The LineView of a partition's rendered view ``kind`` (``tree.MESSAGES`` or
        ``tree.JSONL``), built on first use (fs.nodes.rendered); UnknownTopicOrPartitionError
        when the partition is not here."""
        return self.kinds[kind].view(topic, partition)

    def save_views(self, changed_only: bool = False) -> int:
        """Keep every built view's marks for the next daemon (at unmount; with
        ``changed_only``, periodically: those whose end moved since they were last saved).
        Returns how many were saved."""
        return self.views.save(changed_only)

    def _partition_gone(self, topic: str, partition: int) -> None:
        """The manager forgot a partition (its dir went away under a read-only mount): drop
        its views, cached batches and nodes, so a topic re-created under the same name
        shows its new records, not ours. Runs on the loop (daemon.watcher)."""
        self.views.drop(topic, partition)
        self.cache.drop(topic, partition)
        self.keys.maps.forget(topic, partition)
        self.inodes.drop_partition(topic, partition)

    def _topic_gone(self, topic: str) -> None:
        """Drop what the tree kept of a deleted or replaced topic: views, cached batches,
        key maps, nodes."""
        self.views.drop(topic)
        self.cache.drop(topic)
        self.keys.maps.forget(topic)
        self.inodes.drop_topic(topic)

    # -- lookup / getattr / forget ---------------------------------------------------
    @fuse_errors
    async def lookup(self, parent_inode, name, ctx=None):
        parent = self._node(parent_inode)
        if name in (b".", b".."):
            raise _err(errno.ENOENT)
        node = await self.kinds[parent.kind].lookup(parent, name)
        attr = await self.kinds[node.kind].getattr(node)
        node.lookups += 1
        return attr

    @fuse_errors
    async def getattr(self, inode, ctx=None):
        node = self._node(inode)
        return await self.kinds[node.kind].getattr(node)

    async def forget(self, inode_list):
        for inode, n in inode_list:
            self.inodes.forget(inode, n)

    @fuse_errors
    async def setattr(self, inode, attr, fields, fh, ctx):
        """Truncation of a key file (its value); ``O_TRUNC`` on ``append`` and ``config``
        (accepted: nothing to truncate), and times set on the files one may write
        (``append``, ``config``, ``key/<k>``: accepted and not kept, their times follow the
        data, so ``touch`` works there). Every other change is refused with one errno per
        kind (docs/tree.md "Errors"): the size of a read-only file EACCES, a mode or owner
        EPERM, the times of a read-only file EPERM; EROFS on a read-only mount
        (fs.nodes.base ``Kind.setattr``)."""
        node = self._node(inode)
        h = self._handles.get(fh) if fh is not None else None
        return await self.kinds[node.kind].setattr(node, attr, fields, h)

    @fuse_errors
    async def readlink(self, inode, ctx):
        node = self.inodes.find(inode)
        if node is None:
            raise _err(errno.EINVAL)
        return await self.kinds[node.kind].readlink(node)

    @fuse_errors
    async def statfs(self, ctx):
        st = os.statvfs(self.manager.log_dirs[0])
        out = pyfuse3.StatvfsData()
        for f in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files",
                  "f_ffree", "f_favail"):
            setattr(out, f, getattr(st, f))
        out.f_namemax = 255
        return out

    # -- directories -----------------------------------------------------------------
    @fuse_errors
    async def opendir(self, inode, ctx):
        node = self._node(inode)
        h = self.kinds[node.kind].opendir(node)
        fh = next(self._fh)
        self._handles[fh] = h
        return fh

    @fuse_errors
    async def releasedir(self, fh):
        self._handles.pop(fh, None)

    @fuse_errors
    async def readdir(self, fh, start_id, token):
        h = self._handles[fh]
        await h.kind.readdir(h, start_id, token)

    @fuse_errors
    async def mkdir(self, parent_inode, name, mode, ctx):
        parent = self._node(parent_inode)
        if self.options.read_only:
            raise _err(errno.EROFS)
        node = await self.kinds[parent.kind].mkdir(parent, name)
        attr = await self.kinds[node.kind].getattr(node)
        node.lookups += 1
        return attr

    @fuse_errors
    async def rmdir(self, parent_inode, name, ctx):
        parent = self._node(parent_inode)
        if self.options.read_only:
            raise _err(errno.EROFS)
        await self.kinds[parent.kind].rmdir(parent, name)

    @fuse_errors
    async def unlink(self, parent_inode, name, ctx):
        parent = self._node(parent_inode)
        if self.options.read_only:
            raise _err(errno.EROFS)
        await self.kinds[parent.kind].unlink(parent, name)

    @fuse_errors
    async def create(self, parent_inode, name, mode, flags, ctx):
        parent = self._node(parent_inode)
        if self.options.read_only:
            raise _err(errno.EROFS)
        info = pyfuse3.FileInfo()
        node, h = await self.kinds[parent.kind].create(parent, name, flags, info)
        info.fh = next(self._fh)
        self._handles[info.fh] = h
        attr = self.kinds[node.kind].attr(node)
        node.lookups += 1
        return info, attr

    # names are Kafka's (topics, partitions, offsets, segment files): none can be renamed or
    # linked (EPERM, as chmod: an operation this filesystem never allows, whoever asks), nor
    # made by hand (EACCES, as create and unlink outside key/); never ENOSYS
    @fuse_errors
    async def rename(self, parent_inode_old, name_old, parent_inode_new, name_new, flags, ctx):
        raise _err(errno.EROFS if self.options.read_only else errno.EPERM)

    @fuse_errors
    async def link(self, inode, new_parent_inode, new_name, ctx):
        raise _err(errno.EROFS if self.options.read_only else errno.EPERM)

    @fuse_errors
    async def symlink(self, parent_inode, name, target, ctx):
        raise _err(errno.EROFS if self.options.read_only else errno.EACCES)

    @fuse_errors
    async def mknod(self, parent_inode, name, mode, rdev, ctx):
        raise _err(errno.EROFS if self.options.read_only else errno.EACCES)

    # -- files -----------------------------------------------------------------------
    @fuse_errors
    async def open(self, inode, flags, ctx):
        node = self._node(inode)
        info = pyfuse3.FileInfo()
        h = await self.kinds[node.kind].open(node, flags, info)
        info.fh = fh = next(self._fh)
        self._handles[fh] = h
        return info

    @fuse_errors
    async def read(self, fh, off, size):
        h = self._handles[fh]
        return await h.kind.read(h, off, size)

    @fuse_errors
    async def write(self, fh, off, buf):
        h = self._handles[fh]
        return await h.kind.write(h, off, buf)

    async def _commit_wait(self, node) -> None:
        """Wait (off the loop's thread: the loop runs on) until no bulk commit holds the
        lock of ``node``'s log (:meth:`_commit_staged`)."""
        await self.commit_wait(node.topic, node.partition)

    async def commit_wait(self, topic: str, partition: int) -> None:
        """Wait until no bulk commit holds the lock of the partition's log; FUSEError(EIO)
        when a commit recorded for it could not be finished (an append would land past it:
        refused until the next start finishes the commit)."""
        tp = (topic, partition)
        while (ev := self._committing.get(tp)) is not None:
            await ev.wait()
        if tp in self._unfinished:
            raise _err(errno.EIO)

    @fuse_errors
    async def flush(self, fh):
        h = self._handles.get(fh)
        if h is not None:
            await h.kind.flush(h)

    @fuse_errors
    async def fsync(self, fh, datasync):
        h = self._handles.get(fh)
        if h is not None:
            await h.kind.fsync(h)

    @fuse_errors
    async def release(self, fh):
        h = self._handles.pop(fh, None)
        if h is not None:
            await h.kind.release(h)

    # -- extended attributes ---------------------------------------------------------
    async def _xattr_values(self, node: T.Node) -> dict[str, bytes | None]:
        """xattr name -> value of ``node`` (None: not set)."""
        if node.kind == T.ROOT:
            config = self.manager.config
            return {"user.kafkafs.pid": str(os.getpid()).encode(),
                    LOG_DIRS_XATTR: ",".join(self.manager.log_dirs).encode(),
                    # what a bulk writer needs to lay out a new topic as this daemon would
                    "user.kafkafs.num_partitions": str(config.num_partitions).encode(),
                    "user.kafkafs.topic_defaults": format_properties(
                        config.log.to_properties()).encode()}
        return await self.kinds[node.kind].xattrs(node)

    @fuse_errors
    async def getxattr(self, inode, name, ctx):
        node = self._node(inode)
        if not name.startswith(b"user."):
            # no security labels or ACLs here: ENOTSUP, which ls -l and cp -a take as "not
            # supported on this filesystem" and stop asking for (one request, not one per
            # file); nothing is decoded for it
            raise _err(errno.ENOTSUP)
        value = (await self._xattr_values(node)).get(name.decode("utf-8", "replace"))
        if value is None:
            raise _err(pyfuse3.ENOATTR)
        return value

    @fuse_errors
    async def listxattr(self, inode, ctx):
        node = self._node(inode)
        return [k.encode() for k, v in (await self._xattr_values(node)).items()
                if v is not None]

    @fuse_errors
    async def setxattr(self, inode, name, value, ctx):
        """Requests to the daemon, each answered when done:

        * ``user.kafkafs.compact`` on a topic or partition dir runs a cleaning pass over it
          now (``kafkafs compact`` beside a running daemon): EIO when a pass failed, EINVAL
          for a topic that is not compacted, ENOTSUP when the daemon runs no cleaner
          (``log.cleaner.enable=false``).
        * ``user.kafkafs.adopt`` on the root takes a new topic from staged partition dirs
          (:meth:`_adopt_topic`), ``user.kafkafs.append_staged`` on a partition dir appends
          a staged run (:meth:`_append_staged`) -- both kept for older writers --,
          ``user.kafkafs.commit_staged`` on the root publishes a whole write (topics created
          or replaced, appends to existing partitions) all or nothing
          (:meth:`_commit_staged`): a bulk load (``kafkalog`` Spark writes).

        Nothing else is settable (EACCES)."""
        if self.options.read_only:
            raise _err(errno.EROFS)
        node = self._node(inode)
        sname = name.decode("utf-8", "replace")
        if sname == ADOPT_XATTR and node.kind in (T.ROOT, T.TOPIC):
            await self._adopt_topic(node, value)
            return
        if sname == COMMIT_STAGED_XATTR and node.kind == T.ROOT:
            await self._commit_staged(value)
            return
        if sname == APPEND_STAGED_XATTR and node.kind == T.PARTITION:
            await self._append_staged(node, value)
            return
        if sname != COMPACT_XATTR or node.kind not in (T.TOPIC, T.PARTITION):
            raise _err(errno.EACCES)
        cleaner = self.manager.cleaner
        if cleaner is None:
            raise _err(errno.ENOTSUP)
        parts = [node.partition] if node.kind == T.PARTITION else \
            self.manager.partitions(node.topic)
        logs = [self.manager.get_log(node.topic, p) for p in parts]
        if not all(lg.config.compact for lg in logs):
            raise _err(errno.EINVAL)
        failed = False
        for lg in logs:
            result = await trio.to_thread.run_sync(cleaner.clean_log, lg)
            failed = failed or result.error is not None
            if result.ok:
                await trio.to_thread.run_sync(self.keys.maps.after_cleaning, lg)
        try:
            await trio.to_thread.run_sync(cleaner_status.save_all, self.manager.log_dirs,
                                          self.manager.logs, cleaner.manager)
        except OSError as exc:  # informational: the passes are done either way
            log.warning("cannot save the cleaner status: %s", exc)
        if failed:
            raise _err(errno.EIO)

    async def _adopt_topic(self, node: T.Node, value: bytes) -> None:
        """``user.kafkafs.adopt``: the value is JSON ``{"log_dir": one of the daemon's log
        dirs, "topic": T, "stage": stage id, "partitions": N, "config": {overrides}}``; the
        staged dirs ``<T>-<p>.<stage>-delete`` (p in 0..N-1, made by
        :mod:`kafkafs.log.staging`) become topic T, recovered as a restored backup is
        (:meth:`LogManager.adopt_topic`). Set on the root it creates T (EEXIST when T
        exists); set on T's own dir it replaces T's data (a Spark overwrite): the kernel is
        then told to forget the name T, whose partitions and files are new. EINVAL for a bad
        request, ENOENT for a staged dir that is not there."""
        from ..log.staging import stage_dir_name

        try:
            req = json.loads(value)
            topic, stage, n = str(req["topic"]), str(req["stage"]), int(req["partitions"])
            log_dir = str(req["log_dir"])
            config = {str(k): str(v) for k, v in (req.get("config") or {}).items()}
        except (ValueError, KeyError, TypeError, AttributeError):
            raise _err(errno.EINVAL) from None
        replace = node.kind == T.TOPIC
        if replace and node.topic != topic:
            raise _err(errno.EINVAL)
        staged = {p: stage_dir_name(topic, p, stage) for p in range(n)}
        await trio.to_thread.run_sync(
            lambda: self.manager.adopt_topic(log_dir, topic, staged, config, replace=replace))
        if replace:
            self._topic_gone(topic)
            # (this request holds the topic dir's lock, not the root's: safe to wait for)
            await trio.to_thread.run_sync(_forget_entry, pyfuse3.ROOT_INODE,
                                          topic.encode("utf-8", "surrogateescape"))
        log.info("%s topic %s (%d partitions) from staged dirs %s",
                 "Replaced" if replace else "Adopted", topic, n, stage)

    async def _append_staged(self, node: T.Node, value: bytes) -> None:
        """``user.kafkafs.append_staged`` on ``<topic>/<p>``: the value names a staged dir
        ``<topic>-<p>.<stage id>-delete`` in one of the daemon's log dirs (the partition's
        own first); its batches are checked through, appended
        (:func:`~kafkafs.log.staging.append_runs`) and flushed. EINVAL for a name that is
        not a staged dir of this partition, ENOENT when it is not there, EIO for damaged
        data, EMSGSIZE for a batch over ``max.message.bytes``."""
        from ..log.staging import append_runs, parse_stage_dir

        lg = self._log(node)
        name = value.decode("utf-8", "replace")
        if "/" in name or (parse_stage_dir(name) or ())[:2] != (node.topic, node.partition):
            raise _err(errno.EINVAL)
        await self._commit_wait(node)
        roots = [os.path.dirname(lg.dir)] + list(self.manager.log_dirs)
        path = next((os.path.join(r, name) for r in roots
                     if os.path.isdir(os.path.join(r, name))), os.path.join(roots[0], name))

        def work():
            stats = append_runs(lg, [path], verify=True)
            lg.flush()
            return stats

        stats = await trio.to_thread.run_sync(work)
        log.info("Appended %d records (%d bytes) from %s to %s", stats.records, stats.bytes,
                 name, lg.name)

    async def _commit_staged(self, value: bytes) -> None:
        """``user.kafkafs.commit_staged`` on the root: the value is JSON ``{"log_dir": one
        of the daemon's log dirs, "request": the name of a commit request there}``
        (:func:`kafkafs.log.bulk_commit.write_request`: topics to create or replace from
        staged partition dirs, staged runs per existing partition). The whole job is
        published as one commit decided by a durable commit record
        (:meth:`LogManager.commit_job <kafkafs.log.manager.LogManager.commit_job>`), on a
        worker thread holding every appended log's lock; a crash of the daemon meanwhile is
        finished by its next startup. A replaced topic's old names are then forgotten by
        the kernel. EINVAL for a bad request, EEXIST for a topic to create that exists,
        ENOENT for a request, staged dir or partition that is not there, EIO for damaged
        staged data or a commit that could not be finished (its record then stays for the
        next startup; until then appends through the mount to its partitions, and bulk
        commits to its partitions or topics, get EIO), EMSGSIZE for a batch over
        ``max.message.bytes``."""
        from ..log import bulk_commit

        try:
            req = json.loads(value)
            log_dir, name = str(req["log_dir"]), str(req["request"])
        except (ValueError, KeyError, TypeError):
            raise _err(errno.EINVAL) from None
        if log_dir not in self.manager.log_dirs:
            raise _err(errno.EINVAL)

        try:
            job, runs, adoptions = await trio.to_thread.run_sync(bulk_commit.read_request,
                                                                 log_dir, name)
        except ValueError as exc:
            log.warning("commit request refused: %s", exc)
            raise _err(errno.EINVAL) from None
        while busy := [self._committing[tp] for tp in runs if tp in self._committing]:
            await busy[0].wait()  # another commit of these partitions: one at a time
        topics = {ta.topic for ta in adoptions} | {t for t, _p in runs}
        if self._unfinished.intersection(runs) or self._unfinished_topics & topics:
            raise _err(errno.EIO)
        done = trio.Event()
        for tp in runs:
            self._committing[tp] = done
        try:
            rec = await trio.to_thread.run_sync(self.manager.commit_job, log_dir, job,
                                                adoptions, runs)
        except BaseException:
            if os.path.lexists(os.path.join(log_dir, bulk_commit.record_name(job))):
                self._unfinished.update(runs)
                self._unfinished_topics.update(ta.topic for ta in adoptions)
                log.error("The commit of job %s was recorded but could not be finished; "
                          "appends through the mount to its %d partition(s) are refused "
                          "until the daemon restarts and finishes it", job, len(runs))
            raise
        finally:
            for tp in runs:
                self._committing.pop(tp, None)
            done.set()
        for ta in adoptions:
            if ta.replace:
                self._forget_topic_later(ta.topic)
        if rec is not None:
            log.info("Committed job %s: %d offset(s) to %d partition(s), %d topic(s) created "
                     "or replaced", rec.job_id, sum(p.after - p.before for p in rec.partitions),
                     len(rec.partitions), len(rec.topics))

    def _forget_topic_later(self, topic: str) -> None:
        """Drop what the tree kept of the replaced ``topic`` now, and have the kernel forget
        its name once the request that replaced it has been answered (it holds the root's
        lock, which the kernel's invalidation waits for)."""
        self._topic_gone(topic)
        if self.nursery is not None:
            self.nursery.start_soon(trio.to_thread.run_sync, _forget_entry,
                                    pyfuse3.ROOT_INODE,
                                    topic.encode("utf-8", "surrogateescape"))

    @fuse_errors
    async def removexattr(self, inode, name, ctx):
        raise _err(errno.EROFS if self.options.read_only else errno.EACCES)
