"""`__cluster_metadata` on the shared log: written only by the holder of the controller
lease, followed by every other broker (as KRaft's brokers follow the quorum).

* **Start**: the partition (topic id 1, Kafka's METADATA_TOPIC_ID) is downloaded from
  PostgreSQL into the broker's local metadata log directory (`download`): the local log is
  a cache, and the controller loads its image from it as on one node.
* **The controller lease** (`leases.py`, resource `controller`): a broker that takes it
  stamps its epoch on the partition's row, follows the log to its end, then writes
  (`MetadataTarget.activate`). Its appends are committed in order by one pusher (the
  sequencer's fenced transaction); `durable()` is what a request that changed metadata
  awaits before it is answered. A push that does not commit (fenced: a newer controller
  exists) or a lost lease makes the broker a follower again, from a fresh download.
* **Followers** read the batches after their log's end when PostgreSQL notifies an append
  to the partition (LISTEN on the sequencer's channel), and at least every second.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import uuid
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import Protocol

import asyncpg

from ..log.partition_log import LOG_START_CHECKPOINT
from ..records.batch import iter_batches
from . import leases
from .cluster import CONTROLLER
from .database import COMMAND_TIMEOUT_S, CONNECT_TIMEOUT_S, keep_session, session_settings
from .sequencer import NOTIFY_CHANNEL, BatchRow, Outcome, PartitionCommit, commit
from .settings import SharedSettings
from .tasks import cancel_and_wait

log = logging.getLogger("headwater.shared")

METADATA_TOPIC_ID = uuid.UUID(int=1)  # Kafka's Uuid.METADATA_TOPIC_ID
POLL_S = 1.0


class MetadataTarget(Protocol):
    """The controller, as the shared metadata log drives it."""

    def end_offset(self) -> int: ...
    def read(self, start: int, end: int) -> bytes: ...
    def follow(self, data: bytes) -> None: ...
    def activate(self) -> None: ...
    def reload(self) -> None: ...


class LogStore(Protocol):
    """What the metadata log uses of the broker's shared store: where PostgreSQL is,
    the broker's id and lease time, how often it looks, and its object reads."""

    settings: SharedSettings
    node_id: int
    lease_ms: int

    @property
    def refresh_s(self) -> float: ...

    async def download(self, batches: Sequence[asyncpg.Record]) -> bytes: ...


class NotController(RuntimeError):
    pass


class SharedMetadata:
    def __init__(self, store: LogStore, path: Path) -> None:
        self.store = store
        self.path = path
        self.target: MetadataTarget | None = None
        self.active = False
        #: Stepped down, but the local log is not yet started again from PostgreSQL's
        #: (the database was unreachable): done before anything is followed.
        self._reload_pending = False
        self.epoch = 0
        self.committed = 0  # the log's offset up to which PostgreSQL has it
        self._wake = asyncio.Event()
        self._push = asyncio.Event()
        self._waiting: list[tuple[int, asyncio.Future[None]]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._listener: asyncpg.Connection | None = None
        self._pool: asyncpg.Pool | None = None
        self._following = asyncio.Lock()  # one catch-up at a time: each appends

    # ---- start -----------------------------------------------------------------------
    @property
    def pool(self) -> asyncpg.Pool:
        """Connections of the metadata log's own: its commits never queue behind the
        partition takes of a CreateTopics of thousands of partitions."""
        assert self._pool is not None, "SharedMetadata.download() first"
        return self._pool

    async def download(self) -> None:
        """Replace the local metadata log with what PostgreSQL holds."""
        if self._pool is None:
            self._pool = await asyncpg.create_pool(
                self.store.settings.database, min_size=1, max_size=2,
                timeout=CONNECT_TIMEOUT_S, command_timeout=COMMAND_TIMEOUT_S,
                server_settings=session_settings(self.store.lease_ms), reset=keep_session)
        async with self.pool.acquire() as conn:
            row = await conn.fetchrow(
                "SELECT high_watermark, log_start FROM partitions WHERE topic_id = $1 "
                "AND partition = 0", METADATA_TOPIC_ID)
            hw = int(row["high_watermark"]) if row else 0
            batches = await self._batches(conn, 0)
        data = await self.store.download(batches)
        shutil.rmtree(self.path, ignore_errors=True)
        self.path.mkdir(parents=True)
        (self.path / f"{0:020d}.log").write_bytes(data)
        (self.path / LOG_START_CHECKPOINT).write_text("0\n")
        self.committed = hw

    async def _batches(self, conn: asyncpg.pool.PoolConnectionProxy, start: int
                       ) -> list[asyncpg.Record]:
        return await conn.fetch(
            "SELECT base_offset, object_key, byte_offset, byte_length, inline_bytes "
            "FROM batches WHERE topic_id = $1 AND partition = 0 AND base_offset >= $2 "
            "ORDER BY base_offset", METADATA_TOPIC_ID, start)

    def start(self, target: MetadataTarget) -> None:
        self.target = target
        self._tasks = [asyncio.create_task(self._leader_loop()),
                       asyncio.create_task(self._pusher())]

    async def close(self) -> None:
        await cancel_and_wait(self._tasks)
        if self._listener is not None:
            await self._listener.close()
        if self.active and self._pool is not None:
            async with self.pool.acquire() as conn:
                await leases.release(conn, leases.Lease(CONTROLLER, self.store.node_id,
                                                        self.epoch, 0))
        self._fail_waiting("broker stopping")
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    # ---- the controller's side ---------------------------------------------------------
    def check_writer(self) -> None:
        if not self.active:
            raise NotController("this broker does not hold the controller lease")

    def written(self) -> None:
        """The controller appended: commit to its new end (`durable` awaits it)."""
        self._push.set()

    def durable(self) -> Awaitable[None] | None:
        """Resolves when everything the controller has appended so far is committed
        (raises if it cannot be: the broker is no longer the controller)."""
        assert self.target is not None
        end = self.target.end_offset()
        if end <= self.committed:
            return None
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((end, fut))
        self._push.set()
        return fut

    async def _pusher(self) -> None:
        while True:
            await self._push.wait()
            self._push.clear()
            target = self.target
            if not self.active or target is None:
                continue
            end = target.end_offset()
            if end <= self.committed:
                self._resolve()
                continue
            data = target.read(self.committed, end)
            rows = [BatchRow(h.base_offset, h.last_offset, 0, h.size, h.max_timestamp,
                             inline=data[pos:pos + h.size]) for pos, h in iter_batches(data)]
            if not rows:
                continue
            c = PartitionCommit(METADATA_TOPIC_ID, 0, self.epoch, rows)
            try:
                async with self.pool.acquire() as conn:
                    await commit(conn, None, 0, [c])
            except Exception as exc:
                log.warning("metadata commit failed (%s: %s): following again",
                            type(exc).__name__, exc)
                await self._step_down(f"metadata commit failed: {exc}")
                continue
            if c.outcome is not Outcome.COMMITTED:
                await self._step_down(f"metadata commit {c.outcome}")
                continue
            self.committed = c.end_offset
            self._resolve()
            if target.end_offset() > self.committed:
                self._push.set()

    def _resolve(self) -> None:
        still = []
        for end, fut in self._waiting:
            if end <= self.committed:
                if not fut.done():
                    fut.set_result(None)
            else:
                still.append((end, fut))
        self._waiting = still

    def _fail_waiting(self, why: str) -> None:
        for _end, fut in self._waiting:
            if not fut.done():
                fut.set_exception(NotController(why))
        self._waiting = []

    async def _step_down(self, why: str) -> None:
        """Not the controller any more: what was not committed is dropped, and the
        local log starts again from PostgreSQL's."""
        was = self.active
        self.active = False
        self._reload_pending = True
        self._fail_waiting(why)
        if was:
            log.warning("controller role lost: %s", why)
        await self._reload()

    async def _reload(self) -> None:
        """The local log (and the controller's image) again from PostgreSQL's."""
        async with self._following:
            await self.download()
            assert self.target is not None
            self.target.reload()
        self._reload_pending = False

    # ---- the lease and following -------------------------------------------------------
    async def _leader_loop(self) -> None:
        while True:
            try:
                await self._lead_or_follow()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("metadata log: %s: %s", type(exc).__name__, exc)
                if self.active:
                    try:
                        await self._step_down(f"{type(exc).__name__}: {exc}")
                    except Exception as again:
                        log.warning("metadata log reload failed: %s", again)
            try:
                await asyncio.wait_for(self._wake.wait(), self.store.refresh_s)
            except TimeoutError:
                pass
            self._wake.clear()

    async def _lead_or_follow(self) -> None:
        await self._ensure_listener()
        if self._reload_pending:  # a step-down whose reload failed: again, first
            await self._reload()
        store = self.store
        async with self.pool.acquire() as conn:
            lease = await leases.acquire(conn, CONTROLLER, store.node_id, store.lease_ms,
                                         bump=not self.active)
            taken = (not self.active and lease is not None
                     and await leases.stamp(conn, METADATA_TOPIC_ID, 0, lease.epoch))
        if self.active:
            if lease is None or lease.epoch != self.epoch:
                await self._step_down("controller lease lost")
            return
        await self._catch_up()
        if taken:
            assert lease is not None and self.target is not None
            self.epoch = lease.epoch
            self.active = True
            log.info("controller lease taken (epoch %d)", lease.epoch)
            self.target.activate()

    async def _catch_up(self) -> None:
        """Follow what PostgreSQL holds after the local log's end. One at a time (the
        leader loop and a forwarded change both catch up): two reading the same end
        would append the same batches twice. The connection is taken inside the lock,
        so a holder never waits for a connection another waiter keeps."""
        assert self.target is not None
        async with self._following, self.pool.acquire() as conn:
            end = self.target.end_offset()
            batches = await self._batches(conn, end)
            if batches:
                data = await self.store.download(batches)
                self.target.follow(data)
            self.committed = self.target.end_offset()

    async def caught_up(self, timeout_s: float) -> None:
        """Follow the log up to what PostgreSQL holds now (after a forwarded change)."""
        if self.active:
            return
        if self._reload_pending:
            await asyncio.wait_for(self._reload(), timeout_s)
        await asyncio.wait_for(self._catch_up(), timeout_s)

    async def _ensure_listener(self) -> None:
        if self._listener is not None and not self._listener.is_closed():
            return
        conn = await asyncpg.connect(self.store.settings.database)
        wanted = str(METADATA_TOPIC_ID)

        def notified(_c: object, _pid: int, _channel: str, payload: object) -> None:
            if wanted in str(payload) and not self.active:
                self._wake.set()
        await conn.add_listener(NOTIFY_CHANNEL, notified)
        self._listener = conn
