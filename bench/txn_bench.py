"""Transactional vs idempotent produce throughput on headwater, with confluent-kafka.

Both workloads run in the same process against the same broker (one this script starts,
like broker_bench.py, or an external one with --bootstrap), each on a fresh topic with
the same partitions, records and producer settings:

1. idempotent produce (`enable.idempotence=true`, acks=all) for --seconds;
2. transactional produce (`transactional.id`), committing every --commit-ms (100 ms):
   records are produced for that long, then `commit_transaction()` (which flushes);

and prints records/s and MB/s of each, the ratio transactional/idempotent, and the
commit_transaction() latency. With --verify, a read_committed consumer then checks that
exactly the committed records are readable.

    python bench/txn_bench.py [--seconds 10] [--commit-ms 100] [--partitions 3]
                              [--record-size 100] [--verify] [--bootstrap HOST:PORT]
                              [--override KEY=VALUE ...] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from broker_bench import (
    MB,
    PRODUCER_THROUGHPUT_CONFIG,
    client_version,
    create_topic,
    describe_error,
    log,
)
from confluent_kafka import Consumer, Producer, TopicPartition
from group_bench import add_broker_args, start_broker

PRODUCER_CONFIG: dict[str, Any] = {**PRODUCER_THROUGHPUT_CONFIG, "enable.idempotence": True}


def send_burst(p: Producer, topic: str, payload: bytes, partitions: int, sent: int,
               n: int) -> int:
    """Up to `n` produce() calls round-robin over the partitions; the new sent count."""
    for _ in range(n):
        try:
            p.produce(topic, payload, partition=sent % partitions)
            sent += 1
        except BufferError:
            p.poll(0.01)
    p.poll(0)
    return sent


def produce_idempotent(bootstrap: str, topic: str, seconds: float, payload: bytes,
                       partitions: int) -> dict[str, Any]:
    p = Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONFIG})
    sent = 0
    t0 = time.perf_counter()
    end = t0 + seconds
    while time.perf_counter() < end:
        sent = send_burst(p, topic, payload, partitions, sent, 1000)
    left = p.flush(60)
    elapsed = time.perf_counter() - t0
    if left:
        raise RuntimeError(f"{left} records not delivered")
    return {"records": sent, "seconds": round(elapsed, 3),
            "records_per_s": round(sent / elapsed, 1),
            "mb_per_s": round(sent * len(payload) / elapsed / MB, 2)}


def produce_transactional(bootstrap: str, topic: str, seconds: float, commit_ms: float,
                          payload: bytes, partitions: int, txn_id: str) -> dict[str, Any]:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                  **PRODUCER_CONFIG})
    p.init_transactions(30)
    sent = 0
    commits: list[float] = []
    t0 = time.perf_counter()
    end = t0 + seconds
    while time.perf_counter() < end:
        p.begin_transaction()
        txn_end = time.perf_counter() + commit_ms / 1000
        while time.perf_counter() < txn_end:
            sent = send_burst(p, topic, payload, partitions, sent, 200)
        c0 = time.perf_counter()
        p.commit_transaction(60)
        commits.append((time.perf_counter() - c0) * 1000)
    elapsed = time.perf_counter() - t0
    ordered = sorted(commits)
    return {"records": sent, "seconds": round(elapsed, 3), "transactions": len(commits),
            "records_per_s": round(sent / elapsed, 1),
            "mb_per_s": round(sent * len(payload) / elapsed / MB, 2),
            "commit_ms_p50": round(statistics.median(ordered), 2),
            "commit_ms_p99": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 2),
            "commit_ms_max": round(ordered[-1], 2)}


def count_committed(bootstrap: str, topic: str, partitions: int, timeout: float) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-bench-verify",
                  "isolation.level": "read_committed", "enable.partition.eof": True,
                  "enable.auto.commit": False, "queued.min.messages": 1_000_000,
                  "fetch.queue.backoff.ms": 10})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    count, ended = 0, set()
    deadline = time.monotonic() + timeout
    try:
        while len(ended) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"read {count} records, no end of {topic} in time")
            for msg in c.consume(10_000, 0.5):
                if msg.error():
                    if msg.error().code() != -191:
                        raise RuntimeError(str(msg.error()))
                    ended.add(msg.partition())
                else:
                    count += 1
    finally:
        c.close()
    return count


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="per workload")
    ap.add_argument("--commit-ms", type=float, default=100.0)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--verify", action="store_true",
                    help="check that read_committed sees exactly the committed records")
    ap.add_argument("--timeout", type=float, default=120.0)
    add_broker_args(ap)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    payload = b"x" * args.record_size
    results: dict[str, Any] = {"seconds": args.seconds, "commit_ms": args.commit_ms,
                               "partitions": args.partitions, "record_size": args.record_size,
                               "overrides": args.override, "client": client_version()}
    with tempfile.TemporaryDirectory(prefix="txn-bench-") as tmp:
        broker = None
        if args.bootstrap:
            bootstrap = args.bootstrap
        else:
            broker = start_broker(Path(tmp), args.override, min(args.timeout, 60))
            bootstrap = broker.bootstrap
        try:
            log(f"idempotent produce for {args.seconds:.0f} s")
            topic = create_topic(bootstrap, "idempotent", args.partitions)
            try:
                results["idempotent"] = produce_idempotent(bootstrap, topic, args.seconds,
                                                           payload, args.partitions)
            except Exception as exc:
                results["idempotent"] = {"error": describe_error(exc)}
            log(f"transactional produce for {args.seconds:.0f} s, commit every "
                f"{args.commit_ms:.0f} ms")
            topic = create_topic(bootstrap, "transactional", args.partitions)
            try:
                txn = produce_transactional(bootstrap, topic, args.seconds, args.commit_ms,
                                            payload, args.partitions, f"bench-{topic}")
                if args.verify:
                    log("verifying with a read_committed consumer")
                    txn["read_committed"] = count_committed(bootstrap, topic,
                                                            args.partitions, args.timeout)
                    if txn["read_committed"] != txn["records"]:
                        raise RuntimeError(f"read_committed saw {txn['read_committed']} "
                                           f"records, {txn['records']} were committed")
                results["transactional"] = txn
            except Exception as exc:
                results["transactional"] = {"error": describe_error(exc)}
            if broker is not None:
                broker.check_alive()
        finally:
            if broker is not None:
                broker.stop()

    idem, txn = results["idempotent"], results["transactional"]
    print(f"\nheadwater transactional produce benchmark ({args.partitions} partitions, "
          f"{args.record_size} B records, {args.seconds:.0f} s each, "
          f"confluent-kafka {results['client']})")
    for name, value in (("idempotent", idem), (f"transactional, commit every "
                                              f"{args.commit_ms:.0f} ms", txn)):
        cells = value["error"] if "error" in value else (
            f"{value['records_per_s']:>10,.0f} records/s  {value['mb_per_s']:6.2f} MB/s  "
            f"({value['records']:,} records)")
        print(f"{name:<36} {cells}")
    if "error" not in idem and "error" not in txn:
        results["ratio"] = round(txn["records_per_s"] / idem["records_per_s"], 3)
        print(f"{'ratio transactional/idempotent':<36} {results['ratio']:>10.3f}")
        print(f"{'commit_transaction() latency':<36} p50 {txn['commit_ms_p50']} ms, "
              f"p99 {txn['commit_ms_p99']} ms, max {txn['commit_ms_max']} ms "
              f"({txn['transactions']} transactions)")
        if "read_committed" in txn:
            print(f"{'read_committed records':<36} {txn['read_committed']:,} (all committed)")
    print(json.dumps(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0 if "error" not in idem and "error" not in txn else 1


if __name__ == "__main__":
    sys.exit(main())
