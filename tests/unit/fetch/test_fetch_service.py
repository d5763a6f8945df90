"""The fetch service over a real local store: session plans, reads within the byte
budget, the long poll woken by an append, incremental answers and read_committed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode as E

from headwater.config import LogConfig
from headwater.fetch.service import READ_COMMITTED, FetchService, epoch_error
from headwater.fetch.sessions import CachedPartition, FetchSessionCache, FetchSessionError
from headwater.log.store import LocalStore
from headwater.records.batch import build_batch
from headwater.storage import PartitionWaiters

CONFIG = LogConfig(segment_bytes=1 << 20, retention_ms=-1)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LocalStore]:
    s = LocalStore(tmp_path, lambda: 1_000, retention_check_ms=300_000,
                   cleaner_backoff_ms=15_000)
    for p in (0, 1):
        s.ensure("t", p, CONFIG)
    yield s
    asyncio.run(s.close())


def batch(n: int = 1, **kw: int | bool) -> bytes:
    return build_batch([(b"k", b"v" * 50, [], 1_000 + i) for i in range(n)],
                       **kw)  # type: ignore[arg-type]


def service(store: LocalStore) -> FetchService:
    return FetchService(store, PartitionWaiters(), FetchSessionCache(4),
                        lambda: time.monotonic_ns() // 1_000_000)


def append(store: LocalStore, partition: int, data: bytes) -> None:
    part = store.partition("t", partition)
    assert part is not None
    part.append(data, 1_000)


def test_a_full_session_then_incremental_fetches_and_forgetting(store: LocalStore) -> None:
    svc = service(store)
    first = svc.plan(0, 0, False, [(("t", 0), 0, 1000, None), (("t", 1), 0, 1000, None)],
                     [])
    assert first.full and first.session is not None and list(first.wanted) == [
        ("t", 0), ("t", 1)]
    sid = first.session.session_id
    svc.answer(first, asyncio.run(svc.read(first.wanted, 0, 1 << 20, 0, 0)))
    inc = svc.plan(sid, 1, False, [(("t", 0), 5, 1000, None)], [("t", 1)])
    assert not inc.full and list(inc.wanted) == [("t", 0)]
    assert inc.wanted[("t", 0)].fetch_offset == 5
    svc.answer(inc, asyncio.run(svc.read(inc.wanted, 0, 1 << 20, 0, 0)))  # epoch 1 -> 2
    with pytest.raises(FetchSessionError) as stale:
        svc.plan(sid, 1, False, [], [])  # the epoch moved on
    assert stale.value.code == E.invalid_fetch_session_epoch
    sessionless = svc.plan(0, -1, True, [(("t", 0), 0, 10, None)], [])
    assert sessionless.session is None and list(sessionless.wanted) == [("t", 0)]


def test_an_incremental_answer_carries_only_news(store: LocalStore) -> None:
    svc = service(store)
    append(store, 0, batch(2))
    plan = svc.plan(0, 0, False, [(("t", 0), 0, 1000, None), (("t", 1), 0, 1000, None)],
                    [])
    full = svc.answer(plan, asyncio.run(svc.read(plan.wanted, 0, 1 << 20, 0, 0)))
    assert [key for key, _c, _d in full] == [("t", 0), ("t", 1)]  # a full answer: all
    assert plan.session is not None
    inc = svc.plan(plan.session.session_id, 1, False, [(("t", 0), 2, 1000, None)], [])
    quiet = svc.answer(inc, asyncio.run(svc.read(inc.wanted, 0, 1 << 20, 0, 0)))
    assert quiet == []  # nothing moved
    append(store, 1, batch(1))
    inc = svc.plan(plan.session.session_id, 2, False, [], [])
    news = svc.answer(inc, asyncio.run(svc.read(inc.wanted, 0, 1 << 20, 0, 0)))
    assert [(key, d.high_watermark) for key, _c, d in news] == [(("t", 1), 1)]


def test_the_budget_always_lets_the_first_batch_through(store: LocalStore) -> None:
    svc = service(store)
    append(store, 0, batch(20))
    append(store, 1, batch(20))
    wanted = {("t", 0): CachedPartition(0, 1 << 20), ("t", 1): CachedPartition(0, 1 << 20)}
    result = asyncio.run(svc.read(wanted, 0, 10, 0, 0))
    sizes = [len(d.records) for _k, _c, d in result.partitions]
    assert sizes[0] > 10 and sizes[1] == 0  # KIP-74: one batch over the limit, then none


def test_a_fetch_waits_for_min_bytes_until_an_append(store: LocalStore) -> None:
    svc = service(store)
    wanted = {("t", 0): CachedPartition(0, 1 << 20)}

    async def scenario() -> tuple[float, int]:
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, append, store, 0, batch(1))
        start = time.monotonic()
        result = await svc.read(wanted, 0, 1 << 20, 1, 10.0)
        return time.monotonic() - start, result.total_bytes

    waited, total = asyncio.run(scenario())
    assert total > 0 and waited < 5
    quiet = asyncio.run(svc.read({("t", 1): CachedPartition(0, 1 << 20)}, 0, 1 << 20, 1,
                                 0.1))
    assert quiet.total_bytes == 0  # timed out with nothing


def test_errors_answer_at_once_with_no_watermarks(store: LocalStore) -> None:
    svc = service(store)
    append(store, 0, batch(1))
    wanted = {("t", 0): CachedPartition(9, 1 << 20), ("gone", 0): CachedPartition(0, 100)}
    start = time.monotonic()
    result = asyncio.run(svc.read(wanted, 0, 1 << 20, 1, 10.0))
    assert time.monotonic() - start < 5
    codes = [(d.error_code, d.high_watermark) for _k, _c, d in result.partitions]
    assert codes == [(E.offset_out_of_range, -1), (E.unknown_topic_or_partition, -1)]


def test_a_fetch_checks_the_clients_leader_epoch(store: LocalStore) -> None:
    """KIP-320, as Kafka's leader: a client that saw a newer leader epoch than this
    broker's (a deposed leader that has not heard yet) gets UNKNOWN_LEADER_EPOCH, an
    older one FENCED_LEADER_EPOCH; neither gets data, nor OFFSET_OUT_OF_RANGE."""
    svc = service(store)
    append(store, 0, batch(3))
    plan = svc.plan(0, 0, False, [(("t", 0), 9, 1000, None)], [], {("t", 0): 1})
    newer = asyncio.run(svc.read(plan.wanted, 0, 1 << 20, 0, 0))
    assert [(d.error_code, d.records) for _k, _c, d in newer.partitions] == [
        (E.unknown_leader_epoch, b"")]
    plan = svc.plan(0, 0, False, [(("t", 0), 0, 1000, None)], [], {("t", 0): 0})
    same = asyncio.run(svc.read(plan.wanted, 0, 1 << 20, 0, 0))
    assert same.partitions[0][2].error_code == 0 and same.partitions[0][2].records
    assert epoch_error(3, 5) == E.fenced_leader_epoch  # the client's view is older
    assert epoch_error(-1, 5) == 0  # not given (Fetch before v9)


def test_read_committed_stops_at_the_lso_and_lists_aborts(store: LocalStore) -> None:
    svc = service(store)
    part = store.partition("t", 0)
    assert part is not None
    txn = dict(producer_id=4, producer_epoch=0, is_transactional=True)
    part.append(batch(2, base_sequence=0, **txn), 1_000)
    wanted = {("t", 0): CachedPartition(0, 1 << 20)}
    open_txn = asyncio.run(svc.read(wanted, READ_COMMITTED, 1 << 20, 0, 0))
    data = open_txn.partitions[0][2]
    assert (data.records, data.last_stable_offset, data.aborted) == (b"", 0, [])
    part.append_marker(4, 0, False, 0, 1_000)
    done = asyncio.run(svc.read(wanted, READ_COMMITTED, 1 << 20, 0, 0)).partitions[0][2]
    assert done.records and done.aborted == [(4, 0)]
    plain = asyncio.run(svc.read(wanted, 0, 1 << 20, 0, 0)).partitions[0][2]
    assert plain.aborted is None
