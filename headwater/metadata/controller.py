"""The controller: turns admin operations into metadata records and commits them.

Every change is validated against the current image, written as records to the
`__cluster_metadata` log (fsynced: metadata is small and precious), then applied to
produce the next image, which listeners receive. A restart loads the newest valid
snapshot (`snapshot.py`) and replays the log after it; a snapshot is written at a
committed offset, never inside a metadata transaction, after
`metadata.log.max.record.bytes.between.snapshots` bytes of records or
`metadata.log.max.snapshot.interval.ms`, and the log segments no kept snapshot needs are
deleted.
Operations that need more records than fit one batch are wrapped in
Begin/EndTransactionRecord (KIP-868) so they become visible all at once; a
transaction left open by a crash is rolled back on load.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kio.schema.errors import ErrorCode as E

from ..config import BrokerConfig, ConfigError, validate_topic_config
from ..faults import METADATA_AFTER_BEGIN, Faults
from ..log.partition_log import PartitionLog
from ..records.batch import BatchRecord, batches_end_offset, build_batch, iter_batches
from ..storage.errors import LogError
from . import codec, snapshot
from . import records as R
from .assignments import assignment_error, spread
from .events import Listener
from .image import TOPIC_RESOURCE, MetadataImage, TopicImage
from .replay import Replay, read_batches
from .topics import collision_key, topic_name_error

log = logging.getLogger("headwater.controller")


PRODUCER_ID_BLOCK = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
MAX_PRODUCER_ID = (1 << 63) - 1
RECORDS_PER_BATCH = 500
MAX_PARTITIONS = 100_000
METADATA_TOPIC = "__cluster_metadata"
# Kafka's QuorumController.MAX_RECORDS_PER_USER_OP: one admin request may not make more
# metadata records than this (a CreateTopics of 10,000+ partitions is refused whole).
MAX_RECORDS_PER_USER_OP = 10_000
EXCESSIVE_BATCH = "Unable to perform excessively large batch operation."

SnapshotRunner = Callable[[Callable[[], Path], Callable[[BaseException | None], None]], None]
_MARKERS = (R.BeginTransactionRecord, R.EndTransactionRecord, R.AbortTransactionRecord)


class ControllerError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class NewTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: Mapping[int, tuple[int, ...]] | None = None
    configs: Mapping[str, str | None] | None = None


class Controller:
    def __init__(self, metadata_log: PartitionLog, config: BrokerConfig,
                 now_ms: Callable[[], int], faults: Faults | None = None, *,
                 max_partitions: int = MAX_PARTITIONS,
                 snapshot_runner: SnapshotRunner | None = None,
                 brokers: Callable[[], Collection[int]] | None = None,
                 writer_check: Callable[[], None] | None = None,
                 written: Callable[[], None] | None = None) -> None:
        self.log = metadata_log
        self.config = config
        self.faults = faults if faults is not None else Faults()  # test-only (faults.py)
        self.node_id = config.get_int("node.id")
        self.now_ms = now_ms
        # The registered (live) brokers' ids, which replica lists may name: this one alone
        # on one node, every live broker of the shared log.
        self.brokers = brokers if brokers is not None else lambda: (self.node_id,)
        self.image = MetadataImage()
        self._listeners: list[Listener] = []
        self._pid_next = 0
        self._pid_end = 0
        # Partitions this broker can hold open (headwater/limits.py).
        self.max_partitions = max_partitions
        # A metadata transaction whose Begin is in the log and whose end is not yet.
        self._open_transaction = False
        self._abort_reason: str | None = None  # an abort still owed to the log
        # Snapshots: bytes of records appended since the last one, and when it was made.
        self.snapshot_bytes = config.get_int("metadata.log.max.record.bytes.between.snapshots")
        self.snapshot_interval_ms = config.get_int("metadata.log.max.snapshot.interval.ms")
        self._bytes_since_snapshot = 0
        self._last_snapshot_ms = now_ms()
        self._last_append_ms = -1
        self._snapshot_in_flight = False
        # Runs a snapshot's encoding and writing off the controller's thread, then calls
        # back (on it) with the error or None; the broker's is its executor. None: in line.
        self.snapshot_runner = snapshot_runner
        # The shared log (None on one node): `writer_check` raises NOT_CONTROLLER on a
        # broker that does not hold the controller lease; `written` is told after every
        # append, so the records are committed to the shared log. A broker that does not
        # write follows (`follow`) what the controller committed; `_following` holds the
        # replay of its log, a metadata transaction included until it ends.
        self.writer_check = writer_check
        self.written = written
        self._following: Replay | None = None

    def partition_count(self) -> int:
        return sum(len(t.partitions) for t in self.image.topics_by_name.values())

    def _check_capacity(self, current: int, adding: int) -> None:
        if current + adding > self.max_partitions:
            raise ControllerError(
                E.policy_violation,
                f"Adding {adding} partitions would exceed this broker's limit of "
                f"{self.max_partitions} partitions (it has {current}); "
                "headwater.max.partitions sets it")

    # ---- loading -------------------------------------------------------------------
    def load(self) -> None:
        """Load the newest valid snapshot, then replay the log after it (with no
        snapshot, all of it); a transaction the log leaves open is rolled back."""
        directory = self.log.path
        snapshot.remove_partials(directory)
        start, end = self.log.log_start_offset, self.log.log_end_offset
        base = MetadataImage()
        offset = start
        loaded = snapshot.load_latest(directory, end, start)
        if loaded is not None:
            snapshot_id, records = loaded
            base = snapshot.image_of(records, snapshot_id)
            offset = snapshot_id.offset
            log.info("metadata snapshot %s loaded (%d records)", snapshot_id.name, len(records))
        elif start > 0:
            raise RuntimeError(
                f"the metadata log {directory} starts at offset {start} and no readable "
                "snapshot covers the records before it; restore a snapshot (.checkpoint) "
                "from a backup")
        state = Replay()
        replayed = 0
        while offset < end:
            data = self.log.read(offset, 1 << 20)
            if not data:
                break
            replayed += len(data)
            for rec_offset, item in read_batches(data):
                if rec_offset >= offset:  # a read may begin before the snapshot's offset
                    state.add(rec_offset, item)
            following = batches_end_offset(data)
            if following <= offset:
                break
            offset = following
        committed, last = state.committed, state.last_offset
        self.image = base.apply(committed, last if last >= 0 else base.offset)
        self._bytes_since_snapshot = replayed
        state.committed = []
        self._following = state
        if self.writer_check is None:  # one node: this broker writes from now on
            self._take_over(state)
        log.info("metadata loaded: %d topics, next producer id block at %d",
                 len(self.image.topics_by_name), self.image.next_producer_id)
        self.maybe_snapshot()  # a long tail (e.g. a log from before snapshots): now

    def _take_over(self, state: Replay) -> None:
        """Become the writer: a new log begins with metadata.version (as Kafka's), a
        transaction the log leaves open is rolled back, producer ids continue after the
        last block."""
        self._following = None
        if state.last_offset < 0 and self.log.log_end_offset == 0:
            first = [R.FeatureLevelRecord("metadata.version", R.METADATA_VERSION)]
            self.image = self.image.apply(first, self._write(first))
        if state.pending is not None:
            log.warning("rolling back a metadata transaction left open (%d records)",
                        len(state.pending))
            self._abort_reason = "open at startup"
            self._finish_abort()
        self._pid_next = self._pid_end = self.image.next_producer_id

    # ---- the shared log ------------------------------------------------------------
    def activate(self) -> None:
        """This broker took the controller lease (and has followed the log to its end)."""
        assert self._following is not None, "activate() a following controller"
        self._take_over(self._following)

    def follow(self, data: bytes) -> None:
        """Apply batches the controller committed to the shared log: appended to the
        local log at their offsets, published as far as they complete (a metadata
        transaction when its EndTransactionRecord arrives)."""
        state = self._following
        assert state is not None, "follow() on the writing controller"
        for chunk in segment_sized(data, self.log.config.segment_bytes):
            self.log.append(chunk, self.now_ms(), origin_client=False)
        self._bytes_since_snapshot += len(data)
        for offset, item in read_batches(data):
            state.add(offset, item)
        records, state.committed = state.committed, []
        old = self.image
        self.image = old.apply(records, state.last_offset)
        if records:
            for listener in tuple(self._listeners):
                listener(old, self.image)
        self.maybe_snapshot()

    def reload(self, metadata_log: PartitionLog) -> None:
        """Start again from `metadata_log` (the shared log's, downloaded anew): this
        broker lost the controller lease, or its appends were not committed. Listeners
        see the change from the image it had to the one the log gives."""
        old = self.image
        self.log = metadata_log
        self._open_transaction = False
        self._abort_reason = None
        self._snapshot_in_flight = False
        self.load()
        for listener in tuple(self._listeners):
            listener(old, self.image)

    # ---- snapshots -----------------------------------------------------------------
    def maybe_snapshot(self) -> Path | None:
        """Start a snapshot if one is due: new records since the last, the byte or time
        threshold passed, none in flight, and no metadata transaction open (the log's
        end is then a committed offset that the image reflects). In line (returning its
        path) unless `snapshot_runner` takes the writing elsewhere."""
        following_open = self._following is not None and self._following.pending is not None
        if (self._bytes_since_snapshot == 0 or self._open_transaction or following_open
                or self._abort_reason is not None or self._snapshot_in_flight):
            return None
        elapsed = self.now_ms() - self._last_snapshot_ms
        if (self._bytes_since_snapshot < self.snapshot_bytes
                and not (self.snapshot_interval_ms > 0
                         and elapsed >= self.snapshot_interval_ms)):
            return None
        if self.snapshot_runner is None:
            try:
                return self.write_snapshot()
            except (OSError, LogError) as exc:  # the log still has everything: retry
                log.error("metadata snapshot failed: %s", exc)
                self._last_snapshot_ms = self.now_ms()
                return None
        snapshot_id, job = self._snapshot_job()
        owed = self._bytes_since_snapshot
        self._bytes_since_snapshot = 0  # appends from now on count toward the next one
        self._snapshot_in_flight = True

        def done(error: BaseException | None) -> None:
            self._snapshot_in_flight = False
            if error is not None:
                log.error("metadata snapshot %s failed: %s", snapshot_id.name, error)
                self._bytes_since_snapshot += owed
                return
            try:
                self._snapshot_written(snapshot_id)
            except (OSError, LogError) as exc:
                log.error("metadata log not trimmed after snapshot %s: %s",
                          snapshot_id.name, exc)
        self.snapshot_runner(job, done)
        return None

    def write_snapshot(self) -> Path:
        """Snapshot the image at the log's end now, keep the newest snapshots, and delete
        the log segments that lie wholly before the oldest one kept."""
        if self._open_transaction or self._abort_reason is not None:
            raise ControllerError(E.invalid_request, "a metadata transaction is open")
        snapshot_id, job = self._snapshot_job()
        path = job()
        self._bytes_since_snapshot = 0
        self._snapshot_written(snapshot_id)
        return path

    def _snapshot_job(self) -> tuple[snapshot.SnapshotId, Callable[[], Path]]:
        """The snapshot of the image as it is now: its id, and the (thread-safe: the
        image is immutable) work of encoding and writing it."""
        directory, image = self.log.path, self.image
        snapshot_id = snapshot.SnapshotId(self.log.log_end_offset, snapshot.EPOCH)
        now = self.now_ms()
        last_ts = self._last_append_ms if self._last_append_ms >= 0 else now
        self._last_snapshot_ms = now

        def job() -> Path:
            return snapshot.write(directory, snapshot.image_records(image), snapshot_id,
                                  last_ts, now)
        return snapshot_id, job

    def _snapshot_written(self, snapshot_id: snapshot.SnapshotId) -> None:
        oldest = snapshot.prune(self.log.path)
        if oldest is not None and oldest.offset > self.log.log_start_offset:
            self.log.delete_records_before(oldest.offset)
        log.info("metadata snapshot %s written; metadata log starts at %d",
                 snapshot_id.name, self.log.log_start_offset)

    # ---- committing ----------------------------------------------------------------
    def _write(self, records: Sequence[object]) -> int:
        """Append `records` (a metadata transaction when they need several batches) and
        fsync; the offset of the last. If an append fails once the BeginTransaction batch
        is in the log, an AbortTransactionRecord is written before anything else, so
        later changes are never read as part of the failed transaction; until it is
        written, every write is refused (KAFKA_STORAGE_ERROR) and retries it first."""
        if any(isinstance(r, _MARKERS) for r in records):
            raise ControllerError(E.invalid_request, "metadata transactions are the "
                                  "controller's own: one at a time, never nested")
        if self.writer_check is not None:
            self.writer_check()
        self._finish_abort()
        now = self.now_ms()
        chunks = [records[i:i + RECORDS_PER_BATCH]
                  for i in range(0, len(records), RECORDS_PER_BATCH)]
        if len(chunks) > 1:
            chunks[0] = [R.BeginTransactionRecord(), *chunks[0]]
            chunks[-1] = [*chunks[-1], R.EndTransactionRecord()]
        last = -1
        try:
            for i, chunk in enumerate(chunks):
                if i == 1:
                    self.faults.hit(METADATA_AFTER_BEGIN)
                last = self._append(chunk, now)
                if i == 0 and len(chunks) > 1:
                    self._open_transaction = True
            self.log.flush()
        except (LogError, OSError) as exc:
            reason = f"append failed: {exc}"
            log.error("metadata write failed (%s)", reason)
            if self._open_transaction:
                self._abort_reason = reason
                self._finish_abort()
            raise ControllerError(E.kafka_storage_error,
                                  f"The metadata log refused the change: {exc}") from exc
        self._open_transaction = False
        if self.written is not None:
            self.written()
        return last

    def _append(self, chunk: Sequence[object], now: int) -> int:
        entries: list[BatchRecord] = []
        for rec in chunk:
            key, value = codec.encode(rec)
            entries.append((key, value, [], now))
        batch = build_batch(entries)
        last = self.log.append(batch, now).last_offset
        self._bytes_since_snapshot += len(batch)
        self._last_append_ms = now
        return last

    def _finish_abort(self) -> None:
        """Write the AbortTransactionRecord a failed transaction still owes the log;
        ControllerError (KAFKA_STORAGE_ERROR) while it cannot be written."""
        if self._abort_reason is None:
            return
        try:
            self._append([R.AbortTransactionRecord(self._abort_reason)], self.now_ms())
            self.log.flush()
        except (LogError, OSError) as exc:
            raise ControllerError(
                E.kafka_storage_error, "metadata writes are refused until the failed "
                f"transaction's abort is in the log: {exc}") from exc
        if self.written is not None:
            self.written()
        log.warning("metadata transaction aborted in the log (%s)", self._abort_reason)
        self._abort_reason = None
        self._open_transaction = False

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call `listener(old, new)` after every committed change, in subscription
        order; returns the unsubscribe handle."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def commit(self, records: Sequence[object]) -> None:
        if not records:
            return
        last = self._write(records)
        old = self.image
        self.image = old.apply(records, last)
        for listener in tuple(self._listeners):
            listener(old, self.image)
        self.maybe_snapshot()

    # ---- topics --------------------------------------------------------------------
    def _validate_new_topic(self, t: NewTopic, pending_names: set[str],  # noqa: C901
                            allow_internal: bool) -> tuple[int, int]:
        err = topic_name_error(t.name)
        if err:
            raise ControllerError(E.invalid_topic_exception, err)
        if t.name == METADATA_TOPIC:  # its log is the controller's; a client's
            # records there would be replayed as metadata at the next start
            raise ControllerError(E.invalid_request,
                                  f"Creation of internal topic {METADATA_TOPIC} is prohibited.")
        if t.name in self.image.topics_by_name or t.name in pending_names:
            raise ControllerError(E.topic_already_exists, f"Topic '{t.name}' already exists.")
        key = collision_key(t.name)
        for other in [*self.image.topics_by_name, *pending_names]:
            if collision_key(other) == key:
                raise ControllerError(
                    E.invalid_topic_exception,
                    f"Topic '{t.name}' collides with existing topic: {other}")
        if t.assignments:
            if t.num_partitions != -1 or t.replication_factor != -1:
                raise ControllerError(E.invalid_request, "Both numPartitions or "
                                      "replicationFactor and replicasAssignments were set. "
                                      "Both cannot be used at the same time.")
            ids = sorted(t.assignments)
            if ids != list(range(len(ids))):
                raise ControllerError(E.invalid_replica_assignment,
                                      "Partitions must be numbered 0..n-1 without gaps")
            self._check_assignments(list(t.assignments.values()))
            partitions, rf = len(ids), len(t.assignments[0])
        else:
            partitions = t.num_partitions
            if partitions == -1:
                partitions = self.config.get_int("num.partitions")
            if partitions <= 0:
                raise ControllerError(E.invalid_partitions, "Number of partitions was set to "
                                      "an invalid non-positive value.")
            if partitions > MAX_PARTITIONS:
                raise ControllerError(E.invalid_partitions,
                                      "Number of partitions must be larger than 0.")
            rf = t.replication_factor
            if rf == -1:
                rf = self.config.get_int("default.replication.factor")
            if rf <= 0:
                raise ControllerError(E.invalid_replication_factor,
                                      "Replication factor must be larger than 0.")
            live = len(self.brokers())
            if rf > live:
                raise ControllerError(
                    E.invalid_replication_factor,
                    f"Unable to replicate the partition {rf} time(s): The target "
                    "replication factor of "
                    f"{rf} cannot be reached because only {live} broker(s) are registered "
                    "or some brokers have all their log directories cordoned.")
        for key_, value in (t.configs or {}).items():
            try:
                validate_topic_config(key_, value)
            except ConfigError as exc:
                raise ControllerError(E.invalid_config, str(exc)) from None
        return partitions, rf

    def _check_assignments(self, assignments: list[tuple[int, ...]]) -> None:
        """Kafka's checks of manual replica lists: registered brokers, each once, and
        the same replication factor for every partition."""
        registered = set(self.brokers())
        for replicas in assignments:
            message = assignment_error(tuple(replicas), (), registered, True)
            if message is not None:
                raise ControllerError(E.invalid_replica_assignment, message)
        if len({len(r) for r in assignments}) > 1:
            raise ControllerError(E.invalid_replica_assignment,
                                  "All partitions should have the same number of replicas")

    def _replicas(self, partition: int, rf: int,
                  assignment: tuple[int, ...] | None) -> tuple[int, ...]:
        return tuple(assignment) if assignment else spread(partition, rf, self.brokers())

    def ensure_internal_topic(self, name: str, num_partitions: int,
                              configs: Mapping[str, str]) -> int:
        """A coordinator's internal topic, created with `num_partitions` if missing;
        returns its partition count (an existing topic keeps its own)."""
        topic = self.image.topic(name)
        if topic is not None:
            return len(topic.partitions)
        (_, err, _), = self.create_topics(
            [NewTopic(name, num_partitions, 1, None, configs)], allow_internal=True)
        if err is not None:
            raise RuntimeError(f"cannot create {name}: {err.message}")
        return num_partitions

    def create_topics(self, topics: Iterable[NewTopic], validate_only: bool = False,
                      allow_internal: bool = False
                      ) -> list[tuple[NewTopic, ControllerError | None, TopicImage | None]]:
        """Create each topic independently; returns (topic, error, image) per request."""
        results: list[tuple[NewTopic, ControllerError | None, str | None]] = []
        records: list[object] = []
        pending: set[str] = set()
        held = self.partition_count()
        size = 0  # the records this request makes, counted even when only validating
        for t in topics:
            try:
                partitions, rf = self._validate_new_topic(t, pending, allow_internal)
                if not allow_internal:  # the broker's own topics must exist to start at all
                    self._check_capacity(held, partitions)
            except ControllerError as exc:
                results.append((t, exc, None))
                continue
            held += partitions
            pending.add(t.name)
            topic_id = R.new_topic_id()
            results.append((t, None, topic_id))
            size += 1 + partitions + sum(v is not None for v in (t.configs or {}).values())
            if validate_only or size > MAX_RECORDS_PER_USER_OP:
                continue
            records.append(R.TopicRecord(t.name, topic_id))
            for p in range(partitions):
                replicas = self._replicas(p, rf, (t.assignments or {}).get(p))
                records.append(R.PartitionRecord(topic_id, p, replicas, replicas,
                                                 replicas[0]))
            for key_, value in (t.configs or {}).items():
                if value is not None:
                    records.append(R.ConfigRecord(TOPIC_RESOURCE, t.name, key_, value))
        if size > MAX_RECORDS_PER_USER_OP:  # Kafka refuses the whole request
            too_large = ControllerError(E.policy_violation, EXCESSIVE_BATCH)
            return [(t, err or too_large, None) for t, err, _ in results]
        try:
            self.commit(records)
        except ControllerError as exc:  # the log refused it: every topic gets the error
            return [(t, err or exc, None) for t, err, _ in results]
        out = []
        for t, err, tid in results:
            image = None
            if err is None:
                image = (self.image.topic_by_id(uuid.UUID(tid)) if not validate_only
                         else TopicImage(t.name, uuid.UUID(tid)))
            out.append((t, err, image))
        return out

    def delete_topics(self, topics: Iterable[TopicImage]) -> None:
        self.commit([R.RemoveTopicRecord(str(t.topic_id)) for t in topics])

    def create_partitions(self, name: str, count: int,
                          assignments: list[tuple[int, ...]] | None,
                          validate_only: bool = False) -> None:
        topic = self.image.topic(name)
        if topic is None:
            raise ControllerError(E.unknown_topic_or_partition,
                                  f"This server does not host this topic: {name}")
        current = len(topic.partitions)
        if count < current:
            raise ControllerError(E.invalid_partitions,
                                  f"Topic currently has {current} partitions, which is higher "
                                  f"than the requested {count}.")
        if count == current:
            raise ControllerError(E.invalid_partitions,
                                  f"Topic already has {current} partitions.")
        if count > MAX_PARTITIONS:
            raise ControllerError(E.invalid_partitions, "Too many partitions")
        if count - current > MAX_RECORDS_PER_USER_OP:
            raise ControllerError(E.policy_violation, EXCESSIVE_BATCH)
        self._check_capacity(self.partition_count(), count - current)
        if assignments is not None:
            if len(assignments) != count - current:
                raise ControllerError(
                    E.invalid_replica_assignment,
                    f"Increasing the number of partitions by {count - current} but "
                    f"{len(assignments)} assignments provided.")
            self._check_assignments(assignments)
        if validate_only:
            return
        rf = max(len(topic.partitions[0].replicas), 1) if topic.partitions else 1
        rf = min(rf, len(self.brokers()))
        records = []
        for p in range(current, count):
            replicas = self._replicas(p, rf, None if assignments is None
                                      else assignments[p - current])
            records.append(R.PartitionRecord(str(topic.topic_id), p, replicas, replicas,
                                             replicas[0]))
        self.commit(records)

    # ---- configs -------------------------------------------------------------------
    def config_records(self, resource_type: int, name: str,
                       changes: Mapping[str, str | None]) -> list[object]:
        return [R.ConfigRecord(resource_type, name, k, v) for k, v in changes.items()]

    # ---- producer ids --------------------------------------------------------------
    def allocate_producer_ids(self, broker_id: int, broker_epoch: int = -1,
                              count: int = PRODUCER_ID_BLOCK) -> tuple[int, int]:
        """Commit the next block of producer ids for `broker_id` (Kafka's
        ProducerIdControlManager, KIP-730): (first id, length). The block continues from
        the image's next_producer_id, which every committed block advanced, whichever
        controller committed it. On the shared log the block may be used only once it is
        durable (`SharedMetadata.durable`): a block lost with its controller is then
        never handed out."""
        start = self.image.next_producer_id
        if start > MAX_PRODUCER_ID - count:
            raise ControllerError(E.unknown_server_error,
                                  "Exhausted all producerIds as the next block's end "
                                  f"would exceed {MAX_PRODUCER_ID}")
        self.commit([R.ProducerIdsRecord(broker_id, broker_epoch, start + count)])
        return start, count

    def allocate_producer_id(self) -> int:
        """One node: the next producer id of this broker's block, a new block committed
        (in line: the local log is fsynced) when one runs out. A broker of a cluster
        takes its blocks through AllocateProducerIds instead (txn/producer_id_blocks.py)."""
        if self._pid_next >= self._pid_end:
            start, length = self.allocate_producer_ids(self.node_id, 0)
            self._pid_next, self._pid_end = start, start + length
        pid = self._pid_next
        self._pid_next += 1
        return pid


def segment_sized(data: bytes, segment_bytes: int) -> Iterable[bytes]:
    """`data`'s whole batches in runs that each fit a segment: a follower receives at once
    what the controller appended one change at a time (three brokers registering
    together), and one append larger than segment.bytes is refused as Kafka refuses it."""
    start = end = 0
    for pos, h in iter_batches(data):
        if pos + h.size - start > segment_bytes and end > start:
            yield data[start:end]
            start = end
        end = pos + h.size
    if end > start:
        yield data[start:end]
