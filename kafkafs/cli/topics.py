"""``kafkafs topics``: kafka-topics.sh on a log dir (--create, --list, --describe, --delete,
--alter), with Kafka's option names and output lines."""

from __future__ import annotations

import datetime
import os
import shlex

from ..log import checkpoint as ckpt
from ..log import cleaner_status
from ..log.cleaner_manager import LogCleanerManager
from ..log.errors import LogError
from ..log.manager import PARTITION_METADATA
from .common import CliError, add_log_dir_args, open_manager, parse_kv
from .holder import Job


def register(sub) -> None:
    p = sub.add_parser(
        "topics", help="create, list, describe, alter or delete topics (kafka-topics.sh)",
        description="kafka-topics.sh on log dirs. --config takes both of Kafka's meanings: "
                    "--config KEY=VALUE is a topic config (as in kafka-topics.sh), --config "
                    "FILE (no '=') the broker's server.properties, whose log.dirs are used.")
    add_log_dir_args(p, topic_configs=True)
    action = p.add_mutually_exclusive_group(required=True)
    for name in ("create", "list", "describe", "delete", "alter"):
        action.add_argument(f"--{name}", action="store_true")
    p.add_argument("--topic", help="topic name")
    p.add_argument("--partitions", type=int, help="number of partitions")
    p.add_argument("--replication-factor", type=int, default=1,
                   help="accepted for compatibility; kafkafs keeps one replica")
    p.add_argument("--delete-config", action="append", default=[], metavar="KEY",
                   help="remove a topic config override (with --alter)")
    p.add_argument("--if-not-exists", action="store_true")
    p.add_argument("--if-exists", action="store_true")
    p.set_defaults(func=run)


def _kv(items) -> dict[str, str]:
    return parse_kv(items, "config", strip_values=True)


def run(args) -> int:
    write = args.create or args.delete or args.alter
    if write and not args.topic:
        raise CliError("--topic is required with --create, --delete and --alter")
    manager = open_manager(args, write=write, job=_job(args) if write else None)
    try:
        if args.list:
            for t in manager.topics():
                print(t)
        elif args.describe and _describe_from_metadata(manager, args.topic):
            pass
        elif args.describe:
            topics = [args.topic] if args.topic else manager.topics()
            # the cleaner's checkpoints and saved results, read once for every topic
            cm = LogCleanerManager(manager.config.log_dirs, manager.logs, read_only=True)
            saved = cleaner_status.load(manager.config.log_dirs)
            for t in topics:
                if not manager.load_topic(t):  # that topic's partitions only are loaded
                    raise CliError(f"Topic '{t}' does not exist as expected")
                _describe(manager, t, cm, saved)
        elif args.create:
            if manager.partitions(args.topic) and args.if_not_exists:
                return 0
            manager.create_topic(args.topic, args.partitions, _kv(args.topic_config))
            print(f"Created topic {args.topic}.")
        elif args.delete:
            if not manager.partitions(args.topic) and args.if_exists:
                return 0
            manager.delete_topic(args.topic)
        elif args.alter:
            if args.partitions is not None:
                manager.add_partitions(args.topic, args.partitions)
            if args.topic_config or args.delete_config:
                overrides = manager.topic_overrides(args.topic)
                overrides.update(_kv(args.topic_config))
                for k in args.delete_config:
                    overrides.pop(k, None)
                manager.alter_topic_config(args.topic, overrides)
    except LogError as exc:
        raise CliError(str(exc)) from None
    finally:
        manager.shutdown()
    return 0


def _job(args) -> Job:
    """What a writing ``topics`` command does, and how through a daemon's mount (docs/tree.md:
    mkdir/rmdir a topic, mkdir a partition, the topic's ``config`` file)."""
    topic = args.topic
    kafka_tool = "kafka-topics.sh --bootstrap-server ..."
    configs = _kv(args.topic_config)
    if args.create:
        def through(mnt: str) -> str:
            path = os.path.join(mnt, topic)
            steps = [f"mkdir {shlex.quote(path)}"]
            if args.partitions is not None and args.partitions > 1:
                steps.append(f"mkdir {shlex.quote(os.path.join(path, str(args.partitions - 1)))}")
            if configs:
                lines = " ".join(shlex.quote(f"{k}={v}") for k, v in configs.items())
                steps.append(f"printf '%s\\n' {lines} > "
                             f"{shlex.quote(os.path.join(path, 'config'))}")
            return " && ".join(steps)

        return Job("create the topic", through, kafka_tool)
    if args.delete:
        return Job("delete the topic",
                   lambda mnt: f"rmdir {shlex.quote(os.path.join(mnt, topic))}", kafka_tool)

    def alter(mnt: str) -> str:
        path = os.path.join(mnt, topic)
        steps = []
        if args.partitions is not None:
            steps.append(f"mkdir {shlex.quote(os.path.join(path, str(args.partitions - 1)))}")
        if configs or args.delete_config:
            change = [f"set {', '.join(f'{k}={v}' for k, v in configs.items())}"] if configs \
                else []
            if args.delete_config:
                change.append(f"remove {', '.join(args.delete_config)}")
            steps.append(f"edit {shlex.quote(os.path.join(path, 'config'))} ({'; '.join(change)};"
                         " writing it replaces the topic's overrides)")
        return ", then ".join(steps) or f"ls {shlex.quote(path)}"

    return Job("change the topic", alter,
               "kafka-topics.sh / kafka-configs.sh --bootstrap-server ...")


def _describe_from_metadata(manager, topic: str | None) -> bool:
    """``kafka-topics --describe`` of a KRaft broker's log dir: the topics, partitions and
    configs replayed from ``__cluster_metadata`` (log.cluster_metadata), in Kafka 4.x's
    lines (``Topic: T<TAB>TopicId: ...<TAB>Configs: k=v,...``, then per partition
    ``<TAB>Topic: T<TAB>Partition: P<TAB>Leader: L<TAB>Replicas: ...<TAB>Isr: ...<TAB>Elr:
    ...<TAB>LastKnownElr: ...``). Topics in name order; Configs are the topic's own
    ConfigRecords. False when the log dirs hold no cluster metadata (the caller describes
    the local partitions instead)."""
    from ..log.cluster_metadata import load_metadata

    meta = load_metadata(manager)
    if meta is None or not meta.topics:
        return False
    names = [topic] if topic else sorted(meta.topics)
    for name in names:
        t = meta.topics.get(name)
        if t is None:
            raise CliError(f"Topic '{name}' does not exist as expected")
        parts = [t.partitions[p] for p in sorted(t.partitions)]
        rf = len(parts[0].replicas) - len(parts[0].adding) if parts else 0
        configs = ",".join(f"{k}={v}" for k, v in sorted(t.configs.items()))
        topic_id = "" if t.topic_id == "AAAAAAAAAAAAAAAAAAAAAA" else f"\tTopicId: {t.topic_id}"
        print(f"Topic: {name}{topic_id}\tPartitionCount: {len(parts)}\t"
              f"ReplicationFactor: {rf}\tConfigs: {configs}")
        for p in parts:
            ids = (lambda xs: ",".join(map(str, xs)))
            leader = "none" if p.leader < 0 else str(p.leader)
            moving = f"\tAdding Replicas: {ids(p.adding)}\tRemoving Replicas: " \
                f"{ids(p.removing)}" if p.adding or p.removing else ""
            print(f"\tTopic: {name}\tPartition: {p.partition}\tLeader: {leader}\t"
                  f"Replicas: {ids(p.replicas)}\tIsr: {ids(p.isr)}{moving}\t"
                  f"Elr: {ids(p.elr)}\tLastKnownElr: {ids(p.last_known_elr)}")
    return True


def _describe(manager, topic: str, cm: LogCleanerManager, saved: dict) -> None:
    parts = manager.partitions(topic)
    overrides = manager.topic_overrides(topic)
    first = manager.get_log(topic, parts[0])
    try:
        topic_id = ckpt.read_partition_metadata(first.pdir.join(PARTITION_METADATA),
                                                dir=first.pdir)
    except (OSError, LogError):
        topic_id = "AAAAAAAAAAAAAAAAAAAAAA"
    configs = ",".join(f"{k}={v}" for k, v in sorted(overrides.items()))
    node = max(manager.config.node_id, 0)
    print(f"Topic: {topic}\tTopicId: {topic_id}\tPartitionCount: {len(parts)}\t"
          f"ReplicationFactor: 1\tConfigs: {configs}")
    for p in parts:
        lg = manager.get_log(topic, p)
        print(f"\tTopic: {topic}\tPartition: {p}\tLeader: {node}\tReplicas: {node}\tIsr: {node}"
              f"\tLogStartOffset: {lg.log_start_offset}\tLogEndOffset: {lg.log_end_offset}"
              f"\tSize: {lg.size_in_bytes()}\tDir: {os.path.dirname(lg.dir)}"
              f"{_cleaning(cm, lg, saved.get(lg.name))}")


def _cleaning(cm: LogCleanerManager, lg, saved: dict | None) -> str:
    """The cleaner's columns of a partition: its cleanup policy; for a compacted one the
    dirty ratio and what the last pass did (``kafkafs-cleaner-status.json``)."""
    out = f"\tCleanupPolicy: {lg.config.cleanup_policy}"
    if not lg.config.compact:
        return out
    status = cm.partition_status((lg.topic, lg.partition), lg)
    out += f"\tDirtyRatio: {status.dirty_ratio:.2f}"
    bad = (saved or {}).get("uncleanable")
    last = (saved or {}).get("last_result")
    if bad:
        out += (f"\tCleaner: uncleanable since {_when(bad['since_ms'])} ({bad['failures']} "
                f"failure(s), retry at {_when(bad['retry_at_ms'])}): {bad['error']}")
    elif last and last.get("aborted"):
        out += f"\tCleaner: last pass aborted at {_when(last['time_ms'])}"
    elif last:
        out += (f"\tCleaner: cleaned at {_when(last['time_ms'])}, offsets "
                f"[{last['first_dirty_offset']}, {last['end_offset']}): "
                f"{last['bytes_read']} bytes read, {last['bytes_written']} written, "
                f"{last['records_dropped']} records dropped ({last['tombstones_dropped']} "
                f"tombstones) in {last['duration_ms'] / 1000:.1f} s")
    else:
        out += "\tCleaner: not cleaned yet"
    return out


def _when(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ")
