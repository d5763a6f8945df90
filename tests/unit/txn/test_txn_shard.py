"""The transaction coordinator shard, as stories with a fake clock (Kafka's
TransactionCoordinatorTest / TransactionMetadataTest cases, in our terms)."""

from __future__ import annotations

from headwater.txn.records import txn_record
from headwater.txn.shard import ABORT_TIMER, EXPIRE_TIMER
from headwater.txn.state import TxnState
from tests.unit.txn.context import TxnContext

S = TxnState
INVALID_REQUEST = 42
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
PRODUCER_FENCED = 90
TRANSACTIONAL_ID_NOT_FOUND = 105
TRANSACTION_ABORTABLE = 120
T0, T1 = ("t", 0), ("t", 1)


def test_init_allocates_a_producer_id_and_bumps_the_epoch_on_each_init():
    ctx = TxnContext()
    assert ctx.init() == (0, 1000, 0)
    assert ctx.states_written() == ["Empty"]
    assert ctx.last_records[0].value["transaction_timeout_ms"] == 5000
    assert ctx.init(timeout_ms=7000) == (0, 1000, 1)
    assert ctx.meta().timeout_ms == 7000
    assert ctx.init(txn_id="other") == (0, 1001, 0)


def test_init_validates_id_and_timeout():
    ctx = TxnContext(**{"transaction.max.timeout.ms": "10000"})
    assert ctx.init(txn_id="")[0] == INVALID_REQUEST
    assert ctx.init(timeout_ms=0)[0] == INVALID_TRANSACTION_TIMEOUT
    assert ctx.init(timeout_ms=10001)[0] == INVALID_TRANSACTION_TIMEOUT
    assert ctx.last_records == [] and ctx.shard.txns == {}
    assert ctx.init(timeout_ms=10000)[0] == 0


def test_commit_story_add_prepare_markers_complete():
    ctx = TxnContext()
    _, pid, epoch = ctx.init()
    ctx.now += 10
    assert ctx.add(pid, epoch, T0) == 0
    assert ctx.state() is S.ONGOING and ctx.meta().start_ms == ctx.now
    start = ctx.now
    ctx.now += 10
    assert ctx.add(pid, epoch, T0) == 0 and ctx.last_records == []  # already in: no write
    assert ctx.add(pid, epoch, T1, ("__consumer_offsets", 7)) == 0
    assert ctx.meta().partitions == {T0, T1, ("__consumer_offsets", 7)}
    assert ctx.meta().start_ms == start
    assert ctx.end(pid, epoch, commit=True) == 0
    assert ctx.states_written() == ["PrepareCommit"]
    # Until the markers are written, the transaction is busy.
    assert ctx.add(pid, epoch, T0) == CONCURRENT_TRANSACTIONS
    assert ctx.init()[0] == CONCURRENT_TRANSACTIONS
    assert ctx.end(pid, epoch, commit=True) == CONCURRENT_TRANSACTIONS
    assert ctx.end(pid, epoch, commit=False) == INVALID_TXN_STATE
    (job,) = ctx.markers()
    assert job.commit and job.producer_id == pid and job.producer_epoch == epoch
    assert job.partitions == {T0, T1, ("__consumer_offsets", 7)}
    assert ctx.states_written() == ["CompleteCommit"]
    assert ctx.meta().partitions == frozenset()
    # A retried EndTxn whose answer was lost is fine; the opposite one is not.
    assert ctx.end(pid, epoch, commit=True) == 0 and ctx.last_records == []
    assert ctx.end(pid, epoch, commit=False) == INVALID_TXN_STATE
    # The next transaction starts from CompleteCommit.
    ctx.now += 5
    assert ctx.add(pid, epoch, T1) == 0
    assert ctx.meta().partitions == {T1} and ctx.meta().start_ms == ctx.now


def test_abort_story_and_end_txn_without_a_transaction():
    ctx = TxnContext()
    _, pid, epoch = ctx.init()
    assert ctx.end(pid, epoch, commit=False) == INVALID_TXN_STATE  # Empty
    ctx.add(pid, epoch, T0)
    assert ctx.end(pid, epoch, commit=False) == 0
    assert ctx.states_written() == ["PrepareAbort"]
    (job,) = ctx.markers()
    assert not job.commit
    assert ctx.state() is S.COMPLETE_ABORT
    assert ctx.end(pid, epoch, commit=False) == 0
    assert ctx.end(pid, epoch, commit=True) == INVALID_TXN_STATE


def test_producer_id_mapping_and_fencing_errors():
    ctx = TxnContext()
    _, pid, epoch = ctx.init()
    assert ctx.add(pid + 1, epoch, T0) == INVALID_PRODUCER_ID_MAPPING
    assert ctx.add(pid, epoch, T0, txn_id="unknown") == INVALID_PRODUCER_ID_MAPPING
    assert ctx.end(pid, epoch, True, txn_id="unknown") == INVALID_PRODUCER_ID_MAPPING
    assert ctx.add(pid, epoch + 1, T0) == PRODUCER_FENCED
    assert ctx.add(pid, epoch - 1, T0) == PRODUCER_FENCED
    assert ctx.last_records == [] and ctx.state() is S.EMPTY


def test_a_new_producer_fences_the_old_one_and_aborts_its_open_transaction():
    ctx = TxnContext()
    _, pid, old = ctx.init()
    ctx.add(pid, old, T0, T1)
    # The new instance's InitProducerId: the open transaction is aborted under epoch+1.
    assert ctx.init() == (CONCURRENT_TRANSACTIONS, -1, -1)
    assert ctx.states_written() == ["PrepareAbort"]
    assert ctx.meta().producer_epoch == old + 1
    # The old producer is fenced from now on.
    assert ctx.add(pid, old, T0) == PRODUCER_FENCED
    assert ctx.end(pid, old, commit=True) == PRODUCER_FENCED
    (job,) = ctx.markers()
    assert not job.commit and job.producer_epoch == old + 1 and job.partitions == {T0, T1}
    # The retry gets the epoch after the fencing one.
    assert ctx.init() == (0, pid, old + 2)
    assert ctx.state() is S.EMPTY


def test_kip360_reinit_with_the_current_producer_id_and_epoch():
    ctx = TxnContext()
    _, pid, epoch = ctx.init()
    assert ctx.init(expected=(pid, epoch)) == (0, pid, epoch + 1)
    assert ctx.init(expected=(pid, epoch)) == (PRODUCER_FENCED, -1, -1)  # stale epoch
    assert ctx.init(expected=(pid + 5, epoch + 1)) == (PRODUCER_FENCED, -1, -1)
    assert ctx.meta().producer_epoch == epoch + 1


def test_an_exhausted_epoch_rotates_to_a_new_producer_id():
    ctx = TxnContext()
    ctx.init()
    meta = ctx.meta()
    ctx.shard.replay(99, -1, -1, txn_record(meta.to(S.EMPTY, ctx.now, producer_epoch=32765)))
    assert ctx.init() == (0, meta.producer_id, 32766)
    assert ctx.init() == (0, 1001, 0)


def test_transactions_past_their_timeout_are_fenced_and_aborted():
    ctx = TxnContext(**{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"})
    assert ctx.timer.is_scheduled(ABORT_TIMER)
    _, pid, epoch = ctx.init(timeout_ms=5000)
    ctx.add(pid, epoch, T0)
    assert ctx.advance(5000) == []  # not past the deadline yet (start + 5000 < now)
    written = ctx.advance(1000)
    assert [r.value["transaction_status"] for r in written] == [S.PREPARE_ABORT]
    assert written[0].value["producer_epoch"] == epoch + 1
    assert ctx.timer.is_scheduled(ABORT_TIMER)  # the scan re-arms itself
    # The zombie's commit is refused; the coordinator finishes the abort.
    assert ctx.end(pid, epoch, commit=True) == PRODUCER_FENCED
    (job,) = ctx.markers()
    assert not job.commit and job.producer_epoch == epoch + 1
    assert ctx.state() is S.COMPLETE_ABORT
    assert ctx.advance(10_000) == []  # nothing more to abort


def test_idle_transactional_ids_expire_but_open_transactions_do_not():
    ctx = TxnContext(**{"transactional.id.expiration.ms": "60000",
                        "transaction.remove.expired.transaction.cleanup.interval.ms": "10000",
                        "transaction.max.timeout.ms": "900000"})
    assert ctx.timer.is_scheduled(EXPIRE_TIMER)
    _, pid_a, _ = ctx.init("idle")
    _, pid_b, epoch_b = ctx.init("busy", timeout_ms=900_000)
    ctx.add(pid_b, epoch_b, T0, txn_id="busy")
    written = ctx.advance(70_000)
    assert [(r.key["transactional_id"], r.value) for r in written] == [("idle", None)]
    assert set(ctx.shard.txns) == {"busy"}
    # A new producer with the expired id gets a new producer id.
    assert ctx.init("idle")[1] not in (pid_a, pid_b)


def test_replay_rebuilds_state_and_a_prepare_left_by_a_crash_is_still_owed():
    ctx = TxnContext()
    _, pid, epoch = ctx.init()
    ctx.add(pid, epoch, T0)
    ctx.end(pid, epoch, commit=True)
    # "Crash" here: a shard rebuilt from the log owes the same markers.
    fresh = ctx.replayed()
    assert fresh.txns == ctx.shard.txns
    assert fresh.pending_markers() == ctx.shard.pending_markers()
    assert fresh.pending_markers()[0].commit
    ctx.markers()
    assert ctx.replayed().pending_markers() == []
    assert ctx.replayed().txns == ctx.shard.txns


def test_completion_of_a_stale_job_writes_nothing():
    ctx = TxnContext()
    _, pid, epoch = ctx.init()
    ctx.add(pid, epoch, T0)
    ctx.end(pid, epoch, commit=False)
    (job,) = ctx.shard.pending_markers()
    ctx.markers()
    assert ctx.write(lambda s, now: s.complete(job, now)) is None
    assert ctx.last_records == []


def test_verify_partitions():
    ctx = TxnContext()
    _, pid, epoch = ctx.init()
    verify = ctx.shard.verify_partitions
    # Not in the transaction: TRANSACTION_ABORTABLE, as Kafka 4.x's coordinator answers.
    assert verify("tx", pid, epoch, [T0]) == {T0: TRANSACTION_ABORTABLE}  # nothing added
    ctx.add(pid, epoch, T0)
    assert verify("tx", pid, epoch, [T0, T1]) == {T0: 0, T1: TRANSACTION_ABORTABLE}
    assert verify("tx", pid, epoch + 1, [T0]) == {T0: PRODUCER_FENCED}
    assert verify("tx", pid + 1, epoch, [T0]) == {T0: INVALID_PRODUCER_ID_MAPPING}
    ctx.end(pid, epoch, commit=True)
    assert verify("tx", pid, epoch, [T0]) == {T0: CONCURRENT_TRANSACTIONS}
    ctx.markers()
    assert verify("tx", pid, epoch, [T0]) == {T0: TRANSACTION_ABORTABLE}


def test_describe_and_list_with_filters():
    ctx = TxnContext()
    _, pid, epoch = ctx.init("a")
    ctx.init("b")
    start = ctx.now
    ctx.add(pid, epoch, T1, T0, txn_id="a")
    d = ctx.shard.describe("a")
    assert d["transaction_state"] == "Ongoing" and d["producer_id"] == pid
    assert d["transaction_start_time"] == start and d["transaction_timeout"] == 5000
    assert d["topics"] == [{"topic": "t", "partitions": [0, 1]}]
    assert ctx.shard.describe("nope")["error_code"] == TRANSACTIONAL_ID_NOT_FOUND
    ctx.now += 100

    def ids(states=(), pids=(), duration=-1, pattern=None):
        return sorted(t["transactional_id"] for t in ctx.shard.list_transactions(
            set(states), set(pids), duration, pattern, ctx.now))

    assert ids() == ["a", "b"]
    assert ids(states=[S.ONGOING]) == ["a"]
    assert ids(pids=[pid]) == ["a"]
    assert ids(duration=50) == ["a", "b"]  # b never started: start -1, "running" forever
    assert ids(duration=100) == ["b"]
    assert ids(pattern="a") == ["a"] and ids(pattern="a|b") == ["a", "b"]
    assert ids(pattern="") == ["a", "b"]
