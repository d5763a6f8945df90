"""The time a coroutine handler actually runs, for request quotas.

A handler that awaits (Fetch's long poll, ShareFetch, JoinGroup, ...) spends most of
its wall time suspended, which costs the broker nothing; Kafka charges a request quota
only the time a thread works on the request. `Timed` drives the coroutine the way a Task
would and adds up the time of each step between suspensions, so a long poll is charged
its reads and its answer, not its wait.
"""

from __future__ import annotations

from collections.abc import Coroutine, Generator
from time import perf_counter
from typing import Any


class Timed:
    """Awaitable over `coro`; `seconds` is the time its steps ran so far."""

    __slots__ = ("coro", "seconds")

    def __init__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self.coro = coro
        self.seconds = 0.0

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self.coro
        send: Any = None
        throw: BaseException | None = None
        while True:
            started = perf_counter()
            try:
                if throw is None:
                    suspended = coro.send(send)
                else:
                    suspended = coro.throw(throw)
            except StopIteration as done:
                return done.value
            finally:
                self.seconds += perf_counter() - started
            try:
                send, throw = (yield suspended), None
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # cancellation, passed on to the handler
                send, throw = None, exc
