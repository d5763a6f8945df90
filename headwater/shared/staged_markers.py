"""A transaction's markers committed in one PostgreSQL transaction.

Each partition's owner stays the only one to give out its offsets: asked to hold a
transaction's marker, it appends the marker to its cached log at its log end, commits
everything below it, stops committing there, and stages the marker's bytes here
(`stage`) under its lease epoch. The transaction coordinator then commits every staged
marker of the transaction at once (`promote`): per partition the row must still carry the
epoch the marker was staged under and a high watermark equal to the marker's offset (the
checks of `sequencer.commit`); if every partition passes, the markers become batch rows,
the high watermarks move past them and `headwater_appends` is notified, all in one
transaction; if any fails, nothing is written. A read_committed consumer therefore sees a
transaction on every partition or on none.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from .schema import Connection
from .sequencer import NOTIFY_CHANNEL, Outcome

Key = tuple[uuid.UUID, int]


@dataclass(frozen=True, slots=True)
class StagedMarker:
    topic_id: uuid.UUID
    partition: int
    base_offset: int
    writer_epoch: int
    producer_id: int
    producer_epoch: int
    max_timestamp: int
    data: bytes


async def stage(conn: Connection, marker: StagedMarker) -> None:
    """Stage (or replace: one held marker per partition) `marker`."""
    await conn.execute(
        "INSERT INTO staged_markers (topic_id, partition, base_offset, writer_epoch, "
        "producer_id, producer_epoch, max_timestamp, data) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (topic_id, partition) DO "
        "UPDATE SET base_offset = EXCLUDED.base_offset, writer_epoch = "
        "EXCLUDED.writer_epoch, producer_id = EXCLUDED.producer_id, producer_epoch = "
        "EXCLUDED.producer_epoch, max_timestamp = EXCLUDED.max_timestamp, "
        "data = EXCLUDED.data", marker.topic_id, marker.partition, marker.base_offset,
        marker.writer_epoch, marker.producer_id, marker.producer_epoch,
        marker.max_timestamp, marker.data)


async def promote(conn: Connection, keys: Sequence[Key], producer_id: int,
                  producer_epoch: int) -> dict[Key, Outcome]:
    """Commit the markers of `producer_id`/`producer_epoch` staged on `keys`, all or
    none. Per key: COMMITTED (all were), or for a key that failed its check FENCED
    (restaged under a newer epoch, or the owner changed), STALE (the high watermark is
    not at the marker) or UNKNOWN (no such marker staged, no such partition); the keys
    that passed are then reported COMMITTED too, but nothing was written: the caller
    looks for any outcome other than COMMITTED."""
    ordered = sorted(set(keys))
    outcomes: dict[Key, Outcome] = {}
    tx = conn.transaction()
    await tx.start()
    try:
        rows = await conn.fetch(
            "SELECT p.topic_id, p.partition, p.high_watermark, p.writer_epoch, "
            "s.base_offset, s.writer_epoch AS staged_epoch, s.producer_id, "
            "s.producer_epoch, s.max_timestamp, s.data FROM partitions AS p "
            "LEFT JOIN staged_markers AS s ON s.topic_id = p.topic_id AND "
            "s.partition = p.partition WHERE (p.topic_id, p.partition) IN "
            "(SELECT * FROM unnest($1::uuid[], $2::int[])) "
            "ORDER BY p.topic_id, p.partition FOR UPDATE OF p",
            [k[0] for k in ordered], [k[1] for k in ordered])
        found = {(r["topic_id"], r["partition"]): r for r in rows}
        for key in ordered:
            row = found.get(key)
            if (row is None or row["base_offset"] is None
                    or row["producer_id"] != producer_id
                    or row["producer_epoch"] != producer_epoch):
                outcomes[key] = Outcome.UNKNOWN
            elif row["writer_epoch"] != row["staged_epoch"]:
                outcomes[key] = Outcome.FENCED
            elif row["high_watermark"] != row["base_offset"]:
                outcomes[key] = Outcome.STALE
            else:
                outcomes[key] = Outcome.COMMITTED
        if any(o is not Outcome.COMMITTED for o in outcomes.values()):
            await tx.rollback()
            return outcomes
        staged = [found[k] for k in ordered]
        await conn.executemany(
            "INSERT INTO batches (topic_id, partition, base_offset, last_offset, "
            "byte_length, inline_bytes, max_timestamp, producer_id, producer_epoch, "
            "base_sequence, is_transactional, is_control) "
            "VALUES ($1, $2, $3, $3, $4, $5, $6, $7, $8, -1, true, true)",
            [(r["topic_id"], r["partition"], r["base_offset"], len(r["data"]), r["data"],
              r["max_timestamp"], r["producer_id"], r["producer_epoch"]) for r in staged])
        await conn.execute(
            "UPDATE partitions AS p SET high_watermark = n.hw FROM unnest($1::uuid[], "
            "$2::int[], $3::bigint[]) AS n(topic_id, partition, hw) "
            "WHERE p.topic_id = n.topic_id AND p.partition = n.partition",
            [k[0] for k in ordered], [k[1] for k in ordered],
            [r["base_offset"] + 1 for r in staged])
        await conn.execute(
            "DELETE FROM staged_markers AS s USING unnest($1::uuid[], $2::int[]) AS "
            "n(topic_id, partition) WHERE s.topic_id = n.topic_id AND "
            "s.partition = n.partition", [k[0] for k in ordered], [k[1] for k in ordered])
        await conn.execute("SELECT pg_notify($1, $2)", NOTIFY_CHANNEL, ",".join(
            f"{r['topic_id']}:{r['partition']}:{r['base_offset'] + 1}" for r in staged))
    except BaseException:
        await tx.rollback()
        raise
    await tx.commit()
    return outcomes
