"""Commit windows: a broker's appends on the shared log made durable together.

A flusher gathers every partition with uncommitted appends after `linger_ms`, uploads
their bytes (as the local logs wrote them, offsets already patched) as one object under
a fresh key (or inline in PostgreSQL when small), and runs the sequencer's transaction
(`sequencer.commit`). A committed partition's high watermark moves and its subscribers
are told. A partition that is not committed (fenced, stale, or any failure: the outcome
may be unknown) is dropped by the store and taken again from what PostgreSQL holds, and
its waiting appends are answered as `SharedPartition.fail` says; a window whose
transaction's answer was lost is settled by asking PostgreSQL whether it landed.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode as E

from ..records.batch import BatchHeader, iter_batches
from ..storage.errors import CommitError
from .objects import WAL_PREFIX, ObjectStore
from .partition import SharedPartition
from .schema import Connection
from .sequencer import BatchRow, Outcome, PartitionCommit, commit, landed
from .unmerged import SMALL_PIECE

log = logging.getLogger("headwater.shared")

WINDOWS_IN_FLIGHT = 4  # commit windows uploading or committing at once
#: A window overlaps those in flight only with at least this much to carry; a smaller
#: one waits for them. Every window pays an upload and a transaction whatever its size,
#: so a busy broker starting one every `linger_ms` paid them per few records: three
#: brokers under a CPU quota committed 4x the windows per broker of one, each a third
#: the size (bench/scale_bench.py, 100 B). Waiting sizes windows by load: the busier the
#: broker, the more each in-flight window's time gathers.
OVERLAP_MIN_BYTES = 1 << 20
#: A window whose transaction's answer was lost: PostgreSQL is asked whether it landed
#: every SETTLE_RETRY_S for SETTLE_S (each ask at most SETTLE_ASK_S), then its appends
#: are answered "possibly persisted".
SETTLE_S = 30.0
SETTLE_RETRY_S = 0.5
SETTLE_ASK_S = 5.0


class Drop(Protocol):
    """The store's: drop a partition not committed (taken again from PostgreSQL), its
    waiters answered as `SharedPartition.fail` answers them."""

    def __call__(self, part: SharedPartition, code: int, why: str, *,
                 unknown_until: int | None = None) -> None: ...


@dataclass(slots=True)
class _Window:
    commits: list[tuple[SharedPartition, PartitionCommit]]
    chunks: list[bytes | bytearray]
    size: int
    key: str | None  # the object's (None: inline, or nothing but a new log start)


class WindowCommitter:
    """The flusher and its windows in flight. `wake()` when a partition has appends
    (or a new log start) to commit; `run()` is the flusher's loop."""

    def __init__(self, connect: Callable[[], AbstractAsyncContextManager[Connection]],
                 objects: ObjectStore, waiting: Callable[[], Iterable[SharedPartition]],
                 drop: Drop, spawn: Callable[[Awaitable[object]], None],
                 now_ms: Callable[[], int], *, linger_ms: int, inline_max_bytes: int
                 ) -> None:
        self._connect = connect
        self._objects = objects
        self._waiting = waiting  # the owned partitions, appends to commit or not
        self._drop = drop
        self._spawn = spawn
        self._now_ms = now_ms
        self.linger_s = linger_ms / 1000
        self.inline_max_bytes = inline_max_bytes
        self._dirty = asyncio.Event()
        self.windows: set[asyncio.Task[None]] = set()
        self._large: set[asyncio.Task[None]] = set()  # windows with an object
        self._window_moved = asyncio.Event()  # a window finished, or enough gathered
        self._gathered = 0  # bytes appended since the last window was prepared

    def wake(self) -> None:
        """Appends (or a new log start) wait to be committed."""
        self._dirty.set()

    def added(self, nbytes: int) -> None:
        """`nbytes` were appended to a partition (`SharedPartition.on_append`)."""
        before = self._gathered
        self._gathered = before + nbytes
        if before < OVERLAP_MIN_BYTES <= self._gathered:
            self._window_moved.set()

    async def run(self) -> None:
        """Start a commit window after `linger_ms` whenever appends wait. Windows
        overlap only when large: a new one starts beside others when fewer than
        `WINDOWS_IN_FLIGHT` are in flight, all of them carry an object, and it has
        `OVERLAP_MIN_BYTES` to carry, so under load uploads and transactions overlap
        (1 KiB produce +25 % here) without splitting the load into windows too small
        to pay for themselves, while a trickle of small (inline) windows never queues
        behind a transaction (that tripled the latency at 2,000 msg/s). Transactions
        run in window order: a partition's next window starts where its previous one
        ends."""
        previous: asyncio.Task[None] | None = None
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            if self.linger_s > 0:
                await asyncio.sleep(self.linger_s)
            while True:
                self._window_moved.clear()
                if not self.windows or (len(self.windows) < WINDOWS_IN_FLIGHT
                                        and self.windows <= self._large
                                        and self._gathered >= OVERLAP_MIN_BYTES):
                    break
                await self._window_moved.wait()
            window = [p for p in self._waiting() if p.unflushed and not p.broken]
            if not window:
                continue
            prepared = self._prepare(window)
            task = asyncio.create_task(self._commit_window(prepared, previous))
            self.windows.add(task)
            if prepared.key is not None:
                self._large.add(task)
            task.add_done_callback(self._window_done)
            previous = task

    def _window_done(self, task: asyncio.Task[None]) -> None:
        self.windows.discard(task)
        self._large.discard(task)
        self._window_moved.set()

    def _prepare(self, window: list[SharedPartition]) -> _Window:
        """A window's bytes and rows: every partition's appends after its previous
        window, one object (or inline in PostgreSQL when the window is at most
        `inline_max_bytes`: no upload round trip for a trickle of small batches)."""
        pieces = []
        size = 0
        self._gathered = 0
        for part in window:
            written = _written(part)
            pieces.append((part, written, size))
            size += sum(len(buf) for buf, _h in written)
        inline = size <= self.inline_max_bytes
        commits: list[tuple[SharedPartition, PartitionCommit]] = []
        for part, written, at in pieces:
            rows = []
            for buf, headers in written:
                pos = 0
                for h in headers:
                    rows.append(BatchRow(
                        h.base_offset, h.last_offset, at + pos, h.size, h.max_timestamp,
                        h.producer_id, h.producer_epoch, h.base_sequence,
                        h.is_transactional, h.is_control,
                        inline=bytes(memoryview(buf)[pos:pos + h.size]) if inline else None))
                    pos += h.size
                at += len(buf)
            commits.append((part, PartitionCommit(part.topic_id, part.partition, part.epoch,
                                                  rows, log_start=part.pending_log_start)))
        key = ObjectStore.new_key(WAL_PREFIX) if size and not inline else None
        return _Window(commits, [buf for _p, written, _a in pieces for buf, _h in written],
                       size, key)

    async def _commit_window(self, w: _Window, previous: asyncio.Task[None] | None) -> None:
        """Upload the window's object, then (after the previous window's transaction)
        run its transaction. A failure (the outcome may be unknown) drops its
        partitions: they are taken again from what PostgreSQL holds."""
        failure: Exception | None = None
        try:
            if w.key is not None:
                await self._objects.put_new(w.key, w.chunks)
        except Exception as exc:
            failure = exc
        uploaded = failure is None
        if previous is not None:
            await asyncio.wait({previous})
        try:
            if failure is None:
                async with self._connect() as conn:
                    await commit(conn, w.key, w.size, [c for _p, c in w.commits])
        except Exception as exc:
            failure = exc
        if failure is not None:
            log.warning("commit of %d partitions failed (%s: %s); taking them again",
                        len(w.commits), type(failure).__name__, failure)
            for part, c in w.commits:  # an upload that failed: the window never landed
                self._drop(part, E.kafka_storage_error, f"commit failed: {failure}",
                           unknown_until=None if uploaded else _before(part, c))
            if uploaded:  # the transaction's answer was lost: did it land?
                self._spawn(self._settle(w))
            return
        for part, c in w.commits:
            if c.outcome is Outcome.COMMITTED:
                end = c.end_offset if c.batches else part.committed
                part.committed_to(end, c.log_start is not None)
                size = sum(b.byte_length for b in c.batches)
                if c.batches and (w.key is None or size < SMALL_PIECE):
                    part.unmerged.add(c.first_offset, c.end_offset, size, self._now_ms())
            else:
                assert c.outcome is not None
                self._drop(part, E.not_leader_or_follower, f"commit {c.outcome.value}",
                           unknown_until=_before(part, c))

    async def _settle(self, w: _Window) -> None:
        """A window whose transaction's answer was lost (the connection died under it):
        PostgreSQL says whether it landed, and its appends are answered accordingly, as
        a Kafka leader answers an append only once it knows its fate (see
        `SharedPartition.fail`). PostgreSQL out of reach for SETTLE_S: "possibly
        persisted" after all."""
        firsts = [(c.topic_id, c.partition, c.batches[0]) for _p, c in w.commits
                  if c.batches]
        deadline = time.monotonic() + SETTLE_S
        while True:
            try:
                found = await asyncio.wait_for(self._landed(firsts), SETTLE_ASK_S)
                break
            except Exception as exc:
                if time.monotonic() >= deadline:
                    log.warning("whether the commit of %d partitions landed is unknown "
                                "after %.0f s (%s: %s): answered as possibly persisted",
                                len(w.commits), SETTLE_S, type(exc).__name__, exc)
                    for part, _c in w.commits:
                        part.abandon("PostgreSQL out of reach",
                                     {(part.topic, part.partition)})
                    return
                await asyncio.sleep(SETTLE_RETRY_S)
        for part, c in w.commits:
            if (c.topic_id, c.partition) in found:
                part.committed_to(c.end_offset, c.log_start is not None)
            else:
                part.fail(CommitError(E.kafka_storage_error, f"{part.topic}-"
                                      f"{part.partition}: commit failed, not landed",
                                      {(part.topic, part.partition)}),
                          unknown_until=_before(part, c))
        log.info("a commit of %d partitions whose answer was lost: %d landed",
                 len(w.commits), len(found))

    async def _landed(self, firsts: list[tuple[uuid.UUID, int, BatchRow]]
                      ) -> set[tuple[uuid.UUID, int]]:
        async with self._connect() as conn:
            return await landed(conn, firsts)


def _before(part: SharedPartition, c: PartitionCommit) -> int:
    """Where a window known not to have landed starts for `part`: its waiters past it
    are answered at once, those before wait for the windows before it."""
    return c.first_offset if c.batches else part.committed


def _written(part: SharedPartition) -> list[tuple[bytes | bytearray, list[BatchHeader]]]:
    """The partition's appends since its previous window, as the log wrote them (its
    `tee`: no read back), or read back should the tee not cover exactly that range."""
    plog = part.plog
    end, tee = plog.log_end_offset, plog.tee or []
    if part.hold is not None:  # nothing at or past a held marker
        end = part.hold.offset
        plog.tee = [t for t in tee if t[1][0].base_offset >= end]
        tee = [t for t in tee if t[1][0].base_offset < end]
    else:
        plog.tee = []
    start, part.flushed = part.flushed, end
    if not tee and end == start:
        return []
    if tee and tee[0][1][0].base_offset == start and tee[-1][1][-1].next_offset == end:
        return list(tee)
    log.warning("%r: appends since offset %d not in the tee; read back", plog, start)
    data = plog.read(start, 1 << 62, end)
    return [(data, [h for _pos, h in iter_batches(data)])] if data else []


