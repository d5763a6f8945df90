"""ShareGroupHeartbeat (76) and ShareGroupDescribe (77), v1: KIP-932 share groups.

The handlers translate kio requests into `ShareHeartbeatRequest`s for the group's shard
(`headwater.group.share`) and its answers back into responses. Only v1 exists: Kafka
4.1 removed the early-access v0, and librdkafka 2.16 sends v1 only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..coordinator.runtime import NotReady
from ..group.modern.operations import HeartbeatResponse, describe_error
from ..group.share.operations import ShareHeartbeatRequest
from ..security import acl as A
from ..wire.dispatch import Dispatcher, RequestContext
from .consumer_groups import GROUP_AUTHORIZATION_FAILED, heartbeat_refused, to_response

if TYPE_CHECKING:
    from ..broker import Broker


def to_request(ctx: RequestContext, req: Any) -> ShareHeartbeatRequest:
    names = req.subscribed_topic_names
    return ShareHeartbeatRequest(
        group_id=req.group_id, member_id=req.member_id, member_epoch=int(req.member_epoch),
        rack_id=req.rack_id, subscribed_topic_names=tuple(names) if names is not None else None,
        client_id=ctx.client_id or "", client_host=f"/{ctx.client_host}")


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
                                  lambda shard, now: shard.share.heartbeat(request, now))
        except NotReady as exc:
            resp = HeartbeatResponse(exc.code)
        return to_response(resp)  # the same shape as ConsumerGroupHeartbeat's answer

    def handle_describe(ctx: RequestContext, req: Any) -> dict:
        include = bool(getattr(req, "include_authorized_operations", False))
        out = []
        for group_id in req.group_ids:
            if broker.access.denies(ctx, A.DESCRIBE, A.GROUP, group_id):
                out.append(describe_error(group_id, GROUP_AUTHORIZATION_FAILED, None))
                continue
            try:
                entry, = groups().read(
                    group_id, lambda shard, g=group_id: shard.share.describe([g], include))
            except NotReady as exc:
                entry = describe_error(group_id, exc.code, None)
            out.append(entry)
        return {"throttle_time": 0, "groups": out}

    dispatcher.register(76, 1, 1, handle_heartbeat)
    dispatcher.register(77, 1, 1, handle_describe)
