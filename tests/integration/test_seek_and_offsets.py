"""assign() + seek by offset and by timestamp; ListOffsets; DeleteRecords; idempotence."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from headwater.records.batch import build_batch
from tests.integration.test_clients_round_trip import create_topic
from tests.support.wire import RawClient

BASE = 1_710_000_000_000


def fill(bootstrap: str, topic: str, n: int = 100) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(), timestamp=BASE + i * 10)
        if i % 10 == 9:
            p.flush(10)
    assert p.flush(10) == 0


def poll_one(consumer: Consumer, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None:
            assert msg.error() is None, msg.error()
            return msg
    raise AssertionError("no message")


def test_seek_by_offset_and_timestamp(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    fill(broker.bootstrap, topic_name)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "seek",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic_name, 0, 42)])
        msg = poll_one(c)
        assert (msg.offset(), msg.value()) == (42, b"v42")
        c.seek(TopicPartition(topic_name, 0, 7))
        msg = poll_one(c)
        assert (msg.offset(), msg.value()) == (7, b"v7")
        found = c.offsets_for_times([TopicPartition(topic_name, 0, BASE + 555)], timeout=10)
        assert found[0].offset == 56  # first record with timestamp >= BASE+555
        c.seek(found[0])
        assert poll_one(c).value() == b"v56"
        past = c.offsets_for_times([TopicPartition(topic_name, 0, BASE + 10**9)], timeout=10)
        assert past[0].offset == -1  # no such record: end
        low, high = c.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10)
        assert (low, high) == (0, 100)
    finally:
        c.close()


def test_list_offsets_max_timestamp_and_delete_records(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    fill(broker.bootstrap, topic_name, 30)
    raw = RawClient("127.0.0.1", broker.port)
    try:
        resp = raw.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic_name, "partitions": [{"partition_index": 0, "timestamp": -3}]}]})
        part = resp.topics[0].partitions[0]
        assert (part.offset, part.timestamp) == (29, BASE + 290)
        deleted = raw.request(21, 2, {"topics": [{"name": topic_name, "partitions": [
            {"partition_index": 0, "offset": 10}]}], "timeout": 5000}, correlation_id=2)
        assert deleted.topics[0].partitions[0].low_watermark == 10
        earliest = raw.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic_name, "partitions": [{"partition_index": 0, "timestamp": -2}]}]},
            correlation_id=3)
        assert earliest.topics[0].partitions[0].offset == 10
        beyond = raw.request(21, 2, {"topics": [{"name": topic_name, "partitions": [
            {"partition_index": 0, "offset": 500}]}], "timeout": 5000}, correlation_id=4)
        assert int(beyond.topics[0].partitions[0].error_code) == 1  # OFFSET_OUT_OF_RANGE
    finally:
        raw.close()
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "dr",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic_name, 0, 3)])  # below the log start: reset
        assert poll_one(c).offset() == 10
    finally:
        c.close()


def test_idempotent_producer_acks_all(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=3)
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                  "acks": "all", "linger.ms": 5})
    delivered = []
    for i in range(3000):
        p.produce(topic_name, key=str(i % 17).encode(), value=str(i).encode(),
                  on_delivery=lambda e, m: delivered.append((e, m.partition(), m.offset())))
    assert p.flush(30) == 0
    assert all(e is None for e, _, _ in delivered)
    per_part: dict[int, list[int]] = {}
    for _, part, off in delivered:
        per_part.setdefault(part, []).append(off)
    for offs in per_part.values():
        assert sorted(offs) == list(range(len(offs)))
    md = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert topic_name in md.list_topics(timeout=10).topics


def test_duplicate_retry_returns_original_offset(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    raw = RawClient("127.0.0.1", broker.port)
    try:
        init = raw.request(22, 4, {"transactional_id": None, "transaction_timeout": 60000,
                                   "producer_id": -1, "producer_epoch": -1})
        pid, epoch = init.producer_id, init.producer_epoch
        assert pid >= 0

        def send(seq: int, cid: int, ep: int = epoch):
            batch = build_batch([(None, f"s{seq}".encode(), [], 1000)], producer_id=pid,
                                producer_epoch=ep, base_sequence=seq)
            resp = raw.request(0, 9, {"acks": -1, "timeout": 5000, "topic_data": [
                {"name": topic_name, "partition_data": [{"index": 0, "records": batch}]}]},
                correlation_id=cid)
            return resp.responses[0].partition_responses[0]

        first = send(0, 2)
        assert int(first.error_code) == 0 and first.base_offset == 0
        assert send(1, 3).base_offset == 1
        retry = send(0, 4)
        assert int(retry.error_code) == 0 and retry.base_offset == 0
        gap = send(5, 5)
        assert int(gap.error_code) == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
        renewed = raw.request(22, 4, {"transactional_id": None, "transaction_timeout": 60000,
                                      "producer_id": pid, "producer_epoch": epoch},
                              correlation_id=6)
        # As Kafka: a new producer id at epoch 0, whatever id and epoch it names.
        assert renewed.producer_id != pid and renewed.producer_epoch == 0
        # The log fences by epoch all the same: a higher one starts at sequence 0, and
        # the older one is refused.
        assert send(0, 7, ep=epoch + 1).base_offset == 2
        assert int(send(2, 8, ep=epoch).error_code) == 47  # INVALID_PRODUCER_EPOCH
        hw = raw.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic_name, "partitions": [{"partition_index": 0, "timestamp": -1}]}]},
            correlation_id=9)
        assert hw.topics[0].partitions[0].offset == 3  # the retry wrote nothing
    finally:
        raw.close()
