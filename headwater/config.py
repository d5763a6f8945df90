"""Broker and topic configuration, by Kafka's names and with Kafka's defaults.

A `server.properties` file and `--override key=value` pairs feed `BrokerConfig`.
Topic-level keys (`retention.ms`, `segment.bytes`, ...) default to the matching broker
key (`log.retention.ms`, `log.segment.bytes`, ...), exactly as in Kafka. Every key, with
its default, type, range and whether it is dynamic, is declared once in
`headwater/config_registry/`; `BrokerConfig` falls back to those defaults and validation
reads those types and ranges.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from . import config_registry as registry
from .config_providers import ProviderError
from .config_providers import resolve as resolve_references
from .config_registry import (
    BROKER_DEFAULTS,
    DYNAMIC_BROKER_KEYS,
    TOPIC_CONFIG_KEYS,
    TOPIC_CONFIG_SYNONYMS,
    TOPIC_ONLY_DEFAULTS,
    Setting,
    Type,
)

__all__ = ["BROKER_DEFAULTS", "DEFAULT", "DLQ_BROKER_KEYS", "DYNAMIC_BROKER_KEYS",
           "DYNAMIC_CLUSTER", "DYNAMIC_NODE", "STATIC", "STORED_BROKER_KEYS",
           "TOPIC_CONFIG_KEYS", "TOPIC_CONFIG_SYNONYMS", "TOPIC_ONLY_DEFAULTS", "BrokerConfig",
           "ConfigError", "LogConfig", "parse_properties", "validate_dynamic_broker_config",
           "validate_topic_config"]

# Every key, its default, type and range is declared once, in headwater/config_registry/;
# what follows are views of it.

# Kafka's dynamic broker configs that headwater accepts and stores without effect
# (config_registry/broker_keys.py says why).
STORED_BROKER_KEYS = frozenset(s.name for s in registry.SETTINGS if s.stored)

# Other broker keys AlterConfigs may change that are no topic key's default (KIP-1191's).
DLQ_BROKER_KEYS = frozenset(s.name for s in registry.SETTINGS
                            if s.is_broker and s.dynamic and not s.stored
                            and s.name not in DYNAMIC_BROKER_KEYS)


class ConfigError(ValueError):
    """A config key or value that Kafka would reject (INVALID_CONFIG)."""


def parse_properties(text: str) -> dict[str, str]:
    """Parse a Java-style properties file: `key=value` or `key: value`, `#`/`!` comments."""
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in line:
                key, _, value = line.partition(sep)
                out[key.strip()] = value.strip()
                break
        else:
            out[line] = ""
    return out


# Where a broker config value comes from, strongest first (Kafka's ConfigSource order).
DYNAMIC_NODE, DYNAMIC_CLUSTER, STATIC, DEFAULT = "node", "cluster", "static", "default"


class BrokerConfig:
    """Broker configuration: defaults, overlaid by a properties file and overrides
    (static), overlaid by dynamic configs from the metadata log (AlterConfigs on the
    BROKER resource: "" for the cluster-wide default, the node id for this broker)."""

    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        self._explicit: dict[str, str] = dict(values or {})
        self._cluster: dict[str, str] = {}
        self._node: dict[str, str] = {}
        self._values = {**BROKER_DEFAULTS, **self._explicit}

    def set_dynamic(self, cluster: Mapping[str, str], node: Mapping[str, str]) -> bool:
        """Install the dynamic layers; True when anything changed."""
        if dict(cluster) == self._cluster and dict(node) == self._node:
            return False
        self._cluster, self._node = dict(cluster), dict(node)
        self._values = {**BROKER_DEFAULTS, **self._explicit, **self._cluster, **self._node}
        return True

    def layers(self, key: str) -> list[tuple[str, str]]:
        """(source, value) of every layer that sets `key`, strongest first."""
        out = [(source, layer[key]) for source, layer in (
            (DYNAMIC_NODE, self._node), (DYNAMIC_CLUSTER, self._cluster),
            (STATIC, self._explicit)) if key in layer]
        if key in BROKER_DEFAULTS:
            out.append((DEFAULT, BROKER_DEFAULTS[key]))
        return out

    def source(self, key: str) -> str:
        found = self.layers(key)
        return found[0][0] if found else DEFAULT

    @classmethod
    def load(cls, path: str | Path | None, overrides: Mapping[str, str]) -> BrokerConfig:
        values: dict[str, str] = {}
        if path:
            values.update(parse_properties(Path(path).read_text()))
        values.update(overrides)
        try:  # `${provider:path:key}` references (config_providers.py)
            return cls(resolve_references(values, parse_properties))
        except ProviderError as exc:
            raise ConfigError(str(exc)) from None

    def get(self, key: str, default: str | None = None) -> str | None:
        value = self._values.get(key)
        if value is None or value == "":
            return default
        return value

    def get_str(self, key: str) -> str:
        """The value, else (unset or empty) the registry's default, else ""."""
        return self.get(key) or registry.broker_default(key) or ""

    def get_int(self, key: str, default: int | None = None) -> int:
        """The value as an int; unset or empty: `default`, else the registry's default."""
        value = self.get(key)
        if value is None:
            if default is not None:
                return default
            value = registry.broker_default(key)
            if not value:
                raise ConfigError(f"missing config {key}")
        return int(value)

    def get_bool(self, key: str) -> bool:
        return (self.get(key) or "false").lower() == "true"

    def is_explicit(self, key: str) -> bool:
        return key in self._explicit

    def items(self) -> list[tuple[str, str]]:
        return sorted(self._values.items())

    def topic_default(self, topic_key: str) -> str:
        """The broker-wide default value for a topic-level config key."""
        if topic_key == "retention.ms":
            for key, mult in (("log.retention.ms", 1), ("log.retention.minutes", 60_000),
                              ("log.retention.hours", 3_600_000)):
                value = self.get(key)
                if value is not None:
                    return str(int(value) * mult)
        if topic_key == "segment.ms":
            value = self.get("log.roll.ms")
            if value is not None:
                return value
            return str(self.get_int("log.roll.hours") * 3_600_000)
        if topic_key in TOPIC_ONLY_DEFAULTS:
            return TOPIC_ONLY_DEFAULTS[topic_key]
        # An empty broker key: the topic key's own fallback (flush.ms), else "".
        return (self.get(TOPIC_CONFIG_SYNONYMS[topic_key]) or registry.default(topic_key)
                or "")


def _invalid(key: str, value: str, reason: str | None = None) -> ConfigError:
    return ConfigError(f"Invalid value {value} for configuration {key}"
                       + (f": {reason}" if reason else ""))


def validate_dynamic_broker_config(key: str, value: str | None) -> None:
    """Raise ConfigError unless `key` may be changed dynamically to `value`."""
    setting = registry.lookup(key)
    if setting is None or not setting.is_broker or not setting.dynamic:
        raise ConfigError(f"Cannot update these configs dynamically: {key}")
    if value is None:
        return
    topic_key = DYNAMIC_BROKER_KEYS.get(key)
    if topic_key is None:  # stored, or a dead-letter key: only the type is checked
        if setting.type is Type.BOOLEAN:
            _check_boolean(setting, value)
        elif setting.type in (Type.INT, Type.LONG, Type.DOUBLE):
            try:
                float(value)
            except ValueError:
                raise _invalid(key, value, "Not a number") from None
        return
    if setting.unit_of is not None:  # log.retention.hours, ...: a whole number
        if not value.strip().lstrip("-").isdigit():
            raise _invalid(key, value)
        return
    validate_topic_config(topic_key, value)


def validate_topic_config(key: str, value: str | None) -> None:
    """Raise ConfigError for an unknown topic key or a value Kafka would reject."""
    setting = registry.lookup(key)
    if setting is None or not setting.is_topic:
        raise ConfigError(f"Unknown topic config name: {key}")
    if value is None:
        return
    check = _CHECKS.get(setting.type)
    if check is not None:
        check(setting, value)


def _check_list(setting: Setting, value: str) -> None:
    """ValidList: each item allowed, none twice, none empty."""
    items = value.replace(" ", "").split(",")
    if setting.valid and (len(set(items)) != len(items)
                          or not all(item in setting.valid for item in items)):
        raise _invalid(setting.name, value, "String must be one of: "
                       + ", ".join(setting.valid))


def _check_string(setting: Setting, value: str) -> None:
    if setting.valid and value not in setting.valid:
        raise _invalid(setting.name, value, "String must be one of: "
                       + ", ".join(setting.valid))


def _check_boolean(setting: Setting, value: str) -> None:
    if value.lower() not in ("true", "false"):
        raise _invalid(setting.name, value, "Expected value to be either true or false")


def _check_double(setting: Setting, value: str) -> None:
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    low, high = setting.at_least, setting.at_most
    if not (low is None or number >= low) or not (high is None or number <= high) \
            or number != number:
        raise _invalid(setting.name, value, f"must be a number between {low} and {high}")


def _check_integer(setting: Setting, value: str) -> None:
    kind, bits = ("INT", 31) if setting.type is Type.INT else ("LONG", 63)
    try:
        number: int | None = int(value)
    except ValueError:
        number = None
    if number is None or not -(2**bits) <= number < 2**bits:  # Java's parseInt/parseLong
        raise _invalid(setting.name, value, f"Not a number of type {kind}")
    if setting.at_least is not None and number < setting.at_least:
        raise _invalid(setting.name, value, f"Value must be at least {setting.at_least}")
    if setting.at_most is not None and number > setting.at_most:
        raise _invalid(setting.name, value, f"Value must be no more than {setting.at_most}")


_CHECKS = {Type.LIST: _check_list, Type.STRING: _check_string, Type.BOOLEAN: _check_boolean,
           Type.DOUBLE: _check_double, Type.INT: _check_integer, Type.LONG: _check_integer}


@dataclass(frozen=True, slots=True)
class LogConfig:
    """The effective, typed topic configuration a partition log runs with."""

    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    retention_ms: int = 604800000
    retention_bytes: int = -1
    max_message_bytes: int = 1048588
    max_decompressed_message_bytes: int = 2147483639
    index_interval_bytes: int = 4096
    message_timestamp_type: str = "CreateTime"
    cleanup_policy: str = "delete"
    flush_messages: int = 9223372036854775807
    flush_ms: int = 9223372036854775807
    fsync_always: bool = False
    min_insync_replicas: int = 1
    delete_retention_ms: int = 86400000
    min_cleanable_dirty_ratio: float = 0.5
    timestamp_before_max_ms: int = 9223372036854775807
    timestamp_after_max_ms: int = 3600000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = 9223372036854775807
    compression_type: str = "producer"
    compression_levels: tuple[tuple[int, int], ...] = ()  # (codec id, level) pairs

    def compression_level(self, codec: int) -> int | None:
        return dict(self.compression_levels).get(codec)

    @classmethod
    def resolve(cls, broker: BrokerConfig, topic_overrides: Mapping[str, str]) -> LogConfig:
        def value(key: str) -> str:
            v = topic_overrides.get(key)
            return v if v is not None else broker.topic_default(key)

        return cls(
            segment_bytes=int(value("segment.bytes")),
            segment_ms=int(value("segment.ms")),
            retention_ms=int(value("retention.ms")),
            retention_bytes=int(value("retention.bytes")),
            max_message_bytes=int(value("max.message.bytes")),
            max_decompressed_message_bytes=int(value("max.decompressed.message.bytes")),
            index_interval_bytes=int(value("index.interval.bytes")),
            message_timestamp_type=value("message.timestamp.type"),
            cleanup_policy=value("cleanup.policy"),
            flush_messages=int(value("flush.messages")),
            flush_ms=int(value("flush.ms")),
            fsync_always=(broker.get("headwater.fsync") == "always"),
            min_insync_replicas=int(value("min.insync.replicas")),
            delete_retention_ms=int(value("delete.retention.ms")),
            min_cleanable_dirty_ratio=float(value("min.cleanable.dirty.ratio")),
            timestamp_before_max_ms=int(value("message.timestamp.before.max.ms")),
            timestamp_after_max_ms=int(value("message.timestamp.after.max.ms")),
            min_compaction_lag_ms=int(value("min.compaction.lag.ms")),
            max_compaction_lag_ms=int(value("max.compaction.lag.ms")),
            compression_type=value("compression.type"),
            compression_levels=((1, int(value("compression.gzip.level"))),
                                (3, int(value("compression.lz4.level"))),
                                (4, int(value("compression.zstd.level")))),
        )
