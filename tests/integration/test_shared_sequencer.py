"""The shared log's ordering core on a real PostgreSQL: leases on the database clock,
the owner's stamp, and the commit that confirms an owner's offsets: contiguous, never
from a fenced or stale owner, no deadlock between brokers committing overlapping sets."""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

import asyncpg
import pytest

from headwater.shared import leases
from headwater.shared.schema import migrate
from headwater.shared.sequencer import BatchRow, Outcome, PartitionCommit, ProducerRow, commit
from tests.support.engines import PostgresServer, create_database

pytestmark = pytest.mark.timeout(120)
T = TypeVar("T")


def run(coro: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(coro())  # type: ignore[arg-type]


async def database(postgres: PostgresServer) -> str:
    dsn = await create_database(postgres)
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn, "test")
    finally:
        await conn.close()
    return dsn


def window(topic: uuid.UUID, partition: int, epoch: int, first: int, sizes: list[int],
           inline: bool = False) -> PartitionCommit:
    batches, offset, pos = [], first, 0
    for n in sizes:
        batches.append(BatchRow(offset, offset + n - 1, pos, 100, 1_000,
                                inline=b"x" * 100 if inline else None))
        offset, pos = offset + n, pos + 100
    return PartitionCommit(topic, partition, epoch, batches)


def test_leases_take_turns_on_the_database_clock(postgres: PostgresServer) -> None:
    async def story() -> None:
        conn = await asyncpg.connect(await database(postgres))
        try:
            first = await leases.acquire(conn, "partition:x", 1, 300)
            assert first is not None and first.epoch == 1
            assert await leases.acquire(conn, "partition:x", 2, 300) is None  # held
            renewed = await leases.acquire(conn, "partition:x", 1, 300)
            assert renewed is not None and renewed.epoch == 1  # renewal keeps the epoch
            deadline = time.monotonic() + 10
            taken = None
            while taken is None:  # broker 1 stops renewing: it expires
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
                taken = await leases.acquire(conn, "partition:x", 2, 300)
            assert taken.epoch == 2 and taken.owner == 2
            now = await leases.holder(conn, "partition:x")
            assert now is not None and (now.owner, now.epoch) == (2, 2)
            assert await leases.release(conn, taken)
            back = await leases.acquire(conn, "partition:x", 1, 300)
            assert back is not None and back.epoch == 3  # a takeover always moves on
        finally:
            await conn.close()

    run(story)


def test_renewals_keep_what_is_held_and_never_deadlock_with_takes(
        postgres: PostgresServer) -> None:
    """`renew_all` renews the unexpired leases held at their epochs, and nothing else;
    run against another broker's `acquire_all` of the same leases, in many rounds,
    neither is aborted as a deadlock (the renewal's UPDATE over a join locked rows in
    the join's order; it now locks them in resource order, as a take does)."""
    async def story() -> None:
        dsn = await database(postgres)
        one, two = await asyncpg.connect(dsn), await asyncpg.connect(dsn)
        try:
            names = [f"partition:{uuid.uuid4()}:{i}" for i in range(40)]
            held = await leases.acquire_all(one, names, 1, 60_000)
            assert await leases.renew_all(one, 1, [(n, held[n]) for n in names[:5]]
                                          + [("partition:nobody:0", 1)], 60_000) \
                == set(names[:5])
            assert await leases.renew_all(one, 1, [(names[0], held[names[0]] + 1)],
                                          60_000) == set()  # another epoch: not ours
            for _round in range(60):
                held = await leases.acquire_all(one, names, 1, 1)  # expiring at once
                rng = random.Random(_round)
                mine = [(n, held[n]) for n in rng.sample(names, len(names))]
                theirs = rng.sample(names, len(names))
                await asyncio.gather(leases.renew_all(one, 1, mine, 60_000),
                                     leases.acquire_all(two, theirs, 2, 60_000))
                await one.execute("UPDATE leases SET expires_at = clock_timestamp()")
        finally:
            await one.close()
            await two.close()

    run(story)


def test_a_fenced_owner_writes_nothing(postgres: PostgresServer) -> None:
    topic = uuid.uuid4()

    async def story() -> tuple[list[Outcome | None], int, int]:
        conn = await asyncpg.connect(await database(postgres))
        try:
            assert await leases.stamp(conn, topic, 0, 1)
            done = await commit(conn, "obj-1", 300, [window(topic, 0, 1, 0, [2, 3])])
            outcomes = [done[0].outcome]
            assert await leases.stamp(conn, topic, 0, 2)  # a new owner takes over
            assert not await leases.stamp(conn, topic, 0, 1)  # the old one cannot go back
            zombie = await commit(conn, "obj-2", 100, [window(topic, 0, 1, 5, [1])])
            stale = await commit(conn, "obj-3", 100, [window(topic, 0, 2, 3, [1])])
            outcomes += [zombie[0].outcome, stale[0].outcome]
            fresh = await commit(conn, "obj-4", 100, [window(topic, 0, 2, 5, [4])])
            outcomes.append(fresh[0].outcome)
            rows = await conn.fetchval("SELECT count(*) FROM batches WHERE topic_id = $1",
                                       topic)
            hw = await conn.fetchval("SELECT high_watermark FROM partitions "
                                     "WHERE topic_id = $1", topic)
            return outcomes, rows, hw
        finally:
            await conn.close()

    outcomes, rows, hw = run(story)
    assert outcomes == [Outcome.COMMITTED, Outcome.FENCED, Outcome.STALE, Outcome.COMMITTED]
    assert (rows, hw) == (3, 9)  # nothing of the fenced or stale windows


def test_one_window_commits_what_passes_and_records_its_rows(postgres: PostgresServer
                                                             ) -> None:
    a, b = uuid.uuid4(), uuid.uuid4()

    async def story() -> tuple[list[Outcome | None], list[tuple[int, int]], object, int]:
        conn = await asyncpg.connect(await database(postgres))
        try:
            await leases.stamp(conn, a, 0, 1)
            await leases.stamp(conn, b, 0, 1)
            w1 = window(a, 0, 1, 0, [2], inline=True)
            w1.producers = [ProducerRow(7, 0, [(0, 1, 0, 1)])]
            w1.aborted = [(8, 0, 1)]
            w2 = window(b, 0, 9, 0, [1])  # wrong epoch: only this one fails
            w3 = window(uuid.uuid4(), 0, 1, 0, [1])  # never stamped
            done = await commit(conn, "obj", 200, [w2, w1, w3])
            offsets = [(r["base_offset"], r["last_offset"]) for r in await conn.fetch(
                "SELECT base_offset, last_offset FROM batches ORDER BY topic_id")]
            recent = await conn.fetchval("SELECT recent FROM producers")
            aborted = await conn.fetchval("SELECT count(*) FROM aborted_txns")
            return [c.outcome for c in done], offsets, recent, aborted
        finally:
            await conn.close()

    outcomes, offsets, recent, aborted = run(story)
    assert outcomes == [Outcome.FENCED, Outcome.COMMITTED, Outcome.UNKNOWN]
    assert offsets == [(0, 1)] and recent == "[[0, 1, 0, 1]]" and aborted == 1


def test_brokers_committing_overlapping_partitions_never_deadlock_or_leave_holes(
        postgres: PostgresServer) -> None:
    """Writers that race on the same partitions (each reads the high watermarks, then
    commits a window over three of them in a random order): the rows are locked in one
    order, so no deadlock; a loser's partition is STALE and retried; no hole."""
    topics = [uuid.uuid4() for _ in range(6)]
    writers, wins_each = 4, 60

    async def story() -> tuple[int, int, list[tuple[int, int]]]:
        dsn = await database(postgres)
        setup = await asyncpg.connect(dsn)
        for t in topics:
            await leases.stamp(setup, t, 0, 1)
        conns = [await asyncpg.connect(dsn) for _ in range(writers)]
        wins = stale = 0

        async def writer(conn: asyncpg.Connection, rng: random.Random) -> None:
            nonlocal wins, stale
            mine = 0
            while mine < wins_each:
                picked = rng.sample(topics, 3)
                hws = {r["topic_id"]: r["high_watermark"] for r in await conn.fetch(
                    "SELECT topic_id, high_watermark FROM partitions "
                    "WHERE topic_id = ANY($1::uuid[])", picked)}
                inline = rng.random() < 0.5
                done = await commit(conn, None if inline else f"o-{uuid.uuid4().hex}", 1,
                                    [window(t, 0, 1, hws[t], [rng.randint(1, 5)],
                                            inline=inline) for t in picked])
                for c in done:
                    assert c.outcome in (Outcome.COMMITTED, Outcome.STALE)
                    if c.outcome is Outcome.COMMITTED:
                        mine += 1
                    else:
                        stale += 1
            wins += mine

        try:
            await asyncio.gather(*(writer(c, random.Random(i)) for i, c in enumerate(conns)))
            per_topic = await setup.fetch(
                "SELECT min(base_offset) AS lo, "
                "sum(last_offset - base_offset + 1) - max(last_offset) - 1 AS holes "
                "FROM batches GROUP BY topic_id")
            return wins, stale, [(r["lo"], r["holes"]) for r in per_topic]
        finally:
            for c in conns:
                await c.close()
            await setup.close()

    wins, stale, per_topic = run(story)
    assert wins >= writers * wins_each
    assert per_topic and all(lo == 0 and holes == 0 for lo, holes in per_topic)


def test_concurrent_windows_without_coordination_commit_exactly_one_per_offset(
        postgres: PostgresServer) -> None:
    """Two brokers both believing they own a partition at the same epoch (which leases
    prevent) still cannot both commit the same offsets: the second is STALE."""
    topic = uuid.uuid4()

    async def story() -> list[Outcome | None]:
        dsn = await database(postgres)
        conns = [await asyncpg.connect(dsn) for _ in range(2)]
        try:
            await leases.stamp(conns[0], topic, 0, 1)
            results = await asyncio.gather(
                *(commit(c, None, 0, [window(topic, 0, 1, 0, [3], inline=True)])
                  for c in conns))
            return sorted((r[0].outcome for r in results), key=lambda o: o.value if o else "")
        finally:
            for c in conns:
                await c.close()

    assert run(story) == [Outcome.COMMITTED, Outcome.STALE]


def test_staged_markers_commit_all_or_none(postgres: PostgresServer) -> None:
    """`staged_markers.promote`: the markers of one producer staged on three partitions
    commit together; while one partition's check fails (its high watermark moved past
    the marker's offset, or a newer owner stamped it) none of them is written."""
    from headwater.shared.staged_markers import StagedMarker, promote, stage

    a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()

    async def story() -> list[object]:
        conn = await asyncpg.connect(await database(postgres))
        seen: list[object] = []

        async def state() -> tuple[object, ...]:
            hws = await conn.fetch("SELECT topic_id, high_watermark FROM partitions")
            return (sorted((str(r[0]), r[1]) for r in hws),
                    await conn.fetchval("SELECT count(*) FROM batches WHERE is_control"),
                    await conn.fetchval("SELECT count(*) FROM staged_markers"))
        try:
            for t in (a, b, c):
                await leases.stamp(conn, t, 0, 1)
                await commit(conn, None, 0, [window(t, 0, 1, 0, [2], inline=True)])
                await stage(conn, StagedMarker(t, 0, 2, 1, 7, 0, 1_000, b"m" * 61))
            before = await state()
            # c's owner moved on (its high watermark is past the staged offset)
            await commit(conn, None, 0, [window(c, 0, 1, 2, [1], inline=True)])
            stale = await promote(conn, [(a, 0), (b, 0), (c, 0)], 7, 0)
            seen.append(sorted(o.value for o in stale.values()))
            after_stale = await state()
            seen.append(after_stale[1:] == (0, 3))
            # c restaged at its new end, then a newer owner of b stamps it
            await stage(conn, StagedMarker(c, 0, 3, 1, 7, 0, 1_000, b"m" * 61))
            await leases.stamp(conn, b, 0, 2)
            fenced = await promote(conn, [(a, 0), (b, 0), (c, 0)], 7, 0)
            seen.append(fenced[(b, 0)])
            seen.append((await state())[1:] == (0, 3))
            wrong = await promote(conn, [(a, 0)], 8, 0)  # another producer's: none staged
            seen.append(wrong[(a, 0)])
            # b restaged under its new owner: all three commit at once
            await stage(conn, StagedMarker(b, 0, 2, 2, 7, 0, 1_000, b"m" * 61))
            done = await promote(conn, [(a, 0), (b, 0), (c, 0)], 7, 0)
            seen.append(set(done.values()))
            seen.append(await state())
            seen.append(before[1:])
        finally:
            await conn.close()
        return seen

    seen = run(story)
    assert seen[0] == ["committed", "committed", "stale"]
    assert seen[1] is True and seen[3] is True
    assert seen[2] is Outcome.FENCED and seen[4] is Outcome.UNKNOWN
    assert seen[5] == {Outcome.COMMITTED}
    hws, control, staged = seen[6]  # type: ignore[misc]
    assert dict(hws) == {str(a): 3, str(b): 3, str(c): 4} and (control, staged) == (3, 0)
    assert seen[7] == (0, 3)


def test_a_writer_stalled_inside_its_commit_does_not_hold_a_takeover_past_a_lease(
        postgres: PostgresServer) -> None:
    """A broker paused (SIGSTOP) between two statements of its commit keeps the
    partition's row locked; with the brokers' session settings PostgreSQL ends its
    session after a lease time, so the next owner's stamp goes through, and the stalled
    commit fails (outcome unknown: nothing acknowledged)."""
    from headwater.shared.database import session_settings

    lease_ms = 1000

    async def story() -> None:
        dsn = await database(postgres)
        topic = uuid.uuid4()
        stalled = await asyncpg.connect(dsn, server_settings=session_settings(lease_ms))
        taker = await asyncpg.connect(dsn, server_settings=session_settings(lease_ms))
        try:
            assert await leases.stamp(stalled, topic, 0, 1)
            tx = stalled.transaction()
            await tx.start()
            await stalled.fetch("SELECT * FROM partitions WHERE topic_id = $1 FOR UPDATE",
                                topic)
            started = time.monotonic()  # the writer stalls here, its row locked
            assert await asyncio.wait_for(leases.stamp(taker, topic, 0, 2), 30)
            waited = time.monotonic() - started
            assert waited < 10 * lease_ms / 1000, waited
            # whatever asyncpg raises on a session the server ended (the broker's commit
            # takes any exception as an unknown outcome)
            with pytest.raises((asyncpg.PostgresError, asyncpg.InterfaceError,
                                asyncpg.InternalClientError, ConnectionError)):
                await stalled.execute("UPDATE partitions SET high_watermark = 5 "
                                      "WHERE topic_id = $1", topic)
                await tx.commit()
            row = await taker.fetchrow("SELECT high_watermark, writer_epoch FROM partitions "
                                       "WHERE topic_id = $1", topic)
            assert (row["high_watermark"], row["writer_epoch"]) == (0, 2)
        finally:
            await taker.close()
            stalled.terminate()

    run(story)
