"""The shared log's two round trips, measured on loopback: the PostgreSQL commit of a
window (`headwater/shared/sequencer.py`) and the object store's PUT of its bytes.

Starts a private PostgreSQL and versitygw (as the tests do), then prints commits/s and
commit latency p50/p99 for one writer on one partition, 4 writers on their own
partitions, and 4 and 12 writers each committing windows over 16 of 64 (32 of 384)
partitions; batch bytes inline in PostgreSQL against an object key; and versitygw PUT
latency by size. As root (cgroup v1's cpuacct), also PostgreSQL's CPU per commit and the
commits one PostgreSQL core carries at that rate (the capacity model's input,
docs/shared-log.md, "Capacity"). Numbers only: nothing here asserts on time.

    .venv/bin/python bench/shared_commit_bench.py [--seconds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "bench"))

from scale_bench import CGROUP, CpuGroup  # noqa: E402

from headwater.config import BrokerConfig  # noqa: E402
from headwater.shared import leases  # noqa: E402
from headwater.shared.objects import ObjectStore  # noqa: E402
from headwater.shared.schema import migrate  # noqa: E402
from headwater.shared.sequencer import BatchRow, PartitionCommit, commit  # noqa: E402
from headwater.shared.settings import SharedSettings  # noqa: E402
from tests.support.engines import PostgresServer, VersityGateway  # noqa: E402


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def commits(dsn: str, writers: int, partitions: int, per_window: int,
                  inline: bool, seconds: float) -> tuple[float, list[float]]:
    topic = uuid.uuid4()
    setup = await asyncpg.connect(dsn)
    for p in range(partitions):
        await leases.stamp(setup, topic, p, 1)
    await setup.close()
    conns = [await asyncpg.connect(dsn) for _ in range(writers)]
    latencies: list[float] = []
    count = 0
    stop = time.monotonic() + seconds
    payload = b"x" * 1000

    async def writer(i: int, conn: asyncpg.Connection) -> None:
        nonlocal count
        mine = [p for p in range(partitions) if p % writers == i] or [0]
        ends = dict.fromkeys(mine, 0)
        k = 0
        while time.monotonic() < stop:
            chosen = [mine[(k + j) % len(mine)] for j in range(min(per_window, len(mine)))]
            k += per_window
            window = [PartitionCommit(topic, p, 1, [BatchRow(
                ends[p], ends[p] + 9, 0, len(payload), 1, inline=payload if inline else None)])
                for p in chosen]
            start = time.perf_counter()
            await commit(conn, None if inline else f"o-{uuid.uuid4().hex}",
                         len(payload), window)
            latencies.append((time.perf_counter() - start) * 1000)
            for p in chosen:
                ends[p] += 10
            count += 1

    began = time.monotonic()
    await asyncio.gather(*(writer(i, c) for i, c in enumerate(conns)))
    elapsed = time.monotonic() - began
    for c in conns:
        await c.close()
    return count / elapsed, latencies


async def puts(store: ObjectStore, size: int, n: int) -> list[float]:
    data = b"y" * size
    out = []
    for _ in range(n):
        start = time.perf_counter()
        await store.put_new(store.new_key("bench/"), data)
        out.append((time.perf_counter() - start) * 1000)
    return out


async def main(seconds: float) -> None:
    base = Path(tempfile.mkdtemp(prefix="shared-bench-"))
    cpu: CpuGroup | None = None
    pg = PostgresServer(base / "pg").start()
    gw = VersityGateway(base / "gw").start()
    try:
        conn = await asyncpg.connect(pg.dsn)
        await migrate(conn, "bench")
        await conn.close()
        print("PostgreSQL commit of one window (fsync on; loopback; 2 cores shared with "
              "the writers)")
        if (CGROUP / "cpuacct").exists():
            try:
                cpu = CpuGroup("commit-bench-postgres", None)
                cpu.add(int((pg.data / "postmaster.pid").read_text().split()[0]))
            except OSError:  # not root
                cpu = None
        print(f"{'case':56} {'commits/s':>10} {'p50 ms':>8} {'p99 ms':>8} "
              f"{'PG CPU ms/commit':>17} {'commits/s per PG core':>22}")
        for label, writers, parts, per, inline in [
                ("1 writer, 1 partition, inline bytes", 1, 1, 1, True),
                ("1 writer, 1 partition, object key", 1, 1, 1, False),
                ("4 writers, own partition each, object key", 4, 4, 1, False),
                ("4 writers, 16 of 64 partitions per window, object key", 4, 64, 16, False),
                ("4 writers, 16 of 64 partitions per window, inline", 4, 64, 16, True),
                ("12 writers, 32 of 384 partitions per window, object key", 12, 384, 32,
                 False)]:
            before = cpu.seconds() if cpu is not None else 0.0
            rate, lat = await commits(pg.dsn, writers, parts, per, inline, seconds)
            used = (cpu.seconds() - before) if cpu is not None else float("nan")
            per_commit = used / max(len(lat), 1) * 1000
            print(f"{label:56} {rate:10,.0f} {statistics.median(lat):8.2f} "
                  f"{pct(lat, 0.99):8.2f} {per_commit:17.2f} {1000 / per_commit:22,.0f}")
        config = BrokerConfig({"headwater.storage": "shared",
                               "headwater.shared.database": pg.dsn, **gw.settings("bench")})
        store = ObjectStore(SharedSettings.from_config(config))
        await store.check()
        print("\nversitygw PUT (create-if-absent), loopback")
        print(f"{'size':>10} {'p50 ms':>8} {'p99 ms':>8}")
        for size in (1 << 10, 64 << 10, 1 << 20, 8 << 20):
            lat = await puts(store, size, 50 if size <= (1 << 20) else 10)
            print(f"{size:>10,} {statistics.median(lat):8.2f} {pct(lat, 0.99):8.2f}")
    finally:
        if cpu is not None:
            cpu.remove()
        gw.kill()
        pg.remove()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    asyncio.run(main(parser.parse_args().seconds))
