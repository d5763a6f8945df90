"""A transaction's markers on three brokers of one shared log are committed in one
PostgreSQL transaction: the partitions' owners hold their markers, the coordinator
commits them all at once (headwater/shared/marker_holds.py, staged_markers.py).

The coordinator here is armed to die (`headwater.txn.crash.after.holds`) once every
partition holds its marker and before it commits them: until the next coordinator does,
no partition shows the transaction, and then all of them do, with the offsets the
transaction committed for a consumer group."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from headwater.shared.marker_holds import HOLD_CLIENT_ID
from tests.support.cluster import (
    LEASE_MS,
    Cluster,
    create,
    key_on,
    leaders,
    read_all,
    settled_leaders,
    start_cluster,
    topic_id_of,
    victim,
    wait_listed,
)
from tests.support.engines import PostgresServer, VersityGateway
from tests.support.wire import RawClient

pytestmark = [pytest.mark.timeout(240), pytest.mark.cluster_campaign(
    "three brokers of its own, the coordinator's armed to die")]

PARTITIONS = 6


@pytest.fixture(scope="module")
def armed(postgres: PostgresServer, versitygw: VersityGateway,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Broker 1 alone first, so it is the controller, armed to die (as a transaction's
    coordinator) before committing a transaction's held markers; then brokers 2 and 3."""
    yield from start_cluster(postgres, versitygw, tmp_path_factory.mktemp("armed"),
                             controller=("--override", "headwater.txn.crash.after.holds=true"))


@pytest.fixture
def disarmed(armed: Cluster) -> Cluster:
    """The cluster with broker 1 no longer armed (after the first test, or restarted
    here when a test runs without it)."""
    if any("crash.after.holds" in arg for arg in armed.brokers[1].extra):
        armed.brokers[1].stop()
        armed.start(1)
        wait_listed(armed.bootstrap(), [1, 2, 3])
    return armed


def stable_offsets(cluster: Cluster, topic: str, nodes: list[int],
                   partitions: int = PARTITIONS) -> dict[int, int]:
    """Each partition's last stable offset (ListOffsets, read_committed) as its leader
    answers; partitions whose leader does not answer are left out."""
    found: dict[int, int] = {}
    for node in nodes:
        try:
            client = RawClient("127.0.0.1", cluster.ports[node])
        except OSError:
            continue
        try:
            answer = client.request(2, 7, {"replica_id": -1, "isolation_level": 1, "topics": [{
                "name": topic, "partitions": [
                    {"partition_index": p, "current_leader_epoch": -1, "timestamp": -1}
                    for p in range(partitions)]}]})
        except (OSError, ConnectionError):
            continue
        finally:
            client.close()
        for t in answer.topics:
            for p in t.partitions:
                if not p.error_code:
                    found[p.partition_index] = int(p.offset)
    return found


def test_a_transaction_is_visible_on_every_partition_or_on_none(armed: Cluster) -> None:
    cluster = armed
    topic = f"atomic-{uuid.uuid4().hex[:8]}"
    create(cluster.bootstrap(1), topic, PARTITIONS)
    placement, controller = leaders(cluster.bootstrap(), topic, PARTITIONS, {1, 2, 3})
    assert controller == 1 and len(set(placement.values())) >= 2, placement
    topic_id = topic_id_of(cluster, topic)
    producer = Producer({"bootstrap.servers": cluster.bootstrap(),  # coordinated by 1
                         "transactional.id": key_on(cluster, 1, "a", 1)})
    producer.init_transactions(30)
    producer.begin_transaction()
    for p in range(PARTITIONS):
        producer.produce(topic, value=b"all-or-none", partition=p)
    # offsets committed by the transaction (TxnOffsetCommit), to a group coordinated by
    # broker 2: their marker is held there too, and replayed there once committed
    group = key_on(cluster, 2, "g")
    member = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": group})
    producer.send_offsets_to_transaction(
        [TopicPartition(topic, p, 100 + p) for p in range(PARTITIONS)],
        member.consumer_group_metadata(), 30)
    member.close()
    producer.flush(30)
    outcome: list[object] = []

    def commit() -> None:
        try:
            producer.commit_transaction(120)
            outcome.append("committed")
        except Exception as exc:  # asserted below
            outcome.append(exc)

    committer = threading.Thread(target=commit, daemon=True)
    committer.start()
    coordinator = cluster.brokers[1].proc
    assert coordinator is not None
    deadline = time.monotonic() + 60
    while coordinator.poll() is None:
        assert time.monotonic() < deadline, "the coordinator did not reach the fault point"
        time.sleep(0.05)
    assert coordinator.returncode == 1, cluster.brokers[1].logs()[-3000:]
    died = time.monotonic()
    count = "SELECT count(*) FROM batches WHERE topic_id = $1 AND is_control"
    held_samples = 0
    deadline = died + LEASE_MS / 1000 + 60
    while True:
        # The stable offsets first, then what PostgreSQL holds: while no marker is
        # committed there, no partition may show the transaction.
        stable = stable_offsets(cluster, topic, [2, 3])
        markers = cluster.fetchval(count, topic_id)
        assert markers in (0, PARTITIONS), f"{markers} of {PARTITIONS} markers committed"
        if markers == PARTITIONS:
            break
        assert all(offset == 0 for offset in stable.values()), stable
        held_samples += 1
        assert time.monotonic() < deadline, "the next coordinator never committed them"
        time.sleep(0.05)
    assert held_samples > 0
    print(f"markers committed {time.monotonic() - died:.1f} s after the coordinator died "
          f"(lease {LEASE_MS} ms), {held_samples} samples saw none")
    committer.join(150)
    assert outcome == ["committed"], outcome
    got = read_all(cluster.bootstrap(2, 3), topic, PARTITIONS, want=PARTITIONS, timeout=60)
    assert {p: [v for _o, v in got[p]] for p in range(PARTITIONS)} == \
        {p: [b"all-or-none"] for p in range(PARTITIONS)}
    reader = Consumer({"bootstrap.servers": cluster.bootstrap(2, 3), "group.id": group})
    committed = reader.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 30)
    reader.close()
    assert {tp.partition: tp.offset for tp in committed} == \
        {p: 100 + p for p in range(PARTITIONS)}
    cluster.start(1)  # without the fault: it rejoins
    wait_listed(cluster.bootstrap(2), [1, 2, 3])


def test_transactions_keep_committing_across_brokers(disarmed: Cluster) -> None:
    """With the armed broker back (no longer the coordinator, unarmed), transactions of
    several producers over the same partitions commit and abort, each on every partition:
    held markers of one transaction never block another's for good."""
    cluster = disarmed
    topic = f"many-{uuid.uuid4().hex[:8]}"
    create(cluster.bootstrap(2), topic, PARTITIONS)
    settled_leaders(cluster, topic, PARTITIONS)
    errors: list[BaseException] = []

    def run(n: int) -> None:
        try:
            producer = Producer({"bootstrap.servers": cluster.bootstrap(),
                                 "transactional.id": f"m{n}-{topic}"})
            producer.init_transactions(30)
            for i in range(10):
                producer.begin_transaction()
                for p in range(PARTITIONS):
                    producer.produce(topic, value=f"{n}:{i}".encode(), partition=p)
                if i % 3 == 2:
                    producer.abort_transaction(60)
                else:
                    producer.commit_transaction(60)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,), daemon=True) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    assert not errors, errors
    committed = {f"{n}:{i}".encode() for n in range(3) for i in range(10) if i % 3 != 2}
    got = read_all(cluster.bootstrap(), topic, PARTITIONS, want=len(committed) * PARTITIONS,
                   timeout=60)
    for p in range(PARTITIONS):
        assert sorted(v for _o, v in got[p]) == sorted(committed), p
    assert cluster.fetchval("SELECT count(*) FROM staged_markers") == 0


def test_transactions_stay_whole_through_the_kill_9_of_a_partition_leader(
        disarmed: Cluster) -> None:
    """Two transactional producers commit transactions of one record per partition while
    a broker leading some of the partitions (not the coordinators') is killed (kill -9):
    every transaction is on all six partitions or on none of them, each once; every
    commit that succeeded is there; both producers carry on through the others."""
    cluster = disarmed
    topic = f"whole-{uuid.uuid4().hex[:8]}"
    create(cluster.bootstrap(2), topic, PARTITIONS)
    node, held = victim(cluster, topic, PARTITIONS)
    others = [n for n in (1, 2, 3) if n != node]
    stop = threading.Event()
    committed: set[bytes] = set()
    attempted: set[bytes] = set()
    after_kill: list[int] = [0, 0]
    killed = threading.Event()

    def run(n: int) -> None:
        producer = Producer({"bootstrap.servers": cluster.bootstrap(*others),
                             "transactional.id": f"w{n}-{topic}",
                             "transaction.timeout.ms": 20_000})
        producer.init_transactions(60)
        i = 0
        while not stop.is_set():
            value = f"{n}:{i:05d}".encode()
            i += 1
            attempted.add(value)
            try:
                producer.begin_transaction()
                for p in range(PARTITIONS):
                    producer.produce(topic, value=value, partition=p)
                producer.commit_transaction(60)
                committed.add(value)
                if killed.is_set():
                    after_kill[n] += 1
            except KafkaException as exc:
                if exc.args[0].txn_requires_abort():
                    producer.abort_transaction(60)
                elif not exc.args[0].retriable():
                    raise

    threads = [threading.Thread(target=run, args=(n,), daemon=True) for n in range(2)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while len(committed) < 20:
        assert time.monotonic() < deadline, "no transaction committed"
        time.sleep(0.05)
    cluster.brokers[node].kill()
    killed.set()
    deadline = time.monotonic() + LEASE_MS / 1000 + 90
    while min(after_kill) < 10:
        assert all(t.is_alive() for t in threads), "a producer failed"
        assert time.monotonic() < deadline, f"commits after the kill: {after_kill}"
        time.sleep(0.1)
    stop.set()
    for t in threads:
        t.join(120)
    got = read_all(cluster.bootstrap(*others), topic, PARTITIONS, want=len(committed) *
                   PARTITIONS, timeout=60)
    per_partition = [[v for _o, v in got[p]] for p in range(PARTITIONS)]
    for p, values in enumerate(per_partition):
        assert len(values) == len(set(values)), f"partition {p} has duplicates"
    visible = [set(values) for values in per_partition]
    assert all(v == visible[0] for v in visible), "a transaction is on some partitions only"
    assert committed <= visible[0], f"{len(committed - visible[0])} commits lost"
    assert visible[0] <= attempted
    print(f"{len(committed)} transactions committed, {len(visible[0] - committed)} of "
          f"unknown outcome visible; broker {node} (partitions {held}) killed")
    cluster.start(node)
    wait_listed(cluster.bootstrap(*others), [1, 2, 3])


def test_a_hold_no_coordinator_commits_is_abandoned(disarmed: Cluster) -> None:
    """A WriteTxnMarkers that asks a partition's owner to hold a marker (the client id
    the cluster's coordinators use) but that no coordinator ever commits: appends to the
    partition wait, then after twice the lease time the owner abandons the hold, takes
    the partition again from PostgreSQL (without the marker), and what waited is
    acknowledged. The transaction stays open until its producer commits it."""
    cluster = disarmed
    topic = f"abandon-{uuid.uuid4().hex[:8]}"
    create(cluster.bootstrap(2), topic, 1)
    owner = settled_leaders(cluster, topic, 1)[0]
    txn = Producer({"bootstrap.servers": cluster.bootstrap(), "transactional.id": f"h-{topic}"})
    txn.init_transactions(30)
    txn.begin_transaction()
    txn.produce(topic, value=b"in-the-transaction", partition=0)
    txn.flush(30)
    client = RawClient("127.0.0.1", cluster.ports[owner], timeout=30, client_id=HOLD_CLIENT_ID)
    try:
        described = client.request(61, 0, {"topics": [{"name": topic, "partition_indexes": [0]}]})
        assert described.topics[0].partitions[0].error_code == 0, described
        (active,) = described.topics[0].partitions[0].active_producers
        answer = client.request(27, 1, {"markers": [{
            "producer_id": active.producer_id, "producer_epoch": active.producer_epoch,
            "transaction_result": True, "coordinator_epoch": 0,
            "topics": [{"name": topic, "partition_indexes": [0]}]}]})
    finally:
        client.close()
    assert answer.markers[0].topics[0].partitions[0].error_code == 0  # held and staged
    held_at = time.monotonic()
    acked: list[float] = []
    other = Producer({"bootstrap.servers": cluster.bootstrap(), "enable.idempotence": True,
                      "message.timeout.ms": 60_000})
    other.produce(topic, value=b"behind-the-hold", partition=0,
                  on_delivery=lambda err, _m: acked.append(time.monotonic())
                  if err is None else None)
    deadline = time.monotonic() + 2 * LEASE_MS / 1000 + 30
    while not acked:
        assert time.monotonic() < deadline, "the append behind the hold never completed"
        other.poll(0.1)
    waited = acked[0] - held_at
    assert waited >= 2 * LEASE_MS / 1000 - 0.5, f"acknowledged {waited:.1f} s after the hold"
    markers = cluster.fetchval(
        "SELECT count(*) FROM batches WHERE topic_id = $1 AND is_control",
        topic_id_of(cluster, topic))
    assert markers == 0, "the abandoned marker was committed"
    assert "within 6 s; taking the partition again" in cluster.brokers[owner].logs()
    stable = stable_offsets(cluster, topic, [owner], partitions=1)
    assert stable == {0: 0}, stable  # the transaction is still open
    txn.commit_transaction(60)
    got = read_all(cluster.bootstrap(), topic, 1, want=2, timeout=30)
    assert sorted(v for _o, v in got[0]) == [b"behind-the-hold", b"in-the-transaction"]
    print(f"the append behind the hold was acknowledged {waited:.1f} s later "
          f"(lease {LEASE_MS} ms)")
