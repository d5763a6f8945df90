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
        coordinator._together = {gone: (pending, 7)}
        coordinator.runtime = _Runtime({3})  # type: ignore[assignment]
        coordinator._drop_stale_claims([("t", 0), ("t", 1), ("t", 2)])
        assert coordinator._claims == {("t", 1): (here, 3)}
        assert gone not in coordinator._together
        coordinator.runtime.served.clear()  # type: ignore[attr-defined]
        coordinator._drop_stale_claims([("t", 1)])
        assert coordinator._claims == {}
    finally:
        loop.close()


def test_a_reloaded_shard_starts_its_jobs_markers_afresh() -> None:
    """An attempt at a job's markers from before its shard was reloaded (a commit of the
    shard failed, as when PostgreSQL restarts) is dropped at the reload: kept, a hung
    one held the transaction in PrepareCommit for good (InitProducerId answered
    CONCURRENT_TRANSACTIONS for minutes, read_committed consumers stopped at it)."""
    coordinator = object.__new__(TransactionCoordinator)
    old, other = ("tx-1", 5, 0), ("tx-2", 6, 0)
    loop = asyncio.new_event_loop()
    try:
        hung, elsewhere = loop.create_future(), loop.create_future()
        coordinator._claims = {("t", 0): (old, 1), ("t", 1): (other, 2)}
        coordinator._together = {old: (hung, 1), other: (elsewhere, 2)}
        driven: list[int] = []
        coordinator._drive = driven.append  # type: ignore[method-assign]
        coordinator._loaded(1)
        assert hung.cancelled() and not elsewhere.done()
        assert coordinator._together == {other: (elsewhere, 2)}
        assert coordinator._claims == {("t", 1): (other, 2)} and driven == [1]
    finally:
        loop.close()


def test_a_shard_held_but_not_serving_this_instant_is_driven_again() -> None:
    """A drive of a `__transaction_state` shard loaded here that cannot serve this
    instant (its partition's lease renewed late by this broker's clock) is tried again;
    dropped, the shard's PrepareCommit transaction never got its markers and stayed open
    for good though its producer was told it committed (make chaos-short in CI: 100
    "lost", 1 torn). A shard not held here (moved away) is left to its next load."""

    class Held(_Runtime):
        def holds(self, partition: int) -> bool:
            return partition == 1

    coordinator = object.__new__(TransactionCoordinator)
    coordinator.runtime = Held(set())  # type: ignore[assignment]
    retried: list[int] = []
    coordinator._retry = retried.append  # type: ignore[method-assign]
    coordinator._complete_pending(1)  # held, lease lapsed: NOT_COORDINATOR this instant
    coordinator._complete_pending(2)  # moved away
    assert retried == [1]
