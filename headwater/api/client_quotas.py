"""DescribeClientQuotas (48) and AlterClientQuotas (49): client quotas as metadata
records (`kafka-configs --entity-type users|clients|ips`); see headwater/quota/."""

from __future__ import annotations

from typing import Any, Protocol

from kio.schema.errors import ErrorCode as E

from ..quota.entities import Alteration, QuotaError, alter, describe
from ..security import acl as A
from ..wire.dispatch import Dispatcher, RequestContext
from .services import HasAccess, HasController, HasImage


class Services(HasAccess, HasImage, HasController, Protocol):
    """What these handlers use of the broker."""


class _Handlers:
    """The handlers of this module, over the services they use."""

    def __init__(self, broker: Services) -> None:
        self.broker = broker

    def handle_describe(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        if self.broker.access.denies(ctx, A.DESCRIBE_CONFIGS, A.CLUSTER, A.CLUSTER_NAME):
            return {"throttle_time": 0, "error_code": E.cluster_authorization_failed,
                    "error_message": None, "entries": None}
        try:
            found = describe(self.broker.image.client_quotas,
                             [(c.entity_type, c.match_type, c.match) for c in req.components],
                             req.strict)
        except QuotaError as exc:
            return {"throttle_time": 0, "error_code": exc.code, "error_message": exc.message,
                    "entries": None}
        return {"throttle_time": 0, "error_code": 0, "error_message": None, "entries": [
            {"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
             "values": [{"key": k, "value": v} for k, v in sorted(values.items())]}
            for entity, values in found]}

    def handle_alter(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        alterations = [Alteration(tuple((e.entity_type, e.entity_name) for e in entry.entity),
                                  tuple((op.key, None if op.remove else op.value)
                                        for op in entry.ops))
                       for entry in req.entries]
        if self.broker.access.denies(ctx, A.ALTER_CONFIGS, A.CLUSTER, A.CLUSTER_NAME):
            results: list[tuple[int, str | None]] = (
                [(E.cluster_authorization_failed, None)] * len(alterations))
            return {"throttle_time": 0, "entries": [
                {"error_code": code, "error_message": message,
                 "entity": [{"entity_type": t, "entity_name": n} for t, n in alt.entity]}
                for alt, (code, message) in zip(alterations, results, strict=True)]}
        records, results = alter(self.broker.image.client_quotas, alterations)
        if not req.validate_only:
            self.broker.controller.commit(records)
        return {"throttle_time": 0, "entries": [
            {"error_code": code, "error_message": message,
             "entity": [{"entity_type": t, "entity_name": n} for t, n in alt.entity]}
            for alt, (code, message) in zip(alterations, results, strict=True)]}


def register(dispatcher: Dispatcher, broker: Services) -> None:
    handlers = _Handlers(broker)

    dispatcher.register(48, 0, 1, handlers.handle_describe)
    dispatcher.register(49, 0, 1, handlers.handle_alter)
