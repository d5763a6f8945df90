"""The Spark pipeline against three brokers of one shared log: a streaming query
(`format("headwater")`, partitioned source, Parquet sink with its commit log) reads a
topic led by all three brokers while one of them is killed (kill -9); the query finishes
and its output holds every record exactly once, at its offset."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.spark.helpers import produce
from tests.support.cluster import Cluster, create, leaders, victim

pytestmark = [pytest.mark.timeout(300), pytest.mark.cluster_campaign(
    "three brokers of its own, one killed under a streaming query")]

JOB = Path(__file__).with_name("stream_job.py")
PARTITIONS, COUNT = 6, 3000



def test_a_streaming_query_survives_the_kill_9_of_a_broker(spark, cluster: Cluster,
                                                            topic_name: str,
                                                            tmp_path: Path) -> None:
    create(cluster.bootstrap(), topic_name, PARTITIONS)
    leaders(cluster.bootstrap(), topic_name, PARTITIONS, {1, 2, 3})
    node, held = victim(cluster, topic_name, PARTITIONS)
    produce(cluster.bootstrap(), topic_name, [{"value": f"r{i}".encode(),
                                              "partition": i % PARTITIONS}
                                             for i in range(COUNT)])
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"
    job = subprocess.Popen(
        [sys.executable, str(JOB), cluster.bootstrap(), topic_name, str(ckpt), str(out)],
        env={**os.environ, "PYSPARK_PYTHON": sys.executable}, cwd=tmp_path,
        start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 150
        while not (ckpt / "offsets" / "1").exists():  # the query is under way
            assert job.poll() is None, job.stdout.read().decode()[-3000:]  # type: ignore
            assert time.monotonic() < deadline, "the query never reached batch 1"
            time.sleep(0.05)
        cluster.brokers[node].kill()  # it led partitions `held`
        output, _ = job.communicate(timeout=240)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, 9)
            job.wait()
    assert job.returncode == 0 and b"DONE" in output, output.decode()[-3000:]
    rows = spark.read.parquet(str(out)).select("value", "partition", "offset").collect()
    values = [r.value for r in rows]
    assert len(values) == COUNT, f"{len(values)} rows, {len(set(values))} distinct"
    assert sorted(values) == sorted(f"r{i}" for i in range(COUNT))
    per = COUNT // PARTITIONS
    assert {(r.partition, r.offset) for r in rows} == \
        {(p, o) for p in range(PARTITIONS) for o in range(per)}
    print(f"streaming query finished through the kill -9 of broker {node} "
          f"(it led partitions {held})")
    cluster.start(node)
