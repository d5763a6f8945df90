"""ProduceService over fakes of what it takes (a store, the image, access, quotas): the
rules a Produce answers by, and its wait for durability, without a broker."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.errors import ErrorCode as E

from headwater.produce.service import ADMIN_CLIENT_ID, ProduceService
from headwater.records.batch import build_batch
from headwater.storage.errors import CommitError
from headwater.storage.partition import AppendResult
from headwater.txn.verification import ProduceVerification

pytestmark = pytest.mark.timeout(30)


def on_a_loop(test: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[], None]:
    """An async scenario run as a plain test (its own event loop)."""
    @functools.wraps(test)
    def run() -> None:
        asyncio.run(test())
    return run


class FakePartition:
    def __init__(self, topic: str, index: int, min_isr: int = 1) -> None:
        self.topic, self.partition = topic, index
        self.config = SimpleNamespace(min_insync_replicas=min_isr)
        self.appended: list[bytes] = []

    def append(self, data: bytes, now_ms: int) -> AppendResult:
        base = len(self.appended)
        self.appended.append(bytes(data))
        return AppendResult(base, base, -1, 0)

    def in_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        return False


class FakeStore:
    """Partitions by (topic, index); `commit` answers with the future `durable` holds."""

    def __init__(self, *parts: FakePartition) -> None:
        self.parts = {(p.topic, p.partition): p for p in parts}
        self.durable: asyncio.Future[None] | None = None
        self.committed: list[list[Any]] = []

    def partition(self, topic: str, index: int) -> FakePartition | None:
        return self.parts.get((topic, index))

    def absent_error(self, topic: str, index: int) -> int:
        return E.not_leader_or_follower

    def commit(self, partitions: list[Any]) -> asyncio.Future[None]:
        self.committed.append(list(partitions))
        assert self.durable is not None
        return self.durable


class Image:
    def __init__(self, *names: str) -> None:
        self.names = names

    def topic(self, name: str) -> Any:
        return SimpleNamespace(name=name, partitions=()) if name in self.names else None

    def topic_by_id(self, topic_id: Any) -> Any:
        return None


NOBODY_CHECKED = SimpleNamespace(enabled=False, allowed=lambda *a: True)


def service(store: FakeStore, *topics: str, in_sync: int = 1) -> ProduceService:
    return ProduceService(store, lambda: Image(*topics), NOBODY_CHECKED,  # type: ignore[arg-type]
                          ProduceVerification(None, enabled=False), lambda t, p: in_sync,
                          lambda ctx, size: 0, lambda: 1000, transactions=False)


def request(topic: str, acks: int = -1, timeout_ms: int = 30_000) -> Any:
    records = build_batch([(b"k", b"v", [], 1000)])
    return SimpleNamespace(acks=acks, transactional_id=None,
                           timeout=timedelta(milliseconds=timeout_ms),
                           topic_data=[SimpleNamespace(name=topic, partition_data=[
                               SimpleNamespace(index=0, records=records)])])


def context(client_id: str = "app") -> Any:
    return SimpleNamespace(client_id=client_id, api_version=9, attrs={})


def only_partition(response: dict[str, Any]) -> dict[str, Any]:
    (topic,) = response["responses"]
    (entry,) = topic["partition_responses"]
    return dict(entry)


@on_a_loop
async def test_the_answer_waits_for_durability_then_carries_the_offset() -> None:
    store = FakeStore(FakePartition("orders", 0))
    store.durable = asyncio.get_running_loop().create_future()
    pending = asyncio.ensure_future(service(store, "orders").handle(context(),
                                                                    request("orders")))
    await asyncio.sleep(0.05)
    assert not pending.done()  # nothing acknowledged before the commit
    store.durable.set_result(None)
    entry = only_partition(await pending)
    assert (entry["error_code"], entry["base_offset"]) == (0, 0)


@on_a_loop
async def test_a_failed_commit_answers_its_error_never_an_offset() -> None:
    store = FakeStore(FakePartition("orders", 0))
    store.durable = asyncio.get_running_loop().create_future()
    store.durable.set_exception(CommitError(E.not_leader_or_follower, "lease lost",
                                            {("orders", 0)}))
    entry = only_partition(await service(store, "orders").handle(context(),
                                                                 request("orders")))
    assert (entry["error_code"], entry["base_offset"]) == (E.not_leader_or_follower, -1)


@on_a_loop
async def test_a_commit_slower_than_the_request_timeout_answers_request_timed_out() -> None:
    store = FakeStore(FakePartition("orders", 0))
    store.durable = asyncio.get_running_loop().create_future()
    entry = only_partition(await service(store, "orders").handle(
        context(), request("orders", timeout_ms=100)))
    assert (entry["error_code"], entry["base_offset"]) == (E.request_timed_out, -1)
    store.durable.set_result(None)


@on_a_loop
async def test_acks_0_gets_no_answer_but_is_still_committed() -> None:
    store = FakeStore(FakePartition("orders", 0))
    store.durable = asyncio.get_running_loop().create_future()
    store.durable.set_result(None)
    assert service(store, "orders").handle(context(), request("orders", acks=0)) is None
    assert len(store.committed) == 1 and store.parts[("orders", 0)].appended


def test_clients_may_not_write_the_coordinators_topics() -> None:
    store = FakeStore(FakePartition("__consumer_offsets", 0))
    answer = service(store, "__consumer_offsets").handle(context(),
                                                          request("__consumer_offsets"))
    entry = only_partition(answer)
    assert entry["error_code"] == E.invalid_topic_exception
    assert "Cannot append to internal topic" in entry["error_message"]
    assert not store.parts[("__consumer_offsets", 0)].appended and not store.committed


@on_a_loop
async def test_the_admin_client_id_may_write_them() -> None:
    store = FakeStore(FakePartition("__consumer_offsets", 0))
    store.durable = asyncio.get_running_loop().create_future()
    store.durable.set_result(None)
    entry = only_partition(await service(store, "__consumer_offsets").handle(
        context(ADMIN_CLIENT_ID), request("__consumer_offsets")))
    assert entry["error_code"] == 0


def test_acks_all_below_min_insync_replicas_is_refused() -> None:
    store = FakeStore(FakePartition("orders", 0, min_isr=2))
    entry = only_partition(service(store, "orders", in_sync=1).handle(context(),
                                                                      request("orders")))
    assert entry["error_code"] == E.not_enough_replicas
    assert not store.committed


def test_an_unknown_topic_and_an_absent_partition() -> None:
    store = FakeStore()
    assert only_partition(service(store).handle(context(), request("nope")))[
        "error_code"] == E.unknown_topic_or_partition
    assert only_partition(service(store, "orders").handle(context(), request("orders")))[
        "error_code"] == E.not_leader_or_follower
