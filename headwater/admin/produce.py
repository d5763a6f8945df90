"""`headwater produce TOPIC`, like `rpk topic produce` / `kcat -P`: one record per line of
stdin (or `--file`), the key before `--key-separator` when given, `--header k=v` on
every record; idempotent (acks=all) by default so a retried batch is not written twice.
A one-line summary (records, and each partition's offsets) goes to stderr, or to stdout
as JSON with --json, so stdout stays clean for pipelines.

The topic must exist (auto-creation is off for this producer): a typo fails with a hint
instead of creating a topic.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import Any, BinaryIO

from confluent_kafka import KafkaError, Message, Producer

from . import rdkafka
from .connect import _key_value, add_arguments

FLUSH_TIMEOUT_S = 60.0


def _lines(source: BinaryIO) -> Iterator[bytes]:
    for line in source:
        yield line.removesuffix(b"\n").removesuffix(b"\r")


class Delivered:
    """Delivery reports: the offsets each partition got, and the first error."""

    def __init__(self) -> None:
        self.offsets: dict[int, tuple[int, int]] = {}
        self.count = 0
        self.error: KafkaError | None = None

    def __call__(self, error: KafkaError | None, msg: Message) -> None:
        if error is not None:
            self.error = self.error or error
            return
        self.count += 1
        p, o = msg.partition() or 0, msg.offset() or 0
        first, last = self.offsets.get(p, (o, o))
        self.offsets[p] = (min(first, o), max(last, o))

    def summary(self, topic: str) -> str:
        parts = ", ".join(f"partition {p} offsets {a}-{b}"
                          for p, (a, b) in sorted(self.offsets.items()))
        return f"produced {self.count} records to {topic}" + (f": {parts}" if parts else "")

    def as_json(self, topic: str) -> str:
        return json.dumps({"topic": topic, "records": self.count, "partitions": [
            {"partition": p, "first_offset": a, "last_offset": b}
            for p, (a, b) in sorted(self.offsets.items())]})


def _producer(args: argparse.Namespace) -> Producer:
    idempotent = args.acks == "all" and not args.no_idempotence
    return rdkafka.make(Producer, rdkafka.config(args, **{
        "acks": args.acks, "enable.idempotence": idempotent,
        "compression.type": args.compression,
        "linger.ms": 5, "message.timeout.ms": int(FLUSH_TIMEOUT_S * 1000)}))


def cmd_produce(args: argparse.Namespace) -> str | None:
    producer = _producer(args)
    try:
        metadata = producer.list_topics(args.topic, timeout=rdkafka.CONNECT_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001
        raise rdkafka.explain(exc, args) from None
    partitions = rdkafka.check_topic(metadata, args.topic, args)
    if args.partition is not None and not 0 <= args.partition < partitions:
        raise rdkafka.AdminError(f"topic {args.topic} has no partition {args.partition} (it "
                                 f"has {partitions}); hint: `headwater topic describe`")
    delivered = Delivered()
    headers = [(k, v.encode()) for k, v in args.header]
    extra: dict[str, Any] = {} if args.partition is None else {"partition": args.partition}
    sep = args.key_separator.encode() if args.key_separator else None
    source: BinaryIO = open(args.file, "rb") if args.file else sys.stdin.buffer
    with source:
        for line in _lines(source):
            key: bytes | None = None
            if sep is not None and sep in line:
                key, _, line = line.partition(sep)
            while True:
                try:
                    producer.produce(args.topic, line, key, headers=headers or None,
                                     on_delivery=delivered, **extra)
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    producer.poll(0.1)
            producer.poll(0)
            if delivered.error is not None:
                break
    if producer.flush(FLUSH_TIMEOUT_S) and delivered.error is None:
        delivered.error = KafkaError(KafkaError._MSG_TIMED_OUT)
    if delivered.error is not None:
        raise rdkafka.explain(delivered.error, args, f"topic {args.topic}")
    if args.json:
        return delivered.as_json(args.topic)
    print(delivered.summary(args.topic), file=sys.stderr)
    return None


def add_parser(sub: Any) -> None:
    c = sub.add_parser("produce", help="produce lines of stdin (or a file) as records")
    add_arguments(c)
    c.add_argument("topic")
    c.add_argument("--file", help="read the lines from this file instead of stdin")
    c.add_argument("--key-separator", "-k", metavar="SEP",
                   help="a line's key is what precedes SEP (a line without it has no key)")
    c.add_argument("--header", "-H", action="append", type=_key_value, default=[],
                   metavar="KEY=VALUE", help="a header on every record (repeatable)")
    c.add_argument("--partition", "-p", type=int,
                   help="write to this partition (default: by key, or sticky)")
    c.add_argument("--compression", choices=["none", "gzip", "snappy", "lz4", "zstd"],
                   default="none")
    c.add_argument("--acks", choices=["all", "1", "0"], default="all",
                   help="acks (idempotence needs all: 1 or 0 turns it off)")
    c.add_argument("--no-idempotence", action="store_true",
                   help="a plain producer (for a broker or ACL refusing IDEMPOTENT_WRITE)")
    c.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    c.set_defaults(func=cmd_produce)
