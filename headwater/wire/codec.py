"""kio-backed request decoding and version-generic response building.

Handlers describe a response as plain dicts keyed by kio field names (the newest
names); `build` turns that into the exact kio dataclass of the negotiated version,
dropping fields that version lacks and filling the ones it needs with Kafka defaults.
One handler thus serves every version of its API without per-version code.
"""

from __future__ import annotations

import dataclasses
import datetime
import operator
import types
import typing
import uuid
from collections.abc import Callable, Mapping
from enum import Enum
from functools import cache
from typing import Any, TypeVar, cast

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from .guard import UNKNOWN_TAGS, body_checker, strip_unknown_tags
from .schemas import load_request_schema, load_response_schema

_ZERO_UUID = uuid.UUID(int=0)
_R = TypeVar("_R")

# Field kinds, resolved once per dataclass.
_PLAIN, _ENTITY, _ENTITIES, _TIMEDELTA, _DATETIME, _ERROR, _ENUM = range(7)


@dataclasses.dataclass(slots=True)
class _FieldPlan:
    name: str
    kind: int
    nested: Any
    optional: bool
    has_default: bool
    zero: Any


def _unwrap_optional(tp: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return tp, False


def _zero_for(tp: Any, kind: int) -> Any:
    if kind == _ENTITIES or typing.get_origin(tp) is tuple:
        return ()
    if kind == _TIMEDELTA:
        return datetime.timedelta(0)
    if kind == _ERROR:
        return ErrorCode.none
    if isinstance(tp, type):
        if issubclass(tp, bool):
            return False
        if issubclass(tp, int):
            return 0
        if issubclass(tp, str):
            return ""
        if issubclass(tp, bytes):
            return b""
        if issubclass(tp, uuid.UUID):
            return _ZERO_UUID
    return None


@cache
def _plan(cls: type) -> tuple[_FieldPlan, ...]:
    hints = typing.get_type_hints(cls)
    plans = []
    for f in dataclasses.fields(cls):
        tp, optional = _unwrap_optional(hints[f.name])
        nested = None
        if typing.get_origin(tp) is tuple and dataclasses.is_dataclass(typing.get_args(tp)[0]):
            kind, nested = _ENTITIES, typing.get_args(tp)[0]
        elif dataclasses.is_dataclass(tp):
            kind, nested = _ENTITY, tp
        elif isinstance(tp, type) and issubclass(tp, datetime.timedelta):
            kind = _TIMEDELTA
        elif isinstance(tp, type) and issubclass(tp, datetime.datetime):
            kind = _DATETIME
        elif tp is ErrorCode:
            kind = _ERROR
        elif isinstance(tp, type) and issubclass(tp, Enum):
            kind, nested = _ENUM, tp
        else:
            kind = _PLAIN
        has_default = (f.default is not dataclasses.MISSING
                       or f.default_factory is not dataclasses.MISSING)
        plans.append(_FieldPlan(f.name, kind, nested, optional, has_default, _zero_for(tp, kind)))
    return tuple(plans)


def build(cls: type, data: Mapping[str, Any]) -> Any:
    """Construct kio dataclass `cls` from a dict tree, tolerant of version differences."""
    kwargs: dict[str, Any] = {}
    for p in _plan(cls):
        if p.name not in data:
            if p.has_default:
                continue
            value = None if p.optional else p.zero
            if value is None and not p.optional and p.kind == _ENTITY:
                value = build(p.nested, {})
            kwargs[p.name] = value
            continue
        value = data[p.name]
        if value is None:
            kwargs[p.name] = None if p.optional else p.zero
            continue
        kind = p.kind
        if kind == _ENTITIES:
            nested = p.nested
            kwargs[p.name] = tuple(
                v if isinstance(v, nested) else build(nested, v) for v in value)
        elif kind == _ENTITY:
            kwargs[p.name] = value if isinstance(value, p.nested) else build(p.nested, value)
        elif kind == _TIMEDELTA:
            kwargs[p.name] = (value if isinstance(value, datetime.timedelta)
                              else datetime.timedelta(milliseconds=value))
        elif kind == _DATETIME:
            kwargs[p.name] = (value if isinstance(value, datetime.datetime)
                              else datetime.datetime.fromtimestamp(value / 1000, datetime.UTC))
        elif kind == _ERROR:
            kwargs[p.name] = value if isinstance(value, ErrorCode) else ErrorCode(value)
        elif kind == _ENUM:
            kwargs[p.name] = value if isinstance(value, p.nested) else p.nested(value)
        else:
            kwargs[p.name] = value
    return cls(**kwargs)


@cache
def request_reader(api_key: int, version: int) -> Callable[[bytes, int], tuple[int, Any]]:
    return entity_reader(load_request_schema(api_key, version))


@cache
def response_class(api_key: int, version: int) -> type:
    response: type = load_response_schema(api_key, version)
    return response


@cache
def response_writer(api_key: int, version: int) -> Callable[[Any, Any], None]:
    return entity_writer(response_class(api_key, version))


def decode_request(api_key: int, version: int, body: bytes, offset: int) -> Any:
    """Decode a request body with kio; raises on any malformed input. The bounds
    pre-pass (`guard.py`) runs first: kio must never see a length it cannot satisfy."""
    UNKNOWN_TAGS.clear()
    body_checker(api_key, version)(body, offset)
    if UNKNOWN_TAGS:  # a newer client's tags: ignored, as KIP-482 asks
        body, offset = strip_unknown_tags(body, offset), 0
        UNKNOWN_TAGS.clear()
    result = request_reader(api_key, version)(body, offset)
    return result[0] if isinstance(result, tuple) else result


def encode_response(api_key: int, version: int, response: Any, out: Any) -> None:
    """Write `response` (a kio object or a dict) as the body of `version` to `out`, any
    object with a ``write(bytes)`` method."""
    if isinstance(response, Mapping):
        response = build(response_class(api_key, version), response)
    response_writer(api_key, version)(out, response)


@cache
def request_is_flexible(api_key: int, version: int) -> bool:
    return bool(load_request_schema(api_key, version).__flexible__)


def upgrade(cls: type[_R], obj: Any, changes: Mapping[str, Any] | None = None) -> _R:
    """Request `obj` (a kio dataclass of any version, or a dict tree) as kio dataclass
    `cls`, the newest version's: fields the older version lacks take the schema's
    default (Kafka's generated readers do the same), else the type's zero; `changes`
    sets fields whose meaning moved between versions. Handlers then read one typed
    shape instead of probing with getattr."""
    if not changes:
        if type(obj) is cls:
            return obj
        if hasattr(type(obj), "__dataclass_fields__"):  # a kio object: planned per class
            converted: _R = _converter(cast(type, type(obj)), cast(type, cls))(obj)
            return converted
    kwargs: dict[str, Any] = {}
    for p in _plan(cast(type, cls)):
        if changes is not None and p.name in changes:
            value = changes[p.name]
        elif isinstance(obj, Mapping):
            if p.name not in obj:
                if not p.has_default:
                    kwargs[p.name] = _absent(p)
                continue
            value = obj[p.name]
        elif not hasattr(obj, p.name):
            if not p.has_default:
                kwargs[p.name] = _absent(p)
            continue
        else:
            value = getattr(obj, p.name)
        if value and p.kind == _ENTITIES and not _same_shape(cast(type, type(value[0])),
                                                             p.nested):
            value = tuple(upgrade(p.nested, v) for v in value)
        elif value is not None and p.kind == _ENTITY:
            value = upgrade(p.nested, value)
        kwargs[p.name] = value
    return cls(**kwargs)


@cache
def _converter(old: type, new: type) -> Callable[[Any], Any]:
    """`upgrade` from kio class `old` to `new`, planned once per pair (it runs on every
    request of an older version, ShareFetch's included): the fields both have read in
    one `attrgetter` call, those `old` lacks set to their defaults, nested entities of
    another shape upgraded."""
    if _same_shape(old, new):
        return _as_it_is  # every field the newest has, in the same shape
    old_fields = {p.name: p for p in _plan(old)}
    copied: list[str] = []
    nested: list[tuple[str, _FieldPlan]] = []
    fixed: dict[str, Any] = {}
    for p in _plan(new):
        q = old_fields.get(p.name)
        if q is None:
            if not p.has_default:
                fixed[p.name] = _absent(p)
        elif p.kind in (_ENTITIES, _ENTITY) and not _same_shape(q.nested, p.nested):
            nested.append((p.name, p))
        else:
            copied.append(p.name)
    read = operator.attrgetter(*copied) if len(copied) > 1 else None

    def convert(obj: Any) -> Any:
        kwargs = dict(fixed)
        if read is not None:
            kwargs.update(zip(copied, read(obj), strict=True))
        elif copied:
            kwargs[copied[0]] = getattr(obj, copied[0])
        for name, p in nested:
            value = getattr(obj, name)
            if value is not None:
                value = (tuple(upgrade(p.nested, v) for v in value) if p.kind == _ENTITIES
                         else upgrade(p.nested, value))
            kwargs[name] = value
        return new(**kwargs)
    return convert


def _as_it_is(obj: Any) -> Any:
    return obj


@cache
def _same_shape(old: type, new: type) -> bool:
    """An `old` object reads as a `new` one: the same fields, of the same kinds, nested
    entities of the same shape (an older version whose fields did not change; its
    objects are used as they are, not rebuilt on the hot path: ShareFetch v1's topics)."""
    if not (dataclasses.is_dataclass(old) and dataclasses.is_dataclass(new)):
        return False
    old_fields = {p.name: p for p in _plan(old)}
    new_fields = {p.name: p for p in _plan(new)}
    if old_fields.keys() != new_fields.keys():
        return False
    for name, p in new_fields.items():
        q = old_fields[name]
        if q.kind != p.kind or q.optional != p.optional:
            return False
        if p.kind in (_ENTITIES, _ENTITY) and not _same_shape(q.nested, p.nested):
            return False
    return True


def _absent(p: _FieldPlan) -> Any:
    """A field without a schema default, absent from an older version."""
    if p.optional:
        return None
    if p.kind == _ENTITY:
        return upgrade(p.nested, {})
    return p.zero
