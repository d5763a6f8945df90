"""`headwater consume TOPIC --share-group G`: read as a share consumer (KIP-932), each
record acknowledged as `--ack` says (accept: done; release: delivered again, to this or
another member; reject: never delivered again), the acknowledgements committed before
the command exits.

A share group starts where its `share.auto.offset.reset` group config says (latest by
default): `--from beginning|end` sets it (IncrementalAlterConfigs on the group) before
joining; it only matters for partitions the group has not read yet. Records fetched
beyond `--num` are released, so the next member gets them.
"""

from __future__ import annotations

import argparse

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, AcknowledgeType, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from . import rdkafka
from .reading import Stop, check, printer

ACKS = {"accept": AcknowledgeType.ACCEPT, "release": AcknowledgeType.RELEASE,
        "reject": AcknowledgeType.REJECT}


def _prepare(args: argparse.Namespace) -> None:
    """The topic exists (and the broker answers); the group starts where --from says."""
    admin = rdkafka.make(AdminClient, rdkafka.config(args))
    try:
        metadata = admin.list_topics(args.topic, timeout=rdkafka.CONNECT_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001
        raise rdkafka.explain(exc, args) from None
    rdkafka.check_topic(metadata, args.topic, args)
    if args.from_ is None:
        return
    reset = {OFFSET_BEGINNING: "earliest", OFFSET_END: "latest"}.get(args.from_.offset)
    if reset is None or args.from_.timestamp is not None:
        raise rdkafka.AdminError("a share group starts at its beginning or end; hint: "
                                 "--from beginning or --from end")
    entry = ConfigEntry("share.auto.offset.reset", reset,
                        incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.GROUP, args.share_group, incremental_configs=[entry])
    try:
        admin.incremental_alter_configs([resource])[resource].result(30)
    except Exception as exc:  # noqa: BLE001
        raise rdkafka.explain(exc, args, f"share group {args.share_group}") from None


def consume_shared(args: argparse.Namespace) -> None:
    if args.group or args.partition:
        raise rdkafka.AdminError("--share-group excludes --group and --partition; hint: the "
                                 "share group hands out the records")
    _prepare(args)
    conf = rdkafka.config(args, **{"group.id": args.share_group,
                                   "share.acknowledgement.mode": "explicit"})
    conf.pop("allow.auto.create.topics")  # a share consumer refuses the setting
    consumer = rdkafka.make(ShareConsumer, conf)
    write, stop, ack = printer(args), Stop(args), ACKS[args.ack]
    try:
        consumer.subscribe([args.topic])
        while not stop.done():
            acked = False
            for msg in consumer.poll(0.2) or []:
                if not check(msg.error(), args):
                    continue
                if stop.done():  # beyond --num: back to the group
                    consumer.acknowledge(msg, AcknowledgeType.RELEASE)
                else:
                    write(msg)
                    stop.got()
                    consumer.acknowledge(msg, ack)
                acked = True
            if acked:
                _commit(consumer, args)
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()


def _commit(consumer: ShareConsumer, args: argparse.Namespace) -> None:
    try:
        results = consumer.commit_sync(30)
    except Exception as exc:  # noqa: BLE001
        raise rdkafka.explain(exc, args, f"share group {args.share_group}") from None
    for tp, error in (results or {}).items():
        if error is not None:
            raise rdkafka.explain(error, args, f"share group {args.share_group} partition "
                                               f"{tp.partition}")
