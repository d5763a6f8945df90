"""ACLs with Kafka's semantics: `kafka-acls` adds, lists and removes them (and they
survive a restart); for every API family a principal without the ACL gets Kafka's error
and, once the ACL is added, succeeds (a table over raw requests); unmodified clients
over SASL see the same."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
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

from headwater.records.batch import build_batch
from tests.support.broker_process import BrokerProcess, free_port
from tests.support.kafka_reference import KafkaReference, run_tool
from tests.support.wire import RawClient

pytestmark = pytest.mark.timeout(300)

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";')
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
TOPIC, GROUP, CLUSTER, TXN = 2, 3, 4, 5
LITERAL, PREFIXED = 3, 4
(ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS,
 ALTER_CONFIGS) = range(2, 12)
ANONYMOUS = "User:ANONYMOUS"


class AclBroker:
    """PLAINTEXT (principal User:ANONYMOUS, for raw requests) and SASL_PLAINTEXT
    listeners; User:admin is a super user."""

    def __init__(self, data_dir: Path) -> None:
        self.plain, self.sasl = free_port(), free_port()
        self.proc = BrokerProcess(
            data_dir, "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{self.plain},"
            f"SASL_PLAINTEXT://127.0.0.1:{self.sasl}",
            "--override", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}",
            "--override", f"authorizer.class.name={STANDARD}",
            "--override", "super.users=User:admin",
            # a snapshot after every change: restarts load ACLs from one
            "--override", "metadata.log.max.record.bytes.between.snapshots=1",
            port=self.plain)

    def conf(self, user: str) -> dict:
        return {"bootstrap.servers": f"127.0.0.1:{self.sasl}", "security.protocol":
                "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": user,
                "sasl.password": f"{user}-secret"}

    def admin(self) -> AdminClient:
        return AdminClient(self.conf("admin"))

    def allow(self, principal: str, rtype: int, name: str, op: int,
              pattern: int = LITERAL) -> None:
        binding = AclBinding(ResourceType(rtype), name, ResourcePatternType(pattern),
                             principal, "*", AclOperation(op), AclPermissionType.ALLOW)
        admin = self.admin()  # kept alive until its futures are done
        for future in admin.create_acls([binding], request_timeout=20).values():
            future.result(30)


@pytest.fixture
def acl_broker(tmp_path: Path):
    broker = AclBroker(tmp_path / "data")
    broker.proc.start()
    yield broker
    broker.proc.kill()


def command_config(tmp_path: Path, user: str) -> Path:
    path = tmp_path / f"{user}.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule"
                    f' required username="{user}" password="{user}-secret";\n')
    return path


def kafka_acls(broker: AclBroker, config: Path, *args: str, check: bool = True) -> str:
    return run_tool("kafka-acls", "--bootstrap-server", f"127.0.0.1:{broker.sasl}",
                    "--command-config", str(config), *args, timeout=90, check=check).stdout


def test_kafka_acls_adds_lists_removes_and_acls_survive_a_restart(acl_broker: AclBroker,
                                                                   tmp_path: Path) -> None:
    admin = command_config(tmp_path, "admin")
    out = kafka_acls(acl_broker, admin, "--add", "--allow-principal", "User:alice",
                     "--operation", "Read", "--operation", "Describe", "--topic", "orders",
                     "--group", "app-", "--resource-pattern-type", "prefixed")
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, " \
           "patternType=PREFIXED)`" in out
    kafka_acls(acl_broker, admin, "--add", "--deny-principal", "User:bob", "--operation",
               "All", "--topic", "*")
    listed = kafka_acls(acl_broker, admin, "--list")
    for line in ("(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)",
                 "(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)",
                 "(principal=User:bob, host=*, operation=ALL, permissionType=DENY)",
                 "ResourcePattern(resourceType=GROUP, name=app-, patternType=PREFIXED)"):
        assert line in listed
    snapshots = list((acl_broker.proc.data_dir / "__cluster_metadata-0").glob("*.checkpoint"))
    assert snapshots, "the restart below starts from a snapshot"
    acl_broker.proc.restart()
    assert sorted(kafka_acls(acl_broker, admin, "--list").splitlines()) == \
        sorted(listed.splitlines())
    kafka_acls(acl_broker, admin, "--remove", "--force", "--allow-principal", "User:alice",
               "--operation", "Read", "--topic", "orders", "--resource-pattern-type",
               "prefixed")
    after = kafka_acls(acl_broker, admin, "--list", "--topic", "orders",
                       "--resource-pattern-type", "prefixed")
    assert "operation=DESCRIBE" in after and "operation=READ" not in after
    # A user who is not a super user may not manage ACLs.
    bob = kafka_acls(acl_broker, command_config(tmp_path, "bob"), "--list", check=False)
    assert "ClusterAuthorizationException: Cluster authorization failed." in bob


def test_clients_over_sasl_get_what_their_acls_allow(acl_broker: AclBroker) -> None:
    admin = acl_broker.admin()
    for future in admin.create_topics([NewTopic("orders-eu", 1, 1),
                                       NewTopic("payments", 1, 1)]).values():
        future.result(30)
    acl_broker.allow("User:alice", TOPIC, "orders-", WRITE, PREFIXED)
    acl_broker.allow("User:alice", TOPIC, "orders-", READ, PREFIXED)
    acl_broker.allow("User:alice", GROUP, "alice-app", READ)

    errors: list[KafkaError | None] = []
    for user, topic in (("alice", "orders-eu"), ("alice", "payments"), ("bob", "orders-eu")):
        producer = Producer({**acl_broker.conf(user), "message.timeout.ms": 10_000,
                             "message.send.max.retries": 0})
        producer.produce(topic, b"v", on_delivery=lambda err, _m: errors.append(err))
        producer.flush(30)
    assert errors[0] is None
    assert [e.code() for e in errors[1:]] == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 2

    # Metadata: alice sees only what she may describe (READ/WRITE imply DESCRIBE).
    seen = AdminClient(acl_broker.conf("alice")).list_topics(timeout=20).topics
    assert "orders-eu" in seen and "payments" not in seen
    assert "orders-eu" not in AdminClient(acl_broker.conf("bob")).list_topics(
        timeout=20).topics

    consumer = Consumer({**acl_broker.conf("alice"), "group.id": "alice-app",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["orders-eu"])
    got = []
    deadline = time.monotonic() + 60
    while not got and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.commit(asynchronous=False)
    consumer.close()
    assert got == [b"v"]

    # bob may not join alice's group
    consumer = Consumer({**acl_broker.conf("bob"), "group.id": "alice-app"})
    consumer.subscribe(["orders-eu"])
    failure = None
    deadline = time.monotonic() + 30
    while failure is None and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is not None:
            failure = msg.error().code()
    consumer.close()
    assert failure in (KafkaError.GROUP_AUTHORIZATION_FAILED,
                       KafkaError.TOPIC_AUTHORIZATION_FAILED)

    # the ACLs are AclBindings to the admin API as well
    described = admin.describe_acls(AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice", None,
        AclOperation.ANY, AclPermissionType.ANY), request_timeout=20).result(30)
    assert len(described) == 3


def code_of(resp: object, path: str) -> int:
    value = resp
    for part in path.split("."):
        value = value[int(part)] if part.isdigit() else getattr(value, part)
    return int(value)


def _rows(now: int) -> list[tuple]:
    """(family, ACLs that allow it, api key, version, body, where the error code is,
    the code without them, the codes accepted with them)."""
    batch = build_batch([(b"k", b"v", [], now)])
    topic_auth, group_auth, cluster_auth, txn_auth = 29, 30, 31, 53
    return [
        ("Metadata", [(TOPIC, "acl-t", DESCRIBE)], 3, 12,
         {"topics": [{"name": "acl-t", "topic_id": None}], "allow_auto_topic_creation": False,
          "include_topic_authorized_operations": False}, "topics.0.error_code",
         topic_auth, {0}),
        ("Produce", [(TOPIC, "acl-t", WRITE)], 0, 9,
         {"acks": -1, "timeout": 5000, "topic_data": [
             {"name": "acl-t", "partition_data": [{"index": 0, "records": batch}]}]},
         "responses.0.partition_responses.0.error_code", topic_auth, {0}),
        ("Fetch", [(TOPIC, "acl-t", READ)], 1, 12,
         {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
          "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
          "forgotten_topics_data": [], "topics": [{"topic": "acl-t", "partitions": [
              {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
               "last_fetched_epoch": -1, "log_start_offset": -1,
               "partition_max_bytes": 1 << 20}]}]},
         "responses.0.partitions.0.error_code", topic_auth, {0}),
        ("ListOffsets", [], 2, 7,
         {"replica_id": -1, "isolation_level": 0, "topics": [{"name": "acl-t", "partitions": [
             {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]},
         "topics.0.partitions.0.error_code", None, {0}),  # DESCRIBE is implied by READ
        ("CreateTopics", [(TOPIC, "acl-new", CREATE)], 19, 7,
         {"topics": [{"name": "acl-new", "num_partitions": 1, "replication_factor": 1,
                      "assignments": [], "configs": []}], "timeout": 10000,
          "validate_only": False}, "topics.0.error_code", topic_auth, {0}),
        ("CreatePartitions", [(TOPIC, "acl-t", ALTER)], 37, 3,
         {"topics": [{"name": "acl-t", "count": 2, "assignments": None}], "timeout": 10000,
          "validate_only": False}, "results.0.error_code", topic_auth, {0}),
        ("DeleteRecords", [(TOPIC, "acl-t", DELETE)], 21, 2,
         {"topics": [{"name": "acl-t", "partitions": [{"partition_index": 0, "offset": 0}]}],
          "timeout": 10000}, "topics.0.partitions.0.error_code", topic_auth, {0}),
        ("DescribeConfigs", [(TOPIC, "acl-t", DESCRIBE_CONFIGS)], 32, 4,
         {"resources": [{"resource_type": 2, "resource_name": "acl-t",
                         "configuration_keys": None}], "include_synonyms": False,
          "include_documentation": False}, "results.0.error_code", topic_auth, {0}),
        ("IncrementalAlterConfigs", [(TOPIC, "acl-t", ALTER_CONFIGS)], 44, 1,
         {"resources": [{"resource_type": 2, "resource_name": "acl-t", "configs": [
             {"name": "retention.ms", "config_operation": 0, "value": "3600000"}]}],
          "validate_only": False}, "responses.0.error_code", topic_auth, {0}),
        ("FindCoordinator", [(GROUP, "acl-g", DESCRIBE)], 10, 4,
         {"key_type": 0, "coordinator_keys": ["acl-g"]}, "coordinators.0.error_code",
         group_auth, {0}),
        ("OffsetFetch", [], 9, 8,
         {"groups": [{"group_id": "acl-g", "topics": None}], "require_stable": False},
         "groups.0.error_code", None, {0}),  # DESCRIBE on the group: granted above
        ("OffsetCommit", [(GROUP, "acl-g", READ)], 8, 8,
         {"group_id": "acl-g", "generation_id_or_member_epoch": -1, "member_id": "",
          "group_instance_id": None, "topics": [{"name": "acl-t", "partitions": [
              {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
               "committed_metadata": None}]}]},
         "topics.0.partitions.0.error_code", group_auth, {0}),
        ("DescribeGroups", [], 15, 5,
         {"groups": ["acl-g"], "include_authorized_operations": True},
         "groups.0.error_code", None, {0}),
        ("DeleteGroups", [(GROUP, "acl-g", DELETE)], 42, 2, {"groups_names": ["acl-g"]},
         "results.0.error_code", group_auth, {0}),
        ("ShareGroupHeartbeat", [(GROUP, "acl-sg", READ)], 76, 1,
         {"group_id": "acl-sg", "member_id": "m-1234567890123456789012", "member_epoch": 0,
          "rack_id": None, "subscribed_topic_names": ["acl-t"]}, "error_code", group_auth,
         {0}),
        ("InitProducerId (transactional)", [(TXN, "acl-tx", WRITE)], 22, 4,
         {"transactional_id": "acl-tx", "transaction_timeout": 60000, "producer_id": -1,
          "producer_epoch": -1}, "error_code", txn_auth, {0}),
        ("AddPartitionsToTxn", [(TOPIC, "acl-t2", WRITE)], 24, 3,
         {"v3_and_below_transactional_id": "acl-tx", "v3_and_below_producer_id": 0,
          "v3_and_below_producer_epoch": 0, "v3_and_below_topics": [
              {"name": "acl-t2", "partitions": [0]}]},
         "results_by_topic_v3_and_below.0.results_by_partition.0.partition_error_code",
         topic_auth, {0}),
        ("DescribeLogDirs", [(CLUSTER, "kafka-cluster", DESCRIBE)], 35, 4, {"topics": None},
         "error_code", cluster_auth, {0}),
        ("CreateAcls", [(CLUSTER, "kafka-cluster", ALTER)], 30, 3, {"creations": [
            {"resource_type": TOPIC, "resource_name": "x", "resource_pattern_type": LITERAL,
             "principal": "User:carol", "host": "*", "operation": READ,
             "permission_type": 3}]}, "results.0.error_code", cluster_auth, {0}),
        ("DescribeClientQuotas", [(CLUSTER, "kafka-cluster", DESCRIBE_CONFIGS)], 48, 1,
         {"components": [], "strict": False}, "error_code", cluster_auth, {0}),
        ("WriteTxnMarkers", [(CLUSTER, "kafka-cluster", CLUSTER_ACTION)], 27, 1,
         {"markers": [{"producer_id": 999, "producer_epoch": 0, "transaction_result": False,
                       "topics": [{"name": "acl-t", "partition_indexes": [0]}],
                       "coordinator_epoch": 0}]},
         "markers.0.topics.0.partitions.0.error_code", cluster_auth, {0}),
    ]


def test_every_api_family_needs_its_acl(acl_broker: AclBroker) -> None:
    """Principal User:ANONYMOUS (the PLAINTEXT listener): each family is refused with
    Kafka's error, then allowed once the ACL Kafka asks for is added."""
    admin = acl_broker.admin()
    for future in admin.create_topics([NewTopic("acl-t", 1, 1),
                                       NewTopic("acl-t2", 1, 1)]).values():
        future.result(30)
    raw = RawClient("127.0.0.1", acl_broker.plain)
    outcomes = {}
    try:
        for family, acls, key, version, body, where, denied, ok in _rows(
                int(time.time() * 1000)):
            if denied is not None:
                outcomes[(family, "without")] = code_of(raw.request(key, version, body),
                                                        where)
            for rtype, name, op in acls:
                acl_broker.allow(ANONYMOUS, rtype, name, op)
            got = code_of(raw.request(key, version, body), where)
            outcomes[(family, "with")] = got if got not in ok else "ok"
    finally:
        raw.close()
    expected = {}
    for family, _acls, _k, _v, _b, _w, denied, _ok in _rows(0):
        if denied is not None:
            expected[(family, "without")] = denied
        expected[(family, "with")] = "ok"
    assert outcomes == expected


def test_deny_wins_and_super_users_pass(acl_broker: AclBroker) -> None:
    admin = acl_broker.admin()
    admin.create_topics([NewTopic("deny-t", 1, 1)])["deny-t"].result(30)
    acl_broker.allow(ANONYMOUS, TOPIC, "*", ALL)
    binding = AclBinding(ResourceType.TOPIC, "deny-", ResourcePatternType.PREFIXED,
                         ANONYMOUS, "*", AclOperation.WRITE, AclPermissionType.DENY)
    admin.create_acls([binding])[binding].result(30)
    raw = RawClient("127.0.0.1", acl_broker.plain)
    try:
        batch = build_batch([(b"k", b"v", [], int(time.time() * 1000))])
        produce = raw.request(0, 9, {"acks": -1, "timeout": 5000, "topic_data": [
            {"name": "deny-t", "partition_data": [{"index": 0, "records": batch}]}]})
        metadata = raw.request(3, 12, {"topics": [{"name": "deny-t", "topic_id": None}],
                                       "allow_auto_topic_creation": False,
                                       "include_topic_authorized_operations": True})
    finally:
        raw.close()
    assert code_of(produce, "responses.0.partition_responses.0.error_code") == 29
    topic = metadata.topics[0]
    assert int(topic.error_code) == 0
    ops = int(topic.topic_authorized_operations)
    assert ops & (1 << READ) and not ops & (1 << WRITE)
    # admin (a super user) writes regardless of the DENY
    producer = Producer(acl_broker.conf("admin"))
    errors = []
    producer.produce("deny-t", b"v", on_delivery=lambda err, _m: errors.append(err))
    producer.flush(30)
    assert errors == [None]


def test_an_acl_removed_mid_session_stops_the_fetches(acl_broker: AclBroker) -> None:
    """librdkafka keeps an incremental fetch session; the partitions in it are checked
    again on every fetch, as Kafka does."""
    admin = acl_broker.admin()
    admin.create_topics([NewTopic("revoke-t", 1, 1)])["revoke-t"].result(30)
    acl_broker.allow("User:alice", TOPIC, "revoke-t", READ)
    acl_broker.allow("User:alice", GROUP, "revoke-g", READ)
    producer = Producer(acl_broker.conf("admin"))
    producer.produce("revoke-t", b"before")
    producer.flush(30)
    consumer = Consumer({**acl_broker.conf("alice"), "group.id": "revoke-g",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["revoke-t"])
    seen, errors = [], []
    deadline = time.monotonic() + 60
    while not seen and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            seen.append(msg.value())
    assert seen == [b"before"]
    flt = AclBindingFilter(ResourceType.TOPIC, "revoke-t", ResourcePatternType.LITERAL,
                           "User:alice", None, AclOperation.READ, AclPermissionType.ALLOW)
    admin.delete_acls([flt])[flt].result(30)

    def poll_until(stop: float, until_error: bool = False) -> None:
        while time.monotonic() < stop and not (until_error and errors):
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error() is None:
                seen.append(msg.value())
            else:
                errors.append(msg.error().code())

    # The session's next fetch is refused (a fetch parked before the removal may still
    # answer, as in Kafka: so nothing is produced until the refusal is seen) ...
    poll_until(time.monotonic() + 60, until_error=True)
    assert KafkaError.TOPIC_AUTHORIZATION_FAILED in errors
    # ... and from then on nothing more is read.
    producer.produce("revoke-t", b"after")
    producer.flush(30)
    poll_until(time.monotonic() + 3)
    consumer.close()
    assert seen == [b"before"]


def test_share_fetch_answers_per_partition_for_topics_without_read(acl_broker: AclBroker
                                                                     ) -> None:
    """A member may DESCRIBE the topic (so it joins and is assigned) but not READ it: its
    ShareFetch answers TOPIC_AUTHORIZATION_FAILED for that partition, then serves it
    once READ is granted."""
    from tests.integration.test_share_fetch import Member, acquired, partition_errors

    admin = acl_broker.admin()
    admin.create_topics([NewTopic("share-t", 1, 1)])["share-t"].result(30)
    producer = Producer(acl_broker.conf("admin"))
    for i in range(5):
        producer.produce("share-t", b"%d" % i)
    producer.flush(30)
    acl_broker.allow(ANONYMOUS, GROUP, "share-g", READ)
    acl_broker.allow(ANONYMOUS, TOPIC, "share-t", DESCRIBE)
    raw = RawClient("127.0.0.1", acl_broker.plain)
    try:
        meta = raw.request(3, 12, {"topics": [{"name": "share-t", "topic_id": None}],
                                   "allow_auto_topic_creation": False,
                                   "include_topic_authorized_operations": False})
    finally:
        raw.close()
    acl_broker.allow(ANONYMOUS, GROUP, "share-g", DESCRIBE)
    resource = ConfigResource("GROUP", "share-g", incremental_configs=[ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)
    member = Member(acl_broker.plain, "share-g", "m-acl-0123456789012345678",
                    meta.topics[0].topic_id, join="share-t")
    try:
        refused = member.fetch(wait_ms=0)
        assert partition_errors(refused)[0][0] == 29 and acquired(refused) == []
        acl_broker.allow(ANONYMOUS, TOPIC, "share-t", READ)
        got: list = []
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            got = acquired(member.fetch(wait_ms=500))
        assert got == [(0, 0, 4, 1)]
    finally:
        member.close()


def secured_kafka(kafka: KafkaReference, sasl: int) -> None:
    """Kafka as `AclBroker` is set up: a PLAINTEXT listener (User:ANONYMOUS), a SASL PLAIN
    one, Kafka's own connections as the super user User:admin."""
    plain = kafka.port
    jaas = JAAS.replace("required ", 'required username="admin" password="admin-secret" ')
    kafka.overrides += [
        f"listeners=PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl},"
        f"CONTROLLER://127.0.0.1:{kafka.controller_port}",
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{plain},"
        f"SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "listener.security.protocol.map=CONTROLLER:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT,"
        "SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name=SASL_PLAINTEXT",
        "sasl.enabled.mechanisms=PLAIN",
        "sasl.mechanism.inter.broker.protocol=PLAIN",
        "sasl.mechanism.controller.protocol=PLAIN",
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas}",
        f"listener.name.controller.plain.sasl.jaas.config={jaas}",
        f"authorizer.class.name={STANDARD}",
        "super.users=User:admin",
    ]
