"""What the offset manager and the admin APIs need from any kind of group.

Classic groups (JoinGroup/SyncGroup), KIP-848 consumer groups and KIP-932 share
groups live side by side in a shard's `groups` map; all implement this protocol so
offsets, ListGroups, DescribeGroups and DeleteGroups treat them alike.
"""

from __future__ import annotations

from typing import Any, Generic, Protocol, TypeVar

from ..coordinator.record_codec import CoordinatorRecord
from ..metadata.image import GROUP_RESOURCE


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


G = TypeVar("G")


class GroupsOfType(Generic[G]):
    """What the managers of KIP-848 consumer groups and KIP-932 share groups have in
    common: their groups among the shard's, and the session timeout and heartbeat
    interval of a group (its `<prefix>.session.timeout.ms` / `.heartbeat.interval.ms`
    override, else the broker's `group.<prefix>.*` default)."""

    group_class: type[G]
    config_prefix: str  # "consumer" or "share"

    def __init__(self, shard: Any) -> None:
        self.shard = shard
        self._loaded = False

    def group(self, group_id: str) -> G | None:
        group = self.shard.groups.get(group_id)
        return group if isinstance(group, self.group_class) else None

    def groups(self) -> list[G]:
        return [g for g in self.shard.groups.values() if isinstance(g, self.group_class)]

    def _group_config(self, group_id: str, key: str, default: int) -> int:
        value = self.shard.image().resource_configs(GROUP_RESOURCE, group_id).get(key)
        try:
            return int(value) if value is not None else default
        except ValueError:
            return default

    def session_timeout_ms(self, group_id: str) -> int:
        p = self.config_prefix
        return self._group_config(group_id, f"{p}.session.timeout.ms",
                                  getattr(self.shard.config, f"{p}_session_timeout_ms"))

    def heartbeat_interval_ms(self, group_id: str) -> int:
        p = self.config_prefix
        return self._group_config(group_id, f"{p}.heartbeat.interval.ms",
                                  getattr(self.shard.config, f"{p}_heartbeat_interval_ms"))
