"""Scale-out on one machine: 1, 2, 3 (and 4) shared brokers, each held to the same CPU
quota, beside one local broker under that quota, with more client load than they carry.

On a 2-core machine, brokers left to take what they can share the cores with each other,
the clients, PostgreSQL and versitygw, and three brokers cannot show what three machines
would do. Here every broker runs in a cgroup v1 group of its own with `cpu.cfs_quota_us`
set to `--quota` of a core (root only); PostgreSQL and versitygw run in groups without a
quota (their CPU is counted, not limited); the clients run outside. So a broker's work
per record is what limits the cluster, as on separate machines. Each broker's group also
holds its memory to `--memory` MiB, page cache included (see `CpuGroup`), and every
broker runs its upkeep (merging small pieces) every second (`UPKEEP_EVERY`).

Workloads, each for `--seconds` (time-based, so a faster setup moves more records):
produce 100 B and 1 KiB (acks=all, idempotent; `--producers` processes of librdkafka,
enough to keep the brokers busy), consume (`--producers` consumers, each assigned a share
of the 100 B topic's partitions), and a share group's accept rate (`--producers` share consumers,
implicit acknowledgement). During each produce workload a probe producer sends one
record every 10 ms: its produce latency under load (p50/p99). Figures: msgs/s, MB/s, per
broker msgs/s, CPU seconds per GB (the brokers' summed cpuacct; PostgreSQL's and
versitygw's; from the load's start until the brokers are idle after it, over every byte
it wrote, so the merging a load leaves behind is its cost, not the next workload's),
PostgreSQL write transactions and objects per second; then each setup's
throughput as a multiple of one shared broker's, and the issue-36 floors (`--check`
exits 1 when one is missed).

    python bench/scale_bench.py [--quota 0.08] [--brokers 1,2,3] [--seconds 10]
                                [--partitions 12] [--producers 3] [--consumers N]
                                [--workloads produce,consume,share,transactions]
                                [--runs 1] [--check]

PostgreSQL and versitygw are started here (private, on loopback), as the tests do.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent))
sys.path.insert(0, str(BENCH_DIR))

import broker_bench as bb  # noqa: E402
from cluster_bench import Setup  # noqa: E402
from confluent_kafka import Consumer, Producer, ShareConsumer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
)

from tests.support.broker_process import BrokerProcess  # noqa: E402
from tests.support.engines import PostgresServer, VersityGateway, shared_broker_args  # noqa: E402

CGROUP = Path("/sys/fs/cgroup")
PERIOD_US = 100_000
GB = 1_000_000_000
PRODUCER: dict[str, Any] = {"acks": "all", "enable.idempotence": True, "linger.ms": 5,
                            "batch.size": 1_000_000, "compression.type": "none",
                            "queue.buffering.max.messages": 200_000,
                            "delivery.report.only.error": True}


TXN_PRODUCER: dict[str, Any] = {k: v for k, v in PRODUCER.items()
                                if k != "delivery.report.only.error"}
TXN_RECORDS = 1_000  # records per transaction (a consume-transform-produce batch)
UPKEEP_EVERY = "log.cleaner.backoff.ms=1000"


class CpuGroup:
    """One cgroup v1 group in the `cpu` and `cpuacct` hierarchies: a quota (None: no
    limit) and the CPU time of every process in it, children forked later included.
    With `memory_mb`, also a `memory` group of that limit: its page cache then stays
    at a steady size, recycling its own pages, as on a server that has run a while.
    Without it every GB written takes pages the machine has not used lately, and
    this VM charges each such page's first touch to the writer (new page-cache pages
    cost 1.3-3 CPU s/GB here, reused ones 0.3-0.5): the spread between runs was
    mostly that."""

    def __init__(self, name: str, quota_cores: float | None,
                 memory_mb: int | None = None) -> None:
        kinds = ("cpu", "cpuacct", "memory") if memory_mb else ("cpu", "cpuacct")
        self.dirs = [CGROUP / kind / f"headwater-scale-{name}" for kind in kinds]
        for d in self.dirs:
            d.mkdir(exist_ok=True)
        quota = -1 if quota_cores is None else int(quota_cores * PERIOD_US)
        (self.dirs[0] / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (self.dirs[0] / "cpu.cfs_quota_us").write_text(str(quota))
        if memory_mb:
            (self.dirs[2] / "memory.limit_in_bytes").write_text(str(memory_mb << 20))

    def add(self, pid: int) -> None:
        """`pid` and its descendants now (later children follow by themselves)."""
        for p in [pid, *_descendants(pid)]:
            for d in self.dirs:
                try:
                    (d / "cgroup.procs").write_text(str(p))
                except OSError:  # exited meanwhile
                    pass

    def seconds(self) -> float:
        return int((self.dirs[1] / "cpuacct.usage").read_text()) / 1e9

    def remove(self) -> None:
        for d in self.dirs:
            root = d.parent / "cgroup.procs"
            for line in (d / "cgroup.procs").read_text().split():
                try:
                    root.write_text(line)
                except OSError:
                    pass
            try:
                d.rmdir()
            except OSError:
                pass


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


# ---- client processes (each a librdkafka client of its own, outside every quota) ----
WARM_S = 2.0  # producing before the measured window opens


def end_offsets(bootstrap: str, topic: str, partitions: int) -> int:
    """The sum of `topic`'s high watermarks: what is committed (acks=all: acknowledged
    or about to be)."""
    from confluent_kafka import TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "scale-bench-hw"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                   for p in range(partitions))
    finally:
        consumer.close()


@contextmanager
def producing(args: argparse.Namespace, bootstrap: str, topic: str, size: int
              ) -> Iterator[list[int]]:
    """`--producers` producer processes sending `size`-byte records to `topic` until
    the block ends; then the failed deliveries' count (kcat: its exit code)."""
    failures = [0]
    if args.client == "kcat":  # C: about 0.65 CPU s per million records here
        line = b"x" * (size - 1)
        procs = []
        for _ in range(args.producers):
            feed = subprocess.Popen(["yes", line], stdout=subprocess.PIPE)
            procs.append((feed, subprocess.Popen(
                ["kcat", "-P", "-b", bootstrap, "-t", topic, "-q",
                 *(a for k, v in PRODUCER.items() if k != "delivery.report.only.error"
                   for a in ("-X", f"{k}={str(v).lower()}"))],
                stdin=feed.stdout, stderr=subprocess.PIPE)))
            assert feed.stdout is not None
            feed.stdout.close()
        try:
            yield failures
        finally:  # the window is measured from the high watermarks: the queued rest goes
            for feed, kcat in procs:
                feed.kill()
                kcat.kill()
            for feed, kcat in procs:
                feed.wait(10)
                _out, err = kcat.communicate(timeout=10)
                bad = [ln for ln in err.decode(errors="replace").splitlines()
                       if "failed" in ln.lower() or "error" in ln.lower()]
                failures[0] += len(bad)
                if bad:
                    bb.log(f"kcat: {len(bad)} error lines, e.g. {bad[0][:200]}")
        return
    ctx = mp.get_context("spawn")  # python: about 1.1 CPU s per million records here
    queue = ctx.Queue()
    seconds = WARM_S + args.seconds + 30.0
    stop = ctx.Event()
    workers = [ctx.Process(target=_produce_worker,
                           args=(bootstrap, topic, size, seconds, stop, queue))
               for _ in range(args.producers)]
    for p in workers:
        p.start()
    try:
        yield failures
    finally:
        stop.set()
        failures[0] += sum(queue.get(timeout=300)[1] for _ in workers)
        for p in workers:
            p.join(30)


def _produce_worker(bootstrap: str, topic: str, size: int, seconds: float,
                    stop: Any, out: Any) -> None:
    errors = [0]

    def failed(err: Any, _msg: Any) -> None:
        errors[0] += 1
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER, "on_delivery": failed})
    producer.list_topics(topic=topic, timeout=10)
    value, sent = os.urandom(size), 0
    end = time.monotonic() + seconds
    while time.monotonic() < end and not stop.is_set():
        for _ in range(1000):
            try:
                producer.produce(topic, value)
                sent += 1
            except BufferError:
                producer.poll(0.005)
        producer.poll(0)
    left = producer.flush(60)
    out.put((sent - left - errors[0], errors[0] + left))


def _consume_worker(bootstrap: str, topic: str, partitions: int, seconds: float,
                    index: int, count: int, out: Any) -> None:
    """Partitions index, index + count, ... of `topic` (assigned: no group's rebalance
    in the few seconds measured)."""
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "scale-bench",
                         **bb.CONSUMER_THROUGHPUT_CONFIG})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING)
                     for p in range(index, partitions, count)])
    got, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        got += sum(1 for m in consumer.consume(1000, 0.2) if m.error() is None)
    consumer.close()
    out.put((got, 0))


def _share_worker(bootstrap: str, topic: str, group: str, seconds: float,
                  _index: int, _count: int, out: Any) -> None:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumer.subscribe([topic])
    got, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        got += sum(1 for m in consumer.poll(0.2) or [] if m.error() is None)
    consumer.close()
    out.put((got, 0))


def _txn_worker(bootstrap: str, topic: str, seconds: float, index: int, _count: int,
                out: Any) -> None:
    """Transactions of `TXN_RECORDS` 100 B records each, one after another: the records
    committed and each commit's seconds (commit_transaction, the markers included)."""
    producer = Producer({"bootstrap.servers": bootstrap, **TXN_PRODUCER,
                         "transactional.id": f"scale-{uuid.uuid4().hex[:8]}-{index}"})
    producer.init_transactions(60)
    value, committed, commits = os.urandom(100), 0, []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        producer.begin_transaction()
        for _ in range(TXN_RECORDS):
            while True:
                try:
                    producer.produce(topic, value)
                    break
                except BufferError:
                    producer.poll(0.005)
        producer.flush(60)
        t = time.perf_counter()
        producer.commit_transaction(60)
        commits.append(time.perf_counter() - t)
        committed += TXN_RECORDS
    out.put((committed, commits))


def _gather(count: int, target: Callable[..., None], *args: Any) -> list[Any]:
    """Run `target(*args, index, count, queue)` in `count` processes; what each put."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args, i, count, queue)) for i in range(count)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(30)
    return results


def _in_processes(count: int, target: Callable[..., None], *args: Any) -> tuple[int, int]:
    """`_gather`, summed."""
    results = _gather(count, target, *args)
    return sum(r[0] for r in results), sum(r[1] for r in results)


@contextmanager
def latency_probe(bootstrap: str, topic: str) -> Iterator[list[float]]:
    """A producer sending one record every 10 ms meanwhile: its produce latencies (ms)."""
    latencies: list[float] = []
    stop = threading.Event()

    def run() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})

        def done(err: Any, msg: Any) -> None:
            if err is None and msg.latency() is not None:
                latencies.append(msg.latency() * 1000)
        while not stop.is_set():
            producer.produce(topic, b"probe", on_delivery=done)
            producer.poll(0.01)
        producer.flush(30)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield latencies
    finally:
        stop.set()
        thread.join(60)


class Counted:
    """CPU of the brokers (summed) and of the engines, between two reads."""

    def __init__(self, brokers: list[CpuGroup], engines: dict[str, CpuGroup],
                 setup: Setup, quota: float) -> None:
        self.brokers, self.engines, self.setup = brokers, engines, setup
        self.quota = quota

    def read(self) -> dict[str, float]:
        xacts, objects = self.setup.counters()
        return {"brokers": sum(g.seconds() for g in self.brokers),
                **{k: g.seconds() for k, g in self.engines.items()},
                "xacts": xacts, "objects": objects, "t": time.perf_counter()}

    def settled(self, brokers: int, deadline_s: float = 60) -> dict[str, float]:
        """Once the load has stopped: wait until the brokers are idle (under a tenth of
        their quota for a second), so the work a load leaves behind (the last windows,
        merging the small pieces it wrote) is counted with it."""
        last = self.read()
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            time.sleep(1.0)
            now = self.read()
            if now["brokers"] - last["brokers"] < 0.1 * self.quota * brokers:
                return now
            last = now
        return last

    def figures(self, before: dict[str, float], after: dict[str, float], records: int,
                size: int, brokers: int) -> dict[str, float]:
        seconds = after["t"] - before["t"]
        gb = records * size / GB
        out = {"msgs_per_s": records / seconds, "mb_per_s": records * size / 1e6 / seconds,
               "per_broker_msgs_per_s": records / seconds / brokers,
               # below ~90 %: something else (clients, engines, the machine) held them back
               "quota_used_pct": 100 * (after["brokers"] - before["brokers"])
               / (self.quota * brokers * seconds)}
        if gb:  # nothing moved: no cost per GB
            out["broker_cpu_s_per_gb"] = (after["brokers"] - before["brokers"]) / gb
            for k in self.engines:
                out[f"{k}_cpu_s_per_gb"] = (after[k] - before[k]) / gb
        if self.setup.dsn is not None:
            out["pg_tx_per_s"] = (after["xacts"] - before["xacts"]) / seconds
            out["objects_per_s"] = (after["objects"] - before["objects"]) / seconds
        return out


@contextmanager
def profiled(setup: Setup, workload: str, args: argparse.Namespace) -> Iterator[None]:
    """With `--profile DIR`: py-spy samples every broker (without pausing it) for the
    workload's seconds; one collapsed-stack file per broker (flamegraph.pl or
    speedscope read them)."""
    if args.profile is None:
        yield
        return
    tag = f"{setup.name}-{workload}".replace(" ", "_")
    pids = [(n, proc.proc.pid) for n, proc in enumerate(setup.procs, 1)
            if proc.proc is not None]
    if args.profiler == "perf":  # on-CPU samples only: right under a quota's throttling
        spies = [subprocess.Popen(
            ["perf", "record", "-F", "2999", "-g", "-p", str(pid), "-o",
             str(Path(args.profile) / f"{tag}-broker{n}.perf"), "--", "sleep",
             str(args.seconds)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for n, pid in pids]
    else:  # Python frames while the GIL is held (its own work; wall-clock otherwise)
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        spies = [subprocess.Popen(
            [spy, "record", "--nonblocking", "--gil", "--format", "raw", "--rate", "250",
             "--duration", str(int(args.seconds)), "--pid", str(pid),
             "--output", str(Path(args.profile) / f"{tag}-broker{n}.txt")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for n, pid in pids]
    try:
        yield
    finally:
        for s in spies:
            s.wait(60)


#: What `--workloads` chooses from.
WORKLOADS = ("produce", "consume", "share", "transactions")


def run_setup(setup: Setup, count: Counted, args: argparse.Namespace) -> dict[str, dict]:
    bs, brokers = setup.bootstrap, len(setup.procs)
    out: dict[str, dict] = {}
    warm = bb.create_topic(bs, "warm", args.partitions)
    with producing(args, bs, warm, 100):
        time.sleep(WARM_S)
    topics = {}
    sizes = ((100, "produce 100 B"), (1024, "produce 1 KiB"))
    for size, name in sizes if "produce" in args.workloads else sizes[:1]:
        topic = topics[size] = bb.create_topic(bs, f"p{size}", args.partitions)
        probe = bb.create_topic(bs, "probe", 1)
        start = count.read()
        with latency_probe(bs, probe) as latencies, \
                producing(args, bs, topic, size) as failures:
            time.sleep(WARM_S)  # clients connected, windows at their steady size
            before, ends = count.read(), end_offsets(bs, topic, args.partitions)
            with profiled(setup, name, args):
                time.sleep(args.seconds)
            after, acked = count.read(), end_offsets(bs, topic, args.partitions) - ends
        # Throughput from the window; cost per GB from the whole load, the work it
        # left behind included (merging runs after the windows that need it).
        whole = count.figures(start, count.settled(brokers),
                              end_offsets(bs, topic, args.partitions), size, brokers)
        lat = sorted(latencies)
        out[name] = {**count.figures(before, after, acked, size, brokers),
                     **{k: v for k, v in whole.items() if k.endswith("_cpu_s_per_gb")},
                     "failed": failures[0],
                     "p50_ms": bb.percentile(lat, 50) if lat else float("nan"),
                     "p99_ms": bb.percentile(lat, 99) if lat else float("nan")}
        setup.check_alive()
        bb.log(f"{setup.name}: {name} {out[name]['msgs_per_s']:,.0f} msgs/s")
    consumers = args.consumers or args.producers
    if "consume" in args.workloads:
        before = count.read()
        got, _ = _in_processes(consumers, _consume_worker, bs, topics[100],
                               args.partitions, args.seconds)
        out["consume 100 B"] = count.figures(before, count.read(), got, 100, brokers)
    if "share" in args.workloads:
        group = f"scale-share-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": bs})
        resource = ConfigResource("group", group, incremental_configs=[ConfigEntry(
            "share.auto.offset.reset", "earliest",
            incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([resource])[resource].result(30)
        before = count.read()
        with profiled(setup, "share accept", args):
            got, _ = _in_processes(consumers, _share_worker, bs, topics[100], group,
                                   args.seconds)
        out["share accept 100 B"] = count.figures(before, count.read(), got, 100, brokers)
    if "transactions" in args.workloads:
        txn_topic = bb.create_topic(bs, "txn", args.partitions)
        before = count.read()
        results = _gather(args.producers, _txn_worker, bs, txn_topic, args.seconds)
        commits = sorted(1000 * c for _n, cs in results for c in cs)
        out["transactions 100 B"] = {
            **count.figures(before, count.read(), sum(n for n, _c in results), 100,
                            brokers),
            "p50_ms": bb.percentile(commits, 50) if commits else float("nan"),
            "p99_ms": bb.percentile(commits, 99) if commits else float("nan")}
    setup.check_alive()
    return out


def start_setup(name: str, brokers: int, args: argparse.Namespace, base: Path,
                postgres: PostgresServer, gateway: VersityGateway
                ) -> tuple[Setup, list[CpuGroup]]:
    d = base / f"{name}-{uuid.uuid4().hex[:6]}"
    groups = [CpuGroup(f"broker-{n}", args.quota, args.memory)
              for n in range(1, brokers + 1)]
    # Upkeep (merging) every second rather than every 15 s: spread evenly over the
    # load, not landing on a workload or missing it by the luck of the tick.
    sets = [UPKEEP_EVERY, *args.set]
    extra = [a for kv in sets for a in ("--override", kv)]
    if name == "local":
        procs, dsn = [BrokerProcess(d / "broker-1", *extra)], None
    else:
        shared = shared_broker_args(postgres, gateway, d / "shared")
        dsn = next(a.split("=", 1)[1] for a in shared
                   if a.startswith("headwater.shared.database="))
        procs = [BrokerProcess(d / f"broker-{n}", *shared, *extra, "--override", f"node.id={n}")
                 for n in range(1, brokers + 1)]
    for proc, group in zip(procs, groups, strict=True):
        proc.start(120)  # unthrottled start, then the quota
        assert proc.proc is not None
        group.add(proc.proc.pid)
    time.sleep(2.0 if brokers > 1 else 0)  # the brokers' first heartbeats under the quota
    return Setup(name if name == "local" else f"shared x{brokers}", procs, dsn), groups


def discard(setup: Setup, gateway: VersityGateway) -> None:
    """A stopped setup's files gone (its brokers' data, its objects) and written back:
    left behind, nine setups' gigabytes still being written back slowed the next ones
    (one run's local broker read 337k, 277k, 193k records/s in turn)."""
    shutil.rmtree(setup.procs[0].data_dir.parent, ignore_errors=True)
    if setup.dsn is not None:
        prefix = setup.dsn.rsplit("/", 1)[-1].split("?", 1)[0]
        shutil.rmtree(gateway.root / gateway.bucket / prefix, ignore_errors=True)
    os.sync()


def report(runs: list[dict[str, dict[str, dict]]], check: bool) -> int:
    names = list(runs[0])
    workloads = list(runs[0][names[0]])
    rows = [("msgs_per_s", "msgs/s"), ("per_broker_msgs_per_s", "msgs/s per broker"),
            ("quota_used_pct", "brokers' quota used %"),
            ("broker_cpu_s_per_gb", "broker CPU s/GB"), ("postgres_cpu_s_per_gb",
                                                         "PostgreSQL CPU s/GB"),
            ("versitygw_cpu_s_per_gb", "versitygw CPU s/GB"), ("pg_tx_per_s", "PG tx/s"),
            ("objects_per_s", "objects/s"), ("p50_ms", "p50 ms (produce: the probe's; "
                                                       "transactions: commit)"),
            ("p99_ms", "p99 ms")]

    def median(name: str, workload: str, key: str) -> float | None:
        values = [float(v) for r in runs
                  if (v := r[name][workload].get(key)) is not None]
        return statistics.median(values) if values else None

    print(f"\nmedian of {len(runs)} run(s)")
    print("\n| workload | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for workload in workloads:
        for key, unit in rows:
            cells = [median(n, workload, key) for n in names]
            if all(c is None for c in cells):
                continue
            print(f"| {workload}, {unit} | "
                  + " | ".join("—" if c is None else f"{c:,.1f}" for c in cells) + " |")
    shared = [n for n in names if n.startswith("shared")]
    one = "shared x1"
    missed = 0
    if one in names:
        print("\nthroughput as a multiple of one shared broker's (each run):")
        for workload in workloads:
            for n in shared[1:]:
                ratios = [r[n][workload]["msgs_per_s"]
                          / max(r[one][workload]["msgs_per_s"], 1e-9) for r in runs]
                floor = {"shared x2": 1.9, "shared x3": 2.8}.get(n)
                ok = floor is None or "produce" not in workload or min(ratios) >= floor
                missed += not ok
                print(f"  {workload}, {n}: " + ", ".join(f"{x:.2f}x" for x in ratios)
                      + (f" (floor {floor}x{'' if ok else ': MISSED'})"
                         if floor and "produce" in workload else ""))
        for workload in (w for w in ("produce 100 B", "produce 1 KiB") if w in workloads):
            for a, b, floor in (("shared x3", one, 1.25), (one, "local", 1.5)):
                if a in names and b in names:
                    ratios = [r[a][workload].get("broker_cpu_s_per_gb", float("nan"))
                              / r[b][workload].get("broker_cpu_s_per_gb", float("nan"))
                              for r in runs]
                    ok = all(x <= floor for x in ratios)
                    missed += not ok
                    print(f"  {workload} broker CPU s/GB, {a} / {b}: "
                          + ", ".join(f"{x:.2f}x" for x in ratios)
                          + f" (at most {floor}x{'' if ok else ': MISSED'})")
        txn = "transactions 100 B"
        if "shared x3" in names and txn in workloads:
            for key, what, limit, most in (("msgs_per_s", "throughput", 0.8, False),
                                           ("p99_ms", "commit p99", 2.0, True)):
                ratios = [r["shared x3"][txn][key] / max(r[one][txn][key], 1e-9)
                          for r in runs]
                ok = all(x <= limit for x in ratios) if most else min(ratios) >= limit
                missed += not ok
                print(f"  {txn} {what}, shared x3 / shared x1: "
                      + ", ".join(f"{x:.2f}x" for x in ratios)
                      + f" ({'at most' if most else 'floor'} {limit}x"
                      + f"{'' if ok else ': MISSED'})")
    return 1 if check and missed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quota", type=float, default=0.08, help="cores per broker")
    ap.add_argument("--memory", type=int, default=1024,
                    help="MiB of memory (page cache included) per broker; 0: no limit")
    ap.add_argument("--brokers", default="1,2,3", help="shared setups: broker counts")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--producers", type=int, default=3, help="client processes")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--no-local", action="store_true", help="skip the local broker")
    ap.add_argument("--client", choices=("kcat", "python"), default="kcat",
                    help="producers: kcat (C, the cheaper per record) or confluent-kafka")
    ap.add_argument("--workloads", default=",".join(WORKLOADS),
                    help="a comma-separated subset of %(default)s (100 B produce always "
                         "runs: the others read its topic)")
    ap.add_argument("--produce-only", action="store_true",
                    help="the produce workloads alone (--workloads produce)")
    ap.add_argument("--consumers", type=int, default=0,
                    help="consumer and share consumer processes (default: --producers)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a broker setting for every broker (repeatable)")
    ap.add_argument("--check", action="store_true", help="exit 1 when a floor is missed")
    ap.add_argument("--profile", metavar="DIR",
                    help="profile every broker during each produce workload")
    ap.add_argument("--profiler", choices=("py-spy", "perf"), default="py-spy",
                    help="py-spy (pip install py-spy) or Linux perf")
    args = ap.parse_args()
    args.workloads = {"produce"} if args.produce_only else set(args.workloads.split(","))
    if not args.workloads <= set(WORKLOADS):
        ap.error(f"--workloads: not among {', '.join(WORKLOADS)}: "
                 f"{', '.join(sorted(args.workloads - set(WORKLOADS)))}")
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or not (CGROUP / "cpu" / "cpu.cfs_quota_us").exists():
        print("scale_bench needs root and cgroup v1's cpu controller "
              f"({CGROUP / 'cpu'})", file=sys.stderr)
        return 2
    base = Path(tempfile.mkdtemp(prefix="scale-bench-"))
    postgres = PostgresServer(base / "postgres").start()
    gateway = VersityGateway(base / "objects")
    gateway.base.mkdir(parents=True, exist_ok=True)
    gateway.start()
    engines = {"postgres": CpuGroup("postgres", None), "versitygw": CpuGroup("versitygw", None)}
    # the postmaster and its processes (backends forked later follow it)
    engines["postgres"].add(int((postgres.data / "postmaster.pid").read_text().split()[0]))
    assert gateway.proc is not None
    engines["versitygw"].add(gateway.proc.pid)
    setups = ([] if args.no_local else [("local", 1)]) + [
        ("shared", int(n)) for n in args.brokers.split(",")]
    runs: list[dict[str, dict[str, dict]]] = []
    try:
        for r in range(args.runs):
            results: dict[str, dict[str, dict]] = {}
            for name, brokers in setups:
                setup, groups = start_setup(name, brokers, args, base, postgres, gateway)
                try:
                    bb.log(f"run {r + 1}: {setup.name} at {args.quota} core each")
                    results[setup.name] = run_setup(
                        setup, Counted(groups, engines, setup, args.quota), args)
                finally:
                    setup.stop()
                    for g in groups:
                        g.remove()
                    discard(setup, gateway)
            runs.append(results)
    finally:
        gateway.kill()
        postgres.remove()
        for g in engines.values():
            g.remove()
        shutil.rmtree(base, ignore_errors=True)
    return report(runs, args.check)


if __name__ == "__main__":
    sys.exit(main())
