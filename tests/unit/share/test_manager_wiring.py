"""SharePartitionManager built with fakes of what it is given: the persister (share
coordinator), the group membership (share group configs) and the partition waiters."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from headwater.share.manager import SharePartitionManager
from headwater.storage.waiters import PartitionWaiters

TID = uuid.uuid4()


class FakeLog:
    def __init__(self, start: int = 3, end: int = 10) -> None:
        self.on_append: list[Callable[[], None]] = []
        self.log_start_offset, self.log_end_offset = start, end
        self.leader_epoch = 0

    def offset_for_timestamp(self, ts: int) -> tuple[int, int] | None:
        return None

    def subscribe_append(self, callback: Callable[[], None]) -> Callable[[], None]:
        self.on_append.append(callback)
        return lambda: self.on_append.remove(callback)

    def append(self) -> None:
        for callback in self.on_append:
            callback()


class FakeBroker:
    def __init__(self, plog: FakeLog) -> None:
        self.plog = plog
        self.config = SimpleNamespace(get=lambda key: None)
        self.image = SimpleNamespace(
            topic_by_id=lambda tid: SimpleNamespace(name="t") if tid == TID else None)

    def partition(self, topic: str, partition: int) -> FakeLog | None:
        return self.plog if (topic, partition) == ("t", 0) else None

    async def ready(self, topic: str, partition: int) -> FakeLog | None:
        return self.partition(topic, partition)

    def absent_error(self, topic: str, partition: int) -> int:
        return 3  # UNKNOWN_TOPIC_OR_PARTITION

    def now_ms(self) -> int:
        return 1_000_000


class FakePersister:
    def __init__(self) -> None:
        self.initialized: list[tuple[Any, ...]] = []
        self.archiving_keys: list[tuple[str, uuid.UUID, int]] = []

    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         state_epoch: int, start_offset: int) -> int:
        self.initialized.append((group_id, topic_id, partition, state_epoch, start_offset))
        return 0

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int,
                   leader_epoch: int) -> tuple[int, None]:
        return 0, None

    async def write(self, *args: Any) -> int:
        return 0

    def archiving(self, state_partition: int) -> list[tuple[str, uuid.UUID, int]]:
        return self.archiving_keys


class FakeMembership:
    def __init__(self, configs: dict[str, dict[str, str]]) -> None:
        self.configs = configs

    def share_group_config(self, group_id: str) -> dict[str, str]:
        return self.configs.get(group_id, {})


def manager(configs: dict[str, dict[str, str]] | None = None
            ) -> tuple[SharePartitionManager, FakeLog, FakePersister, PartitionWaiters]:
    plog, persister, waiters = FakeLog(), FakePersister(), PartitionWaiters()
    broker = FakeBroker(plog)
    unused: Any = None  # no dead letters in these tests
    m = SharePartitionManager(persister, FakeMembership(configs or {}), waiters, unused,
                              image=lambda: broker.image, partitions=broker,
                              clock=broker.now_ms)
    return m, plog, persister, waiters


def test_a_new_share_partition_starts_where_the_groups_config_says() -> None:
    m, _plog, persister, _w = manager({
        "early": {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "7"},
        "late": {}})

    async def scenario() -> None:
        await m.leader(("early", TID, 0))
        await m.leader(("late", TID, 0))

    asyncio.run(scenario())
    assert persister.initialized == [("early", TID, 0, 0, 3), ("late", TID, 0, 0, 10)]
    assert m.lock_duration_ms("early") == 7
    assert sorted(key[0] for key, _topic, _part in m.loaded()) == ["early", "late"]


def test_recovery_loads_the_share_partitions_the_persister_names() -> None:
    m, _plog, persister, _w = manager()
    persister.archiving_keys = [("g", TID, 0)]

    async def scenario() -> None:
        m.recover_dead_letters(0)
        for _ in range(10):
            await asyncio.sleep(0)

    asyncio.run(scenario())
    assert [key for key, _topic, _part in m.loaded()] == [("g", TID, 0)]


def test_recovery_asks_the_leader_of_a_partition_served_elsewhere() -> None:
    """A cluster: the share coordinator here holds ARCHIVING records of a share-partition
    whose partition another broker leads; that leader is asked to load it."""
    plog, persister, waiters = FakeLog(), FakePersister(), PartitionWaiters()
    broker = FakeBroker(plog)
    broker.partition = lambda topic, partition: None  # type: ignore[method-assign]
    broker.absent_error = lambda topic, partition: 6  # type: ignore[method-assign]
    asked: list[tuple[tuple[str, uuid.UUID, int], str]] = []

    async def remote(key: tuple[str, uuid.UUID, int], topic: str) -> None:
        asked.append((key, topic))

    unused: Any = None
    m = SharePartitionManager(persister, FakeMembership({}), waiters, unused,
                              image=lambda: broker.image, partitions=broker,
                              clock=broker.now_ms, remote_recovery=remote)
    persister.archiving_keys = [("g", TID, 0)]

    async def scenario() -> None:
        m.recover_dead_letters(0)
        for _ in range(10):
            await asyncio.sleep(0)

    asyncio.run(scenario())
    assert asked == [(("g", TID, 0), "t")]
    assert list(m.loaded()) == []


def test_a_share_fetch_waiting_wakes_on_append_and_on_wake() -> None:
    m, plog, _p, waiters = manager()

    async def waited(trigger: Callable[[], None]) -> float:
        asyncio.get_running_loop().call_later(0.05, trigger)
        start = time.monotonic()
        await m.wait([(TID, 0)], 10)
        return time.monotonic() - start

    assert asyncio.run(waited(plog.append)) < 5
    assert asyncio.run(waited(lambda: m.wake(TID, 0))) < 5
    assert waiters.waiting(plog) == 0
    assert len(plog.on_append) == 1  # the one hook of the shared waiters


def test_waiting_on_a_deleted_topic_sleeps_out_its_timeout() -> None:
    m, _plog, _p, _w = manager()

    async def scenario() -> float:
        start = time.monotonic()
        await m.wait([(uuid.uuid4(), 0)], 0.1)
        return time.monotonic() - start

    assert asyncio.run(scenario()) >= 0.09


def test_a_state_write_that_raises_is_undone_and_the_state_read_again() -> None:
    """The coordinator could not be reached for a reject's write (ARCHIVING): the write
    may or may not have landed. The change is undone and the leader dropped, so no dead
    letter is written for an ARCHIVING the coordinator may never have had, and the next
    use reads what was persisted. Left in memory, the next write dead-lettered it while
    the partition's next leader delivered the record again (a 2,000-second campaign)."""
    from headwater.share import SharePartitionConfig
    from headwater.share.outcomes import AcknowledgementBatch

    m, _plog, persister, _w = manager({"g": {"share.auto.offset.reset": "earliest"}})
    key = ("g", TID, 0)

    async def unreachable(*_args: Any) -> int:
        raise ConnectionResetError("the share coordinator's broker reset the connection")

    async def scenario() -> tuple[Any, Any, bool]:
        leader = await m.leader(key)
        part = leader.part
        part.config = SharePartitionConfig(dead_letter=True)
        acquired = part.acquire("m1", [(3, 4)], 10, 1_000_000)
        assert acquired.records
        persister.write = unreachable  # type: ignore[method-assign]
        outcome = part.acknowledge("m1", [AcknowledgementBatch(3, 4, (3,))], 1_000_000)
        assert part.dead_letters()  # ARCHIVING, in memory only
        try:
            await m._persist(leader, outcome)
        except ConnectionResetError:
            pass
        else:
            raise AssertionError("the failed write was not raised")
        again = await m.leader(key)
        return part.dead_letters(), [part.record(o).state.name for o in (3, 4)], \
            again is leader

    letters, states, same = asyncio.run(scenario())
    assert letters == []
    assert states == ["ACQUIRED", "ACQUIRED"]
    assert not same
