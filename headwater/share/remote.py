"""A share group's requests between brokers, as Kafka's brokers send them.

A share-partition leader lives with its partition's serving lease, on any broker. Its
two coordinators live where `ClusterNode.coordinator(key, key_type)` says, each found
by its own key, as Kafka's brokers find them: the group coordinator by the group id
(key type 0, the `__consumer_offsets` partition of the group), the share coordinator by
the share key `groupId:topicId:partition` (key type 2, `coordinator_key`: the
`__share_group_state` partition of that one share-partition). The two are usually on
different brokers, and the share-partitions of one group on several. When one is on
another broker:

* **State** (`RemotePersister`, Kafka's `DefaultStatePersister`): reads, initializations
  and writes of share-partition state go to the share-partition's share coordinator in
  ReadShareGroupState (84), InitializeShareGroupState (83) and WriteShareGroupState (85)
  requests, one share-partition per request (every caller asks about one). The leader
  reads with its partition's leader epoch, which the coordinator records, so the writes
  of a previous leader (a broker that lost the lease) are fenced (FENCED_LEADER_EPOCH)
  and it drops its copy. While the coordinator moves (it cannot be reached, is loading,
  or is not the coordinator any more) a request is retried with backoff for up to
  `retry_s` (the lease time and a little more: a takeover), as Kafka's persister
  retries; then COORDINATOR_NOT_AVAILABLE goes to the client. (An acknowledgement
  refused is lost to the client: its records come back when their acquisition locks
  expire.)
* **Administration** (the same `RemotePersister`, as share/admin.py's `ShareState`): the
  group coordinator's side of DescribeShareGroupOffsets, AlterShareGroupOffsets,
  DeleteShareGroupOffsets and DeleteGroups (and the deletions it finishes after a
  crash) reads, initializes and deletes share-partition state at each share-partition's
  share coordinator: ReadShareGroupStateSummary (87), InitializeShareGroupState (83),
  DeleteShareGroupState (86), with the same retries.
* **Membership** (`RemoteMembership`): only members of the share group get records. The
  leader asks the group coordinator (ShareGroupDescribe, 77) for the group's members and
  keeps the answer for `MEMBERS_TTL_S`; an unknown member makes it ask again (at most
  every `MEMBERS_RETRY_S`: an unknown member's fetch within that interval of the last
  answer waits for its end and asks again, so a member that has just joined is known).

A key coordinated here is served by the local coordinator, with the same retries (it
may be loading, or have just moved). What stays on the group coordinator's broker: a
member leaving releases its records at once only on that broker's leaders (the others
release them when the client closes its share sessions, or when their acquisition
locks expire, as for a client that vanished).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from kio.schema.errors import ErrorCode as E

from .admin import ShareState
from .coordinator import SHARE_KEY_TYPE, coordinator_key
from .coordinator_shard import StateSummary
from .manager import SharePersister
from .records import ShareSnapshot, StateBatch, StateWrite

if TYPE_CHECKING:
    from .fetch_service import GroupAssignments

T = TypeVar("T")

INITIALIZE, READ, WRITE, DELETE, READ_SUMMARY, DESCRIBE = 83, 84, 85, 86, 87, 77
GROUP_KEY_TYPE = 0  # FindCoordinator's key types (SHARE_KEY_TYPE: 2)
MOVING = frozenset({int(E.coordinator_not_available), int(E.not_coordinator),
                    int(E.coordinator_load_in_progress)})
FIRST_BACKOFF_S, MAX_BACKOFF_S = 0.05, 1.0
MEMBERS_TTL_S = 5.0
MEMBERS_RETRY_S = 0.2


class CoordinatorChannel(Protocol):
    """Requests to the broker coordinating a key (shared/node.py's ClusterNode): a group
    id (key type 0), a transactional id (1) or a share key (2, `coordinator_key`)."""

    def remote(self, key: str, key_type: int) -> bool:
        """The key's coordinator is on another broker (or on none live)."""
        ...

    async def ask(self, key: str, key_type: int, api_key: int, version: int,
                  body: dict[str, Any]) -> Any | None:
        """The key's coordinator's decoded response; None if it could not be reached."""
        ...


class LocalShareState(SharePersister, ShareState, Protocol):
    """The share coordinator of this broker (share/coordinator.py's ShareCoordinator):
    what the leaders (`SharePersister`) and the admin (`ShareState`) call."""


def _partition_answer(response: Any, topic_id: uuid.UUID, partition: int) -> Any | None:
    for result in getattr(response, "results", ()):
        if result.topic_id != topic_id:
            continue
        for p in result.partitions:
            if p.partition == partition:
                return p
    return None


class RemotePersister:
    """`SharePersister` (share/manager.py) and `ShareState` (share/admin.py): each
    share-partition's share coordinator, here (`local`) or on the broker the channel
    reaches by the share key."""

    def __init__(self, local: LocalShareState, channel: CoordinatorChannel,
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

    def _remote(self, group_id: str, topic_id: uuid.UUID, partition: int) -> bool:
        return self._channel.remote(coordinator_key(group_id, topic_id, partition),
                                    SHARE_KEY_TYPE)

    async def _ask(self, api_key: int, version: int, group_id: str, topic_id: uuid.UUID,
                   partition: int, fields: dict[str, Any]) -> tuple[int, Any]:
        """(error code, the partition's answer) of one request to the share-partition's
        coordinator."""
        body = {"group_id": group_id, "topics": [
            {"topic_id": topic_id, "partitions": [{"partition": partition, **fields}]}]}
        response = await self._channel.ask(coordinator_key(group_id, topic_id, partition),
                                           SHARE_KEY_TYPE, api_key, version, body)
        answer = None if response is None else _partition_answer(response, topic_id,
                                                                   partition)
        if answer is None:
            return E.coordinator_not_available, None
        return int(answer.error_code), answer

    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         state_epoch: int, start_offset: int) -> int:
        async def attempt() -> tuple[int, None]:
            if not self._remote(group_id, topic_id, partition):
                return await self._local.initialize(group_id, topic_id, partition,
                                                    state_epoch, start_offset), None
            code, _ = await self._ask(INITIALIZE, 0, group_id, topic_id, partition, {
                "state_epoch": state_epoch, "start_offset": start_offset})
            return code, None
        return (await self._retrying(attempt))[0]

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int,
                   leader_epoch: int) -> tuple[int, ShareSnapshot | None]:
        async def attempt() -> tuple[int, ShareSnapshot | None]:
            if not self._remote(group_id, topic_id, partition):
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
            if not self._remote(group_id, topic_id, partition):
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

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        async def attempt() -> tuple[int, None]:
            if not self._remote(group_id, topic_id, partition):
                return await self._local.delete(group_id, topic_id, partition), None
            code, _ = await self._ask(DELETE, 0, group_id, topic_id, partition, {})
            return code, None
        return (await self._retrying(attempt))[0]

    async def read_summary(self, group_id: str, topic_id: uuid.UUID, partition: int
                           ) -> StateSummary:
        async def attempt() -> tuple[int, StateSummary]:
            if not self._remote(group_id, topic_id, partition):
                local = await self._local.read_summary(group_id, topic_id, partition)
                return local.error_code, local
            code, answer = await self._ask(READ_SUMMARY, 1, group_id, topic_id, partition,
                                           {"leader_epoch": -1})
            if code or answer is None:
                return code, StateSummary(code)
            return 0, StateSummary(0, int(answer.state_epoch), int(answer.start_offset),
                                   int(answer.delivery_complete_count),
                                   int(answer.leader_epoch))
        return (await self._retrying(attempt))[1]

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
        if not self._channel.remote(group_id, GROUP_KEY_TYPE):
            return self._local.share_assignment(group_id, member_id) is not None
        now = self._clock()
        asked, members = self._members.get(group_id, (float("-inf"), frozenset()))
        if member_id in members and now - asked < MEMBERS_TTL_S:
            return True
        if now - asked < MEMBERS_RETRY_S:
            # Listed a moment ago without it: maybe it joined since (its first fetch
            # follows its first heartbeat at once, and must load the share-partition
            # as on one node). Ask again once the retry interval is over, unless
            # another fetch has by then.
            await asyncio.sleep(MEMBERS_RETRY_S - (now - asked))
            now = self._clock()
            asked, members = self._members.get(group_id, (float("-inf"), frozenset()))
            if member_id in members or now - asked < MEMBERS_RETRY_S:
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
        response = await self._channel.ask(group_id, GROUP_KEY_TYPE, DESCRIBE, 1, {
            "group_ids": [group_id], "include_authorized_operations": False})
        for group in getattr(response, "groups", ()):
            if group.group_id == group_id and not group.error_code:
                return frozenset(m.member_id for m in group.members)
        return None
