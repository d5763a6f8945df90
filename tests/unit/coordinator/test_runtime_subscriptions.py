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
