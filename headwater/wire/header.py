"""Request header v1/v2 parsing and response header encoding.

Parsed by hand: the header is four fixed fields and must be read before the body
schema (and so its flexibility) is known. In header v2 the client id stays a legacy
nullable string; only the trailing tagged fields are new.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

_FIXED = struct.Struct(">hhih")
_CORRELATION = struct.Struct(">i")


class HeaderError(ValueError):
    """The bytes do not form a request header."""


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int  # where the header ended (before tagged fields for v1 headers)


def parse_request_header(frame: bytes) -> RequestHeader:
    """Parse the fixed part (api key, version, correlation id, client id)."""
    if len(frame) < _FIXED.size:
        raise HeaderError(f"frame of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id, client_len = _FIXED.unpack_from(frame, 0)
    pos = _FIXED.size
    client_id: str | None = None
    if client_len >= 0:
        end = pos + client_len
        if end > len(frame):
            raise HeaderError("client id runs past the end of the frame")
        client_id = frame[pos:end].decode("utf-8", "replace")
        pos = end
    elif client_len != -1:
        raise HeaderError(f"invalid client id length {client_len}")
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def skip_tagged_fields(frame: bytes, pos: int) -> int:
    """Skip a tagged-field section (header v2) and return the new position."""
    count, pos = read_uvarint(frame, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(frame, pos)
        size, pos = read_uvarint(frame, pos)
        pos += size
        if pos > len(frame):
            raise HeaderError("tagged field runs past the end of the frame")
    return pos


def uvarint(n: int) -> bytes:
    """An unsigned varint (the lengths and counts of flexible versions)."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def read_uvarint(buf: bytes, pos: int, end: int | None = None) -> tuple[int, int]:
    """An unsigned varint at `pos` that must end before `end` (default: the buffer's)."""
    end = len(buf) if end is None else end
    result = shift = 0
    while True:
        if pos >= end:
            raise HeaderError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise HeaderError("varint too long")


def response_header(correlation_id: int, flexible: bool) -> bytes:
    """Response header v0 (correlation id) or v1 (plus an empty tagged-field section)."""
    head = _CORRELATION.pack(correlation_id)
    return head + b"\x00" if flexible else head
