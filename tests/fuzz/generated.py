"""Grammar-based requests: for every API and version the broker advertises, a request
built from kio's schema with random values.

The recorded seeds cover what our clients send; this covers the rest (admin, share
state, quota, transaction-marker APIs no client here records), and reaches handlers with
combinations no seed has: random array lengths (including 0 and 20), nulls wherever the
schema allows them, extreme and small integers, internal and odd names, random bytes or
a valid record batch as records.

One exception keeps the campaign's canary client honest: AlterClientQuotas is sent with
validate_only (every check runs, nothing is stored), since a `<default>` quota of a few
bytes would throttle the canary to a halt, which is the quota working, not a bug.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import random
import struct
import typing
import uuid
from typing import Any

from kio.serial import entity_writer

from headwater.records.batch import build_batch
from headwater.wire.header import uvarint
from headwater.wire.schemas import load_request_schema
from tests.fuzz.structured import _INTS, _MS, _NAMES, _hints, _unwrap

ALTER_CLIENT_QUOTAS = 49
_FLOATS = [0.0, -1.0, 1.0, 1e308, 12.5, float("inf")]
_SMALL = [0, 1, 2, 3, -1]


def _record_batch(rng: random.Random) -> bytes:
    n = rng.randint(1, 3)
    return build_batch([(rng.choice((None, b"k")), rng.randbytes(rng.randint(0, 20)), [], 0)
                        for _ in range(n)])


class RequestGenerator:
    def __init__(self, apis: list[tuple[int, int, int]], rng: random.Random) -> None:
        self.rng = rng
        self.schemas: list[tuple[int, int, type]] = []
        for key, low, high in apis:
            for version in range(low, high + 1):
                try:
                    self.schemas.append((key, version, load_request_schema(key, version)))
                except Exception:  # noqa: BLE001, S112  kio lacks it: nothing to build
                    continue

    def frame(self, correlation_id: int = 0) -> bytes | None:
        key, version, cls = self.rng.choice(self.schemas)
        try:
            request = self._entity(cls, 0)
            if key == ALTER_CLIENT_QUOTAS:
                request = dataclasses.replace(request, validate_only=True)
            out = io.BytesIO()
            entity_writer(cls)(out, request)
        except Exception:  # noqa: BLE001  a value the encoder refuses: another time
            return None
        client = b"fuzz-gen"
        header = struct.pack(">hhih", key, version, correlation_id, len(client)) + client
        if cls.__flexible__:
            header += uvarint(0)
        body = header + out.getvalue()
        return struct.pack(">i", len(body)) + body

    def _entity(self, cls: type, depth: int) -> Any:
        hints = _hints(cls)
        values = {}
        for f in dataclasses.fields(cls):
            tp, optional = _unwrap(hints[f.name])
            values[f.name] = self._value(f, tp, optional, depth)
        return cls(**values)

    def _value(self, f: dataclasses.Field, tp: Any, optional: bool, depth: int) -> Any:
        rng = self.rng
        if optional and rng.random() < 0.15:
            return None
        if typing.get_origin(tp) is tuple:
            item = typing.get_args(tp)[0]
            n = rng.choice((0, 1, 1, 1, 2, 3, 20)) if depth < 3 else 0
            return tuple(self._item(f, item, depth) for _ in range(n))
        if dataclasses.is_dataclass(tp):
            return self._entity(tp, depth + 1)
        return self._scalar(f, tp)

    def _item(self, f: dataclasses.Field, item: Any, depth: int) -> Any:
        if dataclasses.is_dataclass(item):
            return self._entity(item, depth + 1)
        return self._scalar(f, item)

    def _scalar(self, f: dataclasses.Field, tp: Any) -> Any:
        rng = self.rng
        kafka_type = f.metadata.get("kafka_type")
        if kafka_type in _INTS:
            value = rng.choice(_INTS[kafka_type] + _SMALL)
            return value if not kafka_type.startswith("uint") else abs(value)
        if kafka_type in _MS:
            ms = rng.choice(_MS[kafka_type] + [0, 100])
            if kafka_type == "datetime_i64":
                return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
            return datetime.timedelta(milliseconds=ms)
        if kafka_type == "bool":
            return rng.random() < 0.5
        if kafka_type == "string":
            return rng.choice(_NAMES + ["fuzz-" + rng.choice("abc")])
        if kafka_type in ("bytes", "records"):
            return rng.choice((b"", rng.randbytes(rng.randint(1, 80)), _record_batch(rng)))
        if kafka_type == "uuid":
            return rng.choice((uuid.UUID(int=0), uuid.uuid4()))
        if kafka_type == "float64":
            return rng.choice(_FLOATS)
        if kafka_type == "error_code":
            return tp(0)
        if isinstance(tp, type) and issubclass(tp, int):
            return tp(rng.choice(_SMALL[:4]))
        raise TypeError(f"no generator for {f.name}: {kafka_type} {tp}")
