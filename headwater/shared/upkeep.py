"""Compaction and merging on the shared log, run by each partition's owner under its
lease (one pass over the broker's partitions every `log.cleaner.backoff.ms`).

The owner holds a complete copy of its partition in its local cache (`store.py`), so
both are a rewrite of a committed range's batch rows from that copy:

* **Compaction** (`cleanup.policy` with `compact`) is the local engine's: the same
  `LogCleaner`, with the same triggers (min.cleanable.dirty.ratio,
  max.compaction.lag.ms), the same treatment of tombstones, transactions and each
  producer's last batch, runs on the cached `PartitionLog`, limited to segments wholly
  below the committed offset (a commit window reads its bytes back from that log).
  The cleaned range then replaces its rows.
* **Merging**: a commit window leaves a partition's batches inline in PostgreSQL, or
  as a piece of an object shared with other partitions. Small pieces (under
  `SMALL_PIECE`) are what merging is for: once a partition has `merge_bytes` of them,
  or `merge_pieces` of them (a takeover reads each piece with a request of its own: a
  partition written in a window every few milliseconds had thousands after a minute,
  and a takeover took tens of seconds), or has had some for `merge_age_ms`, the owner
  rewrites their ranges (`Unmerged`) into
  objects of its own; a window object is deleted by the orphan cleaner once no
  partition's rows point into it. Large pieces stay where they are: rewriting them
  would double the bytes written for objects that are already large.

A rewrite reads the range from the cache in chunks of at most `object_max_bytes`,
uploads each chunk as a new `seg/` object and swaps the chunk's rows in one
transaction (`sequencer.replace`), fenced by the lease epoch like a commit: a paused
or replaced owner changes nothing. The cache's batches are the committed ones byte for
byte (offsets, producer fields, CRCs), so a reader taking the partition over downloads
the same log whichever rows it finds. A tombstone's delete.retention.ms counts from
the cache file's time, that is at the latest from the partition's last takeover:
tombstones may live longer than on one node, never shorter.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from ..log.cleaner import LogCleaner
from ..records.batch import iter_batches
from .objects import SEGMENT_PREFIX, ObjectStore
from .partition import SharedPartition
from .schema import Connection
from .sequencer import BatchRow, Outcome, replace

log = logging.getLogger("headwater.shared")

@dataclass(frozen=True, slots=True)
class UpkeepSettings:
    interval_ms: int = 15_000  # log.cleaner.backoff.ms
    merge_bytes: int = 8 << 20  # headwater.shared.merge.bytes
    merge_age_ms: int = 600_000  # headwater.shared.merge.age.ms
    merge_pieces: int = 256  # headwater.shared.merge.pieces
    object_max_bytes: int = 16 << 20  # headwater.shared.merge.object.max.bytes


class Upkeep:
    """Compacts and merges one partition per `tend` call."""

    def __init__(self, settings: UpkeepSettings, objects: ObjectStore,
                 connect: Callable[[], AbstractAsyncContextManager[Connection]],
                 now_ms: Callable[[], int]) -> None:
        self.settings = settings
        self._objects = objects
        self._connect = connect
        self._now_ms = now_ms
        self._cleaner = LogCleaner(now_ms)

    async def tend(self, part: SharedPartition) -> Outcome | None:
        """Compact `part` if due, then merge its small pieces if due; the outcome of the
        first rewrite that did not commit (None: nothing failed)."""
        compacted = await self._compact(part)
        if compacted is not None:
            outcome = await self.rewrite(part, *compacted)
            if outcome is not Outcome.COMMITTED:
                return outcome
            part.unmerged.clip(compacted[1])
        unmerged = part.unmerged
        if not unmerged.ranges or (
                unmerged.total < self.settings.merge_bytes
                and unmerged.pieces < self.settings.merge_pieces
                and self._now_ms() - unmerged.since_ms < self.settings.merge_age_ms):
            return None
        taken, pieces = list(unmerged.ranges), unmerged.pieces
        for start, end, _size in taken:
            outcome = await self.rewrite(part, start, end)
            if outcome is not Outcome.COMMITTED:
                return outcome
        unmerged.done(taken, self._now_ms(), pieces)
        return None

    async def _compact(self, part: SharedPartition) -> tuple[int, int] | None:
        """Clean the cache like the local engine; the cleaned range, if any."""
        plog, now = part.plog, self._now_ms()
        config = plog.config
        if "compact" not in config.cleanup_policy:
            return None
        ratio = self._cleaner.dirty_ratio(plog)
        if ratio <= 0 or (ratio < config.min_cleanable_dirty_ratio
                          and not self._cleaner.overdue(plog, now)):
            return None
        bound = part.committed
        stats = await asyncio.get_running_loop().run_in_executor(
            None, lambda: self._cleaner.clean(plog, now, upper_bound=bound))
        if stats.cleaned_to <= 0 or part.broken:
            return None
        return plog.segments[0].base_offset, stats.cleaned_to

    async def rewrite(self, part: SharedPartition, start: int, end: int) -> Outcome:
        """Swap the rows of the batches based in [start, end) for rows into new objects
        holding the cached batches of that range, chunk by chunk."""
        plog, loop = part.plog, asyncio.get_running_loop()
        limit = self.settings.object_max_bytes
        while start < end:
            data = await loop.run_in_executor(
                None, plog.read, max(start, plog.log_start_offset), limit, end)
            headers = list(iter_batches(data))
            # rows of removed batches before the first one read go with this chunk
            chunk_start = min(start, headers[0][1].base_offset) if headers else start
            chunk_end = headers[-1][1].last_offset + 1 if headers else end
            key = ObjectStore.new_key(SEGMENT_PREFIX) if headers else None
            rows = [BatchRow(h.base_offset, h.last_offset, pos, h.size, h.max_timestamp,
                             h.producer_id, h.producer_epoch, h.base_sequence,
                             h.is_transactional, h.is_control)
                    for pos, h in headers]
            if key is not None:
                await self._objects.put_new(key, data)
            async with self._connect() as conn:
                outcome = await replace(conn, part.topic_id, part.partition, part.epoch,
                                        chunk_start, chunk_end, key, len(data), rows)
            if outcome is not Outcome.COMMITTED:
                return outcome
            start = chunk_end
        return Outcome.COMMITTED
