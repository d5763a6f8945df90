"""Print the per-window page counts the pipeline writes (committed transactions only).

    python examples/clickstream/reader.py [--bootstrap 127.0.0.1:9092] [--topic click-counts]
"""

from __future__ import annotations

import argparse
import json

from confluent_kafka import Consumer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--topic", default="click-counts")
    ap.add_argument("--group", default="clickstream-reader")
    args = ap.parse_args()

    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": args.group,
                         "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed"})
    consumer.subscribe([args.topic])
    print(f"{'window start':19}  {'page':12} {'clicks':>6} {'users':>5}")
    try:
        while True:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                print(f"error: {msg.error()}")
                continue
            row = json.loads(msg.value())
            print(f"{row['window_start']:19}  {row['page']:12} {row['clicks']:>6} "
                  f"{row['users']:>5}")
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()


if __name__ == "__main__":
    main()
