"""Share coordinator: write throughput of share-state deltas and the load time after a
kill -9 (what a broker restart costs per delta record in `__share_group_state`).

Starts a broker, creates a topic with --partitions partitions, initializes one share-
partition per partition, sends --deltas WriteShareGroupState rounds (one delta per
share-partition per round, as a leader writes one per acknowledgement), kills the broker
with SIGKILL, starts it again on the same data directory and reports how long replaying
the state topic took (from the broker's own per-partition load log lines).
`--per-snapshot` defaults to --deltas, so every write stays a delta.

    python bench/share_state_bench.py [--partitions 100] [--deltas 1000]
                                      [--per-snapshot N] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from headwater.share.records import StateBatch, StateWrite  # noqa: E402
from tests.support.broker_process import BrokerProcess  # noqa: E402
from tests.support.share_state import (  # noqa: E402
    create_topic,
    initialize,
    load_times,
    read_when_loaded,
    write,
)
from tests.support.wire import RawClient  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--deltas", type=int, default=1000, help="deltas per share-partition")
    ap.add_argument("--per-snapshot", type=int, default=None)
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    per_snapshot = args.per_snapshot or args.deltas
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp) / "data", "--override",
                               f"share.coordinator.snapshot.update.records.per.snapshot="
                               f"{per_snapshot}").start()
        try:
            result = run(broker, args.partitions, args.deltas)
        finally:
            broker.kill()
    result["per_snapshot"] = per_snapshot
    print(f"wrote {result['deltas']:,} deltas in {result['write_s']:.2f} s "
          f"({result['deltas'] / result['write_s']:,.0f}/s); after kill -9 replayed "
          f"{result['records']:,} records in {result['load_ms']} ms "
          f"({1000 * result['load_ms'] / max(result['records'], 1):.1f} us/record, "
          f"slowest state partition {result['slowest_ms']} ms); restart to state "
          f"readable {result['ready_s']:.2f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


def run(broker: BrokerProcess, partitions: int, deltas: int) -> dict:
    client = RawClient("127.0.0.1", broker.port, timeout=60)
    topic_id = create_topic(client, "share-state-bench", partitions)
    for p in range(partitions):
        assert initialize(client, "bench", topic_id, p, 0, 0) == 0
    t0 = time.perf_counter()
    for i in range(deltas):
        w = StateWrite(0, 0, 10 * (i - 5) if i % 10 == 0 and i >= 5 else -1, 10 * i,
                       (StateBatch(10 * i, 10 * i + 9, 2, 1),))
        codes = write(client, "bench", topic_id, [(p, w) for p in range(partitions)])
        assert set(codes.values()) == {0}, codes
    write_s = time.perf_counter() - t0
    client.close()
    before = len(broker.log_path.read_text(errors="replace"))
    broker.kill()
    t1 = time.perf_counter()
    broker.start(timeout=300)
    client = RawClient("127.0.0.1", broker.port, timeout=60)
    for p in range(partitions):
        assert read_when_loaded(client, "bench", topic_id, p, timeout=300)[0] == 0
    ready_s = time.perf_counter() - t1
    client.close()
    loads = load_times(broker.log_path.read_text(errors="replace")[before:])
    return {"partitions": partitions, "deltas": partitions * deltas, "write_s": write_s,
            "records": sum(n for n, _ in loads.values()),
            "load_ms": sum(ms for _, ms in loads.values()),
            "slowest_ms": max((ms for _, ms in loads.values()), default=0),
            "ready_s": ready_s}


if __name__ == "__main__":
    main()
