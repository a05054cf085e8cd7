"""Kafka's message schemas as tables, and one codec driven by them (docs/design.md §2.5).

Kafka describes every structured record it writes -- the group coordinator's records in
``__consumer_offsets``, the transaction coordinator's in ``__transaction_state``, the
metadata records of ``__cluster_metadata``, KRaft's control records -- and every request and
response of its wire protocol in JSON message definitions (``*.json`` under
``src/main/resources/common/message`` and ``common/metadata``), from which its build
generates a class per message (``ApiMessage``: ``read``/``write`` per version, and a
``JsonConverter``). kafkafs keeps the same facts in compact tables of its own
(``kafkafs/record/tables/``) and interprets them: one decoder and one encoder for every
message and version, no function per record type.

The table language (one text per module, parsed once):

* ``message <Name> [api <N>] versions <V> flexible <V> [unstable]``: a message; ``api`` its
  record type or api key (a request and its response share it: their names end with
  ``Request`` and ``Response``); ``versions`` Kafka's ``validVersions``; ``flexible`` its
  ``flexibleVersions`` (``none``); ``unstable`` its ``latestVersionUnstable``;
* ``struct <Name> versions <V>``: one of the ``commonStructs`` of the message before it;
* field lines, indented two spaces per level: ``<name> <type> <versions> [nullable <V>]
  [tag <N>] [tagged <V>] [default <X>] [ignorable] [flexible <V>]``, ``flexible`` the
  field's own ``flexibleVersions`` (a string or bytes field written as in versions that are
  not flexible outside them: ``RequestHeader.ClientId``); a type is a primitive (``bool int8
  int16 int32 int64 uint16 uint32 float64 string bytes uuid records``), ``[]<type>``, or a
  struct's name -- declared inline by the field lines indented under the field, or a
  ``struct`` block;
* version ranges ``N``, ``N+``, ``N-M``, ``none``; ``#`` starts a comment line.

The byte encoding is Kafka's protocol encoding (``org.apache.kafka.common.protocol``:
``Readable``/``Writable``, ``MessageUtil``): big-endian integers, ``float64`` IEEE 754; in
versions that are not flexible a string is an int16 length (-1: null) and UTF-8 bytes,
``bytes``/``records`` an int32 length (-1: null), an array an int32 count (-1: null); in
flexible versions those lengths and counts are unsigned varints of length + 1 (0: null)
and every struct ends with its tagged fields (an unsigned varint count, then per field
its tag and size as unsigned varints and its value). A ``uuid`` is 16 bytes.

Field names are taken as Kafka's generated code names them (the first letter lower case:
``GroupId`` is ``groupId``). Decoded messages are dicts in the table's field order, holding
the fields of the version
read (tagged fields when present, else their default); ``bytes``/``records`` are
``bytes``, ``uuid`` 16 ``bytes``, arrays lists, structs dicts. Raises
:class:`~kafkafs.record.errors.CorruptRecordError` for bytes that do not decode, ValueError
for a bad table or a value that does not fit its field. No I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

from .errors import CorruptRecordError

__all__ = ["Deferred", "Field", "Message", "Schema", "Struct", "Versions", "parse_tables"]

PRIMITIVES = frozenset({"bool", "int8", "int16", "int32", "int64", "uint16", "uint32",
                        "float64", "string", "bytes", "uuid", "records"})
_FIXED = {"bool": struct.Struct(">?"), "int8": struct.Struct(">b"),
          "int16": struct.Struct(">h"), "int32": struct.Struct(">i"),
          "int64": struct.Struct(">q"), "uint16": struct.Struct(">H"),
          "uint32": struct.Struct(">I"), "float64": struct.Struct(">d")}
_ZERO = {"bool": False, "int8": 0, "int16": 0, "int32": 0, "int64": 0, "uint16": 0,
         "uint32": 0, "float64": 0.0, "string": "", "bytes": b"", "records": None,
         "uuid": bytes(16)}
_I16, _I32 = _FIXED["int16"], _FIXED["int32"]


@dataclass(frozen=True)
class Deferred:
    """The value of a ``records`` field whose bytes the caller sends itself (a range of a
    segment file sent with ``os.sendfile``, as Kafka's ``FileRecords`` is sent by its network
    layer): ``size`` bytes, ``ref`` whatever the caller needs to find them.
    :meth:`Message.encode_parts` writes its length and leaves it in the list of parts."""

    size: int
    ref: object = None


class _Parts(bytearray):
    """The output of :meth:`Message.encode_parts`: bytes, and where a :class:`Deferred` goes."""

    __slots__ = ("deferred",)

    def __init__(self):
        super().__init__()
        self.deferred: list[tuple[int, Deferred]] = []


# -- versions ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Versions:
    """A version range: ``low`` to ``high`` inclusive (``high`` None: no end); ``empty``
    for ``none``."""

    low: int = 0
    high: int | None = None
    empty: bool = False

    @classmethod
    def parse(cls, text: str) -> Versions:
        """``N``, ``N+``, ``N-M`` or ``none``. Raises ValueError."""
        if text == "none":
            return cls(0, -1, True)
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        if "-" in text:
            lo, hi = text.split("-", 1)
            return cls(int(lo), int(hi))
        return cls(int(text), int(text))

    def __contains__(self, version: int) -> bool:
        return not self.empty and self.low <= version and \
            (self.high is None or version <= self.high)

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.high is None:
            return f"{self.low}+"
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"


# -- the tables -----------------------------------------------------------------------------

@dataclass
class Field:
    """One field: ``name``, ``type`` (a primitive, ``[]T`` or a struct name),
    ``versions``, ``nullable`` versions, ``tag`` (None: not tagged) and the versions it is
    tagged in, ``default`` (the text of the table, None when it gives none), ``ignorable``,
    ``flexible`` its own flexible versions (None: the message's), and ``struct`` for a
    struct-typed field (resolved when the tables are parsed)."""

    name: str
    type: str
    versions: Versions
    nullable: Versions = field(default_factory=lambda: Versions.parse("none"))
    tag: int | None = None
    tagged: Versions = field(default_factory=lambda: Versions.parse("none"))
    default: str | None = None
    ignorable: bool = False
    flexible: Versions | None = None
    fields: list[Field] = field(default_factory=list)  # an inline struct's
    struct: Struct | None = None
    line: int = 0  # of the table, for errors

    @property
    def element(self) -> str:
        """The element type of an array field (its type without ``[]``), else the type."""
        return self.type.removeprefix("[]")

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    def default_value(self):
        """The value a reader gives the field when a version does not carry it (Kafka's
        generated defaults): the table's ``default`` parsed for the type, else 0, false,
        ``""``, empty bytes, a zero uuid, an empty list, null records, and a struct with
        its own defaults."""
        d = self.default
        if self.is_array:
            return None if d == "null" else []
        t = self.type
        if self.struct is not None:
            return None if d == "null" else self.struct.defaults()
        if d is None:
            return _ZERO[t]
        if d == "null":
            return None
        if t == "bool":
            return d == "true"
        if t == "float64":
            return float(d)
        if t in _FIXED:
            return int(d, 0)
        if t == "string":
            return "" if d == '""' else d.strip('"')
        if t == "uuid":
            return bytes(16)
        return _ZERO[t]


@dataclass
class Struct:
    """A struct: ``name``, ``versions`` and ``fields`` in order; ``structs`` the common
    structs a message declares (empty for others)."""

    name: str
    versions: Versions
    fields: list[Field] = field(default_factory=list)

    def defaults(self) -> dict:
        return {f.name: f.default_value() for f in self.fields}

    @property
    def names(self) -> frozenset[str]:
        """The names of its fields."""
        names = self.__dict__.get("_names")
        if names is None:
            names = self.__dict__["_names"] = frozenset(f.name for f in self.fields)
        return names

    def plan(self, version: int, flexible: bool) -> tuple:
        """``(fields, tagged)`` of ``version``: the fields it carries in the body, each
        with a flag telling a tagged one (in order), and ``{tag: field}``, worked out once
        per version (every read, write and JSON of the struct uses it)."""
        plans = self.__dict__.setdefault("_plans", {})
        key = (version, flexible)
        plan = plans.get(key)
        if plan is None:
            fields, tagged = [], {}
            for f in self.fields:
                if version not in f.versions:
                    continue
                is_tagged = f.tag is not None and version in f.tagged and flexible
                fields.append((f, is_tagged))
                if is_tagged:
                    tagged[f.tag] = f
            plan = plans[key] = (tuple(fields), tagged)
        return plan


@dataclass
class Message(Struct):
    """A top-level message: also its ``api`` number (None: none), ``flexible`` versions and
    ``unstable`` (its newest version is not yet stable). ``decode``/``encode`` are
    :class:`Schema`'s."""

    api: int | None = None
    flexible: Versions = field(default_factory=lambda: Versions.parse("none"))
    unstable: bool = False
    structs: dict[str, Struct] = field(default_factory=dict)

    def decode(self, buf, version: int, pos: int = 0, exact: bool = True) -> dict:
        """The message at ``buf[pos:]`` in ``version`` (see the module). ``exact``: the
        bytes must end where the message does. Raises CorruptRecordError (the bytes),
        ValueError (a version the message does not have)."""
        out, end = self.decode_prefix(buf, version, pos)
        if exact and end != len(buf):
            raise CorruptRecordError(f"{self.name} version {version}: {len(buf) - end} "
                                     "bytes after the message")
        return out

    def decode_prefix(self, buf, version: int, pos: int = 0) -> tuple[dict, int]:
        """``(the message at buf[pos:] in version, the position after it)``. Raises as
        :meth:`decode`."""
        if version not in self.versions:
            raise ValueError(f"{self.name} has no version {version} (valid: {self.versions})")
        r = _Reader(buf, pos)
        out = _read_struct(r, self, version, version in self.flexible)
        return out, r.pos

    def encode(self, value: dict, version: int) -> bytes:
        """The bytes of ``value`` (a dict as :meth:`decode` gives; missing fields take
        their defaults) in ``version``. Raises ValueError for a name that is no field of
        the message, a field that the version cannot carry with a value other than its
        default, or a value out of its type's range."""
        if version not in self.versions:
            raise ValueError(f"{self.name} has no version {version} (valid: {self.versions})")
        out = bytearray()
        _write_struct(out, self, value, version, version in self.flexible)
        return bytes(out)

    def encode_parts(self, value: dict, version: int) -> tuple[list, int]:
        """``(parts, size)``: ``value`` encoded as :meth:`encode` does, where a ``records``
        field may hold a :class:`Deferred`; ``parts`` are bytes-like objects and the
        Deferred values in wire order, ``size`` the byte count of all of them. Unlike
        :meth:`encode`, a field the version does not carry is left out whatever its value
        (a response built once for every version its request may come in). Raises as
        :meth:`encode` otherwise."""
        if version not in self.versions:
            raise ValueError(f"{self.name} has no version {version} (valid: {self.versions})")
        out = _Parts()
        _write_struct(out, self, value, version, version in self.flexible)
        parts: list = []
        pos = 0
        view = memoryview(out)
        size = len(out)
        for at, d in out.deferred:
            if at > pos:
                parts.append(view[pos:at])
            parts.append(d)
            pos = at
            size += d.size
        if pos < len(out):
            parts.append(view[pos:])
        return parts, size


class Schema:
    """The messages of one or more tables by name (:meth:`message`) and by ``api``
    (:meth:`by_api`). Built by :func:`parse_tables`."""

    def __init__(self, messages: dict[str, Message]):
        self.messages = messages
        self._by_api: dict[tuple[int, str], Message] = {}
        for m in messages.values():
            if m.api is not None:
                self._by_api[(m.api, _role(m.name))] = m

    def message(self, name: str) -> Message:
        """Raises KeyError."""
        return self.messages[name]

    def by_api(self, api: int, role: str = "") -> Message | None:
        """The message with ``api`` whose name ends with ``role`` (``"Key"``, ``"Value"``,
        ``"Request"``, ``"Response"``, ``""`` for none of them), or None."""
        return self._by_api.get((api, role))

    def __iter__(self) -> Iterator[Message]:
        return iter(self.messages.values())


def _role(name: str) -> str:
    for suffix in ("Key", "Value", "Request", "Response"):
        if name.endswith(suffix):
            return suffix
    return ""


def parse_tables(*texts: str) -> Schema:
    """The messages of the table ``texts`` (see the module). Raises ValueError naming the
    line of a table that does not parse or a type that names no struct."""
    messages: dict[str, Message] = {}
    for text in texts:
        for m in _parse(text):
            if m.name in messages:
                raise ValueError(f"message {m.name} is defined twice")
            messages[m.name] = m
    return Schema(messages)


def _parse(text: str) -> list[Message]:
    out: list[Message] = []
    current: Message | None = None
    stack: list[tuple[int, list[Field]]] = []  # (indent of the fields, their list)
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indent = len(line) - len(line.lstrip(" "))
        words = line.split()
        try:
            if indent == 0:
                if words[0] == "message":
                    current = _message_line(words)
                    out.append(current)
                    stack = [(2, current.fields)]
                elif words[0] == "struct":
                    if current is None:
                        raise ValueError("a struct before any message")
                    s = Struct(words[1], _keyword(words, "versions", "0+"))
                    if s.name in current.structs:
                        raise ValueError(f"struct {s.name} twice in {current.name}")
                    current.structs[s.name] = s
                    stack = [(2, s.fields)]
                else:
                    raise ValueError(f"unknown block {words[0]!r}")
                continue
            if not stack:
                raise ValueError("a field outside any block")
            while stack and indent < stack[-1][0]:
                stack.pop()
            if not stack or indent != stack[-1][0]:
                raise ValueError("bad indentation")
            f = _field_line(words)
            f.line = n
            stack[-1][1].append(f)
            stack.append((indent + 2, f.fields))
        except (ValueError, IndexError) as exc:
            raise ValueError(f"table line {n}: {exc}: {raw.strip()!r}") from None
    for m in out:
        _resolve(m, m.fields, m.name)
        for s in m.structs.values():
            _resolve(m, s.fields, f"{m.name}.{s.name}")
    return out


def _keyword(words: list[str], key: str, default: str | None = None) -> Versions:
    if key in words:
        return Versions.parse(words[words.index(key) + 1])
    if default is None:
        raise ValueError(f"no {key}")
    return Versions.parse(default)


def _message_line(words: list[str]) -> Message:
    m = Message(words[1], _keyword(words, "versions"))
    if "api" in words:
        m.api = int(words[words.index("api") + 1])
    m.flexible = _keyword(words, "flexible", "none")
    m.unstable = "unstable" in words
    return m


def _field_line(words: list[str]) -> Field:
    # named as the generated code names it (FieldSpec.camelCaseName: "GroupId" -> groupId)
    f = Field(words[0][:1].lower() + words[0][1:], words[1], Versions.parse(words[2]))
    i = 3
    while i < len(words):
        w = words[i]
        if w == "nullable":
            f.nullable = Versions.parse(words[i + 1])
        elif w == "tag":
            f.tag = int(words[i + 1])
        elif w == "tagged":
            f.tagged = Versions.parse(words[i + 1])
        elif w == "default":
            f.default = words[i + 1]
        elif w == "flexible":
            f.flexible = Versions.parse(words[i + 1])
        elif w == "ignorable":
            f.ignorable = True
            i += 1
            continue
        else:
            raise ValueError(f"unknown attribute {w!r}")
        i += 2
    if f.tag is not None and f.tagged.empty:
        f.tagged = f.versions
    return f


def _resolve(m: Message, fields: list[Field], where: str) -> None:
    for f in fields:
        el = f.element
        if f.fields:
            f.struct = Struct(el, f.versions, f.fields)
            _resolve(m, f.fields, f"{where}.{f.name}")
        elif el not in PRIMITIVES:
            s = m.structs.get(el)
            if s is None:
                raise ValueError(f"table line {f.line}: {where}.{f.name}: type {f.type} "
                                 "names no struct")
            f.struct = s


# -- reading ----------------------------------------------------------------------------------

class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf, pos: int = 0):
        self.buf = memoryview(buf).cast("B") if not isinstance(buf, bytes) else buf
        self.pos = pos

    def take(self, n: int):
        p = self.pos
        if n < 0 or p + n > len(self.buf):
            raise CorruptRecordError(f"the message ends inside a field ({n} bytes wanted at "
                                     f"{p}, {len(self.buf) - p} left)")
        self.pos = p + n
        return self.buf[p:p + n]

    def fixed(self, s: struct.Struct):
        p = self.pos
        if p + s.size > len(self.buf):
            raise CorruptRecordError(f"the message ends inside a field at {p}")
        self.pos = p + s.size
        return s.unpack_from(self.buf, p)[0]

    def uvarint(self) -> int:
        buf, p = self.buf, self.pos
        result = shift = 0
        while True:
            if p >= len(buf):
                raise CorruptRecordError("the message ends inside an unsigned varint")
            b = buf[p]
            p += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
            if shift > 28:
                raise CorruptRecordError("an unsigned varint longer than 5 bytes")
        self.pos = p
        return result


def _read_length(r: _Reader, flexible: bool, wide: bool) -> int:
    """A length or count: -1 for null."""
    if flexible:
        return r.uvarint() - 1
    return r.fixed(_I32 if wide else _I16)


def _read_value(r: _Reader, f: Field, t: str, version: int, flexible: bool):
    s = _FIXED.get(t)
    if s is not None:
        return r.fixed(s)
    if t == "string":
        n = _read_length(r, flexible, False)
        if n < 0:
            if version not in f.nullable:
                raise CorruptRecordError(f"field {f.name}: null, which version {version} "
                                         "does not allow")
            return None
        try:
            return bytes(r.take(n)).decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptRecordError(f"field {f.name}: not UTF-8") from None
    if t in ("bytes", "records"):
        n = _read_length(r, flexible, True)
        if n < 0:
            if version not in f.nullable and t == "bytes":
                raise CorruptRecordError(f"field {f.name}: null, which version {version} "
                                         "does not allow")
            return None
        return bytes(r.take(n))
    if t == "uuid":
        return bytes(r.take(16))
    if t.startswith("[]"):
        n = _read_length(r, flexible, True)
        if n < 0:
            if version not in f.nullable:
                raise CorruptRecordError(f"field {f.name}: a null array, which version "
                                         f"{version} does not allow")
            return None
        if n > len(r.buf) - r.pos:  # every element takes a byte at least
            raise CorruptRecordError(f"field {f.name}: {n} elements cannot fit")
        el = t[2:]
        if f.struct is not None:  # elements carry no presence byte, however nullable the array
            return [_read_struct(r, f.struct, version, flexible) for _ in range(n)]
        s = _FIXED.get(el)
        if s is not None:
            return [r.fixed(s) for _ in range(n)]
        return [_read_value(r, f, el, version, flexible) for _ in range(n)]
    # a struct field (a nullable one is written with an int8 presence byte, KIP-893)
    if version in f.nullable and r.fixed(_FIXED["int8"]) < 0:
        return None
    return _read_struct(r, f.struct, version, flexible)


def _read_plan(s: Struct, version: int, flexible: bool) -> tuple:
    """``(fields, tagged)`` of :meth:`Struct.plan`, each field as ``(field, is_tagged, its
    flexibility, the packer of a fixed-size type or None)``, worked out once per version."""
    plans = s.__dict__.setdefault("_read_plans", {})
    key = (version, flexible)
    plan = plans.get(key)
    if plan is None:
        fields, tagged = s.plan(version, flexible)
        plan = plans[key] = (tuple(
            (f, is_tagged, flexible if f.flexible is None else flexible and version in
             f.flexible, _FIXED.get(f.type)) for f, is_tagged in fields), tagged)
    return plan


def _read_struct(r: _Reader, s: Struct, version: int, flexible: bool) -> dict:
    out = {}
    fields, tagged = _read_plan(s, version, flexible)
    for f, is_tagged, own, packer in fields:
        if is_tagged:
            out[f.name] = f.default_value()
        elif packer is not None:
            out[f.name] = r.fixed(packer)
        else:
            out[f.name] = _read_value(r, f, f.type, version, own)
    if flexible:
        for _ in range(r.uvarint()):
            tag = r.uvarint()
            size = r.uvarint()
            f = tagged.get(tag)
            data = r.take(size)
            if f is None:
                out.setdefault("_unknown_tagged_fields", []).append((tag, bytes(data)))
                continue
            sub = _Reader(bytes(data))
            if f.struct is not None and not f.is_array and sub.buf[:1] == b"\0" and \
                    version in f.nullable:
                sub.pos = 1  # a null struct in a tagged field: the varint 0, not int8 -1
                out[f.name] = None
            else:
                out[f.name] = _read_value(sub, f, f.type, version, flexible)
            if sub.pos != len(sub.buf):
                raise CorruptRecordError(f"tagged field {f.name}: {len(sub.buf) - sub.pos} "
                                         "bytes left over")
    return out


# -- writing ----------------------------------------------------------------------------------

def _uvarint(out: bytearray, n: int) -> None:
    if n < 0 or n >> 32:
        raise ValueError(f"{n} does not fit an unsigned varint of 32 bits")
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _write_length(out: bytearray, n: int, flexible: bool, wide: bool) -> None:
    if flexible:
        _uvarint(out, n + 1)
    else:
        out += (_I32 if wide else _I16).pack(n)


def _write_fixed(out: bytearray, f: Field, s: struct.Struct, v) -> None:
    try:
        out += s.pack(v)
    except struct.error as exc:
        raise ValueError(f"field {f.name}: {v!r}: {exc}") from None


def _write_value(out: bytearray, f: Field, t: str, v, version: int, flexible: bool) -> None:
    s = _FIXED.get(t)
    if s is not None:
        _write_fixed(out, f, s, v)
        return
    if v is None:
        if version not in f.nullable and t != "records":
            raise ValueError(f"field {f.name}: null, which version {version} does not allow")
        if t.startswith("[]") or t in ("string", "bytes", "records"):
            _write_length(out, -1, flexible, t != "string")
        else:
            out += b"\xff"  # a null struct
        return
    if t == "string":
        data = v.encode("utf-8")
        if not flexible and len(data) > 0x7FFF:
            raise ValueError(f"field {f.name}: a string of {len(data)} bytes")
        _write_length(out, len(data), flexible, False)
        out += data
    elif isinstance(v, Deferred):
        if t != "records" or not isinstance(out, _Parts):
            raise ValueError(f"field {f.name}: a deferred value outside encode_parts' records")
        _write_length(out, v.size, flexible, True)
        out.deferred.append((len(out), v))
    elif t in ("bytes", "records"):
        _write_length(out, len(v), flexible, True)
        out += v
    elif t == "uuid":
        if len(v) != 16:
            raise ValueError(f"field {f.name}: a uuid of {len(v)} bytes")
        out += v
    elif t.startswith("[]"):
        _write_length(out, len(v), flexible, True)
        if f.struct is not None:  # no presence byte before an element (Kafka's generated code)
            for item in v:
                _write_struct(out, f.struct, item, version, flexible)
        else:
            for item in v:
                _write_value(out, f, t[2:], item, version, flexible)
    else:
        if version in f.nullable:
            out += b"\x01"
        _write_struct(out, f.struct, v, version, flexible)


def _write_plan(s: Struct, version: int, flexible: bool) -> tuple:
    """``(carried, others)`` of ``version``, worked out once per version: ``carried`` the
    fields it writes, each as ``(field, is_tagged, its flexibility, its default, the packer
    of a fixed-size type or None)``; ``others`` the fields it does not carry, each with its
    default (a value other than that is refused by :meth:`Message.encode`). Defaults are
    shared here: the writer only compares them and writes them, never hands them out."""
    plans = s.__dict__.setdefault("_write_plans", {})
    key = (version, flexible)
    plan = plans.get(key)
    if plan is None:
        carried, others = [], []
        for f in s.fields:
            d = f.default_value()
            if version not in f.versions:
                others.append((f, d))
                continue
            is_tagged = f.tag is not None and version in f.tagged and flexible
            own = flexible if f.flexible is None else flexible and version in f.flexible
            carried.append((f, is_tagged, own, d, _FIXED.get(f.type)))
        plan = plans[key] = (tuple(carried), tuple(others))
    return plan


def _write_struct(out: bytearray, s: Struct, value: dict, version: int,
                  flexible: bool) -> None:
    unknown = value.keys() - s.names - {"_unknown_tagged_fields"}
    if unknown:
        raise ValueError(f"{s.name} has no field {min(unknown)!r}")
    carried, others = _write_plan(s, version, flexible)
    if not isinstance(out, _Parts):  # (encode_parts: a response, see there)
        for f, d in others:
            if f.name in value and value[f.name] != d and not f.ignorable:
                raise ValueError(f"{s.name}.{f.name} cannot be written in version {version}")
    tagged: list[tuple[int, bytes]] = []
    for f, is_tagged, own, d, packer in carried:
        v = value.get(f.name, d)
        if is_tagged:
            if v != d:
                buf = bytearray()
                if v is None and f.struct is not None and not f.is_array:
                    buf.append(0)  # a null struct in a tagged field: the varint 0, not int8 -1
                else:
                    _write_value(buf, f, f.type, v, version, flexible)
                tagged.append((f.tag, bytes(buf)))
            continue
        if packer is not None:
            _write_fixed(out, f, packer, v)
        else:
            _write_value(out, f, f.type, v, version, own)
    if flexible:
        tagged += value.get("_unknown_tagged_fields", [])
        tagged.sort()
        _uvarint(out, len(tagged))
        for tag, data in tagged:
            _uvarint(out, tag)
            _uvarint(out, len(data))
            out += data
