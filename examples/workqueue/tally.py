"""Count what the workers wrote: enriched orders per worker, dead letters per reason.

    python examples/workqueue/tally.py [--bootstrap 127.0.0.1:9092]

Reads "orders-enriched" and "orders-dead" from the beginning with read_committed (the
workers write in transactions) and prints the counts, and any order id seen twice.
"""

from __future__ import annotations

import argparse
import collections
import json

from confluent_kafka import Consumer, KafkaError, TopicPartition


def read_all(bootstrap: str, topic: str) -> list[dict]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "workqueue-tally",
                  "enable.auto.commit": False, "isolation.level": "read_committed",
                  "enable.partition.eof": True})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[dict] = []
    try:
        while True:
            msgs = c.consume(1000, 2.0)
            if not msgs:
                return out
            for m in msgs:
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        return out
                    continue
                out.append(json.loads(m.value()))
    finally:
        c.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    args = ap.parse_args()
    enriched = read_all(args.bootstrap, "orders-enriched")
    dead = read_all(args.bootstrap, "orders-dead")
    per_worker = collections.Counter(r["worker"] for r in enriched)
    ids = collections.Counter(r["id"] for r in enriched)
    print(f"enriched: {len(enriched)} orders; per worker: {dict(sorted(per_worker.items()))}")
    print(f"dead letters: {len(dead)}; per reason: "
          f"{dict(collections.Counter(r['reason'] for r in dead))}")
    twice = sorted(i for i, n in ids.items() if n > 1)
    print(f"orders enriched more than once: {twice[:20] or 'none'}")


if __name__ == "__main__":
    main()
