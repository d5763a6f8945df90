"""Three brokers whose traffic to each other goes over a SASL_SSL inter-broker listener,
with an authorizer on (issue 35's first user): a PLAINTEXT client listener, an INTERNAL
SASL_SSL one (TLS from a throwaway CA, PLAIN) named in `inter.broker.listener.name`,
`authorizer.class.name` set,
`allow.everyone.if.no.acl.found=true` and one ACL on the cluster resource, so the
anonymous principal holds no CLUSTER_ACTION, as on any secured Kafka; the brokers'
principal is a super user.

A transaction over six partitions spread over the three brokers commits every one of
them (its markers for the partitions other brokers lead travel as the brokers' own,
authenticated, WriteTxnMarkers: sent anonymously they were refused, and a read_committed
consumer saw 2 of 6 records); an ACL created through a broker that is not the
controller is forwarded to it (an Envelope from the broker principal); a client that is
not a broker is refused WriteTxnMarkers."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from headwater.wire.client import encode_request
from headwater.wire.codec import build
from headwater.wire.schemas import load_request_schema
from tests.support.cluster import Cluster, create, read_all, settled_leaders, start_cluster
from tests.support.engines import PostgresServer, VersityGateway
from tests.support.ports import free_port
from tests.support.secured import make_pki
from tests.support.wire import RawClient

pytestmark = [pytest.mark.timeout(240), pytest.mark.cluster_campaign(
    "three brokers of their own, a SASL inter-broker listener and an authorizer")]

PARTITIONS = 6
SECRET = "broker-secret"
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="broker" password="{SECRET}" user_broker="{SECRET}";')
SECURED = (
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found=true",
    "super.users=User:broker",
    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
    "inter.broker.listener.name=INTERNAL",
    "sasl.mechanism.inter.broker.protocol=PLAIN",
    f"listener.name.internal.plain.sasl.jaas.config={JAAS}",
)
WRITE_TXN_MARKERS = 27


@pytest.fixture(scope="module")
def secured(postgres: PostgresServer, versitygw: VersityGateway,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("secured")
    pki = make_pki(base / "pki")  # a server certificate for 127.0.0.1, its CA
    tls = (f"listener.name.internal.ssl.keystore.location={pki / 'keystore.pem'}",
           f"listener.name.internal.ssl.truststore.location={pki / 'ca.pem'}")
    inter = {n: free_port() for n in (1, 2, 3)}

    def listeners(cluster: Cluster) -> None:
        for n in (1, 2, 3):
            cluster.per_node[n] = (
                f"listeners=PLAINTEXT://127.0.0.1:{cluster.ports[n]},"
                f"INTERNAL://127.0.0.1:{inter[n]}",)
    yield from start_cluster(postgres, versitygw, base, overrides=(*SECURED, *tls),
                             configure=listeners)


def spread_topic(cluster: Cluster) -> str:
    """A new topic whose partitions are led by all three brokers (placement follows
    the topic's id: about one in four of six partitions' topics miss a broker)."""
    for _ in range(20):
        topic = f"secured-{uuid.uuid4().hex[:8]}"
        create(cluster.bootstrap(), topic, PARTITIONS)
        placed = settled_leaders(cluster, topic, PARTITIONS)
        if len(set(placed.values())) == 3:
            return topic
    raise AssertionError("no topic of six partitions spread over the three brokers")


def test_a_transaction_across_brokers_commits_every_partition(secured: Cluster) -> None:
    bootstrap = secured.bootstrap()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    # An ACL on the cluster resource: the anonymous principal now holds no CLUSTER_ACTION
    # (allow.everyone.if.no.acl.found no longer applies to the cluster). Created through
    # broker 2 or 3 when broker 1 is the controller: forwarded in an Envelope.
    acl = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                     "User:admin", "*", AclOperation.ALTER, AclPermissionType.ALLOW)
    for future in admin.create_acls([acl]).values():
        future.result(30)
    topic = spread_topic(secured)  # the transaction crosses all three brokers

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic,
                         "enable.idempotence": True})
    producer.init_transactions(30)
    producer.begin_transaction()
    for p in range(PARTITIONS):
        producer.produce(topic, f"v{p}".encode(), partition=p)
    producer.commit_transaction(60)

    got = read_all(bootstrap, topic, PARTITIONS, PARTITIONS)  # read_committed
    assert {p: [v for _o, v in records] for p, records in got.items()} == {
        p: [f"v{p}".encode()] for p in range(PARTITIONS)}


def test_a_client_that_is_not_a_broker_is_refused_write_txn_markers(secured: Cluster) -> None:
    client = RawClient("127.0.0.1", secured.ports[2], timeout=30)
    try:
        answer = client.request(WRITE_TXN_MARKERS, 1, {"markers": [{
            "producer_id": 999, "producer_epoch": 0, "transaction_result": True,
            "topics": [{"name": "__consumer_offsets", "partition_indexes": [0]}],
            "coordinator_epoch": 0}]})
    finally:
        client.close()
    codes = [p.error_code for m in answer.markers for t in m.topics for p in t.partitions]
    assert codes == [31]  # CLUSTER_AUTHORIZATION_FAILED


@pytest.mark.parametrize("node", [1, 2, 3])
def test_an_envelope_from_a_client_is_refused_whatever_principal_it_names(
        secured: Cluster, node: int) -> None:
    """A forged Envelope on the client listener, its inner CreateTopics naming the
    brokers' super user: CLUSTER_AUTHORIZATION_FAILED, and no topic."""
    topic = f"forged-{uuid.uuid4().hex[:8]}"
    inner = encode_request(19, 7, build(load_request_schema(19, 7), {
        "topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1}],
        "timeout_ms": 10_000}), 7, "forger")[4:]
    client = RawClient("127.0.0.1", secured.ports[node], timeout=30)
    try:
        answer = client.request(58, 0, build(load_request_schema(58, 0), {
            "request_data": inner, "request_principal": b"User:broker",
            "client_host_address": b"\x7f\x00\x00\x01"}))
    finally:
        client.close()
    assert answer.error_code == 31 and answer.response_data is None
    admin = AdminClient({"bootstrap.servers": secured.bootstrap()})
    assert topic not in admin.list_topics(timeout=10).topics


def test_a_broker_with_wrong_inter_broker_credentials_stops_naming_the_setting(
        secured: Cluster) -> None:
    """It exits at start with one line naming where its credentials are; the three
    keep serving. (Last of the module: the refused broker was listed for a moment.)"""
    wrong = JAAS.replace(f'password="{SECRET}"', 'password="not-the-secret"')
    secured.ports[4] = free_port()
    secured.per_node[4] = (
        f"listeners=PLAINTEXT://127.0.0.1:{secured.ports[4]},INTERNAL://127.0.0.1:{free_port()}",
        f"listener.name.internal.plain.sasl.jaas.config={wrong}")
    try:
        with pytest.raises(RuntimeError, match="broker exited with") as failed:
            secured.start(4)
    finally:
        secured.brokers.pop(4).kill()
        del secured.ports[4]
    assert "listener.name.internal.plain.sasl.jaas.config" in str(failed.value)
    assert "not-the-secret" not in str(failed.value)  # the secret is not logged
    # the three still serve
    topic = f"after-{uuid.uuid4().hex[:8]}"
    create(secured.bootstrap(1, 2, 3), topic, 3)
