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
reconciliation.py). Everything else here is derived from the replayed state:

* the group state, in Kafka's precedence: Empty (no members) -> Assigning (group epoch
  ahead of the target epoch) -> Reconciling (a member is not STABLE at the target
  epoch) -> Stable;
* which member owns each partition now (`owner_epoch`), from the members' assigned and
  pending-revocation partitions: what keeps two members from owning one partition;
* the topics the group subscribes to (names plus resolved regexes).
"""

from __future__ import annotations

import hashlib
import struct
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ...coordinator.record_codec import CoordinatorRecord
from .. import records as R
from ..errors import (
    NON_EMPTY_GROUP,
    NONE,
    STALE_MEMBER_EPOCH,
    UNKNOWN_MEMBER_ID,
    UNSUPPORTED_VERSION,
)
from .reconciliation import EMPTY, Assignment, CurrentAssignment, MemberState, freeze

if TYPE_CHECKING:
    from ...metadata.image import MetadataImage

CONSUMER_MEMBER_TYPE = 1
ALL_GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)
INT32_MIN = -2147483648


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    """Record 5 (everything but `current`) plus record 8 (`current`)."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    current: CurrentAssignment = field(default_factory=CurrentAssignment)

    @property
    def member_epoch(self) -> int:
        return self.current.member_epoch

    def metadata(self) -> tuple[Any, ...]:
        """The record-5 part, for change detection."""
        return (self.instance_id, self.rack_id, self.client_id, self.client_host,
                self.subscribed_topic_names, self.subscribed_topic_regex,
                self.rebalance_timeout_ms, self.server_assignor)


@dataclass(frozen=True, slots=True)
class ResolvedRegex:
    topics: frozenset[str]
    version: int
    timestamp: int


# ---- records -------------------------------------------------------------------------

def topic_partitions(assignment: Assignment) -> list[dict[str, Any]]:
    return [{"topic_id": t, "partitions": sorted(ps)}
            for t, ps in sorted(assignment.items(), key=lambda kv: str(kv[0])) if ps]


def from_topic_partitions(items: Iterable[Mapping[str, Any]]) -> Assignment:
    out: dict[uuid.UUID, set[int]] = {}
    for item in items:
        out.setdefault(item["topic_id"], set()).update(item["partitions"])
    return freeze(out)


def group_epoch_record(group_id: str, epoch: int, metadata_hash: int) -> CoordinatorRecord:
    return R.record(R.CONSUMER_GROUP_METADATA, {"group_id": group_id},
                    {"epoch": epoch, "metadata_hash": metadata_hash})


def group_epoch_tombstone(group_id: str) -> CoordinatorRecord:
    return R.record(R.CONSUMER_GROUP_METADATA, {"group_id": group_id}, None)


def member_metadata_record(group_id: str, m: ConsumerGroupMember) -> CoordinatorRecord:
    return R.record(R.CONSUMER_GROUP_MEMBER_METADATA,
                    {"group_id": group_id, "member_id": m.member_id},
                    {"instance_id": m.instance_id, "rack_id": m.rack_id,
                     "client_id": m.client_id, "client_host": m.client_host,
                     "subscribed_topic_names": list(m.subscribed_topic_names),
                     "subscribed_topic_regex": m.subscribed_topic_regex,
                     "rebalance_timeout_ms": m.rebalance_timeout_ms,
                     "server_assignor": m.server_assignor})


def member_metadata_tombstone(group_id: str, member_id: str) -> CoordinatorRecord:
    return R.record(R.CONSUMER_GROUP_MEMBER_METADATA,
                    {"group_id": group_id, "member_id": member_id}, None)


def target_metadata_record(group_id: str, epoch: int) -> CoordinatorRecord:
    return R.record(R.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, {"group_id": group_id},
                    {"assignment_epoch": epoch})


def target_metadata_tombstone(group_id: str) -> CoordinatorRecord:
    return R.record(R.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, {"group_id": group_id}, None)


def target_member_record(group_id: str, member_id: str, target: Assignment
                         ) -> CoordinatorRecord:
    return R.record(R.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
                    {"group_id": group_id, "member_id": member_id},
                    {"topic_partitions": topic_partitions(target)})


def target_member_tombstone(group_id: str, member_id: str) -> CoordinatorRecord:
    return R.record(R.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
                    {"group_id": group_id, "member_id": member_id}, None)


def current_assignment_record(group_id: str, member_id: str, c: CurrentAssignment
                              ) -> CoordinatorRecord:
    return R.record(R.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
                    {"group_id": group_id, "member_id": member_id},
                    {"member_epoch": c.member_epoch,
                     "previous_member_epoch": c.previous_member_epoch,
                     "state": int(c.state),
                     "assigned_partitions": topic_partitions(c.assigned),
                     "partitions_pending_revocation": topic_partitions(c.pending_revocation)})


def current_assignment_tombstone(group_id: str, member_id: str) -> CoordinatorRecord:
    return R.record(R.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
                    {"group_id": group_id, "member_id": member_id}, None)


def regex_record(group_id: str, regex: str, resolved: ResolvedRegex) -> CoordinatorRecord:
    return R.record(R.CONSUMER_GROUP_REGULAR_EXPRESSION,
                    {"group_id": group_id, "regular_expression": regex},
                    {"topics": sorted(resolved.topics), "version": resolved.version,
                     "timestamp": resolved.timestamp})


def regex_tombstone(group_id: str, regex: str) -> CoordinatorRecord:
    return R.record(R.CONSUMER_GROUP_REGULAR_EXPRESSION,
                    {"group_id": group_id, "regular_expression": regex}, None)


def metadata_hash(topic_names: Iterable[str], image: MetadataImage) -> int:
    """A stable 64-bit hash of the subscribed topics that exist: name, id, partitions.

    Stored in record 3; a different value means the assignor's input changed.
    """
    h = hashlib.blake2b(digest_size=8)
    found = False
    for name in sorted(set(topic_names)):
        topic = image.topic(name)
        if topic is None:
            continue
        found = True
        h.update(name.encode() + b"\0" + topic.topic_id.bytes
                 + struct.pack(">i", len(topic.partitions)))
    if not found:
        return 0
    value: int = struct.unpack(">q", h.digest())[0]
    return value


# ---- the group -----------------------------------------------------------------------

class ConsumerGroup:
    group_type = "consumer"

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.metadata_hash = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target: dict[str, Assignment] = {}
        self.resolved_regexes: dict[str, ResolvedRegex] = {}
        self.owners: dict[tuple[uuid.UUID, int], str] = {}  # partition -> member id

    # ---- replay --------------------------------------------------------------------
    def replay_group_metadata(self, value: dict[str, Any]) -> None:
        self.group_epoch = value["epoch"]
        self.metadata_hash = value.get("metadata_hash", 0)

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

    def replay_target_metadata(self, value: dict[str, Any] | None) -> None:
        self.assignment_epoch = -1 if value is None else value["assignment_epoch"]

    def replay_target_member(self, member_id: str, value: dict[str, Any] | None) -> None:
        if value is None:
            self.target.pop(member_id, None)
        else:
            self.target[member_id] = from_topic_partitions(value["topic_partitions"])

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

    def replay_regex(self, regex: str, value: dict[str, Any] | None) -> None:
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

    def is_deletable_on_tombstone(self) -> bool:
        return not self.members

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

    def subscribed_topics(self) -> set[str]:
        out: set[str] = set()
        for m in self.members.values():
            out |= self.member_topics(m)
        return out

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

    # ---- the Group protocol (offsets, admin APIs) ----------------------------------
    def protocol_type(self) -> str:
        return "consumer"

    def is_empty(self) -> bool:
        return not self.members

    def empty_since_ms(self) -> int | None:
        return None

    def validate_offset_commit(self, member_id: str, instance_id: str | None,
                               generation_or_epoch: int, api_version: int,
                               transactional: bool = False) -> int:
        if not member_id and generation_or_epoch < 0:
            return NONE  # an admin / simple commit
        member = self.members.get(member_id)
        if member is None:
            return UNKNOWN_MEMBER_ID
        if api_version < 9 and not transactional:
            return UNSUPPORTED_VERSION  # member epochs need OffsetCommit v9+
        if generation_or_epoch != member.member_epoch:
            return STALE_MEMBER_EPOCH
        return NONE

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> int:
        if not member_id and member_epoch < 0:
            return NONE
        member = self.members.get(member_id or "")
        if member is None:
            return UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return STALE_MEMBER_EPOCH
        return NONE

    def validate_offset_delete(self) -> int:
        return NONE

    def validate_delete(self) -> int:
        return NON_EMPTY_GROUP if self.members else NONE

    def is_subscribed_to(self, topic: str) -> bool:
        return topic in self.subscribed_topics()

    def tombstones(self) -> list[CoordinatorRecord]:
        g = self.group_id
        ids = sorted(self.members)
        return ([current_assignment_tombstone(g, m) for m in ids]
                + [target_member_tombstone(g, m) for m in sorted(set(self.target) | set(ids))]
                + [target_metadata_tombstone(g)]
                + [member_metadata_tombstone(g, m) for m in ids]
                + [regex_tombstone(g, r) for r in sorted(self.resolved_regexes)]
                + [group_epoch_tombstone(g)])

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

        def named(assignment: Assignment) -> dict[str, Any]:
            parts = []
            for t, ps in sorted(assignment.items(), key=lambda kv: str(kv[0])):
                topic = image.topic_by_id(t)
                parts.append({"topic_id": t, "topic_name": topic.name if topic else "",
                              "partitions": sorted(ps)})
            return {"topic_partitions": parts}

        members = []
        for m in sorted(self.members.values(), key=lambda m: m.member_id):
            members.append({
                "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
                "member_epoch": m.member_epoch, "client_id": m.client_id,
                "client_host": m.client_host,
                "subscribed_topic_names": list(m.subscribed_topic_names),
                "subscribed_topic_regex": m.subscribed_topic_regex,
                "assignment": named(m.current.assigned),
                "target_assignment": named(self.target.get(m.member_id, EMPTY)),
                "member_type": CONSUMER_MEMBER_TYPE})
        return {"error_code": 0, "error_message": None, "group_id": self.group_id,
                "group_state": self.state_name(), "group_epoch": self.group_epoch,
                "assignment_epoch": self.assignment_epoch,
                "assignor_name": self.preferred_assignor(default_assignor),
                "members": members,
                "authorized_operations": ALL_GROUP_OPERATIONS if include_operations
                else INT32_MIN}

    def snapshot(self) -> tuple[Any, ...]:
        """Everything replay builds, for comparing a live group with a replayed one."""
        return (self.group_id, self.group_epoch, self.metadata_hash, self.assignment_epoch,
                dict(sorted(self.members.items())), dict(sorted(self.static_members.items())),
                {m: dict(a) for m, a in sorted(self.target.items())},
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
