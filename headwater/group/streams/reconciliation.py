"""Member reconciliation for streams groups: one member's tasks moving towards its slice
of the target assignment (Kafka's streams CurrentAssignmentBuilder).

The rule is the consumer group's (consumer/reconciliation.py), over three kinds of task:

1. tasks the member holds but its target does not are revoked first: the member keeps
   its epoch (UNREVOKED_TASKS) and is told its reduced tasks; once a heartbeat reports
   owned tasks without them, it moves to the next epoch;
2. then it gets its new tasks, minus those another member still holds (UNRELEASED_TASKS
   while it waits): an active task while another member holds it as active or revokes
   it; a standby or warm-up task while another member of the same process holds it in
   any role (a process keeps one copy of a task's state);
3. holding exactly its target, it is STABLE at the target epoch.

Pure functions of the member, its target and who holds what; no records, no time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from .group import STABLE, UNKNOWN, UNRELEASED_TASKS, UNREVOKED_TASKS, StreamsGroupMember
from .tasks import Tasks, TasksTuple, freeze, intersect, minus, union

# (kind, subtopology, partition) -> True when another member blocks giving it.
Blocked = Callable[[str, str, int], bool]


class MustRejoin(Exception):
    """A member state we cannot reconcile (a newer version's): FENCED_MEMBER_EPOCH."""


def _owns_any(owned: TasksTuple | None, tasks: TasksTuple) -> bool:
    if owned is None:
        return True
    return any(intersect(getattr(owned, k), getattr(tasks, k)) for k in KINDS)


KINDS = ("active", "standby", "warmup")


def reconcile(member: StreamsGroupMember, target_epoch: int, target: TasksTuple,
              owned: TasksTuple | None, blocked: Blocked) -> StreamsGroupMember:
    """The member after this heartbeat. `owned`: the tasks the heartbeat reports (None:
    not all three sent); `blocked(kind, subtopology, partition)`: whether another
    member keeps the task from being given."""
    state = member.state
    if state == UNKNOWN:
        raise MustRejoin("The streams group member is in a unknown state. The member must "
                         "abandon all its tasks and rejoin.")
    if state == STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(member, member.member_epoch, target_epoch, target, owned, blocked)
    if state == UNREVOKED_TASKS:
        if _owns_any(owned, member.pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, owned, blocked)
    return _next(member, member.member_epoch, target_epoch, target, owned, blocked)


def _next(member: StreamsGroupMember, epoch: int, target_epoch: int, target: TasksTuple,
          owned: TasksTuple | None, blocked: Blocked) -> StreamsGroupMember:
    keep: dict[str, Tasks] = {}
    revoke: dict[str, Tasks] = {}
    add: dict[str, Tasks] = {}
    unreleased = False
    for kind in KINDS:
        have, wanted = getattr(member.assigned, kind), getattr(target, kind)
        keep[kind] = intersect(have, wanted)
        revoke[kind] = minus(have, wanted)
        if kind != "active":
            # A standby or warm-up copy about to become this member's active task is kept
            # (its state stays warm) until the active task is granted (Kafka 4.4).
            promoted = intersect(revoke[kind], target.active)
            keep[kind] = union(keep[kind], promoted)
            revoke[kind] = minus(revoke[kind], promoted)
        free: dict[str, set[int]] = {}
        for sid, parts in minus(wanted, have).items():
            for p in parts:
                if blocked(kind, sid, p):
                    unreleased = True
                else:
                    free.setdefault(sid, set()).add(p)
        add[kind] = freeze(free)
    to_revoke = TasksTuple(revoke["active"], revoke["standby"], revoke["warmup"])
    if not to_revoke.is_empty() and _owns_any(owned, to_revoke):
        return _moved(member, member.member_epoch, UNREVOKED_TASKS,
                      TasksTuple(keep["active"], keep["standby"], keep["warmup"]), to_revoke)
    active = union(keep["active"], add["active"])

    def settled(kind: str) -> Tasks:
        """A promoted copy goes once its task is active here."""
        return minus(union(keep[kind], add[kind]), minus(active, getattr(target, kind)))

    assigned = TasksTuple(active, settled("standby"), settled("warmup"))
    return _moved(member, target_epoch, UNRELEASED_TASKS if unreleased else STABLE, assigned,
                  TasksTuple())


def _moved(member: StreamsGroupMember, epoch: int, state: int, assigned: TasksTuple,
           pending: TasksTuple) -> StreamsGroupMember:
    """Kafka's updateMemberEpoch: the old epoch becomes the previous one. An active task
    kept (or being revoked) keeps the epoch it was assigned at; a new one gets `epoch`."""
    active_epochs = {(sid, p): member.active_epochs.get((sid, p), epoch)
                     for tasks in (assigned.active, pending.active)
                     for sid, parts in tasks.items() for p in parts}
    if (epoch == member.member_epoch and state == member.state and assigned == member.assigned
            and pending == member.pending_revocation
            and active_epochs == dict(member.active_epochs)):
        return member
    previous = member.member_epoch if epoch != member.member_epoch \
        else member.previous_member_epoch
    return replace(member, member_epoch=epoch, previous_member_epoch=previous, state=state,
                   assigned=assigned, pending_revocation=pending, active_epochs=active_epochs)


def holders(members: Iterable[StreamsGroupMember]) -> dict[tuple[str, str, int], set[str]]:
    """(kind, subtopology, partition) -> member ids holding or revoking it."""
    out: dict[tuple[str, str, int], set[str]] = {}
    for m in members:
        for tuple_ in (m.assigned, m.pending_revocation):
            for kind in KINDS:
                for sid, parts in getattr(tuple_, kind).items():
                    for p in parts:
                        out.setdefault((kind, sid, p), set()).add(m.member_id)
    return out

