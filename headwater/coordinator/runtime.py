"""The coordinator runtime: one shard per partition of an internal compacted topic.

An operation is a pure function of (shard, now_ms) returning a `Result`: the
records to append and the response. The runtime appends the records to the
partition as one batch, replays them into the shard, and only then returns the
response, so in-memory state is always exactly what replaying the log yields and a
restart (which is a replay) rebuilds it. Everything runs on the event-loop thread;
appends are synchronous, so operations on one shard never interleave.

While a partition is loading, operations on it raise `NotReady` with
COORDINATOR_LOAD_IN_PROGRESS, which clients retry.

Transactions: an operation's records can be written transactionally (producer id and
epoch in the batch header, the transactional bit set), e.g. TxnOffsetCommit's offsets;
`write_marker` appends the COMMIT/ABORT marker that ends such a transaction on one
partition and hands it to the shard (`replay_end_transaction`), and loading does the same
for every marker it finds, so a restart resolves pending transactional state exactly as
the live path did. A service can watch its shards through `after_write` (called after
every write, timer-driven ones included) and subscribe to loads (`subscribe_load`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from kio.schema.errors import ErrorCode as E

from ..log.batch import BatchRecord, build_batch, decode_records, iter_batches
from ..log.control import parse_marker
from ..storage.errors import LogError
from .hashing import partition_for
from .record_codec import CoordinatorRecord, RecordCodec

if TYPE_CHECKING:
    from ..storage.partition import Partition
    from ..storage.store import PartitionSource

log = logging.getLogger("headwater.coordinator")


class Result(NamedTuple):
    """What an operation asks for: records to write (atomically), then a response."""

    records: list[CoordinatorRecord]
    response: Any = None


class Timer(Protocol):
    """Injected into shards; operations scheduled here run like any other write."""

    def schedule(self, key: str, delay_ms: int, op: Callable[[int], Result]) -> None: ...

    def cancel(self, key: str) -> None: ...


Clock = Callable[[], int]
"""Wall-clock milliseconds (the broker's `now_ms`; a test's fake clock)."""


class InternalTopics(Protocol):
    """Creates the runtime's internal topic (the controller does)."""

    def ensure_internal_topic(self, name: str, num_partitions: int,
                              configs: Mapping[str, str]) -> int:
        """Create `name` if missing; its partition count."""
        ...


class Shard(Protocol):
    def replay(self, offset: int, producer_id: int, producer_epoch: int,
               record: CoordinatorRecord) -> None: ...

    def on_loaded(self, now_ms: int) -> None: ...

    def replay_end_transaction(self, producer_id: int, producer_epoch: int,
                               commit: bool) -> None:
        """A COMMIT (`commit`) or ABORT marker of `producer_id` landed in the partition."""


class NotReady(Exception):
    """The shard cannot serve now; `code` is the Kafka error to answer with."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class _LoopTimer:
    def __init__(self, runtime: CoordinatorRuntime, partition: int) -> None:
        self.runtime = runtime
        self.partition = partition
        self._handles: dict[str, asyncio.TimerHandle] = {}

    def schedule(self, key: str, delay_ms: int, op: Callable[[int], Result]) -> None:
        self.cancel(key)
        loop = asyncio.get_running_loop()

        def fire() -> None:
            self._handles.pop(key, None)
            try:
                self.runtime.write(self.partition, lambda _shard, now: op(now))
            except NotReady:
                pass
            except Exception:
                log.exception("timer %s on %s-%d failed", key, self.runtime.topic,
                              self.partition)

        self._handles[key] = loop.call_later(max(delay_ms, 0) / 1000, fire)

    def cancel(self, key: str) -> None:
        handle = self._handles.pop(key, None)
        if handle is not None:
            handle.cancel()

    def cancel_all(self) -> None:
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()


class CoordinatorRuntime:
    """The shards of one internal topic. It reads and writes the topic's partitions
    through `partitions` (the storage seam), creates the topic through `topics`, and
    stamps records with `clock`."""

    def __init__(self, topic: str, num_partitions: int, codec: RecordCodec,
                 shard_factory: Callable[[int, Timer], Shard],
                 topic_configs: dict[str, str], *, partitions: PartitionSource,
                 topics: InternalTopics, clock: Clock, load_delay_ms: int = 0) -> None:
        self._partitions = partitions
        self._topics = topics
        self._clock = clock
        self.topic = topic
        self.num_partitions = num_partitions
        self.codec = codec
        self.shard_factory = shard_factory
        self.topic_configs = topic_configs
        self.load_delay_ms = load_delay_ms
        self._shards: dict[int, Shard] = {}
        self._timers: dict[int, _LoopTimer] = {}
        self._loading: set[int] = set(range(num_partitions))
        self._task: asyncio.Task[None] | None = None
        self.load_times_ms: dict[int, float] = {}
        # Hook for the owning service: called with the partition after each write that
        # appended records.
        self.after_write: Callable[[int], None] | None = None
        # Called with the partition once it is loaded, in subscription order.
        self._load_subscribers: list[Callable[[int], None]] = []

    # ---- lifecycle -----------------------------------------------------------------
    def ensure_topic(self) -> None:
        """Create the topic if missing; an existing one keeps its partition count."""
        self.num_partitions = self._topics.ensure_internal_topic(
            self.topic, self.num_partitions, self.topic_configs)
        self._loading = set(range(self.num_partitions))

    async def start(self) -> None:
        self.ensure_topic()
        self._task = asyncio.create_task(self._load_all())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        for timer in self._timers.values():
            timer.cancel_all()

    async def _load_all(self) -> None:
        if self.load_delay_ms:
            await asyncio.sleep(self.load_delay_ms / 1000)
        for partition in range(self.num_partitions):
            start = time.monotonic()
            timer = _LoopTimer(self, partition)
            shard = self.shard_factory(partition, timer)
            count = 0
            for offset, pid, epoch, record in self._scan(partition):
                if isinstance(record, bool):
                    shard.replay_end_transaction(pid, epoch, record)
                else:
                    shard.replay(offset, pid, epoch, record)
                count += 1
                if count % 5000 == 0:
                    await asyncio.sleep(0)
            self._shards[partition] = shard
            self._timers[partition] = timer
            self._loading.discard(partition)
            shard.on_loaded(self._clock())
            elapsed = (time.monotonic() - start) * 1000
            self.load_times_ms[partition] = elapsed
            if count:
                log.info("loaded %s-%d: %d records in %.0f ms", self.topic, partition, count,
                         elapsed)
            for subscriber in list(self._load_subscribers):
                self._notify(subscriber, partition)
            await asyncio.sleep(0)

    def subscribe_load(self, callback: Callable[[int], None]) -> Callable[[], None]:
        """Call `callback(partition)` once each partition is loaded; returns the
        unsubscribe handle."""
        self._load_subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._load_subscribers:
                self._load_subscribers.remove(callback)

        return unsubscribe

    def _notify(self, hook: Callable[[int], None] | None, partition: int) -> None:
        if hook is None:
            return
        try:
            hook(partition)
        except Exception:
            log.exception("hook on %s-%d failed", self.topic, partition)

    def _scan(self, partition: int) -> Iterator[tuple[int, int, int, Any]]:
        """(offset, producer id, epoch, record) per record; for a transaction marker the
        record is a bool, True for COMMIT."""
        plog = self._log(partition)
        offset = plog.log_start_offset
        end = plog.log_end_offset
        while offset < end:
            data = plog.read(offset, 1 << 20)
            if not data:
                break
            for pos, header in iter_batches(data):
                if header.is_control:
                    marker = self._marker(data[pos:pos + header.size], header.base_offset)
                    if marker is not None and header.producer_id >= 0:
                        yield (header.base_offset, header.producer_id, header.producer_epoch,
                               marker)
                    offset = header.next_offset
                    continue
                for rec in decode_records(data[pos:pos + header.size]):
                    if rec.key is None:
                        continue
                    decoded = self.codec.decode(rec.key, rec.value)
                    if decoded is not None:
                        yield rec.offset, header.producer_id, header.producer_epoch, decoded
                offset = header.next_offset

    def _marker(self, batch: bytes, offset: int) -> bool | None:
        try:
            marker = parse_marker(batch)
        except LogError as exc:
            log.warning("%s: unreadable control batch at offset %d: %s", self.topic, offset,
                        exc.message)
            return None
        return None if marker is None else marker.commit

    def _log(self, partition: int) -> Partition:
        plog = self._partitions.partition(self.topic, partition)
        if plog is None:
            raise NotReady(E.coordinator_not_available)
        return plog

    # ---- serving -------------------------------------------------------------------
    def partition_for(self, key: str) -> int:
        return partition_for(key, self.num_partitions)

    def is_loaded(self) -> bool:
        return not self._loading

    def shard(self, partition: int) -> Shard:
        if partition in self._loading:
            raise NotReady(E.coordinator_load_in_progress)
        shard = self._shards.get(partition)
        if shard is None:
            raise NotReady(E.not_coordinator)
        return shard

    def shards(self) -> list[Shard]:
        return [self._shards[p] for p in sorted(self._shards)]

    def read(self, partition: int, fn: Callable[[Any], Any]) -> Any:
        return fn(self.shard(partition))

    def write(self, partition: int, op: Callable[[Any, int], Result], producer_id: int = -1,
              producer_epoch: int = -1, transactional: bool = False) -> Any:
        """Run `op`, append its records as one batch, replay them, return the response.
        With a producer id the batch carries it (and the transactional bit if asked);
        the log may then refuse it with a LogError (a fenced epoch, say), which
        propagates and leaves the shard unchanged."""
        shard = self.shard(partition)
        now = self._clock()
        result = op(shard, now)
        if result.records:
            self.append(partition, shard, result.records, now, producer_id, producer_epoch,
                        transactional)
            self._notify(self.after_write, partition)
        return result.response

    def write_marker(self, partition: int, producer_id: int, producer_epoch: int,
                     commit: bool, coordinator_epoch: int,
                     transaction_version: int = 0) -> int:
        """Append a COMMIT/ABORT marker ending `producer_id`'s transaction on `partition`
        and replay it into the shard; returns its offset. NotReady while loading (the
        loader would miss it), LogError if the log refuses it."""
        shard = self.shard(partition)
        offset = self._log(partition).append_marker(producer_id, producer_epoch, commit,
                                                    coordinator_epoch, self._clock(),
                                                    transaction_version)
        shard.replay_end_transaction(producer_id, producer_epoch, commit)
        return offset

    def append(self, partition: int, shard: Shard, records: list[CoordinatorRecord],
               now: int, producer_id: int = -1, producer_epoch: int = -1,
               transactional: bool = False) -> None:
        entries: list[BatchRecord] = []
        for record in records:
            key, value = self.codec.encode(record)
            entries.append((key, value, [], now))
        data = build_batch(entries, producer_id=producer_id, producer_epoch=producer_epoch,
                           is_transactional=transactional)
        result = self._log(partition).append(data, now, origin_client=False)
        for i, record in enumerate(records):
            shard.replay(result.base_offset + i, producer_id, producer_epoch, record)
