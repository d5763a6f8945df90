"""ConsumerGroupHeartbeat stories on a group shard with a fake clock (KIP-848).

Each test reads: given a group in some state, when a member heartbeats, then these
records are written, this response returned, and replaying the log rebuilds the same
group. Scenario numbers refer to the reference checklist, section 6.
"""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode as E

from headwater.group import records as R
from headwater.group.consumer.group import (
    ConsumerGroupMember,
    current_assignment_record,
    group_epoch_record,
    member_metadata_record,
    target_member_record,
    target_metadata_record,
)
from headwater.group.consumer.operations import HeartbeatRequest, rebalance_key, session_key
from headwater.group.consumer.reconciliation import CurrentAssignment, MemberState
from headwater.group.modern.group import metadata_hash
from tests.unit.group.consumer_helpers import Story, named, parts, tid

CURRENT, TARGET_MEMBER, TARGET_META = (R.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
                                       R.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
                                       R.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA)
META, MEMBER, REGEX = (R.CONSUMER_GROUP_METADATA, R.CONSUMER_GROUP_MEMBER_METADATA,
                       R.CONSUMER_GROUP_REGULAR_EXPRESSION)


def stable_pair(ctx: Story):
    """A and B share foo (4 partitions) and are both STABLE; returns their epochs."""
    a = ctx.hb("A", 0)
    ctx.hb("A", a.member_epoch, owned={"foo": [0, 1, 2, 3]})
    b = ctx.hb("B", 0)
    a2 = ctx.hb("A", a.member_epoch, owned={"foo": [0, 1, 2, 3]})
    a3 = ctx.hb("A", a2.member_epoch, owned={"foo": [0, 1]})
    b2 = ctx.hb("B", b.member_epoch, owned={})
    assert ctx.group().state_name() == "Stable"
    return a3.member_epoch, b2.member_epoch


# ---- joining and the records it writes ------------------------------------------------

def test_first_member_creates_the_group_and_gets_everything():
    ctx = Story({"foo": 4})
    resp = ctx.hb("A", 0)
    assert (resp.error_code, resp.member_id, resp.member_epoch) == (0, "A", 1)
    assert named(resp.assignment) == {"foo": [0, 1, 2, 3]}
    assert resp.heartbeat_interval_ms == 5000
    # Scenario 39's order: member, group epoch, target member(s), target epoch, current.
    assert ctx.types() == [(MEMBER, False), (META, False), (TARGET_MEMBER, False),
                           (TARGET_META, False), (CURRENT, False)]
    group = ctx.group()
    assert (group.group_epoch, group.assignment_epoch, group.state_name()) == (1, 1, "Stable")
    assert group.members["A"].client_host == "/127.0.0.1"
    assert ctx.timer.is_scheduled(session_key("g", "A"))
    ctx.assert_replay_matches()


def test_steady_heartbeats_write_nothing_and_omit_the_assignment():
    ctx = Story({"foo": 2})
    resp = ctx.hb("A", 0)
    again = ctx.hb("A", resp.member_epoch, owned={"foo": [0, 1]})
    assert (again.error_code, again.member_epoch, again.assignment) == (0, 1, None)
    assert ctx.last_records == []


def test_scenario_40_revocation_before_reassignment():
    ctx = Story({"foo": 4})
    a = ctx.hb("A", 0)
    assert named(a.assignment) == {"foo": [0, 1, 2, 3]}
    ctx.hb("A", 1, owned={"foo": [0, 1, 2, 3]})

    b = ctx.hb("B", 0)  # B joins: epoch 2; its partitions (2, 3) are still A's
    assert (b.member_epoch, named(b.assignment)) == (2, {})
    assert ctx.group().members["B"].current.state == MemberState.UNRELEASED_PARTITIONS
    assert ctx.group().state_name() == "Reconciling"

    a1 = ctx.hb("A", 1, owned={"foo": [0, 1, 2, 3]})  # A must revoke 2-3, epoch stays 1
    assert (a1.member_epoch, named(a1.assignment)) == (1, {"foo": [0, 1]})
    assert ctx.group().members["A"].current.state == MemberState.UNREVOKED_PARTITIONS
    assert ctx.timer.is_scheduled(rebalance_key("g", "A"))

    b1 = ctx.hb("B", 2, owned={})  # B still waits
    assert (b1.member_epoch, b1.assignment) == (2, None)

    a2 = ctx.hb("A", 1, owned={"foo": [0, 1]})  # A revoked: STABLE at 2
    assert (a2.member_epoch, a2.assignment) == (2, None)
    assert not ctx.timer.is_scheduled(rebalance_key("g", "A"))

    b2 = ctx.hb("B", 2, owned={})  # B gets 2-3
    assert (b2.member_epoch, named(b2.assignment)) == (2, {"foo": [2, 3]})
    assert ctx.group().state_name() == "Stable"
    ctx.assert_replay_matches()


def test_scenario_46_group_state_sequence():
    ctx = Story({"foo": 4})
    ctx.put(group_epoch_record("g", 1, 0), target_metadata_record("g", 0),
            member_metadata_record("g", ConsumerGroupMember("A", subscribed_topic_names=("foo",),
                                                            rebalance_timeout_ms=1000)))
    assert ctx.group().state_name() == "Assigning"  # group epoch 1 > target epoch 0
    ctx.hb("A", 0)  # computes the target; A is STABLE at once
    assert ctx.group().state_name() == "Stable"
    ctx.hb("B", 0)
    assert ctx.group().state_name() == "Reconciling"
    ctx.hb("A", ctx.group().members["A"].member_epoch, owned={"foo": [0, 1, 2, 3]})
    ctx.hb("A", ctx.group().members["A"].member_epoch, owned={"foo": [0, 1]})
    ctx.hb("B", ctx.group().members["B"].member_epoch, owned={})
    assert ctx.group().state_name() == "Stable"
    ctx.hb("A", -1)
    ctx.hb("B", -1)
    assert ctx.group().state_name() == "Empty"


# ---- epochs -----------------------------------------------------------------------------

def member_at_epoch_100(ctx: Story) -> None:
    """Kafka's testConsumerGroupMemberEpochValidation: A at 100 (previous 99), foo-1,2,3."""
    member = ConsumerGroupMember("A", subscribed_topic_names=("foo",),
                                 rebalance_timeout_ms=5000, client_id="client",
                                 client_host="/127.0.0.1")
    foo = parts(foo=[1, 2, 3])
    ctx.put(member_metadata_record("g", member),
            group_epoch_record("g", 100, metadata_hash(["foo"], ctx.image)),
            target_member_record("g", "A", foo), target_metadata_record("g", 100),
            current_assignment_record("g", "A", CurrentAssignment(100, 99, MemberState.STABLE,
                                                                  foo)))


def test_scenario_36_member_epoch_validation_and_lost_response():
    ctx = Story({"foo": 4})
    member_at_epoch_100(ctx)
    for epoch, owned in ((200, {"foo": [1, 2, 3]}), (50, {"foo": [1, 2, 3]}), (99, None),
                         (99, {"foo": [0, 1]})):
        resp = ctx.hb("A", epoch, owned=owned)
        assert resp.error_code == E.fenced_member_epoch, (epoch, owned)
        assert ctx.last_records == []
    # The previous epoch with owned partitions a subset of the assigned ones: the
    # response carrying epoch 100 was lost; the member gets epoch 100 back.
    resp = ctx.hb("A", 99, owned={"foo": [1, 2]})
    assert (resp.error_code, resp.member_epoch) == (0, 100)


def test_lost_response_after_a_real_epoch_change():
    ctx = Story({"foo": 4})
    a_epoch, b_epoch = stable_pair(ctx)
    previous = ctx.group().members["A"].current.previous_member_epoch
    assert previous != a_epoch
    resp = ctx.hb("A", previous, owned={"foo": [0, 1]})
    assert (resp.error_code, resp.member_epoch) == (0, a_epoch)


def test_scenario_37_rejoin_with_epoch_zero_when_stable():
    ctx = Story({"foo": 3})
    member_at_epoch_100(ctx)
    epoch_before = ctx.group().group_epoch
    resp = ctx.hb("A", 0)
    assert (resp.error_code, resp.member_epoch) == (0, 100)
    assert named(resp.assignment) == {"foo": [1, 2, 3]}
    assert ctx.group().group_epoch == epoch_before


def test_scenario_38_rejoin_with_epoch_zero_while_revoking():
    ctx = Story({"foo": 3})
    member = ConsumerGroupMember("A", subscribed_topic_names=("foo",), rebalance_timeout_ms=5000,
                                 client_id="client", client_host="/127.0.0.1")
    ctx.put(member_metadata_record("g", member),
            group_epoch_record("g", 101, metadata_hash(["foo"], ctx.image)),
            target_member_record("g", "A", parts(foo=[0, 1])), target_metadata_record("g", 101),
            current_assignment_record("g", "A", CurrentAssignment(
                100, 99, MemberState.UNREVOKED_PARTITIONS, parts(foo=[0, 1]), parts(foo=[2]))))
    resp = ctx.hb("A", 0)
    assert (resp.error_code, resp.member_epoch, named(resp.assignment)) == \
        (0, 101, {"foo": [0, 1]})
    assert ctx.group().group_epoch == 101


def test_scenario_34_unknown_group_and_35_unknown_member():
    ctx = Story({"foo": 1})
    resp = ctx.hb("A", 100, owned={})
    assert resp.error_code == E.group_id_not_found and "not found" in resp.error_message
    assert ctx.last_records == [] and "g" not in ctx.shard.groups
    ctx.hb("A", 0)
    resp = ctx.hb("stranger", 1, owned={})
    assert resp.error_code == E.unknown_member_id
    assert ctx.last_records == []
    resp = ctx.hb("stranger", -1)
    assert resp.error_code == E.unknown_member_id


# ---- leaving, fencing, timers -------------------------------------------------------------

def test_scenario_41_leave_writes_tombstones_and_bumps_the_epoch():
    ctx = Story({"foo": 4})
    stable_pair(ctx)
    epoch = ctx.group().group_epoch
    resp = ctx.hb("B", -1)
    assert (resp.error_code, resp.member_id, resp.member_epoch) == (0, "B", -1)
    assert ctx.types() == [(CURRENT, True), (TARGET_MEMBER, True), (MEMBER, True),
                           (META, False)]
    assert ctx.group().group_epoch == epoch + 1
    assert "B" not in ctx.group().members and "B" not in ctx.group().target
    assert not ctx.timer.is_scheduled(session_key("g", "B"))
    assert ctx.group().state_name() == "Assigning"
    # A's next heartbeat computes the new target: it gets everything back.
    a = ctx.hb("A", ctx.group().members["A"].member_epoch, owned={"foo": [0, 1]})
    assert named(a.assignment) == {"foo": [0, 1, 2, 3]}
    assert ctx.group().state_name() == "Stable"
    ctx.assert_replay_matches()


def test_scenario_43_session_expiry_fences_like_a_leave():
    ctx = Story({"foo": 4}, **{"group.consumer.session.timeout.ms": "45000"})
    stable_pair(ctx)
    epoch = ctx.group().group_epoch
    # A keeps heartbeating; B goes silent.
    for _ in range(4):
        assert ctx.advance(10_000) == []
        ctx.hb("A", ctx.group().members["A"].member_epoch, owned={"foo": [0, 1]})
    written = ctx.advance(10_000)
    assert [(r.type_id, r.value is None, r.key.get("member_id")) for r in written] == [
        (CURRENT, True, "B"), (TARGET_MEMBER, True, "B"), (MEMBER, True, "B"),
        (META, False, None)]
    assert set(ctx.group().members) == {"A"} and ctx.group().group_epoch == epoch + 1
    ctx.assert_replay_matches()


def test_scenario_43_member_stuck_revoking_is_fenced_after_its_rebalance_timeout():
    ctx = Story({"foo": 4})
    a = ctx.hb("A", 0, rebalance_ms=3000)
    ctx.hb("B", 0)
    revoke = ctx.hb("A", a.member_epoch, owned={"foo": [0, 1, 2, 3]})
    assert ctx.group().members["A"].current.state == MemberState.UNREVOKED_PARTITIONS
    assert named(revoke.assignment) == {"foo": [0, 1]}
    # A keeps heartbeating but never lets 2-3 go.
    ctx.advance(1500)
    ctx.hb("A", a.member_epoch, owned={"foo": [0, 1, 2, 3]})
    ctx.hb("B", ctx.group().members["B"].member_epoch, owned={})
    written = ctx.advance(1500)
    assert (CURRENT, True) in [(r.type_id, r.value is None) for r in written]
    assert set(ctx.group().members) == {"B"}
    resp = ctx.hb("A", a.member_epoch, owned={"foo": [0, 1, 2, 3]})
    assert resp.error_code == E.unknown_member_id
    b = ctx.hb("B", ctx.group().members["B"].member_epoch, owned={})
    assert named(b.assignment) == {"foo": [0, 1, 2, 3]}


def test_rebalance_timer_is_harmless_once_the_member_moved_on():
    ctx = Story({"foo": 4})
    a = ctx.hb("A", 0, rebalance_ms=3000)
    ctx.hb("B", 0)
    ctx.hb("A", a.member_epoch, owned={"foo": [0, 1, 2, 3]})
    ctx.hb("A", a.member_epoch, owned={"foo": [0, 1]})
    assert ctx.advance(3000) == []
    assert set(ctx.group().members) == {"A", "B"}


def test_scenario_42_static_membership():
    ctx = Story({"foo": 4})
    a = ctx.hb("A1", 0, instance="i-a")
    ctx.hb("A1", a.member_epoch, owned={"foo": [0, 1, 2, 3]}, instance="i-a")
    b = ctx.hb("B", 0)
    ctx.hb("A1", a.member_epoch, owned={"foo": [0, 1, 2, 3]}, instance="i-a")
    a2 = ctx.hb("A1", a.member_epoch, owned={"foo": [0, 1]}, instance="i-a")
    ctx.hb("B", b.member_epoch, owned={})
    assert ctx.group().state_name() == "Stable"
    epoch = ctx.group().group_epoch

    # Another process claims the instance id while A1 is alive.
    resp = ctx.hb("A2", 0, instance="i-a")
    assert resp.error_code == E.unreleased_instance_id and ctx.last_records == []
    # Leaving with a member id that does not hold the instance id.
    resp = ctx.hb("A2", -2, instance="i-a")
    assert resp.error_code == E.fenced_instance_id and ctx.last_records == []
    resp = ctx.hb("A2", a2.member_epoch, instance="i-a", owned={})
    assert resp.error_code == E.fenced_instance_id
    resp = ctx.hb("A1", -2, instance="nobody")
    assert resp.error_code == E.unknown_member_id

    # A1 leaves temporarily: its assignment stays, no epoch bump.
    resp = ctx.hb("A1", -2, instance="i-a")
    assert (resp.error_code, resp.member_epoch) == (0, -2)
    assert ctx.types() == [(CURRENT, False)]
    assert ctx.group().group_epoch == epoch
    assert ctx.group().members["A1"].current.assigned == parts(foo=[0, 1])
    # Its partitions are not handed to anyone else meanwhile.
    b_again = ctx.hb("B", ctx.group().members["B"].member_epoch, owned={"foo": [2, 3]})
    assert b_again.assignment is None

    # It comes back as a new process (new member id): same partitions, same epoch.
    back = ctx.hb("A2", 0, instance="i-a")
    assert (back.error_code, back.member_id, back.member_epoch) == (0, "A2", a2.member_epoch)
    assert named(back.assignment) == {"foo": [0, 1]}
    assert ctx.group().group_epoch == epoch
    assert set(ctx.group().members) == {"A2", "B"}
    assert ctx.group().static_members == {"i-a": "A2"}
    assert ctx.group().target["A2"] == parts(foo=[0, 1]) and "A1" not in ctx.group().target
    ctx.assert_replay_matches()

    # A static member leaving for good (-1) is removed like any member.
    resp = ctx.hb("A2", -1, instance="i-a")
    assert resp.error_code == 0 and ctx.group().static_members == {}
    assert ctx.group().group_epoch == epoch + 1


def test_static_member_that_left_is_fenced_when_its_session_expires():
    ctx = Story({"foo": 2}, **{"group.consumer.session.timeout.ms": "6000"})
    a = ctx.hb("A", 0, instance="i")
    ctx.hb("A", -2, instance="i")
    assert ctx.advance(5999) == []
    assert [r.type_id for r in ctx.advance(1)] == [CURRENT, TARGET_MEMBER, MEMBER, META]
    assert ctx.group().members == {} and ctx.group().static_members == {}
    resp = ctx.hb("A2", 0, instance="i")
    assert resp.error_code == 0 and resp.member_epoch > a.member_epoch


def test_scenario_44_max_size():
    ctx = Story({"foo": 2}, **{"group.consumer.max.size": "2"})
    ctx.hb("A", 0)
    b = ctx.hb("B", 0)
    resp = ctx.hb("C", 0)
    assert resp.error_code == E.group_max_size_reached and ctx.last_records == []
    # Existing members keep heartbeating, and may re-join.
    assert ctx.hb("B", b.member_epoch, owned={}).error_code == 0
    assert ctx.hb("B", 0).error_code == 0


# ---- assignors ----------------------------------------------------------------------------

def test_scenario_45_unsupported_assignor():
    ctx = Story({"foo": 2})
    resp = ctx.hb("A", 0, assignor="sticky")
    assert resp.error_code == E.unsupported_assignor
    assert "uniform, range" in resp.error_message
    assert ctx.last_records == [] and "g" not in ctx.shard.groups


def test_default_assignor_is_the_first_configured_and_members_can_pick_range():
    ctx = Story({"foo": 4, "bar": 4}, **{"group.consumer.assignors": "range,uniform"})
    assert ctx.shard.consumer.default_assignor == "range"
    ctx.hb("A", 0, topics=("foo", "bar"))
    ctx.hb("B", 0, topics=("foo", "bar"))
    ctx.hb("A", 1, owned={"foo": [0, 1, 2, 3], "bar": [0, 1, 2, 3]})
    group = ctx.group()
    # range co-partitions: A and B have the same partition numbers of foo and bar.
    for m in ("A", "B"):
        target = group.target[m]
        assert target[tid("foo")] == target[tid("bar")]
    ctx2 = Story({"foo": 4})
    ctx2.hb("A", 0, assignor="range")
    assert ctx2.group().members["A"].server_assignor == "range"
    assert ctx2.group().preferred_assignor("uniform") == "range"


# ---- regular expressions ------------------------------------------------------------------

def test_scenario_33_regex_subscriptions():
    ctx = Story({"foo": 2, "bar": 1, "__internal": 1})
    resp = ctx.hb("A", 0, regex="[")
    assert resp.error_code == E.invalid_regular_expression
    assert resp.error_message.startswith("SubscribedTopicRegex `[` is not a valid regular")
    assert ctx.last_records == [] and "g" not in ctx.shard.groups

    resp = ctx.hb("A", 0, regex="[a-z].*")
    assert (resp.error_code, resp.member_epoch) == (0, 1)
    assert named(resp.assignment) == {"foo": [0, 1], "bar": [0]}
    regex = [r for r in ctx.last_records if r.type_id == REGEX]
    assert len(regex) == 1 and regex[0].value["topics"] == ["bar", "foo"]
    assert ctx.group().is_subscribed_to("foo") and not ctx.group().is_subscribed_to("__internal")
    ctx.assert_replay_matches()

    # Switching to names bumps the epoch and drops the now unused regex.
    resp = ctx.hb("A", 1, topics=("foo",), regex="", owned={"foo": [0, 1], "bar": [0]})
    assert resp.member_epoch == 1  # must revoke bar first
    assert ctx.group().group_epoch == 2
    assert (REGEX, True) in ctx.types() and ctx.group().resolved_regexes == {}
    resp = ctx.hb("A", 1, owned={"foo": [0, 1]})
    assert (resp.member_epoch, named(resp.assignment)) == (2, None)
    ctx.assert_replay_matches()


def test_a_regex_matches_internal_topics_as_kafka_does():
    """Kafka 4.4 assigns `__consumer_offsets` to a member whose regex names it (franz-go's
    Test848RegexBrokerResolves, run against the reference)."""
    ctx = Story({"foo": 1, "__internal": 2})
    resp = ctx.hb("A", 0, regex="__internal")
    assert named(resp.assignment) == {"__internal": [0, 1]}
    ctx.assert_replay_matches()


def test_regex_is_full_match_and_accepts_librdkafka_parentheses():
    ctx = Story({"rx-1": 1, "rx-2": 1, "other": 1})
    resp = ctx.hb("A", 0, regex="(^rx-.*)")
    assert named(resp.assignment) == {"rx-1": [0], "rx-2": [0]}
    ctx2 = Story({"rx-1": 1, "other": 1})
    resp = ctx2.hb("A", 0, regex="rx")  # a full match, not a search
    assert (resp.error_code, named(resp.assignment)) == (0, {})


def test_regex_picks_up_topics_created_later_and_new_partitions_bump_the_epoch():
    ctx = Story({"other": 1})
    resp = ctx.hb("A", 0, regex="rx-.*")
    assert named(resp.assignment) == {}
    epoch = ctx.group().group_epoch
    ctx.set_topics({"other": 1, "rx-1": 2})  # a matching topic appears
    assert sorted(ctx.types()) == [(META, False), (REGEX, False)]
    assert ctx.group().group_epoch == epoch + 1
    assert ctx.group().state_name() == "Assigning"
    resp = ctx.hb("A", ctx.group().members["A"].member_epoch, owned={})
    assert named(resp.assignment) == {"rx-1": [0, 1]}

    ctx.set_topics({"other": 1, "rx-1": 3})  # more partitions
    assert ctx.types() == [(META, False)]
    resp = ctx.hb("A", ctx.group().members["A"].member_epoch, owned={"rx-1": [0, 1]})
    assert named(resp.assignment) == {"rx-1": [0, 1, 2]}
    ctx.set_topics({"other": 2, "rx-1": 3})  # a topic nobody subscribes to: nothing
    assert ctx.last_records == []
    ctx.assert_replay_matches()


def test_name_subscription_to_a_topic_created_later():
    ctx = Story({})
    resp = ctx.hb("A", 0, topics=("foo",))
    assert named(resp.assignment) == {}
    ctx.set_topics({"foo": 2})
    resp = ctx.hb("A", ctx.group().members["A"].member_epoch, owned={})
    assert named(resp.assignment) == {"foo": [0, 1]}


def test_two_members_share_one_regex_record():
    ctx = Story({"rx-1": 2})
    ctx.hb("A", 0, regex="rx-.*")
    ctx.hb("B", 0, regex="rx-.*")
    assert REGEX not in [t for t, _ in ctx.types()]  # already resolved
    ctx.hb("A", -1)
    assert (REGEX, True) not in ctx.types()  # B still uses it
    ctx.hb("B", -1)
    assert (REGEX, True) in ctx.types()
    ctx.assert_replay_matches()


# ---- bad input: the right error and nothing written ---------------------------------------

@pytest.mark.parametrize("change, code, message", [
    (dict(group_id=""), E.invalid_request, "GroupId can't be empty."),
    (dict(member_id=""), E.invalid_request, "MemberId can't be empty."),
    (dict(member_id="  "), E.invalid_request, "MemberId can't be empty."),
    (dict(rebalance_timeout_ms=-1), E.invalid_request, "RebalanceTimeoutMs must be provided"),
    (dict(subscribed_topic_names=None), E.invalid_request, "Either SubscribedTopicNames"),
    (dict(owned=None), E.invalid_request, "TopicPartitions must be empty"),
    (dict(owned=parts(foo=[0])), E.invalid_request, "TopicPartitions must be empty"),
    (dict(member_epoch=-3), E.invalid_request, "MemberEpoch is invalid."),
    (dict(member_epoch=-2), E.invalid_request, "InstanceId can't be null."),
    (dict(instance_id=""), E.invalid_request, "InstanceId can't be empty."),
    (dict(rack_id=" "), E.invalid_request, "RackId can't be empty."),
    (dict(member_id="m" * 40000), E.invalid_request, "MemberId is longer than"),
    (dict(subscribed_topic_names=("t" * 40000,)), E.invalid_request, "SubscribedTopicNames"),
    (dict(server_assignor="nope"), E.unsupported_assignor, "ServerAssignor nope"),
    (dict(subscribed_topic_regex="(a"), E.invalid_regular_expression, "SubscribedTopicRegex"),
])
def test_bad_requests_change_nothing(change, code, message):
    ctx = Story({"foo": 2})
    a = ctx.hb("A", 0)
    before = ctx.group().snapshot()
    base = dict(group_id="g", member_id="new", member_epoch=0, rebalance_timeout_ms=1000,
                subscribed_topic_names=("foo",), owned=parts())
    req = HeartbeatRequest(**{**base, **change})
    resp = ctx.write(lambda s, now: s.consumer.heartbeat(req, now))
    assert resp.error_code == code
    assert resp.error_message.startswith(message) or message in resp.error_message
    assert ctx.last_records == []
    assert ctx.group().snapshot() == before
    assert not ctx.timer.is_scheduled(session_key("g", "new"))
    assert a.error_code == 0


def test_v0_generates_member_ids_and_v1_requires_one():
    ctx = Story({"foo": 2})
    resp = ctx.hb("", 0, version=0)
    assert resp.error_code == 0 and len(resp.member_id) == 22
    assert resp.member_id in ctx.group().members
    assert ctx.hb("", 0, version=1).error_code == E.invalid_request
    # librdkafka's own ids are base64 with + and /: taken as they are.
    odd = "H+E2W/BAQWKjIY5IQChMMw"
    assert ctx.hb(odd, 0).member_id == odd and odd in ctx.group().members


# ---- classic groups, offsets, describe, delete --------------------------------------------

def test_offsets_only_group_is_upgraded_and_replay_agrees():
    from headwater.group.offsets import PartitionCommit
    ctx = Story({"foo": 2})
    ctx.write(lambda s, now: s.offsets.commit("g", "", None, -1,
                                              [("foo", [PartitionCommit(0, 42)])], 9, now))
    assert ctx.shard.groups["g"].group_type == "classic"
    resp = ctx.hb("A", 0)
    assert resp.error_code == 0
    assert ctx.last_records[0].type_id == R.GROUP_METADATA and ctx.last_records[0].value is None
    assert ctx.group().group_type == "consumer"
    err, found = ctx.shard.offsets.fetch("g", "A", resp.member_epoch, [("foo", [0])])
    assert err == 0 and found["foo"][0].offset == 42
    ctx.assert_replay_matches()


class _BusyClassicGroup:
    group_id = "busy"
    group_type = "classic"

    def is_empty(self) -> bool:
        return False


def test_non_empty_classic_group_rejects_consumer_heartbeats():
    ctx = Story({"foo": 1})
    ctx.shard.groups["busy"] = _BusyClassicGroup()  # type: ignore[assignment]
    for epoch in (0, 3):
        resp = ctx.hb("A", epoch, group="busy")
        assert resp.error_code == E.group_id_not_found
        assert "not a consumer group" in resp.error_message
        assert ctx.last_records == []
    (entry,) = ctx.shard.consumer.describe(["busy"], False)
    assert entry["error_code"] == E.group_id_not_found and entry["error_message"]


def test_scenarios_50_to_54_offset_validation():
    from headwater.group.offsets import PartitionCommit
    ctx = Story({"foo": 2})
    a = ctx.hb("A", 0)
    group = ctx.group()

    def commit(member, epoch, version=9):
        return ctx.write(lambda s, now: s.offsets.commit(
            "g", member, None, epoch, [("foo", [PartitionCommit(0, 7)])], version, now))

    assert commit("", -1) == {"foo": {0: 0}}  # admin commit
    assert commit("nobody", 1) == {"foo": {0: 25}}  # UNKNOWN_MEMBER_ID
    assert commit("A", a.member_epoch + 1) == {"foo": {0: 113}}  # STALE_MEMBER_EPOCH
    assert commit("A", a.member_epoch - 1) == {"foo": {0: 113}}
    assert commit("A", a.member_epoch, version=8) == {"foo": {0: 35}}  # UNSUPPORTED_VERSION
    assert commit("A", a.member_epoch) == {"foo": {0: 0}}
    assert group.validate_offset_fetch(None, -1) == 0
    assert group.validate_offset_fetch("nobody", 1) == 25
    assert group.validate_offset_fetch("A", a.member_epoch + 1) == 113
    assert group.validate_offset_fetch("A", a.member_epoch) == 0
    # OffsetDelete of a subscribed topic (scenario 55).
    error, codes = ctx.write(lambda s, now: s.offsets.delete("g", [("foo", [0]), ("bar", [0])]))
    assert (error, codes) == (0, {"foo": {0: 86}, "bar": {0: 0}})


def test_delete_group_needs_it_empty_then_tombstones_everything():
    ctx = Story({"foo": 2})
    from headwater.group.offsets import PartitionCommit
    ctx.hb("A", 0, regex="fo.*")
    ctx.write(lambda s, now: s.offsets.commit("g", "", None, -1,
                                              [("foo", [PartitionCommit(1, 5)])], 9, now))
    assert ctx.write(lambda s, now: s.delete_group("g")) == 68  # NON_EMPTY_GROUP
    assert ctx.last_records == []
    ctx.hb("A", -1)
    assert ctx.group().state_name() == "Empty"
    assert ctx.write(lambda s, now: s.delete_group("g")) == 0
    assert sorted({r.type_id for r in ctx.last_records}) == [R.OFFSET_COMMIT, META,
                                                             TARGET_META]
    assert all(r.value is None for r in ctx.last_records)
    assert "g" not in ctx.shard.groups
    assert "g" not in ctx.replayed().groups
    # The id can be used again from scratch.
    assert ctx.hb("B", 0).member_epoch == 1


def test_describe_apis():
    ctx = Story({"foo": 3})
    a = ctx.hb("A", 0, instance="inst", rack="r1")
    (entry,) = ctx.shard.consumer.describe(["g"], True)
    assert (entry["error_code"], entry["group_state"], entry["group_epoch"],
            entry["assignment_epoch"], entry["assignor_name"]) == (0, "Stable", 1, 1, "uniform")
    (member,) = entry["members"]
    assert (member["member_id"], member["instance_id"], member["rack_id"],
            member["member_epoch"], member["member_type"]) == ("A", "inst", "r1",
                                                               a.member_epoch, 1)
    assert member["assignment"]["topic_partitions"] == [
        {"topic_id": tid("foo"), "topic_name": "foo", "partitions": [0, 1, 2]}]
    assert member["target_assignment"] == member["assignment"]
    assert entry["authorized_operations"] > 0
    missing, empty = ctx.shard.consumer.describe(["nope", ""], False)
    assert missing["error_code"] == E.group_id_not_found and "not found" in missing["error_message"]
    assert empty["error_code"] == 24
    classic = ctx.shard.describe_group("g")
    assert (classic["protocol_type"], classic["group_state"]) == ("consumer", "Stable")
    assert [m["member_id"] for m in classic["members"]] == ["A"]
    assert ctx.shard.list_groups(None, {"consumer"}) == [
        {"group_id": "g", "protocol_type": "consumer", "group_state": "Stable",
         "group_type": "consumer"}]


def test_restart_keeps_members_and_rearms_their_session_timers():
    ctx = Story({"foo": 4}, **{"group.consumer.session.timeout.ms": "6000"})
    stable_pair(ctx)
    fresh = ctx.replayed()
    assert fresh.groups["g"].snapshot() == ctx.group().snapshot()
    timers = ctx.timer  # replayed() armed a new FakeTimer; check it through the shard
    assert fresh.timer is not timers
    assert fresh.timer.is_scheduled(session_key("g", "A"))
    assert fresh.timer.is_scheduled(session_key("g", "B"))


def test_group_epoch_bumps_count_as_consumer_rebalances():
    from tests.unit.group.consumer_helpers import Story

    story = Story({"foo": 4})
    story.hb("m1", 0)
    story.hb("m2", 0)
    assert story.shard.rebalances["consumer"] == 2
    # Replay (a restart) rebuilds state but does not count history as new rebalances.
    assert story.replayed().rebalances["consumer"] == 0
