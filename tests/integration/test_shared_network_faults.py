"""Network faults between one broker and PostgreSQL, through a real fault proxy
(Toxiproxy), as the fault campaign injects them (issue 33).

A connection that blackholes (no reset, no answer) is the hard case: a statement waiting
on it waits for good unless something ends it. A broker whose database connection
blackholed past its leases loses its partitions to the others, and once the network is
back it serves its share again, on its own.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from headwater.wire.client import RawClient
from tests.support.cluster import Cluster, create, settled_leaders, start_cluster, wait_listed
from tests.support.engines import PostgresServer, VersityGateway
from tests.support.toxiproxy import Toxiproxy

pytestmark = [pytest.mark.timeout(240), pytest.mark.cluster_campaign(
    "three brokers of their own behind a fault proxy")]

PARTITIONS = 6


@pytest.fixture(scope="module")
def proxied(postgres: PostgresServer, versitygw: VersityGateway,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    proxies = Toxiproxy(tmp_path_factory.mktemp("toxiproxy")).start()
    try:
        yield from start_cluster(postgres, versitygw, tmp_path_factory.mktemp("proxied"),
                                 proxies=proxies)
    finally:
        proxies.kill()


def test_a_broker_whose_database_connection_blackholed_serves_again_after_it(
        proxied: Cluster) -> None:
    topic = f"net-{uuid.uuid4().hex[:8]}"
    create(proxied.bootstrap(), topic, PARTITIONS)
    placed = settled_leaders(proxied, topic, PARTITIONS)
    victim = placed[0]
    others = [n for n in (1, 2, 3) if n != victim]
    assert proxied.proxies is not None
    proxied.proxies.add_toxic(f"postgres-{victim}", "blackhole", "timeout", "upstream",
                              {"timeout": 0})
    try:  # the victim cannot renew: the others take its partitions
        deadline = time.monotonic() + 60
        while (held := proxied.fetchval(
                "SELECT count(*) FROM leases WHERE owner = $1 AND expires_at > now() "
                "AND resource LIKE 'partition:%'", victim)) != 0:
            assert time.monotonic() < deadline, f"broker {victim} still holds {held} leases"
            time.sleep(0.5)
        producer = Producer({"bootstrap.servers": proxied.bootstrap(*others), "acks": "all"})
        for p in range(PARTITIONS):
            producer.produce(topic, value=b"during", partition=p)
        assert producer.flush(60) == 0
    finally:
        proxied.proxies.remove_toxic(f"postgres-{victim}", "blackhole")
    healed = time.monotonic()
    again = settled_leaders(proxied, topic, PARTITIONS, timeout=90)
    assert again == placed
    producer = Producer({"bootstrap.servers": proxied.bootstrap(), "acks": "all"})
    for p in range(PARTITIONS):
        producer.produce(topic, value=b"after", partition=p)
    assert producer.flush(60) == 0
    print(f"broker {victim} served its partitions again {time.monotonic() - healed:.1f} s "
          f"after the heal")


def _listed_ports(bootstrap: str) -> dict[int, int]:
    brokers = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).brokers
    return {n: int(b.port) for n, b in brokers.items()}


def _until_listed(bootstrap: str, ports: dict[int, int], timeout: float = 30.0) -> None:
    """Until a client bootstrapping on `bootstrap` is told exactly `ports`."""
    deadline = time.monotonic() + timeout
    while (listed := _listed_ports(bootstrap)) != ports:
        assert time.monotonic() < deadline, f"listed {listed}, not {ports}"
        time.sleep(0.2)


def _agreed_controller(cluster: Cluster, timeout: float = 30.0) -> int:
    """The controller all three brokers name. Polled: the previous test may have moved
    the controller lease (its victim can be the controller), and a broker names the new
    one only once it has read the cluster's state again."""
    deadline = time.monotonic() + timeout
    while True:
        named = {AdminClient({"bootstrap.servers": cluster.bootstrap(n)}).list_topics(
            timeout=10).controller_id for n in (1, 2, 3)}
        if len(named) == 1 and min(named) in (1, 2, 3):
            return named.pop()
        assert time.monotonic() < deadline, f"the brokers name controllers {named}"
        time.sleep(0.2)


def test_brokers_reach_each_other_on_the_inter_broker_listener(proxied: Cluster) -> None:
    """Each broker has a client listener and an INTERNAL one (inter.broker.listener.name),
    advertised through proxy peers-N. A client is told every broker's address on its
    own listener; a CreateTopics a broker forwards to the controller travels to the
    controller's INTERNAL listener, so resetting what reaches that proxy stops it, and
    nothing else. (A client's admin sends CreateTopics to the controller itself, so the
    test sends it to another broker with the raw client.)"""
    assert proxied.proxies is not None
    wait_listed(proxied.bootstrap(1), [1, 2, 3])
    internal = {n: proxied.proxies.port_of(f"peers-{n}") for n in (1, 2, 3)}
    # Polled: the previous test blackholed one broker's database connection, and a
    # broker whose heartbeat is a lease late drops out of the others' lists for a moment
    # (a CI run saw broker 1 missing from one answer right after wait_listed).
    _until_listed(proxied.bootstrap(1), proxied.ports)
    _until_listed(f"127.0.0.1:{internal[1]}", internal)
    controller = _agreed_controller(proxied)
    other = next(n for n in (1, 2, 3) if n != controller)
    proxied.proxies.add_toxic(f"peers-{controller}", "cut", "reset_peer", "upstream",
                              {"timeout": 0})
    try:  # CreateTopics sent to another broker itself (not routed as a client would):
        # as Kafka's forwarding, REQUEST_TIMED_OUT once no controller answered in time
        assert _create_via(proxied.ports[other], f"cut-{uuid.uuid4().hex[:8]}") == 7
        # the client listeners are not cut: the controller itself still creates topics
        assert _create_via(proxied.ports[controller], f"direct-{uuid.uuid4().hex[:8]}") == 0
    finally:
        proxied.proxies.remove_toxic(f"peers-{controller}", "cut")
    healed = f"healed-{uuid.uuid4().hex[:8]}"
    deadline = time.monotonic() + 60
    while (code := _create_via(proxied.ports[other], healed)) not in (0, 36):
        assert time.monotonic() < deadline, f"forwarding still fails: error {code}"
        time.sleep(0.5)


def _create_via(port: int, topic: str) -> int:
    """CreateTopics sent to the broker on `port` itself: its error code, -1 when the
    broker closed the connection instead."""
    raw = RawClient("127.0.0.1", port, timeout=40)
    try:
        answer = raw.request(19, 7, {"topics": [{
            "name": topic, "num_partitions": 1, "replication_factor": 1,
            "assignments": [], "configs": []}], "timeout_ms": 15000, "validate_only": False})
        return int(answer.topics[0].error_code)
    except ConnectionError:
        return -1
    finally:
        raw.close()
