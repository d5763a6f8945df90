"""What the KIP-848 and KIP-932 group APIs answer alike: the heartbeat (ConsumerGroup /
ShareGroupHeartbeat) and describe (ConsumerGroup / ShareGroupDescribe) handlers.

Each kind turns its kio request into its own heartbeat request (`to_request`); the
rest is one path: the ACL check (READ on the group, DESCRIBE on every subscribed
topic, as Kafka checks), the write to the group's shard, the answer (both heartbeats
answer with the same fields), and the describe loop, where a group the principal may
not describe or whose shard is still loading gets an error entry.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode as E

from ..coordinator.runtime import NotReady
from ..group.modern.operations import HeartbeatResponse, ModernHeartbeatRequest, describe_error
from ..security import acl as A
from ..storage.errors import LogError
from ..wire.dispatch import Dispatcher, RequestContext, typed
from .services import HasAccess, HasGroups

if TYPE_CHECKING:
    from ..group.coordinator import GroupCoordinator
    from ..group.modern.operations import ModernGroupManager
    from ..group.shard import GroupShard


class Services(HasAccess, HasGroups, Protocol):
    """What these handlers use of the broker."""


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


def heartbeat_refused(broker: Services, ctx: RequestContext, group_id: str,
                      topics: Any) -> dict[str, Any] | None:
    """The answer to a Consumer/ShareGroupHeartbeat the principal may not send (READ on
    the group, DESCRIBE on every subscribed topic, as Kafka checks), else None."""
    access = broker.access
    if not access.enabled:
        return None
    code = None
    if not access.allowed(ctx, A.READ, A.GROUP, group_id):
        code, message = E.group_authorization_failed, "Group authorization failed."
    elif any(not access.allowed(ctx, A.DESCRIBE, A.TOPIC, t) for t in topics or ()):
        code, message = E.topic_authorization_failed, "Topic authorization failed."
    if code is None:
        return None
    return {"throttle_time": 0, "error_code": code, "error_message": message,
            "member_id": None, "member_epoch": 0, "heartbeat_interval": 0,
            "assignment": None}


def register_group_apis(dispatcher: Dispatcher, broker: Services,
                        manager: Callable[[GroupShard], ModernGroupManager[Any, Any]],
                        to_request: Callable[[RequestContext, Any], ModernHeartbeatRequest],
                        heartbeat: tuple[int, int, int], describe: tuple[int, int, int],
                        classes: tuple[type, type]) -> None:
    """Register one kind's heartbeat and describe APIs, each as (api key, min version,
    max version); `manager` picks the kind's manager on a shard; `classes` are the kind's
    newest heartbeat and describe request classes, every version read as them."""

    def groups() -> GroupCoordinator:
        return broker.groups

    async def handle_heartbeat(ctx: RequestContext, req: Any) -> dict[str, Any]:
        refused = heartbeat_refused(broker, ctx, req.group_id, req.subscribed_topic_names)
        if refused is not None:
            return refused
        request = to_request(ctx, req)
        try:  # answered once the member's records are committed
            resp = await groups().write_committed(
                request.group_id, lambda shard, now: manager(shard).heartbeat(request, now))
        except NotReady as exc:
            resp = HeartbeatResponse(exc.code)
        except LogError:  # not committed: the client finds the coordinator again
            resp = HeartbeatResponse(E.not_coordinator)
        return to_response(resp)

    async def handle_describe(ctx: RequestContext, req: Any) -> dict[str, Any]:
        include = bool(req.include_authorized_operations)
        out = []
        for group_id in req.group_ids:
            if broker.access.denies(ctx, A.DESCRIBE, A.GROUP, group_id):
                out.append(describe_error(group_id, E.group_authorization_failed, None))
                continue
            try:  # answered once what it read is committed
                entry, = await groups().read_committed(
                    group_id, functools.partial(_describe_one, manager, group_id, include))
            except NotReady as exc:
                entry = describe_error(group_id, exc.code, None)
            except LogError:
                entry = describe_error(group_id, E.not_coordinator, None)
            out.append(entry)
        return {"throttle_time": 0, "groups": out}

    heartbeat_class, describe_class = classes
    dispatcher.register(*heartbeat, typed(heartbeat_class, handle_heartbeat))
    dispatcher.register(*describe, typed(describe_class, handle_describe))


def _describe_one(manager: Callable[[GroupShard], ModernGroupManager[Any, Any]], group_id: str,
                  include: bool, shard: GroupShard) -> Any:
    return manager(shard).describe([group_id], include)
