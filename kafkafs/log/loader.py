"""Open a partition directory and recover it after an unclean shutdown (Kafka ``LogLoader``).

Order, as Kafka does it:

1. Remove leftovers: ``*.deleted`` and ``*.cleaned`` files; ``*.swap`` files at or past the
   smallest ``.cleaned`` offset (an interrupted clean); for every other ``.swap`` segment,
   delete the segments it replaces and strip the suffix (the swap had completed).
2. Delete index files whose ``.log`` is gone.
3. Open every ``.log`` in offset order; a segment whose index files are missing or fail the
   sanity check is recovered on its own.
4. After an unclean shutdown, recover every segment from the recovery point on: validate
   every batch, rebuild the indexes, truncate at the first invalid batch and delete every
   later segment.

Read-only loads skip 1, 2 and 4 and never write a byte.
"""

from __future__ import annotations

import logging
import os

from .config import LogConfig
from .errors import CorruptIndexError
from .log import Log
from .names import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    parse_segment_filename,
)
from .segment import LogSegment

log = logging.getLogger(__name__)


def _remove_leftovers(dir: str, config: LogConfig) -> None:
    names = os.listdir(dir)
    parsed = [(n, parse_segment_filename(n)) for n in names]
    cleaned = [p[0] for n, p in parsed if p and p[2] == CLEANED_SUFFIX]
    min_cleaned = min(cleaned) if cleaned else None
    swaps = []
    for name, p in parsed:
        if not p:
            continue
        base, kind, suffix = p
        path = os.path.join(dir, name)
        if suffix in (DELETED_SUFFIX, CLEANED_SUFFIX):
            log.info("Deleting stray temporary file %s", path)
            os.unlink(path)
        elif suffix == SWAP_SUFFIX:
            if min_cleaned is not None and base >= min_cleaned:
                log.info("Deleting invalid swap file %s (min cleaned offset %d)", path, min_cleaned)
                os.unlink(path)
            elif kind == LOG_SUFFIX:
                swaps.append(base)
    for base in sorted(swaps):
        swap = LogSegment(dir, base, config, suffix=SWAP_SUFFIX)
        try:
            next_offset = swap.read_next_offset()
        finally:
            swap.close()
        for name in os.listdir(dir):
            p = parse_segment_filename(name)
            if p and p[2] == "" and base <= p[0] < max(next_offset, base + 1):
                os.unlink(os.path.join(dir, name))
        for kind in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            old = os.path.join(dir, f"{base:020d}{kind}{SWAP_SUFFIX}")
            if os.path.exists(old):
                os.replace(old, os.path.join(dir, f"{base:020d}{kind}"))
        log.info("Completed the interrupted swap of segment %d in %s", base, dir)
    # indexes without a log file
    names = set(os.listdir(dir))
    for name in names:
        p = parse_segment_filename(name)
        if p and p[2] == "" and p[1] != LOG_SUFFIX and f"{p[0]:020d}{LOG_SUFFIX}" not in names:
            if p[1] in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, ".txnindex"):
                log.warning("Deleting index file %s with no log file", os.path.join(dir, name))
                os.unlink(os.path.join(dir, name))


def load_log(dir: str, topic: str, partition: int, config: LogConfig, *,
             recovery_point: int = 0, log_start_offset: int = 0,
             had_clean_shutdown: bool = False, writable: bool = True) -> Log:
    """Load the partition in ``dir`` and return its :class:`Log`.

    ``recovery_point`` and ``log_start_offset`` come from the log dir's checkpoints (0 when
    unknown). Raises OSError on I/O failure; corrupt data is truncated, never raised.
    """
    if writable:
        _remove_leftovers(dir, config)
    names = set(os.listdir(dir))
    bases = sorted(p[0] for p in map(parse_segment_filename, names)
                   if p and p[1] == LOG_SUFFIX and p[2] == "")
    segments = [LogSegment(dir, b, config, writable=writable) for b in bases]
    if writable:
        for seg in segments:
            missing = (f"{seg.base_offset:020d}{INDEX_SUFFIX}" not in names
                       or f"{seg.base_offset:020d}{TIME_INDEX_SUFFIX}" not in names)
            try:
                if missing:
                    raise CorruptIndexError(f"index files of {seg.log_path} are missing")
                if seg is segments[-1]:
                    seg.sanity_check()
            except CorruptIndexError as exc:
                log.warning("Found a corrupted or missing index of %s (%s), rebuilding it",
                            seg.log_path, exc)
                seg.recover()
        if not had_clean_shutdown and segments:
            _recover_from(segments, recovery_point)
        elif segments:
            # a clean shutdown skips recovery, but the tail of the active segment is still
            # checked: bytes appended by hand (or a partial copy) must not become "records"
            if not segments[-1].tail_is_valid():
                segments[-1].recover()
    if not segments:
        if not writable:
            raise FileNotFoundError(f"{dir} holds no log segments")
        seg = LogSegment(dir, log_start_offset, config, create=True)
        seg.open_indexes()
        segments = [seg]
    if writable:
        active = segments[-1]
        active.index.resize(config.segment_index_bytes)
        active.time_index.resize(config.segment_index_bytes)
    log_obj = Log(dir, topic, partition, config, segments,
                  log_start_offset=max(log_start_offset, segments[0].base_offset),
                  recovery_point=0, writable=writable)
    leo = log_obj.log_end_offset
    if had_clean_shutdown or not writable:
        log_obj.recovery_point = leo
    else:
        # everything recovered was re-validated; make it durable before claiming it
        for seg in segments:
            if seg.base_offset >= _floor_base(segments, recovery_point):
                seg.flush()
        log_obj.recovery_point = leo
    if log_obj.log_start_offset > leo:
        log_obj.log_start_offset = leo
    return log_obj


def _floor_base(segments: list[LogSegment], offset: int) -> int:
    base = segments[0].base_offset
    for seg in segments:
        if seg.base_offset <= offset:
            base = seg.base_offset
    return base


def _recover_from(segments: list[LogSegment], recovery_point: int) -> None:
    """Recover every segment from the one holding ``recovery_point`` on; after a truncation,
    delete the later segments (``LogLoader.recoverLog``)."""
    start = _floor_base(segments, recovery_point)
    i = 0
    while i < len(segments):
        seg = segments[i]
        if seg.base_offset < start:
            i += 1
            continue
        truncated = seg.recover()
        if truncated > 0 and i + 1 < len(segments):
            for later in segments[i + 1:]:
                log.warning("Deleting segment %s after a truncated one", later.log_path)
                later.delete()
            del segments[i + 1:]
        i += 1
    # an empty trailing segment after a truncation is fine; an empty one before others is not
