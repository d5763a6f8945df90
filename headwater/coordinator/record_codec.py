"""Binary framing of coordinator records, Kafka's layout.

Key   = int16 record type id, then the key fields.
Value = int16 value version, then the value fields; a null value is a tombstone.
Fields use Kafka's non-flexible encodings (int16-length strings, int32-length arrays
and bytes, 16-byte uuids). A schema is a tuple of (name, type) where type is one of
the names below or a nested schema (meaning: array of structs).
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import Any, NamedTuple

Schema = tuple[tuple[str, Any], ...]

_FIXED = {"int8": struct.Struct(">b"), "int16": struct.Struct(">h"),
          "int32": struct.Struct(">i"), "int64": struct.Struct(">q"),
          "uint16": struct.Struct(">H"), "bool": struct.Struct(">?")}
_I16 = _FIXED["int16"]
_I32 = _FIXED["int32"]


class CodecError(ValueError):
    """Bytes that do not decode as the schema says."""


@dataclass(frozen=True, slots=True)
class RecordType:
    type_id: int
    name: str
    key: Schema
    value_version: int
    value: Schema


class CoordinatorRecord(NamedTuple):
    """One record: `value` None is a tombstone."""

    type_id: int
    key: dict[str, Any]
    value: dict[str, Any] | None


def _write(out: bytearray, schema: Schema, data: dict[str, Any]) -> None:
    for name, kind in schema:
        v = data.get(name)
        if isinstance(kind, tuple):
            items = v or ()
            out += _I32.pack(len(items))
            for item in items:
                _write(out, kind, item)
        elif kind in _FIXED:
            out += _FIXED[kind].pack(v if v is not None else 0)
        elif kind in ("string", "nstring"):
            if v is None:
                if kind == "string":
                    v = ""
                else:
                    out += _I16.pack(-1)
                    continue
            raw = v.encode()
            out += _I16.pack(len(raw)) + raw
        elif kind in ("bytes", "nbytes"):
            if v is None:
                out += _I32.pack(-1 if kind == "nbytes" else 0)
                continue
            out += _I32.pack(len(v)) + bytes(v)
        elif kind == "uuid":
            out += (v or uuid.UUID(int=0)).bytes
        elif kind in ("[string]", "[int32]"):
            items = v or ()
            out += _I32.pack(len(items))
            for item in items:
                if kind == "[int32]":
                    out += _I32.pack(item)
                else:
                    raw = item.encode()
                    out += _I16.pack(len(raw)) + raw
        else:
            raise CodecError(f"unknown field type {kind!r}")


def _read(buf: bytes, pos: int, schema: Schema) -> tuple[dict[str, Any], int]:
    out: dict[str, Any] = {}
    try:
        for name, kind in schema:
            if isinstance(kind, tuple):
                (n,), pos = _I32.unpack_from(buf, pos), pos + 4
                items = []
                for _ in range(max(n, 0)):
                    item, pos = _read(buf, pos, kind)
                    items.append(item)
                out[name] = items
            elif kind in _FIXED:
                st = _FIXED[kind]
                out[name] = st.unpack_from(buf, pos)[0]
                pos += st.size
            elif kind in ("string", "nstring"):
                (n,) = _I16.unpack_from(buf, pos)
                pos += 2
                if n < 0:
                    out[name] = None
                else:
                    out[name] = bytes(buf[pos:pos + n]).decode()
                    pos += n
            elif kind in ("bytes", "nbytes"):
                (n,) = _I32.unpack_from(buf, pos)
                pos += 4
                if n < 0:
                    out[name] = None
                else:
                    out[name] = bytes(buf[pos:pos + n])
                    pos += n
            elif kind == "uuid":
                out[name] = uuid.UUID(bytes=bytes(buf[pos:pos + 16]))
                pos += 16
            elif kind in ("[string]", "[int32]"):
                (n,) = _I32.unpack_from(buf, pos)
                pos += 4
                values: list[Any] = []
                for _ in range(max(n, 0)):
                    if kind == "[int32]":
                        values.append(_I32.unpack_from(buf, pos)[0])
                        pos += 4
                    else:
                        (ln,) = _I16.unpack_from(buf, pos)
                        values.append(bytes(buf[pos + 2:pos + 2 + ln]).decode())
                        pos += 2 + ln
                out[name] = values
            else:
                raise CodecError(f"unknown field type {kind!r}")
    except struct.error as exc:
        raise CodecError(str(exc)) from None
    return out, pos


class RecordCodec:
    """Encodes/decodes the record types of one internal topic."""

    def __init__(self, types: list[RecordType]) -> None:
        self.by_id = {t.type_id: t for t in types}

    def encode(self, record: CoordinatorRecord) -> tuple[bytes, bytes | None]:
        rtype = self.by_id[record.type_id]
        key = bytearray(_I16.pack(rtype.type_id))
        _write(key, rtype.key, record.key)
        if record.value is None:
            return bytes(key), None
        value = bytearray(_I16.pack(rtype.value_version))
        _write(value, rtype.value, record.value)
        return bytes(key), bytes(value)

    def decode(self, key: bytes, value: bytes | None) -> CoordinatorRecord | None:
        """None for record types this codec does not know (skipped on replay)."""
        if len(key) < 2:
            raise CodecError("record key shorter than a type id")
        (type_id,) = _I16.unpack_from(key, 0)
        rtype = self.by_id.get(type_id)
        if rtype is None:
            return None
        key_fields, _ = _read(key, 2, rtype.key)
        if value is None:
            return CoordinatorRecord(type_id, key_fields, None)
        value_fields, _ = _read(value, 2, rtype.value)
        return CoordinatorRecord(type_id, key_fields, value_fields)
