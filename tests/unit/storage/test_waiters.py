"""The one partition-waiters mechanism of Fetch and ShareFetch long polls."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable

from headwater.storage.waiters import PartitionWaiters


class FakeLog:
    def __init__(self) -> None:
        self.on_append: list[Callable[[], None]] = []

    def subscribe_append(self, callback: Callable[[], None]) -> Callable[[], None]:
        self.on_append.append(callback)
        return lambda: self.on_append.remove(callback)

    def append(self) -> None:
        for callback in self.on_append:
            callback()


def timed(coro_factory: Callable[[], object]) -> float:
    async def run() -> float:
        start = time.monotonic()
        await coro_factory()  # type: ignore[misc]
        return time.monotonic() - start
    return asyncio.run(run())


def test_an_append_wakes_a_waiter_and_leaves_nothing_behind() -> None:
    waiters, plog, other = PartitionWaiters(), FakeLog(), FakeLog()

    async def scenario() -> None:
        asyncio.get_running_loop().call_later(0.05, plog.append)
        await waiters.wait([other, plog], 10)

    assert timed(scenario) < 5
    assert waiters.waiting(plog) == waiters.waiting(other) == 0
    assert len(plog.on_append) == 1  # hooked once, however many waits


def test_wake_without_an_append_and_the_timeout() -> None:
    waiters, plog = PartitionWaiters(), FakeLog()

    async def woken() -> None:
        asyncio.get_running_loop().call_later(0.05, waiters.wake, plog)
        await waiters.wait([plog], 10)

    async def timeout() -> None:
        await waiters.wait([plog], 0.1)

    assert timed(woken) < 5
    assert 0.09 < timed(timeout) < 5
    assert len(plog.on_append) == 1


def test_subscribe_returns_an_unsubscribe_handle() -> None:
    waiters, plog = PartitionWaiters(), FakeLog()

    async def scenario() -> tuple[bool, bool]:
        loop = asyncio.get_running_loop()
        kept, dropped = loop.create_future(), loop.create_future()
        waiters.subscribe(plog, kept)
        unsubscribe = waiters.subscribe(plog, dropped)
        unsubscribe()
        plog.append()
        return kept.done(), dropped.done()

    assert asyncio.run(scenario()) == (True, False)


def test_a_log_at_a_freed_logs_address_is_hooked() -> None:
    """A re-created partition's log may reuse the address (`id()`) of the deleted one:
    it must still wake its waiters (the `id()`-keyed hook set ShareFetch had missed
    it: with the same loop it slept out its timeout)."""
    waiters = PartitionWaiters()

    async def scenario() -> tuple[bool, float]:
        seen: set[int] = set()
        reused = False
        plog = FakeLog()
        await waiters.wait([plog], 0.001)  # hooks it
        for _ in range(200):
            seen.add(id(plog))
            del plog  # the partition is deleted ...
            gc.collect()
            plog = FakeLog()  # ... and re-created
            await waiters.wait([plog], 0.001)
            if id(plog) in seen:
                reused = True
                break
        asyncio.get_running_loop().call_later(0.05, plog.append)
        start = time.monotonic()
        await waiters.wait([plog], 10)
        return reused, time.monotonic() - start

    reused, elapsed = asyncio.run(scenario())
    assert elapsed < 5, f"not woken (address reused: {reused})"
