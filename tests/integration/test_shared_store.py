"""The shared store between brokers and on bad days, on a real PostgreSQL and versitygw:
a broker paused past its lease writes nothing when it wakes; an object store that is
down fails the commit (nothing acknowledged) and the partition comes back from what
was committed."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode as E

from headwater.config import BrokerConfig, LogConfig
from headwater.records.batch import build_batch
from headwater.shared.partition import SharedPartition
from headwater.shared.settings import SharedSettings
from headwater.shared.store import SharedStore
from headwater.storage.errors import CommitError
from tests.support.engines import PostgresServer, VersityGateway, create_database

pytestmark = pytest.mark.timeout(120)
CONFIG = LogConfig(segment_bytes=1 << 20, retention_ms=-1)


def batch(n: int = 1, **kw: int | bool) -> bytes:
    return build_batch([(b"k", b"v", [], 1_000 + i) for i in range(n)],
                       **kw)  # type: ignore[arg-type]


async def settings_for(postgres: PostgresServer, gw: VersityGateway) -> SharedSettings:
    return SharedSettings.from_config(BrokerConfig({
        "headwater.storage": "shared",
        "headwater.shared.database": await create_database(postgres),
        **gw.settings(f"p-{uuid.uuid4().hex[:6]}")}))


async def store(settings: SharedSettings, node: int, path: Path, lease_ms: int,
                renew: bool = True) -> SharedStore:
    s = SharedStore(settings, node, path / f"cache{node}", lambda: 1_000, linger_ms=1,
                    lease_ms=lease_ms)
    await s.open()
    if renew:
        s.start()
    else:  # a broker that stopped renewing (paused): only its flusher (and taker) run
        s._tasks.append(asyncio.create_task(s.committer.run()))
    return s


async def taken_again(s: SharedStore, p: object) -> SharedPartition:
    """Partition t-0 once `s` has dropped `p` and taken it again from what was
    committed."""
    deadline = time.monotonic() + 30
    while True:
        q = await s.ready("t", 0)
        if q is not None and q is not p:
            return q
        assert time.monotonic() < deadline
        await asyncio.sleep(0.1)


def test_a_broker_paused_past_its_lease_writes_nothing(postgres: PostgresServer,
                                                       versitygw: VersityGateway,
                                                       tmp_path: Path) -> None:
    tid = uuid.uuid4()

    async def story() -> tuple[int, int, list[tuple[int, int]]]:
        settings = await settings_for(postgres, versitygw)
        a = await store(settings, 1, tmp_path, lease_ms=400, renew=False)
        b = await store(settings, 2, tmp_path, lease_ms=10_000)
        try:
            a.ensure("t", 0, CONFIG, topic_id=tid)
            pa = await a.ready("t", 0)
            assert pa is not None and pa.epoch == 1
            pa.append(batch(2), 1_000)
            await a.commit([pa])  # type: ignore[misc]
            b.ensure("t", 0, CONFIG, topic_id=tid)
            assert await b.ready("t", 0) is None  # held by a
            deadline = time.monotonic() + 20
            pb = None
            while pb is None:  # a stopped renewing: its lease runs out
                assert time.monotonic() < deadline
                await asyncio.sleep(0.1)
                b.ensure("t", 0, CONFIG, topic_id=tid)
                pb = await b.ready("t", 0)
            assert pb.epoch == 2 and pb.high_watermark == 2
            # a wakes up and writes under its old epoch: refused, nothing acknowledged.
            pa.append(batch(3), 1_000)
            with pytest.raises(CommitError) as refused:
                await a.commit([pa])  # type: ignore[misc]
            pb.append(batch(1), 1_000)
            await b.commit([pb])  # type: ignore[misc]
            async with b.pool.acquire() as conn:
                rows = [(r["base_offset"], r["last_offset"]) for r in await conn.fetch(
                    "SELECT base_offset, last_offset FROM batches ORDER BY base_offset")]
                epoch = await conn.fetchval("SELECT writer_epoch FROM partitions")
            return refused.value.code, epoch, rows
        finally:
            await a.close()
            await b.close()

    code, epoch, rows = asyncio.run(story())
    assert code == E.not_leader_or_follower
    assert epoch == 2 and rows == [(0, 1), (2, 2)]  # a's second batch never landed


def test_an_object_store_outage_fails_the_commit_and_loses_nothing_committed(
        postgres: PostgresServer, tmp_path: Path) -> None:
    gw = VersityGateway(tmp_path / "gw").start()
    tid = uuid.uuid4()

    async def story() -> tuple[int, int, bool]:
        settings = await settings_for(postgres, gw)
        s = await store(settings, 1, tmp_path, lease_ms=10_000)
        try:
            s.ensure("t", 0, CONFIG, topic_id=tid)
            p = await s.ready("t", 0)
            assert p is not None
            p.append(batch(2, producer_id=5, producer_epoch=0, base_sequence=0), 1_000)
            await s.commit([p])  # type: ignore[misc]
            gw.kill()
            retry = batch(1, producer_id=5, producer_epoch=0, base_sequence=2)
            p.append(retry, 1_000)
            with pytest.raises(CommitError) as failed:
                await s.commit([p])  # type: ignore[misc]
            gw.start()
            q = await taken_again(s, p)
            assert q.high_watermark == 2 and q.log_end_offset == 2
            again = q.append(retry, 1_000)  # the client's retry: new, not a duplicate
            await s.commit([q])  # type: ignore[misc]
            return failed.value.code, q.high_watermark, again.duplicate
        finally:
            await s.close()
            gw.kill()

    code, hw, duplicate = asyncio.run(story())
    assert code == E.kafka_storage_error
    assert hw == 3 and not duplicate


def test_a_partition_failing_to_be_taken_is_tried_again_once_a_second(
        postgres: PostgresServer, tmp_path: Path) -> None:
    """However many callers asked for it while its takes failed: each failed take
    scheduled a retry of its own, so a partition its clients kept asking for was soon
    tried many times a second (346 failed takes of one partition in two minutes of a
    campaign), hammering the stores just as they came back."""
    gw = VersityGateway(tmp_path / "gw").start()

    async def story() -> int:
        settings = await settings_for(postgres, gw)
        s = await store(settings, 1, tmp_path, lease_ms=10_000)
        takes = 0

        async def unreachable(*args: object, **kw: object) -> bytes:
            nonlocal takes
            takes += 1
            raise OSError("the object store is down")  # at once, as a refused connect
        s.download = unreachable  # type: ignore[method-assign]
        try:
            s.ensure("t", 0, CONFIG, topic_id=uuid.uuid4())
            for _ in range(30):  # clients asking for it, 3 s long
                with contextlib.suppress(Exception):  # the take's failure
                    await s.ready("t", 0)
                await asyncio.sleep(0.1)
            takes = 0
            await asyncio.sleep(3)
            return takes
        finally:
            await s.close()
            gw.kill()

    # its retry each second, and the placement check of each refresh (1 s): 59 before
    assert asyncio.run(story()) <= 8


@pytest.mark.parametrize("landed", [True, False], ids=["landed", "not-landed"])
def test_a_commit_whose_answer_is_lost_is_answered_by_what_landed(
        postgres: PostgresServer, versitygw: VersityGateway, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, landed: bool) -> None:
    """The connection dies under a commit's transaction (PostgreSQL restarted): the
    store asks PostgreSQL whether it landed and answers the append by that,
    acknowledged or "not persisted", never REQUEST_TIMED_OUT while it can know. (A
    "possibly persisted" answer, and the next owner's OUT_OF_ORDER_SEQUENCE for a later
    batch, made librdkafka resend a landed batch under a new epoch: a partition out of
    producer order in make test.)"""
    from headwater.shared import committer as store_module

    real = store_module.commit
    lost = []

    async def answer_lost(conn, key, size, commits):  # type: ignore[no-untyped-def]
        if lost:
            return await real(conn, key, size, commits)
        lost.append(key)
        if landed:
            await real(conn, key, size, commits)
        raise ConnectionResetError("connection lost under the commit")
    monkeypatch.setattr(store_module, "commit", answer_lost)
    tid = uuid.uuid4()

    async def story() -> tuple[int, int, bool]:
        settings = await settings_for(postgres, versitygw)
        s = await store(settings, 1, tmp_path, lease_ms=10_000)
        try:
            s.ensure("t", 0, CONFIG, topic_id=tid)
            p = await s.ready("t", 0)
            assert p is not None
            sent = batch(2, producer_id=5, producer_epoch=0, base_sequence=0)
            p.append(sent, 1_000)
            try:
                await s.commit([p])  # type: ignore[misc]
                code = 0
            except CommitError as exc:
                code = exc.code
            q = await taken_again(s, p)
            again = q.append(sent, 1_000)  # the client's retry, had it one
            durable = s.commit([q])  # nothing to commit for a duplicate
            if durable is not None:
                await durable
            return code, q.high_watermark, again.duplicate
        finally:
            await s.close()

    code, hw, duplicate = asyncio.run(story())
    if landed:
        assert (code, hw, duplicate) == (0, 2, True)
    else:
        assert (code, hw, duplicate) == (E.kafka_storage_error, 2, False)


@pytest.mark.parametrize("append_bytes", [2_000, 800_000])
def test_windows_overlap_only_with_enough_to_carry(
        postgres: PostgresServer, versitygw: VersityGateway, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, append_bytes: int) -> None:
    """Under a stream of appends, a commit window starts beside one in flight only with
    `OVERLAP_MIN_BYTES` to carry: small appends wait for the window in flight (one
    window at a time, each gathering what came meanwhile), large ones overlap it."""
    from headwater.shared import committer as committer_module

    real = committer_module.commit
    flight = {"now": 0, "most": 0, "windows": 0}

    async def slow(conn, key, size, commits):  # type: ignore[no-untyped-def]
        flight["now"] += 1
        flight["windows"] += 1
        flight["most"] = max(flight["most"], flight["now"])
        try:
            await asyncio.sleep(0.2)  # a slow database: windows would pile up
            return await real(conn, key, size, commits)
        finally:
            flight["now"] -= 1
    monkeypatch.setattr(committer_module, "commit", slow)
    records = max(1, append_bytes // 1_000)

    async def story() -> tuple[int, int]:
        settings = await settings_for(postgres, versitygw)
        s = await store(settings, 1, tmp_path, lease_ms=10_000)
        try:
            s.ensure("t", 0, LogConfig(segment_bytes=64 << 20, retention_ms=-1),
                     topic_id=uuid.uuid4())
            p = await s.ready("t", 0)
            assert p is not None
            waits = []
            for _ in range(12):
                p.append(build_batch([(b"k", b"v" * 990, [], 1_000)] * records), 1_000)
                durable = s.commit([p])
                assert durable is not None
                waits.append(durable)
                await asyncio.sleep(0.05)
            await asyncio.gather(*waits)  # type: ignore[arg-type]
            assert p.high_watermark == 12 * records
            return flight["most"], flight["windows"]
        finally:
            await s.close()

    most, windows = asyncio.run(story())
    if append_bytes < committer_module.OVERLAP_MIN_BYTES:
        assert most == 1 and windows < 12, (most, windows)
    else:
        assert most > 1, (most, windows)
