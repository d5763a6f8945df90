"""The sticky task assignor of streams groups (KIP-1071): Kafka's `StickyTaskAssignor`,
named "sticky", the broker-side assignor Kafka 4.4 ships for them.

A task is a subtopology and a partition: `(subtopology_id, p)` for p in
`range(partitions)`. Every task gets exactly one active owner; every task of a stateful
subtopology also gets up to `num_standby_replicas` standby copies. Tasks go to members,
and members belong to processes (Kafka Streams clients, one member per stream thread):
state lives on a process's disk, so placement is decided per process first.

Guarantees, as in Kafka:

* balance: a process's load is its task count over its member count (its capacity), so a
  process with two members gets twice the tasks of one with one; within a process the
  member with the fewest tasks gets the next. Stateful active tasks are balanced on their
  own first, then stateless ones fill up (preferring processes with fewer stateless
  tasks), then standbys;
* stickiness: an active task stays with its previous owner while that member is below its
  quota (ceil(tasks / members), shrunk as members reach it), else goes to a previous
  standby or warm-up holder (those first, then members reporting offsets for the task,
  most caught-up first), else to the least-loaded process. Standbys prefer the previous
  active owner, then previous standby holders, while below the quota on all tasks;
* a standby never lands on a process that holds the task already (as active or standby);
  when there are too few processes, fewer standbys are assigned (Kafka logs a warning);
* deterministic: where Kafka iterates hash maps or breaks heap ties arbitrarily, this
  module sorts (members and processes by id), so the same input gives the same output.

Differences from Kafka's current assignor: when a previous owner is at its quota, the task
first goes to another member of the same process below the quota (its state is on that
process's disk) before the previous standby holders. No rack awareness: Kafka 4.4.0's
sticky assignor places standbys without the client tags too (its later
`RackAwareStandbyPicker` is not in 4.4.0), so `MemberSpec.client_tags` is accepted and
ignored. No warm-up tasks are assigned (Kafka 4.4.0's refiner assigns none either);
warm-ups held before count as standbys.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

log = logging.getLogger("headwater.group")

Tasks = Mapping[str, frozenset[int]]  # subtopology id -> partitions
TaskId = tuple[str, int]
NAME = "sticky"


@dataclass(frozen=True, slots=True)
class MemberSpec:
    member_id: str
    process_id: str
    active: Tasks = field(default_factory=dict)  # the member's current target assignment
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)
    task_offsets: Mapping[TaskId, int] = field(default_factory=dict)  # changelog offset sums
    client_tags: Mapping[str, str] = field(default_factory=dict)  # unused: no rack awareness


@dataclass(frozen=True, slots=True)
class SubtopologySpec:
    subtopology_id: str
    partitions: int  # the number of tasks of the subtopology
    stateful: bool


@dataclass(frozen=True, slots=True)
class MemberTasks:
    active: dict[str, frozenset[int]]
    standby: dict[str, frozenset[int]]
    warmup: dict[str, frozenset[int]]  # always empty: the sticky assignor assigns none


def _ceil_div(tasks: int, members: int) -> int:
    return -(-tasks // members) if members else 0


class _Quota:
    """Tasks per member, recomputed over the rest whenever a member reaches it (Kafka's
    `maybeUpdate*TasksPerMember`), so that sticky members cannot starve the others."""

    __slots__ = ("tasks", "members", "per")

    def __init__(self, tasks: int, members: int) -> None:
        self.tasks, self.members = tasks, members
        self.per = _ceil_div(tasks, members)

    def reached(self, count: int) -> None:
        if count == self.per:
            self.members -= 1
            self.tasks -= count
            self.per = _ceil_div(self.tasks, self.members)


class _Process:
    """Kafka's `ProcessState`: the process's members and the tasks placed on it so far."""

    __slots__ = ("pid", "counts", "held", "tasks", "stateless")

    def __init__(self, pid: str) -> None:
        self.pid = pid
        self.counts: dict[str, int] = {}  # member -> tasks (active and standby) so far
        self.held: set[TaskId] = set()
        self.tasks = 0
        self.stateless = 0  # stateless active tasks

    def load(self) -> float:
        return self.tasks / len(self.counts)

    def stateless_load(self) -> float:
        return self.stateless / len(self.counts)

    def least_loaded(self) -> str:
        return min(self.counts, key=lambda m: (self.counts[m], m))  # Kafka: heap, ties arbitrary


class _State:
    def __init__(self, members: Sequence[MemberSpec], subtopologies: Sequence[SubtopologySpec],
                 replicas: int) -> None:
        self.replicas = replicas
        self.stateful: list[TaskId] = []
        self.stateless: list[TaskId] = []
        for s in subtopologies:
            tasks = self.stateful if s.stateful else self.stateless
            tasks.extend((s.subtopology_id, p) for p in range(s.partitions))
        n = len(members)
        active = len(self.stateful) + len(self.stateless)
        self.q_stateful = _Quota(len(self.stateful), n)
        self.q_active = _Quota(active, n)
        self.q_total = _Quota(active + len(self.stateful) * replicas, n)
        self.procs: dict[str, _Process] = {}
        self.proc_of: dict[str, _Process] = {}
        self.out: dict[str, tuple[set[TaskId], set[TaskId]]] = {}  # member -> (active, standby)
        self.prev_active: dict[TaskId, str] = {}
        # Kafka iterates a hash map of members here; sorting makes ties below deterministic.
        candidates: dict[TaskId, list[tuple[int, int, str]]] = {}
        for m in sorted(members, key=lambda spec: spec.member_id):
            proc = self.procs.setdefault(m.process_id, _Process(m.process_id))
            proc.counts[m.member_id] = 0
            self.proc_of[m.member_id] = proc
            self.out[m.member_id] = (set(), set())
            for task in _flatten(m.active):
                self.prev_active.setdefault(task, m.member_id)
            # A warm-up is a standby being caught up for a move: it counts as one. Offsets
            # alone (e.g. a restarted member's local state) make a weaker candidate.
            held = set(_flatten(m.standby)) | set(_flatten(m.warmup))
            for task in sorted(held):
                candidates.setdefault(task, []).append((0, -m.task_offsets.get(task, 0), m.member_id))
            for task, offset in sorted(m.task_offsets.items()):
                if task not in held:
                    candidates.setdefault(task, []).append((1, -offset, m.member_id))
        # Standbys and warm-ups first, most caught-up first; a stable sort, as in Kafka.
        self.prev_standby = {t: [m for *_, m in sorted(c, key=lambda x: x[:2])]
                             for t, c in candidates.items()}

    def add(self, member: str, task: TaskId, active: bool, stateful: bool) -> None:
        proc = self.proc_of[member]
        proc.counts[member] += 1
        proc.tasks += 1
        proc.held.add(task)
        self.out[member][0 if active else 1].add(task)
        count = proc.counts[member]
        if active:
            proc.stateless += not stateful
            if stateful:  # only read while nothing but stateful actives is placed
                self.q_stateful.reached(count)
            self.q_active.reached(count)
        self.q_total.reached(count)

    def under(self, member: str, quota: _Quota) -> bool:
        return self.proc_of[member].counts[member] < quota.per

    def prev_least_loaded(self, members: Iterable[str], standby: TaskId | None) -> str | None:
        """Kafka's `findPrevMemberWithLeastLoad`: the first candidate, replaced only by one
        whose process and member are both less loaded; for a standby, skipping processes
        that hold the task already."""
        best: str | None = None
        best_load = best_count = 0.0
        for m in members:
            proc = self.proc_of[m]
            if standby is not None and standby in proc.held:
                continue
            load, count = proc.load(), proc.counts[m]
            if best is None or (load < best_load and count < best_count):
                best, best_load, best_count = m, load, count
        return best


def _flatten(tasks: Tasks) -> list[TaskId]:
    return [(s, p) for s in sorted(tasks) for p in sorted(tasks[s])]


def _assign_active(st: _State, tasks: list[TaskId], stateful: bool) -> None:
    quota = st.q_stateful if stateful else st.q_active
    # Range-based assignments pair equal partitions, so stickiness goes partition first.
    rest = sorted(tasks, key=lambda t: (t[1], t[0]))
    # 1. The previous owner, while below the quota.
    left: list[TaskId] = []
    for task in rest:
        owner = st.prev_active.get(task)
        if owner is not None and st.under(owner, quota):
            st.add(owner, task, True, stateful)
        else:
            left.append(task)
    # 2. (headwater) Another member of the previous owner's process: the state is there.
    rest, left = left, []
    for task in rest:
        owner = st.prev_active.get(task)
        sibling = st.proc_of[owner].least_loaded() if owner is not None else None
        if sibling is not None and st.under(sibling, quota):
            st.add(sibling, task, True, stateful)
        else:
            left.append(task)
    # 3. A previous standby or warm-up holder, while below the quota.
    rest, left = left, []
    for task in rest:
        holder = st.prev_least_loaded(st.prev_standby.get(task, ()), None)
        if holder is not None and st.under(holder, quota):
            st.add(holder, task, True, stateful)
        else:
            left.append(task)
    # 4. The least-loaded process (then the fewest stateless tasks), range-based.
    heap = [(p.load(), p.stateless_load(), p.pid) for p in st.procs.values()]
    heapq.heapify(heap)
    for task in sorted(left):
        proc = st.procs[heapq.heappop(heap)[2]]
        st.add(proc.least_loaded(), task, True, stateful)
        heapq.heappush(heap, (proc.load(), proc.stateless_load(), proc.pid))


def _sticky_standbys(st: _State, task: TaskId) -> int:
    """Places standbys of `task` on previous holders below the quota; returns how many."""
    for placed in range(st.replicas):
        owner = st.prev_active.get(task)
        if owner is not None and task not in st.proc_of[owner].held and st.under(owner, st.q_total):
            st.add(owner, task, False, True)
            continue
        holder = st.prev_least_loaded(st.prev_standby.get(task, ()), task)
        if holder is not None and st.under(holder, st.q_total):
            st.add(holder, task, False, True)
            continue
        return placed
    return st.replicas


def _assign_standby(st: _State) -> None:
    left: list[tuple[TaskId, int]] = []
    for task in sorted(st.stateful, key=lambda t: (t[1], t[0]), reverse=True):
        placed = _sticky_standbys(st, task)
        if placed < st.replicas:
            left.append((task, st.replicas - placed))
    heap = [(p.load(), p.pid) for p in st.procs.values()]
    heapq.heapify(heap)
    missing = 0
    for task, count in sorted(left, reverse=True):  # range-based, as Kafka's order
        for i in range(count):
            # The least-loaded process without the task; the ones skipped go back.
            popped: list[_Process] = []
            found = False
            while heap and not found:
                proc = st.procs[heapq.heappop(heap)[1]]
                popped.append(proc)
                if task not in proc.held:
                    st.add(proc.least_loaded(), task, False, True)
                    found = True
            for proc in popped:
                heapq.heappush(heap, (proc.load(), proc.pid))
            if not found:
                missing += count - i
                break
    if missing:
        log.warning("streams assignor: %d of %d standby tasks unassigned: too few processes; "
                    "add instances to keep the requested standby replicas",
                    missing, len(st.stateful) * st.replicas)


def _compact(tasks: set[TaskId]) -> dict[str, frozenset[int]]:
    by_sub: dict[str, set[int]] = {}
    for s, p in sorted(tasks):
        by_sub.setdefault(s, set()).add(p)
    return {s: frozenset(ps) for s, ps in by_sub.items()}


def assign(members: Sequence[MemberSpec], subtopologies: Sequence[SubtopologySpec],
           num_standby_replicas: int) -> dict[str, MemberTasks]:
    """Every member id of `members` -> its tasks (members with nothing get empty dicts)."""
    if num_standby_replicas < 0:
        raise ValueError(f"negative num_standby_replicas: {num_standby_replicas}")
    if len({m.member_id for m in members}) != len(members):
        raise ValueError("duplicate member ids")
    if len({s.subtopology_id for s in subtopologies}) != len(subtopologies):
        raise ValueError("duplicate subtopology ids")
    for s in subtopologies:
        if s.partitions < 0:
            raise ValueError(f"subtopology {s.subtopology_id!r}: negative partitions")
    if not members:
        return {}
    st = _State(members, subtopologies, num_standby_replicas)
    # Stateful first: its quota reads a member's count as its stateful active count.
    _assign_active(st, st.stateful, True)
    _assign_active(st, st.stateless, False)
    if num_standby_replicas:
        _assign_standby(st)
    return {m: MemberTasks(_compact(a), _compact(s), {}) for m, (a, s) in sorted(st.out.items())}
