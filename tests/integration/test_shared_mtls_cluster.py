"""Three brokers whose identity to each other is their TLS certificate (issue 35): an
INTERNAL listener of protocol SSL with `ssl.client.auth=required`, its principal the
certificate's subject as Kafka's default principal builder gives it (`User:CN=localhost`,
in `super.users`), an authorizer on and one ACL on the cluster resource, so that no
client holds CLUSTER_ACTION. Every broker-to-broker request (forwarded changes, markers)
is authorized by the certificate; a client with a certificate the CA did not sign is
refused at the handshake; a client with one it did sign, but another subject, is not a
broker."""

from __future__ import annotations

import ssl
import uuid
from collections.abc import Iterator
from pathlib import Path

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

from headwater.wire.client import RawClient
from headwater.wire.client_security import ClientSecurity
from tests.support.cluster import Cluster, create, read_all, settled_leaders, start_cluster
from tests.support.engines import PostgresServer, VersityGateway
from tests.support.ports import free_port
from tests.support.secured import make_pki

pytestmark = [pytest.mark.timeout(240), pytest.mark.cluster_campaign(
    "three brokers of their own, known to each other by their certificates")]

PARTITIONS = 6
WRITE_TXN_MARKERS = 27


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_pki(tmp_path_factory.mktemp("mtls-pki"))


@pytest.fixture(scope="module")
def mtls(postgres: PostgresServer, versitygw: VersityGateway, pki: Path,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, dict[int, int]]]:
    base = tmp_path_factory.mktemp("mtls")
    inter = {n: free_port() for n in (1, 2, 3)}
    overrides = (
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found=true",
        "super.users=User:CN=localhost",  # the brokers' certificate (keystore.pem)
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:SSL",
        "inter.broker.listener.name=INTERNAL",
        "listener.name.internal.ssl.client.auth=required",
        f"listener.name.internal.ssl.keystore.location={pki / 'keystore.pem'}",
        f"listener.name.internal.ssl.truststore.location={pki / 'ca.pem'}",
    )

    def listeners(cluster: Cluster) -> None:
        for n in (1, 2, 3):
            cluster.per_node[n] = (f"listeners=PLAINTEXT://127.0.0.1:{cluster.ports[n]},"
                                   f"INTERNAL://127.0.0.1:{inter[n]}",)
    for cluster in start_cluster(postgres, versitygw, base, overrides=overrides,
                                 configure=listeners):
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
        acl = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                         "User:admin", "*", AclOperation.ALTER, AclPermissionType.ALLOW)
        for future in admin.create_acls([acl]).values():  # forwarded when not controller
            future.result(30)
        yield cluster, inter


def test_a_transaction_across_brokers_commits_every_partition(
        mtls: tuple[Cluster, dict[int, int]]) -> None:
    cluster, _inter = mtls
    for _ in range(20):
        topic = f"mtls-{uuid.uuid4().hex[:8]}"
        create(cluster.bootstrap(), topic, PARTITIONS)
        if len(set(settled_leaders(cluster, topic, PARTITIONS).values())) == 3:
            break
    else:
        raise AssertionError("no topic of six partitions spread over the three brokers")
    producer = Producer({"bootstrap.servers": cluster.bootstrap(), "transactional.id": topic,
                         "enable.idempotence": True})
    producer.init_transactions(30)
    producer.begin_transaction()
    for p in range(PARTITIONS):
        producer.produce(topic, f"v{p}".encode(), partition=p)
    producer.commit_transaction(60)
    got = read_all(cluster.bootstrap(), topic, PARTITIONS, PARTITIONS)
    assert {p: [v for _o, v in records] for p, records in got.items()} == {
        p: [f"v{p}".encode()] for p in range(PARTITIONS)}


def test_a_certificate_of_another_subject_is_not_a_broker(
        mtls: tuple[Cluster, dict[int, int]], pki: Path) -> None:
    """client.pem (CN=app, signed by the same CA) is let in on INTERNAL, as User:CN=app,
    which holds no CLUSTER_ACTION: WriteTxnMarkers is refused."""
    _cluster, inter = mtls
    client = RawClient("127.0.0.1", inter[2], timeout=30, security=ClientSecurity(
        "SSL", ca_location=str(pki / "ca.pem"), certificate_location=str(pki / "client.pem")))
    try:
        answer = client.request(WRITE_TXN_MARKERS, 1, {"markers": [{
            "producer_id": 999, "producer_epoch": 0, "transaction_result": True,
            "topics": [{"name": "__consumer_offsets", "partition_indexes": [0]}],
            "coordinator_epoch": 0}]})
    finally:
        client.close()
    assert [p.error_code for m in answer.markers for t in m.topics
            for p in t.partitions] == [31]


def test_a_client_without_a_certificate_is_refused_at_the_handshake(
        mtls: tuple[Cluster, dict[int, int]], pki: Path) -> None:
    _cluster, inter = mtls
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        client = RawClient("127.0.0.1", inter[1], timeout=10, security=ClientSecurity(
            "SSL", ca_location=str(pki / "ca.pem")))
        try:  # TLS 1.3: the server's refusal arrives with the first read
            client.request(18, 3, {"client_software_name": "t",
                                   "client_software_version": "1"})
        finally:
            client.close()
