"""Topic and config administration through confluent_kafka's AdminClient."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from tests.support.wire import RawClient


@pytest.fixture
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def error_code(future) -> int:
    with pytest.raises(KafkaException) as exc:
        future.result(timeout=15)
    return exc.value.args[0].code()


def test_create_describe_delete_topic(admin, topic_name):
    fs = admin.create_topics([NewTopic(topic_name, 3, 1, config={"retention.ms": "12345"})])
    fs[topic_name].result(timeout=15)
    md = admin.list_topics(topic_name, timeout=10)
    assert set(md.topics[topic_name].partitions) == {0, 1, 2}
    assert md.topics[topic_name].error is None

    desc = admin.describe_topics(
        __import__("confluent_kafka").TopicCollection([topic_name]))[topic_name].result(15)
    assert desc.topic_id is not None and str(desc.topic_id) != "AAAAAAAAAAAAAAAAAAAAAA"
    assert len(desc.partitions) == 3

    res = ConfigResource(ConfigResource.Type.TOPIC, topic_name)
    configs = admin.describe_configs([res])[res].result(timeout=15)
    assert configs["retention.ms"].value == "12345"
    assert configs["retention.ms"].source == ConfigResource.Type.UNKNOWN or \
        configs["retention.ms"].source == 1  # DYNAMIC_TOPIC_CONFIG
    assert configs["segment.bytes"].value == "1073741824"
    assert configs["segment.bytes"].source == 5  # DEFAULT_CONFIG

    admin.delete_topics([topic_name])[topic_name].result(timeout=15)
    md = admin.list_topics(timeout=10)
    assert topic_name not in md.topics


def test_create_errors(admin, broker, topic_name):
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(15)
    assert error_code(admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name]) == \
        KafkaError.TOPIC_ALREADY_EXISTS
    other = topic_name + "-x"
    # one replica more than there are brokers (Kafka accepts up to their number)
    too_many = len(broker.node_ids) + 1
    assert error_code(admin.create_topics([NewTopic(other, 1, too_many)])[other]) == \
        KafkaError.INVALID_REPLICATION_FACTOR
    assert error_code(admin.create_topics([NewTopic(other, 0, 1)])[other]) == \
        KafkaError.INVALID_PARTITIONS
    bad = "bad/name"
    assert error_code(admin.create_topics([NewTopic(bad, 1, 1)])[bad]) == \
        KafkaError.TOPIC_EXCEPTION
    assert error_code(admin.create_topics(
        [NewTopic(other, 1, 1, config={"cleanup.policy": "bogus"})])[other]) == \
        KafkaError.INVALID_CONFIG
    assert error_code(admin.create_topics(
        [NewTopic(other, 1, 1, config={"no.such.key": "1"})])[other]) == \
        KafkaError.INVALID_CONFIG
    assert other not in admin.list_topics(timeout=10).topics


def test_delete_unknown_topic(admin):
    name = f"missing-{uuid.uuid4().hex[:8]}"
    assert error_code(admin.delete_topics([name])[name]) == \
        KafkaError.UNKNOWN_TOPIC_OR_PART


def test_create_partitions(admin, topic_name):
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(15)
    admin.create_partitions([NewPartitions(topic_name, 4)])[topic_name].result(15)
    assert len(admin.list_topics(topic_name, timeout=10).topics[topic_name].partitions) == 4
    assert error_code(admin.create_partitions([NewPartitions(topic_name, 2)])[topic_name]) \
        == KafkaError.INVALID_PARTITIONS


def test_incremental_and_legacy_alter_configs(admin, topic_name):
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(15)
    res = ConfigResource(ConfigResource.Type.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact",
                    incremental_operation=AlterConfigOpType.APPEND)])
    admin.incremental_alter_configs([res])[res].result(timeout=15)
    plain = ConfigResource(ConfigResource.Type.TOPIC, topic_name)
    configs = admin.describe_configs([plain])[plain].result(timeout=15)
    assert configs["retention.ms"].value == "60000"
    assert configs["cleanup.policy"].value == "delete,compact"

    delete = ConfigResource(ConfigResource.Type.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)])
    admin.incremental_alter_configs([delete])[delete].result(timeout=15)
    configs = admin.describe_configs([plain])[plain].result(timeout=15)
    assert configs["retention.ms"].value == "604800000"

    bad = ConfigResource(ConfigResource.Type.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)])
    assert error_code(admin.incremental_alter_configs([bad])[bad]) == KafkaError.INVALID_CONFIG
    # Nothing of the rejected change landed.
    configs = admin.describe_configs([plain])[plain].result(timeout=15)
    assert configs["retention.ms"].value == "604800000"


def test_describe_broker_configs_and_cluster(admin, broker):
    res = ConfigResource(ConfigResource.Type.BROKER, "1")
    configs = admin.describe_configs([res])[res].result(timeout=15)
    assert configs["num.partitions"].value == "1"
    assert configs["log.dirs"].source in (4, 5)
    cluster = admin.describe_cluster().result(timeout=15) if hasattr(
        admin, "describe_cluster") else None
    if cluster is not None:
        assert sorted(n.id for n in cluster.nodes) == broker.node_ids
        assert cluster.cluster_id


def test_metadata_v12_topic_ids_by_raw_request(broker, admin, topic_name):
    admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(15)
    client = RawClient("127.0.0.1", broker.port)
    try:
        resp = client.request(3, 12, {"topics": [{"name": topic_name, "topic_id": None}],
                                      "allow_auto_topic_creation": False,
                                      "include_topic_authorized_operations": False})
        topic = resp.topics[0]
        assert int(topic.error_code) == 0
        assert topic.topic_id != uuid.UUID(int=0)
        # Look the same topic up by id (v12+).
        by_id = client.request(3, 12, {"topics": [{"name": None, "topic_id": topic.topic_id}],
                                       "allow_auto_topic_creation": False,
                                       "include_topic_authorized_operations": False},
                               correlation_id=2)
        assert by_id.topics[0].name == topic_name
        unknown = client.request(3, 12, {"topics": [{"name": None,
                                                     "topic_id": uuid.uuid4()}],
                                         "allow_auto_topic_creation": False,
                                         "include_topic_authorized_operations": False},
                                 correlation_id=3)
        assert int(unknown.topics[0].error_code) == 100  # UNKNOWN_TOPIC_ID
    finally:
        client.close()


def test_auto_create_on_metadata(broker, topic_name):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce(topic_name, b"x")
    assert p.flush(15) == 0
    md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(topic_name, timeout=10)
    assert len(md.topics[topic_name].partitions) == 1


def test_dynamic_broker_configs(broker_factory, tmp_path):
    """AlterConfigs on the BROKER resource: the cluster default ("") and this broker ("1")
    change the defaults of every topic at once, with Kafka's precedence and sources, and
    survive a restart; keys Kafka cannot change at runtime are refused."""
    from confluent_kafka import Producer

    data = tmp_path / "dyn"
    proc = broker_factory(data_dir=data)
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    admin.create_topics([NewTopic("dyn", 1, 1)])["dyn"].result(15)
    topic = ConfigResource(ConfigResource.Type.TOPIC, "dyn")

    def alter(name: str, key: str, value: str) -> int:
        """IncrementalAlterConfigs SET on BROKER `name` by raw request: confluent-kafka
        refuses the empty name Kafka uses for the cluster-wide default."""
        client = RawClient("127.0.0.1", proc.port)
        try:
            resp = client.request(44, 0, {"validate_only": False, "resources": [{
                "resource_type": 4, "resource_name": name,
                "configs": [{"name": key, "config_operation": 0, "value": value}]}]})
        finally:
            client.close()
        return int(resp.responses[0].error_code)

    assert alter("", "log.retention.ms", "7200000") == 0
    assert alter("", "message.max.bytes", "2000") == 0
    configs = admin.describe_configs([topic])[topic].result(15)
    assert (configs["retention.ms"].value, configs["retention.ms"].source) == ("7200000", 3)
    client = RawClient("127.0.0.1", proc.port)
    described = client.request(32, 1, {"include_synonyms": False, "resources": [{
        "resource_type": 4, "resource_name": "", "configuration_keys": None}]})
    client.close()
    assert {(c.name, c.value) for c in described.results[0].configs} == {
        ("log.retention.ms", "7200000"), ("message.max.bytes", "2000")}

    errors: list = []
    p = Producer({"bootstrap.servers": proc.bootstrap, "linger.ms": 0})
    for size in (3000, 100):  # one batch each
        p.produce("dyn", b"x" * size, on_delivery=lambda err, msg: errors.append(err))
        assert p.flush(15) == 0
    assert [e.code() if e else None for e in errors] == [KafkaError.MSG_SIZE_TOO_LARGE, None]

    node = ConfigResource(ConfigResource.Type.BROKER, "1", incremental_configs=[
        ConfigEntry("log.retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([node])[node].result(15)  # this broker beats the default
    configs = admin.describe_configs([topic])[topic].result(15)
    assert (configs["retention.ms"].value, configs["retention.ms"].source) == ("3600000", 2)
    assert alter("1", "log.dirs", "/elsewhere") == KafkaError.INVALID_CONFIG  # static
    # Kafka's dynamic keys without a counterpart here are stored, as Kafka does
    # (librdkafka's 0081_admin sets this one); a value of the wrong type is refused.
    assert alter("1", "sasl.kerberos.min.time.before.relogin", "58000") == 0
    assert alter("", "num.io.threads", "many") == KafkaError.INVALID_CONFIG
    client = RawClient("127.0.0.1", proc.port)
    stored = client.request(32, 1, {"include_synonyms": False, "resources": [{
        "resource_type": 4, "resource_name": "1",
        "configuration_keys": ["sasl.kerberos.min.time.before.relogin"]}]})
    client.close()
    assert [(c.name, c.value, c.read_only) for c in stored.results[0].configs] == [
        ("sasl.kerberos.min.time.before.relogin", "58000", False)]
    assert alter("", "log.retention.ms", "soon") == KafkaError.INVALID_CONFIG

    proc.stop()
    again = broker_factory(data_dir=data)
    admin = AdminClient({"bootstrap.servers": again.bootstrap})
    configs = admin.describe_configs([topic])[topic].result(15)
    assert (configs["retention.ms"].value, configs["retention.ms"].source) == ("3600000", 2)
    assert configs["max.message.bytes"].value == "2000"


def test_every_kafka_topic_config_a_mirror_copies_is_accepted(admin, topic_name):
    """Tools that copy a Kafka topic's configs (MirrorMaker, migrations) send keys that do
    nothing on a single node (jitter, preallocate, compression levels, local retention):
    they are accepted, validated and described like Kafka does."""
    configs = {"min.compaction.lag.ms": "1000", "max.compaction.lag.ms": "600000",
               "segment.jitter.ms": "5", "preallocate": "true",
               "compression.gzip.level": "6", "compression.lz4.level": "12",
               "compression.zstd.level": "-5", "local.retention.ms": "-2",
               "local.retention.bytes": "-2", "cleanup.policy": "compact"}
    admin.create_topics([NewTopic(topic_name, 1, 1, config=configs)])[topic_name].result(15)
    res = ConfigResource(ConfigResource.Type.TOPIC, topic_name)
    described = admin.describe_configs([res])[res].result(15)
    assert {k: described[k].value for k in configs} == configs
    bad = admin.create_topics([NewTopic(topic_name + "-bad", 1, 1, config={
        "compression.gzip.level": "12"})])[topic_name + "-bad"]
    assert error_code(bad) == KafkaError.INVALID_CONFIG
