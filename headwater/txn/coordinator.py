"""The transaction coordinator service: `__transaction_state` shards on the runtime, and
the marker writer.

Handlers call the operations below with a transactional id; the id picks the partition
(Kafka's hash) and so the shard. After every write to a shard (a client request, the
timeout timer) and once a shard is loaded, `_drive` looks at the transactions the shard
reports in PrepareCommit/PrepareAbort and carries them out: a COMMIT/ABORT marker on
every partition of the transaction — through the group coordinator's runtime for a
`__consumer_offsets` partition, so the pending offsets are resolved by the same marker —
and then the Complete* record. All of it runs synchronously on the event loop, so an
EndTxn is answered after its markers are written; a partition that cannot take a marker
yet (a `__consumer_offsets` shard still loading) is retried shortly after, and a restart
finds the Prepare* record and finishes the job.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from kio.schema.errors import ErrorCode as E

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
from ..faults import TXN_AFTER_PREPARE, Faults
from ..metadata.events import ImageSource
from ..storage.errors import CommitError, LogError
from .config import TxnConfig
from .records import CODEC
from .shard import EndResult, InitResult, MarkerJob, TxnShard
from .state import TxnState

if TYPE_CHECKING:
    from ..storage.store import PartitionStore

log = logging.getLogger("headwater.txn")

_T = TypeVar("_T")

TOPIC = "__transaction_state"
OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_KEY_TYPE = 1
RETRIABLE_MARKER_ERRORS = frozenset({
    E.not_leader_or_follower, E.coordinator_load_in_progress, E.coordinator_not_available,
    E.not_coordinator, E.kafka_storage_error,
    E.request_timed_out})  # the marker's commit outcome unknown: write it again (harmless)
RETRY_DELAY_S = 0.1
#: At most this long for one attempt at a transaction's markers written together.
TOGETHER_TIMEOUT_S = 30.0
SLOW_MARKERS_S = 10.0  # how often a job whose markers keep being refused is logged

TopicPartition = tuple[str, int]


class ProducerIds(Protocol):
    """Hands out producer ids (the controller's block of them on one node; in a cluster
    this broker's, `producer_id_blocks.py`): NotReady while none is available."""

    def allocate_producer_id(self) -> int: ...


class MarkerWriter(Protocol):
    """Writes a transaction marker on a `__consumer_offsets` partition (the group
    coordinator's runtime: the marker resolves the shard's pending offsets)."""

    def write_marker(self, partition: int, producer_id: int, producer_epoch: int,
                     commit: bool, coordinator_epoch: int,
                     transaction_version: int = 0) -> int: ...

    def settled(self) -> Awaitable[None] | None:
        """What the runtime appended so far, committed (None: nothing waits)."""
        ...


class RemoteMarkers(Protocol):
    """In a cluster, a marker for a partition another broker serves goes to that broker
    (WriteTxnMarkers, as Kafka's coordinator sends it)."""

    def send(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
             commit: bool, coordinator_epoch: int,
             transaction_version: int) -> Awaitable[int] | None:
        """The partition's error code once its leader has the marker durably; None when
        no other live broker serves the partition."""
        ...

    def write_together(self, partitions: Sequence[TopicPartition], producer_id: int,
                       producer_epoch: int, commit: bool, coordinator_epoch: int,
                       transaction_version: int) -> Awaitable[dict[TopicPartition, int]]:
        """The markers of several partitions (wherever served) committed at once: per
        partition 0, a retriable code (nothing was committed) or a code that ends it."""
        ...


class TransactionCoordinator:
    def __init__(self, config: BrokerConfig, *, image: ImageSource,
                 partitions: PartitionStore, topics: InternalTopics, clock: Clock,
                 producer_ids: ProducerIds, offsets: MarkerWriter,
                 faults: Faults | None = None,
                 remote_markers: RemoteMarkers | None = None,
                 cluster: ClusterShards | None = None) -> None:
        self.config = TxnConfig.from_broker(config)
        self._faults = faults if faults is not None else Faults()  # test-only (faults.py)
        self._image = image
        self._partitions = partitions
        self._clock = clock
        self._producer_ids = producer_ids
        self._offsets = offsets
        self._remote = remote_markers
        # Markers whose commit (or leader's answer) is awaited, per (job, partition).
        self._inflight: dict[tuple[tuple[str, int, int], TopicPartition],
                             asyncio.Future[int]] = {}
        #: Jobs whose markers were refused: (first refusal, last logged), monotonic.
        self._slow: dict[tuple[str, int, int], tuple[float, float]] = {}
        # Per job, its markers being written together (a cluster's): the attempt, and
        # the job's `__transaction_state` partition.
        self._together: dict[tuple[str, int, int],
                             tuple[asyncio.Future[dict[TopicPartition, int]], int]] = {}
        # The job whose markers are held (or being held) on a partition, until it ends.
        self._claims: dict[TopicPartition, tuple[tuple[str, int, int], int]] = {}

        def factory(partition: int, timer: Timer) -> TxnShard:
            return TxnShard(partition, timer, self.config, producer_ids.allocate_producer_id)

        self.runtime = CoordinatorRuntime(
            TOPIC, self.config.num_partitions, CODEC, factory,
            {"cleanup.policy": "compact", "segment.bytes": str(self.config.segment_bytes)},
            partitions=partitions, topics=topics, clock=clock,
            load_delay_ms=self.config.load_delay_ms, after_write=self._drive_committed,
            cluster=cluster)
        self.runtime.subscribe_load(self._loaded)
        self._driving = False
        self._again: set[int] = set()
        self._retries: dict[int, asyncio.TimerHandle] = {}
        # Partitions already marked per (txn id, producer id, epoch): a retried job does
        # not write a second marker where the first one landed.
        self._marked: dict[tuple[str, int, int], set[TopicPartition]] = {}
        # EndTxn answers waiting for their transaction's markers, per transactional id.
        self._completions: dict[str, list[asyncio.Future[None]]] = {}

    async def start(self) -> None:
        await self.runtime.start()

    async def stop(self) -> None:
        for handle in self._retries.values():
            handle.cancel()
        self._retries.clear()
        pending: list[asyncio.Future[Any]] = [*self._inflight.values(),
                                              *(f for f, _p in self._together.values())]
        for future in pending:
            future.cancel()
        self._inflight.clear()
        self._together.clear()
        self._claims.clear()
        self._release_completions()
        await self.runtime.stop()

    # ---- operations (NotReady propagates: the handler answers with its code) -------
    def partition_for(self, txn_id: str) -> int:
        return self.runtime.partition_for(txn_id)

    def _write(self, txn_id: str, op: Callable[[TxnShard, int], Result]) -> Any:
        return self.runtime.write(self.partition_for(txn_id), op)

    def pending_commits(self, txn_id: str | None = None) -> Awaitable[None] | None:
        """The commits of what `txn_id`'s partition (every partition: None) was appended
        so far, None when none waits (one node); raises a failed one's LogError. A
        handler takes them right after its operation and answers once they land
        (`api/committed.py`)."""
        if txn_id is None:
            return self.runtime.settled()
        return self.runtime.pending_commits(self.partition_for(txn_id))

    def _read(self, txn_id: str, fn: Callable[[TxnShard], _T]) -> _T:
        value: _T = self.runtime.read(self.partition_for(txn_id), fn)
        return value

    def init_producer_id(self, txn_id: str, timeout_ms: int,
                         expected: tuple[int, int] | None) -> InitResult:
        result: InitResult = self._write(
            txn_id, lambda s, now: s.init_producer_id(txn_id, timeout_ms, expected, now))
        return result

    def add_partitions(self, txn_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition], client_tv: int = 0) -> int:
        parts = list(partitions)
        code: int = self._write(txn_id, lambda s, now: s.add_partitions(
            txn_id, producer_id, producer_epoch, parts, now, client_tv))
        return code

    def verify_partitions(self, txn_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        parts = list(partitions)
        return self._read(txn_id, lambda s: s.verify_partitions(
            txn_id, producer_id, producer_epoch, parts))

    def end_txn(self, txn_id: str, producer_id: int, producer_epoch: int,
                commit: bool, client_tv: int = 0) -> EndResult:
        result: EndResult = self._write(txn_id, lambda s, now: s.end_txn(
            txn_id, producer_id, producer_epoch, commit, now, client_tv))
        return result

    def completion(self, txn_id: str) -> Awaitable[None] | None:
        """None once `txn_id`'s transaction is not being completed; else a future that
        resolves when its markers are all written and its Complete* record is applied
        (or when this coordinator stops). The caller bounds the wait: a shard that moves
        away leaves it unresolved, and the next coordinator finishes the job.

        EndTxn waits for it, so that when the client hears "committed" the markers are
        there — the transactional offsets in their group coordinator included — and
        its next EndTxn finds the transaction complete. On one node the markers are
        written before EndTxn returns anyway; across brokers they are a round trip and
        a PostgreSQL transaction away, and a client that ended its next (empty)
        transaction meanwhile met PRODUCER_FENCED (a Prepare* state accepts only the
        retry's epoch, as in Kafka): franz-go's GroupTransactSession did, constantly."""
        try:
            state = self._read(txn_id, lambda s: s.txns.get(txn_id))
        except NotReady:
            return None
        if state is None or not state.state.is_prepare:
            return None
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiting = [f for f in self._completions.get(txn_id, ()) if not f.done()]
        self._completions[txn_id] = [*waiting, future]  # a timed-out wait was cancelled
        return future

    def _complete_waiters(self, txn_id: str) -> None:
        for future in self._completions.pop(txn_id, ()):
            if not future.done():
                future.set_result(None)

    def _release_completions(self) -> None:
        for txn_id in list(self._completions):
            self._complete_waiters(txn_id)

    def describe(self, txn_id: str) -> dict[str, Any]:
        return self._read(txn_id, lambda s: s.describe(txn_id))

    def list_transactions(self, states: set[TxnState], producer_ids: set[int],
                          min_duration_ms: int, pattern: str | None) -> list[dict[str, Any]]:
        """Across all shards; NotReady(COORDINATOR_LOAD_IN_PROGRESS) while any loads."""
        if not self.runtime.is_loaded():
            raise NotReady(E.coordinator_load_in_progress)
        now = self._clock()
        out: list[dict[str, Any]] = []
        for shard in self.runtime.shards():
            assert isinstance(shard, TxnShard)
            out += shard.list_transactions(states, producer_ids, min_duration_ms, pattern, now)
        return out

    # ---- markers -------------------------------------------------------------------
    async def write_marker(self, topic: str, partition: int, producer_id: int,
                           producer_epoch: int, commit: bool, coordinator_epoch: int,
                           transaction_version: int = 0) -> int:
        """Append one COMMIT/ABORT marker; 0 or a Kafka error code once it is committed.
        The path of WriteTxnMarkers (another broker's coordinator, or an operator
        aborting a hanging transaction). A `transaction_version` 2 marker must carry an
        epoch above the producer's on the partition (the coordinator bumped it)."""
        outcome = self._append_marker(topic, partition, producer_id, producer_epoch, commit,
                                      coordinator_epoch, transaction_version)
        return outcome if isinstance(outcome, int) else await _commit_code(outcome)

    def _append_marker(self, topic: str, partition: int, producer_id: int,
                       producer_epoch: int, commit: bool, coordinator_epoch: int,
                       transaction_version: int) -> int | Awaitable[None]:
        """Append the marker here: an error code, 0, or the commit to await."""
        try:
            if topic == OFFSETS_TOPIC:
                self._offsets.write_marker(partition, producer_id, producer_epoch,
                                           commit, coordinator_epoch, transaction_version)
                pending = self._offsets.settled()
                return 0 if pending is None else pending
            # Never the metadata log: Broker.partition does not return it (a marker there
            # once kept the broker from starting; found by fuzzing).
            plog = self._partitions.partition(topic, partition)
            if plog is None:
                # A partition the image has but the store does not serve yet (the shared
                # log takes partitions in the background): try again, as for a leader
                # that moved; one the image lacks was deleted.
                return E.not_leader_or_follower if self._known(topic, partition) \
                    else E.unknown_topic_or_partition
            plog.append_marker(producer_id, producer_epoch, commit, coordinator_epoch,
                               self._clock(), transaction_version)
            pending = self._partitions.commit([plog])
            return 0 if pending is None else pending
        except NotReady as exc:
            return exc.code
        except LogError as exc:
            return exc.code

    def _known(self, topic: str, partition: int) -> bool:
        image_topic = self._image().topic(topic)
        return image_topic is not None and 0 <= partition < len(image_topic.partitions)

    def _start_marker(self, topic: str, partition: int, job: MarkerJob,
                      coordinator_epoch: int) -> int | Awaitable[int]:
        """A marker of `job`: here (an error code, or its commit to await), or sent to
        the broker serving the partition."""
        if (self._remote is not None
                and self._partitions.partition(topic, partition) is None
                and self._known(topic, partition)):
            sent = self._remote.send(topic, partition, job.producer_id, job.producer_epoch,
                                     job.commit, coordinator_epoch, job.transaction_version)
            if sent is not None:
                return sent
        outcome = self._append_marker(topic, partition, job.producer_id, job.producer_epoch,
                                      job.commit, coordinator_epoch, job.transaction_version)
        return outcome if isinstance(outcome, int) else _commit_code(outcome)

    def coordinator_epoch(self, partition: int) -> int:
        """The leader epoch of the `__transaction_state` partition (Kafka's coordinator
        epoch, which markers carry)."""
        topic = self._image().topic(TOPIC)
        if topic is not None:
            for p in topic.partitions:
                if p.partition_id == partition:
                    return p.leader_epoch
        return 0

    def _drive_committed(self, partition: int) -> None:
        """`_drive` once what was just written is committed: a Prepare* record's
        markers must never be written before it is durable (on the shared log a
        commit can fail, and the shard is then rebuilt without it: its load drives
        what it finds)."""
        pending = self.runtime.settled()
        if pending is None:
            self._drive(partition)
            return
        future = asyncio.ensure_future(pending)
        future.add_done_callback(
            lambda f: None if f.cancelled() or f.exception() is not None
            else self._drive(partition))

    def _drive(self, partition: int) -> None:
        """Write the markers owed by `partition`'s Prepare* transactions, then their
        Complete* records. Re-entrant calls (the Complete* write itself) are queued."""
        if self._driving:
            self._again.add(partition)
            return
        self._driving = True
        try:
            todo = {partition}
            while todo:
                self._complete_pending(todo.pop())
                todo |= self._again
                self._again.clear()
        finally:
            self._driving = False

    def _complete_pending(self, partition: int) -> None:
        try:
            shard = self.runtime.shard(partition)
        except NotReady:
            if self.runtime.holds(partition):
                # Loaded here but not serving this instant (its lease renewed late by
                # this broker's clock): tried again. Dropped, the markers of its
                # Prepare* transactions were never written and the transactions stayed
                # open for good, though committed (make chaos-short in CI: 100 "lost").
                # A shard released or reloaded is driven by its next load.
                self._retry(partition)
            return
        assert isinstance(shard, TxnShard)
        jobs = shard.pending_markers()
        if jobs and self._faults.armed(TXN_AFTER_PREPARE):
            self._faults.hit(TXN_AFTER_PREPARE, "before writing the markers of "
                             + ", ".join(j.transactional_id for j in jobs))
        epoch = self.coordinator_epoch(partition)
        for job in jobs:
            if self._write_markers(job, epoch, partition):
                self._marked.pop(_job_key(job), None)
                self._slow.pop(_job_key(job), None)
                self._unclaim(_job_key(job))
                def complete(s: TxnShard, now: int, job: MarkerJob = job) -> Result:
                    return s.complete(job, now)
                self.runtime.write(partition, complete)
                self._complete_waiters(job.transactional_id)
            else:
                self._retry(partition)

    def _write_markers(self, job: MarkerJob, coordinator_epoch: int,
                       txn_partition: int) -> bool:
        """True when every partition of `job` has its marker, committed. A marker being
        committed, or sent to another broker, is waited for: its outcome drives
        `txn_partition` again."""
        key = _job_key(job)
        done = self._marked.setdefault(key, set())
        data = sorted(job.partitions - done)
        if self._remote is not None and len(data) > 1:
            # In a cluster, every marker (transactional offset commits' too) in one
            # PostgreSQL transaction: a transaction is visible everywhere or nowhere.
            codes = self._together_outcome(key, data, job, coordinator_epoch,
                                           txn_partition)
            if codes is None:
                return False
            # A `__consumer_offsets` marker among them is replayed into the shard by its
            # owner, with the marker's offset (SharedStore.on_marker).
            if not all([self._settle(job, tp, c, done) for tp, c in codes.items()]):
                return False
        complete = True
        for tp in sorted(job.partitions - done):
            outcome = self._marker_outcome(key, tp, job, coordinator_epoch, txn_partition)
            if not self._settle(job, tp, outcome, done):
                complete = False
        return complete

    def _unclaim(self, key: tuple[str, int, int]) -> None:
        for tp in [tp for tp, (k, _p) in self._claims.items() if k == key]:
            del self._claims[tp]

    def _loaded(self, partition: int) -> None:
        """A shard (re)loaded: its jobs start afresh, without the claims of an earlier
        ownership."""
        for tp in [tp for tp, (_k, p) in self._claims.items() if p == partition]:
            del self._claims[tp]
        for key in [k for k, (_f, p) in self._together.items() if p == partition]:
            # an attempt of the earlier ownership: the job starts afresh (its holds, if
            # granted, answer at once)
            self._together.pop(key)[0].cancel()
        self._drive(partition)

    def _settle(self, job: MarkerJob, tp: TopicPartition, code: int | None,
                done: set[TopicPartition]) -> bool:
        """Record a marker's outcome; False while it must be written (again)."""
        if code is None or code in RETRIABLE_MARKER_ERRORS:
            return False
        if code == E.unknown_topic_or_partition and self._known(*tp):
            # The partition's owner does not know it yet (a broker just started, its
            # image behind): written again, as Kafka retries it. Skipped, the partition
            # kept the transaction open for good, and read_committed consumers stopped
            # there (the short campaign in CI: 10,314 "lost", 204 torn). Only a topic
            # this coordinator's image lacks (deleted) takes no marker.
            return False
        if code and code != E.unknown_topic_or_partition:
            # A fenced epoch: nothing can be written there any more; don't hang on it.
            log.warning("%s marker of %s (producer %d epoch %d) refused by %s-%d: "
                        "error %d", "COMMIT" if job.commit else "ABORT",
                        job.transactional_id, job.producer_id, job.producer_epoch,
                        *tp, code)
        done.add(tp)
        return True

    def _together_outcome(self, key: tuple[str, int, int], data: list[TopicPartition],
                          job: MarkerJob, coordinator_epoch: int, txn_partition: int
                          ) -> dict[TopicPartition, int] | None:
        """The codes of `data`'s markers written together, or None while awaited."""
        assert self._remote is not None
        self._drop_stale_claims(data)
        claimed = {self._claims.setdefault(tp, (key, txn_partition))[0] for tp in data}
        if claimed != {key}:
            # Another transaction's markers are held on one of these partitions: after
            # it (one held marker per partition; two jobs each holding one the other
            # wants would wait for each other).
            self._retry(txn_partition)
            for tp in data:
                if self._claims.get(tp) == (key, txn_partition):
                    del self._claims[tp]
            return None
        attempt = self._together.get(key)
        if attempt is not None:
            future = attempt[0]
            if not future.done():
                return None
            del self._together[key]
            codes: dict[TopicPartition, int]
            if future.cancelled() or future.exception() is not None:
                codes = dict.fromkeys(data, int(E.kafka_storage_error))
            else:
                codes = future.result()
            self._report_slow(key, job, codes)
            return codes
        # Bounded: an attempt that hangs (a hold whose partition never commits what lies
        # below the marker, a connection that stopped answering) would keep the job, and
        # every InitProducerId of its transactional id (CONCURRENT_TRANSACTIONS), waiting
        # for good, its partitions open to read_committed consumers (the fault campaign).
        # Holds already granted stay, and answer the next attempt at once.
        future = asyncio.ensure_future(asyncio.wait_for(self._remote.write_together(
            data, job.producer_id, job.producer_epoch, job.commit, coordinator_epoch,
            job.transaction_version), TOGETHER_TIMEOUT_S))
        self._together[key] = (future, txn_partition)
        future.add_done_callback(lambda _f: self._drive(txn_partition))
        return None

    def _report_slow(self, key: tuple[str, int, int], job: MarkerJob,
                     codes: dict[TopicPartition, int]) -> None:
        """Logs, every `SLOW_MARKERS_S`, a job whose markers keep being refused: which
        partitions answered what (a transaction stuck in Prepare* is otherwise silent,
        its producer only told CONCURRENT_TRANSACTIONS)."""
        now = time.monotonic()
        if all(code == 0 for code in codes.values()):
            self._slow.pop(key, None)
            return
        first, logged = self._slow.setdefault(key, (now, now))
        if now - logged >= SLOW_MARKERS_S:
            self._slow[key] = (first, now)
            log.info("%s markers of %r (producer %d epoch %d) not all written after %.0f s: "
                     "%s", "COMMIT" if job.commit else "ABORT", job.transactional_id,
                     job.producer_id, job.producer_epoch, now - first,
                     ", ".join(f"{t}-{p}: {c}" for (t, p), c in sorted(codes.items())))

    def _drop_stale_claims(self, data: list[TopicPartition]) -> None:
        """Claims of jobs whose `__transaction_state` shard this broker no longer
        serves (it moved away while their markers were being written): nobody here will
        finish them, and the broker that took the shard asks for the holds again. Kept,
        they stopped every later job on these partitions for good (seen in the fault
        campaign: a copier's InitProducerId answered CONCURRENT_TRANSACTIONS for
        minutes after PostgreSQL was restarted)."""
        for tp in data:
            claim = self._claims.get(tp)
            if claim is None:
                continue
            try:
                self.runtime.shard(claim[1])
            except NotReady:
                del self._claims[tp]
                self._together.pop(claim[0], None)

    def _marker_outcome(self, key: tuple[str, int, int], tp: TopicPartition, job: MarkerJob,
                        coordinator_epoch: int, txn_partition: int) -> int | None:
        """The marker's error code (0: written and committed), or None while awaited."""
        future = self._inflight.get((key, tp))
        if future is not None:
            if not future.done():
                return None
            del self._inflight[(key, tp)]
            if future.cancelled() or future.exception() is not None:
                return E.kafka_storage_error
            return future.result()
        outcome = self._start_marker(*tp, job, coordinator_epoch)
        if isinstance(outcome, int):
            return outcome
        future = asyncio.ensure_future(outcome)
        self._inflight[(key, tp)] = future
        future.add_done_callback(lambda _f: self._drive(txn_partition))
        return None

    def _retry(self, partition: int) -> None:
        if partition in self._retries:
            return
        loop = asyncio.get_running_loop()

        def fire() -> None:
            self._retries.pop(partition, None)
            self._drive(partition)

        self._retries[partition] = loop.call_later(RETRY_DELAY_S, fire)


def _job_key(job: MarkerJob) -> tuple[str, int, int]:
    return job.transactional_id, job.producer_id, job.producer_epoch


async def _commit_code(pending: Awaitable[None]) -> int:
    """0 once a marker's commit lands; the commit's error code if it fails."""
    try:
        await pending
    except CommitError as exc:
        return exc.code
    return 0
