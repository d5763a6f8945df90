"""Transactions across crashes: of the broker (kill -9, or the testing exit right after a
Prepare* is persisted) and of a consume-transform-produce process (SIGKILL mid-stream).
In every case a read_committed consumer sees exactly the committed records."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.integration.test_clients_round_trip import create_topic
from tests.integration.test_transactions import (
    FAST_SCAN,
    INVALID_PRODUCER_EPOCH,
    PRODUCER_FENCED,
    describe,
    lso_and_hw,
    raw,
    read_all,
    txn_producer,
    wait_for,
)

CRASH_AFTER_PREPARE = ("--override", "headwater.txn.crash.after.prepare=true")
#: The timeout of a transaction left open across a kill -9: it must outlast the restart,
#: so that the open transaction is seen right after it (three brokers of a cluster
#: start one after the other in about 5 s, and took over 10 s in a loaded CI run; one
#: node in under 2 s).
OPEN_ACROSS_RESTART_MS = 20000


def without(extra: list[str], option: tuple[str, ...]) -> list[str]:
    """The broker's arguments without one option (its flag and value together)."""
    out, i = [], 0
    while i < len(extra):
        if tuple(extra[i:i + len(option)]) == option:
            i += len(option)
        else:
            out.append(extra[i])
            i += 1
    return out


def committed_offset(bootstrap: str, group: str, topic: str, partition: int = 0) -> int:
    client = raw(bootstrap)
    try:
        resp = client.request(9, 8, {"groups": [{"group_id": group, "topics": [
            {"name": topic, "partition_indexes": [partition]}]}], "require_stable": True})
        part = resp.groups[0].topics[0].partitions[0]
        assert int(part.error_code) == 0, part.error_code
        return part.committed_offset
    finally:
        client.close()


def test_crash_after_prepare_commit_completes_on_restart(broker_factory, topic_name):
    b = broker_factory(*CRASH_AFTER_PREPARE)
    create_topic(b.bootstrap, topic_name, partitions=2)
    txn_id, group = f"{topic_name}-tx", f"{topic_name}-g"
    p = txn_producer(b.bootstrap, txn_id, **{"transaction.timeout.ms": 5000})
    p.begin_transaction()
    for i in range(10):
        p.produce(topic_name, f"v{i}".encode(), partition=i % 2)
    meta = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group})
    p.send_offsets_to_transaction([TopicPartition(topic_name, 0, 42)],
                                  meta.consumer_group_metadata(), 15)
    try:
        p.commit_transaction(3)  # the broker exits right after writing PrepareCommit
    except Exception:
        pass
    assert b.wait_exit(15) == 1  # on a cluster: the transaction's coordinator
    assert "headwater.txn.crash.after.prepare" in b.logs()
    del p, meta

    b.extra = without(b.extra, CRASH_AFTER_PREPARE)
    b.start()
    state = wait_for(lambda: describe(b.bootstrap, txn_id).transaction_state
                     in ("CompleteCommit", "CompleteAbort")
                     and describe(b.bootstrap, txn_id).transaction_state)
    assert state == "CompleteCommit"
    assert sorted(read_all(b.bootstrap, topic_name, "read_committed", 2)) == \
        sorted(f"v{i}" for i in range(10))
    # The marker reached __consumer_offsets too: the offset is committed and stable.
    assert committed_offset(b.bootstrap, group, topic_name) == 42


def test_kill_9_mid_transaction_is_aborted_on_timeout_after_restart(broker_factory,
                                                                    topic_name):
    b = broker_factory(*FAST_SCAN)
    create_topic(b.bootstrap, topic_name)
    txn_id, group = f"{topic_name}-tx", f"{topic_name}-g"
    p = txn_producer(b.bootstrap, txn_id,
                     **{"transaction.timeout.ms": OPEN_ACROSS_RESTART_MS})
    p.begin_transaction()
    p.produce(topic_name, b"committed")
    p.commit_transaction(15)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic_name, f"doomed-{i}".encode())
    meta = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group})
    p.send_offsets_to_transaction([TopicPartition(topic_name, 0, 6)],
                                  meta.consumer_group_metadata(), 15)
    p.flush(15)
    assert describe(b.bootstrap, txn_id).transaction_state == "Ongoing"
    b.kill()
    del p, meta

    b.start()
    # Right after the restart the open transaction is still there, holding the LSO.
    lso, hw = lso_and_hw(b.bootstrap, topic_name)
    assert (lso, hw) == (2, 7)  # "committed" + its marker, then five open records
    wait_for(lambda: describe(b.bootstrap, txn_id).transaction_state == "CompleteAbort",
             timeout=45, what="the timed-out transaction to be aborted")
    assert describe(b.bootstrap, txn_id).producer_epoch == 1  # fenced by the timeout
    assert read_all(b.bootstrap, topic_name, "read_committed") == ["committed"]
    assert lso_and_hw(b.bootstrap, topic_name) == (8, 8)
    assert committed_offset(b.bootstrap, group, topic_name) == -1  # the offset was aborted


TRANSFORM = textwrap.dedent('''
    """Consume-transform-produce: input value v -> output value "out-" + v, in
    transactions of BATCH records whose input offsets are committed with them."""
    import sys

    from confluent_kafka import Consumer, Producer, TopicPartition

    bootstrap, src, dst, txn_id, group, total, pause_at = sys.argv[1:8]
    total, pause_at, BATCH = int(total), int(pause_at), 50
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                         "transaction.timeout.ms": 60000, "linger.ms": 5})
    producer.init_transactions(30)  # fences a previous instance, aborts its transaction
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(src, 0)])  # resumes from the committed offset
    done = 0
    while True:
        msgs = consumer.consume(BATCH, 1.0)
        if not msgs:
            print("idle", flush=True)
            continue
        producer.begin_transaction()
        for m in msgs:
            assert m.error() is None, m.error()
            producer.produce(dst, b"out-" + m.value())
        producer.flush(30)
        if pause_at >= 0 and done >= pause_at:
            print("paused", flush=True)  # mid-transaction, records written, not committed
            sys.stdin.readline()
        producer.send_offsets_to_transaction(
            [TopicPartition(src, 0, msgs[-1].offset() + 1)],
            consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        done += len(msgs)
        print("committed", done, flush=True)
''')


def test_consume_transform_produce_survives_sigkill_with_exactly_once_output(
        broker_factory, topic_name, tmp_path: Path):
    b = broker_factory()
    src, dst = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(b.bootstrap, src)
    create_topic(b.bootstrap, dst)
    n = 1000
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(src, f"{i:05d}".encode())
    assert p.flush(15) == 0
    script = tmp_path / "transform.py"
    script.write_text(TRANSFORM)
    txn_id, group = f"{topic_name}-transform", f"{topic_name}-group"

    def start(pause_at: int) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, str(script), b.bootstrap, src, dst, txn_id,
                                 group, str(n), str(pause_at)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def wait_line(proc: subprocess.Popen[str], want) -> str:
        assert proc.stdout is not None
        for line in proc.stdout:
            if want(line):
                return line
        raise AssertionError(f"transform exited with {proc.wait()} before {want}")

    first = start(pause_at=300)
    try:
        wait_line(first, lambda line: line.startswith("paused"))
        # Killed mid-stream: some transactions committed, one open with its output written.
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
    partial = read_all(b.bootstrap, dst, "read_committed")
    assert 300 <= len(partial) < n
    assert describe(b.bootstrap, txn_id).transaction_state == "Ongoing"

    second = start(pause_at=-1)
    try:
        wait_line(second, lambda line: line.startswith("committed") and
                  int(line.split()[1]) + len(partial) >= n)
    finally:
        second.kill()
        second.wait(10)
    out = read_all(b.bootstrap, dst, "read_committed")
    assert len(out) == n and sorted(out) == [f"out-{i:05d}" for i in range(n)]
    # The killed instance's open transaction did reach the log, and was aborted.
    assert len(read_all(b.bootstrap, dst, "read_uncommitted")) > n
    assert describe(b.bootstrap, txn_id).producer_epoch >= 2


# ---- transaction version 2 (KIP-890 part 2) -------------------------------------------


def tv2_client(bootstrap: str, txn_id: str, topic: str, pid: int = -1, epoch: int = -1,
               seq: int = 0, timeout_ms: int = 60000):  # noqa: ANN201
    """A raw-wire TV2 producer; with `pid`/`epoch` it resumes an identity (a producer
    that lived through the broker's crash reconnects with what it had)."""
    from tests.integration.test_transactions_v2 import Tv2Client

    client = Tv2Client(bootstrap, txn_id, topic, timeout_ms)
    if pid >= 0:
        client.pid, client.epoch, client.seq = pid, epoch, seq
    return client


def test_kill_9_mid_tv2_transaction_aborts_it_whole_and_fences_the_zombie(broker_factory,
                                                                         topic_name):
    """A TV2 producer (Produce v12 adding its partition, TxnOffsetCommit v5 adding the
    group) is mid-transaction when headwater is killed -9. After the restart the open
    transaction times out and is aborted whole (its records and its offset), with the
    epoch bumped; the producer that survived it is a zombie: its writes and its commit
    are refused, and a new instance takes over."""
    b = broker_factory(*FAST_SCAN)
    create_topic(b.bootstrap, topic_name)
    txn_id, group = f"{topic_name}-tx", f"{topic_name}-g"
    p = tv2_client(b.bootstrap, txn_id, topic_name, timeout_ms=OPEN_ACROSS_RESTART_MS)
    try:
        assert p.init() == (0, 0)
        assert p.produce(b"kept") == 0
        assert p.end(True) == (0, "same", 1)
        for i in range(3):
            assert p.produce(f"doomed-{i}".encode()) == 0
        assert p.commit_offset(group, 4) == 0
        d = describe(b.bootstrap, txn_id)
        assert (d.transaction_state, d.producer_epoch) == ("Ongoing", 1)
        assert {t for t, _ in d.partitions} == {topic_name, "__consumer_offsets"}
        pid, seq = p.pid, p.seq
    finally:
        p.close()
    b.kill()

    b.start()
    assert lso_and_hw(b.bootstrap, topic_name) == (2, 5)  # "kept" + marker, then 3 open
    wait_for(lambda: describe(b.bootstrap, txn_id).transaction_state == "CompleteAbort",
             timeout=45, what="the timed-out transaction to be aborted")
    assert describe(b.bootstrap, txn_id).producer_epoch == 2  # the fence's bump
    assert read_all(b.bootstrap, topic_name, "read_committed") == ["kept"]
    assert lso_and_hw(b.bootstrap, topic_name) == (6, 6)
    assert committed_offset(b.bootstrap, group, topic_name) == -1  # aborted with it

    zombie = tv2_client(b.bootstrap, txn_id, topic_name, pid, 1, seq)
    fresh = tv2_client(b.bootstrap, txn_id, topic_name)
    try:
        assert zombie.produce(b"zombie") == INVALID_PRODUCER_EPOCH
        assert fresh.init() == (0, 0) and (fresh.pid, fresh.epoch) == (pid, 3)
        assert zombie.end(True, epoch=1) == (PRODUCER_FENCED, "none", -1)
        assert fresh.produce(b"fresh") == 0
        assert fresh.end(True) == (0, "same", 4)
    finally:
        zombie.close()
        fresh.close()
    assert read_all(b.bootstrap, topic_name, "read_committed") == ["kept", "fresh"]


def test_crash_after_tv2_prepare_commit_completes_whole_at_the_bumped_epoch(broker_factory,
                                                                           topic_name):
    """The broker exits right after a TV2 PrepareCommit (epoch bumped, no marker yet).
    After the restart the markers go out at the bumped epoch, the transaction is
    committed whole (records and offset), the producer's retried EndTxn learns the new
    epoch and carries on, and a write at the old epoch is fenced."""
    b = broker_factory(*CRASH_AFTER_PREPARE)
    create_topic(b.bootstrap, topic_name, partitions=2)
    txn_id, group = f"{topic_name}-tx", f"{topic_name}-g"
    p = tv2_client(b.bootstrap, txn_id, topic_name)
    try:
        assert p.init() == (0, 0)
        for i in range(5):
            assert p.produce(f"v{i}".encode()) == 0
        assert p.commit_offset(group, 42) == 0
        pid = p.pid
        try:
            p.end(True)  # the broker exits before answering
        except Exception:
            pass
    finally:
        p.close()
    assert b.wait_exit(15) == 1
    b.extra = without(b.extra, CRASH_AFTER_PREPARE)
    b.start()

    state = wait_for(lambda: describe(b.bootstrap, txn_id).transaction_state
                     in ("CompleteCommit", "CompleteAbort")
                     and describe(b.bootstrap, txn_id).transaction_state)
    assert state == "CompleteCommit"
    assert describe(b.bootstrap, txn_id).producer_epoch == 1
    assert sorted(read_all(b.bootstrap, topic_name, "read_committed", 2)) == \
        [f"v{i}" for i in range(5)]
    assert committed_offset(b.bootstrap, group, topic_name) == 42

    p = tv2_client(b.bootstrap, txn_id, topic_name, pid, 0, 5)
    try:
        assert p.end(True) == (0, "same", 1)  # the lost answer, by retrying
        assert p.produce(b"stale", epoch=0) == INVALID_PRODUCER_EPOCH
        assert p.produce(b"next") == 0
        assert p.end(True) == (0, "same", 2)
    finally:
        p.close()
    assert sorted(read_all(b.bootstrap, topic_name, "read_committed", 2)) == \
        sorted([f"v{i}" for i in range(5)] + ["next"])
