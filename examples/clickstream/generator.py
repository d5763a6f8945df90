"""Produce a synthetic clickstream to a topic: one JSON event per click.

    python examples/clickstream/generator.py [--bootstrap 127.0.0.1:9092] [--topic clicks]
                                             [--rate 200] [--seconds 0 (forever)]

Events are keyed by user, so one user's clicks stay in order on one partition:
{"user": "u17", "page": "/pricing", "ts": 1732200000123}
"""

from __future__ import annotations

import argparse
import json
import random
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

PAGES = ["/", "/pricing", "/docs", "/blog", "/signup", "/login", "/docs/spark", "/careers"]
WEIGHTS = [30, 10, 20, 12, 5, 15, 6, 2]


def ensure_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if topic not in admin.list_topics(timeout=10).topics:
        admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--topic", default="clicks")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--rate", type=float, default=200, help="events per second")
    ap.add_argument("--seconds", type=float, default=0, help="stop after this long (0: never)")
    ap.add_argument("--users", type=int, default=50)
    args = ap.parse_args()

    ensure_topic(args.bootstrap, args.topic, args.partitions)
    producer = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 20,
                         "enable.idempotence": True})
    start = time.monotonic()
    sent = 0
    print(f"producing ~{args.rate:g} clicks/s to {args.topic!r} on {args.bootstrap} (Ctrl-C stops)")
    try:
        while not args.seconds or time.monotonic() - start < args.seconds:
            user = f"u{random.randrange(args.users)}"
            event = {"user": user, "page": random.choices(PAGES, WEIGHTS)[0],
                     "ts": int(time.time() * 1000)}
            producer.produce(args.topic, json.dumps(event).encode(), key=user.encode())
            producer.poll(0)
            sent += 1
            if sent % 1000 == 0:
                print(f"{sent} clicks sent")
            # pace: sleep until this event's slot
            delay = start + sent / args.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
    except KeyboardInterrupt:
        pass
    finally:
        producer.flush(10)
        print(f"{sent} clicks sent in total")


if __name__ == "__main__":
    main()
