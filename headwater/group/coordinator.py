"""The group coordinator service: `__consumer_offsets` shards on the runtime.

Handlers call `write(group_id, op)` / `read(group_id, fn)`; the group id picks the
partition (Kafka's hash) and so the shard. Metadata changes (topics created,
deleted, grown) are fed to every loaded shard as operations.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..coordinator.runtime import CoordinatorRuntime, NotReady, Result, Timer
from . import records as R
from .config import GroupConfig
from .shard import GroupShard

if TYPE_CHECKING:
    from ..broker import Broker
    from ..metadata.image import MetadataImage

log = logging.getLogger("headwater.group")

TOPIC = "__consumer_offsets"


class GroupCoordinator:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.config = GroupConfig.from_broker(broker.config)

        def factory(partition: int, timer: Timer) -> GroupShard:
            return GroupShard(partition, timer, self.config, lambda: broker.image)

        self.runtime = CoordinatorRuntime(
            broker, TOPIC, self.config.num_partitions, R.CODEC, factory,
            {"cleanup.policy": "compact", "segment.bytes": str(self.config.segment_bytes)},
            load_delay_ms=self.config.load_delay_ms)

    async def start(self) -> None:
        await self.runtime.start()
        assert self.broker.controller is not None
        self.broker.controller.listeners.append(self._on_metadata)

    async def stop(self) -> None:
        await self.runtime.stop()

    def partition_for(self, group_id: str) -> int:
        return self.runtime.partition_for(group_id)

    def write(self, group_id: str, op: Callable[[GroupShard, int], Result]) -> Any:
        return self.runtime.write(self.partition_for(group_id), op)

    def read(self, group_id: str, fn: Callable[[GroupShard], Any]) -> Any:
        return self.runtime.read(self.partition_for(group_id), fn)

    def loaded_shards(self) -> list[GroupShard]:
        return self.runtime.shards()  # type: ignore[return-value]

    def _on_metadata(self, old: MetadataImage, new: MetadataImage) -> None:
        for shard in self.loaded_shards():
            try:
                self.runtime.write(shard.partition,
                                   lambda s, now: s.on_metadata_update(new, now))
            except NotReady:
                pass
            except Exception:
                log.exception("metadata update failed on %s-%d", TOPIC, shard.partition)
