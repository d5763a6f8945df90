"""A standalone share-group query, run as a subprocess by the driver-kill tests.

    python share_stream_job.py BOOTSTRAP TOPIC GROUP CHECKPOINT SINK

Reads TOPIC through share group GROUP (AvailableNow, micro-batches of ~250 records) and
writes ``value:deliveryCount``: SINK ``parquet:<dir>`` appends to a Parquet directory
(Spark's file sink only shows committed batches), ``topic:<name>`` produces to a headwater
topic with the sink's exactlyOnce=true.
"""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession


def main() -> None:
    bootstrap, topic, group, checkpoint, sink = sys.argv[1:6]
    spark = (SparkSession.builder.master("local[2]").appName("share_stream_job")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    df = (spark.readStream.format("headwater")
          .option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
          .option("kafka.share.group.id", group).option("maxRecordsPerTrigger", "250")
          .option("share.auto.offset.reset", "earliest")
          .option("share.record.lock.duration.ms", "2000")
          .option("share.session.timeout.ms", "3000")
          .option("share.heartbeat.interval.ms", "500")
          .load().selectExpr("concat(CAST(value AS STRING), ':', deliveryCount) AS value"))
    kind, _, target = sink.partition(":")
    writer = df.writeStream.option("checkpointLocation", checkpoint)
    if kind == "parquet":
        writer = writer.format("parquet").option("path", target)
    else:
        writer = (writer.format("headwater").option("kafka.bootstrap.servers", bootstrap)
                  .option("topic", target).option("exactlyOnce", "true"))
    query = writer.trigger(availableNow=True).start()
    print("STARTED", flush=True)
    query.awaitTermination()
    print("DONE", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
