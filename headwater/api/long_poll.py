"""Wake parked fetches the moment data is appended to a partition they wait on.

A fetch that found too little data registers one future on each of its partitions;
the partition log's append hook resolves every future waiting on it. No polling.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any


class AppendWaiters:
    def __init__(self) -> None:
        self._waiting: dict[int, set[asyncio.Future[None]]] = {}
        self._hooked: weakref.WeakSet[Any] = weakref.WeakSet()

    def _hook(self, plog: Any) -> None:
        if plog in self._hooked:
            return
        self._hooked.add(plog)
        key = id(plog)

        def on_append() -> None:
            waiters = self._waiting.pop(key, None)
            if waiters:
                for fut in waiters:
                    if not fut.done():
                        fut.set_result(None)

        plog.on_append.append(on_append)

    async def wait(self, plogs: list[Any], timeout_s: float) -> None:
        """Return when any of `plogs` is appended to, or after `timeout_s`."""
        if timeout_s <= 0 or not plogs:
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        keys = []
        for plog in plogs:
            self._hook(plog)
            key = id(plog)
            keys.append(key)
            self._waiting.setdefault(key, set()).add(fut)
        handle = loop.call_later(timeout_s, lambda: fut.done() or fut.set_result(None))  # type: ignore[func-returns-value]  # `or` runs it only when not done
        try:
            await fut
        finally:
            handle.cancel()
            for key in keys:
                waiters = self._waiting.get(key)
                if waiters is not None:
                    waiters.discard(fut)
                    if not waiters:
                        self._waiting.pop(key, None)
