"""Request decode cost with and without the bounds pre-pass (headwater/wire/guard.py).

Prints, per request shape, microseconds per decode for kio alone and for guard + kio,
and the guard's share. The shapes are what clients send on the hot path: a Produce of
one 16 KiB batch (v9, flexible, and v7, legacy), a Produce of 8 partitions, a Fetch of one
partition and of 50 partitions (v12).

    .venv/bin/python bench/decode_bench.py [--seconds 1.0]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from headwater.wire.client import encode_request
from headwater.wire.codec import request_reader
from headwater.wire.guard import body_checker
from headwater.wire.header import parse_request_header, skip_tagged_fields


def produce(version: int, partitions: int) -> dict:
    return {"transactional_id": None, "acks": -1, "timeout": 30000, "topic_data": [
        {"name": "orders", "partition_data": [
            {"index": i, "records": b"\x00" * 16384} for i in range(partitions)]}]}


def fetch(partitions: int) -> dict:
    return {"replica_id": -1, "max_wait": 500, "min_bytes": 1, "max_bytes": 52428800,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": "orders", "partitions": [
                {"partition": i, "current_leader_epoch": -1, "fetch_offset": 1000,
                 "last_fetched_epoch": -1, "log_start_offset": -1,
                 "partition_max_bytes": 1048576} for i in range(partitions)]}],
            "forgotten_topics_data": [], "rack_id": ""}


SHAPES = {
    "produce v9, 1 x 16 KiB": (0, 9, produce(9, 1)),
    "produce v7, 1 x 16 KiB": (0, 7, produce(7, 1)),
    "produce v9, 8 partitions": (0, 9, produce(9, 8)),
    "fetch v12, 1 partition": (1, 12, fetch(1)),
    "fetch v12, 50 partitions": (1, 12, fetch(50)),
}


def per_call_us(fn: Callable[[], object], seconds: float) -> float:
    best = float("inf")
    for _ in range(5):
        n, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds / 5:
            for _ in range(100):
                fn()
            n += 100
        best = min(best, elapsed / n * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="per measurement")
    args = parser.parse_args()
    print(f"{'request':28} {'kio us':>8} {'guard+kio us':>13} {'guard share':>12}")
    for name, (key, version, body) in SHAPES.items():
        frame = encode_request(key, version, body)[4:]
        header = parse_request_header(frame)
        pos = header.body_offset
        if version >= (9 if key == 0 else 12):
            pos = skip_tagged_fields(frame, pos)
        read, check = request_reader(key, version), body_checker(key, version)

        def kio_only(read=read, frame=frame, pos=pos) -> object:
            return read(frame, pos)

        def guarded(read=read, check=check, frame=frame, pos=pos) -> object:
            check(frame, pos)
            return read(frame, pos)

        plain = per_call_us(kio_only, args.seconds)
        both = per_call_us(guarded, args.seconds)
        print(f"{name:28} {plain:8.2f} {both:13.2f} {(both - plain) / both:11.0%}")


if __name__ == "__main__":
    main()
