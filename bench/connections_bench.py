"""Many connections at once: thousands of idle clients beside hundreds of active producers.

Per broker (headwater, and Apache Kafka 4.4.0 for the ratio), freshly started:

1. IDLE connections (default 5,000) are opened from one asyncio loop; each sends an
   ApiVersions request and reads its answer (so each is a real Kafka connection, not a
   bare TCP socket), then stays open and silent.
2. With all of them still open, PRODUCERS (default 200) aiokafka producers, each its own
   connection, send RECORDS_EACH x 100 B records with acks=all to one 6-partition
   topic; msgs/s over the whole burst.
3. A confluent-kafka consumer reads the topic back: every acknowledged record must be
   there (nothing lost under the load), and each idle connection must still answer an
   ApiVersions afterwards (the broker did not drop them).

Reported: the broker's RSS before, with the idle connections open, and after the
producers; the bytes of RSS per idle connection; produce msgs/s with the connections
open; how many idle connections still answered. See bench/README.md.

    python bench/connections_bench.py [--idle 5000] [--producers 200] [--records-each 1000]
                                      [--brokers headwater,kafka]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import struct
import tempfile
import time
import uuid
from pathlib import Path

import broker_bench as bb
from aiokafka import AIOKafkaProducer
from confluent_kafka import Consumer

API_VERSIONS_V0 = 18
PAYLOAD = b"x" * 100


def api_versions_frame(correlation_id: int) -> bytes:
    client = b"idle"
    body = struct.pack(">hhih", API_VERSIONS_V0, 0, correlation_id, len(client)) + client
    return struct.pack(">i", len(body)) + body


async def api_versions(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                       correlation_id: int) -> None:
    writer.write(api_versions_frame(correlation_id))
    await writer.drain()
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    answer = await reader.readexactly(size)
    if struct.unpack_from(">i", answer)[0] != correlation_id:
        raise RuntimeError("ApiVersions answered out of order")


async def open_idle(host: str, port: int, n: int) -> list[tuple[asyncio.StreamReader,
                                                                asyncio.StreamWriter]]:
    conns = []
    sem = asyncio.Semaphore(200)  # connect in waves: the listen backlog is finite

    async def one(i: int) -> None:
        async with sem:
            reader, writer = await asyncio.open_connection(host, port)
            await api_versions(reader, writer, i)
            conns.append((reader, writer))
    await asyncio.gather(*(one(i) for i in range(n)))
    return conns


async def still_answering(conns: list) -> int:
    async def check(i: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        try:
            await asyncio.wait_for(api_versions(reader, writer, 1_000_000 + i), 30)
            return True
        except (TimeoutError, OSError, asyncio.IncompleteReadError, RuntimeError):
            return False
    sem = asyncio.Semaphore(500)

    async def bounded(i: int, c: tuple) -> bool:
        async with sem:
            return await check(i, *c)
    return sum(await asyncio.gather(*(bounded(i, c) for i, c in enumerate(conns))))


async def produce_all(bootstrap: str, topic: str, producers: int, each: int) -> tuple[int, float]:
    clients = [AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5,
                                client_id=f"load-{i}") for i in range(producers)]
    await asyncio.gather(*(c.start() for c in clients))
    acked = 0
    try:
        t0 = time.monotonic()

        async def run(c: AIOKafkaProducer) -> int:
            futures = [await c.send(topic, PAYLOAD) for _ in range(each)]
            done = await asyncio.gather(*futures, return_exceptions=True)
            return sum(1 for d in done if not isinstance(d, BaseException))
        acked = sum(await asyncio.gather(*(run(c) for c in clients)))
        elapsed = time.monotonic() - t0
    finally:
        await asyncio.gather(*(c.stop() for c in clients), return_exceptions=True)
    return acked, elapsed


def read_back(bootstrap: str, topic: str, expected: int, timeout: float = 120) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"load-{uuid.uuid4().hex[:8]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got = 0
    deadline = time.monotonic() + timeout
    try:
        while got < expected and time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                if m.error() is None:
                    got += 1
    finally:
        c.close()
    return got


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def run(name: str, args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"conn-bench-{name}-") as tmp:
        broker = bb.make_broker(name, None, Path(tmp))
        broker.start(120 if name == "kafka" else 60)
        try:
            host, port = broker.bootstrap.rsplit(":", 1)
            pid = broker.proc.pid
            topic = bb.create_topic(broker.bootstrap, "load", 6)
            rss0 = rss(pid)

            async def scenario() -> dict:
                t0 = time.monotonic()
                conns = await open_idle(host, int(port), args.idle)
                opened_s = time.monotonic() - t0
                rss1 = rss(pid)
                acked, seconds = await produce_all(broker.bootstrap, topic, args.producers,
                                                   args.records_each)
                rss2 = rss(pid)
                alive = await still_answering(conns)
                for _, w in conns:
                    w.close()
                return {"opened_s": opened_s, "rss_idle": rss1, "acked": acked,
                        "seconds": seconds, "rss_after": rss2, "alive": alive}
            res = asyncio.run(scenario())
            res["rss_before"] = rss0
            res["read_back"] = read_back(broker.bootstrap, topic, res["acked"])
            broker.check_alive()
            return res
        finally:
            broker.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", default="headwater,kafka")
    ap.add_argument("--idle", type=int, default=5_000)
    ap.add_argument("--producers", type=int, default=200)
    ap.add_argument("--records-each", type=int, default=1_000)
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    total = args.producers * args.records_each
    rows = {}
    for name in [b.strip() for b in args.brokers.split(",") if b.strip()]:
        bb.log(f"{name}: {args.idle:,} idle connections, {args.producers} producers")
        rows[name] = r = run(name, args)
        print(f"{name}: {args.idle:,} idle connections opened in {r['opened_s']:.1f} s; "
              f"RSS {r['rss_before'] / 1e6:.0f} -> {r['rss_idle'] / 1e6:.0f} MB with them "
              f"({(r['rss_idle'] - r['rss_before']) / max(args.idle, 1) / 1e3:.1f} kB each) "
              f"-> {r['rss_after'] / 1e6:.0f} MB after the producers; {args.producers} "
              f"producers: {r['acked']:,}/{total:,} acked in {r['seconds']:.1f} s = "
              f"{r['acked'] / r['seconds']:,.0f} msgs/s; read back {r['read_back']:,}; "
              f"idle connections still answering: {r['alive']:,}/{args.idle:,}", flush=True)
    if "headwater" in rows and "kafka" in rows:
        h, k = rows["headwater"], rows["kafka"]
        print(f"headwater / Kafka: produce msgs/s with the idle connections open "
              f"{(h['acked'] / h['seconds']) / (k['acked'] / k['seconds']):.2f}; RSS per "
              f"idle connection {(h['rss_idle'] - h['rss_before']) / max(k['rss_idle'] - k['rss_before'], 1):.2f}")


if __name__ == "__main__":
    main()
