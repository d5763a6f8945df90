"""A metadata record's bytes in either layout: KRaft's (no key) where `kraft.py` has the
type, headwater's JSON one (the key names the type) otherwise.

Apart from `records.py` (the record types) and `kraft.py` (KRaft's layout, which
builds those types), so that neither imports the other.
"""

from __future__ import annotations

from typing import Any

from . import kraft
from .records import decode_json, encode_json


def encode(record: Any) -> tuple[bytes | None, bytes]:
    """(key, value) bytes for one metadata record."""
    if kraft.has_codec(record):
        return None, kraft.encode(record)
    return record.TYPE.encode(), encode_json(record)


def decode(key: bytes | None, value: bytes) -> Any:
    """A record of either layout: a key names a JSON record, no key means KRaft's."""
    if not key:
        return kraft.decode(value)
    return decode_json(key, value)
