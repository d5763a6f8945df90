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

Each partition's shard is in one `ShardState` (Kafka's CoordinatorRuntime states:
INITIAL, LOADING, ACTIVE, FAILED, CLOSED, moves checked against `TRANSITIONS`), changed
on one path: elected (LOADING, then ACTIVE once replayed) and resigned (CLOSED). One node
elects itself for every shard at start. In a cluster (`follows`), a broker serves a shard
only while the shared log places its partition here: `take` elects it and it loads once
the store has taken the partition (COORDINATOR_LOAD_IN_PROGRESS meanwhile), `release`
resigns it (NOT_COORDINATOR) when the partition moves or its lease is lost. (With every
shard at the controller, `take_all` and `release_all`.) Appends there are durable only
once committed: every append asks for its commit, `settled` is what a response waits for,
and a failed commit drops the shard (FAILED) and loads it again from what was committed.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, cast

from kio.schema.errors import ErrorCode as E

from ..records.batch import BatchRecord, build_batch, decode_records, iter_batches
from ..records.control import parse_marker
from ..storage.errors import LogError
from .hashing import partition_for
from .record_codec import CoordinatorRecord, RecordCodec

if TYPE_CHECKING:
    from ..storage.partition import Partition
    from ..storage.store import PartitionSource

log = logging.getLogger("headwater.coordinator")

TAKE_RETRY_S = 0.2  # a partition the shared log has not handed over yet
#: A timer that fired while its shard, loaded here, could not serve (its lease renewed
#: late by this broker's clock) fires again after this long.
TIMER_RETRY_MS = 100


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

    def on_unloaded(self) -> None:
        """The shard is dropped (moved, or its records' commit failed): answer what it
        holds parked (NOT_COORDINATOR), as Kafka's onGroupUnloaded does; a client left
        waiting would time out and rejoin into a rebalance that waits for it."""

    def replay_end_transaction(self, producer_id: int, producer_epoch: int,
                               commit: bool, marker_offset: int) -> None:
        """A COMMIT (`commit`) or ABORT marker of `producer_id` landed in the partition
        at `marker_offset`: it ends what the producer wrote before it."""


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
                if self.runtime.holds(self.partition):
                    # loaded here, not serving this instant (its lease renewed late by
                    # this broker's clock): fired again soon, never dropped (a dropped
                    # expiry left a member, or a transaction's timeout, waiting for good)
                    self.schedule(key, TIMER_RETRY_MS, op)
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


class ShardPlacement(Protocol):
    """Where a cluster places a coordinator topic's shards (the shared log's store)."""

    def should_serve(self, topic: str, partition: int) -> bool:
        """This broker should serve the partition now."""
        ...

    def placed_here(self, topic: str, partition: int) -> bool:
        """`should_serve`, by a view fresh enough to claim it."""
        ...

    def follow_shards(self, topic: str, taken: Callable[[int], None],
                      lost: Callable[[int], None]) -> Callable[[], None]:
        """`taken(p)` when this broker takes a partition of `topic`, `lost(p)` when it
        loses it; the unsubscribe handle."""
        ...


class ClusterShards(NamedTuple):
    """A cluster's runtime (`follows`): with a `placement`, each shard is served where
    it places the shard's partition; without, every shard is with the controller
    (`take_all` when this broker takes the controller lease, `release_all` when it
    loses it)."""

    placement: ShardPlacement | None = None


class CoordinatorLogs(Protocol):
    """What the runtime uses of the storage seam."""

    def partition(self, topic: str, partition: int) -> Partition | None: ...

    async def ready(self, topic: str, partition: int) -> Partition | None: ...

    def commit(self, partitions: Iterable[Partition]) -> Awaitable[None] | None: ...


class ShardState(enum.Enum):
    """Where one partition's shard is on this broker: Kafka's CoordinatorRuntime states.

    INITIAL: never elected here. LOADING: elected, replaying its log (requests answer
    COORDINATOR_LOAD_IN_PROGRESS). ACTIVE: serving. FAILED: a commit of its records failed,
    the shard is dropped (loaded again at once if still elected). CLOSED: resigned (moved,
    its lease lost, the runtime stopped); NOT_COORDINATOR."""

    INITIAL = "initial"
    LOADING = "loading"
    ACTIVE = "active"
    FAILED = "failed"
    CLOSED = "closed"


#: The transitions allowed, as Kafka's `CoordinatorState.canTransitionFrom`.
TRANSITIONS: dict[ShardState, frozenset[ShardState]] = {
    ShardState.INITIAL: frozenset({ShardState.LOADING, ShardState.CLOSED}),
    ShardState.LOADING: frozenset({ShardState.ACTIVE, ShardState.FAILED, ShardState.CLOSED}),
    ShardState.ACTIVE: frozenset({ShardState.FAILED, ShardState.CLOSED}),
    ShardState.FAILED: frozenset({ShardState.LOADING, ShardState.CLOSED}),
    ShardState.CLOSED: frozenset({ShardState.LOADING}),
}


class IllegalTransition(RuntimeError):
    """A shard was asked to move where `TRANSITIONS` does not allow (a bug)."""


class _Slot:
    """One partition's shard here: its state, and what that state holds."""

    __slots__ = ("state", "shard", "timer", "loader")

    def __init__(self) -> None:
        self.state = ShardState.INITIAL
        self.shard: Shard | None = None  # set while ACTIVE
        self.timer: _LoopTimer | None = None  # set while ACTIVE
        self.loader: asyncio.Future[None] | None = None  # while LOADING (maybe shared)


class CoordinatorRuntime:
    """The shards of one internal topic. It reads and writes the topic's partitions
    through `partitions` (the storage seam), creates the topic through `topics`, and
    stamps records with `clock`.

    Each partition's shard moves through `ShardState` by one path: `_elect` (LOADING,
    then ACTIVE once replayed) and `_resign` (CLOSED); a failed commit is `_fail`. One
    node elects itself for every partition at start; a cluster's runtime (`follows`)
    elects a partition when the shared log hands it here (`take`, or `take_all` for
    every shard at the controller) and resigns when it moves (`release`,
    `release_all`)."""

    def __init__(self, topic: str, num_partitions: int, codec: RecordCodec,
                 shard_factory: Callable[[int, Timer], Shard],
                 topic_configs: dict[str, str], *, partitions: PartitionSource,
                 topics: InternalTopics, clock: Clock, load_delay_ms: int = 0,
                 after_write: Callable[[int], None] | None = None,
                 cluster: ClusterShards | None = None) -> None:
        self._partitions = partitions  # a CoordinatorLogs when `follows`
        self._topics = topics
        self._clock = clock
        self.topic = topic
        self.num_partitions = num_partitions
        self.codec = codec
        self.shard_factory = shard_factory
        self.topic_configs = topic_configs
        self.load_delay_ms = load_delay_ms
        self._slots: dict[int, _Slot] = {}
        self.load_times_ms: dict[int, float] = {}
        # Hook for the owning service: called with the partition after each write that
        # appended records.
        self.after_write = after_write
        # Called with the partition once it is loaded, in subscription order.
        self._load_subscribers: list[Callable[[int], None]] = []
        #: A cluster's runtime: shards follow the shared log's hand-overs (see module).
        self.follows = cluster is not None
        #: Whether this broker should still serve the partition (an elected partition
        #: whose loader finds it unwanted gives up: CLOSED). One node: every partition;
        #: a cluster's: none until the shared log hands it over.
        self._wanted: Callable[[int], bool] = lambda _p: not self.follows
        #: The placement puts the partition here now, by a fresh view.
        self._placed: Callable[[int], bool] = lambda _p: False
        #: The commits of appended records not landed yet, by partition (`settled`,
        #: `pending_commits`).
        self._unsettled_in: dict[int, set[asyncio.Future[None]]] = {}
        #: Commits of this runtime's records that failed, ever (the tests' witness).
        self.commit_failures = 0
        self._unfollow: Callable[[], None] = lambda: None
        placement = None if cluster is None else cluster.placement
        if placement is not None:
            self._wanted = functools.partial(placement.should_serve, topic)
            self._placed = functools.partial(placement.placed_here, topic)
            self._unfollow = placement.follow_shards(topic, self.take, self.release)

    # ---- states ----------------------------------------------------------------------
    def state(self, partition: int) -> ShardState:
        slot = self._slots.get(partition)
        return ShardState.INITIAL if slot is None else slot.state

    def _slot(self, partition: int) -> _Slot:
        slot = self._slots.get(partition)
        if slot is None:
            slot = self._slots[partition] = _Slot()
        return slot

    def _move(self, partition: int, to: ShardState) -> _Slot:
        slot = self._slot(partition)
        if to not in TRANSITIONS[slot.state]:
            raise IllegalTransition(f"{self.topic}-{partition}: {slot.state.value} -> "
                                    f"{to.value}")
        slot.state = to
        return slot

    def _elect(self, partitions: list[int], delay_ms: int = 0) -> None:
        """Serve `partitions` from now on: LOADING, replayed in order by one loader
        (after `delay_ms`, a test's knob), ACTIVE each once loaded. Those already
        LOADING or ACTIVE are left as they are."""
        todo = [p for p in partitions
                if self.state(p) not in (ShardState.LOADING, ShardState.ACTIVE)]
        if not todo:
            return
        for partition in todo:
            self._move(partition, ShardState.LOADING)
        loader = asyncio.ensure_future(
            self._load_when_taken(todo, delay_ms) if self.follows
            else self._load_in_order(todo, delay_ms))
        for partition in todo:
            self._slots[partition].loader = loader

    def _resign(self, partition: int) -> None:
        """Serve `partition` no more: its loader stops, its timers and shard are dropped
        (the shard answers what it holds parked), CLOSED."""
        slot = self._slots.get(partition)
        if slot is None or slot.state is ShardState.CLOSED:
            return
        loader, slot.loader = slot.loader, None
        if loader is not None and not any(s.loader is loader for s in self._slots.values()):
            loader.cancel()
        self._drop(slot)
        self._move(partition, ShardState.CLOSED)

    def _fail(self, partition: int) -> None:
        """Its records were not committed: drop the shard (FAILED), and load it again
        from what was committed if this broker still serves it, else CLOSED."""
        if self.state(partition) is ShardState.ACTIVE:
            self._drop(self._move(partition, ShardState.FAILED))
        if self._wanted(partition):
            self._elect([partition])
        elif self.state(partition) is ShardState.FAILED:
            self._move(partition, ShardState.CLOSED)

    def _drop(self, slot: _Slot) -> None:
        timer, slot.timer = slot.timer, None
        if timer is not None:
            timer.cancel_all()
        shard, slot.shard = slot.shard, None
        if shard is not None:
            shard.on_unloaded()

    # ---- lifecycle -----------------------------------------------------------------
    async def start(self) -> None:
        """Create the topic if missing (an existing one keeps its partition count); one
        node then elects itself for every partition."""
        self.num_partitions = self._topics.ensure_internal_topic(
            self.topic, self.num_partitions, self.topic_configs)
        if not self.follows:
            self._elect(list(range(self.num_partitions)), self.load_delay_ms)

    async def stop(self) -> None:
        self._unfollow()
        self.release_all()

    async def _load_in_order(self, partitions: list[int], delay_ms: int = 0) -> None:
        """One node's loader: each partition in turn, straight from its log."""
        if delay_ms:
            await asyncio.sleep(delay_ms / 1000)
        for partition in partitions:
            await self._load(partition)

    async def _load_all(self) -> None:
        """Load every partition now (tests build a runtime and load it this way)."""
        partitions = list(range(self.num_partitions))
        for partition in partitions:
            self._move(partition, ShardState.LOADING)
        await self._load_in_order(partitions)

    # ---- a cluster's shards ------------------------------------------------------------
    def take_all(self, wanted: Callable[[], bool]) -> None:
        """Serve every partition from now on, while `wanted()` holds: loaded in order
        (as on one node), each once the shared log has handed it to this broker."""
        self._wanted = lambda _p: wanted()
        self._elect(list(range(self.num_partitions)), self.load_delay_ms)

    def release_all(self) -> None:
        """Serve nothing any more (another broker took the coordinators over, or the
        runtime stops)."""
        if self.follows:
            self._wanted = lambda _p: False
        for partition in list(self._slots):
            self._resign(partition)

    def take(self, partition: int) -> None:
        """The shared log handed `partition` to this broker: load it (replay) once it
        is ready (after `load_delay_ms`, a test's knob), answering
        COORDINATOR_LOAD_IN_PROGRESS meanwhile."""
        if self._wanted(partition):
            self._elect([partition], self.load_delay_ms)

    def release(self, partition: int) -> None:
        """`partition` went to another broker (or this one lost it): drop its shard and
        timers; its groups answer NOT_COORDINATOR until it is taken again."""
        self._resign(partition)

    async def _load_when_taken(self, partitions: list[int], delay_ms: int = 0) -> None:
        if delay_ms:
            await asyncio.sleep(delay_ms / 1000)
        logs = cast(CoordinatorLogs, self._partitions)
        for partition in partitions:
            failures = 0
            try:
                while self._wanted(partition) and \
                        self._slots[partition].state is ShardState.LOADING:
                    try:
                        part = await logs.ready(self.topic, partition)
                    except Exception as exc:
                        # The store could not take it (PostgreSQL or the object store
                        # away) and logged why: a line here at the first failure, then
                        # about once a minute.
                        failures += 1
                        if failures % int(60 / TAKE_RETRY_S) == 1:
                            log.warning("loading %s-%d: not taken yet (%d in a row; trying "
                                        "again): %s: %s", self.topic, partition, failures,
                                        type(exc).__name__, exc)
                    else:
                        try:
                            if part is not None:
                                await self._load(partition)
                                break
                        except Exception:
                            log.exception("loading %s-%d failed (trying again)", self.topic,
                                          partition)
                    await asyncio.sleep(TAKE_RETRY_S)
            finally:
                slot = self._slots[partition]
                if slot.loader is asyncio.current_task():
                    slot.loader = None
                    if slot.state is ShardState.LOADING:  # no longer wanted here
                        self._move(partition, ShardState.CLOSED)

    def _settle(self, partition: int, part: Partition) -> asyncio.Future[None] | None:
        """Ask for the commit of what was just appended; a failed one rebuilds the
        shard from what was committed. The commit's future (None: nothing to wait
        for), which fails with the commit."""
        pending = cast(CoordinatorLogs, self._partitions).commit([part])
        if pending is None:
            return None
        future = asyncio.ensure_future(pending)
        mine = self._unsettled_in.setdefault(partition, set())
        mine.add(future)

        def done(f: asyncio.Future[None]) -> None:
            mine.discard(f)
            if f.cancelled() or f.exception() is None:
                return
            self.commit_failures += 1
            log.warning("%s-%d: records not committed (%s); loading it again", self.topic,
                        partition, f.exception())
            self._fail(partition)
        future.add_done_callback(done)
        return future

    def settled(self) -> Awaitable[None] | None:
        """Everything appended so far, committed (a cluster's coordinator answers once
        its records are); None when nothing waits. Raises the first failed commit's
        error."""
        pending = [f for futures in self._unsettled_in.values() for f in futures]
        return _all(pending) if pending else None

    async def _load(self, partition: int) -> None:
        """Replay the partition into a new shard and serve it."""
        start = time.monotonic()
        timer = _LoopTimer(self, partition)
        shard = self.shard_factory(partition, timer)
        count = 0
        for offset, pid, epoch, record in self._scan(partition):
            if isinstance(record, bool):
                shard.replay_end_transaction(pid, epoch, record, offset)
            else:
                shard.replay(offset, pid, epoch, record)
            count += 1
            if count % 5000 == 0:
                await asyncio.sleep(0)
        slot = self._slots[partition]
        if slot.state is not ShardState.LOADING:  # resigned while it was replayed
            timer.cancel_all()
            return
        slot.shard, slot.timer, slot.loader = shard, timer, None
        self._move(partition, ShardState.ACTIVE)
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
        """No shard is LOADING (on one node: every partition has been loaded)."""
        if any(slot.state is ShardState.LOADING for slot in self._slots.values()):
            return False
        return self.follows or all(p in self._slots for p in range(self.num_partitions))

    def holds(self, partition: int) -> bool:
        """The shard is loaded here (ACTIVE), whether or not it can serve this instant
        (its partition's lease may have run out by this broker's clock until it is
        renewed): work owed by it is tried again rather than forgotten."""
        return self.state(partition) is ShardState.ACTIVE

    def timer(self, partition: int) -> Timer | None:
        """The timer of an ACTIVE shard (its timers die with it)."""
        slot = self._slots.get(partition)
        return None if slot is None else slot.timer

    def shard(self, partition: int) -> Shard:
        slot = self._slots.get(partition)
        state = ShardState.INITIAL if slot is None else slot.state
        if state is ShardState.LOADING or (state is ShardState.INITIAL and not self.follows):
            raise NotReady(E.coordinator_load_in_progress)  # one node: not loaded yet
        shard = None if slot is None else slot.shard
        if shard is None or self._partitions.partition(self.topic, partition) is None:
            # the second: the store no longer serves the shard's partition (on the shared
            # log, a lease this broker's clock says may have run out): its state may be
            # behind another broker's by now
            if self.follows and self._placed(partition):
                # A cluster's shard the shared log places here (by a fresh view) that
                # cannot serve this instant: not taken yet (a broker that just joined,
                # or whose predecessor is still handing it over), or taken and its
                # lease renewed late by this broker's clock (a starved event loop, a
                # slow database). FindCoordinator names this broker either way, so
                # the client waits and asks again here, as during a load: nothing is
                # served meanwhile, and a lease lost for good drops the shard, which
                # then answers NOT_COORDINATOR. NOT_COORDINATOR now would send it back
                # to FindCoordinator, and librdkafka's committed() fails on it (a CI
                # run of make test-cluster, 2026-12-01).
                raise NotReady(E.coordinator_load_in_progress)
            raise NotReady(E.not_coordinator)
        return shard

    def shards(self) -> list[Shard]:
        """The ACTIVE shards, by partition."""
        return [slot.shard for _p, slot in sorted(self._slots.items())
                if slot.shard is not None]

    def read(self, partition: int, fn: Callable[[Any], Any]) -> Any:
        return fn(self.shard(partition))

    async def read_committed(self, partition: int, fn: Callable[[Any], Any]) -> Any:
        """`read`, answered once the records it read are committed: on the shared log a
        shard holds an append before its commit window lands, and a window that fails
        rebuilds the shard without it (answered at once, a read could show an offset
        that then vanishes). Kafka reads at the last committed offset; here the read
        waits for what was pending when it read. A failed commit raises its LogError."""
        response = fn(self.shard(partition))
        pending = self.pending_commits(partition)
        if pending is not None:
            await pending
        return response

    def pending_commits(self, partition: int) -> Awaitable[None] | None:
        """The commits of what was appended to `partition` so far (None when none
        waits); raises the first failed one's LogError."""
        pending = self._unsettled_in.get(partition)
        return _all(list(pending)) if pending else None

    def write(self, partition: int, op: Callable[[Any, int], Result], producer_id: int = -1,
              producer_epoch: int = -1, transactional: bool = False) -> Any:
        """Run `op`, append its records as one batch, replay them, return the response.
        With a producer id the batch carries it (and the transactional bit if asked);
        the log may then refuse it with a LogError (a fenced epoch, say), which
        propagates and leaves the shard unchanged."""
        result, _committed = self._apply(partition, op, producer_id, producer_epoch,
                                         transactional)
        return result.response

    async def write_committed(self, partition: int, op: Callable[[Any, int], Result]) -> Any:
        """`write`, answered once its own records are committed, as Kafka's runtime
        completes a write operation at the high watermark: on the shared log once the
        commit window holding them lands, on one node once flushed as the flush policy
        asks. A failed commit raises its LogError (the shard is rebuilt from what was
        committed, without them). An operation that wrote nothing is answered once the
        records it read are committed (on the shared log; at once when none wait)."""
        result, committed = self._apply(partition, op)
        if committed is not None:
            await asyncio.shield(committed)
        elif not result.records:  # what it read, committed
            pending = self.pending_commits(partition)
            if pending is not None:
                await pending
        elif not self.follows:  # one node: flushed as its flush policy asks
            flushed = cast(CoordinatorLogs, self._partitions).commit([self._log(partition)])
            if flushed is not None:
                await flushed
        return result.response

    def _apply(self, partition: int, op: Callable[[Any, int], Result],
               producer_id: int = -1, producer_epoch: int = -1, transactional: bool = False
               ) -> tuple[Result, asyncio.Future[None] | None]:
        """Run `op`, append and replay its records: (its result, on the shared log the
        commit of those records)."""
        shard = self.shard(partition)
        now = self._clock()
        result = op(shard, now)
        if not result.records:
            return result, None
        committed = self.append(partition, shard, result.records, now, producer_id,
                                producer_epoch, transactional)
        self._notify(self.after_write, partition)
        return result, committed

    def write_marker(self, partition: int, producer_id: int, producer_epoch: int,
                     commit: bool, coordinator_epoch: int,
                     transaction_version: int = 0) -> int:
        """Append a COMMIT/ABORT marker ending `producer_id`'s transaction on `partition`
        and replay it into the shard; returns its offset. NotReady while loading (the
        loader would miss it), LogError if the log refuses it."""
        shard = self.shard(partition)
        part = self._log(partition)
        offset = part.append_marker(producer_id, producer_epoch, commit, coordinator_epoch,
                                    self._clock(), transaction_version)
        shard.replay_end_transaction(producer_id, producer_epoch, commit, offset)
        if self.follows:
            self._settle(partition, part)
        return offset

    def replay_marker(self, partition: int, producer_id: int, producer_epoch: int,
                      commit: bool, marker_offset: int) -> None:
        """Replay a marker appended at `marker_offset` of `partition`'s log without the
        runtime (a cluster's markers committed together: shared/marker_holds.py). A
        shard still loading replays it from the log."""
        slot = self._slots.get(partition)
        shard = None if slot is None else slot.shard
        if shard is None:  # not ACTIVE: one LOADING replays it from the log
            return
        # Into the shard held here even while it cannot serve this instant (its lease
        # renewed late): the marker is committed. Dropped, a transaction's offsets
        # stayed pending until the shard was loaded again.
        shard.replay_end_transaction(producer_id, producer_epoch, commit, marker_offset)

    def append(self, partition: int, shard: Shard, records: list[CoordinatorRecord],
               now: int, producer_id: int = -1, producer_epoch: int = -1,
               transactional: bool = False) -> asyncio.Future[None] | None:
        """Append `records` as one batch and replay them into `shard`; on the shared log,
        the future of their commit (`_settle`)."""
        entries: list[BatchRecord] = []
        for record in records:
            key, value = self.codec.encode(record)
            entries.append((key, value, [], now))
        data = build_batch(entries, producer_id=producer_id, producer_epoch=producer_epoch,
                           is_transactional=transactional)
        part = self._log(partition)
        result = part.append(data, now, origin_client=False)
        for i, record in enumerate(records):
            shard.replay(result.base_offset + i, producer_id, producer_epoch, record)
        return self._settle(partition, part) if self.follows else None


async def _all(futures: list[asyncio.Future[None]]) -> None:
    for future in futures:
        await asyncio.shield(future)


async def landed(pending: Iterable[Awaitable[None] | None]) -> bool:
    """True once every commit waited for (`pending_commits`, None: nothing waits)
    landed; False when one failed (the shard is rebuilt without its records)."""
    try:
        for future in pending:
            if future is not None:
                await future
    except LogError:
        return False
    return True
