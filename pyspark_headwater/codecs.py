"""Decompression of a record batch's records section, for the native reader.

The connector is a client of the broker, so it carries its own copy of the few lines
that read Kafka's codecs (attributes bits 0-2) instead of importing the broker's: gzip,
snappy (raw as librdkafka writes it, or xerial-framed as Java and kafka-python do), lz4
frames and zstd, all through cramjam.
"""

from __future__ import annotations

import struct

import cramjam

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16  # magic, version, compatible version
_I32 = struct.Struct(">i")


class CodecError(ValueError):
    """Compressed records that do not decompress."""


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    try:
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == SNAPPY:
            return _snappy(memoryview(data))
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except CodecError:
        raise
    except Exception as exc:  # cramjam raises its own DecompressionError and ValueErrors
        raise CodecError(f"codec {codec}: decompression failed: {exc}") from exc
    raise CodecError(f"unknown compression codec {codec}")


def _snappy(view: memoryview) -> bytes:
    if bytes(view[:len(_XERIAL_MAGIC)]) != _XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    pos, end, out = _XERIAL_HEADER_SIZE, len(view), []
    while pos < end:
        if pos + 4 > end:
            raise CodecError("truncated xerial snappy chunk header")
        (length,) = _I32.unpack_from(view, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise CodecError("truncated xerial snappy chunk")
        out.append(bytes(cramjam.snappy.decompress_raw(view[pos:pos + length])))
        pos += length
    return b"".join(out)
