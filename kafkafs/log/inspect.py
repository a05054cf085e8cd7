"""Check Kafka log dirs the way a broker's startup would, and repair what its recovery repairs
(``kafkafs check``).

:func:`inspect_log_dirs` reads every file read-only -- not a byte, a name or an mtime changes,
and no lock is taken -- and returns, per log dir, the :class:`Finding` list of everything
Kafka's ``LogManager.loadLogs`` / ``LogLoader`` / ``LogSegment.recover`` and the index sanity
checks would complain about or change on startup: leftover ``.deleted``/``.cleaned``/``.swap``
files, orphan indexes, missing or corrupt indexes (a ``.txnindex`` failing
``TransactionIndex.sanityCheck`` -- the only index check current Kafka makes at load -- and,
thorough only, entries out of order or past the segment's data), producer ``.snapshot`` files
that cannot be read (Kafka deletes them and rebuilds the state), invalid or torn batches (with
the position
and the bytes recovery truncates, and the later segments it deletes), offsets that go back,
missing or garbled checkpoint files, a missing ``.kafka_cleanshutdown``, ``meta.properties``
problems, offsets missing between two segments of a topic that is not compacted (a
segment deleted or lost: Kafka's recovery does not notice, readers skip the gap),
and directories a broker refuses (``-delete``/``-future``/``-stray`` ones are listed
as ignored). The partition findings come from :func:`~kafkafs.log.loader.plan_load`, the
loader's own steps run without writing (``thorough``: every segment is verified, not only
those a startup recovers).

:func:`repair_log_dirs` takes each log dir's ``.lock`` as the daemon does (refusing with the
holder's pid and command line while a daemon or broker holds it), then carries the same plan
out with :func:`~kafkafs.log.loader.load_log` (``thorough=True``: recovered segments get their
``.txnindex`` rebuilt, unreadable snapshots are deleted and the producer state is rebuilt),
flushes, writes each partition's producer snapshot at its log end offset, rewrites the
checkpoints and writes ``.kafka_cleanshutdown`` -- what Kafka's recovery followed by a clean
shutdown would leave behind. Damage Kafka's recovery does not repair (offsets that go back,
a bad ``meta.properties``, foreign directories) is reported and left alone.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..record.errors import CorruptRecordError
from . import bulk_commit, safeio
from . import checkpoint as ckpt
from .config import BrokerConfig, LogConfig, validate_topic_overrides
from .errors import (
    CorruptCheckpointError,
    InvalidConfigError,
    LogDirLockedError,
    LogError,
)
from .loader import (
    REVALIDATION_KINDS,
    UNREPAIRABLE_KINDS,
    LoadAction,
    load_log,
    plan_load,
)
from .manager import (
    CLEAN_SHUTDOWN_FILE,
    LOCK_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES,
    PARTITION_METADATA,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    LogManager,
)
from .names import (
    _BROKER_DIR,
    TOPIC_CONFIG_FILE,
    parse_partition_dir,
    parse_segment_filename,
)

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
REMOTE_INDEX_CACHE_DIR = "remote-log-index-cache"  # tiered storage's cache: Kafka skips it

PROBLEM = "problem"
NOTE = "note"
#: loader actions on files a running daemon leaves behind for a while (.deleted, .cleaned, .swap)
LEFTOVER_KINDS = ("stray-file", "invalid-swap", "swapped-out", "swap")
#: loader actions on a segment's indexes: a recovery of the segment fixes them too
INDEX_KINDS = ("missing-index", "corrupt-index")


@dataclass
class Finding:
    """One thing ``kafkafs check`` reports.

    ``log_dir``: the log dir (absolute); ``partition``: ``"<topic>-<n>"`` or None for the log
    dir itself; ``kind``: a :data:`~kafkafs.log.loader.ACTION_KINDS` value for what the loader
    does, or one of the log-dir kinds (``meta-properties``, ``checkpoint``,
    ``clean-shutdown``, ``foreign-dir``, ``ignored-dir``, ``duplicate-partition``,
    ``partition-file``, ``topic-configs``, ``lock``, ``revalidate``, ``changed``,
    ``load-failed``, ``repair-failed``, ``not-regular-file``: a link, FIFO, socket or device
    where kafkafs only ever uses regular files; ``missing-offsets``: offsets between two
    segments of a topic that is not compacted that no segment holds, :class:`OffsetGap`);
    ``path``: the file or directory concerned
    (absolute); ``message``: what is wrong, in Kafka's words where Kafka has words for it;
    ``action``: what Kafka's startup / ``--repair`` does about it, or why nothing is done;
    ``severity``: ``"problem"`` or ``"note"`` (notes never make the exit status non-zero);
    ``repairable``: whether ``--repair`` fixes it; ``at_startup``: whether a plain startup
    (the daemon's or a broker's) would do the same by itself -- False for what only the
    thorough check finds; ``position``: byte position in ``path`` or None; ``nbytes``: bytes
    a truncation removes.
    """

    log_dir: str
    partition: str | None
    kind: str
    path: str
    message: str
    action: str
    severity: str = PROBLEM
    repairable: bool = True
    at_startup: bool = True
    position: int | None = None
    nbytes: int | None = None

    def to_dict(self) -> dict:
        """The finding as a JSON-ready dict (every field)."""
        return dict(self.__dict__)


@dataclass
class LogDirReport:
    """What :func:`inspect_log_dirs` found in one log dir: ``path`` (absolute),
    ``partitions`` (names of the partition dirs, sorted), ``findings`` in discovery order,
    ``lock_holder`` (who holds ``.lock`` as ``"pid N (command line)"``, ``"another process"``
    when unknown, or None), and, after :func:`repair_log_dirs`, ``done``: the actions carried
    out, in order (:class:`~kafkafs.log.loader.LoadAction` or log-dir actions of the same
    shape)."""

    path: str
    partitions: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    lock_holder: str | None = None
    done: list[LoadAction] = field(default_factory=list)

    @property
    def problems(self) -> list[Finding]:
        """The findings of severity ``"problem"`` (they make the exit status 1)."""
        return [f for f in self.findings if f.severity == PROBLEM]

    @property
    def notes(self) -> list[Finding]:
        """The findings of severity ``"note"``."""
        return [f for f in self.findings if f.severity == NOTE]

    def to_dict(self) -> dict:
        """The report as a JSON-ready dict."""
        return {"path": self.path, "partitions": self.partitions,
                "lock_holder": self.lock_holder,
                "problems": len(self.problems),
                "unrepairable": sum(1 for f in self.problems if not f.repairable),
                "notes": len(self.notes),
                "findings": [f.to_dict() for f in self.findings],
                "done": [a.to_dict() for a in self.done]}


# -- the lock ------------------------------------------------------------------------------------
_FLOCK = struct.Struct("hhqqi")  # struct flock on Linux (native alignment): type, whence,
#                                  start, len, pid


def lock_holder(log_dir: str) -> str | None:
    """Who holds the POSIX lock on ``log_dir``/.lock (a kafkafs daemon or a Kafka broker: both
    take it, as Java's ``FileLock`` does), as ``"pid N (command line)"``; None when nobody does
    or it cannot be told (:func:`lock_holder_pid`)."""
    pid = lock_holder_pid(log_dir)
    return None if pid is None else describe_pid(pid)


def lock_holder_pid(log_dir: str) -> int | None:
    """The pid of the process holding the POSIX lock on ``log_dir``/.lock (0 or less when the
    kernel cannot tell it: a process in another pid namespace); None when nobody does or it
    cannot be told. Asks with ``F_GETLK`` on a read-only descriptor: takes no lock and
    changes nothing. Never call it in a process that holds the lock (closing any descriptor
    of the file drops that process's POSIX lock)."""
    try:
        with safeio.Dir.open(log_dir, follow=True) as root:
            fd = root.open_file(LOCK_FILE)  # never a link, never a FIFO (it would block)
    except OSError:
        return None
    try:
        query = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        answer = fcntl.fcntl(fd, fcntl.F_GETLK, query)
        l_type, _whence, _start, _len, pid = _FLOCK.unpack(answer[:_FLOCK.size])
    except (OSError, struct.error, ValueError):
        return None
    finally:
        os.close(fd)
    if l_type == fcntl.F_UNLCK:
        return None
    return pid


def describe_pid(pid: int) -> str:
    """``"pid N (command line)"``, or ``"pid N"`` when the command line cannot be read
    (another user's process, a process in another pid namespace: then N may be -1)."""
    if pid <= 0:
        return "another process"
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        argv = []
    if not argv:
        return f"pid {pid}"
    text = " ".join(" ".join(a.split()) for a in argv)
    if len(text) > 160:
        text = text[:157] + "..."
    return f"pid {pid} ({text})"


# -- reading the log dir ----------------------------------------------------------------------
def _topic_overrides(log_dir: str) -> tuple[dict[str, dict[str, str]], str | None]:
    """The topic config overrides kept in ``log_dir`` (as the LogManager reads them) and an
    error message when the file cannot be used."""
    path = os.path.join(log_dir, TOPIC_CONFIG_FILE)
    try:
        data = json.loads(ckpt.read_file(path).decode("utf-8"))
        topics = data.get("topics") or {}
        for conf in topics.values():
            validate_topic_overrides(conf)
        return topics, None
    except FileNotFoundError:
        return {}, None
    except (OSError, ValueError, AttributeError, InvalidConfigError) as exc:
        return {}, f"cannot read topic configs {path}: {exc}"


def _read_offsets(path: str) -> tuple[dict | None, str | None]:
    """``(entries, None)``, ``(None, None)`` when missing (or not a regular file),
    ``({}, error)`` when garbled."""
    if not safeio.is_file(path):
        return None, None
    try:
        return ckpt.read_offset_checkpoint(path), None
    except (CorruptCheckpointError, OSError) as exc:
        return {}, str(exc)


def _meta_problems(path: str) -> tuple[dict | None, list[str]]:
    """Read ``meta.properties`` as Kafka's ``MetaProperties.Builder`` does: ``(properties or
    None, problems in Kafka's words)``."""
    try:
        props = ckpt.read_properties(path)
    except FileNotFoundError:
        return None, []
    except (CorruptCheckpointError, OSError) as exc:
        return None, [str(exc)]
    problems = []
    raw_version = props.get("version", "0")
    try:
        version = int(raw_version)
    except ValueError:
        return props, [f"Invalid meta.properties version string '{raw_version}'"]
    if version not in (0, 1):
        return props, [f"Unknown meta.properties version number {version}"]
    key = "broker.id" if version == 0 else "node.id"
    if key in props or version == 1:
        if key not in props:
            problems.append(f"Failed to find {key}")
        else:
            try:
                int(props[key])
            except ValueError:
                problems.append(f"Unable to read {key} as a base-10 number.")
    if version == 1 and not props.get("cluster.id"):
        problems.append("cluster.id was not found.")
    if "directory.id" in props:
        try:
            ckpt.parse_uuid(props["directory.id"])
        except ValueError as exc:
            problems.append(f"Unable to read directory.id as a Uuid: {exc}")
    return props, problems


def _rel(log_dir: str, path: str) -> str:
    try:
        rel = os.path.relpath(path, log_dir)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


class _Inspector:
    """Builds the :class:`LogDirReport` of one log dir (read-only)."""

    def __init__(self, log_dir: str, config: BrokerConfig, lock_holder: str | None,
                 owned: bool):
        self.dir = log_dir
        self.config = config
        self.report = LogDirReport(path=log_dir, lock_holder=lock_holder)
        self.owned = owned  # --repair holds the lock: the dir is not live
        self.live = False
        self.partitions: dict[tuple[str, int], str] = {}
        self.unrepairable_partitions: set[str] = set()

    def add(self, kind: str, path: str, message: str, action: str, *, partition=None,
            severity=PROBLEM, repairable=True, at_startup=True, position=None,
            nbytes=None) -> Finding:
        f = Finding(self.dir, partition, kind, path, message, action, severity, repairable,
                    at_startup, position, nbytes)
        self.report.findings.append(f)
        return f

    def run(self, seen_partitions: dict) -> LogDirReport:
        d = self.dir
        live = self.live = self.report.lock_holder is not None and not self.owned
        if live:
            self.add("lock", os.path.join(d, LOCK_FILE),
                     f"The log dir is in use: {self.report.lock_holder} holds its .lock",
                     "findings describe a live log; a missing .kafka_cleanshutdown is "
                     "expected while it runs; --repair refuses until it stops",
                     severity=NOTE, repairable=False)
        entries = safeio.scan(d)
        names = sorted(entries)
        self._check_meta(names)
        overrides, err = _topic_overrides(d)
        if err is not None:
            self.add("topic-configs", os.path.join(d, TOPIC_CONFIG_FILE), err,
                     "none: kafkafs refuses to start on it; fix or remove the file by hand",
                     repairable=False)
        for name in names:
            path = os.path.join(d, name)
            mode = entries[name]
            if not os.path.isdir(path):
                if not stat.S_ISREG(mode):
                    self._not_regular(path, mode)
                continue
            if stat.S_ISLNK(mode):
                self.add("ignored-dir", path, f"{name} is a symbolic link",
                         "ignored: kafkafs never follows a symbolic link in a log dir "
                         "(a Kafka broker would load what it points to)",
                         severity=NOTE, repairable=False)
                continue
            if name == REMOTE_INDEX_CACHE_DIR:
                self.add("ignored-dir", path, f"{name} is tiered storage's index cache",
                         "ignored, as Kafka ignores it", severity=NOTE, repairable=False)
                continue
            if _BROKER_DIR.match(name):
                what = name.rsplit("-", 1)[1]
                self.add("ignored-dir", path,
                         f"{name} is a broker's -{what} directory",
                         "ignored and never touched (a Kafka broker finishes the deletion / "
                         "move itself)", severity=NOTE, repairable=False)
                continue
            tp = parse_partition_dir(name)
            if tp is None:
                self.add("foreign-dir", path,
                         f"Found directory {path}, '{name}' is not in the form of "
                         "topic-partition or topic-partition.uniqueId-delete (if marked for "
                         "deletion).\nKafka's log directories (and children) should only "
                         "contain Kafka topic data.",
                         "none: a Kafka broker refuses to start on this log dir, kafkafs "
                         "ignores the directory; move it out of the log dir by hand",
                         repairable=False)
                continue
            if tp in seen_partitions:
                self.add("duplicate-partition", path,
                         f"Duplicate log directories for {name} are found in both {path} and "
                         f"{seen_partitions[tp]}.",
                         "none: a Kafka broker refuses to start, kafkafs ignores the second "
                         "one; delete one of the two by hand", partition=name,
                         repairable=False)
                self.unrepairable_partitions.add(name)
                continue
            seen_partitions[tp] = path
            self.partitions[tp] = path
        self.report.partitions = sorted(p.rsplit("/", 1)[-1] for p in self.partitions.values())
        clean = self._check_marker(live)
        if live:
            # the holder recovered these logs when it started and writes the marker when it
            # stops: a startup now is not a recovery to simulate (findings still come from
            # verifying every segment)
            clean = True
        recovery, starts = self._check_checkpoints(live)
        for tp, path in sorted(self.partitions.items()):
            cfg = self.config.log.with_overrides(overrides.get(tp[0], {}))
            self._check_partition(tp, path, cfg, recovery.get(tp, 0), starts.get(tp, 0), clean)
        self._check_commits(live)
        return self.report

    def _check_commits(self, live: bool) -> None:
        """An unfinished bulk commit (:mod:`kafkafs.log.bulk_commit`): a problem the next
        writer (or ``--repair``) rolls forward; readers see its partitions without it."""
        for name in bulk_commit.list_records(self.dir):
            path = os.path.join(self.dir, name)
            try:
                with safeio.Dir.open(self.dir, follow=True) as root:
                    rec = bulk_commit.parse_record(self.dir, name, root.read(name))
                parts = ", ".join(
                    [f"{p.topic}-{p.partition} ({p.before}..{p.after})"
                     for p in rec.partitions]
                    + [f"topic {t.topic} ({'replaced' if t.replace else 'created'}, "
                       f"{len(t.staged)} partition(s))" for t in rec.topics])
            except (OSError, bulk_commit.CommitRecoveryError) as exc:
                self.add("interrupted-commit", path, str(exc),
                         "none: a writer refuses to start on it", repairable=False)
                continue
            if live:
                self.add("interrupted-commit", path,
                         f"A kafkalog commit is running or was interrupted: {parts}",
                         "none while the log dir is in use (its holder finishes it)",
                         severity=NOTE, repairable=False)
                continue
            self.add("interrupted-commit", path,
                     f"An interrupted kafkalog commit (kill or crash while appending): "
                     f"{parts}; readers show these partitions up to the first offset, and "
                     "not the topics created or replaced",
                     "rolled forward (the missing staged runs appended) by the next writer: "
                     "the daemon's start, a CLI writer, --repair", at_startup=True)

    def _not_regular(self, path: str, mode: int, partition: str | None = None) -> None:
        kind = safeio.describe(mode)
        if partition is None and os.path.basename(path) == LOCK_FILE:
            self.add("not-regular-file", path, f"{LOCK_FILE} is a {kind}, not a regular file",
                     "none: kafkafs refuses to start on this log dir (and --repair to lock "
                     "it); remove it by hand", repairable=False)
            return
        self.add("not-regular-file", path,
                 f"{os.path.basename(path)} is a {kind}, not a regular file",
                 "ignored: kafkafs never follows a symbolic link nor opens a special file in a "
                 "log dir (it does not exist for kafkafs; kafkafs replaces it when it writes a "
                 "file of that name); remove it by hand", partition=partition,
                 severity=NOTE, repairable=False)

    # -- log-dir files ---------------------------------------------------------------------
    def _check_meta(self, names: list[str]) -> None:
        path = os.path.join(self.dir, META_PROPERTIES)
        props, problems = _meta_problems(path)
        self.meta = props if not problems else None
        if props is None and not problems:
            self.add("meta-properties", path, f"No meta.properties file found in {self.dir}.",
                     "the kafkafs daemon writes one at startup and --repair writes the same "
                     "(a Kafka broker refuses an unformatted log dir until "
                     "kafka-storage.sh format)")
        for problem in problems:
            self.add("meta-properties", path, problem,
                     "none: a Kafka broker refuses to start on this log dir; fix the file by "
                     "hand", repairable=False)

    def _check_marker(self, live: bool) -> bool:
        path = os.path.join(self.dir, CLEAN_SHUTDOWN_FILE)
        clean = safeio.is_file(path)
        if not clean and self.partitions:
            self.add("clean-shutdown", path,
                     f"No {CLEAN_SHUTDOWN_FILE} in {self.dir}: the last shutdown was not clean",
                     "the loader recovers every partition from its recovery point (validates "
                     "every batch after it, rebuilds the indexes); --repair does that and "
                     "shuts down cleanly", severity=NOTE if live else PROBLEM)
        return clean

    def _check_checkpoints(self, live: bool) -> tuple[dict, dict]:
        d = self.dir
        out = []
        for name, effect in (
                (RECOVERY_POINT_CHECKPOINT,
                 ("resetting the recovery checkpoint to 0: after an unclean shutdown every "
                  "partition is recovered from offset 0")),
                (LOG_START_OFFSET_CHECKPOINT,
                 ("resetting to the base offset of the first segment: records below a log "
                  "start offset kept there become readable again"))):
            path = os.path.join(d, name)
            entries, err = _read_offsets(path)
            if err is not None:
                self.add("checkpoint", path, err,
                         f"Error occurred while reading {name} file of directory {d}, {effect}; "
                         "the next checkpoint (and --repair) rewrites it")
            elif entries is None and self.partitions:
                self.add("checkpoint", path, f"{name} is missing in {d}",
                         f"read as empty ({effect.split(':')[0]}); the next checkpoint (and "
                         "--repair) writes it", severity=NOTE if live else PROBLEM)
            out.append(entries or {})
        path = os.path.join(d, REPLICATION_OFFSET_CHECKPOINT)
        _entries, err = _read_offsets(path)
        if err is not None:
            self.add("checkpoint", path, f"Error while reading checkpoint file {path}: {err}",
                     "a Kafka broker takes the log dir offline; --repair rewrites it with each "
                     "partition's log end offset as its high watermark (kafkafs keeps one "
                     "replica)", at_startup=False)
        return out[0], out[1]

    # -- partitions --------------------------------------------------------------------------
    def _check_partition(self, tp, path: str, cfg: LogConfig, recovery_point: int,
                         log_start: int, clean: bool) -> None:
        name = os.path.basename(path)
        try:
            pdir = safeio.Dir.open(path)  # never through a link swapped in since the listing
            entries = safeio.scan(pdir.fd)
        except OSError as exc:
            self.add("changed", path, f"{name} could not be checked: {exc}",
                     "none; run kafkafs check again (files change under a running daemon)",
                     partition=name, repairable=False)
            return
        for fname, mode in sorted(entries.items()):
            if not stat.S_ISREG(mode):
                self._not_regular(pdir.join(fname), mode, partition=name)
        for fname, reader in ((PARTITION_METADATA, ckpt.read_partition_metadata),
                              (LEADER_EPOCH_CHECKPOINT, ckpt.read_leader_epoch_checkpoint)):
            fpath = os.path.join(path, fname)
            if not stat.S_ISREG(entries.get(fname, 0)):
                continue
            try:
                reader(fpath, dir=pdir)
            except (CorruptCheckpointError, OSError) as exc:
                self.add("partition-file", fpath, str(exc),
                         "none: a Kafka broker takes the log dir offline when it loads this "
                         "partition; Kafka's recovery does not rewrite it, fix it by hand",
                         partition=name, repairable=False)
        scans: dict = {}
        args = {"recovery_point": recovery_point, "log_start_offset": log_start,
                "had_clean_shutdown": clean, "scans": scans}
        try:
            startup = plan_load(pdir, cfg, **args)
            thorough = plan_load(pdir, cfg, thorough=True, **args)
        except OSError as exc:
            self.add("changed", path, f"{name} could not be checked: {exc}",
                     "none; run kafkafs check again (files change under a running daemon)",
                     partition=name, repairable=False)
            return
        except (LogError, CorruptRecordError) as exc:
            self.add("load-failed", path, f"Loading {name} fails: {exc}",
                     "none: the loader stops on it (the daemon cannot start); move the "
                     "partition away and restore it from a replica or backup",
                     partition=name, repairable=False)
            return
        met, gaps = _reader_walk(pdir, tp, cfg, log_start)
        thorough = _as_readers_see_it(thorough, met)
        at_startup = {_key(a) for a in startup}
        # a startup that recovers a segment rebuilds its indexes without checking them
        # first (KAFKA-7283): what is wrong with them is fixed at startup all the same
        rebuilt = {a.base_offset for a in startup if a.kind in REVALIDATION_KINDS}
        revalidated = [a for a in startup if a.kind in REVALIDATION_KINDS]
        if revalidated:
            first = revalidated[0].base_offset
            self.add("revalidate", revalidated[0].path,
                     f"Recovery starts at segment {first} (recovery point {recovery_point}): "
                     f"{len(revalidated)} segment(s) to re-validate",
                     "validate every batch and rebuild the indexes from there on",
                     partition=name, severity=NOTE)
        for a in thorough:
            if a.kind in REVALIDATION_KINDS:
                continue
            repairable = a.kind not in UNREPAIRABLE_KINDS
            if not repairable:
                self.unrepairable_partitions.add(name)
            severity, action = PROBLEM, a.action
            if self.live and a.kind in LEFTOVER_KINDS:
                # a running daemon's own work: pending deletions, a clean in progress
                severity = NOTE
                action = f"expected while the log dir is in use; at the next startup: {action}"
            self.add(a.kind, a.path, a.message, action, partition=name, severity=severity,
                     repairable=repairable,
                     at_startup=_key(a) in at_startup or (a.kind in INDEX_KINDS
                                                          and a.base_offset in rebuilt),
                     position=a.position, nbytes=a.nbytes)
        if not cfg.compact:
            for gap in gaps:
                self.add(GAP_KIND, gap.path, gap.message(), GAP_ACTION, partition=name,
                         repairable=False, at_startup=False, position=gap.position)


def _key(a: LoadAction):
    return (a.kind, a.path, a.position)


ORDER_KIND = "offsets-out-of-order"
ORDER_ACTION = ("none: Kafka's recovery does not repair this (a lookup by offset cannot find "
                "every record); move the partition away and restore it from a replica or "
                "backup")
#: loader actions that name damaged data at a byte position
DATA_KINDS = ("truncate", "invalid-tail", ORDER_KIND)


def _as_readers_see_it(actions: list[LoadAction],
                       met: CorruptRecordError | None) -> list[LoadAction]:
    """``actions`` with the partition's first damage named where every reader
    (``consume``, ``get-offsets``, ``dump``, the mount) meets it, with their reason.

    The loader's scan checks what Kafka's recovery checks, and judges each batch's offsets
    only by the batch before it: so it names the batch after a forged base offset ("offsets
    go back"), or the next segment ("the segments overlap"), and takes a batch whose last
    offset lies below its first for data. Readers also hold each batch below the next
    segment's base offset and below the log end offset, where the last segment's last batch
    ends (:meth:`~kafkafs.log.log.Log.segment_batches`). Every partition is walked once
    more as a reader walks it (:func:`_reader_walk`, whose first damage is ``met``, or None);
    a damage met before any the loader reports, and not reported already,
    becomes the partition's one offset-order finding (unrepairable: recovery does not touch
    offsets). The loader's later order findings go: one forged offset shows as several, and
    the first already says what to do with the partition."""
    first = next((i for i, a in enumerate(actions) if a.kind == ORDER_KIND), None)
    if first is not None:
        actions = [a for i, a in enumerate(actions) if i <= first or a.kind != ORDER_KIND]
    if met is None or met.path is None or met.position is None or \
            any((a.path, a.position) == (met.path, met.position) for a in actions):
        return actions
    reported = [_place(a.path, a.position) for a in actions
                if a.kind in DATA_KINDS and a.position is not None]
    if reported and min(reported) < _place(met.path, met.position):
        return actions  # behind damage the loader names (and recovery may cut away)
    old = actions[first] if first is not None else None
    where = LoadAction(ORDER_KIND, met.path,
                       f"Offsets out of order in log segment {met.path} at byte offset "
                       f"{met.position}: {met.reason}",
                       old.action if old is not None else ORDER_ACTION, position=met.position,
                       base_offset=_place(met.path, 0)[0])
    if first is None:
        return [*actions, where]
    return [*actions[:first], where, *actions[first + 1:]]


def _place(path: str, position: int) -> tuple[int, int]:
    """(segment base offset, byte position): where in a partition a place lies."""
    parsed = parse_segment_filename(os.path.basename(path))
    return (parsed[0] if parsed else -1, position)


@dataclass
class OffsetGap:
    """Offsets ``first`` to ``last`` (inclusive) held by no segment of a partition: the
    segment ``before`` (a ``.log`` path) ends at ``first - 1`` and the next segment, ``path``,
    starts at ``last + 1``; ``position``: the byte position in ``path`` where reading resumes
    (always 0: a segment's start)."""

    first: int
    last: int
    before: str
    path: str
    position: int = 0

    @property
    def count(self) -> int:
        """How many offsets are missing."""
        return self.last - self.first + 1

    def message(self) -> str:
        """The finding's message, offsets and files named."""
        return (f"Offsets {self.first} to {self.last} ({self.count} offset(s)) are missing: "
                f"{os.path.basename(self.before)} ends at offset {self.first - 1} and "
                f"{os.path.basename(self.path)} starts at offset {self.last + 1} (a segment "
                "deleted or lost; in a topic that is not compacted, offsets follow each other "
                "without a gap). Readers skip the gap without an error, as a Kafka broker "
                "serves such a log")


GAP_KIND = "missing-offsets"
GAP_ACTION = ("none: no recovery can bring the records back (Kafka's does not notice the "
              "gap); restore the missing segment (its .log and indexes) from a replica or "
              "backup. --repair leaves the gap and repairs the partition's other damage; if "
              "the topic was once compacted (cleanup.policy changed since), the gap is "
              "legitimate")


def _reader_walk(pdir: safeio.Dir, tp, cfg: LogConfig, log_start: int
                 ) -> tuple[CorruptRecordError | None, list[OffsetGap]]:
    """Walk the partition as a reader does (read-only, from the log start offset: framing,
    offsets and records decoding; CRCs are the scan's business). Returns the first damage met in framing and
    offsets (or None, also when the partition cannot be loaded: the loader's findings say
    why) and every gap between segments met before it: a segment whose base offset lies past
    the offset that follows the last batch before it (:class:`OffsetGap`). Gaps are
    legitimate in a compacted topic; the caller judges."""
    gaps: list[OffsetGap] = []
    try:
        lg = load_log(pdir, tp[0], tp[1], cfg, log_start_offset=log_start, writable=False)
    except (OSError, LogError, CorruptRecordError):
        return None, gaps
    seg_path, expected = None, None
    try:
        for seg, batch in lg.segment_batches(validate=False):
            if seg.log_path != seg_path:
                if expected is not None and seg.base_offset > expected:
                    gaps.append(OffsetGap(expected, seg.base_offset - 1, seg_path,
                                          seg.log_path))
                seg_path = seg.log_path
            expected = batch.next_offset
            try:
                batch.check_records()  # records that do not decode: damage readers meet
            except CorruptRecordError as exc:
                return exc.located(path=seg.log_path, position=batch.position), gaps
    except CorruptRecordError as exc:
        return exc, gaps
    except (OSError, LogError):
        return None, gaps
    finally:
        lg.close()
    return None, gaps


def _check_ensemble(reports: list[LogDirReport], metas: list[tuple[str, dict | None]]) -> None:
    """Kafka's ``MetaPropertiesEnsemble.verify`` across the log dirs: one cluster.id, one
    node id, distinct directory ids."""
    cluster = node = None
    seen_ids: dict[str, str] = {}
    for report, (log_dir, props) in zip(reports, metas):
        if not props:
            continue
        path = os.path.join(log_dir, META_PROPERTIES)

        def bad(message: str, report=report, log_dir=log_dir, path=path) -> None:
            report.findings.append(Finding(
                log_dir, None, "meta-properties", path, message,
                "none: a Kafka broker refuses to start with these log dirs together; fix "
                "meta.properties by hand", repairable=False))

        cid = props.get("cluster.id")
        if cid:
            if cluster is None:
                cluster = cid
            elif cid != cluster:
                bad(f"Invalid cluster.id in: {path}. Expected {cluster}, but read {cid}")
        raw = props.get("node.id", props.get("broker.id"))
        try:
            nid = int(raw) if raw is not None else None
        except ValueError:
            nid = None
        if nid is not None:
            if node is None:
                node = nid
            elif nid != node:
                bad(f"Stored node id {nid} doesn't match previous node id {node} in {path}. If "
                    "you moved your data, make sure your configured node id matches. If you "
                    "intend to create a new node, you should remove all data in your data "
                    "directories.")
        did = props.get("directory.id")
        if did:
            if did in seen_ids:
                bad(f"Duplicate directory ID {did} found. It was the ID of {seen_ids[did]}, "
                    f"but also of {log_dir}")
            else:
                seen_ids[did] = log_dir


def inspect_log_dirs(log_dirs: Iterable[str], config: BrokerConfig, *,
                     owned: bool = False) -> list[LogDirReport]:
    """Check every log dir in ``log_dirs`` (existing directories) without changing anything
    and return one :class:`LogDirReport` each, in order. ``config`` supplies the topic
    defaults (``index.interval.bytes``, ``segment.index.bytes``, ...); topic overrides are
    read from each log dir. ``owned``: the caller holds the locks (``--repair``), so a
    missing clean-shutdown marker is a problem, not the sign of a live daemon.
    Raises OSError when a log dir cannot be listed."""
    reports, metas = [], []
    seen: dict = {}
    for d in log_dirs:
        d = os.path.abspath(d)
        holder = None if owned else lock_holder(d)
        inspector = _Inspector(d, config, holder, owned)
        reports.append(inspector.run(seen))
        metas.append((d, inspector.meta))
    _check_ensemble(reports, metas)
    return reports


# -- repairing -----------------------------------------------------------------------------
def lock_log_dirs(log_dirs: Iterable[str], config: BrokerConfig) -> LogManager:
    """Take every log dir's ``.lock`` exactly as the daemon's LogManager does (``flock`` and
    the POSIX lock Java's ``FileLock`` takes; the file is created when missing). Returns the
    (not started) manager holding them; release with ``manager._release_locks()`` or
    :func:`unlock_log_dirs`. Raises LogDirLockedError naming the holder when known; nothing
    stays locked then."""
    dirs = [os.path.abspath(d) for d in log_dirs]
    manager = LogManager(config.with_log_dirs(dirs))
    for d in dirs:
        try:
            manager._lock_dir(d)
        except LogDirLockedError as exc:
            manager._release_locks()
            who = lock_holder(d)  # safe: this process holds no lock on that file now
            message = str(exc)
            if who:
                message += f" It is held by {who}."
            raise LogDirLockedError(message) from None
    return manager


def unlock_log_dirs(manager: LogManager) -> None:
    """Release the locks :func:`lock_log_dirs` took."""
    manager._release_locks()


def _done(report: LogDirReport, on_action, action: LoadAction) -> None:
    report.done.append(action)
    if on_action is not None:
        on_action(report.path, action)


def _repair_dir(report: LogDirReport, manager: LogManager, config: BrokerConfig,
                unrepairable: set[str], on_action) -> None:
    d = report.path
    if not any(f.repairable for f in report.problems):
        return
    meta_path = os.path.join(d, META_PROPERTIES)
    if not safeio.is_file(meta_path):
        manager._ensure_meta(d)
        _done(report, on_action, LoadAction(
            "meta-properties", meta_path, f"No meta.properties file found in {d}.",
            "wrote meta.properties (cluster.id, node.id, directory.id) as the daemon does"))
    marker = os.path.join(d, CLEAN_SHUTDOWN_FILE)
    clean = safeio.is_file(marker)
    if clean:
        # as LogManager.loadLogs (KAFKA-10471): a crash from here on means recovery again
        os.unlink(marker)
    recovery, _err = _read_offsets(os.path.join(d, RECOVERY_POINT_CHECKPOINT))
    starts, _err = _read_offsets(os.path.join(d, LOG_START_OFFSET_CHECKPOINT))
    recovery, starts = recovery or {}, starts or {}
    overrides, _err = _topic_overrides(d)
    new_recovery, new_starts, ends = {}, {}, {}
    all_done = True
    for name in report.partitions:
        path = os.path.join(d, name)
        tp = parse_partition_dir(name)
        if name in unrepairable:
            all_done = False
            if tp in recovery:
                new_recovery[tp] = recovery[tp]
            if tp in starts:
                new_starts[tp] = starts[tp]
            continue
        cfg = config.log.with_overrides(overrides.get(tp[0], {}))
        try:
            lg = load_log(path, tp[0], tp[1], cfg, recovery_point=recovery.get(tp, 0),
                          log_start_offset=starts.get(tp, 0), had_clean_shutdown=clean,
                          thorough=True, on_action=lambda a: _done(report, on_action, a))
        except (OSError, LogError, CorruptRecordError) as exc:
            all_done = False
            report.findings.append(Finding(
                d, name, "repair-failed", path, f"{name} could not be repaired: {exc}",
                "none: left as it was found (apart from the steps listed as done)",
                repairable=False))
            if tp in recovery:
                new_recovery[tp] = recovery[tp]
            if tp in starts:
                new_starts[tp] = starts[tp]
            continue
        try:
            for seg in lg.segments():
                seg.flush()
            lg.flush()
            lg.take_producer_snapshot()
            new_recovery[tp] = lg.recovery_point
            if lg.log_start_offset > 0:
                new_starts[tp] = lg.log_start_offset
            ends[tp] = lg.log_end_offset
        finally:
            lg.close()
    for name, entries in ((RECOVERY_POINT_CHECKPOINT, new_recovery),
                          (LOG_START_OFFSET_CHECKPOINT, new_starts)):
        path = os.path.join(d, name)
        ckpt.write_offset_checkpoint(path, entries)
        _done(report, on_action, LoadAction(
            "checkpoint", path, f"{name}: {len(entries)} entries", f"wrote {name}"))
    replication = os.path.join(d, REPLICATION_OFFSET_CHECKPOINT)
    _entries, err = _read_offsets(replication)
    if err is not None:
        ckpt.write_offset_checkpoint(replication, ends)
        _done(report, on_action, LoadAction(
            "checkpoint", replication, err,
            f"wrote {REPLICATION_OFFSET_CHECKPOINT} (high watermark = log end offset)"))
    if all_done:
        marker_bytes = json.dumps({"version": 0, "brokerEpoch": -1},
                                  separators=(",", ":")).encode()
        ckpt.atomic_write(marker, marker_bytes)
        _done(report, on_action, LoadAction(
            "clean-shutdown", marker, "every partition is recovered and flushed",
            f"wrote {CLEAN_SHUTDOWN_FILE}"))


def repair_log_dirs(log_dirs: Iterable[str], config: BrokerConfig, *,
                    on_action: Callable[[str, LoadAction], None] | None = None
                    ) -> list[LogDirReport]:
    """Lock every log dir (:func:`lock_log_dirs`; raises LogDirLockedError naming the holder
    while a daemon or broker runs, before anything changes), check it, and repair what
    Kafka's recovery repairs: leftovers handled as the loader does, bad or missing indexes
    rebuilt, invalid or torn data truncated at the last valid batch and later segments
    deleted, then every partition flushed, the checkpoints rewritten and
    ``.kafka_cleanshutdown`` written (only when every partition could be recovered).
    Partitions with damage recovery does not repair are left untouched.

    ``on_action(log_dir, action)`` is called after each step. Returns the reports of the
    check made before repairing, each with ``done`` filled in. Raises OSError on I/O
    failure (what was done so far stays done, as after a crash during startup)."""
    dirs = [os.path.abspath(d) for d in log_dirs]
    manager = lock_log_dirs(dirs, config)
    try:
        reports = inspect_log_dirs(dirs, config, owned=True)
        for report in reports:
            # a gap in the offsets does not stop the partition's other repairs: the
            # loader loads it as it is, and the gap stays (and is reported again)
            unrepairable = {f.partition for f in report.findings
                            if f.partition and f.severity == PROBLEM and not f.repairable
                            and f.kind != GAP_KIND}
            _repair_dir(report, manager, config, unrepairable, on_action)
            _finish_commits(report, config, on_action)
        return reports
    finally:
        unlock_log_dirs(manager)


def _finish_commits(report: LogDirReport, config: BrokerConfig, on_action) -> None:
    """(--repair, after the partitions were recovered) Roll the interrupted bulk commits
    of the log dir forward, as a writable LogManager's startup does. A record that cannot
    be rolled forward is left, with a finding."""
    d = report.path
    records = [f for f in report.problems if f.kind == "interrupted-commit" and f.repairable]
    if not records:
        return
    overrides, _err = _topic_overrides(d)
    clean = safeio.is_file(os.path.join(d, CLEAN_SHUTDOWN_FILE))
    opened = {}

    def get_log(topic: str, partition: int):
        if (topic, partition) not in opened:
            cfg = config.log.with_overrides((overrides or {}).get(topic, {}))
            opened[(topic, partition)] = load_log(
                os.path.join(d, f"{topic}-{partition}"), topic, partition, cfg,
                had_clean_shutdown=clean)
        return opened[(topic, partition)]

    try:
        bulk_commit.finish_interrupted(d, get_log)
    except (OSError, LogError) as exc:
        report.findings.append(Finding(
            d, None, "repair-failed", d, f"an interrupted commit could not be finished: {exc}",
            "none: the record is left", repairable=False))
        return
    finally:
        for lg in opened.values():
            lg.close()
    for f in records:
        _done(report, on_action, LoadAction(
            "finish-commit", f.path, f.message, "rolled forward: every partition holds the "
            "whole write; the staged runs and the record removed"))


def relative(report: LogDirReport, path: str) -> str:
    """``path`` relative to the report's log dir when it lies inside it."""
    return _rel(report.path, path)
