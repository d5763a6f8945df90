"""Many partitions: how long a broker takes to create them, stop, and start again.

Per broker (headwater, and Apache Kafka 4.4.0 for the ratio), freshly started on an
empty data directory: PARTITIONS partitions are created in topics of at most 9,000
(one CreateTopics each: Kafka refuses one admin request of 10,000+ records), one record
is produced to every `--produce-every`-th partition (default 10), then the broker is stopped cleanly and started (timed
until it answers), and killed with SIGKILL and started again (an unclean start: every
written partition's tail is re-verified). Reported: create time, partitions/s, stop
time, both start times, RSS and open descriptors after the last start.

    python bench/partitions_bench.py [--partitions 100000] [--brokers headwater,kafka]
                                     [--kafka-partitions 10000]

Kafka keeps every segment's log file open (and its indexes mapped), so it needs more
descriptors than partitions; `--kafka-partitions` gives it a count its limit allows.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker_process import BrokerProcess
from tests.support.kafka_reference import KafkaReference

PER_TOPIC = 9_000


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def create(bootstrap: str, partitions: int) -> dict[str, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics: dict[str, int] = {}
    left, i = partitions, 0
    while left > 0:
        n = min(PER_TOPIC, left)
        name = f"many-{i}"
        admin.create_topics([NewTopic(name, n, 1)], operation_timeout=300,
                            request_timeout=600)[name].result(900)
        topics[name] = n
        left -= n
        i += 1
    return topics


def produce_each(bootstrap: str, topics: dict[str, int], every: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 100,
                         "queue.buffering.max.messages": 2_000_000})
    for topic, n in topics.items():
        for p in range(0, n, every):
            producer.produce(topic, b"x" * 100, partition=p)
            producer.poll(0)
    assert producer.flush(900) == 0


MARKER = "partitions in the background"


def markers(broker: BrokerProcess | KafkaReference) -> int:
    if isinstance(broker, KafkaReference) or not broker.log_path.exists():
        return 0
    return broker.log_path.read_text(errors="replace").count(MARKER)


def opened_after(broker: BrokerProcess | KafkaReference, seen: int) -> float:
    """Seconds from now until headwater's background opener has opened every partition
    (its log line); 0 for Kafka, which opens everything before it serves."""
    if isinstance(broker, KafkaReference):
        return 0.0
    t0 = time.monotonic()
    while markers(broker) <= seen:
        time.sleep(0.2)
    return time.monotonic() - t0


def timed(fn) -> float:  # noqa: ANN001
    t0 = time.monotonic()
    fn()
    return time.monotonic() - t0


def run(name: str, partitions: int, workdir: Path, every: int) -> dict[str, float]:
    if name == "kafka":
        broker = KafkaReference(workdir / "data", heap="2g")
    else:
        broker = BrokerProcess(workdir / "data")
    broker.start(timeout=900)
    out: dict[str, float] = {"partitions": partitions}
    topics: dict[str, int] = {}
    out["create_s"] = timed(lambda: topics.update(create(broker.bootstrap, partitions)))
    out["produce_s"] = timed(lambda: produce_each(broker.bootstrap, topics, every))
    out["stop_s"] = timed(lambda: broker.stop(timeout=900))
    seen = markers(broker)
    out["clean_start_s"] = timed(lambda: broker.start(timeout=1800))
    out["all_open_s"] = out["clean_start_s"] + opened_after(broker, seen)
    broker.kill()
    seen = markers(broker)
    out["unclean_start_s"] = timed(lambda: broker.start(timeout=1800))
    out["all_recovered_s"] = out["unclean_start_s"] + opened_after(broker, seen)
    assert broker.proc is not None
    out["rss_mib"] = rss_mib(broker.proc.pid)
    out["fds"] = len(os.listdir(f"/proc/{broker.proc.pid}/fd"))
    broker.stop(timeout=900)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--kafka-partitions", type=int, default=10_000)
    parser.add_argument("--brokers", default="headwater,kafka")
    parser.add_argument("--produce-every", type=int, default=10,
                        help="one record to every N-th partition (1: to all)")
    args = parser.parse_args()
    results = {}
    for name in args.brokers.split(","):
        count = args.kafka_partitions if name == "kafka" else args.partitions
        with tempfile.TemporaryDirectory(prefix=f"partitions-{name}-") as tmp:
            results[name] = run(name, count, Path(tmp), args.produce_every)
            print(name, results[name], flush=True)
    keys = ["partitions", "create_s", "produce_s", "stop_s", "clean_start_s", "all_open_s",
            "unclean_start_s", "all_recovered_s", "rss_mib", "fds"]
    print(f"{'':18}" + "".join(f"{n:>14}" for n in results))
    for key in keys:
        print(f"{key:18}" + "".join(f"{r[key]:>14.1f}" for r in results.values()))
    for key in ("create_s", "stop_s", "clean_start_s", "all_open_s", "unclean_start_s",
                "all_recovered_s"):
        if len(results) == 2 and "kafka" in results and "headwater" in results:
            hw, kf = results["headwater"], results["kafka"]
            per_hw = hw[key] / hw["partitions"]
            per_kf = kf[key] / kf["partitions"]
            print(f"{key} per partition: headwater {per_hw * 1e6:.0f} us, "
                  f"kafka {per_kf * 1e6:.0f} us (kafka/headwater {per_kf / per_hw:.2f}x)")


if __name__ == "__main__":
    main()
