"""The shared log's tables, created and migrated by headwater itself.

`MIGRATIONS[n]` takes the schema from version n to n + 1; `migrate` applies the missing
ones in one transaction under an advisory lock (several brokers starting at once migrate
once) and records the version in `headwater_schema`. A database migrated by a newer
headwater (a version above `SCHEMA_VERSION`) is refused: this broker would not know
what the newer one writes.

Version 1 (the design of docs/shared-log.md): per partition its high watermark, log
start and the epoch of its last writer (`partitions`); one row per batch with where its
bytes are (`batches`: an object key and byte range, or inline bytes); the objects
(`objects`), so orphans of a failed commit can be found and deleted; producer state
(`producers`: each producer's epoch and its last five batches' sequence ranges) and
aborted transactions (`aborted_txns`) per partition; leases (`leases`: owner, epoch,
expiry on the database clock) and live brokers (`brokers`).
Version 2: the cluster id (`cluster`), the same for every broker.
Version 3: markers staged by their partitions' owners (`staged_markers`), which a
transaction coordinator commits together in one transaction (`sequencer.promote_markers`).
Version 4: each broker's listeners (`brokers.endpoints`), so that a client is told the
other brokers' addresses on its own listener while brokers reach each other on the
inter-broker listener (`host`, `port`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Union

import asyncpg

if TYPE_CHECKING:
    from asyncpg import Record
    from asyncpg.pool import PoolConnectionProxy

SCHEMA_LOCK = 0x68_77_73_63  # pg_advisory_xact_lock key: "hwsc"

MIGRATIONS: tuple[str, ...] = (
    # 0 -> 1
    """
    CREATE TABLE partitions (
        topic_id uuid NOT NULL,
        partition integer NOT NULL,
        high_watermark bigint NOT NULL DEFAULT 0,
        log_start bigint NOT NULL DEFAULT 0,
        writer_epoch integer NOT NULL DEFAULT 0,
        PRIMARY KEY (topic_id, partition)
    );
    CREATE TABLE objects (
        key text PRIMARY KEY,
        size bigint NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE TABLE batches (
        topic_id uuid NOT NULL,
        partition integer NOT NULL,
        base_offset bigint NOT NULL,
        last_offset bigint NOT NULL,
        object_key text REFERENCES objects (key),
        byte_offset bigint,
        byte_length integer NOT NULL,
        inline_bytes bytea,
        max_timestamp bigint NOT NULL,
        producer_id bigint NOT NULL DEFAULT -1,
        producer_epoch smallint NOT NULL DEFAULT -1,
        base_sequence integer NOT NULL DEFAULT -1,
        is_transactional boolean NOT NULL DEFAULT false,
        is_control boolean NOT NULL DEFAULT false,
        PRIMARY KEY (topic_id, partition, base_offset),
        CHECK ((object_key IS NULL) <> (inline_bytes IS NULL))
    );
    CREATE INDEX batches_by_last_offset ON batches (topic_id, partition, last_offset);
    CREATE TABLE producers (
        topic_id uuid NOT NULL,
        partition integer NOT NULL,
        producer_id bigint NOT NULL,
        producer_epoch smallint NOT NULL,
        recent jsonb NOT NULL,
        txn_first_offset bigint NOT NULL DEFAULT -1,
        coordinator_epoch integer NOT NULL DEFAULT -1,
        last_timestamp bigint NOT NULL DEFAULT -1,
        PRIMARY KEY (topic_id, partition, producer_id)
    );
    CREATE TABLE aborted_txns (
        topic_id uuid NOT NULL,
        partition integer NOT NULL,
        producer_id bigint NOT NULL,
        first_offset bigint NOT NULL,
        last_offset bigint NOT NULL,
        PRIMARY KEY (topic_id, partition, last_offset)
    );
    CREATE TABLE leases (
        resource text PRIMARY KEY,
        owner integer NOT NULL,
        epoch integer NOT NULL,
        expires_at timestamptz NOT NULL
    );
    CREATE TABLE brokers (
        node_id integer PRIMARY KEY,
        host text NOT NULL,
        port integer NOT NULL,
        rack text,
        heartbeat_at timestamptz NOT NULL DEFAULT now()
    );
    """,
    # 1 -> 2: the cluster's id, the same for every broker
    """
    CREATE TABLE cluster (
        singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
        cluster_id text NOT NULL
    );
    """,
    # 2 -> 3: a transaction marker its partition's owner appended and holds, staged for
    # the transaction coordinator to commit with the transaction's other markers
    """
    CREATE TABLE staged_markers (
        topic_id uuid NOT NULL,
        partition integer NOT NULL,
        base_offset bigint NOT NULL,
        writer_epoch integer NOT NULL,
        producer_id bigint NOT NULL,
        producer_epoch smallint NOT NULL,
        max_timestamp bigint NOT NULL,
        data bytea NOT NULL,
        PRIMARY KEY (topic_id, partition)
    );
    """,
    # 3 -> 4: every listener of a broker, as JSON [[name, host, port], ...]; `host` and
    # `port` are its inter-broker listener's
    """
    ALTER TABLE brokers ADD COLUMN endpoints text NOT NULL DEFAULT '';
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)

_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS headwater_schema (
    version integer NOT NULL,
    migrated_at timestamptz NOT NULL DEFAULT now(),
    broker_version text NOT NULL
)
"""


class SchemaTooNew(RuntimeError):
    """The database was migrated by a newer headwater."""


Connection = Union[asyncpg.Connection, "PoolConnectionProxy[Record]"]


async def current_version(conn: Connection) -> int:
    exists = await conn.fetchval("SELECT to_regclass('headwater_schema') IS NOT NULL")
    if not exists:
        return 0
    version = await conn.fetchval("SELECT max(version) FROM headwater_schema")
    return int(version) if isinstance(version, int) else 0


async def migrate(conn: Connection, broker_version: str,
                  migrations: tuple[str, ...] = MIGRATIONS) -> tuple[int, int]:
    """Bring the schema to `len(migrations)`; (version found, version now). Raises
    SchemaTooNew for a newer database, and leaves it untouched."""
    target = len(migrations)
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", SCHEMA_LOCK)
        await conn.execute(_VERSION_TABLE)
        found = await current_version(conn)
        if found > target:
            raise SchemaTooNew(
                f"the database's headwater schema is version {found}, newer than this "
                f"broker's {target} (headwater {broker_version}): upgrade the broker")
        for version in range(found, target):
            await conn.execute(migrations[version])
            await conn.execute("INSERT INTO headwater_schema (version, broker_version) "
                               "VALUES ($1, $2)", version + 1, broker_version)
    return found, target
