"""Which brokers Metadata lists on three brokers of one shared log: a broker killed -9
stays listed until `broker.session.timeout.ms` has passed since its last heartbeat (as
Kafka lists a broker until its session times out and it is fenced), while its
partitions move to the others after the (shorter) lease. A client that is told a broker
is gone forgets it (librdkafka decommissions it), and one decommissioned while an
OffsetForLeaderEpoch was in flight deadlocked the client's main thread (librdkafka
#5476): every reader of a fault campaign stood still. A clean stop deregisters at once."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tests.support.cluster import Cluster, leaders, served_topic, start_cluster, victim
from tests.support.engines import PostgresServer, VersityGateway

pytestmark = [pytest.mark.timeout(180), pytest.mark.cluster_campaign(
    "three brokers of its own, one killed")]

SESSION_MS = 20_000


@pytest.fixture(scope="module")
def cluster(postgres: PostgresServer, versitygw: VersityGateway,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from start_cluster(postgres, versitygw, Path(tmp_path_factory.mktemp("listed")),
                             overrides=(f"broker.session.timeout.ms={SESSION_MS}",))


def _listed(bootstrap: str) -> list[int]:
    return sorted(AdminClient({"bootstrap.servers": bootstrap}).list_topics(
        timeout=10).brokers)


def test_a_killed_broker_stays_listed_for_its_session_while_its_partitions_move(
        cluster: Cluster) -> None:
    topic = served_topic(cluster, "listed")
    node, _partitions = victim(cluster, topic, 6)
    others = [n for n in (1, 2, 3) if n != node]
    cluster.brokers[node].kill()
    killed = time.monotonic()
    # its partitions are led by the others once its leases expire (3 s) ...
    leaders(cluster.bootstrap(*others), topic, 6, set(others), timeout=30)
    moved = time.monotonic() - killed
    assert moved < SESSION_MS / 1000 - 5, f"the partitions took {moved:.1f} s to move"
    # ... and the broker is still listed, as Kafka lists it until its session expires
    assert _listed(cluster.bootstrap(others[0])) == [1, 2, 3]
    deadline = killed + SESSION_MS / 1000 + 30
    while (listed := _listed(cluster.bootstrap(others[0]))) != others:
        assert time.monotonic() < deadline, f"broker {node} still listed: {listed}"
        time.sleep(0.5)
    assert time.monotonic() - killed > SESSION_MS / 1000 - 2
    cluster.start(node)
    deadline = time.monotonic() + 60
    while _listed(cluster.bootstrap(others[0])) != [1, 2, 3]:
        assert time.monotonic() < deadline, f"broker {node} not listed again"
        time.sleep(0.5)


def test_a_broker_stopped_cleanly_leaves_the_list_at_once(cluster: Cluster) -> None:
    node = 3 if AdminClient({"bootstrap.servers": cluster.bootstrap()}).list_topics(
        timeout=10).controller_id != 3 else 2
    others = [n for n in (1, 2, 3) if n != node]
    cluster.brokers[node].stop()
    stopped = time.monotonic()
    deadline = stopped + 15
    while (listed := _listed(cluster.bootstrap(others[0]))) != others:
        assert time.monotonic() < deadline, f"broker {node} still listed: {listed}"
        time.sleep(0.2)
    assert time.monotonic() - stopped < SESSION_MS / 1000
    cluster.start(node)
