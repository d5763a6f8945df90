"""A transaction coordinator's marker claims of a `__transaction_state` shard it no
longer serves are dropped (the fault campaign: kept, they stopped every later transaction
on those partitions for good, its InitProducerId answering CONCURRENT_TRANSACTIONS)."""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode as E

from headwater.coordinator.runtime import NotReady
from headwater.txn.coordinator import TransactionCoordinator


class _Runtime:
    """Serves the `__transaction_state` shards in `served`, NOT_COORDINATOR elsewhere."""

    def __init__(self, served: set[int]) -> None:
        self.served = served

    def shard(self, partition: int) -> object:
        if partition not in self.served:
            raise NotReady(E.not_coordinator)
        return object()


def test_claims_of_shards_moved_away_are_dropped_and_the_others_kept() -> None:
    coordinator = object.__new__(TransactionCoordinator)
    gone, here = ("tx-gone", 1, 0), ("tx-here", 2, 0)
    loop = asyncio.new_event_loop()
    try:
        pending = loop.create_future()
        coordinator._claims = {("t", 0): (gone, 7), ("t", 1): (here, 3)}
        coordinator._together = {gone: pending}
        coordinator.runtime = _Runtime({3})  # type: ignore[assignment]
        coordinator._drop_stale_claims([("t", 0), ("t", 1), ("t", 2)])
        assert coordinator._claims == {("t", 1): (here, 3)}
        assert gone not in coordinator._together
        coordinator.runtime.served.clear()  # type: ignore[attr-defined]
        coordinator._drop_stale_claims([("t", 1)])
        assert coordinator._claims == {}
    finally:
        loop.close()
