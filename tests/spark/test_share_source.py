"""The share-group source (kafka.share.group.id) through Spark local[2] against a real
broker: rows, acknowledgement after the sink commit, queries splitting a group."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.spark.helpers import consume_all, create_topic, produce
from tests.support.broker_process import BrokerProcess
from tests.support.wire import RawClient

# Short locks so a dead query's records come back quickly.
OVERRIDES = ("group.share.min.record.lock.duration.ms=1000",
             "group.share.min.session.timeout.ms=3000",
             "group.share.min.heartbeat.interval.ms=500")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    extra = [a for o in OVERRIDES for a in ("--override", o)]
    proc = BrokerProcess(tmp_path_factory.mktemp("broker") / "data", *extra).start()
    yield proc
    proc.stop()


def share_reader(spark, bootstrap: str, topic: str, group: str, **options: str):
    reader = (spark.readStream.format("headwater")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("kafka.share.group.id", group).option("subscribe", topic)
              .option("share.auto.offset.reset", "earliest"))
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def run_available_now(df, checkpoint: Path, out: list) -> object:
    query = (df.writeStream.foreachBatch(lambda b, _: out.extend(b.collect()))
             .option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(180), "the AvailableNow query did not finish"
    assert query.exception() is None, query.exception()
    return query


def test_rows_match_what_was_produced_and_are_acknowledged(spark, broker, topic_name,
                                                           tmp_path):
    bs, group = broker.bootstrap, f"s-{uuid.uuid4().hex[:8]}"
    create_topic(bs, topic_name, 2)
    produced = [{"value": f"v{i}".encode(), "key": None if i % 7 == 0 else b"k%d" % i,
                 "partition": i % 2, "timestamp": 1_700_000_000_000 + i,
                 "headers": [("h", b"%d" % i)] if i % 3 == 0 else None}
                for i in range(300)]
    produce(bs, topic_name, produced)
    rows: list = []
    q = run_available_now(share_reader(spark, bs, topic_name, group, includeHeaders="true",
                                       maxRecordsPerTrigger="120"),
                          tmp_path / "c", rows)
    assert list(rows[0].asDict()) == ["key", "value", "topic", "partition", "offset",
                                      "timestamp", "timestampType", "headers",
                                      "deliveryCount"]
    got = sorted((r.partition, r.offset, r.key, r.value, r.topic,
                  int(r.timestamp.timestamp() * 1000), r.timestampType,
                  [(h.key, h.value) for h in r.headers] if r.headers else None,
                  r.deliveryCount) for r in rows)
    want = sorted((i % 2, i // 2, p["key"], p["value"], topic_name, p["timestamp"], 0,
                   p["headers"], 1) for i, p in enumerate(produced))
    assert got == want
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert len(sizes) >= 2, sizes  # maxRecordsPerTrigger cut the records into batches

    # Everything was acknowledged: the same group has nothing more to give, and a new
    # record produced now is all the next run reads.
    produce(bs, topic_name, [{"value": b"late", "partition": 0}])
    more: list = []
    run_available_now(share_reader(spark, bs, topic_name, group), tmp_path / "c2", more)
    assert [(r.value, r.deliveryCount) for r in more] == [(b"late", 1)]


def share_members(broker: BrokerProcess, group: str) -> int:
    client = RawClient("127.0.0.1", broker.port)
    try:
        (entry,) = client.request(77, 1, {"group_ids": [group],
                                          "include_authorized_operations": False}).groups
    finally:
        client.close()
    return len(entry.members) if int(entry.error_code) == 0 else 0


def test_two_queries_on_one_group_split_the_records(spark, broker, topic_name, tmp_path):
    bs, group = broker.bootstrap, f"s-{uuid.uuid4().hex[:8]}"
    create_topic(bs, topic_name, 2)
    outs: list[list] = [[], []]
    lock = threading.Lock()

    def sink(i: int):
        def collect(batch, _):
            rows = [r.value for r in batch.collect()]
            with lock:
                outs[i].extend(rows)
        return collect

    queries = [share_reader(spark, bs, topic_name, group, maxRecordsPerTrigger="100")
               .writeStream.foreachBatch(sink(i))
               .option("checkpointLocation", str(tmp_path / f"c{i}"))
               .trigger(processingTime="100 milliseconds").start() for i in range(2)]
    try:
        # Records only once both runners are members: on a loaded machine the second
        # query can start after the first drained everything (seen in a full run).
        deadline = time.monotonic() + 120
        while share_members(broker, group) < 2 and time.monotonic() < deadline:
            for q in queries:
                assert q.exception() is None, q.exception()
            time.sleep(0.2)
        assert share_members(broker, group) == 2
        # In batches of 25 per partition: a share-partition hands out whole producer
        # batches, so one batch of 1,000 would go to whichever runner fetched first.
        for start in range(0, 2000, 50):
            produce(bs, topic_name, [{"value": b"r%d" % i, "partition": i % 2}
                                     for i in range(start, start + 50)])
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            for q in queries:
                assert q.exception() is None, q.exception()
            with lock:
                if len(set(outs[0]) | set(outs[1])) >= 2000:
                    break
            time.sleep(0.2)
    finally:
        for q in queries:
            q.stop()
    assert outs[0] and outs[1], [len(o) for o in outs]
    union = outs[0] + outs[1]
    assert sorted(union) == sorted(b"r%d" % i for i in range(2000))  # each once


@pytest.mark.parametrize(("options", "named"), [
    ({}, "subscribe"),
    ({"subscribe": "a", "startingOffsets": "earliest"}, "startingOffsets"),
    ({"subscribe": "a", "maxOffsetsPerTrigger": "5"}, "maxRecordsPerTrigger"),
    ({"subscribe": "a", "kafka.group.id": "g"}, "kafka.group.id"),
    ({"subscribe": "a", "share.acknowledge": "sometimes"}, "share.acknowledge"),
    ({"subscribe": "a", "share.no.such": "1"}, "share.no.such"),
])
def test_bad_options_fail_at_planning(spark, broker, options, named):
    reader = (spark.readStream.format("headwater")
              .option("kafka.bootstrap.servers", broker.bootstrap)
              .option("kafka.share.group.id", "g"))
    for k, v in options.items():
        reader = reader.option(k, v)
    with pytest.raises(Exception) as info:
        reader.load()
    assert named in str(info.value), str(info.value)[-2000:]


def test_batch_read_is_refused_and_a_consumer_group_id_is_named(spark, broker, topic_name,
                                                                tmp_path):
    from confluent_kafka import Consumer

    bs = broker.bootstrap
    with pytest.raises(Exception, match="readStream"):
        (spark.read.format("headwater").option("kafka.bootstrap.servers", bs)
         .option("kafka.share.group.id", "g").option("subscribe", "a").load().collect())
    create_topic(bs, topic_name, 1)
    produce(bs, topic_name, [{"value": b"x"}])
    classic = f"classic-{uuid.uuid4().hex[:6]}"
    c = Consumer({"bootstrap.servers": bs, "group.id": classic, "auto.offset.reset":
                  "earliest"})
    c.subscribe([topic_name])
    deadline = time.monotonic() + 30
    while c.poll(0.2) is None and time.monotonic() < deadline:
        pass
    c.commit(asynchronous=False)
    c.close()
    q = (share_reader(spark, bs, topic_name, classic).writeStream.format("noop")
         .option("checkpointLocation", str(tmp_path / "c")).trigger(availableNow=True)
         .start())
    with pytest.raises(Exception, match="kafka.share.group.id.*not a share group"):
        q.awaitTermination(120)


JOB = Path(__file__).with_name("share_stream_job.py")


def _outputs(spark, bs: str, sink: str, tmp_path: Path) -> list[str]:
    kind, _, target = sink.partition(":")
    if kind == "parquet":
        if not Path(target).exists():
            return []
        return [r.value for r in spark.read.parquet(target).collect()]
    return [v.decode() for _, v, *_ in consume_all(bs, target, 1)]


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize(("mode", "kill_at"), [("parquet", "offsets/1"),
                                               ("topic", "offsets/1"),
                                               ("topic", "commits/1")])
def test_driver_killed_mid_stream_then_restarted(spark, broker, topic_name, tmp_path, mode,
                                                 kill_at):
    """kill -9 of the whole driver (JVM, runner, workers) mid-stream, then restarts from
    the checkpoint: no record is lost; into a topic with exactlyOnce=true, none is
    duplicated either (read_committed)."""
    bs, group = broker.bootstrap, f"s-{uuid.uuid4().hex[:8]}"
    create_topic(bs, topic_name, 2)
    produce(bs, topic_name, [{"value": b"r%d" % i, "partition": i % 2}
                             for i in range(1000)])
    if mode == "topic":
        sink = f"topic:{topic_name}-out"
        create_topic(bs, f"{topic_name}-out", 1)
    else:
        sink = f"parquet:{tmp_path / 'out'}"
    ckpt = tmp_path / "ckpt"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}

    def start() -> subprocess.Popen:
        return subprocess.Popen([sys.executable, str(JOB), bs, topic_name, group, str(ckpt),
                                 sink], env=env, cwd=tmp_path, start_new_session=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    job = start()
    try:
        deadline = time.monotonic() + 150
        while not (ckpt / kill_at).exists():
            assert job.poll() is None, job.stdout.read().decode()[-3000:]  # type: ignore
            assert time.monotonic() < deadline, f"the query never reached {kill_at}"
            time.sleep(0.01)
    finally:
        os.killpg(job.pid, signal.SIGKILL)  # the driver, its JVM and Python workers
        job.wait()
    want = {f"r{i}" for i in range(1000)}
    values: list[str] = []
    for _ in range(4):  # records locked by the killed member come back within 2-3 s
        job = start()
        try:
            output, _ = job.communicate(timeout=180)
        finally:
            if job.poll() is None:
                os.killpg(job.pid, signal.SIGKILL)
        assert job.returncode == 0 and b"DONE" in output, output.decode()[-3000:]
        values = _outputs(spark, bs, sink, tmp_path)
        if {v.split(":")[0] for v in values} >= want:
            break
        time.sleep(3)
    got = [v.split(":")[0] for v in values]
    assert set(got) == want, f"{len(want - set(got))} records lost"
    if mode == "topic":
        assert len(got) == 1000, f"{len(got) - len(set(got))} duplicates"


def test_a_task_failing_once_redelivers_its_records_exactly_once(spark, broker, topic_name,
                                                                 tmp_path):
    """A task fails (a UDF raising on one record): the query stops; restarted from its
    checkpoint, the failed batch's records come back with deliveryCount 2, and the
    exactly-once sink holds each record once."""
    from pyspark.sql.functions import udf

    bs, group = broker.bootstrap, f"s-{uuid.uuid4().hex[:8]}"
    out = f"{topic_name}-out"
    create_topic(bs, topic_name, 2)
    create_topic(bs, out, 1)
    produce(bs, topic_name, [{"value": b"r%d" % i, "partition": i % 2} for i in range(400)])
    marker = str(tmp_path / "failed-once")

    def _fail_once(v):  # noqa: ANN001, ANN202 - type hints would make it a pandas UDF
        if v == "r201" and not os.path.exists(marker):
            open(marker, "w").close()
            raise RuntimeError("poison, once")
        return v

    fail_once = udf(_fail_once, "string")

    def run() -> object:
        df = share_reader(spark, bs, topic_name, group, maxRecordsPerTrigger="100",
                          **{"share.record.lock.duration.ms": "2000",
                             "share.session.timeout.ms": "3000",
                             "share.heartbeat.interval.ms": "500"})
        return (df.selectExpr("CAST(value AS STRING) AS v", "deliveryCount")
                .select(fail_once("v").alias("v"), "deliveryCount")
                .selectExpr("concat(v, ':', deliveryCount) AS value")
                .writeStream.format("headwater").option("kafka.bootstrap.servers", bs)
                .option("topic", out).option("exactlyOnce", "true")
                .option("checkpointLocation", str(tmp_path / "c"))
                .trigger(availableNow=True).start())

    with pytest.raises(Exception, match="poison, once"):
        run().awaitTermination(120)
    want = {f"r{i}" for i in range(400)}
    values: list[str] = []
    for _ in range(4):  # what the failed run still held comes back within 2-3 s
        q = run()
        assert q.awaitTermination(120)
        values = [v.decode() for _, v, *_ in consume_all(bs, out, 1)]
        if {v.split(":")[0] for v in values} >= want:
            break
        time.sleep(3)
    got = [v.split(":")[0] for v in values]
    assert sorted(got) == sorted(want), f"{len(got) - len(set(got))} duplicates"
    assert "r201:2" in values


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_broker_killed_mid_stream_the_query_recovers(spark, broker_factory, topic_name):
    """kill -9 of the broker while the query runs, then a restart on the same port and
    data: the query rides it out (the member rejoins; executors retry) and no record is
    lost."""
    extra = [a for o in OVERRIDES for a in ("--override", o)]
    hw = broker_factory(*extra)
    bs, group = hw.bootstrap, f"s-{uuid.uuid4().hex[:8]}"
    create_topic(bs, topic_name, 2)
    for chunk in range(30):  # small producer batches: a share fetch acquires whole ones
        produce(bs, topic_name, [{"value": b"r%d" % i, "partition": i % 2}
                                 for i in range(chunk * 20, chunk * 20 + 20)])
    seen: list[bytes] = []
    lock = threading.Lock()

    def collect(batch, _):
        rows = [r.value for r in batch.collect()]
        with lock:
            seen.extend(rows)

    q = (share_reader(spark, bs, topic_name, group, maxRecordsPerTrigger="50",
                      **{"share.record.lock.duration.ms": "2000",
                         "share.session.timeout.ms": "3000",
                         "share.heartbeat.interval.ms": "500"})
         .writeStream.foreachBatch(collect)
         .option("checkpointLocation", str(hw.data_dir.parent / "ckpt"))
         .trigger(processingTime="200 milliseconds").start())
    want = {b"r%d" % i for i in range(600)}
    try:
        deadline = time.monotonic() + 120
        while len(seen) < 100:
            assert q.exception() is None, q.exception()
            assert time.monotonic() < deadline, "the query did not start reading"
            time.sleep(0.05)
        hw.kill()
        with lock:
            assert len(set(seen)) < 600, "everything was read before the kill"
        time.sleep(1)
        hw.start()
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            assert q.exception() is None, q.exception()
            with lock:
                if set(seen) >= want:
                    break
            time.sleep(0.2)
    finally:
        q.stop()
    assert set(seen) == want, f"{len(want - set(seen))} records lost"


def test_locks_are_renewed_while_a_slow_batch_runs(spark, broker, topic_name, tmp_path):
    """A batch that takes 3x the lock duration keeps its records: another member of the
    group polling meanwhile gets none of them, and nothing is delivered twice."""
    from confluent_kafka import ShareConsumer

    bs, group = broker.bootstrap, f"s-{uuid.uuid4().hex[:8]}"
    create_topic(bs, topic_name, 1)
    produce(bs, topic_name, [{"value": b"r%d" % i} for i in range(100)])
    rows: list = []
    started = threading.Event()

    def slow(batch, _):
        started.set()
        time.sleep(6)
        rows.extend(batch.collect())

    q = (share_reader(spark, bs, topic_name, group,
                      **{"share.record.lock.duration.ms": "2000"})
         .writeStream.foreachBatch(slow).option("checkpointLocation", str(tmp_path / "c"))
         .trigger(availableNow=True).start())
    assert started.wait(120), "the first batch did not start"
    other = ShareConsumer({"bootstrap.servers": bs, "group.id": group})
    other.subscribe([topic_name])
    stolen = []
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            stolen += [m for m in other.poll(0.5) if m.error() is None]
    finally:
        other.close()
    assert q.awaitTermination(120)
    assert stolen == []
    assert sorted((r.value, r.deliveryCount) for r in rows) == \
        sorted((b"r%d" % i, 1) for i in range(100))


def test_the_pipeline_releases_and_rejects_single_records(spark, broker, topic_name,
                                                         tmp_path):
    """Verdicts written by the query's own sink: a released record comes back with
    deliveryCount 2, a rejected one goes to the group's dead-letter topic."""
    from confluent_kafka.admin import AdminClient, NewTopic
    from pyspark.sql import functions as F

    from pyspark_headwater import verdicts

    bs, group = broker.bootstrap, f"s-{uuid.uuid4().hex[:8]}"
    out, vt, dlq = f"{topic_name}-out", f"{topic_name}-verdicts", f"dlq.{topic_name}"
    for t in (topic_name, out, vt):
        create_topic(bs, t, 1)
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(dlq, 1, 1, config={
        "errors.deadletterqueue.group.enable": "true"})])[dlq].result(30)
    produce(bs, topic_name, [{"value": b"r%d" % i} for i in range(20)])
    df = share_reader(spark, bs, topic_name, group, **{
        "share.verdictTopic": vt, "errors.deadletterqueue.topic.name": dlq})
    v = F.col("value").cast("string")
    reject = (v == "r3")
    release = (v == "r5") & (F.col("deliveryCount") == 1)
    good = df.where(~(reject | release)).select(
        F.lit(out).alias("topic"), F.lit(None).cast("binary").alias("key"),
        F.concat(v, F.lit(":"), F.col("deliveryCount")).alias("value"))
    rows = good.unionByName(verdicts(df.where(reject), vt, "reject")).unionByName(
        verdicts(df.where(release), vt, "release"))
    q = (rows.writeStream.format("headwater").option("kafka.bootstrap.servers", bs)
         .option("exactlyOnce", "true").option("checkpointLocation", str(tmp_path / "c"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(120)
    got = sorted(v.decode() for _, v, *_ in consume_all(bs, out, 1))
    assert got == sorted([f"r{i}:1" for i in range(20) if i not in (3, 5)] + ["r5:2"])
    dead = consume_all(bs, dlq, 1)
    assert [dict(h)["__dlq.errors.offset"] for *_, h in dead] == [b"3"]


@pytest.mark.timeout(300)
def test_max_records_per_trigger_is_exact_over_large_producer_batches(spark, broker,
                                                                      topic_name, tmp_path):
    """Producer batches of 1,000 records and maxRecordsPerTrigger=100: the source asks
    for ShareFetch v2's record_limit acquisition (KIP-1206), so a batch is cut and no
    micro-batch has more than 100 rows (batch_optimized would hand out 1,000 at once)."""
    from tests.integration.test_share_consumer import produce_batches

    bs, group = broker.bootstrap, f"s-{uuid.uuid4().hex[:8]}"
    create_topic(bs, topic_name, 1)
    produce_batches(bs, topic_name, batches=2, per_batch=1000)
    rows: list = []
    q = run_available_now(share_reader(spark, bs, topic_name, group,
                                       maxRecordsPerTrigger="100"), tmp_path / "c", rows)
    assert sorted(int(r.value) for r in rows) == list(range(2000))  # all, once
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 2000 and max(sizes) <= 100, sizes
