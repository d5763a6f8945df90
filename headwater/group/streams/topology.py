"""A streams group's topology as its first member declares it (Kafka's StreamsTopology):
subtopologies with their source topics (names or regular expressions), the repartition
topics they write to and read from, their state changelog topics and copartition groups.

It is stored as record 23 (StreamsGroupTopology) when a member initialises the group,
and compared with the topology of every later joining member (`from_request`): the
broker knows which tasks exist (one per partition of a subtopology's sources), which
internal topics to create, and which subtopologies are stateful (those with
changelogs: only their tasks get standby replicas).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """An internal topic: its name, partitions (0: derived), replication factor (0: the
    broker's default) and topic configs."""

    name: str
    partitions: int = 0
    replication_factor: int = 0
    configs: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "partitions": self.partitions,
                "replication_factor": self.replication_factor,
                "topic_configs": [{"key": k, "value": v} for k, v in self.configs]}

    @classmethod
    def of(cls, item: Any) -> TopicInfo:
        """From a record's dict or a kio TopicInfo."""
        if isinstance(item, TopicInfo):
            return item
        if isinstance(item, Mapping):
            return cls(item["name"], int(item["partitions"]), int(item["replication_factor"]),
                       tuple((c["key"], c["value"]) for c in item.get("topic_configs") or ()))
        return cls(item.name, int(item.partitions), int(item.replication_factor),
                   tuple((c.key, c.value) for c in item.topic_configs or ()))


@dataclass(frozen=True, slots=True)
class CopartitionGroup:
    """Indexes into the subtopology's source topics, regexes and repartition sources."""

    source_topics: tuple[int, ...] = ()
    source_topic_regex: tuple[int, ...] = ()
    repartition_source_topics: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    source_topic_regex: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    copartition_groups: tuple[CopartitionGroup, ...] = ()

    @property
    def stateful(self) -> bool:
        return bool(self.state_changelog_topics)

    def to_dict(self) -> dict[str, Any]:
        return {"subtopology_id": self.subtopology_id,
                "source_topics": list(self.source_topics),
                "source_topic_regex": list(self.source_topic_regex),
                "state_changelog_topics": [t.to_dict() for t in self.state_changelog_topics],
                "repartition_sink_topics": list(self.repartition_sink_topics),
                "repartition_source_topics": [t.to_dict()
                                              for t in self.repartition_source_topics],
                "copartition_groups": [
                    {"source_topics": list(g.source_topics),
                     "source_topic_regex": list(g.source_topic_regex),
                     "repartition_source_topics": list(g.repartition_source_topics)}
                    for g in self.copartition_groups]}

    @classmethod
    def of(cls, item: Any) -> Subtopology:
        """From a record's dict or a kio Subtopology (field names are the same)."""
        if isinstance(item, Subtopology):
            return item

        def get(name: str) -> Any:
            return item[name] if isinstance(item, Mapping) else getattr(item, name)

        def ints(group: Any, name: str) -> tuple[int, ...]:
            value = group[name] if isinstance(group, Mapping) else getattr(group, name)
            return tuple(int(i) for i in value or ())

        return cls(
            str(get("subtopology_id")), tuple(get("source_topics") or ()),
            tuple(get("source_topic_regex") or ()),
            tuple(TopicInfo.of(t) for t in get("state_changelog_topics") or ()),
            tuple(get("repartition_sink_topics") or ()),
            tuple(TopicInfo.of(t) for t in get("repartition_source_topics") or ()),
            tuple(CopartitionGroup(ints(g, "source_topics"), ints(g, "source_topic_regex"),
                                   ints(g, "repartition_source_topics"))
                  for g in get("copartition_groups") or ()))


@dataclass(frozen=True, slots=True)
class Topology:
    """The topology epoch and its subtopologies, in id order."""

    epoch: int
    subtopologies: tuple[Subtopology, ...]

    @classmethod
    def of(cls, epoch: int, subtopologies: Iterable[Any]) -> Topology:
        subs = [Subtopology.of(s) for s in subtopologies]
        return cls(int(epoch), tuple(sorted(subs, key=lambda s: s.subtopology_id)))

    @classmethod
    def from_record(cls, value: Mapping[str, Any]) -> Topology:
        return cls.of(value["epoch"], value.get("subtopologies") or ())

    def record_value(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "subtopologies": [s.to_dict() for s in self.subtopologies]}

    def subtopology(self, subtopology_id: str) -> Subtopology | None:
        for s in self.subtopologies:
            if s.subtopology_id == subtopology_id:
                return s
        return None

    def source_topic_names(self) -> set[str]:
        """The user topics read by name (not the repartition topics)."""
        return {t for s in self.subtopologies for t in s.source_topics}

    def internal_topic_names(self) -> set[str]:
        return {t.name for s in self.subtopologies
                for t in s.repartition_source_topics + s.state_changelog_topics}
