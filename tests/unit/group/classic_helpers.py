"""Drivers for classic-group unit tests: parked responders, joins, syncs, a restart."""

from __future__ import annotations

import struct
from typing import Any

from headwater.group import records as R
from headwater.group.classic.group import ClassicGroup
from headwater.group.classic.operations import JoinRequest, SyncRequest
from tests.unit.group.context import GroupContext


class Parked:
    """A responder standing in for a parked JoinGroup/SyncGroup request."""

    def __init__(self) -> None:
        self.responses: list[dict[str, Any]] = []

    def __call__(self, response: dict[str, Any]) -> None:
        self.responses.append(response)

    @property
    def done(self) -> bool:
        return bool(self.responses)

    @property
    def value(self) -> dict[str, Any]:
        assert len(self.responses) == 1, self.responses
        return self.responses[0]

    @property
    def error(self) -> int:
        return self.value["error_code"]


def _string(s: str) -> bytes:
    raw = s.encode()
    return struct.pack(">h", len(raw)) + raw


def subscription(*topics: str, version: int = 1) -> bytes:
    """ConsumerProtocolSubscription bytes (v0 or v1, no owned partitions)."""
    out = struct.pack(">hi", version, len(topics)) + b"".join(_string(t) for t in topics)
    out += struct.pack(">i", -1)  # user data: null
    if version >= 1:
        out += struct.pack(">i", 0)  # owned partitions: none
    return out


def assignment(*partitions: int, topic: str = "t") -> bytes:
    """ConsumerProtocolAssignment v0 bytes (opaque to the broker)."""
    return (struct.pack(">hi", 0, 1) + _string(topic) + struct.pack(">i", len(partitions))
            + b"".join(struct.pack(">i", p) for p in partitions) + struct.pack(">i", -1))


RANGE = [("range", subscription("t"))]


def join(ctx: GroupContext, member: str = "", *, group: str = "g", client: str = "client",
         instance: str | None = None, session: int = 10_000, rebalance: int = 30_000,
         protocols: list[tuple[str, bytes]] | None = None, protocol_type: str = "consumer",
         version: int = 9) -> Parked:
    parked = Parked()
    request = JoinRequest(group, member, instance, client, "/127.0.0.1", session, rebalance,
                          protocol_type, protocols if protocols is not None else RANGE,
                          version)
    ctx.write(lambda s, now: s.classic.join(request, parked, now))
    return parked


def sync(ctx: GroupContext, member: str, generation: int, *, group: str = "g",
         instance: str | None = None, assignments: dict[str, bytes] | None = None,
         protocol_type: str | None = None, protocol_name: str | None = None) -> Parked:
    parked = Parked()
    request = SyncRequest(group, member, instance, generation, protocol_type, protocol_name,
                          assignments or {})
    ctx.write(lambda s, now: s.classic.sync(request, parked, now))
    return parked


def heartbeat(ctx: GroupContext, member: str, generation: int, *, group: str = "g",
              instance: str | None = None) -> int:
    return ctx.write(lambda s, now: s.classic.heartbeat(group, member, instance, generation,
                                                        now))


def leave(ctx: GroupContext, *members: tuple[str, str | None], group: str = "g"
          ) -> tuple[int, list[int]]:
    return ctx.write(lambda s, now: s.classic.leave(group, list(members), now))


def group_of(ctx: GroupContext, group: str = "g") -> ClassicGroup:
    found = ctx.shard.groups[group]
    assert isinstance(found, ClassicGroup)
    return found


def new_member(ctx: GroupContext, client: str, **kwargs: Any) -> tuple[str, Parked]:
    """The v4+ two-step join of a new dynamic member: returns its id and parked join."""
    first = join(ctx, client=client, **kwargs)
    assert first.error == 79, first.responses  # MEMBER_ID_REQUIRED
    member_id = first.value["member_id"]
    return member_id, join(ctx, member_id, client=client, **kwargs)


def stable_group(ctx: GroupContext, *clients: str, instances: list[str | None] | None = None,
                 group: str = "g", **kwargs: Any) -> list[str]:
    """Join and sync `clients` into one generation (needs initial delay 0); the leader
    assigns partition i to member i. Returns the member ids in join order."""
    parked: list[Parked] = []
    for i, client in enumerate(clients):
        instance = instances[i] if instances else None
        if instance is None:
            _, p = new_member(ctx, client, group=group, **kwargs)
        else:
            p = join(ctx, client=client, instance=instance, group=group, **kwargs)
        parked.append(p)
    ctx.advance(0)
    ids = [p.value["member_id"] for p in parked]
    generation = parked[0].value["generation_id"]
    leader = parked[0].value["leader"]
    plan = {m: assignment(j) for j, m in enumerate(ids)}
    syncs = []
    for m in sorted(ids, key=lambda m: m == leader):  # the leader last
        instance = instances[ids.index(m)] if instances else None
        syncs.append(sync(ctx, m, generation, group=group, instance=instance,
                          assignments=plan if m == leader else None))
    assert all(s.error == 0 for s in syncs)
    return ids


def restarted(ctx: GroupContext, **config: str) -> GroupContext:
    """A new context whose shard was loaded from `ctx`'s log, at the same time."""
    fresh = GroupContext(**config)
    fresh.image = ctx.image
    fresh.now = ctx.now
    fresh.timer.tasks.clear()
    fresh.shard = fresh.factory(fresh.timer)
    for offset, record in enumerate(ctx.log):
        fresh.shard.replay(offset, -1, -1, record)
    fresh.log = list(ctx.log)
    fresh.shard.on_loaded(fresh.now)
    return fresh


def metadata_records(records: list) -> list:
    return [r for r in records if r.type_id == R.GROUP_METADATA]
