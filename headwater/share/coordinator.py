"""The share coordinator service: `__share_group_state` shards on the coordinator runtime.

Share-partition leaders (and the inter-broker state APIs in `api/share_state.py`) call
the async methods below with a share-partition (group id, topic id, partition). The key
picks the state partition by Kafka's rule (`ShareCoordinatorService.partitionFor`: Java
`String.hashCode` of `group:topicId:partition`, the topic id in Kafka's base64 form) and
so the shard. An operation's records are appended and replayed before the method
returns — and fsynced first when the topic's flush policy asks for it — so a state
change is persisted before the caller is told it happened. Errors are Kafka codes
(COORDINATOR_LOAD_IN_PROGRESS while the shard loads).

Deleted topics' share-partition state is tombstoned on the metadata change, as Kafka's
`ShareCoordinatorService.onTopicsDeleted` does.
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar, cast

from kio.schema.errors import ErrorCode as E

from ..config import BrokerConfig
from ..coordinator.hashing import partition_for
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
from ..storage.errors import LogError
from .coordinator_shard import (
    Key,
    ReadResult,
    ShareCoordinatorConfig,
    ShareCoordinatorShard,
    StateSummary,
)
from .record_state import RecordState
from .records import CODEC, ShareSnapshot, StateWrite

if TYPE_CHECKING:
    from ..metadata.image import MetadataImage
    from ..storage.store import PartitionStore

log = logging.getLogger("headwater.share")

_T = TypeVar("_T")

TOPIC = "__share_group_state"
SHARE_KEY_TYPE = 2  # FindCoordinator
ZERO_UUID = uuid.UUID(int=0)
_PARTITION_CACHE_SIZE = 100_000


def kafka_uuid(topic_id: uuid.UUID) -> str:
    """Kafka's `Uuid.toString()`: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """`SharePartitionKey.asCoordinatorKey`: the FindCoordinator key of type 2."""
    return f"{group_id}:{kafka_uuid(topic_id)}:{partition}"


def parse_coordinator_key(key: str) -> tuple[str, uuid.UUID, int] | None:
    """`SharePartitionKey.getInstance(String)`: parsed from the right (the group id may
    hold colons); None when Kafka would refuse it (INVALID_REQUEST)."""
    group_id, _, rest = key.rpartition(":")
    group_id, _, topic = group_id.rpartition(":")
    if not group_id.strip() or not topic or not rest:
        return None
    try:
        raw = base64.b64decode(topic + "=" * (-len(topic) % 4), altchars=b"-_",
                               validate=True)
        partition = int(rest)
    except ValueError:
        return None
    if len(raw) != 16:
        return None
    return group_id, uuid.UUID(bytes=raw), partition


class ShareCoordinator:
    def __init__(self, config: BrokerConfig, *, image: ImageSource,
                 metadata: MetadataEvents, store: PartitionStore, topics: InternalTopics,
                 clock: Clock, cluster: ClusterShards | None = None) -> None:
        self.config = ShareCoordinatorConfig.from_broker(config)
        self._image = image
        self._metadata = metadata
        self._unsubscribe: Callable[[], None] | None = None
        self._partition_cache: dict[tuple[str, uuid.UUID, int], int] = {}

        def factory(partition: int, timer: Timer) -> ShareCoordinatorShard:
            return ShareCoordinatorShard(partition, timer, self.config, image)

        self.runtime = CoordinatorRuntime(
            TOPIC, self.config.num_partitions, CODEC, factory,
            {"cleanup.policy": "compact", "segment.bytes": str(self.config.segment_bytes)},
            partitions=store, topics=topics, clock=clock,
            load_delay_ms=self.config.load_delay_ms, cluster=cluster)
        self.runtime.subscribe_load(self._after_load)
        # Called with a __share_group_state partition once it is loaded (and cleaned).
        self._load_subscribers: list[Callable[[int], None]] = []

    def subscribe_load(self, callback: Callable[[int], None]) -> Callable[[], None]:
        """Call `callback(state_partition)` once each state partition is loaded and the
        state of deleted topics dropped; returns the unsubscribe handle."""
        self._load_subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._load_subscribers:
                self._load_subscribers.remove(callback)

        return unsubscribe

    async def start(self) -> None:
        await self.runtime.start()
        self._unsubscribe = self._metadata.subscribe(self._on_metadata)

    async def stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        await self.runtime.stop()

    def persisted_states(self) -> Iterator[tuple[Key, ShareSnapshot]]:
        """((group, topic id, partition), persisted state) of every share-partition the
        loaded shards hold: what the lag gauges read, without reaching into a shard."""
        for shard in self.runtime.shards():
            for key, entry in list(cast(ShareCoordinatorShard, shard).states.items()):
                yield key, entry.state

    def partition_for(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        """The state partition of a share-partition (cached: asked on every write)."""
        key = (group_id, topic_id, partition)
        found = self._partition_cache.get(key)
        if found is None:
            if len(self._partition_cache) >= _PARTITION_CACHE_SIZE:
                self._partition_cache.clear()
            found = self._partition_cache[key] = partition_for(
                coordinator_key(group_id, topic_id, partition), self.runtime.num_partitions)
        return found

    # ---- operations (one share-partition each) -------------------------------------
    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         state_epoch: int, start_offset: int) -> int:
        """InitializeShareGroupState; 0 or a Kafka error code."""
        return await self._write(group_id, topic_id, partition, E.invalid_request,
                                 lambda s, now: s.initialize(group_id, topic_id, partition,
                                                             state_epoch, start_offset, now))

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int,
                   leader_epoch: int) -> tuple[int, ShareSnapshot | None]:
        """ReadShareGroupState: (error code, state). A newer `leader_epoch` is recorded
        first (-1: none), fencing the previous leader's writes."""
        result: ReadResult = await self._write(
            group_id, topic_id, partition, ReadResult(E.invalid_request),
            lambda s, now: s.read(group_id, topic_id, partition, leader_epoch, now))
        return result.error_code, result.state

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int,
                    write: StateWrite, leader_epoch: int) -> int:
        """WriteShareGroupState; 0 once the change is in the log, or a Kafka error code
        with nothing written (FENCED_STATE_EPOCH, FENCED_LEADER_EPOCH, ...)."""
        return await self._write(group_id, topic_id, partition, E.invalid_request,
                                 lambda s, now: s.write(
                                     group_id, topic_id, partition, write.state_epoch,
                                     leader_epoch, write.start_offset,
                                     write.delivery_complete_count, write.state_batches,
                                     now))

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        """DeleteShareGroupState; 0 also when there was nothing to delete."""
        return await self._write(group_id, topic_id, partition, E.invalid_request,
                                 lambda s, now: s.delete(group_id, topic_id, partition, now))

    async def read_summary(self, group_id: str, topic_id: uuid.UUID, partition: int,
                           leader_epoch: int = -1) -> StateSummary:
        """ReadShareGroupStateSummary: (error code, state epoch, start offset,
        delivery-complete count, leader epoch); `leader_epoch` is not checked, as in
        Kafka."""
        if not self._valid(group_id, topic_id):
            return StateSummary(E.invalid_request)
        try:  # answered once what it read is committed
            summary: StateSummary = await self.runtime.read_committed(
                self.partition_for(group_id, topic_id, partition),
                lambda s: s.read_summary(group_id, topic_id, partition))
            return summary
        except NotReady as exc:
            return StateSummary(exc.code)
        except LogError:  # what it read was not committed: ask again
            return StateSummary(E.not_coordinator)

    # ---- plumbing ------------------------------------------------------------------
    @staticmethod
    def _valid(group_id: str, topic_id: uuid.UUID | None) -> bool:
        return bool(group_id) and topic_id is not None and topic_id != ZERO_UUID

    async def _write(self, group_id: str, topic_id: uuid.UUID, partition: int,
                     invalid: _T, op: Callable[[ShareCoordinatorShard, int], Result]) -> _T:
        if not self._valid(group_id, topic_id):
            return invalid
        state_partition = self.partition_for(group_id, topic_id, partition)
        try:
            # answered once its own records are committed; a failed commit raises
            response: _T = await self.runtime.write_committed(state_partition, op)
        except NotReady as exc:
            refused: _T = _with_code(invalid, exc.code)
            return refused
        return response

    def _on_metadata(self, old: MetadataImage, new: MetadataImage) -> None:
        if set(old.topics_by_id) <= set(new.topics_by_id):
            return  # no topic deleted (partitions are never removed from a topic)
        for shard in self.runtime.shards():
            assert isinstance(shard, ShareCoordinatorShard)
            self._clean_deleted_topics(shard.partition)

    def _after_load(self, state_partition: int) -> None:
        self._clean_deleted_topics(state_partition)
        for subscriber in list(self._load_subscribers):
            subscriber(state_partition)

    def archiving(self, state_partition: int) -> list[tuple[str, uuid.UUID, int]]:
        """Share-partitions of a loaded state partition with ARCHIVING records (KIP-1191):
        their dead letters were due when the broker stopped."""
        def find(shard: ShareCoordinatorShard) -> list[tuple[str, uuid.UUID, int]]:
            return [key for key, entry in shard.states.items()
                    if any(b.delivery_state == RecordState.ARCHIVING for b in entry.state.state_batches)]
        try:
            found: list[tuple[str, uuid.UUID, int]] = self.runtime.read(state_partition, find)
            return found
        except NotReady:
            return []

    def _clean_deleted_topics(self, state_partition: int) -> None:
        """Tombstones for the state of topics deleted (also while the shard loaded)."""
        image = self._image()
        try:
            self.runtime.write(state_partition,
                               lambda s, now: s.on_metadata_update(image, now))
        except NotReady:
            pass
        except Exception:
            log.exception("cleaning deleted topics failed on %s-%d", TOPIC, state_partition)


def _with_code(invalid: Any, code: int) -> Any:
    """The error answer of an operation's type (an int, or a ReadResult)."""
    return ReadResult(code) if isinstance(invalid, ReadResult) else code
