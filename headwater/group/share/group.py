"""A KIP-932 share group as replaying its records builds it.

Theory of operation
-------------------
A share group is the sum of six record types of `__consumer_offsets` (Kafka 4.1+):

====  ======================================  =========================================
type  record (key)                            what replay does
====  ======================================  =========================================
10    ShareGroupMemberMetadata (group, m)     member's rack, client, subscription;
                                              tombstone removes the member
11    ShareGroupMetadata (group)              group epoch + metadata hash; tombstone
                                              deletes the group
12    ShareGroupTargetAssignmentMetadata      the target assignment epoch
13    ShareGroupTargetAssignmentMember (m)    the member's slice of the target
14    ShareGroupCurrentMemberAssignment (m)   member epoch and assigned partitions
15    ShareGroupStatePartitionMetadata        share-partitions that (may) have state
                                              in the share coordinator
====  ======================================  =========================================

`ShareGroup` holds that state and answers questions about it; decisions live in
operations.py. What it has in common with a consumer group (epochs, members, target,
the replay of records 11, 12 and 13, tombstones) is `modern.ModernGroup`'s. States:
Empty (no members) and Stable; a deleted group is Dead (it no longer exists). There is
no reconciliation: partitions are shared, so a member's epoch jumps to the target epoch
with its whole target slice at its next heartbeat.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode as E

from ...coordinator.record_codec import CoordinatorRecord
from .. import records as R
from ..modern.assignment import EMPTY, Assignment, from_topic_partitions, named, topic_partitions
from ..modern.group import INT32_MIN, SHARE_RECORDS, ModernGroup, ModernGroupMember

if TYPE_CHECKING:
    from ...metadata.image import MetadataImage

# DELETE, DESCRIBE, READ (Kafka's share-group authorized operations without ACLs).
SHARE_GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
STABLE_STATE = 0  # MemberState.STABLE in record 14


@dataclass(frozen=True, slots=True)
class ShareGroupMember(ModernGroupMember):
    """Record 10 (subscription) plus record 14 (epochs, assignment)."""

    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: Assignment = field(default_factory=lambda: EMPTY)


# ---- records (10, 11, 12 and 13 are written as consumer groups write theirs) -----------

group_epoch_record = SHARE_RECORDS.group_epoch_record
member_metadata_record = SHARE_RECORDS.member_metadata_record
target_metadata_record = SHARE_RECORDS.target_metadata_record
target_member_record = SHARE_RECORDS.target_member_record


def current_assignment_record(group_id: str, m: ShareGroupMember) -> CoordinatorRecord:
    return R.record(R.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT,
                    {"group_id": group_id, "member_id": m.member_id},
                    {"member_epoch": m.member_epoch,
                     "previous_member_epoch": m.previous_member_epoch,
                     "state": STABLE_STATE, "assigned_partitions": topic_partitions(m.assigned)})


def state_partitions_record(group_id: str, initialized: Mapping[uuid.UUID, frozenset[int]],
                            names: Mapping[uuid.UUID, str],
                            deleting: Mapping[uuid.UUID, str] | None = None
                            ) -> CoordinatorRecord:
    """Record 15. `deleting`: topics whose share state is being deleted (KIP-932's
    pending-deletion record); they stay until the completing record drops them."""
    return R.record(R.SHARE_GROUP_STATE_PARTITION_METADATA, {"group_id": group_id}, {
        "initializing_topics": [],
        "deleting_topics": [{"topic_id": t, "topic_name": name}
                            for t, name in sorted((deleting or {}).items(),
                                                  key=lambda kv: str(kv[0]))],
        "initialized_topics": [{"topic_id": t, "topic_name": names.get(t, ""),
                                "partitions": sorted(ps)}
                               for t, ps in sorted(initialized.items(), key=lambda kv: str(kv[0]))
                               if ps]})


# ---- the group -----------------------------------------------------------------------

class ShareGroup(ModernGroup[ShareGroupMember]):
    group_type = "share"
    records = SHARE_RECORDS

    def __init__(self, group_id: str) -> None:
        super().__init__(group_id)
        # Share-partitions handed out at least once (record 15's initialized topics):
        # their state in the share coordinator is deleted with the group.
        self.initialized: dict[uuid.UUID, frozenset[int]] = {}
        self.topic_names: dict[uuid.UUID, str] = {}
        # Topics whose state deletion began but did not complete (record 15's deleting
        # topics): finished on load (admin.py).
        self.deleting: dict[uuid.UUID, str] = {}

    # ---- replay (records 10, 14 and 15; ModernGroup replays 11, 12 and 13) -----------
    def replay_member_metadata(self, member_id: str, value: dict[str, Any] | None) -> None:
        if value is None:
            self.members.pop(member_id, None)
            return
        base = self.members.get(member_id) or ShareGroupMember(member_id)
        self.members[member_id] = replace(
            base, rack_id=value["rack_id"], client_id=value["client_id"],
            client_host=value["client_host"],
            subscribed_topic_names=tuple(value["subscribed_topic_names"]))

    def replay_current_assignment(self, member_id: str, value: dict[str, Any] | None) -> None:
        if value is None:
            if member_id in self.members:
                self.members[member_id] = replace(self.members[member_id],
                                                  member_epoch=-1, assigned=EMPTY)
            return
        base = self.members.get(member_id) or ShareGroupMember(member_id)
        self.members[member_id] = replace(
            base, member_epoch=value["member_epoch"],
            previous_member_epoch=value["previous_member_epoch"],
            assigned=from_topic_partitions(value["assigned_partitions"]))

    def replay_other(self, record: CoordinatorRecord) -> None:
        if record.type_id != R.SHARE_GROUP_STATE_PARTITION_METADATA:
            return
        value = record.value
        self.initialized, self.topic_names, self.deleting = {}, {}, {}
        for topic in (value or {}).get("initialized_topics", ()):
            self.initialized[topic["topic_id"]] = frozenset(topic["partitions"])
            self.topic_names[topic["topic_id"]] = topic["topic_name"]
        for topic in (value or {}).get("deleting_topics", ()):
            self.deleting[topic["topic_id"]] = topic["topic_name"]

    # ---- derived -------------------------------------------------------------------
    def state_name(self) -> str:
        return "Stable" if self.members else "Empty"

    # ---- the Group protocol beyond ModernGroup's: no offsets -----------------------
    def validate_offset_commit(self, member_id: str, instance_id: str | None,
                               generation_or_epoch: int, api_version: int,
                               transactional: bool = False) -> int:
        return E.group_id_not_found  # a share group has no committed offsets (Kafka 4.3)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> int:
        return E.none  # answered like a group without offsets

    def validate_offset_delete(self) -> int:
        return E.group_id_not_found

    def own_tombstones(self) -> list[CoordinatorRecord]:
        return [self.records.tombstone(R.SHARE_GROUP_STATE_PARTITION_METADATA, self.group_id)]

    def describe(self) -> dict[str, Any]:
        """DescribeGroups (15) entry: Kafka answers a share group as "not a classic
        group" (v6+; the handler turns it into Dead for older versions)."""
        return {"error_code": E.group_id_not_found,
                "error_message": f"Group {self.group_id} is not a classic group.",
                "group_id": self.group_id, "group_state": "Dead", "protocol_type": "",
                "protocol_data": "", "members": (), "authorized_operations": INT32_MIN}

    def describe_share(self, image: MetadataImage, include_operations: bool) -> dict[str, Any]:
        """ShareGroupDescribe (77) entry."""
        members = [{"member_id": m.member_id, "rack_id": m.rack_id,
                    "member_epoch": m.member_epoch, "client_id": m.client_id,
                    "client_host": m.client_host,
                    "subscribed_topic_names": list(m.subscribed_topic_names),
                    "assignment": named(m.assigned, image)}
                   for m in sorted(self.members.values(), key=lambda m: m.member_id)]
        return {"error_code": 0, "error_message": None, "group_id": self.group_id,
                "group_state": self.state_name(), "group_epoch": self.group_epoch,
                "assignment_epoch": self.assignment_epoch, "assignor_name": "simple",
                "members": members,
                "authorized_operations": SHARE_GROUP_OPERATIONS if include_operations
                else INT32_MIN}

    def own_snapshot(self) -> tuple[Any, ...]:
        return (dict(sorted(self.initialized.items(), key=lambda kv: str(kv[0]))),
                dict(sorted(self.deleting.items(), key=lambda kv: str(kv[0]))))
