"""Taking partitions over: their leases with new epochs, and each one's cache rebuilt from
its batch rows (`SharedStore` schedules the takes and serves what they return).

A partition is taken in a transaction of up to `TAKE_BATCH` (the leases, epoch stamps
and batch rows of all), then materialised: its bytes downloaded (object ranges or inline
bytes, in offset order) into one segment file of a fresh cache directory and opened as
a `PartitionLog`, whose recovery rebuilds indexes, producer state and the
aborted-transaction index, so idempotence and transactions behave as on one node.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import asyncpg

from ..config import LogConfig
from ..log.partition_log import LOG_START_CHECKPOINT, PartitionLog
from . import leases
from .objects import ObjectStore
from .partition import SharedPartition
from .schema import Connection
from .unmerged import Unmerged

log = logging.getLogger("headwater.shared")

Key = tuple[str, int]
DOWNLOADS_IN_FLIGHT = 32  # ranged reads at once when a partition is taken
#: Per key taken: (lease epoch, high watermark, log start, batch rows).
Taken = tuple[int, int, int, list[asyncpg.Record]]


async def take(conn: Connection, ids: dict[Key, tuple[uuid.UUID, int]], node_id: int,
               lease_ms: int) -> dict[Key, Taken]:
    """Take the leases of `ids` (key -> topic id, partition) with new epochs, stamp the
    epochs on their rows and read their batch rows (without inline bytes); the caller
    runs it in one transaction. Keys held elsewhere are not in the answer."""
    resources = {leases.partition_resource(*tp): key for key, tp in ids.items()}
    epochs = await leases.acquire_all(conn, list(resources), node_id, lease_ms)
    held = {resources[r]: epoch for r, epoch in epochs.items()}
    stamped = await leases.stamp_all(conn, [(*ids[key], epoch) for key, epoch in held.items()])
    for key, epoch in held.items():
        if ids[key] not in stamped:
            log.warning("%s-%d: lease epoch %d is older than the partition's writer", *key,
                        epoch)
    wanted = [(key, *stamped[ids[key]]) for key in held if ids[key] in stamped]
    rows = await conn.fetch(
        "SELECT b.topic_id, b.partition, b.base_offset, b.last_offset, "
        "b.object_key, b.byte_offset, b.byte_length FROM batches AS b JOIN "
        "unnest($1::uuid[], $2::int[], $3::bigint[]) AS s(topic_id, partition, "
        "log_start) ON b.topic_id = s.topic_id AND b.partition = s.partition "
        "WHERE b.last_offset >= s.log_start "
        "ORDER BY b.topic_id, b.partition, b.base_offset",
        [ids[k][0] for k, _h, _s in wanted], [k[1] for k, _h, _s in wanted],
        [start for _k, _h, start in wanted])
    by_partition: dict[tuple[uuid.UUID, int], list[asyncpg.Record]] = {}
    for row in rows:
        by_partition.setdefault((row["topic_id"], row["partition"]), []).append(row)
    return {key: (held[key], hw, start, by_partition.get(ids[key], []))
            for key, hw, start in wanted}


async def materialise(connect: Callable[[], AbstractAsyncContextManager[Connection]],
                      objects: ObjectStore, path: Path, key: Key, topic_id: uuid.UUID,
                      config: LogConfig, epoch: int, hw: int, log_start: int,
                      batches: list[asyncpg.Record], now_ms: Callable[[], int]
                      ) -> SharedPartition:
    """The partition's cache in `path`, from its rows: the bytes downloaded into one
    segment file, opened as a `PartitionLog` (the local engine's recovery rebuilds
    indexes, producer state and the aborted-transaction index)."""
    topic, partition = key
    inline: dict[int, bytes] = {}
    if any(b["object_key"] is None for b in batches):
        async with connect() as conn:
            inline = {int(r["base_offset"]): bytes(r["inline_bytes"]) for r in
                      await conn.fetch(
                          "SELECT base_offset, inline_bytes FROM batches WHERE "
                          "topic_id = $1 AND partition = $2 AND last_offset >= $3 AND "
                          "inline_bytes IS NOT NULL", topic_id, partition, log_start)}
    data = await download(objects, batches, inline)
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    # Compaction may have removed the first batches after the log start, or the last
    # ones before the high watermark: the segment keeps the log start as its base,
    # an empty active segment the high watermark as the log end (as on one node).
    base = min(int(batches[0]["base_offset"]), log_start) if batches else hw
    (path / f"{base:020d}.log").write_bytes(data)
    if batches and int(batches[-1]["last_offset"]) + 1 < hw:
        (path / f"{hw:020d}.log").write_bytes(b"")
    (path / LOG_START_CHECKPOINT).write_text(f"{max(log_start, base)}\n")
    plog = await asyncio.get_running_loop().run_in_executor(
        None, lambda: PartitionLog.open(path, config, topic, partition, now_ms(),
                                        clean_shutdown=False))
    if plog.log_end_offset != hw:
        plog.close(sync=False)
        raise RuntimeError(f"{topic}-{partition}: the batches end at "
                           f"{plog.log_end_offset}, the high watermark is {hw}")
    return SharedPartition(plog, topic_id, epoch, hw,
                           unmerged=Unmerged.of_rows(batches, now_ms()))


async def download(objects: ObjectStore, batches: Sequence[asyncpg.Record],
                   inline: dict[int, bytes] | None = None) -> bytes:
    """The batches' bytes in order: inline ones from their rows (or `inline`, by base
    offset), the others by ranged reads, one per run of rows adjacent in one object (a
    partition's piece of a window, or a merged object), `DOWNLOADS_IN_FLIGHT` at a
    time."""
    pieces: list[bytes | list[object]] = []  # bytes, or [key, start, end]
    for b in batches:
        key = b["object_key"]
        if key is None:
            data = b.get("inline_bytes")
            pieces.append(bytes(data) if data is not None
                          else (inline or {})[int(b["base_offset"])])
            continue
        start = int(b["byte_offset"])
        end = start + int(b["byte_length"])
        last = pieces[-1] if pieces else None
        if isinstance(last, list) and last[0] == key and last[2] == start:
            last[2] = end
        else:
            pieces.append([key, start, end])
    limit = asyncio.Semaphore(DOWNLOADS_IN_FLIGHT)

    async def get(piece: bytes | list[object]) -> bytes:
        if isinstance(piece, bytes):
            return piece
        key, start, end = piece
        assert isinstance(key, str) and isinstance(start, int) and isinstance(end, int)
        async with limit:
            return await objects.get_range(key, start, end - start)
    return b"".join(await asyncio.gather(*(get(p) for p in pieces)))
