"""Zigzag variable-length integers as Kafka's ``ByteUtils`` writes them.

Every integer inside a v2 record (lengths included) is a zigzag varint/varlong
(``ByteUtils.writeVarint``/``writeVarlong``): 7 bits per byte, least significant group
first, high bit set on every byte but the last.
"""

from __future__ import annotations

from .errors import CorruptRecordError

_MAX_VARLONG_BYTES = 10


def zigzag(n: int) -> int:
    """Map a signed 64-bit int to its unsigned zigzag form (``(n << 1) ^ (n >> 63)``):
    0, -1, 1, -2, ... become 0, 1, 2, 3, ..."""
    return (n << 1) ^ (n >> 63)


def encode_varint(n: int) -> bytes:
    """Encode ``n`` (signed, fits in 64 bits) as a zigzag varint; 1-10 bytes.

    ``ByteUtils.writeVarlong`` (``writeVarint`` gives the same bytes for 32-bit values).
    Raises ValueError when ``n`` is outside ``[-2**63, 2**63)``.
    """
    z = (n << 1) ^ (n >> 63)
    if z < 0x80:
        return bytes((z,))
    if z >> 64:
        raise ValueError(f"{n} does not fit in 64 bits")
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def varint_size(n: int) -> int:
    """Number of bytes :func:`encode_varint` produces for ``n`` (1-10)."""
    z = ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF
    size = 1
    while z >= 0x80:
        z >>= 7
        size += 1
    return size


def decode_varint(buf, pos: int) -> tuple[int, int]:
    """Decode one zigzag varint from ``buf`` at ``pos``.

    ``buf``: bytes, bytearray or memoryview of bytes. Returns ``(value, next_pos)``, value a
    signed 64-bit int (bits past the 64th of a 10-byte varint are dropped, as
    ``ByteUtils.readVarlong`` does). Raises :class:`CorruptRecordError` if the buffer ends
    inside the varint or it is longer than 10 bytes.
    """
    try:
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
        result = b & 0x7F
        shift = 7
        pos += 1
        while True:
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
            if shift >= 7 * _MAX_VARLONG_BYTES:
                raise CorruptRecordError("varint longer than 10 bytes")
    except IndexError:
        raise CorruptRecordError("buffer ends inside a varint") from None
    result &= 0xFFFFFFFFFFFFFFFF
    return (result >> 1) ^ -(result & 1), pos
