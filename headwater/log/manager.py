"""All partition logs of one data directory, named `<topic>-<partition>`.

A `.clean_shutdown` marker written by `close_all` and removed at start tells the next
start whether it may trust segment tails (cheap check) or must re-verify every segment
holding data past the producer snapshot.

Partitions known at start are opened lazily (`add_lazy`): the first `get` opens one, and
the broker opens the rest in small slices in the background (`open_pending`), so a
broker with 100,000 partitions serves within seconds instead of after opening them all.
A partition not yet opened has touched no file, so an unclean start that is stopped
again before they were all opened leaves no marker: the next start still recovers. No asyncio here: the broker schedules
`run_retention`, `flush_due` and `run_cleaner` itself (the last two in a worker thread).
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from headwater.config import LogConfig
from headwater.log.cleaner import CleanStats, LogCleaner
from headwater.log.partition_log import PartitionLog

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_MARKER = ".clean_shutdown"
CLOSE_THREADS = 8


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """`orders-3` -> ("orders", 3); None for anything that is not a partition dir."""
    topic, sep, index = name.rpartition("-")
    if not sep or not topic or not index.isdigit():
        return None
    return topic, int(index)


class LogManager:
    def __init__(self, data_dir: Path, now_ms_fn: Callable[[], int]) -> None:
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        marker = self.data_dir / CLEAN_SHUTDOWN_MARKER
        #: Whether the previous process shut down cleanly (decides recovery depth).
        self.clean_start = marker.exists()
        marker.unlink(missing_ok=True)
        self._now_ms = now_ms_fn
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        #: Partitions on disk not opened yet, with the config to open them with.
        self._pending: dict[tuple[str, int], LogConfig] = {}
        self.cleaner = LogCleaner(now_ms_fn)
        self._last_clean_ms: int | None = None

    def path_for(self, topic: str, partition: int) -> Path:
        return self.data_dir / partition_dir_name(topic, partition)

    def discover(self) -> list[tuple[str, int]]:
        """(topic, partition) of every partition directory on disk, sorted."""
        found = []
        for child in self.data_dir.iterdir():
            parsed = parse_partition_dir(child.name) if child.is_dir() else None
            if parsed is not None:
                found.append(parsed)
        return sorted(found)

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        plog = self._logs.get((topic, partition))
        if plog is None and self._pending:
            config = self._pending.pop((topic, partition), None)
            if config is not None:
                return self._open(topic, partition, config)
        return plog

    def add_lazy(self, topic: str, partition: int, config: LogConfig) -> None:
        """A partition to open at its first `get` or `open_pending`; one without a
        directory (created in the image, not yet on disk) is created now."""
        key = (topic, partition)
        if key in self._logs:
            self._logs[key].update_config(config)
        elif key in self._pending or self.path_for(topic, partition).is_dir():
            self._pending[key] = config
        else:
            self._open(topic, partition, config)

    def update_config(self, topic: str, partition: int, config: LogConfig) -> None:
        key = (topic, partition)
        if key in self._pending:
            self._pending[key] = config
        elif key in self._logs:
            self._logs[key].update_config(config)

    @property
    def pending(self) -> int:
        """Partitions not opened yet."""
        return len(self._pending)

    def open_pending(self, limit: int) -> int:
        """Open up to `limit` pending partitions; returns how many are still pending."""
        for _ in range(min(limit, len(self._pending))):
            (topic, partition), config = self._pending.popitem()
            try:
                self._open(topic, partition, config)
            except Exception:
                log.exception("opening %s-%d failed", topic, partition)
        return len(self._pending)

    def create(self, topic: str, partition: int, config: LogConfig) -> PartitionLog:
        """The open log for the partition, opening or creating its directory as needed."""
        existing = self.get(topic, partition)
        if existing is not None:
            return existing
        return self._open(topic, partition, config)

    def open_existing(self, topic: str, partition: int,
                      config: LogConfig) -> PartitionLog | None:
        """Open a partition already on disk; None if it has no directory."""
        existing = self.get(topic, partition)
        if existing is not None:
            return existing
        if not self.path_for(topic, partition).is_dir():
            return None
        return self._open(topic, partition, config)

    def _open(self, topic: str, partition: int, config: LogConfig) -> PartitionLog:
        plog = PartitionLog.open(self.path_for(topic, partition), config, topic, partition,
                                 self._now_ms(), clean_shutdown=self.clean_start)
        self._logs[(topic, partition)] = plog
        return plog

    def close(self, topic: str, partition: int) -> None:
        """Close a partition's log and forget it; its files stay."""
        plog = self._logs.pop((topic, partition), None)
        if plog is not None:
            plog.close(sync=False)

    def delete(self, topic: str, partition: int) -> bool:
        """Close and remove the partition's data; False if there was none."""
        self._pending.pop((topic, partition), None)
        plog = self._logs.pop((topic, partition), None)
        if plog is not None:
            plog.delete()
            return True
        path = self.path_for(topic, partition)
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
            return True
        return False

    def all(self) -> Iterator[PartitionLog]:
        return iter(list(self._logs.values()))

    def run_retention(self, now_ms: int) -> int:
        """Apply retention to every log; returns the number of segments deleted."""
        deleted = 0
        for plog in self.all():
            try:
                deleted += plog.apply_retention(now_ms)
            except Exception:
                log.exception("retention failed for %r", plog)
        return deleted

    def flush_due(self, now_ms: int) -> int:
        """fsync logs whose `flush.ms` has elapsed (or that `needs_flush`) since their last
        flush; returns how many were flushed. Blocking: call it from a worker thread."""
        flushed = 0
        for plog in self.all():
            if plog.unflushed_messages <= 0:
                continue
            if plog.needs_flush or now_ms - plog.last_flush_ms >= plog.config.flush_ms:
                plog.flush()
                plog.last_flush_ms = now_ms
                flushed += 1
        return flushed

    def run_cleaner(self, now_ms: int,
                    backoff_ms: int = 0) -> dict[tuple[str, int], CleanStats]:
        """Compact every `compact` log whose dirty ratio reached min.cleanable.dirty.ratio
        or whose oldest dirty record waited longer than max.compaction.lag.ms;
        returns the stats of those cleaned. A call less than `backoff_ms` after the
        previous pass does nothing (log.cleaner.backoff.ms), so the broker can offer a
        pass every tick. Blocking: call it from a worker thread, one pass at a time."""
        if self._last_clean_ms is not None and now_ms - self._last_clean_ms < backoff_ms:
            return {}
        self._last_clean_ms = now_ms
        cleaned: dict[tuple[str, int], CleanStats] = {}
        for plog in self.all():
            config = plog.config
            if "compact" not in config.cleanup_policy or plog.closed:
                continue
            try:
                ratio = self.cleaner.dirty_ratio(plog)
                if ratio > 0 and (ratio >= config.min_cleanable_dirty_ratio
                                  or self.cleaner.overdue(plog, now_ms)):
                    cleaned[(plog.topic, plog.partition)] = self.cleaner.clean(plog, now_ms)
            except Exception:
                log.exception("log cleaner failed for %r", plog)
        return cleaned

    def close_all(self) -> None:
        """Close every log; mark the shutdown clean only if all of them closed and, after
        an unclean start, all were opened (so recovered)."""
        logs, self._logs = list(self._logs.values()), {}

        def close(plog: PartitionLog) -> bool:
            try:
                plog.close(sync=False)
                return True
            except Exception:
                log.exception("closing %r failed", plog)
                return False

        # File creates and renames wait on the filesystem's journal (~1 ms each here):
        # several at once overlap those waits.
        with ThreadPoolExecutor(CLOSE_THREADS, thread_name_prefix="close") as pool:
            closed = all(list(pool.map(close, logs)))
        clean = closed and (self.clean_start or not self._pending)
        # One sync for everything written above, rather than an fsync per file (three
        # or four per written partition: minutes at 100,000 partitions); the marker
        # follows only once it returned.
        os.sync()
        if clean:
            (self.data_dir / CLEAN_SHUTDOWN_MARKER).write_text("")
