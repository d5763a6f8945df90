"""RecordBatch compression codecs (attributes bits 0-2), backed by cramjam.

Only record-level paths (decode, build) use this: produce and fetch move compressed
batches as opaque bytes. Output formats are the ones Kafka's Java client reads: snappy in
xerial framing, lz4 frames with independent blocks.
"""

from __future__ import annotations

import struct

import cramjam
from kio.schema.errors import ErrorCode as E

from headwater.storage.errors import LogError

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # what Java's SnappyOutputStream and kafka-python use
_I32 = struct.Struct(">i")

Buffer = bytes | bytearray | memoryview


# Kafka's default levels (compression.gzip.level -1 = zlib's 6, lz4 9, zstd 3); cramjam's
# own zstd default (11) is several times slower for little gain.
DEFAULT_LEVELS = {GZIP: 6, LZ4: 9, ZSTD: 3}


def compress(codec: int, data: Buffer, level: int | None = None) -> bytes:
    """Compress `data` with the codec id from a batch's attributes, at `level` (Kafka's
    compression.<codec>.level; None or -1: Kafka's default for the codec)."""
    if level is None or level == -1:
        level = DEFAULT_LEVELS.get(codec)
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data, level=level))
    if codec == SNAPPY:
        return _xerial_compress(data)
    if codec == LZ4:
        # Java's KafkaLZ4BlockInputStream rejects linked (dependent) blocks.
        comp = cramjam.lz4.Compressor(level=level, content_checksum=False, block_linked=False)
        comp.compress(bytes(data))
        return bytes(comp.finish())
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=level))
    raise LogError(E.corrupt_message, f"unknown compression codec {codec}")


def decompress(codec: int, data: Buffer) -> bytes:
    """Decompress a batch's records section; any codec failure is CORRUPT_MESSAGE."""
    try:
        if codec == NONE:
            return bytes(data)
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == SNAPPY:
            return _snappy_decompress(data)
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except LogError:
        raise
    except Exception as exc:  # cramjam raises its own DecompressionError and ValueErrors
        raise LogError(E.corrupt_message,
                       f"{CODEC_NAMES[codec]} decompression failed: {exc}") from exc
    raise LogError(E.corrupt_message, f"unknown compression codec {codec}")


def _xerial_compress(data: Buffer) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start:start + _XERIAL_BLOCK]))
        parts.append(_I32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: Buffer) -> bytes:
    """Raw snappy (librdkafka) or xerial-framed chunks (Java, kafka-python)."""
    view = memoryview(data)
    if bytes(view[:8]) != _XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    pos, end, out = 16, len(view), []
    while pos < end:
        if pos + 4 > end:
            raise LogError(E.corrupt_message, "truncated xerial snappy chunk header")
        (length,) = _I32.unpack_from(view, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise LogError(E.corrupt_message, "truncated xerial snappy chunk")
        out.append(bytes(cramjam.snappy.decompress_raw(view[pos:pos + length])))
        pos += length
    return b"".join(out)
