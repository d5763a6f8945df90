"""The transaction state machine of one transactional id, as a table.

Theory of operation
-------------------
A transactional id has one transaction at a time, and that transaction is in one of
Kafka's states (the names DescribeTransactions and ListTransactions report):

    Empty --add--> Ongoing --commit--> PrepareCommit --markers--> CompleteCommit
                     |  \\--abort/fence--> PrepareAbort --markers--> CompleteAbort
                     +--add (more partitions)--> Ongoing

and from Empty / CompleteCommit / CompleteAbort a new InitProducerId (an epoch bump)
leads back to Empty, a new AddPartitionsToTxn straight to Ongoing, and expiry
(`transactional.id.expiration.ms` without activity) to Dead, i.e. a tombstone.

Events are what the coordinator is asked to do (client requests, its own timers and the
marker writer): `INIT_PRODUCER_ID`, `ADD_PARTITIONS` (AddOffsetsToTxn too), `COMMIT` and
`ABORT` (EndTxn), `FENCE` (the transaction timed out, or an operator aborts it: the epoch
is bumped and the transaction aborted), `MARKERS_WRITTEN` (every partition has its
COMMIT/ABORT marker) and `EXPIRE`.

Each (state, event) pair has exactly one `Step`: the state to move to (None: stay, and
write nothing) and the error code the requester gets. So a retried EndTxn after the
transaction completed is answered NONE without a write, a new request while markers are
being written gets CONCURRENT_TRANSACTIONS (retriable), and a contradictory one
INVALID_TXN_STATE. A pair missing from the table is an internal event in a state where
it cannot happen (e.g. MARKERS_WRITTEN in Ongoing): `IllegalTransition` names both.

Two rules for this file: everything that decides the next state lives here; producer ids,
epochs and timestamps do not (see `shard.py`, which checks them before consulting the
table and builds the record for the new state).

PrepareEpochFence and Dead exist in Kafka's log format and in state filters but are never
stored here: fencing is one atomic write (epoch + 1 and PrepareAbort together), and Dead
is written as a tombstone.
"""

from __future__ import annotations

from enum import Enum, IntEnum
from typing import NamedTuple

from kio.schema.errors import ErrorCode


class TxnState(IntEnum):
    """Kafka's `TransactionState` ids (the int8 `TransactionStatus` in the log)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return _NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> TxnState | None:
        return _BY_NAME.get(name)

    @property
    def is_prepare(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def expiration_allowed(self) -> bool:
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


_NAMES = {
    TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit", TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit", TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead", TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}


class Event(Enum):
    INIT_PRODUCER_ID = "InitProducerId"
    ADD_PARTITIONS = "AddPartitions"
    COMMIT = "EndTxn(commit)"
    ABORT = "EndTxn(abort)"
    FENCE = "Fence"
    MARKERS_WRITTEN = "MarkersWritten"
    EXPIRE = "Expire"


class Step(NamedTuple):
    """Where an event leads: `state` None means stay (nothing is written)."""

    state: TxnState | None
    error: int = ErrorCode.none


class IllegalTransition(Exception):
    def __init__(self, state: TxnState, event: Event) -> None:
        super().__init__(f"event {event.value} is not possible in state {state.kafka_name}")
        self.state = state
        self.event = event


S, E = TxnState, Event
_STAY_BUSY = Step(None, ErrorCode.concurrent_transactions)
_STAY_INVALID = Step(None, ErrorCode.invalid_txn_state)
_STAY_OK = Step(None, ErrorCode.none)

# state -> event -> step. Client events (InitProducerId, AddPartitions, Commit, Abort) have
# an entry in every stored state; internal ones only where they can happen.
TRANSITIONS: dict[TxnState, dict[Event, Step]] = {
    S.EMPTY: {
        E.INIT_PRODUCER_ID: Step(S.EMPTY),
        E.ADD_PARTITIONS: Step(S.ONGOING),
        E.COMMIT: _STAY_INVALID,
        E.ABORT: _STAY_INVALID,
        E.EXPIRE: Step(S.DEAD),
    },
    S.ONGOING: {
        # A new producer instance fences the old one: its transaction is aborted (with
        # the bumped epoch) and the new one retries until the abort is complete.
        E.INIT_PRODUCER_ID: Step(S.PREPARE_ABORT, ErrorCode.concurrent_transactions),
        E.ADD_PARTITIONS: Step(S.ONGOING),
        E.COMMIT: Step(S.PREPARE_COMMIT),
        E.ABORT: Step(S.PREPARE_ABORT),
        E.FENCE: Step(S.PREPARE_ABORT),
    },
    S.PREPARE_COMMIT: {
        E.INIT_PRODUCER_ID: _STAY_BUSY,
        E.ADD_PARTITIONS: _STAY_BUSY,
        E.COMMIT: _STAY_BUSY,  # a retry: the commit is under way
        E.ABORT: _STAY_INVALID,
        E.MARKERS_WRITTEN: Step(S.COMPLETE_COMMIT),
    },
    S.PREPARE_ABORT: {
        E.INIT_PRODUCER_ID: _STAY_BUSY,
        E.ADD_PARTITIONS: _STAY_BUSY,
        E.COMMIT: _STAY_INVALID,
        E.ABORT: _STAY_BUSY,
        E.MARKERS_WRITTEN: Step(S.COMPLETE_ABORT),
    },
    S.COMPLETE_COMMIT: {
        E.INIT_PRODUCER_ID: Step(S.EMPTY),
        E.ADD_PARTITIONS: Step(S.ONGOING),
        E.COMMIT: _STAY_OK,  # a retried EndTxn whose answer was lost
        E.ABORT: _STAY_INVALID,
        E.EXPIRE: Step(S.DEAD),
    },
    S.COMPLETE_ABORT: {
        E.INIT_PRODUCER_ID: Step(S.EMPTY),
        E.ADD_PARTITIONS: Step(S.ONGOING),
        E.COMMIT: _STAY_INVALID,
        E.ABORT: _STAY_OK,
        E.EXPIRE: Step(S.DEAD),
    },
}

CLIENT_EVENTS = (E.INIT_PRODUCER_ID, E.ADD_PARTITIONS, E.COMMIT, E.ABORT)


def step(state: TxnState, event: Event) -> Step:
    """The step `event` takes from `state`; IllegalTransition if there is none."""
    found = TRANSITIONS.get(state, {}).get(event)
    if found is None:
        raise IllegalTransition(state, event)
    return found
