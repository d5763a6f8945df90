"""The share-partition leader with a dead-letter topic (KIP-1191): ARCHIVING between the
decision and the dead-letter write, persisted and replayed."""

from __future__ import annotations

from kio.schema.errors import ErrorCode as E

from headwater.share import SharePartition, SharePartitionConfig, ShareSnapshot, StateBatch
from headwater.share.outcomes import DeadLetter
from headwater.share.record_state import DeadLetterReason, RecordState
from tests.unit.share.context import ACCEPT, GAP, REJECT, RELEASE, ShareContext

DLQ = SharePartitionConfig(delivery_count_limit=3, dead_letter=True)
REJECTED, LIMIT = DeadLetterReason.REJECTED, DeadLetterReason.DELIVERY_LIMIT


def finish(c: ShareContext) -> int:
    """What the manager does once the dead letters are written."""
    result = c.partition.dead_lettered(c.partition.dead_letters(), c.now)
    c._persist(result)
    return result.released


def test_reject_goes_through_archiving_and_is_persisted_first():
    c = ShareContext(config=DLQ)
    c.acquire("m1", (0, 4))
    assert c.ack("m1", (0, 4, (ACCEPT, REJECT, ACCEPT, GAP, REJECT))).error_code == 0
    assert c.state(0) is None  # finished, below the SPSO
    assert [c.state(o)[0] for o in range(1, 5)] == [
        "ARCHIVING", "ACKNOWLEDGED", "ARCHIVED", "ARCHIVING"]
    # the write that answers the ack carries ARCHIVING (3): a crash now loses nothing
    assert StateBatch(1, 1, 3, 1) in c.last_write.state_batches
    # ARCHIVING is not finished: the SPSO stops at it and lag counts it
    assert c.partition.start_offset == 1
    assert c.partition.delivery_complete_count() == 2
    assert c.partition.dead_letters() == [DeadLetter(1, 1, 1, REJECTED),
                                          DeadLetter(4, 4, 1, REJECTED)]
    c.check_replay()
    assert finish(c) == 2
    assert c.partition.start_offset == 5 and c.partition.dead_letters() == []
    assert c.states(0, 4) == {None}
    c.check_replay()


def test_the_delivery_limit_goes_through_archiving_on_release_and_on_lock_timeout():
    c = ShareContext(config=DLQ)
    for _ in range(2):
        c.acquire("m1", (0, 1))
        c.ack("m1", (0, 1, RELEASE))
    assert c.acquire("m1", (0, 1)) == [(0, 0, 3)]  # the last delivery goes out alone
    c.ack("m1", (0, 0, RELEASE))
    assert c.acquire("m1", (0, 1)) == [(1, 1, 3)]
    c.advance(30_000)  # the lock of offset 1 runs out at the limit
    assert c.partition.dead_letters() == [DeadLetter(0, 1, 3, LIMIT)]
    c.check_replay()
    finish(c)
    assert c.partition.start_offset == 2


def test_no_dead_letter_topic_archives_as_before():
    c = ShareContext(config=SharePartitionConfig(delivery_count_limit=3))
    c.acquire("m1", (0, 0))
    c.ack("m1", (0, 0, REJECT))
    assert c.partition.dead_letters() == [] and c.partition.start_offset == 1


def test_archiving_refuses_every_acknowledgement():
    c = ShareContext(config=DLQ)
    c.acquire("m1", (0, 1))
    c.ack("m1", (0, 0, REJECT))
    for kind in (ACCEPT, RELEASE, REJECT, GAP):
        assert c.ack("m1", (0, 0, kind)).error_code == E.invalid_record_state
    assert c.acquire("m2", (0, 1)) == []  # not deliverable again either
    assert c.state(0) == ("ARCHIVING", 1, None)


def test_replay_brings_archiving_back_with_the_reason_inferred():
    c = ShareContext(config=DLQ)
    c.acquire("m1", (0, 9))
    c.ack("m1", (2, 2, REJECT))  # count 1 < limit: read back as rejected
    c.ack("m1", (3, 9, ACCEPT))
    c.ack("m1", (0, 1, RELEASE))
    while got := c.acquire("m1", (0, 9)):
        for first, last, _count in got:
            c.ack("m1", (first, last, RELEASE))  # at the limit: ARCHIVING
    rebuilt = c.rebuilt()
    assert rebuilt.dead_letters() == [DeadLetter(0, 1, 3, LIMIT), DeadLetter(2, 2, 1, REJECTED)]
    assert rebuilt.start_offset == 0
    # a reject on the last delivery reads back as the limit, as in Kafka
    snap = ShareSnapshot(0, 0, 0, 7, state_batches=(StateBatch(7, 7, 3, 3),))
    assert SharePartition.from_persisted(snap, DLQ).dead_letters() == [
        DeadLetter(7, 7, 3, LIMIT)]


def test_dead_lettered_finishes_only_what_was_written():
    c = ShareContext(config=DLQ)
    c.acquire("m1", (0, 2))
    c.ack("m1", (0, 2, REJECT))
    letters = c.partition.dead_letters()
    assert letters == [DeadLetter(0, 2, 1, REJECTED)]
    result = c.partition.dead_lettered([DeadLetter(0, 0, 1, REJECTED)], c.now)
    c._persist(result)
    assert result.released == 1 and c.partition.start_offset == 1
    assert c.partition.dead_letters() == [DeadLetter(1, 2, 1, REJECTED)]
    # finishing twice is harmless (a retry after a failed state write)
    c._persist(c.partition.dead_lettered(letters, c.now))
    assert c.partition.start_offset == 3
    assert c.partition.dead_lettered(letters, c.now).write is None


def test_a_failed_state_write_after_the_dead_letter_rolls_back_to_archiving():
    c = ShareContext(config=DLQ)
    c.acquire("m1", (0, 0))
    c.ack("m1", (0, 0, REJECT))
    result = c.partition.dead_lettered(c.partition.dead_letters(), c.now)
    c.partition.rollback(result)
    assert c.state(0) == ("ARCHIVING", 1, None)
    assert c.partition.record(0).reason is REJECTED


def test_log_start_moving_past_archiving_keeps_it_due():
    c = ShareContext(config=DLQ)
    c.acquire("m1", (0, 4))
    c.ack("m1", (1, 1, REJECT))
    c._persist(c.partition.advance_log_start(3, c.now))
    assert c.state(1)[0] == "ARCHIVING" and c.partition.start_offset == 1
    assert c.state(2)[0] == "ARCHIVED"
    finish(c)
    assert c.partition.start_offset == 3
    assert c.partition.record(3).state is RecordState.ACQUIRED
