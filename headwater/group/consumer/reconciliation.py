"""Member reconciliation for KIP-848 consumer groups: one member's current assignment
moving towards its target assignment.

Theory of operation
-------------------
The group coordinator computes a *target assignment* for the whole group at a *target
epoch* (see assignors.py). Each member then converges to its own slice of it, one
heartbeat at a time, and never owns a partition that another member still owns:

1. partitions the member holds but its target does not are *revoked* first: the member
   stays at its current epoch (state UNREVOKED_PARTITIONS) and is told its reduced
   assignment; it must report (in a later heartbeat's owned partitions) that it let
   them go;
2. only then does it advance to the target epoch and receive new partitions, minus
   those still owned by another member (state UNRELEASED_PARTITIONS while it waits for
   them);
3. when it holds exactly its target, it is STABLE at the target epoch.

This file is the whole state machine and knows nothing about records, groups or time.
Two rules for it:

* Every transition is in `TRANSITIONS`: `step` only *classifies* what a heartbeat
  means for the member (an event) and then looks up the next state. An event that a
  state does not accept is a bug and raises `IllegalTransition`, naming both.
* The epoch rule is part of the event: MUST_REVOKE keeps the member's epoch, every
  other change moves it to the target epoch. `previous_member_epoch` remembers the
  epoch before the last change, which is what lets a member whose heartbeat response
  was lost retry with its old epoch (see `_check_epoch` in operations.py).

The table, read as sentences:

* STABLE: no newer target -> stays; must revoke -> UNREVOKED_PARTITIONS; new target
  partitions still held elsewhere -> UNRELEASED_PARTITIONS; otherwise -> STABLE at the
  target epoch.
* UNREVOKED_PARTITIONS: still owns a revoked partition -> stays (epoch unchanged);
  otherwise as from STABLE.
* UNRELEASED_PARTITIONS: re-evaluated on every heartbeat, picking up released partitions.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum, IntEnum

from ..modern.assignment import EMPTY, Assignment, freeze, same


class MemberState(IntEnum):
    """Values are those of Kafka's MemberState (stored in record type 8)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


class Event(Enum):
    NO_NEW_TARGET = "member already reconciled to the target epoch"
    REVOCATION_PENDING = "member still owns partitions it must revoke"
    MUST_REVOKE = "member holds partitions outside its target"
    AWAIT_RELEASE = "some target partitions are still owned by other members"
    CONVERGED = "member holds its whole target"


S = MemberState
E = Event

TRANSITIONS: dict[MemberState, dict[Event, MemberState]] = {
    S.STABLE: {
        E.NO_NEW_TARGET: S.STABLE,
        E.MUST_REVOKE: S.UNREVOKED_PARTITIONS,
        E.AWAIT_RELEASE: S.UNRELEASED_PARTITIONS,
        E.CONVERGED: S.STABLE,
    },
    S.UNREVOKED_PARTITIONS: {
        E.REVOCATION_PENDING: S.UNREVOKED_PARTITIONS,
        E.MUST_REVOKE: S.UNREVOKED_PARTITIONS,
        E.AWAIT_RELEASE: S.UNRELEASED_PARTITIONS,
        E.CONVERGED: S.STABLE,
    },
    S.UNRELEASED_PARTITIONS: {
        E.MUST_REVOKE: S.UNREVOKED_PARTITIONS,
        E.AWAIT_RELEASE: S.UNRELEASED_PARTITIONS,
        E.CONVERGED: S.STABLE,
    },
    # A state written by a newer version we do not know: the member must give up
    # everything and rejoin (see `step`), then it is reconciled from scratch.
    S.UNKNOWN: {
        E.MUST_REVOKE: S.UNREVOKED_PARTITIONS,
        E.AWAIT_RELEASE: S.UNRELEASED_PARTITIONS,
        E.CONVERGED: S.STABLE,
    },
}


class IllegalTransition(RuntimeError):
    def __init__(self, state: MemberState, event: Event) -> None:
        super().__init__(f"event {event.name} ({event.value}) is not allowed in state "
                         f"{state.name}")
        self.state = state
        self.event = event


class MustRejoin(Exception):
    """The member is in a state we cannot reconcile: FENCED_MEMBER_EPOCH."""


@dataclass(frozen=True, slots=True)
class CurrentAssignment:
    """A member's reconciliation state: exactly the content of record type 8."""

    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=lambda: EMPTY)
    pending_revocation: Assignment = field(default_factory=lambda: EMPTY)

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state == MemberState.STABLE and self.member_epoch == target_epoch

    def moved_to(self, epoch: int, state: MemberState, assigned: Assignment,
                 pending: Assignment) -> CurrentAssignment:
        """Kafka's updateMemberEpoch: the old epoch becomes the previous one."""
        return CurrentAssignment(epoch, self.member_epoch, state, freeze(assigned),
                                 freeze(pending))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CurrentAssignment):
            return NotImplemented
        return (self.member_epoch == other.member_epoch
                and self.previous_member_epoch == other.previous_member_epoch
                and self.state == other.state
                and same(self.assigned, other.assigned)
                and same(self.pending_revocation, other.pending_revocation))

    def __hash__(self) -> int:
        return hash((self.member_epoch, self.state))


def owns_any(owned: Assignment | None, partitions: Assignment) -> bool:
    """True when `owned` (None = not reported) may still include any of `partitions`."""
    if owned is None:
        return True
    return any(owned.get(t, frozenset()) & ps for t, ps in partitions.items())


def step(current: CurrentAssignment, target_epoch: int, target: Assignment,
         subscribed: frozenset[uuid.UUID], owned: Assignment | None,
         owner_epoch: Callable[[uuid.UUID, int], int]) -> CurrentAssignment:
    """The member's next assignment state after a heartbeat.

    `target` is the member's slice of the target assignment at `target_epoch`;
    `subscribed` the topic ids it subscribes to now (target partitions of other topics
    are ignored); `owned` the partitions the heartbeat says it owns (None: not sent);
    `owner_epoch(topic, partition)` the epoch of the member owning that partition now,
    or -1 when nobody does.
    """
    state = current.state
    if state == S.UNKNOWN and (owned is None or any(owned.values())):
        raise MustRejoin("The consumer group member is in a unknown state. The member "
                         "must abandon all its partitions and rejoin.")
    if state == S.STABLE and current.member_epoch == target_epoch:
        event, nxt = E.NO_NEW_TARGET, current
    elif state == S.UNREVOKED_PARTITIONS and owns_any(owned, current.pending_revocation):
        event, nxt = E.REVOCATION_PENDING, current
    else:
        base_epoch = target_epoch if state == S.UNKNOWN else current.member_epoch
        event, nxt = _next_assignment(current, base_epoch, target_epoch, target, subscribed,
                                      owned, owner_epoch)
    expected = TRANSITIONS[state].get(event)
    if expected is None:
        raise IllegalTransition(state, event)
    assert nxt.state == expected, (state, event, nxt.state)
    return nxt


def _next_assignment(current: CurrentAssignment, member_epoch: int, target_epoch: int,
                     target: Assignment, subscribed: frozenset[uuid.UUID],
                     owned: Assignment | None,
                     owner_epoch: Callable[[uuid.UUID, int], int]
                     ) -> tuple[Event, CurrentAssignment]:
    keep: dict[uuid.UUID, frozenset[int]] = {}
    revoke: dict[uuid.UUID, frozenset[int]] = {}
    to_assign: dict[uuid.UUID, frozenset[int]] = {}
    unreleased = False
    own_pending = current.pending_revocation
    for topic in set(target) | set(current.assigned):
        wanted = target.get(topic, frozenset()) if topic in subscribed else frozenset()
        have = current.assigned.get(topic, frozenset())
        kept = have & wanted
        keep[topic] = kept
        revoke[topic] = have - kept
        free = set()
        for p in wanted - kept:
            if owner_epoch(topic, p) != -1 and p not in own_pending.get(topic, ()):
                unreleased = True
            else:
                free.add(p)
        to_assign[topic] = frozenset(free)
    revoke_f = freeze(revoke)
    if revoke_f and owns_any(owned, revoke_f):
        return E.MUST_REVOKE, current.moved_to(
            member_epoch, S.UNREVOKED_PARTITIONS, keep, revoke_f)
    assigned = {t: keep.get(t, frozenset()) | to_assign.get(t, frozenset())
                for t in set(keep) | set(to_assign)}
    if unreleased:
        return E.AWAIT_RELEASE, current.moved_to(
            target_epoch, S.UNRELEASED_PARTITIONS, assigned, EMPTY)
    return E.CONVERGED, current.moved_to(target_epoch, S.STABLE, assigned, EMPTY)
