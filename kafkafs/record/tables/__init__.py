"""The schema tables of the messages kafkafs decodes (docs/design.md §2.5): one module per
family, each a ``TABLE`` text in the language of :mod:`kafkafs.record.schema`, parsed once
on first use (:func:`schema`).

* ``group``: the group coordinator's records (``__consumer_offsets``);
* ``txn``: the transaction coordinator's (``__transaction_state``);
* ``share_state``: the share coordinator's (``__share_group_state``);
* ``metadata``: the KRaft metadata records (``__cluster_metadata``);
* ``raft``: KRaft's control records (leader change, snapshot header and footer,
  ``kraft.version``, voters);
* ``consumer_protocol``: a classic consumer group member's subscription and assignment.

and the requests and responses of Kafka's wire protocol (:func:`protocol`), generated from
Kafka's JSON message definitions by ``tools/json2ks.py``: ``proto_basic`` (headers,
ApiVersions, Metadata, DescribeCluster, SASL), ``proto_data`` (Produce, Fetch, ListOffsets,
OffsetForLeaderEpoch, DeleteRecords), ``proto_group`` (the group coordinator's APIs),
``proto_admin`` (topics, configs, log dirs), ``proto_cluster`` (DescribeTopicPartitions,
elections, reassignments, replica log dirs, config resources), ``proto_txn`` (producer ids,
transactions).
"""

from __future__ import annotations

import functools
import importlib

from ..schema import Schema, parse_tables

__all__ = ["FAMILIES", "PROTOCOL_MODULES", "protocol", "schema"]

FAMILIES = ("group", "txn", "share_state", "metadata", "raft", "consumer_protocol")
PROTOCOL_MODULES = ("proto_basic", "proto_data", "proto_group", "proto_admin", "proto_cluster",
                    "proto_txn")


@functools.cache
def schema(family: str) -> Schema:
    """The messages of one family of :data:`FAMILIES`. Raises KeyError for another name."""
    if family not in FAMILIES:
        raise KeyError(family)
    return parse_tables(importlib.import_module(f"{__name__}.{family}").TABLE)


@functools.cache
def protocol() -> Schema:
    """Every request and response of the wire protocol kafkafs knows, and the request and
    response headers (``by_api(key, "Request")``, ``message("RequestHeader")``), parsed once."""
    return parse_tables(*(importlib.import_module(f"{__name__}.{m}").TABLE
                          for m in PROTOCOL_MODULES))
