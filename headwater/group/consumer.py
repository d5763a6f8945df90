"""KIP-848 consumer groups (ConsumerGroupHeartbeat). STUB: being written."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..coordinator.record_codec import CoordinatorRecord

if TYPE_CHECKING:
    from ..metadata.image import MetadataImage
    from .shard import GroupShard


class ConsumerGroupManager:
    def __init__(self, shard: GroupShard) -> None:
        self.shard = shard

    def replay(self, record: CoordinatorRecord) -> None:
        pass

    def on_loaded(self, now_ms: int) -> None:
        pass

    def on_metadata_update(self, image: MetadataImage, now_ms: int) -> list[CoordinatorRecord]:
        return []
