"""Compression framings Kafka puts inside record batches (kafkafs.record.compression)."""

from __future__ import annotations

import gzip
import random
import struct

import cramjam
import lz4.block
import lz4.frame
import pytest
import zstandard

from kafkafs.record import compression as c
from kafkafs.record.errors import CorruptRecordError, UnsupportedCodecError

CODECS = [c.NONE, c.GZIP, c.SNAPPY, c.LZ4, c.ZSTD]
XERIAL_HEADER = bytes.fromhex("82534e4150505900" "00000001" "00000001")
KAFKA_LZ4_HEADER = bytes.fromhex("04224d18" "60" "40" "82")


def _payloads():
    rnd = random.Random(7)
    return {
        "empty": b"",
        "one": b"x",
        "text": b"hello kafka " * 1000,
        "random": rnd.randbytes(5000),  # incompressible: lz4 stores blocks raw
        "big": b"".join(rnd.randbytes(64) * 40 for _ in range(100)),  # 256000 B, > 64 KiB
    }


PAYLOADS = _payloads()


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_round_trip(codec, name):
    data = PAYLOADS[name]
    framed = c.compress(codec, data)
    assert isinstance(framed, bytes)
    assert c.decompress(codec, framed) == data
    # readers get memoryviews of a segment buffer
    assert c.decompress(codec, memoryview(bytearray(framed))) == data


def test_codec_ids_follow_kafka():
    assert [c.codec_id(n) for n in ("none", "gzip", "snappy", "lz4", "zstd")] == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError):
        c.codec_id("brotli")
    with pytest.raises(UnsupportedCodecError):
        c.compress(5, b"x")
    with pytest.raises(UnsupportedCodecError):
        c.decompress(7, b"x")


# -- gzip --------------------------------------------------------------------------------

def test_gzip_is_a_plain_gzip_stream():
    framed = c.compress(c.GZIP, PAYLOADS["text"])
    assert framed[:3] == b"\x1f\x8b\x08"
    assert gzip.decompress(framed) == PAYLOADS["text"]


def test_gzip_concatenated_members():
    framed = gzip.compress(b"abc") + gzip.compress(b"def")
    assert c.decompress(c.GZIP, framed) == b"abcdef"


# -- snappy ------------------------------------------------------------------------------

def test_snappy_xerial_header_and_chunks():
    data = PAYLOADS["big"]
    framed = c.compress(c.SNAPPY, data)
    assert framed[:16] == XERIAL_HEADER
    # chunks of i32 length + raw block, each of at most 32 KiB of input
    pos, inputs = 16, []
    while pos < len(framed):
        (size,) = struct.unpack_from(">i", framed, pos)
        block = framed[pos + 4:pos + 4 + size]
        inputs.append(bytes(cramjam.snappy.decompress_raw(block)))
        pos += 4 + size
    assert pos == len(framed)
    assert all(len(i) == 32 * 1024 for i in inputs[:-1])
    assert 0 < len(inputs[-1]) <= 32 * 1024
    assert b"".join(inputs) == data


def test_snappy_raw_block_accepted():
    data = PAYLOADS["text"]
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert not raw.startswith(XERIAL_HEADER[:8])
    assert c.decompress(c.SNAPPY, raw) == data


def test_snappy_concatenated_xerial_streams():
    a, b = b"first stream " * 50, PAYLOADS["big"]
    framed = c.compress(c.SNAPPY, a) + c.compress(c.SNAPPY, b)
    assert c.decompress(c.SNAPPY, framed) == a + b


def test_snappy_header_only_is_empty():
    assert c.decompress(c.SNAPPY, XERIAL_HEADER) == b""


@pytest.mark.parametrize("damage", [
    lambda f: f[:10],  # header cut
    lambda f: f[:18],  # chunk length cut
    lambda f: f[:-3],  # chunk cut
    lambda f: f[:16] + b"\xff\xff\xff\xff" + f[20:],  # negative chunk length
    lambda f: f[:20] + bytes(b ^ 0x5A for b in f[20:]),  # garbage block
])
def test_snappy_damage_raises(damage):
    framed = c.compress(c.SNAPPY, PAYLOADS["text"])
    with pytest.raises(CorruptRecordError):
        c.decompress(c.SNAPPY, damage(framed))


# -- lz4 ---------------------------------------------------------------------------------

def _lz4_blocks(frame: bytes):
    """(size word, block) pairs of a frame with the 7-byte header Kafka writes."""
    pos, out = 7, []
    while True:
        (word,) = struct.unpack_from("<I", frame, pos)
        pos += 4
        if word == 0:
            assert pos == len(frame)
            return out
        size = word & 0x7FFFFFFF
        out.append((word, frame[pos:pos + size]))
        pos += size


def test_lz4_frame_header_bytes():
    for data in PAYLOADS.values():
        assert c.compress(c.LZ4, data)[:7] == KAFKA_LZ4_HEADER


def test_lz4_independent_64k_blocks():
    data = PAYLOADS["big"]
    blocks = _lz4_blocks(c.compress(c.LZ4, data))
    assert len(blocks) == 4  # 256000 B in 64 KiB blocks
    out = b"".join(blocks_[1] if blocks_[0] & 0x80000000 else
                   lz4.block.decompress(blocks_[1], uncompressed_size=65536)
                   for blocks_ in blocks)  # each block decodes alone: independent
    assert out == data


def test_lz4_incompressible_blocks_are_stored():
    blocks = _lz4_blocks(c.compress(c.LZ4, PAYLOADS["random"]))
    assert blocks and all(word & 0x80000000 for word, _ in blocks)


@pytest.mark.parametrize("hc", [0x1A, 0x00, 0xFF, 0x83])
def test_lz4_wrong_header_checksum_accepted(hc):
    data = PAYLOADS["text"]
    framed = bytearray(c.compress(c.LZ4, data))
    framed[6] = hc
    with pytest.raises(RuntimeError):  # liblz4 itself refuses this frame...
        lz4.frame.decompress(bytes(framed))
    assert c.decompress(c.LZ4, bytes(framed)) == data  # ...Kafka's readers must not


def test_lz4_other_frame_options_decode():
    data = PAYLOADS["big"]
    for kwargs in (
        {},  # liblz4 defaults: linked blocks, content checksum
        {"block_linked": False, "block_checksum": True},
        {"block_linked": False, "store_size": True, "content_checksum": True},
        {"block_size": lz4.frame.BLOCKSIZE_MAX4MB, "block_linked": False},
    ):
        assert c.decompress(c.LZ4, lz4.frame.compress(data, **kwargs)) == data, kwargs


@pytest.mark.parametrize("damage", [
    lambda f: f[:5],  # shorter than a header
    lambda f: b"\x00\x00\x00\x00" + f[4:],  # bad magic
    lambda f: f[:4] + b"\xa0" + f[5:],  # frame version 2
    lambda f: f[:-4],  # no end mark
    lambda f: f[:7] + b"\xff\xff\x00\x00" + f[11:],  # block runs past the end
    lambda f: f[:11] + bytes(b ^ 0xA5 for b in f[11:-4]) + f[-4:],  # garbage block
])
def test_lz4_damage_raises(damage):
    framed = c.compress(c.LZ4, PAYLOADS["text"])
    with pytest.raises(CorruptRecordError):
        c.decompress(c.LZ4, damage(framed))


# -- zstd --------------------------------------------------------------------------------

def test_zstd_frame_without_content_size():
    data = PAYLOADS["big"]
    cctx = zstandard.ZstdCompressor(write_content_size=False)
    framed = cctx.compress(data)
    params = zstandard.get_frame_parameters(framed)
    assert params.content_size == zstandard.CONTENTSIZE_UNKNOWN
    with pytest.raises(zstandard.ZstdError):  # the one-shot API needs the size...
        zstandard.ZstdDecompressor().decompress(framed)
    assert c.decompress(c.ZSTD, framed) == data  # ...we must not


def test_zstd_streamed_frame_and_two_frames():
    data = PAYLOADS["text"]
    obj = zstandard.ZstdCompressor().compressobj()
    streamed = obj.compress(data) + obj.flush()
    assert c.decompress(c.ZSTD, streamed) == data
    two = c.compress(c.ZSTD, b"abc") + c.compress(c.ZSTD, b"def")
    assert c.decompress(c.ZSTD, two) == b"abcdef"


def test_zstd_is_one_standard_frame():
    framed = c.compress(c.ZSTD, PAYLOADS["text"])
    assert framed[:4] == b"\x28\xb5\x2f\xfd"
    assert zstandard.ZstdDecompressor().decompressobj().decompress(framed) == PAYLOADS["text"]


# -- damage, every codec -----------------------------------------------------------------

@pytest.mark.parametrize("codec", [c.GZIP, c.SNAPPY, c.LZ4, c.ZSTD])
@pytest.mark.parametrize("how", ["truncated", "flipped", "garbage", "empty"])
def test_damaged_data_raises_corrupt_record_error(codec, how):
    data = PAYLOADS["text"]
    framed = bytearray(c.compress(codec, data))
    if how == "truncated":
        framed = framed[: len(framed) // 2]
    elif how == "flipped":
        for i in range(len(framed) // 3, len(framed) - 8):
            framed[i] ^= 0x55
    elif how == "garbage":
        framed = bytearray(random.Random(3).randbytes(200))
    else:
        framed = bytearray()
    # each library has its own exception types: the codec must turn them all into ours
    with pytest.raises(CorruptRecordError):
        c.decompress(codec, bytes(framed))
