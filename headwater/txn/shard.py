"""One transaction-coordinator shard: the transactional ids hashed to one partition of
`__transaction_state`, rebuilt by replaying that partition.

Operations check the producer id and epoch, consult the state table (`state.py`) and
return the record of the new metadata plus the answer; `replay` is the only state
change. Nothing here writes markers: a transaction in PrepareCommit/PrepareAbort is, by
itself, the request to write them (`pending_markers`), which the coordinator service
carries out and reports back with `complete` (the MARKERS_WRITTEN event). Because that
request is derived from replayed state, a crash between Prepare* and Complete* is
finished after the restart exactly like a live transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import re2
from kio.schema.errors import ErrorCode as E

from ..coordinator.record_codec import CoordinatorRecord
from ..coordinator.runtime import Result, Timer
from .config import TxnConfig
from .epoch_bump import completed_identity, decide_end_v2, needs_new_producer_id, prepared
from .metadata import MAX_EPOCH, TxnMetadata, epoch_exhausted
from .records import metadata_of, txn_record, txn_tombstone
from .state import Event, TxnState, step

ABORT_TIMER = "abort-timed-out-transactions"
EXPIRE_TIMER = "expire-transactional-ids"

TopicPartition = tuple[str, int]


class InitResult(NamedTuple):
    error: int
    producer_id: int = -1
    producer_epoch: int = -1


class EndResult(NamedTuple):
    """EndTxn's answer: v5+ returns the id and epoch the producer continues with."""

    error: int
    producer_id: int = -1
    producer_epoch: int = -1


class MarkerJob(NamedTuple):
    """Markers owed for a transaction in Prepare*: one per partition, then `complete`.
    `transaction_version` 2 markers carry a bumped epoch, which the partitions check
    strictly (see `log.producer_state`)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]
    transaction_version: int = 0


class TxnShard:
    def __init__(self, partition: int, timer: Timer, config: TxnConfig,
                 allocate_producer_id: Callable[[], int]) -> None:
        self.partition = partition
        self.timer = timer
        self.config = config
        self.allocate_producer_id = allocate_producer_id
        self.txns: dict[str, TxnMetadata] = {}

    # ---- replay (the only state change) --------------------------------------------
    def replay(self, offset: int, producer_id: int, producer_epoch: int,
               record: CoordinatorRecord) -> None:
        txn_id = record.key["transactional_id"]
        if record.value is None:
            self.txns.pop(txn_id, None)
        else:
            self.txns[txn_id] = metadata_of(record)

    def replay_end_transaction(self, producer_id: int, producer_epoch: int,
                               commit: bool, marker_offset: int) -> None:
        """Nothing in `__transaction_state` is written transactionally."""

    def on_unloaded(self) -> None:
        """Nothing parked: EndTxn's wait for markers ends on its own timeout."""

    def on_loaded(self, now_ms: int) -> None:
        self.timer.schedule(ABORT_TIMER, self.config.abort_interval_ms, self.abort_timed_out)
        self.timer.schedule(EXPIRE_TIMER, self.config.expire_interval_ms, self.expire_ids)

    # ---- client operations ---------------------------------------------------------
    def init_producer_id(self, txn_id: str, timeout_ms: int,
                         expected: tuple[int, int] | None, now_ms: int) -> Result:
        """InitProducerId for a transactional id; `expected` is the (producer id, epoch)
        a producer that already has one sends (KIP-360), None for a new producer."""
        if not txn_id:
            return Result([], InitResult(E.invalid_request))
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return Result([], InitResult(E.invalid_transaction_timeout))
        meta = self.txns.get(txn_id)
        if meta is None:
            new = TxnMetadata(txn_id, self.allocate_producer_id(), 0, timeout_ms,
                              TxnState.EMPTY, frozenset(), -1, now_ms)
            return Result([txn_record(new)], InitResult(E.none, new.producer_id, 0))
        if expected is not None and expected[0] != meta.producer_id:
            return Result([], InitResult(E.producer_fenced))
        target = step(meta.state, Event.INIT_PRODUCER_ID)
        if target.state is None:
            return Result([], InitResult(target.error))
        if meta.state is TxnState.ONGOING:
            # Fence: abort the open transaction under a bumped epoch (never handed out);
            # the caller retries and gets the epoch after that.
            return Result([txn_record(self._fenced(meta, now_ms))], InitResult(target.error))
        if expected is not None and expected[1] != meta.producer_epoch:
            return Result([], InitResult(E.producer_fenced))
        if epoch_exhausted(meta.producer_epoch):
            pid, epoch = self.allocate_producer_id(), 0
        else:
            pid, epoch = meta.producer_id, meta.producer_epoch + 1
        new = meta.to(TxnState.EMPTY, now_ms, producer_id=pid, producer_epoch=epoch,
                      timeout_ms=timeout_ms, partitions=frozenset(), start_ms=-1)
        return Result([txn_record(new)], InitResult(E.none, pid, epoch))

    def add_partitions(self, txn_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition], now_ms: int,
                       client_tv: int = 0) -> Result:
        """AddPartitionsToTxn / AddOffsetsToTxn, and the implicit add of a transaction
        version 2 Produce / TxnOffsetCommit (`client_tv` 2, recorded as Kafka's
        `prepareAddPartitions` does); the response is one error code."""
        meta, error = self._producer(txn_id, producer_id, producer_epoch)
        if meta is None:
            return Result([], error)
        target = step(meta.state, Event.ADD_PARTITIONS)
        if target.state is None:
            return Result([], target.error)
        added = frozenset(partitions)
        if meta.state is TxnState.ONGOING:
            if added <= meta.partitions:
                return Result([], E.none)
            start = meta.start_ms
        else:
            start = now_ms
        new = meta.to(TxnState.ONGOING, now_ms, partitions=meta.partitions | added,
                      start_ms=start, client_tv=client_tv)
        return Result([txn_record(new)], E.none)

    def verify_partitions(self, txn_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Are these partitions in the producer's ongoing transaction? (AddPartitionsToTxn
        v4+ verify-only, and TxnOffsetCommit). Reads only. One that is not gets
        TRANSACTION_ABORTABLE, as Kafka 4.x's coordinator answers (the produce path turns
        it into INVALID_TXN_STATE for clients older than Produce v11)."""
        parts = list(partitions)
        meta, error = self._producer(txn_id, producer_id, producer_epoch)
        if meta is None:
            return {tp: error for tp in parts}
        if meta.state.is_prepare:
            return {tp: E.concurrent_transactions for tp in parts}
        ongoing = meta.state is TxnState.ONGOING
        return {tp: E.none if ongoing and tp in meta.partitions else E.transaction_abortable
                for tp in parts}

    def end_txn(self, txn_id: str, producer_id: int, producer_epoch: int, commit: bool,
                now_ms: int, client_tv: int = 0) -> Result:
        """EndTxn: Ongoing -> Prepare*; the markers follow (see `pending_markers`).
        `client_tv` 2 (EndTxn v5+) bumps the epoch (`epoch_bump.py`); below that the
        epoch stays and the answer names no producer. The response is an EndResult."""
        if client_tv >= 2:
            return self._end_txn_v2(txn_id, producer_id, producer_epoch, commit, now_ms)
        meta, error = self._producer(txn_id, producer_id, producer_epoch)
        if meta is None:
            return Result([], EndResult(error))
        target = step(meta.state, Event.COMMIT if commit else Event.ABORT)
        if target.state is None:
            return Result([], EndResult(target.error))
        new = meta.to(target.state, now_ms, client_tv=client_tv, next_producer_id=-1)
        return Result([txn_record(new)], EndResult(target.error))

    def _end_txn_v2(self, txn_id: str, producer_id: int, producer_epoch: int, commit: bool,
                    now_ms: int) -> Result:
        if not txn_id:
            return Result([], EndResult(E.invalid_request))
        meta = self.txns.get(txn_id)
        if meta is None:
            return Result([], EndResult(E.invalid_producer_id_mapping))
        decision = decide_end_v2(meta, producer_id, producer_epoch, commit)
        if decision.prepare is None:
            if decision.error == E.none:  # a retry of the EndTxn that bumped the epoch
                return Result([], EndResult(E.none, meta.producer_id, meta.producer_epoch))
            return Result([], EndResult(decision.error))
        next_pid = self.allocate_producer_id() if needs_new_producer_id(meta) else -1
        new = prepared(meta, decision.prepare, next_pid, now_ms, decision.no_partition_added)
        return Result([txn_record(new)], EndResult(E.none, *completed_identity(new)))

    # ---- markers -------------------------------------------------------------------
    def pending_markers(self) -> list[MarkerJob]:
        return [MarkerJob(m.transactional_id, m.producer_id, m.producer_epoch,
                          m.state is TxnState.PREPARE_COMMIT, m.partitions, m.client_tv)
                for m in self.txns.values() if m.state.is_prepare]

    def complete(self, job: MarkerJob, now_ms: int) -> Result:
        """Every marker of `job` is written: Prepare* -> Complete*. A job that no longer
        matches the metadata (already completed) writes nothing."""
        meta = self.txns.get(job.transactional_id)
        if (meta is None or not meta.state.is_prepare or meta.producer_id != job.producer_id
                or meta.producer_epoch != job.producer_epoch):
            return Result([])
        target = step(meta.state, Event.MARKERS_WRITTEN)
        assert target.state is not None
        if meta.client_tv >= 2 and meta.next_producer_id >= 0:
            # The exhausted epoch's rotation (Kafka's prepareComplete): the new id at 0.
            new = meta.to(target.state, now_ms, partitions=frozenset(),
                          producer_id=meta.next_producer_id, producer_epoch=0,
                          prev_producer_id=meta.producer_id, next_producer_id=-1)
        else:
            new = meta.to(target.state, now_ms, partitions=frozenset(), next_producer_id=-1)
        return Result([txn_record(new)])

    # ---- coordinator-initiated aborts and expiry -----------------------------------
    def abort_timed_out(self, now_ms: int) -> Result:
        """Timer: fence and abort every transaction open longer than its timeout."""
        records = [txn_record(self._fenced(m, now_ms)) for m in self.txns.values()
                   if m.state is TxnState.ONGOING and m.start_ms + m.timeout_ms < now_ms]
        self.timer.schedule(ABORT_TIMER, self.config.abort_interval_ms, self.abort_timed_out)
        return Result(records)

    def expire_ids(self, now_ms: int) -> Result:
        """Timer: tombstones for ids idle (and not in a transaction) longer than
        `transactional.id.expiration.ms`."""
        records = []
        for m in self.txns.values():
            if (m.state.expiration_allowed
                    and m.last_update_ms + self.config.id_expiration_ms <= now_ms):
                step(m.state, Event.EXPIRE)
                records.append(txn_tombstone(m.transactional_id))
        self.timer.schedule(EXPIRE_TIMER, self.config.expire_interval_ms, self.expire_ids)
        return Result(records)

    def _fenced(self, meta: TxnMetadata, now_ms: int) -> TxnMetadata:
        target = step(meta.state, Event.FENCE)
        assert target.state is not None
        # One bump whatever the client's version: at transaction version 2 Kafka 4.4
        # lets the abort's own bump (prepareAbortOrCommit) be the fence's, so the
        # markers go out at epoch + 1 as at version 0/1 (seen side by side).
        epoch = min(meta.producer_epoch + 1, MAX_EPOCH)
        return meta.to(target.state, now_ms, producer_epoch=epoch)

    def _producer(self, txn_id: str, producer_id: int, producer_epoch: int
                  ) -> tuple[TxnMetadata | None, int]:
        if not txn_id:
            return None, E.invalid_request
        meta = self.txns.get(txn_id)
        if meta is None or meta.producer_id != producer_id:
            return None, E.invalid_producer_id_mapping
        if meta.producer_epoch != producer_epoch:
            return None, E.producer_fenced
        return meta, E.none

    # ---- admin ---------------------------------------------------------------------
    def describe(self, txn_id: str) -> dict[str, Any]:
        meta = self.txns.get(txn_id)
        if meta is None:
            return {"error_code": E.transactional_id_not_found, "transactional_id": txn_id,
                    "transaction_state": "", "transaction_timeout": 0,
                    "transaction_start_time": 0, "producer_id": -1, "producer_epoch": -1,
                    "topics": ()}
        return {"error_code": E.none, "transactional_id": txn_id,
                "transaction_state": meta.state.kafka_name,
                "transaction_timeout": meta.timeout_ms,
                "transaction_start_time": meta.start_ms, "producer_id": meta.producer_id,
                "producer_epoch": meta.producer_epoch,
                "topics": [{"topic": t, "partitions": ps} for t, ps in meta.topics().items()]}

    def list_transactions(self, states: set[TxnState], producer_ids: set[int],
                          min_duration_ms: int, pattern: str | None,
                          now_ms: int) -> list[dict[str, Any]]:
        """ListTransactions filters (empty = all): states, producer ids, running longer
        than `min_duration_ms` (negative: no filter; measured from the start of the
        current or last transaction, as Kafka does), and `pattern`, a regular expression
        the whole id must match (RE2: linear time). re2.error for a bad pattern."""
        regex = re2.compile(pattern) if pattern else None
        out = []
        for meta in self.txns.values():
            if states and meta.state not in states:
                continue
            if producer_ids and meta.producer_id not in producer_ids:
                continue
            if min_duration_ms >= 0 and now_ms - meta.start_ms <= min_duration_ms:
                continue
            if regex is not None and not regex.fullmatch(meta.transactional_id):
                continue
            out.append({"transactional_id": meta.transactional_id,
                        "producer_id": meta.producer_id,
                        "transaction_state": meta.state.kafka_name})
        return out
