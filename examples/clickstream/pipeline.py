"""Spark Structured Streaming job: clicks per page per 10-second window.

    python examples/clickstream/pipeline.py [--bootstrap 127.0.0.1:9092] [--source clicks]
        [--sink click-counts] [--checkpoint ./checkpoints/clickstream]

Reads the clickstream with format("headwater") -- the same options a job on Spark's
built-in format("kafka") would use --, parses the JSON, counts clicks per page in
10-second event-time windows (results are final once the 5-second watermark has passed
the window), and writes one JSON record per (window, page) to the sink topic with
per-task transactions (exactlyOnce), keyed by page. Progress is committed to the consumer
group "clickstream-pipeline", so `headwater groups describe clickstream-pipeline` shows
its lag. Stop with Ctrl-C; starting it again resumes from the checkpoint.
"""

from __future__ import annotations

import argparse
import os
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

EVENT_SCHEMA = "user STRING, page STRING, ts LONG"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--source", default="clicks")
    ap.add_argument("--sink", default="click-counts")
    ap.add_argument("--checkpoint", default="./checkpoints/clickstream")
    ap.add_argument("--trigger", default="5 seconds")
    args = ap.parse_args()

    # Spark's Python workers must run this interpreter (it has pyarrow and the connector).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").appName("clickstream")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("WARN")

    clicks = (spark.readStream.format("headwater")  # was: format("kafka")
              .option("kafka.bootstrap.servers", args.bootstrap)
              .option("subscribe", args.source)
              .option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "50000")
              .option("kafka.group.id", "clickstream-pipeline")
              .load()
              .select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
              .select("e.*")
              .withColumn("event_time", F.timestamp_millis("ts")))

    counts = (clicks.withWatermark("event_time", "5 seconds")
              .groupBy(F.window("event_time", "10 seconds"), "page")
              .agg(F.count("*").alias("clicks"), F.approx_count_distinct("user").alias("users")))

    out = counts.select(
        F.col("page").alias("key"),
        F.to_json(F.struct(
            F.date_format("window.start", "yyyy-MM-dd HH:mm:ss").alias("window_start"),
            "page", "clicks", "users")).alias("value"))

    query = (out.writeStream.format("headwater")
             .option("kafka.bootstrap.servers", args.bootstrap)
             .option("topic", args.sink)
             .option("exactlyOnce", "true")
             .option("checkpointLocation", args.checkpoint)
             .outputMode("append")
             .trigger(processingTime=args.trigger)
             .start())
    print(f"clickstream pipeline running: {args.source} -> {args.sink} "
          f"(checkpoint {args.checkpoint}); Ctrl-C stops")
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
