"""What other clients' suites found on three brokers (issue 33), each as it was found and
side by side with Apache Kafka 4.4 where the scenario is a client's.

* A transaction's offsets are the group's once `commit_transaction` returns, whichever
  broker coordinates the group (confluent-kafka's consume-transform-produce; an
  OffsetFetch right after the commit found none on three brokers, Kafka answers them).
* The EndTxn that follows a commit at once is not fenced (franz-go's
  GroupTransactSession ends an empty transaction right after committing: on three
  brokers its EndTxn found the previous transaction still PrepareCommit, whose markers
  were still travelling, and got PRODUCER_FENCED).
"""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from headwater.records.batch import build_batch
from tests.integration.test_transactions_v2 import retry
from tests.support.cluster import (
    LEASE_MS,
    Cluster,
    create,
    key_on,
    leaders,
    victim,
    wait_listed,
)
from tests.support.kafka_reference import KafkaReference
from tests.support.wire import RawClient

pytestmark = [pytest.mark.timeout(240), pytest.mark.cluster_campaign(
    "three brokers of its own, and Apache Kafka beside them")]

def offsets_after_commit(bootstrap: str, rounds: int) -> list[Any]:
    """confluent-kafka: consume 10 records in a new group, produce them again in a
    transaction with the consumer's position, commit; what AdminClient lists for the
    group at once, per round."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = f"trust-in-{uuid.uuid4().hex[:8]}"
    out = f"{topic}-out"
    for future in admin.create_topics([NewTopic(topic, 1, 1), NewTopic(out, 3, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(20):
        producer.produce(topic, value=b"v%d" % i)
    assert producer.flush(30) == 0
    listed = []
    for _ in range(rounds):
        group = f"trust-g-{uuid.uuid4().hex[:8]}"
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe([topic])
        got: list[Any] = []
        deadline = time.monotonic() + 60
        while len(got) < 10:
            assert time.monotonic() < deadline, f"consumed {len(got)} of 10"
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.append(msg)
        got = got[:10]
        txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{group}"})
        txn.init_transactions(30)
        txn.begin_transaction()
        for i, msg in enumerate(got):
            txn.produce(out, value=msg.value(), partition=i % 3)
        txn.send_offsets_to_transaction([TopicPartition(topic, 0, got[-1].offset() + 1)],
                                        consumer.consumer_group_metadata(), 30)
        txn.commit_transaction(30)
        request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])]
        answer = next(iter(admin.list_consumer_group_offsets(request).values())).result(30)
        found = answer.topic_partitions[0]
        listed.append(found.offset if found.error is None else found.error)
        consumer.close()
    return listed


def test_a_transactions_offsets_are_there_when_commit_transaction_returns(
        cluster: Cluster, kafka_ref: KafkaReference) -> None:
    # Kafka answers EndTxn before it writes the markers, so a round may list no offset
    # yet (-1001: seen in about one round of four here); headwater answers once the
    # markers are in, its group coordinator's included (docs/differences.md).
    assert set(offsets_after_commit(kafka_ref.bootstrap, 4)) <= {10, -1001}
    assert offsets_after_commit(cluster.bootstrap(), 6) == [10] * 6


def _tv2_produce(client: RawClient, txn_id: str, pid: int, epoch: int, topic: str,
                 partition: int) -> int:
    batch = build_batch([(None, b"v", [], int(time.time() * 1000))], producer_id=pid,
                        producer_epoch=epoch, base_sequence=0, is_transactional=True)

    def call() -> int:
        r = client.request(0, 12, {"transactional_id": txn_id, "acks": -1, "timeout": 10000,
                                   "topic_data": [{"name": topic, "partition_data": [
                                       {"index": partition, "records": batch}]}]})
        return int(r.responses[0].partition_responses[0].error_code)
    return int(retry(call, lambda c: 51 if c in (3, 6, 7, 45, 53) else c))


def test_the_end_txn_right_after_a_commit_is_not_fenced(cluster: Cluster) -> None:
    """Transaction version 2 on the wire, as franz-go's GroupTransactSession: a
    transaction over partitions led by all three brokers with the group's offsets (its
    group coordinated by another broker than the transaction), EndTxn commit, and at
    once an EndTxn abort at the epoch it returned (an empty transaction)."""
    topic = f"trust-tv2-{uuid.uuid4().hex[:8]}"
    create(cluster.bootstrap(), topic, 6)
    placement, _controller = leaders(cluster.bootstrap(), topic, 6, {1, 2, 3})
    parts = {node: next(p for p, n in placement.items() if n == node)
             for node in set(placement.values())}
    assert len(parts) >= 2, f"all partitions on one broker: {placement}"
    txn_id = key_on(cluster, 1, "trust-tx", 1)
    group = key_on(cluster, 2, "trust-g", 0)
    conns = {n: RawClient("127.0.0.1", cluster.ports[n]) for n in (1, 2, 3)}
    try:
        init = retry(lambda: conns[1].request(22, 5, {
            "transactional_id": txn_id, "transaction_timeout": 60000, "producer_id": -1,
            "producer_epoch": -1}), lambda r: int(r.error_code))
        assert init.error_code == 0
        pid, epoch = init.producer_id, init.producer_epoch
        for round_ in range(3):
            for node, partition in parts.items():
                assert _tv2_produce(conns[node], txn_id, pid, epoch, topic, partition) == 0
            body = {"transactional_id": txn_id, "group_id": group, "producer_id": pid,
                    "producer_epoch": epoch, "generation_id": -1, "member_id": "",
                    "group_instance_id": None, "topics": [{"name": topic, "partitions": [{
                        "partition_index": 0, "committed_offset": 10 + round_,
                        "committed_leader_epoch": -1, "committed_metadata": ""}]}]}
            commit = retry(lambda body=body: conns[2].request(28, 5, body),
                           lambda r: int(r.topics[0].partitions[0].error_code))
            assert commit.topics[0].partitions[0].error_code == 0
            ended = conns[1].request(26, 5, {"transactional_id": txn_id, "producer_id": pid,
                                             "producer_epoch": epoch, "committed": True})
            assert ended.error_code == 0
            epoch = ended.producer_epoch
            # the next transaction, empty, ended at once: Kafka bumps the epoch
            empty = conns[1].request(26, 5, {"transactional_id": txn_id, "producer_id": pid,
                                             "producer_epoch": epoch, "committed": False})
            assert (empty.error_code, empty.producer_epoch) == (0, epoch + 1), \
                f"round {round_}: the empty abort after a commit answered {empty.error_code}"
            epoch = empty.producer_epoch
            fetched = conns[2].request(9, 8, {"groups": [{"group_id": group, "topics": [
                {"name": topic, "partition_indexes": [0]}]}], "require_stable": False})
            assert fetched.groups[0].topics[0].partitions[0].committed_offset == 10 + round_
    finally:
        for conn in conns.values():
            conn.close()


def test_replication_factor_up_to_the_live_brokers_is_accepted_and_reported(
        cluster: Cluster) -> None:
    """librdkafka's 0081_admin asks three listed brokers for replication factor 3 and for
    replica lists naming them; Kafka Connect's internal topics ask for 3 by default."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(2)})
    base = f"trust-rf-{uuid.uuid4().hex[:8]}"
    futures = admin.create_topics([
        NewTopic(f"{base}-3", 4, 3, config={"min.insync.replicas": "2"}),
        NewTopic(f"{base}-assigned", 3, replica_assignment=[[1, 2, 3], [2, 3, 1], [3, 1, 2]]),
        NewTopic(f"{base}-4", 1, 4),
        NewTopic(f"{base}-unknown", 1, replica_assignment=[[1, 7]]),
        NewTopic(f"{base}-uneven", 2, replica_assignment=[[1, 2], [3]]),
    ])
    futures[f"{base}-3"].result(30)
    futures[f"{base}-assigned"].result(30)
    errors = {}
    for suffix in ("4", "unknown", "uneven"):
        with pytest.raises(Exception) as failed:
            futures[f"{base}-{suffix}"].result(30)
        errors[suffix] = failed.value.args[0]
    assert errors["4"].name() == "INVALID_REPLICATION_FACTOR"
    assert "only 3 broker(s) are registered" in errors["4"].str()
    assert errors["unknown"].name() == "INVALID_REPLICA_ASSIGNMENT"
    assert "broker 7" in errors["unknown"].str()
    assert errors["uneven"].name() == "INVALID_REPLICA_ASSIGNMENT"
    for name in (f"{base}-3", f"{base}-assigned"):
        deadline = time.monotonic() + 30
        while True:
            topic = admin.list_topics(name, timeout=10).topics[name]
            parts = topic.partitions.values()
            if topic.error is None and parts and all(p.leader in (1, 2, 3) for p in parts):
                break
            assert time.monotonic() < deadline, f"{name}: {topic.error}"
            time.sleep(0.2)
        for p in parts:
            assert sorted(p.replicas) == [1, 2, 3] and sorted(p.isrs) == [1, 2, 3], name
            assert p.leader in p.replicas
    # acks=all with min.insync.replicas=2: the in-sync replicas are the factor's three
    producer = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all",
                         "enable.idempotence": True})
    failures: list[Any] = []
    for i in range(40):
        producer.produce(f"{base}-3", value=b"%d" % i, partition=i % 4,
                         on_delivery=lambda err, _m: failures.append(err) if err else None)
    assert producer.flush(60) == 0 and not failures, failures


def test_a_broker_woken_past_its_lease_serves_no_stale_state(cluster: Cluster) -> None:
    """A broker paused (SIGSTOP) past its leases has lost them whether or not it has
    heard so: the moment it wakes it answers Fetch with NOT_LEADER_OR_FOLLOWER (never the
    stale log's data, or OFFSET_OUT_OF_RANGE past its end, on which librdkafka re-read a
    partition from its start in the fault campaign) and OffsetFetch with
    NOT_COORDINATOR (never offsets older than the new coordinator's)."""
    topic = f"trust-pause-{uuid.uuid4().hex[:8]}"
    create(cluster.bootstrap(), topic, 6)
    node, held = victim(cluster, topic, 6)
    group = key_on(cluster, node, "trust-pause-g", 0)
    partition = held[0]
    producer = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all",
                         "enable.idempotence": True})
    for i in range(20):
        producer.produce(topic, value=b"%d" % i, partition=partition)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": group})
    consumer.commit(offsets=[TopicPartition(topic, partition, 10)], asynchronous=False)
    consumer.close()
    proc = cluster.brokers[node].proc
    assert proc is not None
    client = RawClient("127.0.0.1", cluster.ports[node])
    answers: dict[str, Any] = {}

    def ask() -> None:
        """Sent while the broker is paused: the requests wait in its socket, and are
        the first thing it reads when it wakes (before its lease renewal runs)."""
        answers["fetch"] = client.request(1, 12, {
            "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [{
                "topic": topic, "partitions": [{"partition": partition, "fetch_offset": 0,
                                                "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": (), "rack_id": ""}).responses[0].partitions[0]
        answers["offsets"] = client.request(9, 8, {"groups": [{"group_id": group, "topics": [
            {"name": topic, "partition_indexes": [partition]}]}],
            "require_stable": False}).groups[0]

    os.kill(proc.pid, signal.SIGSTOP)
    asking = threading.Thread(target=ask)
    try:
        time.sleep(2 * LEASE_MS / 1000 + 1)  # paused past its leases (the fault itself)
        asking.start()
        time.sleep(0.2)  # the request is in the paused broker's socket (not a sync)
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    asking.join(30)
    client.close()
    fetched, offsets = answers["fetch"], answers["offsets"]
    assert fetched.error_code == 6 and not fetched.records, fetched
    assert offsets.error_code in (14, 16), offsets  # loading, or not the coordinator
    for n in (1, 2, 3):
        wait_listed(cluster.bootstrap(n), [1, 2, 3], timeout=60)


def test_a_produce_the_object_store_holds_up_answers_by_its_timeout_and_lands_once(
        cluster: Cluster) -> None:
    """The 30-minute campaign's duplicates (docs/operations.md): a produce waiting for a
    commit window the object store holds up answers REQUEST_TIMED_OUT by the request's
    timeout, as Kafka's delayed produce does, instead of past the client's own request
    timeout (where librdkafka counts the batch possibly persisted and sends it again
    under a bumped epoch). Its retry, same sequence, is then written exactly once."""
    topic = f"trust-slow-{uuid.uuid4().hex[:8]}"
    create(cluster.bootstrap(), topic, 1)
    lead = leaders(cluster.bootstrap(), topic, 1, {1, 2, 3})[0][0]
    raw = RawClient("127.0.0.1", cluster.ports[lead])
    gateway = cluster.gateway.proc
    assert gateway is not None
    try:
        init = raw.request(22, 4, {"transactional_id": None, "transaction_timeout": 60000,
                                   "producer_id": -1, "producer_epoch": -1})

        def send(seq: int, timeout_ms: int) -> Any:
            batch = build_batch([(None, b"x" * 1000, [], 1000)] * 5,
                                producer_id=init.producer_id,
                                producer_epoch=init.producer_epoch, base_sequence=seq)
            return raw.request(0, 9, {"acks": -1, "timeout": timeout_ms, "topic_data": [
                {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}
            ).responses[0].partition_responses[0]

        def sent(seq: int) -> Any:  # until the partition is served
            deadline = time.monotonic() + 60
            while int((part := send(seq, 30_000)).error_code) in (3, 6, 7, 56):
                assert time.monotonic() < deadline, part
                time.sleep(0.2)
            return part

        first = sent(0)  # the partition is served: its owner read it before the outage
        assert (int(first.error_code), first.base_offset) == (0, 0), first
        os.killpg(gateway.pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            stalled = send(5, 1000)
            took = time.monotonic() - started
        finally:
            os.killpg(gateway.pid, signal.SIGCONT)
        assert (int(stalled.error_code), stalled.base_offset) == (7, -1), stalled
        assert took < 5, took
        again = sent(5)
        assert (int(again.error_code), again.base_offset) == (0, 5), again
        listed = raw.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
        assert listed.topics[0].partitions[0].offset == 10  # one copy of each batch
    finally:
        raw.close()
