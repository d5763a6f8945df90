"""`make cluster`: a three-broker headwater cluster on loopback, for trying it.

Starts a private PostgreSQL (initdb + pg_ctl), versitygw (S3 API over a directory) and
three brokers on the shared log (127.0.0.1:19091-19093), prints the bootstrap list, and
stops them all on Ctrl-C. Everything lives under ./cluster (PostgreSQL's data under a
temp directory its own user can reach when run as root) and starts afresh each time.

`--secure` (`make cluster SECURE=1`) secures it as docs/operations.md describes: a
throwaway CA (openssl) under ./cluster/pki, SASL_SSL client listeners (PLAIN users admin,
a super user, and alice, who holds no ACL), the brokers' traffic to each other on an
INTERNAL SASL_SSL listener with SCRAM-SHA-256, StandardAuthorizer, PostgreSQL over
`sslmode=verify-full` with a password, versitygw over HTTPS; every password is random and
read through the file config provider from ./cluster/secrets (0600), none on a command
line. The clients' properties are written to ./cluster/admin.properties (Kafka's Java
tools' --command-config) and printed for librdkafka.
"""

from __future__ import annotations

import secrets
import shutil
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from headwater.shared.settings import redact_dsn  # noqa: E402
from headwater.wire.client_security import PLAINTEXT, ClientSecurity  # noqa: E402
from tests.support.broker_process import BrokerProcess  # noqa: E402
from tests.support.engines import (  # noqa: E402
    PostgresServer,
    VersityGateway,
    secrets_from_file,
    shared_broker_args,
)
from tests.support.ports import free_port  # noqa: E402
from tests.support.secured import make_pki  # noqa: E402

PORTS = {1: 19091, 2: 19092, 3: 19093}


def secure_overrides(base: Path, pki: Path) -> tuple[list[str], dict[str, str]]:
    """The brokers' security settings (`--override` options, passwords through the file
    provider) and the clients' passwords."""
    users = {"admin": secrets.token_urlsafe(12), "alice": secrets.token_urlsafe(12)}
    path = base / "secrets" / "listeners.properties"
    plain = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
             + " ".join(f'user_{u}="{p}"' for u, p in users.items()) + ";")
    scram = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
             f'username="broker" password="{secrets.token_urlsafe(12)}";')
    path.write_text(f"client.jaas={plain}\ninternal.jaas={scram}\n")
    path.chmod(0o600)
    settings = [
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users=User:broker;User:admin",
        "listener.security.protocol.map=CLIENT:SASL_SSL,INTERNAL:SASL_SSL",
        "inter.broker.listener.name=INTERNAL",
        "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256",
        "listener.name.client.sasl.enabled.mechanisms=PLAIN",
        "listener.name.internal.sasl.enabled.mechanisms=SCRAM-SHA-256",
        f"listener.name.client.plain.sasl.jaas.config=${{file:{path}:client.jaas}}",
        f"listener.name.internal.scram-sha-256.sasl.jaas.config=${{file:{path}:internal.jaas}}",
        f"ssl.keystore.location={pki / 'keystore.pem'}",
        f"ssl.truststore.location={pki / 'ca.pem'}",
        f"headwater.shared.objects.ssl.truststore.location={pki / 'ca.pem'}"]
    return [a for s in settings for a in ("--override", s)], users


def listeners(port: int) -> list[str]:
    return ["--override", f"listeners=CLIENT://127.0.0.1:{port},"
                          f"INTERNAL://127.0.0.1:{free_port()}"]


def client_properties(base: Path, pki: Path, password: str) -> str:
    """The admin's properties: a file for Kafka's tools, the librdkafka lines printed."""
    (base / "admin.properties").write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
        f'required username="admin" password="{password}";\n'
        f"ssl.truststore.type=PEM\nssl.truststore.location={pki / 'ca.pem'}\n")
    (base / "admin.properties").chmod(0o600)
    return (f"  security.protocol=SASL_SSL sasl.mechanism=PLAIN sasl.username=admin\n"
            f"  sasl.password=<in {base / 'admin.properties'}> "
            f"ssl.ca.location={pki / 'ca.pem'}\n"
            f"  Kafka's tools: --command-config {base / 'admin.properties'}\n")


def main() -> int:
    args = [a for a in sys.argv[1:] if a != "--secure"]
    secure = "--secure" in sys.argv[1:]
    base = Path(args[0] if args else "cluster").resolve()
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    pki = make_pki(base / "pki") if secure else None
    if secure:
        (base / "secrets").mkdir(mode=0o700)
    postgres = PostgresServer(base / "postgres", pki=pki,
                              password=secrets.token_urlsafe(12) if secure else "").start()
    gateway = (VersityGateway(base / "objects", pki=pki, secret_key=secrets.token_urlsafe(16))
               if secure else VersityGateway(base / "objects"))
    gateway.base.mkdir(parents=True, exist_ok=True)
    gateway.start()
    brokers: list[BrokerProcess] = []
    try:
        shared = shared_broker_args(postgres, gateway, base / "shared")
        dsn = next(a.split("=", 1)[1] for a in shared
                   if a.startswith("headwater.shared.database="))
        extra: list[str] = []
        told = ""
        probe = PLAINTEXT
        if pki is not None:
            shared = secrets_from_file(shared, base / "secrets" / "engines.properties")
            extra, users = secure_overrides(base, pki)
            told = client_properties(base, pki, users["admin"])
            probe = ClientSecurity("SASL_SSL", "PLAIN", "admin", users["admin"],
                                   ca_location=str(pki / "ca.pem"))
        for node, port in PORTS.items():
            own = listeners(port) if pki is not None else []
            brokers.append(BrokerProcess(base / f"broker-{node}", *shared, *extra, *own,
                                         "--override", f"node.id={node}", port=port,
                                         probe=probe).start())
        bootstrap = ",".join(f"127.0.0.1:{p}" for p in PORTS.values())
        print(f"headwater cluster up: 3 brokers on the shared log"
              f"{' (secured)' if pki else ''}\n"
              f"  bootstrap.servers={bootstrap}\n{told}"
              f"  PostgreSQL {redact_dsn(dsn)}\n  versitygw {gateway.endpoint}\n"
              f"  broker logs {base}/broker-N-broker.log\nCtrl-C stops them all.",
              flush=True)
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one stop, however many asked
        for proc in brokers:
            proc.stop()
        gateway.kill()
        postgres.stop()
        print("stopped", flush=True)
    return 0


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _interrupt)
    sys.exit(main())
