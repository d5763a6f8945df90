"""What a dropped shared-log partition answers its waiting produces (shared/store.py,
`SharedPartition.fail`): "possibly persisted" for appends a commit window already
carries, the drop's own code for appends no window carries yet."""

from __future__ import annotations

import asyncio
import uuid

from kio.schema.errors import ErrorCode as E

from headwater.shared.partition import SharedPartition
from headwater.storage.errors import CommitError


def test_appends_under_way_answer_possibly_persisted_the_others_not_persisted(
        open_log, batch) -> None:
    async def scenario() -> tuple[CommitError, CommitError]:
        part = SharedPartition(open_log(), uuid.uuid4(), epoch=1, committed=0)
        part.append(batch(3), 0)
        in_flight = part.wait_committed()  # [0, 3): a window carries it
        part.flushed = part.log_end_offset  # as `_written` does when the window starts
        part.append(batch(2), 0)
        not_sent = part.wait_committed()  # [3, 5): no window carries it yet
        part.fail(CommitError(E.not_leader_or_follower, "lease lost", {("topic", 0)}))
        errors = []
        for fut in (in_flight, not_sent):
            try:
                await fut
            except CommitError as exc:
                errors.append(exc)
        return errors[0], errors[1]

    under_way, unsent = asyncio.run(scenario())
    # librdkafka retries REQUEST_TIMED_OUT under the same sequence (the next owner finds
    # the batch if it landed); NOT_LEADER there would make it bump its epoch and resend
    # the batch as new records, a duplicate.
    assert under_way.code == E.request_timed_out
    assert "possibly persisted" in under_way.message
    assert unsent.code == E.not_leader_or_follower
    assert under_way.failed == unsent.failed == {("topic", 0)}


def test_a_known_outcome_answers_the_drops_own_code(open_log, batch) -> None:
    """Fenced, stale, or an upload that failed: nothing past `committed` can land."""
    async def scenario() -> CommitError:
        part = SharedPartition(open_log(), uuid.uuid4(), epoch=1, committed=0)
        part.append(batch(3), 0)
        waiting = part.wait_committed()
        part.flushed = part.log_end_offset
        part.fail(CommitError(E.kafka_storage_error, "upload failed", {("topic", 0)}),
                  outcome_known=True)
        try:
            await waiting
        except CommitError as exc:
            return exc
        raise AssertionError("acknowledged")

    assert asyncio.run(scenario()).code == E.kafka_storage_error
