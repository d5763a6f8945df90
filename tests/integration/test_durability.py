"""Data survives restarts, kill -9 mid-produce, and a corrupt tail on disk."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Producer

from tests.integration.test_clients_round_trip import consume_confluent, create_topic


def produce_n(bootstrap: str, topic: str, n: int, prefix: str = "m",
              batch_every: int = 1000) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(n):
        p.produce(topic, key=f"{prefix}{i}".encode(), value=f"value-{prefix}{i}".encode())
        if i % batch_every == batch_every - 1:
            p.flush(10)
    assert p.flush(30) == 0


def test_data_survives_clean_restart(broker_factory, topic_name):
    b = broker_factory()
    create_topic(b.bootstrap, topic_name, partitions=2)
    produce_n(b.bootstrap, topic_name, 500)
    before = (consume_confluent(b.bootstrap, topic_name, 1, partition=0, timeout=10),)
    assert before[0]
    b.restart()
    total = 0
    for part in (0, 1):
        msgs = consume_confluent(b.bootstrap, topic_name, 500, partition=part, timeout=5)
        total += len(msgs)
    assert total == 500
    # The log continues at the right offset after restart.
    produce_n(b.bootstrap, topic_name, 100, prefix="after")
    total = sum(len(consume_confluent(b.bootstrap, topic_name, 600, partition=p, timeout=5))
                for p in (0, 1))
    assert total == 600


def test_kill_9_during_produce_loses_no_acknowledged_record(broker_factory, topic_name):
    b = broker_factory()
    create_topic(b.bootstrap, topic_name)
    acked: list[bytes] = []
    lock = threading.Lock()
    stop = threading.Event()

    def on_delivery(err, msg):
        if err is None:
            with lock:
                acked.append(msg.value())

    def run() -> None:
        p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 2,
                      "enable.idempotence": True, "message.timeout.ms": 5000,
                      "retries": 0 if False else 2147483647})
        i = 0
        while not stop.is_set():
            try:
                p.produce(topic_name, value=f"rec-{i:08d}".encode(), on_delivery=on_delivery)
                i += 1
            except BufferError:
                p.poll(0.01)
            p.poll(0)
        p.flush(10)

    t = threading.Thread(target=run)
    t.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with lock:
            if len(acked) >= 20000:
                break
        time.sleep(0.01)
    b.kill()
    stop.set()
    t.join(30)
    with lock:
        acknowledged = list(acked)
    assert len(acknowledged) >= 20000
    b.start()
    got = consume_confluent(b.bootstrap, topic_name, len(acknowledged), timeout=60)
    values = {m.value() for m in got}
    missing = [v for v in acknowledged if v not in values]
    assert missing == []
    # Offsets are dense and in produce order.
    offsets = [m.offset() for m in got]
    assert offsets == list(range(len(offsets)))


@pytest.mark.local_storage("writes into the partition's local segment file")
def test_corrupt_tail_is_truncated_on_start(broker_factory, topic_name):
    b = broker_factory()
    create_topic(b.bootstrap, topic_name)
    produce_n(b.bootstrap, topic_name, 300)
    b.stop()
    seg_dir = b.data_dir / f"{topic_name}-0"
    segments = sorted(seg_dir.glob("*.log"))
    assert segments
    with open(segments[-1], "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x01\x2c\x00\x00\x00\x40" + b"\xde\xad" * 100)
    b.start()
    got = consume_confluent(b.bootstrap, topic_name, 300, timeout=15)
    assert [m.value() for m in got] == [f"value-m{i}".encode() for i in range(300)]
    produce_n(b.bootstrap, topic_name, 10, prefix="post")
    got = consume_confluent(b.bootstrap, topic_name, 310, timeout=15)
    assert len(got) == 310 and got[-1].offset() == 309
    assert got[-1].value() == b"value-post9"


@pytest.mark.local_storage("writes into the partition's local segment file")
def test_torn_last_batch_is_dropped_and_earlier_data_kept(broker_factory, topic_name):
    b = broker_factory()
    create_topic(b.bootstrap, topic_name)
    produce_n(b.bootstrap, topic_name, 200, batch_every=10)  # about 20 batches
    b.stop()
    seg = sorted((b.data_dir / f"{topic_name}-0").glob("*.log"))[-1]
    size = seg.stat().st_size
    with open(seg, "r+b") as f:
        f.truncate(size - 7)
    b.start()
    got = consume_confluent(b.bootstrap, topic_name, 200, timeout=8)
    assert 0 < len(got) < 200
    assert [m.value() for m in got] == [f"value-m{i}".encode() for i in range(len(got))]


def test_fsync_always_and_flush_messages(broker_factory, topic_name):
    """--fsync always answers only after fsync; flush.messages=1 does the same per topic."""
    from confluent_kafka.admin import AdminClient, NewTopic

    b = broker_factory("--fsync", "always")
    produce_n(b.bootstrap, topic_name, 300, batch_every=50)
    other = topic_name + "-fm"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(other, 1, 1, config={"flush.messages": "1"})])[other].result(15)
    produce_n(b.bootstrap, other, 100, batch_every=10)
    b.kill()
    b.start()
    assert len(consume_confluent(b.bootstrap, topic_name, 300, timeout=15)) == 300
    assert len(consume_confluent(b.bootstrap, other, 100, timeout=15)) == 100
