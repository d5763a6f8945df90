"""Queues with confluent-kafka's ShareConsumer (librdkafka 2.16): share groups end to
end through ShareGroupHeartbeat, ShareFetch and ShareAcknowledge.

Records are produced in many small batches because the broker hands out whole producer
batches (batch_optimized acquisition), so several consumers can share one partition.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from tests.integration.test_share_fetch import make_topic


def set_group_configs(bootstrap: str, group: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry(k.replace("_", "."), v,
                           incremental_operation=AlterConfigOpType.SET)
               for k, v in configs.items()]
    for future in admin.incremental_alter_configs(
            [ConfigResource("group", group, incremental_configs=entries)]).values():
        future.result(15)


def produce_batches(bootstrap: str, topic: str, batches: int, per_batch: int,
                    start: int = 0, **extra: object) -> None:
    """`batches` producer batches of `per_batch` records, values start, start+1, ..."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1000,
                         "batch.num.messages": per_batch, **extra})
    value = start
    for _ in range(batches):
        for _ in range(per_batch):
            producer.produce(topic, str(value).encode(), key=str(value).encode())
            value += 1
        producer.flush(15)


def consumer(bootstrap: str, group: str, topic: str, **extra: object) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **extra})
    c.subscribe([topic])
    return c


def poll_until(c: ShareConsumer, done: Callable[[], bool], timeout: float = 30.0,
               on_message: Callable[[object], None] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        for msg in c.poll(0.5):
            assert msg.error() is None, msg.error()
            if on_message is not None:
                on_message(msg)


@pytest.fixture
def queue(broker, topic_name):
    group = f"sg-{uuid.uuid4().hex[:8]}"
    make_topic(broker, topic_name)
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest")
    opened: list[ShareConsumer] = []

    def open_consumer(**extra: object) -> ShareConsumer:
        c = consumer(broker.bootstrap, group, topic_name, **extra)
        opened.append(c)
        return c

    yield topic_name, group, open_consumer
    for c in opened:
        try:
            c.close()
        except Exception:  # noqa: BLE001  already closed by the test
            pass


@pytest.mark.timeout(90)
def test_three_consumers_share_one_partition(broker, queue):
    topic, _group, open_consumer = queue
    produce_batches(broker.bootstrap, topic, batches=60, per_batch=10)
    consumers = [open_consumer(**{"max.poll.records": 20}) for _ in range(3)]
    got: list[list[int]] = [[] for _ in consumers]
    lock = threading.Lock()

    def total() -> int:
        with lock:
            return sum(map(len, got))

    def run(i: int) -> None:
        def keep(msg: object) -> None:
            with lock:
                got[i].append(int(msg.value()))
            time.sleep(0.002)  # a little work per record, as an application would do

        poll_until(consumers[i], lambda: total() >= 600, on_message=keep)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    everything = [v for g in got for v in g]
    assert sorted(everything) == list(range(600))  # all of them, none twice
    assert sum(1 for g in got if g) >= 2, [len(g) for g in got]


@pytest.mark.timeout(90)
def test_explicit_accept_release_reject_and_the_delivery_limit(broker, queue):
    topic, group, open_consumer = queue
    set_group_configs(broker.bootstrap, group, share_delivery_count_limit="2")
    produce_batches(broker.bootstrap, topic, batches=1, per_batch=3)
    c = open_consumer(**{"share.acknowledgement.mode": "explicit"})
    seen: list[tuple[int, int]] = []

    def ack(msg: object) -> None:
        value = int(msg.value())
        seen.append((value, msg.delivery_count()))
        kind = {0: AcknowledgeType.ACCEPT, 1: AcknowledgeType.RELEASE,
                2: AcknowledgeType.REJECT}[value]
        c.acknowledge(msg, kind)

    poll_until(c, lambda: len(seen) >= 3, on_message=ack)
    c.commit_sync(15)
    # 1 was released: it comes back with delivery count 2, the limit; released again
    # it is archived and never comes back. 0 (accepted) and 2 (rejected) never return.
    poll_until(c, lambda: len(seen) >= 4, on_message=ack)
    c.commit_sync(15)
    poll_until(c, lambda: False, timeout=3, on_message=ack)
    assert seen == [(0, 1), (1, 1), (2, 1), (1, 2)]


@pytest.mark.timeout(90)
def test_closing_a_consumer_hands_its_records_to_another(broker, queue):
    topic, _group, open_consumer = queue
    produce_batches(broker.bootstrap, topic, batches=1, per_batch=5)
    first = open_consumer(**{"share.acknowledgement.mode": "explicit"})
    held: list[int] = []
    poll_until(first, lambda: len(held) >= 5, on_message=lambda m: held.append(int(m.value())))
    assert sorted(held) == list(range(5))
    first.close()  # nothing acknowledged: released, not lost
    second = open_consumer()
    again: list[tuple[int, int]] = []
    poll_until(second, lambda: len(again) >= 5,
               on_message=lambda m: again.append((int(m.value()), m.delivery_count())))
    assert sorted(v for v, _ in again) == list(range(5))
    # The first delivery counts, as in Kafka 4.4.0 (test_share_delivery_vs_kafka.py).
    assert {c for _, c in again} == {2}


@pytest.mark.timeout(90)
def test_an_expired_lock_redelivers(broker_factory, topic_name):
    broker = broker_factory("--override", "group.share.min.record.lock.duration.ms=1000")
    make_topic(broker, topic_name)
    group = "expiring"
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest",
                      share_record_lock_duration_ms="1000")
    produce_batches(broker.bootstrap, topic_name, batches=1, per_batch=2)
    slow = consumer(broker.bootstrap, group, topic_name,
                    **{"share.acknowledgement.mode": "explicit"})
    other = consumer(broker.bootstrap, group, topic_name)
    try:
        held: list[int] = []
        poll_until(slow, lambda: len(held) >= 2, on_message=lambda m: held.append(1))
        # slow never acknowledges: after a second the lock expires and other gets them.
        redelivered: list[int] = []
        poll_until(other, lambda: len(redelivered) >= 2,
                   on_message=lambda m: redelivered.append(m.delivery_count()))
        assert redelivered == [2, 2]
    finally:
        for c in (slow, other):
            c.close()


@pytest.mark.timeout(90)
def test_latest_by_default_earliest_when_configured(broker, topic_name):
    make_topic(broker, topic_name)
    produce_batches(broker.bootstrap, topic_name, batches=1, per_batch=3)  # before anyone
    latest = consumer(broker.bootstrap, "latest-group", topic_name)
    set_group_configs(broker.bootstrap, "earliest-group", share_auto_offset_reset="earliest")
    earliest = consumer(broker.bootstrap, "earliest-group", topic_name)
    try:
        from_earliest: list[int] = []
        poll_until(earliest, lambda: len(from_earliest) >= 3,
                   on_message=lambda m: from_earliest.append(int(m.value())))
        assert from_earliest == [0, 1, 2]
        from_latest: list[int] = []
        poll_until(latest, lambda: False, timeout=3,
                   on_message=lambda m: from_latest.append(int(m.value())))
        produce_batches(broker.bootstrap, topic_name, batches=1, per_batch=2, start=3)
        poll_until(latest, lambda: len(from_latest) >= 2,
                   on_message=lambda m: from_latest.append(int(m.value())))
        assert from_latest == [3, 4]  # the records before it joined are not its
    finally:
        latest.close()
        earliest.close()


@pytest.mark.timeout(90)
def test_read_committed_never_delivers_aborted_records(broker, queue):
    topic, group, open_consumer = queue
    set_group_configs(broker.bootstrap, group, share_isolation_level="read_committed")
    txn = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"t-{group}"})
    txn.init_transactions(15)
    for value, commit in ((0, True), (1, False), (2, True)):
        txn.begin_transaction()
        txn.produce(topic, str(value).encode())
        txn.flush(15)
        (txn.commit_transaction if commit else txn.abort_transaction)(15)
    c = open_consumer()
    got: list[int] = []
    poll_until(c, lambda: len(got) >= 2, on_message=lambda m: got.append(int(m.value())))
    poll_until(c, lambda: False, timeout=2, on_message=lambda m: got.append(int(m.value())))
    assert got == [0, 2]


@pytest.mark.timeout(120)
def test_kafkas_own_share_consumer_and_share_group_tool(broker, queue):
    """Kafka 4.4.0's Java share consumer (kafka-console-share-consumer) reads the queue,
    and kafka-share-groups lists the group and describes its state."""
    from tests.support.kafka_reference import run_tool

    topic, group, _open = queue
    produce_batches(broker.bootstrap, topic, batches=5, per_batch=10)
    out = run_tool("org.apache.kafka.tools.consumer.ConsoleShareConsumer",
                   "--bootstrap-server", broker.bootstrap, "--topic", topic, "--group", group,
                   "--max-messages", "50", "--timeout-ms", "30000", timeout=90)
    assert sorted(int(v) for v in out.stdout.split()) == list(range(50))
    tool = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
    listed = run_tool(tool, "--bootstrap-server", broker.bootstrap, "--list")
    assert group in listed.stdout.split()
    state = run_tool(tool, "--bootstrap-server", broker.bootstrap, "--describe", "--group",
                     group, "--state")
    assert group in state.stdout and "Empty" in state.stdout


@pytest.mark.timeout(150)
def test_kill_9_under_three_consumers_loses_nothing_and_redelivers_nothing_acked(
        broker_factory, topic_name):
    """Explicit acknowledgements are persisted before they are answered: after a kill -9
    and a restart no acknowledged record comes back, and every record is delivered.
    (Delivered, not acknowledged as the client saw it: a commit_sync that raised may
    still have been applied, and its records rightly never come back.)"""
    broker = broker_factory()
    make_topic(broker, topic_name)
    group = "survivors"
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest")
    total = 400
    produce_batches(broker.bootstrap, topic_name, batches=40, per_batch=10)
    acked: set[int] = set()
    delivered: set[int] = set()
    redelivered_after_ack: list[int] = []
    lock = threading.Lock()
    stop = threading.Event()

    def run() -> None:
        c = consumer(broker.bootstrap, group, topic_name,
                     **{"share.acknowledgement.mode": "explicit", "max.poll.records": 20})
        try:
            while not stop.is_set():
                try:
                    batch = [m for m in c.poll(0.5) if m.error() is None]
                except Exception:  # noqa: BLE001  the broker is down for a moment
                    continue
                values = [int(m.value()) for m in batch]
                with lock:
                    redelivered_after_ack.extend(v for v in values if v in acked)
                    delivered.update(values)
                for m in batch:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                if not batch:
                    continue
                try:
                    results = c.commit_sync(15)
                except Exception:  # noqa: BLE001  not acknowledged: may come back
                    continue
                if all(err is None for err in results.values()):
                    with lock:
                        acked.update(values)
                time.sleep(0.01)
        finally:
            c.close()

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while len(acked) < total // 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert acked, "nothing acknowledged before the crash"
    broker.kill()
    broker.start()
    deadline = time.monotonic() + 90
    while len(delivered) < total and time.monotonic() < deadline:
        time.sleep(0.1)
    stop.set()
    for t in threads:
        t.join(30)
    assert delivered == set(range(total))
    assert redelivered_after_ack == []


@pytest.mark.timeout(90)
def test_share_metrics(broker_factory, topic_name):
    import re

    from tests.support.broker_process import free_port

    port = free_port()
    broker = broker_factory("--metrics-listen", f"127.0.0.1:{port}")
    make_topic(broker, topic_name)
    set_group_configs(broker.bootstrap, "metered", share_auto_offset_reset="earliest")
    produce_batches(broker.bootstrap, topic_name, batches=1, per_batch=4)
    c = consumer(broker.bootstrap, "metered", topic_name,
                 **{"share.acknowledgement.mode": "explicit"})
    try:
        seen: list[int] = []

        def ack(msg: object) -> None:
            seen.append(int(msg.value()))
            c.acknowledge(msg, AcknowledgeType.RELEASE if int(msg.value()) == 3 and
                          msg.delivery_count() == 1 else AcknowledgeType.ACCEPT)

        poll_until(c, lambda: len(seen) >= 4, on_message=ack)
        c.commit_sync(15)
        poll_until(c, lambda: len(seen) >= 5, on_message=ack)  # 3 again
        c.commit_sync(15)
    finally:
        c.close()
    body = broker.metrics()  # on a cluster, the three brokers' series added up

    def value(name: str) -> float:
        match = re.search(rf"^{re.escape(name)} (\S+)$", body, re.M)
        assert match, name
        return float(match.group(1))

    assert value('headwater_share_records_total{event="acquired"}') == 5
    assert value('headwater_share_records_total{event="redelivered"}') == 1
    assert value('headwater_share_records_total{event="accept"}') == 4
    assert value('headwater_share_records_total{event="release"}') == 1
    labels = f'group="metered",partition="0",topic="{topic_name}"'
    assert value(f"headwater_share_group_lag{{{labels}}}") == 0
    assert value(f"headwater_share_partition_in_flight_records{{{labels}}}") == 0
