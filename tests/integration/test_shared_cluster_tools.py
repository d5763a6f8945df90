"""Kafka's own tools against three brokers of one shared log, with the same results as on
one node: the single-node tests' scenarios (VerifiableProducer and VerifiableConsumers
in a classic and a KIP-848 group with kafka-consumer-groups, a Java transactional
producer with kafka-transactions, kafka-share-groups over a share group) run unchanged
against the cluster's bootstrap list."""

from __future__ import annotations

import uuid
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


def test_headwater_cluster_info(cluster: Cluster) -> None:
    """`headwater cluster info` on three brokers: all three, one controller among them,
    and the partitions each leads, the coordinator shards as placed (rendezvous)."""
    import json

    from tests.integration.test_cli_topics_vs_kafka import hw
    from tests.support.cluster import TOPICS, create, settled_coordinators, settled_leaders

    topic = f"info-{uuid.uuid4().hex[:8]}"
    create(cluster.bootstrap(1), topic, 6)
    settled_leaders(cluster, topic, 6)
    placed = settled_coordinators(cluster)
    found = json.loads(hw(cluster.bootstrap(2), "cluster", "info", "--json").stdout)
    assert [b["id"] for b in found["brokers"]] == [1, 2, 3]
    assert {b["port"] for b in found["brokers"]} == set(cluster.ports.values())
    assert found["controller"] in (1, 2, 3)
    led = {c["broker"]: c for c in found["partitions_led"]}
    assert set(led) == {1, 2, 3}
    for name in TOPICS:
        want = {n: sum(1 for (t, _p), owner in placed.items() if t == name and owner == n)
                for n in (1, 2, 3)}
        assert {n: led[n][name] for n in (1, 2, 3)} == want, name
    assert sum(c["partitions"] for c in led.values()) >= 6
    text = hw(cluster.bootstrap(3), "cluster", "info").stdout
    assert f"Controller {found['controller']}\n" in text and "Partitions led" in text


def test_headwater_group_and_transaction_commands_reach_every_coordinator(
        cluster: Cluster) -> None:
    """`headwater groups|share-groups|transactions`, bootstrapped from one broker, find
    groups and transactional ids coordinated on each of the three (FindCoordinator, and
    the lists asked of every broker), as Kafka's tools do."""
    import json

    from confluent_kafka import Consumer, Producer, TopicPartition

    from tests.integration.test_cli_topics_vs_kafka import hw
    from tests.support.cluster import create, key_on, settled_leaders

    topic = f"routed-{uuid.uuid4().hex[:8]}"
    create(cluster.bootstrap(1), topic, 3)
    settled_leaders(cluster, topic, 3)
    groups = {node: key_on(cluster, node, "routed") for node in (1, 2, 3)}
    for node, group in groups.items():
        c = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": group,
                      "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition(topic, 0, node)], asynchronous=False)
        c.close()
    txn_id = key_on(cluster, 3, "routed-txn", key_type=1)
    producer = Producer({"bootstrap.servers": cluster.bootstrap(),
                         "transactional.id": txn_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"open", partition=1)
    producer.flush(30)
    try:
        first = cluster.bootstrap(1)
        listed = json.loads(hw(first, "groups", "list", "--json").stdout)
        assert set(groups.values()) <= {g["group"] for g in listed}
        for node, group in groups.items():
            rows = json.loads(hw(first, "groups", "describe", group, "--json").stdout)
            got = {(r["topic"], r["partition"]): r["current_offset"] for r in rows}
            assert got == {(topic, 0): node}, (node, group, rows)
        txns = json.loads(hw(first, "transactions", "list", "--json").stdout)
        assert txn_id in {t["transactional_id"] for t in txns}
        described = json.loads(hw(first, "transactions", "describe", txn_id, "--json").stdout)
        assert described[0]["state"] == "Ongoing", described
    finally:
        producer.abort_transaction(30)


def test_java_copier_with_random_aborts_across_three_brokers(cluster: Cluster) -> None:
    """Kafka's TransactionalMessageCopier aborting at random, with its transaction's
    coordinator, its group's coordinator and its output partition's leader on three
    different brokers: every input is copied exactly once and the group commits to the
    end. The owner of the group's `__consumer_offsets` partition learns of each marker
    from PostgreSQL, after the coordinator (elsewhere) completed the transaction, and so
    possibly after the copier's next transaction wrote its offsets behind it."""
    from confluent_kafka import Producer

    from tests.integration.test_transactions import read_all
    from tests.integration.test_transactions_v2 import COPIER
    from tests.support.cluster import committed_offsets, create, key_on, settled_leaders
    from tests.support.kafka_reference import run_tool

    src, dst = f"copy-in-{uuid.uuid4().hex[:8]}", f"copy-out-{uuid.uuid4().hex[:8]}"
    create(cluster.bootstrap(1), src, 1)
    create(cluster.bootstrap(1), dst, 1)
    settled_leaders(cluster, src, 1)
    leader = settled_leaders(cluster, dst, 1)[0]
    txn_node = leader % 3 + 1
    group_node = ({1, 2, 3} - {leader, txn_node}).pop()
    txn_id = key_on(cluster, txn_node, "copier", key_type=1)
    group = key_on(cluster, group_node, "copier")
    p = Producer({"bootstrap.servers": cluster.bootstrap()})
    for i in range(400):
        p.produce(src, f"m{i}".encode(), partition=0)
    assert p.flush(30) == 0
    run_tool(COPIER, "--broker-list", cluster.bootstrap(), "--input-topic", src,
             "--input-partition", "0", "--output-topic", dst, "--transactional-id", txn_id,
             "--consumer-group", group, "--transaction-size", "20", "--max-messages", "400",
             "--use-group-metadata", "--enable-random-aborts", timeout=150)
    values = read_all(cluster.bootstrap(), dst, "read_committed", timeout=60)
    assert sorted(values) == sorted(f"m{i}" for i in range(400))
    assert committed_offsets(cluster.bootstrap(), group, src, 1) == {0: 400}
