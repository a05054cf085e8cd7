"""The descriptor budget: every descriptor and mapping the log layer keeps between calls,
under one process-wide least-recently-used cache of ``kafkafs.max.open.files`` entries.

Kafka keeps every segment's ``.log`` open and both its indexes memory-mapped for the life of
the broker (its documentation asks for about one descriptor per segment, 100,000 in all,
and a ``vm.max_map_count`` to match). kafkafs bounds them by configuration instead, never by
history: partition directory descriptors, segment ``.log`` descriptors, the memory maps of
writable ``.index``/``.timeindex`` files and the entry snapshots of read-only ones are
:class:`Handle` objects of :data:`CACHE`. A handle is opened on first use and again when it
is used after being evicted; whoever reopens it checks that it reaches the very file (or
directory) of the first open -- the same ``(st_dev, st_ino)`` -- so that a reopen never
reads another file that took the name meanwhile.

**Leases.** A handle's resource is only used inside a lease: ``with handle as fd: ...``
(:meth:`Handle.acquire` / :meth:`Handle.release`, counted). Eviction closes only handles no
lease holds, and a handle closed by its owner while leased is closed by the last release:
a descriptor is never closed while a thread uses it (its number is reused by the next open
at once, and a ``pread`` would read the wrong file silently). Leases are short -- one
system call, one index lookup -- and never held across a ``yield`` (an iterator takes one
per read), so the cache holds at most its capacity plus the handles threads are using at
that moment; it shrinks back as they release them.

**Locking.** One lock guards the LRU order and the counters, nothing else: opens run
outside it (one at a time per handle), and so do the closes of evicted handles.

**Running out.** Every open of the log layer goes through :func:`call`: EMFILE, ENFILE (and
ENOMEM, what ``mmap`` says at ``vm.max_map_count``) is logged once with what to do, the
idle half of the cache is closed and the open tried once more; a second failure
propagates, failing only the operation that met it.

:func:`apply_budget` sets the capacity (``LogManager.startup``): it raises the soft
``RLIMIT_NOFILE`` to the hard limit and, when the budget plus :data:`HEADROOM` still does
not fit, warns and keeps the budget within the limit.

Synchronous and thread-safe; no trio.
"""

from __future__ import annotations

import collections
import errno
import logging
import os
import resource
import threading
from collections.abc import Callable

__all__ = ["CACHE", "DEFAULT_MAX_OPEN_FILES", "HEADROOM", "Handle", "HandleCache",
           "apply_budget", "call"]

log = logging.getLogger(__name__)

#: default of the broker key ``kafkafs.max.open.files``
DEFAULT_MAX_OPEN_FILES = 1000
#: descriptors a daemon needs besides its budget: stdio, /dev/fuse, the event loop and
#: inotify, a ``.lock`` per log dir, and the short-lived opens of the worker threads
#: (checkpoints, snapshots, a handle reopened while the cache is over capacity)
HEADROOM = 128
#: the smallest budget :func:`apply_budget` leaves when the limit is too low for more
MIN_CAPACITY = 16
_EXHAUSTED = (errno.EMFILE, errno.ENFILE, errno.ENOMEM)
BUDGET_KEY = "kafkafs.max.open.files"


class HandleCache:
    """The LRU of open handles (see the module). ``capacity``: how many handles may stay
    open while idle."""

    def __init__(self, capacity: int = DEFAULT_MAX_OPEN_FILES):
        self._lock = threading.Lock()
        self._open: collections.OrderedDict[Handle, None] = collections.OrderedDict()
        self._capacity = max(1, int(capacity))

    @property
    def capacity(self) -> int:
        return self._capacity

    @capacity.setter
    def capacity(self, value: int) -> None:
        with self._lock:
            self._capacity = max(1, int(value))
            victims = self._evict_locked(self._capacity)
        _close_all(victims)

    def __len__(self) -> int:
        """Handles open now (idle and leased)."""
        return len(self._open)

    def leased(self) -> int:
        """Handles some thread is using now."""
        with self._lock:
            return sum(1 for h in self._open if h._refs)

    def shrink(self, keep: int | None = None) -> int:
        """Close idle handles until at most ``keep`` are open (default: half of those open
        now). Returns how many were closed."""
        with self._lock:
            victims = self._evict_locked(len(self._open) // 2 if keep is None else keep)
        _close_all(victims)
        return len(victims)

    def _evict_locked(self, limit: int) -> list:
        """(lock held) Take idle handles out, least recently used first, until at most
        ``limit`` are open; returns ``[(handle, resource)]`` to close outside the lock."""
        excess = len(self._open) - limit
        if excess <= 0:
            return []
        out = []
        for h in self._open:
            if h._refs == 0:
                out.append(h)
                if len(out) >= excess:
                    break
        victims = []
        for h in out:
            del self._open[h]
            victims.append((h, h._res))
            h._res = None
        return victims


def _close_all(victims) -> None:
    for h, res in victims:
        try:
            h._closer(res)
        except Exception as exc:  # noqa: BLE001 - a close must not fail the caller's operation
            log.warning("closing %s: %s", h.name or "a cached file", exc)


#: the process-wide cache every handle of the log layer belongs to
CACHE = HandleCache()


class Handle:
    """One reopenable resource in :data:`CACHE` (a descriptor, a memory map, a snapshot).

    ``opener()``: opens it (and checks it is still the one first opened); it runs outside
    the cache's lock, one call at a time per handle. ``closer(resource)``: closes it
    (default ``os.close``). ``resource``: already open (the first open, which validated the
    file), installed as if just used. ``name``: for messages. ``gone``: exception types an
    opener raises when the file is gone for good (default FileNotFoundError): the handle is
    then closed, and later leases raise that exception again.

    Use: ``with handle as res:`` (or :meth:`acquire`/:meth:`release`); :meth:`close` for
    good (the owner is done), :meth:`drop` to close the resource now if idle (it reopens on
    the next lease).
    """

    __slots__ = ("__weakref__", "_cache", "_closed", "_closer", "_gone", "_gone_types",
                 "_open_lock", "_opener", "_refs", "_res", "name")

    def __init__(self, opener: Callable[[], object], closer: Callable[[object], None] = os.close,
                 *, resource: object = None, name: str = "",
                 gone: tuple[type[BaseException], ...] = (FileNotFoundError,),
                 cache: HandleCache | None = None):
        self._cache = CACHE if cache is None else cache
        self._opener = opener
        self._closer = closer
        self._res = None
        self._refs = 0
        self._closed = False
        self._gone: BaseException | None = None
        self._gone_types = gone
        self._open_lock = threading.Lock()
        self.name = name
        if resource is not None:
            self._install(resource, 0)

    # -- state ------------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        """Closed for good (by :meth:`close`, or its file found gone)."""
        return self._closed

    def _closed_error(self) -> BaseException:
        if self._gone is not None:
            return self._gone
        return OSError(errno.EBADF, "closed", self.name or None)

    def _install(self, res, refs: int) -> None:
        """Put the just opened ``res`` in the cache with ``refs`` leases (evicting others
        over the capacity); closes it and raises when the handle was closed meanwhile."""
        cache = self._cache
        with cache._lock:
            closed = self._closed
            if not closed:
                self._res = res
                self._refs = refs
                cache._open[self] = None
                victims = cache._evict_locked(cache._capacity)
        if closed:
            _close_all([(self, res)])
            raise self._closed_error()
        _close_all(victims)

    # -- leases -----------------------------------------------------------------------------
    def acquire(self):
        """The resource, open, leased until :meth:`release`. Opens it when it is not (see
        :func:`call`). Raises what the opener raises; OSError (EBADF) once closed."""
        cache = self._cache
        lock = cache._lock
        lock.acquire()  # (the fast path of every read and write: no context manager)
        res = self._res
        if res is not None:
            self._refs += 1
            cache._open.move_to_end(self)
            lock.release()
            return res
        lock.release()
        return self._open_and_acquire()

    def _open_and_acquire(self):
        cache = self._cache
        with self._open_lock:
            with cache._lock:  # opened by another thread meanwhile?
                res = self._res
                if res is not None:
                    self._refs += 1
                    cache._open.move_to_end(self)
                    return res
                if self._closed:
                    raise self._closed_error()
            try:
                res = call(self._opener)
            except self._gone_types as exc:
                with cache._lock:
                    self._closed = True
                    self._gone = exc
                raise
            self._install(res, 1)
            return res

    def release(self) -> None:
        """End a lease taken by :meth:`acquire`."""
        cache = self._cache
        lock = cache._lock
        lock.acquire()
        self._refs -= 1
        if self._refs or (not self._closed and len(cache._open) <= cache._capacity):
            lock.release()
            return
        try:
            if self._closed and self._res is not None:
                cache._open.pop(self, None)
                victims = [(self, self._res)]
                self._res = None
            else:
                victims = cache._evict_locked(cache._capacity)
        finally:
            lock.release()
        if victims:
            _close_all(victims)

    __enter__ = acquire

    def __exit__(self, *exc) -> None:
        self.release()

    def leased_if_open(self):
        """The resource leased when it is open now, else None (nothing is opened)."""
        cache = self._cache
        with cache._lock:
            res = self._res
            if res is not None:
                self._refs += 1
                cache._open.move_to_end(self)
            return res

    # -- lifetime ---------------------------------------------------------------------------
    def drop(self) -> bool:
        """Close the resource now unless a lease holds it; the next lease reopens it.
        Returns whether nothing is open any more."""
        cache = self._cache
        with cache._lock:
            if self._refs:
                return False
            res, self._res = self._res, None
            cache._open.pop(self, None)
        if res is not None:
            _close_all([(self, res)])
        return True

    def close(self) -> None:
        """Close for good: now when idle, else at the end of the last lease. Idempotent."""
        cache = self._cache
        with cache._lock:
            if self._closed and self._res is None:
                return
            self._closed = True
            if self._refs:
                return
            res, self._res = self._res, None
            cache._open.pop(self, None)
        if res is not None:
            _close_all([(self, res)])

    def __repr__(self):
        state = "closed" if self._closed else ("open" if self._res is not None else "idle")
        return f"Handle({self.name!r}, {state}, leases={self._refs})"


# -- running out of descriptors ------------------------------------------------------------
_warned_exhausted: set[int] = set()


def call(fn: Callable, *args, **kwargs):
    """``fn(*args, **kwargs)``; when it fails with EMFILE, ENFILE or ENOMEM, say once what to do
    (:func:`note_exhausted`), close the idle half of :data:`CACHE` and call it once more
    (what that second call raises propagates)."""
    try:
        return fn(*args, **kwargs)
    except OSError as exc:
        if exc.errno not in _EXHAUSTED:
            raise
        note_exhausted(exc)
        if CACHE.shrink() == 0:
            raise
    return fn(*args, **kwargs)


def note_exhausted(exc: OSError) -> None:
    """Log once per kind (descriptors, system file table, memory maps) that ``exc`` ran
    out of them, with the limit, the budget and what to change."""
    if exc.errno in _warned_exhausted:
        return
    _warned_exhausted.add(exc.errno)
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    budget = CACHE.capacity
    if exc.errno == errno.ENOMEM:
        log.error("%s: out of memory maps (vm.max_map_count is %s): kafkafs keeps at most "
                  "%s=%d files open or mapped; raise vm.max_map_count (sysctl) or lower %s. "
                  "Closing idle files and trying again; only operations that still fail "
                  "fail.", exc, _max_map_count() or "unknown", BUDGET_KEY, budget, BUDGET_KEY)
        return
    what = "the system's file table is full (fs.file-max)" if exc.errno == errno.ENFILE \
        else f"the descriptor limit is {soft} (ulimit -n)"
    log.error("%s: %s. kafkafs keeps at most %s=%d files open and needs about %d descriptors "
              "(%d more for itself, plus files readers keep open under segments/): raise the "
              "limit (ulimit -n, LimitNOFILE= of the systemd unit) or lower %s. Closing idle "
              "files and trying again; only operations that still fail fail.", exc, what,
              BUDGET_KEY, budget, budget + HEADROOM, HEADROOM, BUDGET_KEY)


# -- the budget ------------------------------------------------------------------------------
def _max_map_count() -> int | None:
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def _nr_open() -> int:
    try:
        with open("/proc/sys/fs/nr_open") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 1048576


def raise_descriptor_limit() -> int:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit (as many services do; an
    unlimited hard limit means ``fs.nr_open``), when allowed. Returns the soft limit then
    in force (``resource.RLIM_INFINITY`` when unlimited)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = _nr_open() if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (OSError, ValueError) as exc:  # EPERM under a seccomp filter: keep the soft one
            log.debug("cannot raise the soft descriptor limit from %d to %d: %s", soft,
                      target, exc)
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def apply_budget(max_open_files: int) -> int:
    """Make ``max_open_files`` (``kafkafs.max.open.files``) the capacity of :data:`CACHE`,
    after raising the soft descriptor limit (:func:`raise_descriptor_limit`). When the budget
    plus :data:`HEADROOM` does not fit the limit, warn and use what fits (at least
    :data:`MIN_CAPACITY`); warn too when ``vm.max_map_count`` is too low for it. Returns the
    capacity in force."""
    limit = raise_descriptor_limit()
    budget = max(1, int(max_open_files))
    if limit != resource.RLIM_INFINITY and budget + HEADROOM > limit:
        fitted = max(MIN_CAPACITY, limit - HEADROOM)
        log.warning(
            "%s=%d needs %d descriptors (%d more for the daemon itself), but the limit is %d "
            "(ulimit -n; hard limit %d): keeping at most %d files open instead. Raise the "
            "limit (ulimit -Hn, LimitNOFILE= of the systemd unit) to at least %d, or lower "
            "%s.", BUDGET_KEY, budget, budget + HEADROOM, HEADROOM, limit,
            resource.getrlimit(resource.RLIMIT_NOFILE)[1], fitted, budget + HEADROOM,
            BUDGET_KEY)
        budget = fitted
    maps = _max_map_count()
    if maps is not None and budget + 1024 > maps:
        log.warning("%s=%d may map up to %d index files, close to vm.max_map_count=%d: raise "
                    "it (sysctl vm.max_map_count) or lower %s.", BUDGET_KEY, budget, budget,
                    maps, BUDGET_KEY)
    CACHE.capacity = budget
    return budget
