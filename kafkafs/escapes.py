"""Backslash escapes in separator options (``key.separator``, ``line.separator``), for
the console tools and the mount's ``-o key.separator=``: one function both share."""

from __future__ import annotations


def unescape(text: str) -> str:
    """``text`` with Python-style backslash escapes (``\\t``, ``\\n``, ``\\x2c``,
    ``\\u2192``) turned into their characters; every other character, ASCII or not, stays
    itself (``→`` is ``→``, not the Latin-1 reading of its UTF-8 bytes). Raises
    UnicodeDecodeError for a malformed escape such as a lone ``\\x``."""
    return text.encode("latin-1", "backslashreplace").decode("unicode_escape")
