"""`api/committed.py`: a coordinator request that wrote (or read) records through a
synchronous operation answers once the commits pending on its partition land, and never
with success when one failed, however late it awaits."""

from __future__ import annotations

import asyncio
from typing import Any

from headwater.api.committed import once_committed
from headwater.coordinator.runtime import Result, ShardState, landed
from headwater.storage.errors import CommitError
from tests.unit.coordinator.test_runtime_states import FakeLogs, Placement, _runtime, _until

ANSWER = {"throttle_time": 0, "topics": [{"name": "t", "partitions": [
    {"partition_index": 0, "error_code": 0}, {"partition_index": 1, "error_code": 3}]}]}


def _codes(answer: dict[str, Any]) -> list[int]:
    return [p["error_code"] for p in answer["topics"][0]["partitions"]]


def test_nothing_pending_answers_at_once() -> None:
    assert once_committed(ANSWER, None, None) is ANSWER


def test_an_answer_waits_for_the_commits_it_was_given() -> None:
    async def story() -> tuple[bool, dict[str, Any]]:
        commit: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiting = once_committed(ANSWER, None, commit)
        assert not isinstance(waiting, dict)
        answer = asyncio.ensure_future(waiting)
        await asyncio.sleep(0.01)
        early = answer.done()
        commit.set_result(None)
        return early, await answer

    early, answer = asyncio.run(story())
    assert not early and answer == ANSWER


def test_a_failed_commit_answers_not_coordinator_where_the_response_said_success() -> None:
    """As Kafka's coordinators answer a failed append: every error code that said
    success says NOT_COORDINATOR (the client finds the coordinator again and retries);
    a code that said something else stays."""
    async def story() -> Any:
        commit: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        commit.set_exception(CommitError(56, "not committed: __transaction_state-3", set()))
        waiting = once_committed(ANSWER, commit)
        assert not isinstance(waiting, dict)
        return await waiting

    assert _codes(asyncio.run(story())) == [16, 3]


def test_a_commit_that_fails_before_the_handler_awaits_still_fails_its_answer() -> None:
    """The EndTxn race of the 30-minute campaign: the Prepare record's commit fails
    while the handler is busy, and the runtime forgets the failed commit (the shard is
    rebuilt without it). Taken right after the write, the pending commits hold it."""
    logs = FakeLogs()
    logs.handed = {0}
    runtime, _made = _runtime(logs, placement=Placement({0}))

    async def story() -> tuple[bool, bool]:
        runtime.take(0)
        await _until(lambda: runtime.state(0) is ShardState.ACTIVE)
        runtime.write(0, lambda shard, now: Result([object()], "prepared"))
        pending = runtime.pending_commits(0)
        await _until(lambda: len(logs.commits) == 1)
        logs.commits[0].set_exception(CommitError(56, "window lost", set()))
        await _until(lambda: runtime.pending_commits(0) is None)  # forgotten by the runtime
        return pending is not None, await landed([pending])

    held, ok = asyncio.run(story())
    assert held and not ok
