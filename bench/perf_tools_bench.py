"""Kafka's own perf tools (a JVM client) against headwater and Apache Kafka 4.4.0.

bench/broker_bench.py drives every broker with librdkafka from a Python loop, which tops
out near 1M msgs/s of 100 B records on 2 cores. Kafka's `kafka-producer-perf-test`
(ProducerPerformance) and `kafka-consumer-perf-test` (ConsumerPerformance) are Java
clients with no Python in the loop, and they are what Kafka users benchmark with.

Workloads per broker and round (each round on a freshly started broker, brokers rotating,
after the same untimed warm-up traffic as broker_bench):

1. kafka-producer-perf-test: 1,000,000 x 100 B, --throughput -1, 3 partitions
2. kafka-producer-perf-test: 200,000 x 1 KiB
3. kafka-consumer-perf-test: the 1,000,000 records of workload 1, one consumer in a
   classic group (the tool's default; both brokers with group.initial.rebalance.delay.ms=0)

The producer client's settings are Kafka 4.3's defaults (acks=all, idempotent,
linger.ms=5, batch.size=16384); the tool JVMs get kafka-run-class's default options and
the perf scripts' 512 MB heap. The tools' summary lines are parsed into the table; the
broker's CPU seconds (/proc/<pid>/stat) are taken around each tool run (the tool's ~1 s
JVM start-up included, when the broker is idle).

    python bench/perf_tools_bench.py [--brokers headwater,kafka] [--quick] [--rounds N]
                                     [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker_bench import (
    GB,
    KAFKA_HEAP,
    PROJECT_ROOT,
    THROUGHPUT_PARTITIONS,
    Broker,
    KafkaBroker,
    create_topic,
    describe_error,
    log,
    make_broker,
    run_consume,
    run_produce,
)

sys.path.insert(0, str(PROJECT_ROOT))
from tests.support.kafka_reference import (  # noqa: E402
    TOOLS,
    _tools_log4j,
    java,
    kafka_classpath,
)

BROKERS = ("headwater", "kafka", "tansu")
# kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS and the perf scripts' KAFKA_HEAP_OPTS:
# a tool JVM as `bin/kafka-producer-perf-test.sh` would start it (full JIT, G1).
PERF_JVM_OPTS = [
    "-Xmx512M",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-Djava.awt.headless=true",
]
# headwater's default is Kafka's 3,000 ms; KafkaReference sets 0 (Kafka's single-node
# recommendation). The consumer tool joins a group, so both brokers get the same value.
HEADWATER_OVERRIDES = ["group.initial.rebalance.delay.ms=0"]

# "1000000 records sent, 523012.5 records/sec (49.88 MB/sec), 12.34 ms avg latency,
#  456.00 ms max latency, 3 ms 50th, 40 ms 95th, 60 ms 99th, 70 ms 99.9th."
_PRODUCER_SUMMARY = re.compile(
    r"(?P<records>\d+) records sent, (?P<records_per_s>[\d.]+) records/sec "
    r"\((?P<mib_per_s>[\d.]+) MB/sec\), (?P<avg_ms>[\d.]+) ms avg latency, "
    r"(?P<max_ms>[\d.]+) ms max latency, (?P<p50_ms>\d+) ms 50th, (?P<p95_ms>\d+) ms 95th, "
    r"(?P<p99_ms>\d+) ms 99th, (?P<p999_ms>\d+) ms 99.9th"
)


def tool_command(main_class: str, *args: str) -> list[str]:
    """A perf tool's java command line, as Kafka's bin/ script would run it."""
    return [java(), *PERF_JVM_OPTS, f"-Dlog4j2.configurationFile={_tools_log4j()}",
            "-cp", kafka_classpath(), TOOLS.get(main_class, main_class), *args]


def run_tool(broker: Broker, main_class: str, *args: str, timeout: float) -> tuple[str, dict]:
    """Run a tool to completion; its stdout and the broker's CPU seconds around it."""
    cpu0 = broker.cpu_seconds()
    proc = subprocess.run(tool_command(main_class, *args), capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL, check=False)
    cpu1 = broker.cpu_seconds()
    if proc.returncode != 0:
        raise RuntimeError(f"{main_class} exited {proc.returncode}: "
                           f"{(proc.stdout + proc.stderr).strip()[-600:]}")
    cpu = {} if cpu0 is None or cpu1 is None else {"broker_cpu_s": cpu1 - cpu0}
    return proc.stdout, cpu


def producer_perf(broker: Broker, topic: str, count: int, size: int, timeout: float) -> dict:
    out, cpu = run_tool(broker, "kafka-producer-perf-test", "--bootstrap-server",
                        broker.bootstrap, "--topic", topic, "--num-records", str(count),
                        "--record-size", str(size), "--throughput", "-1", timeout=timeout)
    matches = list(_PRODUCER_SUMMARY.finditer(out))
    if not matches:
        raise RuntimeError(f"no summary line in the tool's output: {out.strip()[-400:]}")
    m = matches[-1].groupdict()  # the last line is the whole run's summary
    result: dict[str, Any] = {k: float(v) for k, v in m.items()}
    result["records"] = int(m["records"])
    if result["records"] != count:
        raise RuntimeError(f"{result['records']}/{count} records sent")
    result["record_bytes"] = size
    result["mb_per_s"] = result["records_per_s"] * size / 1e6
    if cpu:
        result.update(cpu, cpu_s_per_gb=cpu["broker_cpu_s"] / (count * size / GB))
    return result


def consumer_perf(broker: Broker, topic: str, count: int, size: int, timeout: float) -> dict:
    out, cpu = run_tool(broker, "kafka-consumer-perf-test", "--bootstrap-server",
                        broker.bootstrap, "--topic", topic, "--num-records", str(count),
                        "--timeout", "30000", timeout=timeout)
    lines = [ln for ln in out.splitlines() if ln.strip()]
    header = next((i for i, ln in enumerate(lines) if ln.startswith("start.time")), None)
    if header is None or header + 1 >= len(lines):
        raise RuntimeError(f"no summary in the tool's output: {out.strip()[-400:]}")
    names = [x.strip() for x in lines[header].split(",")]
    values = [x.strip() for x in lines[header + 1].split(",")]
    row = dict(zip(names, values, strict=True))
    consumed = int(row["data.consumed.in.nMsg"])
    if consumed < count:
        raise RuntimeError(f"consumed {consumed}/{count} records")
    result: dict[str, Any] = {
        "records": consumed,
        "record_bytes": size,
        # fetch.*: from the first record to the last, the group join excluded
        "records_per_s": float(row["fetch.nMsg.sec"]),
        "mib_per_s": float(row["fetch.MB.sec"]),
        "mb_per_s": float(row["fetch.nMsg.sec"]) * size / 1e6,
        "total_records_per_s": float(row["nMsg.sec"]),
        "rebalance_ms": float(row["rebalance.time.ms"]),
        "fetch_ms": float(row["fetch.time.ms"]),
    }
    if cpu:
        result.update(cpu, cpu_s_per_gb=cpu["broker_cpu_s"] / (consumed * size / GB))
    return result


@dataclass
class Plan:
    small_count: int
    large_count: int
    warmup_count: int
    timeout: float
    small_size: int = 100
    large_size: int = 1024


def bench_broker(broker: Broker, plan: Plan) -> dict[str, dict]:
    """The three tool workloads against one started broker; errors go into the cells."""
    out: dict[str, dict] = {}
    bs, p = broker.bootstrap, THROUGHPUT_PARTITIONS
    small: dict[str, str] = {}

    def attempt(key: str, label: str, fn: Any) -> None:
        try:
            broker.check_alive()
            log(f"{broker.name}: {label} ...")
            out[key] = fn()
            log(f"{broker.name}: {label}: " + ", ".join(
                f"{k}={v:,.2f}" for k, v in out[key].items() if isinstance(v, float)))
        except Exception as exc:
            out[key] = {"error": describe_error(exc)}
            log(f"{broker.name}: {label} FAILED: {out[key]['error']}")

    def warmup() -> dict:
        topic = create_topic(bs, "warmup", p)
        run_produce(bs, topic, plan.warmup_count, plan.small_size, plan.timeout)
        run_consume(bs, topic, p, plan.warmup_count, plan.small_size, 30.0)
        return {"records": plan.warmup_count}

    def produce_small() -> dict:
        small["topic"] = create_topic(bs, "perf100", p)
        return producer_perf(broker, small["topic"], plan.small_count, plan.small_size,
                             plan.timeout)

    def produce_large() -> dict:
        topic = create_topic(bs, "perf1k", p)
        return producer_perf(broker, topic, plan.large_count, plan.large_size, plan.timeout)

    def consume_small() -> dict:
        if "error" in out.get("produce_small", {"error": ""}):
            raise RuntimeError("skipped: the produce 100 B workload failed")
        return consumer_perf(broker, small["topic"], plan.small_count, plan.small_size,
                             plan.timeout)

    if plan.warmup_count:
        attempt("warmup", f"warm-up (librdkafka): {plan.warmup_count:,} x 100 B", warmup)
    attempt("produce_small", f"producer-perf-test {plan.small_count:,} x 100 B", produce_small)
    attempt("produce_large", f"producer-perf-test {plan.large_count:,} x 1 KiB", produce_large)
    attempt("consume_small", f"consumer-perf-test {plan.small_count:,} x 100 B", consume_small)
    return out


WORKLOADS = ("produce_small", "produce_large", "consume_small")


def median_of_rounds(rounds: list[dict[str, dict]]) -> dict[str, dict]:
    """Per workload the round with the median records/s (errors lowest); CPU s/GB is the
    median over the rounds on its own."""
    merged: dict[str, dict] = {}
    for key in WORKLOADS:
        runs = [r[key] for r in rounds if key in r]
        if not runs:
            continue
        ranked = sorted(runs, key=lambda r: r.get("records_per_s", -1.0))
        chosen = dict(ranked[(len(ranked) - 1) // 2])
        chosen["rounds_records_per_s"] = [r.get("records_per_s") for r in runs]
        cpus = sorted(r["cpu_s_per_gb"] for r in runs if "cpu_s_per_gb" in r)
        if cpus:
            chosen["cpu_s_per_gb"] = cpus[(len(cpus) - 1) // 2]
        merged[key] = chosen
    return merged


# (workload, field, label, unit, floor on headwater / kafka or None)
ROWS: list[tuple[str, str, str, str, tuple[str, float] | None]] = [
    ("produce_small", "records_per_s", "producer-perf-test {small} x 100 B", "msgs/s",
     (">=", 1.0)),
    ("produce_small", "mb_per_s", "", "MB/s", None),
    ("produce_small", "avg_ms", "", "avg ms", None),
    ("produce_small", "p99_ms", "", "p99 ms", None),
    ("produce_small", "cpu_s_per_gb", "", "CPU s/GB", None),
    ("produce_large", "records_per_s", "producer-perf-test {large} x 1 KiB", "msgs/s",
     (">=", 1.0)),
    ("produce_large", "mb_per_s", "", "MB/s", None),
    ("produce_large", "avg_ms", "", "avg ms", None),
    ("produce_large", "p99_ms", "", "p99 ms", None),
    ("produce_large", "cpu_s_per_gb", "", "CPU s/GB", None),
    ("consume_small", "records_per_s", "consumer-perf-test {small} x 100 B", "msgs/s",
     (">=", 1.0)),
    ("consume_small", "mb_per_s", "", "MB/s", None),
    ("consume_small", "total_records_per_s", "", "msgs/s incl. join", None),
    ("consume_small", "rebalance_ms", "", "join ms", None),
    ("consume_small", "cpu_s_per_gb", "", "CPU s/GB", None),
]


def build_table(results: dict[str, dict], plan: Plan, brokers: tuple[str, ...]) -> list[dict]:
    table = []
    label = ""
    for workload, fld, lab, unit, floor in ROWS:
        label = lab.format(small=f"{plan.small_count:,}", large=f"{plan.large_count:,}") or label
        cells: dict[str, Any] = {"metric": label, "unit": unit}
        for b in brokers:
            r = results.get(b, {})
            entry = r.get(workload, {"error": r.get("startup_error", "not run")})
            cells[b] = entry["error"] if "error" in entry else entry.get(fld)
        hw, kf = cells.get("headwater"), cells.get("kafka")
        cells["ratio_kafka"] = (hw / kf if isinstance(hw, float) and isinstance(kf, float)
                                and kf else None)
        if floor is not None and "kafka" in brokers and "headwater" in brokers:
            op, bound = floor
            r_ = cells["ratio_kafka"]
            cells["floor"] = {"anchor": "kafka", "op": op, "bound": bound,
                              "pass": None if r_ is None else r_ >= bound}
        table.append(cells)
    return table


def print_table(table: list[dict], header: list[str], brokers: tuple[str, ...]) -> None:
    def cell(v: Any, unit: str) -> str:
        if v is None:
            return "-"
        if isinstance(v, str):
            return "ERR " + (v if len(v) <= 36 else v[:33] + "...")
        return f"{v:,.0f}" if unit.startswith("msgs/s") else f"{v:,.2f}"

    ratio = "headwater" in brokers and "kafka" in brokers
    titles = ["metric", "unit", *brokers, *(["hw/kafka", "floor"] if ratio else [])]
    lines = []
    prev = None
    for r in table:
        parts = ["" if r["metric"] == prev else r["metric"], r["unit"],
                 *(cell(r[b], r["unit"]) for b in brokers)]
        prev = r["metric"]
        if ratio:
            parts.append("-" if r["ratio_kafka"] is None else f"{r['ratio_kafka']:.3g}x")
            f = r.get("floor")
            parts.append("" if f is None else
                         f"{f['op']} {f['bound']:g} "
                         + {True: "PASS", False: "FAIL", None: "n/a"}[f["pass"]])
        lines.append(parts)
    widths = [max(len(x[i]) for x in [titles, *lines]) for i in range(len(titles))]
    align = ["<", "<", *(">" for _ in titles[2:-1]), "<"] if ratio else \
        ["<", "<", *(">" for _ in brokers)]
    print()
    print("\n".join(header))
    print()
    for parts in [titles, ["-" * w for w in widths], *lines]:
        print("  ".join(f"{p:{a}{w}}" for p, a, w in zip(parts, align, widths, strict=True))
              .rstrip())
    errors = sorted({f"{b}: {r[b]}" for r in table for b in brokers if isinstance(r[b], str)})
    if errors:
        print("\nerrors:")
        print("\n".join(f"  {e}" for e in errors))
    print()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--brokers", default="headwater,kafka",
                    help=f"comma-separated subset of {','.join(BROKERS)} (default: "
                         "headwater,kafka)")
    ap.add_argument("--quick", action="store_true", help="10x fewer records: a smoke run")
    ap.add_argument("--rounds", type=int, default=3, help="rounds per broker (default 3)")
    ap.add_argument("--kafka-heap", default=KAFKA_HEAP)
    ap.add_argument("--no-warmup", action="store_true")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per tool run")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON here")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 unless every floor against Kafka was measured and met")
    args = ap.parse_args(argv)
    names = [b.strip() for b in args.brokers.split(",") if b.strip()]
    if not names or set(names) - set(BROKERS) or args.rounds < 1:
        ap.error(f"--brokers: choose from {','.join(BROKERS)}; --rounds >= 1")
    brokers = tuple(b for b in BROKERS if b in names)
    scale = 10 if args.quick else 1
    plan = Plan(small_count=1_000_000 // scale, large_count=200_000 // scale,
                warmup_count=0 if args.no_warmup else 100_000 // scale, timeout=args.timeout)
    rounds: dict[str, list[dict]] = {b: [] for b in brokers}
    versions: dict[str, str] = {}
    for round_no in range(args.rounds):
        k = round_no % len(brokers)
        for name in brokers[k:] + brokers[:k]:
            if any("startup_error" in r for r in rounds[name]):
                continue
            log(f"round {round_no + 1}/{args.rounds}: {name}")
            workdir = Path(tempfile.mkdtemp(prefix=f"perf-{name}-"))
            broker = None
            try:
                broker = make_broker(name, None, workdir)
                if isinstance(broker, KafkaBroker):
                    broker.heap = args.kafka_heap
                elif name == "headwater" and broker.cmd is not None:
                    for item in HEADWATER_OVERRIDES:
                        broker.cmd += ["--override", item]
                versions[name] = broker.version
                broker.start(timeout=120.0)
                rounds[name].append(bench_broker(broker, plan))
            except Exception as exc:
                log(f"{name}: could not start: {describe_error(exc)}")
                rounds[name].append({"startup_error": describe_error(exc)})
            finally:
                if broker is not None:
                    broker.stop()
                shutil.rmtree(workdir, ignore_errors=True)
    results = {}
    for name, runs in rounds.items():
        failed = [r for r in runs if "startup_error" in r]
        results[name] = failed[0] if failed else median_of_rounds(runs)
    table = build_table(results, plan, brokers)
    header = [
        f"Kafka's perf tools (Java kafka-clients 4.4.0) against {', '.join(brokers)}, "
        f"{os.cpu_count()} CPUs" + (" [--quick]" if args.quick else ""),
        "brokers: " + ", ".join(f"{n} {versions.get(n, '?')}" for n in brokers)
        + f"; {THROUGHPUT_PARTITIONS} partitions; producer: Kafka 4.3 client defaults "
        "(acks=all, idempotent, linger.ms=5, batch.size=16384), --throughput -1",
        "consumer msgs/s and MB/s: the tool's fetch.* figures (first to last record, group "
        "join excluded); 'incl. join': its nMsg.sec; MB = 10^6 B of record values",
        f"median of {args.rounds} rounds (brokers rotate, each on a freshly started broker); "
        "CPU s/GB: the broker's utime+stime around each tool run per GB",
    ]
    print_table(table, header, brokers)
    if args.json:
        Path(args.json).write_text(json.dumps({
            "quick": args.quick, "plan": plan.__dict__, "versions": versions,
            "jvm_opts": PERF_JVM_OPTS, "headwater_overrides": HEADWATER_OVERRIDES,
            "host": {"cpus": os.cpu_count(), "python": platform.python_version(),
                     "machine": platform.machine()},
            "rounds": rounds, "results": results, "table": table}, indent=2) + "\n")
        log(f"wrote {args.json}")
    if args.check:
        floors = [r["floor"] for r in table if "floor" in r]
        return 0 if floors and all(f["pass"] is True for f in floors) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
