"""Benchmark share groups (KIP-932 queues): headwater against Apache Kafka 4.4.0's share
groups with the same client (confluent-kafka's ShareConsumer), a classic consumer group
on headwater as the baseline, and RabbitMQ (a quorum queue, manual acks, prefetch 500).

Per round, each broker freshly started (brokers alternate, never two at once):

1. 200,000 x 100 B pre-produced in producer batches of up to 500 records, to a 1- and a
   6-partition topic; then msgs/s with explicit acknowledgements (acknowledge() every
   record, commit_sync() after every poll) for 1, 3 and 6 ShareConsumers, each in its own
   thread (--workers process: its own process; 3 consumers are also measured the other
   way, to compare); a fresh group each.
2. one classic Consumer (a fresh group) reading the same 1-partition topic: the floor's
   baseline (3 share consumers on one partition >= 0.5x of it, on headwater).
3. bytes appended to `__share_group_state` per acknowledged record (segment sizes).

Once per broker: p50/p99 produce -> commit_sync returned at 2,000 msg/s (1 partition, 3
consumers), and the broker's RSS with 100 share-partitions each holding 2,000 acquired,
never acknowledged records. RabbitMQ runs the same counts on a private node. See
bench/README.md.

    python bench/share_bench.py [--quick] [--rounds N] [--brokers headwater,kafka,rabbitmq]
                                [--workers thread|process] [--json out.json]
"""

from __future__ import annotations

import argparse
import base64
import json
import multiprocessing as mp
import os
import platform
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import broker_bench as bb
from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

PROJECT_ROOT = bb.PROJECT_ROOT
if str(PROJECT_ROOT) not in sys.path:
    sys.path.insert(0, str(PROJECT_ROOT))

RECORD_SIZE = 100
RECORDS = 200_000
BATCH_RECORDS = 500  # records per producer batch: the units a share-partition hands out
CONSUMER_COUNTS = (1, 3, 6)
PARTITION_COUNTS = (1, 6)
LATENCY_RATE = 2_000
LATENCY_CONSUMERS = 3
MEM_PARTITIONS = 100
MEM_LOCKS = 2_000  # share.partition.max.record.locks, Kafka's and headwater's default
MEM_PER_PARTITION = 2_500  # more than the limit, so the cap is what holds them
RABBIT_PREFETCH = 500
# Records (sequence -1) before the measured ones: each share consumer acknowledges some
# before the clock starts, so every consumer of a run is a member when it starts.
WARMUP_RECORDS = 20 * BATCH_RECORDS
_REC = struct.Struct("<qq")  # sequence (-1 = warm-up), send time in ns (0 = not timed)
PRODUCER_CONFIG: dict[str, Any] = {
    "acks": "all",
    "enable.idempotence": False,
    "linger.ms": 5,
    "batch.num.messages": BATCH_RECORDS,
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
}
log = bb.log
ONLY: set[str] = set()  # --only: the workloads to run (empty: all)


def record(seq: int, sent_ns: int = 0) -> bytes:
    return _REC.pack(seq, sent_ns).ljust(RECORD_SIZE, b"x")


# --------------------------------------------------------------------------- set-up


def produce(bootstrap: str, topic: str, count: int, partitions: int, warmup: int = 0) -> float:
    """`warmup` records (sequence -1) then `count` records, round-robin over the
    partitions (batches of up to BATCH_RECORDS)."""
    p = Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONFIG})
    for i in range(warmup):
        p.produce(topic, record(-1), partition=i % partitions)
    if p.flush(120) != 0:
        raise RuntimeError(f"produce to {topic}: warm-up records left unacknowledged")
    t0 = time.monotonic()
    for i in range(count):
        p.produce(topic, record(i), partition=i % partitions)
        if i % 10_000 == 0:
            p.poll(0)
    if p.flush(120) != 0:
        raise RuntimeError(f"produce to {topic}: records left unacknowledged")
    return time.monotonic() - t0


def set_group_config(bootstrap: str, group: str, **configs: str) -> None:
    """Group configs (share.auto.offset.reset, ...) the way a user sets them: an
    IncrementalAlterConfigs on the GROUP resource."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
               for k, v in configs.items()]
    for fut in admin.incremental_alter_configs(
            [ConfigResource("group", group, incremental_configs=entries)]).values():
        fut.result(30)


def new_share_group(bootstrap: str, prefix: str, **extra: str) -> str:
    group = f"{prefix}-{uuid.uuid4().hex[:8]}"
    set_group_config(bootstrap, group, **{"share.auto.offset.reset": "earliest", **extra})
    return group


def state_topic_bytes(data_dir: Path | None) -> int | None:
    """Bytes of `__share_group_state-*/*.log` segments (Kafka preallocates only indexes)."""
    if data_dir is None:
        return None
    return sum(f.stat().st_size for f in data_dir.glob("__share_group_state-*/*.log"))


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


# --------------------------------------------------------------------------- share consumers


@dataclass
class Shared:
    """Counters every worker (process or thread) of one run updates."""

    done: Any = field(default_factory=lambda: mp.Value("q", 0))
    first: Any = field(default_factory=lambda: mp.Value("d", 0.0))
    stop: Any = field(default_factory=lambda: mp.Value("b", 0))
    ready: Any = field(default_factory=lambda: mp.Array("b", 16))


def share_worker(idx: int, bootstrap: str, group: str, topic: str, total: int,
                 deadline: float, timed: bool, gate: bool, sync: bool, sh: Shared,
                 out: Any) -> None:
    """One ShareConsumer in explicit mode: acknowledge() every record, then (`sync`)
    commit_sync() after each poll, or (not `sync`) nothing: the acknowledgements travel
    with the next poll's ShareFetch, the last ones with close(). `gate`: once this consumer has had a warm-up record it waits until the main
    process sets `sh.first` (every consumer a member with records), so the clock measures
    all of them consuming, not the group's join. `timed`: records carry a send time;
    latency = commit_sync returned - sent."""
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "share.acknowledgement.mode": "explicit"})
    c.subscribe([topic])
    seqs = array("q")
    lat_ns = array("q")
    redelivered = commits = 0
    errors: list[str] = []
    last = 0.0
    try:
        while not sh.stop.value and sh.done.value < total and time.time() < deadline:
            if gate and sh.ready[idx] and sh.first.value == 0.0:
                time.sleep(0.002)
                continue
            msgs = c.poll(0.2)
            if not msgs:
                continue
            got: list[tuple[int, int]] = []
            for m in msgs:
                if m.error() is not None:
                    errors.append(str(m.error()))
                    continue
                got.append(_REC.unpack_from(m.value()))
                if m.delivery_count() > 1:
                    redelivered += 1
                c.acknowledge(m)
            results = c.commit_sync(30) if sync else {}
            now_ns = time.time_ns()
            commits += sync
            sh.ready[idx] = 1
            failed = [f"{tp.topic}[{tp.partition}]: {e}" for tp, e in results.items()
                      if e is not None]
            if failed:
                errors.extend(failed)
                continue
            real = [(s, t) for s, t in got if s >= 0]
            if not real:
                continue
            seqs.extend(s for s, _ in real)
            if timed:
                lat_ns.extend(now_ns - t for _, t in real)
            with sh.done.get_lock():
                sh.done.value += len(real)
            last = time.time()
    except Exception as exc:  # noqa: BLE001  reported in the table, the run goes on
        errors.append(bb.describe_error(exc))
    finally:
        c.close()
    out.put({"idx": idx, "seqs": seqs.tobytes(), "lat_ns": lat_ns.tobytes(),
             "redelivered": redelivered, "commits": commits, "errors": errors[:5],
             "last": last})


def run_workers(target: Callable[..., None], n: int, args: tuple, threads: bool,
                sh: Shared) -> tuple[list[Any], Any]:
    """Start n workers (processes, or threads of this process); returns them and the queue."""
    out: Any = mp.Queue()
    cls: Any = threading.Thread if threads else mp.Process
    workers = [cls(target=target, args=(i, *args, sh, out), daemon=True) for i in range(n)]
    for w in workers:
        w.start()
    return workers, out


def collect(workers: list[Any], out: Any, n: int, timeout: float) -> list[dict]:
    results = []
    end = time.monotonic() + timeout
    for _ in range(n):
        results.append(out.get(timeout=max(1.0, end - time.monotonic())))
    for w in workers:
        w.join(10)
    return sorted(results, key=lambda r: r["idx"])


def share_throughput(bootstrap: str, topic: str, total: int, consumers: int, threads: bool,
                     timeout: float, data_dir: Path | None,
                     cpu: Callable[[], float | None] = bb._no_cpu,  # noqa: SLF001
                     sync: bool = True) -> dict:
    """msgs/s of `consumers` ShareConsumers draining `total` records; checks that every
    record was delivered exactly once (`sync`: and acknowledged, commit_sync returned)."""
    group = new_share_group(bootstrap, "share")
    sh = Shared()
    t_start = time.time()
    workers, out = run_workers(share_worker, consumers,
                               (bootstrap, group, topic, total, t_start + timeout, False,
                                True, sync), threads, sh)
    # Every consumer has acknowledged warm-up records (so it is a member with an
    # assignment), or 60 s passed: the clock starts.
    join_deadline = time.monotonic() + 60
    while sum(sh.ready[:consumers]) < consumers and time.monotonic() < join_deadline:
        time.sleep(0.005)
    joined = sum(sh.ready[:consumers])
    state0 = state_topic_bytes(data_dir)
    cpu0 = cpu()
    sh.first.value = time.time()
    results = collect(workers, out, consumers, timeout + 30)
    cpu1 = cpu()
    state1 = state_topic_bytes(data_dir)
    seqs = array("q")
    for r in results:
        seqs.frombytes(r["seqs"])
    unique = len(set(seqs))
    last = max(r["last"] for r in results)
    errors = [e for r in results for e in r["errors"]]
    res = {
        "consumers": consumers, "threads": threads, "records": len(seqs),
        "unique": unique, "duplicates": len(seqs) - unique,
        "redelivered": sum(r["redelivered"] for r in results),
        "commits": sum(r["commits"] for r in results),
        "per_consumer": [len(r["seqs"]) // 8 for r in results],
        "join_s": sh.first.value - t_start, "joined": joined,
        "errors": errors[:5],
    }
    if unique < total:
        raise RuntimeError(f"only {unique:,} of {total:,} records acknowledged within "
                           f"{timeout:.0f} s ({res}")
    elapsed = last - sh.first.value
    res.update(seconds=elapsed, msgs_per_s=total / elapsed)
    if cpu0 is not None and cpu1 is not None:  # includes the workers' close()
        res["broker_cpu_us_per_record"] = (cpu1 - cpu0) / total * 1e6
    if state0 is not None and state1 is not None:
        res["state_bytes"] = state1 - state0
        res["state_bytes_per_record"] = (state1 - state0) / total
        res["state_bytes_per_commit"] = (state1 - state0) / max(res["commits"], 1)
    return res


def share_latency(bootstrap: str, seconds: float, timeout: float, threads: bool) -> dict:
    """Produce at LATENCY_RATE to one partition; 3 ShareConsumers acknowledge;
    latency = commit_sync returned - send time (both time.time_ns(), one machine)."""
    topic = bb.create_topic(bootstrap, "share-lat", 1)
    group = new_share_group(bootstrap, "share-lat")
    n = int(LATENCY_RATE * seconds)
    sh = Shared()
    workers, out = run_workers(share_worker, LATENCY_CONSUMERS,
                               (bootstrap, group, topic, n, time.time() + seconds + timeout,
                                True, False, True), threads, sh)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                  "enable.idempotence": False})
    warm_end = time.monotonic() + 20
    while sum(sh.ready[:LATENCY_CONSUMERS]) < LATENCY_CONSUMERS and time.monotonic() < warm_end:
        p.produce(topic, record(-1, 0))
        p.poll(0)
        time.sleep(0.01)
    warm = sum(sh.ready[:LATENCY_CONSUMERS])
    p.flush(10)
    time.sleep(0.5)
    start = time.monotonic()
    for i in range(n):
        due = start + i / LATENCY_RATE
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        p.produce(topic, record(i, time.time_ns()))
        p.poll(0)
    p.flush(30)
    end = time.monotonic() + timeout
    while sh.done.value < n and time.monotonic() < end:
        time.sleep(0.05)
    sh.stop.value = 1
    results = collect(workers, out, LATENCY_CONSUMERS, 60)
    lat = array("q")
    for r in results:
        lat.frombytes(r["lat_ns"])
    ms = sorted(v / 1e6 for v in lat)
    if len(ms) < n:
        raise RuntimeError(f"only {len(ms):,} of {n:,} latency records acknowledged")
    return {"records": n, "warm_consumers": warm, "p50_ms": bb.percentile(ms, 50),
            "p99_ms": bb.percentile(ms, 99), "max_ms": ms[-1],
            "per_consumer": [len(r["lat_ns"]) // 8 for r in results],
            "errors": [e for r in results for e in r["errors"]][:5]}


def classic_throughput(bootstrap: str, topic: str, total: int, timeout: float) -> dict:
    """One classic-group Consumer (subscribe, fresh group) reading `total` records; as
    broker_bench's floor row, fetch.queue.backoff.ms=1, everything else default."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"classic-{uuid.uuid4().hex[:8]}",
                  "auto.offset.reset": "earliest", "fetch.queue.backoff.ms": 1,
                  "enable.partition.eof": False})
    c.subscribe([topic])
    got = 0
    first = 0.0
    deadline = time.monotonic() + timeout
    try:
        while got < total and time.monotonic() < deadline:
            for m in c.consume(500, 0.2):
                if m.error() is None:
                    _REC.unpack_from(m.value())
                    got += 1
            if got and not first:
                first = time.monotonic()
        last = time.monotonic()
    finally:
        c.close()
    if got < total:
        raise RuntimeError(f"classic consumer: {got:,} of {total:,} records")
    return {"records": got, "seconds": last - first, "msgs_per_s": total / (last - first)}


# --------------------------------------------------------------------------- memory


def share_memory(broker: bb.Broker, data_dir: Path | None, timeout: float) -> dict:
    """RSS with MEM_PARTITIONS share-partitions each holding MEM_LOCKS acquired records:
    one member (ShareGroupHeartbeat + ShareFetch by hand, tests' `Member`) fetches with
    no acknowledgements until nothing more is handed out (the record-lock cap)."""
    from tests.integration.test_share_fetch import Member

    assert broker.proc is not None
    bootstrap = broker.bootstrap
    topic = bb.create_topic(bootstrap, "share-mem", MEM_PARTITIONS)
    produce(bootstrap, topic, MEM_PARTITIONS * MEM_PER_PARTITION, MEM_PARTITIONS)
    group = new_share_group(bootstrap, "share-mem",
                            **{"share.record.lock.duration.ms": "60000"})
    port = int(bootstrap.rpartition(":")[2])
    topic_id = _topic_id(port, topic)
    time.sleep(2)
    rss0 = rss_bytes(broker.proc.pid)
    member_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    m = Member(port, group, member_id, topic_id, partitions=tuple(range(MEM_PARTITIONS)),
               join=topic)
    held = [0] * MEM_PARTITIONS
    t0 = time.monotonic()
    idle = 0
    try:
        while idle < 3 and time.monotonic() - t0 < timeout:
            resp = m.fetch(wait_ms=500, max_records=10_000)
            n = 0
            for t in resp.responses:
                for p in t.partitions:
                    for r in p.acquired_records:
                        held[p.partition_index] += r.last_offset - r.first_offset + 1
                        n += r.last_offset - r.first_offset + 1
            idle = idle + 1 if n == 0 else 0
        acquire_s = time.monotonic() - t0
        time.sleep(1)
        rss1 = rss_bytes(broker.proc.pid)
    finally:
        m.close()
    locked = sum(held)
    return {"partitions": MEM_PARTITIONS, "records_per_partition": MEM_PER_PARTITION,
            "locked": locked, "locked_min": min(held), "locked_max": max(held),
            "acquire_s": acquire_s, "rss_before": rss0, "rss_after": rss1,
            "rss_delta_per_locked": (rss1 - rss0) / max(locked, 1)}


def _topic_id(port: int, topic: str) -> uuid.UUID:
    from tests.support.wire import RawClient

    client = RawClient(bb.HOST, port)
    try:
        meta = client.request(3, 12, {"topics": [{"name": topic, "topic_id": None}],
                                      "allow_auto_topic_creation": False,
                                      "include_topic_authorized_operations": False})
        return meta.topics[0].topic_id
    finally:
        client.close()


# --------------------------------------------------------------------------- RabbitMQ


class RabbitNode:
    """A private RabbitMQ node: free loopback ports (AMQP, distribution, its own epmd),
    data, logs and the Erlang cookie (temp HOME) in a temp dir; stopped after the run."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = bb.free_port()
        self.epmd_port = bb.free_port()
        home = workdir / "home"
        home.mkdir(parents=True)
        cookie = home / ".erlang.cookie"
        cookie.write_text(uuid.uuid4().hex)
        cookie.chmod(0o400)
        (workdir / "enabled_plugins").write_text("[].\n")
        (workdir / "rabbitmq-env.conf").write_text("")
        self.env = {
            **os.environ, "HOME": str(home),
            "RABBITMQ_NODE_PORT": str(self.port), "RABBITMQ_NODE_IP_ADDRESS": bb.HOST,
            "RABBITMQ_NODENAME": f"hwbench{self.port}@localhost",
            "RABBITMQ_DIST_PORT": str(bb.free_port()), "ERL_EPMD_PORT": str(self.epmd_port),
            "RABBITMQ_MNESIA_BASE": str(workdir / "mnesia"),
            "RABBITMQ_LOG_BASE": str(workdir / "log"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(workdir / "enabled_plugins"),
            "RABBITMQ_CONF_ENV_FILE": str(workdir / "rabbitmq-env.conf"),
            "RABBITMQ_CONFIG_FILE": str(workdir / "rabbitmq"),
        }
        self.proc: subprocess.Popen | None = None
        self.version = ""

    def start(self, timeout: float) -> None:
        import pika

        server = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")
        if not server.exists():
            raise RuntimeError("rabbitmq-server not installed: run `make rabbitmq`")
        self.log = open(self.workdir / "server.out", "wb")
        self.proc = subprocess.Popen([str(server)], env=self.env, stdout=self.log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True, cwd=self.workdir)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"rabbitmq-server exited {self.proc.returncode}: "
                                   f"{(self.workdir / 'server.out').read_text()[-500:]}")
            try:
                conn = pika.BlockingConnection(self.params())
                version = conn._impl.server_properties.get("version", "")  # noqa: SLF001
                self.version = version.decode() if isinstance(version, bytes) else str(version)
                conn.close()
                return
            except pika.exceptions.AMQPConnectionError:
                if time.monotonic() > deadline:
                    raise TimeoutError("rabbitmq not ready") from None
                time.sleep(0.3)

    def params(self) -> Any:
        import pika

        return pika.ConnectionParameters(bb.HOST, self.port, heartbeat=0)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
            except ProcessLookupError:
                pass
        epmd = shutil.which("epmd")
        if epmd:  # only the epmd on this node's own port
            subprocess.run([epmd, "-kill"], env=self.env, capture_output=True, timeout=10,
                           check=False)


def rabbit_publish(node: RabbitNode, queue: str, count: int) -> float:
    import pika

    conn = pika.BlockingConnection(node.params())
    ch = conn.channel()
    ch.queue_declare(queue, durable=True, arguments={"x-queue-type": "quorum"})
    t0 = time.monotonic()
    props = pika.BasicProperties(delivery_mode=2)
    for i in range(count):
        ch.basic_publish("", queue, record(i), props)
    while ch.queue_declare(queue, passive=True).method.message_count < count:
        time.sleep(0.1)
    conn.close()
    return time.monotonic() - t0


def rabbit_worker(idx: int, node_port: int, queue: str, total: int, deadline: float,
                  sh: Shared, out: Any) -> None:
    """A pika consumer: prefetch 500, basic_ack of every message (manual acks)."""
    import pika

    conn = pika.BlockingConnection(pika.ConnectionParameters(bb.HOST, node_port, heartbeat=0))
    ch = conn.channel()
    ch.basic_qos(prefetch_count=RABBIT_PREFETCH)
    seqs = array("q")
    state = {"last": 0.0}

    def on_msg(chan: Any, method: Any, _props: Any, body: bytes) -> None:
        seqs.append(_REC.unpack_from(body)[0])
        chan.basic_ack(method.delivery_tag)
        with sh.done.get_lock():
            sh.done.value += 1
        state["last"] = time.time()

    sh.ready[idx] = 1  # connected: wait for the others, then consume
    while sh.first.value == 0.0 and time.time() < deadline:
        time.sleep(0.002)
    ch.basic_consume(queue, on_msg, auto_ack=False)
    while sh.done.value < total and time.time() < deadline:
        conn.process_data_events(time_limit=0.05)
    conn.close()
    out.put({"idx": idx, "seqs": seqs.tobytes(), "last": state["last"]})


def rabbit_throughput(node: RabbitNode, consumers: int, total: int, timeout: float,
                      threads: bool) -> dict:
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    publish_s = rabbit_publish(node, queue, total)
    sh = Shared()
    workers, out = run_workers(rabbit_worker, consumers,
                               (node.port, queue, total, time.time() + timeout), threads, sh)
    ready_deadline = time.monotonic() + 60
    while sum(sh.ready[:consumers]) < consumers and time.monotonic() < ready_deadline:
        time.sleep(0.005)
    sh.first.value = time.time()
    results = collect(workers, out, consumers, timeout + 30)
    seqs = array("q")
    for r in results:
        seqs.frombytes(r["seqs"])
    unique = len(set(seqs))
    if unique < total:
        raise RuntimeError(f"rabbitmq: {unique:,} of {total:,} records")
    elapsed = max(r["last"] for r in results) - sh.first.value
    return {"consumers": consumers, "records": len(seqs), "unique": unique,
            "duplicates": len(seqs) - unique, "publish_s": publish_s,
            "per_consumer": [len(r["seqs"]) // 8 for r in results],
            "seconds": elapsed, "msgs_per_s": total / elapsed}


# --------------------------------------------------------------------------- runs


def kafka_share_version(bootstrap: str) -> str:
    """`kafka-features describe`'s share.version line (is share.version=1 finalized?)."""
    from tests.support.kafka_reference import run_tool

    out = run_tool("kafka-features", "--bootstrap-server", bootstrap, "describe",
                   timeout=120).stdout
    lines = [ln for ln in out.splitlines() if "share.version" in ln]
    return " ".join(lines[0].split()) if lines else "share.version not listed"


def guarded(results: dict, key: str, fn: Callable[[], dict]) -> None:
    """Run one workload (unless --only leaves it out); an error goes into its cell and
    the run goes on."""
    if ONLY and key not in ONLY:
        return
    try:
        results[key] = fn()
        log(f"  {key}: " + ", ".join(f"{k}={v:,.1f}" if isinstance(v, float) else f"{k}={v}"
                                     for k, v in results[key].items()))
    except Exception as exc:  # noqa: BLE001
        results[key] = {"error": bb.describe_error(exc)}
        log(f"  {key}: ERROR {bb.describe_error(exc)}")


def pin_broker(broker: bb.Broker) -> None:
    """--pin: every thread of the broker on CPU 1 (the clients run on CPU 0), to see which
    side a workload saturates without the scheduler moving them between cores. Threads
    the broker starts later inherit it."""
    if broker.proc is None:
        return
    for tid in os.listdir(f"/proc/{broker.proc.pid}/task"):
        os.sched_setaffinity(int(tid), {1})


def broker_round(name: str, args: argparse.Namespace, first: bool) -> dict:
    """One freshly started broker: the throughput workloads, plus (first round) latency
    and memory."""
    res: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix=f"share-bench-{name}-") as tmp:
        broker = bb.make_broker(name, None, Path(tmp))
        if isinstance(broker, bb.KafkaBroker):
            broker.heap = args.kafka_heap
        data_dir = Path(tmp) / "data"
        try:
            broker.start(120 if name == "kafka" else 60)
            if args.pin:
                pin_broker(broker)
            bs = broker.bootstrap
            if name == "kafka" and first:
                res["share_version"] = kafka_share_version(bs)
                log(f"  kafka features: {res['share_version']}")
            threads = args.workers == "thread"
            topics = {}
            for parts in PARTITION_COUNTS:
                topics[parts] = bb.create_topic(bs, f"share-{parts}p", parts)
                s = produce(bs, topics[parts], args.records, parts, WARMUP_RECORDS)
                log(f"{name}: produced {args.records:,} to {parts} partition(s) in {s:.2f} s")
            guarded(res, "classic 1p", lambda: classic_throughput(
                bs, topics[1], args.records + WARMUP_RECORDS, args.timeout))
            for parts in PARTITION_COUNTS:
                for n in CONSUMER_COUNTS:
                    guarded(res, f"share {n}c {parts}p", lambda n=n, parts=parts:
                            share_throughput(bs, topics[parts], args.records, n, threads,
                                             args.timeout, data_dir, broker.cpu_seconds))
            guarded(res, "share 3c 1p alt", lambda: share_throughput(
                bs, topics[1], args.records, 3, not threads, args.timeout, data_dir,
                broker.cpu_seconds))
            guarded(res, "share 3c 1p next-poll", lambda: share_throughput(
                bs, topics[1], args.records, 3, threads, args.timeout, data_dir,
                broker.cpu_seconds, sync=False))
            if first:
                guarded(res, "latency", lambda: share_latency(bs, args.latency_seconds,
                                                              args.timeout, threads))
                guarded(res, "memory", lambda: share_memory(broker, data_dir, args.timeout))
            broker.check_alive()
        except Exception as exc:  # noqa: BLE001
            res["error"] = bb.describe_error(exc)
            log(f"{name}: ERROR {res['error']}")
        finally:
            broker.stop()
    return res


def rabbit_round(args: argparse.Namespace) -> dict:
    res: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="share-bench-rabbit-") as tmp:
        node = RabbitNode(Path(tmp))
        try:
            t0 = time.monotonic()
            node.start(120)
            res["version"] = node.version
            log(f"rabbitmq {node.version}: ready on port {node.port} after "
                f"{time.monotonic() - t0:.1f} s")
            threads = args.workers == "thread"
            for n in CONSUMER_COUNTS:
                guarded(res, f"rabbit {n}c", lambda n=n: rabbit_throughput(
                    node, n, args.records, args.timeout, threads))
            guarded(res, "rabbit 3c alt", lambda: rabbit_throughput(
                node, 3, args.records, args.timeout, not threads))
        except Exception as exc:  # noqa: BLE001
            res["error"] = bb.describe_error(exc)
            log(f"rabbitmq: ERROR {res['error']}")
        finally:
            node.stop()
    return res


def median_rate(rounds: list[dict], key: str) -> float | str | None:
    rates = [r[key]["msgs_per_s"] for r in rounds if "msgs_per_s" in r.get(key, {})]
    if rates:
        return statistics.median(rates)
    errs = [r.get(key, {}).get("error") or r.get("error") for r in rounds]
    errs = [e for e in errs if e]
    return f"error: {errs[0]}" if errs else None


def fmt(v: Any, digits: int = 0) -> str:
    if v is None:
        return "-"
    if isinstance(v, str):
        return v[:60]
    return f"{v:,.{digits}f}"


def table(all_rounds: dict[str, list[dict]], workers: str) -> str:  # noqa: C901
    hw, kf, rb = (all_rounds.get(b, []) for b in ("headwater", "kafka", "rabbitmq"))
    rows = ["| workload | headwater msgs/s | Kafka msgs/s | hw / Kafka | RabbitMQ msgs/s | "
            "hw / RabbitMQ |", "| --- | ---: | ---: | ---: | ---: | ---: |"]

    def ratio(a: Any, b: Any) -> str:
        return f"{a / b:.2f}" if isinstance(a, float) and isinstance(b, float) else "-"

    rows.append(f"| classic group, 1 consumer, 1 partition | {fmt(median_rate(hw, 'classic 1p'))}"
                f" | {fmt(median_rate(kf, 'classic 1p'))} | "
                f"{ratio(median_rate(hw, 'classic 1p'), median_rate(kf, 'classic 1p'))} | | |")
    for parts in PARTITION_COUNTS:
        for n in CONSUMER_COUNTS:
            key = f"share {n}c {parts}p"
            h, k = median_rate(hw, key), median_rate(kf, key)
            r = median_rate(rb, f"rabbit {n}c") if parts == 1 else None
            rows.append(f"| share, {n} consumer{'s' if n > 1 else ''}, {parts} partition"
                        f"{'s' if parts > 1 else ''} | {fmt(h)} | {fmt(k)} | {ratio(h, k)} | "
                        f"{fmt(r) if parts == 1 else ''} | {ratio(h, r) if parts == 1 else ''} |")
    key = "share 3c 1p alt"
    h, k, r = median_rate(hw, key), median_rate(kf, key), median_rate(rb, "rabbit 3c alt")
    alt = "processes" if workers == "thread" else "threads of one process"
    rows.append(f"| share, 3 consumers as {alt}, 1 partition (RabbitMQ: 3 consumers) | "
                f"{fmt(h)} | {fmt(k)} | {ratio(h, k)} | {fmt(r)} | {ratio(h, r)} |")
    key = "share 3c 1p next-poll"
    h, k = median_rate(hw, key), median_rate(kf, key)
    rows.append(f"| share, 3 consumers, 1 partition, acks sent with the next poll (no "
                f"commit_sync) | {fmt(h)} | {fmt(k)} | {ratio(h, k)} | | |")
    lines = ["\n".join(rows), ""]
    for name, rounds in (("headwater", hw), ("kafka", kf)):
        if not rounds:
            continue
        lat = rounds[0].get("latency", {})
        mem = rounds[0].get("memory", {})
        if "p50_ms" in lat:
            lines.append(f"{name}: produce -> commit_sync returned at {LATENCY_RATE:,} msg/s, "
                         f"1 partition, {LATENCY_CONSUMERS} consumers: p50 {lat['p50_ms']:.2f}"
                         f" ms, p99 {lat['p99_ms']:.2f} ms, max {lat['max_ms']:.2f} ms "
                         f"({lat['records']:,} records, per consumer {lat['per_consumer']})")
        elif lat:
            lines.append(f"{name}: latency: {lat}")
        if "locked" in mem:
            lines.append(f"{name}: memory: {mem['locked']:,} records locked over "
                         f"{mem['partitions']} share-partitions ({mem['locked_min']:,}-"
                         f"{mem['locked_max']:,} each): RSS {mem['rss_before'] / 1e6:,.1f} -> "
                         f"{mem['rss_after'] / 1e6:,.1f} MB "
                         f"({mem['rss_delta_per_locked']:,.0f} B per locked record)")
        elif mem:
            lines.append(f"{name}: memory: {mem}")
        per = [r[k]["state_bytes_per_record"] for r in rounds for k in r
               if isinstance(r[k], dict) and "state_bytes_per_record" in r[k]
               and k.startswith("share") and "1p" in k]
        if per:
            lines.append(f"{name}: __share_group_state bytes per acknowledged record "
                         f"(1 partition runs): {min(per):.2f}-{max(per):.2f} "
                         f"(median {statistics.median(per):.2f})")
        if "share_version" in rounds[0]:
            lines.append(f"{name}: {rounds[0]['share_version']}")
    if hw:
        c, s3 = median_rate(hw, "classic 1p"), median_rate(hw, "share 3c 1p")
        if isinstance(c, float) and isinstance(s3, float):
            lines.append(f"floor: headwater 3 share consumers, 1 partition / 1 classic "
                         f"consumer = {s3 / c:.2f} (>= 0.5: {'met' if s3 / c >= 0.5 else 'NOT met'})")
        s3n = median_rate(hw, "share 3c 1p next-poll")
        if isinstance(c, float) and isinstance(s3n, float):
            lines.append(f"       the same with acks sent on the next poll: {s3n / c:.2f}")
    if hw and kf:
        rs = [median_rate(hw, f"share {n}c {p}p") for p in PARTITION_COUNTS
              for n in CONSUMER_COUNTS]
        ks = [median_rate(kf, f"share {n}c {p}p") for p in PARTITION_COUNTS
              for n in CONSUMER_COUNTS]
        pairs = [(a / b) for a, b in zip(rs, ks, strict=True)
                 if isinstance(a, float) and isinstance(b, float)]
        if pairs:
            lines.append(f"floor: headwater / Kafka share groups, per workload: "
                         f"{', '.join(f'{x:.2f}' for x in pairs)} (>= 1.0: "
                         f"{'met' if min(pairs) >= 1.0 else 'NOT met'} on "
                         f"{sum(x >= 1.0 for x in pairs)} of {len(pairs)})")
    for name, rounds in all_rounds.items():
        for i, r in enumerate(rounds):
            for k, v in r.items():
                if k == "error" or (isinstance(v, dict) and "error" in v):
                    lines.append(f"{name} round {i + 1} {k}: {v if k == 'error' else v['error']}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", default="headwater,kafka,rabbitmq")
    ap.add_argument("--quick", action="store_true", help="20k records, 3 s latency: a smoke run")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--records", type=int, default=None)
    ap.add_argument("--latency-seconds", type=float, default=None)
    ap.add_argument("--timeout", type=float, default=180.0)
    ap.add_argument("--kafka-heap", default=bb.KAFKA_HEAP)
    ap.add_argument("--workers", choices=("thread", "process"), default="thread",
                    help="each consumer a thread of this process (default: measured faster "
                         "on 2 cores, the clients release the GIL while they wait) or a "
                         "process; the other way is measured once for 3 consumers")
    ap.add_argument("--json", metavar="PATH")
    ap.add_argument("--pin", action="store_true",
                    help="clients on CPU 0, the broker on CPU 1 (see pin_broker)")
    ap.add_argument("--only", default="", metavar="KEYS",
                    help="comma-separated workloads to run, e.g. 'classic 1p,share 3c 1p'")
    args = ap.parse_args()
    if args.pin:
        os.sched_setaffinity(0, {0})  # this process, its threads and its workers
    ONLY.update(k.strip() for k in args.only.split(",") if k.strip())
    mp.set_start_method("spawn")  # no fork of a process that runs librdkafka threads
    args.records = args.records or (20_000 if args.quick else RECORDS)
    args.latency_seconds = args.latency_seconds or (3.0 if args.quick else 10.0)
    names = [b.strip() for b in args.brokers.split(",") if b.strip()]
    kafka_like = [b for b in names if b in ("headwater", "kafka")]
    all_rounds: dict[str, list[dict]] = {b: [] for b in names}
    for rnd in range(args.rounds):
        order = kafka_like[rnd % len(kafka_like):] + kafka_like[:rnd % len(kafka_like)] \
            if kafka_like else []
        for name in order:
            log(f"round {rnd + 1}/{args.rounds}: {name}")
            all_rounds[name].append(broker_round(name, args, first=rnd == 0))
        if "rabbitmq" in names:
            log(f"round {rnd + 1}/{args.rounds}: rabbitmq")
            all_rounds["rabbitmq"].append(rabbit_round(args))
    out = table(all_rounds, args.workers)
    print(f"share_bench: {args.records:,} x {RECORD_SIZE} B records, producer batches of up "
          f"to {BATCH_RECORDS}, consumers as {args.workers}s, {args.rounds} round(s), medians; confluent-kafka "
          f"{bb.client_version()}, Kafka {bb.kafka_version()}, Python "
          f"{platform.python_version()}, {os.cpu_count()} CPUs")
    print(out)
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "rounds": all_rounds,
                                               "table": out}, indent=1, default=str))


if __name__ == "__main__":
    main()
