"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69): KIP-848 consumer groups.

The handlers translate kio requests into `HeartbeatRequest`s for the group's shard
(`headwater.group.consumer`) and its answers back into responses (modern_groups.py,
which share groups use too). A group id the coordinator does not serve yet (loading)
gets COORDINATOR_LOAD_IN_PROGRESS, which clients retry.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest

from ..group.consumer.operations import HeartbeatRequest
from ..group.modern.assignment import freeze
from ..wire.dispatch import Dispatcher, RequestContext
from .modern_groups import Services, register_group_apis

_MS = datetime.timedelta(milliseconds=1)


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
        subscribed_topic_regex=req.subscribed_topic_regex,
        server_assignor=req.server_assignor, owned=owned, api_version=ctx.api_version,
        client_id=ctx.client_id or "", client_host=f"/{ctx.client_host}")


def register(dispatcher: Dispatcher, broker: Services) -> None:
    register_group_apis(dispatcher, broker, lambda shard: shard.consumer, to_request,
                        heartbeat=(68, 0, 1), describe=(69, 0, 1),
                        classes=(ConsumerGroupHeartbeatRequest, ConsumerGroupDescribeRequest))
