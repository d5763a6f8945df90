"""TxnOffsetCommit's two steps: the transaction must hold the group's `__consumer_offsets`
partition, then the group coordinator writes the offsets under the producer's id and
epoch, pending until the transaction's marker (Kafka's
`GroupCoordinatorService.commitTransactionalOffsets` behind the `verifyTransaction` step
of its ReplicaManager).

Only a transaction that added the group (AddOffsetsToTxn) may commit, so a late or zombie
commit cannot leave a transaction open in `__consumer_offsets`. A transaction version 2
client (TxnOffsetCommit v5+) sends no AddOffsetsToTxn: the partition is added here, under
the same producer id and epoch checks.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

from kio.schema.errors import ErrorCode as E

from ..coordinator.runtime import NotReady, landed
from ..storage.errors import LogError
from .verification import RemoteVerification, Transactions

OFFSETS_TOPIC = "__consumer_offsets"
FIRST_TV2_TXN_OFFSET_COMMIT = 5  # TxnOffsetCommit v5+: adds the group implicitly
FIRST_ABORTABLE_TXN_OFFSET_COMMIT = 4  # below: INVALID_TXN_STATE instead (Kafka's map)

TopicPartition = tuple[str, int]


class Committed(Protocol):
    """One partition's offset to commit (group.offsets.PartitionCommit)."""

    @property
    def partition(self) -> int: ...


_C = TypeVar("_C", bound=Committed)


class CommittingTransactions(Transactions, Protocol):
    """The transaction coordinator: its checks, and the commits they wait for."""

    def pending_commits(self, txn_id: str) -> Awaitable[None] | None: ...


class TransactionalOffsets(Protocol[_C]):
    """The group coordinator's side: where a group's offsets live, and the write."""

    def partition_for(self, group_id: str) -> int: ...

    def pending_commits(self, group_id: str) -> Awaitable[None] | None: ...

    def commit_transactional(self, group_id: str, member_id: str, instance_id: str | None,
                             generation: int, commits: Sequence[tuple[str, list[_C]]],
                             producer_id: int, producer_epoch: int
                             ) -> Mapping[str, Mapping[int, int]]: ...


class TxnOffsetCommitter(Generic[_C]):
    """`remote`: in a cluster, the transaction's coordinator may be another broker's; it
    is then asked over the wire (AddPartitionsToTxn v5, as a partition leader verifies a
    produce)."""

    def __init__(self, transactions: CommittingTransactions, groups: TransactionalOffsets[_C],
                 remote: RemoteVerification | None = None) -> None:
        self.transactions = transactions
        self.groups = groups
        self.remote = remote

    def commit(self, txn_id: str, producer_id: int, producer_epoch: int, group_id: str,
               member_id: str, instance_id: str | None, generation: int,
               commits: Sequence[tuple[str, list[_C]]], version: int
               ) -> dict[TopicPartition, int] | Awaitable[dict[TopicPartition, int]]:
        """A code per committed partition (0: pending in the transaction), in a cluster
        once the transaction's records (the group's partition added, or what the check
        read) and then the offsets are committed: a failed commit answers
        NOT_COORDINATOR (the client finds the coordinator again and retries)."""
        tp = (OFFSETS_TOPIC, self.groups.partition_for(group_id))
        write = (group_id, member_id, instance_id, generation, commits, producer_id,
                 producer_epoch)
        if self.remote is not None and self.remote.coordinator_elsewhere(txn_id):
            return self._commit_remote(txn_id, tp, version, write)
        try:
            if version >= FIRST_TV2_TXN_OFFSET_COMMIT:
                code = self.transactions.add_partitions(txn_id, producer_id, producer_epoch,
                                                        [tp], 2)
            else:
                code = self.transactions.verify_partitions(txn_id, producer_id,
                                                           producer_epoch, [tp])[tp]
        except NotReady as exc:
            code = exc.code
        checked = None if code else self.transactions.pending_commits(txn_id)
        if checked is None:
            return self._write(code, version, *write)
        return self._write_after(checked, version, write)

    async def _write_after(self, checked: Awaitable[None], version: int,
                           write: tuple[Any, ...]) -> dict[TopicPartition, int]:
        """The offsets written once the transaction's check is committed (written
        before it, they could outlive a check the shard was rebuilt without)."""
        code = E.none if await landed([checked]) else E.not_coordinator
        written = self._write(code, version, *write)
        return written if isinstance(written, dict) else await written

    async def _commit_remote(self, txn_id: str, tp: TopicPartition, version: int,
                             write: tuple[Any, ...]) -> dict[TopicPartition, int]:
        assert self.remote is not None
        _g, _m, _i, _gen, _c, producer_id, producer_epoch = write
        codes = await self.remote.verify(txn_id, {(producer_id, producer_epoch): [tp]},
                                         add=version >= FIRST_TV2_TXN_OFFSET_COMMIT)
        code = codes.get(tp, E.unknown_server_error)
        if code == E.network_exception:  # the coordinator not reached: the client retries
            code = E.coordinator_not_available
        written = self._write(code, version, *write)
        return written if isinstance(written, dict) else await written

    def _write(self, code: int, version: int, group_id: str, member_id: str,
               instance_id: str | None, generation: int,
               commits: Sequence[tuple[str, list[_C]]], producer_id: int,
               producer_epoch: int
               ) -> dict[TopicPartition, int] | Awaitable[dict[TopicPartition, int]]:
        """Write the offsets once the transaction holds the group's partition (`code`
        0), answered once they are committed; else `code` for every partition."""
        def every(code: int) -> dict[TopicPartition, int]:
            if code == E.producer_fenced:
                code = E.invalid_producer_epoch  # what every client reads as "fenced"
            return {(topic, p.partition): code for topic, parts in commits for p in parts}

        if code == E.transaction_abortable and version < FIRST_ABORTABLE_TXN_OFFSET_COMMIT:
            code = E.invalid_txn_state
        if code:
            return every(code)
        try:
            response = self.groups.commit_transactional(
                group_id, member_id, instance_id, generation, commits, producer_id,
                producer_epoch)
        except (NotReady, LogError) as exc:
            return every(exc.code)
        codes = {(topic, p): c for topic, parts in response.items() for p, c in parts.items()}
        pending = self.groups.pending_commits(group_id)
        return codes if pending is None else _once_landed(codes, pending)


async def _once_landed(codes: dict[TopicPartition, int], pending: Awaitable[None]
                       ) -> dict[TopicPartition, int]:
    """`codes` once the offsets are committed; NOT_COORDINATOR for each written one if
    their commit failed."""
    if await landed([pending]):
        return codes
    return {tp: code or E.not_coordinator for tp, code in codes.items()}
