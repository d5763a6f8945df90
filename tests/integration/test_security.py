"""Listeners, TLS and SASL with unmodified clients: confluent-kafka, kafka-python,
aiokafka and Kafka's own kafka-configs (`--command-config`)."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests.support.broker_process import BrokerProcess
from tests.support.kafka_reference import run_tool
from tests.support.ports import free_port
from tests.support.secured import make_pki
from tests.support.wire import RawClient

pytestmark = pytest.mark.timeout(240)

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-secret" user_bob="bob-secret";')


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, a server certificate for 127.0.0.1/localhost signed by it, a client
    certificate, and a second CA nobody trusts."""
    d = make_pki(tmp_path_factory.mktemp("pki"))
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "rogue.key",
            "-out", "rogue.pem", "-days", "2", "-subj", "/CN=rogue", cwd=d)
    # A client certificate signed by the trusted CA that expired in 2020 (`openssl ca`
    # is the one that takes explicit validity dates).
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "expired.key", "-out",
            "expired.csr", "-subj", "/CN=old-app", cwd=d)
    (d / "ca.cnf").write_text("[ca]\ndefault_ca=d\n[d]\ndatabase=index.txt\n"
                              "new_certs_dir=.\nserial=serial\ndefault_md=sha256\n"
                              "policy=p\n[p]\ncommonName=supplied\n")
    (d / "index.txt").write_text("")
    (d / "serial").write_text("01\n")
    openssl("ca", "-batch", "-config", "ca.cnf", "-cert", "ca.pem", "-keyfile", "ca.key",
            "-in", "expired.csr", "-out", "expired.crt", "-startdate", "20200101000000Z",
            "-enddate", "20200102000000Z", "-notext", cwd=d)
    return d


class Secured:
    def __init__(self, pki: Path, data_dir: Path) -> None:
        self.ports = {name: free_port() for name in
                      ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL", "MTLS")}
        listeners = ",".join(f"{n}://127.0.0.1:{p}" for n, p in self.ports.items())
        self.pki = pki
        self.proc = BrokerProcess(
            data_dir, "--override", f"listeners={listeners}",
            "--override", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,"
            "SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,MTLS:SSL",
            "--override", "ssl.keystore.type=PEM",
            "--override", f"ssl.keystore.location={pki / 'keystore.pem'}",
            "--override", "listener.name.mtls.ssl.client.auth=required",
            "--override", f"listener.name.mtls.ssl.truststore.location={pki / 'ca.pem'}",
            "--override", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}",
            "--override", f"listener.name.sasl_ssl.plain.sasl.jaas.config={JAAS}",
            port=self.ports["PLAINTEXT"])

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def conf(self, listener: str, user: str = "alice", password: str = "alice-secret",
             mechanism: str = "PLAIN", ca: str = "ca.pem") -> dict:
        conf = {"bootstrap.servers": self.bootstrap(listener),
                "security.protocol": "SSL" if listener == "MTLS" else listener}
        if listener in ("SSL", "SASL_SSL", "MTLS"):
            conf["ssl.ca.location"] = str(self.pki / ca)
        if listener == "MTLS":
            conf["ssl.certificate.location"] = str(self.pki / "client.crt")
            conf["ssl.key.location"] = str(self.pki / "client.key")
        if listener.startswith("SASL"):
            conf.update({"sasl.mechanism": mechanism, "sasl.username": user,
                         "sasl.password": password})
        return conf


@pytest.fixture(scope="module")
def secured(pki: Path, tmp_path_factory: pytest.TempPathFactory):
    broker = Secured(pki, tmp_path_factory.mktemp("secured") / "data")
    broker.proc.start()
    yield broker
    broker.proc.stop()


def produce(conf: dict, topic: str, values: list[bytes]) -> None:
    p = Producer({**conf, "message.timeout.ms": 20000})
    for v in values:
        p.produce(topic, v)
    assert p.flush(30) == 0


def consume(conf: dict, topic: str, n: int, group: str) -> list[bytes]:
    c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got: list[bytes] = []
    for _ in range(120):
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
            if len(got) == n:
                break
    c.close()
    return got


def refused(conf: dict) -> str:
    """The client cannot get metadata; what it was told (librdkafka reports an
    authentication failure through error_cb)."""
    errors: list[str] = []
    admin = AdminClient({**conf, "socket.timeout.ms": 5000,
                         "error_cb": lambda err: errors.append(str(err))})
    with pytest.raises(KafkaException) as exc:
        admin.list_topics(timeout=8)
    admin.poll(1)  # serve error_cb
    return " | ".join([str(exc.value), *errors])


def test_every_listener_type_with_confluent_kafka(secured: Secured) -> None:
    values = [f"v{i}".encode() for i in range(20)]
    produce(secured.conf("SSL"), "secure-topic", values)
    assert consume(secured.conf("SASL_SSL"), "secure-topic", 20, "g-ssl") == values
    assert consume(secured.conf("SASL_PLAINTEXT", "bob", "bob-secret"), "secure-topic", 20,
                   "g-plain") == values
    assert consume(secured.conf("MTLS"), "secure-topic", 20, "g-mtls") == values
    # Each listener advertises itself: a client that came in on SASL_SSL is sent there.
    meta = AdminClient(secured.conf("SASL_SSL")).list_topics(timeout=20)
    assert [(b.host, b.port) for b in meta.brokers.values()] == [
        ("127.0.0.1", secured.ports["SASL_SSL"])]


def test_bad_credentials_and_untrusted_certificates_are_refused(secured: Secured) -> None:
    assert "Authentication failed" in refused(
        secured.conf("SASL_PLAINTEXT", "alice", "wrong"))
    assert "Authentication failed" in refused(secured.conf("SASL_SSL", "mallory", "x"))
    refused(secured.conf("SSL", ca="rogue.pem"))  # the server's certificate is not trusted
    no_cert = secured.conf("MTLS")
    del no_cert["ssl.certificate.location"], no_cert["ssl.key.location"]
    refused(no_cert)  # ssl.client.auth=required and no client certificate
    expired = {**no_cert, "ssl.certificate.location": str(secured.pki / "expired.crt"),
               "ssl.key.location": str(secured.pki / "expired.key")}
    refused(expired)  # a client certificate from the trusted CA, expired in 2020
    # Nothing but ApiVersions / SaslHandshake / SaslAuthenticate before authenticating.
    raw = RawClient("127.0.0.1", secured.ports["SASL_PLAINTEXT"])
    try:
        raw.send_bytes(b"\x00\x00\x00\x0e\x00\x03\x00\x01\x00\x00\x00\x07\x00\x00"
                       b"\xff\xff\xff\xff")  # Metadata v1, all topics
        assert raw.is_closed_by_peer()
    finally:
        raw.close()


def test_kafka_python_and_aiokafka_over_sasl(secured: Secured) -> None:
    from aiokafka import AIOKafkaProducer
    from kafka import KafkaConsumer, KafkaProducer

    kp = KafkaProducer(bootstrap_servers=secured.bootstrap("SASL_PLAINTEXT"),
                       security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                       sasl_plain_username="alice", sasl_plain_password="alice-secret")
    kp.send("py-secure", b"from kafka-python").get(timeout=30)
    kp.close()

    async def aio() -> None:
        p = AIOKafkaProducer(bootstrap_servers=secured.bootstrap("SASL_PLAINTEXT"),
                             security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                             sasl_plain_username="bob", sasl_plain_password="bob-secret")
        await p.start()
        try:
            await p.send_and_wait("py-secure", b"from aiokafka")
        finally:
            await p.stop()
    asyncio.run(aio())
    kc = KafkaConsumer("py-secure", bootstrap_servers=secured.bootstrap("SASL_PLAINTEXT"),
                       security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                       sasl_plain_username="bob", sasl_plain_password="bob-secret",
                       auto_offset_reset="earliest", consumer_timeout_ms=15000,
                       group_id="py-secure-readers")
    got = sorted(m.value for m in kc)
    kc.close()
    assert got == [b"from aiokafka", b"from kafka-python"]


def test_scram_users_are_metadata_records(secured: Secured, tmp_path: Path) -> None:
    admin = AdminClient(secured.conf("SASL_PLAINTEXT"))
    for fut in admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion("carol", ScramCredentialInfo(
                ScramMechanism.SCRAM_SHA_256, 8192), b"carol-pw"),
            UserScramCredentialUpsertion("dave", ScramCredentialInfo(
                ScramMechanism.SCRAM_SHA_512, 4096), b"dave-pw")]).values():
        fut.result(30)
    carol = secured.conf("SASL_SSL", "carol", "carol-pw", "SCRAM-SHA-256")
    produce(carol, "scram-topic", [b"by carol"])
    dave = secured.conf("SASL_PLAINTEXT", "dave", "dave-pw", "SCRAM-SHA-512")
    assert consume(dave, "scram-topic", 1, "g-dave") == [b"by carol"]
    assert "Authentication failed" in refused(
        secured.conf("SASL_PLAINTEXT", "carol", "nope", "SCRAM-SHA-256"))
    assert "Authentication failed" in refused(  # carol has no SHA-512 credential
        secured.conf("SASL_PLAINTEXT", "carol", "carol-pw", "SCRAM-SHA-512"))
    described = admin.describe_user_scram_credentials(["carol"])["carol"].result(30)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 8192)]

    # Kafka's kafka-configs over SASL (--command-config) adds a user, and lists them.
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.plain."
                     'PlainLoginModule required username="alice" password="alice-secret";\n')
    base = ("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server",
            secured.bootstrap("SASL_PLAINTEXT"), "--command-config", str(props))
    out = run_tool(*base, "--alter", "--entity-type", "users", "--entity-name", "erin",
                   "--add-config", "SCRAM-SHA-512=[iterations=4096,password=erin-pw]")
    assert "Completed updating config for user erin" in out.stdout
    listed = run_tool(*base, "--describe", "--entity-type", "users").stdout
    assert "SCRAM credential configs for user-principal 'erin' are SCRAM-SHA-512" in listed
    produce(secured.conf("SASL_SSL", "erin", "erin-pw", "SCRAM-SHA-512"), "scram-topic",
            [b"by erin"])

    secured.proc.restart()  # credentials are records: they survive
    assert consume(secured.conf("SASL_SSL", "erin", "erin-pw", "SCRAM-SHA-512"),
                   "scram-topic", 2, "g-erin") == [b"by carol", b"by erin"]
