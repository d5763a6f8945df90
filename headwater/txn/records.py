"""The one record type of `__transaction_state`, in Kafka's layout (TransactionLog).

Key: int16 type 0, then the transactional id. Value: Kafka's TransactionLogValue. A
cluster at `transaction.version` 1+ writes value version 1, the flexible layout (compact
strings and arrays, tagged fields), and that is what headwater writes, since it finalizes
transaction version 2: producer id, epoch, timeout, int8 state, the partitions as
[(topic, [partition])], last update and start timestamps, then the tagged fields
PreviousProducerId (0), NextProducerId (1) and ClientTransactionVersion (2), each only
when it differs from its default. Version 0 (non-flexible, no tagged fields; what
headwater wrote before transaction version 2) is still read, so an older data
directory loads. A tombstone (null value) removes an expired transactional id.

Kafka 4.4's own writer leaves PreviousProducerId/NextProducerId unset; headwater writes
them so a crash between a rotating Prepare* and its Complete* knows the new id (its
reader ignores nothing Kafka's would read).
"""

from __future__ import annotations

import struct
from typing import Any

from ..coordinator.record_codec import CodecError, CoordinatorRecord, RecordCodec, RecordType
from ..wire.header import uvarint
from .metadata import TxnMetadata
from .state import TxnState

TRANSACTION_LOG = 0
VALUE_VERSION = 1

_V0_VALUE = (("producer_id", "int64"), ("producer_epoch", "int16"),
             ("transaction_timeout_ms", "int32"), ("transaction_status", "int8"),
             ("transaction_partitions", (("topic", "string"), ("partition_ids", "[int32]"))),
             ("transaction_last_update_timestamp_ms", "int64"),
             ("transaction_start_timestamp_ms", "int64"))

_HEAD = struct.Struct(">hqhib")  # version, producer id, epoch, timeout, status
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")
_TAG_PREV, _TAG_NEXT, _TAG_CLIENT_TV = 0, 1, 2


def _read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if pos >= len(buf) or shift > 28:
            raise CodecError("bad unsigned varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def encode_value_v1(v: dict[str, Any]) -> bytes:
    out = bytearray(_HEAD.pack(VALUE_VERSION, v["producer_id"], v["producer_epoch"],
                               v["transaction_timeout_ms"], v["transaction_status"]))
    parts = v["transaction_partitions"]
    # Kafka writes null (0) for an Empty transaction, a compact array otherwise.
    out += uvarint(0 if v["transaction_status"] == int(TxnState.EMPTY) else len(parts) + 1)
    for p in parts:
        topic = p["topic"].encode()
        out += uvarint(len(topic) + 1) + topic
        out += uvarint(len(p["partition_ids"]) + 1)
        for i in p["partition_ids"]:
            out += _I32.pack(i)
        out += b"\x00"  # the struct's (empty) tagged fields
    out += _I64.pack(v["transaction_last_update_timestamp_ms"])
    out += _I64.pack(v["transaction_start_timestamp_ms"])
    tags = []
    if v.get("previous_producer_id", -1) != -1:
        tags.append((_TAG_PREV, _I64.pack(v["previous_producer_id"])))
    if v.get("next_producer_id", -1) != -1:
        tags.append((_TAG_NEXT, _I64.pack(v["next_producer_id"])))
    if v.get("client_transaction_version", 0) != 0:
        tags.append((_TAG_CLIENT_TV, _I16.pack(v["client_transaction_version"])))
    out += uvarint(len(tags))
    for tag, data in tags:
        out += uvarint(tag) + uvarint(len(data)) + data
    return bytes(out)


def decode_value_v1(buf: bytes) -> dict[str, Any]:
    try:
        _, pid, epoch, timeout, status = _HEAD.unpack_from(buf, 0)
        pos = _HEAD.size
        n, pos = _read_uvarint(buf, pos)
        parts = []
        for _ in range(max(n - 1, 0)):
            ln, pos = _read_uvarint(buf, pos)
            topic = bytes(buf[pos:pos + ln - 1]).decode()
            pos += ln - 1
            count, pos = _read_uvarint(buf, pos)
            ids = [_I32.unpack_from(buf, pos + 4 * i)[0] for i in range(count - 1)]
            pos += 4 * max(count - 1, 0)
            pos = _skip_tags(buf, pos)
            parts.append({"topic": topic, "partition_ids": ids})
        last_update, = _I64.unpack_from(buf, pos)
        start, = _I64.unpack_from(buf, pos + 8)
        pos += 16
        v = {"producer_id": pid, "producer_epoch": epoch, "transaction_timeout_ms": timeout,
             "transaction_status": status, "transaction_partitions": parts,
             "transaction_last_update_timestamp_ms": last_update,
             "transaction_start_timestamp_ms": start, "previous_producer_id": -1,
             "next_producer_id": -1, "client_transaction_version": 0}
        count, pos = _read_uvarint(buf, pos)
        for _ in range(count):
            tag, pos = _read_uvarint(buf, pos)
            size, pos = _read_uvarint(buf, pos)
            if tag == _TAG_PREV:
                v["previous_producer_id"] = _I64.unpack_from(buf, pos)[0]
            elif tag == _TAG_NEXT:
                v["next_producer_id"] = _I64.unpack_from(buf, pos)[0]
            elif tag == _TAG_CLIENT_TV:
                v["client_transaction_version"] = _I16.unpack_from(buf, pos)[0]
            pos += size
        return v
    except (struct.error, UnicodeDecodeError) as exc:
        raise CodecError(str(exc)) from None


def _skip_tags(buf: bytes, pos: int) -> int:
    count, pos = _read_uvarint(buf, pos)
    for _ in range(count):
        _, pos = _read_uvarint(buf, pos)
        size, pos = _read_uvarint(buf, pos)
        pos += size
    return pos


class TxnRecordCodec(RecordCodec):
    """The shared codec for the key; the value by its version (0 or 1)."""

    def encode(self, record: CoordinatorRecord) -> tuple[bytes, bytes | None]:
        key, _ = super().encode(record._replace(value=None))
        if record.value is None:
            return key, None
        return key, encode_value_v1(record.value)

    def decode(self, key: bytes, value: bytes | None) -> CoordinatorRecord | None:
        if value is None or len(value) < 2 or _I16.unpack_from(value, 0)[0] == 0:
            return super().decode(key, value)
        decoded = super().decode(key, None)
        if decoded is None:
            return None
        return decoded._replace(value=decode_value_v1(value))


CODEC = TxnRecordCodec([
    RecordType(TRANSACTION_LOG, "TransactionLog", (("transactional_id", "string"),),
               0, _V0_VALUE),
])


def txn_record(meta: TxnMetadata) -> CoordinatorRecord:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(meta.partitions):
        by_topic.setdefault(topic, []).append(partition)
    return CoordinatorRecord(TRANSACTION_LOG, {"transactional_id": meta.transactional_id}, {
        "producer_id": meta.producer_id, "producer_epoch": meta.producer_epoch,
        "transaction_timeout_ms": meta.timeout_ms, "transaction_status": int(meta.state),
        "transaction_partitions": [{"topic": t, "partition_ids": ps}
                                   for t, ps in by_topic.items()],
        "transaction_last_update_timestamp_ms": meta.last_update_ms,
        "transaction_start_timestamp_ms": meta.start_ms,
        "previous_producer_id": meta.prev_producer_id,
        "next_producer_id": meta.next_producer_id,
        "client_transaction_version": meta.client_tv})


def txn_tombstone(transactional_id: str) -> CoordinatorRecord:
    return CoordinatorRecord(TRANSACTION_LOG, {"transactional_id": transactional_id}, None)


def metadata_of(record: CoordinatorRecord) -> TxnMetadata:
    """The metadata a (non-tombstone) record stores."""
    v = record.value
    assert v is not None
    state = TxnState(v["transaction_status"])
    partitions = frozenset() if state is TxnState.EMPTY else frozenset(
        (p["topic"], i) for p in v["transaction_partitions"] for i in p["partition_ids"])
    return TxnMetadata(record.key["transactional_id"], v["producer_id"], v["producer_epoch"],
                       v["transaction_timeout_ms"], state, partitions,
                       v["transaction_start_timestamp_ms"],
                       v["transaction_last_update_timestamp_ms"],
                       v.get("client_transaction_version", 0),
                       v.get("previous_producer_id", -1), v.get("next_producer_id", -1))
