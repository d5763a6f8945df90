"""A bounds pre-pass over a request body, run before kio decodes it.

kio's native reader trusts the element count of an array read from the wire and reserves
memory for it before reading a single element: a 5-byte compact array length of 2^32
asks for a 100 GB vector, the allocation fails inside Rust and aborts the process. No
Python ``try`` can catch that, and kio 0.6.5 is its newest release. So before the body
reaches kio, this module walks it along the same schema (kio's request dataclasses) and
checks every length read from the wire against the bytes that remain in the frame:

* an array's count must fit the remaining bytes at its element's minimum encoded size,
  strings and bytes must fit, tagged fields must fit, and a known tagged field's content
  must be valid within its own declared size;
* a null (length -1, or compact 0) is accepted only where the schema declares the field
  nullable, and a legacy length below -1 is never valid;

so kio never sees a length it could not satisfy, and handlers never get ``None`` where
Kafka's schema forbids it. Kafka itself answers such a request by closing the connection
("Error parsing request"), and so do we.

Speed: per (api key, version) the walk is generated as Python source once, with runs of
fixed-size fields folded into a single bounds check, so a Produce or Fetch request costs
a few microseconds on top of kio's decode (`bench/decode_bench.py`).
"""

from __future__ import annotations

import dataclasses
import struct
import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any

from .header import read_uvarint, uvarint
from .schemas import load_request_schema

_FIXED_SIZE = {
    "bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "error_code": 2,
    "int32": 4, "uint32": 4, "timedelta_i32": 4, "int64": 8, "uint64": 8,
    "float64": 8, "timedelta_i64": 8, "datetime_i64": 8, "uuid": 16,
}
_LENGTH_PREFIXED = {"string", "bytes", "records"}


class MalformedRequest(ValueError):
    """The body breaks its schema: a length past the frame's end, or a forbidden null."""


def _fail(message: str) -> None:
    raise MalformedRequest(message)


# Tagged fields the schema does not know, found by the last check: (start of the
# section's count, end of the count, count without them, [(start, end) of each]).
# KIP-482 says a receiver ignores them; kio raises KeyError, so `strip_unknown_tags`
# removes them before kio decodes (a newer client may send tags this kio never heard of).
UNKNOWN_TAGS: list[tuple[int, int, int, list[tuple[int, int]]]] = []
_inside_known_tag = [0]


def _tagged_fields(buf: bytes, pos: int, end: int,
                   checkers: dict[int, Callable[[bytes, int, int], int]]) -> int:
    """A tagged-field section: each field within the frame, a known one valid inside
    its own declared size (kio parses known tags with their field's reader); unknown
    ones are noted in UNKNOWN_TAGS."""
    start = pos
    count, pos = read_uvarint(buf, pos, end)
    count_end = pos
    if count > end - pos:
        raise MalformedRequest("tagged field count past the end")
    unknown: list[tuple[int, int]] = []
    for _ in range(count):
        field_start = pos
        tag, pos = read_uvarint(buf, pos, end)
        size, pos = read_uvarint(buf, pos, end)
        stop = pos + size
        if stop > end:
            raise MalformedRequest("tagged field past the end")
        checker = checkers.get(tag)
        if checker is None:
            if _inside_known_tag[0]:
                raise MalformedRequest(f"unknown tagged field {tag} inside a tagged field")
            unknown.append((field_start, stop))
        else:
            _inside_known_tag[0] += 1
            try:
                if checker(buf, pos, stop) > stop:
                    raise MalformedRequest("tagged field overruns its size")
            finally:
                _inside_known_tag[0] -= 1
        pos = stop
    if unknown:
        UNKNOWN_TAGS.append((start, count_end, count - len(unknown), unknown))
    return pos


def strip_unknown_tags(buf: bytes, pos: int) -> bytes:
    """`buf[pos:]` without the tagged fields UNKNOWN_TAGS lists (their sections'
    counts lowered to match); the other bytes are unchanged."""
    out = bytearray()
    at = pos
    for count_start, count_end, kept, spans in sorted(UNKNOWN_TAGS):
        out += buf[at:count_start]
        out += uvarint(kept)
        at = count_end
        for first, stop in spans:
            out += buf[at:first]
            at = stop
    out += buf[at:]
    return bytes(out)


# An unsigned varint into n: one byte inline (the common case), longer ones by call.
_UVARINT = ["if p < e and b[p] < 128: n = b[p]; p += 1",
            "elif p + 1 < e and b[p + 1] < 128: n = (b[p] & 127) | b[p + 1] << 7; p += 2",
            "else: n, p = _uv(b, p, e)"]


def _optional(tp: Any) -> tuple[Any, bool]:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return tp, False


class _Generator:
    """Writes one Python function per kio entity class; `compile` returns the root's."""

    def __init__(self) -> None:
        self.names: dict[type, str] = {}
        self.sources: list[str] = []

    def function_for(self, cls: Any, root: bool = False) -> str:
        name = self.names.get(cls)
        if name is None:
            name = self.names[cls] = f"_v{len(self.names)}"
            self.sources.append(self._entity(cls, name, root))
        return name

    def _entity(self, cls: Any, name: str, root: bool) -> str:
        flexible = bool(cls.__flexible__)
        hints = typing.get_type_hints(cls)
        # The request itself is checked up to the frame's end: check(frame, pos).
        lines = [f"def {name}(b, p):", "    e = len(b)"] if root else [
            f"def {name}(b, p, e):"]
        pending = 0  # bytes of fixed-size fields not yet bounds-checked
        tagged: dict[int, str] = {}
        for f in dataclasses.fields(cls):
            tp, nullable = _optional(hints[f.name])
            kafka_type = f.metadata.get("kafka_type")
            if "tag" in f.metadata:
                tagged[int(f.metadata["tag"])] = self._tag_checker(
                    f"{name}_t{f.metadata['tag']}", f.name, tp, kafka_type, flexible)
                continue
            if typing.get_origin(tp) is tuple:
                lines += self._flush(pending)
                pending = 0
                lines += self._array(f.name, typing.get_args(tp)[0], kafka_type, flexible,
                                     nullable)
            elif dataclasses.is_dataclass(tp):
                lines += self._flush(pending)
                pending = 0
                child = self.function_for(tp)
                if nullable:  # KIP-893: an int8 marker, -1 null, 1 present
                    lines += ["    if p >= e: _fail('struct marker past the end')",
                              "    m = b[p]; p += 1",
                              f"    if m == 1: p = {child}(b, p, e)",
                              f"    elif m != 255: _fail('bad null marker of {f.name}')"]
                else:
                    lines.append(f"    p = {child}(b, p, e)")
            elif kafka_type in _FIXED_SIZE:
                pending += _FIXED_SIZE[kafka_type]
            elif kafka_type in _LENGTH_PREFIXED:
                lines += self._flush(pending)
                pending = 0
                lines += _indent(_length_prefixed(f.name, kafka_type, flexible, nullable), 1)
            else:
                raise TypeError(f"{cls.__qualname__}.{f.name}: unknown kafka type {kafka_type}")
        lines += self._flush(pending)
        if flexible:  # almost always an empty tagged-field section: one zero byte
            table = "_NO_TAGS"
            if tagged:
                table = f"{name}_tags"
                self.sources.append(
                    f"{table} = {{{', '.join(f'{t}: {fn}' for t, fn in tagged.items())}}}")
            lines += ["    if p < e and b[p] == 0: p += 1",
                      f"    else: p = _tags(b, p, e, {table})"]
        lines.append("    return p")
        return "\n".join(lines)

    @staticmethod
    def _flush(pending: int) -> list[str]:
        if not pending:
            return []
        return [f"    p += {pending}",
                "    if p > e: _fail('fixed-size fields past the end')"]

    def _array(self, field: str, item: Any, kafka_type: str | None, flexible: bool,
               nullable: bool) -> list[str]:
        if flexible:
            lines = [*_indent(_UVARINT, 1),
                     "    if n == 0:",
                     "        " + _on_null(field, nullable),
                     "    else:",
                     "        n -= 1"]
        else:
            lines = ["    if p + 4 > e: _fail('array length past the end')",
                     "    n = _I32(b, p)[0]; p += 4",
                     f"    if n < {-1 if nullable else 0}: _fail({'bad length of ' + field!r})",
                     "    if n > 0:"]
        if dataclasses.is_dataclass(item):
            child = self.function_for(item)
            body = [f"if n > e - p: _fail({field + ' array past the end'!r})",
                    "for _ in range(n):",
                    f"    p = {child}(b, p, e)"]
        elif kafka_type in _FIXED_SIZE:
            body = [f"p += n * {_FIXED_SIZE[kafka_type]}",
                    f"if p > e: _fail({field + ' array past the end'!r})"]
        elif kafka_type in _LENGTH_PREFIXED:
            body = [f"if n > e - p: _fail({field + ' array past the end'!r})",
                    "for _ in range(n):",
                    *_indent(_length_prefixed(field, kafka_type, flexible, False), 1)]
        else:
            raise TypeError(f"array {field}: unknown kafka type {kafka_type}")
        return lines + _indent(body, 2)

    def _tag_checker(self, name: str, field: str, tp: Any, kafka_type: str | None,
                     flexible: bool) -> str:
        """A tagged field's content, checked within [p, e) where e is the tag's end.
        Tagged fields are optional by their absence, so a null inside is not refused."""
        if typing.get_origin(tp) is tuple:
            body = self._array(field, typing.get_args(tp)[0], kafka_type, flexible, True)
        elif dataclasses.is_dataclass(tp):
            body = [f"    p = {self.function_for(tp)}(b, p, e)"]
        elif kafka_type in _FIXED_SIZE:
            body = self._flush(_FIXED_SIZE[kafka_type])
        elif kafka_type in _LENGTH_PREFIXED:
            body = _indent(_length_prefixed(field, kafka_type, flexible, True), 1)
        else:
            raise TypeError(f"tagged {field}: unknown kafka type {kafka_type}")
        self.sources.append("\n".join([f"def {name}(b, p, e):", *body, "    return p"]))
        return name


def _length_prefixed(field: str, kafka_type: str, flexible: bool,
                     nullable: bool) -> list[str]:
    """A string or bytes value: its length fits the frame; null only when allowed.
    Legacy strings have an int16 length, legacy bytes and records an int32."""
    if flexible:
        return [*_UVARINT,
                "if n == 0:",
                "    " + _on_null(field, nullable),
                "else:",
                "    p += n - 1",
                f"    if p > e: _fail({field + ' runs past the end'!r})"]
    width, unpack = (2, "_I16") if kafka_type == "string" else (4, "_I32")
    return [f"if p + {width} > e: _fail('length past the end')",
            f"n = {unpack}(b, p)[0]; p += {width}",
            f"if n < {-1 if nullable else 0}: _fail({'bad length of ' + field!r})",
            "p += n if n > 0 else 0",
            f"if p > e: _fail({field + ' runs past the end'!r})"]


def _on_null(field: str, nullable: bool) -> str:
    return "pass" if nullable else f"_fail({field + ' is null'!r})"


def _indent(lines: list[str], levels: int) -> list[str]:
    pad = "    " * levels
    return [pad + line for line in lines]


@cache
def body_checker(api_key: int, version: int) -> Callable[[bytes, int], int]:
    """The pre-pass for one request schema: ``check(frame, pos)`` raises
    MalformedRequest (HeaderError for a bad varint) unless the body from `pos` to the frame's end is well-formed, and
    returns where the body ended."""
    gen = _Generator()
    root = gen.function_for(load_request_schema(api_key, version), root=True)
    source = "\n\n".join(gen.sources)
    namespace: dict[str, Any] = {"_fail": _fail, "_uv": read_uvarint,
                                 "_tags": _tagged_fields, "_NO_TAGS": {},
                                 "_I16": struct.Struct(">h").unpack_from,
                                 "_I32": struct.Struct(">i").unpack_from}
    exec(compile(source, f"<guard {api_key} v{version}>", "exec"), namespace)
    check: Callable[[bytes, int], int] = namespace[root]
    check.source = source  # type: ignore[attr-defined]  # for reading, and the tests
    return check
