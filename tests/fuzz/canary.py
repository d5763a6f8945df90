"""A well-behaved client beside the fuzzer: it produces and consumes the whole time.

An idempotent acks=all producer writes numbered records to its own topic while a
consumer reads them back; at the end every acknowledged record must have been read, once.
"""

from __future__ import annotations

import threading
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


class Canary:
    def __init__(self, bootstrap: str, topic: str, rate: float = 200.0) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.rate = rate
        self.acked: set[int] = set()
        self.errors: list[str] = []
        self.read: list[int] = []
        self._stop = threading.Event()
        self._produced = threading.Event()
        self._give_up = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> Canary:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(self.topic, 1, 1)])[self.topic].result(15)
        self._threads = [threading.Thread(target=self._produce, daemon=True),
                         threading.Thread(target=self._consume, daemon=True)]
        for t in self._threads:
            t.start()
        return self

    def _produce(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 5})

        def delivered(err, msg) -> None:
            if err is not None:
                self.errors.append(str(err))
            else:
                self.acked.add(int(msg.value()))

        n, start = 0, time.monotonic()
        while not self._stop.is_set():
            producer.produce(self.topic, value=str(n).encode(), on_delivery=delivered)
            n += 1
            producer.poll(0)
            ahead = n / self.rate - (time.monotonic() - start)
            if ahead > 0:
                self._stop.wait(ahead)
        left = producer.flush(30)
        if left:
            self.errors.append(f"{left} records never acknowledged")

    def _consume(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "canary",
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
        try:
            while not self._give_up.is_set() and not (
                    self._produced.is_set() and self.acked <= set(self.read)):
                msg = consumer.poll(0.2)
                if msg is None:
                    continue
                if msg.error() is not None:
                    self.errors.append(f"consume: {msg.error()}")
                    continue
                self.read.append(int(msg.value()))
        finally:
            consumer.close()

    def stop(self, timeout: float = 60.0) -> None:
        """Stop producing, wait until everything acknowledged has been read."""
        self._stop.set()
        self._threads[0].join(timeout)
        self._produced.set()
        self._threads[1].join(timeout)
        self._give_up.set()

    def problems(self) -> list[str]:
        """Empty when every acknowledged record was read exactly once."""
        out = list(self.errors)
        missing = self.acked - set(self.read)
        if missing:
            out.append(f"{len(missing)} acknowledged records never read, e.g. "
                       f"{sorted(missing)[:5]}")
        if len(self.read) != len(set(self.read)):
            out.append(f"{len(self.read) - len(set(self.read))} records read twice")
        if not self.acked:
            out.append("nothing was acknowledged")
        return out


def read_back(bootstrap: str, topic: str, timeout: float = 30.0) -> list[int]:
    """Every record of the canary's topic, read from the start until the end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "canary-check",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    out: list[int] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    break
                continue
            out.append(int(msg.value()))
    finally:
        consumer.close()
    return out
