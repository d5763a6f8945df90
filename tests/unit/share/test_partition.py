"""The share-partition leader, scenario by scenario. Names in comments are the
SharePartitionTest (core/src/test/java/kafka/server/share/SharePartitionTest.java)
tests each scenario is drawn from."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode as E

from headwater.share import (
    AcknowledgementBatch,
    AcquireMode,
    SharePartition,
    SharePartitionConfig,
    ShareSnapshot,
    StateBatch,
)
from tests.unit.share.context import ACCEPT, GAP, REJECT, RELEASE, RENEW, ShareContext

LOCK = 30_000


# ---- acquire ------------------------------------------------------------------------------

def test_acquire_single_batch():
    # testAcquireSingleRecord / testAcquireMultipleRecords
    c = ShareContext(start_offset=5)
    assert c.acquire("m1", (5, 14)) == [(5, 14, 1)]
    p = c.partition
    assert (p.start_offset, p.end_offset, p.next_fetch_offset()) == (5, 15, 15)
    assert c.states(5, 14) == {("ACQUIRED", 1, "m1")}
    assert c.last_write is None  # acquisitions are not persisted
    assert p.next_deadline_ms() == c.now + LOCK


def test_acquire_same_records_again_gives_nothing():
    # testAcquireWithMultipleBatchesAndMaxFetchRecords-style: already acquired is skipped
    c = ShareContext()
    c.acquire("m1", (0, 9))
    assert c.acquire("m2", (0, 9)) == []
    assert c.acquire("m2", (0, 9), (10, 14)) == [(10, 14, 1)]


def test_acquire_batch_optimized_exceeds_max_records():
    # testAcquireBatchSkipWithBatchSizeAndEndOffsetLargerThanFirstBatch: whole batches
    c = ShareContext()
    assert c.acquire("m1", (0, 9), (10, 19), (20, 29), max_records=15) == [(0, 19, 1)]
    assert c.partition.end_offset == 20


def test_acquire_record_limit_cuts_a_batch():
    # testAcquireRecordLimitMode...: exactly MaxRecords (KIP-1206)
    c = ShareContext()
    assert c.acquire("m1", (0, 9), max_records=3, mode=AcquireMode.RECORD_LIMIT) == [(0, 2, 1)]
    assert c.partition.end_offset == 3
    assert c.acquire("m2", (0, 9), max_records=3, mode=AcquireMode.RECORD_LIMIT) == [(3, 5, 1)]
    # redelivery in record_limit mode cuts the cached batch per offset
    c.ack("m1", (0, 2, RELEASE))
    assert c.acquire("m3", (0, 9), max_records=2, mode=AcquireMode.RECORD_LIMIT) == [(0, 1, 2)]
    assert c.state(2) == ("AVAILABLE", 1, None)


def test_batch_size_cuts_in_flight_batches_at_log_batch_boundaries():
    # testAcquireWithBatchSizeAndMultipleBatches
    c = ShareContext()
    assert c.acquire("m1", (0, 4), (5, 9), (10, 14), batch_size=10) == [(0, 14, 1)]
    assert [(b.first_offset, b.last_offset) for b in c.partition._batches] == [(0, 9), (10, 14)]


def test_acquire_clamps_to_start_and_skips_below():
    c = ShareContext(start_offset=7)
    assert c.acquire("m1", (0, 4)) == []
    assert c.acquire("m1", (5, 9)) == [(7, 9, 1)]


def test_log_gap_before_new_records_with_empty_window_moves_start():
    # testAcquireWithEmptyFetchRecords / compaction: nothing in between
    c = ShareContext(start_offset=10)
    assert c.acquire("m1", (20, 24)) == [(20, 24, 1)]
    assert (c.partition.start_offset, c.partition.end_offset) == (20, 25)
    assert c.last_write is not None and c.last_write.start_offset == 20
    c.check_replay()


def test_log_gap_behind_in_flight_records_is_archived():
    c = ShareContext()
    c.acquire("m1", (0, 4))
    assert c.acquire("m1", (10, 14)) == [(10, 14, 1)]
    assert c.states(5, 9) == {("ARCHIVED", 0, None)}
    c.ack("m1", (0, 4, ACCEPT))
    assert c.partition.start_offset == 10
    c.check_replay()


def test_holes_between_log_batches_are_handed_out_for_gap_acks():
    # testAcknowledgeMultipleRecordBatchWithGapOffsets: holes are acquired, client GAPs them
    c = ShareContext(start_offset=5)
    assert c.acquire("m1", (5, 6), (10, 18)) == [(5, 18, 1)]
    types = (RELEASE,) * 5 + (GAP,) * 3 + (ACCEPT,)
    r = c.ack("m1", (5, 6, RELEASE), (7, 9, GAP), (10, 18, types))
    assert r.error_code == E.none
    assert c.states(5, 6) | c.states(10, 14) == {("AVAILABLE", 1, None)}
    assert c.states(15, 17) | c.states(7, 9) == {("ARCHIVED", 1, None)}
    assert c.state(18) == ("ACKNOWLEDGED", 1, None)
    assert c.partition.next_fetch_offset() == 5
    c.check_replay()


# ---- acknowledge --------------------------------------------------------------------------

def test_accept_whole_batch_empties_the_window():
    # testAcknowledgeSingleRecordBatch / testAcknowledgeMultipleRecordBatch
    c = ShareContext(start_offset=5)
    c.acquire("m1", (5, 14))
    r = c.ack("m1", (5, 14, ACCEPT))
    assert (r.error_code, r.batch_errors) == (E.none, (E.none,))
    p = c.partition
    assert (p.start_offset, p.end_offset, p.next_fetch_offset()) == (15, 15, 15)
    assert p._batches == []
    assert c.last_write.start_offset == 15 and c.last_write.state_batches == ()
    assert p.next_deadline_ms() is None
    c.check_replay()


def test_release_then_redeliver_with_count_two():
    # testReleaseSingleRecordBatch + testAcquireReleasedRecord
    c = ShareContext()
    c.acquire("m1", (0, 9))
    c.ack("m1", (0, 9, RELEASE))
    assert c.states(0, 9) == {("AVAILABLE", 1, None)}
    assert c.last_write.state_batches == (StateBatch(0, 9, 0, 1),)
    assert c.partition.next_fetch_offset() == 0
    assert c.acquire("m2", (0, 9)) == [(0, 9, 2)]
    c.check_replay()


def test_reject_archives_and_moves_start():
    # testAcknowledgeRejectRecords-style
    c = ShareContext()
    c.acquire("m1", (0, 9))
    c.ack("m1", (0, 4, REJECT))
    assert c.partition.start_offset == 5
    assert c.last_write.start_offset == 5
    assert c.states(5, 9) == {("ACQUIRED", 1, "m1")}
    c.check_replay()


def test_partial_acknowledgement_splits_the_batch():
    # testAcknowledgeWhenOffsetNotAcquired / testAcknowledgeRecordsBatchSubset
    c = ShareContext()
    c.acquire("m1", (0, 9))
    c.ack("m1", (3, 5, ACCEPT))
    (batch,) = c.partition._batches
    assert batch.is_split
    assert c.states(0, 2) | c.states(6, 9) == {("ACQUIRED", 1, "m1")}
    assert c.states(3, 5) == {("ACKNOWLEDGED", 1, None)}
    assert c.partition.start_offset == 0
    assert c.last_write.state_batches == (StateBatch(3, 5, 2, 1),)
    c.ack("m1", (0, 2, ACCEPT), (6, 9, ACCEPT))
    assert (c.partition.start_offset, c.partition._batches) == (10, [])
    c.check_replay()


def test_split_batch_merges_back_when_uniform():
    c = ShareContext()
    c.acquire("m1", (0, 9))
    c.ack("m1", (0, 4, RELEASE))
    c.ack("m1", (5, 9, RELEASE))
    (batch,) = c.partition._batches
    assert not batch.is_split and batch.whole.state.name == "AVAILABLE"


def test_per_offset_acknowledge_types():
    # testAcknowledgeMultipleRecordBatchWithGapOffsets (per-offset types)
    c = ShareContext()
    c.acquire("m1", (0, 2))
    r = c.ack("m1", (0, 2, (ACCEPT, RELEASE, REJECT)))
    assert r.error_code == E.none
    assert c.partition.start_offset == 1  # 0 is finished, so below the window
    assert [c.state(o)[0] for o in (1, 2)] == ["AVAILABLE", "ARCHIVED"]
    c.check_replay()


def test_ack_of_empty_window_is_invalid_record_state_and_past_window_invalid_request():
    # testAcknowledgeOutOfRangeCachedData
    c = ShareContext()
    assert c.ack("m1", (0, 15, ACCEPT)).error_code == E.invalid_record_state
    c.acquire("m1", (5, 9))
    assert c.ack("m1", (20, 25, ACCEPT)).error_code == E.invalid_request
    assert c.ack("m1", (5, 12, ACCEPT)).error_code == E.invalid_request
    assert c.states(5, 9) == {("ACQUIRED", 1, "m1")}


def test_ack_by_another_member_changes_nothing():
    # testAcknowledgeWithAnotherMember
    c = ShareContext(start_offset=5)
    c.acquire("m1", (5, 9))
    r = c.ack("m2", (5, 9, ACCEPT))
    assert (r.error_code, r.write) == (E.invalid_record_state, None)
    assert c.states(5, 9) == {("ACQUIRED", 1, "m1")}
    r = c.ack("m2", (6, 7, ACCEPT))  # a subset, per-offset path
    assert r.error_code == E.invalid_record_state
    assert not c.partition._batches[0].is_split  # undone, not left split


def test_ack_when_not_acquired_and_repeated_ack():
    # testAcknowledgeWhenOffsetNotAcquired
    c = ShareContext(start_offset=5)
    c.acquire("m1", (5, 9))
    c.ack("m1", (5, 9, RELEASE))
    assert c.ack("m1", (5, 9, ACCEPT)).error_code == E.invalid_record_state
    c.acquire("m1", (5, 9))
    assert c.ack("m1", (6, 8, REJECT)).error_code == E.none
    assert c.ack("m1", (6, 8, REJECT)).error_code == E.invalid_record_state


def test_acknowledge_is_all_or_nothing_with_per_batch_codes():
    c = ShareContext()
    c.acquire("m1", (0, 4))
    c.acquire("m2", (5, 9))
    r = c.ack("m1", (0, 4, ACCEPT), (5, 9, ACCEPT), (20, 21, ACCEPT))
    assert r.batch_errors == (E.none, E.invalid_record_state, E.invalid_request)
    assert r.error_code == E.invalid_record_state and r.write is None
    assert c.states(0, 4) == {("ACQUIRED", 1, "m1")}
    assert c.partition.start_offset == 0


def test_invalid_acknowledge_types_are_invalid_request():
    # testAcknowledgeInvalidAckType-style
    c = ShareContext()
    c.acquire("m1", (0, 4))
    assert c.ack("m1", (0, 4, 9)).error_code == E.invalid_request
    assert c.ack("m1", (0, 4, (ACCEPT, ACCEPT))).error_code == E.invalid_request
    assert c.ack("m1", (4, 0, ACCEPT)).error_code == E.invalid_request


def test_ack_below_start_is_ignored():
    c = ShareContext()
    c.acquire("m1", (0, 9))
    c.ack("m1", (0, 4, ACCEPT))
    r = c.ack("m1", (0, 4, ACCEPT))
    assert (r.error_code, r.write) == (E.none, None)
    # a range straddling the SPSO acknowledges only what is in the window
    assert c.ack("m1", (3, 9, ACCEPT)).error_code == E.none
    assert c.partition.start_offset == 10


# ---- locks ----------------------------------------------------------------------------------

def test_lock_expiry_returns_records_to_available():
    # testAcquisitionLockForAcquiringSingleRecord / testAcquisitionLockOnTimeout...
    c = ShareContext()
    c.acquire("m1", (0, 9))
    assert c.advance(LOCK - 1) == 0
    assert c.advance(1) == 10
    assert c.states(0, 9) == {("AVAILABLE", 1, None)}
    assert c.last_write.state_batches == (StateBatch(0, 9, 0, 1),)
    assert c.partition.next_fetch_offset() == 0
    assert c.partition.next_deadline_ms() is None
    assert c.ack("m1", (0, 9, ACCEPT)).error_code == E.invalid_record_state
    assert c.acquire("m2", (0, 9)) == [(0, 9, 2)]
    c.check_replay()


def test_lock_expiry_is_applied_by_any_operation_at_now():
    c = ShareContext()
    c.acquire("m1", (0, 9))
    c.now += LOCK  # no timer fired
    r = c.ack("m1", (0, 9, ACCEPT))
    assert r.error_code == E.invalid_record_state
    # the acknowledgement failed, but the expiry it found stands and is persisted
    assert r.write.state_batches == (StateBatch(0, 9, 0, 1),)
    assert c.acquire("m2", (0, 9)) == [(0, 9, 2)]
    c.check_replay()


def test_lock_expiry_of_a_subset():
    # testAcquisitionLockOnTimeoutForSubsetRecords
    c = ShareContext()
    c.acquire("m1", (0, 9))
    c.ack("m1", (0, 4, ACCEPT))
    c.advance(LOCK)
    assert c.partition.start_offset == 5
    assert c.states(5, 9) == {("AVAILABLE", 1, None)}


def test_renew_keeps_the_lock():
    # KIP-1222 (testAcknowledgeWithRenewAck-style)
    c = ShareContext()
    c.acquire("m1", (0, 9))
    c.advance(LOCK - 1_000)
    renewed_at = c.now
    r = c.ack("m1", (0, 9, RENEW))
    assert (r.error_code, r.write) == (E.none, None)
    assert c.advance(2_000) == 0
    assert c.states(0, 9) == {("ACQUIRED", 1, "m1")}
    assert c.partition.next_deadline_ms() == renewed_at + LOCK
    assert c.advance(LOCK) == 10


def test_renew_mixed_with_accept():
    c = ShareContext()
    c.acquire("m1", (0, 2))
    c.ack("m1", (0, 2, (ACCEPT, RENEW, ACCEPT)))
    assert c.state(1)[0] == "ACQUIRED" and c.partition.start_offset == 1
    c.advance(LOCK)
    assert c.state(1) == ("AVAILABLE", 1, None)


# ---- delivery count limit, poison isolation --------------------------------------------------

def test_delivery_count_limit_archives_on_release():
    # testAcknowledgeReleasedRecordWithMaxDeliveryCount / testAcquisitionLockOnTimeoutWithMaxDeliveryCount
    c = ShareContext(config=SharePartitionConfig(delivery_count_limit=2))
    c.acquire("m1", (0, 0))
    c.ack("m1", (0, 0, RELEASE))
    assert c.acquire("m1", (0, 0)) == [(0, 0, 2)]
    c.advance(LOCK)
    assert c.partition.start_offset == 1 and c.partition._batches == []
    assert c.acquire("m1", (0, 0)) == []
    c.check_replay()


def test_records_at_the_limit_never_come_back_and_start_moves_past_them():
    c = ShareContext(config=SharePartitionConfig(delivery_count_limit=3))
    c.acquire("m1", (0, 4))
    c.ack("m1", (0, 4, (ACCEPT, RELEASE, RELEASE, RELEASE, RELEASE)))
    deliveries: dict[int, list[int]] = {}
    while got := c.acquire("m1", (0, 4)):
        for first, last, count in got:
            for offset in range(first, last + 1):
                deliveries.setdefault(offset, []).append(count)
        c.ack("m1", *[(f, last, RELEASE) for f, last, _d in got])
    assert deliveries == {o: [2, 3] for o in range(1, 5)}
    assert c.partition.start_offset == 5 and c.partition._batches == []
    c.check_replay()


def test_poison_isolation_last_delivery_alone():
    # testAcquireWithMaxDeliveryCountDeliveredAlone / KAFKA-17541 throttled delivery
    c = ShareContext(config=SharePartitionConfig(delivery_count_limit=5))  # throttle at 3
    assert c.acquire("m1", (0, 7)) == [(0, 7, 1)]
    c.ack("m1", (0, 7, RELEASE))
    assert c.acquire("m1", (0, 7)) == [(0, 7, 2)]
    c.ack("m1", (0, 7, RELEASE))
    assert c.acquire("m1", (0, 7)) == [(0, 7, 3)]
    c.ack("m1", (0, 7, RELEASE))
    # count 3 reached the throttle limit: the batch goes out in halves (8 >> 1)
    assert c.acquire("m1", (0, 7)) == [(0, 3, 4)]
    c.ack("m1", (0, 3, RELEASE))
    # a record on its last delivery goes out alone, one per fetch
    assert c.acquire("m1", (0, 7)) == [(0, 0, 5)]
    assert c.acquire("m2", (0, 7)) == [(1, 1, 5)]
    assert c.acquire("m2", (0, 7)) == [(2, 2, 5)]
    assert c.acquire("m2", (0, 7)) == [(3, 3, 5)]
    assert c.acquire("m3", (0, 7)) == [(4, 7, 4)]
    c.ack("m1", (0, 0, REJECT))
    c.advance(LOCK)  # 1-3 hit the limit on expiry; 4-7 come back with count 4
    assert c.partition.start_offset == 4
    assert c.states(4, 7) == {("AVAILABLE", 4, None)}
    c.check_replay()


def test_new_limit_applies_to_later_transitions():
    # testDynamicDeliveryCountIncreaseAllowsMoreDeliveries
    c = ShareContext(config=SharePartitionConfig(delivery_count_limit=2))
    c.acquire("m1", (0, 0))
    c.ack("m1", (0, 0, RELEASE))
    c.acquire("m1", (0, 0))
    c.partition.config = SharePartitionConfig(delivery_count_limit=4)
    c.ack("m1", (0, 0, RELEASE))
    assert c.state(0) == ("AVAILABLE", 2, None)


# ---- max record locks --------------------------------------------------------------------

def test_max_record_locks_bounds_new_records_not_redelivery():
    # testMaxInFlightRecordsUsesGroupConfigWhenPresent / testCanAcquireRecords...
    c = ShareContext(config=SharePartitionConfig(max_record_locks=100))
    assert c.acquire("m1", *[(i, i + 9) for i in range(0, 200, 10)]) == [(0, 99, 1)]
    assert not c.partition.can_acquire()
    assert c.acquire("m2", (100, 109)) == []
    c.ack("m1", (0, 9, RELEASE))
    assert c.partition.can_acquire()
    assert c.acquire("m2", (0, 9), (100, 109)) == [(0, 9, 2)]
    c.ack("m1", (10, 29, ACCEPT))
    assert c.acquire("m2", (100, 109)) == []  # m2's 0-9 still hold the start offset
    c.ack("m2", (0, 9, ACCEPT))
    assert c.partition.start_offset == 30
    got = c.acquire("m2", (100, 109), (110, 119), (120, 129), (130, 139))
    assert got == [(100, 129, 1)]


def test_max_record_locks_whole_batch_may_overshoot_in_batch_mode():
    c = ShareContext(config=SharePartitionConfig(max_record_locks=100))
    assert c.acquire("m1", (0, 94), (95, 149)) == [(0, 149, 1)]
    assert c.acquire("m1", (150, 159)) == []


# ---- members --------------------------------------------------------------------------------

def test_two_members_share_the_partition():
    c = ShareContext()
    assert c.acquire("m1", (0, 9)) == [(0, 9, 1)]
    assert c.acquire("m2", (0, 9), (10, 19)) == [(10, 19, 1)]
    assert c.ack("m2", (0, 9, ACCEPT)).error_code == E.invalid_record_state
    c.ack("m2", (10, 19, ACCEPT))
    assert c.partition.start_offset == 0  # held by m1's records
    c.ack("m1", (0, 9, ACCEPT))
    assert c.partition.start_offset == 20


def test_member_leaving_releases_only_its_records():
    # testReleaseAcquiredRecordsWithAnotherMember; the count is kept, as Kafka 4.3.1 does
    c = ShareContext()
    c.acquire("m1", (0, 4))
    c.acquire("m2", (5, 9))
    c.ack("m1", (0, 1, RELEASE))
    c.acquire("m1", (0, 1))  # count 2 now
    assert c.release("m1") == 5
    assert c.states(0, 1) == {("AVAILABLE", 2, None)}  # both deliveries count
    assert c.states(2, 4) == {("AVAILABLE", 1, None)}
    assert c.states(5, 9) == {("ACQUIRED", 1, "m2")}
    assert c.release("m1") == 0
    assert c.acquire("m3", (0, 4)) == [(0, 1, 3), (2, 4, 2)]
    c.check_replay()


def test_release_member_archives_at_the_limit():
    # Kafka 4.3.1, measured: a member that leaves holding a record at the limit ends it.
    c = ShareContext(config=SharePartitionConfig(delivery_count_limit=2))
    c.acquire("m1", (0, 0))
    c.ack("m1", (0, 0, RELEASE))
    c.acquire("m1", (0, 0))
    c.release("m1")
    assert c.partition.start_offset == 1 and c.state(0) is None  # archived, finished


# ---- start offset, log start ----------------------------------------------------------------

def test_start_offset_advances_over_finished_gaps():
    # testMaybeUpdateCachedStateAndOffsets...
    c = ShareContext()
    c.acquire("m1", (0, 9))
    c.acquire("m1", (10, 19))
    c.acquire("m1", (20, 29))
    c.ack("m1", (10, 19, ACCEPT))
    c.ack("m1", (20, 24, REJECT))
    assert c.partition.start_offset == 0
    c.ack("m1", (0, 9, ACCEPT))
    assert c.partition.start_offset == 25
    assert [b.first_offset for b in c.partition._batches] == [20]
    assert c.partition.delivery_complete_count() == 0
    c.check_replay()


def test_log_start_moving_archives_records_below_it():
    # testMaybeUpdateCachedStateWhenLogStartOffsetMoves...
    c = ShareContext()
    c.acquire("m1", (0, 9))
    c.ack("m1", (0, 9, RELEASE))
    c.acquire("m1", (10, 14))
    result = c.partition.advance_log_start(12, c.now)
    c._persist(result)
    assert result.released == 12
    assert c.partition.start_offset == 12
    assert c.states(12, 14) == {("ACQUIRED", 1, "m1")}
    assert c.ack("m1", (10, 14, ACCEPT)).error_code == E.none
    assert c.partition.start_offset == 15
    result = c.partition.advance_log_start(40, c.now)
    c._persist(result)
    assert (c.partition.start_offset, c.partition.end_offset) == (40, 40)
    c.check_replay()


# ---- read_committed -------------------------------------------------------------------------

def test_aborted_records_never_become_deliverable():
    # testAcquireWithReadCommittedIsolationLevel
    c = ShareContext()
    got = c.acquire("m1", (0, 4), (5, 9), (10, 14), aborted=[(5, 9)])
    assert got == [(0, 4, 1), (10, 14, 1)]
    assert c.states(5, 9) == {("ARCHIVED", 0, None)}
    assert c.last_write.state_batches == (StateBatch(5, 9, 4, 0),)
    c.ack("m1", (0, 4, ACCEPT))
    assert c.partition.start_offset == 10
    c.check_replay()


# ---- persistence ----------------------------------------------------------------------------

def test_rebuild_from_persisted_state():
    # testMaybeInitializeWithPersistedState... (start 5, 5-10 Acked, 15-18 Available count 2)
    snap = ShareSnapshot(0, 3, 0, 5, state_batches=(
        StateBatch(5, 10, 2, 1), StateBatch(15, 18, 0, 2)))
    p = SharePartition.from_persisted(snap)
    assert (p.start_offset, p.end_offset, p.state_epoch) == (11, 19, 3)
    assert p.record(12) == (0, 0, None, None, None)  # the gap: never delivered
    assert p.record(16).delivery_count == 2
    assert p.next_fetch_offset() == 11
    r = p.acquire("m1", [(10, 20)], 500, 0)
    assert r.records == ((11, 14, 1), (15, 18, 3), (19, 20, 1))
    assert r.write is not None and r.write.start_offset == 11


def test_rebuild_with_uninitialized_start_offset():
    snap = ShareSnapshot(0, 0, 0, -1)
    with pytest.raises(ValueError):
        SharePartition.from_persisted(snap)
    p = SharePartition.from_persisted(snap, start_offset=42)
    assert p.start_offset == 42
    r = p.acquire("m1", [(42, 43)], 500, 0)
    assert r.write is not None and r.write.start_offset == 42


def test_acquired_records_come_back_available_after_restart():
    c = ShareContext()
    c.acquire("m1", (0, 9))
    c.ack("m1", (0, 4, RELEASE))
    c.acquire("m2", (0, 4))
    p = c.rebuilt()
    assert p.record(0) == (0, 1, None, None, None) and p.end_offset == 5  # 5-9 were never written
    assert p.acquire("m3", [(0, 9)], 500, c.now).records == ((0, 4, 2), (5, 9, 1))


def test_rollback_undoes_an_acknowledgement_whose_write_failed():
    # testAcknowledgeBatchWithWriteFailure-style: the records stay acquired by the member
    c = ShareContext()
    c.acquire("m1", (0, 9))
    p = c.partition
    result = p.acknowledge("m1", [AcknowledgementBatch(0, 4, (ACCEPT,))], c.now)
    assert p.start_offset == 5
    p.rollback(result)
    assert p.start_offset == 0 and c.states(0, 9) == {("ACQUIRED", 1, "m1")}
    assert not p._batches[0].is_split
    with pytest.raises(RuntimeError):
        p.rollback(result)
    assert c.ack("m1", (0, 9, ACCEPT)).error_code == E.none
    assert p.start_offset == 10
    c.check_replay()


def test_rollback_of_new_records_and_expiry():
    c = ShareContext()
    p = c.partition
    c.acquire("m1", (0, 4))
    c.now += LOCK
    result = p.acquire("m2", [(0, 4), (5, 9)], 500, c.now)
    assert result.records == ((0, 4, 2), (5, 9, 1))
    p.rollback(result)
    assert p.end_offset == 5 and c.states(0, 4) == {("ACQUIRED", 1, "m1")}
    assert p.next_deadline_ms() == c.now  # due again; the next operation expires it
    assert c.advance(0) == 5
