"""Names of keys in the key view, ``key/<k>`` (docs/tree.md "The key view"; the view itself
is fs.nodes.keys).

A key is its own file name when it is one (not empty, at most 255 bytes, valid UTF-8, no
``/`` or NUL, not ``.`` or ``..``) and does not begin with the reserved prefix ``%=``. Every
other key is named ``%=`` + its base64url encoding without padding, or, when that is longer
than 255 bytes, ``%=#`` + the 32 hex digits of its 128-bit BLAKE2b digest
(:func:`~kafkafs.log.keymap.key_digest`). Each key has exactly one name and each name names
at most one key (:func:`key_name`, :func:`parse_name`); other spellings are ENOENT. A digest
name can read, overwrite and remove a key the map knows; it cannot create one (EINVAL:
append it with ``parse.key``).
"""

from __future__ import annotations

import base64

from ..log.keymap import key_digest

ESCAPE = b"%="  # the reserved prefix of escaped names
HASHED = b"#"  # after the prefix: a digest name (not in the base64url alphabet)
NAME_MAX = 255


def _plain(key: bytes) -> bool:
    """Whether ``key`` is its own file name."""
    if not key or len(key) > NAME_MAX or key in (b".", b"..") or b"/" in key or \
            b"\0" in key or key.startswith(ESCAPE):
        return False
    try:
        key.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def key_name(key: bytes) -> bytes:
    """The one file name of ``key`` in a key view (module docstring)."""
    if _plain(key):
        return key
    enc = base64.urlsafe_b64encode(key).rstrip(b"=")
    if len(ESCAPE) + len(enc) <= NAME_MAX:
        return ESCAPE + enc
    return ESCAPE + HASHED + key_digest(key).hex().encode()


class Hashed:
    """A digest name: the key is known only by its 16-byte ``digest``."""

    __slots__ = ("digest",)

    def __init__(self, digest: bytes):
        self.digest = digest


def parse_name(name: bytes) -> bytes | Hashed:
    """The key named ``name`` (bytes), or :class:`Hashed` for a digest name. Raises
    ValueError for a name no key has (a spelling other than :func:`key_name`'s)."""
    if not name.startswith(ESCAPE):
        if not _plain(name):
            raise ValueError("not a key name")
        return name
    body = name[len(ESCAPE):]
    if body.startswith(HASHED):
        hx = body[len(HASHED):]
        if len(hx) != 32 or hx != hx.lower():
            raise ValueError("not a digest name")
        return Hashed(bytes.fromhex(hx.decode("ascii")))
    key = base64.urlsafe_b64decode(body + b"=" * (-len(body) % 4))
    if key_name(key) != name:
        raise ValueError("not the canonical name of its key")
    return key
