"""Every key's latest record in one partition: the index behind the key view
(docs/design.md §3.1).

A :class:`KeyMap` answers "at which offset is the latest record of key K?" for one
partition, read_committed: it is built from the batches below the last stable offset,
control batches and the batches of aborted transactions left out (a key whose latest
record was aborted keeps its previous committed one), records with a null key ignored.
A key whose latest record is a tombstone (null value) is absent.

Representation (bounded memory, 24 bytes per live key): a key is identified by its
128-bit BLAKE2b digest, split in two 64-bit halves ``h1``/``h2``. The bulk of the map is
three numpy arrays sorted by ``(h1, h2)`` -- ``h1``, ``h2`` and the offset -- searched
by bisection. A catch-up in a worker thread gathers the changes it reads as digests and
offsets and merges them into the arrays a chunk at a time (a quarter of the arrays' size
at least: a constant cost per change); a small catch-up on the event loop puts them in a
dict (digest -> offset, a tombstone as ``-2 - offset``) that readers look at first and a
worker thread merges once it is large. Tombstones leave at a merge (an absent key and a
deleted one read the same).

Entries are hints a reader verifies against the record at the offset
(:meth:`KeyMap.verify`):

* the offset below the log start offset: retention removed the key's latest record, so
  no record of the key is left at all -- the key is absent;
* no record at the offset, or one with another key (the log changed in a way the map did
  not see; or two keys with the same 128-bit digest, which is never expected to happen:
  about 10^-27 for 10^6 keys): the reader calls :meth:`KeyMap.rescan`, one scan of the
  log for that key, which also repairs the entry.

What the cleaner does never needs a call here: it keeps every key's latest record at its
offset (batches keep their offsets), so live entries stay right; a tombstone it removes
was already absent from the map (or is dropped at the next merge, reading the same
meanwhile); aborted records were never in it. :meth:`KeyMap.after_cleaning` only spares a
needless rebuild at the next start (the saved identity batch may have been rewritten).

Growth: :meth:`KeyMap.catch_up` reads only the batches appended since it last ran
(up to the last stable offset); the append path pays nothing (:meth:`KeyMaps.maintain`
and the readers call it). A log that shrank under the map (truncation) or whose log start offset
moved below where the map began (an older backup restored) is rebuilt by one scan,
logged once.

Persistence: :meth:`KeyMap.save` writes the file ``kafkafs-keymap`` in the partition
dir (a regular file, written atomically through :mod:`~kafkafs.log.safeio`; a broker
ignores it: Kafka's ``LogLoader`` acts only on ``.log``/index/``.deleted``/``.cleaned``/
``.swap`` names and ``LogManager`` loads only directories). It records the offset it
covers, the log start offset it began at, the topic id and the last batch read (base
and last offset, CRC); :meth:`KeyMap.open` uses it only when all of these still match
the log, else the map is rebuilt (logged once).

Thread safety: lookups take a short lock; one catch-up, merge, rescan or save runs at a
time (:attr:`KeyMap.busy`). No trio, no errno here.
"""

from __future__ import annotations

import hashlib
import json
import logging
import struct
import threading
import time
from collections.abc import Callable

from crc32c import crc32c

from ..record.errors import CorruptRecordError
from . import checkpoint as ckpt
from .errors import LogError, OffsetOutOfRangeError, report_damage
from .log import Log

log = logging.getLogger(__name__)

__all__ = ["KEYMAP_FILE", "KeyMap", "KeyMaps", "key_digest"]

KEYMAP_FILE = "kafkafs-keymap"
_MAGIC = b"KFSKEYS1"
_HEAD = struct.Struct("<8sI")  # magic, JSON header length
_VERSION = 1
MERGE_MIN = 65536  # a dict of changes this large is merged, whatever the arrays' size
LAG_MAX = 1 << 22  # offsets a map in use may lag behind a busy log (KeyMaps.maintain)
LAG_SMALL = 1 << 14  # a lag read at once even while the log is busy (a trickle of appends)
_SCAN_ATTEMPTS = 5  # scans for a key a changing segment list may cut short (KeyMap.rescan)
_PARTITION_METADATA = "partition.metadata"


def key_digest(key: bytes) -> bytes:
    """The 16-byte BLAKE2b digest identifying ``key`` in a :class:`KeyMap` (and in the key
    view's names for keys too long to show)."""
    return hashlib.blake2b(key, digest_size=16).digest()


def _halves(digest: bytes) -> tuple[int, int]:
    return int.from_bytes(digest[:8], "little"), int.from_bytes(digest[8:], "little")


def _tomb(offset: int) -> int:
    return -2 - offset


_ABSENT = -1  # a change: the key has no record at all (found by a rescan)


class _Numpy:
    """numpy, imported at its first use: a mount whose key view is never used does not
    pay for it (about 10 MB of memory and 0.2 s of start-up)."""

    def __getattr__(self, name):
        import numpy

        globals()["np"] = numpy
        return getattr(numpy, name)


np = _Numpy()


def _empty():
    return (np.zeros(0, np.uint64), np.zeros(0, np.uint64), np.zeros(0, np.int64))


class KeyMap:
    """The latest committed offset of every live key of one partition (module docstring).

    Build with :meth:`open`. ``start_offset``: the log start offset the map began at;
    ``end_offset``: every batch below it has been read (a batch boundary, at most the last
    stable offset); ``source``: ``"loaded"`` (from the saved file) or ``"built"``.
    """

    def __init__(self, topic: str, partition: int, start_offset: int):
        self.topic = topic
        self.partition = partition
        self.name = f"{topic}-{partition}"
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.last_batch: tuple[int, int, int] | None = None  # (base, last, crc) read last
        self.source = "built"
        self.rebuild_reason: str | None = None  # set when the next catch-up must rebuild
        self._arrays = _empty()  # (h1, h2, offset), sorted by (h1, h2); live keys only
        self._delta: dict[bytes, int] = {}  # digest -> offset, or _tomb(offset)
        self._frozen: dict[bytes, int] = {}  # the delta being merged (read between the two)
        self._lock = threading.Lock()  # short: lookups and swaps
        self._update = threading.Lock()  # one catch-up / merge / rescan / save at a time
        self._saved_end: int | None = None  # end_offset of the last save or load
        self._warned_rescan = False
        self._damage: str | None = None
        self._seen_end = -1  # the log end offset at the last KeyMaps.maintain

    # -- state --------------------------------------------------------------------------
    @property
    def busy(self) -> bool:
        """Whether a catch-up, merge, rescan or save is running (a caller on an event loop
        then hands its own call to a thread instead of waiting)."""
        return self._update.locked()

    def __len__(self) -> int:
        """Keys in the arrays plus changes not merged yet (an estimate of live keys)."""
        return len(self._arrays[0]) + len(self._frozen) + len(self._delta)

    def nbytes(self) -> int:
        """Memory of the arrays (bytes)."""
        return sum(a.nbytes for a in self._arrays)

    def pending(self, lg: Log) -> int:
        """How many offsets of ``lg`` the map has yet to read (a large number when it must
        be rebuilt): 0 means up to date with the last stable offset."""
        if self.rebuild_reason is not None or self._shrunk(lg) is not None:
            return max(1, lg.log_end_offset - lg.log_start_offset) + (1 << 40)
        return max(0, lg.last_stable_offset - self.end_offset)

    def _shrunk(self, lg: Log) -> str | None:
        if lg.log_end_offset < self.end_offset:
            return (f"the log ends at offset {lg.log_end_offset}, before offset "
                    f"{self.end_offset} the map covers (truncated)")
        if lg.log_start_offset < self.start_offset:
            return (f"the log start offset {lg.log_start_offset} is below offset "
                    f"{self.start_offset} where the map began (older data restored)")
        return None

    # -- lookups ------------------------------------------------------------------------
    def get(self, key: bytes) -> int | None:
        """The offset of ``key``'s latest record, None when the key is absent (never
        written in the part of the log read, or its latest record is a tombstone). A hint:
        check it with :meth:`verify`."""
        return self.get_digest(key_digest(key))

    def get_digest(self, digest: bytes) -> int | None:
        """:meth:`get` by the key's digest (:func:`key_digest`)."""
        with self._lock:
            v = self._delta.get(digest)
            if v is None:
                v = self._frozen.get(digest)
            h1s, h2s, offs = self._arrays
        if v is not None:
            return v if v >= 0 else None
        h1, h2 = _halves(digest)
        i = int(np.searchsorted(h1s, np.uint64(h1)))
        n = len(h1s)
        while i < n and int(h1s[i]) == h1:
            if int(h2s[i]) == h2:
                return int(offs[i])
            i += 1
        return None

    def latest_offset(self, digest: bytes) -> int | None:
        """The offset of the latest record -- a tombstone too, while it has not been merged
        away -- of the key with ``digest`` (how the key view finds the bytes of a key it
        knows only by digest)."""
        with self._lock:
            v = self._delta.get(digest)
            if v is None:
                v = self._frozen.get(digest)
        if v is not None:
            return v if v >= 0 else (None if v == _ABSENT else -2 - v)
        return self.get_digest(digest)

    @staticmethod
    def verify(lg: Log, offset: int, read: Callable[[Log, int], tuple | None],
               matches: Callable[[bytes | None], bool]) -> str:
        """Check an entry against the log: ``"ok"`` when ``read(lg, offset)`` -- a
        ``(record, ...)`` tuple or None, as :meth:`kafkafs.fs.cache.BatchCache.record` --
        gives a record whose key ``matches``; ``"gone"`` when the offset is below the log
        start offset (the key is absent: see the module docstring); ``"stale"`` otherwise
        (call :meth:`rescan`). Raises CorruptRecordError from ``read``."""
        if offset < lg.log_start_offset:
            return "gone"
        try:
            found = read(lg, offset)
        except OffsetOutOfRangeError:  # retention moved the log start meanwhile, or truncation
            return "gone" if offset < lg.log_start_offset else "stale"
        if found is None or not matches(found[0].key):
            return "stale"
        return "ok"

    def live_offsets(self, lg: Log | None = None) -> np.ndarray:
        """The offsets of every live key's latest record, sorted (int64). Merges pending
        changes first (call from a worker thread: up to a few hundred ms for 10^6 keys)."""
        with self._update:
            self._merge()
            offs = self._arrays[2]
        out = np.sort(offs)
        if lg is not None:  # retention may have removed some since
            out = out[np.searchsorted(out, lg.log_start_offset):]
        return out

    # -- growing ------------------------------------------------------------------------
    def catch_up(self, lg: Log, *, blocking: bool = True, merge: bool = True) -> int | None:
        """Read the batches of ``lg`` from :attr:`end_offset` up to its last stable offset
        (rebuilding from the log start first when the log shrank under the map or a
        rebuild is due, logged once). ``blocking=False``: return None at once when another
        update is running. ``merge``: merge the changes into the arrays when they are many
        (not on an event loop: up to a few hundred ms). Returns the records read.

        A damaged batch ends the catch-up there (logged once): the map covers what lies
        before it, as every reader of the log does."""
        if not self._update.acquire(blocking):
            return None
        try:
            reason = self.rebuild_reason or self._shrunk(lg)
            if reason is not None:
                self._reset(lg, reason)
            t0 = time.monotonic()
            n = self._read(lg, merge)
            if reason is not None:
                self._merge()
                log.info("Key map of %s built: %d keys up to offset %d in %.1f s",
                         self.name, len(self), self.end_offset, time.monotonic() - t0)
            elif merge and len(self._delta) >= self._merge_at():
                self._merge()
            return n
        finally:
            self._update.release()

    def _reset(self, lg: Log, reason: str) -> None:
        log.info("Key map of %s: %s; building it by one scan of the log", self.name, reason)
        with self._lock:
            self._arrays = _empty()
            self._delta = {}
            self._frozen = {}
            self.start_offset = self.end_offset = lg.log_start_offset
            self.last_batch = None
            self.rebuild_reason = None
            self.source = "built"
            self._damage = None

    def _read(self, lg: Log, merge: bool) -> int:
        """Read the batches from :attr:`end_offset` to the last stable offset. The changes
        are gathered as digests and offsets in log order, a chunk at a time; each chunk
        goes into the arrays by a merge (``merge``: from a worker thread; no dict entry
        per key, so a build of 10^6 keys never holds 10^6 Python objects) or into the
        dict of changes (a small catch-up on an event loop)."""
        end = lg.last_stable_offset
        start = self.end_offset
        if start >= end:
            return 0
        aborted = lg.committed_filter(start, end)
        digest = key_digest
        n = 0
        digests = bytearray()
        offsets: list[int] = []
        last = None
        try:
            for batch in lg.batches(start):
                if batch.base_offset >= end or batch.last_offset >= end:
                    break
                if not batch.is_control and not aborted.is_aborted(batch):
                    records = batch.record_tuples()
                    n += len(records)
                    if batch.base_offset < start:
                        records = [r for r in records if r[0] >= start]
                    keyed = [r for r in records if r[2] is not None]
                    digests += b"".join([digest(r[2]) for r in keyed])
                    offsets += [r[0] if r[3] is not None else -2 - r[0] for r in keyed]
                last = (batch.base_offset, batch.last_offset, batch.crc)
                if merge and len(offsets) >= self._merge_at():
                    self._take(digests, offsets, last, True)
                    digests, offsets = bytearray(), []
        except CorruptRecordError as exc:
            if str(exc) != self._damage:
                self._damage = str(exc)
                report_damage(exc)  # once, whoever of the readers meets it first
        if last is not None:  # a small rest goes to the dict (merged once it is large)
            self._take(digests, offsets, last, merge and len(offsets) >= self._merge_at())
        return n

    def _merge_at(self) -> int:
        """Changes worth a merge of the arrays: a quarter of their size (so merging costs
        a constant factor per change), at least ``MERGE_MIN``."""
        return max(MERGE_MIN, len(self._arrays[0]) // 4)

    def _take(self, digests: bytearray, offsets: list[int], last: tuple[int, int, int],
              merge: bool) -> None:
        """Make a chunk of changes visible and the map cover up to ``last`` (the last batch
        read), at once for readers."""
        if merge:
            self._merge((bytes(digests), np.array(offsets, np.int64)), last)
            return
        view = memoryview(digests)
        changes = {bytes(view[16 * i:16 * i + 16]): off for i, off in enumerate(offsets)}
        with self._lock:
            self._delta.update(changes)
            self.last_batch = last
            self.end_offset = last[1] + 1

    def _merge(self, chunk: tuple[bytes, np.ndarray] | None = None,
               last: tuple[int, int, int] | None = None) -> None:
        """Merge the dict of changes, then ``chunk`` (digests and offsets in log order),
        into the arrays (caller holds ``_update``); with ``last``, the map then covers up
        to that batch. Equal keys keep the newest entry; tombstones go (:func:`_merged`)."""
        with self._lock:
            if not self._delta and chunk is None:
                return
            self._frozen, self._delta = self._delta, {}
            frozen = self._frozen
            arrays = self._arrays
        changes = []
        for keys, vals in ((b"".join(frozen), frozen.values()), chunk or (b"", ())):
            if keys:
                halves = np.frombuffer(keys, dtype="<u8").reshape(-1, 2)
                changes.append((halves[:, 0], halves[:, 1], vals if isinstance(vals, np.ndarray)
                                else np.fromiter(vals, np.int64, len(halves))))
        del frozen
        arrays = _merged(arrays, *(np.concatenate([c[i] for c in changes]) for i in range(3)))
        with self._lock:
            self._arrays = arrays
            self._frozen = {}
            if last is not None:
                self.last_batch = last
                self.end_offset = last[1] + 1

    def merge(self) -> None:
        """Merge pending changes into the arrays now (a worker thread's job)."""
        with self._update:
            self._merge()

    def rescan(self, lg: Log, matches: Callable[[bytes], bool], digest: bytes) -> int | None:
        """Find the latest committed record of the key that ``matches`` (with ``digest``)
        by one scan of the log up to :attr:`end_offset`, and repair its entry. Returns its
        offset, None when the key is absent (latest record a tombstone, or none).
        Raises CorruptRecordError at damage."""
        with self._update:
            if not self._warned_rescan:
                self._warned_rescan = True
                log.warning("Key map of %s: an entry did not match the record at its offset; "
                            "scanning the log for that key (logged once per partition)",
                            self.name)
            end = self.end_offset
            for _attempt in range(_SCAN_ATTEMPTS):
                found, complete = self._scan_for(lg, matches, end)
                if complete:
                    break
            else:
                raise LogError(f"the segments of {lg.name} kept changing under a scan for a key")
            with self._lock:
                self._delta[digest] = _ABSENT if found is None else found
            return found if found is not None and found >= 0 else None

    @staticmethod
    def _scan_for(lg: Log, matches: Callable[[bytes], bool], end: int):
        """``(entry, complete)``: the latest committed record below ``end`` of the key that
        ``matches`` (its offset, a tombstone's as ``-2 - offset``, None for no record), and
        whether the scan reached ``end`` (a segment swapped or deleted under it ends the
        iteration early: the caller scans again)."""
        start = lg.log_start_offset
        aborted = lg.committed_filter(start, end)
        found: int | None = None
        reached = start
        for batch in lg.batches(start):
            if batch.base_offset >= end:
                return found, True
            reached = batch.next_offset
            if batch.is_control or aborted.is_aborted(batch):
                continue
            for r in batch.record_tuples():
                if r[2] is not None and r[0] >= start and matches(r[2]):
                    found = r[0] if r[3] is not None else _tomb(r[0])
        return found, reached >= end or lg.log_end_offset <= reached

    def after_cleaning(self, lg: Log) -> None:
        """The cleaner rewrote segments of ``lg`` (offsets kept): take the identity batch
        anew, so that a saved map still matches at the next start. Never needed for
        correctness (module docstring)."""
        with self._update:
            if self.last_batch is None:
                return
            try:
                batch = lg.batch_for(self.last_batch[1])
            except (LogError, CorruptRecordError, OSError):
                return
            if batch is not None and batch.last_offset == self.last_batch[1]:
                with self._lock:
                    self.last_batch = (batch.base_offset, batch.last_offset, batch.crc)
                self._saved_end = None  # save again

    # -- persistence --------------------------------------------------------------------
    @property
    def changed(self) -> bool:
        """Whether the map covers more than it did at its last save or load."""
        return self._saved_end != self.end_offset

    def save(self, lg: Log) -> bool:
        """Write the map to ``kafkafs-keymap`` in the log's partition dir, atomically and
        durably (merging pending changes first). Nothing on a read-only log, or when
        nothing changed since the last save. Returns whether it wrote. Raises OSError."""
        if not lg.writable:
            return False
        with self._update:
            if not self.changed or self.rebuild_reason is not None:
                return False
            self._merge()
            h1s, h2s, offs = self._arrays
            header = {
                "version": _VERSION, "topic": self.topic, "partition": self.partition,
                "topic_id": _topic_id(lg), "start_offset": self.start_offset,
                "end_offset": self.end_offset, "last_batch": self.last_batch,
                "count": len(h1s),
            }
            head = json.dumps(header, separators=(",", ":")).encode()
            head += b" " * (-(len(head) + _HEAD.size) % 8)  # the arrays 8-byte aligned
            n = len(h1s)
            top = _HEAD.size + len(head)
            buf = np.empty(top + 24 * n + 4, np.uint8)
            buf[:top] = np.frombuffer(_HEAD.pack(_MAGIC, len(head)) + head, np.uint8)
            for i, arr in enumerate((h1s, h2s, offs)):
                buf[top + 8 * n * i: top + 8 * n * (i + 1)] = arr.astype("<u8" if i < 2 else "<i8", copy=False).view(np.uint8)
            buf[-4:] = np.frombuffer(struct.pack("<I", crc32c(buf[:-4])), np.uint8)
            lg.pdir.atomic_write(KEYMAP_FILE, memoryview(buf))
            self._saved_end = self.end_offset
            return True

    @classmethod
    def open(cls, lg: Log) -> KeyMap:
        """The key map of ``lg``: the saved one when it matches the log (logged), else an
        empty one that the first :meth:`catch_up` builds by one scan (the reason
        logged then). Reads the file (up to 24 bytes per key): call from a worker thread."""
        km = cls(lg.topic, lg.partition, lg.log_start_offset)
        try:
            data = lg.pdir.read(KEYMAP_FILE)
        except FileNotFoundError:
            km.rebuild_reason = "no saved key map"
            return km
        except OSError as exc:
            km.rebuild_reason = f"cannot read {KEYMAP_FILE}: {exc}"
            return km
        try:
            km._load(lg, data)
        except _Mismatch as exc:
            km.rebuild_reason = f"the saved key map does not match the log: {exc}"
        return km

    def _load(self, lg: Log, data: bytes) -> None:
        if len(data) < _HEAD.size + 4:
            raise _Mismatch("the file is too short")
        magic, hlen = _HEAD.unpack_from(data)
        if magic != _MAGIC:
            raise _Mismatch("not a kafkafs key map file")
        if struct.unpack_from("<I", data, len(data) - 4)[0] != crc32c(memoryview(data)[:-4]):
            raise _Mismatch("checksum mismatch (a damaged file)")
        try:
            h = json.loads(data[_HEAD.size:_HEAD.size + hlen])
            n = int(h["count"])
            start, end = int(h["start_offset"]), int(h["end_offset"])
            last = h["last_batch"]
        except (ValueError, KeyError, TypeError) as exc:
            raise _Mismatch(f"unreadable header ({exc})") from None
        top = _HEAD.size + hlen
        if h.get("version") != _VERSION or top + 24 * n + 4 != len(data):
            raise _Mismatch("unknown version or size")
        if (h.get("topic"), h.get("partition")) != (lg.topic, lg.partition):
            raise _Mismatch(f"it belongs to {h.get('topic')}-{h.get('partition')}")
        tid = _topic_id(lg)
        if tid is not None and h.get("topic_id") not in (None, tid):
            raise _Mismatch("another topic id (the topic was deleted and made again)")
        if lg.log_start_offset < start:
            raise _Mismatch(f"the log start offset {lg.log_start_offset} is below {start} "
                            "(older data restored)")
        if lg.log_end_offset < end:
            raise _Mismatch(f"the log ends at {lg.log_end_offset}, before {end} (truncated)")
        if last is not None:
            if end <= lg.log_start_offset:
                raise _Mismatch("every record it covers is gone")
            try:
                batch = lg.batch_for(int(last[1]))
            except (LogError, CorruptRecordError, OSError) as exc:
                raise _Mismatch(f"its last batch cannot be read ({exc})") from None
            if batch is None or [batch.base_offset, batch.last_offset, batch.crc] != list(last):
                raise _Mismatch(f"the batch ending at offset {last[1]} differs")
            last = tuple(int(x) for x in last)
        elif end != start:
            raise _Mismatch("no last batch")
        arrays = tuple(np.frombuffer(data, dt, n, top + 8 * n * i)
                       for i, dt in enumerate(("<u8", "<u8", "<i8")))
        self._arrays = arrays
        self.start_offset, self.end_offset, self.last_batch = start, end, last
        self._saved_end = end
        self.source = "loaded"
        log.info("Key map of %s loaded: %d keys up to offset %d", self.name, n, end)


def _merged(arrays, c1: np.ndarray, c2: np.ndarray, coff: np.ndarray):
    """The arrays ``(h1, h2, offset)`` (sorted by ``(h1, h2)``, one entry per live key)
    with the changes ``c1, c2, coff`` (in log order; a tombstone's offset negative)
    applied: the newest change of each key replaces its entry, a tombstone removes it.

    The changes alone are sorted (a stable sort: equal keys stay in log order, the last
    wins) and merged into the sorted arrays by position -- O(n + m log m) for m changes
    into n entries. Two different keys with the same ``h1`` (about 10^-8 in a map of 10^6
    keys) take the plain way instead: everything sorted together."""
    h1s, h2s, offs = arrays
    order = np.lexsort((c2, c1))
    c1, c2, coff = c1[order], c2[order], coff[order]
    newest = np.ones(len(c1), bool)
    newest[:-1] = (c1[1:] != c1[:-1]) | (c2[1:] != c2[:-1])
    c1, c2, coff = c1[newest], c2[newest], coff[newest]
    n = len(h1s)
    pos = np.searchsorted(h1s, c1)
    inside = pos < n
    same1 = np.zeros(len(c1), bool)
    same1[inside] = h1s[pos[inside]] == c1[inside]
    match = same1.copy()
    match[same1] = h2s[pos[same1]] == c2[same1]
    if (same1 & ~match).any():  # an h1 shared by two keys: sort everything together
        h1 = np.concatenate((h1s, c1))
        h2 = np.concatenate((h2s, c2))
        off = np.concatenate((offs, coff))
        order = np.lexsort((h2, h1))  # stable: a change sorts after the entry it replaces
        h1, h2, off = h1[order], h2[order], off[order]
        keep = np.ones(len(h1), bool)
        keep[:-1] = (h1[1:] != h1[:-1]) | (h2[1:] != h2[:-1])
        keep &= off >= 0
        return h1[keep], h2[keep], off[keep]
    live = coff >= 0
    off = offs.copy()
    replace = match & live
    off[pos[replace]] = coff[replace]
    keep = np.ones(n, bool)
    keep[pos[match & ~live]] = False  # deleted keys
    new = ~match & live
    at = pos[new]
    h1 = np.insert(h1s, at, c1[new])
    h2 = np.insert(h2s, at, c2[new])
    off = np.insert(off, at, coff[new])
    keep = np.insert(keep, at, True)
    if keep.all():
        return h1, h2, off
    return h1[keep], h2[keep], off[keep]


class _Mismatch(Exception):
    """A saved key map that cannot be used (the message says why)."""


def _topic_id(lg: Log) -> str | None:
    try:
        return ckpt.read_partition_metadata(lg.pdir.join(_PARTITION_METADATA), dir=lg.pdir)
    except (OSError, LogError, ValueError):  # missing or damaged: no identity to compare
        return None


class KeyMaps:
    """The key maps of every partition whose key view was used, made on first use
    (:meth:`get`, from a worker thread: it may read the saved file). A partition made
    again (a new :class:`Log` object) gets a new map. ``stats``: how many maps were
    ``loaded`` from their file and ``built`` by a scan."""

    def __init__(self):
        self._maps: dict[tuple[str, int], tuple[Log, KeyMap]] = {}
        self._lock = threading.Lock()
        self.stats = {"loaded": 0, "built": 0}

    def __len__(self) -> int:
        return len(self._maps)

    def peek(self, lg: Log) -> KeyMap | None:
        """The map of ``lg`` if it exists already (no I/O)."""
        found = self._maps.get((lg.topic, lg.partition))
        return found[1] if found is not None and found[0] is lg else None

    def get(self, lg: Log) -> KeyMap:
        """The map of ``lg``, opened (:meth:`KeyMap.open`) on first use."""
        km = self.peek(lg)
        if km is not None:
            return km
        with self._lock:
            km = self.peek(lg)
            if km is None:
                km = KeyMap.open(lg)
                self.stats["loaded" if km.source == "loaded" else "built"] += 1
                self._maps[(lg.topic, lg.partition)] = (lg, km)
        return km

    def open_saved(self, logs) -> int:
        """Open the map of every log in ``logs`` that has a saved one (a key view in use
        before a restart is in use after it: loaded before the cleaner rewrites the batch
        it was saved at, and ready for the first read). Returns how many. A worker
        thread's job (the daemon calls it at start)."""
        n = 0
        for lg in list(logs):
            try:
                if not lg.closed and lg.pdir.is_file(KEYMAP_FILE):
                    self.get(lg)
                    n += 1
            except OSError as exc:
                log.warning("Key map of %s: %s", lg.name, exc)
        return n

    def after_cleaning(self, lg: Log) -> None:
        """The cleaner finished a pass on ``lg``: see :meth:`KeyMap.after_cleaning` (a map
        not open here is checked when it is loaded, and rebuilt if the pass rewrote the
        batch it was saved at)."""
        km = self.peek(lg)
        if km is not None:
            km.after_cleaning(lg)

    def caught_up(self, lg: Log) -> KeyMap:
        """:meth:`get` then :meth:`KeyMap.catch_up` (a worker thread's call)."""
        km = self.get(lg)
        km.catch_up(lg)
        return km

    def forget(self, topic: str, partition: int | None = None) -> None:
        """Drop the maps of a deleted topic (or one partition)."""
        with self._lock:
            for tp in [tp for tp in self._maps
                       if tp[0] == topic and partition in (None, tp[1])]:
                del self._maps[tp]

    def maintain(self, save: bool = False, catch_up: bool = True) -> int:
        """Bring the maps up to their logs' last stable offsets -- those whose log has been
        quiet since the previous call, that lag by at most ``LAG_SMALL`` offsets, or by more
        than ``LAG_MAX``: reading the new batches costs CPU (and the GIL) that a stream of
        appends would miss (about 3 s per 10^6 records), so under a stream it waits for a
        pause unless the lag grows large; a reader needing a map catches it up itself --
        and merge large changes; with ``save`` write the maps that changed
        (:meth:`KeyMap.save`; a failure logged). Returns the maps saved. A worker thread's
        job (the daemon calls it every second)."""
        saved = 0
        for lg, km in list(self._maps.values()):
            if lg.closed:
                continue
            try:
                end, km._seen_end = km._seen_end, lg.log_end_offset
                lag = km.pending(lg)
                if catch_up and lag and (end == lg.log_end_offset or lag <= LAG_SMALL
                                         or lag > LAG_MAX):
                    km.catch_up(lg)
                elif len(km._delta) >= km._merge_at():
                    km.merge()
                if save and km.save(lg):
                    saved += 1
            except (OSError, LogError, CorruptRecordError) as exc:
                log.warning("Key map of %s: %s", km.name, exc)
        return saved
