"""A topic's history read by Spark from its Iceberg table (`historyFromTable`) against
the same history replayed from the topic (`format("headwater")`), one broker, one run
(issue 38, docs/iceberg.md):

* records produced into a topic with `headwater.iceberg.mode=key_value`, until its table
  holds them all;
* Spark (local[2]) reads the whole history both ways, in alternating rounds, summing the
  values' lengths so every row is read: rows/s each way and the ratio, per round and at
  the median.

    python bench/history_bench.py [--records 1000000] [--size 100] [--rounds 3]

Every figure is of this run and this machine; the ratio is the one to compare.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import broker_bench as bb  # noqa: E402
import iceberg_bench as ib  # noqa: E402

from headwater.iceberg.launcher import default_catalog  # noqa: E402
from tests.support.broker_process import BrokerProcess  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        broker = BrokerProcess(data).start()
        try:
            topic = ib.create(broker.bootstrap, "history", True, 1000)
            bb.run_produce(broker.bootstrap, topic, args.records, args.size, 600)
            consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "bench"})
            ib.wait_table(ib.Table(data, topic), ib.ends(consumer, topic), 600)
            consumer.close()
            uri, warehouse = default_catalog(data)
            spark = (SparkSession.builder.master("local[2]").appName("history-bench")
                     .config("spark.ui.enabled", "false")
                     .config("spark.ui.showConsoleProgress", "false")
                     .config("spark.sql.shuffle.partitions", "2").getOrCreate())
            spark.sparkContext.setLogLevel("ERROR")

            def read(table: bool) -> float:
                reader = (spark.read.format("headwater")
                          .option("kafka.bootstrap.servers", broker.bootstrap)
                          .option("subscribe", topic))
                if table:
                    reader = reader.options(**{"historyFromTable": "true",
                                               "iceberg.uri": uri,
                                               "iceberg.warehouse": warehouse})
                start = time.perf_counter()
                row = reader.load().selectExpr("count(*) n", "sum(length(value)) b").first()
                took = time.perf_counter() - start
                assert row is not None and row.n == args.records, row
                return took

            read(True), read(False)  # warm-up: the JVM, numba's kernel, the catalog
            print(f"{args.records:,} records of {args.size} B, {ib.PARTITIONS} partitions")
            print("| round | table rows/s | topic rows/s | table/topic |")
            print("| --- | --- | --- | --- |")
            ratios = []
            for n in range(args.rounds):
                t, k = read(True), read(False)
                ratios.append(k / t)
                print(f"| {n + 1} | {args.records / t:,.0f} | {args.records / k:,.0f} | "
                      f"{k / t:.2f}x |")
            print(f"median table/topic: {statistics.median(ratios):.2f}x")
            spark.stop()
        finally:
            broker.kill()


if __name__ == "__main__":
    main()
