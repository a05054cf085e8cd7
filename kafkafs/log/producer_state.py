"""Producer state: ``<20-digit offset>.snapshot`` files and the state they hold.

Follows Apache Kafka's ``ProducerStateManager``, ``ProducerStateEntry``, ``BatchMetadata``,
``ProducerAppendInfo``, ``TxnMetadata``, ``CompletedTxn`` and ``SnapshotFile`` (storage
module) and the segment's ``updateProducerState`` (``LogSegment``).

Snapshot file (schema version 1, big-endian; docs/design.md §2.2)::

    version i16 (1) · crc u32 · count i32 · count x entry (46 bytes):
      producer_id i64 · epoch i16 · last_sequence i32 · last_offset i64 · offset_delta i32 ·
      timestamp i64 · coordinator_epoch i32 · current_txn_first_offset i64 (-1: none)

The CRC is CRC-32C over every byte after the crc field (``[6, end)``). A snapshot named
``N.snapshot`` holds the state of every producer after applying all batches below offset N.
``last_offset`` is the producer's last *data* offset (-1 when its only entries are markers),
``offset_delta`` that batch's ``lastOffset - baseOffset``, ``timestamp`` the producer's last
timestamp.

:class:`ProducerStateManager` rebuilds the state from batches in offset order the way Kafka
does while loading a log (``AppendOrigin.REPLICATION``: no sequence or epoch validation),
tracks ongoing transactions, and on a COMMIT/ABORT marker completes the transaction; an
aborted one becomes the :class:`~kafkafs.log.txnindex.AbortedTxn` for the segment's
transaction index, with Kafka's last stable offset.

Producer ids expire as in Kafka (:meth:`ProducerStateManager.remove_expired_producers`,
``producer.id.expiration.ms``): the daemon runs it every
``producer.id.expiration.check.interval.ms``, and ``LogManager.startup`` right after loading
(where Kafka skips the expired entries of the snapshot it loads). As in Kafka, a snapshot
file keeps them until one is taken at a later offset.

Not here (kafkafs has no network, replication or coordinator): duplicate detection over the
last 5 batches, client-side validation, transaction verification state, and the
high-watermark bookkeeping of completed but unreplicated transactions (the last stable
offset here is the first undecided offset).

Where this differs from Kafka, on purpose: :func:`write_snapshot` writes ``<file>.tmp``,
fsyncs it, renames it over the file and fsyncs the directory (Kafka writes the file in place),
so a crash never leaves a torn snapshot under the real name. The bytes are the same.
"""

from __future__ import annotations

import bisect
import dataclasses
import os
import re
import struct
import types
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from crc32c import crc32c

from ..record.control import ABORT, end_txn_marker
from ..record.errors import CorruptRecordError
from . import safeio
from .checkpoint import atomic_write
from .errors import LogError, ReadOnlyLogError
from .names import DELETED_SUFFIX, SNAPSHOT_SUFFIX, filename_prefix
from .txnindex import AbortedTxn

__all__ = [
    "ENTRY_SIZE",
    "SNAPSHOT_VERSION",
    "CompletedTxn",
    "CorruptSnapshotError",
    "InvalidTxnStateError",
    "ProducerStateEntry",
    "ProducerStateManager",
    "TxnMetadata",
    "decode_snapshot",
    "delete_snapshots_after",
    "delete_snapshots_before",
    "encode_snapshot",
    "fsync_snapshot",
    "latest_snapshot",
    "list_snapshot_files",
    "mark_snapshot_file_deleted",
    "parse_snapshot_filename",
    "read_snapshot",
    "snapshot_filename",
    "snapshot_path",
    "take_snapshot",
    "write_snapshot",
]

SNAPSHOT_VERSION = 1
_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_ENTRY = struct.Struct(">qhiqiqiq")
ENTRY_SIZE = _ENTRY.size  # 46
CRC_OFFSET = 2
ENTRIES_OFFSET = 6  # the CRC covers [6, end)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
_INT_MAX = 0x7FFFFFFF
_SNAPSHOT_NAME = re.compile(r"^(\d+)\.snapshot$")


# -- errors -----------------------------------------------------------------------------
class CorruptSnapshotError(LogError):
    """A producer-state snapshot cannot be read (Kafka ``CorruptSnapshotException``).

    Attributes: ``path`` (the file, or None for bytes), ``reason`` (Kafka's words).
    """

    def __init__(self, reason: str, path: str | None = None):
        self.reason = reason
        self.path = path
        super().__init__(f"{path}: {reason}" if path else reason)


class InvalidTxnStateError(LogError):
    """A producer with an ongoing transaction wrote a non-transactional batch (Kafka
    ``InvalidTxnStateException``, raised even while loading a log)."""


# -- values -----------------------------------------------------------------------------
def _decrement_sequence(sequence: int, decrement: int) -> int:
    """``DefaultRecordBatch.decrementSequence``: wraps below 0 to Integer.MAX_VALUE."""
    if sequence < decrement:
        return _INT_MAX - (decrement - sequence) + 1
    return sequence - decrement


@dataclasses.dataclass(frozen=True)
class ProducerStateEntry:
    """The state of one producer id (Kafka ``ProducerStateEntry`` with its last
    ``BatchMetadata``); fields in the snapshot's order.

    ``producer_id``; ``producer_epoch`` (i16, -1 unknown); ``last_sequence`` (i32, -1 none);
    ``last_offset`` (the last data offset, -1 when there is no batch metadata: the producer
    only wrote markers, or its epoch changed since); ``offset_delta`` (that batch's
    ``lastOffset - baseOffset``, 0 without metadata); ``last_timestamp`` (ms, the last batch's
    max timestamp or the last marker's timestamp; -1 none); ``coordinator_epoch`` (i32, -1
    none); ``current_txn_first_offset`` (first offset of the ongoing transaction, or None).
    """

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_sequence: int = NO_SEQUENCE
    last_offset: int = -1
    offset_delta: int = 0
    last_timestamp: int = NO_TIMESTAMP
    coordinator_epoch: int = -1
    current_txn_first_offset: int | None = None

    @classmethod
    def empty(cls, producer_id: int) -> ProducerStateEntry:
        """A producer seen for the first time (``ProducerStateEntry.empty``)."""
        return cls(producer_id)

    @property
    def has_batch_metadata(self) -> bool:
        """True when the entry knows a data batch (``!isEmpty()``)."""
        return self.last_offset >= 0

    @property
    def first_sequence(self) -> int:
        """First sequence of the last batch (``BatchMetadata.firstSeq``), -1 without one."""
        if not self.has_batch_metadata:
            return NO_SEQUENCE
        return _decrement_sequence(self.last_sequence, self.offset_delta)

    @property
    def first_data_offset(self) -> int:
        """First offset of the last batch (``BatchMetadata.firstOffset``), -1 without one."""
        return self.last_offset - self.offset_delta if self.has_batch_metadata else -1

    def with_epoch(self, producer_epoch: int) -> ProducerStateEntry:
        """This entry under ``producer_epoch``: a new epoch forgets the batch metadata
        (``maybeUpdateProducerEpoch``)."""
        if producer_epoch == self.producer_epoch:
            return self
        return dataclasses.replace(self, producer_epoch=producer_epoch,
                                   last_sequence=NO_SEQUENCE, last_offset=-1, offset_delta=0)


class TxnMetadata(NamedTuple):
    """An ongoing transaction (Kafka ``TxnMetadata``): ``producer_id``, ``first_offset``."""

    producer_id: int
    first_offset: int


class CompletedTxn(NamedTuple):
    """A transaction ended by a marker (Kafka ``CompletedTxn``): ``producer_id``,
    ``first_offset`` (its first data offset), ``last_offset`` (the marker's offset),
    ``is_aborted``."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


# -- snapshot files ---------------------------------------------------------------------
def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    """The bytes of a snapshot holding ``entries`` in the given order
    (``ProducerStateManager.writeSnapshot``), CRC filled in. Raises ValueError for a field
    outside its type's range."""
    parts = []
    for e in entries:
        txn = -1 if e.current_txn_first_offset is None else e.current_txn_first_offset
        try:
            parts.append(_ENTRY.pack(e.producer_id, e.producer_epoch, e.last_sequence,
                                     e.last_offset, e.offset_delta, e.last_timestamp,
                                     e.coordinator_epoch, txn))
        except struct.error as exc:
            raise ValueError(f"cannot encode {e!r}: {exc}") from None
    body = struct.pack(">i", len(parts)) + b"".join(parts)
    return struct.pack(">hI", SNAPSHOT_VERSION, crc32c(body)) + body


def decode_snapshot(data, path: str | None = None) -> list[ProducerStateEntry]:
    """The entries of a snapshot's bytes (``ProducerStateManager.readSnapshot``).

    Checks in Kafka's order: the schema (the header and ``count`` whole entries must be
    there; bytes after them are allowed but covered by the CRC), the version (1), the CRC-32C
    of ``data[6:]``. An entry whose ``last_offset`` is negative carries no batch metadata
    (sequence -1, offset delta 0), as Kafka reads it. Raises CorruptSnapshotError (naming
    ``path``) with Kafka's message.
    """
    data = bytes(data)
    if len(data) < _HEADER.size:
        field = "version" if len(data) < 2 else "crc" if len(data) < 6 else "producer_entries"
        raise CorruptSnapshotError(
            f"Snapshot failed schema validation: Error reading field '{field}': "
            f"{len(data)} bytes is shorter than the {_HEADER.size}-byte header", path)
    version, crc, count = _HEADER.unpack_from(data)
    remaining = len(data) - _HEADER.size
    if count < 0:
        raise CorruptSnapshotError(
            f"Snapshot failed schema validation: Error reading field 'producer_entries': "
            f"Array size {count} cannot be negative", path)
    if count * ENTRY_SIZE > remaining:
        raise CorruptSnapshotError(
            f"Snapshot failed schema validation: Error reading field 'producer_entries': "
            f"{count} entries take {count * ENTRY_SIZE} bytes, only {remaining} bytes "
            f"available", path)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"Snapshot contained an unknown file version {version}", path)
    computed = crc32c(memoryview(data)[ENTRIES_OFFSET:])
    if crc != computed:
        raise CorruptSnapshotError(f"Snapshot is corrupt (CRC is no longer valid). Stored crc: "
                                   f"{crc}. Computed crc: {computed}", path)
    out = []
    for i in range(count):
        (pid, epoch, seq, offset, delta, ts, coord,
         txn) = _ENTRY.unpack_from(data, _HEADER.size + i * ENTRY_SIZE)
        if offset < 0:
            seq, offset, delta = NO_SEQUENCE, -1, 0
        out.append(ProducerStateEntry(pid, epoch, seq, offset, delta, ts, coord,
                                      txn if txn >= 0 else None))
    return out


def read_snapshot(path, *, dir: safeio.Dir | None = None) -> list[ProducerStateEntry]:
    """The entries of the snapshot file at ``path`` (``ProducerStateManager.readSnapshot``;
    ``dir``: the open partition dir holding it, see :func:`~kafkafs.log.checkpoint.atomic_write`).

    Raises CorruptSnapshotError naming the file (see :func:`decode_snapshot`), OSError
    (FileNotFoundError... also for a link or special file) when it cannot be read.
    """
    path = os.fspath(path)
    with safeio.parent(path, dir) as (d, name):
        data = d.read(name)
    return decode_snapshot(data, path)


def write_snapshot(path, entries: Iterable[ProducerStateEntry], *, sync: bool = True,
                   dir: safeio.Dir | None = None) -> None:
    """Write ``entries`` as the snapshot ``path``: ``<path>.tmp`` written, fsynced, renamed
    over ``path``, directory fsynced (:func:`~kafkafs.log.checkpoint.atomic_write`, ``dir``
    as there). ``sync=False`` skips both fsyncs (Kafka's ``takeSnapshot(false)`` on roll:
    the caller fsyncs the file later, see :func:`fsync_snapshot`). Raises ValueError (a
    field out of range) or OSError; on failure ``path`` is untouched."""
    atomic_write(path, encode_snapshot(entries), sync=sync, dir=dir)


def fsync_snapshot(path, *, dir: safeio.Dir | None = None) -> bool:
    """fsync the snapshot file ``path`` (written with ``sync=False``) and its directory
    (Kafka ``flushProducerStateSnapshot``; ``dir`` as for :func:`read_snapshot`). Returns
    False when the file no longer exists (deleted meanwhile); raises other OSErrors."""
    with safeio.parent(path, dir) as (d, name):
        if not d.fsync_file(name):
            return False
        d.fsync()
    return True


def snapshot_filename(offset: int) -> str:
    """``'00000000000000000042.snapshot'`` for 42 (``LogFileUtils.producerSnapshotFile``)."""
    return filename_prefix(offset) + SNAPSHOT_SUFFIX


def snapshot_path(log_dir, offset: int) -> str:
    return os.path.join(os.fspath(log_dir), snapshot_filename(offset))


def parse_snapshot_filename(name: str) -> int | None:
    """The offset a snapshot file is named after, or None for any other name (``.deleted``
    and other suffixed names included)."""
    m = _SNAPSHOT_NAME.match(name)
    return int(m.group(1)) if m else None


def list_snapshot_files(log_dir, names=None) -> list[tuple[int, str]]:
    """``[(offset, path), ...]`` of the snapshot files (regular files: a link or special
    file is left out, warned once) in ``log_dir`` (a path, or an open
    :class:`~kafkafs.log.safeio.Dir`), oldest first; [] when the directory does not exist
    (``listSnapshotFiles``). ``names``: the regular files of a listing just made."""
    try:
        d = safeio.Dir.of(log_dir)
        if names is None:
            names = d.files()
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted((offset, d.join(name)) for name in names
                  if name.endswith(".snapshot")
                  and (offset := parse_snapshot_filename(name)) is not None)


def latest_snapshot(log_dir) -> tuple[int, str] | None:
    """``(offset, path)`` of the newest snapshot in ``log_dir``, or None."""
    files = list_snapshot_files(log_dir)
    return files[-1] if files else None


def _delete_snapshots(log_dir, doomed) -> list[int]:
    d = safeio.Dir.of(log_dir)
    return [o for o, p in list_snapshot_files(d) if doomed(o) and d.unlink(os.path.basename(p))]


def mark_snapshot_file_deleted(log_dir, path: str) -> str | None:
    """Rename the snapshot file ``path`` (in ``log_dir``, a path or a
    :class:`~kafkafs.log.safeio.Dir`) to ``<path>.deleted``, the name it is removed by
    with its segment (``removeAndMarkSnapshotForDeletion``). Returns the new path, or None
    when the file is gone already. Raises OSError from the rename."""
    name = os.path.basename(path)
    try:
        safeio.Dir.of(log_dir).rename(name, name + DELETED_SUFFIX)
    except FileNotFoundError:  # removed from outside already
        return None
    return path + DELETED_SUFFIX


def delete_snapshots_before(log_dir, offset: int) -> list[int]:
    """Delete the snapshots of ``log_dir`` (a path or a :class:`~kafkafs.log.safeio.Dir`)
    named below ``offset`` (exclusive; Kafka ``deleteSnapshotsBefore``). Returns the
    offsets deleted."""
    return _delete_snapshots(log_dir, lambda o: o < offset)


def delete_snapshots_after(log_dir, offset: int) -> list[int]:
    """Delete the snapshots of ``log_dir`` named above ``offset`` (exclusive; what
    ``truncateAndReload`` does past the log end offset). Returns the offsets deleted."""
    return _delete_snapshots(log_dir, lambda o: o > offset)


def take_snapshot(log_dir, offset: int, entries: Iterable[ProducerStateEntry], *,
                  sync: bool = True) -> str:
    """Write ``entries`` (sorted by producer id) as ``log_dir/<offset>.snapshot`` with
    :func:`write_snapshot` (``sync`` as there; ``log_dir``: a path or an open
    :class:`~kafkafs.log.safeio.Dir`); returns its path."""
    d = safeio.Dir.of(log_dir)
    path = d.join(snapshot_filename(offset))
    write_snapshot(path, sorted(entries, key=lambda e: e.producer_id), sync=sync, dir=d)
    return path


# -- the manager ------------------------------------------------------------------------
class ProducerStateManager:
    """Producer state of one partition, rebuilt from its batches (Kafka
    ``ProducerStateManager`` driven as ``LogSegment.updateProducerState`` drives it).

    ``log_dir``: the partition directory holding the ``.snapshot`` files (a path, or the
    log's open :class:`~kafkafs.log.safeio.Dir`: every file is reached through it), listed
    once here (as Kafka does; :meth:`reload_snapshots` lists them again). ``writable=False`` never
    creates or deletes a file: snapshots that would be deleted are only forgotten, and
    :meth:`take_snapshot` raises ReadOnlyLogError.

    Offsets: :attr:`map_end_offset` is one past the last batch applied (Kafka's
    ``lastMapOffset``). Not thread-safe: the caller serialises (Kafka holds the log's lock).
    """

    def __init__(self, log_dir, *, writable: bool = True, names=None):
        self._dir = safeio.Dir.of(log_dir)
        self._log_dir = self._dir.path
        self._writable = bool(writable)
        self._producers: dict[int, ProducerStateEntry] = {}
        self._ongoing: dict[int, TxnMetadata] = {}  # first offset → txn
        self._ongoing_offsets: list[int] = []  # sorted keys of _ongoing
        self._snapshots: dict[int, str] = {}
        self._map_end_offset = 0
        self._last_snap_offset = 0
        self.reload_snapshots(names)

    # -- state ------------------------------------------------------------------------
    @property
    def log_dir(self) -> str:
        return self._log_dir

    @property
    def dir(self) -> safeio.Dir:
        """The partition directory, open (every snapshot file is reached through it)."""
        return self._dir

    @property
    def writable(self) -> bool:
        return self._writable

    @property
    def producers(self) -> Mapping[int, ProducerStateEntry]:
        """Read-only view: producer id → entry (``activeProducers``)."""
        return types.MappingProxyType(self._producers)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    @property
    def map_end_offset(self) -> int:
        """One past the last offset applied (``mapEndOffset``)."""
        return self._map_end_offset

    def update_map_end_offset(self, offset: int) -> None:
        self._map_end_offset = offset

    def ongoing_txns(self) -> list[TxnMetadata]:
        """The ongoing transactions, by first offset."""
        return [self._ongoing[o] for o in self._ongoing_offsets]

    def first_undecided_offset(self) -> int | None:
        """First offset of the earliest ongoing transaction, or None
        (``firstUndecidedOffset``): the last stable offset when it is not None."""
        return self._ongoing_offsets[0] if self._ongoing_offsets else None

    def is_empty(self) -> bool:
        return not self._producers

    def _add_ongoing(self, txn: TxnMetadata) -> None:
        if txn.first_offset not in self._ongoing:
            bisect.insort(self._ongoing_offsets, txn.first_offset)
        self._ongoing[txn.first_offset] = txn

    def _clear(self) -> None:
        self._producers.clear()
        self._ongoing.clear()
        self._ongoing_offsets.clear()

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Forget the producers idle for at least ``expiration_ms`` (their last timestamp at
        least that long before ``now_ms``) that have no ongoing transaction
        (``removeExpiredProducers``, broker setting ``producer.id.expiration.ms``). Returns
        the producer ids removed; the next snapshot leaves them out."""
        gone = [pid for pid, e in self._producers.items()
                if e.current_txn_first_offset is None
                and now_ms - e.last_timestamp >= expiration_ms]
        for pid in gone:
            del self._producers[pid]
        return gone

    def load_producer_entry(self, entry: ProducerStateEntry) -> None:
        """Install ``entry`` (from a snapshot), registering its ongoing transaction
        (``loadProducerEntry``)."""
        self._producers[entry.producer_id] = entry
        if entry.current_txn_first_offset is not None:
            self._add_ongoing(TxnMetadata(entry.producer_id, entry.current_txn_first_offset))

    # -- applying batches ---------------------------------------------------------------
    def update(self, batch, txn_index=None) -> AbortedTxn | None:
        """Apply the next batch of the log, in offset order (``LogSegment.updateProducerState``).

        ``batch``: a :class:`~kafkafs.record.batch.RecordBatch` (or legacy batch, which has
        no producer). A batch with ``producer_id >= 0`` updates its producer; a control batch
        whose first record is a COMMIT/ABORT marker completes the producer's ongoing
        transaction. Returns the :class:`AbortedTxn` (with Kafka's last stable offset) when an
        ABORT ended a non-empty transaction, after appending it to ``txn_index`` (a
        :class:`~kafkafs.log.txnindex.TransactionIndex`) when given; None otherwise.
        Then :attr:`map_end_offset` becomes ``batch.last_offset + 1``.

        Raises CorruptRecordError (batch position named) for a marker whose key/value cannot
        be parsed or whose type is not COMMIT/ABORT, InvalidTxnStateError for a
        non-transactional batch from a producer inside a transaction: then nothing changes.
        An error from ``txn_index.append`` propagates after the producer's entry was updated
        and before the transaction is completed (Kafka's order).
        """
        aborted = None
        if batch.producer_id > NO_PRODUCER_ID:
            completed = self.append_batch(batch)
            if completed is not None:
                if completed.is_aborted:
                    aborted = AbortedTxn(completed.producer_id, completed.first_offset,
                                         completed.last_offset,
                                         self.last_stable_offset(completed))
                    if txn_index is not None:
                        txn_index.append(aborted)
                self.complete_txn(completed)
        self._map_end_offset = batch.last_offset + 1
        return aborted

    def append_batch(self, batch) -> CompletedTxn | None:
        """Apply ``batch`` to its producer's entry without completing a transaction
        (``ProducerAppendInfo.append`` then ``update``) and return the transaction its marker
        ends, if any; the caller then calls :meth:`last_stable_offset` and
        :meth:`complete_txn`. :meth:`update` does all of it. Raises as :meth:`update`; a
        batch without a producer id raises ValueError."""
        pid = batch.producer_id
        if pid <= NO_PRODUCER_ID:
            raise ValueError(f"Invalid producer id {pid} passed to update")
        current = self._producers.get(pid) or ProducerStateEntry.empty(pid)
        completed = None
        started = None
        if batch.is_control:
            records = batch.record_tuples()
            if not records:
                # a marker batch emptied by the cleaner: the transaction is gone already
                updated = current
            else:
                _offset, timestamp, key, value, _headers = records[0]
                try:
                    marker = end_txn_marker(key, value)
                except CorruptRecordError as exc:
                    raise exc.located(position=batch.position) from None
                if current.current_txn_first_offset is not None:
                    completed = CompletedTxn(pid, current.current_txn_first_offset,
                                             batch.base_offset, marker.control_type == ABORT)
                updated = dataclasses.replace(
                    current.with_epoch(batch.producer_epoch),
                    coordinator_epoch=marker.coordinator_epoch, current_txn_first_offset=None,
                    last_timestamp=timestamp)
        else:
            txn_first = current.current_txn_first_offset
            if txn_first is not None and not batch.is_transactional:
                raise InvalidTxnStateError(
                    f"Expected transactional write from producer {pid} at offset "
                    f"{batch.base_offset} (position {batch.position})")
            first_offset, last_offset = batch.base_offset, batch.last_offset
            updated = dataclasses.replace(
                current.with_epoch(batch.producer_epoch), last_sequence=batch.last_sequence,
                last_offset=last_offset, offset_delta=last_offset - first_offset,
                last_timestamp=batch.max_timestamp)
            if txn_first is None and batch.is_transactional:
                updated = dataclasses.replace(updated, current_txn_first_offset=first_offset)
                started = TxnMetadata(pid, first_offset)
        self._producers[pid] = updated
        if started is not None:
            self._add_ongoing(started)
        return completed

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO to record for ``completed`` before it is marked complete
        (``lastStableOffset``): the first offset of the earliest ongoing transaction of
        *another* producer, else the marker's offset + 1."""
        for first in self._ongoing_offsets:
            if self._ongoing[first].producer_id != completed.producer_id:
                return first
        return completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        """Mark ``completed`` done (``completeTxn``). Raises ValueError when no transaction
        of that producer starts at its first offset."""
        txn = self._ongoing.get(completed.first_offset)
        if txn is None:
            raise ValueError(f"Attempted to complete transaction {completed} which was not "
                             "started")
        del self._ongoing[completed.first_offset]
        self._ongoing_offsets.remove(completed.first_offset)

    # -- snapshots ----------------------------------------------------------------------
    def reload_snapshots(self, names=None) -> None:
        """List the snapshot files of :attr:`log_dir` again (``loadSnapshots``); ``names``:
        the directory's regular files from a listing just made."""
        self._snapshots = dict(list_snapshot_files(self._dir, names))

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshots known, oldest first."""
        return sorted(self._snapshots)

    def latest_snapshot_offset(self) -> int | None:
        return max(self._snapshots) if self._snapshots else None

    def oldest_snapshot_offset(self) -> int | None:
        return min(self._snapshots) if self._snapshots else None

    def snapshot_file(self, offset: int) -> str | None:
        """Path of the snapshot at ``offset``, if known (``fetchSnapshot``)."""
        return self._snapshots.get(offset)

    def _remove_snapshot(self, offset: int) -> None:
        path = self._snapshots.pop(offset, None)
        if path is not None and self._writable:
            self._dir.unlink(os.path.basename(path))

    def take_snapshot(self, sync: bool = True) -> str | None:
        """Write the state as ``<map_end_offset>.snapshot`` unless a snapshot at or past
        that offset was already written (``takeSnapshot``). ``sync=False`` writes without
        fsync (Kafka's ``takeSnapshot(false)`` on roll; see :func:`fsync_snapshot`).
        Returns the path written, or None. Raises ReadOnlyLogError when read-only, OSError
        from the write."""
        if self._map_end_offset <= self._last_snap_offset:
            return None
        if not self._writable:
            raise ReadOnlyLogError(f"producer state of {self._log_dir} is read-only")
        path = take_snapshot(self._dir, self._map_end_offset, self._producers.values(),
                             sync=sync)
        self._snapshots[self._map_end_offset] = path
        self._last_snap_offset = self._map_end_offset
        return path

    def forget_snapshot(self, offset: int) -> str | None:
        """Forget the snapshot at ``offset`` without touching its file, and return its
        path: the caller renames or deletes the file later, outside the log's lock
        (``docs/design.md §6.4``). None when there is no such snapshot or the state is
        read-only (a read-only state never changes a file)."""
        path = self._snapshots.pop(offset, None)
        return path if self._writable else None

    def mark_snapshot_deleted(self, offset: int) -> str | None:
        """Rename the snapshot at ``offset`` (a deleted segment's base offset) to
        ``<offset>.snapshot.deleted`` and forget it; the caller removes the file with the
        segment after ``file.delete.delay.ms`` (``removeAndMarkSnapshotForDeletion``).
        Returns the new path, or None when there is no such snapshot (or the state is
        read-only). Raises OSError from the rename."""
        path = self.forget_snapshot(offset)
        return None if path is None else mark_snapshot_file_deleted(self._dir, path)

    def delete_snapshots_before(self, offset: int) -> None:
        """Delete the snapshots below ``offset`` (exclusive; ``deleteSnapshotsBefore``)."""
        for o in [o for o in self._snapshots if o < offset]:
            self._remove_snapshot(o)

    def remove_stray_snapshots(self, segment_base_offsets: Iterable[int]) -> None:
        """Delete snapshots that match no segment base offset, keeping the newest stray
        one if it lies past every segment (the clean-shutdown snapshot at the log end)
        (``removeStraySnapshots``). Lists the directory again first."""
        bases = set(segment_base_offsets)
        if self._writable:  # (a read-only load lists the dir once, just before)
            self.reload_snapshots()
        stray = None
        for offset in sorted(self._snapshots):
            if offset not in bases:
                if stray is not None:
                    self._remove_snapshot(stray)
                stray = offset
        if stray is not None and bases and stray < max(bases):
            self._remove_snapshot(stray)

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int) -> None:
        """Drop snapshots outside ``(log_start_offset, log_end_offset]``; if the state does
        not end at ``log_end_offset``, reload it from the newest remaining readable snapshot
        (corrupt ones are deleted) or start empty at ``log_start_offset``
        (``truncateAndReload``, without producer expiration). The caller then replays the
        batches from :attr:`map_end_offset` up to ``log_end_offset``."""
        for offset in list(self._snapshots):
            if offset > log_end_offset or offset <= log_start_offset:
                self._remove_snapshot(offset)
        if log_end_offset != self._map_end_offset:
            self._clear()
            self._load_from_snapshot(log_start_offset)
        else:
            self.on_log_start_offset_incremented(log_start_offset)

    def _load_from_snapshot(self, log_start_offset: int) -> None:
        while self._snapshots:
            offset = max(self._snapshots)
            try:
                entries = read_snapshot(self._snapshots[offset], dir=self._dir)
            except (CorruptSnapshotError, FileNotFoundError):
                self._remove_snapshot(offset)
                continue
            for entry in entries:
                self.load_producer_entry(entry)
            self._last_snap_offset = self._map_end_offset = offset
            return
        self._last_snap_offset = self._map_end_offset = log_start_offset

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """Move :attr:`map_end_offset` up to a new log start offset
        (``onLogStartOffsetIncremented``)."""
        self._map_end_offset = max(self._map_end_offset, log_start_offset)
        latest = self.latest_snapshot_offset()
        self._last_snap_offset = log_start_offset if latest is None else latest

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget every producer and delete every snapshot; the state starts empty at
        ``offset`` (``truncateFullyAndStartAt``)."""
        self._clear()
        for o in list(self._snapshots):
            self._remove_snapshot(o)
        self._last_snap_offset = 0
        self._map_end_offset = offset

    def __repr__(self):
        return (f"ProducerStateManager({self._log_dir!r}, producers={len(self._producers)}, "
                f"ongoing={len(self._ongoing)}, map_end_offset={self._map_end_offset})")
