"""share/remote.py's rules, on a channel that records what it was asked: the local
coordinator when it is here, the wire requests when it is not, retries while the
coordinator moves, and the membership answers kept for a while."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

from headwater.share import remote
from headwater.share.records import StateBatch, StateWrite

TID = uuid.uuid4()


class Channel:
    """The coordinators on another broker (or here): answers queued per API key."""

    def __init__(self, here: bool = False) -> None:
        self.here = here
        self.asked: list[tuple[int, dict[str, Any]]] = []
        self.answers: dict[int, list[Any]] = {}

    def remote(self, group_id: str) -> bool:
        return not self.here

    async def ask(self, group_id: str, api_key: int, version: int,
                  body: dict[str, Any]) -> Any | None:
        self.asked.append((api_key, body))
        queued = self.answers.get(api_key) or [None]
        return queued.pop(0) if len(queued) > 1 else queued[0]


def partition_answer(code: int, **fields: Any) -> Any:
    return SimpleNamespace(results=[SimpleNamespace(topic_id=TID, partitions=[
        SimpleNamespace(partition=0, error_code=code, **fields)])])


class Local:
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def initialize(self, *args: Any) -> int:
        self.calls.append("initialize")
        return 0

    async def read(self, *args: Any) -> tuple[int, None]:
        self.calls.append("read")
        return 0, None

    async def write(self, *args: Any) -> int:
        self.calls.append("write")
        return 0

    def archiving(self, state_partition: int) -> list[tuple[str, uuid.UUID, int]]:
        return []

    def share_assignment(self, group_id: str, member_id: str) -> dict | None:
        return {} if member_id == "here" else None


WRITE = StateWrite(3, 7, 10, 2, (StateBatch(10, 12, 2, 1),))


def test_the_local_coordinator_is_called_when_it_is_here() -> None:
    local, channel = Local(), Channel(here=True)
    persister = remote.RemotePersister(local, channel)
    assert asyncio.run(persister.write("g", TID, 0, WRITE, 7)) == 0
    assert asyncio.run(persister.read("g", TID, 0, 7)) == (0, None)
    assert local.calls == ["write", "read"] and channel.asked == []


def test_a_remote_read_and_write_speak_kafkas_share_state_apis() -> None:
    channel = Channel()
    channel.answers[remote.READ] = [partition_answer(
        0, state_epoch=3, start_offset=10,
        state_batches=[SimpleNamespace(first_offset=10, last_offset=12, delivery_state=2,
                                       delivery_count=1)])]
    channel.answers[remote.WRITE] = [partition_answer(0)]
    persister = remote.RemotePersister(Local(), channel)
    code, snapshot = asyncio.run(persister.read("g", TID, 0, 7))
    assert code == 0 and snapshot is not None
    assert (snapshot.state_epoch, snapshot.leader_epoch, snapshot.start_offset) == (3, 7, 10)
    assert snapshot.state_batches == (StateBatch(10, 12, 2, 1),)
    assert asyncio.run(persister.write("g", TID, 0, WRITE, 7)) == 0
    (key, body), = [a for a in channel.asked if a[0] == remote.WRITE]
    sent = body["topics"][0]["partitions"][0]
    assert (sent["state_epoch"], sent["leader_epoch"], sent["start_offset"],
            sent["delivery_complete_count"]) == (3, 7, 10, 2)
    assert sent["state_batches"] == [{"first_offset": 10, "last_offset": 12,
                                      "delivery_state": 2, "delivery_count": 1}]


def test_a_moving_coordinator_is_retried_and_a_fence_is_not() -> None:
    channel = Channel()
    channel.answers[remote.WRITE] = [None, partition_answer(16), partition_answer(14),
                                     partition_answer(0)]
    persister = remote.RemotePersister(Local(), channel, retry_s=10)
    assert asyncio.run(persister.write("g", TID, 0, WRITE, 7)) == 0
    assert len(channel.asked) == 4  # unreachable, NOT_COORDINATOR, loading, done
    fenced = Channel()
    fenced.answers[remote.WRITE] = [partition_answer(74)]  # FENCED_LEADER_EPOCH
    assert asyncio.run(remote.RemotePersister(Local(), fenced).write(
        "g", TID, 0, WRITE, 7)) == 74
    assert len(fenced.asked) == 1


def test_retries_stop_at_their_deadline() -> None:
    channel = Channel()  # never reachable
    persister = remote.RemotePersister(Local(), channel, retry_s=0.3)
    assert asyncio.run(persister.write("g", TID, 0, WRITE, 7)) == 15  # NOT_AVAILABLE
    assert 2 <= len(channel.asked) <= 6


def test_membership_is_asked_once_and_kept() -> None:
    now = [100.0]
    channel = Channel()
    group = SimpleNamespace(group_id="g", error_code=0,
                            members=[SimpleNamespace(member_id="m1")])
    channel.answers[remote.DESCRIBE] = [SimpleNamespace(groups=[group])]
    members = remote.RemoteMembership(Local(), channel, clock=lambda: now[0])
    assert asyncio.run(members.is_share_member("g", "m1"))
    assert asyncio.run(members.is_share_member("g", "m1"))
    assert len(channel.asked) == 1  # kept
    assert not asyncio.run(members.is_share_member("g", "m2"))  # asked again at most
    now[0] += remote.MEMBERS_RETRY_S + 0.01                   # every MEMBERS_RETRY_S
    assert not asyncio.run(members.is_share_member("g", "m2"))
    assert len(channel.asked) == 2
    now[0] += remote.MEMBERS_TTL_S  # an old answer is asked again
    assert asyncio.run(members.is_share_member("g", "m1"))
    assert len(channel.asked) == 3
    here = remote.RemoteMembership(Local(), Channel(here=True))
    assert asyncio.run(here.is_share_member("g", "here"))
