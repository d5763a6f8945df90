"""What a dropped shared-log partition answers its waiting produces (shared/store.py,
`SharedPartition.fail`): the drop's own code ("not persisted") for appends no commit
window carries yet; for appends a window carries, that window's outcome once known
(committed, or known not to have landed); "possibly persisted" only when it never is."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from kio.schema.errors import ErrorCode as E

from headwater.shared.partition import SharedPartition
from headwater.storage.errors import CommitError

KEY = {("topic", 0)}


async def _outcome(fut: asyncio.Future[None]) -> int:
    """0 if acknowledged, else the error code."""
    try:
        await fut
    except CommitError as exc:
        return int(exc.code)
    return 0


def _dropped_with_a_window_under_way(open_log: Any, batch: Any) -> tuple[
        SharedPartition, asyncio.Future[None], asyncio.Future[None]]:
    part = SharedPartition(open_log(), uuid.uuid4(), epoch=1, committed=0)
    part.append(batch(3), 0)
    in_flight = part.wait_committed()  # [0, 3): a window carries it
    part.flushed = part.log_end_offset  # as `_written` does when the window starts
    part.append(batch(2), 0)
    not_sent = part.wait_committed()  # [3, 5): no window carries it yet
    part.fail(CommitError(E.not_leader_or_follower, "lease lost", KEY))
    return part, in_flight, not_sent


def test_appends_under_way_wait_for_their_window_and_are_acknowledged_if_it_lands(
        open_log, batch) -> None:
    async def scenario() -> tuple[bool, int, int]:
        part, in_flight, not_sent = _dropped_with_a_window_under_way(open_log, batch)
        unsent = await _outcome(not_sent)
        waiting = not in_flight.done()
        part.committed_to(3, False)  # the window landed after all
        return waiting, unsent, await _outcome(in_flight)

    waiting, unsent, under_way = asyncio.run(scenario())
    # Not answered before the window's outcome: REQUEST_TIMED_OUT there, and the next
    # owner's OUT_OF_ORDER_SEQUENCE for a later batch, make librdkafka bump its epoch and
    # send this batch again: written twice when it had landed.
    assert waiting
    assert unsent == E.not_leader_or_follower
    assert under_way == 0


def test_a_window_known_not_to_have_landed_answers_not_persisted(open_log, batch) -> None:
    async def scenario() -> int:
        part, in_flight, _not_sent = _dropped_with_a_window_under_way(open_log, batch)
        part.fail(CommitError(E.kafka_storage_error, "commit failed, not landed", KEY),
                  unknown_until=0)  # the window [0, 3) did not land
        return await _outcome(in_flight)

    assert asyncio.run(scenario()) == E.kafka_storage_error


def test_an_outcome_never_known_answers_possibly_persisted(open_log, batch) -> None:
    async def scenario() -> int:
        part, in_flight, _not_sent = _dropped_with_a_window_under_way(open_log, batch)
        part.abandon("broker stopping", KEY)
        return await _outcome(in_flight)

    assert asyncio.run(scenario()) == E.request_timed_out


def test_a_later_window_known_lost_leaves_an_earlier_one_waiting(open_log, batch) -> None:
    """Two windows under way; the second is refused (stale): that says nothing of the
    first, whose appends still wait for its own outcome."""
    async def scenario() -> tuple[bool, int]:
        part = SharedPartition(open_log(), uuid.uuid4(), epoch=1, committed=0)
        part.append(batch(3), 0)
        first = part.wait_committed()
        part.flushed = 3
        part.append(batch(2), 0)
        second = part.wait_committed()
        part.flushed = 5
        part.fail(CommitError(E.not_leader_or_follower, "commit stale", KEY),
                  unknown_until=3)
        code = await _outcome(second)
        return not first.done(), code

    waiting, code = asyncio.run(scenario())
    assert waiting and code == E.not_leader_or_follower
