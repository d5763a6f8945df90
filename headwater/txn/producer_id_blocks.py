"""Producer ids for a broker of a cluster, in blocks from the controller (KIP-730), as
Kafka's RPCProducerIdManager hands them out.

The transaction coordinator and InitProducerId for an idempotent producer call
`allocate_producer_id()` synchronously. It hands out the next id of the current block;
once 90% of that block is used, the next block is asked for in the background
(AllocateProducerIds to the controller, or the controller's own allocator when this
broker is the controller: `fetch`), so a busy broker rarely waits. When no id is left,
the next block is asked for and NotReady(COORDINATOR_LOAD_IN_PROGRESS) is raised: the
client retries (Kafka answers the same). A failed ask is retried with backoff until a
block comes. A block is used only once the controller has it durably in the shared
metadata log, so ids are never handed out twice, whichever broker or controller dies.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from kio.schema.errors import ErrorCode as E

from ..coordinator.runtime import NotReady

log = logging.getLogger("headwater.txn")

PREFETCH_RATIO = 0.9  # Kafka's RPCProducerIdManager.PidPrefetchThreshold
MAX_PRODUCER_ID = (1 << 63) - 1
RETRY_BACKOFF_S = 0.05
MAX_BACKOFF_S = 1.0

Fetch = Callable[[], Awaitable[tuple[int, int]]]


class ProducerIdBlocks:
    def __init__(self, fetch: Fetch, *, retry_backoff_s: float = RETRY_BACKOFF_S,
                 max_backoff_s: float = MAX_BACKOFF_S) -> None:
        self._fetch = fetch
        self._retry_backoff_s = retry_backoff_s
        self._max_backoff_s = max_backoff_s
        # The current block: its first id, the next id to hand out, its end (exclusive).
        self._first = self._next = self._end = 0
        self._prefetched: tuple[int, int] | None = None  # (first, end) of the next block
        self._task: asyncio.Task[None] | None = None
        self._stopped = False

    # ---- the ProducerIds seam --------------------------------------------------------
    def allocate_producer_id(self) -> int:
        """The next id; NotReady(COORDINATOR_LOAD_IN_PROGRESS) while no block has one."""
        if self._next >= self._end:
            if self._prefetched is None:
                self._request()
                raise NotReady(E.coordinator_load_in_progress)
            self._first, self._end = self._prefetched
            self._next = self._first
            self._prefetched = None
        pid = self._next
        self._next += 1
        if self._next - self._first >= (self._end - self._first) * PREFETCH_RATIO:
            self._request()
        return pid

    # ---- asking for blocks -----------------------------------------------------------
    def start(self) -> None:
        """Ask for the first block now, so the first producer does not wait for it."""
        self._request()

    async def stop(self) -> None:
        self._stopped = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    def available(self) -> int:
        """Ids left in the current block and the one fetched after it."""
        left = self._end - self._next
        if self._prefetched is not None:
            left += self._prefetched[1] - self._prefetched[0]
        return left

    def _request(self) -> None:
        """Ask for the next block unless one is asked for or already here."""
        if self._stopped or self._prefetched is not None or (
                self._task is not None and not self._task.done()):
            return
        self._task = asyncio.ensure_future(self._fetch_next())

    async def _fetch_next(self) -> None:
        backoff = self._retry_backoff_s
        while True:
            try:
                start, length = await self._fetch()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.info("producer id block not allocated (retried in %.2f s): %s: %s",
                         backoff, type(exc).__name__, exc)
            else:
                error = self._invalid(start, length)
                if error is None:
                    self._prefetched = (start, start + length)
                    log.debug("producer id block [%d, %d) allocated", start, start + length)
                    return
                log.error("producer id block refused: %s", error)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self._max_backoff_s)

    def _invalid(self, start: int, length: int) -> str | None:
        """Kafka's checks of an AllocateProducerIds answer."""
        if start < 0 or length <= 0 or start > MAX_PRODUCER_ID - length:
            return f"producer id block [{start}, +{length}) is invalid"
        if start < self._end:
            return (f"producer id block starting at {start} is not monotonic with the "
                    f"current block, which ends at {self._end}")
        return None
