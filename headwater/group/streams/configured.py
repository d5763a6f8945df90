"""A topology checked against the metadata (Kafka's InternalTopicManager.configureTopics):
how many tasks each subtopology has, which internal topics must exist with how many
partitions, and why the group cannot be assigned yet when it cannot.

Steps, in Kafka's order, the first failure ending them with a status for the heartbeat:

1. every source topic named by the topology exists, else MISSING_SOURCE_TOPICS;
2. repartition topics without a fixed partition count get the largest partition count
   among the source topics of the subtopologies writing to them, repeated until every
   count is known (a repartition topic may feed another);
3. copartition groups: topics that must be copartitioned have one partition count
   (external topics must agree, repartition topics are coerced to it), else
   INCORRECTLY_PARTITIONED_TOPICS;
4. changelog topics have one partition per task of their subtopology, and a
   subtopology has as many tasks as its largest source (or repartition source) topic;
5. internal topics that exist must have the partitions decided, else
   INCORRECTLY_PARTITIONED_TOPICS; missing ones are returned to be created (the broker
   creates them) with MISSING_INTERNAL_TOPICS until they exist.

The result is only a cache: it is recomputed from the topology and the image whenever
either changes, never stored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .topology import CopartitionGroup, Subtopology, TopicInfo, Topology

if TYPE_CHECKING:
    from ...metadata.image import MetadataImage

# StreamsGroupHeartbeatResponse.Status (Kafka 4.4 clients).
STALE_TOPOLOGY = 0
MISSING_SOURCE_TOPICS = 1
INCORRECTLY_PARTITIONED_TOPICS = 2
MISSING_INTERNAL_TOPICS = 3
SHUTDOWN_APPLICATION = 4
ASSIGNMENT_DELAYED = 5
MISSING_CLIENT_TAGS = 6


Count = Callable[[str], "int | None"]  # a topic's partition count, known or decided


class TopicConfigurationError(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


@dataclass(frozen=True, slots=True)
class InternalTopic:
    """A missing internal topic the broker creates: CreateTopics' fields."""

    name: str
    partitions: int
    replication_factor: int  # -1: the broker's default
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class ConfiguredTopology:
    epoch: int
    # Subtopology id -> number of tasks, when the topology could be configured.
    tasks: dict[str, int] | None
    to_create: tuple[InternalTopic, ...] = ()
    status: tuple[int, str] | None = None  # (Status code, detail) for the heartbeat
    stateful: frozenset[str] = field(default_factory=frozenset)
    # The internal topics' partition counts as decided (what describe shows).
    partitions: dict[str, int] = field(default_factory=dict)

    @property
    def ready(self) -> bool:
        """Tasks can be assigned: configured and no internal topic missing."""
        return self.tasks is not None and self.status is None


def summarize(names: set[str] | list[str]) -> str:
    """Kafka's summarizeTopics: sorted, comma separated."""
    return ", ".join(sorted(names))


def configure(topology: Topology, image: MetadataImage) -> ConfiguredTopology:
    try:
        missing = sorted({t for s in topology.subtopologies for t in s.source_topics
                          if image.topic(t) is None})
        if missing:
            raise TopicConfigurationError(MISSING_SOURCE_TOPICS,
                                          f"Source topics {summarize(missing)} are missing.")
        decided: dict[str, int] = {}

        def count(topic: str) -> int | None:
            existing = image.topic(topic)
            if existing is not None:
                return len(existing.partitions)
            return decided.get(topic)

        _repartition_counts(topology, count, decided)
        for sub in topology.subtopologies:
            for group in sub.copartition_groups:
                _copartition(sub, group, topology, count, decided)
        tasks: dict[str, int] = {}
        for sub in topology.subtopologies:
            sources = list(sub.source_topics) + [t.name for t in sub.repartition_source_topics]
            counts = [count(t) or 0 for t in sources]
            tasks[sub.subtopology_id] = max(counts, default=0)
            for changelog in sub.state_changelog_topics:
                decided[changelog.name] = (changelog.partitions or tasks[sub.subtopology_id])
        to_create = _missing_internal_topics(topology, image, decided)
    except TopicConfigurationError as exc:
        return ConfiguredTopology(topology.epoch, None, status=(exc.status, exc.detail))
    stateful = frozenset(s.subtopology_id for s in topology.subtopologies if s.stateful)
    if to_create:
        names = [t.name for t in to_create]
        return ConfiguredTopology(topology.epoch, tasks, to_create,
                                  (MISSING_INTERNAL_TOPICS,
                                   f"Internal topics are missing: {summarize(names)}"),
                                  stateful, decided)
    return ConfiguredTopology(topology.epoch, tasks, stateful=stateful, partitions=decided)


def _repartition_counts(topology: Topology, count: Count, decided: dict[str, int]) -> None:
    """Step 2: fixed counts as given, the others from the writers' sources."""
    pending: list[TopicInfo] = []
    for sub in topology.subtopologies:
        for topic in sub.repartition_source_topics:
            if topic.partitions:
                decided[topic.name] = topic.partitions
            else:
                pending.append(topic)
    while pending:
        progress = False
        for topic in list(pending):
            candidates = []
            for writer in topology.subtopologies:
                if topic.name in writer.repartition_sink_topics:
                    candidates += [n for n in (count(t) for t in writer.source_topics)
                                   if n is not None]
                    candidates += [decided[t.name] for t in writer.repartition_source_topics
                                   if t.name in decided]
            if candidates:
                decided[topic.name] = max(candidates)
                pending.remove(topic)
                progress = True
        if not progress:
            raise TopicConfigurationError(
                INCORRECTLY_PARTITIONED_TOPICS,
                "Failed to compute number of partitions for all repartition topics, make "
                "sure all user input topics are created and all Pattern subscriptions match "
                "at least one topic in the cluster")


def _copartition(sub: Subtopology, group: CopartitionGroup, topology: Topology,
                 count: Count, decided: dict[str, int]) -> None:
    """Step 3 for one copartition group (Kafka's CopartitionedTopicsEnforcer)."""
    sources = [sub.source_topics[i] for i in group.source_topics
               if 0 <= i < len(sub.source_topics)]
    repartition = [sub.repartition_source_topics[i]
                   for i in group.repartition_source_topics
                   if 0 <= i < len(sub.repartition_source_topics)]
    if not sources and not repartition:
        return
    fixed = {t.name for s in topology.subtopologies for t in s.repartition_source_topics
             if t.partitions}
    if sources:
        counts = {t: count(t) or 0 for t in sources}
        if len(set(counts.values())) > 1:
            listed = ", ".join(f"{t}={n}" for t, n in sorted(counts.items()))
            raise TopicConfigurationError(INCORRECTLY_PARTITIONED_TOPICS,
                                          f"Following topics are not copartitioned: [{listed}]")
        wanted = next(iter(counts.values()))
    else:
        fixed_counts = {t.name: decided[t.name] for t in repartition if t.name in fixed}
        if len(set(fixed_counts.values())) > 1:
            listed = ", ".join(f"{t}={n}" for t, n in sorted(fixed_counts.items()))
            raise TopicConfigurationError(
                INCORRECTLY_PARTITIONED_TOPICS,
                f"Following topics do not have the same number of partitions: [{listed}]")
        wanted = (next(iter(fixed_counts.values())) if fixed_counts
                  else max(decided.get(t.name, 0) for t in repartition))
    for topic in repartition:
        if topic.name not in fixed:
            decided[topic.name] = wanted
        elif decided[topic.name] != wanted:
            raise TopicConfigurationError(
                INCORRECTLY_PARTITIONED_TOPICS,
                f"Number of partitions [{decided[topic.name]}] of repartition topic "
                f"[{topic.name}] doesn't match number of partitions [{wanted}] of the source "
                f"topic.")


def _missing_internal_topics(topology: Topology, image: MetadataImage,
                             decided: dict[str, int]) -> tuple[InternalTopic, ...]:
    """Step 5."""
    wanted: dict[str, InternalTopic] = {}
    for sub in topology.subtopologies:
        for info in sub.repartition_source_topics + sub.state_changelog_topics:
            wanted[info.name] = InternalTopic(info.name, decided[info.name],
                                              info.replication_factor or -1, info.configs)
    missing = []
    for name, topic in sorted(wanted.items()):
        existing = image.topic(name)
        if existing is None:
            missing.append(topic)
        elif len(existing.partitions) != topic.partitions:
            raise TopicConfigurationError(
                INCORRECTLY_PARTITIONED_TOPICS,
                f"Existing topic {name} has different number of partitions: expected "
                f"{topic.partitions}, found {len(existing.partitions)}")
    return tuple(missing)
