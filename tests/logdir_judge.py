"""The independent judge of the damaged-log-dir fuzzer: what a log dir holds, decoded with
kafka-python (``kafka.record``: ``DefaultRecordBatch``, ``LegacyRecordBatch``,
``validate_crc()``), never with kafkafs's decoder.

:func:`judge_partition` gives a partition's :class:`Truth` (the records a reader must
deliver, the first damage, what follows it, the log start and end offsets) under the
contract written in ``logdir_fuzz``'s docstring; :func:`judge_file` the same for one
``.log`` read on its own (as ``kafkafs dump`` reads it); :func:`parse_checkpoint` reads an
offset checkpoint as Kafka's ``CheckpointFile`` does; :func:`explain` prints it all for a
person.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import struct
from collections import OrderedDict
from dataclasses import dataclass, field

import crc32c
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.legacy_records import LegacyRecordBatch

TOPIC = "t"
LOG_OVERHEAD = 12
HEADER_UP_TO_MAGIC = 17
MIN_ENTRY_SIZE = 14  # LegacyRecord.RECORD_OVERHEAD_V0
V2_HEADER = 61
ATTR_CONTROL = 0x20
SEGMENT_RE = re.compile(r"^(\d{20})\.log$")
PARTITION_DIR_RE = re.compile(r"^(.+)-(\d+)$")
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"


@dataclass(frozen=True)
class Rec:
    """A record as the judge decoded it (kafka-python): offset, key, value, timestamp (ms)."""

    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int


@dataclass
class Entry:
    """One framed entry of a segment. ``state``: intact (decoded; ``records``), damaged
    (``reason``; ``size`` None when the frame itself is unusable), incomplete (at the end of
    the file) or zero_tail. ``base``/``last`` offsets of a decoded entry."""

    position: int
    size: int | None
    state: str
    reason: str = ""
    base: int = -1
    last: int = -1
    control: bool = False
    records: tuple = ()


def _decode_v2(buf: bytes) -> Entry:
    if len(buf) < V2_HEADER:
        return Entry(0, len(buf), "damaged", f"batch of {len(buf)} bytes is below the v2 header")
    batch = DefaultRecordBatch(buf)
    if not batch.validate_crc():
        return Entry(0, len(buf), "damaged", "CRC-32C mismatch")
    base, delta = batch.base_offset, batch.last_offset_delta
    if delta < 0:
        return Entry(0, len(buf), "damaged", f"lastOffsetDelta {delta} < 0")
    control = bool(batch.attributes & ATTR_CONTROL)
    plain = bytearray(buf)  # decode a control batch's records as records (kafka-python
    plain[22] &= ~ATTR_CONTROL & 0xFF  # would parse their keys as control keys): no reader
    records = tuple(Rec(r.offset, r.key, r.value, r.timestamp)  # shows them, but a Kafka
                    for r in DefaultRecordBatch(bytes(plain)))  # consumer decodes them too
    return Entry(0, len(buf), "intact", base=base, last=base + delta, control=control,
                 records=records)


def _decode_legacy(buf: bytes, magic: int) -> Entry:
    batch = LegacyRecordBatch(buf, magic)
    if not batch.validate_crc():
        return Entry(0, len(buf), "damaged", "CRC-32 mismatch")
    records = tuple(Rec(r.offset, r.key, r.value, -1 if r.timestamp is None else r.timestamp)
                    for r in batch)
    for r, raw in zip(records, batch):
        if not raw.validate_crc():
            return Entry(0, len(buf), "damaged", "inner message CRC-32 mismatch")
    last = batch.base_offset  # a legacy entry's offset is its last inner offset
    base = records[0].offset if records else last
    if last < base:
        return Entry(0, len(buf), "damaged", "last offset < base offset")
    return Entry(0, len(buf), "intact", base=base, last=last, records=records)


def decode_entry(buf: bytes) -> Entry:
    """Decode one complete frame (``buf`` = its bytes) with kafka-python."""
    magic = buf[16]
    try:
        if magic == 2:
            return _decode_v2(buf)
        if magic in (0, 1):
            return _decode_legacy(buf, magic)
    except Exception as exc:  # noqa: BLE001 - kafka-python's errors, codecs', struct's, ...
        return Entry(0, len(buf), "damaged", f"records do not decode: {type(exc).__name__}")
    return Entry(0, len(buf), "damaged", f"unknown magic {magic}")


_SCANS: OrderedDict = OrderedDict()


def scan_segment(data: bytes) -> list[Entry]:
    """Frame a segment's bytes from position 0 and decode each frame; stops after a frame
    whose size is unusable, at a zero tail, or at an incomplete entry. Cached by content."""
    key = hashlib.blake2b(data, digest_size=16).digest()
    hit = _SCANS.get(key)
    if hit is not None:
        _SCANS.move_to_end(key)
        return hit
    out, pos, n = [], 0, len(data)
    while pos < n:
        rest = memoryview(data)[pos:]
        if not rest.tobytes().strip(b"\x00"):
            out.append(Entry(pos, n - pos, "zero_tail"))
            break
        if n - pos < HEADER_UP_TO_MAGIC:
            out.append(Entry(pos, None, "incomplete", f"{n - pos} bytes left"))
            break
        length = struct.unpack_from(">i", data, pos + 8)[0]
        minimum = V2_HEADER - LOG_OVERHEAD if data[pos + 16] == 2 else MIN_ENTRY_SIZE
        size = length + LOG_OVERHEAD
        if length < minimum or pos + size > n:
            if length < minimum:
                out.append(Entry(pos, None, "damaged", f"size {length} below the minimum"))
            else:
                out.append(Entry(pos, None, "incomplete", f"batch of {size} bytes past the end"))
            # framing is lost here; what an index may still reach lies after the next
            # whole batch with a valid CRC (readers never read past this point in order)
            pos = _intact_batch_after(data, pos)
            if pos is None:
                break
            continue
        e = decode_entry(bytes(data[pos:pos + size]))
        e.position = pos
        out.append(e)
        pos += size
    _SCANS[key] = out
    if len(_SCANS) > 4096:
        _SCANS.popitem(last=False)
    return out


def framed_end(data: bytes, base: int) -> int:
    """The log end offset a reader takes from the last segment's bytes: the offset after
    the last complete frame found by framing from position 0 (a v2 batch's base offset +
    lastOffsetDelta + 1, a legacy entry's offset + 1; CRCs and order not looked at) up to a
    frame that cannot be read, not counting frames whose offsets cannot lie in the segment
    (a negative lastOffsetDelta, below the base offset, more than an int past it); ``base``
    when there is none.

    A frame is what Kafka's ``FileLogInputStream.nextBatch`` hands to ``readNextOffset``:
    offset, size and magic, nothing of the message looked at. A legacy-looking frame (magic
    0 or 1) counts by its offset wherever it lies -- after v2 frames in the same segment, or
    as the first frame of a segment after v2 ones: most likely a v2 batch whose magic byte
    was damaged, whose own offsets are lost, but Kafka frames it so and kafkafs follows."""
    end, pos, n = base, 0, len(data)
    while n - pos >= HEADER_UP_TO_MAGIC:
        offset, length = struct.unpack_from(">qi", data, pos)
        magic = data[pos + 16]
        if length < (V2_HEADER - LOG_OVERHEAD if magic == 2 else MIN_ENTRY_SIZE) or \
                pos + length + LOG_OVERHEAD > n:
            break
        if magic == 2:
            last = offset + struct.unpack_from(">i", data, pos + 23)[0]
        elif magic in (0, 1):
            last = offset  # a legacy entry's offset is its last inner offset
        else:
            break
        if not (last < (offset if magic == 2 else base) or offset < base or
                last - base > 2**31 - 1):
            end = last + 1  # a frame whose offsets cannot be in this segment is not counted
        pos += length + LOG_OVERHEAD
    return end


_INT = re.compile(r"^[+-]?[0-9]+$")


def _java_int(text: str, bits: int) -> int | None:
    if not _INT.match(text):
        return None
    v = int(text)
    return v if -2**(bits - 1) <= v < 2**(bits - 1) else None


def parse_checkpoint(raw: bytes) -> dict[tuple[str, int], int] | None:
    """Kafka's offset checkpoint reader (``CheckpointFile.CheckpointReadBuffer`` with
    ``OffsetCheckpointFile.Formatter``): ``{(topic, partition): offset}``, or None when Kafka
    would refuse the file."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = re.split(r"\r\n|\r|\n", text)
    if lines and lines[-1] == "":
        lines.pop()  # readLine: a final terminator ends the last line
    if not lines:
        return {}
    if _java_int(lines[0], 32) != 0:
        return None
    if len(lines) == 1:
        return {}
    count = _java_int(lines[1], 32)
    if count is None:
        return None
    out = {}
    for line in lines[2:]:
        parts = re.split(r"[ \t\n\x0b\f\r]+", line)
        while parts and parts[-1] == "":
            parts.pop()  # Java's split drops trailing empty strings
        if len(parts) != 3:
            return None
        part, off = _java_int(parts[1], 32), _java_int(parts[2], 64)
        if part is None or off is None:
            return None
        out[(parts[0], part)] = off
    return out if len(lines) - 2 == count else None


@dataclass
class Truth:
    """The judge's view of one partition (or one file, for dump): ``expected`` data records
    before the first damage from the log start on, ``after`` those of intact batches after
    it, ``damage`` (rel path, position, reason) or None, ``ambiguous``, ``log_start``,
    ``log_end`` (None when it cannot be told), ``timed`` (every intact record before the
    damage from the log start on, control records too, for ListOffsets)."""

    expected: list = field(default_factory=list)
    after: list = field(default_factory=list)
    damage: tuple | None = None
    ambiguous: bool = False
    log_start: int = 0
    log_end: int | None = None
    timed: list = field(default_factory=list)


def _segments(part_dir: str) -> list[tuple[int, str]]:
    out = []
    for name in os.listdir(part_dir):
        m = SEGMENT_RE.match(name)
        if m and os.path.isfile(os.path.join(part_dir, name)):
            out.append((int(m.group(1)), name))
    return sorted(out)


class _Walk:
    """Accumulates a Truth over the entries of segments in order."""

    def __init__(self, log_start: int, cross_segment: bool = True):
        self.t = Truth(log_start=log_start)
        self.next_offset = None
        self.cross_segment = cross_segment

    def feed(self, rel: str, base: int, entries: list[Entry], last_segment: bool,
             holds_start: bool, next_base: int | None = None,
             log_end: int | None = None) -> None:
        t = self.t
        reached_start = False
        for e in entries:
            if e.state == "zero_tail":
                return
            if e.state == "incomplete" and (last_segment or not self.cross_segment) and \
                    e is entries[-1]:
                if t.damage is None:
                    return  # a torn tail: quietly the end
                continue
            ok = e.state == "intact"
            reason = e.reason
            if ok and e.base < base:
                ok, reason = False, f"base offset {e.base} below the segment's {base}"
            elif ok and e.last - base > 2**31 - 1:
                # Kafka's LogSegment.ensureOffsetInRange: offsets are stored relative to the
                # segment's base offset in an int
                ok, reason = False, f"last offset {e.last} out of range of the segment's {base}"
            elif ok and next_base is not None and e.last >= next_base:
                # segments do not overlap: a batch ends below the next segment's base offset
                ok, reason = False, f"last offset {e.last} reaches the next segment's {next_base}"
            elif ok and log_end is not None and e.last >= log_end:
                # the log end offset is where the last segment's last batch ends
                ok, reason = False, f"last offset {e.last} reaches the log end {log_end}"
            elif ok and self.next_offset is not None and e.base < self.next_offset:
                ok, reason = False, (f"offsets go back: base offset {e.base} after "
                                     f"{self.next_offset - 1}")
            if not ok:
                if t.damage is None:
                    t.damage = (rel, e.position, reason or e.state)
                    t.ambiguous = holds_start and not reached_start and base < t.log_start
                if e.state == "intact" and reason.startswith("offsets go back") and \
                        not e.control:
                    # which of two overlapping batches lies (this one, or one before whose
                    # lastOffsetDelta was forged) no reader can tell: a reader that starts
                    # past the earlier one (a log start offset, an index entry) may deliver
                    # this one's records
                    t.after.extend(r for r in e.records if r.offset >= t.log_start)
                continue  # after a frame without a size come the batches found after it
            self.next_offset = e.last + 1
            reached_start = reached_start or e.last >= t.log_start
            shown = [r for r in e.records if r.offset >= t.log_start]
            if t.damage is None:
                t.timed.extend(shown)
                if not e.control:
                    t.expected.extend(shown)
            elif not e.control:
                t.after.extend(shown)

    def finish(self, last_base: int | None, last_has_batch: bool) -> Truth:
        t = self.t
        if t.damage is None and last_base is not None and (
                last_has_batch or self.next_offset is None or self.next_offset <= last_base):
            t.log_end = self.next_offset if last_has_batch else last_base
        return t


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def judge_partition(root: str, partition: int) -> Truth:
    """The judge's Truth for partition ``partition`` of topic ``t`` in log dir ``root``."""
    part_dir = os.path.join(root, f"{TOPIC}-{partition}")
    segs = _segments(part_dir) if os.path.isdir(part_dir) else []
    starts = None
    with contextlib.suppress(OSError):
        starts = parse_checkpoint(_read(os.path.join(root, LOG_START_CHECKPOINT)))
    ckpt = (starts or {}).get((TOPIC, partition))
    if not segs:
        return Truth(log_start=ckpt or 0)
    log_start = max(segs[0][0], ckpt if ckpt is not None else segs[0][0])
    walk = _Walk(log_start)
    # the log end offset, where the last segment's last batch ends: no batch reaches it
    log_end = framed_end(_read(os.path.join(part_dir, segs[-1][1])), segs[-1][0])
    last_has_batch = False
    for i, (base, name) in enumerate(segs):
        last = i == len(segs) - 1
        if not last and segs[i + 1][0] <= log_start:
            continue  # wholly below the log start: not read
        data = _read(os.path.join(part_dir, name))
        entries = scan_segment(data)
        walk.feed(f"{TOPIC}-{partition}/{name}", base, entries, last,
                  holds_start=base <= log_start and (last or segs[i + 1][0] > log_start),
                  next_base=None if last else segs[i + 1][0], log_end=log_end)
        if last:
            last_has_batch = any(e.state == "intact" for e in entries)
            if any(e.state == "incomplete" for e in entries[:-1]):
                # an incomplete frame with intact batches after it: a torn tail to whoever
                # frames from position 0, damage to a reader whose index reaches past it
                walk.t.ambiguous = True
            torn = next((e for e in entries if e.state == "incomplete"), None)
            if torn is not None and _index_reaches_past(
                    os.path.join(part_dir, name[:-4] + ".index"), torn.position, len(data)):
                # the same with a damaged batch after it: the log end offset is framed from
                # the last index entry (Kafka's readNextOffset), which lies past the frame
                walk.t.ambiguous = True
    return walk.finish(segs[-1][0], last_has_batch)


def _index_reaches_past(index_path: str, pos: int, size: int) -> bool:
    """Whether the ``.index`` at ``index_path`` has an entry whose position lies after
    ``pos`` and inside a segment of ``size`` bytes (where a reader may frame from)."""
    try:
        data = _read(index_path)
    except OSError:
        return False
    return any(pos < p < size for _rel, p in
               struct.iter_unpack(">ii", data[:len(data) - len(data) % 8]))


def _intact_batch_after(data: bytes, pos: int) -> int | None:
    """The position of the first whole v2 batch with a valid CRC after ``pos``, or None."""
    q = data.find(b"\x02", pos + 1 + 16)
    while q >= 0:
        p = q - 16
        length = struct.unpack_from(">i", data, p + 8)[0]
        end = p + LOG_OVERHEAD + length
        if length >= V2_HEADER - LOG_OVERHEAD and end <= len(data) and \
                struct.unpack_from(">I", data, p + 17)[0] == crc32c.crc32c(data[p + 21:end]):
            return p
        q = data.find(b"\x02", q + 1)
    return None


def judge_file(root: str, rel: str) -> Truth:
    """The judge's Truth for one ``.log`` file read on its own (how ``dump`` reads it): no
    log start, offsets increasing within the file only; but its batches are held to the
    bounds a reader of its partition holds them to, so that dump names the same first
    damage as consume: below the base offset of the next segment beside it, and in the
    last segment below the log end offset (:func:`framed_end`)."""
    base = int(os.path.basename(rel)[:20])
    walk = _Walk(log_start=-2**63, cross_segment=False)
    data = _read(os.path.join(root, rel))
    entries = scan_segment(data)
    later = [b for b, _name in _segments(os.path.join(root, os.path.dirname(rel))) if b > base]
    next_base = min(later) if later else None
    walk.feed(rel, base, entries, True, False, next_base=next_base,
              log_end=framed_end(data, base) if next_base is None else None)
    if any(e.state == "incomplete" for e in entries[:-1]):
        walk.t.ambiguous = True  # a torn tail to a reader in order; intact batches follow it
    return walk.t


def partitions(root: str) -> list[int]:
    """The partitions of topic ``t`` in ``root`` (its ``t-N`` dirs)."""
    out = []
    for name in os.listdir(root):
        m = PARTITION_DIR_RE.match(name)
        if m and m.group(1) == TOPIC and os.path.isdir(os.path.join(root, name)):
            out.append(int(m.group(2)))
    return sorted(out)


def log_files(root: str) -> list[str]:
    """Every segment ``.log`` of topic ``t`` in ``root``, relative paths, in order."""
    return [f"{TOPIC}-{p}/{name}" for p in partitions(root)
            for _base, name in _segments(os.path.join(root, f"{TOPIC}-{p}"))]


def explain(case_dir: str) -> str:
    """The judge's view of a case dir, for a person: per partition its log start, each
    segment's entries (position, size, state, offsets, reason), the first damage and the
    counts of EXPECTED and AFTER records."""
    lines = []
    for p in partitions(case_dir):
        t = judge_partition(case_dir, p)
        lines.append(f"partition {p}: log start {t.log_start}, log end {t.log_end}, "
                     f"damage {t.damage}, ambiguous {t.ambiguous}, expected "
                     f"{len(t.expected)} ({_span(t.expected)}), after {len(t.after)} "
                     f"({_span(t.after)})")
        for base, name in _segments(os.path.join(case_dir, f"{TOPIC}-{p}")):
            lines.append(f"  {name}")
            for e in scan_segment(_read(os.path.join(case_dir, f"{TOPIC}-{p}", name))):
                offsets = f" offsets {e.base}..{e.last}" if e.state == "intact" else ""
                lines.append(f"    @{e.position} size {e.size} {e.state}{offsets}"
                             f"{' control' if e.control else ''} {e.reason}")
    return "\n".join(lines)


def _span(records) -> str:
    return f"{records[0].offset}..{records[-1].offset}" if records else "-"
