"""The share group page's data, per share-partition, from what the Kafka protocol gives:

* ShareGroupDescribe (77): state, epochs, members and their assigned partitions;
* DescribeShareGroupOffsets v1 (90): the start offset (SPSO) and the lag (KIP-1226);
* ReadShareGroupState (84), asked of the share coordinator (FindCoordinator key type 2)
  with leader epoch -1, which reads without fencing the share-partition leader: the
  persisted state batches (delivery state and count of each offset range);
* ListOffsets: the end offset, so the window [SPSO, end) is known;
* the group's dead-letter topic (DescribeConfigs of the group,
  `errors.deadletterqueue.topic.name`), whose records name their source partition in
  Kafka's `__dlq.errors.*` headers: the dead-lettered count.

What the protocol does not give (docs/console.md): an acquisition is never persisted (in
Kafka neither), so an ACQUIRED record reads as AVAILABLE with the delivery count it had
before it was acquired, and who holds it and until when is known only to the
share-partition leader.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from dataclasses import dataclass, field

from confluent_kafka import Consumer, TopicPartition

from ..admin import configs as admin_configs
from ..admin import groups as admin_groups
from ..admin import rdkafka
from ..admin import share_groups as admin_share
from ..admin.groups import AdminError
from ..share.coordinator import coordinator_key
from .connection import SHARE_KEY, CoordinatorError, Target
from .topics import _text

READ_SHARE_GROUP_STATE = 84
DLQ_TOPIC = "errors.deadletterqueue.topic.name"
DLQ_SCAN_LIMIT = 10_000
STATE_NAMES = {0: "available", 2: "acknowledged", 3: "archiving", 4: "archived"}


@dataclass
class SharePartition:
    topic: str
    partition: int
    start_offset: int | None
    end_offset: int | None
    lag: int | None
    #: records of [start, end) by persisted state; "available" includes acquired ones
    states: dict[str, int] = field(default_factory=dict)
    #: delivery count -> records of [start, end) not finished (available or acquired)
    delivery_counts: dict[int, int] = field(default_factory=dict)
    dead_lettered: int | None = None
    state_error: str | None = None

    @property
    def in_flight(self) -> int | None:
        """Records of the window not finished: available, acquired or archiving."""
        if self.start_offset is None or self.end_offset is None:
            return None
        return max(self.end_offset - self.start_offset - self.states.get("acknowledged", 0)
                   - self.states.get("archived", 0), 0)


@dataclass(frozen=True)
class ShareMember:
    member_id: str
    client_id: str
    host: str
    epoch: int
    assignment: list[str]


@dataclass
class ShareGroupView:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    members: list[ShareMember]
    partitions: list[SharePartition]
    dead_letter_topic: str | None

    @property
    def histogram(self) -> dict[int, int]:
        """Delivery count -> unfinished records, over every share-partition."""
        total: Counter[int] = Counter()
        for p in self.partitions:
            total.update(p.delivery_counts)
        return dict(sorted(total.items()))


def describe(target: Target, group: str) -> ShareGroupView:
    with target.client() as raw:
        g = admin_share._describe_group(raw, group)
        offsets = admin_share._offsets(raw, group)
        topics = sorted({t for t, _p, _s, _l in offsets})
        meta = raw.request(3, 12, {"topics": [{"name": t, "topic_id": None} for t in topics],
                                   "allow_auto_topic_creation": False,
                                   "include_topic_authorized_operations": False})
        ids = {t.name: t.topic_id for t in meta.topics if not int(t.error_code)}
        parts = admin_groups._partitions(raw, [t for t in topics if t in ids]) \
            if ids else {}
        ends = admin_groups._list_offsets(raw, parts, -1)
    members = [ShareMember(m.member_id, m.client_id, m.client_host, m.member_epoch,
                           [f"{tp.topic_name}-{p}" for tp in m.assignment.topic_partitions
                            for p in tp.partitions]) for m in g.members]
    rows = [SharePartition(t, p, start if start >= 0 else None, ends.get((t, p)),
                           lag if lag >= 0 else None) for t, p, start, lag in offsets]
    for row in rows:
        if row.topic in ids:
            _fill_state(target, group, ids[row.topic], row)
    dlq = dead_letter_topic(target, group)
    if dlq:
        counts = dead_letter_counts(target, dlq, group)
        for row in rows:
            row.dead_lettered = counts.get((row.topic, row.partition), 0)
    return ShareGroupView(g.group_id, g.group_state, g.group_epoch, g.assignment_epoch,
                          sorted(members, key=lambda m: m.member_id), rows, dlq)


def _fill_state(target: Target, group: str, topic_id: uuid.UUID, row: SharePartition) -> None:
    """The persisted batches of one share-partition, counted over [start, end)."""
    try:
        with target.coordinator(coordinator_key(group, topic_id, row.partition),
                                SHARE_KEY) as raw:
            resp = raw.request(READ_SHARE_GROUP_STATE, 0, {"group_id": group, "topics": [
                {"topic_id": topic_id, "partitions": [{"partition": row.partition,
                                                       "leader_epoch": -1}]}]})
    except (CoordinatorError, OSError, AdminError) as exc:
        row.state_error = str(exc)
        return
    p = resp.results[0].partitions[0]
    if int(p.error_code):
        row.state_error = f"ReadShareGroupState: {p.error_code.name}"
        return
    start = row.start_offset if row.start_offset is not None else max(int(p.start_offset), 0)
    end = row.end_offset if row.end_offset is not None else start
    states: Counter[str] = Counter()
    counts: Counter[int] = Counter()
    covered = 0
    for b in p.state_batches:
        lo, hi = max(int(b.first_offset), start), min(int(b.last_offset), end - 1)
        if lo > hi:
            continue
        n = hi - lo + 1
        covered += n
        name = STATE_NAMES.get(int(b.delivery_state), str(b.delivery_state))
        states[name] += n
        if name in ("available", "archiving"):
            counts[int(b.delivery_count)] += n
    implicit = max(end - start - covered, 0)  # never persisted: available, count 0
    if implicit:
        states["available"] += implicit
        counts[0] += implicit
    row.states = {name: states.get(name, 0) for name in STATE_NAMES.values()}
    row.delivery_counts = dict(sorted(counts.items()))


def dead_letter_topic(target: Target, group: str) -> str | None:
    """The group's `errors.deadletterqueue.topic.name`, if set (DescribeConfigs)."""
    try:
        rows = json.loads(admin_configs.cmd_describe(target.args(
            json=True, client_quota=None, topic=None, group=group, broker=None,
            broker_default=False)))
    except AdminError:
        return None
    for r in rows:
        if r["name"] == DLQ_TOPIC and r["value"]:
            return str(r["value"])
    return None


def dead_letter_counts(target: Target, topic: str, group: str) -> dict[tuple[str, int], int]:
    """(source topic, partition) -> dead letters of `group` in `topic`, from the
    `__dlq.errors.*` headers of its newest DLQ_SCAN_LIMIT records."""
    conf = rdkafka.config(target.args(), **{"group.id": "headwater-console-dlq",
                                            "enable.auto.commit": False,
                                            "enable.partition.eof": True})
    consumer = rdkafka.make(Consumer, conf)
    out: Counter[tuple[str, int]] = Counter()
    try:
        meta = consumer.list_topics(topic, timeout=rdkafka.CONNECT_TIMEOUT_S)
        found = meta.topics.get(topic)
        if found is None or found.error is not None:
            return {}
        assign = []
        for p in found.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                       timeout=rdkafka.CONNECT_TIMEOUT_S)
            if high > low:
                assign.append(TopicPartition(topic, p, max(low, high - DLQ_SCAN_LIMIT)))
        if not assign:
            return {}
        consumer.assign(assign)
        pending = len(assign)
        while pending:
            msg = consumer.poll(rdkafka.CONNECT_TIMEOUT_S)
            if msg is None:
                break
            if msg.error() is not None:
                pending -= 1  # end of one partition
                continue
            headers = {str(h[0]): _text(h[1]) for h in (msg.headers() or [])}
            if headers.get("__dlq.errors.group") not in (None, group):
                continue
            source = headers.get("__dlq.errors.topic")
            part = headers.get("__dlq.errors.partition")
            if source is not None and part is not None:
                out[(source, int(part))] += 1
    finally:
        consumer.close()
    return dict(out)
