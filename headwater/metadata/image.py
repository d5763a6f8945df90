"""MetadataImage: the immutable view of cluster metadata that handlers read.

An image is never changed in place: applying records yields a new image, so a
request handler holding an image sees one consistent version for its whole life.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from ..security.acl import AclBinding
from .records import (
    AccessControlEntryRecord,
    ClientQuotaRecord,
    ConfigRecord,
    FeatureLevelRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UserScramCredentialRecord,
)

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
GROUP_RESOURCE = 32
CLIENT_METRICS_RESOURCE = 16  # KIP-714 subscriptions (headwater/client_metrics.py)

_EMPTY: Mapping[Any, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class PartitionImage:
    partition_id: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    partition_epoch: int = 0


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: tuple[PartitionImage, ...] = ()

    @property
    def internal(self) -> bool:
        return self.name.startswith("__")


@dataclass(frozen=True, slots=True)
class MetadataImage:
    topics_by_name: Mapping[str, TopicImage] = field(default_factory=lambda: _EMPTY)
    topics_by_id: Mapping[uuid.UUID, TopicImage] = field(default_factory=lambda: _EMPTY)
    configs: Mapping[tuple[int, str], Mapping[str, str]] = field(default_factory=lambda: _EMPTY)
    next_producer_id: int = 0
    offset: int = -1
    # Client quotas (headwater/quota/): entity -> {key: value}; see ClientQuotaRecord.
    client_quotas: Mapping[tuple[tuple[str, str | None], ...], Mapping[str, float]] = field(
        default_factory=lambda: _EMPTY)
    # SCRAM credentials: (user, mechanism id) -> UserScramCredentialRecord
    scram: Mapping[tuple[str, int], UserScramCredentialRecord] = field(
        default_factory=lambda: _EMPTY)
    # ACLs: id -> AclBinding (headwater/security/acl.py)
    acls: Mapping[str, AclBinding] = field(default_factory=lambda: _EMPTY)
    # Feature levels of FeatureLevelRecords (metadata.version first), level 0 included: a
    # feature set to 0 (disabled) differs from one never set (api_versions.py's default).
    # A snapshot must carry them.
    features: Mapping[str, int] = field(default_factory=lambda: _EMPTY)

    def topic(self, name: str) -> TopicImage | None:
        return self.topics_by_name.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicImage | None:
        return self.topics_by_id.get(topic_id)

    def resource_configs(self, resource_type: int, name: str) -> Mapping[str, str]:
        return self.configs.get((resource_type, name), _EMPTY)

    def apply(self, records: Iterable[object], offset: int) -> MetadataImage:  # noqa: C901
        """Return the image that results from applying `records` (already committed)."""
        by_name = dict(self.topics_by_name)
        by_id = dict(self.topics_by_id)
        configs = {k: dict(v) for k, v in self.configs.items()}
        next_pid = self.next_producer_id
        quotas: dict[Any, Any] | None = None
        scram: dict[Any, Any] | None = None
        acls: dict[Any, Any] | None = None
        features: dict[Any, Any] | None = None
        # Partitions of the topics these records change, materialized once at the end: a
        # topic's tuple rebuilt per PartitionRecord made a big topic quadratic to load.
        changed: dict[uuid.UUID, list[PartitionImage]] = {}
        ids: dict[str, uuid.UUID] = {}
        for rec in records:
            if isinstance(rec, TopicRecord):
                tid = uuid.UUID(rec.topic_id)
                topic = TopicImage(rec.name, tid)
                by_name[rec.name] = topic
                by_id[tid] = topic
                changed.pop(tid, None)
            elif isinstance(rec, PartitionRecord):
                tid = ids.get(rec.topic_id) or ids.setdefault(rec.topic_id,
                                                              uuid.UUID(rec.topic_id))
                parts = changed.get(tid)
                if parts is None:
                    parts = changed[tid] = list(by_id[tid].partitions)
                part = PartitionImage(rec.partition_id, rec.leader, rec.leader_epoch,
                                      tuple(rec.replicas), tuple(rec.isr), rec.partition_epoch)
                if rec.partition_id < len(parts):
                    parts[rec.partition_id] = part
                else:
                    parts.append(part)
            elif isinstance(rec, ConfigRecord):
                key = (rec.resource_type, rec.resource_name)
                entry = configs.setdefault(key, {})
                if rec.value is None:
                    entry.pop(rec.name, None)
                else:
                    entry[rec.name] = rec.value
                if not entry:
                    configs.pop(key, None)
            elif isinstance(rec, RemoveTopicRecord):
                tid = uuid.UUID(rec.topic_id)
                changed.pop(tid, None)
                removed = by_id.pop(tid, None)
                if removed is not None:
                    by_name.pop(removed.name, None)
                    configs.pop((TOPIC_RESOURCE, removed.name), None)
            elif isinstance(rec, ProducerIdsRecord):
                next_pid = max(next_pid, rec.next_producer_id)
            elif isinstance(rec, UserScramCredentialRecord):
                scram = dict(self.scram) if scram is None else scram
                scram[(rec.name, rec.mechanism)] = rec
            elif isinstance(rec, RemoveUserScramCredentialRecord):
                scram = dict(self.scram) if scram is None else scram
                scram.pop((rec.name, rec.mechanism), None)
            elif isinstance(rec, AccessControlEntryRecord):
                acls = dict(self.acls) if acls is None else acls
                acls[rec.id] = AclBinding(rec.resource_type, rec.resource_name,
                                          rec.pattern_type, rec.principal, rec.host,
                                          rec.operation, rec.permission_type)
            elif isinstance(rec, RemoveAccessControlEntryRecord):
                acls = dict(self.acls) if acls is None else acls
                acls.pop(rec.id, None)
            elif isinstance(rec, ClientQuotaRecord):
                if quotas is None:
                    quotas = {k: dict(v) for k, v in self.client_quotas.items()}
                _apply_quota(quotas, rec)
            elif isinstance(rec, FeatureLevelRecord):
                features = dict(self.features) if features is None else features
                features[rec.name] = rec.feature_level
        for tid, parts in changed.items():
            topic = replace(by_id[tid], partitions=tuple(parts))
            by_id[tid] = topic
            by_name[topic.name] = topic
        return MetadataImage(
            MappingProxyType(by_name), MappingProxyType(by_id),
            MappingProxyType({k: MappingProxyType(v) for k, v in configs.items()}),
            next_pid, offset,
            client_quotas=self.client_quotas if quotas is None else MappingProxyType(
                {k: MappingProxyType(v) for k, v in quotas.items()}),
            scram=self.scram if scram is None else MappingProxyType(scram),
            acls=self.acls if acls is None else MappingProxyType(acls),
            features=self.features if features is None else MappingProxyType(features))


def _apply_quota(quotas: dict[Any, Any], rec: ClientQuotaRecord) -> None:
    values = quotas.setdefault(rec.entity, {})
    if rec.remove:
        values.pop(rec.key, None)
        if not values:
            del quotas[rec.entity]
    else:
        values[rec.key] = rec.value
