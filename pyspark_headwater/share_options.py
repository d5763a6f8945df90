"""Options of the share-group source (``kafka.share.group.id`` set), validated at planning
time with the option named, like the partitioned source's.

A share group decides itself where reading starts and which records each member gets,
so the partitioned source's position options (``startingOffsets`` & co.,
``maxOffsetsPerTrigger``, ``kafka.group.id``) contradict it and are refused, each with a
pointer to the share-group equivalent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from headwater.wire.client_properties import unsupported

from .options import (
    EXTRA_NAMES,
    SOURCE_OPTIONS,
    SourceOptions,
    _check_unknown,
    _client_props,
    _decoder,
    _fail,
    parse_bool,
    parse_int,
)

SHARE_GROUP_OPTION = "kafka.share.group.id"

# Group configs (Kafka's names) the query may set on its share group before joining.
GROUP_CONFIGS = {k.lower(): k for k in (
    "share.auto.offset.reset", "share.record.lock.duration.ms", "share.delivery.count.limit",
    "share.partition.max.record.locks", "share.isolation.level",
    "share.heartbeat.interval.ms", "share.session.timeout.ms",
    "errors.deadletterqueue.topic.name",
)}
SHARE_OPTIONS = {k.lower(): k for k in (
    "kafka.bootstrap.servers", "subscribe", "maxRecordsPerTrigger", "minPartitions",
    "maxRecordsPerPartition", "failOnDataLoss", "includeHeaders",
    "kafkaConsumer.pollTimeoutMs", "decoder", "share.acknowledge", "share.fetchMaxWaitMs",
    "share.verdictTopic",
    "path",
)} | GROUP_CONFIGS

EXTRA_NAMES.update(SHARE_OPTIONS)

# Partitioned-source options that contradict a share group, and why.
_REFUSED = {
    "startingoffsets": "a share group decides where it starts: set "
                       "'share.auto.offset.reset' (earliest, latest or by_duration:...)",
    "startingtimestamp": "a share group decides where it starts: set "
                         "'share.auto.offset.reset' to 'by_duration:...'",
    "startingoffsetsbytimestamp": "a share group decides where it starts",
    "startingoffsetsbytimestampstrategy": "a share group decides where it starts",
    "endingoffsets": "a share group is read as a queue, it has no end",
    "endingtimestamp": "a share group is read as a queue, it has no end",
    "endingoffsetsbytimestamp": "a share group is read as a queue, it has no end",
    "maxoffsetspertrigger": "use 'maxRecordsPerTrigger': share groups hand out records, "
                            "not offset ranges",
    "minoffsetspertrigger": "a share group hands out what is available",
    "maxtriggerdelay": "a share group hands out what is available",
    "subscribepattern": "share groups subscribe by topic names: use 'subscribe'",
    "assign": "the share group assigns partitions: use 'subscribe'",
    "commitoffsets": "a share group keeps its progress as acknowledgements",
    "groupidprefix": "the share group is named by 'kafka.share.group.id'",
}
_REFUSED_KAFKA = {
    "group.id": "'kafka.group.id' names a consumer group; a share group is named by "
                "'kafka.share.group.id' alone",
    "auto.offset.reset": "set the group config 'share.auto.offset.reset' instead",
    "isolation.level": "set the group config 'share.isolation.level' instead",
    "group.protocol": "the share source speaks the share-group protocol itself",
    "share.acknowledgement.mode": "the source acknowledges after the sink commits "
                                  "(see 'share.acknowledge')",
}
ACK_MODES = ("afterCommit", "onRead")


@dataclass(frozen=True)
class ShareOptions:
    """The validated share-source options; ``read`` is what executors re-read with."""

    group: str
    read: SourceOptions
    max_records_per_trigger: int = 100_000
    ack_mode: str = "afterCommit"
    fetch_wait_ms: int = 200
    verdict_topic: str | None = None
    group_configs: tuple[tuple[str, str], ...] = ()


def is_share_source(opts: Mapping[str, str]) -> bool:
    return SHARE_GROUP_OPTION in {k.lower() for k in opts}


def parse_share_options(opts: Mapping[str, str], streaming: bool | None = None
                        ) -> ShareOptions:
    opts = {k.lower(): v for k, v in opts.items()}
    for key, why in _REFUSED.items():
        if key in opts:
            raise _fail(f"Option '{SOURCE_OPTIONS.get(key, key)}' cannot be used with "
                        f"'{SHARE_GROUP_OPTION}': {why}")
    for key, why in _REFUSED_KAFKA.items():
        if "kafka." + key in opts:
            raise _fail(f"Option 'kafka.{key}' cannot be used with '{SHARE_GROUP_OPTION}': "
                        f"{why}")
    _check_unknown({k: v for k, v in opts.items() if not k.startswith("kafka.")},
                   SHARE_OPTIONS, "share-group source")
    if streaming is False:
        raise _fail(f"Option '{SHARE_GROUP_OPTION}': a share group can only be read by a "
                    "streaming query (spark.readStream; use trigger(availableNow=True) to "
                    "drain what is there now and stop). A batch read could not acknowledge "
                    "the records after its output is written.")
    group = opts[SHARE_GROUP_OPTION].strip()
    if not group:
        raise _fail(f"Option '{SHARE_GROUP_OPTION}' is empty")
    if "subscribe" not in opts:
        raise _fail(f"Option 'subscribe' must be specified with '{SHARE_GROUP_OPTION}': the "
                    "topics the share group reads")
    topics = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
    if not topics:
        raise _fail("No topics to subscribe to as specified value for option 'subscribe' "
                    f"is '{opts['subscribe']}'")
    kafka, bootstrap = _client_props({k: v for k, v in opts.items()
                                      if k != SHARE_GROUP_OPTION}, {}, "client")
    if unsupported(kafka):
        raise _fail(f"Option '{SHARE_GROUP_OPTION}': the share-group source connects with "
                    "headwater's own client, which does not support "
                    + ", ".join(unsupported(kafka)) + " (PEM files; SASL PLAIN, "
                    "SCRAM-SHA-256, SCRAM-SHA-512)")
    ack = opts.get("share.acknowledge", "afterCommit").strip()
    if ack.lower() not in (m.lower() for m in ACK_MODES):
        raise _fail(f"Option 'share.acknowledge' must be one of {', '.join(ACK_MODES)}, "
                    f"got '{ack}'")
    configs = {GROUP_CONFIGS[k]: v.strip() for k, v in opts.items() if k in GROUP_CONFIGS}
    isolation = configs.get("share.isolation.level", "read_uncommitted").lower()
    if isolation not in ("read_committed", "read_uncommitted"):
        raise _fail("Option 'share.isolation.level' must be 'read_committed' or "
                    f"'read_uncommitted', got '{isolation}'")
    read = SourceOptions(
        bootstrap=bootstrap, strategy="subscribe", topics=topics,
        min_partitions=parse_int(opts, "minpartitions", 1),
        max_records_per_partition=parse_int(opts, "maxrecordsperpartition", 1),
        fail_on_data_loss=parse_bool(opts, "failondataloss", True),
        include_headers=parse_bool(opts, "includeheaders", False),
        isolation_level=isolation,
        poll_timeout_ms=parse_int(opts, "kafkaconsumer.polltimeoutms", 1) or 120_000,
        decoder=_decoder(opts), kafka=tuple(sorted(kafka.items())))
    verdict_topic = (opts.get("share.verdicttopic") or "").strip() or None
    if verdict_topic is not None and ack.lower() == "onread":
        raise _fail("Options 'share.verdictTopic' and 'share.acknowledge' = 'onRead' "
                    "contradict each other: records are accepted before the pipeline "
                    "could give a verdict")
    max_records = parse_int(opts, "maxrecordspertrigger", 1)
    wait = parse_int(opts, "share.fetchmaxwaitms", 0)
    return ShareOptions(
        group=group, read=read,
        max_records_per_trigger=max_records if max_records is not None else 100_000,
        ack_mode="onRead" if ack.lower() == "onread" else "afterCommit",
        fetch_wait_ms=wait if wait is not None else 200, verdict_topic=verdict_topic,
        group_configs=tuple(sorted(configs.items())))
