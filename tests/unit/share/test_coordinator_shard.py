"""The share coordinator shard on a fake clock: Kafka's state operations and error codes,
KIP-932's records (snapshot = checkpoint, update = delta with a rolling delta index),
and replay — also of the log as compaction leaves it — rebuilding exactly the state."""

from __future__ import annotations

import random
import uuid
from dataclasses import replace
from itertools import pairwise

import pytest
from kio.schema.errors import ErrorCode as E

from headwater.coordinator.record_codec import CoordinatorRecord
from headwater.metadata.image import MetadataImage, PartitionImage, TopicImage
from headwater.share.coordinator import coordinator_key, kafka_uuid, parse_coordinator_key
from headwater.share.coordinator_shard import (
    COLD_TIMER,
    ReadResult,
    ShareCoordinatorConfig,
    ShareCoordinatorShard,
    StateSummary,
)
from headwater.share.records import (
    CODEC,
    SHARE_SNAPSHOT,
    SHARE_UPDATE,
    ShareSnapshot,
    StateBatch,
    StateWrite,
    apply_update,
    update_record,
    value_of,
)
from tests.support.coordinator import ShardContext

TOPIC = uuid.UUID("11111111-2222-3333-4444-555555555555")
OTHER = uuid.UUID("99999999-2222-3333-4444-555555555555")
G = "g1"


def image_with(*topics: tuple[uuid.UUID, int]) -> MetadataImage:
    images = [TopicImage(f"t{i}", tid, tuple(PartitionImage(p, 1, 0, (1,), (1,))
                                              for p in range(n)))
              for i, (tid, n) in enumerate(topics)]
    return MetadataImage(topics_by_name={t.name: t for t in images},
                         topics_by_id={t.topic_id: t for t in images})


class Ctx(ShardContext):
    def __init__(self, per_snapshot: int = 500, cold_ms: int = 300_000) -> None:
        self.image = image_with((TOPIC, 4))
        self.config = ShareCoordinatorConfig(updates_per_snapshot=per_snapshot,
                                             cold_snapshot_interval_ms=cold_ms)
        super().__init__(lambda timer: ShareCoordinatorShard(0, timer, self.config,
                                                             lambda: self.image), CODEC)

    def init(self, state_epoch: int = 0, start: int = 0, partition: int = 0,
             topic: uuid.UUID = TOPIC) -> int:
        return self.write(lambda s, now: s.initialize(G, topic, partition, state_epoch,
                                                      start, now))

    def put(self, batches: tuple[StateBatch, ...] = (), start: int = -1, state_epoch: int = 0,
            leader_epoch: int = 0, complete: int = -1, partition: int = 0) -> int:
        return self.write(lambda s, now: s.write(G, TOPIC, partition, state_epoch,
                                                 leader_epoch, start, complete, batches, now))

    def read(self, leader_epoch: int = 0, partition: int = 0,
             topic: uuid.UUID = TOPIC) -> ReadResult:
        return self.write(lambda s, now: s.read(G, topic, partition, leader_epoch, now))

    def summary(self, partition: int = 0) -> StateSummary:
        return self.shard.read_summary(G, TOPIC, partition)

    def state(self, partition: int = 0) -> ShareSnapshot:
        return self.shard.states[(G, TOPIC, partition)].state

    def kinds(self) -> list[tuple[str, int | None]]:
        """The last operation's records as (type, delta index)."""
        return [("snapshot", None) if r.type_id == SHARE_SNAPSHOT
                else ("update", r.key["delta_index"]) for r in self.last_records]

    def assert_replay_equal(self) -> None:
        assert self.replayed().states == self.shard.states
        assert compacted_replay(self).states == self.shard.states


def compacted_replay(ctx: ShardContext) -> ShareCoordinatorShard:
    """A shard rebuilt from the log as compaction leaves it: only the last record of
    each key, in log order (tombstones kept, as within delete.retention.ms)."""
    last: dict[bytes, int] = {}
    for offset, record in enumerate(ctx.log):
        last[CODEC.encode(record)[0]] = offset
    shard = ctx.factory(ctx.timer)
    for offset in sorted(last.values()):
        shard.replay(offset, -1, -1, ctx.log[offset])
    return shard


def b(first: int, last: int, state: int = 0, count: int = 1) -> StateBatch:
    return StateBatch(first, last, state, count)


# ---- the operations ---------------------------------------------------------------------

def test_initialize_then_read_and_write_round_trip():
    ctx = Ctx()
    assert ctx.init(state_epoch=1, start=100) == 0
    assert ctx.kinds() == [("snapshot", None)]
    code, state = ctx.read()
    assert code == 0 and (state.state_epoch, state.start_offset, state.state_batches) == \
        (1, 100, ())
    assert ctx.put((b(100, 109, 0, 1),), start=100, state_epoch=1) == 0
    assert ctx.kinds() == [("update", 0)]
    assert ctx.put((b(105, 105, 2, 1), b(100, 101, 2, 1)), state_epoch=1, complete=3) == 0
    code, state = ctx.read()
    assert code == 0
    assert state.state_batches == (b(100, 101, 2), b(102, 104, 0), b(105, 105, 2),
                                   b(106, 109, 0))
    assert (state.start_offset, state.delivery_complete_count) == (100, 3)
    assert ctx.put((), start=102, state_epoch=1) == 0
    assert ctx.read().state.state_batches == (b(102, 104, 0), b(105, 105, 2), b(106, 109, 0))
    assert ctx.summary() == StateSummary(0, 1, 102, 3, 0)
    ctx.assert_replay_equal()


def test_initialize_with_unknown_start_offset_and_again_resets_the_state():
    ctx = Ctx()
    assert ctx.init(start=-1) == 0
    assert ctx.summary() == StateSummary(0, 0, -1, -1, 0)
    ctx.put((b(5, 9, 2),), start=5)
    assert ctx.init(state_epoch=1, start=20) == 0  # alter offsets: a new state epoch
    state = ctx.state()
    assert (state.snapshot_epoch, state.state_epoch, state.start_offset,
            state.state_batches, state.delivery_complete_count) == (1, 1, 20, (), 0)
    ctx.assert_replay_equal()


def test_deltas_pile_up_into_a_snapshot_and_the_index_rolls_over():
    ctx = Ctx(per_snapshot=3)  # delta index range 6
    ctx.init(start=0)
    seen = []
    for i in range(11):
        assert ctx.put((b(i, i, 2),)) == 0
        seen += ctx.kinds()
    # three deltas after each snapshot; the index counts on across snapshots and rolls
    # over (at a snapshot) at the end of its range
    assert seen == [("update", 0), ("update", 1), ("update", 2), ("snapshot", None),
                    ("update", 3), ("update", 4), ("update", 5), ("snapshot", None),
                    ("update", 0), ("update", 1), ("update", 2)]
    snaps = [value_of(r) for r in ctx.log if r.type_id == SHARE_SNAPSHOT]
    assert [s.snapshot_epoch for s in snaps] == [0, 1, 2]
    assert snaps[1].state_batches == (b(0, 3, 2),)  # the whole state at that point
    updates = [value_of(r) for r in ctx.log if r.type_id == SHARE_UPDATE]
    assert all(len(u.state_batches) == 1 for u in updates)  # only what changed
    assert ctx.state().state_batches == (b(0, 10, 2),)
    ctx.assert_replay_equal()


def test_an_idle_snapshot_does_not_reset_the_delta_index():
    ctx = Ctx(per_snapshot=3, cold_ms=1000)
    ctx.init()
    ctx.put((b(0, 0, 2),))
    assert ctx.advance(1000) == []  # first tick: it was written to since the last one
    written = ctx.advance(1000)  # second tick: idle, with a delta -> snapshot
    assert [r.type_id for r in written] == [SHARE_SNAPSHOT]
    assert value_of(written[0]).snapshot_epoch == 1
    assert ctx.shard.states[(G, TOPIC, 0)].updates == 0
    assert ctx.advance(2000) == []  # nothing new: no more snapshots
    ctx.put((b(1, 1, 2),))
    assert ctx.kinds() == [("update", 1)]
    assert ctx.timer.is_scheduled(COLD_TIMER)
    ctx.assert_replay_equal()


def test_random_writes_replay_to_the_same_state_as_a_plain_merge():
    rng = random.Random(932)
    ctx = Ctx(per_snapshot=7)
    ctx.init(start=0)
    model = ctx.state()
    start = 0
    for _ in range(400):
        batches = []
        for _ in range(rng.randint(0, 3)):
            first = rng.randint(start, start + 60)
            batches.append(b(first, first + rng.randint(0, 8), rng.choice((0, 2, 4)),
                             rng.randint(0, 5)))
        if rng.random() < 0.2:
            start += rng.randint(1, 10)
            new_start = start
        else:
            new_start = -1
        batches = tuple(sorted(batches, key=lambda x: x.first_offset))
        # overlapping ranges inside one write are not what a leader sends
        if any(x.last_offset >= y.first_offset for x, y in pairwise(batches)):
            continue
        assert ctx.put(batches, start=new_start) == 0
        model = apply_update(model, StateWrite(0, 0, new_start, -1, batches))
    state = ctx.state()
    assert (state.start_offset, state.state_batches) == (model.start_offset,
                                                        model.state_batches)
    ctx.assert_replay_equal()


# ---- fencing and bad input: the right code, nothing written, nothing changed ------------

def test_a_stale_state_epoch_is_fenced_and_nothing_changes():
    ctx = Ctx()
    ctx.init(state_epoch=2, start=10)
    ctx.put((b(10, 12, 2),), state_epoch=2)
    before, log_len = ctx.state(), len(ctx.log)
    assert ctx.put((b(13, 20, 2),), start=30, state_epoch=1) == E.fenced_state_epoch
    assert ctx.last_records == [] and len(ctx.log) == log_len
    assert ctx.init(state_epoch=1, start=0) == E.fenced_state_epoch
    assert ctx.last_records == [] and ctx.state() == before
    assert ctx.put((b(13, 13, 2),), state_epoch=-1) == 0  # -1: not supplied, as Kafka
    assert ctx.put((b(14, 14, 2),), state_epoch=3) == 0  # newer: accepted, as Kafka
    assert ctx.state().state_epoch == 2  # only Initialize moves the state epoch
    ctx.assert_replay_equal()


def test_a_newer_leader_epoch_on_read_fences_the_old_leader():
    ctx = Ctx()
    ctx.init(start=0)
    code, state = ctx.read(leader_epoch=3)
    assert code == 0 and state.leader_epoch == 3
    assert ctx.kinds() == [("update", 0)]  # the new epoch is recorded
    assert ctx.read(leader_epoch=3).error_code == 0 and ctx.last_records == []
    assert ctx.read(leader_epoch=-1).error_code == 0 and ctx.last_records == []
    before = ctx.state()
    assert ctx.read(leader_epoch=2) == ReadResult(E.fenced_leader_epoch)
    assert ctx.put((b(0, 5, 2),), leader_epoch=2) == E.fenced_leader_epoch
    assert ctx.last_records == [] and ctx.state() == before
    assert ctx.put((b(0, 5, 2),), leader_epoch=3) == 0
    # the fence survives a reset of the state and a restart
    ctx.init(state_epoch=1, start=10)
    assert ctx.read(leader_epoch=2).error_code == E.fenced_leader_epoch
    ctx.assert_replay_equal()


def test_read_and_write_of_an_uninitialized_share_partition_are_invalid_requests():
    ctx = Ctx()
    assert ctx.read() == ReadResult(E.invalid_request)  # Kafka 4.3: uninitialized
    assert ctx.put((b(0, 1, 2),)) == E.invalid_request
    assert ctx.log == []
    assert ctx.summary() == StateSummary(0, 0, -1, -1, 0)  # the defaults, no error
    assert ctx.write(lambda s, now: s.delete(G, TOPIC, 0, now)) == 0  # nothing to delete
    assert ctx.log == []


def test_unknown_topics_partitions_and_bad_arguments():
    ctx = Ctx()
    assert ctx.init(topic=OTHER) == E.unknown_topic_or_partition
    assert ctx.init(partition=4) == E.unknown_topic_or_partition  # the topic has 4
    assert ctx.init(partition=-1) == E.invalid_request
    assert ctx.init(state_epoch=-1) == E.invalid_request
    assert ctx.init(start=-2) == E.invalid_request
    assert ctx.log == []
    ctx.init()
    assert ctx.put((b(5, 4, 2),)) == E.invalid_request  # last before first
    assert ctx.put((b(-3, 4, 2),)) == E.invalid_request
    assert ctx.put((b(3, 4, 1),)) == E.invalid_request  # Acquired is never persisted
    assert ctx.put((b(3, 4, 2, -1),)) == E.invalid_request
    assert ctx.read(partition=-1) == ReadResult(E.invalid_request)
    assert ctx.shard.read_summary(G, OTHER, 0).error_code == E.unknown_topic_or_partition
    assert ctx.write(lambda s, now: s.delete(G, OTHER, 0, now)) == \
        E.unknown_topic_or_partition
    assert len(ctx.log) == 1


# ---- delete ----------------------------------------------------------------------------

def test_delete_writes_tombstones_for_the_snapshot_and_every_delta_key():
    ctx = Ctx(per_snapshot=3)
    ctx.init(partition=1)
    ctx.init()
    for i in range(5):
        ctx.put((b(i, i, 2),))
    assert ctx.write(lambda s, now: s.delete(G, TOPIC, 0, now)) == 0
    dead = ctx.last_records
    assert all(r.value is None for r in dead)
    assert [(r.type_id, r.key.get("delta_index")) for r in dead] == \
        [(SHARE_SNAPSHOT, None)] + [(SHARE_UPDATE, i) for i in range(4)]
    assert (G, TOPIC, 0) not in ctx.shard.states and (G, TOPIC, 1) in ctx.shard.states
    assert ctx.read() == ReadResult(E.invalid_request)
    ctx.assert_replay_equal()
    # compaction then leaves only tombstones for the deleted share-partition
    survivors = compacted_log(ctx)
    assert all(r.value is None for r in survivors
               if r.key["partition"] == 0)
    # initialized again: a fresh state, the delta index starting over
    ctx.init(start=50)
    ctx.put((b(50, 50, 2),))
    assert ctx.kinds() == [("update", 0)]
    assert ctx.state().snapshot_epoch == 0
    ctx.assert_replay_equal()


def compacted_log(ctx: ShardContext) -> list[CoordinatorRecord]:
    last: dict[bytes, int] = {}
    for offset, record in enumerate(ctx.log):
        last[CODEC.encode(record)[0]] = offset
    return [ctx.log[o] for o in sorted(last.values())]


def test_deleting_a_topic_deletes_its_share_partitions_state():
    ctx = Ctx()
    ctx.image = image_with((TOPIC, 4), (OTHER, 1))
    ctx.init()
    ctx.init(topic=OTHER)
    ctx.put((b(0, 3, 2),))
    ctx.image = image_with((OTHER, 1))
    ctx.write(lambda s, now: s.on_metadata_update(ctx.image, now))
    assert [(r.type_id, r.value) for r in ctx.last_records] == \
        [(SHARE_SNAPSHOT, None), (SHARE_UPDATE, None)]
    assert list(ctx.shard.states) == [(G, OTHER, 0)]
    ctx.assert_replay_equal()


# ---- replay of a long history ------------------------------------------------------------

def test_compaction_keeps_exactly_what_replay_needs_over_many_roll_overs():
    ctx = Ctx(per_snapshot=5, cold_ms=10)
    ctx.init(start=0)
    for i in range(200):
        ctx.put((b(i, i, 4 if i % 7 == 0 else 2, 1 + i % 3),), start=i - 20 if i % 10 == 0
                and i >= 20 else -1, complete=i)
        if i % 37 == 0:
            ctx.advance(10)
            ctx.advance(10)  # idle snapshots at arbitrary points of the index range
    entry = ctx.shard.states[(G, TOPIC, 0)]
    assert entry.delta_keys == ctx.config.delta_index_range  # it did roll over
    ctx.assert_replay_equal()
    assert len(compacted_log(ctx)) < 20  # a snapshot and the deltas since, give or take


def test_the_state_epoch_is_in_every_delta_and_a_stale_delta_is_skipped():
    ctx = Ctx()
    ctx.init(state_epoch=4)
    ctx.put((b(0, 0, 2),), state_epoch=4)
    update = value_of(ctx.last_records[0])
    assert (update.state_epoch, update.snapshot_epoch, update.delta_index) == (4, 0, 0)
    # a delta of another state epoch does not apply, even with a matching snapshot epoch
    shard = ctx.replayed()
    stale = replace(update, state_epoch=3, state_batches=(b(1, 1, 2),), delta_index=9)
    shard.replay(99, -1, -1, update_record(G, TOPIC, 0, stale))
    assert shard.states[(G, TOPIC, 0)].state == ctx.state()


# ---- keys ------------------------------------------------------------------------------

def test_coordinator_key_is_kafkas():
    metadata_topic = uuid.UUID(int=1)  # Kafka's Uuid.METADATA_TOPIC_ID = Uuid(0, 1)
    assert kafka_uuid(metadata_topic) == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert coordinator_key("a:b", metadata_topic, 7) == "a:b:AAAAAAAAAAAAAAAAAAAAAQ:7"
    assert parse_coordinator_key("a:b:AAAAAAAAAAAAAAAAAAAAAQ:7") == ("a:b", metadata_topic, 7)
    for bad in ("", "g", "g:1", ":AAAAAAAAAAAAAAAAAAAAAQ:1", "g:AAAA:1",
                "g:AAAAAAAAAAAAAAAAAAAAAQ:x"):
        assert parse_coordinator_key(bad) is None, bad


@pytest.mark.parametrize("per_snapshot, expected", [(500, 1000), (0, 1), (40_000, 65_536)])
def test_delta_index_range(per_snapshot, expected):
    assert ShareCoordinatorConfig(updates_per_snapshot=per_snapshot).delta_index_range == \
        expected
