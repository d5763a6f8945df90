"""Timed: a coroutine's running time without its waits; results, errors and
cancellation pass through unchanged."""

from __future__ import annotations

import asyncio
import time

import pytest

from headwater.wire.run_time import Timed

pytestmark = pytest.mark.timeout(30)


def busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


async def handler() -> str:
    busy(0.02)
    await asyncio.sleep(0.3)
    busy(0.02)
    return "done"


def test_counts_the_steps_not_the_wait() -> None:
    async def run() -> tuple[str, float]:
        timed = Timed(handler())
        return await timed, timed.seconds
    result, seconds = asyncio.run(run())
    assert result == "done"
    assert 0.04 <= seconds < 0.2


def test_errors_and_cancellation_reach_the_caller() -> None:
    async def fails() -> None:
        await asyncio.sleep(0)
        raise ValueError("bad")

    cleaned: list[bool] = []

    async def waits() -> None:
        try:
            await asyncio.sleep(10)
        finally:
            cleaned.append(True)

    async def drive() -> None:
        await Timed(waits())

    async def run() -> None:
        with pytest.raises(ValueError, match="bad"):
            await Timed(fails())
        task = asyncio.ensure_future(drive())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    assert cleaned == [True]
