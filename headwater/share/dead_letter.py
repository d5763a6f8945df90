"""Writes a share group's dead letters (KIP-1191, Kafka 4.4) to its dead-letter topic.

Theory of operation
-------------------
A share-partition whose group names a dead-letter topic (`errors.deadletterqueue.topic.name`)
sends rejected records, and records that reach the delivery-count limit, to ARCHIVING
instead of ARCHIVED (`record_state.py`). The manager persists that state first, then hands
the ARCHIVING ranges (`SharePartition.dead_letters`) to `DeadLetterWriter.write`, and only
when it returns marks them ARCHIVED (`SharePartition.dead_lettered`) and persists that.

**What a dead letter is** (Kafka's `ShareGroupDLQRecordHelper`): one record per source
offset in partition `source partition % partitions of the DLQ topic`, timestamped with the
write time, with the headers `__dlq.errors.topic`, `.partition`, `.offset`, `.group`,
`.delivery.count` and `.message` (the reason). With
`errors.deadletterqueue.copy.record.enable` it also carries the source record's key, value
and headers (the context headers after them); without, key and value are null.

**Which topic may take them** (Kafka's `ShareGroupDLQValidator` and
`ShareGroupDLQStateManager.validateDlqTopic`, checked at each write because every input is
a dynamic config): a name is configured; it does not start with `__`; an existing topic has
`errors.deadletterqueue.group.enable=true`; the name starts with the broker's
`errors.deadletterqueue.topic.name.prefix` (default `dlq.`, empty: no rule); a missing
topic is created only with `errors.deadletterqueue.auto.create.topics.enable`, with
`errors.deadletterqueue.group.enable=true` and CreateTime. When a rule fails the records
are archived without a dead letter, as in Kafka (the write is best effort; an ARCHIVING
record must not hold the SPSO back forever), logged and counted.

**Exactly once.** Kafka's write is at-least-once (it re-sends ARCHIVING records after a
restart). Here the order is: ARCHIVING persisted -> dead letters appended to the local
log (flushed when the log's durability settings ask) -> ARCHIVED persisted. A crash before
the append finds ARCHIVING on load and writes; a crash after it finds ARCHIVING too, so
on load (`recovering=True`) the writer first reads the destination partition for dead
letters already there for this share-partition (the headers name group, topic, partition
and offset) and writes only the others. Between the append and the ARCHIVED write, a
failed state write leaves the records ARCHIVING in memory; the offsets written are
remembered per share-partition until `finished`, so the retry writes nothing again.
A write whose outcome is unknown (its answer lost: a connection reset, a timeout) is not
read back but sent again as it was: each share-partition's dead letters go under a
producer id of their own with sequences, so the dead-letter partition's leader answers
the second copy as a duplicate whichever comes first, the retry or the first request
delivered late (a read-back cannot see a request still in the network; a 30-minute
campaign found letters written twice so). A leader that lost the writer's sequences
reads back and continues. Writes for one share-partition run one at a time (a leader
reloaded while its previous copy is still writing hands over the same records), a copy
under an older leader epoch than one that wrote is refused (the newer one may have
finished the letters, and `finished` forgets them), and a
loaded state's ARCHIVING records are always read back, even when a lost write is sent
again first.

**Across processes.** The producer id is the share-partition's own, the same in every
process (`stable_producer_id`: a hash of group, topic id and partition, above any id the
controller hands out), and a process's first write continues its sequence from the
dead-letter partition (the read-back also finds the id's last batch there). So a
request of a previous process (before a restart, or another broker's before the
share-partition moved) still in the network when its successor reads back cannot land
beside the successor's letters: whichever comes second repeats the other's sequences
(answered as a duplicate) or breaks them (OUT_OF_ORDER_SEQUENCE: read back again, and
what landed is found). A 2,000-second campaign found a letter written twice by two
producer ids so. Should the leader keep sequences the log no longer holds (retention
removed every batch of the id), the third OUT_OF_ORDER_SEQUENCE in a row gives the
share-partition an allocated id, unfenced as before.
The dedup key is (group, topic, partition, offset): after an admin reset or a deleted and
recreated group, an offset dead-lettered before and again in the new history, with a crash
in that window, is found as written (the old dead letter) and not written a second time.
The fault points `share.dead-letter.before-write` and `share.dead-letter.after-write`
(headwater/faults.py) crash the process on either side of the append, for the tests.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode as E

from ..config import BrokerConfig, LogConfig
from ..coordinator.runtime import NotReady
from ..faults import SHARE_DEAD_LETTER_AFTER_WRITE, SHARE_DEAD_LETTER_BEFORE_WRITE, Faults
from ..group.group_configs import DLQ_COPY_RECORD, DLQ_TOPIC
from ..metadata.controller import ControllerError, NewTopic
from ..metadata.image import TOPIC_RESOURCE, TopicImage
from ..records.batch import BatchRecord, build_batch, decode_records, iter_batches
from ..storage.errors import LogError
from .outcomes import DeadLetter

if TYPE_CHECKING:
    from ..coordinator.runtime import Clock
    from ..metadata.events import ImageSource
    from ..metadata.image import MetadataImage
    from ..storage.partition import Partition
    from ..storage.store import PartitionStore

log = logging.getLogger("headwater.share.dlq")

HEADER_TOPIC = "__dlq.errors.topic"
HEADER_PARTITION = "__dlq.errors.partition"
HEADER_OFFSET = "__dlq.errors.offset"
HEADER_GROUP = "__dlq.errors.group"
HEADER_DELIVERY_COUNT = "__dlq.errors.delivery.count"
HEADER_MESSAGE = "__dlq.errors.message"

AUTO_CREATE = "errors.deadletterqueue.auto.create.topics.enable"
PREFIX = "errors.deadletterqueue.topic.name.prefix"
TOPIC_ENABLE = "errors.deadletterqueue.group.enable"
_BATCH_OVERHEAD = 61  # a v2 batch header
_READ_BYTES = 1 << 20  # one read of the source or the dead-letter log (Kafka: 1 MB)

ShareKey = tuple[str, uuid.UUID, int]  # (group, topic id, partition)


#: A dead-letter partition's leader that lost the writer's sequences (OUT_OF_ORDER_SEQUENCE,
#: INVALID_PRODUCER_EPOCH, UNKNOWN_PRODUCER_ID).
_SEQUENCE_LOST = frozenset({int(E.out_of_order_sequence_number),
                            int(E.invalid_producer_epoch), int(E.unknown_producer_id)})
#: Sequences lost this many times in a row with the stable id: an allocated one instead.
_LOST_BEFORE_FALLBACK = 3
_INT32_MAX = (1 << 31) - 1
#: Stable producer ids lie at and above this (the controller's blocks count up from 0).
STABLE_ID_BASE = 1 << 62


def stable_producer_id(key: ShareKey) -> int:
    """The share-partition's dead-letter producer id, the same in every process."""
    group_id, topic_id, partition = key
    digest = hashlib.blake2b(f"{group_id}\0{topic_id}\0{partition}".encode(),
                             digest_size=8).digest()
    return STABLE_ID_BASE + int.from_bytes(digest, "big") % STABLE_ID_BASE


class ProducerIds(Protocol):
    """Hands out producer ids (NotReady while none is available)."""

    def allocate_producer_id(self) -> int: ...


class DeadLetterConfigError(Exception):
    """The group's dead-letter topic cannot take a write (Kafka's ConfigException)."""


class StaleLeaderError(Exception):
    """A copy of the share-partition's leader under a newer leader epoch writes its dead
    letters now: this copy's records are stale (its state writes are fenced too)."""


@dataclass(frozen=True, slots=True)
class Target:
    topic: str
    copy_record: bool
    exists: bool


class TopicCreator(Protocol):
    """Creates the dead-letter topic when auto-creation is on (the controller)."""

    def create_topics(self, topics: Iterable[NewTopic], validate_only: bool = False,
                      allow_internal: bool = False
                      ) -> list[tuple[NewTopic, ControllerError | None, TopicImage | None]]: ...


def validate(group_id: str, group_config: Mapping[str, str], image: MetadataImage,
             config: BrokerConfig) -> Target:
    """The group's dead-letter topic, checked in Kafka's order; raises
    DeadLetterConfigError with Kafka's message."""
    topic = (group_config.get(DLQ_TOPIC) or "").strip()
    if not topic:
        raise DeadLetterConfigError(
            f"Configured DLQ topic name in share group: {group_id} is empty.")
    if topic.startswith("__"):
        raise DeadLetterConfigError(f"Configured DLQ topic name in share group: {group_id} "
                                    f"cannot start with __, topic: {topic}.")
    exists = image.topic(topic) is not None
    if exists and (image.resource_configs(TOPIC_RESOURCE, topic).get(TOPIC_ENABLE)
                   or "").strip().lower() != "true":
        raise DeadLetterConfigError("DLQ is not enabled on configured DLQ topic for share "
                                    f"group: {group_id}, topic: {topic}")
    prefix = broker_setting(config, PREFIX)
    if prefix and not topic.startswith(prefix):
        raise DeadLetterConfigError(
            "Configured DLQ topic name does not comply with the DLQ topic prefix in share "
            f"group: {group_id}, topic: {topic}, prefix: {prefix}")
    if not exists and broker_setting(config, AUTO_CREATE).lower() != "true":
        raise DeadLetterConfigError("DLQ topic does not exist and auto create is disabled "
                                    f"on cluster for share group: {group_id}, topic: {topic}.")
    copy = (group_config.get(DLQ_COPY_RECORD) or "").strip().lower() == "true"
    return Target(topic, copy, exists)


def broker_setting(config: BrokerConfig, key: str) -> str:
    """A DLQ broker config, where an explicit "" (no prefix rule) is a value."""
    layers = config.layers(key)
    return layers[0][1].strip() if layers else ""


def dead_letter_records(group_id: str, source_topic: str, partition: int,
                        letters: Iterable[DeadLetter], sources: Mapping[int, Any],
                        now_ms: int) -> Iterator[tuple[int, BatchRecord]]:
    """(source offset, (key, value, headers, timestamp)) of every dead letter; `sources`
    holds the decoded source records of the offsets to copy."""
    for letter in letters:
        context: list[tuple[str, bytes | None]] = [(HEADER_TOPIC, source_topic.encode()),
                   (HEADER_PARTITION, str(partition).encode()),
                   (HEADER_OFFSET, b""),  # set per offset below
                   (HEADER_GROUP, group_id.encode()),
                   (HEADER_DELIVERY_COUNT, str(letter.delivery_count).encode()),
                   (HEADER_MESSAGE, letter.reason.value.encode())]
        for offset in range(letter.first_offset, letter.last_offset + 1):
            context[2] = (HEADER_OFFSET, str(offset).encode())
            source = sources.get(offset)
            if source is None:
                yield offset, (None, None, list(context), now_ms)
            else:
                yield offset, (source.key, source.value, [*source.headers, *context], now_ms)


def batches(records: Sequence[BatchRecord], max_bytes: int, producer_id: int = -1,
            base_sequence: int = -1) -> Iterator[bytes]:
    """Encoded batches of `records` each within `max_bytes` where a record allows it
    (one record over the limit goes alone and the log reports it, as in Kafka); with a
    producer id, the records' sequences run on from `base_sequence` (epoch 0)."""
    start = 0
    while start < len(records):
        end, size = start, _BATCH_OVERHEAD
        while end < len(records):
            key, value, headers, _ts = records[end]
            size += 20 + len(key or b"") + len(value or b"") + sum(
                len(k) + len(v or b"") + 4 for k, v in headers)
            if size > max_bytes and end > start:
                break
            end += 1
        if producer_id < 0:
            yield build_batch(records[start:end])
        else:
            yield build_batch(records[start:end], producer_id=producer_id, producer_epoch=0,
                              base_sequence=base_sequence + start)
        start = end


class RemoteLogs(Protocol):
    """In a cluster, the dead-letter partitions another broker serves, reached as a
    client reaches them (shared/node.py's ClusterNode). Each raises ForwardError (or
    another exception) while the partition cannot be reached: the records stay
    ARCHIVING, and their dead letters are tried again."""

    async def produce(self, topic: str, topic_id: uuid.UUID, partition: int,
                      batch: bytes) -> tuple[int, int]:
        """(error code, base offset answered)."""
        ...

    async def fetch(self, topic: str, topic_id: uuid.UUID, partition: int, offset: int,
                    max_bytes: int) -> tuple[int, bytes, int, int]: ...

    async def create_topic(self, name: str, partitions: int,
                           configs: dict[str, str]) -> int: ...

    def is_controller(self) -> bool: ...


class _Destination(Protocol):
    """The dead-letter partition, here or on another broker."""

    async def bounds(self) -> tuple[int, int]:
        """(log start offset, high watermark)."""
        ...

    async def read(self, offset: int, end: int) -> bytes: ...

    async def append(self, batches: Sequence[bytes], now_ms: int) -> list[int | None]:
        """Per batch, the base offset of the batch that holds it if it may be another
        writer's (answered as a duplicate: its sequences repeat an earlier batch's),
        else None."""
        ...


class _Local:
    def __init__(self, plog: Partition, store: PartitionStore) -> None:
        self._plog, self._store = plog, store

    async def bounds(self) -> tuple[int, int]:
        return self._plog.log_start_offset, self._plog.high_watermark

    async def read(self, offset: int, end: int) -> bytes:
        return self._plog.read(offset, _READ_BYTES, end)

    async def append(self, batches: Sequence[bytes], now_ms: int) -> list[int | None]:
        results = [self._plog.append(batch, now_ms) for batch in batches]
        durable = self._store.commit([self._plog])
        if durable is not None:
            await durable
        return [r.base_offset if r.duplicate else None for r in results]


class _Remote:
    """A dead-letter partition another broker of the cluster leads: Produce and Fetch
    there, as Kafka's brokers write dead letters through a producer."""

    def __init__(self, remote: RemoteLogs, topic: str, topic_id: uuid.UUID,
                 partition: int) -> None:
        self._remote, self._topic, self._id, self._partition = (remote, topic, topic_id,
                                                                partition)

    async def bounds(self) -> tuple[int, int]:
        code, _data, high, start = await self._remote.fetch(self._topic, self._id,
                                                            self._partition, 0, 0)
        if code and code != int(E.offset_out_of_range):
            raise LogError(code, f"reading {self._topic}-{self._partition} failed ({code})")
        return start, high

    async def read(self, offset: int, end: int) -> bytes:
        code, data, _high, _start = await self._remote.fetch(
            self._topic, self._id, self._partition, offset, _READ_BYTES)
        if code:
            raise LogError(code, f"reading {self._topic}-{self._partition} failed ({code})")
        return _below(data, end)

    async def append(self, batches: Sequence[bytes], now_ms: int) -> list[int | None]:
        at: list[int | None] = []
        for batch in batches:
            code, base = await self._remote.produce(self._topic, self._id, self._partition,
                                                    batch)
            if code:
                raise LogError(code, f"the leader of {self._topic}-{self._partition} "
                                     f"refused the dead letters ({code})")
            at.append(base)  # a Produce answer does not say whether it was a duplicate
        return at


def _below(data: bytes, end: int) -> bytes:
    """The whole batches of `data` that end before `end` (a Fetch answers up to the
    high watermark; this keeps a read within the bound asked, as a local read does)."""
    stop = 0
    for pos, h in iter_batches(data):
        if h.last_offset >= end:
            break
        stop = pos + h.size
    return data[:stop]


class DeadLetterWriter:
    """Writes dead letters for this broker's share-partition leaders. See the module
    docstring."""

    def __init__(self, config: BrokerConfig, *, image: ImageSource, store: PartitionStore,
                 topics: TopicCreator, clock: Clock, faults: Faults | None = None,
                 remote: RemoteLogs | None = None,
                 producer_ids: ProducerIds | None = None) -> None:
        self._config = config
        self._image = image
        self._store = store
        self._topics = topics
        self._clock = clock
        #: A cluster: the dead-letter partition may be another broker's.
        self._remote = remote
        self._written: dict[ShareKey, set[int]] = {}
        #: Share-partitions whose last write failed with its outcome perhaps unknown:
        #: the next one first reads back what landed.
        self._uncertain: set[ShareKey] = set()
        #: Idempotent writes: each share-partition's dead letters go under a producer id
        #: of its own, [id, next sequence]; the batches of a write whose outcome is
        #: unknown are kept and sent again as they were, so that the leader recognises
        #: whichever copy comes second (a first one delivered late, after its retry).
        self._producer_ids = producer_ids
        self._producers: dict[ShareKey, list[int]] = {}
        self._pending: dict[ShareKey, tuple[list[bytes], list[int]]] = {}
        #: Sequences lost in a row, and the allocated ids that replaced a stable one.
        self._lost: Counter[ShareKey] = Counter()
        self._fallback: dict[ShareKey, int] = {}
        self._locks: dict[ShareKey, asyncio.Lock] = {}
        #: The newest leader epoch that wrote each share-partition's letters.
        self._leader_epochs: dict[ShareKey, int] = {}
        # (group, "written" | "failed") -> records, since start (the metrics endpoint).
        self.counts: Counter[tuple[str, str]] = Counter()
        self._faults = faults if faults is not None else Faults()  # test-only (faults.py)

    async def write(self, key: ShareKey, source_topic: str, letters: Sequence[DeadLetter],
                    group_config: Mapping[str, str], *, recovering: bool = False,
                    leader_epoch: int = 0) -> None:
        """Write the dead letters of `letters` (ARCHIVING ranges of share-partition
        `key`, their state persisted) that are not written yet. Returns when they are in
        the log, or when the topic refuses them for good (logged and counted: the caller
        archives them either way). A retriable failure (the partition moving, its commit
        failed or timed out) is raised: the records stay ARCHIVING and the caller tries
        again, first reading back what may have landed.

        One write at a time per share-partition: a leader reloaded while its previous
        copy is still writing (the partition's lease moved and came back, its state
        write was fenced) must not write the same letters beside it (a campaign found
        letters written two and three times so).

        A copy under an older `leader_epoch` than one that wrote before is refused
        (StaleLeaderError): the newer copy may have finished the letters already, and
        `finished` forgot their offsets (a 2,000-second campaign: the copy loaded at the
        share coordinator's request wrote and finished a letter, then the copy it
        replaced wrote it again, its ARCHIVED write fenced only after)."""
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            newest = self._leader_epochs.get(key, leader_epoch)
            if leader_epoch < newest:
                raise StaleLeaderError(
                    f"dead letters of {key}: the share-partition's leader is loaded again "
                    f"(leader epoch {newest}); this copy (epoch {leader_epoch}) is stale")
            self._leader_epochs[key] = leader_epoch
            await self._write(key, source_topic, letters, group_config, recovering)

    async def _write(self, key: ShareKey, source_topic: str, letters: Sequence[DeadLetter],
                     group_config: Mapping[str, str], recovering: bool) -> None:
        self._faults.hit(SHARE_DEAD_LETTER_BEFORE_WRITE)
        group_id, _topic_id, partition = key
        total = sum(x.last_offset - x.first_offset + 1 for x in letters)
        if recovering:
            # Until a read-back succeeds: a try cut off by anything (a connection to
            # the partition's leader reset, not only a Kafka error) leaves the next one
            # reading back too, never writing blind.
            self._uncertain.add(key)
        try:
            target = validate(group_id, group_config, self._image(), self._config)
            plog, dest = await self._destination(target, partition)
            pending = self._pending.get(key)
            if pending is not None:
                # The same batches again, same sequences: landed already (or landing
                # late), the leader answers them as duplicates; else they land now.
                at = await plog.append(pending[0], self._clock())
                del self._pending[key]
                await self._check_landed(plog, key, source_topic, pending[0], pending[1], at)
                self._done(key, pending[1])
                self.counts[(group_id, "written")] += len(pending[1])
            learn = self._producer_ids is not None and key not in self._producers
            if key in self._uncertain or learn:
                # Not only what this process sent: a loaded state's ARCHIVING records
                # may have been written before (a crash, or a leader copy that finished
                # them after this one read the state); and the producer id's sequence
                # continues from its last batch there.
                producer_id = self._producer_id(key)
                found, sequence = await self._already_written(plog, key, source_topic,
                                                              letters, producer_id)
                self._done(key, found)
                if learn:
                    self._producers[key] = [producer_id, sequence]
                self._uncertain.discard(key)
            done = self._written.get(key)
            todo = list(_minus(letters, done)) if done else list(letters)
            if not todo:
                return
            sources = await self._read_sources(source_topic, partition, todo) \
                if target.copy_record else {}
            records = list(dead_letter_records(group_id, source_topic, partition, todo,
                                               sources, self._clock()))
            max_bytes = LogConfig.resolve(self._config, self._image().resource_configs(
                TOPIC_RESOURCE, target.topic)).max_message_bytes
            producer_id, sequence = self._reserve(key, len(records))
            encoded = list(batches([r for _o, r in records], max_bytes, producer_id,
                                   sequence))
            offsets = [o for o, _r in records]
            # From here a failure of any kind leaves the outcome unknown (the leader may
            # have appended before its answer was lost): the next try sends the same
            # batches again or, without a producer id, reads back first.
            if producer_id >= 0:
                self._pending[key] = (encoded, offsets)
            else:
                self._uncertain.add(key)
            at = await plog.append(encoded, self._clock())
            self._pending.pop(key, None)
            await self._check_landed(plog, key, source_topic, encoded, offsets, at)
            self._uncertain.discard(key)
            self._lost.pop(key, None)
            self._done(key, offsets)
            self.counts[(group_id, "written")] += len(records)
            log.debug("%d dead letters of %s-%d (group %s) written to %s-%d", len(records),
                      source_topic, partition, group_id, target.topic, dest)
        except LogError as exc:
            if exc.code in _SEQUENCE_LOST:
                # Another process's write landed first (or the leader lost the
                # sequences): the next try reads back and continues from what is there.
                self._reset(key)
                self._uncertain.add(key)
                self._lost[key] += 1
                if self._lost[key] >= _LOST_BEFORE_FALLBACK and self._producer_ids:
                    # the leader holds sequences its log no longer shows (retention)
                    self._lost.pop(key, None)
                    self._fallback[key] = self._allocate()
                raise LogError(E.not_enough_replicas, exc.message) from exc
            if E(exc.code).retriable:
                # The dead-letter partition is moving, or its commit failed (perhaps
                # after all): raised, so the records stay ARCHIVING and are written at
                # the next try (the same batches again, or after a read-back).
                if key not in self._pending:
                    self._uncertain.add(key)
                raise
            self._reset(key)
            self._archive_without(group_id, source_topic, partition, total, exc.message)
            return
        except DeadLetterConfigError as exc:
            self._reset(key)
            self._archive_without(group_id, source_topic, partition, total, str(exc))
            return
        except BaseException:
            # Not a Kafka error (a connection to the partition's leader reset, the task
            # cancelled), at any step: unless the same batches are kept to be sent
            # again, the next try reads back first. After an append answered, a cut
            # read of `_check_landed` left the letters unrecorded while their
            # sequences were used: the next try wrote them again under the next ones
            # (a 2,000-second campaign found three letters written twice so).
            if key not in self._pending:
                self._uncertain.add(key)
            raise
        self._faults.hit(SHARE_DEAD_LETTER_AFTER_WRITE)

    async def _check_landed(self, plog: _Destination, key: ShareKey, source_topic: str,
                            encoded: Sequence[bytes], offsets: Sequence[int],
                            at: Sequence[int | None]) -> None:
        """The batches answered at `at` hold these letters, not another writer's under
        the same sequences (two processes of the share-partition, or one after a
        sequence was learnt again, can build different batches with the same sequence
        numbers: the leader answers the second as a duplicate of the first, and its
        letters would never be written: a 2,000-second campaign lost one so). Raises
        (retriable; the next try reads back and continues) when they are not."""
        group_id, _tid, partition = key
        mine = _context(key, source_topic)
        start = 0
        for batch, base in zip(encoded, at, strict=True):
            h = next(iter_batches(batch))[1]
            count = h.last_offset - h.base_offset + 1
            want = set(offsets[start:start + count])
            start += count
            if base is None:
                continue
            data = await plog.read(base, base + count)
            found = {o for pos, landed in iter_batches(data)
                     for o in _sources(memoryview(data)[pos:pos + landed.size], mine)}
            if found != want:
                self._reset(key)
                self._uncertain.add(key)
                raise LogError(E.not_enough_replicas,
                               f"dead letters of {source_topic}-{partition} (group "
                               f"{group_id}) answered as a duplicate of other letters at "
                               f"offset {base}: read back and written again")

    def _done(self, key: ShareKey, offsets: Iterable[int]) -> None:
        """`offsets` hold a dead letter now (looked up afresh: `finished` may have
        dropped the share-partition's set while a write was under way)."""
        self._written.setdefault(key, set()).update(offsets)

    def _producer_id(self, key: ShareKey) -> int:
        """The share-partition's producer id: its stable one, unless that was given up."""
        return self._fallback.get(key) or stable_producer_id(key)

    def _allocate(self) -> int:
        assert self._producer_ids is not None
        try:
            return self._producer_ids.allocate_producer_id()
        except NotReady as exc:
            raise LogError(exc.code, "no producer id for dead letters yet") from exc

    def _reserve(self, key: ShareKey, count: int) -> tuple[int, int]:
        """(producer id, first sequence) for the share-partition's next `count` dead
        letters, those sequences theirs from now on; (-1, -1) without producer ids (not
        idempotent). The entry was set by the read-back that learnt the sequence."""
        entry = self._producers.get(key)
        if self._producer_ids is None or entry is None:
            return -1, -1
        producer_id, sequence = entry
        entry[1] = (sequence + count) & _INT32_MAX
        return producer_id, sequence

    def _reset(self, key: ShareKey) -> None:
        """Its batches will never be sent again: the next write learns the producer's
        sequence afresh (from the dead-letter partition)."""
        self._pending.pop(key, None)
        self._producers.pop(key, None)

    def _archive_without(self, group_id: str, source_topic: str, partition: int,
                         total: int, message: str) -> None:
        """The topic refuses the dead letters for good: the records are archived
        without them (as in Kafka: an ARCHIVING record must not hold the SPSO back)."""
        log.warning("archiving %d records of %s-%d (group %s) without a dead letter: %s",
                    total, source_topic, partition, group_id, message)
        self.counts[(group_id, "failed")] += total

    def finished(self, key: ShareKey, letters: Iterable[DeadLetter]) -> None:
        """The ARCHIVED state of `letters` is persisted: forget their offsets."""
        done = self._written.get(key)
        if done is None:
            return
        for x in letters:
            done.difference_update(range(x.first_offset, x.last_offset + 1))
        if not done:
            del self._written[key]

    def forget(self, key: ShareKey) -> None:
        """The share-partition's state was reset or deleted: its offsets start over."""
        self._written.pop(key, None)
        lock = self._locks.get(key)
        if lock is not None and not lock.locked():
            del self._locks[key]
        self._uncertain.discard(key)
        self._lost.pop(key, None)
        self._fallback.pop(key, None)
        self._reset(key)

    # ---- helpers -------------------------------------------------------------------
    async def _destination(self, target: Target, partition: int) -> tuple[_Destination, int]:
        if not target.exists:
            await self._create(target.topic)
        topic = self._image().topic(target.topic)
        if topic is None or not topic.partitions:
            raise DeadLetterConfigError(f"DLQ topic {target.topic} could not be found.")
        dest = partition % len(topic.partitions)
        plog = await self._store.ready(target.topic, dest)  # a new topic: once served
        if plog is not None:
            return _Local(plog, self._store), dest
        if (self._remote is not None and self._store.absent_error(target.topic, dest)
                == E.not_leader_or_follower):  # another broker of the cluster leads it
            return _Remote(self._remote, target.topic, topic.topic_id, dest), dest
        raise DeadLetterConfigError(
            f"DLQ topic partition {target.topic}-{dest} could not be found.")

    async def _create(self, name: str) -> None:
        configs = {TOPIC_ENABLE: "true", "message.timestamp.type": "CreateTime"}
        if self._remote is not None and not self._remote.is_controller():
            # A cluster: the controller creates it (another broker), as for a client.
            code = await self._remote.create_topic(name, -1, configs)
            if code and code != int(E.topic_already_exists) \
                    and self._image().topic(name) is None:
                raise DeadLetterConfigError(f"Unable to create DLQ topic {name}: {code}")
        else:
            ((_t, err, _img),) = self._topics.create_topics([NewTopic(name, configs=configs)])
            if err is not None and self._image().topic(name) is None:
                raise DeadLetterConfigError(f"Unable to create DLQ topic {name}: {err}")
        log.info("created dead-letter topic %s", name)

    async def _already_written(self, plog: _Destination, key: ShareKey, source_topic: str,
                               letters: Sequence[DeadLetter], producer_id: int = -1
                               ) -> tuple[set[int], int]:
        """Offsets of `letters` that the dead-letter partition already holds a dead
        letter of (a crash came between the append and the ARCHIVED state write), and
        the sequence `producer_id`'s next batch there takes (0: none of its batches)."""
        sequence = 0
        want = {o for x in letters for o in range(x.first_offset, x.last_offset + 1)}
        mine = _context(key, source_topic)
        found: set[int] = set()
        offset, end = await plog.bounds()
        while offset < end:
            data = await plog.read(offset, end)
            if not data:
                break
            for pos, h in iter_batches(data):
                offset = h.last_offset + 1
                if h.producer_id == producer_id >= 0:
                    sequence = (h.last_sequence + 1) & _INT32_MAX
                found.update(want.intersection(
                    _sources(memoryview(data)[pos:pos + h.size], mine)))
        return found, sequence

    async def _read_sources(self, topic: str, partition: int,
                      letters: Sequence[DeadLetter]) -> dict[int, Any]:
        """The source records to copy, best effort: what the log still has."""
        plog = await self._store.ready(topic, partition)
        if plog is None:
            return {}
        want = {o for x in letters for o in range(x.first_offset, x.last_offset + 1)}
        out: dict[int, Any] = {}
        offset, last = max(min(want), plog.log_start_offset), max(want)
        while offset <= last:
            try:
                data = plog.read(offset, _READ_BYTES, plog.high_watermark)
            except LogError:
                break
            if not data:
                break
            for pos, h in iter_batches(data):
                offset = h.last_offset + 1
                if h.is_control:
                    continue
                for record in decode_records(memoryview(data)[pos:pos + h.size]):
                    if record.offset in want:
                        out[record.offset] = record
        return out


def _context(key: ShareKey, source_topic: str) -> dict[str, bytes]:
    """The headers naming a share-partition's dead letters."""
    group_id, _tid, partition = key
    return {HEADER_GROUP: group_id.encode(), HEADER_TOPIC: source_topic.encode(),
            HEADER_PARTITION: str(partition).encode()}


def _sources(batch: memoryview, mine: Mapping[str, bytes]) -> Iterator[int]:
    """The source offsets of the dead letters in `batch` whose headers are `mine`."""
    for record in decode_records(batch):
        headers = dict(record.headers)
        if all(headers.get(k) == v for k, v in mine.items()):
            try:
                yield int(headers.get(HEADER_OFFSET) or b"-1")
            except ValueError:
                continue


def _minus(letters: Iterable[DeadLetter], done: set[int]) -> Iterator[DeadLetter]:
    """`letters` without the offsets in `done`."""
    for x in letters:
        first = None
        for offset in range(x.first_offset, x.last_offset + 2):
            keep = offset <= x.last_offset and offset not in done
            if keep and first is None:
                first = offset
            elif not keep and first is not None:
                yield x._replace(first_offset=first, last_offset=offset - 1)
                first = None
