"""How `headwater consume` prints a record: kcat's `-f` format string, or one JSON object
per line (as `rpk topic consume` does) for scripts.

Format tokens (kcat's): %t topic, %p partition, %o offset, %T timestamp (ms), %k key,
%s value (%v too), %K key length, %S value length, %h headers (k=v,k=v), %% a percent
sign; escapes \\n, \\t, \\r, \\\\. A null key or value prints as nothing (its length
as -1).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from confluent_kafka import Message

_TOKEN = re.compile(r"%[tpoTksvKSh%]|\\[ntr\\]")
_ESCAPES = {"\\n": "\n", "\\t": "\t", "\\r": "\r", "\\\\": "\\"}


if TYPE_CHECKING:  # a consumer's or a share consumer's (the stubs' Message is generic)
    Record = Message[Any, Any]
else:
    Record = Message


def _text(data: str | bytes | None) -> str | None:
    if data is None or isinstance(data, str):
        return data
    return data.decode("utf-8", errors="backslashreplace")


def _length(data: str | bytes | None) -> int:
    return -1 if data is None else len(data)


def _headers(record: Record) -> list[tuple[str, str | None]]:
    found = record.headers() or []
    pairs = found.items() if isinstance(found, dict) else found
    return [(k, _text(v)) for k, v in pairs]


def as_json(record: Record) -> str:
    """One line: topic, partition, offset, timestamp, key, value, headers (UTF-8, bytes
    that are not escaped with backslashes)."""
    out: dict[str, Any] = {"topic": record.topic(), "partition": record.partition(),
                           "offset": record.offset(), "timestamp": record.timestamp()[1],
                           "key": _text(record.key()), "value": _text(record.value()),
                           "headers": [{"key": k, "value": v} for k, v in _headers(record)]}
    return json.dumps(out) + "\n"


def formatter(fmt: str) -> Callable[[Record], str]:
    """A function printing a record with `fmt` (checked once, here)."""
    def one(record: Record) -> str:
        def token(m: re.Match[str]) -> str:
            t = m.group(0)
            if t in _ESCAPES:
                return _ESCAPES[t]
            match t[1]:
                case "t":
                    return record.topic() or ""
                case "p":
                    return str(record.partition())
                case "o":
                    return str(record.offset())
                case "T":
                    return str(record.timestamp()[1])
                case "k":
                    return _text(record.key()) or ""
                case "s" | "v":
                    return _text(record.value()) or ""
                case "K":
                    return str(_length(record.key()))
                case "S":
                    return str(_length(record.value()))
                case "h":
                    return ",".join(f"{k}={v or ''}" for k, v in _headers(record))
            return "%"
        return _TOKEN.sub(token, fmt)
    return one
