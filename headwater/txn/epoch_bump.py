"""EndTxn under transaction version 2 (KIP-890 part 2): every commit or abort bumps the
producer epoch, and the markers carry the bumped epoch.

Why a separate decision: with the bump, "same state and same epoch" no longer means
"a retry". After a commit at epoch e the coordinator holds e + 1, so an EndTxn naming
e is the retry of the one that bumped it (answered NONE with the current id and epoch,
nothing written), while one naming e + 1 is the producer's *next* EndTxn, which from
CompleteCommit/CompleteAbort may only abort (an empty transaction: a Prepare/Complete
pair with no marker and one more bump). This is Kafka's `endTransaction` table
(TransactionCoordinator.scala):

    state            abort: retry / current     commit: retry / current
    Empty            PRODUCER_FENCED / bump      PRODUCER_FENCED / INVALID_TXN_STATE
    CompleteAbort    NONE / bump                 INVALID_TXN_STATE / INVALID_TXN_STATE
    CompleteCommit   INVALID_TXN_STATE / bump    NONE / INVALID_TXN_STATE
    Ongoing          -> PrepareAbort (bump)      -> PrepareCommit (bump)
    Prepare*         CONCURRENT_TRANSACTIONS for the same result (a retry), else
                     INVALID_TXN_STATE; only the retry's epoch (e) is valid there
                     (here also the current one, e + 1: CONCURRENT_TRANSACTIONS)

When the epoch is exhausted (>= 32766) the Prepare* record names a new producer id in
`next_producer_id`, its markers still go out under the old id at 32767, and Complete*
switches to (new id, 0); the old id is kept as `prev_producer_id` so a retry at
(old id, 32766) is recognised. Pure functions, no clock: the shard applies the result.
"""

from __future__ import annotations

from typing import NamedTuple

from kio.schema.errors import ErrorCode as E

from .metadata import MAX_EPOCH, TxnMetadata, epoch_exhausted
from .state import TxnState


class EndDecision(NamedTuple):
    """Either `prepare` (the Prepare* state to write, and whether the transaction had no
    partition, i.e. an empty abort) or an answer `error` with nothing written."""

    prepare: TxnState | None
    error: int = E.none
    no_partition_added: bool = False


def decide_end_v2(meta: TxnMetadata, producer_id: int, producer_epoch: int,
                  commit: bool) -> EndDecision:
    retry_on_overflow = (meta.prev_producer_id == producer_id
                         and producer_epoch == MAX_EPOCH - 1 and meta.producer_epoch == 0)
    retry_on_bump = meta.producer_epoch == producer_epoch + 1
    state = meta.state
    if state in (TxnState.ONGOING, TxnState.EMPTY):
        valid = producer_epoch == meta.producer_epoch
    elif state.is_prepare:
        # Kafka accepts only the retry's epoch here; the current (bumped) one is the
        # producer's *next* EndTxn, which it can only send if it heard the previous
        # one answered before its markers were written (EndTxn waits for them, at most
        # END_TXN_MARKERS_WAIT_S): CONCURRENT_TRANSACTIONS (retried) instead of fencing
        # it, since no zombie knows the bumped epoch (docs/differences.md).
        valid = retry_on_bump or producer_epoch == meta.producer_epoch
    else:
        valid = retry_on_bump or retry_on_overflow or producer_epoch == meta.producer_epoch
    if meta.producer_id != producer_id and not retry_on_overflow:
        return EndDecision(None, E.invalid_producer_id_mapping)
    if not valid:
        return EndDecision(None, E.producer_fenced)
    retry = retry_on_bump or retry_on_overflow
    if state is TxnState.ONGOING:
        return EndDecision(TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT)
    if state is TxnState.COMPLETE_COMMIT:
        if commit:
            return EndDecision(None, E.none if retry else E.invalid_txn_state)
        return (EndDecision(None, E.invalid_txn_state) if retry
                else EndDecision(TxnState.PREPARE_ABORT, no_partition_added=True))
    if state is TxnState.COMPLETE_ABORT:
        if commit:
            return EndDecision(None, E.invalid_txn_state)
        return (EndDecision(None, E.none) if retry
                else EndDecision(TxnState.PREPARE_ABORT, no_partition_added=True))
    if state.is_prepare and not retry:  # the next EndTxn, before these markers are out
        return EndDecision(None, E.concurrent_transactions)
    if state is TxnState.PREPARE_COMMIT:
        return EndDecision(None, E.concurrent_transactions if commit else E.invalid_txn_state)
    if state is TxnState.PREPARE_ABORT:
        return EndDecision(None, E.invalid_txn_state if commit else E.concurrent_transactions)
    # Empty
    if commit:
        return EndDecision(None, E.invalid_txn_state)
    return EndDecision(TxnState.PREPARE_ABORT, no_partition_added=True)


def prepared(meta: TxnMetadata, state: TxnState, next_producer_id: int, now_ms: int,
             no_partition_added: bool) -> TxnMetadata:
    """Kafka's `prepareAbortOrCommit` at transaction version 2: epoch + 1. At 32767 (only
    reachable by a client that uses the epoch a fence reserved) it stays there: Kafka
    lets such an abort through so the id can recover, and an int16 has no more."""
    epoch = min(meta.producer_epoch + 1, MAX_EPOCH)
    return meta.to(state, now_ms, producer_epoch=epoch, client_tv=2,
                   next_producer_id=next_producer_id,
                   start_ms=now_ms if no_partition_added else meta.start_ms,
                   partitions=frozenset() if no_partition_added else meta.partitions)


def needs_new_producer_id(meta: TxnMetadata) -> bool:
    return epoch_exhausted(meta.producer_epoch)


def completed_identity(meta: TxnMetadata) -> tuple[int, int]:
    """The (producer id, epoch) the client continues with once `meta` (a Prepare*
    written at transaction version 2) completes: the rotation's new id at epoch 0, or
    the bumped epoch."""
    if meta.next_producer_id >= 0:
        return meta.next_producer_id, 0
    return meta.producer_id, meta.producer_epoch
