"""What a topic's Iceberg table costs (issue 38, docs/iceberg.md), on one broker:

* **CPU per GB, table on and off**: the same records produced into a topic without a
  table and into one with `headwater.iceberg.mode=key_value` (its writer started and its
  table made beforehand); the broker's CPU (and with the table the writer child's) from
  the first record until the table holds the last, per GB of record values.
* **Table lag under load**: records produced at a fixed rate while the writer commits
  every `--interval-ms`; every 100 ms the records the table lacks below the topic's end
  (the table's snapshot offsets against the partitions' high watermarks), as records and
  as seconds at that rate: p50 / p99 / max.
* **Files per commit**: from the table's snapshots (`added-data-files`,
  `added-files-size`, `added-records`): p50 / max files, and bytes per file.

    python bench/iceberg_bench.py [--records 1000000] [--size 100] [--rate 20000]

Every figure is of this run and this machine; the off/on CPU ratio is the one to compare.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import broker_bench as bb  # noqa: E402

from headwater.iceberg.launcher import default_catalog  # noqa: E402
from headwater.iceberg.tables import open_catalog, table_offsets  # noqa: E402
from tests.support.broker_process import BrokerProcess  # noqa: E402

PARTITIONS = 6
GB = 1e9


def children_cpu(pid: int) -> float:
    """CPU seconds of `pid`'s live children (the table writer)."""
    total = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                total += bb.process_cpu_seconds(int(child))
            except FileNotFoundError:
                pass
    return total


def create(bootstrap: str, name: str, table: bool, interval_ms: int) -> str:
    configs = {"headwater.iceberg.mode": "key_value",
               "headwater.iceberg.commit.interval.ms": str(interval_ms)} if table else {}
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the answer
    admin.create_topics([NewTopic(name, PARTITIONS, 1, config=configs)])[name].result(30)
    return name


def ends(consumer: Consumer, topic: str) -> dict[int, int]:
    return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(PARTITIONS)}


class Table:
    def __init__(self, data_dir: Path, topic: str) -> None:
        self.catalog = open_catalog(*default_catalog(data_dir))
        self.topic = topic

    def offsets(self) -> dict[int, int]:
        try:
            return table_offsets(self.catalog.load_table(("db", self.topic)))
        except Exception:  # noqa: BLE001 - not created yet
            return {}

    def commits(self) -> list[dict[str, str]]:
        table = self.catalog.load_table(("db", self.topic))
        return [dict(s.summary.additional_properties) for s in table.snapshots()
                if s.summary is not None]


def wait_table(table: Table, want: dict[int, int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while any(table.offsets().get(p, 0) < o for p, o in want.items() if o):
        if time.monotonic() > deadline:
            raise TimeoutError(f"table behind: {table.offsets()} < {want}")
        time.sleep(0.05)


def cpu_per_gb(broker: BrokerProcess, args: argparse.Namespace, table: bool) -> dict:
    bs = broker.bootstrap
    topic = create(bs, f"cpu-{'on' if table else 'off'}", table, args.interval_ms)
    pid = broker.proc.pid  # type: ignore[union-attr]
    consumer = Consumer({"bootstrap.servers": bs, "group.id": "bench-iceberg"})
    t = Table(broker.data_dir, topic) if table else None
    if t is not None:  # the writer started and the table made before the clock starts
        bb.run_produce(bs, topic, 1000, args.size, 60)
        wait_table(t, ends(consumer, topic), 120)
    cpu0, child0, t0 = bb.process_cpu_seconds(pid), children_cpu(pid), time.perf_counter()
    bb.run_produce(bs, topic, args.records, args.size, 300)
    if t is not None:
        wait_table(t, ends(consumer, topic), 300)
    seconds = time.perf_counter() - t0
    broker_cpu = bb.process_cpu_seconds(pid) - cpu0
    writer_cpu = children_cpu(pid) - child0
    consumer.close()
    gb = args.records * args.size / GB
    return {"seconds": seconds, "broker_cpu_s": broker_cpu, "writer_cpu_s": writer_cpu,
            "cpu_s_per_gb": (broker_cpu + writer_cpu) / gb, "topic": topic}


def lag_under_load(broker: BrokerProcess, args: argparse.Namespace) -> dict:
    bs = broker.bootstrap
    topic = create(bs, "lag", True, args.interval_ms)
    table = Table(broker.data_dir, topic)
    producer = Producer({"bootstrap.servers": bs, "linger.ms": 5})
    consumer = Consumer({"bootstrap.servers": bs, "group.id": "bench-iceberg-lag"})
    value = b"x" * args.size
    lags: list[int] = []
    start = time.monotonic()
    sent = 0
    next_sample = start + 1.0  # the first second: the table being created
    while (now := time.monotonic()) - start < args.seconds:
        due = int((now - start) * args.rate)
        while sent < due:
            producer.produce(topic, value, partition=sent % PARTITIONS)
            sent += 1
            if sent % 1000 == 0:
                producer.poll(0)
        if now >= next_sample:
            have = table.offsets()
            lags.append(sum(max(end - have.get(p, 0), 0)
                            for p, end in ends(consumer, topic).items()))
            next_sample = now + 0.1
        time.sleep(0.001)
    producer.flush(60)
    consumer.close()
    lags.sort()
    commits = table.commits()
    files = sorted(int(c.get("added-data-files", 0)) for c in commits)
    sizes = [int(c.get("added-files-size", 0)) / max(int(c.get("added-data-files", 1)), 1)
             for c in commits]
    return {
        "rate": args.rate, "samples": len(lags),
        "lag_p50": lags[len(lags) // 2], "lag_p99": lags[int(len(lags) * 0.99)],
        "lag_max": lags[-1],
        "commits": len(commits), "files_p50": files[len(files) // 2], "files_max": files[-1],
        "file_bytes_p50": statistics.median(sizes) if sizes else 0,
        "records_per_commit_p50": statistics.median(
            int(c.get("added-records", 0)) for c in commits) if commits else 0,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--interval-ms", type=int, default=1000,
                    help="headwater.iceberg.commit.interval.ms")
    ap.add_argument("--rate", type=int, default=20_000, help="records/s of the lag run")
    ap.add_argument("--seconds", type=float, default=30.0, help="length of the lag run")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="iceberg-bench-") as tmp:
        broker = BrokerProcess(Path(tmp) / "data").start()
        try:
            bb.run_produce(broker.bootstrap, create(broker.bootstrap, "warm", False, 0),
                           50_000, args.size, 120)
            off = cpu_per_gb(broker, args, False)
            on = cpu_per_gb(broker, args, True)
            lag = lag_under_load(broker, args)
        finally:
            broker.kill()
    print(f"{args.records:,} records of {args.size} B, {PARTITIONS} partitions, table "
          f"commits every {args.interval_ms} ms")
    for name, r in (("table off", off), ("table on", on)):
        print(f"  {name:9}: {r['seconds']:6.1f} s to the last record "
              f"{'in the table' if name == 'table on' else 'acknowledged'}; broker "
              f"{r['broker_cpu_s']:.1f} CPU s + writer {r['writer_cpu_s']:.1f} = "
              f"{r['cpu_s_per_gb']:.1f} CPU s/GB")
    print(f"  CPU per GB, on/off: {on['cpu_s_per_gb'] / off['cpu_s_per_gb']:.2f}x")
    print(f"table lag at {lag['rate']:,} records/s for {args.seconds:.0f} s "
          f"({lag['samples']} samples): p50 {lag['lag_p50']:,} records "
          f"({lag['lag_p50'] / lag['rate']:.2f} s), p99 {lag['lag_p99']:,} "
          f"({lag['lag_p99'] / lag['rate']:.2f} s), max {lag['lag_max']:,}")
    print(f"commits: {lag['commits']}, files per commit p50 {lag['files_p50']} max "
          f"{lag['files_max']}, {lag['file_bytes_p50'] / 1024:.0f} KiB per file p50, "
          f"{lag['records_per_commit_p50']:,.0f} records per commit p50")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
