"""`PartitionStore` on the shared log: the partitions this broker holds the lease of,
each materialised in a local `PartitionLog` (a cache, rebuilt from PostgreSQL and the
object store whenever the partition is taken over), committed in windows.

* **Taking a partition** (`ensure`, in the background; `ready` awaits it; `taking.py`): take its
  lease with a new epoch, stamp that epoch on its row, download its batches (object
  ranges or inline bytes, in offset order) into one segment file of a fresh cache
  directory, and open it as a `PartitionLog`: the local engine's recovery rebuilds its
  indexes, producer state and aborted-transaction index from the batches, so idempotence
  and transactions behave as on one node.
* **Appending** is the local log's (`SharedPartition.append`: validation, idempotence,
  offsets from the log end); nothing is visible yet: `high_watermark` is the committed
  offset, and reads, the last stable offset and append subscribers stop there.
* **Committing** (`commit`; the windows are `committer.py`'s): every partition with
  uncommitted appends goes into the next commit window. A partition that is not
  committed (fenced, stale, or any failure: the outcome may be unknown) is dropped and
  taken again from what PostgreSQL holds, and its waiting `commit`s fail with
  `CommitError`, so nothing uncommitted is acknowledged and a retry is checked against
  what really committed.
* Leases are renewed every third of their time; a lost lease drops the partition.
* **Placement** (`placement.py`): the store registers the broker with a heartbeat and
  refreshes its view of the cluster; it takes the partitions placed here, and hands over
  (commits, then releases the lease) those another live broker should own, telling the
  partitions' followers (`Ownership`). A partition served elsewhere answers
  NOT_LEADER_OR_FOLLOWER.

* **Retention** (`cleanup.policy` with `delete`), by the partition's owner every
  `retention_check_ms`: the new log start is computed from the batch rows (the first
  batch newer than `retention.ms`; the first of the newest `retention.bytes`), moved
  locally as DeleteRecords moves it, and committed with the next window, fenced by the
  lease like an append; the commit deletes the rows before it (the cleaner, their
  objects).

* **Compaction and merging** (`upkeep.py`), by the partition's owner every
  `log.cleaner.backoff.ms`: the local engine's cleaner on the cached log, and small
  window objects rewritten into objects of the partition's own; both swap a committed
  range's rows, fenced by the lease.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import asyncpg
from kio.schema.errors import ErrorCode as E

from ..config import LogConfig
from ..storage.errors import CommitError
from ..storage.partition import Partition
from . import cluster, leases
from .cluster import BrokerInfo, ClusterView
from .committer import WindowCommitter
from .database import OUTAGES, DatabaseUnavailable, open_pool
from .marker_holds import MarkerHolds
from .objects import ObjectStore, ObjectStoreUnavailable
from .partition import Hold, SharedPartition
from .placement import Key, Ownership, Placement
from .sequencer import Outcome
from .settings import SharedSettings
from .taking import Taken, download, materialise, take
from .tasks import cancel_and_wait
from .upkeep import Upkeep, UpkeepSettings

log = logging.getLogger("headwater.shared")

LOAD_RETRY_S = 1.0  # a partition that could not be taken (a store down) is tried again
#: A partition failing to be taken again and again is logged at its first failure and then
#: every this many (a minute at LOAD_RETRY_S), not every second: a store down for a while
#: would otherwise log a line per partition per second.
LOG_EVERY_FAILURES = 60
TAKE_BATCH = 256  # partitions taken in one transaction
TAKE_TIMEOUT_S = 10.0  # a take's transaction, at most (then tried again)


class SharedStore:
    def __init__(self, settings: SharedSettings, node_id: int, cache_dir: Path,
                 now_ms: Callable[[], int], *, linger_ms: int = 2, lease_ms: int = 10_000,
                 listed_ms: int = 9_000,
                 reserved: Iterable[str] = (), advertised: BrokerInfo | None = None,
                 inline_max_bytes: int = 0, retention_check_ms: int = 300_000,
                 upkeep: UpkeepSettings | None = None,
                 on_marker: Callable[[str, int, int, int, bool, int], None] | None = None,
                 with_controller: Iterable[str] = (),
                 controller_active: Callable[[], bool] = lambda: False,
                 topic_size: Callable[[uuid.UUID], int | None] = lambda _topic_id: None
                 ) -> None:
        self.settings = settings
        self.node_id = node_id
        self._ids: dict[Key, uuid.UUID] = {}
        #: Where each partition should be served (`with_controller`: the topics placed
        #: with the controller, served here while `controller_active()`).
        self.placement = Placement(
            node_id, advertised or BrokerInfo(node_id, "127.0.0.1", 0), lease_ms=lease_ms,
            listed_ms=listed_ms, topic_id=self._ids.get, with_controller=with_controller,
            controller_active=controller_active, topic_size=topic_size)
        #: The coordinator runtimes following their topics' partitions here.
        self.ownership = Ownership()
        self.cache_dir = cache_dir
        self._now_ms = now_ms
        self.lease_ms = lease_ms
        self._lease_s = self.placement.lease_s
        self.retention_check_s = retention_check_ms / 1000
        self._reserved = frozenset(reserved)
        self._pool: asyncpg.Pool | None = None
        self.objects = ObjectStore(settings)
        self.upkeep = Upkeep(upkeep or UpkeepSettings(), self.objects,
                             lambda: self.pool.acquire(), now_ms)
        self._owned: dict[Key, SharedPartition] = {}
        self._loading: dict[Key, asyncio.Future[SharedPartition | None]] = {}
        #: Partitions taken and still being materialised: their leases are renewed
        #: meanwhile (a download may take longer than a lease).
        self._opening: dict[Key, _Opening] = {}
        self._to_take: list[Key] = []
        self._take_failures: dict[Key, int] = {}  # failed takes in a row, for the log
        self._retries: dict[Key, asyncio.TimerHandle] = {}  # a failed take's next try
        self._failed_in_batch: set[Key] = set()  # their batch's failure is logged
        self._take_wanted = asyncio.Event()
        self._configs: dict[Key, LogConfig] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[object]] = set()
        self.committer = WindowCommitter(
            lambda: self.pool.acquire(), self.objects, self._owned.values, self._drop,
            self._spawn, now_ms, linger_ms=linger_ms, inline_max_bytes=inline_max_bytes)
        self.holds = MarkerHolds(lambda: self.pool, settings.database, self.committer.wake,
                                 self._drop, self._serves, 2 * lease_ms,
                                 self._marker_committed)
        #: Told (topic, partition, producer id, epoch, commit, marker offset) of each
        #: held marker committed: a coordinator topic's runtime replays it.
        self.on_marker = on_marker

    async def open(self, wait_s: float = 0.0, register: bool = True) -> None:
        """Connect (and migrate) the database, probe the object store, empty the cache,
        register this broker (unless `register=False`: the broker does once it has
        joined). Either engine unreachable: tried again every second for `wait_s`
        seconds (a broker starting during a database restart or an object-store
        outage), a line each try, then the last error (it names the setting)."""
        deadline = time.monotonic() + wait_s  # one budget for both, as documented
        self._pool = await _waiting(lambda: open_pool(self.settings, lease_ms=self.lease_ms),
                                    deadline)
        try:
            await _waiting(self.objects.check, deadline)
        except BaseException:
            await self._pool.close()
            raise
        shutil.rmtree(self.cache_dir, ignore_errors=True)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        await self.refresh_view(register)
        await self.holds.listen()
        self._tasks.append(asyncio.create_task(self._taker()))  # takes from now on

    @property
    def view(self) -> ClusterView:
        """The cluster as of the last refresh (every quarter of the lease time)."""
        return self.placement.view

    @property
    def advertised(self) -> BrokerInfo:
        """Where clients reach this broker, as registered in `brokers`."""
        return self.placement.advertised

    @property
    def refresh_s(self) -> float:
        return self.placement.refresh_s

    async def refresh_view(self, register: bool = True) -> ClusterView:
        """Heartbeat (register this broker), then read the cluster's state (only read
        it with `register=False`: `Placement.refresh`)."""
        async with self.pool.acquire() as conn:
            return await self.placement.refresh(conn, register)

    def _should_own(self, key: Key) -> bool:
        return self.placement.should_own(key)

    def follow_shards(self, topic: str, taken: Callable[[int], None],
                      lost: Callable[[int], None]) -> Callable[[], None]:
        """A coordinator runtime follows `topic`'s partitions (`Ownership.follow`); the
        unsubscribe handle."""
        return self.ownership.follow(topic, taken, lost, [*self._owned, *self._loading])

    def should_serve(self, topic: str, partition: int) -> bool:
        """This broker is the one that should serve the partition now."""
        return (topic, partition) in self._configs and self._should_own((topic, partition))

    def placed_here(self, topic: str, partition: int) -> bool:
        """`should_serve`, by a view read within the lease time (a broker cut off from
        PostgreSQL does not go on claiming what its last view placed on it)."""
        return self.placement.fresh() and self.should_serve(topic, partition)

    def rebalance(self) -> None:
        """Take and hand over partitions now rather than at the next refresh."""
        self._balance()

    @property
    def pool(self) -> asyncpg.Pool:
        assert self._pool is not None, "SharedStore.open() first"
        return self._pool

    # ---- PartitionSource / PartitionStore ----------------------------------------------
    def partition(self, topic: str, partition: int) -> SharedPartition | None:
        """The partition if this broker serves it: its lease is held, as far as this
        broker's own clock can tell. A broker paused (SIGSTOP, a long GC, a VM freeze)
        past its lease has lost it whether or not it has heard so: it answers
        NOT_LEADER_OR_FOLLOWER (a coordinator NOT_COORDINATOR) rather than serve the
        state it had, while others may already have moved on (a fetch past its stale
        log end answered OFFSET_OUT_OF_RANGE and librdkafka re-read from the start; an
        OffsetFetch answered offsets older than a committed transaction's)."""
        if topic in self._reserved:
            return None
        part = self._owned.get((topic, partition))
        if part is None or part.broken or time.monotonic() > part.valid_until:
            return None
        return part

    def _serves(self, part: SharedPartition) -> bool:
        return not part.broken and self._owned.get((part.topic, part.partition)) is part

    def hold_marker(self, topic: str, partition: int, producer_id: int,
                    producer_epoch: int, commit: bool, coordinator_epoch: int,
                    transaction_version: int) -> int | Awaitable[int]:
        """Hold a transaction's marker on a partition this broker serves, for its
        coordinator to commit with the transaction's others (`marker_holds.py`)."""
        part = self.partition(topic, partition)
        if part is None:
            return self.absent_error(topic, partition)
        return self.holds.hold(part, producer_id, producer_epoch, commit,
                               coordinator_epoch, self._now_ms(), transaction_version)

    async def confirm_marker(self, topic: str, partition: int, producer_id: int,
                             producer_epoch: int, commit: bool, timeout_s: float) -> int:
        """A coordinator on another broker committed the marker held here: 0 once it
        is taken in (`MarkerHolds.confirm`)."""
        part = self.partition(topic, partition)
        if part is not None:
            await self.holds.confirm(part, (producer_id, producer_epoch, commit), timeout_s)
        return 0

    def markers_committed(self, keys: Iterable[Key]) -> None:
        """The coordinator here committed the held markers of `keys`."""
        for key in keys:
            part = self._owned.get(key)
            if part is not None:
                self.holds.committed_elsewhere(part)

    def _marker_committed(self, part: SharedPartition, hold: Hold) -> None:
        if self.on_marker is not None:
            self.on_marker(part.topic, part.partition, *hold.producer, hold.offset)

    def partitions(self) -> Iterator[SharedPartition]:
        return iter([p for p in self._owned.values() if not p.broken])

    def absent_error(self, topic: str, partition: int) -> int:
        if (topic, partition) in self._configs:
            return E.not_leader_or_follower
        return E.unknown_topic_or_partition

    def ensure(self, topic: str, partition: int, config: LogConfig, *,
               topic_id: uuid.UUID | None = None) -> None:
        if topic in self._reserved:
            return
        key = (topic, partition)
        self._configs[key] = config
        if topic_id is not None:
            self._ids[key] = topic_id
        part = self._owned.get(key)
        if part is not None:
            part.plog.update_config(config)
        elif key not in self._loading:
            if key not in self._ids:
                raise ValueError(f"{topic}-{partition}: the shared store needs the topic id")
            if self._should_own(key):
                self._load_soon(key)

    async def ready(self, topic: str, partition: int) -> SharedPartition | None:
        """The partition once its load has finished (None if it could not be taken, or
        another broker should serve it)."""
        key = (topic, partition)
        if (key in self._configs and key not in self._owned and key not in self._loading
                and self._should_own(key)):
            self._load_soon(key)
        task = self._loading.get(key)
        if task is not None:
            await asyncio.shield(task)
        return self.partition(topic, partition)

    def remove(self, topic: str, partition: int) -> bool:
        key = (topic, partition)
        self._take_failures.pop(key, None)
        task = self._loading.pop(key, None)
        if task is not None:
            task.cancel()
        part = self._owned.pop(key, None)
        topic_id = self._ids.pop(key, None)
        self._configs.pop(key, None)
        if part is not None:
            part.fail(CommitError(E.not_leader_or_follower, "partition removed", {key}))
            part.abandon("partition removed", {key})
            part.plog.delete()
        if topic_id is not None:
            self._spawn(self._forget(topic_id, partition))
        return part is not None or task is not None

    def commit(self, partitions: Iterable[Partition]) -> Awaitable[None] | None:
        waits = [p.wait_committed() for p in partitions
                 if isinstance(p, SharedPartition) and p.pending and not p.broken]
        if not waits:
            return None
        self.committer.wake()
        return self._all(waits)

    @staticmethod
    async def _all(waits: list[asyncio.Future[None]]) -> None:
        results = await asyncio.gather(*waits, return_exceptions=True)
        failed: set[Key] = set()
        code: int = E.kafka_storage_error
        for result in results:
            if isinstance(result, CommitError):
                failed |= result.failed
                if code != E.request_timed_out:  # "possibly persisted" wins: it is safe
                    code = result.code
            elif isinstance(result, BaseException):
                raise result
        if failed:
            raise CommitError(code, "not committed: " + ", ".join(
                f"{t}-{p}" for t, p in sorted(failed)), failed)

    def start(self) -> None:
        self._tasks += [asyncio.create_task(self.committer.run()),
                       asyncio.create_task(self._renewer()),
                       asyncio.create_task(self._membership()),
                       asyncio.create_task(self._retention()),
                       asyncio.create_task(self._upkeep())]

    async def close(self) -> None:
        await cancel_and_wait([*self._tasks, *self._loading.values(), *self._background,
                               *self.committer.windows])
        self._tasks, self._loading = [], {}
        for handle in self._retries.values():
            handle.cancel()
        self._retries.clear()
        await self.holds.close()
        if self._pool is not None:
            async with self._pool.acquire() as conn:
                await cluster.deregister(conn, self.node_id)
                for part in self._owned.values():
                    await leases.release(conn, leases.Lease(
                        leases.partition_resource(part.topic_id, part.partition),
                        self.node_id, part.epoch, 0))
        for part in self._owned.values():
            key = (part.topic, part.partition)
            part.fail(CommitError(E.not_leader_or_follower, "broker stopping", {key}))
            part.abandon("broker stopping", {key})
            part.plog.close(sync=False)
        self._owned.clear()
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    # ---- taking partitions -----------------------------------------------------------
    def _spawn(self, coro: Awaitable[object]) -> None:
        task: asyncio.Task[object] = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _load_soon(self, key: Key) -> None:
        """Queue `key` for the taker, which takes partitions in batches."""
        fut: asyncio.Future[SharedPartition | None] = \
            asyncio.get_running_loop().create_future()
        self._loading[key] = fut
        self._to_take.append(key)
        self._take_wanted.set()
        self.ownership.taken(key)

        def done(f: asyncio.Future[SharedPartition | None]) -> None:
            if self._loading.get(key) is f:
                del self._loading[key]
            if not f.cancelled() and f.exception() is not None:
                failed = self._take_failures[key] = self._take_failures.get(key, 0) + 1
                if key in self._failed_in_batch:
                    self._failed_in_batch.discard(key)
                elif failed == 1 or failed % LOG_EVERY_FAILURES == 0:
                    log.error("taking %s-%d failed (%d in a row; again in %.0f s): %s", *key,
                              failed, LOAD_RETRY_S, f.exception())
                if key not in self._retries:  # one retry pending at most, however
                    # many callers' loads failed meanwhile (they multiplied: a partition
                    # was tried several times a second after an outage)
                    self._retries[key] = asyncio.get_running_loop().call_later(
                        LOAD_RETRY_S, self._retry_load, key)
        fut.add_done_callback(done)

    def _retry_load(self, key: Key) -> None:
        self._retries.pop(key, None)
        if (key in self._configs and key not in self._owned and key not in self._loading
                and self._should_own(key)):
            self._load_soon(key)

    async def _taker(self) -> None:
        """Take the queued partitions, up to `TAKE_BATCH` per transaction (a broker
        taking thousands of partitions, at start or when another dies, runs a few
        statements rather than a few per partition); each is then downloaded and
        opened in a task of its own."""
        while True:
            await self._take_wanted.wait()
            self._take_wanted.clear()
            while self._to_take:
                batch = self._to_take[:TAKE_BATCH]
                del self._to_take[:TAKE_BATCH]
                futures = {k: f for k in batch
                           if (f := self._loading.get(k)) is not None and not f.done()}
                if not futures:
                    continue
                try:
                    asked = time.monotonic()  # the leases run from no earlier than this
                    # Bounded: a connection that blackholed (its bytes dropped by a
                    # network fault, the socket still open) held this one loop, and with it
                    # every take of the broker, for the command timeout (30 s).
                    taken = await asyncio.wait_for(self._take(list(futures)),
                                                   TAKE_TIMEOUT_S)
                except Exception as exc:
                    log.error("taking %d partition(s) failed (again in %.0f s): %s: %s",
                              len(futures), LOAD_RETRY_S, type(exc).__name__, exc)
                    self._failed_in_batch.update(futures)
                    for fut in futures.values():
                        if not fut.done():
                            fut.set_exception(exc)
                    continue
                for key, fut in futures.items():
                    if key in taken:
                        self._spawn(self._open(key, fut, *taken[key], asked=asked))
                    elif not fut.done():
                        fut.set_result(None)  # held elsewhere: tried at the next refresh

    async def _take(self, keys: list[Key]) -> dict[Key, Taken]:
        """`taking.take` of `keys`, in one transaction."""
        ids = {key: (self._ids[key], key[1]) for key in keys if key in self._ids}
        async with self.pool.acquire() as conn, conn.transaction():
            return await take(conn, ids, self.node_id, self.lease_ms)

    async def download(self, batches: Sequence[asyncpg.Record]) -> bytes:
        """The batches' bytes in order (`taking.download`)."""
        return await download(self.objects, batches)

    async def _open(self, key: Key, fut: asyncio.Future[SharedPartition | None],
                    epoch: int, hw: int, log_start: int,
                    batches: list[asyncpg.Record], *, asked: float) -> None:
        opening = self._opening[key] = _Opening(epoch, asked + self._lease_s)
        try:
            part = await materialise(
                lambda: self.pool.acquire(), self.objects, self.cache_dir / f"{key[0]}-{key[1]}",
                key, self._ids[key], self._configs.get(key, LogConfig()), epoch, hw,
                log_start, batches, self._now_ms)
        except Exception as exc:
            if not fut.done():
                fut.set_exception(exc)
            return
        finally:
            if self._opening.get(key) is opening:
                del self._opening[key]
        part.valid_until = opening.valid_until
        if opening.lost:  # expired or taken while downloading: taken again later
            part.plog.close(sync=False)
            if not fut.done():
                fut.set_result(None)
            return
        if fut.done() or key not in self._configs:  # removed meanwhile
            part.plog.close(sync=False)
            return
        part.on_append = self.committer.added
        self._owned[key] = part
        failed = self._take_failures.pop(key, 0)
        log.info("serving %s-%d (lease epoch %d, high watermark %d; %d rows, %d bytes in "
                 "%.2f s%s)", *key, epoch, hw, len(batches), part.plog.size_bytes,
                 time.monotonic() - asked,
                 f"; after {failed} failed attempts" if failed else "")
        fut.set_result(part)

    async def _forget(self, topic_id: uuid.UUID, partition: int) -> None:
        """A removed partition: its rows go (its objects become the cleaner's)."""
        async with self.pool.acquire() as conn, conn.transaction():
            for table in ("batches", "producers", "aborted_txns", "staged_markers",
                          "partitions"):
                await conn.execute(f"DELETE FROM {table} WHERE topic_id = $1 "  # noqa: S608
                                   "AND partition = $2", topic_id, partition)

    # ---- committing (committer.py) ----------------------------------------------------
    def _drop(self, part: SharedPartition, code: int, why: str, *,
              unknown_until: int | None = None) -> None:
        """Drop the partition (taken again from PostgreSQL if it should be here); its
        waiters as `SharedPartition.fail` answers them."""
        key = (part.topic, part.partition)
        part.fail(CommitError(code, f"{part.topic}-{part.partition}: {why}", {key}),
                  unknown_until=unknown_until)
        if self._owned.get(key) is part:
            del self._owned[key]
            part.plog.close(sync=False)
            self.ownership.lost(key)
            if key in self._configs and self._should_own(key):
                self._load_soon(key)

    # ---- retention -----------------------------------------------------------------------
    async def _retention(self) -> None:
        while True:
            await asyncio.sleep(self.retention_check_s)
            for part in list(self._owned.values()):
                if part.broken or "delete" not in part.config.cleanup_policy:
                    continue
                try:
                    start = await self._retention_start(part)
                    if start > part.log_start_offset and not part.broken:
                        part.delete_records_before(start)
                        self.committer.wake()
                except Exception as exc:
                    log.warning("retention of %s-%d failed: %s: %s", part.topic,
                                part.partition, type(exc).__name__, exc)

    async def _retention_start(self, part: SharedPartition) -> int:
        """The log start retention asks for (never past the committed offset): the first
        batch newer than retention.ms, and the first of the newest retention.bytes."""
        config, hw = part.config, part.committed
        start = part.log_start_offset
        async with self.pool.acquire() as conn:
            if config.retention_ms >= 0:
                found = await conn.fetchval(
                    "SELECT min(base_offset) FROM batches WHERE topic_id = $1 AND "
                    "partition = $2 AND max_timestamp > $3 AND base_offset < $4",
                    part.topic_id, part.partition, self._now_ms() - config.retention_ms, hw)
                start = max(start, hw if found is None else int(found))
            if config.retention_bytes >= 0:
                found = await conn.fetchval(
                    "SELECT min(base_offset) FROM (SELECT base_offset, sum(byte_length) "
                    "OVER (ORDER BY base_offset DESC) AS newer FROM batches WHERE "
                    "topic_id = $1 AND partition = $2 AND base_offset < $3) AS b "
                    "WHERE newer <= $4", part.topic_id, part.partition, hw,
                    config.retention_bytes)
                start = max(start, hw if found is None else int(found))
        return min(start, hw)

    # ---- compaction and merging (upkeep.py) -----------------------------------------------
    async def _upkeep(self) -> None:
        while True:
            await asyncio.sleep(self.upkeep.settings.interval_ms / 1000)
            for part in list(self._owned.values()):
                if part.broken or self._owned.get((part.topic, part.partition)) is not part:
                    continue
                try:
                    outcome = await self.upkeep.tend(part)
                except Exception as exc:
                    log.warning("compacting/merging %s-%d failed: %s: %s", part.topic,
                                part.partition, type(exc).__name__, exc)
                    continue
                if outcome is Outcome.FENCED:
                    self._drop(part, E.not_leader_or_follower, "fenced")
                elif outcome is not None:
                    log.warning("compacting/merging %s-%d: %s", part.topic,
                                part.partition, outcome.value)

    # ---- placement ---------------------------------------------------------------------
    async def _membership(self) -> None:
        while True:
            await asyncio.sleep(self.refresh_s)
            try:  # bounded: a heartbeat that hangs must not stop the next ones
                await asyncio.wait_for(self.refresh_view(), self.lease_ms / 1000)
            except Exception as exc:
                log.warning("cluster heartbeat failed: %s: %s", type(exc).__name__, exc)
                continue
            try:
                self._balance()
            except Exception:  # never stop heartbeating
                log.exception("placing partitions failed")

    def _balance(self) -> None:
        """Take the partitions this broker should own; hand over the others (once their
        appends are committed) to the live broker that should own them."""
        if not self.placement.sees_itself():
            return  # this broker's own heartbeat is not seen: change nothing
        for key in list(self._configs):
            owned = self._owned.get(key)
            if self._should_own(key):
                if owned is None and key not in self._loading:
                    self._load_soon(key)
            elif owned is not None and not owned.pending:
                self._hand_over(owned)


    def _hand_over(self, part: SharedPartition) -> None:
        key = (part.topic, part.partition)
        log.info("handing %s-%d over to %s", *key,
                 self.placement.owner_name(part.topic, part.topic_id, part.partition))
        part.fail(CommitError(E.not_leader_or_follower, "partition moved", {key}))
        del self._owned[key]
        part.plog.close(sync=False)
        self.ownership.lost(key)
        self._spawn(self._release(part))

    async def _release(self, part: SharedPartition) -> None:
        async with self.pool.acquire() as conn:
            await leases.release(conn, leases.Lease(
                leases.partition_resource(part.topic_id, part.partition), self.node_id,
                part.epoch, 0))

    # ---- leases ----------------------------------------------------------------------
    async def _renewer(self) -> None:
        """Renew every lease this broker holds, in one statement, every third of the
        lease time; a lease not renewed (expired, or taken) drops its partition."""
        while True:
            due = time.monotonic() + self.lease_ms / 3000
            await asyncio.sleep(self.lease_ms / 3000)
            parts = {leases.partition_resource(p.topic_id, p.partition): p
                     for p in self._owned.values()}
            opening = {leases.partition_resource(self._ids[key], key[1]): o
                       for key, o in self._opening.items() if key in self._ids}
            held = [(r, p.epoch) for r, p in parts.items()]
            held += [(r, o.epoch) for r, o in opening.items()]
            asked = time.monotonic()  # a renewed lease runs from no earlier than this
            try:
                # Within a lease time, or never: a connection that blackholes (a network
                # fault) would otherwise hold the renewer, and every lease, for good.
                renewed = await asyncio.wait_for(self._renew(held), self._lease_s)
            except OUTAGES as exc:
                log.warning("lease renewal failed: %s: %s", type(exc).__name__, exc)
                continue
            except Exception:
                log.exception("lease renewal failed")
                continue
            now, lapsed = time.monotonic(), 0.0
            for resource, part in parts.items():
                if resource not in renewed:
                    self._drop(part, E.not_leader_or_follower, "lease lost")
                else:
                    lapsed = max(lapsed, now - part.valid_until)
                    part.valid_until = asked + self._lease_s
            if lapsed > 0:  # served nothing meanwhile (`partition`): say why
                log.warning("leases renewed %.1f s after they ran out (this renewal was "
                            "asked %.1f s late and took %.1f s)", lapsed,
                            asked - due, now - asked)
            for resource, state in opening.items():
                if resource not in renewed:
                    state.lost = True
                else:
                    state.valid_until = asked + self._lease_s


    async def _renew(self, held: list[tuple[str, int]]) -> set[str]:
        async with self.pool.acquire() as conn:
            return await leases.renew_all(conn, self.node_id, held, self.lease_ms)


@dataclass(slots=True)
class _Opening:
    """A partition taken and being materialised: its lease, renewed meanwhile."""

    epoch: int
    valid_until: float  # monotonic seconds, as SharedPartition.valid_until
    lost: bool = False


_T = TypeVar("_T")

#: How often a starting broker tries an unreachable database or object store again.
STARTUP_RETRY_S = 1.0


async def _waiting(attempt: Callable[[], Awaitable[_T]], deadline: float) -> _T:
    """`attempt()`, again each STARTUP_RETRY_S while it finds the database or the object
    store unreachable and the monotonic `deadline` has not passed; then its error. A
    refusal that is the settings' (a certificate not trusted, credentials refused) is
    not waited on."""
    tries = 0
    while True:
        try:
            return await attempt()
        except (DatabaseUnavailable, ObjectStoreUnavailable) as exc:
            tries += 1
            left = deadline - time.monotonic()
            if left <= 0 or not exc.retry:
                raise
            log.warning("waiting for the shared log (try %d; giving up in %.0f s, "
                        "headwater.shared.startup.wait.ms): %s", tries, left, exc)
            await asyncio.sleep(min(STARTUP_RETRY_S, left))
