"""Load subscriptions of the coordinator runtime: every subscriber is told, in order,
and an unsubscribed one no longer is."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from headwater.coordinator.runtime import CoordinatorRuntime


class FakeShard:
    def on_loaded(self, now_ms: int) -> None:
        pass


def test_load_subscribers_are_called_in_order_until_unsubscribed() -> None:
    none: Any = SimpleNamespace()
    runtime = CoordinatorRuntime("__t", 2, None,  # type: ignore[arg-type]
                                 lambda p, timer: FakeShard(), {}, partitions=none,
                                 topics=none, clock=lambda: 0)
    runtime._scan = lambda partition: iter(())  # type: ignore[method-assign]
    calls: list[tuple[str, int]] = []
    runtime.subscribe_load(lambda p: calls.append(("first", p)))
    drop = runtime.subscribe_load(lambda p: calls.append(("dropped", p)))

    def failing(p: int) -> None:
        raise RuntimeError("a failing subscriber does not stop the others")

    runtime.subscribe_load(failing)
    runtime.subscribe_load(lambda p: calls.append(("last", p)))
    drop()
    drop()  # twice is harmless
    asyncio.run(runtime._load_all())
    assert calls == [("first", 0), ("last", 0), ("first", 1), ("last", 1)]


def test_a_cluster_shard_placed_here_but_not_taken_yet_is_loading() -> None:
    """A shard the shared log places on this broker and that it has not taken yet
    answers COORDINATOR_LOAD_IN_PROGRESS (the client asks here again: FindCoordinator
    names this broker); one placed elsewhere NOT_COORDINATOR."""
    import pytest
    from kio.schema.errors import ErrorCode as E

    from headwater.coordinator.runtime import ClusterShards, NotReady

    none: Any = SimpleNamespace(partition=lambda topic, partition: None)
    placement: Any = SimpleNamespace(
        should_serve=lambda topic, partition: partition == 1,
        placed_here=lambda topic, partition: partition == 1,
        follow_shards=lambda topic, taken, lost: lambda: None)
    runtime = CoordinatorRuntime("__t", 4, None,  # type: ignore[arg-type]
                                 lambda p, timer: FakeShard(), {}, partitions=none,
                                 topics=none, clock=lambda: 0,
                                 cluster=ClusterShards(placement))
    with pytest.raises(NotReady) as placed_here:
        runtime.shard(1)
    assert placed_here.value.code == E.coordinator_load_in_progress
    with pytest.raises(NotReady) as elsewhere:
        runtime.shard(2)
    assert elsewhere.value.code == E.not_coordinator


def test_a_cluster_shard_placed_here_whose_lease_lapsed_is_loading() -> None:
    """A shard loaded here, placed here by a fresh view, whose partition's lease this
    broker's clock says ran out before it was renewed: COORDINATOR_LOAD_IN_PROGRESS
    (librdkafka's committed() asks again here) rather than NOT_COORDINATOR (it fails on
    it); once no longer placed here, NOT_COORDINATOR."""
    import pytest
    from kio.schema.errors import ErrorCode as E

    from headwater.coordinator.runtime import NotReady

    serving, placed = [True], [True]
    partitions: Any = SimpleNamespace(
        partition=lambda topic, partition: object() if serving[0] else None)
    runtime = CoordinatorRuntime("__t", 1, None,  # type: ignore[arg-type]
                                 lambda p, timer: FakeShard(), {}, partitions=partitions,
                                 topics=SimpleNamespace(), clock=lambda: 0)
    runtime._scan = lambda partition: iter(())  # type: ignore[method-assign]
    asyncio.run(runtime._load_all())
    # loaded as a cluster's shard is once taken: it follows the placement from now on
    runtime.follows = True
    runtime._placed = lambda partition: placed[0]
    assert isinstance(runtime.shard(0), FakeShard)
    serving[0] = False  # the lease lapsed by this broker's clock
    with pytest.raises(NotReady) as lapsed:
        runtime.shard(0)
    assert lapsed.value.code == E.coordinator_load_in_progress
    placed[0] = False  # the placement moved it away
    with pytest.raises(NotReady) as moved:
        runtime.shard(0)
    assert moved.value.code == E.not_coordinator
