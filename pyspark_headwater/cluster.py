"""Driver-side access to the broker: partitions, offsets, consumer-group commits.

Used by the batch planner and by the long-lived stream "runner" process. It speaks the
Kafka protocol through confluent-kafka's AdminClient (Metadata, ListOffsets,
OffsetCommit/OffsetFetch); the connector never imports broker internals, so it works
against any Kafka-compatible broker.

Instances hold a live client, so they are created lazily and never pickled: the reader
objects that own one drop it in ``__getstate__``.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from confluent_kafka import ConsumerGroupTopicPartitions, IsolationLevel, KafkaException
from confluent_kafka import TopicPartition as KTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from .options import HeadwaterOptionError, SourceOptions, TopicPartition

log = logging.getLogger("pyspark_headwater")

REQUEST_TIMEOUT_S = 30.0
COMMIT_METADATA = "pyspark_headwater"
T = TypeVar("T")


class DataLossError(RuntimeError):
    """Offsets the query needs are gone (retention, deleted topic) and failOnDataLoss is on."""


FAIL_ON_DATA_LOSS_HINT = (
    " Some data may have been lost because they are not available in the broker any more; "
    "either the data was aged out or the topic may have been deleted before all the data in "
    "the topic was processed. If you don't want your streaming query to fail on such cases, "
    "set the source option 'failOnDataLoss' to 'false'.")


def report_data_loss(fail: bool, message: str) -> None:
    """Spark's ``reportDataLoss``: raise when failOnDataLoss is on, otherwise warn."""
    if fail:
        raise DataLossError(message + FAIL_ON_DATA_LOSS_HINT)
    log.warning("%s (failOnDataLoss=false: skipping)", message)


def check_client_properties(props: Mapping[str, str], role: str) -> None:
    """Let librdkafka judge kafka.* pass-through properties at planning time.

    A client built without ``bootstrap.servers`` never touches the network, so this is a
    cheap, exact check of names and values; the error names the offending property.
    """
    from confluent_kafka import Consumer, Producer

    conf = {k: v for k, v in props.items() if k != "bootstrap.servers"}
    try:
        if role == "consumer":
            Consumer({**conf, "group.id": conf.get("group.id", "pyspark-headwater-check")}
                     ).close()
        else:
            Producer(conf).flush(0)
    except KafkaException as exc:
        err = exc.args[0]
        text = err.str() if hasattr(err, "str") else str(exc)
        raise HeadwaterOptionError(f"Invalid kafka.* option for the {role}: {text}") from None


class Cluster:
    """Metadata and offsets for one source's topics, with Spark's retry options."""

    def __init__(self, opts: SourceOptions, retries: int = 3, retry_interval_s: float = 1.0
                 ) -> None:
        self.opts = opts
        self.retries = retries
        self.retry_interval_s = retry_interval_s
        self._admin: AdminClient | None = None

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(self.opts.client_config)
        return self._admin

    def close(self) -> None:
        self._admin = None  # AdminClient has no close(); dropping it stops its threads

    def _retry(self, what: str, fn: Callable[[], T]) -> T:
        for attempt in range(self.retries + 1):
            try:
                return fn()
            except KafkaException as exc:
                if attempt == self.retries:
                    raise RuntimeError(f"{what} failed after {attempt + 1} attempts: "
                                       f"{exc}") from exc
                log.warning("%s failed (%s), retrying", what, exc)
                time.sleep(self.retry_interval_s)
        raise AssertionError("unreachable")

    # ---- partitions --------------------------------------------------------------------
    def partitions(self) -> list[TopicPartition]:
        """The partitions the strategy selects right now (assign/subscribe/pattern)."""
        if self.opts.strategy == "assign":
            return sorted(self.opts.assigned)
        md = self._retry("Metadata", lambda: self.admin.list_topics(timeout=REQUEST_TIMEOUT_S))
        if self.opts.strategy == "subscribe":
            wanted = set(self.opts.topics)
            names = [n for n in md.topics if n in wanted]
        else:
            pattern = re.compile(self.opts.pattern)
            names = [n for n in md.topics
                     if not n.startswith("__") and pattern.fullmatch(n)]
        out = []
        for name in names:
            topic = md.topics[name]
            if topic.error is not None:
                continue
            out += [(name, p) for p in topic.partitions]
        return sorted(out)

    # ---- offsets -----------------------------------------------------------------------
    def _list(self, specs: Mapping[TopicPartition, OffsetSpec]) -> dict[TopicPartition, int]:
        if not specs:
            return {}
        level = (IsolationLevel.READ_COMMITTED if self.opts.isolation_level == "read_committed"
                 else IsolationLevel.READ_UNCOMMITTED)

        def call() -> dict[TopicPartition, int]:
            futures = self.admin.list_offsets(
                {KTopicPartition(t, p): s for (t, p), s in specs.items()},
                isolation_level=level, request_timeout=REQUEST_TIMEOUT_S)
            return {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}

        return self._retry("ListOffsets", call)

    def earliest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list({tp: OffsetSpec.earliest() for tp in tps})

    def latest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """High watermark, or the last stable offset under read_committed."""
        return self._list({tp: OffsetSpec.latest() for tp in tps})

    def for_timestamps(self, stamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """First offset whose timestamp is >= the given one; -1 where there is none."""
        return self._list({tp: OffsetSpec.for_timestamp(ts) for tp, ts in stamps.items()})

    def timestamp_types(self, topics: Iterable[str]) -> dict[str, int]:
        """Each topic's timestamp type as the source reports it (0 CreateTime, 1
        LogAppendTime), from its ``message.timestamp.type``: rows read from a topic's
        table carry no type of their own."""
        from confluent_kafka.admin import ConfigResource, ResourceType

        def call() -> dict[str, int]:
            futures = self.admin.describe_configs(
                [ConfigResource(ResourceType.TOPIC, t) for t in topics],
                request_timeout=REQUEST_TIMEOUT_S)
            out = {}
            for resource, future in futures.items():
                entry = future.result().get("message.timestamp.type")
                out[resource.name] = int(entry is not None
                                         and entry.value == "LogAppendTime")
            return out

        return self._retry("DescribeConfigs", call)

    # ---- consumer group ----------------------------------------------------------------
    def commit_group(self, group: str, offsets: Mapping[TopicPartition, int]) -> bool:
        """Advisory commit of the query's progress (a "simple" commit: no member, no
        generation, since Spark and not the group assigns partitions). Failures are
        logged, never raised: Spark's checkpoint is what the query resumes from."""
        if not offsets:
            return True
        req = ConsumerGroupTopicPartitions(group, [
            KTopicPartition(t, p, o, metadata=COMMIT_METADATA)
            for (t, p), o in sorted(offsets.items())])
        try:
            result = self.admin.alter_consumer_group_offsets(
                [req], request_timeout=REQUEST_TIMEOUT_S)[group].result()
        except KafkaException as exc:
            log.warning("committing offsets to group %r failed: %s", group, exc)
            return False
        failed = [tp for tp in result.topic_partitions if tp.error is not None]
        if failed:
            log.warning("committing offsets to group %r failed for %s", group,
                        ", ".join(f"{tp.topic}-{tp.partition}: {tp.error}" for tp in failed))
            return False
        return True
