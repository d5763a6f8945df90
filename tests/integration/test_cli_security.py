"""`headwater groups|share-groups|transactions` reach a secured broker with Kafka's client
settings (`--command-config FILE`, `--command-property KEY=VALUE`): SASL_SSL with PLAIN and
SCRAM, SSL with a client certificate; wrong credentials fail clearly."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KTP

from headwater.cli import main as cli_main
from headwater.wire.client_properties import to_librdkafka
from tests.support.secured import SecuredBroker, make_pki

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    pki = make_pki(tmp_path_factory.mktemp("pki"))
    broker = SecuredBroker(pki, tmp_path_factory.mktemp("cli-secured") / "data").start()
    yield broker
    broker.stop()


def write_properties(path: Path, props: dict[str, str]) -> str:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return str(path)


def test_groups_over_sasl_ssl_with_command_config(secured: SecuredBroker, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture) -> None:
    conf = {**to_librdkafka(secured.sasl_props()), "bootstrap.servers": secured.bootstrap()}
    producer = Producer(conf)
    producer.produce("cli-sec", b"v")
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": "cli-sec-group"})
    consumer.commit(offsets=[KTP("cli-sec", 0, 1)], asynchronous=False)
    consumer.close()

    config = write_properties(tmp_path / "client.properties", secured.sasl_props())
    servers = f"127.0.0.1:1,{secured.bootstrap()}"  # the first one is not there
    base = ["groups", "--bootstrap-server", servers, "--command-config", config]
    capsys.readouterr()
    assert cli_main([*base, "list"]) == 0
    assert "cli-sec-group" in capsys.readouterr().out
    assert cli_main([*base, "describe", "cli-sec-group"]) == 0
    assert "cli-sec" in capsys.readouterr().out
    assert cli_main(["transactions", "--bootstrap-server", secured.bootstrap(),
                     "--command-config", config, "list"]) == 0


def test_wrong_password_and_missing_settings_fail_clearly(
        secured: SecuredBroker, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    config = write_properties(tmp_path / "bad.properties",
                              secured.sasl_props("alice", "not-her-password"))
    capsys.readouterr()
    assert cli_main(["share-groups", "--bootstrap-server", secured.bootstrap(),
                     "--command-config", config, "list"]) == 1
    err = capsys.readouterr().err
    assert "error: Authentication failed" in err, err
    # A SCRAM mechanism the user has no credential for: refused the same way.
    assert cli_main(["groups", "--bootstrap-server", secured.bootstrap(), "--command-config",
                     config, "--command-property", "sasl.mechanism=SCRAM-SHA-512",
                     "list"]) == 1
    assert "error: Authentication failed" in capsys.readouterr().err
    # No settings at all against a TLS listener: an error, not a hang.
    assert cli_main(["groups", "--bootstrap-server", secured.bootstrap(), "list"]) == 1
    assert capsys.readouterr().err.startswith("error: ")
    # A truststore type headwater cannot read is named.
    assert cli_main(["groups", "--bootstrap-server", secured.bootstrap(), "--command-config",
                     config, "--command-property", "ssl.truststore.type=JKS", "list"]) == 1
    assert "ssl.truststore.type" in capsys.readouterr().err


def test_scram_with_command_properties_and_mtls(secured: SecuredBroker, tmp_path: Path,
                                                capsys: pytest.CaptureFixture) -> None:
    secured.add_scram_user("carol", "carol-pw", "SCRAM-SHA-256")
    props = secured.sasl_props("carol", "carol-pw", "SCRAM-SHA-256")
    args = [f"--command-property={k}={v}" for k, v in props.items()]
    assert cli_main(["share-groups", "--bootstrap-server", secured.bootstrap(), *args,
                     "list"]) == 0
    args[-1] = "--command-property=ssl.truststore.location=/nonexistent/ca.pem"
    assert cli_main(["share-groups", "--bootstrap-server", secured.bootstrap(), *args,
                     "list"]) == 1
    config = write_properties(tmp_path / "mtls.properties", secured.mtls_props())
    assert cli_main(["groups", "--bootstrap-server", secured.bootstrap("MTLS"),
                     "--command-config", config, "list"]) == 0
    # Without its certificate the client is refused by the listener.
    no_cert = {k: v for k, v in secured.mtls_props().items() if "keystore" not in k}
    config = write_properties(tmp_path / "nocert.properties", no_cert)
    capsys.readouterr()
    assert cli_main(["groups", "--bootstrap-server", secured.bootstrap("MTLS"),
                     "--command-config", config, "list"]) == 1
    assert capsys.readouterr().err.startswith("error: ")
