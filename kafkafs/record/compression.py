"""Compression codecs with the framings Kafka puts inside record batches.

Codec ids are the low three bits of a batch's attributes (``CompressionType`` in Kafka):
0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.

Framings (docs/design.md §2.2):

* gzip: a plain gzip stream (``GzipCompression``).
* snappy: xerial framing (``SnappyOutputStream``): 16-byte header, then chunks of
  i32 compressed length + raw snappy block of at most 32 KiB input. Readers also take a raw
  snappy block (librdkafka) and concatenated xerial streams.
* lz4: an LZ4 frame with independent 64 KiB blocks, no checksums
  (``Lz4BlockOutputStream``). Readers accept the wrong header checksum written for
  magic-0 data by Kafka before 0.10 (KAFKA-3160).
* zstd: one standard zstd frame (``ZstdCompression``).

The libraries doing the work are the well-kept ones: zlib/gzip, cramjam (snappy),
lz4, zstandard.
"""

from __future__ import annotations

import gzip
import struct

from .errors import CorruptRecordError, UnsupportedCodecError

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CODEC_IDS = {name: cid for cid, name in CODEC_NAMES.items()}

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024

_LZ4_MAGIC = 0x184D2204
_LZ4_BLOCK = 64 * 1024

_gzip_level = 6  # Kafka's compression.gzip.level default (Deflater.DEFAULT_COMPRESSION)
_zstd_level = 3  # Kafka's compression.zstd.level default
_lz4_level = 9  # Kafka's compression.lz4.level default (KIP-390)
_LZ4_DEFAULT_LEVEL = 9
# Lz4BlockOutputStream uses lz4-java's *fast* compressor at the default level (for
# backward compatibility) and the high-compression one only for other levels: liblz4's
# fast mode is python-lz4's compression_level 0.


def codec_id(name: str) -> int:
    """Codec id for a Kafka ``compression.type`` name (``none``/``gzip``/...).

    Raises ValueError for an unknown name (``producer``/``uncompressed`` are config-level
    values, resolved by the caller).
    """
    try:
        return CODEC_IDS[name]
    except KeyError:
        raise ValueError(f"unknown compression type {name!r}") from None


def compress(codec: int, data: bytes) -> bytes:
    """Compress ``data`` with ``codec`` in Kafka's framing. Returns the framed bytes."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return gzip.compress(data, compresslevel=_gzip_level, mtime=0)
    if codec == SNAPPY:
        return _xerial_compress(data)
    if codec == LZ4:
        import lz4.frame

        return lz4.frame.compress(
            data,
            compression_level=0 if _lz4_level == _LZ4_DEFAULT_LEVEL else _lz4_level,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
    if codec == ZSTD:
        import zstandard

        return zstandard.ZstdCompressor(level=_zstd_level).compress(data)
    raise UnsupportedCodecError(f"unknown compression codec {codec}")


def decompress(codec: int, data) -> bytes:
    """Undo :func:`compress` (and the other framings real clients write).

    ``data`` is bytes-like. Raises :class:`CorruptRecordError` when the stream is damaged,
    :class:`UnsupportedCodecError` for an unknown codec id.
    """
    if codec != NONE and len(data) == 0 and codec in CODEC_NAMES:
        raise CorruptRecordError(f"empty {CODEC_NAMES[codec]} data")
    try:
        if codec == NONE:
            return bytes(data)
        if codec == GZIP:
            return gzip.decompress(data)
        if codec == SNAPPY:
            return _snappy_decompress(data)
        if codec == LZ4:
            return _lz4_decompress(data)
        if codec == ZSTD:
            return _zstd_decompress(data)
    except CorruptRecordError:
        raise
    except Exception as exc:  # each library raises its own error type
        raise CorruptRecordError(
            f"cannot decompress {CODEC_NAMES.get(codec, codec)} data: {exc}"
        ) from exc
    raise UnsupportedCodecError(f"unknown compression codec {codec}")


def _xerial_compress(data: bytes) -> bytes:
    import cramjam

    out = [_XERIAL_HEADER]
    view = memoryview(data)
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
        out.append(struct.pack(">i", len(block)))
        out.append(block)
    return b"".join(out)


def _snappy_decompress(data) -> bytes:
    """Raw snappy block, or xerial-framed chunks (several concatenated streams allowed)."""
    import cramjam

    data = bytes(data)
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    out = []
    pos = 0
    end = len(data)
    header_size = len(_XERIAL_HEADER)
    while pos < end:
        if data.startswith(_XERIAL_MAGIC, pos):  # (another) stream header
            if pos + header_size > end:
                raise CorruptRecordError("truncated xerial snappy header")
            pos += header_size
            continue
        if pos + 4 > end:
            raise CorruptRecordError("truncated xerial snappy chunk length")
        (size,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if size < 0 or pos + size > end:
            raise CorruptRecordError("xerial snappy chunk runs past the end of the data")
        out.append(cramjam.snappy.decompress_raw(data[pos : pos + size]))
        pos += size
    return b"".join(out)


def _lz4_decompress(data) -> bytes:
    """Decode an LZ4 frame; independent-block frames are walked here so that the header
    checksum is not enforced (old Kafka wrote it wrong), others go to liblz4."""
    import lz4.block
    import lz4.frame

    data = bytes(data)
    if len(data) < 7:
        raise CorruptRecordError("lz4 frame shorter than its header")
    magic, flg, bd = struct.unpack_from("<IBB", data, 0)
    if magic != _LZ4_MAGIC:
        raise CorruptRecordError(f"not an lz4 frame (magic {magic:#x})")
    if (flg >> 6) != 1:
        raise CorruptRecordError(f"unsupported lz4 frame version {flg >> 6}")
    if not flg & 0x20:  # linked blocks: let liblz4 handle it
        return lz4.frame.decompress(data)
    block_checksum = bool(flg & 0x10)
    content_size = bool(flg & 0x08)
    content_checksum = bool(flg & 0x04)
    max_block = 1 << (8 + 2 * ((bd >> 4) & 0x7))
    dict_id = bool(flg & 0x01)
    pos = 6 + (8 if content_size else 0) + (4 if dict_id else 0) + 1  # FLG BD [size] [dict] HC
    # (HC is deliberately not checked: see the module docstring)
    out = []
    end = len(data)
    while True:
        if pos + 4 > end:
            raise CorruptRecordError("lz4 frame ends without an end mark")
        (size,) = struct.unpack_from("<I", data, pos)
        pos += 4
        if size == 0:
            break
        stored = size & 0x80000000
        size &= 0x7FFFFFFF
        if pos + size > end:
            raise CorruptRecordError("lz4 block runs past the end of the frame")
        block = data[pos : pos + size]
        pos += size + (4 if block_checksum else 0)
        if stored:
            out.append(block)
        else:
            out.append(lz4.block.decompress(block, uncompressed_size=max_block))
    if content_checksum:
        pos += 4
    return b"".join(out)


def _zstd_decompress(data) -> bytes:
    """One or more zstd frames, with or without a content size in their headers."""
    import zstandard

    data = bytes(data)
    if not data:
        raise CorruptRecordError("empty zstd data")
    out = []
    dctx = zstandard.ZstdDecompressor()
    while data:
        obj = dctx.decompressobj()
        out.append(obj.decompress(data))
        if not obj.eof:
            raise CorruptRecordError("zstd frame is truncated")
        data = obj.unused_data
    return b"".join(out)
