"""Streams-group rebalance timing: the same Kafka Streams 4.4 application
(tests/support/streams/WordCountApp.java, group.protocol=streams, exactly_once_v2) on
headwater (one node) and on Apache Kafka 4.4, side by side.

Per broker and round, seconds from the event to what the application reports (its
`TASKS` lines, read from its log):

* first:  a new application's first instance started -> it runs all 8 tasks;
* join:   a second instance started -> it runs tasks and the first gave them up;
* leave:  the second instance stopped (SIGTERM, it leaves the group) -> the first runs all
          8 tasks again;
* kill:   the second instance killed -9 (no leave: its session, 45 s on both brokers by
          default, must expire) -> the first runs all 8 again.

Usage: python bench/streams_rebalance.py [--rounds 2] [--brokers headwater,kafka]
       [--no-kill]
The group's initial rebalance delay is set to 0 on both (so `first` is the protocol's
own latency, not the 3 s wait). Prints a table of medians; needs `make kafka`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.broker_process import BrokerProcess  # noqa: E402
from tests.support.kafka_reference import KafkaReference, create_topic  # noqa: E402
from tests.support.streams_app import (  # noqa: E402
    StreamsApp,
    StreamsInstance,
    produce_words,
    set_group_configs,
    word_sequence,
)

TASKS = 8  # 4 input partitions, two subtopologies


def wait(check: Callable[[], bool], deadline: float, what: str) -> float:
    start = time.monotonic()
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.05)
    return time.monotonic() - start


def runs(inst: StreamsInstance, n: int) -> Callable[[], bool]:
    return lambda: len(inst.tasks()[0]) == n


def one_round(bootstrap: str, base: Path, kill: bool) -> dict[str, float]:
    suffix = uuid.uuid4().hex[:8]
    app_id, source, sink = f"rb-{suffix}", f"rb-in-{suffix}", f"rb-out-{suffix}"
    for topic in (source, sink):
        create_topic(bootstrap, topic, 4)
    set_group_configs(bootstrap, app_id, {"streams.initial.rebalance.delay.ms": "0"})
    produce_words(bootstrap, source, word_sequence(2_000))
    app = StreamsApp(bootstrap, app_id, source, sink, "streams", base / suffix)
    out: dict[str, float] = {}
    deadline = time.monotonic() + 180
    try:
        a = app.instance("a").start()
        t0 = time.monotonic()
        wait(runs(a, TASKS), deadline, "a runs all tasks")
        out["first"] = time.monotonic() - t0
        b = app.instance("b").start()
        t0 = time.monotonic()
        wait(lambda: 0 < len(b.tasks()[0]) and len(a.tasks()[0]) < TASKS, deadline,
             "b runs tasks")
        out["join"] = time.monotonic() - t0
        t0 = time.monotonic()
        b.stop()
        wait(runs(a, TASKS), deadline, "a runs all tasks after b left")
        out["leave"] = time.monotonic() - t0
        if kill:
            b.start()
            wait(lambda: 0 < len(b.tasks()[0]) and len(a.tasks()[0]) < TASKS, deadline,
                 "b runs tasks again")
            t0 = time.monotonic()
            b.kill()
            wait(runs(a, TASKS), deadline, "a runs all tasks after b's kill")
            out["kill"] = time.monotonic() - t0
    finally:
        app.kill_all()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--brokers", default="headwater,kafka")
    ap.add_argument("--no-kill", action="store_true", help="skip the 45 s kill rounds")
    args = ap.parse_args(argv)
    results: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="streams-rebalance-") as tmp:
        base = Path(tmp)
        for name in args.brokers.split(","):
            broker: KafkaReference | BrokerProcess
            if name == "kafka":
                broker = KafkaReference(base / "kafka")
            else:
                broker = BrokerProcess(base / "headwater")
            broker.start()
            try:
                results[name] = []
                for r in range(args.rounds):
                    got = one_round(broker.bootstrap, base / f"{name}-{r}", not args.no_kill)
                    print(f"{name} round {r + 1}: " + ", ".join(
                        f"{k} {v:.2f} s" for k, v in got.items()), flush=True)
                    results[name].append(got)
            finally:
                broker.stop()
    events = ["first", "join", "leave"] + ([] if args.no_kill else ["kill"])
    print("\n| event (median s) | " + " | ".join(results) + " |")
    print("|---|" + "---:|" * len(results))
    for event in events:
        cells = [f"{statistics.median(r[event] for r in rounds):.2f}"
                 for rounds in results.values()]
        print(f"| {event} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
