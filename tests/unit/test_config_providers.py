"""Kafka's config providers (config_providers.py): `${provider:path:key}` in a broker
setting resolved from a properties file, a directory or the environment, when declared;
left as written when not; a reference that cannot be resolved is one error naming the
setting and the reference, never a secret."""

from __future__ import annotations

from pathlib import Path

import pytest

from headwater.config import BrokerConfig, ConfigError, parse_properties
from headwater.config_providers import ProviderError, resolve

FILE = "org.apache.kafka.common.config.provider.FileConfigProvider"
DIRECTORY = "org.apache.kafka.common.config.provider.DirectoryConfigProvider"
ENV = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"


def declared(**classes: str) -> dict[str, str]:
    return {"config.providers": ",".join(classes),
            **{f"config.providers.{n}.class": c for n, c in classes.items()}}


def test_file_directory_and_environment_references_are_resolved(tmp_path: Path) -> None:
    (tmp_path / "secrets.properties").write_text("broker.password=from-file\n")
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "key.pem").write_text("-----PEM-----\n")
    values = {**declared(file=FILE, dir=DIRECTORY, env=ENV),
              "sasl.jaas.config": f'password="${{file:{tmp_path}/secrets.properties:'
                                  'broker.password}" other="${env:OTHER}"',
              "ssl.keystore.key": f"${{dir:{tmp_path}/keys:key.pem}}",
              "log.dirs": "/data"}
    out = resolve(values, parse_properties, environ={"OTHER": "from-env"})
    assert out["sasl.jaas.config"] == 'password="from-file" other="from-env"'
    assert out["ssl.keystore.key"] == "-----PEM-----\n"
    assert out["log.dirs"] == "/data"


def test_a_reference_to_an_undeclared_provider_stays_as_written() -> None:
    values = {**declared(env=ENV), "a": "${vault:secret/x:y}", "b": "${env:V}"}
    assert resolve(values, parse_properties, environ={"V": "v"}) == {**values, "b": "v"}
    assert resolve({"a": "${env:V}"}, parse_properties, environ={"V": "v"}) == {"a": "${env:V}"}


@pytest.mark.parametrize(("reference", "why"), [
    ("${env:MISSING}", "the environment has no MISSING"),
    ("${file:/nonexistent/secrets.properties:k}", "cannot read /nonexistent"),
    ("${file:{tmp}/secrets.properties:absent}", "has no key absent"),
    ("${file:/etc/hostname:k}", "is not under config.providers.file.param.allowed.paths"),
])
def test_an_unresolvable_reference_names_the_setting_not_a_value(
        tmp_path: Path, reference: str, why: str) -> None:
    (tmp_path / "secrets.properties").write_text("k=the-secret\n")
    values = {**declared(file=FILE, env=ENV),
              "config.providers.file.param.allowed.paths": f"{tmp_path},/nonexistent",
              "sasl.jaas.config": reference.replace("{tmp}", str(tmp_path))}
    with pytest.raises(ProviderError) as failed:
        resolve(values, parse_properties, environ={})
    assert str(failed.value).startswith("sasl.jaas.config: ${")
    assert why in str(failed.value) and "the-secret" not in str(failed.value)


def test_a_provider_of_an_unknown_class_is_refused_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"config\.providers\.vault\.class='com\.Vault'"):
        BrokerConfig.load(None, {"config.providers": "vault",
                                 "config.providers.vault.class": "com.Vault"})


def test_the_environment_provider_honours_its_allowlist() -> None:
    values = {**declared(env=ENV), "config.providers.env.param.allowlist.pattern": "HW_.*",
              "a": "${env:HOME}"}
    with pytest.raises(ProviderError, match="not allowed"):
        resolve(values, parse_properties, environ={"HOME": "/root"})
