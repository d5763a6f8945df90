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

from tests.support.cluster import Cluster, create, settled_leaders, start_cluster
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
