"""A shard loaded here whose partition cannot serve this instant (its lease renewed late
by this broker's clock): what the runtime owes it is kept, not dropped. A marker
committed together is replayed into it, and a timer that fires meanwhile fires again
once the shard serves (each, dropped, left a transaction or a group waiting for good)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from headwater.coordinator.runtime import TIMER_RETRY_MS, CoordinatorRuntime


class Shard:
    def __init__(self) -> None:
        self.markers: list[tuple[int, int, bool, int]] = []

    def on_loaded(self, now_ms: int) -> None:
        pass

    def replay_end_transaction(self, pid: int, epoch: int, commit: bool, offset: int) -> None:
        self.markers.append((pid, epoch, commit, offset))


def _runtime(serving: list[bool]) -> tuple[CoordinatorRuntime, Shard]:
    """One shard, loaded; its partition served while `serving[0]`."""
    shard = Shard()
    partitions: Any = SimpleNamespace(
        partition=lambda topic, partition: object() if serving[0] else None)
    none: Any = SimpleNamespace()
    runtime = CoordinatorRuntime("__t", 1, None,  # type: ignore[arg-type]
                                 lambda p, timer: shard, {}, partitions=partitions,
                                 topics=none, clock=lambda: 0)
    runtime._scan = lambda partition: iter(())  # type: ignore[method-assign]
    return runtime, shard


def test_a_marker_committed_while_the_lease_lapsed_is_replayed_into_the_shard() -> None:
    serving = [True]
    runtime, shard = _runtime(serving)
    asyncio.run(runtime._load_all())
    serving[0] = False  # the lease ran out by this broker's clock, not yet renewed
    runtime.replay_marker(0, 7, 0, True, 42)
    assert shard.markers == [(7, 0, True, 42)]
    assert runtime.holds(0)


def test_a_timer_firing_while_the_lease_lapsed_fires_again_once_it_serves() -> None:
    serving = [True]
    runtime, _shard = _runtime(serving)
    fired: list[int] = []
    written: list[Any] = []

    def write(partition: int, op: Any, *args: Any, **kwargs: Any) -> Any:
        if not serving[0]:
            from kio.schema.errors import ErrorCode as E

            from headwater.coordinator.runtime import NotReady
            raise NotReady(E.not_coordinator)
        written.append(op(None, 0))
        return None

    async def story() -> None:
        await runtime._load_all()
        runtime.write = write  # type: ignore[method-assign]
        timer = runtime.timer(0)
        assert timer is not None
        serving[0] = False
        timer.schedule("expire", 0, lambda now: fired.append(now) or "done")
        deadline = asyncio.get_running_loop().time() + 5
        while asyncio.get_running_loop().time() < deadline and not fired:
            await asyncio.sleep(TIMER_RETRY_MS / 1000)
            if asyncio.get_running_loop().time() > deadline - 4.5:
                serving[0] = True  # renewed
    asyncio.run(story())
    assert fired and written == ["done"]
