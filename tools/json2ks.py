#!/usr/bin/env python3
"""Kafka's message JSON definitions -> kafkafs's schema table language.

Reads Apache Kafka's ``*.json`` message definitions (``clients/src/main/resources/common/
message``; ``//`` comments allowed, also inside nothing but strings) and writes the same facts
in the table language of ``kafkafs/record/schema.py`` (the module docstring), following
the hand-written tables of ``kafkafs/record/tables/``:

    # <File>.json @ <tag> (<commit>)
    message <Name> [api <apiKey>] versions <validVersions> flexible <flexibleVersions> [unstable]
      <Name> <type> <versions> [nullable V] [tag N] [tagged V] [default X] [ignorable] [flexible V]
        <fields of an inline struct, two spaces deeper>
    struct <Name> versions <V>          (a commonStructs entry, after its message)
      ...

* field names and struct names as Kafka spells them (the parser lowers the first letter of a
  field name, as Kafka's generated code does); ``--lower`` writes them lowered already;
* a field without ``versions`` (tagged-only) gets its ``taggedVersions``, as Kafka's
  FieldSpec does;
* ``default`` as in the JSON, unquoted (``""`` for the empty string); JSON numbers and booleans
  given as defaults (Kafka's Jackson reads them as strings) are written as their text, and a
  JSON ``null`` (not the string ``"null"``) is no default at all, as FieldSpec reads it;
* ``flexible V`` on a field line is a field's own ``flexibleVersions`` (RequestHeader.ClientId)
  and ``unstable`` on a message line is ``"latestVersionUnstable": true``;
* left out: ``about``, ``entityType``, ``mapKey``, ``zeroCopy`` (no effect on the bytes);
  ``listeners`` and ``deprecatedVersions`` become comments.

Usage:
    json2ks.py --all [--repo R] [--tag T] [--out DIR] [--py DIR]   # the APIs of API_FILES
    json2ks.py FILE.json ...                                          # to stdout
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap

REPO = os.environ.get("KAFKA_REPO", "kafka")  # a git clone of apache/kafka
TAG = "4.1.1"
MESSAGE_DIR = "clients/src/main/resources/common/message"

# API -> the JSON files of its .ks file (request first, then response)
APIS = ("ApiVersions Metadata DescribeCluster Produce Fetch ListOffsets OffsetForLeaderEpoch "
        "InitProducerId FindCoordinator JoinGroup SyncGroup Heartbeat LeaveGroup OffsetCommit "
        "OffsetFetch OffsetDelete ListGroups DescribeGroups DeleteGroups CreateTopics DeleteTopics "
        "CreatePartitions DeleteRecords DescribeConfigs AlterConfigs IncrementalAlterConfigs "
        "DescribeLogDirs AddPartitionsToTxn AddOffsetsToTxn EndTxn TxnOffsetCommit "
        "WriteTxnMarkers DescribeProducers DescribeTransactions ListTransactions SaslHandshake "
        "SaslAuthenticate ConsumerGroupHeartbeat ConsumerGroupDescribe "
        "GetTelemetrySubscriptions DescribeTopicPartitions ElectLeaders "
        "AlterPartitionReassignments ListPartitionReassignments AlterReplicaLogDirs "
        "ListConfigResources").split()
API_FILES = {"Header": ("RequestHeader", "ResponseHeader")}
API_FILES.update({a: (a + "Request", a + "Response") for a in APIS})

# the Python modules (out_py/), one per group of APIs
GROUPS = {
    "proto_basic": ("Header ApiVersions Metadata DescribeCluster SaslHandshake SaslAuthenticate "
                    "GetTelemetrySubscriptions"),
    "proto_data": "Produce Fetch ListOffsets OffsetForLeaderEpoch DeleteRecords",
    "proto_group": ("FindCoordinator JoinGroup SyncGroup Heartbeat LeaveGroup OffsetCommit "
                    "OffsetFetch OffsetDelete ListGroups DescribeGroups DeleteGroups "
                    "ConsumerGroupHeartbeat ConsumerGroupDescribe"),
    "proto_admin": ("CreateTopics DeleteTopics CreatePartitions DescribeConfigs AlterConfigs "
                    "IncrementalAlterConfigs DescribeLogDirs"),
    "proto_cluster": ("DescribeTopicPartitions ElectLeaders AlterPartitionReassignments "
                      "ListPartitionReassignments AlterReplicaLogDirs ListConfigResources"),
    "proto_txn": ("InitProducerId AddPartitionsToTxn AddOffsetsToTxn EndTxn TxnOffsetCommit "
                  "WriteTxnMarkers DescribeProducers DescribeTransactions ListTransactions"),
}
GROUP_ABOUT = {
    "proto_cluster": "describing topic partitions and the replica placement of one node "
                     "(elections, reassignments, log dirs, config resources)",
    "proto_basic": "the request and response headers, ApiVersions, Metadata, DescribeCluster, "
                   "SASL and GetTelemetrySubscriptions",
    "proto_data": "producing, fetching and the offsets of partitions",
    "proto_group": "the group coordinator's APIs, for classic and KIP-848 consumer groups and "
                   "their offsets",
    "proto_admin": "topics, partitions, configs and log dirs",
    "proto_txn": "producer ids and transactions",
}

PRIMITIVES = {"bool", "int8", "int16", "int32", "int64", "uint16", "uint32", "float64",
              "string", "bytes", "uuid", "records"}
MESSAGE_KEYS = {"type", "name", "apiKey", "validVersions", "flexibleVersions", "fields",
                "commonStructs", "listeners", "latestVersionUnstable", "deprecatedVersions"}
FIELD_KEYS = {"name", "type", "versions", "fields", "nullableVersions", "default", "ignorable",
              "tag", "taggedVersions", "flexibleVersions", "about", "entityType", "mapKey",
              "zeroCopy"}


def strip_comments(text: str) -> str:
    """``text`` without its ``//`` comments (to the end of the line), leaving strings whole
    (a ``"//"`` inside a string is no comment)."""
    out = []
    i, n, in_string = 0, len(text), False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_string = False
            i += 1
        elif c == '"':
            in_string = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def load(text: str) -> dict:
    return json.loads(strip_comments(text))


def fmt_default(d) -> str:
    if isinstance(d, bool):
        return "true" if d else "false"
    if isinstance(d, (int, float)):
        return str(d)
    if d == "":
        return '""'
    if any(c.isspace() for c in d) or d.startswith('"'):
        raise ValueError(f"a default the table language cannot hold: {d!r}")
    return d


def _name(name: str, lower: bool) -> str:
    return name[:1].lower() + name[1:] if lower else name


class Converter:
    """Writes the table lines of one message JSON; ``notes`` collects what a reader should
    know about it (features beyond schema.py v1)."""

    def __init__(self, lower: bool = False):
        self.lower = lower
        self.notes: list[str] = []

    def message(self, d: dict, header: str) -> list[str]:
        unknown = d.keys() - MESSAGE_KEYS
        if unknown:
            raise ValueError(f"{d.get('name')}: message keys not known: {sorted(unknown)}")
        name = d["name"]
        lines = [header]
        extra = []
        if d.get("listeners"):
            extra.append("listeners: " + " ".join(d["listeners"]))
        dep = d.get("deprecatedVersions")
        if dep and dep != "none":
            extra.append(f"deprecatedVersions: {dep}")
            self.notes.append(f"{name}: deprecatedVersions {dep}")
        if "latestVersionUnstable" in d:
            extra.append(f"latestVersionUnstable: {str(d['latestVersionUnstable']).lower()}")
            if d["latestVersionUnstable"]:
                self.notes.append(f"{name}: latestVersionUnstable")
        if extra:
            lines.append("#   " + "; ".join(extra))
        head = f"message {name}"
        if "apiKey" in d:
            head += f" api {d['apiKey']}"
        head += f" versions {d['validVersions']} flexible {d.get('flexibleVersions', 'none')}"
        if d.get("latestVersionUnstable") is True:
            head += " unstable"
        lines.append(head)
        self.common = {s["name"]: s for s in d.get("commonStructs", [])}
        self.where = name
        self.fields(d.get("fields", []), 1, lines, name)
        for s in d.get("commonStructs", []):
            lines += ["", f"struct {s['name']} versions {s['versions']}"]
            self.fields(s["fields"], 1, lines, f"{name}.{s['name']}")
        return lines

    def fields(self, fields: list[dict], depth: int, lines: list[str], path: str) -> None:
        for f in fields:
            lines.append("  " * depth + self.field(f, f"{path}.{f['name']}"))
            if f.get("fields"):
                self.fields(f["fields"], depth + 1, lines, f"{path}.{f['name']}")

    def field(self, f: dict, path: str) -> str:
        unknown = f.keys() - FIELD_KEYS
        if unknown:
            raise ValueError(f"{path}: field keys not known: {sorted(unknown)}")
        t = f["type"]
        el = t.removeprefix("[]")
        if el not in PRIMITIVES:
            if not el[:1].isupper():
                raise ValueError(f"{path}: type {t} is no primitive of the table language")
            if not f.get("fields") and el not in self.common:
                raise ValueError(f"{path}: struct {el} is neither inline nor a commonStruct")
        versions = f.get("versions")
        if versions is None:
            if "taggedVersions" not in f:
                raise ValueError(f"{path}: no versions")
            versions = f["taggedVersions"]
            self.notes.append(f"{path}: no versions, taggedVersions {versions} taken")
        words = [_name(f["name"], self.lower), t, versions]
        if f.get("nullableVersions") not in (None, "none"):
            words += ["nullable", f["nullableVersions"]]
        if "tag" in f:
            words += ["tag", str(f["tag"]), "tagged", f["taggedVersions"]]
            if f["taggedVersions"] != versions:
                self.notes.append(f"{path}: tagged {f['taggedVersions']} of versions {versions}")
        elif "taggedVersions" in f:
            raise ValueError(f"{path}: taggedVersions without tag")
        if f.get("default") is None and "default" in f:
            # Jackson hands FieldSpec a Java null: no default (the empty struct, 0, ...)
            self.notes.append(f"{path}: default given as JSON null: Kafka reads no default")
        elif "default" in f:
            words += ["default", fmt_default(f["default"])]
            if not isinstance(f["default"], str):
                self.notes.append(f"{path}: default given as JSON {type(f['default']).__name__} "
                                  f"{f['default']!r}")
        if f.get("ignorable"):
            words.append("ignorable")
        if "flexibleVersions" in f:
            words += ["flexible", f["flexibleVersions"]]
            self.notes.append(f"{path}: field flexibleVersions {f['flexibleVersions']}")
        return " ".join(words)


def git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True,
                          check=True).stdout


def convert_api(repo: str, tag: str, commit: str, api: str, lower: bool = False
                ) -> tuple[str, list[str]]:
    """The table text of one API (its request and response) at ``tag``, and the notes."""
    c = Converter(lower)
    blocks = []
    for name in API_FILES[api]:
        d = load(git(repo, "show", f"{tag}:{MESSAGE_DIR}/{name}.json"))
        blocks.append("\n".join(c.message(d, f"# {name}.json @ {tag} ({commit})")))
    return "\n\n".join(blocks) + "\n", c.notes


def py_module(group: str, apis: list[str], texts: dict[str, str], tag: str, commit: str) -> str:
    """A Python module in the form of kafkafs/record/tables/: a docstring, then TABLE."""
    names = ", ".join(f"``{a}``" for a in apis)
    first = (f"Requests and responses of Kafka's wire protocol: {GROUP_ABOUT[group]} ({names}), "
             "in the table language of :mod:`kafkafs.record.schema`; ``api`` is the api key, "
             "which a request and its response share.")
    second = (f"The facts are Apache Kafka's (``{MESSAGE_DIR}``, {tag}, {commit}); the form is "
              "ours. Generated from the JSON files by json2ks.py.")
    wrap = textwrap.TextWrapper(width=92, break_on_hyphens=False, break_long_words=False)
    doc = '"""' + "\n".join(wrap.wrap(first)) + "\n\n" + "\n".join(wrap.wrap(second)) + '"""\n'
    body = "\n".join(texts[a] for a in apis)
    return doc + '\nTABLE = r"""\n' + body + '"""\n'


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("files", nargs="*", help="JSON files to convert to stdout")
    p.add_argument("--all", action="store_true", help="convert the APIs of API_FILES")
    p.add_argument("--repo", default=REPO)
    p.add_argument("--tag", default=TAG)
    p.add_argument("--out", help="write <API>.ks files here")
    p.add_argument("--py", help="write Python modules (one per group) here")
    p.add_argument("--lower", action="store_true", help="lower the first letter of field names")
    p.add_argument("--notes", action="store_true", help="print the notes to stderr")
    a = p.parse_args(argv)
    if a.files:
        c = Converter(a.lower)
        for path in a.files:
            with open(path, encoding="utf-8") as fh:
                d = load(fh.read())
            print("\n".join(c.message(d, f"# {os.path.basename(path)}")))
            print()
        if a.notes:
            print("\n".join(c.notes), file=sys.stderr)
        return 0
    if not a.all:
        p.error("give JSON files or --all")
    commit = git(a.repo, "rev-parse", f"{a.tag}^{{commit}}").strip()
    texts, notes = {}, []
    for api in API_FILES:
        texts[api], n = convert_api(a.repo, a.tag, commit, api, a.lower)
        notes += n
        if a.out:
            os.makedirs(a.out, exist_ok=True)
            with open(os.path.join(a.out, f"{api}.ks"), "w", encoding="utf-8") as fh:
                fh.write(texts[api])
    if a.py:
        os.makedirs(a.py, exist_ok=True)
        for group, apis in GROUPS.items():
            with open(os.path.join(a.py, f"{group}.py"), "w", encoding="utf-8") as fh:
                fh.write(py_module(group, apis.split(), texts, a.tag, commit))
    if not a.out and not a.py:
        sys.stdout.write("\n".join(texts.values()))
    if a.notes:
        print("\n".join(notes), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
