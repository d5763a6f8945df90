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
    # one statement (schema version 5), where BEGIN, the locks, the writes, the
    # notification and COMMIT were seven round trips
    rows = await conn.fetch(
        "SELECT * FROM headwater_promote_markers($1::uuid[], $2::int[], $3::bigint, "
        "$4::smallint, $5::text)", [k[0] for k in ordered], [k[1] for k in ordered],
        producer_id, producer_epoch, NOTIFY_CHANNEL)
    found = {(r["topic_id"], r["part"]): Outcome(r["outcome"]) for r in rows}
    return {key: found.get(key, Outcome.UNKNOWN) for key in ordered}
