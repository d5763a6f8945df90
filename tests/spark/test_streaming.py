"""Streaming reads (readStream) through Spark local[2] against a real broker."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions

from tests.spark.helpers import committed, create_topic, end_offsets, produce

JOB = Path(__file__).with_name("stream_job.py")


def _run_available_now(spark, bootstrap: str, topic: str, checkpoint: Path, out: list,
                       group: str, **options: str):
    """Runs to the end; rows land in `out` (foreachBatch: recoverable from a checkpoint,
    unlike the memory sink)."""
    reader = (spark.readStream.format("headwater").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .option("kafka.group.id", group))
    for k, v in options.items():
        reader = reader.option(k, v)
    query = (reader.load().selectExpr("CAST(value AS STRING) AS v", "partition", "offset")
             .writeStream.foreachBatch(lambda df, _: out.extend(r.v for r in df.collect()))
             .option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(180), "the AvailableNow query did not finish"
    assert query.exception() is None, query.exception()
    return query


def _last_offsets(checkpoint: Path) -> dict:
    """The offsets Spark logged for the last batch (the last line of offsets/N)."""
    last = max((p for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()),
               key=lambda p: int(p.name))
    return json.loads(last.read_text().strip().splitlines()[-1])


def test_available_now_resumes_without_loss_or_duplicates(spark, broker, topic_name, tmp_path):
    bs, group = broker.bootstrap, f"g-{topic_name}"
    create_topic(bs, topic_name, 3)
    produce(bs, topic_name, [{"value": f"a{i}".encode(), "key": b"%d" % i} for i in range(300)])
    ckpt = tmp_path / "ckpt"

    run1: list[str] = []
    q1 = _run_available_now(spark, bs, topic_name, ckpt, run1, group,
                            maxOffsetsPerTrigger="120")
    assert sorted(run1) == sorted(f"a{i}" for i in range(300))
    sizes = [p["numInputRows"] for p in q1.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 300 and len(sizes) >= 3 and max(sizes) <= 120, sizes
    ends = end_offsets(bs, topic_name, 3)
    # The last batch's commit() never comes from Spark: latestOffset(start) made it.
    assert committed(bs, group, topic_name, 3) == ends
    logged = _last_offsets(ckpt)
    assert logged == {topic_name: {str(p): o for p, o in ends.items()}}

    produce(bs, topic_name, [{"value": f"b{i}".encode()} for i in range(200)])
    run2: list[str] = []
    _run_available_now(spark, bs, topic_name, ckpt, run2, group)
    assert sorted(run2) == sorted(f"b{i}" for i in range(200))
    ends = end_offsets(bs, topic_name, 3)
    assert committed(bs, group, topic_name, 3) == ends

    # lag is visible to the broker's own tooling, and is zero
    out = subprocess.run([sys.executable, "-m", "headwater.cli", "groups",
                          "--bootstrap-server", bs, "--json", "describe", group],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    described = json.loads(out.stdout)
    assert sorted((r["partition"], r["lag"]) for r in described) == [(0, 0), (1, 0), (2, 0)]

    # checkpoint offsets paste into startingOffsets: a batch read from run 1's end
    # returns exactly run 2's records
    df = (spark.read.format("headwater").option("kafka.bootstrap.servers", bs)
          .option("subscribe", topic_name).option("startingOffsets", json.dumps(logged))
          .load())
    assert sorted(r.v for r in df.selectExpr("CAST(value AS STRING) v").collect()) == \
        sorted(f"b{i}" for i in range(200))


def test_latest_start_then_new_partitions_from_earliest(spark, broker, topic_name, tmp_path):
    """A new query with the default startingOffsets=latest skips existing records; a
    partition added while it runs is read from its beginning."""
    bs = broker.bootstrap
    create_topic(bs, topic_name, 2)
    produce(bs, topic_name, [{"value": b"old"} for _ in range(10)])
    seen: list[str] = []
    q = (spark.readStream.format("headwater").option("kafka.bootstrap.servers", bs)
         .option("subscribe", topic_name).load()
         .selectExpr("CAST(value AS STRING) AS v").writeStream
         .foreachBatch(lambda df, _: seen.extend(r.v for r in df.collect()))
         .option("checkpointLocation", str(tmp_path / "c"))
         .trigger(processingTime="200 milliseconds").start())

    def wait_for(n: int) -> None:
        deadline = time.monotonic() + 120
        while len(seen) < n and time.monotonic() < deadline:
            assert q.exception() is None, q.exception()
            time.sleep(0.1)

    try:
        deadline = time.monotonic() + 120
        while not q.recentProgress and time.monotonic() < deadline:
            time.sleep(0.1)
        produce(bs, topic_name, [{"value": b"new"} for _ in range(5)])
        wait_for(5)
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_partitions([NewPartitions(topic_name, 3)])[topic_name].result(30)
        produce(bs, topic_name, [{"value": b"added", "partition": 2} for _ in range(3)])
        wait_for(8)
        time.sleep(1)  # nothing more may arrive
        assert sorted(seen) == ["added"] * 3 + ["new"] * 5
    finally:
        q.stop()


@pytest.mark.timeout(300)
def test_killed_mid_batch_and_restarted_loses_nothing(spark, broker, topic_name, tmp_path):
    bs = broker.bootstrap
    create_topic(bs, topic_name, 2)
    produce(bs, topic_name, [{"value": f"r{i}".encode(), "partition": i % 2}
                             for i in range(1000)])
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}

    def start() -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, str(JOB), bs, topic_name, str(ckpt), str(out)],
            env=env, cwd=tmp_path, start_new_session=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    job = start()
    try:
        # Kill as soon as batch 1 is in the offset log (planned, running): a batch takes
        # ~1 s here, so it cannot have been committed yet (asserted below).
        deadline = time.monotonic() + 150
        while not (ckpt / "offsets" / "1").exists():
            assert job.poll() is None, job.stdout.read().decode()[-3000:]  # type: ignore
            assert time.monotonic() < deadline, "the query never reached batch 1"
            time.sleep(0.02)
    finally:
        os.killpg(job.pid, signal.SIGKILL)  # the driver, its JVM and Python workers
        job.wait()
    assert (ckpt / "commits" / "0").exists()
    assert not (ckpt / "commits" / "1").exists(), "batch 1 finished before the kill"

    job = start()
    try:
        output, _ = job.communicate(timeout=180)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    assert job.returncode == 0 and b"DONE" in output, output.decode()[-3000:]
    rows = spark.read.parquet(str(out)).select("value", "partition", "offset").collect()
    values = [r.value for r in rows]
    assert len(values) == 1000, f"{len(values)} rows, {len(set(values))} distinct"
    assert sorted(values) == sorted(f"r{i}" for i in range(1000))
    assert {(r.partition, r.offset) for r in rows} == \
        {(p, o) for p in (0, 1) for o in range(500)}
