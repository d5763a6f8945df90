"""Produce orders to be enriched: one JSON record per order, some of them poison.

    python examples/workqueue/orders.py [--bootstrap 127.0.0.1:9092] [--topic orders]
                                        [--count 10000] [--poison-every 500]

{"id": 17, "sku": "tea", "qty": 3}; every --poison-every-th order is not JSON at all,
which the workers send to the dead-letter topic instead of the enriched one.
"""

from __future__ import annotations

import argparse
import json
import random

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

SKUS = ["tea", "coffee", "cocoa", "mate", "chai"]


def ensure_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if topic not in admin.list_topics(timeout=10).topics:
        admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--topic", default="orders")
    ap.add_argument("--partitions", type=int, default=1,
                    help="one is enough: a share group splits one partition among workers")
    ap.add_argument("--count", type=int, default=10_000)
    ap.add_argument("--poison-every", type=int, default=500)
    args = ap.parse_args()
    ensure_topic(args.bootstrap, args.topic, args.partitions)
    for t in ("orders-enriched", "orders-dead"):
        ensure_topic(args.bootstrap, t, 1)
    p = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 20,
                  "batch.num.messages": 200})  # small batches: finer-grained sharing
    for i in range(args.count):
        if args.poison_every and i % args.poison_every == args.poison_every - 1:
            value = b"\xff not an order"
        else:
            value = json.dumps({"id": i, "sku": random.choice(SKUS),
                                "qty": random.randint(1, 9)}).encode()
        p.produce(args.topic, value, key=str(i).encode())
        p.poll(0)
    p.flush(60)
    print(f"produced {args.count} orders to {args.topic}")


if __name__ == "__main__":
    main()
