"""The orphan-object cleaner on a real PostgreSQL and versitygw: an object whose commit
failed goes once it is old enough, a young one (maybe a commit in flight) and a
committed one stay, and the objects of a deleted partition go with their rows unless
another partition's batches still read them."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest

from headwater.config import BrokerConfig
from headwater.shared import committer as store
from headwater.shared.cleaner import delete_orphans
from headwater.shared.objects import WAL_PREFIX, ObjectStore
from headwater.shared.schema import migrate
from headwater.shared.sequencer import BatchRow, Outcome, PartitionCommit, commit
from headwater.shared.settings import SharedSettings
from tests.support.engines import PostgresServer, VersityGateway, create_database

pytestmark = pytest.mark.timeout(60)
LIMIT_S = 2.0  # last-modified times from S3 are whole seconds


async def engines(postgres: PostgresServer, gw: VersityGateway
                  ) -> tuple[str, asyncpg.Connection, ObjectStore]:
    dsn = await create_database(postgres)
    conn = await asyncpg.connect(dsn)
    await migrate(conn, "test")
    settings = SharedSettings.from_config(BrokerConfig({
        "headwater.storage": "shared", "headwater.shared.database": dsn,
        **gw.settings(f"p-{uuid.uuid4().hex[:6]}")}))
    return dsn, conn, ObjectStore(settings)


async def committed_window(conn: asyncpg.Connection, objects: ObjectStore,
                           partitions: list[tuple[uuid.UUID, int]]) -> str:
    """One window's object holding one batch of each partition, committed."""
    key = ObjectStore.new_key(WAL_PREFIX)
    await objects.put_new(key, b"x" * 100 * len(partitions))
    for topic, partition in partitions:
        await conn.execute("INSERT INTO partitions (topic_id, partition, writer_epoch) "
                           "VALUES ($1, $2, 1) ON CONFLICT DO NOTHING", topic, partition)
    done = await commit(conn, key, 100 * len(partitions), [
        PartitionCommit(topic, partition, 1, [BatchRow(0, 0, 100 * i, 100, 1_000)])
        for i, (topic, partition) in enumerate(partitions)])
    assert all(c.outcome is Outcome.COMMITTED for c in done)
    return key


def test_the_prefix_is_the_stores() -> None:
    assert store.WAL_PREFIX == WAL_PREFIX


def test_an_old_orphan_goes_a_young_one_and_a_committed_one_stay(
        postgres: PostgresServer, versitygw: VersityGateway) -> None:
    async def story() -> tuple[int, set[str], set[str], set[str]]:
        _dsn, conn, objects = await engines(postgres, versitygw)
        try:
            orphan = ObjectStore.new_key(WAL_PREFIX)  # PUT, then its commit failed
            await objects.put_new(orphan, b"lost")
            kept = await committed_window(conn, objects, [(uuid.uuid4(), 0)])
            await asyncio.sleep(LIMIT_S + 1.1)
            young = ObjectStore.new_key(WAL_PREFIX)  # PUT, its commit still running
            await objects.put_new(young, b"in flight")
            deleted = await delete_orphans(conn, objects, older_than_s=LIMIT_S)
            rows = {r["key"] for r in await conn.fetch("SELECT key FROM objects")}
            return deleted, set(await objects.keys(WAL_PREFIX)), {young, kept}, rows
        finally:
            await conn.close()

    deleted, left, expected, rows = asyncio.run(story())
    assert deleted == 1
    assert left == expected
    assert len(rows) == 1 and rows <= left  # the committed row stays


def test_a_deleted_partitions_objects_go_with_their_rows(
        postgres: PostgresServer, versitygw: VersityGateway) -> None:
    gone, shared, other = (uuid.uuid4(), 0), (uuid.uuid4(), 0), (uuid.uuid4(), 1)

    async def story() -> tuple[int, set[str], set[str], str, str]:
        dsn, conn, objects = await engines(postgres, versitygw)
        try:
            alone = await committed_window(conn, objects, [gone])
            both = await committed_window(conn, objects, [shared, other])
            # SharedStore._forget: `gone` and `shared` are deleted, `other` still reads
            # the window it shared with `shared`
            for topic, partition in (gone, shared):
                await conn.execute("DELETE FROM batches WHERE topic_id = $1 AND "
                                   "partition = $2", topic, partition)
            pool = await asyncpg.create_pool(dsn, min_size=1, max_size=1)
            try:  # through a pool, as the store will call it; every object is "old"
                deleted = await delete_orphans(pool, objects, older_than_s=0)
            finally:
                await pool.close()
            rows = {r["key"] for r in await conn.fetch("SELECT key FROM objects")}
            return deleted, set(await objects.keys(WAL_PREFIX)), rows, alone, both
        finally:
            await conn.close()

    deleted, left, rows, alone, both = asyncio.run(story())
    assert deleted == 1
    assert left == {both}
    assert rows == {both}
    assert alone not in rows
