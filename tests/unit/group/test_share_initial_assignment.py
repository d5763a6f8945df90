"""The first assignment of an empty share group waits `share.assignment.interval.ms`, so
members started together share the partitions (Kafka 4.4 answers a join with an empty
assignment and assigns about a second later)."""

from __future__ import annotations

import pytest

from tests.support.coordinator import FakeTimer
from tests.unit.group.consumer_helpers import tid
from tests.unit.group.test_share_heartbeat import ShareStory

pytestmark = pytest.mark.timeout(10)


def story() -> ShareStory:
    return ShareStory({"foo": 4}, **{"group.share.assignment.interval.ms": "1000"})


def test_members_joining_an_empty_group_together_share_its_partitions() -> None:
    ctx = story()
    first = ctx.hb("m1", 0, ["foo"])
    assert first.error_code == 0 and first.member_epoch == 1
    assert dict(first.assignment) == {}
    assert first.heartbeat_interval_ms == 1050  # come back when the assignment is made
    ctx.advance(300)
    second = ctx.hb("m2", 0, ["foo"])
    assert dict(second.assignment) == {} and second.heartbeat_interval_ms == 750
    ctx.advance(700)  # the timer: a new epoch with both members assigned
    a = ctx.hb("m1", first.member_epoch)
    b = ctx.hb("m2", second.member_epoch)
    assert a.member_epoch == b.member_epoch == ctx.group().group_epoch
    assert set(a.assignment[tid("foo")]) | set(b.assignment[tid("foo")]) == {0, 1, 2, 3}
    assert len(a.assignment[tid("foo")]) == len(b.assignment[tid("foo")]) == 2
    assert a.heartbeat_interval_ms == 5000
    ctx.assert_replay_matches()
    # A third member joining the running group is assigned at once.
    third = ctx.hb("m3", 0, ["foo"])
    assert third.assignment.get(tid("foo"))


def test_a_lone_member_gets_everything_after_the_interval() -> None:
    ctx = story()
    first = ctx.hb("m1", 0, ["foo"])
    assert dict(first.assignment) == {}
    assert ctx.hb("m1", first.member_epoch).assignment is None  # not yet
    ctx.advance(1000)
    again = ctx.hb("m1", first.member_epoch)
    assert sorted(again.assignment[tid("foo")]) == [0, 1, 2, 3]
    assert again.member_epoch == first.member_epoch + 1


def test_everyone_left_before_the_timer() -> None:
    ctx = story()
    first = ctx.hb("m1", 0, ["foo"])
    ctx.hb("m1", -1)
    ctx.advance(1000)
    assert not ctx.group().members
    joined = ctx.hb("m2", 0, ["foo"])  # an empty group again: it waits again
    assert dict(joined.assignment) == {} and joined.member_epoch > first.member_epoch
    ctx.advance(1000)
    assert sorted(ctx.hb("m2", joined.member_epoch).assignment[tid("foo")]) == [0, 1, 2, 3]


def test_a_restart_before_the_timer_assigns_at_load() -> None:
    ctx = story()
    first = ctx.hb("m1", 0, ["foo"])
    assert dict(first.assignment) == {}
    # The broker restarts before the timer fired: the loaded shard assigns at once.
    timer = FakeTimer(ctx)
    shard = ctx.factory(timer)
    for offset, record in enumerate(ctx.log):
        shard.replay(offset, -1, -1, record)
    shard.on_loaded(ctx.now)
    ctx.shard, ctx.timer = shard, timer
    ctx.advance(0)
    again = ctx.hb("m1", first.member_epoch)
    assert sorted(again.assignment[tid("foo")]) == [0, 1, 2, 3]
