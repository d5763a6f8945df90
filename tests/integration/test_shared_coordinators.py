"""The coordinators of three brokers on one shared log, killed under load: a classic
consumer group and a KIP-848 consumer group (librdkafka `group.protocol=consumer`) carry
on through another broker after the kill -9 of the broker coordinating them; no
committed offset is lost or moves backwards, and every acknowledged record is consumed
at least once."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition

from tests.support.cluster import (
    LEASE_MS,
    Cluster,
    Load,
    coordinator_of,
    served_topic,
    wait_listed,
)

pytestmark = [pytest.mark.timeout(240), pytest.mark.cluster_campaign(
    "three brokers of its own, killed under load")]

PARTITIONS = 6



class GroupReader:
    """A group member reading everything and committing its position every few hundred
    records; what it saw, and each partition's committed offsets in the order the
    coordinator acknowledged them."""

    def __init__(self, cluster: Cluster, group: str, topic: str, protocol: str) -> None:
        config: dict[str, object] = {
            "bootstrap.servers": cluster.bootstrap(), "group.id": group,
            "enable.auto.commit": False, "auto.offset.reset": "earliest"}
        if protocol == "consumer":
            config["group.protocol"] = "consumer"
        else:
            config["session.timeout.ms"] = 6000
        self.consumer = Consumer(config)
        self.consumer.subscribe([topic])
        self.seen: set[bytes] = set()
        self.commits: dict[int, list[int]] = {}
        self.failed_commits = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        since = 0
        while not self._stop.is_set():
            msg = self.consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                value = msg.value()
                assert value is not None
                self.seen.add(value)
                since += 1
            if since >= 300 or (since and msg is None):
                try:
                    done = self.consumer.commit(asynchronous=False) or []
                except KafkaException:
                    self.failed_commits += 1  # the coordinator is moving: next time
                    continue
                since = 0
                for tp in done:
                    if tp.error is None and tp.offset >= 0:
                        self.commits.setdefault(tp.partition, []).append(tp.offset)

    def __enter__(self) -> GroupReader:
        self._thread.start()
        return self

    def wait_seen(self, values: set[bytes], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not values <= self.seen:
            assert time.monotonic() < deadline, \
                f"{len(values - self.seen)} acknowledged records never consumed"
            time.sleep(0.1)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        self.consumer.close()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_kill_9_of_a_groups_coordinator_under_load(cluster: Cluster, protocol: str) -> None:
    topic = served_topic(cluster, f"grp-{protocol}")
    group = f"g-{protocol}-{uuid.uuid4().hex[:8]}"
    with Load(cluster.bootstrap(), topic) as load, \
            GroupReader(cluster, group, topic, protocol) as reader:
        load.wait_acked(1000)
        reader.wait_seen(set(load.acked), timeout=60)
        written = {p for p, _o in load.acked.values()}  # (the keys miss some)
        deadline = time.monotonic() + 30
        while not written <= set(reader.commits):  # a commit for each of them
            assert time.monotonic() < deadline, f"commits only for {sorted(reader.commits)}"
            time.sleep(0.1)
        coordinator = coordinator_of(cluster, group)
        before = {p: offsets[-1] for p, offsets in reader.commits.items()}
        cluster.brokers[coordinator].kill()
        killed = time.monotonic()
        others = [n for n in (1, 2, 3) if n != coordinator]
        counted = {p: len(reader.commits[p]) for p in before}
        # the group commits again through another coordinator
        while not all(len(reader.commits[p]) > n for p, n in counted.items()):
            assert time.monotonic() < killed + LEASE_MS / 1000 + 90, \
                f"the group did not commit again ({reader.failed_commits} failed commits)"
            time.sleep(0.1)
        took = time.monotonic() - killed
        load.wait_acked(len(load.acked) + 1000, timeout=60)
        reader.wait_seen(set(load.acked), timeout=60)  # each at least once
    for partition, offsets in reader.commits.items():
        assert offsets == sorted(offsets), f"partition {partition}'s commits moved back"
    check = Consumer({"bootstrap.servers": cluster.bootstrap(*others), "group.id": group,
                      "enable.auto.commit": False})
    try:
        committed = check.committed([TopicPartition(topic, p) for p in range(PARTITIONS)],
                                    timeout=30)
    finally:
        check.close()
    for tp in committed:
        assert tp.offset >= before.get(tp.partition, -1001), (tp.partition, tp.offset, before)
    print(f"{protocol} group committing again {took:.1f} s after the kill -9 of its "
          f"coordinator, broker {coordinator} (lease {LEASE_MS} ms)")
    cluster.start(coordinator)
    wait_listed(cluster.bootstrap(*others), [1, 2, 3])
