"""The share-partition leaders of this broker, with their I/O: the log they hand records
from, the share coordinator that persists their state, timers for acquisition locks,
and the wake-ups a waiting ShareFetch needs (Kafka's `SharePartitionManager`).

A leader is created on the first fetch of its (group, topic, partition): its state is
read from the share coordinator, or, for a share-partition nothing was persisted for,
started where `share.auto.offset.reset` says and initialized there at once (so a
restart does not move a `latest` start). Operations on one leader run one at a time
(an asyncio lock): each asks the sans-IO `SharePartition` for the change, persists the
state write it returns before anyone is told, and rolls the change back if the write
fails. A write that leaves records ARCHIVING (KIP-1191) is followed by their dead letters
(`dead_letter.py`) and the write that finishes them. Idle leaders are dropped from
memory and read back on their next fetch.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode

from ..group.group_configs import DLQ_TOPIC
from ..group.group_configs import value as group_value
from ..metadata.features import feature_level
from ..records.batch import iter_batches
from ..records.transactions import committed_batches
from ..storage.errors import LogError
from ..storage.waiters import PartitionWaiters
from .config import AcquireMode, OffsetReset, SharePartitionConfig, initial_start_offset
from .dead_letter import DeadLetterWriter
from .outcomes import AcknowledgementBatch, AcquiredRecords, Outcome
from .partition import SharePartition
from .record_state import RecordState
from .records import ShareSnapshot, StateWrite

if TYPE_CHECKING:
    from ..coordinator.runtime import Clock
    from ..metadata.events import ImageSource
    from ..storage.partition import Partition
    from ..storage.store import PartitionStore

log = logging.getLogger("headwater.share")

LeaderKey = tuple[str, uuid.UUID, int]  # (group id, topic id, partition)
READ_COMMITTED = "read_committed"
DEAD_LETTER_RETRY_S = 1.0  # a failed dead-letter write is tried again this much later
_MIN_READ = 16 << 10  # bytes a ShareFetch reads from a partition log at least (see _read)
_NOT_INITIALIZED = {int(ErrorCode.unknown_topic_or_partition), int(ErrorCode.invalid_request)}
# What a failed state write means to the client (Kafka's SharePartition.fetchPersisterError).
_WRITE_ERRORS = {
    int(ErrorCode.fenced_state_epoch): ErrorCode.not_leader_or_follower,
    int(ErrorCode.fenced_leader_epoch): ErrorCode.not_leader_or_follower,
    int(ErrorCode.coordinator_not_available): ErrorCode.coordinator_not_available,
    int(ErrorCode.coordinator_load_in_progress): ErrorCode.coordinator_not_available,
    int(ErrorCode.not_coordinator): ErrorCode.coordinator_not_available,
    int(ErrorCode.group_id_not_found): ErrorCode.group_id_not_found,
    int(ErrorCode.unknown_topic_or_partition): ErrorCode.unknown_topic_or_partition,
}


class ShareError(Exception):
    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


@dataclass(slots=True)
class PartitionFetch:
    """What one share-partition gives a ShareFetch: batches and the acquired ranges."""

    records: bytes = b""
    acquired: tuple[AcquiredRecords, ...] = ()


@dataclass(slots=True)
class _Leader:
    key: LeaderKey
    part: SharePartition
    topic: str
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    timer: asyncio.TimerHandle | None = None
    timer_at: int = 0
    last_used_ms: int = 0
    bytes_per_offset: float = 1024.0  # in this partition's log, as last read (see _read)
    dead_letters_due: bool = False  # ARCHIVING records whose finishing failed: retry
    dead_letter_retry: asyncio.TimerHandle | None = None  # the retry of those, timed


class SharePersister(Protocol):
    """The share coordinator as the leaders use it (Kafka's `Persister`): the state of a
    share-partition read, initialized and written, and the ARCHIVING ones of a loaded
    state partition."""

    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         state_epoch: int, start_offset: int) -> int: ...

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int,
                   leader_epoch: int) -> tuple[int, ShareSnapshot | None]: ...

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int,
                    write: StateWrite, leader_epoch: int) -> int: ...

    def archiving(self, state_partition: int) -> list[tuple[str, uuid.UUID, int]]: ...


class ShareMembership(Protocol):
    """The group coordinator as the leaders use it: a share group's `share.*` configs."""

    def share_group_config(self, group_id: str) -> Mapping[str, str]: ...


RemoteRecovery = Callable[[LeaderKey, str], Awaitable[None]]
"""In a cluster: ask the broker that leads the share-partition's partition to load it
(and so write the dead letters it owes): (group, topic id, partition), topic name."""


class SharePartitionManager:
    def __init__(self, persister: SharePersister, membership: ShareMembership,
                 waiters: PartitionWaiters, dead_letters: DeadLetterWriter, *,
                 image: ImageSource, partitions: PartitionStore, clock: Clock,
                 remote_recovery: RemoteRecovery | None = None) -> None:
        self._image = image
        self._partitions = partitions
        self._clock = clock
        self.persister = persister
        self.membership = membership
        self.waiters = waiters
        self._leaders: dict[LeaderKey, _Leader] = {}
        self._loading: dict[LeaderKey, asyncio.Future[_Leader]] = {}
        self.idle_ms = 10 * 60_000
        self._config_image: object = None
        self._config_cache: dict[str, tuple[dict[str, str], SharePartitionConfig]] = {}
        # Records acquired / redelivered / acknowledged by type / released by lock expiry,
        # since start (the metrics endpoint reads them).
        self.counts: Counter[str] = Counter()
        self.dead_letters = dead_letters
        self._recovering: set[asyncio.Task[Any]] = set()
        self._remote_recovery = remote_recovery

    def loaded(self) -> Iterator[tuple[LeaderKey, str, SharePartition]]:
        """(key, topic name, state) of every share-partition held in memory."""
        for key, leader in self._leaders.items():
            yield key, leader.topic, leader.part

    # ---- configuration -------------------------------------------------------------
    def group_config(self, group_id: str) -> dict[str, str]:
        return self._configs(group_id)[0]

    def partition_config(self, group_id: str) -> SharePartitionConfig:
        return self._configs(group_id)[1]

    def _configs(self, group_id: str) -> tuple[dict[str, str], SharePartitionConfig]:
        """The group's effective `share.*` configs, computed once per metadata image (a
        config change is a new image): every ShareFetch and ShareAcknowledge needs them."""
        image = self._image()
        if self._config_image is not image:
            self._config_image = image
            self._config_cache.clear()
        hit = self._config_cache.get(group_id)
        if hit is not None:
            return hit
        cfg = dict(self.membership.share_group_config(group_id))
        part = SharePartitionConfig(  # a key missing: its registry default
            record_lock_duration_ms=int(group_value(cfg, "share.record.lock.duration.ms")),
            delivery_count_limit=int(group_value(cfg, "share.delivery.count.limit")),
            max_record_locks=int(group_value(cfg, "share.partition.max.record.locks")),
            # Kafka's SharePartition.isDLQEnabledForGroup: share.version 2 (KIP-1191)
            # and a dead-letter topic named; below level 2 the name is ignored.
            dead_letter=(bool((cfg.get(DLQ_TOPIC) or "").strip())
                         and feature_level(image, "share.version") >= 2))
        self._config_cache[group_id] = cfg, part
        return cfg, part

    def refresh_configs(self) -> None:
        """Group or broker configs changed: loaded leaders take the new values, as Kafka
        re-reads dynamic group configs."""
        for (group_id, _tid, _p), leader in self._leaders.items():
            leader.part.config = self.partition_config(group_id)

    def lock_duration_ms(self, group_id: str) -> int:
        return self.partition_config(group_id).record_lock_duration_ms

    def recover_dead_letters(self, state_partition: int) -> None:
        """A __share_group_state partition loaded: share-partitions left with ARCHIVING
        records are loaded now (which writes their dead letters), not at their next
        fetch, so a restart finishes them even if no consumer comes back."""
        for key in self.persister.archiving(state_partition):
            task = asyncio.get_running_loop().create_task(self._load_quietly(key))
            self._recovering.add(task)
            task.add_done_callback(self._recovering.discard)

    async def _load_quietly(self, key: LeaderKey) -> None:
        try:
            await self.leader(key)
        except ShareError as exc:
            if (exc.code == ErrorCode.not_leader_or_follower
                    and self._remote_recovery is not None):
                # A cluster: another broker leads the partition; it loads the
                # share-partition (and writes the dead letters) when asked.
                await self._recover_remotely(key)
            elif exc.code != ErrorCode.unknown_topic_or_partition:
                log.warning("loading %s for its dead letters failed: %s", key, exc)
        except Exception as exc:  # the next fetch tries again
            log.warning("loading %s for its dead letters failed: %s", key, exc)

    async def _recover_remotely(self, key: LeaderKey) -> None:
        assert self._remote_recovery is not None
        try:
            await self._remote_recovery(key, self._topic_name(key[1]))
            log.info("asked the leader of %s to load it for its dead letters", key)
        except Exception as exc:  # its next fetch there finishes them
            log.warning("asking the leader of %s to load it for its dead letters "
                        "failed: %s", key, exc)

    async def recover(self, key: LeaderKey) -> ErrorCode:
        """Another broker's share coordinator found ARCHIVING records of this
        share-partition, whose partition this broker leads: load it, which writes their
        dead letters (`recover_dead_letters` elsewhere)."""
        try:
            await self.leader(key)
        except ShareError as exc:
            return exc.code
        return ErrorCode.none

    # ---- leaders -------------------------------------------------------------------
    def _topic_name(self, topic_id: uuid.UUID) -> str:
        topic = self._image().topic_by_id(topic_id)
        if topic is None:
            raise ShareError(ErrorCode.unknown_topic_id)
        return topic.name

    def _plog(self, topic: str, partition: int) -> Partition:
        plog = self._partitions.partition(topic, partition)
        if plog is None:
            raise ShareError(ErrorCode.unknown_topic_or_partition)
        return plog

    async def leader(self, key: LeaderKey) -> _Leader:
        leader = self._leaders.get(key)
        if leader is not None:
            plog = self._partitions.partition(leader.topic, key[2])
            if plog is not None and plog.leader_epoch == leader.part.leader_epoch:
                return leader
            # The partition moved (a cluster's lease went to another broker, maybe came
            # back): this copy of its state is stale; the state is read again.
            self._drop(leader)
            if plog is None:
                raise ShareError(ErrorCode(self._partitions.absent_error(leader.topic,
                                                                         key[2])))
        loading = self._loading.get(key)
        if loading is not None:
            return await asyncio.shield(loading)
        fut: asyncio.Future[_Leader] = asyncio.get_running_loop().create_future()
        self._loading[key] = fut
        try:
            leader = await self._load(key)
            self._leaders[key] = leader
            fut.set_result(leader)
            return leader
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # retrieved: later waiters get it through `await`
            raise
        finally:
            self._loading.pop(key, None)

    async def _load(self, key: LeaderKey) -> _Leader:
        group_id, topic_id, partition = key
        topic = self._topic_name(topic_id)
        plog = await self._partitions.ready(topic, partition)  # once the store serves it
        if plog is None:
            raise ShareError(ErrorCode(self._partitions.absent_error(topic, partition)))
        coordinator = self.persister
        config = self.partition_config(group_id)
        cfg = self.group_config(group_id)
        # Read with this leadership's epoch: the coordinator records it, fencing the
        # writes of a previous leader (0 on one node; the lease epoch in a cluster).
        leader_epoch = plog.leader_epoch
        code, snapshot = await coordinator.read(group_id, topic_id, partition, leader_epoch)
        now = self._clock()
        if code == 0 and snapshot is not None and snapshot.start_offset >= 0:
            part = SharePartition.from_persisted(snapshot, config, leader_epoch=leader_epoch)
            if part.start_offset < plog.log_start_offset:
                part.advance_log_start(plog.log_start_offset, now)  # persisted at next write
        elif code == 0 or code in _NOT_INITIALIZED:
            reset = OffsetReset.parse(group_value(cfg, "share.auto.offset.reset"))

            def by_time(ts: int) -> int | None:
                found = plog.offset_for_timestamp(ts)
                return None if found is None else found[0]

            start = initial_start_offset(reset, plog.log_start_offset, plog.log_end_offset,
                                         by_time, now)
            epoch = snapshot.state_epoch if code == 0 and snapshot is not None else 0
            err = await coordinator.initialize(group_id, topic_id, partition, epoch, start)
            if err != 0:
                raise ShareError(_WRITE_ERRORS.get(err, ErrorCode.unknown_server_error),
                                 f"initializing share-partition state failed ({err})")
            part = SharePartition(start, config, state_epoch=epoch, leader_epoch=leader_epoch)
        else:
            raise ShareError(_WRITE_ERRORS.get(code, ErrorCode.unknown_server_error),
                             f"reading share-partition state failed ({code})")
        leader = _Leader(key, part, topic, last_used_ms=now)
        if part.dead_letters():  # a restart came between ARCHIVING and ARCHIVED
            await self._dead_letter(leader, recovering=True)
        return leader

    async def _persist(self, leader: _Leader, outcome: Outcome) -> None:
        """Persist `outcome`'s write; on failure undo the change and raise. A write that
        raises (its coordinator unreachable, its records not committed) may have landed
        or not: the change is undone here and the leader dropped, so that the next use
        reads the persisted state. Left in memory, an ARCHIVING the coordinator never
        had was dead-lettered by the next write while the partition's next leader
        delivered the record again (a 2,000-second campaign: rejected, answered failed,
        delivered again, accepted, and on the dead-letter topic)."""
        if outcome.write is None:
            return
        group_id, topic_id, partition = leader.key
        try:
            code = await self.persister.write(
                group_id, topic_id, partition, outcome.write, leader.part.leader_epoch)
        except BaseException:
            leader.part.rollback(outcome)
            self._drop(leader)
            raise
        if code != 0:
            leader.part.rollback(outcome)
            if code in (int(ErrorCode.fenced_state_epoch), int(ErrorCode.fenced_leader_epoch)):
                self._drop(leader)  # someone reset the state: read it again next time
            raise ShareError(_WRITE_ERRORS.get(code, ErrorCode.unknown_server_error),
                             f"persisting share-partition state failed ({code})")
        if leader.dead_letters_due or _archives(outcome.write):
            await self._dead_letter(leader)

    async def _dead_letter(self, leader: _Leader, recovering: bool = False) -> None:
        """KIP-1191: the ARCHIVING records are persisted; write their dead letters, then
        finish them (ARCHIVED). A failure leaves them ARCHIVING, retried after the
        leader's next state write or `DEAD_LETTER_RETRY_S`, whichever comes first; the
        dead letters already written are not written again (see `dead_letter.py`)."""
        part = leader.part
        letters = part.dead_letters()
        if not letters:
            leader.dead_letters_due = False
            return
        leader.dead_letters_due = False
        try:
            await self.dead_letters.write(leader.key, leader.topic, letters,
                                          self.group_config(leader.key[0]),
                                          recovering=recovering,
                                          leader_epoch=part.leader_epoch)
            result = part.dead_lettered(letters, self._clock())
            await self._persist(leader, result)
        except Exception as exc:
            leader.dead_letters_due = True
            log.warning("dead letters of %s not finished (retried later): %s", leader.key, exc)
            self._retry_dead_letters(leader)
            return
        self.dead_letters.finished(leader.key, letters)
        self.counts["dead_lettered"] += result.released
        self.wake(leader.key[1], leader.key[2])  # the window shrank

    def _retry_dead_letters(self, leader: _Leader) -> None:
        """Try again in `DEAD_LETTER_RETRY_S`, not only at the leader's next state write:
        a share-partition nobody fetches from any more would keep its ARCHIVING records,
        and their dead letters, waiting (a dead-letter partition just created, or moving,
        refuses the first write)."""
        if leader.dead_letter_retry is not None:
            return

        async def retry() -> None:
            leader.dead_letter_retry = None
            if not leader.dead_letters_due:
                return
            if self._leaders.get(leader.key) is not leader:
                # dropped (a state write's fate unknown): loaded afresh, its ARCHIVING
                # records, if persisted, are finished by the load
                if leader.key not in self._leaders:
                    await self._load_quietly(leader.key)
                return
            async with leader.lock:
                if leader.dead_letters_due:
                    await self._dead_letter(leader)

        leader.dead_letter_retry = asyncio.get_running_loop().call_later(
            DEAD_LETTER_RETRY_S, lambda: asyncio.ensure_future(retry()))

    def forget(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        """Drop the cached leader (an admin reset or deleted its state): the next fetch
        reads the state again instead of writing under a fenced state epoch."""
        leader = self._leaders.get((group_id, topic_id, partition))
        if leader is not None:
            self._drop(leader)
        self.dead_letters.forget((group_id, topic_id, partition))  # a new state epoch

    def unknown_topics(self, keys: Iterable[tuple[uuid.UUID, int]]
                       ) -> set[tuple[uuid.UUID, int]]:
        """The share-partitions among `keys` whose topic id the image does not know."""
        image = self._image()
        return {key for key in keys if image.topic_by_id(key[0]) is None}

    def refresh_idle(self, group_id: str, keys: Sequence[tuple[uuid.UUID, int]]) -> None:
        """Drop the cached leaders of `keys` that hold no acquired records and owe no
        dead letters: their next fetch reads the persisted state again (which is all
        of it: only acquisitions are not persisted)."""
        for topic_id, partition in keys:
            leader = self._leaders.get((group_id, topic_id, partition))
            if (leader is not None and not leader.lock.locked()
                    and not leader.dead_letters_due and leader.part.next_deadline_ms() is None):
                self._drop(leader)

    def _drop(self, leader: _Leader) -> None:
        if self._leaders.get(leader.key) is leader:
            del self._leaders[leader.key]
        if leader.timer is not None:
            leader.timer.cancel()
        if leader.dead_letter_retry is not None:
            leader.dead_letter_retry.cancel()
            leader.dead_letter_retry = None

    # ---- operations ----------------------------------------------------------------
    async def fetch(self, key: LeaderKey, member_id: str, max_records: int, max_bytes: int,
                    mode: AcquireMode, batch_size: int | None) -> PartitionFetch:
        leader = await self.leader(key)
        async with leader.lock:
            part = leader.part
            now = self._clock()
            leader.last_used_ms = now
            plog = self._plog(leader.topic, key[2])
            if plog.log_start_offset > part.start_offset:
                await self._persist(leader, part.advance_log_start(plog.log_start_offset, now))
            if not part.can_acquire():
                return PartitionFetch()
            offset = max(part.next_fetch_offset(), plog.log_start_offset)
            # Read per fetch (cached per metadata image): a change of the group's
            # share.isolation.level applies to the next fetch, as in Kafka.
            committed = group_value(self.group_config(key[0]),
                                    "share.isolation.level") == READ_COMMITTED
            upper = plog.last_stable_offset if committed else plog.high_watermark
            try:
                data, headers = self._read(leader, plog, offset, max_bytes, upper,
                                           max_records)
            except LogError:
                return PartitionFetch()
            if not data:
                return PartitionFetch()
            batches, skip = self._batches(headers, plog, offset, upper, committed)
            result = part.acquire(member_id, batches, max_records, now, mode=mode,
                                  batch_size=batch_size, aborted=skip)
            await self._persist(leader, result)
            self._schedule(leader)
            if not result.records:
                return PartitionFetch()
            self.counts["acquired"] += result.count
            self.counts["redelivered"] += sum(r.last_offset - r.first_offset + 1
                                              for r in result.records if r.delivery_count > 1)
            return PartitionFetch(_trim(data, headers, result.records), result.records)

    @staticmethod
    def _read(leader: _Leader, plog: Partition, offset: int, max_bytes: int, upper: int,
              max_records: int) -> tuple[bytes, list[tuple[int, Any]]]:
        """Log data from `offset` covering at least `max_records` offsets where the log has
        them, never more than `max_bytes`, with its batch headers (parsed once here, for
        the acquisition, the transaction filter and the trim). A fetch acquires at most
        `max_records` while clients ask for far more bytes (librdkafka: 50 MB): the read
        is sized by the bytes per offset seen on this partition, not by `max_bytes`."""
        if offset >= upper:
            return b"", []
        want = min(max_bytes, max(_MIN_READ, int(max_records * leader.bytes_per_offset * 1.1)))
        while True:
            data = plog.read(offset, want, upper)
            if not data:
                return data, []
            headers = list(iter_batches(data))
            first, last = headers[0][1].base_offset, headers[-1][1].last_offset
            leader.bytes_per_offset = len(data) / max(last - first + 1, 1)
            if (want >= max_bytes or last - offset + 1 >= max_records or last + 1 >= upper):
                return data, headers
            # Too few offsets for max_records: read again, sized by what was just seen.
            want = min(max_bytes, max(2 * want,
                                      int(max_records * leader.bytes_per_offset * 1.1)))

    @staticmethod
    def _batches(headers: list[tuple[int, Any]], plog: Partition, offset: int, upper: int,
                 committed: bool) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """The (first, last) offsets of the batches read, and the ranges no member may
        get: control batches (transaction markers), and under read_committed the
        batches of aborted transactions (Kafka's consumer-side logic, done here)."""
        batches: list[tuple[int, int]] = []
        skip: list[tuple[int, int]] = []
        aborted = plog.aborted_transactions(offset, upper) if committed else ()
        for h, kept in committed_batches((h for _pos, h in headers), aborted, committed):
            span = (h.base_offset, h.last_offset)
            batches.append(span)
            if not kept:
                skip.append(span)
        return batches, skip

    async def acknowledge(self, key: LeaderKey, member_id: str,
                          batches: Sequence[AcknowledgementBatch]) -> ErrorCode:
        try:
            leader = await self.leader(key)
        except ShareError as exc:
            return exc.code
        async with leader.lock:
            now = self._clock()
            leader.last_used_ms = now
            result = leader.part.acknowledge(member_id, batches, now)
            try:
                await self._persist(leader, result)
            except ShareError as exc:
                return exc.code
            self._schedule(leader)
        if result.error_code == 0:
            for b in batches:
                for kind, n in _typed_counts(b):
                    self.counts[kind] += n
        self.wake(key[1], key[2])
        return ErrorCode(result.error_code)

    async def release_member(self, group_id: str, member_id: str,
                             keys: Sequence[tuple[uuid.UUID, int]] | None = None) -> None:
        """Return the member's acquired records (it left, was fenced, or closed its
        session). Only loaded leaders can hold its records."""
        targets = [leader for k, leader in list(self._leaders.items()) if k[0] == group_id
                   and (keys is None or (k[1], k[2]) in keys)]
        for leader in targets:
            async with leader.lock:
                result = leader.part.release_member(member_id, self._clock())
                try:
                    await self._persist(leader, result)
                except ShareError as exc:
                    log.warning("releasing %s's records of %s failed: %s", member_id,
                                leader.key, exc)
                    continue
                self._schedule(leader)
            if result.released:
                self.wake(leader.key[1], leader.key[2])

    # ---- lock expiry ---------------------------------------------------------------
    def _schedule(self, leader: _Leader) -> None:
        deadline = leader.part.next_deadline_ms()
        if deadline is None:
            return
        if leader.timer is not None and leader.timer_at <= deadline:
            return
        if leader.timer is not None:
            leader.timer.cancel()
        loop = asyncio.get_running_loop()
        delay = max(0.0, (deadline - self._clock()) / 1000)
        leader.timer_at = deadline
        leader.timer = loop.call_later(
            delay, lambda: asyncio.ensure_future(self._expire(leader)))

    async def _expire(self, leader: _Leader) -> None:
        leader.timer = None
        async with leader.lock:
            result = leader.part.expire_locks(self._clock())
            try:
                await self._persist(leader, result)
            except ShareError as exc:
                log.warning("expiring locks of %s failed: %s", leader.key, exc)
                return
            self._schedule(leader)
            self.counts["lock_expired"] += result.released
        if result.released:
            self.wake(leader.key[1], leader.key[2])

    # ---- waiting -------------------------------------------------------------------
    def _log_of(self, topic_id: uuid.UUID, partition: int) -> Partition | None:
        topic = self._image().topic_by_id(topic_id)
        return None if topic is None else self._partitions.partition(topic.name, partition)

    def wake(self, topic_id: uuid.UUID, partition: int) -> None:
        """Something changed there that is not an append (an ack, a release, a lock
        expiry): the waiters on its log return (appends wake them by themselves)."""
        plog = self._log_of(topic_id, partition)
        if plog is not None:
            self.waiters.wake(plog)

    async def wait(self, keys: Sequence[tuple[uuid.UUID, int]], timeout_s: float) -> None:
        """Until one of `keys` changes, or `timeout_s` passes."""
        if timeout_s <= 0 or not keys:
            return
        plogs = [p for p in (self._log_of(*k) for k in keys) if p is not None]
        if not plogs:  # all deleted meanwhile: nothing can wake us
            await asyncio.sleep(timeout_s)
            return
        await self.waiters.wait(plogs, timeout_s)

    def unload_idle(self, now_ms: int) -> int:
        """Drop leaders nobody used for a while and that hold no acquired records; their
        state is persisted, so the next fetch reads it back."""
        dropped = 0
        for leader in list(self._leaders.values()):
            if (now_ms - leader.last_used_ms >= self.idle_ms and not leader.lock.locked()
                    and leader.part.next_deadline_ms() is None):
                self._drop(leader)
                dropped += 1
        return dropped


_ACK_NAMES = {0: "gap", 1: "accept", 2: "release", 3: "reject", 4: "renew"}


def _typed_counts(batch: AcknowledgementBatch) -> Iterator[tuple[str, int]]:
    """(acknowledgement type name, records) of one batch: one type for the range, or
    one per offset."""
    types = batch.acknowledge_types
    if len(types) == 1:
        yield _ACK_NAMES.get(types[0], "unknown"), batch.last_offset - batch.first_offset + 1
    else:
        for t in types:
            yield _ACK_NAMES.get(t, "unknown"), 1


def _archives(write: StateWrite | None) -> bool:
    """Whether a state write leaves records ARCHIVING (their dead letters are due)."""
    return write is not None and any(
        b.delivery_state == RecordState.ARCHIVING for b in write.state_batches)


def _trim(data: bytes, headers: list[tuple[int, Any]],
          acquired: Sequence[AcquiredRecords]) -> bytes:
    """The batches of `data` that hold an acquired offset (the client filters records by
    the acquired ranges; batches outside them need not travel)."""
    lo, hi = acquired[0].first_offset, acquired[-1].last_offset
    start = end = None
    for pos, h in headers:
        if h.last_offset < lo:
            continue
        if h.base_offset > hi:
            break
        if start is None:
            start = pos
        end = pos + h.size
    if start is None:
        return b""
    return data if start == 0 and end == len(data) else data[start:end]
