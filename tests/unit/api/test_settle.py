"""`api/settle.py`: a cluster's coordinator request answers once its records are
committed, and never with success when a commit failed while it was handled."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from headwater.api.settle import _wrap
from headwater.storage.errors import CommitError


class Runtime:
    """The two things settle uses of a CoordinatorRuntime."""

    def __init__(self) -> None:
        self.commit_failures = 0
        self.unsettled: list[asyncio.Future[None]] = []

    def settled(self) -> Any:
        return asyncio.gather(*self.unsettled) if self.unsettled else None


def test_a_commit_that_failed_and_left_before_settled_was_asked_fails_the_request() -> None:
    """The EndTxn race of the 30-minute campaign: the PrepareCommit's commit fails while
    the handler is still awaiting, its future leaves the unsettled set (the shard is
    rebuilt without the record), and `settled()` then has nothing to wait for."""
    runtime = Runtime()

    async def handler(_ctx: Any, _req: Any) -> str:
        await asyncio.sleep(0)
        runtime.commit_failures += 1  # failed, and already discarded from `unsettled`
        return "committed"

    with pytest.raises(CommitError):
        asyncio.run(_wrap(handler, [runtime])(None, None))  # type: ignore[list-item]


def test_a_request_answers_once_its_records_are_committed() -> None:
    runtime = Runtime()

    async def scenario() -> tuple[bool, str]:
        loop = asyncio.get_running_loop()
        commit: asyncio.Future[None] = loop.create_future()
        runtime.unsettled.append(commit)
        answer = asyncio.ensure_future(_wrap(lambda _c, _r: "ok", [runtime])(None, None))  # type: ignore[list-item]
        await asyncio.sleep(0.01)
        early = answer.done()
        commit.set_result(None)
        return early, await answer

    early, answer = asyncio.run(scenario())
    assert not early and answer == "ok"


def test_a_failed_commit_answers_not_coordinator_where_the_response_said_success() -> None:
    """As Kafka's coordinators answer a failed append: every error code that said
    success says NOT_COORDINATOR (the client finds the coordinator again and retries);
    a code that said something else stays. The connection is not closed."""
    runtime = Runtime()

    async def handler(_ctx: Any, _req: Any) -> dict[str, Any]:
        await asyncio.sleep(0)
        runtime.commit_failures += 1
        return {"throttle_time": 0, "topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "error_code": 0},
            {"partition_index": 1, "error_code": 3}]}]}

    answer = asyncio.run(_wrap(handler, [runtime])(None, None))  # type: ignore[list-item]
    codes = [p["error_code"] for p in answer["topics"][0]["partitions"]]
    assert codes == [16, 3]


def test_a_commit_failing_under_a_wait_answers_not_coordinator() -> None:
    runtime = Runtime()

    async def scenario() -> Any:
        loop = asyncio.get_running_loop()
        commit: asyncio.Future[None] = loop.create_future()
        runtime.unsettled.append(commit)
        answer = asyncio.ensure_future(_wrap(
            lambda _c, _r: {"error_code": 0, "member_id": "m"}, [runtime])(None, None))  # type: ignore[list-item]
        await asyncio.sleep(0.01)
        commit.set_exception(CommitError(56, "not committed: __consumer_offsets-3", set()))
        return await answer

    assert asyncio.run(scenario()) == {"error_code": 16, "member_id": "m"}
