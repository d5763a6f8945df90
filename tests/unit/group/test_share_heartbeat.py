"""Share-group membership on a GroupShard with a fake clock: records, epochs, errors,
timers, types, replay (Kafka's GroupMetadataManagerTest share scenarios)."""

from __future__ import annotations

from typing import Any

from headwater.coordinator.runtime import Result
from headwater.group import records as R
from headwater.group.share.group import ShareGroup
from headwater.group.share.operations import ShareHeartbeatRequest
from tests.unit.group.consumer_helpers import named, tid
from tests.unit.group.context import GroupContext


class ShareStory(GroupContext):
    def __init__(self, topics: dict[str, int] | None = None, **config: str) -> None:
        # The stories assign at once; test_share_initial_assignment.py covers the wait.
        config.setdefault("group.share.assignment.interval.ms", "0")
        super().__init__(topics, **config)

    def hb(self, member: str, epoch: int, topics: Any = None, group: str = "g",
           rack: str | None = None) -> Any:
        req = ShareHeartbeatRequest(group, member, epoch, rack_id=rack,
                                    subscribed_topic_names=topics, client_id="client",
                                    client_host="/127.0.0.1")
        return self.write(lambda s, now: s.share.heartbeat(req, now))

    def group(self, group_id: str = "g") -> ShareGroup:
        group = self.shard.groups[group_id]
        assert isinstance(group, ShareGroup)
        return group

    def types(self) -> list[tuple[int, bool]]:
        return [(r.type_id, r.value is None) for r in self.last_records]

    def assert_replay_matches(self) -> None:
        fresh = self.replayed()
        assert {g: x.snapshot() for g, x in fresh.groups.items() if isinstance(x, ShareGroup)} \
            == {g: x.snapshot() for g, x in self.shard.groups.items()
                if isinstance(x, ShareGroup)}


def test_join_writes_kafkas_records_and_gets_every_partition() -> None:
    ctx = ShareStory({"foo": 3})
    resp = ctx.hb("m1", 0, ("foo",))
    assert (resp.error_code, resp.member_id, resp.member_epoch) == (0, "m1", 1)
    assert resp.heartbeat_interval_ms == 5000
    assert named(resp.assignment) == {"foo": [0, 1, 2]}
    assert ctx.types() == [(10, False), (11, False), (13, False), (15, False), (12, False),
                           (14, False)]
    assert ctx.group().state_name() == "Stable"
    # A plain heartbeat: no records, no assignment (unchanged).
    again = ctx.hb("m1", 1)
    assert (again.error_code, again.member_epoch, again.assignment) == (0, 1, None)
    assert ctx.last_records == []
    ctx.assert_replay_matches()


def test_second_member_shares_the_topic_and_the_first_catches_up() -> None:
    ctx = ShareStory({"foo": 4})
    ctx.hb("a", 0, ("foo",))
    b = ctx.hb("b", 0, ("foo",))
    assert b.member_epoch == 2 and len(b.assignment[tid("foo")]) == 2
    a = ctx.hb("a", 1)
    assert a.member_epoch == 2 and len(a.assignment[tid("foo")]) == 2
    assert set(a.assignment[tid("foo")]) | set(b.assignment[tid("foo")]) == {0, 1, 2, 3}
    described = ctx.shard.share.describe(["g"], True)[0]
    assert (described["group_epoch"], described["assignment_epoch"]) == (2, 2)
    assert described["authorized_operations"] > 0
    ctx.assert_replay_matches()


def test_epoch_checks_and_unknown_members_write_nothing() -> None:
    ctx = ShareStory({"foo": 1})
    ctx.hb("a", 0, ("foo",))
    ctx.hb("b", 0, ("foo",))
    ctx.hb("a", 1)  # a: epoch 2, previous 1
    log_size = len(ctx.log)
    assert ctx.hb("a", 3).error_code == 110  # ahead
    assert ctx.hb("a", 1).error_code == 0  # the previous epoch: a lost response
    assert ctx.hb("b", 2).error_code == 0
    assert ctx.hb("zz", 1).error_code == 25
    assert ctx.hb("zz", -1).error_code == 25
    assert ctx.hb("a", 1, group="nope").error_code == 69
    assert ctx.hb("a", 0).error_code == 42  # no topics on join
    assert ctx.hb("", 0, ("foo",)).error_code == 42
    assert ctx.hb("a", 2, rack="").error_code == 42
    assert ctx.hb("a", -5).error_code == 42
    assert len(ctx.log) == log_size


def test_rejoin_with_epoch_zero_keeps_the_member() -> None:
    ctx = ShareStory({"foo": 2})
    ctx.hb("a", 0, ("foo",))
    resp = ctx.hb("a", 0, ("foo",))
    assert (resp.error_code, resp.member_epoch) == (0, 1)
    assert named(resp.assignment) == {"foo": [0, 1]}


def test_leave_and_session_expiry_fence_and_notify() -> None:
    ctx = ShareStory({"foo": 2}, **{"group.share.session.timeout.ms": "3000"})
    removed: list[tuple[str, str]] = []
    ctx.shard.share.member_removed = lambda g, m: removed.append((g, m))
    ctx.hb("a", 0, ("foo",))
    ctx.hb("b", 0, ("foo",))
    resp = ctx.hb("a", -1)
    assert (resp.error_code, resp.member_epoch) == (0, -1)
    assert ctx.types() == [(14, True), (13, True), (10, True), (11, False)]
    assert removed == [("g", "a")]
    ctx.advance(2999)
    assert "b" in ctx.group().members
    written = ctx.advance(1)
    assert [(r.type_id, r.value is None) for r in written] == [
        (14, True), (13, True), (10, True), (11, False)]
    assert removed == [("g", "a"), ("g", "b")]
    assert ctx.group().state_name() == "Empty"
    assert ctx.hb("b", 2).error_code == 25
    ctx.assert_replay_matches()


def test_group_config_overrides_session_and_heartbeat() -> None:
    ctx = ShareStory({"foo": 1})
    from headwater.metadata import records as MR
    ctx.image = ctx.image.apply([MR.ConfigRecord(32, "g", "share.session.timeout.ms", "50000"),
                                 MR.ConfigRecord(32, "g", "share.heartbeat.interval.ms", "7000")],
                                1)
    assert ctx.hb("a", 0, ("foo",)).heartbeat_interval_ms == 7000
    ctx.advance(49_999)
    assert "a" in ctx.group().members
    ctx.advance(1)
    assert "a" not in ctx.group().members


def test_max_size_and_other_group_types() -> None:
    ctx = ShareStory({"foo": 1}, **{"group.share.max.size": "2"})
    ctx.hb("a", 0, ("foo",))
    ctx.hb("b", 0, ("foo",))
    assert ctx.hb("c", 0, ("foo",)).error_code == 81  # GROUP_MAX_SIZE_REACHED
    assert ctx.hb("a", 0, ("foo",)).error_code == 0  # an existing member may rejoin
    ctx.shard.create_simple_group("classic")
    resp = ctx.hb("a", 0, ("foo",), group="classic")
    assert (resp.error_code, resp.error_message) == (69, "Group classic is not a share group.")
    assert ctx.shard.share.describe(["classic"], False)[0]["error_code"] == 69


def test_metadata_changes_bump_the_epoch_and_reassign() -> None:
    ctx = ShareStory({"foo": 2})
    ctx.hb("a", 0, ("foo",))
    ctx.set_topics({"foo": 4})
    assert ctx.group().group_epoch == 2
    resp = ctx.hb("a", 1)
    assert named(resp.assignment) == {"foo": [0, 1, 2, 3]}
    ctx.set_topics({})
    assert ctx.group().initialized == {}  # record 15 forgets a deleted topic
    resp = ctx.hb("a", resp.member_epoch)
    assert resp.assignment is not None and dict(resp.assignment) == {}
    ctx.assert_replay_matches()


def test_delete_tombstones_everything_and_offsets_are_refused() -> None:
    ctx = ShareStory({"foo": 2})
    ctx.hb("a", 0, ("foo",))
    assert ctx.write(lambda s, now: s.delete_group("g")) == 68  # NON_EMPTY_GROUP
    group = ctx.group()
    assert group.validate_offset_commit("", None, -1, 8) == 69
    assert group.validate_offset_fetch(None, -1) == 0
    assert ctx.shard.list_groups(None, {"share"}) == [
        {"group_id": "g", "protocol_type": "share", "group_state": "Stable",
         "group_type": "share"}]
    assert ctx.shard.share.state_partitions("g") == {tid("foo"): frozenset({0, 1})}
    ctx.hb("a", -1)
    assert ctx.write(lambda s, now: s.delete_group("g")) == 0
    assert ctx.types()[-2:] == [(R.SHARE_GROUP_STATE_PARTITION_METADATA, True),
                                (R.SHARE_GROUP_METADATA, True)]
    assert "g" not in ctx.shard.groups
    assert ctx.shard.share.describe(["g"], False)[0]["error_code"] == 69
    ctx.write(lambda s, now: Result([]))
    assert "g" not in ctx.replayed().groups
