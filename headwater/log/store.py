"""`PartitionStore` on local segment files: one `LogManager` and its upkeep.

Durability follows Kafka's flush policy: an append is acknowledged once it is in the
page cache, unless the topic asks for more (`flush.messages`, or headwater's
`fsync_always`), in which case `commit` fsyncs in a worker thread first. The upkeep runs
on the event loop on a one-second tick: partitions left unopened at start (a slice per
loop turn), time-based flushes and compaction in a worker thread (one cleaner pass at a
time), retention every `log.retention.check.interval.ms`.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator
from pathlib import Path

from kio.schema.errors import ErrorCode as E

from headwater.config import LogConfig
from headwater.log.manager import LogManager
from headwater.log.partition_log import PartitionLog
from headwater.storage.partition import Partition

log = logging.getLogger("headwater.log")

#: Partitions opened per event-loop turn by the background opener.
OPEN_SLICE = 32


class LocalStore:
    """All partitions of one data directory (`log.dirs`), and their upkeep."""

    def __init__(self, data_dir: Path, now_ms: Callable[[], int], *,
                 retention_check_ms: int, cleaner_backoff_ms: int,
                 reserved: Iterable[str] = ()) -> None:
        self.manager = LogManager(data_dir, now_ms)
        self._now_ms = now_ms
        self._retention_check_s = retention_check_ms / 1000
        self._cleaner_backoff_ms = cleaner_backoff_ms
        #: Topics the store keeps but never hands out (the metadata log: the
        #: controller's alone; a client's DeleteRecords, Fetch or transaction marker
        #: naming `__cluster_metadata` once reached it, found by the fuzzer).
        self._reserved = frozenset(reserved)
        self._tasks: list[asyncio.Task[None]] = []

    # ---- PartitionSource / PartitionStore ----------------------------------------------
    def partition(self, topic: str, partition: int) -> PartitionLog | None:
        if topic in self._reserved:
            return None
        return self.manager.get(topic, partition)

    def absent_error(self, topic: str, partition: int) -> int:
        return E.unknown_topic_or_partition

    def partitions(self) -> Iterator[PartitionLog]:
        return self.manager.all()

    def ensure(self, topic: str, partition: int, config: LogConfig, *,
               topic_id: uuid.UUID | None = None) -> None:
        self.manager.add_lazy(topic, partition, config)

    async def ready(self, topic: str, partition: int) -> PartitionLog | None:
        return self.partition(topic, partition)

    def remove(self, topic: str, partition: int) -> bool:
        return self.manager.delete(topic, partition)

    def commit(self, partitions: Iterable[Partition]) -> Awaitable[None] | None:
        due = [p for p in partitions if isinstance(p, PartitionLog) and p.needs_flush]
        return self._flush(due) if due else None

    @staticmethod
    async def _flush(logs: list[PartitionLog]) -> None:
        loop = asyncio.get_running_loop()
        await asyncio.gather(*(loop.run_in_executor(None, plog.flush) for plog in logs))

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._open_pending()),
                       asyncio.create_task(self._upkeep())]

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        self.manager.close_all()

    # ---- the controller's own log ------------------------------------------------------
    def open_reserved(self, topic: str, config: LogConfig) -> PartitionLog:
        """Partition 0 of a reserved topic (the metadata log), opened or created."""
        return (self.manager.open_existing(topic, 0, config)
                or self.manager.create(topic, 0, config))

    def reopen_reserved(self, topic: str, config: LogConfig) -> PartitionLog:
        """Close a reserved topic's log and open it again from its directory (the shared
        log replaced its files)."""
        self.manager.close(topic, 0)
        return self.open_reserved(topic, config)

    # ---- upkeep ------------------------------------------------------------------------
    async def _open_pending(self) -> None:
        """Open the partitions left unopened at start, a slice per loop turn (a few ms),
        so retention, flushes and the cleaner reach them soon while requests are served
        from the first second."""
        started, total = time.monotonic(), self.manager.pending
        while self.manager.open_pending(OPEN_SLICE):
            await asyncio.sleep(0)
        if total:
            log.info("opened %d partitions in the background in %.1f s", total,
                     time.monotonic() - started)

    async def _upkeep(self) -> None:
        loop = asyncio.get_running_loop()
        last_retention = time.monotonic()
        cleaning: asyncio.Future[object] | None = None
        while True:
            await asyncio.sleep(1.0)
            try:
                await loop.run_in_executor(None, self.manager.flush_due, self._now_ms())
                if cleaning is None or cleaning.done():  # compaction: one pass at a time
                    cleaning = loop.run_in_executor(None, self.manager.run_cleaner,
                                                    self._now_ms(), self._cleaner_backoff_ms)
                if time.monotonic() - last_retention >= self._retention_check_s:
                    last_retention = time.monotonic()
                    self.manager.run_retention(self._now_ms())
            except Exception:
                log.exception("background log chore failed")
