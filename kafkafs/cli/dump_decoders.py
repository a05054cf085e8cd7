"""``kafkafs dump``'s decoders for Kafka's internal topics (``DumpLogSegments``'s
``--offsets-decoder``, ``--transaction-log-decoder``, ``--share-group-state-decoder`` and
``--cluster-metadata-decoder``), and the KRaft control records every dump shows.

A decoder replaces the record's key and payload texts with what Kafka 4.x prints
(:mod:`kafkafs.record.internal`: the schema tables' JSON, ``<DELETE>`` for a tombstone,
``Unknown record type T at offset O, skipping.``); the texts are :class:`Decoded`, so
``--json`` parses them into JSON values instead of quoting them. When several are given,
Kafka's order decides (offsets, transaction log, cluster metadata, share group state).
"""

from __future__ import annotations

import json

from ..record import control, internal
from ..record.errors import CorruptRecordError

__all__ = ["DECODERS", "Decoded", "add_decoder_args", "chosen_decoder", "control_fields",
           "json_value", "record_data"]

#: option -> (the decoder's name, help), in the order Kafka picks the first one given
DECODERS = {
    "offsets-decoder": ("offsets", ("If set, log data will be parsed as offset data from the "
                        "__consumer_offsets topic.")),
    "transaction-log-decoder": ("transaction-log", ("If set, log data will be parsed as "
                                "transaction metadata from the __transaction_state topic.")),
    "cluster-metadata-decoder": ("cluster-metadata", ("If set, log data will be parsed as "
                                 "cluster metadata records.")),
    "share-group-state-decoder": ("share-group-state", ("If set, log data will be parsed as "
                                  "share group state data from the __share_group_state "
                                  "topic.")),
}
_FAMILY = {"offsets": "group", "transaction-log": "txn", "share-group-state": "share_state"}


class Decoded(str):
    """A key, payload or control record text a decoder made: printed as it is, and with
    ``--json`` parsed into the JSON value it is (a text that is not JSON stays a
    string)."""


def add_decoder_args(p) -> None:
    """Add the decoder options to the ``dump`` parser ``p``."""
    for option, (_name, help_text) in DECODERS.items():
        p.add_argument(f"--{option}", action="store_true",
                       help=help_text + " Implies --print-data-log.")


def chosen_decoder(args) -> str | None:
    """The decoder the options name (Kafka's precedence), or None."""
    for option, (name, _help) in DECODERS.items():
        if getattr(args, option.replace("-", "_"), False):
            return name
    return None


def record_data(decoder: str, offset: int, key, value) -> tuple:
    """``(key, payload)`` of a data record as ``decoder`` prints them (each None when not
    printed). Raises CorruptRecordError for a coordinator record without a key (Kafka's
    tool stops there)."""
    if decoder == "cluster-metadata":
        return None, Decoded(internal.metadata_text(offset, value))
    k, v = internal.coordinator_text(_FAMILY[decoder], offset, key, value)
    return Decoded(k), None if v is None else Decoded(v)


def control_fields(key, value) -> dict:
    """A control record's type (``control_type``, ``control_type_id``) and what its value
    holds: ``coordinator_epoch`` of an end marker, ``control_label`` and ``control_data``
    (Kafka's JSON, :class:`Decoded`) of a KRaft control record (leader change, snapshot
    header and footer, kraft.version, voters). A value that does not decode leaves the
    rest out (Kafka then prints the generic ``controlType: NAME(ID)``)."""
    try:
        _version, type_id = control.parse_control_key(key)
    except CorruptRecordError:
        return {"control_type": "UNKNOWN", "control_type_id": -1}
    fields = {"control_type": control.control_type_name(type_id), "control_type_id": type_id}
    if type_id in (control.ABORT, control.COMMIT):
        try:
            _version, epoch = control.parse_end_txn_marker(value)
        except (CorruptRecordError, TypeError):
            return fields
        fields["coordinator_epoch"] = epoch
        return fields
    text = internal.control_text(type_id, value) if value is not None else None
    if text is not None:
        label, data = text.split(" ", 1)
        fields["control_label"] = label
        fields["control_data"] = Decoded(data)
    return fields


def json_value(value):
    """What ``--json`` shows of a :class:`Decoded` text: the JSON it holds, else the text."""
    if value.startswith("{"):
        try:
            return json.loads(value)
        except ValueError:
            pass
    return str(value)
