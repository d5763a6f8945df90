"""A broker with a SASL_SSL listener (PLAIN users alice and bob, SCRAM users added with
AlterUserScramCredentials) and an SSL listener that requires client certificates, beside
its PLAINTEXT one, with a throwaway CA made by openssl: for the tests of clients that
speak TLS and SASL."""

from __future__ import annotations

import subprocess
from pathlib import Path

from .broker_process import BrokerProcess, free_port

PLAIN_USERS = {"alice": "alice-secret", "bob": "bob-secret"}
JAAS_SERVER = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
               + " ".join(f'user_{u}="{p}"' for u, p in PLAIN_USERS.items()) + ";")


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_pki(d: Path) -> Path:
    """ca.pem; keystore.pem (server key + certificate for localhost/127.0.0.1);
    client.pem (client key + certificate), all signed by the CA."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
             "ca.pem", "-days", "2", "-subj", "/CN=ca", cwd=d)
    for who, cn in (("server", "localhost"), ("client", "app")):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{who}.key", "-out",
                 f"{who}.csr", "-subj", f"/CN={cn}", cwd=d)
        _openssl("x509", "-req", "-in", f"{who}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", f"{who}.crt", "-days", "2", "-extfile", "san.ext",
                 cwd=d)
    (d / "keystore.pem").write_text((d / "server.key").read_text()
                                    + (d / "server.crt").read_text())
    (d / "client.pem").write_text((d / "client.key").read_text()
                                  + (d / "client.crt").read_text())
    return d


class SecuredBroker:
    def __init__(self, pki: Path, data_dir: Path, *extra: str) -> None:
        self.pki = pki
        self.ports = {n: free_port() for n in ("PLAINTEXT", "SASL_SSL", "MTLS")}
        listeners = ",".join(f"{n}://127.0.0.1:{p}" for n, p in self.ports.items())
        self.proc = BrokerProcess(
            data_dir, "--override", f"listeners={listeners}",
            "--override", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,"
            "SASL_SSL:SASL_SSL,MTLS:SSL",
            "--override", "ssl.keystore.type=PEM",
            "--override", f"ssl.keystore.location={pki / 'keystore.pem'}",
            "--override", "listener.name.mtls.ssl.client.auth=required",
            "--override", f"listener.name.mtls.ssl.truststore.location={pki / 'ca.pem'}",
            "--override", f"listener.name.sasl_ssl.plain.sasl.jaas.config={JAAS_SERVER}",
            *extra, port=self.ports["PLAINTEXT"])

    def start(self) -> SecuredBroker:
        self.proc.start()
        return self

    def stop(self) -> None:
        self.proc.stop()

    def bootstrap(self, listener: str = "SASL_SSL") -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def sasl_props(self, user: str = "alice", password: str | None = None,
                   mechanism: str = "PLAIN") -> dict[str, str]:
        """Kafka's Java client properties for the SASL_SSL listener."""
        module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
        if password is None:
            password = PLAIN_USERS[user]
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
                "sasl.jaas.config": f"org.apache.kafka.common.security.{module} required "
                                    f'username="{user}" password="{password}";',
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(self.pki / "ca.pem")}

    def mtls_props(self) -> dict[str, str]:
        return {"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(self.pki / "ca.pem"),
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(self.pki / "client.pem")}

    def add_scram_user(self, user: str, password: str, mechanism: str) -> None:
        """AlterUserScramCredentials over the PLAINTEXT listener."""
        from confluent_kafka.admin import (
            AdminClient,
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialUpsertion,
        )

        admin = AdminClient({"bootstrap.servers": self.bootstrap("PLAINTEXT")})
        mech = ScramMechanism[mechanism.replace("-", "_")]
        for fut in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
                user, ScramCredentialInfo(mech, 4096), password.encode())]).values():
            fut.result(30)


def encrypted_keystore(pki: Path, password: str) -> Path:
    """keystore-encrypted.pem: the server's key, encrypted with `password` (a listener's
    `ssl.key.password`), and its certificate."""
    _openssl("pkey", "-in", "server.key", "-aes256", "-passout", f"pass:{password}",
             "-out", "server-encrypted.key", cwd=pki)
    keystore = pki / "keystore-encrypted.pem"
    keystore.write_text((pki / "server-encrypted.key").read_text()
                        + (pki / "server.crt").read_text())
    return keystore
