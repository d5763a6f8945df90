"""Persisted share-partition state: record encoding and the share coordinator's merge
(scenarios from ShareCoordinatorShardTest and PersisterStateBatchCombinerTest)."""

from __future__ import annotations

import uuid

from headwater.share.records import (
    CODEC,
    SHARE_SNAPSHOT,
    ShareSnapshot,
    ShareUpdate,
    StateBatch,
    StateWrite,
    apply_update,
    combine,
    replay,
    snapshot_record,
    tombstone,
    update_record,
    value_of,
)

TOPIC = uuid.UUID("11111111-2222-3333-4444-555555555555")


def test_snapshot_and_update_round_trip_through_the_codec():
    snap = ShareSnapshot(2, 3, 4, 100, 7, 1_000, 2_000,
                         (StateBatch(100, 109, 2, 1), StateBatch(110, 110, 0, 3)))
    key, value = CODEC.encode(snapshot_record("g", TOPIC, 5, snap))
    record = CODEC.decode(key, value)
    assert record.key == {"group_id": "g", "topic_id": TOPIC, "partition": 5}
    assert value_of(record) == snap
    upd = ShareUpdate(2, 4, -1, -1, (StateBatch(111, 111, 4, 5),))
    assert value_of(CODEC.decode(*CODEC.encode(update_record("g", TOPIC, 5, upd)))) == upd
    dead = CODEC.decode(*CODEC.encode(tombstone("g", TOPIC, 5)))
    assert dead.type_id == SHARE_SNAPSHOT and value_of(dead) is None


def test_adjacent_equal_batches_coalesce():
    # testSubsequentWriteStateSnapshotEpochUpdatesSuccessfully: 0-10 and 11-20 -> 0-20
    merged = combine([StateBatch(0, 10, 0, 1)], [StateBatch(11, 20, 0, 1)], 0)
    assert merged == (StateBatch(0, 20, 0, 1),)


def test_newer_batches_override_overlaps_and_start_offset_trims():
    old = [StateBatch(0, 20, 0, 1)]
    new = [StateBatch(5, 7, 2, 1), StateBatch(15, 25, 4, 2)]
    assert combine(old, new, 0) == (
        StateBatch(0, 4, 0, 1), StateBatch(5, 7, 2, 1), StateBatch(8, 14, 0, 1),
        StateBatch(15, 25, 4, 2))
    assert combine(old, new, 6) == (
        StateBatch(6, 7, 2, 1), StateBatch(8, 14, 0, 1), StateBatch(15, 25, 4, 2))


def test_apply_write_keeps_unchanged_start_and_count():
    snap = ShareSnapshot(0, 1, 0, 100)
    snap = apply_update(snap, StateWrite(1, 0, -1, 1, (StateBatch(100, 100, 2, 1),)))
    assert (snap.start_offset, snap.delivery_complete_count) == (100, 1)
    snap = apply_update(snap, StateWrite(1, 0, 101, -1, ()))
    assert (snap.start_offset, snap.delivery_complete_count, snap.state_batches) == (101, 1, ())


def test_replay_applies_updates_of_the_current_snapshot_epoch_only():
    s0 = ShareSnapshot(0, 1, 0, 0)
    u0 = ShareUpdate(0, 0, -1, -1, (StateBatch(0, 4, 0, 1),))
    s1 = ShareSnapshot(1, 1, 0, 0, state_batches=(StateBatch(0, 4, 0, 1),))
    stale = ShareUpdate(0, 0, -1, -1, (StateBatch(0, 4, 4, 1),))
    u1 = ShareUpdate(1, 0, 3, -1, (StateBatch(3, 3, 2, 2),))
    got = replay([s0, u0, s1, stale, u1])
    assert got.start_offset == 3
    assert got.state_batches == (StateBatch(3, 3, 2, 2), StateBatch(4, 4, 0, 1))
    assert replay([u0]) is None
