"""``kafkafs consumer-groups``: kafka-consumer-groups.sh on log dirs, no broker needed
(docs/groups.md; docs/design.md §3.5).

The options and the output are Kafka 4.1's (``ConsumerGroupCommand``): ``--list`` (with
``--state``/``--type``), ``--describe`` (``--group``/``--all-groups``; ``--offsets``, the
default, ``--members``, ``--state``; ``--verbose``), ``--reset-offsets`` (every scenario,
``--topic T[:P,...]``/``--all-topics``, ``--dry-run`` by default, ``--execute``,
``--export``), ``--delete-offsets`` and ``--delete``. Column widths, blank lines, messages
and row order are Kafka's (rows in the order its Java ``HashMap`` s iterate them:
log.java_order).

What the broker would answer is computed from the log dirs: groups replayed from
``__consumer_offsets`` (log.groups, log.group_view), log end offsets as each partition's
high watermark, earliest offsets as log start offsets, offsets by time through the time
index. Writes are the records Kafka's group coordinator writes (log.group_writes),
appended to the group's partition of ``__consumer_offsets``: directly when no process
holds the log dirs, through the daemon when a kafkafs mount serves them (a control
request), refused with a clear message when a broker holds them.

Differences, on purpose: ``--bootstrap-server`` is accepted and not needed; an error
(a group not found, an active group's reset refused) exits 1, where Kafka's tool prints
the same line and exits 0; the COORDINATOR column names this node (``node.id`` of
``meta.properties``) at the first listener of the configuration; a partition of a topic
not in the log dirs shows ``-`` as its log end offset instead of failing the command.
"""

from __future__ import annotations

import csv
import io
import os
import re
import sys
import time
from datetime import datetime, timedelta, timezone

from ..core import control
from ..log.errors import LogError
from ..log.group_view import GroupDescription, describe, offset_rows, offsets_table
from ..log.group_writes import (
    append_group_records,
    group_tombstones,
    offset_commit_records,
    offset_tombstones,
)
from ..log.groups import GroupStore
from ..log.groups import java_string_hash as java_hash
from ..log.java_order import hashmap_order, java_string_key, topic_partition_hash
from .common import CliError, add_log_dir_args, broker_config, open_manager
from .holder import Job
from .mount import mount_serving

TOOL = ("This tool helps to list all consumer groups, describe a consumer group, delete "
        "consumer group info, or reset consumer group offsets.")
SCENARIOS = ("to_offset", "to_datetime", "by_duration", "to_earliest", "to_latest",
             "to_current", "shift_by", "from_file")
SCENARIO_SET = ("[[to-offset], [to-current], [to-datetime], [from-file], [by-duration], "
                "[to-earliest], [to-latest], [shift-by]]")
ACTIONS = ("list", "describe", "delete", "reset_offsets", "delete_offsets")
CONSUMER_STATES = {"preparingrebalance": "PreparingRebalance",
                   "completingrebalance": "CompletingRebalance", "stable": "Stable",
                   "dead": "Dead", "empty": "Empty", "assigning": "Assigning",
                   "reconciling": "Reconciling"}


class UsageError(Exception):
    """A usage error: Kafka prints it on stderr, then its help, and exits 1."""


class GroupError(Exception):
    """An error Kafka prints on stdout as ``\\nError: <message>``."""


def register(sub) -> None:
    p = sub.add_parser("consumer-groups", help="list, describe, reset and delete consumer "
                       "groups from the log dirs (kafka-consumer-groups.sh)",
                       description=TOOL + " Works on the log dirs, without a broker.")
    add_log_dir_args(p)
    p.add_argument("--bootstrap-server", metavar="server",
                   help="accepted for compatibility; kafkafs reads the log dirs")
    p.add_argument("--command-config", metavar="file", help="accepted and ignored")
    p.add_argument("--timeout", metavar="ms", help="accepted and ignored")
    for name in ("list", "describe", "delete", "reset-offsets", "delete-offsets"):
        p.add_argument(f"--{name}", action="store_true")
    p.add_argument("--group", action="append", metavar="consumer group",
                   help="The consumer group we wish to act on.")
    p.add_argument("--all-groups", action="store_true", help="Apply to all consumer groups.")
    p.add_argument("--topic", action="append", metavar="topic",
                   help="a topic (reset-offsets: topic:0,1,2 for some partitions)")
    p.add_argument("--all-topics", action="store_true",
                   help="Consider all topics assigned to a group in the `reset-offsets` "
                        "process.")
    p.add_argument("--members", action="store_true", help="Describe members of the group.")
    p.add_argument("--offsets", action="store_true",
                   help="Describe the group and list all topic partitions in the group "
                        "along with their offset lag (the default).")
    p.add_argument("--state", nargs="?", const="", default=None, metavar="states",
                   help="with --describe: the state of the group; with --list: the state "
                        "of every group, or only groups in these states (stable,empty)")
    p.add_argument("--type", nargs="?", const="", default=None, metavar="types",
                   help="with --list: the type of every group, or only these types "
                        "(classic,consumer)")
    p.add_argument("--verbose", action="store_true",
                   help="Provide additional information, if any, when describing the group.")
    p.add_argument("--dry-run", action="store_true",
                   help="Only show results without executing changes (the default).")
    p.add_argument("--execute", action="store_true", help="Execute operation.")
    p.add_argument("--export", action="store_true",
                   help="Export operation execution to a CSV format.")
    p.add_argument("--to-offset", type=int, metavar="offset")
    p.add_argument("--to-earliest", action="store_true")
    p.add_argument("--to-latest", action="store_true")
    p.add_argument("--to-current", action="store_true")
    p.add_argument("--to-datetime", metavar="datetime",
                   help="Format: 'YYYY-MM-DDThh:mm:ss.sss'")
    p.add_argument("--by-duration", metavar="duration", help="Format: 'PnDTnHnMnS'")
    p.add_argument("--shift-by", type=int, metavar="number-of-offsets")
    p.add_argument("--from-file", metavar="path to CSV file")
    p.set_defaults(func=run)


# -- validation (ConsumerGroupCommandOptions.checkArgs) --------------------------------------

def check_args(args) -> None:
    """Raise UsageError with Kafka's message for an invalid combination."""
    if args.describe:
        if not args.group and not args.all_groups:
            raise UsageError("Option [describe] takes one of these options: [all-groups], "
                             "[group]")
        if sum(map(bool, (args.members, args.offsets, args.state is not None))) > 1:
            raise UsageError("Option [describe] takes at most one of these options: "
                             "[members], [offsets], [state]")
        if args.state:
            raise UsageError("Option [describe] does not take a value for [state]")
    if args.delete:
        if not args.group and not args.all_groups:
            raise UsageError("Option [delete] takes one of these options: [all-groups], "
                             "[group]")
        if args.topic:
            raise UsageError("The consumer does not support topic-specific offset deletion "
                             "from a consumer group.")
    if args.delete_offsets and (not args.group or not args.topic):
        raise UsageError("Option [delete-offsets] takes the following options: [topic], "
                         "[group]")
    if args.reset_offsets:
        if args.dry_run and args.execute:
            raise UsageError("Option [reset-offsets] only accepts one of [execute] and "
                             "[dry-run]")
        if not args.group and not args.all_groups:
            raise UsageError("Option [reset-offsets] takes one of these options: "
                             "[all-groups], [group]")
        given = [s for s in SCENARIOS if getattr(args, s) not in (None, False)]
        if len(given) > 1:
            raise UsageError(f'Option "[{given[0].replace("_", "-")}]" can\'t be used with '
                             f'option "[{given[1].replace("_", "-")}]"')
    if args.group and args.all_groups:
        raise UsageError('Option "[group]" can\'t be used with option "[all-groups]"')
    if args.group and args.list:
        raise UsageError('Option "[group]" can\'t be used with option "[list]"')
    if args.topic and (args.list or args.describe):
        which = "list" if args.list else "describe"
        raise UsageError(f'Option "[topic]" can\'t be used with option "[{which}]"')
    for option, needs in (("members", "describe"), ("offsets", "describe"),
                          ("verbose", "describe")):
        if getattr(args, option) and not args.describe:
            raise UsageError(f"Option(s) [{option}] are unavailable given other options on "
                             "the command line")
    if args.state is not None and not (args.describe or args.list):
        raise UsageError("Option(s) [state] are unavailable given other options on the "
                         "command line")
    if args.type is not None and not args.list:
        raise UsageError("Option(s) [type] are unavailable given other options on the "
                         "command line")
    if sum(bool(getattr(args, a)) for a in ACTIONS) != 1:
        raise UsageError("Command must include exactly one action: --list, --describe, "
                         "--delete, --reset-offsets, --delete-offsets, --validate-regex")


def run(args) -> int:
    try:
        check_args(args)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        print("(kafkafs consumer-groups --help shows the options)", file=sys.stderr)
        return 1
    if args.reset_offsets and not args.dry_run and not args.execute:
        print("WARN: No action will be performed as the --execute option is missing. In a "
              "future major release, the default behavior of this command will be to "
              "prompt the user before executing the reset rather than doing a dry run. You "
              "should add the --dry-run option explicitly if you are scripting this command "
              "and want to keep the current default behavior without prompting.",
              file=sys.stderr)
    manager = open_manager(args, write=False, lazy=True)
    try:
        ctx = Context(args, manager)
        if args.list:
            return ctx.list_groups()
        if args.describe:
            return ctx.describe_groups()
        if args.reset_offsets:
            return ctx.reset_offsets()
        if args.delete_offsets:
            return ctx.delete_offsets()
        return ctx.delete_groups()
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return 1
    except GroupError as exc:
        print(f"\nError: {exc}")
        return 1
    finally:
        manager.shutdown()


# -- the work --------------------------------------------------------------------------------

def _pad(text: str, width: int) -> str:
    return text + " " * max(0, width - len(text))


def _dash(value) -> str:
    return "-" if value is None or value == "" else str(value)


class Context:
    """One command over the log dirs (a read-only manager; writes go through
    :meth:`write`)."""

    def __init__(self, args, manager):
        self.args = args
        self.manager = manager
        self.store = GroupStore(manager)
        self.store.catch_up()
        self._names = None

    @property
    def topic_names(self) -> dict[str, str]:
        if self._names is None:
            self._names = self.manager.topic_names_by_id()
        return self._names

    def description(self, group_id: str) -> GroupDescription | None:
        return describe(self.store, group_id, self.topic_names)

    def consumer_groups(self) -> list[GroupDescription]:
        """Every group ``--list`` shows, by partition then group id."""
        out = []
        for g in self.store.groups():
            d = self.description(g)
            if d is not None and d.is_consumer_group:
                out.append(d)
        return out

    def selected(self) -> list[str]:
        """``--group`` values in order, or every consumer group for ``--all-groups``."""
        if self.args.all_groups:
            return [d.group_id for d in self.consumer_groups()]
        return list(dict.fromkeys(self.args.group or []))

    # -- --list ------------------------------------------------------------------------------
    def list_groups(self) -> int:
        args = self.args
        groups = self.consumer_groups()
        if args.state is None and args.type is None:
            for d in groups:
                print(d.group_id)
            return 0
        states = _parse_states(args.state) if args.state else None
        types = _parse_types(args.type) if args.type else None
        rows = [d for d in groups if (states is None or d.state.lower() in states)
                and (types is None or d.type.lower() in types)]
        width = max([15] + [len(d.group_id) for d in rows]) + 10
        head = [_pad("GROUP", width)]
        if args.type is not None:
            head.append(_pad("TYPE", 20))
        if args.state is not None:
            head.append(_pad("STATE", 20))
        print(" ".join(head))
        for d in rows:
            line = [_pad(d.group_id, width)]
            if args.type is not None:
                line.append(_pad(d.type, 20))
            if args.state is not None:
                line.append(_pad(d.state, 20))
            print(" ".join(line))
        return 0

    # -- --describe --------------------------------------------------------------------------
    def described(self) -> list[GroupDescription]:
        out = []
        for g in sorted(self.selected(), key=java_string_key):
            d = self.description(g)
            if d is None or not d.is_consumer_group:
                if d is not None:
                    raise GroupError("Executing consumer group command failed due to "
                                     "java.lang.IllegalArgumentException: GroupId "
                                     f"{g} is not a consumer group ({d.protocol_type}).")
                raise GroupError("Executing consumer group command failed due to "
                                 "org.apache.kafka.common.errors.GroupIdNotFoundException: "
                                 f"Group {g} not found.")
            out.append(d)
        return out

    def describe_groups(self) -> int:
        groups = self.described()
        for d in groups:
            if self.args.members:
                self._members(d)
            elif self.args.state is not None:
                self._state(d)
            else:
                self._offsets(d)
        return 0

    def _member_state_note(self, d: GroupDescription) -> None:
        if d.state == "Empty":
            print(f"\nConsumer group '{d.group_id}' has no active members.", file=sys.stderr)
        elif d.state in ("PreparingRebalance", "CompletingRebalance", "Assigning",
                         "Reconciling"):
            print(f"\nWarning: Consumer group '{d.group_id}' is rebalancing.", file=sys.stderr)

    def _offsets(self, d: GroupDescription) -> None:
        self._member_state_note(d)
        rows = offset_rows(d, self.manager)
        if rows:
            print(offsets_table(rows, self.args.verbose))

    def _members(self, d: GroupDescription) -> None:
        self._member_state_note(d)
        verbose = self.args.verbose
        members = hashmap_order(d.members, lambda m: java_hash(m.member_id))
        show = d.state != "Dead" and bool(members)

        def assignment(parts) -> str:
            by_topic: dict[str, list[int]] = {}
            for t, p in parts:
                by_topic.setdefault(t, []).append(p)
            items = sorted(f"{t}:{','.join(map(str, sorted(ps)))}"
                           for t, ps in by_topic.items())
            return ";".join(items) if items else "-"

        rows = [[d.group_id, m.member_id, m.instance_id or "", m.host, m.client_id,
                 str(len(m.assignment)),
                 _dash(m.epoch) if d.type == "Consumer" else "-", assignment(m.assignment),
                 _dash(d.target_epoch) if d.type == "Consumer" else "-",
                 assignment(m.target) if d.type == "Consumer" else "-"] for m in members]
        with_instance = any(m.instance_id for m in members)
        widths = [15, 15, 17, 15, 15, 15, 15, 20, 15, 20]
        if show:
            for i in (0, 1, 2, 3, 4, 7, 9):
                widths[i] = max([widths[i]] + [len(r[i]) for r in rows])
        header = ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID",
                  "#PARTITIONS", "CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH",
                  "TARGET-ASSIGNMENT"]
        base = [0, 1, 2, 3, 4, 5] if with_instance else [0, 1, 3, 4, 5]
        out = io.StringIO()
        out.write("\n")
        for row in [header] + rows:
            line = " ".join(_pad(row[i], widths[i]) for i in base) + " "
            if verbose:
                line += " ".join(_pad(row[i], widths[i]) for i in (6, 7, 8, 9))
            out.write(line + "\n")
        sys.stdout.write(out.getvalue())

    def _state(self, d: GroupDescription) -> None:
        self._member_state_note(d)
        coordinator = self.coordinator()
        gc = max(15, len(d.group_id))
        cc = max(25, len(coordinator))
        strategy = d.protocol if d.type == "Consumer" or d.state == "Stable" else ""
        head = [_pad("GROUP", gc), _pad("COORDINATOR (ID)", cc),
                _pad("ASSIGNMENT-STRATEGY", 20), _pad("STATE", 20)]
        row = [_pad(d.group_id, gc), _pad(coordinator, cc), _pad(_dash(strategy), 20),
               _pad(d.state, 20)]
        if self.args.verbose:
            head += [_pad("GROUP-EPOCH", 15), _pad("TARGET-ASSIGNMENT-EPOCH", 25)]
            consumer = d.type == "Consumer"
            row += [_pad(str(d.generation) if consumer else "-", 15),
                    _pad(_dash(d.target_epoch) if consumer else "-", 25)]
        head.append("#MEMBERS")
        row.append(str(len(d.members)))
        print("\n" + " ".join(head) + "\n" + " ".join(row))

    def coordinator(self) -> str:
        """``host:port  (id)`` of this node: the first listener of the configuration and
        ``node.id``/``broker.id`` of a log dir's ``meta.properties``."""
        host, port = "localhost", "9092"
        config = self.manager.config
        listeners = config.advertised_listeners or config.listeners or \
            "PLAINTEXT://localhost:9092"
        if listeners:
            m = re.match(r"[^:]+://([^:,]*):(\d+)", listeners)
            if m:
                host, port = m.group(1) or "localhost", m.group(2)
        node = config.node_id
        for d in config.log_dirs:
            try:
                with open(os.path.join(d, "meta.properties"), encoding="utf-8") as f:
                    props = dict(line.strip().split("=", 1) for line in f
                                 if "=" in line and not line.startswith("#"))
                node = int(props.get("node.id", props.get("broker.id", node)))
                break
            except (OSError, ValueError):
                continue
        return f"{host}:{port}  ({node})"

    # -- --reset-offsets ---------------------------------------------------------------------
    def reset_offsets(self) -> int:
        args = self.args
        plans: dict[str, dict[tuple[str, int], int]] = {}
        failed = False
        groups = self.selected()
        for g in hashmap_order(groups, java_hash):
            d = self.description(g)
            state = "Empty" if d is None else d.state
            if state not in ("Empty", "Dead"):
                print(f"\nError: Assignments can only be reset if the group '{g}' is "
                      f"inactive, but the current state is {state}.")
                plans[g] = {}
                failed = True
                continue
            plan = self._plan(g, d)
            if plan is None:
                failed = True
                continue
            plans[g] = plan
        if args.execute:
            for g, plan in plans.items():
                if plan:
                    self.write(g, offset_commit_records(
                        g, [(t, p, o) for (t, p), o in plan.items()]))
        if args.export:
            self._export(plans, one_group=len(args.group or []) == 1)
        else:
            self._print_plans(plans)
        return 1 if failed else 0

    def _scope(self, g: str, d: GroupDescription | None) -> list[tuple[str, int]]:
        args = self.args
        if args.all_topics:
            return sorted(d.offsets) if d is not None else []
        if args.topic:
            out = []
            for spec in args.topic:
                if ":" in spec:
                    topic, parts = _parse_topic_partitions(spec)
                    out += [(topic, p) for p in parts]
                else:
                    ps = self.manager.partitions(spec)
                    if not ps:
                        raise GroupError("Executing consumer group command failed due to "
                                         "This server does not host this topic-partition.")
                    out += [(spec, p) for p in ps]
            return out
        if args.from_file:
            return []
        raise UsageError("One of the reset scopes should be defined: --all-topics, --topic.")

    def _plan(self, g: str, d: GroupDescription | None) -> dict[tuple[str, int], int] | None:
        args = self.args
        scope = self._scope(g, d)
        committed = {} if d is None else {tp: c.offset for tp, c in d.offsets.items()}
        if args.from_file:
            rows = _read_reset_file(args.from_file, one_group=len(args.group or []) == 1,
                                    group=g)
            if not rows:
                print(f"\nError: No reset plan for group {g} found")
                return None
            return {tp: self._in_range(tp, o) for tp, o in rows.items()}
        if args.to_offset is not None:
            return {tp: self._in_range(tp, args.to_offset) for tp in scope}
        if args.to_earliest:
            return {tp: self._earliest(tp) for tp in scope}
        if args.to_latest:
            return {tp: self._latest(tp) for tp in scope}
        if args.shift_by is not None:
            out = {}
            for tp in scope:
                if tp not in committed:
                    raise UsageError(f"Cannot shift offset for partition {tp[0]}-{tp[1]} "
                                     "since there is no current committed offset")
                out[tp] = self._in_range(tp, committed[tp] + args.shift_by)
            return out
        if args.to_current:
            return {tp: committed[tp] if tp in committed else self._latest(tp)
                    for tp in scope}
        if args.to_datetime is not None or args.by_duration is not None:
            if args.to_datetime is not None:
                ts = parse_kafka_datetime(args.to_datetime)
            else:
                ts = int(time.time() * 1000) - parse_duration_ms(args.by_duration)
            return {tp: self._by_time(tp, ts) for tp in scope}
        raise UsageError("Option '[reset-offsets]' requires one of the following scenarios: "
                         + SCENARIO_SET)

    def _log(self, tp):
        try:
            return self.manager.get_log(*tp)
        except LogError:
            raise GroupError("Executing consumer group command failed due to This server "
                             "does not host this topic-partition.") from None

    def _earliest(self, tp) -> int:
        return self._log(tp).log_start_offset

    def _latest(self, tp) -> int:
        return self._log(tp).high_watermark

    def _in_range(self, tp, offset: int) -> int:
        latest, earliest = self._latest(tp), self._earliest(tp)
        stamp = datetime.now().strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
        where = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
        if offset > latest:
            print(f"[{stamp}] WARN New offset ({offset}) is higher than latest offset for "
                  f"topic partition {tp[0]}-{tp[1]}. Value will be set to {latest} ({where})",
                  file=sys.stderr)
            return latest
        if offset < earliest:
            print(f"[{stamp}] WARN New offset ({offset}) is lower than earliest offset for "
                  f"topic partition {tp[0]}-{tp[1]}. Value will be set to {earliest} "
                  f"({where})", file=sys.stderr)
            return earliest
        return offset

    def _by_time(self, tp, ts: int) -> int:
        lg = self._log(tp)
        found = lg.offset_for_timestamp(ts)
        if found is None or found[0] >= lg.high_watermark:
            print(f"\nWarn: Partition {tp[1]} from topic {tp[0]} is empty. Falling back to "
                  "latest known offset.")
            return lg.high_watermark
        return found[0]

    def _print_plans(self, plans) -> None:
        out = io.StringIO()
        if plans:
            out.write("\n" + f"{_pad('GROUP', 30)} {_pad('TOPIC', 30)} {_pad('PARTITION', 10)} "
                      f"{_pad('NEW-OFFSET', 15)}")
            for g, plan in plans.items():
                for (t, p) in hashmap_order(plan, topic_partition_hash):
                    out.write("\n" + f"{_pad(g, 30)} {_pad(t, 30)} {_pad(str(p), 10)} "
                              f"{_pad(str(plan[(t, p)]), 15)}")
        print(out.getvalue())

    def _export(self, plans, one_group: bool) -> None:
        out = io.StringIO()
        for g, plan in plans.items():
            for (t, p) in hashmap_order(plan, topic_partition_hash):
                cells = ([] if one_group else [g]) + [t, str(p), str(plan[(t, p)])]
                out.write(",".join(_csv_cell(c) for c in cells) + "\n")
        print(out.getvalue())

    # -- --delete-offsets --------------------------------------------------------------------
    def delete_offsets(self) -> int:
        args = self.args
        g = args.group[0]
        if len(args.group) > 1:
            raise GroupError("Executing consumer group command failed due to Found multiple "
                             "arguments for option group, but you asked for only one")
        parts: list[tuple[str, int]] = []
        for spec in args.topic:
            if ":" in spec:
                topic, ps = _parse_topic_partitions(spec)
                parts += [(topic, p) for p in ps]
            else:
                parts += [(spec, p) for p in self.manager.partitions(spec)] or [(spec, -1)]
        d = self.description(g)
        if d is None:
            raise GroupError("The group id does not exist.")
        if d.type == "Classic" and d.state != "Empty" and d.protocol_type != "consumer":
            raise GroupError("The group is not empty.")
        subscribed = self._subscribed(d)
        status = {}
        for tp in parts:
            if tp[1] < 0 or tp[1] not in self.manager.partitions(tp[0]):
                status[tp] = ("Error: org.apache.kafka.common.errors."
                              "UnknownTopicOrPartitionException: This server does not host "
                              "this topic-partition.")
            elif tp[0] in subscribed:
                status[tp] = ("Error: org.apache.kafka.common.errors."
                              "GroupSubscribedToTopicException: Deleting offsets of a topic is "
                              "forbidden while the consumer group is actively subscribed to "
                              "it.")
            else:
                status[tp] = "Successful"
        doomed = [tp for tp, s in status.items() if s == "Successful" and tp in d.offsets]
        if doomed:
            self.write(g, offset_tombstones(g, doomed))
        if all(s == "Successful" for s in status.values()):
            print(f"Request succeeded for deleting offsets from group {g}.")
        else:
            print("\nError: Encountered some partition-level error, see the follow-up details.")
        width = max([15] + [len(t) for t, _p in status])
        out = io.StringIO()
        out.write("\n" + f"{_pad('TOPIC', width)} {_pad('PARTITION', 10)} {_pad('STATUS', 15)}")
        for t, p in sorted(status, key=lambda tp: tp[0] + str(tp[1])):
            out.write("\n" + f"{_pad(t, width)} {_pad('-' if p < 0 else str(p), 10)} "
                      f"{_pad(status[(t, p)], 15)}")
        print(out.getvalue())
        return 0 if all(s == "Successful" for s in status.values()) else 1

    def _subscribed(self, d: GroupDescription) -> set[str]:
        if d.state == "Empty":
            return set()
        topics = set()
        for m in d.members:
            topics.update(m.subscribed_topics)
            if m.subscription:
                topics.update(m.subscription.get("topics") or [])
        return topics

    # -- --delete ----------------------------------------------------------------------------
    def delete_groups(self) -> int:
        ok, failed = [], {}
        for g in self.selected():
            d = self.description(g)
            if d is None:
                failed[g] = ("org.apache.kafka.common.errors.GroupIdNotFoundException: The "
                             "group id does not exist.")
            elif d.state != "Empty":
                failed[g] = ("org.apache.kafka.common.errors.GroupNotEmptyException: The "
                             "group is not empty.")
            else:
                gp = self.store.partition_of(g)
                records = offset_tombstones(g, sorted(d.offsets)) + \
                    group_tombstones(gp.group(g))
                self.write(g, records)
                ok.append(g)
        quoted = ", ".join(f"'{g}'" for g in hashmap_order(ok, java_hash))
        if not failed:
            print(f"Deletion of requested consumer groups ({quoted}) was successful.")
            return 0
        print("\nError: Deletion of some consumer groups failed:")
        for g in hashmap_order(failed, java_hash):
            print(f"* Group '{g}' could not be deleted due to: {failed[g]}")
        if ok:
            print(f"\nThese consumer groups were deleted successfully: {quoted}")
        return 1

    # -- writing -----------------------------------------------------------------------------
    def write(self, group: str, records: list[tuple]) -> None:
        """Append ``records`` to ``group``'s partition: directly (the log dirs' lock taken),
        else through the kafkafs daemon serving them; refused beside a broker."""
        args = self.args
        try:
            writer = open_manager(args, write=True, job=_job(), lazy=True)
        except CliError:
            mnt = mount_serving(broker_config(args).log_dirs)
            if mnt is None:
                raise
            control.group_records(mnt, group, records)
            return
        try:
            append_group_records(writer, group, records)
        finally:
            writer.shutdown()


def _job() -> Job:
    return Job("write to __consumer_offsets",
               lambda mnt: f"kafkafs consumer-groups ... (it goes through {mnt} by itself)",
               "kafka-consumer-groups.sh --bootstrap-server ...")


def _parse_states(text: str) -> set[str]:
    out = set()
    for part in text.split(","):
        name = CONSUMER_STATES.get(part.strip().lower())
        if name is None:
            raise UsageError(f"Invalid state list '{text}'. Valid states are: "
                             + ", ".join(CONSUMER_STATES.values()))
        out.add(name.lower())
    return out


def _parse_types(text: str) -> set[str]:
    out = set()
    for part in text.lower().split(","):
        if part.strip() not in ("classic", "consumer"):
            raise UsageError(f"Invalid types list '{text}'. Valid types are: Consumer, Classic")
        out.add(part.strip())
    return out


def _parse_topic_partitions(spec: str) -> tuple[str, list[int]]:
    pieces = spec.split(":")
    if len(pieces) != 2 or not pieces[0] or not pieces[1]:
        raise UsageError(f"Invalid topic arg '{spec}', expected topic name and partitions")
    parts = []
    for p in pieces[1].split(","):
        if not p.strip().lstrip("-").isdigit():
            raise UsageError(f"Invalid partition '{p}' specified in topic arg '{spec}''")
        parts.append(int(p))
    return pieces[0], parts


def parse_kafka_datetime(text: str) -> int:
    """``Utils.getDateTime``: ``yyyy-MM-dd'T'HH:mm:ss.SSS`` with an optional zone (``Z``,
    ``+hh``, ``+hh:mm``, ``+hhmm``); no zone is UTC; milliseconds are required. Epoch ms.
    Raises GroupError with Kafka's message."""
    if "T" not in text:
        raise GroupError("Executing consumer group command failed due to "
                         "java.text.ParseException: Error parsing timestamp. It does not "
                         "contain a 'T' according to ISO8601 format")
    m = re.match(r"^(\d{1,4})-(\d{1,2})-(\d{1,2})T(\d{1,2}):(\d{1,2}):(\d{1,2})\.(\d{1,3})"
                 r"(Z|[+-]\d{2}(?::?\d{2})?)?", text)
    if m is None:
        raise GroupError("Executing consumer group command failed due to "
                         f'java.text.ParseException: Unparseable date: "{text}"')
    y, mo, d, h, mi, s, ms = (int(x) for x in m.groups()[:7])
    zone = m.group(8) or "Z"
    offset = timedelta(0)
    if zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        hours = int(zone[1:3])
        minutes = int(zone[4:6]) if len(zone) == 6 else 0  # +0530 is read as +05 (Kafka)
        offset = sign * timedelta(hours=hours, minutes=minutes)
    try:
        dt = datetime(y, mo, d, h, mi, s, ms * 1000, tzinfo=timezone(offset))
    except ValueError:
        raise GroupError("Executing consumer group command failed due to "
                         f'java.text.ParseException: Unparseable date: "{text}"') from None
    return int(dt.timestamp() * 1000)


def parse_duration_ms(text: str) -> int:
    """``java.time.Duration.parse``: ``[-]PnDTnHnMn.nS`` in milliseconds. Raises GroupError."""
    m = re.fullmatch(r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?"
                     r"(?:([-+]?\d+(?:[.,]\d{0,9})?)S)?)?", text.strip(), re.IGNORECASE)
    if m is None or text.strip().upper().endswith("T") or \
            not any(m.group(i) for i in range(2, 6)):
        raise GroupError("Executing consumer group command failed due to Text cannot be "
                         "parsed to a Duration")
    days, hours, minutes = (int(m.group(i) or 0) for i in (2, 3, 4))
    seconds = float((m.group(5) or "0").replace(",", "."))
    total = ((days * 24 + hours) * 60 + minutes) * 60_000 + round(seconds * 1000)
    return -total if m.group(1) == "-" else total


def _csv_cell(text: str) -> str:
    """Jackson CSV's loose quoting: longer than 24 characters, or a character below
    ``-``, quoted with ``"`` doubled."""
    if len(text) > 24 or any(c < "-" for c in text):
        return '"' + text.replace('"', '""') + '"'
    return text


def _read_reset_file(path: str, one_group: bool, group: str) -> dict[tuple[str, int], int]:
    """The offsets a ``--from-file`` CSV gives ``group``: ``topic,partition,offset`` lines
    (with one ``--group``) or ``group,topic,partition,offset`` lines."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = [row for row in csv.reader(f) if row]
    except OSError as exc:
        raise GroupError(f"Executing consumer group command failed due to {exc}") from None
    three = one_group and lines and len(lines[0]) == 3
    out = {}
    for row in lines:
        try:
            if three:
                t, p, o = row
                g = group
            else:
                g, t, p, o = row
            if g == group:
                out[(t, int(p))] = int(o)
        except ValueError:
            raise GroupError("Executing consumer group command failed due to a line of "
                             f"{path} that does not parse: {','.join(row)}") from None
    return out

