"""The shared log's engines, real servers started by the tests: PostgreSQL (the schema
headwater migrates, refusing a newer one; a wrong DSN is one clear error) and versitygw
(create-if-absent, ranged reads; an unreachable store is one clear error)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import asyncpg
import pytest
from obstore.exceptions import AlreadyExistsError

from headwater.config import BrokerConfig
from headwater.shared.database import DatabaseUnavailable, open_pool
from headwater.shared.objects import ObjectStore, ObjectStoreUnavailable
from headwater.shared.schema import SCHEMA_VERSION, SchemaTooNew, migrate
from headwater.shared.settings import SettingError, SharedSettings
from tests.support.engines import PostgresServer, VersityGateway, create_database, free_port

pytestmark = pytest.mark.timeout(120)
T = TypeVar("T")


def run(coro: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(coro())  # type: ignore[arg-type]


def settings(dsn: str, **extra: str) -> SharedSettings:
    config = {"headwater.storage": "shared", "headwater.shared.database": dsn,
              "headwater.shared.objects": "file:///tmp/unused", **extra}
    return SharedSettings.from_config(BrokerConfig(config))


def fresh_database(postgres: PostgresServer) -> str:
    """A new empty database on the server; its DSN."""
    return run(lambda: create_database(postgres))


def test_the_schema_is_created_once_and_kept(postgres: PostgresServer) -> None:
    dsn = fresh_database(postgres)

    async def story() -> tuple[list[str], int]:
        pool = await open_pool(settings(dsn))
        again = await open_pool(settings(dsn))  # a second broker: nothing to do
        async with pool.acquire() as conn:
            tables = sorted(r["tablename"] for r in await conn.fetch(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"))
            rows = await conn.fetchval("SELECT count(*) FROM headwater_schema")
        await pool.close()
        await again.close()
        return tables, rows

    tables, rows = run(story)
    assert {"partitions", "batches", "objects", "producers", "aborted_txns", "leases",
            "brokers", "headwater_schema"} <= set(tables)
    assert rows == SCHEMA_VERSION  # one row per migration, not per start


def test_brokers_starting_together_migrate_once(postgres: PostgresServer) -> None:
    dsn = fresh_database(postgres)

    async def story() -> list[tuple[int, int]]:
        conns = [await asyncpg.connect(dsn) for _ in range(4)]
        try:
            return list(await asyncio.gather(*(migrate(c, "test") for c in conns)))
        finally:
            for c in conns:
                await c.close()

    results = run(story)
    assert sorted(results) == [(0, SCHEMA_VERSION)] + [(SCHEMA_VERSION, SCHEMA_VERSION)] * 3


def test_a_newer_schema_is_refused_and_left_alone(postgres: PostgresServer) -> None:
    dsn = fresh_database(postgres)

    async def story() -> tuple[str, int]:
        pool = await open_pool(settings(dsn))
        async with pool.acquire() as conn:
            await conn.execute("INSERT INTO headwater_schema (version, broker_version) "
                               "VALUES (99, 'from the future')")
        await pool.close()
        with pytest.raises(SchemaTooNew) as refused:
            await open_pool(settings(dsn))
        conn = await asyncpg.connect(dsn)
        try:
            versions = await conn.fetchval("SELECT count(*) FROM headwater_schema")
        finally:
            await conn.close()
        return str(refused.value), versions

    message, versions = run(story)
    assert "version 99, newer than this broker's" in message
    assert versions == SCHEMA_VERSION + 1  # untouched


def test_a_wrong_dsn_is_one_error_naming_the_setting_without_the_password() -> None:
    dsn = f"postgresql://headwater:s3cret@127.0.0.1:{free_port()}/postgres"
    with pytest.raises(DatabaseUnavailable) as err:
        run(lambda: open_pool(settings(dsn)))
    message = str(err.value)
    assert message.startswith("headwater.shared.database=postgresql://headwater:***@")
    assert "s3cret" not in message and "cannot connect" in message


def test_settings_name_the_key_that_is_wrong() -> None:
    def problem(**config: str) -> str:
        with pytest.raises(SettingError) as err:
            SharedSettings.from_config(BrokerConfig(
                {"headwater.storage": "shared", **config}))
        return str(err.value)

    assert problem(**{"headwater.shared.objects": "s3://b"}).startswith(
        "headwater.shared.database is empty")
    assert problem(**{"headwater.shared.database": "mysql://x",
                      "headwater.shared.objects": "s3://b"}).startswith(
        "headwater.shared.database='mysql://x'")
    assert problem(**{"headwater.shared.database": "postgresql://h/db",
                      "headwater.shared.objects": "ftp://x"}).startswith(
        "headwater.shared.objects='ftp://x'")
    assert problem(**{"headwater.storage": "cloud"}).startswith("headwater.storage='cloud'")


def store_on(versitygw: VersityGateway, prefix: str) -> ObjectStore:
    config = {"headwater.storage": "shared",
              "headwater.shared.database": "postgresql://unused/db",
              **versitygw.settings(prefix)}
    return ObjectStore(SharedSettings.from_config(BrokerConfig(config)))


@pytest.mark.parametrize("where", ["s3", "file"])
def test_objects_are_created_once_and_read_by_range(versitygw: VersityGateway,
                                                    tmp_path: Path, where: str) -> None:
    if where == "s3":
        store = store_on(versitygw, f"t-{uuid.uuid4().hex[:6]}")
    else:
        store = ObjectStore(settings("postgresql://unused/db", **{
            "headwater.shared.objects": f"file://{tmp_path}/objects"}))

    async def story() -> tuple[bytes, bytes, list[str], list[str]]:
        await store.check()
        key = store.new_key("wal/")
        await store.put_new(key, b"0123456789" * 100)
        with pytest.raises(AlreadyExistsError):
            await store.put_new(key, b"other bytes")  # never overwritten
        part = await store.get_range(key, 995, 5)
        whole = await store.get(key)
        listed = await store.keys("wal/")
        await store.delete(key)
        return part, whole, listed, await store.keys("wal/")

    part, whole, listed, after = run(story)
    assert part == b"56789" and whole == b"0123456789" * 100
    assert len(listed) == 1 and listed[0].endswith(listed[0].split("/")[-1])
    assert after == []


def test_an_unreachable_object_store_is_one_error_naming_the_setting() -> None:
    config = {"headwater.storage": "shared",
              "headwater.shared.database": "postgresql://unused/db",
              "headwater.shared.objects": "s3://nowhere",
              "headwater.shared.objects.endpoint": f"http://127.0.0.1:{free_port()}",
              "headwater.shared.objects.access.key": "k",
              "headwater.shared.objects.secret.key": "s"}
    store = ObjectStore(SharedSettings.from_config(BrokerConfig(config)), timeout_s=2,
                        retries=0)
    with pytest.raises(ObjectStoreUnavailable) as err:
        run(store.check)
    assert str(err.value).startswith("headwater.shared.objects=s3://nowhere: ")
    assert "\n" not in str(err.value)
