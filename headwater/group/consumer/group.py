"""A KIP-848 consumer group as replaying its records builds it.

Theory of operation
-------------------
A consumer group is the sum of six record types of `__consumer_offsets` (KIP-848):

====  ========================================  =======================================
type  record (key)                              what replay does
====  ========================================  =======================================
3     ConsumerGroupMetadata (group)             group epoch + metadata hash; tombstone
                                                deletes the group
5     ConsumerGroupMemberMetadata (group, m)    member's subscription and settings;
                                                tombstone removes the member
6     ConsumerGroupTargetAssignmentMetadata     the target assignment epoch
7     ConsumerGroupTargetAssignmentMember (m)   the member's slice of the target
8     ConsumerGroupCurrentMemberAssignment (m)  member epoch, reconciliation state,
                                                assigned + pending-revocation partitions
16    ConsumerGroupRegularExpression (regex)    topics a subscribed regex resolved to
====  ========================================  =======================================

`ConsumerGroup` holds that state and answers questions about it; it never decides
anything (the heartbeat logic lives in operations.py, reconciliation in
reconciliation.py). What it has in common with a share group (epochs, members, target,
the replay of records 3, 6 and 7, offsets validation, tombstones) is
`modern.ModernGroup`'s. Everything else here is derived from the replayed state:

* the group state, in Kafka's precedence: Empty (no members) -> Assigning (group epoch
  ahead of the target epoch) -> Reconciling (a member is not STABLE at the target
  epoch) -> Stable;
* which member owns each partition now (`owner_epoch`), from the members' assigned and
  pending-revocation partitions: what keeps two members from owning one partition;
* the topics the group subscribes to (names plus resolved regexes).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ...coordinator.record_codec import CoordinatorRecord
from .. import records as R
from ..modern.assignment import EMPTY, Assignment, from_topic_partitions, named, topic_partitions
from ..modern.group import CONSUMER_RECORDS, INT32_MIN, ModernGroup, ModernGroupMember
from .reconciliation import CurrentAssignment, MemberState

if TYPE_CHECKING:
    from ...metadata.image import MetadataImage

CONSUMER_MEMBER_TYPE = 1
ALL_GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember(ModernGroupMember):
    """Record 5 (everything but `current`) plus record 8 (`current`)."""

    instance_id: str | None = None
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    current: CurrentAssignment = field(default_factory=CurrentAssignment)

    @property
    def member_epoch(self) -> int:
        return self.current.member_epoch

    @property
    def previous_member_epoch(self) -> int:
        return self.current.previous_member_epoch

    @property
    def assigned(self) -> Assignment:
        return self.current.assigned

    def metadata(self) -> dict[str, Any]:
        """Record 5's value (a heartbeat that changes it writes it)."""
        return {**ModernGroupMember.metadata(self), "instance_id": self.instance_id,
                "subscribed_topic_regex": self.subscribed_topic_regex,
                "rebalance_timeout_ms": self.rebalance_timeout_ms,
                "server_assignor": self.server_assignor}


@dataclass(frozen=True, slots=True)
class ResolvedRegex:
    topics: frozenset[str]
    version: int
    timestamp: int


# ---- records (3, 5, 6 and 7 are written as share groups write theirs: ModernRecords) ---

group_epoch_record = CONSUMER_RECORDS.group_epoch_record
member_metadata_record = CONSUMER_RECORDS.member_metadata_record
target_metadata_record = CONSUMER_RECORDS.target_metadata_record
target_member_record = CONSUMER_RECORDS.target_member_record


def current_assignment_record(group_id: str, member_id: str, c: CurrentAssignment
                              ) -> CoordinatorRecord:
    return R.record(R.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
                    {"group_id": group_id, "member_id": member_id},
                    {"member_epoch": c.member_epoch,
                     "previous_member_epoch": c.previous_member_epoch,
                     "state": int(c.state),
                     "assigned_partitions": topic_partitions(c.assigned),
                     "partitions_pending_revocation": topic_partitions(c.pending_revocation)})


def regex_record(group_id: str, regex: str, resolved: ResolvedRegex) -> CoordinatorRecord:
    return R.record(R.CONSUMER_GROUP_REGULAR_EXPRESSION,
                    {"group_id": group_id, "regular_expression": regex},
                    {"topics": sorted(resolved.topics), "version": resolved.version,
                     "timestamp": resolved.timestamp})


def regex_tombstone(group_id: str, regex: str) -> CoordinatorRecord:
    return R.record(R.CONSUMER_GROUP_REGULAR_EXPRESSION,
                    {"group_id": group_id, "regular_expression": regex}, None)


# ---- the group -----------------------------------------------------------------------

class ConsumerGroup(ModernGroup[ConsumerGroupMember]):
    group_type = "consumer"
    records = CONSUMER_RECORDS

    def __init__(self, group_id: str) -> None:
        super().__init__(group_id)
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.resolved_regexes: dict[str, ResolvedRegex] = {}
        self.owners: dict[tuple[uuid.UUID, int], str] = {}  # partition -> member id

    # ---- replay (records 5, 8 and 16; ModernGroup replays 3, 6 and 7) ---------------
    def replay_member_metadata(self, member_id: str, value: dict[str, Any] | None) -> None:
        old = self.members.get(member_id)
        if value is None:
            if old is not None:
                self._set_current(member_id, None)
                del self.members[member_id]
                if old.instance_id and self.static_members.get(old.instance_id) == member_id:
                    del self.static_members[old.instance_id]
            return
        base = old or ConsumerGroupMember(member_id)
        member = replace(
            base, instance_id=value["instance_id"], rack_id=value["rack_id"],
            client_id=value["client_id"], client_host=value["client_host"],
            subscribed_topic_names=tuple(value["subscribed_topic_names"]),
            subscribed_topic_regex=value["subscribed_topic_regex"] or None,
            rebalance_timeout_ms=value["rebalance_timeout_ms"],
            server_assignor=value["server_assignor"])
        if old is not None and old.instance_id and old.instance_id != member.instance_id \
                and self.static_members.get(old.instance_id) == member_id:
            del self.static_members[old.instance_id]
        self.members[member_id] = member
        if member.instance_id:
            self.static_members[member.instance_id] = member_id

    def replay_current_assignment(self, member_id: str, value: dict[str, Any] | None) -> None:
        if member_id not in self.members:
            if value is None:
                return
            self.members[member_id] = ConsumerGroupMember(member_id)
        if value is None:
            current = CurrentAssignment(-1, -1, MemberState.STABLE, EMPTY, EMPTY)
        else:
            try:
                state = MemberState(value["state"])
            except ValueError:
                state = MemberState.UNKNOWN
            current = CurrentAssignment(
                value["member_epoch"], value["previous_member_epoch"], state,
                from_topic_partitions(value["assigned_partitions"]),
                from_topic_partitions(value["partitions_pending_revocation"]))
        self._set_current(member_id, current)

    def replay_other(self, record: CoordinatorRecord) -> None:
        if record.type_id != R.CONSUMER_GROUP_REGULAR_EXPRESSION:
            return
        regex, value = record.key["regular_expression"], record.value
        if value is None:
            self.resolved_regexes.pop(regex, None)
        else:
            self.resolved_regexes[regex] = ResolvedRegex(
                frozenset(value["topics"]), value["version"], value["timestamp"])

    def _set_current(self, member_id: str, current: CurrentAssignment | None) -> None:
        old = self.members[member_id]
        for part in _partitions(old.current.assigned, old.current.pending_revocation):
            if self.owners.get(part) == member_id:
                del self.owners[part]
        if current is None:
            return
        for part in _partitions(current.assigned, current.pending_revocation):
            self.owners[part] = member_id
        self.members[member_id] = replace(old, current=current)

    # ---- derived -------------------------------------------------------------------
    def state_name(self) -> str:
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        for m in self.members.values():
            if not m.current.is_reconciled_to(self.assignment_epoch):
                return "Reconciling"
        return "Stable"

    def owner_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        owner = self.owners.get((topic_id, partition))
        if owner is None:
            return -1
        member = self.members.get(owner)
        return -1 if member is None else member.member_epoch

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def member_topics(self, member: ConsumerGroupMember,
                      regexes: Mapping[str, ResolvedRegex] | None = None) -> set[str]:
        """Names the member subscribes to: its list plus its resolved regex."""
        topics = set(member.subscribed_topic_names)
        regex = member.subscribed_topic_regex
        if regex:
            resolved = (self.resolved_regexes if regexes is None else regexes).get(regex)
            if resolved is not None:
                topics |= resolved.topics
        return topics

    def regex_users(self, regex: str) -> set[str]:
        return {m.member_id for m in self.members.values() if m.subscribed_topic_regex == regex}

    def preferred_assignor(self, default: str,
                           members: Iterable[ConsumerGroupMember] | None = None) -> str:
        """The server assignor most members asked for; ties by name; else the default."""
        counts: dict[str, int] = {}
        for m in self.members.values() if members is None else members:
            if m.server_assignor:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        if not counts:
            return default
        return min(counts, key=lambda name: (-counts[name], name))

    # ---- the Group protocol beyond ModernGroup's -----------------------------------
    def own_tombstones(self) -> list[CoordinatorRecord]:
        return [regex_tombstone(self.group_id, r) for r in sorted(self.resolved_regexes)]

    def describe(self) -> dict[str, Any]:
        """DescribeGroups (API 15) entry: members with consumer-protocol-encoded
        subscription and assignment, the assignor as protocol data."""
        members = []
        for m in sorted(self.members.values(), key=lambda m: m.member_id):
            members.append({
                "member_id": m.member_id, "group_instance_id": m.instance_id,
                "client_id": m.client_id, "client_host": m.client_host,
                "member_metadata": _encode_subscription(sorted(self.member_topics(m))),
                "member_assignment": b""})
        return {"error_code": 0, "group_id": self.group_id, "group_state": self.state_name(),
                "protocol_type": "consumer",
                "protocol_data": self.preferred_assignor("") if self.members else "",
                "members": members, "authorized_operations": INT32_MIN}

    def describe_consumer(self, image: MetadataImage, default_assignor: str,
                          include_operations: bool) -> dict[str, Any]:
        """ConsumerGroupDescribe (API 69) entry."""
        members = []
        for m in sorted(self.members.values(), key=lambda m: m.member_id):
            members.append({
                "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
                "member_epoch": m.member_epoch, "client_id": m.client_id,
                "client_host": m.client_host,
                "subscribed_topic_names": list(m.subscribed_topic_names),
                "subscribed_topic_regex": m.subscribed_topic_regex,
                "assignment": named(m.current.assigned, image),
                "target_assignment": named(self.target.get(m.member_id, EMPTY), image),
                "member_type": CONSUMER_MEMBER_TYPE})
        return {"error_code": 0, "error_message": None, "group_id": self.group_id,
                "group_state": self.state_name(), "group_epoch": self.group_epoch,
                "assignment_epoch": self.assignment_epoch,
                "assignor_name": self.preferred_assignor(default_assignor),
                "members": members,
                "authorized_operations": ALL_GROUP_OPERATIONS if include_operations
                else INT32_MIN}

    def own_snapshot(self) -> tuple[Any, ...]:
        return (dict(sorted(self.static_members.items())),
                dict(sorted(self.resolved_regexes.items())),
                dict(sorted(self.owners.items(), key=lambda kv: (str(kv[0][0]), kv[0][1]))))


def _partitions(*assignments: Assignment) -> Iterable[tuple[uuid.UUID, int]]:
    for assignment in assignments:
        for t, ps in assignment.items():
            for p in ps:
                yield (t, p)


def _encode_subscription(topics: list[str]) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, null user data."""
    out = bytearray(struct.pack(">hi", 0, len(topics)))
    for t in topics:
        raw = t.encode()
        out += struct.pack(">h", len(raw)) + raw
    out += struct.pack(">i", -1)
    return bytes(out)
