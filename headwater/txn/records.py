"""The one record type of `__transaction_state`, in Kafka's layout (TransactionLog).

Key: int16 type 0, then the transactional id. Value: version 0 (the non-flexible layout
Kafka writes for transaction version 0/1): producer id, epoch, timeout, int8 state, the
partitions as [(topic, [partition])], last update and start timestamps. A tombstone
(null value) removes an expired transactional id.
"""

from __future__ import annotations

from ..coordinator.record_codec import CoordinatorRecord, RecordCodec, RecordType
from .metadata import TxnMetadata
from .state import TxnState

TRANSACTION_LOG = 0

CODEC = RecordCodec([
    RecordType(TRANSACTION_LOG, "TransactionLog", (("transactional_id", "string"),),
               0, (("producer_id", "int64"), ("producer_epoch", "int16"),
                   ("transaction_timeout_ms", "int32"), ("transaction_status", "int8"),
                   ("transaction_partitions", (("topic", "string"),
                                               ("partition_ids", "[int32]"))),
                   ("transaction_last_update_timestamp_ms", "int64"),
                   ("transaction_start_timestamp_ms", "int64"))),
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
        "transaction_start_timestamp_ms": meta.start_ms})


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
                       v["transaction_last_update_timestamp_ms"])
