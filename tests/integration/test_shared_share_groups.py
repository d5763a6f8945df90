"""Share groups on three brokers of one shared log: the share-partition leaders live with
the partitions' serving leases on every broker and persist their state through the
share coordinator wherever it runs (Kafka's share-state APIs between brokers), so a
share group reads a topic spread over the cluster, and the kill -9 of a broker leading
some of its partitions delivers no acknowledged record again."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from tests.support.cluster import (
    LEASE_MS,
    Cluster,
    key_on,
    leaders,
    served_topic,
    victim,
    wait_listed,
)

pytestmark = [pytest.mark.timeout(240), pytest.mark.cluster_campaign(
    "three brokers of its own, killed under load")]

PARTITIONS = 6



def share_group(cluster: Cluster, coordinator: int | None = None) -> str:
    """A new share group reading from the earliest offset (coordinated by broker
    `coordinator` if given)."""
    group = (f"sg-{uuid.uuid4().hex[:8]}" if coordinator is None
             else key_on(cluster, coordinator, "sg"))
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    entry = ConfigEntry("share.auto.offset.reset", "earliest",
                        incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource("group", group, incremental_configs=[entry])
    admin.incremental_alter_configs([resource])[resource].result(30)
    return group


def produce(cluster: Cluster, topic: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap(), "linger.ms": 5,
                         "enable.idempotence": True, "acks": "all"})
    for value in range(start, start + count):
        producer.produce(topic, str(value).encode(), partition=value % PARTITIONS)
        if value % 50 == 49:
            producer.poll(0)
    assert producer.flush(60) == 0


class Reader:
    """A share consumer acknowledging (explicitly, ACCEPT) every record it gets, and
    committing each poll's acknowledgements before it counts them as acknowledged."""

    def __init__(self, cluster: Cluster, group: str, topic: str) -> None:
        self.consumer = ShareConsumer({"bootstrap.servers": cluster.bootstrap(),
                                       "group.id": group,
                                       "share.acknowledgement.mode": "explicit"})
        self.consumer.subscribe([topic])
        self.delivered: Counter[int] = Counter()
        self.acknowledged: set[int] = set()
        self.again: list[int] = []  # delivered after its acknowledgement was committed
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.errors: list[str] = []

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                got = self.consumer.poll(0.5)
            except Exception as exc:  # noqa: BLE001  a moving leader; the next poll retries
                self.errors.append(str(exc))
                continue
            batch = []
            for msg in got:
                if msg.error() is not None:
                    continue
                value = int(msg.value())
                self.delivered[value] += 1
                if value in self.acknowledged:
                    self.again.append(value)
                self.consumer.acknowledge(msg, AcknowledgeType.ACCEPT)
                batch.append(value)
            if batch:
                try:
                    results = self.consumer.commit_sync(30)
                except Exception as exc:  # noqa: BLE001  not acknowledged: may come again
                    self.errors.append(str(exc))
                    continue
                failed = {tp.partition for tp, err in (results or {}).items()
                          if err is not None}
                self.acknowledged.update(v for v in batch if v % PARTITIONS not in failed)

    def __enter__(self) -> Reader:
        self._thread.start()
        return self

    def wait(self, values: set[int], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not values <= set(self.delivered):
            assert time.monotonic() < deadline, \
                f"{len(values - set(self.delivered))} records never delivered"
            time.sleep(0.1)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        self.consumer.close()


def test_a_share_group_reads_a_topic_spread_over_the_cluster(cluster: Cluster) -> None:
    topic = served_topic(cluster, "queue")
    placement, _controller = leaders(cluster.bootstrap(), topic, PARTITIONS, {1, 2, 3})
    assert len(set(placement.values())) >= 2, placement  # leaders on several brokers
    group = share_group(cluster)
    produce(cluster, topic, 0, 600)
    with Reader(cluster, group, topic) as reader:
        reader.wait(set(range(600)), timeout=60)
    assert not reader.again, f"acknowledged records delivered again: {reader.again[:5]}"
    assert set(reader.delivered) == set(range(600))
    assert max(reader.delivered.values()) == 1, "a record delivered twice without a failure"


def read_through_a_kill(cluster: Cluster, topic: str, node: int,
                        group: str | None = None) -> float:
    """A share group reads 600 records, broker `node` is killed (kill -9), 600 more are
    produced once the others lead every partition: every record is delivered, none
    acknowledged is delivered again. Seconds from the kill until all were delivered; the
    broker is started again."""
    others = [n for n in (1, 2, 3) if n != node]
    group = group or share_group(cluster)
    produce(cluster, topic, 0, 600)
    with Reader(cluster, group, topic) as reader:
        reader.wait(set(range(600)), timeout=60)
        cluster.brokers[node].kill()
        killed = time.monotonic()
        leaders(cluster.bootstrap(*others), topic, PARTITIONS, set(others),
                timeout=LEASE_MS / 1000 + 30)
        produce(cluster, topic, 600, 600)  # partitions it led, now led by the others
        reader.wait(set(range(1200)), timeout=LEASE_MS / 1000 + 90)
        took = time.monotonic() - killed
    assert not reader.again, f"acknowledged records delivered again: {reader.again[:5]}"
    assert set(reader.delivered) == set(range(1200))
    cluster.start(node)
    wait_listed(cluster.bootstrap(*others), [1, 2, 3])
    return took


def test_kill_9_of_a_share_partition_leader_delivers_nothing_acknowledged_again(
        cluster: Cluster) -> None:
    topic = served_topic(cluster, "queue-kill")
    node, held = victim(cluster, topic, PARTITIONS)
    took = read_through_a_kill(cluster, topic, node)
    print(f"share group served {took:.1f} s after the kill -9 of broker {node} "
          f"(it led partitions {held}; lease {LEASE_MS} ms)")


def test_kill_9_of_the_share_coordinator_keeps_the_group_going(cluster: Cluster) -> None:
    """The share group's coordinator (and the share coordinator of those of its
    share-partitions whose state shards it owns) is killed: the brokers that take its
    shards replay their state; the group carries on through the others and no
    acknowledged record is delivered again."""
    topic = served_topic(cluster, "queue-coord")
    node = 2
    group = share_group(cluster, coordinator=node)
    took = read_through_a_kill(cluster, topic, node, group)
    print(f"share group served {took:.1f} s after the kill -9 of its coordinator's "
          f"broker {node} (lease {LEASE_MS} ms)")
