"""File and directory names of a Kafka log dir (Kafka ``LogFileUtils``, ``Topic``, ``UnifiedLog``).

Segment files are named by their base offset, 20 digits zero-padded; partition dirs are
``<topic>-<partition>``, split at the last ``-``.
"""

from __future__ import annotations

import re

from .errors import InvalidTopicError

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

MAX_TOPIC_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
# directories that belong to the broker's own machinery (LocalLog: -delete, -future, -stray)
_BROKER_DIR = re.compile(r"^.+-\d+\.[0-9a-zA-Z_-]+-(delete|future|stray)$")
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")
_SEGMENT_FILE = re.compile(r"^(\d{20})(\.[a-z]+)((?:\.(?:deleted|cleaned|swap))?)$")

# files kafkafs keeps in a log dir (regular files only: a broker refuses stray directories)
TOPIC_CONFIG_FILE = "kafkafs-topic-configs.json"


def filename_prefix(offset: int) -> str:
    """The 20-digit zero-padded name stem for ``offset`` (``LogFileUtils.filenamePrefixFromOffset``)."""
    return f"{offset:020d}"


def log_filename(offset: int) -> str:
    return filename_prefix(offset) + LOG_SUFFIX


def index_filename(offset: int) -> str:
    return filename_prefix(offset) + INDEX_SUFFIX


def time_index_filename(offset: int) -> str:
    return filename_prefix(offset) + TIME_INDEX_SUFFIX


def parse_segment_filename(name: str) -> tuple[int, str, str] | None:
    """``'00000000000000000042.log.deleted'`` → ``(42, '.log', '.deleted')``; None if not a
    segment-family file."""
    m = _SEGMENT_FILE.match(name)
    if not m:
        return None
    return int(m.group(1)), m.group(2), m.group(3)


def validate_topic(name: str) -> str:
    """Return ``name`` if it is a legal Kafka topic name (``Topic.validate``).

    Raises InvalidTopicError: empty, ``.``/``..``, longer than 249 characters, or a character
    outside ``[a-zA-Z0-9._-]``.
    """
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError("Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_TOPIC_LENGTH:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_LENGTH} characters, "
            f"topic name: {name}")
    if not _LEGAL_TOPIC.match(name):
        raise InvalidTopicError(
            f"Topic name \"{name}\" is illegal, it contains a character other than ASCII "
            "alphanumerics, '.', '_' and '-'")
    return name


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """``'orders-3'`` → ``('orders', 3)``; None for anything that is not a live partition dir
    (``-delete``/``-future``/``-stray`` dirs, bad topic names, hidden files)."""
    if _BROKER_DIR.match(name):
        return None
    m = _PARTITION_DIR.match(name)
    if not m:
        return None
    topic, partition = m.group(1), int(m.group(2))
    try:
        validate_topic(topic)
    except InvalidTopicError:
        return None
    return topic, partition
