"""A broker on the shared log (`headwater.storage=shared`), real clients against it, with
a private PostgreSQL and versitygw: idempotent acks=all production and consumption, a
kill -9 that loses nothing acknowledged, and a wrong setting that is one line at start."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode as E

from headwater.wire.codec import build
from headwater.wire.schemas import load_request_schema
from tests.support.broker_process import BrokerProcess, free_port
from tests.support.engines import PostgresServer, VersityGateway, shared_broker_args
from tests.support.wire import RawClient, encode_request

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def shared_broker(postgres: PostgresServer, versitygw: VersityGateway,
                  tmp_path: Path) -> Iterator[tuple[BrokerProcess, list[str]]]:
    extra = shared_broker_args(postgres, versitygw, tmp_path / "data")
    proc = BrokerProcess(tmp_path / "data", *extra).start()
    yield proc, extra
    proc.kill()


def create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def produce(bootstrap: str, topic: str, n: int, start: int = 0) -> int:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5})
    acked = 0

    def delivered(err: object, _msg: object) -> None:
        nonlocal acked
        if err is None:
            acked += 1

    for i in range(start, start + n):
        while True:
            try:
                producer.produce(topic, key=str(i % 7).encode(), value=f"v{i}".encode(),
                                 on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(60) == 0
    return acked


def consume(bootstrap: str, topic: str, want: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < want and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                value = msg.value()
                assert value is not None
                got.append(value)
    finally:
        consumer.close()
    return got


def test_clients_produce_and_consume_on_the_shared_log(
        shared_broker: tuple[BrokerProcess, list[str]]) -> None:
    proc, _ = shared_broker
    topic = f"shared-{uuid.uuid4().hex[:8]}"
    create(proc.bootstrap, topic, 3)
    assert produce(proc.bootstrap, topic, 600) == 600
    got = consume(proc.bootstrap, topic, 600)
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(600))


def test_a_killed_shared_broker_loses_nothing_acknowledged(
        shared_broker: tuple[BrokerProcess, list[str]], tmp_path: Path) -> None:
    proc, extra = shared_broker
    topic = f"shared-{uuid.uuid4().hex[:8]}"
    create(proc.bootstrap, topic, 2)
    assert produce(proc.bootstrap, topic, 400) == 400
    proc.kill()  # kill -9: the local cache is rebuilt from PostgreSQL and the objects
    again = BrokerProcess(tmp_path / "data", *extra, port=proc.port).start()
    try:
        assert produce(again.bootstrap, topic, 100, start=400) == 100
        got = consume(again.bootstrap, topic, 500)
        assert sorted(got) == sorted(f"v{i}".encode() for i in range(500))
    finally:
        again.kill()


def test_a_wrong_dsn_is_one_line_at_start(tmp_path: Path) -> None:
    dsn = f"postgresql://headwater:s3cret@127.0.0.1:{free_port()}/postgres"
    done = subprocess.run(
        [sys.executable, "-m", "headwater.cli", "serve", "--listen",
         f"127.0.0.1:{free_port()}", "--data-dir", str(tmp_path / "data"),
         "--override", "headwater.storage=shared",
         "--override", f"headwater.shared.database={dsn}",
         "--override", f"headwater.shared.objects=file://{tmp_path}/objects",
         "--override", "headwater.shared.startup.wait.ms=2500"],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    # a line each second it tried again, then one that it gives up: each names the setting
    assert 2 <= len(lines) <= 5, done.stderr
    assert all("waiting for the shared log" in line for line in lines[:-1]), done.stderr
    assert all("headwater.shared.database=postgresql://headwater:***@" in line
               for line in lines), done.stderr
    assert "cannot start: headwater.shared.database=postgresql://headwater:***@" in lines[-1]
    assert "s3cret" not in done.stderr and "Traceback" not in done.stderr


def test_a_broker_started_while_the_object_store_is_down_serves_once_it_is_back(
        postgres: PostgresServer, tmp_path: Path) -> None:
    """A broker that starts during an object-store outage waits for the store (a line
    each try) instead of exiting, and serves once the store answers."""
    gateway = VersityGateway(tmp_path / "gw")  # its port chosen, not started yet
    proc = BrokerProcess(tmp_path / "data",
                         *shared_broker_args(postgres, gateway, tmp_path / "data"))
    starting = threading.Thread(target=proc.start, kwargs={"timeout": 60}, daemon=True)
    starting.start()
    try:
        deadline = time.monotonic() + 30
        while "waiting for the shared log" not in proc.logs():
            assert time.monotonic() < deadline, proc.logs()
            assert proc.proc is None or proc.proc.poll() is None, proc.logs()
            time.sleep(0.1)
        assert "headwater.shared.objects=s3://headwater" in proc.logs()
        gateway.start()
        starting.join(60)
        assert not starting.is_alive()
        topic = f"t-{uuid.uuid4().hex[:8]}"
        assert produce(proc.bootstrap, topic, 50) == 50
        assert sorted(consume(proc.bootstrap, topic, 50)) == sorted(
            f"v{i}".encode() for i in range(50))
    finally:
        proc.kill()
        gateway.kill()


def test_retention_on_the_shared_log_moves_the_log_start_and_drops_the_rows(
        postgres: PostgresServer, versitygw: VersityGateway, tmp_path: Path) -> None:
    """retention.ms and retention.bytes on the shared log: the owner moves the log start
    past the expired batches and their rows leave PostgreSQL; newer batches stay."""
    extra = shared_broker_args(postgres, versitygw, tmp_path / "data")
    dsn = next(a.split("=", 1)[1] for a in extra
               if a.startswith("headwater.shared.database="))
    proc = BrokerProcess(tmp_path / "data", *extra,
                         "--override", "log.retention.check.interval.ms=200").start()
    try:
        by_time, by_size = f"rt-{uuid.uuid4().hex[:6]}", f"rb-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        admin.create_topics([NewTopic(by_time, 1, 1, config={"retention.ms": "600000"}),
                             NewTopic(by_size, 1, 1, config={"retention.bytes": "3000"})]
                            )[by_time].result(30)
        producer = Producer({"bootstrap.servers": proc.bootstrap, "linger.ms": 0})
        old = int(time.time() * 1000) - 3_600_000  # an hour ago: past retention.ms
        for i in range(8):  # one batch each (flushed one by one)
            producer.produce(by_time, value=f"t{i}".encode(),
                             timestamp=old if i < 5 else 0)
            producer.produce(by_size, value=b"s" * 1000)
            assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": proc.bootstrap, "group.id": "rt"})

        def low(topic: str) -> int:
            return int(consumer.get_watermark_offsets(TopicPartition(topic, 0),
                                                      timeout=10)[0])

        deadline = time.monotonic() + 30
        while low(by_time) != 5 or low(by_size) < 5:
            assert time.monotonic() < deadline, (low(by_time), low(by_size))
            time.sleep(0.2)
        assert low(by_size) < 8, "retention.bytes emptied the partition"
        consumer.close()

        async def database() -> tuple[int, int]:
            """(partitions whose log start moved to 5 or beyond, batch rows left wholly
            before their partition's log start)."""
            conn = await asyncpg.connect(dsn)
            try:
                moved = await conn.fetchval(
                    "SELECT count(*) FROM partitions WHERE log_start >= 5")
                stale = await conn.fetchval(
                    "SELECT count(*) FROM batches b JOIN partitions p USING (topic_id, "
                    "partition) WHERE b.last_offset < p.log_start")
                return int(moved), int(stale)
            finally:
                await conn.close()
        deadline = time.monotonic() + 30
        while asyncio.run(database()) != (2, 0):
            assert time.monotonic() < deadline, asyncio.run(database())
            time.sleep(0.2)
    finally:
        proc.kill()


def test_hostile_envelopes_get_an_error_and_the_broker_serves_on(
        shared_broker: tuple[BrokerProcess, list[str]]) -> None:
    """EnvelopeRequest (KIP-590) is only served on the shared log, so the wire fuzzing
    of one node never reaches it: garbage, a request that is not forwarded, an envelope
    in an envelope, a truncated body and an undecodable principal each get
    INVALID_REQUEST; a sound one is answered; the connection serves on."""
    proc, _extra = shared_broker
    client = RawClient("127.0.0.1", proc.port)
    envelope_cls = load_request_schema(58, 0)

    def envelope(data: bytes, principal: bytes = b"",
                 address: bytes = b"\x7f\x00\x00\x01") -> Any:
        return client.request(58, 0, build(envelope_cls, {
            "request_data": data, "request_principal": principal,
            "client_host_address": address}))

    def inner(key: int, version: int, body: dict[str, Any]) -> bytes:
        return encode_request(key, version, build(load_request_schema(key, version), body),
                              7, "inner")[4:]

    topic = f"env-{uuid.uuid4().hex[:6]}"
    create = inner(19, 7, {"topics": [{"name": topic, "num_partitions": 1,
                                       "replication_factor": 1}], "timeout_ms": 10_000})
    cases = {
        "garbage": bytes(range(64)),
        "empty": b"",
        "not forwarded (Produce)": inner(0, 9, {"acks": 1, "timeout_ms": 1000}),
        "an envelope in an envelope": inner(58, 0, {"request_data": create}),
        "truncated": create[:-5],
    }
    for why, data in cases.items():
        assert envelope(data).error_code == E.invalid_request, why
    assert envelope(create, principal=b"\xff\xfe").error_code == E.invalid_request
    answer = envelope(create, address=b"\x01")  # an odd address: the sender's is used
    assert answer.error_code == E.none and answer.response_data
    assert client.request(18, 3, build(load_request_schema(18, 3), {
        "client_software_name": "raw", "client_software_version": "1"})).error_code == 0
    client.close()
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    assert topic in admin.list_topics(timeout=10).topics
