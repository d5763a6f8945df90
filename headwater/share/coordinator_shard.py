"""One share-coordinator shard: the persisted state of the share-partitions hashed to
one partition of `__share_group_state`, rebuilt by replaying that partition.

Per share-partition (group id, topic id, partition) the shard holds the merged state
(a `ShareSnapshot`), the leader and state epochs that fence stale writers, how many
deltas were written since the last snapshot, and the next delta index. Operations are
Kafka's five state RPCs, one share-partition each, with Kafka 4.3's checks and error
codes (`ShareCoordinatorShard`): they return the records to append and the answer,
and `replay` is the only state change, so a restart (a replay) rebuilds exactly the
state the live operations built.

Records are KIP-932's (see `records.py`): a write is a ShareUpdate (delta) holding
only what changed, under key `(group, topic, partition, delta_index)`; it becomes a
ShareSnapshot (checkpoint, snapshot epoch + 1, the whole merged state) once
`updates_per_snapshot` deltas pile up or when the delta index would run past its
range. The index rolls over to 0 only at that snapshot, so the deltas after the latest
snapshot always have distinct keys and compaction can drop only deltas a snapshot
already contains. A timer writes a snapshot for share-partitions whose deltas stopped
coming (Kafka's cold-partition snapshot), so compaction can reclaim them. A delete
writes tombstones for the snapshot key and every delta key that may hold a value.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, NamedTuple

from kio.schema.errors import ErrorCode as E

from ..coordinator.record_codec import CoordinatorRecord
from ..coordinator.runtime import Result, Timer
from .records import (
    DELTA_INDEX_MAX,
    SHARE_SNAPSHOT,
    SHARE_UPDATE,
    UNCHANGED,
    ShareSnapshot,
    ShareUpdate,
    StateBatch,
    apply_update,
    combine,
    snapshot_record,
    tombstone,
    update_record,
    update_tombstone,
    value_of,
)

if TYPE_CHECKING:
    from ..config import BrokerConfig
    from ..metadata.image import MetadataImage


DEFAULT_STATE_EPOCH = 0
DEFAULT_LEADER_EPOCH = 0
UNINITIALIZED_START_OFFSET = -1

COLD_TIMER = "cold-partition-snapshots"
PERSISTED_STATES = frozenset({0, 2, 3, 4})  # Available, Acknowledged, Archiving, Archived

Key = tuple[str, uuid.UUID, int]  # (group id, topic id, partition)

@dataclass(frozen=True, slots=True)
class ShareCoordinatorConfig:
    """Kafka's `share.coordinator.*` names (defaults: headwater/config_registry/)."""

    num_partitions: int = 50
    segment_bytes: int = 104_857_600
    updates_per_snapshot: int = 500
    cold_snapshot_interval_ms: int = 300_000
    load_delay_ms: int = 0

    @property
    def delta_index_range(self) -> int:
        """Delta indices run over [0, range): twice the deltas a snapshot may follow, so
        the index rolls over across snapshots (KIP-932) and a delete tombstones at most
        that many delta keys; never past the key's uint16."""
        return max(1, min(DELTA_INDEX_MAX + 1, 2 * self.updates_per_snapshot))

    @classmethod
    def from_broker(cls, config: BrokerConfig) -> ShareCoordinatorConfig:
        get = config.get_int  # the registry's default when unset

        return cls(
            num_partitions=get("share.coordinator.state.topic.num.partitions"),
            segment_bytes=get("share.coordinator.state.topic.segment.bytes"),
            updates_per_snapshot=max(
                0, get("share.coordinator.snapshot.update.records.per.snapshot")),
            cold_snapshot_interval_ms=get(
                "share.coordinator.cold.partition.snapshot.interval.ms"),
            load_delay_ms=get("headwater.coordinator.load.delay.ms"),
        )


class ReadResult(NamedTuple):
    """ReadShareGroupState for one partition: the state, None on error."""

    error_code: int
    state: ShareSnapshot | None = None


class StateSummary(NamedTuple):
    """ReadShareGroupStateSummary for one partition."""

    error_code: int
    state_epoch: int = DEFAULT_STATE_EPOCH
    start_offset: int = UNINITIALIZED_START_OFFSET
    delivery_complete_count: int = UNCHANGED
    leader_epoch: int = DEFAULT_LEADER_EPOCH


@dataclass(slots=True)
class ShareStateEntry:
    """The coordinator's view of one share-partition; everything here is replayed.

    `state.leader_epoch` and `state.state_epoch` are the fences: every snapshot carries
    the highest leader epoch recorded so far, and only Initialize (never with an older
    one) sets the state epoch, so a restart after compaction keeps both."""

    state: ShareSnapshot
    updates: int = 0  # deltas since the snapshot
    next_delta: int = 0  # delta index of the next delta
    delta_keys: int = 0  # delta indices [0, delta_keys) may hold a value


class ShareCoordinatorShard:
    def __init__(self, partition: int, timer: Timer, config: ShareCoordinatorConfig,
                 image: Callable[[], MetadataImage | None]) -> None:
        self.partition = partition
        self.timer = timer
        self.config = config
        self.image = image
        self.states: dict[Key, ShareStateEntry] = {}
        # Deltas replayed before their share-partition's first surviving snapshot (older
        # ones compaction kept): (next index, keys used), so tombstones still reach them.
        self._orphans: dict[Key, tuple[int, int]] = {}
        # Cold-snapshot bookkeeping (not state): each key's progress at the last tick.
        self._seen: dict[Key, tuple[int, int]] = {}

    # ---- replay (the only state change) --------------------------------------------
    def replay(self, offset: int, producer_id: int, producer_epoch: int,
               record: CoordinatorRecord) -> None:
        k = record.key
        key: Key = (k["group_id"], k["topic_id"], k["partition"])
        value = value_of(record)
        entry = self.states.get(key)
        if record.type_id == SHARE_SNAPSHOT:
            if value is None:
                self.states.pop(key, None)
                self._orphans.pop(key, None)
                self._seen.pop(key, None)
                return
            assert isinstance(value, ShareSnapshot)
            if entry is None:
                entry = self.states[key] = ShareStateEntry(value)
                entry.next_delta, entry.delta_keys = self._orphans.pop(key, (0, 0))
            entry.state = value
            entry.updates = 0
            if entry.next_delta >= self.config.delta_index_range:
                entry.next_delta = 0  # the index rolls over only at a snapshot
        elif record.type_id == SHARE_UPDATE and value is not None:
            assert isinstance(value, ShareUpdate)
            index = value.delta_index
            if entry is None:
                keys = self._orphans.get(key, (0, 0))[1]
                self._orphans[key] = (index + 1, max(keys, index + 1))
                return
            entry.next_delta = index + 1
            entry.delta_keys = max(entry.delta_keys, index + 1)
            if value.applies_to(entry.state):
                entry.state = apply_update(entry.state, value)
                entry.updates += 1

    def replay_end_transaction(self, producer_id: int, producer_epoch: int,
                               commit: bool, marker_offset: int) -> None:
        """Nothing in `__share_group_state` is written transactionally."""

    def on_unloaded(self) -> None:
        """Nothing parked: share-state requests are answered at once."""

    def on_loaded(self, now_ms: int) -> None:
        if self.config.cold_snapshot_interval_ms > 0:
            self.timer.schedule(COLD_TIMER, self.config.cold_snapshot_interval_ms,
                                self.snapshot_cold)

    # ---- checks --------------------------------------------------------------------
    def _unknown(self, topic_id: uuid.UUID, partition: int) -> bool:
        """Kafka checks the share-partition's topic against the metadata image."""
        image = self.image()
        topic = image.topic_by_id(topic_id) if image is not None else None
        return topic is None or partition >= len(topic.partitions)

    # ---- operations ----------------------------------------------------------------
    def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int,
                   state_epoch: int, start_offset: int, now_ms: int) -> Result:
        """InitializeShareGroupState: a new snapshot holding only the start offset (-1:
        not yet known) under `state_epoch`, which must not be older than the recorded
        one. Any in-flight state is dropped: this is also how offsets are reset."""
        if partition < 0 or state_epoch < 0 or start_offset < UNINITIALIZED_START_OFFSET:
            return Result([], E.invalid_request)
        entry = self.states.get((group_id, topic_id, partition))
        if entry is not None and entry.state.state_epoch > state_epoch:
            return Result([], E.fenced_state_epoch)
        if self._unknown(topic_id, partition):
            return Result([], E.unknown_topic_or_partition)
        snapshot = ShareSnapshot(
            snapshot_epoch=0 if entry is None else entry.state.snapshot_epoch + 1,
            state_epoch=state_epoch,
            leader_epoch=DEFAULT_LEADER_EPOCH if entry is None else entry.state.leader_epoch,
            start_offset=start_offset,
            delivery_complete_count=UNCHANGED if start_offset == UNINITIALIZED_START_OFFSET
            else 0,
            create_timestamp=now_ms, write_timestamp=now_ms)
        return Result([snapshot_record(group_id, topic_id, partition, snapshot)], E.none)

    def read(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int,
             now_ms: int) -> Result:
        """ReadShareGroupState (a write op, as in Kafka: a newer leader epoch is recorded
        so the previous leader's writes are fenced from now on)."""
        if partition < 0:
            return Result([], ReadResult(E.invalid_request))
        key = (group_id, topic_id, partition)
        entry = self.states.get(key)
        if entry is None:
            return Result([], ReadResult(E.invalid_request))  # uninitialized, as Kafka
        if leader_epoch != -1 and entry.state.leader_epoch > leader_epoch:
            return Result([], ReadResult(E.fenced_leader_epoch))
        if self._unknown(topic_id, partition):
            return Result([], ReadResult(E.unknown_topic_or_partition))
        if leader_epoch == -1 or leader_epoch == entry.state.leader_epoch:
            return Result([], ReadResult(E.none, entry.state))
        record = self._state_record(key, entry, leader_epoch, UNCHANGED, UNCHANGED, (),
                                    now_ms)
        return Result([record], ReadResult(E.none, replace(entry.state,
                                                           leader_epoch=leader_epoch)))

    def write(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
              leader_epoch: int, start_offset: int, delivery_complete_count: int,
              batches: tuple[StateBatch, ...], now_ms: int) -> Result:
        """WriteShareGroupState: a delta (or, when due, a snapshot). Refused, with
        nothing written, for an uninitialized share-partition and for a leader or
        state epoch older than the recorded one (-1: not supplied, as in Kafka)."""
        if partition < 0 or start_offset < UNINITIALIZED_START_OFFSET or any(
                not 0 <= b.first_offset <= b.last_offset or b.delivery_count < 0
                or b.delivery_state not in PERSISTED_STATES for b in batches):
            return Result([], E.invalid_request)  # stricter than Kafka: nothing unreadable
        key = (group_id, topic_id, partition)
        entry = self.states.get(key)
        if entry is None:
            return Result([], E.invalid_request)  # uninitialized, as Kafka
        if leader_epoch != -1 and entry.state.leader_epoch > leader_epoch:
            return Result([], E.fenced_leader_epoch)
        if state_epoch != -1 and entry.state.state_epoch > state_epoch:
            return Result([], E.fenced_state_epoch)
        if self._unknown(topic_id, partition):
            return Result([], E.unknown_topic_or_partition)
        epoch = entry.state.leader_epoch if leader_epoch == -1 else leader_epoch
        return Result([self._state_record(key, entry, epoch, start_offset,
                                          delivery_complete_count, batches, now_ms)], E.none)

    def delete(self, group_id: str, topic_id: uuid.UUID, partition: int,
               now_ms: int) -> Result:
        """DeleteShareGroupState: tombstones; deleting nothing is not an error."""
        if partition < 0:
            return Result([], E.invalid_request)
        if self._unknown(topic_id, partition):
            return Result([], E.unknown_topic_or_partition)
        return Result(self._tombstones((group_id, topic_id, partition)), E.none)

    def read_summary(self, group_id: str, topic_id: uuid.UUID,
                     partition: int) -> StateSummary:
        """ReadShareGroupStateSummary (read-only); an uninitialized share-partition has
        the defaults, as in Kafka."""
        if partition < 0:
            return StateSummary(E.invalid_request)
        if self._unknown(topic_id, partition):
            return StateSummary(E.unknown_topic_or_partition)
        entry = self.states.get((group_id, topic_id, partition))
        if entry is None:
            return StateSummary(E.none)
        s = entry.state
        return StateSummary(E.none, s.state_epoch, s.start_offset, s.delivery_complete_count,
                            s.leader_epoch)

    # ---- coordinator-initiated writes ----------------------------------------------
    def snapshot_cold(self, now_ms: int) -> Result:
        """Timer: a snapshot for every share-partition with deltas and no write since
        the previous tick, so its deltas become obsolete and compaction drops them."""
        records = []
        seen: dict[Key, tuple[int, int]] = {}
        for key, entry in self.states.items():
            progress = (entry.state.snapshot_epoch, entry.updates)
            if entry.updates and self._seen.get(key) == progress:
                records.append(snapshot_record(*key, replace(
                    entry.state, snapshot_epoch=entry.state.snapshot_epoch + 1,
                    write_timestamp=now_ms)))
            else:
                seen[key] = progress
        self._seen = seen
        self.timer.schedule(COLD_TIMER, self.config.cold_snapshot_interval_ms,
                            self.snapshot_cold)
        return Result(records)

    def on_metadata_update(self, image: MetadataImage, now_ms: int) -> Result:
        """Deleted topics (or partitions): their share-partition state is deleted."""
        records: list[CoordinatorRecord] = []
        for key in list(self.states):
            topic = image.topic_by_id(key[1])
            if topic is None or key[2] >= len(topic.partitions):
                records += self._tombstones(key)
        return Result(records)

    # ---- records -------------------------------------------------------------------
    def _state_record(self, key: Key, entry: ShareStateEntry, leader_epoch: int,
                      start_offset: int, delivery_complete_count: int,
                      batches: tuple[StateBatch, ...], now_ms: int) -> CoordinatorRecord:
        """A delta, or a snapshot once deltas piled up or the index needs to roll over."""
        delta = ShareUpdate(entry.state.snapshot_epoch, leader_epoch, start_offset,
                            delivery_complete_count, combine((), batches, start_offset),
                            entry.state.state_epoch, entry.next_delta)
        if (entry.updates >= self.config.updates_per_snapshot
                or entry.next_delta >= self.config.delta_index_range):
            merged = apply_update(entry.state, delta, now_ms)
            return snapshot_record(*key, replace(
                merged, snapshot_epoch=entry.state.snapshot_epoch + 1))
        return update_record(*key, delta)

    def _tombstones(self, key: Key) -> list[CoordinatorRecord]:
        entry = self.states.get(key)
        if entry is None:
            return []
        return [tombstone(*key)] + [update_tombstone(*key, i)
                                    for i in range(entry.delta_keys)]
