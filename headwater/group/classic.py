"""Classic group protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup). STUB: being written."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..coordinator.record_codec import CoordinatorRecord
from . import records as R

if TYPE_CHECKING:
    from .shard import GroupShard

NON_EMPTY_GROUP = 68


class ClassicGroup:
    group_type = "classic"

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.members: dict[str, Any] = {}
        self._protocol_type = ""
        self._empty_since: int | None = None

    def state_name(self) -> str:
        return "Empty" if not self.members else "Stable"

    def protocol_type(self) -> str:
        return self._protocol_type

    def is_empty(self) -> bool:
        return not self.members

    def empty_since_ms(self) -> int | None:
        return self._empty_since

    def validate_offset_commit(self, member_id: str, instance_id: str | None,
                               generation_or_epoch: int, api_version: int) -> int:
        return 0

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> int:
        return 0

    def validate_offset_delete(self) -> int:
        return 0

    def validate_delete(self) -> int:
        return NON_EMPTY_GROUP if self.members else 0

    def is_subscribed_to(self, topic: str) -> bool:
        return False

    def tombstones(self) -> list[CoordinatorRecord]:
        return [R.group_metadata_tombstone(self.group_id)]

    def describe(self) -> dict[str, Any]:
        return {"error_code": 0, "group_id": self.group_id, "group_state": self.state_name(),
                "protocol_type": self._protocol_type, "protocol_data": "", "members": (),
                "authorized_operations": -2147483648}


class ClassicGroupManager:
    def __init__(self, shard: GroupShard) -> None:
        self.shard = shard

    def create_empty(self, group_id: str) -> ClassicGroup:
        group = ClassicGroup(group_id)
        self.shard.groups[group_id] = group
        return group

    def replay(self, record: CoordinatorRecord) -> None:
        group_id = record.key["group"]
        if record.value is None:
            if not self.shard.offsets.has_offsets(group_id):
                self.shard.remove_group(group_id)
            return
        group = self.shard.groups.get(group_id)
        if group is None:
            group = self.create_empty(group_id)

    def on_loaded(self, now_ms: int) -> None:
        pass
