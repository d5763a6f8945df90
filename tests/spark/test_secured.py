"""The connector through a SASL_SSL listener: Spark's Kafka security options
(``kafka.security.protocol``, ``kafka.sasl.*``, ``kafka.ssl.*``) reach every client it
opens: the driver's planning and commits, the native and librdkafka readers on
executors, the sink (plain and transactional) and the share-group source."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from headwater.wire.client_properties import to_librdkafka
from headwater.wire.client_security import AuthenticationError, ClientSecurity
from pyspark_headwater import executor, fetcher
from pyspark_headwater.options import HeadwaterOptionError, parse_source_options
from pyspark_headwater.schema import source_schema
from pyspark_headwater.share_options import parse_share_options
from tests.spark.helpers import committed, consume_all, create_topic, produce
from tests.support.secured import SecuredBroker, make_pki

pytestmark = pytest.mark.timeout(180)

SCRAM = ("carol", "carol-pw", "SCRAM-SHA-512")


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    pki = make_pki(tmp_path_factory.mktemp("pki"))
    broker = SecuredBroker(pki, tmp_path_factory.mktemp("spark-secured") / "data",
                           "--override", "group.share.min.record.lock.duration.ms=1000")
    broker.start()
    broker.add_scram_user(*SCRAM)
    yield broker
    for consumer in executor._consumers.values():  # cached per process: close them first
        consumer.close()
    executor._consumers.clear()
    for bootstrap in {b for b, _security in fetcher._sessions}:
        fetcher.drop_session(bootstrap)
    broker.stop()


def spark_options(secured: SecuredBroker, mechanism: str) -> dict[str, str]:
    """PLAIN as Spark's Kafka source is configured (sasl.jaas.config); SCRAM with
    librdkafka's sasl.username / sasl.password, which pass through as well."""
    if mechanism == "PLAIN":
        props = secured.sasl_props()
    else:
        user, password, mechanism = SCRAM
        props = {k: v for k, v in secured.sasl_props().items() if k != "sasl.jaas.config"}
        props.update({"sasl.mechanism": mechanism, "sasl.username": user,
                      "sasl.password": password})
    return {"kafka.bootstrap.servers": secured.bootstrap(),
            **{f"kafka.{k}": v for k, v in props.items()}}


def with_options(builder, options: dict[str, str]):
    for key, value in options.items():
        builder = builder.option(key, value)
    return builder


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_batch_read_and_write(spark, secured, topic_name, mechanism) -> None:
    plain = secured.bootstrap("PLAINTEXT")
    create_topic(plain, topic_name, 2)
    produce(plain, topic_name, [{"value": b"v%d" % i, "partition": i % 2} for i in range(200)])
    opts = spark_options(secured, mechanism)
    want = sorted(b"v%d" % i for i in range(200))
    # The native reader connects through SASL_SSL itself (no fallback to librdkafka).
    parsed = parse_source_options({**opts, "subscribe": topic_name})
    assert executor.native_supported(parsed)
    schema = to_arrow_schema(source_schema(False), timezone="UTC")
    part = executor.RangePartition(topic_name, 0, 0, 100)
    table = pa.Table.from_batches(list(fetcher.read_range(parsed, schema, part, 1000, 1 << 20)))
    assert table.column("value").to_pylist() == [b"v%d" % i for i in range(0, 200, 2)]
    for decoder in ("native", "librdkafka"):
        df = with_options(spark.read.format("headwater"), opts).option(
            "subscribe", topic_name).option("decoder", decoder).load()
        assert sorted(bytes(r.value) for r in df.select("value").collect()) == want, decoder

    out = topic_name + "-out"
    create_topic(plain, out, 1)
    (with_options(df.selectExpr("value").write.format("headwater").mode("append"), opts)
     .option("topic", out).save())
    assert sorted(v for _, v, *_ in consume_all(plain, out, 1)) == want


def test_streaming_with_commits_into_an_exactly_once_sink(spark, secured, topic_name,
                                                          tmp_path) -> None:
    plain, group = secured.bootstrap("PLAINTEXT"), f"g-{uuid.uuid4().hex[:8]}"
    create_topic(plain, topic_name, 2)
    produce(plain, topic_name, [{"value": b"s%d" % i, "partition": i % 2} for i in range(300)])
    out = topic_name + "-out"
    create_topic(plain, out, 2)
    opts = spark_options(secured, "SCRAM-SHA-512")
    q = (with_options(spark.readStream.format("headwater"), opts)
         .option("subscribe", topic_name).option("startingOffsets", "earliest")
         .option("kafka.group.id", group).option("maxOffsetsPerTrigger", "120").load()
         .selectExpr("value").writeStream.format("headwater").options(**opts)
         .option("topic", out).option("exactlyOnce", "true")
         .option("checkpointLocation", str(tmp_path / "c"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(150), "the AvailableNow query did not finish"
    assert q.exception() is None, q.exception()
    assert sorted(v for _, v, *_ in consume_all(plain, out, 2)) == sorted(
        b"s%d" % i for i in range(300))
    assert committed(plain, group, topic_name, 2) == {0: 150, 1: 150}


def test_share_group_source(spark, secured, topic_name, tmp_path) -> None:
    plain, group = secured.bootstrap("PLAINTEXT"), f"s-{uuid.uuid4().hex[:8]}"
    create_topic(plain, topic_name, 2)
    produce(plain, topic_name, [{"value": b"q%d" % i, "partition": i % 2} for i in range(100)])
    rows: list = []
    q = (with_options(spark.readStream.format("headwater"), spark_options(secured, "PLAIN"))
         .option("kafka.share.group.id", group).option("subscribe", topic_name)
         .option("share.auto.offset.reset", "earliest").load()
         .writeStream.foreachBatch(lambda b, _: rows.extend(b.collect()))
         .option("checkpointLocation", str(tmp_path / "c"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(150), "the AvailableNow query did not finish"
    assert q.exception() is None, q.exception()
    assert sorted(bytes(r.value) for r in rows) == sorted(b"q%d" % i for i in range(100))


def test_mtls_batch_read(spark, secured, topic_name) -> None:
    """A client certificate from a PEM keystore (kafka.ssl.keystore.*), both readers."""
    plain = secured.bootstrap("PLAINTEXT")
    create_topic(plain, topic_name, 1)
    produce(plain, topic_name, [{"value": b"m%d" % i} for i in range(50)])
    opts = {"kafka.bootstrap.servers": secured.bootstrap("MTLS"),
            **{f"kafka.{k}": v for k, v in secured.mtls_props().items()}}
    for decoder in ("native", "librdkafka"):
        df = with_options(spark.read.format("headwater"), opts).option(
            "subscribe", topic_name).option("decoder", decoder).load()
        assert sorted(bytes(r.value) for r in df.collect()) == sorted(
            b"m%d" % i for i in range(50)), decoder


def test_native_reader_refuses_a_wrong_password(secured) -> None:
    opts = spark_options(secured, "PLAIN")
    opts["kafka.sasl.jaas.config"] = opts["kafka.sasl.jaas.config"].replace(
        "alice-secret", "wrong")
    parsed = parse_source_options({**opts, "subscribe": "any"})
    session = fetcher.Session(parsed.bootstrap, 10.0, parsed.security)
    with pytest.raises(AuthenticationError, match="Authentication failed"):
        session.leader("any", 0)
    session.close()


def test_security_options_are_checked_at_planning() -> None:
    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    with pytest.raises(HeadwaterOptionError, match="kafka.* security option.*JKS"):
        parse_source_options({**base, "kafka.ssl.truststore.type": "JKS"})
    # A mechanism only librdkafka speaks: it reads, the share-group source cannot.
    gssapi = {**base, "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "GSSAPI"}
    assert not executor.native_supported(parse_source_options(gssapi))
    with pytest.raises(HeadwaterOptionError, match="does not support sasl.mechanism=GSSAPI"):
        parse_share_options({**gssapi, "kafka.share.group.id": "g"})
    with pytest.raises(HeadwaterOptionError, match="needs a username"):
        parse_source_options({**gssapi, "kafka.sasl.mechanism": "PLAIN"})
    # mTLS: a PEM keystore becomes librdkafka's certificate and key, and our own sockets'
    opts = parse_source_options({**base, "kafka.security.protocol": "SSL",
                                 "kafka.ssl.keystore.type": "PEM",
                                 "kafka.ssl.keystore.location": "/k.pem",
                                 "kafka.ssl.key.password": "kp"})
    assert opts.client_config["ssl.certificate.location"] == "/k.pem"
    assert executor.native_supported(opts)
    # A setting only librdkafka knows leaves the reading to librdkafka.
    assert not executor.native_supported(parse_source_options(
        {**base, "kafka.security.protocol": "SSL", "kafka.ssl.cipher.suites": "HIGH"}))
    assert opts.client_config == {**to_librdkafka(opts.client_config)}
    assert opts.security == ClientSecurity(protocol="SSL", mechanism="GSSAPI",
                                           certificate_location="/k.pem",
                                           key_location="/k.pem", key_password="kp")


def test_wrong_password_fails_at_planning_with_the_brokers_message(spark, secured,
                                                                    topic_name) -> None:
    """Not after librdkafka's retries (minutes, 'Broker transport failure')."""
    opts = spark_options(secured, "PLAIN")
    opts["kafka.sasl.jaas.config"] = opts["kafka.sasl.jaas.config"].replace(
        "alice-secret", "wrong")
    with pytest.raises(Exception, match="refused SASL PLAIN authentication of user 'alice': "
                                        "Authentication failed"):
        with_options(spark.read.format("headwater"), opts).option(
            "subscribe", topic_name).load().collect()
    df = spark.createDataFrame([("v",)], ["value"])
    with pytest.raises(Exception, match="refused SASL PLAIN"):
        (with_options(df.write.format("headwater").mode("append"), opts)
         .option("topic", topic_name).save())
    opts = spark_options(secured, "PLAIN")
    opts["kafka.ssl.truststore.location"] = str(secured.pki / "client.crt")  # not the CA
    query = (with_options(spark.readStream.format("headwater"), opts)
             .option("kafka.share.group.id", "g").option("subscribe", topic_name).load()
             .writeStream.foreachBatch(lambda b, _: None).trigger(availableNow=True).start())
    with pytest.raises(Exception, match="is not trusted"):
        query.awaitTermination(60)
