"""DescribeConfigs (32), AlterConfigs (33) and IncrementalAlterConfigs (44).

Every config is described with its source, like Kafka: a topic override is
DYNAMIC_TOPIC_CONFIG; a broker value set with AlterConfigs on this broker's id is
DYNAMIC_BROKER_CONFIG, on the cluster default ("") DYNAMIC_DEFAULT_BROKER_CONFIG; a key
set in server.properties is STATIC_BROKER_CONFIG, the rest DEFAULT_CONFIG. Changes become
ConfigRecords through the controller. Dynamic broker configs are the broker-wide
defaults of topic configs (`log.retention.ms`, `message.max.bytes`, ...), as Kafka's
DynamicLogConfig; other broker keys are read-only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from kio.schema.describe_configs.v4.request import DescribeConfigsRequest
from kio.schema.errors import ErrorCode as E

from .. import client_metrics
from ..config import (
    DLQ_BROKER_KEYS,
    DYNAMIC_BROKER_KEYS,
    DYNAMIC_CLUSTER,
    DYNAMIC_NODE,
    STATIC,
    STORED_BROKER_KEYS,
    TOPIC_CONFIG_KEYS,
    TOPIC_CONFIG_SYNONYMS,
    ConfigError,
    validate_dynamic_broker_config,
    validate_topic_config,
)
from ..config_registry import SETTINGS, Type, is_sensitive
from ..group import group_configs
from ..metadata.image import (
    BROKER_RESOURCE,
    CLIENT_METRICS_RESOURCE,
    GROUP_RESOURCE,
    TOPIC_RESOURCE,
)
from ..security import acl as A
from ..wire.dispatch import Dispatcher, RequestContext, typed
from .services import HasAccess, HasConfig, HasController, HasIdentity, HasImage

# ConfigSource ids.
DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
CLIENT_METRICS_CONFIG = 7
GROUP_CONFIG = 8

# ConfigType ids (DescribeConfigs v3+).
BOOLEAN, STRING, INT, LONG, LIST = 1, 2, 3, 5, 7
_TYPE_IDS = {Type.BOOLEAN: BOOLEAN, Type.STRING: STRING, Type.INT: INT, Type.LONG: LONG,
             Type.DOUBLE: 6, Type.LIST: LIST, Type.CLASS: 8, Type.PASSWORD: 9}

# Topic keys' types, from the registry.
_TYPES = {s.name: _TYPE_IDS[s.type] for s in SETTINGS if s.is_topic}


SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


_SOURCE_IDS = {DYNAMIC_NODE: DYNAMIC_BROKER_CONFIG, DYNAMIC_CLUSTER: DYNAMIC_DEFAULT_BROKER_CONFIG,
               STATIC: STATIC_BROKER_CONFIG}


class Services(HasAccess, HasImage, HasController, HasIdentity, HasConfig, Protocol):
    """What these handlers use of the broker."""


def _broker_synonyms(broker: Services, broker_key: str) -> list[dict[str, Any]]:
    hidden = is_sensitive(broker_key)
    return [{"name": broker_key, "value": None if hidden else value,
             "source": _SOURCE_IDS.get(source, DEFAULT_CONFIG)}
            for source, value in broker.config.layers(broker_key)]


def describe_topic_configs(broker: Services, topic: str, keys: set[str] | None,
                           overrides: Mapping[str, str | None] | None = None,
                           synonyms: bool = False) -> list[dict[str, Any]]:
    """Every topic config with value and source; `overrides` replaces the image's.
    headwater's own topic keys (`headwater.*`: the Iceberg table's) are listed only when
    set or asked for by name, so that a listing of every key is Kafka's."""
    if overrides is None:
        overrides = broker.image.resource_configs(TOPIC_RESOURCE, topic)
    out = []
    for key in sorted(TOPIC_CONFIG_KEYS):
        if keys is not None and key not in keys:
            continue
        if keys is None and key.startswith("headwater.") and overrides.get(key) is None:
            continue
        broker_key = TOPIC_CONFIG_SYNONYMS.get(key)
        syn: list[dict[str, Any]] = []
        override = overrides.get(key)
        if override is not None:
            value, source = override, DYNAMIC_TOPIC_CONFIG
            syn.append({"name": key, "value": override, "source": DYNAMIC_TOPIC_CONFIG})
        elif broker_key is None:  # no broker default (errors.deadletterqueue.group.enable)
            value, source = broker.config.topic_default(key), DEFAULT_CONFIG
        else:
            value = broker.config.topic_default(key)
            source = _SOURCE_IDS.get(broker.config.source(broker_key), DEFAULT_CONFIG)
        if broker_key is not None:  # no layer: derived (retention.ms from hours, ...)
            syn += _broker_synonyms(broker, broker_key) or [
                {"name": broker_key, "value": broker.config.topic_default(key),
                 "source": DEFAULT_CONFIG}]
        out.append({"name": key, "value": value, "read_only": False,
                    "config_source": source, "is_sensitive": False,
                    "synonyms": syn if synonyms else (),
                    "config_type": _TYPES.get(key, LONG), "documentation": None})
    return out


def describe_broker_configs(broker: Services, name: str, keys: set[str] | None,
                            synonyms: bool = False) -> list[dict[str, Any]]:
    """This broker's configs (name = its id), or only the cluster-wide dynamic defaults
    (name = ""), as Kafka describes them."""
    out = []
    if name == "":
        entries = sorted(broker.image.resource_configs(BROKER_RESOURCE, "").items())
    else:
        entries = broker.config.items()
    for key, value in entries:
        if keys is not None and key not in keys:
            continue
        source = (DYNAMIC_DEFAULT_BROKER_CONFIG if name == "" else
                  _SOURCE_IDS.get(broker.config.source(key), DEFAULT_CONFIG))
        sensitive = is_sensitive(key)  # Kafka: no value, is_sensitive
        out.append({"name": key, "value": None if sensitive else value or None,
                    "read_only": key not in DYNAMIC_BROKER_KEYS and key not in DLQ_BROKER_KEYS
                    and key not in STORED_BROKER_KEYS,
                    "config_source": source, "is_sensitive": sensitive,
                    "synonyms": _broker_synonyms(broker, key) if synonyms else (),
                    "config_type": STRING, "documentation": None})
    return out


def describe_group_configs(broker: Services, group: str, keys: set[str] | None,
                           synonyms: bool = False) -> list[dict[str, Any]]:
    """Kafka's group configs (KIP-848 / KIP-932): the group's override (GROUP_CONFIG),
    else the broker default of its synonym (`group.share.*`, DEFAULT_CONFIG)."""
    stored = broker.image.resource_configs(GROUP_RESOURCE, group)
    out = []
    for name, key in sorted(group_configs.KEYS.items()):
        if keys is not None and name not in keys:
            continue
        value = stored.get(name)
        default = group_configs.default_value(key, broker.config)
        syn: list[dict[str, Any]] = []
        if value is not None:
            syn.append({"name": name, "value": value, "source": GROUP_CONFIG})
        if key.synonym is not None:
            syn += _broker_synonyms(broker, key.synonym) or [
                {"name": key.synonym, "value": default, "source": DEFAULT_CONFIG}]
        out.append({"name": name, "value": value if value is not None else default,
                    "read_only": False,
                    "config_source": GROUP_CONFIG if value is not None else DEFAULT_CONFIG,
                    "is_sensitive": False, "synonyms": syn if synonyms else (),
                    "config_type": _TYPE_IDS[key.kind], "documentation": None})
    return out


def describe_client_metrics_configs(broker: Services, name: str, keys: set[str] | None,
                                    synonyms: bool = False,
                                    documentation: bool = False) -> list[dict[str, Any]]:
    """A subscription's three keys, as Kafka describes them even for a name never set."""
    stored = broker.image.resource_configs(CLIENT_METRICS_RESOURCE, name)
    out = []
    for key, default in sorted(client_metrics.DEFAULTS.items()):
        if keys is not None and key not in keys:
            continue
        value = stored.get(key)
        source = CLIENT_METRICS_CONFIG if value is not None else DEFAULT_CONFIG
        syn = [{"name": key, "value": value, "source": source}] if value is not None else []
        out.append({"name": key, "value": value if value is not None else default,
                    "read_only": False, "config_source": source, "is_sensitive": False,
                    "synonyms": syn if synonyms else (),
                    "config_type": _TYPE_IDS[client_metrics.TYPES[key]],
                    "documentation": client_metrics.DOCS[key] if documentation else None})
    return out


class _Invalid(Exception):
    def __init__(self, code: int, message: str | None) -> None:
        super().__init__(message)
        self.code, self.message = code, message


class _Handlers:
    """The handlers of this module, over the services they use."""

    def __init__(self, broker: Services) -> None:
        self.broker = broker

    def authorized(self, ctx: RequestContext, op: int, rtype: int, name: str) -> None:
        """DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic, group or cluster (brokers)."""
        access = self.broker.access
        if not access.enabled:
            return
        if rtype == TOPIC_RESOURCE:
            target, code, kind = (A.TOPIC, name), E.topic_authorization_failed, "Topic"
        elif rtype == GROUP_RESOURCE:
            target, code, kind = (A.GROUP, name), E.group_authorization_failed, "Group"
        else:
            target, code, kind = ((A.CLUSTER, A.CLUSTER_NAME),
                                  E.cluster_authorization_failed, "Cluster")
        if not access.allowed(ctx, op, *target):
            raise _Invalid(code, f"{kind} authorization failed.")  # Kafka's message

    def resource_check(self, rtype: int, name: str) -> None:
        if rtype == TOPIC_RESOURCE:
            if self.broker.image.topic(name) is None:
                raise _Invalid(E.unknown_topic_or_partition,
                               f"Topic {name} does not exist")
        elif rtype == BROKER_RESOURCE:
            if name not in ("", str(self.broker.node_id)):
                raise _Invalid(E.invalid_request, f"Unexpected broker id {name}")
        elif rtype == GROUP_RESOURCE:
            if not name:
                raise _Invalid(E.invalid_request, "Group name must not be empty")
        elif rtype == CLIENT_METRICS_RESOURCE:
            if not name:
                raise _Invalid(E.invalid_request,
                               "Client metrics subscription name must not be empty")
        else:
            raise _Invalid(E.invalid_request, f"Unsupported resource type {rtype}")

    def handle_describe(self, ctx: RequestContext, req: DescribeConfigsRequest
                        ) -> dict[str, Any]:
        results = []
        for res in req.resources:
            keys = set(res.configuration_keys) if res.configuration_keys else None
            base = {"resource_type": res.resource_type, "resource_name": res.resource_name}
            try:
                self.authorized(ctx, A.DESCRIBE_CONFIGS, res.resource_type, res.resource_name)
                self.resource_check(res.resource_type, res.resource_name)
            except _Invalid as exc:
                results.append({**base, "error_code": exc.code, "error_message": exc.message,
                                "configs": ()})
                continue
            if res.resource_type == TOPIC_RESOURCE:
                configs = describe_topic_configs(self.broker, res.resource_name, keys,
                                                 synonyms=req.include_synonyms)
            elif res.resource_type == BROKER_RESOURCE:
                configs = describe_broker_configs(self.broker, res.resource_name, keys,
                                                  req.include_synonyms)
            elif res.resource_type == CLIENT_METRICS_RESOURCE:
                configs = describe_client_metrics_configs(
                    self.broker, res.resource_name, keys, req.include_synonyms,
                    req.include_documentation)
            else:
                configs = describe_group_configs(self.broker, res.resource_name, keys,
                                                 req.include_synonyms)
            # "": Kafka leaves the schema's default in a successful result
            results.append({**base, "error_code": 0, "error_message": "",
                            "configs": configs})
        return {"throttle_time": 0, "results": results}

    def validate(self, rtype: int, key: str, value: str | None) -> None:
        if rtype == TOPIC_RESOURCE:
            try:
                validate_topic_config(key, value)
            except ConfigError as exc:
                raise _Invalid(E.invalid_config, str(exc)) from None
        elif rtype in (GROUP_RESOURCE, CLIENT_METRICS_RESOURCE):
            pass  # the whole config is checked at once (validate_group, client_metrics)
        else:
            try:
                validate_dynamic_broker_config(key, value)
            except ConfigError as exc:
                raise _Invalid(E.invalid_config, str(exc)) from None

    def alter(self, ctx: RequestContext, req: Any, incremental: bool) -> dict[str, Any]:  # noqa: C901
        responses = []
        records: list[object] = []
        for res in req.resources:
            rtype, name = res.resource_type, res.resource_name
            base = {"resource_type": rtype, "resource_name": name}
            try:
                self.authorized(ctx, A.ALTER_CONFIGS, rtype, name)
                self.resource_check(rtype, name)
                current = dict(self.broker.image.resource_configs(rtype, name))
                if incremental:
                    updated = dict(current)
                    for c in res.configs:
                        op = c.config_operation
                        if op == SET:
                            updated[c.name] = c.value
                        elif op == DELETE:
                            updated.pop(c.name, None)
                        elif op in (APPEND, SUBTRACT):
                            if _TYPES.get(c.name) != LIST:
                                raise _Invalid(E.invalid_config,
                                               f"Config {c.name} is not a list")
                            items = [v for v in (updated.get(c.name)
                                                 or self.broker.config.topic_default(c.name)
                                                 ).split(",") if v]
                            for v in (c.value or "").split(","):
                                if op == APPEND and v and v not in items:
                                    items.append(v)
                                elif op == SUBTRACT and v in items:
                                    items.remove(v)
                            updated[c.name] = ",".join(items)
                        else:
                            raise _Invalid(E.invalid_request, f"Unknown operation {op}")
                else:
                    updated = {c.name: c.value for c in res.configs if c.value is not None}
                if rtype == GROUP_RESOURCE:
                    try:
                        group_configs.validate(updated, self.broker.config)
                    except group_configs.GroupConfigError as exc:
                        raise _Invalid(E.invalid_config, str(exc)) from None
                elif rtype == CLIENT_METRICS_RESOURCE:
                    try:
                        client_metrics.validate(name, updated)
                    except client_metrics.ClientMetricsError as exc:
                        raise _Invalid(exc.code, str(exc)) from None
                for key, value in updated.items():
                    self.validate(rtype, key, value)
                for key in current.keys() - updated.keys():
                    self.validate(rtype, key, None)
            except _Invalid as exc:
                responses.append({**base, "error_code": exc.code,
                                  "error_message": exc.message})
                continue
            changes: dict[str, str | None] = {
                k: v for k, v in updated.items() if current.get(k) != v}
            changes.update({k: None for k in current.keys() - updated.keys()})
            if not req.validate_only:
                records.extend(self.broker.controller.config_records(rtype, name, changes))
            responses.append({**base, "error_code": 0, "error_message": None})
        self.broker.controller.commit(records)
        return {"throttle_time": 0, "responses": responses}


def register(dispatcher: Dispatcher, broker: Services) -> None:
    handlers = _Handlers(broker)

    dispatcher.register(32, 1, 4, typed(DescribeConfigsRequest, handlers.handle_describe))
    dispatcher.register(33, 0, 2, lambda ctx, req: handlers.alter(ctx, req, False))
    dispatcher.register(44, 0, 1, lambda ctx, req: handlers.alter(ctx, req, True))
