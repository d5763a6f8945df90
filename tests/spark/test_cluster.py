"""The Spark pipeline against three brokers of one shared log, one of them killed (kill -9)
under a streaming query: the partitioned source into Parquet (its commit log) finishes
and its output holds every record exactly once, at its offset; the share-group source
into a topic with exactlyOnce=true (restarted from its checkpoint when the kill failed
it, as a Kafka user would) ends with every record once in the output (read_committed),
whether the broker led partitions or held the coordinators."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.spark.helpers import consume_all, produce
from tests.support.cluster import (
    Cluster,
    coordinator_of,
    create,
    leaders,
    served_topic,
    start_cluster,
    topic_id_of,
    victim,
    wait_listed,
)
from tests.support.engines import PostgresServer, VersityGateway

pytestmark = [pytest.mark.timeout(300), pytest.mark.cluster_campaign(
    "three brokers of its own, one killed under a streaming query")]

JOB = Path(__file__).with_name("stream_job.py")
SHARE_JOB = Path(__file__).with_name("share_stream_job.py")
PARTITIONS, COUNT = 6, 3000
# share_stream_job.py's short locks and sessions (2 s, 3 s, 0.5 s), so what a dead member
# or a lost share-partition leader held comes back quickly
SHARE_OVERRIDES = ("group.share.min.record.lock.duration.ms=1000",
                   "group.share.min.session.timeout.ms=3000",
                   "group.share.min.heartbeat.interval.ms=500")


@pytest.fixture(scope="module")
def cluster(postgres: PostgresServer, versitygw: VersityGateway,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from start_cluster(postgres, versitygw, tmp_path_factory.mktemp("cluster"),
                             SHARE_OVERRIDES)


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


SHARE_COUNT = 1000  # 250 per micro-batch: four batches, the kill once batch 1 is logged


def share_pipeline_through_a_kill(cluster: Cluster, tmp_path: Path, source: str,
                                  output: str, group: str, node: int) -> list[str]:
    """share_stream_job.py reads `source` through share group `group` into `output`
    (exactlyOnce=true); broker `node` is killed (kill -9) once batch 1 is logged, and
    started again at the end. A run that succeeds has drained the queue: the output
    (read_committed) holds every record, even though the kill made the member rejoin a
    moved coordinator or lose a share-partition leader (an AvailableNow run keeps
    fetching for a session timeout and a lock duration after such a disruption). A run
    the kill failed is restarted from its checkpoint, as a user would, and must
    succeed. The output's values (`r<i>`, without the delivery count); each run's log
    is tmp_path/run-<n>.log."""
    produce(cluster.bootstrap(), source, [{"value": f"r{i}".encode(),
                                           "partition": i % PARTITIONS}
                                          for i in range(SHARE_COUNT)])
    ckpt = tmp_path / "ckpt"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}

    def run(timeout: float, killing: bool = False) -> tuple[int, str]:
        job = subprocess.Popen([sys.executable, str(SHARE_JOB), cluster.bootstrap(), source,
                                group, str(ckpt), f"topic:{output}"],
                               env=env, cwd=tmp_path, start_new_session=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            if killing:
                deadline = time.monotonic() + 90
                while not (ckpt / "offsets" / "1").exists():  # the query is under way
                    assert job.poll() is None, job.stdout.read().decode()[-3000:]  # type: ignore
                    assert time.monotonic() < deadline, "the query never reached batch 1"
                    time.sleep(0.05)
                cluster.brokers[node].kill()
            out, _ = job.communicate(timeout=timeout)
        finally:
            if job.poll() is None:
                os.killpg(job.pid, 9)  # the driver, its JVM and Python workers
                job.wait()
        text = out.decode()
        (tmp_path / f"run-{len(runs)}.log").write_text(text)
        return job.returncode, text

    def written() -> list[str]:
        return [v.decode() for _, v, *_ in consume_all(cluster.bootstrap(), output,
                                                        PARTITIONS)]

    want = {f"r{i}" for i in range(SHARE_COUNT)}
    runs: list[tuple[int, float, int]] = []  # exit code, seconds, records written by then
    began = time.monotonic()
    try:
        code, text = run(120, killing=True)  # may fail through the kill
        values = written()
        runs.append((code, time.monotonic() - began, len(values)))
        if code != 0:
            started = time.monotonic()
            code, text = run(110)  # from the checkpoint
            assert code == 0 and "DONE" in text, text[-3000:]
            values = written()
            runs.append((code, time.monotonic() - started, len(values)))
        assert "DONE" in text, text[-3000:]
        missing = want - {v.split(":")[0] for v in values}
        assert not missing, f"a successful run left {len(missing)} records unread; " \
            f"runs (exit, s, written) {runs}"
    finally:
        killed = cluster.brokers[node].proc
        if killed is not None and killed.poll() is not None:
            cluster.start(node)
    wait_listed(cluster.bootstrap(), [1, 2, 3])
    print(f"runs (exit, s, written) {[(c, round(t, 1), n) for c, t, n in runs]}; "
          f"delivery counts {dict(Counter(v.split(':')[1] for v in values))}")
    return [v.split(":")[0] for v in values]


def spread_topic(cluster: Cluster, prefix: str) -> tuple[str, dict[int, int], int]:
    """A new topic with partitions led by all three brokers (placement spreads a topic
    evenly; a name is drawn again while a broker was not yet seen when it was placed);
    its placement and the controller."""
    for _ in range(20):
        topic = served_topic(cluster, prefix)
        placement, controller = leaders(cluster.bootstrap(), topic, PARTITIONS, {1, 2, 3})
        if set(placement.values()) == {1, 2, 3}:
            return topic, placement, controller
    raise AssertionError(f"20 topics and none led by all three brokers: {placement}")


def spread_topics(cluster: Cluster) -> tuple[str, str, dict[int, int], dict[int, int],
                                              int]:
    """A source and an output topic, each with partitions led by all three brokers; their
    placements and the controller."""
    wait_listed(cluster.bootstrap(), [1, 2, 3])
    source, on_source, controller = spread_topic(cluster, "share-src")
    output, on_output, _ = spread_topic(cluster, "share-out")
    return source, output, on_source, on_output, controller


def test_a_share_group_pipeline_survives_the_kill_9_of_a_partition_leader(
        spark, cluster: Cluster, tmp_path: Path) -> None:
    """The killed broker leads source partitions (share-partitions whose acquisitions
    are lost) and output partitions (where open transactions write), not the
    coordinators."""
    source, output, on_source, on_output, _controller = spread_topics(cluster)
    node, _held = victim(cluster, source, PARTITIONS)  # not the controller
    group = f"sg-{uuid.uuid4().hex[:8]}"
    got = share_pipeline_through_a_kill(cluster, tmp_path, source, output, group, node)
    assert sorted(got) == sorted(f"r{i}" for i in range(SHARE_COUNT)), \
        f"{len(got) - len(set(got))} duplicates"
    print(f"broker {node} led source partitions "
          f"{[p for p, n in on_source.items() if n == node]} and output partitions "
          f"{[p for p, n in on_output.items() if n == node]}")


def test_a_share_group_pipeline_survives_the_kill_9_of_the_coordinators(
        spark, cluster: Cluster, tmp_path: Path) -> None:
    """The killed broker coordinates the share group, the sink's transactions and the
    state of some of the share-partitions (a group name is drawn until one broker holds
    all three kinds of shard), and leads partitions of both topics; its shards move to
    the brokers left."""
    source, output, _on_source, _on_output, _controller = spread_topics(cluster)
    topic_id = base64.urlsafe_b64encode(topic_id_of(cluster, source).bytes).rstrip(b"=")
    for _ in range(200):
        group = f"sg-{uuid.uuid4().hex[:8]}"
        node = coordinator_of(cluster, group)
        share_keys = [f"{group}:{topic_id.decode()}:{p}"  # Kafka's SharePartitionKey
                      for p in range(PARTITIONS)]
        if coordinator_of(cluster, f"spark-{group}-0", 1) == node and any(
                coordinator_of(cluster, key, 2) == node for key in share_keys):
            break
    else:
        raise AssertionError("no group name with its coordinators on one broker")
    got = share_pipeline_through_a_kill(cluster, tmp_path, source, output, group, node)
    assert sorted(got) == sorted(f"r{i}" for i in range(SHARE_COUNT)), \
        f"{len(got) - len(set(got))} duplicates"
