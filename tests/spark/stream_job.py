"""A standalone streaming query, run as a subprocess by the kill-and-restart test.

    python stream_job.py BOOTSTRAP TOPIC CHECKPOINT OUTPUT

Reads TOPIC from the earliest offset in micro-batches of at most 250 offsets
(AvailableNow) and appends (value, partition, offset) to a Parquet directory (Spark's
file sink keeps its own commit log, so only committed batches are visible to readers).
"""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession


def main() -> None:
    bootstrap, topic, checkpoint, output = sys.argv[1:5]
    spark = (SparkSession.builder.master("local[2]").appName("stream_job")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    df = (spark.readStream.format("headwater")
          .option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
          .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "250")
          .load().selectExpr("CAST(value AS STRING) AS value", "partition", "offset"))
    query = (df.writeStream.format("parquet").option("path", output)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    print("STARTED", flush=True)
    query.awaitTermination()
    print("DONE", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
