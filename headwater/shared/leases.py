"""Leases in PostgreSQL, on the database's clock: who serves a partition (or runs a
coordinator, or the controller), and with which epoch.

A lease is (resource, owner, epoch, expiry). `acquire` takes a free or expired lease
with the next epoch, or renews one the caller already holds (same epoch); `release`
gives it up early. Holding a lease is not enough to write: a new owner first `stamp`s
its epoch on the partition's row, and every commit checks the row still carries it
(`sequencer.py`), so a broker paused past its lease (SIGSTOP, a long stall) writes
nothing when it wakes: its epoch is no longer the row's.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from .schema import Connection


@dataclass(frozen=True, slots=True)
class Lease:
    resource: str
    owner: int
    epoch: int
    expires_in_ms: int  # at the time of the answer, on the database's clock


def partition_resource(topic_id: uuid.UUID, partition: int) -> str:
    return f"partition:{topic_id}:{partition}"


async def acquire(conn: Connection, resource: str, owner: int, ttl_ms: int,
                  bump: bool = False) -> Lease | None:
    """Take (epoch + 1) a lease that is free or expired, or renew one `owner` holds
    (same epoch; with `bump`, a new epoch: a restarted broker takes its partitions over
    from its previous incarnation, which may still be writing); None while another
    broker holds it."""
    row = await conn.fetchrow(
        """
        INSERT INTO leases AS l (resource, owner, epoch, expires_at)
        VALUES ($1, $2, 1, clock_timestamp() + $3 * interval '1 millisecond')
        ON CONFLICT (resource) DO UPDATE SET
            epoch = CASE WHEN l.owner = EXCLUDED.owner AND l.expires_at > clock_timestamp()
                              AND NOT $4 THEN l.epoch ELSE l.epoch + 1 END,
            owner = EXCLUDED.owner,
            expires_at = EXCLUDED.expires_at
        WHERE l.owner = EXCLUDED.owner OR l.expires_at <= clock_timestamp()
        RETURNING epoch,
                  (extract(epoch FROM expires_at - clock_timestamp()) * 1000)::bigint AS left_ms
        """, resource, owner, ttl_ms, bump)
    if row is None:
        return None
    return Lease(resource, owner, int(row["epoch"]), int(row["left_ms"]))


async def acquire_all(conn: Connection, resources: list[str], owner: int,
                      ttl_ms: int) -> dict[str, int]:
    """`acquire(..., bump=True)` of many leases in one statement (in resource order, so
    two brokers taking overlapping sets wait for each other rather than deadlock); the
    epoch of each one taken."""
    rows = await conn.fetch(
        """
        INSERT INTO leases AS l (resource, owner, epoch, expires_at)
        SELECT r, $2, 1, clock_timestamp() + $3 * interval '1 millisecond'
        FROM unnest($1::text[]) AS r ORDER BY r
        ON CONFLICT (resource) DO UPDATE SET
            epoch = l.epoch + 1, owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
        WHERE l.owner = EXCLUDED.owner OR l.expires_at <= clock_timestamp()
        RETURNING resource, epoch
        """, sorted(resources), owner, ttl_ms)
    return {row["resource"]: int(row["epoch"]) for row in rows}


async def renew_all(conn: Connection, owner: int, held: list[tuple[str, int]],
                    ttl_ms: int) -> set[str]:
    """Renew, in one statement, the unexpired leases `owner` holds at the given
    (resource, epoch); the resources renewed (a missing one is lost: expired, or taken
    with a newer epoch). The rows are locked in resource order, as `acquire_all` locks
    them: an UPDATE over a join locks in whatever order the join yields, and a renewal
    and another broker's take of the same leases then deadlocked (PostgreSQL aborted
    one; seen in the fault campaign under load)."""
    if not held:
        return set()
    rows = await conn.fetch(
        """
        WITH mine AS (
            SELECT l.resource FROM leases AS l
            JOIN unnest($2::text[], $3::int[]) AS h(resource, epoch)
              ON l.resource = h.resource AND l.epoch = h.epoch
            WHERE l.owner = $1 AND l.expires_at > clock_timestamp()
            ORDER BY l.resource FOR UPDATE OF l)
        UPDATE leases AS l SET expires_at = clock_timestamp() + $4 * interval '1 millisecond'
        FROM mine WHERE l.resource = mine.resource
        RETURNING l.resource
        """, owner, [r for r, _e in held], [e for _r, e in held], ttl_ms)
    return {row["resource"] for row in rows}


async def release(conn: Connection, lease: Lease) -> bool:
    """Expire the lease now if it is still this one (same owner and epoch)."""
    status = await conn.execute(
        "UPDATE leases SET expires_at = clock_timestamp() "
        "WHERE resource = $1 AND owner = $2 AND epoch = $3", lease.resource, lease.owner,
        lease.epoch)
    return status.endswith(" 1")


async def holder(conn: Connection, resource: str) -> Lease | None:
    """The current unexpired holder, if any."""
    row = await conn.fetchrow(
        "SELECT owner, epoch, (extract(epoch FROM expires_at - clock_timestamp()) * 1000)"
        "::bigint AS left_ms FROM leases WHERE resource = $1 "
        "AND expires_at > clock_timestamp()", resource)
    if row is None:
        return None
    return Lease(resource, int(row["owner"]), int(row["epoch"]), int(row["left_ms"]))


async def stamp_all(conn: Connection, stamps: list[tuple[uuid.UUID, int, int]]
                    ) -> dict[tuple[uuid.UUID, int], tuple[int, int]]:
    """`stamp` of many (topic id, partition, epoch) in one statement; (high watermark,
    log start) of each partition stamped."""
    ordered = sorted(stamps)
    rows = await conn.fetch(
        """
        INSERT INTO partitions AS p (topic_id, partition, writer_epoch)
        SELECT * FROM unnest($1::uuid[], $2::int[], $3::int[]) ORDER BY 1, 2
        ON CONFLICT (topic_id, partition) DO UPDATE SET writer_epoch = EXCLUDED.writer_epoch
        WHERE p.writer_epoch <= EXCLUDED.writer_epoch
        RETURNING topic_id, partition, high_watermark, log_start
        """, [t for t, _p, _e in ordered], [p for _t, p, _e in ordered],
        [e for _t, _p, e in ordered])
    return {(row["topic_id"], int(row["partition"])):
            (int(row["high_watermark"]), int(row["log_start"])) for row in rows}


async def stamp(conn: Connection, topic_id: uuid.UUID, partition: int, epoch: int) -> bool:
    """A new owner's first write: the partition row carries its lease epoch from now on
    (created if missing). False when the row already carries a newer epoch (this owner
    was superseded before it started)."""
    status = await conn.execute(
        """
        INSERT INTO partitions AS p (topic_id, partition, writer_epoch) VALUES ($1, $2, $3)
        ON CONFLICT (topic_id, partition) DO UPDATE SET writer_epoch = EXCLUDED.writer_epoch
        WHERE p.writer_epoch <= EXCLUDED.writer_epoch
        """, topic_id, partition, epoch)
    return status.endswith(" 1")
