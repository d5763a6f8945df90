"""Benchmark headwater against Tansu with confluent-kafka (librdkafka).

Workloads, run against each broker in turn (never concurrently), each on a fresh topic:

1. produce 1,000,000 x 100 B records, acks=all  (msgs/s, MB/s)
2. produce 200,000 x 1 KiB records, acks=all    (msgs/s, MB/s)
3. consume the 1,000,000 records of workload 1   (msgs/s, MB/s)
4. end-to-end latency at a fixed 2,000 msg/s     (p50, p99, max in ms)

and a table with the ratio headwater/Tansu per metric is printed. The throughput workloads
run in several rounds (default 5), the brokers alternating and each round on a freshly
started broker; the table shows each workload's median round. See bench/README.md.

    python bench/broker_bench.py [--brokers headwater,tansu] [--quick] [--rounds N]
                                 [--json out.json] [--headwater-bootstrap HOST:PORT]
                                 [--tansu-bootstrap HOST:PORT]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import confluent_kafka
import tansu
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

HOST = "127.0.0.1"
BENCH_DIR = Path(__file__).resolve().parent
PROJECT_ROOT = BENCH_DIR.parent
BROKERS = ("headwater", "tansu")
MB = 1_000_000  # MB/s counts record values only, in decimal megabytes

# Partition counts: identical for both brokers.
THROUGHPUT_PARTITIONS = 3
LATENCY_PARTITIONS = 1

# Producer settings for the throughput workloads (same for both brokers). The whole
# data set fits in librdkafka's queue so produce() never blocks on BufferError and the
# run measures the broker, not the client's queue limits.
PRODUCER_THROUGHPUT_CONFIG: dict[str, Any] = {
    "acks": "all",
    "enable.idempotence": False,
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "batch.num.messages": 10_000,
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "compression.type": "none",
}
# librdkafka stops fetching once its local queue holds queued.min.messages (default
# 100,000) and then backs off fetch.queue.backoff.ms (default 1,000 ms): with the defaults
# a Python consumer that drains slower than the broker serves spends most of the run in
# that client-side backoff. Let the client prefetch the whole data set instead.
CONSUMER_THROUGHPUT_CONFIG: dict[str, Any] = {
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "enable.partition.eof": False,
    "queued.min.messages": 2_000_000,
    "queued.max.messages.kbytes": 1_048_576,
    "fetch.queue.backoff.ms": 10,
}
# End-to-end latency: one record per produce request, and the consumer's long poll may
# wait up to 500 ms; a broker that answers a long poll as soon as data is appended keeps
# the latency far below that.
LATENCY_RATE = 2_000  # msg/s
LATENCY_RECORD_SIZE = 100
PRODUCER_LATENCY_CONFIG: dict[str, Any] = {
    "acks": "all",
    "enable.idempotence": False,
    "linger.ms": 0,
}
CONSUMER_LATENCY_CONFIG: dict[str, Any] = {
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "fetch.wait.max.ms": 500,
    "fetch.min.bytes": 1,
}
_LATENCY_HEADER = struct.Struct("<qq")  # sequence number (-1 = warm-up), send time (ns)


def client_version() -> str:
    v = confluent_kafka.version()  # a str in 2.16, documented as (str, int) before
    return v[0] if isinstance(v, tuple) else str(v)


def describe_error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else repr(exc)


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- brokers


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def wait_ready(bootstrap: str, deadline: float, proc: subprocess.Popen | None = None) -> None:
    """Poll until `bootstrap` accepts TCP connections and answers a metadata request."""
    host, _, port = bootstrap.rpartition(":")
    last_error = "no attempt"
    while True:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"broker exited with code {proc.returncode}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"broker at {bootstrap} not ready: {last_error}")
        try:
            with socket.create_connection((host, int(port)), timeout=1.0):
                pass
        except OSError as exc:
            last_error = f"connect: {exc}"
            time.sleep(0.05)
            continue
        admin = AdminClient({"bootstrap.servers": bootstrap})
        try:
            admin.list_topics(timeout=min(5.0, max(0.5, deadline - time.monotonic())))
            return
        except KafkaException as exc:
            last_error = f"metadata: {exc}"
            time.sleep(0.1)


@dataclass
class Broker:
    """A broker under test: either started here (cmd set) or external (bootstrap only)."""

    name: str
    bootstrap: str
    cmd: list[str] | None = None
    env: dict[str, str] | None = None
    workdir: Path | None = None
    version: str = ""
    proc: subprocess.Popen | None = field(default=None, repr=False)
    _log_file: Any = field(default=None, repr=False)

    @property
    def log_path(self) -> Path | None:
        return self.workdir / "broker.log" if self.workdir else None

    def start(self, timeout: float) -> None:
        if self.cmd is None:
            log(f"{self.name}: using external broker at {self.bootstrap}")
            wait_ready(self.bootstrap, time.monotonic() + timeout)
            return
        assert self.workdir is not None and self.log_path is not None
        log(f"{self.name}: starting {' '.join(self.cmd)}")
        self._log_file = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            self.cmd,
            cwd=self.workdir,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        t0 = time.monotonic()
        try:
            wait_ready(self.bootstrap, t0 + timeout, self.proc)
        except Exception as exc:
            raise RuntimeError(f"{exc}; log tail: {self.log_tail()}") from None
        log(f"{self.name}: ready at {self.bootstrap} after {time.monotonic() - t0:.2f} s")

    def check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(
                f"broker exited with code {self.proc.returncode}; log tail: {self.log_tail()}"
            )

    def log_tail(self, lines: int = 5) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        text = self.log_path.read_text(errors="replace").strip().splitlines()
        return " | ".join(text[-lines:]) or "(empty log)"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            # The broker runs in its own session (process group == its pid).
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=15)
            except ProcessLookupError:
                pass
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None


def make_broker(name: str, external: str | None, workdir: Path) -> Broker:
    if external:
        return Broker(name=name, bootstrap=external, version="external")
    port = free_port()
    bootstrap = f"{HOST}:{port}"
    if name == "headwater":
        data_dir = workdir / "data"
        data_dir.mkdir()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH", "")) if p
        )
        cmd = [
            sys.executable,
            "-m",
            "headwater.cli",
            "serve",
            "--listen",
            bootstrap,
            "--data-dir",
            str(data_dir),
        ]
        return Broker(name, bootstrap, cmd, env, workdir, version=headwater_version())
    if name == "tansu":
        binary = tansu.find_binary()
        version = tansu.describe(binary)
        return Broker(name, bootstrap, tansu.command(binary, HOST, port), None, workdir, version)
    raise ValueError(f"unknown broker {name!r}")


def headwater_version() -> str:
    try:
        out = subprocess.run(
            [sys.executable, "-c", "import headwater; print(headwater.__version__)"],
            capture_output=True,
            text=True,
            timeout=30,
            cwd=PROJECT_ROOT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.stdout.strip() or "unknown"


# --------------------------------------------------------------------------- helpers


def create_topic(bootstrap: str, prefix: str, partitions: int, timeout: float = 30.0) -> str:
    """Create a fresh topic and wait until metadata shows a leader for every partition."""
    topic = f"bench-{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
        operation_timeout=timeout,
        request_timeout=timeout,
    )
    try:
        futures[topic].result(timeout=timeout)
    except TimeoutError:
        raise TimeoutError(f"CreateTopics {topic}: no answer within {timeout:.0f} s") from None
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(topic=topic, timeout=5)
        tmd = md.topics.get(topic)
        if (
            tmd is not None
            and tmd.error is None
            and len(tmd.partitions) == partitions
            and all(p.leader >= 0 and p.error is None for p in tmd.partitions.values())
        ):
            return topic
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {topic} has no leaders after {timeout} s: {tmd}")
        time.sleep(0.05)


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list (q in 0..100)."""
    if not sorted_values:
        raise ValueError("no values")
    rank = max(1, -(-len(sorted_values) * q // 100))  # ceil(n * q / 100)
    return sorted_values[int(rank) - 1]


# --------------------------------------------------------------------------- workloads


def run_produce(
    bootstrap: str, topic: str, count: int, size: int, timeout: float, check=lambda: None
) -> dict:
    """Produce `count` records of `size` bytes; time from first produce() to flush() done.

    `check()` is called about once a second while flushing (raises if the broker died).
    """
    errors: list[str] = []

    def on_delivery(err, _msg) -> None:  # only called for failures (see config)
        if err is not None:
            errors.append(str(err))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            **PRODUCER_THROUGHPUT_CONFIG,
            "message.timeout.ms": int(timeout * 1000),
            "delivery.report.only.error": True,
            "on_delivery": on_delivery,
        }
    )
    # Connect and cache the topic's metadata before the clock starts.
    producer.list_topics(topic=topic, timeout=10)
    value = os.urandom(size)
    produce = producer.produce
    remaining = count
    try:
        t0 = time.perf_counter()
        for _ in range(count):
            while True:
                try:
                    produce(topic, value)
                    break
                except BufferError:  # queue full: should not happen with the config above
                    producer.poll(0.01)
        deadline = t0 + timeout
        while (remaining := producer.flush(1.0)) and time.perf_counter() < deadline:
            check()
        elapsed = time.perf_counter() - t0
    finally:
        if remaining:
            producer.purge()
            producer.flush(0)
    if remaining:
        raise TimeoutError(f"{remaining}/{count} records undelivered after {timeout:.0f} s")
    if errors:
        raise RuntimeError(f"{len(errors)} delivery errors, first: {errors[0]}")
    return {
        "records": count,
        "record_bytes": size,
        "seconds": elapsed,
        "msgs_per_s": count / elapsed,
        "mb_per_s": count * size / MB / elapsed,
    }


def run_consume(
    bootstrap: str,
    topic: str,
    partitions: int,
    count: int,
    size: int,
    stall_timeout: float,
    check=lambda: None,
) -> dict:
    """Read `count` records from the beginning of every partition; first poll to last record."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-consume-{uuid.uuid4().hex[:8]}",
            **CONSUMER_THROUGHPUT_CONFIG,
        }
    )
    try:
        consumer.list_topics(topic=topic, timeout=10)  # connect before the clock starts
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        received = 0
        byte_count = 0
        t0 = time.perf_counter()
        t_last = t0
        last_progress = time.monotonic()
        while received < count:
            # Never ask for more than is left: consume() waits for a full batch or timeout.
            batch = consumer.consume(num_messages=min(10_000, count - received), timeout=0.5)
            if batch:
                t_last = time.perf_counter()
                last_progress = time.monotonic()
                if any(map(Message.error, batch)):  # C-level: the loop stays the client's
                    raise KafkaException(next(m.error() for m in batch if m.error()))
                received += len(batch)
                byte_count += len(batch) * size
                continue
            check()
            if time.monotonic() - last_progress > stall_timeout:
                raise TimeoutError(
                    f"stalled at {received}/{count} records (nothing for {stall_timeout:.0f} s)"
                )
        elapsed = t_last - t0
    finally:
        consumer.close()
    return {
        "records": received,
        "record_bytes": size,
        "seconds": elapsed,
        "msgs_per_s": received / elapsed,
        "mb_per_s": byte_count / MB / elapsed,
    }


def _latency_consumer(bootstrap, topic, expected, ready, producer_done, results) -> None:
    """Child process: receive the paced records and report send-to-receive latencies."""
    try:
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-latency-{uuid.uuid4().hex[:8]}",
                **CONSUMER_LATENCY_CONFIG,
            }
        )
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        # Ready once the warm-up record (produced before this process started) arrived:
        # the fetch loop then runs and the next fetch is a long poll on the log end.
        deadline = time.monotonic() + 60
        while True:
            msg = consumer.poll(0.2)
            if msg is not None:
                if msg.error() is not None:
                    raise KafkaException(msg.error())
                if _LATENCY_HEADER.unpack_from(msg.value())[0] == -1:
                    break
            if time.monotonic() > deadline:
                raise TimeoutError("warm-up record not received within 60 s")
        ready.set()
        latencies_ns: dict[int, int] = {}  # sequence number -> receive time - send time
        drain_deadline = None
        while len(latencies_ns) < expected:
            msg = consumer.poll(0.1)
            if msg is not None:
                now = time.time_ns()
                if msg.error() is not None:
                    raise KafkaException(msg.error())
                seq, sent_ns = _LATENCY_HEADER.unpack_from(msg.value())
                if seq >= 0 and seq not in latencies_ns:
                    latencies_ns[seq] = now - sent_ns
            if producer_done.is_set():
                if drain_deadline is None:
                    drain_deadline = time.monotonic() + 10
                elif time.monotonic() > drain_deadline:
                    break
        consumer.close()
        results.put({"latencies_ns": latencies_ns})
    except Exception as exc:  # report to the parent instead of dying silently
        results.put({"error": f"{type(exc).__name__}: {exc}"})


def run_latency(bootstrap: str, topic: str, rate: int, seconds: float) -> dict:
    """Produce at a fixed rate (deadline schedule) while a child process consumes."""
    count = int(rate * seconds)
    delivery_errors: list[str] = []

    def on_delivery(err, _msg) -> None:
        if err is not None:
            delivery_errors.append(str(err))

    producer = Producer(
        {"bootstrap.servers": bootstrap, **PRODUCER_LATENCY_CONFIG, "on_delivery": on_delivery}
    )
    producer.list_topics(topic=topic, timeout=10)
    pad = b"\0" * (LATENCY_RECORD_SIZE - _LATENCY_HEADER.size)
    producer.produce(topic, _LATENCY_HEADER.pack(-1, time.time_ns()) + pad)
    if producer.flush(10):
        raise TimeoutError("warm-up record not acknowledged within 10 s")

    ctx = multiprocessing.get_context("spawn")  # no fork with librdkafka threads around
    ready, producer_done, results = ctx.Event(), ctx.Event(), ctx.Queue()
    child = ctx.Process(
        target=_latency_consumer,
        args=(bootstrap, topic, count, ready, producer_done, results),
        daemon=True,
    )
    child.start()
    try:
        t_ready = time.monotonic()
        while not ready.wait(0.2):
            if not child.is_alive() or time.monotonic() - t_ready > 90:
                err = results.get(timeout=1) if not results.empty() else {}
                raise RuntimeError(f"latency consumer not ready: {err.get('error', 'timeout')}")
        pack = _LATENCY_HEADER.pack
        produce = producer.produce
        max_behind = 0.0
        start = time.perf_counter()
        for i in range(count):
            target = start + i / rate
            while (delay := target - time.perf_counter()) > 0:
                time.sleep(delay)
            max_behind = max(max_behind, time.perf_counter() - target)
            produce(topic, pack(i, time.time_ns()) + pad)
            producer.poll(0)
        send_seconds = time.perf_counter() - start
        unacked = producer.flush(30)
        producer_done.set()
        result = results.get(timeout=60)
    finally:
        producer_done.set()
        child.join(timeout=15)
        if child.is_alive():
            child.kill()
            child.join()
    if "error" in result:
        raise RuntimeError(f"latency consumer: {result['error']}")
    if unacked or delivery_errors:
        raise RuntimeError(
            f"{unacked} unacknowledged, {len(delivery_errors)} failed deliveries"
            + (f", first: {delivery_errors[0]}" if delivery_errors else "")
        )
    by_seq: dict[int, int] = result["latencies_ns"]
    lat_ms = sorted(ns / 1e6 for ns in by_seq.values())
    if len(lat_ms) < count:
        raise RuntimeError(f"only {len(lat_ms)}/{count} records arrived within 10 s")
    return {
        "records": count,
        "rate": rate,
        "achieved_rate": count / send_seconds,
        "max_behind_schedule_ms": max_behind * 1000,
        "p50_ms": percentile(lat_ms, 50),
        "p99_ms": percentile(lat_ms, 99),
        "max_ms": lat_ms[-1],
        "mean_ms": sum(lat_ms) / len(lat_ms),
        # p99 of the records sent in each second of the run: shows drift over time.
        "p99_ms_per_second": [
            round(
                percentile(sorted(by_seq[i] / 1e6 for i in range(s, min(s + rate, count))), 99), 2
            )
            for s in range(0, count, rate)
        ],
    }


@dataclass
class Plan:
    small_count: int
    small_size: int
    large_count: int
    large_size: int
    latency_seconds: float
    latency_rate: int
    timeout: float


def bench_broker(broker: Broker, plan: Plan, latency_too: bool = True) -> dict[str, dict]:
    """Run the workloads against one broker; each entry is a result or {"error": ...}."""
    out: dict[str, dict] = {}

    def attempt(key: str, label: str, fn) -> None:
        try:
            broker.check_alive()
            log(f"{broker.name}: {label} ...")
            out[key] = fn()
            summary = ", ".join(
                f"{k}={v:,.2f}" for k, v in out[key].items() if isinstance(v, float)
            )
            log(f"{broker.name}: {label}: {summary}")
        except Exception as exc:
            out[key] = {"error": describe_error(exc)}
            log(f"{broker.name}: {label} FAILED: {out[key]['error']}")

    bs = broker.bootstrap
    alive = broker.check_alive
    p = THROUGHPUT_PARTITIONS
    small: dict[str, str] = {}

    def produce_small() -> dict:
        small["topic"] = create_topic(bs, "p100", p)
        return run_produce(
            bs, small["topic"], plan.small_count, plan.small_size, plan.timeout, alive
        )

    def produce_large() -> dict:
        topic = create_topic(bs, "p1k", p)
        return run_produce(bs, topic, plan.large_count, plan.large_size, plan.timeout, alive)

    def consume_small() -> dict:
        if "error" in out.get("produce_small", {"error": ""}):
            raise RuntimeError("skipped: the produce 100 B workload failed")
        return run_consume(bs, small["topic"], p, plan.small_count, plan.small_size, 30.0, alive)

    def latency() -> dict:
        topic = create_topic(bs, "lat", LATENCY_PARTITIONS)
        return run_latency(bs, topic, plan.latency_rate, plan.latency_seconds)

    attempt("produce_small", f"produce {plan.small_count:,} x {plan.small_size} B", produce_small)
    attempt("produce_large", f"produce {plan.large_count:,} x {plan.large_size} B", produce_large)
    attempt("consume_small", f"consume {plan.small_count:,} x {plan.small_size} B", consume_small)
    if latency_too:
        attempt(
            "latency",
            f"e2e latency at {plan.latency_rate:,} msg/s for {plan.latency_seconds:g} s",
            latency,
        )
    return out


THROUGHPUT_WORKLOADS = ("produce_small", "produce_large", "consume_small")


def median_of_rounds(rounds: list[dict[str, dict]]) -> dict[str, dict]:
    """One broker's results over several rounds: per throughput workload the round with
    the median msgs/s (errors count as the lowest), the rest from the first round."""
    merged = dict(rounds[0])
    for key in THROUGHPUT_WORKLOADS:
        runs = [r[key] for r in rounds if key in r]
        if not runs:
            continue
        runs.sort(key=lambda r: r.get("msgs_per_s", -1.0))
        chosen = dict(runs[(len(runs) - 1) // 2])
        chosen["rounds_msgs_per_s"] = [r.get("msgs_per_s") for r in
                                       (x[key] for x in rounds if key in x)]
        merged[key] = chosen
    return merged


# --------------------------------------------------------------------------- report


@dataclass
class Row:
    workload: str  # key in bench_broker's result
    field: str  # key inside that workload's result
    label: str
    unit: str
    floor: tuple[str, float] | None = None  # (">=" | "<=", bound) on headwater/tansu


def report_rows(plan: Plan) -> list[Row]:
    small = f"produce {plan.small_count:,} x {plan.small_size} B"
    large = f"produce {plan.large_count:,} x {plan.large_size // 1024} KiB"
    cons = f"consume {plan.small_count:,} x {plan.small_size} B"
    lat = f"e2e latency @ {plan.latency_rate:,} msg/s"
    return [
        Row("produce_small", "msgs_per_s", small, "msgs/s", (">=", 1.0)),
        Row("produce_small", "mb_per_s", small, "MB/s"),
        Row("produce_large", "msgs_per_s", large, "msgs/s", (">=", 1.0)),
        Row("produce_large", "mb_per_s", large, "MB/s"),
        Row("consume_small", "msgs_per_s", cons, "msgs/s", (">=", 1.0)),
        Row("consume_small", "mb_per_s", cons, "MB/s"),
        Row("latency", "p50_ms", lat, "p50 ms"),
        Row("latency", "p99_ms", lat, "p99 ms", ("<=", 0.1)),
        Row("latency", "max_ms", lat, "max ms"),
    ]


def fmt_value(value: float, unit: str) -> str:
    if unit == "msgs/s":
        return f"{value:,.0f}"
    if unit == "MB/s":
        return f"{value:,.1f}"
    return f"{value:,.2f}"


def value_of(results: dict[str, dict], broker: str, row: Row) -> float | str | None:
    """The metric, an error string, or None when the broker was not part of the run."""
    if broker not in results:
        return None
    if "startup_error" in results[broker]:
        return "broker did not start"
    entry = results[broker].get(row.workload)
    if entry is None:
        return "not run"
    if "error" in entry:
        return entry["error"]
    return entry[row.field]


def build_report(results: dict[str, dict], plan: Plan) -> tuple[list[dict], list[str]]:
    """Rows of the table as dicts (also the JSON's "table") and the footnoted errors."""
    table: list[dict] = []
    errors: list[str] = []
    seen: set[tuple[str, str]] = set()
    for broker in BROKERS:
        if "startup_error" in results.get(broker, {}):
            seen.add((broker, "broker did not start"))
            errors.append(f"{broker} did not start: {results[broker]['startup_error']}")
    for row in report_rows(plan):
        cells: dict[str, Any] = {"metric": row.label, "unit": row.unit}
        values = {}
        for broker in BROKERS:
            v = value_of(results, broker, row)
            values[broker] = v
            if isinstance(v, str) and (broker, v) not in seen:
                seen.add((broker, v))  # a start-up error is shown once, not per row
                errors.append(f"{broker} / {row.label}: {v}")
            cells[broker] = v
        hw, ts = values["headwater"], values["tansu"]
        ratio = hw / ts if isinstance(hw, float) and isinstance(ts, float) and ts else None
        cells["ratio"] = ratio
        if row.floor is not None:
            op, bound = row.floor
            cells["floor"] = f"{op} {bound:.1f}"
            if ratio is not None:
                cells["pass"] = ratio >= bound if op == ">=" else ratio <= bound
            else:
                cells["pass"] = None
        table.append(cells)
    return table, errors


def print_table(table: list[dict], errors: list[str], header: list[str]) -> None:
    def cell(v: Any, unit: str) -> str:
        if v is None:
            return "-"
        if isinstance(v, str):
            kind, sep, rest = v.partition(": ")
            text = rest if sep and kind.isidentifier() else v  # drop the exception type
            return "ERR " + (text if len(text) <= 36 else text[:33] + "...")
        return fmt_value(v, unit)

    lines = []
    for r in table:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3g}x"
        floor = ""
        if "floor" in r:
            verdict = {True: "PASS", False: "FAIL", None: "n/a"}[r["pass"]]
            floor = f"{r['floor']} {verdict}"
        lines.append(
            [
                r["metric"],
                r["unit"],
                cell(r["headwater"], r["unit"]),
                cell(r["tansu"], r["unit"]),
                ratio,
                floor,
            ]
        )
    titles = ["metric", "unit", "headwater", "tansu", "ratio hw/tansu", "floor"]
    widths = [max(len(x[i]) for x in [titles, *lines]) for i in range(len(titles))]
    align = ["<", "<", ">", ">", ">", "<"]

    def fmt(parts: list[str]) -> str:
        return "  ".join(f"{p:{a}{w}}" for p, a, w in zip(parts, align, widths, strict=True))

    print()
    for h in header:
        print(h)
    print()
    print(fmt(titles).rstrip())
    print("  ".join("-" * w for w in widths))
    prev = None
    for parts in lines:
        shown = list(parts)
        if parts[0] == prev:
            shown[0] = ""
        prev = parts[0]
        print(fmt(shown).rstrip())
    if errors:
        print("\nerrors:")
        for e in errors:
            print(f"  {e}")
    print()


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--brokers",
        default="headwater,tansu",
        help="comma-separated subset of: headwater,tansu (default: both)",
    )
    ap.add_argument("--quick", action="store_true", help="10x fewer records, 3 s latency run")
    ap.add_argument("--json", metavar="PATH", help="also write all results as JSON here")
    ap.add_argument(
        "--headwater-bootstrap", metavar="HOST:PORT", help="use a running headwater instead"
    )
    ap.add_argument("--tansu-bootstrap", metavar="HOST:PORT", help="use a running Tansu instead")
    ap.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="seconds allowed per produce workload and for broker start-up (default 300)",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="rounds of the throughput workloads per broker; the table shows each one's "
        "median (default 5)",
    )
    ap.add_argument(
        "--check",
        action="store_true",
        help="exit with status 1 unless every floor was measured and passed",
    )
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    names = [b.strip() for b in args.brokers.split(",") if b.strip()]
    unknown = sorted(set(names) - set(BROKERS))
    if unknown or not names:
        ap.error(f"--brokers: unknown {unknown}; choose from {','.join(BROKERS)}")
    args.broker_names = [b for b in BROKERS if b in names]  # headwater first, then tansu
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    scale = 10 if args.quick else 1
    plan = Plan(
        small_count=1_000_000 // scale,
        small_size=100,
        large_count=200_000 // scale,
        large_size=1024,
        latency_seconds=3.0 if args.quick else 10.0,
        latency_rate=LATENCY_RATE,
        timeout=args.timeout,
    )
    externals = {"headwater": args.headwater_bootstrap, "tansu": args.tansu_bootstrap}
    results: dict[str, dict] = {}  # broker -> workload -> result | {"error": str}
    versions: dict[str, str] = {}
    rounds: dict[str, list[dict]] = {name: [] for name in args.broker_names}
    for round_no in range(args.rounds):
        # Alternate the order so neither broker always runs first (page cache, CPU clock).
        order = args.broker_names if round_no % 2 == 0 else args.broker_names[::-1]
        for name in order:
            if any("startup_error" in r for r in rounds[name]):
                continue
            log(f"round {round_no + 1}/{args.rounds}: {name}")
            workdir = Path(tempfile.mkdtemp(prefix=f"bench-{name}-"))
            broker = None
            try:
                broker = make_broker(name, externals[name], workdir)
                versions[name] = broker.version
                broker.start(timeout=min(args.timeout, 60.0))
                rounds[name].append(bench_broker(broker, plan, latency_too=round_no == 0))
            except Exception as exc:
                msg = describe_error(exc)
                log(f"{name}: could not start: {msg}")
                rounds[name].append({"startup_error": msg})
            finally:
                if broker is not None:
                    broker.stop()
                shutil.rmtree(workdir, ignore_errors=True)
    for name, runs in rounds.items():
        failed = [r for r in runs if "startup_error" in r]
        results[name] = failed[0] if failed else median_of_rounds(runs)

    table, errors = build_report(results, plan)
    header = [
        "headwater vs Tansu, confluent-kafka "
        f"{client_version()} / librdkafka {confluent_kafka.libversion()[0]}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}"
        + (" [--quick]" if args.quick else ""),
        "brokers: "
        + ", ".join(
            f"{n} {versions.get(n, '?')}"
            + (f" @ {externals[n]}" if externals[n] else " (started here)")
            for n in args.broker_names
        ),
        f"throughput topics: {THROUGHPUT_PARTITIONS} partitions, acks=all, linger.ms=5; "
        f"latency topic: {LATENCY_PARTITIONS} partition, linger.ms=0, acks=all, "
        f"fetch.wait.max.ms=500, {plan.latency_seconds:g} s",
        "MB = 10^6 bytes of record values; ratio = headwater / tansu",
        f"throughput rows: median of {args.rounds} rounds (brokers alternate, each round on "
        "a freshly started broker); latency: first round",
    ]
    print_table(table, errors, header)

    if args.json:
        doc = {
            "quick": args.quick,
            "plan": plan.__dict__,
            "partitions": {"throughput": THROUGHPUT_PARTITIONS, "latency": LATENCY_PARTITIONS},
            "producer_config": PRODUCER_THROUGHPUT_CONFIG,
            "consumer_config": CONSUMER_THROUGHPUT_CONFIG,
            "latency_producer_config": PRODUCER_LATENCY_CONFIG,
            "latency_consumer_config": CONSUMER_LATENCY_CONFIG,
            "client": {
                "confluent_kafka": client_version(),
                "librdkafka": confluent_kafka.libversion()[0],
            },
            "host": {"cpus": os.cpu_count(), "python": platform.python_version()},
            "brokers": {
                n: {"version": versions.get(n), "external": externals[n]} for n in args.broker_names
            },
            "results": results,
            "table": table,
        }
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
        log(f"wrote {args.json}")

    if args.check:
        floors = [r for r in table if "floor" in r]
        return 0 if all(r["pass"] is True for r in floors) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
