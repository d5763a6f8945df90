"""What `headwater consume` reads with, as a consumer or as a share consumer
(`consume.py`, `share_consume.py`): the record printer, the error check and when to stop."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

from confluent_kafka import KafkaError

from . import rdkafka, record_format

_FATAL = {"UNKNOWN_TOPIC_OR_PART", "TOPIC_AUTHORIZATION_FAILED",
          "GROUP_AUTHORIZATION_FAILED", "TOPIC_EXCEPTION"}


def printer(args: argparse.Namespace) -> Callable[[record_format.Record], None]:
    """Writes each record to stdout as --json or --format says."""
    render = record_format.as_json if args.json else record_format.formatter(args.format)

    def write(record: record_format.Record) -> None:
        sys.stdout.write(render(record))
        sys.stdout.flush()
    return write


def check(error: KafkaError | None, args: argparse.Namespace) -> bool:
    """True for a record; False for an event to skip; raises for an error that stops."""
    if error is None:
        return True
    if error.fatal() or error.name() in _FATAL:
        raise rdkafka.explain(error, args, f"topic {args.topic}")
    return False


class Stop:
    """--num records, --timeout-ms without one, or (--exit-at-end) every assigned
    partition at its end: librdkafka's partition-EOF event, reset by a later record."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.num: int | None = args.num
        self.idle_s = None if args.timeout_ms is None else args.timeout_ms / 1000
        self.count = 0
        self.last = time.monotonic()
        self.at_end: set[int] | None = set() if getattr(args, "exit_at_end", False) else None

    def got(self, partition: int = -1) -> None:
        self.count += 1
        self.last = time.monotonic()
        if self.at_end is not None:
            self.at_end.discard(partition)

    def end_of(self, partition: int) -> None:
        if self.at_end is not None:
            self.at_end.add(partition)

    def done(self, assigned: Callable[[], set[int]] = set) -> bool:
        if self.num is not None and self.count >= self.num:
            return True
        if self.at_end and (partitions := assigned()) and partitions <= self.at_end:
            return True
        return self.idle_s is not None and time.monotonic() - self.last >= self.idle_s
