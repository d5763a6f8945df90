"""The group page's data (consumer and streams groups): state, members and each
partition's committed offset, end offset and lag, with the requests `headwater groups
describe` makes (OffsetFetch, ConsumerGroupDescribe, StreamsGroupDescribe or
DescribeGroups, ListOffsets); a streams group's members also with their tasks."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..admin import groups as admin_groups
from .connection import Target


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int | None
    end: int | None
    lag: int | None
    member: str | None
    host: str | None
    client_id: str | None


@dataclass(frozen=True)
class Member:
    member_id: str
    host: str
    client_id: str
    partitions: list[str]
    #: A streams group member's tasks, by role: {"active": ["0_0", "0_1"], ...}
    #: (Kafka's task ids: subtopology, underscore, partition).
    tasks: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class GroupView:
    group_id: str
    state: str
    partitions: list[PartitionLag]
    members: list[Member]
    #: A streams group (its members hold tasks).
    streams: bool = False

    @property
    def total_lag(self) -> int:
        return sum(p.lag or 0 for p in self.partitions)


def describe(target: Target, group: str) -> GroupView:
    with target.client() as raw:
        committed = admin_groups._committed(raw, group)
        found = admin_groups._assignment(raw, group)
        owners = found.owners
        topics = sorted({t for t, _ in committed} | {t for t, _ in owners})
        parts = admin_groups._partitions(raw, topics) if topics else {}
        ends = admin_groups._list_offsets(raw, parts, -1)
    rows = []
    members: dict[str, Member] = {}
    for topic, partition in sorted(set(committed) | set(owners)):
        current = committed.get((topic, partition))
        end = ends.get((topic, partition))
        lag = end - current if current is not None and end is not None else None
        member, host, client_id = owners.get((topic, partition), (None, None, None))
        rows.append(PartitionLag(topic, partition, current, end, lag, member, host, client_id))
        if member is not None:
            members.setdefault(member, Member(member, host or "", client_id or "", []))
            members[member].partitions.append(f"{topic}-{partition}")
    for member_id, ((_, host, client_id), roles) in found.tasks.items():  # every member
        held = members.setdefault(member_id, Member(member_id, host, client_id, []))
        held.tasks.update({role: [f"{sid}_{p}" for sid, parts in by_sub.items() for p in parts]
                           for role, by_sub in roles.items()})
    return GroupView(group, found.state, rows,
                     sorted(members.values(), key=lambda m: m.member_id),
                     streams=bool(found.tasks))
