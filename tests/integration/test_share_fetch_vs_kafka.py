"""ShareFetch, headwater beside Apache Kafka 4.4.0 (the oracle), in the places where
librdkafka's share-consumer tests (0170-0186) passed against Kafka and failed against
headwater: a group's `share.isolation.level` changed while its share-partitions are in
use, a ShareFetch with MaxBytes 0, one fetch over two partitions, and two consumers
joining a new group together.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.integration.test_share_consumer import consumer, poll_until, set_group_configs
from tests.support.broker_process import BrokerProcess
from tests.support.kafka_reference import KafkaReference
from tests.support.wire import RawClient

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory):
    hw = BrokerProcess(tmp_path_factory.mktemp("hw") / "data").start()
    kafka = KafkaReference(tmp_path_factory.mktemp("kafka") / "data").start()
    yield {"headwater": hw.bootstrap, "kafka": kafka.bootstrap}
    hw.stop()
    kafka.stop()


def new_queue(bootstrap: str, partitions: int = 1, **configs: str) -> tuple[str, str]:
    topic, group = f"q-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    set_group_configs(bootstrap, group, share_auto_offset_reset="earliest", **configs)
    return topic, group


def group_config(bootstrap: str, group: str, key: str) -> str | None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource("group", group)
    entries = admin.describe_configs([resource])[resource].result(15)
    entry = entries.get(key)
    return None if entry is None else entry.value


# ---- share.isolation.level changed while in use ---------------------------------------

def isolation_change(bootstrap: str) -> dict[str, Any]:
    """read_uncommitted sees an aborted record; after the group is altered to
    read_committed the same consumer (same share-partition leader) must not."""
    topic, group = new_queue(bootstrap, share_isolation_level="read_uncommitted")
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"t-{group}"})
    txn.init_transactions(30)

    def one(value: int, commit: bool) -> None:
        txn.begin_transaction()
        txn.produce(topic, str(value).encode())
        txn.flush(15)
        (txn.commit_transaction if commit else txn.abort_transaction)(30)

    c = consumer(bootstrap, group, topic)
    before: list[int] = []
    after: list[int] = []
    try:
        one(0, True)
        one(1, False)
        poll_until(c, lambda: len(before) >= 2, timeout=60,
                   on_message=lambda m: before.append(int(m.value())))
        set_group_configs(bootstrap, group, share_isolation_level="read_committed")
        deadline = time.monotonic() + 30
        while group_config(bootstrap, group, "share.isolation.level") != "read_committed":
            assert time.monotonic() < deadline, "the config change was never seen"
            time.sleep(0.1)
        for value, commit in ((2, True), (3, False), (4, True)):
            one(value, commit)
        # One partition, acquired in offset order: once 4 is here, 3 was passed over.
        poll_until(c, lambda: 4 in after, timeout=60,
                   on_message=lambda m: after.append(int(m.value())))
    finally:
        c.close()
    return {"before": sorted(before), "after": sorted(after)}


def test_isolation_level_change_applies_to_share_partitions_in_use(pair):
    ours = isolation_change(pair["headwater"])
    assert ours == {"before": [0, 1], "after": [2, 4]}, ours
    assert isolation_change(pair["kafka"]) == ours


# ---- raw ShareFetch ---------------------------------------------------------------------

class RawMember:
    """A share-group member speaking ShareGroupHeartbeat v1 and ShareFetch v1 by hand.
    Kafka assigns a new member's partitions a heartbeat or two after it joins (once their
    share state is initialized); `join` heartbeats until the assignment arrives."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.client = RawClient("127.0.0.1", int(bootstrap.rsplit(":", 1)[1]), timeout=30)
        self.group, self.topic = group, topic
        self.member = uuid.uuid4().hex[:22]
        self.epoch = 0
        self.session = 0
        meta = self.client.request(3, 12, {"topics": [{"name": topic, "topic_id": None}],
                                           "allow_auto_topic_creation": False,
                                           "include_topic_authorized_operations": False})
        self.topic_id = meta.topics[0].topic_id
        # A fresh Kafka creates __consumer_offsets on the first FindCoordinator.
        deadline = time.monotonic() + 60
        while self.client.request(10, 4, {"key_type": 0, "coordinator_keys": [group]}
                                  ).coordinators[0].error_code:
            assert time.monotonic() < deadline, "no group coordinator"
            time.sleep(0.2)

    def join(self, timeout: float = 30.0) -> list[int]:
        deadline = time.monotonic() + timeout
        while True:
            hb = self.client.request(76, 1, {
                "group_id": self.group, "member_id": self.member, "member_epoch": self.epoch,
                "rack_id": None,
                "subscribed_topic_names": [self.topic] if self.epoch == 0 else None})
            assert int(hb.error_code) in (0, 14, 15, 16), hb
            if int(hb.error_code) == 0:
                self.epoch = hb.member_epoch
            if hb.assignment is not None and hb.assignment.topic_partitions:
                return sorted(p for t in hb.assignment.topic_partitions for p in t.partitions)
            assert time.monotonic() < deadline, "no assignment"
            time.sleep(0.2)

    def fetch(self, partitions: list[int], max_bytes: int = 52428800, max_records: int = 500,
              wait_ms: int = 1000) -> dict[int, list[tuple[int, int]]]:
        """partition -> acquired (first, last) ranges; the session opens on the first."""
        topics = [{"topic_id": self.topic_id, "partitions": [
            {"partition_index": p, "acknowledgement_batches": []} for p in partitions]}] \
            if self.session == 0 else []
        resp = self.client.request(78, 1, {
            "group_id": self.group, "member_id": self.member,
            "share_session_epoch": self.session, "max_wait": wait_ms, "min_bytes": 1,
            "max_bytes": max_bytes, "max_records": max_records, "batch_size": max_records,
            "topics": topics, "forgotten_topics_data": []})
        assert int(resp.error_code) == 0, resp
        self.session += 1
        return {p.partition_index: [(r.first_offset, r.last_offset)
                                    for r in p.acquired_records]
                for t in resp.responses for p in t.partitions if p.acquired_records}

    def close(self) -> None:
        self.client.close()


def produce_each(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 100})
    for p in range(partitions):
        for i in range(per_partition):
            producer.produce(topic, str(i).encode(), partition=p)
        assert producer.flush(15) == 0


def max_bytes_zero(bootstrap: str) -> dict[str, Any]:
    topic, group = new_queue(bootstrap)
    m = RawMember(bootstrap, group, topic)
    try:
        m.join()
        assert m.fetch([0], wait_ms=200) == {}  # the share-partition is initialized
        produce_each(bootstrap, topic, 1, 10)
        deadline = time.monotonic() + 30
        zero: list[dict[int, Any]] = []
        while len(zero) < 3:  # three answers of MaxBytes 0, then a normal fetch
            started = time.monotonic()
            zero.append(m.fetch([0], max_bytes=0, wait_ms=1000))
            assert time.monotonic() - started < 0.9  # answered at once, no long poll
            assert time.monotonic() < deadline
        return {"max bytes 0": zero, "then": m.fetch([0])}
    finally:
        m.close()


def test_max_bytes_zero_acquires_nothing(pair):
    ours = max_bytes_zero(pair["headwater"])
    # Nothing for MaxBytes 0; a fetch with a byte budget then gets all ten.
    assert ours == {"max bytes 0": [{}, {}, {}], "then": {0: [(0, 9)]}}, ours
    theirs = max_bytes_zero(pair["kafka"])
    assert theirs["max bytes 0"] == ours["max bytes 0"], theirs
    assert ours["then"] == theirs["then"], (ours, theirs)


def two_partitions(bootstrap: str, initialize_first: bool) -> list[dict[int, Any]]:
    """Two partitions, 50 records each, one member: what each fetch acquires."""
    topic, group = new_queue(bootstrap, partitions=2)
    m = RawMember(bootstrap, group, topic)
    try:
        assert m.join() == [0, 1]
        if initialize_first:
            assert m.fetch([0, 1], wait_ms=200) == {}  # nothing produced yet
            produce_each(bootstrap, topic, 2, 50)
            return [m.fetch([0, 1]) for _ in range(2)]
        produce_each(bootstrap, topic, 2, 50)
        fetches = [m.fetch([0, 1], wait_ms=3000)]
        got = sum(last - first + 1 for ranges in fetches[0].values()
                  for first, last in ranges)
        if got < 100:
            fetches.append(m.fetch([0, 1], wait_ms=3000))
        return fetches
    finally:
        m.close()


def test_one_fetch_takes_both_partitions_once_initialized(pair):
    """With their share-partitions initialized, one ShareFetch acquires both partitions'
    records, in Kafka as here. Kafka's very first fetch of a new group returns only the
    partition whose state finished initializing first (the other's comes with the next
    fetch); headwater initializes each share-partition inside the fetch, so its first
    fetch has both (docs/differences.md)."""
    both = {0: [(0, 49)], 1: [(0, 49)]}
    ours = two_partitions(pair["headwater"], initialize_first=True)
    assert ours == [both, {}], ours
    assert two_partitions(pair["kafka"], initialize_first=True) == ours
    assert two_partitions(pair["headwater"], initialize_first=False) == [both]
    first_fetch = two_partitions(pair["kafka"], initialize_first=False)
    assert {p for f in first_fetch for p in f} == {0, 1}, first_fetch


# ---- two consumers joining a new group together ----------------------------------------

def joined_together(bootstrap: str) -> dict[str, Any]:
    """librdkafka's 0172 mixed-ack-mode scenario: 400 records over 4 partitions, an
    implicit-ack and an explicit-ack consumer subscribe to a new group one after the
    other and are polled in turn. Each must get records, and all 400 once. Here the
    first consumer polls for half a second before the second subscribes: consumers of
    one application start a moment apart."""
    topic, group = new_queue(bootstrap, partitions=4)
    produce_each(bootstrap, topic, 4, 100)
    got: dict[str, list[tuple[int, int]]] = {"implicit": [], "explicit": []}
    implicit = consumer(bootstrap, group, topic)
    started = time.monotonic()
    while time.monotonic() - started < 0.5:
        for msg in implicit.poll(0.1):
            got["implicit"].append((msg.partition(), msg.offset()))
    explicit = consumer(bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
    deadline = time.monotonic() + 90
    try:
        while sum(map(len, got.values())) < 400 and time.monotonic() < deadline:
            for name, c in (("implicit", implicit), ("explicit", explicit)):
                for msg in c.poll(1.0):
                    assert msg.error() is None, msg.error()
                    got[name].append((msg.partition(), msg.offset()))
                    if name == "explicit":
                        c.acknowledge(msg)
        explicit.commit_sync(15)
    finally:
        implicit.close()
        explicit.close()
    everything = sorted(got["implicit"] + got["explicit"])
    return {"all once": everything == sorted({*everything}) and len(everything) == 400,
            "both got records": all(got.values()),
            "partitions": {name: sorted({p for p, _ in rs}) for name, rs in got.items()}}


def test_consumers_joining_a_new_group_together_share_the_work(pair):
    """headwater holds the first assignment of an empty share group for
    `share.assignment.interval.ms` (1 s) so both members are assigned together; Kafka
    4.4 also assigns about a second after the join (after initializing the state)."""
    ours = joined_together(pair["headwater"])
    assert ours["all once"] and ours["both got records"], ours
    # Two partitions each, none shared (4 partitions, 2 members).
    assert sorted(ours["partitions"]["implicit"] + ours["partitions"]["explicit"]) \
        == [0, 1, 2, 3], ours
    theirs = joined_together(pair["kafka"])
    assert theirs["all once"] and theirs["both got records"], theirs
