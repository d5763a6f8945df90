"""Structure-aware mutations: decode a seed with kio, change one value, encode again.

Byte-level mutations mostly break the framing, so the broker closes the connection at
the decoder. These keep the request well-formed and change what handlers see: extreme
integers and timeouts, empty, duplicated and null arrays, names of internal topics, very
long or empty strings, random bytes as records, nulls where the schema allows them.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import random
import struct
import typing
import uuid
from functools import cache
from typing import Any

from kio.serial import entity_writer

from headwater.wire.codec import decode_request
from headwater.wire.header import parse_request_header, skip_tagged_fields
from headwater.wire.schemas import load_request_schema

_INTS = {
    "int8": [-128, -1, 0, 1, 127], "uint8": [0, 1, 255],
    "int16": [-32768, -2, -1, 0, 1, 32767], "uint16": [0, 65535],
    "int32": [-(2**31), -2, -1, 0, 1, 2**24, 2**31 - 1], "uint32": [0, 2**32 - 1],
    "int64": [-(2**63), -2, -1, 0, 1, 2**53, 2**63 - 1], "uint64": [0, 2**64 - 1],
}
_MS = {"timedelta_i32": [-(2**31), -1, 0, 2**31 - 1], "timedelta_i64": [-1, 0, 2**40],
       "datetime_i64": [-1, 0, 2**41]}
_NAMES = ["", "__consumer_offsets", "__transaction_state", "__cluster_metadata",
          "__share_group_state", "x" * 300, ".", "..", "../../etc/passwd", "é\u0000",
          "seed-ck", "seed-kp", "a"]


@dataclasses.dataclass(slots=True)
class Seed:
    cls: type
    header: bytes   # size prefix excluded: api key .. header tagged fields
    request: Any


def decode_seeds(frames: list[bytes]) -> list[Seed]:
    """The seeds kio can decode (all of them, unless a recording was cut short)."""
    out = []
    for frame in frames:
        body = frame[4:]
        try:
            header = parse_request_header(body)
            cls = load_request_schema(header.api_key, header.api_version)
            pos = header.body_offset
            if cls.__flexible__:
                pos = skip_tagged_fields(body, pos)
            request = decode_request(header.api_key, header.api_version, body, pos)
        except Exception:  # noqa: BLE001  a seed we cannot use structurally
            continue
        out.append(Seed(cls, body[:pos], request))
    return out


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _unwrap(tp: Any) -> tuple[Any, bool]:
    if typing.get_origin(tp) in (typing.Union, typing.types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0], True
    return tp, False


class StructuredMutator:
    def __init__(self, seeds: list[Seed], rng: random.Random) -> None:
        self.seeds = seeds
        self.rng = rng

    def frame(self) -> bytes | None:
        seed = self.rng.choice(self.seeds)
        request = seed.request
        for _ in range(self.rng.choice((1, 1, 2, 3))):
            request = self._entity(request)
        out = io.BytesIO()
        try:
            entity_writer(seed.cls)(out, request)
        except Exception:  # noqa: BLE001  a value the encoder refuses: try another
            return None
        body = seed.header + out.getvalue()
        return struct.pack(">i", len(body)) + body

    def _entity(self, obj: Any) -> Any:
        fields = dataclasses.fields(obj)
        if not fields:
            return obj
        f = self.rng.choice(fields)
        tp, optional = _unwrap(_hints(type(obj))[f.name])
        value = self._value(f, tp, optional, getattr(obj, f.name))
        return dataclasses.replace(obj, **{f.name: value})

    def _value(self, f: dataclasses.Field, tp: Any, optional: bool, value: Any) -> Any:
        rng = self.rng
        if optional and rng.random() < 0.1:
            return None
        if typing.get_origin(tp) is tuple:
            item = typing.get_args(tp)[0]
            items = tuple(value or ())
            roll = rng.random()
            if items and dataclasses.is_dataclass(item) and roll < 0.6:
                i = rng.randrange(len(items))
                return items[:i] + (self._entity(items[i]),) + items[i + 1:]
            if roll < 0.7:
                return ()
            if items and roll < 0.9:
                return items * rng.choice((2, 3, 50))
            return None  # a null array, also where the schema forbids it
        if dataclasses.is_dataclass(tp):
            return self._entity(value)
        kafka_type = f.metadata.get("kafka_type")
        if kafka_type in _INTS:
            return rng.choice(_INTS[kafka_type])
        if kafka_type in _MS:
            ms = rng.choice(_MS[kafka_type])
            if kafka_type == "datetime_i64":
                return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
            return datetime.timedelta(milliseconds=ms)
        if kafka_type == "bool":
            return not value
        if kafka_type == "string":
            return rng.choice(_NAMES)
        if kafka_type in ("bytes", "records"):
            return rng.choice((b"", rng.randbytes(rng.randint(1, 80)), bytes(61)))
        if kafka_type == "uuid":
            return rng.choice((uuid.UUID(int=0), uuid.uuid4()))
        return value
