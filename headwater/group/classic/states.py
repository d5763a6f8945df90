"""Classic group states and the transitions between them, as one table.

Theory of operation
-------------------
A classic group (JoinGroup/SyncGroup) moves through five states, named as Kafka's
ListGroups/DescribeGroups report them:

    Empty                no members (an offsets-only group stays here forever)
    PreparingRebalance   the join phase: members (re)send JoinGroup, responses parked
    CompletingRebalance  the sync phase: the generation is chosen, the leader computes
                         the assignment and sends it in SyncGroup
    Stable               the assignment is written (a GroupMetadata record) and handed out
    Dead                 the group is gone (only seen by requests racing a deletion)

The table below is the whole state machine: `TRANSITIONS[a]` is the set of states a
group in state `a` may enter. Everything that changes a group's state goes through
`check_transition`, so an illegal move fails loudly, naming the group and both states.
"""

from __future__ import annotations

from enum import Enum


class State(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


E, PR, CR, ST, DE = (State.EMPTY, State.PREPARING_REBALANCE, State.COMPLETING_REBALANCE,
                     State.STABLE, State.DEAD)

TRANSITIONS: dict[State, frozenset[State]] = {
    # a member joins (the first join of a new group waits group.initial.rebalance.delay.ms)
    E: frozenset({PR, DE}),
    # the join phase ends: members left -> CompletingRebalance, none left -> Empty
    PR: frozenset({CR, E, DE}),
    # the leader's assignment is written -> Stable; a join/leave/expiry -> PreparingRebalance
    CR: frozenset({ST, PR, DE}),
    # a new member, a changed subscription, a leader rejoin, a leave or an expiry
    ST: frozenset({PR, DE}),
    DE: frozenset({DE}),
}

# PreparingRebalance can be entered from these: the states in which a rebalance may start.
CAN_REBALANCE = frozenset(s for s, targets in TRANSITIONS.items() if PR in targets)


class IllegalTransition(RuntimeError):
    def __init__(self, group_id: str, current: State, target: State) -> None:
        allowed = ", ".join(sorted(s.value for s in TRANSITIONS[current])) or "nothing"
        super().__init__(f"classic group {group_id!r} cannot move from {current.value} to "
                         f"{target.value} (allowed from {current.value}: {allowed})")
        self.group_id = group_id
        self.current = current
        self.target = target


def check_transition(group_id: str, current: State, target: State) -> None:
    if target not in TRANSITIONS[current]:
        raise IllegalTransition(group_id, current, target)
