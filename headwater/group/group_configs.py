"""Group-level configs (the GROUP config resource, type 32): Kafka 4.3's names, types,
defaults, broker bounds and error messages (`GroupConfig`, `GroupCoordinatorConfig`,
`ShareGroupConfig`).

A group config overrides a broker default (its synonym, e.g. `share.session.timeout.ms`
over `group.share.session.timeout.ms`). Overrides are ConfigRecords in the metadata log,
so they survive restarts; `validate` checks a group's whole would-be config the way
Kafka does (type, lower bound, broker min/max, session > heartbeat) and raises
`GroupConfigError` with Kafka's message, which the API answers as INVALID_CONFIG.
`effective` is what the coordinator and the share-partition leaders use.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from .. import config_registry as registry
from ..config import BrokerConfig
from ..config_registry import Scope, Setting, Type

INT, LONG, STRING, BOOLEAN = Type.INT, Type.LONG, Type.STRING, Type.BOOLEAN
DLQ_TOPIC = "errors.deadletterqueue.topic.name"
DLQ_COPY_RECORD = "errors.deadletterqueue.copy.record.enable"


@dataclass(frozen=True, slots=True)
class GroupConfigKey:
    name: str
    kind: Type
    default: str  # when there is no broker synonym
    synonym: str | None = None  # the broker key whose value is the default
    at_least: int | None = None  # ConfigDef's Range.atLeast
    bounds: tuple[str, str] | None = None  # broker (min, max) keys
    valid: tuple[str, ...] = ()  # ConfigDef's ValidString


# Group keys bounded otherwise than by `group.<kind>.min/max.<rest>` (GroupConfig.java);
# a bound of "" is none (at_least holds).
_BOUNDS = {"streams.num.standby.replicas": ("", "group.streams.max.standby.replicas"),
           "streams.num.warmup.replicas": ("", "group.streams.max.warmup.replicas"),
           "streams.task.offset.interval.ms": ("group.streams.min.task.offset.interval.ms",
                                               ""),
           "streams.acceptable.recovery.lag": ("", ""),
           "streams.rack.aware.assignment.tags": None,
           "streams.assignor.offload.enable": None,
           "streams.initial.rebalance.delay.ms": ("", "")}


def _key(setting: Setting) -> GroupConfigKey:
    """A group key of the registry (config_registry/resource_keys.py); one with a broker
    synonym is bounded by the broker's `group.<kind>.min.<rest>` / `.max.<rest>`."""
    prefix, _, rest = setting.name.partition(".")
    bounds = _BOUNDS.get(setting.name)
    if setting.name not in _BOUNDS and setting.synonym is not None:
        bounds = (f"group.{prefix}.min.{rest}", f"group.{prefix}.max.{rest}")
        assert all(not k or registry.lookup(k) is not None for k in bounds), bounds
    return GroupConfigKey(setting.name, setting.type, setting.default or "", setting.synonym,
                          setting.at_least, bounds, setting.valid)


KEYS: dict[str, GroupConfigKey] = {s.name: _key(s) for s in registry.scoped(Scope.GROUP)}

# What a share-partition leader needs of its group's configs.
SHARE_KEYS = tuple(k for k in KEYS if k.startswith("share.")) + (DLQ_TOPIC, DLQ_COPY_RECORD)
_INT = re.compile(r"^[+-]?\d+$")
_RESET_ERROR = ("Invalid value `{v}` for configuration share.auto.offset.reset. The value "
                "must be either 'earliest', 'latest' or of the format "
                "'by_duration:<PnDTnHnMn.nS>'.")
_DURATION = re.compile(r"^P(?:\d+D)?(?:T(?:\d+H)?(?:\d+M)?(?:\d+(?:[.,]\d{1,9})?S)?)?$",
                       re.IGNORECASE)


class GroupConfigError(ValueError):
    """An invalid group config (INVALID_CONFIG), with Kafka's message."""


def broker_value(config: BrokerConfig, key: str) -> str:
    return config.get_str(key)  # the registry's default when unset


def value(configs: Mapping[str, str], name: str) -> str:
    """A group key's value in `configs` (effective ones), else its default with no broker
    override (the registry's default of its synonym)."""
    found = configs.get(name)
    if found is not None:
        return found
    key = KEYS[name]
    return registry.default(key.synonym) or "" if key.synonym else key.default


def default_value(key: GroupConfigKey, config: BrokerConfig) -> str:
    return broker_value(config, key.synonym) if key.synonym else key.default


def effective(overrides: Mapping[str, str], config: BrokerConfig) -> dict[str, str]:
    """Every group config's value: the group's override, else the broker default."""
    return {name: overrides[name] if overrides.get(name) is not None
            else default_value(key, config) for name, key in KEYS.items()}


def _valid_reset(value: str) -> bool:
    if value in ("latest", "earliest"):
        return True
    if not value.startswith("by_duration:"):
        return False
    duration = value[len("by_duration:"):]
    # Java's Duration.parse, minus negative durations (Kafka refuses them).
    return bool(_DURATION.match(duration)) and duration.upper() not in ("P", "PT") \
        and not duration.upper().endswith("T")


def _parse(key: GroupConfigKey, value: str) -> int | str | bool:
    def invalid(reason: str) -> GroupConfigError:
        return GroupConfigError(f"Invalid value {value} for configuration {key.name}: "
                                f"{reason}")

    v = value.strip()
    if key.kind in (INT, LONG):
        bits = 31 if key.kind == INT else 63
        if not _INT.match(v) or not -2**bits <= int(v) < 2**bits:
            raise invalid(f"Not a number of type {key.kind.name}")
        n = int(v)
        if key.at_least is not None and n < key.at_least:
            raise invalid(f"Value must be at least {key.at_least}")
        return n
    if key.kind == BOOLEAN:
        if v.lower() not in ("true", "false"):
            raise invalid("Expected value to be either true or false")
        return v.lower() == "true"
    if key.name == "share.auto.offset.reset" and not _valid_reset(v):
        raise invalid(_RESET_ERROR.format(v=v))
    if key.valid and v not in key.valid:
        raise invalid("String must be one of: " + ", ".join(key.valid))
    return v


def validate(overrides: Mapping[str, str | None], config: BrokerConfig) -> None:
    """Raise GroupConfigError unless `overrides` (a group's complete set) is valid."""
    for name in overrides:
        if name not in KEYS:
            raise GroupConfigError(f"Unknown group config name: {name}")
    values: dict[str, int | str | bool] = {}
    for name, key in KEYS.items():
        raw = overrides.get(name)
        values[name] = _parse(key, raw if raw is not None else default_value(key, config))
    given = {name for name, value in overrides.items() if value is not None}
    for name, key in KEYS.items():
        # Only the group's own values are bounded: the broker's defaults are its own
        # business (Kafka refuses to start with a default outside its bounds).
        if key.bounds is None or name not in given:
            continue
        low_key, high_key = key.bounds
        value = values[name]
        assert isinstance(value, int)
        low = int(broker_value(config, low_key)) if low_key else key.at_least or 0
        high = int(broker_value(config, high_key)) if high_key else 2**63 - 1
        if not low <= value <= high:  # Kafka 4.4's message (4.3 named the broker keys)
            raise GroupConfigError(f"{name} must be in the range {low} to {high} inclusive.")
    for kind in ("consumer", "share", "streams"):
        session, heartbeat = f"{kind}.session.timeout.ms", f"{kind}.heartbeat.interval.ms"
        if (session in given or heartbeat in given) \
                and int(values[session]) <= int(values[heartbeat]):
            raise GroupConfigError(f"{session} must be greater than {heartbeat}")
    dlq = str(values[DLQ_TOPIC]) if DLQ_TOPIC in given else ""
    if dlq.startswith("__"):  # Kafka's GroupConfig.validateValues (KIP-1191)
        raise GroupConfigError(f"{DLQ_TOPIC}: DLQ topic name must not start with '__'")
