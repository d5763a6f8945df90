"""The group coordinator service: `__consumer_offsets` shards on the runtime.

Handlers call `write(group_id, op)` / `read(group_id, fn)`; the group id picks the
partition (Kafka's hash) and so the shard. Metadata changes (topics created,
deleted, grown) are fed to every loaded shard as operations.

The share fetch path asks three things of share groups here: `share_assignment`,
`share_group_config` and `add_share_member_listener` (told when a member leaves or is
fenced, so its acquired records are released).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..config import BrokerConfig
from ..coordinator.runtime import (
    Clock,
    ClusterShards,
    CoordinatorRuntime,
    InternalTopics,
    NotReady,
    Result,
    Timer,
)
from ..metadata.events import ImageSource, MetadataEvents
from ..metadata.image import GROUP_RESOURCE
from . import group_configs
from . import records as R
from .config import GroupConfig
from .offsets import PartitionCommit
from .shard import GroupShard

if TYPE_CHECKING:
    from ..metadata.image import MetadataImage
    from ..storage.store import PartitionSource

log = logging.getLogger("headwater.group")

TOPIC = "__consumer_offsets"


class GroupCoordinator:
    def __init__(self, config: BrokerConfig, *, image: ImageSource,
                 metadata: MetadataEvents, partitions: PartitionSource,
                 topics: InternalTopics, clock: Clock,
                 cluster: ClusterShards | None = None) -> None:
        self.broker_config = config
        self.config = GroupConfig.from_broker(config)
        self._image = image
        self._metadata = metadata
        self._unsubscribe: Callable[[], None] | None = None

        self._share_listeners: list[Callable[[str, str], None]] = []

        def factory(partition: int, timer: Timer) -> GroupShard:
            return GroupShard(partition, timer, self.config, image,
                              share_member_removed=self._share_member_removed)

        self.runtime = CoordinatorRuntime(
            TOPIC, self.config.num_partitions, R.CODEC, factory,
            {"cleanup.policy": "compact", "segment.bytes": str(self.config.segment_bytes)},
            partitions=partitions, topics=topics, clock=clock,
            load_delay_ms=self.config.load_delay_ms, cluster=cluster)

    async def start(self) -> None:
        await self.runtime.start()
        self._unsubscribe = self._metadata.subscribe(self._on_metadata)

    async def stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        await self.runtime.stop()

    def partition_for(self, group_id: str) -> int:
        return self.runtime.partition_for(group_id)

    def write(self, group_id: str, op: Callable[[GroupShard, int], Result]) -> Any:
        return self.runtime.write(self.partition_for(group_id), op)

    def read(self, group_id: str, fn: Callable[[GroupShard], Any]) -> Any:
        return self.runtime.read(self.partition_for(group_id), fn)

    async def write_committed(self, group_id: str,
                              op: Callable[[GroupShard, int], Result]) -> Any:
        """`write`, answered once its records are committed (a failed commit raises its
        LogError): `CoordinatorRuntime.write_committed`."""
        return await self.runtime.write_committed(self.partition_for(group_id), op)

    async def read_committed(self, group_id: str, fn: Callable[[GroupShard], Any]) -> Any:
        """`read`, answered once what it read is committed."""
        return await self.runtime.read_committed(self.partition_for(group_id), fn)

    def pending_commits(self, group_id: str) -> Awaitable[None] | None:
        """The commits of what the group's partition was appended so far (None when none
        waits); raises a failed one's LogError."""
        return self.runtime.pending_commits(self.partition_for(group_id))

    def commit_transactional(self, group_id: str, member_id: str, instance_id: str | None,
                             generation: int, commits: Sequence[tuple[str, list[PartitionCommit]]],
                             producer_id: int, producer_epoch: int
                             ) -> dict[str, dict[int, int]]:
        """TxnOffsetCommit's write: the offsets under the producer's id and epoch, pending
        until the transaction's marker. NotReady, or LogError when the log fences it."""
        response: dict[str, dict[int, int]] = self.runtime.write(
            self.partition_for(group_id), lambda shard, now: shard.offsets.commit_transactional(
                group_id, member_id, instance_id, generation, list(commits), now),
            producer_id, producer_epoch, transactional=True)
        return response

    def loaded_shards(self) -> list[GroupShard]:
        return self.runtime.shards()  # type: ignore[return-value]

    def committed_offsets(self) -> Iterator[tuple[str, str, int, int]]:
        """(group, topic, partition, committed offset) of every group of the loaded
        shards: what the lag gauges read, without reaching into a shard."""
        for shard in self.loaded_shards():
            for group_id, topics in list(shard.offsets.offsets.items()):
                for topic, parts in topics.items():
                    for partition, committed in parts.items():
                        yield group_id, topic, partition, committed.offset

    # ---- share groups: the interface of the share fetch path -----------------------
    def share_assignment(self, group_id: str, member_id: str
                         ) -> dict[uuid.UUID, list[int]] | None:
        """Topic id -> partitions the member was last told it has; None when the member
        is unknown or fenced (or the group's shard is still loading)."""
        try:
            assigned = self.read(group_id, lambda s: s.share.assignment(group_id, member_id))
        except NotReady:
            return None
        if assigned is None:
            return None
        return {t: sorted(ps) for t, ps in assigned.items()}

    def share_group_config(self, group_id: str) -> dict[str, str]:
        """The effective `share.*` configs: the group's override, else the broker's."""
        overrides = self._image().resource_configs(GROUP_RESOURCE, group_id)
        values = group_configs.effective(overrides, self.broker_config)
        return {k: values[k] for k in group_configs.SHARE_KEYS}

    def streams_group_config(self, group_id: str) -> dict[str, str]:
        """The effective `streams.*` configs: the group's override, else the broker's."""
        overrides = self._image().resource_configs(GROUP_RESOURCE, group_id)
        values = group_configs.effective(overrides, self.broker_config)
        return {k: v for k, v in values.items() if k.startswith("streams.")}

    def add_share_member_listener(self, callback: Callable[[str, str], None]
                                  ) -> Callable[[], None]:
        """`callback(group_id, member_id)` when a share-group member leaves or is fenced;
        returns the unsubscribe handle."""
        self._share_listeners.append(callback)

        def unsubscribe() -> None:
            if callback in self._share_listeners:
                self._share_listeners.remove(callback)

        return unsubscribe

    def _share_member_removed(self, group_id: str, member_id: str) -> None:
        for callback in list(self._share_listeners):
            try:
                callback(group_id, member_id)
            except Exception:
                log.exception("share member listener failed for %s/%s", group_id, member_id)

    def _on_metadata(self, old: MetadataImage, new: MetadataImage) -> None:
        for shard in self.loaded_shards():
            try:
                self.runtime.write(shard.partition,
                                   lambda s, now: s.on_metadata_update(new, now))
            except NotReady:
                pass
            except Exception:
                log.exception("metadata update failed on %s-%d", TOPIC, shard.partition)
