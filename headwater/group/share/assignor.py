"""The share-group assignor ("simple", Kafka's only one): partitions may be shared.

Theory of operation
-------------------
Share groups have no partition ownership: records, not partitions, are handed out one
consumer at a time by the share-partition leader. So the assignor only has to spread
members over partitions, and may put several members on one partition. It follows the
rules of Kafka 4.1+'s `SimpleHomogeneousAssignmentBuilder`, balance before stickiness:

* every subscribed partition gets at least one member (if any member subscribes);
* with M members and P partitions, each partition gets `sharing = ceil(M / P)` members
  (one when members <= partitions), so there are `sharing * P` slots; member i of the
  sorted member list gets `ceil(slots*(i+1)/M) - ceil(slots*i/M)` of them, so member
  sizes differ by at most one;
* a member keeps the partitions it already has (up to its quota and the partition's
  sharing) before anything new is handed out; the rest go to the least-loaded members
  that do not hold the partition yet.

Members whose subscriptions differ are assigned topic by topic, over the members that
subscribe to each topic (Kafka's heterogeneous builder also works per topic).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from ..modern.assignment import Assignment, freeze

Partition = tuple[uuid.UUID, int]
NAME = "simple"


def _quotas(members: list[str], slots: int) -> dict[str, int]:
    n = len(members)
    return {m: -(-slots * (i + 1) // n) - -(-slots * i // n) for i, m in enumerate(members)}


def _assign(members: list[str], partitions: list[Partition],
            current: Mapping[str, set[Partition]]) -> dict[str, set[Partition]]:
    """One homogeneous round: `members` all subscribe to exactly `partitions`."""
    out: dict[str, set[Partition]] = {m: set() for m in members}
    if not members or not partitions:
        return out
    sharing = -(-len(members) // len(partitions))
    quota = _quotas(members, sharing * len(partitions))
    holders: dict[Partition, set[str]] = {p: set() for p in partitions}
    # 1. Stickiness: keep what each member has, within its quota and the sharing.
    for m in members:
        for p in sorted(current.get(m, ()), key=lambda tp: (str(tp[0]), tp[1])):
            if p in holders and len(out[m]) < quota[m] and len(holders[p]) < sharing:
                out[m].add(p)
                holders[p].add(m)
    # 2. Fill every partition up to the sharing with the least-loaded members left.
    order = {m: i for i, m in enumerate(members)}
    for p in partitions:
        while len(holders[p]) < sharing:
            free = [m for m in members if m not in holders[p] and len(out[m]) < quota[m]]
            if not free:  # quotas exhausted by stickiness corner cases: stay balanced
                free = [m for m in members if m not in holders[p]]
            if not free:
                break
            m = min(free, key=lambda x: (len(out[x]) - quota[x], len(out[x]), order[x]))
            out[m].add(p)
            holders[p].add(m)
    return out


def assign(subscriptions: Mapping[str, frozenset[uuid.UUID]],
           partition_counts: Mapping[uuid.UUID, int],
           current: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """The target assignment of every member (an empty one for members with nothing).

    `subscriptions`: member -> subscribed topic ids (existing topics only);
    `partition_counts`: topic id -> partitions; `current`: the previous target.
    """
    members = sorted(subscriptions)
    held: dict[str, set[Partition]] = {
        m: {(t, p) for t, ps in current.get(m, {}).items() for p in ps} for m in members}
    result: dict[str, set[Partition]] = {m: set() for m in members}
    topics = sorted({t for ts in subscriptions.values() for t in ts}, key=str)
    homogeneous = len({subscriptions[m] for m in members}) <= 1
    groups: list[tuple[list[str], list[uuid.UUID]]]
    if homogeneous:
        groups = [(members, topics)]
    else:
        groups = [([m for m in members if t in subscriptions[m]], [t]) for t in topics]
    for group_members, group_topics in groups:
        parts = [(t, p) for t in group_topics for p in range(partition_counts.get(t, 0))]
        for m, got in _assign(group_members, parts, held).items():
            result[m] |= got
    out: dict[str, Assignment] = {}
    for m, parts_ in result.items():
        by_topic: dict[uuid.UUID, set[int]] = {}
        for t, p in parts_:
            by_topic.setdefault(t, set()).add(p)
        out[m] = freeze(by_topic)
    return out
