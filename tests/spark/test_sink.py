"""Streaming writes (writeStream.format("headwater")), at-least-once and exactly-once."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType

from tests.spark.helpers import consume_all, create_topic, produce


def _source(spark, bootstrap: str, topic: str):
    return (spark.readStream.format("headwater").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("startingOffsets", "earliest").load())


def test_stream_write_round_trip(spark, broker, topic_name, tmp_path):
    bs, out = broker.bootstrap, topic_name + "-out"
    create_topic(bs, topic_name, 2)
    create_topic(bs, out, 3)
    produce(bs, topic_name, [{"value": b"v%d" % i, "key": b"k%d" % i,
                              "headers": [("n", b"%d" % i)]} for i in range(500)])
    q = (spark.readStream.format("headwater").option("kafka.bootstrap.servers", bs)
         .option("subscribe", topic_name).option("startingOffsets", "earliest")
         .option("includeHeaders", "true").load()
         .selectExpr("key", "upper(CAST(value AS STRING)) AS value", "headers")
         .writeStream.format("headwater").option("kafka.bootstrap.servers", bs)
         .option("topic", out).option("checkpointLocation", str(tmp_path / "c"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(180)
    assert q.exception() is None, q.exception()
    got = consume_all(bs, out, 3)
    assert sorted(v for _, v, *_ in got) == sorted(b"V%d" % i for i in range(500))
    for key, value, _, _, _, _, headers in got:
        assert key == b"k" + value[1:]
        assert headers == [("n", value[1:])]


def _marker(bootstrap: str, group: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "isolation.level": "read_committed"})
    try:
        return c.committed([TopicPartition("__spark_sink", 0)], timeout=10)[0].offset
    finally:
        c.close()


@pytest.mark.timeout(300)
def test_exactly_once_write_survives_a_task_failure(spark, broker, topic_name, tmp_path):
    """Batch 0 fails after Spark partition 0 committed its transaction and while
    partition 1 has an open one; the restarted query replays batch 0 from the WAL:
    partition 0 is skipped (marker), partition 1 rewritten, nothing is duplicated."""
    bs, out = broker.bootstrap, topic_name + "-out"
    prefix = f"eos-{topic_name}"
    create_topic(bs, topic_name, 2)
    create_topic(bs, out, 2)
    pad = b"." * 1000  # big UDF results: the UDF worker's 64 KiB output buffer flushes
    produce(bs, topic_name, [{"value": b"r%d" % i + pad, "partition": i % 2}
                             for i in range(600)])
    flag = tmp_path / "fail-once"
    flag.write_text("")

    def fail_once(partition, offset, value):  # no hints: Spark would take a pandas UDF
        """Injected failure: in Spark partition 1 (Kafka partition 1), once partition 0's
        transaction is committed, fail at offset 250 -- once."""
        if partition == 1 and offset == 250 and os.path.exists(flag):
            deadline = time.monotonic() + 60
            while _marker(bs, f"{prefix}-0") < 1 and time.monotonic() < deadline:
                time.sleep(0.1)
            os.remove(flag)
            raise RuntimeError("injected task failure")
        return value

    check = F.udf(fail_once, BinaryType())

    def start():
        return (_source(spark, bs, topic_name)
                .select("key", check("partition", "offset", "value").alias("value"))
                .writeStream.format("headwater")
                .option("kafka.bootstrap.servers", bs).option("topic", out)
                .option("exactlyOnce", "true").option("transactionalIdPrefix", prefix)
                .option("checkpointLocation", str(tmp_path / "c"))
                .trigger(availableNow=True).start())

    # Small Arrow batches, so partition 1's writer has sent rows inside its transaction
    # before the failure: the replay must not see them (they are aborted).
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "50")
    try:
        q = start()
        with pytest.raises(Exception, match="injected task failure"):
            q.awaitTermination(180)
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert not Path(flag).exists(), "the failure was not injected"
    assert _marker(bs, f"{prefix}-0") == 1, "partition 0 should have committed batch 0"
    assert _marker(bs, f"{prefix}-1") < 1

    q = start()
    assert q.awaitTermination(180)
    assert q.exception() is None, q.exception()
    got = consume_all(bs, out, 2, isolation="read_committed")
    values = sorted(v for _, v, *_ in got)
    assert len(values) == 600, f"{len(values)} records, {len(set(values))} distinct"
    assert values == sorted(b"r%d" % i + pad for i in range(600))
    assert _marker(bs, f"{prefix}-0") == 1 and _marker(bs, f"{prefix}-1") == 1
    # the failed attempt's records are in the log, aborted: read_uncommitted sees them
    assert len(consume_all(bs, out, 2, isolation="read_uncommitted")) > 600
