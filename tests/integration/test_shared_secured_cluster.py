"""Three brokers secured as a Kafka operator secures them (issue 35): a SASL_SSL CLIENT
listener (PLAIN users admin, alice, bob), a separate INTERNAL SASL_SSL listener named in
`inter.broker.listener.name` on which the brokers log in to each other with SCRAM-SHA-256
(the password read through Kafka's file config provider, not given on a command line;
the controller writes the brokers' credential when the metadata has none), a PLAINTEXT
listener for anonymous clients, `authorizer.class.name` set with
`allow.everyone.if.no.acl.found=true`, `super.users=User:broker;User:admin`, and one ACL on
the cluster resource, so that no client but the admin and the brokers holds CLUSTER_ACTION.

Produce, consume, a transaction over partitions every broker leads, a classic, a KIP-848
and a share group, CreateTopics through a broker that is not the controller and Kafka's
tools with `--command-config` all work; a user without ACLs on a topic is refused; a client
(anonymous, or an ordinary user) sending the brokers' own requests (an Envelope naming a
super user, WriteTxnMarkers, WriteShareGroupState) is refused and nothing changes; a broker
with the wrong inter-broker password stops at start with one line naming the setting and is
never listed."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from headwater.wire.client import RawClient as SecuredClient
from headwater.wire.client import encode_request
from headwater.wire.client_security import ClientSecurity
from headwater.wire.codec import build
from headwater.wire.schemas import load_request_schema
from tests.support.cluster import Cluster, read_all, settled_leaders, start_cluster
from tests.support.engines import PostgresServer, VersityGateway
from tests.support.kafka_reference import run_tool
from tests.support.ports import free_port
from tests.support.secured import make_pki
from tests.support.wire import RawClient

pytestmark = [pytest.mark.timeout(300), pytest.mark.cluster_campaign(
    "three brokers of their own, SASL_SSL listeners, SCRAM between them, an authorizer")]

PARTITIONS = 6
BROKER_SECRET = "broker-scram-secret"
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
PLAIN_JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
              + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")
INTERNAL_JAAS_KEY = "listener.name.internal.scram-sha-256.sasl.jaas.config"
CLUSTER_AUTH = 31
WRITE_TXN_MARKERS, ENVELOPE, WRITE_SHARE_STATE, READ_SHARE_SUMMARY = 27, 58, 85, 87


class Secured:
    """The cluster and how clients reach it: each node's CLIENT port and the CA."""

    def __init__(self, cluster: Cluster, client_ports: dict[int, int], pki: Path) -> None:
        self.cluster = cluster
        self.client_ports = client_ports
        self.pki = pki

    def bootstrap(self, *nodes: int) -> str:
        return ",".join(f"127.0.0.1:{self.client_ports[n]}"
                        for n in (nodes or self.client_ports))

    def config(self, user: str = "alice", *nodes: int, **extra: Any) -> dict[str, Any]:
        """confluent-kafka's settings for `user` on the CLIENT listener."""
        return {"bootstrap.servers": self.bootstrap(*nodes), "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN", "sasl.username": user,
                "sasl.password": USERS[user], "ssl.ca.location": str(self.pki / "ca.pem"),
                **extra}

    def raw(self, node: int, user: str) -> SecuredClient:
        return SecuredClient("127.0.0.1", self.client_ports[node], timeout=30,
                             security=ClientSecurity("SASL_SSL", "PLAIN", user, USERS[user],
                                                     ca_location=str(self.pki / "ca.pem")))

    def command_config(self, user: str) -> Path:
        """Kafka's Java client properties for `user` (the tools' --command-config)."""
        path = self.cluster.base / f"{user}.properties"
        path.write_text(
            "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
            f'required username="{user}" password="{USERS[user]}";\n'
            f"ssl.truststore.type=PEM\nssl.truststore.location={self.pki / 'ca.pem'}\n")
        return path

    def controller(self) -> int:
        return int(AdminClient(self.config("admin")).list_topics(timeout=10).controller_id)


@pytest.fixture(scope="module")
def secured(postgres: PostgresServer, versitygw: VersityGateway,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    base = tmp_path_factory.mktemp("secured")
    pki = make_pki(base / "pki")  # a server certificate for 127.0.0.1, its CA
    secrets = base / "secrets.properties"
    secrets.write_text(f"broker.password={BROKER_SECRET}\n")
    secrets.chmod(0o600)
    client = {n: free_port() for n in (1, 2, 3)}
    inter = {n: free_port() for n in (1, 2, 3)}
    overrides = (
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found=true",
        "super.users=User:broker;User:admin",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CLIENT:SASL_SSL,"
        "INTERNAL:SASL_SSL",
        "inter.broker.listener.name=INTERNAL",
        "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256",
        "listener.name.internal.sasl.enabled.mechanisms=SCRAM-SHA-256",
        "listener.name.client.sasl.enabled.mechanisms=PLAIN",
        f"listener.name.client.plain.sasl.jaas.config={PLAIN_JAAS}",
        "config.providers=file",
        "config.providers.file.class="
        "org.apache.kafka.common.config.provider.FileConfigProvider",
        f"{INTERNAL_JAAS_KEY}=org.apache.kafka.common.security.scram.ScramLoginModule "
        f'required username="broker" password="${{file:{secrets}:broker.password}}";',
        f"ssl.keystore.location={pki / 'keystore.pem'}",
        f"ssl.truststore.location={pki / 'ca.pem'}",
    )

    def listeners(cluster: Cluster) -> None:
        for n in (1, 2, 3):
            cluster.per_node[n] = (
                f"listeners=PLAINTEXT://127.0.0.1:{cluster.ports[n]},"
                f"CLIENT://127.0.0.1:{client[n]},INTERNAL://127.0.0.1:{inter[n]}",)
    for cluster in start_cluster(postgres, versitygw, base, overrides=overrides,
                                 configure=listeners):
        s = Secured(cluster, client, pki)
        # An ACL on the cluster resource: the anonymous principal and the ordinary users
        # now hold no CLUSTER_ACTION (allow.everyone.if.no.acl.found no longer applies to
        # the cluster), as on any secured Kafka.
        admin = AdminClient(s.config("admin"))
        acl = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                         "User:admin", "*", AclOperation.ALTER, AclPermissionType.ALLOW)
        for future in admin.create_acls([acl]).values():
            future.result(30)
        yield s


def create(secured: Secured, topic: str, partitions: int, node: int | None = None) -> None:
    """CreateTopics as the admin, through `node` (any broker when None)."""
    nodes = () if node is None else (node,)
    admin = AdminClient(secured.config("admin", *nodes))
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def spread_topic(secured: Secured) -> str:
    """A new topic whose partitions are led by all three brokers (placement follows
    the topic's id: about one in four of six partitions' topics miss a broker)."""
    for _ in range(20):
        topic = f"secured-{uuid.uuid4().hex[:8]}"
        create(secured, topic, PARTITIONS)
        placed = settled_leaders(secured.cluster, topic, PARTITIONS)
        if len(set(placed.values())) == 3:
            return topic
    raise AssertionError("no topic of six partitions spread over the three brokers")


def produce(secured: Secured, topic: str, count: int, user: str = "alice",
            partitions: int = PARTITIONS) -> None:
    producer = Producer(secured.config(user, **{"enable.idempotence": True}))
    failed: list[str] = []
    for i in range(count):
        producer.produce(topic, str(i).encode(), partition=i % partitions,
                         on_delivery=lambda err, _m: err and failed.append(err.name()))
    assert producer.flush(60) == 0 and not failed, failed


def test_a_transaction_across_brokers_commits_every_partition(secured: Secured) -> None:
    """Its markers for the partitions other brokers lead travel as the brokers' own,
    SCRAM-authenticated, WriteTxnMarkers (sent anonymously they were refused, and a
    read_committed consumer saw 2 of 6 records)."""
    topic = spread_topic(secured)
    producer = Producer(secured.config("alice", **{"transactional.id": topic,
                                                   "enable.idempotence": True}))
    producer.init_transactions(30)
    producer.begin_transaction()
    for p in range(PARTITIONS):
        producer.produce(topic, f"v{p}".encode(), partition=p)
    producer.commit_transaction(60)

    got = read_all(secured.cluster.bootstrap(), topic, PARTITIONS, PARTITIONS)
    assert {p: [v for _o, v in records] for p, records in got.items()} == {
        p: [f"v{p}".encode()] for p in range(PARTITIONS)}


def consume(consumer: Consumer, want: int, timeout: float = 60.0) -> list[bytes]:
    got: list[bytes] = []
    errors: list[str] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None:
            if msg.error() is None:
                got.append(msg.value())
            else:
                errors.append(str(msg.error()))
    assert len(got) >= want, (got, errors[-5:])
    return got


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_consumer_group_reads_and_commits(secured: Secured, protocol: str) -> None:
    topic = spread_topic(secured)
    produce(secured, topic, 60)
    group = f"g-{protocol}-{uuid.uuid4().hex[:6]}"
    consumer = Consumer(secured.config("alice", **{
        "group.id": group, "group.protocol": protocol, "auto.offset.reset": "earliest",
        "enable.auto.commit": False}))
    try:
        consumer.subscribe([topic])
        got = consume(consumer, 60)
        assert sorted(int(v) for v in got) == list(range(60))
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    committed = Consumer(secured.config("alice", **{"group.id": group})).committed(
        [TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
    assert sum(tp.offset for tp in committed) == 60


def share_read(secured: Secured, topic: str, want: int) -> tuple[str, list[int]]:
    """A new share group reading `topic` from the earliest offset as alice: its name and
    the values it got (until `want` of them, or 60 s)."""
    group = f"sg-{uuid.uuid4().hex[:6]}"
    resource = ConfigResource("group", group, incremental_configs=[ConfigEntry(
        "share.auto.offset.reset", "earliest",
        incremental_operation=AlterConfigOpType.SET)])
    admin = AdminClient(secured.config("admin"))  # kept until the answer
    admin.incremental_alter_configs([resource])[resource].result(30)
    consumer = ShareConsumer(secured.config("alice", **{"group.id": group}))
    got: list[int] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(got) < want and time.monotonic() < deadline:
            got += [int(m.value()) for m in consumer.poll(0.5) or [] if m.error() is None]
    finally:
        consumer.close()
    return group, got


def test_a_share_group_reads_every_record_once(secured: Secured) -> None:
    topic = spread_topic(secured)
    produce(secured, topic, 60)
    _group, got = share_read(secured, topic, 60)
    assert sorted(got) == list(range(60))


def test_create_topics_through_a_broker_that_is_not_the_controller(
        secured: Secured) -> None:
    """The broker forwards it to the controller in an Envelope, as the broker
    principal, over the SCRAM listener."""
    controller = secured.controller()
    other = next(n for n in (1, 2, 3) if n != controller)
    topic = f"forwarded-{uuid.uuid4().hex[:8]}"
    client = secured.raw(other, "admin")
    try:
        answer = client.request(19, 7, {"topics": [
            {"name": topic, "num_partitions": 2, "replication_factor": 1,
             "assignments": [], "configs": []}], "timeout_ms": 30_000,
            "validate_only": False})
    finally:
        client.close()
    assert [(t.name, int(t.error_code)) for t in answer.topics] == [(topic, 0)]
    admin = AdminClient(secured.config("alice"))
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 2


def test_kafkas_tools_with_command_config(secured: Secured) -> None:
    topic = f"tools-{uuid.uuid4().hex[:8]}"
    admin_props = str(secured.command_config("admin"))
    boot = secured.bootstrap(2)

    def tool(main: str, *args: str, props: str = admin_props) -> str:
        out = run_tool(main, "--bootstrap-server", boot, "--command-config", props, *args,
                       timeout=90)
        return out.stdout

    tool("org.apache.kafka.tools.TopicCommand", "--create", "--topic", topic,
         "--partitions", "3")
    assert topic in tool("org.apache.kafka.tools.TopicCommand", "--list").split()
    tool("org.apache.kafka.tools.AclCommand", "--add", "--allow-principal", "User:alice",
         "--operation", "Read", "--operation", "Write", "--topic", topic)
    assert "User:alice" in tool("org.apache.kafka.tools.AclCommand", "--list",
                                "--topic", topic)
    produce(secured, topic, 6, partitions=3)
    group = f"tools-g-{uuid.uuid4().hex[:6]}"
    consumer = Consumer(secured.config("alice", **{"group.id": group,
                                                   "auto.offset.reset": "earliest"}))
    try:
        consumer.subscribe([topic])
        assert len(consume(consumer, 6)) == 6
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    described = tool("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
                     "--describe", "--group", group)
    assert topic in described and group in described
    shares = tool("org.apache.kafka.tools.consumer.group.ShareGroupCommand", "--list")
    assert "Error" not in shares


def test_a_user_without_acls_on_a_topic_is_refused(secured: Secured) -> None:
    topic = f"private-{uuid.uuid4().hex[:8]}"
    create(secured, topic, 1)
    admin = AdminClient(secured.config("admin"))
    acl = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice",
                     "*", AclOperation.ALL, AclPermissionType.ALLOW)
    for future in admin.create_acls([acl]).values():
        future.result(30)
    produce(secured, topic, 1, user="alice", partitions=1)
    errors: list[str] = []
    producer = Producer(secured.config("bob", **{"message.timeout.ms": 10_000}))
    producer.produce(topic, b"x", on_delivery=lambda err, _m: errors.append(
        err.name() if err else "ok"))
    producer.flush(30)
    assert errors == ["TOPIC_AUTHORIZATION_FAILED"]


def envelope(topic: str) -> dict[str, Any]:
    """An Envelope whose inner CreateTopics names the brokers' super user."""
    inner = encode_request(19, 7, build(load_request_schema(19, 7), {
        "topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1}],
        "timeout_ms": 10_000}), 7, "forger")[4:]
    return build(load_request_schema(ENVELOPE, 0), {
        "request_data": inner, "request_principal": b"User:broker",
        "client_host_address": b"\x7f\x00\x00\x01"})


def topic_id(secured: Secured, topic: str) -> uuid.UUID:
    client = secured.raw(1, "admin")
    try:
        answer = client.request(3, 12, {"topics": [{"name": topic, "topic_id": None}],
                                        "allow_auto_topic_creation": False,
                                        "include_topic_authorized_operations": False})
    finally:
        client.close()
    return uuid.UUID(str(answer.topics[0].topic_id))


def end_offset(secured: Secured, topic: str, partition: int) -> int:
    consumer = Consumer(secured.config("alice", **{"group.id": "watermarks"}))
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                  timeout=30)[1])
    finally:
        consumer.close()


def share_state(secured: Secured, group: str, topic_id: uuid.UUID) -> tuple[int, int]:
    """(error, start offset) of the share state of `group` on partition 0, read by the
    admin (a super user, who holds CLUSTER_ACTION)."""
    client = secured.raw(1, "admin")
    try:
        answer = client.request(READ_SHARE_SUMMARY, 1, {"group_id": group, "topics": [
            {"topic_id": topic_id, "partitions": [{"partition": 0, "leader_epoch": 0}]}]})
    finally:
        client.close()
    row = answer.results[0].partitions[0]
    return int(row.error_code), int(row.start_offset)


@pytest.mark.parametrize("who", ["anonymous", "bob"])
def test_the_brokers_own_requests_are_refused_to_clients(secured: Secured, who: str) -> None:
    """An Envelope (inner CreateTopics as User:broker), WriteTxnMarkers and
    WriteShareGroupState, sent by an anonymous client on PLAINTEXT or by an ordinary
    user on SASL_SSL to each broker: CLUSTER_AUTHORIZATION_FAILED, no topic, no marker,
    the share state as it was."""
    topic = spread_topic(secured)
    produce(secured, topic, 12)
    group, _got = share_read(secured, topic, 12)  # the group has share state
    tid = topic_id(secured, topic)
    before = share_state(secured, group, tid), end_offset(secured, topic, 0)
    forged = f"forged-{uuid.uuid4().hex[:8]}"
    for node in (1, 2, 3):
        client: Any = (RawClient("127.0.0.1", secured.cluster.ports[node], timeout=30)
                       if who == "anonymous" else secured.raw(node, who))
        try:
            answers = {
                "Envelope": client.request(ENVELOPE, 0, envelope(forged)),
                "WriteTxnMarkers": client.request(WRITE_TXN_MARKERS, 1, {"markers": [{
                    "producer_id": 999, "producer_epoch": 0, "transaction_result": True,
                    "topics": [{"name": topic, "partition_indexes": [0]}],
                    "coordinator_epoch": 0}]}),
                "WriteShareGroupState": client.request(WRITE_SHARE_STATE, 1, {
                    "group_id": group, "topics": [{"topic_id": tid, "partitions": [{
                        "partition": 0, "state_epoch": 0, "leader_epoch": 0,
                        "start_offset": 1000, "delivery_complete_count": 0,
                        "state_batches": []}]}]}),
            }
        finally:
            client.close()
        codes = {
            "Envelope": [int(answers["Envelope"].error_code)],
            "WriteTxnMarkers": [int(p.error_code) for m in answers["WriteTxnMarkers"].markers
                                for t in m.topics for p in t.partitions],
            "WriteShareGroupState": [int(p.error_code)
                                     for r in answers["WriteShareGroupState"].results
                                     for p in r.partitions],
        }
        assert codes == {name: [CLUSTER_AUTH] for name in codes}, (node, codes)
        assert answers["Envelope"].response_data is None
    assert forged not in AdminClient(secured.config("admin")).list_topics(timeout=10).topics
    # the share state as it was, and no marker written in partition 0
    assert (share_state(secured, group, tid), end_offset(secured, topic, 0)) == before


def test_a_broker_with_wrong_inter_broker_credentials_stops_naming_the_setting(
        secured: Secured) -> None:
    """It exits at start with one line naming where its credentials are, before it
    registers (it is never listed); the three keep serving. Last of the module."""
    cluster = secured.cluster
    wrong = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
             'username="broker" password="not-the-secret";')
    cluster.ports[4] = free_port()
    cluster.per_node[4] = (
        f"listeners=PLAINTEXT://127.0.0.1:{cluster.ports[4]},"
        f"CLIENT://127.0.0.1:{free_port()},INTERNAL://127.0.0.1:{free_port()}",
        f"{INTERNAL_JAAS_KEY}={wrong}")
    # every registration of node 4 noted by the database itself
    for statement in (
            "CREATE TABLE seen_brokers (node_id int)",
            "CREATE FUNCTION note_broker() RETURNS trigger AS $$ BEGIN "
            "INSERT INTO seen_brokers VALUES (NEW.node_id); RETURN NEW; END $$ "
            "LANGUAGE plpgsql",
            "CREATE TRIGGER note_broker AFTER INSERT OR UPDATE ON brokers FOR EACH ROW "
            "WHEN (NEW.node_id = 4) EXECUTE FUNCTION note_broker()"):
        cluster.fetch(statement)
    try:
        with pytest.raises(RuntimeError, match="broker exited with") as failed:
            cluster.start(4)
    finally:
        cluster.brokers.pop(4).kill()
        del cluster.ports[4]
        cluster.fetch("DROP TRIGGER note_broker ON brokers")
    assert INTERNAL_JAAS_KEY in str(failed.value)
    assert "not-the-secret" not in str(failed.value)  # the secret is not logged
    assert cluster.fetchval("SELECT count(*) FROM seen_brokers") == 0  # never listed
    create(secured, f"after-{uuid.uuid4().hex[:8]}", 3)  # the three still serve
