"""A fuzzer for damaged log dirs and its independent judge (issue 10 §2).

A template log dir is written by kafkafs itself (:func:`template_dir`: topic ``t``, partition
0 with 300 records in 10 segments, partition 1 with 40 records in 2; v2 batches of 4-9
records, codecs none/gzip/snappy/lz4/zstd in turn, keys on every third record, a header on
every fourth, a few null values, timestamps ``TS0 + 1000 * i``). Each case copies it
(to /dev/shm when there) and applies a list of *mutations* (:data:`MUTATION_KINDS`, plain
dicts naming a file, a position and bytes, so a case is JSON and can be replayed); then the
readers under test run on the copy, each in a forked child with a time limit
(:func:`run_isolated`), and the judge decides.

The judge decodes the ``.log`` files with kafka-python (``kafka.record``), never with
kafkafs's decoder, under this contract (what the readers must meet):

* A partition's records are read in offset order across its segments: the files named
  ``<20 digits>.log`` in its dir, in base-offset order. Index files (``.index``,
  ``.timeindex``, ``.txnindex``), producer snapshots and the recovery-point checkpoint are
  hints only: the judge ignores them; the readers' output must not depend on them.
* In each segment, batches are found by framing from position 0 (offset i64, length i32,
  ...). A batch is INTACT when: it is complete in the file, its size is at least the minimum
  (length >= 14, and >= 49 when its magic byte says 2: a size below is damage, never a torn
  write), its magic is 0/1/2, its CRC is valid (v2: CRC-32C over [21, end); v0/v1: CRC-32),
  its records decode exactly (count, varints, decompression; no bytes left over; a control
  batch's records too: no reader shows them, but a Kafka consumer decodes them), last offset
  >= base offset, base
  offset >= the segment's base offset, last offset - segment base offset <= 2^31 - 1 (Kafka's
  ``LogSegment.ensureOffsetInRange``), last offset < the next segment's base offset (segments
  do not overlap), last offset < the log end offset (the offset after the last complete frame
  of the last segment, framing from position 0, CRCs and order not looked at, a frame
  whose magic is 0/1 counted by its offset field wherever it lies, as Kafka's
  ``FileLogInputStream`` frames it: ``logdir_judge.framed_end``), and its first offset is >= the next offset after the
  previous intact batch of the partition (offsets strictly increase across batches AND
  segments).
* The first batch that is not intact is the FIRST DAMAGE, with two exceptions that are not
  damage: an incomplete batch at the very end of the LAST segment (a torn tail: fewer than 17
  bytes left, or a batch running past the end of the file; reading stops there quietly), and
  a run of zero bytes that extends to the end of a file (a preallocated tail). A zero run not
  reaching the end of the file is damage. An incomplete batch at the end of a segment that is
  not the last is damage. A size field below the minimum is damage wherever it is.
* The log start offset is max(first segment's base offset, the partition's entry in
  ``log-start-offset-checkpoint`` when that file parses exactly in Kafka's checkpoint format
  (``CheckpointFile.CheckpointReadBuffer``: a line ``0``, a count line, then exactly that many
  lines ``topic partition offset`` split at whitespace, numbers as Java's parseInt/parseLong
  read them; an empty file or one without a count line has no entries; the last entry for a
  partition wins); otherwise the file is ignored). Records below it are not shown; segments
  wholly below it (the next segment's base <= log start) are not read. If it exceeds the log
  end, nothing is shown.
* Control batches (attribute bit 5) are never shown. Cases with forged CRCs are read with
  ``read_uncommitted`` (a forged transactional bit would legitimately move the last stable
  offset); the others with the default ``read_committed`` (the template has no transactions).
* EXPECTED = the intact data records (from the log start offset on) before the first damage.
  AFTER = the records of intact batches after it (framing goes on after a damaged batch whose
  size is known, else at the next segment; offsets must still increase). A reader PASSES when
  it does not crash (no Python traceback, no signal), does not hang (a time limit per reader),
  writes nothing into the log dir, and either (a) exits 0 having delivered exactly EXPECTED
  and there is no damage in [log start, end), or (b) exits 1 having delivered exactly EXPECTED
  (in order, no duplicates) with a ONE-line error on stderr ``error: <path of the .log>:
  position <N>: <reason>`` naming the first damage (kafkafs's CorruptRecordError str).
* When the first damage lies in the segment holding the log start offset, before any intact
  batch reaching it, a reader may legitimately have skipped it (an index that checks out
  points past it): such a case is AMBIGUOUS and only crashes, hangs, writes and dirty output
  count.

Per reader (:data:`READERS`), the same rule with these specifics:

* ``consume``: ``kafkafs consume --from-beginning --timeout-ms 0`` printing partition, offset,
  key and value; judged per partition; with exit 1, the partition named by the error must be
  exactly its EXPECTED and the others a prefix of theirs (the consumer stops at the damage).
* ``dump``: ``kafkafs dump --files <every .log> --print-data-log --json``; each file is judged
  on its own, as kafka-dump-log knows no partition: no log start, offsets increase within the
  file, base offsets >= the file's, and an incomplete batch or a zero run at the end of ANY
  file is not damage (Kafka's ``Found N invalid bytes at the end of F`` line stays); but
  the file's batches are held to the bounds a reader of the partition holds them to (below
  the next segment's base offset, and in the last segment below the log end offset), so
  that dump names the first damage where consume does. At the
  first damage of a file: the intact records before it are printed (the damaged batch's
  header line with ``isvalid: false`` may be printed, never its records), one error line for
  that file, then the next file; exit 1 if any file was damaged.
* ``get-offsets`` (``--time -2``, ``-1`` and a timestamp): never crashes or hangs; where a
  partition has no damage, the answers are the log start offset, the log end offset and the
  first record at or after the timestamp (Kafka ListOffsets) from the log start on.
* ``messages``: the mount's ``messages`` view built in-process as the fs layer builds it
  (a read-only LogManager and :class:`kafkafs.fs.views.LineView`), ``refresh()`` then reads
  of 128 KiB as ``cat`` does until an empty read; a CorruptRecordError/LogError is the EIO
  the mount returns. Judged per partition like consume.
* Real read-only mounts (:func:`check_mount`): ``cat messages`` (the prefix, then
  "Input/output error" and a non-zero exit when damage lies before the end), ``ls -lR``
  succeeds, ``cat offset/N`` answers for intact N before and after the damage.

Verdict kinds (:data:`FAIL_KINDS`, worst first): ``crash`` (traceback, unexpected exception,
signal), ``hang``, ``wrote`` (the log dir changed), ``dirty`` (a record not in EXPECTED or
AFTER, out of order or duplicated), ``silent_loss`` (exit 0, an intact record missing),
``silent_skip`` (exit 0 although there is damage, nothing intact missing: the damaged batch
skipped, or the reading stopped at it quietly), ``short`` (exit 1, an
EXPECTED record missing), ``overrun`` (exit 1 after delivering records past the damage),
``false_alarm`` (an error on a log without damage), ``wrong_offset`` (get-offsets disagrees on
an intact partition), ``bad_error`` (the right records, but no single error line naming the
damage's file and position). Passing kinds: ``clean`` (exit 0, no damage), ``clear``
(exit 1 at the damage), ``ambiguous``.
"""

from __future__ import annotations

import atexit
import io
import json
import os
import pickle
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field

import crc32c
from logdir_judge import (  # noqa: F401  (re-exported: the tests use them through here)
    HEADER_UP_TO_MAGIC,
    LOG_OVERHEAD,
    LOG_START_CHECKPOINT,
    MIN_ENTRY_SIZE,
    TOPIC,
    V2_HEADER,
    Rec,
    Truth,
    _read,
    explain,
    judge_file,
    judge_partition,
    log_files,
    parse_checkpoint,
    partitions,
    scan_segment,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PARTITION_RECORDS = {0: 300, 1: 40}
TS0 = 1_700_000_000_000
SEGMENT_BYTES = 1210
INDEX_INTERVAL_BYTES = 300
CODEC_CYCLE = (0, 1, 2, 3, 4)  # none, gzip, snappy, lz4, zstd
#: a timestamp get-offsets is asked about: between the records at index 150 and 151
PROBE_TIMESTAMP = TS0 + 150_500
READ_SIZE = 128 * 1024  # what cat asks for at a time

RECOVERY_CHECKPOINT = "recovery-point-offset-checkpoint"

#: the two .index entries of the issue (relative offset 5, position -16 and 2^31 - 16)
ISSUE_INDEX_ENTRIES = (b"\x00\x00\x00\x05\xff\xff\xff\xf0", b"\x00\x00\x00\x05\x7f\xff\xff\xf0")

FAIL_KINDS = ("crash", "hang", "wrote", "dirty", "silent_loss", "silent_skip", "short",
              "overrun", "false_alarm", "wrong_offset", "bad_error")
PASS_KINDS = ("clear", "ambiguous", "clean")  # a mix of passes reads as its most telling


# -- the template ------------------------------------------------------------------------

def _template_records(partition: int, count: int):
    """The batches of a partition: lists of (timestamp ms, key, value, headers)."""
    import random
    rng = random.Random(1000 + partition)
    batches, i = [], 0
    while i < count:
        n = min(count - i, rng.randint(4, 9))
        batch = []
        for j in range(i, i + n):
            key = f"k{partition}-{j}".encode() if j % 3 == 0 else None
            value = None if j % 37 == 5 else \
                f"p{partition}-v{j}-".encode() + b"x" * rng.randint(0, 40)
            headers = [("h", str(j).encode())] if j % 4 == 1 else []
            batch.append((TS0 + 1000 * j, key, value, headers))
        batches.append(batch)
        i += n
    return batches


def build_template(path: str) -> None:
    """Write the template log dir at ``path`` (must not exist) with kafkafs's LogManager:
    topic ``t``, partitions 0 and 1 (:data:`PARTITION_RECORDS`), ``segment.bytes`` 1210 and
    ``index.interval.bytes`` 300 so that partition 0 has 10 segments with index entries;
    shut down cleanly (checkpoints, ``.kafka_cleanshutdown``)."""
    from kafkafs.log.config import BrokerConfig
    from kafkafs.log.manager import LogManager

    config = BrokerConfig.from_properties({}).with_log_dirs([path])
    manager = LogManager(config)
    manager.startup()
    try:
        manager.create_topic(TOPIC, len(PARTITION_RECORDS), {
            "segment.bytes": str(SEGMENT_BYTES),
            "index.interval.bytes": str(INDEX_INTERVAL_BYTES)})
        for partition, count in PARTITION_RECORDS.items():
            log = manager.get_log(TOPIC, partition)
            for n, batch in enumerate(_template_records(partition, count)):
                log.append(batch, compression=CODEC_CYCLE[(n + partition) % len(CODEC_CYCLE)])
    finally:
        manager.shutdown()


_WORK: dict = {}


def work_root() -> str:
    """This process's scratch dir (on /dev/shm when there), removed at exit."""
    root = _WORK.get(os.getpid())
    if root is None:
        base = "/dev/shm" if os.path.isdir("/dev/shm") else None
        root = tempfile.mkdtemp(prefix="kafkafs-fuzz-", dir=base)
        _WORK[os.getpid()] = root
        pid = os.getpid()
        atexit.register(lambda: os.getpid() == pid and shutil.rmtree(root, ignore_errors=True))
    return root


def use_work_root(path: str) -> None:
    """Make ``path`` (created here) this process's scratch dir; its creator removes it (a
    pool worker's atexit handlers do not run)."""
    os.makedirs(path, exist_ok=True)
    _WORK[os.getpid()] = path


_TEMPLATE: dict = {}


def template_dir() -> str:
    """The template log dir of this process (built on first use, and again when it is no
    longer whole: under pytest-xdist a worker once found its template's files gone midway
    through the suite -- the cause is not known yet; a template missing files would make
    every verdict about it meaningless)."""
    path = _TEMPLATE.get(os.getpid())
    if path is not None and not _template_whole(path):
        print(f"logdir_fuzz: the template {path} lost files; building it again",
              file=sys.stderr)
        shutil.rmtree(path, ignore_errors=True)
        for key in [k for k in _TEMPLATE if isinstance(k, tuple) and k[1] == path]:
            del _TEMPLATE[key]
        path = None
    if path is None:
        path = os.path.join(work_root(), "template")
        build_template(path)
        _TEMPLATE[os.getpid()] = path
        _TEMPLATE[("files", path)] = sorted(
            os.path.relpath(os.path.join(d, n), path) for d, _s, ns in os.walk(path)
            for n in ns)
    return path


def _template_whole(path: str) -> bool:
    files = _TEMPLATE.get(("files", path))
    return files is not None and all(os.path.exists(os.path.join(path, f)) for f in files)


def use_template(path: str) -> None:
    """Make ``path`` (a template built earlier, e.g. by a parent process) this process's."""
    _TEMPLATE[os.getpid()] = path


@dataclass
class FileInfo:
    """A file of the template: ``rel`` path, ``size`` in bytes, ``kind`` (log, index,
    timeindex, snapshot, checkpoint, other), ``batches`` [(position, size)] of a .log."""

    rel: str
    size: int
    kind: str
    batches: list = field(default_factory=list)


def template_layout(path: str | None = None) -> list[FileInfo]:
    """Every file of the template, sorted by path."""
    path = path or template_dir()
    key = ("layout", path)
    if key in _TEMPLATE:
        return _TEMPLATE[key]
    out = []
    for dirpath, _dirs, names in os.walk(path):
        for name in sorted(names):
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, path)
            suffix = name.rsplit(".", 1)[-1] if "." in name else ""
            if name in (LOG_START_CHECKPOINT, RECOVERY_CHECKPOINT):
                kind = "checkpoint"
            elif suffix in ("log", "index", "timeindex", "snapshot"):
                kind = suffix
            else:
                kind = "other"
            info = FileInfo(rel, os.path.getsize(full), kind)
            if kind == "log":
                with open(full, "rb") as f:
                    info.batches = [(e.position, e.size) for e in scan_segment(f.read())]
            out.append(info)
    out.sort(key=lambda i: i.rel)
    _TEMPLATE[key] = out
    return out


# -- mutations ---------------------------------------------------------------------------

class Chooser:
    """Where a mutation generator gets its choices: a seeded ``random.Random`` (the long run)
    or hypothesis's ``draw`` (the suite), behind the same calls."""

    def __init__(self, rng=None, draw=None):
        self._rng = rng
        self._draw = draw

    def int(self, lo: int, hi: int) -> int:
        """An integer in [lo, hi]."""
        if self._draw is not None:
            from hypothesis import strategies as st
            return self._draw(st.integers(lo, hi))
        return self._rng.randint(lo, hi)

    def chance(self, tenths: int) -> bool:
        """True ``tenths`` times in ten."""
        return self.int(0, 9) < tenths

    def pick(self, seq):
        """One element of ``seq`` (uniform)."""
        return seq[self.int(0, len(seq) - 1)]

    def one_of(self, *options):
        """Call one of ``options`` [(weight, fn())], chosen by weight, and return its value;
        the others are never called (so they draw nothing)."""
        x = self.int(0, sum(w for w, _ in options) - 1)
        for w, fn in options:
            if x < w:
                return fn()
            x -= w
        raise AssertionError("unreachable")

    def bytes(self, n: int) -> bytes:
        """``n`` arbitrary bytes."""
        if self._draw is not None:
            from hypothesis import strategies as st
            return self._draw(st.binary(min_size=n, max_size=n))
        return self._rng.randbytes(n)


def _files(layout, *kinds, partition=None):
    return [f for f in layout if f.kind in kinds and
            (partition is None or f.rel.startswith(f"{TOPIC}-{partition}/"))]


def _log_file(c: Chooser, layout) -> FileInfo:
    """A .log, mostly of partition 0, often its active (last) segment."""
    p0 = _files(layout, "log", partition=0)
    return c.one_of((6, lambda: c.pick(p0)), (2, lambda: p0[-1]),
                    (2, lambda: c.pick(_files(layout, "log", partition=1))))


def _gen_flip(c, layout):
    if c.chance(7):
        info = _log_file(c, layout)
    else:  # any file a reader may look at (not meta.properties, topic configs, .lock)
        info = c.pick([f for f in layout if f.kind != "other" or
                       f.rel.endswith("cleanshutdown")])
    if info.kind == "log" and c.chance(4):  # a batch header field
        start, size = c.pick(info.batches)
        pos = start + c.int(0, min(size, V2_HEADER) - 1)
    else:
        pos = c.int(0, max(info.size - 1, 0))
    return {"kind": "flip", "file": info.rel, "pos": pos, "xor": c.int(1, 255)}


def _gen_truncate(c, layout):
    info = _log_file(c, layout) if c.chance(8) else \
        c.pick(_files(layout, "index", "timeindex", "checkpoint"))
    if info.kind == "log" and c.chance(5):
        start, size = c.pick(info.batches)
        new_size = start + c.int(1, size - 1)  # inside a batch
    else:
        new_size = c.int(0, max(info.size - 1, 0))
    return {"kind": "truncate", "file": info.rel, "size": new_size}


def _gen_zero(c, layout):
    info = _log_file(c, layout)
    pos = c.int(0, info.size - 1)
    length = info.size - pos if c.chance(3) else c.int(1, 200)  # to the end, or a run
    return {"kind": "zero", "file": info.rel, "pos": pos, "length": length}


def _batch_copy(c, info: FileInfo) -> bytes:
    """The bytes of one of the file's batches in the template (offsets that go back)."""
    start, size = c.pick(info.batches)
    with open(os.path.join(template_dir(), info.rel), "rb") as f:
        return f.read()[start:start + size]


def _gen_garbage(c, layout):
    info = _log_file(c, layout) if c.chance(8) else c.pick(_files(layout, "index", "timeindex"))
    data = c.one_of((1, lambda: bytes(c.int(1, 4096))),  # a zero (preallocated) tail
                    (1, lambda: _batch_copy(c, info) if info.kind == "log" else c.bytes(c.int(1, 16))),
                    (2, lambda: c.bytes(c.int(1, 64))))
    return {"kind": "garbage", "file": info.rel, "data": data.hex()}


def _gen_index_entry(c, layout):
    # the active segment's index, as in the issue, or any
    info = _files(layout, "index", partition=0)[-1] if c.chance(3) else \
        c.pick(_files(layout, "index"))
    entry = c.one_of((3, lambda: c.pick(ISSUE_INDEX_ENTRIES)),
                     (3, lambda: struct.pack(">ii", c.int(0, 40), c.int(0, 1500))),
                     (2, lambda: c.bytes(8)))
    slot = c.int(0, info.size // 8)  # == entries: appended
    return {"kind": "index_entry", "file": info.rel, "slot": slot, "entry": entry.hex()}


def _gen_timeindex_entry(c, layout):
    info = c.pick(_files(layout, "timeindex"))
    ts = c.one_of((2, lambda: TS0 + 1000 * c.int(-10, 320)),
                  (1, lambda: c.pick([0, -1, 2**63 - 1, -2**63])),
                  (1, lambda: struct.unpack(">q", c.bytes(8))[0]))
    rel = c.one_of((3, lambda: c.int(0, 40)), (1, lambda: struct.unpack(">i", c.bytes(4))[0]))
    slot = c.int(0, info.size // 12)
    return {"kind": "timeindex_entry", "file": info.rel, "slot": slot,
            "entry": struct.pack(">qi", ts, rel).hex()}


def _gen_timeindex_decreasing(c, layout):
    return {"kind": "timeindex_decreasing", "file": c.pick(_files(layout, "timeindex")).rel}


def _gen_checkpoint(c, layout):
    name = LOG_START_CHECKPOINT if c.chance(8) else RECOVERY_CHECKPOINT
    off = c.one_of((4, lambda: c.int(0, 310)), (1, lambda: c.int(0, 45)),
                   (1, lambda: c.pick([-1, -5, 2**31, 2**63 - 1, 10**6])))
    part = 1 if c.chance(2) else 0
    good = f"0\n1\n{TOPIC} {part} {off}\n"
    text = c.one_of(
        (6, lambda: good),
        (1, lambda: f"0\n2\n{TOPIC} 0 {off}\n{TOPIC} 1 {c.int(0, 45)}\n"),
        (1, lambda: f"1\n1\n{TOPIC} {part} {off}\n"),  # unknown version
        (1, lambda: f"0\n2\n{TOPIC} {part} {off}\n"),  # count disagrees
        (1, lambda: f"0\n1\n{TOPIC} {part}\n"),  # malformed entry
        (1, lambda: f"0\n1\n{TOPIC} {part} {off} x\n"),
        (1, lambda: f"0\n1\n{TOPIC} {part} +{abs(off)}\n"),  # Java's parseLong takes a sign
        (1, lambda: f"0\n1\n {TOPIC} {part} {off}\n"),  # a leading blank: 4 fields in Java
        (1, lambda: f"0\n1\n{TOPIC}\t{part}  {off} \n"),
        (1, lambda: f"0\n1\n{TOPIC} {part} 99999999999999999999\n"),  # out of long range
        (1, lambda: ""),
        (1, lambda: f"0\n1\n{TOPIC} {part} {off}\n\n"),  # an empty line is an entry
        (1, lambda: good[:c.int(1, len(good) - 1)]),
        (1, lambda: c.bytes(c.int(1, 24)).decode("latin-1")),
    )
    return {"kind": "checkpoint", "file": name, "text": text.encode("latin-1").hex()}


FORGE_FIELDS = ("last_offset_delta", "records_count", "attributes", "base_offset")


def _forge_value(c, fld: str):
    if fld == "last_offset_delta":  # backwards, or overlapping the next batch
        return c.one_of((3, lambda: -c.int(1, 20)), (1, lambda: -2**31),
                        (3, lambda: c.int(10, 60)), (1, lambda: 2**31 - 1))
    if fld == "records_count":
        return c.one_of((3, lambda: c.int(-2, 12)), (1, lambda: c.pick([-2**31, 2**31 - 1])))
    if fld == "attributes":  # a bit, a byte or anything; xor-ed into the attributes or set
        value = c.one_of((3, lambda: 1 << c.int(0, 6)), (2, lambda: c.int(0, 0x7F)),
                         (1, lambda: c.int(-2**15, 2**15 - 1)))
        return {"xor": value} if c.chance(5) else {"set": value}
    # base_offset (not under the CRC): back into earlier offsets, or a jump ahead
    return c.one_of((3, lambda: c.int(0, 300)), (1, lambda: c.pick([-1, 2**62])))


def _gen_forge(c, layout):
    info = _log_file(c, layout)
    ordinal = c.int(0, len(info.batches) - 1)
    fld = c.pick(FORGE_FIELDS)
    return {"kind": "forge", "file": info.rel, "batch": ordinal, "field": fld,
            "value": _forge_value(c, fld)}


def _gen_delete(c, layout):
    info = _log_file(c, layout) if c.chance(5) else c.pick(layout)
    return {"kind": "delete", "file": info.rel}


def _gen_duplicate(c, layout):
    info = _log_file(c, layout)
    base = int(os.path.basename(info.rel)[:20])
    new_base = c.one_of((3, lambda: max(0, base + c.int(-40, 40))),
                        (1, lambda: c.pick([0, 300, 10**6])))
    to = os.path.join(os.path.dirname(info.rel), f"{new_base:020d}.log")
    return {"kind": "duplicate", "file": info.rel, "to": to, "indexes": c.chance(5)}


def _gen_swap(c, layout):
    kind = c.pick(("index", "timeindex"))
    a = c.pick(_files(layout, kind))
    b = c.pick([f for f in _files(layout, kind) if f.rel != a.rel])
    return {"kind": "swap", "file": a.rel, "with": b.rel}


#: mutation kind → (weight, generator(chooser, layout) -> mutation dict)
MUTATION_KINDS = {
    "flip": (20, _gen_flip),
    "truncate": (10, _gen_truncate),
    "zero": (8, _gen_zero),
    "garbage": (8, _gen_garbage),
    "index_entry": (8, _gen_index_entry),
    "timeindex_entry": (5, _gen_timeindex_entry),
    "timeindex_decreasing": (4, _gen_timeindex_decreasing),
    "checkpoint": (8, _gen_checkpoint),
    "forge": (14, _gen_forge),
    "delete": (5, _gen_delete),
    "duplicate": (5, _gen_duplicate),
    "swap": (5, _gen_swap),
}


def gen_case(c: Chooser, kinds=None) -> list[dict]:
    """One to three mutations (mostly one) of kinds in ``kinds`` (default: all)."""
    layout = template_layout()
    gens = [(w, gen) for k, (w, gen) in MUTATION_KINDS.items() if kinds is None or k in kinds]
    n = c.one_of((6, lambda: 1), (3, lambda: 2), (1, lambda: 3))
    return [c.one_of(*[(w, lambda gen=gen: gen(c, layout)) for w, gen in gens])
            for _ in range(n)]


def random_case(seed, index: int) -> list[dict]:
    """The mutations of case ``index`` of the seeded long run (the same on every run)."""
    import random
    return gen_case(Chooser(rng=random.Random(f"{seed}:{index}")))


def cases(kinds=None):
    """A hypothesis strategy of mutation lists (see :func:`gen_case`)."""
    from hypothesis import strategies as st

    @st.composite
    def strategy(draw):
        return gen_case(Chooser(draw=draw), kinds)
    return strategy()


def _frames(data: bytes):
    """(position, size) of the complete frames of a segment's bytes, by the length field."""
    pos = 0
    while len(data) - pos >= HEADER_UP_TO_MAGIC:
        length = struct.unpack_from(">i", data, pos + 8)[0]
        if length < MIN_ENTRY_SIZE or pos + length + LOG_OVERHEAD > len(data):
            return
        yield pos, length + LOG_OVERHEAD
        pos += length + LOG_OVERHEAD


def _forge(data: bytearray, m: dict) -> None:
    frames = list(_frames(data))
    if m["batch"] >= len(frames):
        return
    pos, size = frames[m["batch"]]
    if size < V2_HEADER or data[pos + 16] != 2:
        return
    fld, value = m["field"], m["value"]
    if fld == "base_offset":
        struct.pack_into(">q", data, pos, value)
        return  # not under the CRC
    if fld == "last_offset_delta":
        struct.pack_into(">i", data, pos + 23, value)
    elif fld == "records_count":
        struct.pack_into(">i", data, pos + 57, value)
    else:
        attrs = struct.unpack_from(">h", data, pos + 21)[0]
        new = attrs ^ value["xor"] if "xor" in value else value["set"]
        struct.pack_into(">h", data, pos + 21, ((new + 2**15) % 2**16) - 2**15)
    struct.pack_into(">I", data, pos + 17, crc32c.crc32c(bytes(data[pos + 21:pos + size])))


def _decreasing(data: bytes) -> bytes:
    n = len(data) // 12
    entries = [struct.unpack_from(">qi", data, 12 * i) for i in range(n)]
    if n >= 2:
        stamps = sorted((ts for ts, _ in entries), reverse=True)
        entries = [(ts, rel) for ts, (_old, rel) in zip(stamps, entries)]
        if entries[0][0] == entries[-1][0]:
            entries[-1] = (entries[-1][0] - 1000, entries[-1][1])
    elif n == 1:
        entries.append((entries[0][0] - 1000, entries[0][1] + 1))
    else:
        entries = [(TS0 + 100_000, 0), (TS0, 1)]
    return b"".join(struct.pack(">qi", ts, rel) for ts, rel in entries)


def apply_mutation(root: str, m: dict) -> None:
    """Apply mutation ``m`` to the log dir copy at ``root`` (a no-op where its file or batch
    no longer exists)."""
    path = os.path.join(root, m["file"])
    kind = m["kind"]
    if kind == "checkpoint":
        with open(path, "wb") as f:
            f.write(bytes.fromhex(m["text"]))
        return
    if not os.path.isfile(path):
        return
    if kind == "delete":
        os.unlink(path)
        return
    if kind == "duplicate":
        if m["to"] == m["file"]:
            return
        shutil.copyfile(path, os.path.join(root, m["to"]))
        if m["indexes"]:
            for suffix in (".index", ".timeindex"):
                src = path[:-4] + suffix
                if os.path.isfile(src):
                    shutil.copyfile(src, os.path.join(root, m["to"][:-4] + suffix))
        return
    if kind == "swap":
        other = os.path.join(root, m["with"])
        if os.path.isfile(other):
            os.rename(path, path + ".swap-tmp")
            os.rename(other, path)
            os.rename(path + ".swap-tmp", other)
        return
    if kind == "truncate":
        os.truncate(path, min(m["size"], os.path.getsize(path)))
        return
    with open(path, "rb") as f:
        data = bytearray(f.read())
    if kind == "flip":
        if m["pos"] < len(data):
            data[m["pos"]] ^= m["xor"]
    elif kind == "zero":
        end = min(len(data), m["pos"] + m["length"])
        data[m["pos"]:end] = bytes(max(0, end - m["pos"]))
    elif kind == "garbage":
        data += bytes.fromhex(m["data"])
    elif kind in ("index_entry", "timeindex_entry"):
        entry = bytes.fromhex(m["entry"])
        at = min(m["slot"] * len(entry), len(data) - len(data) % len(entry))
        data[at:at + len(entry)] = entry
    elif kind == "timeindex_decreasing":
        data = bytearray(_decreasing(bytes(data)))
    elif kind == "forge":
        _forge(data, m)
    else:
        raise ValueError(f"unknown mutation kind {kind!r}")
    with open(path, "wb") as f:
        f.write(data)


def make_case_dir(mutations: list[dict], dest: str | None = None) -> str:
    """A copy of the template with ``mutations`` applied (at ``dest``, default a new dir
    under :func:`work_root`)."""
    if dest is None:
        dest = tempfile.mkdtemp(prefix="case-", dir=work_root())
        os.rmdir(dest)
    shutil.copytree(template_dir(), dest)
    for m in mutations:
        apply_mutation(dest, m)
    return dest


def describe(m: dict) -> str:
    """A mutation in one short line (file, position, bytes)."""
    rest = {k: v for k, v in m.items() if k not in ("kind", "file")}
    for k in ("data", "entry", "text"):
        if k in rest and len(rest[k]) > 48:
            rest[k] = rest[k][:48] + f"...({len(rest[k]) // 2} bytes)"
    return f"{m['kind']} {m['file']} " + " ".join(f"{k}={v}" for k, v in rest.items())


# -- verdicts ----------------------------------------------------------------------------

@dataclass
class Verdict:
    """A reader's outcome on a case: ``kind`` (see the module docs) and a short ``detail``."""

    kind: str
    detail: str = ""

    @property
    def failed(self) -> bool:
        return self.kind in FAIL_KINDS


def worst(verdicts) -> Verdict:
    """The verdict of the highest-ranked kind (failures before passes)."""
    order = {k: i for i, k in enumerate(FAIL_KINDS + PASS_KINDS)}
    return min(verdicts, key=lambda v: order[v.kind])


def _align(delivered: list, combined: list) -> list[int] | None:
    """Indices of ``delivered`` in ``combined`` as an in-order subsequence, or None."""
    out, j = [], 0
    for x in delivered:
        while j < len(combined) and combined[j] != x:
            j += 1
        if j == len(combined):
            return None
        out.append(j)
        j += 1
    return out


def classify(delivered: list, expected: list, after: list, failed: bool, damage,
             ambiguous: bool = False) -> Verdict:
    """The verdict for ``delivered`` items given the truth; ``failed``: the reader reported
    an error for this partition/file. The error's form is checked by the caller."""
    combined = expected + after
    at = _align(delivered, combined)
    n = len(delivered)
    if at is None:
        first_bad = next((i for i in range(n) if _align(delivered[:i + 1], combined) is None), 0)
        return Verdict("dirty", f"item {first_bad} of {n} not an intact record in order: "
                                f"{delivered[first_bad]!r:.120}")
    if ambiguous:
        return Verdict("ambiguous", f"{n} delivered, {len(expected)} expected")
    got_expected = sum(1 for j in at if j < len(expected))
    missing = len(combined) - n
    counts = f"{n} delivered of {len(expected)} expected (+{len(after)} after the damage)"
    if not failed:
        if damage is None:
            return Verdict("clean") if n == len(expected) else \
                Verdict("silent_loss", counts)
        return Verdict("silent_loss" if missing else "silent_skip", f"{counts}; damage {damage}")
    if damage is None:
        return Verdict("false_alarm", counts)
    if got_expected < len(expected):
        return Verdict("short", f"{counts}; damage {damage}")
    if n > len(expected):
        return Verdict("overrun", f"{counts}; damage {damage}")
    return Verdict("clear")


ERROR_RE = re.compile(r"^error: (?P<path>.+?\.log): position (?P<pos>\d+): (?P<reason>.+)$")


def error_lines(stderr: str) -> list[str]:
    """The ``error:`` lines of a reader's stderr."""
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def parse_error(line: str) -> tuple[str, int] | None:
    """(``t-N/<file>.log``, position) named by an error line, or None when not of the form
    ``error: <path>: position <N>: <reason>``."""
    m = ERROR_RE.match(line)
    if not m:
        return None
    path = m.group("path")
    return "/".join(path.split("/")[-2:]), int(m.group("pos"))


# -- running readers ---------------------------------------------------------------------

@dataclass
class Outcome:
    """What a reader child returned: ``status`` ok / exception (``payload`` a traceback) /
    signal (``payload`` the number) / hang; ``payload`` the reader's result when ok;
    ``seconds`` it took."""

    status: str
    payload: object = None
    seconds: float = 0.0


def run_isolated(fn, args=(), timeout: float = 20.0) -> Outcome:
    """Run ``fn(*args)`` in a forked child; kill it after ``timeout`` s (a hang). The result
    comes back pickled through a pipe."""
    r, w = os.pipe()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 0
        try:
            os.close(r)
            try:
                result = ("ok", fn(*args))
            except BaseException:  # noqa: BLE001 - whatever the reader raised is the finding
                result = ("exception", traceback.format_exc())
            data = pickle.dumps(result)
            view = memoryview(data)
            while view:
                view = view[os.write(w, view):]
        except BaseException:  # noqa: BLE001 - the child must reach os._exit
            code = 70
        finally:
            os._exit(code)
    os.close(w)
    chunks, deadline = [], t0 + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([r], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return Outcome("hang", None, time.monotonic() - t0)
            chunk = os.read(r, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(r)
    _pid, status = os.waitpid(pid, 0)
    seconds = time.monotonic() - t0
    if os.WIFSIGNALED(status):
        return Outcome("signal", os.WTERMSIG(status), seconds)
    try:
        kind, payload = pickle.loads(b"".join(chunks))
    except Exception:  # noqa: BLE001 - a cut or unpicklable result
        return Outcome("signal", f"child exited {os.WEXITSTATUS(status)} without a result",
                       seconds)
    return Outcome(kind, payload, seconds)


def run_cli(argv: list[str], fast_sleep: bool = False) -> dict:
    """``kafkafs.cli.main.main(argv)`` with stdout/stderr captured (in a child: it changes
    sys.stdout). ``fast_sleep`` makes ``time.sleep`` return at once (consume's 0.1 s poll).
    Returns ``{"rc", "stdout" (bytes), "stderr" (str)}``; an exception escaping main() is
    printed to stderr as Python would, with rc 1."""
    from kafkafs.cli.main import main

    if fast_sleep:
        time.sleep = lambda _s: None
    out, err = io.BytesIO(), io.BytesIO()
    sys.stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    sys.stderr = io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace",
                                  write_through=True)
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - as the interpreter would print it
        traceback.print_exc()
        rc = 1
    sys.stdout.flush()
    sys.stderr.flush()
    return {"rc": rc, "stdout": out.getvalue(), "stderr": err.getvalue().decode("utf-8",
                                                                                "replace")}


def isolation_level(mutations: list[dict]) -> str:
    """read_uncommitted for cases that forge CRCs, else read_committed."""
    return "read_uncommitted" if any(m["kind"] == "forge" for m in mutations) \
        else "read_committed"


def _traceback_verdict(text: str) -> Verdict | None:
    if "Traceback (most recent call last)" in text:
        lines = [line for line in text.strip().splitlines() if line.strip()]
        return Verdict("crash", lines[-1][:200] if lines else "traceback")
    return None


def _outcome_verdict(o: Outcome) -> Verdict | None:
    """crash/hang verdicts of an outcome that did not return normally."""
    if o.status == "hang":
        return Verdict("hang", f"no answer in {o.seconds:.1f} s")
    if o.status == "signal":
        return Verdict("crash", f"signal {o.payload}")
    if o.status == "exception":
        return _traceback_verdict(o.payload) or Verdict("crash", str(o.payload)[-200:])
    return None


def _check_error(stderr: str, truths: dict, named_ok) -> tuple[Verdict | None, set]:
    """Check the error lines of a failed run: exactly one, of the contract's form, naming a
    damage the judge found (``named_ok(rel, pos)`` → key into ``truths`` or None). Returns
    (a bad_error verdict or None, the keys named)."""
    lines = error_lines(stderr)
    named = set()
    problems = []
    for line in lines:
        where = parse_error(line)
        key = named_ok(*where) if where else None
        if key is None:
            problems.append(f"error line not naming the first damage: {line[:160]!r}")
        else:
            named.add(key)
    if not lines:
        problems.append("no error line on stderr")
    return (Verdict("bad_error", "; ".join(problems)) if problems else None), named


def _items_consume(p: int, records) -> list[bytes]:
    return [f"Partition:{p}\tOffset:{r.offset}\t".encode()
            + (b"null" if r.key is None else r.key) + b"\t"
            + (b"null" if r.value is None else r.value) for r in records]


def _split_lines(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def _judge_partitions(delivered: dict, truths: dict, rc: int, stderr: str, items) -> Verdict:
    """Judge a reader that reads every partition and stops at its first error (consume):
    ``delivered`` {partition: [items]}, ``items(p, records)`` the expected items."""
    verdicts = []
    if rc == 0:
        for p, t in truths.items():
            verdicts.append(classify(delivered.get(p, []), items(p, t.expected),
                                     items(p, t.after), False, t.damage, t.ambiguous))
        return worst(verdicts)

    def named_ok(rel, pos):
        p = int(rel.split("/")[0].rsplit("-", 1)[1]) if "-" in rel.split("/")[0] else None
        t = truths.get(p)
        return p if t is not None and t.damage is not None and t.damage[:2] == (rel, pos) \
            else None

    bad, named = _check_error(stderr, truths, named_ok)
    for p, t in truths.items():
        got = delivered.get(p, [])
        exp = items(p, t.expected)
        if p in named or (t.damage is not None and not named):
            verdicts.append(classify(got, exp, items(p, t.after), True, t.damage, t.ambiguous))
        elif got != exp[:len(got)]:  # a partition not reached: a prefix is fine
            verdicts.append(classify(got, exp, items(p, t.after), True, t.damage or ("?",),
                                     t.ambiguous))
    if all(t.damage is None and not t.ambiguous for t in truths.values()):
        verdicts.append(Verdict("false_alarm", stderr.strip()[-200:]))
    if bad is not None and not any(t.ambiguous for t in truths.values()):
        verdicts.append(bad)
    if rc != 1:
        verdicts.append(Verdict("bad_error", f"exit status {rc}, not 1"))
    return worst(verdicts or [Verdict("clear")])


@dataclass
class Reader:
    """A reader under test: ``run(case_dir, isolation)`` runs in the child and returns
    plain data; ``judge(result, case_dir, isolation)`` (in the parent) returns a Verdict."""

    name: str
    run: object
    judge: object


# consume

def run_consume(case_dir: str, isolation: str) -> dict:
    """``kafkafs consume`` of every partition from the beginning, in-process."""
    return run_cli(["consume", "--log-dirs", case_dir, "--topic", TOPIC, "--from-beginning",
                    "--timeout-ms", "0", "--isolation-level", isolation,
                    "--property", "print.partition=true", "--property", "print.offset=true",
                    "--property", "print.key=true"], fast_sleep=True)


def judge_consume(res: dict, case_dir: str, isolation: str) -> Verdict:
    """Judge consume's output (see the module docs)."""
    crash = _traceback_verdict(res["stderr"])
    if crash:
        return crash
    truths = {p: judge_partition(case_dir, p) for p in partitions(case_dir)}
    delivered: dict[int, list] = {}
    for line in _split_lines(res["stdout"]):
        m = re.match(rb"^Partition:(\d+)\t", line)
        delivered.setdefault(int(m.group(1)) if m else -1, []).append(line)
    if -1 in delivered:
        return Verdict("dirty", f"unparsable line {delivered[-1][0][:100]!r}")
    return _judge_partitions(delivered, truths, res["rc"], res["stderr"], _items_consume)


def run_consume_subprocess(case_dir: str, isolation: str, timeout: float = 20.0) -> dict:
    """The same consume as a real ``python -m kafkafs`` process (no patched sleep)."""
    argv = [sys.executable, "-m", "kafkafs", "consume", "--log-dirs", case_dir, "--topic",
            TOPIC, "--from-beginning", "--timeout-ms", "0", "--isolation-level", isolation,
            "--property", "print.partition=true", "--property", "print.offset=true",
            "--property", "print.key=true"]
    try:
        p = subprocess.run(argv, capture_output=True, timeout=timeout, cwd=ROOT, check=False)
    except subprocess.TimeoutExpired:
        return {"rc": None, "stdout": b"", "stderr": "", "hang": True}
    return {"rc": p.returncode, "stdout": p.stdout,
            "stderr": p.stderr.decode("utf-8", "replace")}


# dump

def run_dump(case_dir: str, isolation: str) -> dict:
    """``kafkafs dump --files <every .log> --print-data-log --json``, in-process."""
    files = [os.path.join(case_dir, rel) for rel in log_files(case_dir)]
    if not files:
        return {"rc": 0, "stdout": b"", "stderr": "", "files": []}
    res = run_cli(["dump", "--files", ",".join(files), "--print-data-log", "--json"])
    res["files"] = files
    return res


def _json_bytes(b: bytes | None):
    """How ``dump --json`` shows a key or payload (text, else base64); kept apart from
    kafkafs's own text_or_base64 so that the expected side uses none of kafkafs's code."""
    if b is None:
        return None
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        import base64
        return {"base64": base64.b64encode(b).decode("ascii")}


def _items_dump(records) -> list[str]:
    return [json.dumps([r.offset, _json_bytes(r.key), _json_bytes(r.value)]) for r in records]


def judge_dump(res: dict, case_dir: str, isolation: str) -> Verdict:
    """Judge dump's output file by file (see the module docs)."""
    crash = _traceback_verdict(res["stderr"])
    if crash:
        return crash
    truths = {rel: judge_file(case_dir, rel) for rel in log_files(case_dir)}
    delivered: dict[str, list] = {rel: [] for rel in truths}
    current = None
    for line in _split_lines(res["stdout"]):
        try:
            obj = json.loads(line)
        except ValueError:
            return Verdict("dirty", f"not a JSON line: {line[:100]!r}")
        if obj.get("type") == "file":
            current = "/".join(obj["path"].split("/")[-2:])
        elif obj.get("type") == "record" and current in delivered:
            if obj.get("control_type") is not None:
                continue  # control records are printed by dump; the judge's items are data
            delivered[current].append(json.dumps([obj["offset"], obj.get("key"),
                                                  obj.get("payload")]))

    def named_ok(rel, pos):
        t = truths.get(rel)
        return rel if t is not None and t.damage is not None and t.damage[:2] == (rel, pos) \
            else None

    verdicts = []
    bad, named = (None, set())
    if error_lines(res["stderr"]) or res["rc"] != 0:
        bad, named = _check_error(res["stderr"], truths, named_ok)
        if len(error_lines(res["stderr"])) != len(named) and bad is None:
            bad = Verdict("bad_error", "more than one error line for a file")
    for rel, t in truths.items():
        failed = rel in named or (t.damage is not None and res["rc"] != 0 and bad is not None)
        verdicts.append(classify(delivered[rel], _items_dump(t.expected), _items_dump(t.after),
                                 failed, t.damage, t.ambiguous))
    damaged = any(t.damage is not None and not t.ambiguous for t in truths.values())
    if damaged and res["rc"] == 0:
        verdicts.append(Verdict("silent_skip", "exit 0 with a damaged file"))
    if res["rc"] != 0 and not damaged and not any(t.ambiguous for t in truths.values()):
        verdicts.append(Verdict("false_alarm", res["stderr"].strip()[-200:]))
    if bad is not None:
        verdicts.append(bad)
    return worst(verdicts or [Verdict("clean")])


# get-offsets

def run_get_offsets(case_dir: str, isolation: str) -> dict:
    """``kafkafs get-offsets`` with ``--time`` -2, -1 and :data:`PROBE_TIMESTAMP`."""
    return {t: run_cli(["get-offsets", "--log-dirs", case_dir, "--topic", TOPIC, "--time", t])
            for t in ("-2", "-1", str(PROBE_TIMESTAMP))}


def _expected_offset(t: Truth, when: int):
    if t.damage is not None or t.ambiguous or t.log_end is None or t.log_start > t.log_end:
        return "?"  # not judged
    if when == -2:
        return t.log_start
    if when == -1:
        return t.log_end
    return next((r.offset for r in t.timed if r.timestamp >= when), None)


def judge_get_offsets(res: dict, case_dir: str, isolation: str) -> Verdict:
    """Judge get-offsets: no crash; answers agree with the judge where intact."""
    truths = {p: judge_partition(case_dir, p) for p in partitions(case_dir)}
    verdicts = []
    for when, r in res.items():
        crash = _traceback_verdict(r["stderr"])
        if crash:
            return crash
        answers = {}
        for line in r["stdout"].decode("utf-8", "replace").splitlines():
            m = re.match(r"^t:(\d+):(-?\d*)$", line)
            if m:
                answers[int(m.group(1))] = int(m.group(2)) if m.group(2) else None
        intact = all(t.damage is None for t in truths.values())
        if r["rc"] != 0:
            if intact:
                verdicts.append(Verdict("false_alarm", f"--time {when}: {r['stderr'][-200:]}"))
            continue
        for p, t in truths.items():
            want = _expected_offset(t, int(when))
            if want != "?" and answers.get(p, "missing") != want:
                verdicts.append(Verdict("wrong_offset", f"--time {when} partition {p}: "
                                        f"{answers.get(p, 'missing')}, judge {want}"))
    return worst(verdicts or [Verdict("clean")])


# the messages view

def run_messages_view(case_dir: str, isolation: str) -> dict:
    """Every partition's ``messages`` view as the mount builds it (a read-only LogManager,
    :class:`~kafkafs.fs.views.LineView` with render_messages/measure_messages and
    plain.render_file_values), ``refresh()`` then 128 KiB reads until an empty one; a
    CorruptRecordError/LogError ends the reads as the EIO the mount returns. Returns
    {partition: (bytes read, error text or None)}; other exceptions propagate (a crash)."""
    from kafkafs.fs.views import LineView, measure_messages, render_messages
    from kafkafs.log.config import BrokerConfig
    from kafkafs.log.errors import LogError
    from kafkafs.log.manager import LogManager
    from kafkafs.record import plain
    from kafkafs.record.errors import CorruptRecordError

    manager = LogManager(BrokerConfig.from_properties({}).with_log_dirs([case_dir]),
                         read_only=True)
    try:
        manager.startup()
    except (LogError, CorruptRecordError) as exc:
        return {p: (b"", f"startup: {exc}") for p in partitions(case_dir)}
    out = {}
    try:
        for p in manager.partitions(TOPIC):
            view = LineView(manager.get_log(TOPIC, p), render_messages, measure_messages,
                            committed=isolation == "read_committed",
                            render_run=plain.render_file_values)
            data, error = [], None
            try:
                view.refresh()
                off = 0
                while True:
                    chunk = view.read(off, READ_SIZE)
                    if not chunk:
                        break
                    data.append(chunk)
                    off += len(chunk)
            except (LogError, CorruptRecordError) as exc:
                error = str(exc)
            out[p] = (b"".join(data), error)
    finally:
        manager.shutdown()
    return out


def _items_messages(records) -> list[bytes]:
    return [b"null" if r.value is None else r.value for r in records]


def judge_messages_view(res: dict, case_dir: str, isolation: str) -> Verdict:
    """Judge each partition's view: the EXPECTED values, then EIO iff damage."""
    verdicts = []
    for p in partitions(case_dir):
        t = judge_partition(case_dir, p)
        data, error = res.get(p, (b"", None))
        verdicts.append(classify(_split_lines(data), _items_messages(t.expected),
                                 _items_messages(t.after), error is not None, t.damage,
                                 t.ambiguous))
        if data and not data.endswith(b"\n"):
            verdicts.append(Verdict("dirty", f"partition {p}: a partial last line"))
    return worst(verdicts or [Verdict("clean")])


READERS = {
    "consume": Reader("consume", run_consume, judge_consume),
    "dump": Reader("dump", run_dump, judge_dump),
    "get-offsets": Reader("get-offsets", run_get_offsets, judge_get_offsets),
    "messages": Reader("messages", run_messages_view, judge_messages_view),
}


def tree_stamp(root: str) -> dict:
    """rel path → (size, mtime ns) of every entry under ``root``."""
    out = {}
    for dirpath, dirs, names in os.walk(root):
        for name in dirs + names:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            out[os.path.relpath(full, root)] = (st.st_size, st.st_mtime_ns)
    return out


_preloaded = False


def preload_readers() -> None:
    """Import what the readers run (every CLI sub-command, the mount's views) in this
    process, once, so each forked child starts with it: a child that imports them itself
    spends ~60 ms of a ~80 ms run compiling (PYTHONDONTWRITEBYTECODE leaves no .pyc)."""
    global _preloaded
    if not _preloaded:
        from kafkafs.cli.main import build_parser
        from kafkafs.fs import views  # noqa: F401 - the messages reader's imports
        from kafkafs.record import plain  # noqa: F401

        build_parser()  # imports every sub-command module
        _preloaded = True


def judge_reader(name: str, case_dir: str, isolation: str, timeout: float) -> Verdict:
    """Run reader ``name`` on ``case_dir`` in a child and judge it."""
    preload_readers()
    reader = READERS[name]
    before = tree_stamp(case_dir)
    outcome = run_isolated(reader.run, (case_dir, isolation), timeout)
    verdict = _outcome_verdict(outcome)
    if verdict is None:
        verdict = reader.judge(outcome.payload, case_dir, isolation)
    if tree_stamp(case_dir) != before:
        verdict = worst([verdict, Verdict("wrote", "the reader changed the log dir")])
    return verdict


def run_case(mutations: list[dict], readers=tuple(READERS), timeout: float = 20.0,
             keep: str | None = None) -> dict[str, Verdict]:
    """Apply ``mutations`` to a copy of the template, run and judge each reader; returns
    {reader: Verdict}. The copy is removed unless ``keep`` names where to move it."""
    case_dir = make_case_dir(mutations)
    try:
        isolation = isolation_level(mutations)
        return {name: judge_reader(name, case_dir, isolation, timeout) for name in readers}
    finally:
        if keep:
            shutil.move(case_dir, keep)
        else:
            shutil.rmtree(case_dir, ignore_errors=True)


def minimize(mutations: list[dict], reader: str, kind: str, timeout: float = 20.0,
             budget: int = 40) -> list[dict]:
    """A smaller mutation list on which ``reader`` still fails with ``kind``: drop mutations,
    then shorten zero runs and appended bytes. At most ``budget`` reader runs."""
    def still(ms):
        nonlocal budget
        if budget <= 0:
            return False
        budget -= 1
        return run_case(ms, (reader,), timeout)[reader].kind == kind

    ms = list(mutations)
    i = 0
    while len(ms) > 1 and i < len(ms):
        trial = ms[:i] + ms[i + 1:]
        if still(trial):
            ms = trial
        else:
            i += 1
    for i, m in enumerate(ms):
        for key, unit in (("length", 1), ("data", 2)):
            while key in m and len(str(m[key])) > 0:
                size = m[key] if key == "length" else len(m[key]) // unit
                if size <= 1:
                    break
                half = dict(m)
                half[key] = size // 2 if key == "length" else m[key][:size // 2 * unit]
                trial = ms[:i] + [half] + ms[i + 1:]
                if not still(trial):
                    break
                ms, m = trial, half
    return ms


# -- real mounts -------------------------------------------------------------------------

def _sh(cmd: str, timeout: float):
    """``conftest.sh(cmd)``; None when it did not finish in ``timeout`` s."""
    from conftest import sh

    try:
        return sh(cmd, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


def _missed(damaged: bool, detail: str) -> Verdict:
    """An intact thing a reader did not deliver, with an error."""
    return Verdict("short" if damaged else "false_alarm", detail)


def check_mount(case_dir: str, scratch: str, timeout: float = 20.0) -> dict[str, Verdict]:
    """A real read-only mount of ``case_dir`` (``kafkafs mount --read-only``; mount point and
    daemon log under ``scratch``), checked as {check: Verdict}: ``mount`` (it comes up),
    ``ls`` (``ls -lR`` of the mount succeeds), ``cat_messages`` (per partition, twice: the
    EXPECTED values, then "Input/output error" and a non-zero exit iff damage),
    ``offset`` (``cat offset/N`` of the last intact record before the damage and of one
    after it answers its value), ``daemon_log`` (no traceback; each damage that a ``cat``
    met is logged exactly once, not once per read)."""
    import pathlib

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from conftest import Mount

    truths = {p: judge_partition(case_dir, p) for p in partitions(case_dir)}
    damaged = any(t.damage is not None for t in truths.values())
    mnt = Mount(pathlib.Path(scratch), log_dirs=[case_dir], extra_args=["--read-only"])
    try:
        try:
            mnt.start(timeout=timeout)
        except RuntimeError as exc:
            return {"mount": _traceback_verdict(str(exc)) or
                    _missed(damaged, f"the mount did not come up: {str(exc)[-300:]}")}
        checks = {"mount": [Verdict("clean")], "ls": [], "cat_messages": [], "offset": [],
                  "daemon_log": []}
        r = _sh(f"ls -lR {mnt.mnt} > /dev/null", timeout)
        checks["ls"].append(Verdict("hang", "ls -lR") if r is None else Verdict("clean")
                            if r.returncode == 0 else _missed(damaged, r.stderr.decode()[-200:]))
        met = set()
        for p, t in truths.items():
            for _ in range(2):
                r = _sh(f"cat {mnt.path(TOPIC, str(p), 'messages')}", timeout)
                if r is None:
                    checks["cat_messages"].append(Verdict("hang", f"cat partition {p}"))
                    break
                v = classify(_split_lines(r.stdout), _items_messages(t.expected),
                             _items_messages(t.after), r.returncode != 0, t.damage, t.ambiguous)
                if v.kind == "clear" and b"Input/output error" not in r.stderr:
                    v = Verdict("bad_error", f"cat said {r.stderr[-200:]!r}")
                checks["cat_messages"].append(v)
                if r.returncode != 0 and t.damage is not None:
                    met.add(t.damage[:2])
            for rec in [] if t.ambiguous else t.expected[-1:] + t.after[len(t.after) // 2:][:1]:
                r = _sh(f"cat {mnt.path(TOPIC, str(p), 'offset', str(rec.offset))}", timeout)
                if r is None:
                    checks["offset"].append(Verdict("hang", f"offset/{rec.offset}"))
                elif r.returncode != 0:
                    checks["offset"].append(_missed(damaged, f"partition {p} offset/{rec.offset}"
                                                             f": {r.stderr.decode()[-120:]!r}"))
                elif r.stdout != (rec.value or b""):
                    checks["offset"].append(Verdict("dirty", f"partition {p} offset/"
                                                             f"{rec.offset}: {r.stdout[:80]!r}"))
        log_text = mnt.log()
        checks["daemon_log"].append(_traceback_verdict(log_text) or Verdict("clean"))
        for rel, pos in met:
            n = sum(1 for line in log_text.splitlines()
                    if rel in line and f"position {pos}" in line)
            if n != 1:
                checks["daemon_log"].append(Verdict(
                    "bad_error", f"{rel} position {pos} logged {n} times after two cats"))
        return {k: worst(v or [Verdict("clean")]) for k, v in checks.items()}
    finally:
        mnt.stop()
