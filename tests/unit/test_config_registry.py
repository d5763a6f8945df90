"""The configuration registry (headwater/config_registry/): every key declared once, the
defaults as they have always been, validation's messages, the views and the generated
reference page."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from headwater import client_metrics
from headwater import config_registry as registry
from headwater.api.configs import describe_broker_configs
from headwater.config import (
    BROKER_DEFAULTS,
    DLQ_BROKER_KEYS,
    STORED_BROKER_KEYS,
    TOPIC_CONFIG_SYNONYMS,
    BrokerConfig,
    ConfigError,
    validate_dynamic_broker_config,
    validate_topic_config,
)
from headwater.config_registry import REGISTRY, SETTINGS, Scope, Type
from headwater.config_registry.__main__ import main
from headwater.config_registry.markdown import render
from headwater.group import group_configs
from headwater.group.config import GroupConfig
from headwater.share.coordinator_shard import ShareCoordinatorConfig
from headwater.shared.settings import SharedSettings
from headwater.txn.config import TxnConfig

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "headwater"
REGISTRY_DIR = PACKAGE / "config_registry"

# ---- declared once -----------------------------------------------------------------


def test_no_key_declared_twice() -> None:
    names = [s.name for s in SETTINGS]
    assert len(names) == len(set(names)) == len(REGISTRY)
    # ... and in the source: each name is the first argument of one declaration.
    declared: list[str] = []
    for path in REGISTRY_DIR.glob("*_keys.py"):
        declared += re.findall(r'\b(?:S|topic|both|_group|Setting)\(\s*"([a-z0-9._-]+)"',
                               path.read_text())
        declared += re.findall(r'^\s*\("([a-z0-9._-]+)", [A-Z]+, "', path.read_text(), re.M)
    assert sorted(declared) == sorted(names)


def test_a_key_declared_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="declared twice"):
        registry._index([*SETTINGS[:2], SETTINGS[0]])


# Dicts of defaults, and config reads with a default of their own: outside the registry
# they would declare a key (or its default) a second time.
_DEFAULTS_DICT = re.compile(  # a dict literal (a comprehension over the registry is a view)
    r"^\s*[A-Z_]*DEFAULTS\s*(?::[^=\n]*)?=\s*\{\s*(?:[\"']|[A-Z][A-Z_]*\s*:)", re.M)
_LITERAL_DEFAULT = re.compile(
    r"\b(?:config|cfg)\.get(?:_int|_str|_bool)?\(\s*\"([a-z0-9._-]+)\"\s*,\s*"
    r"(-?\d|\"|'|[A-Z_]+\s*\)|True|False|None)")
_OR_LITERAL = re.compile(r"\b(?:config|cfg)\.get\(\s*\"([a-z0-9._-]+)\"\s*\)\s*or\s+(?!\"\")[\"'\d-]")
def _sources() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py"))
            if REGISTRY_DIR not in p.parents]


def _where(path: Path, text: str, match: re.Match[str]) -> str:
    return f"{path.relative_to(ROOT)}:{text[:match.start()].count(chr(10)) + 1}"


def test_no_defaults_outside_the_registry() -> None:
    found = []
    for path in _sources():
        text = path.read_text()
        found += [f"{_where(path, text, m)}: DEFAULTS dict"
                  for m in _DEFAULTS_DICT.finditer(text)]
        found += [f"{_where(path, text, m)}: {m.group(1)} read with its own default"
                  for rx in (_LITERAL_DEFAULT, _OR_LITERAL) for m in rx.finditer(text)
                  if m.group(1) in REGISTRY]
    assert found == []


_READS = (re.compile(r"\bconfig\.(?:get|get_int|get_str|get_bool|layers|source)\(\s*"
                     r"\"([a-z0-9._-]+)\""),
          re.compile(r"\blistener_config\([^,]+,[^,]+,\s*\"([a-z0-9._-]+)\""))


def test_every_key_read_is_declared() -> None:
    """A broker key read by name (`config.get_int("...")`, `listener_config(..., "...")`)
    is a registry key."""
    unknown = []
    for path in _sources():
        text = path.read_text()
        unknown += [f"{_where(path, text, m)}: {m.group(1)}"
                    for rx in _READS for m in rx.finditer(text) if m.group(1) not in REGISTRY]
    assert unknown == []


def test_the_scan_finds_what_it_looks_for() -> None:
    sample = ('X_DEFAULTS = {\n    "a": "1"}\n'
              'Y_DEFAULTS = {KEY: "1"}\n'
              'VIEW_DEFAULTS = {s.name: s.default for s in SETTINGS}\n'
              'a = config.get_int("headwater.shared.lease.ms", 10_000)\n'
              'b = self.config.get("log.dirs") or "./data"\n'
              'c = config.get_int("headwater.max.partitions", MAX_PARTITIONS)\n'
              'd = config.get_int("headwater.max.open.partition.files", capacity())\n'
              'e = cfg.get("share.isolation.level", "read_uncommitted")\n')
    assert len(_DEFAULTS_DICT.findall(sample)) == 2
    assert [m.group(1) for m in _LITERAL_DEFAULT.finditer(sample)] == [
        "headwater.shared.lease.ms", "headwater.max.partitions", "share.isolation.level"]
    assert [m.group(1) for m in _OR_LITERAL.finditer(sample)] == ["log.dirs"]
    reads = [m.group(1) for rx in _READS for m in rx.finditer(
        sample + 'listener_config(config, listener.name, "sasl.jaas.config", "PLAIN")')]
    assert reads == ["headwater.shared.lease.ms", "log.dirs", "headwater.max.partitions",
                     "headwater.max.open.partition.files", "sasl.jaas.config"]


# ---- defaults -----------------------------------------------------------------------


@pytest.mark.parametrize(("key", "value"), [
    ("offsets.topic.num.partitions", "50"),
    ("headwater.coordinator.load.delay.ms", "0"),
    ("headwater.shared.lease.ms", "10000"),
    ("log.retention.hours", "168"),
    ("broker.session.timeout.ms", "9000"),
    ("headwater.shared.merge.bytes", str(8 << 20)),
    ("max.request.partition.size.limit", "2000"),
    ("group.share.max.share.sessions", "2000"),
    ("headwater.max.partitions", "200000"),
    ("listeners", "PLAINTEXT://127.0.0.1:9092"),
    ("transaction.max.timeout.ms", "900000"),
    ("share.coordinator.snapshot.update.records.per.snapshot", "500"),
    ("headwater.shared.objects.region", "us-east-1"),
    ("message.max.bytes", "1048588"),
    ("log.retention.ms", ""),
])
def test_defaults(key: str, value: str) -> None:
    assert registry.default(key) == value
    assert BROKER_DEFAULTS[key] == value


def test_typed_configs_from_defaults_are_their_dataclass_defaults() -> None:
    config = BrokerConfig()
    assert GroupConfig.from_broker(config) == GroupConfig()
    assert TxnConfig.from_broker(config) == TxnConfig()
    assert ShareCoordinatorConfig.from_broker(config) == ShareCoordinatorConfig()


def test_reads_fall_back_to_the_registry() -> None:
    config = BrokerConfig({"headwater.shared.lease.ms": "", "num.partitions": "3"})
    assert config.get_int("headwater.shared.lease.ms") == 10_000
    assert config.get_int("num.partitions") == 3
    assert config.get_str("headwater.storage") == "local"
    assert config.get_str("broker.rack") == ""
    with pytest.raises(ConfigError, match="missing config log.retention.ms"):
        config.get_int("log.retention.ms")
    shared = SharedSettings.from_config(BrokerConfig({
        "headwater.storage": "shared", "headwater.shared.database": "postgresql://h/db",
        "headwater.shared.objects": "file:///tmp/x"}))
    assert (shared.region, shared.endpoint) == ("us-east-1", "")


# ---- views and flags ----------------------------------------------------------------


def test_views() -> None:
    assert TOPIC_CONFIG_SYNONYMS["retention.ms"] == "log.retention.ms"
    assert TOPIC_CONFIG_SYNONYMS["compression.type"] == "compression.type"
    assert DLQ_BROKER_KEYS == {"errors.deadletterqueue.auto.create.topics.enable",
                               "errors.deadletterqueue.topic.name.prefix"}
    assert "sasl.kerberos.min.time.before.relogin" in STORED_BROKER_KEYS
    assert "log.cleaner.backoff.ms" in STORED_BROKER_KEYS
    for topic_key, broker_key in TOPIC_CONFIG_SYNONYMS.items():
        assert REGISTRY[topic_key].is_topic and REGISTRY[topic_key].dynamic
        assert REGISTRY[broker_key].is_broker and REGISTRY[broker_key].dynamic, broker_key
        assert REGISTRY[broker_key].default is not None


def test_every_setting_is_well_formed() -> None:
    for s in SETTINGS:
        assert s.doc and "\n" not in s.doc, s.name
        if s.scope is not Scope.CLIENT_METRICS:  # those are Kafka's describe texts
            assert s.doc[-1] in ".)", s.name
        if s.type is Type.PASSWORD:
            assert s.is_sensitive
        if s.unit_of is not None:
            assert REGISTRY[s.unit_of].is_topic and s.dynamic
        if s.default and s.type in (Type.INT, Type.LONG):
            int(s.default)


def test_secrets_are_sensitive() -> None:
    for key in ("headwater.shared.objects.secret.key", "headwater.shared.database",
                "ssl.key.password", "ssl.keystore.password", "sasl.jaas.config",
                "listener.name.sasl_ssl.plain.sasl.jaas.config",
                "listener.name.ssl.ssl.key.password"):
        assert registry.is_sensitive(key), key
    for key in ("log.dirs", "listeners", "listener.name.ssl.ssl.keystore.location",
                "headwater.shared.objects.access.key", "no.such.key"):
        assert not registry.is_sensitive(key), key


def test_describe_hides_sensitive_values() -> None:
    config = BrokerConfig({"headwater.shared.objects.secret.key": "s3cr3t",
                           "listener.name.sasl_plaintext.plain.sasl.jaas.config": "x pw",
                           "num.partitions": "3"})
    broker: Any = SimpleNamespace(config=config)
    described = {c["name"]: c for c in describe_broker_configs(broker, "1", None, True)}
    secret = described["headwater.shared.objects.secret.key"]
    assert (secret["value"], secret["is_sensitive"]) == (None, True)
    assert all(s["value"] is None for s in secret["synonyms"])
    jaas = described["listener.name.sasl_plaintext.plain.sasl.jaas.config"]
    assert (jaas["value"], jaas["is_sensitive"]) == (None, True)
    assert (described["num.partitions"]["value"], described["num.partitions"]
            ["is_sensitive"]) == ("3", False)
    assert set(BROKER_DEFAULTS) <= set(described)


def test_group_and_client_metrics_keys_are_registry_views() -> None:
    assert list(group_configs.KEYS) == [s.name for s in SETTINGS if s.scope is Scope.GROUP]
    lock = group_configs.KEYS["share.record.lock.duration.ms"]
    assert (lock.synonym, lock.at_least, lock.bounds) == (
        "group.share.record.lock.duration.ms", 1000,
        ("group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms"))
    assert group_configs.KEYS["share.isolation.level"].bounds is None
    assert {name: group_configs.value({}, name) for name in group_configs.SHARE_KEYS} == {
        "share.session.timeout.ms": "45000", "share.heartbeat.interval.ms": "5000",
        "share.assignment.interval.ms": "1000", "share.record.lock.duration.ms": "30000",
        "share.delivery.count.limit": "5", "share.partition.max.record.locks": "2000",
        "share.auto.offset.reset": "latest", "share.isolation.level": "read_uncommitted",
        "share.renew.acknowledge.enable": "true", "errors.deadletterqueue.topic.name": "",
        "errors.deadletterqueue.copy.record.enable": "false"}
    assert group_configs.value({"share.delivery.count.limit": "7"},
                               "share.delivery.count.limit") == "7"
    assert client_metrics.DEFAULTS == {"interval.ms": "300000", "match": "", "metrics": ""}
    assert (client_metrics.MIN_INTERVAL_MS, client_metrics.MAX_INTERVAL_MS) == (100, 3600000)
    # Neither is a broker key: not described, not a fallback of BrokerConfig.
    assert "interval.ms" not in BROKER_DEFAULTS and "share.isolation.level" not in BROKER_DEFAULTS
    assert BrokerConfig().get_str("share.isolation.level") == ""


# ---- validation (Kafka's messages, as the integration tests expect) -----------------


@pytest.mark.parametrize(("key", "value", "message"), [
    ("no.such.config", "1", "Unknown topic config name: no.such.config"),
    ("cleanup.policy", "bogus", "Invalid value bogus for configuration cleanup.policy: "
     "String must be one of: compact, delete"),
    ("retention.ms", "abc", "Invalid value abc for configuration retention.ms: "
     "Not a number of type LONG"),
    ("segment.bytes", "10", "Invalid value 10 for configuration segment.bytes: "
     "Value must be at least 14"),
    ("compression.type", "brotli", "Invalid value brotli for configuration "
     "compression.type: String must be one of: uncompressed, zstd, lz4, snappy, gzip, "
     "producer"),
    ("max.decompressed.message.bytes", "2147483648", "Invalid value 2147483648 for "
     "configuration max.decompressed.message.bytes: Not a number of type INT"),
    ("compression.zstd.level", "23", "Invalid value 23 for configuration "
     "compression.zstd.level: Value must be no more than 22"),
    ("min.cleanable.dirty.ratio", "2", "Invalid value 2 for configuration "
     "min.cleanable.dirty.ratio: must be a number between 0 and 1"),
    ("preallocate", "yes", "Invalid value yes for configuration preallocate: "
     "Expected value to be either true or false"),
])
def test_topic_validation_messages(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        validate_topic_config(key, value)
    assert str(exc.value) == message


@pytest.mark.parametrize(("key", "value"), [
    ("cleanup.policy", "compact, delete"), ("retention.ms", "-1"), ("segment.bytes", "14"),
    ("min.cleanable.dirty.ratio", "0.25"), ("errors.deadletterqueue.group.enable", "TRUE"),
    ("local.retention.ms", "-2"), ("retention.ms", None)])
def test_valid_topic_values(key: str, value: str | None) -> None:
    validate_topic_config(key, value)


@pytest.mark.parametrize(("key", "value", "message"), [
    ("log.dirs", "/x", "Cannot update these configs dynamically: log.dirs"),
    ("retention.ms", "1", "Cannot update these configs dynamically: retention.ms"),
    ("log.retention.hours", "soon", "Invalid value soon for configuration "
     "log.retention.hours"),
    ("log.retention.ms", "soon", "Invalid value soon for configuration retention.ms: "
     "Not a number of type LONG"),
    ("num.io.threads", "many", "Invalid value many for configuration num.io.threads: "
     "Not a number"),
    ("errors.deadletterqueue.auto.create.topics.enable", "maybe", "Invalid value maybe for "
     "configuration errors.deadletterqueue.auto.create.topics.enable: Expected value to be "
     "either true or false"),
])
def test_dynamic_broker_validation_messages(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        validate_dynamic_broker_config(key, value)
    assert str(exc.value) == message


# ---- the generated reference ---------------------------------------------------------


def test_the_configuration_reference_is_current() -> None:
    """docs/configuration.md is `python -m headwater.config_registry --markdown`: run it
    again after changing the registry."""
    page = (ROOT / "docs" / "configuration.md").read_text()
    assert page == render(), ("docs/configuration.md is out of date: run `python -m "
                              "headwater.config_registry --markdown > docs/configuration.md`")


def test_the_reference_lists_every_key(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--markdown"]) == 0
    page = capsys.readouterr().out
    for s in SETTINGS:
        assert f"| `{s.name}` |" in page, s.name
    assert "| `headwater.shared.lease.ms` | INT | `10000` | no |" in page
    assert "| `retention.ms` | LONG | `log.retention.ms` | yes |" in page
