"""Metadata record types, named after KRaft's, and their on-log encoding.

Each record is one Kafka record in the `__cluster_metadata` log: the key is the
record type name, the value a versioned JSON object. Nothing outside the broker
reads this log, so a readable encoding beats KRaft's binary one for operators and
tests; the record *types and meanings* follow KRaft's metadata records.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar


@dataclass(frozen=True, slots=True)
class TopicRecord:
    TYPE: ClassVar[str] = "TopicRecord"
    name: str
    topic_id: str


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    TYPE: ClassVar[str] = "PartitionRecord"
    topic_id: str
    partition_id: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0


@dataclass(frozen=True, slots=True)
class ConfigRecord:
    """Set (value) or remove (value None) one config of a resource.

    resource_type uses Kafka's ConfigResource ids: 2 topic, 4 broker, 32 group.
    """

    TYPE: ClassVar[str] = "ConfigRecord"
    resource_type: int
    resource_name: str
    name: str
    value: str | None


@dataclass(frozen=True, slots=True)
class RemoveTopicRecord:
    TYPE: ClassVar[str] = "RemoveTopicRecord"
    topic_id: str


@dataclass(frozen=True, slots=True)
class ProducerIdsRecord:
    """A block of producer ids handed to a broker; ids below next_producer_id are used."""

    TYPE: ClassVar[str] = "ProducerIdsRecord"
    broker_id: int
    broker_epoch: int
    next_producer_id: int


@dataclass(frozen=True, slots=True)
class BeginTransactionRecord:
    """KIP-868: records up to the matching end marker apply atomically."""

    TYPE: ClassVar[str] = "BeginTransactionRecord"
    name: str = ""


@dataclass(frozen=True, slots=True)
class EndTransactionRecord:
    TYPE: ClassVar[str] = "EndTransactionRecord"


@dataclass(frozen=True, slots=True)
class AbortTransactionRecord:
    TYPE: ClassVar[str] = "AbortTransactionRecord"
    reason: str = ""


MetadataRecord = (TopicRecord | PartitionRecord | ConfigRecord | RemoveTopicRecord
                  | ProducerIdsRecord | BeginTransactionRecord | EndTransactionRecord
                  | AbortTransactionRecord)

_TYPES: dict[str, type] = {cls.TYPE: cls for cls in (
    TopicRecord, PartitionRecord, ConfigRecord, RemoveTopicRecord, ProducerIdsRecord,
    BeginTransactionRecord, EndTransactionRecord, AbortTransactionRecord)}

VERSION = 0


def encode(record: Any) -> tuple[bytes, bytes]:
    """(key, value) bytes for one metadata record."""
    value = {"v": VERSION, "data": asdict(record)}
    return record.TYPE.encode(), json.dumps(value, separators=(",", ":")).encode()


def decode(key: bytes, value: bytes) -> Any:
    cls = _TYPES[key.decode()]
    data = json.loads(value)["data"]
    names = {f.name for f in fields(cls)}
    kwargs = {k: (tuple(v) if isinstance(v, list) else v)
              for k, v in data.items() if k in names}
    return cls(**kwargs)


def new_topic_id() -> str:
    return str(uuid.uuid4())
