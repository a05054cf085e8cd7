"""Keeping frontends' appends out of a bulk commit in progress (docs/design.md §4.6, §6.4).

A bulk commit (:meth:`LogManager.commit_job <kafkafs.log.manager.LogManager.commit_job>`)
runs on a worker thread holding the lock of every log it appends to. A frontend's append on
the trio loop must not block the loop on that lock: it waits on the commit's
:class:`trio.Event` instead (:meth:`CommitGate.wait`). A commit that was recorded and then
could not be finished (ENOSPC, an I/O error) leaves its partitions *unfinished*: an append
there would land past the commit, so it is refused until the next start-up finishes the
commit (:class:`CommitUnfinishedError`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

import trio

from ..log.errors import LogError


class CommitUnfinishedError(LogError):
    """A bulk commit recorded for this partition or topic could not be finished; it is
    finished by the next start-up. Until then the partition takes no append and no other
    bulk commit (the FUSE mount answers EIO)."""


class CommitGate:
    """Which partitions a bulk commit holds now, and which a failed one left unfinished.
    Used on the trio loop only (no lock of its own)."""

    def __init__(self) -> None:
        # (topic, partition) -> set when the commit holding that log's lock ends
        self._committing: dict[tuple[str, int], trio.Event] = {}
        self._unfinished: set[tuple[str, int]] = set()
        self._unfinished_topics: set[str] = set()

    async def wait(self, topic: str, partition: int) -> None:
        """Wait until no bulk commit holds the partition's log. Raises
        CommitUnfinishedError when a commit recorded for it could not be finished."""
        tp = (topic, partition)
        while (ev := self._committing.get(tp)) is not None:
            await ev.wait()
        if tp in self._unfinished:
            raise CommitUnfinishedError(
                f"{topic}-{partition}: a bulk commit recorded for it could not be finished; "
                "it takes no appends until the daemon restarts and finishes the commit")

    @contextlib.asynccontextmanager
    async def holding(self, partitions: Iterable[tuple[str, int]], topics: Iterable[str]):
        """Hold ``partitions`` (``(topic, partition)`` pairs a commit appends to) for the
        body: other commits of them wait for it, appends wait (:meth:`wait`). ``topics``
        are those it creates or replaces. Raises CommitUnfinishedError when a partition or
        topic was left unfinished by an earlier commit."""
        parts = list(partitions)
        topics = set(topics)
        while busy := [self._committing[tp] for tp in parts if tp in self._committing]:
            await busy[0].wait()  # another commit of these partitions: one at a time
        if self._unfinished.intersection(parts) or self._unfinished_topics & topics:
            raise CommitUnfinishedError(
                "an earlier bulk commit of these partitions or topics could not be finished")
        done = trio.Event()
        for tp in parts:
            self._committing[tp] = done
        try:
            yield
        finally:
            for tp in parts:
                self._committing.pop(tp, None)
            done.set()

    def mark_unfinished(self, partitions: Iterable[tuple[str, int]],
                        topics: Iterable[str]) -> None:
        """Refuse appends to ``partitions`` and commits touching them or ``topics`` until
        the next start-up (a commit record stays behind for it)."""
        self._unfinished.update(partitions)
        self._unfinished_topics.update(topics)
