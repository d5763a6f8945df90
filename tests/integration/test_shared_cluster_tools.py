"""Kafka's own tools against three brokers of one shared log, with the same results as on
one node: the single-node tests' scenarios (VerifiableProducer and VerifiableConsumers
in a classic and a KIP-848 group with kafka-consumer-groups, a Java transactional
producer with kafka-transactions, kafka-share-groups over a share group) run unchanged
against the cluster's bootstrap list."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.integration import test_kafka_tools as single
from tests.integration.test_share_groups_tool_vs_kafka import check_headwaters_answers, scenario
from tests.support.cluster import Cluster

pytestmark = [pytest.mark.timeout(240), pytest.mark.cluster_campaign(
    "three brokers of its own, Kafka's tools against them")]



def as_broker(cluster: Cluster) -> SimpleNamespace:
    """The cluster where the single-node tests take a broker (they use its bootstrap)."""
    return SimpleNamespace(bootstrap=cluster.bootstrap())


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_verifiable_clients_and_kafka_consumer_groups(cluster: Cluster, topic_name: str,
                                                      tmp_path: Path, protocol: str) -> None:
    single.test_verifiable_clients_and_consumer_groups(
        as_broker(cluster), topic_name, tmp_path, protocol)  # type: ignore[arg-type]


def test_java_transactional_producer_and_kafka_transactions(cluster: Cluster,
                                                            topic_name: str) -> None:
    single.test_java_transactional_producer_and_kafka_transactions(
        as_broker(cluster), topic_name)  # type: ignore[arg-type]


def test_kafka_share_groups(cluster: Cluster) -> None:
    check_headwaters_answers(scenario(cluster.bootstrap()))
