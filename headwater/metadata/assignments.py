"""Replica lists: Kafka's checks of a manual assignment, and the replicas a new
partition is given.

On one node every list is `[node.id]`. On the shared log a partition's bytes live once in
the object store whatever its replication factor, and any live broker can lead it; the
factor is kept (as Kafka keeps it) and reported: Metadata names the leader and as many
other live brokers as the factor asks (`reported_replicas`), all in sync, so tools that
look for under-replicated partitions find none and `min.insync.replicas` up to the factor
is met by the commit to PostgreSQL and the object store.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence


def assignment_error(replicas: tuple[int, ...], current: tuple[int, ...],
                     registered: set[int], allow_rf_change: bool) -> str | None:
    """Kafka's controller checks of a target replica list (validateManualPartitionAssignment,
    then the replication factor), as the message it answers with; None when valid."""
    if not replicas:
        return "The manual partition assignment includes an empty replica list."
    seen: set[int] = set()
    for broker_id in sorted(replicas):
        if broker_id not in registered:
            return (f"The manual partition assignment includes broker {broker_id}, "
                    "but no such broker is registered.")
        if broker_id in seen:
            return (f"The manual partition assignment includes the broker {broker_id} "
                    "more than once.")
        seen.add(broker_id)
    if not allow_rf_change and len(replicas) != len(current):
        return (f"The replication factor is changed from {len(current)} to "
                f"{len(replicas)}")
    return None


def spread(partition: int, replication_factor: int, brokers: Collection[int]) -> tuple[int, ...]:
    """The replicas a new partition is given: `replication_factor` of the live brokers,
    starting at a different one for each partition (as Kafka spreads them)."""
    live = sorted(brokers)
    return tuple(live[(partition + i) % len(live)] for i in range(replication_factor))


def reported_replicas(stored: Sequence[int], leader: int,
                      live: Collection[int]) -> tuple[int, ...]:
    """The replica list Metadata reports on the shared log: the leader first when it is
    not among the stored replicas (any live broker can lead), then the stored replicas
    that are live, topped up with other live brokers to the stored factor."""
    factor = max(len(stored), 1)
    out = [n for n in stored if n in live]
    if leader >= 0 and leader not in out:
        out.insert(0, leader)
    for node in sorted(live):
        if len(out) >= factor:
            break
        if node not in out:
            out.append(node)
    return tuple(out[:factor])
