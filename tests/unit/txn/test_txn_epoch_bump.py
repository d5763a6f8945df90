"""Transaction version 2 (KIP-890 part 2) in the coordinator shard, sans-IO with a fake
clock: the epoch bump at every EndTxn v5, its retries, the empty abort, the rotation to
a new producer id when the epoch is exhausted, fencing, and the TransactionLogValue v1
records that carry it (every record here went through the codec and back)."""

from __future__ import annotations

import dataclasses

from headwater.coordinator.record_codec import RecordCodec, RecordType
from headwater.coordinator.runtime import Result
from headwater.txn.records import _V0_VALUE, CODEC, TRANSACTION_LOG, txn_record
from headwater.txn.state import TxnState
from tests.unit.txn.context import TxnContext

S = TxnState
INVALID_TXN_STATE = 48
CONCURRENT_TRANSACTIONS = 51
PRODUCER_FENCED = 90
INVALID_PRODUCER_ID_MAPPING = 49
T0, T1 = ("t", 0), ("t", 1)


def started(partitions: tuple = (T0,)) -> tuple[TxnContext, int]:
    ctx = TxnContext()
    _, pid, epoch = ctx.init()
    assert epoch == 0
    assert ctx.add_v2(pid, 0, *partitions) == 0
    return ctx, pid


def test_commit_bumps_the_epoch_and_the_markers_carry_it():
    ctx, pid = started((T0, T1))
    assert ctx.meta().client_tv == 2  # the implicit add recorded the client's version
    assert ctx.end_v2(pid, 0, commit=True) == (0, pid, 1)
    assert ctx.state() is S.PREPARE_COMMIT and ctx.meta().producer_epoch == 1
    (job,) = ctx.markers()
    assert (job.producer_id, job.producer_epoch, job.commit, job.transaction_version) == \
        (pid, 1, True, 2)
    assert job.partitions == {T0, T1}
    assert ctx.state() is S.COMPLETE_COMMIT and ctx.meta().producer_epoch == 1
    # The next transaction runs at the bumped epoch; the old one is fenced.
    assert ctx.add_v2(pid, 0, T0) == PRODUCER_FENCED
    assert ctx.add_v2(pid, 1, T0) == 0
    assert ctx.end_v2(pid, 1, commit=False) == (0, pid, 2)
    assert ctx.markers()[0].producer_epoch == 2


def test_retries_are_recognised_by_the_epoch_before_the_bump():
    ctx, pid = started()
    assert ctx.end_v2(pid, 0, commit=True) == (0, pid, 1)
    # While the markers are being written only the retry's epoch is valid.
    assert ctx.end_v2(pid, 0, commit=True) == (CONCURRENT_TRANSACTIONS, -1, -1)
    assert ctx.end_v2(pid, 0, commit=False) == (INVALID_TXN_STATE, -1, -1)
    # The producer's next EndTxn at the bumped epoch, should it come before the
    # markers are out: retried (Kafka fences it; franz-go met that on three brokers).
    assert ctx.end_v2(pid, 1, commit=True) == (CONCURRENT_TRANSACTIONS, -1, -1)
    assert ctx.end_v2(pid, 1, commit=False) == (CONCURRENT_TRANSACTIONS, -1, -1)
    assert ctx.end_v2(pid, 2, commit=False) == (PRODUCER_FENCED, -1, -1)
    ctx.markers()
    written = len(ctx.log)
    # Completed: a retry answers NONE with the identity to continue with, writes nothing.
    assert ctx.end_v2(pid, 0, commit=True) == (0, pid, 1)
    assert ctx.end_v2(pid, 0, commit=False) == (INVALID_TXN_STATE, -1, -1)
    assert len(ctx.log) == written
    # The current epoch's commit with no transaction is not a retry.
    assert ctx.end_v2(pid, 1, commit=True) == (INVALID_TXN_STATE, -1, -1)
    assert ctx.end_v2(pid + 1, 1, commit=True) == (INVALID_PRODUCER_ID_MAPPING, -1, -1)
    assert ctx.end_v2(pid, 5, commit=True) == (PRODUCER_FENCED, -1, -1)


def test_empty_abort_bumps_without_markers():
    ctx = TxnContext()
    _, pid, _ = ctx.init()
    assert ctx.end_v2(pid, 0, commit=True) == (INVALID_TXN_STATE, -1, -1)  # Empty
    ctx.now += 10
    assert ctx.end_v2(pid, 0, commit=False) == (0, pid, 1)
    assert ctx.meta().start_ms == ctx.now  # no partition was added: starts now
    (job,) = ctx.markers()
    assert job.partitions == frozenset() and job.producer_epoch == 1
    assert ctx.state() is S.COMPLETE_ABORT
    assert ctx.states_written() == ["CompleteAbort"]
    assert ctx.end_v2(pid, 0, commit=False) == (0, pid, 1)  # retry
    assert ctx.end_v2(pid, 1, commit=False) == (0, pid, 2)  # another empty abort


def test_exhausted_epoch_rotates_to_a_new_producer_id():
    ctx, pid = started()
    meta = dataclasses.replace(ctx.meta(), producer_epoch=32766)
    ctx.write(lambda s, now: Result([txn_record(meta)], None))
    assert ctx.end_v2(pid, 32766, commit=True) == (0, 1001, 0)
    prepared = ctx.meta()
    assert (prepared.producer_id, prepared.producer_epoch, prepared.next_producer_id) == \
        (pid, 32767, 1001)
    (job,) = ctx.markers()  # the markers close the old id's transaction at 32767
    assert (job.producer_id, job.producer_epoch) == (pid, 32767)
    done = ctx.meta()
    assert (done.producer_id, done.producer_epoch, done.prev_producer_id,
            done.next_producer_id) == (1001, 0, pid, -1)
    # A retry naming the old id at its last epoch is recognised (retryOnOverflow).
    assert ctx.end_v2(pid, 32766, commit=True) == (0, 1001, 0)
    assert ctx.add_v2(1001, 0, T0) == 0
    assert ctx.end_v2(1001, 0, commit=True) == (0, 1001, 1)


def test_a_crash_between_a_rotating_prepare_and_complete_keeps_the_new_id():
    ctx, pid = started()
    meta = dataclasses.replace(ctx.meta(), producer_epoch=32766)
    ctx.write(lambda s, now: Result([txn_record(meta)], None))
    ctx.end_v2(pid, 32766, commit=True)
    restarted = ctx.replayed()  # the Prepare* record carries NextProducerId
    (job,) = restarted.pending_markers()
    assert (job.producer_id, job.producer_epoch, job.transaction_version) == (pid, 32767, 2)
    assert restarted.txns["tx"].next_producer_id == 1001


def test_fence_of_a_tv2_transaction_and_the_zombie():
    ctx, pid = started()
    ctx.now += 6000  # past the 5 s timeout
    ctx.advance(1000)
    assert ctx.state() is S.PREPARE_ABORT and ctx.meta().producer_epoch == 1
    (job,) = ctx.markers()
    assert (job.producer_epoch, job.commit, job.transaction_version) == (1, False, 2)
    # The zombie at epoch 0: its commit reads as a retry of a commit that became an
    # abort (INVALID_TXN_STATE, Kafka's table), and its next add is fenced.
    assert ctx.end_v2(pid, 0, commit=True) == (INVALID_TXN_STATE, -1, -1)
    assert ctx.add_v2(pid, 0, T0) == PRODUCER_FENCED
    assert ctx.init() == (0, pid, 2)
    assert ctx.end_v2(pid, 1, commit=True) == (PRODUCER_FENCED, -1, -1)


def test_new_instance_fences_an_open_tv2_transaction():
    ctx, pid = started()
    assert ctx.init()[0] == CONCURRENT_TRANSACTIONS
    assert ctx.state() is S.PREPARE_ABORT and ctx.meta().producer_epoch == 1
    ctx.markers()
    assert ctx.init() == (0, pid, 2)
    assert ctx.end_v2(pid, 0, commit=True) == (PRODUCER_FENCED, -1, -1)


def test_tv1_end_keeps_the_epoch_and_records_version_0():
    ctx = TxnContext()
    _, pid, _ = ctx.init()
    assert ctx.add(pid, 0, T0) == 0
    assert ctx.meta().client_tv == 0
    assert ctx.end(pid, 0, commit=True) == 0
    (job,) = ctx.markers()
    assert (job.producer_epoch, job.transaction_version) == (0, 0)
    assert ctx.meta().producer_epoch == 0
    # A v5 EndTxn after a v1 transaction switches to the version 2 rules.
    assert ctx.add_v2(pid, 0, T0) == 0
    assert ctx.end_v2(pid, 0, commit=True) == (0, pid, 1)


def test_records_are_transaction_log_value_v1_and_v0_still_reads():
    ctx, pid = started()
    ctx.end_v2(pid, 0, commit=True)
    key, value = CODEC.encode(ctx.log[-1])
    assert value is not None and value[:2] == b"\x00\x01"  # value version 1
    decoded = CODEC.decode(key, value)
    assert decoded is not None and decoded.value["client_transaction_version"] == 2
    assert decoded.value["transaction_status"] == int(S.PREPARE_COMMIT)
    # A version 0 record (headwater before transaction version 2) loads as version 0.
    v0 = RecordCodec([RecordType(TRANSACTION_LOG, "TransactionLog",
                                 (("transactional_id", "string"),), 0, _V0_VALUE)])
    old_key, old_value = v0.encode(ctx.log[0])
    assert old_value is not None and old_value[:2] == b"\x00\x00"
    old = CODEC.decode(old_key, old_value)
    assert old is not None and old.value["producer_id"] == pid
    assert old.value.get("client_transaction_version", 0) == 0


def test_an_epoch_at_the_int16_limit_never_overflows():
    """Only a client using the epoch a fence reserved gets here; nothing may wrap."""
    ctx, pid = started()
    meta = dataclasses.replace(ctx.meta(), producer_epoch=32767)
    ctx.write(lambda s, now: Result([txn_record(meta)], None))
    error, new_pid, epoch = ctx.end_v2(pid, 32767, commit=True)
    assert error == 0 and ctx.meta().producer_epoch == 32767
    (job,) = ctx.markers()
    assert job.producer_epoch == 32767 and (new_pid, epoch) == (1001, 0)
