"""Share-group administration on the group shard: KIP-932's record order, and a
deletion interrupted after its pending-deletion record is visible on replay."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode as E

from headwater.group import records as R
from headwater.group.modern.operations import LEAVE_EPOCH
from headwater.group.share import admin as A
from tests.unit.group.consumer_helpers import tid
from tests.unit.group.test_share_heartbeat import ShareStory

pytestmark = pytest.mark.timeout(10)


def emptied() -> ShareStory:
    ctx = ShareStory({"foo": 2})
    ctx.hb("m1", 0, ["foo"])
    ctx.hb("m1", LEAVE_EPOCH)
    assert ctx.group().initialized == {tid("foo"): frozenset({0, 1})}
    return ctx


def test_delete_offsets_pending_then_complete_and_replay_sees_the_pending_step() -> None:
    ctx = emptied()
    plan = ctx.write(lambda s, now: A.delete_offsets(s, "g", ["foo", "nope"]))
    assert plan.delete == {tid("foo"): [0, 1]}
    assert [(r.name, r.error_code) for r in plan.rows] == [("foo", 0), ("nope", 3)]
    assert ctx.types() == [(R.SHARE_GROUP_STATE_PARTITION_METADATA, False)]
    assert ctx.group().deleting == {tid("foo"): "foo"} and not ctx.group().initialized
    # A crash here: the replayed shard names the deletion to finish.
    assert A.pending_deletions(ctx.replayed()) == {"g": {tid("foo"): [0, 1]}}
    ctx.assert_replay_matches()
    ctx.write(lambda s, now: A.complete_deletion(s, "g", [tid("foo")]))
    assert ctx.group().deleting == {} and A.pending_deletions(ctx.shard) == {}
    ctx.assert_replay_matches()


def test_alter_and_delete_need_an_empty_share_group() -> None:
    ctx = ShareStory({"foo": 1})
    ctx.hb("m1", 0, ["foo"])
    for op in (lambda s, now: A.alter_offsets(s, "g", [("foo", [(0, 0)])]),
               lambda s, now: A.delete_offsets(s, "g", ["foo"]),
               lambda s, now: A.delete_group_state(s, "g")):
        with pytest.raises(A.AdminError) as err:
            ctx.write(op)
        assert err.value.code == E.non_empty_group
    with pytest.raises(A.AdminError) as err:
        ctx.write(lambda s, now: A.delete_offsets(s, "none", ["foo"]))
    assert err.value.code == E.group_id_not_found


def test_alter_offsets_creates_an_unknown_group_as_kafka_does() -> None:
    """Kafka's `getOrMaybeCreateShareGroup(groupId, true)`: the group exists once a
    partition is initialized (record 15, replayed after a restart); with every
    partition refused nothing is written and no group appears."""
    ctx = ShareStory({"foo": 2})
    plan = ctx.write(lambda s, now: A.alter_offsets(s, "new", [("nope", [(0, 1)])]))
    assert [(r.name, r.partitions) for r in plan.rows] == \
        [("nope", {0: (E.unknown_topic_or_partition,
                       "This server does not host this topic-partition.")})]
    assert "new" not in ctx.shard.groups
    plan = ctx.write(lambda s, now: A.alter_offsets(s, "new", [("foo", [(1, 7)])]))
    assert plan.initialize == [(tid("foo"), 1, 7)]
    group = ctx.shard.groups["new"]
    assert group.group_type == "share" and not group.members and group.group_epoch == 0
    assert group.initialized == {tid("foo"): frozenset({1})}
    assert "new" in ctx.replayed().groups
    ctx.assert_replay_matches()
    # A member joining later is assigned the partitions as in any new group.
    joined = ctx.hb("m1", 0, ["foo"], group="new")
    assert joined.error_code == 0 and sorted(joined.assignment[tid("foo")]) == [0, 1]


def test_delete_group_moves_everything_to_deleting_first() -> None:
    ctx = emptied()
    plan = ctx.write(lambda s, now: A.delete_group_state(s, "g"))
    assert plan.delete == {tid("foo"): [0, 1]}
    assert ctx.group().deleting == {tid("foo"): "foo"}
    tombstones = ctx.write(lambda s, now: s.delete_group("g"))
    assert tombstones == 0
    assert ctx.types()[-2:] == [(R.SHARE_GROUP_STATE_PARTITION_METADATA, True),
                                (R.SHARE_GROUP_METADATA, True)]
    assert "g" not in ctx.shard.groups


def test_a_member_joining_during_an_interrupted_deletion_waits_for_its_completion() -> None:
    """After a crash between the pending-deletion record and the state tombstones, a new
    member is not given the deleting topic (it would read the old state); the completing
    record bumps the group epoch and the next heartbeat assigns it."""
    ctx = emptied()
    ctx.write(lambda s, now: A.delete_offsets(s, "g", ["foo"]))
    joined = ctx.hb("m2", 0, ["foo"])
    assert joined.error_code == 0 and not joined.assignment.get(tid("foo"))
    assert tid("foo") not in ctx.group().initialized
    epoch = ctx.group().group_epoch
    ctx.write(lambda s, now: A.complete_deletion(s, "g", [tid("foo")]))
    assert ctx.group().group_epoch == epoch + 1
    again = ctx.hb("m2", joined.member_epoch)
    assert sorted(again.assignment[tid("foo")]) == [0, 1]
    ctx.assert_replay_matches()
