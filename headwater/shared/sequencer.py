"""The commit that makes appends durable: one PostgreSQL transaction per commit window,
over every partition a broker appended to in it.

The owner of a partition (the holder of its lease) has already assigned offsets from its
log end; the commit confirms them. In one transaction: the object holding the window's
bytes is recorded (`objects`); the partitions' rows are locked in (topic id, partition)
order, so two brokers committing overlapping sets never deadlock; per partition the row
must still carry the owner's epoch (else FENCED: a newer owner took over) and a high
watermark equal to the first offset the owner assigned (else STALE: its view is behind
what is committed); a partition that passes gets its batch rows, its producer-state and
aborted-transaction rows, and its new high watermark (a new log start, from DeleteRecords
or retention, deletes the batch rows wholly before it), and a `pg_notify` on
`headwater_appends` tells every broker. A partition that fails writes nothing and the
others commit; the caller reloads it before its next append and never acknowledges what
did not commit. If the transaction's outcome is unknown (the connection died at COMMIT),
the caller treats every partition as failed: reload, do not acknowledge.

`replace` is the other fenced write: the owner swaps a committed range's batch rows for
rows into one new object (merging and compaction, `upkeep.py`).
"""

from __future__ import annotations

import enum
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from .schema import Connection

NOTIFY_CHANNEL = "headwater_appends"


class Outcome(enum.Enum):
    COMMITTED = "committed"
    FENCED = "fenced"  # the row carries a newer writer epoch
    STALE = "stale"  # the row's high watermark is not where the owner's offsets start
    UNKNOWN = "unknown"  # no such partition row (never stamped)


@dataclass(frozen=True, slots=True)
class BatchRow:
    base_offset: int
    last_offset: int
    byte_offset: int  # in the window's object (or in `inline`)
    byte_length: int
    max_timestamp: int
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    is_transactional: bool = False
    is_control: bool = False
    inline: bytes | None = None  # stored in PostgreSQL instead of the object


@dataclass(frozen=True, slots=True)
class ProducerRow:
    producer_id: int
    producer_epoch: int
    recent: list[tuple[int, int, int, int]]  # (first seq, last seq, first off, last off)
    txn_first_offset: int = -1
    coordinator_epoch: int = -1
    last_timestamp: int = -1


@dataclass(slots=True)
class PartitionCommit:
    topic_id: uuid.UUID
    partition: int
    writer_epoch: int
    batches: Sequence[BatchRow]
    producers: Sequence[ProducerRow] = ()
    aborted: Sequence[tuple[int, int, int]] = ()  # (producer id, first offset, last offset)
    log_start: int | None = None  # DeleteRecords moved it (kept as the greatest)
    outcome: Outcome | None = field(default=None)

    @property
    def first_offset(self) -> int:
        return self.batches[0].base_offset

    @property
    def end_offset(self) -> int:
        return self.batches[-1].last_offset + 1


async def commit(conn: Connection, object_key: str | None, object_size: int,
                 commits: Sequence[PartitionCommit]) -> list[PartitionCommit]:
    """Commit the window; every PartitionCommit gets its `outcome`. Raises whatever the
    connection raises (then the outcome is unknown for all of them)."""
    ordered = sorted((c for c in commits if c.batches or c.log_start is not None),
                     key=lambda c: (c.topic_id, c.partition))
    if ordered and all(c.batches and c.log_start is None and not c.producers
                       and not c.aborted for c in ordered):
        await _commit_window(conn, object_key, object_size, ordered)
        return list(commits)
    async with conn.transaction():
        # a window that moves a log start (or carries producer state): BEGIN, the
        # object's row with the partitions' locks, its writes, COMMIT
        rows = await conn.fetch(
            "WITH o AS (INSERT INTO objects (key, size) SELECT $3::text, $4::bigint "
            "WHERE $3::text IS NOT NULL) "
            "SELECT topic_id, partition, high_watermark, writer_epoch FROM partitions "
            "WHERE (topic_id, partition) IN (SELECT * FROM unnest($1::uuid[], $2::int[])) "
            "ORDER BY topic_id, partition FOR UPDATE",
            [c.topic_id for c in ordered], [c.partition for c in ordered], object_key,
            object_size)
        found = {(r["topic_id"], r["partition"]): r for r in rows}
        passed: list[PartitionCommit] = []
        for c in ordered:
            row = found.get((c.topic_id, c.partition))
            if row is None:
                c.outcome = Outcome.UNKNOWN
            elif row["writer_epoch"] != c.writer_epoch:
                c.outcome = Outcome.FENCED
            elif c.batches and row["high_watermark"] != c.first_offset:
                c.outcome = Outcome.STALE
            else:
                c.outcome = Outcome.COMMITTED
                passed.append(c)
        if passed:
            await _write(conn, object_key, passed)
    return list(commits)


async def _commit_window(conn: Connection, object_key: str | None, object_size: int,
                         ordered: Sequence[PartitionCommit]) -> None:
    """The common window (batches alone) in one statement, `headwater_commit_window`
    (schema version 5): the same locks, judgement and writes as `commit`'s transaction,
    one round trip instead of four."""
    rows = await conn.fetch(
        "SELECT * FROM headwater_commit_window($1::text, $2::bigint, $3::uuid[], "
        "$4::int[], $5::int[], $6::bigint[], $7::bigint[], $8::uuid[], $9::int[], "
        "$10::bigint[], $11::bigint[], $12::text[], $13::bigint[], $14::int[], "
        "$15::bytea[], $16::bigint[], $17::bigint[], $18::smallint[], $19::int[], "
        "$20::bool[], $21::bool[], $22::text)",
        object_key, object_size, [c.topic_id for c in ordered],
        [c.partition for c in ordered], [c.writer_epoch for c in ordered],
        [c.first_offset for c in ordered], [c.end_offset for c in ordered],
        *_batch_arrays(object_key, [(c.topic_id, c.partition, b)
                                    for c in ordered for b in c.batches]),
        NOTIFY_CHANNEL)
    outcomes = {(r["topic_id"], r["part"]): Outcome(r["outcome"]) for r in rows}
    for c in ordered:
        c.outcome = outcomes.get((c.topic_id, c.partition), Outcome.UNKNOWN)


async def landed(conn: Connection, firsts: Sequence[tuple[uuid.UUID, int, BatchRow]]
                 ) -> set[tuple[uuid.UUID, int]]:
    """The (topic id, partition)s whose batch `firsts` names is committed: a window's
    transaction whose answer was lost landed for them. A row matches on its offsets,
    producer, sequence, size and max timestamp (the same batch; rows survive merging
    with these unchanged)."""
    if not firsts:
        return set()
    rows = await conn.fetch(
        "SELECT b.topic_id, b.partition FROM batches AS b JOIN unnest($1::uuid[], "
        "$2::int[], $3::bigint[], $4::bigint[], $5::bigint[], $6::int[], $7::int[], "
        "$8::bigint[]) AS w(topic_id, partition, base, last, pid, seq, length, ts) "
        "ON b.topic_id = w.topic_id AND b.partition = w.partition AND b.base_offset = "
        "w.base AND b.last_offset = w.last AND b.producer_id = w.pid AND "
        "b.base_sequence = w.seq AND b.byte_length = w.length AND b.max_timestamp = w.ts",
        [t for t, _p, _b in firsts], [p for _t, p, _b in firsts],
        [b.base_offset for _t, _p, b in firsts], [b.last_offset for _t, _p, b in firsts],
        [b.producer_id for _t, _p, b in firsts], [b.base_sequence for _t, _p, b in firsts],
        [b.byte_length for _t, _p, b in firsts], [b.max_timestamp for _t, _p, b in firsts])
    return {(r["topic_id"], r["partition"]) for r in rows}


async def replace(conn: Connection, topic_id: uuid.UUID, partition: int, writer_epoch: int,
                  start: int, end: int, object_key: str | None, object_size: int,
                  batches: Sequence[BatchRow]) -> Outcome:
    """Replace the rows of the batches based in [start, end), all below the high
    watermark, by `batches`, stored in `object_key`, under the same fencing as `commit`.
    Rows before the partition's log start are not inserted (retention moved it since
    the owner read them)."""
    async with conn.transaction():
        row = await conn.fetchrow(
            "SELECT high_watermark, log_start, writer_epoch FROM partitions "
            "WHERE topic_id = $1 AND partition = $2 FOR UPDATE", topic_id, partition)
        if row is None:
            return Outcome.UNKNOWN
        if row["writer_epoch"] != writer_epoch:
            return Outcome.FENCED
        if end > row["high_watermark"]:
            return Outcome.STALE
        if object_key is not None:
            await conn.execute("INSERT INTO objects (key, size) VALUES ($1, $2)",
                               object_key, object_size)
        await conn.execute(
            "DELETE FROM batches WHERE topic_id = $1 AND partition = $2 AND "
            "base_offset >= $3 AND base_offset < $4", topic_id, partition, start, end)
        log_start = int(row["log_start"])
        await _insert_batches(conn, object_key, [
            (topic_id, partition, b) for b in batches if b.last_offset >= log_start])
    return Outcome.COMMITTED


_BATCH_COLUMNS = ("topic_id, partition, base_offset, last_offset, object_key, byte_offset, "
                  "byte_length, inline_bytes, max_timestamp, producer_id, producer_epoch, "
                  "base_sequence, is_transactional, is_control")
#: Batch rows as one statement over arrays (one Bind however many rows, where
#: executemany sends one per row), $1..$14; `_write` adds its own parameters after.
_INSERT_BATCHES = (
    f"INSERT INTO batches ({_BATCH_COLUMNS}) SELECT * FROM unnest($1::uuid[], $2::int[], "
    "$3::bigint[], $4::bigint[], $5::text[], $6::bigint[], $7::int[], $8::bytea[], "
    "$9::bigint[], $10::bigint[], $11::smallint[], $12::int[], $13::bool[], $14::bool[])")


def _batch_arrays(object_key: str | None, rows: Sequence[tuple[uuid.UUID, int, BatchRow]]
                  ) -> list[list[object]]:
    """The 14 column arrays of `_INSERT_BATCHES` for `rows`."""
    return [
        [t for t, _p, _b in rows], [p for _t, p, _b in rows],
        [b.base_offset for _t, _p, b in rows], [b.last_offset for _t, _p, b in rows],
        [None if b.inline is not None else object_key for _t, _p, b in rows],
        [None if b.inline is not None else b.byte_offset for _t, _p, b in rows],
        [b.byte_length for _t, _p, b in rows], [b.inline for _t, _p, b in rows],
        [b.max_timestamp for _t, _p, b in rows], [b.producer_id for _t, _p, b in rows],
        [b.producer_epoch for _t, _p, b in rows], [b.base_sequence for _t, _p, b in rows],
        [b.is_transactional for _t, _p, b in rows], [b.is_control for _t, _p, b in rows]]


async def _insert_batches(conn: Connection, object_key: str | None,
                          rows: Sequence[tuple[uuid.UUID, int, BatchRow]]) -> None:
    if rows:
        await conn.execute(_INSERT_BATCHES, *_batch_arrays(object_key, rows))


async def _write(conn: Connection, object_key: str | None,
                 everything: Sequence[PartitionCommit]) -> None:
    starts = [c for c in everything if c.log_start is not None]
    if starts:
        moved = ([c.topic_id for c in starts], [c.partition for c in starts],
                 [c.log_start for c in starts])
        await conn.execute(
            "UPDATE partitions AS p SET log_start = greatest(p.log_start, n.start) "
            "FROM unnest($1::uuid[], $2::int[], $3::bigint[]) AS n(topic_id, partition, start) "
            "WHERE p.topic_id = n.topic_id AND p.partition = n.partition", *moved)
        # what lies wholly before the new start goes (its objects become the cleaner's)
        for table in ("batches", "aborted_txns"):
            await conn.execute(
                f"DELETE FROM {table} AS b USING unnest($1::uuid[], $2::int[], "  # noqa: S608
                "$3::bigint[]) AS n(topic_id, partition, start) WHERE b.topic_id = "
                "n.topic_id AND b.partition = n.partition AND b.last_offset < n.start",
                *moved)
    passed = [c for c in everything if c.batches]
    if not passed:
        return
    if not any(c.producers or c.aborted for c in passed):
        # the common window: its batch rows, the high watermarks and the notification
        # in one statement (one round trip)
        await conn.execute(
            f"WITH b AS ({_INSERT_BATCHES}), u AS (UPDATE partitions AS p SET "
            "high_watermark = n.hw FROM unnest($15::uuid[], $16::int[], $17::bigint[]) AS "
            "n(topic_id, partition, hw) WHERE p.topic_id = n.topic_id AND p.partition = "
            "n.partition) SELECT pg_notify($18, $19)",
            *_batch_arrays(object_key, [(c.topic_id, c.partition, b)
                                        for c in passed for b in c.batches]),
            [c.topic_id for c in passed], [c.partition for c in passed],
            [c.end_offset for c in passed], NOTIFY_CHANNEL, _notice(passed))
        return
    await _insert_batches(conn, object_key,
                          [(c.topic_id, c.partition, b) for c in passed for b in c.batches])
    producers = [(c.topic_id, c.partition, p.producer_id, p.producer_epoch,
                  json.dumps(p.recent), p.txn_first_offset, p.coordinator_epoch,
                  p.last_timestamp) for c in passed for p in c.producers]
    if producers:
        await conn.executemany(
            "INSERT INTO producers (topic_id, partition, producer_id, producer_epoch, "
            "recent, txn_first_offset, coordinator_epoch, last_timestamp) "
            "VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8) "
            "ON CONFLICT (topic_id, partition, producer_id) DO UPDATE SET "
            "producer_epoch = EXCLUDED.producer_epoch, recent = EXCLUDED.recent, "
            "txn_first_offset = EXCLUDED.txn_first_offset, "
            "coordinator_epoch = EXCLUDED.coordinator_epoch, "
            "last_timestamp = EXCLUDED.last_timestamp", producers)
    aborted = [(c.topic_id, c.partition, pid, first, last)
               for c in passed for pid, first, last in c.aborted]
    if aborted:
        await conn.executemany(
            "INSERT INTO aborted_txns (topic_id, partition, producer_id, first_offset, "
            "last_offset) VALUES ($1, $2, $3, $4, $5)", aborted)
    await conn.execute(
        "UPDATE partitions AS p SET high_watermark = n.hw "
        "FROM unnest($1::uuid[], $2::int[], $3::bigint[]) AS n(topic_id, partition, hw) "
        "WHERE p.topic_id = n.topic_id AND p.partition = n.partition",
        [c.topic_id for c in passed], [c.partition for c in passed],
        [c.end_offset for c in passed])
    await conn.execute("SELECT pg_notify($1, $2)", NOTIFY_CHANNEL, _notice(passed))


def _notice(passed: Sequence[PartitionCommit]) -> str:
    return ",".join(f"{c.topic_id}:{c.partition}:{c.end_offset}" for c in passed)
