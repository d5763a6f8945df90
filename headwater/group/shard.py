"""One group-coordinator shard: the state of the groups hashed to one partition of
`__consumer_offsets`, rebuilt by replaying that partition.

The shard composes five managers over one `groups` map: offsets (Kafka's inbuilt offset management design),
classic groups (JoinGroup/SyncGroup), KIP-848 consumer groups, KIP-932 share groups and
KIP-1071 streams groups. `replay` is the
only method that changes state; operations return records (see coordinator.runtime).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode as E

from ..coordinator.record_codec import CoordinatorRecord
from ..coordinator.runtime import Result, Timer
from . import records as R
from .classic.operations import ClassicGroupManager
from .config import GroupConfig
from .consumer.operations import ConsumerGroupManager
from .offsets import OffsetManager
from .share.operations import ShareGroupManager
from .streams.operations import StreamsGroupManager

if TYPE_CHECKING:
    from ..metadata.image import MetadataImage
    from .base import Group


EXPIRE_TIMER = "offsets-expiration"


class GroupShard:
    def __init__(self, partition: int, timer: Timer, config: GroupConfig,
                 image: Callable[[], MetadataImage], *,
                 share_member_removed: Callable[[str, str], None] | None = None) -> None:
        self.partition = partition
        self.timer = timer
        self.config = config
        self.image = image
        self.groups: dict[str, Group] = {}
        # Rebalances started, by protocol (metrics only; not state, not replayed).
        self.rebalances: dict[str, int] = {"classic": 0, "consumer": 0}
        self.offsets = OffsetManager(self)
        self.classic = ClassicGroupManager(self)
        self.consumer = ConsumerGroupManager(self)
        self.share = ShareGroupManager(self, share_member_removed)
        self.streams = StreamsGroupManager(self)

    # ---- replay (the only state change) --------------------------------------------
    def replay(self, offset: int, producer_id: int, producer_epoch: int,
               record: CoordinatorRecord) -> None:
        t = record.type_id
        if t == R.OFFSET_COMMIT:
            self.offsets.replay(record, offset, producer_id)
        elif t == R.GROUP_METADATA:
            self.classic.replay(record)
        elif t in R.SHARE_TYPES:
            self.share.replay(record)
        elif t in R.STREAMS_TYPES:
            self.streams.replay(record)
        else:
            self.consumer.replay(record)

    def replay_end_transaction(self, producer_id: int, producer_epoch: int,
                               commit: bool, marker_offset: int) -> None:
        """A transaction marker: the producer's pending offsets before it become
        committed offsets (COMMIT) or are dropped (ABORT)."""
        self.offsets.replay_end_transaction(producer_id, commit, marker_offset)

    def on_unloaded(self) -> None:
        """Classic members parked in JoinGroup or SyncGroup are answered NOT_COORDINATOR
        (consumer and share group heartbeats are never parked)."""
        self.classic.on_unloaded()

    def on_loaded(self, now_ms: int) -> None:
        self.classic.on_loaded(now_ms)
        self.consumer.on_loaded(now_ms)
        self.share.on_loaded(now_ms)
        self.streams.on_loaded(now_ms)
        self._schedule_expiry()

    def on_metadata_update(self, image: MetadataImage, now_ms: int) -> Result:
        """Topic changes: drop offsets of deleted topics; let consumer groups react."""
        records: list[CoordinatorRecord] = []
        live = set(image.topics_by_name)
        gone = {topic for topics in self.offsets.offsets.values() for topic in topics} - live
        for topic in sorted(gone):
            records += self.offsets.tombstones_for_topic(topic)
        records += self.consumer.on_metadata_update(image, now_ms)
        records += self.share.on_metadata_update(image, now_ms)
        return Result(records)

    # ---- groups --------------------------------------------------------------------
    def create_simple_group(self, group_id: str) -> None:
        """An offsets-only group (simple/admin commits) is an Empty classic group."""
        self.classic.create_empty(group_id)

    def list_groups(self, states: set[str] | None, types: set[str] | None) -> list[dict[str, Any]]:
        out = []
        for group in self.groups.values():
            state = group.state_name()
            if states and state.lower() not in states:
                continue
            if types and group.group_type.lower() not in types:
                continue
            out.append({"group_id": group.group_id, "protocol_type": group.protocol_type(),
                        "group_state": state, "group_type": group.group_type})
        return out

    def describe_group(self, group_id: str) -> dict[str, Any]:
        group = self.groups.get(group_id)
        if group is None:
            return {"error_code": 0, "group_id": group_id, "group_state": "Dead",
                    "protocol_type": "", "protocol_data": "", "members": (),
                    "authorized_operations": -2147483648}
        return group.describe()

    def delete_group(self, group_id: str) -> Result:
        """DeleteGroups for one group: tombstones for its offsets and its own records."""
        if not group_id:
            return Result([], E.invalid_group_id)
        group = self.groups.get(group_id)
        if group is None:
            return Result([], E.group_id_not_found)
        error = group.validate_delete()
        if error:
            return Result([], error)
        return Result(self.offsets.tombstones_for_group(group_id) + group.tombstones(), E.none)

    def remove_group(self, group_id: str) -> None:
        """Called by a manager's replay when the group's last record is tombstoned."""
        self.groups.pop(group_id, None)

    # ---- offset expiry -------------------------------------------------------------
    def _schedule_expiry(self) -> None:
        self.timer.schedule(EXPIRE_TIMER, self.config.offsets_retention_check_interval_ms,
                            self.expire_offsets)

    def expire_offsets(self, now_ms: int) -> Result:
        """Tombstones for expired offsets, and for Empty groups left without offsets."""
        records = self.offsets.expire(now_ms)
        expiring: dict[str, int] = {}
        for rec in records:
            expiring[rec.key["group"]] = expiring.get(rec.key["group"], 0) + 1
        for group_id, count in expiring.items():
            group = self.groups.get(group_id)
            remaining = sum(len(p) for p in self.offsets.group_offsets(group_id).values())
            if (group is not None and group.is_empty() and remaining == count
                    and not self.offsets.has_pending(group_id)):
                records += group.tombstones()
        self._schedule_expiry()
        return Result(records)
