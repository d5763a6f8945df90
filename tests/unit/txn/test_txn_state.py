"""The transaction state table: complete for client events, strict for internal ones."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from headwater.txn.state import (
    CLIENT_EVENTS,
    TRANSITIONS,
    Event,
    IllegalTransition,
    Step,
    TxnState,
    step,
)

S, E = TxnState, Event
STORED = [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT, S.COMPLETE_COMMIT,
          S.COMPLETE_ABORT]


@pytest.mark.parametrize("state", STORED)
@pytest.mark.parametrize("event", CLIENT_EVENTS)
def test_every_client_event_has_an_answer_in_every_stored_state(state, event):
    assert isinstance(step(state, event), Step)  # IllegalTransition if one is missing


def test_the_happy_paths():
    assert step(S.EMPTY, E.ADD_PARTITIONS) == Step(S.ONGOING)
    assert step(S.ONGOING, E.COMMIT) == Step(S.PREPARE_COMMIT)
    assert step(S.PREPARE_COMMIT, E.MARKERS_WRITTEN) == Step(S.COMPLETE_COMMIT)
    assert step(S.ONGOING, E.ABORT) == Step(S.PREPARE_ABORT)
    assert step(S.PREPARE_ABORT, E.MARKERS_WRITTEN) == Step(S.COMPLETE_ABORT)
    for done in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        assert step(done, E.ADD_PARTITIONS) == Step(S.ONGOING)
        assert step(done, E.INIT_PRODUCER_ID) == Step(S.EMPTY)


def test_busy_while_markers_are_written():
    for prepare in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        for event in (E.INIT_PRODUCER_ID, E.ADD_PARTITIONS):
            assert step(prepare, event) == Step(None, ErrorCode.concurrent_transactions)
    # The same EndTxn again is a retry; the opposite one contradicts the decision.
    assert step(S.PREPARE_COMMIT, E.COMMIT) == Step(None, ErrorCode.concurrent_transactions)
    assert step(S.PREPARE_COMMIT, E.ABORT) == Step(None, ErrorCode.invalid_txn_state)
    assert step(S.PREPARE_ABORT, E.COMMIT) == Step(None, ErrorCode.invalid_txn_state)


def test_end_txn_after_completion_is_idempotent_only_for_the_same_outcome():
    assert step(S.COMPLETE_COMMIT, E.COMMIT) == Step(None, ErrorCode.none)
    assert step(S.COMPLETE_COMMIT, E.ABORT) == Step(None, ErrorCode.invalid_txn_state)
    assert step(S.COMPLETE_ABORT, E.ABORT) == Step(None, ErrorCode.none)
    assert step(S.EMPTY, E.COMMIT) == Step(None, ErrorCode.invalid_txn_state)


def test_init_while_ongoing_fences_into_an_abort():
    assert step(S.ONGOING, E.INIT_PRODUCER_ID) == Step(S.PREPARE_ABORT,
                                                       ErrorCode.concurrent_transactions)
    assert step(S.ONGOING, E.FENCE) == Step(S.PREPARE_ABORT)


@pytest.mark.parametrize("state,event", [
    (S.ONGOING, E.MARKERS_WRITTEN), (S.EMPTY, E.FENCE), (S.ONGOING, E.EXPIRE),
    (S.PREPARE_COMMIT, E.EXPIRE), (S.COMPLETE_ABORT, E.FENCE), (S.DEAD, E.ADD_PARTITIONS),
])
def test_impossible_internal_events_name_the_event_and_state(state, event):
    with pytest.raises(IllegalTransition) as err:
        step(state, event)
    assert event.value in str(err.value) and state.kafka_name in str(err.value)


def test_only_idle_states_may_expire_and_names_round_trip():
    expirable = {s for s, events in TRANSITIONS.items() if E.EXPIRE in events}
    assert expirable == {s for s in TxnState if s.expiration_allowed}
    for s in TxnState:
        assert TxnState.from_name(s.kafka_name) is s
    assert TxnState.from_name("Bogus") is None
