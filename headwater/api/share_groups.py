"""ShareGroupHeartbeat (76) and ShareGroupDescribe (77), v1: KIP-932 share groups.

The handlers translate kio requests into `ShareHeartbeatRequest`s for the group's shard
(`headwater.group.share`) and its answers back into responses (modern_groups.py, which
consumer groups use too). Only v1 exists: Kafka 4.1 removed the early-access v0, and
librdkafka 2.16 sends v1 only.
"""

from __future__ import annotations

from typing import Any

from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest

from ..group.share.operations import ShareHeartbeatRequest
from ..wire.dispatch import Dispatcher, RequestContext
from .modern_groups import Services, register_group_apis


def to_request(ctx: RequestContext, req: Any) -> ShareHeartbeatRequest:
    names = req.subscribed_topic_names
    return ShareHeartbeatRequest(
        group_id=req.group_id, member_id=req.member_id, member_epoch=int(req.member_epoch),
        rack_id=req.rack_id, subscribed_topic_names=tuple(names) if names is not None else None,
        client_id=ctx.client_id or "", client_host=f"/{ctx.client_host}")


def register(dispatcher: Dispatcher, broker: Services) -> None:
    register_group_apis(dispatcher, broker, lambda shard: shard.share, to_request,
                        heartbeat=(76, 1, 1), describe=(77, 1, 1),
                        classes=(ShareGroupHeartbeatRequest, ShareGroupDescribeRequest))
