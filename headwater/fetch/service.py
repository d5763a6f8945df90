"""A Fetch's work, in three steps the handler calls: `plan` (the session rules: which
partitions this fetch covers, from the request and the incremental session), `read`
(whole batches per partition through the storage seam, parked until `min_bytes` arrive
or `max_wait` runs out) and `answer` (what the response carries: for an incremental
session only the partitions with news, and the session's epoch moves on).

Records are never decoded: a partition's answer is the bytes of whole batches from the
one holding the fetch offset. read_committed reads only below the last stable offset and
lists the aborted transactions overlapping the returned batches, so the consumer can drop
their records; a marker that ends a transaction wakes parked fetches like data does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode as E

from ..records.batch import batches_end_offset
from ..storage.errors import LogError
from ..storage.partition import Partition
from ..storage.store import PartitionSource
from ..storage.waiters import PartitionWaiters
from .sessions import CachedPartition, FetchSession, FetchSessionCache, PartitionKey

READ_COMMITTED = 1
NO_LIMIT = 0x7FFFFFFF


@dataclass(slots=True)
class FetchPlan:
    """The partitions a fetch covers, in order, with what the session remembers."""

    session: FetchSession | None
    full: bool
    wanted: dict[PartitionKey, CachedPartition]


@dataclass(slots=True)
class PartitionData:
    """One partition's answer (Kafka's FetchPartitionData)."""

    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: bytes = b""
    aborted: list[tuple[int, int]] | None = None  # read_committed: (producer id, first)

    def changed_since(self, cached: CachedPartition) -> bool:
        """Whether an incremental session must report this partition."""
        return bool(self.records or self.error_code
                    or self.high_watermark != cached.high_watermark
                    or self.log_start_offset != cached.log_start_offset
                    or self.last_stable_offset != cached.last_stable_offset)


@dataclass(slots=True)
class FetchResult:
    partitions: list[tuple[PartitionKey, CachedPartition, PartitionData]] = field(
        default_factory=list)
    total_bytes: int = 0


class FetchService:
    def __init__(self, partitions: PartitionSource, waiters: PartitionWaiters,
                 sessions: FetchSessionCache, clock: Callable[[], int]) -> None:
        self.partitions = partitions
        self.waiters = waiters
        self.sessions = sessions
        self._clock = clock

    # ---- sessions ----------------------------------------------------------------------
    def plan(self, session_id: int, epoch: int, sessionless: bool,
             requested: Iterable[tuple[PartitionKey, int, int, Any]],
             forgotten: Iterable[PartitionKey],
             leader_epochs: Mapping[PartitionKey, int] | None = None) -> FetchPlan:
        """The partitions this fetch covers: (key, fetch offset, max bytes, topic id) of
        the request over the session's. `sessionless`: a version before fetch sessions.
        Raises FetchSessionError (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH)."""
        session, full = (None, True) if sessionless else self.sessions.resolve(
            session_id, epoch, self._clock())
        wanted: dict[PartitionKey, CachedPartition]
        if session is None:
            wanted = {}
        else:
            if full:
                session.partitions.clear()
            wanted = session.partitions
        epochs = leader_epochs or {}
        for key, offset, max_bytes, topic_id in requested:
            cached = wanted.get(key)
            if cached is None:
                cached = wanted[key] = CachedPartition(offset, max_bytes, topic_id)
            else:
                cached.fetch_offset, cached.max_bytes = offset, max_bytes
            cached.current_leader_epoch = epochs.get(key, -1)
        for key in forgotten:
            wanted.pop(key, None)
        return FetchPlan(session, full, wanted)

    def answer(self, plan: FetchPlan, result: FetchResult
               ) -> list[tuple[PartitionKey, CachedPartition, PartitionData]]:
        """The partitions the response carries (an incremental session: only those with
        news), remembered for the next incremental fetch; the session moves on."""
        incremental = plan.session is not None and not plan.full
        out = []
        for key, cached, data in result.partitions:
            if incremental and not data.changed_since(cached):
                continue
            cached.high_watermark = data.high_watermark
            cached.log_start_offset = data.log_start_offset
            cached.last_stable_offset = data.last_stable_offset
            out.append((key, cached, data))
        if incremental:
            assert plan.session is not None
            self.sessions.advance(plan.session)
        return out

    # ---- reading -----------------------------------------------------------------------
    async def read(self, wanted: dict[PartitionKey, CachedPartition], isolation: int,
                   max_bytes: int, min_bytes: int, max_wait_s: float,
                   quota_cap: int | None = None, answer_now: bool = False) -> FetchResult:
        """Read every wanted partition within `max_bytes` (KIP-74: the first batch always
        fits); with fewer than `min_bytes` and no error, wait for an append and read
        again, until `max_wait_s` passed. `answer_now`: something else in the response
        (an unknown partition) means no waiting."""
        deadline = None
        while True:
            budget = max_bytes if max_bytes > 0 else NO_LIMIT
            if quota_cap is not None:
                budget = min(budget, quota_cap)
            result = FetchResult()
            errors = False
            for key, cached in wanted.items():
                data = self._read_partition(key, cached, budget, isolation)
                size = len(data.records)
                if result.total_bytes == 0 and size > budget:
                    budget = 0
                else:
                    budget -= size
                result.total_bytes += size
                errors = errors or data.error_code != 0
                result.partitions.append((key, cached, data))
            if result.total_bytes >= min_bytes or errors or answer_now or max_wait_s <= 0:
                return result
            now = self._clock()
            if deadline is None:
                deadline = now + max_wait_s * 1000
            remaining = (deadline - now) / 1000
            if remaining <= 0:
                return result
            parts = [p for p in (self.partitions.partition(*k) for k in wanted) if p]
            if not parts:
                return result
            await self.waiters.wait(parts, remaining)

    def _read_partition(self, key: PartitionKey, cached: CachedPartition, budget: int,
                        isolation: int) -> PartitionData:
        part = self.partitions.partition(*key)
        committed = isolation == READ_COMMITTED
        if part is None:
            return PartitionData(self.partitions.absent_error(*key),
                                 aborted=[] if committed else None)
        fenced = epoch_error(cached.current_leader_epoch, part.leader_epoch)
        if fenced:
            return PartitionData(fenced, aborted=[] if committed else None)
        hw, lso = part.high_watermark, part.last_stable_offset
        data = PartitionData(0, hw, lso, part.log_start_offset,
                             aborted=[] if committed else None)
        limit = min(cached.max_bytes, budget)
        try:
            upper = lso if committed else hw
            records = part.read(cached.fetch_offset, limit, upper) if limit > 0 else b""
            if records and committed:
                data.aborted = aborted_in(part, cached.fetch_offset, upper, records)
        except LogError as exc:
            # As Kafka: a partition that fails its read (OFFSET_OUT_OF_RANGE) reports no
            # watermarks (-1), not the log's.
            return PartitionData(exc.code, aborted=data.aborted)
        data.records = records
        return data


def epoch_error(current: int, leader: int) -> int:
    """Kafka's check of a fetch's current_leader_epoch (KIP-320) against the leader's:
    a client that knows a newer leader than this broker's partition (this broker was
    deposed and has not heard yet) gets UNKNOWN_LEADER_EPOCH, one with an older view
    FENCED_LEADER_EPOCH; both refresh their metadata and retry. Never the stale
    leader's OFFSET_OUT_OF_RANGE, which resets a consumer's position."""
    if current < 0 or current == leader:
        return 0
    return E.unknown_leader_epoch if current > leader else E.fenced_leader_epoch


def aborted_in(part: Partition, fetch_offset: int, upper: int, data: bytes
               ) -> list[tuple[int, int]]:
    """The aborted transactions overlapping the batches in `data` (read from
    `fetch_offset` below `upper`). Looked up over the whole readable range first, which
    is cheap and nearly always empty; only when it is not are the returned batches walked
    to find where they end, so the list covers exactly what was returned (Kafka)."""
    found = part.aborted_transactions(fetch_offset, upper)
    if not found:
        return []
    end = batches_end_offset(data)
    return [(pid, first) for pid, first in found if first < end]
