"""Benchmark the PySpark connector (format "headwater") against Spark's own Kafka
connector (format "kafka") and a plain confluent-kafka client, in the same run, on the
same records and the same broker.

Workloads (a fresh headwater broker is started unless --bootstrap is given):

1. produce N x 100 B records (default 1,000,000) to a topic with 2 partitions, with a
   plain confluent-kafka producer (acks=all; its rate is printed for context)
2. baseline: a plain confluent-kafka consumer reads all N records, touching each
   record's key, value and timestamp (what the connector turns into columns), three
   times (the median counts); a count-only variant (the consumer does nothing with the
   records) is also printed
3. Spark streaming read: readStream.format("headwater") -> writeStream.format("noop"),
   Trigger.AvailableNow, local[2]; run cold (first query of the session: Python worker
   start-up included), twice to warm up the JVM, then three times warm (the ratio uses
   their median); the same with Spark's readStream.format("kafka") (spark-sql-kafka-0-10
   from .kafka/spark, `make kafka`), the two formats alternating in every phase
4. Spark streaming write: the same N records read by format("headwater") and written to
   a fresh topic with writeStream.format("headwater") and with format("kafka") (cold,
   then three warm runs each, alternating; at-least-once), then headwater exactlyOnce
5. with --share: the share-group source (format("headwater") with kafka.share.group.id,
   a fresh share group per run reading from the earliest record, micro-batches of
   --share-batch records) -> noop, alternating with the partitioned read in every phase
   of 3; its floor is 0.7x the partitioned read (median warm processed rows/s). The
   broker is started with group.share.max.partition.max.record.locks raised so a
   share-partition can lock a whole micro-batch.

Spark rows/s are given two ways: processed (N / the micro-batch's trigger time, Spark's
processedRowsPerSecond) and wall (N / start() .. end of awaitTermination(), query start-up
included). The ratio is the median warm processed rate / baseline consumer; the floor is
0.7. format("headwater") / format("kafka") (median warm processed rows/s) has the floor
1.0 for the read and for the write. --check exits 1 below any floor.

    python bench/spark_bench.py [--records N] [--bootstrap HOST:PORT] [--json out.json]
                                [--check] [--no-write] [--no-kafka] [--share]
                                [--share-batch N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from operator import itemgetter
from pathlib import Path
from typing import Any

from broker_bench import CONSUMER_THROUGHPUT_CONFIG, PRODUCER_THROUGHPUT_CONFIG, create_topic
from confluent_kafka import Consumer, Message, Producer, TopicPartition
from group_bench import start_broker

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SPARK_KAFKA_LIB = PROJECT_ROOT / ".kafka" / "spark"
PARTITIONS = 2
FLOOR = 0.7
# format("headwater") against Spark's own format("kafka") on the same broker, for the
# streaming read and the streaming writer: processed rows/s, warm, each >= this.
KAFKA_FLOOR = 1.0
# The share-group source against the partitioned one (same records, same run).
SHARE_FLOOR = 0.7
SHARE_BATCH = 1_000_000  # records per share micro-batch (whole backlog, as the partitioned read)
SHARE_LOCKS = 1_000_000
# The JVM keeps speeding up over the first queries of a session (JIT): after one cold
# run, two warm-up runs, then the measured ones, whose median the ratio uses: the steady
# state of a long-running stream.
WARM_UP_RUNS = ("warm-up", "warm-up2")
WARM_RUNS = ("warm", "warm2", "warm3")

# The same client settings as bench/broker_bench.py, so numbers compare.
PRODUCER_CONFIG = PRODUCER_THROUGHPUT_CONFIG
CONSUMER_CONFIG = CONSUMER_THROUGHPUT_CONFIG


def log(msg: str) -> None:
    print(f"[spark-bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def produce(bootstrap: str, topic: str, n: int) -> float:
    value = b"x" * 100
    p = Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONFIG})
    t0 = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.01)
        if i % 50_000 == 0:
            p.poll(0)
    left = p.flush(300)
    if left:
        raise RuntimeError(f"{left} records not delivered")
    return n / (time.perf_counter() - t0)


def consume(bootstrap: str, topic: str, n: int, touch: bool) -> float:
    """A plain consumer over every partition from offset 0 until n records."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{time.time_ns()}",
                  **CONSUMER_CONFIG})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got = 0
    ts = itemgetter(1)
    t0 = time.perf_counter()
    while got < n:
        msgs = c.consume(1000, 1.0)
        if touch:  # as cheaply as Python allows: C-level map() over the messages
            if any(map(Message.error, msgs)):
                raise RuntimeError(str(next(m.error() for m in msgs if m.error())))
            keys = list(map(Message.key, msgs))  # noqa: F841 - the work being measured
            values = list(map(Message.value, msgs))  # noqa: F841
            stamps = list(map(ts, map(Message.timestamp, msgs)))  # noqa: F841
        got += len(msgs)
        if time.perf_counter() - t0 > 600:
            raise RuntimeError(f"consumer stalled at {got} records")
    rate = got / (time.perf_counter() - t0)
    c.close()
    return rate


def _ceiling_source(n: int) -> type:
    """A source that costs nothing: it yields the same pre-built Kafka-shaped Arrow batch
    (7 columns, 100 B values) over and over. Reading it into ``noop`` measures what Spark
    itself costs per row on this machine: the ceiling for any Python source."""
    import numpy as np
    import pyarrow as pa
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

    from pyspark_headwater.schema import source_schema

    rows_per_batch = 16_384

    class Reader(DataSourceStreamReader, SupportsTriggerAvailableNow):
        def __init__(self, schema: Any) -> None:
            self.schema = schema

        def initialOffset(self) -> dict:
            return {"o": 0}

        def prepareForTriggerAvailableNow(self) -> None:
            pass

        def latestOffset(self, start: dict, limit: Any) -> dict:
            return {"o": n} if start["o"] < n else start

        def partitions(self, start: dict, end: dict) -> list:
            return [InputPartition(i) for i in range(PARTITIONS)]

        def read(self, partition: Any) -> Any:
            schema = to_arrow_schema(self.schema, timezone="UTC")
            k = rows_per_batch
            value = b"x" * 100
            cols = [pa.nulls(k, pa.binary()),
                    pa.array([value] * k, pa.binary()),
                    pa.array(["t"] * k, pa.string()),
                    pa.array(np.zeros(k, np.int32)),
                    pa.array(np.arange(k, dtype=np.int64)),
                    pa.array(np.full(k, 1_700_000_000_000_000, np.int64),
                             schema.field("timestamp").type),
                    pa.array(np.zeros(k, np.int32))]
            batch = pa.RecordBatch.from_arrays(cols, schema=schema)
            left = n // PARTITIONS
            while left > 0:
                yield batch if left >= k else batch.slice(0, left)
                left -= k

    class Ceiling(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_ceiling"

        def schema(self) -> Any:
            return source_schema(False)

        def streamReader(self, schema: Any) -> Any:
            return Reader(schema)

    return Ceiling


def spark_ceiling(spark: Any, n: int, ckpt: str) -> dict[str, float]:
    t0 = time.perf_counter()
    query = (spark.readStream.format("bench_ceiling").load().writeStream.format("noop")
             .option("checkpointLocation", ckpt).trigger(availableNow=True).start())
    return _run(query, n - n % PARTITIONS, t0)


def spark_kafka_jars() -> list[str]:
    """Spark's own Kafka connector and what it needs, as `make kafka` fetched them."""
    jars = sorted(str(p) for p in SPARK_KAFKA_LIB.glob("*.jar"))
    if not any("spark-sql-kafka" in j for j in jars):
        raise SystemExit(f"Spark's Kafka connector is missing in {SPARK_KAFKA_LIB}: run "
                         "`make kafka` (or pass --no-kafka)")
    return jars


def spark_session(jars: list[str] | None = None) -> Any:
    """local[2] with the UI off; `jars` (Spark's Kafka connector) on the classpath."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master("local[2]").appName("spark_bench")
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    spark = (builder
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _run(query: Any, n: int, t0: float) -> dict[str, float]:
    if not query.awaitTermination(1800):
        query.stop()
        raise RuntimeError("query did not finish within 30 minutes")
    wall = time.perf_counter() - t0
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    rows = sum(p["numInputRows"] for p in progress)
    if rows != n:
        raise RuntimeError(f"the query read {rows} rows, expected {n}")
    trig = sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000
    return {"rows": rows, "wall_s": wall, "rows_per_s": rows / wall,
            "trigger_rows_per_s": rows / trig if trig else 0.0, "batches": len(progress)}


def spark_read(spark: Any, bootstrap: str, topic: str, n: int, ckpt: str,
               max_per_trigger: int | None, fmt: str = "headwater",
               **options: str) -> dict[str, float]:
    """A streaming read of the topic into `noop` with source `fmt` ("headwater" or
    Spark's own "kafka": the same options, as the connector is a drop-in)."""
    reader = (spark.readStream.format(fmt).option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .options(**options))
    if max_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_per_trigger))
    t0 = time.perf_counter()
    query = (reader.load().writeStream.format("noop").option("checkpointLocation", ckpt)
             .trigger(availableNow=True).start())
    return _run(query, n, t0)


def spark_share_read(spark: Any, bootstrap: str, topic: str, n: int, ckpt: str,
                     group: str, batch: int) -> dict[str, float]:
    """The share-group source into `noop`: a fresh group, from the earliest record."""
    t0 = time.perf_counter()
    query = (spark.readStream.format("headwater").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).option("kafka.share.group.id", group)
             .option("share.auto.offset.reset", "earliest")
             .option("share.partition.max.record.locks", str(min(batch, SHARE_LOCKS)))
             .option("maxRecordsPerTrigger", str(batch)).load()
             .writeStream.format("noop").option("checkpointLocation", ckpt)
             .trigger(availableNow=True).start())
    return _run(query, n, t0)


def spark_write(spark: Any, bootstrap: str, topic: str, out: str, n: int, ckpt: str,
                exactly_once: bool, sink: str = "headwater") -> dict[str, float]:
    """The topic read with format("headwater") and written to `out` with sink `sink`:
    the same source for both sinks, so only the writer differs."""
    t0 = time.perf_counter()
    writer = (spark.readStream.format("headwater").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest").load()
              .select("key", "value").writeStream.format(sink)
              .option("kafka.bootstrap.servers", bootstrap).option("topic", out))
    if sink == "headwater":
        writer = writer.option("exactlyOnce", str(exactly_once).lower())
    query = writer.option("checkpointLocation", ckpt).trigger(availableNow=True).start()
    return _run(query, n, t0)


def median_run(runs: dict[str, dict[str, float]], keys: list[str]) -> dict[str, float]:
    """The run with the median processed rows/s among `keys` (the upper one of two)."""
    ranked = sorted((runs[k] for k in keys), key=itemgetter("trigger_rows_per_s"))
    return ranked[len(ranked) // 2]


def main() -> int:  # noqa: C901
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--bootstrap", help="use a running broker instead of starting one")
    ap.add_argument("--max-offsets-per-trigger", type=int, default=None,
                    help="micro-batch size of the read (default: the whole backlog)")
    ap.add_argument("--json", help="write the results here as JSON")
    ap.add_argument("--check", action="store_true",
                    help=f"exit 1 unless Spark read / plain consumer >= {FLOOR} and "
                         f"headwater / kafka >= {KAFKA_FLOOR} for the read and the write "
                         "(processed rows/s, warm)")
    ap.add_argument("--no-write", action="store_true", help="skip the writer workloads")
    ap.add_argument("--no-kafka", action="store_true",
                    help='skip Spark\'s format("kafka") (no .kafka/spark jars needed)')
    ap.add_argument("--share", action="store_true",
                    help="also run the share-group source beside the partitioned read")
    ap.add_argument("--share-batch", type=int, default=SHARE_BATCH,
                    help="maxRecordsPerTrigger of the share-group source")
    args = ap.parse_args()
    n = args.records
    formats = ["headwater"] if args.no_kafka else ["headwater", "kafka"]
    if args.share:
        formats.append("share")
    jars = [] if args.no_kafka else spark_kafka_jars()
    workdir = Path(tempfile.mkdtemp(prefix="spark-bench-"))
    broker = None
    if args.bootstrap:
        bootstrap = args.bootstrap
    else:
        # A fresh share group gets its first assignment share.assignment.interval.ms
        # (1 s) after its first member joins, as on Kafka; that wait would fall in the
        # first trigger of every share run, so the bench measures reading without it.
        overrides = [f"group.share.max.partition.max.record.locks={SHARE_LOCKS}",
                     "group.share.assignment.interval.ms=0"] if args.share else []
        broker = start_broker(workdir, overrides, 60)
        bootstrap = broker.bootstrap
    r: dict[str, Any] = {"records": n, "record_bytes": 100, "partitions": PARTITIONS,
                         "spark_kafka_jars": [Path(j).name for j in jars]}
    try:
        topic = create_topic(bootstrap, "spark", PARTITIONS)
        log(f"producing {n} x 100 B to {topic} ...")
        r["produce_rows_per_s"] = produce(bootstrap, topic, n)
        log("baseline consumer ...")
        # The median of three, like the Spark read's rate: both sides are noisy here.
        baseline = sorted(consume(bootstrap, topic, n, touch=True) for _ in range(3))
        r["consumer_rows_per_s"] = baseline[1]
        r["consumer_runs_rows_per_s"] = baseline
        r["consumer_count_only_rows_per_s"] = consume(bootstrap, topic, n, touch=False)
        log("starting Spark (local[2]) ...")
        t0 = time.perf_counter()
        spark = spark_session(jars)
        r["spark_session_start_s"] = time.perf_counter() - t0
        r["spark_version"] = spark.version
        runs: dict[str, dict[str, float]] = {}
        # The formats alternate within every phase, so both see the same JIT state.
        for name in ("cold", *WARM_UP_RUNS, *WARM_RUNS):
            for fmt in formats:
                log(f"Spark streaming read format({fmt!r}) -> noop ({name}) ...")
                ckpt = str(workdir / f"ck-read-{fmt}-{name}")
                if fmt == "share":
                    runs[f"read {fmt} {name}"] = spark_share_read(
                        spark, bootstrap, topic, n, ckpt, f"bench-{name}", args.share_batch)
                    continue
                runs[f"read {fmt} {name}"] = spark_read(
                    spark, bootstrap, topic, n, ckpt, args.max_offsets_per_trigger, fmt)
        spark.dataSource.register(_ceiling_source(n))
        for name in ("cold", "warm"):
            log(f"Spark engine ceiling: pre-built Arrow -> noop ({name}) ...")
            runs[f"ceiling - {name}"] = spark_ceiling(spark, n, str(workdir / f"ck-c-{name}"))
        if not args.no_write:
            plan = [(fmt, phase, False) for phase in ("cold", *WARM_RUNS) for fmt in formats]
            plan.append(("headwater", "exactlyOnce", True))
            for fmt, phase, eos in plan:
                out = create_topic(bootstrap, f"write-{fmt}-{phase}", PARTITIONS)
                log(f"Spark streaming read -> format({fmt!r}) sink ({phase}) ...")
                runs[f"write {fmt} {phase}"] = spark_write(
                    spark, bootstrap, topic, out, n, str(workdir / f"ck-w-{fmt}-{phase}"),
                    eos, fmt)
        spark.stop()
    finally:
        if broker is not None:
            broker.stop()
    r["runs"] = runs
    median = median_run(runs, [f"read headwater {name}" for name in WARM_RUNS])
    best = max((runs[f"read headwater {name}"] for name in WARM_RUNS),
               key=itemgetter("trigger_rows_per_s"))
    r["read_processed_rows_per_s"] = median["trigger_rows_per_s"]
    r["read_processed_best_rows_per_s"] = best["trigger_rows_per_s"]
    r["read_wall_rows_per_s"] = median["rows_per_s"]
    r["ratio"] = median["trigger_rows_per_s"] / r["consumer_rows_per_s"]
    r["ratio_best"] = best["trigger_rows_per_s"] / r["consumer_rows_per_s"]
    r["ratio_wall"] = median["rows_per_s"] / r["consumer_rows_per_s"]
    r["ratio_vs_count_only"] = (median["trigger_rows_per_s"]
                                / r["consumer_count_only_rows_per_s"])
    if "kafka" in formats:
        for kind in ("read",) + (() if args.no_write else ("write",)):
            hw = median_run(runs, [f"{kind} headwater {name}" for name in WARM_RUNS])
            kf = median_run(runs, [f"{kind} kafka {name}" for name in WARM_RUNS])
            r[f"{kind}_vs_kafka"] = {
                "headwater_rows_per_s": hw["trigger_rows_per_s"],
                "kafka_rows_per_s": kf["trigger_rows_per_s"],
                "ratio": hw["trigger_rows_per_s"] / kf["trigger_rows_per_s"],
                "headwater_wall_rows_per_s": hw["rows_per_s"],
                "kafka_wall_rows_per_s": kf["rows_per_s"],
                "ratio_wall": hw["rows_per_s"] / kf["rows_per_s"],
            }
    if args.share:
        hw = median_run(runs, [f"read headwater {name}" for name in WARM_RUNS])
        sh = median_run(runs, [f"read share {name}" for name in WARM_RUNS])
        r["share_vs_partitioned"] = {
            "share_rows_per_s": sh["trigger_rows_per_s"],
            "partitioned_rows_per_s": hw["trigger_rows_per_s"],
            "ratio": sh["trigger_rows_per_s"] / hw["trigger_rows_per_s"],
            "ratio_wall": sh["rows_per_s"] / hw["rows_per_s"],
            "share_batch": args.share_batch,
        }
    r["env"] = {"python": platform.python_version(), "cpus": os.cpu_count(),
                "machine": platform.machine()}
    print_table(r)
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=2))
    failed = []
    if r["ratio"] < FLOOR:
        failed.append(f"read / plain consumer {r['ratio']:.2f} < {FLOOR}")
    for kind in ("read", "write"):
        vs = r.get(f"{kind}_vs_kafka")
        if vs is not None and vs["ratio"] < KAFKA_FLOOR:
            failed.append(f"{kind} headwater / kafka {vs['ratio']:.2f} < {KAFKA_FLOOR}")
    share = r.get("share_vs_partitioned")
    if share is not None and share["ratio"] < SHARE_FLOOR:
        failed.append(f"share / partitioned read {share['ratio']:.2f} < {SHARE_FLOOR}")
    if args.check and failed:
        log("FAIL: " + "; ".join(failed))
        return 1
    return 0


def print_table(r: dict[str, Any]) -> None:
    def k(x: float) -> str:
        return f"{x / 1000:>7,.0f} k"

    lines = [
        f"{r['records']:,} records x 100 B, {r['partitions']} partitions, Spark "
        f"{r.get('spark_version', '?')} local[2], {r['env']['cpus']} CPUs; format(\"kafka\"): "
        f"{', '.join(r['spark_kafka_jars']) or 'not run'}",
        "",
        f"{'workload':56} {'rows/s':>9}",
        f"{'plain producer (acks=all)':56} {k(r['produce_rows_per_s'])}",
        f"{'plain consumer, key/value/timestamp read':56} {k(r['consumer_rows_per_s'])}",
        f"{'plain consumer, count only':56} {k(r['consumer_count_only_rows_per_s'])}",
        "",
        f"{'Spark query':56} {'processed':>9} {'wall':>9} {'batches':>8} {'seconds':>8}",
    ]
    labels = {
        "read": "format({}) -> noop",
        "share": "share group -> noop",
        "ceiling": "pre-built Arrow -> noop (engine ceiling)",
        "write": "format(headwater) -> format({}) sink",
    }
    for name, x in r["runs"].items():
        kind, fmt, phase = name.split(" ", 2)
        template = labels["share"] if fmt == "share" else labels[kind]
        label = f"{template.format(fmt)}, {phase}"
        lines.append(f"{label:56} {k(x['trigger_rows_per_s'])} {k(x['rows_per_s'])} "
                     f"{x['batches']:>8} {x['wall_s']:>8.2f}")
    lines += [
        "",
        f"ratio Spark read / plain consumer (median of the {len(WARM_RUNS)} warm runs): "
        f"{r['ratio']:.2f} processed (best run {r['ratio_best']:.2f}), "
        f"{r['ratio_wall']:.2f} wall (floor {FLOOR}); vs count-only consumer "
        f"{r['ratio_vs_count_only']:.2f}",
    ]
    for kind in ("read", "write"):
        vs = r.get(f"{kind}_vs_kafka")
        if vs is None:
            continue
        verdict = "PASS" if vs["ratio"] >= KAFKA_FLOOR else "FAIL"
        lines.append(
            f"{kind}: format(\"headwater\") / format(\"kafka\") (median of the warm runs): "
            f"{vs['ratio']:.2f}x processed ({k(vs['headwater_rows_per_s']).strip()} vs "
            f"{k(vs['kafka_rows_per_s']).strip()}), {vs['ratio_wall']:.2f}x wall; "
            f"floor >= {KAFKA_FLOOR}: {verdict}")
    share = r.get("share_vs_partitioned")
    if share is not None:
        verdict = "PASS" if share["ratio"] >= SHARE_FLOOR else "FAIL"
        lines.append(
            f"share-group source / partitioned source (median of the warm runs, "
            f"maxRecordsPerTrigger {share['share_batch']:,}): {share['ratio']:.2f}x processed "
            f"({k(share['share_rows_per_s']).strip()} vs "
            f"{k(share['partitioned_rows_per_s']).strip()}), {share['ratio_wall']:.2f}x wall; "
            f"floor >= {SHARE_FLOOR}: {verdict}")
    lines.append("processed = rows / sum of trigger times (Spark's processedRowsPerSecond); "
                 "wall = rows / (start() .. end of awaitTermination())")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
