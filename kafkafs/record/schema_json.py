"""Decoded messages as the JSON Kafka's generated ``JsonConverter`` classes write
(``JsonConverterGenerator``; printed by ``kafka-dump-log`` as Jackson's ``ObjectNode.toString``).

The text is compact (no spaces) and follows Jackson's defaults exactly, so that it matches
``kafka-dump-log`` byte for byte:

* fields in the table's order, named as they are (first letter lower case); a field the
  version does not carry is left out; a tagged field only when it differs from its default
  (a number or bool from its default, a string, struct or uuid from its default, an array
  or bytes when not empty); unknown tagged fields never;
* every integer type as a JSON number (int64 too), ``bool`` as ``true``/``false``;
* ``float64`` as Java's ``Double.toString`` (``1.0``, ``1.0E7``, ``1.0E-4``), NaN and the
  infinities as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``;
* ``bytes`` in standard Base64 with padding, a ``uuid`` as Kafka's ``Uuid.toString``
  (URL-safe Base64 of the 16 bytes, no padding), ``records`` as ``""``; null as ``null``;
* strings escaped as Jackson does: ``"`` and ``\\``, ``\\b \\t \\n \\f \\r``, other
  characters below U+0020 as ``\\u00XX`` with upper-case hex; nothing else.
"""

from __future__ import annotations

import base64
import json
import math
import re
from decimal import Decimal

from .schema import Field, Struct

__all__ = ["RawJson", "java_double", "json_string", "struct_json", "uuid_string"]

_ESCAPE = re.compile(r"\\u00[0-9a-f]{2}")


_PLAIN = re.compile(r'[^"\\\x00-\x1f]*')


def json_string(s: str) -> str:
    """``s`` as a JSON string the way Jackson writes it (see the module)."""
    if _PLAIN.fullmatch(s):
        return '"' + s + '"'
    out = json.dumps(s, ensure_ascii=False)
    if "\\u00" in out:
        out = _ESCAPE.sub(lambda m: m.group(0)[:4] + m.group(0)[4:].upper(), out)
    return out


def uuid_string(u: bytes) -> str:
    """Kafka's ``Uuid.toString``: URL-safe Base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(u).rstrip(b"=").decode("ascii")


def java_double(d: float) -> str:
    """Java's ``Double.toString(d)`` (shortest round-trip digits, as JDK 19+ prints): plain
    with at least one fractional digit for 1e-3 <= |d| < 1e7, else ``d.dddE[-]n``; NaN and
    the infinities quoted (Jackson's ``QUOTE_NON_NUMERIC_NUMBERS``)."""
    if math.isnan(d):
        return '"NaN"'
    if math.isinf(d):
        return '"Infinity"' if d > 0 else '"-Infinity"'
    if d == 0:
        return "-0.0" if math.copysign(1.0, d) < 0 else "0.0"
    if 1e-3 <= abs(d) < 1e7:
        text = repr(d)
        return text if "." in text else text + ".0"
    sign, digits, exp = Decimal(repr(d)).as_tuple()
    text = "".join(map(str, digits))
    e = exp + len(text) - 1
    text = text.rstrip("0") or "0"
    return ("-" if sign else "") + f"{text[0]}.{text[1:] or '0'}E{e}"


class RawJson(str):
    """A JSON text written as it is in place of a field's value (a decoded message inside
    a ``bytes`` field, as ``kafka-dump-log`` shows a consumer group member's
    subscription)."""


def _value_json(f: Field, t: str, v, version: int) -> str:
    if v is None:
        return "null"
    if isinstance(v, RawJson):
        return v
    if t.startswith("[]"):
        el = t[2:]
        return "[" + ",".join(_value_json(f, el, x, version) for x in v) + "]"
    if t == "bool":
        return "true" if v else "false"
    if t == "float64":
        return java_double(v)
    if t in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
        return str(int(v))
    if t == "string":
        return json_string(v)
    if t == "bytes":
        return json_string(base64.b64encode(v).decode("ascii"))
    if t == "uuid":
        return json_string(uuid_string(v))
    if t == "records":
        return '""'
    return struct_json(f.struct, v, version)


def _non_default(f: Field, v) -> bool:
    """Kafka's ``generateNonDefaultValueCheck``: whether a tagged field is written."""
    d = f.default_value()
    if f.is_array or f.type in ("bytes", "records"):
        return v is not None and len(v) > 0 if d is not None else v is not None
    return v != d


def struct_json(s: Struct, value: dict, version: int) -> str:
    """The JSON of the struct ``value`` (a dict as the codec decodes; a field missing
    takes its default) of ``s`` in ``version``: ``XxxJsonConverter.write(value,
    version).toString()``."""
    parts = []
    fields, _tagged = s.plan(version, True)
    for f, is_tagged in fields:
        v = value[f.name] if f.name in value else f.default_value()
        if is_tagged and not _non_default(f, v):
            continue
        parts.append(_name_json(f) + _value_json(f, f.type, v, version))
    return "{" + ",".join(parts) + "}"


def _name_json(f: Field) -> str:
    """``"name":`` of a field, made once."""
    text = f.__dict__.get("_json_name")
    if text is None:
        text = f.__dict__["_json_name"] = json_string(f.name) + ":"
    return text
