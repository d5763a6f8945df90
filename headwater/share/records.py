"""Persisted share-partition state: the values the share coordinator writes to
`__share_group_state`, and the replay that merges them.

Kafka's share coordinator keeps one state per share-partition (key
`group:topicId:partition`) as two record types:

* **ShareSnapshot** (type 0): the whole state. Written on InitializeShareGroupState, on
  the first write, and every `share.coordinator.snapshot.update.records.per.snapshot`
  (500) updates, with `snapshot_epoch` + 1. Seed 000 calls it ShareCheckpoint.
* **ShareUpdate** (type 1): only the ranges one WriteShareGroupState changed, with the
  snapshot epoch it applies to and start offset -1 when unchanged. Seed 000 calls it
  ShareDelta.

Field names are Kafka's (`ShareSnapshotValue.json`, `ShareUpdateValue.json`) in
snake_case, as in `group/records.py`; the byte layout is `RecordCodec`'s (non-flexible,
the tagged `DeliveryCompleteCount` written as a plain field), since only headwater reads
this topic. `StateWrite` is what a share-partition leader asks to persist (one
partition of a WriteShareGroupState request); `apply_write` / `apply_update` are the
merge the coordinator replays (Kafka's `PersisterStateBatchCombiner`): newer batches
override overlapping older ranges, ranges below the start offset are dropped, adjacent
ranges with equal state and count are coalesced.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from ..coordinator.record_codec import CoordinatorRecord, RecordCodec, RecordType

SHARE_SNAPSHOT = 0
SHARE_UPDATE = 1

UNCHANGED = -1  # start offset / delivery complete count not being written


@dataclass(frozen=True, slots=True)
class StateBatch:
    """A range of offsets with one delivery state (0 Available, 2 Acked, 4 Archived)."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class StateWrite:
    """One share-partition's WriteShareGroupState payload, produced by the leader."""

    state_epoch: int
    leader_epoch: int
    start_offset: int  # UNCHANGED (-1) when the SPSO did not move
    delivery_complete_count: int
    state_batches: tuple[StateBatch, ...]


@dataclass(frozen=True, slots=True)
class ShareSnapshot:
    """ShareSnapshotValue: the whole persisted state of a share-partition."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int = UNCHANGED
    create_timestamp: int = 0
    write_timestamp: int = 0
    state_batches: tuple[StateBatch, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareUpdate:
    """ShareUpdateValue: the changed ranges of one write, for `snapshot_epoch`."""

    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    state_batches: tuple[StateBatch, ...]

    @classmethod
    def from_write(cls, write: StateWrite, snapshot_epoch: int) -> ShareUpdate:
        return cls(snapshot_epoch, write.leader_epoch, write.start_offset,
                   write.delivery_complete_count, write.state_batches)


# ---- merging (what the share coordinator replays) ------------------------------------

def combine(old: Iterable[StateBatch], new: Iterable[StateBatch],
            start_offset: int) -> tuple[StateBatch, ...]:
    """`new` laid over `old`: overlaps take the new value, offsets below `start_offset`
    are dropped, touching ranges with the same state and count become one."""
    new = sorted(new, key=lambda b: b.first_offset)
    pieces: list[StateBatch] = []
    for batch in old:
        pieces += _subtract(batch, new)
    pieces += new
    pieces.sort(key=lambda b: b.first_offset)
    out: list[StateBatch] = []
    for batch in pieces:
        if batch.last_offset < start_offset:
            continue
        if batch.first_offset < start_offset:
            batch = replace(batch, first_offset=start_offset)
        if (out and out[-1].last_offset + 1 == batch.first_offset
                and out[-1].delivery_state == batch.delivery_state
                and out[-1].delivery_count == batch.delivery_count):
            out[-1] = replace(out[-1], last_offset=batch.last_offset)
        else:
            out.append(batch)
    return tuple(out)


def _subtract(batch: StateBatch, cover: list[StateBatch]) -> list[StateBatch]:
    """The parts of `batch` no range of `cover` (sorted) overlaps."""
    parts: list[StateBatch] = []
    first = batch.first_offset
    for c in cover:
        if c.last_offset < first:
            continue
        if c.first_offset > batch.last_offset:
            break
        if c.first_offset > first:
            parts.append(replace(batch, first_offset=first, last_offset=c.first_offset - 1))
        first = c.last_offset + 1
        if first > batch.last_offset:
            return parts
    if first <= batch.last_offset:
        parts.append(replace(batch, first_offset=first))
    return parts


def apply_update(snapshot: ShareSnapshot, update: ShareUpdate | StateWrite,
                 write_timestamp: int | None = None) -> ShareSnapshot:
    """The state after `update` (a replayed ShareUpdate, or a leader's StateWrite)."""
    start = snapshot.start_offset if update.start_offset == UNCHANGED else update.start_offset
    complete = (snapshot.delivery_complete_count
                if update.delivery_complete_count == UNCHANGED
                else update.delivery_complete_count)
    leader_epoch = max(snapshot.leader_epoch, update.leader_epoch)
    return replace(
        snapshot, start_offset=start, delivery_complete_count=complete,
        leader_epoch=leader_epoch,
        write_timestamp=snapshot.write_timestamp if write_timestamp is None else write_timestamp,
        state_batches=combine(snapshot.state_batches, update.state_batches, start))


def replay(records: Iterable[ShareSnapshot | ShareUpdate]) -> ShareSnapshot | None:
    """Replay one share-partition's records in log order: a snapshot replaces the state,
    an update for the current snapshot epoch is merged, a stale update is skipped."""
    state: ShareSnapshot | None = None
    for value in records:
        if isinstance(value, ShareSnapshot):
            state = value
        elif state is not None and value.snapshot_epoch == state.snapshot_epoch:
            state = apply_update(state, value)
    return state


# ---- coordinator records ---------------------------------------------------------------

_KEY = (("group_id", "string"), ("topic_id", "uuid"), ("partition", "int32"))
_BATCHES = (("first_offset", "int64"), ("last_offset", "int64"),
            ("delivery_state", "int8"), ("delivery_count", "int16"))

TYPES = [
    RecordType(SHARE_SNAPSHOT, "ShareSnapshot", _KEY, 0,
               (("snapshot_epoch", "int32"), ("state_epoch", "int32"),
                ("leader_epoch", "int32"), ("start_offset", "int64"),
                ("delivery_complete_count", "int32"), ("create_timestamp", "int64"),
                ("write_timestamp", "int64"), ("state_batches", _BATCHES))),
    RecordType(SHARE_UPDATE, "ShareUpdate", _KEY, 0,
               (("snapshot_epoch", "int32"), ("leader_epoch", "int32"),
                ("start_offset", "int64"), ("delivery_complete_count", "int32"),
                ("state_batches", _BATCHES))),
]

CODEC = RecordCodec(TYPES)


def _key(group_id: str, topic_id: uuid.UUID, partition: int) -> dict[str, Any]:
    return {"group_id": group_id, "topic_id": topic_id, "partition": partition}


def _batches_out(batches: Iterable[StateBatch]) -> list[dict[str, int]]:
    return [{"first_offset": b.first_offset, "last_offset": b.last_offset,
             "delivery_state": b.delivery_state, "delivery_count": b.delivery_count}
            for b in batches]


def _batches_in(rows: Iterable[dict[str, int]]) -> tuple[StateBatch, ...]:
    return tuple(StateBatch(r["first_offset"], r["last_offset"], r["delivery_state"],
                            r["delivery_count"]) for r in rows)


def snapshot_record(group_id: str, topic_id: uuid.UUID, partition: int,
                    value: ShareSnapshot) -> CoordinatorRecord:
    return CoordinatorRecord(SHARE_SNAPSHOT, _key(group_id, topic_id, partition), {
        "snapshot_epoch": value.snapshot_epoch, "state_epoch": value.state_epoch,
        "leader_epoch": value.leader_epoch, "start_offset": value.start_offset,
        "delivery_complete_count": value.delivery_complete_count,
        "create_timestamp": value.create_timestamp,
        "write_timestamp": value.write_timestamp,
        "state_batches": _batches_out(value.state_batches)})


def update_record(group_id: str, topic_id: uuid.UUID, partition: int,
                  value: ShareUpdate) -> CoordinatorRecord:
    return CoordinatorRecord(SHARE_UPDATE, _key(group_id, topic_id, partition), {
        "snapshot_epoch": value.snapshot_epoch, "leader_epoch": value.leader_epoch,
        "start_offset": value.start_offset,
        "delivery_complete_count": value.delivery_complete_count,
        "state_batches": _batches_out(value.state_batches)})


def tombstone(group_id: str, topic_id: uuid.UUID, partition: int) -> CoordinatorRecord:
    """Deletes the share-partition's state (DeleteShareGroupState)."""
    return CoordinatorRecord(SHARE_SNAPSHOT, _key(group_id, topic_id, partition), None)


def value_of(record: CoordinatorRecord) -> ShareSnapshot | ShareUpdate | None:
    """The dataclass a decoded record holds; None for a tombstone."""
    v = record.value
    if v is None:
        return None
    if record.type_id == SHARE_SNAPSHOT:
        return ShareSnapshot(v["snapshot_epoch"], v["state_epoch"], v["leader_epoch"],
                             v["start_offset"], v["delivery_complete_count"],
                             v["create_timestamp"], v["write_timestamp"],
                             _batches_in(v["state_batches"]))
    if record.type_id == SHARE_UPDATE:
        return ShareUpdate(v["snapshot_epoch"], v["leader_epoch"], v["start_offset"],
                           v["delivery_complete_count"], _batches_in(v["state_batches"]))
    raise ValueError(f"not a share state record type: {record.type_id}")
