"""Requests and responses on the wire: frames, headers and bodies (docs/design.md §9.2).

A request is a frame (an int32 size, then that many bytes) holding the request header
(``RequestHeader``: api key, api version, correlation id, client id; version 2, with tagged
fields, when the api version is flexible, else version 1) and the body, the api's request
message in that version. A response is a frame holding the response header (the correlation
id; version 1, with tagged fields, for a flexible version, except ApiVersions, whose
response header is always version 0 so that a client can read it whatever it asked for)
and the response message in the request's version. Bodies are decoded and encoded by the
schema codec over Kafka's own message definitions (:func:`kafkafs.record.tables.protocol`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..record.errors import CorruptRecordError
from ..record.schema import Message
from ..record.tables import protocol
from .errors import ProtocolError

_HEAD = struct.Struct(">hhi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
API_VERSIONS = 18


@dataclass
class Request:
    """One decoded request: ``api_key``, ``api_version``, ``correlation_id``, ``client_id``
    (None when null), ``body`` (the request message as the schema codec decodes it: a dict;
    None when the version was not parsed) and ``response`` (the response's
    :class:`~kafkafs.record.schema.Message`)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: dict | None
    response: Message
    flexible: bool

    @property
    def header_version(self) -> int:
        """The response header's version (0: just the correlation id; 1: tagged fields)."""
        return 1 if self.flexible and self.api_key != API_VERSIONS else 0


def _uvarint(buf, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise CorruptRecordError("the header ends inside an unsigned varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise CorruptRecordError("an unsigned varint longer than 5 bytes")


def parse_header(frame: bytes) -> tuple[int, int, int, str | None, int]:
    """``(api_key, api_version, correlation_id, client_id, body position)`` of a request
    frame (without its size); a header of version 2 when the version is flexible for the
    api (tagged fields skipped). Raises ProtocolError for an api key kafkafs has no
    message for, CorruptRecordError for a short header."""
    if len(frame) < 10:
        raise CorruptRecordError(f"a request of {len(frame)} bytes has no header")
    api_key, version, corr = _HEAD.unpack_from(frame, 0)
    msg = protocol().by_api(api_key, "Request")
    if msg is None:
        raise ProtocolError(f"unknown api key {api_key} (correlation id {corr})")
    n = _I16.unpack_from(frame, 8)[0]
    pos = 10
    client_id = None
    if n >= 0:
        if pos + n > len(frame):
            raise CorruptRecordError("the header ends inside its client id")
        client_id = frame[pos:pos + n].decode("utf-8", "replace")
        pos += n
    if version in msg.flexible:
        count, pos = _uvarint(frame, pos)
        for _ in range(count):
            _tag, pos = _uvarint(frame, pos)
            size, pos = _uvarint(frame, pos)
            pos += size
        if pos > len(frame):
            raise CorruptRecordError("the header ends inside a tagged field")
    return api_key, version, corr, client_id, pos


def decode_request(frame: bytes, supported: dict[int, tuple[int, int]]) -> Request:
    """The :class:`Request` in ``frame``. ``supported``: api key -> (min, max) versions
    kafkafs answers. An ApiVersions request of a version outside them comes back with
    ``body`` None (it is answered at version 0 with UNSUPPORTED_VERSION, as Kafka's
    ``ApiVersionsRequest`` does). Raises ProtocolError (unknown api, unsupported version,
    a body that does not parse: Kafka closes the connection)."""
    try:
        api_key, version, corr, client_id, pos = parse_header(frame)
    except CorruptRecordError as exc:
        raise ProtocolError(f"a request header that does not parse: {exc}") from None
    schema = protocol()
    req_msg = schema.by_api(api_key, "Request")
    resp_msg = schema.by_api(api_key, "Response")
    lo, hi = supported.get(api_key, (0, -1))
    flexible = version in req_msg.flexible
    if not lo <= version <= hi:
        if api_key == API_VERSIONS:
            return Request(api_key, version, corr, client_id, None, resp_msg, False)
        raise ProtocolError(f"{req_msg.name} version {version} is not supported (versions "
                            f"{lo}-{hi}; correlation id {corr}, client {client_id!r})")
    try:
        body = req_msg.decode(frame, version, pos, exact=False)
    except (CorruptRecordError, ValueError) as exc:
        raise ProtocolError(f"{req_msg.name} version {version} does not parse: {exc} "
                            f"(correlation id {corr}, client {client_id!r})") from None
    return Request(api_key, version, corr, client_id, body, resp_msg, flexible)


def encode_response(request: Request, body: dict, version: int | None = None
                    ) -> tuple[list, int]:
    """``(parts, size)`` of the response frame to ``request`` (size prefix, header, body):
    bytes-like parts and :class:`~kafkafs.record.schema.Deferred` ones (record bytes the
    sender copies from a file), ``size`` the byte count of all. ``version``: the body's
    version (default the request's). Raises ValueError for a body the message cannot carry
    (a defect of kafkafs)."""
    v = request.api_version if version is None else version
    parts, size = request.response.encode_parts(body, v)
    head = _I32.pack(request.correlation_id)
    if request.header_version >= 1:
        head += b"\x00"  # no tagged fields
    total = size + len(head)
    return [_I32.pack(total) + head, *parts], total + 4
