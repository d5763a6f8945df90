"""Helpers for consumer-group (KIP-848) stories on a GroupShard with a fake clock."""

from __future__ import annotations

import uuid
from typing import Any

from headwater.coordinator.runtime import Result
from headwater.group.consumer.group import ConsumerGroup
from headwater.group.consumer.operations import HeartbeatRequest
from headwater.group.modern.assignment import Assignment, freeze
from headwater.group.modern.operations import HeartbeatResponse
from tests.unit.group.context import GroupContext

UNSET: Any = object()


def tid(name: str) -> uuid.UUID:
    """Topic ids of GroupContext images are uuid5 of the name."""
    return uuid.uuid5(uuid.NAMESPACE_DNS, name)


def parts(**topics: list[int]) -> Assignment:
    return freeze({tid(t): ps for t, ps in topics.items()})


def named(assignment: Assignment | None) -> dict[str, list[int]] | None:
    """An assignment keyed by topic name (GroupContext topics only), for asserts."""
    if assignment is None:
        return None
    names = {tid(n): n for n in ("foo", "bar", "baz", "rx-1", "rx-2", "other", "__internal")}
    return {names.get(t, str(t)): sorted(ps) for t, ps in assignment.items()}


class Story(GroupContext):
    """GroupContext plus a `hb` that builds ConsumerGroupHeartbeat requests."""

    def hb(self, member: str, epoch: int, *, group: str = "g", topics: Any = UNSET,
           regex: str | None = None, owned: Any = UNSET, instance: str | None = None,
           assignor: str | None = None, rebalance_ms: int | None = None, version: int = 1,
           rack: str | None = None) -> HeartbeatResponse:
        joining = epoch == 0
        if topics is UNSET:
            topics = ("foo",) if joining and regex is None else None
        if owned is UNSET:
            owned_a: Assignment | None = freeze({}) if joining else None
        else:
            owned_a = None if owned is None else parts(**owned)
        if rebalance_ms is None:
            rebalance_ms = 30_000 if joining else -1
        req = HeartbeatRequest(group, member, epoch, instance_id=instance, rack_id=rack,
                               rebalance_timeout_ms=rebalance_ms,
                               subscribed_topic_names=None if topics is None else tuple(topics),
                               subscribed_topic_regex=regex, server_assignor=assignor,
                               owned=owned_a, api_version=version, client_id="client",
                               client_host="/127.0.0.1")
        return self.write(lambda s, now: s.consumer.heartbeat(req, now))

    def group(self, group_id: str = "g") -> ConsumerGroup:
        group = self.shard.groups[group_id]
        assert isinstance(group, ConsumerGroup)
        return group

    def put(self, *records) -> None:
        """Write records directly (to set up a state as Kafka's tests replay it)."""
        self.write(lambda s, now: Result(list(records)))

    def types(self) -> list[tuple[int, bool]]:
        """(type id, is tombstone) of the records the last operation wrote."""
        return [(r.type_id, r.value is None) for r in self.last_records]

    def assert_replay_matches(self) -> None:
        fresh = self.replayed()
        live = {gid: g.snapshot() for gid, g in self.shard.groups.items()
                if isinstance(g, ConsumerGroup)}
        again = {gid: g.snapshot() for gid, g in fresh.groups.items()
                 if isinstance(g, ConsumerGroup)}
        assert again == live
        assert {gid: g.group_type for gid, g in fresh.groups.items()} == \
            {gid: g.group_type for gid, g in self.shard.groups.items()}
