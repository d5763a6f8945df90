"""Consumer-group benchmark for headwater, with confluent-kafka (librdkafka).

Workloads, each on a fresh topic and group of a broker this script starts (or an
external one with --bootstrap):

1. time for a 20-member KIP-848 group (`group.protocol=consumer`) on a 100-partition
   topic to settle: from the members' first poll until every member has a non-empty
   assignment and together they own all 100 partitions, each exactly once (and, as a
   second number, until the partition counts per member differ by at most one);
2. the same with the classic protocol (JoinGroup/SyncGroup); a failure is printed, not
   fatal;
3. offset commits per second for one group: synchronous commits from one consumer
   (a KIP-848 member, so each commit is checked against its member epoch).

    python bench/group_bench.py [--members 20] [--partitions 100] [--commit-seconds 5]
                                [--override KEY=VALUE ...] [--bootstrap HOST:PORT]
                                [--json out.json]

The broker runs with its defaults (Kafka's: group.consumer.heartbeat.interval.ms=5000,
group.initial.rebalance.delay.ms=3000) unless --override says otherwise; both shape the
settle times, as they do on Kafka.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from broker_bench import (
    HOST,
    Broker,
    client_version,
    create_topic,
    describe_error,
    free_port,
    headwater_version,
    log,
)
from broker_bench import PROJECT_ROOT as ROOT
from confluent_kafka import Consumer, TopicPartition


def start_broker(workdir: Path, overrides: list[str], timeout: float) -> Broker:
    import os

    port = free_port()
    bootstrap = f"{HOST}:{port}"
    data_dir = workdir / "data"
    data_dir.mkdir()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    cmd = [sys.executable, "-m", "headwater.cli", "serve", "--listen", bootstrap,
           "--data-dir", str(data_dir)]
    for item in overrides:
        cmd += ["--override", item]
    broker = Broker("headwater", bootstrap, cmd, env, workdir, version=headwater_version())
    broker.start(timeout)
    return broker


def add_broker_args(ap: argparse.ArgumentParser) -> None:
    """--override, --bootstrap and --json, shared by the benches that start a broker."""
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="broker config override (repeatable)")
    ap.add_argument("--bootstrap", metavar="HOST:PORT", help="use a running broker")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON here")


def settle_time(bootstrap: str, protocol: str, members: int, partitions: int,
                timeout: float) -> dict[str, Any]:
    """Seconds until `members` consumers own all partitions, each member at least one."""
    topic = create_topic(bootstrap, f"settle-{protocol}", partitions)
    group = f"bench-{protocol}-{uuid.uuid4().hex[:8]}"
    config = {"bootstrap.servers": bootstrap, "group.id": group,
              "group.protocol": protocol, "enable.auto.commit": False,
              "auto.offset.reset": "earliest"}
    consumers = [Consumer(config) for _ in range(members)]
    everything = {(topic, p) for p in range(partitions)}
    try:
        t0 = time.perf_counter()
        for c in consumers:
            c.subscribe([topic])
        polls = 0
        settled = balanced = None
        while balanced is None:
            for c in consumers:
                c.poll(0)
            polls += 1
            owned = [{(tp.topic, tp.partition) for tp in c.assignment()} for c in consumers]
            sizes = sorted(len(o) for o in owned)
            covered = set().union(*owned)
            if all(owned) and sum(sizes) == partitions and covered == everything:
                now = time.perf_counter() - t0
                settled = settled if settled is not None else now
                if sizes[-1] - sizes[0] <= 1:
                    balanced = now
            if time.perf_counter() - t0 > timeout:
                if settled is not None:
                    break
                raise TimeoutError(f"not settled after {timeout:.0f} s: "
                                   f"{sum(1 for o in owned if o)} members own partitions, "
                                   f"{len(covered)}/{partitions} covered")
            time.sleep(0.005)
        return {"seconds": round(settled, 3),
                "balanced_seconds": None if balanced is None else round(balanced, 3),
                "min_partitions": sizes[0], "max_partitions": sizes[-1], "polls": polls}
    finally:
        for c in consumers:
            c.close()


def commit_rate(bootstrap: str, seconds: float, timeout: float) -> dict[str, Any]:
    """Synchronous OffsetCommits per second from one KIP-848 member of one group."""
    topic = create_topic(bootstrap, "commits", 1)
    consumer = Consumer({"bootstrap.servers": bootstrap,
                         "group.id": f"bench-commit-{uuid.uuid4().hex[:8]}",
                         "group.protocol": "consumer", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        deadline = time.perf_counter() + timeout
        while not consumer.assignment():
            consumer.poll(0.05)
            if time.perf_counter() > deadline:
                raise TimeoutError("the committing consumer got no assignment")
        count = 0
        t0 = time.perf_counter()
        end = t0 + seconds
        while time.perf_counter() < end:
            count += 1
            consumer.commit(offsets=[TopicPartition(topic, 0, count)], asynchronous=False)
        elapsed = time.perf_counter() - t0
        (committed,) = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        if committed.offset != count:
            raise RuntimeError(f"last committed offset {committed.offset}, expected {count}")
        return {"commits": count, "seconds": round(elapsed, 3),
                "commits_per_s": round(count / elapsed, 1)}
    finally:
        consumer.close()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--members", type=int, default=20)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--commit-seconds", type=float, default=5.0)
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds allowed for a group to settle and for start-up")
    add_broker_args(ap)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results: dict[str, Any] = {"members": args.members, "partitions": args.partitions,
                               "overrides": args.override, "client": client_version()}
    with tempfile.TemporaryDirectory(prefix="group-bench-") as tmp:
        broker = None
        if args.bootstrap:
            bootstrap = args.bootstrap
        else:
            broker = start_broker(Path(tmp), args.override, min(args.timeout, 60))
            bootstrap = broker.bootstrap
        try:
            for protocol in ("consumer", "classic"):
                log(f"{protocol}: {args.members} members, {args.partitions} partitions")
                try:
                    results[protocol] = settle_time(bootstrap, protocol, args.members,
                                                    args.partitions, args.timeout)
                except Exception as exc:  # the classic protocol may not be there yet
                    results[protocol] = {"error": describe_error(exc)}
                if broker is not None:
                    broker.check_alive()
            log(f"offset commits for {args.commit_seconds:.0f} s")
            try:
                results["commit"] = commit_rate(bootstrap, args.commit_seconds, args.timeout)
            except Exception as exc:
                results["commit"] = {"error": describe_error(exc)}
        finally:
            if broker is not None:
                broker.stop()

    def line(name: str, value: dict[str, Any], fmt) -> str:
        return f"{name:<44} {value['error'] if 'error' in value else fmt(value)}"

    print(f"\nheadwater group benchmark ({args.members} members, {args.partitions} partitions, "
          f"confluent-kafka {results['client']})")
    for protocol, label in (("consumer", "KIP-848 group (group.protocol=consumer)"),
                            ("classic", "classic group (group.protocol=classic)")):
        print(line(f"time to settle, {label}", results[protocol],
                   lambda v: f"{v['seconds']:8.2f} s  (balanced after "
                             f"{v['balanced_seconds']} s: {v['min_partitions']}-"
                             f"{v['max_partitions']} partitions per member)"))
    print(line("offset commits/s, one group, synchronous", results["commit"],
               lambda v: f"{v['commits_per_s']:8.1f}    ({v['commits']} in {v['seconds']} s)"))
    print(json.dumps(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0 if all("error" not in results[k] for k in ("consumer", "commit")) else 1


if __name__ == "__main__":
    sys.exit(main())
