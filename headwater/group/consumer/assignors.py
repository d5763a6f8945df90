"""Server-side assignors of KIP-848 consumer groups: "uniform" and "range".

An assignor is a pure function `(members, topics) -> target assignment`:

* `members`: member id -> `MemberSpec` (the topic ids it subscribes to and its current
  *target* partitions, which the assignor keeps where it can: stickiness);
* `topics`: topic id -> `TopicSpec` (name, partition count) for every subscribed topic
  that exists;
* result: member id -> {topic id: frozenset of partitions}, an entry for every member,
  every partition of every subscribed topic given to exactly one subscriber.

Determinism: members are visited in sorted member-id order and topics in name order,
so the same input always yields the same output (the target is persisted as records,
and a replay must not depend on dict order).

* **uniform** (the default): balances the total number of partitions per member. With
  identical subscriptions every member ends with ⌊P/N⌋ or ⌈P/N⌉ partitions and keeps as
  many of its current ones as that allows. With differing subscriptions, partitions go
  to the least-loaded eligible member, then partitions move from the most to the least
  loaded members until no move between eligible members narrows the gap.
* **range**: per topic, the subscribers split the partitions into contiguous ranges
  (the first P mod N of them one more); members keep their lowest current partitions up
  to their quota. Topics with the same partition count and the same subscribers get the
  same partition numbers per member (co-partitioning, for joins).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

TopicAssignment = dict[uuid.UUID, frozenset[int]]
GroupAssignment = dict[str, TopicAssignment]
Partition = tuple[uuid.UUID, int]


@dataclass(frozen=True, slots=True)
class MemberSpec:
    subscribed: frozenset[uuid.UUID]
    current: Mapping[uuid.UUID, frozenset[int]] = field(default_factory=dict)
    instance_id: str | None = None
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    partitions: int


Assignor = Callable[[Mapping[str, MemberSpec], Mapping[uuid.UUID, TopicSpec]], GroupAssignment]


def _collect(owned: dict[str, list[Partition]]) -> GroupAssignment:
    out: GroupAssignment = {}
    for member, parts in owned.items():
        topics: dict[uuid.UUID, set[int]] = {}
        for topic, p in parts:
            topics.setdefault(topic, set()).add(p)
        out[member] = {t: frozenset(ps) for t, ps in topics.items()}
    return out


def _topic_order(topics: Mapping[uuid.UUID, TopicSpec]) -> list[uuid.UUID]:
    return sorted(topics, key=lambda t: (topics[t].name, t))


# ---------------------------------------------------------------------------- uniform

def uniform(members: Mapping[str, MemberSpec],
            topics: Mapping[uuid.UUID, TopicSpec]) -> GroupAssignment:
    if not members:
        return {}
    subscriptions = {frozenset(t for t in m.subscribed if t in topics) for m in members.values()}
    if len(subscriptions) == 1:
        return _uniform_homogeneous(members, topics, next(iter(subscriptions)))
    return _uniform_heterogeneous(members, topics)


def _uniform_homogeneous(members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, TopicSpec],
                         subscribed: frozenset[uuid.UUID]) -> GroupAssignment:
    order = [t for t in _topic_order(topics) if t in subscribed]
    rank = {t: i for i, t in enumerate(order)}
    everything = [(t, p) for t in order for p in range(topics[t].partitions)]
    valid = set(everything)
    ids = sorted(members)
    quota, extras = divmod(len(everything), len(ids))
    owned: dict[str, list[Partition]] = {}
    surplus: dict[str, list[Partition]] = {}
    taken: set[Partition] = set()
    for m in ids:
        current = sorted(((t, p) for t, ps in members[m].current.items() for p in ps
                          if (t, p) in valid and (t, p) not in taken),
                         key=lambda tp: (rank[tp[0]], tp[1]))
        owned[m] = current[:quota]
        surplus[m] = current[quota:]
        taken.update(current)
    # Members that held more than the quota keep one extra while extras remain,
    # the ones that held the most first.
    with_extra: set[str] = set()
    for m in sorted((m for m in ids if surplus[m]), key=lambda m: (-len(surplus[m]), m)):
        if extras == 0:
            break
        owned[m].append(surplus[m][0])
        with_extra.add(m)
        extras -= 1
    kept = {tp for parts in owned.values() for tp in parts}
    free = iter([tp for tp in everything if tp not in kept])
    for m in ids:
        while len(owned[m]) < quota:
            owned[m].append(next(free))
    for m in ids:
        if extras == 0:
            break
        if m not in with_extra:
            owned[m].append(next(free))
            extras -= 1
    return _collect(owned)


def _uniform_heterogeneous(members: Mapping[str, MemberSpec],
                           topics: Mapping[uuid.UUID, TopicSpec]) -> GroupAssignment:
    ids = sorted(members)
    subs = {m: frozenset(t for t in members[m].subscribed if t in topics) for m in ids}
    subscribers = {t: [m for m in ids if t in subs[m]] for t in topics}
    owned: dict[str, set[Partition]] = {m: set() for m in ids}
    owner: dict[Partition, str] = {}
    for m in ids:  # stickiness: keep what is still valid
        for t, ps in members[m].current.items():
            if t not in subs[m]:
                continue
            for p in ps:
                if 0 <= p < topics[t].partitions and (t, p) not in owner:
                    owner[(t, p)] = m
                    owned[m].add((t, p))
    order = sorted((t for t in topics if subscribers[t]),
                   key=lambda t: (len(subscribers[t]), topics[t].name, t))
    for t in order:
        for p in range(topics[t].partitions):
            if (t, p) in owner:
                continue
            m = min(subscribers[t], key=lambda m: (len(owned[m]), m))
            owner[(t, p)] = m
            owned[m].add((t, p))
    # Balance: shift one partition at a time from a member to one at least two lighter,
    # directly or along a chain of members that each pass one on (breadth-first). Each
    # shift lowers the sum of squared loads, so this ends.
    while _shift_one(ids, subs, owned):
        pass
    return _collect({m: sorted(parts) for m, parts in owned.items()})


def _shift_one(ids: list[str], subs: Mapping[str, frozenset[uuid.UUID]],
               owned: dict[str, set[Partition]]) -> bool:
    def movable(giver: str, taker: str) -> Partition | None:
        parts = [tp for tp in owned[giver] if tp[0] in subs[taker]]
        return max(parts) if parts else None

    for donor in sorted(ids, key=lambda m: (-len(owned[m]), m)):
        limit = len(owned[donor]) - 2
        parent: dict[str, tuple[str, Partition] | None] = {donor: None}
        queue = [donor]
        while queue:
            giver = queue.pop(0)
            for taker in sorted(ids, key=lambda m: (len(owned[m]), m)):
                if taker in parent:
                    continue
                tp = movable(giver, taker)
                if tp is None:
                    continue
                parent[taker] = (giver, tp)
                if len(owned[taker]) <= limit:
                    node = taker
                    while parent[node] is not None:
                        giver_of, part = parent[node]  # type: ignore[misc]
                        owned[giver_of].discard(part)
                        owned[node].add(part)
                        node = giver_of
                    return True
                queue.append(taker)
    return False


# ---------------------------------------------------------------------------- range

def range_assignor(members: Mapping[str, MemberSpec],
                   topics: Mapping[uuid.UUID, TopicSpec]) -> GroupAssignment:
    ids = sorted(members)
    owned: dict[str, list[Partition]] = {m: [] for m in ids}
    for t in _topic_order(topics):
        subs = [m for m in ids if t in members[m].subscribed]
        if not subs:
            continue
        count = topics[t].partitions
        quota, extras = divmod(count, len(subs))
        taken: set[int] = set()
        needy: list[tuple[str, int]] = []  # (member, partitions still needed for quota)
        for m in subs:
            current = sorted(p for p in members[m].current.get(t, ())
                             if 0 <= p < count and p not in taken)
            keep = current[:quota]
            remaining = quota - len(current)
            if remaining < 0 and extras > 0:
                extras -= 1
                keep.append(current[quota])
            else:
                needy.append((m, max(remaining, 0)))
            taken.update(keep)
            owned[m] += [(t, p) for p in keep]
        free = [p for p in range(count) if p not in taken]
        pos = 0
        for m, remaining in needy:
            if extras > 0:
                remaining += 1
                extras -= 1
            if remaining > 0:
                owned[m] += [(t, p) for p in free[pos:pos + remaining]]
                pos += remaining
    return _collect(owned)


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_assignor}
