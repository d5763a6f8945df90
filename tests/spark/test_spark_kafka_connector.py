"""Spark's own Kafka connector (`format("kafka")`, spark-sql-kafka-0-10 from `make kafka`,
with the Java kafka-clients it was built with) against headwater: batch and streaming
(trigger availableNow) reads and writes, every row asserted.

A Kafka user's Spark jobs run this connector, not ours, so headwater must serve the Java
consumer, admin and (idempotent) producer it drives exactly as Kafka does.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.spark.conftest import spark_kafka_jars
from tests.spark.helpers import consume_all, create_topic, produce
from tests.support.broker_process import BrokerProcess

pytestmark = pytest.mark.timeout(300)

T0 = 1_700_000_000_000  # record timestamps: T0 + i ms
PARTITIONS = 2
CREATE_TIME = 0


def records(start: int, n: int) -> list[dict[str, Any]]:
    """Keys (one in five null), values, explicit partitions, timestamps and headers (one
    with a null value, one repeated key)."""
    out = []
    for i in range(start, start + n):
        r: dict[str, Any] = {"value": b"value-%d" % i, "partition": i % PARTITIONS,
                             "timestamp": T0 + i}
        if i % 5:
            r["key"] = b"key-%d" % i
        if i % 3 == 0:
            r["headers"] = [("h", b"\x00\xff%d" % i), ("h", None), ("other", b"")]
        out.append(r)
    return out


def expected_rows(topic: str, recs: list[dict[str, Any]], first: int = 0) -> list[tuple]:
    """What Spark must show for `recs`, produced in order from offset `first` on each
    partition: (key, value, topic, partition, offset, ts ms, timestampType, headers)."""
    offsets = {p: first for p in range(PARTITIONS)}
    rows = []
    for r in recs:
        p = r["partition"]
        rows.append((r.get("key"), r["value"], topic, p, offsets[p], r["timestamp"],
                     CREATE_TIME, r.get("headers", [])))
        offsets[p] += 1
    return sorted(rows, key=lambda x: (x[3], x[4]))


def rows(df: Any) -> list[tuple]:
    """The DataFrame's Kafka columns as plain tuples, by (partition, offset)."""
    out = []
    for r in df.selectExpr("key", "value", "topic", "partition", "offset",
                           "unix_millis(timestamp) AS ts", "timestampType",
                           "headers").collect():
        headers = [(h.key, None if h.value is None else bytes(h.value))
                   for h in r.headers or []]
        out.append((None if r.key is None else bytes(r.key), bytes(r.value), r.topic,
                    r.partition, r.offset, r.ts, r.timestampType, headers))
    return sorted(out, key=lambda x: (x[3], x[4]))


def kafka_reader(spark: Any, bootstrap: str, topic: str, stream: bool = False) -> Any:
    src = spark.readStream if stream else spark.read
    return (src.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("startingOffsets", "earliest")
            .option("includeHeaders", "true"))


@pytest.fixture(scope="module")
def connector(spark: Any) -> Any:
    """The session, once Spark's Kafka connector is known to be on its classpath (fails,
    never skips, without `make kafka`)."""
    jars = spark_kafka_jars()
    assert any("spark-sql-kafka-0-10" in j for j in jars), \
        "Spark's Kafka connector is missing in .kafka/spark/: run `make kafka`"
    assert set(spark.conf.get("spark.jars").split(",")) == set(jars)
    return spark


def unique(prefix: str) -> str:
    return f"spark-kafka-{prefix}-{uuid.uuid4().hex[:8]}"


def test_batch_read(connector: Any, broker: BrokerProcess) -> None:
    topic = unique("batch")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    recs = records(0, 40)
    produce(broker.bootstrap, topic, recs)
    df = kafka_reader(connector, broker.bootstrap, topic).load()
    assert rows(df) == expected_rows(topic, recs)
    # A bounded range by offsets per partition: Spark's ListOffsets / Fetch positioning.
    ranged = (connector.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", topic)
              .option("startingOffsets", f'{{"{topic}": {{"0": 5, "1": 10}}}}')
              .option("endingOffsets", f'{{"{topic}": {{"0": 8, "1": -1}}}}')
              .option("includeHeaders", "true").load())
    want = [r for r in expected_rows(topic, recs)
            if (r[3] == 0 and 5 <= r[4] < 8) or (r[3] == 1 and r[4] >= 10)]
    assert rows(ranged) == want and len(want) == 13


def test_streaming_read_available_now(connector: Any, broker: BrokerProcess,
                                      tmp_path: Path) -> None:
    """Two availableNow runs on one checkpoint into a parquet sink: the second adds
    exactly the records produced after the first (none twice, none missed)."""
    topic = unique("stream")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    first, second = records(0, 30), records(30, 10)
    produce(broker.bootstrap, topic, first)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def run() -> list[tuple]:
        query = (kafka_reader(connector, broker.bootstrap, topic, stream=True).load()
                 .writeStream.format("parquet").option("path", out)
                 .option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        assert query.awaitTermination(120), "availableNow query did not finish"
        assert query.exception() is None
        return rows(connector.read.parquet(out))

    assert run() == expected_rows(topic, first)
    produce(broker.bootstrap, topic, second)
    assert run() == expected_rows(topic, first + second)


def test_batch_write(connector: Any, broker: BrokerProcess) -> None:
    """DataFrame -> format("kafka"): keys, values, explicit partitions and headers land as
    written (the Java producer: idempotent by default)."""
    topic = unique("write")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    data = [(None if i % 4 == 0 else b"k%d" % i, b"v%d" % i, i % PARTITIONS,
             [("n", b"%d" % i)] if i % 2 else []) for i in range(50)]
    df = connector.createDataFrame(
        data, "key binary, value binary, partition int, "
              "headers array<struct<key: string, value: binary>>")
    (df.coalesce(1).write.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
     .option("topic", topic).save())
    got = consume_all(broker.bootstrap, topic, PARTITIONS)
    by_value = {v: (k, p, h or []) for k, v, _t, p, _o, _ts, h in got}
    assert len(got) == 50
    assert by_value == {v: (k, p, h) for k, v, p, h in data}
    for p in range(PARTITIONS):  # one writing task: each partition in the frame's order
        written = sorted((o, v) for _k, v, _t, part, o, _ts, _h in got if part == p)
        assert written == list(enumerate(v for _k, v, part, _h in data if part == p))


def test_streaming_copy(connector: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    """readStream.format("kafka") -> writeStream.format("kafka"), availableNow: the copy
    holds every record's key, value, partition and headers."""
    source, sink = unique("copy-in"), unique("copy-out")
    create_topic(broker.bootstrap, source, PARTITIONS)
    create_topic(broker.bootstrap, sink, PARTITIONS)
    recs = records(0, 40)
    produce(broker.bootstrap, source, recs)
    query = (kafka_reader(connector, broker.bootstrap, source, stream=True).load()
             .selectExpr("key", "value", "partition", "headers")
             .writeStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("topic", sink).option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(120), "availableNow query did not finish"
    assert query.exception() is None
    got = consume_all(broker.bootstrap, sink, PARTITIONS)
    assert sorted(((k, v, p, h or []) for k, v, _t, p, _o, _ts, h in got), key=repr) == \
        sorted(((r.get("key"), r["value"], r["partition"], r.get("headers", []))
                for r in recs), key=repr)
