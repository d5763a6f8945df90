"""The storage contract (`headwater.storage`), checked against every implementation.

Each test is a story run in one event loop over a fresh `PartitionStore` from every
entry of STORES; `Stores.reopen` closes it and opens a new one over the same durable
state, as a restart would. A store that loads partitions in the background (the shared
log) has an async `ready(topic, partition)`; appends become visible (high watermark,
reads, append subscribers) once `commit` covered them, which is why the stories commit
before they read.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode as E

from headwater.config import LogConfig
from headwater.log.store import LocalStore
from headwater.records.batch import build_batch, iter_batches
from headwater.storage import LogError, Partition, PartitionStore

TOPIC = "orders"
TOPIC_ID = uuid.UUID(int=42)
RESERVED = "__cluster_metadata"
CONFIG = LogConfig(segment_bytes=2048, index_interval_bytes=128, retention_ms=-1)

Factory = Callable[[Path], Awaitable[PartitionStore]]


async def _local(path: Path) -> PartitionStore:
    return LocalStore(path, lambda: 1_000, retention_check_ms=300_000,
                      cleaner_backoff_ms=15_000, reserved=(RESERVED,))


def _shared(request: pytest.FixtureRequest) -> Factory:
    from headwater.config import BrokerConfig
    from headwater.shared.settings import SharedSettings
    from headwater.shared.store import SharedStore

    postgres = request.getfixturevalue("postgres")
    versitygw = request.getfixturevalue("versitygw")
    database = f"contract_{uuid.uuid4().hex[:8]}"
    prefix = f"contract-{uuid.uuid4().hex[:8]}"

    async def make(path: Path) -> PartitionStore:
        from tests.support.engines import create_database

        settings = SharedSettings.from_config(BrokerConfig({
            "headwater.storage": "shared",
            "headwater.shared.database": await create_database(postgres, database),
            **versitygw.settings(prefix)}))
        store = SharedStore(settings, node_id=1, cache_dir=path / "cache",
                            now_ms=lambda: 1_000, linger_ms=1, lease_ms=10_000,
                            reserved=(RESERVED,))
        await store.open()
        return store
    return make


STORES = ["local", "shared"]


class Stores:
    """Opens the story's store (and reopens it) in the story's event loop."""

    def __init__(self, make: Factory, path: Path) -> None:
        self.make, self.path = make, path
        self.current: PartitionStore | None = None

    async def open(self) -> PartitionStore:
        self.current = await self.make(self.path)
        self.current.start()
        return self.current

    async def reopen(self) -> PartitionStore:
        assert self.current is not None
        await self.current.close()
        return await self.open()

    async def close(self) -> None:
        if self.current is not None:
            await self.current.close()


@pytest.fixture(params=STORES)
def story(request: pytest.FixtureRequest, tmp_path: Path
          ) -> Iterator[Callable[[Callable[[Stores, PartitionStore], Awaitable[None]]], None]]:
    make = _local if request.param == "local" else _shared(request)

    def run(body: Callable[[Stores, PartitionStore], Awaitable[None]]) -> None:
        async def main() -> None:
            stores = Stores(make, tmp_path)
            try:
                await body(stores, await stores.open())
            finally:
                await stores.close()
        asyncio.run(main())
    yield run


async def part(store: PartitionStore, partition: int = 0,
               config: LogConfig = CONFIG) -> Partition:
    store.ensure(TOPIC, partition, config, topic_id=TOPIC_ID)
    found = await store.ready(TOPIC, partition)
    assert found is not None
    return found


def batch(n: int = 1, ts: int = 1_000, **kwargs: int | bool) -> bytes:
    records = [(f"k{i}".encode(), f"v{i}".encode(), [], ts + i) for i in range(n)]
    return build_batch(records, **kwargs)  # type: ignore[arg-type]


async def committed(store: PartitionStore, partitions: list[Partition]) -> None:
    """Await the store's commit as a producer's acknowledgement would."""
    pending = store.commit(partitions)
    if pending is not None:
        assert inspect.isawaitable(pending)
        await pending


def test_partitions_come_and_go_with_ensure_and_remove(story) -> None:  # type: ignore[no-untyped-def]
    async def body(_s: Stores, store: PartitionStore) -> None:
        assert store.partition(TOPIC, 0) is None
        p = await part(store)
        assert (p.topic, p.partition) == (TOPIC, 0)
        assert (p.log_start_offset, p.log_end_offset, p.high_watermark) == (0, 0, 0)
        assert [x.partition for x in store.partitions()] == [0]
        assert store.remove(TOPIC, 0) is True
        assert store.partition(TOPIC, 0) is None
        assert store.remove(TOPIC, 0) is False
    story(body)


def test_a_reserved_topic_is_never_handed_out(story) -> None:  # type: ignore[no-untyped-def]
    async def body(_s: Stores, store: PartitionStore) -> None:
        store.ensure(RESERVED, 0, CONFIG)
        assert store.partition(RESERVED, 0) is None
    story(body)


def test_the_store_assigns_contiguous_offsets_and_keeps_batches_opaque(story) -> None:  # type: ignore[no-untyped-def]
    async def body(_s: Stores, store: PartitionStore) -> None:
        p = await part(store)
        sent = [batch(3), batch(1), batch(5)]
        results = [p.append(b, 2_000) for b in sent]
        assert [(r.base_offset, r.last_offset) for r in results] == [(0, 2), (3, 3), (4, 8)]
        assert p.log_end_offset == 9
        await committed(store, [p])
        assert p.high_watermark == 9
        data = p.read(0, 1 << 20)
        got = [data[pos:pos + h.size] for pos, h in iter_batches(data)]
        assert [h.base_offset for _pos, h in iter_batches(data)] == [0, 3, 4]
        # Only the base offset (8 bytes, outside the CRC) differs from what was sent.
        assert [g[8:] for g in got] == [s[8:] for s in sent]
    story(body)


def test_reads_return_whole_batches_within_the_bounds(story) -> None:  # type: ignore[no-untyped-def]
    async def body(_s: Stores, store: PartitionStore) -> None:
        p = await part(store)
        for _ in range(4):
            p.append(batch(2), 2_000)
        await committed(store, [p])
        first = p.read(2, 1)  # at least one batch (KIP-74), from the one holding offset 2
        assert [h.base_offset for _pos, h in iter_batches(first)] == [2]
        bounded = p.read(0, 1 << 20, upper_bound=4)
        assert [h.base_offset for _pos, h in iter_batches(bounded)] == [0, 2]
        assert p.read(8, 1 << 20) == b""
        with pytest.raises(LogError) as err:
            p.read(9, 1 << 20)
        assert err.value.code == E.offset_out_of_range
    story(body)


def test_nothing_is_visible_before_its_commit(story) -> None:  # type: ignore[no-untyped-def]
    async def body(_s: Stores, store: PartitionStore) -> None:
        p = await part(store)
        p.append(batch(2), 2_000)
        await committed(store, [p])
        p.append(batch(3), 2_000)
        # Local: visible at once (the commit only fsyncs); shared: after the commit.
        assert p.high_watermark in (2, 5)
        assert [h.base_offset for _pos, h in iter_batches(p.read(0, 1 << 20))] in (
            [0], [0, 2])
        await committed(store, [p])
        assert p.high_watermark == 5
    story(body)


def test_an_append_is_atomic(story) -> None:  # type: ignore[no-untyped-def]
    async def body(_s: Stores, store: PartitionStore) -> None:
        p = await part(store)
        p.append(batch(1), 2_000)
        corrupt = bytearray(batch(2))
        corrupt[-1] ^= 0xFF  # the CRC no longer matches
        with pytest.raises(LogError) as err:
            p.append(batch(3) + bytes(corrupt), 2_000)
        assert err.value.code == E.corrupt_message
        assert p.log_end_offset == 1  # the valid first batch was not written either
    story(body)


def test_idempotence_deduplicates_and_orders(story) -> None:  # type: ignore[no-untyped-def]
    async def body(_s: Stores, store: PartitionStore) -> None:
        p = await part(store)
        first = p.append(batch(2, producer_id=7, producer_epoch=0, base_sequence=0), 2_000)
        again = p.append(batch(2, producer_id=7, producer_epoch=0, base_sequence=0), 2_000)
        assert again.duplicate and (again.base_offset, again.last_offset) == (0, 1)
        assert not first.duplicate and p.log_end_offset == 2
        with pytest.raises(LogError) as gap:
            p.append(batch(1, producer_id=7, producer_epoch=0, base_sequence=5), 2_000)
        assert gap.value.code == E.out_of_order_sequence_number
        p.append(batch(1, producer_id=7, producer_epoch=1, base_sequence=0), 2_000)
        with pytest.raises(LogError) as stale:
            p.append(batch(1, producer_id=7, producer_epoch=0, base_sequence=2), 2_000)
        assert stale.value.code == E.invalid_producer_epoch
        assert p.knows_producer(7) and not p.knows_producer(8)
        assert [(s.producer_id, s.producer_epoch) for s in p.producer_states()] == [(7, 1)]
    story(body)


def test_transactions_hold_the_last_stable_offset_and_list_aborts(story) -> None:  # type: ignore[no-untyped-def]
    async def body(_s: Stores, store: PartitionStore) -> None:
        p = await part(store)
        p.append(batch(1), 2_000)
        txn = dict(producer_id=9, producer_epoch=0, is_transactional=True)
        p.append(batch(2, base_sequence=0, **txn), 2_000)
        await committed(store, [p])
        assert p.in_transaction(9, 0)
        assert (p.last_stable_offset, p.high_watermark) == (1, 3)
        marker = p.append_marker(9, 0, False, 0, 2_000)
        await committed(store, [p])
        assert marker == 3 and not p.in_transaction(9, 0)
        assert p.last_stable_offset == p.high_watermark == 4
        assert p.aborted_transactions(0, 4) == [(9, 1)]
        assert p.aborted_transactions(3, 4) == [(9, 1)]  # the range ends at its marker
        p.append(batch(1), 2_000)
        await committed(store, [p])
        assert p.aborted_transactions(4, 5) == []
    story(body)


def test_subscribers_hear_of_appends_but_not_of_duplicates(story) -> None:  # type: ignore[no-untyped-def]
    async def body(_s: Stores, store: PartitionStore) -> None:
        p = await part(store)
        seen: list[int] = []
        unsubscribe = p.subscribe_append(lambda: seen.append(p.high_watermark))
        idempotent = batch(1, producer_id=3, producer_epoch=0, base_sequence=0)
        p.append(idempotent, 2_000)
        await committed(store, [p])
        p.append(idempotent, 2_000)  # a retry: nothing new is visible
        await committed(store, [p])
        p.append_marker(3, 0, True, 0, 2_000)
        await committed(store, [p])
        unsubscribe()
        p.append(batch(1), 2_000)
        await committed(store, [p])
        assert seen == [1, 2]
    story(body)


def test_timestamps_and_log_start(story) -> None:  # type: ignore[no-untyped-def]
    async def body(_s: Stores, store: PartitionStore) -> None:
        p = await part(store)
        p.append(batch(2, ts=1_000), 2_000)
        p.append(batch(2, ts=5_000), 2_000)
        p.append(batch(1, ts=3_000), 2_000)
        await committed(store, [p])
        assert p.offset_for_timestamp(1_001) == (1, 1_001)
        assert p.offset_for_timestamp(4_000) == (2, 5_000)
        assert p.offset_for_timestamp(9_000) is None
        assert p.max_timestamp_entry() == (3, 5_001)
        assert p.delete_records_before(3) == 3
        assert p.log_start_offset == 3 and p.delete_records_before(1) == 3
        with pytest.raises(LogError) as err:
            p.read(1, 1 << 20)
        assert err.value.code == E.offset_out_of_range
        with pytest.raises(LogError):
            p.delete_records_before(99)
    story(body)


def test_committed_appends_survive_a_restart(story) -> None:  # type: ignore[no-untyped-def]
    async def body(stores: Stores, store: PartitionStore) -> None:
        p = await part(store)
        sent = batch(4, producer_id=11, producer_epoch=0, base_sequence=0)
        p.append(sent, 2_000)
        await committed(store, [p])
        p.delete_records_before(1)
        await committed(store, [p])
        before = p.read(1, 1 << 20)
        fresh = await stores.reopen()
        q = await part(fresh)
        assert (q.log_start_offset, q.log_end_offset, q.high_watermark) == (1, 4, 4)
        assert q.read(1, 1 << 20) == before
        # The producer's state came back with the data: its retry is still a duplicate.
        assert q.append(sent, 2_000).duplicate
    story(body)


def test_commit_covers_what_the_flush_policy_asks(story) -> None:  # type: ignore[no-untyped-def]
    async def body(_s: Stores, store: PartitionStore) -> None:
        p = await part(store, 1, LogConfig(segment_bytes=2048, flush_messages=1))
        p.append(batch(1), 2_000)
        await committed(store, [p])
        assert store.commit([p]) is None  # nothing left to make durable
    story(body)
