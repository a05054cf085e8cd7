"""``kafkafs reassign-partitions --generate``: kafka-reassign-partitions.sh's proposal of a
replica assignment, from the log dirs (docs/cli.md).

The current assignment is the replayed cluster metadata's (log.cluster_metadata: each
partition's replicas), or, on log dirs without ``__cluster_metadata``, this node alone for
every local partition. The proposal follows Kafka's ``AdminUtils.assignReplicasToBrokers``
(the rule of Kafka 4.0's tool):

* rack-unaware: partition p's first replica is broker ``(start + p) mod n`` of the broker
  list, the j-th other one ``replicaIndex(first, shift, j, n) = (first + 1 + (shift + j)
  mod (n - 1)) mod n``, the shift growing by one every n partitions;
* rack-aware (brokers with racks, unless ``--disable-rack-aware``): the brokers arranged
  alternating racks (``getRackAlternatedBrokerList``), the same walk with the shift times
  the number of racks, a replica taken only on a rack and broker without one yet (until
  every rack, or every broker, has one).

Kafka draws ``start`` and ``shift`` at random per topic; ``--start-index`` and ``--shift``
fix them, for repeatable output (start 0 and shift 0: partition i on broker i mod n, its
j-th replica on broker (i + j + 1) mod n of the list). Racks come from the metadata's
broker registrations or ``--broker-rack ID:RACK,...``. The output is Kafka's: the two
headings and compact JSON (``{"version":1,"partitions":[{"topic":...,"partition":...,
"replicas":[...],"log_dirs":["any",...]}]}``, sorted by topic then partition).
"""

from __future__ import annotations

import json
import random
import sys

from ..log.cluster_metadata import load_metadata
from .common import CliError, add_log_dir_args, open_manager


def register(sub) -> None:
    p = sub.add_parser("reassign-partitions", help="propose a replica assignment "
                       "(kafka-reassign-partitions.sh --generate)")
    add_log_dir_args(p)
    p.add_argument("--bootstrap-server", help="accepted for compatibility")
    p.add_argument("--generate", action="store_true", required=True,
                   help="Generate a candidate partition reassignment configuration. Note that "
                        "this only generates a candidate assignment, it does not execute it.")
    p.add_argument("--broker-list", required=True,
                   help='The list of brokers to which the partitions need to be reassigned in '
                        'the form "0,1,2".')
    p.add_argument("--topics-to-move-json-file", required=True, metavar="FILE",
                   help='{"topics":[{"topic":"foo"},{"topic":"foo1"}],"version":1}')
    p.add_argument("--disable-rack-aware", action="store_true",
                   help="Disable rack aware replica assignment")
    p.add_argument("--rack-aware", action="store_true",
                   help="use the racks of --broker-rack (or of the metadata's brokers)")
    p.add_argument("--broker-rack", metavar="ID:RACK,...",
                   help="each broker's rack (broker.rack), when the metadata has none")
    p.add_argument("--start-index", type=int, help="the first replica's broker index "
                   "(Kafka draws it at random per topic)")
    p.add_argument("--shift", type=int, help="the next replicas' shift (Kafka draws it at "
                   "random per topic)")
    p.set_defaults(func=run)


def replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def assign_rack_unaware(brokers: list[int], partitions: int, rf: int, start: int,
                        shift: int) -> dict[int, list[int]]:
    n = len(brokers)
    out = {}
    for p in range(partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        out[p] = [brokers[first]] + [brokers[replica_index(first, shift, j, n)]
                                     for j in range(rf - 1)]
    return out


def rack_alternated(racks: dict[int, str]) -> list[int]:
    """``getRackAlternatedBrokerList``: brokers taken a rack at a time, racks in name
    order, each rack's brokers in id order."""
    by_rack: dict[str, list[int]] = {}
    for b, r in sorted(racks.items()):
        by_rack.setdefault(r, []).append(b)
    lists = [by_rack[r] for r in sorted(by_rack)]
    out, i = [], 0
    while len(out) < len(racks):
        for lst in lists:
            if i < len(lst):
                out.append(lst[i])
        i += 1
    return out


def assign_rack_aware(racks: dict[int, str], partitions: int, rf: int, start: int,
                      shift: int) -> dict[int, list[int]]:
    arranged = rack_alternated(racks)
    n, num_racks = len(arranged), len(set(racks.values()))
    out = {}
    for p in range(partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        leader = arranged[first]
        replicas = [leader]
        racks_with = {racks[leader]}
        brokers_with = {leader}
        k = 0
        for _ in range(rf - 1):
            while True:
                b = arranged[replica_index(first, shift * num_racks, k, n)]
                k += 1
                rack = racks[b]
                if (rack not in racks_with or len(racks_with) == num_racks) and \
                        (b not in brokers_with or len(brokers_with) == n):
                    replicas.append(b)
                    racks_with.add(rack)
                    brokers_with.add(b)
                    break
        out[p] = replicas
    return out


def _json(assignment: dict[tuple[str, int], list[int]]) -> str:
    parts = [{"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
             for (t, p), r in sorted(assignment.items(),
                                     key=lambda kv: (kv[0][0].encode("utf-16-be"), kv[0][1]))]
    return json.dumps({"version": 1, "partitions": parts}, separators=(",", ":"),
                      ensure_ascii=False)


def run(args) -> int:
    try:
        brokers = [int(b) for b in args.broker_list.split(",")]
    except ValueError:
        raise CliError(f"invalid --broker-list {args.broker_list!r}") from None
    if len(set(brokers)) != len(brokers):
        raise CliError(f"Broker list contains duplicate entries: {sorted(set(brokers))}")
    try:
        with open(args.topics_to_move_json_file, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as exc:
        raise CliError(f"cannot read {args.topics_to_move_json_file}: {exc.strerror}") from None
    except ValueError:
        raise CliError("The input string is not a valid JSON") from None
    if doc.get("version", 1) != 1:
        raise CliError(f"Not supported version field value {doc['version']}")
    topics = [t["topic"] for t in doc.get("topics", [])]
    if len(set(topics)) != len(topics):
        raise CliError(f"List of topics to reassign contains duplicate entries: {topics}")
    manager = open_manager(args, write=False, lazy=True)
    try:
        meta = load_metadata(manager)
        current: dict[tuple[str, int], list[int]] = {}
        for t in topics:
            if meta is not None and t in meta.topics:
                for p, info in meta.topics[t].partitions.items():
                    current[(t, p)] = list(info.replicas)
            elif manager.partitions(t):
                node = max(manager.config.node_id, 0)
                for p in manager.partitions(t):
                    current[(t, p)] = [node]
            else:
                raise CliError("Error: org.apache.kafka.common.errors."
                               f"UnknownTopicOrPartitionException: Topic {t} not found.")
        racks = dict(meta.brokers) if meta is not None else {}
        if args.broker_rack:
            for item in args.broker_rack.split(","):
                b, _, r = item.partition(":")
                racks[int(b)] = r
        racks = {b: r for b, r in racks.items() if b in brokers and r}
        use_racks = not args.disable_rack_aware and bool(racks)
        if use_racks and len(racks) != len(brokers):
            raise CliError("Not all brokers have rack information. Add --disable-rack-aware in "
                           "command line to make replica assignment without rack information.")
        proposed = {}
        for t in topics:
            parts = sorted(p for tt, p in current if tt == t)
            rf = len(current[(t, parts[0])])
            if rf > len(brokers):
                raise CliError(f"Error: Replication factor: {rf} larger than available "
                               f"brokers: {len(brokers)}.")
            start = args.start_index if args.start_index is not None else \
                random.randrange(len(brokers))
            shift = args.shift if args.shift is not None else random.randrange(len(brokers))
            if use_racks:
                plan = assign_rack_aware(racks, len(parts), rf, start, shift)
            else:
                plan = assign_rack_unaware(sorted(brokers), len(parts), rf, start, shift)
            proposed.update({(t, p): r for p, r in plan.items()})
    finally:
        manager.shutdown()
    sys.stdout.write("Current partition replica assignment\n" + _json(current) + "\n\n"
                     "Proposed partition reassignment configuration\n" + _json(proposed)
                     + "\n")
    return 0
