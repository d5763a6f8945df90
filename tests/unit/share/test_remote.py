"""share/remote.py's rules, on a channel that records what it was asked: the local
coordinator when it is here, the wire requests when it is not, retries while the
coordinator moves, and the membership answers kept for a while."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

from headwater.share import remote
from headwater.share.coordinator import coordinator_key, kafka_uuid
from headwater.share.coordinator_shard import StateSummary
from headwater.share.records import StateBatch, StateWrite

TID = uuid.uuid4()


class Channel:
    """The coordinators on another broker (or here): answers queued per API key; every
    question recorded with the key and key type it was routed by."""

    def __init__(self, here: bool = False, local: frozenset[tuple[str, int]] = frozenset()
                 ) -> None:
        self.here = here
        self.local = local  # (key, key type) coordinated here when not `here`
        self.asked: list[tuple[int, dict[str, Any]]] = []
        self.routed: list[tuple[str, int, int]] = []  # (key, key type, api key)
        self.checked: list[tuple[str, int]] = []  # remote(key, key type)
        self.answers: dict[int, list[Any]] = {}

    def remote(self, key: str, key_type: int) -> bool:
        self.checked.append((key, key_type))
        return not self.here and (key, key_type) not in self.local

    async def ask(self, key: str, key_type: int, api_key: int, version: int,
                  body: dict[str, Any]) -> Any | None:
        self.asked.append((api_key, body))
        self.routed.append((key, key_type, api_key))
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

    async def delete(self, *args: Any) -> int:
        self.calls.append("delete")
        return 0

    async def read_summary(self, *args: Any) -> StateSummary:
        self.calls.append("read_summary")
        return StateSummary(0, 1, 5, 0, 2)

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


def test_a_member_that_joined_after_the_last_listing_is_known_at_its_first_fetch() -> None:
    """Its fetch comes within MEMBERS_RETRY_S of the listing that did not have it: it
    waits for the interval's end and asks again, rather than answer "not a member"
    (which would leave the share-partition unloaded, its start not set yet)."""
    def listing(*ids: str) -> SimpleNamespace:
        return SimpleNamespace(groups=[SimpleNamespace(
            group_id="g", error_code=0, members=[SimpleNamespace(member_id=m) for m in ids])])
    channel = Channel()
    channel.answers[remote.DESCRIBE] = [listing("m1"), listing("m1", "m2")]
    members = remote.RemoteMembership(Local(), channel)

    async def story() -> None:
        assert await members.is_share_member("g", "m1")
        assert await members.is_share_member("g", "m2")  # joined since: asked again
    asyncio.run(story())
    assert len(channel.asked) == 2


# ---- routing: which coordinator each request goes to, by which key and key type -------
def test_share_state_is_routed_by_the_share_key_with_key_type_2() -> None:
    channel = Channel()
    channel.answers[remote.READ] = [partition_answer(0, state_epoch=1, start_offset=0,
                                                     state_batches=[])]
    for api in (remote.INITIALIZE, remote.WRITE, remote.DELETE):
        channel.answers[api] = [partition_answer(0)]
    channel.answers[remote.READ_SUMMARY] = [partition_answer(
        0, state_epoch=4, start_offset=9, delivery_complete_count=2, leader_epoch=3)]
    persister = remote.RemotePersister(Local(), channel)

    async def every_operation() -> StateSummary:
        assert await persister.initialize("g:x", TID, 0, 0, 0) == 0
        assert (await persister.read("g:x", TID, 0, 7))[0] == 0
        assert await persister.write("g:x", TID, 0, WRITE, 7) == 0
        assert await persister.delete("g:x", TID, 0) == 0
        return await persister.read_summary("g:x", TID, 0)

    assert asyncio.run(every_operation()) == StateSummary(0, 4, 9, 2, 3)
    share_key = coordinator_key("g:x", TID, 0)  # g:x:<topic id in Kafka's base64>:0
    assert share_key == f"g:x:{kafka_uuid(TID)}:0"
    assert channel.routed == [(share_key, 2, api) for api in (
        remote.INITIALIZE, remote.READ, remote.WRITE, remote.DELETE, remote.READ_SUMMARY)]
    assert set(channel.checked) == {(share_key, 2)}
    assert all(body["group_id"] == "g:x" for _api, body in channel.asked)


def test_each_share_partition_goes_to_its_own_coordinator() -> None:
    """Two share-partitions of one group: one coordinated here (the local coordinator is
    called), the other elsewhere (a request by its own share key); the group's own
    coordinator (key type 0) plays no part."""
    other = uuid.uuid4()
    here = coordinator_key("g", TID, 0)
    channel = Channel(local=frozenset({(here, 2), ("g", 0)}))
    answer = SimpleNamespace(results=[SimpleNamespace(
        topic_id=other, partitions=[SimpleNamespace(partition=1, error_code=0)])])
    channel.answers[remote.WRITE] = [answer]
    channel.answers[remote.DELETE] = [answer]
    local = Local()
    persister = remote.RemotePersister(local, channel)

    async def both() -> None:
        assert await persister.write("g", TID, 0, WRITE, 7) == 0
        assert await persister.write("g", other, 1, WRITE, 7) == 0
        assert await persister.delete("g", TID, 0) == 0
        assert await persister.delete("g", other, 1) == 0
        assert (await persister.read_summary("g", TID, 0)).state_epoch == 1

    asyncio.run(both())
    assert local.calls == ["write", "delete", "read_summary"]
    there = coordinator_key("g", other, 1)
    assert channel.routed == [(there, 2, remote.WRITE), (there, 2, remote.DELETE)]
    assert ("g", 0) not in channel.checked


def test_the_admins_state_calls_retry_while_the_coordinator_moves() -> None:
    channel = Channel()
    channel.answers[remote.READ_SUMMARY] = [None, partition_answer(14), partition_answer(
        0, state_epoch=2, start_offset=5, delivery_complete_count=0, leader_epoch=1)]
    channel.answers[remote.DELETE] = [partition_answer(16), partition_answer(0)]
    persister = remote.RemotePersister(Local(), channel, retry_s=10)
    assert asyncio.run(persister.read_summary("g", TID, 0)) == StateSummary(0, 2, 5, 0, 1)
    assert asyncio.run(persister.delete("g", TID, 0)) == 0
    assert [api for api, _ in channel.asked] == [remote.READ_SUMMARY] * 3 + [remote.DELETE] * 2
    gone = remote.RemotePersister(Local(), Channel(), retry_s=0.2)  # never reachable
    assert asyncio.run(gone.read_summary("g", TID, 0)).error_code == 15
    assert asyncio.run(gone.delete("g", TID, 0)) == 15


def test_membership_is_routed_by_the_group_id_with_key_type_0() -> None:
    channel = Channel(local=frozenset({(coordinator_key("g", TID, 0), 2)}))
    group = SimpleNamespace(group_id="g", error_code=0,
                            members=[SimpleNamespace(member_id="m1")])
    channel.answers[remote.DESCRIBE] = [SimpleNamespace(groups=[group])]
    members = remote.RemoteMembership(Local(), channel)
    assert asyncio.run(members.is_share_member("g", "m1"))
    assert channel.routed == [("g", 0, remote.DESCRIBE)]
    assert channel.checked == [("g", 0)]
    local = remote.RemoteMembership(Local(), Channel(local=frozenset({("g", 0)})))
    assert asyncio.run(local.is_share_member("g", "here"))
