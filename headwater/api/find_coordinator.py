"""FindCoordinator (10): on a single node every coordinator is this broker.

Key types: 0 group, 1 transaction, 2 share (KIP-932). A key type whose coordinator
is not running here yet gets COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

from typing import Any, Protocol

from kio.schema.errors import ErrorCode as E
from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest

from ..security import acl as A
from ..share.coordinator import parse_coordinator_key
from ..wire.dispatch import LISTENER, Dispatcher, RequestContext, typed
from .services import HasAccess, HasCluster, HasCoordinators, HasIdentity, HasListeners

GROUP, TRANSACTION, SHARE = 0, 1, 2


class Services(HasAccess, HasIdentity, HasCluster, HasListeners, HasCoordinators, Protocol):
    """What these handlers use of the broker."""


class _Handlers:
    """The handlers of this module, over the services they use."""

    def __init__(self, broker: Services) -> None:
        self.broker = broker

    def answer(self, ctx: RequestContext, key: str, key_type: int) -> dict[str, Any]:
        if key_type not in self.broker.coordinator_key_types:
            return {"key": key, "node_id": -1, "host": "", "port": -1,
                    "error_code": E.coordinator_not_available if key_type in (GROUP,
                                                                             TRANSACTION, SHARE)
                    else E.invalid_request,
                    "error_message": f"no coordinator for key type {key_type}"}
        if key_type == GROUP and not key:
            return {"key": key, "node_id": -1, "host": "", "port": -1,
                    "error_code": E.invalid_group_id, "error_message": "empty group id"}
        access = self.broker.access
        if access.enabled:  # as Kafka: DESCRIBE on the group / transactional id
            checks = {GROUP: (A.DESCRIBE, A.GROUP, key, E.group_authorization_failed,
                              "Group"),
                      TRANSACTION: (A.DESCRIBE, A.TRANSACTIONAL_ID, key,
                                    E.transactional_id_authorization_failed,
                                    "Transactional Id"),
                      SHARE: (A.CLUSTER_ACTION, A.CLUSTER, A.CLUSTER_NAME,
                              E.cluster_authorization_failed, "Cluster")}
            op, rtype, name, code, kind = checks[key_type]
            if not access.allowed(ctx, op, rtype, name):
                # Kafka's messages: the error's own before v4, its schema default (empty)
                # in a v4+ Coordinator entry
                message = "" if ctx.api_version >= 4 else f"{kind} authorization failed."
                return {"key": key, "node_id": -1, "host": "", "port": -1,
                        "error_code": code, "error_message": message}
        if key_type == SHARE and parse_coordinator_key(key) is None:
            return {"key": key, "node_id": -1, "host": "", "port": -1,
                    "error_code": E.invalid_request,
                    "error_message": "expected a share key groupId:topicId:partition"}
        found = self.broker.topology.coordinator(key, key_type)
        if found is None:
            return {"key": key, "node_id": -1, "host": "", "port": -1,
                    "error_code": E.coordinator_not_available,
                    "error_message": "no coordinator is live"}
        node_id = found.node_id
        host, port = found.address(ctx.attrs.get(LISTENER))
        # Kafka's success messages: "NONE" (the error's name) before v4, "" after
        return {"key": key, "node_id": node_id, "host": host, "port": port,
                "error_code": 0, "error_message": "" if ctx.api_version >= 4 else "NONE"}

    def handle(self, ctx: RequestContext, req: FindCoordinatorRequest) -> dict[str, Any]:
        answers = [self.answer(ctx, k, req.key_type) for k in req.coordinator_keys]
        if ctx.api_version >= 4:
            return {"throttle_time": 0, "coordinators": answers}
        (one,) = answers
        return {"throttle_time": 0, "error_code": one["error_code"],
                "error_message": one["error_message"], "node_id": one["node_id"],
                "host": one["host"], "port": one["port"]}


def register(dispatcher: Dispatcher, broker: Services) -> None:
    handlers = _Handlers(broker)

    dispatcher.register(10, 0, 6, typed(FindCoordinatorRequest, handlers.handle, _one_key))


def _one_key(req: Any) -> dict[str, Any] | None:
    """FindCoordinator v0-3 asks for one key; v4 for a list of them."""
    return None if hasattr(req, "coordinator_keys") else {"coordinator_keys": (req.key,)}
