"""Committed offsets through real clients: simple commits, fetch, restart, load in progress."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.structs import OffsetAndMetadata
from kafka.structs import TopicPartition as KTP

from tests.integration.test_clients_round_trip import create_topic
from tests.support.wire import RawClient


def committed(bootstrap: str, group: str, topic: str, partitions: int, timeout: float = 20):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    try:
        return {tp.partition: (tp.offset, tp.metadata) for tp in c.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=timeout)}
    finally:
        c.close()


def test_commit_fetch_metadata_and_survive_restart(broker_factory, topic_name):
    b = broker_factory()
    create_topic(b.bootstrap, topic_name, partitions=3)
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "offsets-g",
                  "enable.auto.commit": False})
    tps = [TopicPartition(topic_name, 0, 11, metadata="checkpoint-a"),
           TopicPartition(topic_name, 2, 22)]
    assert all(tp.error is None for tp in c.commit(offsets=tps, asynchronous=False))
    c.close()
    before = committed(b.bootstrap, "offsets-g", topic_name, 3)
    assert before[0] == (11, "checkpoint-a") and before[2][0] == 22 and before[1][0] < 0
    b.restart()
    after = committed(b.bootstrap, "offsets-g", topic_name, 3)
    assert after[0] == (11, "checkpoint-a") and after[2][0] == 22 and after[1][0] < 0


def test_kafka_python_admin_alter_and_delete_offsets(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        group = f"admin-{topic_name}"
        admin.alter_group_offsets(group, {KTP(topic_name, 0): OffsetAndMetadata(5, "", -1),
                                          KTP(topic_name, 1): OffsetAndMetadata(9, "", -1)})
        listed = admin.list_group_offsets({group: None})[group]
        assert {tp.partition: om.offset for tp, om in listed.items()} == {0: 5, 1: 9}
        admin.delete_group_offsets(group, [KTP(topic_name, 0)])
        listed = admin.list_group_offsets({group: None})[group]
        assert {tp.partition: om.offset for tp, om in listed.items()} == {1: 9}
        names = [g["group_id"] if isinstance(g, dict) else g[0] for g in admin.list_groups()]
        assert group in names
    finally:
        admin.close()


def test_requests_during_load_get_load_in_progress_then_succeed(broker_factory, topic_name):
    b = broker_factory("--override", "headwater.coordinator.load.delay.ms=2500")
    raw = RawClient("127.0.0.1", b.port)
    try:
        first = raw.request(9, 7, {"group_id": "loading-g", "topics": None,
                                   "require_stable": False})
        assert int(first.error_code) == 14  # COORDINATOR_LOAD_IN_PROGRESS
    finally:
        raw.close()
    # librdkafka's OffsetFetch retries COORDINATOR_LOAD_IN_PROGRESS until the shard
    # is loaded, then a commit and a read-back go through.
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "loading-g",
                  "enable.auto.commit": False})
    try:
        start = time.monotonic()
        assert c.committed([TopicPartition(topic_name, 0)], timeout=20)[0].offset < 0
        result = c.commit(offsets=[TopicPartition(topic_name, 0, 3)], asynchronous=False)
        assert result[0].error is None
        assert c.committed([TopicPartition(topic_name, 0)], timeout=20)[0].offset == 3
        assert time.monotonic() - start < 30
    finally:
        c.close()
