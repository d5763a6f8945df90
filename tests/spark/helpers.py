"""Producing and consuming test data with confluent-kafka, independently of Spark."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

Record = tuple[bytes | None, bytes | None, str, int, int, int, Any]


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def produce(bootstrap: str, topic: str, records: Iterable[dict[str, Any]]) -> None:
    """Each record: value, and optionally key, partition, headers, timestamp (ms)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                  "enable.idempotence": True})
    errors: list[KafkaError] = []
    for r in records:
        kwargs = {k: r[k] for k in ("key", "partition", "headers", "timestamp") if k in r}
        p.produce(topic, r["value"], on_delivery=lambda e, m: e and errors.append(e),
                  **kwargs)
        p.poll(0)
    assert p.flush(30) == 0
    assert not errors, errors


def end_offsets(bootstrap: str, topic: str, partitions: int,
                isolation: str = "read_uncommitted") -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "t-offsets",
                  "isolation.level": isolation})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)}
    finally:
        c.close()


def consume_all(bootstrap: str, topic: str, partitions: int,
                isolation: str = "read_committed", timeout: float = 30) -> list[Record]:
    """Every record of the topic: (key, value, topic, partition, offset, ts, headers)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "t-reader",
                  "enable.auto.commit": False, "isolation.level": isolation,
                  "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[Record] = []
    done: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(done) < partitions and time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        done.add(m.partition())
                    continue
                out.append((m.key(), m.value(), m.topic(), m.partition(), m.offset(),
                            m.timestamp()[1], m.headers()))
        assert len(done) == partitions, "did not reach the end of every partition"
        return out
    finally:
        c.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        res = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {tp.partition: tp.offset for tp in res}
    finally:
        c.close()
