"""Committed offsets through real clients: simple commits, fetch, restart, load in progress,
and commits for a topic that does not exist, on headwater and on Apache Kafka 4.4.0."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient
from kafka.structs import OffsetAndMetadata
from kafka.structs import TopicPartition as KTP

from tests.integration.test_clients_round_trip import create_topic
from tests.support.broker_process import BrokerProcess
from tests.support.kafka_reference import KafkaReference
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
    # Every coordinator shard is loaded 10 s after its broker takes it: the first request
    # comes well within that after the start (one node: under 2 s; three brokers started
    # one after the other, their shards handed over as each joins: about 5 s).
    b = broker_factory("--override", "headwater.coordinator.load.delay.ms=10000")
    create_topic(b.bootstrap, topic_name)  # commits for a missing topic are refused
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


# ---- OffsetCommit for a topic that does not exist ----------------------------------------
#
# Kafka (KafkaApis, against its metadata cache) answers UNKNOWN_TOPIC_OR_PARTITION for every
# partition of a missing topic, and for a partition past an existing topic's count, before
# the group coordinator sees the request: so for every commit path (simple, classic,
# KIP-848 consumer, transactional), nothing is written to __consumer_offsets, no group is
# created, and the group's generation or epoch is not even checked. Each scenario runs on
# headwater and on the reference broker with the same expected outcome.

UNKNOWN_TOPIC_OR_PARTITION = 3
RETRY_CODES = {14, 15, 16, 51}  # coordinator loading / not available / not coordinator /
#                                 concurrent transactions: Kafka's first moments


@pytest.fixture(params=["headwater", "kafka"])
def target(request: pytest.FixtureRequest) -> BrokerProcess | KafkaReference:
    """The broker under test: headwater, or the Apache Kafka reference it must match."""
    return request.getfixturevalue("broker" if request.param == "headwater" else "kafka_ref")


def raw_call(bootstrap: str, api_key: int, version: int, body: dict,
             code: Callable[[Any], int], timeout: float = 60.0) -> Any:
    """One request, repeated while `code(response)` is a coordinator-not-ready error."""
    host, port = bootstrap.rsplit(":", 1)
    deadline = time.monotonic() + timeout
    while True:
        raw = RawClient(host, int(port))
        try:
            resp = raw.request(api_key, version, body)
        finally:
            raw.close()
        if code(resp) not in RETRY_CODES or time.monotonic() > deadline:
            return resp
        time.sleep(0.2)


def commit_v9(bootstrap: str, group: str, topics: dict[str, list[int]], generation: int = -1,
              member: str = "") -> dict[tuple[str, int], int]:
    body = {"group_id": group, "generation_id_or_member_epoch": generation,
            "member_id": member, "group_instance_id": None, "topics": [
                {"name": t, "partitions": [{"partition_index": p, "committed_offset": 7,
                                            "committed_leader_epoch": -1,
                                            "committed_metadata": ""} for p in parts]}
                for t, parts in topics.items()]}
    resp = raw_call(bootstrap, 8, 9, body,
                    lambda r: max(int(p.error_code) for t in r.topics for p in t.partitions))
    return {(t.name, int(p.partition_index)): int(p.error_code)
            for t in resp.topics for p in t.partitions}


def fetch_v8(bootstrap: str, group: str, topic: str) -> tuple[int, list[tuple[int, int, int]]]:
    """(group error, [(partition, committed offset, error)]) of OffsetFetch v8."""
    resp = raw_call(bootstrap, 9, 8, {"groups": [{"group_id": group, "topics": [
        {"name": topic, "partition_indexes": [0]}]}], "require_stable": False},
        lambda r: int(r.groups[0].error_code))
    g = resp.groups[0]
    return int(g.error_code), [(int(p.partition_index), int(p.committed_offset),
                                int(p.error_code)) for t in g.topics for p in t.partitions]


def find_coordinator(bootstrap: str, key: str, key_type: int) -> None:
    """FindCoordinator (v3) until it answers: Kafka creates __consumer_offsets (0) or
    __transaction_state (1) on the first lookup and refuses InitProducerId before."""
    resp = raw_call(bootstrap, 10, 3, {"key": key, "key_type": key_type},
                    lambda r: int(r.error_code))
    assert int(resp.error_code) == 0


def offsets_partition(group: str, partitions: int = 50) -> int:
    """The __consumer_offsets partition of `group`, as Kafka picks it:
    Utils.abs(String.hashCode) % partitions (a group id of ASCII characters here)."""
    h = 0
    for ch in group:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def offsets_log_end(target: BrokerProcess | KafkaReference, group: str,
                    timeout: float = 30.0) -> int:
    """The sum of __consumer_offsets' end offsets: unchanged when nothing was written.
    Headwater (a broker of this module's own): every partition. The reference is the
    session's, where other modules' groups live on (and their coordinators write when a
    member's session expires): the partition of `group` only, where Kafka writes all of
    the group's records."""
    bootstrap = target.bootstrap
    partitions = [offsets_partition(group)] if isinstance(target, KafkaReference) \
        else list(range(50))
    find_coordinator(bootstrap, "offsets-log-reader", 0)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "offsets-log-reader"})
    deadline = time.monotonic() + timeout
    try:
        while True:  # Kafka's clients learn of the new internal topic a little later
            try:
                return sum(c.get_watermark_offsets(TopicPartition("__consumer_offsets", p),
                                                   timeout=15)[1] for p in partitions)
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        c.close()


def group_ids(bootstrap: str) -> set[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_consumer_groups().result(timeout=15)
    return {g.group_id for g in listed.valid}


def librdkafka_commit_error(consumer: Consumer, topic: str) -> int:
    """The error librdkafka reports for a synchronous commit of `topic`-0."""
    try:
        result = consumer.commit(offsets=[TopicPartition(topic, 0, 5)], asynchronous=False)
    except KafkaException as exc:
        return exc.args[0].code()
    return result[0].error.code() if result[0].error else 0


def joined(bootstrap: str, group: str, topic: str, **conf: str) -> Consumer:
    """A consumer of `group` that owns `topic`-0 (a live generation / member epoch)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", **conf})
    c.subscribe([topic])
    deadline = time.monotonic() + 60
    while not c.assignment():
        assert time.monotonic() < deadline, "no assignment"
        c.poll(0.2)
    return c


def test_simple_commit_for_a_missing_topic(target, topic_name: str) -> None:
    """Generation -1, no member: per partition, only existing ones are committed."""
    create_topic(target.bootstrap, topic_name)
    missing, group = f"{topic_name}-missing", f"simple-{topic_name}"
    offsets_before = offsets_log_end(target, group)
    assert commit_v9(target.bootstrap, group, {missing: [0, 1]}) == {
        (missing, 0): UNKNOWN_TOPIC_OR_PARTITION, (missing, 1): UNKNOWN_TOPIC_OR_PARTITION}
    assert offsets_log_end(target, group) == offsets_before
    assert group not in group_ids(target.bootstrap)
    assert fetch_v8(target.bootstrap, group, missing) == (0, [(0, -1, 0)])
    mixed = commit_v9(target.bootstrap, group, {missing: [0], topic_name: [0, 4]})
    assert mixed == {(missing, 0): UNKNOWN_TOPIC_OR_PARTITION, (topic_name, 0): 0,
                     (topic_name, 4): UNKNOWN_TOPIC_OR_PARTITION}
    assert fetch_v8(target.bootstrap, group, topic_name) == (0, [(0, 7, 0)])
    c = Consumer({"bootstrap.servers": target.bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    try:  # librdkafka's own check (test 0030_offset_commit, do_nonexist_commit)
        assert librdkafka_commit_error(c, missing) == KafkaError.UNKNOWN_TOPIC_OR_PART
    finally:
        c.close()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_group_member_commit_for_a_missing_topic(target, topic_name: str,
                                                 protocol: str) -> None:
    """A live member (classic generation / KIP-848 member epoch) committing a missing
    topic, and a stale one: both get UNKNOWN_TOPIC_OR_PARTITION, not a group error."""
    create_topic(target.bootstrap, topic_name)
    missing, group = f"{topic_name}-missing", f"{protocol}-{topic_name}"
    c = joined(target.bootstrap, group, topic_name, **{"group.protocol": protocol})
    try:
        offsets_before = offsets_log_end(target, group)
        assert librdkafka_commit_error(c, missing) == KafkaError.UNKNOWN_TOPIC_OR_PART
        assert commit_v9(target.bootstrap, group, {missing: [0]}, generation=999,
                         member="not-a-member") == {(missing, 0): UNKNOWN_TOPIC_OR_PARTITION}
        assert offsets_log_end(target, group) == offsets_before
        assert fetch_v8(target.bootstrap, group, missing) == (0, [(0, -1, 0)])
        assert librdkafka_commit_error(c, topic_name) == 0  # the member itself is fine
    finally:
        c.close()


def test_txn_offset_commit_for_a_missing_topic(target, topic_name: str) -> None:
    """TxnOffsetCommit (v3): missing topics and partitions get UNKNOWN_TOPIC_OR_PARTITION,
    the rest of the request is committed with the transaction."""
    create_topic(target.bootstrap, topic_name)
    missing, group, txn = f"{topic_name}-missing", f"txn-{topic_name}", f"tx-{topic_name}"
    find_coordinator(target.bootstrap, txn, 1)
    find_coordinator(target.bootstrap, group, 0)
    init = raw_call(target.bootstrap, 22, 4, {"transactional_id": txn,
                                              "transaction_timeout": 60_000,
                                              "producer_id": -1, "producer_epoch": -1},
                    lambda r: int(r.error_code))
    assert int(init.error_code) == 0
    ids = {"transactional_id": txn, "producer_id": int(init.producer_id),
           "producer_epoch": int(init.producer_epoch)}
    added = raw_call(target.bootstrap, 25, 3, {**ids, "group_id": group},
                     lambda r: int(r.error_code))
    assert int(added.error_code) == 0

    def partitions(parts: list[int]) -> list[dict]:
        return [{"partition_index": p, "committed_offset": 9, "committed_leader_epoch": -1,
                 "committed_metadata": ""} for p in parts]

    resp = raw_call(target.bootstrap, 28, 3, {
        **ids, "group_id": group, "generation_id": -1, "member_id": "",
        "group_instance_id": None, "topics": [
            {"name": missing, "partitions": partitions([0])},
            {"name": topic_name, "partitions": partitions([0, 3])}]},
        lambda r: max(int(p.error_code) for t in r.topics for p in t.partitions))
    codes = {(t.name, int(p.partition_index)): int(p.error_code)
             for t in resp.topics for p in t.partitions}
    assert codes == {(missing, 0): UNKNOWN_TOPIC_OR_PARTITION, (topic_name, 0): 0,
                     (topic_name, 3): UNKNOWN_TOPIC_OR_PARTITION}
    ended = raw_call(target.bootstrap, 26, 3, {**ids, "committed": True},
                     lambda r: int(r.error_code))
    assert int(ended.error_code) == 0
    assert fetch_v8(target.bootstrap, group, missing) == (0, [(0, -1, 0)])
    deadline = time.monotonic() + 30  # the COMMIT marker makes the offset visible
    while fetch_v8(target.bootstrap, group, topic_name) != (0, [(0, 9, 0)]):
        assert time.monotonic() < deadline, fetch_v8(target.bootstrap, group, topic_name)
        time.sleep(0.1)
