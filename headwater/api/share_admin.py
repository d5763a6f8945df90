"""DescribeShareGroupOffsets (90, v0-v1), AlterShareGroupOffsets (91, v0) and
DeleteShareGroupOffsets (92, v0): authorize, then call the share admin
(`share/admin.py`), which also serves DeleteGroups' share-group path.
"""

from __future__ import annotations

from typing import Any, Protocol

from kio.schema.errors import ErrorCode as E

from ..security import acl as ACL
from ..wire.dispatch import Dispatcher, RequestContext
from .services import HasAccess, HasShareGroups


class Services(HasAccess, HasShareGroups, Protocol):
    """What these handlers use of the broker."""


class _Handlers:
    """The handlers of this module, over the services they use."""

    def __init__(self, broker: Services) -> None:
        self.broker = broker
        self.admin = broker.share_admin

    async def handle_describe(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        out = []
        for group in req.groups:
            if self.broker.access.denies(ctx, ACL.DESCRIBE, ACL.GROUP, group.group_id):
                out.append({"group_id": group.group_id, "topics": [],
                            "error_code": E.group_authorization_failed,
                            "error_message": "Group authorization failed."})
                continue
            topics = None if group.topics is None else \
                [(t.topic_name, list(t.partitions)) for t in group.topics]
            out.append(await self.admin.describe(group.group_id, topics, ctx.api_version))
        return {"throttle_time": 0, "groups": out}

    def refused(self, ctx: RequestContext, group_op: int, group_id: str,
                names: list[str]) -> dict[str, Any] | None:
        """As Kafka: `group_op` on the group, READ on every topic named."""
        if self.broker.access.denies(ctx, group_op, ACL.GROUP, group_id):
            code, message = E.group_authorization_failed, "Group authorization failed."
        elif any(self.broker.access.denies(ctx, ACL.READ, ACL.TOPIC, n) for n in names):
            code, message = E.topic_authorization_failed, "Topic authorization failed."
        else:
            return None
        return {"throttle_time": 0, "error_code": code, "error_message": message,
                "responses": []}

    async def handle_alter(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        denied = self.refused(ctx, ACL.READ, req.group_id, [t.topic_name for t in req.topics])
        if denied is not None:
            return denied
        topics = [(t.topic_name, [(p.partition_index, p.start_offset) for p in t.partitions])
                  for t in req.topics]
        code, message, rows = await self.admin.alter(req.group_id, topics)
        return {"throttle_time": 0, "error_code": code, "error_message": message,
                "responses": [{"topic_name": r.name, "topic_id": r.topic_id, "partitions": [
                    {"partition_index": p, "error_code": c, "error_message": m}
                    for p, (c, m) in r.partitions.items()]} for r in rows]}

    async def handle_delete(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        denied = self.refused(ctx, ACL.DELETE, req.group_id, [t.topic_name for t in req.topics])
        if denied is not None:
            return denied
        code, message, rows = await self.admin.delete_offsets(
            req.group_id, [t.topic_name for t in req.topics])
        return {"throttle_time": 0, "error_code": code, "error_message": message,
                "responses": [{"topic_name": r.name, "topic_id": r.topic_id,
                               "error_code": r.error_code, "error_message": r.error_message}
                              for r in rows]}


def register(dispatcher: Dispatcher, broker: Services) -> None:
    handlers = _Handlers(broker)
    dispatcher.register(90, 0, 1, handlers.handle_describe)
    dispatcher.register(91, 0, 0, handlers.handle_alter)
    dispatcher.register(92, 0, 0, handlers.handle_delete)
