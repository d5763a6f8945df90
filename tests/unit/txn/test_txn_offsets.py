"""Transactional offset commits on a group shard (seed 5.6): pending until the marker,
committed on COMMIT, dropped on ABORT, UNSTABLE_OFFSET_COMMIT for require_stable."""

from __future__ import annotations

from headwater.group import records as R
from headwater.group.offsets import PartitionCommit
from tests.unit.group.classic_helpers import stable_group
from tests.unit.group.consumer_helpers import Story
from tests.unit.txn.context import TxnGroupContext

PID, EPOCH = 4000, 3
UNSTABLE_OFFSET_COMMIT = 88
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
DAY = 24 * 3600 * 1000


class TxnStory(TxnGroupContext, Story):
    """KIP-848 heartbeats plus transactional writes."""


def txn_commit(ctx: TxnGroupContext, group: str, parts: list[PartitionCommit],
               member: str = "", generation: int = -1, pid: int = PID, topic: str = "t"):
    return ctx.write(lambda s, now: s.offsets.commit_transactional(
        group, member, None, generation, [(topic, parts)], now), pid, EPOCH)


def plain_commit(ctx: TxnGroupContext, group: str, parts: list[PartitionCommit]):
    return ctx.write(lambda s, now: s.offsets.commit(group, "", None, -1, [("t", parts)], 9,
                                                     now))


def fetch(ctx: TxnGroupContext, group: str = "g", stable: bool = False, partitions=(0, 1)):
    err, found = ctx.shard.offsets.fetch(group, None, -1, [("t", list(partitions))], stable)
    assert err == 0
    return {p: (c if isinstance(c, int) or c is None else c.offset)
            for p, c in found["t"].items()}


def test_pending_until_commit_marker_then_visible():
    ctx = TxnGroupContext({"t": 2})
    plain_commit(ctx, "g", [PartitionCommit(0, 5)])
    assert txn_commit(ctx, "g", [PartitionCommit(0, 10), PartitionCommit(1, 20)]) == \
        {"t": {0: 0, 1: 0}}
    assert [r.type_id for r in ctx.last_records] == [R.OFFSET_COMMIT, R.OFFSET_COMMIT]
    # Pending: plain fetches see the last committed value, stable ones are told to wait.
    assert fetch(ctx) == {0: 5, 1: None}
    assert fetch(ctx, stable=True) == {0: UNSTABLE_OFFSET_COMMIT, 1: UNSTABLE_OFFSET_COMMIT}
    assert fetch(ctx, "other", stable=True) == {0: None, 1: None}
    ctx.marker(PID, EPOCH, commit=True)
    assert fetch(ctx, stable=True) == {0: 10, 1: 20}
    assert ctx.shard.offsets.pending == {}
    fresh = ctx.replayed()
    assert fresh.offsets.offsets == ctx.shard.offsets.offsets and fresh.offsets.pending == {}


def test_abort_marker_discards_pending_offsets():
    ctx = TxnGroupContext({"t": 2})
    plain_commit(ctx, "g", [PartitionCommit(0, 5)])
    txn_commit(ctx, "g", [PartitionCommit(0, 10), PartitionCommit(1, 20)])
    ctx.marker(PID, EPOCH, commit=False)
    assert fetch(ctx, stable=True) == {0: 5, 1: None}
    assert ctx.replayed().offsets.offsets == ctx.shard.offsets.offsets


def test_replay_of_an_unfinished_transaction_keeps_it_pending():
    ctx = TxnGroupContext({"t": 2})
    txn_commit(ctx, "g", [PartitionCommit(0, 10)])
    fresh = ctx.replayed()
    assert fresh.offsets.has_pending("g", "t", 0) and not fresh.offsets.has_pending("g", "t", 1)
    assert "g" in fresh.groups  # the simple group exists for the pending commit
    # Another producer's marker resolves nothing of this one.
    ctx.marker(PID + 1, 0, commit=True)
    assert fetch(ctx) == {0: None, 1: None}


def test_a_marker_replayed_again_after_the_next_transaction_ends_nothing_of_it():
    """On the shared log the owner of `__consumer_offsets` hears of a marker committed
    twice (from its coordinator, then from PostgreSQL), the second time possibly after the
    producer's next transaction wrote its offsets: those are not the marker's. Seen as
    Kafka's TransactionalMessageCopier resuming after an aborted batch."""
    ctx = TxnGroupContext({"t": 1})
    txn_commit(ctx, "g", [PartitionCommit(0, 340)])
    first_marker = len(ctx.entries)
    ctx.marker(PID, EPOCH, commit=True)
    txn_commit(ctx, "g", [PartitionCommit(0, 360)])
    ctx.shard.replay_end_transaction(PID, EPOCH, True, first_marker)  # told again
    assert fetch(ctx, stable=True, partitions=(0,)) == {0: UNSTABLE_OFFSET_COMMIT}
    ctx.marker(PID, EPOCH, commit=False)
    assert fetch(ctx, stable=True, partitions=(0,)) == {0: 340}
    assert ctx.replayed().offsets.offsets == ctx.shard.offsets.offsets


def test_a_marker_replayed_late_commits_only_the_offsets_before_it():
    """The owner replays a marker committed by a coordinator on another broker after
    the producer's next transaction already appended its offsets behind it."""
    ctx = TxnGroupContext({"t": 2})
    txn_commit(ctx, "g", [PartitionCommit(0, 10), PartitionCommit(1, 20)])
    marker = len(ctx.entries)
    ctx.entries.append((PID, EPOCH, True))  # in the log, not replayed yet
    txn_commit(ctx, "g", [PartitionCommit(0, 30)])
    ctx.shard.replay_end_transaction(PID, EPOCH, True, marker)
    assert fetch(ctx) == {0: 10, 1: 20}
    assert fetch(ctx, stable=True) == {0: UNSTABLE_OFFSET_COMMIT, 1: 20}
    ctx.marker(PID, EPOCH, commit=True)
    assert fetch(ctx, stable=True) == {0: 30, 1: 20}
    assert ctx.shard.offsets.pending == {}
    assert ctx.replayed().offsets.offsets == ctx.shard.offsets.offsets


def test_a_plain_commit_after_the_transactional_one_wins():
    ctx = TxnGroupContext({"t": 1})
    txn_commit(ctx, "g", [PartitionCommit(0, 10)])
    plain_commit(ctx, "g", [PartitionCommit(0, 99)])  # later in the log
    ctx.marker(PID, EPOCH, commit=True)
    assert fetch(ctx, partitions=(0,)) == {0: 99}
    # ...but a transactional commit written after a plain one replaces it.
    txn_commit(ctx, "g", [PartitionCommit(0, 120)])
    ctx.marker(PID, EPOCH, commit=True)
    assert fetch(ctx, partitions=(0,)) == {0: 120}
    assert ctx.replayed().offsets.offsets == ctx.shard.offsets.offsets


def test_expiry_leaves_partitions_with_pending_offsets_and_their_group_alone():
    ctx = TxnGroupContext({"t": 2}, **{"offsets.retention.minutes": "1440"})
    plain_commit(ctx, "g", [PartitionCommit(0, 1)])
    txn_commit(ctx, "g", [PartitionCommit(1, 7)])
    ctx.now += DAY
    ctx.write(lambda s, now: s.expire_offsets(now))
    # Only the expired offset goes; the group stays while its transaction is open.
    assert [(r.key["partition"], r.value) for r in ctx.last_records] == [(0, None)]
    assert "g" in ctx.shard.groups
    ctx.marker(PID, EPOCH, commit=True)
    assert fetch(ctx) == {0: None, 1: 7}


def test_classic_group_rules_for_transactional_commits():
    ctx = TxnGroupContext({"t": 2}, **{"group.initial.rebalance.delay.ms": "0"})
    (member,) = stable_group(ctx, "c1")
    generation = ctx.shard.groups["g"].generation
    # Without member/generation (TxnOffsetCommit v0-2) a non-empty group accepts it...
    assert txn_commit(ctx, "g", [PartitionCommit(0, 1)]) == {"t": {0: 0}}
    # ...while a plain commit like that is refused.
    assert plain_commit(ctx, "g", [PartitionCommit(0, 1)]) == {"t": {0: UNKNOWN_MEMBER_ID}}
    assert txn_commit(ctx, "g", [PartitionCommit(0, 2)], member, generation) == {"t": {0: 0}}
    assert txn_commit(ctx, "g", [PartitionCommit(0, 3)], member, generation + 1) == \
        {"t": {0: ILLEGAL_GENERATION}}
    assert txn_commit(ctx, "g", [PartitionCommit(0, 3)], "ghost", generation) == \
        {"t": {0: UNKNOWN_MEMBER_ID}}
    assert txn_commit(ctx, "nobody", [PartitionCommit(0, 3)], "", 4) == \
        {"t": {0: ILLEGAL_GENERATION}}


def test_consumer_group_member_epochs_without_the_offset_commit_version_rule():
    ctx = TxnStory({"foo": 2, "t": 1})
    member = "m-1"
    resp = ctx.hb(member, 0)
    assert resp.error_code == 0
    epoch = resp.member_epoch
    ok = ctx.write(lambda s, now: s.offsets.commit_transactional(
        "g", member, None, epoch, [("foo", [PartitionCommit(0, 1)])], now), PID, EPOCH)
    assert ok == {"foo": {0: 0}}
    stale = ctx.write(lambda s, now: s.offsets.commit_transactional(
        "g", member, None, epoch + 1, [("foo", [PartitionCommit(0, 1)])], now), PID, EPOCH)
    assert stale == {"foo": {0: ILLEGAL_GENERATION}}  # STALE_MEMBER_EPOCH, as Kafka maps it
