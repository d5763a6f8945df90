"""Spark reads a topic's Iceberg table as a user does (docs/iceberg.md): Apache Iceberg's
own Spark runtime (1.12.0, built for Spark 4.1: none is published for newer Sparks) and
its JDBC catalog over the broker's SQLite catalog, on the pyspark 4.1 of `make
iceberg-spark`, in a process of its own (this one runs the project's pyspark 4.3). The
rows Spark SQL returns are compared, row by row with timestamps and headers, with what a
read_committed consumer reads from the topic."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.test_iceberg_tables import FAST, produce_mix, until_table_matches
from tests.support.broker_process import BrokerProcess
from tests.support.iceberg_spark import spark_read
from tests.support.iceberg_tables import broker_catalog

pytestmark = [pytest.mark.timeout(300),
              pytest.mark.local_storage("the table writer runs beside a one-node broker; "
                                        "the cluster's is not built yet")]

def topic_rows(bootstrap: str, topic: str, partitions: int) -> list[list[Any]]:
    """Every read_committed record as iceberg_read.py prints a row."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex}",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)}
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        rows: list[list[Any]] = []
        deadline = time.monotonic() + 60
        while any(c.position([TopicPartition(topic, p)])[0].offset < end
                  for p, end in ends.items()):
            assert time.monotonic() < deadline, (len(rows), ends)
            for m in c.consume(1000, 0.5):
                assert m.error() is None, m.error()

                def hexed(b: bytes | None) -> str | None:
                    return None if b is None else b.hex().upper()
                rows.append([m.partition(), m.offset(), m.timestamp()[1] * 1000,
                             hexed(m.key()), hexed(m.value()),
                             [[k, hexed(v)] for k, v in m.headers() or []]])
        return sorted(rows, key=lambda r: (r[0], r[1]))
    finally:
        c.close()


def test_spark_sql_reads_the_committed_records_of_the_topic(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        topic = f"spark-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for f in admin.create_topics([NewTopic(topic, 3, 1, config=FAST)]).values():
            f.result(30)
        produce_mix(broker.bootstrap, topic, "s", 3)
        odd = Producer({"bootstrap.servers": broker.bootstrap})
        odd.produce(topic, None, partition=1)  # a tombstone: no key, no value
        odd.produce(topic, b"v", key=b"\x00\xff", partition=2,
                    headers=[("empty", None), ("twice", b"1"), ("twice", b"2")])
        assert odd.flush(30) == 0
        until_table_matches(broker, topic, 3)
        want = topic_rows(broker.bootstrap, topic, 3)
        read = spark_read(broker_catalog(broker), topic)
    finally:
        broker.kill()
    assert read["version"].startswith("4.1."), read["version"]
    got = sorted(read["rows"], key=lambda r: (r[0], r[1]))
    assert len(got) == len(want) == 3 * 90 + 2
    assert got == want
    assert read["counts"] == {str(p): sum(r[0] == p for r in want) for p in range(3)}
    # The last snapshot's offsets, which a reader continuing from the topic starts at:
    # past every row of the table, and no further than the topic's end.
    last = {p: max(r[1] for r in want if r[0] == p) for p in range(3)}
    assert {int(p): o for p, o in read["offsets"].items()}.keys() == {0, 1, 2}
    assert all(o > last[int(p)] for p, o in read["offsets"].items()), read["offsets"]
