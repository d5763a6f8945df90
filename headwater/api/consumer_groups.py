"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69): KIP-848 consumer groups.

The handlers translate kio requests into `HeartbeatRequest`s for the group's shard
(`headwater.group.consumer`) and its answers back into responses. A group id the
coordinator does not serve yet (loading) gets COORDINATOR_LOAD_IN_PROGRESS, which
clients retry.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from ..coordinator.runtime import NotReady
from ..group.consumer.operations import HeartbeatRequest
from ..group.modern.assignment import freeze
from ..group.modern.operations import HeartbeatResponse
from ..security import acl as A
from ..wire.dispatch import Dispatcher, RequestContext

if TYPE_CHECKING:
    from ..broker import Broker

_MS = datetime.timedelta(milliseconds=1)
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30


def _millis(value: Any, default: int = -1) -> int:
    if value is None:
        return default
    if isinstance(value, datetime.timedelta):
        return value // _MS
    return int(value)


def to_request(ctx: RequestContext, req: Any) -> HeartbeatRequest:
    owned = None
    if req.topic_partitions is not None:
        merged: dict[Any, set[int]] = {}
        for tp in req.topic_partitions:
            if tp.topic_id is not None:
                merged.setdefault(tp.topic_id, set()).update(int(p) for p in tp.partitions)
        owned = freeze(merged)
    names = req.subscribed_topic_names
    return HeartbeatRequest(
        group_id=req.group_id, member_id=req.member_id, member_epoch=int(req.member_epoch),
        instance_id=req.instance_id, rack_id=req.rack_id,
        rebalance_timeout_ms=_millis(req.rebalance_timeout),
        subscribed_topic_names=tuple(names) if names is not None else None,
        subscribed_topic_regex=getattr(req, "subscribed_topic_regex", None),
        server_assignor=req.server_assignor, owned=owned, api_version=ctx.api_version,
        client_id=ctx.client_id or "", client_host=f"/{ctx.client_host}")


def to_response(resp: HeartbeatResponse) -> dict[str, Any]:
    """A heartbeat answer (ConsumerGroupHeartbeat and ShareGroupHeartbeat share it)."""
    assignment = None
    if resp.assignment is not None:
        assignment = {"topic_partitions": [
            {"topic_id": t, "partitions": sorted(ps)}
            for t, ps in sorted(resp.assignment.items(), key=lambda kv: str(kv[0]))]}
    return {"throttle_time": 0, "error_code": resp.error_code,
            "error_message": resp.error_message, "member_id": resp.member_id,
            "member_epoch": resp.member_epoch, "heartbeat_interval": resp.heartbeat_interval_ms,
            "assignment": assignment}


def heartbeat_refused(broker: Broker, ctx: RequestContext, group_id: str,
                      topics: Any) -> dict | None:
    """The answer to a Consumer/ShareGroupHeartbeat the principal may not send (READ on
    the group, DESCRIBE on every subscribed topic, as Kafka checks), else None."""
    access = broker.access
    if not access.enabled:
        return None
    code = None
    if not access.allowed(ctx, A.READ, A.GROUP, group_id):
        code, message = GROUP_AUTHORIZATION_FAILED, "Group authorization failed."
    elif any(not access.allowed(ctx, A.DESCRIBE, A.TOPIC, t) for t in topics or ()):
        code, message = TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."
    if code is None:
        return None
    return {"throttle_time": 0, "error_code": code, "error_message": message,
            "member_id": None, "member_epoch": 0, "heartbeat_interval": 0,
            "assignment": None}


def register(dispatcher: Dispatcher, broker: Broker) -> None:
    def groups():
        assert broker.groups is not None
        return broker.groups

    def handle_heartbeat(ctx: RequestContext, req: Any) -> dict:
        refused = heartbeat_refused(broker, ctx, req.group_id, req.subscribed_topic_names)
        if refused is not None:
            return refused
        request = to_request(ctx, req)
        try:
            resp = groups().write(request.group_id,
                                  lambda shard, now: shard.consumer.heartbeat(request, now))
        except NotReady as exc:
            resp = HeartbeatResponse(exc.code)
        return to_response(resp)

    def handle_describe(ctx: RequestContext, req: Any) -> dict:
        include = bool(getattr(req, "include_authorized_operations", False))
        out = []
        for group_id in req.group_ids:
            if broker.access.denies(ctx, A.DESCRIBE, A.GROUP, group_id):
                out.append({"error_code": GROUP_AUTHORIZATION_FAILED, "error_message": None,
                            "group_id": group_id, "group_state": "", "group_epoch": 0,
                            "assignment_epoch": 0, "assignor_name": "", "members": ()})
                continue
            try:
                entry, = groups().read(
                    group_id, lambda shard, g=group_id: shard.consumer.describe([g], include))
            except NotReady as exc:
                entry = {"error_code": exc.code, "error_message": None, "group_id": group_id,
                         "group_state": "", "group_epoch": 0, "assignment_epoch": 0,
                         "assignor_name": "", "members": ()}
            out.append(entry)
        return {"throttle_time": 0, "groups": out}

    dispatcher.register(68, 0, 1, handle_heartbeat)
    dispatcher.register(69, 0, 1, handle_describe)
