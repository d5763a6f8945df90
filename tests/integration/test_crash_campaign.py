"""Crash campaign (`make soak`, marked slow): kill -9 the broker again and again while an
idempotent producer keeps writing, to a plain topic and to a compacted one whose cleaner
runs constantly, then check that nothing acknowledged was lost and nothing duplicated.

The producer lives across the crashes (librdkafka reconnects and retries), so its
retried batches test the idempotent dedup after recovery; the compacted topic tests the
cleaner's crash-safe segment swap under real kills, not just injected failures.
"""

from __future__ import annotations

import random
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

KILLS = 12
KEYS = 50


def read_all(bootstrap: str, topic: str, timeout: float = 60) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "campaign",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        return out
                    continue
                out.append(m)
        raise AssertionError(f"{topic}: no end of partition within {timeout} s")
    finally:
        c.close()


def test_repeated_kill_9_loses_and_duplicates_nothing(broker_factory, tmp_path):
    data = tmp_path / "campaign"
    broker = broker_factory("--override", "log.cleaner.backoff.ms=100", data_dir=data)
    port = broker.port
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([
        NewTopic("plain", 1, 1),
        NewTopic("compacted", 1, 1, config={
            "cleanup.policy": "compact", "segment.bytes": "2097152",
            "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0"})])
    for f in futures.values():
        f.result(15)

    acked: dict[str, list[bytes]] = {"plain": [], "compacted": []}
    lock = threading.Lock()
    stop = threading.Event()

    def on_delivery(err, msg) -> None:
        if err is None:
            with lock:
                acked[msg.topic()].append(msg.value())

    def produce() -> None:
        p = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "acks": "all",
                      "enable.idempotence": True, "linger.ms": 2,
                      "message.timeout.ms": 120000, "reconnect.backoff.max.ms": 200})
        i = 0
        while not stop.is_set():
            value = b"%08d" % i
            for topic, key in (("plain", None), ("compacted", b"k%d" % (i % KEYS))):
                while True:  # each record exactly once, whatever the queue says
                    try:
                        p.produce(topic, value, key=key, on_delivery=on_delivery)
                        break
                    except BufferError:
                        p.poll(0.05)
            i += 1
            p.poll(0)
        assert p.flush(120) == 0  # every record acknowledged or failed by the end

    thread = threading.Thread(target=produce)
    thread.start()
    rng = random.Random(7)
    try:
        for _ in range(KILLS):
            time.sleep(rng.uniform(0.3, 1.5))
            broker.kill()
            time.sleep(rng.uniform(0.0, 0.3))
            broker.start()
        time.sleep(1.0)
    finally:
        stop.set()
        thread.join(180)
    assert not thread.is_alive()

    with lock:
        plain, compacted = list(acked["plain"]), list(acked["compacted"])
    assert len(plain) > 1000
    msgs = read_all(broker.bootstrap, "plain")
    got = [m.value() for m in msgs]
    seen: dict[bytes, int] = {}
    dups = []
    for m in msgs:
        if m.value() in seen:
            dups.append((m.value(), seen[m.value()], m.offset()))
        seen.setdefault(m.value(), m.offset())
    assert not dups, f"duplicates after retries across crashes (value, first, again): {dups[:20]}"
    assert set(plain) <= set(got), f"{len(set(plain) - set(got))} acknowledged records lost"
    assert got == sorted(got)  # one producer, in order

    latest: dict[bytes, bytes] = {}
    for m in read_all(broker.bootstrap, "compacted"):
        latest[m.key()] = m.value()
    expected: dict[bytes, bytes] = {}
    for value in compacted:  # acknowledgements arrive in produce order per partition
        expected[b"k%d" % (int(value) % KEYS)] = value
    for key, value in expected.items():
        assert latest.get(key, b"") >= value, f"{key!r}: {latest.get(key)} < acked {value}"


def test_exactly_once_pipeline_survives_repeated_broker_kills(broker_factory, tmp_path):
    """A consume-transform-produce app (transactions with its input offsets) while the
    broker is killed -9 again and again; after each crash the app is restarted too, as a
    supervisor would. The output, read_committed, holds every input exactly once: the
    coordinator's recovery, the aborts of open transactions and the transactional
    offsets all survive the kills."""
    import subprocess
    import sys

    from tests.integration.test_transactions import read_all as read_values
    from tests.integration.test_transactions_crash import TRANSFORM

    broker = broker_factory(data_dir=tmp_path / "eos")
    n = 5000
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic("in", 1, 1), NewTopic("out", 1, 1)]).values():
        f.result(15)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce("in", b"%05d" % i)
    assert p.flush(15) == 0
    script = tmp_path / "transform.py"
    script.write_text(TRANSFORM)

    def start() -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, str(script), broker.bootstrap, "in", "out",
                                 "eos-app", "eos-group", str(n), "-1"],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)

    rng = random.Random(11)
    app = start()
    try:
        for _ in range(6):
            time.sleep(rng.uniform(0.5, 1.5))
            broker.kill()
            app.kill()
            app.wait(10)
            broker.start()
            app = start()
        assert app.stdout is not None
        for line in app.stdout:  # the last instance works until the input is drained
            if line.startswith("idle") and len(
                    read_values(broker.bootstrap, "out", "read_committed")) >= n:
                break
    finally:
        app.kill()
        app.wait(10)
    out = read_values(broker.bootstrap, "out", "read_committed")
    assert sorted(out) == [f"out-{i:05d}" for i in range(n)]  # each exactly once
