"""The topic page's data: partitions, leaders, offsets and configs (admin `topic
describe`, as JSON), each partition's size on disk (DescribeLogDirs, asked of the
partition's leader), and the record browser (a librdkafka consumer assigned to one
partition, no group: it commits nothing and joins nothing)."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from ..admin import rdkafka
from ..admin import topics as admin_topics
from .connection import Target

DESCRIBE_LOG_DIRS = 35
BROWSE_LIMIT = 100
BROWSE_TIMEOUT_S = 5.0


def describe(target: Target, topic: str) -> dict[str, Any]:
    """{"partitions": [...], "configs": [...]} of `topic`, with "size" per partition."""
    found: dict[str, Any] = json.loads(admin_topics.cmd_describe(
        target.args(name=topic, json=True)))
    sizes = log_sizes(target, topic, {p["partition"]: p["leader"]
                                      for p in found["partitions"]})
    for p in found["partitions"]:
        p["records"] = p["latest"] - p["earliest"]
        p["size"] = sizes.get(p["partition"])
    return found


def log_sizes(target: Target, topic: str, leaders: dict[int, int]) -> dict[int, int]:
    """Bytes of each partition on its leader (DescribeLogDirs v4); empty when the
    broker refuses it (DESCRIBE on the cluster is needed)."""
    with target.client() as raw:
        meta = raw.request(3, 12, {"topics": [], "allow_auto_topic_creation": False,
                                   "include_topic_authorized_operations": False})
    address = {b.node_id: f"{b.host}:{b.port}" for b in meta.brokers}
    sizes: dict[int, int] = {}
    for node in sorted(set(leaders.values())):
        if node not in address:
            continue
        wanted = [p for p, leader in leaders.items() if leader == node]
        try:
            with target.client(address[node]) as raw:
                resp = raw.request(DESCRIBE_LOG_DIRS, 4, {"topics": [
                    {"topic": topic, "partitions": wanted}]})
        except OSError:
            continue
        for d in resp.results:
            for t in d.topics:
                for p in t.partitions:
                    if p.partition_index in wanted:
                        sizes[p.partition_index] = sizes.get(p.partition_index, 0) + \
                            int(p.partition_size)
    return sizes


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    timestamp: int
    key: str | None
    value: str | None
    headers: list[tuple[str, str | None]]


def _text(data: str | bytes | None) -> str | None:
    """UTF-8 text, or base64 with a marker when the bytes are not text."""
    if data is None or isinstance(data, str):
        return data
    try:
        return data.decode()
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(data).decode()


def browse(target: Target, topic: str, partition: int, offset: int | None = None,
           timestamp_ms: int | None = None, key: str | None = None,
           limit: int = BROWSE_LIMIT) -> list[Record]:
    """Up to `limit` records of one partition from `offset` (or the first at or after
    `timestamp_ms`; default: the earliest), keeping those whose key equals `key` when
    given (a key search scans at most 10 x `limit` records)."""
    conf = rdkafka.config(target.args(), **{"group.id": "headwater-console-browser",
                                            "enable.auto.commit": False,
                                            "enable.partition.eof": True,
                                            "isolation.level": "read_uncommitted"})
    consumer = rdkafka.make(Consumer, conf)
    try:
        if timestamp_ms is not None:
            found = consumer.offsets_for_times([TopicPartition(topic, partition, timestamp_ms)],
                                               timeout=BROWSE_TIMEOUT_S)[0].offset
            start = found if found >= 0 else None
            if start is None:
                return []
        else:
            low, _high = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                        timeout=BROWSE_TIMEOUT_S)
            start = low if offset is None else max(offset, low)
        consumer.assign([TopicPartition(topic, partition, start)])
        out: list[Record] = []
        scanned, budget = 0, limit * 10 if key is not None else limit
        while len(out) < limit and scanned < budget:
            msg = consumer.poll(BROWSE_TIMEOUT_S)
            if msg is None:
                break
            if msg.error() is not None:
                break  # end of the partition (or an error: stop browsing)
            scanned += 1
            k = _text(msg.key())
            if key is not None and k != key:
                continue
            headers = [(str(h[0]), _text(h[1])) for h in (msg.headers() or [])]
            out.append(Record(partition, msg.offset() or 0, msg.timestamp()[1], k,
                              _text(msg.value()), headers))
        return out
    finally:
        consumer.close()
