"""Transactions with real clients: commit, abort, fencing, timeouts, transactional offset
commits, and the transaction APIs and CLI on the wire.

The broker runs with a short timed-out-transaction scan so the timeout test completes
in seconds; the producers' `transaction.timeout.ms` are short where a test needs it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition
from kafka.structs import OffsetAndMetadata
from kio.schema.errors import ErrorCode as E

from headwater.admin.transactions import TxnDescription, describe_transaction
from headwater.records.batch import build_batch
from tests.integration.test_clients_round_trip import create_topic
from tests.support.broker_process import BrokerProcess
from tests.support.wire import RawClient

FAST_SCAN = ("--override", "transaction.abort.timed.out.transaction.cleanup.interval.ms=200")
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
TRANSACTION_ABORTABLE = 120
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
OPERATION_NOT_ATTEMPTED = 55
UNKNOWN_TOPIC_OR_PARTITION = 3
UNSTABLE_OFFSET_COMMIT = 88
PRODUCER_FENCED = 90
TRANSACTIONAL_ID_NOT_FOUND = 105


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("txn") / "data", *FAST_SCAN).start()
    yield proc
    proc.stop()


# ---- helpers (also used by test_transactions_crash) -------------------------------------
def txn_producer(bootstrap: str, txn_id: str, **extra: object) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                  "linger.ms": 5, **extra})
    p.init_transactions(15)
    return p


def read_all(bootstrap: str, topic: str, isolation: str, partitions: int = 1,
             timeout: float = 20.0) -> list[str]:
    """Every value readable at `isolation`, up to the end of each partition (the LSO for
    read_committed); asserts the end was reached."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{isolation}",
                  "isolation.level": isolation, "enable.auto.commit": False,
                  "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[str] = []
    ended: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(ended) < partitions:
            assert time.monotonic() < deadline, f"no end of {topic} ({isolation}) in time"
            msg = c.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == -191, msg.error()  # _PARTITION_EOF
                ended.add(msg.partition())
                continue
            got.append(msg.value().decode())
    finally:
        c.close()
    return got


def wait_for(condition, timeout: float = 20.0, what: str = "condition"):
    """Poll `condition()` until it returns something truthy (an observable outcome, not
    a sleep standing in for one)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def raw(bootstrap: str) -> RawClient:
    host, port = bootstrap.rsplit(":", 1)
    return RawClient(host, int(port))


def describe(bootstrap: str, txn_id: str) -> TxnDescription:
    client = raw(bootstrap)
    try:
        return describe_transaction(client, txn_id, check=False)
    finally:
        client.close()


def lso_and_hw(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    """(last stable offset, high watermark), asked again while the partition answers a
    retriable error (on the shared log a restarted broker takes it in the background)."""
    client = raw(bootstrap)
    deadline = time.monotonic() + 15
    try:
        out = []
        for isolation in (1, 0):
            while True:
                resp = client.request(2, 7, {"replica_id": -1, "isolation_level": isolation,
                                             "topics": [{"name": topic, "partitions": [
                                                 {"partition_index": partition,
                                                  "timestamp": -1}]}]})
                answer = resp.topics[0].partitions[0]
                if int(answer.error_code) not in (E.not_leader_or_follower,
                                                  E.leader_not_available) \
                        or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            out.append(answer.offset)
        return out[0], out[1]
    finally:
        client.close()


def cli(bootstrap: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "headwater.cli", "transactions",
                           "--bootstrap-server", bootstrap, *args],
                          capture_output=True, text=True, timeout=60)
    if check and done.returncode:
        raise AssertionError(f"headwater transactions {args} failed: {done.stderr}")
    return done


# ---- real clients -----------------------------------------------------------------------
def test_confluent_commit_and_abort_read_committed_vs_uncommitted(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    p = txn_producer(broker.bootstrap, f"{topic_name}-tx")
    p.begin_transaction()
    for i in range(6):
        p.produce(topic_name, f"c1-{i}".encode(), partition=i % 2)
    p.commit_transaction(15)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic_name, f"ab-{i}".encode(), partition=i % 2)
    p.flush(15)
    p.abort_transaction(15)
    p.begin_transaction()
    p.produce(topic_name, b"c2-0", partition=1)
    p.commit_transaction(15)

    committed = sorted([f"c1-{i}" for i in range(6)] + ["c2-0"])
    assert sorted(read_all(broker.bootstrap, topic_name, "read_committed", 2)) == committed
    everything = read_all(broker.bootstrap, topic_name, "read_uncommitted", 2)
    assert sorted(everything) == sorted(committed + [f"ab-{i}" for i in range(4)])
    assert lso_and_hw(broker.bootstrap, topic_name, 1)[0] == \
        lso_and_hw(broker.bootstrap, topic_name, 1)[1]
    state = describe(broker.bootstrap, f"{topic_name}-tx")
    assert state.transaction_state == "CompleteCommit" and state.producer_epoch == 0


def test_zombie_producer_is_fenced_by_a_new_instance(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    txn_id = f"{topic_name}-zombie"
    old = txn_producer(broker.bootstrap, txn_id)
    old.begin_transaction()
    old.produce(topic_name, b"zombie-1")
    old.flush(15)
    new = txn_producer(broker.bootstrap, txn_id)  # fences `old`, aborts its transaction
    new.begin_transaction()
    new.produce(topic_name, b"new-1")
    new.commit_transaction(15)
    with pytest.raises(KafkaException) as err:
        old.produce(topic_name, b"zombie-2")
        old.commit_transaction(15)
    assert err.value.args[0].fatal(), err.value
    assert read_all(broker.bootstrap, topic_name, "read_committed") == ["new-1"]
    assert describe(broker.bootstrap, txn_id).producer_epoch == 2  # fence bump + new epoch


def test_kafka_python_commit_and_abort_with_offsets(broker, topic_name):
    admin_topic = topic_name
    create_topic(broker.bootstrap, admin_topic)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"{topic_name}-kp")
    p.init_transactions()
    p.begin_transaction()
    for i in range(3):
        p.send(admin_topic, f"c{i}".encode())
    p.commit_transaction()
    p.begin_transaction()
    p.send(admin_topic, b"aborted")
    p.flush()
    p.abort_transaction()
    p.begin_transaction()
    p.send(admin_topic, b"c3")
    p.send_offsets_to_transaction({KTopicPartition(admin_topic, 0): OffsetAndMetadata(4, "m", -1)},
                                  f"{topic_name}-group")
    p.commit_transaction()
    p.close()
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed",
                      auto_offset_reset="earliest", consumer_timeout_ms=2000)
    c.assign([KTopicPartition(admin_topic, 0)])
    assert [m.value for m in c] == [b"c0", b"c1", b"c2", b"c3"]
    c.close()
    g = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=f"{topic_name}-group")
    assert g.committed(KTopicPartition(admin_topic, 0)) == 4
    g.close()
    assert sorted(read_all(broker.bootstrap, admin_topic, "read_uncommitted")) == \
        ["aborted", "c0", "c1", "c2", "c3"]


def test_coordinator_aborts_a_transaction_past_its_timeout(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    txn_id = f"{topic_name}-slow"
    p = txn_producer(broker.bootstrap, txn_id, **{"transaction.timeout.ms": 3000})
    p.begin_transaction()
    p.produce(topic_name, b"never")
    p.flush(15)
    assert describe(broker.bootstrap, txn_id).transaction_state == "Ongoing"
    lso, hw = lso_and_hw(broker.bootstrap, topic_name)
    assert (lso, hw) == (0, 1)
    done = wait_for(lambda: describe(broker.bootstrap, txn_id).transaction_state
                    == "CompleteAbort", what="the timeout abort")
    assert done
    assert describe(broker.bootstrap, txn_id).producer_epoch == 1  # fenced
    assert lso_and_hw(broker.bootstrap, topic_name) == (2, 2)  # data + ABORT marker
    assert read_all(broker.bootstrap, topic_name, "read_committed") == []
    with pytest.raises(KafkaException):
        p.commit_transaction(15)


# ---- the APIs on the wire ---------------------------------------------------------------
def test_transaction_apis_and_their_errors(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    txn_id = f"{topic_name}-raw"
    group = f"{topic_name}-g"
    c = raw(broker.bootstrap)
    try:
        found = c.request(10, 3, {"key": txn_id, "key_type": 1})
        assert int(found.error_code) == 0 and found.port == broker.port
        bad = c.request(22, 4, {"transactional_id": txn_id, "transaction_timeout": 10**9,
                                "producer_id": -1, "producer_epoch": -1})
        assert int(bad.error_code) == INVALID_TRANSACTION_TIMEOUT
        init = c.request(22, 4, {"transactional_id": txn_id, "transaction_timeout": 60000,
                                 "producer_id": -1, "producer_epoch": -1})
        pid, epoch = init.producer_id, init.producer_epoch
        assert int(init.error_code) == 0 and epoch == 0

        def add(version: int, e: int, topic: str = topic_name, p: int = 0) -> dict:
            resp = c.request(24, version, {
                "v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": e, "v3_and_below_topics": [
                    {"name": topic, "partitions": [p]}]})
            return {(t.name, r.partition_index): int(r.partition_error_code)
                    for t in resp.results_by_topic_v3_and_below for r in t.results_by_partition}

        # Fenced epochs: INVALID_PRODUCER_EPOCH before v2, PRODUCER_FENCED from v2.
        assert add(1, epoch + 1) == {(topic_name, 0): INVALID_PRODUCER_EPOCH}
        assert add(3, epoch + 1) == {(topic_name, 0): PRODUCER_FENCED}
        assert add(3, epoch, "no-such-topic") == {("no-such-topic", 0):
                                                  UNKNOWN_TOPIC_OR_PARTITION}
        assert add(3, epoch) == {(topic_name, 0): 0}

        # The batched v4+ form: verify-only entries check membership without adding.
        def verify(partition: int, e: int = epoch, only: bool = True) -> int:
            resp = c.request(24, 5, {"transactions": [{
                "transactional_id": txn_id, "producer_id": pid, "producer_epoch": e,
                "verify_only": only, "topics": [{"name": topic_name,
                                                 "partitions": [partition]}]}]})
            assert int(resp.error_code) == 0
            (result,) = resp.results_by_transaction
            return int(result.topic_results[0].results_by_partition[0].partition_error_code)

        assert verify(0) == 0
        assert verify(0, epoch + 1) == PRODUCER_FENCED

        # TxnOffsetCommit needs AddOffsetsToTxn first; then the offset is pending.
        def txn_commit(offset: int) -> int:
            resp = c.request(28, 3, {
                "transactional_id": txn_id, "group_id": group, "producer_id": pid,
                "producer_epoch": epoch, "generation_id": -1, "member_id": "",
                "group_instance_id": None, "topics": [{"name": topic_name, "partitions": [
                    {"partition_index": 0, "committed_offset": offset,
                     "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
            return int(resp.topics[0].partitions[0].error_code)

        assert txn_commit(7) == INVALID_TXN_STATE
        added = c.request(25, 1, {"transactional_id": txn_id, "producer_id": pid,
                                  "producer_epoch": epoch, "group_id": group})
        assert int(added.error_code) == 0
        assert txn_commit(7) == 0

        def fetch_offset(stable: bool) -> tuple[int, int]:
            resp = c.request(9, 8, {"groups": [{"group_id": group, "topics": [
                {"name": topic_name, "partition_indexes": [0]}]}], "require_stable": stable})
            part = resp.groups[0].topics[0].partitions[0]
            return part.committed_offset, int(part.error_code)

        assert fetch_offset(True) == (-1, UNSTABLE_OFFSET_COMMIT)
        assert fetch_offset(False) == (-1, 0)

        state = describe(broker.bootstrap, txn_id)
        assert state.transaction_state == "Ongoing" and state.producer_id == pid
        assert set(state.partitions) >= {(topic_name, 0)}
        listed = c.request(66, 1, {"state_filters": ["Ongoing", "Bogus"],
                                   "producer_id_filters": [pid], "duration_filter": -1})
        assert [t.transactional_id for t in listed.transaction_states] == [txn_id]
        assert list(listed.unknown_state_filters) == ["Bogus"]

        end = c.request(26, 1, {"transactional_id": txn_id, "producer_id": pid + 1,
                                "producer_epoch": epoch, "committed": True})
        assert int(end.error_code) == INVALID_PRODUCER_ID_MAPPING
        end = c.request(26, 3, {"transactional_id": txn_id, "producer_id": pid,
                                "producer_epoch": epoch, "committed": True})
        assert int(end.error_code) == 0
        assert fetch_offset(True) == (7, 0)
        # The transaction is over: TRANSACTION_ABORTABLE, Kafka 4.x's answer to a
        # verification (the produce path maps it for older clients).
        assert verify(0) == TRANSACTION_ABORTABLE
        assert describe(broker.bootstrap, txn_id).transaction_state == "CompleteCommit"
        missing = c.request(65, 0, {"transactional_ids": ["no-such-id"]})
        assert int(missing.transaction_states[0].error_code) == TRANSACTIONAL_ID_NOT_FOUND
        assert describe_transaction(c, "no-such-id", check=False).error_code == \
            TRANSACTIONAL_ID_NOT_FOUND
    finally:
        c.close()


def test_transactions_cli_list_describe_and_abort_by_id(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    txn_id = f"{topic_name}-cli"
    p = txn_producer(broker.bootstrap, txn_id)
    (row,) = json.loads(cli(broker.bootstrap, "--json", "describe", txn_id).stdout)
    assert row["state"] == "Empty" and row["start_time_ms"] is None
    p.begin_transaction()
    p.produce(topic_name, b"stuck")
    p.flush(15)
    listed = json.loads(cli(broker.bootstrap, "--json", "list", "--state", "Ongoing").stdout)
    assert {"transactional_id": txn_id, "producer_id": describe(
        broker.bootstrap, txn_id).producer_id, "state": "Ongoing"} in listed
    (row,) = json.loads(cli(broker.bootstrap, "--json", "describe", txn_id).stdout)
    assert row["state"] == "Ongoing" and row["partitions"] == f"{topic_name}-0"
    out = cli(broker.bootstrap, "abort", txn_id).stdout
    assert "CompleteAbort" in out
    assert describe(broker.bootstrap, txn_id).producer_epoch == 1
    assert lso_and_hw(broker.bootstrap, topic_name) == (2, 2)
    again = cli(broker.bootstrap, "abort", txn_id, check=False)
    assert again.returncode == 1 and "no ongoing transaction" in again.stderr
    with pytest.raises(KafkaException) as err:
        p.commit_transaction(15)
    assert err.value.args[0].fatal()


def test_hanging_transaction_aborted_with_a_marker(broker_factory, topic_name):
    """A transactional batch the coordinator never heard of holds the LSO back until an
    operator writes an ABORT marker (WriteTxnMarkers) for it. Produce-side verification
    (KIP-890) prevents that; a broker without it shows what the tool is for."""
    broker = broker_factory("--override", "transaction.partition.verification.enable=false")
    create_topic(broker.bootstrap, topic_name)
    c = raw(broker.bootstrap)
    try:
        init = c.request(22, 4, {"transactional_id": None, "transaction_timeout": 60000,
                                 "producer_id": -1, "producer_epoch": -1})
        batch = build_batch([(None, b"hanging", [], 1000)], producer_id=init.producer_id,
                            producer_epoch=init.producer_epoch, base_sequence=0,
                            is_transactional=True)
        resp = c.request(0, 9, {"transactional_id": "nobody-knows", "acks": -1,
                                "timeout": 5000, "topic_data": [{"name": topic_name,
                                                                 "partition_data": [
                                                                     {"index": 0,
                                                                      "records": batch}]}]})
        assert int(resp.responses[0].partition_responses[0].error_code) == 0
    finally:
        c.close()
    assert lso_and_hw(broker.bootstrap, topic_name) == (0, 1)
    out = cli(broker.bootstrap, "abort", "--topic", topic_name, "--partition", "0",
              "--start-offset", "0").stdout
    assert f"producer {init.producer_id}" in out
    assert lso_and_hw(broker.bootstrap, topic_name) == (2, 2)
    assert read_all(broker.bootstrap, topic_name, "read_committed") == []
    assert read_all(broker.bootstrap, topic_name, "read_uncommitted") == ["hanging"]


def test_verification_refuses_batches_outside_the_transaction(broker, topic_name):
    """KIP-890: a transactional batch for a partition the coordinator did not add to the
    producer's ongoing transaction (a stray one, or a late retry after the transaction
    ended) is refused, so no transaction is left hanging; the LSO stays at the HW."""
    create_topic(broker.bootstrap, topic_name)
    c = raw(broker.bootstrap)
    txn_id = f"{topic_name}-verify"

    def send(pid: int, epoch: int, seq: int, txn: str) -> int:
        batch = build_batch([(None, b"v", [], 1000)], producer_id=pid, producer_epoch=epoch,
                            base_sequence=seq, is_transactional=True)
        resp = c.request(0, 9, {"transactional_id": txn, "acks": -1, "timeout": 5000,
                                "topic_data": [{"name": topic_name, "partition_data": [
                                    {"index": 0, "records": batch}]}]})
        return int(resp.responses[0].partition_responses[0].error_code)

    try:
        init = c.request(22, 4, {"transactional_id": txn_id, "transaction_timeout": 60000,
                                 "producer_id": -1, "producer_epoch": -1})
        pid, epoch = init.producer_id, init.producer_epoch
        assert send(pid, epoch, 0, txn_id) == INVALID_TXN_STATE  # never added
        assert send(pid, epoch, 0, "somebody-else") == INVALID_PRODUCER_ID_MAPPING
        c.request(24, 3, {"v3_and_below_transactional_id": txn_id,
                          "v3_and_below_producer_id": pid, "v3_and_below_producer_epoch": epoch,
                          "v3_and_below_topics": [{"name": topic_name, "partitions": [0]}]})
        assert send(pid, epoch, 0, txn_id) == 0
        assert send(pid, epoch, 1, txn_id) == 0  # the transaction is open here: no check
        ended = c.request(26, 3, {"transactional_id": txn_id, "producer_id": pid,
                                  "producer_epoch": epoch, "committed": False})
        assert int(ended.error_code) == 0
        deadline = time.monotonic() + 10  # the ABORT marker is written asynchronously
        while lso_and_hw(broker.bootstrap, topic_name) != (3, 3):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert send(pid, epoch, 2, txn_id) == INVALID_TXN_STATE  # late: refused
        assert lso_and_hw(broker.bootstrap, topic_name) == (3, 3)  # nothing hangs
    finally:
        c.close()


def test_transactional_id_expiration(broker_factory, topic_name):
    b = broker_factory("--override", "transactional.id.expiration.ms=500", "--override",
                       "transaction.remove.expired.transaction.cleanup.interval.ms=200")
    txn_id = f"{topic_name}-expiring"
    txn_producer(b.bootstrap, txn_id)
    first = describe(b.bootstrap, txn_id).producer_id
    gone = wait_for(lambda: describe(b.bootstrap, txn_id).error_code
                    == TRANSACTIONAL_ID_NOT_FOUND, what="the id to expire")
    assert gone
    txn_producer(b.bootstrap, txn_id)
    assert describe(b.bootstrap, txn_id).producer_id != first
