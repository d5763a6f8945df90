"""A work-queue worker: Spark Structured Streaming reading orders through a share group.

    python examples/workqueue/worker.py --name a [--bootstrap 127.0.0.1:9092]
        [--group order-enrichers] [--checkpoint ./checkpoints/workqueue-<name>]

Start several (each with its own --name, hence its own checkpoint): they are members of
one share group, so the broker hands each order to one of them, whatever the partition
count. Each worker parses the order, prices it and writes it to "orders-enriched"; an
order that does not parse, or that the broker has already delivered 3 times (workers
that died holding it), goes to "orders-dead" instead, with the reason. Parsing never
raises (from_json gives null): a task that raised on a record would fail its batch, and
the restarted query replays that batch by offset, so a worker must route poison records,
not crash on them. Records are
accepted by the share group only after the worker's output for them is committed
(exactlyOnce=true: per-task transactions), so killing a worker loses nothing and
duplicates nothing; Ctrl-C and starting it again resumes from its checkpoint.
"""

from __future__ import annotations

import argparse
import os
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ORDER = "id LONG, sku STRING, qty INT"
PRICES = {"tea": 3.5, "coffee": 4.0, "cocoa": 4.5, "mate": 3.0, "chai": 3.8}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--name", required=True, help="this worker's name (a, b, ...)")
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--group", default="order-enrichers")
    ap.add_argument("--checkpoint", default=None)
    ap.add_argument("--trigger", default="2 seconds")
    args = ap.parse_args()
    checkpoint = args.checkpoint or f"./checkpoints/workqueue-{args.name}"

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").appName(f"worker-{args.name}")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("WARN")

    orders = (spark.readStream.format("headwater")
              .option("kafka.bootstrap.servers", args.bootstrap)
              .option("kafka.share.group.id", args.group)
              .option("subscribe", "orders")
              .option("share.auto.offset.reset", "earliest")
              .option("maxRecordsPerTrigger", "1000")
              .load())
    prices = F.create_map(*[x for sku, p in PRICES.items() for x in (F.lit(sku), F.lit(p))])
    parsed = orders.select("key", "value", "deliveryCount",
                           F.from_json(F.col("value").cast("string"), ORDER).alias("o"))
    bad = (F.col("o.id").isNull() | F.col("o.qty").isNull()
           | prices[F.col("o.sku")].isNull())
    reason = (F.when(F.col("deliveryCount") >= 3, F.lit("delivered 3 times"))
              .when(bad, F.lit("not an order")))
    out = parsed.select(
        "key",
        F.when(reason.isNull(), F.lit("orders-enriched")).otherwise(F.lit("orders-dead"))
        .alias("topic"),
        F.when(reason.isNull(), F.to_json(F.struct(
            F.col("o.id").alias("id"), F.col("o.sku").alias("sku"),
            F.col("o.qty").alias("qty"),
            (F.col("o.qty") * prices[F.col("o.sku")]).alias("total"),
            F.lit(args.name).alias("worker"))))
        .otherwise(F.to_json(F.struct(reason.alias("reason"),
                                      F.col("value").cast("string").alias("order"),
                                      F.lit(args.name).alias("worker"))))
        .alias("value"))

    query = (out.writeStream.format("headwater")
             .option("kafka.bootstrap.servers", args.bootstrap)
             .option("exactlyOnce", "true")  # topic comes from the "topic" column
             .option("checkpointLocation", checkpoint)
             .trigger(processingTime=args.trigger).start())
    print(f"worker {args.name} running in share group {args.group} "
          f"(checkpoint {checkpoint}); Ctrl-C stops")
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
