"""Compaction and merging on the shared log, checked where it matters: after the broker
is killed and takes its partitions again from PostgreSQL and the object store alone.

* A compacted topic (with a tombstone, an aborted and a committed transaction) shrinks
  in PostgreSQL; after a kill -9 a read_committed consumer reads every record at its
  original offset, the latest value of every key, nothing aborted, and the idempotent
  producer carries on (its last batch survived compaction).
* A plain topic's small window objects are merged into objects of its own, the window
  objects are deleted by the orphan cleaner, and after a kill -9 everything is read back
  in order.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from headwater.config import BrokerConfig
from headwater.shared.objects import SEGMENT_PREFIX, WAL_PREFIX, ObjectStore
from headwater.shared.settings import SharedSettings
from tests.support.broker_process import BrokerProcess
from tests.support.engines import PostgresServer, VersityGateway, shared_broker_args

pytestmark = pytest.mark.timeout(180)
KEYS = 20


@pytest.fixture
def broker(postgres: PostgresServer, versitygw: VersityGateway,
           tmp_path: Path) -> Iterator[tuple[BrokerProcess, dict[str, str]]]:
    yield from _broker(postgres, versitygw, tmp_path, "headwater.shared.merge.bytes=20000")


@pytest.fixture
def by_pieces(postgres: PostgresServer, versitygw: VersityGateway,
              tmp_path: Path) -> Iterator[tuple[BrokerProcess, dict[str, str]]]:
    """Merging due by the number of pieces alone (bytes and age far off)."""
    yield from _broker(postgres, versitygw, tmp_path, "headwater.shared.merge.pieces=10",
                       "headwater.shared.merge.bytes=100000000")


def _broker(postgres: PostgresServer, versitygw: VersityGateway, tmp_path: Path,
            *overrides: str) -> Iterator[tuple[BrokerProcess, dict[str, str]]]:
    extra = shared_broker_args(postgres, versitygw, tmp_path / "data")
    settings = dict(a.split("=", 1) for a in extra if a != "--override")
    proc = BrokerProcess(
        tmp_path / "data", *extra, "--override", "log.cleaner.backoff.ms=200",
        "--override", "headwater.shared.inline.max.bytes=0",  # every window an object
        "--override", "headwater.shared.merge.object.max.bytes=50000",
        "--override", "headwater.shared.cleaner.interval.ms=500",
        *(a for o in overrides for a in ("--override", o))).start()
    yield proc, settings
    proc.kill()


def query(settings: dict[str, str], sql: str, *args: object) -> Any:
    async def run() -> Any:
        conn = await asyncpg.connect(settings["headwater.shared.database"])
        try:
            return await conn.fetchrow(sql, *args)
        finally:
            await conn.close()
    return asyncio.run(run())


def poll(what: Callable[[], bool], timeout: float, why: Callable[[], object]) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, why()
        time.sleep(0.2)


def read_all(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of everything a read_committed consumer reads, to the end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    return out
                continue
            out.append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    raise AssertionError(f"{topic}: no end of partition in 60 s ({len(out)} read)")


def test_compaction_on_the_shared_log_survives_a_takeover(
        broker: tuple[BrokerProcess, dict[str, str]]) -> None:
    proc, settings = broker
    topic = f"compact-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={
        "segment.bytes": "16384", "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "0"})])[topic].result(30)
    produced: dict[int, tuple[bytes | None, bytes | None]] = {}

    def delivered(err: object, msg: Any) -> None:
        assert err is None, err
        produced[msg.offset()] = (msg.key(), msg.value())

    producer = Producer({"bootstrap.servers": proc.bootstrap, "enable.idempotence": True,
                         "linger.ms": 5, "batch.size": 4096})
    for i in range(3000):
        producer.produce(topic, key=b"k%d" % (i % KEYS), value=b"v%d" % i,
                         on_delivery=delivered)
        if i == 1500:
            producer.produce(topic, key=b"k0", value=None, on_delivery=delivered)
    assert producer.flush(30) == 0
    txn = Producer({"bootstrap.servers": proc.bootstrap, "transactional.id": topic})
    txn.init_transactions(30)
    for outcome in ("aborted", "committed"):
        txn.begin_transaction()
        for k in range(5):
            txn.produce(topic, key=b"t%d" % k, value=outcome.encode())
        if outcome == "aborted":
            txn.abort_transaction(30)
        else:
            txn.commit_transaction(30)
    for i in range(3000, 3400):  # the transactions into cleanable segments
        producer.produce(topic, key=b"k%d" % (i % KEYS), value=b"v%d" % i,
                         on_delivery=delivered)
    assert producer.flush(30) == 0

    def stored() -> int:
        return int(query(settings, "SELECT coalesce(sum(byte_length), 0) AS n FROM "
                         "batches b JOIN partitions p USING (topic_id, partition) "
                         "WHERE p.high_watermark > 3000")["n"])
    before = stored()
    assert before > 0
    admin.alter_configs([ConfigResource("topic", topic, set_config={
        "cleanup.policy": "compact", "segment.bytes": "16384",
        "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0"})]
    )[ConfigResource("topic", topic)].result(30)
    poll(lambda: stored() < before / 3, 60, lambda: (stored(), before))

    proc.kill()
    proc.start()
    records = read_all(proc.bootstrap, topic)
    assert len(records) < len(produced) / 3, len(records)  # compacted, as loaded
    latest: dict[bytes | None, bytes | None] = {}
    for offset, key, value in records:
        if key is not None and key.startswith(b"t"):
            assert value == b"committed", (offset, key, value)
            continue
        assert produced[offset] == (key, value), offset
        latest[key] = value
    want = {key: value for _o, (key, value) in sorted(produced.items())}
    assert want[b"k0"] is not None  # written again after its tombstone
    assert latest == want
    assert {key for _o, key, _v in records if key and key.startswith(b"t")} == \
        {b"t%d" % k for k in range(5)}

    # the idempotent producer's state survived compaction and the takeover
    for i in range(3400, 3410):
        producer.produce(topic, key=b"k%d" % (i % KEYS), value=b"v%d" % i,
                         on_delivery=delivered)
    assert producer.flush(30) == 0
    assert max(produced) == max(o for o, _k, _v in read_all(proc.bootstrap, topic))


def test_small_objects_are_merged_and_the_window_objects_deleted(
        broker: tuple[BrokerProcess, dict[str, str]]) -> None:
    proc, settings = broker
    topic = f"merge-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": proc.bootstrap, "enable.idempotence": True,
                         "linger.ms": 0})
    for i in range(2000):
        producer.produce(topic, value=b"%06d" % i + b"x" * 100)
        if i % 100 == 99:
            assert producer.flush(30) == 0  # a window (an object) per flush, at least
    sql = ("SELECT count(*) FILTER (WHERE b.object_key LIKE $1 || '%') AS merged, "
           "count(*) FILTER (WHERE b.object_key NOT LIKE $1 || '%') AS unmerged, "
           "count(DISTINCT b.object_key) AS objects FROM batches b JOIN partitions p "
           "USING (topic_id, partition) WHERE p.high_watermark = 2000")

    def counts() -> tuple[int, int, int]:
        row = query(settings, sql, SEGMENT_PREFIX)
        return int(row["merged"]), int(row["unmerged"]), int(row["objects"])
    # 2,000 x ~110 bytes: 20,000-byte merges, in objects of at most 50,000 bytes
    poll(lambda: counts()[0] > 0 and counts()[1] * 110 < 20_000, 60, counts)
    assert counts()[2] >= 3

    objects = ObjectStore(SharedSettings.from_config(BrokerConfig(settings)))

    def window_objects() -> set[str]:
        return set(asyncio.run(objects.keys(WAL_PREFIX)))

    def unreferenced() -> set[str]:
        listed = window_objects()  # before the query: a commit may land in between
        return listed - {r["object_key"] for r in query_all(settings)}
    poll(lambda: not unreferenced(), 60, lambda: len(unreferenced()))

    proc.kill()
    proc.start()
    values = [v for _o, _k, v in read_all(proc.bootstrap, topic)]
    assert values == [b"%06d" % i + b"x" * 100 for i in range(2000)]


def query_all(settings: dict[str, str]) -> list[Any]:
    async def run() -> list[Any]:
        conn = await asyncpg.connect(settings["headwater.shared.database"])
        try:
            return list(await conn.fetch(
                "SELECT DISTINCT object_key FROM batches WHERE object_key IS NOT NULL"))
        finally:
            await conn.close()
    return asyncio.run(run())


def test_many_small_pieces_are_merged_before_their_bytes_or_age_are_due(
        by_pieces: tuple[BrokerProcess, dict[str, str]]) -> None:
    """A takeover reads each piece with a request of its own: a partition written in a
    window every few milliseconds must not pile up thousands of them for ten minutes."""
    proc, settings = by_pieces
    topic = f"pieces-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": proc.bootstrap, "linger.ms": 0})
    for i in range(40):
        producer.produce(topic, value=b"%03d" % i)
        assert producer.flush(30) == 0  # a window, a piece, each
    sql = ("SELECT count(*) FILTER (WHERE b.object_key LIKE $1 || '%') AS merged, "
           "count(*) FILTER (WHERE b.object_key NOT LIKE $1 || '%') AS unmerged "
           "FROM batches b JOIN partitions p USING (topic_id, partition) "
           "WHERE p.high_watermark = 40")

    def counts() -> tuple[int, int]:
        row = query(settings, sql, SEGMENT_PREFIX)
        return int(row["merged"]), int(row["unmerged"])
    poll(lambda: counts()[0] >= 30 and counts()[1] < 10, 60, counts)
    values = [v for _o, _k, v in read_all(proc.bootstrap, topic)]
    assert values == [b"%03d" % i for i in range(40)]
