"""KRaft's on-disk layout of metadata records, so Kafka's own tools read our log.

A record in `__cluster_metadata` has no key; its value is what Kafka's
`MetadataRecordSerde` writes: an unsigned varint frame version (1), the record's api
key and version (unsigned varints), then the record in its schema's flexible encoding
(compact strings and arrays, tagged fields). The schemas are Kafka 4.3.1's
(`metadata/src/main/resources/common/metadata/*.json`); each codec below names the
fields it writes, in the schema's order. `kafka-dump-log --cluster-metadata-decoder`
and `kafka-metadata-shell` are the judges (tests/integration/test_metadata_layout.py).

Kafka's records carry fields headwater has no use for (a partition's removing/adding
replicas, directories, ELR); they are written with their defaults and skipped on read.
"""

from __future__ import annotations

import builtins
import struct
import uuid
from collections.abc import Callable
from typing import Any

from ..wire.header import read_uvarint, uvarint
from . import records as R

FRAME_VERSION = 1

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")


class KraftDecodeError(ValueError):
    """A value that is not a metadata record headwater can read."""


# ---- writing --------------------------------------------------------------------------

def _string(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    data = value.encode()
    return uvarint(len(data) + 1) + data


def _int32s(values: tuple[int, ...] | list[int] | None) -> bytes:
    if values is None:
        return b"\x00"
    return uvarint(len(values) + 1) + b"".join(_I32.pack(v) for v in values)


def _uuid(value: str) -> bytes:
    return uuid.UUID(value).bytes


def _tags(fields: dict[int, bytes] | None = None) -> bytes:
    if not fields:
        return b"\x00"
    out = bytearray(uvarint(len(fields)))
    for tag in sorted(fields):
        out += uvarint(tag) + uvarint(len(fields[tag])) + fields[tag]
    return bytes(out)


# ---- reading --------------------------------------------------------------------------

class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes, pos: int) -> None:
        self.buf = buf
        self.pos = pos

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise KraftDecodeError("truncated metadata record")
        data = self.buf[self.pos:end]
        self.pos = end
        return data

    def uvarint(self) -> int:
        try:
            value, self.pos = read_uvarint(self.buf, self.pos)
        except Exception as exc:
            raise KraftDecodeError(f"bad varint: {exc}") from None
        return value

    def int8(self) -> int:
        value: int = _I8.unpack(self._take(1))[0]
        return value

    def int16(self) -> int:
        value: int = _I16.unpack(self._take(2))[0]
        return value

    def int32(self) -> int:
        value: int = _I32.unpack(self._take(4))[0]
        return value

    def int64(self) -> int:
        value: int = _I64.unpack(self._take(8))[0]
        return value

    def float64(self) -> float:
        value: float = _F64.unpack(self._take(8))[0]
        return value

    def uuid(self) -> str:
        return str(uuid.UUID(bytes=self._take(16)))

    def string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self._take(n - 1).decode()

    def bytes(self) -> bytes:
        n = self.uvarint()
        return b"" if n == 0 else self._take(n - 1)

    def int32s(self) -> tuple[int, ...] | None:
        n = self.uvarint()
        if n == 0:
            return None
        data = self._take(4 * (n - 1))
        return struct.unpack(f">{n - 1}i", data)

    def uuids(self) -> None:
        n = self.uvarint()
        if n > 0:
            self._take(16 * (n - 1))

    def tags(self) -> dict[int, builtins.bytes]:  # `bytes` here is the method above
        found: dict[int, builtins.bytes] = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            found[tag] = self._take(self.uvarint())
        return found


def _tag_string(tags: dict[int, bytes], tag: int) -> str:
    """A tagged nullable string (Kafka's default null reads as "")."""
    data = tags.get(tag)
    return (_Reader(data, 0).string() or "") if data else ""


# ---- the records ----------------------------------------------------------------------
# api key -> (record class, encoder of the body at version 0, decoder of (reader, version))

def _enc_topic(r: R.TopicRecord) -> bytes:
    return _string(r.name) + _uuid(r.topic_id) + _tags()


def _dec_topic(rd: _Reader, _v: int) -> R.TopicRecord:
    name, topic_id = rd.string() or "", rd.uuid()
    rd.tags()
    return R.TopicRecord(name, topic_id)


def _enc_partition(r: R.PartitionRecord) -> bytes:
    # PartitionId, TopicId, Replicas, Isr, RemovingReplicas, AddingReplicas, Leader,
    # LeaderEpoch, PartitionEpoch; LeaderRecoveryState (tag 0) left at its default.
    return (_I32.pack(r.partition_id) + _uuid(r.topic_id) + _int32s(r.replicas)
            + _int32s(r.isr) + _int32s(()) + _int32s(()) + _I32.pack(r.leader)
            + _I32.pack(r.leader_epoch) + _I32.pack(r.partition_epoch) + _tags())


def _dec_partition(rd: _Reader, v: int) -> R.PartitionRecord:
    partition_id, topic_id = rd.int32(), rd.uuid()
    replicas, isr = rd.int32s() or (), rd.int32s() or ()
    rd.int32s()
    rd.int32s()
    leader, leader_epoch, partition_epoch = rd.int32(), rd.int32(), rd.int32()
    if v >= 1:
        rd.uuids()  # Directories (KIP-858)
    rd.tags()
    return R.PartitionRecord(topic_id, partition_id, tuple(replicas), tuple(isr), leader,
                             leader_epoch, partition_epoch)


def _enc_config(r: R.ConfigRecord) -> bytes:
    return (_I8.pack(r.resource_type) + _string(r.resource_name) + _string(r.name)
            + _string(r.value) + _tags())


def _dec_config(rd: _Reader, _v: int) -> R.ConfigRecord:
    rtype, rname, name, value = rd.int8(), rd.string() or "", rd.string() or "", rd.string()
    rd.tags()
    return R.ConfigRecord(rtype, rname, name, value)


def _enc_remove_topic(r: R.RemoveTopicRecord) -> bytes:
    return _uuid(r.topic_id) + _tags()


def _dec_remove_topic(rd: _Reader, _v: int) -> R.RemoveTopicRecord:
    topic_id = rd.uuid()
    rd.tags()
    return R.RemoveTopicRecord(topic_id)


def _enc_producer_ids(r: R.ProducerIdsRecord) -> bytes:
    return (_I32.pack(r.broker_id) + _I64.pack(r.broker_epoch)
            + _I64.pack(r.next_producer_id) + _tags())


def _dec_producer_ids(rd: _Reader, _v: int) -> R.ProducerIdsRecord:
    broker_id, epoch, next_id = rd.int32(), rd.int64(), rd.int64()
    rd.tags()
    return R.ProducerIdsRecord(broker_id, epoch, next_id)


def _enc_feature(r: R.FeatureLevelRecord) -> bytes:
    return _string(r.name) + _I16.pack(r.feature_level) + _tags()


def _dec_feature(rd: _Reader, _v: int) -> R.FeatureLevelRecord:
    name, level = rd.string() or "", rd.int16()
    rd.tags()
    return R.FeatureLevelRecord(name, level)


def _enc_quota(r: R.ClientQuotaRecord) -> bytes:
    # Entity ([]EntityData: EntityType, EntityName nullable), Key, Value (float64), Remove
    entity = uvarint(len(r.entity) + 1) + b"".join(
        _string(kind) + _string(name) + _tags() for kind, name in r.entity)
    return (entity + _string(r.key) + _F64.pack(r.value) + (b"\x01" if r.remove else b"\x00")
            + _tags())


def _dec_quota(rd: _Reader, _v: int) -> R.ClientQuotaRecord:
    entity = []
    for _ in range(max(rd.uvarint() - 1, 0)):
        kind, name = rd.string() or "", rd.string()
        rd.tags()
        entity.append((kind, name))
    key, value, remove = rd.string() or "", rd.float64(), rd.int8() != 0
    rd.tags()
    return R.ClientQuotaRecord(tuple(sorted(entity, key=lambda e: e[0])), key, value, remove)


def _bytes(value: bytes) -> bytes:
    return uvarint(len(value) + 1) + value


def _enc_scram(r: R.UserScramCredentialRecord) -> bytes:
    return (_string(r.name) + _I8.pack(r.mechanism) + _bytes(r.salt) + _bytes(r.stored_key)
            + _bytes(r.server_key) + _I32.pack(r.iterations) + _tags())


def _dec_scram(rd: _Reader, _v: int) -> R.UserScramCredentialRecord:
    name, mechanism = rd.string() or "", rd.int8()
    salt, stored, server, iterations = rd.bytes(), rd.bytes(), rd.bytes(), rd.int32()
    rd.tags()
    return R.UserScramCredentialRecord(name, mechanism, salt, stored, server, iterations)


def _enc_remove_scram(r: R.RemoveUserScramCredentialRecord) -> bytes:
    return _string(r.name) + _I8.pack(r.mechanism) + _tags()


def _dec_remove_scram(rd: _Reader, _v: int) -> R.RemoveUserScramCredentialRecord:
    name, mechanism = rd.string() or "", rd.int8()
    rd.tags()
    return R.RemoveUserScramCredentialRecord(name, mechanism)


def _enc_acl(r: R.AccessControlEntryRecord) -> bytes:
    return (_uuid(r.id) + _I8.pack(r.resource_type) + _string(r.resource_name)
            + _I8.pack(r.pattern_type) + _string(r.principal) + _string(r.host)
            + _I8.pack(r.operation) + _I8.pack(r.permission_type) + _tags())


def _dec_acl(rd: _Reader, _v: int) -> R.AccessControlEntryRecord:
    acl_id, rtype, name, pattern = rd.uuid(), rd.int8(), rd.string() or "", rd.int8()
    principal, host, op, perm = rd.string() or "", rd.string() or "", rd.int8(), rd.int8()
    rd.tags()
    return R.AccessControlEntryRecord(acl_id, rtype, name, pattern, principal, host, op, perm)


def _enc_remove_acl(r: R.RemoveAccessControlEntryRecord) -> bytes:
    return _uuid(r.id) + _tags()


def _dec_remove_acl(rd: _Reader, _v: int) -> R.RemoveAccessControlEntryRecord:
    acl_id = rd.uuid()
    rd.tags()
    return R.RemoveAccessControlEntryRecord(acl_id)


def _enc_begin(r: R.BeginTransactionRecord) -> bytes:
    return _tags({0: _string(r.name)} if r.name else None)  # Name: tag 0, default null


def _dec_begin(rd: _Reader, _v: int) -> R.BeginTransactionRecord:
    return R.BeginTransactionRecord(_tag_string(rd.tags(), 0))


def _enc_end(_r: R.EndTransactionRecord) -> bytes:
    return _tags()


def _dec_end(rd: _Reader, _v: int) -> R.EndTransactionRecord:
    rd.tags()
    return R.EndTransactionRecord()


def _enc_abort(r: R.AbortTransactionRecord) -> bytes:
    return _tags({0: _string(r.reason)} if r.reason else None)  # Reason: tag 0


def _dec_abort(rd: _Reader, _v: int) -> R.AbortTransactionRecord:
    return R.AbortTransactionRecord(_tag_string(rd.tags(), 0))


_CODECS: dict[int, tuple[type, Callable[[Any], bytes], Callable[[_Reader, int], Any]]] = {
    2: (R.TopicRecord, _enc_topic, _dec_topic),
    3: (R.PartitionRecord, _enc_partition, _dec_partition),
    4: (R.ConfigRecord, _enc_config, _dec_config),
    9: (R.RemoveTopicRecord, _enc_remove_topic, _dec_remove_topic),
    11: (R.UserScramCredentialRecord, _enc_scram, _dec_scram),
    12: (R.FeatureLevelRecord, _enc_feature, _dec_feature),
    14: (R.ClientQuotaRecord, _enc_quota, _dec_quota),
    15: (R.ProducerIdsRecord, _enc_producer_ids, _dec_producer_ids),
    18: (R.AccessControlEntryRecord, _enc_acl, _dec_acl),
    19: (R.RemoveAccessControlEntryRecord, _enc_remove_acl, _dec_remove_acl),
    22: (R.RemoveUserScramCredentialRecord, _enc_remove_scram, _dec_remove_scram),
    23: (R.BeginTransactionRecord, _enc_begin, _dec_begin),
    24: (R.EndTransactionRecord, _enc_end, _dec_end),
    25: (R.AbortTransactionRecord, _enc_abort, _dec_abort),
}
_BY_CLASS = {cls: (key, enc) for key, (cls, enc, _dec) in _CODECS.items()}
# The highest version of each record type we read (the schemas' validVersions).
_MAX_VERSION = {3: 2}


def has_codec(record: Any) -> bool:
    return type(record) in _BY_CLASS


def encode(record: Any) -> bytes:
    """The record value Kafka's MetadataRecordSerde writes (version 0 of every type)."""
    api_key, enc = _BY_CLASS[type(record)]
    return uvarint(FRAME_VERSION) + uvarint(api_key) + uvarint(0) + enc(record)


def decode(value: bytes) -> Any:
    rd = _Reader(bytes(value), 0)
    frame = rd.uvarint()
    if frame != FRAME_VERSION:
        raise KraftDecodeError(f"unknown metadata record frame version {frame}")
    api_key, version = rd.uvarint(), rd.uvarint()
    codec = _CODECS.get(api_key)
    if codec is None:
        raise KraftDecodeError(f"metadata record type {api_key} is not one headwater reads")
    if version > _MAX_VERSION.get(api_key, 0):
        raise KraftDecodeError(f"metadata record type {api_key} version {version} is newer "
                               "than headwater reads")
    record = codec[2](rd, version)
    if rd.pos != len(rd.buf):
        raise KraftDecodeError(f"{len(rd.buf) - rd.pos} bytes left after a {codec[0].__name__}")
    return record
