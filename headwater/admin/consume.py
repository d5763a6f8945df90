"""`headwater consume TOPIC`, like `rpk topic consume` / `kcat -C`: print records from
assigned partitions (`--partition`, default all) or as a member of a consumer group
(`--group`, committing what it printed), from where `--from` says, until `--num`
records, `--timeout-ms` idle or, with `--exit-at-end` (kcat's -e), the end of every
assigned partition; `--share-group` reads as a share consumer (KIP-932,
admin/share_consume.py)."""

from __future__ import annotations

import argparse
import time
import uuid
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition

from . import positions, rdkafka
from .connect import add_arguments
from .reading import Stop, check, printer
from .share_consume import consume_shared

COMMIT_EVERY_S = 5.0
def _consumer(args: argparse.Namespace) -> Consumer:
    start: positions.Start = args.from_ or positions.Start(OFFSET_BEGINNING)
    return rdkafka.make(Consumer, rdkafka.config(
        args, **{"group.id": args.group or f"headwater-cli-{uuid.uuid4().hex[:12]}",
                 "enable.auto.commit": False,
                 "auto.offset.reset": "latest" if start.name == "end" else "earliest",
                 "enable.partition.eof": args.exit_at_end,
                 "isolation.level": args.isolation}))


def _start(consumer: Consumer, args: argparse.Namespace, partitions: int) -> None:
    if args.group:
        def on_assign(c: Consumer, assigned: list[TopicPartition]) -> None:
            if args.from_ is not None:  # else: the committed offsets (or the earliest)
                assigned = positions.resolve(c, args.topic, [tp.partition for tp in assigned],
                                             args.from_, args)
            c.assign(assigned)
        consumer.subscribe([args.topic], on_assign=on_assign)
        return
    wanted = args.partition or list(range(partitions))
    if bad := [p for p in wanted if not 0 <= p < partitions]:
        raise rdkafka.AdminError(f"topic {args.topic} has no partition {bad[0]} (it has "
                                 f"{partitions}); hint: `headwater topic describe`")
    start = args.from_ or positions.Start(OFFSET_BEGINNING)
    consumer.assign(positions.resolve(consumer, args.topic, wanted, start, args))


def cmd_consume(args: argparse.Namespace) -> None:
    if args.share_group and args.exit_at_end:
        raise rdkafka.AdminError("--exit-at-end does not apply to --share-group (a share "
                                 "group has no end to reach); hint: --timeout-ms")
    if args.share_group:
        return consume_shared(args)
    if args.partition and args.group:
        raise rdkafka.AdminError("--partition and --group exclude each other; hint: a group "
                                 "member is assigned its partitions")
    consumer = _consumer(args)
    try:
        try:
            metadata = consumer.list_topics(args.topic, timeout=rdkafka.CONNECT_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001
            raise rdkafka.explain(exc, args) from None
        _start(consumer, args, rdkafka.check_topic(metadata, args.topic, args))
        _loop(consumer, args)
    finally:
        consumer.close()


def _loop(consumer: Consumer, args: argparse.Namespace) -> None:
    write, stop = printer(args), Stop(args)
    pending: dict[int, int] = {}  # partition -> next offset to commit
    committed = time.monotonic()

    def assigned() -> set[int]:
        return {tp.partition for tp in consumer.assignment()}

    def commit(wait: bool) -> None:
        offsets = [TopicPartition(args.topic, p, o) for p, o in pending.items()]
        pending.clear()
        if offsets and wait:
            consumer.commit(offsets=offsets, asynchronous=False)
        elif offsets:
            consumer.commit(offsets=offsets, asynchronous=True)
    try:
        while not stop.done(assigned):
            msg: Message | None = consumer.poll(0.2)
            if msg is None:
                continue
            error = msg.error()
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                stop.end_of(msg.partition() or 0)
                continue
            if not check(error, args):
                continue
            write(msg)
            stop.got(msg.partition() or 0)
            if args.group:
                pending[msg.partition() or 0] = (msg.offset() or 0) + 1
                if time.monotonic() - committed > COMMIT_EVERY_S:
                    commit(wait=False)
                    committed = time.monotonic()
    except KeyboardInterrupt:
        pass
    if args.group:
        try:
            commit(wait=True)
        except Exception as exc:  # noqa: BLE001
            raise rdkafka.explain(exc, args, f"group {args.group}") from None


def add_parser(sub: Any) -> None:
    c = sub.add_parser("consume", help="print records of a topic")
    add_arguments(c)
    c.add_argument("topic")
    c.add_argument("--from", dest="from_", type=positions.parse, default=None,
                   metavar="beginning|end|OFFSET|@TIMESTAMP_MS",
                   help="where to start (default: beginning; for --group its committed "
                        "offsets, else the beginning)")
    c.add_argument("--group", "-g", help="consume as a member of this consumer group and "
                                         "commit what was printed")
    c.add_argument("--share-group", help="consume as a member of this share group (KIP-932)")
    c.add_argument("--ack", choices=["accept", "release", "reject"], default="accept",
                   help="with --share-group: how each record is acknowledged")
    c.add_argument("--partition", "-p", type=int, action="append", default=[],
                   help="read this partition (repeatable; default: all)")
    c.add_argument("--num", "-n", type=int, help="stop after N records")
    c.add_argument("--timeout-ms", type=int, help="stop after this long without a record")
    c.add_argument("--exit-at-end", "-e", action="store_true",
                   help="stop once every assigned partition is read to its end (kcat -e)")
    c.add_argument("--format", "-f", default="%s\\n",
                   help="kcat's: %%t topic %%p partition %%o offset %%T timestamp "
                        "%%k key %%s value (%%v too) %%h headers %%K/%%S lengths, \\n \\t "
                        "(default '%%s\\n')")
    c.add_argument("--json", action="store_true", help="one JSON object per record")
    c.add_argument("--isolation", choices=["read_committed", "read_uncommitted"],
                   default="read_uncommitted")
    c.set_defaults(func=cmd_consume)
