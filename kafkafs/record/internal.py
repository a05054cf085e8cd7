"""The records of Kafka's internal topics, decoded by the schema tables (docs/design.md §2.5).

* Coordinator records (``__consumer_offsets``: the group coordinator;
  ``__transaction_state``: the transaction coordinator; ``__share_group_state``: the share
  coordinator), as Kafka's ``CoordinatorRecordSerde`` reads them: the key is an int16
  record type then the key message (its version is 0, the type selects it), the value an
  int16 version then the value message of the same type, a null value a tombstone
  (:func:`decode_coordinator`).
* Metadata records (``__cluster_metadata``), as ``AbstractApiMessageSerde`` reads them:
  the value is three unsigned varints -- the frame version (1), the apiKey, the version --
  then the message; the key is null (:func:`decode_metadata`).
* KRaft's control records, in control batches: the key is an int16 version (0) and an
  int16 type, the value the bare message (:func:`decode_control`).

Each also has its text as ``kafka-dump-log``'s decoders print it (Kafka 4.x
``DumpLogSegments``: ``CoordinatorRecordMessageParser``, ``ClusterMetadataLogMessageParser``,
``printControlRecord``), the JSON of :mod:`kafkafs.record.schema_json`. Raises
:class:`~kafkafs.record.errors.CorruptRecordError` with Kafka's words for bytes that do not
decode (:class:`UnknownRecordTypeError` for a type the tables do not know). No I/O.
"""

from __future__ import annotations

import base64
import struct
from dataclasses import dataclass

from . import tables
from .errors import CorruptRecordError
from .schema import Message
from .schema_json import RawJson, json_string, struct_json

__all__ = ["CONSUMER_OFFSETS", "METADATA_TOPIC", "SHARE_GROUP_STATE", "TOPIC_FAMILIES",
           "TRANSACTION_STATE", "CoordinatorRecord", "UnknownRecordTypeError", "control_text",
           "coordinator_text", "decode_control", "decode_coordinator", "decode_metadata",
           "metadata_text", "metadata_type_name", "record_json"]

CONSUMER_OFFSETS = "__consumer_offsets"
TRANSACTION_STATE = "__transaction_state"
SHARE_GROUP_STATE = "__share_group_state"
METADATA_TOPIC = "__cluster_metadata"

#: the coordinator topic -> the table family of its records
COORDINATOR_FAMILIES = {CONSUMER_OFFSETS: "group", TRANSACTION_STATE: "txn",
                        SHARE_GROUP_STATE: "share_state"}
#: every internal topic whose records the tables decode -> its family
TOPIC_FAMILIES = {**COORDINATOR_FAMILIES, METADATA_TOPIC: "metadata"}

_I16 = struct.Struct(">h")
_GROUP_METADATA = 2  # GroupMetadataKey/Value's record type
_CONSUMER_PROTOCOL_TYPE = "consumer"


class UnknownRecordTypeError(CorruptRecordError):
    """A coordinator record of a type the tables do not know (Kafka's
    ``UnknownRecordTypeException``): ``record_type``."""

    def __init__(self, record_type: int):
        super().__init__(f"Unknown record type {record_type}")
        self.record_type = record_type


@dataclass(frozen=True)
class CoordinatorRecord:
    """A decoded coordinator record: ``type`` (the key's record type), ``key_message``,
    the version its body was read in (``key_version``: 0, or the record type for Kafka
    4.0's key schemas, whose versions were the type) and ``key`` (a dict), ``version`` of
    the value and ``value_message`` and ``value`` (None for a tombstone)."""

    type: int
    key_message: Message
    key_version: int
    key: dict
    version: int | None
    value_message: Message | None
    value: dict | None


def _version(buf, what: str) -> int:
    if buf is None or len(buf) < 2:
        raise CorruptRecordError(f"Could not read version from {what}'s buffer.")
    return _I16.unpack_from(buf)[0]


def _read(message: Message, buf, version: int, what: str) -> dict:
    try:
        return message.decode(buf, version, pos=2, exact=False)
    except (CorruptRecordError, ValueError) as exc:
        raise CorruptRecordError(f"Could not read record with version {version} from "
                                 f"{what}'s buffer due to: {exc}.") from None


def decode_coordinator(family: str, key, value) -> CoordinatorRecord:
    """The coordinator record ``key``/``value`` (bytes; ``value`` None: a tombstone) of a
    table family (:data:`COORDINATOR_FAMILIES`), as ``CoordinatorRecordSerde.deserialize``
    reads it (bytes after a message are not checked). Raises UnknownRecordTypeError,
    CorruptRecordError."""
    schema = tables.schema(family)
    record_type = _version(key, "key")
    key_message = schema.by_api(record_type, "Key")
    if key_message is None:
        raise UnknownRecordTypeError(record_type)
    key_version = 0 if 0 in key_message.versions else record_type
    key_value = _read(key_message, key, key_version, "key")
    if value is None:
        return CoordinatorRecord(record_type, key_message, key_version, key_value, None, None,
                                 None)
    value_message = schema.by_api(record_type, "Value")
    if value_message is None:
        raise UnknownRecordTypeError(record_type)
    version = _version(value, "value")
    return CoordinatorRecord(record_type, key_message, key_version, key_value, version,
                             value_message, _read(value_message, value, version, "value"))


def coordinator_json(rec: CoordinatorRecord) -> tuple[str, str | None]:
    """``({"type":"T","data":KEY}, {"version":"V","data":VALUE} or None)``: the key and
    payload texts ``kafka-dump-log``'s coordinator decoders print (None for a tombstone's
    payload). A ``GroupMetadataValue`` of the ``consumer`` protocol shows each member's
    subscription and assignment decoded (``prepareGroupMetadataValue``), or as Base64
    when they do not decode."""
    data = struct_json(rec.key_message, rec.key, rec.key_version)
    key = f'{{"type":"{rec.type}","data":{data}}}'
    if rec.value is None:
        return key, None
    if rec.type == _GROUP_METADATA and rec.value_message.name == "GroupMetadataValue" and \
            rec.value.get("protocolType") == _CONSUMER_PROTOCOL_TYPE:
        data = _group_metadata_json(rec.value_message, rec.value, rec.version)
    else:
        data = struct_json(rec.value_message, rec.value, rec.version)
    return key, f'{{"version":"{rec.version}","data":{data}}}'


def coordinator_text(family: str, offset: int, key, value) -> tuple[str, str | None]:
    """What ``kafka-dump-log`` prints after `` key: `` and `` payload: `` for the record
    at ``offset``: the JSON of :func:`coordinator_json`, ``<DELETE>`` for a tombstone, or
    -- the record not decoded -- ``Unknown record type T at offset O, skipping.`` /
    ``Error at offset O, skipping. <why>`` as the key and no payload. Raises
    CorruptRecordError for a record without a key (Kafka's tool stops there: "Failed to
    decode message at offset O using the specified decoder (message had a missing
    key)")."""
    if key is None:
        raise CorruptRecordError(f"Failed to decode message at offset {offset} using the "
                                 "specified decoder (message had a missing key)")
    try:
        rec = decode_coordinator(family, key, value)
    except UnknownRecordTypeError as exc:
        return f"Unknown record type {exc.record_type} at offset {offset}, skipping.", None
    except CorruptRecordError as exc:
        return f"Error at offset {offset}, skipping. {exc.reason}", None
    k, v = coordinator_json(rec)
    return k, "<DELETE>" if v is None else v


def _group_metadata_json(message: Message, value: dict, version: int) -> str:
    """GroupMetadataValue's JSON with each member's ``subscription`` and ``assignment``
    replaced, where they decode, by the consumer protocol's JSON (same position)."""
    cp = tables.schema("consumer_protocol")
    members = []
    for member in value.get("members") or []:
        m = dict(member)
        for name, proto in (("subscription", "ConsumerProtocolSubscription"),
                            ("assignment", "ConsumerProtocolAssignment")):
            m[name] = RawJson(_consumer_protocol_json(cp.message(proto), m.get(name)))
        members.append(m)
    return struct_json(message, {**value, "members": members}, version)


def _consumer_protocol_json(message: Message, data) -> str:
    """The consumer protocol's JSON of ``data`` (an int16 version, then the message; a
    version above the last is read and written as the last), or its Base64 string when it
    does not decode (Kafka keeps the original node)."""
    if data is None:
        return "null"
    try:
        version = _version(data, "consumer protocol")
        last = message.versions.high
        v = min(version, last) if last is not None else version
        if v < 0:
            raise CorruptRecordError(f"version {version}")
        return struct_json(message, message.decode(data, v, pos=2, exact=False), v)
    except (CorruptRecordError, ValueError):
        return json_string(base64.b64encode(data).decode("ascii"))


# -- the metadata log --------------------------------------------------------------------------

FRAME_VERSION = 1  # AbstractApiMessageSerde.DEFAULT_FRAME_VERSION


def _uvarint(buf, pos: int, what: str) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise CorruptRecordError(f"Error while reading {what}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > 28:
            raise CorruptRecordError(f"Error while reading {what}")
    if result > 0x7FFF:
        raise CorruptRecordError(f"Value for {what} was too large.")
    return result, pos


def decode_metadata(value) -> tuple[Message, int, dict]:
    """A metadata record's value (``AbstractApiMessageSerde.read``): ``(message,
    version, the decoded dict)``. Raises CorruptRecordError with Kafka's messages (frame
    version 0 or another than 1, an unknown apiKey, bytes left over)."""
    if value is None:
        raise CorruptRecordError("a metadata record without a value")
    frame, pos = _uvarint(value, 0, "frame version")
    if frame == 0:
        raise CorruptRecordError("Could not deserialize metadata record with frame version 0. "
                                 "Note that upgrades from the preview release of KRaft in 2.8 "
                                 "to newer versions are not supported.")
    if frame != FRAME_VERSION:
        raise CorruptRecordError("Could not deserialize metadata record due to unknown frame "
                                 f"version {frame}(only frame version {FRAME_VERSION} is "
                                 "supported)")
    api, pos = _uvarint(value, pos, "type")
    version, pos = _uvarint(value, pos, "version")
    message = tables.schema("metadata").by_api(api)
    if message is None:
        raise CorruptRecordError("org.apache.kafka.common.errors.UnsupportedVersionException: "
                                 f"Unknown metadata id {api}")
    try:
        out, end = message.decode_prefix(value, version, pos)
    except (CorruptRecordError, ValueError) as exc:
        raise CorruptRecordError(f"Failed to deserialize record with type {api}: {exc}") \
            from None
    if end != len(value):
        raise CorruptRecordError(f"Found {len(value) - end} byte(s) of garbage after {api}")
    return message, version, out


def metadata_type_name(message: Message) -> str:
    """``MetadataRecordType``'s name of a message: its name in upper snake case
    (``TopicRecord`` -> ``TOPIC_RECORD``, Kafka's ``MessageGenerator.toSnakeCase``)."""
    out = []
    prev_upper = True
    for ch in message.name:
        if ch.isupper() and not prev_upper:
            out.append("_")
        out.append(ch.upper())
        prev_upper = ch.isupper()
    return "".join(out)


def metadata_text(offset: int, value) -> str:
    """What ``kafka-dump-log --cluster-metadata-decoder`` prints after `` payload: ``:
    ``{"type":"TOPIC_RECORD","version":0,"data":{...}}``, or ``Error at O, skipping.
    <why>`` (Kafka's text, without the word "offset")."""
    try:
        message, version, data = decode_metadata(value)
    except CorruptRecordError as exc:
        return f"Error at {offset}, skipping. {exc.reason}"
    return (f'{{"type":"{metadata_type_name(message)}","version":{version},"data":'
            f"{struct_json(message, data, version)}}}")


def record_json(family: str, key, value) -> tuple[str | None, str | None, str | None]:
    """``(key JSON, value JSON, error)`` of a data record of an internal topic's ``family``
    (:data:`TOPIC_FAMILIES`), the texts ``kafka-dump-log``'s decoder prints: for a
    coordinator record ``{"type":"T","data":...}`` and ``{"version":"V","data":...}``
    (``null`` for a tombstone), for a metadata record no key and
    ``{"type":"TOPIC_RECORD","version":0,"data":...}``. A record that does not decode gives
    ``(None, None, why)``: its bytes are the caller's to show."""
    try:
        if family == "metadata":
            message, version, data = decode_metadata(value)
            return None, (f'{{"type":"{metadata_type_name(message)}","version":{version},'
                          f'"data":{struct_json(message, data, version)}}}'), None
        if key is None:
            return None, None, "a coordinator record without a key"
        k, v = coordinator_json(decode_coordinator(family, key, value))
        return k, "null" if v is None else v, None
    except CorruptRecordError as exc:
        return None, None, exc.reason


# -- KRaft control records ---------------------------------------------------------------------

#: ControlRecordType -> the label ``printControlRecord`` puts before the message's JSON
CONTROL_LABELS = {2: "LeaderChange:", 3: "SnapshotHeader", 4: "SnapshotFooter",
                  5: "KRaftVersion", 6: "KRaftVoters"}


def decode_control(type_id: int, value) -> tuple[Message, int, dict] | None:
    """A KRaft control record's value (types 2-6; None for another type): ``(message,
    version, dict)``, read at the version its leading int16 ``version`` field gives (as
    ``ControlRecordUtils`` writes them). Raises CorruptRecordError."""
    message = tables.schema("raft").by_api(type_id)
    if message is None:
        return None
    version = _version(value, "control record value")
    return message, version, message.decode(value, version, exact=False)


def control_text(type_id: int, value) -> str | None:
    """``LeaderChange: {...}``, ``SnapshotHeader {...}``, ``KRaftVoters {...}`` ... for a
    KRaft control record (Kafka 4.1's ``printControlRecord``), None for another type or
    a value that does not decode (the caller prints ``controlType: NAME(ID)``)."""
    try:
        decoded = decode_control(type_id, value)
    except (CorruptRecordError, ValueError):
        return None
    if decoded is None:
        return None
    message, version, data = decoded
    return f"{CONTROL_LABELS[type_id]} {struct_json(message, data, version)}"
