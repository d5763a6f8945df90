"""Classic groups (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) as stories on a fake clock."""

from __future__ import annotations

from headwater.group import records as R
from headwater.group.classic.states import State
from headwater.group.offsets import PartitionCommit
from tests.unit.group.classic_helpers import (
    RANGE,
    assignment,
    group_of,
    heartbeat,
    join,
    leave,
    metadata_records,
    new_member,
    restarted,
    stable_group,
    subscription,
    sync,
)
from tests.unit.group.context import GroupContext

NO_DELAY = {"group.initial.rebalance.delay.ms": "0"}


def assert_replay_matches(ctx: GroupContext) -> None:
    live = {g: grp.snapshot() for g, grp in ctx.shard.groups.items()}
    replayed = {g: grp.snapshot() for g, grp in ctx.replayed().groups.items()}
    assert replayed == live


# ---- join and sync ---------------------------------------------------------------------
def test_two_members_join_and_sync_step_by_step():
    ctx = GroupContext({"t": 4}, **{"group.initial.rebalance.delay.ms": "3000"})

    # 1. A new member without an id gets one and MEMBER_ID_REQUIRED; nothing is written.
    first = join(ctx, client="alpha")
    assert first.error == 79
    a = first.value["member_id"]
    assert a.startswith("alpha-") and len(a) > len("alpha-")
    assert ctx.last_records == [] and group_of(ctx).state is State.EMPTY

    # 2. It rejoins with the id: the group starts its initial rebalance; the answer waits.
    join_a = join(ctx, a, client="alpha")
    assert not join_a.done and group_of(ctx).state is State.PREPARING_REBALANCE

    # 3. A second member arrives during the initial delay; that extends the delay once.
    b, join_b = new_member(ctx, "beta")
    assert ctx.advance(2999) == [] and not join_a.done
    assert ctx.advance(1) == [] and not join_a.done  # extended: b joined in the delay
    assert ctx.advance(3000) == []  # the join phase completes; still nothing written

    group = group_of(ctx)
    assert group.state is State.COMPLETING_REBALANCE and group.generation == 1
    leader_view, follower_view = join_a.value, join_b.value
    assert leader_view["error_code"] == 0 and follower_view["error_code"] == 0
    assert leader_view["generation_id"] == follower_view["generation_id"] == 1
    assert leader_view["leader"] == follower_view["leader"] == a
    assert leader_view["protocol_name"] == "range" and leader_view["protocol_type"] == "consumer"
    assert [m["member_id"] for m in leader_view["members"]] == [a, b]
    assert leader_view["members"][1]["metadata"] == RANGE[0][1]
    assert follower_view["members"] == []

    # 4. The follower's SyncGroup waits for the leader's assignment.
    sync_b = sync(ctx, b, 1)
    assert not sync_b.done and ctx.last_records == []

    # 5. The leader's SyncGroup writes the generation, then both get their share.
    sync_a = sync(ctx, a, 1, assignments={a: assignment(0, 1), b: assignment(2, 3)})
    (record,) = ctx.last_records
    assert record.type_id == R.GROUP_METADATA and record.key == {"group": "g"}
    assert record.value["generation"] == 1 and record.value["protocol"] == "range"
    assert record.value["leader"] == a and record.value["protocol_type"] == "consumer"
    assert [(m["member_id"], m["client_id"], m["assignment"], m["subscription"],
             m["session_timeout"], m["rebalance_timeout"]) for m in record.value["members"]] \
        == [(a, "alpha", assignment(0, 1), RANGE[0][1], 10_000, 30_000),
            (b, "beta", assignment(2, 3), RANGE[0][1], 10_000, 30_000)]
    assert sync_a.value == {"error_code": 0, "protocol_type": "consumer",
                            "protocol_name": "range", "assignment": assignment(0, 1)}
    assert sync_b.value["assignment"] == assignment(2, 3)
    assert group.state is State.STABLE
    assert heartbeat(ctx, a, 1) == 0 and heartbeat(ctx, b, 1) == 0

    # The log rebuilds the same group: members, assignments, leader, generation.
    assert_replay_matches(ctx)
    described = group.describe()
    assert described["group_state"] == "Stable" and described["protocol_data"] == "range"
    assert [(m["member_id"], m["member_assignment"]) for m in described["members"]] \
        == [(a, assignment(0, 1)), (b, assignment(2, 3))]


def test_member_id_required_only_from_v4_and_pending_ids_expire():
    ctx = GroupContext({"t": 1}, **NO_DELAY)
    old_client = join(ctx, client="old", version=3)
    assert not old_client.done  # v3: joined at once with a generated id, parked
    ctx.advance(0)
    assert old_client.error == 0 and old_client.value["member_id"].startswith("old-")

    ctx2 = GroupContext({"t": 1}, **NO_DELAY)
    first = join(ctx2, client="new", session=8000)
    assert first.error == 79
    pending = first.value["member_id"]
    assert group_of(ctx2).pending_join == {pending}
    # Never rejoins: the pending id is dropped after its session timeout, and the
    # group (never written, no offsets) with it.
    assert ctx2.advance(8000) == []
    assert "g" not in ctx2.shard.groups
    late = join(ctx2, pending, client="new")
    assert late.error == 25  # UNKNOWN_MEMBER_ID: the id is no longer known


def test_join_validation_errors():
    ctx = GroupContext({"t": 1}, **NO_DELAY)
    assert join(ctx, session=5999).error == 26  # below group.min.session.timeout.ms
    assert join(ctx, session=1_800_001).error == 26
    assert join(ctx, group="").error == 24
    assert join(ctx, "someone").error == 25  # known id, unknown group
    assert join(ctx, protocol_type="").error == 23
    assert "g" not in ctx.shard.groups  # nothing lingers from refused first joins
    stable_group(ctx, "a")
    assert join(ctx, protocol_type="connect").error == 23
    assert join(ctx, protocols=[("roundrobin", b"")]).error == 23  # no common protocol

    small = GroupContext({"t": 1}, **{**NO_DELAY, "group.max.size": "1"})
    (a,) = stable_group(small, "a")
    over = join(small, client="b")
    assert over.error == 81 and over.value["member_id"] == ""  # GROUP_MAX_SIZE_REACHED
    assert list(group_of(small).members) == [a] and group_of(small).state is State.STABLE


# ---- liveness ------------------------------------------------------------------------
def test_session_expiry_removes_member_and_rebalances():
    ctx = GroupContext({"t": 2}, **NO_DELAY)
    a, b = stable_group(ctx, "a", "b")
    assert ctx.advance(5000) == []
    assert heartbeat(ctx, b, 1) == 0  # b is alive, a is silent
    assert ctx.advance(4999) == [] and a in group_of(ctx).members
    assert ctx.advance(1) == []  # a's session (10 s) ran out: removed, rebalance begins
    group = group_of(ctx)
    assert a not in group.members and group.state is State.PREPARING_REBALANCE
    assert heartbeat(ctx, a, 1) == 25  # UNKNOWN_MEMBER_ID
    assert heartbeat(ctx, b, 1) == 27  # REBALANCE_IN_PROGRESS: rejoin
    rejoin = join(ctx, b, client="b")
    assert rejoin.value["generation_id"] == 2 and rejoin.value["leader"] == b
    assert [m["member_id"] for m in rejoin.value["members"]] == [b]
    sync(ctx, b, 2, assignments={b: assignment(0, 1)})
    (record,) = ctx.last_records
    assert [m["member_id"] for m in record.value["members"]] == [b]
    assert record.value["generation"] == 2
    assert_replay_matches(ctx)


def test_rebalance_timeout_removes_member_that_does_not_rejoin():
    ctx = GroupContext({"t": 3}, **NO_DELAY)
    a, b = stable_group(ctx, "a", "b", rebalance=20_000)
    c, join_c = new_member(ctx, "c", rebalance=20_000)
    assert group_of(ctx).state is State.PREPARING_REBALANCE and not join_c.done
    assert heartbeat(ctx, a, 1) == 27
    join_a = join(ctx, a, client="a", rebalance=20_000)
    # b keeps heartbeating (so its session never expires) but never rejoins.
    for _ in range(3):
        ctx.advance(5000)
        assert heartbeat(ctx, b, 1) == 27
    assert not join_a.done
    ctx.advance(5000)  # 20 s: the join phase ends without b
    group = group_of(ctx)
    assert b not in group.members and group.state is State.COMPLETING_REBALANCE
    assert join_a.value["generation_id"] == join_c.value["generation_id"] == 2
    assert {m["member_id"] for m in join_a.value["members"]} == {a, c}
    assert heartbeat(ctx, b, 1) == 25


def test_pending_sync_timeout_removes_members_that_never_sync():
    ctx = GroupContext({"t": 1}, **NO_DELAY)
    _, ja = new_member(ctx, "a", rebalance=15_000, session=30_000)
    _, jb = new_member(ctx, "b", rebalance=15_000, session=30_000)
    ctx.advance(0)
    a, b = ja.value["member_id"], jb.value["member_id"]
    leader_sync = sync(ctx, a, 1, assignments={a: assignment(0), b: b""})
    assert leader_sync.error == 0  # b never sends SyncGroup
    assert heartbeat(ctx, a, 1) == 0
    assert ctx.advance(14_999) == [] and b in group_of(ctx).members
    ctx.advance(1)
    group = group_of(ctx)
    assert b not in group.members and group.state is State.PREPARING_REBALANCE
    assert heartbeat(ctx, a, 1) == 27


def test_heartbeat_errors():
    ctx = GroupContext({"t": 1}, **NO_DELAY)
    assert heartbeat(ctx, "x", 0, group="nope") == 25
    assert heartbeat(ctx, "x", 0, group="") == 24
    (a,) = stable_group(ctx, "a")
    assert heartbeat(ctx, a, 0) == 22  # ILLEGAL_GENERATION
    assert heartbeat(ctx, "stranger", 1) == 25
    assert heartbeat(ctx, a, 1) == 0
    new_member(ctx, "b")  # a rebalance starts
    assert heartbeat(ctx, a, 1) == 27
    assert sync(ctx, a, 1).error == 27  # SyncGroup during the join phase too
    assert sync(ctx, a, 7).error == 22
    assert sync(ctx, a, 1, protocol_name="roundrobin").error == 23


# ---- static membership ---------------------------------------------------------------
def test_static_member_rejoin_keeps_assignment_and_fences_old_id():
    ctx = GroupContext({"t": 2}, **NO_DELAY)
    a, b = stable_group(ctx, "a", "b", instances=["inst-a", "inst-b"])
    assert a.startswith("inst-a-")
    group = group_of(ctx)
    old_assignment = group.members[b].assignment

    # inst-b restarts: it joins without a member id and replaces its old self.
    rejoin = join(ctx, client="b", instance="inst-b")
    (record,) = ctx.last_records  # the new member id is persisted, no rebalance
    assert rejoin.error == 0
    new_b = rejoin.value["member_id"]
    assert new_b != b and new_b.startswith("inst-b-")
    assert [m["member_id"] for m in record.value["members"]] == [a, new_b]
    assert group.state is State.STABLE and group.generation == 1
    assert rejoin.value["generation_id"] == 1 and rejoin.value["members"] == []

    # The old id is fenced wherever it shows up; the new one syncs to its old assignment.
    assert heartbeat(ctx, b, 1, instance="inst-b") == 82
    assert join(ctx, b, client="b", instance="inst-b").error == 82
    assert sync(ctx, b, 1, instance="inst-b").error == 82
    assert leave(ctx, (b, "inst-b")) == (0, [82])
    got = sync(ctx, new_b, 1, instance="inst-b")
    assert got.error == 0 and got.value["assignment"] == old_assignment
    assert heartbeat(ctx, new_b, 1, instance="inst-b") == 0
    assert_replay_matches(ctx)


def test_static_leader_rejoin_before_v9_is_told_the_old_leader_id():
    ctx = GroupContext({"t": 2}, **NO_DELAY)
    a, _ = stable_group(ctx, "a", "b", instances=["inst-a", "inst-b"])
    rejoin = join(ctx, client="a", instance="inst-a", version=5)
    new_a = rejoin.value["member_id"]
    assert group_of(ctx).leader_id == new_a
    assert rejoin.value["leader"] == a  # so it syncs as a follower and keeps its assignment
    rejoin9 = join(ctx, client="a", instance="inst-a", version=9)
    assert rejoin9.value["skip_assignment"] is True and len(rejoin9.value["members"]) == 2


def test_static_member_survives_a_rebalance_it_sleeps_through():
    ctx = GroupContext({"t": 2}, **NO_DELAY)
    a, b = stable_group(ctx, "a", "b", instances=["inst-a", "inst-b"], session=30_000)
    leave(ctx, ("", "inst-a"))  # administrative removal by instance id
    group = group_of(ctx)
    assert a not in group.members and group.state is State.PREPARING_REBALANCE
    rejoin = join(ctx, b, client="b", instance="inst-b", session=30_000)
    assert rejoin.value["generation_id"] == 2


# ---- leave ---------------------------------------------------------------------------
def test_batch_leave_to_empty_writes_empty_group():
    ctx = GroupContext({"t": 2}, **NO_DELAY)
    a, b = stable_group(ctx, "a", "b", instances=[None, "inst-b"])
    error, codes = leave(ctx, (a, None), ("", "inst-b"), ("ghost", None), ("", "nobody"))
    assert (error, codes) == (0, [0, 0, 25, 25])
    group = group_of(ctx)
    assert group.state is State.EMPTY and group.generation == 2 and not group.members
    (record,) = ctx.last_records
    assert record.value["members"] == [] and record.value["generation"] == 2
    assert record.value["protocol"] is None and record.value["protocol_type"] == "consumer"
    assert group.empty_since_ms() == ctx.now
    assert leave(ctx, ("x", None), group="none") == (25, [])
    assert_replay_matches(ctx)


def test_leave_during_join_phase_completes_it():
    ctx = GroupContext({"t": 2}, **NO_DELAY)
    a, b = stable_group(ctx, "a", "b")
    join_a = join(ctx, a, client="a")  # the leader rejoins: rebalance
    assert not join_a.done
    assert leave(ctx, (b, None)) == (0, [0])
    assert join_a.value["generation_id"] == 2 and join_a.value["members"][0]["member_id"] == a


# ---- offsets against a classic group ----------------------------------------------------
def commit(ctx: GroupContext, member: str, generation: int, instance: str | None = None):
    return ctx.write(lambda s, now: s.offsets.commit(
        "g", member, instance, generation, [("t", [PartitionCommit(0, 5)])], 8, now))


def test_commit_validation_errors_leave_state_unchanged():
    ctx = GroupContext({"t": 2}, **NO_DELAY)
    a, b = stable_group(ctx, "a", "b", instances=[None, "inst-b"])
    before = group_of(ctx).snapshot()
    for member, generation, instance, code in [
            ("stranger", 1, None, 25),  # UNKNOWN_MEMBER_ID
            (a, 7, None, 22),  # ILLEGAL_GENERATION
            ("", -1, None, 25),  # a simple commit while the group has members
            ("old-id", 1, "inst-b", 82),  # FENCED_INSTANCE_ID
            (b, 1, "inst-unknown", 25)]:
        assert commit(ctx, member, generation, instance) == {"t": {0: code}}
        assert ctx.last_records == []
    assert not ctx.shard.offsets.has_offsets("g")
    assert group_of(ctx).snapshot() == before

    new_member(ctx, "c")  # PreparingRebalance: commits of the current generation still go
    assert commit(ctx, a, 1) == {"t": {0: 0}} and len(ctx.last_records) == 1
    join(ctx, a, client="a")
    join(ctx, b, client="b", instance="inst-b")  # everyone rejoined: CompletingRebalance
    assert group_of(ctx).state is State.COMPLETING_REBALANCE
    assert commit(ctx, a, 2) == {"t": {0: 27}}  # REBALANCE_IN_PROGRESS
    assert ctx.last_records == []


def test_simple_commit_allowed_when_empty_and_group_survives_replay():
    ctx = GroupContext({"t": 1}, **NO_DELAY)
    assert commit(ctx, "", -1) == {"t": {0: 0}}
    assert group_of(ctx).state is State.EMPTY and group_of(ctx).protocol_type() == ""
    (a,) = stable_group(ctx, "a")  # the offsets-only group becomes a real one
    assert commit(ctx, a, 1) == {"t": {0: 0}}
    assert_replay_matches(ctx)


def test_subscription_drives_offset_delete_and_group_delete():
    ctx = GroupContext({"t": 1, "u": 1}, **NO_DELAY)
    protocols = [("range", subscription("t", version=0)),
                 ("roundrobin", subscription("t", version=0))]
    (a,) = stable_group(ctx, "a", protocols=protocols)
    commit(ctx, a, 1)
    group = group_of(ctx)
    assert group.is_subscribed_to("t") and not group.is_subscribed_to("u")
    error, codes = ctx.write(lambda s, now: s.offsets.delete("g", [("t", [0]), ("u", [0])]))
    assert (error, codes) == (0, {"t": {0: 86}, "u": {0: 0}})  # GROUP_SUBSCRIBED_TO_TOPIC
    assert ctx.write(lambda s, now: s.delete_group("g")) == 68  # NON_EMPTY_GROUP
    assert leave(ctx, (a, None)) == (0, [0])
    assert not group.is_subscribed_to("t")
    assert ctx.write(lambda s, now: s.delete_group("g")) == 0
    assert [(r.type_id, r.value) for r in ctx.last_records] == [(R.OFFSET_COMMIT, None),
                                                               (R.GROUP_METADATA, None)]
    assert "g" not in ctx.shard.groups and "g" not in ctx.replayed().groups


# ---- restart -------------------------------------------------------------------------
def test_replay_and_load_rearm_session_timers():
    ctx = GroupContext({"t": 2}, **NO_DELAY)
    a, b = stable_group(ctx, "a", "b")
    loaded = restarted(ctx, **NO_DELAY)
    group = group_of(loaded)
    assert group.snapshot() == group_of(ctx).snapshot()
    assert group.state is State.STABLE and group.leader_id == a
    # A member that comes back keeps going; one that does not is timed out.
    loaded.advance(5000)
    assert heartbeat(loaded, b, 1) == 0
    loaded.advance(5000)
    assert a not in group.members and group.state is State.PREPARING_REBALANCE
    rejoin = join(loaded, b, client="b")
    assert rejoin.value["generation_id"] == 2
    # Nobody left at all: the group empties and says so in the log.
    loaded.advance(10_000)
    assert group.state is State.EMPTY and group.generation == 3
    assert metadata_records(loaded.last_records)[-1].value["members"] == []


class _OtherGroup:
    """Stands in for a KIP-848 group in the shard's map."""

    group_type = "consumer"

    def __init__(self, empty: bool) -> None:
        self.group_id = "g"
        self.empty = empty

    def is_empty(self) -> bool:
        return self.empty

    def tombstones(self) -> list:
        return [R.group_metadata_tombstone("other-records-of-g")]


def test_join_converts_an_empty_consumer_group_but_not_a_busy_one():
    ctx = GroupContext({"t": 1}, **NO_DELAY)
    ctx.shard.groups["g"] = _OtherGroup(empty=False)
    assert join(ctx).error == 23
    assert isinstance(ctx.shard.groups["g"], _OtherGroup)

    ctx.shard.groups["g"] = _OtherGroup(empty=True)
    first = join(ctx)
    assert first.error == 79
    assert [r.key for r in ctx.last_records] == [{"group": "other-records-of-g"}]
    assert group_of(ctx).pending_join == {first.value["member_id"]}


def test_a_member_listing_a_protocol_twice_still_completes_the_join():
    """Found by fuzzing: a JoinGroup whose protocols repeat a name counted twice in the
    group's votes, so no protocol had every member's vote and the join raised."""
    ctx = GroupContext({"t": 2}, **NO_DELAY)
    first = join(ctx, client="dup", protocols=RANGE * 3)
    parked = join(ctx, first.value["member_id"], client="dup", protocols=RANGE * 3)
    ctx.advance(0)  # the join phase completes on the timer
    assert parked.done and parked.value["error_code"] == 0
    assert parked.value["protocol_name"] == "range"
    assert group_of(ctx).state is State.COMPLETING_REBALANCE


# ---- the shard unloaded ------------------------------------------------------------------
def test_an_unloaded_shard_answers_parked_joins_and_syncs_not_coordinator():
    """A cluster drops a coordinator shard when it moves or its records' commit fails.
    Kafka's onGroupUnloaded answers the parked JoinGroup/SyncGroup requests
    NOT_COORDINATOR; left unanswered, librdkafka waits out its request timeout (the
    rebalance timeout + 3 s) and rejoins a rebalance that waits for it (the fault
    campaign's reader that never caught up)."""
    ctx = GroupContext({"t": 2}, **NO_DELAY)
    a, _b = stable_group(ctx, "alpha", "beta")
    parked_join = join(ctx, a, client="alpha")  # a rejoins: the group waits for beta
    _c, join_c = new_member(ctx, "gamma", group="h")
    _d, join_d = new_member(ctx, "delta", group="h")
    ctx.advance(0)
    follower = next(j for j in (join_c, join_d) if j.value["leader"] != j.value["member_id"])
    parked_sync = sync(ctx, follower.value["member_id"], follower.value["generation_id"],
                       group="h")  # waits for the leader's assignment
    assert not parked_join.done and not parked_sync.done
    ctx.shard.on_unloaded()
    assert parked_join.error == 16 and parked_sync.error == 16  # NOT_COORDINATOR
