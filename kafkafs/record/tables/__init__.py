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
"""

from __future__ import annotations

import functools
import importlib

from ..schema import Schema, parse_tables

__all__ = ["FAMILIES", "schema"]

FAMILIES = ("group", "txn", "share_state", "metadata", "raft", "consumer_protocol")


@functools.cache
def schema(family: str) -> Schema:
    """The messages of one family of :data:`FAMILIES`. Raises KeyError for another name."""
    if family not in FAMILIES:
        raise KeyError(family)
    return parse_tables(importlib.import_module(f"{__name__}.{family}").TABLE)
