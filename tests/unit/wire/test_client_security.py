"""Client-side security settings: Kafka's Java property names mapped onto librdkafka's,
`--command-config` files, and the SCRAM client against the broker's SCRAM server."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from headwater.security.scram import ScramError, ScramServer, credential, salted_password
from headwater.security.scram_client import ScramClient
from headwater.wire.client_properties import (
    SecurityConfigError,
    read_properties,
    to_librdkafka,
    unsupported,
)
from headwater.wire.client_security import PLAINTEXT, ClientSecurity

pytestmark = pytest.mark.timeout(30)

JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="ali\\"ce" password="s3cr=t;";')


def test_java_properties_map_onto_librdkafka_names() -> None:
    conf = to_librdkafka({
        "security.protocol": "sasl_ssl", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": JAAS, "ssl.truststore.location": "/ca.pem",
        "ssl.truststore.type": "PEM", "ssl.keystore.location": "/ks.pem",
        "ssl.keystore.type": "PEM", "ssl.key.password": "kp",
        "ssl.endpoint.identification.algorithm": "", "linger.ms": "5"})
    assert conf == {
        "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": 'ali"ce', "sasl.password": "s3cr=t;", "ssl.ca.location": "/ca.pem",
        "ssl.certificate.location": "/ks.pem", "ssl.key.location": "/ks.pem",
        "ssl.key.password": "kp", "ssl.endpoint.identification.algorithm": "none",
        "linger.ms": "5"}
    # librdkafka's own names pass through, and read back the same
    assert to_librdkafka(conf) == conf
    sec = ClientSecurity.from_config(conf)
    assert (sec.protocol, sec.mechanism, sec.username, sec.check_hostname) == (
        "SASL_SSL", "SCRAM-SHA-512", 'ali"ce', False)


@pytest.mark.parametrize("props, names", [
    ({"ssl.truststore.type": "JKS"}, "ssl.truststore.type"),
    ({"sasl.jaas.config": "x required;"}, "sasl.jaas.config"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI",
      "sasl.username": "a", "sasl.password": "b"}, "sasl.mechanism"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.jaas.config"),
    ({"security.protocol": "TLS"}, "security.protocol"),
])
def test_bad_settings_name_the_property(props: dict, names: str) -> None:
    with pytest.raises(SecurityConfigError, match=names):
        ClientSecurity.from_config(to_librdkafka(props))


def test_a_pkcs12_keystore_is_left_to_librdkafka() -> None:
    conf = to_librdkafka({"security.protocol": "SSL", "ssl.keystore.type": "PKCS12",
                          "ssl.keystore.location": "/k.p12", "ssl.keystore.password": "x",
                          "ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca"})
    assert conf == {"security.protocol": "SSL", "ssl.keystore.location": "/k.p12",
                    "ssl.keystore.password": "x", "ssl.ca.location": "/ca"}
    assert unsupported(conf) == ["ssl.keystore.location", "ssl.keystore.password"]
    with pytest.raises(SecurityConfigError, match="librdkafka only"):
        ClientSecurity.from_config(conf)


def test_command_config_file(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text("# a comment\n! another\nsecurity.protocol = SASL_SSL\n"
                    "sasl.mechanism: PLAIN\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule \\\n"
                    '    required username="bob" password="pw";\n\n')
    props = read_properties(str(path))
    assert props["security.protocol"] == "SASL_SSL"
    assert props["sasl.mechanism"] == "PLAIN"
    assert to_librdkafka(props)["sasl.username"] == "bob"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_against_the_broker_side(mechanism: str) -> None:
    salt = os.urandom(16)
    cred = credential(mechanism, salted_password(mechanism, "pw", salt, 4096), salt, 4096)

    def run(password: str) -> str | None:
        server = ScramServer(mechanism, lambda user, mech: cred if user == "a=b,c" else None)
        client = ScramClient(mechanism, "a=b,c", password)
        client.verify(server.step(client.final(server.step(client.first()))))
        return server.username

    assert run("pw") == "a=b,c"
    with pytest.raises(ScramError, match="invalid credentials"):
        run("wrong")


def test_scram_client_refuses_weak_iterations_and_a_forged_signature() -> None:
    client = ScramClient("SCRAM-SHA-256", "u", "pw", nonce="abc")
    with pytest.raises(ScramError, match="less than the minimum"):
        client.final(b"r=abcdef,s=c2FsdA==,i=1000")
    client = ScramClient("SCRAM-SHA-256", "u", "pw", nonce="abc")
    client.final(b"r=abcdef,s=c2FsdA==,i=4096")
    with pytest.raises(ScramError, match="signature"):
        client.verify(b"v=AAAA")


def test_no_settings_is_plaintext() -> None:
    """Connection caches are keyed by the settings: no settings must equal PLAINTEXT."""
    assert ClientSecurity.from_config({}) == PLAINTEXT
    assert not PLAINTEXT.tls and not PLAINTEXT.sasl
    assert "secret" not in repr(ClientSecurity(password="secret", key_password="secret"))
