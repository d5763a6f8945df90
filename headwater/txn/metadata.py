"""What the coordinator knows about one transactional id (Kafka's TransactionMetadata)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from .state import TxnState

MAX_EPOCH = 32767  # Short.MaxValue


def epoch_exhausted(epoch: int) -> bool:
    """Kafka rotates to a new producer id once the epoch reaches Short.MaxValue - 1 (one
    more bump must stay possible to fence the current producer)."""
    return epoch >= MAX_EPOCH - 1


@dataclass(frozen=True, slots=True)
class TxnMetadata:
    """Immutable: a change is a new value, written as a record and then replayed.

    `partitions` are the (topic, partition) pairs of the current transaction (what the
    markers go to); `start_ms` is when it began (-1: none), `last_update_ms` when anything
    last changed (expiry counts from it).

    Transaction version 2 (KIP-890 part 2): `client_tv` is the transaction version the
    client spoke at its last transition (EndTxn v5 / Produce v12 / TxnOffsetCommit v5:
    2; older requests: 0), which decides how the epoch moves at the end and at a fence.
    `next_producer_id` is the id a Prepare* of an exhausted epoch hands over to once its
    markers are written, `prev_producer_id` the id before that rotation (so a retried
    EndTxn naming it is recognised)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]]
    start_ms: int
    last_update_ms: int
    client_tv: int = 0
    prev_producer_id: int = -1
    next_producer_id: int = -1

    def to(self, state: TxnState, now_ms: int, **changes: object) -> TxnMetadata:
        return replace(self, state=state, last_update_ms=now_ms,
                       **changes)  # type: ignore[arg-type]

    def topics(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for topic, partition in sorted(self.partitions):
            out.setdefault(topic, []).append(partition)
        return out
