"""Produce's transaction verification (KIP-890): may a transactional record set be
written to a partition?

Part 1: the first transactional batch of a producer on a partition, while no transaction
of that producer is open there, is only written if the transaction coordinator confirms
the partition belongs to the producer's ongoing transaction. Otherwise a late or retried
batch arriving after its transaction ended would open a transaction nothing ever closes
(a "hanging" transaction that pins the last stable offset). Not in the transaction:
TRANSACTION_ABORTABLE (Produce v11+; before, INVALID_TXN_STATE); a fenced epoch:
INVALID_PRODUCER_EPOCH; coordinator busy or loading: NOT_ENOUGH_REPLICAS, which clients
retry without a metadata refresh (Kafka's mapping for them). Kafka's broker config
`transaction.partition.verification.enable` (default true) turns it off.

Part 2 (transaction version 2): a Produce v12+ client sends no AddPartitionsToTxn; the
same check *adds* the partition to its transaction instead of only verifying it (Kafka's
AddPartitionsToTxnManager with ADD_PARTITION, in-process here), one coordinator call per
producer and epoch of a request. Errors follow Kafka's ReplicaManager:
CONCURRENT_TRANSACTIONS (the previous transaction's markers are still being written)
stays as is for such a client, which retries it; a partition outside the transaction is
TRANSACTION_ABORTABLE from Produce v11 on and INVALID_TXN_STATE before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from kio.schema.errors import ErrorCode as E

from ..coordinator.runtime import NotReady
from ..records.batch import has_transactional_batch, parse_header
from ..storage.partition import Partition

FIRST_ABORTABLE_PRODUCE = 11  # older clients get INVALID_TXN_STATE for TRANSACTION_ABORTABLE
FIRST_TV2_PRODUCE = 12  # the client speaks transaction version 2: add, not just verify
_RETRY_AS_NOT_ENOUGH_REPLICAS = {
    E.coordinator_load_in_progress, E.coordinator_not_available, E.not_coordinator,
    E.network_exception}

TopicPartition = tuple[str, int]


class Transactions(Protocol):
    """The transaction coordinator's checks of a transaction's partitions."""

    def add_partitions(self, txn_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition], client_tv: int = 0) -> int: ...

    def verify_partitions(self, txn_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]
                          ) -> dict[TopicPartition, int]: ...


class RemoteVerification(Protocol):
    """In a cluster, the transaction coordinator may be another broker's."""

    def coordinator_elsewhere(self, transactional_id: str) -> bool: ...

    async def verify(self, transactional_id: str,
                     by_producer: Mapping[tuple[int, int], list[TopicPartition]],
                     add: bool) -> dict[TopicPartition, int]:
        """Per partition, the coordinator's answer: is it in (or, with `add`, was it
        added to) the producer's ongoing transaction."""
        ...


class ProduceVerification:
    def __init__(self, transactions: Transactions | None, enabled: bool,
                 remote: RemoteVerification | None = None) -> None:
        self.transactions = transactions
        self.enabled = enabled
        self.remote = remote

    def add_implicitly(self, txn_id: str,
                       by_producer: Mapping[tuple[int, int], list[TopicPartition]]
                       ) -> dict[TopicPartition, int]:
        """Transaction version 2: add each producer's partitions (those it writes
        transactionally with no transaction open there) to its transaction, one call
        per producer and epoch; partition -> the add's error code."""
        codes: dict[TopicPartition, int] = {}
        for (pid, epoch), tps in by_producer.items():
            try:
                code = (self.transactions.add_partitions(txn_id, pid, epoch, tps, 2)
                        if self.transactions is not None else E.coordinator_not_available)
            except NotReady as exc:
                code = exc.code
            codes.update(dict.fromkeys(tps, code))
        return codes

    def refusal(self, txn_id: str | None, topic: str, part: Partition,
                records: bytes | bytearray | memoryview, version: int,
                added: Mapping[TopicPartition, int]) -> tuple[int, str] | None:
        """Why a record set may not be written (code, message); None when it may. At
        Produce v12+ the partition is added to the transaction (`added`: what
        `add_implicitly` did for the request); `added` also holds what a remote
        coordinator answered (`remote`), at any version."""
        if not self.enabled or txn_id is None or not has_transactional_batch(records):
            return None
        h = parse_header(records)
        if part.in_transaction(h.producer_id, h.producer_epoch):
            return None
        if self.transactions is None:
            return E.not_enough_replicas, "the transaction coordinator is not available"
        tp = (topic, part.partition)
        tv2 = version >= FIRST_TV2_PRODUCE
        try:
            if tp in added:
                code = added[tp]
            elif tv2:
                code = self.transactions.add_partitions(txn_id, h.producer_id,
                                                        h.producer_epoch, [tp], 2)
            else:
                code = self.transactions.verify_partitions(txn_id, h.producer_id,
                                                           h.producer_epoch, [tp])[tp]
        except NotReady as exc:
            code = exc.code
        if code == E.none:
            if tv2 and h.base_sequence != 0 and not part.knows_producer(h.producer_id):
                # Kafka's check for a TV2 producer's first write to a partition that
                # has no state for it: its sequences start at 0 (a gap is a lost batch).
                return E.out_of_order_sequence_number, (
                    f"Invalid sequence number for producer {h.producer_id} in "
                    f"{topic}-{part.partition}: {h.base_sequence} (incoming seq. number). "
                    "Expected sequence 0 for transactions v2 idempotent producer with no "
                    "existing state.")
            return None
        if code in _RETRY_AS_NOT_ENOUGH_REPLICAS or (
                code == E.concurrent_transactions and not tv2):
            return E.not_enough_replicas, ("Unable to verify the partition has been added "
                                           f"to the transaction. Underlying error: "
                                           f"{E(code).name}")
        if code == E.transaction_abortable and version < FIRST_ABORTABLE_PRODUCE:
            code = E.invalid_txn_state
        if code in (E.producer_fenced, E.invalid_producer_epoch):
            return E.invalid_producer_epoch, (f"producer {h.producer_id} epoch "
                                              f"{h.producer_epoch} is fenced")
        return code, (f"{topic}-{part.partition} is not in the ongoing transaction of "
                      f"{txn_id!r}")
