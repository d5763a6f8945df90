"""ListGroups (16), DescribeGroups (15) and DeleteGroups (42) across all shards.

Share groups: DescribeGroups v6+ answers GROUP_ID_NOT_FOUND ("not a classic group"),
older versions Dead with no error (Kafka 4.3); deleting one (it must be Empty) also
deletes its share-partition state from the share coordinator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.describe_groups.v6.request import DescribeGroupsRequest
from kio.schema.errors import ErrorCode as E
from kio.schema.list_groups.v5.request import ListGroupsRequest

from ..coordinator.runtime import NotReady
from ..security import acl as A
from ..storage.errors import LogError
from ..wire.dispatch import Dispatcher, RequestContext, typed
from .services import HasAccess, HasGroups, HasShareGroups

if TYPE_CHECKING:
    from ..coordinator.runtime import Result
    from ..group.coordinator import GroupCoordinator
    from ..group.shard import GroupShard


class Services(HasAccess, HasGroups, HasShareGroups, Protocol):
    """What these handlers use of the broker."""


class _Handlers:
    """The handlers of this module, over the services they use."""

    def __init__(self, broker: Services) -> None:
        self.broker = broker

    def groups(self) -> GroupCoordinator:
        return self.broker.groups

    async def handle_list(self, ctx: RequestContext, req: ListGroupsRequest
                          ) -> dict[str, Any]:
        states = {s.lower() for s in req.states_filter}
        types = {t.lower() for t in req.types_filter}
        error = 0 if self.groups().runtime.is_loaded() else E.coordinator_load_in_progress
        listed = []
        for shard in self.groups().loaded_shards():
            listed += shard.list_groups(states or None, types or None)
        pending = self.groups().runtime.settled()  # what it listed, committed
        if pending is not None:
            try:
                await pending
            except LogError:
                error, listed = E.not_coordinator, []
        access = self.broker.access
        if access.enabled and not access.allowed(ctx, A.DESCRIBE, A.CLUSTER, A.CLUSTER_NAME):
            # As Kafka: without DESCRIBE on the cluster, the groups one may describe.
            listed = [g for g in listed if access.allowed(ctx, A.DESCRIBE, A.GROUP,
                                                          g["group_id"])]
        return {"throttle_time": 0, "error_code": error, "groups": listed}

    async def handle_describe(self, ctx: RequestContext, req: DescribeGroupsRequest
                              ) -> dict[str, Any]:
        out = []
        for group_id in req.groups:
            if self.broker.access.denies(ctx, A.DESCRIBE, A.GROUP, group_id):
                out.append({"error_code": E.group_authorization_failed, "group_id": group_id,
                            "group_state": "", "protocol_type": "", "protocol_data": "",
                            "members": (), "authorized_operations": -2147483648})
                continue
            try:
                def describe(shard: GroupShard, g: str = group_id) -> Any:
                    return shard.describe_group(g)
                entry = await self.groups().read_committed(group_id, describe)
            except (NotReady, LogError) as exc:
                code = exc.code if isinstance(exc, NotReady) else E.not_coordinator
                entry = {"error_code": code, "group_id": group_id, "group_state": "",
                         "protocol_type": "", "protocol_data": "", "members": ()}
            if entry.get("error_code") == E.group_id_not_found and ctx.api_version < 6:
                entry = {**entry, "error_code": 0, "error_message": None}
            if not req.include_authorized_operations:
                entry = {**entry, "authorized_operations": -2147483648}
            else:
                entry = {**entry, "authorized_operations": self.broker.access.operations(
                    ctx, A.GROUP, group_id)}
            out.append(entry)
        return {"throttle_time": 0, "groups": out}

    async def handle_delete(self, ctx: RequestContext, req: Any) -> dict[str, Any]:
        results = []
        share_admin = self.broker.share_admin
        for group_id in req.groups_names:
            if self.broker.access.denies(ctx, A.DELETE, A.GROUP, group_id):
                results.append({"group_id": group_id, "error_code": E.group_authorization_failed})
                continue
            if not group_id:  # Kafka: an empty id names no group (not INVALID_GROUP_ID)
                results.append({"group_id": group_id, "error_code": E.group_id_not_found})
                continue
            try:
                # A share group: pending-deletion record, state tombstones, then the
                # group's tombstones below (KIP-932; api/share_admin.py).
                code = await share_admin.delete_group(group_id) if group_id else None
                if not code:
                    def delete(shard: GroupShard, _now: int, g: str = group_id) -> Result:
                        return shard.delete_group(g)
                    code = await self.groups().write_committed(group_id, delete)
            except NotReady as exc:
                code = exc.code
            except LogError:  # not committed: the client finds the coordinator again
                code = E.not_coordinator
            results.append({"group_id": group_id, "error_code": code})
        return {"throttle_time": 0, "results": results}


def register(dispatcher: Dispatcher, broker: Services) -> None:
    handlers = _Handlers(broker)

    dispatcher.register(16, 0, 5, typed(ListGroupsRequest, handlers.handle_list))
    dispatcher.register(15, 0, 6, typed(DescribeGroupsRequest, handlers.handle_describe))
    # v3 (Kafka 4.4) adds a per-group error message, which Kafka leaves null for these
    # errors (schema in wire/schemas.py)
    dispatcher.register(42, 0, 3, handlers.handle_delete)
