"""Metadata record types, named after KRaft's, and their on-log encoding.

Each record is one Kafka record in the `__cluster_metadata` log laid out as KRaft lays
it out (no key; the value framed and encoded as Kafka's MetadataRecordSerde does, see
`kraft.py`), so Kafka's `kafka-dump-log --cluster-metadata-decoder` and
`kafka-metadata-shell` read it. Logs written before that (key = the type name, value
= versioned JSON) are still read, and converted in place on start
(`convert.py`). A record type without a KRaft codec yet is written the JSON way.
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


@dataclass(frozen=True, slots=True)
class ClientQuotaRecord:
    """Set (or with `remove`, delete) one quota of an entity: `entity` is its (type,
    name) pairs sorted by type, a None name meaning the type's default (Kafka's
    `<default>`); types are user, client-id and ip (`headwater/quota/`)."""

    TYPE: ClassVar[str] = "ClientQuotaRecord"
    entity: tuple[tuple[str, str | None], ...]
    key: str
    value: float = 0.0
    remove: bool = False


@dataclass(frozen=True, slots=True)
class UserScramCredentialRecord:
    """A user's SCRAM credential for one mechanism (1 SHA-256, 2 SHA-512): what the
    server checks proofs with, never the password (headwater/security/scram.py)."""

    TYPE: ClassVar[str] = "UserScramCredentialRecord"
    name: str
    mechanism: int
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


@dataclass(frozen=True, slots=True)
class RemoveUserScramCredentialRecord:
    TYPE: ClassVar[str] = "RemoveUserScramCredentialRecord"
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class AccessControlEntryRecord:
    """One ACL binding (headwater/security/acl.py), under a random id that its removal
    names, as Kafka's AclControlManager writes it."""

    TYPE: ClassVar[str] = "AccessControlEntryRecord"
    id: str
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True)
class RemoveAccessControlEntryRecord:
    TYPE: ClassVar[str] = "RemoveAccessControlEntryRecord"
    id: str


@dataclass(frozen=True, slots=True)
class FeatureLevelRecord:
    """A finalized feature level (Kafka starts every metadata log with metadata.version)."""

    TYPE: ClassVar[str] = "FeatureLevelRecord"
    name: str
    feature_level: int


MetadataRecord = (TopicRecord | PartitionRecord | ConfigRecord | RemoveTopicRecord
                  | ProducerIdsRecord | BeginTransactionRecord | EndTransactionRecord
                  | AbortTransactionRecord | FeatureLevelRecord | ClientQuotaRecord
                  | UserScramCredentialRecord | RemoveUserScramCredentialRecord
                  | AccessControlEntryRecord | RemoveAccessControlEntryRecord)

_TYPES: dict[str, type] = {cls.TYPE: cls for cls in (
    TopicRecord, PartitionRecord, ConfigRecord, RemoveTopicRecord, ProducerIdsRecord,
    BeginTransactionRecord, EndTransactionRecord, AbortTransactionRecord, FeatureLevelRecord,
    ClientQuotaRecord, UserScramCredentialRecord, RemoveUserScramCredentialRecord,
    AccessControlEntryRecord, RemoveAccessControlEntryRecord)}

VERSION = 0
# metadata.version 29 (4.2-IV1): the level headwater finalizes (api/api_versions.py) and
# writes first in a new metadata log, as Kafka's bootstrap does; Kafka's metadata loader
# (kafka-metadata-shell) refuses a log that does not say it. The newest level whose gates
# headwater has (Kafka 4.4's MetadataVersion): Fetch v18 (4.1-IV1) and ListOffsets v11
# (4.2-IV1) served; no metadata change after 4.0-IV1, so the records are the same as at
# 4.0-IV3 (25, what a log written before says). 4.3-IV0 gates cordoned log dirs, 4.4-IV1
# CIDR ACL hosts, 4.4-IV2 controller unregistration: not here.
METADATA_VERSION = 29


def encode_json(record: Any) -> bytes:
    value = {"v": VERSION, "data": asdict(record)}
    return json.dumps(value, separators=(",", ":")).encode()


def new_topic_id() -> str:
    return str(uuid.uuid4())


def decode_json(key: bytes, value: bytes) -> Any:
    """A record of the JSON layout: its key names the type."""
    cls = _TYPES[key.decode()]
    data = json.loads(value)["data"]
    names = {f.name for f in fields(cls)}
    kwargs = {k: (tuple(v) if isinstance(v, list) else v)
              for k, v in data.items() if k in names}
    return cls(**kwargs)
