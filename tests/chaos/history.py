"""The operations a fault campaign records from its clients, and their JSON-lines form.

Each op is what one client callback saw, so the campaign runner records it on the spot
(one frozen dataclass, keyword arguments only); the checker (checker.py) judges the whole
history afterwards. On disk a history is one JSON object a line, named by its "type", so a
runner can append ops (`to_json`) as they happen.

Times are seconds on one clock shared by every recorder (time.monotonic() in one process,
time.time() across processes); the checker compares times only where the order matters
(offsets seen after a commit, share deliveries after an accept) and says so on each field.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal, TypeAlias

Isolation = Literal["read_committed", "read_uncommitted"]
Outcome = Literal["commit", "abort", "unknown"]
AckKind = Literal["accept", "release", "reject"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Produced:
    """A write attempt and what its delivery report said. `seq` orders one producer's sends
    (one client instance: a new instance is a new `producer`); `offset` is the acked offset;
    `txn` names the transaction uniquely within the history ("txid-7#3"), None outside one;
    `time`: when the delivery report arrived."""

    producer: str
    seq: int
    topic: str
    partition: int
    value: str
    acked: bool
    offset: int | None = None
    txn: str | None = None
    time: float


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnEnded:
    """How a transaction ended: "commit" or "abort" when commit/abort_transaction returned,
    "unknown" when commit_transaction raised or timed out. `offsets`: (group, topic,
    partition, offset) sent with send_offsets_to_transaction; `time`: when the call returned."""

    txn: str
    outcome: Outcome
    producer: str
    time: float
    offsets: tuple[tuple[str, str, int, int], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Read:
    """A record a consumer's poll returned. `generation` counts the consumer's assignment
    changes (and its own seeks): one consumer+generation is one unbroken read position."""

    consumer: str
    group: str | None
    generation: int
    isolation: Isolation
    topic: str
    partition: int
    offset: int
    value: str
    time: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Committed:
    """An acknowledged (non-transactional) offset commit; `time`: when the ack arrived."""

    group: str
    topic: str
    partition: int
    offset: int
    consumer: str
    time: float


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetsSeen:
    """A group's committed offset as a fetch returned it (-1: none). `time`: when the fetch was
    sent, so a fetch timed after a commit's ack cannot have been answered before it."""

    group: str
    topic: str
    partition: int
    offset: int
    time: float


@dataclass(frozen=True, slots=True, kw_only=True)
class FinalLog:
    """A whole partition read at read_committed once the campaign was quiet. Offsets below
    `data_offsets_end` (the high watermark) missing from `records` are control records or
    aborted data."""

    topic: str
    partition: int
    records: tuple[tuple[int, str], ...]
    data_offsets_end: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareDelivered:
    """A record a share consumer's poll returned; `time`: when the poll returned."""

    consumer: str
    group: str
    topic: str
    partition: int
    offset: int
    value: str
    delivery_count: int
    time: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareAcked:
    """A share acknowledgement and its result (`ok`: the client saw it succeed); `time`: when
    the result arrived."""

    consumer: str
    group: str
    topic: str
    partition: int
    offset: int
    value: str
    kind: AckKind
    ok: bool
    time: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupConfig:
    """The share group's share.delivery.count.limit and dead-letter topic, if any."""

    group: str
    delivery_count_limit: int
    dlq_topic: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DeadLettered:
    """A record read from the group's dead-letter topic, named by the original record's
    topic, partition and offset (its __dlq.errors.* headers)."""

    group: str
    topic: str
    partition: int
    offset: int
    value: str
    time: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Fault:
    """A fault the campaign injected (informational: printed beside anomalies it overlaps);
    `end` None: never healed."""

    kind: str
    target: str
    start: float
    end: float | None = None


Op: TypeAlias = (Produced | TxnEnded | Read | Committed | OffsetsSeen | FinalLog
                 | ShareDelivered | ShareAcked | ShareGroupConfig | DeadLettered | Fault)

OP_TYPES: dict[str, type[Op]] = {cls.__name__: cls for cls in (
    Produced, TxnEnded, Read, Committed, OffsetsSeen, FinalLog, ShareDelivered, ShareAcked,
    ShareGroupConfig, DeadLettered, Fault)}
_FIELDS = {cls: tuple(f.name for f in fields(cls)) for cls in OP_TYPES.values()}


def to_json(op: Op) -> str:
    """One op as one JSON line (without the newline); tuples become arrays."""
    data: dict[str, Any] = {"type": type(op).__name__}
    for name in _FIELDS[type(op)]:
        data[name] = getattr(op, name)
    return json.dumps(data, separators=(",", ":"))


def from_json(line: str) -> Op:
    """The op a `to_json` line holds; arrays of arrays (offsets, records) become tuples."""
    data = json.loads(line)
    cls = OP_TYPES[data.pop("type")]
    for name, value in data.items():
        if isinstance(value, list):
            data[name] = tuple(tuple(item) for item in value)
    return cls(**data)


def dump(history: Iterable[Op], path: str | Path) -> None:
    """Writes a history as JSON lines."""
    with open(path, "w", encoding="utf-8") as out:
        for op in history:
            out.write(to_json(op) + "\n")


def iter_load(path: str | Path) -> Iterator[Op]:
    """The ops of a JSON-lines history in order, one at a time; blank lines are skipped."""
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield from_json(line)


def load(path: str | Path) -> list[Op]:
    """A JSON-lines history as a list."""
    return list(iter_load(path))
