"""Every configuration key headwater reads, declared once: its type, default, scope,
whether AlterConfigs may change it, whether it is secret, and what validation allows.

`BrokerConfig` (headwater/config.py) takes every default from here, validation reads the
types, ranges and allowed values, DescribeConfigs the sensitivity, and
`docs/configuration.md` is generated from it (`python -m headwater.config_registry
--markdown`). To add a key: declare a `Setting` in the module of its area
(broker_keys.py, topic_keys.py, coordinator_keys.py, resource_keys.py for the GROUP and
CLIENT_METRICS resources), then read it with
`config.get_str` / `get_int` / `get_bool` without a default of your own.
"""

from __future__ import annotations

from collections.abc import Iterable

from . import broker_keys, coordinator_keys, resource_keys, topic_keys
from .model import Scope, Setting, Type

__all__ = ["BROKER_DEFAULTS", "DYNAMIC_BROKER_KEYS", "REGISTRY", "SETTINGS",
           "TOPIC_CONFIG_KEYS", "TOPIC_CONFIG_SYNONYMS", "TOPIC_ONLY_DEFAULTS", "Scope",
           "Setting", "Type", "broker_default", "default", "is_sensitive", "lookup",
           "scoped"]

SETTINGS: tuple[Setting, ...] = (*broker_keys.ALL, *coordinator_keys.ALL, *topic_keys.ALL,
                                  *resource_keys.ALL)


def _index(settings: Iterable[Setting]) -> dict[str, Setting]:
    out: dict[str, Setting] = {}
    for setting in settings:
        if setting.name in out:
            raise ValueError(f"config key {setting.name} declared twice")
        out[setting.name] = setting
    return out


#: Name -> declaration, every scope (no name is used by two).
REGISTRY: dict[str, Setting] = _index(SETTINGS)

# ---- views ----------------------------------------------------------------------------

#: Broker keys with a default (Kafka's names and values, strings as in a properties file):
#: what a broker describes beside the keys set explicitly.
BROKER_DEFAULTS: dict[str, str] = {
    s.name: s.default for s in SETTINGS if s.is_broker and s.default is not None}

#: Topic key -> the broker key it defaults to (Kafka's LogConfig synonyms).
TOPIC_CONFIG_SYNONYMS: dict[str, str] = {
    s.name: s.synonym or s.name for s in SETTINGS
    if s.scope is Scope.BOTH or (s.scope is Scope.TOPIC and s.synonym is not None)}

#: Topic keys with no broker default, and their defaults.
TOPIC_ONLY_DEFAULTS: dict[str, str] = {
    s.name: s.default or "" for s in SETTINGS if s.scope is Scope.TOPIC and s.synonym is None}

TOPIC_CONFIG_KEYS = frozenset(s.name for s in SETTINGS if s.is_topic)

#: Broker keys AlterConfigs may change that set a topic key's default -> that topic key:
#: the synonyms (Kafka's DynamicLogConfig) and their time-unit variants.
DYNAMIC_BROKER_KEYS: dict[str, str] = {
    **{broker_key: topic_key for topic_key, broker_key in TOPIC_CONFIG_SYNONYMS.items()},
    **{s.name: s.unit_of for s in SETTINGS if s.unit_of is not None},
}


def lookup(key: str) -> Setting | None:
    return REGISTRY.get(key)


def scoped(scope: Scope) -> tuple[Setting, ...]:
    """The keys of one scope, in declaration order."""
    return tuple(s for s in SETTINGS if s.scope is scope)


def default(key: str) -> str | None:
    """The registry's default of a key (None: no default, or not declared)."""
    setting = REGISTRY.get(key)
    return None if setting is None else setting.default


def broker_default(key: str) -> str | None:
    """The registry's default of a broker key (None: none, or no broker key)."""
    setting = REGISTRY.get(key)
    return setting.default if setting is not None and setting.is_broker else None


def is_sensitive(key: str) -> bool:
    """Whether a broker key's value is secret, also under Kafka's per-listener prefixes
    (`listener.name.<listener>[.<mechanism>].<key>`)."""
    setting = REGISTRY.get(key)
    if setting is not None and setting.is_broker:
        return setting.is_sensitive
    if key.startswith("listener.name."):
        parts = key.split(".")
        return any(is_sensitive(".".join(parts[n:])) for n in (3, 4) if len(parts) > n)
    return False
