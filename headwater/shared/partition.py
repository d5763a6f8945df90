"""One partition this broker holds the lease of on the shared log: its cached
`PartitionLog`, how far it is committed, the marker it may hold, and the waiters for its
commits. The store (`store.py`) takes, commits and drops it; it answers the `Partition`
seam for everything else, never past what is committed."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode as E

from ..config import LogConfig
from ..log.partition_log import PartitionLog
from ..storage.errors import CommitError, LogError
from ..storage.partition import AppendResult, ProducerStateInfo
from .unmerged import Unmerged

log = logging.getLogger("headwater.shared")


@dataclass(slots=True)
class Hold:
    offset: int  # the marker's
    producer: tuple[int, int, bool]  # producer id, epoch, commit
    txn_first: int  # the transaction's first offset here (the marker's, if none)
    ready: asyncio.Future[int]
    deadline: float  # monotonic seconds; renewed by every ask
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    finished: asyncio.Event = field(default_factory=asyncio.Event)  # the hold is over

    @property
    def stable_bound(self) -> int:
        return min(self.txn_first, self.offset)


class SharedPartition:
    """One partition this broker holds the lease of (a `Partition`)."""

    def __init__(self, plog: PartitionLog, topic_id: uuid.UUID, epoch: int,
                 committed: int, *, unmerged: Unmerged | None = None) -> None:
        self.plog = plog
        plog.tee = []  # the appends' bytes, taken by the next commit window
        self.topic_id = topic_id
        self.epoch = epoch
        self.committed = committed
        #: The ranges whose batches are in small pieces, for merging (`upkeep.py`).
        self.unmerged = unmerged or Unmerged()
        self.flushed = committed  # the end of the last window started (committed or not)
        self.pending_log_start: int | None = None
        #: A transaction's marker held at its offset (`marker_holds.py`): nothing at or
        #: past it is committed until the coordinator commits it with the others.
        self.hold: Hold | None = None
        self.broken = False
        #: Until when (monotonic seconds) the lease is surely this broker's: set when it
        #: is taken and at every renewal, from the moment the request was sent.
        self.valid_until = float("inf")
        self._subscribers: list[Callable[[], None]] = []
        #: Told the bytes of every append (the committer's `added`, set by the store).
        self.on_append: Callable[[int], None] | None = None
        self._waiting: list[tuple[int, asyncio.Future[None]]] = []

    # ---- identity and offsets ------------------------------------------------------
    @property
    def topic(self) -> str:
        return self.plog.topic

    @property
    def partition(self) -> int:
        return self.plog.partition

    @property
    def config(self) -> LogConfig:
        return self.plog.config

    @property
    def log_start_offset(self) -> int:
        return self.plog.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.plog.log_end_offset

    @property
    def leader_epoch(self) -> int:
        """The lease epoch less one: a partition's first leader has epoch 0, as in Kafka."""
        return self.epoch - 1

    @property
    def high_watermark(self) -> int:
        return self.committed

    @property
    def last_stable_offset(self) -> int:
        stable = min(self.plog.last_stable_offset, self.committed)
        return stable if self.hold is None else min(stable, self.hold.stable_bound)

    @property
    def size_bytes(self) -> int:
        return self.plog.size_bytes

    @property
    def unflushed(self) -> bool:
        """Appends (or a new log start) no commit window carries yet (none at or past
        a held marker)."""
        end = self.plog.log_end_offset if self.hold is None else self.hold.offset
        return end > self.flushed or self.pending_log_start is not None

    @property
    def pending(self) -> bool:
        return self.plog.log_end_offset > self.committed or self.pending_log_start is not None

    # ---- writes ----------------------------------------------------------------------
    def _check_usable(self) -> None:
        if self.broken:
            raise LogError(E.not_leader_or_follower,
                           f"{self.topic}-{self.partition} is being taken over again")

    def append(self, data: bytes | bytearray | memoryview, now_ms: int,
               *, origin_client: bool = True, transaction_version: int = 0) -> AppendResult:
        self._check_usable()
        result = self.plog.append(data, now_ms, origin_client=origin_client,
                                  transaction_version=transaction_version)
        if self.on_append is not None:
            self.on_append(len(data))
        return result

    def append_marker(self, producer_id: int, producer_epoch: int, commit: bool,
                      coordinator_epoch: int, now_ms: int,
                      transaction_version: int = 0) -> int:
        self._check_usable()
        return self.plog.append_marker(producer_id, producer_epoch, commit,
                                       coordinator_epoch, now_ms, transaction_version)

    def delete_records_before(self, offset: int) -> int:
        self._check_usable()
        if offset < 0 or offset > self.committed:
            raise LogError(E.offset_out_of_range,
                           f"offset {offset} outside [0, {self.committed}]")
        start = self.plog.delete_records_before(offset)
        self.pending_log_start = start
        return start

    # ---- reads -----------------------------------------------------------------------
    def read(self, fetch_offset: int, max_bytes: int, upper_bound: int | None = None) -> bytes:
        bound = self.committed if upper_bound is None else min(upper_bound, self.committed)
        return self.plog.read(fetch_offset, max_bytes, bound)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        found = self.plog.offset_for_timestamp(timestamp)
        return found if found is not None and found[0] < self.committed else None

    def max_timestamp_entry(self) -> tuple[int, int] | None:
        found = self.plog.max_timestamp_entry()
        return found if found is not None and found[0] < self.committed else None

    def aborted_transactions(self, start_offset: int, upper_bound: int
                             ) -> list[tuple[int, int]]:
        return self.plog.aborted_transactions(start_offset, min(upper_bound, self.committed))

    def producer_states(self) -> list[ProducerStateInfo]:
        return self.plog.producer_states()

    def knows_producer(self, producer_id: int) -> bool:
        return self.plog.knows_producer(producer_id)

    def in_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        return self.plog.in_transaction(producer_id, producer_epoch)

    def subscribe_append(self, callback: Callable[[], None]) -> Callable[[], None]:
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    # ---- commits (the store's) -------------------------------------------------------
    def wait_committed(self) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((self.plog.log_end_offset, fut))
        return fut

    def committed_future(self, end: int) -> asyncio.Future[None]:
        """Done once everything below `end` is committed (CommitError if it never is)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if end <= self.committed:
            fut.set_result(None)
        else:
            self._waiting.append((end, fut))
        return fut

    def marker_committed(self, offset: int) -> None:
        """The held marker at `offset` was committed (by its transaction's coordinator):
        it leaves the appends the next window carries."""
        tee = self.plog.tee or []
        if tee and tee[0][1][0].base_offset == offset:
            self.plog.tee = tee[1:]
        self.flushed = max(self.flushed, offset + 1)
        self.committed_to(offset + 1, False)

    def committed_to(self, end: int, log_start_written: bool) -> None:
        moved = end > self.committed
        self.committed = max(self.committed, end)
        if log_start_written:
            self.pending_log_start = None
        still = []
        for target, fut in self._waiting:
            if target <= self.committed and self.pending_log_start is None:
                if not fut.done():
                    fut.set_result(None)
            else:
                still.append((target, fut))
        self._waiting = still
        if moved:
            for callback in tuple(self._subscribers):
                try:
                    callback()
                except Exception:
                    log.exception("append subscriber failed for %s-%d", self.topic,
                                  self.partition)

    def fail(self, error: CommitError, *, unknown_until: int | None = None) -> None:
        """The partition is dropped: waiting commits fail with `error`, which says "not
        persisted" (NOT_LEADER, KAFKA_STORAGE_ERROR), except those a commit window
        already carries, whose outcome this broker will know: their window commits
        (`committed_to`), fails knowing that nothing of it landed (`fail` again, from
        its first offset), or loses its answer and the store reads PostgreSQL for it
        (`store._settle`); `abandon` answers what is left "possibly persisted".

        `unknown_until`: waiters whose appends end at or before it wait for that outcome
        (default: the end of the last window started; a window known not to have landed
        passes its first offset). Answering "not persisted" for a batch that did land is
        what must never happen: librdkafka takes a later batch's OUT_OF_ORDER_SEQUENCE
        answer as a gap, bumps its epoch and sends the batch again under new sequence
        numbers, a duplicate no broker can recognise (the 30-minute campaign's 30,071,
        docs/operations.md). Even "possibly persisted" (REQUEST_TIMED_OUT) is not safe
        when the next owner answers a later batch OUT_OF_ORDER_SEQUENCE (one in between
        never reached it): librdkafka bumps its epoch for that gap and sends the
        possibly persisted batch again too (a PostgreSQL restart under load in make
        test wrote a partition out of producer order). Hence waiting for the outcome."""
        self.broken = True
        bound = self.flushed if unknown_until is None else unknown_until
        still = []
        for target, fut in self._waiting:
            if fut.done():
                continue
            if target <= bound:
                still.append((target, fut))
            else:
                fut.set_exception(error)
        self._waiting = still

    def abandon(self, why: str, failed: set[tuple[str, int]]) -> None:
        """Waiters whose window's outcome will never be known here (the broker stops, the
        partition is removed, PostgreSQL stayed out of reach): REQUEST_TIMED_OUT, which
        clients take as "possibly persisted" and retry under the same sequence."""
        self.broken = True
        unknown = CommitError(E.request_timed_out, f"{why}; the commit of these appends "
                              "was under way, its outcome unknown (possibly persisted)",
                              failed)
        for _target, fut in self._waiting:
            if not fut.done():
                fut.set_exception(unknown)
        self._waiting = []
