"""Coordinator failover on three brokers of the shared log: the time from the kill -9 of
the broker coordinating a consumer group, a transactional id and a share group until
each serves again through the other brokers, over several kills (p50 / p99 / max).

Per round: a group with committed offsets, a transactional producer that committed a
transaction, a share consumer that received a record (its partition 0's state too), all
coordinated by one broker (brokers 1, 2, 3 in turn: the controller among them); that broker is killed;
three probes start at once:

* group: OffsetFetch (`Consumer.committed`) answers with the committed offsets;
* transactions: a new producer of the same transactional id completes
  InitProducerId (`init_transactions`, which also fences the old one);
* share group: the share consumer receives a record produced after the kill.

The killed broker is restarted and listed again before the next round. The lease
duration (`headwater.shared.lease.ms`, 3 s as in the tests) is printed beside the
figures: a takeover waits for the dead broker's leases to expire.

    python bench/failover_bench.py [--rounds 10]

PostgreSQL and versitygw are started here (private, on loopback), as the tests do.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent))

from confluent_kafka import (  # noqa: E402
    AcknowledgeType,
    Consumer,
    Producer,
    ShareConsumer,
    TopicPartition,
)
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
)

from headwater.share.coordinator import coordinator_key  # noqa: E402
from tests.support.cluster import (  # noqa: E402
    LEASE_MS,
    Cluster,
    coordinator_of,
    key_on,
    served_topic,
    start_cluster,
    topic_id_of,
    wait_listed,
)
from tests.support.engines import PostgresServer, VersityGateway  # noqa: E402

TIMEOUT_S = 120.0


def probe(name: str, until: dict[str, float], killed: float,
          check: Callable[[], bool]) -> threading.Thread:
    def run() -> None:
        while time.monotonic() - killed < TIMEOUT_S:
            try:
                if check():
                    until[name] = time.monotonic() - killed
                    return
            except Exception:  # noqa: BLE001  not serving yet
                pass
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def one_round(cluster: Cluster, victim: int) -> dict[str, float]:
    """Keys whose coordinator shards are all on broker `victim` (the shards are spread
    over the brokers: names are drawn until they land there), then its kill -9."""
    topic = served_topic(cluster, "failover")
    group, txn_id = key_on(cluster, victim, "g"), key_on(cluster, victim, "t", 1)
    topic_id = topic_id_of(cluster, topic)
    while True:  # the share group's coordinator and its partition 0's state's, both there
        share = key_on(cluster, victim, "s")
        if coordinator_of(cluster, coordinator_key(share, topic_id, 0), 2) == victim:
            break
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in (
        ("share.auto.offset.reset", "earliest"),
        ("share.record.lock.duration.ms", "15000"))]  # the least a lost ack costs
    resource = ConfigResource("group", share, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result(30)
    committer = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": group,
                          "enable.auto.commit": False})
    committer.commit(offsets=[TopicPartition(topic, 0, 5)], asynchronous=False)
    committer.close()
    producer = Producer({"bootstrap.servers": cluster.bootstrap(),
                         "transactional.id": txn_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"before", partition=0)
    producer.commit_transaction(30)
    sharer = ShareConsumer({"bootstrap.servers": cluster.bootstrap(), "group.id": share,
                            "share.acknowledgement.mode": "explicit"})
    sharer.subscribe([topic])
    deadline = time.monotonic() + 60
    while not accepted(sharer, b"before"):
        assert time.monotonic() < deadline, "the share consumer got nothing"

    assert coordinator_of(cluster, group) == victim
    others = [n for n in (1, 2, 3) if n != victim]
    bootstrap = cluster.bootstrap(*others)
    cluster.brokers[victim].kill()
    killed = time.monotonic()
    until: dict[str, float] = {}
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "enable.auto.commit": False})

    def offsets() -> bool:
        got = reader.committed([TopicPartition(topic, 0)], timeout=1)
        return got[0].error is None and got[0].offset == 5

    def transactions() -> bool:
        fresh = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
        fresh.init_transactions(1)
        return True

    produced = False

    def share_group() -> bool:
        """A record produced after the kill, received and its acceptance committed."""
        nonlocal produced
        if not produced:
            after = Producer({"bootstrap.servers": bootstrap})
            after.produce(topic, b"after", partition=0)
            produced = after.flush(1) == 0
            return False
        return accepted(sharer, b"after")

    threads = [probe("group", until, killed, offsets),
               probe("transactions", until, killed, transactions),
               probe("share group", until, killed, share_group)]
    for thread in threads:
        thread.join(TIMEOUT_S)
    reader.close()
    sharer.close()
    cluster.start(victim)
    wait_listed(cluster.bootstrap(*others), [1, 2, 3], timeout=60)
    print(f"  killed broker {victim}: " + ", ".join(
        f"{k} {v:.2f} s" for k, v in sorted(until.items())), flush=True)
    return until


def accepted(sharer: ShareConsumer, value: bytes) -> bool:
    """Poll once; True when `value` came and its acceptance was committed."""
    got = False
    for msg in sharer.poll(0.5):
        if msg.error() is None:
            sharer.acknowledge(msg, AcknowledgeType.ACCEPT)
            got = got or msg.value() == value
    if not got:
        return False
    results = sharer.commit_sync(5)
    return all(err is None for err in (results or {}).values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="failover-bench-") as tmp:
        base = Path(tmp)
        for sub in ("postgres", "versitygw", "cluster"):
            (base / sub).mkdir()
        postgres = PostgresServer(base / "postgres").start()
        gateway = VersityGateway(base / "versitygw").start()
        clusters = start_cluster(postgres, gateway, base / "cluster")
        cluster = next(clusters)
        try:
            rounds = [one_round(cluster, 1 + i % 3) for i in range(args.rounds)]
        finally:
            for proc in cluster.brokers.values():
                proc.kill()
            gateway.kill()
            postgres.remove()
    print(f"\nseconds from kill -9 to serving again, {args.rounds} kills, "
          f"lease {LEASE_MS} ms:")
    print(f"{'':14} {'p50':>6} {'p99':>6} {'max':>6} {'missed':>6}")
    for name in ("group", "transactions", "share group"):
        times = sorted(r[name] for r in rounds if name in r)
        missed = args.rounds - len(times)
        if not times:
            print(f"{name:14} {'-':>6} {'-':>6} {'-':>6} {missed:>6}")
            continue
        p99 = times[min(len(times) - 1, round(0.99 * (len(times) - 1)))]
        print(f"{name:14} {statistics.median(times):6.2f} {p99:6.2f} {times[-1]:6.2f} "
              f"{missed:>6}")


if __name__ == "__main__":
    main()
