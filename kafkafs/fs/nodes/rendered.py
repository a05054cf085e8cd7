"""``<topic>/<p>/messages`` and ``records.jsonl``: the partition rendered as text, one line
per record (docs/tree.md "Reading"; docs/design.md §3.1).

The text is a :class:`~kafkafs.fs.views.LineView`, built once per partition and kind and
kept in the mount's :class:`ViewTable` (``fs.views``) with its marks, which are saved for
the next daemon (fs.markstore) and kept current by fs.measure. A view measured to its end
and intact opens with ``keep_cache``; a damaged or unmeasured one with ``direct_io``, so
that the read at its end reaches the daemon (EIO at damage, the true end of an
unmeasured view).
"""

from __future__ import annotations

import errno
import weakref

import pyfuse3
import trio

from ...log.log import Log
from ...record import plain
from .. import markstore
from .. import tree as T
from ..decoded_jsonl import decoded_renderers, family_of
from ..errors import report_damage
from ..views import (
    LineView,
    measure_jsonl,
    measure_messages,
    render_jsonl,
    render_jsonl_run,
    render_messages,
)
from .base import Handle, Kind, err

INLINE_RENDER_BYTES = 4 * 1024 * 1024  # view chunks up to this much log render on the loop
# log bytes a view is measured over before a stat or an open answers, the first time (views.py):
# past them the view streams with its size shown as 0 until a read reaches its end
MEASURE_FIRST_BYTES = 16 * 1024 * 1024


class ViewTable:
    """The built views of one mount ``fs``: ``views`` maps ``(topic, partition, kind)`` to
    its LineView; ``kinds``: the kinds of rendered view (each :class:`RenderedView` adds
    its own). Runs on the loop, except :meth:`save` (a worker thread)."""

    def __init__(self, fs):
        self.fs = fs
        self.views: dict[tuple, LineView] = {}
        self.mark_names: dict[tuple, str] = {}  # view key -> the name its marks go by
        self.kinds: tuple[str, ...] = ()
        # view -> (start, end offset) when its marks were last saved
        self._saved: weakref.WeakKeyDictionary[LineView, tuple] = weakref.WeakKeyDictionary()

    def mark_kind(self, kind: str) -> str:
        """The name under which a view's marks are saved (fs.markstore): per isolation."""
        return kind if self.fs.committed else f"{kind}.read_uncommitted"

    def save(self, changed_only: bool = False) -> int:
        """Keep every built view's marks for the next daemon (at unmount; with
        ``changed_only``, periodically: those whose end moved since they were last saved).
        Returns how many were saved. Raises OSError."""
        saved = 0
        for key, v in list(self.views.items()):
            mark = (v.start_offset, v.end_offset)
            if changed_only and self._saved.get(v) == mark:
                continue
            state = v.export_state()
            if state is not None:
                markstore.save(v.log.dir, self.mark_kind(self.mark_names.get(key, key[2])),
                               state)
                self._saved[v] = mark
                saved += 1
        return saved

    def drop(self, topic: str, partition: int | None = None) -> None:
        """Forget the views of a partition (or of every partition of ``topic``), their
        rendered chunks too."""
        n = 1 if partition is None else 2
        tp = (topic,) if partition is None else (topic, partition)
        for key in [k for k in self.views if k[:n] == tp]:
            self.fs.chunk_cache.drop(self.views.pop(key))

    def log_changed(self, lg: Log) -> None:
        """A log grew, shrank or was rewritten (:attr:`Log.on_change`): drop the kernel's
        cached attributes of its views so the next stat (tail -f, cat after echo >>) asks
        again. Only attributes are invalidated (no page locks are taken), which is safe from
        inside any handler; the kernel drops stale pages itself when it sees the new size."""
        by_key = self.fs.inodes.by_key
        for kind in self.kinds:
            node = by_key.get((kind, lg.topic, lg.partition, None))
            if node is None or node.lookups <= 0:
                continue
            v = self.views.get((lg.topic, lg.partition, kind))
            # the front moved (retention, truncation): every cached page is wrong. That only
            # happens off the request handlers (retention task, adoption), where dropping
            # pages cannot wait on a read this daemon has yet to answer.
            shifted = v is not None and v.start_offset is not None and \
                v.start_offset != lg.log_start_offset
            try:
                pyfuse3.invalidate_inode(node.inode, attr_only=not shifted)
            except OSError:
                pass  # not known to the kernel (any more), or not supported


class RenderedView(Kind):
    """A partition rendered by ``render``/``measure`` (one batch: bytes / their length) and
    ``render_run`` (a run of plain batches in one native pass), as fs.views's LineView
    takes them. Read-only; attributes kept by the kernel until the log changes
    (:meth:`ViewTable.log_changed`)."""

    parents = (T.PARTITION,)
    render = staticmethod(render_messages)
    measure = staticmethod(measure_messages)
    render_run = staticmethod(plain.render_file_values)

    def __init__(self, fs):
        super().__init__(fs)
        fs.views.kinds += (self.kind,)

    def renderers(self, topic: str) -> tuple:
        """``(render, measure, render_run, mark kind)`` of the view of ``topic``'s
        partitions: the kind's own, unless a kind renders some topics otherwise."""
        return self.render, self.measure, self.render_run, self.kind

    def view(self, topic: str, partition: int) -> LineView:
        """The view of the partition, built on first use (and again when the partition's
        Log was replaced) from its saved marks; UnknownTopicOrPartitionError when the
        partition is not here."""
        fs = self.fs
        table = fs.views
        key = (topic, partition, self.kind)
        v = table.views.get(key)
        lg = fs.manager.get_log(topic, partition)
        if v is None or v.log is not lg:
            if v is not None:
                fs.chunk_cache.drop(v)
            render, measure, render_run, mark = self.renderers(topic)
            v = LineView(lg, render, measure, committed=fs.committed, render_run=render_run,
                         on_damage=report_damage, cache=fs.chunk_cache)
            table.mark_names[key] = mark
            state = markstore.load(lg.dir, table.mark_kind(mark))
            if state is not None:
                v.import_state(state)
            table.views[key] = v
            if table.log_changed not in lg.on_change:
                lg.on_change.append(table.log_changed)
        return v

    async def sized_view(self, node: T.Node) -> LineView:
        """The view of ``node``, brought up to the log end (in a worker thread) unless it
        was never measured and the log is larger than ``MEASURE_FIRST_BYTES``: a first stat
        or open of a large partition's view answers at once and the reads measure it as
        they stream (fs.views)."""
        v = self.view(node.topic, node.partition)
        if not v.is_current() and \
                (v.ever_sized or v.unmeasured_bytes() <= MEASURE_FIRST_BYTES):
            await trio.to_thread.run_sync(v.refresh)
        return v

    async def getattr(self, node: T.Node):
        lg = self.log(node)
        v = await self.sized_view(node)
        seg_mtime = lg.active_segment.last_modified_ms() * 1_000_000
        if not v.is_current():
            # never measured and too large to measure before answering: size unknown,
            # shown as 0 (as /proc does); cat, grep and tail read it to its end. A view
            # measured before that is behind (an append landed while it was brought up
            # to date, or the background measurer is part-way) shows what it measured:
            # a size never goes back (tail -f would say "file truncated" and print the
            # file again); the next stat asks again.
            attr = self.attr(node, v.size if v.ever_sized else 0, seg_mtime)
            attr.attr_timeout = 0
            return attr
        size = v.size
        if v.damage is not None:
            size += 1  # the byte at the damage: reading it is the EIO (see read)
        return self.attr(node, size, seg_mtime)

    async def open(self, node: T.Node, flags: int, info) -> Handle:
        self.refuse_writing(flags)
        h = Handle(node, self)
        v = h.view = await self.sized_view(node)
        if v.damage is not None or not v.is_current():
            # the view ends at damage: reads go past the size to the daemon, which
            # answers the one at the end with EIO (the page cache would stop at the size
            # and the reader would see a clean end of file); an unmeasured view's size
            # is not known yet: its reads stream to the end the same way
            info.direct_io = h.direct = True
        else:
            # the kernel keeps its pages across opens; when earlier bytes change
            # (retention) log_changed drops them explicitly
            info.keep_cache = True
        return h

    async def read(self, h: Handle, off: int, size: int) -> bytes:
        v = h.view
        if self.fs.manager.logs.get((v.log.topic, v.log.partition)) is not v.log:
            raise err(errno.ESTALE)  # the partition went away (a topic deleted under ro)
        damage = v.damage
        if damage is not None and not h.direct and off + size > v.size:
            # a page-cache handle (opened before the damage was found): a short answer
            # would have the kernel fill the page with zeros and show them as data, so
            # the whole request that reaches the damage fails
            raise damage
        # chunks of bounded size render right here (a pread, a CRC and a C loop over at
        # most INLINE_RENDER_BYTES): a hop to a worker thread costs more than the work.
        # Rendering the next chunks ahead in another thread was measured no faster on
        # this 2-vCPU machine, twice in Python (the threads waited on each other's GIL:
        # 0.41 s against 0.27 s for 200 MB) and once on a native thread that never took
        # the GIL (173 ms against 166 ms inline, best of 10): the trivial fs alone keeps
        # both cores busy, so the render costs the same CPU wherever it runs.
        data = v.read(off, size, render=INLINE_RENDER_BYTES, zero_copy=True)
        if data is None:
            data = await trio.to_thread.run_sync(v.read, off, size)
        return data


class MessagesFile(RenderedView):
    """``messages``: every value, one per line (fs.views :func:`render_messages`)."""

    kind = T.MESSAGES
    name = b"messages"


class JsonlFile(RenderedView):
    """``records.jsonl``: every record as a JSON object per line (:func:`render_jsonl`);
    in Kafka's internal topics keys and values decoded (fs.decoded_jsonl); listed only
    with ``-o list_all`` (fs.tree)."""

    kind = T.JSONL
    name = b"records.jsonl"
    listed = False
    render = staticmethod(render_jsonl)
    measure = staticmethod(measure_jsonl)
    render_run = staticmethod(render_jsonl_run)

    def renderers(self, topic: str) -> tuple:
        family = family_of(topic)
        if family is None:
            return super().renderers(topic)
        render, measure = decoded_renderers(family)
        # other bytes than the plain view's: marks of their own
        return render, measure, None, f"{self.kind}-decoded"
