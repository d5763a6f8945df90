"""The owner's side of a transaction's markers committed together (`staged_markers.py`).

Asked to hold a marker (by the transaction coordinator, here or over the wire), the owner
of a partition:

1. appends the marker to its cached log at the log end `m` (so it stays the only one to
   give out offsets), and from then on commits nothing at or past `m`: later appends
   wait, unacknowledged. Until the hold ends, read_committed consumers stop before the
   transaction's first offset here (`Hold.stable_bound`), as if the marker were not
   written;
2. once everything below `m` is committed, stages the marker's bytes in PostgreSQL under
   its lease epoch and answers "ready" (0);
3. waits for the coordinator to commit the transaction's staged markers together: told by
   `headwater_appends` (or polling PostgreSQL every `POLL_S`) that the high watermark
   passed `m`, it counts the marker committed and commits what waited behind it.

A coordinator that dies between the holds and their commit leaves them held; the next
one asks again, finds them ready and commits them. A hold whose coordinator never comes
back within `timeout_ms` (renewed by every ask) is abandoned: the partition is taken
again from what PostgreSQL holds, so the marker is gone and the next coordinator's
markers go where they belong. One marker is held per partition at a time; another
transaction's is refused with NOT_LEADER_OR_FOLLOWER, which coordinators retry.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import asyncpg
from kio.schema.errors import ErrorCode as E

from ..records.batch import iter_batches
from ..storage.errors import CommitError, LogError
from .partition import Hold, SharedPartition
from .sequencer import NOTIFY_CHANNEL
from .staged_markers import StagedMarker, stage
from .tasks import cancel_and_wait

log = logging.getLogger("headwater.shared")

#: The client id of a coordinator's WriteTxnMarkers asking the owner to hold its marker.
HOLD_CLIENT_ID = "headwater-txn-hold"
#: ... and, once it committed the held markers, asking the owner to take the commit in
#: before the transaction completes (`MarkerHolds.confirm`).
CONFIRM_CLIENT_ID = "headwater-txn-confirm"
POLL_S = 0.25  # how often a ready hold asks PostgreSQL whether it was committed


class MarkerHolds:
    """The held markers of one broker's partitions."""

    def __init__(self, pool: Callable[[], asyncpg.Pool], database: str,
                 wake_flusher: Callable[[], None],
                 drop: Callable[[SharedPartition, int, str], None],
                 owned: Callable[[SharedPartition], bool], timeout_ms: int,
                 committed: Callable[[SharedPartition, Hold], None]
                 = lambda _part, _hold: None) -> None:
        self._pool = pool
        self._committed = committed  # told of each held marker committed
        self._database = database
        self._wake_flusher = wake_flusher
        self._drop = drop
        self._owned = owned
        self.timeout_s = timeout_ms / 1000
        self._held: dict[tuple[str, int], SharedPartition] = {}  # (topic id, partition)
        self._listener: asyncpg.Connection | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def hold(self, part: SharedPartition, producer_id: int, producer_epoch: int,
             commit: bool, coordinator_epoch: int, now_ms: int,
             transaction_version: int) -> int | Awaitable[int]:
        """0 once the marker is staged (an error code if it cannot be held)."""
        held = part.hold
        if held is not None:
            if held.producer == (producer_id, producer_epoch, commit):
                held.deadline = time.monotonic() + self.timeout_s
                return asyncio.shield(held.ready)
            return E.not_leader_or_follower  # another transaction's marker is held here
        entry = part.plog.producer_state.producers.get(producer_id)
        first = entry.current_txn_first_offset if entry is not None else -1
        offset = part.plog.log_end_offset
        try:
            part.append_marker(producer_id, producer_epoch, commit, coordinator_epoch,
                               now_ms, transaction_version)
        except LogError as exc:
            return exc.code
        hold = Hold(offset, (producer_id, producer_epoch, commit),
                    first if 0 <= first < offset else offset,
                    asyncio.get_running_loop().create_future(),
                    time.monotonic() + self.timeout_s)
        part.hold = hold
        self._held[_key(part)] = part
        task = asyncio.ensure_future(self._keep(part, hold))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        self._wake_flusher()  # commit what lies below the marker
        return asyncio.shield(hold.ready)

    def committed_elsewhere(self, part: SharedPartition) -> None:
        """The coordinator (on this broker) committed `part`'s held marker: told at once
        (so its transaction's offsets are committed before the coordinator completes
        it), and the hold ends once PostgreSQL confirms it (told again then: a
        marker's replay ends only what precedes it, so twice is harmless)."""
        if part.hold is not None:
            self._committed(part, part.hold)
            part.hold.ended.set()

    async def confirm(self, part: SharedPartition, producer: tuple[int, int, bool],
                      timeout_s: float) -> None:
        """The coordinator committed the transaction whose marker `part` holds: check
        PostgreSQL now rather than at the next poll or notification, and return once
        the hold is over (the marker taken in: a `__consumer_offsets` partition's
        group coordinator then has the transaction's offsets). Returns at once when
        no such marker is held (already taken in, or the partition moved: its next
        owner loads the committed marker)."""
        hold = part.hold
        if hold is None or hold.producer != producer:
            return
        hold.ended.set()
        try:
            await asyncio.wait_for(hold.finished.wait(), timeout_s)
        except TimeoutError:
            pass

    async def _keep(self, part: SharedPartition, hold: Hold) -> None:
        try:
            await self._stage(part, hold)
        except CommitError as exc:
            self._finish(part, hold)
            if not hold.ready.done():
                hold.ready.set_result(exc.code)
            return
        except Exception as exc:
            log.warning("%s-%d: staging the held marker failed: %s: %s", part.topic,
                        part.partition, type(exc).__name__, exc)
            self._finish(part, hold)
            if not hold.ready.done():
                hold.ready.set_result(E.kafka_storage_error)
            if self._owned(part):
                self._drop(part, E.not_leader_or_follower, "held marker not staged")
            return
        hold.ready.set_result(0)
        try:
            await self._await_commit(part, hold)
        finally:
            self._finish(part, hold)

    async def _stage(self, part: SharedPartition, hold: Hold) -> None:
        # Bounded like the hold itself: appends below the marker that never commit
        # (and never fail) would keep the hold, and its coordinator's job, waiting.
        await asyncio.wait_for(part.committed_future(hold.offset), self.timeout_s)
        data = part.plog.read(hold.offset, 1 << 20, hold.offset + 1)
        (_pos, header), = iter_batches(data)
        async with self._pool().acquire() as conn:
            await stage(conn, StagedMarker(part.topic_id, part.partition, hold.offset,
                                           part.epoch, header.producer_id,
                                           header.producer_epoch, header.max_timestamp,
                                           bytes(data[:header.size])))

    async def _await_commit(self, part: SharedPartition, hold: Hold) -> None:
        """Until the marker is committed (the hold ends), the partition is lost, or
        the hold is abandoned."""
        await self.listen()
        while self._owned(part) and part.hold is hold:
            try:
                await asyncio.wait_for(hold.ended.wait(), POLL_S)
            except TimeoutError:
                pass
            hold.ended.clear()
            try:
                async with self._pool().acquire() as conn:
                    row = await conn.fetchrow(
                        "SELECT high_watermark, writer_epoch FROM partitions WHERE "
                        "topic_id = $1 AND partition = $2", part.topic_id, part.partition)
            except Exception as exc:
                log.warning("%s-%d: checking the held marker: %s: %s", part.topic,
                            part.partition, type(exc).__name__, exc)
                continue
            if not self._owned(part) or part.hold is not hold:
                return
            if row is None or row["writer_epoch"] != part.epoch:
                self._finish(part, hold)
                self._drop(part, E.not_leader_or_follower, "fenced while holding a marker")
                return
            if row["high_watermark"] > hold.offset:
                self._finish(part, hold)
                part.marker_committed(hold.offset)
                self._committed(part, hold)
                self._wake_flusher()
                return
            if time.monotonic() > hold.deadline:
                log.warning("%s-%d: the marker held at offset %d was not committed by its "
                            "coordinator within %.0f s; taking the partition again",
                            part.topic, part.partition, hold.offset, self.timeout_s)
                self._finish(part, hold)
                self._drop(part, E.not_leader_or_follower, "held marker abandoned")
                return

    def _finish(self, part: SharedPartition, hold: Hold) -> None:
        hold.finished.set()
        if part.hold is hold:
            part.hold = None
        if self._held.get(_key(part)) is part:
            del self._held[_key(part)]

    # ---- notifications -------------------------------------------------------------------
    async def listen(self) -> None:
        """Listen on `headwater_appends` (at start, so that the first hold's commit is
        not missed while connecting; again after the connection was lost)."""
        if self._listener is not None and not self._listener.is_closed():
            return
        try:
            conn = await asyncpg.connect(self._database)
            await conn.add_listener(NOTIFY_CHANNEL, self._notified)
        except Exception as exc:  # polling still finds the commit
            log.warning("listening on %s failed: %s: %s", NOTIFY_CHANNEL,
                        type(exc).__name__, exc)
            return
        self._listener = conn

    def _notified(self, _c: object, _pid: int, _channel: str, payload: object) -> None:
        if not self._held:
            return
        for item in str(payload).split(","):  # topic id:partition:high watermark, ...
            topic_id, partition, end = item.split(":")
            part = self._held.get((topic_id, int(partition)))
            if part is not None and part.hold is not None and int(end) > part.hold.offset:
                part.hold.ended.set()

    async def close(self) -> None:
        await cancel_and_wait(self._tasks)
        if self._listener is not None:
            await self._listener.close()
            self._listener = None


def _key(part: SharedPartition) -> tuple[str, int]:
    """A partition as `headwater_appends` names it."""
    return str(part.topic_id), part.partition
