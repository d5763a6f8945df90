"""Streams-group membership on a GroupShard with a fake clock: records, epochs, statuses,
errors, reconciliation, timers and replay (Kafka 4.4's GroupMetadataManager streams
scenarios, KIP-1071)."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode as E

from headwater.group import records as R
from headwater.group.streams.configured import (
    ASSIGNMENT_DELAYED,
    MISSING_CLIENT_TAGS,
    MISSING_INTERNAL_TOPICS,
    MISSING_SOURCE_TOPICS,
    STALE_TOPOLOGY,
)
from headwater.group.streams.group import STABLE, UNREVOKED_TASKS, StreamsGroup
from headwater.group.streams.operations import StreamsHeartbeatRequest
from headwater.group.streams.tasks import TasksTuple
from headwater.group.streams.topology import Subtopology, TopicInfo, Topology
from tests.unit.group.context import GroupContext

pytestmark = pytest.mark.timeout(60)

# A word count: subtopology 0 reads "input" and writes the repartition topic, which
# subtopology 1 reads into a store with a changelog.
REPARTITION = "app-counts-repartition"
CHANGELOG = "app-counts-changelog"
TOPOLOGY = Topology.of(0, [
    Subtopology("0", source_topics=("input",), repartition_sink_topics=(REPARTITION,)),
    Subtopology("1", repartition_source_topics=(TopicInfo(REPARTITION),),
                state_changelog_topics=(TopicInfo(CHANGELOG),)),
])
NONE = TasksTuple()


class StreamsStory(GroupContext):
    def __init__(self, topics: dict[str, int] | None = None, **config: str) -> None:
        # The stories assign at once; the waits have their own tests below.
        config.setdefault("group.streams.initial.rebalance.delay.ms", "0")
        config.setdefault("group.streams.assignment.interval.ms", "0")
        super().__init__(topics, **config)

    def hb(self, member: str, epoch: int, topology: Topology | None = None,
           owned: TasksTuple | None = None, process: str | None = None,
           group: str = "g", **fields: Any) -> Any:
        if epoch == 0:
            topology = topology or TOPOLOGY
            owned = owned or NONE
            process = process or f"process-{member}"
            fields.setdefault("rebalance_timeout_ms", 30000)
        sent = ((owned.active, owned.standby, owned.warmup) if owned is not None
                else (None, None, None))
        req = StreamsHeartbeatRequest(group, member, epoch, topology=topology,
                                      sent_tasks=sent, process_id=process, client_id="client",
                                      client_host="/127.0.0.1", **fields)
        return self.write(lambda s, now: s.streams.heartbeat(req, now))

    def group(self, group_id: str = "g") -> StreamsGroup:
        group = self.shard.groups[group_id]
        assert isinstance(group, StreamsGroup)
        return group

    def types(self) -> list[tuple[int, bool]]:
        return [(r.type_id, r.value is None) for r in self.last_records]

    def assert_replay_matches(self) -> None:
        fresh = self.replayed()
        assert {g: x.snapshot() for g, x in fresh.groups.items() if isinstance(x, StreamsGroup)} \
            == {g: x.snapshot() for g, x in self.shard.groups.items()
                if isinstance(x, StreamsGroup)}


def everything(resp: Any) -> TasksTuple:
    assert resp.assignment is not None
    return resp.assignment


def test_the_first_member_initialises_the_topology_and_the_broker_is_asked_for_its_topics() -> None:
    ctx = StreamsStory({"input": 4})
    resp = ctx.hb("m1", 0)
    # A new group is at epoch 1: the first member's join makes it 2.
    assert (resp.error_code, resp.member_id, resp.member_epoch) == (0, "m1", 2)
    # Records 19, 23, 17, 21, 20, 22: member, topology, epoch, target, target epoch, current.
    assert ctx.types() == [(19, False), (23, False), (17, False), (21, False), (20, False),
                           (22, False)]
    assert [t.name for t in resp.to_create] == [CHANGELOG, REPARTITION]
    assert {t.name: t.partitions for t in resp.to_create} == {CHANGELOG: 4, REPARTITION: 4}
    assert [code for code, _ in resp.status] == [MISSING_INTERNAL_TOPICS]
    assert everything(resp).is_empty()  # nothing is assigned until the topics exist
    assert ctx.group().state_name() == "NotReady"
    ctx.assert_replay_matches()


def test_once_the_internal_topics_exist_the_member_gets_every_task() -> None:
    ctx = StreamsStory({"input": 4})
    ctx.hb("m1", 0)
    ctx.set_topics({"input": 4, REPARTITION: 4, CHANGELOG: 4})
    resp = ctx.hb("m1", 2)
    assert resp.error_code == 0 and resp.status == ()
    assert resp.member_epoch == 3
    tasks = everything(resp)
    assert dict(tasks.active) == {"0": frozenset(range(4)), "1": frozenset(range(4))}
    assert ctx.group().state_name() == "Stable"
    assert ctx.group().validated_topology_epoch == 0
    # A plain heartbeat then: no records, no tasks (unchanged).
    again = ctx.hb("m1", 3)
    assert (again.error_code, again.member_epoch, again.assignment) == (0, 3, None)
    assert ctx.last_records == []
    ctx.assert_replay_matches()


def test_missing_source_topics_are_reported_and_nothing_is_created() -> None:
    ctx = StreamsStory({})
    resp = ctx.hb("m1", 0)
    assert resp.error_code == 0
    assert resp.status == ((MISSING_SOURCE_TOPICS, "Source topics input are missing."),)
    assert resp.to_create == ()


def ready(**config: str) -> StreamsStory:
    return StreamsStory({"input": 4, REPARTITION: 4, CHANGELOG: 4}, **config)


def test_a_second_member_gets_tasks_only_after_the_first_revokes_them() -> None:
    ctx = ready()
    first = everything(ctx.hb("m1", 0))
    assert sum(len(p) for p in first.active.values()) == 8
    second = ctx.hb("m2", 0)
    assert second.member_epoch == 3
    # m2's target half is still m1's: it waits (nothing given yet).
    assert everything(second).active == {} or sum(
        len(p) for p in everything(second).active.values()) == 0
    # m1 heartbeats: it must revoke, keeps its epoch.
    revoke = ctx.hb("m1", 2, owned=first)
    assert revoke.member_epoch == 2
    kept = everything(revoke)
    assert sum(len(p) for p in kept.active.values()) == 4
    assert ctx.group().members["m1"].state == UNREVOKED_TASKS
    assert ctx.group().state_name() == "Reconciling"
    # m1 reports it let them go: it moves to epoch 2.
    done = ctx.hb("m1", 2, owned=kept)
    assert done.member_epoch == 3
    assert ctx.group().members["m1"].state == STABLE
    # m2 now gets the released half.
    got = ctx.hb("m2", 3, owned=NONE)
    assert sum(len(p) for p in everything(got).active.values()) == 4
    union = {(s, p) for t in (kept, everything(got)) for s, ps in t.active.items() for p in ps}
    assert len(union) == 8
    assert ctx.group().state_name() == "Stable"
    ctx.assert_replay_matches()


def test_leaving_tombstones_the_member_and_bumps_the_epoch() -> None:
    ctx = ready()
    ctx.hb("m1", 0)
    resp = ctx.hb("m1", -1)
    assert (resp.error_code, resp.member_epoch) == (0, -1)
    # The last member: the empty group's target epoch follows (record 20).
    assert ctx.types() == [(22, True), (21, True), (19, True), (17, False), (20, False)]
    assert ctx.group().state_name() == "Empty"
    ctx.assert_replay_matches()


def test_the_session_timeout_fences_a_silent_member() -> None:
    ctx = ready(**{"group.streams.session.timeout.ms": "45000"})
    ctx.hb("m1", 0)
    ctx.hb("m2", 0)
    ctx.advance(44_000)
    ctx.hb("m1", 2, owned=None)
    ctx.advance(2_000)
    assert "m2" not in ctx.group().members and "m1" in ctx.group().members


@pytest.mark.parametrize(("epoch", "fields", "code", "message"), [
    (0, {"rebalance_timeout_ms": -1}, E.invalid_request,
     "RebalanceTimeoutMs must be provided in first request."),
    (-3, {}, E.invalid_request, "MemberEpoch is -3, but must be greater than or equal to -2."),
    (1, {"topology": TOPOLOGY}, E.invalid_request,
     "Topology can only be provided when (re-)joining."),
    (-2, {}, E.invalid_request, "InstanceId can't be null."),
])
def test_hostile_heartbeats_get_kafkas_errors_and_write_nothing(
        epoch: int, fields: dict[str, Any], code: int, message: str) -> None:
    ctx = ready()
    ctx.hb("m1", 0)
    resp = ctx.hb("m2", epoch, **fields)
    assert (resp.error_code, resp.error_message) == (code, message)
    assert ctx.last_records == []
    assert ctx.group().members.keys() == {"m1"}


def test_a_changelog_with_a_partition_count_is_an_invalid_topology() -> None:
    ctx = ready()
    bad = Topology.of(0, [Subtopology("0", source_topics=("input",),
                                      state_changelog_topics=(TopicInfo("c", 3),))])
    resp = ctx.hb("m1", 0, topology=bad)
    assert resp.error_code == E.streams_invalid_topology
    assert resp.error_message == ("Changelog topic c must have an undefined partition count, "
                                  "but it is set to 3.")


def test_a_different_topology_at_the_same_epoch_is_refused_and_an_older_one_is_stale() -> None:
    ctx = ready()
    ctx.hb("m1", 0, topology=Topology.of(1, TOPOLOGY.subtopologies))
    other = Topology.of(1, [Subtopology("0", source_topics=("input",))])
    resp = ctx.hb("m2", 0, topology=other)
    assert (resp.error_code, resp.error_message) == (
        E.invalid_request, "Topology updates are not supported yet.")
    stale = ctx.hb("m3", 0, topology=TOPOLOGY)  # epoch 0 < the group's 1
    assert stale.error_code == 0
    assert stale.status[0][0] == STALE_TOPOLOGY


def test_a_member_from_the_future_is_fenced_and_an_unknown_one_is_refused() -> None:
    ctx = ready()
    ctx.hb("m1", 0)
    future = ctx.hb("m1", 7, owned=NONE)
    assert future.error_code == E.fenced_member_epoch
    unknown = ctx.hb("nobody", 1, owned=NONE)
    assert unknown.error_code == E.unknown_member_id


def test_tasks_the_topology_does_not_have_are_an_invalid_request() -> None:
    ctx = ready()
    ctx.hb("m1", 0)
    absurd = TasksTuple.of({"0": [1_000_000]})
    resp = ctx.hb("m1", 2, owned=absurd)
    assert resp.error_code == E.invalid_request
    assert resp.error_message == ("Task 1000000 for subtopology 0 is invalid. Number of tasks "
                                  "for this subtopology: 4")
    missing = ctx.hb("m1", 2, owned=TasksTuple.of({"9": [0]}))
    assert missing.error_message == "Subtopology 9 does not exist in the topology."


def test_standby_replicas_go_to_another_process() -> None:
    ctx = ready(**{"group.streams.num.standby.replicas": "1"})
    ctx.hb("m1", 0)
    ctx.hb("m2", 0)
    group = ctx.group()
    for member_id in ("m1", "m2"):
        target = group.target[member_id]
        for sid, parts in target.standby.items():
            assert sid == "1"  # only the stateful subtopology has standbys
            assert not parts & target.active.get(sid, frozenset())
    standbys = sum(len(p) for t in group.target.values() for p in t.standby.values())
    assert standbys == 4


def test_list_groups_and_offsets_see_a_streams_group() -> None:
    ctx = ready()
    ctx.hb("m1", 0)
    listed = ctx.shard.list_groups(None, None)
    assert listed == [{"group_id": "g", "protocol_type": "streams", "group_state": "Stable",
                       "group_type": "streams"}]
    group = ctx.group()
    assert group.validate_offset_commit("m1", None, 2, 9) == 0
    assert group.validate_offset_commit("m1", None, 3, 9) == E.stale_member_epoch
    assert group.partition_commit_error("m1", 1, "input", 0) == E.stale_member_epoch
    assert group.validate_offset_commit("m1", None, 2, 8) == E.unsupported_version
    assert group.validate_offset_commit("m1", None, 2, -1, transactional=True) == 0
    assert group.validate_offset_commit("zz", None, 2, 9) == E.unknown_member_id
    assert group.validate_delete() == E.non_empty_group


def test_the_group_is_deleted_by_its_tombstones() -> None:
    ctx = ready()
    ctx.hb("m1", 0)
    ctx.hb("m1", -1)
    ctx.write(lambda s, now: s.delete_group("g"))
    assert "g" not in ctx.shard.groups
    assert R.STREAMS_GROUP_METADATA in {r.type_id for r in ctx.last_records}
    ctx.assert_replay_matches()


def test_the_first_assignment_waits_for_the_initial_rebalance_delay() -> None:
    ctx = ready(**{"group.streams.initial.rebalance.delay.ms": "3000"})
    first = ctx.hb("m1", 0)
    assert first.status == ((ASSIGNMENT_DELAYED, "Assignment delayed due to the configured "
                             "initial rebalance delay."),)
    assert everything(first).is_empty()
    second = ctx.hb("m2", 0)
    assert everything(second).is_empty()
    # Members stay at the target epoch (1) meanwhile, and heartbeat with it.
    assert (first.member_epoch, second.member_epoch) == (1, 1)
    ctx.advance(3000)  # the timer assigns both at once
    got = [ctx.hb(m, 1, owned=NONE) for m in ("m1", "m2")]
    counts = [sum(len(p) for p in everything(r).active.values()) for r in got]
    assert counts == [4, 4]
    assert all(r.status == () for r in got)


def test_the_assignor_runs_at_most_once_per_assignment_interval() -> None:
    ctx = ready(**{"group.streams.assignment.interval.ms": "1000"})
    ctx.advance(60_000)  # a clock that is not at 0 (timestamp 0 means "never assigned")
    ctx.hb("m1", 0)
    second = ctx.hb("m2", 0)
    assert second.status == ((ASSIGNMENT_DELAYED, "Assignment delayed due to the configured "
                              "assignment interval."),)
    assert ctx.group().assignment_epoch == 2 < ctx.group().group_epoch
    ctx.advance(1000)
    later = ctx.hb("m2", 2, owned=NONE)
    assert later.status == ()
    assert ctx.group().assignment_epoch == ctx.group().group_epoch


def test_a_commit_with_an_older_epoch_is_good_for_tasks_held_since_then() -> None:
    """Kafka 4.4's per-task assignment epochs: a member that moved on keeps committing
    for the tasks it held before; not for a task it got later or never had."""
    ctx = ready()
    first = everything(ctx.hb("m1", 0))  # all tasks at epoch 2
    ctx.hb("m2", 0)
    kept = everything(ctx.hb("m1", 2, owned=first))  # must revoke half: stays at 2
    ctx.hb("m1", 2, owned=kept)  # revoked: now at epoch 3, keeps its tasks' epoch 2
    group = ctx.group()
    member = group.members["m1"]
    assert member.member_epoch == 3
    mine = sorted(kept.active["0"])[0]
    theirs = next(p for p in range(4) if p not in kept.active.get("0", frozenset()))
    assert group.validate_offset_commit("m1", None, 2, 9) == 0  # judged per partition
    assert group.partition_commit_error("m1", 2, "input", mine) == 0
    assert group.partition_commit_error("m1", 2, "input", theirs) == E.stale_member_epoch
    assert group.partition_commit_error("m1", 2, "elsewhere", mine) == E.stale_member_epoch
    assert group.partition_commit_error("m1", 1, "input", mine) == E.stale_member_epoch
    assert group.validate_offset_commit("m1", None, 4, 9) == E.stale_member_epoch
    # The epochs survive a replay (record 22's assignment epochs).
    ctx.assert_replay_matches()


def test_a_static_member_leaves_for_a_while_and_its_successor_takes_its_tasks() -> None:
    ctx = ready()
    ctx.hb("a1", 0, instance_id="i-a")
    ctx.hb("b1", 0)
    ctx.hb("a1", 2, instance_id="i-a")  # asked to revoke half (owned not sent: it waits)
    held = ctx.group().members["a1"].assigned
    assert held.active
    epoch = ctx.group().group_epoch
    # Leaving with -2: only its current assignment is written, no new group epoch.
    away = ctx.hb("a1", -2, instance_id="i-a")
    assert (away.error_code, away.member_epoch) == (0, -2)
    assert ctx.types() == [(22, False)]
    assert ctx.group().group_epoch == epoch
    # Someone else with that instance id while it is away takes its place and tasks.
    back = ctx.hb("a2", 0, instance_id="i-a", process="process-a1")
    assert back.error_code == 0
    assert "a1" not in ctx.group().members and "a2" in ctx.group().members
    assert ctx.group().members["a2"].assigned == held
    assert ctx.group().group_epoch == epoch  # same process, same tags: no rebalance
    ctx.assert_replay_matches()


def test_static_membership_errors_are_kafkas() -> None:
    ctx = ready()
    ctx.hb("a1", 0, instance_id="i-a")
    taken = ctx.hb("a2", 0, instance_id="i-a")
    assert (taken.error_code, taken.error_message) == (
        E.unreleased_instance_id, "Static member a2 with instance id i-a cannot join the "
        "group because the instance id is owned by a1 member.")
    fenced = ctx.hb("a9", 2, owned=NONE, instance_id="i-a")
    assert (fenced.error_code, fenced.error_message) == (
        E.fenced_instance_id, "Static member a9 with instance id i-a was fenced by member a1.")
    unknown = ctx.hb("z", 2, owned=NONE, instance_id="i-z")
    assert (unknown.error_code, unknown.error_message) == (
        E.unknown_member_id, "Instance id i-z is unknown.")


def test_describe_shows_a_ready_topology_as_configured() -> None:
    ctx = ready()
    ctx.hb("m1", 0)
    described, = ctx.shard.streams.describe(["g"], False)
    subs = {s["subtopology_id"]: s for s in described["topology"]["subtopologies"]}
    # The changelog's partitions as decided (one per task), not the declared 0.
    assert [(t["name"], t["partitions"]) for t in subs["1"]["state_changelog_topics"]] == [
        (CHANGELOG, 4)]
    assert [(t["name"], t["partitions"]) for t in subs["1"]["repartition_source_topics"]] \
        == [(REPARTITION, 4)]
    assert described["group_state"] == "Stable"
    # Not ready (the internal topics are missing): as declared.
    other = StreamsStory({"input": 4})
    other.hb("m1", 0)
    described, = other.shard.streams.describe(["g"], False)
    subs = {s["subtopology_id"]: s for s in described["topology"]["subtopologies"]}
    assert [t["partitions"] for t in subs["1"]["state_changelog_topics"]] == [0]


def test_a_member_without_the_rack_aware_tags_is_told_which_it_lacks() -> None:
    """Kafka 4.4: with `rack.aware.assignment.tags` set, a v1 heartbeat from a member
    lacking some of those client tags carries MISSING_CLIENT_TAGS (it is still assigned);
    a v0 member is not told; the tags join the group's assignment configs."""
    ctx = ready(**{"group.streams.rack.aware.assignment.tags": "zone, rack"})
    resp = ctx.hb("m1", 0, client_tags=(("zone", "a"),))
    assert resp.error_code == 0 and resp.member_epoch == 2
    assert resp.status == ((MISSING_CLIENT_TAGS, "Missing required client tags for "
                            "rack-aware standby assignment: [rack]. Configure them via "
                            "'client.tag.<tagKey>' in your Streams config."),)
    assert ctx.group().last_assignment_configs == {
        "num.standby.replicas": "0", "rack.aware.assignment.tags": "zone,rack"}
    # The tags are the member's, kept from its join: a later heartbeat is told again.
    again = ctx.hb("m1", 2)
    assert [code for code, _ in again.status] == [MISSING_CLIENT_TAGS]
    tagged = ctx.hb("m2", 0, client_tags=(("zone", "b"), ("rack", "r1")))
    assert tagged.status == ()
    old = ctx.hb("m3", 0, api_version=0)
    assert old.status == ()


def test_a_heartbeat_one_epoch_behind_keeps_the_member_only_with_its_task_lists() -> None:
    """Kafka 4.4 accepts the previous member epoch (a lost response) only if the member
    sends all three task lists and they are within its assignment; without them it is
    fenced."""
    ctx = ready()
    first = everything(ctx.hb("m1", 0))
    ctx.hb("m2", 0)
    kept = everything(ctx.hb("m1", 2, owned=first))
    assert ctx.hb("m1", 2, owned=kept).member_epoch == 3  # previous epoch now 2
    behind = ctx.hb("m1", 2, owned=kept)
    assert (behind.error_code, behind.member_epoch) == (0, 3)
    blind = ctx.hb("m1", 2)  # no task lists sent
    assert blind.error_code == E.fenced_member_epoch
    assert ctx.last_records == []
