"""The consumer group page's data: state, members and each partition's committed offset,
end offset and lag, with the requests `headwater groups describe` makes
(OffsetFetch, ConsumerGroupDescribe or DescribeGroups, ListOffsets)."""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class GroupView:
    group_id: str
    state: str
    partitions: list[PartitionLag]
    members: list[Member]

    @property
    def total_lag(self) -> int:
        return sum(p.lag or 0 for p in self.partitions)


def describe(target: Target, group: str) -> GroupView:
    with target.client() as raw:
        committed = admin_groups._committed(raw, group)
        state, owners = admin_groups._assignment_owners(raw, group)
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
    return GroupView(group, state, rows, sorted(members.values(), key=lambda m: m.member_id))
