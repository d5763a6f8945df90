"""Long polls parked on partitions: a Fetch that found too little data and a
ShareFetch that acquired nothing wait here until their partitions change, with no
polling.

One instance per broker, shared by Fetch and ShareFetch. A waiter subscribes a future to
each partition it waits on; the partition's append subscription (taken once per
partition object, tracked weakly so a re-created partition's new object is hooked even
where it reuses a freed one's address) resolves every future subscribed to it. `wake` does the same for changes that are not appends
(a share-partition's acknowledgement, release or lock expiry).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Iterable
from typing import Protocol


class AppendSource(Protocol):
    """A partition as the waiters see it: it tells subscribers about appends."""

    def subscribe_append(self, callback: Callable[[], None]) -> Callable[[], None]: ...


class PartitionWaiters:
    def __init__(self) -> None:
        self._waiting: weakref.WeakKeyDictionary[AppendSource, set[asyncio.Future[None]]] = (
            weakref.WeakKeyDictionary())
        self._hooked: weakref.WeakSet[AppendSource] = weakref.WeakSet()

    def _hook(self, plog: AppendSource) -> None:
        if plog in self._hooked:
            return
        self._hooked.add(plog)
        ref = weakref.ref(plog)

        def on_append() -> None:
            log = ref()
            if log is not None:
                self.wake(log)

        plog.subscribe_append(on_append)

    def subscribe(self, plog: AppendSource, future: asyncio.Future[None]
                  ) -> Callable[[], None]:
        """Resolve `future` at the next append to (or `wake` of) `plog`; returns the
        unsubscribe handle."""
        self._hook(plog)
        self._waiting.setdefault(plog, set()).add(future)
        ref = weakref.ref(plog)

        def unsubscribe() -> None:
            log = ref()
            if log is None:
                return  # gone, and its waiters with it
            waiters = self._waiting.get(log)
            if waiters is not None:
                waiters.discard(future)
                if not waiters:
                    self._waiting.pop(log, None)

        return unsubscribe

    def wake(self, plog: AppendSource) -> None:
        """Something changed on `plog`: every waiter on it returns."""
        waiters = self._waiting.pop(plog, None)
        for fut in waiters or ():
            if not fut.done():
                fut.set_result(None)

    def waiting(self, plog: AppendSource) -> int:
        """How many waiters are parked on `plog` (for tests and metrics)."""
        return len(self._waiting.get(plog, ()))

    async def wait(self, plogs: Iterable[AppendSource], timeout_s: float) -> None:
        """Return when any of `plogs` is appended to or woken, or after `timeout_s`."""
        plogs = list(plogs)
        if timeout_s <= 0 or not plogs:
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        handles = [self.subscribe(plog, fut) for plog in plogs]

        def expire() -> None:
            if not fut.done():
                fut.set_result(None)

        timer = loop.call_later(timeout_s, expire)
        try:
            await fut
        finally:
            timer.cancel()
            for unsubscribe in handles:
                unsubscribe()
