"""The shared log's engines over TLS (issue 35): a PostgreSQL that takes only TLS on TCP
(`hostssl`, a password and a client certificate) reached with libpq's DSN parameters
(`sslmode=verify-full&sslrootcert=...&sslcert=...&sslkey=...`), the password also from
`PGPASSWORD` or `PGPASSFILE`; versitygw over HTTPS trusted through
`headwater.shared.objects.ssl.truststore.location`. A CA that did not sign the server's
certificate is one line naming the setting, given at once (no retry would mend it),
the secrets masked. One PKI, one TLS PostgreSQL and one versitygw for the module."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from headwater.config import BrokerConfig
from headwater.shared.database import DatabaseUnavailable, open_pool
from headwater.shared.objects import ObjectStore, ObjectStoreUnavailable
from headwater.shared.settings import SettingError, SharedSettings
from tests.support.engines import PostgresServer, VersityGateway, create_database
from tests.support.secured import make_pki

pytestmark = pytest.mark.timeout(120)
T = TypeVar("T")
PASSWORD = f"pg-{uuid.uuid4().hex}"  # distinctive: searched for in every message
TRUSTSTORE = "headwater.shared.objects.ssl.truststore.location"


def run(coro: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(coro())  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA that signed none of the servers' certificates."""
    return make_pki(tmp_path_factory.mktemp("other-pki")) / "ca.pem"


@pytest.fixture(scope="module")
def tls_postgres(tmp_path_factory: pytest.TempPathFactory, pki: Path
                 ) -> Iterator[PostgresServer]:
    server = PostgresServer(tmp_path_factory.mktemp("pg"), pki=pki, password=PASSWORD)
    yield server.start()
    server.remove()


@pytest.fixture(scope="module")
def tls_versitygw(tmp_path_factory: pytest.TempPathFactory, pki: Path
                  ) -> Iterator[VersityGateway]:
    server = VersityGateway(tmp_path_factory.mktemp("gw"), pki=pki)
    yield server.start()
    server.kill()


@pytest.fixture(scope="module")
def database(tls_postgres: PostgresServer) -> str:
    """A database of the module's on the TLS server (its name)."""
    name = f"db_{uuid.uuid4().hex[:12]}"
    run(lambda: create_database(tls_postgres, name))
    return name


def settings(dsn: str, **extra: str) -> SharedSettings:
    return SharedSettings.from_config(BrokerConfig({
        "headwater.storage": "shared", "headwater.shared.database": dsn,
        "headwater.shared.objects": "file:///tmp/unused", **extra}))


def connection_tls(dsn: str) -> tuple[bool, str | None]:
    """Whether open_pool's connection is TLS, and the client certificate's subject."""
    async def story() -> tuple[bool, str | None]:
        pool = await open_pool(settings(dsn))
        try:
            async with pool.acquire() as conn:
                row = await conn.fetchrow("SELECT ssl, client_dn FROM pg_stat_ssl "
                                          "WHERE pid = pg_backend_pid()")
        finally:
            await pool.close()
        assert row is not None
        return bool(row["ssl"]), row["client_dn"]
    return run(story)


def test_the_database_over_tls_verified_with_a_client_certificate(
        tls_postgres: PostgresServer, database: str) -> None:
    assert connection_tls(tls_postgres.dsn_for(database)) == (True, "/CN=app")


@pytest.mark.parametrize("source", ["PGPASSWORD", "PGPASSFILE"])
def test_the_password_may_come_from_libpq_s_environment(
        tls_postgres: PostgresServer, database: str, source: str,
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if source == "PGPASSWORD":
        monkeypatch.setenv("PGPASSWORD", PASSWORD)
    else:
        passfile = tmp_path / "pgpass"
        passfile.write_text(f"127.0.0.1:{tls_postgres.port}:*:headwater:{PASSWORD}\n")
        passfile.chmod(0o600)
        monkeypatch.setenv("PGPASSFILE", str(passfile))
    assert connection_tls(tls_postgres.dsn_for(database, password="")) == (True, "/CN=app")


def refused(dsn: str) -> DatabaseUnavailable:
    started = time.monotonic()
    with pytest.raises(DatabaseUnavailable) as err:
        run(lambda: open_pool(settings(dsn)))
    assert time.monotonic() - started < 10  # no retry of its own
    return err.value


def test_a_ca_that_did_not_sign_the_server_s_certificate_is_one_line_at_once(
        tls_postgres: PostgresServer, database: str, other_ca: Path) -> None:
    err = refused(tls_postgres.dsn_for(database, rootcert=other_ca))
    message = str(err)
    assert message.startswith("headwater.shared.database=postgresql://headwater:***@127.0.0.1:")
    assert f"sslrootcert={other_ca}" in message
    assert "the server's certificate did not verify" in message
    assert PASSWORD not in message and "\n" not in message
    assert not err.retry  # a start does not wait on it


def test_a_refused_password_is_one_line_at_once(tls_postgres: PostgresServer,
                                                database: str) -> None:
    wrong = f"wrong-{uuid.uuid4().hex}"
    err = refused(tls_postgres.dsn_for(database, password=wrong))
    assert "password authentication failed" in str(err)
    assert wrong not in str(err) and not err.retry


def test_the_database_without_tls_is_refused(tls_postgres: PostgresServer,
                                             database: str) -> None:
    plain = tls_postgres.dsn_for(database).split("?")[0] + "?sslmode=disable"
    assert "no pg_hba.conf entry" in str(refused(plain))


def store(versitygw: VersityGateway, **extra: str) -> ObjectStore:
    config = {**versitygw.settings(f"t-{uuid.uuid4().hex[:6]}"), **extra}
    return ObjectStore(settings("postgresql://unused/db", **config), timeout_s=5)


def test_the_object_store_over_https_with_the_truststore(tls_versitygw: VersityGateway
                                                         ) -> None:
    objects = store(tls_versitygw)
    assert objects.endpoint.startswith("https://")

    async def story() -> bytes:
        await objects.check()
        key = objects.new_key("wal/")
        await objects.put_new(key, b"over tls")
        return await objects.get(key)

    assert run(story) == b"over tls"


@pytest.mark.parametrize("trusting", ["another CA", "the system's CAs"])
def test_a_certificate_that_does_not_verify_names_the_truststore(
        tls_versitygw: VersityGateway, other_ca: Path, trusting: str) -> None:
    objects = store(tls_versitygw, **{TRUSTSTORE: str(other_ca) if trusting == "another CA"
                                      else ""})
    started = time.monotonic()
    with pytest.raises(ObjectStoreUnavailable) as err:
        run(objects.check)
    assert time.monotonic() - started < 10
    message = str(err.value)
    if trusting == "another CA":
        assert message.startswith(f"{TRUSTSTORE}={other_ca}: the certificate of "
                                  f"headwater.shared.objects.endpoint={tls_versitygw.endpoint} "
                                  "did not verify (")
    else:
        assert message.startswith("headwater.shared.objects=s3://headwater/")
        assert f"against the system's CAs: set {TRUSTSTORE}" in message
    assert "\n" not in message and not err.value.retry
    assert tls_versitygw.secret_key not in message


def test_a_truststore_that_is_not_pem_certificates_names_the_setting(
        tls_versitygw: VersityGateway, tmp_path: Path) -> None:
    garbage = tmp_path / "ca.pem"
    garbage.write_text("not a certificate\n")
    for path, why in ((garbage, "not PEM certificates"),
                      (tmp_path / "absent.pem", "cannot be read")):
        with pytest.raises(SettingError) as err:
            store(tls_versitygw, **{TRUSTSTORE: str(path)})
        assert str(err.value).startswith(f"{TRUSTSTORE}={path}: {why}")
