"""Java ``.properties`` text (``java.util.Properties.load``/``store``), the syntax of
``server.properties``, ``meta.properties`` and the ``config`` file of the mounted tree.

Parsing: ``#``/``!`` comments, ``=``, ``:`` or whitespace separators, backslash line
continuations and escapes (``\\t``, ``\\n``, ``\\uXXXX``, ...), later keys win. Writing escapes as
``Properties.store`` does (pure ASCII).
"""

from __future__ import annotations

import re

_PROP_WS = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class PropertiesSyntaxError(ValueError):
    """Malformed properties text; ``line_number`` is the natural line (1-based)."""

    def __init__(self, message: str, line_number: int):
        super().__init__(message)
        self.line_number = line_number


def java_lines(text: str) -> list[str]:
    """Split like ``BufferedReader.readLine``: on ``\\n``, ``\\r`` or ``\\r\\n``; a final
    line break does not start another line."""
    if not text:
        return []
    lines = _LINE_BREAK.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines


def _logical_lines(text: str):
    """Yield ``(line_number, logical_line)`` as ``Properties.load``'s LineReader: blank and
    comment lines skipped, leading whitespace dropped, a line ending in an odd number of
    backslashes continued on the next natural line (its leading whitespace dropped)."""
    natural = java_lines(text)
    i = 0
    while i < len(natural):
        number = i + 1
        line = natural[i].lstrip(_PROP_WS)
        i += 1
        if not line or line[0] in "#!":
            continue
        while True:
            trailing = len(line) - len(line.rstrip("\\"))
            if trailing % 2 == 0 or i >= len(natural):
                if trailing % 2 == 1:
                    line = line[:-1]
                break
            line = line[:-1] + natural[i].lstrip(_PROP_WS)
            i += 1
        yield number, line


def _unescape(text: str, number: int) -> str:
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 >= len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2:i + 6]
            if len(digits) != 4 or not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise PropertiesSyntaxError(f"Malformed \\uxxxx encoding on line {number}",
                                            number)
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    # join UTF-16 surrogate pairs produced by \\u escapes
    return "".join(out).encode("utf-16-be", "surrogatepass").decode("utf-16-be", "replace")


def parse_properties(text: str) -> dict[str, str]:
    """Parse properties ``text`` into ``key -> value``. Raises PropertiesSyntaxError on a
    malformed ``\\u`` escape."""
    props: dict[str, str] = {}
    for number, line in _logical_lines(text):
        # the key ends at the first unescaped '=', ':' or whitespace
        i, n = 0, len(line)
        while i < n:
            ch = line[i]
            if ch == "\\":
                i += 2
                continue
            if ch in "=:" or ch in _PROP_WS:
                break
            i += 1
        key = line[:i]
        rest = line[i:].lstrip(_PROP_WS)
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(_PROP_WS)
        props[_unescape(key, number)] = _unescape(rest, number)
    return props


def format_properties(props) -> str:
    """``key=value`` lines, sorted by key, escaped like ``Properties.store``."""
    return "".join(f"{_escape(str(k), True)}={_escape(str(props[k]), False)}\n"
                   for k in sorted(props))


def format_comment(line: str) -> str:
    """A ``#`` comment line as ``Properties.store`` writes it."""
    return "#" + _escape_comment(line)


def _escape(text: str, is_key: bool) -> str:
    """``Properties.saveConvert`` with ``escUnicode``: the result is pure ASCII."""
    out = []
    for i, ch in enumerate(text):
        if ch == " ":
            out.append("\\ " if i == 0 or is_key else " ")
        elif ch in "\\=:#!":
            out.append("\\" + ch)
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\f":
            out.append("\\f")
        elif ord(ch) < 0x20 or ord(ch) > 0x7E:
            out.append(_u_escape(ch))
        else:
            out.append(ch)
    return "".join(out)


def _u_escape(ch: str) -> str:
    """``\\uXXXX`` for each UTF-16 unit of ``ch`` (a surrogate pair outside the BMP)."""
    hexed = ch.encode("utf-16-be", "surrogatepass").hex().upper()
    return "".join(f"\\u{hexed[j:j + 4]}" for j in range(0, len(hexed), 4))


def _escape_comment(line: str) -> str:
    """``Properties.writeComments``: characters outside printable ASCII as ``\\uXXXX``."""
    return "".join(c if 0x20 <= ord(c) <= 0x7E else _u_escape(c) for c in line)
