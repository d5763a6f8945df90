"""Persisted share-partition state: the values the share coordinator writes to
`__share_group_state`, and the replay that merges them.

One state per share-partition (key `group:topicId:partition`), as KIP-932 lays it out:

* **ShareSnapshot** (type 0; KIP-932's ShareCheckpoint): the whole state. Written by
  InitializeShareGroupState, and in place of a delta when deltas pile up
  (`share.coordinator.snapshot.update.records.per.snapshot`), when the delta index
  reaches the end of its range, or when the share-partition goes idle; each one has
  `snapshot_epoch` (the seed's checkpoint epoch) + 1. Its tombstone deletes the state.
* **ShareUpdate** (type 1; KIP-932's ShareDelta): only the ranges one write changed,
  with the state and snapshot epochs it applies to and start offset -1 when unchanged.
  Its key adds a uint16 `delta_index` (not used to choose the partition) so that the
  compacted topic keeps every delta since the last snapshot; the index counts on across
  snapshots and rolls over.

Field names are Kafka's (`ShareSnapshotValue.json`, `ShareUpdateValue.json`) in
snake_case, as in `group/records.py`; the byte layout is `RecordCodec`'s: the seed's
fields first (state epoch, checkpoint epoch, start offset, states), then Kafka's extras
(leader epoch, delivery-complete count, timestamps). `StateWrite` is what a
share-partition leader asks to persist (one partition of a WriteShareGroupState
request); `apply_update` / `combine` are the merge the coordinator replays (Kafka's
`PersisterStateBatchCombiner`): newer batches override overlapping older ranges, ranges
below the start offset are dropped, adjacent ranges with equal state and count are
coalesced.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
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
    """ShareUpdateValue: the changed ranges of one write, for `snapshot_epoch` (and
    `state_epoch`, -1 when not recorded); `delta_index` is part of the record key."""

    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    state_batches: tuple[StateBatch, ...]
    state_epoch: int = UNCHANGED
    delta_index: int = 0

    @classmethod
    def from_write(cls, write: StateWrite, snapshot_epoch: int,
                   delta_index: int = 0) -> ShareUpdate:
        return cls(snapshot_epoch, write.leader_epoch, write.start_offset,
                   write.delivery_complete_count, write.state_batches, write.state_epoch,
                   delta_index)

    def applies_to(self, state: ShareSnapshot) -> bool:
        """A delta belongs to the snapshot with its snapshot (and state) epoch; any other
        one was written before that snapshot and is already part of it."""
        return (self.snapshot_epoch == state.snapshot_epoch
                and self.state_epoch in (UNCHANGED, state.state_epoch))


# ---- merging (what the share coordinator replays) ------------------------------------

def combine(old: Iterable[StateBatch], new: Iterable[StateBatch],
            start_offset: int) -> tuple[StateBatch, ...]:
    """`new` laid over `old`: overlaps take the new value, offsets below `start_offset`
    are dropped, touching ranges with the same state and count become one. (Batches are
    built directly, not with `dataclasses.replace`: this is the replay's hot path.)"""
    new = sorted(new, key=lambda b: b.first_offset)
    pieces: list[StateBatch] = []
    for batch in old:
        pieces += _subtract(batch, new)
    pieces += new
    pieces.sort(key=lambda b: b.first_offset)
    out: list[StateBatch] = []
    for batch in pieces:
        first, last = batch.first_offset, batch.last_offset
        if last < start_offset:
            continue
        first = max(first, start_offset)
        if out:
            prev = out[-1]
            if (prev.last_offset + 1 == first and prev.delivery_state == batch.delivery_state
                    and prev.delivery_count == batch.delivery_count):
                out[-1] = StateBatch(prev.first_offset, last, prev.delivery_state,
                                     prev.delivery_count)
                continue
        out.append(batch if first == batch.first_offset else
                   StateBatch(first, last, batch.delivery_state, batch.delivery_count))
    return tuple(out)


def _subtract(batch: StateBatch, cover: list[StateBatch]) -> list[StateBatch]:
    """The parts of `batch` no range of `cover` (sorted) overlaps."""
    parts: list[StateBatch] = []
    first, last = batch.first_offset, batch.last_offset
    for c in cover:
        if c.last_offset < first:
            continue
        if c.first_offset > last:
            break
        if c.first_offset > first:
            parts.append(StateBatch(first, c.first_offset - 1, batch.delivery_state,
                                    batch.delivery_count))
        first = c.last_offset + 1
        if first > last:
            return parts
    if first == batch.first_offset:
        parts.append(batch)
    elif first <= last:
        parts.append(StateBatch(first, last, batch.delivery_state, batch.delivery_count))
    return parts


def apply_update(snapshot: ShareSnapshot, update: ShareUpdate | StateWrite,
                 write_timestamp: int | None = None) -> ShareSnapshot:
    """The state after `update` (a replayed ShareUpdate, or a leader's StateWrite)."""
    start = snapshot.start_offset if update.start_offset == UNCHANGED else update.start_offset
    complete = (snapshot.delivery_complete_count
                if update.delivery_complete_count == UNCHANGED
                else update.delivery_complete_count)
    # Built directly, not with `dataclasses.replace` (several times slower): every
    # acknowledgement's state write is replayed through here.
    return ShareSnapshot(
        snapshot.snapshot_epoch, snapshot.state_epoch,
        max(snapshot.leader_epoch, update.leader_epoch), start, complete,
        snapshot.create_timestamp,
        snapshot.write_timestamp if write_timestamp is None else write_timestamp,
        combine(snapshot.state_batches, update.state_batches, start))


def replay(records: Iterable[ShareSnapshot | ShareUpdate]) -> ShareSnapshot | None:
    """Replay one share-partition's records in log order: a snapshot replaces the state,
    an update for the current snapshot (and state) epoch is merged, a stale one skipped."""
    state: ShareSnapshot | None = None
    for value in records:
        if isinstance(value, ShareSnapshot):
            state = value
        elif state is not None and value.applies_to(state):
            state = apply_update(state, value)
    return state


# ---- coordinator records ---------------------------------------------------------------

DELTA_INDEX_MAX = 0xFFFF  # the key's uint16

_KEY = (("group_id", "string"), ("topic_id", "uuid"), ("partition", "int32"))
_BATCHES = (("first_offset", "int64"), ("last_offset", "int64"),
            ("delivery_state", "int8"), ("delivery_count", "int16"))

TYPES = [
    RecordType(SHARE_SNAPSHOT, "ShareSnapshot", _KEY, 0,
               (("state_epoch", "int32"), ("snapshot_epoch", "int32"),
                ("start_offset", "int64"), ("state_batches", _BATCHES),
                ("leader_epoch", "int32"), ("delivery_complete_count", "int32"),
                ("create_timestamp", "int64"), ("write_timestamp", "int64"))),
    RecordType(SHARE_UPDATE, "ShareUpdate", _KEY + (("delta_index", "uint16"),), 0,
               (("state_epoch", "int32"), ("snapshot_epoch", "int32"),
                ("start_offset", "int64"), ("state_batches", _BATCHES),
                ("leader_epoch", "int32"), ("delivery_complete_count", "int32"))),
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
        "state_epoch": value.state_epoch, "snapshot_epoch": value.snapshot_epoch,
        "start_offset": value.start_offset,
        "state_batches": _batches_out(value.state_batches),
        "leader_epoch": value.leader_epoch,
        "delivery_complete_count": value.delivery_complete_count,
        "create_timestamp": value.create_timestamp,
        "write_timestamp": value.write_timestamp})


def update_record(group_id: str, topic_id: uuid.UUID, partition: int,
                  value: ShareUpdate) -> CoordinatorRecord:
    key = _key(group_id, topic_id, partition)
    key["delta_index"] = value.delta_index
    return CoordinatorRecord(SHARE_UPDATE, key, {
        "state_epoch": value.state_epoch, "snapshot_epoch": value.snapshot_epoch,
        "start_offset": value.start_offset,
        "state_batches": _batches_out(value.state_batches),
        "leader_epoch": value.leader_epoch,
        "delivery_complete_count": value.delivery_complete_count})


def tombstone(group_id: str, topic_id: uuid.UUID, partition: int) -> CoordinatorRecord:
    """Deletes the share-partition's snapshot (DeleteShareGroupState)."""
    return CoordinatorRecord(SHARE_SNAPSHOT, _key(group_id, topic_id, partition), None)


def update_tombstone(group_id: str, topic_id: uuid.UUID, partition: int,
                     delta_index: int) -> CoordinatorRecord:
    """Deletes one delta key, so a deleted state leaves nothing behind after compaction."""
    key = _key(group_id, topic_id, partition)
    key["delta_index"] = delta_index
    return CoordinatorRecord(SHARE_UPDATE, key, None)


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
                           v["delivery_complete_count"], _batches_in(v["state_batches"]),
                           v["state_epoch"], record.key["delta_index"])
    raise ValueError(f"not a share state record type: {record.type_id}")
