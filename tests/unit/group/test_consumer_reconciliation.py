"""Member reconciliation (reconciliation.step) as a pure state machine."""

from __future__ import annotations

import uuid

import pytest

from headwater.group.consumer.reconciliation import (
    TRANSITIONS,
    CurrentAssignment,
    Event,
    IllegalTransition,
    MemberState,
    MustRejoin,
    step,
)
from headwater.group.modern.assignment import freeze

FOO = uuid.uuid5(uuid.NAMESPACE_DNS, "foo")
BAR = uuid.uuid5(uuid.NAMESPACE_DNS, "bar")
SUBSCRIBED = frozenset({FOO, BAR})
S = MemberState


def a(**topics: list[int]):
    ids = {"foo": FOO, "bar": BAR}
    return freeze({ids[t]: ps for t, ps in topics.items()})


def free(topic, partition) -> int:
    return -1


def owned_by(owners: dict[tuple[uuid.UUID, int], int]):
    return lambda t, p: owners.get((t, p), -1)


def test_scenario_40_revocation_before_reassignment():
    """A owns foo 0-3 at epoch 10; B joins; the target at 11 gives 2-3 to B."""
    member_a = CurrentAssignment(10, 9, S.STABLE, a(foo=[0, 1, 2, 3]))
    owners = {(FOO, p): 10 for p in range(4)}

    # A heartbeats (still owning 0-3): it must revoke 2-3 first, epoch unchanged.
    a1 = step(member_a, 11, a(foo=[0, 1]), SUBSCRIBED, a(foo=[0, 1, 2, 3]), owned_by(owners))
    assert a1 == CurrentAssignment(10, 10, S.UNREVOKED_PARTITIONS, a(foo=[0, 1]),
                                   a(foo=[2, 3]))

    # B joins: its target partitions are still owned by A -> UNRELEASED at 11, nothing.
    b0 = CurrentAssignment(0, -1, S.STABLE)
    b1 = step(b0, 11, a(foo=[2, 3]), SUBSCRIBED, a(), owned_by(owners))
    assert b1 == CurrentAssignment(11, 0, S.UNRELEASED_PARTITIONS)

    # A heartbeats again still owning 2: nothing changes.
    assert step(a1, 11, a(foo=[0, 1]), SUBSCRIBED, a(foo=[0, 1, 2]), owned_by(owners)) is a1
    # ... or without reporting owned partitions at all: nothing changes either.
    assert step(a1, 11, a(foo=[0, 1]), SUBSCRIBED, None, owned_by(owners)) is a1

    # A reports owning only 0-1: STABLE at 11.
    a2 = step(a1, 11, a(foo=[0, 1]), SUBSCRIBED, a(foo=[0, 1]), owned_by(owners))
    assert a2 == CurrentAssignment(11, 10, S.STABLE, a(foo=[0, 1]))

    # B's next heartbeat: 2-3 are free now -> it gets them and is STABLE.
    owners = {(FOO, 0): 11, (FOO, 1): 11}
    b2 = step(b1, 11, a(foo=[2, 3]), SUBSCRIBED, a(), owned_by(owners))
    assert b2 == CurrentAssignment(11, 11, S.STABLE, a(foo=[2, 3]))


def test_partially_released_partitions_are_granted_as_they_come():
    owners = {(FOO, 2): 4}
    m = step(CurrentAssignment(4, 3), 5, a(foo=[1, 2]), SUBSCRIBED, a(), owned_by(owners))
    assert m == CurrentAssignment(5, 4, S.UNRELEASED_PARTITIONS, a(foo=[1]))
    m2 = step(m, 5, a(foo=[1, 2]), SUBSCRIBED, a(foo=[1]), free)
    assert m2 == CurrentAssignment(5, 5, S.STABLE, a(foo=[1, 2]))


def test_revoked_partitions_not_owned_any_more_are_dropped_at_once():
    m = CurrentAssignment(3, 2, S.STABLE, a(foo=[0, 1]))
    # The member already let go of 1 (reported owned: only 0): no UNREVOKED detour.
    nxt = step(m, 4, a(foo=[0]), SUBSCRIBED, a(foo=[0]), free)
    assert nxt == CurrentAssignment(4, 3, S.STABLE, a(foo=[0]))


def test_unsubscribed_topic_is_revoked_even_if_the_target_still_lists_it():
    m = CurrentAssignment(3, 2, S.STABLE, a(foo=[0], bar=[0]))
    nxt = step(m, 4, a(foo=[0], bar=[0]), frozenset({FOO}), a(foo=[0], bar=[0]), free)
    assert nxt.state == S.UNREVOKED_PARTITIONS
    assert nxt.pending_revocation == a(bar=[0]) and nxt.member_epoch == 3


def test_own_pending_revocation_does_not_count_as_unreleased():
    # The member revoked bar-0 earlier and now the target gives it back.
    m = CurrentAssignment(5, 5, S.UNREVOKED_PARTITIONS, a(foo=[0]), a(bar=[0]))
    owners = {(FOO, 0): 5, (BAR, 0): 5}
    nxt = step(m, 6, a(foo=[0], bar=[0]), SUBSCRIBED, a(foo=[0]), owned_by(owners))
    assert nxt == CurrentAssignment(6, 5, S.STABLE, a(foo=[0], bar=[0]))


def test_stable_member_at_target_epoch_is_untouched():
    m = CurrentAssignment(7, 6, S.STABLE, a(foo=[1]))
    assert step(m, 7, a(foo=[1, 2]), SUBSCRIBED, None, free) is m


def test_unknown_state_forces_a_rejoin_unless_nothing_is_owned():
    m = CurrentAssignment(7, 6, S.UNKNOWN, a(foo=[1]))
    with pytest.raises(MustRejoin):
        step(m, 8, a(foo=[1]), SUBSCRIBED, a(foo=[1]), free)
    with pytest.raises(MustRejoin):
        step(m, 8, a(foo=[1]), SUBSCRIBED, None, free)
    assert step(m, 8, a(foo=[1]), SUBSCRIBED, a(), free).state == S.STABLE


def test_transition_table_is_complete_and_illegal_events_name_state_and_event():
    assert set(TRANSITIONS) == set(MemberState)
    reachable = {nxt for events in TRANSITIONS.values() for nxt in events.values()}
    assert reachable == {S.STABLE, S.UNREVOKED_PARTITIONS, S.UNRELEASED_PARTITIONS}
    # Every state but UNKNOWN can reach STABLE; only UNREVOKED waits on revocations.
    assert all(events.get(Event.CONVERGED) == S.STABLE for events in TRANSITIONS.values())
    assert [s for s, ev in TRANSITIONS.items() if Event.REVOCATION_PENDING in ev] == \
        [S.UNREVOKED_PARTITIONS]
    err = IllegalTransition(S.UNRELEASED_PARTITIONS, Event.NO_NEW_TARGET)
    assert "NO_NEW_TARGET" in str(err) and "UNRELEASED_PARTITIONS" in str(err)
