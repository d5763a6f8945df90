"""`headwater topic create|list|describe|delete|alter-config|add-partitions`, like
`rpk topic`: a newcomer creates and inspects topics without kcat or Kafka's Java tools.

Everything goes through confluent-kafka's AdminClient (CreateTopics, Metadata,
ListOffsets, DescribeConfigs, IncrementalAlterConfigs, CreatePartitions, DeleteTopics),
so the commands work the same against headwater and Apache Kafka.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, IsolationLevel, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from ..iceberg import progress
from . import rdkafka
from .connect import _key_value, add_arguments
from .tables import emit, render

TIMEOUT_S = 30.0


def _admin(args: argparse.Namespace) -> AdminClient:
    return rdkafka.make(AdminClient, rdkafka.config(args))


def _wait(futures: dict[Any, Any], args: argparse.Namespace) -> None:
    for key, future in futures.items():
        name = key.name if isinstance(key, ConfigResource) else key
        try:
            future.result(TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001  KafkaException and timeouts alike
            raise rdkafka.explain(exc, args, f"topic {name}") from None


def _metadata(admin: AdminClient, args: argparse.Namespace, topic: str | None = None) -> Any:
    try:
        return admin.list_topics(topic, timeout=rdkafka.CONNECT_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001
        raise rdkafka.explain(exc, args) from None


def cmd_create(args: argparse.Namespace) -> str:
    admin = _admin(args)
    _metadata(admin, args)  # an unreachable broker fails fast, before CreateTopics
    topic = NewTopic(args.name, num_partitions=args.partitions,
                     replication_factor=args.replicas, config=dict(args.config))
    _wait(admin.create_topics([topic], request_timeout=TIMEOUT_S), args)
    if args.json:
        return json.dumps({"topic": args.name, "created": True})
    return f"created topic {args.name}"


def cmd_list(args: argparse.Namespace) -> str:
    topics = _metadata(_admin(args), args).topics
    rows = [(name, len(t.partitions),
             max((len(p.replicas) for p in t.partitions.values()), default=0))
            for name, t in sorted(topics.items())
            if args.internal or not name.startswith("__")]
    return emit(["TOPIC", "PARTITIONS", "REPLICAS"], rows, args.json)


def _offsets(admin: AdminClient, topic: str, partitions: list[int],
             args: argparse.Namespace) -> dict[tuple[str, int], int]:
    out: dict[tuple[str, int], int] = {}
    specs = (("earliest", OffsetSpec.earliest()),  # type: ignore[no-untyped-call]
             ("latest", OffsetSpec.latest()))  # type: ignore[no-untyped-call]
    for label, spec in specs:
        request = {TopicPartition(topic, p): spec for p in partitions}
        if not request:
            continue
        for tp, future in admin.list_offsets(request, request_timeout=TIMEOUT_S).items():
            try:
                out[(label, tp.partition)] = future.result(TIMEOUT_S).offset
            except Exception as exc:  # noqa: BLE001
                raise rdkafka.explain(exc, args, f"topic {topic}") from None
    return out


def _configs(admin: AdminClient, topic: str, args: argparse.Namespace
             ) -> list[tuple[str, str | None, str]]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    try:
        entries = admin.describe_configs([resource],
                                         request_timeout=TIMEOUT_S)[resource].result(TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001
        raise rdkafka.explain(exc, args, f"topic {topic}") from None
    return sorted((name, None if e.is_sensitive else e.value,
                   ConfigSource(e.source).name.removesuffix("_CONFIG"))
                  for name, e in entries.items())


def cmd_describe(args: argparse.Namespace) -> str:
    admin = _admin(args)
    metadata = _metadata(admin, args, args.name)
    rdkafka.check_topic(metadata, args.name, args)
    parts = metadata.topics[args.name].partitions
    offsets = _offsets(admin, args.name, sorted(parts), args)
    prows: list[tuple[Any, ...]] = [(p, parts[p].leader, ",".join(map(str, parts[p].replicas)),
              ",".join(map(str, parts[p].isrs)), offsets[("earliest", p)],
              offsets[("latest", p)]) for p in sorted(parts)]
    crows = _configs(admin, args.name, args)
    pheaders = ["PARTITION", "LEADER", "REPLICAS", "ISR", "EARLIEST", "LATEST"]
    cheaders = ["CONFIG", "VALUE", "SOURCE"]
    mode = next((v for name, v, _ in crows if name == TABLE_MODE), None)
    table = _table_lag(admin, args.name, sorted(parts), args) \
        if mode not in (None, "disabled") else None
    if table is not None:
        pheaders += ["TABLE-OFFSET", "TABLE-LAG"]
        prows = [(*row, *table.partitions.get(row[0], (None, None))) for row in prows]
    if args.json:
        out = {"topic": args.name, "partitions": json.loads(emit(pheaders, prows, True)),
               "configs": json.loads(emit(cheaders, crows, True))}
        if table is not None:
            out["table"] = {"lag": table.lag, "seconds_behind": table.seconds_behind}
        return json.dumps(out, indent=2)
    summary = "" if table is None else f"; {table.line()}"
    return (f"Topic {args.name}: {len(prows)} partitions{summary}\n\n"
            f"{render(pheaders, prows)}\n\n{render(cheaders, crows)}")


TABLE_MODE = "headwater.iceberg.mode"


class TableLag:
    """A topic's Iceberg table behind its read_committed end: per partition the table's
    next offset and the records it lacks, in all, and for how long (seconds since the
    table commit the lagging partitions were last reported in; 0 when caught up)."""

    def __init__(self, partitions: dict[int, tuple[int | None, int | None]],
                 seconds_behind: float | None) -> None:
        self.partitions = partitions
        self.lag = sum(lag or 0 for _, lag in partitions.values())
        self.seconds_behind = seconds_behind

    def line(self) -> str:
        if self.seconds_behind is None:
            return f"its table has nothing yet ({self.lag} records behind)"
        return (f"its table is {self.lag} records, {self.seconds_behind:.1f} s behind "
                "(a trailing transaction marker counts until records follow it)")


def _table_lag(admin: AdminClient, topic: str, partitions: list[int],
               args: argparse.Namespace) -> TableLag:
    """From the table's progress group (`iceberg/progress.py`) and the partitions' last
    stable offsets."""
    wanted = [TopicPartition(topic, p) for p in partitions]
    group = progress.group_of(topic)
    try:
        listed = admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, wanted)],
            request_timeout=TIMEOUT_S)[group].result(TIMEOUT_S)
        ends = {tp.partition: future.result(TIMEOUT_S).offset
                for tp, future in admin.list_offsets(
                    {tp: OffsetSpec.latest() for tp in wanted},  # type: ignore[no-untyped-call]
                    isolation_level=IsolationLevel.READ_COMMITTED,
                    request_timeout=TIMEOUT_S).items()}
    except Exception as exc:  # noqa: BLE001
        raise rdkafka.explain(exc, args, f"topic {topic}") from None
    rows: dict[int, tuple[int | None, int | None]] = {}
    behind_since: list[int] = []
    reported: list[int] = []
    for tp in listed.topic_partitions:
        offset = tp.offset if tp.offset >= 0 else None
        lag = max(ends[tp.partition] - offset, 0) if offset is not None else None
        rows[tp.partition] = (offset, lag)
        when = progress.committed_ms(tp.metadata)
        if when is not None:
            reported.append(when)
            if lag:
                behind_since.append(when)
    if not reported:
        return TableLag(rows, None)
    seconds = (time.time() * 1000 - min(behind_since)) / 1000 if behind_since else 0.0
    return TableLag(rows, max(seconds, 0.0))


def cmd_delete(args: argparse.Namespace) -> str:
    admin = _admin(args)
    _metadata(admin, args)
    _wait(admin.delete_topics(args.names, request_timeout=TIMEOUT_S), args)
    return "\n".join(f"deleted topic {name}" for name in args.names)


def cmd_alter_config(args: argparse.Namespace) -> str:
    if not args.set and not args.delete:
        raise rdkafka.AdminError("nothing to change; hint: --set KEY=VALUE or --delete KEY")
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
               for k, v in args.set]
    entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                for k in args.delete]
    admin = _admin(args)
    _metadata(admin, args)
    resource = ConfigResource(ResourceType.TOPIC, args.name, incremental_configs=entries)
    _wait(admin.incremental_alter_configs([resource], request_timeout=TIMEOUT_S), args)
    return f"altered {len(entries)} config(s) of topic {args.name}"


def cmd_add_partitions(args: argparse.Namespace) -> str:
    """--num is how many to add (as in rpk); CreatePartitions takes the new total."""
    admin = _admin(args)
    current = rdkafka.check_topic(_metadata(admin, args, args.name), args.name, args)
    total = current + args.num
    _wait(admin.create_partitions([NewPartitions(args.name, total)],
                                  request_timeout=TIMEOUT_S), args)
    return f"topic {args.name}: {current} -> {total} partitions"


def add_parser(sub: Any) -> None:
    p = sub.add_parser("topic", help="create, list, describe, alter and delete topics")
    tsub = p.add_subparsers(dest="topic_command", required=True)

    def cmd(name: str, func: Any, help: str, json_flag: bool = True) -> argparse.ArgumentParser:
        c: argparse.ArgumentParser = tsub.add_parser(name, help=help)
        add_arguments(c)
        if json_flag:
            c.add_argument("--json", action="store_true", help="JSON output")
        c.set_defaults(func=func)
        return c

    c = cmd("create", cmd_create, "create a topic")
    c.add_argument("name")
    c.add_argument("-p", "--partitions", type=int, default=-1,
                   help="partition count (default: the broker's num.partitions)")
    c.add_argument("-r", "--replicas", type=int, default=-1,
                   help="replication factor (default: the broker's default.replication.factor)")
    c.add_argument("-c", "--config", action="append", type=_key_value, default=[],
                   metavar="KEY=VALUE", help="a topic config (repeatable)")
    c = cmd("list", cmd_list, "list topics")
    c.add_argument("--internal", action="store_true", help="include internal (__) topics")
    c = cmd("describe", cmd_describe,
            "partitions, leaders, replicas/ISR, offsets and configs of a topic")
    c.add_argument("name")
    c = cmd("delete", cmd_delete, "delete topics", json_flag=False)
    c.add_argument("names", nargs="+", metavar="name")
    c = cmd("alter-config", cmd_alter_config, "set or delete topic configs (incremental)",
            json_flag=False)
    c.add_argument("name")
    c.add_argument("--set", action="append", type=_key_value, default=[], metavar="KEY=VALUE")
    c.add_argument("--delete", action="append", default=[], metavar="KEY")
    c = cmd("add-partitions", cmd_add_partitions, "add partitions to a topic", json_flag=False)
    c.add_argument("name")
    c.add_argument("-n", "--num", type=int, required=True, help="how many partitions to add")
