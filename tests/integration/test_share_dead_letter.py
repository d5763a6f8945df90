"""Dead-letter topics for share groups (KIP-1191, Kafka 4.4) with confluent-kafka's
ShareConsumer: rejected records and records past the delivery-count limit land in the
group's dead-letter topic once, with Kafka's headers, also across a kill -9 between the
archive and the write; bad dead-letter topic names get Kafka's errors.

What is asserted is Kafka 4.4's behaviour (ShareGroupDLQRecordHelper,
ShareGroupDLQValidator, GroupConfig), including its gate: share.version 2."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import AcknowledgeType, Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    NewTopic,
)

from tests.integration.test_share_admin import offsets
from tests.integration.test_share_consumer import (
    consumer,
    poll_until,
    produce_batches,
    set_group_configs,
)
from tests.integration.test_share_fetch import make_topic
from tests.support.broker_process import free_port

pytestmark = pytest.mark.timeout(120)

HEADERS = ["__dlq.errors.topic", "__dlq.errors.partition", "__dlq.errors.offset",
           "__dlq.errors.group", "__dlq.errors.delivery.count", "__dlq.errors.message"]
REJECTED = "Offset rejected by client."
LIMIT = "Offset delivery count exceeded the threshold."


def dlq_topic(bootstrap: str, name: str, enable: bool = True, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = {"errors.deadletterqueue.group.enable": "true"} if enable else {}
    admin.create_topics([NewTopic(name, partitions, 1, config=configs)])[name].result(15)


def dead_letters(bootstrap: str, topic: str, expect: int, partition: int = 0,
                 timeout: float = 20.0) -> list[dict]:
    """Every record of the dead-letter partition, once its high watermark reaches
    `expect` (polled with a deadline); asserts there are exactly `expect`."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False})
    try:
        deadline = time.monotonic() + timeout
        high = -1
        while time.monotonic() < deadline:
            try:
                _low, high = c.get_watermark_offsets(TopicPartition(topic, partition), 5)
            except KafkaException:
                high = -1
            if high >= expect:
                break
            time.sleep(0.1)
        assert high == expect, (topic, high, expect)
        c.assign([TopicPartition(topic, partition, 0)])
        out: list[dict] = []
        while len(out) < expect and time.monotonic() < deadline + 10:
            msg = c.poll(0.5)
            if msg is None or msg.error():
                continue
            out.append({"key": msg.key(), "value": msg.value(),
                        "headers": [(k, v.decode() if v is not None else None)
                                    for k, v in (msg.headers() or [])]})
        return out
    finally:
        c.close()


def context(letter: dict) -> dict[str, str]:
    """The six KIP-1191 headers of a dead letter (they come last, in Kafka's order)."""
    tail = letter["headers"][-6:]
    assert [k for k, _v in tail] == HEADERS
    return dict(tail)


def run_consumer(bootstrap: str, group: str, topic: str, decide, deliveries: int) -> list:
    """Explicit acknowledgements by `decide(value, delivery_count)` until `deliveries`
    deliveries were seen; commits after every poll so the broker applies them."""
    c = consumer(bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
    seen: list[tuple[int, int]] = []
    try:
        deadline = time.monotonic() + 40
        while len(seen) < deliveries and time.monotonic() < deadline:
            batch = [m for m in c.poll(0.5) if m.error() is None]
            for m in batch:
                seen.append((int(m.value()), m.delivery_count()))
                c.acknowledge(m, decide(int(m.value()), m.delivery_count()))
            if batch:
                c.commit_sync(15)
    finally:
        c.close()
    return seen


def test_rejected_and_limit_records_land_once_with_kafkas_headers(broker, topic_name):
    group = f"dl-{uuid.uuid4().hex[:6]}"
    dlq = f"dlq.{group}"
    make_topic(broker, topic_name)
    dlq_topic(broker.bootstrap, dlq)
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest",
                      share_delivery_count_limit="2",
                      **{"errors.deadletterqueue.topic.name": dlq})
    produce_batches(broker.bootstrap, topic_name, batches=1, per_batch=6)

    def decide(value: int, _count: int) -> AcknowledgeType:
        return {0: AcknowledgeType.REJECT, 1: AcknowledgeType.REJECT,
                2: AcknowledgeType.RELEASE, 3: AcknowledgeType.RELEASE}.get(
                    value, AcknowledgeType.ACCEPT)

    seen = run_consumer(broker.bootstrap, group, topic_name, decide, deliveries=8)
    assert sorted(seen) == [(0, 1), (1, 1), (2, 1), (2, 2), (3, 1), (3, 2), (4, 1), (5, 1)]
    letters = dead_letters(broker.bootstrap, dlq, expect=4)
    got = sorted((int(context(x)["__dlq.errors.offset"]), context(x)["__dlq.errors.message"],
                  context(x)["__dlq.errors.delivery.count"]) for x in letters)
    assert got == [(0, REJECTED, "1"), (1, REJECTED, "1"), (2, LIMIT, "2"), (3, LIMIT, "2")]
    for x in letters:
        h = context(x)
        assert (h["__dlq.errors.topic"], h["__dlq.errors.partition"],
                h["__dlq.errors.group"]) == (topic_name, "0", group)
        assert x["key"] is None and x["value"] is None  # copy.record.enable=false
        assert len(x["headers"]) == 6
    # the share-partition is done with all six: SPSO at the end, no lag
    assert offsets(broker.bootstrap, group) == {(topic_name, 0): (6, 0)}


def test_copy_record_enable_copies_key_value_and_headers(broker, topic_name):
    group = f"dl-{uuid.uuid4().hex[:6]}"
    dlq = f"dlq.{group}"
    make_topic(broker, topic_name)
    dlq_topic(broker.bootstrap, dlq)
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest",
                      **{"errors.deadletterqueue.topic.name": dlq,
                         "errors.deadletterqueue.copy.record.enable": "true"})
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce(topic_name, b"poison", key=b"k1", headers=[("trace", b"abc")])
    p.flush(15)
    c = consumer(broker.bootstrap, group, topic_name, **{"share.acknowledgement.mode": "explicit"})
    got: list[object] = []
    try:
        def reject(m: object) -> None:
            got.append(m.value())
            c.acknowledge(m, AcknowledgeType.REJECT)
        poll_until(c, lambda: bool(got), on_message=reject)
        c.commit_sync(15)
    finally:
        c.close()
    assert got == [b"poison"]
    (letter,) = dead_letters(broker.bootstrap, dlq, expect=1)
    assert (letter["key"], letter["value"]) == (b"k1", b"poison")
    assert letter["headers"][0] == ("trace", "abc")
    assert context(letter)["__dlq.errors.message"] == REJECTED
    c.close()  # its broker is gone: only its leave fails


def alter_group(bootstrap: str, group: str, **configs: str) -> None:
    set_group_configs(bootstrap, group, **configs)


def describe_group(bootstrap: str, group: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource("group", group)
    return {k: v.value for k, v in admin.describe_configs([res])[res].result(15).items()}


def test_bad_dead_letter_topic_names(broker, topic_name):
    """`__` names are refused by IncrementalAlterConfigs (INVALID_CONFIG, Kafka's
    message, nothing changed); the other rules are checked at write time, where Kafka
    archives the record without a dead letter."""
    group = f"dl-{uuid.uuid4().hex[:6]}"
    make_topic(broker, topic_name)
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest")
    with pytest.raises(KafkaException) as err:
        alter_group(broker.bootstrap, group,
                    **{"errors.deadletterqueue.topic.name": "__consumer_offsets",
                       "share.delivery.count.limit": "3"})
    assert err.value.args[0].name() == "INVALID_CONFIG"
    assert "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'" in \
        err.value.args[0].str()
    described = describe_group(broker.bootstrap, group)
    assert described["errors.deadletterqueue.topic.name"] == ""
    assert described["share.delivery.count.limit"] == "5"  # nothing changed
    assert described["errors.deadletterqueue.copy.record.enable"] == "false"
    with pytest.raises(KafkaException) as err:
        alter_group(broker.bootstrap, group,
                    **{"errors.deadletterqueue.copy.record.enable": "maybe"})
    assert err.value.args[0].name() == "INVALID_CONFIG"

    # Accepted names that break a write-time rule: no prefix, a topic not enabled for
    # DLQ use, a missing topic without auto-create. The record is archived, no dead letter.
    plain = f"plain-{group}"
    dlq_topic(broker.bootstrap, plain, enable=False)
    produce_batches(broker.bootstrap, topic_name, batches=1, per_batch=3)
    for i, name in enumerate((f"orders.{group}", f"dlq.missing-{group}", plain)):
        alter_group(broker.bootstrap, group, **{"errors.deadletterqueue.topic.name": name})
        seen = run_consumer(broker.bootstrap, group, topic_name,
                            lambda v, _c, i=i: AcknowledgeType.REJECT if v == i
                            else AcknowledgeType.RELEASE, deliveries=1)
        assert seen and seen[0][0] == i
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topics = admin.list_topics(timeout=10).topics
    assert f"dlq.missing-{group}" not in topics and f"orders.{group}" not in topics
    assert dead_letters(broker.bootstrap, plain, expect=0) == []


def test_auto_create_makes_an_enabled_topic_and_metrics_count(broker_factory, topic_name):
    port = free_port()
    b = broker_factory("--override", "errors.deadletterqueue.auto.create.topics.enable=true",
                       "--metrics-listen", f"127.0.0.1:{port}")
    group = "autodlq"
    make_topic(b, topic_name)
    set_group_configs(b.bootstrap, group, share_auto_offset_reset="earliest",
                      **{"errors.deadletterqueue.topic.name": "dlq.auto"})
    produce_batches(b.bootstrap, topic_name, batches=1, per_batch=3)
    run_consumer(b.bootstrap, group, topic_name,
                 lambda v, _c: AcknowledgeType.REJECT if v == 1 else
                 AcknowledgeType.ACCEPT if v == 0 else AcknowledgeType.RELEASE,
                 deliveries=3)
    # On a cluster the letter may be written at a retry (the dead-letter partition just
    # created, its leader not yet serving it, refuses the first write): polled.
    expected = [
        'headwater_share_dead_letter_records_total{group="autodlq",result="written"} 1.0',
        'headwater_share_records_total{event="dead_lettered"} 1.0',
        # lag: 3 produced, 0 accepted and 1 dead-lettered are finished, 2 was released
        f'headwater_share_group_lag{{group="autodlq",partition="0",topic="{topic_name}"}} 1.0']
    deadline = time.monotonic() + 30
    while not all(line in (body := b.metrics()) for line in expected):  # brokers added up
        assert time.monotonic() < deadline, [line for line in expected if line not in body]
        time.sleep(0.2)
    (letter,) = dead_letters(b.bootstrap, "dlq.auto", expect=1)
    assert context(letter)["__dlq.errors.offset"] == "1"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    res = ConfigResource("topic", "dlq.auto")
    configs = admin.describe_configs([res])[res].result(15)
    assert configs["errors.deadletterqueue.group.enable"].value == "true"
    assert configs["message.timestamp.type"].value == "CreateTime"


@pytest.mark.parametrize("point", ["before-write", "after-write"])
def test_kill_9_between_archive_and_write_leaves_exactly_one_copy(broker_factory, tmp_path,
                                                                   topic_name, point):
    data = tmp_path / "crash"
    b = broker_factory("--override", f"headwater.share.crash.dead.letter={point}",
                       data_dir=data)
    group = "crashdlq"
    make_topic(b, topic_name)
    dlq_topic(b.bootstrap, "dlq.crash")
    set_group_configs(b.bootstrap, group, share_auto_offset_reset="earliest",
                      **{"errors.deadletterqueue.topic.name": "dlq.crash"})
    produce_batches(b.bootstrap, topic_name, batches=1, per_batch=3)
    c = consumer(b.bootstrap, group, topic_name, log_level=0,  # quiet once the broker died
                 **{"share.acknowledgement.mode": "explicit"})
    seen: list[int] = []

    def ack(m: object) -> None:
        seen.append(int(m.value()))
        c.acknowledge(m, AcknowledgeType.REJECT if int(m.value()) == 1
                      else AcknowledgeType.ACCEPT)
    poll_until(c, lambda: len(seen) >= 3, on_message=ack)
    try:
        c.commit_sync(5)
    except KafkaException:
        pass  # the broker exits before answering
    # The broker that writes the dead letter exits (on a cluster: the source
    # partition's leader, any of the three; the fault point is the cluster's).
    deadline = time.monotonic() + 20
    while 1 not in b.exit_codes() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert 1 in b.exit_codes()
    b.kill()  # a cluster's other brokers too: the cluster starts again without the fault

    b2 = broker_factory(data_dir=data)
    # No consumer needed: the share-partition with an ARCHIVING record is loaded once
    # the share coordinator's state is, and its dead letter written (or found). A
    # restarted trio first elects a controller, takes the partitions and loads the
    # coordinators: beside the other CI worker that once took longer than 20 s (the
    # dead-letter partition had no watermark yet); the letter must still be there once.
    (letter,) = dead_letters(b2.bootstrap, "dlq.crash", expect=1, timeout=60.0)
    assert context(letter)["__dlq.errors.offset"] == "1"
    assert context(letter)["__dlq.errors.message"] == REJECTED
    deadline = time.monotonic() + 20
    while _offsets_or_none(b2.bootstrap, group) != {(topic_name, 0): (3, 0)} \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    assert offsets(b2.bootstrap, group) == {(topic_name, 0): (3, 0)}  # ARCHIVED now
    produce_batches(b2.bootstrap, topic_name, batches=1, per_batch=1, start=3)
    again = run_consumer(b2.bootstrap, group, topic_name,
                         lambda _v, _c: AcknowledgeType.ACCEPT, deliveries=1)
    assert again == [(3, 1)]
    assert len(dead_letters(b2.bootstrap, "dlq.crash", expect=1)) == 1
    c.close()  # its broker is gone: only its leave fails


def test_share_version_2_gates_dead_letters(broker_factory, topic_name):
    """share.version 2 (Kafka 4.4's default) enables the dead-letter topics: finalized at
    1 (kafka-features downgrade), the group's errors.deadletterqueue.topic.name is ignored
    (Kafka's SharePartition.isDLQEnabledForGroup): a rejected record is archived without a
    dead letter. Upgraded back to 2, the next rejected record lands."""
    from tests.support.kafka_reference import run_tool

    b = broker_factory()

    def features(*args: str) -> str:
        return run_tool("kafka-features", "--bootstrap-server", b.bootstrap, *args).stdout

    group = f"dl-{uuid.uuid4().hex[:6]}"
    dlq = f"dlq.{group}"
    make_topic(b, topic_name)
    dlq_topic(b.bootstrap, dlq)
    set_group_configs(b.bootstrap, group, share_auto_offset_reset="earliest",
                      **{"errors.deadletterqueue.topic.name": dlq})
    produce_batches(b.bootstrap, topic_name, batches=1, per_batch=2)
    assert features("downgrade", "--feature", "share.version=1") == (
        "share.version was downgraded to 1.\n")
    seen = run_consumer(b.bootstrap, group, topic_name,
                        lambda v, _c: AcknowledgeType.REJECT if v == 0
                        else AcknowledgeType.RELEASE, deliveries=1)
    assert seen and seen[0] == (0, 1)
    # record 0 is done (ARCHIVED: a dead letter would have been written before that)
    deadline = time.monotonic() + 20
    while offsets(b.bootstrap, group) != {(topic_name, 0): (1, 1)}:
        assert time.monotonic() < deadline, offsets(b.bootstrap, group)
        time.sleep(0.1)
    assert dead_letters(b.bootstrap, dlq, expect=0, timeout=3) == []
    assert features("upgrade", "--feature", "share.version=2") == (
        "share.version was upgraded to 2.\n")
    seen = run_consumer(b.bootstrap, group, topic_name,
                        lambda v, _c: AcknowledgeType.REJECT, deliveries=1)
    assert seen and seen[0][0] == 1
    letters = dead_letters(b.bootstrap, dlq, expect=1)
    assert context(letters[0])["__dlq.errors.offset"] == "1"
    assert offsets(b.bootstrap, group) == {(topic_name, 0): (2, 0)}


def _offsets_or_none(bootstrap: str, group: str) -> object:
    """`offsets`, or None while the coordinator it is sent to still refuses connections
    (three brokers just restarted: one named a moment before it listens; a CI run)."""
    try:
        return offsets(bootstrap, group)
    except ConnectionError:
        return None
