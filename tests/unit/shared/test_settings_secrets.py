"""The shared log's secrets in lines: the DSN's password (in its user info, or as
`password=` / `sslpassword=`) and the S3 secret key are `***` wherever settings print
them; the DSN's TLS files are checked when the settings are read."""

from __future__ import annotations

from pathlib import Path

import pytest

from headwater.config import BrokerConfig
from headwater.shared.settings import SettingError, SharedSettings


def settings(dsn: str, **extra: str) -> SharedSettings:
    return SharedSettings.from_config(BrokerConfig({
        "headwater.storage": "shared", "headwater.shared.database": dsn,
        "headwater.shared.objects": "s3://bucket", **extra}))


def test_the_dsn_is_printed_without_its_secrets() -> None:
    shared = settings("postgresql://hw:pa%40ss-w0rd@db.example:5432/hw?sslmode=verify-full"
                      "&sslpassword=key-pass-123&application_name=x&password=other-pass",
                      **{"headwater.shared.objects.secret.key": "s3-secret-key"})
    shown = shared.redacted_database()
    assert shown == ("postgresql://hw:***@db.example:5432/hw?sslmode=verify-full"
                     "&sslpassword=***&application_name=x&password=***")
    assert "secret" not in repr(shared) and "pa%40ss" not in repr(shared)
    line = shared.masked("refused pa@ss-w0rd, pa%40ss-w0rd, key-pass-123, other-pass and "
                         "s3-secret-key")
    assert line == "refused ***, ***, ***, *** and ***"
    assert settings("postgresql://hw@h/db").redacted_database() == "postgresql://hw@h/db"
    assert settings("postgresql://h/db?password=pass-w0rd&sslpassword=&user=hw"
                    ).redacted_database() == "postgresql://h/db?password=***&sslpassword=***&user=hw"


def test_a_dsn_that_is_not_postgresql_is_refused_without_its_password() -> None:
    with pytest.raises(SettingError) as err:
        settings("postgres+asyncpg://hw:pass-w0rd-1@h/db?sslpassword=key-pass")
    assert str(err.value) == ("headwater.shared.database='postgres+asyncpg://hw:***@h/db"
                              "?sslpassword=***': not a postgresql:// DSN")


def test_a_short_secret_is_not_searched_for() -> None:
    """A password of two letters would garble every line it met."""
    assert settings("postgresql://hw:ab@h/db").masked("cannot connect") == "cannot connect"


def test_the_dsn_tls_files_and_the_truststore_are_checked(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    assert settings(f"postgresql://h/db?sslmode=verify-full&sslrootcert={ca}").database
    with pytest.raises(SettingError, match=rf"headwater.shared.database: sslrootcert="
                                           rf"{tmp_path}/absent.pem cannot be read"):
        settings(f"postgresql://h/db?sslmode=verify-full&sslrootcert={tmp_path}/absent.pem")
    with pytest.raises(SettingError, match="sslkey="):
        settings(f"postgresql://h/db?sslcert={ca}&sslkey={tmp_path}/absent.key")
    with pytest.raises(SettingError, match=r"headwater.shared.objects.ssl.truststore.location "
                                           r"is set but .*endpoint=http://s3:9000 is plain"):
        settings("postgresql://h/db", **{
            "headwater.shared.objects.endpoint": "http://s3:9000",
            "headwater.shared.objects.ssl.truststore.location": str(ca)})
