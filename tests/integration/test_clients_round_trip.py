"""Produce and consume back byte-exact records with three unmodified Kafka clients.

Keys, values, null values, headers and timestamps must survive every compression
codec, and what one client wrote another must read identically.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
BASE_TS = 1_700_000_000_000


def expected_records(n: int = 50, null_headers: bool = True) -> list[tuple]:
    """(key, value, headers, timestamp); includes null keys/values and empty bytes.

    kafka-python and aiokafka refuse null header values, so they get b"" there.
    """
    out = []
    for i in range(n):
        key = None if i % 7 == 3 and i % 11 != 5 else f"key-{i}".encode()
        value = None if i % 11 == 5 else (b"" if i % 13 == 4 else bytes([i % 256]) * (i * 37))
        headers = [("h1", f"v{i}".encode()), ("bin", bytes(range(i % 5))), ("null", None if null_headers else b"")] \
            if i % 3 == 0 else []
        out.append((key, value, headers, BASE_TS + i * 1000))
    return out


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1)])
    futures[name].result(timeout=15)


def consume_confluent(bootstrap: str, topic: str, count: int, partition: int = 0,
                      timeout: float = 30.0) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "rt-reader",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
    got = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append(msg)
    finally:
        consumer.close()
    return got


def as_tuples_confluent(msgs: list) -> list[tuple]:
    out = []
    for m in msgs:
        headers = [(k, v) for k, v in (m.headers() or [])]
        out.append((m.key(), m.value(), headers, m.timestamp()[1]))
    return out


def normalise(records: list[tuple]) -> list[tuple]:
    # librdkafka hands back b"" and None distinctly; kafka-python/aiokafka too.
    return [(k, v, list(h), ts) for k, v, h, ts in records]


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_round_trip(broker, topic_name, codec):
    create_topic(broker.bootstrap, topic_name)
    records = expected_records()
    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec,
                         "acks": "all", "linger.ms": 20})
    errors = []
    for key, value, headers, ts in records:
        producer.produce(topic_name, value=value, key=key, headers=headers, timestamp=ts,
                         on_delivery=lambda err, msg: err and errors.append(err))
    assert producer.flush(30) == 0
    assert errors == []
    got = consume_confluent(broker.bootstrap, topic_name, len(records))
    assert [m.offset() for m in got] == list(range(len(records)))
    assert normalise(as_tuples_confluent(got)) == normalise(records)


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_round_trip(broker, topic_name, codec):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP

    create_topic(broker.bootstrap, topic_name)
    records = expected_records(null_headers=False)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all",
                             compression_type=None if codec == "none" else codec,
                             linger_ms=20)
    futures = [producer.send(topic_name, value=v, key=k, headers=h, timestamp_ms=ts)
               for k, v, h, ts in records]
    producer.flush(30)
    offsets = [f.get(timeout=30).offset for f in futures]
    producer.close()
    assert offsets == list(range(len(records)))

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=10000)
    tp = KTP(topic_name, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got = []
    deadline = time.monotonic() + 30
    while len(got) < len(records) and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            got.extend(batch)
    consumer.close()
    assert normalise([(m.key, m.value, list(m.headers), m.timestamp) for m in got]) == \
        normalise(records)
    # And what kafka-python wrote, librdkafka reads byte-exact.
    again = consume_confluent(broker.bootstrap, topic_name, len(records))
    assert normalise(as_tuples_confluent(again)) == normalise(records)


@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_round_trip(broker, topic_name, codec):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as ATP

    create_topic(broker.bootstrap, topic_name)
    records = expected_records(null_headers=False)

    async def run() -> list:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all",
                                    compression_type=None if codec == "none" else codec,
                                    linger_ms=20)
        await producer.start()
        try:
            futs = [await producer.send(topic_name, value=v, key=k, headers=h,
                                        timestamp_ms=ts) for k, v, h, ts in records]
            metas = [await f for f in futs]
        finally:
            await producer.stop()
        assert [m.offset for m in metas] == list(range(len(records)))
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap,
                                    enable_auto_commit=False)
        await consumer.start()
        try:
            tp = ATP(topic_name, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            got = []
            deadline = time.monotonic() + 30
            while len(got) < len(records) and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                for batch in batches.values():
                    got.extend(batch)
            return got
        finally:
            await consumer.stop()

    got = asyncio.run(run())
    assert normalise([(m.key, m.value, list(m.headers), m.timestamp) for m in got]) == \
        normalise(records)


def test_timestamps_out_of_bounds_are_rejected(broker, topic_name):
    """message.timestamp.after.max.ms (default 1 h) and .before.max.ms: INVALID_TIMESTAMP
    reaches the producer's delivery report and nothing is written."""
    from confluent_kafka import KafkaError

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, 1, config={
        "message.timestamp.before.max.ms": "86400000"})])[topic_name].result(15)
    now = int(time.time() * 1000)
    reports: list = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for ts in (now + 2 * 3_600_000, now - 2 * 86_400_000, now):
        p.produce(topic_name, b"v", timestamp=ts,
                  on_delivery=lambda err, msg: reports.append((err, msg.offset())))
        assert p.flush(15) == 0
    codes = [err.code() if err else None for err, _ in reports]
    assert codes == [KafkaError.INVALID_TIMESTAMP, KafkaError.INVALID_TIMESTAMP, None]
    assert reports[2][1] == 0  # the only record written


def test_kcat_metadata_produce_consume_and_group(broker, topic_name):
    """kcat (Debian's, built on librdkafka 2.0: older protocol versions than
    confluent-kafka's) lists metadata, produces lz4 keyed records, reads them back and
    consumes them in a group. `make test` installs it."""
    import shutil
    import subprocess

    kcat = shutil.which("kcat")
    assert kcat, "kcat is required for this test: run `make kcat` (apt-get install kcat)"

    def run(*args: str, stdin: str | None = None) -> str:
        out = subprocess.run([kcat, "-b", broker.bootstrap, *args], input=stdin,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout

    create_topic(broker.bootstrap, topic_name)
    assert f'topic "{topic_name}" with 1 partitions' in run("-L")
    run("-P", "-t", topic_name, "-K:", "-z", "lz4", stdin="k1:v1\nk2:v2\n:v3\n")
    assert run("-C", "-t", topic_name, "-e", "-f", "%k=%s@%o\\n").splitlines() == \
        ["k1=v1@0", "k2=v2@1", "=v3@2"]
    grouped = run("-C", "-X", "auto.offset.reset=earliest", "-G", f"{topic_name}-g",
                  topic_name, "-e", "-f", "%s\\n")
    assert grouped.splitlines() == ["v1", "v2", "v3"]


def test_topic_compression_type_is_applied_by_the_broker(broker, topic_name):
    """compression.type=zstd on the topic: an lz4 producer's batches are stored as zstd
    (Kafka recompresses on the broker) and read back byte-exact."""
    from headwater.records.batch import iter_batches
    from headwater.records.compression import ZSTD
    from tests.support.wire import RawClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, 1, config={"compression.type": "zstd"})]
                        )[topic_name].result(15)
    records = expected_records()
    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "lz4",
                  "linger.ms": 20})
    for k, v, h, ts in records:
        p.produce(topic_name, value=v, key=k, headers=h, timestamp=ts)
    assert p.flush(15) == 0
    raw = RawClient("127.0.0.1", broker.port)
    try:
        resp = raw.request(1, 12, {
            "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic_name, "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": (), "rack_id": ""})
    finally:
        raw.close()
    stored = resp.responses[0].partitions[0].records
    assert {h.compression for _, h in iter_batches(stored)} == {ZSTD}
    got = consume_confluent(broker.bootstrap, topic_name, len(records))
    assert normalise(as_tuples_confluent(got)) == normalise(records)
