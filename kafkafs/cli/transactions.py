"""``kafkafs transactions``: kafka-transactions.sh on log dirs, no broker needed
(docs/transactions.md; docs/design.md §3.5).

Sub-commands and output as Kafka 4.1's ``TransactionsCommand``: ``list``, ``describe
--transactional-id``, ``describe-producers --topic --partition``, ``find-hanging
(--topic [--partition] | --broker-id) [--max-transaction-timeout MINUTES]`` and ``abort
--topic --partition (--start-offset | --producer-id --producer-epoch
--coordinator-epoch)``; tables as ``ToolsUtils.prettyPrintTable`` prints them (each cell
padded to its column and followed by a tab). The coordinator's view is replayed from
``__transaction_state`` (log.txn_state), the producers' from each partition's producer
state. ``abort`` appends the ABORT marker a broker appends for ``WriteTxnMarkers`` (the
producer's id and epoch, its coordinator epoch): the producer state and ``.txnindex``
follow, the last stable offset moves past the transaction and read_committed readers with
it. It writes directly when no process holds the log dirs, through the daemon when a
kafkafs mount serves them, and is refused beside a broker. ``--bootstrap-server`` is
accepted and not needed; ``--broker-id`` is accepted (one node's log dirs).
"""

from __future__ import annotations

import re
import sys
import time

from ..core import control
from ..log.errors import LogError
from ..log.java_order import hashmap_order, topic_partition_hash
from ..log.txn_state import (
    TransactionStore,
    abort_marker,
    find_hanging,
    open_transactions,
)
from .common import CliError, add_log_dir_args, broker_config, open_manager
from .holder import Job
from .mount import mount_serving

DESCRIPTION = ("This tool is used to analyze the transactional state of producers in the "
               "cluster. It can be used to detect and recover from hanging transactions.")


def register(sub) -> None:
    p = sub.add_parser("transactions", help="list, describe, find hanging and abort "
                       "transactions from the log dirs (kafka-transactions.sh)",
                       description=DESCRIPTION)
    add_log_dir_args(p)
    p.add_argument("--bootstrap-server", metavar="host:port",
                   help="accepted for compatibility; kafkafs reads the log dirs")
    p.add_argument("--command-config", metavar="FILE", help="accepted and ignored")
    cmds = p.add_subparsers(title="commands", metavar="COMMAND", dest="command",
                            required=True)
    c = cmds.add_parser("list", help="list transactions")
    c.add_argument("--duration-filter", type=int, metavar="DURATION",
                   help="Duration (in millis) to filter by: if < 0, all transactions will be "
                        "returned; otherwise, only transactions running longer than this "
                        "duration will be returned")
    c.add_argument("--transactional-id-pattern", metavar="PATTERN",
                   help="Transactional id regular expression pattern to filter by")
    c = cmds.add_parser("describe", help="describe the state of an active transactional-id")
    c.add_argument("--transactional-id", required=True, help="transactional id")
    c = cmds.add_parser("describe-producers",
                        help="describe the states of active producers for a topic partition")
    c.add_argument("--broker-id", type=int, help="accepted: the log dirs are one node's")
    c.add_argument("--topic", required=True, help="topic name")
    c.add_argument("--partition", type=int, required=True, help="partition number")
    c = cmds.add_parser("abort", help="abort a hanging transaction (requires administrative "
                                      "privileges)")
    c.add_argument("--topic", required=True, help="topic name")
    c.add_argument("--partition", type=int, required=True, help="partition number")
    c.add_argument("--start-offset", type=int, help="start offset of the transaction to abort")
    c.add_argument("--producer-id", type=int, help="producer id")
    c.add_argument("--producer-epoch", type=int, help="producer epoch")
    c.add_argument("--coordinator-epoch", type=int, help="coordinator epoch")
    c = cmds.add_parser("find-hanging", help="find hanging transactions")
    c.add_argument("--broker-id", type=int, help="broker id to search for hanging "
                                                 "transactions")
    c.add_argument("--max-transaction-timeout", type=int, default=15, metavar="MINUTES",
                   help="maximum transaction timeout in minutes to limit the scope of the "
                        "search (15 minutes by default)")
    c.add_argument("--topic", help="topic name to limit search to (required if --partition "
                                   "is specified)")
    c.add_argument("--partition", type=int, help="partition number")
    p.set_defaults(func=run)


def print_table(header: list[str], rows: list[list[str]], out=None) -> None:
    """``ToolsUtils.prettyPrintTable``: every cell padded to its column's width and
    followed by a tab."""
    out = out or sys.stdout
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
    for row in [header] + rows:
        out.write("".join(cell + " " * (widths[i] - len(cell)) + "\t"
                          for i, cell in enumerate(row)) + "\n")


def run(args) -> int:
    manager = open_manager(args, write=False, lazy=True)
    try:
        return COMMANDS[args.command](args, manager)
    except CliError as exc:
        print(exc, file=sys.stderr)
        return 1
    finally:
        manager.shutdown()


def _meta_node(manager) -> str:
    import os

    for d in manager.config.log_dirs:
        try:
            with open(os.path.join(d, "meta.properties"), encoding="utf-8") as f:
                props = dict(line.strip().split("=", 1) for line in f
                             if "=" in line and not line.startswith("#"))
            return str(int(props.get("node.id", props.get("broker.id", -1))))
        except (OSError, ValueError):
            continue
    return str(manager.config.node_id)


def cmd_list(args, manager) -> int:
    store = TransactionStore(manager)
    txns = store.transactions()
    pattern = None
    if args.transactional_id_pattern is not None:
        try:
            pattern = re.compile(args.transactional_id_pattern)
        except re.error as exc:
            raise CliError(f"Failed to list transactions: Transaction ID pattern "
                           f"`{args.transactional_id_pattern}` is not a valid regular "
                           f"expression: {exc}.. Enable debug logging for additional "
                           "detail.") from None
    now = int(time.time() * 1000)
    node = _meta_node(manager)
    rows = []
    for t in txns.values():
        if pattern is not None and not pattern.fullmatch(t.transactional_id):
            continue
        if args.duration_filter is not None and args.duration_filter >= 0 and \
                now - t.start_ms <= args.duration_filter:
            continue
        rows.append([t.transactional_id, node, str(t.producer_id), t.state])
    print_table(["TransactionalId", "Coordinator", "ProducerId", "TransactionState"], rows)
    return 0


def cmd_describe(args, manager) -> int:
    t = TransactionStore(manager).get(args.transactional_id)
    if t is None:
        raise CliError(f"Failed to describe transaction state of transactional-id "
                       f"`{args.transactional_id}`: DescribeTransactions request for "
                       f"transactionalId `{args.transactional_id}` failed because the ID "
                       "could not be found. Enable debug logging for additional detail.")
    now = int(time.time() * 1000)
    started = t.start_ms >= 0
    parts = hashmap_order(dict.fromkeys(t.partitions), topic_partition_hash) \
        if t.state in ("Ongoing", "PrepareCommit", "PrepareAbort") else []
    print_table(["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                 "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs",
                 "TransactionDurationMs", "TopicPartitions"],
                [[_meta_node(manager), t.transactional_id, str(t.producer_id),
                  str(t.producer_epoch), t.state, str(t.timeout_ms),
                  str(t.start_ms) if started else "None",
                  str(now - t.start_ms) if started else "None",
                  ",".join(f"{tp}-{p}" for tp, p in parts)]])
    return 0


def _log(manager, topic: str, partition: int, what: str):
    try:
        return manager.get_log(topic, partition)
    except LogError:
        raise CliError(f"{what} {topic}-{partition}: This server does not host this "
                       "topic-partition.. Enable debug logging for additional "
                       "detail.") from None


def cmd_describe_producers(args, manager) -> int:
    lg = _log(manager, args.topic, args.partition,
              "Failed to describe producers for partition")
    rows = []
    entries = lg.producer_state.producers
    for pid in hashmap_order(list(entries), _long_hash):
        e = entries[pid]
        rows.append([str(e.producer_id), str(e.producer_epoch),
                     str(e.coordinator_epoch if e.coordinator_epoch >= 0 else -1),
                     str(e.last_sequence), str(e.last_timestamp),
                     "None" if e.current_txn_first_offset is None
                     else str(e.current_txn_first_offset)])
    print_table(["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                 "LastTimestamp", "CurrentTransactionStartOffset"], rows)
    return 0


def _long_hash(v: int) -> int:
    """``Long.hashCode``: ``(int) (v ^ (v >>> 32))``."""
    v &= 0xFFFFFFFFFFFFFFFF
    h = (v ^ (v >> 32)) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def cmd_find_hanging(args, manager) -> int:
    if args.topic is None and args.broker_id is None:
        raise CliError("The `find-hanging` command requires either --topic or --broker-id to "
                       "limit the scope of the search")
    if args.partition is not None and args.topic is None:
        raise CliError("The --partition argument requires --topic to be provided")
    if args.topic is not None and args.partition is not None:
        parts = [(args.topic, args.partition)]
    elif args.topic is not None:
        parts = [(args.topic, p) for p in manager.partitions(args.topic)]
    else:
        parts = [(t, p) for t in manager.topics() for p in manager.partitions(t)]
    now = int(time.time() * 1000)
    hanging = find_hanging(manager, TransactionStore(manager), parts,
                           args.max_transaction_timeout * 60_000, now)
    rows = [[c.topic, str(c.partition), str(c.producer_id), str(c.producer_epoch),
             str(c.coordinator_epoch if c.coordinator_epoch >= 0 else -1),
             str(c.start_offset), str(c.last_timestamp), str((now - c.last_timestamp) // 60000)]
            for c in hanging]
    print_table(["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
                 "StartOffset", "LastTimestamp", "Duration(min)"], rows)
    return 0


def cmd_abort(args, manager) -> int:
    topic, partition = args.topic, args.partition
    lg = _log(manager, topic, partition, "Failed to validate producer state for partition")
    if args.start_offset is not None:
        found = [c for c in open_transactions(lg) if c.start_offset == args.start_offset]
        if not found:
            raise CliError(f"Could not find any open transactions starting at offset "
                           f"{args.start_offset} on partition {topic}-{partition}")
        c = found[0]
    elif args.producer_id is not None:
        if args.producer_epoch is None:
            raise CliError("Missing required argument --producer-epoch")
        if args.coordinator_epoch is None:
            raise CliError("Missing required argument --coordinator-epoch")
        from ..log.txn_state import Candidate

        c = Candidate(topic, partition, args.producer_id, args.producer_epoch,
                      max(args.coordinator_epoch, 0), -1, -1)
    else:
        raise CliError("The transaction to abort must be identified either with "
                       "--start-offset (for brokers on 3.0 or above) or with --producer-id, "
                       "--producer-epoch, and --coordinator-epoch (for older brokers)")
    marker = abort_marker(c, int(time.time() * 1000))
    try:
        writer = open_manager(args, write=True, job=_job(topic, partition), lazy=True)
    except CliError:
        mnt = mount_serving(broker_config(args).log_dirs)
        if mnt is None:
            raise
        control.append_marker(mnt, topic, partition, bytes(marker))
        return 0
    try:
        wl = writer.get_log(topic, partition)
        wl.append_encoded(marker)
        wl.flush()
    except LogError as exc:
        raise CliError(f"Failed to abort transaction AbortTransactionSpec(topicPartition="
                       f"{topic}-{partition}, producerId={c.producer_id}, producerEpoch="
                       f"{c.producer_epoch}, coordinatorEpoch={max(c.coordinator_epoch, 0)}): "
                       f"{exc}. Enable debug logging for additional detail.") from None
    finally:
        writer.shutdown()
    return 0


def _job(topic: str, partition: int) -> Job:
    return Job(f"abort a transaction of {topic}-{partition}",
               lambda mnt: f"kafkafs transactions ... abort (it goes through {mnt} by itself)",
               "kafka-transactions.sh --bootstrap-server ... abort")


COMMANDS = {"list": cmd_list, "describe": cmd_describe,
            "describe-producers": cmd_describe_producers, "find-hanging": cmd_find_hanging,
            "abort": cmd_abort}

