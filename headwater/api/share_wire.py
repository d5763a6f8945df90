"""Hand-written encoders for the ShareFetch (78) and ShareAcknowledge (79) responses,
v1-v2 (both flexible).

Why: a consumer of a share group sends one ShareFetch and one ShareAcknowledge per poll,
and turning a dict tree into kio dataclasses and serializing them generically cost more
broker CPU than everything else those requests do (measured in bench/share_bench.py).
The layout is small and fixed, so it is written here directly; the unit tests compare
every byte with kio's writer for both versions.

The records of a partition are kept by reference (a list of buffers goes to the socket
with ``writelines``), as the Fetch path does, so they are never copied in Python.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..wire.header import uvarint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACQUIRED = struct.Struct(">qqhx")  # first, last, delivery count, empty tagged fields
_PARTITION_HEAD = struct.Struct(">ih")  # partition index, error code
_LEADER = struct.Struct(">iix")  # leader id, leader epoch, empty tagged fields
_TOP = struct.Struct(">ih")  # throttle time, error code
_BY_REFERENCE = 32 * 1024  # records at least this large are not copied
_NULL_UUID = bytes(16)  # a request's null topic id is answered as kio writes it: zeros


def compact_string(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    raw = s.encode()
    return uvarint(len(raw) + 1) + raw


@dataclass(slots=True)
class PartitionEntry:
    """One partition of a ShareFetch response."""

    index: int
    error_code: int = 0
    error_message: str | None = None
    acknowledge_error_code: int = 0
    leader_id: int = -1
    leader_epoch: int = 0
    records: bytes | None = None
    acquired: Sequence[tuple[int, int, int]] = ()  # (first, last, delivery count)


class Body:
    """A response body as buffers; ``parts`` go to the socket in order."""

    __slots__ = ("parts", "_tail")

    def __init__(self) -> None:
        self.parts: list[bytes | bytearray] = []
        self._tail = bytearray()

    def add(self, data: bytes | bytearray) -> None:
        if len(data) >= _BY_REFERENCE:
            if self._tail:
                self.parts.append(self._tail)
                self._tail = bytearray()
            self.parts.append(data)
        else:
            self._tail += data

    def finish(self) -> list[bytes | bytearray]:
        if self._tail:
            self.parts.append(self._tail)
            self._tail = bytearray()
        return self.parts


def _top(body: Body, error_code: int, error_message: str | None, lock_ms: int | None,
         throttle_ms: int = 0) -> None:
    body.add(_TOP.pack(throttle_ms, error_code))
    body.add(compact_string(error_message))
    if lock_ms is not None:
        body.add(_I32.pack(lock_ms))


def share_fetch_response(error_code: int, error_message: str | None, lock_ms: int,
                         topics: Iterable[tuple[uuid.UUID | None, Sequence[PartitionEntry]]],
                         throttle_ms: int = 0) -> list[bytes | bytearray]:
    """ShareFetchResponse v1/v2 (same layout), node endpoints always empty."""
    body = Body()
    _top(body, error_code, error_message, lock_ms, throttle_ms)
    topics = list(topics)
    body.add(uvarint(len(topics) + 1))
    for topic_id, partitions in topics:
        body.add(topic_id.bytes if topic_id is not None else _NULL_UUID)
        body.add(uvarint(len(partitions) + 1))
        for p in partitions:
            body.add(_PARTITION_HEAD.pack(p.index, p.error_code))
            body.add(compact_string(p.error_message))
            body.add(_I16.pack(p.acknowledge_error_code))
            body.add(b"\x00")  # acknowledge error message: null
            body.add(_LEADER.pack(p.leader_id, p.leader_epoch))
            records = p.records or b""  # empty, never null, as before (clients rely on it)
            body.add(uvarint(len(records) + 1))
            if records:
                body.add(records)
            body.add(uvarint(len(p.acquired) + 1))
            for first, last, count in p.acquired:
                body.add(_ACQUIRED.pack(first, last, count))
            body.add(b"\x00")  # partition tagged fields
        body.add(b"\x00")  # topic tagged fields
    body.add(b"\x01\x00")  # node endpoints: empty; response tagged fields
    return body.finish()


def share_acknowledge_response(version: int, error_code: int, error_message: str | None,
                               lock_ms: int,
                               topics: Iterable[tuple[uuid.UUID | None,
                                                      Sequence[tuple[int, int, int]]]]
                               ) -> list[bytes | bytearray]:
    """ShareAcknowledgeResponse v1/v2 (v2 adds the acquisition lock timeout); partitions
    as (index, error code, leader id), leader epoch 0."""
    body = Body()
    _top(body, error_code, error_message, lock_ms if version >= 2 else None)
    topics = list(topics)
    body.add(uvarint(len(topics) + 1))
    for topic_id, partitions in topics:
        body.add(topic_id.bytes if topic_id is not None else _NULL_UUID)
        body.add(uvarint(len(partitions) + 1))
        for index, code, leader_id in partitions:
            body.add(_PARTITION_HEAD.pack(index, code))
            body.add(b"\x00")  # error message: null
            body.add(_LEADER.pack(leader_id, 0))
            body.add(b"\x00")
        body.add(b"\x00")
    body.add(b"\x01\x00")
    return body.finish()
