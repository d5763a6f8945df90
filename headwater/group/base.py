"""What the offset manager and the admin APIs need from any kind of group.

Classic groups (JoinGroup/SyncGroup), KIP-848 consumer groups and KIP-932 share
groups live side by side in a shard's `groups` map; all implement this protocol so
offsets, ListGroups, DescribeGroups and DeleteGroups treat them alike.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ..coordinator.record_codec import CoordinatorRecord


class Group(Protocol):
    group_id: str
    group_type: str  # "classic" | "consumer" | "share"

    def state_name(self) -> str:
        """Kafka's state name as ListGroups/DescribeGroups report it (e.g. "Stable")."""

    def protocol_type(self) -> str:
        """ListGroups protocol type: "consumer" for consumer groups, the classic group's own."""

    def is_empty(self) -> bool: ...

    def empty_since_ms(self) -> int | None:
        """When the group last became empty (offset retention counts from then)."""

    def validate_offset_commit(self, member_id: str, instance_id: str | None,
                               generation_or_epoch: int, api_version: int,
                               transactional: bool = False) -> int:
        """0 or the Kafka error code for a commit by this member. `transactional`: a
        TxnOffsetCommit, where `api_version` means nothing (-1)."""

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> int: ...

    def validate_offset_delete(self) -> int: ...

    def validate_delete(self) -> int:
        """0, or NON_EMPTY_GROUP when members remain."""

    def is_subscribed_to(self, topic: str) -> bool: ...

    def tombstones(self) -> list[CoordinatorRecord]:
        """Records deleting the group's own state (not its offsets)."""

    def describe(self) -> dict[str, Any]:
        """DescribeGroups entry (kio field names)."""


@runtime_checkable
class PartitionCommitValidated(Protocol):
    """A group that judges some commits partition by partition (streams groups: a
    member's older epoch is good for the tasks it held since)."""

    def partition_commit_error(self, member_id: str, epoch: int, topic: str,
                               partition: int) -> int: ...

