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
operations.py. States: Empty (no members) and Stable; a deleted group is Dead (it no longer
exists). There is no reconciliation: partitions are shared, so a member's epoch jumps
to the target epoch with its whole target slice at its next heartbeat.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ...coordinator.record_codec import CoordinatorRecord
from .. import records as R
from ..consumer.group import from_topic_partitions, topic_partitions
from ..consumer.reconciliation import EMPTY, Assignment
from ..errors import GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, NONE

if TYPE_CHECKING:
    from ...metadata.image import MetadataImage

INT32_MIN = -2147483648
# DELETE, DESCRIBE, READ (Kafka's share-group authorized operations without ACLs).
SHARE_GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
STABLE_STATE = 0  # MemberState.STABLE in record 14


@dataclass(frozen=True, slots=True)
class ShareGroupMember:
    """Record 10 (subscription) plus record 14 (epochs, assignment)."""

    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: Assignment = field(default_factory=lambda: EMPTY)

    def metadata(self) -> tuple[Any, ...]:
        return (self.rack_id, self.client_id, self.client_host, self.subscribed_topic_names)


# ---- records -------------------------------------------------------------------------

def _key(group_id: str, member_id: str | None = None) -> dict[str, Any]:
    key = {"group_id": group_id}
    if member_id is not None:
        key["member_id"] = member_id
    return key


def member_metadata_record(group_id: str, m: ShareGroupMember) -> CoordinatorRecord:
    return R.record(R.SHARE_GROUP_MEMBER_METADATA, _key(group_id, m.member_id),
                    {"rack_id": m.rack_id, "client_id": m.client_id,
                     "client_host": m.client_host,
                     "subscribed_topic_names": list(m.subscribed_topic_names)})


def group_epoch_record(group_id: str, epoch: int, metadata_hash: int) -> CoordinatorRecord:
    return R.record(R.SHARE_GROUP_METADATA, _key(group_id),
                    {"epoch": epoch, "metadata_hash": metadata_hash})


def target_metadata_record(group_id: str, epoch: int) -> CoordinatorRecord:
    return R.record(R.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, _key(group_id),
                    {"assignment_epoch": epoch})


def target_member_record(group_id: str, member_id: str, target: Assignment
                         ) -> CoordinatorRecord:
    return R.record(R.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, _key(group_id, member_id),
                    {"topic_partitions": topic_partitions(target)})


def current_assignment_record(group_id: str, m: ShareGroupMember) -> CoordinatorRecord:
    return R.record(R.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, _key(group_id, m.member_id),
                    {"member_epoch": m.member_epoch,
                     "previous_member_epoch": m.previous_member_epoch,
                     "state": STABLE_STATE, "assigned_partitions": topic_partitions(m.assigned)})


def state_partitions_record(group_id: str, initialized: Mapping[uuid.UUID, frozenset[int]],
                            names: Mapping[uuid.UUID, str],
                            deleting: Mapping[uuid.UUID, str] | None = None
                            ) -> CoordinatorRecord:
    """Record 15. `deleting`: topics whose share state is being deleted (KIP-932's
    pending-deletion record); they stay until the completing record drops them."""
    return R.record(R.SHARE_GROUP_STATE_PARTITION_METADATA, _key(group_id), {
        "initializing_topics": [],
        "deleting_topics": [{"topic_id": t, "topic_name": name}
                            for t, name in sorted((deleting or {}).items(),
                                                  key=lambda kv: str(kv[0]))],
        "initialized_topics": [{"topic_id": t, "topic_name": names.get(t, ""),
                                "partitions": sorted(ps)}
                               for t, ps in sorted(initialized.items(), key=lambda kv: str(kv[0]))
                               if ps]})


def tombstone(type_id: int, group_id: str, member_id: str | None = None) -> CoordinatorRecord:
    return R.record(type_id, _key(group_id, member_id), None)


def member_tombstones(group_id: str, member_id: str) -> list[CoordinatorRecord]:
    """Kafka's order: current assignment, target member, member metadata."""
    return [tombstone(R.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, group_id, member_id),
            tombstone(R.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, group_id, member_id),
            tombstone(R.SHARE_GROUP_MEMBER_METADATA, group_id, member_id)]


# ---- the group -----------------------------------------------------------------------

class ShareGroup:
    group_type = "share"

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.metadata_hash = 0
        self.assignment_epoch = 0
        self.members: dict[str, ShareGroupMember] = {}
        self.target: dict[str, Assignment] = {}
        # Share-partitions handed out at least once (record 15's initialized topics):
        # their state in the share coordinator is deleted with the group.
        self.initialized: dict[uuid.UUID, frozenset[int]] = {}
        self.topic_names: dict[uuid.UUID, str] = {}
        # Topics whose state deletion began but did not complete (record 15's deleting
        # topics): finished on load (admin.py).
        self.deleting: dict[uuid.UUID, str] = {}

    # ---- replay --------------------------------------------------------------------
    def replay(self, record: CoordinatorRecord) -> None:
        t, value = record.type_id, record.value
        member_id = record.key.get("member_id", "")
        if t == R.SHARE_GROUP_METADATA:
            if value is not None:
                self.group_epoch = value["epoch"]
                self.metadata_hash = value.get("metadata_hash", 0)
        elif t == R.SHARE_GROUP_MEMBER_METADATA:
            if value is None:
                self.members.pop(member_id, None)
                return
            base = self.members.get(member_id) or ShareGroupMember(member_id)
            self.members[member_id] = replace(
                base, rack_id=value["rack_id"], client_id=value["client_id"],
                client_host=value["client_host"],
                subscribed_topic_names=tuple(value["subscribed_topic_names"]))
        elif t == R.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA:
            self.assignment_epoch = -1 if value is None else value["assignment_epoch"]
        elif t == R.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER:
            if value is None:
                self.target.pop(member_id, None)
            else:
                self.target[member_id] = from_topic_partitions(value["topic_partitions"])
        elif t == R.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT:
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
        elif t == R.SHARE_GROUP_STATE_PARTITION_METADATA:
            self.initialized, self.topic_names, self.deleting = {}, {}, {}
            for topic in (value or {}).get("initialized_topics", ()):
                self.initialized[topic["topic_id"]] = frozenset(topic["partitions"])
                self.topic_names[topic["topic_id"]] = topic["topic_name"]
            for topic in (value or {}).get("deleting_topics", ()):
                self.deleting[topic["topic_id"]] = topic["topic_name"]

    # ---- derived -------------------------------------------------------------------
    def state_name(self) -> str:
        return "Stable" if self.members else "Empty"

    def subscribed_topics(self, members: Iterable[ShareGroupMember] | None = None) -> set[str]:
        out: set[str] = set()
        for m in self.members.values() if members is None else members:
            out |= set(m.subscribed_topic_names)
        return out

    # ---- the Group protocol (offsets, admin APIs) ----------------------------------
    def protocol_type(self) -> str:
        return "share"

    def is_empty(self) -> bool:
        return not self.members

    def empty_since_ms(self) -> int | None:
        return None

    def validate_offset_commit(self, member_id: str, instance_id: str | None,
                               generation_or_epoch: int, api_version: int,
                               transactional: bool = False) -> int:
        return GROUP_ID_NOT_FOUND  # a share group has no committed offsets (Kafka 4.3)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> int:
        return NONE  # answered like a group without offsets

    def validate_offset_delete(self) -> int:
        return GROUP_ID_NOT_FOUND

    def validate_delete(self) -> int:
        return NON_EMPTY_GROUP if self.members else NONE

    def is_subscribed_to(self, topic: str) -> bool:
        return topic in self.subscribed_topics()

    def tombstones(self) -> list[CoordinatorRecord]:
        """Kafka's `ShareGroup.createGroupTombstoneRecords` order."""
        g = self.group_id
        ids = sorted(self.members)
        return ([tombstone(R.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, g, m) for m in ids]
                + [tombstone(R.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, g, m)
                   for m in sorted(set(self.target) | set(ids))]
                + [tombstone(R.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, g)]
                + [tombstone(R.SHARE_GROUP_MEMBER_METADATA, g, m) for m in ids]
                + [tombstone(R.SHARE_GROUP_STATE_PARTITION_METADATA, g)]
                + [tombstone(R.SHARE_GROUP_METADATA, g)])

    def describe(self) -> dict[str, Any]:
        """DescribeGroups (15) entry: Kafka answers a share group as "not a classic
        group" (v6+; the handler turns it into Dead for older versions)."""
        return {"error_code": GROUP_ID_NOT_FOUND,
                "error_message": f"Group {self.group_id} is not a classic group.",
                "group_id": self.group_id, "group_state": "Dead", "protocol_type": "",
                "protocol_data": "", "members": (), "authorized_operations": INT32_MIN}

    def describe_share(self, image: MetadataImage, include_operations: bool) -> dict[str, Any]:
        """ShareGroupDescribe (77) entry."""

        def named(assignment: Assignment) -> dict[str, Any]:
            parts = []
            for t, ps in sorted(assignment.items(), key=lambda kv: str(kv[0])):
                topic = image.topic_by_id(t)
                parts.append({"topic_id": t, "topic_name": topic.name if topic else "",
                              "partitions": sorted(ps)})
            return {"topic_partitions": parts}

        members = [{"member_id": m.member_id, "rack_id": m.rack_id,
                    "member_epoch": m.member_epoch, "client_id": m.client_id,
                    "client_host": m.client_host,
                    "subscribed_topic_names": list(m.subscribed_topic_names),
                    "assignment": named(m.assigned)}
                   for m in sorted(self.members.values(), key=lambda m: m.member_id)]
        return {"error_code": 0, "error_message": None, "group_id": self.group_id,
                "group_state": self.state_name(), "group_epoch": self.group_epoch,
                "assignment_epoch": self.assignment_epoch, "assignor_name": "simple",
                "members": members,
                "authorized_operations": SHARE_GROUP_OPERATIONS if include_operations
                else INT32_MIN}

    def snapshot(self) -> tuple[Any, ...]:
        """Everything replay builds, for comparing a live group with a replayed one."""
        return (self.group_id, self.group_epoch, self.metadata_hash, self.assignment_epoch,
                dict(sorted(self.members.items())),
                {m: dict(a) for m, a in sorted(self.target.items())},
                dict(sorted(self.initialized.items(), key=lambda kv: str(kv[0]))),
                dict(sorted(self.deleting.items(), key=lambda kv: str(kv[0]))))
