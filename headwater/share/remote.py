"""A share group's requests between brokers, as Kafka's brokers send them.

A share-partition leader lives with its partition's serving lease, on any broker; the
share coordinator and the group coordinator live where `ClusterNode.coordinator` says.
When they are on another broker:

* **State** (`RemotePersister`, Kafka's `DefaultStatePersister`): reads, initializations
  and writes of share-partition state go to the share coordinator in
  ReadShareGroupState (84), InitializeShareGroupState (83) and WriteShareGroupState (85)
  requests. The leader reads with its partition's leader epoch, which the coordinator
  records, so the writes of a previous leader (a broker that lost the lease) are fenced
  (FENCED_LEADER_EPOCH) and it drops its copy. While the coordinator moves (it cannot
  be reached, is loading, or is not the coordinator any more) a request is retried
  with backoff for up to `retry_s` (the lease time and a little more: a takeover), as
  Kafka's persister retries; then COORDINATOR_NOT_AVAILABLE goes to the client. (An
  acknowledgement refused is lost to the client: its records come back when their
  acquisition locks expire.)
* **Membership** (`RemoteMembership`): only members of the share group get records. The
  leader asks the group coordinator (ShareGroupDescribe, 77) for the group's members and
  keeps the answer for `MEMBERS_TTL_S`; an unknown member makes it ask again (at most
  every `MEMBERS_RETRY_S`).

What stays on the coordinators' broker: a member leaving releases its records at once
only on that broker's leaders (the others release them when the client closes its share
sessions, or when their acquisition locks expire, as for a client that vanished).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from kio.schema.errors import ErrorCode as E

from .records import ShareSnapshot, StateBatch, StateWrite

if TYPE_CHECKING:
    from .fetch_service import GroupAssignments
    from .manager import SharePersister

T = TypeVar("T")

INITIALIZE, READ, WRITE, DESCRIBE = 83, 84, 85, 77
MOVING = frozenset({int(E.coordinator_not_available), int(E.not_coordinator),
                    int(E.coordinator_load_in_progress)})
FIRST_BACKOFF_S, MAX_BACKOFF_S = 0.05, 1.0
MEMBERS_TTL_S = 5.0
MEMBERS_RETRY_S = 0.2


class CoordinatorChannel(Protocol):
    """Requests to the broker coordinating a group (shared/node.py's ClusterNode)."""

    def remote(self, group_id: str) -> bool:
        """The group's coordinators are on another broker (or on none live)."""
        ...

    async def ask(self, group_id: str, api_key: int, version: int,
                  body: dict[str, Any]) -> Any | None:
        """The coordinator's decoded response; None if it could not be reached."""
        ...


def _partition_answer(response: Any, topic_id: uuid.UUID, partition: int) -> Any | None:
    for result in getattr(response, "results", ()):
        if result.topic_id != topic_id:
            continue
        for p in result.partitions:
            if p.partition == partition:
                return p
    return None


class RemotePersister:
    """`SharePersister` (share/manager.py): the share coordinator here (`local`), or on
    the broker the channel reaches."""

    def __init__(self, local: SharePersister, channel: CoordinatorChannel,
                 retry_s: float = 15.0) -> None:
        self._local = local
        self._channel = channel
        self._retry_s = retry_s

    async def _retrying(self, attempt: Callable[[], Awaitable[tuple[int, T]]]
                        ) -> tuple[int, T]:
        """`attempt()` again, with backoff, while the coordinator moves."""
        loop = asyncio.get_running_loop()
        deadline, backoff = loop.time() + self._retry_s, FIRST_BACKOFF_S
        while True:
            code, value = await attempt()
            if code not in MOVING or loop.time() + backoff > deadline:
                return code, value
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)

    async def _ask(self, api_key: int, version: int, group_id: str, topic_id: uuid.UUID,
                   partition: int, fields: dict[str, Any]) -> tuple[int, Any]:
        """(error code, the partition's answer) of one request to the coordinator."""
        body = {"group_id": group_id, "topics": [
            {"topic_id": topic_id, "partitions": [{"partition": partition, **fields}]}]}
        response = await self._channel.ask(group_id, api_key, version, body)
        answer = None if response is None else _partition_answer(response, topic_id,
                                                                   partition)
        if answer is None:
            return E.coordinator_not_available, None
        return int(answer.error_code), answer

    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         state_epoch: int, start_offset: int) -> int:
        async def attempt() -> tuple[int, None]:
            if not self._channel.remote(group_id):
                return await self._local.initialize(group_id, topic_id, partition,
                                                    state_epoch, start_offset), None
            code, _ = await self._ask(INITIALIZE, 0, group_id, topic_id, partition, {
                "state_epoch": state_epoch, "start_offset": start_offset})
            return code, None
        return (await self._retrying(attempt))[0]

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int,
                   leader_epoch: int) -> tuple[int, ShareSnapshot | None]:
        async def attempt() -> tuple[int, ShareSnapshot | None]:
            if not self._channel.remote(group_id):
                return await self._local.read(group_id, topic_id, partition, leader_epoch)
            code, answer = await self._ask(READ, 0, group_id, topic_id, partition,
                                           {"leader_epoch": leader_epoch})
            if code or answer is None:
                return code, None
            return 0, ShareSnapshot(
                snapshot_epoch=0, state_epoch=int(answer.state_epoch),
                leader_epoch=leader_epoch, start_offset=int(answer.start_offset),
                state_batches=tuple(StateBatch(int(b.first_offset), int(b.last_offset),
                                               int(b.delivery_state), int(b.delivery_count))
                                    for b in answer.state_batches))
        return await self._retrying(attempt)

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int,
                    write: StateWrite, leader_epoch: int) -> int:
        async def attempt() -> tuple[int, None]:
            if not self._channel.remote(group_id):
                return await self._local.write(group_id, topic_id, partition, write,
                                               leader_epoch), None
            code, _ = await self._ask(WRITE, 1, group_id, topic_id, partition, {
                "state_epoch": write.state_epoch, "leader_epoch": leader_epoch,
                "start_offset": write.start_offset,
                "delivery_complete_count": write.delivery_complete_count,
                "state_batches": [{"first_offset": b.first_offset,
                                   "last_offset": b.last_offset,
                                   "delivery_state": b.delivery_state,
                                   "delivery_count": b.delivery_count}
                                  for b in write.state_batches]})
            return code, None
        return (await self._retrying(attempt))[0]

    def archiving(self, state_partition: int) -> list[tuple[str, uuid.UUID, int]]:
        return self._local.archiving(state_partition)


class RemoteMembership:
    """`ShareAssignments` (share/fetch_service.py): the local group coordinator's answer,
    or the members the remote one listed."""

    def __init__(self, local: GroupAssignments, channel: CoordinatorChannel,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._local = local
        self._channel = channel
        self._clock = clock
        self._members: dict[str, tuple[float, frozenset[str]]] = {}

    async def is_share_member(self, group_id: str, member_id: str) -> bool:
        if not self._channel.remote(group_id):
            return self._local.share_assignment(group_id, member_id) is not None
        now = self._clock()
        asked, members = self._members.get(group_id, (float("-inf"), frozenset()))
        if member_id in members and now - asked < MEMBERS_TTL_S:
            return True
        if now - asked < MEMBERS_RETRY_S:
            return member_id in members
        listed = await self._describe(group_id)
        if listed is None:
            return False
        self._members[group_id] = (self._clock(), listed)
        if len(self._members) > 10_000:  # groups long gone
            self._members = {g: v for g, v in self._members.items()
                             if now - v[0] < MEMBERS_TTL_S}
        return member_id in listed

    async def _describe(self, group_id: str) -> frozenset[str] | None:
        response = await self._channel.ask(group_id, DESCRIBE, 1, {
            "group_ids": [group_id], "include_authorized_operations": False})
        for group in getattr(response, "groups", ()):
            if group.group_id == group_id and not group.error_code:
                return frozenset(m.member_id for m in group.members)
        return None
