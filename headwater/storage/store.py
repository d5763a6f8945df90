"""All partitions of a broker as the rest of headwater sees them.

`headwater.log.LocalStore` (segment files in `log.dirs`) is today's one implementation;
the shared log is the next. The broker creates and removes partitions in step with the
metadata image (`ensure`, `remove`); services look partitions up (`partition`) and make
their appends durable before they acknowledge them (`commit`). Retention, compaction,
flushes and recovery are the store's own business, run by `start` until `close`.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Iterable, Iterator
from typing import Protocol

from headwater.config import LogConfig
from headwater.storage.partition import Partition


class PartitionSource(Protocol):
    """What a reader or writer of partitions needs: look one up by name."""

    def partition(self, topic: str, partition: int) -> Partition | None:
        """The partition, or None when the store does not hold it (never the
        metadata log: that is the controller's alone)."""
        ...

    def absent_error(self, topic: str, partition: int) -> int:
        """The error for a partition `partition()` did not find: NOT_LEADER_OR_FOLLOWER
        when another broker serves it (the shared log), else UNKNOWN_TOPIC_OR_PARTITION."""
        ...


class PartitionStore(PartitionSource, Protocol):
    def partitions(self) -> Iterator[Partition]:
        """Every partition the store has open (for metrics and DescribeLogDirs)."""
        ...

    def ensure(self, topic: str, partition: int, config: LogConfig, *,
               topic_id: uuid.UUID | None = None) -> None:
        """Hold the partition with these configs: create it empty, open it (possibly
        later, at its first `partition` lookup) or update its configs. `topic_id` names
        the topic for good (a shared store keys its rows by it: a name can be reused)."""
        ...

    async def ready(self, topic: str, partition: int) -> Partition | None:
        """The partition once the store serves it (a store that takes partitions in the
        background answers after the take; the local store at once); None if it does
        not hold it."""
        ...

    def remove(self, topic: str, partition: int) -> bool:
        """Drop the partition and its data; False if there was none."""
        ...

    def commit(self, partitions: Iterable[Partition]) -> Awaitable[None] | None:
        """Make every append to `partitions` so far durable: an awaitable the caller
        awaits before acknowledging, or None when they already are (the hot path then
        answers without a coroutine)."""
        ...

    def start(self) -> None:
        """Start the background work (opening, retention, compaction, flushes); needs
        a running event loop."""
        ...

    async def close(self) -> None:
        """Stop the background work and close every partition cleanly."""
        ...
