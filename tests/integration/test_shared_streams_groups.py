"""A Kafka Streams 4.4 application with group.protocol=streams (KIP-1071) on three brokers
of a shared log: its internal topics are created through the controller whichever broker
coordinates the group, and the kill -9 of the broker coordinating the group, while two
instances count under exactly_once_v2, moves the group's shard to another broker without
a count lost, repeated or moved back in the read_committed output.
"""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support.cluster import Cluster, coordinator_of, wait_listed
from tests.support.kafka_reference import create_topic
from tests.support.streams_app import (
    StreamsApp,
    expected_counts,
    produce_words,
    set_group_configs,
    verify_counts,
    wait_progress,
    word_sequence,
)

pytestmark = [pytest.mark.timeout(300), pytest.mark.cluster_campaign(
    "three brokers of its own, killed under load")]

RECORDS = 12_000
PARTITIONS = 4
RATE = 2_000.0


def test_streams_group_survives_the_kill_of_its_coordinator(cluster: Cluster,
                                                             tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:8]
    app_id, source, sink = f"wc-{suffix}", f"words-{suffix}", f"counts-{suffix}"
    bootstrap = cluster.bootstrap()
    for topic in (source, sink):
        create_topic(bootstrap, topic, PARTITIONS)
    set_group_configs(bootstrap, app_id, {"streams.initial.rebalance.delay.ms": "0"})
    words = word_sequence(RECORDS)
    expected = expected_counts(words)
    half = RECORDS // 2
    app = StreamsApp(bootstrap, app_id, source, sink, "streams", tmp_path)
    deadline = time.monotonic() + 240
    with ThreadPoolExecutor(1) as pool:
        try:
            a = app.instance("a").start()
            b = app.instance("b").start()
            a.wait_state("RUNNING", deadline)
            b.wait_state("RUNNING", deadline)
            streaming = pool.submit(produce_words, bootstrap, source, words[:half], 0, RATE)
            wait_progress(bootstrap, sink, half // 4, deadline, app)
            coordinator = coordinator_of(cluster, app_id)
            cluster.brokers[coordinator].kill()
            killed = time.monotonic()
            others = [n for n in (1, 2, 3) if n != coordinator]
            streaming.result(deadline - time.monotonic())
            produce_words(cluster.bootstrap(*others), source, words[half:], half)
            check = verify_counts(cluster.bootstrap(*others), sink, expected, deadline)
            took = time.monotonic() - killed
            assert check.ok, f"{check}\n{app.logs()}"
            assert check.records == RECORDS, check
            moved_by = time.monotonic() + 30
            while (new := coordinator_of(cluster, app_id)) == coordinator:
                assert time.monotonic() < moved_by, "the group's shard did not move"
                time.sleep(0.2)
            print(f"streams group {app_id}: coordinator {coordinator} killed -9, the shard "
                  f"on {new}, every count exact {took:.1f} s later")
            a.stop()
            b.stop()
            final = verify_counts(cluster.bootstrap(*others), sink, expected,
                                  time.monotonic() + 30)
            assert final.ok and final.records == RECORDS, final
        finally:
            app.kill_all()
    cluster.start(coordinator)
    wait_listed(cluster.bootstrap(*others), [1, 2, 3])
