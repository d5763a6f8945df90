"""Client metrics subscriptions (KIP-714): the CLIENT_METRICS config resource.

A subscription is a named config resource (type 16) with three keys, Kafka's
`ClientMetricsConfigs`: `metrics` (metric name prefixes), `interval.ms` (push interval)
and `match` (selectors `client_id=<regex>`, ...). `kafka-client-metrics` writes them
with IncrementalAlterConfigs and reads them with DescribeConfigs and ListConfigResources;
they are ConfigRecords in the metadata log like topic configs, so they survive restarts.

headwater stores and describes subscriptions but does not serve GetTelemetrySubscriptions
/ PushTelemetry (nor does Kafka without a metrics reporter plugin), so clients push
nothing. `validate` gives Kafka's errors for a subscription it refuses.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from kio.schema.errors import ErrorCode as E

from . import config_registry as registry
from .config_registry import Scope

METRICS, INTERVAL_MS, MATCH = "metrics", "interval.ms", "match"
# The three keys are declared in the registry (config_registry/resource_keys.py).
_KEYS = registry.scoped(Scope.CLIENT_METRICS)
DEFAULTS = {s.name: s.default or "" for s in _KEYS}
DOCS = {s.name: s.doc for s in _KEYS}
TYPES = {s.name: s.type for s in _KEYS}
_INTERVAL = registry.REGISTRY[INTERVAL_MS]
assert _INTERVAL.at_least is not None and _INTERVAL.at_most is not None
MIN_INTERVAL_MS, MAX_INTERVAL_MS = _INTERVAL.at_least, _INTERVAL.at_most
SELECTORS = ("client_instance_id", "client_id", "client_software_name",
             "client_software_version", "client_source_address", "client_source_port")


class ClientMetricsError(Exception):
    """A refused subscription: Kafka's error code and message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def validate(name: str, configs: Mapping[str, str]) -> None:
    """Kafka's ClientMetricsConfigs.validate over the whole subscription after the change."""
    if not name:
        raise ClientMetricsError(E.invalid_request, "Subscription name can't be empty")
    for key in configs:
        if key not in DEFAULTS:
            raise ClientMetricsError(E.invalid_request,
                                     f"Unknown client metrics configuration: {key}")
    if INTERVAL_MS in configs:
        value = configs[INTERVAL_MS]
        try:
            interval = int(value)
        except ValueError:
            raise ClientMetricsError(
                E.invalid_config, f"Invalid value {value} for configuration {INTERVAL_MS}: "
                "Not a number of type INT") from None
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise ClientMetricsError(
                E.invalid_request, f"Invalid value {value} for {INTERVAL_MS}, interval must "
                f"be between {MIN_INTERVAL_MS} and {MAX_INTERVAL_MS} (1 hour)")
    for pattern in (p.strip() for p in configs.get(MATCH, "").split(",")):
        if not pattern:
            continue
        parts = pattern.split("=")
        if len(parts) != 2 or parts[0].strip() not in SELECTORS:
            raise ClientMetricsError(E.invalid_config,
                                     f"Illegal client matching pattern: {pattern}")
        try:
            re.compile(parts[1].strip())
        except re.error:
            raise ClientMetricsError(E.invalid_config,
                                     f"Illegal client matching pattern: {pattern}") from None
