"""Batch read and write through Spark (local[2]) against a real broker."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest
from confluent_kafka import murmur2

from tests.spark.helpers import consume_all, create_topic, produce

T0 = 1_700_000_000_000  # record timestamps: T0 + i ms


def _records(n: int, partitions: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        r: dict = {"value": bytes(rng.randrange(256) for _ in range(rng.randrange(0, 40))),
                   "partition": i % partitions, "timestamp": T0 + i}
        if i % 5:
            r["key"] = b"k-%d-" % i + bytes([i % 256])
        if i % 3 == 0:
            r["headers"] = [("h1", b"\x00\xff%d" % i), ("h2", None if i % 2 else b"")]
        elif i % 3 == 1:
            r["headers"] = [("only", b"x")]
        out.append(r)
    return out


def _read(spark, bootstrap: str, topic: str, **options: str):
    reader = (spark.read.format("headwater").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic))
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _rows(df) -> list[tuple]:
    cols = ["key", "value", "topic", "partition", "offset", "unix_millis(timestamp) AS ts",
            "timestampType"]
    if "headers" in df.columns:
        cols.append("headers")
    out = []
    for r in df.selectExpr(*cols).collect():
        row = (None if r.key is None else bytes(r.key),
               None if r.value is None else bytes(r.value),
               r.topic, r.partition, r.offset, r.ts, r.timestampType)
        if "headers" in df.columns:
            row += (None if r.headers is None else
                    [(h.key, None if h.value is None else bytes(h.value)) for h in r.headers],)
        out.append(row)
    return sorted(out, key=lambda x: (x[3], x[4]))


def test_batch_read_returns_exactly_the_produced_records(spark, broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 3)
    produce(broker.bootstrap, topic_name, _records(3000, 3))
    expected = sorted(
        [(k, v, t, p, o, ts, 0, [tuple(h) for h in hs] if hs else None)
         for k, v, t, p, o, ts, hs in consume_all(broker.bootstrap, topic_name, 3)],
        key=lambda x: (x[3], x[4]))
    assert len(expected) == 3000

    df = _read(spark, broker.bootstrap, topic_name, includeHeaders="true")
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp",
                          "timestampType", "headers"]
    assert df.rdd.getNumPartitions() == 3
    assert _rows(df) == expected
    # the same without headers: the column is absent, the rest identical
    plain = _read(spark, broker.bootstrap, topic_name)
    assert "headers" not in plain.columns
    assert _rows(plain) == [e[:7] for e in expected]
    # the librdkafka reader (TLS/SASL connections) yields the same rows
    via_client = _read(spark, broker.bootstrap, topic_name, includeHeaders="true",
                       decoder="librdkafka")
    assert _rows(via_client) == expected


def test_starting_and_ending_offsets(spark, broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    produce(broker.bootstrap, topic_name, _records(200, 2))
    df = _read(spark, broker.bootstrap, topic_name,
               startingOffsets=json.dumps({topic_name: {"0": 10, "1": -2}}),
               endingOffsets=json.dumps({topic_name: {"0": 25, "1": -1}}))
    got = {(r.partition, r.offset) for r in df.select("partition", "offset").collect()}
    assert got == {(0, o) for o in range(10, 25)} | {(1, o) for o in range(100)}

    # assign + a single global endingTimestamp: partition 0 holds T0 + even i
    df = (spark.read.format("headwater").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("assign", json.dumps({topic_name: [0]}))
          .option("endingTimestamp", str(T0 + 40)).load())
    assert sorted(r.offset for r in df.select("offset").collect()) == list(range(20))

    # minPartitions splits ranges; the rows stay the same
    df = _read(spark, broker.bootstrap, topic_name, minPartitions="5")
    assert df.rdd.getNumPartitions() >= 5
    assert df.count() == 200
    assert df.select("partition", "offset").distinct().count() == 200


def test_timestamp_options(spark, broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    produce(broker.bootstrap, topic_name, _records(100, 2))
    df = _read(spark, broker.bootstrap, topic_name, startingTimestamp=str(T0 + 50))
    assert sorted(r.ts for r in df.selectExpr("unix_millis(timestamp) AS ts").collect()) == \
        [T0 + i for i in range(50, 100)]
    df = _read(spark, broker.bootstrap, topic_name,
               startingOffsetsByTimestamp=json.dumps({topic_name: {"0": T0 + 10,
                                                                   "1": T0 + 91}}),
               endingOffsetsByTimestamp=json.dumps({topic_name: {"0": T0 + 20,
                                                                 "1": T0 + 95}}))
    assert sorted(r.ts for r in df.selectExpr("unix_millis(timestamp) AS ts").collect()) == \
        [T0 + i for i in (10, 12, 14, 16, 18, 91, 93)]
    # no record at or after the timestamp: an error by default, 'latest' on request
    with pytest.raises(Exception, match="startingOffsetsByTimestampStrategy"):
        _read(spark, broker.bootstrap, topic_name, startingTimestamp=str(T0 + 10_000)).count()
    assert _read(spark, broker.bootstrap, topic_name, startingTimestamp=str(T0 + 10_000),
                 startingOffsetsByTimestampStrategy="latest").count() == 0


def test_fail_on_data_loss(spark, broker, topic_name):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    create_topic(broker.bootstrap, topic_name, 1)
    produce(broker.bootstrap, topic_name, [{"value": b"%d" % i} for i in range(100)])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.delete_records([TopicPartition(topic_name, 0, 50)]).values():
        future.result(30)  # the log now starts at offset 50
    start = json.dumps({topic_name: {"0": 10}})
    with pytest.raises(Exception, match="failOnDataLoss"):
        _read(spark, broker.bootstrap, topic_name, startingOffsets=start).collect()
    df = _read(spark, broker.bootstrap, topic_name, startingOffsets=start,
               failOnDataLoss="false")
    assert sorted(r.offset for r in df.select("offset").collect()) == list(range(50, 100))


def test_batch_write_then_read_back(spark, broker, topic_name):
    from pyspark.sql import functions as F

    create_topic(broker.bootstrap, topic_name, 4)
    n = 2000
    df = spark.range(n).select(
        F.format_string("key-%d", "id").alias("key"),
        F.concat(F.lit("value-"), F.col("id").cast("string")).cast("binary").alias("value"),
        F.when(F.col("id") % 10 == 0, F.lit(3)).cast("int").alias("partition"),
        F.when(F.col("id") % 7 == 0, F.array(F.struct(
            F.lit("h").alias("key"), F.col("id").cast("string").cast("binary").alias("value")))
        ).alias("headers"),
    )
    (df.write.format("headwater").option("kafka.bootstrap.servers", broker.bootstrap)
     .option("topic", topic_name).mode("append").save())
    got = consume_all(broker.bootstrap, topic_name, 4)
    assert len(got) == n
    by_id = {int(v.decode().split("-")[1]): (k, p, h) for k, v, _, p, _, _, h in got}
    assert sorted(by_id) == list(range(n))
    for i, (key, part, headers) in by_id.items():
        assert key == f"key-{i}".encode()
        if i % 10 == 0:
            assert part == 3  # the partition column wins
        else:  # Kafka's default partitioner: murmur2 of the key, positive, mod count
            assert part == murmur2(key, 4)
        assert headers == ([("h", str(i).encode())] if i % 7 == 0 else None)
    # and Spark reads the same records back
    assert _read(spark, broker.bootstrap, topic_name).count() == n


def test_batch_write_topic_column_and_string_value(spark, broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    df = spark.createDataFrame([(topic_name, "a", None), (topic_name, "b", "k")],
                               "topic string, value string, key string")
    (df.write.format("headwater").option("kafka.bootstrap.servers", broker.bootstrap)
     .mode("append").save())
    got = consume_all(broker.bootstrap, topic_name, 1)
    assert sorted(((k, v) for k, v, *_ in got), key=lambda kv: kv[1]) == \
        [(None, b"a"), (b"k", b"b")]


def test_murmur2_matches_the_java_client():
    """The partition check above relies on confluent_kafka.murmur2 being Java's
    ``toPositive(Utils.murmur2(key)) % n``; reference hashes from Kafka's UtilsTest."""
    java = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536,
            b"abc": 479470107}
    for key, h in java.items():
        for n in (4, 7, 1_000_003):
            assert murmur2(key, n) == (h & 0x7FFFFFFF) % n


BAD_READS = [
    ({}, "subscribe"),
    ({"subscribe": "a", "assign": '{"a":[0]}'}, "assign"),
    ({"subscribe": "a", "startingoffset": "earliest"}, "startingoffset"),
    ({"subscribe": "a", "kafka.auto.offset.reset": "earliest"}, "auto.offset.reset"),
    ({"subscribe": "a", "startingOffsets": "latest"}, "startingOffsets"),
    ({"subscribe": "a", "endingOffsets": "earliest"}, "endingOffsets"),
    ({"subscribe": "a", "startingOffsets": "{not json"}, "startingOffsets"),
    ({"subscribe": "a", "startingOffsets": '{"b":{"0":1}}'}, "startingOffsets"),
    ({"subscribe": "a", "failOnDataLoss": "maybe"}, "failOnDataLoss"),
    ({"subscribe": "a", "minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"},
     "minOffsetsPerTrigger"),
    ({"subscribe": "a", "maxOffsetsPerTrigger": "lots"}, "maxOffsetsPerTrigger"),
    ({"subscribe": "a", "kafka.no.such.property": "1"}, "no.such.property"),
    ({"subscribe": "a", "kafka.isolation.level": "sometimes"}, "kafka.isolation.level"),
    ({"assign": "[0]"}, "assign"),
    ({"subscribePattern": "("}, "subscribePattern"),
    ({"subscribe": "a", "decoder": "fastest"}, "decoder"),
]


@pytest.mark.parametrize(("options", "named"), BAD_READS)
def test_bad_read_options_fail_at_planning(spark, broker, options, named):
    reader = spark.read.format("headwater").option("kafka.bootstrap.servers", broker.bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    with pytest.raises(Exception) as info:
        reader.load().collect()
    assert named in str(info.value), str(info.value)[-2000:]


def test_bad_options_in_streaming_and_writes(spark, broker, topic_name, tmp_path):
    base = {"kafka.bootstrap.servers": broker.bootstrap}
    with pytest.raises(Exception, match="endingOffsets"):
        q = (spark.readStream.format("headwater").options(**base, subscribe="a",
                                                         endingOffsets="latest")
             .load().writeStream.format("noop")
             .option("checkpointLocation", str(tmp_path / "c1")).start())
        q.awaitTermination(60)
        raise AssertionError(str(q.exception()))
    with pytest.raises(Exception, match="fixed schema"):
        spark.read.format("headwater").schema("value binary").options(
            **base, subscribe="a").load().collect()
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match="topic"):
        df.write.format("headwater").options(**base).mode("append").save()
    with pytest.raises(Exception, match="Overwrite"):
        df.write.format("headwater").options(**base, topic="x").mode("overwrite").save()
    with pytest.raises(Exception, match="'value' not found"):
        spark.createDataFrame([("v",)], "data string").write.format("headwater").options(
            **base, topic="x").mode("append").save()
    with pytest.raises(Exception, match="kafka.acks"):
        df.write.format("headwater").options(**base, topic="x", exactlyOnce="true").option(
            "kafka.acks", "1").mode("append").save()
    with pytest.raises(Exception, match="no_such_sink_option"):
        df.write.format("headwater").options(**base, topic="x",
                                             no_such_sink_option="1").mode("append").save()


def test_registered_without_explicit_register_call(tmp_path):
    """Spark finds the installed `pyspark_headwater` module by itself in a fresh driver
    (no import, no spark.dataSource.register); run from a directory that is not the
    project, so only the installed package can be found."""
    from tests.spark.conftest import spark_env

    script = ("from pyspark.sql import SparkSession\n"
              "s = SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false')"
              ".getOrCreate()\n"
              "import sys\n"
              "assert 'pyspark_headwater' not in sys.modules\n"
              "df = s.read.format('headwater').option('kafka.bootstrap.servers', 'x:1')"
              ".option('subscribe', 't').load()\n"
              "print('COLUMNS', ','.join(df.columns))\n")
    env = spark_env()
    env.pop("PYTHONPATH", None)
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert "COLUMNS key,value,topic,partition,offset,timestamp,timestampType" in out.stdout, \
        out.stderr[-3000:]
    assert os.path.isdir(tmp_path)
