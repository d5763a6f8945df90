"""What TLS and SASL cost: produce and consume over PLAINTEXT and SASL_SSL (PLAIN), on
headwater and on Apache Kafka 4.4.0, in one run.

Each broker is started once with two listeners (PLAINTEXT and SASL_SSL, a certificate
from a private CA made here with openssl). Per listener: COUNT records of SIZE bytes are
produced (confluent-kafka, broker_bench's throughput settings: acks=all, linger 5 ms, no
compression) to a fresh 1-partition topic, then consumed from the beginning
(fetch.queue.backoff.ms=1, as broker_bench). Reported: msgs/s per broker and listener, the TLS+SASL
cost (SASL_SSL / PLAINTEXT) per broker, and headwater / Kafka per listener.

    python bench/security_bench.py [--count 500000] [--size 100] [--rounds 2]
                                   [--brokers headwater,kafka]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from broker_bench import CONSUMER_THROUGHPUT_CONFIG, PRODUCER_THROUGHPUT_CONFIG
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker_process import BrokerProcess, free_port
from tests.support.kafka_reference import KafkaReference
from tests.support.secured import make_pki

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" '
        'user_admin="admin-secret" user_alice="alice-secret";')


class Secured:
    """A broker with a PLAINTEXT and a SASL_SSL listener; `conf(listener)` for clients."""

    def __init__(self, name: str, workdir: Path, pki: Path) -> None:
        self.name, self.pki = name, pki
        if name == "kafka":
            self.ref = KafkaReference(workdir / "data", heap="1g")
            self.plain, self.secure = self.ref.port, free_port()
            c = self.ref.controller_port
            self.ref.overrides = [
                f"listeners=PLAINTEXT://127.0.0.1:{self.plain},"
                f"SASL_SSL://127.0.0.1:{self.secure},CONTROLLER://127.0.0.1:{c}",
                f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.plain},"
                f"SASL_SSL://127.0.0.1:{self.secure}",
                "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
                "SASL_SSL:SASL_SSL",
                "sasl.enabled.mechanisms=PLAIN",
                f"listener.name.sasl_ssl.plain.sasl.jaas.config={JAAS}",
                "ssl.keystore.type=PEM", f"ssl.keystore.location={pki / 'keystore.pem'}"]
            self.proc: KafkaReference | BrokerProcess = self.ref
        else:
            self.plain, self.secure = free_port(), free_port()
            self.proc = BrokerProcess(
                workdir / "data", "--override",
                f"listeners=PLAINTEXT://127.0.0.1:{self.plain},"
                f"SASL_SSL://127.0.0.1:{self.secure}",
                "--override", "ssl.keystore.type=PEM",
                "--override", f"ssl.keystore.location={pki / 'keystore.pem'}",
                "--override", f"listener.name.sasl_ssl.plain.sasl.jaas.config={JAAS}",
                port=self.plain)

    def conf(self, listener: str) -> dict:
        if listener == "PLAINTEXT":
            return {"bootstrap.servers": f"127.0.0.1:{self.plain}"}
        return {"bootstrap.servers": f"127.0.0.1:{self.secure}",
                "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                "sasl.username": "alice", "sasl.password": "alice-secret",
                "ssl.ca.location": str(self.pki / "ca.pem")}


def produce(conf: dict, topic: str, count: int, size: int) -> float:
    producer = Producer({**conf, **PRODUCER_THROUGHPUT_CONFIG,
                         "delivery.report.only.error": True})
    producer.list_topics(topic=topic, timeout=20)
    value = b"x" * size
    t0 = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(300):
        raise TimeoutError("records undelivered")
    return count / (time.perf_counter() - t0)


def consume(conf: dict, topic: str, count: int) -> float:
    consumer = Consumer({**conf, **CONSUMER_THROUGHPUT_CONFIG,
                         "group.id": f"bench-{uuid.uuid4().hex[:8]}"})
    consumer.subscribe([topic])
    got, t0 = 0, None
    deadline = time.monotonic() + 300
    while got < count and time.monotonic() < deadline:
        for msg in consumer.consume(10_000, timeout=0.5):
            if msg.error() is None:
                if t0 is None:
                    t0 = time.perf_counter()
                got += 1
    elapsed = time.perf_counter() - (t0 or time.perf_counter())
    consumer.close()
    if got < count:
        raise TimeoutError(f"consumed {got}/{count}")
    return count / elapsed


def run(name: str, pki: Path, count: int, size: int, rounds: int) -> dict:
    out: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix=f"secbench-{name}-") as tmp:
        broker = Secured(name, Path(tmp), pki)
        broker.proc.start(timeout=180)
        try:
            admin = AdminClient(broker.conf("PLAINTEXT"))
            for r in range(rounds):
                for listener in ("PLAINTEXT", "SASL_SSL"):
                    topic = f"sec-{listener.lower()}-{r}"
                    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
                    conf = broker.conf(listener)
                    out.setdefault((listener, "produce"), []).append(
                        produce(conf, topic, count, size))
                    out.setdefault((listener, "consume"), []).append(
                        consume(conf, topic, count))
                    print(name, listener, r, {k: f"{v[-1]:,.0f}" for k, v in out.items()
                                              if k[0] == listener}, flush=True)
        finally:
            broker.proc.stop()
    return {k: statistics.median(v) for k, v in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=500_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--brokers", default="headwater,kafka")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="secbench-pki-") as pki_dir:
        pki = Path(pki_dir)
        make_pki(pki)
        results = {name: run(name, pki, args.count, args.size, args.rounds)
                   for name in args.brokers.split(",")}
    print(f"\n{args.count:,} x {args.size} B, median of {args.rounds} rounds (msgs/s)")
    names = list(results)
    print(f"{'':22}" + "".join(f"{n:>14}" for n in names)
          + ("   headwater/kafka" if len(names) == 2 else ""))
    for listener in ("PLAINTEXT", "SASL_SSL"):
        for op in ("produce", "consume"):
            row = [results[n][(listener, op)] for n in names]
            ratio = f"   {row[0] / row[1]:.2f}x" if len(row) == 2 else ""
            print(f"{listener + ' ' + op:22}" + "".join(f"{v:>14,.0f}" for v in row) + ratio)
    for n in names:
        for op in ("produce", "consume"):
            cost = results[n][("SASL_SSL", op)] / results[n][("PLAINTEXT", op)]
            print(f"{n} {op}: SASL_SSL runs at {cost:.2f}x of PLAINTEXT")


if __name__ == "__main__":
    main()
