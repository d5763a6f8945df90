"""One `PartitionStore` in front of two: the topics named go to `special`, every other
to `default`. A broker on the shared log keeps the coordinators' internal topics on its
local store (their writes are replayed at once and acknowledged on the local flush
policy, as on one node) while every user topic lives on the shared log.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Iterable, Iterator

from ..config import LogConfig
from .partition import Partition
from .store import PartitionStore


class RoutedStore:
    def __init__(self, default: PartitionStore, special: PartitionStore,
                 special_topics: Iterable[str]) -> None:
        self.default = default
        self.special = special
        self._special_topics = frozenset(special_topics)

    def _for(self, topic: str) -> PartitionStore:
        return self.special if topic in self._special_topics else self.default

    def partition(self, topic: str, partition: int) -> Partition | None:
        return self._for(topic).partition(topic, partition)

    def absent_error(self, topic: str, partition: int) -> int:
        return self._for(topic).absent_error(topic, partition)

    def partitions(self) -> Iterator[Partition]:
        yield from self.default.partitions()
        yield from self.special.partitions()

    def ensure(self, topic: str, partition: int, config: LogConfig, *,
               topic_id: uuid.UUID | None = None) -> None:
        self._for(topic).ensure(topic, partition, config, topic_id=topic_id)

    def remove(self, topic: str, partition: int) -> bool:
        return self._for(topic).remove(topic, partition)

    def commit(self, partitions: Iterable[Partition]) -> Awaitable[None] | None:
        parts = list(partitions)
        special = [p for p in parts if p.topic in self._special_topics]
        default = [p for p in parts if p.topic not in self._special_topics]
        waits = [w for w in (self.default.commit(default) if default else None,
                             self.special.commit(special) if special else None)
                 if w is not None]
        if not waits:
            return None
        if len(waits) == 1:
            return waits[0]
        return self._both(waits)

    @staticmethod
    async def _both(waits: list[Awaitable[None]]) -> None:
        for result in await asyncio.gather(*waits, return_exceptions=True):
            if isinstance(result, BaseException):
                raise result

    async def ready(self, topic: str, partition: int) -> Partition | None:
        return await self._for(topic).ready(topic, partition)

    def start(self) -> None:
        self.default.start()
        self.special.start()

    async def close(self) -> None:
        await self.default.close()
        await self.special.close()
