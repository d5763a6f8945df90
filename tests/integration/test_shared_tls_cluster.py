"""Three brokers on a shared log whose engines speak TLS (issue 35): PostgreSQL over
`sslmode=verify-full` with a client certificate and a password, versitygw over HTTPS
trusted through `headwater.shared.objects.ssl.truststore.location`, and between the
brokers a SASL_SSL inter-broker listener whose key is encrypted.

Every secret is given through a config provider, none on a command line: the DSN
(its password) and the S3 secret key, the inter-broker JAAS password and the key's
password. None of them shows anywhere: not in a broker's log, `headwater configs
describe`, DescribeConfigs (sensitive, no value), the console's pages, `ps`.

A fourth broker whose database CA did not sign PostgreSQL's certificate, and one whose
object-store truststore did not sign versitygw's, each exit at once with one line
naming the setting, while the three keep serving."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from tests.support.cluster import Cluster, create, read_all, start_cluster
from tests.support.console_process import ConsoleProcess
from tests.support.engines import FILE_PROVIDER, PostgresServer, VersityGateway
from tests.support.ports import free_port
from tests.support.secured import encrypted_keystore, make_pki

pytestmark = [pytest.mark.timeout(300), pytest.mark.cluster_campaign(
    "three brokers of their own on PostgreSQL and versitygw over TLS")]

# Distinctive secrets: each is searched for wherever a broker may show it.
DB_PASSWORD = f"db-pass-{uuid.uuid4().hex}"
S3_SECRET = f"s3-secret-{uuid.uuid4().hex}"
JAAS_PASSWORD = f"jaas-pass-{uuid.uuid4().hex}"
KEY_PASSWORD = f"key-pass-{uuid.uuid4().hex}"
SECRETS = (DB_PASSWORD, S3_SECRET, JAAS_PASSWORD, KEY_PASSWORD)
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="broker" password="{JAAS_PASSWORD}" user_broker="{JAAS_PASSWORD}";')
DATABASE = "headwater.shared.database"
TRUSTSTORE = "headwater.shared.objects.ssl.truststore.location"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tls-cluster")


@pytest.fixture(scope="module")
def pki(base: Path) -> Path:
    return make_pki(base / "pki")


@pytest.fixture(scope="module")
def other_ca(base: Path) -> Path:
    """A CA that signed none of the servers' certificates."""
    return make_pki(base / "other-pki") / "ca.pem"


@pytest.fixture(scope="module")
def tls_postgres(base: Path, pki: Path) -> Iterator[PostgresServer]:
    server = PostgresServer(base / "pg", pki=pki, password=DB_PASSWORD)
    yield server.start()
    server.remove()


@pytest.fixture(scope="module")
def tls_versitygw(base: Path, pki: Path) -> Iterator[VersityGateway]:
    (base / "gw").mkdir()
    server = VersityGateway(base / "gw", pki=pki, secret_key=S3_SECRET)
    yield server.start()
    server.kill()


@pytest.fixture(scope="module")
def cluster(base: Path, pki: Path, tls_postgres: PostgresServer,
            tls_versitygw: VersityGateway) -> Iterator[Cluster]:
    secrets = base / "broker-secrets.properties"
    listener = base / "listener-secrets.properties"
    listener.write_text(f"jaas={JAAS}\nkey.password={KEY_PASSWORD}\n")
    listener.chmod(0o600)
    inter = {n: free_port() for n in (1, 2, 3)}
    secured = (
        *FILE_PROVIDER,
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
        "inter.broker.listener.name=INTERNAL",
        "sasl.mechanism.inter.broker.protocol=PLAIN",
        f"listener.name.internal.plain.sasl.jaas.config=${{file:{listener}:jaas}}",
        f"listener.name.internal.ssl.keystore.location={encrypted_keystore(pki, KEY_PASSWORD)}",
        f"listener.name.internal.ssl.key.password=${{file:{listener}:key.password}}",
        f"listener.name.internal.ssl.truststore.location={pki / 'ca.pem'}")

    def listeners(c: Cluster) -> None:
        for n in (1, 2, 3):
            c.per_node[n] = (f"listeners=PLAINTEXT://127.0.0.1:{c.ports[n]},"
                             f"INTERNAL://127.0.0.1:{inter[n]}",)
    yield from start_cluster(tls_postgres, tls_versitygw, base / "cluster", overrides=secured,
                             configure=listeners, secrets=secrets)


def produce_and_consume(cluster: Cluster, nodes: tuple[int, ...] = (1, 2, 3),
                        count: int = 60) -> str:
    """A new topic of three partitions: `count` records produced and read back."""
    topic = f"tls-{uuid.uuid4().hex[:8]}"
    create(cluster.bootstrap(*nodes), topic, 3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap(*nodes), "acks": "all",
                         "enable.idempotence": True})
    for i in range(count):
        producer.produce(topic, f"v{i}".encode(), partition=i % 3)
    assert producer.flush(60) == 0
    got = read_all(cluster.bootstrap(*nodes), topic, 3, count)
    assert sorted(v for records in got.values() for _o, v in records) == sorted(
        f"v{i}".encode() for i in range(count))
    return topic


def test_the_cluster_serves_with_every_database_connection_over_tls(
        cluster: Cluster) -> None:
    produce_and_consume(cluster)
    rows = cluster.fetch("SELECT s.ssl, s.client_dn FROM pg_stat_activity a "
                         "JOIN pg_stat_ssl s USING (pid) WHERE a.datname = current_database()")
    assert len(rows) > 3  # the brokers' pools, and this connection
    assert {(r["ssl"], r["client_dn"]) for r in rows} == {(True, "/CN=app")}


def refused_start(cluster: Cluster, node: int, *overrides: str) -> str:
    """Broker `node` started with `overrides`: it exits non-zero, and without waiting
    out `headwater.shared.startup.wait.ms` (60 s); its log."""
    cluster.ports[node] = free_port()
    cluster.per_node[node] = (f"listeners=PLAINTEXT://127.0.0.1:{cluster.ports[node]},"
                              f"INTERNAL://127.0.0.1:{free_port()}", *overrides)
    started = time.monotonic()
    try:
        with pytest.raises(RuntimeError, match="broker exited with 1"):
            cluster.start(node)
    finally:
        cluster.brokers.pop(node).kill()
        del cluster.ports[node]
    assert time.monotonic() - started < 30
    return (cluster.base / f"broker-{node}-broker.log").read_text()


def cannot_start(log: str) -> str:
    lines = [line for line in log.splitlines() if "cannot start" in line]
    assert len(lines) == 1, log
    assert "Traceback" not in log and "waiting for the shared log" not in log, log
    return lines[0]


def test_a_broker_whose_database_ca_did_not_sign_the_server_s_stops_naming_it(
        cluster: Cluster, tls_postgres: PostgresServer, other_ca: Path) -> None:
    wrong = cluster.base / "wrong-ca.properties"
    dsn = tls_postgres.dsn_for(cluster.dsn.split("?")[0].rsplit("/", 1)[1], rootcert=other_ca)
    wrong.write_text(f"{DATABASE}={dsn}\n")
    line = cannot_start(refused_start(cluster, 4, f"{DATABASE}=${{file:{wrong}:{DATABASE}}}"))
    assert f"cannot start: {DATABASE}=postgresql://headwater:***@127.0.0.1:" in line
    assert f"sslrootcert={other_ca}" in line
    assert "the server's certificate did not verify" in line
    produce_and_consume(cluster)  # the three serve on


def test_a_broker_whose_object_store_certificate_does_not_verify_stops_naming_it(
        cluster: Cluster, tls_versitygw: VersityGateway, other_ca: Path) -> None:
    line = cannot_start(refused_start(cluster, 5, f"{TRUSTSTORE}={other_ca}"))
    assert f"cannot start: {TRUSTSTORE}={other_ca}: the certificate of " \
           f"headwater.shared.objects.endpoint={tls_versitygw.endpoint} did not verify" in line
    produce_and_consume(cluster)


def test_no_secret_shows_anywhere(cluster: Cluster, pki: Path, base: Path) -> None:
    """Last of the module: the logs it reads include the refused brokers'."""
    topic = produce_and_consume(cluster, count=10)
    shown: dict[str, str] = {}
    # DescribeConfigs of every broker, through Kafka's client
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    for node in (1, 2, 3):
        resource = ConfigResource(ResourceType.BROKER, str(node))
        described = admin.describe_configs([resource])[resource].result(30)
        for key in (DATABASE, "headwater.shared.objects.secret.key",
                    "listener.name.internal.plain.sasl.jaas.config",
                    "listener.name.internal.ssl.key.password"):
            assert described[key].is_sensitive and described[key].value is None, key
        assert described[TRUSTSTORE].value == str(pki / "ca.pem")
        shown[f"describe_configs {node}"] = repr({k: (e.value, [(s.name, s.value) for s
                                                       in e.synonyms.values()])
                                                  for k, e in described.items()})
    # `headwater configs describe`, as a table and as JSON
    for form in ((), ("--json",)):
        out = subprocess.run([sys.executable, "-m", "headwater.cli", "configs", "describe",
                              "--broker", "2", "--bootstrap-server", cluster.bootstrap(2),
                              *form], capture_output=True, text=True, timeout=60, check=True)
        shown[f"headwater configs describe {form}"] = out.stdout + out.stderr
    rows = {row["name"]: row for row in json.loads(out.stdout)}
    assert rows[DATABASE]["value"] is None and rows[DATABASE]["sensitive"] is True
    # the console's pages
    console = ConsoleProcess(cluster.bootstrap(), base / "console.log").start()
    try:
        for page in ("/", f"/topics/{topic}", "/security", "/transactions"):
            with urllib.request.urlopen(console.url + page, timeout=30) as resp:
                shown[f"console {page}"] = resp.read().decode()
    finally:
        console.stop()
    shown["console log"] = (base / "console.log").read_text()
    # every process's command line, and every broker's log (the refused ones' too)
    shown["ps"] = subprocess.run(["ps", "-eww", "-o", "args"], capture_output=True,
                                 text=True, timeout=30, check=True).stdout
    for log in sorted((cluster.base).glob("*.log")):
        shown[log.name] = log.read_text(errors="replace")
    assert len([n for n in shown if n.startswith("broker-")]) == 5
    # the DSN is logged, redacted
    assert "shared log: database postgresql://headwater:***@" in shown["broker-1-broker.log"]
    leaks = [(where, secret) for where, text in shown.items() for secret in SECRETS
             if secret in text]
    assert not leaks
