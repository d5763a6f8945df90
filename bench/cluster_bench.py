"""One broker on local segments, one broker on the shared log, three brokers on the shared
log: the same workloads, the same client (confluent-kafka), in one run.

Per setup: produce 100 B and 1 KiB records (acks=all, idempotent as librdkafka's
default producer here is not: acks=all), consume the 100 B records, end-to-end latency at
2,000 msg/s (a producer's record until a consumer has it: an upper bound of the produce
p99); transactional produce over every partition, committing every 100 ms (records/s and
`commit_transaction` latency: on the shared log a transaction's markers are committed in
one PostgreSQL transaction). Broker CPU seconds per GB (summed over the setup's brokers); for the shared log,
PostgreSQL transactions and objects PUT per second during each produce workload. The
floors of issue 23 are checked against the local broker of the same run.

    python bench/cluster_bench.py [--quick] [--partitions 6]

PostgreSQL and versitygw are started here (private, on loopback), as the tests do.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import asyncpg

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent))
sys.path.insert(0, str(BENCH_DIR))

import broker_bench as bb  # noqa: E402
import txn_bench  # noqa: E402

from tests.support.broker_process import BrokerProcess  # noqa: E402
from tests.support.engines import PostgresServer, VersityGateway, shared_broker_args  # noqa: E402


class Setup:
    """Brokers run as one (bootstrap is their list; CPU is their sum)."""

    def __init__(self, name: str, procs: list[BrokerProcess], dsn: str | None) -> None:
        self.name = name
        self.procs = procs
        self.dsn = dsn
        self.bootstrap = ",".join(p.bootstrap for p in procs)

    def check_alive(self) -> None:
        for p in self.procs:
            assert p.proc is not None
            if p.proc.poll() is not None:
                raise RuntimeError(f"a broker of {self.name} exited: {p.logs()[-500:]}")

    def cpu_seconds(self) -> float | None:
        total = 0.0
        for p in self.procs:
            assert p.proc is not None
            total += bb.process_cpu_seconds(p.proc.pid)
        return total

    def counters(self) -> tuple[int, int]:
        """(PostgreSQL write transactions, objects recorded) so far."""
        if self.dsn is None:
            return 0, 0

        async def read() -> tuple[int, int]:
            conn = await asyncpg.connect(self.dsn)
            try:
                # write transactions so far, of every database (pg_stat_database is
                # updated only every second or so): commits, lease renewals, heartbeats
                xacts = await conn.fetchval(
                    "SELECT txid_snapshot_xmax(txid_current_snapshot())")
                objects = await conn.fetchval("SELECT count(*) FROM objects")
                return int(xacts), int(objects)
            finally:
                await conn.close()
        return asyncio.run(read())

    def stop(self) -> None:
        for p in self.procs:
            p.stop()


def measured(setup: Setup, fn: Callable[[], dict]) -> dict:
    x0, o0 = setup.counters()
    result = fn()
    x1, o1 = setup.counters()
    if setup.dsn is not None:
        result["pg_tx_per_s"] = (x1 - x0) / result["seconds"]
        result["objects_per_s"] = (o1 - o0) / result["seconds"]
    return result


def run(setup: Setup, plan: bb.Plan, partitions: int) -> dict[str, dict]:
    bs, alive, cpu = setup.bootstrap, setup.check_alive, setup.cpu_seconds
    out: dict[str, dict] = {}
    warm = bb.create_topic(bs, "warmup", partitions)
    bb.run_produce(bs, warm, plan.warmup_count, plan.small_size, plan.timeout, alive)
    small = bb.create_topic(bs, "p100", partitions)
    out["produce 100 B"] = measured(setup, lambda: bb.run_produce(
        bs, small, plan.small_count, plan.small_size, plan.timeout, alive, cpu))
    large = bb.create_topic(bs, "p1k", partitions)
    out["produce 1 KiB"] = measured(setup, lambda: bb.run_produce(
        bs, large, plan.large_count, plan.large_size, plan.timeout, alive, cpu))
    out["consume 100 B"] = bb.run_consume(bs, small, partitions, plan.small_count,
                                          plan.small_size, 30.0, alive, cpu,
                                          bb.CONSUMER_THROUGHPUT_CONFIG)
    lat = bb.create_topic(bs, "lat", 1)
    out["latency"] = bb.run_latency(bs, lat, plan.latency_rate, plan.latency_seconds)
    txn = bb.create_topic(bs, "txn", partitions)
    out["transactions"] = txn_bench.produce_transactional(
        bs, txn, plan.latency_seconds, 100, b"x" * plan.small_size, partitions, "bench-txn")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="10x fewer records")
    ap.add_argument("--partitions", type=int, default=6)
    args = ap.parse_args()
    scale = 10 if args.quick else 1
    plan = bb.Plan(small_count=500_000 // scale, small_size=100,
                   large_count=400_000 // scale, large_size=1024,
                   latency_seconds=5.0 if args.quick else 10.0, latency_rate=bb.LATENCY_RATE,
                   timeout=300.0, warmup_count=50_000 // scale)
    base = Path(tempfile.mkdtemp(prefix="cluster-bench-"))
    postgres = PostgresServer(base / "postgres").start()
    gateway = VersityGateway(base / "objects")
    gateway.base.mkdir(parents=True, exist_ok=True)
    gateway.start()
    results: dict[str, dict[str, dict]] = {}
    try:
        for name, count in (("local, 1 broker", 0), ("shared, 1 broker", 1),
                            ("shared, 3 brokers", 3)):
            d = base / name.replace(", ", "-").replace(" ", "")
            if count == 0:
                procs, dsn = [BrokerProcess(d / "broker-1").start()], None
            else:
                shared = shared_broker_args(postgres, gateway, d / "shared")
                dsn = next(a.split("=", 1)[1] for a in shared
                           if a.startswith("headwater.shared.database="))
                procs = [BrokerProcess(d / f"broker-{n}", *shared, "--override",
                                       f"node.id={n}").start() for n in range(1, count + 1)]
            setup = Setup(name, procs, dsn)
            try:
                time.sleep(2.0 if count > 1 else 0)  # the brokers' first heartbeats
                bb.log(f"{name}: running")
                results[name] = run(setup, plan, args.partitions)
            finally:
                setup.stop()
    finally:
        gateway.kill()
        postgres.remove()
        shutil.rmtree(base, ignore_errors=True)  # a run leaves 1.6-5 GB of logs and objects
    report(results)
    return 0


def report(results: dict[str, dict[str, dict]]) -> None:
    rows = [("produce 100 B", "msgs_per_s", "msgs/s"), ("produce 1 KiB", "msgs_per_s", "msgs/s"),
            ("consume 100 B", "msgs_per_s", "msgs/s"), ("produce 100 B", "cpu_s_per_gb", "CPU s/GB"),
            ("produce 1 KiB", "cpu_s_per_gb", "CPU s/GB"),
            ("consume 100 B", "cpu_s_per_gb", "CPU s/GB"),
            ("produce 100 B", "pg_tx_per_s", "PG tx/s"), ("produce 100 B", "objects_per_s",
                                                           "objects/s"),
            ("produce 1 KiB", "pg_tx_per_s", "PG tx/s"), ("produce 1 KiB", "objects_per_s",
                                                           "objects/s"),
            ("latency", "p50_ms", "e2e p50 ms"), ("latency", "p99_ms", "e2e p99 ms"),
            ("transactions", "records_per_s", "transactional 100 B msgs/s"),
            ("transactions", "commit_ms_p50", "commit p50 ms"),
            ("transactions", "commit_ms_p99", "commit p99 ms")]
    names = list(results)
    print("\n| workload | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for workload, key, unit in rows:
        cells = []
        for n in names:
            value = results[n].get(workload, {}).get(key)
            cells.append("—" if value is None else f"{value:,.1f}")
        print(f"| {workload}, {unit} | " + " | ".join(cells) + " |")
    local, shared = results.get("local, 1 broker"), results.get("shared, 1 broker")
    if local and shared:
        def ratio(w: str) -> float:
            return float(shared[w]["msgs_per_s"] / local[w]["msgs_per_s"])
        print(f"\nfloors: shared/local produce 100 B {ratio('produce 100 B'):.2f}x (>= 0.5), "
              f"1 KiB {ratio('produce 1 KiB'):.2f}x (>= 0.5), consume "
              f"{ratio('consume 100 B'):.2f}x (>= 0.8); shared e2e p99 at 2,000 msg/s "
              f"{shared['latency']['p99_ms']:.1f} ms (<= 25)")


if __name__ == "__main__":
    sys.exit(main())
