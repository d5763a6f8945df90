"""Producer ids on three brokers of one shared log: each broker answers InitProducerId
itself from blocks of ids the controller allocates (AllocateProducerIds, KIP-730), and no
id is ever handed out twice, across block boundaries, brokers, and a kill -9 of the
controller (the next one continues after every block the dead one committed)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from kio.schema.errors import ErrorCode as E

from tests.support.broker_process import BrokerProcess
from tests.support.cluster import (
    Cluster,
    coordinator_of,
    create,
    leaders,
    start_cluster,
    wait_listed,
)
from tests.support.engines import PostgresServer, VersityGateway, shared_broker_args
from tests.support.wire import RawClient

pytestmark = [pytest.mark.timeout(240), pytest.mark.cluster_campaign(
    "three brokers of its own, the controller killed")]

BLOCK = 1000
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture(scope="module")
def cluster(postgres: PostgresServer, versitygw: VersityGateway,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from start_cluster(postgres, versitygw, tmp_path_factory.mktemp("pids"))


def controller_of(cluster: Cluster, nodes: tuple[int, ...] = (1, 2, 3),
                  timeout: float = 60.0) -> int:
    """The controller every broker of `nodes` names (Metadata's controller_id)."""
    deadline = time.monotonic() + timeout
    while True:
        named = {AdminClient({"bootstrap.servers": cluster.bootstrap(n)})
                 .list_topics(timeout=10).controller_id for n in nodes}
        if len(named) == 1 and named <= set(nodes):
            return named.pop()
        assert time.monotonic() < deadline, f"brokers {nodes} name controllers {named}"
        time.sleep(0.2)


def new_ids(client: RawClient, count: int, timeout: float = 60.0) -> list[int]:
    """`count` idempotent InitProducerIds; COORDINATOR_LOAD_IN_PROGRESS (no block yet) is
    retried, as clients do."""
    ids: list[int] = []
    deadline = time.monotonic() + timeout
    retried = 0
    while len(ids) < count:
        answer = client.request(22, 4, {"transactional_id": None, "transaction_timeout": 60000,
                                         "producer_id": -1, "producer_epoch": -1})
        if answer.error_code == E.coordinator_load_in_progress:
            retried += 1
            assert time.monotonic() < deadline, f"no producer id block after {retried} tries"
            time.sleep(0.01)
            continue
        assert answer.error_code == 0 and answer.producer_epoch == 0, answer
        ids.append(int(answer.producer_id))
    return ids


def ids_through(cluster: Cluster, per_broker: dict[int, int]) -> dict[int, list[int]]:
    """InitProducerId asked of each broker, interleaved: broker -> the ids it answered."""
    clients = {n: RawClient("127.0.0.1", cluster.ports[n]) for n in per_broker}
    got: dict[int, list[int]] = {n: [] for n in per_broker}
    try:
        while any(len(got[n]) < want for n, want in per_broker.items()):
            for n, want in per_broker.items():
                if len(got[n]) < want:
                    got[n] += new_ids(clients[n], min(50, want - len(got[n])))
    finally:
        for client in clients.values():
            client.close()
    return got


def allocate(cluster: Cluster, node: int, port: int | None = None) -> Any:
    client = RawClient("127.0.0.1", port or cluster.ports[node])
    try:
        return client.request(67, 0, {"broker_id": 99, "broker_epoch": -1})
    finally:
        client.close()


def test_idempotent_producers_through_each_broker_get_distinct_ids(cluster: Cluster) -> None:
    topic = f"pids-{uuid.uuid4().hex[:8]}"
    create(cluster.bootstrap(1), topic, 1)
    placement, _controller = leaders(cluster.bootstrap(), topic, 1, {1, 2, 3})
    for n in (1, 2, 3):
        producer = Producer({"bootstrap.servers": cluster.bootstrap(n),
                             "enable.idempotence": True, "acks": "all"})
        producer.produce(topic, value=f"from broker {n}".encode(), partition=0)
        assert producer.flush(30) == 0
    client = RawClient("127.0.0.1", cluster.ports[placement[0]])
    try:
        described = client.request(61, 0, {"topics": [{"name": topic,
                                                       "partition_indexes": [0]}]})
    finally:
        client.close()
    part = described.topics[0].partitions[0]
    assert part.error_code == 0
    ids = [int(p.producer_id) for p in part.active_producers]
    assert len(ids) == 3 and len(set(ids)) == 3, ids


def test_init_producer_id_is_answered_by_every_broker_without_duplicates(
        cluster: Cluster) -> None:
    """1,200 ids from each broker: each crosses into its second block (the next block
    asked for at 90% of the first) and no id is answered twice. A transactional
    InitProducerId on a broker that is not the transaction coordinator answers
    NOT_COORDINATOR (it is not forwarded any more)."""
    started = time.monotonic()
    got = ids_through(cluster, {1: 1200, 2: 1200, 3: 1200})
    took = time.monotonic() - started
    every = [pid for ids in got.values() for pid in ids]
    assert len(every) == len(set(every)) == 3600
    for n, ids in got.items():
        blocks = {pid // BLOCK for pid in ids}
        assert len(blocks) >= 2, f"broker {n} used blocks {sorted(blocks)}"
    print(f"3,600 InitProducerIds through three brokers in {took:.1f} s")
    txn_id = f"t-{uuid.uuid4().hex[:6]}"
    coordinator = coordinator_of(cluster, txn_id, 1)
    other = next(n for n in (1, 2, 3) if n != coordinator)
    client = RawClient("127.0.0.1", cluster.ports[other])
    try:
        answer = client.request(22, 4, {"transactional_id": txn_id,
                                        "transaction_timeout": 60000,
                                        "producer_id": -1, "producer_epoch": -1})
    finally:
        client.close()
    assert answer.error_code == E.not_coordinator


def test_allocate_producer_ids_is_the_controllers(cluster: Cluster) -> None:
    before = ids_through(cluster, {1: 10, 2: 10, 3: 10})
    controller = controller_of(cluster)
    for n in (1, 2, 3):
        answer = allocate(cluster, n)
        if n != controller:
            assert answer.error_code == E.not_controller, n
            assert answer.producer_id_start == -1 and answer.producer_id_len == 0
            continue
        assert answer.error_code == 0
        assert answer.producer_id_len == BLOCK
        assert answer.producer_id_start > max(p for ids in before.values() for p in ids)
    after = ids_through(cluster, {1: 10, 2: 10, 3: 10})
    block = range(answer.producer_id_start, answer.producer_id_start + BLOCK)
    assert not [p for ids in after.values() for p in ids if p in block]


def test_ids_stay_unique_through_a_kill_9_of_the_controller(cluster: Cluster) -> None:
    seen = [p for ids in ids_through(cluster, {1: 300, 2: 300, 3: 300}).values() for p in ids]
    controller = controller_of(cluster)
    others = tuple(n for n in (1, 2, 3) if n != controller)
    # the controller's own block committed just before it dies
    seen += ids_through(cluster, {controller: 700})[controller]
    cluster.brokers[controller].kill()
    killed = time.monotonic()
    new_controller = controller_of(cluster, others)
    # more than a block each: the survivors ask the new controller for blocks
    seen += [p for ids in ids_through(cluster, {n: 1100 for n in others}).values()
             for p in ids]
    print(f"broker {new_controller} controls; 2,200 ids through the survivors "
          f"{time.monotonic() - killed:.1f} s after the kill -9")
    cluster.start(controller)
    wait_listed(cluster.bootstrap(), [1, 2, 3])
    seen += [p for ids in ids_through(cluster, {1: 400, 2: 400, 3: 400}).values()
             for p in ids]
    duplicated = len(seen) - len(set(seen))
    assert duplicated == 0, f"{duplicated} ids handed out twice"


def test_allocate_producer_ids_needs_cluster_action(
        postgres: PostgresServer, versitygw: VersityGateway, tmp_path: Path) -> None:
    """With the authorizer on and no ACL, an anonymous AllocateProducerIds is refused
    (Kafka's CLUSTER_ACTION on the cluster); the broker's own ids do not need it."""
    data_dir = tmp_path / "acl"
    proc = BrokerProcess(data_dir, *shared_broker_args(postgres, versitygw, data_dir),
                         "--override", f"authorizer.class.name={STANDARD}",
                         "--override", "allow.everyone.if.no.acl.found=false").start()
    try:
        client = RawClient("127.0.0.1", proc.port)
        try:
            answer = client.request(67, 0, {"broker_id": 99, "broker_epoch": -1})
            assert answer.error_code == E.cluster_authorization_failed
            assert answer.producer_id_start == -1
        finally:
            client.close()
    finally:
        proc.kill()
