"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31): ACL bindings as metadata records
(AccessControlEntryRecord / RemoveAccessControlEntryRecord), as `kafka-acls` uses them.

As in Kafka: creating or deleting needs ALTER on the cluster, describing DESCRIBE; a
binding that already exists is not written twice; a binding with a filter's ANY or MATCH
fails the whole CreateAcls with UNKNOWN_SERVER_ERROR; a DeleteAcls removes every binding
any of its filters matches, all in one commit."""

from __future__ import annotations

import uuid
from typing import Any, Protocol

from kio.schema.errors import ErrorCode as E

from ..metadata import records as R
from ..security import acl as A
from ..security.acl import AclBinding, AclFilter
from ..wire.dispatch import Dispatcher, RequestContext
from .services import HasAccess, HasController, HasImage

NO_AUTHORIZER = "No Authorizer is configured."


class Services(HasAccess, HasImage, HasController, Protocol):
    """What these handlers use of the broker."""


def _binding_dict(b: AclBinding) -> dict[str, Any]:
    return {"resource_type": b.resource_type, "resource_name": b.resource_name,
            "pattern_type": b.pattern_type, "principal": b.principal, "host": b.host,
            "operation": b.operation, "permission_type": b.permission}


def _filter(f: Any) -> AclFilter:
    return AclFilter(int(f.resource_type_filter), f.resource_name_filter,
                     int(f.pattern_type_filter), f.principal_filter, f.host_filter,
                     int(f.operation), int(f.permission_type))


class _Handlers:
    """The handlers of this module, over the services they use."""

    def __init__(self, broker: Services) -> None:
        self.broker = broker

    def denied(self, ctx: RequestContext, op: int) -> bool:
        return not self.broker.access.allowed(ctx, op, A.CLUSTER, A.CLUSTER_NAME)

    def handle_describe(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        empty = {"throttle_time": 0, "resources": []}
        if not self.broker.access.enabled:
            return {**empty, "error_code": E.security_disabled, "error_message": NO_AUTHORIZER}
        if self.denied(ctx, A.DESCRIBE):
            return {**empty, "error_code": E.cluster_authorization_failed, "error_message": None}
        flt = _filter(req)
        invalid = flt.invalid()
        if invalid:
            return {**empty, "error_code": E.invalid_request, "error_message": invalid}
        grouped: dict[tuple[int, str, int], list[AclBinding]] = {}
        for b in self.broker.image.acls.values():
            if flt.matches(b):
                grouped.setdefault((b.resource_type, b.resource_name, b.pattern_type),
                                   []).append(b)
        # "": as Kafka, the schema's default message on success
        return {"throttle_time": 0, "error_code": E.none, "error_message": "", "resources": [
            {"resource_type": rt, "resource_name": name, "pattern_type": pt, "acls": [
                {"principal": b.principal, "host": b.host, "operation": b.operation,
                 "permission_type": b.permission} for b in bindings]}
            for (rt, name, pt), bindings in sorted(grouped.items())]}

    def handle_create(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        def every(code: int, message: str | None) -> dict[str, Any]:
            return {"throttle_time": 0, "results": [
                {"error_code": code, "error_message": message} for _ in req.creations]}
        if not self.broker.access.enabled:
            return every(E.security_disabled, NO_AUTHORIZER)
        if self.denied(ctx, A.ALTER):
            return every(E.cluster_authorization_failed, None)
        existing = set(self.broker.image.acls.values())
        records, results = [], []
        wanted = [AclBinding(int(c.resource_type), c.resource_name,
                             int(c.resource_pattern_type), c.principal, c.host,
                             int(c.operation), int(c.permission_type))
                  for c in req.creations]
        if any(A.filter_only(b) for b in wanted):
            return every(E.unknown_server_error, None)  # as Kafka: nothing is created
        for b in wanted:
            problem = A.validate(b)
            if problem:
                results.append({"error_code": E.invalid_request, "error_message": problem})
                continue
            if b not in existing:
                existing.add(b)
                records.append(R.AccessControlEntryRecord(
                    str(uuid.uuid4()), b.resource_type, b.resource_name, b.pattern_type,
                    b.principal, b.host, b.operation, b.permission))
            results.append({"error_code": E.none, "error_message": ""})  # as Kafka
        if records:
            self.broker.controller.commit(records)
        return {"throttle_time": 0, "results": results}

    def handle_delete(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        def every(code: int, message: str | None) -> dict[str, Any]:
            return {"throttle_time": 0, "filter_results": [
                {"error_code": code, "error_message": message, "matching_acls": []}
                for _ in req.filters]}
        if not self.broker.access.enabled:
            return every(E.security_disabled, NO_AUTHORIZER)
        if self.denied(ctx, A.ALTER):
            return every(E.cluster_authorization_failed, None)
        acls = self.broker.image.acls
        removed: dict[str, None] = {}
        results = []
        for f in req.filters:
            flt = _filter(f)
            invalid = flt.invalid()
            if invalid:
                results.append({"error_code": E.invalid_request, "error_message": invalid,
                                "matching_acls": []})
                continue
            matched = [(acl_id, b) for acl_id, b in acls.items() if flt.matches(b)]
            removed.update((acl_id, None) for acl_id, _b in matched)
            results.append({"error_code": E.none, "error_message": None, "matching_acls": [
                {"error_code": E.none, "error_message": None, **_binding_dict(b)}
                for _id, b in matched]})
        if removed:
            self.broker.controller.commit([R.RemoveAccessControlEntryRecord(i) for i in removed])
        return {"throttle_time": 0, "filter_results": results}


def register(dispatcher: Dispatcher, broker: Services) -> None:
    handlers = _Handlers(broker)

    dispatcher.register(29, 1, 3, handlers.handle_describe)
    dispatcher.register(30, 1, 3, handlers.handle_create)
    dispatcher.register(31, 1, 3, handlers.handle_delete)
