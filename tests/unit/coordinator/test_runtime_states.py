"""The coordinator runtime's shard states (Kafka's CoordinatorRuntime shape): one node
elects itself for every shard at start; a cluster's runtime loads a shard the shared log
hands it, drops it when it moves, and reloads it when its records' commit fails."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import Any

import pytest
from kio.schema.errors import ErrorCode as E

from headwater.coordinator.runtime import (
    TRANSITIONS,
    ClusterShards,
    CoordinatorRuntime,
    IllegalTransition,
    NotReady,
    Result,
    ShardState,
)

S = ShardState


class FakeShard:
    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.unloaded = False

    def on_loaded(self, now_ms: int) -> None:
        pass

    def on_unloaded(self) -> None:
        self.unloaded = True

    def replay(self, *args: Any) -> None:
        pass


class FakeLogs:
    """The shared log's side: a partition is ready once `handed` holds it; commits
    succeed unless `failing`."""

    def __init__(self) -> None:
        self.handed: set[int] = set()
        self.failing = False
        self.commits: list[asyncio.Future[None]] = []

    def partition(self, topic: str, partition: int) -> Any:
        return self if partition in self.handed else None

    async def ready(self, topic: str, partition: int) -> Any:
        return self.partition(topic, partition)

    def commit(self, partitions: Iterable[Any]) -> Awaitable[None]:
        future = asyncio.get_running_loop().create_future()
        self.commits.append(future)
        return future

    # the partition itself, for `append`
    def append(self, data: bytes, now: int, origin_client: bool = True) -> Any:
        return type("Appended", (), {"base_offset": 0})()


class Topics:
    def ensure_internal_topic(self, name: str, num_partitions: int,
                              configs: Any) -> int:
        return num_partitions


class Codec:
    def encode(self, record: Any) -> tuple[bytes, bytes]:
        return b"k", b"v"


class Placement:
    """The shared log's placement of the shards: here while `wanted` holds the
    partition; the runtime follows takes and losses through `follow_shards`."""

    def __init__(self, wanted: set[int]) -> None:
        self.wanted = wanted
        self.followers: list[tuple[Any, Any]] = []

    def should_serve(self, topic: str, partition: int) -> bool:
        return partition in self.wanted

    def placed_here(self, topic: str, partition: int) -> bool:
        return partition in self.wanted

    def follow_shards(self, topic: str, taken: Any, lost: Any) -> Any:
        self.followers.append((taken, lost))
        return lambda: self.followers.remove((taken, lost))


def _runtime(logs: FakeLogs, partitions: int = 2, placement: Placement | None = None
             ) -> tuple[CoordinatorRuntime, list[FakeShard]]:
    made: list[FakeShard] = []

    def factory(partition: int, timer: Any) -> FakeShard:
        made.append(FakeShard(partition))
        return made[-1]

    runtime = CoordinatorRuntime("__t", partitions, Codec(), factory,  # type: ignore[arg-type]
                                 {}, partitions=logs, topics=Topics(), clock=lambda: 0,
                                 cluster=None if placement is None
                                 else ClusterShards(placement))
    runtime._scan = lambda partition: iter(())  # type: ignore[method-assign]
    return runtime, made


async def _until(condition: Any, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "not reached in time"
        await asyncio.sleep(0.01)


def _code(runtime: CoordinatorRuntime, partition: int) -> int:
    with pytest.raises(NotReady) as raised:
        runtime.shard(partition)
    return int(raised.value.code)


def test_the_transitions_are_kafkas() -> None:
    """Kafka's CoordinatorState.canTransitionFrom, read the other way round (its CLOSED
    context is discarded and a new one starts INITIAL: CLOSED -> LOADING here)."""
    allowed = {(a, b) for a, targets in TRANSITIONS.items() for b in targets}
    assert allowed == {(S.INITIAL, S.LOADING), (S.INITIAL, S.CLOSED),
                       (S.LOADING, S.ACTIVE), (S.LOADING, S.FAILED), (S.LOADING, S.CLOSED),
                       (S.ACTIVE, S.FAILED), (S.ACTIVE, S.CLOSED),
                       (S.FAILED, S.LOADING), (S.FAILED, S.CLOSED),
                       (S.CLOSED, S.LOADING)}


def test_one_node_elects_itself_for_every_shard_at_start() -> None:
    logs = FakeLogs()
    logs.handed = {0, 1}
    runtime, made = _runtime(logs)

    async def story() -> None:
        assert _code(runtime, 0) == E.coordinator_load_in_progress  # before start
        assert not runtime.is_loaded()
        await runtime.start()
        await _until(runtime.is_loaded)
        assert [runtime.state(p) for p in (0, 1)] == [S.ACTIVE, S.ACTIVE]
        assert runtime.shard(1) is made[1]
        await runtime.stop()
        assert [runtime.state(p) for p in (0, 1)] == [S.CLOSED, S.CLOSED]
        assert all(shard.unloaded for shard in made)
        assert _code(runtime, 0) == E.not_coordinator
    asyncio.run(story())


def test_a_cluster_shard_loads_when_handed_over_and_closes_when_it_moves() -> None:
    logs = FakeLogs()
    wanted = {0}
    placement = Placement(wanted)
    runtime, made = _runtime(logs, placement=placement)
    (taken, lost), = placement.followers  # the runtime follows the store's hand-overs

    async def story() -> None:
        assert runtime.state(0) is S.INITIAL
        taken(1)  # not placed here: ignored
        assert runtime.state(1) is S.INITIAL
        taken(0)
        assert runtime.state(0) is S.LOADING
        assert _code(runtime, 0) == E.coordinator_load_in_progress
        logs.handed.add(0)  # the store has taken the partition
        await _until(lambda: runtime.state(0) is S.ACTIVE)
        assert runtime.shard(0) is made[0]
        lost(0)
        assert runtime.state(0) is S.CLOSED and made[0].unloaded
        wanted.discard(0)
        assert _code(runtime, 0) == E.not_coordinator
        wanted.add(0)
        taken(0)  # back again: replayed afresh, a new shard
        await _until(lambda: runtime.state(0) is S.ACTIVE)
        assert runtime.shard(0) is made[1]
        await runtime.stop()
        assert not placement.followers  # a stopped runtime follows nothing
    asyncio.run(story())


def test_a_shard_released_while_it_loads_is_closed_not_served() -> None:
    logs = FakeLogs()
    runtime, made = _runtime(logs, placement=Placement({0, 1}))

    async def story() -> None:
        runtime.take(0)  # the store has not handed it over yet
        loader = runtime._slots[0].loader
        assert loader is not None
        runtime.release(0)
        assert runtime.state(0) is S.CLOSED
        await asyncio.wait([loader], timeout=5)
        assert loader.cancelled()  # its loader stopped: nothing loads it behind our back
        logs.handed.add(0)
        assert runtime.state(0) is S.CLOSED and not made
    asyncio.run(story())


def test_a_failed_commit_reloads_the_shard_from_what_was_committed() -> None:
    logs = FakeLogs()
    logs.handed = {0}
    wanted = {0}
    runtime, made = _runtime(logs, placement=Placement(wanted))

    async def story() -> None:
        runtime.take(0)
        await _until(lambda: runtime.state(0) is S.ACTIVE)
        runtime.write(0, lambda shard, now: Result([object()], "ok"))  # type: ignore[list-item]
        logs.commits[-1].set_exception(RuntimeError("object store away"))
        await _until(lambda: runtime.commit_failures == 1)
        assert made[0].unloaded
        await _until(lambda: runtime.state(0) is S.ACTIVE)
        assert runtime.shard(0) is made[1]  # rebuilt by replay
        # the same failure once the shard is no longer placed here: CLOSED
        runtime.write(0, lambda shard, now: Result([object()], "ok"))  # type: ignore[list-item]
        wanted.clear()
        logs.commits[-1].set_exception(RuntimeError("object store away"))
        await _until(lambda: runtime.commit_failures == 2)
        assert runtime.state(0) is S.CLOSED and made[1].unloaded
    asyncio.run(story())


def test_an_illegal_transition_is_refused() -> None:
    runtime, _made = _runtime(FakeLogs())
    with pytest.raises(IllegalTransition):
        runtime._move(0, S.ACTIVE)  # INITIAL -> ACTIVE skips the load
    assert runtime.state(0) is S.INITIAL
