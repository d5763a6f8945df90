"""ListGroups (16), DescribeGroups (15) and DeleteGroups (42) across all shards.

Share groups: DescribeGroups v6+ answers GROUP_ID_NOT_FOUND ("not a classic group"),
older versions Dead with no error (Kafka 4.3); deleting one (it must be Empty) also
deletes its share-partition state from the share coordinator.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..coordinator.runtime import NotReady
from ..wire.dispatch import Dispatcher, RequestContext

if TYPE_CHECKING:
    from ..broker import Broker

COORDINATOR_LOAD_IN_PROGRESS = 14
GROUP_ID_NOT_FOUND = 69
log = logging.getLogger("headwater.group")


def register(dispatcher: Dispatcher, broker: Broker) -> None:
    def groups():
        assert broker.groups is not None
        return broker.groups

    def handle_list(ctx: RequestContext, req: Any) -> dict:
        states = {s.lower() for s in getattr(req, "states_filter", ()) or ()}
        types = {t.lower() for t in getattr(req, "types_filter", ()) or ()}
        error = 0 if groups().runtime.is_loaded() else COORDINATOR_LOAD_IN_PROGRESS
        listed = []
        for shard in groups().loaded_shards():
            listed += shard.list_groups(states or None, types or None)
        return {"throttle_time": 0, "error_code": error, "groups": listed}

    def handle_describe(ctx: RequestContext, req: Any) -> dict:
        out = []
        for group_id in req.groups:
            try:
                entry = groups().read(group_id, lambda s, g=group_id: s.describe_group(g))
            except NotReady as exc:
                entry = {"error_code": exc.code, "group_id": group_id, "group_state": "",
                         "protocol_type": "", "protocol_data": "", "members": ()}
            if entry.get("error_code") == GROUP_ID_NOT_FOUND and ctx.api_version < 6:
                entry = {**entry, "error_code": 0, "error_message": None}
            if not getattr(req, "include_authorized_operations", False):
                entry = {**entry, "authorized_operations": -2147483648}
            out.append(entry)
        return {"throttle_time": 0, "groups": out}

    async def handle_delete(ctx: RequestContext, req: Any) -> dict:
        results = []
        for group_id in req.groups_names:
            try:
                state = groups().read(group_id,
                                      lambda s, g=group_id: s.share.state_partitions(g))
                code = groups().write(group_id, lambda s, now, g=group_id: s.delete_group(g))
            except NotReady as exc:
                state, code = {}, exc.code
            if code == 0 and state:
                await delete_share_state(group_id, state)
            results.append({"group_id": group_id, "error_code": code})
        return {"throttle_time": 0, "results": results}

    async def delete_share_state(group_id: str, state: dict) -> None:
        coordinator = broker.share_coordinator
        if coordinator is None:
            return
        for topic_id, partitions in state.items():
            for partition in partitions:
                err = await coordinator.delete(group_id, topic_id, partition)
                if err:
                    log.warning("deleting share state of %s %s-%d failed: %d", group_id,
                                topic_id, partition, err)

    dispatcher.register(16, 0, 5, handle_list)
    dispatcher.register(15, 0, 6, handle_describe)
    dispatcher.register(42, 0, 2, handle_delete)
