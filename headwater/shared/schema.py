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
Version 5: a commit window's transaction in one statement (`headwater_commit_window`,
`sequencer.commit`): one round trip where BEGIN, the locks, the writes and COMMIT were
four (a quarter of the broker's CPU per window, and half the commit's latency); a
transaction's markers promoted in one (`headwater_promote_markers`,
`staged_markers.promote`) where it took seven.
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
    # 4 -> 5: a commit window's transaction as one statement (sequencer.commit's common
    # window): the object's row, the partitions locked and judged, the batch rows and
    # high watermarks of those that pass, the notification; (partition, outcome) rows.
    # And a transaction's staged markers promoted, all or none, as one statement.
    """
    CREATE FUNCTION headwater_commit_window(
        p_key text, p_size bigint, p_topics uuid[], p_parts integer[],
        p_epochs integer[], p_firsts bigint[], p_ends bigint[],
        b_topics uuid[], b_parts integer[], b_bases bigint[], b_lasts bigint[],
        b_keys text[], b_positions bigint[], b_lengths integer[], b_inline bytea[],
        b_timestamps bigint[], b_producers bigint[], b_producer_epochs smallint[],
        b_sequences integer[], b_transactional boolean[], b_control boolean[],
        p_channel text)
    RETURNS TABLE (topic_id uuid, part integer, outcome text)
    LANGUAGE plpgsql AS $$
    #variable_conflict use_column
    DECLARE
        outcomes text[];
        ok_topics uuid[];
        ok_parts integer[];
        ok_ends bigint[];
    BEGIN
        IF p_key IS NOT NULL THEN
            INSERT INTO objects (key, size) VALUES (p_key, p_size);
        END IF;
        -- the rows locked in key order (as every writer locks them), then judged
        WITH locked AS MATERIALIZED (
            SELECT p.topic_id, p.partition, p.high_watermark, p.writer_epoch
            FROM partitions AS p
            WHERE (p.topic_id, p.partition) IN (SELECT * FROM unnest(p_topics, p_parts))
            ORDER BY p.topic_id, p.partition FOR UPDATE),
        judged AS (
            SELECT w.i, w.t, w.n, w.h,
                   CASE WHEN l.topic_id IS NULL THEN 'unknown'
                        WHEN l.writer_epoch <> w.e THEN 'fenced'
                        WHEN l.high_watermark <> w.f THEN 'stale'
                        ELSE 'committed' END AS o
            FROM unnest(p_topics, p_parts, p_epochs, p_firsts, p_ends)
                WITH ORDINALITY AS w(t, n, e, f, h, i)
            LEFT JOIN locked AS l ON l.topic_id = w.t AND l.partition = w.n)
        SELECT array_agg(j.o ORDER BY j.i),
               array_agg(j.t ORDER BY j.i) FILTER (WHERE j.o = 'committed'),
               array_agg(j.n ORDER BY j.i) FILTER (WHERE j.o = 'committed'),
               array_agg(j.h ORDER BY j.i) FILTER (WHERE j.o = 'committed')
            INTO outcomes, ok_topics, ok_parts, ok_ends FROM judged AS j;
        RETURN QUERY SELECT * FROM unnest(p_topics, p_parts, outcomes);
        IF ok_topics IS NULL THEN
            RETURN;
        END IF;
        IF cardinality(ok_topics) = cardinality(p_topics) THEN  -- the common window
            INSERT INTO batches (topic_id, partition, base_offset, last_offset, object_key,
                                 byte_offset, byte_length, inline_bytes, max_timestamp,
                                 producer_id, producer_epoch, base_sequence,
                                 is_transactional, is_control)
                SELECT * FROM unnest(b_topics, b_parts, b_bases, b_lasts, b_keys,
                                     b_positions, b_lengths, b_inline, b_timestamps,
                                     b_producers, b_producer_epochs, b_sequences,
                                     b_transactional, b_control);
        ELSE
            INSERT INTO batches (topic_id, partition, base_offset, last_offset, object_key,
                                 byte_offset, byte_length, inline_bytes, max_timestamp,
                                 producer_id, producer_epoch, base_sequence,
                                 is_transactional, is_control)
                SELECT b.* FROM unnest(b_topics, b_parts, b_bases, b_lasts, b_keys,
                                       b_positions, b_lengths, b_inline, b_timestamps,
                                       b_producers, b_producer_epochs, b_sequences,
                                       b_transactional, b_control)
                    AS b(t, n, base, last, k, pos, len, inl, ts, pid, pe, seq, tx, ctl)
                WHERE (b.t, b.n) IN (SELECT * FROM unnest(ok_topics, ok_parts));
        END IF;
        UPDATE partitions AS p SET high_watermark = n.h
            FROM unnest(ok_topics, ok_parts, ok_ends) AS n(t, n, h)
            WHERE p.topic_id = n.t AND p.partition = n.n;
        PERFORM pg_notify(p_channel, (
            SELECT string_agg(n.t || ':' || n.n || ':' || n.h, ',')
            FROM unnest(ok_topics, ok_parts, ok_ends) AS n(t, n, h)));
    END
    $$;
    CREATE FUNCTION headwater_promote_markers(
        p_topics uuid[], p_parts integer[], p_producer bigint, p_producer_epoch smallint,
        p_channel text)
    RETURNS TABLE (topic_id uuid, part integer, outcome text)
    LANGUAGE plpgsql AS $$
    #variable_conflict use_column
    BEGIN
        PERFORM 1 FROM partitions AS p
            WHERE (p.topic_id, p.partition) IN (SELECT * FROM unnest(p_topics, p_parts))
            ORDER BY p.topic_id, p.partition FOR UPDATE;
        RETURN QUERY
            SELECT k.t, k.n, CASE WHEN p.topic_id IS NULL OR s.base_offset IS NULL
                                       OR s.producer_id <> p_producer
                                       OR s.producer_epoch <> p_producer_epoch
                                  THEN 'unknown'
                                  WHEN p.writer_epoch <> s.writer_epoch THEN 'fenced'
                                  WHEN p.high_watermark <> s.base_offset THEN 'stale'
                                  ELSE 'committed' END
            FROM unnest(p_topics, p_parts) AS k(t, n)
            LEFT JOIN partitions AS p ON p.topic_id = k.t AND p.partition = k.n
            LEFT JOIN staged_markers AS s ON s.topic_id = k.t AND s.partition = k.n;
        IF EXISTS (
            SELECT 1 FROM unnest(p_topics, p_parts) AS k(t, n)
            LEFT JOIN partitions AS p ON p.topic_id = k.t AND p.partition = k.n
            LEFT JOIN staged_markers AS s ON s.topic_id = k.t AND s.partition = k.n
            WHERE p.topic_id IS NULL OR s.base_offset IS NULL
                  OR s.producer_id <> p_producer OR s.producer_epoch <> p_producer_epoch
                  OR p.writer_epoch <> s.writer_epoch
                  OR p.high_watermark <> s.base_offset) THEN
            RETURN;  -- all or none
        END IF;
        INSERT INTO batches (topic_id, partition, base_offset, last_offset, byte_length,
                             inline_bytes, max_timestamp, producer_id, producer_epoch,
                             base_sequence, is_transactional, is_control)
            SELECT s.topic_id, s.partition, s.base_offset, s.base_offset,
                   length(s.data), s.data, s.max_timestamp, s.producer_id,
                   s.producer_epoch, -1, true, true
            FROM staged_markers AS s JOIN unnest(p_topics, p_parts) AS k(t, n)
                ON s.topic_id = k.t AND s.partition = k.n;
        UPDATE partitions AS p SET high_watermark = s.base_offset + 1
            FROM staged_markers AS s, unnest(p_topics, p_parts) AS k(t, n)
            WHERE s.topic_id = k.t AND s.partition = k.n
                  AND p.topic_id = k.t AND p.partition = k.n;
        PERFORM pg_notify(p_channel, (
            SELECT string_agg(s.topic_id || ':' || s.partition || ':' || (s.base_offset + 1),
                              ',')
            FROM staged_markers AS s JOIN unnest(p_topics, p_parts) AS k(t, n)
                ON s.topic_id = k.t AND s.partition = k.n));
        DELETE FROM staged_markers AS s USING unnest(p_topics, p_parts) AS k(t, n)
            WHERE s.topic_id = k.t AND s.partition = k.n;
    END
    $$;
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
