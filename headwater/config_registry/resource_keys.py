"""Keys of the GROUP config resource (Kafka 4.3's `GroupConfig`, KIP-848 / KIP-932 /
KIP-1191) and of the CLIENT_METRICS resource (KIP-714's `ClientMetricsConfigs`).

A group key with a `synonym` defaults to that broker key (`group.share.*`,
`group.consumer.*`) and is bounded by the broker's `group.<kind>.min.<rest>` /
`group.<kind>.max.<rest>` (group/group_configs.py); the order is validation's.
"""

from __future__ import annotations

from .model import Scope, Setting, Type

INT, LONG, STRING, BOOLEAN, LIST = Type.INT, Type.LONG, Type.STRING, Type.BOOLEAN, Type.LIST


def _group(name: str, type_: Type, synonym: str | None, doc: str, *,
           default: str | None = None, at_least: int | None = None,
           valid: tuple[str, ...] = ()) -> Setting:
    return Setting(name, type_, default, doc, Scope.GROUP, dynamic=True, synonym=synonym,
                   at_least=at_least, valid=valid)


GROUP: tuple[Setting, ...] = (
    _group("consumer.session.timeout.ms", INT, "group.consumer.session.timeout.ms",
           "This consumer group's session timeout.", at_least=1),
    _group("consumer.heartbeat.interval.ms", INT, "group.consumer.heartbeat.interval.ms",
           "This consumer group's heartbeat interval.", at_least=1),
    _group("streams.session.timeout.ms", INT, "group.streams.session.timeout.ms",
           "This streams group's session timeout.", at_least=1),
    _group("streams.heartbeat.interval.ms", INT, "group.streams.heartbeat.interval.ms",
           "This streams group's heartbeat interval.", at_least=1),
    _group("streams.num.standby.replicas", INT, "group.streams.num.standby.replicas",
           "Standby replicas of each stateful task of this streams group.", at_least=0),
    _group("streams.assignment.interval.ms", INT, "group.streams.assignment.interval.ms",
           "Least time between two runs of this streams group's assignor.", at_least=0),
    _group("streams.num.warmup.replicas", INT, "group.streams.num.warmup.replicas",
           "Warm-up replicas of this streams group (none handed out, as Kafka 4.4.0).",
           at_least=0),
    _group("streams.task.offset.interval.ms", INT, "group.streams.task.offset.interval.ms",
           "How often this streams group's members report their task offsets.",
           at_least=1),
    _group("streams.acceptable.recovery.lag", LONG, "group.streams.acceptable.recovery.lag",
           "Changelog records a warm-up task may lag and count as caught up.", at_least=0),
    _group("streams.rack.aware.assignment.tags", STRING,
           "group.streams.rack.aware.assignment.tags",
           "Client tags this streams group's members must send (MISSING_CLIENT_TAGS)."),
    _group("streams.assignor.offload.enable", BOOLEAN,
           "group.streams.assignor.offload.enable",
           "Whether Kafka runs this group's assignor off its coordinator thread."),
    _group("streams.initial.rebalance.delay.ms", INT,
           "group.streams.initial.rebalance.delay.ms",
           "How long this new streams group waits for more members.", at_least=0),
    _group("share.session.timeout.ms", INT, "group.share.session.timeout.ms",
           "This share group's session timeout.", at_least=1),
    _group("share.heartbeat.interval.ms", INT, "group.share.heartbeat.interval.ms",
           "This share group's heartbeat interval.", at_least=1),
    _group("share.assignment.interval.ms", INT, "group.share.assignment.interval.ms",
           "This share group's assignment interval.", at_least=0),
    _group("share.record.lock.duration.ms", INT, "group.share.record.lock.duration.ms",
           "How long a member holds an acquired record.", at_least=1000),
    _group("share.delivery.count.limit", INT, "group.share.delivery.count.limit",
           "Deliveries of a record before it is archived.", at_least=2),
    _group("share.partition.max.record.locks", INT, "group.share.partition.max.record.locks",
           "Most acquired records of one share-partition.", at_least=100),
    _group("share.auto.offset.reset", STRING, None,
           "Where a new share group starts: latest, earliest or by_duration:PnDTnHnMn.nS.",
           default="latest"),
    _group("share.isolation.level", STRING, None,
           "Whether share consumers see uncommitted transactional records.",
           default="read_uncommitted", valid=("read_committed", "read_uncommitted")),
    _group("share.renew.acknowledge.enable", BOOLEAN, None,
           "Members may renew their acquisition locks (KIP-1222).", default="true"),
    # KIP-1191 (Kafka 4.4): the group's dead-letter topic ("" = none), and whether a
    # dead letter carries the record's key, value and headers or only the context headers.
    _group("errors.deadletterqueue.topic.name", STRING, None,
           "The share group's dead-letter topic (\"\": none).", default=""),
    _group("errors.deadletterqueue.copy.record.enable", BOOLEAN, None,
           "A dead letter copies the record's key, value and headers.", default="false"),
)

# Kafka's describe documentation of each key (DescribeConfigs include_documentation).
CLIENT_METRICS: tuple[Setting, ...] = (
    Setting("metrics", LIST, "", "Telemetry metric name prefix list", Scope.CLIENT_METRICS,
            dynamic=True),
    Setting("interval.ms", INT, "300000", "Metrics push interval in milliseconds",
            Scope.CLIENT_METRICS, dynamic=True, at_least=100, at_most=3600000),
    Setting("match", LIST, "", "Client match criteria", Scope.CLIENT_METRICS, dynamic=True),
)

ALL: tuple[Setting, ...] = (*GROUP, *CLIENT_METRICS)
