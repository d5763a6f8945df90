"""What KIP-848 consumer groups and KIP-932 share groups have in common, as state: Kafka's
`ModernGroup` and `ModernGroupMember` (org.apache.kafka.coordinator.group.modern).

Theory of operation
-------------------
Both kinds of group are rebuilt from the same five kinds of record, each kind with its
own type ids (`ModernRecords`: consumer 3, 5, 6, 7, 8; share 11, 10, 12, 13, 14):

=======================  ============================================================
record (key)             what replay does
=======================  ============================================================
group metadata (group)   the group epoch and the metadata hash of the subscribed
                         topics; its tombstone deletes the group (the manager's part)
member metadata (m)      the member's subscription and client; tombstone removes it
target metadata          the target assignment epoch
target member (m)        the member's slice of the target assignment
current assignment (m)   the member's epoch, previous epoch and assigned partitions
=======================  ============================================================

`ModernGroup` replays the three that mean the same in both (group metadata, target
metadata, target member) and leaves the member records, whose values differ, and any
record of its own kind (a consumer group's regexes, a share group's share-partition
metadata) to the subclass. The group epoch moves when the assignor's input changes
(`metadata_hash` over the subscribed topics is how a topic change is seen); an
assignment epoch behind the group epoch means a new target assignment is due.

From that state, the answers both kinds give alike: the subscribed topics (a member's
`member_topics`, overridable: a consumer member's regex adds topics), emptiness and
deletion (NON_EMPTY_GROUP while members remain), offset commits and fetches validated
against the member epoch (Kafka's `ModernGroup.validateOffsetCommit`; a share group,
which has no offsets, overrides them), the tombstones that delete the group, and the
snapshot tests compare a live group with a replayed one by. Decisions (heartbeats,
fencing, timers) are operations.py's.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from kio.schema.errors import ErrorCode as E

from ...coordinator.record_codec import CoordinatorRecord
from .. import records as R
from .assignment import Assignment, from_topic_partitions, topic_partitions
from .member_epochs import MemberEpochChecks

if TYPE_CHECKING:
    from ...metadata.image import MetadataImage

INT32_MIN = -2147483648  # "authorized operations not requested"


@dataclass(frozen=True, slots=True)
class ModernRecords:
    """The record types of one kind of modern group, and the records both kinds write
    alike (same keys, same values; only the type ids differ)."""

    group_metadata: int
    member_metadata: int
    target_metadata: int
    target_member: int
    current_assignment: int

    def group_epoch_record(self, group_id: str, epoch: int, metadata_hash: int
                           ) -> CoordinatorRecord:
        return R.record(self.group_metadata, {"group_id": group_id},
                        {"epoch": epoch, "metadata_hash": metadata_hash})

    def member_metadata_record(self, group_id: str, member: ModernGroupMember
                               ) -> CoordinatorRecord:
        return R.record(self.member_metadata, {"group_id": group_id, "member_id": member.member_id},
                        member.metadata())

    def target_metadata_record(self, group_id: str, epoch: int) -> CoordinatorRecord:
        return R.record(self.target_metadata, {"group_id": group_id},
                        {"assignment_epoch": epoch})

    def target_member_record(self, group_id: str, member_id: str, target: Assignment
                             ) -> CoordinatorRecord:
        return R.record(self.target_member, {"group_id": group_id, "member_id": member_id},
                        {"topic_partitions": topic_partitions(target)})

    def tombstone(self, type_id: int, group_id: str, member_id: str | None = None
                  ) -> CoordinatorRecord:
        key = {"group_id": group_id}
        if member_id is not None:
            key["member_id"] = member_id
        return R.record(type_id, key, None)

    def member_tombstones(self, group_id: str, member_id: str) -> list[CoordinatorRecord]:
        """A member's records, deleted in Kafka's order: current assignment, target
        member, member metadata."""
        return [self.tombstone(self.current_assignment, group_id, member_id),
                self.tombstone(self.target_member, group_id, member_id),
                self.tombstone(self.member_metadata, group_id, member_id)]


CONSUMER_RECORDS = ModernRecords(
    R.CONSUMER_GROUP_METADATA, R.CONSUMER_GROUP_MEMBER_METADATA,
    R.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, R.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    R.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT)
SHARE_RECORDS = ModernRecords(
    R.SHARE_GROUP_METADATA, R.SHARE_GROUP_MEMBER_METADATA,
    R.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, R.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER,
    R.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT)


def metadata_hash(topic_names: Iterable[str], image: MetadataImage) -> int:
    """A stable 64-bit hash of the subscribed topics that exist: name, id, partitions.

    Stored in the group metadata record; a different value means the assignor's input
    changed.
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


@dataclass(frozen=True, slots=True)
class ModernGroupMember:
    """What every member of a modern group has: its id, client, rack and subscribed topic
    names (member metadata), and an epoch, a previous epoch and assigned partitions
    (current assignment), which each kind keeps its own way."""

    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()

    @property
    def member_epoch(self) -> int:
        raise NotImplementedError

    @property
    def previous_member_epoch(self) -> int:
        raise NotImplementedError

    @property
    def assigned(self) -> Assignment:
        raise NotImplementedError

    def metadata(self) -> dict[str, Any]:
        """The member metadata record's value; a heartbeat that changes it writes it."""
        return {"rack_id": self.rack_id, "client_id": self.client_id,
                "client_host": self.client_host,
                "subscribed_topic_names": list(self.subscribed_topic_names)}


M = TypeVar("M", bound=ModernGroupMember)


class ModernGroup(MemberEpochChecks, Generic[M]):
    """A consumer or share group: epochs, members, target assignment; implements
    `base.Group`. Subclasses name their records and replay their member records."""

    group_type: ClassVar[str]  # "consumer" | "share": also the ListGroups protocol type
    records: ClassVar[ModernRecords]

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.metadata_hash = 0
        self.assignment_epoch = 0
        self.members: dict[str, M] = {}
        self.target: dict[str, Assignment] = {}

    # ---- replay --------------------------------------------------------------------
    def replay(self, record: CoordinatorRecord) -> None:
        """One of the group's records (not the group metadata tombstone, which removes
        the group: the manager's)."""
        t, value = record.type_id, record.value
        types = self.records
        if t == types.group_metadata:
            if value is not None:
                self.group_epoch = value["epoch"]
                self.metadata_hash = value.get("metadata_hash", 0)
        elif t == types.target_metadata:
            self.assignment_epoch = -1 if value is None else value["assignment_epoch"]
        elif t == types.target_member:
            if value is None:
                self.target.pop(record.key["member_id"], None)
            else:
                self.target[record.key["member_id"]] = from_topic_partitions(
                    value["topic_partitions"])
        elif t == types.member_metadata:
            self.replay_member_metadata(record.key["member_id"], value)
        elif t == types.current_assignment:
            self.replay_current_assignment(record.key["member_id"], value)
        else:
            self.replay_other(record)

    def replay_member_metadata(self, member_id: str, value: dict[str, Any] | None) -> None:
        raise NotImplementedError

    def replay_current_assignment(self, member_id: str, value: dict[str, Any] | None) -> None:
        raise NotImplementedError

    def replay_other(self, record: CoordinatorRecord) -> None:
        """A record of this kind of group only (none by default)."""

    # ---- derived -------------------------------------------------------------------
    def member_topics(self, member: M) -> set[str]:
        """The topic names a member subscribes to."""
        return set(member.subscribed_topic_names)

    def subscribed_topics(self, members: Iterable[M] | None = None) -> set[str]:
        """The topics the group (or just `members`) subscribes to."""
        out: set[str] = set()
        for m in self.members.values() if members is None else members:
            out |= self.member_topics(m)
        return out

    # ---- the Group protocol (offsets, admin APIs) ----------------------------------
    def state_name(self) -> str:
        raise NotImplementedError

    def protocol_type(self) -> str:
        return self.group_type

    def is_empty(self) -> bool:
        return not self.members

    def empty_since_ms(self) -> int | None:
        return None

    def validate_offset_commit(self, member_id: str, instance_id: str | None,
                               generation_or_epoch: int, api_version: int,
                               transactional: bool = False) -> int:
        if not member_id and generation_or_epoch < 0:
            return E.none  # an admin / simple commit
        member = self.members.get(member_id)
        if member is None:
            return E.unknown_member_id
        if api_version < 9 and not transactional:
            return E.unsupported_version  # member epochs need OffsetCommit v9+
        if generation_or_epoch != member.member_epoch:
            return E.stale_member_epoch
        return E.none

    def is_subscribed_to(self, topic: str) -> bool:
        return topic in self.subscribed_topics()

    def tombstones(self) -> list[CoordinatorRecord]:
        """Records deleting the group, in Kafka's `createGroupTombstoneRecords` order:
        current assignments, target members, target metadata, member metadata, the
        kind's own records, the group metadata last."""
        types, g = self.records, self.group_id
        ids = sorted(self.members)
        return ([types.tombstone(types.current_assignment, g, m) for m in ids]
                + [types.tombstone(types.target_member, g, m)
                   for m in sorted(set(self.target) | set(ids))]
                + [types.tombstone(types.target_metadata, g)]
                + [types.tombstone(types.member_metadata, g, m) for m in ids]
                + self.own_tombstones()
                + [types.tombstone(types.group_metadata, g)])

    def own_tombstones(self) -> list[CoordinatorRecord]:
        """Tombstones of this kind's own records (none by default)."""
        return []

    def snapshot(self) -> tuple[Any, ...]:
        """Everything replay builds, for comparing a live group with a replayed one."""
        return (self.group_id, self.group_epoch, self.metadata_hash, self.assignment_epoch,
                dict(sorted(self.members.items())),
                {m: dict(a) for m, a in sorted(self.target.items())}) + self.own_snapshot()

    def own_snapshot(self) -> tuple[Any, ...]:
        """What replay builds beyond the shared state (nothing by default)."""
        return ()
