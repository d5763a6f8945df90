"""The record-state transition table, exhaustively (Kafka's RecordState.validateTransition
and InFlightState.tryUpdateState)."""

from __future__ import annotations

import pytest

from headwater.share.record_state import (
    ACK_EVENTS,
    TRANSITIONS,
    AcknowledgeType,
    CountOp,
    DeadLetterReason,
    Event,
    RecordState,
    Step,
    dead_letter_reason,
    inferred_reason,
    step,
)

S, E = RecordState, Event


def test_ids_are_kafkas():
    assert [int(s) for s in S] == [0, 1, 2, 3, 4]
    assert [int(t) for t in AcknowledgeType] == [0, 1, 2, 3, 4]
    assert ACK_EVENTS[1] is E.ACCEPT and ACK_EVENTS[0] is E.GAP and ACK_EVENTS[4] is E.RENEW


@pytest.mark.parametrize("state", list(S))
@pytest.mark.parametrize("event", list(E))
def test_every_pair(state: RecordState, event: Event):
    got = step(state, event, 1, 5)
    legal = {
        S.AVAILABLE: {E.ACQUIRE, E.ARCHIVE},
        S.ACQUIRED: set(E) - {E.ACQUIRE, E.DEAD_LETTERED},
        S.ARCHIVING: {E.DEAD_LETTERED},
        S.ACKNOWLEDGED: set(),
        S.ARCHIVED: set(),
    }[state]
    assert (got is not None) == (event in legal)
    if got is not None:
        assert got.state is not S.ACQUIRED or got.arm_lock


def test_acknowledgement_outcomes():
    assert step(S.ACQUIRED, E.ACCEPT, 1, 5) == Step(S.ACKNOWLEDGED)
    assert step(S.ACQUIRED, E.REJECT, 1, 5) == Step(S.ARCHIVED)
    assert step(S.ACQUIRED, E.GAP, 1, 5) == Step(S.ARCHIVED)
    assert step(S.ACQUIRED, E.RELEASE, 1, 5) == Step(S.AVAILABLE)
    assert step(S.ACQUIRED, E.RENEW, 1, 5) == Step(S.ACQUIRED, arm_lock=True)
    assert step(S.AVAILABLE, E.ACQUIRE, 0, 5) == Step(S.ACQUIRED, CountOp.INCREASE, True)


@pytest.mark.parametrize("event", [E.RELEASE, E.LOCK_TIMEOUT, E.MEMBER_LEFT])
def test_delivery_count_limit_archives(event: Event):
    assert step(S.ACQUIRED, event, 4, 5).state is S.AVAILABLE
    assert step(S.ACQUIRED, event, 5, 5) == Step(S.ARCHIVED)


def test_member_left_keeps_the_count_as_kafka_4_3_does():
    assert step(S.ACQUIRED, E.MEMBER_LEFT, 1, 5) == Step(S.AVAILABLE)


def test_terminal_states_have_no_way_out():
    assert TRANSITIONS[S.ACKNOWLEDGED] == {} and TRANSITIONS[S.ARCHIVED] == {}
    assert S.ACKNOWLEDGED.is_terminal and S.ARCHIVED.is_terminal
    assert not S.AVAILABLE.is_terminal and not S.ACQUIRED.is_terminal


# ---- KIP-1191: ARCHIVING -------------------------------------------------------------------

@pytest.mark.parametrize("state", list(S))
@pytest.mark.parametrize("event", list(E))
def test_a_dead_letter_topic_changes_only_reject_and_the_limit(state: RecordState,
                                                                event: Event):
    """With a DLQ, exactly the steps that ended in ARCHIVED because of a reject or the
    limit end in ARCHIVING; everything else (gap, archive, accept, ...) is unchanged."""
    for count in (1, 5):
        plain, dlq = step(state, event, count, 5), step(state, event, count, 5, True)
        dead = state is S.ACQUIRED and (event is E.REJECT or (
            count >= 5 and event in (E.RELEASE, E.LOCK_TIMEOUT, E.MEMBER_LEFT)))
        assert dlq == (Step(S.ARCHIVING) if dead else plain), (state, event, count)
        if dead:
            assert plain == Step(S.ARCHIVED)


def test_archiving_is_neither_available_nor_finished():
    assert not S.ARCHIVING.is_terminal
    assert TRANSITIONS[S.ARCHIVING] == {E.DEAD_LETTERED: Step(S.ARCHIVED)}
    assert step(S.ARCHIVING, E.ARCHIVE, 1, 5) is None  # the leader archives around it


def test_dead_letter_reasons_are_kafkas_messages():
    assert dead_letter_reason(E.REJECT).value == "Offset rejected by client."
    for e in (E.RELEASE, E.LOCK_TIMEOUT, E.MEMBER_LEFT):
        assert dead_letter_reason(e) is DeadLetterReason.DELIVERY_LIMIT
    assert DeadLetterReason.DELIVERY_LIMIT.value == (
        "Offset delivery count exceeded the threshold.")
    # after a restart (reason not persisted): Kafka infers it from the count
    assert inferred_reason(2, 5) is DeadLetterReason.REJECTED
    assert inferred_reason(5, 5) is DeadLetterReason.DELIVERY_LIMIT
