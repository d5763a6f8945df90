"""Group-shard test context: a GroupShard over a fake clock and timer."""

from __future__ import annotations

import uuid

from headwater.config import BrokerConfig
from headwater.group import records as R
from headwater.group.config import GroupConfig
from headwater.group.shard import GroupShard
from headwater.metadata import records as MR
from headwater.metadata.image import MetadataImage
from tests.support.coordinator import ShardContext


def image_with(topics: dict[str, int]) -> MetadataImage:
    recs: list[object] = []
    for name, partitions in topics.items():
        tid = str(uuid.uuid5(uuid.NAMESPACE_DNS, name))
        recs.append(MR.TopicRecord(name, tid))
        recs += [MR.PartitionRecord(tid, p, (1,), (1,), 1) for p in range(partitions)]
    return MetadataImage().apply(recs, 0)


class GroupContext(ShardContext):
    def __init__(self, topics: dict[str, int] | None = None, **config: str) -> None:
        self.image = image_with(topics or {})
        group_config = GroupConfig.from_broker(BrokerConfig(config))
        super().__init__(lambda timer: GroupShard(0, timer, group_config, lambda: self.image),
                         R.CODEC)

    def set_topics(self, topics: dict[str, int]) -> None:
        self.image = image_with(topics)
        self.write(lambda shard, now: shard.on_metadata_update(self.image, now))
