"""Kafka's small state files: offset and leader-epoch checkpoints, ``partition.metadata``,
``meta.properties``.

Formats follow Apache Kafka (docs/design.md §2.2):

* ``CheckpointFile`` / ``OffsetCheckpointFile`` (``recovery-point-offset-checkpoint``,
  ``log-start-offset-checkpoint``, ``replication-offset-checkpoint``,
  ``cleaner-offset-checkpoint``): ``0\\n<count>\\n`` then ``<topic> <partition> <offset>\\n``.
* ``LeaderEpochCheckpointFile`` (``leader-epoch-checkpoint``): ``0\\n<count>\\n`` then
  ``<epoch> <startOffset>\\n``.
* ``PartitionMetadataFile`` (``partition.metadata``): ``version: 0\\ntopic_id: <id>`` with no
  final newline (``PartitionMetadataFileFormatter``); ids are Kafka ``Uuid`` strings, 22
  characters of unpadded base64url.
* ``meta.properties``: a Java properties file as ``PropertiesUtils.writePropertiesFile``
  writes it (``Properties.store`` with an empty comment: a ``#`` line, a date line, then
  ``key=value`` lines).

Every write is atomic (:func:`atomic_write`): ``<file>.tmp`` is written, flushed and fsynced,
renamed over the file, and the directory is fsynced — as Kafka's ``CheckpointFile.write`` and
``Utils.atomicMoveWithFallback``. Readers raise CorruptCheckpointError (naming the file and
the offending line) on malformed content; a missing checkpoint reads as empty.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import time
import uuid

from . import safeio
from .errors import CorruptCheckpointError
from .properties import (
    PropertiesSyntaxError,
    format_comment,
    format_properties,
    java_lines,
    parse_properties,
)

__all__ = [
    "atomic_write",
    "new_topic_id",
    "parse_uuid",
    "read_file",
    "read_leader_epoch_checkpoint",
    "read_offset_checkpoint",
    "read_partition_metadata",
    "read_properties",
    "uuid_to_string",
    "write_leader_epoch_checkpoint",
    "write_offset_checkpoint",
    "write_partition_metadata",
    "write_properties",
]

CHECKPOINT_VERSION = 0
PARTITION_METADATA_VERSION = 0

_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1
_JAVA_INT = re.compile(r"[+-]?[0-9]+\Z")
_JAVA_WS = re.compile(r"[ \t\n\x0b\f\r]+")  # Java's \s


# -- atomic writes --------------------------------------------------------------------
def _fsync_dir(path: str) -> None:
    try:
        with safeio.Dir.open(path, follow=True) as d:
            d.fsync()
    except FileNotFoundError:
        return


def atomic_write(path, data: bytes, sync: bool = True, *, dir: safeio.Dir | None = None) -> None:
    """Replace ``path`` with ``data`` atomically and (with ``sync``) durably.

    Writes ``<path>.tmp``, fsyncs it, renames it over ``path`` and fsyncs the directory;
    ``sync=False`` skips both fsyncs (the caller makes it durable later). Never through a
    link or into a special file planted in the log dir: a planted ``.tmp`` is unlinked, the
    temporary file created exclusively, and the rename replaces a planted ``path`` itself
    (:meth:`kafkafs.log.safeio.Dir.atomic_write`). ``dir``: the open partition dir holding
    ``path`` (the file is named by its last component there); without it the directory of
    ``path`` is trusted (a log dir root). On any failure the temporary file is removed, the
    old content of ``path`` is untouched and the OSError propagates.
    """
    with safeio.parent(path, dir) as (d, name):
        d.atomic_write(name, data, sync)


# -- text helpers ---------------------------------------------------------------------
def _java_split(line: str) -> list[str]:
    """``Pattern.compile("\\\\s+").split(line)``: a leading separator yields an empty first
    field, trailing empty fields are dropped."""
    parts = _JAVA_WS.split(line)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


def _java_int(text: str, lo: int, hi: int) -> int | None:
    """``Integer.parseInt`` / ``Long.parseLong``: None when not a decimal in [lo, hi]."""
    if not _JAVA_INT.match(text):
        return None
    value = int(text)
    return value if lo <= value <= hi else None


def read_file(path, *, dir: safeio.Dir | None = None) -> bytes:
    """The content of the regular file ``path`` (in ``dir`` when given, see
    :func:`atomic_write`). A planted link, FIFO or device reads as missing: raises
    FileNotFoundError (:class:`~kafkafs.log.safeio.NotRegularFileError`, warned once)."""
    with safeio.parent(path, dir) as (d, name):
        return d.read(name)


def _read_text(path: str, encoding: str = "utf-8", dir: safeio.Dir | None = None) -> str:
    return _decode(read_file(path, dir=dir), path, encoding)


def _decode(data: bytes, path: str, encoding: str = "utf-8") -> str:
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise _corrupt(f"Checkpoint file [{_location(path)}] is not valid UTF-8 "
                       f"(byte {exc.start})", path, None) from None


def _location(path: str) -> str:
    """How errors name the file: its absolute path, or a URI as given (a file read through
    another filesystem, :func:`parse_offset_checkpoint`)."""
    return path if "://" in path else os.path.abspath(path)


def _corrupt(message: str, path: str, line_number: int | None) -> CorruptCheckpointError:
    err = CorruptCheckpointError(message)
    err.path = _location(path)
    err.line_number = line_number
    return err


# -- CheckpointFile ---------------------------------------------------------------------
def _read_checkpoint(path, parse_entry, fields: int, dir=None) -> list:
    """Parse a ``CheckpointFile`` (``CheckpointReadBuffer.read``): version line, count line,
    one entry per line. ``parse_entry(parts)`` returns the entry or None when malformed.
    Missing file (or not a regular file), empty file, or a file with only a version line:
    no entries."""
    path = os.fspath(path)
    try:
        text = _read_text(path, dir=dir)
    except FileNotFoundError:
        return []
    return _parse_checkpoint(text, path, parse_entry, fields)


def _parse_checkpoint(text: str, path: str, parse_entry, fields: int) -> list:
    """:func:`_read_checkpoint` on the text of the file at ``path`` (named in errors)."""
    location = _location(path)
    lines = java_lines(text)

    def malformed(line: str, number: int) -> CorruptCheckpointError:
        return _corrupt(f"Malformed line in checkpoint file [{location}]: {line}", path, number)

    if not lines:
        return []
    version = _java_int(lines[0], _INT_MIN, _INT_MAX)
    if version is None:
        raise malformed(lines[0], 1)
    if version != CHECKPOINT_VERSION:
        raise _corrupt(f"Unrecognised version:{version}, expected version: {CHECKPOINT_VERSION} "
                       f"in checkpoint file at: {location}", path, 1)
    if len(lines) < 2:
        return []
    expected = _java_int(lines[1], _INT_MIN, _INT_MAX)
    if expected is None:
        raise malformed(lines[1], 2)
    entries = []
    for number, line in enumerate(lines[2:], start=3):
        parts = _java_split(line)
        entry = parse_entry(parts) if len(parts) == fields else None
        if entry is None:
            raise malformed(line, number)
        entries.append(entry)
    if len(entries) != expected:
        raise _corrupt(f"Expected [{expected}] entries in checkpoint file [{location}], but "
                       f"found only [{len(entries)}]", path, None)
    return entries


def _write_checkpoint(path, lines: list[str], dir=None) -> None:
    body = "".join(f"{line}\n" for line in lines)
    atomic_write(path, f"{CHECKPOINT_VERSION}\n{len(lines)}\n{body}".encode(), dir=dir)


def _parse_offset_entry(parts):
    partition = _java_int(parts[1], _INT_MIN, _INT_MAX)
    offset = _java_int(parts[2], _LONG_MIN, _LONG_MAX)
    if partition is None or offset is None:
        return None
    return (parts[0], partition), offset


def read_offset_checkpoint(path) -> dict[tuple[str, int], int]:
    """Read an offset checkpoint (Kafka ``OffsetCheckpointFile``) into
    ``{(topic, partition): offset}``.

    A missing or empty file gives ``{}``. Raises CorruptCheckpointError (attributes ``path``
    and ``line_number``) on an unknown version, a malformed line or a wrong entry count;
    OSError on I/O failure.
    """
    return dict(_read_checkpoint(path, _parse_offset_entry, 3))


def parse_offset_checkpoint(data: bytes, path: str) -> dict[tuple[str, int], int]:
    """:func:`read_offset_checkpoint` of bytes already read (from a filesystem the log layer
    does not open itself, such as pyarrow.fs); ``path`` names the file in errors. Raises
    CorruptCheckpointError."""
    return dict(_parse_checkpoint(_decode(data, path), path, _parse_offset_entry, 3))


def write_offset_checkpoint(path, entries: dict[tuple[str, int], int]) -> None:
    """Atomically write ``{(topic, partition): offset}`` as an offset checkpoint, entries
    sorted by topic and partition. Raises ValueError for a topic that cannot be written
    (empty or containing whitespace), OSError."""
    lines = []
    for (topic, partition), offset in sorted(entries.items()):
        if not topic or _JAVA_WS.search(topic):
            raise ValueError(f"cannot checkpoint topic {topic!r}")
        lines.append(f"{topic} {int(partition)} {int(offset)}")
    _write_checkpoint(path, lines)


def _parse_epoch_entry(parts):
    epoch = _java_int(parts[0], _INT_MIN, _INT_MAX)
    start = _java_int(parts[1], _LONG_MIN, _LONG_MAX)
    if epoch is None or start is None:
        return None
    return epoch, start


def read_leader_epoch_checkpoint(path, *, dir=None) -> list[tuple[int, int]]:
    """Read a ``leader-epoch-checkpoint`` (Kafka ``LeaderEpochCheckpointFile``) as a list of
    ``(epoch, start_offset)`` in file order. Missing or empty file: ``[]``. ``dir``: the
    open partition dir (see :func:`atomic_write`). Raises CorruptCheckpointError, OSError."""
    return _read_checkpoint(path, _parse_epoch_entry, 2, dir)


def write_leader_epoch_checkpoint(path, entries, *, dir=None) -> None:
    """Atomically write ``(epoch, start_offset)`` pairs, in the given order (``dir`` as
    for :func:`atomic_write`). Raises OSError."""
    _write_checkpoint(path, [f"{int(epoch)} {int(start)}" for epoch, start in entries], dir)


# -- Uuid and partition.metadata -------------------------------------------------------
_ZERO_UUID = bytes(16)
_RESERVED_UUIDS = {_ZERO_UUID, bytes(15) + b"\x01"}  # Uuid.ZERO_UUID, Uuid.ONE_UUID


def uuid_to_string(raw: bytes) -> str:
    """Kafka's ``Uuid.toString``: unpadded base64url of the 16 bytes (22 characters)."""
    if len(raw) != 16:
        raise ValueError(f"a Uuid has 16 bytes, not {len(raw)}")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def parse_uuid(text: str) -> bytes:
    """Kafka's ``Uuid.fromString``: the 16 bytes of a base64url UUID string (padding
    optional). Raises ValueError."""
    if not isinstance(text, str) or not re.fullmatch(r"[A-Za-z0-9_-]{22}(==)?", text):
        raise ValueError(f"not a base64url Uuid: {text!r}")
    try:
        raw = base64.urlsafe_b64decode(text[:22] + "==")
    except (binascii.Error, ValueError):
        raise ValueError(f"not a base64url Uuid: {text!r}") from None
    if len(raw) != 16:
        raise ValueError(f"not a base64url Uuid: {text!r}")
    return raw


def new_topic_id() -> str:
    """A random Kafka ``Uuid`` string (``Uuid.randomUuid().toString()``): version-4 UUID
    bytes, unpadded base64url, never starting with ``-`` nor a reserved id."""
    while True:
        raw = uuid.uuid4().bytes
        text = uuid_to_string(raw)
        if raw not in _RESERVED_UUIDS and not text.startswith("-"):
            return text


def partition_metadata_bytes(topic_id: str) -> bytes:
    """The content of ``partition.metadata`` for ``topic_id``: ``version: 0\\ntopic_id:
    <id>`` with no final newline, exactly as Kafka's ``PartitionMetadataFile``. Raises
    ValueError for an invalid or zero id."""
    raw = parse_uuid(topic_id)
    if raw == _ZERO_UUID:
        raise ValueError("the zero Uuid is not a topic id")
    return f"version: {PARTITION_METADATA_VERSION}\ntopic_id: {uuid_to_string(raw)}".encode()


def write_partition_metadata(path, topic_id: str, *, dir=None) -> None:
    """Atomically write ``partition.metadata`` (:func:`partition_metadata_bytes`; ``dir``:
    the open partition dir, see :func:`atomic_write`). Raises ValueError for an invalid or
    zero id, OSError."""
    atomic_write(path, partition_metadata_bytes(topic_id), dir=dir)


def read_partition_metadata(path, *, dir=None) -> str:
    """The topic id stored in ``partition.metadata`` (``PartitionMetadataReadBuffer``);
    ``dir``: the open partition dir (see :func:`atomic_write`).

    Raises FileNotFoundError when missing (or not a regular file); CorruptCheckpointError
    on a malformed line, a negative version or the zero id (Kafka's messages); OSError.
    """
    path = os.fspath(path)
    location = os.path.abspath(path)
    lines = java_lines(_read_text(path, dir=dir))

    def field(number: int, key: str) -> str:
        line = lines[number - 1] if len(lines) >= number else None
        parts = re.split(r":[ \t\n\x0b\f\r]+", line, maxsplit=1) if line is not None else []
        if len(parts) != 2 or parts[0] != key:
            raise _corrupt(f"Malformed line in partition metadata file [{location}]: {line}",
                           path, number)
        return parts[1]

    raw_version = field(1, "version")
    version = _java_int(raw_version, _INT_MIN, _INT_MAX)
    if version is None:
        raise _corrupt(f"Malformed line in partition metadata file [{location}]: {lines[0]}",
                       path, 1)
    if version < PARTITION_METADATA_VERSION:
        raise _corrupt(f"Unrecognized version of partition metadata file ({location}): "
                       f"{version}", path, 1)
    raw_id = field(2, "topic_id")
    try:
        raw = parse_uuid(raw_id)
    except ValueError:
        raise _corrupt(f"Malformed line in partition metadata file [{location}]: {lines[1]}",
                       path, 2) from None
    if raw == _ZERO_UUID:
        raise _corrupt(f"Invalid topic ID in partition metadata file ({location})", path, 2)
    return uuid_to_string(raw)


# -- Java properties (meta.properties) -------------------------------------------------
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _java_date(now: float | None) -> str:
    """``java.util.Date.toString()`` in the local time zone: ``Tue Mar 12 10:00:00 UTC 2024``."""
    lt = time.localtime(time.time() if now is None else now)
    return (f"{_DAYS[lt.tm_wday]} {_MONTHS[lt.tm_mon - 1]} {lt.tm_mday:02d} "
            f"{lt.tm_hour:02d}:{lt.tm_min:02d}:{lt.tm_sec:02d} {time.strftime('%Z', lt)} "
            f"{lt.tm_year}")


def read_properties(path) -> dict[str, str]:
    """Read a Java properties file (``Properties.load``, as Kafka reads ``meta.properties``;
    syntax in :mod:`kafkafs.log.properties`). Bytes are ISO-8859-1, as Java reads an
    InputStream. Raises FileNotFoundError (also for a planted link or special file),
    CorruptCheckpointError on a malformed ``\\u``
    escape, OSError.
    """
    path = os.fspath(path)
    text = read_file(path).decode("latin-1")
    try:
        return parse_properties(text)
    except PropertiesSyntaxError as exc:
        raise _corrupt(f"{exc} of properties file [{os.path.abspath(path)}]", path,
                       exc.line_number) from None


def write_properties(path, props: dict[str, str], comment: str | None = None, *,
                     now: float | None = None) -> None:
    """Atomically write a Java properties file as Kafka writes ``meta.properties``
    (``PropertiesUtils.writePropertiesFile`` → ``Properties.store``).

    Layout: the comment lines (``comment=None`` means Kafka's empty comment, a lone ``#``),
    a ``#<date>`` line (``java.util.Date.toString()`` of ``now``, default the current time),
    then ``key=value`` per key, sorted by key (Kafka's order is its hash map's). Keys and
    values are escaped like ``Properties.store`` (non-ASCII as ``\\uXXXX``). Raises OSError.
    """
    lines = [format_comment(line) for line in java_lines("" if comment is None else comment)
             or [""]]
    lines.append("#" + _java_date(now))
    atomic_write(path, ("\n".join(lines) + "\n" + format_properties(props)).encode("ascii"))


