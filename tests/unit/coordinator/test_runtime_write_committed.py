"""`CoordinatorRuntime.write_committed`: a write answered once its own records are
committed (Kafka's write operations complete at the high watermark), a failed commit
raised to the caller, and a write with no records answered once what it read is."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from headwater.coordinator.runtime import Result, ShardState
from tests.unit.coordinator.test_runtime_states import FakeLogs, Placement, _runtime, _until


def _active(logs: FakeLogs) -> Any:
    logs.handed = {0}
    runtime, _made = _runtime(logs, placement=Placement({0}))
    return runtime


async def _serving(runtime: Any) -> None:
    runtime.take(0)
    await _until(lambda: runtime.state(0) is ShardState.ACTIVE)


def _write(runtime: Any) -> asyncio.Future[Any]:
    """A write of one record to partition 0, answered once committed."""
    return asyncio.ensure_future(runtime.write_committed(
        0, lambda shard, now: Result([object()], "written")))


def test_a_write_is_answered_once_its_own_records_are_committed() -> None:
    logs = FakeLogs()
    runtime = _active(logs)

    async def story() -> None:
        await _serving(runtime)
        answer = _write(runtime)
        await _until(lambda: len(logs.commits) == 1)
        await asyncio.sleep(0.05)
        assert not answer.done()  # its window has not landed
        logs.commits[0].set_result(None)
        assert await asyncio.wait_for(answer, 5) == "written"
    asyncio.run(story())


def test_a_failed_commit_is_raised_to_the_writer() -> None:
    logs = FakeLogs()
    runtime = _active(logs)

    async def story() -> None:
        await _serving(runtime)
        answer = _write(runtime)
        await _until(lambda: len(logs.commits) == 1)
        logs.commits[0].set_exception(RuntimeError("object store away"))
        with pytest.raises(RuntimeError, match="object store away"):
            await asyncio.wait_for(answer, 5)
        assert runtime.commit_failures == 1
    asyncio.run(story())


def test_a_write_without_records_waits_for_what_it_read() -> None:
    logs = FakeLogs()
    runtime = _active(logs)

    async def story() -> None:
        await _serving(runtime)
        runtime.write(0, lambda shard, now: Result([object()], "someone's"))
        read = asyncio.ensure_future(runtime.write_committed(
            0, lambda shard, now: Result([], "read")))
        await asyncio.sleep(0.05)
        assert not read.done()  # the state it read is not committed yet
        logs.commits[0].set_result(None)
        assert await asyncio.wait_for(read, 5) == "read"
        # nothing pending: answered at once
        assert await asyncio.wait_for(runtime.write_committed(
            0, lambda shard, now: Result([], "again")), 1) == "again"
    asyncio.run(story())


def test_one_node_flushes_as_its_policy_asks() -> None:
    logs = FakeLogs()
    logs.handed = {0, 1}
    runtime, _made = _runtime(logs)  # one node: elects itself for every shard

    async def story() -> None:
        await runtime.start()
        await _until(lambda: runtime.state(0) is ShardState.ACTIVE)
        answer = _write(runtime)
        await _until(lambda: len(logs.commits) == 1)  # the flush, asked by the write
        assert not answer.done()
        logs.commits[0].set_result(None)
        assert await asyncio.wait_for(answer, 5) == "written"
        runtime.write(0, lambda shard, now: Result([object()], "plain"))
        assert len(logs.commits) == 1  # a plain write asks for no flush
        await runtime.stop()
    asyncio.run(story())
