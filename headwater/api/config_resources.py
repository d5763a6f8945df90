"""ListConfigResources (74; v0 was ListClientMetricsResources): the config resources a
client can describe, for `kafka-client-metrics --list` (KIP-714, KIP-1142).

v0 lists client metrics subscriptions only. v1 lists the asked resource types (all when
none is asked), as Kafka 4.3 does: groups and client metrics subscriptions that have
configs, this broker, and every topic. A type Kafka does not list answers
UNSUPPORTED_VERSION; so does BROKER_LOGGER, which Kafka lists but headwater does not
serve (no DescribeConfigs for broker loggers).
"""

from __future__ import annotations

from typing import Any, Protocol

from kio.schema.errors import ErrorCode as E

from ..metadata.image import (
    BROKER_RESOURCE,
    CLIENT_METRICS_RESOURCE,
    GROUP_RESOURCE,
    TOPIC_RESOURCE,
)
from ..security import acl as A
from ..wire.dispatch import Dispatcher, RequestContext
from .services import HasAccess, HasIdentity, HasImage

LISTED = (GROUP_RESOURCE, CLIENT_METRICS_RESOURCE, BROKER_RESOURCE, TOPIC_RESOURCE)


class Services(HasAccess, HasImage, HasIdentity, Protocol):
    """What these handlers use of the broker."""


class _Handlers:
    """The handlers of this module, over the services they use."""

    def __init__(self, broker: Services) -> None:
        self.broker = broker

    def configured(self, rtype: int) -> list[str]:
        return sorted(name for (kind, name), values in self.broker.image.configs.items()
                      if kind == rtype and values)

    def handle(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        if self.broker.access.denies(ctx, A.DESCRIBE_CONFIGS, A.CLUSTER, A.CLUSTER_NAME):
            return {"throttle_time": 0, "error_code": E.cluster_authorization_failed,
                    "config_resources": []}
        asked = (tuple(req.resource_types) or LISTED) if ctx.api_version >= 1 else (
            CLIENT_METRICS_RESOURCE,)
        if any(t not in LISTED for t in asked):
            return {"throttle_time": 0, "error_code": E.unsupported_version,
                    "config_resources": []}
        out: list[dict[str, Any]] = []
        for rtype in LISTED:
            if rtype not in asked:
                continue
            if rtype == BROKER_RESOURCE:
                names = [str(self.broker.node_id)]
            elif rtype == TOPIC_RESOURCE:
                names = sorted(self.broker.image.topics_by_name)
            else:
                names = self.configured(rtype)
            out += [{"resource_name": n, "resource_type": rtype} for n in names]
        return {"throttle_time": 0, "error_code": 0, "config_resources": out}


def register(dispatcher: Dispatcher, broker: Services) -> None:
    handlers = _Handlers(broker)

    dispatcher.register(74, 0, 1, handlers.handle)
