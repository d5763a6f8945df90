"""Benchmark headwater against Apache Kafka 4.4.0 and Tansu with confluent-kafka (librdkafka).

Workloads, run against each broker in turn (never concurrently), each on a fresh topic:

1. produce 1,000,000 x 100 B records, acks=all  (msgs/s, MB/s)
2. produce 200,000 x 1 KiB records, acks=all    (msgs/s, MB/s)
3. consume the 1,000,000 records of workload 1   (msgs/s, MB/s), twice: with
   fetch.queue.backoff.ms=1 (the floor's row) and with librdkafka's defaults (1,000 ms)
4. end-to-end latency at a fixed 2,000 msg/s     (p50, p99, max in ms)

Each throughput workload also records the broker process's CPU seconds (utime + stime
from /proc/<pid>/stat) per GB produced or consumed. A table with the ratios
headwater/Kafka (the main anchor) and headwater/Tansu per metric is printed. The
throughput workloads run in several rounds (default 5), the brokers alternating and each
round on a freshly started broker; the table shows each workload's median round. See
bench/README.md.

    python bench/broker_bench.py [--brokers headwater,kafka,tansu] [--quick] [--rounds N]
                                 [--json out.json] [--headwater-bootstrap HOST:PORT]
                                 [--kafka-bootstrap HOST:PORT] [--tansu-bootstrap HOST:PORT]
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
from collections.abc import Callable
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
BROKERS = ("headwater", "kafka", "tansu")
MB = 1_000_000  # MB/s counts record values only, in decimal megabytes
GB = 1_000_000_000
# Apache Kafka's own start script (kafka-server-start.sh) runs the broker with a 1 GB
# heap; everything else is KafkaReference's single-node set-up (tests/support).
KAFKA_HEAP = "1g"
_CLK_TCK = os.sysconf("SC_CLK_TCK")

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
# librdkafka stops fetching a partition once its local queue holds queued.min.messages
# (default 100,000) and then waits fetch.queue.backoff.ms (default 1,000 ms) before it
# looks again: a broker that serves faster than the Python loop drains trips it and the
# client then sits idle for a second. The consume workload runs twice: with librdkafka's
# defaults, and with the backoff at 1 ms (everything else default), the row the floor uses.
CONSUMER_DEFAULT_CONFIG: dict[str, Any] = {
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "enable.partition.eof": False,
}
CONSUMER_THROUGHPUT_CONFIG: dict[str, Any] = {
    **CONSUMER_DEFAULT_CONFIG,
    "fetch.queue.backoff.ms": 1,
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

    def cpu_seconds(self) -> float | None:
        """The broker process's CPU time so far (all threads), None for an external one."""
        if self.proc is None or self.proc.poll() is not None:
            return None
        return process_cpu_seconds(self.proc.pid)

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


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of a process (every thread, live or exited) from /proc/<pid>/stat,
    in seconds: the broker's own CPU, whatever its language or thread model."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # fields[0] is field 3 (state)
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK  # fields 14 and 15


@dataclass
class KafkaBroker(Broker):
    """Apache Kafka 4.4.0 in KRaft combined mode, started by the tests' `KafkaReference`
    (kafka-storage format, then kafka.Kafka) with Kafka's defaults and a `heap` heap."""

    heap: str = KAFKA_HEAP
    ref: Any = field(default=None, repr=False)

    def start(self, timeout: float) -> None:
        if str(PROJECT_ROOT) not in sys.path:
            sys.path.insert(0, str(PROJECT_ROOT))
        from tests.support.kafka_reference import KafkaReference

        assert self.workdir is not None
        port = int(self.bootstrap.rpartition(":")[2])
        self.ref = KafkaReference(self.workdir / "data", port=port, heap=self.heap)
        log(f"kafka: starting Apache Kafka {self.version} (heap {self.heap}) on {self.bootstrap}")
        t0 = time.monotonic()
        self.ref.start(timeout)
        self.proc = self.ref.proc
        wait_ready(self.bootstrap, time.monotonic() + timeout, self.proc)
        log(f"kafka: ready at {self.bootstrap} after {time.monotonic() - t0:.2f} s")

    def log_tail(self, lines: int = 5) -> str:
        if self.ref is None:
            return "(no log)"
        text = self.ref.logs(2000).strip().splitlines()
        return " | ".join(text[-lines:]) or "(empty log)"

    def stop(self) -> None:
        if self.ref is not None:
            self.ref.stop()


def kafka_version() -> str:
    """The Kafka version `make kafka` fetched (from the jar's name), or 'missing'."""
    jars = sorted((PROJECT_ROOT / ".kafka" / "lib").glob("kafka_2.13-*.jar"))
    return jars[-1].name.removeprefix("kafka_2.13-").removesuffix(".jar") if jars else "missing"


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
    if name == "kafka":
        return KafkaBroker(name, bootstrap, None, None, workdir, version=kafka_version())
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


def _no_cpu() -> float | None:
    return None


def cpu_fields(before: float | None, after: float | None, payload_bytes: int) -> dict:
    """The broker's CPU seconds over a timed window, and per GB of record values."""
    if before is None or after is None:
        return {}
    cpu = after - before
    return {"broker_cpu_s": cpu, "cpu_s_per_gb": cpu / (payload_bytes / GB)}


def run_produce(
    bootstrap: str,
    topic: str,
    count: int,
    size: int,
    timeout: float,
    check: Callable[[], None] = lambda: None,
    cpu: Callable[[], float | None] = _no_cpu,
) -> dict:
    """Produce `count` records of `size` bytes; time from first produce() to flush() done.

    `check()` is called about once a second while flushing (raises if the broker died);
    `cpu()` (the broker's CPU seconds) is read when the clock starts and stops.
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
        cpu0 = cpu()
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
        cpu1 = cpu()
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
        **cpu_fields(cpu0, cpu1, count * size),
    }


def run_consume(
    bootstrap: str,
    topic: str,
    partitions: int,
    count: int,
    size: int,
    stall_timeout: float,
    check: Callable[[], None] = lambda: None,
    cpu: Callable[[], float | None] = _no_cpu,
    config: dict[str, Any] | None = None,
) -> dict:
    """Read `count` records from the beginning of every partition; first poll to last record.

    `config` defaults to CONSUMER_THROUGHPUT_CONFIG; `cpu()` as in run_produce.
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-consume-{uuid.uuid4().hex[:8]}",
            **(CONSUMER_THROUGHPUT_CONFIG if config is None else config),
        }
    )
    try:
        consumer.list_topics(topic=topic, timeout=10)  # connect before the clock starts
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        received = 0
        byte_count = 0
        cpu0 = cpu()
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
        cpu1 = cpu()
    finally:
        consumer.close()
    return {
        "records": received,
        "record_bytes": size,
        "seconds": elapsed,
        "msgs_per_s": received / elapsed,
        "mb_per_s": byte_count / MB / elapsed,
        **cpu_fields(cpu0, cpu1, byte_count),
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
    warmup_count: int = 0  # records produced and consumed, untimed, before the workloads


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
    cpu = broker.cpu_seconds
    p = THROUGHPUT_PARTITIONS
    small: dict[str, str] = {}

    def warmup() -> dict:
        # A freshly started JVM interprets, then compiles; every broker gets the same
        # untimed traffic first, so the rounds measure a warm broker.
        topic = create_topic(bs, "warmup", p)
        n = plan.warmup_count
        run_produce(bs, topic, n, plan.small_size, plan.timeout, alive)
        run_consume(bs, topic, p, n, plan.small_size, 30.0, alive)
        return {"records": n, "record_bytes": plan.small_size}

    def produce_small() -> dict:
        small["topic"] = create_topic(bs, "p100", p)
        return run_produce(
            bs, small["topic"], plan.small_count, plan.small_size, plan.timeout, alive, cpu
        )

    def produce_large() -> dict:
        topic = create_topic(bs, "p1k", p)
        return run_produce(
            bs, topic, plan.large_count, plan.large_size, plan.timeout, alive, cpu
        )

    def consume(config: dict[str, Any]) -> Callable[[], dict]:
        def run() -> dict:
            if "error" in out.get("produce_small", {"error": ""}):
                raise RuntimeError("skipped: the produce 100 B workload failed")
            return run_consume(
                bs, small["topic"], p, plan.small_count, plan.small_size, 30.0, alive, cpu,
                config,
            )

        return run

    def latency() -> dict:
        topic = create_topic(bs, "lat", LATENCY_PARTITIONS)
        return run_latency(bs, topic, plan.latency_rate, plan.latency_seconds)

    if plan.warmup_count:
        attempt("warmup", f"warm-up: {plan.warmup_count:,} x {plan.small_size} B", warmup)
    attempt("produce_small", f"produce {plan.small_count:,} x {plan.small_size} B", produce_small)
    attempt("produce_large", f"produce {plan.large_count:,} x {plan.large_size} B", produce_large)
    cons = f"consume {plan.small_count:,} x {plan.small_size} B"
    attempt("consume_small", f"{cons}, fetch.queue.backoff.ms=1",
            consume(CONSUMER_THROUGHPUT_CONFIG))
    attempt("consume_default", f"{cons}, librdkafka defaults",
            consume(CONSUMER_DEFAULT_CONFIG))
    if latency_too:
        attempt(
            "latency",
            f"e2e latency at {plan.latency_rate:,} msg/s for {plan.latency_seconds:g} s",
            latency,
        )
    return out


THROUGHPUT_WORKLOADS = ("produce_small", "produce_large", "consume_small", "consume_default")


def median_of_rounds(rounds: list[dict[str, dict]]) -> dict[str, dict]:
    """One broker's results over several rounds: per throughput workload the round with
    the median msgs/s (errors count as the lowest), the rest from the first round. CPU
    s/GB is the median over the rounds on its own (it need not move with msgs/s)."""
    merged = dict(rounds[0])
    for key in THROUGHPUT_WORKLOADS:
        runs = [r[key] for r in rounds if key in r]
        if not runs:
            continue
        in_order = list(runs)
        runs.sort(key=lambda r: r.get("msgs_per_s", -1.0))
        chosen = dict(runs[(len(runs) - 1) // 2])
        chosen["rounds_msgs_per_s"] = [r.get("msgs_per_s") for r in in_order]
        cpus = [r["cpu_s_per_gb"] for r in in_order if "cpu_s_per_gb" in r]
        if cpus:
            chosen["rounds_cpu_s_per_gb"] = cpus
            chosen["cpu_s_per_gb"] = sorted(cpus)[(len(cpus) - 1) // 2]
        merged[key] = chosen
    return merged


# --------------------------------------------------------------------------- report

# Floors from the issue, on headwater / anchor: (anchor broker, ">=" | "<=", bound).
Floor = tuple[str, str, float]


@dataclass
class Row:
    workload: str  # key in bench_broker's result
    field: str  # key inside that workload's result
    label: str
    unit: str
    floors: tuple[Floor, ...] = ()


def report_rows(plan: Plan) -> list[Row]:
    small = f"produce {plan.small_count:,} x {plan.small_size} B"
    large = f"produce {plan.large_count:,} x {plan.large_size // 1024} KiB"
    cons = f"consume {plan.small_count:,} x {plan.small_size} B"
    lat = f"e2e latency @ {plan.latency_rate:,} msg/s"
    faster = (("kafka", ">=", 1.0), ("tansu", ">=", 1.0))
    return [
        Row("produce_small", "msgs_per_s", small, "msgs/s", faster),
        Row("produce_small", "mb_per_s", small, "MB/s"),
        Row("produce_small", "cpu_s_per_gb", small, "CPU s/GB"),
        Row("produce_large", "msgs_per_s", large, "msgs/s", faster),
        Row("produce_large", "mb_per_s", large, "MB/s"),
        Row("produce_large", "cpu_s_per_gb", large, "CPU s/GB"),
        Row("consume_small", "msgs_per_s", f"{cons}, backoff 1 ms", "msgs/s", faster),
        Row("consume_small", "mb_per_s", f"{cons}, backoff 1 ms", "MB/s"),
        Row("consume_small", "cpu_s_per_gb", f"{cons}, backoff 1 ms", "CPU s/GB"),
        Row("consume_default", "msgs_per_s", f"{cons}, librdkafka defaults", "msgs/s"),
        Row("consume_default", "mb_per_s", f"{cons}, librdkafka defaults", "MB/s"),
        Row("consume_default", "cpu_s_per_gb", f"{cons}, librdkafka defaults", "CPU s/GB"),
        Row("latency", "p50_ms", lat, "p50 ms"),
        Row("latency", "p99_ms", lat, "p99 ms", (("kafka", "<=", 1.0), ("tansu", "<=", 0.1))),
        Row("latency", "max_ms", lat, "max ms"),
    ]


def fmt_value(value: float, unit: str) -> str:
    if unit == "msgs/s":
        return f"{value:,.0f}"
    if unit == "MB/s":
        return f"{value:,.1f}"
    return f"{value:,.2f}"


def value_of(results: dict[str, dict], broker: str, row: Row) -> float | str | None:
    """The metric, an error string, or None when the broker was not part of the run (or,
    for CPU, when it was an external broker whose process we cannot see)."""
    if broker not in results:
        return None
    if "startup_error" in results[broker]:
        return "broker did not start"
    entry = results[broker].get(row.workload)
    if entry is None:
        return "not run"
    if "error" in entry:
        return entry["error"]
    return entry.get(row.field)


def build_report(
    results: dict[str, dict], plan: Plan, brokers: tuple[str, ...] = BROKERS
) -> tuple[list[dict], list[str]]:
    """Rows of the table as dicts (also the JSON's "table") and the footnoted errors.

    Each row has every broker's value, `ratio_<anchor>` = headwater / anchor for Kafka
    and Tansu, and per floor whether it passed (None when not measured)."""
    table: list[dict] = []
    errors: list[str] = []
    seen: set[tuple[str, str]] = set()
    for broker in brokers:
        if "startup_error" in results.get(broker, {}):
            seen.add((broker, "broker did not start"))
            errors.append(f"{broker} did not start: {results[broker]['startup_error']}")
    for row in report_rows(plan):
        cells: dict[str, Any] = {"metric": row.label, "unit": row.unit}
        values = {}
        for broker in brokers:
            v = value_of(results, broker, row)
            values[broker] = v
            if isinstance(v, str) and (broker, v) not in seen:
                seen.add((broker, v))  # a start-up error is shown once, not per row
                errors.append(f"{broker} / {row.label}: {v}")
            cells[broker] = v
        hw = values.get("headwater")
        for anchor in ("kafka", "tansu"):
            other = values.get(anchor)
            ok = isinstance(hw, float) and isinstance(other, float) and other
            cells[f"ratio_{anchor}"] = hw / other if ok else None
        floors = []
        for anchor, op, bound in row.floors:
            if anchor not in brokers:
                continue
            ratio = cells[f"ratio_{anchor}"]
            passed = None if ratio is None else (ratio >= bound if op == ">=" else ratio <= bound)
            floors.append({"anchor": anchor, "op": op, "bound": bound, "pass": passed})
        if floors:
            cells["floors"] = floors
        table.append(cells)
    return table, errors


def print_table(
    table: list[dict], errors: list[str], header: list[str], brokers: tuple[str, ...] = BROKERS
) -> None:
    def cell(v: Any, unit: str) -> str:
        if v is None:
            return "-"
        if isinstance(v, str):
            kind, sep, rest = v.partition(": ")
            text = rest if sep and kind.isidentifier() else v  # drop the exception type
            return "ERR " + (text if len(text) <= 36 else text[:33] + "...")
        return fmt_value(v, unit)

    anchors = [a for a in ("kafka", "tansu") if a in brokers and "headwater" in brokers]
    lines = []
    for r in table:
        ratios = [
            "-" if r[f"ratio_{a}"] is None else f"{r[f'ratio_{a}']:.3g}x" for a in anchors
        ]
        verdicts = []
        for f in r.get("floors", []):
            verdict = {True: "PASS", False: "FAIL", None: "n/a"}[f["pass"]]
            verdicts.append(f"{f['anchor']} {f['op']} {f['bound']:g} {verdict}")
        lines.append(
            [
                r["metric"],
                r["unit"],
                *(cell(r[b], r["unit"]) for b in brokers),
                *ratios,
                "; ".join(verdicts),
            ]
        )
    titles = ["metric", "unit", *brokers, *(f"hw/{a}" for a in anchors), "floor (ratio)"]
    widths = [max(len(x[i]) for x in [titles, *lines]) for i in range(len(titles))]
    align = ["<", "<", *(">" for _ in brokers), *(">" for _ in anchors), "<"]

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
        default=",".join(BROKERS),
        help=f"comma-separated subset of: {','.join(BROKERS)} (default: all)",
    )
    ap.add_argument("--quick", action="store_true", help="10x fewer records, 3 s latency run")
    ap.add_argument(
        "--no-warmup",
        action="store_true",
        help="skip the untimed warm-up traffic each freshly started broker gets first",
    )
    ap.add_argument(
        "--kafka-heap", default=KAFKA_HEAP, help=f"Apache Kafka's -Xmx/-Xms (default {KAFKA_HEAP})"
    )
    ap.add_argument("--json", metavar="PATH", help="also write all results as JSON here")
    ap.add_argument(
        "--headwater-bootstrap", metavar="HOST:PORT", help="use a running headwater instead"
    )
    ap.add_argument(
        "--kafka-bootstrap", metavar="HOST:PORT", help="use a running Apache Kafka instead"
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
    args.broker_names = [b for b in BROKERS if b in names]  # headwater, kafka, tansu
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
        warmup_count=0 if args.no_warmup else 100_000 // scale,
    )
    externals = {
        "headwater": args.headwater_bootstrap,
        "kafka": args.kafka_bootstrap,
        "tansu": args.tansu_bootstrap,
    }
    results: dict[str, dict] = {}  # broker -> workload -> result | {"error": str}
    versions: dict[str, str] = {}
    rounds: dict[str, list[dict]] = {name: [] for name in args.broker_names}
    for round_no in range(args.rounds):
        # Rotate the order so no broker always runs first (page cache, CPU clock).
        k = round_no % len(args.broker_names)
        order = args.broker_names[k:] + args.broker_names[:k]
        for name in order:
            if any("startup_error" in r for r in rounds[name]):
                continue
            log(f"round {round_no + 1}/{args.rounds}: {name}")
            workdir = Path(tempfile.mkdtemp(prefix=f"bench-{name}-"))
            broker = None
            try:
                broker = make_broker(name, externals[name], workdir)
                if isinstance(broker, KafkaBroker):
                    broker.heap = args.kafka_heap
                versions[name] = broker.version
                # Two JVMs start Kafka (storage format, then the server): allow more.
                limit = 120.0 if name == "kafka" else 60.0
                broker.start(timeout=min(args.timeout, limit))
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

    brokers = tuple(args.broker_names)
    table, errors = build_report(results, plan, brokers)
    header = [
        f"{' vs '.join(brokers)}, confluent-kafka "
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
        "MB and GB = 10^6 and 10^9 bytes of record values; CPU s/GB = the broker process's "
        "utime+stime (/proc/PID/stat) over the timed window per GB; hw/X = headwater / X",
        f"throughput rows: median of {args.rounds} rounds (brokers rotate, each round on "
        "a freshly started broker"
        + ("" if args.no_warmup else f" warmed up with {plan.warmup_count:,} untimed records")
        + "); latency: first round",
        "consume: 'backoff 1 ms' = fetch.queue.backoff.ms=1 (the floor's row); "
        "'librdkafka defaults' = fetch.queue.backoff.ms=1000, queued.min.messages=100000",
    ]
    print_table(table, errors, header, brokers)

    if args.json:
        doc = {
            "quick": args.quick,
            "plan": plan.__dict__,
            "partitions": {"throughput": THROUGHPUT_PARTITIONS, "latency": LATENCY_PARTITIONS},
            "producer_config": PRODUCER_THROUGHPUT_CONFIG,
            "consumer_config": CONSUMER_THROUGHPUT_CONFIG,
            "consumer_default_config": CONSUMER_DEFAULT_CONFIG,
            "kafka_heap": args.kafka_heap,
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
        floors = [f for r in table for f in r.get("floors", [])]
        return 0 if floors and all(f["pass"] is True for f in floors) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
